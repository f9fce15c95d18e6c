//! DataTransfer checksums (Hadoop's `DataChecksum`): one CRC per `bytesPerChecksum` chunk of
//! block data, big-endian on the wire, the last chunk of a block possibly short.
//!
//! CRC32C (Castagnoli, Hadoop's default `dfs.checksum.type`) runs on the `crc32c` crate, which
//! uses the SSE4.2 `crc32` instruction (ARMv8 CRC on aarch64) when the CPU has it;
//! CRC32 (zlib/IEEE) runs on `crc32fast` (PCLMULQDQ folding). CHECKSUM_NULL verifies nothing.

use hadoop_wire::pb::hadoop::hdfs::ChecksumTypeProto;

/// The algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChecksumKind {
    Null,
    Crc32,
    Crc32c,
}

impl ChecksumKind {
    /// From `ChecksumTypeProto` on the wire; `None` for values Hadoop never sends
    /// (DEFAULT/MIXED are not wire values).
    pub fn from_wire(v: i32) -> Option<ChecksumKind> {
        match ChecksumTypeProto::try_from(v).ok()? {
            ChecksumTypeProto::ChecksumNull => Some(ChecksumKind::Null),
            ChecksumTypeProto::ChecksumCrc32 => Some(ChecksumKind::Crc32),
            ChecksumTypeProto::ChecksumCrc32c => Some(ChecksumKind::Crc32c),
        }
    }

    /// Bytes per checksum on the wire: 4, or 0 for NULL.
    pub fn size(self) -> u32 {
        match self {
            ChecksumKind::Null => 0,
            _ => 4,
        }
    }

    /// Hadoop's name (`dfs.checksum.type`).
    pub fn name(self) -> &'static str {
        match self {
            ChecksumKind::Null => "NULL",
            ChecksumKind::Crc32 => "CRC32",
            ChecksumKind::Crc32c => "CRC32C",
        }
    }
}

/// A chunk whose CRC does not match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mismatch {
    /// Index of the chunk in the verified range.
    pub chunk: usize,
    /// CRC sent by the DataNode.
    pub expected: u32,
    /// CRC of the bytes received.
    pub computed: u32,
}

/// Algorithm and chunk size of a block's checksums.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataChecksum {
    pub kind: ChecksumKind,
    pub bytes_per_checksum: u32,
}

impl DataChecksum {
    /// The CRC of one chunk (0 for NULL).
    #[inline]
    pub fn compute(&self, chunk: &[u8]) -> u32 {
        match self.kind {
            ChecksumKind::Null => 0,
            ChecksumKind::Crc32 => crc32fast::hash(chunk),
            ChecksumKind::Crc32c => crc32c::crc32c(chunk),
        }
    }

    /// Checksum bytes that `data_len` data bytes carry.
    pub fn checksums_len(&self, data_len: usize) -> usize {
        if self.kind == ChecksumKind::Null {
            0
        } else {
            data_len.div_ceil(self.bytes_per_checksum.max(1) as usize) * 4
        }
    }

    /// Verifies `data` (starting at a chunk boundary) against `sums` (4 big-endian bytes per
    /// chunk). The caller has checked that `sums` has one CRC per chunk.
    #[inline]
    pub fn verify(&self, data: &[u8], sums: &[u8]) -> Result<(), Mismatch> {
        if self.kind == ChecksumKind::Null {
            return Ok(());
        }
        let bpc = self.bytes_per_checksum.max(1) as usize;
        for (chunk, (c, d)) in sums.chunks_exact(4).zip(data.chunks(bpc)).enumerate() {
            let expected = u32::from_be_bytes([c[0], c[1], c[2], c[3]]);
            let computed = self.compute(d);
            if computed != expected {
                return Err(Mismatch {
                    chunk,
                    expected,
                    computed,
                });
            }
        }
        Ok(())
    }

    /// Appends the checksums of `data` (the DataNode side; tests and fixtures).
    pub fn append_sums(&self, data: &[u8], out: &mut Vec<u8>) {
        if self.kind == ChecksumKind::Null {
            return;
        }
        for d in data.chunks(self.bytes_per_checksum.max(1) as usize) {
            out.extend_from_slice(&self.compute(d).to_be_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_vectors() {
        // RFC 3720 B.4 / the usual check values
        let c = DataChecksum {
            kind: ChecksumKind::Crc32c,
            bytes_per_checksum: 512,
        };
        assert_eq!(c.compute(b"123456789"), 0xe306_9283);
        assert_eq!(c.compute(&[0u8; 32]), 0x8a91_36aa);
        let z = DataChecksum {
            kind: ChecksumKind::Crc32,
            bytes_per_checksum: 512,
        };
        assert_eq!(z.compute(b"123456789"), 0xcbf4_3926);
        assert_eq!(ChecksumKind::from_wire(2), Some(ChecksumKind::Crc32c));
        assert_eq!(ChecksumKind::from_wire(3), None);
    }

    #[test]
    fn verify_finds_the_bad_chunk_including_a_short_last_one() {
        for kind in [ChecksumKind::Crc32, ChecksumKind::Crc32c] {
            let c = DataChecksum {
                kind,
                bytes_per_checksum: 512,
            };
            let data: Vec<u8> = (0..1300u32).map(|i| i as u8).collect();
            let mut sums = Vec::new();
            c.append_sums(&data, &mut sums);
            assert_eq!(sums.len(), 12);
            assert_eq!(c.checksums_len(1300), 12);
            assert!(c.verify(&data, &sums).is_ok());
            for (pos, chunk) in [(0usize, 0usize), (700, 1), (1299, 2)] {
                let mut bad = data.clone();
                bad[pos] ^= 0x40;
                let m = c.verify(&bad, &sums).unwrap_err();
                assert_eq!(m.chunk, chunk);
                assert_ne!(m.expected, m.computed);
            }
        }
        let n = DataChecksum {
            kind: ChecksumKind::Null,
            bytes_per_checksum: 512,
        };
        assert!(n.verify(b"anything", &[]).is_ok());
        assert_eq!(n.checksums_len(100), 0);
    }
}
