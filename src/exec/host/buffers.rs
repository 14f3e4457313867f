//! The buffers of one operation as the executor sees them: the caller's input and output
//! (memory of some [`MemKind`]), plan-owned scratch, the reduction and the backend whose kernels
//! reach that memory.

use crate::coll::{Buf, Loc};
use crate::device::{Backend, MemKind, ReduceSpec, Region, backend_for};
use crate::error::{Error, Result};

/// The buffers of one operation.
pub(crate) struct OpBuffers {
    input: Region,
    output: Region,
    scratch: Vec<u8>,
    pub(super) spec: ReduceSpec,
    pub(super) backend: &'static dyn Backend,
    /// Read the input from a copy taken when the execution starts (the input overlaps memory
    /// the same phase writes: in-place AlltoAll, a Send from a buffer a Recv fills).
    snapshot_input: bool,
    snapshot: Vec<u8>,
    /// Write the output past the caches (large outputs).
    pub(super) stream_output: bool,
    /// Write memory-FIFO send slots past the caches (as [`super::SlotStores`] chooses).
    pub(super) stream_slots: bool,
}

// SAFETY: the regions point to memory the creator of the buffers lent for their whole life
// (see `OpBuffers::new`); one thread drives an operation at a time.
unsafe impl Send for OpBuffers {}

impl OpBuffers {
    /// The buffers of an operation reading `input`, writing `output`, with `scratch_bytes` of
    /// plan-owned scratch, applying `spec`.
    ///
    /// Errors: [`Error::InvalidArgument`] when no backend reaches the buffers' memory, or the
    /// input and output live in memory no single backend reaches.
    ///
    /// # Safety
    /// `input` must be valid for reads and `output` for writes of their lengths for as long as
    /// these buffers (or an execution built on them) live, and nothing else may write `input`
    /// or access `output` meanwhile. The output may contain the input only in the layouts of
    /// nccl.h's in-place operations (see [`crate::coll::CollArgs::in_place_layout`]), which the
    /// plans respect.
    pub(crate) unsafe fn new(
        input: Region,
        output: Region,
        scratch_bytes: usize,
        spec: ReduceSpec,
    ) -> Result<OpBuffers> {
        let backend = backend_for(input.kind)?;
        if !backend.accepts(output.kind) {
            return Err(Error::invalid_arg(format!(
                "the send buffer is {:?} memory and the receive buffer {:?} memory; one \
                 operation's buffers must be reachable by one backend",
                input.kind, output.kind
            )));
        }
        Ok(OpBuffers {
            input,
            output,
            scratch: vec![0; scratch_bytes],
            spec,
            backend,
            snapshot_input: false,
            snapshot: Vec::new(),
            stream_output: false,
            stream_slots: false,
        })
    }

    /// Reads the input from a snapshot taken when the execution starts.
    pub(crate) fn snapshot_input(mut self, yes: bool) -> OpBuffers {
        self.snapshot_input = yes;
        self
    }

    /// Writes the output past the caches (`yes`) or through them.
    pub(crate) fn stream_output(mut self, yes: bool) -> OpBuffers {
        self.stream_output = yes;
        self
    }

    /// Writes memory-FIFO send slots past the caches (`yes`) or through them.
    pub(crate) fn stream_slots(mut self, yes: bool) -> OpBuffers {
        self.stream_slots = yes;
        self
    }

    /// The reduction.
    pub(crate) fn spec(&self) -> ReduceSpec {
        self.spec
    }

    /// The backend whose kernels reach the buffers.
    pub(crate) fn backend(&self) -> &'static dyn Backend {
        self.backend
    }

    /// Whether the output is written past the caches.
    pub(crate) fn streams_output(&self) -> bool {
        self.stream_output
    }

    /// The input region.
    pub(crate) fn input(&self) -> Region {
        self.input
    }

    /// The output region.
    pub(crate) fn output(&self) -> Region {
        self.output
    }

    /// Whether the input and output are host memory (a socket can read them where they lie).
    pub(super) fn on_host(&self) -> bool {
        self.input.kind == MemKind::Host && self.output.kind == MemKind::Host
    }

    /// Takes the input snapshot, when asked for (see [`OpBuffers::snapshot_input`]).
    pub(super) fn take_snapshot(&mut self) {
        if !self.snapshot_input || self.input.len == 0 || self.input.kind != MemKind::Host {
            return;
        }
        // SAFETY: `new`'s contract lends `input.len` readable bytes at `input.ptr`.
        let bytes = unsafe { std::slice::from_raw_parts(self.input.ptr, self.input.len) };
        self.snapshot = bytes.to_vec();
        self.input.ptr = self.snapshot.as_mut_ptr();
    }

    /// The address of `bytes` bytes at `loc`, for reading.
    ///
    /// Errors: [`Error::Internal`] when the range leaves its buffer (a plan bug).
    pub(super) fn src(&self, loc: Loc, bytes: usize) -> Result<*const u8> {
        let (base, len) = match loc.buf {
            Buf::Input => (self.input.ptr.cast_const(), self.input.len),
            Buf::Output => (self.output.ptr.cast_const(), self.output.len),
            Buf::Scratch => (self.scratch.as_ptr(), self.scratch.len()),
        };
        check(loc, bytes, len)?;
        // SAFETY: loc.off + bytes <= len, checked above.
        Ok(unsafe { base.add(loc.off) })
    }

    /// The address of `bytes` bytes at `loc`, for writing.
    ///
    /// Errors: [`Error::Internal`] when the range leaves its buffer or lies in the input.
    pub(super) fn dst(&mut self, loc: Loc, bytes: usize) -> Result<*mut u8> {
        let (base, len) = match loc.buf {
            Buf::Input => return Err(Error::Internal("a plan writes into the send buffer".into())),
            Buf::Output => (self.output.ptr, self.output.len),
            Buf::Scratch => (self.scratch.as_mut_ptr(), self.scratch.len()),
        };
        check(loc, bytes, len)?;
        // SAFETY: loc.off + bytes <= len, checked above.
        Ok(unsafe { base.add(loc.off) })
    }
}

fn check(loc: Loc, bytes: usize, len: usize) -> Result<()> {
    if loc.off.checked_add(bytes).is_none_or(|end| end > len) {
        return Err(Error::Internal(format!(
            "plan step reaches {loc:?}+{bytes} past a {len}-byte buffer"
        )));
    }
    Ok(())
}
