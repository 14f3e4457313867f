//! `rnccl topo` driven as a user runs it: on captured hosts, on topology files, on this host.

mod common;

use common::{rnccl, stdout};

#[test]
fn captured_h200_host() {
    insta::assert_snapshot!(stdout(&[
        "topo",
        "--sysfs-root",
        "tests/fixtures/sysfs/h200x2"
    ]));
}

#[test]
fn captured_cpu_only_vm() {
    insta::assert_snapshot!(stdout(&[
        "topo",
        "--sysfs-root",
        "tests/fixtures/sysfs/cpu-vm"
    ]));
}

#[test]
fn pcie_topology_file() {
    insta::assert_snapshot!(stdout(&[
        "topo",
        "--topo-file",
        "tests/fixtures/synthetic/pcie-tiers.xml"
    ]));
}

#[test]
fn xml_output_round_trips_nccls_dump() {
    let want = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/anchors/h200x2/topo.xml"
    ))
    .unwrap();
    assert_eq!(
        stdout(&[
            "topo",
            "--topo-file",
            "tests/fixtures/anchors/h200x2/topo.xml",
            "--format",
            "xml"
        ]),
        want
    );
}

#[test]
fn json_output_has_nodes_paths_and_findings() {
    let v: serde_json::Value = serde_json::from_str(&stdout(&[
        "topo",
        "--topo-file",
        "tests/fixtures/synthetic/dgx8x16.xml",
        "--format",
        "json",
    ]))
    .unwrap();
    let nodes = v["system"]["nodes"].as_array().unwrap();
    assert_eq!(nodes.iter().filter(|n| n["type"] == "GPU").count(), 8);
    assert!(
        v["system"]["paths"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["type"] == "PXN")
    );
    assert!(v["findings"].is_array());
}

#[test]
fn malformed_file_is_an_error_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("bad.xml");
    // An <nvlink> without count: NCCL fills links only for GPUs that have none, so it fails on
    // this one ("Attribute count of node nvlink not found"), on any host.
    std::fs::write(&f, "<system version=\"1\">\n  <cpu numaid=\"0\" arch=\"x86_64\" vendor=\"AuthenticAMD\">\n    <pci busid=\"0000:01:00.0\" class=\"0x030200\" link_speed=\"32.0 GT/s PCIe\" link_width=\"16\">\n      <gpu dev=\"0\" sm=\"90\" gdr=\"1\">\n        <nvlink target=\"fffffff:ff:ff.0\" tclass=\"0x068000\"/>\n      </gpu>\n    </pci>\n  </cpu>\n</system>\n").unwrap();
    let out = rnccl()
        .args(["topo", "--topo-file", f.to_str().unwrap()])
        .assert()
        .failure()
        .get_output()
        .stderr
        .clone();
    let err = String::from_utf8(out).unwrap();
    assert!(err.contains("bad.xml:5:") && err.contains("count"), "{err}");
    std::fs::write(
        &f,
        "<system version=\"1\">\n  <cpu numaid=\"0\">\n</system>\n",
    )
    .unwrap();
    let out = rnccl()
        .args(["topo", "--topo-file", f.to_str().unwrap()])
        .assert()
        .failure()
        .get_output()
        .stderr
        .clone();
    let err = String::from_utf8(out).unwrap();
    assert!(
        err.contains("bad.xml:3:") && err.contains("malformed"),
        "{err}"
    );
}

#[test]
fn this_host_runs_with_or_without_gpus() {
    let out = rnccl()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .arg("topo")
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let s = String::from_utf8(out).unwrap();
    assert!(
        s.starts_with("rnccl topo: this host") && s.contains("Host:") && s.contains("Findings"),
        "{s}"
    );
}

/// Topology findings are the same `Finding` as env-explain's: lower-case severity, a stable
/// code, message and hint.
#[test]
fn json_findings_share_env_explains_shape() {
    let v: serde_json::Value = serde_json::from_str(&stdout(&[
        "topo",
        "--topo-file",
        "tests/fixtures/synthetic/pcie-tiers.xml",
        "--format",
        "json",
    ]))
    .unwrap();
    let findings = v["findings"].as_array().unwrap();
    assert!(!findings.is_empty(), "{v}");
    for f in findings {
        assert!(
            ["note", "warning", "error"].contains(&f["severity"].as_str().unwrap())
                && f["code"].is_string()
                && f["message"].is_string()
                && f["hint"].is_string()
                && f.get("advice").is_none(),
            "{f}"
        );
    }
}

/// A file rnccl reads but NCCL would refuse (here: an `<?xml?>` prolog, which NCCL's parser
/// rejects) makes `rnccl topo` exit non-zero, so scripts can gate NCCL_TOPO_FILE on it; the
/// report is still printed and the reason named.
#[test]
fn a_file_nccl_would_refuse_exits_non_zero() {
    let dir = tempfile::tempdir().unwrap();
    let good = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/synthetic/pcie-tiers.xml"
    ))
    .unwrap();
    let f = dir.path().join("prolog.xml");
    std::fs::write(&f, format!("<?xml version=\"1.0\"?>\n{good}")).unwrap();
    for format in ["table", "json"] {
        let out = rnccl()
            .args([
                "topo",
                "--topo-file",
                f.to_str().unwrap(),
                "--format",
                format,
            ])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
        assert!(
            stderr.contains("NCCL would refuse this topology: line 1:")
                && stderr.contains("declaration"),
            "{stderr}"
        );
        assert!(
            stdout.contains("PCI"),
            "the report is still printed: {stdout}"
        );
    }
    let v: serde_json::Value = serde_json::from_slice(
        &rnccl()
            .args([
                "topo",
                "--topo-file",
                f.to_str().unwrap(),
                "--format",
                "json",
            ])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert_eq!(v["system"]["notes"][0]["nccl_rejects"], true, "{v}");
    let help = stdout(&["topo", "--help"]);
    assert!(help.contains("Exit status: 1"), "{help}");
}

/// A cloud skeleton studied offline: Azure's ND H100 v5 file, with the GPU and NIC models
/// guessed and printed as assumptions, and every value filled listed.
#[test]
fn vendor_skeleton_offline() {
    insta::assert_snapshot!(stdout(&[
        "topo",
        "--topo-file",
        "tests/fixtures/vendor/azure/ndv5-topo.xml"
    ]));
}

/// A multi-node NVLink dump: each host's CPUs under its own heading, GPUs named by host.
#[test]
fn multi_host_file_is_shown_per_host() {
    insta::assert_snapshot!(stdout(&[
        "topo",
        "--topo-file",
        "tests/fixtures/synthetic/gb300-2host.xml"
    ]));
}

#[test]
fn assumptions_are_checked_and_stated() {
    let out = stdout(&[
        "topo",
        "--topo-file",
        "tests/fixtures/vendor/aws/p5.48xl-topo.xml",
        "--assume",
        "gpu=h100-sxm,fabric=nvswitch",
        "--assume",
        "cpu=genoa",
    ]);
    assert!(
        out.contains("NVLink to NVSwitch: 18 links x 20.6 = 370.8 GB/s"),
        "{out}"
    );
    assert!(out.contains("GPU: H100 SXM5") && out.contains("stated with --assume gpu"));
    let err = rnccl()
        .args([
            "topo",
            "--topo-file",
            "tests/fixtures/vendor/aws/p5.48xl-topo.xml",
            "--assume",
            "gpu=h1000",
        ])
        .assert()
        .failure()
        .get_output()
        .stderr
        .clone();
    let err = String::from_utf8(err).unwrap();
    assert!(
        err.contains("--assume gpu=h1000: unknown GPU model; known: h100-sxm"),
        "{err}"
    );
    let err = rnccl()
        .args(["topo", "--assume", "gpu=h100-sxm"])
        .assert()
        .failure()
        .get_output()
        .stderr
        .clone();
    assert!(String::from_utf8(err).unwrap().contains("--topo-file"));
}
