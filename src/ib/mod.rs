//! InfiniBand and RoCE: what NCCL's IB plugin sees on a host (`crate::ibcheck` judges it and
//! runs the RDMA tests; the IB transport connects over it).
//!
//! - [`sysfs`]: adapters, ports, GID tables, netdevs and counters from `/sys/class/infiniband`
//!   (any root, so captured trees can be studied);
//! - [`gid`]: GIDs and the GID index NCCL picks (`NCCL_IB_GID_INDEX` and friends);
//! - [`rate`]: port rates, adapter capabilities, PCIe bandwidth;
//! - [`counters`]: error and traffic counters, totals and deltas;
//! - [`params`]: the `NCCL_IB_*` knobs, read through the registry;
//! - [`endpoint`]: opening a port and connecting queue pairs (transport and tests share it);
//! - [`verbs`]: the verbs layer (libibverbs loaded at run time, or an in-process fake);

pub mod counters;
pub mod endpoint;
pub mod gid;
pub mod params;
pub mod rate;
pub mod sysfs;
pub mod verbs;
