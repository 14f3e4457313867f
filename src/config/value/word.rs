//! Word-valued knobs: keywords, path levels (`src/graph/paths.cc:ncclGetLevel`), merge levels
//! (`src/graph/xml.h:kvConvertToInt`), flag lists (`src/include/param/parser_bitset.h`) and the
//! two policies with their own parsers (`src/graph/topo.cc`, `src/init.cc`).

use super::Reading;
use crate::config::finding::Finding;
use crate::config::registry::{Choice, KnobSpec};

/// NCCL's path types, nearest first (`src/graph/topo.h`, `topoPathTypeStr`), with meanings.
pub(crate) const PATH_TYPES: [(&str, &str); 10] = [
    ("LOC", "the same device"),
    ("NVL", "a direct NVLink"),
    ("NVB", "NVLink through an intermediate GPU"),
    ("C2C", "a chip-to-chip link to the CPU"),
    ("PIX", "at most one PCIe switch"),
    ("PXB", "several PCIe switches, without crossing the CPU"),
    ("P2C", "PCIe to a C2C-attached CPU"),
    ("PXN", "NVLink to a GPU next to the NIC, then PCIe"),
    ("PHB", "a PCIe host bridge (through the CPU)"),
    ("SYS", "the inter-socket link between CPUs (anything)"),
];

/// The legacy numbers 0..5 of `NCCL_P2P_LEVEL`/`NCCL_NET_GDR_LEVEL` (`levelsOldToNew`).
const LEGACY_LEVELS: [&str; 6] = ["LOC", "PIX", "PXB", "PHB", "SYS", "SYS"];

/// The names `NCCL_NET_MERGE_LEVEL` compares against, in NCCL's order (`nicPathKvList`).
const MERGE_LEVELS: [&str; 8] = ["LOC", "PORT", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS"];

fn did_you_mean(raw: &str, words: &[&str]) -> String {
    let best = words
        .iter()
        .map(|w| {
            (
                strsim::damerau_levenshtein(&raw.to_ascii_uppercase(), w),
                *w,
            )
        })
        .min();
    match best {
        Some((d, w)) if d <= 2 => format!(" (did you mean {w}?)"),
        _ => String::new(),
    }
}

/// A word from `choices`, compared case-insensitively (`strcasecmp`) or exactly (`strcmp`); an
/// unknown word leaves the default.
pub(super) fn read_keyword(spec: &KnobSpec, raw: &str, choices: &[Choice], exact: bool) -> Reading {
    let hit = |s: &str| {
        choices.iter().find(|c| {
            if exact {
                c.value == s
            } else {
                c.value.eq_ignore_ascii_case(s)
            }
        })
    };
    if let Some(c) = hit(raw) {
        return Reading::new(c.value, c.meaning);
    }
    let words: Vec<&str> = choices.iter().map(|c| c.value).collect();
    let fallback = Reading::new(spec.default_text(), "the default");
    if let Some(c) = choices
        .iter()
        .find(|c| c.value.eq_ignore_ascii_case(raw.trim()))
    {
        let (what, fix) = if c.value.eq_ignore_ascii_case(raw) {
            (
                "NCCL compares this word case-sensitively",
                format!("write {}", c.value),
            )
        } else {
            (
                "NCCL does not trim spaces around the word",
                format!("write {} without spaces", c.value),
            )
        };
        return fallback.with(Finding::error(
            format!("{what}, so {raw:?} is not recognised and the default is used"),
            fix,
        ));
    }
    fallback.with(Finding::error(
        format!(
            "{raw:?} is not one of {}{}: NCCL ignores it and uses the default",
            words.join(", "),
            did_you_mean(raw, &words)
        ),
        format!("use one of {}", words.join(", ")),
    ))
}

/// `NCCL_P2P_LEVEL` / `NCCL_NET_GDR_LEVEL`: an exact path name or a legacy number.
pub(super) fn read_path_level(raw: &str) -> Reading {
    if let Some((name, meaning)) = PATH_TYPES.iter().find(|(n, _)| *n == raw) {
        return Reading::new(*name, format!("up to {meaning}"));
    }
    if raw.starts_with(|c: char| c.is_ascii_digit()) {
        let n = crate::config::c_strtoll(raw).value.clamp(0, 5) as usize;
        let name = LEGACY_LEVELS[n];
        let meaning = PATH_TYPES
            .iter()
            .find(|(p, _)| *p == name)
            .map_or("", |p| p.1);
        return Reading::new(name, format!("up to {meaning}")).with(Finding::note(format!(
            "legacy number: NCCL reads {raw} as {name}"
        )));
    }
    let names: Vec<&str> = PATH_TYPES.iter().map(|p| p.0).collect();
    let hint = format!("use one of {}", names.join(", "));
    let fallback = Reading::new("auto", "NCCL's own choice");
    if let Some((name, _)) = PATH_TYPES
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(raw.trim()))
    {
        return fallback.with(Finding::error(
            format!("NCCL compares path names case-sensitively and untrimmed: {raw:?} is ignored and NCCL decides by itself"),
            format!("write {name}"),
        ));
    }
    fallback.with(Finding::error(
        format!(
            "{raw:?} is not a path type{}: NCCL ignores it and decides by itself",
            did_you_mean(raw, &names)
        ),
        hint,
    ))
}

/// `NCCL_NET_MERGE_LEVEL`: the first name the value starts with, else LOC (no merging).
pub(super) fn read_merge_level(raw: &str) -> Reading {
    match MERGE_LEVELS.iter().find(|n| raw.starts_with(*n)) {
        Some(n) if raw.len() == n.len() => Reading::new(*n, ""),
        Some(n) => Reading::new(*n, "").with(Finding::warning(
            format!(
                "NCCL compares only the first {} letters and reads {raw:?} as {n}",
                n.len()
            ),
            format!("write {n}"),
        )),
        None => Reading::new("LOC", "no automatic NIC fusion").with(Finding::error(
            format!(
                "{raw:?} does not start with any of {}{}: NCCL falls back to LOC and fuses nothing",
                MERGE_LEVELS.join(", "),
                did_you_mean(raw, &MERGE_LEVELS)
            ),
            format!("use one of {} (upper case)", MERGE_LEVELS.join(", ")),
        )),
    }
}

/// A comma list of names from `choices`, case-insensitive and trimmed, `^` meaning all except;
/// one unknown name makes NCCL reject the whole value.
pub(super) fn read_bitset(spec: &KnobSpec, raw: &str, choices: &[Choice]) -> Reading {
    let (invert, list) = match raw.strip_prefix('^') {
        Some(r) => (true, r),
        None => (false, raw),
    };
    let words: Vec<&str> = choices.iter().map(|c| c.value).collect();
    let mut on = Vec::new();
    for tok in list.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        match choices.iter().find(|c| c.value.eq_ignore_ascii_case(tok)) {
            Some(c) => on.push(c.value),
            None => {
                return Reading::new(spec.default_text(), "the default").with(Finding::error(
                    format!(
                        "{tok:?} is not one of {}{}: NCCL rejects the whole value and keeps the default",
                        words.join(", "),
                        did_you_mean(tok, &words)
                    ),
                    "fix or remove that name",
                ));
            }
        }
    }
    let all_names = |pred: &dyn Fn(&str) -> bool| -> Vec<&str> {
        words
            .iter()
            .copied()
            .filter(|w| *w != "ALL" && pred(w))
            .collect()
    };
    let effective = match (invert, on.contains(&"ALL")) {
        (false, true) => all_names(&|_| true),
        (false, false) => on.clone(),
        (true, true) => Vec::new(),
        (true, false) => all_names(&|w| !on.contains(&w)),
    };
    let meaning = if effective.is_empty() {
        "nothing".to_string()
    } else {
        String::new()
    };
    Reading::new(effective.join(","), meaning)
}

/// `NCCL_NETDEVS_POLICY`: `AUTO`, `ALL` or `MAX:<n>` (n > 0, `atoi`), any case; else AUTO.
pub(super) fn read_netdevs_policy(raw: &str) -> Reading {
    if raw.eq_ignore_ascii_case("AUTO") || raw.eq_ignore_ascii_case("ALL") {
        let word = raw.to_ascii_uppercase();
        let meaning = if word == "ALL" {
            "every GPU may use every NIC"
        } else {
            "NICs shared out by bandwidth"
        };
        return Reading::new(word, meaning);
    }
    if raw.len() >= 4 && raw[..4].eq_ignore_ascii_case("MAX:") {
        let n = atoi(&raw[4..]);
        if n > 0 {
            return Reading::new(format!("MAX:{n}"), format!("at most {n} NIC(s) per GPU"));
        }
    }
    Reading::new("AUTO", "NICs shared out by bandwidth").with(Finding::error(
        format!("{raw:?} is not AUTO, ALL or MAX:<n> with n > 0: NCCL uses AUTO"),
        "write AUTO, ALL or e.g. MAX:2",
    ))
}

/// `NCCL_CTA_POLICY`: a legacy digit (only the first character counts) or `|`-joined words.
pub(super) fn read_cta_policy(raw: &str) -> Reading {
    const WORDS: [&str; 3] = ["DEFAULT", "EFFICIENCY", "ZERO"];
    if let Some(first) = raw.chars().next().filter(char::is_ascii_digit) {
        return match first {
            '0'..='2' => {
                let w = WORDS[first as usize - '0' as usize];
                let r = Reading::new(w, "");
                if raw.len() > 1 {
                    r.with(Finding::warning(
                        format!(
                            "NCCL reads only the first digit of a legacy value: {raw:?} means {w}"
                        ),
                        format!("write {w}"),
                    ))
                } else {
                    r.with(Finding::note(format!("legacy digit: {w}")))
                }
            }
            _ => Reading::new("DEFAULT", "").with(Finding::error(
                format!("legacy values are 0, 1 and 2: NCCL ignores {raw:?} and uses DEFAULT"),
                "write DEFAULT, EFFICIENCY or ZERO",
            )),
        };
    }
    let mut chosen: Vec<&str> = Vec::new();
    let mut findings = Vec::new();
    for tok in raw.split('|').filter(|t| !t.is_empty()) {
        match WORDS.iter().find(|w| w.eq_ignore_ascii_case(tok)) {
            Some(w) if !chosen.contains(w) => chosen.push(w),
            Some(_) => {}
            None => findings.push(Finding::warning(
                format!("{tok:?} is not DEFAULT, EFFICIENCY or ZERO: NCCL skips it"),
                "remove it",
            )),
        }
    }
    if chosen.is_empty() {
        return Reading::new("DEFAULT", "").with(Finding::error(
            format!("no valid policy in {raw:?}: NCCL uses DEFAULT"),
            "write DEFAULT, EFFICIENCY or ZERO, joined with '|'",
        ));
    }
    if chosen.contains(&"ZERO") && chosen.contains(&"EFFICIENCY") {
        chosen.retain(|w| *w != "EFFICIENCY");
        findings.push(Finding::warning(
            "ZERO and EFFICIENCY together: NCCL drops EFFICIENCY",
            "",
        ));
    }
    let mut r = Reading::new(chosen.join("|"), "");
    r.findings = findings;
    r
}

/// C `atoi`: optional white space and sign, then decimal digits; anything else stops it.
fn atoi(s: &str) -> i64 {
    let t = s.trim_start();
    let (neg, t) = match t.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let digits: String = t.chars().take_while(char::is_ascii_digit).collect();
    let v = digits.parse::<i64>().unwrap_or(0);
    if neg { -v } else { v }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::finding::Severity;
    use crate::config::lookup;

    #[test]
    fn path_levels() {
        assert_eq!(read_path_level("NVL").effective, "NVL");
        let r = read_path_level("nvl");
        assert_eq!(
            (r.effective.as_str(), r.findings[0].severity),
            ("auto", Severity::Error)
        );
        assert_eq!(read_path_level("2").effective, "PXB");
        assert_eq!(read_path_level("9").effective, "SYS");
    }

    #[test]
    fn keywords_bitsets_and_policies() {
        let debug = lookup("NCCL_DEBUG").unwrap();
        assert_eq!(
            read_keyword(debug, "info", debug.ty.choices(), false).effective,
            "INFO"
        );
        let r = read_keyword(debug, "INFOO", debug.ty.choices(), false);
        assert!(r.findings[0].message.contains("did you mean INFO"), "{r:?}");
        let fam = lookup("NCCL_SOCKET_FAMILY").unwrap();
        let r = read_keyword(fam, "af_inet", fam.ty.choices(), true);
        assert!(r.findings[0].message.contains("case-sensitively"), "{r:?}");

        let subsys = lookup("NCCL_DEBUG_SUBSYS").unwrap();
        assert_eq!(
            read_bitset(subsys, "init, net", subsys.ty.choices()).effective,
            "INIT,NET"
        );
        let r = read_bitset(subsys, "^INIT", subsys.ty.choices());
        assert!(
            !r.effective.contains("INIT,") && r.effective.contains("COLL"),
            "{r:?}"
        );
        let r = read_bitset(subsys, "INIT,NETT", subsys.ty.choices());
        assert_eq!(r.effective, "INIT,BOOTSTRAP,ENV");

        assert_eq!(read_netdevs_policy("max:2").effective, "MAX:2");
        assert_eq!(read_netdevs_policy("MAX:0").effective, "AUTO");
        assert_eq!(read_cta_policy("10").effective, "EFFICIENCY");
        assert_eq!(read_cta_policy("zero|efficiency").effective, "ZERO");
        assert_eq!(read_merge_level("PIXX").effective, "PIX");
        assert_eq!(read_merge_level("pix").effective, "LOC");
    }
}
