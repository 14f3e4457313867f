//! First end-to-end check: ranks as threads, a few collectives through the public API.

use rnccl::{Communicator, RedOp};

#[test]
fn two_and_three_thread_ranks_all_reduce() {
    for n in [1, 2, 3] {
        let comms = Communicator::init_all(n).expect("init_all");
        let handles: Vec<_> = comms
            .into_iter()
            .map(|c| {
                std::thread::spawn(move || {
                    let r = c.rank() as f32;
                    let send = vec![r + 1.0; 1000];
                    let mut recv = vec![0f32; 1000];
                    c.all_reduce(&send, &mut recv, RedOp::Sum).unwrap();
                    let want: f32 = (1..=c.nranks()).map(|x| x as f32).sum();
                    assert!(recv.iter().all(|&v| v == want), "{:?}", &recv[..4]);
                    let mut big = vec![c.rank() as u64; 3 << 20];
                    c.all_reduce_in_place(&mut big, RedOp::Max).unwrap();
                    assert!(big.iter().all(|&v| v == c.nranks() as u64 - 1));
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    }
}
