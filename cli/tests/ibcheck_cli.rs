//! `rnccl ibcheck` driven as a user runs it, on the fixture trees of
//! tests/fixtures/make_ib_trees.py: the reports, exit statuses, JSON, `--hca`, and counters that
//! rise between the two reads of `--interval`.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use common::{ROOT, rnccl, stdout};

fn ibcheck(tree: &str, extra: &[&str]) -> (i32, String) {
    let out = rnccl()
        .args([
            "ibcheck",
            "--sysfs-root",
            &format!("tests/fixtures/sysfs/{tree}"),
        ])
        .args(extra)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
    )
}

#[test]
fn healthy_ndr_host() {
    let (code, text) = ibcheck("ib-ndr", &["--strict"]);
    assert_eq!(code, 0, "{text}");
    insta::assert_snapshot!(text);
}

#[test]
fn degraded_hdr_host() {
    let (code, text) = ibcheck("ib-hdr-degraded", &[]);
    assert_eq!(code, 2);
    insta::assert_snapshot!(text);
}

#[test]
fn roce_host_with_several_gids() {
    let (code, text) = ibcheck("roce", &[]);
    assert_eq!(code, 2);
    insta::assert_snapshot!(text);
}

#[test]
fn strict_turns_warnings_into_status_1() {
    // Only the 1500-byte MTU port: a warning, no error.
    let (code, _) = ibcheck("roce", &["--hca", "=mlx5_1", "--strict"]);
    assert_eq!(code, 2, "mlx5_1's link-local GID is an error");
    let (code, text) = ibcheck("ib-hdr-degraded", &["--hca", "=mlx5_1"]);
    assert_eq!(code, 2, "the memory lock limit is a host error: {text}");
    let tmp = tempfile::tempdir().unwrap();
    copy_tree(
        &Path::new(ROOT).join("tests/fixtures/sysfs/ib-ndr"),
        tmp.path(),
    );
    std::fs::write(
        tmp.path()
            .join("sys/class/infiniband/mlx5_1/ports/1/counters/symbol_error"),
        "3",
    )
    .unwrap();
    let run = |strict: bool| {
        let mut c = rnccl();
        c.args(["ibcheck", "--sysfs-root"]).arg(tmp.path());
        if strict {
            c.arg("--strict");
        }
        c.output().unwrap().status.code()
    };
    assert_eq!((run(false), run(true)), (Some(0), Some(1)));
}

#[test]
fn json_report_has_ports_gids_checks_and_status() {
    let (code, text) = ibcheck("roce", &["--format", "json"]);
    assert_eq!(code, 2);
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["exit_status"], 2);
    assert_eq!(v["host"]["hcas"].as_array().unwrap().len(), 3);
    assert_eq!(v["ports"][0]["nccl_gid_index"], 3);
    assert_eq!(
        v["host"]["hcas"][0]["ports"][0]["gids"][3]["gid_type"],
        "RoCE v2"
    );
    let checks = v["checks"].as_array().unwrap();
    let gid_err = checks
        .iter()
        .find(|c| c["id"] == "gid" && c["subject"] == "mlx5_1:1" && c["verdict"] == "error")
        .unwrap();
    assert!(gid_err["hint"].as_str().unwrap().contains("IPv4"));
    assert!(!gid_err["evidence"].as_array().unwrap().is_empty());
}

#[test]
fn hca_filter_selects_ports() {
    let (_, text) = ibcheck("ib-hdr-degraded", &["--hca", "mlx5_1,mlx5_2"]);
    assert!(text.contains("mlx5_1:1") && text.contains("mlx5_2:1"));
    assert!(
        !text.contains("mlx5_0:1") && !text.contains("mlx5_3:1"),
        "{text}"
    );
    let (code, text) = ibcheck("ib-ndr", &["--hca", "^mlx5_0"]);
    assert_eq!(code, 0);
    assert!(!text.contains("mlx5_0:1"), "{text}");
    let (code, text) = ibcheck("ib-ndr", &["--hca", "=mlx5_7"]);
    assert_eq!(code, 2);
    assert!(text.contains("--hca selects no port"), "{text}");
    assert!(fails(&["ibcheck", "--hca", "mlx5_0:x"]).contains("--hca"));
}

#[test]
fn a_host_without_rdma_devices_gets_one_line() {
    let text = stdout(&["ibcheck", "--sysfs-root", "tests/fixtures/sysfs/cpu-vm"]);
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(text.contains("no RDMA devices"), "{text}");
}

/// A check that cannot run is an error (exit 2), never a healthy host: a mistyped tree, or a
/// bandwidth test with no adapter to measure.
#[test]
fn checks_that_cannot_run_exit_2() {
    let run = |args: &[&str]| {
        let out = rnccl().args(args).output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = run(&["ibcheck", "--sysfs-root", "/nonexistent"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--sysfs-root /nonexistent: no such folder"),
        "{err}"
    );
    let empty = tempfile::tempdir().unwrap();
    let (code, err) = run(&["ibcheck", "--sysfs-root", empty.path().to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("not a captured tree"), "{err}");
    let (code, err) = run(&[
        "ibcheck",
        "--bw",
        "--sysfs-root",
        "tests/fixtures/sysfs/cpu-vm",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("nothing to measure"), "{err}");
    let no_rdma_here =
        std::fs::read_dir("/sys/class/infiniband").map_or(true, |mut d| d.next().is_none());
    if no_rdma_here {
        let (code, err) = run(&["ibcheck", "--bw"]);
        assert_eq!(code, Some(2), "{err}");
        assert!(err.contains("nothing to measure"), "{err}");
    }
}

#[test]
fn bad_arguments_are_refused() {
    assert!(fails(&["ibcheck", "--interval", "0"]).contains("--interval"));
    let e = fails(&[
        "ibcheck",
        "--bw",
        "--sysfs-root",
        "tests/fixtures/sysfs/ib-ndr",
    ]);
    assert!(e.contains("--sysfs-root"), "{e}");
    assert!(fails(&["ibcheck", "--serve", "--bw"]).contains("--bw"));
    // No RDMA port here (CI): --serve says why instead of listening.
    let e = fails(&["ibcheck", "--serve", "--port", "0"]);
    assert!(
        e.contains("--serve needs libibverbs") || e.contains("no ACTIVE InfiniBand/RoCE port"),
        "{e}"
    );
}

/// Runs `rnccl args…`, asserts it fails, and returns its standard error.
fn fails(args: &[&str]) -> String {
    let out = rnccl().args(args).output().unwrap();
    assert!(!out.status.success(), "{args:?} succeeded");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn copy_tree(from: &Path, to: &Path) {
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let (src, dst) = (e.path(), to.join(e.file_name()));
        let ty = e.file_type().unwrap();
        if ty.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&src).unwrap(), &dst).unwrap();
        } else if ty.is_dir() {
            std::fs::create_dir_all(&dst).unwrap();
            copy_tree(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

#[test]
fn errors_rising_during_the_interval_fail_the_check() {
    let tmp = tempfile::tempdir().unwrap();
    copy_tree(
        &Path::new(ROOT).join("tests/fixtures/sysfs/ib-ndr"),
        tmp.path(),
    );
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("rnccl"))
        .env_clear()
        .current_dir(ROOT)
        .args(["ibcheck", "--interval", "1", "--sysfs-root"])
        .arg(tmp.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The first read is done once ibcheck says it waits: raise the counters then.
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    assert!(
        line.contains("reading the counters again in 1.0 s"),
        "{line}"
    );
    let port = tmp.path().join("sys/class/infiniband/mlx5_1/ports/1");
    std::fs::write(port.join("counters/link_downed"), "1").unwrap();
    std::fs::write(port.join("counters/port_rcv_data"), "81246500000").unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(
        text.contains("Counters: totals, and growth over 1.0 s"),
        "{text}"
    );
    assert!(
        text.contains(
            "error   [counters-delta] mlx5_1:1: link errors grew during the check: link_downed 1"
        ),
        "{text}"
    );
    assert!(text.contains("0/0/1 (+1)"), "{text}");
    assert!(
        text.contains("ok      [counters-delta] mlx5_0:1: no error counter grew"),
        "{text}"
    );
}
