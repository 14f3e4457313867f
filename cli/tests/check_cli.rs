//! `rnccl check` on this host (its worker started directly) and its refusals: bad flags exit
//! with 2 and say what to fix; a flagged result exits with 1. Checks across hosts are in the
//! library's tests/check_netns.rs (network namespaces).

mod common;

use common::rnccl;
use serde_json::Value;

/// Runs `rnccl check args…`; returns (exit status, stdout, stderr).
fn check(args: &[&str]) -> (i32, String, String) {
    let out = rnccl().arg("check").args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn this_host_alone() {
    let (code, out, err) = check(&["--cpu", "-b", "64K", "-n", "2", "-w", "1"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.starts_with("rnccl check: 1 host, 2 ranks each (CPU);"),
        "{out}"
    );
    assert!(
        out.contains("check passed: 1 host alone measured, nothing flagged"),
        "{out}"
    );

    let (code, out, err) = check(&["--cpu", "-b", "16K,64K", "-n", "2", "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let doc: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(doc["alone"][0]["ranks"], 2);
    assert_eq!(doc["alone"][0]["status"], "measured");
    let sizes: Vec<u64> = doc["alone"][0]["sizes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["size"].as_u64().unwrap())
        .collect();
    assert_eq!(sizes, [16 << 10, 64 << 10]);
    assert_eq!(doc["setup"]["pairing"], "none");
    assert_eq!(doc["rule"]["below_median"], 0.8);
}

#[test]
fn a_floor_no_host_reaches_flags_it() {
    let (code, out, _) = check(&[
        "--cpu",
        "-b",
        "64K",
        "-n",
        "2",
        "--ranks-per-host",
        "3",
        "--min-host-busbw",
        "100000",
    ]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("is below --min-host-busbw 100000 GB/s"),
        "{out}"
    );
    assert!(
        out.contains("check FAILED: 1 of 1 hosts alone flagged"),
        "{out}"
    );
}

#[test]
fn bad_flags_exit_2_and_say_what_to_fix() {
    for (args, says) in [
        (vec!["--hosts", "a", "--rsh", "ssh"], "has no {host}"),
        (vec!["--hosts", "a,,b"], "empty host name"),
        (vec!["--hosts", "a,b,a"], "host a is listed twice"),
        (
            vec!["--hostfile", "/nonexistent/hosts"],
            "reading the hostfile",
        ),
        (vec!["--ranks-per-host", "1"], "measures nothing"),
        (vec!["--below-median", "1.5"], "--below-median 1.5"),
        (vec!["--min-busbw", "0"], "--min-busbw 0"),
        (vec!["-b", "0"], "0 bytes"),
        (vec!["-b", "12Q"], "-b/--size"),
        (vec!["--rails", "eth0,,eth1"], "empty name"),
    ] {
        let (code, out, err) = check(&args);
        assert_eq!(code, 2, "{args:?}: {out}\n{err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(out.is_empty(), "{args:?}: {out}");
    }
}

#[test]
fn under_a_launcher() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let launched = |extra: &[&str]| {
        let out = rnccl()
            .args(["check", "--cpu", "-b", "4K", "-n", "1"])
            .args(extra)
            .env("RANK", "0")
            .env("WORLD_SIZE", "1")
            .env("MASTER_ADDR", "127.0.0.1")
            .env("MASTER_PORT", &port)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = launched(&["--ranks-per-host", "2"]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("--ranks-per-host is for host lists: torchrun started 1 process,"),
        "{err}"
    );
    // One process on one host: no host has two ranks, and no pair was asked for.
    let (code, err) = launched(&[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("nothing was measured"), "{err}");
}

/// A host whose worker never answers is stopped and named after the connect timeout; the check
/// does not wait for it any longer.
#[test]
fn a_host_that_never_answers_is_named() {
    let start = std::time::Instant::now();
    let (code, out, err) = check(&[
        "--hosts",
        "silent",
        "--rsh",
        "sh -c 'exec sleep 30' {host}",
        "--connect-timeout",
        "1",
    ]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(
        out.contains("FAILED   host silent: did not answer within 1 s"),
        "{out}"
    );
    assert!(out.contains("rnccl check: 1 host;"), "{out}");
    assert!(start.elapsed() < std::time::Duration::from_secs(10));
}
