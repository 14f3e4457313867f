//! A `rnccl bench` job that is cancelled or loses a rank, tried as a user would: SIGINT,
//! SIGTERM or SIGHUP to the launcher stop every rank within a second; a rank killed during
//! set-up is noticed and named by the others at once, not after a grace period; an error every
//! rank hits is said once; a job that cannot fit in memory is refused before any rank starts;
//! and nothing is ever left in `/dev/shm`.

mod common;

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::procs::{Group, bench_rank_pid, children, shm_files_of, wait_gone};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// Starts `rnccl bench args…` in a process group of its own, standard error piped.
fn start(args: &[&str]) -> (Child, Group) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rnccl"));
    cmd.env_clear()
        .arg("bench")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0);
    let child = cmd.spawn().unwrap();
    let group = Group(child.id() as i32);
    (child, group)
}

/// The ranks of launcher `parent` once all `n` are running and have joined their communicator
/// (each has its counter page).
fn running_ranks(parent: u32, n: usize) -> Vec<i32> {
    let start = Instant::now();
    loop {
        let pids = children(parent);
        let joined = pids
            .iter()
            .filter(|p| std::path::Path::new(&format!("/dev/shm/rnccl-stats-{p}")).exists())
            .count();
        if pids.len() == n && joined == n {
            return pids;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the ranks never all started: {pids:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_signal_to_the_launcher_stops_every_rank_within_a_second() {
    for sig in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        let long = [
            "--cpu", "--ranks", "4", "-b", "1M", "-e", "1M", "-n", "10000000",
        ];
        let (child, _group) = start(&long);
        let ranks = running_ranks(child.id(), 4);
        kill(Pid::from_raw(child.id() as i32), sig).unwrap();
        let took = wait_gone(&ranks, Duration::from_secs(5));
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let took = took.unwrap_or_else(|| panic!("{sig}: ranks still running: {stderr}"));
        assert!(
            took < Duration::from_secs(1),
            "{sig}: the ranks took {took:?} to stop"
        );
        assert_eq!(out.status.code(), Some(128 + sig as i32), "{stderr}");
        assert!(
            stderr.contains(&format!(
                "{}: stopped the 4 running processes",
                sig.as_str()
            )),
            "{stderr}"
        );
        assert_eq!(shm_files_of(&ranks), Vec::<String>::new(), "{sig}");
    }
}

#[test]
fn ranks_die_with_a_killed_launcher_and_clean_up() {
    let (mut child, _group) = start(&["--cpu", "--ranks", "3", "-e", "1M", "-n", "10000000"]);
    let ranks = running_ranks(child.id(), 3);
    child.kill().unwrap();
    let _ = child.wait();
    let took = wait_gone(&ranks, Duration::from_secs(5));
    assert!(
        took.is_some_and(|t| t < Duration::from_secs(1)),
        "ranks outlived their launcher: {took:?}"
    );
    assert_eq!(shm_files_of(&ranks), Vec::<String>::new());
}

#[test]
fn a_rank_killed_during_setup_is_named_at_once_and_leaves_nothing() {
    let (child, _group) = start(&["--cpu", "--ranks", "8", "-b", "32M", "-e", "32M", "-n", "5"]);
    let mut seen = Vec::new();
    let start = Instant::now();
    let victim = loop {
        seen.extend(children(child.id()));
        if let Some(pid) = bench_rank_pid(child.id(), 3) {
            break pid;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "rank 3 never started"
        );
        std::thread::sleep(Duration::from_millis(5));
    };
    // Early: most ranks are still starting, checking in or connecting their channels.
    std::thread::sleep(Duration::from_millis(150));
    seen.extend(children(child.id()));
    kill(Pid::from_raw(victim), Signal::SIGKILL).unwrap();
    let killed_at = Instant::now();
    let out = child.wait_with_output().unwrap();
    let took = killed_at.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    let first = stderr.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("rnccl bench: rank 3 failed: killed by signal 9 (SIGKILL)"),
        "the dead rank comes first: {stderr}"
    );
    assert!(
        !stderr.contains("stopped ranks"),
        "every rank noticed by itself, none had to be stopped: {stderr}"
    );
    assert!(
        took < Duration::from_secs(5),
        "the job took {took:?} to end: {stderr}"
    );
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(shm_files_of(&seen), Vec::<String>::new(), "{stderr}");
}

#[test]
fn an_error_every_rank_hits_is_said_once() {
    let (child, _group) = start(&["broadcast", "--cpu", "--ranks", "2", "-r", "5", "-e", "8"]);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    let said: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("is not a rank"))
        .collect();
    assert_eq!(said.len(), 1, "{stderr}");
    assert!(
        said[0].starts_with("rnccl bench: ranks 0-1 failed: -r/--root 5 is not a rank"),
        "{stderr}"
    );
}

#[test]
fn a_job_that_cannot_fit_in_memory_is_refused_up_front() {
    let (child, _group) = start(&["--cpu", "--ranks", "2", "-b", "512G", "-e", "512G"]);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && out.status.signal().is_none());
    assert!(
        stderr.contains(
            "2 ranks × 1.5 TiB of buffers (a send, a receive and a check buffer of 512.0 GiB each"
        ) && stderr.contains("of memory available (MemAvailable)")
            && stderr.contains("lower -e/--maxbytes or --ranks, or skip the check with -c 0"),
        "{stderr}"
    );
}
