//! rnccl's YAML config: typed values for any knob, plus per-host sections. The format (see
//! `docs/config.md`):
//!
//! ```yaml
//! knobs:                      # applies on every host
//!   NCCL_IB_TIMEOUT: 22
//!   NCCL_P2P_DISABLE: false
//! hosts:                      # host-name glob -> knobs; later sections win
//!   "gpu-a*":
//!     NCCL_SOCKET_IFNAME: "=ens1f0"
//!     NCCL_IB_HCA: [mlx5_0, mlx5_1]
//! ```
//!
//! Parsed with serde-saphyr under a tight budget, so hostile input (deep nesting, alias bombs,
//! huge files) is refused with a clear error instead of exhausting memory.

mod export;
mod scalar;

use std::path::{Path, PathBuf};

use glob::{MatchOptions, Pattern};
use indexmap::IndexMap;
use serde::Deserialize;
use serde_saphyr::Spanned;

pub use export::{to_env, to_yaml};
use scalar::YamlValue;

use super::registry::{KnobSpec, Status, did_you_mean, lookup};
use super::{ConfigError, Setting, Source, YamlKey};

/// Largest YAML config rnccl reads.
const MAX_BYTES: u64 = 1 << 20;
/// Deepest nesting allowed; the format needs 4 levels.
const MAX_DEPTH: usize = 16;

/// One knob value of a YAML config, already converted to the text NCCL would read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct YamlKnob {
    /// The knob.
    pub name: String,
    /// The value as NCCL text (`true` becomes `1`, lists are joined).
    pub raw: String,
    /// 1-based line of the value.
    pub line: usize,
}

/// A `hosts` section: knobs for the hosts whose name matches a glob.
#[derive(Debug, Clone)]
pub struct HostSection {
    /// The glob as written (`gpu-a*`, `node[0-9]`); matched case-insensitively against the full
    /// host name and against its first label.
    pub pattern: String,
    matcher: Pattern,
    /// The knobs, in file order.
    pub knobs: Vec<YamlKnob>,
}

impl HostSection {
    /// True when this section applies to `host`.
    pub fn matches(&self, host: &str) -> bool {
        let short = host.split('.').next().unwrap_or(host);
        [host, short]
            .iter()
            .any(|name| self.matcher.matches_with(name, HOST_MATCH))
    }
}

/// Host names match ignoring case; `*` and `?` cross dots (a host name has no path
/// separators, so the options about `/` and leading dots change nothing).
const HOST_MATCH: MatchOptions = MatchOptions {
    case_sensitive: false,
    require_literal_separator: false,
    require_literal_leading_dot: false,
};

/// `pattern` as a host-name glob: `*`, `?`, `[a-z]` and `[!a-z]` classes.
///
/// Errors: a message saying what is wrong, for a pattern the glob crate refuses (an unclosed
/// `[`), and for the syntax of other glob dialects that would otherwise be taken literally and
/// silently match nothing, or the wrong hosts: `{a,b}` alternatives (no host name holds a
/// brace) and `[^...]` classes (which the glob crate reads as holding `^`).
fn host_glob(pattern: &str) -> Result<Pattern, String> {
    if pattern.contains(['{', '}']) {
        return Err(
            "{a,b} alternatives are not supported; give each pattern its own section".into(),
        );
    }
    if pattern.contains("[^") {
        return Err("write a negated class as [!...], not [^...]".into());
    }
    Pattern::new(pattern).map_err(|e| e.to_string())
}

/// A parsed YAML config.
#[derive(Debug, Clone)]
pub struct YamlConfig {
    /// The file it came from.
    pub path: PathBuf,
    /// The global `knobs`, in file order.
    pub knobs: Vec<YamlKnob>,
    /// The `hosts` sections, in file order.
    pub hosts: Vec<HostSection>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    knobs: IndexMap<String, Spanned<YamlValue>>,
    #[serde(default)]
    hosts: IndexMap<String, IndexMap<String, Spanned<YamlValue>>>,
}

impl YamlConfig {
    /// Reads and checks a YAML config file.
    ///
    /// Errors: [`ConfigError::File`] when it cannot be read or is over 1 MiB;
    /// [`ConfigError::Yaml`] as for [`YamlConfig::parse`].
    pub fn read(path: &Path) -> Result<YamlConfig, ConfigError> {
        let file_err = |message: String| ConfigError::File {
            path: path.to_path_buf(),
            message,
        };
        let meta = std::fs::metadata(path)
            .map_err(|e| file_err(format!("{e}; check the YAML config's path")))?;
        if meta.len() > MAX_BYTES {
            return Err(file_err(format!(
                "{} bytes is more than a config needs (limit {MAX_BYTES}); is it the right file?",
                meta.len()
            )));
        }
        let text = std::fs::read_to_string(path)
            .map_err(|e| file_err(format!("{e}; a YAML config must be UTF-8 text")))?;
        YamlConfig::parse(&text, path)
    }

    /// Parses YAML text; `path` is only used in messages and provenance.
    ///
    /// Errors: [`ConfigError::Yaml`] naming the line and saying what to fix when the text is not
    /// YAML, nests deeper than 16 levels, expands too many aliases, has a key other than `knobs`
    /// and `hosts`, names something that is not a knob (with a did-you-mean), sets a removed knob,
    /// has a bad host glob, or gives a value of the wrong YAML type (a boolean for a number...).
    pub fn parse(text: &str, path: &Path) -> Result<YamlConfig, ConfigError> {
        let options = serde_saphyr::options! {
            budget: serde_saphyr::budget! {
                max_depth: MAX_DEPTH,
                flow_nesting_limit: MAX_DEPTH,
                max_nodes: 100_000,
                max_aliases: 1_000,
                max_anchors: 1_000,
                max_total_scalar_bytes: MAX_BYTES as usize,
            },
            alias_limits: serde_saphyr::alias_limits! {
                max_total_replayed_events: 10_000,
                max_replay_stack_depth: 8,
                max_alias_expansions_per_anchor: 100,
            },
            leading_zero_numbers_as_strings: true,
            underscored_numbers_as_strings: true,
            with_snippet: false,
        };
        let raw: RawFile =
            serde_saphyr::from_str_with_options(text, options).map_err(|e| ConfigError::Yaml {
                path: path.to_path_buf(),
                line: e.location().map(|l| l.line() as usize).filter(|l| *l > 0),
                message: match original(&e) {
                    serde_saphyr::Error::DuplicateMappingKey { key, location } => {
                        duplicate_key(text, key.as_deref(), location.line() as usize)
                    }
                    _ => describe_parse_error(&e.to_string()),
                },
            })?;
        let mut cfg = YamlConfig {
            path: path.to_path_buf(),
            knobs: Vec::new(),
            hosts: Vec::new(),
        };
        for (name, v) in raw.knobs {
            cfg.knobs
                .push(convert(path, &format!("knobs.{name}"), &name, v)?);
        }
        for (pattern, knobs) in raw.hosts {
            let matcher = host_glob(&pattern).map_err(|e| ConfigError::Yaml {
                path: path.to_path_buf(),
                line: knobs.values().next().map(|v| v.referenced.line() as usize),
                message: format!(
                    "hosts: {pattern:?} is not a valid host-name glob ({e}); use *, ? and [a-z] or [!a-z] classes"
                ),
            })?;
            let mut section = HostSection {
                pattern: pattern.clone(),
                matcher,
                knobs: Vec::new(),
            };
            for (name, v) in knobs {
                let key = format!("hosts.{pattern:?}.{name}");
                section.knobs.push(convert(path, &key, &name, v)?);
            }
            cfg.hosts.push(section);
        }
        Ok(cfg)
    }

    /// The sections that apply to `host`, in file order.
    pub fn sections_for<'a>(&'a self, host: &'a str) -> impl Iterator<Item = &'a HostSection> + 'a {
        self.hosts.iter().filter(move |s| s.matches(host))
    }

    /// The settings this file gives `host`, in the order they apply (global knobs, then each
    /// matching host section); for a name given twice, the later one wins.
    pub fn settings_for(&self, host: &str) -> Vec<(String, Setting)> {
        let global = self.knobs.iter().map(|k| (k, format!("knobs.{}", k.name)));
        let sections = self.sections_for(host).flat_map(|s| {
            s.knobs
                .iter()
                .map(move |k| (k, format!("hosts.{:?}.{}", s.pattern, k.name)))
        });
        global
            .chain(sections)
            .map(|(k, key)| {
                let source = Source::Yaml(Box::new(YamlKey {
                    path: self.path.clone(),
                    line: k.line,
                    key,
                }));
                (
                    k.name.clone(),
                    Setting {
                        raw: k.raw.clone(),
                        source,
                    },
                )
            })
            .collect()
    }
}

/// The error under serde-saphyr's snippet and alias wrappers.
fn original(mut e: &serde_saphyr::Error) -> &serde_saphyr::Error {
    while let serde_saphyr::Error::WithSnippet { error, .. }
    | serde_saphyr::Error::AliasError { error, .. } = e
    {
        e = error;
    }
    e
}

/// The message for `key` given a second time at 1-based `line` of `text`: which key, where it
/// was first given (the nearest earlier line at the same indentation within the same mapping),
/// and what to do for a section, a host glob or a knob.
fn duplicate_key(text: &str, key: Option<&str>, line: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let indent = |l: &str| l.len() - l.trim_start().len();
    let Some(key) = key else {
        return "a key appears twice in one mapping; keep one of the two".to_string();
    };
    let here = lines.get(line.saturating_sub(1)).map_or(0, |l| indent(l));
    let names_key = |l: &str| {
        let t = l.trim_start();
        [
            format!("{key}:"),
            format!("\"{key}\":"),
            format!("'{key}':"),
        ]
        .iter()
        .any(|k| t.starts_with(k.as_str()))
    };
    let mut first = None;
    for (i, l) in lines.iter().enumerate().take(line.saturating_sub(1)).rev() {
        if l.trim().is_empty() || l.trim_start().starts_with('#') {
            continue;
        }
        if indent(l) < here {
            break;
        }
        if indent(l) == here && names_key(l) {
            first = Some(i + 1);
        }
    }
    let at = first.map_or_else(String::new, |f| format!(" (first at line {f})"));
    match key {
        "knobs" | "hosts" => {
            format!("'{key}' is given twice{at}: merge the two sections into one")
        }
        k if lookup(k).is_some() => format!(
            "{k} is given twice in one mapping{at}: keep one value (for a value on some hosts only, put it in a 'hosts' section)"
        ),
        k => format!("{k:?} is given twice in one mapping{at}: merge the two entries into one"),
    }
}

/// Turns serde-saphyr's message into one that says what to do.
fn describe_parse_error(msg: &str) -> String {
    let lower = msg.to_ascii_lowercase();
    let what = if lower.contains("depth")
        || lower.contains("nesting")
        || lower.contains("recursion")
    {
        format!(
            "nests deeper than {MAX_DEPTH} levels; a config needs 4 (knobs or hosts, host, knob, list)"
        )
    } else if lower.contains("alias") || lower.contains("anchor") || lower.contains("budget") {
        "expands more aliases or nodes than a config needs (possibly a YAML bomb); write the values out"
            .to_string()
    } else if lower.contains("expected mapping") || lower.contains("invalid type") {
        "has the wrong shape: the file, 'knobs' and each host under 'hosts' must be mappings of NAME: value"
            .to_string()
    } else if lower.contains("unknown field") {
        "only the keys 'knobs' and 'hosts' may appear at the top level".to_string()
    } else {
        "is not a valid rnccl config; see docs/config.md for the format".to_string()
    };
    format!("{what} ({msg})")
}

/// Checks one YAML knob: the name must be a current knob and the YAML value must fit its type
/// (a boolean only for switches, a list only for list-valued knobs...). What NCCL then makes of
/// the text is checked by `env-explain`, as for every other source, so that any effective
/// configuration can be exported and loaded back.
fn convert(
    path: &Path,
    key: &str,
    name: &str,
    v: Spanned<YamlValue>,
) -> Result<YamlKnob, ConfigError> {
    let line = v.referenced.line() as usize;
    let err = |message: String| ConfigError::Yaml {
        path: path.to_path_buf(),
        line: Some(line),
        message,
    };
    let spec: &KnobSpec = match lookup(name) {
        Some(s) => s,
        None => {
            let close = did_you_mean(name);
            let hint = match close.as_slice() {
                [] => "remove it, or check the spelling against the knob list (docs/knobs.md)"
                    .to_string(),
                names => format!("did you mean {}?", names.join(" or ")),
            };
            return Err(err(format!(
                "{key}: {name} is not a knob rnccl knows; {hint}"
            )));
        }
    };
    if let Status::Removed { last, instead } = spec.status {
        let hint = if instead.is_empty() {
            "remove it".to_string()
        } else {
            format!("use {instead}")
        };
        return Err(err(format!(
            "{key}: NCCL stopped reading {name} after {last}; {hint}"
        )));
    }
    if name == "RNCCL_CONFIG" {
        return Err(err(format!(
            "{key}: a config cannot name another config; remove it"
        )));
    }
    let raw = v
        .value
        .to_nccl_text(spec)
        .map_err(|m| err(format!("{key}: {m}")))?;
    Ok(YamlKnob {
        name: name.to_string(),
        raw,
        line,
    })
}
