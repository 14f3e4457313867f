//! The verbs layer: the few InfiniBand verbs rnccl uses (open a device, query it and its ports
//! and GIDs, protection domain, memory registration, completion queues, RC queue pairs, posting
//! RDMA writes and receives, polling completions) behind traits, with two providers:
//!
//! - [`dl`]: libibverbs loaded at run time with `dlopen` (as NCCL's src/misc/ibvsymbols.cc
//!   does), so the `rnccl` binary starts and runs every command on hosts without rdma-core;
//! - [`fake`]: an in-process fabric with the same semantics (RC ordering, RNR, retry timeouts,
//!   access checks, flushes), on which the IB transport's protocol runs in tests.
//!
//! Objects keep what they depend on alive (a queue pair holds its completion queue and
//! protection domain, which hold the device), so dropping them in any order is safe; each
//! provider destroys its objects in its `Drop`.

pub(crate) mod dl;
pub mod fake;

use std::sync::{Arc, Mutex, OnceLock};

use serde::Serialize;

use super::gid::{Gid, GidType, LinkLayer};

/// A verbs failure, naming the call and the device.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerbsError {
    /// libibverbs could not be loaded.
    #[error("libibverbs is not available ({tried}): {why}")]
    NotLoaded {
        /// The names tried, in order.
        tried: String,
        /// The loader's last error.
        why: String,
    },
    /// A required libibverbs function is missing.
    #[error("{lib} lacks {symbol} (version IBVERBS_1.1): not a usable libibverbs")]
    MissingSymbol {
        /// The library.
        lib: String,
        /// The function.
        symbol: &'static str,
    },
    /// A verb failed.
    #[error("{call} on {device} failed: {message} (errno {errno}){hint}")]
    Call {
        /// The verb (`ibv_reg_mr`).
        call: &'static str,
        /// The device (`mlx5_0`).
        device: String,
        /// The errno.
        errno: i32,
        /// The errno in words.
        message: String,
        /// What to do, with a leading separator, or empty.
        hint: String,
    },
    /// No device of that name.
    #[error("no RDMA device named {0}")]
    NoDevice(String),
}

impl VerbsError {
    /// A [`VerbsError::Call`] for `errno`, with advice for the usual causes (memory lock limit
    /// for `ENOMEM` on registration, permissions on `/dev/infiniband` for `EACCES`/`EPERM`).
    pub fn call(call: &'static str, device: &str, errno: i32) -> VerbsError {
        let hint = match (call, errno) {
            ("ibv_reg_mr" | "ibv_reg_dmabuf_mr", libc::ENOMEM) => {
                ": raise the memory lock limit (ulimit -l unlimited, or LimitMEMLOCK=infinity for services)"
            }
            (_, libc::EACCES | libc::EPERM) => {
                ": check the permissions of /dev/infiniband/uverbs* (or run in a container with the device mapped)"
            }
            _ => "",
        };
        VerbsError::Call {
            call,
            device: device.to_string(),
            errno,
            message: std::io::Error::from_raw_os_error(errno).to_string(),
            hint: hint.to_string(),
        }
    }
}

/// What `ibv_query_device` says.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DeviceAttr {
    /// Firmware version.
    pub fw_ver: String,
    /// Node GUID (host byte order).
    pub node_guid: u64,
    /// System image GUID.
    pub sys_image_guid: u64,
    /// Vendor id (0x02c9 Mellanox/NVIDIA).
    pub vendor_id: u32,
    /// Vendor part id (4129 = ConnectX-7).
    pub vendor_part_id: u32,
    /// Most queue pairs.
    pub max_qp: i32,
    /// Most entries of one completion queue.
    pub max_cqe: i32,
    /// Largest registration, bytes.
    pub max_mr_size: u64,
    /// Ports.
    pub phys_port_cnt: u8,
}

/// Port states (`enum ibv_port_state`).
pub(crate) const PORT_ACTIVE: u8 = 4;

/// What `ibv_query_port` says.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PortAttr {
    /// `state` (1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE).
    pub state: u8,
    /// `max_mtu` (`enum ibv_mtu`: 1 = 256 B … 5 = 4096 B).
    pub max_mtu: u8,
    /// `active_mtu`.
    pub active_mtu: u8,
    /// `gid_tbl_len`.
    pub gid_tbl_len: i32,
    /// `lid`.
    pub lid: u16,
    /// `sm_lid`.
    pub sm_lid: u16,
    /// `active_width` (bit: 1 = 1X, 2 = 4X, 4 = 8X, 8 = 12X, 16 = 2X).
    pub active_width: u8,
    /// `active_speed` (bit: 1 SDR, 2 DDR, 4 QDR, 8 FDR10, 16 FDR, 32 EDR, 64 HDR, 128 NDR).
    pub active_speed: u8,
    /// `phys_state` (5 = LinkUp).
    pub phys_state: u8,
    /// `link_layer` (1 InfiniBand, 2 Ethernet).
    pub link_layer: u8,
}

impl PortAttr {
    /// The link layer, when it is one NCCL uses.
    pub fn link(&self) -> Option<LinkLayer> {
        match self.link_layer {
            1 => Some(LinkLayer::InfiniBand),
            2 => Some(LinkLayer::Ethernet),
            _ => None,
        }
    }
}

/// Bytes of an `enum ibv_mtu` value (0 when unknown).
pub fn mtu_bytes(mtu: u8) -> u32 {
    match mtu {
        1..=5 => 128 << mtu,
        _ => 0,
    }
}

/// An opened device.
pub(crate) trait Device: Send + Sync {
    /// Its name (`mlx5_0`).
    fn name(&self) -> &str;
    /// `ibv_query_device`.
    ///
    /// Errors: [`VerbsError::Call`].
    fn query_device(&self) -> Result<DeviceAttr, VerbsError>;
    /// `ibv_query_port`.
    ///
    /// Errors: [`VerbsError::Call`].
    fn query_port(&self, port: u8) -> Result<PortAttr, VerbsError>;
    /// `ibv_query_gid`.
    ///
    /// Errors: [`VerbsError::Call`].
    fn query_gid(&self, port: u8, index: usize) -> Result<Gid, VerbsError>;
    /// The RoCE version of GID `index` (NCCL reads sysfs `gid_attrs/types/<i>` for it);
    /// `None` when unknown.
    fn gid_type(&self, port: u8, index: usize) -> Option<GidType>;
    /// `ibv_alloc_pd`.
    ///
    /// Errors: [`VerbsError::Call`].
    fn alloc_pd(self: Arc<Self>) -> Result<Arc<dyn Pd>, VerbsError>;
}

/// A protection domain.
pub(crate) trait Pd: Send + Sync {
    /// `ibv_reg_mr` of `len` bytes at `addr` with local write, remote write and remote read
    /// access.
    ///
    /// Errors: [`VerbsError::Call`] (`ENOMEM` usually means the memory lock limit).
    ///
    /// # Safety
    /// `addr` is valid for reads and writes of `len` bytes until the returned region is
    /// dropped: the HCA (or the fake fabric) reads it for this end's writes and writes it for
    /// peers' RDMA writes through the region's keys, with no borrow to stop anything else.
    unsafe fn reg_mr(&self, addr: *mut u8, len: usize) -> Result<Box<dyn Mr>, VerbsError>;
    /// `ibv_create_cq` with room for `depth` completions.
    ///
    /// Errors: [`VerbsError::Call`].
    fn create_cq(&self, depth: usize) -> Result<Arc<dyn Cq>, VerbsError>;
    /// `ibv_create_qp`: a reliable-connected queue pair whose send and receive completions go
    /// to `cq`.
    ///
    /// Errors: [`VerbsError::Call`].
    fn create_qp(&self, cq: &Arc<dyn Cq>, caps: QpCaps) -> Result<Box<dyn Qp>, VerbsError>;
}

/// A registered memory region.
pub(crate) trait Mr: Send + Sync {
    /// Local key (for local scatter/gather entries).
    fn lkey(&self) -> u32;
    /// Remote key (what a peer names in its RDMA writes).
    fn rkey(&self) -> u32;
    /// Start address.
    fn addr(&self) -> u64;
}

/// A completion queue.
pub(crate) trait Cq: Send + Sync {
    /// `ibv_poll_cq`: appends up to `max` completions to `out`, returns how many.
    ///
    /// Errors: [`VerbsError::Call`] when the queue itself failed.
    fn poll(&self, out: &mut Vec<Completion>, max: usize) -> Result<usize, VerbsError>;
    /// The provider's own type, for the provider to recognise its queues.
    fn as_any(&self) -> &dyn std::any::Any;
}

/// Queue sizes of a queue pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct QpCaps {
    /// Outstanding send work requests.
    pub(crate) max_send_wr: u32,
    /// Outstanding receive work requests.
    pub(crate) max_recv_wr: u32,
}

/// How to bring a queue pair to RTS against its peer (NCCL `ncclIbQpInit`, `ncclIbQpRtr`,
/// `ncclIbQpRts`: RTR with `max_dest_rd_atomic` 1 and `min_rnr_timer` 12; RTS with
/// `rnr_retry` 7 (infinite) and `max_rd_atomic` 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub(crate) struct QpConnect {
    /// Local port.
    pub(crate) port: u8,
    /// Partition key index (`NCCL_IB_PKEY`).
    pub(crate) pkey_index: u16,
    /// Path MTU (`enum ibv_mtu`): the smaller of both ports' active MTUs.
    pub(crate) mtu: u8,
    /// The peer's queue pair number.
    pub(crate) remote_qpn: u32,
    /// The peer's LID (InfiniBand).
    pub(crate) remote_lid: u16,
    /// The peer's GID (RoCE, or routed InfiniBand).
    pub(crate) remote_gid: [u8; 16],
    /// Use the global route header (RoCE always; InfiniBand across subnets).
    pub(crate) global: bool,
    /// Local GID index (the one NCCL picks).
    pub(crate) gid_index: u8,
    /// Service level (`NCCL_IB_SL`).
    pub(crate) sl: u8,
    /// Traffic class (`NCCL_IB_TC`).
    pub(crate) tc: u8,
    /// ACK timeout exponent (`NCCL_IB_TIMEOUT`).
    pub(crate) timeout: u8,
    /// Retries (`NCCL_IB_RETRY_CNT`).
    pub(crate) retry_cnt: u8,
    /// RNR retries (7 = for ever, as NCCL sets).
    pub(crate) rnr_retry: u8,
}

/// A reliable-connected queue pair.
pub(crate) trait Qp: Send + Sync {
    /// Its number.
    fn qpn(&self) -> u32;
    /// Moves it through INIT and RTR to RTS, connected to the peer in `to`.
    ///
    /// Errors: [`VerbsError::Call`] (`ibv_modify_qp`).
    fn connect(&self, to: &QpConnect) -> Result<(), VerbsError>;
    /// Posts send work requests, in order.
    ///
    /// Errors: [`VerbsError::Call`] (`ENOMEM` when the send queue is full).
    fn post_send(&self, wrs: &[SendWr]) -> Result<(), VerbsError>;
    /// Posts a receive work request without buffer (what an RDMA write with immediate
    /// consumes).
    ///
    /// Errors: [`VerbsError::Call`].
    fn post_recv(&self, wr_id: u64) -> Result<(), VerbsError>;
}

/// What a send work request does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SendOp {
    /// `IBV_WR_RDMA_WRITE`.
    Write,
    /// `IBV_WR_RDMA_WRITE_WITH_IMM` with this immediate value (host order; sent big-endian):
    /// consumes a receive at the peer and completes there.
    WriteImm(u32),
}

/// One send work request: `len` bytes from local `addr` (key `lkey`) to remote `remote_addr`
/// (key `rkey`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SendWr {
    /// Returned in the completion.
    pub(crate) wr_id: u64,
    /// The operation.
    pub(crate) op: SendOp,
    /// Local address.
    pub(crate) addr: u64,
    /// Bytes (0 allowed).
    pub(crate) len: u32,
    /// Local key.
    pub(crate) lkey: u32,
    /// Remote address.
    pub(crate) remote_addr: u64,
    /// Remote key.
    pub(crate) rkey: u32,
    /// Ask for a completion.
    pub(crate) signaled: bool,
}

/// Completion status (`enum ibv_wc_status`); values other than these keep their number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum WcStatus {
    /// `IBV_WC_SUCCESS`.
    Success,
    /// `IBV_WC_LOC_PROT_ERR` (4): a local key does not cover the buffer.
    LocalProtection,
    /// `IBV_WC_WR_FLUSH_ERR` (5): the queue pair was in error; the request never ran.
    Flushed,
    /// `IBV_WC_REM_ACCESS_ERR` (10): the peer refused the remote key or range.
    RemoteAccess,
    /// `IBV_WC_RETRY_EXC_ERR` (12): no acknowledgement after every retry; the peer or the path
    /// is gone.
    RetryExceeded,
    /// `IBV_WC_RNR_RETRY_EXC_ERR` (13): the peer never posted a receive.
    RnrRetryExceeded,
    /// Any other status, by number.
    Other(u32),
}

impl WcStatus {
    /// From `enum ibv_wc_status`.
    pub fn from_raw(v: u32) -> WcStatus {
        match v {
            0 => WcStatus::Success,
            4 => WcStatus::LocalProtection,
            5 => WcStatus::Flushed,
            10 => WcStatus::RemoteAccess,
            12 => WcStatus::RetryExceeded,
            13 => WcStatus::RnrRetryExceeded,
            n => WcStatus::Other(n),
        }
    }

    /// The number (`ibv_wc_status`).
    pub fn raw(self) -> u32 {
        match self {
            WcStatus::Success => 0,
            WcStatus::LocalProtection => 4,
            WcStatus::Flushed => 5,
            WcStatus::RemoteAccess => 10,
            WcStatus::RetryExceeded => 12,
            WcStatus::RnrRetryExceeded => 13,
            WcStatus::Other(n) => n,
        }
    }

    /// What the status means and what usually causes it (NCCL's troubleshooting guide).
    pub fn meaning(self) -> String {
        match self {
            WcStatus::Success => "success".into(),
            WcStatus::LocalProtection => "local protection error (a buffer outside its registration)".into(),
            WcStatus::Flushed => "flushed (the queue pair had already failed)".into(),
            WcStatus::RemoteAccess => "remote access error (the peer refused the key or address)".into(),
            WcStatus::RetryExceeded => "transport retry counter exceeded: the peer stopped answering (it exited, or the link or GID/route is wrong; check NCCL_IB_GID_INDEX, NCCL_IB_TIMEOUT)".into(),
            WcStatus::RnrRetryExceeded => "receiver not ready, retries exhausted (the peer posted no receive)".into(),
            WcStatus::Other(n) => format!("completion error {n}"),
        }
    }
}

/// What a completion reports on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) enum WcOpcode {
    /// An RDMA write (or write with immediate) this side posted.
    RdmaWrite,
    /// A receive consumed by the peer's write with immediate.
    RecvWithImm,
    /// Anything else, by number.
    Other(u32),
}

/// One work completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) struct Completion {
    /// The work request's id.
    pub(crate) wr_id: u64,
    /// Status.
    pub(crate) status: WcStatus,
    /// Opcode (meaningful on success only).
    pub(crate) opcode: WcOpcode,
    /// Bytes received (receives).
    pub(crate) byte_len: u32,
    /// Immediate value (host order), for receives of a write with immediate.
    pub(crate) imm: Option<u32>,
    /// The local queue pair.
    pub(crate) qpn: u32,
}

/// A verbs library: device enumeration and opening.
pub(crate) trait Verbs: Send + Sync {
    /// Where it comes from, in words (`libibverbs.so.1`, `in-process fake fabric`).
    fn describe(&self) -> String;
    /// Device names, in the library's order; empty when the kernel has no RDMA support.
    ///
    /// Errors: [`VerbsError::Call`] for failures other than "no RDMA here".
    fn device_names(&self) -> Result<Vec<String>, VerbsError>;
    /// Opens device `name`.
    ///
    /// Errors: [`VerbsError::NoDevice`], [`VerbsError::Call`].
    fn open(&self, name: &str) -> Result<Arc<dyn Device>, VerbsError>;
    /// Whether the library can register DMA-BUF memory (`ibv_reg_dmabuf_mr`, rdma-core ≥ 34),
    /// the GPUDirect RDMA path without nvidia-peermem.
    fn dmabuf(&self) -> bool;
}

fn installed() -> &'static Mutex<Option<Arc<dyn Verbs>>> {
    static P: OnceLock<Mutex<Option<Arc<dyn Verbs>>>> = OnceLock::new();
    P.get_or_init(|| Mutex::new(None))
}

/// The verbs provider the engine and `ibcheck` use: one installed with [`install`] (the
/// in-process fake in tests), else libibverbs loaded with [`dl::DlVerbs::load`] (`lib` is
/// `NCCL_IBVERBS_LIB`).
///
/// Errors: [`VerbsError::NotLoaded`] or [`VerbsError::MissingSymbol`] when libibverbs is absent
/// or unusable.
pub(crate) fn provider(lib: Option<&str>) -> Result<Arc<dyn Verbs>, VerbsError> {
    if let Some(p) = installed()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone()
    {
        return Ok(p);
    }
    dl::DlVerbs::load(lib).map(|v| v as Arc<dyn Verbs>)
}

/// Makes `p` the provider [`provider`] returns in this process (`None` goes back to
/// libibverbs). For tests and embedders that bring their own fabric.
pub(crate) fn install(p: Option<Arc<dyn Verbs>>) {
    *installed().lock().unwrap_or_else(|p| p.into_inner()) = p;
}
