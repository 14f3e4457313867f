//! Splitting element ranges over channels and ranks.

/// Splits `total` elements into `parts` contiguous ranges whose boundaries fall on multiples of
/// `unit` elements (except the end); later parts may be empty when `total` is small. Returns
/// `(start, len)` pairs in elements.
pub(super) fn split_even(total: usize, parts: usize, unit: usize) -> Vec<(usize, usize)> {
    let parts = parts.max(1);
    let unit = unit.max(1);
    let units = total.div_ceil(unit);
    let (base, extra) = (units / parts, units % parts);
    let mut out = Vec::with_capacity(parts);
    let mut start = 0;
    for p in 0..parts {
        let n_units = base + usize::from(p < extra);
        let len = (n_units * unit).min(total - start);
        out.push((start, len));
        start += len;
    }
    out
}

/// Elements per cache line for an element size, the alignment unit of channel splits.
pub(super) fn line_elems(esize: usize) -> usize {
    (64 / esize).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn split_covers_exactly(total in 0usize..10_000, parts in 1usize..9, unit in 1usize..20) {
            let s = split_even(total, parts, unit);
            prop_assert_eq!(s.len(), parts);
            let mut at = 0;
            for &(start, len) in &s {
                prop_assert_eq!(start, at);
                at += len;
                if start + len < total { prop_assert_eq!((start + len) % unit, 0); }
            }
            prop_assert_eq!(at, total);
        }
    }
}
