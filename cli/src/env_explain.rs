//! `rnccl env-explain`: the NCCL settings in effect, where each came from and what is wrong with
//! it; any knob's full entry; the whole registry; and YAML/shell exports.

mod knob_text;
mod report_text;
mod style;
mod views;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::builder::PossibleValuesParser;
use rnccl::config::yaml::{self, YamlConfig};
use rnccl::config::{
    Category, Config, KnobSpec, LoadOptions, Subsystem, did_you_mean, docs, lookup_loose, sorted,
};
use rnccl::explain::HostDevices;
use rnccl::explain::{self, Report};

use crate::GlobalOpts;
use crate::config_load::{load_config, load_options, load_with};

const AFTER_LONG_HELP: &str = "\
Modes:
  rnccl env-explain                every setting in effect, explained and checked
  rnccl env-explain NAME...        the full entry of each knob (NCCL_ may be left out)
  rnccl env-explain --all          every knob rnccl knows (filter with --subsystem,
                                   --category)
  rnccl env-explain --export yaml  the settings in effect as a YAML config
  rnccl env-explain --export env   the YAML config (--config) as shell exports

Where settings come from, highest precedence first:
  1. the process environment
  2. the YAML config (--config FILE or RNCCL_CONFIG): sections under 'hosts'
     whose host-name glob matches this host, then the global 'knobs'
  3. NCCL_CONF_FILE, or $HOME/.nccl.conf when it is unset
  4. /etc/nccl.conf (or the file named by RNCCL_SYSTEM_CONF)
  5. the default
A lower source never overrides a higher one, as in NCCL. The YAML config acts
as if its values were exported just before NCCL starts, without replacing
real environment variables. See docs/config.md.

--check makes the exit status 1 when any error is found (0 otherwise), for
health checks.";

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Text for an 80-column terminal.
    Table,
    /// JSON.
    Json,
    /// YAML.
    Yaml,
    /// Markdown (knob references only; this is how docs/knobs.md is made).
    Markdown,
}

/// What `--export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Export {
    /// The effective configuration as a YAML config.
    Yaml,
    /// The YAML config as shell `export` lines.
    Env,
}

/// Arguments of `rnccl env-explain`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = AFTER_LONG_HELP)]
pub struct Args {
    /// Knobs to describe in full, e.g. NCCL_IB_TIMEOUT (or ib_timeout).
    #[arg(value_name = "NAME")]
    names: Vec<String>,
    /// List every knob rnccl knows instead of the settings in effect.
    #[arg(long, conflicts_with = "names")]
    all: bool,
    /// Only knobs of this subsystem (repeatable).
    #[arg(long, value_name = "SUBSYSTEM", value_parser = PossibleValuesParser::new(Subsystem::ALL.map(|s| s.name())))]
    subsystem: Vec<String>,
    /// Only knobs of this category (repeatable).
    #[arg(long, value_name = "CATEGORY", value_parser = PossibleValuesParser::new(Category::ALL.map(|c| c.name())))]
    category: Vec<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
    /// Write the effective configuration (yaml) or the YAML config (env) instead of explaining.
    #[arg(long, value_enum, value_name = "WHAT", conflicts_with_all = ["names", "all", "check"])]
    export: Option<Export>,
    /// Exit with status 1 when any error is found.
    #[arg(long, conflicts_with = "all")]
    check: bool,
    /// Match YAML host sections against this host name instead of this machine's.
    #[arg(long, value_name = "HOST")]
    host: Option<String>,
    /// Read interfaces and HCAs from a tree captured like / (DIR/sys/class/net,
    /// DIR/sys/class/infiniband) instead of this host (tests).
    #[arg(long, value_name = "DIR", hide = true)]
    sysfs_root: Option<PathBuf>,
}

impl Args {
    fn wants(&self, k: &KnobSpec) -> bool {
        (self.subsystem.is_empty() || self.subsystem.iter().any(|s| s == k.subsystem.name()))
            && (self.category.is_empty() || self.category.iter().any(|c| c == k.category.name()))
    }
}

/// Runs `rnccl env-explain`.
pub fn run(args: Args, global: &GlobalOpts) -> anyhow::Result<ExitCode> {
    let cfg = match &args.host {
        None => load_config(global)?,
        Some(h) => load_with(LoadOptions {
            hostname: Some(h.clone()),
            ..load_options(global)
        })?,
    };
    let devices = match &args.sysfs_root {
        Some(root) => HostDevices::from_sysfs(root),
        None => HostDevices::detect(),
    };
    let text = match args.export {
        Some(Export::Yaml) => yaml::to_yaml(&cfg),
        Some(Export::Env) => export_env(global, &cfg)?,
        None if args.all => all_knobs(&args)?,
        None if !args.names.is_empty() => {
            let report = explain::explain(&cfg, &devices);
            let knobs = named_knobs(&args.names)?;
            let failed = args.check && knobs.iter().any(|k| view_has_error(&report, k));
            emit(&render_knobs(&args, &knobs, &report)?)?;
            return Ok(exit(failed));
        }
        None => {
            let mut report = explain::explain(&cfg, &devices);
            report
                .settings
                .retain(|s| rnccl::config::lookup(&s.name).is_none_or(|k| args.wants(k)));
            let failed = args.check && report.has_errors();
            emit(&render_report(&args, &report)?)?;
            return Ok(exit(failed));
        }
    };
    emit(&text)?;
    Ok(ExitCode::SUCCESS)
}

fn exit(failed: bool) -> ExitCode {
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// Writes `text` to stdout; colour codes are stripped unless stdout is a terminal.
fn emit(text: &str) -> anyhow::Result<()> {
    let mut out = anstream::stdout();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.context("cannot write to standard output"),
    }
}

fn export_env(global: &GlobalOpts, cfg: &Config) -> anyhow::Result<String> {
    let Some(path) = load_options(global).yaml else {
        bail!(
            "--export env turns a YAML config into shell exports: pass --config FILE or set RNCCL_CONFIG"
        );
    };
    let yaml = YamlConfig::read(&path)?;
    Ok(yaml::to_env(&yaml, cfg.hostname().unwrap_or_default()))
}

fn named_knobs(names: &[String]) -> anyhow::Result<Vec<&'static KnobSpec>> {
    names
        .iter()
        .map(|n| {
            lookup_loose(n).ok_or_else(|| {
                let close = did_you_mean(n);
                let hint = if close.is_empty() {
                    "list every knob with `rnccl env-explain --all`".to_string()
                } else {
                    format!("did you mean {}?", close.join(" or "))
                };
                anyhow::anyhow!("{n} is not a knob rnccl knows; {hint}")
            })
        })
        .collect()
}

fn view_has_error(report: &Report, k: &KnobSpec) -> bool {
    report
        .settings
        .iter()
        .any(|s| s.name == k.name && s.worst() == Some(rnccl::config::Severity::Error))
}

fn all_knobs(args: &Args) -> anyhow::Result<String> {
    let knobs: Vec<&KnobSpec> = sorted().into_iter().filter(|k| args.wants(k)).collect();
    let unfiltered = args.subsystem.is_empty() && args.category.is_empty();
    Ok(match args.format {
        Format::Table => knob_text::table(&knobs),
        Format::Markdown if unfiltered => docs::knobs_markdown(),
        Format::Markdown => knobs
            .iter()
            .map(|k| docs::knob_markdown(k))
            .collect::<Vec<_>>()
            .join("\n"),
        Format::Json => json(&views::knobs(&knobs, None))?,
        Format::Yaml => yaml_text(&views::knobs(&knobs, None))?,
    })
}

fn render_knobs(
    args: &Args,
    knobs: &[&'static KnobSpec],
    report: &Report,
) -> anyhow::Result<String> {
    Ok(match args.format {
        Format::Table => knobs
            .iter()
            .map(|k| knob_text::entry(k, report))
            .collect::<Vec<_>>()
            .join("\n"),
        Format::Markdown => knobs
            .iter()
            .map(|k| docs::knob_markdown(k))
            .collect::<Vec<_>>()
            .join("\n"),
        Format::Json => json(&views::knobs(knobs, Some(report)))?,
        Format::Yaml => yaml_text(&views::knobs(knobs, Some(report)))?,
    })
}

fn render_report(args: &Args, report: &Report) -> anyhow::Result<String> {
    Ok(match args.format {
        Format::Table => report_text::render(report),
        Format::Json => json(report)?,
        Format::Yaml => yaml_text(report)?,
        Format::Markdown => {
            bail!("--format markdown is for knob references: use it with --all or NAME")
        }
    })
}

fn json<T: serde::Serialize>(v: &T) -> anyhow::Result<String> {
    Ok(serde_json::to_string_pretty(v).context("cannot render JSON")? + "\n")
}

fn yaml_text<T: serde::Serialize>(v: &T) -> anyhow::Result<String> {
    serde_saphyr::to_string(v).context("cannot render YAML")
}
