//! The text form of an env-explain report: the files read, then one block per setting.

use anstyle::Style;
use rnccl::config::{FileRole, Source};
use rnccl::explain::{Explained, Report};

use super::style::{bold, finding, labelled, severity_style, shown_value};

/// Renders `report` for an 80-column terminal.
pub fn render(report: &Report) -> String {
    let mut out = String::new();
    let host = if report.host.is_empty() {
        "this host"
    } else {
        report.host.as_str()
    };
    out.push_str(&format!(
        "NCCL settings on {host}. Sources, highest precedence first:\n"
    ));
    out.push_str(&labelled("env", Style::new(), "the process environment"));
    for f in &report.files {
        let role = match f.role {
            FileRole::Yaml => "YAML",
            FileRole::UserConf => "user conf",
            FileRole::SystemConf => "system",
        };
        let state = match f.settings {
            None => "not found".to_string(),
            Some(1) => "1 setting".to_string(),
            Some(n) => format!("{n} settings"),
        };
        out.push_str(&labelled(
            role,
            Style::new(),
            &format!("{} ({state})", f.path.display()),
        ));
    }
    if report.settings.is_empty() {
        out.push_str("\nNo NCCL settings in effect: NCCL uses its defaults.\n");
    }
    for s in &report.settings {
        out.push('\n');
        out.push_str(&setting(s));
    }
    if !report.file_findings.is_empty() {
        out.push_str("\nConf file lines NCCL reads differently than they look:\n");
        for f in &report.file_findings {
            let place = format!("{}:{}", f.path.display(), f.line);
            out.push_str(&labelled(
                f.finding.severity.word(),
                severity_style(f.finding.severity),
                &format!("{place}: {}", f.finding.message),
            ));
        }
    }
    let c = report.counts;
    let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    out.push_str(&format!(
        "\n{}: {}, {}, {}.\n",
        plural(report.settings.len(), "setting"),
        plural(c.errors, "error"),
        plural(c.warnings, "warning"),
        plural(c.notes, "note")
    ));
    out
}

/// One setting's block (also used under a knob's full entry).
pub fn setting(s: &Explained) -> String {
    let mut out = format!(
        "{}={}\n",
        bold(&shown_value(&s.name)),
        shown_value(&s.value)
    );
    out.push_str(&labelled("from", Style::new(), &source_text(&s.source)));
    body(s, &mut out);
    out
}

/// The lines after the header: what NCCL reads, meaning, consequences, findings, overrides.
pub fn body(s: &Explained, out: &mut String) {
    if let Some(r) = &s.reading {
        if r.effective != s.value {
            out.push_str(&labelled("reads as", Style::new(), &r.effective));
        }
        if !r.meaning.is_empty() {
            out.push_str(&labelled("means", Style::new(), &r.meaning));
        }
    }
    for c in &s.consequences {
        out.push_str(&labelled("so", Style::new(), c));
    }
    for f in &s.findings {
        out.push_str(&finding(f));
    }
    for o in &s.overridden {
        out.push_str(&labelled(
            "overrides",
            Style::new(),
            &format!("{} from {}", shown_value(&o.raw), source_text(&o.source)),
        ));
    }
}

/// A source in words: "environment", "/etc/nccl.conf line 3", "cfg.yaml line 4, knobs.X".
pub fn source_text(s: &Source) -> String {
    match s {
        Source::ConfFile { path, line } => format!("{} line {line}", path.display()),
        Source::Yaml(y) => format!("{} line {}, {}", y.path.display(), y.line, y.key),
        other => other.to_string(),
    }
}
