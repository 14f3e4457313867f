//! How channels are laid out for collectives, and the FIFO geometry plans are cut to.

use crate::conn::{MAX_CHANNELS, NSLOTS};
use crate::error::{Error, Result};

/// Per channel, the ring order of all ranks. Built only through [`Rings::new`], which checks
/// that every ring is a permutation of `0..nranks`, so plans can look up any rank's neighbours
/// without failing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rings {
    order: Vec<Vec<usize>>,
    /// `pos[c][r]`: where rank `r` sits in channel `c`'s ring.
    pos: Vec<Vec<usize>>,
}

impl Rings {
    /// Rings from their orders: `order[c]` is channel `c`'s ring.
    ///
    /// Errors: [`Error::InvalidUsage`] when there are no channels or more than
    /// [`MAX_CHANNELS`], or a ring is not a permutation of `0..nranks` (a layout from another
    /// rank that does not fit this communicator).
    pub(crate) fn new(order: Vec<Vec<usize>>, nranks: usize) -> Result<Rings> {
        if order.is_empty() || order.len() > MAX_CHANNELS {
            return Err(Error::invalid_usage(format!(
                "a channel layout needs 1 to {MAX_CHANNELS} rings; this one has {}",
                order.len()
            )));
        }
        let mut pos = Vec::with_capacity(order.len());
        for (c, ring) in order.iter().enumerate() {
            let mut p = vec![usize::MAX; nranks];
            for (i, &r) in ring.iter().enumerate() {
                if r >= nranks || p[r] != usize::MAX {
                    return Err(Error::invalid_usage(format!(
                        "ring {c} of the channel layout ({ring:?}) is not an order of ranks \
                         0..{nranks}: every rank must appear exactly once"
                    )));
                }
                p[r] = i;
            }
            if ring.len() != nranks {
                return Err(Error::invalid_usage(format!(
                    "ring {c} of the channel layout holds {} ranks where the communicator has \
                     {nranks}",
                    ring.len()
                )));
            }
            pos.push(p);
        }
        Ok(Rings { order, pos })
    }

    /// Number of channels.
    pub(crate) fn nchannels(&self) -> usize {
        self.order.len()
    }

    /// Every channel's ring order.
    pub(crate) fn order(&self) -> &[Vec<usize>] {
        &self.order
    }

    /// Channel `c`'s ring order.
    pub(crate) fn ring(&self, c: usize) -> &[usize] {
        &self.order[c]
    }

    /// Where `rank` sits in channel `c`'s ring.
    pub(crate) fn position(&self, c: usize, rank: usize) -> usize {
        self.pos[c][rank]
    }

    /// Ring neighbours of `rank` on channel `c`: (position in the ring, next, prev).
    pub(crate) fn neighbours(&self, c: usize, rank: usize) -> (usize, usize, usize) {
        let ring = &self.order[c];
        let n = ring.len();
        let idx = self.pos[c][rank];
        (idx, ring[(idx + 1) % n], ring[(idx + n - 1) % n])
    }

    /// The rings of a sub-communicator whose rank `i` is this one's rank `members[i]`: each
    /// channel's order restricted to the members, renumbered.
    ///
    /// Errors: as [`Rings::new`], when `members` repeats or exceeds this communicator's ranks.
    pub(crate) fn restrict(&self, members: &[usize]) -> Result<Rings> {
        let mut child = vec![usize::MAX; self.pos.first().map_or(0, Vec::len)];
        for (i, &m) in members.iter().enumerate() {
            if let Some(slot) = child.get_mut(m) {
                *slot = i;
            }
        }
        let order = self
            .order
            .iter()
            .map(|ring| {
                ring.iter()
                    .map(|&r| child[r])
                    .filter(|&c| c != usize::MAX)
                    .collect()
            })
            .collect();
        Rings::new(order, members.len())
    }
}

/// Geometry the plans need: slot size and how many slots a ring chunk spans.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Geometry {
    /// Bytes per FIFO slot (`NCCL_BUFFSIZE / NCCL_STEPS`).
    pub slot_bytes: usize,
}

impl Geometry {
    /// Bytes of one ring chunk: half the FIFO (NCCL's `CHUNKSTEPS = NCCL_STEPS/2` for AllReduce,
    /// AllGather, ReduceScatter, internals §5.4). A ring step never sends more than this, which
    /// keeps every ring deadlock-free.
    pub(crate) fn chunk_bytes(&self) -> usize {
        self.slot_bytes * (NSLOTS / 2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_that_do_not_fit_are_refused() {
        assert!(Rings::new(vec![vec![0, 2, 1]], 3).is_ok());
        for bad in [
            vec![],
            vec![vec![0, 1, 1]],
            vec![vec![0, 1]],
            vec![vec![0, 1, 3]],
            vec![vec![0, 1, 2]; MAX_CHANNELS + 1],
        ] {
            let e = Rings::new(bad.clone(), 3).unwrap_err();
            assert_eq!(
                e.code(),
                crate::error::ResultCode::InvalidUsage,
                "{bad:?}: {e}"
            );
        }
    }

    #[test]
    fn neighbours_and_restriction() {
        let r = Rings::new(vec![vec![2, 0, 3, 1]], 4).unwrap();
        assert_eq!(r.neighbours(0, 0), (1, 3, 2));
        assert_eq!(r.neighbours(0, 2), (0, 0, 1));
        // Ranks 1 and 3 of the parent become 0 and 1 of the child.
        let child = r.restrict(&[1, 3]).unwrap();
        assert_eq!(child.ring(0), &[1, 0]);
        assert!(r.restrict(&[1, 1]).is_err());
    }
}
