//! Pinning local ranks to CPUs, as a launcher's `--bind-to core` does: two ranks that busy-poll
//! each other must not share a CPU, or every hand-off waits for a scheduler time slice. Each
//! thread of ranks gets an equal, disjoint share of the CPUs, not one CPU: the threads it starts
//! (a GPU's launcher thread when it drives several GPUs, socket and proxy threads) spin too, and
//! pinned to its one CPU they waited for it a time slice at a time (8 bytes on 2 GPUs took
//! 1 ms per iteration instead of 6 µs; both TCP ranks of `perf/cpu_vs_mpi.sh`, each the only
//! local rank of its "host", shared the first CPU).

use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
use nix::unistd::Pid;

/// Binds the calling thread (and the threads it starts afterwards) to the `local_rank`-th of
/// `local_ranks` equal shares of the CPUs this process may use (the first `n / local_ranks`
/// CPUs for rank 0, the next for rank 1…), when there are at least `local_ranks` of them and
/// more than one rank; CPUs left over from an uneven split stay unused by the pinned threads.
///
/// Errors: the affinity calls fail (the message says which).
pub fn bind_local_rank(local_rank: usize, local_ranks: usize) -> anyhow::Result<()> {
    let allowed = sched_getaffinity(Pid::from_raw(0))
        .map_err(|e| anyhow::anyhow!("reading the CPU affinity: {e}"))?;
    let cpus: Vec<usize> = (0..CpuSet::count())
        .filter(|&c| allowed.is_set(c).unwrap_or(false))
        .collect();
    let Some(share) = share(cpus.len(), local_rank, local_ranks) else {
        return Ok(());
    };
    let mut set = CpuSet::new();
    for &c in &cpus[share.clone()] {
        set.set(c).map_err(|e| anyhow::anyhow!("CPU {c}: {e}"))?;
    }
    sched_setaffinity(Pid::from_raw(0), &set)
        .map_err(|e| anyhow::anyhow!("binding to CPUs {:?}: {e}", &cpus[share]))
}

/// The indices (into the allowed CPUs, `ncpus` of them) of local rank `local_rank`'s share
/// of `local_ranks`; `None` when nothing is pinned (one rank, or fewer CPUs than ranks).
fn share(ncpus: usize, local_rank: usize, local_ranks: usize) -> Option<std::ops::Range<usize>> {
    if local_ranks < 2 || ncpus < local_ranks || local_rank >= local_ranks {
        return None;
    }
    let per = ncpus / local_ranks;
    Some(local_rank * per..(local_rank + 1) * per)
}

#[cfg(test)]
mod tests {
    use super::share;

    #[test]
    fn each_local_rank_gets_an_equal_disjoint_share() {
        assert_eq!(share(2, 0, 2), Some(0..1));
        assert_eq!(share(2, 1, 2), Some(1..2));
        assert_eq!(share(64, 0, 1), None, "a lone rank keeps every CPU");
        assert_eq!(share(64, 1, 4), Some(16..32));
        assert_eq!(share(10, 2, 3), Some(6..9), "the tenth CPU is left over");
        assert_eq!(share(2, 0, 4), None, "fewer CPUs than ranks: no pinning");
    }
}
