//! The benchmark behind `rnccl bench`: nccl-tests' method (warm-up, timed iterations of
//! `agg_iters` grouped operations, a data check, out-of-place then in-place) run by every rank
//! of a communicator. Each rank calls [`run_rank`]; every rank gets every row (times averaged
//! over ranks as `-a` says), so any of them can print.

mod coll;
mod data;
mod sweep;

use std::time::Instant;

pub use coll::{BenchColl, Counts};
pub use data::DataSpec;
pub use sweep::{parse_size, sweep};

use crate::coll::{CollArgs, Func};
use crate::comm::{Communicator, Group, group_start};
use crate::dtype::DataType;
use crate::error::{Error, Result};
use crate::redop::{RedOp, Scalar};

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
    /// Allocate the buffers with [`crate::mem_alloc`] and register them as windows
    /// (nccl-tests `-R 2`), so ranks on one host read each other's buffers directly.
    pub windows: bool,
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

/// Runs the whole sweep on this rank; calls `on_row` with each finished row (on every rank).
///
/// Errors: any engine error, naming the operation and the peer involved.
pub fn run_rank(
    comm: &Communicator,
    opts: &BenchOptions,
    mut on_row: impl FnMut(&BenchRow),
) -> Result<Vec<BenchRow>> {
    let n = comm.nranks();
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
    let max_bytes = opts.sizes.iter().copied().max().unwrap_or(0);
    let mut bufs = Buffers::new(comm, opts.coll, max_bytes, opts.windows)?;
    let mut rows = Vec::new();
    for &dtype in &opts.dtypes {
        for &op in &ops {
            for &root in &roots {
                for &size in &opts.sizes {
                    let row = run_point(comm, opts, &mut bufs, size, dtype, op, root)?;
                    on_row(&row);
                    rows.push(row);
                }
            }
        }
    }
    Ok(rows)
}

/// Buffers sized for the largest point, 8-byte aligned.
struct Buffers {
    send: Mem,
    recv: Mem,
    /// Receive buffers of the 2nd..agg-th operation of each iteration.
    extra: Vec<Mem>,
    /// Words per buffer.
    words: usize,
    windows: bool,
}

/// One benchmark buffer: heap memory, or a registered window.
enum Mem {
    Heap(Vec<u64>),
    Window(crate::mem::HostMem<u64>),
}

impl std::ops::Deref for Mem {
    type Target = [u64];
    fn deref(&self) -> &[u64] {
        match self {
            Mem::Heap(v) => v,
            Mem::Window(m) => m,
        }
    }
}

impl std::ops::DerefMut for Mem {
    fn deref_mut(&mut self) -> &mut [u64] {
        match self {
            Mem::Heap(v) => v,
            Mem::Window(m) => m,
        }
    }
}

impl Buffers {
    /// Allocates the send and receive buffers for the largest point (registering them as
    /// windows of `comm` when `windows`: collective).
    ///
    /// Errors: [`Error::InvalidArgument`] when the memory cannot be had; registration errors.
    fn new(
        comm: &Communicator,
        coll: BenchColl,
        max_bytes: usize,
        windows: bool,
    ) -> Result<Buffers> {
        let c = coll.counts(max_bytes, 1, comm.nranks());
        let words = c.send.max(c.recv).max(max_bytes).div_ceil(8) + 1;
        Ok(Buffers {
            send: alloc(comm, words, windows)?,
            recv: alloc(comm, words, windows)?,
            extra: Vec::new(),
            words,
            windows,
        })
    }
}

/// One buffer of `words` 8-byte words.
fn alloc(comm: &Communicator, words: usize, window: bool) -> Result<Mem> {
    if window {
        let m = crate::mem::mem_alloc::<u64>(words)?;
        comm.window_register(&m)?;
        return Ok(Mem::Window(m));
    }
    let mut v = Vec::new();
    v.try_reserve_exact(words).map_err(|_| {
        Error::invalid_arg(format!(
            "cannot allocate {} bytes for the benchmark buffers: lower the largest size",
            words * 8
        ))
    })?;
    v.resize(words, 0);
    Ok(Mem::Heap(v))
}

fn bytes_mut(v: &mut [u64]) -> &mut [u8] {
    crate::dtype::as_bytes_mut(v)
}

fn run_point(
    comm: &Communicator,
    opts: &BenchOptions,
    bufs: &mut Buffers,
    size: usize,
    dtype: DataType,
    op: Option<RedOp>,
    root: Option<usize>,
) -> Result<BenchRow> {
    let n = comm.nranks();
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
        fill(comm, bufs, &args, &spec, &c);
        for _ in 0..opts.warmup {
            launch(comm, bufs, &args, 1)?;
        }
        barrier(comm)?;
        let start = Instant::now();
        for _ in 0..opts.iters {
            launch(comm, bufs, &args, opts.agg)?;
        }
        let secs = start.elapsed().as_secs_f64() / (opts.iters.max(1) * opts.agg.max(1)) as f64;
        let secs = combine_time(comm, secs, opts.average)?;
        let wrong = if opts.check > 0 {
            let mut total = 0u64;
            for it in 0..opts.check {
                let spec = DataSpec {
                    seed: it as u64 + 1,
                    ..spec
                };
                fill(comm, bufs, &args, &spec, &c);
                launch(comm, bufs, &args, 1)?;
                total += check(comm, bufs, &args, &spec, &c);
            }
            Some(sum_u64(comm, total)?)
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

/// Fills this rank's input (in the send buffer, or at its in-place position).
fn fill(comm: &Communicator, bufs: &mut Buffers, args: &CollArgs, spec: &DataSpec, c: &Counts) {
    let rank = comm.rank();
    let es = args.dtype.size();
    if args.in_place {
        let l = args.in_place_layout(rank, comm.nranks()).expect("layout");
        let (off, len) = if is_sendrecv(args) {
            (0, c.send * es)
        } else {
            l.input
        };
        data::fill_input(
            spec,
            rank,
            &mut bytes_mut(&mut bufs.recv)[off..off + len],
            len / es,
        );
    } else {
        data::fill_input(
            spec,
            rank,
            &mut bytes_mut(&mut bufs.send)[..c.send * es],
            c.send,
        );
    }
}

fn is_sendrecv(args: &CollArgs) -> bool {
    args.func == Func::Send
}

/// Counts wrong output elements on this rank.
fn check(
    comm: &Communicator,
    bufs: &mut Buffers,
    args: &CollArgs,
    spec: &DataSpec,
    c: &Counts,
) -> u64 {
    let rank = comm.rank();
    let es = args.dtype.size();
    let out = bytes_mut(&mut bufs.recv);
    let (off, len) = if args.in_place && !is_sendrecv(args) {
        args.in_place_layout(rank, comm.nranks())
            .expect("layout")
            .output
    } else {
        (0, c.recv * es)
    };
    data::count_wrong(spec, rank, &out[off..off + len], len / es)
}

/// Launches `agg` operations as one group (nccl-tests `-m`). The first uses the checked
/// buffers; the others get their own receive buffers, since Rust lends each buffer once.
fn launch(comm: &Communicator, bufs: &mut Buffers, args: &CollArgs, agg: usize) -> Result<()> {
    while bufs.extra.len() + 1 < agg {
        bufs.extra.push(alloc(comm, bufs.words, bufs.windows)?);
    }
    let send = crate::dtype::as_bytes(&bufs.send);
    let mut g = group_start();
    push_one(&mut g, comm, args, send, bytes_mut(&mut bufs.recv))?;
    for e in bufs.extra.iter_mut().take(agg.saturating_sub(1)) {
        push_one(&mut g, comm, args, send, bytes_mut(e))?;
    }
    g.end()
}

fn push_one<'a>(
    g: &mut Group<'a>,
    comm: &'a Communicator,
    args: &CollArgs,
    send: &'a [u8],
    recv: &'a mut [u8],
) -> Result<()> {
    let (rank, n) = (comm.rank(), comm.nranks());
    let (next, prev) = ((rank + 1) % n, (rank + n - 1) % n);
    let bytes = args.count * args.dtype.size();
    match (args.func, args.in_place) {
        (Func::Send, true) => {
            g.send_recv_in_place(comm, *args, &mut recv[..bytes], next, prev)?;
        }
        (Func::Send, false) => {
            g.push(
                comm,
                CollArgs {
                    root: next,
                    ..*args
                },
                &send[..bytes],
                &mut [],
            )?;
            g.push(
                comm,
                CollArgs {
                    func: Func::Recv,
                    root: prev,
                    ..*args
                },
                &[],
                &mut recv[..bytes],
            )?;
        }
        (_, true) => {
            let l = args.in_place_layout(rank, n)?;
            g.push_in_place(comm, *args, &mut recv[..l.buf_bytes])?;
        }
        (_, false) => {
            g.push(comm, *args, send, recv)?;
        }
    }
    Ok(())
}

/// A barrier: an 8-byte AllReduce.
fn barrier(comm: &Communicator) -> Result<()> {
    let mut x = [0u64];
    comm.all_reduce_in_place(&mut x, RedOp::Sum)
}

fn combine_time(comm: &Communicator, secs: f64, avg: Average) -> Result<f64> {
    let mut v = [secs];
    match avg {
        Average::Rank0 => comm.broadcast_in_place(&mut v, 0)?,
        Average::Mean => {
            comm.all_reduce_in_place(&mut v, RedOp::Sum)?;
            v[0] /= comm.nranks() as f64;
        }
        Average::Min => comm.all_reduce_in_place(&mut v, RedOp::Min)?,
        Average::Max => comm.all_reduce_in_place(&mut v, RedOp::Max)?,
    }
    Ok(v[0])
}

fn sum_u64(comm: &Communicator, v: u64) -> Result<u64> {
    let mut x = [v];
    comm.all_reduce_in_place(&mut x, RedOp::Sum)?;
    Ok(x[0])
}
