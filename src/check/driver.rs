//! One rank's part of a check. Every rank of the world communicator (the control plane, host
//! memory) runs [`run_rank`] in lockstep: the same rounds, the same world collectives, so no
//! rank ever waits for one that went elsewhere.
//!
//! Per plane (the default interface, or one rail), the ranks of the plane's hosts join a
//! measurement communicator with their own rendezvous (its root on the first member, its id
//! broadcast over the world), selecting the rail's NIC and the rank's GPU. Per round, that
//! communicator is split (`ncclCommSplit`) into the round's groups — each host alone, or
//! disjoint pairs of hosts — which run the benchmark at once; a watchdog aborts a group that
//! is still running after the measurement timeout, so a round never lasts longer. Every
//! rank's outcome then goes round the world (an AllGather), so all ranks know whether the
//! plane's communicator still works, and world rank 0 reports each group.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};

use serde::{Deserialize, Serialize};

use super::CheckOptions;
use super::planes::{self, Layout, Plane, RankInfo, RankSetup};
use super::records;
use super::report::{Event, Measurement, Outcome, SizeResult};
use super::schedule::{Group, pair_rounds};
use crate::bench::run_ranks;
use crate::bootstrap::unique_id::UniqueId;
use crate::comm::{CommConfig, Communicator, SPLIT_NOCOLOR};
use crate::config::{Config, Source};
use crate::error::{Error, Result};

/// What one rank did in one round, sent to every rank.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct RoundRecord {
    /// The index of its group in the round, if its host took part.
    group: Option<usize>,
    /// How its part ended.
    outcome: Option<Outcome>,
    /// Why the plane's communicator is unusable on this rank, once it is.
    broken: Option<String>,
    /// How its measurement ended (`Ran` when it took none).
    ended: Ended,
}

/// How one rank's measurement ended: what [`merge`] needs to tell a group's cause from its
/// knock-on failures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
enum Ended {
    /// It ran to the end, or failed on its own.
    Ran,
    /// Its own watchdog stopped it at the measurement timeout.
    Stopped,
    /// It failed because a peer gave up ([`Error::Remote`] or [`Error::Aborted`]): when a
    /// member of its group was stopped, that stop is the cause, whichever rank saw it first.
    PeerGaveUp,
}

/// Runs this rank's part of the check on `world` (every rank of the check, host memory),
/// `me` saying where the rank runs and `knobs` its configuration. World rank 0 gets the
/// check's [`Event`]s through `on_event` as they happen; the other ranks never call it.
///
/// A measurement that fails or times out is an event, not an error: the check goes on.
///
/// Errors: the world communicator's failures (a rank died or stalled past the world's
/// timeout: the error names it) and interface listing errors; the check cannot go on then.
pub fn run_rank(
    world: &Communicator,
    me: &RankSetup,
    opts: &CheckOptions,
    knobs: &Config,
    mut on_event: impl FnMut(Event),
) -> Result<()> {
    let infos: Vec<RankInfo> = records::all_gather(world, &RankInfo::of(me, knobs)?)?;
    let layout = Layout::new(&infos);
    let lead = world.rank() == 0;
    if lead {
        on_event(Event::Hosts {
            hosts: layout.hosts.clone(),
        });
    }
    let (planes, problems) = planes::decide(&layout, &opts.rails);
    if lead {
        problems
            .into_iter()
            .map(Event::Problem)
            .for_each(&mut on_event);
    }
    for (i, plane) in planes.iter().enumerate() {
        let rounds = plane_rounds(&layout, plane, opts, i == 0);
        if rounds.is_empty() {
            continue;
        }
        let comm = plane_comm(world, &layout, plane, me, opts, knobs);
        let err = comm.as_ref().err().map(|e| e.to_string());
        let errs: Vec<Option<String>> = records::all_gather(world, &err)?;
        let mut broken = errs.iter().enumerate().find_map(|(r, e)| {
            e.as_ref().map(|e| {
                format!(
                    "the {} communicator could not be set up ({}: {e})",
                    plane_name(plane),
                    who(&layout, r)
                )
            })
        });
        let comm = comm.ok().flatten();
        let my_host = layout.host_of[world.rank()];
        for round in &rounds {
            let group = round.iter().position(|g| g.has(my_host));
            let mut rec = RoundRecord {
                group,
                outcome: None,
                broken: None,
                ended: Ended::Ran,
            };
            match (&broken, &comm) {
                (Some(why), _) => {
                    rec.outcome = group.map(|_| Outcome::Failed {
                        reason: why.clone(),
                    });
                }
                (None, Some(c)) => {
                    let color = group.map_or(SPLIT_NOCOLOR, |g| g as i32);
                    match c.split(color, world.rank() as i32) {
                        Ok(Some(child)) => {
                            let (outcome, ended) = measure(&child, opts);
                            rec.outcome = Some(outcome);
                            rec.ended = ended;
                        }
                        Ok(None) => {}
                        Err(e) => {
                            let why = format!(
                                "the {} communicator failed on {}: {e}",
                                plane_name(plane),
                                who(&layout, world.rank())
                            );
                            rec.outcome = group.map(|_| Outcome::Failed {
                                reason: why.clone(),
                            });
                            rec.broken = Some(why);
                        }
                    }
                }
                // Not on this plane: nothing to do but take part in the world's exchange.
                (None, None) => {}
            }
            let all: Vec<RoundRecord> = records::all_gather(world, &rec)?;
            if broken.is_none() {
                broken = all.iter().find_map(|r| r.broken.clone());
            }
            if lead {
                for (gi, g) in round.iter().enumerate() {
                    on_event(Event::Measured(merge(&layout, plane, *g, gi, &all)));
                }
            }
        }
    }
    Ok(())
}

/// The rounds measured on `plane`: each host with two ranks or more alone (on the first plane
/// only: it measures the host, not a NIC), then the pairs whose hosts are both on the plane.
fn plane_rounds(
    layout: &Layout,
    plane: &Plane,
    opts: &CheckOptions,
    first: bool,
) -> Vec<Vec<Group>> {
    let n = layout.hosts.len();
    let mut rounds = Vec::new();
    let alone: Vec<Group> = (0..n)
        .filter(|&h| first && plane.has(h) && layout.hosts[h].ranks >= 2)
        .map(Group::Alone)
        .collect();
    if !alone.is_empty() {
        rounds.push(alone);
    }
    for round in pair_rounds(n, opts.pairing) {
        let on: Vec<Group> = round
            .into_iter()
            .filter(|g| g.hosts().iter().all(|&h| plane.has(h)))
            .collect();
        if !on.is_empty() {
            rounds.push(on);
        }
    }
    rounds
}

/// `rail eth1`, or `measurement` for the default interface, for messages.
fn plane_name(plane: &Plane) -> String {
    match &plane.label {
        Some(l) => format!("rail {l}"),
        None => "measurement".to_string(),
    }
}

/// `rank 3 (host b)`.
fn who(layout: &Layout, r: usize) -> String {
    format!("rank {r} (host {})", layout.hosts[layout.host_of[r]].name)
}

/// Where ranks are, by host: `host a (rank 0) and host b (ranks 8-11, 13)`.
fn where_(layout: &Layout, ranks: &[usize]) -> String {
    let mut by_host: Vec<(usize, Vec<usize>)> = Vec::new();
    for &r in ranks {
        let h = layout.host_of[r];
        match by_host.iter_mut().find(|(x, _)| *x == h) {
            Some((_, v)) => v.push(r),
            None => by_host.push((h, vec![r])),
        }
    }
    let parts: Vec<String> = by_host
        .iter()
        .map(|(h, rs)| {
            let mut spans: Vec<(usize, usize)> = Vec::new();
            for &r in rs {
                match spans.last_mut() {
                    Some((_, hi)) if *hi + 1 == r => *hi = r,
                    _ => spans.push((r, r)),
                }
            }
            let list: Vec<String> = spans
                .iter()
                .map(|&(a, b)| {
                    if a == b {
                        a.to_string()
                    } else {
                        format!("{a}-{b}")
                    }
                })
                .collect();
            let word = if rs.len() == 1 { "rank" } else { "ranks" };
            format!(
                "host {} ({word} {})",
                layout.hosts[*h].name,
                list.join(", ")
            )
        })
        .collect();
    parts.join(" and ")
}

/// The knobs of a plane's communicator: a rendezvous of its own, the rail's NIC, and the
/// measurement timeout for every wait.
fn plane_knobs(knobs: &Config, nic: Option<&str>, opts: &CheckOptions) -> Config {
    let mut cfg = knobs.clone();
    let why = || Source::Program("rnccl check".into());
    // An empty value reads as unset: the plane's rendezvous is not the world's NCCL_COMM_ID.
    cfg.set("NCCL_COMM_ID", "", why());
    cfg.set(
        "RNCCL_TIMEOUT",
        opts.timeout.as_secs().max(1).to_string(),
        why(),
    );
    if let Some(nic) = nic {
        cfg.set("NCCL_SOCKET_IFNAME", format!("={nic}"), why());
    }
    cfg
}

/// This rank's communicator on `plane` (`None` when its host is not on it). Every world rank
/// calls this: the plane's first member makes the rendezvous and broadcasts it over the world.
///
/// Errors: the world's broadcast failing, the root's rendezvous failing (named), or this
/// rank's init failing.
fn plane_comm(
    world: &Communicator,
    layout: &Layout,
    plane: &Plane,
    me: &RankSetup,
    opts: &CheckOptions,
    knobs: &Config,
) -> Result<Option<Communicator>> {
    let members: Vec<usize> = (0..world.nranks())
        .filter(|&r| plane.has(layout.host_of[r]))
        .collect();
    let Some(&root) = members.first() else {
        return Ok(None);
    };
    let my_host = layout.host_of[world.rank()];
    let nic = plane.nic[my_host].clone().flatten();
    let cfg = plane_knobs(knobs, nic.as_deref(), opts);
    let mine: Option<std::result::Result<String, String>> = (world.rank() == root).then(|| {
        UniqueId::with_config(&cfg)
            .map(|id| id.to_string())
            .map_err(|e| e.to_string())
    });
    let id: std::result::Result<String, String> = records::broadcast(world, root, mine.as_ref())?;
    let Some(rank) = members.iter().position(|&r| r == world.rank()) else {
        return Ok(None);
    };
    let id: UniqueId = id
        .map_err(|e| {
            Error::Remote(format!(
                "{} could not open the rendezvous: {e}",
                who(layout, root)
            ))
        })?
        .parse()?;
    let mut config = CommConfig::with_knobs(Arc::new(cfg)).timeout(opts.timeout);
    if let Some(d) = me.device {
        config = config.device(d);
    }
    Communicator::init_rank(members.len(), &id, rank, config).map(Some)
}

/// Runs the benchmark on this rank's group, aborting it after the measurement timeout; says
/// how it ended beside the outcome.
fn measure(comm: &Communicator, opts: &CheckOptions) -> (Outcome, Ended) {
    let abort = comm.abort_handle();
    let fired = AtomicBool::new(false);
    let (done, wait) = mpsc::channel::<()>();
    let result = std::thread::scope(|s| {
        let fired = &fired;
        s.spawn(move || {
            if let Err(RecvTimeoutError::Timeout) = wait.recv_timeout(opts.timeout) {
                fired.store(true, Ordering::SeqCst);
                abort.abort();
            }
        });
        let r = run_ranks(std::slice::from_ref(comm), &opts.bench, |_| {});
        drop(done);
        r
    });
    match result {
        Ok(rows) => (
            Outcome::Measured {
                sizes: rows.iter().map(SizeResult::from).collect(),
            },
            Ended::Ran,
        ),
        Err(_) if fired.load(Ordering::SeqCst) => (stopped(opts), Ended::Stopped),
        Err(e) => {
            let ended = match e {
                Error::Remote(_) | Error::Aborted(_) => Ended::PeerGaveUp,
                _ => Ended::Ran,
            };
            let reason = e.to_string();
            (Outcome::Failed { reason }, ended)
        }
    }
}

/// The outcome of a measurement its watchdog stopped.
fn stopped(opts: &CheckOptions) -> Outcome {
    Outcome::Failed {
        reason: format!(
            "did not finish within {} s and was stopped (a link far slower than the others, or a stalled rank; -T sets the limit)",
            opts.timeout.as_secs()
        ),
    }
}

/// Group `gi` of a round (`g`), from every rank's record: the group's result when every member
/// measured it (they all hold the same numbers; the first member's are kept), else a failure
/// giving each distinct reason with the ranks that saw it. When a member's watchdog stopped
/// it, members that failed only because a peer gave up are reported as stopped too: which rank
/// saw the timeout first is a race, the cause is the same.
fn merge(layout: &Layout, plane: &Plane, g: Group, gi: usize, all: &[RoundRecord]) -> Measurement {
    let members: Vec<(usize, &RoundRecord)> = all
        .iter()
        .enumerate()
        .filter(|(_, r)| r.group == Some(gi))
        .collect();
    let stop = members
        .iter()
        .find(|(_, rec)| rec.ended == Ended::Stopped)
        .and_then(|(_, rec)| rec.outcome.as_ref());
    let mut reasons: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    let mut order: Vec<&str> = Vec::new();
    let mut measured = None;
    for (r, rec) in &members {
        let outcome = match stop {
            Some(s) if rec.ended == Ended::PeerGaveUp => Some(s),
            _ => rec.outcome.as_ref(),
        };
        match outcome {
            Some(o @ Outcome::Measured { .. }) => {
                measured.get_or_insert(o);
            }
            Some(Outcome::Failed { reason }) => {
                if !reasons.contains_key(reason.as_str()) {
                    order.push(reason);
                }
                reasons.entry(reason).or_default().push(*r);
            }
            None => {
                let why = "took no part (an internal error: please report it)";
                if !reasons.contains_key(why) {
                    order.push(why);
                }
                reasons.entry(why).or_default().push(*r);
            }
        }
    }
    let outcome = match (measured, order.is_empty()) {
        (Some(o), true) => o.clone(),
        _ => Outcome::Failed {
            reason: order
                .iter()
                .map(|why| format!("{}: {why}", where_(layout, &reasons[why])))
                .collect::<Vec<_>>()
                .join("; "),
        },
    };
    Measurement {
        rail: match g {
            Group::Alone(_) => None,
            Group::Pair(..) => plane.label.clone(),
        },
        hosts: g
            .hosts()
            .into_iter()
            .map(|h| layout.hosts[h].name.clone())
            .collect(),
        ranks: members.len(),
        outcome,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::bench::{Average, BenchColl};
    use crate::check::{Pairing, Rails};
    use crate::dtype::DataType;
    use crate::redop::RedOp;

    fn opts(pairing: Pairing, size: usize, iters: usize, timeout: Duration) -> CheckOptions {
        CheckOptions {
            bench: crate::bench::BenchOptions {
                coll: BenchColl::AllReduce,
                sizes: vec![size],
                dtypes: vec![DataType::Float32],
                ops: vec![RedOp::Sum],
                roots: Vec::new(),
                warmup: 1,
                iters,
                agg: 1,
                check: 1,
                average: Average::Mean,
                windows: false,
                local_register: false,
                graph_launches: 0,
            },
            pairing,
            rails: Rails::Default,
            timeout,
        }
    }

    /// Every rank a thread of this process; `hosts[r]` names rank r's host.
    fn check(hosts: &[&str], o: &CheckOptions) -> Vec<Event> {
        let comms = Communicator::init_all(hosts.len()).unwrap();
        let knobs = Config::defaults();
        std::thread::scope(|s| {
            let hs: Vec<_> = comms
                .into_iter()
                .zip(hosts)
                .map(|(c, h)| {
                    let knobs = &knobs;
                    s.spawn(move || {
                        let mut events = Vec::new();
                        run_rank(&c, &RankSetup::named(h, None), o, knobs, |e| events.push(e))
                            .unwrap();
                        events
                    })
                })
                .collect();
            hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
        })
    }

    fn measured(events: &[Event]) -> Vec<(Vec<String>, &Outcome)> {
        events
            .iter()
            .filter_map(|e| match e {
                Event::Measured(m) => Some((m.hosts.clone(), &m.outcome)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn hosts_alone_then_every_pair() {
        let o = opts(Pairing::All, 4096, 2, Duration::from_secs(60));
        let events = check(&["a", "a", "b", "b", "c", "c"], &o);
        let Event::Hosts { hosts } = &events[0] else {
            panic!("{events:?}")
        };
        assert_eq!(hosts.iter().map(|h| h.ranks).collect::<Vec<_>>(), [2, 2, 2]);
        let m = measured(&events);
        let groups: Vec<String> = m.iter().map(|(h, _)| h.join("-")).collect();
        assert_eq!(groups, ["a", "b", "c", "b-c", "a-c", "a-b"]);
        for (h, o) in &m {
            let Outcome::Measured { sizes } = o else {
                panic!("{h:?}: {o:?}")
            };
            assert_eq!(sizes[0].size, 4096);
            assert_eq!(sizes[0].wrong, Some(0));
            assert!(sizes[0].busbw > 0.0, "{sizes:?}");
        }
    }

    /// A group still running at the timeout is stopped and reported, naming its ranks by
    /// host; the check goes on with the next round.
    #[test]
    fn a_measurement_past_its_timeout_is_stopped() {
        let o = opts(Pairing::Quick, 8 << 20, 1_000_000, Duration::from_secs(1));
        let events = check(&["a", "a", "b", "b", "c", "c"], &o);
        let m = measured(&events);
        assert_eq!(m.len(), 5, "3 hosts alone, then 2 pairs: {m:?}");
        let want = [
            "host a (ranks 0-1): did not finish within 1 s",
            "host b (ranks 2-3): did not finish",
            "host c (ranks 4-5): did not finish",
            "host a (ranks 0-1) and host b (ranks 2-3): did not finish",
            "host a (ranks 0-1) and host c (ranks 4-5): did not finish",
        ];
        for ((h, o), want) in m.into_iter().zip(want) {
            let Outcome::Failed { reason } = o else {
                panic!("{h:?}: {o:?}")
            };
            assert!(reason.starts_with(want), "{reason}");
        }
    }

    fn record(outcome: Outcome, ended: Ended) -> RoundRecord {
        RoundRecord {
            group: Some(0),
            outcome: Some(outcome),
            broken: None,
            ended,
        }
    }

    fn failed(reason: &str) -> Outcome {
        Outcome::Failed {
            reason: reason.into(),
        }
    }

    /// Whichever member's watchdog fired first, the group is reported as stopped with all its
    /// ranks; a member's own failure is still named apart.
    #[test]
    fn a_stop_seen_by_one_rank_names_the_whole_group() {
        let infos: Vec<RankInfo> = ["a", "a", "a"]
            .iter()
            .map(|h| RankInfo::fixture(h, &["eth0"]))
            .collect();
        let layout = Layout::new(&infos);
        let plane = Plane {
            label: None,
            nic: vec![Some(None)],
        };
        let o = opts(Pairing::Quick, 4096, 1, Duration::from_secs(7));
        let gave_up = failed("remote error: rank 0 aborted");
        for stopped_rank in 0..2 {
            let mut all = vec![
                record(gave_up.clone(), Ended::PeerGaveUp),
                record(gave_up.clone(), Ended::PeerGaveUp),
                record(failed("out of memory"), Ended::Ran),
            ];
            all[stopped_rank] = record(stopped(&o), Ended::Stopped);
            let m = merge(&layout, &plane, Group::Alone(0), 0, &all);
            let Outcome::Failed { reason } = m.outcome else {
                panic!("{m:?}")
            };
            assert!(
                reason.starts_with("host a (ranks 0-1): did not finish within 7 s"),
                "{reason}"
            );
            assert!(
                reason.ends_with("; host a (rank 2): out of memory"),
                "{reason}"
            );
        }
        // No stop: a peer's giving up is reported as it was seen.
        let all = vec![
            record(gave_up.clone(), Ended::PeerGaveUp),
            record(failed("out of memory"), Ended::Ran),
        ];
        let m = merge(&layout, &plane, Group::Alone(0), 0, &all);
        assert_eq!(
            m.outcome,
            failed("host a (rank 0): remote error: rank 0 aborted; host a (rank 1): out of memory")
        );
    }
}
