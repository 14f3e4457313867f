//! The channel layout every rank of a communicator must agree on — ring order per channel, FIFO
//! slot size, the `NCCL_ALGO` in force — decided by rank 0 from its knobs and sent to the others,
//! so ranks whose environments differ still run matching plans.

use std::path::Path;

use crate::bootstrap::{BootstrapNet, Deadline, PeerInfo, tags};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::graph::comm::{ChannelBounds, Channels, PlanParams, search_or_load};
use crate::graph::file::GraphFile;
use crate::graph::xml::write_graph_dump;
use crate::topo::busid::busid_to_u64;
use crate::topo::detect::{self, Inventory};
use crate::topo::kinds::NodeType;
use crate::topo::{System, TopoError};
use crate::transport::slot_size::slot_bytes;

/// Channels for CPU ranks when no topology gives a count: each channel is a separate ring with
/// its own connections (and sockets), which keeps TCP links busy.
pub(crate) const CPU_DEFAULT_CHANNELS: usize = 2;

/// The agreed layout.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Layout {
    /// Per channel, the ring order of all ranks.
    pub rings: Vec<Vec<usize>>,
    /// Bytes per FIFO slot.
    pub slot_bytes: usize,
    /// `NCCL_ALGO` as rank 0 has it.
    pub algo: Option<String>,
    /// `NCCL_PROTO` as rank 0 has it (every rank must pick the same protocol).
    pub proto: Option<String>,
    /// Where the ring order came from ("rank order", "topology").
    pub source: String,
}

/// Rank 0's decision for a communicator over `peers` (GPU ranks when `gpu`): channel count and
/// ring order from NCCL's search on the topology (`NCCL_TOPO_FILE`, or GPUs detected on this
/// host) when it describes as many GPUs per node as there are ranks per host; rank order on
/// [`CPU_DEFAULT_CHANNELS`] channels otherwise.
///
/// Errors: bad knob values, or an `NCCL_TOPO_FILE` that cannot be read.
pub(crate) fn decide(cfg: &Config, peers: &[PeerInfo], gpu: bool) -> Result<Layout> {
    let nranks = peers.len();
    let slot_bytes = slot_bytes(cfg, ranks_by_host(peers).len(), gpu)?;
    let algo = cfg.string("NCCL_ALGO").map(str::to_string);
    let proto = cfg.string("NCCL_PROTO").map(str::to_string);
    if let Some((mut rings, source)) = topology_rings(cfg, peers)? {
        let bounds = ChannelBounds::from_config(cfg).map_err(|e| Error::from(*e))?;
        // Host-staged FIFOs (NCCL_P2P_DISABLE) are bound by PCIe, not by blocks: NCCL's own
        // (smaller) channel count for that topology already beat NCCL there (1.03-1.13x busbw
        // on 2xH200), and every extra channel costs 4 MiB of pinned or /dev/shm memory.
        if gpu && bounds == ChannelBounds::default() && !cfg.flag("NCCL_P2P_DISABLE")? {
            rings = gpu_rings(rings);
        }
        return Ok(Layout {
            rings,
            slot_bytes,
            algo,
            proto,
            source,
        });
    }
    let bounds = ChannelBounds::from_config(cfg).map_err(|e| Error::from(*e))?;
    let nch = bounds.apply(CPU_DEFAULT_CHANNELS);
    Ok(Layout {
        rings: vec![(0..nranks).collect(); nch],
        slot_bytes,
        algo,
        proto,
        source: "rank order".into(),
    })
}

/// GPU ranks over peer access run NCCL's rings repeated up to [`crate::conn::MAX_CHANNELS`]
/// channels when no channel knob is set. rnccl's step interpreter moves less per thread block
/// than NCCL's Simple primitives, so it needs more blocks in flight to fill NVLink. On 2×H200
/// (NCCL's 24 channels), perf/gpu_sweep.sh, all_reduce busbw:
/// - 24 → 48 channels: 314 → 334 GB/s at 4 GB (all_gather 267 → 326, broadcast 315 → 358);
/// - 48 → 64 channels: 288 → 295 at 128 MB, 319 → 331 at 512 MB, 330 → 345 at 2 GB and
///   335 → 349 at 8 GB (NCCL: 346 at 8 GB), 2026-11-23.
fn gpu_rings(rings: Vec<Vec<usize>>) -> Vec<Vec<usize>> {
    let n = crate::conn::MAX_CHANNELS.max(rings.len());
    rings.iter().cycle().take(n).cloned().collect()
}

/// Ranks grouped by host, hosts ordered by their lowest rank, ranks in rank order.
pub(crate) fn ranks_by_host(peers: &[PeerInfo]) -> Vec<Vec<usize>> {
    let mut hosts: Vec<(u64, Vec<usize>)> = Vec::new();
    for (r, p) in peers.iter().enumerate() {
        match hosts.iter_mut().find(|(h, _)| *h == p.host_hash) {
            Some((_, v)) => v.push(r),
            None => hosts.push((p.host_hash, vec![r])),
        }
    }
    hosts.into_iter().map(|(_, v)| v).collect()
}

/// This host's topology (as [`System::load`] reads it) with only the GPUs the ranks of rank 0's
/// host run on: NCCL builds its system from the communicator's GPUs alone (src/graph/topo.cc,
/// one GPU per rank of the node), so a job on two GPUs of a four-GPU host searches channels
/// between those two instead of finding the host's GPU count wrong.
///
/// Errors: as [`System::load`].
fn load_system(cfg: &Config, peers: &[PeerInfo]) -> std::result::Result<Option<System>, TopoError> {
    let mut inventory = detect::detect(Path::new("/"), cfg)?;
    keep_rank_gpus(&mut inventory, peers);
    System::from_host(cfg, inventory)
}

/// Keeps in `inventory` only the GPUs of the ranks on rank 0's host (`peers[0]`), when every one
/// of those ranks named its GPU and each of them was detected; otherwise leaves it whole.
fn keep_rank_gpus(inventory: &mut Inventory, peers: &[PeerInfo]) {
    let Some(first) = peers.first() else {
        return;
    };
    let buses: Option<Vec<u64>> = peers
        .iter()
        .filter(|p| p.host_hash == first.host_hash)
        .map(|p| p.gpu_bus.as_deref().map(busid_to_u64))
        .collect();
    let Some(buses) = buses else {
        return;
    };
    let detected = |b: &u64| inventory.gpus.iter().any(|g| busid_to_u64(&g.busid) == *b);
    if buses.iter().all(detected) {
        inventory
            .gpus
            .retain(|g| buses.contains(&busid_to_u64(&g.busid)));
    }
}

/// The channels NCCL's search builds for `peers` on this host's topology (`NCCL_TOPO_FILE`, or
/// GPUs detected here) — or reads from `NCCL_GRAPH_FILE` — with the system and where it came
/// from; `None` when there is no topology or its GPUs per node do not match the ranks per host.
/// An `NCCL_GRAPH_FILE` that cannot be read or fails NCCL's checks is an error, as in NCCL.
fn topology_channels(
    cfg: &Config,
    peers: &[PeerInfo],
) -> Result<Option<(System, Channels, String)>> {
    let file = cfg.string("NCCL_TOPO_FILE");
    let system = match load_system(cfg, peers) {
        Ok(Some(s)) => s,
        Ok(None) => return Ok(None),
        Err(e) if file.is_some() => {
            return Err(Error::invalid_usage(format!("NCCL_TOPO_FILE: {e}")));
        }
        Err(e) => {
            tracing::warn!(target: "rnccl::graph", "topology detection failed ({e}); channels follow rank order");
            return Ok(None);
        }
    };
    // NCCL's parser fails communicator creation over these; `rnccl topo` and env-explain give
    // the same verdict on the same file.
    if let Some(f) = file
        && let Some(n) = system.notes.iter().find(|n| n.nccl_rejects)
    {
        return Err(Error::invalid_usage(format!(
            "NCCL_TOPO_FILE {f}: NCCL would refuse this topology ({n}), so rnccl does too; fix \
             the file (rnccl topo --topo-file {f} lists every problem) or unset NCCL_TOPO_FILE"
        )));
    }
    let nodes = ranks_by_host(peers);
    let params = PlanParams::from_config(cfg).map_err(|e| Error::from(*e))?;
    let gpus = system.count(NodeType::Gpu);
    let graphs = match cfg.text("NCCL_GRAPH_FILE")? {
        Some(f) => Some(
            GraphFile::load(Path::new(f))
                .map_err(|e| Error::invalid_usage(format!("NCCL_GRAPH_FILE: {e}")))?,
        ),
        None => None,
    };
    let planned = search_or_load(&system, &nodes, &params, graphs.as_ref())
        .map_err(|e| Error::invalid_usage(format!("NCCL_GRAPH_FILE: {e}")))?;
    match planned {
        Some(ch) => {
            let from = file.map_or_else(
                || "detected GPUs".to_string(),
                |f| format!("NCCL_TOPO_FILE {f}"),
            );
            Ok(Some((
                system,
                ch,
                format!("topology ({from}: {gpus} GPUs per node)"),
            )))
        }
        None => {
            tracing::info!(
                target: "rnccl::graph",
                "topology has {gpus} GPUs per node but hosts have {:?} ranks: channels follow rank order",
                nodes.iter().map(Vec::len).collect::<Vec<_>>()
            );
            Ok(None)
        }
    }
}

fn topology_rings(cfg: &Config, peers: &[PeerInfo]) -> Result<Option<(Vec<Vec<usize>>, String)>> {
    Ok(topology_channels(cfg, peers)?.map(|(_, ch, from)| (ch.rings(), from)))
}

/// Writes `NCCL_GRAPH_DUMP_FILE` as NCCL does once it has built its channels, when `rank` is
/// the dumping rank (`NCCL_GRAPH_DUMP_FILE_RANK`, default 0) and the channels come from a
/// topology (CPU ranks on a host without one have no graphs to dump).
///
/// Errors: a bad knob value, an `NCCL_TOPO_FILE` that cannot be read, or a file that cannot be
/// written ([`Error::InvalidUsage`] naming the knob and the path).
pub(crate) fn dump_graph(cfg: &Config, rank: usize, peers: &[PeerInfo]) -> Result<()> {
    if cfg.string("NCCL_GRAPH_DUMP_FILE").is_none() {
        return Ok(());
    }
    let dump_rank = cfg.int("NCCL_GRAPH_DUMP_FILE_RANK")?;
    if usize::try_from(dump_rank).ok() != Some(rank) {
        return Ok(());
    }
    let Some((system, channels, _)) = topology_channels(cfg, peers)? else {
        tracing::info!(target: "rnccl::graph", "NCCL_GRAPH_DUMP_FILE: no topology on this host, so no graphs to write");
        return Ok(());
    };
    let written = write_graph_dump(cfg, rank, &system, &channels)
        .map_err(|e| Error::invalid_usage(format!("NCCL_GRAPH_DUMP_FILE: {e}")))?;
    if let Some(path) = written {
        tracing::info!(target: "rnccl::graph", "NCCL_GRAPH_DUMP_FILE: wrote {}", path.display());
    }
    Ok(())
}

/// Rank 0 sends its decision — the layout, or why it could not make one — to every rank; the
/// others receive it. A rank-0 failure thus reaches every rank at once instead of leaving them
/// to wait out the timeout.
///
/// Errors: rank 0's own decision error (on every rank, naming rank 0 on the others), or
/// bootstrap failures naming the rank involved.
pub(crate) fn share(
    net: &BootstrapNet,
    tag: u64,
    rank: usize,
    net_rank: &[usize],
    decision: Option<Result<Layout>>,
    deadline: Deadline,
) -> Result<Layout> {
    if rank == 0 {
        let decision = decision.ok_or_else(|| Error::Internal("rank 0 has no layout".into()))?;
        let wire: std::result::Result<&Layout, String> =
            decision.as_ref().map_err(ToString::to_string);
        let body = serde_json::to_vec(&wire)
            .map_err(|e| Error::Internal(format!("encoding the channel layout: {e}")))?;
        for &r in &net_rank[1..] {
            net.send(r, tag, tags::layout(), &body, deadline)?;
        }
        decision
    } else {
        let what = "waiting for rank 0's channel layout";
        let body = net.recv(net_rank[0], tag, tags::layout(), deadline, what)?;
        let wire: std::result::Result<Layout, String> = serde_json::from_slice(&body)
            .map_err(|e| Error::Remote(format!("malformed channel layout from rank 0: {e}")))?;
        wire.map_err(|e| Error::Remote(format!("rank 0 could not set up the communicator: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_knobs_clamp_then_duplicate() {
        let count = |pairs: &[(&str, &str)], base| {
            ChannelBounds::from_config(&Config::from_pairs(pairs).unwrap())
                .map(|b| b.apply(base))
                .map_err(|e| e.to_string())
        };
        assert_eq!(count(&[], 2).unwrap(), 2);
        assert_eq!(count(&[("NCCL_MAX_NCHANNELS", "1")], 2).unwrap(), 1);
        assert_eq!(count(&[("NCCL_MIN_NCHANNELS", "6")], 2).unwrap(), 6);
        assert_eq!(count(&[("NCCL_MAX_CTAS", "3")], 12).unwrap(), 3);
        assert_eq!(
            count(
                &[("NCCL_MIN_NCHANNELS", "8"), ("NCCL_MAX_NCHANNELS", "4")],
                2
            )
            .unwrap(),
            8,
            "min wins, as in NCCL"
        );
        assert!(count(&[("NCCL_MAX_NCHANNELS", "four")], 2).is_err());
    }

    #[test]
    fn the_search_keeps_only_the_gpus_ranks_run_on() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sysfs/h200x2");
        let cfg = Config::defaults();
        let inventory = detect::detect(&root, &cfg).expect("fixture");
        let buses: Vec<String> = inventory.gpus.iter().map(|g| g.busid.clone()).collect();
        assert_eq!(buses.len(), 2);
        let on = |bus: Option<&str>| PeerInfo {
            gpu_bus: bus.map(str::to_string),
            ..h200_peers()[0].clone()
        };
        let kept = |peers: &[PeerInfo]| {
            let mut inv = inventory.clone();
            keep_rank_gpus(&mut inv, peers);
            inv.gpus.iter().map(|g| g.busid.clone()).collect::<Vec<_>>()
        };
        // One rank on the second GPU, named in NVML's form: the search sees that GPU alone.
        let nvml_form = format!("0000{}", buses[1].to_uppercase());
        assert_eq!(kept(&[on(Some(&nvml_form))]), [buses[1].clone()]);
        let mut inv = inventory.clone();
        keep_rank_gpus(&mut inv, &[on(Some(&buses[1]))]);
        let system = System::from_host(&cfg, inv)
            .expect("system")
            .expect("a GPU");
        assert_eq!(system.count(NodeType::Gpu), 1);
        // Both GPUs used, a rank without a GPU, a GPU not detected, ranks of another host.
        assert_eq!(kept(&[on(Some(&buses[0])), on(Some(&buses[1]))]), buses);
        assert_eq!(kept(&[on(Some(&buses[0])), on(None)]), buses);
        assert_eq!(kept(&[on(Some("0000:ee:00.0"))]), buses);
        let elsewhere = PeerInfo {
            host_hash: 99,
            ..on(Some("0000:ee:00.0"))
        };
        assert_eq!(kept(&[on(Some(&buses[0])), elsewhere]), [buses[0].clone()]);
    }

    /// Two ranks of one host on the 2×H200 topology NCCL dumped (24 channels).
    fn h200_peers() -> Vec<PeerInfo> {
        (0..2)
            .map(|r| PeerInfo {
                rank: r,
                hostname: "vm".into(),
                host_hash: 7,
                pid: 100,
                pid_ns: 1,
                shm_dev: 1,
                bootstrap: "127.0.0.1:1".parse().unwrap(),
                iface: "lo".into(),
                ib_fabric: None,
                gpu_bus: None,
                version: "test".into(),
                status: None,
            })
            .collect()
    }

    #[test]
    fn gpu_layouts_fill_the_channels_over_peer_access_only() {
        let topo = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/anchors/h200x2/topo.xml"
        );
        let peers = h200_peers();
        let nch = |pairs: &[(&str, &str)], gpu| {
            let mut all = vec![("NCCL_TOPO_FILE", topo)];
            all.extend_from_slice(pairs);
            decide(&Config::from_pairs(&all).unwrap(), &peers, gpu)
                .unwrap()
                .rings
                .len()
        };
        assert_eq!(nch(&[], false), 24, "CPU ranks: NCCL's channels");
        assert_eq!(
            nch(&[], true),
            crate::conn::MAX_CHANNELS,
            "GPU ranks over peer access: NCCL's rings up to the limit"
        );
        let off = [("NCCL_P2P_DISABLE", "1")];
        assert_eq!(
            nch(&off, true),
            nch(&off, false),
            "host-staged: NCCL's own count"
        );
        assert_eq!(
            nch(&[("NCCL_MAX_NCHANNELS", "8")], true),
            8,
            "a knob: its meaning"
        );
        assert_eq!(nch(&[("NCCL_MIN_NCHANNELS", "32")], true), 32);
    }

    #[test]
    fn gpu_ranks_repeat_the_rings_up_to_the_channel_limit() {
        let ring = |i: usize| vec![i % 2, 1 - i % 2];
        let rings: Vec<Vec<usize>> = (0..24).map(ring).collect();
        let got = gpu_rings(rings.clone());
        assert_eq!(got.len(), crate::conn::MAX_CHANNELS);
        assert_eq!(&got[..24], &rings[..]);
        assert_eq!(&got[24..48], &rings[..]);
        assert_eq!(&got[48..], &rings[..16]);
        let many: Vec<Vec<usize>> = (0..70).map(ring).collect();
        assert_eq!(gpu_rings(many).len(), 70, "never fewer than NCCL's");
    }
}
