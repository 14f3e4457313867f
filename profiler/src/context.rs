//! One NCCL communicator rank as the plugin sees it: the counters its page shows, and the
//! events NCCL reports on it, kept in a fixed pool of slots.
//!
//! Event handles are pointers to slots of the context's pool, which lives until NCCL finalizes
//! the context (NCCL stops reporting events on it before). NCCL stops a collective's event
//! right after launching it and reports its kernel channels later, from its proxy thread, once
//! the GPU reached them (src/transport/profiler.cc polls the kernels' work counters), with the
//! collective's handle as parent: so a slot is never freed, and every field is an atomic.
//!
//! The pool is two rings, each reused oldest first: [`TASK_SLOTS`] for tasks, which live from
//! their launch until the GPU ran them (a program like nccl-tests queues hundreds of
//! collectives ahead of the GPU), and [`EVENT_SLOTS`] for kernel channels, proxy operations and
//! steps, which live while the GPU or the proxy works on them. A kernel channel takes its byte
//! shares from its task when it starts, so it counts its bytes even if its task's slot was
//! reused before it stopped. A slot reused while an old child still names it can only charge
//! an operation's progress to the wrong task, never touch freed memory.

use std::collections::HashMap;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use rnccl::stats::page::{CommMeta, Published};
use rnccl::stats::{Direction, LinkCounters, LinkSnapshot, OpInfo, OpProgress, Path, UNKNOWN_PEER};
use rnccl::{DataType, Func};

use crate::task::Task;

/// Task slots per context: far more collectives than one rank queues ahead of its GPU (with
/// one ring of 8192 slots for every event, nccl-tests' 256 MiB all_reduce on 2×H200 lost about
/// three quarters of its bytes: its queued tasks were overwritten by other tasks' channels).
pub const TASK_SLOTS: usize = 16384;

/// Slots for the other events of a context: far more than run at once (one kernel-channel event
/// per channel of the operations on the GPU now, and the proxy's network operations and steps).
pub const EVENT_SLOTS: usize = 8192;

/// Slots per context: the task ring, then the event ring.
const POOL: usize = TASK_SLOTS + EVENT_SLOTS;

/// What a slot holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u64)]
enum Kind {
    Free = 0,
    Task = 1,
    KernelCh = 2,
    ProxyOp = 3,
    ProxyStep = 4,
}

/// One event: a task (collective or send/receive), one channel of its kernel work, a proxy
/// operation (one channel and peer of a network transfer) or one step of it.
#[derive(Default)]
pub struct Slot {
    /// The context whose pool holds the slot (set once, when the context is made).
    owner: AtomicPtr<Context>,
    kind: AtomicU64,
    /// The parent slot's index (kernel channel, proxy operation → task; step → operation).
    parent: AtomicUsize,
    /// Task: [`Task`] packed by [`pack`]; kernel channel: channel | peer << 16; proxy
    /// operation: channel | peer << 8 | is_send << 40; step: bytes of the step.
    a: AtomicU64,
    /// Task: count (elements); kernel channel: bytes it sends.
    b: AtomicU64,
    /// Task: kernel channels not finished yet; kernel channel: bytes it receives.
    left: AtomicU64,
}

impl Slot {
    /// The context whose pool holds this slot.
    pub fn owner(&self) -> *const Context {
        self.owner.load(Ordering::Acquire)
    }
}

/// A link's counters by (channel, peer, direction, path).
type LinkKey = (u16, usize, Direction, Path);

/// One NCCL communicator rank.
pub struct Context {
    meta: CommMeta,
    op: OpProgress,
    links: Mutex<HashMap<LinkKey, Arc<LinkCounters>>>,
    slots: Box<[Slot]>,
    /// Slots taken so far from the task ring and from the event ring.
    next_task: AtomicUsize,
    next_event: AtomicUsize,
    /// Operations begun (the page's sequence numbers) and not yet finished.
    ops: Mutex<(u64, u64)>,
}

fn pack(t: &Task) -> u64 {
    let algo = ALGOS.iter().position(|&a| a == t.algo).unwrap_or(0) as u64;
    (t.func as u64)
        | (t.dtype as u64) << 8
        | (algo << 16)
        | ((t.nchannels as u64) & 0xff) << 24
        | (t.root_or_peer as u64 & 0xffff_ffff) << 32
}

fn unpack(a: u64, count: u64) -> Option<Task> {
    Some(Task {
        func: *Func::ALL.get((a & 0xff) as usize)?,
        dtype: *DataType::ALL.get(((a >> 8) & 0xff) as usize)?,
        algo: ALGOS.get(((a >> 16) & 0xff) as usize)?,
        nchannels: (((a >> 24) & 0xff) as usize).max(1),
        root_or_peer: (a >> 32) as usize,
        count: count as usize,
    })
}

/// NCCL_ALGO's names a task can carry.
const ALGOS: [&str; 8] = [
    "Ring",
    "Tree",
    "Direct",
    "CollNetDirect",
    "CollNetChain",
    "NVLS",
    "NVLSTree",
    "PAT",
];

impl Context {
    /// A rank `rank` of `nranks` of the communicator NCCL calls `comm_id` (its hash, the same
    /// on every rank), on CUDA device `device` when known.
    pub fn new(comm_id: u64, rank: usize, nranks: usize, device: Option<usize>) -> Arc<Context> {
        let ctx = Arc::new(Context {
            meta: CommMeta {
                comm_id,
                rank,
                nranks,
                device,
            },
            op: OpProgress::default(),
            links: Mutex::new(HashMap::new()),
            slots: (0..POOL).map(|_| Slot::default()).collect(),
            next_task: AtomicUsize::new(0),
            next_event: AtomicUsize::new(0),
            ops: Mutex::new((0, 0)),
        });
        let me = Arc::as_ptr(&ctx).cast_mut();
        for s in ctx.slots.iter() {
            s.owner.store(me, Ordering::Release);
        }
        ctx
    }

    /// A fresh slot of `kind` under `parent`, from the task ring or the event ring; returns its
    /// index.
    fn take(&self, kind: Kind, parent: usize, a: u64, b: u64, left: u64) -> usize {
        let i = if kind == Kind::Task {
            self.next_task.fetch_add(1, Ordering::Relaxed) % TASK_SLOTS
        } else {
            TASK_SLOTS + self.next_event.fetch_add(1, Ordering::Relaxed) % EVENT_SLOTS
        };
        let s = &self.slots[i];
        s.kind.store(Kind::Free as u64, Ordering::Release);
        s.parent.store(parent, Ordering::Relaxed);
        s.a.store(a, Ordering::Relaxed);
        s.b.store(b, Ordering::Relaxed);
        s.left.store(left, Ordering::Relaxed);
        s.kind.store(kind as u64, Ordering::Release);
        i
    }

    /// The slot behind a handle, if `h` points into this context's pool.
    pub fn index_of(&self, h: *const Slot) -> Option<usize> {
        let base = self.slots.as_ptr() as usize;
        let off = (h as usize).checked_sub(base)?;
        let size = std::mem::size_of::<Slot>();
        (off % size == 0 && off / size < POOL).then_some(off / size)
    }

    /// The handle of slot `i`.
    pub fn handle(&self, i: usize) -> *mut Slot {
        std::ptr::from_ref(&self.slots[i]).cast_mut()
    }

    fn kind(&self, i: usize) -> Kind {
        match self.slots[i].kind.load(Ordering::Acquire) {
            1 => Kind::Task,
            2 => Kind::KernelCh,
            3 => Kind::ProxyOp,
            4 => Kind::ProxyStep,
            _ => Kind::Free,
        }
    }

    fn task(&self, i: usize) -> Option<Task> {
        let s = &self.slots[i];
        (self.kind(i) == Kind::Task)
            .then(|| unpack(s.a.load(Ordering::Relaxed), s.b.load(Ordering::Relaxed)))
            .flatten()
    }

    fn link(&self, key: LinkKey) -> Arc<LinkCounters> {
        let mut links = self.links.lock().unwrap_or_else(|p| p.into_inner());
        links.entry(key).or_default().clone()
    }

    /// A task starts (NCCL launched its plan): it becomes the operation in flight. Returns its
    /// slot.
    pub fn start_task(&self, t: Task) -> usize {
        let i = self.take(
            Kind::Task,
            usize::MAX,
            pack(&t),
            t.count as u64,
            t.nchannels as u64,
        );
        let mut ops = self.ops.lock().unwrap_or_else(|p| p.into_inner());
        ops.0 += 1;
        ops.1 += 1;
        let info = OpInfo {
            seq: ops.0,
            func: t.func,
            count: t.count,
            dtype: t.dtype,
            fused: 1,
            algo: t.algo,
            nchannels: t.nchannels,
            direct: false,
        };
        self.op.begin(info, t.nchannels as u64);
        i
    }

    /// Channel `channel` of the task in slot `parent` starts its kernel work, with its share of
    /// the task's bytes; returns the new slot, or `None` when `parent` is no task (an event
    /// NCCL reported under a parent this plugin did not keep).
    pub fn start_kernel_channel(&self, parent: usize, channel: u8) -> Option<usize> {
        let t = self.task(parent)?;
        let (rank, n) = (self.meta.rank, self.meta.nranks);
        let (send, recv) = t.bus_bytes(rank, n);
        let peer = match t.func {
            Func::Send | Func::Recv => t.root_or_peer,
            // Two ranks: every channel's only peer is the other rank.
            _ if n == 2 => 1 - rank,
            _ => UNKNOWN_PEER,
        };
        let a = u64::from(channel) | (peer as u64 & 0xffff_ffff) << 16;
        let c = usize::from(channel);
        let (send, recv) = (t.channel_share(send, c), t.channel_share(recv, c));
        Some(self.take(Kind::KernelCh, parent, a, send, recv))
    }

    /// The kernel work of slot `i`'s channel ended: the channel is charged its share of the
    /// task's bytes, and the task finishes with its last channel.
    pub fn stop_kernel_channel(&self, i: usize) {
        if self.kind(i) != Kind::KernelCh {
            return;
        }
        let s = &self.slots[i];
        s.kind.store(Kind::Free as u64, Ordering::Release);
        let parent = s.parent.load(Ordering::Relaxed);
        let a = s.a.load(Ordering::Relaxed);
        let (channel, peer) = ((a & 0xffff) as u16, ((a >> 16) & 0xffff_ffff) as usize);
        let (send, recv) = (s.b.load(Ordering::Relaxed), s.left.load(Ordering::Relaxed));
        for (bytes, dir) in [(send, Direction::Send), (recv, Direction::Recv)] {
            if bytes > 0 {
                self.link((channel, peer, dir, Path::NcclKernel))
                    .add(bytes as usize);
            }
        }
        let Some(t) = self.task(parent) else { return };
        let (send, recv) = t.bus_bytes(self.meta.rank, self.meta.nranks);
        let p = &self.slots[parent];
        if p.left.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.finish_task(parent);
        } else {
            let total = t.nchannels as u64;
            let done = total.saturating_sub(p.left.load(Ordering::Relaxed));
            self.op
                .update(total, done, (send.max(recv) * done) / total.max(1));
        }
    }

    /// Every kernel channel of the task in slot `i` ended.
    fn finish_task(&self, i: usize) {
        self.slots[i]
            .kind
            .store(Kind::Free as u64, Ordering::Release);
        let mut ops = self.ops.lock().unwrap_or_else(|p| p.into_inner());
        ops.1 = ops.1.saturating_sub(1);
        if ops.1 == 0 {
            self.op.end();
        } else {
            self.op.count_completed(1);
        }
    }

    /// A proxy operation (network) of the task in slot `parent` starts on `channel` with
    /// `peer`; returns its slot.
    pub fn start_proxy_op(&self, parent: usize, channel: u8, peer: usize, send: bool) -> usize {
        let a = u64::from(channel) | (peer as u64 & 0xffff_ffff) << 8 | u64::from(send) << 40;
        self.take(Kind::ProxyOp, parent, a, 0, 0)
    }

    /// A step of the proxy operation in slot `parent` starts; returns its slot, or `None`
    /// when `parent` is no proxy operation.
    pub fn start_proxy_step(&self, parent: usize) -> Option<usize> {
        (self.kind(parent) == Kind::ProxyOp).then(|| self.take(Kind::ProxyStep, parent, 0, 0, 0))
    }

    /// NCCL reports the bytes of the step in slot `i` (its `transSize`).
    pub fn step_bytes(&self, i: usize, bytes: usize) {
        if self.kind(i) == Kind::ProxyStep {
            self.slots[i].a.store(bytes as u64, Ordering::Relaxed);
        }
    }

    /// The step in slot `i` ended: its bytes count on its operation's link.
    pub fn stop_proxy_step(&self, i: usize) {
        if self.kind(i) != Kind::ProxyStep {
            return;
        }
        let s = &self.slots[i];
        s.kind.store(Kind::Free as u64, Ordering::Release);
        let op = s.parent.load(Ordering::Relaxed);
        if self.kind(op) != Kind::ProxyOp {
            return;
        }
        let a = self.slots[op].a.load(Ordering::Relaxed);
        let (channel, peer) = ((a & 0xff) as u16, ((a >> 8) & 0xffff_ffff) as usize);
        let dir = if a >> 40 & 1 == 1 {
            Direction::Send
        } else {
            Direction::Recv
        };
        let bytes = s.a.load(Ordering::Relaxed) as usize;
        self.link((channel, peer, dir, Path::NcclNet)).add(bytes);
    }

    /// Any other event of slot `i` ends (a task's end is its last kernel channel's, a proxy
    /// operation's is its steps').
    pub fn stop(&self, i: usize) {
        match self.kind(i) {
            Kind::KernelCh => self.stop_kernel_channel(i),
            Kind::ProxyStep => self.stop_proxy_step(i),
            Kind::ProxyOp => self.slots[i]
                .kind
                .store(Kind::Free as u64, Ordering::Release),
            Kind::Task | Kind::Free => {}
        }
    }
}

impl Published for Context {
    fn meta(&self) -> CommMeta {
        self.meta
    }

    fn links(&self) -> Vec<LinkSnapshot> {
        let links = self.links.lock().unwrap_or_else(|p| p.into_inner());
        let mut out: Vec<LinkSnapshot> = links
            .iter()
            .map(|(&(channel, peer, direction, transport), c)| LinkSnapshot {
                peer,
                channel,
                index: 0,
                direction,
                transport,
                bytes: c.bytes(),
                slots: c.slots(),
                wait_ns: 0,
                stalled_ns: 0,
            })
            .collect();
        out.sort_by_key(|l| (l.channel, l.peer, l.direction as u8));
        out
    }

    fn op(&self) -> &OpProgress {
        &self.op
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_reduce(count: usize, nchannels: usize) -> Task {
        Task {
            func: Func::AllReduce,
            count,
            dtype: DataType::Float32,
            root_or_peer: 0,
            nchannels,
            algo: "Ring",
        }
    }

    #[test]
    fn kernel_channels_add_up_to_the_bus_bytes_and_finish_the_task() {
        let c = Context::new(7, 0, 2, Some(0));
        let t = c.start_task(all_reduce(1 << 20, 4));
        assert!(c.op.snapshot().is_some(), "the task is in flight");
        let chans: Vec<usize> = (0..4)
            .map(|ch| c.start_kernel_channel(t, ch).unwrap())
            .collect();
        for &k in &chans[..3] {
            c.stop(k);
        }
        assert!(c.op.snapshot().is_some(), "one channel is still running");
        c.stop(chans[3]);
        assert!(
            c.op.snapshot().is_none(),
            "the last channel finished the task"
        );
        assert_eq!(c.op.completed(), 1);
        let links = c.links();
        assert_eq!(links.len(), 8, "4 channels × send and receive: {links:?}");
        let sent: u64 = links
            .iter()
            .filter(|l| l.direction == Direction::Send)
            .map(|l| l.bytes)
            .sum();
        assert_eq!(sent, 4 << 20, "2(n-1)/n × 4 MiB");
        assert!(
            links
                .iter()
                .all(|l| l.peer == 1 && l.transport == Path::NcclKernel)
        );
    }

    #[test]
    fn more_than_two_ranks_leave_the_peer_unknown() {
        let c = Context::new(7, 1, 4, None);
        let t = c.start_task(all_reduce(1024, 1));
        let k = c.start_kernel_channel(t, 0).unwrap();
        c.stop(k);
        assert!(c.links().iter().all(|l| l.peer == UNKNOWN_PEER));
    }

    #[test]
    fn proxy_steps_count_on_their_channel_and_peer() {
        let c = Context::new(7, 0, 8, None);
        let t = c.start_task(all_reduce(1 << 20, 2));
        let op = c.start_proxy_op(t, 1, 5, true);
        for _ in 0..3 {
            let s = c.start_proxy_step(op).unwrap();
            c.step_bytes(s, 1000);
            c.stop(s);
        }
        c.stop(op);
        let links = c.links();
        assert_eq!(links.len(), 1);
        let l = &links[0];
        assert_eq!(
            (l.channel, l.peer, l.direction, l.transport),
            (1, 5, Direction::Send, Path::NcclNet)
        );
        assert_eq!((l.bytes, l.slots), (3000, 3));
    }

    #[test]
    fn events_under_unknown_parents_are_ignored() {
        let c = Context::new(7, 0, 2, None);
        let t = c.start_task(all_reduce(8, 1));
        let k = c.start_kernel_channel(t, 0).unwrap();
        assert_eq!(c.start_kernel_channel(k, 0), None, "a channel is no task");
        assert_eq!(c.start_proxy_step(t), None, "a task is no proxy operation");
        c.stop(k);
        c.stop(k);
        assert_eq!(c.op.completed(), 1, "a second stop changes nothing");
    }

    #[test]
    fn handles_map_back_to_their_slots_only() {
        let c = Context::new(7, 0, 2, None);
        let h = c.handle(5);
        assert_eq!(c.index_of(h), Some(5));
        assert_eq!(c.index_of(h.cast::<u8>().wrapping_add(1).cast()), None);
        assert_eq!(c.index_of(std::ptr::null()), None);
        let other = Context::new(8, 0, 2, None);
        assert_eq!(c.index_of(other.handle(0)), None);
    }

    #[test]
    fn each_ring_is_reused_oldest_first() {
        let c = Context::new(7, 0, 2, None);
        let first = c.start_task(all_reduce(8, 1));
        for _ in 1..TASK_SLOTS {
            c.start_task(all_reduce(8, 1));
        }
        assert_eq!(c.start_task(all_reduce(8, 1)), first);
        let t = c.start_task(all_reduce(8, 1));
        let k = c.start_kernel_channel(t, 0).unwrap();
        assert!(k >= TASK_SLOTS, "events come from their own ring");
        for _ in 1..EVENT_SLOTS {
            c.start_proxy_op(t, 0, 1, true);
        }
        assert_eq!(c.start_kernel_channel(t, 0), Some(k));
        assert_eq!(c.kind(t), Kind::Task, "events never evict a task");
    }

    /// nccl-tests queues every iteration before the GPU runs the first: NCCL launches (and
    /// stops) all the tasks, then its proxy reports their kernel channels as the GPU reaches
    /// them. Every byte counts.
    #[test]
    fn a_deep_queue_of_tasks_counts_every_byte() {
        let (queued, channels) = (2000, 24);
        let c = Context::new(7, 0, 2, Some(0));
        let tasks: Vec<usize> = (0..queued)
            .map(|_| c.start_task(all_reduce(1 << 20, channels)))
            .collect();
        for &t in &tasks {
            let chans: Vec<usize> = (0..channels as u8)
                .map(|ch| c.start_kernel_channel(t, ch).unwrap())
                .collect();
            chans.into_iter().for_each(|k| c.stop(k));
        }
        let sent: u64 = c
            .links()
            .iter()
            .filter(|l| l.direction == Direction::Send)
            .map(|l| l.bytes)
            .sum();
        assert_eq!(sent, queued as u64 * (4 << 20), "4 MiB sent per all_reduce");
        assert_eq!(c.op.completed(), queued as u64);
        assert!(c.op.snapshot().is_none());
    }

    #[test]
    fn a_channel_counts_its_bytes_after_its_task_slot_was_reused() {
        let c = Context::new(7, 1, 2, None);
        let t = c.start_task(all_reduce(1 << 10, 1));
        let k = c.start_kernel_channel(t, 0).unwrap();
        for _ in 0..TASK_SLOTS {
            c.start_task(all_reduce(8, 1));
        }
        c.stop(k);
        let links = c.links();
        let sent: Vec<(usize, u64)> = links
            .iter()
            .filter(|l| l.direction == Direction::Send)
            .map(|l| (l.peer, l.bytes))
            .collect();
        assert_eq!(sent, [(0, 4 << 10)]);
    }
}
