//! Which kernel the GPU engine runs for one collective, from the function, the size of its
//! largest buffer, the ranks and the knobs (`NCCL_ALGO`, `NCCL_PROTO`, the channel bounds), for
//! `rnccl rings --tune`, which prints it beside NCCL's model. It asks the predicates and block
//! plans the launch path decides with (`plans::ll_allowed` and `direct_allowed`, `ll::blocks`,
//! `ll::direct_plan`, [`direct_block_bound`]), so the two cannot drift apart; the launch path
//! reads the knobs as rank 0 had them, this the caller's.

use serde::Serialize;

use super::ll;
use super::windows::SymKernels;
use crate::config::Config;
use crate::config::syntax::{AlgoProtoList, PROTOCOLS};
use crate::conn::MAX_CHANNELS;
use crate::device::cuda::abi::{DIRECT_BLOCKS, DirectMode, THREADS};
use crate::error::{Error, Result};
use crate::exec::plans::{direct_allowed, gpu_exchange, ll_allowed, sym_allowed};
use crate::func::Func;
use crate::graph::ChannelBounds;
use crate::transport::slot_size::slot_bytes;

/// The kernel rnccl's GPU engine runs for one collective.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kernel", rename_all = "snake_case")]
pub enum GpuKernel {
    /// The one-shot LL all-reduce (`kernels/ll.cuh`) on `blocks` thread blocks.
    Ll {
        /// Thread blocks.
        blocks: u32,
    },
    /// The direct kernel (`kernels/direct.cuh`): `blocks` thread blocks, each moving `unit`
    /// bytes of every shard per round, for at most `rounds` rounds.
    Direct {
        /// Thread blocks.
        blocks: u32,
        /// Bytes of a shard per block and round.
        unit: usize,
        /// Rounds of the busiest block.
        rounds: usize,
    },
    /// The step interpreter over the rings, with NCCL's Simple protocol.
    Ring,
    /// The step interpreter exchanging the buffer with the one peer, with NCCL's Simple
    /// protocol (`plans::gpu_exchange`).
    Exchange,
    /// A symmetric kernel (`kernels/symmetric.cuh`), on buffers in symmetric windows.
    Symmetric {
        /// Its name (NCCL's for the same shape: `AllReduce_RSxLD_AGxST`, `ReduceScatter_LD`,
        /// `AllGather_ST`).
        name: &'static str,
        /// Thread blocks.
        blocks: u32,
    },
}

impl std::fmt::Display for GpuKernel {
    /// `LL x8`, `Direct 128x64K x1`, `Ring/Simple`, `AllGather_ST x64`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GpuKernel::Ll { blocks } => write!(f, "LL x{blocks}"),
            GpuKernel::Direct {
                blocks,
                unit,
                rounds,
            } if unit % 1024 == 0 => write!(f, "Direct {blocks}x{}K x{rounds}", unit / 1024),
            GpuKernel::Direct {
                blocks,
                unit,
                rounds,
            } => write!(f, "Direct {blocks}x{unit}B x{rounds}"),
            GpuKernel::Ring => f.write_str("Ring/Simple"),
            GpuKernel::Exchange => f.write_str("Exchange/Simple"),
            GpuKernel::Symmetric { name, blocks } => write!(f, "{name} x{blocks}"),
        }
    }
}

/// The most thread blocks a direct kernel runs: [`DIRECT_BLOCKS`] (one per SM of the GPUs
/// rnccl runs on), or the channel knobs' bound (`NCCL_MAX_CTAS`, `NCCL_MAX_NCHANNELS`) where
/// one is set below [`MAX_CHANNELS`]. On 2×H200, 128 blocks ran 16 / 32 MB all-reduces in 66 /
/// 116 µs against 71 / 126 µs with 64 (2026-11-27, one process per GPU).
pub(crate) fn direct_block_bound(cfg: &Config) -> usize {
    match ChannelBounds::from_config(cfg) {
        Ok(b) if b.max < MAX_CHANNELS => b.max,
        _ => DIRECT_BLOCKS,
    }
}

/// The kernel rnccl runs for `func` whose largest buffer holds `bytes` bytes (nccl-tests'
/// size) over `nranks` GPU ranks on `nodes` nodes, with the knobs of `cfg`. On one node, where
/// every rank reaches the others over peer access: the one-shot LL kernel for all-reduces up
/// to 512 KiB, the direct kernel for all-reduce, all-gather, reduce-scatter, broadcast and
/// all-to-all in the sizes `plans::direct_sizes` gives. Otherwise (and across nodes) the
/// exchange for a small two-rank all-reduce (`plans::gpu_exchange`), the rings for the rest.
/// Ranks without peer access run as across nodes; the caller knows that, this does not.
///
/// Errors: [`Error::InvalidUsage`] for an `NCCL_PROTO` or `NCCL_BUFFSIZE` value that does not
/// parse.
pub fn gpu_kernel(
    cfg: &Config,
    func: Func,
    bytes: usize,
    nranks: usize,
    nodes: usize,
) -> Result<GpuKernel> {
    let slot = slot_bytes(cfg, nodes, true)?;
    let interp = || {
        if gpu_exchange(cfg.string("NCCL_ALGO"), func, bytes, nranks, slot) {
            GpuKernel::Exchange
        } else {
            GpuKernel::Ring
        }
    };
    if nodes > 1 {
        return Ok(interp());
    }
    let proto = proto_knob(cfg)?;
    if ll_allowed(proto.as_ref(), func, bytes) {
        return Ok(GpuKernel::Ll {
            blocks: ll::blocks(bytes, THREADS as usize, usize::MAX),
        });
    }
    if !direct_allowed(cfg.string("NCCL_ALGO"), proto.as_ref(), func, bytes, nranks) {
        return Ok(interp());
    }
    // The launch path hands the kernel the all-reduce's buffer, the others' per-rank part.
    let n = nranks.max(1);
    let (mode, per_rank) = match func {
        Func::AllReduce => (DirectMode::AllReduce, bytes),
        Func::AllGather => (DirectMode::AllGather, bytes / n),
        Func::ReduceScatter => (DirectMode::ReduceScatter, bytes / n),
        Func::Broadcast => (DirectMode::Broadcast, bytes),
        Func::AllToAll => (DirectMode::AllToAll, bytes / n),
        _ => return Ok(interp()),
    };
    let p = ll::direct_plan(mode, per_rank, n, direct_block_bound(cfg));
    Ok(GpuKernel::Direct {
        blocks: p.blocks,
        unit: p.unit,
        rounds: p.rounds,
    })
}

/// `NCCL_PROTO` of `cfg`, parsed (`None`: unset).
///
/// Errors: [`Error::InvalidUsage`] for a value that does not parse.
fn proto_knob(cfg: &Config) -> Result<Option<AlgoProtoList>> {
    cfg.string("NCCL_PROTO")
        .map(|raw| {
            AlgoProtoList::parse(raw, &PROTOCOLS)
                .map_err(|e| Error::invalid_usage(format!("NCCL_PROTO={raw:?}: {e}")))
        })
        .transpose()
}

/// The kernel rnccl runs as [`gpu_kernel`] says, when the collective's buffers lie in
/// symmetric windows (`ncclCommWindowRegister` with `NCCL_WIN_COLL_SYMMETRIC`, `rnccl bench
/// -R 2`): on one node a symmetric kernel for all-reduces above the LL sizes, reduce-scatters
/// and all-gathers, when `NCCL_ALGO` is unset, `NCCL_PROTO` allows Simple and
/// `NCCL_SYM_KERNEL` allows the kernel (`NCCL_SYM_CTAS` sets its blocks); [`gpu_kernel`]'s
/// choice otherwise.
///
/// Errors: as [`gpu_kernel`]; [`Error::InvalidUsage`] for an `NCCL_SYM_CTAS` out of 0-128.
pub fn gpu_kernel_in_windows(
    cfg: &Config,
    func: Func,
    bytes: usize,
    nranks: usize,
    nodes: usize,
) -> Result<GpuKernel> {
    let plain = gpu_kernel(cfg, func, bytes, nranks, nodes)?;
    if nodes > 1 {
        return Ok(plain);
    }
    let proto = proto_knob(cfg)?;
    if !sym_allowed(cfg.string("NCCL_ALGO"), proto.as_ref(), func, bytes) {
        return Ok(plain);
    }
    let kernels = SymKernels::from_config(cfg)?;
    let Some((_, mode, name)) = kernels.kernel(func) else {
        return Ok(plain);
    };
    // The launch path hands the kernel the all-reduce's buffer, the others' per-rank part.
    let n = nranks.max(1);
    let per_rank = if func == Func::AllReduce {
        bytes
    } else {
        bytes / n
    };
    let p = ll::sym_plan(mode, per_rank, n, &kernels, usize::MAX);
    Ok(GpuKernel::Symmetric {
        name,
        blocks: p.blocks,
    })
}

/// The kernel rnccl runs as [`gpu_kernel`] says, when one thread drives every rank of the
/// communicator in one group (`ncclCommInitAll`, nccl-tests and `rnccl bench` with `-g N`) on
/// plain buffers every GPU reaches: [`gpu_kernel_in_windows`]' symmetric kernel from 1 to 64 MiB
/// of the larger buffer (`bytes`, as nccl-tests counts sizes) on two or more ranks, and
/// `AllToAll_ST` (`SendRecv_ST` sending block p to rank p) for all-to-alls above 64 MiB, unless
/// `NCCL_P2P_DIRECT_DISABLE` is set (`exec::gpu::group_buffers`); [`gpu_kernel`]'s choice
/// otherwise.
///
/// Errors: as [`gpu_kernel_in_windows`]; [`Error::InvalidUsage`] for an
/// `NCCL_P2P_DIRECT_DISABLE` that is not a switch.
pub fn gpu_kernel_in_group(
    cfg: &Config,
    func: Func,
    bytes: usize,
    nranks: usize,
    nodes: usize,
) -> Result<GpuKernel> {
    let disabled = cfg
        .flag("NCCL_P2P_DIRECT_DISABLE")
        .map_err(|e| Error::invalid_usage(e.to_string()))?;
    if disabled || nranks < 2 || !super::group_buffers::group_size(func, bytes, nranks) {
        return gpu_kernel(cfg, func, bytes, nranks, nodes);
    }
    let proto = proto_knob(cfg)?;
    let sends = match func {
        Func::AllToAll => Some(("AllToAll_ST", bytes / nranks)),
        Func::Broadcast => Some(("Broadcast_ST", bytes)),
        _ => None,
    };
    if let Some((name, largest)) = sends
        && nodes == 1
        && sym_allowed(cfg.string("NCCL_ALGO"), proto.as_ref(), func, bytes)
    {
        // `SendRecv_ST` with a send of block p to every rank p, or of the root's buffer.
        let kernels = SymKernels::from_config(cfg)?;
        let p = ll::sym_plan(
            DirectMode::SymSendRecv,
            largest,
            nranks,
            &kernels,
            usize::MAX,
        );
        return Ok(GpuKernel::Symmetric {
            name,
            blocks: p.blocks,
        });
    }
    gpu_kernel_in_windows(cfg, func, bytes, nranks, nodes)
}

/// The kernel rnccl's GPU engine runs for one collective of `func` (as [`gpu_kernel`]) when
/// every rank registered its buffers with `ncclCommRegister` and runs in its own process or
/// thread (`-R 1`, PyTorch's allocator hook): where [`gpu_kernel`] runs the direct kernel on 1
/// to 64 MiB (the sizes a group's own buffers take the symmetric kernels at), the registered
/// kernel (kernels/registered.cuh) runs the symmetric kernel [`gpu_kernel_in_windows`] names;
/// elsewhere the same kernel as on plain buffers.
///
/// Errors: as [`gpu_kernel`].
pub fn gpu_kernel_registered(
    cfg: &Config,
    func: Func,
    bytes: usize,
    nranks: usize,
    nodes: usize,
) -> Result<GpuKernel> {
    let plain = gpu_kernel(cfg, func, bytes, nranks, nodes)?;
    if !matches!(plain, GpuKernel::Direct { .. })
        || !super::group_buffers::group_size(func, bytes, nranks)
    {
        return Ok(plain);
    }
    gpu_kernel_in_windows(cfg, func, bytes, nranks, nodes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registered_buffers_run_the_symmetric_kernels_where_the_direct_kernel_would() {
        let cfg = Config::from_pairs(&[]).unwrap();
        let k = |func, bytes| {
            (
                gpu_kernel(&cfg, func, bytes, 2, 1).unwrap(),
                gpu_kernel_registered(&cfg, func, bytes, 2, 1).unwrap(),
            )
        };
        let mut any = false;
        for func in [
            Func::AllReduce,
            Func::ReduceScatter,
            Func::AllGather,
            Func::Broadcast,
        ] {
            for bytes in [8usize, 64 << 10, 1 << 20, 8 << 20, 32 << 20, 1 << 30] {
                let (plain, reg) = k(func, bytes);
                let sym = matches!(reg, GpuKernel::Symmetric { .. });
                let want = matches!(plain, GpuKernel::Direct { .. })
                    && func != Func::Broadcast
                    && (1 << 20..=64 << 20).contains(&bytes);
                assert_eq!(
                    sym, want,
                    "{func:?} {bytes}: plain {plain}, registered {reg}"
                );
                if !sym {
                    assert_eq!(plain, reg, "{func:?} {bytes}");
                }
                any |= sym;
            }
        }
        assert!(any, "the direct kernel runs somewhere");
        // Across nodes no rank maps another's buffers.
        assert_eq!(
            gpu_kernel_registered(&cfg, Func::AllReduce, 8 << 20, 2, 2).unwrap(),
            GpuKernel::Ring
        );
    }

    #[test]
    fn symmetric_windows_run_the_symmetric_kernels() {
        let sym = |knobs: &[(&str, &str)], func, bytes, nodes| {
            let cfg = Config::from_pairs(knobs).unwrap();
            gpu_kernel_in_windows(&cfg, func, bytes, 2, nodes)
                .unwrap()
                .to_string()
        };
        assert_eq!(
            sym(&[], Func::AllReduce, 8 << 20, 1),
            "AllReduce_RSxLD_AGxST x128"
        );
        assert_eq!(
            sym(&[], Func::AllReduce, 8, 1),
            "LL x1",
            "the LL sizes stay LL"
        );
        assert_eq!(
            sym(&[], Func::ReduceScatter, 64 << 20, 1),
            "ReduceScatter_LD x128"
        );
        assert_eq!(sym(&[], Func::AllGather, 64 << 10, 1), "AllGather_ST x2");
        assert_eq!(sym(&[], Func::Broadcast, 8 << 20, 1), "Direct 128x64K x1");
        assert_eq!(
            sym(&[], Func::AllReduce, 8 << 20, 2),
            "Ring/Simple",
            "across nodes"
        );
        assert_eq!(
            sym(&[("NCCL_ALGO", "Ring")], Func::AllReduce, 8 << 20, 1),
            "Ring/Simple"
        );
        assert_eq!(
            sym(
                &[("NCCL_SYM_KERNEL", "AllGather_ST")],
                Func::AllReduce,
                8 << 20,
                1
            ),
            "Direct 128x32K x1"
        );
        assert_eq!(
            sym(&[("NCCL_SYM_CTAS", "8")], Func::AllGather, 64 << 20, 1),
            "AllGather_ST x8"
        );
    }

    #[test]
    fn a_group_of_every_rank_runs_the_symmetric_kernels_from_one_to_64_mebibytes() {
        let group = |knobs: &[(&str, &str)], func, bytes, n, nodes| {
            let cfg = Config::from_pairs(knobs).unwrap();
            gpu_kernel_in_group(&cfg, func, bytes, n, nodes)
                .unwrap()
                .to_string()
        };
        assert_eq!(
            group(&[], Func::AllReduce, 8 << 20, 2, 1),
            "AllReduce_RSxLD_AGxST x128"
        );
        assert_eq!(
            group(&[], Func::ReduceScatter, 1 << 20, 2, 1),
            "ReduceScatter_LD x32"
        );
        assert_eq!(
            group(&[], Func::AllGather, 64 << 20, 2, 1),
            "AllGather_ST x128"
        );
        // An all-to-all above 64 MiB, and a broadcast there on two ranks.
        assert_eq!(
            group(&[], Func::Broadcast, 128 << 20, 2, 1),
            "Broadcast_ST x128"
        );
        assert_eq!(
            group(&[], Func::AllToAll, 1 << 30, 4, 1),
            "AllToAll_ST x128"
        );
        // Outside 1-64 MiB, with the knob, on one rank, across nodes, or a broadcast: as plain.
        for (knobs, func, bytes, n, nodes) in [
            (&[][..], Func::AllGather, 512 << 10, 2, 1),
            (&[][..], Func::AllReduce, 128 << 20, 2, 1),
            (
                &[("NCCL_P2P_DIRECT_DISABLE", "1")][..],
                Func::AllReduce,
                8 << 20,
                2,
                1,
            ),
            (&[][..], Func::AllReduce, 8 << 20, 1, 1),
            (&[][..], Func::AllReduce, 8 << 20, 2, 2),
            (&[][..], Func::Broadcast, 8 << 20, 2, 1),
            (&[][..], Func::AllToAll, 64 << 20, 2, 1),
            (&[][..], Func::Broadcast, 64 << 20, 2, 1),
            (&[][..], Func::Broadcast, 128 << 20, 4, 1),
            (&[][..], Func::AllToAll, 128 << 20, 2, 2),
            (
                &[("NCCL_ALGO", "Ring")][..],
                Func::AllToAll,
                128 << 20,
                2,
                1,
            ),
        ] {
            let plain = kernel(knobs, func, bytes, n);
            let plain = match nodes {
                1 => plain.to_string(),
                _ => gpu_kernel(&Config::defaults(), func, bytes, n, nodes)
                    .unwrap()
                    .to_string(),
            };
            assert_eq!(
                group(knobs, func, bytes, n, nodes),
                plain,
                "{func:?} {bytes}"
            );
        }
        let bad = Config::from_pairs(&[("NCCL_P2P_DIRECT_DISABLE", "maybe")]).unwrap();
        let e = gpu_kernel_in_group(&bad, Func::AllReduce, 8 << 20, 2, 1).unwrap_err();
        assert!(e.to_string().contains("NCCL_P2P_DIRECT_DISABLE"), "{e}");
    }

    fn kernel(knobs: &[(&str, &str)], func: Func, bytes: usize, n: usize) -> GpuKernel {
        gpu_kernel(&Config::from_pairs(knobs).unwrap(), func, bytes, n, 1).unwrap()
    }

    #[test]
    fn sizes_pick_ll_then_direct_then_the_ring() {
        let ar = |bytes, n| kernel(&[], Func::AllReduce, bytes, n);
        assert!(matches!(ar(8, 2), GpuKernel::Ll { blocks: 1 }));
        assert!(matches!(ar(512 << 10, 2), GpuKernel::Ll { .. }));
        assert_eq!(
            ar(8 << 20, 2),
            GpuKernel::Direct {
                blocks: 128,
                unit: 32 << 10,
                rounds: 1
            }
        );
        assert_eq!(ar(8 << 20, 2).to_string(), "Direct 128x32K x1");
        assert_eq!(ar(32 << 20, 4).to_string(), "Direct 128x64K x1");
        assert_eq!(ar(1 << 30, 2).to_string(), "Direct 128x64K x64");
        // All-gather and reduce-scatter: no LL, the largest buffer sets the window.
        assert_eq!(
            kernel(&[], Func::AllGather, 8, 2).to_string(),
            "Direct 1x16B x1"
        );
        assert_eq!(
            kernel(&[], Func::ReduceScatter, 64 << 20, 2),
            GpuKernel::Ring
        );
        assert!(matches!(
            kernel(&[], Func::ReduceScatter, 32 << 20, 4),
            GpuKernel::Direct { .. }
        ));
        assert_eq!(
            kernel(&[], Func::Broadcast, 8 << 20, 2).to_string(),
            "Direct 128x64K x1",
            "the root's whole buffer is the one shard"
        );
        assert_eq!(
            kernel(&[], Func::AllToAll, 8 << 20, 4).to_string(),
            "Direct 128x16K x1",
            "a block per peer"
        );
        assert_eq!(kernel(&[], Func::Reduce, 8 << 20, 2), GpuKernel::Ring);
    }

    #[test]
    fn knobs_move_the_choice() {
        let ar = |knobs: &[(&str, &str)], bytes| kernel(knobs, Func::AllReduce, bytes, 2);
        assert_eq!(ar(&[("NCCL_ALGO", "Ring")], 8 << 20), GpuKernel::Ring);
        assert_eq!(ar(&[("NCCL_PROTO", "Simple")], 8), GpuKernel::Exchange);
        assert_eq!(
            ar(&[("NCCL_PROTO", "Simple"), ("NCCL_ALGO", "Ring")], 8),
            GpuKernel::Ring
        );
        assert_eq!(
            kernel(&[("NCCL_PROTO", "Simple")], Func::AllReduce, 8, 4),
            GpuKernel::Ring
        );
        // Across nodes neither LL nor the direct kernel: the exchange, then the rings.
        let across = |bytes, n| gpu_kernel(&Config::defaults(), Func::AllReduce, bytes, n, 2);
        assert_eq!(across(8, 2).unwrap(), GpuKernel::Exchange);
        assert_eq!(across(64 << 10, 2).unwrap(), GpuKernel::Exchange);
        assert_eq!(across(128 << 10, 2).unwrap(), GpuKernel::Ring);
        assert_eq!(across(8, 4).unwrap(), GpuKernel::Ring);
        assert_eq!(across(8, 2).unwrap().to_string(), "Exchange/Simple");
        assert!(matches!(
            ar(&[("NCCL_PROTO", "LL")], 8 << 20),
            GpuKernel::Ll { .. }
        ));
        assert_eq!(
            ar(&[("NCCL_MAX_CTAS", "16")], 8 << 20).to_string(),
            "Direct 16x64K x4"
        );
        assert!(
            gpu_kernel(
                &Config::from_pairs(&[("NCCL_PROTO", "Fast")]).unwrap(),
                Func::AllReduce,
                8,
                2,
                1
            )
            .is_err()
        );
    }
}
