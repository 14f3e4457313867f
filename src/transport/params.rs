//! The transport knobs a communicator reads once, and the choice of transport per peer.

use std::sync::Arc;

use super::TransportKind;
use super::ib::IbNet;
use crate::bootstrap::PeerInfo;
use crate::bootstrap::congestion::Congestion;
use crate::config::Config;
use crate::error::{Error, Result};

/// Sockets per TCP connection when `NCCL_NSOCKS_PERTHREAD` is auto.
pub(super) const AUTO_SOCKETS: usize = 4;

/// Transport knobs, read once per communicator, and the IB devices found then.
#[derive(Debug, Clone)]
pub(crate) struct TransportParams {
    /// `NCCL_SHM_DISABLE`.
    pub shm_disable: bool,
    /// `NCCL_P2P_DISABLE` (for CPU ranks: no same-process FIFOs; shared memory instead).
    pub p2p_disable: bool,
    /// Socket helper threads per TCP connection (`NCCL_SOCKET_NTHREADS`, auto 0, at most 16).
    pub socket_threads: usize,
    /// Data sockets per TCP connection (`NCCL_SOCKET_NTHREADS × NCCL_NSOCKS_PERTHREAD`, at least 1,
    /// at most 64; [`AUTO_SOCKETS`] when `NCCL_NSOCKS_PERTHREAD` is auto).
    pub sockets: usize,
    /// Why [`TransportParams::sockets`] and the helper threads are what they are, for
    /// `NCCL_DEBUG=INFO` ("4 sockets per connection; NCCL_SOCKET_NTHREADS auto → 0 …").
    pub sockets_why: String,
    /// The congestion control of the TCP data sockets, and why (`RNCCL_SOCKET_CC`).
    pub congestion: Congestion,
    /// The usable IB ports (none with `NCCL_IB_DISABLE=1`, without libibverbs or without an
    /// ACTIVE port `NCCL_IB_HCA` selects).
    pub ib: Option<Arc<IbNet>>,
}

impl TransportParams {
    /// Reads the knobs.
    ///
    /// Errors: a bad knob value, or a socket count outside NCCL's limits.
    pub(crate) fn from_config(cfg: &Config) -> Result<TransportParams> {
        let nthreads_knob = cfg.int("NCCL_SOCKET_NTHREADS")?;
        let per_knob = cfg.int("NCCL_NSOCKS_PERTHREAD")?;
        let nthreads = nthreads_knob.max(0) as usize;
        // Auto: four sockets per connection in all (NCCL's own auto is one outside known
        // clouds). Measured with perf/cpu_vs_mpi.sh's namespaces: a 256 MiB all_reduce moved
        // 0.77-0.83 GB/s over one socket and 0.96-1.12 GB/s over four, which spreads the
        // kernel's per-socket work over the cores. With CUBIC instead of the VM's BBR
        // (RNCCL_SOCKET_CC, 2026-12-01) one, two, four and eight sockets all read 2.4-2.8 GB/s
        // on the 2-vCPU VM: four stays for hosts whose NIC spreads flows over more cores.
        // Helper threads stay off by default on many cores too: GPU ranks' proxies over
        // loopback on the 16-core one-H200 machine (perf/gpu_sockets_vs_nccl.sh under MPS,
        // 2026-12-04) moved 16-128 MiB within 4% with NCCL_SOCKET_NTHREADS 0, 2 or 4.
        let per = if per_knob < 0 {
            AUTO_SOCKETS.div_ceil(nthreads.max(1))
        } else {
            per_knob as usize
        };
        if nthreads > 16 {
            return Err(Error::invalid_usage(format!(
                "NCCL_SOCKET_NTHREADS={nthreads} exceeds NCCL's maximum of 16"
            )));
        }
        let sockets = nthreads.max(1).saturating_mul(per).max(1);
        if sockets > 64 {
            return Err(Error::invalid_usage(format!(
                "NCCL_SOCKET_NTHREADS × NCCL_NSOCKS_PERTHREAD = {sockets} exceeds NCCL's maximum of 64 sockets per connection"
            )));
        }
        let threads_why = if nthreads_knob < 0 {
            "NCCL_SOCKET_NTHREADS auto → 0 helper threads: the rank's own thread drives the \
             sockets (no thread hand-off per slot)"
                .to_string()
        } else if nthreads == 0 {
            "NCCL_SOCKET_NTHREADS=0: the rank's own thread drives the sockets".to_string()
        } else {
            format!("NCCL_SOCKET_NTHREADS={nthreads}: helper threads drive the sockets")
        };
        let per_why = if per_knob < 0 {
            format!(
                "NCCL_NSOCKS_PERTHREAD auto → {per} (rnccl's auto: {AUTO_SOCKETS} sockets in \
                 all spread the kernel's per-socket work over the cores; NCCL's is 1 outside \
                 known clouds)"
            )
        } else {
            format!("NCCL_NSOCKS_PERTHREAD={per}")
        };
        let sockets_why = format!("{sockets} sockets per connection; {threads_why}; {per_why}");
        Ok(TransportParams {
            sockets_why,
            congestion: Congestion::from_config(cfg)?,
            shm_disable: cfg.flag("NCCL_SHM_DISABLE")?,
            p2p_disable: cfg.flag("NCCL_P2P_DISABLE")?,
            socket_threads: nthreads,
            sockets,
            ib: IbNet::probe(cfg)?.map(Arc::new),
        })
    }

    /// The transport between `me` and `peer`: same process, shared memory, then the network:
    /// IB when both ranks have a usable port on the same fabric (as NCCL prefers its IB
    /// plugin), else TCP.
    pub(crate) fn select(&self, me: &PeerInfo, peer: &PeerInfo) -> TransportKind {
        let same_host = me.host_hash == peer.host_hash;
        if same_host && me.pid == peer.pid && me.pid_ns == peer.pid_ns && !self.p2p_disable {
            TransportKind::SameProcess
        } else if same_host && me.shm_dev == peer.shm_dev && !self.shm_disable {
            TransportKind::Shm
        } else if self.ib.is_some() && me.ib_fabric.is_some() && me.ib_fabric == peer.ib_fabric {
            TransportKind::Ib
        } else {
            TransportKind::Tcp
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn why(pairs: &[(&str, &str)]) -> (usize, String) {
        let p = TransportParams::from_config(&Config::from_pairs(pairs).unwrap()).unwrap();
        (p.sockets, p.sockets_why)
    }

    #[test]
    fn socket_counts_say_why() {
        let (n, w) = why(&[("NCCL_IB_DISABLE", "1")]);
        assert_eq!(n, AUTO_SOCKETS);
        assert!(
            w.starts_with("4 sockets per connection; NCCL_SOCKET_NTHREADS auto → 0"),
            "{w}"
        );
        assert!(w.contains("NCCL_NSOCKS_PERTHREAD auto → 4"), "{w}");
        let (n, w) = why(&[
            ("NCCL_IB_DISABLE", "1"),
            ("NCCL_SOCKET_NTHREADS", "2"),
            ("NCCL_NSOCKS_PERTHREAD", "3"),
        ]);
        assert_eq!(n, 6);
        assert!(
            w.contains("NCCL_SOCKET_NTHREADS=2: helper threads")
                && w.contains("NCCL_NSOCKS_PERTHREAD=3"),
            "{w}"
        );
    }
}
