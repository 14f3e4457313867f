//! The status service keeps answering while clients that never send a request hold
//! connections open: a stuck or hostile client must not blind the job's diagnosis. A real job
//! (two ranks as threads, all-reducing over shared memory) runs throughout.

mod common;

use std::io::Read;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rnccl::RedOp;

/// Idle connections opened against the service (well past its caps of 16 per peer and 256 in
/// all).
const IDLE: usize = 300;

#[test]
fn answers_while_hundreds_of_idle_connections_are_open() {
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let job = s.spawn(|| {
            common::all_ok(common::on_threads(2, &[], |c| {
                let mut send = vec![1.0f32; 4096];
                let mut recv = vec![0.0f32; 4096];
                // The ranks stop together: element 0 carries each rank's stop flag, so the
                // operation that sees one raised is every rank's last.
                loop {
                    send[0] = if stop.load(Ordering::Relaxed) {
                        1.0
                    } else {
                        0.0
                    };
                    c.all_reduce(&send, &mut recv, RedOp::Sum)
                        .map_err(|e| e.to_string())?;
                    if recv[0] > 0.0 {
                        return Ok(());
                    }
                }
            }))
        });
        let checked = std::panic::catch_unwind(|| {
            let start = Instant::now();
            let addr = loop {
                if let Some(a) = rnccl::status::address() {
                    break a;
                }
                assert!(
                    start.elapsed() < Duration::from_secs(30),
                    "no status service"
                );
                std::thread::sleep(Duration::from_millis(20));
            };
            // The service answers as soon as the process's first rank starts it, before both
            // communicators have registered: wait for them (a loaded machine is slow here).
            while rnccl::status::query(addr, Duration::from_secs(2))
                .map_or(true, |s| s.comms.len() < 2)
            {
                assert!(
                    start.elapsed() < Duration::from_secs(30),
                    "the communicators never showed in the status"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
            let idle: Vec<TcpStream> = (0..IDLE)
                .map(|_| TcpStream::connect(addr).expect("connect"))
                .collect();
            for round in 0..5 {
                let asked = Instant::now();
                let status = rnccl::status::query(addr, Duration::from_secs(2))
                    .unwrap_or_else(|e| panic!("round {round}: {e}"));
                assert_eq!(status.comms.len(), 2, "{status:?}");
                assert!(
                    asked.elapsed() < Duration::from_millis(1500),
                    "round {round}: answered after {:?}",
                    asked.elapsed()
                );
            }
            // The service closed all but its per-peer share of the idle ones.
            let open = idle
                .iter()
                .filter(|s| {
                    s.set_nonblocking(true).unwrap();
                    let mut b = [0u8; 1];
                    matches!((&**s).read(&mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
                })
                .count();
            assert!(open <= 16, "{open} idle connections still held");
            // Past the request deadline (2 s) the rest go too.
            std::thread::sleep(Duration::from_millis(2500));
            let open = idle
                .iter()
                .filter(|s| {
                    let mut b = [0u8; 1];
                    matches!((&**s).read(&mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
                })
                .count();
            assert_eq!(open, 0, "idle connections outlived the request deadline");
        });
        stop.store(true, Ordering::Relaxed);
        job.join().unwrap();
        if let Err(p) = checked {
            std::panic::resume_unwind(p);
        }
    });
}
