//! `ncclCommSplit`: ranks with the same color form a new communicator, ordered by key (ties by
//! old rank). The child shares the parent's bootstrap network under a new message namespace, so
//! no new rendezvous is needed; its connections are new.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use super::Communicator;
use crate::bootstrap::tags;
use crate::config::syntax::{ALGORITHMS, AlgoProtoList};
use crate::error::{Error, Result};
use crate::exec::{Core, Watch, plans};
use crate::hash::fnv1a;
use crate::stats::CommStats;

/// `NCCL_SPLIT_NOCOLOR`: a rank passing this color gets no communicator.
pub const SPLIT_NOCOLOR: i32 = -1;

impl Communicator {
    /// Splits this communicator (`ncclCommSplit`). Every rank must call it. Ranks passing the same
    /// `color` (≥ 0) form a child communicator, ranked by `key` then by parent rank; a rank
    /// passing [`SPLIT_NOCOLOR`] (or any negative color) gets `None`. Rings of the child follow
    /// the parent's ring order restricted to the child's ranks.
    ///
    /// Errors: [`Error::InvalidUsage`] on a failed communicator; bootstrap [`Error::Timeout`] or
    /// [`Error::Remote`] naming a rank that did not take part.
    pub fn split(&self, color: i32, key: i32) -> Result<Option<Communicator>> {
        let core = &self.core;
        let seq = {
            let st = self.state.borrow();
            if let Some(why) = &st.failed {
                return Err(Error::invalid_usage(format!(
                    "cannot split a communicator that failed earlier ({why})"
                )));
            }
            self.splits.set(self.splits.get() + 1);
            self.splits.get()
        };
        let mine = [color.to_le_bytes(), key.to_le_bytes()].concat();
        let got = core.all_gather_bytes(
            tags::split(seq),
            &mine,
            "in split, exchanging colors and keys",
        )?;
        let mut all = Vec::with_capacity(core.nranks);
        for (r, b) in got.into_iter().enumerate() {
            if b.len() != 8 {
                return Err(Error::Remote(format!(
                    "malformed split message from {}",
                    core.describe(r)
                )));
            }
            let c = i32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            let k = i32::from_le_bytes([b[4], b[5], b[6], b[7]]);
            all.push((c, k, r));
        }
        if color < 0 {
            return Ok(None);
        }
        let mut members: Vec<(i32, usize)> = all
            .iter()
            .filter(|(c, _, _)| *c == color)
            .map(|&(_, k, r)| (k, r))
            .collect();
        members.sort_unstable();
        let parent: Vec<usize> = members.iter().map(|&(_, r)| r).collect();
        let rank = parent.iter().position(|&r| r == core.rank).ok_or_else(|| {
            Error::Internal(format!(
                "split: this rank's color {color} is not among the colors gathered"
            ))
        })?;
        let rings = core.rings.restrict(&parent)?;
        let net_rank: Vec<usize> = parent.iter().map(|&p| core.net_rank[p]).collect();
        let algo = core
            .algo_knob
            .as_deref()
            .map(|raw| AlgoProtoList::parse(raw, &ALGORITHMS))
            .transpose()
            .map_err(|e| Error::invalid_usage(format!("NCCL_ALGO: {e}")))?;
        let tuning = plans::cpu_model(&core.net, &net_rank, rings.nchannels(), core.geo, algo);
        let child_tag = fnv1a(
            &[
                core.tag.to_le_bytes(),
                seq.to_le_bytes(),
                (color as u64).to_le_bytes(),
            ]
            .concat(),
        );
        let child = Core {
            net: core.net.clone(),
            listener: core.listener.clone(),
            tag: child_tag,
            rank,
            nranks: parent.len(),
            net_rank,
            rings,
            geo: core.geo,
            params: core.params.clone(),
            algo_knob: core.algo_knob.clone(),
            proto: core.proto.clone(),
            tuning,
            timeout: core.timeout,
            policy: core.policy,
            abort: Arc::new(AtomicBool::new(false)),
            knobs: core.knobs.clone(),
            stats: Arc::new(CommStats::new()),
            watch: Watch::Host,
        };
        let device = core.watch.gpu().map(|g| g.info.ordinal);
        Ok(Some(Communicator::with_engine(child, device)?))
    }
}
