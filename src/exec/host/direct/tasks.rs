//! What each rank does in a direct operation: pure functions of the operation's shape, so every
//! rank derives the same split without talking.
//!
//! An AllReduce of `count` elements over `n` ranks splits the elements into `n` slices: rank
//! `r` reduces slice `r` from every rank's input into its own output, then copies every other
//! slice from its owner's output as the owner's progress passes each chunk. ReduceScatter is the
//! first half, Reduce the first half done by the root for the whole buffer, and AllGather,
//! Broadcast, Gather and Scatter are copies from peers' inputs.

use crate::func::Func;

/// A reduction of `bytes` from offset `src` of every rank's input into offset `dst` of this
/// rank's output, in chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ReduceTask {
    pub dst: usize,
    pub src: usize,
    pub bytes: usize,
}

/// A copy of `bytes` from `rank`'s input (or output, once its progress passes each chunk) at
/// `src` into this rank's output at `dst`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct CopyTask {
    pub rank: usize,
    pub from_output: bool,
    pub src: usize,
    pub dst: usize,
    pub bytes: usize,
}

/// One rank's share of a direct operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Work {
    pub reduce: Option<ReduceTask>,
    pub copies: Vec<CopyTask>,
    /// Bytes per chunk (the unit of progress).
    pub chunk: usize,
}

/// The shape of a direct operation.
#[derive(Debug, Clone, Copy)]
pub(super) struct Shape {
    pub func: Func,
    /// NCCL count (elements; per rank for AllGather/ReduceScatter/Gather/Scatter blocks).
    pub count: usize,
    /// Element size in bytes.
    pub esize: usize,
    /// Ranks.
    pub nranks: usize,
    /// The root (rooted collectives).
    pub root: usize,
}

/// Chunk size in bytes for an operation: about an eighth of a slice, 16-256 KiB, a multiple of
/// 4 KiB (so of every element size). Every rank computes the same value.
fn chunk_bytes(slice: usize) -> usize {
    (slice / 8)
        .clamp(16 << 10, 256 << 10)
        .next_multiple_of(4096)
}

/// Rank `q`'s slice of `count` elements (element range) out of `n`.
fn slice(count: usize, n: usize, q: usize) -> (usize, usize) {
    (q * count / n, (q + 1) * count / n)
}

fn input_copy(rank: usize, src: usize, dst: usize, bytes: usize) -> CopyTask {
    CopyTask {
        rank,
        from_output: false,
        src,
        dst,
        bytes,
    }
}

/// Rank `me`'s work in an operation of `shape`.
pub(super) fn work(shape: Shape, me: usize) -> Work {
    let Shape {
        func,
        count,
        esize: es,
        nranks: n,
        root,
    } = shape;
    let blk = count * es;
    let mut reduce = None;
    let mut copies = Vec::new();
    match func {
        Func::AllReduce => {
            let (lo, hi) = slice(count, n, me);
            reduce = Some(ReduceTask {
                dst: lo * es,
                src: lo * es,
                bytes: (hi - lo) * es,
            });
            for k in 1..n {
                let p = (me + k) % n;
                let (lo, hi) = slice(count, n, p);
                copies.push(CopyTask {
                    rank: p,
                    from_output: true,
                    src: lo * es,
                    dst: lo * es,
                    bytes: (hi - lo) * es,
                });
            }
        }
        Func::ReduceScatter => {
            reduce = Some(ReduceTask {
                dst: 0,
                src: me * blk,
                bytes: blk,
            });
        }
        Func::Reduce if me == root => {
            reduce = Some(ReduceTask {
                dst: 0,
                src: 0,
                bytes: blk,
            });
        }
        Func::AllGather => {
            for k in 0..n {
                let p = (me + k) % n;
                copies.push(input_copy(p, 0, p * blk, blk));
            }
        }
        Func::Broadcast => copies.push(input_copy(root, 0, 0, blk)),
        Func::Gather if me == root => {
            for p in 0..n {
                copies.push(input_copy(p, 0, p * blk, blk));
            }
        }
        Func::Scatter => copies.push(input_copy(root, me * blk, 0, blk)),
        _ => {}
    }
    let (lo, hi) = slice(count, n, me);
    let chunk = chunk_bytes(match func {
        Func::AllReduce => (hi - lo) * es,
        _ => blk,
    });
    Work {
        reduce,
        copies,
        chunk,
    }
}

/// Whether `func` has a direct form.
pub(crate) fn has_direct_form(func: Func) -> bool {
    matches!(
        func,
        Func::AllReduce
            | Func::ReduceScatter
            | Func::AllGather
            | Func::Broadcast
            | Func::Reduce
            | Func::Gather
            | Func::Scatter
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(func: Func, count: usize, n: usize) -> Shape {
        Shape {
            func,
            count,
            esize: 4,
            nranks: n,
            root: 1,
        }
    }

    #[test]
    fn all_reduce_slices_tile_the_buffer() {
        for n in 1..6 {
            for count in [1usize, 7, 1000, 1 << 20] {
                let mut covered = vec![0u8; count * 4];
                for me in 0..n {
                    let w = work(shape(Func::AllReduce, count, n), me);
                    let r = w.reduce.unwrap();
                    covered[r.dst..r.dst + r.bytes]
                        .iter_mut()
                        .for_each(|c| *c += 1);
                    // The copies bring in every other rank's slice exactly once.
                    let copied: usize = w.copies.iter().map(|c| c.bytes).sum();
                    assert_eq!(copied + r.bytes, count * 4, "n={n} count={count} me={me}");
                    assert!(w.chunk.is_multiple_of(4096) && w.chunk >= 16 << 10);
                }
                assert!(covered.iter().all(|&c| c == 1), "n={n} count={count}");
            }
        }
    }

    #[test]
    fn rooted_and_gathering_work() {
        assert!(work(shape(Func::Reduce, 64, 3), 0).reduce.is_none());
        assert!(work(shape(Func::Reduce, 64, 3), 1).reduce.is_some());
        let g = work(shape(Func::AllGather, 16, 3), 2);
        assert_eq!(
            g.copies.iter().map(|c| (c.rank, c.dst)).collect::<Vec<_>>(),
            vec![(2, 128), (0, 0), (1, 64)]
        );
        let s = work(shape(Func::Scatter, 16, 3), 2);
        assert_eq!(s.copies, vec![input_copy(1, 128, 0, 64)]);
        assert!(work(shape(Func::Gather, 16, 3), 0).copies.is_empty());
        assert!(!has_direct_form(Func::AllToAll) && has_direct_form(Func::Gather));
    }
}
