//! `rnccl bench` as a user runs it: bad knob values refused before any rank starts, NCCL_DEBUG
//! logging on standard error (or NCCL_DEBUG_FILE), and the launcher's report when a rank dies.

mod common;

use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::rnccl;

/// A quick bench: 2 thread ranks, 64 bytes, one iteration.
const QUICK: [&str; 10] = [
    "bench",
    "--threads",
    "--ranks",
    "2",
    "-e",
    "64",
    "-n",
    "1",
    "-w",
    "0",
];

fn run(vars: &[(&str, &str)], args: &[&str]) -> (bool, String, String) {
    let mut cmd = rnccl();
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let out = cmd.args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bad_knob_values_stop_bench_with_the_syntax() {
    for (knob, value, syntax) in [
        ("NCCL_PROTO", "bogus", "LL, LL128, Simple"),
        ("NCCL_NTHREADS", "-5", "an integer from 64 to 512"),
        ("NCCL_NTHREADS", "1e9", "an integer from 64 to 512"),
        ("NCCL_DEBUG", "verbose", "VERSION, WARN, INFO, ABORT, TRACE"),
    ] {
        for mode in [
            &QUICK[..],
            &["bench", "--ranks", "2", "-e", "64", "-n", "1"],
        ] {
            let (ok, stdout, stderr) = run(&[(knob, value), ("NCCL_DEBUG_SUBSYS", "INIT")], mode);
            assert!(!ok, "{knob}={value} ran:\n{stdout}{stderr}");
            assert!(
                stderr.contains(&format!("{knob}={value:?}")) && stderr.contains(syntax),
                "{knob}={value}: {stderr}"
            );
            assert!(stdout.is_empty(), "nothing ran: {stdout}");
        }
    }
}

#[test]
fn a_misspelt_knob_is_a_warning_not_an_error() {
    let (ok, stdout, stderr) = run(
        &[("NCCL_SOCKET_IFNAM", "lo"), ("NCCL_DEBUG", "WARN")],
        &QUICK,
    );
    assert!(ok, "{stderr}");
    assert!(stdout.contains("# Avg bus bandwidth"), "{stdout}");
    assert!(
        stderr.contains("NCCL WARN NCCL_SOCKET_IFNAM=")
            && stderr.contains("did you mean NCCL_SOCKET_IFNAME?"),
        "{stderr}"
    );
}

#[test]
fn nccl_debug_logs_to_stderr_by_subsystem() {
    let (ok, stdout, stderr) = run(&[("NCCL_DEBUG", "INFO")], &QUICK);
    assert!(ok, "{stderr}");
    assert!(
        !stdout.contains("NCCL INFO"),
        "logs stay off stdout: {stdout}"
    );
    assert!(
        stderr.contains(" NCCL INFO Bootstrap: Using") && stderr.contains(" NCCL INFO comm rank 0"),
        "{stderr}"
    );
    let (ok, _, stderr) = run(
        &[("NCCL_DEBUG", "INFO"), ("NCCL_DEBUG_SUBSYS", "^INIT")],
        &QUICK,
    );
    assert!(ok, "{stderr}");
    assert!(
        stderr.contains("NCCL INFO Bootstrap: Using") && !stderr.contains("NCCL INFO comm rank"),
        "INIT lines filtered out: {stderr}"
    );
}

#[test]
fn nccl_debug_file_gets_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let pattern = dir.path().join("%h.%p.log");
    let (ok, _, stderr) = run(
        &[
            ("NCCL_DEBUG", "INFO"),
            ("NCCL_DEBUG_FILE", pattern.to_str().unwrap()),
        ],
        &QUICK,
    );
    assert!(ok, "{stderr}");
    assert!(!stderr.contains("NCCL INFO"), "{stderr}");
    let files: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
    assert_eq!(files.len(), 1, "one process, one file");
    let name = files[0].file_name().to_string_lossy().into_owned();
    assert!(name.ends_with(".log") && !name.contains('%'), "{name}");
    let log = std::fs::read_to_string(files[0].path()).unwrap();
    assert!(log.contains(" NCCL INFO Bootstrap: Using"), "{log}");
    let (ok, _, stderr) = run(
        &[
            ("NCCL_DEBUG", "INFO"),
            ("NCCL_DEBUG_FILE", "/nonexistent-dir/x.log"),
        ],
        &QUICK,
    );
    assert!(!ok && stderr.contains("NCCL_DEBUG_FILE"), "{stderr}");
}

/// The pid of the child of `parent` whose environment says it is bench rank `rank`.
fn bench_rank_pid(parent: u32, rank: usize) -> Option<i32> {
    let children =
        std::fs::read_to_string(format!("/proc/{parent}/task/{parent}/children")).ok()?;
    children
        .split_whitespace()
        .filter_map(|p| p.parse::<i32>().ok())
        .find(|pid| {
            std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| {
                env.split(|b| *b == 0)
                    .any(|kv| kv == format!("RNCCL_BENCH_RANK={rank}").as_bytes())
            })
        })
}

/// Kills a process group when dropped, so a failing test leaves no ranks behind.
struct Group(i32);

impl Drop for Group {
    fn drop(&mut self) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(self.0),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

#[test]
fn a_killed_rank_0_is_reported_with_its_signal() {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rnccl"));
    cmd.env_clear()
        .args([
            "bench", "--ranks", "2", "-b", "1M", "-e", "1M", "-n", "100000", "-w", "0", "-T", "5",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0);
    let child = cmd.spawn().unwrap();
    let _group = Group(child.id() as i32);
    let start = Instant::now();
    let rank0 = loop {
        if let Some(pid) = bench_rank_pid(child.id(), 0) {
            break pid;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "rank 0 never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    std::thread::sleep(Duration::from_millis(500));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(rank0),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("rank 0 was killed by signal 9 (SIGKILL)"),
        "{stderr}"
    );
}

/// The library's sweep errors speak of sizes and steps; the command adds its flag names.
#[test]
fn sweep_errors_name_the_flags() {
    let (ok, _, stderr) = run(
        &[],
        &["bench", "--threads", "-b", "8", "-e", "64", "-f", "1"],
    );
    assert!(!ok);
    assert!(
        stderr.contains("step factor above 1") && stderr.contains("-f/--stepfactor"),
        "{stderr}"
    );
}
