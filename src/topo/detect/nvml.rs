//! GPUs through NVML (nvml-wrapper, `libnvidia-ml.so.1` opened at run time, so hosts without
//! the driver run on), or from the `nvml.json` facts captured beside a sysfs tree
//! (tests/fixtures/capture_nvml.py writes them). The facts are what NCCL asks NVML for
//! (src/graph/xml.cc `ncclTopoGetXmlFromGpu`): index, bus id, compute capability, NVLinks with
//! their remote bus ids, C2C links.

use serde::Serialize;

use crate::topo::busid::normalize;

/// One NVLink of a GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NvLinkInfo {
    /// Link number.
    pub link: u32,
    /// Whether the link can carry P2P (`NVML_NVLINK_CAP_P2P_SUPPORTED`).
    pub p2p: bool,
    /// Whether the link is up.
    pub active: bool,
    /// The remote end's PCI bus id as NCCL sees it (see [`nccl_remote_busid`]).
    pub remote_busid: Option<String>,
}

/// One GPU.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuInfo {
    /// NVML index (NCCL's `dev`).
    pub index: u32,
    /// Product name.
    pub name: String,
    /// Bus id in NCCL's form (`0000:1b:00.0`).
    pub busid: String,
    /// Compute capability, major*10+minor.
    pub sm: u32,
    /// NUMA node NVML reports, if any.
    pub numa_node: Option<i64>,
    /// NVLinks probed (sm < 60: none, < 70: 4, < 80: 6, < 90: 12, else 18).
    pub nvlinks: Vec<NvLinkInfo>,
    /// Per-link NVLink speed NVML reports (`NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON`), MB/s.
    pub nvlink_speed_mbps: Option<u64>,
    /// Active C2C links and their bandwidth (MB/s), Grace systems.
    pub c2c: Option<(u32, u32)>,
}

/// Where the GPUs came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum GpuSource {
    /// NVML on this host, with its driver version.
    Nvml(String),
    /// A captured `nvml.json`.
    Facts(String),
    /// NVML could not be used; why.
    Unavailable(String),
}

/// The remote bus id as NCCL sees it. NCCL calls NVML's first `nvmlDeviceGetNvLinkRemotePciInfo`
/// with a 16-byte `busId`: ordinary ids come back in the legacy 4-digit-domain form
/// (`0000:07:00.0`), and on the 2xH200 VM the unknown NVSwitch end, `FFFFFFFF:FF:FF.0` in NVML's
/// current form, arrived in NCCL's dump as `fffffff:ff:ff.0` (15 characters). Lower case.
pub fn nccl_remote_busid(nvml: &str) -> String {
    let s = nvml.trim().to_lowercase();
    let Some((domain, rest)) = s.split_once(':') else {
        return s;
    };
    match u64::from_str_radix(domain, 16) {
        Ok(d) if d <= 0xffff => format!("{d:04x}:{rest}"),
        _ if s.len() > 15 => s[s.len() - 15..].to_string(),
        _ => s,
    }
}

/// NVLinks NCCL probes for compute capability `sm`.
pub fn max_nvlinks(sm: u32) -> u32 {
    match sm {
        0..60 => 0,
        60..70 => 4,
        70..80 => 6,
        80..90 => 12,
        _ => 18,
    }
}

/// Reads every GPU through NVML.
pub fn read_live() -> (Vec<GpuInfo>, GpuSource) {
    use nvml_wrapper::Nvml;
    use nvml_wrapper::enum_wrappers::nv_link::Capability;
    use nvml_wrapper::structs::device::FieldId;
    let nvml = match Nvml::init() {
        Ok(n) => n,
        Err(e) => {
            return (
                Vec::new(),
                GpuSource::Unavailable(format!("NVML not loaded: {e}")),
            );
        }
    };
    let driver = nvml.sys_driver_version().unwrap_or_default();
    let count = match nvml.device_count() {
        Ok(c) => c,
        Err(e) => {
            return (
                Vec::new(),
                GpuSource::Unavailable(format!("NVML device count: {e}")),
            );
        }
    };
    let mut gpus = Vec::new();
    for i in 0..count {
        let Ok(d) = nvml.device_by_index(i) else {
            continue;
        };
        let Ok(pci) = d.pci_info() else { continue };
        let sm = d
            .cuda_compute_capability()
            .map_or(0, |c| (c.major * 10 + c.minor) as u32);
        let mut nvlinks = Vec::new();
        for l in 0..max_nvlinks(sm) {
            let lw = d.link_wrapper_for(l);
            let Ok(p2p) = lw.has_capability(Capability::P2p) else {
                continue;
            };
            nvlinks.push(NvLinkInfo {
                link: l,
                p2p,
                active: lw.is_active().unwrap_or(false),
                remote_busid: lw
                    .remote_pci_info()
                    .ok()
                    .map(|r| nccl_remote_busid(&r.bus_id)),
            });
        }
        let speed = d
            .field_values_for(&[FieldId(90)])
            .ok()
            .and_then(|v| v.into_iter().next())
            .and_then(|s| s.ok())
            .and_then(|s| s.value.ok())
            .and_then(|v| sample_u64(&v));
        gpus.push(GpuInfo {
            index: d.index().unwrap_or(i),
            name: d.name().unwrap_or_default(),
            busid: normalize(&pci.bus_id),
            sm,
            numa_node: d.numa_node_id().ok().map(i64::from),
            nvlinks,
            nvlink_speed_mbps: speed.filter(|&s| s > 0),
            c2c: None,
        });
    }
    (gpus, GpuSource::Nvml(driver))
}

fn sample_u64(v: &nvml_wrapper::enums::device::SampleValue) -> Option<u64> {
    use nvml_wrapper::enums::device::SampleValue as S;
    match *v {
        S::U32(x) => Some(u64::from(x)),
        S::U64(x) => Some(x),
        S::I64(x) => u64::try_from(x).ok(),
        _ => None,
    }
}

/// Reads GPUs from captured NVML facts (the JSON `capture_nvml.py` writes: `gpus[]` with
/// `index`, `name`, `bus_id`, `sm`, `numa_node`, `nvlinks[]` {`link`, `p2p`, `active`,
/// `remote_bus_id`}, `fields` {"90": {"ret", "ui"}}).
///
/// Errors: a message saying what is missing, for a file that is not such JSON.
pub fn read_facts(text: &str) -> Result<Vec<GpuInfo>, String> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let gpus = v
        .get("gpus")
        .and_then(|g| g.as_array())
        .ok_or("no \"gpus\" array")?;
    gpus.iter()
        .map(|g| {
            let s = |k: &str| g.get(k).and_then(|x| x.as_str()).map(str::to_string);
            let n = |k: &str| g.get(k).and_then(|x| x.as_u64());
            let busid = s("bus_id").ok_or("a GPU without \"bus_id\"")?;
            let nvlinks = g
                .get("nvlinks")
                .and_then(|x| x.as_array())
                .map(|ls| {
                    ls.iter()
                        .map(|l| NvLinkInfo {
                            link: l.get("link").and_then(|x| x.as_u64()).unwrap_or(0) as u32,
                            p2p: l.get("p2p").and_then(|x| x.as_u64()).unwrap_or(0) != 0,
                            active: l.get("active").and_then(|x| x.as_bool()).unwrap_or(false),
                            remote_busid: l
                                .get("remote_bus_id")
                                .and_then(|x| x.as_str())
                                .map(nccl_remote_busid),
                        })
                        .collect()
                })
                .unwrap_or_default();
            let speed = g
                .pointer("/fields/90")
                .filter(|f| f.get("ret").and_then(|r| r.as_u64()) == Some(0))
                .and_then(|f| f.get("ui"))
                .and_then(|x| x.as_u64());
            Ok(GpuInfo {
                index: n("index").ok_or("a GPU without \"index\"")? as u32,
                name: s("name").unwrap_or_default(),
                busid: normalize(&busid),
                sm: n("sm").ok_or("a GPU without \"sm\"")? as u32,
                numa_node: g.get("numa_node").and_then(|x| x.as_i64()),
                nvlinks,
                nvlink_speed_mbps: speed.filter(|&x| x > 0),
                c2c: None,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_json() {
        let g = read_facts(
            r#"{"gpus":[{"index":0,"name":"NVIDIA H200","bus_id":"00000000:00:06.0","sm":90,
               "nvlinks":[{"link":0,"p2p":1,"active":true,"remote_bus_id":"FFFFFFFF:FF:FF.0"}],
               "fields":{"90":{"ret":0,"ui":26562}}}]}"#,
        )
        .unwrap();
        assert_eq!(g[0].busid, "0000:00:06.0");
        assert_eq!(
            g[0].nvlinks[0].remote_busid.as_deref(),
            Some("fffffff:ff:ff.0")
        );
        assert_eq!(g[0].nvlink_speed_mbps, Some(26562));
        assert!(read_facts("{}").unwrap_err().contains("gpus"));
        assert_eq!(max_nvlinks(86), 12);
    }
}
