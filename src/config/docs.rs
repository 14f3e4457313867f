//! The knob reference (`docs/knobs.md`), generated from the registry. A test keeps the committed
//! file equal to [`knobs_markdown`]; regenerate it with
//! `cargo run -p rnccl-cli -- env-explain --all --format markdown > docs/knobs.md`.

use std::fmt::Write;

use super::registry::{KnobSpec, KnobType, NCCL_VERSION, Status, Subsystem, sorted};

/// The whole reference: an introduction, a table of contents by subsystem, then one section per
/// knob of [`knob_markdown`], grouped by subsystem and sorted by name.
pub fn knobs_markdown() -> String {
    let all = sorted();
    let mut out = format!(
        "# NCCL knob reference\n\n\
         Generated from rnccl's knob registry (`src/config/registry/`) by \
         `rnccl env-explain --all --format markdown`; do not edit by hand.\n\n\
         It covers every variable libnccl {NCCL_VERSION} reads, the knobs NCCL removed or renamed, \
         those read by NCCL's bundled plugins and by nccl-tests, and rnccl's own settings: {} in all. \
         Descriptions are rnccl's own words. `rnccl env-explain NAME` prints the same entry; \
         `rnccl env-explain` checks the settings in effect.\n\n\
         Categories: **system** (describes the site: interfaces, HCAs, files), **tuning** (trades \
         performance or resources), **debug** (for diagnosing; leave unset in production), \
         **dangerous** (can hang jobs, corrupt results or hide faults).\n\n\
         Versions: the first NCCL release that reads the knob, from NCCL's documentation or else \
         from the first release tag whose source names it; ≤2.3.5 means 2.3.5 or earlier.\n\n",
        all.len()
    );
    out.push_str("## Contents\n\n");
    for sub in Subsystem::ALL {
        let n = all.iter().filter(|k| k.subsystem == sub).count();
        if n > 0 {
            let _ = writeln!(out, "- [{sub}](#subsystem-{sub}) ({n})");
        }
    }
    for sub in Subsystem::ALL {
        let knobs: Vec<&&KnobSpec> = all.iter().filter(|k| k.subsystem == sub).collect();
        if knobs.is_empty() {
            continue;
        }
        let _ = write!(out, "\n## Subsystem {sub}\n");
        for k in knobs {
            out.push('\n');
            out.push_str(&knob_markdown(k));
        }
    }
    out
}

/// One knob as a Markdown section: heading, description, then a field table.
pub fn knob_markdown(k: &KnobSpec) -> String {
    let mut out = format!("### {}\n\n{}\n\n| | |\n|---|---|\n", k.name, k.description);
    let mut row = |field: &str, value: String| {
        let _ = writeln!(out, "| {field} | {} |", value.replace('|', "\\|"));
    };
    row("Type", format!("{} — {}", k.ty.short_name(), k.ty.syntax()));
    let default = match (k.default, k.auto) {
        ("", "") => "unset".to_string(),
        ("", auto) => format!("unset: {auto}"),
        (d, "") => code(d),
        (d, auto) => format!("{}: {auto}", code(d)),
    };
    row("Default", default);
    if !k.ty.choices().is_empty() && !matches!(k.ty, KnobType::Bitset(_)) {
        let choices: Vec<String> =
            k.ty.choices()
                .iter()
                .map(|c| format!("`{}` {}", c.value, c.meaning))
                .collect();
        row("Values", choices.join("; "));
    }
    if let KnobType::Bitset(c) = k.ty {
        let names: Vec<&str> = c.iter().map(|c| c.value).collect();
        row("Names", names.join(", "));
    }
    if let Some((lo, hi)) = k.range {
        let range = if hi == i64::MAX {
            format!("{lo} or more")
        } else {
            format!("{lo} to {hi}")
        };
        row("Range", range);
    }
    if k.unit != super::registry::Unit::None {
        row("Unit", k.unit.to_string());
    }
    row("Subsystem", k.subsystem.to_string());
    row("Category", k.category.to_string());
    row("NCCL versions", k.versions());
    match k.status {
        Status::Active => {}
        Status::Deprecated { since, instead } => row(
            "Status",
            format!("deprecated since {since}{}", use_instead(instead)),
        ),
        Status::Inert => row("Status", "declared but not read: no effect".into()),
        Status::Removed { last, instead } => row(
            "Status",
            format!("removed: last read by {last}{}", use_instead(instead)),
        ),
    }
    if !k.related.is_empty() {
        row("Related", k.related.join(", "));
    }
    row(
        "rnccl",
        if k.honoured() {
            "honoured".into()
        } else {
            "explained, not acted on".into()
        },
    );
    row("Read at", code(k.source));
    out
}

fn use_instead(instead: &str) -> String {
    if instead.is_empty() {
        String::new()
    } else {
        format!("; use {instead}")
    }
}

fn code(s: &str) -> String {
    if s.contains('`') {
        s.to_string()
    } else {
        format!("`{s}`")
    }
}
