//! One process per `-t × -g` local ranks: this command re-runs itself once per process with
//! the same arguments, telling each child its process index, the number of processes, whether
//! the ranks run on GPUs, and the unique id through the environment. Process 0 (which holds rank
//! 0) writes the table on its standard output, forwarded by this process when it is not a
//! terminal (so when the reader goes away, as in `rnccl bench | head`, every rank is stopped
//! quietly); every child's standard error passes through.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, ChildStdout, Command, ExitCode, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rnccl::UniqueId;
use rnccl::config::Config;

const ENV_ID: &str = "RNCCL_BENCH_ID";
const ENV_PROC: &str = "RNCCL_BENCH_PROC";
const ENV_NPROCS: &str = "RNCCL_BENCH_NPROCS";
const ENV_GPU: &str = "RNCCL_BENCH_GPU";

/// What a child learns from its parent.
pub struct ChildEnv {
    /// The communicator's unique id.
    pub id: UniqueId,
    /// This child's process index.
    pub proc: usize,
    /// Number of processes.
    pub nprocs: usize,
    /// Whether the ranks run on GPUs (the parent decided, and said why not when not).
    pub gpu: bool,
}

impl ChildEnv {
    /// Reads the child variables; `None` when this process is not a spawned child.
    ///
    /// Errors: malformed variables.
    pub fn from_env(env: &BTreeMap<String, String>) -> anyhow::Result<Option<ChildEnv>> {
        let (Some(id), Some(proc), Some(n)) =
            (env.get(ENV_ID), env.get(ENV_PROC), env.get(ENV_NPROCS))
        else {
            return Ok(None);
        };
        Ok(Some(ChildEnv {
            id: id.parse()?,
            proc: proc.parse()?,
            nprocs: n.parse()?,
            gpu: env.get(ENV_GPU).is_some_and(|v| v == "1"),
        }))
    }
}

/// Starts `nprocs` children (with GPU ranks when `gpu`) and waits for them. Every process that
/// fails or dies (process 0 included) is reported on standard error as `label(process)` says
/// (`rank 3`, `process 1 (ranks 4-7)`) with its exit status or signal; when one fails, the
/// others get a grace period to report their own view of the failure, then are killed.
pub fn run_children(
    nprocs: usize,
    id: &UniqueId,
    gpu: bool,
    knobs: &Config,
    label: impl Fn(usize) -> String,
) -> anyhow::Result<ExitCode> {
    let exe = std::env::current_exe()
        .map_err(|e| anyhow::anyhow!("cannot find the rnccl executable to start ranks: {e}"))?;
    let argv: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    // A terminal never goes away under us, and rank 0 then keeps drawing its progress bar
    // around its own rows; only a pipe or file is forwarded.
    let forwarded = !std::io::stdout().is_terminal();
    let mut children: Vec<(usize, Child)> = Vec::with_capacity(nprocs);
    for proc in 0..nprocs {
        let child = Command::new(&exe)
            .args(&argv)
            .env(ENV_ID, id.to_string())
            .env(ENV_PROC, proc.to_string())
            .env(ENV_NPROCS, nprocs.to_string())
            .env(ENV_GPU, if gpu { "1" } else { "0" })
            .stdin(Stdio::null())
            .stdout(match proc {
                0 if forwarded => Stdio::piped(),
                0 => Stdio::inherit(),
                _ => Stdio::null(),
            })
            .stderr(Stdio::inherit())
            .spawn();
        match child {
            Ok(c) => children.push((proc, c)),
            Err(e) => {
                for (_, c) in &mut children {
                    let _ = c.kill();
                    let _ = c.wait();
                }
                anyhow::bail!("starting {} ({}): {e}", label(proc), exe.display());
            }
        }
    }
    let reader_gone = Arc::new(AtomicBool::new(false));
    let forward = children[0].1.stdout.take().map(|from| {
        let gone = reader_gone.clone();
        std::thread::spawn(move || forward_table(from, &gone))
    });
    let timeout = Duration::from_secs(knobs.int("RNCCL_TIMEOUT").unwrap_or(300).max(1) as u64);
    let grace = timeout.min(Duration::from_secs(10));
    let mut failures: Vec<(usize, ExitStatus)> = Vec::new();
    let mut failed_at: Option<Instant> = None;
    while !children.is_empty() {
        if reader_gone.load(Ordering::Relaxed) {
            // Nobody reads the table any more: stop every rank before they notice each other
            // gone, and end as quietly as a pipeline stage whose reader left.
            for (_, c) in &mut children {
                let _ = c.kill();
                let _ = c.wait();
            }
            return Err(std::io::Error::from(std::io::ErrorKind::BrokenPipe).into());
        }
        let mut i = 0;
        while i < children.len() {
            match children[i].1.try_wait() {
                Ok(Some(status)) => {
                    let (rank, _) = children.swap_remove(i);
                    if !status.success() {
                        eprintln!("rnccl bench: {}", describe(&label(rank), status));
                        failures.push((rank, status));
                        failed_at.get_or_insert_with(Instant::now);
                    }
                }
                Ok(None) => i += 1,
                Err(e) => anyhow::bail!("waiting for {}: {e}", label(children[i].0)),
            }
        }
        if failed_at.is_some_and(|t| t.elapsed() > grace) {
            for (rank, c) in &mut children {
                eprintln!(
                    "rnccl bench: stopping {} ({grace:?} after another rank failed)",
                    label(*rank)
                );
                let _ = c.kill();
                let _ = c.wait();
            }
            children.clear();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    if let Some(f) = forward {
        let _ = f.join();
    }
    if reader_gone.load(Ordering::Relaxed) && failures.is_empty() {
        return Err(std::io::Error::from(std::io::ErrorKind::BrokenPipe).into());
    }
    Ok(if failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Copies rank 0's table to this process's standard output until rank 0 closes it; sets `gone`
/// when the reader of standard output has gone away.
fn forward_table(mut from: ChildStdout, gone: &AtomicBool) {
    let mut buf = [0u8; 8192];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let mut out = std::io::stdout().lock();
        if out.write_all(&buf[..n]).and_then(|()| out.flush()).is_err() {
            gone.store(true, Ordering::Relaxed);
            return;
        }
    }
}

/// How the process `who` (`rank 0`, `process 1 (ranks 4-7)`) ended, in words: `rank 0 was
/// killed by signal 9 (SIGKILL)`, `rank 1 failed (exit status 1)`.
fn describe(who: &str, status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (_, Some(sig)) => {
            let name = nix::sys::signal::Signal::try_from(sig)
                .map_or_else(|_| "unknown signal".to_string(), |s| s.as_str().to_string());
            let core = if status.core_dumped() {
                ", core dumped"
            } else {
                ""
            };
            format!("{who} was killed by signal {sig} ({name}{core})")
        }
        (Some(code), None) => format!("{who} failed (exit status {code})"),
        (None, None) => format!("{who} failed ({status})"),
    }
}
