//! Host-list mode: one worker per host, started through the remote-start template (or
//! directly, for this host alone), driven over its standard input and output
//! ([`super::protocol`]). A host whose worker cannot be started, does not answer within the
//! connect timeout, speaks another version or fails later is reported by name with its exit
//! status and its last lines of output; the others are checked without it. Every wait has a
//! deadline: the connect timeout to start, and while measuring, no news from world rank 0 for
//! longer than the world's timeout stops every worker. When a worker fails, the others get a
//! few seconds to report their own view, then are stopped. Each worker's standard error is
//! passed through, each line prefixed with `[host]`.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rnccl::check::{CheckReport, Rule, world_timeout};
use rnccl::config::{Config, Source};

use super::Args;
use super::collect::Collector;
use super::plan::Plan;
use super::protocol::{self, FromWorker, ToWorker};
use super::rsh::Rsh;

/// Lines of a worker's output kept to explain its failure.
const TAIL: usize = 20;

/// How long the other workers may go on after one failed, to report their own view.
const GRACE: Duration = Duration::from_secs(5);

/// The knobs a coordinator passes on: the registry's knobs the user set (environment or YAML),
/// except those naming this host or this process's rendezvous.
fn forwarded(knobs: &Config) -> Vec<(String, String)> {
    knobs
        .settings()
        .filter(|(k, s)| {
            rnccl::config::lookup(k).is_some()
                && !matches!(*k, "NCCL_COMM_ID" | "NCCL_HOSTID" | "RNCCL_CONFIG")
                && matches!(s.source, Source::Env | Source::Yaml(_))
        })
        .map(|(k, s)| (k.to_string(), s.raw.clone()))
        .collect()
}

/// A spinner on standard error saying how far a check got (hidden unless `show` and standard
/// error is a terminal).
pub fn progress(show: bool) -> indicatif::ProgressBar {
    let bar = if show {
        indicatif::ProgressBar::new_spinner()
    } else {
        indicatif::ProgressBar::hidden()
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} rnccl check: {msg}, {elapsed}")
            .expect("template"),
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// Shows a line of `host`'s output on standard error, prefixed with `[host]` (ignoring a
/// standard error that went away: the check itself goes on).
fn forward(bar: &indicatif::ProgressBar, host: &str, line: &str) {
    bar.suspend(|| {
        let _ = writeln!(std::io::stderr(), "[{host}] {line}");
    });
}

/// What a worker's readers report.
enum Note {
    /// A protocol message.
    Msg(FromWorker),
    /// A marked line that does not parse.
    Bad(String),
    /// Its standard output closed (it exited, or is about to).
    Closed,
}

/// Where a worker is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Started, no answer yet.
    Starting,
    /// Answered, with this many ranks.
    Ready(usize),
    /// Measuring.
    Running,
    /// Exited after its part.
    Finished,
    /// Failed, reported.
    Failed,
}

/// One host's worker.
struct Worker {
    host: String,
    child: Option<Child>,
    stdin: Option<ChildStdin>,
    tail: Arc<Mutex<VecDeque<String>>>,
    /// The thread reading its standard error into `tail`.
    stderr_reader: Option<std::thread::JoinHandle<()>>,
    state: State,
}

impl Worker {
    fn send(&mut self, msg: &ToWorker) -> anyhow::Result<()> {
        let line = protocol::line(msg)? + "\n";
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| anyhow::anyhow!("its input is closed"))?;
        stdin.write_all(line.as_bytes())?;
        stdin.flush()?;
        Ok(())
    }

    fn running(&self) -> bool {
        matches!(
            self.state,
            State::Starting | State::Ready(_) | State::Running
        )
    }

    /// Its last lines of output, for a failure's reason. Once it has exited (no child left),
    /// its final lines may still be in the reader's hands: wait for that reader (at most 1 s).
    fn last_words(&self) -> String {
        if let (None, Some(reader)) = (&self.child, &self.stderr_reader) {
            let until = Instant::now() + Duration::from_secs(1);
            while !reader.is_finished() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        let tail = self.tail.lock().map(|t| t.clone()).unwrap_or_default();
        let lines: Vec<&str> = tail
            .iter()
            .map(|l| l.trim())
            .filter(|l| !l.is_empty())
            .collect();
        let from = lines.len().saturating_sub(3);
        match lines[from..].join(" / ") {
            s if s.is_empty() => "no output".to_string(),
            s => s,
        }
    }

    /// Stops it (if it still runs) and waits for it.
    fn stop(&mut self) -> Option<ExitStatus> {
        self.stdin = None;
        let mut child = self.child.take()?;
        let _ = child.kill();
        child.wait().ok()
    }

    /// Its exit status, once it exited (waiting up to `limit` after its output closed).
    fn exited(&mut self, limit: Duration) -> Option<ExitStatus> {
        let child = self.child.as_mut()?;
        let until = Instant::now() + limit;
        loop {
            if let Ok(Some(s)) = child.try_wait() {
                self.child = None;
                self.stdin = None;
                return Some(s);
            }
            if Instant::now() >= until {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// `exit status 255`, `killed by signal 9 (SIGKILL)`.
fn status_words(s: ExitStatus) -> String {
    match (s.code(), s.signal()) {
        (Some(c), _) => format!("exit status {c}"),
        (None, Some(sig)) => {
            let name = nix::sys::signal::Signal::try_from(sig)
                .map_or_else(|_| "unknown signal".to_string(), |s| s.as_str().to_string());
            format!("killed by signal {sig} ({name})")
        }
        _ => s.to_string(),
    }
}

/// The hosts, how to reach them, and what to run there.
pub struct Fanout {
    hosts: Vec<String>,
    rsh: Option<Rsh>,
    remote: Vec<String>,
    plan: Plan,
    rule: Rule,
    cpu: bool,
    ranks_per_host: Option<usize>,
    knobs: Vec<(String, String)>,
    connect: Duration,
}

impl Fanout {
    /// Prepares a check of `hosts`, reached through `rsh` (`None`: run the worker here).
    ///
    /// Errors: this executable's path cannot be found (give `--rnccl`).
    pub fn new(
        hosts: Vec<String>,
        rsh: Option<Rsh>,
        args: &Args,
        plan: Plan,
        rule: Rule,
        knobs: &Config,
        connect: Duration,
    ) -> anyhow::Result<Fanout> {
        let exe = match &args.rnccl {
            Some(p) => p.clone(),
            None => std::env::current_exe()
                .map_err(|e| {
                    anyhow::anyhow!("cannot find this rnccl's path ({e}): give --rnccl PATH")
                })?
                .to_string_lossy()
                .into_owned(),
        };
        Ok(Fanout {
            hosts,
            rsh,
            remote: vec![exe, "check".into(), "--worker".into()],
            plan,
            rule,
            cpu: args.cpu,
            ranks_per_host: args.ranks_per_host,
            knobs: forwarded(knobs),
            connect,
        })
    }

    /// The command starting `host`'s worker.
    fn command(&self, host: &str) -> Command {
        match &self.rsh {
            Some(r) => r.command(host, &self.remote),
            None => {
                let mut c = Command::new(&self.remote[0]);
                c.args(&self.remote[1..]);
                c
            }
        }
    }

    /// Starts `host`'s worker with its readers, and sends it the setup.
    fn start(
        &self,
        i: usize,
        host: &str,
        notes: &Sender<(usize, Note)>,
        bar: &indicatif::ProgressBar,
    ) -> Result<Worker, String> {
        let mut cmd = self.command(host);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let program = cmd.get_program().to_string_lossy().into_owned();
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("could not run {program} to reach it: {e}"))?;
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        if let Some(out) = child.stdout.take() {
            let (notes, host, bar) = (notes.clone(), host.to_string(), bar.clone());
            std::thread::spawn(move || {
                for line in BufReader::new(out).lines().map_while(Result::ok) {
                    let note = match protocol::parse_from_worker(&line) {
                        Ok(Some(m)) => Note::Msg(m),
                        Ok(None) => {
                            forward(&bar, &host, &line);
                            continue;
                        }
                        Err(e) => Note::Bad(e.to_string()),
                    };
                    if notes.send((i, note)).is_err() {
                        return;
                    }
                }
                let _ = notes.send((i, Note::Closed));
            });
        }
        let stderr_reader = child.stderr.take().map(|err| {
            let (tail, host, bar) = (tail.clone(), host.to_string(), bar.clone());
            std::thread::spawn(move || {
                for line in BufReader::new(err).lines().map_while(Result::ok) {
                    forward(&bar, &host, &line);
                    if let Ok(mut t) = tail.lock() {
                        if t.len() == TAIL {
                            t.pop_front();
                        }
                        t.push_back(line);
                    }
                }
            })
        });
        let mut w = Worker {
            host: host.to_string(),
            stdin: child.stdin.take(),
            child: Some(child),
            tail,
            stderr_reader,
            state: State::Starting,
        };
        let setup = ToWorker::Setup {
            version: env!("CARGO_PKG_VERSION").to_string(),
            host: host.to_string(),
            cpu: self.cpu,
            ranks_per_host: self.ranks_per_host,
            knobs: self.knobs.clone(),
            plan: self.plan.clone(),
            start_within_s: 2 * self.connect.as_secs() + 30,
        };
        if let Err(e) = w.send(&setup) {
            let status = w.stop().map(status_words).unwrap_or_default();
            return Err(format!(
                "could not be started ({status}): {} (sending the setup: {e})",
                w.last_words()
            ));
        }
        Ok(w)
    }

    /// Runs the check on every host and judges it.
    pub fn run(self) -> CheckReport {
        let mut col = Collector::default();
        let (tx, rx) = mpsc::channel();
        let bar = progress(true);
        let mut workers: Vec<Option<Worker>> = Vec::with_capacity(self.hosts.len());
        for (i, host) in self.hosts.iter().enumerate() {
            match self.start(i, host, &tx, &bar) {
                Ok(w) => workers.push(Some(w)),
                Err(why) => {
                    col.problem(host, why);
                    workers.push(None);
                }
            }
        }
        drop(tx);
        let mut run = Run {
            workers,
            rx,
            col,
            bar,
            broke_at: None,
        };
        run.greet(self.connect);
        if let Some(root) = run.open(self.connect) {
            run.measure(
                root,
                world_timeout(self.plan.timeout()) + Duration::from_secs(30),
            );
        }
        run.bar.finish_and_clear();
        for w in run.workers.iter_mut().flatten() {
            w.stop();
        }
        run.col.report(Some(&self.hosts), &self.plan, self.rule)
    }
}

/// A check in progress.
struct Run {
    workers: Vec<Option<Worker>>,
    rx: Receiver<(usize, Note)>,
    col: Collector,
    bar: indicatif::ProgressBar,
    /// When a measuring worker first failed.
    broke_at: Option<Instant>,
}

impl Run {
    /// Marks worker `i` failed with `why`, stopping it.
    fn fail(&mut self, i: usize, why: String) {
        if let Some(w) = self.workers[i].as_mut() {
            w.stop();
            if w.state == State::Running {
                self.broke_at.get_or_insert_with(Instant::now);
            }
            w.state = State::Failed;
            let host = w.host.clone();
            self.col.problem(&host, why);
        }
    }

    /// Worker `i`'s output closed: it finished when it exited with 0 after measuring, else it
    /// failed (`starting`: it never answered).
    fn closed(&mut self, i: usize) {
        let Some(w) = self.workers[i]
            .as_mut()
            .filter(|w| !matches!(w.state, State::Failed | State::Finished))
        else {
            // Already reported (a worker this coordinator stopped closes its output too).
            return;
        };
        let status = w.exited(Duration::from_secs(2));
        let words = w.last_words();
        match (status, w.state) {
            (Some(s), State::Running) if s.success() => w.state = State::Finished,
            (status, state) => {
                let status = status.map_or_else(|| "still running".to_string(), status_words);
                let why = match state {
                    State::Starting => format!("could not be started ({status}): {words}"),
                    _ => format!("its worker failed ({status}): {words}"),
                };
                self.fail(i, why);
            }
        }
    }

    /// Waits up to `limit` for every started worker's hello; the silent ones are stopped and
    /// reported.
    fn greet(&mut self, limit: Duration) {
        let until = Instant::now() + limit;
        while self
            .workers
            .iter()
            .flatten()
            .any(|w| w.state == State::Starting)
        {
            self.bar.set_message("starting the workers".to_string());
            let left = until.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok((i, Note::Msg(FromWorker::Hello { version, ranks }))) => {
                    let ours = env!("CARGO_PKG_VERSION");
                    if version != ours {
                        self.fail(i, format!("runs rnccl {version}, this is {ours}: install the same build everywhere"));
                    } else if let Some(w) = self.workers[i].as_mut() {
                        w.state = State::Ready(ranks);
                    }
                }
                Ok((i, Note::Msg(m))) => self.fail(i, format!("spoke out of turn ({m:?})")),
                Ok((i, Note::Bad(e))) => self.fail(i, e),
                Ok((i, Note::Closed)) => self.closed(i),
                Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        for i in 0..self.workers.len() {
            if let Some(w) = self.workers[i]
                .as_ref()
                .filter(|w| w.state == State::Starting)
            {
                let why = format!(
                    "did not answer within {} s (host down, ssh waiting, or no rnccl at the path given?); its output: {}",
                    limit.as_secs(),
                    w.last_words()
                );
                self.fail(i, why);
            }
        }
    }

    /// Has the first ready host open the world's rendezvous, then starts everyone. Returns the
    /// root's index, `None` when nobody can start.
    fn open(&mut self, limit: Duration) -> Option<usize> {
        let ready: Vec<(usize, usize)> = self
            .workers
            .iter()
            .enumerate()
            .filter_map(|(i, w)| match w.as_ref()?.state {
                State::Ready(n) => Some((i, n)),
                _ => None,
            })
            .collect();
        let &(root, _) = ready.first()?;
        let nranks: usize = ready.iter().map(|&(_, n)| n).sum();
        let start = |id: Option<String>, first_rank| ToWorker::Start {
            id,
            first_rank,
            nranks,
        };
        if let Err(e) = self.workers[root].as_mut()?.send(&start(None, 0)) {
            self.fail(root, format!("could not be told to start: {e}"));
            return None;
        }
        self.workers[root].as_mut()?.state = State::Running;
        let until = Instant::now() + limit;
        let id = loop {
            let left = until.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok((i, Note::Msg(FromWorker::Id { id }))) if i == root => break id,
                Ok((i, Note::Closed)) => {
                    self.closed(i);
                    if i == root {
                        return None;
                    }
                }
                Ok((i, Note::Bad(e))) => self.fail(i, e),
                Ok(_) => {}
                Err(_) => {
                    self.fail(
                        root,
                        format!("did not open the rendezvous within {} s", limit.as_secs()),
                    );
                    return None;
                }
            }
        };
        let mut first = ready[0].1;
        for &(i, n) in &ready[1..] {
            let sent = match self.workers[i].as_mut() {
                Some(w) if w.state == State::Ready(n) => w.send(&start(Some(id.clone()), first)),
                _ => continue,
            };
            match sent {
                Ok(()) => {
                    if let Some(w) = self.workers[i].as_mut() {
                        w.state = State::Running;
                    }
                }
                Err(e) => self.fail(i, format!("could not be told to start: {e}")),
            }
            first += n;
        }
        Some(root)
    }

    /// Collects the root's events until every worker ended; stops them all when one failed
    /// and the others outlived the grace period, or when the root says nothing for `quiet`.
    fn measure(&mut self, root: usize, quiet: Duration) {
        let mut last_news = Instant::now();
        while self.workers.iter().flatten().any(Worker::running) {
            match self.rx.recv_timeout(Duration::from_millis(100)) {
                Ok((_, Note::Msg(FromWorker::Event(e)))) => {
                    self.col.push(e);
                    last_news = Instant::now();
                    self.bar
                        .set_message(format!("{} measured", self.col.measured()));
                }
                Ok((_, Note::Msg(_))) => last_news = Instant::now(),
                Ok((i, Note::Bad(e))) => self.fail(i, e),
                Ok((i, Note::Closed)) => self.closed(i),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            let (stop, why) = if self.broke_at.is_some_and(|t| t.elapsed() > GRACE) {
                (
                    true,
                    format!(
                        "stopped {} s after another host's worker failed",
                        GRACE.as_secs()
                    ),
                )
            } else if last_news.elapsed() > quiet {
                let root_host = self.workers[root].as_ref().map_or("", |w| w.host.as_str());
                (
                    true,
                    format!(
                        "stopped: no progress reported by {root_host} (world rank 0) for {} s",
                        quiet.as_secs()
                    ),
                )
            } else {
                (false, String::new())
            };
            if stop {
                for i in 0..self.workers.len() {
                    if self.workers[i].as_ref().is_some_and(Worker::running) {
                        self.fail(i, why.clone());
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_users_knobs_go_to_the_workers_but_not_this_hosts_identity() {
        let mut c = Config::defaults();
        c.set("NCCL_SOCKET_IFNAME", "=eth1", Source::Env);
        c.set("NCCL_COMM_ID", "10.0.0.1:29500", Source::Env);
        c.set("NCCL_HOSTID", "login1", Source::Env);
        c.set("NCCL_DEBUG", "INFO", Source::Program("a flag".into()));
        // Not a knob (spelled so that the registry's literal scan passes it by).
        c.set(&format!("NCCL_{}", "NOT_A_KNOB"), "1", Source::Env);
        assert_eq!(
            forwarded(&c),
            [("NCCL_SOCKET_IFNAME".to_string(), "=eth1".to_string())]
        );
    }
}
