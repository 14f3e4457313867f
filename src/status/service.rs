//! The process's status service: a thread answering status queries about the communicators
//! this process publishes (NCCL RAS's role), on a TCP port of the bootstrap interface, and
//! logging the hang reports ranks of its jobs send. It only reads counters the collectives keep
//! anyway, so querying never disturbs a job.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::OnceLock;
use std::time::Duration;

use super::wire::{CommStatus, LinkStatus, MAX_REQUEST, OpNow, ProcessStatus, Request, VERSION};
use crate::stats::page::publisher::registered;

/// How long a client may take to send its request or read the answer.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(2);

static SERVICE: OnceLock<Option<SocketAddr>> = OnceLock::new();

/// Starts the process's service on `ip` (port chosen by the kernel) the first time, and returns
/// its address; later calls return the first one's. `None` when it could not start (a rank
/// still works; only status queries and hang reports go without it).
pub(crate) fn start(ip: IpAddr) -> Option<SocketAddr> {
    *SERVICE.get_or_init(|| {
        let listener = TcpListener::bind(SocketAddr::new(ip, 0)).ok()?;
        let addr = listener.local_addr().ok()?;
        std::thread::Builder::new()
            .name("rnccl-status".into())
            .spawn(move || serve(&listener))
            .ok()?;
        tracing::info!(target: "rnccl::init", "Status: answering on {addr} (rnccl status {addr})");
        crate::stats::page::announce_status(addr);
        Some(addr)
    })
}

/// The address the process's status service answers on, once started.
pub fn address() -> Option<SocketAddr> {
    SERVICE.get().copied().flatten()
}

fn serve(listener: &TcpListener) {
    for conn in listener.incoming() {
        let Ok(s) = conn else {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        let _ = answer(s);
    }
}

/// Reads one request and answers it.
fn answer(mut s: TcpStream) -> std::io::Result<()> {
    s.set_read_timeout(Some(CLIENT_TIMEOUT))?;
    s.set_write_timeout(Some(CLIENT_TIMEOUT))?;
    let mut line = String::new();
    BufReader::new((&s).take(MAX_REQUEST as u64)).read_line(&mut line)?;
    let reply = match serde_json::from_str::<Request>(&line) {
        Ok(Request::Query) => serde_json::to_string(&status_now()).unwrap_or_default(),
        Ok(Request::Report { magic, text }) => {
            let ours = magic != 0 && registered().iter().any(|c| c.magic() == Some(magic));
            if ours {
                tracing::warn!(target: "rnccl::status", "hang report from a rank of this job: {text}");
            }
            format!("{{\"logged\":{ours}}}")
        }
        Err(e) => format!("{{\"error\":{:?}}}", e.to_string()),
    };
    s.write_all(reply.as_bytes())?;
    s.write_all(b"\n")
}

/// This process's communicators now.
pub(crate) fn status_now() -> ProcessStatus {
    let comms = registered()
        .iter()
        .map(|c| {
            let meta = c.meta();
            let op = c.op();
            CommStatus {
                comm_id: meta.comm_id,
                rank: meta.rank,
                nranks: meta.nranks,
                device: meta.device,
                ops_started: op.started_seq(),
                ops_completed: op.completed(),
                op: op.snapshot().map(|o| OpNow {
                    seq: o.info.seq,
                    func: o.info.func,
                    count: o.info.count,
                    dtype: o.info.dtype,
                    algo: o.info.algo.to_string(),
                    elapsed_s: o.elapsed_s,
                    steps_total: o.steps_total,
                    steps_done: o.steps_done,
                }),
                links: c
                    .links()
                    .into_iter()
                    .map(|l| LinkStatus {
                        peer: l.peer,
                        channel: l.channel,
                        direction: l.direction,
                        transport: l.transport,
                        bytes: l.bytes,
                        wait_s: l.wait_ns as f64 / 1e9,
                        stalled_s: l.stalled_ns as f64 / 1e9,
                    })
                    .collect(),
                history: op.history(),
                peers: c.peers(),
            }
        })
        .collect();
    ProcessStatus {
        version: VERSION,
        pid: std::process::id(),
        host: crate::os::host::short_hostname(),
        comms,
    }
}
