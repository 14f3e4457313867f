//! A plan encoded for the GPU: the bytes of a device program (`kernels/program.cuh`, whose
//! layout this file mirrors field for field), with every buffer location resolved to a device
//! address and every connection to its FIFO. Pure data: tests decode it again and run it on a
//! simulated fabric ([`super::emulate`]).

use crate::coll::{Buf, LaneKey, Loc, Op, Plan, Step};
use crate::conn::ConnKey;
use crate::device::ReduceSpec;
use crate::device::cuda::abi::{self, DevConn, NO_CONN, STEP_POST, STEP_PRE, StepOp};
use crate::error::{Error, Result};
use crate::redop::Scalar;

/// The device addresses of one operation's buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct DevBuffers {
    /// Input: (address, bytes).
    pub input: (u64, usize),
    /// Output: (address, bytes).
    pub output: (u64, usize),
    /// Scratch: (address, bytes).
    pub scratch: (u64, usize),
}

impl DevBuffers {
    /// The address of `bytes` bytes at `loc`.
    ///
    /// Errors: [`Error::Internal`] when the plan reaches past a buffer (a planning bug).
    fn at(&self, loc: Loc, bytes: usize) -> Result<u64> {
        let (base, len) = match loc.buf {
            Buf::Input => self.input,
            Buf::Output => self.output,
            Buf::Scratch => self.scratch,
        };
        if loc.off.checked_add(bytes).is_none_or(|end| end > len) {
            return Err(Error::Internal(format!(
                "a step reaches bytes {}..{} of the {:?} buffer, which holds {len}",
                loc.off,
                loc.off + bytes,
                loc.buf
            )));
        }
        Ok(base + loc.off as u64)
    }
}

/// Where the kernel reports and what bounds it (the header's communicator fields).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Control {
    /// `Report*` (host-mapped).
    pub report: u64,
    /// `u32*` abort flag (host-mapped).
    pub abort: u64,
    /// `u32*` first-failure claim (device memory).
    pub claim: u64,
    /// Longest wait for a peer, ns.
    pub timeout_ns: u64,
    /// `u64[2]` (host-mapped): the last operation a kernel started and the last it finished
    /// (kernels/program.cuh, operation tracking).
    pub ops: u64,
    /// `u32*` blocks of the running kernel that finished (device memory), followed (at
    /// `finished + 4`) by the `u64` last operation reported finished.
    pub finished: u64,
    /// This rank.
    pub rank: u32,
    /// Bytes per FIFO slot.
    pub slot_bytes: u64,
}

fn op_code(op: &Op) -> StepOp {
    match op {
        Op::Copy { .. } => StepOp::Copy,
        Op::Send { .. } => StepOp::Send,
        Op::CopySend { .. } => StepOp::CopySend,
        Op::Recv { .. } => StepOp::Recv,
        Op::RecvCopySend { .. } => StepOp::RecvCopySend,
        Op::RecvReduceSend { .. } => StepOp::RecvReduceSend,
        Op::RecvReduceCopy { .. } => StepOp::RecvReduceCopy,
        Op::RecvReduceCopySend { .. } => StepOp::RecvReduceCopySend,
        Op::Exchange { .. } => StepOp::Exchange,
    }
}

/// The local locations a step reads (`src`) and writes (`dst`).
fn locs(op: &Op) -> (Option<Loc>, Option<Loc>) {
    match *op {
        Op::Copy { src, dst } | Op::CopySend { src, dst, .. } => (Some(src), Some(dst)),
        Op::Send { src, .. } | Op::RecvReduceSend { src, .. } => (Some(src), None),
        Op::Recv { dst, .. } | Op::RecvCopySend { dst, .. } => (None, Some(dst)),
        Op::RecvReduceCopy { src, dst, .. } | Op::RecvReduceCopySend { src, dst, .. } => {
            (Some(src), Some(dst))
        }
        Op::Exchange { buf, .. } => (Some(buf), Some(buf)),
    }
}

/// The program header (`struct Program`) for lanes, connections and steps at byte `offsets`
/// (0 for the LL kernel's arguments, which have none) and `counts` of each: the communicator's
/// control fields and the reduction's scalars (identity when `spec` has none: the kernels may
/// apply them unconditionally).
pub(super) fn header(
    offsets: [usize; 3],
    counts: [u32; 3],
    spec: &ReduceSpec,
    ctl: &Control,
) -> abi::Program {
    let pre = spec.pre.unwrap_or(Scalar::Int(1));
    abi::Program {
        lanes: offsets[0] as u64,
        conns: offsets[1] as u64,
        steps: offsets[2] as u64,
        slot_bytes: ctl.slot_bytes,
        report: ctl.report,
        abort: ctl.abort,
        claim: ctl.claim,
        timeout_ns: ctl.timeout_ns,
        ops: ctl.ops,
        finished: ctl.finished,
        pre_f: pre.as_f64(),
        pre_i: pre.as_i64(),
        post_div: spec.post_div.unwrap_or(1),
        pre_at: spec.pre.and_then(Scalar::device_address).unwrap_or(0),
        nlanes: counts[0],
        nconns: counts[1],
        nsteps: counts[2],
        rank: ctl.rank,
    }
}

/// Bytes a lane copies at least before [`split_copies`] spreads a local copy over more thread
/// blocks (one block moves about 30 GB/s; H100 copies 3 TB/s with all of them).
const COPY_SPLIT_BYTES: usize = 256 << 10;
/// Most thread blocks one local copy is spread over.
const COPY_SPLIT_MAX: usize = 32;
/// Granularity of a split copy: keeps every piece aligned like the whole and whole elements.
const COPY_SPLIT_ALIGN: usize = 4096;

/// Spreads every lane that is one local copy (a one-rank collective, a rank's own block of
/// AlltoAll or Gather) over up to [`COPY_SPLIT_MAX`] lanes, so a large copy runs on many
/// blocks. Pieces are independent: no connection, disjoint ranges.
type Lanes<'a> = Vec<(LaneKey, Vec<(&'a DevBuffers, Step)>)>;

fn split_copies(lanes: Lanes<'_>) -> Lanes<'_> {
    let mut out = Vec::with_capacity(lanes.len());
    for (key, steps) in lanes {
        let [(bufs, step)] = steps[..] else {
            out.push((key, steps));
            continue;
        };
        let Op::Copy { src, dst } = step.op else {
            out.push((key, steps));
            continue;
        };
        let k = (step.bytes / COPY_SPLIT_BYTES).clamp(1, COPY_SPLIT_MAX);
        let piece = step.bytes.div_ceil(k).next_multiple_of(COPY_SPLIT_ALIGN);
        let mut off = 0;
        while off < step.bytes {
            let n = piece.min(step.bytes - off);
            let op = Op::Copy {
                src: src.at(off),
                dst: dst.at(off),
            };
            let s = Step {
                op,
                bytes: n,
                ..step
            };
            out.push((key, vec![(bufs, s)]));
            off += n;
        }
    }
    out
}

/// One operation of a program: its plan and where its buffers are.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Part<'a> {
    /// The operation's plan on this rank.
    pub plan: &'a Plan,
    /// Its buffers.
    pub bufs: DevBuffers,
}

/// The connection table of a program: the sending ends of all parts first, then the receiving
/// ends, each once and sorted, as [`encode`] numbers them.
pub(crate) fn conn_order(parts: &[Part<'_>]) -> Vec<(ConnKey, bool)> {
    let mut sends: Vec<ConnKey> = parts
        .iter()
        .flat_map(|p| p.plan.send_keys.clone())
        .collect();
    let mut recvs: Vec<ConnKey> = parts
        .iter()
        .flat_map(|p| p.plan.recv_keys.clone())
        .collect();
    for k in [&mut sends, &mut recvs] {
        k.sort_unstable();
        k.dedup();
    }
    let sends = sends.into_iter().map(|k| (k, true));
    sends.chain(recvs.into_iter().map(|k| (k, false))).collect()
}

/// Encodes `parts` (operations of one group on one communicator; usually one) as one
/// program: lanes with the same key (the Send/Recv of a group to one peer) run their parts'
/// steps one after the other, in part order; a part's several lanes with one key (spread over
/// connections) stay separate lanes. `conns` are the connection ends in
/// [`conn_order`], `spec` the reduction (its scalars go into the header). Returns the bytes and
/// the number of lanes (thread blocks to launch).
///
/// Errors: [`Error::Internal`] when a step reaches past a buffer, names a connection not in
/// the table, or the program has more than 65 535 connections or 2³² steps; when two lanes use
/// one connection end (their thread blocks would race on its step counters and slots: a
/// group's operations with one peer belong in one lane); or when the slot size is not a
/// nonzero multiple of 16 bytes (a piece must hold whole elements and keep 16-byte packs
/// aligned).
pub(crate) fn encode(
    parts: &[Part<'_>],
    conns: &[DevConn],
    spec: &ReduceSpec,
    ctl: &Control,
) -> Result<(Vec<u8>, u32)> {
    if ctl.slot_bytes == 0 || !ctl.slot_bytes.is_multiple_of(16) {
        return Err(Error::Internal(format!(
            "a FIFO slot of {} bytes: the GPU kernel needs a nonzero multiple of 16",
            ctl.slot_bytes
        )));
    }
    let index = conn_order(parts);
    if index.len() != conns.len() || conns.len() >= NO_CONN as usize {
        return Err(Error::Internal(format!(
            "a plan with {} connection ends was given {}",
            index.len(),
            conns.len()
        )));
    }
    let find = |key: Option<ConnKey>, send: bool| -> Result<u16> {
        let Some(key) = key else { return Ok(NO_CONN) };
        index
            .iter()
            .position(|&(k, s)| k == key && s == send)
            .map(|i| i as u16)
            .ok_or_else(|| Error::Internal(format!("a step uses {key:?}, which the plan lacks")))
    };
    // Lanes by key and occurrence, in order of first appearance; each a list of (part, step).
    // A part may hold several lanes with one key (a peer's traffic spread over connections,
    // `spread_p2p`): the j-th of them joins the j-th of every other part, which uses the same
    // connection, and stays a thread block of its own.
    let mut lanes: Lanes<'_> = Vec::new();
    let mut ids: Vec<(LaneKey, usize)> = Vec::new();
    for p in parts {
        let mut seen: Vec<LaneKey> = Vec::new();
        for (key, steps) in &p.plan.lanes {
            let id = (*key, seen.iter().filter(|k| *k == key).count());
            seen.push(*key);
            let at = match ids.iter().position(|i| *i == id) {
                Some(i) => i,
                None => {
                    ids.push(id);
                    lanes.push((*key, Vec::new()));
                    lanes.len() - 1
                }
            };
            lanes[at].1.extend(steps.iter().map(|s| (&p.bufs, *s)));
        }
    }
    let lanes = split_copies(lanes);
    let nsteps: usize = lanes.iter().map(|(_, s)| s.len()).sum();
    let nlanes = lanes.len();
    let lanes_off = abi::LANES_AT;
    let conns_off = lanes_off + nlanes * size_of::<abi::Lane>();
    let steps_off = conns_off + std::mem::size_of_val(conns);
    let total = steps_off + nsteps * size_of::<abi::Step>();
    let too_many = |what| Error::Internal(format!("a program with too many {what} for the GPU"));
    let nlanes32 = u32::try_from(nlanes).map_err(|_| too_many("lanes"))?;
    let mut w = Vec::with_capacity(total);
    let counts = [
        nlanes32,
        conns.len() as u32,
        u32::try_from(nsteps).map_err(|_| too_many("steps"))?,
    ];
    let head = header([lanes_off, conns_off, steps_off], counts, spec, ctl);
    abi::put(&mut w, &head);
    let mut first = 0u32;
    for (key, steps) in &lanes {
        let channel = match key {
            LaneKey::Channel(c) => u32::from(*c),
            _ => 0,
        };
        let lane = abi::Lane {
            first,
            nsteps: steps.len() as u32,
            channel,
            pad: 0,
        };
        abi::put(&mut w, &lane);
        first += steps.len() as u32;
    }
    for c in conns {
        abi::put(&mut w, &DevConn { pad: 0, ..*c });
    }
    // struct Step[]
    let mut owner: Vec<Option<usize>> = vec![None; conns.len()];
    for (lane, (key, steps)) in lanes.iter().enumerate() {
        for (bufs, s) in steps {
            let (src, dst) = locs(&s.op);
            let addr = |l: Option<Loc>| l.map_or(Ok(0), |l| bufs.at(l, s.bytes));
            let (send, recv) = (find(s.send_key(), true)?, find(s.recv_key(), false)?);
            for ix in [send, recv].into_iter().filter(|&ix| ix != NO_CONN) {
                match owner[usize::from(ix)].replace(lane) {
                    Some(other) if other != lane => {
                        return Err(Error::Internal(format!(
                            "lanes {other} and {lane} ({key:?}) both use connection end {:?}: \
                             one lane per connection end",
                            index[usize::from(ix)]
                        )));
                    }
                    _ => {}
                }
            }
            let step = abi::Step {
                src: addr(src)?,
                dst: addr(dst)?,
                bytes: s.bytes as u64,
                send,
                recv,
                op: op_code(&s.op) as u8,
                flags: (u8::from(s.pre) * STEP_PRE) | (u8::from(s.post) * STEP_POST),
                pad: 0,
            };
            abi::put(&mut w, &step);
        }
    }
    debug_assert_eq!(w.len(), total);
    Ok((w, nlanes32))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn op_codes_follow_the_kernel_enum() {
        let h = include_str!("../../../kernels/program.cuh");
        let l = Loc::input(0);
        let k = ConnKey::collective(1, 0);
        for (op, name) in [
            (Op::Copy { src: l, dst: l }, "OP_COPY"),
            (Op::Send { src: l, to: k }, "OP_SEND"),
            (
                Op::CopySend {
                    src: l,
                    dst: l,
                    to: k,
                },
                "OP_COPY_SEND",
            ),
            (Op::Recv { dst: l, from: k }, "OP_RECV"),
            (
                Op::RecvCopySend {
                    dst: l,
                    from: k,
                    to: k,
                },
                "OP_RECV_COPY_SEND",
            ),
            (
                Op::RecvReduceSend {
                    src: l,
                    from: k,
                    to: k,
                },
                "OP_RECV_REDUCE_SEND",
            ),
            (
                Op::RecvReduceCopy {
                    src: l,
                    dst: l,
                    from: k,
                },
                "OP_RECV_REDUCE_COPY",
            ),
            (
                Op::RecvReduceCopySend {
                    src: l,
                    dst: l,
                    from: k,
                    to: k,
                },
                "OP_RECV_REDUCE_COPY_SEND",
            ),
            (Op::Exchange { buf: l, with: k }, "OP_EXCHANGE"),
        ] {
            let code = op_code(&op);
            let want = format!("{name} = {},", code as u8);
            assert!(h.contains(&want), "program.cuh lacks `{want}`");
            assert!(StepOp::ALL.contains(&(code, name)), "{name}");
        }
    }

    #[test]
    fn steps_past_a_buffer_are_refused() {
        let b = DevBuffers {
            input: (0x1000, 64),
            output: (0x2000, 64),
            scratch: (0, 0),
        };
        assert_eq!(b.at(Loc::output(32), 32).unwrap(), 0x2020);
        assert!(b.at(Loc::output(40), 32).is_err());
        assert!(b.at(Loc::scratch(0), 1).is_err());
    }

    /// Two lanes on one connection end would race on its counters and slots; a slot size the
    /// kernel cannot cut pieces from is refused too.
    #[test]
    fn shared_connection_ends_and_odd_slots_are_refused() {
        let bufs = DevBuffers {
            input: (0x1000, 256),
            output: (0x2000, 256),
            scratch: (0, 0),
        };
        let to = ConnKey::p2p(1);
        let send = |off| {
            let op = Op::Send {
                src: Loc::input(off),
                to,
            };
            crate::coll::Step::new(op, 128)
        };
        let lane = |s| (crate::coll::LaneKey::SendTo(1), vec![s]);
        let plan = |lanes| Plan::new(lanes, 0, crate::coll::Algo::Direct);
        let conn = DevConn {
            fifo: 1,
            ..DevConn::default()
        };
        let spec = ReduceSpec::copy(crate::dtype::DataType::Uint8);
        let ctl = |slot_bytes| Control {
            report: 8,
            abort: 8,
            claim: 8,
            timeout_ns: 1,
            ops: 8,
            finished: 8,
            rank: 0,
            slot_bytes,
        };
        let one = plan(vec![lane(send(0))]);
        // Two lanes (a channel and a peer lane) on one connection end.
        let two = plan(vec![
            lane(send(0)),
            (crate::coll::LaneKey::Channel(0), vec![send(128)]),
        ]);
        let part = |plan| [Part { plan, bufs }];
        assert!(encode(&part(&one), &[conn], &spec, &ctl(64)).is_ok());
        let e = encode(&part(&two), &[conn], &spec, &ctl(64)).unwrap_err();
        assert!(e.to_string().contains("both use connection end"), "{e}");
        for slot in [0, 24] {
            assert!(encode(&part(&one), &[conn], &spec, &ctl(slot)).is_err());
        }
        // Two parts' lanes to one peer are one lane: their steps run in order.
        let (bytes, lanes) =
            encode(&[part(&one)[0], part(&one)[0]], &[conn], &spec, &ctl(64)).expect("one lane");
        assert_eq!(lanes, 1);
        assert_eq!(
            bytes.len(),
            size_of::<abi::Program>()
                + size_of::<abi::Lane>()
                + size_of::<DevConn>()
                + 2 * size_of::<abi::Step>()
        );
    }

    /// A peer's traffic spread over connections (`spread_p2p`) keeps one thread block per
    /// connection, also when a group's parts are merged: the regression where the spread
    /// lanes were joined into one block left sendrecv at a tenth of NCCL's bandwidth.
    #[test]
    fn spread_peer_lanes_stay_separate_blocks() {
        use crate::exec::gpu::spread::spread_p2p;
        use crate::transport::gpu::P2P_CHANNELS;
        let bytes = 8 << 20;
        let bufs = DevBuffers {
            input: (0x1000_0000, bytes),
            output: (0x2000_0000, bytes),
            scratch: (0, 0),
        };
        let send = Step::new(
            Op::Send {
                src: Loc::input(0),
                to: ConnKey::p2p(1),
            },
            bytes,
        );
        let recv = Step::new(
            Op::Recv {
                dst: Loc::output(0),
                from: ConnKey::p2p(1),
            },
            bytes,
        );
        let plan = |key, s| Plan::new(vec![(key, vec![s])], 0, crate::coll::Algo::Direct);
        let sends = spread_p2p(&plan(LaneKey::SendTo(1), send), P2P_CHANNELS);
        let recvs = spread_p2p(&plan(LaneKey::RecvFrom(1), recv), P2P_CHANNELS);
        let parts = [
            Part { plan: &sends, bufs },
            Part { plan: &recvs, bufs },
            Part { plan: &sends, bufs },
        ];
        let conn = DevConn {
            fifo: 1,
            ..DevConn::default()
        };
        let conns = vec![conn; conn_order(&parts).len()];
        assert_eq!(conns.len(), 2 * P2P_CHANNELS);
        let spec = ReduceSpec::copy(crate::dtype::DataType::Uint8);
        let ctl = Control {
            report: 8,
            abort: 8,
            claim: 8,
            timeout_ns: 1,
            ops: 8,
            finished: 8,
            rank: 0,
            slot_bytes: 1 << 19,
        };
        let (bytes, lanes) = encode(&parts, &conns, &spec, &ctl).expect("encodes");
        assert_eq!(
            lanes as usize,
            2 * P2P_CHANNELS,
            "one block per connection and way"
        );
        // Each send connection's block runs both sends' pieces in order.
        assert_eq!(
            bytes.len(),
            size_of::<abi::Program>()
                + 2 * P2P_CHANNELS * (size_of::<abi::Lane>() + size_of::<DevConn>())
                + 3 * P2P_CHANNELS * size_of::<abi::Step>()
        );
    }

    #[test]
    fn large_local_copies_spread_over_blocks() {
        let bytes = (1 << 20) + 12;
        let bufs = DevBuffers {
            input: (0x10_0000, bytes),
            output: (0x40_0000, bytes),
            scratch: (0, 0),
        };
        let copy = crate::coll::Step::new(
            Op::Copy {
                src: Loc::input(0),
                dst: Loc::output(0),
            },
            bytes,
        );
        let plan = Plan::new(
            vec![(crate::coll::LaneKey::Local, vec![copy])],
            0,
            crate::coll::Algo::Ring,
        );
        let ctl = Control {
            report: 8,
            abort: 8,
            claim: 8,
            timeout_ns: 1,
            ops: 8,
            finished: 8,
            rank: 0,
            slot_bytes: 64,
        };
        let spec = ReduceSpec::copy(crate::dtype::DataType::Float32);
        let (prog, lanes) = encode(&[Part { plan: &plan, bufs }], &[], &spec, &ctl).unwrap();
        assert_eq!(lanes, 4);
        let steps_off = size_of::<abi::Program>() + 4 * size_of::<abi::Lane>();
        let field = |at: usize| u64::from_le_bytes(prog[at..at + 8].try_into().unwrap());
        let mut next = 0u64;
        for l in 0..4 {
            let at = steps_off + l * size_of::<abi::Step>();
            let (src, dst, n) = (field(at), field(at + 8), field(at + 16));
            assert_eq!((src, dst), (0x10_0000 + next, 0x40_0000 + next), "lane {l}");
            assert_eq!(src % 4096, 0);
            next += n;
        }
        assert_eq!(next, bytes as u64);
    }
}
