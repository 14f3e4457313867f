//! Host collectives over every rank one thread drives, queued in one group: the benchmark's
//! barrier, time averaging, wrong-element sums and the gather of device descriptions. A thread
//! that drives several ranks (nccl-tests' `-g`) must queue all of their operations before
//! waiting for any, since host collectives of several communicators progress in one thread only
//! inside one group; with one rank each is a plain collective. GPU communicators run them over
//! their host connections.

use super::Average;
use crate::coll::{CollArgs, Func};
use crate::comm::{Communicator, group_start};
use crate::dtype::{DataType, Element, as_bytes_mut};
use crate::error::{Error, Result};
use crate::redop::RedOp;

/// One element per local rank (`vals[i]` from `comms[i]`), reduced in place over every rank of
/// the communicator with `op` (or broadcast from rank 0 for `func` Broadcast).
///
/// Errors: engine errors of the collective.
fn one_each<T: Element>(
    comms: &[Communicator],
    vals: &mut [T],
    func: Func,
    op: RedOp,
) -> Result<()> {
    if vals.len() != comms.len() {
        return Err(Error::Internal(format!(
            "{} values for {} ranks",
            vals.len(),
            comms.len()
        )));
    }
    let args = CollArgs {
        func,
        count: 1,
        dtype: T::DTYPE,
        op,
        root: 0,
        in_place: true,
    };
    let mut g = group_start();
    for (c, v) in comms.iter().zip(vals.chunks_mut(1)) {
        g.push_in_place(c, args, as_bytes_mut(v))?;
    }
    g.end()
}

/// Waits until every rank of the communicator got here (an 8-byte AllReduce).
///
/// Errors: engine errors of the collective.
pub(super) fn barrier(comms: &[Communicator]) -> Result<()> {
    one_each(
        comms,
        &mut vec![0u64; comms.len()],
        Func::AllReduce,
        RedOp::Sum,
    )
}

/// Combines this thread's time per operation `secs` (the same for each of its ranks) with
/// every other rank's as `avg` says (nccl-tests `-a`).
///
/// Errors: engine errors of the collective.
pub(super) fn combine_time(comms: &[Communicator], secs: f64, avg: Average) -> Result<f64> {
    let mut v = vec![secs; comms.len()];
    match avg {
        Average::Rank0 => one_each(comms, &mut v, Func::Broadcast, RedOp::Sum)?,
        Average::Mean => {
            one_each(comms, &mut v, Func::AllReduce, RedOp::Sum)?;
            let n = comms.first().map_or(1, Communicator::nranks);
            v[0] /= n as f64;
        }
        Average::Min => one_each(comms, &mut v, Func::AllReduce, RedOp::Min)?,
        Average::Max => one_each(comms, &mut v, Func::AllReduce, RedOp::Max)?,
    }
    Ok(v[0])
}

/// The sum over every rank of the communicator of one count per local rank (`vals[i]` from
/// `comms[i]`).
///
/// Errors: engine errors of the collective.
pub(super) fn sum(comms: &[Communicator], vals: &[u64]) -> Result<u64> {
    let mut v = vals.to_vec();
    one_each(comms, &mut v, Func::AllReduce, RedOp::Sum)?;
    Ok(v.first().copied().unwrap_or(0))
}

/// Gathers one `len`-byte record per local rank (`mine[i]` from `comms[i]`, padded with zeros
/// or cut to `len`) at rank 0: every rank's record in rank order in the thread that drives rank
/// 0, `None` in the others.
///
/// Errors: engine errors of the collective.
pub(super) fn gather(
    comms: &[Communicator],
    mine: &[Vec<u8>],
    len: usize,
) -> Result<Option<Vec<u8>>> {
    let n = comms.first().map_or(0, Communicator::nranks);
    let mut sends: Vec<Vec<u8>> = mine
        .iter()
        .map(|m| {
            let mut r = m.clone();
            r.resize(len, 0);
            r
        })
        .collect();
    let mut recvs: Vec<Vec<u8>> = comms
        .iter()
        .map(|c| {
            if c.rank() == 0 {
                vec![0u8; len * n]
            } else {
                Vec::new()
            }
        })
        .collect();
    let args = CollArgs {
        func: Func::Gather,
        count: len,
        dtype: DataType::Uint8,
        op: RedOp::Sum,
        root: 0,
        in_place: false,
    };
    {
        let mut g = group_start();
        for ((c, s), r) in comms.iter().zip(sends.iter_mut()).zip(recvs.iter_mut()) {
            g.push(c, args, s, r)?;
        }
        g.end()?;
    }
    Ok(comms
        .iter()
        .position(|c| c.rank() == 0)
        .map(|i| std::mem::take(&mut recvs[i])))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two ranks driven by this one thread: every helper must queue both before waiting.
    #[test]
    fn one_thread_drives_two_ranks() {
        let comms = Communicator::init_all(2).unwrap();
        barrier(&comms).unwrap();
        assert_eq!(sum(&comms, &[3, 4]).unwrap(), 7);
        assert_eq!(combine_time(&comms, 2.0, Average::Mean).unwrap(), 2.0);
        assert_eq!(combine_time(&comms, 2.0, Average::Max).unwrap(), 2.0);
        let all = gather(&comms, &[b"a".to_vec(), b"bc".to_vec()], 4).unwrap();
        assert_eq!(all.as_deref(), Some(&b"a\0\0\0bc\0\0"[..]));
    }
}
