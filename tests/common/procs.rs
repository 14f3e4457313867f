//! Helpers for tests that run ranks as separate `rnccl` processes.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// A free TCP port on loopback for a rank to listen on, below the kernel's ephemeral range
/// (`net.ipv4.ip_local_port_range`): a port from that range, bound and released, can be handed
/// to any other socket of the machine (a parallel test's connect or port-0 listener) before the
/// rank binds it, where a port below it is only ever taken by an explicit bind. Each call in
/// this process takes the next port of a span that starts where the process id says, and
/// returns the first one that binds now.
pub(crate) fn free_port() -> u16 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let low: u32 = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(32768)
        .clamp(2048, 65535);
    let (first, span) = (low / 2, low - low / 2);
    let start = std::process::id().wrapping_mul(7919) % span;
    for _ in 0..span {
        let port = (first + (start + NEXT.fetch_add(1, Ordering::Relaxed)) % span) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free TCP port on 127.0.0.1 from {first} to {}", low - 1)
}

/// Starts `rnccl bench` as rank `rank` of `size` with torchrun-style variables, optionally
/// inside a network namespace.
#[allow(clippy::too_many_arguments)] // one parameter per launcher variable a test varies
pub(crate) fn spawn_rank(
    bin: &Path,
    netns: Option<&str>,
    rank: usize,
    size: usize,
    master: &str,
    port: u16,
    env: &[(&str, String)],
    args: &[&str],
) -> Child {
    let mut cmd = match netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns]).arg(bin);
            c
        }
        None => Command::new(bin),
    };
    cmd.args(["bench", "--cpu"])
        .args(args)
        .env("RANK", rank.to_string())
        .env("WORLD_SIZE", size.to_string())
        .env("MASTER_ADDR", master)
        .env("MASTER_PORT", port.to_string())
        .env_remove("NCCL_COMM_ID")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.spawn().expect("start rnccl")
}

/// Waits for `child` at most `limit`; kills it after that. Returns its output and whether it
/// finished by itself.
pub(crate) fn wait_for(child: Child, limit: Duration) -> (Output, bool) {
    let start = Instant::now();
    let mut child = child;
    loop {
        if child.try_wait().unwrap().is_some() {
            return (child.wait_with_output().unwrap(), true);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            return (child.wait_with_output().unwrap(), false);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Data rows of an nccl-tests table.
pub(crate) fn data_rows(stdout: &str) -> Vec<Vec<String>> {
    stdout
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect()
}

/// Asserts a successful table: every row has 13 columns and both `#wrong` columns are 0, and the
/// footer reports no wrong values.
pub(crate) fn assert_clean_table(stdout: &str) {
    let rows = data_rows(stdout);
    assert!(!rows.is_empty(), "no data rows in:\n{stdout}");
    for r in &rows {
        assert_eq!(r.len(), 13, "row shape: {r:?}");
        assert_eq!(
            (r[8].as_str(), r[12].as_str()),
            ("0", "0"),
            "wrong values in row {r:?}"
        );
    }
    assert!(stdout.contains("# Out of bounds values : 0 OK"), "{stdout}");
    assert!(stdout.contains("# Avg bus bandwidth    : "), "{stdout}");
}

/// Names of rnccl shared-memory segments currently in `/dev/shm`, leaving out counter pages
/// (`rnccl-stats-<pid>`): those of tests running beside this one come and go, a killed
/// process's stays until the next rnccl process sweeps it, and tests/stats_page.rs checks
/// their lifecycle.
pub(crate) fn shm_segments() -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("rnccl-") && !is_stats_page(n))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `name` is a counter page (`rnccl-stats-<pid>`).
pub(crate) fn is_stats_page(name: &str) -> bool {
    name.starts_with("rnccl-stats-")
}

/// True under continuous integration (`CI=true`, which `.ci/run` exports): there, a test that
/// cannot run must fail instead of skipping, or it proves nothing.
pub(crate) fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Whether a test that needs `what` may run: `true` when `available`; otherwise it prints why it
/// skips and returns `false`, except under CI, where it panics: a skipped test there would pass
/// while proving nothing.
pub(crate) fn require(available: bool, what: &str) -> bool {
    if available {
        return true;
    }
    assert!(
        !in_ci(),
        "this test needs {what}; under CI (CI=true) it must run, not skip"
    );
    println!("skipped: this test needs {what} (under CI=true it fails instead)");
    false
}

/// True when the tests run as root (network namespaces need it).
pub(crate) fn is_root() -> bool {
    nix_uid() == 0
}

fn nix_uid() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|u| u.parse().ok())
        })
        .unwrap_or(u32::MAX)
}
