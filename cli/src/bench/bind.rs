//! Pinning local ranks to CPUs, as a launcher's `--bind-to core` does: two ranks that busy-poll
//! each other must not share a CPU, or every hand-off waits for a scheduler time slice.

use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
use nix::unistd::Pid;

/// Binds the calling thread (and the threads it starts afterwards) to the `local_rank`-th CPU
/// this process may use, when there are at least `local_ranks` of them. Returns the CPU chosen.
///
/// Errors: the affinity calls fail (the message says which).
pub fn bind_local_rank(local_rank: usize, local_ranks: usize) -> anyhow::Result<Option<usize>> {
    let allowed = sched_getaffinity(Pid::from_raw(0))
        .map_err(|e| anyhow::anyhow!("reading the CPU affinity: {e}"))?;
    let cpus: Vec<usize> = (0..CpuSet::count())
        .filter(|&c| allowed.is_set(c).unwrap_or(false))
        .collect();
    if cpus.len() < local_ranks || local_rank >= cpus.len() {
        return Ok(None);
    }
    let mut set = CpuSet::new();
    set.set(cpus[local_rank])
        .map_err(|e| anyhow::anyhow!("CPU {}: {e}", cpus[local_rank]))?;
    sched_setaffinity(Pid::from_raw(0), &set)
        .map_err(|e| anyhow::anyhow!("binding to CPU {}: {e}", cpus[local_rank]))?;
    Ok(Some(cpus[local_rank]))
}
