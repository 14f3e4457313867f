//! The state of `rnccl tune`: the sweep form (collective, sizes, ranks, knob values checked by
//! the knob registry as they are typed), the runs made so far with their busbw curves, and the
//! best settings written out. No terminal here.

use rnccl::config::{Config, Source};

/// The knobs the form offers, in order (the issue's list: algorithm, protocol, channels, FIFO
/// size, sockets, and the transport switches).
pub const KNOBS: [&str; 9] = [
    "NCCL_ALGO",
    "NCCL_PROTO",
    "NCCL_MIN_NCHANNELS",
    "NCCL_MAX_NCHANNELS",
    "NCCL_BUFFSIZE",
    "NCCL_NSOCKS_PERTHREAD",
    "NCCL_SOCKET_NTHREADS",
    "NCCL_P2P_DISABLE",
    "NCCL_SHM_DISABLE",
];

/// The collectives a sweep can run (`rnccl bench` names).
pub const COLLS: [&str; 9] = [
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "broadcast",
    "reduce",
    "alltoall",
    "gather",
    "scatter",
    "sendrecv",
];

/// The form's fields, in screen order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Coll,
    MinBytes,
    MaxBytes,
    Ranks,
    Knob(usize),
}

impl Field {
    /// Every field, top to bottom.
    pub fn all() -> Vec<Field> {
        let mut v = vec![Field::Coll, Field::MinBytes, Field::MaxBytes, Field::Ranks];
        v.extend((0..KNOBS.len()).map(Field::Knob));
        v
    }
}

/// One sweep's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Form {
    pub coll: usize,
    pub min_bytes: String,
    pub max_bytes: String,
    pub ranks: String,
    /// Per entry of [`KNOBS`], the value typed (empty: unset).
    pub knobs: Vec<String>,
}

impl Default for Form {
    fn default() -> Form {
        Form {
            coll: 0,
            min_bytes: "1M".into(),
            max_bytes: "64M".into(),
            ranks: "2".into(),
            knobs: vec![String::new(); KNOBS.len()],
        }
    }
}

/// A size with nccl-tests' suffixes (K, M, G: powers of 1024), in bytes.
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, mul) = match s.char_indices().last()? {
        (i, 'K' | 'k') => (&s[..i], 1u64 << 10),
        (i, 'M' | 'm') => (&s[..i], 1 << 20),
        (i, 'G' | 'g') => (&s[..i], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<u64>().ok()?.checked_mul(mul)
}

impl Form {
    /// The text of `field`, for editing and display.
    pub fn text(&self, field: Field) -> &str {
        match field {
            Field::Coll => COLLS[self.coll],
            Field::MinBytes => &self.min_bytes,
            Field::MaxBytes => &self.max_bytes,
            Field::Ranks => &self.ranks,
            Field::Knob(i) => &self.knobs[i],
        }
    }

    /// The editable text of `field` (`None` for the collective, which is chosen, not typed).
    pub fn text_mut(&mut self, field: Field) -> Option<&mut String> {
        match field {
            Field::Coll => None,
            Field::MinBytes => Some(&mut self.min_bytes),
            Field::MaxBytes => Some(&mut self.max_bytes),
            Field::Ranks => Some(&mut self.ranks),
            Field::Knob(i) => Some(&mut self.knobs[i]),
        }
    }

    /// What is wrong with `field`'s value, in the registry's words for a knob.
    pub fn error(&self, field: Field) -> Option<String> {
        match field {
            Field::Coll => None,
            Field::MinBytes | Field::MaxBytes => {
                let (min, max) = (parse_size(&self.min_bytes), parse_size(&self.max_bytes));
                match (field, min, max) {
                    (Field::MinBytes, None, _) | (Field::MaxBytes, _, None) => {
                        Some("a size in bytes, with K, M or G".into())
                    }
                    (Field::MaxBytes, Some(a), Some(b)) if b < a => {
                        Some("smaller than the smallest size".into())
                    }
                    _ => None,
                }
            }
            Field::Ranks => match self.ranks.trim().parse::<usize>() {
                Ok(1..=64) => None,
                _ => Some("1 to 64 ranks".into()),
            },
            Field::Knob(i) => {
                let v = self.knobs[i].trim();
                if v.is_empty() {
                    return None;
                }
                let mut cfg = Config::defaults();
                cfg.set(KNOBS[i], v, Source::Program("rnccl tune".into()));
                cfg.validate().err().map(|e| {
                    let s = e.to_string();
                    s.lines().next().unwrap_or(&s).to_string()
                })
            }
        }
    }

    /// Whether every field is valid.
    pub fn valid(&self) -> bool {
        Field::all().into_iter().all(|f| self.error(f).is_none())
    }

    /// The knobs set, as (name, value).
    pub fn settings(&self) -> Vec<(&'static str, String)> {
        KNOBS
            .iter()
            .zip(&self.knobs)
            .filter(|(_, v)| !v.trim().is_empty())
            .map(|(k, v)| (*k, v.trim().to_string()))
            .collect()
    }

    /// Sizes the sweep measures (from the smallest, doubling, to the largest).
    pub fn sizes(&self) -> usize {
        match (parse_size(&self.min_bytes), parse_size(&self.max_bytes)) {
            (Some(a), Some(b)) if a > 0 && b >= a => (b / a).ilog2() as usize + 1,
            (Some(0), Some(_)) => 1,
            _ => 0,
        }
    }
}

/// How a run stands.
#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    Running,
    Done,
    /// The bench failed: its last error line.
    Failed(String),
}

/// One sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    pub coll: &'static str,
    pub settings: Vec<(&'static str, String)>,
    pub ranks: usize,
    /// (bytes, busbw GB/s) per size measured so far.
    pub points: Vec<(u64, f64)>,
    /// Sizes the sweep will measure.
    pub expected: usize,
    pub status: Status,
}

impl Run {
    /// The settings in short (`ALGO=Ring MIN_NCHANNELS=4`), or `defaults`.
    pub fn label(&self) -> String {
        if self.settings.is_empty() {
            return "defaults".into();
        }
        self.settings
            .iter()
            .map(|(k, v)| format!("{}={v}", k.split_once('_').map_or(*k, |(_, short)| short)))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Mean busbw over the sizes measured (GB/s), as nccl-tests' "Avg bus bandwidth".
    pub fn avg(&self) -> f64 {
        if self.points.is_empty() {
            return 0.0;
        }
        self.points.iter().map(|p| p.1).sum::<f64>() / self.points.len() as f64
    }
}

/// The out-of-place (bytes, busbw) of an nccl-tests data row, `None` for other lines.
pub fn parse_row(line: &str) -> Option<(u64, f64)> {
    if line.trim_start().starts_with('#') {
        return None;
    }
    let f: Vec<&str> = line.split_whitespace().collect();
    if f.len() < 13 {
        return None;
    }
    Some((f[0].parse().ok()?, f[7].parse().ok()?))
}

/// The finished run with the highest mean busbw among runs of `coll` over the same sizes.
pub fn best<'a>(runs: &'a [Run], coll: &str) -> Option<&'a Run> {
    runs.iter()
        .filter(|r| r.coll == coll && r.status == Status::Done && !r.points.is_empty())
        .max_by(|a, b| a.avg().total_cmp(&b.avg()))
}

/// `run`'s settings as a YAML config (`rnccl env-explain --export yaml`'s format).
pub fn yaml(run: &Run) -> String {
    let mut cfg = Config::defaults();
    let why = format!(
        "rnccl tune: {} on {} ranks, mean busbw {:.2} GB/s",
        run.coll,
        run.ranks,
        run.avg()
    );
    for (k, v) in &run.settings {
        cfg.set(k, v.clone(), Source::Program(why.clone()));
    }
    rnccl::config::yaml::to_yaml(&cfg)
}

/// `run`'s settings as shell `export` lines.
pub fn exports(run: &Run) -> String {
    let mut out = format!(
        "# rnccl tune: {} on {} ranks, mean busbw {:.2} GB/s\n",
        run.coll,
        run.ranks,
        run.avg()
    );
    for (k, v) in &run.settings {
        out.push_str(&format!("export {k}='{}'\n", v.replace('\'', r"'\''")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn knob_values_are_checked_as_typed() {
        let mut f = Form::default();
        assert!(f.valid());
        let algo = Field::Knob(0);
        f.text_mut(algo).unwrap().push_str("Rign");
        let e = f.error(algo).expect("a misspelt algorithm");
        assert!(e.contains("NCCL_ALGO"), "{e}");
        *f.text_mut(algo).unwrap() = "Ring".into();
        assert_eq!(f.error(algo), None);
        *f.text_mut(Field::Knob(4)).unwrap() = "-3".into();
        assert!(f.error(Field::Knob(4)).is_some(), "NCCL_BUFFSIZE=-3");
        assert!(!f.valid());
        *f.text_mut(Field::Knob(4)).unwrap() = String::new();
        f.max_bytes = "512K".into();
        assert!(f.error(Field::MaxBytes).unwrap().contains("smaller"));
        f.max_bytes = "8M".into();
        assert_eq!(f.sizes(), 4, "1M 2M 4M 8M");
        f.ranks = "0".into();
        assert!(f.error(Field::Ranks).is_some());
        assert_eq!(parse_size("4G"), Some(4 << 30));
        assert_eq!(parse_size("x"), None);
    }

    #[test]
    fn rows_runs_and_the_best_settings() {
        let line = "     1048576        262144     float     sum      -1    341.2    3.07    3.07       0    330.0    3.18    3.18       0";
        assert_eq!(parse_row(line), Some((1048576, 3.07)));
        assert_eq!(parse_row("# Avg bus bandwidth    : 3.1"), None);
        let run = |settings: Vec<(&'static str, String)>, bw: f64| Run {
            coll: "all_reduce",
            settings,
            ranks: 2,
            points: vec![(1 << 20, bw), (2 << 20, bw + 1.0)],
            expected: 2,
            status: Status::Done,
        };
        let runs = vec![
            run(vec![], 3.0),
            run(vec![("NCCL_MIN_NCHANNELS", "4".into())], 5.0),
            Run {
                status: Status::Failed("boom".into()),
                ..run(vec![("NCCL_ALGO", "Tree".into())], 9.0)
            },
        ];
        let b = best(&runs, "all_reduce").unwrap();
        assert_eq!(b.label(), "MIN_NCHANNELS=4");
        assert_eq!(b.avg(), 5.5);
        let y = yaml(b);
        assert!(y.contains("NCCL_MIN_NCHANNELS: 4"), "{y}");
        let e = exports(b);
        assert!(e.contains("export NCCL_MIN_NCHANNELS='4'"), "{e}");
        assert_eq!(runs[0].label(), "defaults");
    }
}
