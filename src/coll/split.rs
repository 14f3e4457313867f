//! Splitting element ranges over channels and ranks.

/// Splits `total` elements into `parts` contiguous ranges whose boundaries fall on multiples of
/// `unit` elements (except the end); later parts may be empty when `total` is small. Returns
/// `(start, len)` pairs in elements.
pub fn split_even(total: usize, parts: usize, unit: usize) -> Vec<(usize, usize)> {
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

/// How many channels a transfer of `bytes` uses: one per `per_channel` bytes, at least one, at
/// most `nchannels` (small messages stay on few channels, as NCCL's thread thresholds do).
pub fn channels_for(bytes: usize, per_channel: usize, nchannels: usize) -> usize {
    bytes
        .div_ceil(per_channel.max(1))
        .clamp(1, nchannels.max(1))
}

/// Elements per cache line for an element size, the alignment unit of channel splits.
pub fn line_elems(esize: usize) -> usize {
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

    #[test]
    fn channel_count() {
        assert_eq!(channels_for(8, 1 << 18, 4), 1);
        assert_eq!(channels_for(1 << 20, 1 << 18, 4), 4);
        assert_eq!(channels_for(1 << 30, 1 << 18, 2), 2);
    }
}
