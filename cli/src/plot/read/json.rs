//! The `-J` JSON documents of nccl-tests (2.19 `src/util.cu`: `jsonOutputInit`,
//! `writeDeviceReport`, `writeBenchmarkLine*`) and of `rnccl bench` (`-J`, `--format json`;
//! the same layout plus an `rnccl` section). Both hold `results`, a list of rows with `size`,
//! `count`, `type`, `redop`, `root` (a padded string, as nccl-tests writes it, or a number),
//! and `out_of_place` / `in_place` objects with `time` (or `cpu_time` under nccl-tests' `-C`),
//! `alg_bw` and `bus_bw`; `out_of_place` is `null` for trace replay. The devices are a
//! top-level list in rnccl's documents and inside `config` in nccl-tests' (one per process
//! there, so its number of ranks is processes × `nthreads` × `ngpus`).

use serde::Deserialize;

use super::Failure;
use crate::plot::curve::{Curve, Point, RunInfo, Side, group};

/// The parts of a document that curves need; everything else is ignored.
#[derive(Deserialize)]
struct Doc {
    results: Option<Vec<Row>>,
    #[serde(default)]
    devices: Vec<Device>,
    config: Option<Config>,
    rnccl: Option<Rnccl>,
}

#[derive(Deserialize)]
struct Config {
    #[serde(default)]
    devices: Vec<Device>,
    nthreads: Option<usize>,
    ngpus: Option<usize>,
}

#[derive(Deserialize)]
struct Rnccl {
    communicator: Option<Communicator>,
}

#[derive(Deserialize)]
struct Communicator {
    nranks: Option<usize>,
}

#[derive(Deserialize)]
struct Device {
    #[serde(default)]
    hostname: String,
    /// rnccl's device name.
    name: Option<String>,
    /// nccl-tests' device name.
    device_info: Option<String>,
}

#[derive(Deserialize)]
struct Row {
    size: u64,
    #[serde(rename = "type")]
    dtype: String,
    redop: String,
    root: Root,
    out_of_place: Option<Measure>,
    in_place: Option<Measure>,
    experiment_name: Option<String>,
}

/// nccl-tests writes the root as `"%6i"` text; accept a number too.
#[derive(Deserialize)]
#[serde(untagged)]
enum Root {
    Number(i64),
    Text(String),
}

#[derive(Deserialize)]
struct Measure {
    #[serde(alias = "cpu_time")]
    time: f64,
    alg_bw: f64,
    bus_bw: f64,
}

/// What a document should look like, for messages.
const SHAPE: &str = "expected a -J JSON document from rnccl or nccl-tests: {\"results\": [{\"size\", \
\"type\", \"redop\", \"root\", \"out_of_place\": {\"time\", \"alg_bw\", \"bus_bw\"}, \"in_place\": \
{…}}, …]}";

/// Parses a document into curves.
pub(super) fn parse(text: &str) -> Result<Vec<Curve>, Failure> {
    let doc: Doc = serde_json::from_str(text).map_err(|e| {
        let what = format!("{e}; {SHAPE}");
        match e.line() {
            0 => Failure::whole(what),
            line => Failure::at(line, what),
        }
    })?;
    let Some(results) = doc.results else {
        return Err(Failure::whole(format!("no \"results\" list; {SHAPE}")));
    };
    let devices = if doc.devices.is_empty() {
        doc.config.as_ref().map_or(&[][..], |c| &c.devices[..])
    } else {
        &doc.devices[..]
    };
    let nranks = doc
        .rnccl
        .and_then(|r| r.communicator)
        .and_then(|c| c.nranks)
        .or_else(|| {
            let c = doc.config.as_ref()?;
            let per_process = c.nthreads? * c.ngpus?;
            (!c.devices.is_empty()).then(|| c.devices.len() * per_process)
        })
        .or((!devices.is_empty()).then_some(devices.len()));
    let mut info = RunInfo {
        collective: results.iter().find_map(|r| r.experiment_name.clone()),
        nranks,
        ..RunInfo::default()
    };
    for d in devices {
        let name = d.name.as_deref().or(d.device_info.as_deref()).unwrap_or("");
        info.add_rank(&d.hostname, name);
    }
    let mut rows = Vec::with_capacity(results.len());
    for (i, r) in results.into_iter().enumerate() {
        let root = match r.root {
            Root::Number(n) => n,
            Root::Text(t) => t.trim().parse().map_err(|_| {
                Failure::whole(format!(
                    "results[{i}].root: expected a rank number or -1, found {t:?}"
                ))
            })?,
        };
        let side = |m: Option<Measure>, name: &str| -> Result<Option<Side>, Failure> {
            let Some(m) = m else { return Ok(None) };
            for (field, v) in [("time", m.time), ("alg_bw", m.alg_bw), ("bus_bw", m.bus_bw)] {
                if !v.is_finite() {
                    return Err(Failure::whole(format!(
                        "results[{i}].{name}.{field}: expected a finite number, found {v}"
                    )));
                }
            }
            Ok(Some(Side {
                time_us: m.time,
                algbw: m.alg_bw,
                busbw: m.bus_bw,
            }))
        };
        let point = Point {
            size: r.size,
            out_of_place: side(r.out_of_place, "out_of_place")?,
            in_place: side(r.in_place, "in_place")?,
        };
        if point.out_of_place.is_none() && point.in_place.is_none() {
            return Err(Failure::whole(format!(
                "results[{i}] has neither out_of_place nor in_place measurements; {SHAPE}"
            )));
        }
        rows.push((r.dtype, r.redop, root, point));
    }
    Ok(group(&info, 0, rows))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plot::curve::{Metric, Place};

    /// nccl-tests' layout: one line, devices inside `config`, root as padded text, in-place
    /// `nwrong` null when unchecked.
    const NCCL_TESTS: &str = r#"{"version":1,"start_time":"2026-11-23 10:00:00","args":["./all_reduce_perf","-g","2"],"env":[],"nccl_version":22809,"config":{"nthreads":1,"ngpus":2,"minimum_bytes":8,"maximum_bytes":32,"step_factor":4,"warmup_iters":5,"iterations":20,"aggregated_iterations":1,"validation":1,"graph":0,"blocking_collectives":false,"per_iter_timing":false,"per_iter_skip":0,"parallel_init":false,"devices":[{"rank":0,"group":0,"pid":1392,"hostname":"vm","device":0,"device_hex":"0000:00:06","device_info":"NVIDIA H200"}]},"results":[{"size":8,"count":2,"type":"float","redop":"sum","root":"    -1","out_of_place":{"time":19.71,"alg_bw":0.0,"bus_bw":0.0,"nwrong":0},"in_place":{"time":20.08,"alg_bw":0.0,"bus_bw":0.0,"nwrong":null},"actual_iterations":20,"experiment_name":"all_reduce_perf"},{"size":32,"count":8,"type":"float","redop":"sum","root":"    -1","out_of_place":{"cpu_time":20.79,"alg_bw":0.0,"bus_bw":0.0,"nwrong":0},"in_place":{"time":20.17,"alg_bw":0.0,"bus_bw":0.01,"nwrong":0},"actual_iterations":20,"experiment_name":"all_reduce_perf"}],"out_of_bounds":{"count":0,"okay":true},"average_bus_bandwidth":{"bandwidth":0.0,"okay":"unchecked"},"end_time":"2026-11-23 10:00:01"}"#;

    #[test]
    fn nccl_tests_documents() {
        let curves = parse(NCCL_TESTS).unwrap();
        assert_eq!(curves.len(), 1);
        let c = &curves[0];
        assert_eq!(c.info.collective.as_deref(), Some("all_reduce_perf"));
        assert_eq!(c.info.nranks, Some(2));
        assert_eq!(c.info.where_ran(), "on vm (2× NVIDIA H200)");
        assert_eq!(c.root, -1);
        assert_eq!(
            c.values(Place::Out, Metric::Time),
            vec![(8, 19.71), (32, 20.79)]
        );
        assert_eq!(
            c.values(Place::In, Metric::Busbw),
            vec![(8, 0.0), (32, 0.01)]
        );
    }

    #[test]
    fn rnccl_documents_count_ranks_from_the_communicator() {
        let doc = r#"{
  "devices": [
    {"rank": 0, "hostname": "h", "name": "AMD EPYC (host memory)"},
    {"rank": 1, "hostname": "h", "name": "AMD EPYC (host memory)"},
    {"rank": 2, "hostname": "h", "name": "AMD EPYC (host memory)"}
  ],
  "config": {"nthreads": 1, "ngpus": 1},
  "results": [
    {"size": 64, "count": 16, "type": "float", "redop": "none", "root": "     1",
     "out_of_place": null, "in_place": {"time": 3.5, "alg_bw": 0.02, "bus_bw": 0.02},
     "experiment_name": "broadcast_perf"}
  ],
  "rnccl": {"communicator": {"nranks": 3}}
}"#;
        let c = &parse(doc).unwrap()[0];
        assert_eq!(c.info.nranks, Some(3));
        assert_eq!(c.root, 1);
        assert!(c.values(Place::Out, Metric::Busbw).is_empty());
        assert_eq!(c.values(Place::In, Metric::Time), vec![(64, 3.5)]);
    }

    #[test]
    fn malformed_documents_say_where_and_what() {
        let cases = [
            (
                "{\"results\": [\n{\"size\": 8}\n]}",
                Some(2),
                "missing field `type`",
            ),
            (
                "{\"results\": [{\"size\": -8, \"type\": \"float\"}]}",
                Some(1),
                "invalid value",
            ),
            ("{\"version\": 1}", None, "no \"results\" list"),
            ("{\"results\": [", Some(1), "EOF while parsing"),
            (
                r#"{"results": [{"size": 8, "type": "float", "redop": "sum", "root": "x", "in_place": {"time": 1, "alg_bw": 1, "bus_bw": 1}}]}"#,
                None,
                "results[0].root: expected a rank number",
            ),
            (
                r#"{"results": [{"size": 8, "type": "float", "redop": "sum", "root": -1}]}"#,
                None,
                "results[0] has neither out_of_place nor in_place",
            ),
        ];
        for (text, line, what) in cases {
            let f = parse(text).unwrap_err();
            assert_eq!(f.line, line, "{text}: {}", f.what);
            assert!(f.what.contains(what), "{text}: {}", f.what);
        }
    }
}
