//! A small multiplicative hash for short byte keys (host names, IP literals, DataNode UUIDs).
//!
//! The keys come from the NameNode, a trusted peer, and the tables that use this hash are
//! bounded, so DoS resistance (SipHash, std's default) is not worth its ~15 ns per lookup.
//! Entropy ends up in the high bits: tables index with `hash >> (64 - bits)`.

const K: u64 = 0xf135_7aea_2e62_a9c5;

#[inline(always)]
fn mix(h: u64, w: u64) -> u64 {
    (h ^ w).wrapping_mul(K)
}

/// Hash of `bytes` and `extra` (e.g. a port), never 0 (0 marks an empty slot).
#[inline]
pub(crate) fn hash_key(bytes: &[u8], extra: u64) -> u64 {
    let mut h = mix(0x243f_6a88_85a3_08d3, (bytes.len() as u64) << 32 | extra);
    let n = bytes.len();
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        h = mix(h, u64::from_le_bytes(w));
    }
    let rest = chunks.remainder().len();
    if rest > 0 {
        // the tail without a variable-length copy: the last 8 bytes overlapping, or for keys
        // under 8 bytes two overlapping 4-byte words (or single bytes)
        let w = if n >= 8 {
            let mut w = [0u8; 8];
            w.copy_from_slice(&bytes[n - 8..]);
            u64::from_le_bytes(w)
        } else if n >= 4 {
            let mut a = [0u8; 4];
            let mut b = [0u8; 4];
            a.copy_from_slice(&bytes[..4]);
            b.copy_from_slice(&bytes[n - 4..]);
            u64::from(u32::from_le_bytes(a)) << 32 | u64::from(u32::from_le_bytes(b))
        } else {
            u64::from(bytes[0]) << 16 | u64::from(bytes[n / 2]) << 8 | u64::from(bytes[n - 1])
        };
        h = mix(h, w);
    }
    // fold the low bits (which a multiply leaves weak) back up, then make it non-zero
    let h = h ^ (h >> 29);
    h.wrapping_mul(K) | 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distinguishes_length_port_and_bytes() {
        let a = hash_key(b"127.0.0.2", 9866);
        assert_ne!(a, hash_key(b"127.0.0.2", 9867));
        assert_ne!(a, hash_key(b"127.0.0.3", 9866));
        assert_ne!(hash_key(b"ab", 0), hash_key(b"ab\0", 0));
        assert_eq!(a, hash_key(b"127.0.0.2", 9866));
        assert_ne!(hash_key(b"", 0), 0);
    }

    #[test]
    fn high_bits_spread_over_sequential_keys() {
        // 256 addresses 10.0.0.0..255 into 64 buckets by the top 6 bits: no bucket gets a pile.
        let mut buckets = [0u32; 64];
        for i in 0..256 {
            let k = format!("10.0.0.{i}");
            buckets[(hash_key(k.as_bytes(), 9866) >> 58) as usize] += 1;
        }
        assert!(buckets.iter().all(|&n| n <= 14), "{buckets:?}");
    }
}
