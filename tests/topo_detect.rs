//! Detection on captured sysfs trees: the 2×H200 device machine (with its NVML facts) must give
//! the topology NCCL 2.28.9 dumped there, alone and merged with a vendor-style PCI skeleton;
//! this CPU-only VM gives no system.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rnccl::config::{Config, LoadOptions};
use rnccl::topo::System;

fn fixture(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(p)
}

fn cfg(pairs: &[(&str, &str)]) -> Config {
    let env: BTreeMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Config::load(&LoadOptions {
        env: Some(env),
        home: Some("/nonexistent".into()),
        system_conf: Some("/nonexistent/nccl.conf".into()),
        ..LoadOptions::default()
    })
    .unwrap()
}

/// Replaces `host_hash="..."` values, which differ per host and per tool.
fn without_hash(s: &str) -> String {
    s.lines()
        .map(|l| match l.find("host_hash=\"") {
            Some(i) => {
                let rest = &l[i + 11..];
                let end = rest.find('"').unwrap();
                format!("{}host_hash=\"H\"{}", &l[..i], &rest[end + 1..])
            }
            None => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn detection_on_the_h200_capture_matches_nccls_dump() {
    let sys = System::load(&cfg(&[]), &fixture("sysfs/h200x2"))
        .unwrap()
        .unwrap();
    let want = std::fs::read_to_string(fixture("anchors/h200x2/topo.xml")).unwrap();
    assert_eq!(without_hash(&sys.to_xml_string()), without_hash(&want));
    let inv = sys.inventory.as_ref().unwrap();
    assert_eq!(inv.gpus.len(), 2);
    assert_eq!(inv.nets.len(), 1);
    assert_eq!(inv.nets[0].name, "eth0");
    assert!(inv.host.virtualization.is_some());
}

#[test]
fn skeleton_topo_file_is_merged_by_bus_id_as_nccl_does() {
    let skeleton = fixture("anchors/h200x2/skeleton.xml");
    let c = cfg(&[("NCCL_TOPO_FILE", skeleton.to_str().unwrap())]);
    let sys = System::load(&c, &fixture("sysfs/h200x2")).unwrap().unwrap();
    let want = std::fs::read_to_string(fixture("anchors/h200x2/topo_skeleton.xml")).unwrap();
    assert_eq!(without_hash(&sys.to_xml_string()), without_hash(&want));
}

#[test]
fn cpu_only_host_has_no_system_unless_a_file_is_given() {
    let root = fixture("sysfs/cpu-vm");
    assert!(System::load(&cfg(&[]), &root).unwrap().is_none());
    let topo = fixture("anchors/h200x2/topo.xml");
    let sys = System::load(&cfg(&[("NCCL_TOPO_FILE", topo.to_str().unwrap())]), &root)
        .unwrap()
        .unwrap();
    assert_eq!(sys.count(rnccl::topo::NodeType::Gpu), 2);
    let inv = sys.inventory.as_ref().unwrap();
    assert!(inv.gpus.is_empty());
    assert!(inv.nets.iter().any(|n| n.name == "eth0" && !n.is_pci));
}

#[test]
fn topo_dump_file_is_written_in_nccls_format() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("dump.xml");
    let sys = System::load(
        &cfg(&[("NCCL_TOPO_DUMP_FILE", out.to_str().unwrap())]),
        &fixture("sysfs/h200x2"),
    )
    .unwrap()
    .unwrap();
    assert_eq!(std::fs::read_to_string(out).unwrap(), sys.to_xml_string());
}

#[test]
fn missing_topo_file_is_an_io_error_naming_it() {
    let e = System::load(
        &cfg(&[("NCCL_TOPO_FILE", "/nonexistent/t.xml")]),
        &fixture("sysfs/cpu-vm"),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("/nonexistent/t.xml"), "{e}");
}
