//! A `rnccl bench` job that is cancelled or loses a rank, tried as a user would: SIGINT,
//! SIGTERM or SIGHUP to the launcher stop every rank within a second; a rank killed during
//! set-up is noticed and named by the others at once, not after a grace period; an error every
//! rank hits is said once, and one rank's death among 16 is one line and its cascade grouped; a
//! job that cannot fit in memory, or that the host cannot start (processes, threads, files),
//! an output that cannot be written and a topology file NCCL would refuse are refused before
//! any rank starts; and nothing is ever left in `/dev/shm`.

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

/// One rank killed in a 16-rank run: its death first, then the ranks that saw it go, grouped by
/// what they said, each kind once.
#[test]
fn one_death_in_sixteen_ranks_is_said_once_and_the_cascade_grouped() {
    let (child, _group) = start(&[
        "--cpu", "--ranks", "16", "-b", "1M", "-e", "1M", "-n", "10000000",
    ]);
    running_ranks(child.id(), 16);
    let victim = bench_rank_pid(child.id(), 5).expect("rank 5");
    std::thread::sleep(Duration::from_millis(300));
    kill(Pid::from_raw(victim), Signal::SIGKILL).unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert!(
        lines[0].starts_with("rnccl bench: rank 5 failed: killed by signal 9 (SIGKILL)"),
        "{stderr}"
    );
    assert!(
        lines.iter().filter(|l| l.contains("failed:")).count() == 1,
        "one failure line, the rest grouped: {stderr}"
    );
    assert!(lines.len() <= 6, "{} lines: {stderr}", lines.len());
    assert!(
        !lines.iter().skip(1).any(|l| l.contains("first failure:")),
        "the first failure is said once, first: {stderr}"
    );
}

/// More ranks than the host can start: refused before any starts, with the numbers.
#[test]
fn impossible_rank_counts_are_refused_up_front() {
    for (args, n) in [
        (&["--cpu", "--ranks", "100000", "-e", "8"][..], "100000"),
        (
            &["--cpu", "--threads", "--ranks", "40000", "-e", "8"][..],
            "40000",
        ),
    ] {
        let started = Instant::now();
        let (child, _group) = start(args);
        let parent = child.id();
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains(&format!("{n} ranks need about")) && stderr.contains("lower --ranks"),
            "{args:?}: {stderr}"
        );
        assert!(children(parent).is_empty());
        assert!(started.elapsed() < Duration::from_secs(10), "{args:?}");
    }
}

/// An output that cannot be written is refused before the run, not reported after it as a
/// rank's failure.
#[test]
fn unwritable_outputs_are_refused_before_the_run() {
    for (flag, path) in [
        ("-J", "/nonexistent/dir/out.json"),
        ("--plot", "/nonexistent/dir/p.svg"),
    ] {
        let started = Instant::now();
        let (child, _group) = start(&["--cpu", "--ranks", "2", "-e", "8", flag, path]);
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains(&format!("{path}: cannot be written")) && !stderr.contains("rank 0"),
            "{stderr}"
        );
        assert!(started.elapsed() < Duration::from_secs(5), "{stderr}");
    }
}

/// A topology file NCCL would refuse gets the same verdict from bench as from `rnccl topo`.
#[test]
fn a_topology_file_nccl_refuses_is_refused_by_bench_too() {
    let dir = tempfile::tempdir().unwrap();
    let good = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/synthetic/pcie-tiers.xml"
    ))
    .unwrap();
    let f = dir.path().join("prolog.xml");
    std::fs::write(&f, format!("<?xml version=\"1.0\"?>\n{good}")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_rnccl"))
        .env_clear()
        .env("NCCL_TOPO_FILE", &f)
        .args(["bench", "--cpu", "--ranks", "2", "-e", "8"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("NCCL would refuse this topology (line 1:")
            && stderr.contains("declaration"),
        "{stderr}"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_rnccl"))
        .env_clear()
        .env("NCCL_TOPO_FILE", &f)
        .args(["env-explain", "NCCL_TOPO_FILE"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("NCCL would refuse this topology: line 1:"),
        "{text}"
    );
}
