//! What the launcher says when ranks fail: the first failure at once and named (with the
//! failures that came with it in the same instant, grouped), then, when the job has ended, the
//! failures that followed, each distinct message once with the ranks that hit it. Ranks the
//! launcher stopped itself are one line, not failures.

use std::collections::BTreeSet;
use std::ops::Range;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use super::signals;

/// Failures arriving within this long of the first are printed with it, grouped.
const FIRST_BATCH: Duration = Duration::from_millis(250);
/// At most this many distinct messages are listed for the failures that followed.
const MAX_GROUPS: usize = 8;

/// One failure: the ranks it concerns and what happened, in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The ranks (one process's, or one thread's).
    pub ranks: Range<usize>,
    /// What happened (`killed by signal 9 (SIGKILL) …`, or the rank's own error message).
    pub what: String,
    /// The process ended without saying why (killed, or exited silently): a root cause, said
    /// before the errors of ranks that saw it from their side.
    pub died: bool,
}

/// The failures of a job, as they arrive.
#[derive(Default)]
pub struct Failures {
    first_at: Option<Instant>,
    first_batch_printed: bool,
    waiting: Vec<Failure>,
    stopped: BTreeSet<usize>,
    count: usize,
}

impl Failures {
    /// Whether any failure has arrived.
    pub fn any(&self) -> bool {
        self.count > 0
    }

    /// When the first failure arrived.
    pub fn first_at(&self) -> Option<Instant> {
        self.first_at
    }

    /// Records a failure.
    pub fn add(&mut self, f: Failure) {
        self.first_at.get_or_insert_with(Instant::now);
        self.count += 1;
        self.waiting.push(f);
    }

    /// Records ranks the launcher stopped itself.
    pub fn stopped(&mut self, ranks: Range<usize>) {
        self.stopped.extend(ranks);
    }

    /// The lines due now: the first batch once [`FIRST_BATCH`] has passed since the first
    /// failure (or at once when `end`); with `end`, everything still waiting.
    pub fn due(&mut self, end: bool) -> Vec<String> {
        let mut lines = Vec::new();
        if !self.first_batch_printed
            && let Some(t) = self.first_at
            && (end || t.elapsed() >= FIRST_BATCH)
        {
            self.first_batch_printed = true;
            let mut batch = std::mem::take(&mut self.waiting);
            batch.sort_by_key(|f| !f.died);
            for (ranks, what) in group(batch) {
                lines.push(format!("rnccl bench: {} {what}", subject(&ranks)));
            }
        }
        if end {
            let rest = std::mem::take(&mut self.waiting);
            if !rest.is_empty() {
                let n: usize = rest.iter().map(|f| f.ranks.len()).sum();
                lines.push(format!(
                    "rnccl bench: {n} {} failed after that:",
                    plural(n, "rank", "ranks")
                ));
                let groups = group(rest);
                let shown = groups.len().min(MAX_GROUPS);
                for (ranks, what) in &groups[..shown] {
                    lines.push(format!("  {}: {what}", ranks_label(ranks)));
                }
                let more: usize = groups[shown..].iter().map(|(r, _)| r.len()).sum();
                if more > 0 {
                    lines.push(format!(
                        "  … and {more} more {} with other messages",
                        plural(more, "rank", "ranks")
                    ));
                }
            }
            if !self.stopped.is_empty() {
                let all: Vec<usize> = self.stopped.iter().copied().collect();
                lines.push(format!(
                    "rnccl bench: stopped {} (still running after the first failure)",
                    ranks_label(&all)
                ));
                self.stopped.clear();
            }
        }
        lines
    }
}

/// Failures with the same message, their ranks merged, in order of first arrival.
fn group(failures: Vec<Failure>) -> Vec<(Vec<usize>, String)> {
    let mut groups: Vec<(Vec<usize>, String)> = Vec::new();
    for f in failures {
        match groups.iter_mut().find(|(_, w)| *w == f.what) {
            Some((ranks, _)) => ranks.extend(f.ranks),
            None => groups.push((f.ranks.collect(), f.what)),
        }
    }
    for (ranks, _) in &mut groups {
        ranks.sort_unstable();
        ranks.dedup();
    }
    groups
}

fn plural<'a>(n: usize, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 { one } else { many }
}

/// "rank 4", "ranks 0-1", "ranks 1, 3, 9-11".
pub fn ranks_label(ranks: &[usize]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < ranks.len() {
        let mut j = i;
        while j + 1 < ranks.len() && ranks[j + 1] == ranks[j] + 1 {
            j += 1;
        }
        parts.push(if j == i {
            ranks[i].to_string()
        } else {
            format!("{}-{}", ranks[i], ranks[j])
        });
        i = j + 1;
    }
    format!(
        "{} {}",
        plural(ranks.len(), "rank", "ranks"),
        parts.join(", ")
    )
}

/// "rank 4 failed:" or "ranks 0-1 failed:".
fn subject(ranks: &[usize]) -> String {
    format!("{} failed:", ranks_label(ranks))
}

/// How a process ended, in words, for a process that left no message of its own: `killed by
/// signal 9 (SIGKILL) …` (naming the likely sender of a SIGKILL, since the launcher only sends
/// one to ranks it stops, which are not failures) or `exited with status 3 without saying why`.
pub fn describe_exit(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (_, Some(sig)) => {
            let core = if status.core_dumped() {
                ", core dumped"
            } else {
                ""
            };
            let why = if sig == nix::sys::signal::Signal::SIGKILL as i32 {
                ", which rnccl bench did not send: the kernel's out-of-memory killer sends it when \
                 the host runs out of memory (see `dmesg`), as do schedulers enforcing a limit"
            } else {
                ""
            };
            format!("killed by signal {sig} ({}{core}){why}", signals::name(sig))
        }
        (Some(code), None) if code > 128 && signals::CANCEL.contains(&(code - 128)) => {
            format!(
                "stopped by {} from outside rnccl bench (exit status {code})",
                signals::name(code - 128)
            )
        }
        (Some(code), None) => format!("exited with status {code} without saying why"),
        (None, None) => format!("ended ({status})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(ranks: Range<usize>, what: &str) -> Failure {
        Failure {
            ranks,
            what: what.into(),
            died: false,
        }
    }

    #[test]
    fn labels_compress_runs() {
        assert_eq!(ranks_label(&[4]), "rank 4");
        assert_eq!(ranks_label(&[0, 1]), "ranks 0-1");
        assert_eq!(ranks_label(&[1, 3, 9, 10, 11]), "ranks 1, 3, 9-11");
    }

    #[test]
    fn the_same_error_on_every_rank_is_said_once() {
        let mut fs = Failures::default();
        fs.add(f(1..2, "NCCL_ALGO=\"Bogus\" cannot be used"));
        fs.add(f(0..1, "NCCL_ALGO=\"Bogus\" cannot be used"));
        assert!(fs.due(false).is_empty(), "the first batch waits a moment");
        assert_eq!(
            fs.due(true),
            ["rnccl bench: ranks 0-1 failed: NCCL_ALGO=\"Bogus\" cannot be used"]
        );
        assert!(fs.due(true).is_empty(), "nothing is said twice");
    }

    #[test]
    fn the_first_failure_then_the_cascade_grouped() {
        let mut fs = Failures::default();
        fs.add(f(4..5, "killed by signal 9 (SIGKILL)"));
        std::thread::sleep(FIRST_BATCH);
        let first = fs.due(false);
        assert_eq!(
            first,
            ["rnccl bench: rank 4 failed: killed by signal 9 (SIGKILL)"]
        );
        fs.add(f(3..4, "rank 4 went away"));
        fs.add(f(5..6, "rank 4 went away"));
        fs.add(f(9..10, "segment withdrawn"));
        fs.stopped(6..7);
        fs.stopped(12..15);
        assert!(fs.due(false).is_empty());
        assert_eq!(
            fs.due(true),
            [
                "rnccl bench: 3 ranks failed after that:",
                "  ranks 3, 5: rank 4 went away",
                "  rank 9: segment withdrawn",
                "rnccl bench: stopped ranks 6, 12-14 (still running after the first failure)",
            ]
        );
    }

    #[test]
    fn a_death_is_said_before_the_errors_it_caused() {
        let mut fs = Failures::default();
        fs.add(f(0..4, "the rendezvous failed: rank 4 left"));
        fs.add(Failure {
            died: true,
            ..f(4..5, "killed by signal 9 (SIGKILL)")
        });
        assert_eq!(
            fs.due(true),
            [
                "rnccl bench: rank 4 failed: killed by signal 9 (SIGKILL)",
                "rnccl bench: ranks 0-3 failed: the rendezvous failed: rank 4 left",
            ]
        );
    }

    #[test]
    fn many_distinct_messages_are_capped() {
        let mut fs = Failures::default();
        fs.add(f(0..1, "first"));
        fs.due(true);
        for r in 1..20 {
            fs.add(f(r..r + 1, &format!("message {r}")));
        }
        let lines = fs.due(true);
        assert_eq!(lines.len(), 2 + MAX_GROUPS);
        assert_eq!(
            lines.last().unwrap(),
            "  … and 11 more ranks with other messages"
        );
    }
}
