//! NCCL's INFO TUNING table and the lines around it (NCCL 2.28 src/graph/tuning.cc,
//! src/init.cc), line for line without the `... NCCL INFO ` prefix.

use super::{COLLNET_DIRECT, Model, RING, SIMPLE, TREE};
use crate::config::syntax::{ALGORITHMS, PROTOCOLS};
use crate::func::Func;

/// The table rank 0 prints: for each block of three algorithms, the `Algorithm`, `Protocol`
/// and `Max NThreads` header lines and one `latency/bandwidth` line per collective.
pub fn tuning_lines(m: &Model) -> Vec<String> {
    let mut out = Vec::new();
    for block in 0..3 {
        let algos: Vec<usize> = (block * 3..block * 3 + 3).filter(|&a| a < 7).collect();
        let mut l = "  Algorithm   |".to_string();
        for &a in &algos {
            l.push_str(&format!(
                " {:>14}   {:>14}   {:>14} |",
                "", ALGORITHMS[a], ""
            ));
        }
        out.push(l);
        let mut l = "  Protocol    |".to_string();
        for _ in 0..3 {
            for p in PROTOCOLS {
                l.push_str(&format!(" {p:>14} |"));
            }
        }
        out.push(l);
        let mut l = " Max NThreads |".to_string();
        for &a in &algos {
            for p in 0..3 {
                l.push_str(&format!(" {:>14} |", m.max_threads[a][p]));
            }
        }
        out.push(l);
        for (fi, f) in Func::TUNED.into_iter().enumerate() {
            let mut l = format!("{:>13} |", f.nccl_name());
            for &a in &algos {
                for p in 0..3 {
                    l.push_str(&format!(
                        "{:8.1}/{:6.1} |",
                        f64::from(m.latency[fi][a][p]),
                        f64::from(m.bandwidth[fi][a][p])
                    ));
                }
            }
            out.push(l);
        }
    }
    out
}

/// `threadThresholds %ld/%ld/%ld | %ld/%ld/%ld | %ld | %ld` (tree, ring, collnet direct and chain).
pub fn thresholds_line(m: &Model) -> String {
    let t = &m.thread_thresholds;
    format!(
        "threadThresholds {}/{}/{} | {}/{}/{} | {} | {}",
        t[TREE][0],
        t[TREE][1],
        t[TREE][2],
        t[RING][0],
        t[RING][1],
        t[RING][2],
        t[COLLNET_DIRECT][SIMPLE],
        t[3][SIMPLE]
    )
}
