//! One process per rank over shared memory (2 and 4 ranks): the real `rnccl bench` binary runs
//! every collective with every data type and operation and checks the results; nothing is left
//! in `/dev/shm` afterwards. The tests take turns ([`one_at_a_time`]): a test's check of
//! `/dev/shm` would otherwise count another's live segments as left behind.

mod common;

use std::process::Command;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use common::procs::{assert_clean_table, shm_segments};
use common::rnccl_bin;

/// Held for a whole test: the tests of this binary run one at a time (see the header).
fn one_at_a_time() -> MutexGuard<'static, ()> {
    static TURN: Mutex<()> = Mutex::new(());
    TURN.lock().unwrap_or_else(|p| p.into_inner())
}

const COLLECTIVES: [&str; 9] = [
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "broadcast",
    "reduce",
    "alltoall",
    "gather",
    "scatter",
    "sendrecv",
];

fn bench(ranks: usize, coll: &str, extra: &[&str]) -> String {
    let out = Command::new(rnccl_bin())
        .args([
            "bench",
            "--cpu",
            coll,
            "--ranks",
            &ranks.to_string(),
            "-T",
            "60",
            "-n",
            "2",
            "-w",
            "1",
        ])
        .args(extra)
        .env_remove("NCCL_COMM_ID")
        .output()
        .expect("run rnccl bench");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "rnccl bench {coll} --ranks {ranks} failed\nstdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn every_collective_type_and_op_over_shared_memory() {
    let _turn = one_at_a_time();
    let before = shm_segments();
    for ranks in [2, 4] {
        for coll in COLLECTIVES {
            let stdout = bench(
                ranks,
                coll,
                &[
                    "-b", "1", "-e", "300K", "-f", "17", "-d", "all", "-o", "all", "-r", "all",
                ],
            );
            assert_clean_table(&stdout);
            assert!(stdout.contains(&format!("# Collective test starting: {coll}_perf")));
            // nccl-tests' header echoes the requested range (300K = 307200), not the last size.
            assert!(
                stdout.contains("minBytes 1 maxBytes 307200 step: 17(factor)"),
                "{stdout}"
            );
            let pids: std::collections::BTreeSet<&str> = stdout
                .lines()
                .filter(|l| l.starts_with("#  Rank"))
                .filter_map(|l| l.split_whitespace().nth(6))
                .collect();
            assert_eq!(pids.len(), ranks, "one process per rank: {stdout}");
        }
    }
    // Large buffers stream through the FIFOs many times over.
    assert_clean_table(&bench(2, "all_reduce", &["-b", "64M", "-e", "64M"]));
    assert_clean_table(&bench(
        4,
        "all_gather",
        &["-b", "48M", "-e", "48M", "-d", "bfloat16"],
    ));
    std::thread::sleep(Duration::from_millis(100));
    let leaked: Vec<String> = shm_segments()
        .into_iter()
        .filter(|s| !before.contains(s))
        .collect();
    assert!(
        leaked.is_empty(),
        "shared-memory segments left behind: {leaked:?}"
    );
}

/// `-R 2`: buffers from `mem_alloc` registered as windows, read directly by peer processes;
/// collectives without a direct form run their FIFO plans on the same memory. Window names
/// exist in `/dev/shm` only while ranks register, so nothing is left afterwards.
#[test]
fn windows_between_processes() {
    let _turn = one_at_a_time();
    let before = shm_segments();
    for ranks in [2, 3] {
        for coll in COLLECTIVES {
            let stdout = bench(
                ranks,
                coll,
                &[
                    "-b", "1", "-e", "1M", "-f", "61", "-d", "all", "-o", "all", "-r", "all", "-R",
                    "2",
                ],
            );
            assert_clean_table(&stdout);
        }
    }
    assert_clean_table(&bench(
        2,
        "all_reduce",
        &["-b", "40M", "-e", "40M", "-R", "2"],
    ));
    assert_clean_table(&bench(
        3,
        "all_reduce",
        &["-b", "8M", "-e", "8M", "-m", "3", "-R", "2"],
    ));
    std::thread::sleep(Duration::from_millis(100));
    let leaked: Vec<String> = shm_segments()
        .into_iter()
        .filter(|s| !before.contains(s))
        .collect();
    assert!(leaked.is_empty(), "names left in /dev/shm: {leaked:?}");
}

#[test]
fn threads_mode_and_sockets_between_processes_of_one_host() {
    let _turn = one_at_a_time();
    let out = Command::new(rnccl_bin())
        .args([
            "bench",
            "--cpu",
            "all_reduce",
            "--ranks",
            "3",
            "--threads",
            "-e",
            "4M",
            "-f",
            "8",
            "-o",
            "all",
            "-n",
            "2",
            "-w",
            "1",
            "-T",
            "60",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_clean_table(&String::from_utf8_lossy(&out.stdout));
    let out = Command::new(rnccl_bin())
        .args([
            "bench",
            "--cpu",
            "all_reduce",
            "--ranks",
            "2",
            "-e",
            "8M",
            "-f",
            "16",
            "-n",
            "2",
            "-w",
            "1",
            "-T",
            "60",
            "--format",
            "json",
        ])
        .env("NCCL_SHM_DISABLE", "1")
        .env("NCCL_SOCKET_IFNAME", "lo")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON output");
    let links = doc["rnccl"]["traffic_rank0"].as_array().unwrap();
    assert!(
        !links.is_empty() && links.iter().all(|l| l["transport"] == "Tcp"),
        "{links:?}"
    );
    assert_eq!(doc["out_of_bounds"]["count"], 0);
}
