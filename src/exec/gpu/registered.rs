//! Buffers registered with `ncclCommRegister` on a GPU communicator whose ranks run in
//! separate processes or threads (PyTorch with `TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK=1`,
//! nccl-tests `-R 1`): each rank tells its peers where its registered memory is, the peers map
//! it, and an all-reduce, reduce-scatter or all-gather whose buffers every rank registered then
//! runs the symmetric kernels on the peers' buffers in place (kernels/registered.cuh).
//!
//! Registration is not collective: a rank registers its own memory when it likes, so the news
//! travels beside the collectives. [`Registrations::register`] sends every peer an offer (the
//! allocation's CUDA IPC handle and the range's place in it, or the address itself to a peer
//! in the same process) and returns. Each rank reads its peers' news as it launches
//! ([`Registrations::poll`]), maps an offered range and acknowledges it with the address it
//! mapped, or says why it could not; an acknowledgement tells the owner where that peer finds
//! the range. A collective whose input and output lie in ranges every peer acknowledged runs
//! the registered kernel, which tells each peer where its buffers are in that peer's process;
//! the kernel itself finds out whether every rank did the same, and runs the direct kernel
//! where one did not, so ranks need not agree beforehand ([`Registrations::place`]).
//! Deregistration withdraws the offer; the peers unmap the range as they read it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cudarc::driver::CudaContext;
use serde::{Deserialize, Serialize};

use crate::bootstrap::tags;
use crate::device::cuda::ipc::{self, Imported};
use crate::device::cuda::peer_reaches_range;
use crate::error::{Error, Result};
use crate::exec::Core;

/// One rank's news to another, in the order it sent them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
enum News {
    /// Registration `id` of the sender: `bytes` bytes at `addr` in its process `process`
    /// (host hash, PID namespace, PID), and its export (IPC handle and offset) or why none.
    Offer {
        id: u64,
        addr: u64,
        bytes: u64,
        process: (u64, u64, u32),
        export: std::result::Result<(Vec<u8>, u64), String>,
    },
    /// The receiver's registration `id` as the sender mapped it: its first byte there, or why
    /// the sender could not map it.
    Ack {
        id: u64,
        mapped: std::result::Result<u64, String>,
    },
    /// Registration `id` of the sender is gone.
    Withdraw { id: u64 },
}

/// One of this rank's registrations.
#[derive(Debug)]
struct Mine {
    id: u64,
    addr: u64,
    bytes: usize,
    /// Per rank, where that rank maps `addr` (this rank's own: `addr`); `None` until it
    /// acknowledged, or when it could not map it.
    mapped: Vec<Option<u64>>,
}

#[derive(Debug, Default)]
struct State {
    /// The last registration number given out.
    last_id: u64,
    mine: Vec<Mine>,
    /// The peers' registrations mapped here, by (rank, their number): kept mapped until
    /// withdrawn (a peer in this process needs no mapping).
    theirs: HashMap<(usize, u64), Option<Arc<Imported>>>,
}

/// A GPU communicator's registered buffers: this rank's, and its peers' mapped here.
#[derive(Debug, Default)]
pub(crate) struct Registrations {
    state: Mutex<State>,
}

/// Maps a peer's IPC handle into this process, or says why it cannot.
type OpenHandle<'a> = dyn Fn(&[u8]) -> std::result::Result<Arc<Imported>, String> + 'a;

/// How this rank maps a peer's offered range.
struct Mapper<'a> {
    /// A peer in another process: maps its IPC handle.
    open: &'a OpenHandle<'a>,
    /// A peer in this process: whether this rank's GPU loads and stores the `bytes` bytes at
    /// the address (`device::cuda::peer_reaches_range`), or why not.
    reach: &'a dyn Fn(u64, u64) -> std::result::Result<(), String>,
}

/// Rank `rank`'s process as the ranks' bootstrap records name it.
fn process_of(core: &Core, rank: usize) -> (u64, u64, u32) {
    let p = &core.net.peers()[core.net_rank[rank]];
    (p.host_hash, p.pid_ns, p.pid)
}

fn encode(news: &News) -> Result<Vec<u8>> {
    serde_json::to_vec(news).map_err(|e| Error::Internal(format!("encoding a registration: {e}")))
}

impl Registrations {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers `bytes` bytes of this rank's GPU memory at `addr` and offers them to every
    /// peer; returns the registration's number for [`Registrations::deregister`]. Memory that
    /// cannot be shared (the CUDA virtual memory API's) still registers: the offer says why,
    /// and collectives on it run as on any memory.
    ///
    /// Errors: [`Error::InvalidArgument`] for a null address or zero bytes; bootstrap errors
    /// of the sends.
    pub(crate) fn register(&self, core: &Core, addr: u64, bytes: usize) -> Result<u64> {
        if addr == 0 || bytes == 0 {
            return Err(Error::invalid_arg(format!(
                "a registration of {bytes} bytes at {addr:#x} is not a buffer"
            )));
        }
        let export = ipc::export_range(addr, bytes, "a registered buffer");
        let here = process_of(core, core.rank);
        let (id, offer) = self.record(core.rank, core.nranks, addr, bytes, here, export);
        self.send_to_peers(core, &encode(&offer)?)?;
        Ok(id)
    }

    /// Records this rank's (`rank` of `nranks`, in process `process`) registration of `bytes`
    /// bytes at `addr` with its `export`: its number and the offer for the peers.
    fn record(
        &self,
        rank: usize,
        nranks: usize,
        addr: u64,
        bytes: usize,
        process: (u64, u64, u32),
        export: std::result::Result<(Vec<u8>, u64), String>,
    ) -> (u64, News) {
        let mut s = self.lock();
        s.last_id += 1;
        let id = s.last_id;
        let mut mapped = vec![None; nranks];
        mapped[rank] = Some(addr);
        s.mine.push(Mine {
            id,
            addr,
            bytes,
            mapped,
        });
        let offer = News::Offer {
            id,
            addr,
            bytes: bytes as u64,
            process,
            export,
        };
        (id, offer)
    }

    /// Releases registration `id` and tells the peers.
    ///
    /// Errors: [`Error::InvalidArgument`] for a number this rank did not give out or already
    /// released; bootstrap errors of the sends.
    pub(crate) fn deregister(&self, core: &Core, id: u64) -> Result<()> {
        let mut s = self.lock();
        let at = s.mine.iter().position(|m| m.id == id).ok_or_else(|| {
            Error::invalid_arg(format!(
                "buffer registration {id} is not live on this communicator"
            ))
        })?;
        s.mine.remove(at);
        drop(s);
        self.send_to_peers(core, &encode(&News::Withdraw { id })?)
    }

    fn send_to_peers(&self, core: &Core, msg: &[u8]) -> Result<()> {
        let deadline = core.deadline();
        for r in (0..core.nranks).filter(|&r| r != core.rank) {
            core.net.send(
                core.net_rank[r],
                core.tag,
                tags::registration(),
                msg,
                deadline,
            )?;
        }
        Ok(())
    }

    /// Reads every peer's news that arrived, never waiting: maps offered ranges (through CUDA
    /// IPC into `ctx`, or as they are for a peer in this process) and acknowledges them,
    /// records acknowledgements of this rank's, unmaps withdrawn ones.
    ///
    /// Errors: [`Error::Remote`] for news that does not decode; bootstrap errors of the
    /// acknowledgements' sends.
    pub(crate) fn poll(&self, core: &Core, ctx: &Arc<CudaContext>) -> Result<()> {
        for r in (0..core.nranks).filter(|&r| r != core.rank) {
            while let Some(msg) =
                core.net
                    .try_recv(core.net_rank[r], core.tag, tags::registration())
            {
                let news: News = serde_json::from_slice(&msg).map_err(|e| {
                    Error::Remote(format!(
                        "malformed registration from {}: {e}",
                        core.describe(r)
                    ))
                })?;
                let open = |h: &[u8]| Imported::open_shared(ctx, h).map_err(|e| e.to_string());
                let gpu = ctx.ordinal();
                let reach = |addr, bytes| peer_reaches_range(addr, bytes, gpu);
                let map = Mapper {
                    open: &open,
                    reach: &reach,
                };
                let here = process_of(core, core.rank);
                if let Some(reply) = self.take(here, r, &core.describe(r), news, &map) {
                    core.net.send(
                        core.net_rank[r],
                        core.tag,
                        tags::registration(),
                        &encode(&reply)?,
                        core.deadline(),
                    )?;
                }
            }
        }
        Ok(())
    }

    /// Applies `news` from rank `from` (`who` names it in the log) to this rank's state, in
    /// process `here`; `map` maps the range. The acknowledgement to send back, for an offer.
    fn take(
        &self,
        here: (u64, u64, u32),
        from: usize,
        who: &str,
        news: News,
        map: &Mapper<'_>,
    ) -> Option<News> {
        let mut s = self.lock();
        match news {
            News::Offer {
                id,
                addr,
                bytes,
                process,
                export,
            } => {
                let mapped = if process == here {
                    s.theirs.insert((from, id), None);
                    (map.reach)(addr, bytes).map(|()| addr)
                } else {
                    export.and_then(|(handle, offset)| {
                        let i = (map.open)(&handle)?;
                        let at = i.ptr() + offset;
                        s.theirs.insert((from, id), Some(i));
                        Ok(at)
                    })
                };
                if let Err(why) = &mapped {
                    tracing::info!(target: "rnccl::coll",
                        "{who}'s registered buffer {id} stays unmapped here, so collectives on \
                         it copy through rnccl's own buffers: {why}");
                }
                Some(News::Ack { id, mapped })
            }
            News::Ack { id, mapped } => {
                if let Some(m) = s.mine.iter_mut().find(|m| m.id == id) {
                    m.mapped[from] = mapped.ok();
                }
                None
            }
            News::Withdraw { id } => {
                s.theirs.remove(&(from, id));
                None
            }
        }
    }

    /// Per rank, where that rank's process maps this rank's `len` bytes at `ptr`, when they lie
    /// in one registration every peer mapped; `None` otherwise.
    pub(crate) fn place(&self, ptr: u64, len: usize) -> Option<Vec<u64>> {
        let s = self.lock();
        s.mine.iter().find_map(|m| {
            let off = ptr.checked_sub(m.addr)?;
            if len == 0 || off.checked_add(len as u64)? > m.bytes as u64 {
                return None;
            }
            m.mapped.iter().map(|at| at.map(|a| a + off)).collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mine(id: u64, addr: u64, bytes: usize, mapped: Vec<Option<u64>>) -> Mine {
        Mine {
            id,
            addr,
            bytes,
            mapped,
        }
    }

    #[test]
    fn a_buffer_is_placed_only_inside_a_range_every_peer_mapped() {
        let r = Registrations::default();
        r.lock().mine = vec![
            mine(
                1,
                0x1000,
                0x100,
                vec![Some(0x1000), Some(0x9000), Some(0x7000)],
            ),
            mine(2, 0x4000, 0x100, vec![Some(0x4000), None, Some(0x5000)]),
        ];
        assert_eq!(r.place(0x1010, 0x20), Some(vec![0x1010, 0x9010, 0x7010]));
        assert_eq!(r.place(0x1000, 0x100), Some(vec![0x1000, 0x9000, 0x7000]));
        assert_eq!(r.place(0x10f0, 0x20), None, "runs past the range");
        assert_eq!(r.place(0x0ff0, 0x20), None, "starts before it");
        assert_eq!(r.place(0x1000, 0), None, "empty");
        assert_eq!(r.place(0x4000, 0x10), None, "rank 1 has not mapped it");
    }

    /// An IPC opener for hosts without a GPU: every handle fails to open.
    fn no_gpu(_: &[u8]) -> std::result::Result<Arc<Imported>, String> {
        Err("no GPU here".into())
    }

    /// A GPU that reaches every address of its process.
    fn reaches(_: u64, _: u64) -> std::result::Result<(), String> {
        Ok(())
    }

    /// A GPU that reaches no other GPU's memory of its process.
    fn reaches_nothing(_: u64, _: u64) -> std::result::Result<(), String> {
        Err("GPU 1 cannot load and store it".into())
    }

    /// Maps through `reach` for peers of this process, fails for other processes.
    fn mapper(reach: &dyn Fn(u64, u64) -> std::result::Result<(), String>) -> Mapper<'_> {
        Mapper {
            open: &no_gpu,
            reach,
        }
    }

    #[test]
    fn an_offer_acknowledged_by_every_peer_places_the_buffer() {
        let (a, b, c) = (
            Registrations::default(),
            Registrations::default(),
            Registrations::default(),
        );
        let here = (1, 2, 3);
        let (id, offer) = a.record(0, 3, 0x1000, 0x100, here, Err("unused".into()));
        assert_eq!(a.place(0x1000, 0x10), None, "no peer acknowledged yet");
        // Rank 1 shares the process (the address as it is); rank 2 does not, and its IPC
        // handle is refused: rank 2 acknowledges with why.
        let ack1 = b
            .take(here, 0, "rank 0", offer.clone(), &mapper(&reaches))
            .unwrap();
        assert_eq!(
            ack1,
            News::Ack {
                id,
                mapped: Ok(0x1000)
            }
        );
        let ack2 = c
            .take((9, 9, 9), 0, "rank 0", offer, &mapper(&reaches))
            .unwrap();
        assert!(matches!(&ack2, News::Ack { mapped: Err(why), .. } if why.contains("unused")));
        assert_eq!(a.take(here, 1, "rank 1", ack1, &mapper(&reaches)), None);
        assert_eq!(a.place(0x1000, 0x10), None, "rank 2 could not map it");
        // A later acknowledgement from rank 2 (as if it mapped it at 0x8000) completes it.
        let ok2 = News::Ack {
            id,
            mapped: Ok(0x8000),
        };
        assert_eq!(a.take(here, 2, "rank 2", ok2, &mapper(&reaches)), None);
        assert_eq!(a.place(0x1010, 0x10), Some(vec![0x1010, 0x1010, 0x8010]));
        // Withdrawn: the peer forgets it.
        assert!(b.lock().theirs.contains_key(&(0, id)));
        assert_eq!(
            b.take(here, 0, "rank 0", News::Withdraw { id }, &mapper(&reaches)),
            None
        );
        assert!(!b.lock().theirs.contains_key(&(0, id)));
    }

    /// A peer of the same process whose GPU cannot reach the range (pool memory not opened to
    /// it, 2026-11-29 on 2×H200: the symmetric kernel faulted on such addresses) says so, and
    /// the owner's collectives on it take the direct kernel.
    #[test]
    fn a_range_the_peer_gpu_cannot_reach_stays_unplaced() {
        let (a, b) = (Registrations::default(), Registrations::default());
        let here = (1, 2, 3);
        let (id, offer) = a.record(0, 2, 0x1000, 0x100, here, Err("unused".into()));
        let ack = b.take(here, 0, "rank 0", offer, &mapper(&reaches_nothing));
        let ack = ack.unwrap();
        assert!(
            matches!(&ack, News::Ack { id: i, mapped: Err(why) } if *i == id && why.contains("GPU 1")),
            "{ack:?}"
        );
        assert_eq!(a.take(here, 1, "rank 1", ack, &mapper(&reaches)), None);
        assert_eq!(a.place(0x1000, 0x10), None);
    }

    #[test]
    fn news_survives_its_encoding() {
        for news in [
            News::Offer {
                id: 3,
                addr: 0x7f00_0000_1000,
                bytes: 1 << 20,
                process: (1, 2, 3),
                export: Ok((vec![7; ipc::HANDLE_BYTES], 0x100)),
            },
            News::Offer {
                id: 4,
                addr: 1,
                bytes: 2,
                process: (1, 2, 3),
                export: Err("not from cudaMalloc".into()),
            },
            News::Ack {
                id: 3,
                mapped: Ok(0x1234),
            },
            News::Ack {
                id: 3,
                mapped: Err("no".into()),
            },
            News::Withdraw { id: 9 },
        ] {
            let back: News = serde_json::from_slice(&encode(&news).unwrap()).unwrap();
            assert_eq!(back, news);
        }
    }
}
