//! A queue pair of libibverbs: bringing it to RTS and posting work requests through the
//! context's ops table.

use std::ffi::c_int;
use std::sync::Arc;

use super::PdInner;
use super::abi::*;
use crate::ib::verbs::{Cq, Qp, QpConnect, SendOp, SendWr, VerbsError};

/// A queue pair. Fields drop in order: the QP is destroyed (in `Drop`) before its CQ and PD.
pub(super) struct DlQp {
    pub(super) qp: *mut IbvQp,
    pub(super) pd: Arc<PdInner>,
    pub(super) _cq: Arc<dyn Cq>,
}

// SAFETY: see DlDevice.
unsafe impl Send for DlQp {}
// SAFETY: see DlDevice.
unsafe impl Sync for DlQp {}

impl Drop for DlQp {
    fn drop(&mut self) {
        // SAFETY: qp came from ibv_create_qp and is destroyed once, before its CQ and PD.
        unsafe { (self.pd.dev.fns.destroy_qp)(self.qp) };
    }
}

impl DlQp {
    fn modify(&self, attr: &mut IbvQpAttr, mask: c_int) -> Result<(), VerbsError> {
        // SAFETY: qp is live; attr is a full struct ibv_qp_attr.
        let rc = unsafe { (self.pd.dev.fns.modify_qp)(self.qp, attr, mask) };
        if rc != 0 {
            return Err(VerbsError::call(
                "ibv_modify_qp",
                &self.pd.dev.name,
                rc.abs(),
            ));
        }
        Ok(())
    }
}

impl Qp for DlQp {
    fn qpn(&self) -> u32 {
        // SAFETY: qp is live.
        unsafe { (*self.qp).qp_num }
    }

    fn connect(&self, to: &QpConnect) -> Result<(), VerbsError> {
        let mut a = IbvQpAttr {
            qp_state: QPS_INIT,
            pkey_index: to.pkey_index,
            port_num: to.port,
            qp_access_flags: ACCESS_RW,
            ..IbvQpAttr::default()
        };
        self.modify(&mut a, QP_STATE | QP_PKEY_INDEX | QP_PORT | QP_ACCESS_FLAGS)?;
        let mut a = IbvQpAttr {
            qp_state: QPS_RTR,
            path_mtu: u32::from(to.mtu),
            dest_qp_num: to.remote_qpn,
            rq_psn: 0,
            max_dest_rd_atomic: 1,
            min_rnr_timer: 12,
            ..IbvQpAttr::default()
        };
        a.ah_attr.dlid = to.remote_lid;
        a.ah_attr.sl = to.sl;
        a.ah_attr.port_num = to.port;
        if to.global {
            a.ah_attr.is_global = 1;
            a.ah_attr.grh.dgid.raw = to.remote_gid;
            a.ah_attr.grh.sgid_index = to.gid_index;
            a.ah_attr.grh.hop_limit = 255;
            a.ah_attr.grh.traffic_class = to.tc;
        }
        self.modify(
            &mut a,
            QP_STATE
                | QP_AV
                | QP_PATH_MTU
                | QP_DEST_QPN
                | QP_RQ_PSN
                | QP_MAX_DEST_RD_ATOMIC
                | QP_MIN_RNR_TIMER,
        )?;
        let mut a = IbvQpAttr {
            qp_state: QPS_RTS,
            timeout: to.timeout,
            retry_cnt: to.retry_cnt,
            rnr_retry: to.rnr_retry,
            sq_psn: 0,
            max_rd_atomic: 1,
            ..IbvQpAttr::default()
        };
        self.modify(
            &mut a,
            QP_STATE | QP_TIMEOUT | QP_RETRY_CNT | QP_RNR_RETRY | QP_SQ_PSN | QP_MAX_QP_RD_ATOMIC,
        )
    }

    fn post_send(&self, wrs: &[SendWr]) -> Result<(), VerbsError> {
        if wrs.is_empty() {
            return Ok(());
        }
        let mut sges: Vec<IbvSge> = wrs
            .iter()
            .map(|w| IbvSge {
                addr: w.addr,
                length: w.len,
                lkey: w.lkey,
            })
            .collect();
        let sge_base = sges.as_mut_ptr();
        let mut raw: Vec<IbvSendWr> = wrs
            .iter()
            .enumerate()
            .map(|(i, w)| {
                let (opcode, imm) = match w.op {
                    SendOp::Write => (WR_RDMA_WRITE, 0),
                    SendOp::WriteImm(v) => (WR_RDMA_WRITE_WITH_IMM, v.to_be()),
                };
                IbvSendWr {
                    wr_id: w.wr_id,
                    next: std::ptr::null_mut(),
                    // SAFETY: i < sges.len(); the pointer stays in `sges`.
                    sg_list: unsafe { sge_base.add(i) },
                    num_sge: c_int::from(w.len > 0),
                    opcode,
                    send_flags: if w.signaled { SEND_SIGNALED } else { 0 },
                    imm_data: imm,
                    rdma: IbvRdma {
                        remote_addr: w.remote_addr,
                        rkey: w.rkey,
                        _pad: [0; 5],
                    },
                    qp_type: 0,
                    _tail: [0; 6],
                }
            })
            .collect();
        let base = raw.as_mut_ptr();
        for i in 0..raw.len() - 1 {
            // SAFETY: i + 1 < len: both pointers lie in `raw`, which outlives the call.
            unsafe { (*base.add(i)).next = base.add(i + 1) };
        }
        let mut bad: *mut IbvSendWr = std::ptr::null_mut();
        // SAFETY: qp is live; the chain and its SGEs live until the call returns (the provider
        // copies them into the send queue).
        let rc = unsafe {
            let ctx = (*self.qp).context;
            ((*ctx).ops.post_send)(self.qp, base, &mut bad)
        };
        if rc != 0 {
            return Err(VerbsError::call(
                "ibv_post_send",
                &self.pd.dev.name,
                rc.abs(),
            ));
        }
        Ok(())
    }

    fn post_recv(&self, wr_id: u64) -> Result<(), VerbsError> {
        let mut wr = IbvRecvWr {
            wr_id,
            next: std::ptr::null_mut(),
            sg_list: std::ptr::null_mut(),
            num_sge: 0,
        };
        let mut bad: *mut IbvRecvWr = std::ptr::null_mut();
        // SAFETY: qp is live; wr lives until the call returns.
        let rc = unsafe {
            let ctx = (*self.qp).context;
            ((*ctx).ops.post_recv)(self.qp, &mut wr, &mut bad)
        };
        if rc != 0 {
            return Err(VerbsError::call(
                "ibv_post_recv",
                &self.pd.dev.name,
                rc.abs(),
            ));
        }
        Ok(())
    }
}
