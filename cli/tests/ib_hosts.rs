//! `rnccl` on hosts without RDMA software, and the IB transport inside `rnccl bench`:
//!
//! - the binary does not link libibverbs, and with every libibverbs hidden (a private mount
//!   namespace binds /dev/null over the library files; needs root and `unshare`, as CI has)
//!   every command still runs, and `ibcheck` on a host whose sysfs shows HCAs (a fixture tree
//!   bound over /sys) says in one check that libibverbs is missing;
//! - `rnccl bench` over the simulated fabric (`RNCCL_IB_FAKE=1`) picks NET/IB and says so in its
//!   device lines and NCCL_DEBUG output, and NET/Socket with `NCCL_IB_DISABLE=1`.

mod common;

use std::process::Command;

use common::{ROOT, rnccl};

/// Whether this process's effective user is root (the second field of `Uid:` in
/// /proc/self/status).
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|u| u.split_whitespace().nth(1))
            == Some("0")
    })
}

#[test]
fn the_binary_does_not_link_libibverbs() {
    let bin = assert_cmd::cargo::cargo_bin("rnccl");
    let Ok(out) = Command::new("readelf").arg("-d").arg(&bin).output() else {
        eprintln!("skipped: readelf is not installed");
        return;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("(NEEDED)"), "{text}");
    assert!(!text.contains("libibverbs"), "{text}");
}

#[test]
fn every_command_runs_with_libibverbs_hidden() {
    if !is_root() || Command::new("unshare").arg("--help").output().is_err() {
        eprintln!("skipped: needs root and unshare (CI has both)");
        return;
    }
    let bin = assert_cmd::cargo::cargo_bin("rnccl");
    let bin = bin.display();
    let tmp = tempfile::tempdir().unwrap();
    let tmp = tmp.path().display();
    let script = format!(
        r#"set -u
mount --bind {ROOT}/tests/fixtures/sysfs/ib-ndr/sys /sys || exit 90
for f in $(find /lib /lib64 /usr/lib /usr/lib64 /usr/local/lib -name 'libibverbs.so*' 2>/dev/null); do
  mount --bind /dev/null "$f" || exit 91
done
run() {{ name=$1; shift; "$@" > {tmp}/$name.out 2>&1; echo "== $name rc=$?"; }}
run version {bin} --version
run ibcheck {bin} ibcheck
run ibcheck-json {bin} ibcheck --format json
run topo {bin} topo
run env-explain {bin} env-explain
run rings {bin} rings --topo-file {ROOT}/tests/fixtures/synthetic/dgx8x16.xml
run bench {bin} bench --cpu --ranks 2 -b 8 -e 4K
run completions {bin} completions bash
echo "== ibcheck-text"; cat {tmp}/ibcheck.out
"#
    );
    let out = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &script])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", "/nonexistent")
        .current_dir(ROOT)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let rc = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("== {name} rc=")))
            .unwrap_or_else(|| {
                panic!(
                    "{name} did not run: {text}\n{}",
                    String::from_utf8_lossy(&out.stderr)
                )
            })
            .to_string()
    };
    for name in [
        "version",
        "topo",
        "env-explain",
        "rings",
        "bench",
        "completions",
    ] {
        assert_eq!(
            rc(name),
            "0",
            "{name} failed with libibverbs hidden:\n{text}"
        );
    }
    // ibcheck runs, reports the adapters sysfs shows and says libibverbs is missing (an error:
    // NCCL cannot use them).
    assert_eq!(rc("ibcheck"), "2", "{text}");
    assert_eq!(rc("ibcheck-json"), "2", "{text}");
    assert!(text.contains("mlx5_0:1  ACTIVE"), "{text}");
    assert!(
        text.contains(
            "error   [verbs] host: libibverbs is not usable: libibverbs is not available"
        ),
        "{text}"
    );
}

fn bench_over(extra: &[(&str, &str)]) -> (String, String) {
    let out = rnccl()
        .env("RNCCL_IB_FAKE", "1")
        .env("NCCL_P2P_DISABLE", "1")
        .env("NCCL_SHM_DISABLE", "1")
        .env("NCCL_SOCKET_IFNAME", "lo")
        .env("NCCL_DEBUG", "INFO")
        .envs(extra.iter().copied())
        .args([
            "bench", "--cpu", "--ranks", "2", "-t", "2", "-b", "8", "-e", "256K", "-f", "8",
        ])
        .output()
        .unwrap();
    let (o, e) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(out.status.success(), "{o}\n{e}");
    assert!(o.contains("# Out of bounds values : 0 OK"), "{o}");
    (o, e)
}

#[test]
fn bench_shows_net_ib_in_device_lines_and_debug_output() {
    let (out, err) = bench_over(&[]);
    let devices: Vec<&str> = out.lines().filter(|l| l.starts_with("#  Rank ")).collect();
    assert_eq!(devices.len(), 2, "{out}");
    assert!(devices.iter().all(|l| l.ends_with(" via NET/IB")), "{out}");
    assert!(
        err.contains("NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB"),
        "{err}"
    );
    assert!(err.contains("] via NET/IB"), "{err}");
    let (out, err) = bench_over(&[("NCCL_IB_DISABLE", "1")]);
    assert!(
        out.lines()
            .filter(|l| l.starts_with("#  Rank "))
            .all(|l| l.ends_with(" via NET/Socket")),
        "{out}"
    );
    assert!(
        err.contains("NET/IB : disabled by NCCL_IB_DISABLE=1"),
        "{err}"
    );
    assert!(!err.contains("via NET/IB"), "{err}");
}
