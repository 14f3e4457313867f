//! Port counters: the PMA counters (`ports/<n>/counters/`) and the driver's RDMA transport
//! counters (`ports/<n>/hw_counters/`), read as totals and compared between two reads.
//!
//! Which counters mean what (diagnostics.md §A.2 IB13/IB14, from Meta GCM `check_ib_counters`
//! and the mlx5 counter documentation): link errors say the cable, transceiver or switch port is
//! failing; transport errors say queue pairs hit retries or timeouts (NCCL's completion error 12,
//! "transport retry counter exceeded", is `local_ack_timeout_err` growing).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use super::sysfs::read_counter_dir;
use crate::topo::detect::sysfs::Root;

/// PMA link error counters (`counters/`) whose growth during a check means a bad link now.
pub const LINK_ERRORS_SEVERE: &[&str] = &[
    "symbol_error",
    "link_error_recovery",
    "link_downed",
    "local_link_integrity_errors",
    "port_rcv_errors",
];

/// The other PMA error counters (`counters/`), counted with the severe ones in the total.
pub const LINK_ERRORS_OTHER: &[&str] = &[
    "port_rcv_remote_physical_errors",
    "port_rcv_switch_relay_errors",
    "port_xmit_discards",
    "port_xmit_constraint_errors",
    "port_rcv_constraint_errors",
    "excessive_buffer_overrun_errors",
    "VL15_dropped",
];

/// Driver transport counters (`hw_counters/`) whose growth means queue pairs fail: retries
/// exhausted, receivers not ready, completions in error.
pub const TRANSPORT_ERRORS_SEVERE: &[&str] = &[
    "local_ack_timeout_err",
    "rnr_nak_retry_err",
    "req_cqe_error",
    "resp_cqe_error",
];

/// Driver transport counters whose growth means congestion or lost packets the NIC recovered
/// from (out-of-order or dropped packets, ECN marks, retransmissions).
pub const TRANSPORT_ERRORS_OTHER: &[&str] = &[
    "out_of_buffer",
    "out_of_sequence",
    "packet_seq_err",
    "roce_adp_retrans",
    "np_ecn_marked_roce_packets",
];

/// The PMA data counters, in units of 4 octets (`port_xmit_data`, `port_rcv_data`).
pub const DATA_COUNTERS: [&str; 2] = ["port_xmit_data", "port_rcv_data"];

/// The counters of one port at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PortCounters {
    /// `counters/*`.
    pub counters: BTreeMap<String, u64>,
    /// `hw_counters/*`.
    pub hw_counters: BTreeMap<String, u64>,
}

impl PortCounters {
    /// Reads `<port_dir>/counters` and `<port_dir>/hw_counters`.
    pub fn read(root: &Root, port_dir: &str) -> PortCounters {
        PortCounters {
            counters: read_counter_dir(root, &format!("{port_dir}/counters")),
            hw_counters: read_counter_dir(root, &format!("{port_dir}/hw_counters")),
        }
    }

    /// The value of a PMA counter or, failing that, a driver counter.
    pub fn get(&self, name: &str) -> Option<u64> {
        self.counters
            .get(name)
            .or_else(|| self.hw_counters.get(name))
            .copied()
    }

    /// The sum of the PMA error counters (GCM's total).
    pub fn link_error_total(&self) -> u64 {
        LINK_ERRORS_SEVERE
            .iter()
            .chain(LINK_ERRORS_OTHER)
            .filter_map(|c| self.counters.get(*c))
            .sum()
    }
}

/// How counters moved between two reads.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CounterDelta {
    /// Time between the reads, seconds.
    pub seconds: f64,
    /// Every counter that grew, with its growth (PMA and driver counters; names are distinct).
    /// A counter that went down (reset, or a 32-bit PMA counter that wrapped) is left out.
    pub grew: BTreeMap<String, u64>,
    /// Transmit rate from `port_xmit_data`, Gb/s (1e9 bit/s).
    pub tx_gbps: Option<f64>,
    /// Receive rate from `port_rcv_data`, Gb/s.
    pub rx_gbps: Option<f64>,
}

impl CounterDelta {
    /// The growth of `before` into `after` over `interval`.
    pub fn between(
        before: &PortCounters,
        after: &PortCounters,
        interval: Duration,
    ) -> CounterDelta {
        let mut grew = BTreeMap::new();
        for (b, a) in [
            (&before.counters, &after.counters),
            (&before.hw_counters, &after.hw_counters),
        ] {
            for (name, &v) in a {
                if let Some(&old) = b.get(name)
                    && v > old
                {
                    grew.insert(name.clone(), v - old);
                }
            }
        }
        let seconds = interval.as_secs_f64();
        let rate = |c: &str| {
            let (b, a) = (before.counters.get(c)?, after.counters.get(c)?);
            (seconds > 0.0).then(|| a.saturating_sub(*b) as f64 * 4.0 * 8.0 / seconds / 1e9)
        };
        CounterDelta {
            seconds,
            tx_gbps: rate(DATA_COUNTERS[0]),
            rx_gbps: rate(DATA_COUNTERS[1]),
            grew,
        }
    }

    /// The growth of `name` (0 when it did not grow).
    pub fn of(&self, name: &str) -> u64 {
        self.grew.get(name).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas_and_rates() {
        let mut a = PortCounters::default();
        a.counters.insert("symbol_error".into(), 3);
        a.counters.insert("port_xmit_data".into(), 0);
        a.counters.insert("port_rcv_data".into(), 1000);
        a.hw_counters.insert("local_ack_timeout_err".into(), 7);
        let mut b = a.clone();
        b.counters.insert("symbol_error".into(), 5);
        // 12.5e9 four-octet words in 2 s = 100 GB/s... of 4-byte units: 12.5e9*4*8/2/1e9 = 200 Gb/s.
        b.counters.insert("port_xmit_data".into(), 12_500_000_000);
        b.counters.insert("port_rcv_data".into(), 500);
        b.hw_counters.insert("local_ack_timeout_err".into(), 9);
        let d = CounterDelta::between(&a, &b, Duration::from_secs(2));
        assert_eq!(d.of("symbol_error"), 2);
        assert_eq!(d.of("local_ack_timeout_err"), 2);
        assert_eq!(d.of("port_rcv_data"), 0);
        assert_eq!(d.tx_gbps, Some(200.0));
        assert_eq!(d.rx_gbps, Some(0.0));
        assert_eq!(a.link_error_total(), 3);
        assert_eq!(b.get("local_ack_timeout_err"), Some(9));
    }
}
