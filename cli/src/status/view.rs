//! `rnccl status` as text: per communicator a heading, a table of its ranks (where each runs,
//! how far it got, what it does now and what it waits on), what is wrong in sentences, and the
//! slowest links.

use std::fmt::Write as _;

use rnccl::status::{CommDiagnosis, RankState, op_text, waits_text};

/// Every communicator of `diagnoses`; operations in flight `stuck_s` seconds or more count as
/// stuck; `now_unix_ns` dates the ranks' last operations.
pub fn text(diagnoses: &[CommDiagnosis], stuck_s: f64, now_unix_ns: u64) -> String {
    let mut s = String::new();
    for d in diagnoses {
        let _ = writeln!(
            s,
            "communicator {:016x} · {} ranks on {} host{} ({}) · furthest: operation #{}",
            d.comm_id,
            d.nranks,
            d.hosts.len(),
            if d.hosts.len() == 1 { "" } else { "s" },
            d.hosts.join(", "),
            d.max_started
        );
        let _ = writeln!(
            s,
            "  {:>5}  {:<12} {:>8}  {:>7}  {:>7}  now",
            "rank", "host", "pid", "started", "done"
        );
        for v in &d.ranks {
            let (host, pid) = v
                .peer
                .as_ref()
                .map_or(("?".to_string(), "?".to_string()), |p| {
                    (p.host.clone(), p.pid.to_string())
                });
            let (started, done, now) = match &v.state {
                RankState::Answered(c) => (
                    c.ops_started.to_string(),
                    c.ops_completed.to_string(),
                    now_text(c, stuck_s, now_unix_ns),
                ),
                RankState::NoAnswer(why) => ("-".into(), "-".into(), format!("NO ANSWER: {why}")),
                RankState::Left => (
                    "-".into(),
                    "-".into(),
                    "left the communicator (destroyed, or its process exited)".into(),
                ),
            };
            let _ = writeln!(
                s,
                "  {:>5}  {:<12} {:>8}  {:>7}  {:>7}  {now}",
                v.rank, host, pid, started, done
            );
        }
        let findings = d.findings(now_unix_ns);
        if d.troubled() && !findings.is_empty() {
            let _ = writeln!(s, "  problems:");
            for f in findings {
                let _ = writeln!(s, "    {f}");
            }
        } else {
            let _ = writeln!(
                s,
                "  no problem: every rank answered and is at the same operation"
            );
        }
        if !d.slowest_links.is_empty() {
            let _ = writeln!(s, "  links waited on longest:");
            for (rank, l) in &d.slowest_links {
                let _ = writeln!(
                    s,
                    "    rank {rank} {} rank {} on channel {}: {:.1} s in all ({})",
                    match l.direction {
                        rnccl::stats::Direction::Send => "->",
                        _ => "<-",
                    },
                    l.peer,
                    l.channel,
                    l.wait_s,
                    l.transport.nccl_name()
                );
            }
        }
        s.push('\n');
    }
    s
}

/// What a rank does now: its operation in flight (marked STUCK past `stuck_s`) and what it
/// waits on, or idle with its last operation.
fn now_text(c: &rnccl::status::CommStatus, stuck_s: f64, now_unix_ns: u64) -> String {
    match &c.op {
        Some(op) => {
            let mark = if op.elapsed_s >= stuck_s {
                "STUCK in"
            } else {
                "in"
            };
            let mut t = format!(
                "{mark} {} #{} ({} × {}) for {:.1} s",
                op.func.nccl_name(),
                op.seq,
                op.count,
                op.dtype,
                op.elapsed_s,
            );
            // GPU ranks' kernels do not count steps for the host: they say only that the
            // operation runs.
            if op.steps_total > 0 {
                t += &format!(", step {}/{}", op.steps_done, op.steps_total);
            } else if c.device.is_some() {
                t += " on its GPU";
            }
            let waits: Vec<_> = c
                .links
                .iter()
                .filter(|l| l.stalled_s > 0.0)
                .cloned()
                .collect();
            if !waits.is_empty() {
                let _ = write!(t, "; {}", waits_text(&waits));
            }
            t
        }
        None => match c.history.last() {
            None => "idle, no operation yet".into(),
            Some(o) => format!(
                "idle; last {} ended {:.1} s ago{}",
                op_text(o),
                o.ended_unix_ns
                    .map_or(0.0, |e| now_unix_ns.saturating_sub(e) as f64 / 1e9),
                if o.failed { " (failed)" } else { "" }
            ),
        },
    }
}
