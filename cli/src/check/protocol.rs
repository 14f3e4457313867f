//! What `rnccl check` and its workers say to each other over the remote command's standard
//! input and output, one JSON message per line. The worker's lines start with [`MARK`], so
//! anything else a remote shell prints (a login banner, a profile's echo) is told apart and
//! shown as the host's output.
//!
//! The conversation: the coordinator sends [`ToWorker::Setup`] at once; the worker answers
//! [`FromWorker::Hello`] with its rank count. Once every host answered (or failed to within
//! the connect timeout), the first host gets [`ToWorker::Start`] without an id, opens the
//! world's rendezvous and answers [`FromWorker::Id`]; the others get `Start` with that id.
//! World rank 0's worker then streams [`FromWorker::Event`]s; every worker exits with 0 once
//! its ranks are done. A worker whose standard input closes (the coordinator went away) stops
//! at once.

use serde::{Deserialize, Serialize};

use super::plan::Plan;

/// The prefix of every protocol line a worker prints.
pub const MARK: &str = "@rnccl-check ";

/// From the coordinator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "msg", rename_all = "snake_case")]
pub enum ToWorker {
    /// What to do.
    Setup {
        /// The coordinator's rnccl version (the wire format is that version's).
        version: String,
        /// The host's name in the list (the worker's ranks are named after it).
        host: String,
        /// CPU ranks even where there are GPUs.
        cpu: bool,
        /// Ranks on the host; `None`: one per GPU, or one CPU rank.
        ranks_per_host: Option<usize>,
        /// NCCL_* and RNCCL_* values the user set for the coordinator, applied where the host
        /// does not set them in its own environment.
        knobs: Vec<(String, String)>,
        /// The measurements.
        plan: Plan,
        /// Seconds within which [`ToWorker::Start`] follows (else the worker gives up).
        start_within_s: u64,
    },
    /// Join the world.
    Start {
        /// The world's unique id; `None` asks this worker to open the rendezvous.
        id: Option<String>,
        /// This worker's first world rank (its ranks are consecutive).
        first_rank: usize,
        /// Ranks in the world.
        nranks: usize,
    },
}

/// From a worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "msg", rename_all = "snake_case")]
pub enum FromWorker {
    /// Ready.
    Hello {
        /// The worker's rnccl version.
        version: String,
        /// Its ranks.
        ranks: usize,
    },
    /// The world's unique id, from the worker that opened the rendezvous.
    Id {
        /// The id (`rnccl:<magic>@<addr>:<port>`).
        id: String,
    },
    /// Something world rank 0 saw.
    Event(rnccl::check::Event),
}

/// `msg` as a protocol line (without the newline).
///
/// Errors: serialisation failures (none expected for these types).
pub fn line<T: Serialize>(msg: &T) -> anyhow::Result<String> {
    Ok(format!("{MARK}{}", serde_json::to_string(msg)?))
}

/// A worker's protocol line read back; `None` for a line without [`MARK`] (host output).
///
/// Errors: a marked line that does not parse (another rnccl version).
pub fn parse_from_worker(line: &str) -> anyhow::Result<Option<FromWorker>> {
    let Some(json) = line.strip_prefix(MARK) else {
        return Ok(None);
    };
    serde_json::from_str(json).map(Some).map_err(|e| {
        anyhow::anyhow!("unreadable message ({e}): run the same rnccl version on every host")
    })
}

/// A coordinator's line read back by a worker.
///
/// Errors: a line without [`MARK`] or that does not parse (another rnccl version).
pub fn parse_to_worker(line: &str) -> anyhow::Result<ToWorker> {
    let json = line
        .strip_prefix(MARK)
        .ok_or_else(|| anyhow::anyhow!("{line:?} is not from an rnccl check coordinator"))?;
    serde_json::from_str(json).map_err(|e| {
        anyhow::anyhow!("unreadable message ({e}): run the same rnccl version on every host")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip() {
        let m = FromWorker::Hello {
            version: "1".into(),
            ranks: 2,
        };
        let l = line(&m).unwrap();
        assert!(l.starts_with(MARK) && !l.contains('\n'));
        assert_eq!(parse_from_worker(&l).unwrap(), Some(m));
        assert_eq!(parse_from_worker("Welcome to node7").unwrap(), None);
        assert!(parse_from_worker("@rnccl-check {").is_err());
    }
}
