//! The FIFO slot size of a communicator's connections: `NCCL_BUFFSIZE` bytes per connection
//! (auto: per kind of rank), cut into the [`NSLOTS`] slots every FIFO has. Rank 0 decides it
//! (`comm::layout`); the GPU engine's choice of kernel reads it too (`exec::gpu::choice`).

use crate::config::{BUFFSIZE_MAX, BUFFSIZE_MIN, Config};
use crate::conn::NSLOTS;
use crate::error::{Error, Result};

/// Buffer bytes per connection for CPU ranks on one host when `NCCL_BUFFSIZE` is auto: 512 KiB,
/// so a slot is 64 KiB and a ring chunk (four slots) stays in the L2/L3 caches while it is handed
/// on. (NCCL's GPU default is 4 MiB, internals §5.)
pub(crate) const CPU_DEFAULT_BUFFSIZE: usize = 512 << 10;
/// Buffer bytes per connection for CPU ranks across hosts when `NCCL_BUFFSIZE` is auto: 1 MiB,
/// so a slot is 128 KiB. Sockets send from the collective's buffers and receive into slots that
/// are reduced or copied while the next ones arrive: 8 slots of 128 KiB per connection stay in
/// the caches where 8 of 512 KiB do not. On the netns pair of perf/cpu_vs_mpi.sh a 256 MiB
/// all_reduce moved 1.27-1.38 GB/s with 512 KiB slots, 1.36-1.57 with 64 KiB and 1.47-1.67 with
/// 128 KiB ones (NCCL's socket transport likewise cuts its 512 KiB steps into 64 KiB pieces).
pub(crate) const CPU_NET_DEFAULT_BUFFSIZE: usize = 1 << 20;
/// Buffer bytes per connection for GPU ranks when `NCCL_BUFFSIZE` is auto: NCCL's 4 MiB.
pub(crate) const NET_DEFAULT_BUFFSIZE: usize = 4 << 20;
/// Slot bytes from `NCCL_BUFFSIZE` (bytes per connection; auto: NCCL's 4 MiB
/// ([`NET_DEFAULT_BUFFSIZE`]) for GPU ranks, [`CPU_NET_DEFAULT_BUFFSIZE`] for CPU ranks across
/// hosts, [`CPU_DEFAULT_BUFFSIZE`] for CPU ranks on one host): an eighth of it, rounded down to
/// 64 bytes. The knob's range ([`BUFFSIZE_MIN`] to [`BUFFSIZE_MAX`]) is the registry's, so the
/// engine and `env-explain` refuse the same values.
///
/// GPU ranks take NCCL's default because every slot costs the kernel a block-wide barrier and
/// a system-scope fence before the flag store: a 64 KiB slot spends a third of its time there
/// on NVLink, a 512 KiB one a few percent.
///
/// Errors: [`Error::InvalidUsage`] for a value outside the knob's range.
pub(crate) fn slot_bytes(cfg: &Config, hosts: usize, gpu: bool) -> Result<usize> {
    let buff = match cfg.int("NCCL_BUFFSIZE")? {
        b if b >= 0 => usize::try_from(b).unwrap_or(usize::MAX),
        _ if gpu => NET_DEFAULT_BUFFSIZE,
        _ if hosts > 1 => CPU_NET_DEFAULT_BUFFSIZE,
        _ => CPU_DEFAULT_BUFFSIZE,
    };
    check_slot_bytes((buff / NSLOTS) / 64 * 64)
}

/// Checks a slot size (possibly decided by another rank): a multiple of 64 bytes, an eighth of
/// a buffer within the knob's range.
///
/// Errors: [`Error::InvalidUsage`] naming the size.
pub(crate) fn check_slot_bytes(slot: usize) -> Result<usize> {
    let (min, max) = (
        BUFFSIZE_MIN as usize / NSLOTS,
        BUFFSIZE_MAX as usize / NSLOTS,
    );
    if !(min..=max).contains(&slot) || !slot.is_multiple_of(64) {
        return Err(Error::invalid_usage(format!(
            "a FIFO slot of {slot} bytes is not a multiple of 64 between {min} and {max}"
        )));
    }
    Ok(slot)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffsize_sets_slots() {
        assert_eq!(
            slot_bytes(&Config::from_pairs(&[]).unwrap(), 1, false).unwrap(),
            64 << 10
        );
        assert_eq!(
            slot_bytes(&Config::from_pairs(&[]).unwrap(), 2, false).unwrap(),
            128 << 10,
            "CPU ranks across hosts: 1 MiB"
        );
        assert_eq!(
            slot_bytes(&Config::from_pairs(&[]).unwrap(), 1, true).unwrap(),
            512 << 10,
            "GPU: NCCL's 4 MiB"
        );
        assert_eq!(
            slot_bytes(
                &Config::from_pairs(&[("NCCL_BUFFSIZE", "4194304")]).unwrap(),
                1,
                false
            )
            .unwrap(),
            512 << 10
        );
        assert_eq!(
            slot_bytes(
                &Config::from_pairs(&[("NCCL_BUFFSIZE", "1048576")]).unwrap(),
                1,
                true
            )
            .unwrap(),
            128 << 10,
            "the knob wins on GPUs too"
        );
        for bad in ["100", "99999999999999"] {
            let e = slot_bytes(
                &Config::from_pairs(&[("NCCL_BUFFSIZE", bad)]).unwrap(),
                1,
                false,
            )
            .unwrap_err();
            assert_eq!(e.code(), crate::error::ResultCode::InvalidUsage);
            let e = e.to_string();
            assert!(
                e.contains("NCCL_BUFFSIZE") && e.contains("1073741824"),
                "{e}"
            );
        }
        assert!(
            slot_bytes(
                &Config::from_pairs(&[("NCCL_BUFFSIZE", "1073741824")]).unwrap(),
                1,
                true
            )
            .is_ok()
        );
        for bad in [0, 100, 1 << 30] {
            assert!(check_slot_bytes(bad).is_err(), "{bad}");
        }
        assert_eq!(check_slot_bytes(64 << 10).unwrap(), 64 << 10);
    }
}
