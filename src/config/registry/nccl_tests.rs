//! Knobs read by nccl-tests (`nccl-tests:src/common.cu`, `src/alltoallv.cu`), NVIDIA's benchmark
//! suite whose flags and output `rnccl bench` follows.

use super::BASE;
use super::spec::{Category as C, KnobSpec, KnobType as T, Origin, Subsystem, Unit as U};

const TESTS: KnobSpec = KnobSpec {
    subsystem: Subsystem::NcclTests,
    category: C::System,
    origin: Origin::NcclTests,
    ..BASE
};

#[rustfmt::skip]
pub(super) const KNOBS: &[KnobSpec] = &[
    KnobSpec { name: "NCCL_TESTS_SPLIT", ty: T::Text, related: &["NCCL_TESTS_SPLIT_MASK"], source: "nccl-tests:src/common.cu:1499",
        description: "Splits the ranks into parallel communicators by an operation on the global rank: '<op><value>' with op AND, OR, MOD or DIV (or the C symbols), value decimal, 0x hex or 0b binary. 'AND 0x7' on 8-GPU nodes tests one rail per communicator.", ..TESTS },
    KnobSpec { name: "NCCL_TESTS_SPLIT_MASK", ty: T::Text, related: &["NCCL_TESTS_SPLIT"], source: "nccl-tests:src/common.cu:1497",
        description: "Hex mask; the communicator of a rank is rank AND mask. Same as NCCL_TESTS_SPLIT='AND <mask>'.", ..TESTS },
    KnobSpec { name: "NCCL_TESTS_DEVICE", auto: "local rank × threads × GPUs per thread", range: Some((0, i64::MAX)), source: "nccl-tests:src/common.cu:1565",
        description: "First CUDA device index a process uses.", ..TESTS },
    KnobSpec { name: "NCCL_TESTS_MIN_BW", ty: T::Float, unit: U::GigabytesPerSecond, source: "nccl-tests:src/common.cu:1829",
        description: "Makes the test fail when the average bus bandwidth is below 90% of this value, for health checks.", ..TESTS },
    KnobSpec { name: "NCCL_TESTS_ALLTOALLV_MATRIX_FILE", ty: T::File, category: C::Tuning, related: &["NCCL_TESTS_ALLTOALLV_MATRIX_SCALE"], source: "nccl-tests:src/alltoallv.cu:150",
        description: "Traffic matrix alltoallv_perf sends instead of a generated one.", ..TESTS },
    KnobSpec { name: "NCCL_TESTS_ALLTOALLV_PRINT_SUMMARY", ty: T::Bool, default: "0", category: C::Debug, source: "nccl-tests:src/alltoallv.cu:152",
        description: "Prints a summary of the alltoallv traffic matrix.", ..TESTS },
    KnobSpec { name: "NCCL_TESTS_ALLTOALLV_SPREAD", ty: T::Float, default: "0", category: C::Tuning, source: "nccl-tests:src/alltoallv.cu:154",
        description: "From 0 to 1, how strongly the generated alltoallv pattern favours near peers over far ones.", ..TESTS },
    KnobSpec { name: "NCCL_TESTS_ALLTOALLV_MATRIX_SCALE", ty: T::Float, default: "1", category: C::Tuning, related: &["NCCL_TESTS_ALLTOALLV_MATRIX_FILE"], source: "nccl-tests:src/alltoallv.cu:163",
        description: "Factor applied to every entry of the alltoallv traffic matrix.", ..TESTS },
];
