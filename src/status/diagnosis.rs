//! What a job's status says, per communicator: its ranks and hosts, how far each got, which
//! ranks are behind or did not answer, which are stuck and on what (channel, peer, for how
//! long), what the late ones last did, and the links that made operations wait longest. The
//! hang report of a timed-out collective and `rnccl status` both say this.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use serde::Serialize;

use super::client::JobStatus;
use super::wire::{CommStatus, LinkStatus, StatusPeer};
use crate::stats::{Direction, OpRecord};

/// Links listed as the slowest.
const SLOWEST: usize = 5;

/// What is known of one rank.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum RankState {
    /// Its process answered with this rank's status.
    Answered(CommStatus),
    /// Its process did not answer (the reason), or has no status service.
    NoAnswer(String),
    /// Its process answered but no longer has this communicator (destroyed, or it exited and
    /// another process took its address).
    Left,
}

/// One rank of a communicator.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankView {
    /// The rank.
    pub rank: usize,
    /// Where it runs, as its peers know it.
    pub peer: Option<StatusPeer>,
    /// What it says.
    pub state: RankState,
}

/// A rank with an operation in flight.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stuck {
    /// The rank.
    pub rank: usize,
    /// The operation's sequence number.
    pub seq: u64,
    /// Seconds it has run.
    pub elapsed_s: f64,
    /// The links it waits on now: (link, seconds waited so far).
    pub waits: Vec<LinkStatus>,
}

/// One communicator of a job.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommDiagnosis {
    /// The communicator's id.
    pub comm_id: u64,
    /// Its ranks.
    pub nranks: usize,
    /// Hosts its ranks run on, sorted.
    pub hosts: Vec<String>,
    /// Every rank, in order.
    pub ranks: Vec<RankView>,
    /// The highest operation sequence number any rank started.
    pub max_started: u64,
    /// When some rank is stuck: ranks that answered and started fewer operations than
    /// `max_started` (otherwise empty: ranks run a little apart all the time).
    pub behind: Vec<usize>,
    /// Ranks that did not answer or left.
    pub unresponsive: Vec<usize>,
    /// Ranks with an operation in flight for the stuck threshold or longer.
    pub stuck: Vec<Stuck>,
    /// The links operations waited on longest: (rank, link).
    pub slowest_links: Vec<(usize, LinkStatus)>,
}

/// Every communicator of `job`, by id; an operation in flight for `stuck_after_s` seconds or
/// more makes its rank stuck.
pub fn diagnose(job: &JobStatus, stuck_after_s: f64) -> Vec<CommDiagnosis> {
    let mut comms: BTreeMap<u64, Vec<CommStatus>> = BTreeMap::new();
    let mut answered: BTreeMap<SocketAddr, bool> = BTreeMap::new();
    let mut failed: BTreeMap<SocketAddr, String> = BTreeMap::new();
    for (addr, r) in &job.processes {
        match r {
            Ok(p) => {
                answered.insert(*addr, true);
                for c in &p.comms {
                    comms.entry(c.comm_id).or_default().push(c.clone());
                }
            }
            Err(e) => {
                failed.insert(*addr, e.to_string());
            }
        }
    }
    comms
        .into_iter()
        .map(|(comm_id, ranks)| one(comm_id, ranks, &answered, &failed, stuck_after_s))
        .collect()
}

fn one(
    comm_id: u64,
    mine: Vec<CommStatus>,
    answered: &BTreeMap<SocketAddr, bool>,
    failed: &BTreeMap<SocketAddr, String>,
    stuck_after_s: f64,
) -> CommDiagnosis {
    let nranks = mine.iter().map(|c| c.nranks).max().unwrap_or(0);
    let peers: Vec<StatusPeer> = mine
        .iter()
        .map(|c| &c.peers)
        .max_by_key(|p| p.len())
        .cloned()
        .unwrap_or_default();
    let mut by_rank: BTreeMap<usize, CommStatus> = mine.into_iter().map(|c| (c.rank, c)).collect();
    let ranks: Vec<RankView> = (0..nranks)
        .map(|r| {
            let peer = peers.iter().find(|p| p.rank == r).cloned();
            let state = match by_rank.remove(&r) {
                Some(c) => RankState::Answered(c),
                None => match peer.as_ref().and_then(|p| p.status) {
                    Some(a) if answered.contains_key(&a) => RankState::Left,
                    Some(a) => RankState::NoAnswer(
                        failed
                            .get(&a)
                            .cloned()
                            .unwrap_or_else(|| format!("{a} was not asked")),
                    ),
                    None => RankState::NoAnswer("it runs no status service".into()),
                },
            };
            RankView {
                rank: r,
                peer,
                state,
            }
        })
        .collect();
    let answers = || {
        ranks.iter().filter_map(|v| match &v.state {
            RankState::Answered(c) => Some((v.rank, c)),
            _ => None,
        })
    };
    let max_started = answers().map(|(_, c)| c.ops_started).max().unwrap_or(0);
    let unresponsive = ranks
        .iter()
        .filter(|v| !matches!(v.state, RankState::Answered(_)))
        .map(|v| v.rank)
        .collect();
    let stuck: Vec<Stuck> = answers()
        .filter_map(|(r, c)| {
            let op = c.op.as_ref().filter(|o| o.elapsed_s >= stuck_after_s)?;
            let mut waits: Vec<LinkStatus> = c
                .links
                .iter()
                .filter(|l| l.stalled_s > 0.0)
                .cloned()
                .collect();
            waits.sort_by(|a, b| b.stalled_s.total_cmp(&a.stalled_s));
            Some(Stuck {
                rank: r,
                seq: op.seq,
                elapsed_s: op.elapsed_s,
                waits,
            })
        })
        .collect();
    // Ranks run a little apart all the time; being behind matters once some rank is stuck.
    let behind = if stuck.is_empty() {
        Vec::new()
    } else {
        answers()
            .filter(|(_, c)| c.ops_started < max_started)
            .map(|(r, _)| r)
            .collect()
    };
    let mut slowest_links: Vec<(usize, LinkStatus)> = answers()
        .flat_map(|(r, c)| c.links.iter().map(move |l| (r, l.clone())))
        .filter(|(_, l)| l.wait_s > 0.0)
        .collect();
    slowest_links.sort_by(|a, b| b.1.wait_s.total_cmp(&a.1.wait_s));
    slowest_links.truncate(SLOWEST);
    let mut hosts: Vec<String> = peers.iter().map(|p| p.host.clone()).collect();
    hosts.sort();
    hosts.dedup();
    CommDiagnosis {
        comm_id,
        nranks,
        hosts,
        ranks,
        max_started,
        behind,
        unresponsive,
        stuck,
        slowest_links,
    }
}

/// "rank 3 (host b, pid 812)".
pub fn describe(v: &RankView) -> String {
    match &v.peer {
        Some(p) => format!("rank {} (host {}, pid {})", v.rank, p.host, p.pid),
        None => format!("rank {}", v.rank),
    }
}

/// The links a rank waits on, each peer and direction once with its channels: "waits for data
/// from rank 3 on channels 0, 1 for 12.0 s (NET/Socket) and for room to send to rank 1 on
/// channel 0 for 11.9 s (SHM/direct/direct)".
pub fn waits_text(waits: &[LinkStatus]) -> String {
    let mut groups: Vec<(Direction, usize, Vec<u16>, f64, &'static str)> = Vec::new();
    for l in waits {
        match groups
            .iter_mut()
            .find(|g| g.0 == l.direction && g.1 == l.peer)
        {
            Some(g) => {
                g.2.push(l.channel);
                g.3 = g.3.max(l.stalled_s);
            }
            None => groups.push((
                l.direction,
                l.peer,
                vec![l.channel],
                l.stalled_s,
                l.transport.nccl_name(),
            )),
        }
    }
    let parts: Vec<String> = groups
        .into_iter()
        .map(|(dir, peer, mut channels, secs, via)| {
            channels.sort_unstable();
            let what = match dir {
                Direction::Recv => "for data from",
                Direction::Send => "for room to send to",
                Direction::Read => "to read the window of",
            };
            let list: Vec<String> = channels.iter().map(u16::to_string).collect();
            format!(
                "{what} rank {peer} on channel{} {} for {secs:.1} s ({via})",
                if channels.len() == 1 { "" } else { "s" },
                list.join(", ")
            )
        })
        .collect();
    format!("waits {}", parts.join(" and "))
}

/// "AllReduce #11 (262144 × float32)", as error messages name operations.
pub fn op_text(o: &OpRecord) -> String {
    format!(
        "{} #{} ({} × {})",
        o.func.nccl_name(),
        o.seq,
        o.count,
        o.dtype
    )
}

impl CommDiagnosis {
    /// Whether anything is wrong: a rank stuck, or not answering.
    pub fn troubled(&self) -> bool {
        !self.unresponsive.is_empty() || !self.stuck.is_empty()
    }

    /// What is wrong, in sentences (empty when nothing is): ranks stuck in operation N and on
    /// what, ranks that have not reached it and what they last did, ranks that did not answer.
    /// `now_unix_ns` dates the late ranks' last operations.
    pub fn findings(&self, now_unix_ns: u64) -> Vec<String> {
        let mut out = Vec::new();
        let view = |r: usize| &self.ranks[r];
        if let Some(n) = self.stuck.iter().map(|s| s.seq).max() {
            let at_n: Vec<&Stuck> = self.stuck.iter().filter(|s| s.seq == n).collect();
            let op = at_n
                .first()
                .and_then(|s| match &view(s.rank).state {
                    RankState::Answered(c) => c.history.iter().rev().find(|o| o.seq == n),
                    _ => None,
                })
                .map_or_else(|| format!("#{n}"), op_text);
            let started: Vec<String> = at_n.iter().map(|s| s.rank.to_string()).collect();
            out.push(format!(
                "operation {op} is in flight on rank{} {} (longest {:.1} s)",
                if started.len() == 1 { "" } else { "s" },
                started.join(", "),
                at_n.iter().map(|s| s.elapsed_s).fold(0.0, f64::max)
            ));
            for r in self.ranks.iter().filter_map(|v| match &v.state {
                RankState::Answered(c) if c.ops_started < n => Some((v, c)),
                _ => None,
            }) {
                let (v, c) = r;
                out.push(format!(
                    "{} has not reached it: {}",
                    describe(v),
                    last_did(c, now_unix_ns)
                ));
            }
        } else if !self.behind.is_empty() {
            for &r in &self.behind {
                if let RankState::Answered(c) = &view(r).state {
                    out.push(format!(
                        "{} is {} operation(s) behind: {}",
                        describe(view(r)),
                        self.max_started - c.ops_started,
                        last_did(c, now_unix_ns)
                    ));
                }
            }
        }
        out.extend(self.stalled_links());
        for s in self.stuck.iter().filter(|s| !s.waits.is_empty()) {
            out.push(format!(
                "{} {}",
                describe(view(s.rank)),
                waits_text(&s.waits)
            ));
        }
        for &r in &self.unresponsive {
            let why = match &view(r).state {
                RankState::NoAnswer(why) => format!("did not answer: {why}"),
                _ => "no longer has this communicator (destroyed, or its process exited)".into(),
            };
            out.push(format!("{} {why}", describe(view(r))));
        }
        out
    }
}

impl CommDiagnosis {
    /// Links that carry nothing: a stuck rank waits for data from a peer that has sent it more
    /// than it received on that channel — the bytes sit between them (in the peer's FIFO slots,
    /// its socket, or the network), so the transport or the network between the two is
    /// stalled, not a rank. (Senders count a slot when they post it, receivers when they
    /// consume it.)
    fn stalled_links(&self) -> Vec<String> {
        let bytes = |rank: usize, peer: usize, channel: u16, dir: Direction| -> Option<u64> {
            match &self.ranks.get(rank)?.state {
                RankState::Answered(c) => Some(
                    c.links
                        .iter()
                        .filter(|l| l.peer == peer && l.channel == channel && l.direction == dir)
                        .map(|l| l.bytes)
                        .sum(),
                ),
                _ => None,
            }
        };
        /// One direction of one pair of ranks: its stalled channels, the bytes held between
        /// the two, the longest wait (s) and the transport.
        struct Held {
            channels: Vec<u16>,
            bytes: u64,
            waited_s: f64,
            via: &'static str,
        }
        let mut found: BTreeMap<(usize, usize), Held> = BTreeMap::new();
        for r in &self.stuck {
            for w in r.waits.iter().filter(|w| w.direction == Direction::Recv) {
                let sent = bytes(w.peer, r.rank, w.channel, Direction::Send);
                let got = bytes(r.rank, w.peer, w.channel, Direction::Recv);
                let (Some(sent), Some(got)) = (sent, got) else {
                    continue;
                };
                if sent > got {
                    let e = found.entry((w.peer, r.rank)).or_insert(Held {
                        channels: Vec::new(),
                        bytes: 0,
                        waited_s: 0.0,
                        via: w.transport.nccl_name(),
                    });
                    e.channels.push(w.channel);
                    e.bytes += sent - got;
                    e.waited_s = e.waited_s.max(w.stalled_s);
                }
            }
        }
        found
            .into_iter()
            .map(|((from, to), mut h)| {
                h.channels.sort_unstable();
                let list: Vec<String> = h.channels.iter().map(u16::to_string).collect();
                format!(
                    "the link from {} to {} carries nothing on channel{} {} ({}): {} bytes \
                     sent are not received while the receiver has waited {:.1} s for them; \
                     look at the transport or the network between their hosts",
                    describe(&self.ranks[from]),
                    describe(&self.ranks[to]),
                    if h.channels.len() == 1 { "" } else { "s" },
                    list.join(", "),
                    h.via,
                    h.bytes,
                    h.waited_s
                )
            })
            .collect()
    }
}

/// What a rank last did: its operation in flight, or its last operation and when it ended.
fn last_did(c: &CommStatus, now_unix_ns: u64) -> String {
    if let Some(op) = &c.op {
        return format!(
            "it runs {} #{} for {:.1} s",
            op.func.nccl_name(),
            op.seq,
            op.elapsed_s
        );
    }
    match c.history.last() {
        None => "it has run no operation".into(),
        Some(o) => match o.ended_unix_ns {
            Some(end) => format!(
                "its last operation, {}, {} {:.1} s ago, and it runs nothing now (is it calling \
                 the collective?)",
                op_text(o),
                if o.failed { "failed" } else { "finished" },
                now_unix_ns.saturating_sub(end) as f64 / 1e9
            ),
            None => format!("its last operation is {}", op_text(o)),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DataType;
    use crate::func::Func;
    use crate::stats::Path;
    use crate::status::client::StatusError;
    use crate::status::wire::{OpNow, ProcessStatus, VERSION};

    const NOW: u64 = 1_000_000_000_000;

    fn addr(r: usize) -> SocketAddr {
        format!("10.0.0.{}:4000", r + 1).parse().unwrap()
    }

    fn peers(n: usize) -> Vec<StatusPeer> {
        (0..n)
            .map(|r| StatusPeer {
                rank: r,
                host: format!("h{}", r / 2),
                pid: 100 + r as u32,
                status: Some(addr(r)),
            })
            .collect()
    }

    fn record(seq: u64, ended_s_ago: Option<f64>) -> OpRecord {
        OpRecord {
            seq,
            func: Func::AllReduce,
            count: 1024,
            dtype: DataType::Float32,
            started_unix_ns: NOW - 20_000_000_000,
            ended_unix_ns: ended_s_ago.map(|s| NOW - (s * 1e9) as u64),
            failed: false,
        }
    }

    /// Rank `r` of 4: in operation `seq` for `elapsed_s` (None: idle after `seq`), waiting on
    /// `waits` (peer, direction).
    fn rank(
        r: usize,
        seq: u64,
        elapsed_s: Option<f64>,
        waits: &[(usize, Direction)],
    ) -> ProcessStatus {
        let links = waits
            .iter()
            .flat_map(|&(peer, direction)| {
                (0..2).map(move |channel| LinkStatus {
                    peer,
                    channel,
                    direction,
                    transport: Path::Tcp,
                    bytes: 1 << 20,
                    wait_s: 7.5,
                    stalled_s: 6.0,
                })
            })
            .collect();
        let mut history = vec![record(seq - 1, Some(10.0))];
        history.push(record(seq, elapsed_s.is_none().then_some(6.5)));
        ProcessStatus {
            version: VERSION,
            pid: 100 + r as u32,
            host: format!("h{}", r / 2),
            comms: vec![CommStatus {
                comm_id: 0xc0ffee,
                rank: r,
                nranks: 4,
                device: None,
                ops_started: seq,
                ops_completed: seq - u64::from(elapsed_s.is_some()),
                op: elapsed_s.map(|e| OpNow {
                    seq,
                    func: Func::AllReduce,
                    count: 1024,
                    dtype: DataType::Float32,
                    algo: "Ring".into(),
                    elapsed_s: e,
                    steps_total: 10,
                    steps_done: 3,
                }),
                links,
                history,
                peers: peers(4),
            }],
        }
    }

    #[test]
    fn a_skipped_collective_names_the_late_rank_and_what_the_others_wait_on() {
        let job = JobStatus {
            processes: vec![
                (addr(0), Ok(rank(0, 4, Some(6.0), &[(2, Direction::Recv)]))),
                (addr(1), Ok(rank(1, 4, Some(6.0), &[(0, Direction::Recv)]))),
                (addr(2), Ok(rank(2, 3, None, &[]))),
                (
                    addr(3),
                    Err(StatusError::Silent {
                        addr: addr(3),
                        after: std::time::Duration::from_secs(2),
                    }),
                ),
            ],
        };
        let d = &diagnose(&job, 5.0)[0];
        assert!(d.troubled());
        assert_eq!((d.nranks, d.max_started), (4, 4));
        assert_eq!(d.hosts, ["h0", "h1"]);
        assert_eq!(d.behind, [2]);
        assert_eq!(d.unresponsive, [3]);
        let f = d.findings(NOW);
        assert_eq!(
            f,
            [
                "operation AllReduce #4 (1024 × float32) is in flight on ranks 0, 1 (longest 6.0 s)",
                "rank 2 (host h1, pid 102) has not reached it: its last operation, AllReduce #3 \
                 (1024 × float32), finished 6.5 s ago, and it runs nothing now (is it calling the \
                 collective?)",
                "rank 0 (host h0, pid 100) waits for data from rank 2 on channels 0, 1 for 6.0 s \
                 (NET/Socket)",
                "rank 1 (host h0, pid 101) waits for data from rank 0 on channels 0, 1 for 6.0 s \
                 (NET/Socket)",
                "rank 3 (host h1, pid 103) did not answer: 10.0.0.4:4000 did not answer within 2s: \
                 its process is stopped or hung",
            ]
        );
        assert_eq!(d.slowest_links.len(), 4, "two ranks × two channels waited");
    }

    #[test]
    fn a_link_that_carries_nothing_is_named_with_both_ends() {
        let mut sender = rank(
            2,
            7,
            Some(8.0),
            &[(1, Direction::Recv), (0, Direction::Send)],
        );
        for l in &mut sender.comms[0].links {
            if l.direction == Direction::Send && l.channel == 1 {
                l.bytes += 4096;
            }
        }
        let job = JobStatus {
            processes: vec![
                (addr(0), Ok(rank(0, 7, Some(8.0), &[(2, Direction::Recv)]))),
                (
                    addr(1),
                    Ok(rank(
                        1,
                        7,
                        Some(8.0),
                        &[(0, Direction::Recv), (2, Direction::Send)],
                    )),
                ),
                (addr(2), Ok(sender)),
                (addr(3), Ok(rank(3, 7, Some(8.0), &[]))),
            ],
        };
        let d = &diagnose(&job, 5.0)[0];
        let f = d.findings(NOW);
        assert_eq!(
            f[1],
            "the link from rank 2 (host h1, pid 102) to rank 0 (host h0, pid 100) carries nothing \
             on channel 1 (NET/Socket): 4096 bytes sent are not received while the receiver has \
             waited 6.0 s for them; look at the transport or the network between their hosts",
            "{f:#?}"
        );
        assert_eq!(
            f.iter().filter(|l| l.contains("carries nothing")).count(),
            1,
            "links whose bytes all arrived are not named: {f:#?}"
        );
    }

    #[test]
    fn ranks_a_moment_apart_are_no_problem() {
        let job = JobStatus {
            processes: vec![
                (addr(0), Ok(rank(0, 9, Some(0.01), &[]))),
                (addr(1), Ok(rank(1, 8, Some(0.02), &[]))),
                (addr(2), Ok(rank(2, 9, Some(0.0), &[]))),
                (addr(3), Ok(rank(3, 9, None, &[]))),
            ],
        };
        let d = &diagnose(&job, 5.0)[0];
        assert!(!d.troubled(), "{d:?}");
        assert!(d.behind.is_empty() && d.findings(NOW).is_empty());
    }

    #[test]
    fn a_rank_that_left_is_told_apart_from_one_that_is_silent() {
        let mut gone = rank(1, 4, None, &[]);
        gone.comms.clear();
        let job = JobStatus {
            processes: vec![
                (addr(0), Ok(rank(0, 4, Some(9.0), &[]))),
                (addr(1), Ok(gone)),
            ],
        };
        let d = &diagnose(&job, 5.0)[0];
        assert!(matches!(d.ranks[1].state, RankState::Left));
        assert!(
            matches!(d.ranks[2].state, RankState::NoAnswer(ref w) if w.contains("was not asked"))
        );
        assert!(
            d.findings(NOW)
                .iter()
                .any(|f| f.starts_with("rank 1 (host h0, pid 101) no longer has this communicator")),
            "{:?}",
            d.findings(NOW)
        );
    }
}
