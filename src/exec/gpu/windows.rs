//! The symmetric windows of a GPU communicator (`ncclCommWindowRegister` with
//! `NCCL_WIN_COLL_SYMMETRIC`) and the choice of the symmetric kernels
//! (`kernels/symmetric.cuh`) over them.
//!
//! A symmetric window is a promise of the caller's, as in NCCL: every rank registers a range
//! of the same size, and a collective's buffers sit at the same offset of every rank's range.
//! So a rank finds a peer's buffer from its own: the peer's range as mapped in this process,
//! plus the offset of its own buffer in its own range. An all-reduce, reduce-scatter or
//! all-gather whose input and output both lie in symmetric windows then loads the peers'
//! inputs and stores into their outputs in place, where the direct kernel stores every byte
//! into a peer's slot and the peer copies it out again.
//!
//! Each rank decides from its own buffers; ranks that keep the promise decide alike. One that
//! breaks it (a buffer in a window on one rank only) leaves the ranks running different
//! kernels, and their waits end in a timeout that names the peer, as NCCL's would hang.

use std::sync::{Arc, Mutex, Weak};

use crate::config::Config;
use crate::device::cuda::abi::{DirectMode, SYM_BLOCKS};
use crate::error::{Error, Result};
use crate::func::Func;

/// One symmetric window: this rank's range and every rank's as mapped in this process.
#[derive(Debug)]
pub(crate) struct SymWindow {
    /// This rank's range: device address and bytes.
    addr: u64,
    bytes: usize,
    /// Per rank, the start of its range in this process (this rank's own at its index).
    peers: Vec<u64>,
    /// Per rank, the size of its range, bytes.
    sizes: Vec<usize>,
}

impl SymWindow {
    /// A window whose range on this rank is `bytes` bytes at `addr`, and on rank r `sizes[r]`
    /// bytes at `peers[r]` (addresses in this process).
    pub(crate) fn new(addr: u64, bytes: usize, peers: Vec<u64>, sizes: Vec<usize>) -> SymWindow {
        SymWindow {
            addr,
            bytes,
            peers,
            sizes,
        }
    }

    /// Per rank, where the buffer of `len` bytes at `ptr` (this rank's) sits in that rank's
    /// range: the same offset. `None` when the buffer is not inside this rank's range, or
    /// would run past the end of another rank's.
    fn place(&self, ptr: u64, len: usize) -> Option<Vec<u64>> {
        let off = ptr.checked_sub(self.addr)? as usize;
        let end = off.checked_add(len)?;
        if len == 0 || end > self.bytes || self.sizes.iter().any(|&s| end > s) {
            return None;
        }
        Some(self.peers.iter().map(|p| p + off as u64).collect())
    }
}

/// The symmetric windows registered on a communicator and not yet released. A window leaves
/// when the last handle of it ([`crate::comm::DeviceWindow`]) goes.
#[derive(Debug, Default)]
pub(crate) struct SymWindows {
    live: Mutex<Vec<Weak<SymWindow>>>,
}

impl SymWindows {
    /// Records `w`; it stays as long as the returned handle does.
    pub(crate) fn add(&self, w: SymWindow) -> Arc<SymWindow> {
        let w = Arc::new(w);
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        live.retain(|l| l.strong_count() > 0);
        live.push(Arc::downgrade(&w));
        w
    }

    /// Per rank, the address in this process of the buffer of `len` bytes at `ptr` (this
    /// rank's), when a live symmetric window holds it ([`SymWindow::place`]).
    pub(crate) fn place(&self, ptr: u64, len: usize) -> Option<Vec<u64>> {
        let live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        live.iter()
            .filter_map(Weak::upgrade)
            .find_map(|w| w.place(ptr, len))
    }
}

/// The symmetric kernels, by NCCL's names for the same shapes (src/sym_kernels.cc).
const KERNELS: [(Func, DirectMode, &str); 3] = [
    (
        Func::AllReduce,
        DirectMode::SymAllReduce,
        "AllReduce_RSxLD_AGxST",
    ),
    (
        Func::ReduceScatter,
        DirectMode::SymReduceScatter,
        "ReduceScatter_LD",
    ),
    (Func::AllGather, DirectMode::SymAllGather, "AllGather_ST"),
];

/// Which symmetric kernels may run and on how many blocks, from `NCCL_SYM_KERNEL` and
/// `NCCL_SYM_CTAS` (as rank 0 had them, so every rank chooses alike).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SymKernels {
    /// Per entry of [`KERNELS`], whether it may run.
    allowed: [bool; KERNELS.len()],
    /// Blocks every symmetric kernel runs on (`NCCL_SYM_CTAS`); `None`: by size.
    ctas: Option<usize>,
}

impl SymKernels {
    /// Reads the knobs. `NCCL_WIN_ENABLE=0` allows none (NCCL then has no symmetric support,
    /// src/init.cc); otherwise `NCCL_SYM_KERNEL` unset or `^` allows every kernel, a kernel's
    /// name that one alone, any other value none (NCCL's `kernelMask_user`,
    /// src/sym_kernels.cc); `NCCL_SYM_CTAS` 0 sizes the grid by the buffer, 1-128 fixes it.
    ///
    /// Errors: [`Error::InvalidUsage`] for an `NCCL_SYM_CTAS` that is not an integer in 0-128 or
    /// an `NCCL_WIN_ENABLE` that is not a switch.
    pub(crate) fn from_config(cfg: &Config) -> Result<SymKernels> {
        let win_enable = cfg
            .flag("NCCL_WIN_ENABLE")
            .map_err(|e| Error::invalid_usage(e.to_string()))?;
        let allowed = match cfg.string("NCCL_SYM_KERNEL").map(str::trim) {
            _ if !win_enable => [false; KERNELS.len()],
            None | Some("^") => [true; KERNELS.len()],
            Some(name) => KERNELS.map(|(_, _, k)| k == name),
        };
        let ctas = cfg
            .int("NCCL_SYM_CTAS")
            .map_err(|e| Error::invalid_usage(e.to_string()))?;
        let ctas = match usize::try_from(ctas) {
            Ok(0) => None,
            Ok(n) if n <= SYM_BLOCKS => Some(n),
            _ => {
                return Err(Error::invalid_usage(format!(
                    "NCCL_SYM_CTAS={ctas}: the symmetric kernels run on 1 to {SYM_BLOCKS} \
                     blocks (0: chosen by size)"
                )));
            }
        };
        Ok(SymKernels { allowed, ctas })
    }

    /// The symmetric kernel for `func`, when one exists and the knobs allow it: its place in
    /// [`KERNELS`] (below 8), its mode and its name.
    pub(crate) fn kernel(&self, func: Func) -> Option<(usize, DirectMode, &'static str)> {
        KERNELS
            .iter()
            .zip(self.allowed)
            .enumerate()
            .find(|(_, ((f, _, _), ok))| *f == func && *ok)
            .map(|(i, ((_, m, name), _))| (i, *m, *name))
    }

    /// The symmetric kernel's mode for `func`, as [`SymKernels::kernel`].
    #[cfg(test)]
    fn mode(&self, func: Func) -> Option<DirectMode> {
        self.kernel(func).map(|k| k.1)
    }

    /// Blocks for a symmetric kernel whose rank moves a shard of `shard` bytes: `NCCL_SYM_CTAS`
    /// when set, else one per [`SYM_MIN_UNIT`] up to [`SYM_BLOCKS`].
    pub(crate) fn blocks(&self, shard: usize) -> usize {
        self.ctas
            .unwrap_or_else(|| shard.div_ceil(SYM_MIN_UNIT).clamp(1, SYM_BLOCKS))
    }
}

/// Bytes of a shard per block of a symmetric kernel at least, before more blocks are used.
/// Half of what a block of 512 threads keeps in flight per pass (kernels/interp.cu `UNROLL` ×
/// 16 bytes per thread): more blocks keep more loads from the peers in flight. On 2×H200
/// (2026-11-29, `-g 2`, -R 2) 64 blocks ran 1 / 2 MB all-reduces in 14.6 / 16.9 µs against
/// 17.0 / 18.4 µs on the 16 / 32 blocks one per 32 KiB gave, and reduce-scatters in 13.5 /
/// 15.1 µs against 15.9 / 16.3.
pub(crate) const SYM_MIN_UNIT: usize = 16 << 10;

#[cfg(test)]
mod tests {
    use super::*;

    fn window() -> SymWindow {
        SymWindow::new(0x1000, 0x1000, vec![0x1000, 0x9000], vec![0x1000, 0x1000])
    }

    #[test]
    fn a_buffer_sits_at_the_same_offset_of_every_rank() {
        let w = window();
        assert_eq!(w.place(0x1100, 0x100), Some(vec![0x1100, 0x9100]));
        assert_eq!(w.place(0x1000, 0x1000), Some(vec![0x1000, 0x9000]));
        // Outside this rank's range, past its end, or empty.
        assert_eq!(w.place(0xf00, 0x10), None);
        assert_eq!(w.place(0x1f00, 0x200), None);
        assert_eq!(w.place(0x1100, 0), None);
        // Past the end of a smaller peer range.
        let w = SymWindow::new(0x1000, 0x1000, vec![0x1000, 0x9000], vec![0x1000, 0x800]);
        assert_eq!(w.place(0x1700, 0x100), Some(vec![0x1700, 0x9700]));
        assert_eq!(w.place(0x1700, 0x200), None);
    }

    #[test]
    fn a_window_leaves_with_its_last_handle() {
        let ws = SymWindows::default();
        let a = ws.add(window());
        let b = ws.add(SymWindow::new(
            0x8000,
            0x100,
            vec![0x8000, 0xa000],
            vec![0x100; 2],
        ));
        assert_eq!(ws.place(0x8010, 0x10), Some(vec![0x8010, 0xa010]));
        assert_eq!(ws.place(0x1010, 0x10), Some(vec![0x1010, 0x9010]));
        drop(a);
        assert_eq!(ws.place(0x1010, 0x10), None);
        drop(b);
        assert_eq!(ws.place(0x8010, 0x10), None);
        assert!(
            ws.live
                .lock()
                .unwrap()
                .iter()
                .all(|w| w.strong_count() == 0)
        );
    }

    fn kernels(pairs: &[(&str, &str)]) -> Result<SymKernels> {
        SymKernels::from_config(&Config::from_pairs(pairs).unwrap())
    }

    #[test]
    fn nccl_sym_kernel_names_one_kernel_or_all() {
        let all = kernels(&[]).unwrap();
        assert_eq!(all.mode(Func::AllReduce), Some(DirectMode::SymAllReduce));
        assert_eq!(
            all.mode(Func::ReduceScatter),
            Some(DirectMode::SymReduceScatter)
        );
        assert_eq!(all.mode(Func::AllGather), Some(DirectMode::SymAllGather));
        assert_eq!(all.mode(Func::Broadcast), None);
        assert_eq!(kernels(&[("NCCL_SYM_KERNEL", "^")]).unwrap(), all);
        let one = kernels(&[("NCCL_SYM_KERNEL", "AllGather_ST")]).unwrap();
        assert_eq!(one.mode(Func::AllGather), Some(DirectMode::SymAllGather));
        assert_eq!(one.mode(Func::AllReduce), None);
        let none = kernels(&[("NCCL_SYM_KERNEL", "AllReduce_AGxLL_R")]).unwrap();
        assert!(KERNELS.iter().all(|k| none.mode(k.0).is_none()));
        let off = kernels(&[("NCCL_WIN_ENABLE", "0")]).unwrap();
        assert!(KERNELS.iter().all(|k| off.mode(k.0).is_none()));
        assert_eq!(
            all.kernel(Func::ReduceScatter),
            Some((1, DirectMode::SymReduceScatter, "ReduceScatter_LD"))
        );
    }

    #[test]
    fn blocks_grow_with_the_shard_unless_nccl_sym_ctas_fixes_them() {
        let k = kernels(&[]).unwrap();
        assert_eq!(k.blocks(16), 1);
        assert_eq!(k.blocks(SYM_MIN_UNIT * 5), 5);
        assert_eq!(k.blocks(SYM_MIN_UNIT * 5 + 1), 6);
        assert_eq!(k.blocks(1 << 30), SYM_BLOCKS);
        let k = kernels(&[("NCCL_SYM_CTAS", "8")]).unwrap();
        assert_eq!(k.blocks(16), 8);
        assert_eq!(k.blocks(1 << 30), 8);
        let e = kernels(&[("NCCL_SYM_CTAS", "129")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("NCCL_SYM_CTAS"), "{e}");
    }
}
