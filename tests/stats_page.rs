//! Counter pages of real rank processes: `rnccl bench` ranks publish their communicators in
//! `/dev/shm/rnccl-stats-<pid>` (mode 0600) while they run, with moving byte counters, and the
//! pages are gone when they exit; `RNCCL_STATS=0` publishes nothing; the pages of killed
//! ranks are swept by the next rnccl process.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::rnccl_bin;
use rnccl::stats::page::{Found, discover};

/// The parent pid of `pid` (`/proc/<pid>/stat`, field 4).
fn ppid(pid: u32) -> Option<u32> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces.
    s.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

fn bench(iters: &str, stats: Option<&str>) -> Child {
    let mut c = Command::new(rnccl_bin());
    c.process_group(0);
    c.args([
        "bench",
        "--cpu",
        "all_reduce",
        "--ranks",
        "2",
        "-b",
        "8M",
        "-e",
        "8M",
    ])
    .args(["-n", iters, "-w", "1", "-T", "60"])
    .env_remove("NCCL_COMM_ID")
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    if let Some(v) = stats {
        c.env("RNCCL_STATS", v);
    }
    c.spawn().expect("start rnccl bench")
}

/// The pages of `launcher`'s rank processes.
fn pages_of(launcher: u32) -> Vec<Found> {
    discover(Path::new("/dev/shm"), false)
        .unwrap()
        .into_iter()
        .filter(|f| ppid(f.pid) == Some(launcher))
        .collect()
}

#[test]
fn rank_processes_publish_live_counters_and_clean_up() {
    let mut job = bench("1500", None);
    let launcher = job.id();
    let t0 = Instant::now();
    let seen = loop {
        let pages = pages_of(launcher);
        let moving = pages.iter().all(|f| {
            f.page.as_ref().is_ok_and(|p| {
                p.comms.len() == 1
                    && p.comms[0].nranks == 2
                    && p.comms[0].links.iter().any(|l| l.bytes > 0)
            })
        });
        if pages.len() == 2 && moving {
            break pages;
        }
        if let Ok(Some(s)) = job.try_wait() {
            panic!("the bench ended ({s}) before both ranks' pages showed traffic: {pages:?}");
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "no live pages: {pages:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut ranks: Vec<usize> = seen
        .iter()
        .map(|f| f.page.as_ref().unwrap().comms[0].rank)
        .collect();
    ranks.sort_unstable();
    assert_eq!(ranks, [0, 1]);
    let ids: Vec<u64> = seen
        .iter()
        .map(|f| f.page.as_ref().unwrap().comms[0].comm_id)
        .collect();
    assert_eq!(ids[0], ids[1], "both ranks name the same communicator");
    for f in &seen {
        let mode = std::fs::metadata(&f.path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", f.path.display());
    }
    let out = job.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for f in &seen {
        assert!(!f.path.exists(), "{} left behind", f.path.display());
    }

    // Turned off: the ranks run without a page.
    let mut job = bench("300", Some("0"));
    let launcher = job.id();
    loop {
        assert!(pages_of(launcher).is_empty(), "a page with RNCCL_STATS=0");
        if job.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(job.wait().unwrap().success());
}

#[test]
fn pages_of_killed_ranks_are_swept_by_the_next_process() {
    let mut job = bench("100000", None);
    let launcher = job.id();
    let t0 = Instant::now();
    let pages = loop {
        let p = pages_of(launcher);
        if p.len() == 2 {
            break p;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "no pages: {p:?}");
        std::thread::sleep(Duration::from_millis(20));
    };
    let pg = nix::unistd::Pid::from_raw(launcher as i32);
    nix::sys::signal::killpg(pg, nix::sys::signal::Signal::SIGKILL).unwrap();
    job.wait().unwrap();
    let t0 = Instant::now();
    while pages
        .iter()
        .any(|f| std::fs::metadata(format!("/proc/{}", f.pid)).is_ok())
    {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the ranks outlived SIGKILL"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        pages.iter().all(|f| f.path.exists()),
        "a killed rank cannot remove its page"
    );
    assert!(bench("2", None).wait().unwrap().success());
    for f in &pages {
        assert!(!f.path.exists(), "{} was not swept", f.path.display());
    }
}
