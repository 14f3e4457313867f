//! Executor tests: plans run over in-process transports.

use std::sync::Arc;

use super::*;
use crate::coll::{Kind, Step};
use crate::dtype::DataType;
use crate::transport::fifo::{FifoMemory, HeapMemory, MemReceiver, MemSender, init_region};
use crate::transport::{SendConn, TransportKind};

/// A lane stuck half-way through a step must report no progress, or waiters never sleep nor
/// time out (a receiver that never reads used to spin its sender forever).
#[test]
fn a_blocked_lane_reports_no_progress() {
    let slot = 64;
    let mem: Arc<dyn FifoMemory> = Arc::new(HeapMemory::new(slot));
    unsafe { init_region(&*mem, slot) };
    let key = ConnKey {
        peer: 1,
        channel: 0,
        index: 0,
    };
    let mut conns = Connections::default();
    conns.add_send(
        key,
        SendConn::Mem(MemSender::new(mem.clone(), slot)),
        TransportKind::SameProcess,
    );
    let _reader = MemReceiver::new(mem, slot);
    let data = vec![7u8; slot * 20];
    let ops = vec![OpBuffers {
        input: data.as_ptr(),
        input_len: data.len(),
        output: std::ptr::null_mut(),
        output_len: 0,
        scratch: Vec::new(),
        spec: ReduceSpec::copy(DataType::Uint8),
        snapshot_input: false,
        snapshot: Vec::new(),
        stream_output: false,
        stream_slots: false,
    }];
    let step = Step {
        kind: Kind::Send,
        src: Some(Loc::input(0)),
        dst: None,
        bytes: data.len(),
        send: Some(key),
        recv: None,
        pre: false,
        post: false,
    };
    let plan = Arc::new(Plan {
        lanes: vec![(LaneKey::Channel(0), vec![step])],
        scratch_bytes: 0,
        algo: crate::coll::Algo::Direct,
        send_keys: vec![key],
        recv_keys: vec![],
    });
    let lanes = vec![(
        LaneKey::Channel(0),
        vec![Segment {
            op: 0,
            plan,
            lane: 0,
        }],
    )];
    let mut ex = Execution::new(ops, lanes, &conns).unwrap();
    assert!(
        ex.progress(&mut conns).unwrap(),
        "the first call fills the FIFO"
    );
    assert!(
        !ex.progress(&mut conns).unwrap(),
        "a full FIFO is no progress"
    );
    assert!(!ex.done(&conns));
    assert_eq!(
        ex.blocked(),
        vec![Blocked {
            key,
            receiving: false
        }]
    );
}
