//! Checks on the source tree that keep the engine's structure from drifting back: one
//! definition per concept, plans that know nothing of transports, tags allocated in one place,
//! counters shareable across threads.

use std::path::{Path, PathBuf};

/// Every `.rs` file under `src/` with its text.
fn sources() -> Vec<(PathBuf, String)> {
    fn walk(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let text = std::fs::read_to_string(&p).unwrap();
                out.push((p, text));
            }
        }
    }
    let mut out = Vec::new();
    walk(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut out);
    assert!(out.len() > 50, "found {} source files", out.len());
    out
}

/// The files (relative to `src/`) whose code (not comments) contains `needle`.
fn files_with(needle: &str) -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut hits: Vec<String> = sources()
        .into_iter()
        .filter(|(_, text)| {
            text.lines()
                .map(str::trim_start)
                .filter(|l| !l.starts_with("//"))
                .any(|l| l.contains(needle))
        })
        .map(|(p, _)| p.strip_prefix(&root).unwrap().display().to_string())
        .collect();
    hits.sort();
    hits
}

#[test]
fn one_definition_per_concept() {
    for (def, home) in [
        ("enum Func ", "func.rs"),
        ("struct HcaPort ", "topo/detect/net.rs"),
        ("enum Severity ", "config/finding.rs"),
        ("struct Finding ", "config/finding.rs"),
        ("const MAX_CHANNELS", "conn.rs"),
        ("fn bus_factor(", "func.rs"),
        ("struct ConnKey ", "conn.rs"),
        ("const NSLOTS", "conn.rs"),
        ("struct ChannelBounds ", "graph/comm.rs"),
        ("struct ReduceSpec ", "device/spec.rs"),
        ("struct DevConn ", "exec/gpu/program.rs"),
        ("fn interp_kernel(", "device/cuda/compile/entry.rs"),
    ] {
        assert_eq!(
            files_with(def),
            vec![home.to_string()],
            "`{def}` is defined elsewhere"
        );
    }
    // One reader of the host's interfaces.
    assert_eq!(
        files_with("getifaddrs("),
        vec!["topo/detect/iface.rs".to_string()]
    );
}

#[test]
fn plans_know_nothing_of_transports_or_the_executor() {
    for dep in ["crate::transport", "crate::exec", "crate::comm"] {
        let users: Vec<String> = files_with(dep)
            .into_iter()
            .filter(|f| f.starts_with("coll/"))
            .collect();
        assert!(
            users.is_empty(),
            "{users:?} use {dep}: plans are data, run by the executor"
        );
    }
}

#[test]
fn bootstrap_tags_are_allocated_in_one_place() {
    assert_eq!(
        files_with("const KIND_SHIFT"),
        vec!["bootstrap/tags.rs".to_string()]
    );
    // Tags used to be literals such as `4 << 60` scattered over the modules that sent them.
    assert!(files_with("<< 60").is_empty(), "{:?}", files_with("<< 60"));
}

#[test]
fn counters_are_shareable_across_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<rnccl::stats::CommStats>();
    send_sync::<rnccl::stats::OpProgress>();
    for (p, text) in sources() {
        if p.components().any(|c| c.as_os_str() == "stats") {
            assert!(!text.contains("RefCell"), "{} holds a RefCell", p.display());
        }
    }
}

/// NVLink multicast objects (NVLS) can take a shared host's GPUs out of service: no source of
/// the library or its kernels may create or use them.
#[test]
fn nothing_creates_nvlink_multicast_objects() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut texts = sources();
    for e in std::fs::read_dir(root.join("kernels")).unwrap() {
        let p = e.unwrap().path();
        let text = std::fs::read_to_string(&p).unwrap();
        texts.push((p, text));
    }
    assert!(texts.iter().any(|(p, _)| p.ends_with("interp.cu")));
    for (p, text) in texts {
        for needle in ["cuMulticast", "multimem.", "CU_MEM_HANDLE_TYPE_FABRIC"] {
            assert!(
                !text.contains(needle),
                "{} mentions {needle}: rnccl never uses NVLink multicast",
                p.display()
            );
        }
    }
}
