//! One verdict per knob value: for every knob in the registry and a corpus of values (good,
//! bogus, out of range, empty, plus random text), the engine ([`Config::validate`] and the typed
//! accessors) refuses a value exactly when `rnccl env-explain` calls its reading an error.

use proptest::prelude::*;
use rnccl::config::{Config, KNOBS, KnobSpec, KnobType, Source, Status};
use rnccl::explain::HostDevices;
use rnccl::explain::explain;

/// Values that hit every parser's edges: integers in C's bases, out of range, with units and
/// spaces, switch words, keywords in both cases, lists, paths, addresses.
const CORPUS: &[&str] = &[
    "",
    "0",
    "1",
    "2",
    "-1",
    "-2",
    "-5",
    "7",
    "64",
    "65",
    "512",
    "1e9",
    "010",
    "08",
    "0x10",
    " 7",
    "7 ",
    "4M",
    "99999999999999999999",
    "bogus",
    "true",
    "TRUE",
    "t",
    "yes",
    "Ring",
    "^Tree",
    "LL128",
    "AllReduce:Tree;Broadcast:Ring",
    "Bogus:Ring",
    "INFO",
    "info",
    "verbose",
    "INIT,NET",
    "^INIT",
    "INIT,BOGUS",
    "eth0",
    "=eth0",
    "^lo,docker",
    "mlx5_0:1",
    "mlx5_0:x",
    "host:1234",
    "[::1]:99",
    ":99",
    "0-3,8",
    "1 2 3",
    "~/file",
    "/tmp/file",
    "AF_INET",
    "af_inet",
    "NVL",
    "nvl",
    "SYS",
    "3.5",
    "AUTO",
    "MAX:2",
    "EFFICIENCY|ZERO",
];

fn config(name: &str, value: &str) -> Config {
    let mut c = Config::defaults();
    c.set(name, value, Source::Env);
    c
}

/// What `env-explain` says of the value: whether its reading holds an error (findings about the
/// name or about this host are not about the value).
fn explain_says_error(cfg: &Config, name: &str, host: &HostDevices) -> bool {
    let report = explain(cfg, host);
    let item = report.settings.iter().find(|s| s.name == name).unwrap();
    item.reading.as_ref().is_some_and(|r| r.has_error())
}

/// What the engine's typed accessor for the knob's type says.
fn accessor_says_error(cfg: &Config, k: &KnobSpec) -> bool {
    if k.ty.is_integer() || k.ty.is_switch() {
        let int = cfg.int(k.name).is_err();
        assert_eq!(
            int,
            cfg.flag(k.name).is_err(),
            "{}: int and flag differ",
            k.name
        );
        int
    } else if k.ty == KnobType::Float {
        cfg.float(k.name).is_err()
    } else {
        cfg.text(k.name).is_err()
    }
}

fn check(k: &KnobSpec, value: &str, host: &HostDevices) {
    let cfg = config(k.name, value);
    let explain = explain_says_error(&cfg, k.name, host);
    let validate = cfg.validate();
    assert_eq!(
        validate.is_err(),
        explain,
        "{}={value:?}: validate says {validate:?}, env-explain says error={explain}",
        k.name
    );
    assert_eq!(
        accessor_says_error(&cfg, k),
        explain,
        "{}={value:?}: the typed accessor disagrees with env-explain",
        k.name
    );
    if let Err(e) = validate {
        let text = e.to_string();
        assert!(
            text.contains(k.name) && text.contains(&k.accepted()),
            "{}={value:?}: the error names neither the knob nor its syntax: {text}",
            k.name
        );
    }
}

fn empty_host() -> (tempfile::TempDir, HostDevices) {
    let dir = tempfile::tempdir().unwrap();
    let host = HostDevices::from_sysfs(dir.path());
    (dir, host)
}

fn checked_knobs() -> impl Iterator<Item = &'static KnobSpec> {
    KNOBS
        .iter()
        .filter(|k| !matches!(k.status, Status::Removed { .. }))
}

#[test]
fn engine_and_env_explain_agree_on_every_knob() {
    let (_dir, host) = empty_host();
    for k in checked_knobs() {
        let own: Vec<&str> = k.ty.choices().iter().map(|c| c.value).collect();
        for value in CORPUS.iter().copied().chain([k.default]).chain(own) {
            check(k, value, &host);
        }
    }
}

#[test]
fn removed_knobs_and_unknown_names_never_stop_the_engine() {
    for k in KNOBS
        .iter()
        .filter(|k| matches!(k.status, Status::Removed { .. }))
    {
        config(k.name, "bogus").validate().unwrap();
    }
    config("NCCL_SOCKET_IFNAM", "eth0").validate().unwrap();
    let e = Config::defaults().int("NCCL_NOT_A_KNOB").unwrap_err();
    assert!(e.to_string().contains("NCCL_NOT_A_KNOB"), "{e}");
    let e = Config::defaults().int("NCCL_SOCKET_IFNAM").unwrap_err();
    assert!(
        e.to_string().contains("did you mean NCCL_SOCKET_IFNAME"),
        "{e}"
    );
    let e = Config::defaults().int("NCCL_PROTO").unwrap_err();
    assert!(e.to_string().contains("Config::string"), "{e}");
    assert!(Config::defaults().float("NCCL_BUFFSIZE").is_err());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn agree_on_any_text(value in "[ -~]{0,12}", pick in 0usize..1000) {
        let (_dir, host) = empty_host();
        let knobs: Vec<&KnobSpec> = checked_knobs().collect();
        check(knobs[pick % knobs.len()], &value, &host);
    }
}
