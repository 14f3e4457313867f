//! InfiniBand and RoCE: what NCCL's IB plugin sees on a host and the checks `rnccl ibcheck`
//! runs on it.
//!
//! - [`sysfs`]: adapters, ports, GID tables, netdevs and counters from `/sys/class/infiniband`
//!   (any root, so captured trees can be studied);
//! - [`gid`]: GIDs and the GID index NCCL picks (`NCCL_IB_GID_INDEX` and friends);
//! - [`rate`]: port rates, adapter capabilities, PCIe bandwidth;
//! - [`counters`]: error and traffic counters, totals and deltas;
//! - [`params`]: the `NCCL_IB_*` knobs, read through the registry;
//! - [`endpoint`]: opening a port and connecting queue pairs (transport and tests share it);
//! - [`verbs`]: the verbs layer (libibverbs loaded at run time, or an in-process fake);
//! - [`check`]: `ibcheck`'s findings, each with its evidence, meaning and fix;
//! - [`perf`]: the active tests (RDMA write bandwidth and latency, ib_write_bw's method).

pub mod check;
pub mod counters;
pub mod endpoint;
pub mod gid;
pub mod params;
pub mod perf;
pub mod rate;
pub mod sysfs;
pub mod verbs;
