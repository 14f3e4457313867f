//! One collective on `n` ranks as a test runs it: every rank's real plan, its buffers in host
//! memory (in place or not) filled with reference inputs, and the check of every output
//! against the host reference.

use std::time::Duration;

use super::fabric::{Fabric, Job, Words};
use super::reference::{expected, input_value, to_bytes};
use crate::coll::{Algo, CollArgs, Func, Geometry, Plan, Rings, plan};
use crate::device::ReduceSpec;
use crate::exec::gpu::program::DevBuffers;

/// Bytes per FIFO slot in these tests: small, so a few hundred elements wrap the FIFOs.
pub(super) const SLOT: usize = 64;
/// How long a kernel waits for a peer before it reports a timeout, in runs that should pass.
pub(super) const PATIENCE: Duration = Duration::from_secs(20);
/// How long a run may take before the test fails.
pub(super) const LIMIT: Duration = Duration::from_secs(60);
/// What output bytes hold before a run, so bytes no step writes stand out.
const SENTINEL: u8 = 0xa5;

/// One operation on `n` ranks, spread over `nch` channels.
#[derive(Debug, Clone, Copy)]
pub(super) struct Case {
    /// The operation.
    pub args: CollArgs,
    /// Ranks.
    pub n: usize,
    /// Channels.
    pub nch: usize,
    /// The algorithm.
    pub algo: Algo,
}

/// The channel layout: even channels rotate the rank order, odd ones reverse it, so ring
/// neighbours differ from channel to channel.
pub(super) fn rings(n: usize, nch: usize) -> Rings {
    let order = (0..nch)
        .map(|c| {
            let rot: Vec<usize> = (0..n).map(|i| (i + c) % n).collect();
            if c % 2 == 1 {
                rot.into_iter().rev().collect()
            } else {
                rot
            }
        })
        .collect();
    Rings::new(order, n).expect("rings")
}

/// A rank's memory for one operation.
struct RankMem {
    /// The input buffer; in place, the snapshot AlltoAll reads (empty for the others).
    input: Words,
    input_init: Vec<u8>,
    /// The output buffer; in place, the one buffer.
    output: Words,
    output_init: Vec<u8>,
    /// Kept alive for the plan's scratch address.
    _scratch: Words,
    bufs: DevBuffers,
    /// The output's (offset, length) in `output`.
    out: (usize, usize),
}

impl RankMem {
    fn new(args: &CollArgs, n: usize, r: usize, input: &[u8], scratch: usize) -> RankMem {
        let scratch_mem = Words::zeroed(scratch);
        let sc = (scratch_mem.addr(), scratch);
        if !args.in_place {
            let out_bytes = args.output_bytes(n);
            let output_init = vec![SENTINEL; out_bytes];
            let (i, o) = (Words::from_bytes(input), Words::from_bytes(&output_init));
            let bufs = DevBuffers {
                input: (i.addr(), input.len()),
                output: (o.addr(), out_bytes),
                scratch: sc,
            };
            return RankMem {
                input: i,
                input_init: input.to_vec(),
                output: o,
                output_init,
                _scratch: scratch_mem,
                bufs,
                out: (0, out_bytes),
            };
        }
        let l = args.in_place_layout(r, n).expect("in-place layout");
        let mut init = vec![SENTINEL; l.buf_bytes];
        let (io, il) = l.input;
        init[io..io + il].copy_from_slice(&input[..il]);
        let buf = Words::from_bytes(&init);
        // In-place AlltoAll overwrites blocks before it sends them; like the CPU executor's
        // `snapshot_input`, the GPU host must hand the kernel a copy of the input.
        let snap = if args.func == Func::AllToAll {
            input.to_vec()
        } else {
            Vec::new()
        };
        let snapshot = Words::from_bytes(&snap);
        let input_addr = if snap.is_empty() {
            buf.addr() + io as u64
        } else {
            snapshot.addr()
        };
        let bufs = DevBuffers {
            input: (input_addr, il),
            output: (buf.addr() + l.output.0 as u64, l.output.1),
            scratch: sc,
        };
        RankMem {
            input: snapshot,
            input_init: snap,
            output: buf,
            output_init: init,
            _scratch: scratch_mem,
            bufs,
            out: l.output,
        }
    }

    /// Puts the buffers back as they were before the first run.
    fn reset(&self) {
        self.input.write(0, &self.input_init);
        self.output.write(0, &self.output_init);
    }
}

/// A case ready to run: plans, inputs and memory of every rank.
pub(super) struct Setup {
    /// The case.
    pub case: Case,
    /// Every rank's plan.
    pub plans: Vec<Plan>,
    inputs: Vec<Vec<f64>>,
    mems: Vec<RankMem>,
}

impl Setup {
    /// Plans `case` for every rank and lays out its buffers.
    pub(super) fn new(case: Case) -> Setup {
        let Case { args, n, nch, algo } = case;
        let rings = rings(n, nch);
        let geo = Geometry { slot_bytes: SLOT };
        let plans: Vec<Plan> = (0..n)
            .map(|r| plan(&args, r, n, &rings, geo, algo, nch).expect("plan"))
            .collect();
        let in_len = args.func.input_elems(args.count, n).expect("input size");
        let inputs: Vec<Vec<f64>> = (0..n)
            .map(|r| {
                (0..in_len)
                    .map(|i| input_value(r, i, args.op, args.dtype))
                    .collect()
            })
            .collect();
        let mems = (0..n)
            .map(|r| {
                let bytes = to_bytes(args.dtype, &inputs[r]);
                RankMem::new(&args, n, r, &bytes, plans[r].scratch_bytes)
            })
            .collect();
        Setup {
            case,
            plans,
            inputs,
            mems,
        }
    }

    /// The reduction every rank's program carries.
    pub(super) fn spec(&self) -> ReduceSpec {
        let a = &self.case.args;
        ReduceSpec::new(a.dtype, a.op.lower(a.dtype, self.case.n))
    }

    /// Every rank's job.
    pub(super) fn jobs(&self) -> Vec<Job<'_>> {
        (0..self.case.n)
            .map(|r| Job {
                rank: r,
                plan: &self.plans[r],
                bufs: self.mems[r].bufs,
            })
            .collect()
    }

    /// Runs every rank on `fabric`.
    pub(super) fn run(&self, fabric: &mut Fabric) {
        fabric.run(&self.jobs(), &self.spec(), LIMIT);
    }

    /// Puts every buffer back as it was, for another run.
    pub(super) fn reset(&self) {
        for m in &self.mems {
            m.reset();
        }
    }

    /// Checks that no rank reported a failure, every output is the reference's, and nothing
    /// outside the outputs changed (inputs, the rest of an in-place buffer).
    pub(super) fn verify(&self, fabric: &Fabric) {
        let (case, args) = (&self.case, &self.case.args);
        for (r, m) in self.mems.iter().enumerate() {
            let what = format!("{case:?}, rank {r}");
            let rep = fabric.report(r);
            assert_eq!(rep.code, None, "{what}: the kernel reported {rep:?}");
            assert!(!fabric.aborted(r), "{what}: abort flag raised");
            let (off, len) = m.out;
            let want = match expected(args, r, &self.inputs) {
                Some(v) => to_bytes(args.dtype, &v),
                None => m.output_init[off..off + len].to_vec(),
            };
            let got = m.output.read(off, len);
            if let Some(i) = (0..len).find(|&i| got[i] != want[i]) {
                panic!(
                    "{what}: output byte {i} of {len} is {:#x}, want {:#x}",
                    got[i], want[i]
                );
            }
            let all = m.output.read(0, m.output_init.len());
            let outside = |v: &[u8]| [v[..off].to_vec(), v[off + len..].to_vec()].concat();
            assert!(
                outside(&all) == outside(&m.output_init),
                "{what}: bytes outside the output changed"
            );
            let input = m.input.read(0, m.input_init.len());
            assert!(input == m.input_init, "{what}: the input changed");
        }
    }
}

/// Runs `case` on a fresh fabric and checks it.
pub(super) fn check(case: Case) {
    let setup = Setup::new(case);
    let mut fabric = Fabric::new(case.n, SLOT, PATIENCE);
    setup.run(&mut fabric);
    setup.verify(&fabric);
}
