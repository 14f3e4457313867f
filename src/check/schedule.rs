//! Which hosts a health check measures together, round by round. A round is a set of groups
//! that share no host, so all of a round's groups run at once without contending for a host's
//! links; rounds run one after the other.
//!
//! Every pair (`--pairwise`) follows the circle method of a round-robin tournament: with `n`
//! hosts (one "bye" added when `n` is odd), host `n-1` stays put while the others rotate, giving
//! `n-1` rounds (`n` when odd) in which every pair meets exactly once. One pair per host
//! (`--pairwise-quick`) pairs host `i` with host `i + n/2` (the list's two halves against each
//! other, so on a list sorted by rack the pairs cross the fabric's upper layers); with an odd
//! count, the host left over is paired with host 0 in a second round.

use serde::{Deserialize, Serialize};

/// Which pairs of hosts a check measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pairing {
    /// No pair: each host alone only.
    None,
    /// Every pair of hosts (`n(n-1)/2` pairs in `n-1` rounds, `n` when `n` is odd).
    All,
    /// A pairing in which every host appears once (one round; two when `n` is odd).
    Quick,
}

/// Hosts measured together: one alone, or a pair. Numbers are host indices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Group {
    /// One host's ranks on their own (its GPUs or CPU ranks, without the network).
    Alone(usize),
    /// Two hosts' ranks together, the lower index first.
    Pair(usize, usize),
}

impl Group {
    /// The pair `(a, b)` with the lower index first.
    pub fn pair(a: usize, b: usize) -> Group {
        Group::Pair(a.min(b), a.max(b))
    }

    /// Whether host `h` takes part.
    pub fn has(self, h: usize) -> bool {
        match self {
            Group::Alone(a) => a == h,
            Group::Pair(a, b) => a == h || b == h,
        }
    }

    /// The hosts taking part, in index order.
    pub fn hosts(self) -> Vec<usize> {
        match self {
            Group::Alone(a) => vec![a],
            Group::Pair(a, b) => vec![a, b],
        }
    }
}

/// The pairs' rounds for `n` hosts as `pairing` says (empty for [`Pairing::None`] or fewer
/// than two hosts). No host appears twice in a round.
pub fn pair_rounds(n: usize, pairing: Pairing) -> Vec<Vec<Group>> {
    if n < 2 {
        return Vec::new();
    }
    match pairing {
        Pairing::None => Vec::new(),
        Pairing::All => round_robin(n),
        Pairing::Quick => quick(n),
    }
}

/// The circle method: slot `m-1` fixed, slots `0..m-1` rotating, `m` = `n` rounded up to even;
/// a pair with the extra slot `n` (odd `n`) is that round's bye.
fn round_robin(n: usize) -> Vec<Vec<Group>> {
    let m = n + n % 2;
    let ring = m - 1;
    (0..ring)
        .map(|r| {
            let mut round = vec![(m - 1, r)];
            for k in 1..m / 2 {
                round.push(((r + k) % ring, (r + ring - k) % ring));
            }
            round
                .into_iter()
                .filter(|&(a, b)| a < n && b < n)
                .map(|(a, b)| Group::pair(a, b))
                .collect()
        })
        .collect()
}

/// Host `i` with host `i + half`; an odd count's last host with host 0 in a second round.
fn quick(n: usize) -> Vec<Vec<Group>> {
    let half = n / 2;
    let mut rounds = vec![(0..half).map(|i| Group::pair(i, i + half)).collect()];
    if n % 2 == 1 {
        rounds.push(vec![Group::pair(n - 1, 0)]);
    }
    rounds
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    fn assert_disjoint(rounds: &[Vec<Group>]) {
        for round in rounds {
            let mut seen = BTreeSet::new();
            for g in round {
                for h in g.hosts() {
                    assert!(seen.insert(h), "host {h} twice in round {round:?}");
                }
            }
        }
    }

    #[test]
    fn every_pair_meets_exactly_once() {
        for n in 2..=17 {
            let rounds = pair_rounds(n, Pairing::All);
            assert_disjoint(&rounds);
            assert_eq!(rounds.len(), if n % 2 == 0 { n - 1 } else { n }, "n={n}");
            let all: Vec<Group> = rounds.iter().flatten().copied().collect();
            let distinct: BTreeSet<Group> = all.iter().copied().collect();
            assert_eq!(all.len(), n * (n - 1) / 2, "n={n}: a pair ran twice");
            assert_eq!(distinct.len(), n * (n - 1) / 2, "n={n}");
            for a in 0..n {
                for b in a + 1..n {
                    assert!(
                        distinct.contains(&Group::Pair(a, b)),
                        "n={n}: {a}-{b} missing"
                    );
                }
            }
            // Each round keeps every host busy but the bye.
            for round in &rounds {
                assert_eq!(round.len(), n / 2, "n={n}");
            }
        }
    }

    #[test]
    fn quick_pairing_covers_every_host() {
        for n in 2..=17 {
            let rounds = pair_rounds(n, Pairing::Quick);
            assert_disjoint(&rounds);
            let times: Vec<usize> = (0..n)
                .map(|h| rounds.iter().flatten().filter(|g| g.has(h)).count())
                .collect();
            assert!(times.iter().all(|&t| t >= 1), "n={n}: {times:?}");
            if n % 2 == 0 {
                assert_eq!(rounds.len(), 1);
                assert!(times.iter().all(|&t| t == 1), "n={n}: {times:?}");
            } else {
                assert_eq!(rounds.len(), 2);
                assert_eq!(rounds.iter().flatten().count(), n / 2 + 1);
            }
        }
        assert_eq!(
            pair_rounds(4, Pairing::Quick),
            vec![vec![Group::Pair(0, 2), Group::Pair(1, 3)]]
        );
        assert_eq!(
            pair_rounds(3, Pairing::Quick),
            vec![vec![Group::Pair(0, 1)], vec![Group::Pair(0, 2)]]
        );
    }

    #[test]
    fn nothing_to_pair() {
        assert!(pair_rounds(1, Pairing::All).is_empty());
        assert!(pair_rounds(1, Pairing::Quick).is_empty());
        assert!(pair_rounds(8, Pairing::None).is_empty());
    }
}
