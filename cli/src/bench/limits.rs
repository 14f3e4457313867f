//! Refusing up front a job this host cannot start: the tasks (processes and threads), file
//! descriptors and process memory its ranks need against the host's limits, so a too-large
//! `--ranks` gets the numbers and what to change instead of a spawn failure, a panic or an
//! abort halfway through starting ranks.
//!
//! What a rank costs was measured on this build (`rnccl bench --cpu`, 16 ranks, read from
//! `/proc/PID/task`, `/proc/PID/fd` and `VmRSS`): a rank process has 6 tasks, about 20 open
//! files and 11 MiB resident; with `--threads`, 16 ranks in one process have 36 tasks, 228 open
//! files and 54 MiB. The constants below round those up.

use nix::sys::resource::{Resource, getrlimit};

use super::shape::Shape;
use crate::units::bytes_iec;

/// Tasks of a process before its ranks (main thread, bootstrap and status services, counter
/// page writer).
const BASE_TASKS: u64 = 4;
/// Tasks per rank (its thread and its transport's proxy thread, with margin).
const TASKS_PER_RANK: u64 = 3;
/// Open files of a process before its ranks.
const BASE_FDS: u64 = 16;
/// Open files per rank (bootstrap and transport sockets, shared-memory FIFOs, with margin).
const FDS_PER_RANK: u64 = 16;
/// Resident memory of a rank process besides its buffers.
const PROCESS_BYTES: u64 = 16 << 20;
/// Resident memory of one more rank in a process besides its buffers.
const RANK_BYTES: u64 = 4 << 20;
/// Share of the free tasks and available memory a job may take.
const USABLE: f64 = 0.9;

/// What this host allows, each with where the number comes from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostLimits {
    /// Tasks that may still be started, and the limit that says so.
    pub tasks: Option<(u64, String)>,
    /// Open files per process (`RLIMIT_NOFILE`, soft).
    pub fds: Option<u64>,
    /// Memory available for new allocations (MemAvailable), bytes.
    pub memory: Option<u64>,
}

impl HostLimits {
    /// Reads this host's limits: the kernel's `threads-max` and `pid_max`, the pids cgroup,
    /// `RLIMIT_NPROC` (not for root), each less the tasks running now; `RLIMIT_NOFILE`;
    /// MemAvailable.
    pub fn read() -> HostLimits {
        let read = |p: &str| std::fs::read_to_string(p).ok();
        let num = |s: Option<String>| s.and_then(|s| s.trim().parse::<u64>().ok());
        // /proc/loadavg's fourth field is "runnable/total" tasks.
        let running = read("/proc/loadavg").and_then(|l| {
            let total = l.split_whitespace().nth(3)?.split_once('/')?.1;
            total.parse::<u64>().ok()
        });
        let mut candidates: Vec<(u64, String)> = Vec::new();
        if let Some(running) = running {
            for (path, what) in [
                ("/proc/sys/kernel/threads-max", "kernel.threads-max"),
                ("/proc/sys/kernel/pid_max", "kernel.pid_max"),
            ] {
                if let Some(max) = num(read(path)) {
                    candidates.push((
                        max.saturating_sub(running),
                        format!("{what} = {max}, {running} tasks running"),
                    ));
                }
            }
            if !nix::unistd::Uid::effective().is_root()
                && let Ok((soft, _)) = getrlimit(Resource::RLIMIT_NPROC)
                && soft != nix::sys::resource::RLIM_INFINITY
            {
                candidates.push((
                    soft.saturating_sub(running),
                    format!("ulimit -u = {soft}, up to {running} tasks already counted"),
                ));
            }
        }
        if let Some((max, current, path)) = pids_cgroup() {
            candidates.push((
                max.saturating_sub(current),
                format!("{path} = {max}, {current} in use"),
            ));
        }
        HostLimits {
            tasks: candidates.into_iter().min_by_key(|(n, _)| *n),
            fds: getrlimit(Resource::RLIMIT_NOFILE)
                .ok()
                .map(|(soft, _)| soft),
            memory: super::memory::available(),
        }
    }

    /// Checks that `shape` (all on this host; `one_process` for `--threads`) fits these
    /// limits.
    ///
    /// Errors: the first limit it exceeds, with what the job needs, what the host allows, the
    /// measurement behind the need, and what to change.
    pub fn check(&self, shape: &Shape, one_process: bool) -> anyhow::Result<()> {
        let nranks = shape.nranks() as u64;
        let per_proc = (shape.threads * shape.gpus) as u64;
        let procs = shape.procs as u64;
        // The launcher runs the bootstrap root: one connection per rank while they meet.
        let (tasks, fds_per_process, memory) = if one_process {
            (
                BASE_TASKS + TASKS_PER_RANK * nranks,
                BASE_FDS + FDS_PER_RANK * nranks + nranks,
                PROCESS_BYTES + RANK_BYTES * nranks,
            )
        } else {
            (
                BASE_TASKS + procs * (BASE_TASKS + TASKS_PER_RANK * per_proc),
                (BASE_FDS + FDS_PER_RANK * per_proc).max(BASE_FDS + nranks + 2 * procs),
                procs * (PROCESS_BYTES + RANK_BYTES * per_proc.saturating_sub(1)),
            )
        };
        let fewer = if one_process {
            "lower --ranks"
        } else {
            "lower --ranks, or put several ranks in each process with -t"
        };
        if let Some((free, why)) = &self.tasks
            && tasks as f64 > *free as f64 * USABLE
        {
            anyhow::bail!(
                "{nranks} ranks need about {tasks} tasks (processes and threads: {} per rank, \
                 measured), but this host can start {free} more ({why}) and a job may take \
                 {:.0}% of them: {fewer}",
                TASKS_PER_RANK,
                USABLE * 100.0
            );
        }
        if let Some(limit) = self.fds
            && fds_per_process > limit
        {
            anyhow::bail!(
                "{} need about {fds_per_process} open files in {} (sockets and shared-memory \
                 FIFOs, {FDS_PER_RANK} per rank, measured), but the limit is {limit} per process \
                 (ulimit -n): {}",
                if one_process {
                    format!("{nranks} ranks")
                } else {
                    format!("{nranks} ranks of {per_proc} per process")
                },
                if one_process {
                    "one process"
                } else {
                    "a process"
                },
                if one_process {
                    "raise it (ulimit -n), lower --ranks, or drop --threads"
                } else {
                    "raise it (ulimit -n) or lower --ranks"
                }
            );
        }
        if let Some(available) = self.memory
            && memory as f64 > available as f64 * USABLE
        {
            anyhow::bail!(
                "{nranks} ranks need about {} of memory besides their buffers ({} per rank \
                 process, measured), but this host has {} available (MemAvailable) and a job \
                 may take {:.0}% of it: {fewer}",
                bytes_iec(memory),
                bytes_iec(PROCESS_BYTES),
                bytes_iec(available),
                USABLE * 100.0
            );
        }
        Ok(())
    }
}

/// This process's pids cgroup limit: (`pids.max`, `pids.current`, the file), when it has one
/// that is not `max` (cgroup v2's unified tree, else v1's pids controller).
fn pids_cgroup() -> Option<(u64, u64, String)> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    cgroups.lines().find_map(|line| {
        let mut f = line.splitn(3, ':');
        let (id, controllers, path) = (f.next()?, f.next()?, f.next()?);
        let dir = match (id, controllers) {
            ("0", "") => format!("/sys/fs/cgroup{path}"),
            (_, c) if c.split(',').any(|c| c == "pids") => format!("/sys/fs/cgroup/pids{path}"),
            _ => return None,
        };
        let dir = dir.trim_end_matches('/');
        let max_file = format!("{dir}/pids.max");
        let max = std::fs::read_to_string(&max_file)
            .ok()?
            .trim()
            .parse()
            .ok()?;
        let current = std::fs::read_to_string(format!("{dir}/pids.current"))
            .ok()?
            .trim()
            .parse()
            .ok()?;
        Some((max, current, max_file))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(tasks: u64, fds: u64, memory: u64) -> HostLimits {
        HostLimits {
            tasks: Some((tasks, "kernel.pid_max = 32768, 77 tasks running".into())),
            fds: Some(fds),
            memory: Some(memory),
        }
    }

    fn shape(procs: usize, threads: usize) -> Shape {
        Shape {
            procs,
            threads,
            gpus: 1,
        }
    }

    #[test]
    fn jobs_that_fit_pass() {
        let h = host(30_000, 20_000, 20 << 30);
        h.check(&shape(16, 1), false).unwrap();
        h.check(&shape(1, 64), true).unwrap();
        HostLimits::default()
            .check(&shape(100_000, 1), false)
            .unwrap();
    }

    #[test]
    fn each_limit_is_named_with_its_numbers() {
        let h = host(30_000, 20_000, 20 << 30);
        let e = h.check(&shape(100_000, 1), false).unwrap_err().to_string();
        assert!(
            e.contains("100000 ranks need about") && e.contains("kernel.pid_max = 32768"),
            "{e}"
        );
        assert!(e.contains("-t"), "{e}");
        let e = h.check(&shape(1, 40_000), true).unwrap_err().to_string();
        assert!(e.contains("tasks"), "{e}");
        let few_files = host(1 << 40, 1024, 1 << 50);
        let e = few_files
            .check(&shape(1, 100), true)
            .unwrap_err()
            .to_string();
        assert!(e.contains("limit is 1024 per process (ulimit -n)"), "{e}");
        let little_memory = host(1 << 40, 1 << 20, 1 << 30);
        let e = little_memory
            .check(&shape(1000, 1), false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("MemAvailable"), "{e}");
    }

    #[test]
    fn this_host_reads() {
        let h = HostLimits::read();
        assert!(h.fds.is_some_and(|n| n > 0), "{h:?}");
    }
}
