//! A host's worker (`rnccl check --worker`, started by the coordinator): reads its setup from
//! standard input, answers with its rank count, joins the world when told, and runs one
//! thread per rank. The worker holding world rank 0 streams the check's events on standard
//! output. Waits for the coordinator have deadlines, and the coordinator going away (standard
//! input closing) stops the worker at once, so nothing is left running on a host.

use std::io::{BufRead, Write};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

use anyhow::{Context, bail};
use rnccl::check::{RankSetup, run_rank, world_timeout};
use rnccl::config::{Config, Source};
use rnccl::{CommConfig, Communicator, UniqueId};

use super::protocol::{self, FromWorker, ToWorker};
use crate::GlobalOpts;
use crate::bench::backend::{Backend, Choice};

/// Exit status of a worker whose coordinator went away.
const ORPHANED: u8 = 3;

/// Lines of standard input, read by a thread; the channel closes at end of input.
fn stdin_lines() -> Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

/// The next message from the coordinator, within `limit`.
///
/// Errors: nothing came in time, the input closed, or the line does not parse.
fn next(lines: &Receiver<String>, limit: Duration, what: &str) -> anyhow::Result<ToWorker> {
    let line = lines.recv_timeout(limit).map_err(|e| match e {
        mpsc::RecvTimeoutError::Timeout => anyhow::anyhow!(
            "the coordinator sent no {what} within {} s",
            limit.as_secs()
        ),
        mpsc::RecvTimeoutError::Disconnected => {
            anyhow::anyhow!("the coordinator went away before sending the {what}")
        }
    })?;
    protocol::parse_to_worker(&line).with_context(|| format!("reading the coordinator's {what}"))
}

/// Prints one protocol message (threads share standard output: one locked write each).
fn say(msg: &FromWorker) -> anyhow::Result<()> {
    let line = protocol::line(msg)? + "\n";
    let mut out = std::io::stdout().lock();
    out.write_all(line.as_bytes())?;
    out.flush()?;
    Ok(())
}

/// The coordinator's knob values, where this host's environment does not set them.
fn apply(knobs: &mut Config, forwarded: Vec<(String, String)>) {
    for (k, v) in forwarded {
        if knobs.setting(&k).is_none_or(|s| s.source != Source::Env) {
            knobs.set(
                &k,
                v,
                Source::Program("rnccl check (the coordinator's value)".into()),
            );
        }
    }
}

/// Runs the worker.
///
/// Errors: the conversation with the coordinator fails, or a rank fails (each named).
pub fn run(global: &GlobalOpts) -> anyhow::Result<ExitCode> {
    let lines = stdin_lines();
    let ToWorker::Setup {
        version,
        host,
        cpu,
        ranks_per_host,
        knobs: forwarded,
        plan,
        start_within_s,
    } = next(&lines, Duration::from_secs(60), "setup")?
    else {
        bail!("the coordinator's first message is not the setup");
    };
    let ours = env!("CARGO_PKG_VERSION");
    if version != ours {
        bail!(
            "this host runs rnccl {ours} and the coordinator {version}: install the same build everywhere"
        );
    }
    let mut knobs = crate::config_load::load_config(global)?;
    apply(&mut knobs, forwarded);
    knobs.validate()?;
    let gpus = match Choice::new(cpu, rnccl::gpus).backend {
        Backend::Gpu(n) => Some(n),
        Backend::Cpu => None,
    };
    let ranks = ranks_per_host.unwrap_or(gpus.unwrap_or(2));
    say(&FromWorker::Hello {
        version: ours.to_string(),
        ranks,
    })?;
    let ToWorker::Start {
        id,
        first_rank,
        nranks,
    } = next(&lines, Duration::from_secs(start_within_s), "start")?
    else {
        bail!("the coordinator sent a second setup instead of the start");
    };
    let timeout = world_timeout(plan.timeout());
    let mut world_knobs = knobs.clone();
    // The world's rendezvous is the one in the id, never a NCCL_COMM_ID of this host.
    world_knobs.set("NCCL_COMM_ID", "", Source::Program("rnccl check".into()));
    world_knobs.set(
        "RNCCL_TIMEOUT",
        timeout.as_secs().to_string(),
        Source::Program("rnccl check".into()),
    );
    let id: UniqueId = match id {
        Some(id) => id.parse()?,
        None => {
            let id = UniqueId::with_config(&world_knobs)?;
            say(&FromWorker::Id { id: id.to_string() })?;
            id
        }
    };
    std::thread::spawn(move || {
        while lines.recv().is_ok() {}
        // Standard error may have gone with the coordinator: never panic on it here.
        let _ = writeln!(
            std::io::stderr(),
            "rnccl check: the coordinator went away; stopping this host's ranks"
        );
        std::process::exit(i32::from(ORPHANED));
    });
    let world_knobs = Arc::new(world_knobs);
    let opts = plan.options();
    let errors: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..ranks)
            .map(|t| {
                let (world_knobs, knobs, opts, host, id) =
                    (world_knobs.clone(), &knobs, &opts, &host, &id);
                let rank = first_rank + t;
                s.spawn(move || -> anyhow::Result<()> {
                    let config = CommConfig::with_knobs(world_knobs).timeout(timeout);
                    let world = Communicator::init_rank(nranks, id, rank, config)?;
                    let me = RankSetup::named(host, gpus.map(|n| t % n));
                    let mut failed = None;
                    run_rank(&world, &me, opts, knobs, |e| {
                        if let Err(e) = say(&FromWorker::Event(e)) {
                            failed.get_or_insert(e);
                        }
                    })?;
                    failed.map_or(Ok(()), Err)
                })
            })
            .collect();
        handles
            .into_iter()
            .enumerate()
            .filter_map(|(t, h)| {
                let r = h
                    .join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("its thread panicked")));
                r.err().map(|e| format!("rank {}: {e:#}", first_rank + t))
            })
            .collect()
    });
    match errors.len() {
        0 => Ok(ExitCode::SUCCESS),
        _ => bail!("{}", errors.join("; ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hosts_own_environment_wins_over_the_coordinators_values() {
        let mut c = Config::defaults();
        c.set("NCCL_SOCKET_IFNAME", "=ib0", Source::Env);
        apply(
            &mut c,
            vec![
                ("NCCL_SOCKET_IFNAME".into(), "=eth0".into()),
                ("NCCL_DEBUG".into(), "WARN".into()),
            ],
        );
        assert_eq!(c.string("NCCL_SOCKET_IFNAME"), Some("=ib0"));
        assert_eq!(c.string("NCCL_DEBUG"), Some("WARN"));
    }
}
