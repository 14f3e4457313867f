//! Where each rank of a benchmark runs — process, host, device — as nccl-tests' `# Using
//! devices` lines report it, gathered at rank 0 so one printer can list every rank.

use super::grouped;
use crate::comm::Communicator;
use crate::error::{Error, Result};
use crate::stats::Path;

/// Bytes of one rank's record in the gather: its [`RankPlace`] as JSON, zero-padded. Host and
/// device names are cut short enough that even fully escaped they fit.
const RECORD: usize = 2048;

/// Characters kept of a host name and of a device name.
const HOST_CHARS: usize = 64;
const NAME_CHARS: usize = 160;

/// A transport's name as NCCL's INFO lines give it; for sockets with how many carry the pair's
/// bytes (`NET/Socket, 2 channels × 4 sockets`).
fn label(path: Path, conns: usize, comm: &Communicator) -> String {
    match path {
        Path::Tcp | Path::GpuNet => {
            let socks = comm.sockets_per_connection();
            let ch = if conns == 1 { "channel" } else { "channels" };
            let so = if socks == 1 { "socket" } else { "sockets" };
            format!("{}, {conns} {ch} × {socks} {so}", path.nccl_name())
        }
        _ => path.nccl_name().to_string(),
    }
}

/// Where one rank runs.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RankPlace {
    /// The rank.
    pub rank: usize,
    /// Its process id.
    pub pid: u32,
    /// Its host's short name.
    pub host: String,
    /// nccl-tests' `device` column: the CUDA ordinal of a GPU rank (CUDA_VISIBLE_DEVICES
    /// applied), the rank itself for a CPU rank.
    pub device: usize,
    /// The GPU's PCI bus id as the driver gives it (`0000:19:00.0`); `None` for a CPU rank.
    pub bus_id: Option<String>,
    /// The GPU's name (`NVIDIA H200`), or the CPU model followed by `(host memory)`.
    pub name: String,
    /// The peers this rank sends to on its rings and the transport to each, by NCCL's name
    /// (`SHM/direct/direct`, `NET/Socket`…; [`Communicator::transports`]), at most
    /// [`MAX_SENDS`] of them.
    pub sends: Vec<(usize, String)>,
    /// The network transport its connections to other hosts use, as NCCL names it
    /// (`NET/IB`, `NET/Socket`); `None` when every peer is on this host.
    #[serde(default)]
    pub net: Option<String>,
}

/// Peers kept in a [`RankPlace`]'s `sends`.
pub const MAX_SENDS: usize = 16;

impl RankPlace {
    /// Where `comm`'s rank runs: this process, this host, and its GPU or this host's CPU.
    pub fn of(comm: &Communicator) -> RankPlace {
        let (device, bus_id, name) = match comm.gpu_info() {
            Some(g) => (g.ordinal, Some(g.bus_id.clone()), g.name.clone()),
            None => (
                comm.rank(),
                None,
                format!(
                    "{} (host memory)",
                    crate::topo::detect::cpu::this_host()
                        .model_name
                        .as_deref()
                        .unwrap_or("CPU")
                ),
            ),
        };
        let net = comm.net_transport();
        RankPlace {
            rank: comm.rank(),
            pid: std::process::id(),
            host: crate::os::host::short_hostname(),
            device,
            bus_id,
            name,
            sends: comm
                .send_connections()
                .into_iter()
                .take(MAX_SENDS)
                .map(|(peer, path, conns)| (peer, label(path, conns, comm)))
                .collect(),
            net: net.map(str::to_string),
        }
    }

    /// This place as a gather record: JSON with the names cut to [`HOST_CHARS`] and
    /// [`NAME_CHARS`] characters.
    fn record(&self) -> Result<Vec<u8>> {
        let cut = |s: &str, n: usize| s.chars().take(n).collect::<String>();
        let short = RankPlace {
            host: cut(&self.host, HOST_CHARS),
            name: cut(&self.name, NAME_CHARS),
            bus_id: self.bus_id.as_deref().map(|b| cut(b, HOST_CHARS)),
            ..self.clone()
        };
        let v = serde_json::to_vec(&short)
            .map_err(|e| Error::Internal(format!("encoding a device description: {e}")))?;
        if v.len() > RECORD {
            return Err(Error::Internal(format!(
                "a device description of {} bytes exceeds {RECORD}",
                v.len()
            )));
        }
        Ok(v)
    }
}

/// Every rank's place, gathered at rank 0 over this thread's communicators (`comms`, ranks of
/// one communicator; a collective): the list in rank order in the thread that drives rank 0,
/// empty in the others.
///
/// Errors: engine errors of the gather; [`Error::Remote`] when a rank's record is unreadable
/// (ranks of different rnccl versions).
pub fn gather_places(comms: &[Communicator]) -> Result<Vec<RankPlace>> {
    let mine = comms
        .iter()
        .map(|c| RankPlace::of(c).record())
        .collect::<Result<Vec<_>>>()?;
    let Some(all) = grouped::gather(comms, &mine, RECORD)? else {
        return Ok(Vec::new());
    };
    all.chunks(RECORD)
        .enumerate()
        .map(|(r, rec)| {
            let end = rec.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
            serde_json::from_slice(&rec[..end]).map_err(|e| {
                Error::Remote(format!(
                    "rank {r} sent an unreadable device description ({e}): run the same rnccl \
                     on every rank"
                ))
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_fit_and_read_back() {
        let p = RankPlace {
            rank: 3,
            pid: 4242,
            host: "h".repeat(300),
            device: 1,
            bus_id: Some("0000:19:00.0".into()),
            name: "\u{1}".repeat(1000),
            sends: (0..MAX_SENDS)
                .map(|p| (p + 1000, "NET/Socket (host staged)".into()))
                .collect(),
            net: Some("NET/IB".into()),
        };
        let r = p.record().unwrap();
        assert!(r.len() <= RECORD);
        let back: RankPlace = serde_json::from_slice(&r).unwrap();
        assert_eq!(back.host.len(), HOST_CHARS);
        assert_eq!((back.rank, back.pid, back.device), (3, 4242, 1));
        assert_eq!(back.bus_id.as_deref(), Some("0000:19:00.0"));
    }

    #[test]
    fn cpu_ranks_of_one_thread_are_gathered_in_rank_order() {
        let comms = Communicator::init_all(2).unwrap();
        let places = gather_places(&comms).unwrap();
        assert_eq!(places.len(), 2);
        for (r, p) in places.iter().enumerate() {
            assert_eq!((p.rank, p.device, p.pid), (r, r, std::process::id()));
            assert!(
                p.bus_id.is_none() && p.name.ends_with("(host memory)"),
                "{p:?}"
            );
            assert_eq!(p.sends, [(1 - r, "P2P/direct pointer".to_string())]);
        }
    }
}
