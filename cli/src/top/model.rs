//! What `rnccl top` shows, computed from two samples of the host's counter pages: jobs
//! (communicators) with per-rank, per-channel and per-peer rates, history and stuck links. No
//! terminal here: the collector fills it and the draw code reads it.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::{Duration, Instant};

use rnccl::stats::page::Found;
use rnccl::stats::{Direction, OpSnapshot, Path};

/// Points of throughput history kept per job (one per sample).
pub const HISTORY: usize = 120;

/// One communicator rank as shown.
#[derive(Debug, Clone, PartialEq)]
pub struct RankView {
    pub pid: u32,
    pub rank: usize,
    /// CUDA device ordinal, `None` for host memory.
    pub device: Option<usize>,
    pub op: Option<OpSnapshot>,
    pub ops_completed: u64,
    /// Per channel, bytes per second sent (or read from peers' windows) over the last interval.
    pub channels: BTreeMap<u16, f64>,
    /// Per peer and direction, bytes per second and the fraction of the interval spent
    /// waiting on it.
    pub peers: Vec<PeerRate>,
}

/// Traffic with one peer in one direction.
#[derive(Debug, Clone, PartialEq)]
pub struct PeerRate {
    pub peer: usize,
    pub direction: Direction,
    pub transport: Path,
    /// Bytes per second.
    pub rate: f64,
    /// Fraction of the interval (0..=1) operations stalled waiting on this peer.
    pub waiting: f64,
}

/// A link on which a rank has stalled for at least the stuck threshold.
#[derive(Debug, Clone, PartialEq)]
pub struct Stuck {
    pub rank: usize,
    pub pid: u32,
    pub channel: u16,
    pub peer: usize,
    pub direction: Direction,
    /// How long the stall has lasted.
    pub for_s: f64,
}

/// One communicator, all its ranks found on this host.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    pub comm_id: u64,
    pub nranks: usize,
    /// The ranks found, by rank.
    pub ranks: Vec<RankView>,
    /// Transports its links use.
    pub transports: Vec<Path>,
    /// Its bus bandwidth, bytes per second, oldest first (the last is now): see
    /// [`Job::busbw`].
    pub history: Vec<f64>,
    /// Links stalled past the threshold, longest first.
    pub stuck: Vec<Stuck>,
}

impl Job {
    /// Bytes per second each rank sent over the last interval, averaged over its ranks on
    /// this host: the job's bus bandwidth as nccl-tests defines it (doc/PERFORMANCE.md) while
    /// it runs collectives back to back, since a ring all_reduce rank sends 2(n-1)/n of the
    /// data per operation, an all_gather or reduce_scatter rank (n-1)/n of the total: exactly
    /// the bus bytes. Less when the job pauses between operations.
    pub fn busbw(&self) -> f64 {
        self.history.last().copied().unwrap_or(0.0)
    }

    /// The operation in flight on its lowest rank that has one.
    pub fn op(&self) -> Option<&OpSnapshot> {
        self.ranks.iter().find_map(|r| r.op.as_ref())
    }
}

/// Everything one sample shows.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Snapshot {
    pub jobs: Vec<Job>,
    /// Pages that could not be read: pid and why.
    pub unreadable: Vec<(u32, String)>,
    /// Pids whose pages are stale (the process is gone).
    pub stale: Vec<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct LinkId {
    pid: u32,
    comm_id: u64,
    rank: usize,
    peer: usize,
    channel: u16,
    index: u8,
    direction: Direction,
}

#[derive(Debug, Clone, Copy)]
struct Sample {
    bytes: u64,
    wait_ns: u64,
    at: Instant,
}

/// Turns successive page readings into [`Snapshot`]s: keeps each link's last counters (for
/// rates) and each job's history.
#[derive(Debug)]
pub struct Model {
    stuck_after: Duration,
    last: HashMap<LinkId, Sample>,
    history: HashMap<u64, VecDeque<f64>>,
}

impl Model {
    /// A model marking links stalled for `stuck_after` or longer as stuck.
    pub fn new(stuck_after: Duration) -> Model {
        Model {
            stuck_after,
            last: HashMap::new(),
            history: HashMap::new(),
        }
    }

    /// The snapshot for pages `found` read at `now`. Rates are over the time since a link was
    /// last seen; a link seen for the first time has rate 0.
    pub fn update(&mut self, found: &[Found], now: Instant) -> Snapshot {
        let mut snap = Snapshot::default();
        let mut jobs: BTreeMap<u64, Job> = BTreeMap::new();
        let mut seen: HashMap<LinkId, Sample> = HashMap::new();
        for f in found {
            if f.stale {
                snap.stale.push(f.pid);
                continue;
            }
            let page = match &f.page {
                Ok(p) => p,
                Err(e) => {
                    snap.unreadable.push((f.pid, e.to_string()));
                    continue;
                }
            };
            for c in &page.comms {
                let job = jobs.entry(c.comm_id).or_insert_with(|| Job {
                    comm_id: c.comm_id,
                    nranks: c.nranks,
                    ranks: Vec::new(),
                    transports: Vec::new(),
                    history: Vec::new(),
                    stuck: Vec::new(),
                });
                let mut view = RankView {
                    pid: page.pid,
                    rank: c.rank,
                    device: c.device,
                    op: c.op.clone(),
                    ops_completed: c.ops_completed,
                    channels: BTreeMap::new(),
                    peers: Vec::new(),
                };
                for l in c.links.iter().filter(|l| l.peer != c.rank) {
                    let id = LinkId {
                        pid: page.pid,
                        comm_id: c.comm_id,
                        rank: c.rank,
                        peer: l.peer,
                        channel: l.channel,
                        index: l.index,
                        direction: l.direction,
                    };
                    let (rate, waiting) = match self.last.get(&id) {
                        Some(p) if now > p.at => {
                            let dt = (now - p.at).as_secs_f64();
                            let rate = l.bytes.saturating_sub(p.bytes) as f64 / dt;
                            let w = l.wait_ns.saturating_sub(p.wait_ns) as f64 / 1e9 / dt;
                            (rate, w.min(1.0))
                        }
                        _ => (0.0, 0.0),
                    };
                    seen.insert(
                        id,
                        Sample {
                            bytes: l.bytes,
                            wait_ns: l.wait_ns,
                            at: now,
                        },
                    );
                    if l.direction != Direction::Recv {
                        *view.channels.entry(l.channel).or_default() += rate;
                    } else {
                        view.channels.entry(l.channel).or_default();
                    }
                    // One row per path: a peer reached two ways (a GPU FIFO and host memory)
                    // shows both, each with its own bytes.
                    match view.peers.iter_mut().find(|p| {
                        p.peer == l.peer && p.direction == l.direction && p.transport == l.transport
                    }) {
                        Some(p) => {
                            p.rate += rate;
                            p.waiting = p.waiting.max(waiting);
                        }
                        None => view.peers.push(PeerRate {
                            peer: l.peer,
                            direction: l.direction,
                            transport: l.transport,
                            rate,
                            waiting,
                        }),
                    }
                    if !job.transports.contains(&l.transport) {
                        job.transports.push(l.transport);
                    }
                    if l.stalled_ns >= self.stuck_after.as_nanos() as u64 {
                        job.stuck.push(Stuck {
                            rank: c.rank,
                            pid: page.pid,
                            channel: l.channel,
                            peer: l.peer,
                            direction: l.direction,
                            for_s: l.stalled_ns as f64 / 1e9,
                        });
                    }
                }
                view.peers.sort_by_key(|p| (p.peer, p.direction as u8));
                job.ranks.push(view);
            }
        }
        self.last = seen;
        for job in jobs.values_mut() {
            job.ranks.sort_by_key(|r| r.rank);
            job.stuck
                .sort_by(|a, b| b.for_s.total_cmp(&a.for_s).then(a.rank.cmp(&b.rank)));
            let sent: f64 = job.ranks.iter().flat_map(|r| r.channels.values()).sum();
            let busbw = sent / job.ranks.len().max(1) as f64;
            let h = self.history.entry(job.comm_id).or_default();
            if h.len() == HISTORY {
                h.pop_front();
            }
            h.push_back(busbw);
            job.history = h.iter().copied().collect();
        }
        self.history.retain(|id, _| jobs.contains_key(id));
        snap.jobs = jobs.into_values().collect();
        snap
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use rnccl::stats::page::{CommPage, Page};
    use rnccl::stats::{LinkSnapshot, OpInfo};
    use rnccl::{DataType, Func};

    pub(crate) fn link(
        peer: usize,
        channel: u16,
        direction: Direction,
        bytes: u64,
    ) -> LinkSnapshot {
        LinkSnapshot {
            peer,
            channel,
            index: 0,
            direction,
            transport: Path::Shm,
            bytes,
            slots: bytes / 4096,
            wait_ns: 0,
            stalled_ns: 0,
        }
    }

    pub(crate) fn op() -> OpSnapshot {
        OpSnapshot {
            info: OpInfo {
                seq: 7,
                func: Func::AllReduce,
                count: 1 << 20,
                dtype: DataType::Float32,
                fused: 1,
                algo: "Ring",
                nchannels: 2,
                direct: false,
            },
            elapsed_s: 1.5,
            steps_total: 64,
            steps_done: 10,
            bytes_done: 1 << 20,
        }
    }

    /// Rank `rank` of a 2-rank communicator in process `pid`, its links as given.
    pub(crate) fn found(pid: u32, rank: usize, links: Vec<LinkSnapshot>) -> Found {
        Found {
            pid,
            path: format!("/dev/shm/rnccl-stats-{pid}").into(),
            stale: false,
            page: Ok(Page {
                pid,
                written_unix_ns: 0,
                status: None,
                comms: vec![CommPage {
                    comm_id: 0xabcd,
                    rank,
                    nranks: 2,
                    device: None,
                    ops_completed: 3,
                    op: Some(op()),
                    links,
                }],
            }),
        }
    }

    #[test]
    fn rates_come_from_counter_deltas_and_stalls_mark_links_stuck() {
        let mut m = Model::new(Duration::from_secs(5));
        let t0 = Instant::now();
        let pages = |b0: u64, b1: u64| {
            vec![
                found(
                    10,
                    0,
                    vec![
                        link(1, 0, Direction::Send, b0),
                        link(1, 1, Direction::Send, b1),
                    ],
                ),
                found(11, 1, vec![link(0, 0, Direction::Recv, b0)]),
            ]
        };
        let s = m.update(&pages(1000, 0), t0);
        assert_eq!(s.jobs.len(), 1);
        assert_eq!(s.jobs[0].busbw(), 0.0, "no rate on first sight");
        let s = m.update(
            &pages(3_000_001_000, 1_000_000_000),
            t0 + Duration::from_secs(2),
        );
        let j = &s.jobs[0];
        assert_eq!(j.ranks.iter().map(|r| r.rank).collect::<Vec<_>>(), [0, 1]);
        assert_eq!(j.ranks[0].channels[&0], 1.5e9);
        assert_eq!(j.ranks[0].channels[&1], 0.5e9);
        assert_eq!(
            j.busbw(),
            1e9,
            "sends only, per rank: 2 GB/s from rank 0, none from 1"
        );
        assert_eq!(j.history.len(), 2);
        assert!(j.stuck.is_empty());
        // Rank 1 stalls 6 s on its receive from rank 0.
        let mut stalled = link(0, 0, Direction::Recv, 3_000_001_000);
        stalled.stalled_ns = 6_000_000_000;
        stalled.wait_ns = 6_000_000_000;
        let s = m.update(
            &[
                found(10, 0, vec![link(1, 0, Direction::Send, 3_000_001_000)]),
                found(11, 1, vec![stalled]),
            ],
            t0 + Duration::from_secs(4),
        );
        let st = &s.jobs[0].stuck;
        assert_eq!(st.len(), 1);
        assert_eq!(
            (st[0].rank, st[0].channel, st[0].peer, st[0].pid),
            (1, 0, 0, 11)
        );
        assert_eq!(
            s.jobs[0].ranks[1].peers[0].waiting, 1.0,
            "capped at the whole interval"
        );
    }

    #[test]
    fn stale_and_unreadable_pages_are_counted_not_shown() {
        let mut m = Model::new(Duration::from_secs(5));
        let mut stale = found(12, 0, vec![]);
        stale.stale = true;
        let bad = Found {
            pid: 13,
            path: "/dev/shm/rnccl-stats-13".into(),
            stale: false,
            page: Err(rnccl::stats::page::PageError::Foreign),
        };
        let s = m.update(&[stale, bad], Instant::now());
        assert!(s.jobs.is_empty());
        assert_eq!(s.stale, [12]);
        assert_eq!(s.unreadable.len(), 1);
    }
}
