//! Asking status services: one process, or a whole job (the processes given, then every rank
//! their communicators name, on any host), each within a deadline, so a stopped or hung
//! process is reported as not answering instead of stopping the query.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use super::wire::{ProcessStatus, Request, VERSION};

/// Answers at most this large are refused (a process of many large communicators stays far
/// below).
const MAX_ANSWER: u64 = 64 << 20;
/// Processes asked at once.
const PARALLEL: usize = 64;

/// Why a process's status could not be had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StatusError {
    /// Nothing listens there (the process is gone, or the address is wrong).
    #[error(
        "nothing answers at {addr} ({why}): the process is gone, or the address is not a rank's status service"
    )]
    Unreachable {
        /// The address.
        addr: SocketAddr,
        /// The system's reason.
        why: String,
    },
    /// It accepted the connection but did not answer in time (stopped, or hung in the kernel).
    #[error("{addr} did not answer within {after:?}: its process is stopped or hung")]
    Silent {
        /// The address.
        addr: SocketAddr,
        /// How long the client waited.
        after: Duration,
    },
    /// It answered something that is not a status (another program, or another rnccl).
    #[error(
        "{addr} answered something that is not an rnccl status ({why}): run the same rnccl version there"
    )]
    Malformed {
        /// The address.
        addr: SocketAddr,
        /// What was wrong.
        why: String,
    },
}

/// Asks the status service at `addr`, waiting at most `timeout` for each step.
///
/// Errors: [`StatusError`] saying why there is no answer.
pub fn query(addr: SocketAddr, timeout: Duration) -> Result<ProcessStatus, StatusError> {
    let text = exchange(addr, &Request::Query, timeout)?;
    let status: ProcessStatus =
        serde_json::from_str(&text).map_err(|e| StatusError::Malformed {
            addr,
            why: e.to_string(),
        })?;
    if status.version != VERSION {
        return Err(StatusError::Malformed {
            addr,
            why: format!(
                "layout version {}, this rnccl reads {VERSION}",
                status.version
            ),
        });
    }
    Ok(status)
}

/// Sends `text` (a hang report of the job whose magic is `magic`) to the status service at
/// `addr`, which writes it to its NCCL_DEBUG log if it runs a rank of that job. Best effort.
pub(crate) fn send_report(addr: SocketAddr, magic: u64, text: &str, timeout: Duration) {
    let req = Request::Report {
        magic,
        text: text.chars().take(super::wire::MAX_REQUEST / 2).collect(),
    };
    let _ = exchange(addr, &req, timeout);
}

/// One request, one answer line.
fn exchange(addr: SocketAddr, req: &Request, timeout: Duration) -> Result<String, StatusError> {
    let mut s = TcpStream::connect_timeout(&addr, timeout).map_err(|e| {
        if e.kind() == std::io::ErrorKind::TimedOut {
            StatusError::Silent {
                addr,
                after: timeout,
            }
        } else {
            StatusError::Unreachable {
                addr,
                why: e.to_string(),
            }
        }
    })?;
    let silent = |_| StatusError::Silent {
        addr,
        after: timeout,
    };
    s.set_read_timeout(Some(timeout)).map_err(silent)?;
    s.set_write_timeout(Some(timeout)).map_err(silent)?;
    let mut line = serde_json::to_string(req).map_err(|e| StatusError::Malformed {
        addr,
        why: e.to_string(),
    })?;
    line.push('\n');
    s.write_all(line.as_bytes()).map_err(silent)?;
    let mut answer = String::new();
    BufReader::new((&s).take(MAX_ANSWER))
        .read_line(&mut answer)
        .map_err(silent)?;
    if answer.is_empty() {
        return Err(StatusError::Silent {
            addr,
            after: timeout,
        });
    }
    Ok(answer)
}

/// A job's processes as their status services answered, or why they did not.
#[derive(Debug, Clone, PartialEq)]
pub struct JobStatus {
    /// Every process asked: its address and its answer.
    pub processes: Vec<(SocketAddr, Result<ProcessStatus, StatusError>)>,
}

/// Asks the processes at `start`, then every status service their communicators name, until
/// no new one turns up; each within `timeout`, many at once.
pub fn job(start: &[SocketAddr], timeout: Duration) -> JobStatus {
    let mut asked: BTreeSet<SocketAddr> = BTreeSet::new();
    let mut processes = Vec::new();
    let mut next: Vec<SocketAddr> = start.to_vec();
    while !next.is_empty() {
        next.retain(|a| asked.insert(*a));
        let answers: Vec<_> = next
            .chunks(PARALLEL)
            .flat_map(|batch| {
                std::thread::scope(|s| {
                    let handles: Vec<_> = batch
                        .iter()
                        .map(|&a| s.spawn(move || (a, query(a, timeout))))
                        .collect();
                    handles
                        .into_iter()
                        .filter_map(|h| h.join().ok())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        next = answers
            .iter()
            .filter_map(|(_, r)| r.as_ref().ok())
            .flat_map(|p| p.comms.iter().flat_map(|c| c.peers.iter()))
            .filter_map(|p| p.status)
            .filter(|a| !asked.contains(a))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        processes.extend(answers);
    }
    JobStatus { processes }
}
