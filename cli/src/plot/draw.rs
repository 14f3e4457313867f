//! Drawing figures with plotters: one or more panels stacked vertically, each a chart of
//! curves against message size on a log2 axis, written as SVG or PNG (chosen by the file's
//! extension). Text is laid out and drawn with the bundled DejaVu Sans (`cli/fonts/`,
//! Bitstream Vera licence) through plotters' ab_glyph backend, so no system font or font
//! library is involved; PNG files are encoded with the png crate.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::OnceLock;

use anyhow::Context;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::output_file::write_whole;

use super::axis::{Axis, linear_axis, linear_label, log_axis, log_label, size_axis, size_label};
use super::curve::Metric;

/// The x axis' title.
pub const SIZE_TITLE: &str = "size (bytes, log2 scale; K, M, G = 2^10, 2^20, 2^30)";

/// The bundled font (DejaVu Sans 2.37; licence in `cli/fonts/LICENSE-DejaVu.txt`).
static FONT: &[u8] = include_bytes!("../../fonts/DejaVuSans.ttf");

/// The family every text of a figure uses.
const FAMILY: &str = "sans-serif";

/// Line colours, one per curve in turn (Tableau 10).
const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// An image file's format, from its extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageFormat {
    /// `.svg`: vector text.
    Svg,
    /// `.png`: RGB bitmap.
    Png,
}

impl ImageFormat {
    /// The format of `path` (`.svg` or `.png`, any case).
    ///
    /// Errors: another or no extension, with what is accepted.
    pub fn of(path: &Path) -> Result<ImageFormat, String> {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        match ext.as_deref() {
            Some("svg") => Ok(ImageFormat::Svg),
            Some("png") => Ok(ImageFormat::Png),
            _ => Err(format!(
                "{}: the plot's format comes from its extension: use FILE.svg or FILE.png",
                path.display()
            )),
        }
    }
}

/// A clap value parser for an image path: the path, once its extension is `.svg` or `.png`.
pub fn image_path(s: &str) -> Result<PathBuf, String> {
    let p = PathBuf::from(s);
    ImageFormat::of(&p)?;
    Ok(p)
}

/// An image's size in pixels, written `WIDTHxHEIGHT` (`1200x800`), each from 200 to 10000.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageSize {
    /// Width, pixels.
    pub width: u32,
    /// Height, pixels.
    pub height: u32,
}

impl FromStr for ImageSize {
    type Err = String;

    fn from_str(s: &str) -> Result<ImageSize, String> {
        let bad =
            || format!("`{s}` is not WIDTHxHEIGHT in pixels (e.g. 1200x800), each 200 to 10000");
        let (w, h) = s.split_once(['x', 'X']).ok_or_else(bad)?;
        let w: u32 = w.trim().parse().map_err(|_| bad())?;
        let h: u32 = h.trim().parse().map_err(|_| bad())?;
        if !(200..=10_000).contains(&w) || !(200..=10_000).contains(&h) {
            return Err(bad());
        }
        Ok(ImageSize {
            width: w,
            height: h,
        })
    }
}

impl fmt::Display for ImageSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}", self.width, self.height)
    }
}

/// One curve of a panel: its legend label and `(size in bytes, value)` points.
#[derive(Debug, Clone)]
pub struct Line {
    /// Legend label.
    pub label: String,
    /// Points, by increasing size.
    pub points: Vec<(u64, f64)>,
}

/// One chart: a metric against size, with its curves.
#[derive(Debug, Clone)]
pub struct Panel {
    /// What the y axis shows.
    pub metric: Metric,
    /// The curves.
    pub lines: Vec<Line>,
}

/// A whole image: a title over panels stacked top to bottom.
#[derive(Debug, Clone)]
pub struct Figure {
    /// The title.
    pub title: String,
    /// The panels.
    pub panels: Vec<Panel>,
}

/// What drawing left out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Drawn {
    /// Points that have no place on a log axis: size 0, or a time of 0 or less.
    pub left_out: usize,
}

/// A panel in axis coordinates: x = log2(bytes), y = the value or log10 of it.
struct Prepared {
    metric: Metric,
    x: Axis,
    y: Axis,
    lines: Vec<(String, Vec<(f64, f64)>)>,
}

fn prepare(panel: &Panel, left_out: &mut usize) -> Option<Prepared> {
    let log = panel.metric.log_scale();
    let mut lines = Vec::new();
    for line in &panel.lines {
        let pts: Vec<(f64, f64)> = line
            .points
            .iter()
            .filter(|&&(size, v)| size > 0 && v.is_finite() && (!log || v > 0.0))
            .map(|&(size, v)| ((size as f64).log2(), if log { v.log10() } else { v }))
            .collect();
        *left_out += line.points.len() - pts.len();
        if !pts.is_empty() {
            lines.push((line.label.clone(), pts));
        }
    }
    if lines.is_empty() {
        return None;
    }
    let all = || lines.iter().flat_map(|(_, p)| p.iter());
    let (xmin, xmax) = all().fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.0), b.max(p.0)));
    let (ymin, ymax) = all().fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.1), b.max(p.1)));
    let x = size_axis(xmin, xmax);
    let y = if log {
        log_axis(ymin, ymax)
    } else {
        linear_axis(ymax)
    };
    Some(Prepared {
        metric: panel.metric,
        x,
        y,
        lines,
    })
}

/// Registers the bundled font for [`FAMILY`], once.
fn register_font() -> anyhow::Result<()> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED
        .get_or_init(|| plotters::style::register_font(FAMILY, FontStyle::Normal, FONT).is_ok());
    anyhow::ensure!(ok, "the bundled font cannot be read");
    Ok(())
}

type DrawResult<DB> = Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

fn draw_panel<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, p: &Prepared) -> DrawResult<DB> {
    let log = p.metric.log_scale();
    let mut chart = ChartBuilder::on(area)
        .margin(12)
        .margin_right(28)
        .x_label_area_size(52)
        .y_label_area_size(80)
        .build_cartesian_2d(p.x.clone(), p.y.clone())?;
    let y_label = move |v: &f64| if log { log_label(*v) } else { linear_label(*v) };
    chart
        .configure_mesh()
        .x_desc(SIZE_TITLE)
        .y_desc(p.metric.axis_title())
        .x_label_formatter(&|v| size_label(*v))
        .y_label_formatter(&y_label)
        .label_style((FAMILY, 14))
        .axis_desc_style((FAMILY, 16))
        .bold_line_style(RGBColor(205, 205, 205))
        .light_line_style(RGBColor(238, 238, 238))
        .draw()?;
    for (i, (label, pts)) in p.lines.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))?
            .label(label.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 18, y + 5)], color.filled()));
        chart.draw_series(pts.iter().map(|&pt| Circle::new(pt, 3, color.filled())))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font((FAMILY, 14))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.4))
        .draw()?;
    Ok(())
}

fn draw_figure<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    title: &str,
    panels: &[Prepared],
) -> DrawResult<DB> {
    root.fill(&WHITE)?;
    let body = root.titled(title, (FAMILY, 20))?;
    for (area, p) in body.split_evenly((panels.len(), 1)).iter().zip(panels) {
        draw_panel(area, p)?;
    }
    root.present()
}

/// Draws `fig` at `size` into `path`, as SVG or PNG by its extension.
///
/// Errors: the extension is neither, no panel has a point to draw (every size 0), drawing
/// fails, or the file cannot be written.
pub fn write(fig: &Figure, path: &Path, size: ImageSize) -> anyhow::Result<Drawn> {
    let format = ImageFormat::of(path).map_err(anyhow::Error::msg)?;
    register_font()?;
    let mut drawn = Drawn::default();
    let panels: Vec<Prepared> = fig
        .panels
        .iter()
        .filter_map(|p| prepare(p, &mut drawn.left_out))
        .collect();
    if panels.is_empty() {
        anyhow::bail!(
            "nothing to draw into {}: no row has a size above 0 (and, for time, a time above 0)",
            path.display()
        );
    }
    let dims = (size.width, size.height);
    let fail = |e: String| anyhow::anyhow!("drawing {}: {e}", path.display());
    let bytes = match format {
        ImageFormat::Svg => {
            let mut svg = String::new();
            draw_figure(
                SVGBackend::with_string(&mut svg, dims).into_drawing_area(),
                &fig.title,
                &panels,
            )
            .map_err(|e| fail(e.to_string()))?;
            svg.into_bytes()
        }
        ImageFormat::Png => {
            let mut rgb = vec![0u8; size.width as usize * size.height as usize * 3];
            draw_figure(
                BitMapBackend::with_buffer(&mut rgb, dims).into_drawing_area(),
                &fig.title,
                &panels,
            )
            .map_err(|e| fail(e.to_string()))?;
            encode_png(&rgb, size).map_err(|e| fail(e.to_string()))?
        }
    };
    write_whole(path, &bytes).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(drawn)
}

/// An RGB8 buffer as a PNG file's bytes.
fn encode_png(rgb: &[u8], size: ImageSize) -> Result<Vec<u8>, png::EncodingError> {
    let mut out = Vec::new();
    let mut enc = png::Encoder::new(&mut out, size.width, size.height);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    let mut w = enc.write_header()?;
    w.write_image_data(rgb)?;
    w.finish()?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_come_from_the_extension() {
        assert_eq!(ImageFormat::of(Path::new("a.SVG")), Ok(ImageFormat::Svg));
        assert_eq!(
            ImageFormat::of(Path::new("dir/a.png")),
            Ok(ImageFormat::Png)
        );
        for bad in ["a.jpg", "a", "svg"] {
            let e = ImageFormat::of(Path::new(bad)).unwrap_err();
            assert!(e.contains("use FILE.svg or FILE.png"), "{e}");
        }
    }

    #[test]
    fn sizes_parse_and_are_bounded() {
        assert_eq!(
            "1200x800".parse(),
            Ok(ImageSize {
                width: 1200,
                height: 800
            })
        );
        for bad in ["1200", "x800", "100x800", "1200x99999", "axb"] {
            assert!(bad.parse::<ImageSize>().is_err(), "{bad}");
        }
    }

    fn figure() -> Figure {
        let line = |label: &str, k: f64| Line {
            label: label.into(),
            points: (3..=12).map(|e| (1u64 << e, k * f64::from(e))).collect(),
        };
        Figure {
            title: "all_reduce_perf · float · sum · 2 ranks".into(),
            panels: vec![
                Panel {
                    metric: Metric::Busbw,
                    lines: vec![line("rnccl & co", 1.0), line("nccl <2.28>", 2.0)],
                },
                Panel {
                    metric: Metric::Time,
                    lines: vec![line("rnccl & co", 3.0)],
                },
            ],
        }
    }

    #[test]
    fn svg_holds_a_polyline_per_curve_legends_and_axis_titles() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.svg");
        let size = ImageSize {
            width: 900,
            height: 700,
        };
        assert_eq!(write(&figure(), &path, size).unwrap(), Drawn::default());
        let text = std::fs::read_to_string(&path).unwrap();
        let doc = roxmltree::Document::parse(&text).unwrap();
        let svg = doc.root_element();
        assert_eq!(
            (svg.attribute("width"), svg.attribute("height")),
            (Some("900"), Some("700"))
        );
        let curves: Vec<usize> = doc
            .descendants()
            .filter(|n| n.has_tag_name("polyline") && n.attribute("stroke-width") == Some("2"))
            .map(|n| n.attribute("points").unwrap().split_whitespace().count())
            .collect();
        assert_eq!(curves, vec![10, 10, 10]);
        let texts: Vec<&str> = doc
            .descendants()
            .filter(|n| n.has_tag_name("text"))
            .filter_map(|n| n.text().map(str::trim))
            .collect();
        let count = |t: &str| texts.iter().filter(|x| **x == t).count();
        assert_eq!(texts[0], "all_reduce_perf · float · sum · 2 ranks");
        assert_eq!(count("rnccl & co"), 2, "{texts:?}");
        assert_eq!(count("nccl <2.28>"), 1);
        assert_eq!(count(SIZE_TITLE), 2);
        assert_eq!(count(Metric::Busbw.axis_title()), 1);
        assert_eq!(count(Metric::Time.axis_title()), 1);
        for label in ["8", "64", "512", "4K"] {
            assert_eq!(count(label), 2, "{label}: {texts:?}");
        }
    }

    #[test]
    fn png_is_encoded_at_the_requested_size() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.png");
        let size = ImageSize {
            width: 640,
            height: 480,
        };
        write(&figure(), &path, size).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
        let reader = decoder.read_info().unwrap();
        let info = reader.info();
        assert_eq!((info.width, info.height), (640, 480));
        assert_eq!(info.color_type, png::ColorType::Rgb);
    }

    #[test]
    fn points_off_the_log_axes_are_left_out() {
        let panel = Panel {
            metric: Metric::Time,
            lines: vec![Line {
                label: "a".into(),
                points: vec![(0, 1.0), (8, 0.0), (16, 2.0), (32, 4.0)],
            }],
        };
        let mut left_out = 0;
        let p = prepare(&panel, &mut left_out).unwrap();
        assert_eq!(left_out, 2);
        assert_eq!(p.lines[0].1, vec![(4.0, 2f64.log10()), (5.0, 4f64.log10())]);
        let empty = Panel {
            metric: Metric::Busbw,
            lines: vec![Line {
                label: "z".into(),
                points: vec![(0, 1.0)],
            }],
        };
        assert!(prepare(&empty, &mut left_out).is_none());
    }
}
