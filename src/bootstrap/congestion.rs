//! Which TCP congestion control the data sockets use (`RNCCL_SOCKET_CC`; `TCP_CONGESTION`,
//! tcp(7)), set on each sending socket before it connects (`crate::transport::tcp`), and what
//! `rnccl env-explain` says of the knob on this host ([`Congestion::on_this_host`]).
//!
//! **Why rnccl picks one.** BBR paces: it spreads a connection's bytes over time and arms a
//! high-resolution timer for each burst it holds back. Between hosts a few microseconds apart
//! those timers fire tens of thousands of times a second, and in a virtual machine each one
//! exits to the hypervisor. Measured with `perf/cpu_vs_mpi.sh tcp`'s namespaces on a 2-vCPU VM
//! whose kernel default is BBR (2026-12-01): a 256 MiB two-rank all-reduce moved 1.50-1.61 GB/s
//! with about 60 000 local timer interrupts a second, and 2.77-2.82 GB/s over CUBIC with about
//! 500; a plain C program streaming both ways went from 1.33 to 2.6-2.8 GB/s the same way. So
//! `auto` picks CUBIC (the kernel's own default algorithm), or Reno where this process may not
//! set CUBIC, when the host's default is a BBR, and leaves every other default alone. Data
//! sockets only: the bootstrap's few bytes do not care. `system` keeps the kernel's default
//! (for links where BBR's behaviour under loss matters more than its timers).

use crate::config::Config;
use crate::error::{Error, Result};

/// Where Linux lists its congestion controls (tcp(7)).
const SYSCTL: &str = "/proc/sys/net/ipv4";

/// What `auto` picks over a pacing default, in order: CUBIC (Linux's own default since
/// 2.6.19), else Reno (built into every kernel and allowed to every process; on the VM of the
/// module's header it moved 256 MiB as fast as CUBIC, 2.46-2.60 GB/s over 3 interleaved
/// rounds). A host may allow only its default and Reno (the H200 machine: "reno bbr").
const AUTO_PICKS: [&str; 2] = ["cubic", "reno"];

/// What the kernel offers: its default, what any socket may pick, and what is loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KernelCc {
    /// `net.ipv4.tcp_congestion_control` (None: unreadable).
    pub default: Option<String>,
    /// `net.ipv4.tcp_allowed_congestion_control`: what a process without `CAP_NET_ADMIN` may
    /// set.
    pub allowed: Vec<String>,
    /// `net.ipv4.tcp_available_congestion_control`: the algorithms loaded.
    pub available: Vec<String>,
}

impl KernelCc {
    /// Reads the three lists from `/proc/sys/net/ipv4` (empty where unreadable).
    pub(crate) fn read() -> KernelCc {
        let read = |name: &str| std::fs::read_to_string(format!("{SYSCTL}/{name}")).ok();
        let words = |s: Option<String>| -> Vec<String> {
            s.map(|s| s.split_whitespace().map(str::to_string).collect())
                .unwrap_or_default()
        };
        KernelCc {
            default: read("tcp_congestion_control").map(|s| s.trim().to_string()),
            allowed: words(read("tcp_allowed_congestion_control")),
            available: words(read("tcp_available_congestion_control")),
        }
    }
}

/// The congestion control of a communicator's data sockets, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Congestion {
    /// Set on each sending data socket before it connects (None: the kernel's default).
    pub name: Option<String>,
    /// Why, for `NCCL_DEBUG=INFO` ("congestion control cubic (RNCCL_SOCKET_CC auto: …)").
    pub why: String,
}

impl Congestion {
    /// Reads `RNCCL_SOCKET_CC` and the kernel's lists, and tries the choice on a scratch socket.
    ///
    /// Errors: [`Error::InvalidUsage`] for a named algorithm the kernel lacks or this process
    /// may not set.
    pub(crate) fn from_config(cfg: &Config) -> Result<Congestion> {
        Congestion::on_this_host(cfg.text("RNCCL_SOCKET_CC")?.unwrap_or("auto"))
    }

    /// The choice `RNCCL_SOCKET_CC=knob` comes to on this host (its kernel's lists, this
    /// process's rights).
    ///
    /// Errors: as [`Congestion::from_config`].
    pub(crate) fn on_this_host(knob: &str) -> Result<Congestion> {
        decide(knob, &KernelCc::read(), &can_set)
    }
}

/// Whether this process may set `name` on a TCP socket (tried on a scratch socket).
fn can_set(name: &str) -> bool {
    socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
        .and_then(|s| s.set_tcp_congestion(name.as_bytes()))
        .is_ok()
}

/// Whether `name` paces every burst with a timer (BBR and its later versions).
fn paces(name: &str) -> bool {
    name.starts_with("bbr")
}

/// The choice for knob value `knob` on a kernel offering `k`, where `settable` says whether this
/// process may set an algorithm.
///
/// Errors: [`Error::InvalidUsage`] for a named algorithm that is not loaded or not settable.
fn decide(knob: &str, k: &KernelCc, settable: &dyn Fn(&str) -> bool) -> Result<Congestion> {
    let default = k.default.as_deref().unwrap_or("unknown");
    let knob = knob.trim();
    if knob.eq_ignore_ascii_case("system") {
        return Ok(Congestion {
            name: None,
            why: format!(
                "congestion control {default} (RNCCL_SOCKET_CC=system: the kernel's default)"
            ),
        });
    }
    if knob.is_empty() || knob.eq_ignore_ascii_case("auto") {
        if !paces(default) {
            return Ok(Congestion {
                name: None,
                why: format!(
                    "congestion control {default} (RNCCL_SOCKET_CC auto: the kernel's default)"
                ),
            });
        }
        let why = format!(
            "the kernel's default {default} arms a pacing timer per burst, which on a link of \
             microseconds costs more CPU than the bytes (RNCCL_SOCKET_CC=system keeps {default})"
        );
        let pick = AUTO_PICKS
            .into_iter()
            .find(|p| k.available.iter().any(|a| a == p) && settable(p));
        if let Some(pick) = pick {
            return Ok(Congestion {
                name: Some(pick.into()),
                why: format!("congestion control {pick} (RNCCL_SOCKET_CC auto: {why})"),
            });
        }
        return Ok(Congestion {
            name: None,
            why: format!(
                "congestion control {default} (RNCCL_SOCKET_CC auto: {} would avoid its pacing \
                 timers but this process may set neither; add one to \
                 net.ipv4.tcp_allowed_congestion_control)",
                AUTO_PICKS.join(" or ")
            ),
        });
    }
    let listed = |v: &[String]| {
        if v.is_empty() {
            "none listed".to_string()
        } else {
            v.join(" ")
        }
    };
    if !k.available.is_empty() && !k.available.iter().any(|a| a == knob) {
        return Err(Error::invalid_usage(format!(
            "RNCCL_SOCKET_CC={knob}: this kernel has no such congestion control (loaded: {}); \
             pick one of those, load its module (modprobe tcp_{knob}), or unset it",
            listed(&k.available)
        )));
    }
    if !settable(knob) {
        return Err(Error::invalid_usage(format!(
            "RNCCL_SOCKET_CC={knob}: this process may not set it (allowed without CAP_NET_ADMIN: \
             {}); add it to net.ipv4.tcp_allowed_congestion_control, pick an allowed one, or \
             unset it",
            listed(&k.allowed)
        )));
    }
    Ok(Congestion {
        name: Some(knob.to_string()),
        why: format!("congestion control {knob} (RNCCL_SOCKET_CC={knob})"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(default: &str) -> KernelCc {
        KernelCc {
            default: Some(default.into()),
            allowed: vec!["reno".into(), "cubic".into()],
            available: vec!["reno".into(), "bbr".into(), "cubic".into()],
        }
    }

    fn allowed(name: &str) -> bool {
        name == "reno" || name == "cubic"
    }

    #[test]
    fn auto_picks_cubic_over_a_pacing_default_and_says_why() {
        let c = decide("auto", &kernel("bbr"), &allowed).unwrap();
        assert_eq!(c.name.as_deref(), Some("cubic"));
        assert!(c.why.starts_with("congestion control cubic (RNCCL_SOCKET_CC auto: the kernel's default bbr arms a pacing timer"), "{}", c.why);
        assert!(
            c.why.contains("RNCCL_SOCKET_CC=system keeps bbr"),
            "{}",
            c.why
        );
        // Unset reads as auto.
        assert_eq!(decide("", &kernel("bbr"), &allowed).unwrap(), c);
    }

    #[test]
    fn auto_keeps_a_default_that_does_not_pace() {
        let c = decide("AUTO", &kernel("cubic"), &allowed).unwrap();
        assert_eq!(c.name, None);
        assert_eq!(
            c.why,
            "congestion control cubic (RNCCL_SOCKET_CC auto: the kernel's default)"
        );
    }

    #[test]
    fn auto_falls_back_to_reno_then_to_the_default() {
        // The H200 machine: cubic loaded but not allowed, and this process unprivileged.
        let c = decide("auto", &kernel("bbr"), &|n| n == "reno").unwrap();
        assert_eq!(c.name.as_deref(), Some("reno"));
        assert!(
            c.why
                .starts_with("congestion control reno (RNCCL_SOCKET_CC auto:"),
            "{}",
            c.why
        );
        let c = decide("auto", &kernel("bbr"), &|_| false).unwrap();
        assert_eq!(c.name, None);
        assert!(
            c.why.contains(
                "cubic or reno would avoid its pacing timers but this process may set neither"
            ),
            "{}",
            c.why
        );
        let mut k = kernel("bbr");
        k.available = vec!["bbr".into(), "reno".into()];
        assert_eq!(
            decide("auto", &k, &allowed).unwrap().name.as_deref(),
            Some("reno")
        );
    }

    #[test]
    fn system_keeps_the_default() {
        let c = decide("system", &kernel("bbr"), &allowed).unwrap();
        assert_eq!(c.name, None);
        assert!(c.why.contains("bbr (RNCCL_SOCKET_CC=system"), "{}", c.why);
    }

    #[test]
    fn a_named_algorithm_is_checked() {
        let c = decide("reno", &kernel("bbr"), &allowed).unwrap();
        assert_eq!(c.name.as_deref(), Some("reno"));
        let e = decide("vegas", &kernel("bbr"), &allowed)
            .unwrap_err()
            .to_string();
        assert!(e.contains("RNCCL_SOCKET_CC=vegas: this kernel has no such congestion control (loaded: reno bbr cubic)"), "{e}");
        assert!(e.contains("modprobe tcp_vegas"), "{e}");
        let e = decide("bbr", &kernel("cubic"), &allowed)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("may not set it (allowed without CAP_NET_ADMIN: reno cubic)"),
            "{e}"
        );
    }

    #[test]
    fn the_kernels_lists_are_read() {
        let k = KernelCc::read();
        // Every Linux kernel has reno built in.
        assert!(k.available.iter().any(|a| a == "reno"), "{k:?}");
        assert!(k.default.is_some(), "{k:?}");
        assert!(can_set("reno"));
    }
}
