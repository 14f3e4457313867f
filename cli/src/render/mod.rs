//! Text rendering shared by `rnccl topo` and `rnccl rings`: aligned tables, bandwidths, CPU
//! masks, and where a topology comes from.

use std::path::{Path, PathBuf};

use anyhow::Context;
use rnccl::config::Config;
use rnccl::topo::assume::Assumptions;
use rnccl::topo::detect::{self, Inventory};
use rnccl::topo::{System, TopoParams};

/// A table of text cells printed with columns padded to their widest cell.
#[derive(Debug, Default)]
pub struct Table {
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with this header row.
    pub fn new<S: Into<String>>(header: impl IntoIterator<Item = S>) -> Table {
        Table {
            rows: vec![header.into_iter().map(Into::into).collect()],
        }
    }

    /// Appends a row.
    pub fn row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) {
        self.rows.push(cells.into_iter().map(Into::into).collect());
    }

    /// The lines, each indented by `indent` spaces, cells two spaces apart, no trailing blanks.
    pub fn lines(&self, indent: usize) -> Vec<String> {
        let cols = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let width: Vec<usize> = (0..cols)
            .map(|c| {
                self.rows
                    .iter()
                    .filter_map(|r| r.get(c))
                    .map(|s| s.chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        self.rows
            .iter()
            .map(|r| {
                let mut line = " ".repeat(indent);
                for (c, cell) in r.iter().enumerate() {
                    line.push_str(cell);
                    if c + 1 < r.len() {
                        line.push_str(&" ".repeat(width[c] - cell.chars().count() + 2));
                    }
                }
                line.trim_end().to_string()
            })
            .collect()
    }
}

/// A bandwidth in GB/s with one decimal (`370.8`).
pub fn gbs(bw: f32) -> String {
    format!("{:.1}", f64::from(bw))
}

/// The CPUs of a sysfs `cpumap`-style mask (`ffff,00000000` → `32-47`), as ranges.
pub fn mask_to_list(mask: &str) -> String {
    let mut bits = Vec::new();
    for word in mask.trim().split(',').rev() {
        let v = u32::from_str_radix(word.trim(), 16).unwrap_or(0);
        for b in 0..32 {
            bits.push(v >> b & 1 == 1);
        }
    }
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < bits.len() {
        if bits[i] {
            let s = i;
            while i + 1 < bits.len() && bits[i + 1] {
                i += 1;
            }
            out.push(if s == i {
                s.to_string()
            } else {
                format!("{s}-{i}")
            });
        }
        i += 1;
    }
    out.join(",")
}

/// Where the topology of a command comes from.
pub struct Source {
    /// The system, when there is one (a GPU host, or a file).
    pub system: Option<System>,
    /// What detection read, when the command looked at a host.
    pub inventory: Option<Inventory>,
    /// In words, for headers.
    pub label: String,
}

/// Loads the topology: `--topo-file` alone (offline, paths with the knobs in `cfg`, what the
/// file leaves to the host filled from `assume` and guesses), else this host (or
/// `--sysfs-root`) detected and merged with `NCCL_TOPO_FILE` as NCCL does.
pub fn load(
    cfg: &Config,
    topo_file: Option<&Path>,
    sysfs_root: Option<&PathBuf>,
    assume: &[String],
) -> anyhow::Result<Source> {
    let assume = Assumptions::parse(assume)?;
    if let Some(f) = topo_file {
        let params = TopoParams::from_config(cfg)?;
        let system = System::from_file_assuming(f, params, &assume)?;
        return Ok(Source {
            system: Some(system),
            inventory: None,
            label: format!("topology file {}", f.display()),
        });
    }
    if !assume.is_empty() {
        anyhow::bail!(
            "--assume describes the host of a --topo-file studied offline; here the host itself says what NCCL fills in (drop --assume, or add --topo-file FILE)"
        );
    }
    let root = sysfs_root.cloned().unwrap_or_else(|| PathBuf::from("/"));
    let inventory = detect::detect(&root, cfg)
        .with_context(|| format!("reading the host under {}", root.display()))?;
    let label = if root == Path::new("/") {
        match &inventory.host.hostname {
            Some(h) => format!("this host ({h})"),
            None => "this host".to_string(),
        }
    } else {
        format!("captured host {}", root.display())
    };
    let label = match cfg.string("NCCL_TOPO_FILE") {
        Some(f) => format!("{label} merged with NCCL_TOPO_FILE={f}"),
        None => label,
    };
    let system = System::from_host(cfg, inventory.clone())?;
    Ok(Source {
        system,
        inventory: Some(inventory),
        label,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_and_tables() {
        assert_eq!(mask_to_list("ffffffff"), "0-31");
        assert_eq!(mask_to_list("0000ffff,00000000"), "32-47");
        assert_eq!(mask_to_list("00000005"), "0,2");
        let mut t = Table::new(["a", "bb"]);
        t.row(["ccc", "d"]);
        assert_eq!(t.lines(1), vec![" a    bb", " ccc  d"]);
        assert_eq!(gbs(370.80002), "370.8");
    }
}
