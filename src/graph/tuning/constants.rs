//! NCCL's tuning constants (NCCL 2.28 src/graph/tuning.cc `ncclTunerConstantsDefaults`,
//! `nvlsEfficiency`, `treeCorrectionFactor`; internals §4.1). Latencies in µs, bandwidths in
//! GB/s. Indices: algorithm (Tree, Ring, CollNetDirect, CollNetChain, NVLS, NVLSTree, PAT),
//! protocol (LL, LL128, Simple), hardware (NVLink, PCI, network), compute-capability class
//! (Volta, Ampere, Hopper, Blackwell), node-count class (1, 2, 4+ nodes).

/// Base latency per algorithm and protocol (`baseLatencies`).
pub const BASE_LAT: [[f32; 3]; 7] = [
    [6.8, 14.0, 8.4],
    [6.6, 14.0, 8.4],
    [0.0, 0.0, 0.0],
    [0.0, 0.0, 0.0],
    [0.0, 0.0, 0.0],
    [0.0, 0.0, 0.0],
    [8.0, 8.0, 8.0],
];

/// Per-hop latency per hardware, algorithm and protocol (`hwLatencies`).
pub const HW_LAT: [[[f32; 3]; 7]; 3] = [
    [
        [0.6, 1.25, 4.0],
        [0.6, 1.9, 3.4],
        [0.0, 0.0, 3.7],
        [0.0, 0.0, 2.8],
        [0.0, 0.0, 25.0],
        [0.0, 0.0, 25.0],
        [0.0, 0.0, 4.0],
    ],
    [
        [1.0, 1.9, 4.0],
        [1.0, 2.5, 5.7],
        [0.0, 0.0, 3.7],
        [0.0, 0.0, 2.8],
        [0.0, 0.0, 0.0],
        [0.0, 0.0, 0.0],
        [0.0, 0.0, 4.0],
    ],
    [
        [5.0, 8.5, 14.0],
        [2.7, 4.0, 14.0],
        [0.0, 0.0, 31.0],
        [0.0, 0.0, 30.0],
        [0.0, 0.0, 18.0],
        [0.0, 0.0, 20.9],
        [0.0, 0.0, 14.0],
    ],
];

/// LL bandwidth caps (`llMaxBws`): row = compute class on one node, else 1 for AMD CPUs, 0
/// otherwise; column = node-count class.
pub const LL_MAX_BW: [[f64; 3]; 4] = [
    [39.0, 39.0, 20.4],
    [87.7, 22.5, 19.0],
    [141.0, 45.0, 35.0],
    [2.0 * 141.0, 2.0 * 45.0, 2.0 * 35.0],
];

/// Per-channel ring LL128 caps (`perChMaxRingLL128Bws`).
pub const PER_CH_RING_LL128: [[f64; 3]; 4] = [
    [20.0, 20.0, 20.0],
    [20.0, 20.0, 20.0],
    [36.7, 36.7, 36.7],
    [2.0 * 36.7, 34.6, 2.0 * 36.7],
];

/// Per-channel tree LL128 caps (`perChMaxTreeLL128Bws`).
pub const PER_CH_TREE_LL128: [[f64; 3]; 4] = [
    [20.0, 20.0, 20.0],
    [20.0, 20.0, 20.0],
    [36.7, 36.7, 29.0],
    [55.6, 31.67, 20.0],
];

/// Per-channel tree caps (`perChMaxTreeBws`).
pub const PER_CH_TREE: [[f64; 3]; 4] = [
    [26.5, 18.5, 10.0],
    [24.0, 23.6, 17.8],
    [38.7, 41.4, 36.0],
    [70.0, 42.8, 24.0],
];

/// Per-channel NVLS tree caps (`perChMaxNVLSTreeBws`).
pub const PER_CH_NVLS_TREE: [[f64; 3]; 4] = [
    [26.5, 18.5, 10.0],
    [24.0, 23.6, 17.8],
    [0.0, 57.7, 45.5],
    [0.0, 96.0, 43.8],
];

/// NVLS efficiency per compute class (`nvlsEfficiency`).
pub const NVLS_EFFICIENCY: [f32; 4] = [0.0, 0.0, 0.85, 0.74];

/// Tree all-reduce bandwidth correction per protocol for sizes 64 B << i, i in 0..23
/// (`treeCorrectionFactor`).
pub const TREE_CORRECTION: [[f32; 23]; 3] = [
    [
        1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.7, 0.7, 0.7, 0.7, 0.6, 0.5, 0.4, 0.4, 0.5, 0.6, 0.7, 0.8,
        0.9, 1.0, 1.0, 1.0, 1.0,
    ],
    [
        1.0, 1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.8, 0.8, 0.7, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.8, 0.9,
        0.9, 0.9, 0.9, 1.0, 1.0,
    ],
    [
        0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.8, 0.7, 0.6, 0.6, 0.5, 0.5, 0.5, 0.5, 0.6, 0.7, 0.8,
        0.7, 0.7, 0.8, 0.9, 0.9,
    ],
];

/// Threads per warp, and NCCL's thread limits (src/include/device.h).
pub const WARP_SIZE: u32 = 32;
/// `NCCL_MAX_NTHREADS`.
pub const MAX_NTHREADS: u32 = 640;
/// `NCCL_SIMPLE_MAX_NTHREADS`.
pub const SIMPLE_MAX_NTHREADS: u32 = 512;
/// `NCCL_LL_MAX_NTHREADS`.
pub const LL_MAX_NTHREADS: u32 = 512;
/// `NCCL_LL128_MAX_NTHREADS`.
pub const LL128_MAX_NTHREADS: u32 = 640;
/// Bytes per thread before adding channels or threads, LL / LL128 / Simple
/// (`NCCL_LL_THREAD_THRESHOLD` etc., src/include/comm.h).
pub const THREAD_THRESHOLDS: [u64; 3] = [8, 8, 64];
