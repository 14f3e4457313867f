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

    /// The lines due now: the first failure once [`FIRST_BATCH`] has passed since it arrived
    /// (or at once when `end`) — the ranks that died without a word if any did, else the
    /// earliest failure with the ranks that said the same; with `end`, the rest grouped.
    pub fn due(&mut self, end: bool) -> Vec<String> {
        let mut lines = Vec::new();
        if !self.first_batch_printed
            && let Some(t) = self.first_at
            && (end || t.elapsed() >= FIRST_BATCH)
        {
            self.first_batch_printed = true;
            let batch = std::mem::take(&mut self.waiting);
            let (first, rest): (Vec<Failure>, Vec<Failure>) = if batch.iter().any(|f| f.died) {
                batch.into_iter().partition(|f| f.died)
            } else {
                let what = batch.first().map(|f| f.what.clone()).unwrap_or_default();
                batch.into_iter().partition(|f| f.what == what)
            };
            for (ranks, what) in group(first) {
                lines.push(format!("rnccl bench: {} {what}", subject(&ranks)));
            }
            self.waiting = rest;
        }
        if end {
            let rest = std::mem::take(&mut self.waiting);
            if !rest.is_empty() {
                let n: usize = rest.iter().map(|f| f.ranks.len()).sum();
                lines.push(format!(
                    "rnccl bench: {n} {} failed after that:",
                    plural(n, "rank", "ranks")
                ));
                let groups = group_alike(rest);
                let shown = groups.len().min(MAX_GROUPS);
                for g in &groups[..shown] {
                    let example = if g.varies {
                        format!(", e.g. rank {}", g.example_rank)
                    } else {
                        String::new()
                    };
                    lines.push(format!("  {}{example}: {}", ranks_label(&g.ranks), g.what));
                }
                let more: usize = groups[shown..].iter().map(|g| g.ranks.len()).sum();
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

/// Failures that say the same thing about different ranks, peers, channels or operations.
struct Alike {
    ranks: Vec<usize>,
    /// The first one's message, without the first failure it repeats.
    what: String,
    /// Whose message that is.
    example_rank: usize,
    /// The messages differ in their numbers.
    varies: bool,
}

/// The message without what it forwards of the first failure (already said, first).
fn own_part(what: &str) -> &str {
    what.split_once("; first failure: ")
        .map_or(what, |(own, _)| own)
}

/// `what` with every run of digits (ranks, pids, channels, operation numbers) as `#`.
fn shape(what: &str) -> String {
    let mut out = String::with_capacity(what.len());
    let mut in_digits = false;
    for c in what.chars() {
        if c.is_ascii_digit() {
            if !in_digits {
                out.push('#');
            }
            in_digits = true;
        } else {
            out.push(c);
            in_digits = false;
        }
    }
    out
}

/// Failures grouped by the shape of their own message, in order of first arrival: the
/// cascade a rank's death sets off says the same thing on every rank, each naming its own
/// neighbour.
fn group_alike(failures: Vec<Failure>) -> Vec<Alike> {
    let mut groups: Vec<(String, Alike)> = Vec::new();
    for f in failures {
        let own = own_part(&f.what);
        let key = shape(own);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, g)) => {
                g.varies |= g.what != own;
                g.ranks.extend(f.ranks);
            }
            None => {
                let what = own.to_string();
                groups.push((
                    key,
                    Alike {
                        example_rank: f.ranks.start,
                        ranks: f.ranks.collect(),
                        what,
                        varies: false,
                    },
                ));
            }
        }
    }
    groups
        .into_iter()
        .map(|(_, mut g)| {
            g.ranks.sort_unstable();
            g.ranks.dedup();
            g
        })
        .collect()
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
                "rnccl bench: 4 ranks failed after that:",
                "  ranks 0-3: the rendezvous failed: rank 4 left",
            ]
        );
    }

    /// What a 16-rank run printed when rank 4 was killed: the death, then one line for the
    /// ranks that saw it and one for the ranks that saw their neighbour give up.
    #[test]
    fn a_cascade_is_one_line_per_kind() {
        let mut fs = Failures::default();
        fs.add(Failure {
            died: true,
            ..f(4..5, "killed by signal 9 (SIGKILL)")
        });
        let saw = |r: usize, ch: usize| {
            f(
                r..r + 1,
                &format!(
                    "remote error: AllReduce #385 (262144 × float32, Ring): rank 4 (host vm, pid 6544) exited (process gone) while this rank waited on channel {ch}"
                ),
            )
        };
        let next = |r: usize, peer: usize| {
            f(
                r..r + 1,
                &format!(
                    "remote error: AllReduce #{} (262144 × float32, Ring): rank {peer} (host vm, pid {}) went away (closed its connection or dropped its communicator) on channel 0; first failure: rank 5 (host vm, pid 6547): remote error: rank 4 exited",
                    385 + r % 2,
                    6500 + peer
                ),
            )
        };
        fs.add(saw(3, 1));
        fs.add(saw(5, 0));
        for r in (0..3).chain(6..16) {
            fs.add(next(r, (r + 15) % 16));
        }
        let lines = fs.due(true);
        assert_eq!(lines.len(), 4, "{lines:#?}");
        assert_eq!(
            lines[0],
            "rnccl bench: rank 4 failed: killed by signal 9 (SIGKILL)"
        );
        assert_eq!(lines[1], "rnccl bench: 15 ranks failed after that:");
        assert!(
            lines[2].starts_with("  ranks 3, 5, e.g. rank 3: remote error: AllReduce #385"),
            "{}",
            lines[2]
        );
        assert!(
            lines[3].starts_with("  ranks 0-2, 6-15, e.g. rank 0: "),
            "{}",
            lines[3]
        );
        assert!(
            !lines[3].contains("first failure"),
            "said once, first: {}",
            lines[3]
        );
    }

    #[test]
    fn many_distinct_messages_are_capped() {
        let mut fs = Failures::default();
        fs.add(f(0..1, "first"));
        fs.due(true);
        for r in 1..20 {
            let word: String = std::iter::repeat_n('x', r).collect();
            fs.add(f(r..r + 1, &format!("message {word}")));
        }
        let lines = fs.due(true);
        assert_eq!(lines.len(), 2 + MAX_GROUPS);
        assert_eq!(
            lines.last().unwrap(),
            "  … and 11 more ranks with other messages"
        );
    }
}
