//! Studying a topology file offline: what the live host would fill in. Cloud vendors publish
//! skeletons (`<cpu numaid>` without arch, bare `<pci busid class>` for GPUs and NICs) that NCCL
//! completes from the host it runs on (NCCL 2.28 src/graph/xml.cc `ncclTopoFillGpu`,
//! `ncclTopoGetXmlFromCpu`, `ncclTopoFillNet`). Away from that host, [`Assumptions`] stand in for
//! it — GPU model and NVLink fabric, NIC model and speed, CPU generation — either stated
//! (`--assume gpu=h100-sxm,nic=cx7`) or guessed from the PCI ids, classes and link speeds the
//! file has ([`host::offline_host`]); the file is then filled by the same code that fills it on
//! a live host, and every assumption is reported.

pub mod host;
pub mod models;

use serde::Serialize;

use crate::topo::TopoError;
use models::{CPUS, CpuPreset, Fabric, GPUS, GpuModel, NICS, NicModel, find, keys};

/// What to assume about the host a topology file describes, for what the file leaves to the
/// host. Unset fields are guessed per device from the file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Assumptions {
    /// Every GPU is this model.
    pub gpu: Option<&'static GpuModel>,
    /// The NVLink fabric (default: the GPU model's usual one).
    pub fabric: Option<Fabric>,
    /// NVLinks per GPU (default: the GPU model's).
    pub nvlinks: Option<u32>,
    /// Every PCI network device is this model.
    pub nic: Option<&'static NicModel>,
    /// Port speed in Gb/s (default: the NIC model's).
    pub nic_speed_gbps: Option<u32>,
    /// The CPUs, where the file does not say.
    pub cpu: Option<&'static CpuPreset>,
}

impl Assumptions {
    /// Whether nothing was stated.
    pub fn is_empty(&self) -> bool {
        *self == Assumptions::default()
    }

    /// Parses `KEY=VALUE` items (each may hold several, comma separated): `gpu=MODEL`,
    /// `fabric=nvswitch|pairs|none`, `nvlinks=N`, `nic=MODEL`, `nic-speed=GBPS`, `cpu=MODEL`.
    ///
    /// Errors: [`TopoError::Assumption`] naming the item, for an unknown key, an unknown model
    /// (listing the known ones), a number that is not a positive integer, or a key given twice.
    pub fn parse<S: AsRef<str>>(items: &[S]) -> Result<Assumptions, TopoError> {
        let mut a = Assumptions::default();
        let mut seen: Vec<String> = Vec::new();
        for item in items
            .iter()
            .flat_map(|s| s.as_ref().split(','))
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            let bad = |message: String| TopoError::Assumption {
                item: item.to_string(),
                message,
            };
            let (key, value) = item
                .split_once('=')
                .ok_or_else(|| bad("expected KEY=VALUE".into()))?;
            let key = key.trim().to_ascii_lowercase().replace('_', "-");
            let value = value.trim();
            if seen.contains(&key) {
                return Err(bad(format!("{key} is given twice")));
            }
            seen.push(key.clone());
            let number = |what: &str| -> Result<u32, TopoError> {
                value
                    .parse::<u32>()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| bad(format!("{what} is a positive whole number")))
            };
            match key.as_str() {
                "gpu" => {
                    a.gpu = Some(find(GPUS, value, |m| m.key).ok_or_else(|| {
                        bad(format!(
                            "unknown GPU model; known: {}",
                            keys(GPUS, |m| m.key)
                        ))
                    })?)
                }
                "fabric" => {
                    let v = value.to_ascii_lowercase();
                    a.fabric = Some(
                        Fabric::WORDS
                            .iter()
                            .find(|(w, _)| *w == v)
                            .map(|&(_, f)| f)
                            .ok_or_else(|| bad("fabric is nvswitch, pairs or none".into()))?,
                    )
                }
                "nvlinks" => a.nvlinks = Some(number("nvlinks")?),
                "nic" => {
                    a.nic = Some(find(NICS, value, |m| m.key).ok_or_else(|| {
                        bad(format!(
                            "unknown NIC model; known: {}",
                            keys(NICS, |m| m.key)
                        ))
                    })?)
                }
                "nic-speed" => {
                    let v = value
                        .trim_end_matches(|c: char| c.is_ascii_alphabetic() || c == '/')
                        .trim();
                    a.nic_speed_gbps =
                        Some(v.parse::<u32>().ok().filter(|&n| n > 0).ok_or_else(|| {
                            bad("nic-speed is the port speed in Gb/s, e.g. 400".into())
                        })?)
                }
                "cpu" => {
                    a.cpu = Some(find(CPUS, value, |m| m.key).ok_or_else(|| {
                        bad(format!("unknown CPU; known: {}", keys(CPUS, |m| m.key)))
                    })?)
                }
                other => {
                    return Err(bad(format!(
                        "unknown key {other:?}; use gpu, fabric, nvlinks, nic, nic-speed or cpu"
                    )));
                }
            }
        }
        Ok(a)
    }
}

/// The help of `--assume`: what it is for and every key with the models it knows.
pub fn long_help() -> String {
    format!(
        "With --topo-file: what to assume about the host the file describes, for what the file leaves to \
it (cloud skeletons: bare GPU and NIC <pci> elements, <cpu> without arch). Repeat the option or separate \
items with commas. Unstated items are guessed from the file's PCI ids, classes and link speeds; every \
assumption is printed.\n\n\
gpu=MODEL       {}\n\
fabric=F        nvswitch, pairs or none (default: the GPU model's)\n\
nvlinks=N       NVLinks per GPU (default: the GPU model's)\n\
nic=MODEL       {}\n\
nic-speed=GBPS  port speed in Gb/s (default: the NIC model's)\n\
cpu=MODEL       {}",
        keys(GPUS, |m| m.key),
        keys(NICS, |m| m.key),
        keys(CPUS, |m| m.key)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_items_and_refuses_bad_ones() {
        let a = Assumptions::parse(&["gpu=h100-sxm,nic=CX7", "nic-speed=400Gb/s", "fabric=pairs"])
            .unwrap();
        assert_eq!(a.gpu.unwrap().sm, 90);
        assert_eq!(a.nic.unwrap().key, "cx7");
        assert_eq!(a.nic_speed_gbps, Some(400));
        assert_eq!(a.fabric, Some(Fabric::Pairs));
        assert!(Assumptions::parse::<&str>(&[]).unwrap().is_empty());
        for (bad, says) in [
            ("gpu=h1000", "known: h100-sxm"),
            ("fabric=mesh", "nvswitch, pairs or none"),
            ("nvlinks=0", "positive"),
            ("speed=1", "unknown key"),
            ("gpu", "KEY=VALUE"),
            ("cpu=spr,cpu=emr", "twice"),
        ] {
            let e = Assumptions::parse(&[bad]).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
