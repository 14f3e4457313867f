//! Windows: host memory from [`crate::mem::mem_alloc`] registered on a communicator
//! (`ncclCommWindowRegister`), so collectives on it read peers' buffers directly
//! (the executor's direct operations) instead of through FIFO slots.
//!
//! Registration is collective: every rank registers its memory in the same order. When every
//! rank of the communicator is on this host and reachable through shared memory (not
//! `NCCL_SHM_DISABLE`d into sockets), ranks exchange the names of their memory and of a
//! one-page control block, map each other's, and unlink the names; otherwise the window is
//! recorded and collectives keep using the FIFO plans.

use std::sync::Arc;

use super::Communicator;
use crate::bootstrap::tags;
use crate::dtype::Element;
use crate::error::{Error, Result};
use crate::exec::Core;
pub use crate::exec::host::direct::DIRECT_MIN_BYTES;
use crate::exec::host::direct::{CONTROL_BYTES, ControlBlocks};
use crate::exec::host::windows::{Entry, Windows};
use crate::mem::{HostMem, MemFile, unlink_name};
use crate::os::shm::{Mapping, ShmSegment};
use crate::transport::TransportKind;

/// A registered window (`ncclWindow_t`): pass it to [`Communicator::window_deregister`].
#[derive(Debug, PartialEq, Eq)]
pub struct Window {
    id: u64,
}

/// True when every rank of the communicator can map this rank's memory.
fn direct_capable(core: &Core) -> bool {
    let peers = core.net.peers();
    let me = &peers[core.net_rank[core.rank]];
    core.nranks > 1
        && core.net_rank.iter().all(|&r| {
            matches!(
                core.params.select(me, &peers[r]),
                TransportKind::SameProcess | TransportKind::Shm
            )
        })
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Offer {
    /// Name of the rank's control block, on the first direct registration.
    control: Option<String>,
    /// Name of the registered memory.
    memory: String,
}

impl Communicator {
    /// Registers `mem` as a window of this communicator (`ncclCommWindowRegister`). Every rank
    /// must call it, in the same order relative to its other window registrations and
    /// collectives. Afterwards AllReduce, ReduceScatter, AllGather, Broadcast, Reduce, Gather
    /// and Scatter whose send and receive buffers all lie in windows on every rank read peers'
    /// buffers directly when all ranks share this host; otherwise they run as before.
    ///
    /// Errors: [`Error::InvalidUsage`] on a failed communicator; [`Error::System`] when the
    /// memory cannot be named or a peer's cannot be mapped; bootstrap [`Error::Timeout`] naming
    /// the ranks that did not register.
    pub fn window_register<T: Element>(&self, mem: &HostMem<T>) -> Result<Window> {
        let core = &self.core;
        let mut st = self.state.borrow_mut();
        if let Some(why) = &st.failed {
            return Err(Error::invalid_usage(format!(
                "cannot register a window on a communicator that failed earlier ({why})"
            )));
        }
        let w = &mut st.engine.host().windows;
        w.registered += 1;
        let id = w.registered;
        let file = mem.file().clone();
        let ranks = if direct_capable(core) {
            exchange(core, w, id, &file)?
        } else {
            Vec::new()
        };
        let direct = !ranks.is_empty();
        w.entries.push(Entry { id, file, ranks });
        tracing::info!(target: "rnccl::init", "window {id} registered ({} bytes, direct {direct})",
            mem.len() * std::mem::size_of::<T>());
        Ok(Window { id })
    }

    /// Removes a window (`ncclCommWindowDeregister`). Every rank should deregister at the same
    /// point between collectives; a rank that already has will run later operations on that
    /// memory through FIFO plans, and its peers follow it.
    ///
    /// Errors: [`Error::InvalidArgument`] when the window is not registered here.
    pub fn window_deregister(&self, window: Window) -> Result<()> {
        let mut st = self.state.borrow_mut();
        let w = &mut st.engine.host().windows;
        let i = w
            .entries
            .iter()
            .position(|e| e.id == window.id)
            .ok_or_else(|| {
                Error::invalid_arg(format!("window {} is not registered here", window.id))
            })?;
        w.entries.remove(i);
        Ok(())
    }
}

/// Memory of every rank, as mapped in this process.
type Mappings = Vec<Arc<dyn Mapping>>;

/// Names this rank's memory (and control block, the first time), swaps names with every rank,
/// maps theirs, and unlinks the names once every rank has mapped. Returns every rank's memory
/// as mapped here.
fn exchange(
    core: &Core,
    w: &mut Windows,
    id: u64,
    file: &Arc<MemFile>,
) -> Result<Vec<Arc<dyn Mapping>>> {
    let mut control = if w.controls.is_none() {
        Some(ShmSegment::create(CONTROL_BYTES)?)
    } else {
        None
    };
    let memory = file.link_name()?;
    let result = (|| -> Result<(Mappings, Mappings)> {
        let offer = Offer {
            control: control.as_ref().map(|c| c.name().to_string()),
            memory: memory.clone(),
        };
        let bytes = serde_json::to_vec(&offer)
            .map_err(|e| Error::Internal(format!("encoding a window registration: {e}")))?;
        let got = core.all_gather_bytes(
            tags::window(id, false),
            &bytes,
            "in window_register, exchanging memory names",
        )?;
        let mut ranks: Vec<Arc<dyn Mapping>> = Vec::with_capacity(core.nranks);
        let mut controls: Vec<Arc<dyn Mapping>> = Vec::new();
        for (r, b) in got.into_iter().enumerate() {
            let o: Offer = serde_json::from_slice(&b).map_err(|e| {
                Error::Remote(format!(
                    "malformed window registration from {}: {e}",
                    core.describe(r)
                ))
            })?;
            if r == core.rank {
                ranks.push(file.clone());
            } else {
                ranks.push(Arc::new(ShmSegment::open(&o.memory)?));
            }
            if control.is_some() {
                let name = o.control.ok_or_else(|| {
                    Error::Remote(format!(
                        "{} registered a window without a control block: do all ranks register \
                         the same windows in the same order?",
                        core.describe(r)
                    ))
                })?;
                controls.push(Arc::new(ShmSegment::open(&name)?));
            }
        }
        // Nobody unlinks before everyone has mapped.
        core.all_gather_bytes(
            tags::window(id, true),
            &[],
            "in window_register, waiting for every rank to map the window",
        )?;
        Ok((ranks, controls))
    })();
    unlink_name(&memory);
    if let Some(c) = control.as_mut() {
        c.unlink();
    }
    let (ranks, controls) = result?;
    if control.is_some() {
        w.controls = Some(Arc::new(ControlBlocks::new(controls)?));
    }
    Ok(ranks)
}
