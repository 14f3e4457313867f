//! The processes of a `rnccl bench` job seen from outside: its ranks, whether they are gone, and
//! what they left in `/dev/shm`.
// Each test binary compiles this module; not all of them use every helper.
#![allow(dead_code)]

use std::time::{Duration, Instant};

/// The pids of `parent`'s children (a launcher's rank processes).
pub fn children(parent: u32) -> Vec<i32> {
    std::fs::read_to_string(format!("/proc/{parent}/task/{parent}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse::<i32>().ok())
        .collect()
}

/// The pid of the child of `parent` whose environment says it is bench process `rank` (the
/// process of rank `rank` when each process holds one rank).
pub fn bench_rank_pid(parent: u32, rank: usize) -> Option<i32> {
    children(parent).into_iter().find(|pid| {
        std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| {
            env.split(|b| *b == 0)
                .any(|kv| kv == format!("RNCCL_BENCH_PROC={rank}").as_bytes())
        })
    })
}

/// Whether process `pid` is gone (or only a zombie waiting to be reaped).
pub fn gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

/// Waits up to `limit` for every process of `pids` to be gone; returns how long it took, or
/// `None` if some are still there.
pub fn wait_gone(pids: &[i32], limit: Duration) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if pids.iter().all(|&p| gone(p)) {
            return Some(start.elapsed());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}

/// Files in `/dev/shm` that processes `pids` made (rnccl names them after their maker's pid).
pub fn shm_files_of(pids: &[i32]) -> Vec<String> {
    let names: Vec<String> = std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names
        .into_iter()
        .filter(|n| {
            pids.iter().any(|p| {
                n.starts_with(&format!("rnccl-{p}-"))
                    || n.starts_with(&format!("rnccl-win-{p}-"))
                    || *n == format!("rnccl-stats-{p}")
                    || *n == format!("rnccl-stats-{p}.tmp")
            })
        })
        .collect()
}

/// Kills a process group when dropped, so a failing test leaves no ranks behind.
pub struct Group(pub i32);

impl Drop for Group {
    fn drop(&mut self) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(self.0),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}
