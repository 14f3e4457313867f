//! What rnccl's own GPU kernels cost, fitted from measurements, for `rnccl rings --tune` to
//! print beside NCCL's model: `alpha + bytes / beta` per kernel family and collective, on the
//! rank count, GPU architecture and fabric it was measured on, over the sizes measured. Outside
//! those nothing is predicted: a guess would read as a measurement.
//!
//! The fits come from `perf/fit_costs.py` over `rnccl bench` logs (out-of-place time against
//! nccl-tests' size), least squares on the relative error.

use super::choice::GpuKernel;
use crate::func::Func;

/// Where a prediction is asked for: the communicator's ranks and nodes, its GPUs' SM
/// architecture (as `sm_90`: 90) and whether they sit on NVSwitch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Platform {
    /// Ranks of the communicator.
    pub nranks: usize,
    /// Nodes it spans.
    pub nodes: usize,
    /// SM architecture of its GPUs (major × 10 + minor).
    pub sm: u32,
    /// Whether its GPUs reach each other through NVSwitch.
    pub nvswitch: bool,
}

/// The kernel families [`GpuKernel`] names, as fitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    Direct,
    Symmetric,
}

/// One fit: for `family` running `func` on `platform`, a collective whose larger buffer holds
/// `bytes` bytes (from `min_bytes` to `max_bytes`, the sizes measured) takes `alpha_us +
/// bytes / (beta_gbs × 1000)` µs.
struct Fit {
    family: Family,
    func: Func,
    platform: Platform,
    min_bytes: usize,
    max_bytes: usize,
    alpha_us: f64,
    beta_gbs: f64,
}

/// Two H200s (or H100s: the same NVLink 4 and NVSwitch) of one node.
const H200X2: Platform = Platform {
    nranks: 2,
    nodes: 1,
    sm: 90,
    nvswitch: true,
};

const MIB: usize = 1 << 20;

/// The fits, measured on 2×H200 on 2026-11-29 over 1-64 MiB, each within 7% of every point:
/// - the symmetric kernels on 128 blocks (`rnccl bench -g 2`, all-reduce plain, reduce-scatter
///   and all-gather `-R 2`): all-reduce 14.8 / 16.9 / 23.0 / 35.5 / 62.0 / 115 / 215 µs at 1 /
///   2 / 4 / 8 / 16 / 32 / 64 MiB, reduce-scatter 13.7 / 15.1 / 18.6 / 25.1 / 38.8 / 67.3 /
///   119, all-gather 12.6 / 13.8 / 16.4 / 23.0 / 34.1 / 58.5 / 106;
/// - the direct kernel on 128 blocks (`rnccl bench --ranks 2`, one process per GPU):
///   all-reduce 18.4 / 21.2 / 27.8 / 40.8 / 66.2 / 117 / 210, all-gather 12.9 / 14.2 / 17.9 /
///   24.6 / 38.7 / 70.5 / 123, reduce-scatter 13.6 / 15.2 / 20.0 / 28.8 / 46.5 / 76.1 / 131.
const FITS: &[Fit] = &[
    fit(Family::Symmetric, Func::AllReduce, 11.0, 331.0),
    fit(Family::Symmetric, Func::ReduceScatter, 11.9, 621.0),
    fit(Family::Symmetric, Func::AllGather, 10.9, 710.0),
    fit(Family::Direct, Func::AllReduce, 15.2, 334.0),
    fit(Family::Direct, Func::AllGather, 10.9, 591.0),
    fit(Family::Direct, Func::ReduceScatter, 11.7, 525.0),
];

/// A fit on [`H200X2`] over 1-64 MiB.
const fn fit(family: Family, func: Func, alpha_us: f64, beta_gbs: f64) -> Fit {
    Fit {
        family,
        func,
        platform: H200X2,
        min_bytes: MIB,
        max_bytes: 64 * MIB,
        alpha_us,
        beta_gbs,
    }
}

/// The predicted time, in µs, of `kernel` running `func` on a collective whose larger buffer
/// holds `bytes` bytes (nccl-tests' size) on `platform`: `None` where no fit covers the
/// kernel's family, the collective, the platform or the size.
pub fn predicted_us(
    kernel: &GpuKernel,
    func: Func,
    bytes: usize,
    platform: Platform,
) -> Option<f64> {
    let family = match kernel {
        GpuKernel::Direct { .. } => Family::Direct,
        GpuKernel::Symmetric { .. } => Family::Symmetric,
        GpuKernel::Ll { .. } | GpuKernel::Ring | GpuKernel::Exchange => return None,
    };
    FITS.iter()
        .find(|f| {
            f.family == family
                && f.func == func
                && f.platform == platform
                && (f.min_bytes..=f.max_bytes).contains(&bytes)
        })
        .map(|f| f.alpha_us + bytes as f64 / (f.beta_gbs * 1e3))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sym() -> GpuKernel {
        GpuKernel::Symmetric {
            name: "AllReduce_RSxLD_AGxST",
            blocks: 128,
        }
    }

    #[test]
    fn a_fitted_kernel_is_predicted_near_its_measurements() {
        let t = predicted_us(&sym(), Func::AllReduce, 8 * MIB, H200X2).unwrap();
        assert!((t - 35.5).abs() < 0.05 * 35.5, "{t}");
        let direct = GpuKernel::Direct {
            blocks: 128,
            unit: 64 << 10,
            rounds: 2,
        };
        let t = predicted_us(&direct, Func::AllReduce, 32 * MIB, H200X2).unwrap();
        assert!((t - 117.5).abs() < 0.05 * 117.5, "{t}");
    }

    #[test]
    fn nothing_is_predicted_outside_what_was_measured() {
        // Another size, rank count, architecture, fabric, collective or kernel family.
        assert_eq!(predicted_us(&sym(), Func::AllReduce, MIB / 2, H200X2), None);
        assert_eq!(
            predicted_us(&sym(), Func::AllReduce, 128 * MIB, H200X2),
            None
        );
        let four = Platform {
            nranks: 4,
            ..H200X2
        };
        assert_eq!(predicted_us(&sym(), Func::AllReduce, 8 * MIB, four), None);
        let a100 = Platform { sm: 80, ..H200X2 };
        assert_eq!(predicted_us(&sym(), Func::AllReduce, 8 * MIB, a100), None);
        let pairs = Platform {
            nvswitch: false,
            ..H200X2
        };
        assert_eq!(predicted_us(&sym(), Func::AllReduce, 8 * MIB, pairs), None);
        assert_eq!(predicted_us(&sym(), Func::Broadcast, 8 * MIB, H200X2), None);
        let ll = GpuKernel::Ll { blocks: 8 };
        assert_eq!(predicted_us(&ll, Func::AllReduce, MIB, H200X2), None);
    }
}
