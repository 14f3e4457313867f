//! Judging a health check: which results are flagged, and the report dashboards read.
//!
//! The rule: a measured result is flagged when its bus bandwidth (the largest size's, GB/s) is
//! below `below_median` × the median of its kind — hosts alone form one kind, each rail's pairs
//! another — or below the absolute floor of its kind (`min_host_busbw` for hosts alone,
//! `min_busbw` for pairs), or when any element arrived wrong. A measurement that failed is
//! flagged, and so is every host problem (unreachable host, failed worker, missing NIC). The
//! median is that of every measured result of the kind, flagged ones included; a kind with
//! most results slow has a low median, which only the floors catch.
//!
//! A host is a suspect on a rail when at least two of its pairs there are flagged and they are
//! more than half of its measured pairs: the common factor of several slow pairs is likelier
//! the host than each of its peers.

use std::collections::BTreeMap;

use serde::Serialize;

use super::report::{HostFacts, HostProblem, Measurement};
use super::schedule::Pairing;
use crate::error::{Error, Result};

/// The thresholds. Bandwidths in GB/s (1e9 B/s).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Rule {
    /// Flag results below this fraction of their kind's median, in `[0, 1]`; 0 turns the
    /// median rule off. The CLI's default is 0.8.
    pub below_median: f64,
    /// Flag pairs below this bus bandwidth.
    pub min_busbw: Option<f64>,
    /// Flag hosts alone below this bus bandwidth.
    pub min_host_busbw: Option<f64>,
}

impl Rule {
    /// Checks the thresholds.
    ///
    /// Errors: [`Error::InvalidArgument`] for a fraction outside `[0, 1]` or a floor that is
    /// not a positive number, naming the flag.
    pub fn validate(&self) -> Result<()> {
        if !(0.0..=1.0).contains(&self.below_median) {
            return Err(Error::invalid_arg(format!(
                "--below-median {} is not a fraction of the median: give a number from 0 (off) to 1, e.g. 0.8",
                self.below_median
            )));
        }
        for (flag, v) in [
            ("--min-busbw", self.min_busbw),
            ("--min-host-busbw", self.min_host_busbw),
        ] {
            if let Some(v) = v.filter(|v| !(v.is_finite() && *v > 0.0)) {
                return Err(Error::invalid_arg(format!(
                    "{flag} {v} is not a bandwidth: give GB/s above 0, e.g. 20"
                )));
            }
        }
        Ok(())
    }
}

/// How a check was run, for the report's readers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckSetup {
    /// The collective (`all_reduce`).
    pub collective: String,
    /// Element type (`float`).
    pub datatype: String,
    /// Sizes in bytes per rank.
    pub sizes: Vec<usize>,
    /// Warm-up iterations per size.
    pub warmup_iters: usize,
    /// Timed iterations per size.
    pub iters: usize,
    /// Data-check iterations per size (0: off).
    pub check_iters: usize,
    /// Seconds a measurement may take before it is stopped and reported.
    pub timeout_s: u64,
    /// Which pairs were measured.
    pub pairing: Pairing,
    /// The rails asked for (`none`, `auto` or the interface names).
    pub rails: String,
}

/// One result with its verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Judged {
    /// What was measured.
    #[serde(flatten)]
    pub measurement: Measurement,
    /// The judged bus bandwidth in GB/s (largest size); `None` when it failed.
    pub busbw: Option<f64>,
    /// Whether it is flagged.
    pub flagged: bool,
    /// Why, one sentence each.
    pub reasons: Vec<String>,
}

/// A host common to several flagged pairs of one rail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Suspect {
    /// The host.
    pub host: String,
    /// Its flagged pairs.
    pub flagged: usize,
    /// Its measured pairs.
    pub pairs: usize,
}

/// One rail's (or the default interface's) pairs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RailReport {
    /// The rail; `None` for the default interface.
    pub rail: Option<String>,
    /// Median bus bandwidth of the measured pairs, GB/s.
    pub median_busbw: Option<f64>,
    /// Hosts × hosts bus bandwidth in GB/s, in host order: pairs off the diagonal (symmetric),
    /// hosts alone on it; `None` where nothing was measured or the measurement failed.
    pub matrix: Vec<Vec<Option<f64>>>,
    /// Every pair, judged.
    pub pairs: Vec<Judged>,
    /// Hosts common to several flagged pairs.
    pub suspects: Vec<Suspect>,
}

/// The judged check: what `rnccl check --format json` prints.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckReport {
    /// Every host, in host order (hosts that never joined have 0 ranks).
    pub hosts: Vec<HostFacts>,
    /// How the check ran.
    pub setup: CheckSetup,
    /// The thresholds.
    pub rule: Rule,
    /// Median bus bandwidth of the hosts alone, GB/s.
    pub alone_median_busbw: Option<f64>,
    /// Every host alone, judged.
    pub alone: Vec<Judged>,
    /// The pairs, per rail.
    pub rails: Vec<RailReport>,
    /// Host problems, first seen first.
    pub problems: Vec<HostProblem>,
    /// Flagged results plus host problems.
    pub flagged: usize,
    /// No result flagged and no host problem.
    pub healthy: bool,
    /// The exit status `rnccl check` ends with: 0 healthy, 1 otherwise.
    pub exit_code: u8,
}

/// A bandwidth in GB/s with about three significant digits (`0.00612`, `1.18`, `48.2`, `480`).
pub fn gbps(x: f64) -> String {
    match x {
        x if x >= 100.0 => format!("{x:.0}"),
        x if x >= 10.0 => format!("{x:.1}"),
        x if x >= 1.0 => format!("{x:.2}"),
        x if x >= 0.1 => format!("{x:.3}"),
        x if x >= 0.01 => format!("{x:.4}"),
        x => format!("{x:.5}"),
    }
}

/// The median of `v` (mean of the middle two for an even count); `None` when empty.
pub fn median(v: &[f64]) -> Option<f64> {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if s.is_empty() {
        return None;
    }
    s.sort_by(f64::total_cmp);
    let m = s.len() / 2;
    Some(if s.len() % 2 == 1 {
        s[m]
    } else {
        (s[m - 1] + s[m]) / 2.0
    })
}

/// Judges `measurements` of `hosts` by `rule` (see the module's rule) into the report.
/// Problems keep their order; pairs are grouped by rail in order of first appearance.
pub fn judge(
    hosts: Vec<HostFacts>,
    setup: CheckSetup,
    rule: Rule,
    measurements: Vec<Measurement>,
    problems: Vec<HostProblem>,
) -> CheckReport {
    let (alone, pairs): (Vec<Measurement>, Vec<Measurement>) =
        measurements.into_iter().partition(|m| m.hosts.len() == 1);
    let (alone, alone_median) = judge_kind(alone, &rule, "hosts alone", rule.min_host_busbw);
    let index: BTreeMap<&str, usize> = hosts
        .iter()
        .enumerate()
        .map(|(i, h)| (h.name.as_str(), i))
        .collect();
    let mut by_rail: Vec<(Option<String>, Vec<Measurement>)> = Vec::new();
    for m in pairs {
        match by_rail.iter_mut().find(|(r, _)| *r == m.rail) {
            Some((_, v)) => v.push(m),
            None => by_rail.push((m.rail.clone(), vec![m])),
        }
    }
    let n = hosts.len();
    let rails: Vec<RailReport> = by_rail
        .into_iter()
        .map(|(rail, ms)| {
            let kind = match &rail {
                Some(r) => format!("pairs on rail {r}"),
                None => "pairs".to_string(),
            };
            let (pairs, median_busbw) = judge_kind(ms, &rule, &kind, rule.min_busbw);
            let mut matrix = vec![vec![None; n]; n];
            for j in &alone {
                if let Some(&i) = index.get(j.measurement.hosts[0].as_str()) {
                    matrix[i][i] = j.busbw;
                }
            }
            for j in &pairs {
                let at = |k: usize| index.get(j.measurement.hosts[k].as_str()).copied();
                if let (Some(a), Some(b)) = (at(0), at(1)) {
                    matrix[a][b] = j.busbw;
                    matrix[b][a] = j.busbw;
                }
            }
            let suspects = suspects(&hosts, &pairs);
            RailReport {
                rail,
                median_busbw,
                matrix,
                pairs,
                suspects,
            }
        })
        .collect();
    let flagged = alone.iter().filter(|j| j.flagged).count()
        + rails
            .iter()
            .flat_map(|r| &r.pairs)
            .filter(|j| j.flagged)
            .count()
        + problems.len();
    CheckReport {
        hosts,
        setup,
        rule,
        alone_median_busbw: alone_median,
        alone,
        rails,
        problems,
        flagged,
        healthy: flagged == 0,
        exit_code: u8::from(flagged > 0),
    }
}

/// Judges the results of one kind against their median and the kind's floor.
fn judge_kind(
    ms: Vec<Measurement>,
    rule: &Rule,
    kind: &str,
    floor: Option<f64>,
) -> (Vec<Judged>, Option<f64>) {
    let values: Vec<f64> = ms.iter().filter_map(|m| m.outcome.busbw()).collect();
    let med = median(&values);
    let floor_flag = if kind == "hosts alone" {
        "--min-host-busbw"
    } else {
        "--min-busbw"
    };
    let judged = ms
        .into_iter()
        .map(|m| {
            let busbw = m.outcome.busbw();
            let mut reasons = Vec::new();
            if let super::report::Outcome::Failed { reason } = &m.outcome {
                reasons.push(format!("failed: {reason}"));
            }
            let wrong = m.outcome.wrong();
            if wrong > 0 {
                reasons.push(format!(
                    "{wrong} wrong elements: data arrived corrupted (check the link, NIC or GPU memory)"
                ));
            }
            if let (Some(b), Some(med)) = (busbw, med) {
                let bar = rule.below_median * med;
                if rule.below_median > 0.0 && b < bar {
                    reasons.push(format!(
                        "busbw {} GB/s is below {:.2} × the median of {kind} ({} GB/s) = {} GB/s",
                        gbps(b),
                        rule.below_median,
                        gbps(med),
                        gbps(bar)
                    ));
                }
            }
            if let (Some(b), Some(min)) = (busbw, floor)
                && b < min
            {
                reasons.push(format!(
                    "busbw {} GB/s is below {floor_flag} {min} GB/s",
                    gbps(b)
                ));
            }
            Judged {
                measurement: m,
                busbw,
                flagged: !reasons.is_empty(),
                reasons,
            }
        })
        .collect();
    (judged, med)
}

/// Hosts in at least two flagged pairs that are more than half of their measured pairs.
fn suspects(hosts: &[HostFacts], pairs: &[Judged]) -> Vec<Suspect> {
    hosts
        .iter()
        .filter_map(|h| {
            let mine: Vec<&Judged> = pairs
                .iter()
                .filter(|j| j.measurement.hosts.contains(&h.name))
                .collect();
            let flagged = mine.iter().filter(|j| j.flagged).count();
            (flagged >= 2 && 2 * flagged > mine.len()).then(|| Suspect {
                host: h.name.clone(),
                flagged,
                pairs: mine.len(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::report::{Outcome, SizeResult};

    fn host(name: &str) -> HostFacts {
        HostFacts {
            name: name.into(),
            ranks: 1,
            device: "CPU".into(),
            nics: vec!["eth0".into()],
        }
    }

    fn measured(hosts: &[&str], busbw: f64) -> Measurement {
        Measurement {
            rail: None,
            hosts: hosts.iter().map(|h| h.to_string()).collect(),
            ranks: hosts.len(),
            outcome: Outcome::Measured {
                sizes: vec![
                    SizeResult {
                        size: 1024,
                        time_us: 1.0,
                        algbw: 0.001,
                        busbw: 0.001,
                        busbw_out_of_place: 0.001,
                        busbw_in_place: 0.001,
                        wrong: Some(0),
                    },
                    SizeResult {
                        size: 1 << 20,
                        time_us: 100.0,
                        algbw: busbw,
                        busbw,
                        busbw_out_of_place: busbw,
                        busbw_in_place: busbw,
                        wrong: Some(0),
                    },
                ],
            },
        }
    }

    fn setup() -> CheckSetup {
        CheckSetup {
            collective: "all_reduce".into(),
            datatype: "float".into(),
            sizes: vec![1 << 20],
            warmup_iters: 1,
            iters: 2,
            check_iters: 1,
            timeout_s: 60,
            pairing: Pairing::All,
            rails: "none".into(),
        }
    }

    const RULE: Rule = Rule {
        below_median: 0.8,
        min_busbw: None,
        min_host_busbw: None,
    };

    #[test]
    fn medians() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0]), Some(3.0));
        assert_eq!(median(&[4.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[f64::NAN, 2.0]), Some(2.0));
        let shown: Vec<String> = [0.006123, 0.0612, 0.612, 1.184, 48.25, 480.4]
            .into_iter()
            .map(gbps)
            .collect();
        assert_eq!(shown, ["0.00612", "0.0612", "0.612", "1.18", "48.2", "480"]);
    }

    #[test]
    fn the_slow_pair_is_flagged_and_only_it() {
        let hosts: Vec<HostFacts> = ["a", "b", "c", "d"].iter().map(|h| host(h)).collect();
        let ms = vec![
            measured(&["a", "b"], 10.0),
            measured(&["a", "c"], 9.5),
            measured(&["a", "d"], 10.2),
            measured(&["b", "c"], 0.3),
            measured(&["b", "d"], 8.1),
            measured(&["c", "d"], 9.9),
        ];
        let r = judge(hosts, setup(), RULE, ms, Vec::new());
        let pairs = &r.rails[0].pairs;
        let flagged: Vec<&Vec<String>> = pairs
            .iter()
            .filter(|j| j.flagged)
            .map(|j| &j.measurement.hosts)
            .collect();
        assert_eq!(flagged, [&vec!["b".to_string(), "c".to_string()]]);
        // Median of 6: (9.5 + 9.9) / 2; 8.1 is above 0.8 of it, 0.3 is not.
        assert_eq!(r.rails[0].median_busbw, Some(9.7));
        assert!(pairs[3].reasons[0].contains("below 0.80 × the median of pairs"));
        assert_eq!(r.rails[0].matrix[1][2], Some(0.3));
        assert_eq!(r.rails[0].matrix[2][1], Some(0.3));
        assert_eq!(r.rails[0].matrix[0][0], None);
        assert!(r.rails[0].suspects.is_empty());
        assert_eq!((r.flagged, r.healthy, r.exit_code), (1, false, 1));
    }

    #[test]
    fn floors_failures_wrong_data_and_problems_flag() {
        let hosts: Vec<HostFacts> = ["a", "b", "c"].iter().map(|h| host(h)).collect();
        let mut wrong = measured(&["b"], 50.0);
        if let Outcome::Measured { sizes } = &mut wrong.outcome {
            sizes[1].wrong = Some(3);
        }
        let ms = vec![
            measured(&["a"], 50.0),
            wrong,
            measured(&["c"], 45.0),
            measured(&["a", "b"], 10.0),
            Measurement {
                outcome: Outcome::Failed {
                    reason: "did not finish within 60 s".into(),
                },
                ..measured(&["a", "c"], 0.0)
            },
            measured(&["b", "c"], 10.0),
        ];
        let rule = Rule {
            below_median: 0.0,
            min_busbw: Some(12.0),
            min_host_busbw: Some(48.0),
        };
        let problems = vec![HostProblem {
            host: "d".into(),
            reason: "unreachable".into(),
        }];
        let r = judge(hosts, setup(), rule, ms, problems);
        let why = |j: &Judged| j.reasons.join(" | ");
        assert!(!r.alone[0].flagged);
        assert!(
            why(&r.alone[1]).contains("3 wrong elements"),
            "{}",
            why(&r.alone[1])
        );
        assert!(why(&r.alone[2]).contains("below --min-host-busbw 48"));
        let p = &r.rails[0].pairs;
        assert!(p.iter().all(|j| j.flagged));
        assert!(why(&p[0]).contains("below --min-busbw 12 GB/s"));
        assert!(why(&p[1]).starts_with("failed: did not finish"));
        assert_eq!(p[1].busbw, None);
        // a and c each have 2 flagged of 2 pairs; so does b.
        assert_eq!(r.rails[0].suspects.len(), 3);
        assert_eq!(r.flagged, 2 + 3 + 1);
        assert_eq!(r.exit_code, 1);
    }

    #[test]
    fn rails_are_judged_apart() {
        let hosts: Vec<HostFacts> = ["a", "b", "c"].iter().map(|h| host(h)).collect();
        let on = |rail: &str, h: &[&str], bw: f64| Measurement {
            rail: Some(rail.into()),
            ..measured(h, bw)
        };
        let ms = vec![
            on("eth0", &["a", "b"], 10.0),
            on("eth1", &["a", "b"], 1.0),
            on("eth0", &["a", "c"], 10.0),
            on("eth1", &["a", "c"], 1.0),
            on("eth0", &["b", "c"], 10.0),
            on("eth1", &["b", "c"], 1.0),
        ];
        let r = judge(hosts, setup(), RULE, ms, Vec::new());
        assert_eq!(r.rails.len(), 2);
        assert_eq!(r.rails[1].rail.as_deref(), Some("eth1"));
        assert_eq!(r.rails[1].median_busbw, Some(1.0));
        assert!(r.healthy, "each rail is even on its own");
    }

    #[test]
    fn thresholds_are_checked() {
        assert!(RULE.validate().is_ok());
        let bad = Rule {
            below_median: 1.5,
            ..RULE
        };
        assert!(
            bad.validate()
                .unwrap_err()
                .to_string()
                .contains("--below-median")
        );
        let bad = Rule {
            min_busbw: Some(-1.0),
            ..RULE
        };
        assert!(
            bad.validate()
                .unwrap_err()
                .to_string()
                .contains("--min-busbw")
        );
    }
}
