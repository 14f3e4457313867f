//! Stable hashes: the same value in every process and build, so ranks can compare what they
//! computed apart (host identities, communicator tags, kernel cache keys).

/// FNV-1a 64-bit hash of `bytes` (Fowler, Noll and Vo; offset basis 0xcbf29ce484222325, prime
/// 0x100000001b3, as published at <http://www.isthe.com/chongo/tech/comp/fnv/>).
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        // The published test vectors for FNV-1a 64.
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_ne!(fnv1a(b"node-a"), fnv1a(b"node-b"));
    }
}
