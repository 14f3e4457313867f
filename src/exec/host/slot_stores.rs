//! Chooses, per operation size, how memory-FIFO slots are written: through the cache or with
//! streaming stores ([`crate::device::cpu::stream::Streams`]). Neither wins everywhere: a slot
//! handed over through the writer's cache is fastest while the two cores share a cache, and
//! slowest when they sit in different cache domains (AMD CCDs, sockets, or a VM whose vCPUs the
//! hypervisor moves between them), where a streamed slot read back from memory is steady. So
//! the communicator measures both as it runs and keeps the faster, trying the other again every
//! [`EXPLORE_EVERY`] operations of that size.
//!
//! Measured on the 2-vCPU reference VM (perf/cpu_vs_mpi.sh, 2 processes, float32 all_reduce):
//! 1 MiB runs at 10-14 GB/s through cached slots or 1.2-1.4 GB/s when the vCPUs are apart,
//! against a steady 4.3-5.4 GB/s streamed.
//!
//! The choice is the sender's alone: the receiving end reads a slot the same way either way, so
//! ranks need not agree.

use std::time::Duration;

/// Operations smaller than this (bytes per rank) always use cached slots: they are bound by
/// hand-off latency, and their slots stay in the caches between operations.
pub(super) const MIN_TUNED_BYTES: usize = 256 << 10;

/// One operation in this many, per size class, runs the currently slower way to notice when the
/// host changes (a 1/32 exploration costs at most a few percent of throughput).
pub(super) const EXPLORE_EVERY: u64 = 32;

/// Size classes: one per power of two from [`MIN_TUNED_BYTES`] up.
const CLASSES: usize = 24;

#[derive(Debug, Clone, Copy, Default)]
struct Way {
    /// Smoothed nanoseconds per byte.
    ns_per_byte: f64,
    samples: u32,
}

impl Way {
    /// Takes one measurement. `replace` drops the old estimate: for the first samples (the
    /// first run of a buffer pays its page faults) and for an exploring run (the estimate is
    /// [`EXPLORE_EVERY`] operations old). Otherwise the two are averaged with even weight, so
    /// one noisy operation does not flip the choice but a change of host placement shows
    /// within two operations.
    fn record(&mut self, ns_per_byte: f64, replace: bool) {
        self.ns_per_byte = if replace || self.samples < 2 {
            ns_per_byte
        } else {
            0.5 * (self.ns_per_byte + ns_per_byte)
        };
        self.samples += 1;
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Class {
    /// `[cached, streamed]`.
    ways: [Way; 2],
    ops: u64,
}

impl Class {
    /// Whether streaming is the faster way, once both were measured twice.
    fn best(&self) -> Option<bool> {
        let [cached, streamed] = self.ways;
        (cached.samples >= 2 && streamed.samples >= 2)
            .then_some(streamed.ns_per_byte < cached.ns_per_byte)
    }
}

/// Per-communicator record of how fast each way of writing slots has been, by operation size.
#[derive(Debug, Clone)]
pub(crate) struct SlotStores {
    classes: [Class; CLASSES],
}

impl Default for SlotStores {
    fn default() -> Self {
        SlotStores {
            classes: [Class::default(); CLASSES],
        }
    }
}

fn class(bytes: usize) -> Option<usize> {
    if bytes < MIN_TUNED_BYTES {
        return None;
    }
    let c = (bytes / MIN_TUNED_BYTES).ilog2() as usize;
    Some(c.min(CLASSES - 1))
}

impl SlotStores {
    /// Whether the next operation of `bytes` (the larger of its input and output, per rank)
    /// writes its memory-FIFO slots with streaming stores. Each way is tried twice first, then
    /// the faster is used, with the other tried every [`EXPLORE_EVERY`] operations.
    pub(crate) fn choose(&mut self, bytes: usize) -> bool {
        let Some(c) = class(bytes) else {
            return false;
        };
        let cl = &mut self.classes[c];
        cl.ops += 1;
        match cl.best() {
            // Alternate while learning: cached, streamed, cached, streamed.
            None => cl.ways[0].samples > cl.ways[1].samples,
            Some(best) if cl.ops.is_multiple_of(EXPLORE_EVERY) => !best,
            Some(best) => best,
        }
    }

    /// Whether operations of `bytes` are timed at all (smaller ones always use cached slots).
    pub(crate) fn tuned(bytes: usize) -> bool {
        class(bytes).is_some()
    }

    /// Records that an operation of `bytes` took `elapsed` with slots written the way
    /// [`SlotStores::choose`] said (`streamed`).
    pub(crate) fn record(&mut self, bytes: usize, streamed: bool, elapsed: Duration) {
        if let Some(c) = class(bytes) {
            let cl = &mut self.classes[c];
            let exploring = cl.best().is_some_and(|best| best != streamed);
            let ns = elapsed.as_nanos() as f64 / bytes as f64;
            cl.ways[usize::from(streamed)].record(ns, exploring);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: usize = 1 << 20;

    /// Runs `ops` operations of `bytes` where cached slots take `cached` and streamed ones
    /// `streamed`; returns how many ran streamed.
    fn run(s: &mut SlotStores, bytes: usize, ops: usize, cached: u64, streamed: u64) -> usize {
        (0..ops)
            .filter(|_| {
                let nt = s.choose(bytes);
                let us = if nt { streamed } else { cached };
                s.record(bytes, nt, Duration::from_micros(us));
                nt
            })
            .count()
    }

    #[test]
    fn small_operations_keep_cached_slots() {
        let mut s = SlotStores::default();
        assert_eq!(run(&mut s, MIN_TUNED_BYTES - 1, 100, 1000, 1), 0);
    }

    #[test]
    fn learns_both_ways_then_keeps_the_faster_and_keeps_checking() {
        let mut s = SlotStores::default();
        // Cached slots fast (same cache domain): streamed only while learning and exploring.
        let nt = run(&mut s, MB, 320, 80, 200);
        assert_eq!(nt, 2 + 320 / EXPLORE_EVERY as usize, "{nt}");
        // The host moves the cores apart: cached slots turn slow, streamed takes over at once.
        let nt = run(&mut s, MB, 320, 800, 200);
        assert!(nt >= 320 - 320 / EXPLORE_EVERY as usize - 2, "{nt}");
        // And back again, found by exploration within EXPLORE_EVERY operations.
        let nt = run(&mut s, MB, 320, 80, 200);
        assert!(
            nt <= EXPLORE_EVERY as usize + 320 / EXPLORE_EVERY as usize,
            "{nt}"
        );
    }

    #[test]
    fn sizes_are_learned_apart() {
        let mut s = SlotStores::default();
        run(&mut s, MB, 64, 80, 200);
        run(&mut s, 64 * MB, 64, 20_000, 8_000);
        let streamed_small = (0..10).filter(|_| s.choose(MB)).count();
        assert!(streamed_small <= 1, "{streamed_small}");
        let streamed_big = (0..10).filter(|_| s.choose(64 * MB)).count();
        assert!(streamed_big >= 9, "{streamed_big}");
        let first_op_of_a_new_size = s.choose(4 * MB);
        assert!(
            !first_op_of_a_new_size,
            "a new size starts learning with cached slots"
        );
    }
}
