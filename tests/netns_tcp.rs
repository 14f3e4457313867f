//! One process per rank over TCP between network namespaces (two joined by veth, three through
//! a bridge), each namespace a separate "host" (`NCCL_HOSTID`). Needs root; without it the
//! tests print why they skip, except under CI (`CI=true`), where they fail.

mod common;

use std::time::Duration;

use common::netns::TestHosts;
use common::procs::{assert_clean_table, free_port, is_root, require, spawn_rank, wait_for};
use common::rnccl_bin;

fn hosts(tag: &str, n: usize) -> Option<TestHosts> {
    if !require(
        is_root(),
        "root, to create network namespaces (run the suite as root)",
    ) {
        return None;
    }
    match TestHosts::new(tag, n) {
        Ok(h) => Some(h),
        Err(e) => panic!("cannot create test hosts (is iproute2 installed?): {e}"),
    }
}

/// Runs one bench across `h`'s hosts, started as torchrun would (`extra_env` may add or blank
/// variables; `{rank}` in a value becomes the rank); returns rank 0's stdout after checking
/// every rank succeeded.
fn run(h: &TestHosts, extra_env: &[(&str, String)], args: &[&str]) -> String {
    let bin = rnccl_bin();
    let port = 20000 + (std::process::id() % 20000) as u16;
    let n = h.hosts.len();
    let children: Vec<_> = (0..n)
        .map(|r| {
            let mut env: Vec<(&str, String)> = vec![("NCCL_HOSTID", format!("node-{r}"))];
            env.extend(
                extra_env
                    .iter()
                    .map(|(k, v)| (*k, v.replace("{rank}", &r.to_string()))),
            );
            spawn_rank(&bin, Some(&h.hosts[r]), r, n, &h.addrs[0], port, &env, args)
        })
        .collect();
    let mut rank0 = String::new();
    for (r, c) in children.into_iter().enumerate() {
        let (out, finished) = wait_for(c, Duration::from_secs(180));
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            finished && out.status.success(),
            "rank {r} failed ({:?})\nstdout:\n{stdout}\nstderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        if r == 0 {
            rank0 = stdout;
        }
    }
    rank0
}

/// Starts ranks 0 and 1 of a bench on `h`'s two hosts, each its own `NCCL_HOSTID`, with `env`
/// and `args`.
fn spawn_two(
    h: &TestHosts,
    port: u16,
    env: &[(&str, String)],
    args: &[&str],
) -> Vec<std::process::Child> {
    let bin = rnccl_bin();
    (0..2)
        .map(|r| {
            let mut all = vec![("NCCL_HOSTID", format!("node-{r}"))];
            all.extend(env.iter().cloned());
            spawn_rank(&bin, Some(&h.hosts[r]), r, 2, &h.addrs[0], port, &all, args)
        })
        .collect()
}

#[test]
fn two_hosts_over_veth() {
    let Some(h) = hosts("a", 2) else { return };
    let _ = free_port();
    for coll in [
        "all_reduce",
        "all_gather",
        "reduce_scatter",
        "broadcast",
        "reduce",
        "alltoall",
        "gather",
        "scatter",
        "sendrecv",
    ] {
        let out = run(
            &h,
            &[],
            &[
                coll, "-b", "4", "-e", "2M", "-f", "32", "-d", "all", "-n", "2", "-w", "1", "-T",
                "60",
            ],
        );
        assert_clean_table(&out);
        // The header says how the pair's bytes cross: the transport, its connections (one per
        // channel) and the sockets of each (4 when NCCL_NSOCKS_PERTHREAD is auto).
        let pair = out
            .lines()
            .find(|l| l.starts_with("#   NET/Socket"))
            .unwrap_or_else(|| panic!("no NET/Socket line in the header:\n{out}"));
        assert!(
            pair.contains("channel") && pair.contains("× 4 sockets: 0->1 1->0"),
            "{pair}"
        );
    }
    // Several sockets and helper threads per connection, and the JSON traffic view.
    let out = run(
        &h,
        &[
            ("NCCL_SOCKET_NTHREADS", "2".into()),
            ("NCCL_NSOCKS_PERTHREAD", "2".into()),
        ],
        &[
            "-b", "32M", "-e", "32M", "-o", "all", "--format", "json", "-n", "3", "-w", "1",
        ],
    );
    let doc: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(doc["out_of_bounds"]["count"], 0, "{out}");
    let links = doc["rnccl"]["traffic_rank0"].as_array().unwrap();
    assert!(
        !links.is_empty() && links.iter().all(|l| l["transport"] == "Tcp"),
        "{links:?}"
    );
    // Started as srun starts tasks, with no rendezvous address: the root is found on the first
    // host of the step's node list.
    let srun = [
        ("RANK", String::new()),
        ("WORLD_SIZE", String::new()),
        ("MASTER_ADDR", String::new()),
        ("MASTER_PORT", String::new()),
        ("SLURM_PROCID", "{rank}".to_string()),
        ("SLURM_NTASKS", "2".to_string()),
        ("SLURM_NNODES", "2".to_string()),
        ("SLURM_JOB_ID", std::process::id().to_string()),
        (
            "SLURM_STEP_NODELIST",
            format!("{},{}", h.addrs[0], h.addrs[1]),
        ),
    ];
    assert_clean_table(&run(
        &h,
        &srun,
        &["-b", "8", "-e", "1M", "-f", "16", "-n", "2"],
    ));
    // Open MPI's variables with NCCL_COMM_ID naming rank 0's host.
    let mpirun = [
        ("RANK", String::new()),
        ("WORLD_SIZE", String::new()),
        ("OMPI_COMM_WORLD_RANK", "{rank}".to_string()),
        ("OMPI_COMM_WORLD_SIZE", "2".to_string()),
        ("NCCL_COMM_ID", format!("{}:29511", h.addrs[0])),
    ];
    assert_clean_table(&run(
        &h,
        &mpirun,
        &["-b", "8", "-e", "1M", "-f", "16", "-n", "2"],
    ));
    // NCCL_SOCKET_IFNAME selects the veth by exact name.
    assert_clean_table(&run(
        &h,
        &[("NCCL_SOCKET_IFNAME", "=rnv0".into())],
        &["-b", "1M", "-e", "1M", "-n", "2"],
    ));
}

#[test]
fn three_hosts_through_a_bridge() {
    let Some(h) = hosts("b", 3) else { return };
    for coll in [
        "all_reduce",
        "all_gather",
        "reduce_scatter",
        "alltoall",
        "broadcast",
    ] {
        let out = run(
            &h,
            &[],
            &[
                coll, "-b", "1", "-e", "8M", "-f", "64", "-o", "all", "-d", "all", "-n", "2", "-w",
                "1", "-T", "60",
            ],
        );
        assert_clean_table(&out);
    }
}

/// A link whose far host stops answering mid-run (its interface goes down, as a pulled cable
/// would) fails the rank on the near side within `RNCCL_SILENT_LINK`, naming the transport, the
/// peer and its address, long before `RNCCL_TIMEOUT`.
#[test]
fn a_silent_link_is_named_long_before_the_timeout() {
    let Some(h) = hosts("s", 2) else { return };
    let port = 21000 + (std::process::id() % 20000) as u16;
    let args = [
        "-b",
        "1M",
        "-e",
        "1M",
        "-n",
        "100000000",
        "-w",
        "0",
        "-T",
        "300",
    ];
    let children = spawn_two(&h, port, &[("RNCCL_SILENT_LINK", "2".to_string())], &args);
    // Both ranks joined once both publish their counter pages (/dev/shm is shared).
    let pids: Vec<u32> = children.iter().map(|c| c.id()).collect();
    let start = std::time::Instant::now();
    while !pids
        .iter()
        .all(|p| std::path::Path::new(&format!("/dev/shm/rnccl-stats-{p}")).exists())
    {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the ranks never joined"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(500));
    let down = std::process::Command::new("ip")
        .args(["-n", &h.hosts[1], "link", "set", "rnv0", "down"])
        .status()
        .unwrap();
    assert!(down.success());
    let cut = std::time::Instant::now();
    let mut children = children.into_iter();
    let (out, finished) = wait_for(children.next().unwrap(), Duration::from_secs(60));
    let took = cut.elapsed();
    let _ = wait_for(children.next().unwrap(), Duration::from_secs(5));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(finished && !out.status.success(), "{stderr}");
    assert!(
        stderr.contains("went silent") && stderr.contains(&format!("at {}:", h.addrs[1])),
        "{stderr}"
    );
    assert!(took < Duration::from_secs(20), "{took:?}: {stderr}");
}

/// The established TCP sockets of namespace `ns` that sent at least `min_sent` bytes, each as its
/// congestion control and `ss -tin` line (iproute2's `ss` prints the algorithm first on a
/// socket's info line).
fn busy_sockets(ns: &str, min_sent: u64) -> Vec<(String, String)> {
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", ns, "ss", "-tin", "state", "established"])
        .output()
        .expect("ss (iproute2)");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut found = Vec::new();
    for info in text.lines().filter(|l| l.starts_with(char::is_whitespace)) {
        let sent = info
            .split_whitespace()
            .find_map(|w| w.strip_prefix("bytes_sent:"))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
        if sent >= min_sent {
            let cc = info.split_whitespace().next().unwrap_or("").to_string();
            found.push((cc, info.trim().to_string()));
        }
    }
    found
}

/// `RNCCL_SOCKET_CC` names the data sockets' congestion control: the sockets that carry the
/// bytes use it (read with `ss` while the ranks run), `NCCL_DEBUG=INFO` says so, and a name the
/// kernel lacks fails every rank at once with a message saying what to pick.
#[test]
fn data_sockets_use_the_congestion_control_rnccl_picks() {
    let Some(h) = hosts("c", 2) else { return };
    let port = 22000 + (std::process::id() % 20000) as u16;
    let args = ["-b", "32M", "-e", "32M", "-n", "20", "-w", "1", "-c", "0"];
    let spawn = |cc: &str, port: u16| {
        let env = [
            ("RNCCL_SOCKET_CC", cc.to_string()),
            ("NCCL_DEBUG", "INFO".to_string()),
        ];
        spawn_two(&h, port, &env, &args)
    };
    // reno: built into every kernel and allowed to every process.
    let mut children = spawn("reno", port);
    let start = std::time::Instant::now();
    let mut seen = Vec::new();
    while seen.is_empty() && start.elapsed() < Duration::from_secs(120) {
        if children.iter_mut().all(|c| c.try_wait().unwrap().is_some()) {
            break;
        }
        seen = busy_sockets(&h.hosts[0], 1 << 20);
        std::thread::sleep(Duration::from_millis(20));
    }
    let outs: Vec<_> = children
        .into_iter()
        .map(|c| wait_for(c, Duration::from_secs(120)))
        .collect();
    for (r, (out, finished)) in outs.iter().enumerate() {
        assert!(
            *finished && out.status.success(),
            "rank {r}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert!(!seen.is_empty(), "no data socket seen sending");
    assert!(seen.iter().all(|(cc, _)| cc == "reno"), "{seen:#?}");
    let log = String::from_utf8_lossy(&outs[0].0.stderr);
    assert!(
        log.contains("congestion control reno (RNCCL_SOCKET_CC=reno)"),
        "{log}"
    );
    // A name no kernel has: both ranks fail fast, naming the knob and what is loaded.
    let outs: Vec<_> = spawn("no-such-cc", port + 1)
        .into_iter()
        .map(|c| wait_for(c, Duration::from_secs(60)))
        .collect();
    for (r, (out, finished)) in outs.iter().enumerate() {
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(*finished && !out.status.success(), "rank {r}: {err}");
        assert!(
            err.contains(
                "RNCCL_SOCKET_CC=no-such-cc: this kernel has no such congestion control (loaded: "
            ) && err.contains("reno"),
            "rank {r}: {err}"
        );
    }
}
