//! Plots as a user makes them: `rnccl bench --plot` on CPU ranks, and `rnccl plot` over an
//! anchor nccl-tests log, nccl-tests' JSON and a fresh rnccl JSON. The SVG files are read with
//! an XML parser; series are the plot's 2-pixel polylines (axes and ticks are 1 pixel), legend
//! entries and axis titles its text elements. PNG files are checked for their signature and
//! the size in their IHDR chunk.

mod common;

use std::path::Path;

use common::rnccl;

/// The axis titles the plots carry.
const SIZE_TITLE: &str = "size (bytes, log2 scale; K, M, G = 2^10, 2^20, 2^30)";
const BUSBW_TITLE: &str = "busbw (GB/s, 1 GB/s = 1e9 B/s)";
const TIME_TITLE: &str = "time (µs, log scale)";

/// The anchor log: nccl-tests' all_reduce_perf on two H200s, 16 sizes from 8 B to 8 GiB.
const ANCHOR: &str = "cli/tests/fixtures/plot/nccl_all_reduce.log";
const NCCL_JSON: &str = "cli/tests/fixtures/plot/nccl_tests.json";

/// What an SVG plot shows.
struct Svg {
    /// Points of each series' polyline, in drawing order.
    series: Vec<usize>,
    /// Every text element's content, trimmed.
    texts: Vec<String>,
}

fn read_svg(path: &Path) -> Svg {
    let text = std::fs::read_to_string(path).unwrap();
    let doc = roxmltree::Document::parse(&text).expect("the SVG parses as XML");
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    let series = doc
        .descendants()
        .filter(|n| n.has_tag_name("polyline") && n.attribute("stroke-width") == Some("2"))
        .map(|n| {
            n.attribute("points")
                .unwrap_or("")
                .split_whitespace()
                .count()
        })
        .collect();
    let texts = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(|n| n.text().unwrap_or("").trim().to_string())
        .collect();
    Svg { series, texts }
}

impl Svg {
    fn count(&self, text: &str) -> usize {
        self.texts.iter().filter(|t| *t == text).count()
    }
}

/// The PNG's width and height, after checking its signature and that IHDR comes first.
fn png_size(path: &Path) -> (u32, u32) {
    let b = std::fs::read(path).unwrap();
    assert_eq!(&b[..8], b"\x89PNG\r\n\x1a\n", "PNG signature");
    assert_eq!(&b[12..16], b"IHDR");
    let be = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    (be(16), be(20))
}

/// `rnccl bench` on 2 CPU thread ranks, 8 B to 1 KiB (8 sizes), with `extra` flags.
fn quick_bench(dir: &Path, extra: &[&str]) -> String {
    let out = rnccl()
        .current_dir(dir)
        .args([
            "bench",
            "--cpu",
            "--threads",
            "--ranks",
            "2",
            "-b",
            "8",
            "-e",
            "1K",
            "-n",
            "1",
            "-w",
            "0",
        ])
        .args(extra)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    String::from_utf8(out).unwrap()
}

fn abs(rel: &str) -> String {
    Path::new(common::ROOT).join(rel).display().to_string()
}

#[test]
fn bench_plot_svg_draws_busbw_and_time_for_both_places() {
    let dir = tempfile::tempdir().unwrap();
    let stdout = quick_bench(dir.path(), &["--plot", "bench.svg"]);
    assert!(stdout.contains("# Writing plot to bench.svg"), "{stdout}");
    let svg = read_svg(&dir.path().join("bench.svg"));
    // busbw then time, out-of-place and in-place each, a point per size.
    assert_eq!(svg.series, vec![8, 8, 8, 8]);
    assert_eq!(svg.count("out-of-place"), 2, "{:?}", svg.texts);
    assert_eq!(svg.count("in-place"), 2);
    assert_eq!(svg.count(BUSBW_TITLE), 1);
    assert_eq!(svg.count(TIME_TITLE), 1);
    assert_eq!(svg.count(SIZE_TITLE), 2);
    for label in ["8", "32", "128", "512"] {
        assert!(svg.count(label) >= 2, "size label {label}: {:?}", svg.texts);
    }
    let title = &svg.texts[0];
    for part in [
        "all_reduce_perf",
        "float",
        "sum",
        "2 ranks",
        "(host memory)",
    ] {
        assert!(
            title.contains(part),
            "{part} missing from the title {title:?}"
        );
    }
}

#[test]
fn bench_plot_png_has_the_requested_size() {
    let dir = tempfile::tempdir().unwrap();
    let stdout = quick_bench(
        dir.path(),
        &[
            "all_gather",
            "--plot",
            "g.png",
            "--plot-size",
            "800x600",
            "--format",
            "json",
        ],
    );
    assert_eq!(png_size(&dir.path().join("g.png")), (800, 600));
    // Standard output stays one JSON document.
    let doc: serde_json::Value = serde_json::from_str(&stdout).expect("stdout is JSON");
    assert_eq!(doc["results"].as_array().map(Vec::len), Some(8));
}

#[test]
fn plot_overlays_an_nccl_tests_log_and_an_rnccl_json() {
    let dir = tempfile::tempdir().unwrap();
    quick_bench(dir.path(), &["-J", "rnccl.json"]);
    let out = rnccl()
        .current_dir(dir.path())
        .args(["plot", &abs(ANCHOR), "rnccl.json", "-o", "cmp.svg"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    assert_eq!(String::from_utf8_lossy(&out), "cmp.svg: 2 curves\n");
    let svg = read_svg(&dir.path().join("cmp.svg"));
    assert_eq!(svg.series, vec![16, 8]);
    assert_eq!(svg.count("nccl_all_reduce"), 1, "{:?}", svg.texts);
    assert_eq!(svg.count("rnccl"), 1);
    assert_eq!(svg.count(BUSBW_TITLE), 1);
    assert_eq!(svg.count(SIZE_TITLE), 1);
    assert!(
        svg.count("8G") == 1 && svg.count("8") == 1,
        "{:?}",
        svg.texts
    );
    assert_eq!(
        svg.texts[0],
        "busbw (out-of-place) · all_reduce_perf · float · sum · 2 ranks"
    );

    // Labels, another metric and place, nccl-tests' JSON as a third file, PNG.
    rnccl()
        .current_dir(dir.path())
        .args(["plot", &abs(ANCHOR), "rnccl.json", &abs(NCCL_JSON)])
        .args(["--metric", "time", "--place", "in"])
        .args(["--label", "NCCL 2.28.9", "--label", "rnccl CPU"])
        .args(["-o", "time.svg"])
        .assert()
        .success();
    let svg = read_svg(&dir.path().join("time.svg"));
    assert_eq!(svg.series, vec![16, 8, 4]);
    for label in ["NCCL 2.28.9", "rnccl CPU", "nccl_tests", TIME_TITLE] {
        assert_eq!(svg.count(label), 1, "{label}: {:?}", svg.texts);
    }
    assert!(
        svg.texts[0].starts_with("time (in-place)"),
        "{}",
        svg.texts[0]
    );
    rnccl()
        .current_dir(dir.path())
        .args(["plot", &abs(ANCHOR), "-o", "a.PNG", "--size", "640x480"])
        .assert()
        .success();
    assert_eq!(png_size(&dir.path().join("a.PNG")), (640, 480));
}

/// Runs `rnccl plot args…` in `dir`, expecting failure, and returns standard error.
fn refused(dir: &Path, args: &[&str]) -> String {
    let out = rnccl()
        .current_dir(dir)
        .arg("plot")
        .args(args)
        .assert()
        .failure()
        .get_output()
        .stderr
        .clone();
    String::from_utf8(out).unwrap()
}

#[test]
fn bad_files_are_refused_with_file_line_and_what_was_expected() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("cut.log"),
        "# size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n\
         8 2 float sum -1 1.0 0.1 0.1 0\n",
    )
    .unwrap();
    std::fs::write(
        d.join("bad.json"),
        "{\"results\": [\n  {\"size\": \"big\"}\n]}\n",
    )
    .unwrap();
    std::fs::write(d.join("notes.txt"), "nothing to see here\n").unwrap();
    std::fs::write(
        d.join("mixed.log"),
        "       8     2  float  sum  -1vm:9:9 [0] NCCL INFO AllReduce: 8 Bytes -> Algo RING\n",
    )
    .unwrap();
    let cases: [(&[&str], &str); 7] = [
        (
            &["cut.log", "-o", "p.svg"],
            "cut.log:2: expected a table row of 13 columns (size count type redop root, then \
             time algbw busbw #wrong for out-of-place and in-place), found 9",
        ),
        (
            &["bad.json", "-o", "p.svg"],
            "bad.json:2: invalid type: string \"big\", expected u64",
        ),
        (
            &["notes.txt", "-o", "p.svg"],
            "notes.txt: no result rows; expected nccl-tests' (or rnccl bench's) text output",
        ),
        (
            &["mixed.log", "-o", "p.svg"],
            "NCCL_DEBUG lines on the same file?",
        ),
        (
            &["missing.json", "-o", "p.svg"],
            "missing.json: No such file",
        ),
        (
            &["notes.txt", "-o", "p.jpg"],
            "p.jpg: the plot's format comes from its extension: use FILE.svg or FILE.png",
        ),
        (
            &[
                &abs(NCCL_JSON),
                "-o",
                "p.svg",
                "--label",
                "a",
                "--label",
                "b",
            ],
            "--label was given 2 times for 1 files",
        ),
    ];
    for (args, want) in cases {
        let stderr = refused(d, args);
        assert!(stderr.contains(want), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    assert!(!d.join("p.svg").exists() && !d.join("p.jpg").exists());
}

#[test]
fn a_file_without_the_chosen_place_says_which_to_use() {
    let dir = tempfile::tempdir().unwrap();
    // nccl-tests' trace replay prints in-place columns only.
    std::fs::write(
        dir.path().join("replay.log"),
        format!(
            "# size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n\
             1024 256 float sum -1{}   5.0 0.2 0.2 0\n",
            " ".repeat(32)
        ),
    )
    .unwrap();
    let stderr = refused(dir.path(), &["replay.log", "-o", "r.svg"]);
    assert!(
        stderr.contains("replay.log: no out-of-place measurements in any row; try --place in"),
        "{stderr}"
    );
    rnccl()
        .current_dir(dir.path())
        .args(["plot", "replay.log", "--place", "in", "-o", "r.svg"])
        .assert()
        .success();
    assert_eq!(read_svg(&dir.path().join("r.svg")).series, vec![1]);
}

#[test]
fn bench_refuses_an_unknown_plot_format_before_running() {
    let dir = tempfile::tempdir().unwrap();
    let out = rnccl()
        .current_dir(dir.path())
        .args([
            "bench",
            "--cpu",
            "--threads",
            "--ranks",
            "2",
            "--plot",
            "x.gif",
        ])
        .assert()
        .failure()
        .get_output()
        .clone();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("use FILE.svg or FILE.png"), "{stderr}");
    assert!(out.stdout.is_empty(), "nothing ran");
}
