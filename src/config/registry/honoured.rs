//! Which knobs rnccl acts on. A knob's NCCL facts live in the tables; whether rnccl's engine
//! honours it is rnccl's state, kept here in one list so it changes in one place as the engine
//! grows. The test below keeps the list true: every `"NCCL_*"`/`"RNCCL_*"` string literal in
//! `src/` (outside `src/config/`) and `cli/src/` must be listed here, and every listed knob must be
//! read by such a literal or by the config loader itself.

/// Knobs rnccl acts on, sorted by name.
pub static HONOURED: &[&str] = &[
    "NCCL_ALGO",
    "NCCL_BUFFSIZE",
    "NCCL_COMM_ID",
    "NCCL_CONF_FILE",
    "NCCL_CROSS_NIC",
    "NCCL_DEBUG",
    "NCCL_DEBUG_FILE",
    "NCCL_DEBUG_SUBSYS",
    "NCCL_GRAPH_DUMP_FILE",
    "NCCL_GRAPH_DUMP_FILE_RANK",
    "NCCL_GRAPH_FILE",
    "NCCL_HOSTID",
    "NCCL_IBVERBS_LIB",
    "NCCL_IB_ADDR_FAMILY",
    "NCCL_IB_ADDR_RANGE",
    "NCCL_IB_DISABLE",
    "NCCL_IB_GID_INDEX",
    "NCCL_IB_HCA",
    "NCCL_IB_MERGE_NICS",
    "NCCL_IB_PKEY",
    "NCCL_IB_QPS_PER_CONNECTION",
    "NCCL_IB_RETRY_CNT",
    "NCCL_IB_ROCE_VERSION_NUM",
    "NCCL_IB_ROUTABLE_FLID_GID_INDEX",
    "NCCL_IB_SL",
    "NCCL_IB_SPLIT_DATA_ON_QPS",
    "NCCL_IB_TC",
    "NCCL_IB_TIMEOUT",
    "NCCL_LL128_NTHREADS",
    "NCCL_LOCAL_REGISTER",
    "NCCL_MAX_CTAS",
    "NCCL_MAX_NCHANNELS",
    "NCCL_MIN_CTAS",
    "NCCL_MIN_NCHANNELS",
    "NCCL_MNNVL_RAIL_PER_HOST",
    "NCCL_MNNVL_SCATTER_NETS_ENABLE",
    "NCCL_NETDEVS_POLICY",
    "NCCL_NET_FORCE_MERGE",
    "NCCL_NET_GDR_LEVEL",
    "NCCL_NET_MERGE_LEVEL",
    "NCCL_NSOCKS_PERTHREAD",
    "NCCL_NTHREADS",
    "NCCL_NUM_RMA_CTX",
    "NCCL_NVB_DISABLE",
    "NCCL_P2P_DIRECT_DISABLE",
    "NCCL_P2P_DISABLE",
    "NCCL_P2P_LEVEL",
    "NCCL_PAT_ENABLE",
    "NCCL_PROTO",
    "NCCL_PXN_DISABLE",
    "NCCL_SHM_DISABLE",
    "NCCL_SOCKET_FAMILY",
    "NCCL_SOCKET_IFNAME",
    "NCCL_SOCKET_NTHREADS",
    "NCCL_SOCKET_RETRY_CNT",
    "NCCL_SOCKET_RETRY_SLEEP_MSEC",
    "NCCL_SYM_CTAS",
    "NCCL_SYM_KERNEL",
    "NCCL_TESTS_MIN_BW",
    "NCCL_TOPO_DUMP_FILE",
    "NCCL_TOPO_FILE",
    "NCCL_WIN_ENABLE",
    "RNCCL_BENCH_GPU",
    "RNCCL_BENCH_ID",
    "RNCCL_BENCH_NPROCS",
    "RNCCL_BENCH_PARENT",
    "RNCCL_BENCH_PROC",
    "RNCCL_BENCH_REPORT_FD",
    "RNCCL_BLESS",
    "RNCCL_CONFIG",
    "RNCCL_IB_FAKE",
    "RNCCL_KERNEL_CACHE",
    "RNCCL_REQUIRE_GPU",
    "RNCCL_SILENT_LINK",
    "RNCCL_SOCKET_CC",
    "RNCCL_STATS",
    "RNCCL_SYSTEM_CONF",
    "RNCCL_TIMEOUT",
];

#[cfg(test)]
mod tests {
    use super::HONOURED;
    use crate::config::load::LOADER_KNOBS;
    use std::collections::BTreeMap;
    use std::path::{Path, PathBuf};

    /// Every `"NCCL_..."` or `"RNCCL_..."` literal in the `.rs` files under `dir`, skipping
    /// `skip`, with the places it occurs.
    fn literals(dir: &Path, skip: &[PathBuf], out: &mut BTreeMap<String, Vec<String>>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if skip.iter().any(|s| path.starts_with(s)) {
                continue;
            }
            if path.is_dir() {
                literals(&path, skip, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                for (i, line) in text.lines().enumerate() {
                    for name in quoted_knob_names(line) {
                        out.entry(name)
                            .or_default()
                            .push(format!("{}:{}", path.display(), i + 1));
                    }
                }
            }
        }
    }

    fn quoted_knob_names(line: &str) -> Vec<String> {
        let mut names = Vec::new();
        let mut rest = line;
        while let Some(start) = rest.find('"') {
            let after = &rest[start + 1..];
            let len = after
                .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
                .unwrap_or(after.len());
            let word = &after[..len];
            if after[len..].starts_with('"')
                && (word.starts_with("NCCL_") || word.starts_with("RNCCL_"))
            {
                names.push(word.to_string());
            }
            rest = &after[len..];
        }
        names
    }

    #[test]
    fn honoured_list_matches_what_the_code_reads() {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let mut read = BTreeMap::new();
        // The registry itself and the knob analysis (env-explain) name knobs without reading
        // them.
        let skip = [root.join("src/config"), root.join("src/explain")];
        literals(&root.join("src"), &skip, &mut read);
        literals(&root.join("cli/src"), &skip, &mut read);
        for name in LOADER_KNOBS {
            read.entry(name.to_string())
                .or_default()
                .push("the config loader (src/config/load.rs)".into());
        }
        let mut problems = Vec::new();
        for (name, places) in &read {
            match crate::config::lookup(name) {
                None => problems.push(format!(
                    "{name} is read at {} but is not in the registry: add it to a table in src/config/registry/",
                    places.join(", ")
                )),
                Some(k) if !k.honoured() => problems.push(format!(
                    "{name} is read at {} but not marked honoured: add it to HONOURED in src/config/registry/honoured.rs",
                    places.join(", ")
                )),
                Some(_) => {}
            }
        }
        for name in HONOURED {
            if !read.contains_key(*name) {
                problems.push(format!(
                    "{name} is marked honoured but nothing in src/ or cli/src/ reads it: remove it from HONOURED"
                ));
            }
        }
        assert!(problems.is_empty(), "{}", problems.join("\n"));
        assert!(HONOURED.is_sorted(), "keep HONOURED sorted");
    }

    #[test]
    fn engine_reads_knobs_only_through_the_registry() {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let mut read = BTreeMap::new();
        let skip = [root.join("src/config"), root.join("src/explain")];
        literals(&root.join("src"), &skip, &mut read);
        for places in read.values() {
            for place in places {
                let (file, line) = place.rsplit_once(':').unwrap();
                let text = std::fs::read_to_string(file).unwrap();
                let line = text
                    .lines()
                    .nth(line.parse::<usize>().unwrap() - 1)
                    .unwrap();
                assert!(
                    !(line.contains("env::var") || line.contains("getenv")),
                    "{place} reads a knob straight from the environment; use crate::config::Config"
                );
            }
        }
    }

    #[test]
    fn literal_scanner_finds_quoted_names_only() {
        assert_eq!(
            quoted_knob_names(r#"cfg.int("NCCL_BUFFSIZE")? + x("RNCCL_TIMEOUT") // NCCL_ALGO"#),
            vec!["NCCL_BUFFSIZE", "RNCCL_TIMEOUT"]
        );
        assert!(quoted_knob_names(r#""NCCL_ lower""#).is_empty());
    }
}
