//! Benchmark results as curves: one curve is the rows of one run that share a data type,
//! reduction and root, sorted by size; each row holds the out-of-place and in-place
//! measurements as nccl-tests prints them (time in µs, algbw and busbw in GB/s = 1e9 B/s).

use std::collections::BTreeSet;

use rnccl::bench::{BenchRow, Measure, RankPlace};

/// Which measurement of a row to draw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Metric {
    /// Bus bandwidth, GB/s (nccl-tests' busbw: algbw times the collective's bus factor).
    Busbw,
    /// Algorithm bandwidth, GB/s (size / time).
    Algbw,
    /// Time per operation, µs.
    Time,
}

impl Metric {
    /// The axis title: the quantity and its unit.
    pub fn axis_title(self) -> &'static str {
        match self {
            Metric::Busbw => "busbw (GB/s, 1 GB/s = 1e9 B/s)",
            Metric::Algbw => "algbw (GB/s, 1 GB/s = 1e9 B/s)",
            Metric::Time => "time (µs, log scale)",
        }
    }

    /// The short name (`busbw`, `algbw`, `time`).
    pub fn name(self) -> &'static str {
        match self {
            Metric::Busbw => "busbw",
            Metric::Algbw => "algbw",
            Metric::Time => "time",
        }
    }

    /// Whether the axis is logarithmic (times span microseconds to seconds).
    pub fn log_scale(self) -> bool {
        self == Metric::Time
    }
}

/// Out-of-place or in-place (nccl-tests runs each size both ways).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Place {
    /// Separate send and receive buffers.
    Out,
    /// The receive buffer is the send buffer.
    In,
}

impl Place {
    /// nccl-tests' column heading: `out-of-place` or `in-place`.
    pub fn name(self) -> &'static str {
        match self {
            Place::Out => "out-of-place",
            Place::In => "in-place",
        }
    }
}

/// One measurement: time per operation (µs) and the two bandwidths (GB/s = 1e9 B/s).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Side {
    /// Time per operation, µs.
    pub time_us: f64,
    /// Algorithm bandwidth, GB/s.
    pub algbw: f64,
    /// Bus bandwidth, GB/s.
    pub busbw: f64,
}

impl Side {
    /// The value of `metric`.
    pub fn get(&self, metric: Metric) -> f64 {
        match metric {
            Metric::Busbw => self.busbw,
            Metric::Algbw => self.algbw,
            Metric::Time => self.time_us,
        }
    }
}

impl From<&Measure> for Side {
    fn from(m: &Measure) -> Side {
        Side {
            time_us: m.time_us,
            algbw: m.algbw,
            busbw: m.busbw,
        }
    }
}

/// One row: the size in bytes and its two measurements (either may be missing: nccl-tests'
/// trace replay prints no out-of-place columns).
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// Bytes (nccl-tests' `size` column).
    pub size: u64,
    /// Out-of-place measurement.
    pub out_of_place: Option<Side>,
    /// In-place measurement.
    pub in_place: Option<Side>,
}

impl Point {
    /// The measurement of `place`.
    pub fn side(&self, place: Place) -> Option<&Side> {
        match place {
            Place::Out => self.out_of_place.as_ref(),
            Place::In => self.in_place.as_ref(),
        }
    }
}

/// What a run says about itself: the test, the ranks and where they ran. Every field is
/// optional: a bare table says none of it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunInfo {
    /// nccl-tests' test name (`all_reduce_perf`).
    pub collective: Option<String>,
    /// Number of ranks.
    pub nranks: Option<usize>,
    /// Host names, each once, in rank order.
    pub hosts: Vec<String>,
    /// Device names (`NVIDIA H200`, or a CPU model and `(host memory)`), each once.
    pub devices: Vec<String>,
}

impl RunInfo {
    /// Adds a rank's host and device name, keeping each once.
    pub fn add_rank(&mut self, host: &str, device: &str) {
        if !self.hosts.iter().any(|h| h == host) {
            self.hosts.push(host.to_string());
        }
        if !device.is_empty() && !self.devices.iter().any(|d| d == device) {
            self.devices.push(device.to_string());
        }
    }

    /// `on vm (2× NVIDIA H200)`, `on 2 hosts (16× NVIDIA H100)`, or empty when unknown.
    pub fn where_ran(&self) -> String {
        let hosts = match self.hosts.as_slice() {
            [] => String::new(),
            [h] => format!("on {h}"),
            many => format!("on {} hosts", many.len()),
        };
        let devices = match (self.devices.as_slice(), self.nranks) {
            ([], _) => String::new(),
            ([d], Some(n)) => format!("{n}× {d}"),
            (ds, _) => ds.join(", "),
        };
        match (hosts.is_empty(), devices.is_empty()) {
            (true, true) => String::new(),
            (false, true) => hosts,
            (true, false) => devices,
            (false, false) => format!("{hosts} ({devices})"),
        }
    }
}

/// The rows of one run that share a data type, reduction and root, by increasing size.
#[derive(Debug, Clone, PartialEq)]
pub struct Curve {
    /// The run's description.
    pub info: RunInfo,
    /// Which run of its file (0 for the first), for files holding several tables.
    pub run: usize,
    /// nccl-tests' `type` column (`float`, `half`, …).
    pub dtype: String,
    /// nccl-tests' `redop` column (`sum`, …, or `none`).
    pub redop: String,
    /// nccl-tests' `root` column (-1 for collectives without a root).
    pub root: i64,
    /// The rows.
    pub points: Vec<Point>,
}

impl Curve {
    /// `(size, value)` of every row that has a `place` measurement.
    pub fn values(&self, place: Place, metric: Metric) -> Vec<(u64, f64)> {
        self.points
            .iter()
            .filter_map(|p| p.side(place).map(|s| (p.size, s.get(metric))))
            .collect()
    }

    /// `float sum`, `half max root 1`: the parts of the curve's key worth showing.
    pub fn key_label(&self) -> String {
        let mut parts = vec![self.dtype.clone()];
        if self.redop != "none" {
            parts.push(self.redop.clone());
        }
        if self.root >= 0 {
            parts.push(format!("root {}", self.root));
        }
        parts.join(" ")
    }
}

/// Groups rows into curves by (type, redop, root), in order of first appearance, each sorted by
/// size. `rows` are `(type, redop, root, point)`.
pub fn group(
    info: &RunInfo,
    run: usize,
    rows: impl IntoIterator<Item = (String, String, i64, Point)>,
) -> Vec<Curve> {
    let mut curves: Vec<Curve> = Vec::new();
    for (dtype, redop, root, point) in rows {
        match curves
            .iter_mut()
            .find(|c| c.dtype == dtype && c.redop == redop && c.root == root)
        {
            Some(c) => c.points.push(point),
            None => curves.push(Curve {
                info: info.clone(),
                run,
                dtype,
                redop,
                root,
                points: vec![point],
            }),
        }
    }
    for c in &mut curves {
        c.points.sort_by_key(|p| p.size);
    }
    curves
}

/// The curves of an `rnccl bench` run: its rows, test name (`all_reduce_perf`), number of ranks
/// and every rank's place.
pub fn from_bench(
    rows: &[BenchRow],
    test: &str,
    nranks: usize,
    places: &[RankPlace],
) -> Vec<Curve> {
    let mut info = RunInfo {
        collective: Some(test.to_string()),
        nranks: Some(nranks),
        ..RunInfo::default()
    };
    for p in places {
        info.add_rank(&p.host, &p.name);
    }
    let keyed = rows.iter().map(|r| {
        (
            r.dtype.nccl_tests_name().to_string(),
            r.op.map_or("none", |o| o.name()).to_string(),
            r.root.map_or(-1, |x| x as i64),
            Point {
                size: r.size as u64,
                out_of_place: Some(Side::from(&r.out_of_place)),
                in_place: Some(Side::from(&r.in_place)),
            },
        )
    });
    group(&info, 0, keyed)
}

/// The legend labels of one file's curves: `base` alone for one curve; otherwise `base` and
/// what tells the curves apart (`base (half sum)`, `base (run 2)`).
pub fn labels(base: &str, curves: &[Curve]) -> Vec<String> {
    if curves.len() <= 1 {
        return vec![base.to_string(); curves.len()];
    }
    let runs = curves.iter().map(|c| c.run).collect::<BTreeSet<_>>().len();
    let keys = curves
        .iter()
        .map(|c| c.key_label())
        .collect::<BTreeSet<_>>()
        .len();
    curves
        .iter()
        .map(|c| {
            let mut parts = Vec::new();
            if runs > 1 {
                parts.push(format!("run {}", c.run + 1));
            }
            if keys > 1 {
                parts.push(c.key_label());
            }
            format!("{base} ({})", parts.join(", "))
        })
        .collect()
}

/// What all `curves` have in common, for a title: `all_reduce_perf · float · sum · 8 ranks ·
/// on vm (8× NVIDIA H200)`; parts that differ between curves are left out.
pub fn describe(curves: &[Curve]) -> String {
    fn common<T: PartialEq + Clone>(
        curves: &[Curve],
        f: impl Fn(&Curve) -> Option<T>,
    ) -> Option<T> {
        let first = f(curves.first()?)?;
        curves
            .iter()
            .all(|c| f(c).as_ref() == Some(&first))
            .then_some(first)
    }
    let mut parts = Vec::new();
    if let Some(c) = common(curves, |c| c.info.collective.clone()) {
        parts.push(c);
    }
    if let Some(t) = common(curves, |c| Some(c.dtype.clone())) {
        parts.push(t);
    }
    if let Some(op) = common(curves, |c| Some(c.redop.clone())).filter(|o| o != "none") {
        parts.push(op);
    }
    if let Some(root) = common(curves, |c| Some(c.root)).filter(|&r| r >= 0) {
        parts.push(format!("root {root}"));
    }
    if let Some(n) = common(curves, |c| c.info.nranks) {
        parts.push(format!("{n} rank{}", if n == 1 { "" } else { "s" }));
    }
    if let Some(w) = common(curves, |c| Some(c.info.where_ran())).filter(|w| !w.is_empty()) {
        parts.push(w);
    }
    parts.join(" · ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(size: u64, busbw: f64) -> Point {
        let s = Side {
            time_us: 1.0,
            algbw: busbw,
            busbw,
        };
        Point {
            size,
            out_of_place: Some(s),
            in_place: None,
        }
    }

    #[test]
    fn rows_group_by_type_op_and_root_and_sort_by_size() {
        let rows = vec![
            ("float".into(), "sum".into(), -1, point(64, 2.0)),
            ("half".into(), "sum".into(), -1, point(8, 0.5)),
            ("float".into(), "sum".into(), -1, point(8, 1.0)),
        ];
        let curves = group(&RunInfo::default(), 0, rows);
        assert_eq!(curves.len(), 2);
        assert_eq!(
            curves[0].values(Place::Out, Metric::Busbw),
            vec![(8, 1.0), (64, 2.0)]
        );
        assert!(curves[0].values(Place::In, Metric::Busbw).is_empty());
        assert_eq!(
            labels("a", &curves),
            vec!["a (float sum)".to_string(), "a (half sum)".to_string()]
        );
        assert_eq!(labels("a", &curves[..1]), vec!["a".to_string()]);
    }

    #[test]
    fn titles_name_what_the_curves_share() {
        let mut info = RunInfo {
            collective: Some("all_reduce_perf".into()),
            nranks: Some(2),
            ..RunInfo::default()
        };
        info.add_rank("vm", "NVIDIA H200");
        info.add_rank("vm", "NVIDIA H200");
        let rows = vec![("float".into(), "sum".into(), -1, point(8, 1.0))];
        let curves = group(&info, 0, rows);
        assert_eq!(
            describe(&curves),
            "all_reduce_perf · float · sum · 2 ranks · on vm (2× NVIDIA H200)"
        );
        let mut other = curves[0].clone();
        other.dtype = "half".into();
        other.info.hosts = vec!["a".into(), "b".into()];
        let both = [curves[0].clone(), other];
        assert_eq!(describe(&both), "all_reduce_perf · sum · 2 ranks");
        assert_eq!(RunInfo::default().where_ran(), "");
    }
}
