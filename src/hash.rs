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

/// NCCL's `getHash` (`src/include/bitops.h`, 2.28): a 128-bit accumulator starting at {1, 1},
/// the length xor-ed into its first word, then each 8-byte little-endian chunk (the last one
/// zero-padded) added after a multiply-xorshift mix, and a final mix of both words. NCCL hashes
/// host identities with it, so a `host_hash` computed here equals the one NCCL writes.
pub(crate) fn nccl_hash(bytes: &[u8]) -> u64 {
    let mut acc = [1u64, 1u64];
    acc[0] ^= bytes.len() as u64;
    for chunk in bytes.chunks(8) {
        acc[0] = acc[0].wrapping_add(acc[1]);
        acc[1] ^= acc[0];
        acc[0] ^= acc[0] >> 31;
        acc[0] = acc[0].wrapping_mul(0x9de6_2bbc_8cef_3ce3);
        acc[1] ^= acc[1] >> 32;
        acc[1] = acc[1].wrapping_mul(0x485c_d631_1b59_9e79);
        let mut word = [0u8; 8];
        word[..chunk.len()].copy_from_slice(chunk);
        acc[0] = acc[0].wrapping_add(u64::from_le_bytes(word));
    }
    let mut h = acc[0];
    h ^= h >> 31;
    h = h.wrapping_mul(0xbac3_bd56_2846_de6b);
    h = h.wrapping_add(acc[1]);
    h ^= h >> 32;
    h.wrapping_mul(0x995a_187a_14e7_b445)
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

    #[test]
    fn nccl_hash_equals_nccls() {
        // host_hash in NCCL 2.28.9's NCCL_TOPO_DUMP_FILE with NCCL_HOSTID=rnccl-hash-vector, on
        // 2×H200 (perf/top_vs_job.sh, 2026-11-27): 17 bytes, two whole words and a padded one.
        assert_eq!(nccl_hash(b"rnccl-hash-vector"), 0xa7de_d592_0e9e_445c);
    }
}
