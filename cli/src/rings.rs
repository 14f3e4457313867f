//! `rnccl rings`: the rings and trees NCCL would build on this host (or a topology file) for
//! one or more identical nodes, printed as NCCL's INFO lines, with the NIC each channel uses, the
//! bandwidth NCCL's model expects, and its tuning table.

mod text;
mod tune;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use rnccl::Func;
use rnccl::graph::tuning::{Model, TuneInput, TuneParams};
use rnccl::graph::xml::{graphs_xml, write_graph_dump};
use rnccl::graph::{Channels, PlanParams, search_and_connect};
use rnccl::topo::{NodeType, System};

use crate::GlobalOpts;
use crate::{output, render};

/// Output formats of `rnccl rings`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Summary, NCCL's INFO lines, NICs per channel, expected bandwidth.
    Text,
    /// Everything as JSON.
    Json,
    /// NCCL's graph XML (NCCL_GRAPH_DUMP_FILE format).
    Xml,
}

/// Arguments of `rnccl rings`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Number of identical nodes the communicator spans.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub nodes: u32,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// Study another machine offline: an NCCL topology XML file.
    #[arg(long, value_name = "FILE")]
    pub topo_file: Option<PathBuf>,
    /// Read sysfs and procfs under DIR instead of / (GPUs from DIR/nvml.json).
    #[arg(long, value_name = "DIR")]
    pub sysfs_root: Option<PathBuf>,
    /// Also print NCCL's tuning table and the model's choice over a size sweep for this
    /// collective (all_reduce, all_gather, reduce_scatter, broadcast, reduce).
    #[arg(long, value_name = "COLL")]
    pub tune: Option<String>,
    /// Print the INFO lines as this rank prints them.
    #[arg(long, default_value_t = 0)]
    pub rank: usize,
}

/// The searched and connected channels with their tuning model.
pub struct Planned {
    /// Where the topology came from.
    pub label: String,
    /// The node's topology.
    pub system: System,
    /// Graphs and connection.
    pub channels: Channels,
    /// NCCL's tuning model for the communicator.
    pub model: Model,
    /// Nodes.
    pub nodes: usize,
}

/// Runs `rnccl rings`.
pub fn run(args: Args, global: &GlobalOpts) -> anyhow::Result<ExitCode> {
    let cfg = crate::config_load::load_config(global)?;
    let tune = args
        .tune
        .as_deref()
        .map(|t| {
            Func::parse(t).filter(|f| f.tuned_index().is_some()).with_context(|| {
                format!("--tune {t}: not a collective NCCL tunes (all_reduce, all_gather, reduce_scatter, broadcast, reduce)")
            })
        })
        .transpose()?;
    let src = render::load(&cfg, args.topo_file.as_deref(), args.sysfs_root.as_ref())?;
    let Some(system) = src.system else {
        anyhow::bail!(
            "{} has no GPU, so NCCL builds no channels here; use --topo-file FILE to study another machine",
            src.label
        );
    };
    let ngpus = system.count(NodeType::Gpu);
    if ngpus == 0 {
        anyhow::bail!("{} describes no GPU that NCCL would use", src.label);
    }
    let nodes = args.nodes as usize;
    if args.rank >= nodes * ngpus {
        anyhow::bail!(
            "--rank {} is outside the {} ranks of {nodes} node(s) x {ngpus} GPUs",
            args.rank,
            nodes * ngpus
        );
    }
    let ranks: Vec<Vec<usize>> = (0..nodes)
        .map(|n| (n * ngpus..(n + 1) * ngpus).collect())
        .collect();
    let params = PlanParams::from_config(&cfg)?;
    let channels = search_and_connect(&system, &ranks, &params).context("planning channels")?;
    let model = Model::new(
        &TuneInput::new(&system, &channels),
        &TuneParams::from_config(&cfg)?,
    );
    write_graph_dump(&cfg, args.rank, &system, &channels)
        .context("writing NCCL_GRAPH_DUMP_FILE")?;
    let p = Planned {
        label: src.label,
        system,
        channels,
        model,
        nodes,
    };
    match args.format {
        Format::Xml => output::print(&graphs_xml(
            &p.system,
            &p.channels.ring,
            &p.channels.tree,
            p.channels.inter,
        ))?,
        Format::Json => output::print(
            &(serde_json::to_string_pretty(&text::json(&p, args.rank, tune))? + "\n"),
        )?,
        Format::Text => {
            let mut lines = text::lines(&p, args.rank);
            if let Some(f) = tune {
                lines.extend(tune::lines(&p, f));
            }
            output::print_lines(&lines)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
