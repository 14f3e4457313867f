//! `rnccl bench` started by a launcher's variables (torchrun's RANK/WORLD_SIZE here), as real
//! jobs on this host: a one-rank job needs no rendezvous; a job that names neither a
//! rendezvous address nor a job id is refused rather than guessed; and when two jobs meet at
//! one address, a rank of the other job is refused by name while the job goes on.

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// `rnccl bench` (one small all_reduce) with only `vars` in its environment.
fn rank(vars: &[(&str, &str)]) -> Child {
    Command::new(assert_cmd::cargo::cargo_bin("rnccl"))
        .args(["bench", "--cpu", "-b", "8", "-e", "8", "-n", "2", "-w", "1"])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("RNCCL_TIMEOUT", "30")
        .envs(vars.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits at most `limit` for `c`; kills it past that.
fn finish(mut c: Child, limit: Duration) -> Output {
    let start = Instant::now();
    while c.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            let _ = c.kill();
            panic!(
                "still running after {limit:?}: {:?}",
                c.wait_with_output().unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    c.wait_with_output().unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn a_one_rank_job_needs_no_rendezvous() {
    let out = finish(
        rank(&[("RANK", "0"), ("WORLD_SIZE", "1")]),
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("Avg bus bandwidth"), "{}", text(&out));
}

#[test]
fn a_job_without_address_or_id_is_not_guessed() {
    let vars = [("WORLD_SIZE", "2"), ("LOCAL_WORLD_SIZE", "2")];
    for r in ["0", "1"] {
        let out = finish(
            rank(&[&vars[..], &[("RANK", r)]].concat()),
            Duration::from_secs(20),
        );
        let t = text(&out);
        assert!(!out.status.success(), "rank {r}: {t}");
        assert!(
            t.contains("neither a rendezvous address nor a job id")
                && t.contains("NCCL_COMM_ID=127.0.0.1:<free port>"),
            "rank {r}: {t}"
        );
    }
}

#[test]
fn a_rank_of_another_job_is_refused_by_name() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let job = |id: &'static str, r: &'static str| {
        vec![
            ("RANK", r),
            ("WORLD_SIZE", "2"),
            ("MASTER_ADDR", "127.0.0.1"),
            ("MASTER_PORT", port.as_str()),
            ("TORCHELASTIC_RUN_ID", id),
        ]
    };
    let a0 = rank(&job("job-a", "0"));
    // Job A's rank 0 runs the root; wait until it listens.
    let start = Instant::now();
    while std::net::TcpStream::connect(format!("127.0.0.1:{port}")).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "job A's root never listened"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let b1 = finish(rank(&job("job-b", "1")), Duration::from_secs(20));
    let t = text(&b1);
    assert!(!b1.status.success(), "job B's rank joined job A: {t}");
    assert!(
        t.contains("of job TORCHELASTIC_RUN_ID=job-b reached the rendezvous of job TORCHELASTIC_RUN_ID=job-a"),
        "{t}"
    );
    let b0 = finish(rank(&job("job-b", "0")), Duration::from_secs(20));
    let t = text(&b0);
    assert!(
        !b0.status.success() && t.contains("another process holds that port"),
        "{t}"
    );
    // Job A goes on with its own rank 1.
    let a1 = rank(&job("job-a", "1"));
    let (a0, a1) = (
        finish(a0, Duration::from_secs(60)),
        finish(a1, Duration::from_secs(60)),
    );
    assert!(a0.status.success(), "job A rank 0: {}", text(&a0));
    assert!(a1.status.success(), "job A rank 1: {}", text(&a1));
}
