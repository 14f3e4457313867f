//! `rnccl bench` as a user runs it: bad knob values refused before any rank starts, NCCL_DEBUG
//! logging on standard error (or NCCL_DEBUG_FILE), and the launcher's report when a rank dies.

mod common;

use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::procs::{Group, bench_rank_pid};
use common::rnccl;

/// A quick bench: 2 CPU thread ranks, 64 bytes, one iteration.
const QUICK: [&str; 11] = [
    "bench",
    "--cpu",
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

#[test]
fn a_killed_rank_0_is_reported_with_its_signal() {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rnccl"));
    cmd.env_clear()
        .args([
            "bench", "--cpu", "--ranks", "2", "-b", "1M", "-e", "1M", "-n", "100000", "-w", "0",
            "-T", "5",
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
        stderr.contains("rank 0 failed: killed by signal 9 (SIGKILL)"),
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

/// `rnccl bench` with the environment cleared; returns success, stdout and stderr.
fn bench(args: &[&str]) -> (bool, String, String) {
    let mut all = vec!["bench", "-e", "64", "-n", "1", "-w", "0"];
    all.extend_from_slice(args);
    run(&[], &all)
}

/// The `# Using devices` lines of a table.
fn device_lines(stdout: &str) -> Vec<&str> {
    stdout
        .lines()
        .filter(|l| l.starts_with("#  Rank "))
        .collect()
}

/// On a host without a GPU (CI), the default run says why in one line on stderr and runs CPU
/// ranks as before; on a GPU host it runs GPU ranks and says nothing of the kind.
#[test]
fn without_a_gpu_bench_says_so_once_and_runs_cpu_ranks() {
    let (ok, stdout, stderr) = bench(&["--ranks", "2"]);
    assert!(ok, "{stderr}");
    let notices: Vec<&str> = stderr.lines().filter(|l| l.contains("no GPU")).collect();
    if rnccl::gpus().is_ok() {
        eprintln!("skipped: this host has GPUs");
        assert!(notices.is_empty(), "{stderr}");
        return;
    }
    assert_eq!(notices.len(), 1, "one line, from the parent only: {stderr}");
    assert!(
        notices[0].starts_with("# no GPU: ") && notices[0].ends_with("; running on CPU ranks"),
        "{stderr}"
    );
    let devices = device_lines(&stdout);
    assert_eq!(devices.len(), 2, "{stdout}");
    assert!(devices.iter().all(|l| l.contains(" [cpu] ")), "{stdout}");
    assert!(stdout.contains("# Out of bounds values : 0 OK"), "{stdout}");
}

/// `--cpu` keeps CPU ranks without looking for GPUs: no notice at all.
#[test]
fn cpu_flag_keeps_cpu_ranks_silently() {
    let (ok, stdout, stderr) = bench(&["--cpu", "--ranks", "2"]);
    assert!(ok, "{stderr}");
    assert!(!stderr.contains("no GPU"), "{stderr}");
    let devices = device_lines(&stdout);
    assert_eq!(devices.len(), 2, "{stdout}");
    assert!(devices.iter().all(|l| l.contains(" [cpu] ")), "{stdout}");
    assert!(stdout.contains("# nThread 1 nGpus 1 "), "{stdout}");
    assert!(stdout.contains(" graph: 0 "), "{stdout}");
}

/// `-t 2`: processes of two thread ranks each, numbered as nccl-tests numbers them, and the
/// header says so.
#[test]
fn threads_per_process_share_a_pid() {
    let (ok, stdout, stderr) = bench(&["--cpu", "--ranks", "4", "-t", "2"]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("# nThread 2 nGpus 1 "), "{stdout}");
    let pids: Vec<&str> = device_lines(&stdout)
        .iter()
        .map(|l| l.split_whitespace().nth(6).unwrap())
        .collect();
    assert_eq!(pids.len(), 4, "{stdout}");
    assert!(
        pids[0] == pids[1] && pids[2] == pids[3] && pids[0] != pids[2],
        "{stdout}"
    );
    for (r, l) in device_lines(&stdout).iter().enumerate() {
        assert!(
            l.starts_with(&format!("#  Rank {r:>2} Group  0 Pid ")),
            "{l}"
        );
    }
}

/// `-g` and `-G` drive GPUs: refused with the reason on CPU ranks, before any rank starts.
#[test]
fn gpu_flags_are_refused_on_cpu_ranks() {
    let (ok, _, stderr) = bench(&["--cpu", "-g", "2"]);
    assert!(!ok);
    assert!(
        stderr.contains("-g/--ngpus 2 needs GPU ranks, but --cpu asks for CPU ranks"),
        "{stderr}"
    );
    let (ok, _, stderr) = bench(&["--cpu", "-G", "5"]);
    assert!(!ok && stderr.contains("-G/--cudagraph 5"), "{stderr}");
    if rnccl::gpus().is_err() {
        let (ok, _, stderr) = bench(&["-g", "2"]);
        assert!(!ok, "{stderr}");
        assert!(
            stderr.contains("-g/--ngpus 2 needs GPU ranks, and there is no GPU here"),
            "{stderr}"
        );
        assert!(!stderr.contains("running on CPU ranks"), "{stderr}");
    }
    let (ok, _, stderr) = bench(&["--cpu", "--ranks", "3", "-t", "2"]);
    assert!(!ok && stderr.contains("give a multiple of 2"), "{stderr}");
    let (ok, _, stderr) = bench(&["--threads", "-t", "2"]);
    assert!(!ok && stderr.contains("cannot be used with"), "{stderr}");
}

/// The JSON document says how the ranks were laid out and where each one ran.
#[test]
fn json_names_threads_gpus_graph_and_devices() {
    let (ok, stdout, stderr) = bench(&["--cpu", "--threads", "--ranks", "2", "--format", "json"]);
    assert!(ok, "{stderr}");
    let doc: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let config = &doc["config"];
    assert_eq!(
        (&config["nthreads"], &config["ngpus"], &config["graph"]),
        (&2.into(), &1.into(), &0.into()),
        "{config}"
    );
    let devices = doc["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 2);
    for (r, d) in devices.iter().enumerate() {
        assert_eq!(d["rank"], r, "{d}");
        assert_eq!(d["device"], r, "{d}");
        assert_eq!(d["gpu"], false, "{d}");
        assert!(d["bus_id"].is_null(), "{d}");
        assert!(d["line"].as_str().unwrap().contains(" [cpu] "), "{d}");
    }
}

/// The header says which transport each rank uses to each peer it sends to, as NCCL's
/// connection lines name them; the JSON lists the same per device.
#[test]
fn bench_says_which_transport_each_pair_uses() {
    let args = [
        "bench", "--cpu", "--ranks", "3", "-e", "64", "-n", "1", "-w", "0",
    ];
    let (ok, stdout, stderr) = run(&[], &args);
    assert!(ok, "{stderr}");
    assert!(
        stdout.contains("# Transports (each rank to the peers it sends to on its rings)\n")
            && stdout.contains("#   SHM/direct/direct: 0->1 1->2 2->0\n"),
        "{stdout}"
    );
    let (ok, stdout, stderr) = run(&[("NCCL_SHM_DISABLE", "1")], &args);
    assert!(ok, "{stderr}");
    // Sockets say how many connections (one per channel) and sockets carry each pair.
    assert!(
        stdout.contains("#   NET/Socket, 2 channels × 4 sockets: 0->1 1->2 2->0\n"),
        "{stdout}"
    );
    let (ok, stdout, stderr) = run(&[], &[&QUICK[..], &["--format", "json"]].concat());
    assert!(ok, "{stderr}");
    let doc: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        doc["devices"][1]["sends"],
        serde_json::json!([{ "peer": 0, "transport": "P2P/direct pointer" }]),
        "{stdout}"
    );
}
