//! The active tests: RDMA write bandwidth and latency between two ports, by perftest's method
//! (linux-rdma/perftest `ib_write_bw`, `ib_write_lat`): bandwidth = `iters` writes of `size`
//! bytes into the peer's registered buffer with up to `tx_depth` in flight, bytes over the time
//! from the first post to the last completion, in Gb/s (`--report_gbits`) and MiB/s (perftest's
//! `MB/sec`); latency = ping-pong of `lat_size`-byte writes with immediate, half the round trip,
//! as min / median / p99 / p99.9 / max in µs. The verdict compares the bandwidth with the link's
//! rate: 90 % or more passes (NGC multinode certification), 80-90 % warns, less fails.
//!
//! Two local ports run in one process ([`run_local`]); another host runs `rnccl ibcheck
//! --serve` ([`serve`]) and this one connects to it ([`run_peer`]) over a TCP control
//! connection that carries the queue-pair addresses as JSON lines. Every wait has a deadline.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::{Check, Verdict};
use crate::ib::Provider;
use crate::ib::endpoint::{PortHandle, QpAddr};
use crate::ib::params::IbParams;
use crate::ib::rate::verbs_rate_gbps;
use crate::ib::verbs::{
    Completion, Cq, Mr, Qp, QpCaps, SendOp, SendWr, Verbs, VerbsError, WcOpcode, WcStatus,
};

/// Why a test could not run.
#[derive(Debug, thiserror::Error)]
pub enum PerfError {
    /// A verb failed.
    #[error(transparent)]
    Verbs(#[from] VerbsError),
    /// A work request completed in error.
    #[error("{what} between {from} and {to} failed: {}", status.meaning())]
    Completion {
        /// What was running.
        what: &'static str,
        /// Local port.
        from: String,
        /// Remote port.
        to: String,
        /// The status.
        status: WcStatus,
    },
    /// A wait passed its deadline.
    #[error("{0} did not finish within {1:?}")]
    Timeout(String, Duration),
    /// The control connection failed or carried something unexpected.
    #[error("control connection with {peer}: {message}")]
    Control {
        /// The peer.
        peer: String,
        /// What went wrong.
        message: String,
    },
}

/// What to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PerfSpec {
    /// Bytes per bandwidth write (`-s`, perftest's default 65536; 8 MiB for line rate).
    pub size: usize,
    /// Bandwidth writes (`-n`).
    pub iters: usize,
    /// Writes in flight (`-t`, 128).
    pub tx_depth: usize,
    /// Bytes per latency write (2, as ib_write_lat).
    pub lat_size: usize,
    /// Latency round trips.
    pub lat_iters: usize,
    /// Bound on the whole test.
    pub timeout: Duration,
}

impl Default for PerfSpec {
    fn default() -> PerfSpec {
        PerfSpec {
            size: 8 << 20,
            iters: 1000,
            tx_depth: 128,
            lat_size: 2,
            lat_iters: 1000,
            timeout: Duration::from_secs(60),
        }
    }
}

/// Latency percentiles, µs (half round trip).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Latency {
    /// Smallest.
    pub min: f64,
    /// Median.
    pub median: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Largest.
    pub max: f64,
}

/// One pair's results.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairResult {
    /// Sending port (`mlx5_0:1`).
    pub from: String,
    /// Receiving port (`mlx5_1:1`, or `host:mlx5_0:1`).
    pub to: String,
    /// Where the buffers live (`host`).
    pub memory: &'static str,
    /// Bytes per write.
    pub size: usize,
    /// Writes.
    pub iters: usize,
    /// Bandwidth, Gb/s (1e9 bit/s).
    pub bw_gbps: f64,
    /// Bandwidth, MiB/s (ib_write_bw's `MB/sec`).
    pub bw_mibs: f64,
    /// The slower link's rate, Gb/s.
    pub link_gbps: Option<f64>,
    /// Latency.
    pub latency: Latency,
    /// The verdict.
    pub check: Check,
}

/// Every pair tested, and the tests that could not run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PerfReport {
    /// Results.
    pub results: Vec<PairResult>,
    /// Failures, as checks.
    pub failures: Vec<Check>,
}

impl PerfReport {
    /// 2 on a failed or slow test, 1 on a warning with `strict`, else 0.
    pub fn exit_code(&self, strict: bool) -> u8 {
        let worst = self
            .results
            .iter()
            .map(|r| r.check.verdict)
            .chain(self.failures.iter().map(|c| c.verdict))
            .max()
            .unwrap_or(Verdict::Ok);
        match worst {
            Verdict::Error => 2,
            Verdict::Warning if strict => 1,
            _ => 0,
        }
    }
}

/// One side: a queue pair on a port and a registered buffer.
struct Side {
    port: PortHandle,
    // Field order is drop order: the QP goes before its CQ, the region before the buffer.
    qp: Box<dyn Qp>,
    cq: Arc<dyn Cq>,
    mr: Box<dyn Mr>,
    _buf: Vec<u8>,
}

/// What the peer needs: its queue pair address and the buffer to write into.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct SideInfo {
    qp: QpAddr,
    addr: u64,
    rkey: u32,
}

impl Side {
    fn new(port: PortHandle, bytes: usize, depth: usize) -> Result<Side, VerbsError> {
        let mut buf = vec![0u8; bytes.max(64)];
        // SAFETY: the Vec's heap buffer stays put when the Vec moves into the Side, which drops
        // the region before the buffer (field order), as does this function on an early return
        // (locals drop in reverse order).
        let mr = unsafe { port.pd.reg_mr(buf.as_mut_ptr(), buf.len()) }?;
        let cq = port.pd.create_cq(depth * 2 + 16)?;
        let qp = port.pd.create_qp(
            &cq,
            QpCaps {
                max_send_wr: depth as u32 + 1,
                max_recv_wr: depth as u32 + 1,
            },
        )?;
        Ok(Side {
            port,
            qp,
            cq,
            mr,
            _buf: buf,
        })
    }

    fn info(&self) -> SideInfo {
        SideInfo {
            qp: self.port.addr(self.qp.qpn()),
            addr: self.mr.addr(),
            rkey: self.mr.rkey(),
        }
    }

    fn write(&self, remote: &SideInfo, len: usize, op: SendOp, wr_id: u64) -> SendWr {
        SendWr {
            wr_id,
            op,
            addr: self.mr.addr(),
            len: len as u32,
            lkey: self.mr.lkey(),
            remote_addr: remote.addr,
            rkey: remote.rkey,
            signaled: true,
        }
    }

    /// Polls until `want` completions (of any kind) arrived, handing each to `f`.
    fn drain(
        &self,
        want: usize,
        until: Instant,
        what: &'static str,
        to: &str,
        mut f: impl FnMut(&Completion),
    ) -> Result<(), PerfError> {
        let mut got = 0;
        let mut v = Vec::with_capacity(16);
        while got < want {
            v.clear();
            self.cq.poll(&mut v, 16)?;
            for c in &v {
                if c.status != WcStatus::Success {
                    return Err(PerfError::Completion {
                        what,
                        from: self.port.label(),
                        to: to.to_string(),
                        status: c.status,
                    });
                }
                f(c);
            }
            got += v.len();
            if v.is_empty() {
                if Instant::now() > until {
                    return Err(PerfError::Timeout(
                        format!("{what} from {} to {to}", self.port.label()),
                        until.saturating_duration_since(Instant::now()),
                    ));
                }
                std::hint::spin_loop();
            }
        }
        Ok(())
    }

    /// ib_write_bw's client loop: returns the elapsed time of `iters` writes.
    fn bandwidth(
        &self,
        remote: &SideInfo,
        spec: &PerfSpec,
        to: &str,
    ) -> Result<Duration, PerfError> {
        let until = Instant::now() + spec.timeout;
        let start = Instant::now();
        let (mut posted, mut done) = (0usize, 0usize);
        while done < spec.iters {
            while posted < spec.iters && posted - done < spec.tx_depth {
                self.qp.post_send(&[self.write(
                    remote,
                    spec.size,
                    SendOp::Write,
                    posted as u64,
                )])?;
                posted += 1;
            }
            let mut n = 0;
            self.drain(1, until, "RDMA write bandwidth", to, |_| n += 1)?;
            done += n;
        }
        Ok(start.elapsed())
    }

    /// ib_write_lat's client: `lat_iters` round trips, each a write with immediate answered by
    /// one from the server.
    fn ping(
        &self,
        remote: &SideInfo,
        spec: &PerfSpec,
        to: &str,
    ) -> Result<Vec<Duration>, PerfError> {
        let until = Instant::now() + spec.timeout;
        let mut rtts = Vec::with_capacity(spec.lat_iters);
        for i in 0..spec.lat_iters {
            self.qp.post_recv(i as u64)?;
            let t = Instant::now();
            self.qp.post_send(&[self.write(
                remote,
                spec.lat_size,
                SendOp::WriteImm(i as u32),
                i as u64,
            )])?;
            let mut answered = false;
            while !answered {
                self.drain(1, until, "RDMA write latency", to, |c| {
                    answered |= c.opcode == WcOpcode::RecvWithImm;
                })?;
            }
            rtts.push(t.elapsed());
        }
        Ok(rtts)
    }

    /// ib_write_lat's server: answers `lat_iters` writes with immediate.
    fn pong(&self, remote: &SideInfo, spec: &PerfSpec, to: &str) -> Result<(), PerfError> {
        let until = Instant::now() + spec.timeout;
        self.qp.post_recv(0)?;
        for i in 0..spec.lat_iters {
            let mut got = false;
            while !got {
                self.drain(1, until, "RDMA write latency", to, |c| {
                    got |= c.opcode == WcOpcode::RecvWithImm;
                })?;
            }
            self.qp.post_recv(i as u64 + 1)?;
            self.qp.post_send(&[self.write(
                remote,
                spec.lat_size,
                SendOp::WriteImm(i as u32),
                i as u64,
            )])?;
        }
        // The last answer's send completion.
        self.drain(1, until, "RDMA write latency", to, |_| {})
    }
}

fn latency(mut rtts: Vec<Duration>) -> Latency {
    rtts.sort();
    let half = |d: &Duration| d.as_secs_f64() * 1e6 / 2.0;
    let at = |q: f64| {
        let i = ((rtts.len() as f64 - 1.0) * q).round() as usize;
        rtts.get(i).map_or(0.0, half)
    };
    Latency {
        min: rtts.first().map_or(0.0, half),
        median: at(0.5),
        p99: at(0.99),
        p999: at(0.999),
        max: rtts.last().map_or(0.0, half),
    }
}

fn result(
    from: &Side,
    to: String,
    remote_rate: Option<f64>,
    spec: &PerfSpec,
    elapsed: Duration,
    rtts: Vec<Duration>,
) -> PairResult {
    let bytes = (spec.size * spec.iters) as f64;
    let secs = elapsed.as_secs_f64().max(1e-9);
    let local = verbs_rate_gbps(from.port.attr.active_width, from.port.attr.active_speed);
    let link = match (local, remote_rate) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let gbps = bytes * 8.0 / secs / 1e9;
    let subject = format!("{} -> {to}", from.port.label());
    let check = match link {
        Some(l) if gbps >= 0.9 * l => Check::ok(
            "bandwidth",
            &subject,
            format!(
                "{gbps:.1} Gb/s, {:.0} % of the {l} Gb/s link",
                100.0 * gbps / l
            ),
        ),
        Some(l) => Check::found(
            "bandwidth",
            &subject,
            if gbps >= 0.8 * l {
                Verdict::Warning
            } else {
                Verdict::Error
            },
            format!(
                "{gbps:.1} Gb/s, {:.0} % of the {l} Gb/s link (90 % expected)",
                100.0 * gbps / l
            ),
            "check the port and PCIe checks above, the CPU frequency governor and NUMA placement (run on the adapter's NUMA node), and the fabric's congestion counters",
        ),
        None => Check::found(
            "bandwidth",
            &subject,
            Verdict::Note,
            format!("{gbps:.1} Gb/s (the link rate is unknown)"),
            "",
        ),
    };
    PairResult {
        from: from.port.label(),
        to,
        memory: "host",
        size: spec.size,
        iters: spec.iters,
        bw_gbps: gbps,
        bw_mibs: bytes / secs / f64::from(1u32 << 20),
        link_gbps: link,
        latency: latency(rtts),
        check,
    }
}

/// Bandwidth and latency from port `a` to port `b` of this host (the same port twice for a
/// loopback).
///
/// Errors: [`PerfError`] naming the ports.
pub fn run_local(
    verbs: &Provider,
    a: (&str, u8),
    b: (&str, u8),
    spec: &PerfSpec,
    params: &IbParams,
) -> Result<PairResult, PerfError> {
    let verbs = &*verbs.0;
    let sa = Side::new(
        PortHandle::open(verbs, a.0, a.1, &params.gid)?,
        spec.size,
        spec.tx_depth,
    )?;
    let sb = Side::new(
        PortHandle::open(verbs, b.0, b.1, &params.gid)?,
        spec.size,
        spec.tx_depth,
    )?;
    let (ia, ib) = (sa.info(), sb.info());
    sa.port.connect(&*sa.qp, &ib.qp, params)?;
    sb.port.connect(&*sb.qp, &ia.qp, params)?;
    let to = sb.port.label();
    let elapsed = sa.bandwidth(&ib, spec, &to)?;
    let from_label = sa.port.label();
    let rtts = std::thread::scope(|s| {
        let server = s.spawn(|| sb.pong(&ia, spec, &from_label));
        let r = sa.ping(&ib, spec, &to);
        let served = server.join().unwrap_or_else(|_| {
            Err(PerfError::Control {
                peer: to.clone(),
                message: "the latency server thread panicked".into(),
            })
        });
        served.and(r)
    })?;
    let rate = verbs_rate_gbps(sb.port.attr.active_width, sb.port.attr.active_speed);
    Ok(result(&sa, to, rate, spec, elapsed, rtts))
}

/// The tests `ibcheck --bw` runs over `ports` (the ports NCCL would use, in order): against
/// `peer` from the first port, or from the first port to the second (to itself when there is
/// one port). A test that cannot run becomes a failed check.
pub fn run_tests(
    verbs: &Provider,
    ports: &[(String, u8)],
    peer: Option<&str>,
    spec: &PerfSpec,
    params: &IbParams,
) -> PerfReport {
    let mut out = PerfReport::default();
    let Some(first) = ports.first() else {
        out.failures.push(Check::found(
            "bandwidth",
            "host",
            Verdict::Error,
            "no ACTIVE port that NCCL would use (and --hca selects) opens with libibverbs: nothing to test",
            "see the port checks",
        ));
        return out;
    };
    let a = (first.0.as_str(), first.1);
    let run = match peer {
        Some(peer) => run_peer(verbs, a, peer, spec, params),
        None => {
            let second = ports.get(1).unwrap_or(first);
            run_local(verbs, a, (&second.0, second.1), spec, params)
        }
    };
    match run {
        Ok(r) => out.results.push(r),
        Err(e) => out.failures.push(Check::found(
            "bandwidth",
            &format!("{}:{}", first.0, first.1),
            Verdict::Error,
            e.to_string(),
            "see the port, GID and counter checks; a peer must run `rnccl ibcheck --serve`",
        )),
    }
    out
}

/// The control messages, one JSON object per line.
#[derive(Debug, Serialize, Deserialize)]
enum Msg {
    /// Client → server: the test and the client's side.
    Hello { spec: PerfSpec, side: SideInfo },
    /// Server → client: the server's side, its port and rate.
    Ready {
        side: SideInfo,
        port: String,
        rate: Option<f64>,
    },
    /// Client → server: bandwidth done, start answering the latency pings.
    Latency,
    /// Server → client: latency served (or why not).
    Done { error: Option<String> },
}

struct Control {
    reader: BufReader<TcpStream>,
    peer: String,
}

impl Control {
    fn new(s: TcpStream, peer: String, timeout: Duration) -> Result<Control, PerfError> {
        let err = |e: std::io::Error| PerfError::Control {
            peer: peer.clone(),
            message: e.to_string(),
        };
        s.set_read_timeout(Some(timeout)).map_err(err)?;
        s.set_write_timeout(Some(timeout)).map_err(err)?;
        Ok(Control {
            reader: BufReader::new(s),
            peer,
        })
    }

    fn fail(&self, message: impl Into<String>) -> PerfError {
        PerfError::Control {
            peer: self.peer.clone(),
            message: message.into(),
        }
    }

    fn send(&mut self, m: &Msg) -> Result<(), PerfError> {
        let mut line = serde_json::to_string(m).map_err(|e| self.fail(e.to_string()))?;
        line.push('\n');
        self.reader
            .get_mut()
            .write_all(line.as_bytes())
            .map_err(|e| self.fail(format!("sending: {e}")))
    }

    fn recv(&mut self) -> Result<Msg, PerfError> {
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) => Err(self.fail("closed the connection")),
            Ok(_) => serde_json::from_str(&line)
                .map_err(|e| self.fail(format!("unexpected message: {e}"))),
            Err(e) => Err(self.fail(format!("receiving: {e}"))),
        }
    }
}

/// Bandwidth and latency from local port `local` to the `rnccl ibcheck --serve` at `peer`
/// (`host` or `host:port`, default port 18515 as perftest's).
///
/// Errors: [`PerfError`], naming the peer.
pub fn run_peer(
    verbs: &Provider,
    local: (&str, u8),
    peer: &str,
    spec: &PerfSpec,
    params: &IbParams,
) -> Result<PairResult, PerfError> {
    let verbs = &*verbs.0;
    let target = if peer.parse::<std::net::SocketAddr>().is_ok() || peer.matches(':').count() == 1 {
        peer.to_string()
    } else if peer.contains(':') {
        format!("[{peer}]:{DEFAULT_PORT}")
    } else {
        format!("{peer}:{DEFAULT_PORT}")
    };
    let fail = |m: String| PerfError::Control {
        peer: target.clone(),
        message: m,
    };
    let addr = target
        .to_socket_addrs()
        .map_err(|e| fail(format!("cannot resolve: {e}")))?
        .next()
        .ok_or_else(|| fail("resolves to no address".into()))?;
    let s = TcpStream::connect_timeout(&addr, Duration::from_secs(10)).map_err(|e| {
        fail(format!(
            "cannot connect ({e}); is `rnccl ibcheck --serve` running there?"
        ))
    })?;
    let mut ctl = Control::new(s, target.clone(), spec.timeout)?;
    let side = Side::new(
        PortHandle::open(verbs, local.0, local.1, &params.gid)?,
        spec.size,
        spec.tx_depth,
    )?;
    ctl.send(&Msg::Hello {
        spec: *spec,
        side: side.info(),
    })?;
    let Msg::Ready {
        side: remote,
        port,
        rate,
    } = ctl.recv()?
    else {
        return Err(ctl.fail("expected the server's queue pair"));
    };
    side.port.connect(&*side.qp, &remote.qp, params)?;
    let to = format!("{target}/{port}");
    let elapsed = side.bandwidth(&remote, spec, &to)?;
    ctl.send(&Msg::Latency)?;
    let rtts = side.ping(&remote, spec, &to)?;
    match ctl.recv()? {
        Msg::Done { error: None } => {}
        Msg::Done { error: Some(e) } => return Err(ctl.fail(e)),
        _ => return Err(ctl.fail("expected the end of the test")),
    }
    Ok(result(&side, to, rate, spec, elapsed, rtts))
}

/// perftest's default port.
pub const DEFAULT_PORT: u16 = 18515;

/// Serves tests on `listener` with local port `local`, one client at a time, until `clients`
/// have been served (`None`: for ever). Each client's failure is reported to `log` and the
/// server goes on.
///
/// Errors: [`PerfError::Control`] when accepting fails.
pub fn serve(
    listener: &TcpListener,
    verbs: &Provider,
    local: (&str, u8),
    params: &IbParams,
    clients: Option<usize>,
    log: &dyn Fn(&str),
) -> Result<(), PerfError> {
    let verbs = &*verbs.0;
    let mut served = 0;
    while clients.is_none_or(|n| served < n) {
        let (s, from) = listener.accept().map_err(|e| PerfError::Control {
            peer: "listener".into(),
            message: e.to_string(),
        })?;
        served += 1;
        match serve_one(s, from.to_string(), verbs, local, params) {
            Ok(()) => log(&format!("served {from}")),
            Err(e) => log(&format!("{from}: {e}")),
        }
    }
    Ok(())
}

fn serve_one(
    s: TcpStream,
    peer: String,
    verbs: &dyn Verbs,
    local: (&str, u8),
    params: &IbParams,
) -> Result<(), PerfError> {
    let mut ctl = Control::new(s, peer.clone(), Duration::from_secs(60))?;
    let Msg::Hello { spec, side: remote } = ctl.recv()? else {
        return Err(ctl.fail("expected a test request"));
    };
    let side = Side::new(
        PortHandle::open(verbs, local.0, local.1, &params.gid)?,
        spec.size,
        spec.tx_depth,
    )?;
    side.port.connect(&*side.qp, &remote.qp, params)?;
    ctl.send(&Msg::Ready {
        side: side.info(),
        port: side.port.label(),
        rate: verbs_rate_gbps(side.port.attr.active_width, side.port.attr.active_speed),
    })?;
    let Msg::Latency = ctl.recv()? else {
        return Err(ctl.fail("expected the latency phase"));
    };
    let r = side.pong(&remote, &spec, &peer);
    ctl.send(&Msg::Done {
        error: r.as_ref().err().map(ToString::to_string),
    })?;
    r
}

#[cfg(test)]
mod tests;
