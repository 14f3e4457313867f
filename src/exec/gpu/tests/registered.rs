//! The registered kernel's agreement on the kernel model ([`emulate::registered`]): every
//! rank at once, operations back to back so the kernels' count carries on. Every rank whose
//! buffers are registered learns the others' addresses and runs the symmetric kernel; one
//! plain rank sends every registered rank to the direct kernel, an operation's records never
//! stand for the next one's, and a peer that never writes its record times out, named.

use std::time::Duration;

use super::super::emulate::registered::{self, Verdict};
use super::ll::LlFabric;
use crate::device::ReduceSpec;
use crate::device::cuda::abi::{KEY_WORD, Status};
use crate::dtype::DataType;
use crate::redop::RedOp;

/// Where rank `p` says its input (`dst` false) or output lies in rank `to`'s process: made-up
/// addresses, distinct per pair.
fn addr(p: usize, to: usize, dst: bool) -> u64 {
    0x1000_0000 * (p as u64 + 1) + 0x100 * to as u64 + if dst { 0x80 } else { 0 }
}

/// Runs one operation on every rank of `f`: rank r runs the registered kernel when
/// `registered[r]` (its buffers as every peer maps them: [`addr`]) and the plain direct
/// kernel otherwise; every kernel then ends. Returns each registered rank's verdict.
fn operation(f: &LlFabric, registered: &[bool]) -> Vec<Option<Verdict>> {
    let n = f.n;
    let spec = ReduceSpec::new(DataType::Float32, RedOp::Sum.lower(DataType::Float32, n));
    let args: Vec<Vec<u8>> = (0..n)
        .map(|r| {
            let mut op = f.op(r, addr(r, r, false), addr(r, r, true), 4096);
            op.peer_src = (0..n).map(|to| addr(r, to, false)).collect();
            op.peer_dst = (0..n).map(|to| addr(r, to, true)).collect();
            f.encoded(r, &op, 0, &spec)
        })
        .collect();
    let verdicts = std::thread::scope(|s| {
        let hs: Vec<_> = (0..n)
            .map(|r| {
                let a = &args[r];
                let reg = registered[r];
                s.spawn(move || {
                    // SAFETY: every address the model touches (areas, state, counters, control
                    // block) is memory of this fabric, alive for the scope; the peers' buffer
                    // addresses are only carried, never dereferenced.
                    unsafe {
                        if reg {
                            Some(registered::exchange(a).expect("decodes"))
                        } else {
                            registered::plain(a).expect("decodes");
                            None
                        }
                    }
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for a in &args {
        // SAFETY: the state is this fabric's.
        unsafe { registered::end(a) }.expect("decodes");
    }
    verdicts
}

/// What a rank gets when every rank registered: each rank's buffers as `me` maps them.
fn symmetric(n: usize, me: usize) -> Verdict {
    Verdict::Symmetric {
        srcs: (0..n).map(|p| addr(p, me, false)).collect(),
        dsts: (0..n).map(|p| addr(p, me, true)).collect(),
    }
}

#[test]
fn ranks_agree_on_the_kernel_from_their_records() {
    for n in [2, 3] {
        let f = LlFabric::new(n, Duration::from_secs(20));
        let every = vec![true; n];
        let mut one_plain = every.clone();
        one_plain[1] = false;
        // Registered everywhere, then one rank plain, then everywhere again: the middle
        // operation's plain record, and the first's addresses, count for their own only.
        for (k, pattern) in [&every, &one_plain, &every, &one_plain, &one_plain]
            .into_iter()
            .enumerate()
        {
            let got = operation(&f, pattern);
            for (r, v) in got.into_iter().enumerate() {
                let want = match (pattern[r], pattern.iter().all(|&x| x)) {
                    (false, _) => None,
                    (true, true) => Some(symmetric(n, r)),
                    (true, false) => Some(Verdict::Direct),
                };
                assert_eq!(v, want, "n={n} operation {k} rank {r}");
            }
        }
        for r in 0..n {
            assert_eq!(
                f.state[r].word(KEY_WORD),
                5,
                "rank {r} counted its direct kernels"
            );
            assert_eq!(f.report(r).0, None, "rank {r} reported nothing");
        }
    }
}

#[test]
fn a_peer_without_a_record_times_out_named() {
    let f = LlFabric::new(2, Duration::from_millis(300));
    let spec = ReduceSpec::new(DataType::Float32, RedOp::Sum.lower(DataType::Float32, 2));
    let mut op = f.op(0, 0x1000, 0x2000, 4096);
    op.peer_src = vec![0x1000, 0x9000];
    op.peer_dst = vec![0x2000, 0xa000];
    let args = f.encoded(0, &op, 0, &spec);
    let t0 = std::time::Instant::now();
    // SAFETY: as in `operation`.
    let v = unsafe { registered::exchange(&args) }.expect("decodes");
    assert_eq!(v, Verdict::Failed);
    assert!(t0.elapsed() < Duration::from_secs(10));
    assert_eq!(f.report(0), (Some(Status::Timeout), 1), "names the peer");
}
