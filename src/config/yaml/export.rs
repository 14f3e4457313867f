//! Writing configurations out: the effective configuration as a YAML config ([`to_yaml`]), and a
//! YAML config as shell `export` lines ([`to_env`]).

use super::YamlConfig;
use crate::config::parse::parse_c_int;
use crate::config::registry::{Status, lookup};
use crate::config::{Config, Source};

/// The effective configuration as a YAML config that loads back to the same values: every knob
/// set anywhere (environment, YAML, conf files, program) under `knobs`, each with its source as a
/// comment. Settings that cannot go in a YAML config (names that are not knobs, removed knobs,
/// `RNCCL_CONFIG`) are kept as comments so nothing is silently dropped.
pub fn to_yaml(cfg: &Config) -> String {
    let mut out = String::from(
        "# rnccl config: the effective NCCL settings, exported by `rnccl env-explain --export yaml`.\n\
         # Load it with `rnccl --config FILE ...` or RNCCL_CONFIG=FILE; see docs/config.md.\n",
    );
    if let Some(host) = cfg.hostname() {
        out.push_str(&format!("# Exported on host {host:?}.\n"));
    }
    let mut knobs = String::new();
    let mut skipped = String::new();
    for (name, setting) in cfg.settings() {
        let origin = setting.source.to_string();
        let why = match lookup(name) {
            None => Some("not a knob rnccl knows"),
            Some(k) if matches!(k.status, Status::Removed { .. }) => Some("removed from NCCL"),
            Some(k) if k.name == "RNCCL_CONFIG" => Some("names the config itself"),
            Some(_) => None,
        };
        match why {
            None => knobs.push_str(&format!(
                "  {name}: {}  # {origin}\n",
                yaml_value(name, &setting.raw)
            )),
            Some(why) => skipped.push_str(&format!(
                "#   {name}={}  # {origin}; {why}\n",
                setting.raw.escape_debug()
            )),
        }
    }
    if knobs.is_empty() {
        out.push_str("knobs: {}\n");
    } else {
        out.push_str("knobs:\n");
        out.push_str(&knobs);
    }
    if !skipped.is_empty() {
        out.push_str("# Also set, but not loadable from a YAML config:\n");
        out.push_str(&skipped);
    }
    out
}

/// A YAML scalar that reads back as exactly `raw`: a plain decimal for integer knobs written in
/// canonical decimal, a double-quoted string otherwise.
fn yaml_value(name: &str, raw: &str) -> String {
    let integer = lookup(name).is_some_and(|k| k.ty.is_integer());
    if integer && parse_c_int(raw).is_some_and(|v| v.to_string() == raw) {
        return raw.to_string();
    }
    let mut s = String::with_capacity(raw.len() + 2);
    s.push('"');
    for c in raw.chars() {
        match c {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => s.push_str(&format!("\\x{:02x}", c as u32)),
            '\u{85}' | '\u{2028}' | '\u{2029}' | '\u{feff}' => {
                s.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => s.push(c),
        }
    }
    s.push('"');
    s
}

/// A YAML config as shell `export` lines for `host` (global knobs overridden by the host
/// sections that match), one per knob, values single-quoted where the shell needs it.
pub fn to_env(yaml: &YamlConfig, host: &str) -> String {
    let mut out = format!(
        "# NCCL settings from {} for host {host:?}, written by `rnccl env-explain --export env`.\n",
        yaml.path.display()
    );
    let mut last: Vec<(String, String, String)> = Vec::new();
    for (name, setting) in yaml.settings_for(host) {
        let key = match &setting.source {
            Source::Yaml(y) => y.key.clone(),
            other => other.to_string(),
        };
        last.retain(|(n, _, _)| *n != name);
        last.push((name, setting.raw, key));
    }
    last.sort();
    for (name, raw, key) in last {
        out.push_str(&format!("export {name}={}  # {key}\n", shell_quote(&raw)));
    }
    out
}

/// `s` as one shell word: bare when it is made of safe characters, single-quoted otherwise.
fn shell_quote(s: &str) -> String {
    let safe = !s.is_empty()
        && !s.starts_with('=')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.,:/-+@%".contains(c));
    if safe {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(yaml_value("NCCL_IB_TIMEOUT", "22"), "22");
        assert_eq!(yaml_value("NCCL_IB_TIMEOUT", "010"), "\"010\"");
        assert_eq!(yaml_value("NCCL_SOCKET_IFNAME", "=eth0"), "\"=eth0\"");
        assert_eq!(yaml_value("NCCL_HOSTID", "a\"b\\c\td"), r#""a\"b\\c\x09d""#);
        assert_eq!(shell_quote("eth0"), "eth0");
        assert_eq!(shell_quote("=eth0"), "'=eth0'");
        assert_eq!(shell_quote("^docker,lo"), "'^docker,lo'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote(""), "''");
    }
}
