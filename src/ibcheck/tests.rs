//! The checks on the fixture trees of tests/fixtures/make_ib_trees.py: each scenario's
//! expected findings, and counters rising between the two reads of `--interval`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::*;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/sysfs")
        .join(name)
}

fn run_on(
    root: &Path,
    cfg: &Config,
    interval: Option<Duration>,
    before: &dyn Fn(Duration),
) -> Report {
    run(
        cfg,
        &Options {
            root,
            filter: None,
            interval,
            expect_gbps: None,
            verbs: None,
            before_wait: before,
        },
    )
    .unwrap()
}

fn report(name: &str, pairs: &[(&str, &str)]) -> Report {
    run_on(
        &fixture(name),
        &Config::from_pairs(pairs).unwrap(),
        None,
        &|_| {},
    )
}

/// The verdict of the check `id` about `subject`, failing when there is none or several
/// disagree.
fn verdict(r: &Report, id: &str, subject: &str) -> Verdict {
    let v: Vec<&Check> = r
        .checks
        .iter()
        .filter(|c| c.id == id && c.subject.starts_with(subject))
        .collect();
    assert!(
        !v.is_empty(),
        "no {id} check about {subject}: {:#?}",
        r.checks
    );
    v.iter().map(|c| c.verdict).max().unwrap()
}

fn message<'a>(r: &'a Report, id: &str, subject: &str) -> &'a str {
    &r.checks
        .iter()
        .find(|c| c.id == id && c.subject.starts_with(subject) && c.verdict != Verdict::Ok)
        .unwrap_or_else(|| panic!("no failing {id} check about {subject}: {:#?}", r.checks))
        .message
}

#[test]
fn healthy_ndr_host_passes_strict() {
    let r = report("ib-ndr", &[]);
    assert_eq!(
        (r.counts.warnings, r.counts.errors),
        (0, 0),
        "{:#?}",
        r.checks
    );
    assert_eq!(r.exit_code(true), 0);
    assert_eq!(r.host.hcas.len(), 2);
    assert_eq!(r.placement.len(), 2);
    assert!(
        r.placement.iter().all(|p| p.path == "PIX" && p.gdr),
        "{:?}",
        r.placement
    );
    assert_eq!(r.ports.iter().filter(|p| p.nccl_uses).count(), 2);
    assert_eq!(r.ports[0].nccl_gid_index, Some(0));
    assert_eq!(verdict(&r, "gdr", "host"), Verdict::Ok);
}

#[test]
fn degraded_hdr_host_names_each_fault() {
    let r = report("ib-hdr-degraded", &[]);
    assert_eq!(r.exit_code(false), 2);
    assert_eq!(verdict(&r, "pcie-bandwidth", "mlx5_0"), Verdict::Error);
    assert_eq!(verdict(&r, "pcie-link", "mlx5_0"), Verdict::Warning);
    assert!(message(&r, "rate", "mlx5_1:1").contains("2 of its 4 lanes"));
    assert!(message(&r, "port-state", "mlx5_2:1").contains("Polling"));
    assert!(message(&r, "port-state", "mlx5_3:1").starts_with("INIT"));
    assert_eq!(verdict(&r, "counters", "mlx5_1:1"), Verdict::Warning);
    assert_eq!(verdict(&r, "acs", "mlx5_0"), Verdict::Warning);
    assert_eq!(verdict(&r, "firmware", "MT4123"), Verdict::Warning);
    assert_eq!(verdict(&r, "gdr", "host"), Verdict::Error);
    assert_eq!(verdict(&r, "memlock", "host"), Verdict::Error);
    assert_eq!(verdict(&r, "rdma-stack", "host"), Verdict::Warning);
    // A DOWN port that NCCL_IB_HCA names explicitly is an error.
    let r = report("ib-hdr-degraded", &[("NCCL_IB_HCA", "=mlx5_2")]);
    assert_eq!(verdict(&r, "port-state", "mlx5_2:1"), Verdict::Error);
    assert!(
        r.checks
            .iter()
            .any(|c| c.id == "knob" && c.verdict == Verdict::Error),
        "{:#?}",
        r.checks
    );
}

#[test]
fn roce_gids_follow_nccls_choice() {
    let r = report("roce", &[]);
    let idx = |h: &str| r.ports.iter().find(|p| p.hca == h).unwrap().nccl_gid_index;
    assert_eq!(
        (idx("mlx5_0"), idx("mlx5_1"), idx("mlx5_2")),
        (Some(3), Some(0), Some(2))
    );
    assert_eq!(verdict(&r, "gid", "mlx5_0:1"), Verdict::Ok);
    assert!(message(&r, "gid", "mlx5_1:1").contains("link-local"));
    assert!(
        r.checks
            .iter()
            .any(|c| c.id == "gid" && c.subject == "mlx5_2:1" && c.message.contains("nccl#1573"))
    );
    assert_eq!(verdict(&r, "mtu", "mlx5_1:1"), Verdict::Warning);
    assert_eq!(verdict(&r, "gdr", "host"), Verdict::Note);
    // NCCL_IB_GID_INDEX pointing at a v1 entry is an error; a good one is a warning (set).
    let r = report("roce", &[("NCCL_IB_GID_INDEX", "2")]);
    assert!(message(&r, "gid", "mlx5_0:1").contains("RoCE v1"));
    let r = report(
        "roce",
        &[("NCCL_IB_GID_INDEX", "3"), ("NCCL_IB_HCA", "=mlx5_0")],
    );
    assert_eq!(verdict(&r, "gid", "mlx5_0:1"), Verdict::Warning);
    let r = report("roce", &[("NCCL_IB_GID_INDEX", "9")]);
    assert!(message(&r, "gid", "mlx5_0:1").contains("beyond"));
    // IPv6 wanted: no IPv6 GID, so NCCL stays on a link-local entry.
    let r = report("roce", &[("NCCL_IB_ADDR_FAMILY", "AF_INET6")]);
    assert_eq!(verdict(&r, "gid", "mlx5_0:1"), Verdict::Error);
}

#[test]
fn hca_filter_and_infinite_timeout() {
    let f = DeviceFilter::parse("=mlx5_1").unwrap();
    let c = Config::from_pairs(&[("NCCL_IB_TIMEOUT", "0")]).unwrap();
    let r = run(
        &c,
        &Options {
            root: &fixture("ib-hdr-degraded"),
            filter: Some(&f),
            interval: None,
            expect_gbps: Some(200.0),
            verbs: None,
            before_wait: &|_| {},
        },
    )
    .unwrap();
    assert_eq!(r.host.hcas.len(), 1);
    assert!(r.ports.iter().all(|p| p.hca == "mlx5_1"));
    assert_eq!(verdict(&r, "rate", "mlx5_1:1"), Verdict::Error);
    assert_eq!(verdict(&r, "timeout", "NCCL_IB_TIMEOUT"), Verdict::Error);
    let none = DeviceFilter::parse("=mlx5_9").unwrap();
    let r = run(
        &c,
        &Options {
            root: &fixture("ib-hdr-degraded"),
            filter: Some(&none),
            interval: None,
            expect_gbps: None,
            verbs: None,
            before_wait: &|_| {},
        },
    )
    .unwrap();
    assert!(!r.no_devices());
    assert_eq!(r.exit_code(false), 2);
}

#[test]
fn a_host_without_rdma_has_no_devices() {
    let r = report("cpu-vm", &[]);
    assert!(r.no_devices());
    assert_eq!(r.exit_code(true), 0);
}

/// Copies a fixture tree (files and symlinks) to a temporary directory.
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
fn errors_rising_between_two_reads_are_errors_with_rates() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&fixture("ib-ndr"), dir.path());
    let port = dir.path().join("sys/class/infiniband/mlx5_0/ports/1");
    let bump = |d: Duration| {
        assert_eq!(d, Duration::from_millis(50));
        for (f, v) in [
            ("counters/symbol_error", "7"),
            ("counters/port_xmit_data", "81234567890"),
            ("hw_counters/local_ack_timeout_err", "2"),
            ("hw_counters/out_of_sequence", "40"),
        ] {
            let p = port.join(f);
            let v = if f.ends_with("xmit_data") {
                // 50 ms of 100 Gb/s: 625 MB = 156.25 M four-octet words.
                (std::fs::read_to_string(&p)
                    .unwrap()
                    .trim()
                    .parse::<u64>()
                    .unwrap()
                    + 156_250_000)
                    .to_string()
            } else {
                v.to_string()
            };
            std::fs::write(p, v).unwrap();
        }
    };
    let r = run_on(
        dir.path(),
        &Config::from_pairs(&[]).unwrap(),
        Some(Duration::from_millis(50)),
        &bump,
    );
    let d = r.ports[0].delta.as_ref().unwrap();
    assert_eq!(
        (d.of("symbol_error"), d.of("local_ack_timeout_err")),
        (7, 2)
    );
    let tx = d.tx_gbps.unwrap();
    // The reads are at least 50 ms apart, so at most 100 Gb/s.
    assert!(tx > 10.0 && tx <= 100.0, "{tx}");
    let growing: Vec<&Check> = r
        .checks
        .iter()
        .filter(|c| c.id == "counters-delta" && c.subject == "mlx5_0:1")
        .collect();
    assert_eq!(
        growing.iter().map(|c| c.verdict).collect::<Vec<_>>(),
        vec![Verdict::Error, Verdict::Error, Verdict::Warning],
        "{growing:#?}"
    );
    assert!(growing[0].message.contains("symbol_error 7"));
    assert_eq!(verdict(&r, "counters-delta", "mlx5_1:1"), Verdict::Ok);
    assert_eq!(r.exit_code(false), 2);
}
