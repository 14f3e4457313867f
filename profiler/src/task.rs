//! What a collective or point-to-point task of NVIDIA NCCL is, as its profiler event describes
//! it in strings, turned into rnccl's terms; and how many bytes each of its channels moves.
//!
//! NCCL's kernels tell the profiler when each channel's work starts and ends, not how many
//! bytes it moved. The plugin charges each channel an equal share of the bytes a rank sends
//! (and receives) for the task: nccl-tests' bus bytes (doc/PERFORMANCE.md, "bus bandwidth":
//! all-reduce 2(n-1)/n × S, all-gather and reduce-scatter (n-1)/n × S of the whole buffer,
//! broadcast and reduce S), so the rates `rnccl top` shows for NCCL add up to nccl-tests' busbw.

use rnccl::{DataType, Func};

/// A task of a launched plan, in rnccl's terms.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Task {
    /// The function.
    pub func: Func,
    /// Elements as NCCL counts them (per rank for AllGather and ReduceScatter).
    pub count: usize,
    /// The element type.
    pub dtype: DataType,
    /// Root rank (Broadcast, Reduce) or peer rank (Send, Recv).
    pub root_or_peer: usize,
    /// Channels it runs on (at least 1).
    pub nchannels: usize,
    /// NCCL's algorithm, in NCCL_ALGO's spelling ("Ring", "Tree", …; "Direct" for Send/Recv).
    pub algo: &'static str,
}

/// `ncclFuncToString`'s name → the function; `None` for names rnccl has no function for
/// (NCCL's internal "SendRecv", "Invalid").
pub fn func_from_nccl(name: &str) -> Option<Func> {
    Some(match name {
        "Broadcast" => Func::Broadcast,
        "Reduce" => Func::Reduce,
        "AllGather" => Func::AllGather,
        "ReduceScatter" => Func::ReduceScatter,
        "AllReduce" => Func::AllReduce,
        "AlltoAll" => Func::AllToAll,
        "Gather" => Func::Gather,
        "Scatter" => Func::Scatter,
        "Send" => Func::Send,
        "Recv" => Func::Recv,
        _ => return None,
    })
}

/// `ncclDatatypeToString`'s name → the type. NCCL 2.28's function has no case for ncclUint8
/// (it says "Unknown") and rnccl has no 8-bit float types: all of them are 1-byte elements and
/// are shown as uint8, which keeps byte counts right.
pub fn dtype_from_nccl(name: &str) -> DataType {
    match name {
        "ncclInt8" => DataType::Int8,
        "ncclInt32" => DataType::Int32,
        "ncclUint32" => DataType::Uint32,
        "ncclInt64" => DataType::Int64,
        "ncclUint64" => DataType::Uint64,
        "ncclFloat16" => DataType::Float16,
        "ncclFloat32" => DataType::Float32,
        "ncclFloat64" => DataType::Float64,
        "ncclBfloat16" => DataType::Bfloat16,
        _ => DataType::Uint8,
    }
}

/// `ncclAlgoToString`'s name → NCCL_ALGO's spelling, as counter pages carry it.
pub fn algo_from_nccl(name: &str) -> &'static str {
    match name {
        "TREE" => "Tree",
        "COLLNET_DIRECT" => "CollNetDirect",
        "COLLNET_CHAIN" => "CollNetChain",
        "NVLS" => "NVLS",
        "NVLS_TREE" => "NVLSTree",
        "PAT" => "PAT",
        _ => "Ring",
    }
}

impl Task {
    /// Bytes this rank sends and receives for the whole task on `nranks` ranks, (send, recv),
    /// after nccl-tests' bus bytes (see the module docs).
    pub fn bus_bytes(&self, rank: usize, nranks: usize) -> (u64, u64) {
        let s = (self.count * self.dtype.size()) as u64;
        let n = nranks as u64;
        if n < 2 {
            return (0, 0);
        }
        let root = self.root_or_peer == rank;
        match self.func {
            Func::AllReduce => {
                let b = 2 * (n - 1) * s / n;
                (b, b)
            }
            Func::AllGather | Func::ReduceScatter | Func::AllToAll => {
                let b = (n - 1) * s;
                (b, b)
            }
            // A chain from the root: the root only sends, the others receive (and forward).
            Func::Broadcast | Func::Scatter => {
                (if root || n > 2 { s } else { 0 }, if root { 0 } else { s })
            }
            // Towards the root: the root only receives.
            Func::Reduce | Func::Gather => {
                (if root { 0 } else { s }, if root || n > 2 { s } else { 0 })
            }
            Func::Send => (s, 0),
            Func::Recv => (0, s),
        }
    }

    /// Channel `c`'s share of `total` bytes over this task's channels: equal parts, the first
    /// `total % nchannels` channels one byte more.
    pub fn channel_share(&self, total: u64, c: usize) -> u64 {
        let n = self.nchannels.max(1) as u64;
        total / n + u64::from((c as u64 % n) < total % n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(func: Func, count: usize) -> Task {
        Task {
            func,
            count,
            dtype: DataType::Float32,
            root_or_peer: 0,
            nchannels: 3,
            algo: "Ring",
        }
    }

    #[test]
    fn bus_bytes_follow_nccl_tests() {
        // 1 MiB of float32 on 4 ranks.
        let n = 1 << 18;
        assert_eq!(task(Func::AllReduce, n).bus_bytes(1, 4), (1572864, 1572864));
        assert_eq!(task(Func::AllGather, n).bus_bytes(1, 4), (3 << 20, 3 << 20));
        assert_eq!(task(Func::Broadcast, n).bus_bytes(0, 2), (1 << 20, 0));
        assert_eq!(task(Func::Broadcast, n).bus_bytes(1, 2), (0, 1 << 20));
        assert_eq!(task(Func::Reduce, n).bus_bytes(1, 2), (1 << 20, 0));
        assert_eq!(task(Func::Send, n).bus_bytes(0, 2), (1 << 20, 0));
        assert_eq!(task(Func::AllReduce, n).bus_bytes(0, 1), (0, 0));
    }

    #[test]
    fn channel_shares_add_up() {
        let t = task(Func::AllReduce, 0);
        let total = 1_000_001;
        let sum: u64 = (0..3).map(|c| t.channel_share(total, c)).sum();
        assert_eq!(sum, total);
    }

    #[test]
    fn nccl_names_map() {
        assert_eq!(func_from_nccl("AllReduce"), Some(Func::AllReduce));
        assert_eq!(func_from_nccl("AlltoAll"), Some(Func::AllToAll));
        assert_eq!(func_from_nccl("SendRecv"), None);
        assert_eq!(dtype_from_nccl("ncclBfloat16"), DataType::Bfloat16);
        assert_eq!(dtype_from_nccl("Unknown"), DataType::Uint8);
        assert_eq!(algo_from_nccl("NVLS_TREE"), "NVLSTree");
        assert_eq!(algo_from_nccl("RING"), "Ring");
    }
}
