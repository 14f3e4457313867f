//! Growing a communicator (NCCL 2.30's `ncclCommGetUniqueId` and `ncclCommGrow`): one existing
//! rank makes a unique id for the growth and hands it to the new ranks out of band; the existing
//! ranks pass it along over the parent's bootstrap network, and every rank, old and new, joins
//! a fresh rendezvous on it. Existing ranks keep their ranks; new ones take the ranks above.

use std::sync::atomic::AtomicBool;

use super::{CommConfig, Communicator};
use crate::bootstrap::tags;
use crate::bootstrap::unique_id::UniqueId;
use crate::error::{Error, Result};

impl Communicator {
    /// Makes the unique id for growing this communicator (`ncclCommGetUniqueId`); its root
    /// runs in this process until the grown communicator's rendezvous ends. The id is consumed
    /// by [`Communicator::grow`].
    ///
    /// Errors: [`Error::InvalidUsage`] while an earlier id of this communicator was not
    /// consumed by a grow; the errors of [`UniqueId::fresh`].
    pub fn grow_id(&self) -> Result<UniqueId> {
        let mut pending = self.grow_id.borrow_mut();
        if let Some(id) = pending.as_ref() {
            return Err(Error::invalid_usage(format!(
                "a grow id of this communicator ({id}) was not used yet: grow with it first \
                 (one id per grow)"
            )));
        }
        let id = UniqueId::fresh(&self.core.knobs)?;
        *pending = Some(id.clone());
        Ok(id)
    }

    /// Grows this communicator to `nranks` ranks (`ncclCommGrow` on an existing rank). Every
    /// existing rank calls it; exactly one passes `Some(id)`, the id it made with
    /// [`Communicator::grow_id`] and handed to the new ranks, which call
    /// [`Communicator::init_rank`] with it and ranks `self.nranks()..nranks`. The grown
    /// communicator keeps this one's knobs, timeout and device; this one stays usable.
    ///
    /// Errors: [`Error::InvalidArgument`] when `nranks` is not larger than the current size, or
    /// `id` is not the one this rank made; [`Error::InvalidUsage`] when no existing rank, or
    /// more than one, passed an id; bootstrap and init errors of the rendezvous (a new rank
    /// that never arrives is named when the timeout passes).
    pub fn grow(&self, nranks: usize, id: Option<&UniqueId>) -> Result<Communicator> {
        let core = &self.core;
        if nranks <= core.nranks {
            return Err(Error::InvalidArgument(format!(
                "a grown communicator needs more than the current {} ranks (got nranks={nranks})",
                core.nranks
            )));
        }
        if let Some(id) = id
            && self.grow_id.borrow().as_ref() != Some(id)
        {
            return Err(Error::InvalidArgument(format!(
                "grow id {id} was not made by ncclCommGetUniqueId on this rank's communicator"
            )));
        }
        self.state.borrow().usable(core)?;
        self.splits.set(self.splits.get() + 1);
        let mine = id.map(|i| i.to_string()).unwrap_or_default();
        let all: Vec<usize> = (0..core.nranks).collect();
        let got = core.all_gather_among(
            core.tag,
            &all,
            tags::grow(self.splits.get()),
            mine.as_bytes(),
            "in grow, passing the grow id to the existing ranks",
            &AtomicBool::new(false),
        )?;
        let roots: Vec<usize> = (0..core.nranks).filter(|&r| !got[r].is_empty()).collect();
        let [root] = roots[..] else {
            return Err(Error::invalid_usage(format!(
                "exactly one existing rank must pass the grow id to ncclCommGrow; {}",
                if roots.is_empty() {
                    "none did".to_string()
                } else {
                    format!("ranks {roots:?} did")
                }
            )));
        };
        let text = String::from_utf8_lossy(&got[root]);
        let id: UniqueId = text.parse().map_err(|e| {
            Error::Remote(format!(
                "{} sent a grow id that does not parse ({text}): {e}",
                core.describe(root)
            ))
        })?;
        let mut config = CommConfig::with_knobs(core.knobs.clone()).timeout(core.timeout);
        if let Some(g) = core.watch.gpu() {
            config = config.device(g.info.ordinal);
        }
        let grown = Communicator::init_rank(nranks, &id, core.rank, config);
        if core.rank == root {
            self.grow_id.borrow_mut().take();
        }
        grown
    }
}
