//! nccl-tests' text output (nccl-tests 2.19 `src/util.cu`: `writeDeviceReport`,
//! `writeResultHeader`, `writeBenchmarkLine*`, `writeResultFooter`), which `rnccl bench`
//! prints too. Rows are `size count type redop root`, then `time algbw busbw #wrong` for
//! out-of-place and again for in-place; the column header line, when present, says where
//! those columns are (it gains `i_min i_max i_p99 i_cv%` per side with per-iteration timing,
//! and a trailing date with `timestamp`). A row whose out-of-place columns are blank (trace
//! replay) holds in-place columns only.
//!
//! Lines that are not rows are skipped (NCCL's INFO lines, `NCCL version …`), except that a
//! line starting with a whole number is taken as a row and must be one. A new run starts at
//! `# Collective test starting`, after a table's footer, or where a size comes back for the
//! same type, operation and root; each run's rows become curves by type, operation and root.
//! Launcher prefixes (`mpirun --tag-output`'s `[1,0]<stdout>:`, `srun --label`'s `0: `) are
//! removed first.

use std::collections::HashSet;

use super::Failure;
use crate::plot::curve::{Curve, Point, RunInfo, Side, group};

/// Where a row's columns are.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Layout {
    /// Columns of a full row (without a timestamp).
    width: usize,
    /// Index of the out-of-place `time` column, if the table has one.
    out: Option<usize>,
    /// Index of the in-place `time` column.
    inp: usize,
    /// Columns per side (4, or 8 with per-iteration timing).
    side: usize,
    /// Rows end in a `YYYY-MM-DD HH:MM:SS` timestamp (two more words).
    timestamp: bool,
}

/// The columns of nccl-tests' usual table.
const STANDARD: Layout = Layout {
    width: 13,
    out: Some(5),
    inp: 9,
    side: 4,
    timestamp: false,
};

/// The row's leading columns, in order.
const KEY_COLUMNS: [&str; 5] = ["size", "count", "type", "redop", "root"];

impl Layout {
    /// The layout a column header line announces (`words`: the line's words after `#`,
    /// starting with `size`).
    fn from_header(words: &[&str]) -> Result<Layout, String> {
        let bad = || {
            format!(
                "a table header nccl-tests does not print: expected `size count type redop \
                 root` then `time algbw busbw #wrong` (or `cputime …`) for out-of-place and \
                 in-place, found `{}`",
                words.join(" ")
            )
        };
        if words.len() < KEY_COLUMNS.len() || words[..5] != KEY_COLUMNS {
            return Err(bad());
        }
        let times: Vec<usize> = (5..words.len())
            .filter(|&i| matches!(words[i], "time" | "cputime"))
            .collect();
        let sides_ok = times.iter().all(|&i| {
            words.get(i + 1) == Some(&"algbw")
                && words.get(i + 2) == Some(&"busbw")
                && words.get(i + 3) == Some(&"#wrong")
        });
        let timestamp = words.last() == Some(&"timestamp");
        let width = words.len() - usize::from(timestamp);
        match times.as_slice() {
            [out, inp] if sides_ok => Ok(Layout {
                width,
                out: Some(*out),
                inp: *inp,
                side: inp - out,
                timestamp,
            }),
            [inp] if sides_ok => Ok(Layout {
                width,
                out: None,
                inp: *inp,
                side: width - inp,
                timestamp,
            }),
            _ => Err(bad()),
        }
    }

    /// Whether `n` words (less a timestamp) make `columns` columns.
    fn fits(&self, n: usize, columns: usize) -> bool {
        n == columns || (self.timestamp && n == columns + 2)
    }
}

/// Removes a launcher's output prefix: `[1,0]<stdout>:` (mpirun --tag-output) or `12: `
/// (srun --label).
fn strip_launcher_prefix(line: &str) -> &str {
    let t = line.trim_start();
    if t.starts_with('[')
        && let Some(i) = t.find("]<stdout>:")
    {
        return &t[i + "]<stdout>:".len()..];
    }
    if let Some((head, rest)) = t.split_once(": ")
        && !head.is_empty()
        && head.bytes().all(|b| b.is_ascii_digit())
    {
        return rest;
    }
    t
}

/// A whole number column.
fn whole<T: std::str::FromStr>(word: &str, column: &str, what: &str) -> Result<T, String> {
    word.parse()
        .map_err(|_| format!("{column}: expected {what}, found `{word}`"))
}

/// A finite number column.
fn number(word: &str, column: &str, unit: &str) -> Result<f64, String> {
    match word.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(format!(
            "{column}: expected a number ({unit}), found `{word}`"
        )),
    }
}

/// One side's `time algbw busbw #wrong` columns.
fn side(words: &[&str], at: usize, name: &str) -> Result<Side, String> {
    let get = |k: usize| words.get(at + k).copied().unwrap_or("");
    let wrong = get(3);
    if wrong != "N/A" && wrong.parse::<f64>().is_err() {
        return Err(format!(
            "{name} #wrong: expected a count or N/A, found `{wrong}`"
        ));
    }
    Ok(Side {
        time_us: number(get(0), &format!("{name} time"), "µs")?,
        algbw: number(get(1), &format!("{name} algbw"), "GB/s")?,
        busbw: number(get(2), &format!("{name} busbw"), "GB/s")?,
    })
}

/// A row as `(type, redop, root, point)`.
type Row = (String, String, i64, Point);

/// Blanks that stand for the out-of-place columns of a trace-replay row: nccl-tests prints 32
/// spaces there, so the gap after `root` is much wider than a column's.
const BLANK_SIDE: usize = 30;

/// The words of `line` and the blanks after the 5th (root) word.
fn words_and_gap(line: &str) -> (Vec<&str>, usize) {
    let mut words = Vec::new();
    let mut gap = 0;
    let mut rest = line;
    loop {
        let trimmed = rest.trim_start();
        if words.len() == KEY_COLUMNS.len() {
            gap = rest.len() - trimmed.len();
        }
        let Some(word) = trimmed.split_whitespace().next() else {
            break;
        };
        words.push(word);
        rest = &trimmed[word.len()..];
    }
    (words, gap)
}

/// Parses a data row with `layout`.
fn row(line: &str, layout: &Layout) -> Result<Row, String> {
    let (words, gap) = words_and_gap(line);
    let n = words.len();
    let (out, inp) = if layout.fits(n, layout.width) {
        (layout.out, layout.inp)
    } else if layout.out.is_some()
        && layout.fits(n, KEY_COLUMNS.len() + layout.side)
        && gap >= BLANK_SIDE
    {
        (None, KEY_COLUMNS.len())
    } else {
        let sides = if layout.out.is_some() {
            "out-of-place and in-place"
        } else {
            "in-place"
        };
        let interleaved = if words.iter().any(|w| w.contains("NCCL")) {
            "; other output is mixed into the row (NCCL_DEBUG lines on the same file?): keep the \
             table apart, e.g. NCCL_DEBUG_FILE=nccl.%h.%p or 2>errors.log"
        } else {
            ""
        };
        return Err(format!(
            "expected a table row of {} columns (size count type redop root, then time algbw \
             busbw #wrong{} for {sides}), found {n}{interleaved}",
            layout.width,
            if layout.side > 4 {
                " i_min i_max i_p99 i_cv%"
            } else {
                ""
            },
        ));
    };
    let size: u64 = whole(words[0], "size", "a whole number of bytes")?;
    let _count: u64 = whole(words[1], "count", "a whole number of elements")?;
    let root: i64 = whole(words[4], "root", "a rank number or -1")?;
    let out_of_place = out.map(|at| side(&words, at, "out-of-place")).transpose()?;
    let in_place = Some(side(&words, inp, "in-place")?);
    Ok((
        words[2].to_string(),
        words[3].to_string(),
        root,
        Point {
            size,
            out_of_place,
            in_place,
        },
    ))
}

/// The host and device name of a `#  Rank  0 Group  0 Pid 1609 on vm device  0 [0000:00:06]
/// NVIDIA H200` line (after `#`), if it has that shape.
fn device_line(text: &str) -> Option<(&str, &str)> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let on = words.iter().position(|w| *w == "on")?;
    let host = words.get(on + 1)?;
    let name = text.split_once(']').map_or("", |(_, n)| n.trim());
    Some((host, name))
}

/// The run being read: its description and rows.
#[derive(Default)]
struct Table {
    info: RunInfo,
    rows: Vec<Row>,
    seen: HashSet<(String, String, i64, u64)>,
}

/// Parses nccl-tests' text output into curves.
pub(super) fn parse(text: &str) -> Result<Vec<Curve>, Failure> {
    let mut curves = Vec::new();
    let mut runs = 0;
    let mut info = RunInfo::default();
    let mut layout = STANDARD;
    let mut table = Table::default();
    let mut close = |table: &mut Table, curves: &mut Vec<Curve>| {
        if !table.rows.is_empty() {
            curves.extend(group(&table.info, runs, table.rows.drain(..)));
            table.seen.clear();
            runs += 1;
        }
    };
    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        let line = strip_launcher_prefix(raw).trim();
        if let Some(comment) = line.strip_prefix('#') {
            let comment = comment.trim();
            let words: Vec<&str> = comment.split_whitespace().collect();
            if let Some(name) = comment.strip_prefix("Collective test starting:") {
                close(&mut table, &mut curves);
                info = RunInfo {
                    collective: Some(name.trim().to_string()),
                    ..RunInfo::default()
                };
            } else if comment.starts_with("Using devices") {
                info.hosts.clear();
                info.devices.clear();
                info.nranks = None;
            } else if words.first() == Some(&"Rank") {
                if let Some((host, name)) = device_line(comment) {
                    info.add_rank(host, name);
                    info.nranks = Some(info.nranks.unwrap_or(0) + 1);
                }
            } else if words.first() == Some(&"size") {
                layout = Layout::from_header(&words).map_err(|e| Failure::at(line_no, e))?;
            } else if [
                "Out of bounds values",
                "Avg bus bandwidth",
                "Collective test concluded",
            ]
            .iter()
            .any(|p| comment.starts_with(p))
            {
                close(&mut table, &mut curves);
            }
            continue;
        }
        let is_row = line
            .split_whitespace()
            .next()
            .is_some_and(|w| w.bytes().all(|b| b.is_ascii_digit()));
        if !is_row {
            continue;
        }
        let r = row(line, &layout).map_err(|e| Failure::at(line_no, e))?;
        let key = (r.0.clone(), r.1.clone(), r.2, r.3.size);
        if table.seen.contains(&key) {
            close(&mut table, &mut curves);
        }
        if table.rows.is_empty() {
            table.info = info.clone();
        }
        table.seen.insert(key);
        table.rows.push(r);
    }
    close(&mut table, &mut curves);
    Ok(curves)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plot::curve::{Metric, Place};

    const ANCHOR: &str = "\
# nccl-tests version 2.19.6 nccl-headers=22809 nccl-library=22809
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 2 minBytes 8 maxBytes 8589934592 step: 4(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0
#
# Using devices
#  Rank  0 Group  0 Pid   1392 on         vm device  0 [0000:00:06] NVIDIA H200
#  Rank  1 Group  0 Pid   1392 on         vm device  1 [0000:00:07] NVIDIA H200
#
#                                                              out-of-place                       in-place          
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong 
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)         
           8             2     float     sum      -1    19.71    0.00    0.00       0    20.08    0.00    0.00       0
          32             8     float     sum      -1    20.79    0.00    0.00       0    20.17    0.00    0.00       0
  8589934592    2147483648     float     sum      -1  24844.6  345.75  345.75       0  25110.0  342.09  342.09       0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 111.146 
#
# Collective test concluded: all_reduce_perf
#
";

    #[test]
    fn nccl_tests_table_with_its_header() {
        let curves = parse(ANCHOR).unwrap();
        assert_eq!(curves.len(), 1);
        let c = &curves[0];
        assert_eq!(c.info.collective.as_deref(), Some("all_reduce_perf"));
        assert_eq!(c.info.nranks, Some(2));
        assert_eq!(c.info.hosts, vec!["vm"]);
        assert_eq!(c.info.devices, vec!["NVIDIA H200"]);
        assert_eq!(
            (c.dtype.as_str(), c.redop.as_str(), c.root),
            ("float", "sum", -1)
        );
        assert_eq!(
            c.values(Place::Out, Metric::Time),
            vec![(8, 19.71), (32, 20.79), (8_589_934_592, 24844.6)]
        );
        assert_eq!(
            c.values(Place::In, Metric::Busbw),
            vec![(8, 0.0), (32, 0.0), (8_589_934_592, 342.09)]
        );
    }

    #[test]
    fn noise_is_skipped_and_runs_split() {
        // NCCL INFO lines between rows, a second headerless table after the footer, mpirun's
        // and srun's prefixes.
        let text = format!(
            "{ANCHOR}vm:1372:1383 [0] NCCL INFO Using network Socket\nNCCL version 2.28.9+cuda13.0\n\
             [1,0]<stdout>:         512           128     float     sum      -1     9.97    0.05    0.05       0    11.57    0.04    0.04       0\n\
             0:        4096          1024     float     sum      -1    11.45    0.36    0.36       0    10.49    0.39    0.39       0\n"
        );
        let curves = parse(&text).unwrap();
        assert_eq!(curves.len(), 2);
        assert_eq!(curves[1].run, 1);
        assert_eq!(curves[1].points.len(), 2);
        // The headerless run keeps what the file said last about the test.
        assert_eq!(
            curves[1].info.collective.as_deref(),
            Some("all_reduce_perf")
        );
    }

    #[test]
    fn a_size_coming_back_starts_a_new_run() {
        let row = "8 2 float sum -1 1.0 0.01 0.01 0 1.0 0.01 0.01 0\n";
        let curves = parse(&format!("{row}{row}")).unwrap();
        assert_eq!(curves.len(), 2);
    }

    #[test]
    fn type_op_and_root_make_separate_curves() {
        let text = "\
8 2 float sum -1 1 0 0 0 1 0 0 0
8 4 half sum -1 1 0 0 0 1 0 0 0
16 4 float sum -1 1 0 0 0 1 0 0 0
8 2 float none 1 1 0 0 0 1 0 0 N/A
";
        let curves = parse(text).unwrap();
        let keys: Vec<String> = curves.iter().map(|c| c.key_label()).collect();
        assert_eq!(keys, vec!["float sum", "half sum", "float root 1"]);
        assert_eq!(curves[0].points.len(), 2);
    }

    #[test]
    fn per_iteration_timestamp_and_trace_replay_layouts() {
        let header = "#       size  count  type  redop  root  time  algbw  busbw  #wrong  i_min  i_max  i_p99  i_cv%  time  algbw  busbw  #wrong  i_min  i_max  i_p99  i_cv%  timestamp";
        let full = "  1024  256  float  sum  -1  5.0  0.2  0.3  0  4  6  6  1.5  7.0  0.1  0.15  0  4  6  6  1.5  2026-01-02 03:04:05";
        let replay = format!(
            "  2048  512  float  sum  -1{}  9.0  0.2  0.4  0  4  6  6  1.5",
            " ".repeat(32)
        );
        let curves = parse(&format!("{header}\n{full}\n{replay}\n")).unwrap();
        let c = &curves[0];
        assert_eq!(c.values(Place::Out, Metric::Busbw), vec![(1024, 0.3)]);
        assert_eq!(
            c.values(Place::In, Metric::Time),
            vec![(1024, 7.0), (2048, 9.0)]
        );
        let cpu = "# size count type redop root cputime algbw busbw #wrong cputime algbw busbw #wrong\n8 2 float sum -1 3 0 0 0 4 0 0 0\n";
        assert_eq!(
            parse(cpu).unwrap()[0].values(Place::In, Metric::Time),
            vec![(8, 4.0)]
        );
    }

    #[test]
    fn malformed_rows_say_where_and_what() {
        let cases = [
            ("8 2 float\n", 1, "expected a table row of 13 columns"),
            // Cut short after the out-of-place columns: not a trace-replay row.
            ("8 2 float sum -1 1.0 0.1 0.1 0\n", 1, "found 9"),
            (
                "# x\n8 2 float sum -1 abc 0 0 0 1 0 0 0\n",
                2,
                "out-of-place time: expected a number (µs), found `abc`",
            ),
            (
                "8 2 float sum -1 1 0 0 0 1 0 nan 0\n",
                1,
                "in-place busbw: expected a number (GB/s), found `nan`",
            ),
            (
                "8 x float sum -1 1 0 0 0 1 0 0 0\n",
                1,
                "count: expected a whole number of elements, found `x`",
            ),
            (
                "8 2 float sum r 1 0 0 0 1 0 0 0\n",
                1,
                "root: expected a rank number or -1",
            ),
            (
                "8 2 float sum -1 1 0 0 0 1 0 0 many\n",
                1,
                "in-place #wrong: expected a count or N/A",
            ),
            (
                "8 2 float sum -1vm:1:1 [0] NCCL INFO AllReduce: 8 Bytes\n",
                1,
                "NCCL_DEBUG lines on the same file?",
            ),
            (
                "\n# size count type redop root bandwidth\n",
                2,
                "a table header nccl-tests does not print",
            ),
        ];
        for (text, line, what) in cases {
            let f = parse(text).unwrap_err();
            assert_eq!(f.line, Some(line), "{text:?}: {}", f.what);
            assert!(f.what.contains(what), "{text:?}: {}", f.what);
        }
    }
}
