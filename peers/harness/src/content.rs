//! The launcher's `write` content, regenerated in Rust.
//!
//! Byte `i` of a file written by `write PATH BYTES` is byte `i % 8` (little-endian) of
//! `splitmix64(i / 8)`, so any range can be produced on its own (Java twin: `Content.java`).

/// One step of SplitMix64 applied to `x` (the stream's state after `x + 1` increments).
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Fills `buf` with the content that starts at file offset `offset`.
pub fn fill(buf: &mut [u8], offset: u64) {
    let mut pos = offset;
    let mut i = 0;
    while i < buf.len() {
        let word = splitmix64(pos >> 3).to_le_bytes();
        let start = (pos & 7) as usize;
        let n = (8 - start).min(buf.len() - i);
        buf[i..i + n].copy_from_slice(&word[start..start + n]);
        i += n;
        pos += n as u64;
    }
}

/// The content of `[offset, offset + len)` as a new vector.
pub fn range(offset: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0; len];
    fill(&mut v, offset);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_agree_with_the_whole() {
        let whole = range(0, 1000);
        for (off, len) in [(0, 1), (3, 17), (8, 8), (7, 100), (999, 1)] {
            assert_eq!(range(off as u64, len), whole[off..off + len]);
        }
    }

    #[test]
    fn first_word_is_splitmix_of_zero() {
        assert_eq!(range(0, 8), splitmix64(0).to_le_bytes());
        // SplitMix64 seeded 0: first output 0xE220A8397B1DCDAF (the published test vector)
        assert_eq!(splitmix64(0), 0xE220_A839_7B1D_CDAF);
    }
}
