//! `rnccl topo`: what NCCL sees on this host or in a topology file — the tree of CPUs, PCIe
//! switches, GPUs and NICs, NCCL's path type and bandwidth between every GPU and NIC, CPU and
//! NUMA affinity, and warnings for known traps.

mod host;
mod matrix;
mod tree;
mod view;

use std::path::PathBuf;
use std::process::ExitCode;

use rnccl::config::Finding;
use rnccl::topo::diagnose::{diagnose, diagnose_host};
use rnccl::topo::{NoteKind, TopoNote};

use crate::GlobalOpts;
use crate::{output, render};

/// Output formats of `rnccl topo`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Tree, path matrix and findings for people.
    Table,
    /// Everything as JSON.
    Json,
    /// NCCL topology XML, as NCCL_TOPO_DUMP_FILE writes it (usable as NCCL_TOPO_FILE).
    Xml,
}

/// Arguments of `rnccl topo`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Exit status: 1 on an error, and when NCCL itself would refuse the \
topology file (--topo-file, or NCCL_TOPO_FILE merged with this host) although rnccl can read it: \
the output is printed as usual and each reason is listed under 'Reading the topology' and on \
standard error, so scripts can gate NCCL_TOPO_FILE on this command. 0 otherwise."
)]
pub struct Args {
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Study another machine offline: an NCCL topology XML file (an NCCL_TOPO_DUMP_FILE, or a
    /// file written for NCCL_TOPO_FILE). Without it, this host is detected and merged with
    /// NCCL_TOPO_FILE when that is set, as NCCL does. Exits with 1 when NCCL would refuse the
    /// file.
    #[arg(long, value_name = "FILE")]
    pub topo_file: Option<PathBuf>,
    /// Read sysfs and procfs under DIR instead of / (a tree captured with
    /// tests/fixtures/capture_sysfs.py; GPUs then come from DIR/nvml.json).
    #[arg(long, value_name = "DIR")]
    pub sysfs_root: Option<PathBuf>,
    /// With --topo-file: what to assume about the host the file describes, for what the file
    /// leaves to it (cloud skeletons): gpu=MODEL, fabric=nvswitch|pairs|none, nvlinks=N,
    /// nic=MODEL, nic-speed=GBPS, cpu=MODEL; repeat or separate with commas. Unstated ones are
    /// guessed from the file's PCI ids, classes and link speeds; all are printed.
    #[arg(long, value_name = "KEY=VALUE", action = clap::ArgAction::Append, long_help = rnccl::topo::assume::long_help())]
    pub assume: Vec<String>,
}

/// Runs `rnccl topo`.
pub fn run(args: Args, global: &GlobalOpts) -> anyhow::Result<ExitCode> {
    let cfg = crate::config_load::load_config(global)?;
    let src = render::load(
        &cfg,
        args.topo_file.as_deref(),
        args.sysfs_root.as_ref(),
        &args.assume,
    )?;
    match args.format {
        Format::Xml => {
            let Some(sys) = &src.system else {
                anyhow::bail!(
                    "{} has no GPU, so NCCL builds no topology here; use --topo-file FILE to study another machine",
                    src.label
                );
            };
            output::print(&sys.to_xml_string())?;
        }
        Format::Json => {
            let v = view::json(&src);
            output::print(&(serde_json::to_string_pretty(&v)? + "\n"))?;
        }
        Format::Table => output::print_lines(&table(&src))?,
    }
    let refused: Vec<_> = src
        .system
        .iter()
        .flat_map(|s| &s.notes)
        .filter(|n| n.nccl_rejects)
        .collect();
    for n in &refused {
        eprintln!("rnccl topo: NCCL would refuse this topology: {n}");
    }
    Ok(if refused.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn table(src: &render::Source) -> Vec<String> {
    let mut out = vec![format!("rnccl topo: {}", src.label)];
    if let Some(inv) = &src.inventory {
        out.extend(host::summary(inv));
    }
    let findings: Vec<Finding> = match (&src.system, &src.inventory) {
        (Some(sys), _) => {
            out.push(String::new());
            out.push("Topology as NCCL sees it (link bandwidths in GB/s)".into());
            out.extend(tree::lines(sys));
            out.push(String::new());
            out.push("Paths: NCCL path type and bottleneck bandwidth (GB/s) between GPUs and network devices".into());
            out.extend(matrix::lines(sys));
            diagnose(sys)
        }
        (None, Some(inv)) => {
            out.push(String::new());
            out.extend(host::pci_tree(inv));
            out.push(String::new());
            out.push("No GPU here, so NCCL builds no topology on this host. Use --topo-file FILE to study another machine.".into());
            diagnose_host(inv)
        }
        (None, None) => Vec::new(),
    };
    out.push(String::new());
    if findings.is_empty() {
        out.push("Findings: none of the known traps (downtrained PCIe links, ACS, NUMA mismatch, hidden PCIe switches).".into());
    } else {
        out.push("Findings".into());
        for f in &findings {
            out.push(format!("  {} [{}] {}", f.severity, f.code, f.message));
            out.push(format!("      -> {}", f.hint));
        }
    }
    if let Some(sys) = &src.system {
        out.extend(note_sections(&sys.notes));
    }
    out
}

/// The notes by kind, each kind under its own heading.
fn note_sections(notes: &[TopoNote]) -> Vec<String> {
    let mut out = Vec::new();
    for (kind, title) in [
        (
            NoteKind::Assumed,
            "Assumed about the host the file describes (offline; NCCL takes these from the host it runs on)",
        ),
        (
            NoteKind::Host,
            "The file and this host disagree (NCCL goes by the host's devices)",
        ),
        (
            NoteKind::Filled,
            "Filled in where the file is silent, as NCCL fills it",
        ),
        (NoteKind::Read, "Reading the topology"),
    ] {
        let mine: Vec<&TopoNote> = notes.iter().filter(|n| n.kind == kind).collect();
        if mine.is_empty() {
            continue;
        }
        out.push(String::new());
        out.push(title.into());
        out.extend(mine.iter().map(|n| format!("  {n}")));
    }
    out
}
