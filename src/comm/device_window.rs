//! Windows of GPU memory (`ncclCommWindowRegister` on a GPU communicator): every rank
//! registers a range of its device memory, and each learns where every other rank's range is
//! in its own address space, so one-sided operations ([`Communicator::put_signal`]) store
//! straight into a peer's window.
//!
//! Registration is collective: every rank registers in the same order. Each rank offers the
//! CUDA IPC handle of the allocation holding its range (`cuIpcGetMemHandle`, memory from
//! `cuMemAlloc`/`cudaMalloc`/`ncclMemAlloc`) with the range's offset and size; a peer in
//! another process opens the handle (once per allocation and GPU), a peer in the same process
//! uses the address itself (the GPUs reach each other through the peer access the
//! communicator's connections enabled). A rank whose memory cannot be exported (the CUDA
//! virtual memory API, host memory) or whose communicator cannot run one-sided operations
//! still takes part, saying why: the window registers, and puts into it are refused with that
//! reason. Collectives do not read windows (they run as on any device memory).
//!
//! Registration runs in two halves, [`Communicator::device_window_start`] (post this rank's
//! offer) and [`Communicator::device_window_finish`] (collect and map the others'), so one
//! thread driving several GPUs can register on all its communicators in one group.

use std::sync::Arc;

use super::Communicator;
use crate::bootstrap::tags;
use crate::device::cuda::ipc::{self, Imported};
use crate::device::cuda::peer_reaches_range;
use crate::error::{Error, Result};
use crate::exec::gpu::windows::SymWindow;

/// A window of GPU memory registered on a communicator (`ncclWindow_t`).
#[derive(Debug)]
pub struct DeviceWindow {
    /// The communicator's bootstrap tag, to refuse a window of another communicator.
    comm: u64,
    /// The registration number on that communicator.
    id: u64,
    /// This rank's range: device address and bytes.
    addr: u64,
    bytes: usize,
    /// Per rank, the start of its range as mapped in this process (`None`: not mapped).
    peers: Vec<Option<u64>>,
    /// Per rank, the size of its range, bytes.
    sizes: Vec<usize>,
    /// Why puts into this window are refused (`None`: every rank's range is mapped).
    unreachable: Option<String>,
    /// Peers' allocations opened through CUDA IPC; unmapped when the last window using them
    /// goes.
    _imported: Vec<Arc<Imported>>,
    /// A symmetric window's entry among the communicator's, which collectives look their
    /// buffers up in; it leaves with this handle.
    symmetric_entry: Option<Arc<SymWindow>>,
}

/// A registration whose offer is posted and whose peers are not yet collected.
#[derive(Debug)]
pub struct PendingDeviceWindow {
    id: u64,
    addr: u64,
    bytes: usize,
    symmetric: bool,
}

/// What a rank tells the others about its range.
#[derive(serde::Serialize, serde::Deserialize)]
struct Offer {
    /// The range's device address (used as is by peers in the same process).
    addr: u64,
    /// The range's size, bytes.
    bytes: u64,
    /// The process: (host hash, pid namespace, pid).
    process: (u64, u64, u32),
    /// Why the rank's communicator cannot run one-sided operations, if it cannot.
    unsupported: Option<String>,
    /// The IPC handle of the allocation holding the range, and the range's offset in it; or
    /// why there is none.
    export: std::result::Result<(Vec<u8>, u64), String>,
}

impl DeviceWindow {
    /// This rank's range: device address and size in bytes (`ncclWinGetUserPtr`).
    pub fn local(&self) -> (u64, usize) {
        (self.addr, self.bytes)
    }

    /// Where `bytes` bytes at byte `offset` of `rank`'s range are in this process, for a put
    /// from a communicator whose bootstrap tag is `comm`.
    ///
    /// Errors: [`Error::InvalidArgument`] for a window of another communicator, a rank out of
    /// range, or bytes past the end of the rank's range; [`Error::InvalidUsage`] when the
    /// window's ranges could not all be mapped (the message says why).
    pub(crate) fn target(
        &self,
        comm: u64,
        rank: usize,
        offset: usize,
        bytes: usize,
    ) -> Result<u64> {
        if comm != self.comm {
            return Err(Error::invalid_arg(
                "the window was registered on another communicator",
            ));
        }
        let size = *self.sizes.get(rank).ok_or_else(|| {
            Error::invalid_arg(format!(
                "rank {rank} is not a rank of the window's communicator ({} ranks)",
                self.sizes.len()
            ))
        })?;
        if offset.checked_add(bytes).is_none_or(|end| end > size) {
            return Err(Error::invalid_arg(format!(
                "{bytes} bytes at offset {offset} run past the end of rank {rank}'s window \
                 ({size} bytes)"
            )));
        }
        if let Some(why) = &self.unreachable {
            return Err(Error::invalid_usage(format!(
                "window {} cannot take one-sided operations: {why}",
                self.id
            )));
        }
        let start = self.peers[rank]
            .ok_or_else(|| Error::Internal(format!("rank {rank}'s window is not mapped")))?;
        Ok(start + offset as u64)
    }
}

impl Communicator {
    /// Starts registering `bytes` bytes of this GPU's memory at `addr` as a window: posts this
    /// rank's offer to every rank and returns at once. Finish with
    /// [`Communicator::device_window_finish`]; every rank must register its windows in the
    /// same order. A `symmetric` window (`NCCL_WIN_COLL_SYMMETRIC`) is the caller's promise
    /// that every rank registers the same size and passes collectives buffers at the same
    /// offsets of it: all-reduces, reduce-scatters and all-gathers whose buffers lie in such
    /// windows then run the symmetric kernels, which load and store the peers' buffers in
    /// place (`kernels/symmetric.cuh`).
    ///
    /// Errors: [`Error::InvalidUsage`] on a communicator without a GPU or one that failed;
    /// [`Error::InvalidArgument`] for a null address or zero bytes; bootstrap errors of the
    /// sends.
    pub fn device_window_start(
        &self,
        addr: u64,
        bytes: usize,
        symmetric: bool,
    ) -> Result<PendingDeviceWindow> {
        let core = &self.core;
        self.state.borrow().usable(core)?;
        let gpu = core
            .watch
            .gpu()
            .ok_or_else(|| Error::invalid_usage("GPU windows need a communicator on a GPU"))?;
        if addr == 0 || bytes == 0 {
            return Err(Error::invalid_arg(format!(
                "a window of {bytes} bytes at {addr:#x} is not a buffer"
            )));
        }
        let id = self.device_windows.get() + 1;
        self.device_windows.set(id);
        gpu.ctx
            .bind_to_thread()
            .map_err(|e| crate::device::cuda::cuda_error(e, "binding the window's GPU".into()))?;
        let unsupported = gpu.rma_unsupported().map(str::to_string);
        let export = match &unsupported {
            Some(why) => Err(why.clone()),
            None => ipc::export_range(addr, bytes, "a window's memory"),
        };
        let peers = core.net.peers();
        let me = &peers[core.net_rank[core.rank]];
        let offer = Offer {
            addr,
            bytes: bytes as u64,
            process: (me.host_hash, me.pid_ns, me.pid),
            unsupported,
            export,
        };
        let msg = serde_json::to_vec(&offer)
            .map_err(|e| Error::Internal(format!("encoding a window offer: {e}")))?;
        core.post_to_all(tags::device_window(id), &msg)?;
        Ok(PendingDeviceWindow {
            id,
            addr,
            bytes,
            symmetric,
        })
    }

    /// Finishes a registration [`Communicator::device_window_start`] began: collects every
    /// rank's offer, maps the ranges of peers in other processes and checks that this rank's
    /// GPU reaches those of peers in this process (a window it cannot reach is not
    /// symmetric and refuses puts).
    ///
    /// Errors: bootstrap [`Error::Timeout`] naming a rank that did not register;
    /// [`Error::Remote`] for a malformed offer. A range that cannot be mapped is not an error
    /// here: the window registers and refuses puts, saying why.
    pub fn device_window_finish(&self, pending: PendingDeviceWindow) -> Result<DeviceWindow> {
        let core = &self.core;
        let got = core.collect_from_all(
            tags::device_window(pending.id),
            "in ncclCommWindowRegister, collecting the ranks' windows",
        )?;
        let offers = got
            .iter()
            .enumerate()
            .map(|(r, b)| {
                serde_json::from_slice::<Offer>(b).map_err(|e| {
                    Error::Remote(format!(
                        "malformed window offer from {}: {e}",
                        core.describe(r)
                    ))
                })
            })
            .collect::<Result<Vec<Offer>>>()?;
        let mine = &offers[core.rank];
        let mut w = DeviceWindow {
            comm: core.tag,
            id: pending.id,
            addr: pending.addr,
            bytes: pending.bytes,
            peers: vec![None; core.nranks],
            sizes: offers.iter().map(|o| o.bytes as usize).collect(),
            unreachable: None,
            _imported: Vec::new(),
            symmetric_entry: None,
        };
        let gpu = core
            .watch
            .gpu()
            .ok_or_else(|| Error::invalid_usage("GPU windows need a communicator on a GPU"))?;
        let ctx = gpu.ctx.clone();
        for (r, o) in offers.iter().enumerate() {
            let mapped = if let Some(why) = &o.unsupported {
                Err(why.clone())
            } else if r == core.rank {
                Ok(o.addr)
            } else if o.process == mine.process {
                // This process: the address itself, where this rank's GPU reaches it.
                peer_reaches_range(o.addr, o.bytes, ctx.ordinal()).map(|()| o.addr)
            } else {
                match &o.export {
                    Err(why) => Err(why.clone()),
                    Ok((handle, offset)) => Imported::open_shared(&ctx, handle)
                        .map(|i| {
                            let at = i.ptr() + offset;
                            w._imported.push(i);
                            at
                        })
                        .map_err(|e| e.to_string()),
                }
            };
            match mapped {
                Ok(at) => w.peers[r] = Some(at),
                Err(why) => {
                    w.unreachable
                        .get_or_insert_with(|| format!("{}: {why}", core.describe(r)));
                }
            }
        }
        let peers: Option<Vec<u64>> = w.peers.iter().copied().collect();
        if let Some(peers) = peers.filter(|_| pending.symmetric && w.unreachable.is_none()) {
            let sym = SymWindow::new(w.addr, w.bytes, peers, w.sizes.clone());
            w.symmetric_entry = Some(gpu.windows.add(sym));
        }
        tracing::info!(target: "rnccl::init",
            "GPU window {} registered ({} bytes{}{})", w.id, w.bytes,
            if w.symmetric_entry.is_some() { ", symmetric: collectives in it load and store the peers' buffers" } else { "" },
            w.unreachable.as_ref().map_or(String::new(), |why| format!("; no one-sided operations: {why}")));
        Ok(w)
    }

    /// Registers a GPU window in one call: [`Communicator::device_window_start`], then
    /// [`Communicator::device_window_finish`]. Blocks until every rank registers.
    ///
    /// Errors: as those two.
    pub fn device_window_register(
        &self,
        addr: u64,
        bytes: usize,
        symmetric: bool,
    ) -> Result<DeviceWindow> {
        let p = self.device_window_start(addr, bytes, symmetric)?;
        self.device_window_finish(p)
    }
}
