//! Numbers worked out from settings, where the raw value hides what matters: how long a dead
//! InfiniBand peer goes unnoticed, how long socket connects retry, how big a protocol step is.

use crate::config::value::{format_bytes, format_duration};
use crate::config::{Config, KnobSpec, lookup, value};
use crate::ib::params::{ack_timeout, time_to_failure};

/// The value NCCL uses for `name`: the setting if it reads cleanly, else the default.
fn effective_int(cfg: &Config, name: &str) -> Option<i64> {
    let spec = lookup(name)?;
    let from_setting = cfg
        .setting(name)
        .filter(|s| !s.raw.is_empty())
        .and_then(|s| {
            let r = value::read(spec, &s.raw);
            r.effective.parse::<i64>().ok()
        });
    from_setting.or_else(|| value::default_int(spec))
}

/// The consequences worth stating for `spec` under `cfg`.
pub(super) fn compute(cfg: &Config, spec: &KnobSpec) -> Vec<String> {
    match spec.name {
        "NCCL_IB_TIMEOUT" | "NCCL_IB_RETRY_CNT" => ib_time_to_failure(cfg).into_iter().collect(),
        "NCCL_SOCKET_RETRY_CNT" | "NCCL_SOCKET_RETRY_SLEEP_MSEC" => {
            socket_retry_time(cfg).into_iter().collect()
        }
        "NCCL_BUFFSIZE" => buffsize(cfg),
        _ => Vec::new(),
    }
}

/// How long a lost InfiniBand peer goes unnoticed ([`crate::ib::params::time_to_failure`]:
/// the first attempt and NCCL_IB_RETRY_CNT retries, each waiting the local ACK timeout; NCCL's
/// env.rst quotes t × retry, leaving out the first attempt).
fn ib_time_to_failure(cfg: &Config) -> Option<String> {
    let timeout = effective_int(cfg, "NCCL_IB_TIMEOUT")?;
    let retry = effective_int(cfg, "NCCL_IB_RETRY_CNT")?.clamp(0, 7);
    let exp = u8::try_from(timeout).unwrap_or(0);
    let (Some(t), Some(total)) = (ack_timeout(exp), time_to_failure(exp, retry as u8)) else {
        return Some("with NCCL_IB_TIMEOUT at 0 (or 32 and up) the NIC waits forever: a lost peer hangs the job".into());
    };
    Some(format!(
        "a lost peer or path is reported after about {} ({} per attempt × {} attempts, NCCL_IB_TIMEOUT={timeout}, NCCL_IB_RETRY_CNT={retry})",
        format_duration(total.as_secs_f64()),
        format_duration(t.as_secs_f64()),
        retry + 1
    ))
}

/// NCCL sleeps k × NCCL_SOCKET_RETRY_SLEEP_MSEC before retry k and gives up after
/// NCCL_SOCKET_RETRY_CNT retries (`src/os/linux.cc`), N(N+1)/2 steps in all.
fn socket_retry_time(cfg: &Config) -> Option<String> {
    let n = effective_int(cfg, "NCCL_SOCKET_RETRY_CNT")?.max(0);
    let ms = effective_int(cfg, "NCCL_SOCKET_RETRY_SLEEP_MSEC")?.max(0);
    let total = n as f64 * (n + 1) as f64 / 2.0 * ms as f64 / 1e3;
    Some(format!(
        "a refused or unreachable connect is retried for about {} in all ({n} retries, waits growing by {ms} ms)",
        format_duration(total)
    ))
}

/// The Simple protocol cuts its buffer into NCCL_STEPS = 8 steps (`src/include/device.h`).
fn buffsize(cfg: &Config) -> Vec<String> {
    match effective_int(cfg, "NCCL_BUFFSIZE") {
        Some(b) if b > 0 => vec![format!("each of the 8 steps is {}", format_bytes(b / 8))],
        _ => Vec::new(),
    }
}
