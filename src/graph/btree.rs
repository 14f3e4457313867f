//! NCCL's binary and double binary trees over nodes (NCCL 2.28 src/graph/trees.cc; internals
//! §3.3): a binary tree that alternates leaves and inner nodes, rooted at 0, and a second tree
//! that is its mirror (even node counts) or its shift by one (odd), so that every node is a leaf
//! in one of the two.

/// A node's place in one tree: parent, two children (-1 = none as `None`), and whether it is
/// its parent's first (0) or second (1) child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TreeNode {
    /// Parent node.
    pub up: Option<usize>,
    /// First child.
    pub down0: Option<usize>,
    /// Second child.
    pub down1: Option<usize>,
    /// 0 when this node is its parent's first child, 1 when the second (0 for the root).
    pub child_type: u8,
}

fn opt(v: i64) -> Option<usize> {
    (v >= 0).then_some(v as usize)
}

/// NCCL `ncclGetBtree`: node `rank` of a binary tree over `nranks` nodes.
pub fn btree(nranks: usize, rank: usize) -> TreeNode {
    let (n, r) = (nranks as i64, rank as i64);
    let mut bit: i64 = 1;
    while bit < n {
        if bit & r != 0 {
            break;
        }
        bit <<= 1;
    }
    if r == 0 {
        return TreeNode {
            up: None,
            down0: None,
            down1: opt(if n > 1 { bit >> 1 } else { -1 }),
            child_type: 0,
        };
    }
    let mut up = (r ^ bit) | (bit << 1);
    if up >= n {
        up = r ^ bit;
    }
    let child_type = u8::from(r >= up);
    let mut lowbit = bit >> 1;
    let down0 = if lowbit == 0 { -1 } else { r - lowbit };
    let mut down1 = if lowbit == 0 { -1 } else { r + lowbit };
    while down1 >= n {
        down1 = if lowbit == 0 { -1 } else { r + lowbit };
        lowbit >>= 1;
    }
    TreeNode {
        up: opt(up),
        down0: opt(down0),
        down1: opt(down1),
        child_type,
    }
}

/// NCCL `ncclGetDtree`: node `rank`'s place in both trees of the double binary tree.
pub fn dtree(nranks: usize, rank: usize) -> (TreeNode, TreeNode) {
    let t0 = btree(nranks, rank);
    let t1 = if nranks % 2 == 1 {
        let shifted = btree(nranks, (rank + nranks - 1) % nranks);
        let f = |v: Option<usize>| v.map(|x| (x + 1) % nranks);
        TreeNode {
            up: f(shifted.up),
            down0: f(shifted.down0),
            down1: f(shifted.down1),
            child_type: shifted.child_type,
        }
    } else {
        let m = btree(nranks, nranks - 1 - rank);
        let f = |v: Option<usize>| v.map(|x| nranks - 1 - x);
        TreeNode {
            up: f(m.up),
            down0: f(m.down0),
            down1: f(m.down1),
            child_type: m.child_type,
        }
    };
    (t0, t1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fourteen_nodes_as_in_nccls_picture() {
        let t = |r| btree(14, r);
        assert_eq!((t(0).up, t(0).down0, t(0).down1), (None, None, Some(8)));
        assert_eq!(
            (t(8).up, t(8).down0, t(8).down1),
            (Some(0), Some(4), Some(12))
        );
        assert_eq!(
            (t(12).up, t(12).down0, t(12).down1),
            (Some(8), Some(10), Some(13))
        );
        assert_eq!((t(13).up, t(13).down0, t(13).down1), (Some(12), None, None));
        assert_eq!(t(13).child_type, 1);
        assert_eq!(t(4).child_type, 0);
    }

    #[test]
    fn second_tree_mirrors_or_shifts() {
        let (_, t1) = dtree(12, 11);
        assert_eq!((t1.up, t1.down1), (None, Some(3)));
        let (_, t1) = dtree(13, 1);
        assert_eq!((t1.up, t1.down1), (None, Some(9)));
        let (t0, t1) = dtree(2, 1);
        assert_eq!((t0.up, t1.up, t1.down1), (Some(0), None, Some(0)));
        let (t0, _) = dtree(1, 0);
        assert_eq!((t0.up, t0.down1), (None, None));
    }

    #[test]
    fn every_node_but_the_root_has_a_parent_that_lists_it() {
        let pick = |t: (TreeNode, TreeNode), which: usize| if which == 0 { t.0 } else { t.1 };
        for n in 1..70 {
            for r in 0..n {
                for which in 0..2 {
                    let t = pick(dtree(n, r), which);
                    if let Some(u) = t.up {
                        let p = pick(dtree(n, u), which);
                        assert!(
                            p.down0 == Some(r) || p.down1 == Some(r),
                            "n={n} r={r} tree {which}"
                        );
                    } else {
                        assert_eq!(pick(dtree(n, r), which).child_type, 0);
                    }
                }
            }
        }
    }
}
