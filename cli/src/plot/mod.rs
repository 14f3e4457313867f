//! Plots of benchmark results: `rnccl bench --plot FILE` draws its own run (busbw and time
//! against size, out-of-place and in-place), and `rnccl plot A B … -o FILE` overlays saved
//! runs — rnccl's JSON, nccl-tests' JSON and nccl-tests' text output — so rnccl and NCCL can be
//! compared as curves. Reading files into curves is [`read`], the curves themselves
//! [`curve`], axes [`axis`], the drawing [`draw`].

mod axis;
mod curve;
mod draw;
mod read;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use rnccl::bench::{BenchRow, RankPlace};

use crate::GlobalOpts;
use curve::{Curve, describe, from_bench, labels};
pub use curve::{Metric, Place};
use draw::{Drawn, Figure, Line, Panel};
pub use draw::{ImageSize, image_path};

/// Arguments of `rnccl plot`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Each file is read by its content: a JSON document (rnccl bench -J FILE or \
--format json, nccl-tests' -J FILE) or text (the output of nccl-tests or rnccl bench; NCCL INFO \
lines and launcher prefixes are skipped). A file becomes one curve, or one per data type, \
operation, root or run when it holds several.\n\nExamples:\n  \
rnccl bench -e 1G -J rnccl.json && all_reduce_perf -b 8 -e 1G > nccl.log\n  \
rnccl plot rnccl.json nccl.log -o busbw.svg\n  \
rnccl plot rnccl.json nccl.log --metric time --place in -o time.png --size 1600x900\n  \
rnccl plot a.json b.json --label 'NCCL_PROTO=LL' --label 'NCCL_PROTO=Simple' -o proto.svg"
)]
pub struct Args {
    /// Result files: rnccl or nccl-tests JSON (-J), or nccl-tests / rnccl bench text output.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// The image to write: FILE.svg or FILE.png.
    #[arg(short = 'o', long = "output", value_name = "FILE", value_parser = image_path)]
    pub output: PathBuf,
    /// What to draw against size: busbw or algbw (GB/s = 1e9 B/s), or time (µs).
    #[arg(long, value_enum, default_value_t = Metric::Busbw)]
    pub metric: Metric,
    /// Which measurement of each row: out-of-place or in-place.
    #[arg(long, value_enum, default_value_t = Place::Out)]
    pub place: Place,
    /// Legend label of a file, given once per file in the files' order [default: the file's
    /// name without its extension].
    #[arg(long = "label", value_name = "NAME")]
    pub labels: Vec<String>,
    /// The title [default: the metric and what every run shares: collective, type, operation,
    /// ranks, hosts and devices].
    #[arg(long)]
    pub title: Option<String>,
    /// Image size in pixels.
    #[arg(long, value_name = "WxH", default_value = "1200x750")]
    pub size: ImageSize,
}

/// The legend name of each file: its `--label`, else its name without extension, else (when
/// two files share that name) its path as given.
fn base_labels(files: &[PathBuf], given: &[String]) -> Vec<String> {
    let stem = |p: &Path| {
        p.file_stem().map_or_else(
            || p.display().to_string(),
            |s| s.to_string_lossy().into_owned(),
        )
    };
    let stems: Vec<String> = files.iter().map(|p| stem(p)).collect();
    files
        .iter()
        .enumerate()
        .map(|(i, p)| match given.get(i) {
            Some(l) => l.clone(),
            None if stems.iter().filter(|s| **s == stems[i]).count() > 1 => p.display().to_string(),
            None => stems[i].clone(),
        })
        .collect()
}

/// Tells on stderr what a log axis could not show.
fn note_left_out(drawn: Drawn, path: &Path) {
    if drawn.left_out > 0 {
        eprintln!(
            "rnccl: note: {} point{} left out of {}: a log axis has no place for size 0 (or a \
             time of 0)",
            drawn.left_out,
            if drawn.left_out == 1 { " is" } else { "s are" },
            path.display()
        );
    }
}

/// Runs `rnccl plot`: reads every file, draws the chosen metric of each curve into one chart.
///
/// Errors: more labels than files, a file that cannot be read or parsed (named with its line),
/// a file without measurements of the chosen place, or an image that cannot be written.
pub fn run(args: Args, _global: &GlobalOpts) -> anyhow::Result<ExitCode> {
    if args.labels.len() > args.files.len() {
        anyhow::bail!(
            "--label was given {} times for {} files: give at most one per file, in the files' order",
            args.labels.len(),
            args.files.len()
        );
    }
    let bases = base_labels(&args.files, &args.labels);
    let mut lines = Vec::new();
    let mut all: Vec<Curve> = Vec::new();
    for (path, base) in args.files.iter().zip(&bases) {
        let curves = read::read_file(path)?;
        let before = lines.len();
        for (c, label) in curves.iter().zip(labels(base, &curves)) {
            let points = c.values(args.place, args.metric);
            if !points.is_empty() {
                lines.push(Line { label, points });
            }
        }
        if lines.len() == before {
            let other = match args.place {
                Place::Out => "in",
                Place::In => "out",
            };
            anyhow::bail!(
                "{}: no {} measurements in any row; try --place {other}",
                path.display(),
                args.place.name(),
            );
        }
        all.extend(curves);
    }
    let title = args.title.unwrap_or_else(|| {
        let shared = describe(&all);
        let head = format!("{} ({})", args.metric.name(), args.place.name());
        if shared.is_empty() {
            head
        } else {
            format!("{head} · {shared}")
        }
    });
    let n = lines.len();
    let fig = Figure {
        title,
        panels: vec![Panel {
            metric: args.metric,
            lines,
        }],
    };
    let drawn = draw::write(&fig, &args.output, args.size)?;
    note_left_out(drawn, &args.output);
    println!(
        "{}: {n} curve{}",
        args.output.display(),
        if n == 1 { "" } else { "s" }
    );
    Ok(ExitCode::SUCCESS)
}

/// The figure of one bench run: busbw over time, each with out-of-place and in-place curves
/// (per data type, operation and root when the run swept several), titled with the collective,
/// type, operation, ranks, hosts and devices.
fn bench_figure(curves: &[Curve]) -> Figure {
    let panel = |metric: Metric| Panel {
        metric,
        lines: curves
            .iter()
            .flat_map(|c| {
                [Place::Out, Place::In].map(|place| Line {
                    label: if curves.len() > 1 {
                        format!("{} {}", c.key_label(), place.name())
                    } else {
                        place.name().to_string()
                    },
                    points: c.values(place, metric),
                })
            })
            .collect(),
    };
    Figure {
        title: describe(curves),
        panels: vec![panel(Metric::Busbw), panel(Metric::Time)],
    }
}

/// `rnccl bench --plot`: draws the run's `rows` into `path`. `test` is nccl-tests' test name,
/// `places` every rank's place (for the title's hosts and devices).
///
/// Errors: nothing to draw (every size 0) or the image cannot be written.
pub fn write_bench_plot(
    path: &Path,
    size: ImageSize,
    rows: &[BenchRow],
    test: &str,
    nranks: usize,
    places: &[RankPlace],
) -> anyhow::Result<()> {
    let curves = from_bench(rows, test, nranks, places);
    let drawn = draw::write(&bench_figure(&curves), path, size)?;
    note_left_out(drawn, path);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_default_to_stems_and_paths_when_stems_collide() {
        let files: Vec<PathBuf> = ["a/run.json", "b/run.json", "nccl.log", "x.json"]
            .iter()
            .map(PathBuf::from)
            .collect();
        assert_eq!(
            base_labels(&files, &["mine".to_string()]),
            vec!["mine", "b/run.json", "nccl", "x"]
        );
    }

    #[test]
    fn a_bench_figure_has_busbw_and_time_panels_with_both_places() {
        use rnccl::bench::Measure;
        let m = |t: f64| Measure {
            time_us: t,
            algbw: 1.0,
            busbw: 2.0,
            wrong: Some(0),
        };
        let rows: Vec<BenchRow> = [8usize, 64]
            .iter()
            .map(|&size| BenchRow {
                size,
                count: size / 4,
                dtype: rnccl::DataType::Float32,
                op: Some(rnccl::RedOp::Sum),
                root: None,
                out_of_place: m(3.0),
                in_place: m(4.0),
            })
            .collect();
        let fig = bench_figure(&from_bench(&rows, "all_reduce_perf", 2, &[]));
        assert_eq!(fig.title, "all_reduce_perf · float · sum · 2 ranks");
        let metrics: Vec<Metric> = fig.panels.iter().map(|p| p.metric).collect();
        assert_eq!(metrics, vec![Metric::Busbw, Metric::Time]);
        let time = &fig.panels[1];
        assert_eq!(time.lines[0].label, "out-of-place");
        assert_eq!(time.lines[1].points, vec![(8, 4.0), (64, 4.0)]);
    }
}
