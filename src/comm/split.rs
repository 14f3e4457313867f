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
    /// A revoked communicator ([`Communicator::revoke`]) can still be split.
    ///
    /// Errors: [`Error::InvalidUsage`] on a failed communicator; bootstrap [`Error::Timeout`] or
    /// [`Error::Remote`] naming a rank that did not take part.
    pub fn split(&self, color: i32, key: i32) -> Result<Option<Communicator>> {
        let core = &self.core;
        let seq = {
            let st = self.state.borrow();
            if let Some(why) = st.failed.as_ref().filter(|_| !self.revoked.get()) {
                return Err(Error::invalid_usage(format!(
                    "cannot split a communicator that failed earlier ({why})"
                )));
            }
            self.splits.set(self.splits.get() + 1);
            self.splits.get()
        };
        let mine = [color.to_le_bytes(), key.to_le_bytes()].concat();
        // A revoked parent's abort flag stays raised and its namespace may hold a failure
        // notice: its split runs in a namespace of its own, waiting on a flag of its own.
        let fresh = AtomicBool::new(false);
        let (namespace, abort) = match self.revoked.get() {
            true => (self.child_tag(seq, u64::MAX - 1), &fresh),
            false => (core.tag, &*core.abort),
        };
        let all: Vec<usize> = (0..core.nranks).collect();
        let got = core.all_gather_among(
            namespace,
            &all,
            tags::split(seq),
            &mine,
            "in split, exchanging colors and keys",
            abort,
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
        self.child(seq, color as u64, parent).map(Some)
    }

    /// The communicator of parent ranks `parent` (this rank among them), in that order: the
    /// child of split or shrink number `seq` (`color` tells a split's children apart). Rings
    /// follow the parent's restricted to the child's ranks; the bootstrap network is the
    /// parent's under a new namespace; connections are new.
    ///
    /// Errors: as [`Communicator::with_engine`], and [`Error::InvalidUsage`] for a bad
    /// `NCCL_ALGO`.
    pub(super) fn child(&self, seq: u64, color: u64, parent: Vec<usize>) -> Result<Communicator> {
        let core = &self.core;
        let rank = parent.iter().position(|&r| r == core.rank).ok_or_else(|| {
            Error::Internal(format!(
                "a child communicator of ranks {parent:?} does not hold this rank ({})",
                core.rank
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
        let child_tag = self.child_tag(seq, color);
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
        Communicator::with_engine(child, device)
    }

    /// The bootstrap namespace of child `color` of split, shrink or grow number `seq`.
    pub(super) fn child_tag(&self, seq: u64, color: u64) -> u64 {
        fnv1a(
            &[
                self.core.tag.to_le_bytes(),
                seq.to_le_bytes(),
                color.to_le_bytes(),
            ]
            .concat(),
        )
    }
}
