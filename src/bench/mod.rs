//! The benchmark behind `rnccl bench`: nccl-tests' method (warm-up, timed iterations of
//! `agg_iters` grouped operations, a data check, out-of-place then in-place) run by every rank
//! of a communicator. A thread drives one rank or several ([`run_ranks`] with its
//! communicators, nccl-tests' `-g`): on host memory, or on device memory for ranks on GPUs,
//! with NCCL's stream semantics (timed until the streams are done, the iterations optionally
//! captured into CUDA graphs, results checked on the device). Every rank gets every row (times
//! averaged over ranks as `-a` says), so any of them can print.

mod coll;
mod data;
mod gpu;
mod gpu_check;
mod grouped;
mod host;
mod place;
mod ranks;
mod sweep;

pub use coll::{BenchColl, Counts};
pub use data::DataSpec;
pub use place::{MAX_SENDS, RankPlace, gather_places};
pub use sweep::{parse_size, sweep};

use crate::coll::CollArgs;
use crate::comm::Communicator;
use crate::dtype::DataType;
use crate::error::{Error, Result};
use crate::redop::{RedOp, Scalar};
use ranks::Ranks;

/// How per-rank times are combined (nccl-tests `-a`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Average {
    /// Rank 0's time (`-a 0`).
    Rank0,
    /// Mean over ranks (`-a 1`, the default).
    Mean,
    /// Minimum over ranks (`-a 2`).
    Min,
    /// Maximum over ranks (`-a 3`).
    Max,
}

impl Average {
    /// From nccl-tests' averaging mode number (its `-a` value).
    ///
    /// Errors: [`Error::InvalidArgument`] outside 0..=3.
    pub fn from_mode(v: u32) -> Result<Average> {
        Ok(match v {
            0 => Average::Rank0,
            1 => Average::Mean,
            2 => Average::Min,
            3 => Average::Max,
            _ => {
                return Err(Error::invalid_arg(format!(
                    "averaging mode {v} does not exist: use 0 (rank 0), 1 (mean), 2 (min) or 3 (max)"
                )));
            }
        })
    }
}

/// What to measure.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// The collective.
    pub coll: BenchColl,
    /// Swept sizes in bytes.
    pub sizes: Vec<usize>,
    /// Element types (`-d`).
    pub dtypes: Vec<DataType>,
    /// Reductions (`-o`), used by reducing collectives.
    pub ops: Vec<RedOp>,
    /// Roots (`-r`), used by rooted collectives.
    pub roots: Vec<usize>,
    /// Warm-up iterations (`-w`).
    pub warmup: usize,
    /// Timed iterations (`-n`).
    pub iters: usize,
    /// Operations per iteration, launched as one group (`-m`).
    pub agg: usize,
    /// Check iterations (`-c`); 0 disables the check.
    pub check: usize,
    /// How times are combined (`-a`).
    pub average: Average,
    /// Register the send and receive buffers as windows (nccl-tests `-R 2`). Host ranks
    /// allocate them with [`crate::mem::mem_alloc`], so ranks on one host read each other's
    /// buffers directly (one rank per thread); GPU ranks register them as symmetric device
    /// windows, so all-reduces, reduce-scatters and all-gathers run the symmetric kernels.
    pub windows: bool,
    /// Register the GPU ranks' send and receive buffers with `ncclCommRegister` (nccl-tests
    /// `-R 1`): all-reduces, reduce-scatters and all-gathers whose buffers every rank
    /// registered load and store the peers' buffers in place, when every rank runs in its own
    /// process or thread ([`crate::Communicator::register_buffer`]).
    pub local_register: bool,
    /// CUDA graph launches (nccl-tests `-G`): 0 launches the timed iterations directly; N
    /// captures them into one graph per GPU stream at each point and launches it N times
    /// (the time per operation divides by N too). GPU ranks only.
    pub graph_launches: usize,
}

/// One side (out-of-place or in-place) of a result row.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Measure {
    /// Time per operation in µs.
    pub time_us: f64,
    /// Algorithm bandwidth, GB/s (1e9 B/s).
    pub algbw: f64,
    /// Bus bandwidth, GB/s.
    pub busbw: f64,
    /// Wrong elements summed over ranks; `None` when the check is off.
    pub wrong: Option<u64>,
}

/// One row of the table.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct BenchRow {
    /// Bytes: the larger of one rank's send and receive buffers.
    pub size: usize,
    /// The `count` argument (nccl-tests' `paramcount`).
    pub count: usize,
    /// Element type.
    pub dtype: DataType,
    /// Reduction, for reducing collectives.
    pub op: Option<RedOp>,
    /// Root, for rooted collectives.
    pub root: Option<usize>,
    /// Out-of-place result.
    pub out_of_place: Measure,
    /// In-place result.
    pub in_place: Measure,
}

/// The scalar nccl-tests' `mulsum` uses: rnccl takes 2, which keeps results exact.
pub const MULSUM_SCALAR: Scalar = Scalar::Int(2);

/// Bytes of one benchmark buffer of a rank of `nranks` for `opts`: the largest of a point's
/// send and receive sizes over the sweep (nccl-tests' `getCollByteCount` convention), in whole
/// 8-byte words plus one.
pub fn buffer_bytes(opts: &BenchOptions, nranks: usize) -> usize {
    let max_bytes = opts.sizes.iter().copied().max().unwrap_or(0);
    let c = opts.coll.counts(max_bytes, 1, nranks.max(1));
    (c.send.max(c.recv).max(max_bytes).div_ceil(8) + 1) * 8
}

/// Bytes of host memory one rank on host buffers allocates for the benchmark: a send buffer, a
/// receive buffer per operation of an iteration (`-m`) and, when results are checked, one for
/// the expected output, each [`buffer_bytes`] long. The transports' FIFOs come on top
/// (`NCCL_BUFFSIZE` per connection).
pub fn host_bytes_per_rank(opts: &BenchOptions, nranks: usize) -> u64 {
    let buffers = 1 + opts.agg.max(1) + usize::from(opts.check > 0);
    buffers as u64 * buffer_bytes(opts, nranks) as u64
}

/// Runs the whole sweep on this thread's ranks — `comms`, ranks of one communicator, all on
/// host memory or all on GPUs — and calls `on_row` with each finished row (on every rank).
/// Every launch is one group holding every local rank's operations (nccl-tests' `-g`), and so
/// are the host-side barriers, time averaging and wrong-element sums, so one thread can drive
/// several ranks. Buffers are allocated once, for the largest size.
///
/// Errors: [`Error::InvalidArgument`] for no communicator, communicators of different sizes, a
/// root that is not a rank, windows of host buffers on several ranks of one thread, or graph
/// launches on host ranks; [`Error::InvalidUsage`] for a mix of GPU and host ranks; any engine
/// or CUDA error, naming the operation and the peer involved.
pub fn run_ranks(
    comms: &[Communicator],
    opts: &BenchOptions,
    mut on_row: impl FnMut(&BenchRow),
) -> Result<Vec<BenchRow>> {
    let Some(first) = comms.first() else {
        return Err(Error::invalid_arg(
            "the benchmark needs at least one communicator",
        ));
    };
    let n = first.nranks();
    if let Some(c) = comms.iter().find(|c| c.nranks() != n) {
        return Err(Error::invalid_arg(format!(
            "the ranks of one thread must belong to one communicator: rank {} has {} ranks, \
             rank {} has {n}",
            c.rank(),
            c.nranks(),
            first.rank()
        )));
    }
    let ops: Vec<Option<RedOp>> = if opts.coll.reduces() {
        opts.ops.iter().copied().map(Some).collect()
    } else {
        vec![None]
    };
    let roots: Vec<Option<usize>> = if opts.coll.rooted() {
        opts.roots.iter().copied().map(Some).collect()
    } else {
        vec![None]
    };
    for &r in opts.roots.iter().filter(|_| opts.coll.rooted()) {
        if r >= n {
            return Err(Error::invalid_arg(format!(
                "root {r} is not a rank (this run has {n} ranks, 0..{})",
                n - 1
            )));
        }
    }
    let mut ranks = Ranks::new(comms, opts, buffer_bytes(opts, n))?;
    // Setting up a GPU rank (its first stream, loading kernels) may wait for everything on its
    // GPU, kernels of other ranks' threads included, and those kernels wait for this rank: no
    // rank launches anything before every rank is set up.
    grouped::barrier(comms)?;
    let mut rows = Vec::new();
    for &dtype in &opts.dtypes {
        for &op in &ops {
            for &root in &roots {
                for &size in &opts.sizes {
                    let row = run_point(&mut ranks, comms, opts, size, dtype, op, root)?;
                    on_row(&row);
                    rows.push(row);
                }
            }
        }
    }
    Ok(rows)
}

#[allow(clippy::too_many_arguments)]
fn run_point(
    ranks: &mut Ranks<'_>,
    comms: &[Communicator],
    opts: &BenchOptions,
    size: usize,
    dtype: DataType,
    op: Option<RedOp>,
    root: Option<usize>,
) -> Result<BenchRow> {
    let n = comms.first().map_or(1, Communicator::nranks);
    let es = dtype.size();
    let c = opts.coll.counts(size, es, n);
    let op_v = match op {
        Some(RedOp::PreMulSum(_)) => RedOp::PreMulSum(MULSUM_SCALAR),
        Some(o) => o,
        None => RedOp::Sum,
    };
    let args = CollArgs {
        func: opts.coll.func(),
        count: c.param,
        dtype,
        op: op_v,
        root: root.unwrap_or(0),
        in_place: false,
    };
    let mut sides = [Measure {
        time_us: 0.0,
        algbw: 0.0,
        busbw: 0.0,
        wrong: None,
    }; 2];
    for (side, in_place) in [false, true].into_iter().enumerate() {
        let args = CollArgs { in_place, ..args };
        let spec = DataSpec {
            coll: opts.coll,
            dtype,
            op: op_v,
            root: args.root,
            count: c.param,
            nranks: n,
            seed: 0,
        };
        // The timed runs' input is checked only through the -c runs, which refill it.
        ranks.fill(&args, &spec, &c, false)?;
        for _ in 0..opts.warmup {
            ranks.launch(&args, 1)?;
        }
        ranks.sync()?;
        grouped::barrier(comms)?;
        let secs = ranks.time(comms, &args, opts)?;
        let secs = grouped::combine_time(comms, secs, opts.average)?;
        let wrong = if opts.check > 0 {
            let mut mine = vec![0u64; comms.len()];
            for it in 0..opts.check {
                let spec = DataSpec {
                    seed: it as u64 + 1,
                    ..spec
                };
                ranks.fill(&args, &spec, &c, true)?;
                ranks.launch(&args, 1)?;
                ranks.sync()?;
                ranks.check(&args, &spec, &c, &mut mine)?;
            }
            Some(grouped::sum(comms, &mine)?)
        } else {
            None
        };
        let (algbw, busbw) = opts.coll.bandwidth(c.param, es, n, secs);
        sides[side] = Measure {
            time_us: secs * 1e6,
            algbw,
            busbw,
            wrong,
        };
    }
    Ok(BenchRow {
        size: c.send.max(c.recv) * es,
        count: c.param,
        dtype,
        op,
        root,
        out_of_place: sides[0],
        in_place: sides[1],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(coll: BenchColl) -> BenchOptions {
        BenchOptions {
            coll,
            sizes: vec![0, 64, 4096],
            dtypes: vec![DataType::Float32, DataType::Int8],
            ops: vec![RedOp::Sum, RedOp::Avg],
            roots: vec![1],
            warmup: 1,
            iters: 2,
            agg: 2,
            check: 2,
            average: Average::Mean,
            windows: false,
            local_register: false,
            graph_launches: 0,
        }
    }

    /// nccl-tests' `-g 2` on host memory: one thread, two ranks, every launch and every
    /// host-side sum in one group (anything else would wait forever for the other rank).
    #[test]
    fn one_thread_drives_two_ranks_of_every_collective() {
        let comms = Communicator::init_all(2).unwrap();
        for coll in BenchColl::ALL {
            let mut seen = 0;
            let rows = run_ranks(&comms, &opts(coll), |_| seen += 1).unwrap();
            assert_eq!(rows.len(), seen);
            let ops = if coll.reduces() { 2 } else { 1 };
            assert_eq!(rows.len(), 3 * 2 * ops, "{coll}");
            for r in &rows {
                assert_eq!(r.out_of_place.wrong, Some(0), "{coll} {r:?}");
                assert_eq!(r.in_place.wrong, Some(0), "{coll} {r:?}");
                assert!(r.out_of_place.time_us > 0.0, "{coll} {r:?}");
            }
        }
    }

    #[test]
    fn options_that_do_not_fit_the_ranks_are_refused() {
        let comms = Communicator::init_all(2).unwrap();
        let err = |o: &BenchOptions, comms: &[Communicator]| {
            run_ranks(comms, o, |_| {}).unwrap_err().to_string()
        };
        let mut o = opts(BenchColl::AllReduce);
        o.graph_launches = 1;
        assert!(err(&o, &comms).contains("need GPU ranks"));
        let mut o = opts(BenchColl::AllReduce);
        o.windows = true;
        assert!(err(&o, &comms).contains("its own thread"));
        assert!(err(&opts(BenchColl::AllReduce), &[]).contains("at least one communicator"));
        let mut o = opts(BenchColl::Broadcast);
        o.roots = vec![2];
        assert!(err(&o, &comms).contains("not a rank"));
        let other = Communicator::init_all(3).unwrap();
        let mixed: Vec<Communicator> = comms
            .into_iter()
            .take(1)
            .chain(other.into_iter().take(1))
            .collect();
        assert!(err(&opts(BenchColl::AllReduce), &mixed).contains("one communicator"));
    }
}
