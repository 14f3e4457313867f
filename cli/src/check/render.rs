//! The text report of `rnccl check`: a header saying what ran, the hosts alone as a list or
//! the hosts × hosts busbw matrix per rail (pairs off the diagonal, hosts alone on it), the
//! findings one per line, and the verdict.

use std::fmt::Write;

use rnccl::check::{CheckReport, Judged, Pairing, RailReport, gbps as bw};

/// Widest host name used as a column heading; longer names get numbered columns.
const NAME_COLUMN: usize = 12;

/// `1 MiB`, `64 MiB`, `4 GiB`, `1000 B`.
fn size(b: usize) -> String {
    for (shift, unit) in [(30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if b >= 1 << shift && b.is_multiple_of(1 << shift) {
            return format!("{} {unit}", b >> shift);
        }
    }
    format!("{b} B")
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The text report.
pub fn text(r: &CheckReport) -> String {
    let mut o = String::new();
    header(&mut o, r);
    if r.rails.is_empty() {
        alone_list(&mut o, r);
    }
    for rail in &r.rails {
        matrix(&mut o, r, rail);
    }
    findings(&mut o, r);
    verdict(&mut o, r);
    o
}

fn header(o: &mut String, r: &CheckReport) {
    let s = &r.setup;
    let joined: Vec<_> = r.hosts.iter().filter(|h| h.ranks > 0).collect();
    let same = joined
        .windows(2)
        .all(|w| w[0].ranks == w[1].ranks && w[0].device == w[1].device);
    let ranks = match joined.first() {
        Some(h) if same => format!(", {} each ({})", plural(h.ranks, "rank", "ranks"), h.device),
        _ => String::new(),
    };
    let sizes: Vec<String> = s.sizes.iter().map(|&b| size(b)).collect();
    let pairs = match s.pairing {
        Pairing::None => "none",
        Pairing::All => "every pair",
        Pairing::Quick => "one per host",
    };
    let _ = writeln!(
        o,
        "rnccl check: {}{ranks}; {} {} {} per rank; {} warm-up, {} timed, {} check iterations; pairs: {pairs}; rails: {}",
        plural(r.hosts.len(), "host", "hosts"),
        s.collective,
        s.datatype,
        sizes.join(", "),
        s.warmup_iters,
        s.iters,
        s.check_iters,
        s.rails
    );
    if !same || joined.len() < r.hosts.len() {
        let each: Vec<String> = r
            .hosts
            .iter()
            .map(|h| match h.ranks {
                0 => format!("{} (not joined)", h.name),
                n => format!("{} ({}, {})", h.name, plural(n, "rank", "ranks"), h.device),
            })
            .collect();
        let _ = writeln!(o, "hosts: {}", each.join(", "));
    }
    let judged = s.sizes.iter().max().map_or_else(String::new, |&b| size(b));
    let _ = writeln!(
        o,
        "busbw in GB/s (1e9 B/s) at {judged}, mean of out-of-place and in-place; ! flagged, FAIL failed, . not measured"
    );
}

/// The cell of a result: its busbw, marked when flagged; `FAIL` when it failed.
fn cell(j: Option<&Judged>) -> String {
    match j {
        None => ".".into(),
        Some(j) => match j.busbw {
            None => "FAIL".into(),
            Some(b) if j.flagged => format!("{}!", bw(b)),
            Some(b) => bw(b),
        },
    }
}

fn alone_list(o: &mut String, r: &CheckReport) {
    if r.alone.is_empty() {
        return;
    }
    let w = r
        .hosts
        .iter()
        .map(|h| h.name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    let _ = writeln!(
        o,
        "\n{:<w$}  {:>5}  {:>10}  device",
        "host", "ranks", "busbw"
    );
    for h in &r.hosts {
        let j = r.alone.iter().find(|j| j.measurement.hosts[0] == h.name);
        let _ = writeln!(
            o,
            "{:<w$}  {:>5}  {:>10}  {}",
            h.name,
            h.ranks,
            cell(j),
            h.device
        );
    }
    if let Some(m) = r.alone_median_busbw {
        let _ = writeln!(
            o,
            "hosts alone: median {} GB/s{}",
            bw(m),
            bar_words(r.rule.below_median, m)
        );
    }
}

/// `; flagged below 0.80 × median = 0.72 GB/s`, or nothing when the median rule is off.
fn bar_words(frac: f64, median: f64) -> String {
    if frac > 0.0 {
        format!(
            "; flagged below {frac:.2} × median = {} GB/s",
            bw(frac * median)
        )
    } else {
        String::new()
    }
}

fn matrix(o: &mut String, r: &CheckReport, rail: &RailReport) {
    let n = r.hosts.len();
    let numbered = r.hosts.iter().any(|h| h.name.len() > NAME_COLUMN);
    let heads: Vec<String> = (0..n)
        .map(|i| {
            if numbered {
                format!("#{i}")
            } else {
                r.hosts[i].name.clone()
            }
        })
        .collect();
    let rows: Vec<String> = (0..n)
        .map(|i| {
            if numbered {
                format!("#{i} {}", r.hosts[i].name)
            } else {
                r.hosts[i].name.clone()
            }
        })
        .collect();
    let lw = rows.iter().map(String::len).max().unwrap_or(0).max(5);
    let cw = heads.iter().map(String::len).max().unwrap_or(0).max(6) + 2;
    let _ = match &rail.rail {
        Some(name) => writeln!(o, "\nrail {name}"),
        None => writeln!(o),
    };
    let _ = write!(o, "{:<lw$}", "busbw");
    for h in &heads {
        let _ = write!(o, "{h:>cw$}");
    }
    o.push('\n');
    for (a, row) in rows.iter().enumerate() {
        let _ = write!(o, "{row:<lw$}");
        for b in 0..n {
            let j = if a == b {
                r.alone
                    .iter()
                    .find(|j| j.measurement.hosts[0] == r.hosts[a].name)
            } else {
                rail.pairs.iter().find(|j| {
                    let hs = &j.measurement.hosts;
                    hs.contains(&r.hosts[a].name) && hs.contains(&r.hosts[b].name)
                })
            };
            let _ = write!(o, "{:>cw$}", cell(j));
        }
        o.push('\n');
    }
    let mut medians = Vec::new();
    if let Some(m) = rail.median_busbw {
        medians.push(format!(
            "pairs: median {} GB/s{}",
            bw(m),
            bar_words(r.rule.below_median, m)
        ));
    }
    if let Some(m) = r.alone_median_busbw {
        medians.push(format!("hosts alone (diagonal): median {} GB/s", bw(m)));
    }
    if !medians.is_empty() {
        let _ = writeln!(o, "{}", medians.join("; "));
    }
}

fn findings(o: &mut String, r: &CheckReport) {
    let mut lines = Vec::new();
    for p in &r.problems {
        lines.push(format!("FAILED   host {}: {}", p.host, p.reason));
    }
    for j in r.alone.iter().filter(|j| j.flagged) {
        lines.push(format!(
            "FLAGGED  host {} alone: {}",
            j.measurement.hosts[0],
            j.reasons.join("; ")
        ));
    }
    for rail in &r.rails {
        let on = rail
            .rail
            .as_ref()
            .map_or_else(String::new, |n| format!(" on rail {n}"));
        for j in rail.pairs.iter().filter(|j| j.flagged) {
            lines.push(format!(
                "FLAGGED  pair {}{on}: {}",
                j.measurement.hosts.join(" <-> "),
                j.reasons.join("; ")
            ));
        }
        for s in &rail.suspects {
            lines.push(format!(
                "SUSPECT  host {}: {} of its {} pairs{on} flagged",
                s.host, s.flagged, s.pairs
            ));
        }
    }
    if !lines.is_empty() {
        let _ = writeln!(o, "\n{}", lines.join("\n"));
    }
}

fn verdict(o: &mut String, r: &CheckReport) {
    let pairs: usize = r.rails.iter().map(|x| x.pairs.len()).sum();
    let flagged_pairs: usize = r
        .rails
        .iter()
        .map(|x| x.pairs.iter().filter(|j| j.flagged).count())
        .sum();
    let flagged_alone = r.alone.iter().filter(|j| j.flagged).count();
    let mut counts = Vec::new();
    if !r.alone.is_empty() {
        counts.push(format!("{} alone", plural(r.alone.len(), "host", "hosts")));
    }
    if pairs > 0 {
        counts.push(plural(pairs, "pair", "pairs"));
    }
    let measured = match counts.len() {
        0 => "nothing measured".to_string(),
        _ => format!("{} measured", counts.join(" and ")),
    };
    if r.healthy {
        let _ = writeln!(o, "\ncheck passed: {measured}, nothing flagged");
        return;
    }
    let mut what = Vec::new();
    if flagged_alone > 0 {
        what.push(format!("{flagged_alone} of {} hosts alone", r.alone.len()));
    }
    if flagged_pairs > 0 {
        what.push(format!("{flagged_pairs} of {pairs} pairs"));
    }
    if !r.problems.is_empty() {
        what.push(plural(r.problems.len(), "host problem", "host problems"));
    }
    let _ = writeln!(
        o,
        "\ncheck FAILED: {} flagged ({measured}); exit status {}",
        what.join(", "),
        r.exit_code
    );
}

#[cfg(test)]
mod tests {
    use rnccl::check::{
        CheckSetup, HostFacts, HostProblem, Measurement, Outcome, Rule, SizeResult, judge,
    };

    use super::*;

    fn facts(name: &str, ranks: usize) -> HostFacts {
        HostFacts {
            name: name.into(),
            ranks,
            device: if ranks > 0 { "CPU".into() } else { "-".into() },
            nics: vec!["eth0".into()],
        }
    }

    fn m(rail: Option<&str>, hosts: &[&str], busbw: Option<f64>) -> Measurement {
        Measurement {
            rail: rail.map(str::to_string),
            hosts: hosts.iter().map(|h| h.to_string()).collect(),
            ranks: 2 * hosts.len(),
            outcome: match busbw {
                Some(b) => Outcome::Measured {
                    sizes: vec![SizeResult {
                        size: 4 << 20,
                        time_us: 1000.0,
                        algbw: b,
                        busbw: b,
                        busbw_out_of_place: b,
                        busbw_in_place: b,
                        wrong: Some(0),
                    }],
                },
                None => Outcome::Failed {
                    reason: "did not finish within 60 s and was stopped".into(),
                },
            },
        }
    }

    fn setup(pairing: Pairing, rails: &str) -> CheckSetup {
        CheckSetup {
            collective: "all_reduce".into(),
            datatype: "float".into(),
            sizes: vec![1 << 20, 4 << 20],
            warmup_iters: 1,
            iters: 3,
            check_iters: 1,
            timeout_s: 60,
            pairing,
            rails: rails.into(),
        }
    }

    const RULE: Rule = Rule {
        below_median: 0.8,
        min_busbw: None,
        min_host_busbw: None,
    };

    #[test]
    fn matrix_with_a_flagged_pair_a_failure_and_an_unreachable_host() {
        let hosts = vec![
            facts("h0", 2),
            facts("h1", 2),
            facts("h2", 2),
            facts("h3", 0),
        ];
        let ms = vec![
            m(None, &["h0"], Some(12.5)),
            m(None, &["h1"], Some(12.1)),
            m(None, &["h2"], Some(11.9)),
            m(None, &["h0", "h2"], Some(1.21)),
            m(None, &["h1", "h2"], Some(1.18)),
            m(None, &["h0", "h1"], Some(0.0061)),
        ];
        let problems = vec![HostProblem {
            host: "h3".into(),
            reason: "could not be started (exit status 255): ssh: Could not resolve hostname h3"
                .into(),
        }];
        let r = judge(hosts, setup(Pairing::All, "auto"), RULE, ms, problems);
        insta::assert_snapshot!(text(&r));
    }

    #[test]
    fn rails_and_long_names() {
        let hosts = vec![
            facts("gpu-node-0001.cluster", 8),
            facts("gpu-node-0002.cluster", 8),
        ];
        let (a, b) = ("gpu-node-0001.cluster", "gpu-node-0002.cluster");
        let ms = vec![
            m(None, &[a], Some(480.0)),
            m(None, &[b], Some(150.0)),
            m(Some("ib0"), &[a, b], Some(48.2)),
            m(Some("ib1"), &[a, b], None),
        ];
        let rule = Rule {
            min_busbw: Some(40.0),
            ..RULE
        };
        let r = judge(hosts, setup(Pairing::Quick, "auto"), rule, ms, Vec::new());
        insta::assert_snapshot!(text(&r));
    }

    #[test]
    fn hosts_alone_healthy() {
        let hosts = vec![facts("a", 2), facts("b", 2)];
        let ms = vec![m(None, &["a"], Some(9.87)), m(None, &["b"], Some(10.2))];
        let r = judge(hosts, setup(Pairing::None, "none"), RULE, ms, Vec::new());
        insta::assert_snapshot!(text(&r));
    }
}
