//! The text form of knob references: one knob's full entry (with its current setting), and the
//! one-line-per-knob table of `--all`.

use anstyle::Style;
use rnccl::config::{KnobSpec, KnobType, Status, Unit};
use rnccl::explain::Report;

use super::report_text::{body, source_text};
use super::style::{WIDTH, bold, clip, labelled, paragraph, shown_value};

/// One knob's full entry; `report` supplies its setting when it is set.
pub fn entry(k: &KnobSpec, report: &Report) -> String {
    let mut out = format!("{}\n", bold(k.name));
    out.push_str(&paragraph(k.description, 2));
    out.push('\n');
    let plain = Style::new();
    out.push_str(&labelled(
        "type",
        plain,
        &format!("{}: {}", k.ty.short_name(), k.ty.syntax()),
    ));
    out.push_str(&labelled("default", plain, &k.default_text()));
    if !k.ty.choices().is_empty() {
        let values: Vec<String> = match k.ty {
            KnobType::Bitset(c) => vec![c.iter().map(|c| c.value).collect::<Vec<_>>().join(", ")],
            _ => {
                k.ty.choices()
                    .iter()
                    .map(|c| format!("{} {}", c.value, c.meaning))
                    .collect()
            }
        };
        out.push_str(&labelled("values", plain, &values.join("; ")));
    }
    if let Some((lo, hi)) = k.range {
        let range = if hi == i64::MAX {
            format!("{lo} or more")
        } else {
            format!("{lo} to {hi}")
        };
        out.push_str(&labelled("range", plain, &range));
    }
    if k.unit != Unit::None {
        out.push_str(&labelled("unit", plain, &k.unit.to_string()));
    }
    out.push_str(&labelled(
        "group",
        plain,
        &format!("subsystem {}, category {}", k.subsystem, k.category),
    ));
    out.push_str(&labelled("versions", plain, &k.versions()));
    let status = match k.status {
        Status::Active => None,
        Status::Deprecated { since, instead } => {
            Some(format!("deprecated since {since}{}", instead_text(instead)))
        }
        Status::Inert => Some("declared but not read by NCCL: no effect".to_string()),
        Status::Removed { last, instead } => Some(format!(
            "removed: last read by {last}{}",
            instead_text(instead)
        )),
    };
    if let Some(s) = status {
        out.push_str(&labelled("status", plain, &s));
    }
    if !k.related.is_empty() {
        out.push_str(&labelled("related", plain, &k.related.join(", ")));
    }
    let rnccl = if k.honoured() {
        "honoured by rnccl's engine"
    } else {
        "explained; rnccl's engine does not act on it"
    };
    out.push_str(&labelled("rnccl", plain, rnccl));
    out.push_str(&labelled("read at", plain, k.source));
    out.push('\n');
    match report.settings.iter().find(|s| s.name == k.name) {
        None => out.push_str(&labelled("now", plain, "not set: the default applies")),
        Some(s) => {
            out.push_str(&labelled(
                "now",
                plain,
                &format!("{} from {}", shown_value(&s.value), source_text(&s.source)),
            ));
            body(s, &mut out);
        }
    }
    out
}

fn instead_text(instead: &str) -> String {
    if instead.is_empty() {
        String::new()
    } else {
        format!("; use {instead}")
    }
}

/// `--all`: a header, then per knob a line `NAME CATEGORY TYPE DEFAULT` and a line with the
/// start of its description.
pub fn table(knobs: &[&KnobSpec]) -> String {
    const NAME: usize = 40;
    const CAT: usize = 10;
    const TYPE: usize = 12;
    let mut out = format!(
        "{} knob{}; `rnccl env-explain NAME` shows one in full.\n\n{:<NAME$}{:<CAT$}{:<TYPE$}DEFAULT\n",
        knobs.len(),
        if knobs.len() == 1 { "" } else { "s" },
        "NAME",
        "CATEGORY",
        "TYPE"
    );
    for k in knobs {
        if k.name.len() >= NAME {
            out.push_str(&format!("{}\n{:NAME$}", bold(k.name), ""));
        } else {
            out.push_str(&format!(
                "{}{:pad$}",
                bold(k.name),
                "",
                pad = NAME - k.name.len()
            ));
        }
        let default = clip(&k.default_text(), WIDTH - NAME - CAT - TYPE);
        out.push_str(&format!(
            "{:<CAT$}{:<TYPE$}{default}\n",
            k.category.name(),
            k.ty.short_name()
        ));
        let first = k.description.split(". ").next().unwrap_or(k.description);
        out.push_str(&format!(
            "    {}\n",
            clip(first.trim_end_matches('.'), WIDTH - 4)
        ));
    }
    out
}
