//! The fake fabric behaves as the verbs it stands in for.

use std::time::{Duration, Instant};

use super::*;

struct End {
    _dev: Arc<dyn Device>,
    pd: Arc<dyn Pd>,
    cq: Arc<dyn Cq>,
    qp: Box<dyn Qp>,
}

fn end(v: &Arc<dyn Verbs>, name: &str) -> End {
    let dev = v.open(name).unwrap();
    let pd = dev.clone().alloc_pd().unwrap();
    let cq = pd.create_cq(64).unwrap();
    let qp = pd
        .create_qp(
            &cq,
            QpCaps {
                max_send_wr: 16,
                max_recv_wr: 16,
            },
        )
        .unwrap();
    End {
        _dev: dev,
        pd,
        cq,
        qp,
    }
}

fn link(a: &End, b: &End, b_port: &FakePort, timeout: u8, rnr_retry: u8) {
    a.qp.connect(&QpConnect {
        port: 1,
        pkey_index: 0,
        mtu: 5,
        remote_qpn: b.qp.qpn(),
        remote_lid: b_port.attr.lid,
        remote_gid: b_port.gids[3].0.0,
        global: true,
        gid_index: 3,
        sl: 0,
        tc: 0,
        timeout,
        retry_cnt: 1,
        rnr_retry,
    })
    .unwrap();
}

fn pair(timeout: u8, rnr_retry: u8) -> (FakeFabric, End, End) {
    let f = FakeFabric::new();
    let (pa, pb) = (FakePort::roce([10, 0, 0, 1]), FakePort::roce([10, 0, 0, 2]));
    f.add_device("a", vec![pa.clone()]);
    f.add_device("b", vec![pb.clone()]);
    let (a, b) = (end(&f.host(&["a"]).0, "a"), end(&f.host(&["b"]).0, "b"));
    link(&a, &b, &pb, timeout, rnr_retry);
    link(&b, &a, &pa, timeout, rnr_retry);
    (f, a, b)
}

fn wait(cq: &Arc<dyn Cq>, within: Duration) -> Completion {
    let t = Instant::now();
    let mut v = Vec::new();
    while t.elapsed() < within {
        if cq.poll(&mut v, 1).unwrap() == 1 {
            return v[0];
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    panic!("no completion within {within:?}");
}

fn write(src: &[u8], mr: &dyn Mr, dst: &dyn Mr, op: SendOp) -> SendWr {
    SendWr {
        wr_id: 7,
        op,
        addr: src.as_ptr() as u64,
        len: src.len() as u32,
        lkey: mr.lkey(),
        remote_addr: dst.addr(),
        rkey: dst.rkey(),
        signaled: true,
    }
}

#[test]
fn writes_land_and_immediates_complete_at_the_receiver() {
    let (_f, a, b) = pair(14, 7);
    let mut src = *b"hello, fabric!!!";
    let mut dst = [0u8; 16];
    // SAFETY: the buffer is declared before the region and outlives it.
    let smr = unsafe { a.pd.reg_mr(src.as_mut_ptr(), 16) }.unwrap();
    // SAFETY: the buffer is declared before the region and outlives it.
    let dmr = unsafe { b.pd.reg_mr(dst.as_mut_ptr(), 16) }.unwrap();
    b.qp.post_recv(42).unwrap();
    a.qp.post_send(&[write(&src, &*smr, &*dmr, SendOp::WriteImm(99))])
        .unwrap();
    let c = wait(&a.cq, Duration::from_secs(1));
    assert_eq!(
        (c.status, c.opcode, c.wr_id),
        (WcStatus::Success, WcOpcode::RdmaWrite, 7)
    );
    let r = wait(&b.cq, Duration::from_secs(1));
    assert_eq!((r.wr_id, r.imm, r.byte_len), (42, Some(99), 16));
    assert_eq!(&dst, b"hello, fabric!!!");
}

#[test]
fn receiver_not_ready_waits_then_fails_with_finite_retries() {
    let (_f, a, b) = pair(14, 7);
    let mut src = [1u8; 8];
    let mut dst = [0u8; 8];
    // SAFETY: the buffer is declared before the region and outlives it.
    let smr = unsafe { a.pd.reg_mr(src.as_mut_ptr(), 8) }.unwrap();
    // SAFETY: the buffer is declared before the region and outlives it.
    let dmr = unsafe { b.pd.reg_mr(dst.as_mut_ptr(), 8) }.unwrap();
    a.qp.post_send(&[write(&src, &*smr, &*dmr, SendOp::WriteImm(1))])
        .unwrap();
    std::thread::sleep(Duration::from_millis(5));
    let mut v = Vec::new();
    assert_eq!(
        a.cq.poll(&mut v, 4).unwrap(),
        0,
        "waits while no receive is posted"
    );
    b.qp.post_recv(1).unwrap();
    assert_eq!(
        wait(&a.cq, Duration::from_secs(1)).status,
        WcStatus::Success
    );

    let (_f, a, b) = pair(14, 2);
    // SAFETY: the buffer is declared before the region and outlives it.
    let smr = unsafe { a.pd.reg_mr(src.as_mut_ptr(), 8) }.unwrap();
    // SAFETY: the buffer is declared before the region and outlives it.
    let dmr = unsafe { b.pd.reg_mr(dst.as_mut_ptr(), 8) }.unwrap();
    a.qp.post_send(&[
        write(&src, &*smr, &*dmr, SendOp::WriteImm(1)),
        write(&src, &*smr, &*dmr, SendOp::Write),
    ])
    .unwrap();
    assert_eq!(
        wait(&a.cq, Duration::from_secs(1)).status,
        WcStatus::RnrRetryExceeded
    );
    assert_eq!(
        wait(&a.cq, Duration::from_secs(1)).status,
        WcStatus::Flushed
    );
}

#[test]
fn bad_keys_fail_and_flush_what_follows() {
    let (_f, a, b) = pair(14, 7);
    let mut src = [1u8; 8];
    let mut dst = [0u8; 8];
    // SAFETY: the buffer is declared before the region and outlives it.
    let smr = unsafe { a.pd.reg_mr(src.as_mut_ptr(), 8) }.unwrap();
    // SAFETY: the buffer is declared before the region and outlives it.
    let dmr = unsafe { b.pd.reg_mr(dst.as_mut_ptr(), 4) }.unwrap();
    a.qp.post_send(&[
        write(&src, &*smr, &*dmr, SendOp::Write),
        write(&src, &*smr, &*dmr, SendOp::Write),
    ])
    .unwrap();
    assert_eq!(
        wait(&a.cq, Duration::from_secs(1)).status,
        WcStatus::RemoteAccess
    );
    assert_eq!(
        wait(&a.cq, Duration::from_secs(1)).status,
        WcStatus::Flushed
    );
    assert_eq!(dst, [0; 8]);
    let (_f, a, b) = pair(14, 7);
    // SAFETY: the buffer is declared before the region and outlives it.
    let dmr = unsafe { b.pd.reg_mr(dst.as_mut_ptr(), 8) }.unwrap();
    let mut wr = write(&src, &*smr, &*dmr, SendOp::Write);
    wr.lkey = 9999;
    a.qp.post_send(&[wr]).unwrap();
    assert_eq!(
        wait(&a.cq, Duration::from_secs(1)).status,
        WcStatus::LocalProtection
    );
}

#[test]
fn a_dead_or_unreachable_peer_times_out_after_the_ack_timeout() {
    // NCCL_IB_TIMEOUT 10 = 4.2 ms per try, retry_cnt 1: about 8.4 ms.
    let (f, a, b) = pair(10, 7);
    let mut src = [1u8; 8];
    let mut dst = [0u8; 8];
    // SAFETY: the buffer is declared before the region and outlives it.
    let smr = unsafe { a.pd.reg_mr(src.as_mut_ptr(), 8) }.unwrap();
    // SAFETY: the buffer is declared before the region and outlives it.
    let dmr = unsafe { b.pd.reg_mr(dst.as_mut_ptr(), 8) }.unwrap();
    let wr = write(&src, &*smr, &*dmr, SendOp::Write);
    f.set_link("b", false);
    let t = Instant::now();
    a.qp.post_send(&[wr]).unwrap();
    assert_eq!(
        wait(&a.cq, Duration::from_secs(2)).status,
        WcStatus::RetryExceeded
    );
    assert!(t.elapsed() >= Duration::from_millis(8), "{:?}", t.elapsed());

    let (_f, a, b) = pair(10, 7);
    // SAFETY: the buffer is declared before the region and outlives it.
    let smr = unsafe { a.pd.reg_mr(src.as_mut_ptr(), 8) }.unwrap();
    // SAFETY: the buffer is declared before the region and outlives it.
    let dmr = unsafe { b.pd.reg_mr(dst.as_mut_ptr(), 8) }.unwrap();
    let wr = write(&src, &*smr, &*dmr, SendOp::Write);
    drop(b);
    a.qp.post_send(&[wr]).unwrap();
    assert_eq!(
        wait(&a.cq, Duration::from_secs(2)).status,
        WcStatus::RetryExceeded
    );
}

#[test]
fn a_wrong_gid_is_unreachable() {
    let f = FakeFabric::new();
    let (pa, pb) = (FakePort::roce([10, 0, 0, 1]), FakePort::roce([10, 0, 0, 2]));
    f.add_device("a", vec![pa.clone()]);
    f.add_device("b", vec![pb.clone()]);
    let (a, b) = (end(&f.host(&["a"]).0, "a"), end(&f.host(&["b"]).0, "b"));
    // a addresses b with a's own GID.
    let mut to = QpConnect {
        remote_qpn: b.qp.qpn(),
        ..QpConnect {
            port: 1,
            pkey_index: 0,
            mtu: 5,
            remote_qpn: 0,
            remote_lid: 0,
            remote_gid: pa.gids[3].0.0,
            global: true,
            gid_index: 3,
            sl: 0,
            tc: 0,
            timeout: 10,
            retry_cnt: 1,
            rnr_retry: 7,
        }
    };
    a.qp.connect(&to).unwrap();
    to.remote_qpn = a.qp.qpn();
    b.qp.connect(&to).unwrap();
    let mut src = [1u8; 8];
    let mut dst = [0u8; 8];
    // SAFETY: the buffer is declared before the region and outlives it.
    let smr = unsafe { a.pd.reg_mr(src.as_mut_ptr(), 8) }.unwrap();
    // SAFETY: the buffer is declared before the region and outlives it.
    let dmr = unsafe { b.pd.reg_mr(dst.as_mut_ptr(), 8) }.unwrap();
    a.qp.post_send(&[write(&src, &*smr, &*dmr, SendOp::Write)])
        .unwrap();
    assert_eq!(
        wait(&a.cq, Duration::from_secs(2)).status,
        WcStatus::RetryExceeded
    );
}
