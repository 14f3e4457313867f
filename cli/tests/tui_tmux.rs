//! The terminal screens end to end in a real terminal (tmux). `rnccl top`: a two-rank bench
//! runs, top finds it with nonzero rates, opens its detail screen on Enter, and quits on `q`;
//! with nothing running it says so. `rnccl tune`: a sweep with the defaults, one knob changed,
//! a second curve, the best settings saved. Under CI tmux must be there (.ci/run installs it).

use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn tmux(args: &[&str]) -> String {
    let out = Command::new("tmux").args(args).output().expect("run tmux");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn have_tmux() -> bool {
    let ok = Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok && std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("tmux is missing: .ci/run installs it");
    }
    ok
}

/// Serialises the tests: two `tmux new-session` racing to start the tmux server can lose
/// one of the sessions.
static TMUX: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A tmux session running `rnccl <args>`, killed on drop.
struct Session(String);

impl Session {
    fn start(name: &str, args: &str) -> Session {
        let bin = assert_cmd::cargo::cargo_bin("rnccl");
        let _ = tmux(&["kill-session", "-t", name]);
        tmux(&[
            "new-session",
            "-d",
            "-s",
            name,
            "-x",
            "120",
            "-y",
            "32",
            &format!("{} {args}", bin.display()),
        ]);
        Session(name.to_string())
    }

    fn screen(&self) -> String {
        tmux(&["capture-pane", "-p", "-t", &self.0])
    }

    fn keys(&self, keys: &[&str]) {
        let mut a = vec!["send-keys", "-t", self.0.as_str()];
        a.extend_from_slice(keys);
        tmux(&a);
    }

    /// Waits until the session ends (the program quit), at most 5 s.
    fn wait_gone(&self) {
        let t0 = Instant::now();
        while self.alive() {
            assert!(
                t0.elapsed() < Duration::from_secs(5),
                "the program did not quit"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits up to 20 s for the screen to satisfy `f`; returns it.
    fn wait_for(&self, what: &str, f: impl Fn(&str) -> bool) -> String {
        let t0 = Instant::now();
        loop {
            let s = self.screen();
            if f(&s) {
                return s;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "no {what} on the screen:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn alive(&self) -> bool {
        Command::new("tmux")
            .args(["has-session", "-t", &self.0])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = tmux(&["kill-session", "-t", &self.0]);
    }
}

/// A bench in its own process group, killed with its rank processes on drop.
struct Bench(Child);

impl Drop for Bench {
    fn drop(&mut self) {
        let pg = nix::unistd::Pid::from_raw(self.0.id() as i32);
        let _ = nix::sys::signal::killpg(pg, nix::sys::signal::Signal::SIGKILL);
        let _ = self.0.wait();
        // The killed ranks could not remove their counter pages: once the whole group is
        // gone, sweep them.
        let t0 = Instant::now();
        while nix::sys::signal::killpg(pg, None).is_ok() && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = rnccl::stats::page::discover(std::path::Path::new("/dev/shm"), true);
    }
}

/// Whether a jobs-table row shows a nonzero rate in its GB/s column (the number before the
/// status `ok`).
fn moving(screen: &str) -> bool {
    screen.lines().any(|l| {
        let w: Vec<&str> = l.split_whitespace().collect();
        w.iter()
            .position(|t| *t == "ok")
            .is_some_and(|i| i > 0 && w[i - 1].parse::<f64>().is_ok_and(|v| v > 0.0))
    })
}

#[test]
fn top_follows_a_running_bench_and_quits_on_q() {
    if !have_tmux() {
        return;
    }
    let _serial = TMUX.lock().unwrap_or_else(|p| p.into_inner());
    let pages = tempfile::tempdir().unwrap();
    // Empty first: says there is nothing.
    let s = Session::start(
        "rnccl-top-empty",
        &format!("top --pages {}", pages.path().display()),
    );
    s.wait_for("the empty message", |t| {
        t.contains("No rnccl jobs on this host")
    });
    s.keys(&["q"]);
    s.wait_gone();
    drop(s);

    let bench = Bench(
        Command::new(assert_cmd::cargo::cargo_bin("rnccl"))
            .args([
                "bench",
                "--cpu",
                "all_reduce",
                "--ranks",
                "2",
                "-b",
                "16M",
                "-e",
                "16M",
            ])
            .args(["-n", "100000", "-w", "1", "-T", "60"])
            .env_remove("NCCL_COMM_ID")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("start rnccl bench"),
    );
    let s = Session::start("rnccl-top-job", "top --interval 200");
    let jobs = s.wait_for("the bench with a nonzero rate", moving);
    assert!(jobs.contains("2/2") && jobs.contains("SHM"), "{jobs}");
    s.keys(&["Enter"]);
    let detail = s.wait_for("the detail screen", |t| t.contains("links per peer"));
    assert!(detail.contains("GB/s sent per rank × channel"), "{detail}");
    s.keys(&["q"]);
    s.wait_gone();
    drop(bench);
}

#[test]
fn tune_runs_two_sweeps_and_saves_the_best() {
    if !have_tmux() {
        return;
    }
    let _serial = TMUX.lock().unwrap_or_else(|p| p.into_inner());
    let out = tempfile::tempdir().unwrap();
    let s = Session::start(
        "rnccl-tune",
        &format!("tune --cpu --out {}", out.path().display()),
    );
    s.wait_for("the form", |t| t.contains("NCCL_MIN_NCHANNELS"));
    // Largest size 4M (three sizes), then run with the defaults.
    s.keys(&["Down", "Down", "BSpace", "BSpace", "BSpace", "4M", "Enter"]);
    s.wait_for("the first run done", |t| {
        t.contains("defaults") && t.contains("done")
    });
    // A bad value is refused as typed; then MIN_NCHANNELS=4 and a second run.
    s.keys(&["Down", "Down", "Down", "Down", "x"]);
    s.wait_for("the registry's complaint", |t| {
        t.contains("NCCL_MIN_NCHANNELS=\"x\"")
    });
    s.keys(&["Enter"]);
    std::thread::sleep(Duration::from_millis(500));
    assert!(!s.screen().contains("#2"), "a run started with a bad value");
    s.keys(&["BSpace", "4", "Enter"]);
    let screen = s.wait_for("two finished runs", |t| {
        t.contains("MIN_NCHANNELS=4") && t.matches("done").count() == 2
    });
    assert!(screen.contains("#1") && screen.contains("#2"), "{screen}");
    s.keys(&["C-s"]);
    s.wait_for("the files written", |t| t.contains("wrote"));
    let yaml = std::fs::read_to_string(out.path().join("rnccl-tune.yaml")).unwrap();
    let sh = std::fs::read_to_string(out.path().join("rnccl-tune.sh")).unwrap();
    let best_has_knob = yaml.contains("NCCL_MIN_NCHANNELS: 4");
    assert_eq!(
        best_has_knob,
        sh.contains("export NCCL_MIN_NCHANNELS='4'"),
        "both files name the same best run:\n{yaml}\n{sh}"
    );
    s.keys(&["Escape"]);
    s.wait_gone();
}
