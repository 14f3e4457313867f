//! One process per `-t × -g` local ranks: this command re-runs itself once per process with
//! the same arguments, telling each child its process index, the number of processes, whether
//! the ranks run on GPUs, and the unique id through the environment. Process 0 (which holds rank
//! 0) writes the table on its standard output, forwarded by this process when it is not a
//! terminal (so when the reader goes away, as in `rnccl bench | head`, every rank is stopped
//! quietly); every child's standard error passes through, except its final error, which it
//! reports to this process over a pipe so that failures are said once each (see
//! [`super::failures`]).
//!
//! No rank outlives the job: a child dies with its launcher (`PR_SET_PDEATHSIG`), SIGINT,
//! SIGTERM or SIGHUP to the launcher stop every rank within a second, ranks still running some
//! time after another failed are stopped, and the `/dev/shm` files of every child that ended,
//! however it ended, are removed.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{IsTerminal, Read, Write};
use std::ops::Range;
use std::os::fd::{AsRawFd, OwnedFd};
use std::process::{Child, ChildStdout, Command, ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nix::fcntl::{FcntlArg, FdFlag, OFlag, fcntl};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use rnccl::UniqueId;
use rnccl::config::Config;

use super::failures::{Failure, Failures, describe_exit, ranks_label};
use super::signals::{self, Stop};

const ENV_ID: &str = "RNCCL_BENCH_ID";
const ENV_PROC: &str = "RNCCL_BENCH_PROC";
const ENV_NPROCS: &str = "RNCCL_BENCH_NPROCS";
const ENV_GPU: &str = "RNCCL_BENCH_GPU";
/// The descriptor number of the pipe a child reports its final error on.
const ENV_REPORT_FD: &str = "RNCCL_BENCH_REPORT_FD";
/// The launcher's pid (a child whose parent is already gone exits at once).
const ENV_PARENT: &str = "RNCCL_BENCH_PARENT";
/// The most bytes of error text a child reports (a pipe holds 64 KiB without a reader).
const MAX_REPORT: usize = 32 << 10;
/// How long ranks asked to stop get to remove their files and exit before SIGKILL.
const STOP_WAIT: Duration = Duration::from_millis(700);

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
    /// Reads the child variables; `None` when this process is not a spawned child. A child
    /// also arranges to get SIGTERM when its launcher dies, and exits at once if it already has.
    ///
    /// Errors: malformed variables.
    pub fn from_env(env: &BTreeMap<String, String>) -> anyhow::Result<Option<ChildEnv>> {
        let (Some(id), Some(proc), Some(n)) =
            (env.get(ENV_ID), env.get(ENV_PROC), env.get(ENV_NPROCS))
        else {
            return Ok(None);
        };
        if let Some(parent) = env.get(ENV_PARENT).and_then(|p| p.parse::<i32>().ok()) {
            nix::sys::prctl::set_pdeathsig(Signal::SIGTERM)?;
            if nix::unistd::getppid() != Pid::from_raw(parent) {
                anyhow::bail!("the rnccl bench that started this rank has already exited");
            }
        }
        Ok(Some(ChildEnv {
            id: id.parse()?,
            proc: proc.parse()?,
            nprocs: n.parse()?,
            gpu: env.get(ENV_GPU).is_some_and(|v| v == "1"),
        }))
    }
}

/// The errors of a process's threads of ranks, each with its ranks: kept apart so a child can
/// report them to its launcher one by one.
#[derive(Debug)]
pub struct RankErrors(pub Vec<(Range<usize>, String)>);

impl std::fmt::Display for RankErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let line = |(r, e): &(Range<usize>, String)| {
            format!("{}: {e}", ranks_label(&r.clone().collect::<Vec<_>>()))
        };
        match &self.0[..] {
            [one] => write!(f, "{}", line(one)),
            all => {
                write!(f, "{} threads of ranks failed:", all.len())?;
                all.iter().try_for_each(|e| write!(f, "\n  {}", line(e)))
            }
        }
    }
}

impl std::error::Error for RankErrors {}

/// In a child started by [`run_children`], sends `e` to the launcher instead of printing it and
/// returns true; elsewhere (or when the launcher cannot be told) returns false.
pub fn report_to_launcher(e: &anyhow::Error) -> bool {
    let Some(fd) = std::env::var(ENV_REPORT_FD)
        .ok()
        .and_then(|v| v.parse::<i32>().ok())
    else {
        return false;
    };
    let entries: Vec<(Option<[usize; 2]>, String)> = match e.downcast_ref::<RankErrors>() {
        Some(RankErrors(all)) => all
            .iter()
            .map(|(r, m)| (Some([r.start, r.end]), m.clone()))
            .collect(),
        None => vec![(None, format!("{e:#}"))],
    };
    let mut text = String::new();
    for (ranks, error) in entries {
        let error: String = error.chars().take(4000).collect();
        let line = serde_json::json!({ "ranks": ranks, "error": error }).to_string();
        if text.len() + line.len() + 1 > MAX_REPORT {
            break;
        }
        text.push_str(&line);
        text.push('\n');
    }
    std::fs::OpenOptions::new()
        .write(true)
        .open(format!("/proc/self/fd/{fd}"))
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .is_ok()
}

/// A started child.
struct Running {
    proc: usize,
    child: Child,
    report: File,
    /// The report pipe holds the child's report: it no longer wakes [`wait_for_exit`].
    reported: bool,
}

/// Starts `nprocs` children (with GPU ranks when `gpu`), process `p` holding ranks `ranks(p)`,
/// and waits for them. Failures are said as [`Failures`] says them; when one rank fails, the
/// others get a grace period (the communicator timeout, at most 10 s) to fail in their turn,
/// then are stopped.
///
/// Errors: a child cannot be started or waited for; a broken pipe when the reader of the table
/// went away.
pub fn run_children(
    nprocs: usize,
    id: &UniqueId,
    gpu: bool,
    knobs: &Config,
    ranks: impl Fn(usize) -> Range<usize>,
) -> anyhow::Result<ExitCode> {
    let exe = std::env::current_exe()
        .map_err(|e| anyhow::anyhow!("cannot find the rnccl executable to start ranks: {e}"))?;
    let argv: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let stop = Stop::watch()?;
    // A terminal never goes away under us, and rank 0 then keeps drawing its progress bar
    // around its own rows; only a pipe or file is forwarded.
    let forwarded = !std::io::stdout().is_terminal();
    let mut children: Vec<Running> = Vec::with_capacity(nprocs);
    for proc in 0..nprocs {
        let started = report_pipe().and_then(|(read, write)| {
            let child = Command::new(&exe)
                .args(&argv)
                .env(ENV_ID, id.to_string())
                .env(ENV_PROC, proc.to_string())
                .env(ENV_NPROCS, nprocs.to_string())
                .env(ENV_GPU, if gpu { "1" } else { "0" })
                .env(ENV_REPORT_FD, write.as_raw_fd().to_string())
                .env(ENV_PARENT, std::process::id().to_string())
                .stdin(Stdio::null())
                .stdout(match proc {
                    0 if forwarded => Stdio::piped(),
                    0 => Stdio::inherit(),
                    _ => Stdio::null(),
                })
                .stderr(Stdio::inherit())
                .spawn();
            // This process never writes: only the child holds the pipe's write end now.
            drop(write);
            Ok((child?, File::from(read)))
        });
        match started {
            Ok((child, report)) => children.push(Running {
                proc,
                child,
                report,
                reported: false,
            }),
            Err(e) => {
                stop_all(&mut children, Signal::SIGKILL);
                anyhow::bail!(
                    "starting {} ({}): {e}",
                    ranks_label(&ranks(proc).collect::<Vec<_>>()),
                    exe.display()
                );
            }
        }
    }
    let reader_gone = Arc::new(AtomicBool::new(false));
    let forward = children[0].child.stdout.take().map(|from| {
        let gone = reader_gone.clone();
        std::thread::spawn(move || forward_table(from, &gone))
    });
    let timeout = Duration::from_secs(knobs.int("RNCCL_TIMEOUT").unwrap_or(300).max(1) as u64);
    let grace = timeout.min(Duration::from_secs(10));
    let mut failures = Failures::default();
    let mut cancelled = None;
    while !children.is_empty() {
        if let Some(sig) = stop.received() {
            cancelled = Some(sig);
            let n = children.len();
            stop_all(&mut children, Signal::SIGTERM);
            eprintln!(
                "rnccl bench: {}: stopped the {n} running {}",
                signals::name(sig),
                if n == 1 { "process" } else { "processes" }
            );
            break;
        }
        if reader_gone.load(Ordering::Relaxed) {
            // Nobody reads the table any more: stop every rank before they notice each other
            // gone, and end as quietly as a pipeline stage whose reader left.
            stop_all(&mut children, Signal::SIGKILL);
            return Err(std::io::Error::from(std::io::ErrorKind::BrokenPipe).into());
        }
        let mut i = 0;
        while i < children.len() {
            match children[i].child.try_wait() {
                Ok(Some(status)) => {
                    let mut done = children.swap_remove(i);
                    rnccl::remove_process_files(done.child.id());
                    if !status.success() {
                        let mine = ranks(done.proc);
                        let mut said = read_report(&mut done.report, &mine);
                        if said.is_empty() {
                            said.push(Failure {
                                ranks: mine,
                                what: describe_exit(status),
                                died: true,
                            });
                        }
                        if !failures.any() {
                            // Ranks still in the rendezvous would wait for this one until
                            // their timeout: have the root fail it now (harmless if it is over).
                            let f = &said[0];
                            let who = ranks_label(&f.ranks.clone().collect::<Vec<_>>());
                            let _ = id.abort_rendezvous(&format!("{who} failed: {}", f.what));
                        }
                        said.into_iter().for_each(|f| failures.add(f));
                    }
                }
                Ok(None) => i += 1,
                Err(e) => anyhow::bail!("waiting for process {}: {e}", children[i].proc),
            }
        }
        for line in failures.due(false) {
            eprintln!("{line}");
        }
        if failures.first_at().is_some_and(|t| t.elapsed() > grace) {
            for c in &children {
                failures.stopped(ranks(c.proc));
            }
            stop_all(&mut children, Signal::SIGTERM);
        }
        wait_for_exit(&mut children, POLL_EVERY);
    }
    for line in failures.due(true) {
        eprintln!("{line}");
    }
    if let Some(f) = forward {
        let _ = f.join();
    }
    if let Some(sig) = cancelled {
        return Ok(ExitCode::from((128 + sig) as u8));
    }
    if reader_gone.load(Ordering::Relaxed) && !failures.any() {
        return Err(std::io::Error::from(std::io::ErrorKind::BrokenPipe).into());
    }
    Ok(if failures.any() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// How often the launcher looks at its signals, its reader and its children when none of them
/// ends.
const POLL_EVERY: Duration = Duration::from_millis(20);

/// Waits at most `limit` for a child to end. A child's report pipe has one write end, the
/// child's, so its read end reports a hang-up the moment the child exits: the launcher then
/// ends with its ranks instead of up to `limit` later (`rnccl bench --ranks 1 -b 8 -e 8 -n 1`
/// took 64 ms with a 20 ms sleep here, 47 ms this way, 2 cores, 2026-12-04). A pipe that holds
/// a report (written as its child ends) stays readable, so it no longer counts, and a child
/// whose descendants still hold its write end is seen at the next `limit`.
fn wait_for_exit(children: &mut [Running], limit: Duration) {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd;
    let waiting: Vec<usize> = (0..children.len())
        .filter(|&i| !children[i].reported)
        .collect();
    if waiting.is_empty() {
        std::thread::sleep(limit);
        return;
    }
    let mut fds: Vec<PollFd> = waiting
        .iter()
        .map(|&i| PollFd::new(children[i].report.as_fd(), PollFlags::POLLIN))
        .collect();
    let ms = u16::try_from(limit.as_millis()).unwrap_or(u16::MAX);
    match poll(&mut fds, PollTimeout::from(ms)) {
        Ok(_) => {}
        Err(nix::errno::Errno::EINTR) => return, // a signal: the caller looks at it now
        Err(_) => {
            // Not expected of pipes; waiting as before keeps the loop from spinning.
            std::thread::sleep(limit);
            return;
        }
    }
    let events: Vec<PollFlags> = fds
        .iter()
        .map(|fd| fd.revents().unwrap_or(PollFlags::empty()))
        .collect();
    drop(fds);
    for (ev, &i) in events.iter().zip(&waiting) {
        if ev.contains(PollFlags::POLLIN) && !ev.contains(PollFlags::POLLHUP) {
            children[i].reported = true;
        }
    }
}

/// A pipe for a child's report: the read end non-blocking and closed on exec, the write end
/// inherited by the next child started.
fn report_pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK)?;
    // The child writes once, at exit, less than a pipe holds: it never needs to wait.
    fcntl(&write, FcntlArg::F_SETFD(FdFlag::empty()))?;
    fcntl(&write, FcntlArg::F_SETFL(OFlag::empty()))?;
    Ok((read, write))
}

/// The failures a child reported before exiting; entries without ranks are the process's.
fn read_report(report: &mut File, mine: &Range<usize>) -> Vec<Failure> {
    let mut bytes = Vec::new();
    let mut buf = [0u8; 8192];
    while let Ok(n) = report.read(&mut buf) {
        if n == 0 || bytes.len() > MAX_REPORT {
            break;
        }
        bytes.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&bytes)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| {
            let what = v.get("error")?.as_str()?.to_string();
            let ranks = match v.get("ranks").and_then(|r| r.as_array()) {
                Some(r) if r.len() == 2 => r[0].as_u64()? as usize..r[1].as_u64()? as usize,
                _ => mine.clone(),
            };
            Some(Failure {
                ranks,
                what,
                died: false,
            })
        })
        .collect()
}

/// Stops every child: `first` (SIGTERM lets a rank remove its files), then SIGKILL for those
/// still running after [`STOP_WAIT`]; then removes every child's `/dev/shm` files.
fn stop_all(children: &mut Vec<Running>, first: Signal) {
    for c in children.iter() {
        let _ = kill(Pid::from_raw(c.child.id() as i32), first);
    }
    let until = Instant::now() + STOP_WAIT;
    while Instant::now() < until
        && children
            .iter_mut()
            .any(|c| matches!(c.child.try_wait(), Ok(None)))
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    for mut c in children.drain(..) {
        let _ = c.child.kill();
        let _ = c.child.wait();
        rnccl::remove_process_files(c.child.id());
    }
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
