//! Shared test support: ranks as threads, deterministic typed inputs, and a sequential
//! reference for every collective, computed here with the element type's own arithmetic
//! (wrapping integers, f16/bf16 through `half`), independent of the engine.

#![allow(dead_code)]

pub(crate) mod gpu;
pub(crate) mod netns;
pub(crate) mod procs;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use half::{bf16, f16};
use rnccl::config::{Config, Source};
use rnccl::{CommConfig, Communicator, DataType, Element, RedOp, Scalar};

/// Runs `f` on every rank of a fresh `n`-rank communicator (ranks as threads). Collects each
/// rank's error instead of panicking, so one failing rank does not hide the others' reports.
pub(crate) fn on_threads<F>(n: usize, knobs: &[(&str, &str)], f: F) -> Vec<Result<(), String>>
where
    F: Fn(&Communicator) -> Result<(), String> + Sync,
{
    let mut cfg = Config::defaults();
    for (k, v) in knobs {
        cfg.set(k, *v, Source::Program("test".into()));
    }
    let config = CommConfig::with_knobs(Arc::new(cfg)).timeout(Duration::from_secs(60));
    let comms = Communicator::init_all_with(n, config).expect("init_all");
    std::thread::scope(|s| {
        let f = &f;
        let hs: Vec<_> = comms.into_iter().map(|c| s.spawn(move || f(&c))).collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("rank thread panicked".into()))
            })
            .collect()
    })
}

/// Panics with every rank's error when any rank failed.
pub(crate) fn all_ok(results: Vec<Result<(), String>>) {
    let errs: Vec<String> = results
        .into_iter()
        .enumerate()
        .filter_map(|(r, x)| x.err().map(|e| format!("rank {r}: {e}")))
        .collect();
    assert!(errs.is_empty(), "{}", errs.join("\n"));
}

/// A test element type.
pub(crate) trait TElem:
    Element + PartialEq + std::fmt::Debug + Default + Send + Sync + 'static
{
    /// A deterministic input value for (`rank`, `idx`, `seed`); `op` shapes the range so
    /// products stay finite.
    fn value(rank: usize, idx: usize, seed: u64, op: RedOp) -> Self;
    /// Combines two values as NCCL's device code does for this type.
    fn combine(a: Self, b: Self, op: RedOp) -> Self;
    /// Applies the pre-multiplier (PreMulSum scalar, or 1/n for float Avg).
    fn pre(x: Self, op: RedOp, n: usize) -> Self;
    /// Applies the post-divisor (integer Avg).
    fn post(x: Self, op: RedOp, n: usize) -> Self;
    /// True when `got` is acceptably close to `want` (exact for integers); `mag` is the sum of
    /// the magnitudes that went into `want`.
    fn close(got: Self, want: Self, n: usize, mag: f64) -> bool;
    /// Magnitude as f64.
    fn mag(x: Self) -> f64;
}

fn mix(rank: usize, idx: usize, seed: u64) -> u64 {
    let mut x = (rank as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)
        ^ (idx as u64).wrapping_mul(0xd6e8_feb8_6659_fd93)
        ^ seed;
    x ^= x >> 32;
    x = x.wrapping_mul(0xd6e8_feb8_6659_fd93);
    x ^ (x >> 29)
}

macro_rules! int_elem {
    ($($t:ty),*) => {$(
        impl TElem for $t {
            fn value(rank: usize, idx: usize, seed: u64, op: RedOp) -> Self {
                let h = mix(rank, idx, seed);
                match op {
                    RedOp::Prod => (1 + h % 5) as $t,
                    _ => h as $t,
                }
            }
            fn combine(a: Self, b: Self, op: RedOp) -> Self {
                match op {
                    RedOp::Prod => a.wrapping_mul(b),
                    RedOp::Max => a.max(b),
                    RedOp::Min => a.min(b),
                    _ => a.wrapping_add(b),
                }
            }
            fn pre(x: Self, op: RedOp, _n: usize) -> Self {
                match op {
                    RedOp::PreMulSum(s) => x.wrapping_mul(s.as_i64() as $t),
                    _ => x,
                }
            }
            fn post(x: Self, op: RedOp, n: usize) -> Self {
                match op {
                    RedOp::Avg => x / (n as $t),
                    _ => x,
                }
            }
            fn close(got: Self, want: Self, _n: usize, _mag: f64) -> bool {
                got == want
            }
            fn mag(x: Self) -> f64 {
                (x as f64).abs()
            }
        }
    )*};
}
int_elem!(i8, u8, i32, u32, i64, u64);

macro_rules! float_elem {
    ($t:ty, $eps:expr, $from:expr, $to:expr) => {
        impl TElem for $t {
            fn value(rank: usize, idx: usize, seed: u64, op: RedOp) -> Self {
                let h = mix(rank, idx, seed);
                let u = (h >> 11) as f64 / (1u64 << 53) as f64;
                match op {
                    RedOp::Prod => $from(0.5 + 1.5 * u),
                    _ => $from(200.0 * u - 100.0),
                }
            }
            fn combine(a: Self, b: Self, op: RedOp) -> Self {
                let (x, y) = ($to(a), $to(b));
                $from(match op {
                    RedOp::Prod => x * y,
                    RedOp::Max => x.max(y),
                    RedOp::Min => x.min(y),
                    _ => x + y,
                })
            }
            fn pre(x: Self, op: RedOp, n: usize) -> Self {
                match op {
                    RedOp::PreMulSum(s) => $from($to(x) * s.as_f64()),
                    RedOp::Avg => $from($to(x) * (1.0 / n as f64)),
                    _ => x,
                }
            }
            fn post(x: Self, _op: RedOp, _n: usize) -> Self {
                x
            }
            fn close(got: Self, want: Self, n: usize, mag: f64) -> bool {
                let (g, w) = ($to(got), $to(want));
                (g - w).abs() <= $eps * (n as f64 + 1.0) * mag.max(w.abs()).max(1e-30)
            }
            fn mag(x: Self) -> f64 {
                $to(x).abs()
            }
        }
    };
}
float_elem!(f32, 2f64.powi(-22), |v: f64| v as f32, |v: f32| v as f64);
float_elem!(f64, 2f64.powi(-50), |v: f64| v, |v: f64| v);
float_elem!(f16, 2f64.powi(-9), f16::from_f64, f16::to_f64);
float_elem!(bf16, 2f64.powi(-6), bf16::from_f64, bf16::to_f64);

/// FP8 elements: the float rules, with inputs in ±10 (E4M3 saturates at 448, so eight ranks'
/// sums of ±100 would leave its range) and a tolerance of FP8's eps per rank.
macro_rules! fp8_elem {
    ($t:ty, $eps:expr) => {
        impl TElem for $t {
            fn value(rank: usize, idx: usize, seed: u64, op: RedOp) -> Self {
                let h = mix(rank, idx, seed);
                let u = (h >> 11) as f32 / (1u64 << 53) as f32;
                <$t>::from_f32(match op {
                    RedOp::Prod => 0.5 + 1.5 * u,
                    _ => 20.0 * u - 10.0,
                })
            }
            fn combine(a: Self, b: Self, op: RedOp) -> Self {
                let (x, y) = (a.to_f32(), b.to_f32());
                <$t>::from_f32(match op {
                    RedOp::Prod => x * y,
                    RedOp::Max => x.max(y),
                    RedOp::Min => x.min(y),
                    _ => x + y,
                })
            }
            fn pre(x: Self, op: RedOp, n: usize) -> Self {
                let k = match op {
                    RedOp::PreMulSum(s) => s.as_f64() as f32,
                    RedOp::Avg => 1.0 / n as f32,
                    _ => return x,
                };
                <$t>::from_f32(x.to_f32() * <$t>::from_f32(k).to_f32())
            }
            fn post(x: Self, _op: RedOp, _n: usize) -> Self {
                x
            }
            fn close(got: Self, want: Self, n: usize, mag: f64) -> bool {
                let (g, w) = (f64::from(got.to_f32()), f64::from(want.to_f32()));
                (g - w).abs() <= $eps * (n as f64 + 1.0) * mag.max(w.abs()).max(1e-30)
            }
            fn mag(x: Self) -> f64 {
                f64::from(x.to_f32()).abs()
            }
        }
    };
}
fp8_elem!(rnccl::F8E4M3, 2f64.powi(-3));
fp8_elem!(rnccl::F8E5M2, 2f64.powi(-2));

/// Dispatches a generic body over the runtime data type.
#[macro_export]
macro_rules! with_type {
    ($dt:expr, $f:ident ( $($arg:expr),* )) => {
        match $dt {
            rnccl::DataType::Int8 => $f::<i8>($($arg),*),
            rnccl::DataType::Uint8 => $f::<u8>($($arg),*),
            rnccl::DataType::Int32 => $f::<i32>($($arg),*),
            rnccl::DataType::Uint32 => $f::<u32>($($arg),*),
            rnccl::DataType::Int64 => $f::<i64>($($arg),*),
            rnccl::DataType::Uint64 => $f::<u64>($($arg),*),
            rnccl::DataType::Float16 => $f::<half::f16>($($arg),*),
            rnccl::DataType::Float32 => $f::<f32>($($arg),*),
            rnccl::DataType::Float64 => $f::<f64>($($arg),*),
            rnccl::DataType::Bfloat16 => $f::<half::bf16>($($arg),*),
            rnccl::DataType::Float8e4m3 => $f::<rnccl::F8E4M3>($($arg),*),
            rnccl::DataType::Float8e5m2 => $f::<rnccl::F8E5M2>($($arg),*),
        }
    };
}

/// Every collective, and Send (run as a ring exchange with a Recv): what the matrices cover.
pub(crate) const FUNCS: [rnccl::Func; 9] = [
    rnccl::Func::AllReduce,
    rnccl::Func::Broadcast,
    rnccl::Func::Reduce,
    rnccl::Func::AllGather,
    rnccl::Func::ReduceScatter,
    rnccl::Func::AllToAll,
    rnccl::Func::Gather,
    rnccl::Func::Scatter,
    rnccl::Func::Send,
];

/// Every reduction the engine supports, with test scalars for PreMulSum.
pub(crate) fn ops_for(dt: DataType) -> Vec<RedOp> {
    let scalar = if dt.is_float() {
        Scalar::Float(0.5)
    } else {
        Scalar::Int(3)
    };
    vec![
        RedOp::Sum,
        RedOp::Prod,
        RedOp::Max,
        RedOp::Min,
        RedOp::Avg,
        RedOp::PreMulSum(scalar),
    ]
}

/// The input of `rank`: `len` elements.
pub(crate) fn input<T: TElem>(rank: usize, len: usize, seed: u64, op: RedOp) -> Vec<T> {
    (0..len).map(|i| T::value(rank, i, seed, op)).collect()
}

/// Reduces element `idx` of every rank's input (`idx` is an index into each rank's input).
pub(crate) fn reduce_at<T: TElem>(n: usize, idx: usize, seed: u64, op: RedOp) -> (T, f64) {
    let mut acc = T::pre(T::value(0, idx, seed, op), op, n);
    let mut mag = T::mag(acc);
    for r in 1..n {
        let v = T::pre(T::value(r, idx, seed, op), op, n);
        mag += T::mag(v);
        acc = T::combine(acc, v, op);
    }
    (T::post(acc, op, n), mag)
}

/// Every rank's expected AllReduce output on `n` ranks (`reduce_at` of each of `count`
/// elements), computed by the first rank thread of a case to ask and shared with the others:
/// each rank computing its own took n² input values per element, most of the time of the 16 MiB
/// cases on 8 ranks. Keyed by everything the values depend on; holds the last two cases (tests
/// run side by side).
pub(crate) fn all_reduce_reference<T: TElem>(
    n: usize,
    count: usize,
    seed: u64,
    op: RedOp,
) -> Arc<Vec<(T, f64)>> {
    type Entry = (String, Arc<dyn std::any::Any + Send + Sync>);
    static CASES: std::sync::Mutex<Vec<Entry>> = std::sync::Mutex::new(Vec::new());
    let key = format!("{} {op:?} n={n} count={count} seed={seed}", T::DTYPE);
    let mut cases = CASES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, v)) = cases.iter().find(|(k, _)| *k == key)
        && let Ok(v) = v.clone().downcast::<Vec<(T, f64)>>()
    {
        return v;
    }
    let v = Arc::new(
        (0..count)
            .map(|i| reduce_at::<T>(n, i, seed, op))
            .collect::<Vec<_>>(),
    );
    if cases.len() == 2 {
        cases.remove(0);
    }
    cases.push((key, v.clone()));
    v
}

/// Compares `got` with `want(i)` element by element; returns the first mismatch in words.
pub(crate) fn compare<T: TElem>(
    what: &str,
    got: &[T],
    n: usize,
    want: impl Fn(usize) -> (T, f64),
) -> Result<(), String> {
    for (i, g) in got.iter().enumerate() {
        let (w, mag) = want(i);
        if !T::close(*g, w, n, mag) {
            return Err(format!(
                "{what}: element {i} of {} is {g:?}, expected {w:?}",
                got.len()
            ));
        }
    }
    Ok(())
}

/// Path of the `rnccl` binary of this build profile, building it first if it is missing.
pub(crate) fn rnccl_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let dir = exe
        .parent()
        .and_then(|d| d.parent())
        .expect("target profile directory")
        .to_path_buf();
    let bin = dir.join("rnccl");
    if !bin.exists() {
        let release = dir.file_name().is_some_and(|n| n == "release");
        let mut cmd = std::process::Command::new(env!("CARGO"));
        cmd.args(["build", "-q", "-p", "rnccl-cli", "--bin", "rnccl"]);
        if release {
            cmd.arg("--release");
        }
        assert!(
            cmd.status().expect("cargo build").success(),
            "building the rnccl binary failed"
        );
    }
    bin
}
