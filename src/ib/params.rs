//! The `NCCL_IB_*` knobs the IB transport, its active tests and `ibcheck` act on, read once
//! through the registry, and the queue-pair timing they imply.

use std::time::Duration;

use serde::Serialize;

use super::gid::GidPrefs;
use crate::config::syntax::DeviceFilter;
use crate::config::{Config, ConfigError};

/// NCCL's queue-pair limit per connection (`NCCL_IB_MAX_QPS`, src/transport/net_ib/common.h).
pub const MAX_QPS: usize = 128;

/// Queue-pair and addressing knobs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IbParams {
    /// `NCCL_IB_DISABLE`.
    pub disable: bool,
    /// `NCCL_IB_HCA`, parsed.
    #[serde(skip)]
    pub hca: Option<DeviceFilter>,
    /// `NCCL_IB_HCA` as written.
    pub hca_text: Option<String>,
    /// `NCCL_IB_TIMEOUT`: the local ACK timeout exponent (4.096 µs × 2^n; 0 or ≥ 32 never).
    pub timeout: u8,
    /// `NCCL_IB_RETRY_CNT` (0..7).
    pub retry_cnt: u8,
    /// `NCCL_IB_SL` (-1: 0, NCCL's default without a communicator traffic class).
    pub sl: u8,
    /// `NCCL_IB_TC` (-1: 0).
    pub tc: u8,
    /// `NCCL_IB_PKEY` (partition key index).
    pub pkey_index: u16,
    /// `NCCL_IB_QPS_PER_CONNECTION` (1..128).
    pub qps_per_connection: usize,
    /// `NCCL_IB_SPLIT_DATA_ON_QPS`: split each message over every QP (else whole messages
    /// round-robin over the QPs).
    pub split_data_on_qps: bool,
    /// The GID choice knobs.
    pub gid: GidPrefs,
    /// `NCCL_IBVERBS_LIB`.
    pub verbs_lib: Option<String>,
}

impl IbParams {
    /// Reads the knobs.
    ///
    /// Errors: a value the registry refuses, or an `NCCL_IB_HCA` that is not a device list
    /// ([`ConfigError::BadValue`]).
    pub fn from_config(cfg: &Config) -> Result<IbParams, ConfigError> {
        let hca_text = cfg.text("NCCL_IB_HCA")?.map(str::to_string);
        let hca = match &hca_text {
            Some(t) => Some(
                DeviceFilter::parse(t)
                    .map_err(|hint| cfg.refuse("NCCL_IB_HCA", "not a device list".into(), hint))?,
            ),
            None => None,
        };
        let clamp = |v: i64, lo: i64, hi: i64| v.clamp(lo, hi);
        Ok(IbParams {
            disable: cfg.flag("NCCL_IB_DISABLE")?,
            hca,
            hca_text,
            timeout: clamp(cfg.int("NCCL_IB_TIMEOUT")?, 0, 31) as u8,
            retry_cnt: clamp(cfg.int("NCCL_IB_RETRY_CNT")?, 0, 7) as u8,
            sl: clamp(cfg.int("NCCL_IB_SL")?, 0, 15) as u8,
            tc: clamp(cfg.int("NCCL_IB_TC")?, 0, 255) as u8,
            pkey_index: clamp(cfg.int("NCCL_IB_PKEY")?, 0, 65535) as u16,
            qps_per_connection: clamp(cfg.int("NCCL_IB_QPS_PER_CONNECTION")?, 1, MAX_QPS as i64)
                as usize,
            split_data_on_qps: cfg.flag("NCCL_IB_SPLIT_DATA_ON_QPS")?,
            gid: GidPrefs::from_config(cfg)?,
            verbs_lib: cfg.text("NCCL_IBVERBS_LIB")?.map(str::to_string),
        })
    }

    /// Whether `NCCL_IB_HCA` lets NCCL use port `port` of adapter `hca` (all ports when unset).
    pub fn selects(&self, hca: &str, port: u32) -> bool {
        self.hca.as_ref().is_none_or(|f| f.matches(hca, Some(port)))
    }
}

/// The local ACK timeout of exponent `exp`: 4.096 µs × 2^exp (InfiniBand Architecture
/// Specification vol. 1, §12.7.34); `None` for 0 and 32 or more, which mean "wait forever".
pub fn ack_timeout(exp: u8) -> Option<Duration> {
    (1..32)
        .contains(&exp)
        .then(|| Duration::from_nanos((4096.0 * 2f64.powi(i32::from(exp))) as u64))
}

/// How long a requester keeps retrying a silent peer before its work request fails with
/// "retry exceeded" (completion status 12): the first attempt plus `retry_cnt` retries, each
/// waiting [`ack_timeout`] (§12.7.38); `None` when the timeout is infinite.
pub fn time_to_failure(exp: u8, retry_cnt: u8) -> Option<Duration> {
    ack_timeout(exp).map(|t| t * (u32::from(retry_cnt.min(7)) + 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LoadOptions;

    #[test]
    fn reads_knobs_and_times() {
        let cfg = Config::load(&LoadOptions {
            env: Some(
                [
                    ("NCCL_IB_TIMEOUT", "14"),
                    ("NCCL_IB_QPS_PER_CONNECTION", "4"),
                    ("NCCL_IB_HCA", "=mlx5_0:1"),
                ]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ),
            home: Some("/nonexistent".into()),
            system_conf: Some("/nonexistent/nccl.conf".into()),
            ..LoadOptions::default()
        })
        .unwrap();
        let p = IbParams::from_config(&cfg).unwrap();
        assert_eq!((p.timeout, p.retry_cnt, p.qps_per_connection), (14, 7, 4));
        assert!(p.selects("mlx5_0", 1) && !p.selects("mlx5_0", 2) && !p.selects("mlx5_1", 1));
        assert_eq!(ack_timeout(0), None);
        assert_eq!(ack_timeout(20), Some(Duration::from_nanos(4_294_967_296)));
        let t = time_to_failure(14, 7).unwrap();
        assert!(
            t > Duration::from_millis(536) && t < Duration::from_millis(537),
            "{t:?}"
        );
    }
}
