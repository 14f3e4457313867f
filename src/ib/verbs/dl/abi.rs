//! The C structures of libibverbs' stable ABI (rdma-core `libibverbs/verbs.h`, the layout NCCL
//! also declares in src/include/ibvcore.h) that rnccl passes to or reads from the library. Only
//! the fields rnccl touches are named; the rest keep their size so offsets match.

use std::ffi::{c_char, c_int, c_void};

/// `union ibv_gid`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct IbvGid {
    pub(crate) raw: [u8; 16],
}

/// `struct ibv_device_attr`.
#[repr(C)]
pub(crate) struct IbvDeviceAttr {
    pub(crate) fw_ver: [c_char; 64],
    pub(crate) node_guid: u64,
    pub(crate) sys_image_guid: u64,
    pub(crate) max_mr_size: u64,
    pub(crate) page_size_cap: u64,
    pub(crate) vendor_id: u32,
    pub(crate) vendor_part_id: u32,
    pub(crate) hw_ver: u32,
    pub(crate) max_qp: c_int,
    pub(crate) max_qp_wr: c_int,
    pub(crate) device_cap_flags: c_int,
    pub(crate) max_sge: c_int,
    pub(crate) max_sge_rd: c_int,
    pub(crate) max_cq: c_int,
    pub(crate) max_cqe: c_int,
    /// `max_mr` … `max_srq_sge`: 22 ints (`atomic_cap` is an enum of int size).
    pub(crate) rest: [c_int; 22],
    pub(crate) max_pkeys: u16,
    pub(crate) local_ca_ack_delay: u8,
    pub(crate) phys_port_cnt: u8,
}

/// `struct ibv_port_attr` (with the fields rdma-core added after `link_layer`).
#[repr(C)]
#[derive(Default)]
pub(crate) struct IbvPortAttr {
    pub(crate) state: u32,
    pub(crate) max_mtu: u32,
    pub(crate) active_mtu: u32,
    pub(crate) gid_tbl_len: c_int,
    pub(crate) port_cap_flags: u32,
    pub(crate) max_msg_sz: u32,
    pub(crate) bad_pkey_cntr: u32,
    pub(crate) qkey_viol_cntr: u32,
    pub(crate) pkey_tbl_len: u16,
    pub(crate) lid: u16,
    pub(crate) sm_lid: u16,
    pub(crate) lmc: u8,
    pub(crate) max_vl_num: u8,
    pub(crate) sm_sl: u8,
    pub(crate) subnet_timeout: u8,
    pub(crate) init_type_reply: u8,
    pub(crate) active_width: u8,
    pub(crate) active_speed: u8,
    pub(crate) phys_state: u8,
    pub(crate) link_layer: u8,
    pub(crate) flags: u8,
    pub(crate) port_cap_flags2: u16,
    pub(crate) active_speed_ex: u32,
}

/// `struct ibv_context_ops`: 32 function pointers; rnccl calls `poll_cq` (12th), `post_send`
/// (26th) and `post_recv` (27th), which libibverbs declares `static inline` and so exports no
/// symbol for.
#[repr(C)]
pub(crate) struct IbvContextOps {
    pub(crate) _before_poll: [*const c_void; 11],
    pub(crate) poll_cq: unsafe extern "C" fn(cq: *mut IbvCq, n: c_int, wc: *mut IbvWc) -> c_int,
    pub(crate) _before_post: [*const c_void; 13],
    pub(crate) post_send:
        unsafe extern "C" fn(qp: *mut IbvQp, wr: *mut IbvSendWr, bad: *mut *mut IbvSendWr) -> c_int,
    pub(crate) post_recv:
        unsafe extern "C" fn(qp: *mut IbvQp, wr: *mut IbvRecvWr, bad: *mut *mut IbvRecvWr) -> c_int,
    pub(crate) _after: [*const c_void; 5],
}

/// `struct ibv_context` (leading part).
#[repr(C)]
pub(crate) struct IbvContext {
    pub(crate) device: *mut c_void,
    pub(crate) ops: IbvContextOps,
}

/// `struct ibv_cq` (leading part).
#[repr(C)]
pub(crate) struct IbvCq {
    pub(crate) context: *mut IbvContext,
}

/// `struct ibv_qp` (leading part).
#[repr(C)]
pub(crate) struct IbvQp {
    pub(crate) context: *mut IbvContext,
    pub(crate) qp_context: *mut c_void,
    pub(crate) pd: *mut c_void,
    pub(crate) send_cq: *mut IbvCq,
    pub(crate) recv_cq: *mut IbvCq,
    pub(crate) srq: *mut c_void,
    pub(crate) handle: u32,
    pub(crate) qp_num: u32,
}

/// `struct ibv_mr`.
#[repr(C)]
pub(crate) struct IbvMr {
    pub(crate) context: *mut IbvContext,
    pub(crate) pd: *mut c_void,
    pub(crate) addr: *mut c_void,
    pub(crate) length: usize,
    pub(crate) handle: u32,
    pub(crate) lkey: u32,
    pub(crate) rkey: u32,
}

/// `struct ibv_qp_cap`.
#[repr(C)]
#[derive(Default, Clone, Copy)]
pub(crate) struct IbvQpCap {
    pub(crate) max_send_wr: u32,
    pub(crate) max_recv_wr: u32,
    pub(crate) max_send_sge: u32,
    pub(crate) max_recv_sge: u32,
    pub(crate) max_inline_data: u32,
}

/// `struct ibv_qp_init_attr`.
#[repr(C)]
pub(crate) struct IbvQpInitAttr {
    pub(crate) qp_context: *mut c_void,
    pub(crate) send_cq: *mut IbvCq,
    pub(crate) recv_cq: *mut IbvCq,
    pub(crate) srq: *mut c_void,
    pub(crate) cap: IbvQpCap,
    pub(crate) qp_type: u32,
    pub(crate) sq_sig_all: c_int,
}

/// `struct ibv_global_route`.
#[repr(C)]
#[derive(Default, Clone, Copy)]
pub(crate) struct IbvGlobalRoute {
    pub(crate) dgid: IbvGid,
    pub(crate) flow_label: u32,
    pub(crate) sgid_index: u8,
    pub(crate) hop_limit: u8,
    pub(crate) traffic_class: u8,
}

/// `struct ibv_ah_attr`.
#[repr(C)]
#[derive(Default, Clone, Copy)]
pub(crate) struct IbvAhAttr {
    pub(crate) grh: IbvGlobalRoute,
    pub(crate) dlid: u16,
    pub(crate) sl: u8,
    pub(crate) src_path_bits: u8,
    pub(crate) static_rate: u8,
    pub(crate) is_global: u8,
    pub(crate) port_num: u8,
}

/// `struct ibv_qp_attr`.
#[repr(C)]
#[derive(Default, Clone, Copy)]
pub(crate) struct IbvQpAttr {
    pub(crate) qp_state: u32,
    pub(crate) cur_qp_state: u32,
    pub(crate) path_mtu: u32,
    pub(crate) path_mig_state: u32,
    pub(crate) qkey: u32,
    pub(crate) rq_psn: u32,
    pub(crate) sq_psn: u32,
    pub(crate) dest_qp_num: u32,
    pub(crate) qp_access_flags: c_int,
    pub(crate) cap: IbvQpCap,
    pub(crate) ah_attr: IbvAhAttr,
    pub(crate) alt_ah_attr: IbvAhAttr,
    pub(crate) pkey_index: u16,
    pub(crate) alt_pkey_index: u16,
    pub(crate) en_sqd_async_notify: u8,
    pub(crate) sq_draining: u8,
    pub(crate) max_rd_atomic: u8,
    pub(crate) max_dest_rd_atomic: u8,
    pub(crate) min_rnr_timer: u8,
    pub(crate) port_num: u8,
    pub(crate) timeout: u8,
    pub(crate) retry_cnt: u8,
    pub(crate) rnr_retry: u8,
    pub(crate) alt_port_num: u8,
    pub(crate) alt_timeout: u8,
    pub(crate) rate_limit: u32,
}

/// `struct ibv_sge`.
#[repr(C)]
#[derive(Default, Clone, Copy)]
pub(crate) struct IbvSge {
    pub(crate) addr: u64,
    pub(crate) length: u32,
    pub(crate) lkey: u32,
}

/// The `wr.rdma` member of `struct ibv_send_wr`'s 32-byte union.
#[repr(C)]
#[derive(Default, Clone, Copy)]
pub(crate) struct IbvRdma {
    pub(crate) remote_addr: u64,
    pub(crate) rkey: u32,
    pub(crate) _pad: [u32; 5],
}

/// `struct ibv_send_wr`, with the trailing `bind_mw`/`tso` union rdma-core declares.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct IbvSendWr {
    pub(crate) wr_id: u64,
    pub(crate) next: *mut IbvSendWr,
    pub(crate) sg_list: *mut IbvSge,
    pub(crate) num_sge: c_int,
    pub(crate) opcode: u32,
    pub(crate) send_flags: u32,
    pub(crate) imm_data: u32,
    pub(crate) rdma: IbvRdma,
    pub(crate) qp_type: u32,
    pub(crate) _tail: [u64; 6],
}

/// `struct ibv_recv_wr`.
#[repr(C)]
pub(crate) struct IbvRecvWr {
    pub(crate) wr_id: u64,
    pub(crate) next: *mut IbvRecvWr,
    pub(crate) sg_list: *mut IbvSge,
    pub(crate) num_sge: c_int,
}

/// `struct ibv_wc`.
#[repr(C)]
#[derive(Default, Clone, Copy)]
pub(crate) struct IbvWc {
    pub(crate) wr_id: u64,
    pub(crate) status: u32,
    pub(crate) opcode: u32,
    pub(crate) vendor_err: u32,
    pub(crate) byte_len: u32,
    pub(crate) imm_data: u32,
    pub(crate) qp_num: u32,
    pub(crate) src_qp: u32,
    pub(crate) wc_flags: c_int,
    pub(crate) pkey_index: u16,
    pub(crate) slid: u16,
    pub(crate) sl: u8,
    pub(crate) dlid_path_bits: u8,
}

/// `IBV_WC_WITH_IMM` in `wc_flags`.
pub(crate) const WC_WITH_IMM: c_int = 1 << 1;
/// `IBV_WC_RDMA_WRITE`.
pub(crate) const WC_RDMA_WRITE: u32 = 1;
/// `IBV_WC_RECV_RDMA_WITH_IMM`.
pub(crate) const WC_RECV_RDMA_WITH_IMM: u32 = (1 << 7) + 1;
/// `IBV_WR_RDMA_WRITE`.
pub(crate) const WR_RDMA_WRITE: u32 = 0;
/// `IBV_WR_RDMA_WRITE_WITH_IMM`.
pub(crate) const WR_RDMA_WRITE_WITH_IMM: u32 = 1;
/// `IBV_SEND_SIGNALED`.
pub(crate) const SEND_SIGNALED: u32 = 1 << 1;
/// `IBV_QPT_RC`.
pub(crate) const QPT_RC: u32 = 2;
/// `IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ`.
pub(crate) const ACCESS_RW: c_int = 1 | (1 << 1) | (1 << 2);
/// QP states `IBV_QPS_INIT`, `IBV_QPS_RTR`, `IBV_QPS_RTS`.
pub(crate) const QPS_INIT: u32 = 1;
pub(crate) const QPS_RTR: u32 = 2;
pub(crate) const QPS_RTS: u32 = 3;
/// `enum ibv_qp_attr_mask` bits.
pub(crate) const QP_STATE: c_int = 1;
pub(crate) const QP_ACCESS_FLAGS: c_int = 1 << 3;
pub(crate) const QP_PKEY_INDEX: c_int = 1 << 4;
pub(crate) const QP_PORT: c_int = 1 << 5;
pub(crate) const QP_AV: c_int = 1 << 7;
pub(crate) const QP_PATH_MTU: c_int = 1 << 8;
pub(crate) const QP_TIMEOUT: c_int = 1 << 9;
pub(crate) const QP_RETRY_CNT: c_int = 1 << 10;
pub(crate) const QP_RNR_RETRY: c_int = 1 << 11;
pub(crate) const QP_RQ_PSN: c_int = 1 << 12;
pub(crate) const QP_MAX_QP_RD_ATOMIC: c_int = 1 << 13;
pub(crate) const QP_MIN_RNR_TIMER: c_int = 1 << 15;
pub(crate) const QP_SQ_PSN: c_int = 1 << 16;
pub(crate) const QP_MAX_DEST_RD_ATOMIC: c_int = 1 << 17;
pub(crate) const QP_DEST_QPN: c_int = 1 << 20;

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    /// Sizes and offsets of rdma-core's x86-64/aarch64 ABI (pahole of libibverbs 1.14).
    #[test]
    fn layouts_match_the_verbs_abi() {
        assert_eq!(size_of::<IbvDeviceAttr>(), 232);
        assert_eq!(offset_of!(IbvDeviceAttr, phys_port_cnt), 227);
        assert_eq!(size_of::<IbvPortAttr>(), 56);
        assert_eq!(offset_of!(IbvPortAttr, link_layer), 46);
        assert_eq!(size_of::<IbvWc>(), 48);
        assert_eq!(
            offset_of!(IbvContext, ops) + offset_of!(IbvContextOps, post_send),
            8 + 25 * 8
        );
        assert_eq!(offset_of!(IbvQp, qp_num), 52);
        assert_eq!(offset_of!(IbvMr, lkey), 36);
        assert_eq!(size_of::<IbvAhAttr>(), 32);
        assert_eq!(offset_of!(IbvQpAttr, ah_attr), 56);
        assert_eq!(offset_of!(IbvQpAttr, timeout), 130);
        assert_eq!(size_of::<IbvQpAttr>(), 140);
        assert_eq!(offset_of!(IbvSendWr, imm_data), 36);
        assert_eq!(offset_of!(IbvSendWr, rdma), 40);
        assert_eq!(size_of::<IbvSendWr>(), 128);
        assert_eq!(size_of::<IbvQpInitAttr>(), 64);
    }
}
