//! The channel layout every rank of a communicator must agree on — ring order per channel, FIFO
//! slot size, the `NCCL_ALGO` in force — decided by rank 0 from its knobs and sent to the others,
//! so ranks whose environments differ still run matching plans.

use crate::bootstrap::{BootstrapNet, Deadline, PeerInfo};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::transport::fifo::NSLOTS;

/// Buffer bytes per connection for CPU ranks when `NCCL_BUFFSIZE` is auto: 512 KiB, so a slot
/// is 64 KiB and a ring chunk (four slots) stays in the L2/L3 caches while it is handed on.
/// (NCCL's GPU default is 4 MiB, internals §5.)
pub const CPU_DEFAULT_BUFFSIZE: usize = 512 << 10;
/// Channels for CPU ranks when no topology gives a count: each channel is a separate ring with
/// its own connections (and sockets), which keeps TCP links busy.
pub const CPU_DEFAULT_CHANNELS: usize = 2;
/// NCCL's `MAXCHANNELS`.
pub const MAX_CHANNELS: usize = 64;

/// The agreed layout.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Layout {
    /// Per channel, the ring order of all ranks.
    pub rings: Vec<Vec<usize>>,
    /// Bytes per FIFO slot.
    pub slot_bytes: usize,
    /// `NCCL_ALGO` as rank 0 has it.
    pub algo: Option<String>,
    /// Where the ring order came from ("rank order", "topology").
    pub source: String,
}

/// Slot bytes from `NCCL_BUFFSIZE` (auto: [`CPU_DEFAULT_BUFFSIZE`]).
///
/// Errors: a buffer too small to hold eight 64-byte slots.
pub fn slot_bytes(cfg: &Config) -> Result<usize> {
    let b = cfg.int("NCCL_BUFFSIZE")?;
    let buff = if b < 0 {
        CPU_DEFAULT_BUFFSIZE
    } else {
        b as usize
    };
    let slot = (buff / NSLOTS) / 64 * 64;
    if slot == 0 {
        return Err(Error::invalid_usage(format!(
            "NCCL_BUFFSIZE={b} is too small: rnccl needs at least {} bytes (8 slots of 64 bytes)",
            NSLOTS * 64
        )));
    }
    Ok(slot)
}

/// The channel count from the knobs, NCCL's way: at most `NCCL_MAX_NCHANNELS` and
/// `NCCL_MAX_CTAS`, then duplicated up to `NCCL_MIN_NCHANNELS` / `NCCL_MIN_CTAS`
/// (internals §1.3, §3.3). `base` is the count before the clamps.
///
/// Errors: a bad knob value.
pub fn channel_count(cfg: &Config, base: usize) -> Result<usize> {
    let knob = |name: &str, auto: usize| -> Result<usize> {
        let v = cfg.int(name)?;
        Ok(if v < 0 { auto } else { v as usize })
    };
    let max = knob("NCCL_MAX_NCHANNELS", MAX_CHANNELS)?
        .min(knob("NCCL_MAX_CTAS", MAX_CHANNELS)?)
        .clamp(1, MAX_CHANNELS);
    let min = knob("NCCL_MIN_NCHANNELS", 0)?
        .max(knob("NCCL_MIN_CTAS", 1)?)
        .min(MAX_CHANNELS);
    Ok(base.min(max).max(min).max(1))
}

/// Rank 0's decision for a communicator over `peers`.
///
/// Errors: bad knob values.
pub fn decide(cfg: &Config, peers: &[PeerInfo]) -> Result<Layout> {
    let nranks = peers.len();
    let nch = channel_count(cfg, CPU_DEFAULT_CHANNELS)?;
    Ok(Layout {
        rings: vec![(0..nranks).collect(); nch],
        slot_bytes: slot_bytes(cfg)?,
        algo: cfg.string("NCCL_ALGO").map(str::to_string),
        source: "rank order".into(),
    })
}

/// Rank 0 sends `layout` to every rank; the others receive it.
///
/// Errors: bootstrap failures naming the rank involved.
pub fn share(
    net: &BootstrapNet,
    tag: u64,
    rank: usize,
    net_rank: &[usize],
    layout: Option<Layout>,
    deadline: Deadline,
) -> Result<Layout> {
    const LAYOUT: u64 = 3 << 60;
    if rank == 0 {
        let layout = layout.ok_or_else(|| Error::Internal("rank 0 has no layout".into()))?;
        let body = serde_json::to_vec(&layout).expect("layout serialises");
        for &r in &net_rank[1..] {
            net.send(r, tag, LAYOUT, &body, deadline)?;
        }
        Ok(layout)
    } else {
        let body = net.recv(
            net_rank[0],
            tag,
            LAYOUT,
            deadline,
            "waiting for rank 0's channel layout",
        )?;
        serde_json::from_slice(&body)
            .map_err(|e| Error::Remote(format!("malformed channel layout from rank 0: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Source;

    fn cfg(pairs: &[(&str, &str)]) -> Config {
        let mut c = Config::defaults();
        for (k, v) in pairs {
            c.set(k, *v, Source::Env);
        }
        c
    }

    #[test]
    fn channel_knobs_clamp_then_duplicate() {
        assert_eq!(channel_count(&cfg(&[]), 2).unwrap(), 2);
        assert_eq!(
            channel_count(&cfg(&[("NCCL_MAX_NCHANNELS", "1")]), 2).unwrap(),
            1
        );
        assert_eq!(
            channel_count(&cfg(&[("NCCL_MIN_NCHANNELS", "6")]), 2).unwrap(),
            6
        );
        assert_eq!(
            channel_count(&cfg(&[("NCCL_MAX_CTAS", "3")]), 12).unwrap(),
            3
        );
        assert_eq!(
            channel_count(
                &cfg(&[("NCCL_MIN_NCHANNELS", "8"), ("NCCL_MAX_NCHANNELS", "4")]),
                2
            )
            .unwrap(),
            8,
            "min wins, as in NCCL"
        );
        assert!(channel_count(&cfg(&[("NCCL_MAX_NCHANNELS", "four")]), 2).is_err());
    }

    #[test]
    fn buffsize_sets_slots() {
        assert_eq!(slot_bytes(&cfg(&[])).unwrap(), 64 << 10);
        assert_eq!(
            slot_bytes(&cfg(&[("NCCL_BUFFSIZE", "4194304")])).unwrap(),
            512 << 10
        );
        assert!(
            slot_bytes(&cfg(&[("NCCL_BUFFSIZE", "100")]))
                .unwrap_err()
                .to_string()
                .contains("too small")
        );
    }
}
