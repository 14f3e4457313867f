//! nccl-tests' output, column for column (nccl-tests `src/common.cu`: `writeDeviceReport`,
//! `writeResultHeader`, `writeBenchmarkLine*`, `writeResultFooter`), and the same data as JSON
//! (nccl-tests' `-J` layout).

use std::fmt::Write as _;

use rnccl::bench::{BenchRow, Measure, RankPlace};

/// nccl-tests' `getFloatStr`: the value in `width` columns with 2, then 1, then 0 decimals,
/// then in exponent form.
pub fn float_str(v: f64, width: usize) -> String {
    for prec in [2, 1, 0] {
        let s = format!("{v:>width$.prec$}");
        if s.len() <= width {
            return s;
        }
    }
    let prec = if width >= 7 { 1 } else { 0 };
    c_exp(v, prec, width)
}

/// C's `%*.Ne`: mantissa, `e`, sign and at least two exponent digits.
fn c_exp(v: f64, prec: usize, width: usize) -> String {
    let s = format!("{v:.prec$e}");
    let (m, e) = s.split_once('e').expect("exponent form");
    let e: i32 = e.parse().expect("exponent");
    let out = format!("{m}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs());
    format!("{out:>width$}")
}

/// The header lines up to and including the table's column titles.
pub fn header(test: &str, params: &str, devices: &[String], transports: &[String]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# rnccl {} bench: nccl-tests 2.19.6 compatible output",
        env!("CARGO_PKG_VERSION")
    );
    let _ = writeln!(s, "# Collective test starting: {test}");
    let _ = writeln!(s, "{params}");
    s.push_str("#\n# Using devices\n");
    for d in devices {
        let _ = writeln!(s, "{d}");
    }
    for t in transports {
        let _ = writeln!(s, "{t}");
    }
    s.push_str("#\n");
    let _ = writeln!(
        s,
        "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}           out-of-place                       in-place          ",
        "", "", "", "", ""
    );
    let _ = writeln!(
        s,
        "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6} ",
        "size",
        "count",
        "type",
        "redop",
        "root",
        "time",
        "algbw",
        "busbw",
        "#wrong",
        "time",
        "algbw",
        "busbw",
        "#wrong"
    );
    let _ = writeln!(
        s,
        "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6} ",
        "(B)",
        "(elements)",
        "",
        "",
        "",
        "(us)",
        "(GB/s)",
        "(GB/s)",
        "",
        "(us)",
        "(GB/s)",
        "(GB/s)",
        ""
    );
    s
}

/// One device line (`#  Rank  0 Group  0 Pid  12345 on   hostname device  0 [0000:19:00] …`,
/// nccl-tests' `#  Rank %2d Group %2d Pid %6d on %10s device %2d [%04x:%02x:%02x] %s`).
pub fn device_line(
    rank: usize,
    pid: u32,
    host: &str,
    device: usize,
    bus: &str,
    name: &str,
) -> String {
    format!(
        "#  Rank {rank:>2} Group {:>2} Pid {pid:>6} on {host:>10} device {device:>2} [{bus}] {name}",
        0
    )
}

/// The device line of a rank: its GPU's PCI address and name, or `[cpu]` and the CPU model,
/// followed by `via NET/IB` (or `NET/Socket`) when it reaches other hosts.
pub fn place_line(p: &RankPlace) -> String {
    let bus = p
        .bus_id
        .as_deref()
        .map_or_else(|| "cpu".to_string(), pci_label);
    let line = device_line(p.rank, p.pid, &p.host, p.device, &bus, &p.name);
    match &p.net {
        Some(n) => format!("{line} via {n}"),
        None => line,
    }
}

/// Pairs listed per transport in [`transport_lines`] before the rest are counted.
const PAIRS_SHOWN: usize = 24;

/// `#` lines saying which transport each rank uses to each peer it sends to on its rings,
/// grouped by transport (`#   SHM/direct/direct: 0->1 1->2 2->3 3->0`); none for one rank.
pub fn transport_lines(places: &[RankPlace]) -> Vec<String> {
    let mut by: Vec<(&str, Vec<String>)> = Vec::new();
    for p in places {
        for (peer, t) in &p.sends {
            let pair = format!("{}->{peer}", p.rank);
            match by.iter_mut().find(|(name, _)| name == t) {
                Some((_, pairs)) => pairs.push(pair),
                None => by.push((t, vec![pair])),
            }
        }
    }
    if by.is_empty() {
        return Vec::new();
    }
    let mut lines =
        vec!["# Transports (each rank to the peers it sends to on its rings)".to_string()];
    for (name, pairs) in by {
        let more = pairs.len().saturating_sub(PAIRS_SHOWN);
        let shown = pairs[..pairs.len() - more].join(" ");
        lines.push(if more > 0 {
            format!("#   {name}: {shown} … and {more} more")
        } else {
            format!("#   {name}: {shown}")
        });
    }
    lines
}

/// nccl-tests' PCI address of a GPU, `%04x:%02x:%02x` (domain, bus, device), from the driver's
/// bus id (`0000:19:00.0`, or with NVML's 8-digit domain); an id of another form as it is.
pub fn pci_label(bus_id: &str) -> String {
    let parts: Vec<&str> = bus_id.split([':', '.']).collect();
    let hex = |s: &str| u32::from_str_radix(s, 16).ok();
    match parts.as_slice() {
        [d, b, dev, ..] => match (hex(d), hex(b), hex(dev)) {
            (Some(d), Some(b), Some(dev)) => format!("{d:04x}:{b:02x}:{dev:02x}"),
            _ => bus_id.to_string(),
        },
        _ => bus_id.to_string(),
    }
}

fn side(m: &Measure) -> String {
    let wrong = match m.wrong {
        Some(w) => format!("{w:>6}"),
        None => "   N/A".to_string(),
    };
    format!(
        "  {}  {}  {}  {wrong}",
        float_str(m.time_us, 7),
        float_str(m.algbw, 6),
        float_str(m.busbw, 6)
    )
}

/// One data row.
pub fn row(r: &BenchRow) -> String {
    let op = r.op.map_or("none", |o| o.name());
    let root = r.root.map_or(-1, |x| x as i64);
    format!(
        "{:>12}  {:>12}  {:>8}  {:>6}  {:>6}{}{}",
        r.size,
        r.count,
        r.dtype.nccl_tests_name(),
        op,
        root,
        side(&r.out_of_place),
        side(&r.in_place)
    )
}

/// Summary over all rows: wrong elements and the average bus bandwidth (mean of busbw over
/// every row, out-of-place and in-place).
pub fn summary(rows: &[BenchRow]) -> (u64, f64) {
    let wrong = rows
        .iter()
        .map(|r| r.out_of_place.wrong.unwrap_or(0) + r.in_place.wrong.unwrap_or(0))
        .sum();
    let n = rows.len() * 2;
    let avg = if n == 0 {
        0.0
    } else {
        rows.iter()
            .map(|r| r.out_of_place.busbw + r.in_place.busbw)
            .sum::<f64>()
            / n as f64
    };
    (wrong, avg)
}

/// C's `%g` (6 significant digits, trailing zeros removed).
pub fn c_g(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let exp = v.abs().log10().floor() as i32;
    if !(-5..6).contains(&exp) {
        let s = format!("{v:.5e}");
        let (m, e) = s.split_once('e').expect("exponent form");
        let m = m.trim_end_matches('0').trim_end_matches('.');
        let e: i32 = e.parse().expect("exponent");
        return format!("{m}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs());
    }
    let decimals = (5 - exp).max(0) as usize;
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// The footer lines. `min_bw` is `NCCL_TESTS_MIN_BW` when set.
pub fn footer(test: &str, wrong: u64, avg_bw: f64, min_bw: Option<f64>) -> String {
    let bw_verdict = match min_bw {
        None => "",
        Some(m) if avg_bw < 0.9 * m => "FAILED",
        Some(_) => "OK",
    };
    format!(
        "# {:<20} : {} {}\n# {:<20} : {} {}\n#\n# Collective test concluded: {test}\n#\n",
        "Out of bounds values",
        wrong,
        if wrong > 0 { "FAILED" } else { "OK" },
        "Avg bus bandwidth",
        c_g(avg_bw),
        bw_verdict
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_fit_their_columns_like_nccl_tests() {
        assert_eq!(float_str(19.71, 7), "  19.71");
        assert_eq!(float_str(24844.6, 7), "24844.6");
        assert_eq!(float_str(168.64, 6), "168.64");
        assert_eq!(float_str(1698.22, 6), "1698.2");
        assert_eq!(float_str(123456.0, 6), "123456");
        assert_eq!(float_str(12345678.0, 7), "1.2e+07");
        assert_eq!(float_str(0.0, 6), "  0.00");
    }

    #[test]
    fn percent_g() {
        assert_eq!(c_g(111.146), "111.146");
        assert_eq!(c_g(14.474), "14.474");
        assert_eq!(c_g(94.11083), "94.1108");
        assert_eq!(c_g(0.0), "0");
        assert_eq!(c_g(2.5), "2.5");
        assert_eq!(c_g(1234567.0), "1.23457e+06");
    }

    #[test]
    fn gpu_device_lines_follow_nccl_tests() {
        let p = RankPlace {
            rank: 3,
            pid: 812,
            host: "node7".into(),
            device: 3,
            bus_id: Some("0000:9B:00.0".into()),
            name: "NVIDIA H200".into(),
            sends: vec![(0, "P2P/IPC".into())],
            net: None,
        };
        assert_eq!(
            place_line(&p),
            "#  Rank  3 Group  0 Pid    812 on      node7 device  3 [0000:9b:00] NVIDIA H200"
        );
        assert_eq!(pci_label("00000001:19:1f.0"), "0001:19:1f");
        assert_eq!(pci_label("weird"), "weird");
        let cpu = RankPlace {
            bus_id: None,
            name: "AMD EPYC (host memory)".into(),
            ..p
        };
        assert_eq!(
            place_line(&cpu),
            "#  Rank  3 Group  0 Pid    812 on      node7 device  3 [cpu] AMD EPYC (host memory)"
        );
        let many = RankPlace {
            rank: 0,
            sends: (1..=30).map(|p| (p, "NET/Socket".to_string())).collect(),
            ..cpu.clone()
        };
        let lines = transport_lines(&[many, cpu.clone()]);
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert!(
            lines[1].starts_with("#   NET/Socket: 0->1 0->2 "),
            "{lines:?}"
        );
        assert!(lines[1].ends_with("0->24 … and 6 more"), "{lines:?}");
        assert_eq!(lines[2], "#   P2P/IPC: 3->0");
        let ib = RankPlace {
            net: Some("NET/IB".into()),
            ..cpu
        };
        assert!(place_line(&ib).ends_with("(host memory) via NET/IB"));
    }

    #[test]
    fn row_matches_the_anchor_layout() {
        use rnccl::DataType;
        let m = |t: f64, a: f64| Measure {
            time_us: t,
            algbw: a,
            busbw: a,
            wrong: Some(0),
        };
        let r = BenchRow {
            size: 8,
            count: 2,
            dtype: DataType::Float32,
            op: Some(rnccl::RedOp::Sum),
            root: None,
            out_of_place: m(19.71, 0.0),
            in_place: m(20.08, 0.0),
        };
        assert_eq!(
            row(&r),
            "           8             2     float     sum      -1    19.71    0.00    0.00       0    20.08    0.00    0.00       0"
        );
    }
}
