//! Hangs made on purpose, and what the timeout report and `rnccl status` say about them: a rank
//! that skips a collective, a rank stopped with SIGSTOP (one host), and a link stalled with `tc`
//! between network namespaces. Each names the right rank, channel and peer.
//!
//! The ranks are this test binary started again as children ([`ROLE`] set), each one process
//! running [`rank_process`]: a loop of 64 KiB all_reduces, one of which a "skip" rank leaves
//! out.

mod common;

use std::net::SocketAddr;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::netns::TestHosts;
use common::procs::{free_port, is_root, require, wait_for};
use common::rnccl_bin;
use rnccl::{CommConfig, Communicator, RedOp, UniqueId};

/// Set for a child: what it does ("loop", or "skip:<rank>:<op>").
const ROLE: &str = "RNCCL_HANGS_ROLE";
/// Set for a child: how many all_reduces it runs.
const OPS: &str = "RNCCL_HANGS_OPS";

/// A rank, when this binary runs as a child of the tests below; nothing otherwise.
#[test]
fn rank_process() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    let var = |k: &str| std::env::var(k).unwrap_or_else(|_| panic!("{k} is not set"));
    let (rank, n): (usize, usize) = (
        var("RANK").parse().unwrap(),
        var("WORLD_SIZE").parse().unwrap(),
    );
    let ops: u64 = var(OPS).parse().unwrap();
    let skip = role.strip_prefix("skip:").map(|s| {
        let (r, op) = s.split_once(':').unwrap();
        (r.parse::<usize>().unwrap(), op.parse::<u64>().unwrap())
    });
    let id = UniqueId::from_comm_id(&var("NCCL_COMM_ID")).unwrap();
    let comm = match Communicator::init_rank(n, &id, rank, CommConfig::default()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("RANK {rank} INIT ERROR: {e}");
            std::process::exit(3);
        }
    };
    let send = vec![1f32; 16 << 10];
    let mut recv = vec![0f32; 16 << 10];
    for op in 1..=ops {
        if skip == Some((rank, op)) {
            eprintln!("RANK {rank} SKIPS OPERATION {op}");
            std::thread::sleep(Duration::from_secs(60));
            std::process::exit(0);
        }
        if let Err(e) = comm.all_reduce(&send, &mut recv, RedOp::Sum) {
            eprintln!("RANK {rank} ERROR: {e}");
            std::process::exit(4);
        }
    }
    std::process::exit(0);
}

/// Starts rank `rank` of `n` (in namespace `netns` when given) with `role`, NCCL_DEBUG=WARN,
/// a timeout of `timeout_s` and `extra` variables.
fn start(
    netns: Option<&str>,
    rank: usize,
    n: usize,
    root: &str,
    role: &str,
    timeout_s: u32,
    extra: &[(&str, String)],
) -> Child {
    let exe = std::env::current_exe().unwrap();
    let mut cmd = match netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns]).arg(&exe);
            c
        }
        None => Command::new(&exe),
    };
    cmd.args(["--exact", "rank_process", "--nocapture", "--test-threads=1"])
        .env(ROLE, role)
        .env(OPS, "100000000")
        .env("RANK", rank.to_string())
        .env("WORLD_SIZE", n.to_string())
        .env("NCCL_COMM_ID", root)
        .env("NCCL_DEBUG", "WARN")
        .env("RNCCL_TIMEOUT", timeout_s.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in extra {
        cmd.env(k, v);
    }
    cmd.spawn().unwrap()
}

/// The status address on process `pid`'s counter page, once it has one.
fn status_addr(pid: u32) -> SocketAddr {
    let start = Instant::now();
    loop {
        let page = std::fs::read(format!("/dev/shm/rnccl-stats-{pid}")).ok();
        if let Some(a) = page.and_then(|b| rnccl::stats::page::decode(&b).ok()?.status) {
            return a;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "pid {pid} never joined"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs `rnccl status` (in `netns` when given) on `addr` until it reports a problem (exit 1)
/// that mentions every one of `expect`, and returns its output.
fn status_until(netns: Option<&str>, addr: SocketAddr, expect: &[&str]) -> String {
    let start = Instant::now();
    loop {
        let mut cmd = match netns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns]).arg(rnccl_bin());
                c
            }
            None => Command::new(rnccl_bin()),
        };
        let out = cmd
            .args(["status", &addr.to_string(), "--stuck", "1"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        if out.status.code() == Some(1) && expect.iter().all(|e| text.contains(e)) {
            return text;
        }
        assert!(
            start.elapsed() < Duration::from_secs(40),
            "rnccl status never said {expect:?}; last:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Waits for `c` (at most 60 s) and returns its standard error.
fn finish(c: Child) -> (Output, String) {
    let (out, finished) = wait_for(c, Duration::from_secs(60));
    assert!(finished, "a rank hung");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, err)
}

#[test]
fn a_rank_that_skips_a_collective_is_named_by_the_timeout_and_by_status() {
    let root = format!("127.0.0.1:{}", free_port());
    let role = "skip:2:40";
    let ranks: Vec<Child> = (0..3)
        .map(|r| start(None, r, 3, &root, role, 5, &[]))
        .collect();
    let addr = status_addr(ranks[0].id());
    let late = "rank 2 (host ";
    let shown = status_until(
        None,
        addr,
        &[
            late,
            "has not reached it: its last operation, AllReduce #39",
            "runs nothing now",
        ],
    );
    assert!(shown.contains("problems:"), "{shown}");
    let mut ranks = ranks.into_iter();
    for r in 0..2 {
        let (out, err) = finish(ranks.next().unwrap());
        assert_eq!(out.status.code(), Some(4), "rank {r}: {err}");
        assert!(
            err.contains("timeout after 5.0 s AllReduce #40")
                && err.contains("job status: operation AllReduce #40")
                && err.contains("rank 2 (host ")
                && err.contains("has not reached it: its last operation, AllReduce #39"),
            "rank {r}: {err}"
        );
    }
    // The late rank is not stuck, so it does not time out: the others' report reached its log.
    let mut late_rank = ranks.next().unwrap();
    late_rank.kill().unwrap();
    let (_, err) = finish(late_rank);
    assert!(
        err.contains("RANK 2 SKIPS OPERATION 40")
            && err.contains("NCCL WARN hang report from a rank of this job")
            && err.contains("has not reached it"),
        "{err}"
    );
}

#[test]
fn a_stopped_rank_is_named_as_not_answering() {
    let root = format!("127.0.0.1:{}", free_port());
    let ranks: Vec<Child> = (0..3)
        .map(|r| start(None, r, 3, &root, "loop", 6, &[]))
        .collect();
    let addr = status_addr(ranks[0].id());
    status_addr(ranks[1].id());
    std::thread::sleep(Duration::from_millis(500));
    let stopped = ranks[1].id();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(stopped as i32),
        nix::sys::signal::Signal::SIGSTOP,
    )
    .unwrap();
    let who = "rank 1 (host ";
    let shown = status_until(None, addr, &[who, "did not answer", "stopped or hung"]);
    assert!(
        shown.contains(&format!("pid {stopped}) did not answer")),
        "{shown}"
    );
    let mut ranks: Vec<Option<Child>> = ranks.into_iter().map(Some).collect();
    for r in [0, 2] {
        let (out, err) = finish(ranks[r].take().unwrap());
        assert_eq!(out.status.code(), Some(4), "rank {r}: {err}");
        assert!(
            err.contains("timeout after 6.0 s")
                && err.contains(&format!("pid {stopped}) did not answer")),
            "rank {r}: {err}"
        );
    }
    let mut c = ranks[1].take().unwrap();
    c.kill().unwrap();
    let _ = c.wait();
}

#[test]
fn a_stalled_link_between_hosts_is_named_with_its_channel_and_peers() {
    if !require(is_root(), "root, to create network namespaces") {
        return;
    }
    let h = TestHosts::new("h", 3).expect("test hosts");
    let root = format!("{}:{}", h.addrs[0], 22000 + std::process::id() % 20000);
    let ranks: Vec<Child> = (0..3)
        .map(|r| {
            let env = [
                ("NCCL_HOSTID", format!("host-{r}")),
                ("RNCCL_SILENT_LINK", "12".to_string()),
            ];
            start(Some(&h.hosts[r]), r, 3, &root, "loop", 8, &env)
        })
        .collect();
    for c in &ranks {
        status_addr(c.id());
    }
    std::thread::sleep(Duration::from_millis(500));
    h.stall(0, 2, 0).expect("tc");
    // Asked from host 1, whose links are untouched.
    let addr = status_addr(ranks[1].id());
    let shown = status_until(Some(&h.hosts[1]), addr, &["carries nothing"]);
    let stalled = shown
        .lines()
        .find(|l| l.contains("carries nothing"))
        .unwrap();
    assert!(
        (stalled.contains("link from rank 0 (") && stalled.contains(") to rank 2 ("))
            || (stalled.contains("link from rank 2 (") && stalled.contains(") to rank 0 (")),
        "the stalled pair is 0 and 2: {shown}"
    );
    assert!(
        stalled.contains("(NET/Socket)") && stalled.contains("on channel"),
        "{shown}"
    );
    // Rank 0's collective ends either way the link's congestion control makes it: no progress
    // at all for RNCCL_TIMEOUT (BBR keeps the 8 kbit/s queue short: the last bytes arrive, then
    // nothing), or the link gone silent after RNCCL_SILENT_LINK (CUBIC fills the deep queue,
    // and the keepalive probes wait behind it). Both name the channel and the peer.
    let mut ranks = ranks.into_iter();
    let (_, err) = finish(ranks.next().unwrap());
    assert!(
        (err.contains("timeout after 8.0 s") || err.contains("went silent"))
            && err.contains("on channel")
            && err.contains("rank 2 ("),
        "{err}"
    );
    for c in ranks {
        let _ = finish(c);
    }
}
