//! The registry as data: complete against NCCL's knob table, every entry filled in, the generated
//! reference current, suggestions for misspelt names.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rnccl::config::{
    KNOBS, KnobType, Origin, Status, Subsystem, did_you_mean, docs, lookup, value,
};

/// NCCL's knob table (name, type, default, subsystem, meaning, source line of every `NCCL_*`
/// variable NCCL 2.28 and its plugins read, compiled from NVIDIA/nccl's sources for the
/// project's reference report), kept in the repository.
fn knob_table() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nccl-knobs.tsv")
}

#[test]
fn every_entry_is_filled_in() {
    for k in KNOBS {
        assert!(
            k.description.len() > 20,
            "{}: description too short",
            k.name
        );
        assert!(
            k.description.ends_with('.'),
            "{}: description should be a sentence",
            k.name
        );
        assert!(!k.source.is_empty(), "{}: no source", k.name);
        assert!(
            !k.ty.short_name().is_empty() && !k.ty.syntax().is_empty(),
            "{}",
            k.name
        );
        assert!(
            !k.default.is_empty()
                || !k.auto.is_empty()
                || !k.ty.is_integer()
                || matches!(k.status, Status::Removed { .. }),
            "{}: an integer knob with neither a default nor an auto value",
            k.name
        );
        if k.origin == Origin::Core {
            assert!(
                !k.since.is_empty(),
                "{}: core knob without a version",
                k.name
            );
        }
        for r in k.related {
            assert!(
                lookup(r).is_some(),
                "{}: related knob {r} is not registered",
                k.name
            );
        }
        if let Status::Removed { instead, .. } | Status::Deprecated { instead, .. } = k.status {
            assert!(
                instead.is_empty() || lookup(instead).is_some(),
                "{}: replacement {instead} unknown",
                k.name
            );
        }
        if let Some((lo, hi)) = k.range {
            assert!(lo <= hi && k.ty.is_integer(), "{}: bad range", k.name);
        }
        if !k.default.is_empty() {
            let r = value::read(k, k.default);
            assert!(
                !r.has_error(),
                "{}: its own default {:?} reads with an error: {:?}",
                k.name,
                k.default,
                r.findings
            );
        }
    }
}

#[test]
fn counts_by_origin() {
    let core = KNOBS
        .iter()
        .filter(|k| k.origin == Origin::Core && !matches!(k.status, Status::Removed { .. }))
        .count();
    let removed = KNOBS
        .iter()
        .filter(|k| matches!(k.status, Status::Removed { .. }))
        .count();
    let plugins = KNOBS
        .iter()
        .filter(|k| matches!(k.origin, Origin::Plugin(_)))
        .count();
    let tests = KNOBS
        .iter()
        .filter(|k| k.origin == Origin::NcclTests)
        .count();
    let own = KNOBS.iter().filter(|k| k.origin == Origin::Rnccl).count();
    assert_eq!((core, plugins, tests, own), (245, 32, 8, 16));
    assert!(removed >= 6, "{removed}");
    assert!(
        KNOBS
            .iter()
            .all(|k| (k.subsystem == Subsystem::Rnccl) == (k.origin == Origin::Rnccl))
    );
}

/// Normalises a default as the reference table writes it to rnccl's spelling: "-2 => 4194304"
/// and "-2 (auto)" are "-2", "unset ..." and "auto ..." are unset (""), INT64_MAX is spelled out,
/// quotes around a string default are dropped.
fn tsv_default(d: &str) -> String {
    let head = d
        .split(" =>")
        .next()
        .unwrap()
        .split(" (")
        .next()
        .unwrap()
        .trim();
    match head {
        "unset" | "auto" | "-" | "plugin default" => String::new(),
        "INT64_MAX" => i64::MAX.to_string(),
        h => h.trim_matches('\'').to_string(),
    }
}

#[test]
fn matches_the_reference_table() {
    let tsv = knob_table();
    let text = std::fs::read_to_string(&tsv)
        .unwrap_or_else(|e| panic!("NCCL's knob table {}: {e}", tsv.display()));
    let mut rows: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for line in text.lines().skip(1) {
        let cols: Vec<&str> = line.split('\t').collect();
        rows.insert(cols[0], cols);
    }
    let mut problems = Vec::new();
    for (name, cols) in &rows {
        let (ty, default, group) = (cols[1], cols[2], cols[3]);
        let Some(k) = lookup(name) else {
            problems.push(format!("{name}: in the reference table but not registered"));
            continue;
        };
        let core = !group.starts_with("PLUGIN-EXT") && group != "REMOVED" && group != "NCCL_TESTS";
        if core {
            let want = tsv_default(default);
            let have = if k.default == "false" {
                "false"
            } else {
                k.default
            };
            if want != have {
                problems.push(format!(
                    "{name}: default {have:?}, reference says {default:?}"
                ));
            }
            if k.origin != Origin::Core || matches!(k.status, Status::Removed { .. }) {
                problems.push(format!("{name}: should be an active core knob"));
            }
            if ty == "bool" && !(k.ty.is_switch() || matches!(k.ty, KnobType::Choice(_))) {
                problems.push(format!(
                    "{name}: the reference says bool, registry says {}",
                    k.ty.short_name()
                ));
            }
        }
        match group {
            "REMOVED" if !matches!(k.status, Status::Removed { .. }) => {
                problems.push(format!("{name}: should be removed"))
            }
            "NCCL_TESTS" if k.origin != Origin::NcclTests => {
                problems.push(format!("{name}: should be an nccl-tests knob"))
            }
            g if g.starts_with("PLUGIN-EXT") && !matches!(k.origin, Origin::Plugin(_)) => {
                problems.push(format!("{name}: should be a plugin knob"))
            }
            _ => {}
        }
    }
    let core_rows = rows
        .values()
        .filter(|c| !c[3].starts_with("PLUGIN-EXT") && c[3] != "REMOVED" && c[3] != "NCCL_TESTS")
        .count();
    assert_eq!(core_rows, 245, "the reference table changed shape");
    for k in KNOBS
        .iter()
        .filter(|k| k.origin == Origin::Core && !matches!(k.status, Status::Removed { .. }))
    {
        if !rows.contains_key(k.name) {
            problems.push(format!(
                "{}: registered as an active core knob but not in the reference",
                k.name
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn suggestions_for_misspelt_names() {
    assert_eq!(did_you_mean("NCCL_SOCKET_IFNAM"), ["NCCL_SOCKET_IFNAME"]);
    assert_eq!(did_you_mean("NCCL_IB_TIMEOUTS"), ["NCCL_IB_TIMEOUT"]);
    assert_eq!(
        did_you_mean("NCCL_DEBUG_SUBSYSTEM").first(),
        Some(&"NCCL_DEBUG_SUBSYS")
    );
    assert_eq!(did_you_mean("nccl_p2p_level"), ["NCCL_P2P_LEVEL"]);
    assert!(did_you_mean("NCCL_FOO_BAR_BAZ_QUX").is_empty());
}

#[test]
fn generated_reference_is_current() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/knobs.md");
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == docs::knobs_markdown(),
        "docs/knobs.md is out of date; regenerate it with\n  cargo run -p rnccl-cli -- env-explain --all --format markdown > docs/knobs.md"
    );
}
