//! `rnccl rings`: the rings and trees NCCL would build on this host (or a topology file) for
//! one or more identical nodes, printed as NCCL's INFO lines, with the NIC each channel uses, the
//! bandwidth NCCL's model expects, and its tuning table.

mod text;
mod tune;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use rnccl::Func;
use rnccl::graph::file::GraphFile;
use rnccl::graph::tuning::{Model, TuneInput, TuneParams};
use rnccl::graph::xml::{graphs_xml, write_graph_dump};
use rnccl::graph::{Channels, PlanParams, search_or_load};
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
    /// With --topo-file: what to assume about the host the file describes, for what the file
    /// leaves to it (cloud skeletons): gpu=MODEL, fabric=nvswitch|pairs|none, nvlinks=N,
    /// nic=MODEL, nic-speed=GBPS, cpu=MODEL; repeat or separate with commas. Unstated ones are
    /// guessed from the file's PCI ids, classes and link speeds; all are printed.
    #[arg(long, value_name = "KEY=VALUE", action = clap::ArgAction::Append, long_help = rnccl::topo::assume::long_help())]
    pub assume: Vec<String>,
    /// Also print NCCL's tuning table and the model's choice over a size sweep for this
    /// collective (all_reduce, all_gather, reduce_scatter, broadcast, reduce).
    #[arg(long, value_name = "COLL")]
    pub tune: Option<String>,
    /// Print the INFO lines as this rank prints them.
    #[arg(long, default_value_t = 0)]
    pub rank: usize,
    /// Use the rings and trees of this NCCL graph XML (an NCCL_GRAPH_DUMP_FILE, or a file
    /// written for NCCL_GRAPH_FILE) instead of searching them, after NCCL's checks against the
    /// topology. Defaults to NCCL_GRAPH_FILE when that is set.
    #[arg(long, value_name = "FILE")]
    pub graph_file: Option<PathBuf>,
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
    /// The graph file the graphs were read from, if any.
    pub graph_file: Option<PathBuf>,
    /// The knobs, for rnccl's own choices.
    pub knobs: rnccl::config::Config,
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
    let src = render::load(
        &cfg,
        args.topo_file.as_deref(),
        args.sysfs_root.as_ref(),
        &args.assume,
    )?;
    let Some(system) = src.system.clone() else {
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
    let graph_path = match &args.graph_file {
        Some(p) => Some(p.clone()),
        None => cfg.text("NCCL_GRAPH_FILE")?.map(PathBuf::from),
    };
    let graphs = graph_path
        .as_deref()
        .map(GraphFile::load)
        .transpose()
        .context("reading the graph file")?;
    let channels = search_or_load(&system, &ranks, &params, graphs.as_ref())
        .with_context(|| {
            format!(
                "the graph file {} does not fit {}",
                graph_path
                    .as_deref()
                    .map_or(String::new(), |p| p.display().to_string()),
                src.label
            )
        })?
        .context("planning channels")?;
    let model = Model::new(
        &TuneInput::new(&system, &channels),
        &TuneParams::from_config(&cfg)?,
    );
    write_graph_dump(&cfg, args.rank, &system, &channels)
        .context("writing NCCL_GRAPH_DUMP_FILE")?;
    let p = Planned {
        label: src.label.clone(),
        graph_file: graph_path,
        system,
        channels,
        model,
        nodes,
        knobs: cfg.clone(),
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
