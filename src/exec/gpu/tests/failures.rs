//! How the kernel model stops: a peer that never runs (timeout), the communicator's abort, and
//! a peer posting a slot of the wrong size — each reported once, naming the lane, peer,
//! channel and slot, with the abort flag raised so every other lane stops too.

use std::time::{Duration, Instant};

use super::case::{LIMIT, SLOT, rings};
use super::fabric::{Fabric, Job, Report, Words};
use crate::coll::{Algo, CollArgs, Func, Geometry, LaneKey, Loc, Op, Plan, Step, plan};
use crate::conn::ConnKey;
use crate::device::ReduceSpec;
use crate::device::cuda::abi::Status;
use crate::dtype::DataType;
use crate::exec::gpu::emulate::Waiting;
use crate::exec::gpu::program::DevBuffers;
use crate::redop::RedOp;

/// A short patience, so a missing peer is noticed quickly.
const SHORT: Duration = Duration::from_millis(50);

/// `rank`'s plan for `func` of `count` floats with peer or root `peer`, on `nch` channels.
fn plan_of(func: Func, rank: usize, peer: usize, n: usize, count: usize, nch: usize) -> Plan {
    let a = CollArgs {
        func,
        count,
        dtype: DataType::Float32,
        op: RedOp::Sum,
        root: peer,
        in_place: false,
    };
    let algo = if func.tuned_index().is_some() {
        Algo::Ring
    } else {
        Algo::Direct
    };
    let geo = Geometry { slot_bytes: SLOT };
    plan(&a, rank, n, &rings(n, nch), geo, algo, nch).expect("plan")
}

/// An input and an output of `bytes` bytes each for one rank.
struct Bufs {
    input: Words,
    output: Words,
    bytes: usize,
}

impl Bufs {
    fn new(bytes: usize) -> Bufs {
        Bufs {
            input: Words::zeroed(bytes),
            output: Words::zeroed(bytes),
            bytes,
        }
    }

    /// `rank`'s job for `plan` over these buffers.
    fn job<'a>(&self, rank: usize, plan: &'a Plan) -> Job<'a> {
        Job {
            rank,
            plan,
            bufs: DevBuffers {
                input: (self.input.addr(), self.bytes),
                output: (self.output.addr(), self.bytes),
                scratch: (self.input.addr(), 0),
            },
        }
    }
}

fn spec() -> ReduceSpec {
    ReduceSpec::copy(DataType::Float32)
}

/// A report of `code` on lane 0 for connection (`peer`, `channel`).
fn report(code: Status, peer: u32, channel: u32, step: u64, waiting: Waiting) -> Report {
    Report {
        code: Some(code),
        lane: 0,
        peer,
        channel,
        step,
        waiting: waiting as u64,
    }
}

/// A sender whose receiver never runs fills the FIFO, then times out waiting for slot 9.
#[test]
fn a_missing_receiver_times_the_sender_out() {
    let count = 16 * SLOT / 4;
    let send = plan_of(Func::Send, 0, 1, 2, count, 1);
    let b = Bufs::new(count * 4);
    let mut f = Fabric::new(2, SLOT, SHORT);
    let t = Instant::now();
    f.run(&[b.job(0, &send)], &spec(), LIMIT);
    let took = t.elapsed();
    assert!(took >= SHORT && took < LIMIT / 4, "stopped after {took:?}");
    let want = report(Status::Timeout, 1, 0, 9, Waiting::Slot);
    assert_eq!(f.report(0), want);
    assert!(f.aborted(0) && f.claimed(0));
    assert!(!f.aborted(1), "the absent peer's flag is its own");
    assert_eq!(f.ops(0), (1, 0), "operation 1 started and never finished");
}

/// A receiver on channel 3 whose sender never runs times out waiting for the first slot, and
/// the report names that channel.
#[test]
fn a_missing_sender_times_the_receiver_out_on_its_channel() {
    let from = ConnKey::collective(1, 3);
    let recv = Step::new(
        Op::Recv {
            dst: Loc::output(0),
            from,
        },
        SLOT,
    );
    let p = Plan::new(vec![(LaneKey::Channel(3), vec![recv])], 0, Algo::Ring);
    let b = Bufs::new(SLOT);
    let mut f = Fabric::new(2, SLOT, SHORT);
    f.run(&[b.job(0, &p)], &spec(), LIMIT);
    assert_eq!(f.report(0), report(Status::Timeout, 1, 3, 1, Waiting::Data));
}

/// A ring AllReduce whose peer never runs: both channels' lanes wait for it; the first to time
/// out reports (naming its own lane and channel), the other stops on the abort flag unreported.
#[test]
fn the_first_of_several_failing_lanes_reports() {
    let count = 1000;
    let p = plan_of(Func::AllReduce, 0, 0, 2, count, 2);
    assert_eq!(p.lanes.len(), 2, "a lane per channel");
    let b = Bufs::new(count * 4);
    let mut f = Fabric::new(2, SLOT, SHORT);
    f.run(&[b.job(0, &p)], &spec(), LIMIT);
    let r = f.report(0);
    assert_eq!((r.code, r.peer), (Some(Status::Timeout), 1));
    let lane = &p.lanes[r.lane as usize];
    assert_eq!(lane.0, LaneKey::Channel(r.channel as u16), "{r:?}");
    assert!(f.aborted(0));
}

/// Raising the abort flag stops a lane waiting for a peer that never comes, long before its
/// timeout, with an Aborted report. While it waits, its end says so (what `rnccl status`
/// shows of a GPU rank); once it stopped, no longer.
#[test]
fn the_abort_flag_stops_a_waiting_lane() {
    let recv = plan_of(Func::Recv, 1, 0, 2, 100, 1);
    let b = Bufs::new(400);
    let mut f = Fabric::new(2, SLOT, LIMIT);
    let prog = f.encode(&b.job(1, &recv), &spec());
    let (_, key, _) = f.ends()[0];
    let t = Instant::now();
    std::thread::scope(|s| {
        s.spawn(|| {
            while !f.waiting(1, key, false) {
                assert!(t.elapsed() < LIMIT / 8, "the wait was never marked");
                std::thread::sleep(Duration::from_millis(1));
            }
            f.abort(1);
        });
        f.launch(&[(1, prog)], &spec(), LIMIT);
    });
    assert!(t.elapsed() < LIMIT / 4, "stopped after {:?}", t.elapsed());
    assert_eq!(f.report(1), report(Status::Aborted, 0, 0, 1, Waiting::Data));
    assert!(!f.waiting(1, key, false), "the mark outlived the wait");
}

/// A sender posting 48 bytes where the receiver expects a 64-byte slot: the receiver reports
/// BadSize for that slot and raises its abort flag; the sender finishes unaware.
#[test]
fn a_slot_of_the_wrong_size_is_refused() {
    let send = plan_of(Func::Send, 0, 1, 2, 12, 1);
    let recv = plan_of(Func::Recv, 1, 0, 2, 16, 1);
    let (b0, b1) = (Bufs::new(64), Bufs::new(64));
    let mut f = Fabric::new(2, SLOT, Duration::from_secs(20));
    f.run(&[b0.job(0, &send), b1.job(1, &recv)], &spec(), LIMIT);
    assert_eq!(f.report(1), report(Status::BadSize, 0, 0, 1, Waiting::Data));
    assert!(f.aborted(1));
    assert_eq!(f.report(0).code, None);
    assert!(!f.aborted(0));
}
