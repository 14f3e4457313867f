//! The knob registry: one [`KnobSpec`] per name, as data. Every `NCCL_*` variable libnccl 2.30.7
//! reads (the 245 of `nccl-internals.md` §1.5), the ones NCCL removed or renamed, those read by
//! NCCL's bundled plugins and by nccl-tests, and rnccl's own. The engine, the CLI, the YAML loader
//! and `docs/knobs.md` all read this one table.

mod debug;
mod graph;
pub use graph::{BUFFSIZE_MAX, BUFFSIZE_MIN};
mod honoured;
mod ib;
mod launch;
mod memory;
mod nccl_tests;
mod net;
mod p2p;
mod plugins;
mod removed;
mod rnccl;
mod spec;

pub use honoured::HONOURED;
pub use spec::{
    Category, Choice, KnobSpec, KnobType, NCCL_VERSION, OLDEST_TAG, Origin, Status, Subsystem, Unit,
};

/// The field values every table entry starts from (`..BASE`).
const BASE: KnobSpec = KnobSpec {
    name: "",
    ty: KnobType::Int,
    default: "",
    auto: "",
    range: None,
    unit: Unit::None,
    subsystem: Subsystem::Rnccl,
    category: Category::Tuning,
    origin: Origin::Core,
    since: "",
    status: Status::Active,
    description: "",
    related: &[],
    source: "",
};

const GROUPS: [&[KnobSpec]; 11] = [
    debug::KNOBS,
    graph::KNOBS,
    ib::KNOBS,
    launch::KNOBS,
    memory::KNOBS,
    net::KNOBS,
    p2p::KNOBS,
    plugins::KNOBS,
    removed::KNOBS,
    nccl_tests::KNOBS,
    rnccl::KNOBS,
];

const COUNT: usize = {
    let mut n = 0;
    let mut g = 0;
    while g < GROUPS.len() {
        n += GROUPS[g].len();
        g += 1;
    }
    n
};

static ALL: [KnobSpec; COUNT] = {
    let mut all = [BASE; COUNT];
    let (mut g, mut n) = (0, 0);
    while g < GROUPS.len() {
        let mut i = 0;
        while i < GROUPS[g].len() {
            all[n] = GROUPS[g][i];
            n += 1;
            i += 1;
        }
        g += 1;
    }
    all
};

/// Every knob rnccl knows, grouped by the table file it is defined in.
pub static KNOBS: &[KnobSpec] = &ALL;

/// Finds a knob by exact name.
pub fn lookup(name: &str) -> Option<&'static KnobSpec> {
    KNOBS.iter().find(|k| k.name == name)
}

/// Every knob, sorted by name.
pub fn sorted() -> Vec<&'static KnobSpec> {
    let mut all: Vec<&KnobSpec> = KNOBS.iter().collect();
    all.sort_by_key(|k| k.name);
    all
}

/// Finds a knob the way a person names it on the command line: the exact name, or ignoring case,
/// or without the `NCCL_` prefix (`ib_timeout` finds `NCCL_IB_TIMEOUT`).
pub fn lookup_loose(name: &str) -> Option<&'static KnobSpec> {
    let upper = name.to_ascii_uppercase();
    lookup(name)
        .or_else(|| lookup(&upper))
        .or_else(|| lookup(&format!("NCCL_{upper}")))
}

/// The registered names closest to `name` (at most three, equally close): the did-you-mean list
/// for a misspelt knob. A name differing only in case always qualifies; otherwise the edit distance
/// (Damerau-Levenshtein, `strsim`) must be at most 3 and at most a quarter of the name's length.
pub fn did_you_mean(name: &str) -> Vec<&'static str> {
    let upper = name.trim().to_ascii_uppercase();
    let limit = (upper.len() / 4).clamp(1, 3);
    let mut scored: Vec<(usize, &'static str)> = KNOBS
        .iter()
        .filter(|k| k.name != name)
        .filter_map(|k| {
            let d = strsim::damerau_levenshtein(&upper, k.name);
            (d <= limit).then_some((d, k.name))
        })
        .collect();
    scored.sort();
    let best = scored.first().map_or(0, |s| s.0);
    scored
        .into_iter()
        .take_while(|(d, _)| *d == best)
        .take(3)
        .map(|(_, n)| n)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn names_are_unique_and_well_formed() {
        let mut seen = HashSet::new();
        for k in KNOBS {
            assert!(seen.insert(k.name), "{} is registered twice", k.name);
            assert!(
                k.name.starts_with("NCCL_") || k.name.starts_with("RNCCL_"),
                "{}",
                k.name
            );
            assert!(
                k.name
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'),
                "{}",
                k.name
            );
        }
    }

    #[test]
    fn loose_lookup_and_suggestions() {
        assert_eq!(lookup_loose("ib_timeout").unwrap().name, "NCCL_IB_TIMEOUT");
        assert_eq!(lookup_loose("nccl_debug").unwrap().name, "NCCL_DEBUG");
        assert!(lookup_loose("NOPE").is_none());
        assert_eq!(
            did_you_mean("NCCL_SOCKET_IFNAM"),
            vec!["NCCL_SOCKET_IFNAME"]
        );
        assert_eq!(did_you_mean("nccl_ib_hca"), vec!["NCCL_IB_HCA"]);
        assert!(did_you_mean("NCCL_COMPLETELY_DIFFERENT").is_empty());
    }
}
