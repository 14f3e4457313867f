//! Checks on a setting's name and where it came from: unknown names (with did-you-mean), removed,
//! deprecated and inert knobs, risky categories, knobs of other programs, loader knobs that cannot
//! apply from where they were set, and conf-file habits NCCL does not share (quotes, `export`).

use crate::config::finding::Finding;
use crate::config::registry::{Category, KnobSpec, Origin, Status, did_you_mean};
use crate::config::{Setting, Source};

/// Findings about `name` as set by `setting` (`spec` is its registry entry, if any).
pub(crate) fn check(name: &str, setting: &Setting, spec: Option<&KnobSpec>) -> Vec<Finding> {
    let mut out = Vec::new();
    let from_file = matches!(setting.source, Source::ConfFile { .. });
    let raw = setting.raw.as_str();
    if raw.len() >= 2
        && ((raw.starts_with('"') && raw.ends_with('"'))
            || (raw.starts_with('\'') && raw.ends_with('\'')))
    {
        out.push(Finding::warning(
            "the value is in quotes, and NCCL keeps the quotes as part of it",
            "remove the quotes",
        ));
    }
    match spec {
        None => out.extend(unknown(name, from_file)),
        Some(k) => out.extend(known(k, &setting.source, raw)),
    }
    out
}

/// `NCCL_*` variables that are not knobs but that common environments set, with who sets them.
const CONTAINER_VARS: &[(&str, &str)] = &[(
    "NCCL_VERSION",
    "set by NVIDIA's CUDA container images to record the NCCL version installed in the image",
)];

fn unknown(name: &str, from_file: bool) -> Vec<Finding> {
    let upper = name.to_ascii_uppercase();
    let is_nccl = upper.starts_with("NCCL_") || upper.starts_with("RNCCL_");
    let reader = if upper.starts_with("RNCCL_") {
        "rnccl"
    } else {
        "NCCL"
    };
    if let Some(rest) = name.strip_prefix("export ") {
        return vec![Finding::error(
            format!(
                "NCCL conf files are not shell scripts: this line sets a variable named {name:?}, not {}",
                rest.trim()
            ),
            "drop the 'export '",
        )];
    }
    if name != name.trim() {
        return vec![Finding::error(
            format!(
                "the name has spaces around it, which NCCL keeps: it sets {name:?}, not {}",
                name.trim()
            ),
            "write NAME=VALUE with no spaces around '='",
        )];
    }
    if !is_nccl {
        let msg = if from_file {
            "not an NCCL setting; NCCL still exports it into the process environment"
        } else {
            "not an NCCL setting"
        };
        return vec![Finding::note(msg)];
    }
    if let Some((_, what)) = CONTAINER_VARS.iter().find(|(n, _)| *n == name) {
        return vec![Finding::note(format!("{what}; NCCL does not read it"))];
    }
    match did_you_mean(name).as_slice() {
        [] => vec![Finding::warning(
            if reader == "NCCL" {
                format!("NCCL {} does not read {name}", crate::config::NCCL_VERSION)
            } else {
                format!("rnccl does not read {name}")
            },
            "check the spelling, or whether a newer NCCL or a plugin reads it",
        )],
        close => vec![Finding::error(
            format!("{reader} does not read {name}, so this setting does nothing"),
            format!("did you mean {}?", close.join(" or ")),
        )],
    }
}

/// NCCL_DEBUG at WARN or below is fine in production: it only prints on failure.
fn quiet_debug_level(k: &KnobSpec, raw: &str) -> bool {
    k.name == "NCCL_DEBUG"
        && (raw.eq_ignore_ascii_case("WARN") || raw.eq_ignore_ascii_case("VERSION"))
}

fn known(k: &KnobSpec, source: &Source, raw: &str) -> Vec<Finding> {
    let mut out = Vec::new();
    match k.status {
        Status::Removed { last, instead } => {
            let hint = if instead.is_empty() {
                "remove it".to_string()
            } else {
                format!("use {instead} instead")
            };
            out.push(Finding::warning(
                format!(
                    "NCCL stopped reading {} after {last}: it has no effect",
                    k.name
                ),
                hint,
            ));
        }
        Status::Deprecated { since, instead } => out.push(Finding::warning(
            format!("deprecated since NCCL {since}"),
            if instead.is_empty() {
                String::new()
            } else {
                format!("use {instead} instead")
            },
        )),
        Status::Inert => out.push(Finding::warning(
            "NCCL declares this knob but nothing reads it: it has no effect",
            "remove it",
        )),
        Status::Active => {}
    }
    match k.category {
        Category::Dangerous => out.push(Finding::warning(
            "dangerous knob: it can hang jobs, corrupt results or hide faults",
            "keep it only with a known reason, and remove it after debugging",
        )),
        Category::Debug if !quiet_debug_level(k, raw) => out.push(Finding::note(
            "debug knob: meant for diagnosing problems, not for production",
        )),
        Category::Debug => {}
        Category::System | Category::Tuning => {}
    }
    match k.origin {
        Origin::Plugin(p) => out.push(Finding::note(format!(
            "read by NCCL's bundled {p} plugin, only when it is loaded"
        ))),
        Origin::NcclTests => out.push(Finding::note(
            "read by nccl-tests (and rnccl bench), not by NCCL",
        )),
        Origin::Core | Origin::Rnccl => {}
    }
    let in_file = matches!(source, Source::ConfFile { .. });
    let in_yaml = matches!(source, Source::Yaml(_));
    let no_effect = match k.name {
        "NCCL_CONF_FILE" if in_file => {
            Some("NCCL reads NCCL_CONF_FILE from the environment before any file")
        }
        "RNCCL_CONFIG" if in_file || in_yaml => {
            Some("the YAML config is chosen from the environment or --config")
        }
        "RNCCL_SYSTEM_CONF" if in_file => {
            Some("the system conf file is chosen before conf files are read")
        }
        _ => None,
    };
    if let Some(why) = no_effect {
        out.push(Finding::warning(
            format!("no effect from here: {why}"),
            "set it in the environment",
        ));
    }
    out
}
/// What `env-explain` says about the name of `setting` alone (unknown, misspelt, removed,
/// risky...), worst first; [`Config::validate`] logs these for names NCCL ignores.
pub(crate) fn name_findings(name: &str, setting: &Setting) -> Vec<Finding> {
    let mut f = check(name, setting, crate::config::lookup(name));
    f.sort_by_key(|f| std::cmp::Reverse(f.severity));
    f
}
