//! `rnccl bench` flags: nccl-tests' flags with their meaning, plus rnccl's own.

use std::path::PathBuf;

use rnccl::bench::{Average, BenchColl, BenchOptions, parse_size, sweep};
use rnccl::{DataType, RedOp};

/// Output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// nccl-tests' table.
    Text,
    /// The same data as one JSON document.
    Json,
}

/// Where local ranks run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Bind {
    /// An equal, disjoint share of the CPUs per local thread of ranks.
    Core,
    /// The scheduler decides.
    None,
}

/// Arguments of `rnccl bench`.
#[derive(Debug, Clone, clap::Args)]
#[command(
    after_help = "Ranks: on a host with GPUs, one rank per GPU on device memory (--cpu: CPU ranks on \
host memory); elsewhere one rank per CPU core. Ranks = processes x threads (-t) x GPUs per thread \
(-g); rank = (process x threads + thread) x GPUs + GPU, as in nccl-tests, and each rank takes the \
GPU of the same number on its host (CUDA_VISIBLE_DEVICES applies).\n\nExamples:\n  \
rnccl bench                                  all_reduce sweep: one process per GPU (or per core)\n  \
rnccl bench -g 8                             one process, one thread driving 8 GPUs in one group\n  \
rnccl bench -t 2 -g 2 -G 10                  2 threads of 2 GPUs per process, CUDA graph launches\n  \
rnccl bench --cpu --ranks 4 --threads        4 CPU ranks as threads of one process\n  \
rnccl bench all_gather -b 1K -e 256M -f 4\n  \
rnccl bench -d all -o all -c 1 -e 1M         check every type and operation\n  \
rnccl bench -e 1G --plot allreduce.svg       draw busbw and time against size (or .png)\n  \
mpirun -np 8 -x NCCL_COMM_ID=node0:29500 rnccl bench\n  \
torchrun-style: RANK=0 WORLD_SIZE=2 MASTER_ADDR=a MASTER_PORT=29500 rnccl bench"
)]
pub struct Args {
    /// Collective: all_reduce, all_gather, reduce_scatter, broadcast, reduce, alltoall, gather,
    /// scatter, sendrecv (nccl-tests names such as all_reduce_perf work too).
    #[arg(default_value = "all_reduce")]
    pub collective: String,
    /// Smallest size in bytes (K, M, G suffixes).
    #[arg(
        short = 'b',
        long = "minbytes",
        default_value = "8",
        value_name = "SIZE"
    )]
    pub minbytes: String,
    /// Largest size in bytes (K, M, G suffixes).
    #[arg(
        short = 'e',
        long = "maxbytes",
        default_value = "64M",
        value_name = "SIZE"
    )]
    pub maxbytes: String,
    /// Multiply the size by this between points [default: 2, unless -i is given].
    #[arg(short = 'f', long = "stepfactor", value_name = "N")]
    pub stepfactor: Option<usize>,
    /// Add this many bytes between points (used when -f is not above 1).
    #[arg(short = 'i', long = "stepbytes", value_name = "SIZE")]
    pub stepbytes: Option<String>,
    /// Timed iterations per point.
    #[arg(short = 'n', long = "iters", default_value_t = 20)]
    pub iters: usize,
    /// Warm-up iterations per point.
    #[arg(
        short = 'w',
        long = "warmup_iters",
        alias = "warmup-iters",
        default_value_t = 5
    )]
    pub warmup: usize,
    /// Check iterations per point (0 disables the check: #wrong prints N/A). GPU ranks check
    /// on the device.
    #[arg(short = 'c', long = "check", default_value_t = 1)]
    pub check: usize,
    /// Reduction: sum, prod, max, min, avg, mulsum, or all.
    #[arg(short = 'o', long = "op", default_value = "sum")]
    pub op: String,
    /// Data type: int8, uint8, int32, uint32, int64, uint64, half, float, double, bfloat16, f8e4m3, f8e5m2 (FP8), or all.
    #[arg(short = 'd', long = "datatype", default_value = "float")]
    pub datatype: String,
    /// Root rank for broadcast, reduce, gather, scatter, or all.
    #[arg(short = 'r', long = "root", default_value = "0")]
    pub root: String,
    /// Operations per iteration, launched as one group.
    #[arg(
        short = 'm',
        long = "agg_iters",
        alias = "agg-iters",
        default_value_t = 1
    )]
    pub agg: usize,
    /// Combine per-rank times: 0 rank 0, 1 mean, 2 min, 3 max.
    #[arg(short = 'a', long = "average", default_value_t = 1)]
    pub average: u32,
    /// Timeout in seconds for every blocking wait (default RNCCL_TIMEOUT, 300).
    #[arg(short = 'T', long = "timeout", value_name = "SECONDS")]
    pub timeout: Option<u64>,
    /// Also write the results as JSON to this file.
    #[arg(
        short = 'J',
        long = "output_file",
        alias = "output-file",
        value_name = "FILE"
    )]
    pub output_file: Option<PathBuf>,
    /// Buffer registration, as nccl-tests' -R: 0 none; 1 ncclCommRegister (GPU ranks: where
    /// every rank registered its buffers and runs in its own process or thread, all-reduce,
    /// reduce-scatter and all-gather load and store the peers' buffers in place); 2 symmetric
    /// windows (GPU ranks: the symmetric kernels load and store the peers' buffers in place;
    /// CPU ranks: mem_alloc + window_register, so ranks on one host read each other's buffers
    /// directly).
    #[arg(
        short = 'R',
        long = "local_register",
        alias = "local-register",
        default_value_t = 0,
        value_name = "0|1|2"
    )]
    pub register: u32,
    /// Number of local ranks: processes x -t x -g [default: the GPUs of this host, or the CPU
    /// cores (at least 2) for CPU ranks, rounded down to whole processes]. Not allowed under a
    /// launcher, which says how many processes there are.
    #[arg(long, value_name = "N")]
    pub ranks: Option<usize>,
    /// Run every local rank in this process: --ranks / -g threads of -g ranks each, instead of
    /// one process per -t x -g ranks.
    #[arg(long, conflicts_with = "nthreads")]
    pub threads: bool,
    /// Threads per process (nccl-tests' -t), each driving -g ranks.
    #[arg(short = 't', long = "nthreads", default_value_t = 1, value_name = "N")]
    pub nthreads: usize,
    /// GPUs per thread (nccl-tests' -g): one thread drives N GPU ranks, launching their
    /// operations as one group. Needs GPUs.
    #[arg(short = 'g', long = "ngpus", default_value_t = 1, value_name = "N")]
    pub ngpus: usize,
    /// CUDA graph launches (nccl-tests' -G): capture the timed iterations into a CUDA graph
    /// and launch it N times; 0 launches them directly. Needs GPUs.
    #[arg(short = 'G', long = "cudagraph", default_value_t = 0, value_name = "N")]
    pub graph: usize,
    /// Run CPU ranks on host buffers even on a host with GPUs.
    #[arg(long)]
    pub cpu: bool,
    /// Pin each local thread of ranks to its own equal share of the CPUs when there are at least
    /// as many CPUs (`core`, as `mpirun --bind-to core --map-by slot:PE=n`; the threads it
    /// starts share its CPUs), or leave placement to the scheduler (`none`).
    #[arg(long, value_enum, default_value_t = Bind::Core)]
    pub bind: Bind,
    /// Output format on stdout.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Also draw busbw and time against size, out-of-place and in-place, into this image:
    /// FILE.svg or FILE.png.
    #[arg(long, value_name = "FILE", value_parser = crate::plot::image_path)]
    pub plot: Option<PathBuf>,
    /// Size of the --plot image in pixels.
    #[arg(long, value_name = "WxH", default_value = "1200x1000")]
    pub plot_size: crate::plot::ImageSize,
}

impl Args {
    /// The benchmark these flags describe.
    ///
    /// Errors: a message naming the bad flag and what it accepts.
    pub fn options(&self) -> anyhow::Result<BenchOptions> {
        let coll: BenchColl = self.collective.parse()?;
        let min = parse_size(&self.minbytes)?;
        let max = parse_size(&self.maxbytes)?;
        let step = self
            .stepbytes
            .as_deref()
            .map(parse_size)
            .transpose()?
            .unwrap_or(0);
        let factor = self
            .stepfactor
            .unwrap_or(if self.stepbytes.is_some() { 1 } else { 2 });
        let sizes = sweep(min, max, factor, step).map_err(|e| {
            anyhow::anyhow!(
                "{e}: set -b/--minbytes and -e/--maxbytes, and -f/--stepfactor above 1 or -i/--stepbytes above 0"
            )
        })?;
        let dtypes = if self.datatype.eq_ignore_ascii_case("all") {
            DataType::ALL.to_vec()
        } else {
            vec![self.datatype.parse()?]
        };
        let ops = if self.op.eq_ignore_ascii_case("all") {
            vec![
                RedOp::Sum,
                RedOp::Prod,
                RedOp::Max,
                RedOp::Min,
                RedOp::Avg,
                RedOp::PreMulSum(rnccl::bench::MULSUM_SCALAR),
            ]
        } else {
            vec![self.op.parse()?]
        };
        let roots = if self.root.eq_ignore_ascii_case("all") {
            Vec::new()
        } else {
            vec![self.root.parse::<usize>().map_err(|_| {
                anyhow::anyhow!("-r/--root '{}' is not a rank number or 'all'", self.root)
            })?]
        };
        if self.iters == 0 {
            anyhow::bail!("-n/--iters must be at least 1");
        }
        if self.agg == 0 {
            anyhow::bail!("-m/--agg_iters must be at least 1");
        }
        let (local_register, windows) = match self.register {
            0 => (false, false),
            1 => (true, false),
            2 => (false, true),
            v => anyhow::bail!("-R/--local_register {v} is not 0, 1 or 2"),
        };
        Ok(BenchOptions {
            coll,
            sizes,
            dtypes,
            ops,
            roots,
            warmup: self.warmup,
            iters: self.iters,
            agg: self.agg,
            check: self.check,
            average: Average::from_mode(self.average)
                .map_err(|e| anyhow::anyhow!("-a/--average: {e}"))?,
            windows,
            local_register,
            graph_launches: self.graph,
        })
    }

    /// `-b` and `-e` in bytes, as nccl-tests' header shows them (the requested range, not the
    /// sizes the sweep lands on). Unparsable values show as 0: `options` reports them.
    pub fn byte_range(&self) -> (usize, usize) {
        let get = |s: &str| parse_size(s).unwrap_or(0);
        (get(&self.minbytes), get(&self.maxbytes))
    }

    /// The step as nccl-tests' header shows it: `2(factor)` or `1048576(bytes)`.
    pub fn step_label(&self) -> String {
        let step = self
            .stepbytes
            .as_deref()
            .and_then(|s| parse_size(s).ok())
            .unwrap_or(0);
        match self
            .stepfactor
            .unwrap_or(if self.stepbytes.is_some() { 1 } else { 2 })
        {
            f if f > 1 => format!("{f}(factor)"),
            _ => format!("{step}(bytes)"),
        }
    }
}
