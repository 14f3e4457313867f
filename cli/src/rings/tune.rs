//! `rnccl rings --tune COLL`: NCCL's INFO TUNING table, then the model's prediction and choice
//! over a size sweep (8 B to 1 GiB, doubling, sizes as nccl-tests counts them), beside the
//! kernel rnccl's GPU engine runs at each size.

use rnccl::config::syntax::{ALGORITHMS, PROTOCOLS};
use rnccl::graph::tuning::table::{thresholds_line, tuning_lines};
use rnccl::graph::tuning::{LL, LL128, PAT, RING, SIMPLE, TREE};
use rnccl::{Func, GpuKernel};
use serde::Serialize;

use super::Planned;
use crate::render::Table;

fn sizes() -> impl Iterator<Item = u64> {
    (3..=30).map(|e| 1u64 << e)
}

/// The kernel rnccl runs for `f` at `bytes` on `p`'s GPUs (across nodes no LL or direct
/// kernel: they need peer access to every rank).
fn rnccl_kernel(p: &Planned, f: Func, bytes: u64) -> Option<GpuKernel> {
    rnccl::gpu_kernel(&p.knobs, f, bytes as usize, p.model.nranks, p.nodes).ok()
}

/// The kernel rnccl runs for `f` at `bytes` on `p`'s GPUs when the buffers lie in symmetric
/// windows (`-R 2`).
fn rnccl_window_kernel(p: &Planned, f: Func, bytes: u64) -> Option<GpuKernel> {
    rnccl::gpu_kernel_in_windows(&p.knobs, f, bytes as usize, p.model.nranks, p.nodes).ok()
}

/// The kernel rnccl runs for `f` at `bytes` on `p`'s GPUs when every rank registered its
/// buffers with `ncclCommRegister` and runs in its own process or thread (`-R 1`).
fn rnccl_registered_kernel(p: &Planned, f: Func, bytes: u64) -> Option<GpuKernel> {
    rnccl::gpu_kernel_registered(&p.knobs, f, bytes as usize, p.model.nranks, p.nodes).ok()
}

/// The kernel rnccl runs for `f` at `bytes` on `p`'s GPUs when one thread drives every rank in
/// one group (`-g N`, plain buffers every GPU reaches).
fn rnccl_group_kernel(p: &Planned, f: Func, bytes: u64) -> Option<GpuKernel> {
    rnccl::gpu_kernel_in_group(&p.knobs, f, bytes as usize, p.model.nranks, p.nodes).ok()
}

/// Where `p`'s communicator runs, for rnccl's fitted kernel costs.
fn platform(p: &Planned) -> rnccl::GpuPlatform {
    rnccl::GpuPlatform {
        nranks: p.model.nranks,
        nodes: p.nodes,
        sm: p.system.comp_cap().map_or(0, |(cc, _)| cc),
        nvswitch: p.system.count(rnccl::topo::NodeType::Nvs) > 0,
    }
}

/// rnccl's predicted time (µs) of `kernel` for `f` at `bytes` on `p`, where a fit covers it.
fn predicted(p: &Planned, f: Func, bytes: u64, kernel: Option<&GpuKernel>) -> Option<f64> {
    kernel.and_then(|k| rnccl::gpu_kernel_us(k, f, bytes as usize, platform(p)))
}

/// A kernel column's cell: the kernel, then its predicted µs where fitted.
fn cell(p: &Planned, f: Func, bytes: u64, kernel: Option<GpuKernel>) -> String {
    match (&kernel, predicted(p, f, bytes, kernel.as_ref())) {
        (None, _) => "-".into(),
        (Some(k), None) => k.to_string(),
        (Some(k), Some(us)) => format!("{k} {us:.1}"),
    }
}

fn combos() -> [(usize, usize); 7] {
    [
        (TREE, LL),
        (TREE, LL128),
        (TREE, SIMPLE),
        (RING, LL),
        (RING, LL128),
        (RING, SIMPLE),
        (PAT, SIMPLE),
    ]
}

/// The tuning text.
pub fn lines(p: &Planned, f: Func) -> Vec<String> {
    let m = &p.model;
    let mut out = vec![
        String::new(),
        "NCCL's tuning table (latency us / algorithm bandwidth GB/s; INFO TUNING on rank 0)".into(),
    ];
    out.extend(tuning_lines(m).into_iter().map(|l| format!("  {l}")));
    out.push(format!("  {}", thresholds_line(m)));
    out.push(String::new());
    out.push(format!(
        "{} over sizes: NCCL's choice and the predicted time (us) of each algorithm/protocol ('-' = not usable); \
         rnccl: the kernel rnccl runs (LL xblocks, Direct blocks x bytes per round x rounds, Ring/Simple, Exchange/Simple); \
         rnccl -R 1: the kernel on buffers every rank registered (ncclCommRegister, a process or thread per rank); \
         rnccl -R 2: the kernel on buffers in symmetric windows (a symmetric kernel xblocks); \
         rnccl -g N: the kernel when one thread drives every rank in a group; \
         after a kernel, its predicted time (us) where rnccl's fitted costs cover it \
         (perf/fit_costs.py: 2 ranks on sm 90 NVSwitch, 1-64 MiB, direct and symmetric kernels)",
        f.nccl_name()
    ));
    let usable: Vec<(usize, usize)> = combos()
        .into_iter()
        .filter(|&(a, pr)| m.bandwidth[f as usize][a][pr] > 0.0)
        .collect();
    let mut header: Vec<String> = [
        "size",
        "rnccl",
        "rnccl -R 1",
        "rnccl -R 2",
        "rnccl -g N",
        "choice",
        "ch",
        "thr",
        "time",
        "algbw",
        "busbw",
    ]
    .map(String::from)
    .to_vec();
    header.extend(
        usable
            .iter()
            .map(|&(a, pr)| format!("{}/{}", ALGORITHMS[a], PROTOCOLS[pr])),
    );
    let mut t = Table::new(header);
    for s in sizes() {
        let mut row = vec![
            crate::units::bytes_iec_whole(s),
            cell(p, f, s, rnccl_kernel(p, f, s)),
            cell(p, f, s, rnccl_registered_kernel(p, f, s)),
            cell(p, f, s, rnccl_window_kernel(p, f, s)),
            cell(p, f, s, rnccl_group_kernel(p, f, s)),
        ];
        match m.choose(f, s) {
            Some(c) => {
                let algbw = s as f64 / (f64::from(c.time_us) * 1000.0);
                row.extend([
                    format!("{}/{}", ALGORITHMS[c.algo], PROTOCOLS[c.proto]),
                    c.nchannels.to_string(),
                    c.nthreads.to_string(),
                    format!("{:.1}", c.time_us),
                    format!("{algbw:.2}"),
                    format!("{:.2}", algbw * f.bus_factor(m.nranks)),
                ]);
            }
            None => row.extend(["none", "-", "-", "-", "-", "-"].map(String::from)),
        }
        for &(a, pr) in &usable {
            row.push(
                m.time(f, a, pr, s)
                    .map_or("-".into(), |t| format!("{t:.1}")),
            );
        }
        t.row(row);
    }
    out.extend(t.lines(2));
    out
}

#[derive(Serialize)]
struct SweepJson {
    bytes: u64,
    rnccl: Option<GpuKernel>,
    /// The kernel on buffers every rank registered (`-R 1`).
    rnccl_registered: Option<GpuKernel>,
    /// The kernel on buffers in symmetric windows (`-R 2`).
    rnccl_windows: Option<GpuKernel>,
    /// The kernel when one thread drives every rank in one group (`-g N`).
    rnccl_group: Option<GpuKernel>,
    /// Predicted µs of `rnccl`, `rnccl_registered`, `rnccl_windows` and `rnccl_group`, where
    /// rnccl's fitted costs cover them.
    rnccl_us: [Option<f64>; 4],
    algo: Option<&'static str>,
    proto: Option<&'static str>,
    nchannels: Option<usize>,
    nthreads: Option<u32>,
    time_us: Option<f32>,
    times_us: Vec<(String, Option<f32>)>,
}

/// The tuning data as JSON.
#[derive(Serialize)]
pub struct TuneJson {
    collective: &'static str,
    table: Vec<String>,
    sweep: Vec<SweepJson>,
}

/// Builds the tuning JSON.
pub fn json(p: &Planned, f: Func) -> TuneJson {
    let m = &p.model;
    TuneJson {
        collective: f.nccl_name(),
        table: tuning_lines(m),
        sweep: sizes()
            .map(|s| {
                let c = m.choose(f, s);
                let kernels = [
                    rnccl_kernel(p, f, s),
                    rnccl_registered_kernel(p, f, s),
                    rnccl_window_kernel(p, f, s),
                    rnccl_group_kernel(p, f, s),
                ];
                SweepJson {
                    bytes: s,
                    rnccl: kernels[0],
                    rnccl_registered: kernels[1],
                    rnccl_windows: kernels[2],
                    rnccl_group: kernels[3],
                    rnccl_us: kernels.map(|k| predicted(p, f, s, k.as_ref())),
                    algo: c.map(|c| ALGORITHMS[c.algo]),
                    proto: c.map(|c| PROTOCOLS[c.proto]),
                    nchannels: c.map(|c| c.nchannels),
                    nthreads: c.map(|c| c.nthreads),
                    time_us: c.map(|c| c.time_us),
                    times_us: combos()
                        .into_iter()
                        .map(|(a, pr)| {
                            (
                                format!("{}/{}", ALGORITHMS[a], PROTOCOLS[pr]),
                                m.time(f, a, pr, s),
                            )
                        })
                        .collect(),
                }
            })
            .collect(),
    }
}
