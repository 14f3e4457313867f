//! `rnccl status` when there is nothing to ask: no job on the host, or an address that does not
//! answer. Both exit 2 with the reason, as `--help` and README say; 1 is kept for a job that
//! answered with something wrong.

mod common;

use common::rnccl;

#[test]
fn no_job_found_exits_2() {
    let pages = tempfile::tempdir().unwrap();
    let out = rnccl()
        .args(["status", "--pages"])
        .arg(pages.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("no rnccl job runs on this host"), "{err}");
}

#[test]
fn an_address_that_does_not_answer_exits_2() {
    // A port bound and closed again: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = rnccl()
        .args(["status", &format!("127.0.0.1:{port}"), "--timeout", "0.5"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("no communicator answered"), "{err}");
    let out = rnccl().args(["status", "not-an-address"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}
