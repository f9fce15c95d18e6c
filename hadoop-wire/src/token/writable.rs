//! Hadoop's Writable primitives (`org.apache.hadoop.io.WritableUtils`, `Text`), the building
//! blocks of the Writable `Token`, the Writable Credentials file and the delegation token
//! identifier.
//!
//! - vlong / vint (`writeVLong`, `writeVInt`): −112 ..= 127 in one byte; otherwise a length
//!   byte (−113 ..= −120: positive, that many minus 112 bytes follow; −121 ..= −128: negative,
//!   one's complement, minus 120 bytes follow) and the magnitude big-endian. `readVInt` refuses a
//!   value outside the `int` range. Reading accepts non-minimal encodings, as Java does.
//! - `Text` (`Text.write`, `Text.writeString`): vint byte length, then UTF-8.
//! - `WritableUtils.writeString`: **int32** big-endian byte length (−1 = null), then UTF-8.
//!   The two string forms meet in one identifier (BlockTokenIdentifier), so they have
//!   distinct names here: [`WritableReader::read_text`] vs [`WritableReader::read_string`].
//!
//! [`WritableReader`] is a cursor over borrowed bytes: every read checks the bytes that remain
//! (a [`TokenError::Truncated`] otherwise), and every length is checked against a cap before
//! anything is sliced or copied.

use super::TokenError;

/// A cursor over borrowed Writable bytes (Java's `DataInput` over a byte array).
#[derive(Debug, Clone, Copy)]
pub struct WritableReader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> WritableReader<'a> {
    /// A reader at the start of `buf`.
    pub const fn new(buf: &'a [u8]) -> Self {
        WritableReader { buf, pos: 0 }
    }

    /// The bytes not read yet.
    pub fn remaining(&self) -> &'a [u8] {
        self.buf.get(self.pos..).unwrap_or_default()
    }

    /// Bytes read so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// True when everything has been read.
    pub fn is_empty(&self) -> bool {
        self.remaining().is_empty()
    }

    /// `readFully` of `n` bytes.
    pub fn read_bytes(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], TokenError> {
        let rest = self.remaining();
        let out = rest.get(..n).ok_or(TokenError::Truncated { what })?;
        self.pos += n;
        Ok(out)
    }

    /// `readByte`.
    pub fn read_u8(&mut self, what: &'static str) -> Result<u8, TokenError> {
        Ok(self.read_bytes(1, what)?[0])
    }

    /// `readInt` (big-endian).
    pub fn read_i32(&mut self, what: &'static str) -> Result<i32, TokenError> {
        let b = self.read_bytes(4, what)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// `readLong` (big-endian).
    pub fn read_i64(&mut self, what: &'static str) -> Result<i64, TokenError> {
        let b = self.read_bytes(8, what)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(i64::from_be_bytes(a))
    }

    /// `readUnsignedShort` (big-endian).
    pub fn read_u16(&mut self, what: &'static str) -> Result<u16, TokenError> {
        let b = self.read_bytes(2, what)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    /// `WritableUtils.readVLong`.
    pub fn read_vlong(&mut self, what: &'static str) -> Result<i64, TokenError> {
        let first = self.read_u8(what)? as i8;
        let size = decode_vint_size(first);
        if size == 1 {
            return Ok(i64::from(first));
        }
        let mut v: u64 = 0;
        for &b in self.read_bytes(size - 1, what)? {
            v = (v << 8) | u64::from(b);
        }
        let v = v as i64;
        Ok(if is_negative_vint(first) { !v } else { v })
    }

    /// `WritableUtils.readVInt`: a vlong that must fit an `int`.
    pub fn read_vint(&mut self, what: &'static str) -> Result<i32, TokenError> {
        let v = self.read_vlong(what)?;
        i32::try_from(v).map_err(|_| TokenError::VIntRange { what, value: v })
    }

    /// A vint length in `0 ..= max`.
    pub fn read_vint_len(&mut self, what: &'static str, max: usize) -> Result<usize, TokenError> {
        let len = self.read_vint(what)?;
        check_len(what, i64::from(len), max)
    }

    /// `vint len ‖ len bytes` (the identifier and password of a Writable `Token`, a
    /// Credentials secret).
    pub fn read_vint_bytes(
        &mut self,
        what: &'static str,
        max: usize,
    ) -> Result<&'a [u8], TokenError> {
        let len = self.read_vint_len(what, max)?;
        self.read_bytes(len, what)
    }

    /// `Text.readFields`: vint length and that many bytes, which must be UTF-8.
    pub fn read_text(&mut self, what: &'static str, max: usize) -> Result<&'a str, TokenError> {
        let b = self.read_vint_bytes(what, max)?;
        std::str::from_utf8(b).map_err(|_| TokenError::Utf8 { what })
    }

    /// `WritableUtils.readString`: int32 length (−1 = null) and that many bytes of UTF-8.
    pub fn read_string(
        &mut self,
        what: &'static str,
        max: usize,
    ) -> Result<Option<&'a str>, TokenError> {
        let len = self.read_i32(what)?;
        if len == -1 {
            return Ok(None);
        }
        let len = check_len(what, i64::from(len), max)?;
        let b = self.read_bytes(len, what)?;
        std::str::from_utf8(b)
            .map(Some)
            .map_err(|_| TokenError::Utf8 { what })
    }
}

fn check_len(what: &'static str, len: i64, max: usize) -> Result<usize, TokenError> {
    if len < 0 {
        return Err(TokenError::NegativeLength { what, len });
    }
    let len = len as u64;
    if len > max as u64 {
        return Err(TokenError::TooLong { what, len, max });
    }
    Ok(len as usize)
}

/// `WritableUtils.decodeVIntSize`: the total encoded size given the first byte.
pub fn decode_vint_size(first: i8) -> usize {
    if first >= -112 {
        1
    } else if first < -120 {
        (-119 - i32::from(first)) as usize
    } else {
        (-111 - i32::from(first)) as usize
    }
}

/// `WritableUtils.isNegativeVInt`.
pub fn is_negative_vint(first: i8) -> bool {
    first < -120 || (-112..0).contains(&first)
}

/// `WritableUtils.getVIntSize`: the encoded size of `v`.
pub fn vlong_size(v: i64) -> usize {
    if (-112..=127).contains(&v) {
        return 1;
    }
    let magnitude = if v < 0 { !v } else { v } as u64;
    let bytes = 8 - (magnitude.leading_zeros() as usize) / 8;
    1 + bytes
}

/// `WritableUtils.writeVLong`.
pub fn write_vlong(out: &mut Vec<u8>, v: i64) {
    if (-112..=127).contains(&v) {
        out.push(v as i8 as u8);
        return;
    }
    let (magnitude, base) = if v < 0 {
        ((!v) as u64, -120i32)
    } else {
        (v as u64, -112i32)
    };
    let n = vlong_size(v) - 1;
    out.push((base - n as i32) as i8 as u8);
    out.extend_from_slice(&magnitude.to_be_bytes()[8 - n..]);
}

/// `WritableUtils.writeVInt`.
pub fn write_vint(out: &mut Vec<u8>, v: i32) {
    write_vlong(out, i64::from(v));
}

/// `vint len ‖ bytes`. Lengths beyond `i32::MAX` cannot be written by Java either; callers
/// keep to [`super::Limits`].
pub fn write_vint_bytes(out: &mut Vec<u8>, b: &[u8]) {
    write_vlong(out, b.len() as i64);
    out.extend_from_slice(b);
}

/// `Text.writeString` / `Text.write`: vint length ‖ UTF-8.
pub fn write_text(out: &mut Vec<u8>, s: &str) {
    write_vint_bytes(out, s.as_bytes());
}

/// `WritableUtils.writeString`: int32 length ‖ UTF-8; `None` is written as length −1.
pub fn write_string(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        None => out.extend_from_slice(&(-1i32).to_be_bytes()),
        Some(s) => {
            out.extend_from_slice(&(s.len() as i32).to_be_bytes());
            out.extend_from_slice(s.as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vlong(v: i64) -> Vec<u8> {
        let mut b = Vec::new();
        write_vlong(&mut b, v);
        b
    }

    #[test]
    fn vlong_sizes_and_round_trips() {
        for v in [
            0,
            1,
            -1,
            127,
            -112,
            128,
            -113,
            255,
            256,
            -256,
            -257,
            i64::from(i32::MAX),
            i64::from(i32::MIN),
            i64::MAX,
            i64::MIN,
        ] {
            let b = vlong(v);
            assert_eq!(b.len(), vlong_size(v), "{v}");
            assert_eq!(decode_vint_size(b[0] as i8), b.len(), "{v}");
            let mut r = WritableReader::new(&b);
            assert_eq!(r.read_vlong("v").unwrap(), v);
            assert!(r.is_empty());
        }
        assert_eq!(vlong(128), [0x8f, 0x80]);
        assert_eq!(vlong(-113), [0x87, 0x70]);
        assert_eq!(
            vlong(i64::MAX),
            [0x88, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]
        );
    }

    #[test]
    fn non_minimal_vlong_is_read_like_java() {
        // -113: one byte follows, holding 5.
        assert_eq!(WritableReader::new(&[0x8f, 5]).read_vlong("v").unwrap(), 5);
    }

    #[test]
    fn write_string_null_and_text() {
        let mut b = Vec::new();
        write_string(&mut b, None);
        write_string(&mut b, Some("ab"));
        write_text(&mut b, "cd");
        assert_eq!(
            b,
            [0xff, 0xff, 0xff, 0xff, 0, 0, 0, 2, b'a', b'b', 2, b'c', b'd']
        );
        let mut r = WritableReader::new(&b);
        assert_eq!(r.read_string("s", 10).unwrap(), None);
        assert_eq!(r.read_string("s", 10).unwrap(), Some("ab"));
        assert_eq!(r.read_text("t", 10).unwrap(), "cd");
        assert!(r.is_empty());
    }
}
