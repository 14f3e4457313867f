//! Small typed messages between the ranks of a check, as JSON in host buffers: every rank's
//! value to every rank (an AllGather), or one rank's value to all (a Broadcast). Lengths are
//! agreed first (an AllReduce of the longest), so records of any size fit.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::comm::Communicator;
use crate::error::{Error, Result};
use crate::redop::RedOp;

fn encode<T: Serialize>(v: &T) -> Result<Vec<u8>> {
    serde_json::to_vec(v).map_err(|e| Error::Internal(format!("encoding a check record: {e}")))
}

/// A record cut from its zero padding (JSON text never holds a NUL byte) and decoded.
fn decode<T: DeserializeOwned>(rec: &[u8], from: &str) -> Result<T> {
    let end = rec.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    serde_json::from_slice(&rec[..end]).map_err(|e| {
        Error::Remote(format!(
            "{from} sent an unreadable check record ({e}): run the same rnccl on every host"
        ))
    })
}

/// The longest of every rank's `len`.
fn longest(comm: &Communicator, len: usize) -> Result<usize> {
    let mut v = [len as u64];
    comm.all_reduce_in_place(&mut v, RedOp::Max)?;
    Ok(v[0] as usize)
}

/// Every rank's `mine`, in rank order, on every rank.
///
/// Errors: engine errors of the collectives; [`Error::Remote`] for a record that does not
/// decode (another rnccl version).
pub(crate) fn all_gather<T: Serialize + DeserializeOwned>(
    comm: &Communicator,
    mine: &T,
) -> Result<Vec<T>> {
    let mut rec = encode(mine)?;
    let len = longest(comm, rec.len())?.max(1);
    rec.resize(len, 0);
    let mut all = vec![0u8; len * comm.nranks()];
    comm.all_gather(&rec, &mut all)?;
    all.chunks(len)
        .enumerate()
        .map(|(r, c)| decode(c, &comm.describe(r)))
        .collect()
}

/// `root`'s `value` on every rank (the others pass `None`).
///
/// Errors: engine errors of the collectives; [`Error::Internal`] when the root passes `None`;
/// [`Error::Remote`] for a record that does not decode.
pub(crate) fn broadcast<T: Serialize + DeserializeOwned>(
    comm: &Communicator,
    root: usize,
    value: Option<&T>,
) -> Result<T> {
    let rec = match value {
        Some(v) => encode(v)?,
        None if comm.rank() == root => {
            return Err(Error::Internal("the broadcast's root has no value".into()));
        }
        None => Vec::new(),
    };
    let mut len = [rec.len() as u64];
    comm.broadcast_in_place(&mut len, root)?;
    let mut buf = rec;
    buf.resize(len[0] as usize, 0);
    comm.broadcast_in_place(&mut buf, root)?;
    decode(&buf, &comm.describe(root))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_of_any_length_go_round() {
        let comms = Communicator::init_all(3).unwrap();
        std::thread::scope(|s| {
            let hs: Vec<_> = comms
                .into_iter()
                .map(|c| {
                    s.spawn(move || {
                        let c = &c;
                        let mine = "x".repeat(c.rank() * 50);
                        let all: Vec<String> = all_gather(c, &mine).unwrap();
                        assert_eq!(all.len(), 3);
                        assert_eq!(all[2].len(), 100);
                        let v = (c.rank() == 1).then(|| vec![7u32; 300]);
                        let got: Vec<u32> = broadcast(c, 1, v.as_ref()).unwrap();
                        assert_eq!(got, vec![7; 300]);
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
        });
    }
}
