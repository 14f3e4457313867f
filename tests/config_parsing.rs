//! Integer parsing against NCCL's rules (C `strtoll` base 0 under glibc), as the engine reads
//! values (`Config::int`, strict) and as env-explain reports what NCCL does (`value::read`).

use proptest::prelude::*;
use rnccl::config::{Config, Severity, c_strtoll, lookup, parse_c_int, value};

#[test]
fn engine_reads_hex_octal_negative_and_defaults() {
    let c = Config::from_pairs(&[
        ("NCCL_BUFFSIZE", "0x400000"),
        ("NCCL_LL_BUFFSIZE", "01000000"),
        ("NCCL_IB_GID_INDEX", "-1"),
        ("NCCL_SOCKET_NTHREADS", ""),
    ])
    .unwrap();
    assert_eq!(c.int("NCCL_BUFFSIZE").unwrap(), 4 << 20);
    assert_eq!(c.int("NCCL_LL_BUFFSIZE").unwrap(), 0o1000000);
    assert_eq!(
        c.int("NCCL_IB_GID_INDEX").unwrap(),
        -1,
        "the default sentinel is accepted"
    );
    assert_eq!(
        c.int("NCCL_SOCKET_NTHREADS").unwrap(),
        -2,
        "empty means unset"
    );
}

#[test]
fn engine_refuses_what_nccl_would_misread() {
    for bad in [
        "08",
        "12abc",
        "lots",
        "4M",
        "99999999999999999999",
        "0x",
        "1e3",
    ] {
        let c = Config::from_pairs(&[("NCCL_BUFFSIZE", bad)]).unwrap();
        let e = c.int("NCCL_BUFFSIZE").unwrap_err().to_string();
        assert!(
            e.contains("NCCL_BUFFSIZE") && e.contains("environment"),
            "{bad}: {e}"
        );
    }
    // Spaces around a number are only a warning in env-explain (NCCL reads 4096), so the engine
    // reads 4096 too: one verdict per value.
    let c = Config::from_pairs(&[("NCCL_BUFFSIZE", " 4096 ")]).unwrap();
    assert_eq!(c.int("NCCL_BUFFSIZE").unwrap(), 4096);
    assert_eq!(worst("NCCL_BUFFSIZE", " 4096 ").1, Some(Severity::Warning));
}

fn worst(name: &str, raw: &str) -> (String, Option<Severity>) {
    let r = value::read(lookup(name).unwrap(), raw);
    (
        r.effective.clone(),
        r.findings.iter().map(|f| f.severity).max(),
    )
}

#[test]
fn explain_says_what_nccl_does() {
    // glibc strtoll: garbage reads as 0 (not the default), "08" reads as 0, overflow falls back
    // to the default, a trailing unit is dropped.
    assert_eq!(
        worst("NCCL_IB_TIMEOUT", "08"),
        ("0".into(), Some(Severity::Error))
    );
    assert_eq!(
        worst("NCCL_IB_TIMEOUT", "abc"),
        ("0".into(), Some(Severity::Error))
    );
    assert_eq!(
        worst("NCCL_IB_TIMEOUT", "-5"),
        ("-5".into(), Some(Severity::Error))
    );
    assert_eq!(
        worst("NCCL_IB_TIMEOUT", "012"),
        ("10".into(), Some(Severity::Warning))
    );
    assert_eq!(
        worst("NCCL_IB_TIMEOUT", "0x14"),
        ("20".into(), Some(Severity::Note))
    );
    assert_eq!(worst("NCCL_IB_TIMEOUT", "22"), ("22".into(), None));
    assert_eq!(
        worst("NCCL_BUFFSIZE", "4MB"),
        ("4".into(), Some(Severity::Error))
    );
    // Beyond i64: NCCL's parser gives up and keeps the default, so it reads as the default's
    // value, never as the sentinel -2.
    assert_eq!(
        worst("NCCL_BUFFSIZE", "99999999999999999999"),
        ("4194304 (4 MiB)".into(), Some(Severity::Error))
    );
    assert_eq!(
        worst("NCCL_BUFFSIZE", ""),
        ("-2: 4194304 (4 MiB)".into(), Some(Severity::Note))
    );
}

#[test]
fn explain_handles_every_type() {
    assert_eq!(worst("NCCL_WARN_ENABLE_DEBUG_INFO", "TRUE").0, "TRUE");
    assert_eq!(
        worst("NCCL_WARN_ENABLE_DEBUG_INFO", "yes").1,
        Some(Severity::Error)
    );
    assert_eq!(worst("NCCL_P2P_LEVEL", "NVL"), ("NVL".into(), None));
    assert_eq!(worst("NCCL_P2P_LEVEL", "Nvl").1, Some(Severity::Error));
    assert_eq!(
        worst("NCCL_NET_GDR_LEVEL", "3"),
        ("PHB".into(), Some(Severity::Note))
    );
    assert_eq!(worst("NCCL_DEBUG_SUBSYS", "^INIT,ENV").1, None);
    assert_eq!(
        worst("NCCL_SOCKET_FAMILY", "AF_INET6"),
        ("AF_INET6".into(), None)
    );
    assert_eq!(worst("NCCL_ALGO", "Ring;AllReduce:Tree").1, None);
    assert_eq!(worst("NCCL_PROTO", "LL,LL129").1, Some(Severity::Error));
    assert_eq!(worst("NCCL_COMM_ID", "10.1.2.3:5000").1, None);
    assert_eq!(worst("NCCL_PROXY_CPUSET", "0-3,8").1, None);
    assert_eq!(worst("NCCL_NETDEVS_POLICY", "MAX:2").1, None);
    assert_eq!(worst("NCCL_CTA_POLICY", "EFFICIENCY|ZERO").0, "ZERO");
    assert_eq!(worst("NCCL_THREAD_THRESHOLDS", "1 2 3 4 5 6").1, None);
    assert_eq!(worst("NCCL_TESTS_MIN_BW", "12.5").1, None);
    assert_eq!(
        worst("NCCL_NET_FORCE_MERGE", "mlx5_0,mlx5_1;mlx5_2,mlx5_3").1,
        None
    );
}

proptest! {
    #[test]
    fn any_i64_round_trips_in_every_base(v in any::<i64>()) {
        prop_assert_eq!(parse_c_int(&v.to_string()), Some(v));
        let (sign, mag) = if v < 0 { ("-", v.unsigned_abs()) } else { ("", v as u64) };
        prop_assert_eq!(parse_c_int(&format!("{sign}0x{mag:x}")), Some(v));
        prop_assert_eq!(parse_c_int(&format!("{sign}0{mag:o}")), Some(v));
    }

    #[test]
    fn strtoll_never_panics_and_consumes_a_prefix(s in "\\PC{0,24}") {
        let r = c_strtoll(&s);
        prop_assert!(r.consumed <= s.len());
        prop_assert!(s.is_char_boundary(r.consumed));
        if parse_c_int(&s).is_some() {
            prop_assert_eq!(r.consumed, s.len());
        }
    }
}
