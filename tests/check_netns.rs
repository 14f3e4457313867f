//! `rnccl check` across network namespaces, each namespace a host: started as a host list
//! through `--rsh 'ip netns exec {host} …'` and as a launcher would start it. One pair's link
//! is throttled with `tc` (htb + a u32 filter on the peer's address, both ways) to a rate far
//! below the unthrottled veths', and the check must flag exactly that pair. The median rule
//! is set loose (`--below-median 0.1`): on a 2-core machine unthrottled pairs measured at once
//! vary by up to 4×, while the throttled pair is 40× slower or more. Needs root; without it the
//! tests print why they skip, except under CI (`CI=true`), where they fail.

mod common;

use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::netns::TestHosts;
use common::procs::{is_root, require, wait_for};
use common::rnccl_bin;
use serde_json::Value;

/// One check at a time: they measure bandwidth, and two at once on two cores skew each other.
static SERIAL: Mutex<()> = Mutex::new(());

/// The rate of a throttled pair, Mbit/s.
const THROTTLE_MBIT: u32 = 40;

fn hosts(tag: &str, n: usize, rails: usize) -> Option<TestHosts> {
    if !require(
        is_root(),
        "root, to create network namespaces (run the suite as root)",
    ) {
        return None;
    }
    match TestHosts::with_rails(tag, n, rails) {
        Ok(h) => Some(h),
        Err(e) => panic!("cannot create test hosts (is iproute2 installed?): {e}"),
    }
}

/// The remote-start template for namespace hosts: each one its own host to NCCL.
const RSH: &str = "ip netns exec {host} env NCCL_HOSTID={host}";

/// The flags every pairwise test gives: one rank per host, 1 MiB, three timed iterations, and
/// a pair flagged below a tenth of the median.
const PAIRWISE: &[&str] = &[
    "--pairwise",
    "--ranks-per-host",
    "1",
    "-b",
    "1M",
    "-n",
    "3",
    "-w",
    "1",
    "--below-median",
    "0.1",
];

/// `rnccl check --cpu` over the comma-separated `hosts`, started with the `rsh` template.
fn on_hosts(hosts: &str, rsh: &str, args: &[&str]) -> (Output, Duration) {
    let mut all = vec!["--cpu", "--hosts", hosts, "--rsh", rsh];
    all.extend_from_slice(args);
    check(&all)
}

/// Runs `rnccl check` with `args` (at most 120 s); returns its output after checking it ended.
fn check(args: &[&str]) -> (Output, Duration) {
    let start = Instant::now();
    let child = Command::new(rnccl_bin())
        .arg("check")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start rnccl");
    let (out, finished) = wait_for(child, Duration::from_secs(120));
    assert!(
        finished,
        "rnccl check {args:?} did not finish in 120 s\nstdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out, start.elapsed())
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The pairs of a rail report: (hosts, busbw, flagged).
fn pairs(rail: &Value) -> Vec<(Vec<String>, Option<f64>, bool)> {
    rail["pairs"]
        .as_array()
        .expect("pairs")
        .iter()
        .map(|p| {
            let hosts = p["hosts"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| h.as_str().unwrap().to_string())
                .collect();
            (hosts, p["busbw"].as_f64(), p["flagged"].as_bool().unwrap())
        })
        .collect()
}

#[test]
fn pairwise_flags_exactly_the_throttled_pair() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(h) = hosts("ck", 4, 1) else { return };
    h.throttle(1, 2, 0, THROTTLE_MBIT).expect("tc");
    let list = h.hosts.join(",");
    let (out, took) = on_hosts(&list, RSH, &[PAIRWISE, &["--format", "json"]].concat());
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let doc: Value = serde_json::from_str(&stdout).expect("JSON report");
    assert_eq!(doc["exit_code"], 1);
    assert_eq!(doc["healthy"], false);
    assert_eq!(doc["problems"].as_array().unwrap().len(), 0, "{stdout}");
    let rails = doc["rails"].as_array().unwrap();
    assert_eq!(rails.len(), 1, "one NIC per host: the default interface");
    assert_eq!(rails[0]["rail"], Value::Null);
    let p = pairs(&rails[0]);
    assert_eq!(p.len(), 6, "every pair of 4 hosts once: {p:?}");
    let flagged: Vec<&Vec<String>> = p.iter().filter(|x| x.2).map(|x| &x.0).collect();
    assert_eq!(
        flagged,
        [&vec![h.hosts[1].clone(), h.hosts[2].clone()]],
        "{stdout}"
    );
    // The matrix: hosts × hosts, symmetric, the throttled pair's cell far below the others.
    let m = rails[0]["matrix"].as_array().unwrap();
    assert_eq!(m.len(), 4);
    let at = |a: usize, b: usize| m[a][b].as_f64();
    for a in 0..4 {
        assert_eq!(at(a, a), None, "one rank per host: nothing alone");
        for b in 0..4 {
            assert_eq!(at(a, b), at(b, a));
        }
    }
    let slow = at(1, 2).expect("measured");
    for (a, b) in [(0, 1), (0, 2), (0, 3), (1, 3), (2, 3)] {
        assert!(at(a, b).expect("measured") > 10.0 * slow, "{stdout}");
    }
    // 40 Mbit/s is 0.005 GB/s; busbw of a 2-rank all_reduce equals its algbw (htb's bursts
    // may add a little).
    assert!(
        slow < 0.01,
        "{slow} GB/s over a {THROTTLE_MBIT} Mbit/s link"
    );
    assert!(took < Duration::from_secs(60), "took {took:?}");
}

#[test]
fn a_clean_run_exits_zero_with_the_matrix() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(h) = hosts("cc", 3, 1) else { return };
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("check.json");
    let list = h.hosts.join(",");
    let (out, _) = on_hosts(
        &list,
        RSH,
        &[PAIRWISE, &["-J", json.to_str().unwrap()]].concat(),
    );
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{}",
        text(&out.stderr)
    );
    assert!(
        stdout.contains("check passed: 3 pairs measured, nothing flagged"),
        "{stdout}"
    );
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(
        (doc["exit_code"].as_u64(), doc["healthy"].as_bool()),
        (Some(0), Some(true))
    );
    let names: Vec<&str> = doc["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, h.hosts);
    let m = doc["rails"][0]["matrix"].as_array().unwrap();
    for a in 0..3 {
        assert!(m[a][a].is_null(), "one rank per host: nothing alone");
        for b in (0..3).filter(|&b| b != a) {
            assert!(m[a][b].as_f64().is_some_and(|x| x > 0.0), "{m:?}");
        }
    }
    let pair = &doc["rails"][0]["pairs"][0];
    assert_eq!(pair["status"], "measured");
    assert_eq!(pair["sizes"][0]["size"], 1 << 20);
    assert_eq!(pair["sizes"][0]["wrong"], 0);
    assert_eq!(pair["reasons"], serde_json::json!([]));
}

/// Hosts alone (two ranks each, the CPU default) on the matrix's diagonal, and the quick
/// pairing. The median rule is off: three hosts' ranks measured alone at once on one 2-core
/// machine starve one another by 10× or more, which real hosts do not.
#[test]
fn hosts_alone_on_the_diagonal_and_one_pair_per_host() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(h) = hosts("cq", 3, 1) else { return };
    let list = h.hosts.join(",");
    let (out, _) = on_hosts(
        &list,
        RSH,
        &[
            "--pairwise-quick",
            "-b",
            "256K",
            "-n",
            "3",
            "-w",
            "1",
            "--below-median",
            "0",
            "--format",
            "json",
        ],
    );
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    let doc: Value = serde_json::from_str(&stdout).unwrap();
    assert!(
        doc["hosts"]
            .as_array()
            .unwrap()
            .iter()
            .all(|x| x["ranks"] == 2)
    );
    let alone = doc["alone"].as_array().unwrap();
    assert_eq!(alone.len(), 3);
    for a in alone {
        assert_eq!(a["ranks"], 2);
        assert_eq!(a["sizes"][0]["wrong"], 0);
        assert!(a["busbw"].as_f64().is_some_and(|x| x > 0.0), "{a}");
    }
    // Quick pairing of 3 hosts: (0, 1), then the host left over with host 0; 4 ranks a pair.
    let m = doc["rails"][0]["matrix"].as_array().unwrap();
    let at = |a: usize, b: usize| m[a][b].as_f64();
    assert!(
        at(0, 1).is_some() && at(0, 2).is_some() && at(1, 2).is_none(),
        "{m:?}"
    );
    assert!((0..3).all(|i| at(i, i).is_some()), "{m:?}");
    assert!(
        doc["rails"][0]["pairs"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["ranks"] == 4)
    );
}

#[test]
fn a_throttled_rail_is_flagged_on_that_rail_only() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(h) = hosts("cr", 3, 2) else { return };
    h.throttle(0, 1, 1, THROTTLE_MBIT).expect("tc");
    let list = h.hosts.join(",");
    let (out, _) = on_hosts(&list, RSH, &[PAIRWISE, &["--format", "json"]].concat());
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    let doc: Value = serde_json::from_str(&stdout).unwrap();
    let rails = doc["rails"].as_array().unwrap();
    let names: Vec<&str> = rails.iter().map(|r| r["rail"].as_str().unwrap()).collect();
    assert_eq!(names, ["rnv0", "rnv1"], "auto: one rail per NIC");
    assert!(pairs(&rails[0]).iter().all(|p| !p.2), "{stdout}");
    let p = pairs(&rails[1]);
    assert_eq!(p.len(), 3);
    let flagged: Vec<&Vec<String>> = p.iter().filter(|x| x.2).map(|x| &x.0).collect();
    assert_eq!(
        flagged,
        [&vec![h.hosts[0].clone(), h.hosts[1].clone()]],
        "{stdout}"
    );
    assert_eq!(doc["hosts"][0]["nics"], serde_json::json!(["rnv0", "rnv1"]));
}

#[test]
fn an_unreachable_host_is_named_and_the_rest_is_checked() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(h) = hosts("cu", 2, 1) else { return };
    let ghost = format!("rnghost{}", std::process::id());
    let list = format!("{},{ghost},{}", h.hosts[0], h.hosts[1]);
    let (out, took) = on_hosts(
        &list,
        RSH,
        &[
            "--pairwise-quick",
            "--ranks-per-host",
            "1",
            "-b",
            "64K",
            "-n",
            "2",
            "-w",
            "1",
        ],
    );
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    let line = stdout
        .lines()
        .find(|l| l.starts_with(&format!("FAILED   host {ghost}: could not be started")))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(line.contains("Cannot open network namespace"), "{line}");
    // The two live hosts were paired and measured: the first row reads `h0 . . <busbw>`.
    let row: Vec<&str> = stdout
        .lines()
        .find(|l| l.starts_with(&h.hosts[0]))
        .unwrap_or_else(|| panic!("{stdout}"))
        .split_whitespace()
        .collect();
    assert_eq!(&row[1..3], [".", "."], "{stdout}");
    assert!(row[3].parse::<f64>().is_ok_and(|b| b > 0.0), "{stdout}");
    assert!(stdout.contains("1 host problem"), "{stdout}");
    assert!(took < Duration::from_secs(30), "took {took:?}");
}

/// A worker killed mid-check is named with its signal; the others stop soon after, and the
/// check ends instead of waiting out its timeouts.
#[test]
fn a_worker_killed_mid_check_is_named() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(h) = hosts("ck9", 3, 1) else { return };
    let victim = &h.hosts[2];
    // The last host's worker is killed 1.5 s after it starts, in the middle of the sizes.
    let rsh = format!(
        "sh -c 'case {{host}} in {victim}) exec timeout -s KILL 1.5 ip netns exec {{host}} env NCCL_HOSTID={{host}} \"$0\" \"$@\";; *) exec ip netns exec {{host}} env NCCL_HOSTID={{host}} \"$0\" \"$@\";; esac'"
    );
    let list = h.hosts.join(",");
    let (out, took) = on_hosts(
        &list,
        &rsh,
        &[
            "--pairwise",
            "--ranks-per-host",
            "1",
            "-b",
            "16M",
            "-n",
            "10000",
            "-T",
            "60",
        ],
    );
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    let first = stdout
        .lines()
        .find(|l| l.starts_with("FAILED"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        first.starts_with(&format!(
            "FAILED   host {victim}: its worker failed (exit status 137)"
        )) || first.contains("killed by signal 9"),
        "{stdout}"
    );
    for host in &h.hosts {
        let times = stdout
            .lines()
            .filter(|l| l.starts_with(&format!("FAILED   host {host}:")))
            .count();
        assert!(times <= 1, "{host} reported {times} times:\n{stdout}");
    }
    assert!(took < Duration::from_secs(30), "took {took:?}:\n{stdout}");
}

/// Started as torchrun starts processes: one rank per namespace, rank 0 prints the report.
#[test]
fn under_a_launcher_rank_0_reports_the_throttled_pair() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(h) = hosts("cl", 3, 1) else { return };
    h.throttle(0, 2, 0, THROTTLE_MBIT).expect("tc");
    // Ports are per namespace: any free one in rank 0's will do.
    let port = "29517";
    let n = h.hosts.len();
    let children: Vec<_> = (0..n)
        .map(|r| {
            Command::new("ip")
                .args(["netns", "exec", &h.hosts[r]])
                .arg(rnccl_bin())
                .args([
                    "check",
                    "--cpu",
                    "--pairwise",
                    "-b",
                    "1M",
                    "-n",
                    "3",
                    "-w",
                    "1",
                    "--below-median",
                    "0.1",
                ])
                .env("RANK", r.to_string())
                .env("WORLD_SIZE", n.to_string())
                .env("MASTER_ADDR", &h.addrs[0])
                .env("MASTER_PORT", port)
                .env("NCCL_HOSTID", format!("node{r}"))
                .env_remove("NCCL_COMM_ID")
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start rnccl")
        })
        .collect();
    let outs: Vec<Output> = children
        .into_iter()
        .map(|c| {
            let (out, finished) = wait_for(c, Duration::from_secs(120));
            assert!(finished, "{}", text(&out.stderr));
            out
        })
        .collect();
    let stdout = text(&outs[0].stdout);
    assert_eq!(
        outs[0].status.code(),
        Some(1),
        "{stdout}\n{}",
        text(&outs[0].stderr)
    );
    for o in &outs[1..] {
        assert!(o.status.success(), "{}", text(&o.stderr));
        assert!(o.stdout.is_empty(), "only rank 0 prints");
    }
    let flagged: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("FLAGGED"))
        .collect();
    assert_eq!(flagged.len(), 1, "{stdout}");
    assert!(
        flagged[0].starts_with("FLAGGED  pair node0 <-> node2:"),
        "{stdout}"
    );
}

/// Killing the coordinator stops every worker: their standard input closes, and nothing is
/// left running on the hosts.
#[test]
fn workers_stop_when_the_coordinator_dies() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(h) = hosts("co", 2, 1) else { return };
    let pids = |ns: &str| -> usize {
        let out = Command::new("ip")
            .args(["netns", "pids", ns])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).lines().count()
    };
    let list = h.hosts.join(",");
    let mut coordinator = Command::new(rnccl_bin())
        .args([
            "check",
            "--cpu",
            "--hosts",
            &list,
            "--rsh",
            RSH,
            "--pairwise",
            "--ranks-per-host",
            "1",
            "-b",
            "16M",
            "-n",
            "100000",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start rnccl");
    let until = Instant::now() + Duration::from_secs(30);
    while h.hosts.iter().any(|ns| pids(ns) == 0) {
        assert!(Instant::now() < until, "the workers never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Let them get into the measurement.
    std::thread::sleep(Duration::from_millis(500));
    coordinator.kill().unwrap();
    coordinator.wait().unwrap();
    let until = Instant::now() + Duration::from_secs(5);
    while h.hosts.iter().any(|ns| pids(ns) > 0) {
        assert!(
            Instant::now() < until,
            "workers still running 5 s after their coordinator died"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
