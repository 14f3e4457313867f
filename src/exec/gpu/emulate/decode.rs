//! The bytes of a device program read back the way `kernels/interp.cu` reads them: the header
//! (`struct Program`) first, then the lanes, connections and steps at the byte offsets the
//! header gives, every field little-endian in `kernels/program.cuh`'s order. What the kernel
//! would trust blindly (connection indices, step ranges, op codes, addresses an op needs) is
//! checked here, so an encoder bug fails a test instead of reading out of bounds.

use crate::device::ReduceSpec;
use crate::device::cuda::abi::{
    CONN_BYTES, DevConn, LANE_BYTES, NO_CONN, PROGRAM_BYTES, STEP_BYTES, STEP_POST, STEP_PRE,
};
use crate::dtype::DataType;
use crate::error::{Error, Result};
use crate::redop::{Combine, Scalar};

/// `struct Program`: the header.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Header {
    /// Byte offset of `Lane[nlanes]`.
    pub lanes: u64,
    /// Byte offset of `Conn[nconns]`.
    pub conns: u64,
    /// Byte offset of `Step[nsteps]`.
    pub steps: u64,
    /// Bytes per FIFO slot.
    pub slot_bytes: u64,
    /// `Report*`.
    pub report: u64,
    /// `u32*` abort flag.
    pub abort: u64,
    /// `u32*` first-failure claim.
    pub claim: u64,
    /// Longest wait for a peer, ns.
    pub timeout_ns: u64,
    /// `u64[2]`: the last operation started and finished.
    pub ops: u64,
    /// `u32*` blocks of the running kernel that finished.
    pub finished: u64,
    /// The pre-multiplier for floating-point types.
    pub pre_f: f64,
    /// The pre-multiplier for integer types.
    pub pre_i: i64,
    /// The post-divisor.
    pub post_div: u64,
    /// `const T*`: the pre-multiplier in device memory (0: none).
    pub pre_at: u64,
    /// Lanes (thread blocks).
    pub nlanes: u32,
    /// Connection ends.
    pub nconns: u32,
    /// Steps of all lanes.
    pub nsteps: u32,
    /// This rank.
    pub rank: u32,
}

impl Header {
    /// The reduction the kernel `<dtype>_<combine>` computes with this header's scalars, as
    /// the kernels apply them: `pre` and `post` always (identity unless the operation has one).
    pub(crate) fn spec(&self, dtype: DataType, combine: Combine) -> ReduceSpec {
        let pre = if dtype.is_float() {
            Scalar::Float(self.pre_f)
        } else {
            Scalar::Int(self.pre_i)
        };
        ReduceSpec {
            dtype,
            combine,
            pre: Some(pre),
            post_div: Some(self.post_div),
        }
    }
}

/// `struct Lane`: `nsteps` steps from `first`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LaneDesc {
    /// Index of the lane's first step.
    pub first: u32,
    /// Steps in the lane.
    pub nsteps: u32,
    /// The lane's channel (for error reports).
    pub channel: u32,
}

/// What a step does (`enum StepOp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KernelOp {
    /// `OP_COPY`.
    Copy = 0,
    /// `OP_SEND`.
    Send = 1,
    /// `OP_COPY_SEND`.
    CopySend = 2,
    /// `OP_RECV`.
    Recv = 3,
    /// `OP_RECV_COPY_SEND`.
    RecvCopySend = 4,
    /// `OP_RECV_REDUCE_SEND`.
    RecvReduceSend = 5,
    /// `OP_RECV_REDUCE_COPY`.
    RecvReduceCopy = 6,
    /// `OP_RECV_REDUCE_COPY_SEND`.
    RecvReduceCopySend = 7,
    /// `OP_EXCHANGE`.
    Exchange = 8,
}

impl KernelOp {
    /// Every op, in `enum StepOp` order.
    pub(crate) const ALL: [KernelOp; 9] = [
        KernelOp::Copy,
        KernelOp::Send,
        KernelOp::CopySend,
        KernelOp::Recv,
        KernelOp::RecvCopySend,
        KernelOp::RecvReduceSend,
        KernelOp::RecvReduceCopy,
        KernelOp::RecvReduceCopySend,
        KernelOp::Exchange,
    ];

    /// The op a step's `op` byte names.
    fn from_code(code: u8) -> Option<KernelOp> {
        KernelOp::ALL.get(usize::from(code)).copied()
    }

    /// What the op touches: (reads `src`, writes `dst`, sends, receives).
    fn uses(self) -> (bool, bool, bool, bool) {
        match self {
            KernelOp::Copy => (true, true, false, false),
            KernelOp::Send => (true, false, true, false),
            KernelOp::CopySend => (true, true, true, false),
            KernelOp::Recv => (false, true, false, true),
            KernelOp::RecvCopySend => (false, true, true, true),
            KernelOp::RecvReduceSend => (true, false, true, true),
            KernelOp::RecvReduceCopy => (true, true, false, true),
            KernelOp::RecvReduceCopySend | KernelOp::Exchange => (true, true, true, true),
        }
    }
}

/// `struct Step`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StepDesc {
    /// Source address (0 when the op reads none).
    pub src: u64,
    /// Destination address (0 when the op writes none).
    pub dst: u64,
    /// Bytes of the step.
    pub bytes: u64,
    /// Index of the sending connection end, or `NO_CONN`.
    pub send: u16,
    /// Index of the receiving connection end, or `NO_CONN`.
    pub recv: u16,
    /// What the step does.
    pub op: KernelOp,
    /// Apply the pre-multiplier (`RNCCL_STEP_PRE`).
    pub pre: bool,
    /// Apply the post-divisor (`RNCCL_STEP_POST`).
    pub post: bool,
}

/// A whole program, decoded.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Decoded {
    /// The header.
    pub header: Header,
    /// The lanes.
    pub lanes: Vec<LaneDesc>,
    /// The connection ends.
    pub conns: Vec<DevConn>,
    /// The steps of every lane.
    pub steps: Vec<StepDesc>,
}

/// Reads little-endian fields in order from a byte offset.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N]> {
        let end = self.at.checked_add(N);
        let field = end.and_then(|e| self.bytes.get(self.at..e));
        let Some(field) = field.and_then(|f| <[u8; N]>::try_from(f).ok()) else {
            return Err(bad(format!(
                "it ends at byte {} where a field reaches past byte {}",
                self.bytes.len(),
                self.at
            )));
        };
        self.at += N;
        Ok(field)
    }
    fn u64(&mut self) -> Result<u64> {
        self.take().map(u64::from_le_bytes)
    }
    fn i64(&mut self) -> Result<i64> {
        self.take().map(i64::from_le_bytes)
    }
    fn f64(&mut self) -> Result<f64> {
        self.take().map(f64::from_le_bytes)
    }
    fn u32(&mut self) -> Result<u32> {
        self.take().map(u32::from_le_bytes)
    }
    fn u16(&mut self) -> Result<u16> {
        self.take().map(u16::from_le_bytes)
    }
    fn u8(&mut self) -> Result<u8> {
        self.take::<1>().map(|[b]| b)
    }
}

fn bad(why: String) -> Error {
    Error::Internal(format!("a malformed device program: {why}"))
}

/// A reader at the header's offset `off`, for `count` records of `size` bytes.
fn table(bytes: &[u8], off: u64, count: u32, size: usize) -> Result<Reader<'_>> {
    let at = usize::try_from(off).map_err(|_| bad(format!("offset {off}")))?;
    let end = (count as usize)
        .checked_mul(size)
        .and_then(|b| b.checked_add(at));
    if end.is_none_or(|e| e > bytes.len()) {
        return Err(bad(format!(
            "{count} records of {size} bytes at offset {at} pass its end ({} bytes)",
            bytes.len()
        )));
    }
    Ok(Reader { bytes, at })
}

/// Checks that a record read exactly `size` bytes from `start`.
fn fits(r: &Reader<'_>, start: usize, size: usize, what: &str) -> Result<()> {
    if r.at - start != size {
        return Err(bad(format!(
            "{what} took {} bytes, not {size}",
            r.at - start
        )));
    }
    Ok(())
}

pub(super) fn header(bytes: &[u8]) -> Result<Header> {
    let mut r = Reader { bytes, at: 0 };
    let h = Header {
        lanes: r.u64()?,
        conns: r.u64()?,
        steps: r.u64()?,
        slot_bytes: r.u64()?,
        report: r.u64()?,
        abort: r.u64()?,
        claim: r.u64()?,
        timeout_ns: r.u64()?,
        ops: r.u64()?,
        finished: r.u64()?,
        pre_f: r.f64()?,
        pre_i: r.i64()?,
        post_div: r.u64()?,
        pre_at: r.u64()?,
        nlanes: r.u32()?,
        nconns: r.u32()?,
        nsteps: r.u32()?,
        rank: r.u32()?,
    };
    fits(&r, 0, PROGRAM_BYTES, "the header")?;
    if [
        h.slot_bytes,
        h.report,
        h.abort,
        h.claim,
        h.ops,
        h.finished,
        h.post_div,
    ]
    .contains(&0)
    {
        return Err(bad(format!(
            "a zero slot size, divisor or control address in its header ({h:?})"
        )));
    }
    if h.pre_at != 0 {
        return Err(bad(format!(
            "a scalar in device memory at {:#x}, which the emulator cannot read",
            h.pre_at
        )));
    }
    Ok(h)
}

fn lane(r: &mut Reader<'_>, nsteps: u32) -> Result<LaneDesc> {
    let start = r.at;
    let l = LaneDesc {
        first: r.u32()?,
        nsteps: r.u32()?,
        channel: r.u32()?,
    };
    r.u32()?;
    fits(r, start, LANE_BYTES, "a lane")?;
    if l.first.checked_add(l.nsteps).is_none_or(|e| e > nsteps) {
        return Err(bad(format!("{l:?} reaches past its {nsteps} steps")));
    }
    Ok(l)
}

fn conn(r: &mut Reader<'_>) -> Result<DevConn> {
    let start = r.at;
    let c = DevConn {
        fifo: r.u64()?,
        sizes: r.u64()?,
        tail: r.u64()?,
        head: r.u64()?,
        step: r.u64()?,
        bytes: r.u64()?,
        peer: r.u32()?,
        channel: r.u16()?,
        pad: r.u16()?,
    };
    fits(r, start, CONN_BYTES, "a connection")?;
    if [c.fifo, c.sizes, c.tail, c.head, c.step, c.bytes].contains(&0) {
        return Err(bad(format!("{c:?} lacks an address")));
    }
    Ok(c)
}

fn step(r: &mut Reader<'_>, nconns: u32) -> Result<StepDesc> {
    let start = r.at;
    let (src, dst, bytes, send, recv) = (r.u64()?, r.u64()?, r.u64()?, r.u16()?, r.u16()?);
    let (code, flags) = (r.u8()?, r.u8()?);
    r.u16()?;
    fits(r, start, STEP_BYTES, "a step")?;
    let op = KernelOp::from_code(code).ok_or_else(|| bad(format!("op code {code}")))?;
    let s = StepDesc {
        src,
        dst,
        bytes,
        send,
        recv,
        op,
        pre: flags & STEP_PRE != 0,
        post: flags & STEP_POST != 0,
    };
    let (reads, writes, sends, receives) = op.uses();
    let conn_ok = |ix: u16, used: bool| {
        if used {
            u32::from(ix) < nconns
        } else {
            ix == NO_CONN
        }
    };
    let addr_ok = |a: u64, used: bool| used == (a != 0);
    let flags_ok = flags & !(STEP_PRE | STEP_POST) == 0;
    if !(conn_ok(send, sends)
        && conn_ok(recv, receives)
        && addr_ok(src, reads)
        && addr_ok(dst, writes)
        && flags_ok)
    {
        return Err(bad(format!(
            "{s:?} (flags {flags:#x}) does not fit its op or the {nconns} connections"
        )));
    }
    Ok(s)
}

/// Decodes a device program from its bytes.
///
/// Errors: [`Error::Internal`] when the bytes are shorter than the header says, a table
/// reaches past the end, or a lane, connection or step is not one the kernel can run safely
/// (a range past the steps, an unknown op, a missing connection or address).
pub(crate) fn decode(bytes: &[u8]) -> Result<Decoded> {
    let header = header(bytes)?;
    let mut r = table(bytes, header.lanes, header.nlanes, LANE_BYTES)?;
    let lanes = (0..header.nlanes)
        .map(|_| lane(&mut r, header.nsteps))
        .collect::<Result<_>>()?;
    let mut r = table(bytes, header.conns, header.nconns, CONN_BYTES)?;
    let conns = (0..header.nconns)
        .map(|_| conn(&mut r))
        .collect::<Result<_>>()?;
    let mut r = table(bytes, header.steps, header.nsteps, STEP_BYTES)?;
    let steps = (0..header.nsteps)
        .map(|_| step(&mut r, header.nconns))
        .collect::<Result<_>>()?;
    Ok(Decoded {
        header,
        lanes,
        conns,
        steps,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The decoder's op numbering is the kernel's `enum StepOp`.
    #[test]
    fn op_codes_follow_the_kernel_enum() {
        let h = include_str!("../../../../kernels/program.cuh");
        let names = [
            "OP_COPY",
            "OP_SEND",
            "OP_COPY_SEND",
            "OP_RECV",
            "OP_RECV_COPY_SEND",
            "OP_RECV_REDUCE_SEND",
            "OP_RECV_REDUCE_COPY",
            "OP_RECV_REDUCE_COPY_SEND",
            "OP_EXCHANGE",
        ];
        for (op, name) in KernelOp::ALL.into_iter().zip(names) {
            let want = format!("{name} = {},", op as u8);
            assert!(h.contains(&want), "program.cuh lacks `{want}`");
            assert_eq!(KernelOp::from_code(op as u8), Some(op));
        }
        assert_eq!(KernelOp::from_code(9), None);
    }

    /// A header of one lane of one step (a Copy) and no connections, to damage.
    fn one_copy() -> Vec<u8> {
        let mut b = Vec::new();
        let lanes = PROGRAM_BYTES as u64;
        let steps = lanes + LANE_BYTES as u64;
        for v in [lanes, steps, steps, 64, 8, 8, 8, 1_000_000, 16, 24] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&1.0f64.to_le_bytes());
        b.extend_from_slice(&1i64.to_le_bytes());
        b.extend_from_slice(&1u64.to_le_bytes());
        // pre_at: no scalar in device memory.
        b.extend_from_slice(&0u64.to_le_bytes());
        for v in [1u32, 0, 1, 0] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        for v in [0u32, 1, 0, 0] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        for v in [0x1000u64, 0x2000, 64] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&NO_CONN.to_le_bytes());
        b.extend_from_slice(&NO_CONN.to_le_bytes());
        b.extend_from_slice(&[0, STEP_PRE, 0, 0]);
        b
    }

    #[test]
    fn a_well_formed_program_decodes() {
        let d = decode(&one_copy()).unwrap();
        assert_eq!((d.header.nlanes, d.header.nsteps, d.header.rank), (1, 1, 0));
        assert_eq!(
            d.lanes,
            vec![LaneDesc {
                first: 0,
                nsteps: 1,
                channel: 0
            }]
        );
        let s = d.steps[0];
        assert_eq!(
            (s.op, s.src, s.dst, s.bytes),
            (KernelOp::Copy, 0x1000, 0x2000, 64)
        );
        assert!(s.pre && !s.post);
    }

    #[test]
    fn malformed_programs_are_refused() {
        let good = one_copy();
        let step = good.len() - STEP_BYTES;
        let refused = |what: &str, b: &[u8]| {
            let e = decode(b).expect_err(what);
            assert!(e.to_string().contains("malformed"), "{what}: {e}");
        };
        refused("truncated", &good[..good.len() - 1]);
        // (what, byte, new value)
        for (what, at, v) in [
            ("unknown op", step + 28, 9),
            ("a copy that sends", step + 24, 0),
            ("a copy without a source", step + 1, 0),
            ("unknown flag", step + 29, 4),
            ("a lane past the steps", PROGRAM_BYTES + 4, 2),
            ("no slot size", 24, 0),
        ] {
            let mut b = good.clone();
            b[at] = v;
            refused(what, &b);
        }
    }
}
