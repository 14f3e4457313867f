//! `rnccl rings` driven as a user runs it, checked against NCCL's own dumps and INFO lines.

mod common;

use common::{ROOT, rnccl, stdout};

fn anchor(name: &str) -> String {
    std::fs::read_to_string(format!("{ROOT}/tests/fixtures/anchors/h200x2/{name}")).unwrap()
}

#[test]
fn h200_graphs_are_nccls() {
    assert_eq!(
        stdout(&[
            "rings",
            "--topo-file",
            "tests/fixtures/anchors/h200x2/topo.xml",
            "--format",
            "xml"
        ]),
        anchor("graph.xml")
    );
    assert_eq!(
        stdout(&[
            "rings",
            "--topo-file",
            "tests/fixtures/anchors/h200x2/topo_2node.xml",
            "--nodes",
            "2",
            "--format",
            "xml"
        ]),
        anchor("graph_2node.xml")
    );
}

#[test]
fn h200_text_has_nccls_info_lines() {
    let out = stdout(&[
        "rings",
        "--topo-file",
        "tests/fixtures/anchors/h200x2/topo.xml",
    ]);
    let log = anchor("debug_info.log");
    for want in log
        .lines()
        .filter(|l| l.starts_with("vm:1372:1383 [0]"))
        .filter_map(|l| l.split_once(" NCCL INFO ").map(|(_, m)| m))
        .filter(|m| {
            m.starts_with("Channel ") && m.contains("/24 :")
                || m.starts_with("Tree ")
                || m.starts_with("Pattern ")
                // NCCL's INFO GRAPH print of the topology (ncclTopoPrint, printNodePaths)
                || m.starts_with("=== System")
                || m.starts_with("CPU/0-")
                || m.trim_start().starts_with("+ ")
                || m.starts_with("=====")
                || m.starts_with("GPU/0-") && m.contains(" :")
                || m.starts_with("NET/0-0 :")
        })
    {
        assert!(
            out.lines().any(|l| l.trim() == want.trim()),
            "missing {want:?}"
        );
    }
    insta::assert_snapshot!(out);
}

#[test]
fn tuning_sweep() {
    insta::assert_snapshot!(stdout(&[
        "rings",
        "--topo-file",
        "tests/fixtures/anchors/h200x2/topo.xml",
        "--tune",
        "all_reduce"
    ]));
}

#[test]
fn dgx_over_two_nodes_shows_nics_per_channel() {
    insta::assert_snapshot!(stdout(&[
        "rings",
        "--topo-file",
        "tests/fixtures/synthetic/dgx8x16.xml",
        "--nodes",
        "2"
    ]));
}

#[test]
fn a_thousand_nodes() {
    let out = stdout(&[
        "rings",
        "--topo-file",
        "tests/fixtures/synthetic/dgx8x16.xml",
        "--nodes",
        "1024",
    ]);
    let ch = out
        .lines()
        .find(|l| l.trim_start().starts_with("Channel 00/32 :"))
        .unwrap();
    assert!(ch.ends_with("...") && ch.trim_start().len() == 127, "{ch}");
    assert!(out.contains("8192 ranks"));
}

#[test]
fn json_plan() {
    let v: serde_json::Value = serde_json::from_str(&stdout(&[
        "rings",
        "--topo-file",
        "tests/fixtures/anchors/h200x2/topo.xml",
        "--format",
        "json",
        "--tune",
        "all_gather",
    ]))
    .unwrap();
    assert_eq!(v["plan"]["nchannels"], 24);
    assert_eq!(v["ring"]["nchannels"], 12);
    assert_eq!(v["tree"]["channels"][6]["ranks"], serde_json::json!([1, 0]));
    assert_eq!(v["tuning"]["collective"], "AllGather");
    // rnccl's own kernel per size: the direct kernel at every size for an all-gather (the
    // size is the gathered output), its rounds growing once the slots are full.
    let sweep = v["tuning"]["sweep"].as_array().unwrap();
    let at = |bytes: u64| {
        sweep
            .iter()
            .find(|r| r["bytes"] == bytes)
            .map(|r| r["rnccl"].clone())
            .unwrap()
    };
    assert_eq!(
        at(8),
        serde_json::json!({"kernel": "direct", "blocks": 1, "unit": 16, "rounds": 1})
    );
    assert_eq!(
        at(8 << 20),
        serde_json::json!({"kernel": "direct", "blocks": 128, "unit": 32768, "rounds": 1})
    );
    assert_eq!(
        at(64 << 20),
        serde_json::json!({"kernel": "direct", "blocks": 128, "unit": 65536, "rounds": 4})
    );
    // Its fitted cost (2 ranks on sm 90 NVSwitch, 1-64 MiB): 24.6 us measured at 8 MiB one
    // process per GPU; nothing predicted at 8 B, outside what was measured.
    let us = |bytes: u64| {
        sweep
            .iter()
            .find(|r| r["bytes"] == bytes)
            .map(|r| r["rnccl_us"][0].as_f64())
            .unwrap()
    };
    let t = us(8 << 20).unwrap();
    assert!((t - 24.6).abs() < 0.07 * 24.6, "{t}");
    assert_eq!(us(8), None);
}

#[test]
fn errors_say_what_to_do() {
    let out = rnccl()
        .args(["rings", "--sysfs-root", "tests/fixtures/sysfs/cpu-vm"])
        .assert()
        .failure()
        .get_output()
        .stderr
        .clone();
    let err = String::from_utf8(out).unwrap();
    assert!(
        err.contains("no GPU") && err.contains("--topo-file"),
        "{err}"
    );
    let out = rnccl()
        .args([
            "rings",
            "--topo-file",
            "tests/fixtures/anchors/h200x2/topo.xml",
            "--tune",
            "alltoall",
        ])
        .assert()
        .failure()
        .get_output()
        .stderr
        .clone();
    assert!(String::from_utf8(out).unwrap().contains("--tune alltoall"));
    let out = rnccl()
        .env("NCCL_ALGO", "Rnig")
        .args([
            "rings",
            "--topo-file",
            "tests/fixtures/anchors/h200x2/topo.xml",
        ])
        .assert()
        .failure()
        .get_output()
        .stderr
        .clone();
    assert!(String::from_utf8(out).unwrap().contains("NCCL_ALGO"));
}

#[test]
fn knobs_change_the_channels() {
    let out = stdout(&[
        "rings",
        "--topo-file",
        "tests/fixtures/anchors/h200x2/topo.xml",
    ]);
    assert!(out.contains("Channel 23/24"));
    let out = rnccl()
        .env("NCCL_MAX_NCHANNELS", "4")
        .args([
            "rings",
            "--topo-file",
            "tests/fixtures/anchors/h200x2/topo.xml",
        ])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let out = String::from_utf8(out).unwrap();
    assert!(
        out.contains("Channel 03/04 : 0 1") && !out.contains("Channel 04/"),
        "{out}"
    );
}

#[test]
fn graph_dump_file_is_written_like_nccls() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("graph.xml");
    rnccl()
        .env("NCCL_GRAPH_DUMP_FILE", &out)
        .args([
            "rings",
            "--topo-file",
            "tests/fixtures/anchors/h200x2/topo.xml",
        ])
        .assert()
        .success();
    assert_eq!(std::fs::read_to_string(out).unwrap(), anchor("graph.xml"));
}

/// What NCCL would build on AWS p4de.24xlarge (A100 and EFA models from the file's PCI ids),
/// two instances: the summary, the channels and the NICs each uses.
#[test]
fn vendor_skeleton_channels_over_two_nodes() {
    let out = stdout(&[
        "rings",
        "--topo-file",
        "tests/fixtures/vendor/aws/p4de-24xl-topo.xml",
        "--nodes",
        "2",
    ]);
    let kept: Vec<&str> = out
        .lines()
        .filter(|l| {
            !l.starts_with("  ")
                || l.starts_with("  ring")
                || l.starts_with("  tree")
                || l.starts_with("  channels")
                || l.starts_with("  Channel")
                || l.starts_with("  GPU:")
                || l.starts_with("  NIC:")
        })
        .take_while(|l| !l.starts_with("Expected bandwidth"))
        .collect();
    insta::assert_snapshot!(kept.join("\n"));
}

/// `--graph-file`: Azure's NC A100 v4 graphs used instead of the search; a file that names a
/// GPU the topology lacks is refused with NCCL's reason.
#[test]
fn graph_file_replaces_the_search() {
    let out = stdout(&[
        "rings",
        "--topo-file",
        "tests/fixtures/vendor/azure/ncv4-topo.xml",
        "--graph-file",
        "tests/fixtures/vendor/azure/ncv4-graph.xml",
    ]);
    assert!(
        out.contains("ring and tree read from tests/fixtures/vendor/azure/ncv4-graph.xml"),
        "{out}"
    );
    assert!(out.contains("  Channel 01/04 : 0 3 2 1"), "{out}");
    let err = rnccl()
        .args([
            "rings",
            "--topo-file",
            "tests/fixtures/anchors/h200x2/topo.xml",
            "--graph-file",
            "tests/fixtures/vendor/azure/ncv4-graph.xml",
        ])
        .assert()
        .failure()
        .get_output()
        .stderr
        .clone();
    let err = String::from_utf8(err).unwrap();
    assert!(
        err.contains("ncv4-graph.xml:") && err.contains("dev 2 not found"),
        "{err}"
    );
}
