//! Fault tolerance through the library (NCCL 2.27-2.30's revoke, shrink and grow): a rank
//! killed mid-training (SIGKILL, a real process) and the survivors shrinking it out and going
//! on; a rank excluded on purpose; a stuck collective stopped by an abort from another thread
//! then revoked; a communicator grown by a new rank; and the arguments shrink refuses. Every
//! case checks the survivors' collectives after the change, and ends in bounded time.
//!
//! The killed-rank test runs ranks as processes of this test binary: it starts itself with
//! `RNCCL_FT_RANK` set, which turns [`rank_process`] into one rank's body.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rnccl::{CommConfig, Communicator, Error, RedOp, ShrinkMode, UniqueId};

/// Floats per all-reduce: 256 KiB, several slots on every transport.
const ELEMS: usize = 1 << 16;

/// `steps` all-reduces of `first + i + 1` from every rank; checks each sum.
fn all_reduce_steps(c: &Communicator, first: usize, steps: usize) -> Result<(), Error> {
    for i in first..first + steps {
        let send = vec![(i + 1) as f32; ELEMS];
        let mut recv = vec![0f32; ELEMS];
        c.all_reduce(&send, &mut recv, RedOp::Sum)?;
        let want = ((i + 1) * c.nranks()) as f32;
        assert!(
            recv.iter().all(|&v| v == want),
            "step {i} on rank {} of {}: got {} want {want}",
            c.rank(),
            c.nranks(),
            recv[0]
        );
    }
    Ok(())
}

fn config() -> CommConfig {
    CommConfig::default().timeout(Duration::from_secs(30))
}

/// One rank of [`a_killed_rank_is_shrunk_out_and_the_survivors_go_on`], when this binary is
/// started with `RNCCL_FT_RANK`; otherwise nothing to do (it is not a test on its own).
#[test]
#[ignore = "the body of a rank process that the killed-rank test starts"]
fn rank_process() {
    let Ok(rank) = std::env::var("RNCCL_FT_RANK") else {
        return;
    };
    let rank: usize = rank.parse().unwrap();
    let nranks: usize = std::env::var("RNCCL_FT_NRANKS").unwrap().parse().unwrap();
    let victim: usize = std::env::var("RNCCL_FT_VICTIM").unwrap().parse().unwrap();
    let id: UniqueId = std::env::var("RNCCL_FT_ID").unwrap().parse().unwrap();
    let c = Communicator::init_rank(nranks, &id, rank, config()).unwrap();
    all_reduce_steps(&c, 0, 3).unwrap();
    if rank == victim {
        // Die as a crashed trainer does: no cleanup, no goodbye.
        nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL).unwrap();
    }
    let err = all_reduce_steps(&c, 3, 5).expect_err("a collective with a dead peer succeeded");
    println!("FAILED-AS-EXPECTED {err}");
    let child = c.shrink(&[victim], ShrinkMode::Abort).unwrap();
    assert_eq!(child.nranks(), nranks - 1);
    assert_eq!(child.rank(), rank - usize::from(rank > victim));
    all_reduce_steps(&child, 10, 5).unwrap();
    println!("SHRUNK {rank} -> {} of {}", child.rank(), child.nranks());
}

/// Three rank processes over shared memory; rank 1 SIGKILLs itself after three steps. The
/// survivors' next collective fails naming it, they shrink with NCCL_SHRINK_ABORT, and five
/// all-reduces on the two-rank child are right.
#[test]
fn a_killed_rank_is_shrunk_out_and_the_survivors_go_on() {
    let id = UniqueId::new().unwrap();
    let exe = std::env::current_exe().unwrap();
    let start = Instant::now();
    let children: Vec<_> = (0..3)
        .map(|r| {
            Command::new(&exe)
                .args(["--exact", "rank_process", "--ignored", "--nocapture"])
                .env("RNCCL_FT_RANK", r.to_string())
                .env("RNCCL_FT_NRANKS", "3")
                .env("RNCCL_FT_VICTIM", "1")
                .env("RNCCL_FT_ID", id.to_string())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for (r, c) in children.into_iter().enumerate() {
        let out = c.wait_with_output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if r == 1 {
            assert!(!out.status.success(), "the victim survived: {text}");
            continue;
        }
        assert!(out.status.success(), "rank {r}: {text}");
        assert!(text.contains("FAILED-AS-EXPECTED"), "rank {r}: {text}");
        assert!(
            text.contains("rank 1"),
            "rank {r}'s error must name rank 1: {text}"
        );
        let want = format!("SHRUNK {r} -> {} of 2", r.min(1));
        assert!(text.contains(&want), "rank {r}: {text}");
    }
    assert!(
        start.elapsed() < Duration::from_secs(60),
        "took {:?}",
        start.elapsed()
    );
}

/// Runs `body` on every rank of a thread communicator of `n` ranks; returns their results.
fn on_threads<T: Send + 'static>(
    n: usize,
    body: impl Fn(Communicator) -> T + Send + Sync + 'static,
) -> Vec<T> {
    on_threads_with(n, config(), body)
}

/// As [`on_threads`] with `config`.
fn on_threads_with<T: Send + 'static>(
    n: usize,
    config: CommConfig,
    body: impl Fn(Communicator) -> T + Send + Sync + 'static,
) -> Vec<T> {
    let body = std::sync::Arc::new(body);
    let comms = Communicator::init_all_with(n, config).unwrap();
    let handles: Vec<_> = comms
        .into_iter()
        .map(|c| {
            let body = body.clone();
            std::thread::spawn(move || body(c))
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

/// Rank 3 of four leaves on purpose (no death, no collective in flight): the others shrink it
/// out with NCCL_SHRINK_DEFAULT, and the child's ranks fill the gap in parent order.
#[test]
fn a_rank_excluded_on_purpose_is_shrunk_out_with_the_default_mode() {
    let got = on_threads(4, |c| {
        all_reduce_steps(&c, 0, 2).unwrap();
        if c.rank() == 3 {
            return None;
        }
        let child = c.shrink(&[3], ShrinkMode::Default).unwrap();
        all_reduce_steps(&child, 2, 3).unwrap();
        Some((child.rank(), child.nranks()))
    });
    assert_eq!(got, vec![Some((0, 3)), Some((1, 3)), Some((2, 3)), None]);
}

/// Rank 2 leaves between collectives; the others shrink it out with NCCL_SHRINK_ABORT, as
/// PyTorch's `shrink_group` after a death does. As in NCCL, the abort flag comes down again
/// once nothing runs: the parent reports no asynchronous error (PyTorch's watchdog polls it),
/// but takes no new collectives; the child works.
#[test]
fn a_parent_shrunk_with_abort_reports_no_error_and_takes_no_new_work() {
    let got = on_threads(3, |c| {
        all_reduce_steps(&c, 0, 2).unwrap();
        if c.rank() == 2 {
            return None;
        }
        let child = c.shrink(&[2], ShrinkMode::Abort).unwrap();
        c.async_error().unwrap();
        let refused = all_reduce_steps(&c, 2, 1).unwrap_err();
        assert!(
            matches!(refused, Error::InvalidUsage(_))
                && refused.to_string().contains("NCCL_SHRINK_ABORT"),
            "{refused}"
        );
        all_reduce_steps(&child, 2, 3).unwrap();
        Some(child.nranks())
    });
    assert_eq!(got, vec![Some(2), Some(2), None]);
}

/// Rank 2 never enters its collective; an abort from another thread (as PyTorch's watchdog
/// calls ncclCommAbort / ncclCommRevoke) ends the others' blocked all-reduce at once; they
/// revoke, shrink rank 2 out, and go on. A revoked communicator refuses new collectives and a
/// second revoke.
#[test]
fn an_abort_from_another_thread_ends_a_stuck_collective_then_revoke_and_shrink() {
    let got = on_threads(3, |c| {
        all_reduce_steps(&c, 0, 1).unwrap();
        if c.rank() == 2 {
            std::thread::sleep(Duration::from_secs(3));
            return None;
        }
        let watchdog = c.abort_handle();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(500));
            watchdog.abort();
        });
        let start = Instant::now();
        let err = all_reduce_steps(&c, 1, 1).unwrap_err();
        let stopped_in = start.elapsed();
        t.join().unwrap();
        assert!(matches!(err, Error::Aborted(_)), "{err}");
        assert!(stopped_in < Duration::from_secs(5), "{stopped_in:?}");
        c.revoke().unwrap();
        assert!(c.is_revoked());
        let again = c.revoke().unwrap_err();
        assert!(again.to_string().contains("already revoked"), "{again}");
        let refused = all_reduce_steps(&c, 1, 1).unwrap_err();
        assert!(refused.to_string().contains("revoked"), "{refused}");
        let child = c.shrink(&[2], ShrinkMode::Default).unwrap();
        all_reduce_steps(&child, 5, 3).unwrap();
        Some(child.nranks())
    });
    assert_eq!(got, vec![Some(2), Some(2), None]);
}

/// Two ranks grow to three: rank 0 makes the grow id, a new rank joins with it as rank 2,
/// and the grown communicator's all-reduces count all three. The id is used once; a second
/// id is refused while the first is pending.
#[test]
fn a_communicator_grows_by_a_new_rank() {
    let comms = Communicator::init_all_with(2, config()).unwrap();
    let id = comms[0].grow_id().unwrap();
    let pending = comms[0].grow_id().unwrap_err();
    assert!(
        pending.to_string().contains("was not used yet"),
        "{pending}"
    );
    let newcomer = {
        let id = id.clone();
        std::thread::spawn(move || {
            let c = Communicator::init_rank(3, &id, 2, config()).unwrap();
            all_reduce_steps(&c, 0, 3).unwrap();
            c.rank()
        })
    };
    let olds: Vec<_> = comms
        .into_iter()
        .map(|c| {
            let id = (c.rank() == 0).then(|| id.clone());
            std::thread::spawn(move || {
                let small = c.grow(2, None).unwrap_err();
                assert!(small.to_string().contains("more than"), "{small}");
                let g = c.grow(3, id.as_ref()).unwrap();
                assert_eq!((g.rank(), g.nranks()), (c.rank(), 3));
                all_reduce_steps(&g, 0, 3).unwrap();
                // The parent is still a working two-rank communicator.
                all_reduce_steps(&c, 0, 1).unwrap();
                c.rank()
            })
        })
        .collect();
    assert_eq!(newcomer.join().unwrap(), 2);
    let ranks: Vec<usize> = olds.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(ranks, vec![0, 1]);
}

/// Shrink's arguments: ranks out of range, listed twice, this rank itself; and ranks that stay
/// but disagree on the list. With a 3 s timeout: ranks 0 and 2 exclude nobody, rank 1 excludes
/// rank 2. Rank 0 hears from everyone and names rank 1; rank 1 (which only talks to rank 0)
/// names rank 0; rank 2 waits for rank 1, which no longer counts it in, and its timeout names
/// rank 1.
#[test]
fn shrink_refuses_bad_exclusion_lists() {
    let short = CommConfig::default().timeout(Duration::from_secs(3));
    let got = on_threads_with(3, short, |c| {
        let out = c.shrink(&[7], ShrinkMode::Default).unwrap_err();
        assert!(matches!(out, Error::InvalidArgument(_)) && out.to_string().contains("rank 7"));
        let twice = c.shrink(&[1, 1], ShrinkMode::Default).unwrap_err();
        assert!(twice.to_string().contains("listed twice"), "{twice}");
        let me = c.shrink(&[c.rank()], ShrinkMode::Default).unwrap_err();
        assert!(
            me.to_string().contains("excluded ranks do not call"),
            "{me}"
        );
        let list: &[usize] = if c.rank() == 1 { &[2] } else { &[] };
        match c.shrink(list, ShrinkMode::Default) {
            Ok(_) => "shrunk".to_string(),
            Err(e) => e.to_string(),
        }
    });
    assert!(
        got[0].contains("rank 1") && got[0].contains("different exclusion list"),
        "{got:?}"
    );
    assert!(
        got[1].contains("rank 0") && got[1].contains("different exclusion list"),
        "{got:?}"
    );
    // Rank 2 fails on rank 1: at its timeout, or at once when rank 1 has left already.
    assert!(got[2].contains("rank 1"), "{got:?}");
}

/// A suspended communicator refuses collectives until resumed; its GPU memory figures are zero
/// on host ranks.
#[test]
fn a_suspended_communicator_refuses_collectives_until_resumed() {
    let got = on_threads(2, |c| {
        all_reduce_steps(&c, 0, 1).unwrap();
        c.suspend(true).unwrap();
        assert!(c.gpu_memory().suspended);
        assert_eq!(c.gpu_memory().total(), 0);
        let refused = all_reduce_steps(&c, 1, 1).unwrap_err();
        assert!(refused.to_string().contains("suspended"), "{refused}");
        let twice = c.suspend(false).unwrap_err();
        assert!(twice.to_string().contains("already suspended"), "{twice}");
        c.resume().unwrap();
        assert!(!c.gpu_memory().suspended);
        all_reduce_steps(&c, 1, 2).unwrap();
        c.resume().unwrap_err().to_string()
    });
    assert!(got.iter().all(|e| e.contains("not suspended")), "{got:?}");
}
