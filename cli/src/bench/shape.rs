//! How the ranks of a bench job are laid out, as nccl-tests lays them out: processes × threads
//! per process (`-t`) × GPUs per thread (`-g`). Rank = (process × threads + thread) × gpus +
//! gpu; a GPU rank takes the GPU of the same number counted on its host, (local process ×
//! threads + thread) × gpus + gpu, wrapping around when there are more ranks than GPUs.

use std::ops::Range;

/// The layout of a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Processes in the job.
    pub procs: usize,
    /// Threads per process (`-t`).
    pub threads: usize,
    /// Ranks (GPUs) each thread drives (`-g`).
    pub gpus: usize,
}

impl Shape {
    /// The layout of a job of `procs` processes started by a launcher, with `-t threads` and
    /// `-g gpus`.
    ///
    /// Errors: `-t` or `-g` of 0.
    pub fn launched(procs: usize, threads: usize, gpus: usize) -> anyhow::Result<Shape> {
        check_counts(threads, gpus)?;
        Ok(Shape {
            procs,
            threads,
            gpus,
        })
    }

    /// The layout of a job started here: `ranks` local ranks (`None`: `default_ranks` rounded
    /// down to whole processes, at least one process), one process per `threads × gpus` ranks
    /// or, with `one_process` (`--threads`), all of them in this process, `gpus` per thread.
    ///
    /// Errors: `-t`, `-g` or `--ranks` of 0, or a `--ranks` that does not split into whole
    /// processes (or threads) as asked.
    pub fn local(
        ranks: Option<usize>,
        default_ranks: usize,
        threads: usize,
        gpus: usize,
        one_process: bool,
    ) -> anyhow::Result<Shape> {
        check_counts(threads, gpus)?;
        let per_proc = if one_process { gpus } else { threads * gpus };
        let n = match ranks {
            Some(0) => anyhow::bail!("--ranks must be at least 1"),
            Some(n) if n % per_proc != 0 => {
                if one_process {
                    anyhow::bail!(
                        "--ranks {n} with --threads: every thread drives -g {gpus} ranks, so give \
                         a multiple of {gpus}"
                    );
                }
                anyhow::bail!(
                    "--ranks {n} does not make whole processes of -t {threads} x -g {gpus} = \
                     {per_proc} ranks: give a multiple of {per_proc}"
                );
            }
            Some(n) => n,
            None => (default_ranks / per_proc).max(1) * per_proc,
        };
        Ok(if one_process {
            Shape {
                procs: 1,
                threads: n / gpus,
                gpus,
            }
        } else {
            Shape {
                procs: n / per_proc,
                threads,
                gpus,
            }
        })
    }

    /// Ranks in the job.
    pub fn nranks(&self) -> usize {
        self.procs * self.threads * self.gpus
    }

    /// The rank of GPU `gpu` of thread `thread` of process `proc`.
    pub fn rank(&self, proc: usize, thread: usize, gpu: usize) -> usize {
        (proc * self.threads + thread) * self.gpus + gpu
    }

    /// The ranks thread `thread` of process `proc` drives.
    pub fn thread_ranks(&self, proc: usize, thread: usize) -> Range<usize> {
        let first = self.rank(proc, thread, 0);
        first..first + self.gpus
    }

    /// The CUDA device of GPU `gpu` of thread `thread` in the process with index `local` among
    /// those of its host, on a host with `ngpus` GPUs.
    pub fn device(&self, local: usize, thread: usize, gpu: usize, ngpus: usize) -> usize {
        ((local * self.threads + thread) * self.gpus + gpu) % ngpus.max(1)
    }
}

/// Refuses `-t 0` and `-g 0`.
fn check_counts(threads: usize, gpus: usize) -> anyhow::Result<()> {
    if threads == 0 {
        anyhow::bail!("-t/--nthreads must be at least 1");
    }
    if gpus == 0 {
        anyhow::bail!("-g/--ngpus must be at least 1");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_number_as_in_nccl_tests() {
        let s = Shape::launched(2, 2, 4).unwrap();
        assert_eq!(s.nranks(), 16);
        assert_eq!(s.rank(0, 0, 0), 0);
        assert_eq!(s.rank(0, 1, 3), 7);
        assert_eq!(s.rank(1, 0, 0), 8);
        assert_eq!(s.rank(1, 1, 2), 14);
        assert_eq!(s.thread_ranks(1, 1), 12..16);
        // Every rank exactly once.
        let mut all: Vec<usize> = (0..2)
            .flat_map(|p| (0..2).flat_map(move |t| s.thread_ranks(p, t)))
            .collect();
        all.sort();
        assert_eq!(all, (0..16).collect::<Vec<_>>());
    }

    #[test]
    fn devices_count_on_the_host_and_wrap() {
        let s = Shape::launched(4, 1, 2).unwrap();
        // Process 3 is the 2nd process of its host (local 1): GPUs 2 and 3 of 4.
        assert_eq!((s.device(1, 0, 0, 4), s.device(1, 0, 1, 4)), (2, 3));
        // No local index known: the rank modulo the GPUs.
        assert_eq!(s.device(3, 0, 1, 4), s.rank(3, 0, 1) % 4);
        let t = Shape::launched(1, 2, 2).unwrap();
        assert_eq!(t.device(0, 1, 0, 8), 2);
        assert_eq!(t.device(0, 1, 1, 3), 0, "more ranks than GPUs wrap around");
    }

    #[test]
    fn local_jobs_split_into_processes_and_threads() {
        // One process per GPU by default.
        assert_eq!(
            Shape::local(None, 8, 1, 1, false).unwrap(),
            Shape {
                procs: 8,
                threads: 1,
                gpus: 1
            }
        );
        // -g 2 on 8 GPUs: 4 processes of one thread driving 2 GPUs.
        assert_eq!(Shape::local(None, 8, 1, 2, false).unwrap().procs, 4);
        // A default that does not divide is rounded down, to at least one process.
        assert_eq!(Shape::local(None, 7, 2, 1, false).unwrap().nranks(), 6);
        assert_eq!(Shape::local(None, 2, 1, 4, false).unwrap().nranks(), 4);
        // --threads: everything in one process.
        assert_eq!(
            Shape::local(Some(6), 1, 1, 2, true).unwrap(),
            Shape {
                procs: 1,
                threads: 3,
                gpus: 2
            }
        );
    }

    #[test]
    fn impossible_layouts_name_the_flags() {
        let e = |r: anyhow::Result<Shape>| r.unwrap_err().to_string();
        assert!(e(Shape::local(Some(6), 1, 4, 1, false)).contains("multiple of 4"));
        assert!(e(Shape::local(Some(3), 1, 1, 2, true)).contains("multiple of 2"));
        assert!(e(Shape::local(Some(0), 1, 1, 1, false)).contains("--ranks"));
        assert!(e(Shape::local(None, 1, 0, 1, false)).contains("-t/--nthreads"));
        assert!(e(Shape::launched(2, 1, 0)).contains("-g/--ngpus"));
    }
}
