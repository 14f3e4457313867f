//! What a kernel computes, independent of the backend that runs it: the reduction resolved for
//! one data type ([`ReduceSpec`]), which of its transforms a call applies ([`Transforms`]), and
//! which destinations will not be read back soon ([`Streams`]).

use crate::dtype::DataType;
use crate::redop::{Combine, Lowered, Scalar};

/// What a kernel computes, resolved for one data type (see [`crate::redop::RedOp::lower`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct ReduceSpec {
    /// Element type.
    pub dtype: DataType,
    /// The binary operation.
    pub combine: Combine,
    /// Scalar multiplied into the `b` operand (the local input) before combining.
    pub pre: Option<Scalar>,
    /// Divisor applied to the result (integer average).
    pub post_div: Option<u64>,
}

impl ReduceSpec {
    /// The spec for `dtype` and a lowered operation.
    pub(crate) fn new(dtype: DataType, lowered: Lowered) -> ReduceSpec {
        ReduceSpec {
            dtype,
            combine: lowered.combine,
            pre: lowered.pre,
            post_div: lowered.post_div,
        }
    }

    /// A spec that only moves data (sum with no transforms, used for plain copies).
    pub(crate) fn copy(dtype: DataType) -> ReduceSpec {
        ReduceSpec {
            dtype,
            combine: Combine::Sum,
            pre: None,
            post_div: None,
        }
    }
}

/// Which transforms a kernel call applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Transforms {
    /// Apply the spec's `pre` scalar to the `b`/source operand.
    pub pre: bool,
    /// Apply the spec's `post_div` to the result.
    pub post: bool,
}

/// Which destinations of a kernel call will not be read back soon, so a backend may write them
/// past its caches (the CPU backend uses streaming stores).
///
/// The output streams once it no longer fits in the caches (the CPU backend's
/// `STREAM_THRESHOLD`). A memory-FIFO slot streams when [`crate::exec::host::SlotStores`] finds that
/// faster for the operation's size: the reader then fetches the slot from memory instead of from
/// the writer's cache, which wins when the two cores sit in different cache domains (a C slot
/// FIFO on the reference VM, 16 MiB each way: 2.1 GB/s per direction cached against 3.7
/// streamed; 3.9 against 3.2 when they share one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Streams {
    /// Stream the first destination.
    pub d0: bool,
    /// Stream the second destination.
    pub d1: bool,
}

impl Streams {
    /// Whether any destination that exists streams.
    pub(crate) fn any(self, d1: Option<*mut u8>) -> bool {
        self.d0 || (self.d1 && d1.is_some())
    }
}
