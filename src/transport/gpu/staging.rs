//! Which GPU connections of a communicator are staged through host memory rather than stored
//! into the peer GPU directly: all of them under `NCCL_P2P_DISABLE=1`; otherwise those from a
//! rank on this host whose GPU is farther than the P2P level (`NCCL_P2P_LEVEL`, NCCL's default
//! PXB) on this host's topology ([`crate::topo::system::System::p2p_allowed`], NCCL's
//! `ncclTopoCheckP2p`). Ranks on this host tell each other their GPU's PCI bus id through the
//! bootstrap first; the receiving end of each connection decides, and the sending end follows
//! its offer.

use std::path::Path;

use super::conns::GpuSetup;
use crate::bootstrap::{Deadline, tags};
use crate::error::Result;
use crate::topo::system::System;

/// Per communicator rank: whether the FIFOs this rank receives from it live in host memory.
/// Without a topology (none detected, no `NCCL_TOPO_FILE`) only the knob decides, and GPUs
/// without peer access are refused at connection time as before.
///
/// Errors: [`crate::error::Error::Timeout`] / [`crate::error::Error::Aborted`] naming a rank of this host that
/// did not say which GPU it uses; bootstrap errors.
pub(crate) fn staged_peers(s: &GpuSetup<'_>) -> Result<Vec<bool>> {
    let bus_id = s.bus_id;
    let n = s.net_rank.len();
    if s.p2p_disable {
        return Ok(vec![true; n]);
    }
    let peers = s.net.peers();
    let host = peers[s.net_rank[s.rank]].host_hash;
    let local: Vec<usize> = (0..n)
        .filter(|&r| r != s.rank && peers[s.net_rank[r]].host_hash == host)
        .collect();
    let mut staged = vec![false; n];
    if local.is_empty() {
        return Ok(staged);
    }
    let deadline = Deadline::after(s.timeout);
    for &r in &local {
        s.net.send(
            s.net_rank[r],
            s.comm_tag,
            tags::gpu_bus(),
            bus_id.as_bytes(),
            deadline,
        )?;
    }
    let mut buses = Vec::with_capacity(local.len());
    for &r in &local {
        let what = format!(
            "waiting for {} to say which GPU it uses",
            s.net.describe(s.net_rank[r])
        );
        let b = s.net.recv_abortable(
            s.net_rank[r],
            s.comm_tag,
            tags::gpu_bus(),
            deadline,
            &what,
            s.abort,
        )?;
        buses.push((r, String::from_utf8_lossy(&b).into_owned()));
    }
    // Every rank loads the topology only after the exchange, so one that cannot still answers.
    let system = match System::load(s.knobs, Path::new("/")) {
        Ok(Some(sys)) => sys,
        Ok(None) => return Ok(staged),
        Err(e) => {
            tracing::warn!(target: "rnccl::init", "topology detection failed ({e}): NCCL_P2P_LEVEL is not applied to GPU connections");
            return Ok(staged);
        }
    };
    for (r, bus) in buses {
        staged[r] = system.p2p_allowed(bus_id, &bus) == Some(false);
        if staged[r] {
            tracing::info!(
                target: "rnccl::init",
                "GPU {bus_id} and GPU {bus} of rank {r} are farther apart than the P2P level: their connections go through host memory"
            );
        }
    }
    Ok(staged)
}
