//! Refusing up front a job whose buffers cannot fit in this host's memory: `ranks × buffers ×
//! size` against what the kernel says is available, so the answer is a message with the numbers
//! rather than ranks killed by the out-of-memory killer halfway through the sweep.

use rnccl::bench::{BenchOptions, buffer_bytes, host_bytes_per_rank};

use crate::units::bytes_iec;

/// Share of the available memory the buffers may take (the rest is left for the transports'
/// FIFOs, the processes themselves and everything else on the host).
const USABLE: f64 = 0.9;

/// Checks that `local` ranks on host buffers (of a job of `nranks`) fit in `available` bytes.
///
/// Errors: the refusal, naming the ranks, the buffers per rank, the total, what is available
/// and what to change.
pub fn check_host(
    opts: &BenchOptions,
    local: usize,
    nranks: usize,
    available: u64,
) -> anyhow::Result<()> {
    let per_rank = host_bytes_per_rank(opts, nranks);
    let total = per_rank.saturating_mul(local as u64);
    if (total as f64) <= available as f64 * USABLE {
        return Ok(());
    }
    let buffers = per_rank / buffer_bytes(opts, nranks).max(1) as u64;
    let kinds = match (opts.agg > 1, opts.check > 0) {
        (false, true) => "a send, a receive and a check buffer".to_string(),
        (false, false) => "a send and a receive buffer".to_string(),
        (true, true) => format!("a send, {} receive and a check buffer", opts.agg),
        (true, false) => format!("a send and {} receive buffers", opts.agg),
    };
    anyhow::bail!(
        "{local} ranks × {} of buffers ({kinds} of {} each, {buffers} in all, for {} up to {}) \
         = {}, but this host has {} of memory available (MemAvailable) and the ranks may take \
         {:.0}% of it: lower -e/--maxbytes or --ranks{}",
        bytes_iec(per_rank),
        bytes_iec(buffer_bytes(opts, nranks) as u64),
        opts.coll,
        bytes_iec(opts.sizes.iter().copied().max().unwrap_or(0) as u64),
        bytes_iec(total),
        bytes_iec(available),
        USABLE * 100.0,
        match (opts.check > 0, opts.agg > 1) {
            (true, true) => ", -m, or skip the check with -c 0",
            (true, false) => ", or skip the check with -c 0",
            (false, true) => ", or -m",
            (false, false) => "",
        }
    )
}

/// The memory this host has available for new allocations (Linux's MemAvailable), if known.
pub fn available() -> Option<u64> {
    let mut s = sysinfo::System::new().ok()?;
    s.refresh_memory();
    Some(s.available_memory()).filter(|&b| b > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rnccl::bench::{Average, BenchColl};
    use rnccl::{DataType, RedOp};

    fn opts(max: usize, check: usize) -> BenchOptions {
        BenchOptions {
            coll: BenchColl::AllReduce,
            sizes: vec![8, max],
            dtypes: vec![DataType::Float32],
            ops: vec![RedOp::Sum],
            roots: vec![0],
            warmup: 1,
            iters: 1,
            agg: 1,
            check,
            average: Average::Mean,
            windows: false,
            local_register: false,
            graph_launches: 0,
        }
    }

    #[test]
    fn a_job_that_fits_passes() {
        assert!(check_host(&opts(64 << 20, 1), 2, 2, 24 << 30).is_ok());
    }

    #[test]
    fn a_job_that_cannot_fit_is_refused_with_the_numbers() {
        let e = check_host(&opts(64 << 20, 1), 300, 300, 22 << 30)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("300 ranks × 192.0 MiB of buffers (a send, a receive and a check buffer of 64.0 MiB each, 3 in all, for all_reduce up to 64.0 MiB) = 56.3 GiB, but this host has 22.0 GiB"),
            "{e}"
        );
        assert!(
            e.ends_with("lower -e/--maxbytes or --ranks, or skip the check with -c 0"),
            "{e}"
        );
    }
}
