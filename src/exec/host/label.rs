//! How an operation (or a fused group of Send/Recv) is named in errors: formatted only when an
//! error is reported, never on the fast path.

use crate::coll::{Algo, CollArgs};
use crate::stats::OpInfo;

/// "AllReduce #12 (1048576 × float32, Ring)", or a group of Send/Recv.
#[derive(Debug, Clone, Copy)]
pub(super) struct Label {
    pub args: CollArgs,
    pub seq: u64,
    pub algo: Algo,
    /// Channels the plan uses.
    pub nchannels: usize,
    /// Operations fused into the phase.
    pub ops: usize,
}

impl Label {
    /// What the live counters show for this phase, running directly over windows or not.
    pub(super) fn info(&self, direct: bool) -> OpInfo {
        OpInfo {
            seq: self.seq,
            func: self.args.func,
            count: self.args.count,
            dtype: self.args.dtype,
            fused: self.ops,
            algo: self.algo.nccl_name(),
            nchannels: self.nchannels,
            direct,
        }
    }
}

impl std::fmt::Display for Label {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let one = describe_op(&self.args, self.seq, self.algo.nccl_name());
        if self.ops > 1 {
            write!(f, "group of {} Send/Recv ({one} …)", self.ops)
        } else {
            f.write_str(&one)
        }
    }
}

/// How an operation is named in messages: "AllReduce #12 (1048576 × float32, Ring)".
fn describe_op(args: &CollArgs, seq: u64, algo: &str) -> String {
    format!(
        "{} #{seq} ({} × {}, {algo})",
        args.func.nccl_name(),
        args.count,
        args.dtype
    )
}
