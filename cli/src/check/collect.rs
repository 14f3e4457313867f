//! Gathering a check's events (from world rank 0, in process or through a worker's output) and
//! the coordinator's own findings into the judged report.

use rnccl::check::{CheckReport, Event, HostFacts, HostProblem, Measurement, Rule, judge};

use super::plan::Plan;

/// Everything seen so far.
#[derive(Debug, Default)]
pub struct Collector {
    facts: Vec<HostFacts>,
    measurements: Vec<Measurement>,
    problems: Vec<HostProblem>,
}

impl Collector {
    /// Takes one event.
    pub fn push(&mut self, e: Event) {
        match e {
            Event::Hosts { hosts } => self.facts = hosts,
            Event::Problem(p) => self.problems.push(p),
            Event::Measured(m) => self.measurements.push(m),
        }
    }

    /// Records a problem with `host`.
    pub fn problem(&mut self, host: &str, reason: impl Into<String>) {
        self.problems.push(HostProblem {
            host: host.to_string(),
            reason: reason.into(),
        });
    }

    /// Measurements so far.
    pub fn measured(&self) -> usize {
        self.measurements.len()
    }

    /// The judged report. `hosts`, when given (a host list), sets the hosts and their order,
    /// hosts that never joined included; otherwise the hosts are those world rank 0 saw.
    pub fn report(self, hosts: Option<&[String]>, plan: &Plan, rule: Rule) -> CheckReport {
        let facts = match hosts {
            None => self.facts,
            Some(names) => names
                .iter()
                .map(|n| {
                    self.facts
                        .iter()
                        .find(|f| f.name == *n)
                        .cloned()
                        .unwrap_or_else(|| HostFacts {
                            name: n.clone(),
                            ranks: 0,
                            device: "-".into(),
                            nics: Vec::new(),
                        })
                })
                .collect(),
        };
        judge(facts, plan.setup(), rule, self.measurements, self.problems)
    }
}
