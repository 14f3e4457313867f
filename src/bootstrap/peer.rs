//! [`PeerInfo`]: what every rank tells the others about itself at the rendezvous.

use std::net::SocketAddr;

/// What every rank tells the others about itself.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct PeerInfo {
    /// Rank in the communicator the bootstrap was made for.
    pub rank: u32,
    /// Short host name (for messages).
    pub hostname: String,
    /// Hash of the host identity (`NCCL_HOSTID` or hostname + boot id); equal = same host.
    pub host_hash: u64,
    /// Process id.
    pub pid: u32,
    /// Pid namespace inode (pids compare only within one).
    pub pid_ns: u64,
    /// Device number of `/dev/shm`.
    pub shm_dev: u64,
    /// Address of the bootstrap message listener (on the interface the bootstrap chose, which
    /// the TCP transport uses too).
    pub bootstrap: SocketAddr,
    /// Name of the interface that address is on.
    pub iface: String,
    /// The RDMA fabric this rank can use the IB transport on (a usable HCA port,
    /// `NCCL_IB_DISABLE` unset): 0 for real InfiniBand/RoCE, a process-private id for
    /// `RNCCL_IB_FAKE`'s simulated fabric; `None` without IB.
    pub ib_fabric: Option<u64>,
    /// PCI bus id of the GPU the rank runs on (`0000:19:00.0`, lower case); `None` for a host
    /// rank. The channel search keeps only the GPUs ranks use.
    pub gpu_bus: Option<String>,
    /// rnccl version, which must match across ranks.
    pub version: String,
    /// The process's status service (`crate::status`), if it runs one.
    pub status: Option<SocketAddr>,
}

impl PeerInfo {
    /// "rank 3 (host b, pid 812)".
    pub(crate) fn describe(&self) -> String {
        format!(
            "rank {} (host {}, pid {})",
            self.rank, self.hostname, self.pid
        )
    }
}
