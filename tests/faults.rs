//! Faults and bad input with real processes: a rank that never joins, a rank killed in the
//! middle of a collective (shared memory and TCP), garbage sent to the bootstrap port, and
//! invalid arguments. Every case must end with a clear error in bounded time, never a hang.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use common::procs::{assert_clean_table, free_port, spawn_rank, wait_for};
use common::rnccl_bin;

#[test]
fn a_rank_that_never_joins_is_named_within_the_timeout() {
    let bin = rnccl_bin();
    let port = free_port();
    let start = Instant::now();
    let children: Vec<_> = (0..2)
        .map(|r| {
            spawn_rank(
                &bin,
                None,
                r,
                3,
                "127.0.0.1",
                port,
                &[],
                &["-T", "4", "-b", "8", "-e", "8"],
            )
        })
        .collect();
    for (r, c) in children.into_iter().enumerate() {
        let (out, finished) = wait_for(c, Duration::from_secs(30));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(finished, "rank {r} hung");
        assert!(!out.status.success(), "rank {r} should fail");
        assert!(
            stderr.contains("rank 2") && stderr.contains("never arrived"),
            "rank {r}: {stderr}"
        );
    }
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "took {:?}",
        start.elapsed()
    );
}

/// Ranks started with different WORLD_SIZE: every rank, rank 0 included, is told at once which
/// rank disagrees and with what size, instead of waiting out its timeout.
#[test]
fn ranks_that_disagree_on_the_size_all_fail_at_once() {
    let bin = rnccl_bin();
    let port = free_port();
    let start = Instant::now();
    let args = ["-T", "60", "-b", "8", "-e", "8"];
    let rank0 = spawn_rank(&bin, None, 0, 2, "127.0.0.1", port, &[], &args);
    std::thread::sleep(Duration::from_millis(300));
    let rank1 = spawn_rank(&bin, None, 1, 3, "127.0.0.1", port, &[], &args);
    for (r, c) in [rank0, rank1].into_iter().enumerate() {
        let (out, finished) = wait_for(c, Duration::from_secs(30));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(finished && !out.status.success(), "rank {r}: {stderr}");
        assert!(
            stderr.contains("rank 1") && stderr.contains("nranks=3") && stderr.contains("nranks=2"),
            "rank {r}: {stderr}"
        );
    }
    assert!(
        start.elapsed() < Duration::from_secs(15),
        "took {:?} with a 60 s timeout",
        start.elapsed()
    );
}

fn kill_mid_collective(env: &[(&str, String)], extra: &[&str]) {
    let bin = rnccl_bin();
    let port = free_port();
    let mut args = vec![
        "-b", "64M", "-e", "64M", "-n", "100000", "-w", "1", "-c", "0", "-T", "120",
    ];
    args.extend_from_slice(extra);
    let mut children: Vec<_> = (0..3)
        .map(|r| spawn_rank(&bin, None, r, 3, "127.0.0.1", port, env, &args))
        .collect();
    std::thread::sleep(Duration::from_secs(3));
    let victim = children.remove(1);
    nix_kill(victim.id());
    let _ = wait_for(victim, Duration::from_secs(5));
    let killed_at = Instant::now();
    for c in children {
        let (out, finished) = wait_for(c, Duration::from_secs(60));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(finished, "a survivor hung after rank 1 was killed");
        assert!(!out.status.success(), "survivor should report the failure");
        assert!(
            stderr.contains("rank 1"),
            "the error must name rank 1: {stderr}"
        );
    }
    assert!(
        killed_at.elapsed() < Duration::from_secs(30),
        "took {:?}",
        killed_at.elapsed()
    );
}

fn nix_kill(pid: u32) {
    let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
}

#[test]
fn a_rank_killed_mid_collective_over_shared_memory() {
    kill_mid_collective(&[], &[]);
}

/// With registered windows the survivors wait on the victim's control block, not on a FIFO.
#[test]
fn a_rank_killed_mid_collective_on_windows() {
    kill_mid_collective(&[], &["-R", "2"]);
}

#[test]
fn a_rank_killed_mid_collective_over_tcp() {
    kill_mid_collective(
        &[
            ("NCCL_SHM_DISABLE", "1".into()),
            ("NCCL_SOCKET_IFNAME", "lo".into()),
        ],
        &[],
    );
}

#[test]
fn garbage_on_the_bootstrap_port_does_not_disturb_the_job() {
    let bin = rnccl_bin();
    let port = free_port();
    let args = ["-b", "1K", "-e", "1M", "-f", "32", "-n", "2", "-T", "60"];
    let rank0 = spawn_rank(&bin, None, 0, 2, "127.0.0.1", port, &[], &args);
    // Wait for rank 0's root to listen, then throw junk at it before rank 1 arrives.
    let start = Instant::now();
    let mut idle = Vec::new();
    loop {
        if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
            let _ = s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "rank 0 never listened"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    for junk in [
        &[0xffu8; 64][..],
        &[0u8; 3][..],
        &0x0280_0280_0280_0280u64.to_le_bytes()[..],
        b"\x80\x02\x80\x02\x80\x02\x80\x02\x01\x00\x00\x00\xff\xff\xff\x7f",
    ] {
        if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
            let _ = s.write_all(junk);
            idle.push(s);
        }
    }
    idle.push(TcpStream::connect(("127.0.0.1", port)).unwrap());
    let rank1 = spawn_rank(&bin, None, 1, 2, "127.0.0.1", port, &[], &args);
    let (out0, done0) = wait_for(rank0, Duration::from_secs(60));
    let (out1, done1) = wait_for(rank1, Duration::from_secs(60));
    assert!(
        done0 && done1 && out0.status.success() && out1.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out0.stderr),
        String::from_utf8_lossy(&out1.stderr)
    );
    assert_clean_table(&String::from_utf8_lossy(&out0.stdout));
    drop(idle);
}

fn bench_err(args: &[&str]) -> String {
    let out = Command::new(rnccl_bin())
        .args(["bench", "--cpu"])
        .args(args)
        .output()
        .unwrap();
    assert!(!out.status.success(), "rnccl bench {args:?} should fail");
    let e = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!e.contains("panicked"), "no panics: {e}");
    e
}

#[test]
fn invalid_arguments_get_clear_errors() {
    assert!(bench_err(&["-b", "1M", "-e", "1K"]).contains("larger than"));
    assert!(bench_err(&["-d", "float128"]).contains("unknown data type 'float128'"));
    assert!(bench_err(&["-o", "xor"]).contains("unknown reduction operation 'xor'"));
    assert!(bench_err(&["all_reduse"]).contains("unknown collective 'all_reduse'"));
    assert!(bench_err(&["-e", "12Q"]).contains("unknown unit"));
    assert!(
        bench_err(&[
            "broadcast",
            "--ranks",
            "2",
            "--threads",
            "-r",
            "5",
            "-e",
            "8"
        ])
        .contains("not a rank")
    );
    assert!(
        bench_err(&[
            "-b",
            "1000000G",
            "-e",
            "1000000G",
            "--threads",
            "--ranks",
            "1"
        ])
        .contains("of memory available (MemAvailable)")
    );
    let out = Command::new(rnccl_bin())
        .args(["bench", "--ranks", "2", "--threads", "-e", "8"])
        .env("NCCL_MAX_NCHANNELS", "lots")
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && e.contains("NCCL_MAX_NCHANNELS") && e.contains("lots"),
        "{e}"
    );
}

/// A full /dev/shm (the 64 MiB of a default container) is an error that says what to do, not a
/// rank killed by SIGBUS on first touch. Runs the ranks in a private mount namespace with a
/// 1 MiB tmpfs on /dev/shm; needs root and unshare(1).
#[test]
fn a_full_dev_shm_is_a_clear_error() {
    if !common::procs::require(
        common::procs::is_root(),
        "root, to mount a small /dev/shm (run the suite as root)",
    ) {
        return;
    }
    let bin = rnccl_bin();
    let script = format!(
        "mount -t tmpfs -o size=1m tmpfs /dev/shm && exec {} bench --cpu --ranks 2 -b 1M -e 1M -n 2 -w 1 -T 30",
        bin.display()
    );
    let out = Command::new("unshare")
        .args(["-m", "sh", "-c", &script])
        .output()
        .expect("unshare(1) from util-linux");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("bytes were asked for but /dev/shm has only") && stderr.contains("free of"),
        "{stderr}"
    );
    assert!(stderr.contains("NCCL_SHM_DISABLE=1"), "{stderr}");
    assert!(
        !stderr.contains("Bus error") && !stderr.contains("panicked"),
        "{stderr}"
    );
}

/// Running out of file descriptors while TCP connections start their sockets and helper
/// threads (NCCL_SOCKET_NTHREADS × NCCL_NSOCKS_PERTHREAD sockets each) is a clear error on every
/// rank, in bounded time: no panic, no rank waiting out its timeout for a peer that gave up.
#[test]
fn running_out_of_descriptors_is_a_clear_error() {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(rnccl_bin());
    cmd.args([
        "bench",
        "--cpu",
        "--ranks",
        "2",
        "--threads",
        "-b",
        "1M",
        "-e",
        "1M",
        "-n",
        "2",
        "-w",
        "1",
        "-T",
        "60",
    ])
    .env("NCCL_SHM_DISABLE", "1")
    .env("NCCL_P2P_DISABLE", "1")
    .env("NCCL_SOCKET_IFNAME", "lo")
    .env("NCCL_SOCKET_NTHREADS", "16")
    .env("NCCL_NSOCKS_PERTHREAD", "4");
    // SAFETY: setrlimit is async-signal-safe and touches no state of the parent.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 100,
                rlim_max: 100,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let start = Instant::now();
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("Too many open files"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        start.elapsed() < Duration::from_secs(30),
        "took {:?} with a 60 s timeout: {stderr}",
        start.elapsed()
    );
}
