//! `rnccl top` end to end in a real terminal (tmux): a two-rank bench runs, `rnccl top` finds
//! it with nonzero rates, opens its detail screen on Enter, and quits on `q`; with nothing
//! running it says so. Under CI tmux must be there (.ci/run installs it).

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

/// A tmux session running `rnccl top` with `args`, killed on drop.
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
            &format!("{} top {args}", bin.display()),
        ]);
        Session(name.to_string())
    }

    fn screen(&self) -> String {
        tmux(&["capture-pane", "-p", "-t", &self.0])
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
    let pages = tempfile::tempdir().unwrap();
    // Empty first: says there is nothing.
    let s = Session::start(
        "rnccl-top-empty",
        &format!("--pages {}", pages.path().display()),
    );
    s.wait_for("the empty message", |t| {
        t.contains("No rnccl jobs on this host")
    });
    tmux(&["send-keys", "-t", &s.0, "q"]);
    let t0 = Instant::now();
    while s.alive() {
        assert!(t0.elapsed() < Duration::from_secs(5), "q did not quit");
        std::thread::sleep(Duration::from_millis(50));
    }
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
    let s = Session::start("rnccl-top-job", "--interval 200");
    let jobs = s.wait_for("the bench with a nonzero rate", moving);
    assert!(jobs.contains("2/2") && jobs.contains("shm"), "{jobs}");
    tmux(&["send-keys", "-t", &s.0, "Enter"]);
    let detail = s.wait_for("the detail screen", |t| t.contains("links per peer"));
    assert!(detail.contains("GB/s sent per rank × channel"), "{detail}");
    tmux(&["send-keys", "-t", &s.0, "q"]);
    let t0 = Instant::now();
    while s.alive() {
        assert!(t0.elapsed() < Duration::from_secs(5), "q did not quit");
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(bench);
}
