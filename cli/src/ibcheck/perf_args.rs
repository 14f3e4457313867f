//! `ibcheck`'s active tests: `--bw` between two local ports or against `--peer HOST`, and
//! `--serve` for the other end.

use std::net::TcpListener;
use std::process::ExitCode;

use anyhow::Context;
use rnccl::config::Config;
use rnccl::ib::Provider;
use rnccl::ib::params::IbParams;
use rnccl::ibcheck::Report;
use rnccl::ibcheck::perf::{self, DEFAULT_PORT, PerfReport, PerfSpec};

/// Options of the active tests.
#[derive(Debug, Clone, clap::Args)]
pub struct PerfArgs {
    /// Measure RDMA write bandwidth and latency (ib_write_bw / ib_write_lat's method): between
    /// the first two ports NCCL would use (one port: a loopback), or with --peer.
    #[arg(long)]
    pub bw: bool,
    /// Test against `rnccl ibcheck --serve` on HOST[:PORT] (default port 18515).
    #[arg(long, value_name = "HOST[:PORT]", requires = "bw")]
    pub peer: Option<String>,
    /// Serve --bw tests from other hosts (on --port), until interrupted.
    #[arg(long, conflicts_with_all = ["bw", "interval", "sysfs_root", "format"])]
    pub serve: bool,
    /// TCP port of --serve (and of --peer without one).
    #[arg(long, value_name = "PORT", default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// Bytes per write (K, M, G suffixes).
    #[arg(long, value_name = "BYTES", default_value = "8M", value_parser = parse_size)]
    pub size: usize,
    /// Writes per bandwidth test (and round trips per latency test).
    #[arg(long, value_name = "N", default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    pub iters: u32,
}

fn parse_size(s: &str) -> Result<usize, String> {
    let (num, mult) = match s.trim().chars().last() {
        Some('K' | 'k') => (&s[..s.len() - 1], 1 << 10),
        Some('M' | 'm') => (&s[..s.len() - 1], 1 << 20),
        Some('G' | 'g') => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    let n: usize = num
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a size: write bytes, or a number with K, M or G"))?;
    match n.checked_mul(mult) {
        Some(v) if (1..=1 << 30).contains(&v) => Ok(v),
        _ => Err(format!("{s:?}: give 1 byte to 1G")),
    }
}

impl PerfArgs {
    fn spec(&self) -> PerfSpec {
        PerfSpec {
            size: self.size,
            iters: self.iters as usize,
            lat_iters: self.iters as usize,
            ..PerfSpec::default()
        }
    }
}

/// Runs the bandwidth tests the report's ports allow.
///
/// Errors: `--bw` on a captured tree, or libibverbs missing.
pub fn run_bw(
    args: &PerfArgs,
    cfg: &Config,
    report: &Report,
    live: bool,
) -> anyhow::Result<PerfReport> {
    if !live {
        anyhow::bail!("--bw needs this host's adapters; it cannot run on a --sysfs-root tree");
    }
    let params = IbParams::from_config(cfg)?;
    let v = Provider::load(params.verbs_lib.as_deref()).context("--bw needs libibverbs")?;
    let selected: Vec<(String, u8)> = v
        .usable_ports(&params)?
        .into_iter()
        .filter(|(h, p)| {
            report
                .ports
                .iter()
                .any(|r| &r.hca == h && r.port == u32::from(*p))
        })
        .collect();
    let peer = args.peer.as_ref().map(|peer| {
        if peer.parse::<std::net::SocketAddr>().is_ok() || peer.contains(':') {
            peer.clone()
        } else {
            format!("{peer}:{}", args.port)
        }
    });
    Ok(perf::run_tests(
        &v,
        &selected,
        peer.as_deref(),
        &args.spec(),
        &params,
    ))
}

/// `--serve`: answers tests on `--port` with the first port NCCL would use, until killed.
///
/// Errors: libibverbs missing, no usable port, or the port cannot be bound.
pub fn serve(args: &PerfArgs, cfg: &Config) -> anyhow::Result<ExitCode> {
    let params = IbParams::from_config(cfg)?;
    let v = Provider::load(params.verbs_lib.as_deref()).context("--serve needs libibverbs")?;
    let ports = v.usable_ports(&params)?;
    let Some((hca, port)) = ports.first() else {
        anyhow::bail!("no ACTIVE InfiniBand/RoCE port (selected by NCCL_IB_HCA) to serve tests on");
    };
    let l = TcpListener::bind(("0.0.0.0", args.port))
        .with_context(|| format!("listening on TCP port {}", args.port))?;
    eprintln!(
        "rnccl ibcheck: serving RDMA write tests on {hca}:{port}, TCP port {} (Ctrl-C to stop)",
        args.port
    );
    perf::serve(&l, &v, (hca, *port), &params, None, &|m| {
        eprintln!("rnccl ibcheck: {m}")
    })?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("8M"), Ok(8 << 20));
        assert_eq!(parse_size("65536"), Ok(65536));
        assert!(parse_size("0").is_err() && parse_size("2G").is_err() && parse_size("x").is_err());
    }
}
