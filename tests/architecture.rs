//! Checks on the source tree that keep the engine's structure from drifting back: the floors
//! modules keep (no module imports one above it, no cycle), one definition per concept, plans
//! that know nothing of transports, tags allocated in one place, counters shareable across
//! threads, no NVLink multicast.

use std::collections::{BTreeMap, BTreeSet};
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
        ("struct DevConn ", "device/cuda/abi.rs"),
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

/// The floors of `src/`, lowest first (DESIGN.md's order, with what the code taught: the
/// operating system's helpers, hashing and host memory on the ground floor; logging, knob
/// explanations and launchers below the engine that uses them; `ibcheck` with the other
/// diagnostics). A module may import its own floor's modules or lower ones, never a higher one,
/// and the imports between modules have no cycle.
const FLOORS: &[&[&str]] = &[
    &[
        "error", "dtype", "fp8", "func", "redop", "conn", "hash", "os", "mem",
    ],
    &["config", "version"],
    &["topo"],
    &["graph", "bootstrap", "ib", "stats"],
    &["coll", "device", "explain", "launch", "log"],
    &["transport"],
    &["exec"],
    &["status"],
    &["comm"],
    &["bench", "check", "ibcheck"],
];

/// The top-level module each `crate::…` path of `text`'s code names (comments and the unit
/// tests at a file's end left out: a test may reach anywhere), and the names that are not
/// modules (a crate-root re-export such as `crate::Error`, which hides where a type lives).
fn imports(text: &str, modules: &BTreeSet<&str>) -> (BTreeSet<String>, BTreeSet<String>) {
    let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or("");
    let (mut mods, mut other) = (BTreeSet::new(), BTreeSet::new());
    for line in code.lines().map(str::trim_start) {
        if line.starts_with("//") {
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            let after = &rest[at + "crate::".len()..];
            let len = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            let name = &after[..len];
            if modules.contains(name) {
                mods.insert(name.to_string());
            } else if !name.is_empty() {
                other.insert(name.to_string());
            }
            rest = &after[len..];
        }
    }
    (mods, other)
}

/// What is wrong with `edges` (module → the modules it imports) against `floors`: a module on
/// no floor, an import of a higher floor, a cycle.
fn layering_problems(
    edges: &BTreeMap<String, BTreeSet<String>>,
    floors: &[&[&str]],
) -> Vec<String> {
    let floor = |m: &str| floors.iter().position(|f| f.contains(&m));
    let mut problems = Vec::new();
    for (from, tos) in edges {
        let Some(f) = floor(from) else {
            problems.push(format!("src/{from} is on no floor: add it to FLOORS"));
            continue;
        };
        for to in tos {
            match floor(to) {
                Some(t) if t > f => problems.push(format!(
                    "{from} (floor {f}) imports {to} (floor {t}): no module imports one above it"
                )),
                None => problems.push(format!("src/{to} is on no floor: add it to FLOORS")),
                _ => {}
            }
        }
    }
    // A cycle among same-floor modules: follow the edges from each module.
    for start in edges.keys() {
        let mut seen = BTreeSet::new();
        let mut todo: Vec<&String> = edges[start].iter().collect();
        while let Some(m) = todo.pop() {
            if m == start {
                problems.push(format!("{start} imports itself through other modules"));
                break;
            }
            if seen.insert(m.clone()) {
                todo.extend(edges.get(m).into_iter().flatten());
            }
        }
    }
    problems.sort();
    problems.dedup();
    problems
}

/// The top-level modules of `src/` and what each imports.
fn module_edges() -> (BTreeMap<String, BTreeSet<String>>, Vec<String>) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut names: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "lib.rs")
        .map(|n| n.trim_end_matches(".rs").to_string())
        .collect();
    names.sort();
    names.dedup();
    let modules: BTreeSet<&str> = names.iter().map(String::as_str).collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut reexports = Vec::new();
    for (path, text) in sources() {
        let rel = path.strip_prefix(&root).unwrap();
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        let module = first.trim_end_matches(".rs").to_string();
        if module == "lib" {
            continue;
        }
        let (mods, other) = imports(&text, &modules);
        let e = edges.entry(module.clone()).or_default();
        e.extend(mods.into_iter().filter(|m| *m != module));
        for name in other {
            reexports.push(format!("{}: crate::{name}", rel.display()));
        }
    }
    (edges, reexports)
}

#[test]
fn no_module_imports_one_above_it() {
    let (edges, _) = module_edges();
    assert!(edges.len() > 20, "{edges:?}");
    let problems = layering_problems(&edges, FLOORS);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Inside the crate a type is named from the module it lives in: a crate-root re-export
/// (`crate::Error`) would hide an import from the floors check.
#[test]
fn the_crate_imports_its_own_items_from_their_modules() {
    let (_, reexports) = module_edges();
    assert!(reexports.is_empty(), "{}", reexports.join("\n"));
}

/// The checker catches what it is for: an upward import, a module on no floor, a cycle, and a
/// re-export path.
#[test]
fn the_floors_checker_finds_a_planted_upward_import() {
    let floors: &[&[&str]] = &[&["error"], &["config"], &["comm", "bench"]];
    let edge = |from: &str, tos: &[&str]| {
        (
            from.to_string(),
            tos.iter().map(|t| t.to_string()).collect::<BTreeSet<_>>(),
        )
    };
    let good: BTreeMap<_, _> = [
        edge("config", &["error"]),
        edge("bench", &["comm", "config"]),
    ]
    .into_iter()
    .collect();
    assert!(layering_problems(&good, floors).is_empty());
    let planted: BTreeMap<_, _> = [edge("config", &["error", "comm"])].into_iter().collect();
    let p = layering_problems(&planted, floors);
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(
        p[0].contains("config (floor 1) imports comm (floor 2)"),
        "{p:?}"
    );
    let cycle: BTreeMap<_, _> = [edge("comm", &["bench"]), edge("bench", &["comm"])]
        .into_iter()
        .collect();
    assert!(
        layering_problems(&cycle, floors)
            .iter()
            .any(|p| p.contains("imports itself")),
        "{cycle:?}"
    );
    let stray: BTreeMap<_, _> = [edge("shiny", &["error"])].into_iter().collect();
    assert!(layering_problems(&stray, floors)[0].contains("on no floor"));
    let modules: BTreeSet<&str> = ["config", "error"].into_iter().collect();
    let text = "use crate::config::Config;\n// crate::comm in a comment\nfn f() -> crate::Error {}\n\
                #[cfg(test)]\nmod tests {\n    use crate::comm::X;\n}\n";
    let (mods, other) = imports(text, &modules);
    assert_eq!(mods.into_iter().collect::<Vec<_>>(), ["config"]);
    assert_eq!(other.into_iter().collect::<Vec<_>>(), ["Error"]);
}

/// The GPU engine lives in `exec/gpu/` and its connections in `transport/gpu/`, not beside the
/// communicator's API; the GPU proxy reaches sockets only through the TCP transport's ends.
#[test]
fn the_gpu_engine_is_in_one_place() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let in_comm: Vec<String> = std::fs::read_dir(root.join("comm"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("gpu"))
        .collect();
    assert!(in_comm.is_empty(), "GPU files in comm/: {in_comm:?}");
    for needle in ["TcpStream", "socket2"] {
        let hits: Vec<String> = files_with(needle)
            .into_iter()
            .filter(|f| f.starts_with("transport/gpu"))
            .collect();
        assert!(
            hits.is_empty(),
            "{hits:?} name {needle}: the GPU proxy uses the TCP transport's ends (transport/tcp)"
        );
    }
}
