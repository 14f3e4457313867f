//! What a status service says and is asked, as JSON lines: one request, one answer, then the
//! connection closes.

use serde::{Deserialize, Serialize};

use crate::dtype::DataType;
use crate::func::Func;
use crate::stats::{Direction, OpRecord, Path};

/// The layout version of [`ProcessStatus`]; a client refuses another.
pub const VERSION: u32 = 1;

/// Bytes of a request at most (a hang report included).
pub(crate) const MAX_REQUEST: usize = 64 << 10;

/// What a client asks.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) enum Request {
    /// The process's communicators, as [`ProcessStatus`].
    Query,
    /// A rank's hang report, for this process's NCCL_DEBUG log: accepted only from a rank of a
    /// job this process runs (`magic` is the job's, from its unique id, which outsiders do not
    /// know).
    Report {
        /// The job's magic.
        magic: u64,
        /// The report.
        text: String,
    },
}

/// One process's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessStatus {
    /// [`VERSION`].
    pub version: u32,
    /// Its pid.
    pub pid: u32,
    /// Its host's short name.
    pub host: String,
    /// Its communicator ranks.
    pub comms: Vec<CommStatus>,
}

/// One communicator rank of a process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommStatus {
    /// The communicator's id, the same on all its ranks.
    pub comm_id: u64,
    /// This rank.
    pub rank: usize,
    /// Ranks of the communicator.
    pub nranks: usize,
    /// CUDA device ordinal, `None` for host memory.
    pub device: Option<usize>,
    /// Sequence number of the last operation started (0 before the first).
    pub ops_started: u64,
    /// Operations finished (failed ones included).
    pub ops_completed: u64,
    /// The operation in flight.
    pub op: Option<OpNow>,
    /// Every link's counters.
    pub links: Vec<LinkStatus>,
    /// The last operations, oldest first.
    pub history: Vec<OpRecord>,
    /// Every rank of the communicator: where it runs and its status service.
    pub peers: Vec<StatusPeer>,
}

/// The operation in flight on a rank.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpNow {
    /// Sequence number.
    pub seq: u64,
    /// The function.
    pub func: Func,
    /// NCCL count (elements).
    pub count: usize,
    /// Element type.
    pub dtype: DataType,
    /// NCCL_ALGO's name of the algorithm.
    pub algo: String,
    /// Seconds since it started.
    pub elapsed_s: f64,
    /// Steps this rank runs, and those done.
    pub steps_total: u64,
    /// Steps done.
    pub steps_done: u64,
}

/// One link of a rank.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkStatus {
    /// The peer.
    pub peer: usize,
    /// The channel.
    pub channel: u16,
    /// Which way it carries data.
    pub direction: Direction,
    /// How.
    pub transport: Path,
    /// Payload bytes so far.
    pub bytes: u64,
    /// Seconds operations waited on it so far, the wait in progress included.
    pub wait_s: f64,
    /// Seconds the wait in progress has lasted, 0 when none.
    pub stalled_s: f64,
}

/// A rank of a communicator, as its peers know it (defined with the counter page, whose
/// communicators list their ranks).
pub use crate::stats::page::StatusPeer;
