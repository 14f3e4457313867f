//! The bootstrap root: collects every rank's check-in for one rendezvous, then sends each rank
//! the whole peer table (or, at its deadline, the list of ranks that never arrived).
//!
//! Each accepted connection is read by its own short-lived thread with a read timeout, so a
//! client that sends garbage or nothing delays no one: a wrong magic, an unknown frame or a
//! malformed body drops that connection and the rendezvous goes on. A check-in that cannot be
//! part of the job (another communicator size, a rank out of range, a rank claimed twice) fails
//! the whole rendezvous at once: every rank that checked in, and every rank that checks in
//! during a short grace period after, is told why, instead of waiting out its timeout. A root
//! that knows its job (rank 0 runs it for an id naming the job) refuses a check-in naming
//! another job, or none: that rank is told which two jobs met at the address, and the
//! rendezvous of the root's own job goes on.

use std::collections::BTreeMap;
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

use super::wire::{HelloKind, MAX_HELLO, read_hello, write_hello};
use super::{PeerInfo, far_end_gone};
use crate::error::{Error, Result};

/// A rank's check-in.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct CheckIn {
    /// The rank checking in.
    pub rank: u32,
    /// The communicator size it was given.
    pub nranks: u32,
    /// Its addresses and identity.
    pub info: PeerInfo,
    /// The job it belongs to, as its unique id names it ([`super::UniqueId::job`]).
    #[serde(default)]
    pub job: Option<String>,
}

/// What a connection tells the root.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) enum ToRoot {
    /// A rank checks in (boxed: far larger than the other variant).
    CheckIn(Box<CheckIn>),
    /// Whoever started the ranks says the job failed (a rank died before the rendezvous
    /// completed): the rendezvous fails with this text.
    Abort(String),
}

/// The root's answer.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) enum RootReply {
    /// Every rank's info, indexed by rank.
    Peers(Vec<PeerInfo>),
    /// The rendezvous failed for this rank; the text says why.
    Refused(String),
    /// A rank died or the launcher gave up before the rendezvous completed; the text says which.
    Failed(String),
    /// The deadline passed: these ranks never arrived.
    Missing {
        /// Ranks that never checked in.
        missing: Vec<u32>,
        /// How many checked in.
        joined: u32,
        /// The communicator size.
        nranks: u32,
        /// Seconds the root waited.
        waited_s: f64,
    },
}

/// Starts the root on `listener` in a detached thread that serves one rendezvous of `job`
/// (`None`: any rank presenting `magic` may join).
///
/// Errors: [`Error::System`] when the listener cannot be made non-blocking or the thread fails
/// to start.
/// The returned handle lets a rank that hosts the root wait until the root has answered every
/// rank before its process exits.
pub(crate) fn spawn(
    listener: TcpListener,
    magic: u64,
    timeout: Duration,
    job: Option<String>,
) -> Result<std::thread::JoinHandle<()>> {
    listener
        .set_nonblocking(true)
        .map_err(|e| Error::system("configuring the bootstrap root socket", e))?;
    std::thread::Builder::new()
        .name("rnccl-root".into())
        .spawn(move || serve(listener, magic, timeout, job))
        .map_err(|e| Error::system("starting the bootstrap root thread", e))
}

/// How long a failed rendezvous keeps refusing late check-ins before the root exits.
const FAILED_GRACE: Duration = Duration::from_secs(3);

fn serve(listener: TcpListener, magic: u64, timeout: Duration, job: Option<String>) {
    let start = Instant::now();
    let mut deadline = start + timeout;
    let (tx, rx) = mpsc::channel::<(TcpStream, ToRoot)>();
    let mut joined: BTreeMap<u32, (TcpStream, PeerInfo)> = BTreeMap::new();
    let mut nranks: Option<(u32, u32)> = None;
    // Why the rendezvous failed, and the reply late check-ins get.
    let mut failed: Option<RootReply> = None;
    loop {
        while let Ok((stream, peer)) = listener.accept() {
            let tx = tx.clone();
            let read_for = deadline
                .saturating_duration_since(Instant::now())
                .clamp(Duration::from_millis(100), Duration::from_secs(30));
            let _ = std::thread::Builder::new().name("rnccl-root-in".into()).spawn(move || {
                let mut stream = stream;
                let _ = stream.set_nonblocking(false);
                let _ = stream.set_read_timeout(Some(read_for));
                match read_hello::<ToRoot>(&mut stream, magic, HelloKind::RootCheckIn, MAX_HELLO) {
                    Ok(c) => {
                        let _ = tx.send((stream, c));
                    }
                    Err(e) => tracing::debug!(target: "rnccl::bootstrap", "root dropped a connection from {peer}: {e}"),
                }
            });
        }
        // A rank that checked in and then went away (killed, exited) can never complete the
        // rendezvous: fail it now rather than at the deadline.
        let left = joined
            .iter()
            .find_map(|(_, (s, info))| far_end_gone(s).map(|how| (info.clone(), how)));
        if failed.is_none()
            && let Some((info, how)) = left
        {
            let why = format!(
                "{} {how} before every rank had joined the rendezvous (it exited or was killed)",
                info.describe()
            );
            let reply = RootReply::Failed(why);
            fail(&mut joined, magic, &reply);
            deadline = deadline.min(Instant::now() + FAILED_GRACE);
            failed = Some(reply);
        }
        while let Ok((mut stream, message)) = rx.try_recv() {
            let c = match message {
                ToRoot::CheckIn(c) => *c,
                ToRoot::Abort(why) => {
                    if failed.is_none() {
                        let reply = RootReply::Failed(why);
                        fail(&mut joined, magic, &reply);
                        deadline = deadline.min(Instant::now() + FAILED_GRACE);
                        failed = Some(reply);
                    }
                    continue;
                }
            };
            if let Some(own) = &job
                && c.job.as_ref() != Some(own)
            {
                let why = stranger(&c, own, &listener);
                tracing::warn!(target: "rnccl::bootstrap", "{why}");
                let _ = write_hello(
                    &mut stream,
                    magic,
                    HelloKind::RootReply,
                    &RootReply::Refused(why),
                );
                continue;
            }
            let (n, first) = *nranks.get_or_insert((c.nranks, c.rank));
            if let Some(reply) = &failed {
                let _ = write_hello(&mut stream, magic, HelloKind::RootReply, reply);
                continue;
            }
            let refuse = if c.nranks != n {
                Some(format!(
                    "rank {} ({} pid {}) says nranks={} but rank {first} said nranks={n}: start \
                     every rank with the same communicator size (WORLD_SIZE, -np, --ntasks)",
                    c.rank, c.info.hostname, c.info.pid, c.nranks
                ))
            } else if c.rank >= n {
                Some(format!(
                    "rank {} is out of range for nranks={n} (ranks are 0..{})",
                    c.rank,
                    n.saturating_sub(1)
                ))
            } else if let Some((_, first)) = joined.get(&c.rank) {
                Some(format!(
                    "rank {} already joined from host {} pid {}; this process (host {} pid {}) claims the same rank",
                    c.rank, first.hostname, first.pid, c.info.hostname, c.info.pid
                ))
            } else {
                None
            };
            match refuse {
                Some(msg) => {
                    let reply = RootReply::Refused(msg);
                    let _ = write_hello(&mut stream, magic, HelloKind::RootReply, &reply);
                    fail(&mut joined, magic, &reply);
                    deadline = deadline.min(Instant::now() + FAILED_GRACE);
                    failed = Some(reply);
                }
                None => {
                    joined.insert(c.rank, (stream, c.info));
                }
            }
        }
        if failed.is_some() {
            if Instant::now() >= deadline {
                return;
            }
        } else if let Some((n, _)) = nranks
            && joined.len() == n as usize
        {
            let table: Vec<PeerInfo> = joined.values().map(|(_, i)| i.clone()).collect();
            let reply = RootReply::Peers(table);
            for (_, (mut s, _)) in joined {
                let _ = s.set_write_timeout(Some(Duration::from_secs(30)));
                let _ = write_hello(&mut s, magic, HelloKind::RootReply, &reply);
            }
            return;
        }
        if failed.is_none() && Instant::now() >= deadline {
            let n = nranks.map_or(0, |(n, _)| n);
            let missing: Vec<u32> = (0..n).filter(|r| !joined.contains_key(r)).collect();
            let reply = RootReply::Missing {
                missing,
                joined: joined.len() as u32,
                nranks: n,
                waited_s: start.elapsed().as_secs_f64(),
            };
            for (_, (mut s, _)) in joined {
                let _ = s.set_write_timeout(Some(Duration::from_secs(5)));
                let _ = write_hello(&mut s, magic, HelloKind::RootReply, &reply);
            }
            return;
        }
        let mut fds = [PollFd::new(listener.as_fd(), PollFlags::POLLIN)];
        let _ = poll(&mut fds, PollTimeout::from(20u16));
    }
}

/// Why check-in `c`, of another job than `own`, may not join the rendezvous on `listener`.
fn stranger(c: &CheckIn, own: &str, listener: &TcpListener) -> String {
    let theirs = c
        .job
        .as_deref()
        .map_or("a job without a launcher job id".to_string(), |j| {
            format!("job {j}")
        });
    let at = listener
        .local_addr()
        .map_or(String::new(), |a| format!(" at {a}"));
    format!(
        "{} of {theirs} reached the rendezvous of job {own}{at}: two jobs use one rendezvous \
         address, and a rank of another job is never let in; give each job its own \
         NCCL_COMM_ID (or MASTER_ADDR:MASTER_PORT)",
        c.info.describe()
    )
}

/// The job cannot complete: tells every rank waiting in the rendezvous why.
fn fail(joined: &mut BTreeMap<u32, (TcpStream, PeerInfo)>, magic: u64, reply: &RootReply) {
    for (_, (mut s, _)) in std::mem::take(joined) {
        let _ = s.set_write_timeout(Some(Duration::from_secs(5)));
        let _ = write_hello(&mut s, magic, HelloKind::RootReply, reply);
    }
}

/// Names a list of ranks compactly ("rank 3", "ranks 2, 5 and 7", "ranks 4-9").
pub(crate) fn name_ranks(ranks: &[u32]) -> String {
    match ranks {
        [] => "no rank".into(),
        [r] => format!("rank {r}"),
        _ if ranks.windows(2).all(|w| w[1] == w[0] + 1) && ranks.len() > 3 => {
            format!("ranks {}-{}", ranks[0], ranks[ranks.len() - 1])
        }
        _ => {
            let shown: Vec<String> = ranks.iter().take(16).map(u32::to_string).collect();
            let more = if ranks.len() > 16 {
                format!(" and {} more", ranks.len() - 16)
            } else {
                String::new()
            };
            format!("ranks {}{more}", shown.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::name_ranks;

    #[test]
    fn rank_lists_read_well() {
        assert_eq!(name_ranks(&[3]), "rank 3");
        assert_eq!(name_ranks(&[2, 5, 7]), "ranks 2, 5, 7");
        assert_eq!(name_ranks(&[4, 5, 6, 7, 8, 9]), "ranks 4-9");
    }
}
