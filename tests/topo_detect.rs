//! Detection on captured sysfs trees: the 2×H200 device machine (with its NVML facts) must give
//! the topology NCCL 2.28.9 dumped there, alone and merged with a vendor-style PCI skeleton;
//! this CPU-only VM gives no system.

use std::path::{Path, PathBuf};

use rnccl::config::Config;
use rnccl::topo::NoteKind;
use rnccl::topo::System;

fn fixture(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(p)
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
    let sys = System::load(&Config::from_pairs(&[]).unwrap(), &fixture("sysfs/h200x2"))
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
    let c = Config::from_pairs(&[("NCCL_TOPO_FILE", skeleton.to_str().unwrap())]).unwrap();
    let sys = System::load(&c, &fixture("sysfs/h200x2")).unwrap().unwrap();
    let want = std::fs::read_to_string(fixture("anchors/h200x2/topo_skeleton.xml")).unwrap();
    assert_eq!(without_hash(&sys.to_xml_string()), without_hash(&want));
}

#[test]
fn cpu_only_host_has_no_system_unless_a_file_is_given() {
    let root = fixture("sysfs/cpu-vm");
    assert!(
        System::load(&Config::from_pairs(&[]).unwrap(), &root)
            .unwrap()
            .is_none()
    );
    let topo = fixture("anchors/h200x2/topo.xml");
    let sys = System::load(
        &Config::from_pairs(&[("NCCL_TOPO_FILE", topo.to_str().unwrap())]).unwrap(),
        &root,
    )
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
        &Config::from_pairs(&[("NCCL_TOPO_DUMP_FILE", out.to_str().unwrap())]).unwrap(),
        &fixture("sysfs/h200x2"),
    )
    .unwrap()
    .unwrap();
    assert_eq!(std::fs::read_to_string(out).unwrap(), sys.to_xml_string());
}

#[test]
fn missing_topo_file_is_an_io_error_naming_it() {
    let e = System::load(
        &Config::from_pairs(&[("NCCL_TOPO_FILE", "/nonexistent/t.xml")]).unwrap(),
        &fixture("sysfs/cpu-vm"),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("/nonexistent/t.xml"), "{e}");
}

#[test]
fn skeleton_and_host_disagreeing_are_reported_and_what_was_filled_is_noted() {
    let skeleton = fixture("synthetic/h200x2-skeleton-mismatch.xml");
    let c = Config::from_pairs(&[("NCCL_TOPO_FILE", skeleton.to_str().unwrap())]).unwrap();
    let sys = System::load(&c, &fixture("sysfs/h200x2")).unwrap().unwrap();
    let of = |kind: NoteKind| -> Vec<String> {
        sys.notes
            .iter()
            .filter(|n| n.kind == kind)
            .map(|n| n.message.clone())
            .collect()
    };
    assert_eq!(
        of(NoteKind::Host),
        [
            "line 5: the file names a GPU at 0000:00:09.0 but this host has none there: NCCL leaves it out",
            "GPU 0000:00:07.0 (NVIDIA H200, NVML index 1) on this host is not in the file: NCCL adds it where sysfs places it",
            "line 6: the file names a network device at 0000:00:0a.0 but this host's network plugin lists none there: NCCL leaves it out",
            "network device eth0 (Socket plugin) on this host is not in the file: NCCL adds it under the first CPU",
        ]
    );
    let filled = of(NoteKind::Filled);
    for want in [
        "line 2: <cpu numaid=\"0\">: affinity=\"ffffffff\" from this host",
        "line 4: <pci busid=\"0000:00:06.0\">: vendor=\"0x10de\", device=\"0x2335\"",
        "line 4: <pci busid=\"0000:00:06.0\">: added <gpu dev=\"0\" sm=\"90\" rank=\"0\" gdr=\"1\"> holding <nvlink target=\"fffffff:ff:ff.0\" count=\"18\" tclass=\"0x068000\"> from this host",
        "line 1: <system>: added <cpu numaid=\"-1\"",
        "line 5: <pci busid=\"0000:00:09.0\" class=\"0x030200\" link_speed=\"32.0 GT/s PCIe\" link_width=\"16\"> is dropped",
    ] {
        assert!(
            filled.iter().any(|f| f.starts_with(want)),
            "{want}\n{filled:#?}"
        );
    }
    assert!(
        of(NoteKind::Assumed).is_empty(),
        "on the host nothing is assumed"
    );
    assert_eq!(sys.count(rnccl::topo::NodeType::Gpu), 2);
}
