//! The JSON form of a bench run: nccl-tests' `-J` layout (config, devices, results with
//! `out_of_place`/`in_place` objects, `out_of_bounds`, `average_bus_bandwidth`), plus an `rnccl`
//! section with what nccl-tests cannot know (ranks, channels, traffic per link).

use rnccl::bench::{BenchRow, Measure, RankPlace};
use rnccl::stats::LinkSnapshot;
use serde_json::{Value, json};

/// Everything the JSON document holds.
pub struct Doc<'a> {
    /// Command line.
    pub argv: Vec<String>,
    /// Seconds since the epoch when the run started.
    pub start: u64,
    /// nccl-tests' config block.
    pub config: Value,
    /// Every rank's device ([`device`]).
    pub devices: Vec<Value>,
    /// Result rows.
    pub rows: &'a [BenchRow],
    /// nccl-tests test name.
    pub test: String,
    /// Wrong elements in total.
    pub wrong: u64,
    /// Average bus bandwidth (GB/s).
    pub avg_bw: f64,
    /// `NCCL_TESTS_MIN_BW`, if set.
    pub min_bw: Option<f64>,
    /// Ranks, channels, slot size.
    pub comm: Value,
    /// Rank 0's traffic per link.
    pub traffic: Vec<LinkSnapshot>,
}

/// One rank's device: rank, group, process, host, device index, PCI bus id (`null` for a CPU
/// rank), name, its `# Using devices` line, and the transport to each peer it sends to.
pub fn device(p: &RankPlace, line: &str) -> Value {
    json!({
        "rank": p.rank, "group": 0, "pid": p.pid, "hostname": p.host, "device": p.device,
        "bus_id": p.bus_id, "name": p.name, "gpu": p.bus_id.is_some(), "line": line,
        "sends": p.sends.iter().map(|(peer, t)| json!({ "peer": peer, "transport": t })).collect::<Vec<_>>(),
    })
}

fn side(m: &Measure) -> Value {
    json!({ "time": m.time_us, "alg_bw": m.algbw, "bus_bw": m.busbw, "nwrong": m.wrong })
}

/// UTC time `secs` after the Unix epoch as nccl-tests prints it (`%Y-%m-%d %H:%M:%S`), from
/// `humantime`'s RFC 3339 form.
pub fn utc(secs: u64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
    humantime::format_rfc3339_seconds(t)
        .to_string()
        .replace('T', " ")
        .trim_end_matches('Z')
        .to_string()
}

/// Builds the document.
pub fn render(d: &Doc<'_>) -> Value {
    let results: Vec<Value> = d
        .rows
        .iter()
        .map(|r| {
            json!({
                "size": r.size,
                "count": r.count,
                "type": r.dtype.nccl_tests_name(),
                "redop": r.op.map_or("none", |o| o.name()),
                "root": format!("{:>6}", r.root.map_or(-1, |x| x as i64)),
                "out_of_place": side(&r.out_of_place),
                "in_place": side(&r.in_place),
                "actual_iterations": null,
                "experiment_name": d.test,
            })
        })
        .collect();
    json!({
        "version": 1,
        "start_time": utc(d.start),
        "args": d.argv,
        "config": d.config,
        "devices": d.devices,
        "results": results,
        "out_of_bounds": { "count": d.wrong, "okay": d.wrong == 0 },
        "average_bus_bandwidth": {
            "bandwidth": d.avg_bw,
            "okay": match d.min_bw { None => json!("unchecked"), Some(m) => json!(d.avg_bw >= 0.9 * m) },
        },
        "rnccl": { "version": env!("CARGO_PKG_VERSION"), "communicator": d.comm, "traffic_rank0": d.traffic },
    })
}

#[cfg(test)]
mod tests {
    use super::utc;

    #[test]
    fn utc_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00");
        assert_eq!(utc(1_795_315_845), "2026-11-22 02:50:45");
        assert_eq!(utc(951_782_400), "2000-02-29 00:00:00");
    }
}
