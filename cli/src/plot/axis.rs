//! Axis ranges, ticks and tick labels. Every axis is drawn in a linear coordinate: sizes as
//! log2(bytes), times as log10(µs), bandwidths as they are; the ticks are chosen here and
//! labelled with the value they stand for (sizes as `8`, `4K`, `16M`, `2G`: powers of 1024).

use std::ops::Range;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};

/// An axis: the coordinate range, the labelled ticks and the unlabelled grid lines, in the
/// axis' coordinate (log2 bytes, log10 µs, or GB/s).
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    /// Coordinate range.
    pub range: Range<f64>,
    /// Labelled ticks.
    pub ticks: Vec<f64>,
    /// Grid lines between the ticks.
    pub minor: Vec<f64>,
}

/// plotters' view of an axis: a linear coordinate whose bold key points are the ticks and
/// whose light ones the grid lines; the labels come from the mesh's formatter.
impl Ranged for Axis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        let span = self.range.end - self.range.start;
        if span <= 0.0 {
            return (limit.0 + limit.1) / 2;
        }
        let frac = (v - self.range.start) / span;
        limit.0 + (f64::from(limit.1 - limit.0) * frac + 1e-3).floor() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            self.minor.clone()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> Range<f64> {
        self.range.clone()
    }
}

/// Most labelled ticks on an axis.
const MAX_TICKS: usize = 12;

/// The size axis for sizes whose log2 runs from `lo` to `hi` (sizes of at least 1 byte, so
/// `lo` ≥ 0): a tick at every `k`-th power of two (k chosen so at most 12 are labelled), grid
/// lines at the others.
pub fn size_axis(lo: f64, hi: f64) -> Axis {
    let hi = hi.max(lo);
    let (first, last) = (lo.floor() as i64, hi.ceil() as i64);
    let n = (last - first + 1) as usize;
    let step = n.div_ceil(MAX_TICKS).max(1) as i64;
    let ticks: Vec<f64> = (first..=last)
        .filter(|e| (e - first) % step == 0)
        .map(|e| e as f64)
        .collect();
    let minor: Vec<f64> = (first..=last)
        .filter(|e| (e - first) % step != 0)
        .map(|e| e as f64)
        .collect();
    let pad = ((hi - lo) * 0.03).max(0.25);
    Axis {
        range: (lo - pad)..(hi + pad),
        ticks,
        minor,
    }
}

/// `8`, `512`, `1K`, `4K`, `16M`, `2G`, `1T` for 2^`exp` bytes (K, M, G, T = 2^10, 2^20,
/// 2^30, 2^40, as nccl-tests' and rnccl's `-b`/`-e` take them).
pub fn size_label(exp: f64) -> String {
    let e = exp.round().max(0.0) as i64;
    let (unit, shift) = match e {
        0..10 => ("", 0),
        10..20 => ("K", 10),
        20..30 => ("M", 20),
        30..40 => ("G", 30),
        _ => ("T", 40),
    };
    format!("{}{unit}", 1u128 << (e - shift).min(100))
}

/// A linear axis from 0 to at least `max` (≥ 0) with 1, 2, 2.5 or 5 × 10^k steps, at most 12
/// ticks.
pub fn linear_axis(max: f64) -> Axis {
    let max = if max > 0.0 && max.is_finite() {
        max
    } else {
        1.0
    };
    let raw = max / 8.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| ((max / s).ceil() as usize) < MAX_TICKS)
        .unwrap_or(10.0 * mag);
    let top = (max / step).ceil().max(1.0) * step;
    let n = (top / step).round() as usize;
    Axis {
        range: 0.0..top * 1.02,
        ticks: (0..=n).map(|i| i as f64 * step).collect(),
        minor: Vec::new(),
    }
}

/// A log10 axis over values whose log10 runs from `lo` to `hi`: ticks at the decades, and at
/// 2× and 5× too when it spans at most two decades; grid lines at 1..9 × each decade.
pub fn log_axis(lo: f64, hi: f64) -> Axis {
    let hi = hi.max(lo);
    let (mut first, mut last) = (lo.floor() as i32, hi.ceil() as i32);
    if first == last {
        first -= 1;
        last += 1;
    }
    let decades = (last - first) as usize;
    let step = decades.div_ceil(MAX_TICKS).max(1) as i32;
    let mut ticks = Vec::new();
    let mut minor = Vec::new();
    for d in first..=last {
        for m in 1..10 {
            let v = f64::from(d) + f64::from(m).log10();
            if v > f64::from(last) {
                break;
            }
            let labelled = if m == 1 {
                (d - first) % step == 0
            } else {
                decades <= 2 && (m == 2 || m == 5)
            };
            if labelled {
                ticks.push(v);
            } else {
                minor.push(v);
            }
        }
    }
    Axis {
        range: f64::from(first)..f64::from(last),
        ticks,
        minor,
    }
}

/// The label of a log10 tick: the value in plain digits from 0.001 to 100000, `1e6` style
/// beyond.
pub fn log_label(v: f64) -> String {
    let x = 10f64.powf(v);
    if !(1e-3..=1e5 * 1.0001).contains(&x) {
        let e = v.floor() as i32;
        let m = (x / 10f64.powi(e)).round();
        return if m == 1.0 {
            format!("1e{e}")
        } else {
            format!("{m}e{e}")
        };
    }
    trim(x)
}

/// A linear tick's label: at most 3 decimals, trailing zeros removed.
pub fn linear_label(v: f64) -> String {
    trim(v)
}

fn trim(x: f64) -> String {
    let s = format!("{:.3}", x);
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" { "0".into() } else { s.into() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_labelled_in_powers_of_1024() {
        let got: Vec<String> = [0.0, 3.0, 9.0, 10.0, 12.0, 24.0, 31.0, 33.0, 41.0]
            .iter()
            .map(|&e| size_label(e))
            .collect();
        assert_eq!(
            got,
            vec!["1", "8", "512", "1K", "4K", "16M", "2G", "8G", "2T"]
        );
    }

    #[test]
    fn size_axis_labels_at_most_twelve_powers() {
        let a = size_axis(3.0, 33.0);
        assert_eq!(a.ticks.first(), Some(&3.0));
        assert!(a.ticks.len() <= MAX_TICKS, "{:?}", a.ticks);
        assert!(a.ticks.len() + a.minor.len() == 31);
        assert!(a.range.start < 3.0 && a.range.end > 33.0);
        let one = size_axis(10.0, 10.0);
        assert_eq!(one.ticks, vec![10.0]);
        assert!(one.range.start < 10.0 && one.range.end > 10.0);
    }

    #[test]
    fn linear_axes_cover_the_maximum_with_round_steps() {
        let a = linear_axis(345.75);
        assert_eq!(
            a.ticks,
            vec![0.0, 50.0, 100.0, 150.0, 200.0, 250.0, 300.0, 350.0]
        );
        assert!(a.range.end >= 350.0);
        let z = linear_axis(0.0);
        assert_eq!(z.ticks.last(), Some(&1.0));
        let small = linear_axis(0.034);
        assert!(small.ticks.len() <= MAX_TICKS);
        assert!(*small.ticks.last().unwrap() >= 0.034);
        assert_eq!(linear_label(small.ticks[1]), "0.005");
    }

    #[test]
    fn log_axes_tick_at_decades() {
        let a = log_axis(0.21f64.log10(), 353177f64.log10());
        assert_eq!(a.range, -1.0..6.0);
        let labels: Vec<String> = a.ticks.iter().map(|&v| log_label(v)).collect();
        assert_eq!(
            labels,
            vec!["0.1", "1", "10", "100", "1000", "10000", "100000", "1e6"]
        );
        let narrow = log_axis(12f64.log10(), 30f64.log10());
        let labels: Vec<String> = narrow.ticks.iter().map(|&v| log_label(v)).collect();
        assert_eq!(labels, vec!["10", "20", "50", "100"]);
    }
}
