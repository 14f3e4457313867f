//! Detection on a bare-metal-shaped sysfs tree built in a temporary directory: a GPU and an
//! InfiniBand NIC behind one PCIe switch (root port, upstream port, downstream ports), ACS on a
//! downstream port and a GPU link trained at x8. Checks NCCL's XML (one node per switch, link
//! speed and width from device and port), the IB device NCCL's plugin would list, and the
//! findings.

use std::collections::BTreeMap;
use std::path::Path;

use rnccl::config::Severity;
use rnccl::config::{Config, LoadOptions};
use rnccl::topo::diagnose::diagnose;
use rnccl::topo::{NodeRef, NodeType, PathType, System};

fn write(root: &Path, rel: &str, content: &[u8]) {
    let p = root.join(rel.trim_start_matches('/'));
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, content).unwrap();
}

fn device(
    root: &Path,
    path: &str,
    class: &str,
    vendor: &str,
    dev: &str,
    width: (u32, u32),
    config: Option<Vec<u8>>,
) {
    for (f, v) in [
        ("class", class.to_string()),
        ("vendor", vendor.to_string()),
        ("device", dev.to_string()),
        ("subsystem_vendor", vendor.to_string()),
        ("subsystem_device", "0x0001".to_string()),
        ("max_link_speed", "32.0 GT/s PCIe".to_string()),
        ("current_link_speed", "32.0 GT/s PCIe".to_string()),
        ("max_link_width", width.0.to_string()),
        ("current_link_width", width.1.to_string()),
        ("numa_node", "1".to_string()),
    ] {
        write(root, &format!("{path}/{f}"), format!("{v}\n").as_bytes());
    }
    if let Some(c) = config {
        write(root, &format!("{path}/config"), &c);
    }
}

fn acs_config(ctl: u16) -> Vec<u8> {
    let mut c = vec![0u8; 4096];
    c[0x100..0x104].copy_from_slice(&(0x000du32 | (1 << 16)).to_le_bytes());
    c[0x106..0x108].copy_from_slice(&ctl.to_le_bytes());
    c
}

fn host(root: &Path) {
    let top = "/sys/devices/pci0000:80";
    let rp = format!("{top}/0000:80:01.0");
    let up = format!("{rp}/0000:81:00.0");
    let dp0 = format!("{up}/0000:82:00.0");
    let dp1 = format!("{up}/0000:82:01.0");
    device(root, &rp, "0x060400", "0x8086", "0x352a", (16, 16), None);
    device(root, &up, "0x060400", "0x1000", "0xc010", (16, 16), None);
    device(
        root,
        &dp0,
        "0x060400",
        "0x1000",
        "0xc010",
        (16, 16),
        Some(acs_config(0x001d)),
    );
    device(
        root,
        &dp1,
        "0x060400",
        "0x1000",
        "0xc010",
        (16, 16),
        Some(acs_config(0)),
    );
    device(
        root,
        &format!("{dp0}/0000:83:00.0"),
        "0x030200",
        "0x10de",
        "0x2330",
        (16, 8),
        None,
    );
    let nic = format!("{dp1}/0000:84:00.0");
    device(root, &nic, "0x020700", "0x15b3", "0x1021", (16, 16), None);
    let ib = format!("{nic}/infiniband/mlx5_0");
    write(root, &format!("{ib}/node_guid"), b"b8ce:f603:00a1:b2c4\n");
    for (f, v) in [
        ("state", "4: ACTIVE"),
        ("rate", "400 Gb/sec (4X NDR)"),
        ("link_layer", "InfiniBand"),
    ] {
        write(
            root,
            &format!("{ib}/ports/1/{f}"),
            format!("{v}\n").as_bytes(),
        );
    }
    let cls = root.join("sys/class/infiniband");
    std::fs::create_dir_all(&cls).unwrap();
    std::os::unix::fs::symlink("../../devices/pci0000:80/0000:80:01.0/0000:81:00.0/0000:82:01.0/0000:84:00.0/infiniband/mlx5_0", cls.join("mlx5_0")).unwrap();
    std::os::unix::fs::symlink(
        "../../../0000:84:00.0",
        root.join(ib.trim_start_matches('/')).join("device"),
    )
    .unwrap();
    write(root, "/sys/devices/system/node/node1/cpumap", b"ffff0000\n");
    write(root, "/proc/cpuinfo", b"processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\n");
    write(
        root,
        "/nvml.json",
        br#"{"gpus":[{"index":0,"name":"NVIDIA H100 80GB HBM3","bus_id":"00000000:83:00.0","sm":90,"nvlinks":[]}]}"#,
    );
}

fn cfg() -> Config {
    Config::load(&LoadOptions {
        env: Some(BTreeMap::from([(
            "NCCL_HOSTID".to_string(),
            "h".to_string(),
        )])),
        home: Some("/nonexistent".into()),
        system_conf: Some("/nonexistent/nccl.conf".into()),
        ..LoadOptions::default()
    })
    .unwrap()
}

#[test]
fn switch_gpu_and_ib_nic_as_nccl_fills_them() {
    let dir = tempfile::tempdir().unwrap();
    host(dir.path());
    let sys = System::load(&cfg(), dir.path()).unwrap().unwrap();
    let xml = sys.to_xml_string();
    let hash = sys.inventory.as_ref().unwrap().host_hash_attr();
    let want = format!(
        r#"<system version="1">
  <cpu host_hash="{hash}" numaid="1" affinity="ffff0000" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">
    <pci busid="0000:81:00.0" class="0x060400" vendor="0x1000" device="0xc010" subsystem_vendor="0x1000" subsystem_device="0x0001" link_speed="32.0 GT/s PCIe" link_width="16">
      <pci busid="0000:83:00.0" class="0x030200" vendor="0x10de" device="0x2330" subsystem_vendor="0x10de" subsystem_device="0x0001" link_speed="32.0 GT/s PCIe" link_width="16">
        <gpu dev="0" sm="90" rank="0" gdr="1"/>
      </pci>
      <pci busid="0000:84:00.0" class="0x020700" vendor="0x15b3" device="0x1021" subsystem_vendor="0x15b3" subsystem_device="0x0001" link_speed="32.0 GT/s PCIe" link_width="16">
        <nic>
          <net name="mlx5_0" dev="0" latency="0" speed="400000" port="1" guid="0xb8cef60300a1b2c4" maxconn="131072" gdr="1"/>
        </nic>
      </pci>
    </pci>
  </cpu>
</system>
"#
    );
    assert_eq!(xml, want);
    let g = NodeRef::new(NodeType::Gpu, 0);
    let n = NodeRef::new(NodeType::Net, 0);
    assert_eq!(sys.path(g, n).unwrap().ty, PathType::Pix);
    assert!(sys.gdr(0, 0));
}

#[test]
fn findings_name_the_acs_bridge_and_the_narrow_link() {
    let dir = tempfile::tempdir().unwrap();
    host(dir.path());
    let sys = System::load(&cfg(), dir.path()).unwrap().unwrap();
    let f = diagnose(&sys);
    let acs = f.iter().find(|f| f.code == "acs").expect("acs finding");
    assert_eq!(acs.severity, Severity::Warning);
    assert!(
        acs.message.contains("0000:82:00.0") && acs.hint.contains("setpci -s 0000:82:00.0"),
        "{acs:?}"
    );
    assert!(
        !f.iter()
            .any(|f| f.code == "acs" && f.message.contains("0000:82:01.0"))
    );
    let link = f
        .iter()
        .find(|f| f.code == "pcie-link")
        .expect("link finding");
    assert!(
        link.message.contains("0000:83:00.0") && link.message.contains("x8"),
        "{link:?}"
    );
}
