//! A small multiplicative hash for short byte keys (host names, IP literals, DataNode UUIDs).
//!
//! The keys come from the NameNode, a trusted peer, and the tables that use this hash are
//! bounded, so DoS resistance (SipHash, std's default) is not worth its ~15 ns per lookup:
//! keys chosen to collide would collide. Entropy ends up in the high bits: tables index with
//! `hash >> (64 - bits)`.

const K0: u64 = 0x243f_6a88_85a3_08d3;
const K1: u64 = 0x1319_8a2e_0370_7344;
const K2: u64 = 0xa409_3822_299f_31d0;

/// The high and low halves of the 128-bit product, xored ("folded multiply", as in
/// foldhash and wyhash): every input bit reaches the middle and high bits of the result in
/// one multiply.
#[inline(always)]
fn fold_mul(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

#[inline(always)]
fn word8(s: &[u8], i: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&s[i..i + 8]);
    u64::from_le_bytes(w)
}

#[inline(always)]
fn word4(s: &[u8], i: usize) -> u64 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&s[i..i + 4]);
    u64::from(u32::from_le_bytes(w))
}

/// A string of up to 16 bytes as two words, without a loop or a variable-length copy: two
/// overlapping 8-byte words (8..=16 bytes), two overlapping 4-byte words (4..=7), or the
/// bytes at 0, n/2 and n-1 (1..=3, which covers all of them). Two strings of the same length
/// up to 16 are equal exactly when their words are.
#[inline(always)]
pub(crate) fn short_words(bytes: &[u8]) -> (u64, u64) {
    let n = bytes.len();
    if n >= 8 {
        (word8(bytes, 0), word8(bytes, n - 8))
    } else if n >= 4 {
        (word4(bytes, 0), word4(bytes, n - 4))
    } else if n > 0 {
        let x = u64::from(bytes[0]) << 16 | u64::from(bytes[n / 2]) << 8;
        (x | u64::from(bytes[n - 1]), 0)
    } else {
        (0, 0)
    }
}

/// Hash of `bytes` and `extra` (e.g. a port), never 0 (0 marks an empty slot).
///
/// Keys of up to 16 bytes (IPv4 literals, most host names and racks) are read as two
/// overlapping words without a loop and cost two multiplies; longer keys take one multiply
/// per 16 bytes more. The length and `extra` are mixed in, so keys that differ only by them
/// differ.
#[inline]
pub(crate) fn hash_key(bytes: &[u8], extra: u64) -> u64 {
    let n = bytes.len();
    let seed = K0 ^ ((n as u64) << 32) ^ extra;
    let h = if n <= 16 {
        let (a, b) = short_words(bytes);
        fold_mul(a ^ K1, b ^ seed)
    } else {
        let mut h = seed;
        let mut i = 0;
        while i + 16 < n {
            h = fold_mul(word8(bytes, i) ^ K1, word8(bytes, i + 8) ^ h);
            i += 16;
        }
        // the last 16 bytes, overlapping the previous block when n is not a multiple of 16
        fold_mul(word8(bytes, n - 16) ^ K1, word8(bytes, n - 8) ^ h)
    };
    fold_mul(h, K2) | 1
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
    fn every_length_and_byte_counts() {
        // lengths 0..=40 cover the short paths (0, 1..=3, 4..=7, 8..=16) and the block loop;
        // flipping any one byte or appending a zero byte changes the hash
        let base: Vec<u8> = (0..40u8).map(|i| b'a' + i % 26).collect();
        let mut seen = std::collections::HashSet::new();
        for n in 0..=base.len() {
            let k = &base[..n];
            let h = hash_key(k, 7);
            assert!(seen.insert(h), "length {n} collides");
            for i in 0..n {
                let mut f = k.to_vec();
                f[i] ^= 0x20;
                assert_ne!(hash_key(&f, 7), h, "length {n}, byte {i}");
            }
        }
        let uuid = b"6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a00";
        assert_ne!(hash_key(uuid, 0), hash_key(&uuid[..35], 0));
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
