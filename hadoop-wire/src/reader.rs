//! A borrowing protobuf reader.
//!
//! [`Reader`] walks a byte slice one wire-format item at a time: varints (at most 10 bytes),
//! zigzag, fixed32/64, length-delimited slices (bounds-checked, returned as sub-slices of the
//! input, never copied) and tags. [`Reader::skip`] skips any value, including groups (start/end
//! group, nested, depth-limited). Every failure is a [`DecodeError`]; no input makes it panic
//! or allocate.
//!
//! The public methods return [`DecodeError`]. The views use generic twins of them
//! (`Reader::tag::<E>` etc.) with a [`Failure`] type parameter: in hot loops they run with
//! the one-bit [`Invalid`] and re-run with `DecodeError` only when something failed.

/// Maximum nesting of messages and groups, as in protobuf-java (`recursionLimit` 100).
pub const RECURSION_LIMIT: u32 = 100;

/// Largest valid field number (2^29 − 1).
pub const MAX_FIELD_NUMBER: u32 = (1 << 29) - 1;

/// The six protobuf wire types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum WireType {
    Varint = 0,
    Fixed64 = 1,
    Len = 2,
    StartGroup = 3,
    EndGroup = 4,
    Fixed32 = 5,
}

impl WireType {
    /// The wire type of the low 3 bits of a tag; 6 and 7 are invalid.
    #[inline]
    pub fn from_bits(bits: u8) -> Result<WireType, DecodeError> {
        Ok(match bits {
            0 => WireType::Varint,
            1 => WireType::Fixed64,
            2 => WireType::Len,
            3 => WireType::StartGroup,
            4 => WireType::EndGroup,
            5 => WireType::Fixed32,
            other => return Err(DecodeError::BadWireType(other)),
        })
    }
}

/// Why bytes could not be read as the expected protobuf message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The input ended inside a tag or value.
    #[error("truncated protobuf input")]
    Truncated,
    /// A varint ran past 10 bytes, or its 10th byte carries bits beyond 64.
    #[error("varint longer than 10 bytes or overflowing 64 bits")]
    VarintOverflow,
    /// Wire type 6 or 7.
    #[error("invalid wire type {0}")]
    BadWireType(u8),
    /// Field number 0, or a tag above 2^32 / field number above 2^29 − 1.
    #[error("invalid field number {0}")]
    BadFieldNumber(u64),
    /// A length prefix claims more bytes than remain.
    #[error("length {len} exceeds the {remaining} remaining bytes")]
    LengthOutOfBounds { len: u64, remaining: usize },
    /// A known field arrived with a wire type its declared type cannot have.
    #[error("{message}.{field}: wire type {actual:?} does not match the declared type")]
    WrongWireType {
        message: &'static str,
        field: &'static str,
        actual: WireType,
    },
    /// A packed repeated fixed-width field whose length is not a multiple of the width.
    #[error("{message}.{field}: packed length {len} is not a multiple of {width}")]
    PackedLength {
        message: &'static str,
        field: &'static str,
        len: usize,
        width: usize,
    },
    /// A `required` field is absent (Java rejects such a message).
    #[error("missing required field {message}.{field}")]
    MissingRequired {
        message: &'static str,
        field: &'static str,
    },
    /// A `string` field that is not UTF-8 was read as `&str`.
    #[error("{message}.{field}: invalid UTF-8")]
    InvalidUtf8 {
        message: &'static str,
        field: &'static str,
    },
    /// An end-group tag that closes nothing or closes a different field.
    #[error("end-group tag for field {found} where {expected:?} was open")]
    GroupMismatch { expected: Option<u32>, found: u32 },
    /// Messages or groups nested deeper than [`RECURSION_LIMIT`].
    #[error("nesting deeper than {0}")]
    DepthLimit(u32),
    /// A non-repeated embedded message occurs more than once. protobuf merges the
    /// occurrences; the views refuse such input in `validate()` instead (see [`crate::view`]).
    #[error("{message}.{field}: non-repeated message field occurs more than once")]
    DuplicateMessage {
        message: &'static str,
        field: &'static str,
    },
}

/// The value of one field as it appears on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value<'a> {
    Varint(u64),
    Fixed64(u64),
    Len(&'a [u8]),
    /// The bytes between a start-group tag and its matching end-group tag.
    Group(&'a [u8]),
    Fixed32(u32),
}

impl Value<'_> {
    /// The wire type this value was read with.
    #[inline]
    pub fn wire_type(&self) -> WireType {
        match self {
            Value::Varint(_) => WireType::Varint,
            Value::Fixed64(_) => WireType::Fixed64,
            Value::Len(_) => WireType::Len,
            Value::Group(_) => WireType::StartGroup,
            Value::Fixed32(_) => WireType::Fixed32,
        }
    }
}

/// Zigzag-decodes a `sint32`.
#[inline]
pub fn zigzag32(v: u32) -> i32 {
    ((v >> 1) as i32) ^ -((v & 1) as i32)
}

/// Zigzag-decodes a `sint64`.
#[inline]
pub fn zigzag64(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// How a failure is reported by the generic internals: as a full [`DecodeError`], or as the
/// bare [`Invalid`] marker on fast paths. A fast path that fails is re-run with
/// `DecodeError` to learn the precise error (the functions are pure, so the second run
/// fails the same way). `Result<T, Invalid>` fits in registers; `Result<T, DecodeError>`
/// does not, which costs on every `?` in a hot loop.
pub trait Failure: Sized {
    /// Builds the failure; `make` runs only when the full error is wanted.
    fn from_error(make: impl FnOnce() -> DecodeError) -> Self;
}

impl Failure for DecodeError {
    #[inline(always)]
    fn from_error(make: impl FnOnce() -> DecodeError) -> Self {
        make()
    }
}

/// "The input is invalid", without saying why (see [`Failure`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Invalid;

impl Failure for Invalid {
    #[inline(always)]
    fn from_error(_: impl FnOnce() -> DecodeError) -> Self {
        Invalid
    }
}

#[inline(always)]
pub(crate) fn fail<T, E: Failure>(make: impl FnOnce() -> DecodeError) -> Result<T, E> {
    Err(E::from_error(make))
}

/// Runs `$body` first with the cheap failure type [`Invalid`] and, only if that fails, again
/// with [`DecodeError`] to get the precise error. Inside `$body`, `E` names the failure type.
macro_rules! exact {
    ($body:expr) => {{
        let fast = {
            #[allow(dead_code)]
            type E = $crate::reader::Invalid;
            $body
        };
        match fast {
            Ok(v) => Ok(v),
            Err($crate::reader::Invalid) => {
                #[allow(dead_code)]
                type E = $crate::reader::DecodeError;
                $body
            }
        }
    }};
}
pub(crate) use exact;

/// A cursor over borrowed protobuf bytes.
#[derive(Debug, Clone, Copy)]
pub struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    /// A reader positioned at the start of `buf`.
    #[inline]
    pub const fn new(buf: &'a [u8]) -> Self {
        Reader { buf }
    }

    /// The bytes not read yet.
    #[inline]
    pub fn remaining(&self) -> &'a [u8] {
        self.buf
    }

    /// True when everything has been read.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    // ---- public API (precise errors) ------------------------------------------------

    /// Reads a varint of at most 10 bytes. The 10th byte may only carry bit 63.
    #[inline]
    pub fn read_varint(&mut self) -> Result<u64, DecodeError> {
        self.varint()
    }

    /// Skips a varint, with the same errors as [`Reader::read_varint`].
    #[inline]
    pub fn skip_varint(&mut self) -> Result<(), DecodeError> {
        self.skip_varint_g()
    }

    /// Reads a varint and keeps its low 32 bits (`int32`, `uint32`, enums).
    #[inline]
    pub fn read_varint32(&mut self) -> Result<u32, DecodeError> {
        self.read_varint().map(|v| v as u32)
    }

    /// Reads a zigzag `sint32`.
    #[inline]
    pub fn read_sint32(&mut self) -> Result<i32, DecodeError> {
        self.read_varint32().map(zigzag32)
    }

    /// Reads a zigzag `sint64`.
    #[inline]
    pub fn read_sint64(&mut self) -> Result<i64, DecodeError> {
        self.read_varint().map(zigzag64)
    }

    /// Reads a little-endian fixed32.
    #[inline]
    pub fn read_fixed32(&mut self) -> Result<u32, DecodeError> {
        self.fixed32()
    }

    /// Reads a little-endian fixed64.
    #[inline]
    pub fn read_fixed64(&mut self) -> Result<u64, DecodeError> {
        self.fixed64()
    }

    /// Reads a varint length and returns that many bytes as a sub-slice.
    #[inline]
    pub fn read_len(&mut self) -> Result<&'a [u8], DecodeError> {
        self.len_delimited()
    }

    /// Reads a tag: field number (1 ..= 2^29 − 1) and wire type.
    #[inline]
    pub fn read_tag(&mut self) -> Result<(u32, WireType), DecodeError> {
        self.tag()
    }

    /// Skips `n` bytes.
    #[inline]
    pub fn skip_bytes(&mut self, n: usize) -> Result<(), DecodeError> {
        self.advance(n)
    }

    /// Skips the value of a field whose tag has just been read. `depth` is the current
    /// nesting (0 at the top level); groups count against [`RECURSION_LIMIT`].
    #[inline]
    pub fn skip(
        &mut self,
        number: u32,
        wire_type: WireType,
        depth: u32,
    ) -> Result<(), DecodeError> {
        self.skip_value(number, wire_type, depth)
    }

    /// Reads the body of a group whose start tag (field `number`) has just been read, up to
    /// and including the matching end tag. Returns the body bytes.
    pub fn read_group(&mut self, number: u32, depth: u32) -> Result<&'a [u8], DecodeError> {
        self.group(number, depth)
    }

    /// Reads one field: its number and its value. Groups come back whole as
    /// [`Value::Group`]; a stray end-group tag is an error.
    #[inline]
    pub fn read_field(&mut self, depth: u32) -> Result<(u32, Value<'a>), DecodeError> {
        let (number, wt) = self.read_tag()?;
        let value = match wt {
            WireType::Varint => Value::Varint(self.read_varint()?),
            WireType::Len => Value::Len(self.read_len()?),
            WireType::Fixed64 => Value::Fixed64(self.read_fixed64()?),
            WireType::Fixed32 => Value::Fixed32(self.read_fixed32()?),
            WireType::StartGroup => Value::Group(self.read_group(number, depth)?),
            WireType::EndGroup => {
                return Err(DecodeError::GroupMismatch {
                    expected: None,
                    found: number,
                })
            }
        };
        Ok((number, value))
    }

    // ---- generic internals ------------------------------------------------------------

    #[inline(always)]
    pub(crate) fn varint<E: Failure>(&mut self) -> Result<u64, E> {
        match self.buf {
            [b, rest @ ..] if *b < 0x80 => {
                self.buf = rest;
                Ok(u64::from(*b))
            }
            // two bytes: lengths up to 16383, most ids and sizes
            [b0, b1, rest @ ..] if *b1 < 0x80 => {
                self.buf = rest;
                Ok(u64::from(*b0 & 0x7f) | (u64::from(*b1) << 7))
            }
            _ => {
                let (v, n) = varint_multi(self.buf)?;
                self.buf = self.buf.get(n..).unwrap_or_default();
                Ok(v)
            }
        }
    }

    #[inline(always)]
    pub(crate) fn advance<E: Failure>(&mut self, n: usize) -> Result<(), E> {
        match self.buf.get(n..) {
            Some(rest) => {
                self.buf = rest;
                Ok(())
            }
            None => fail(|| DecodeError::Truncated),
        }
    }

    #[inline(always)]
    pub(crate) fn fixed32<E: Failure>(&mut self) -> Result<u32, E> {
        match self.buf.split_first_chunk::<4>() {
            Some((b, rest)) => {
                self.buf = rest;
                Ok(u32::from_le_bytes(*b))
            }
            None => fail(|| DecodeError::Truncated),
        }
    }

    #[inline(always)]
    pub(crate) fn fixed64<E: Failure>(&mut self) -> Result<u64, E> {
        match self.buf.split_first_chunk::<8>() {
            Some((b, rest)) => {
                self.buf = rest;
                Ok(u64::from_le_bytes(*b))
            }
            None => fail(|| DecodeError::Truncated),
        }
    }

    #[inline(always)]
    pub(crate) fn len_delimited<E: Failure>(&mut self) -> Result<&'a [u8], E> {
        let len = self.varint()?;
        let remaining = self.buf.len();
        if len > remaining as u64 {
            return fail(|| DecodeError::LengthOutOfBounds { len, remaining });
        }
        let (head, rest) = self.buf.split_at(len as usize);
        self.buf = rest;
        Ok(head)
    }

    /// If the next tag is a one-byte tag (fields 1..=15), consumes and returns it as the raw
    /// byte, for hot loops that `match` on whole tags; otherwise consumes nothing.
    #[inline(always)]
    pub(crate) fn one_byte_tag(&mut self) -> Option<u8> {
        match self.buf.split_first() {
            Some((&b, rest)) if b < 0x80 => {
                self.buf = rest;
                Some(b)
            }
            _ => None,
        }
    }

    /// Decodes a one-byte tag returned by [`Reader::one_byte_tag`] (same checks as
    /// [`Reader::tag`]).
    #[inline(always)]
    pub(crate) fn split_tag<E: Failure>(b: u8) -> Result<(u32, WireType), E> {
        let number = u32::from(b >> 3);
        if number == 0 {
            return fail(|| DecodeError::BadFieldNumber(0));
        }
        match WireType::from_bits(b & 7) {
            Ok(wt) => Ok((number, wt)),
            Err(e) => fail(|| e),
        }
    }

    #[inline(always)]
    pub(crate) fn tag<E: Failure>(&mut self) -> Result<(u32, WireType), E> {
        let key = match self.buf.first() {
            // one-byte tags: fields 1..=15
            Some(&b) if b < 0x80 => {
                self.buf = &self.buf[1..];
                u64::from(b)
            }
            _ => {
                let (v, n) = varint_multi(self.buf)?;
                self.buf = self.buf.get(n..).unwrap_or_default();
                v
            }
        };
        if key > u64::from(u32::MAX) || key < 8 {
            return fail(|| DecodeError::BadFieldNumber(key >> 3));
        }
        let wt = match key & 7 {
            0 => WireType::Varint,
            1 => WireType::Fixed64,
            2 => WireType::Len,
            3 => WireType::StartGroup,
            4 => WireType::EndGroup,
            5 => WireType::Fixed32,
            bits => return fail(|| DecodeError::BadWireType(bits as u8)),
        };
        Ok(((key >> 3) as u32, wt))
    }

    /// Skips a varint without decoding it. Same errors as [`Reader::varint`].
    #[inline(always)]
    pub(crate) fn skip_varint_g<E: Failure>(&mut self) -> Result<(), E> {
        if let [b, rest @ ..] = self.buf {
            if *b < 0x80 {
                self.buf = rest;
                return Ok(());
            }
        }
        if let Some(w) = self.buf.first_chunk::<8>() {
            // The first byte without the continuation bit ends the varint.
            let stops = !u64::from_le_bytes(*w) & 0x8080_8080_8080_8080;
            if stops != 0 {
                let n = (stops.trailing_zeros() / 8 + 1) as usize;
                self.buf = self.buf.get(n..).unwrap_or_default();
                return Ok(());
            }
        }
        let n = varint_len(self.buf)?;
        self.buf = self.buf.get(n..).unwrap_or_default();
        Ok(())
    }

    #[inline(always)]
    pub(crate) fn skip_value<E: Failure>(
        &mut self,
        number: u32,
        wire_type: WireType,
        depth: u32,
    ) -> Result<(), E> {
        match wire_type {
            WireType::Varint => self.skip_varint_g(),
            WireType::Len => self.len_delimited().map(drop),
            WireType::Fixed64 => self.advance(8),
            WireType::Fixed32 => self.advance(4),
            WireType::StartGroup => self.group(number, depth).map(drop),
            WireType::EndGroup => fail(|| DecodeError::GroupMismatch {
                expected: None,
                found: number,
            }),
        }
    }

    #[inline(always)]
    pub(crate) fn group<E: Failure>(&mut self, number: u32, depth: u32) -> Result<&'a [u8], E> {
        let (body, total) = group_extent(self.buf, number, depth)?;
        let start = self.buf;
        self.buf = start.get(total..).unwrap_or_default();
        Ok(start.get(..body).unwrap_or_default())
    }
}

/// Decodes a varint at the start of `b` (or fails). Returns the value and the number of
/// bytes. With 8 bytes or more at hand, word at a time: the first byte without the
/// continuation bit is found with one `trailing_zeros`, and the 7-bit groups are packed with
/// three mask-and-shift steps; shorter tails go byte by byte. A pure function, so that
/// callers keep their reader in registers.
#[inline(never)]
fn varint_multi<E: Failure>(b: &[u8]) -> Result<(u64, usize), E> {
    let Some(w) = b.first_chunk::<8>() else {
        return varint_tail(b);
    };
    let word = u64::from_le_bytes(*w);
    let stops = !word & 0x8080_8080_8080_8080;
    if stops != 0 {
        let bits = stops.trailing_zeros() + 1; // 8 × length
        let len = (bits / 8) as usize;
        let masked = word & (u64::MAX >> (64 - bits));
        return Ok((pack7(masked), len));
    }
    // Nine or ten bytes.
    let low = pack7(word);
    match (b.get(8), b.get(9)) {
        (Some(&x), _) if x < 0x80 => Ok((low | (u64::from(x) << 56), 9)),
        (Some(&x), Some(&y)) if y <= 1 => {
            Ok((low | (u64::from(x & 0x7f) << 56) | (u64::from(y) << 63), 10))
        }
        (Some(_), Some(_)) => fail(|| DecodeError::VarintOverflow),
        _ => fail(|| DecodeError::Truncated),
    }
}

/// [`varint_multi`] for fewer than 8 bytes of input: byte by byte.
#[inline(always)]
fn varint_tail<E: Failure>(b: &[u8]) -> Result<(u64, usize), E> {
    let mut v: u64 = 0;
    for (i, &x) in b.iter().enumerate() {
        v |= u64::from(x & 0x7f) << (7 * i);
        if x < 0x80 {
            return Ok((v, i + 1));
        }
    }
    fail(|| DecodeError::Truncated)
}

/// Packs the low 7 bits of each byte of `x` into 56 contiguous bits.
#[inline(always)]
fn pack7(x: u64) -> u64 {
    let x = x & 0x7f7f_7f7f_7f7f_7f7f;
    let x = (x & 0x007f_007f_007f_007f) | ((x & 0x7f00_7f00_7f00_7f00) >> 1);
    let x = (x & 0x0000_3fff_0000_3fff) | ((x & 0x3fff_0000_3fff_0000) >> 2);
    (x & 0x0000_0000_0fff_ffff) | ((x & 0x0fff_ffff_0000_0000) >> 4)
}

/// The length of the varint at the start of `b`, without decoding it (same errors as
/// [`varint_multi`]).
#[inline(never)]
fn varint_len<E: Failure>(b: &[u8]) -> Result<usize, E> {
    for (i, &x) in b.iter().take(10).enumerate() {
        if x < 0x80 {
            if i == 9 && x > 1 {
                return fail(|| DecodeError::VarintOverflow);
            }
            return Ok(i + 1);
        }
    }
    if b.len() >= 10 {
        fail(|| DecodeError::VarintOverflow)
    } else {
        fail(|| DecodeError::Truncated)
    }
}

/// For a group whose start tag (field `number`) has just been read from before `b`: the
/// length of its body and the length including the end tag.
#[inline(never)]
fn group_extent<E: Failure>(b: &[u8], number: u32, depth: u32) -> Result<(usize, usize), E> {
    if depth >= RECURSION_LIMIT {
        return fail(|| DecodeError::DepthLimit(RECURSION_LIMIT));
    }
    let mut r = Reader::new(b);
    loop {
        let body = b.len() - r.buf.len();
        let (n, wt) = r.tag()?;
        if wt == WireType::EndGroup {
            if n != number {
                return fail(|| DecodeError::GroupMismatch {
                    expected: Some(number),
                    found: n,
                });
            }
            return Ok((body, b.len() - r.buf.len()));
        }
        r.skip_value(n, wt, depth + 1)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints() {
        assert_eq!(Reader::new(&[0x05]).read_varint(), Ok(5));
        assert_eq!(Reader::new(&[0xac, 0x02]).read_varint(), Ok(300));
        let mut r = Reader::new(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
        assert_eq!(r.read_varint32(), Ok(u32::MAX));
        assert!(r.is_empty());
        // -1 as int32: ten bytes, last one 0x01.
        let neg = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        assert_eq!(Reader::new(&neg).read_varint(), Ok(u64::MAX));
        let over = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02];
        assert_eq!(
            Reader::new(&over).read_varint(),
            Err(DecodeError::VarintOverflow)
        );
        let eleven = [0x80; 11];
        assert_eq!(
            Reader::new(&eleven).read_varint(),
            Err(DecodeError::VarintOverflow)
        );
        assert_eq!(
            Reader::new(&[0x80, 0x80]).read_varint(),
            Err(DecodeError::Truncated)
        );
        assert_eq!(Reader::new(&[]).read_varint(), Err(DecodeError::Truncated));
    }

    /// The straightforward decoder the fast one must match.
    fn reference(b: &[u8]) -> Result<(u64, usize), DecodeError> {
        let mut v = 0u64;
        for i in 0..10 {
            let Some(&x) = b.get(i) else {
                return Err(DecodeError::Truncated);
            };
            if i == 9 && x > 1 {
                return Err(DecodeError::VarintOverflow);
            }
            v |= u64::from(x & 0x7f) << (7 * i);
            if x < 0x80 {
                return Ok((v, i + 1));
            }
        }
        Err(DecodeError::VarintOverflow)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 20_000, failure_persistence: None, ..Default::default() })]
        #[test]
        fn fast_varint_matches_reference(
            mut b in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..14),
            len in 0usize..12,
            set_high in proptest::prelude::any::<bool>(),
        ) {
            // Make long varints likely: set the continuation bit on the first `len` bytes.
            if set_high {
                for x in b.iter_mut().take(len) {
                    *x |= 0x80;
                }
            }
            let want = reference(&b);
            proptest::prop_assert_eq!(varint_multi::<DecodeError>(&b), want.clone());
            proptest::prop_assert_eq!(varint_len::<DecodeError>(&b), want.clone().map(|(_, n)| n));
            let mut r = Reader::new(&b);
            proptest::prop_assert_eq!(r.read_varint(), want.clone().map(|(v, _)| v));
            let mut r = Reader::new(&b);
            proptest::prop_assert_eq!(r.skip_varint(), want.clone().map(drop));
            if let Ok((_, n)) = want {
                proptest::prop_assert_eq!(r.remaining().len(), b.len() - n);
            }
        }
    }

    #[test]
    fn zigzag() {
        assert_eq!(zigzag32(5), -3);
        assert_eq!(zigzag32(7), -4);
        assert_eq!(zigzag32(1), -1);
        assert_eq!(zigzag32(0), 0);
        assert_eq!(zigzag32(u32::MAX), i32::MIN);
        assert_eq!(zigzag64(u64::MAX - 1), i64::MAX);
    }

    #[test]
    fn lengths_are_bounds_checked() {
        let mut r = Reader::new(&[0x03, 1, 2]);
        assert_eq!(
            r.read_len(),
            Err(DecodeError::LengthOutOfBounds {
                len: 3,
                remaining: 2
            })
        );
        let mut r = Reader::new(&[0x02, 1, 2, 9]);
        assert_eq!(r.read_len(), Ok(&[1u8, 2][..]));
        assert_eq!(r.remaining(), &[9]);
    }

    #[test]
    fn tags() {
        assert_eq!(Reader::new(&[0x08]).read_tag(), Ok((1, WireType::Varint)));
        assert_eq!(
            Reader::new(&[0x07]).read_tag(),
            Err(DecodeError::BadFieldNumber(0))
        );
        assert_eq!(
            Reader::new(&[0x0e]).read_tag(),
            Err(DecodeError::BadWireType(6))
        );
        assert_eq!(
            Reader::new(&[0x0f]).read_tag(),
            Err(DecodeError::BadWireType(7))
        );
        // field number 2^29 - 1 with wire type 0
        let max = [0xf8, 0xff, 0xff, 0xff, 0x0f];
        assert_eq!(
            Reader::new(&max).read_tag(),
            Ok((MAX_FIELD_NUMBER, WireType::Varint))
        );
        let too_big = [0x80, 0x80, 0x80, 0x80, 0x10];
        assert!(matches!(
            Reader::new(&too_big).read_tag(),
            Err(DecodeError::BadFieldNumber(_))
        ));
    }

    #[test]
    fn groups() {
        // field 5 start group { field 1 varint 7; field 6 start group { } end 6 } end 5, then 0x10 0x01
        let bytes = [0x2b, 0x08, 0x07, 0x33, 0x34, 0x2c, 0x10, 0x01];
        let mut r = Reader::new(&bytes);
        let (n, v) = r.read_field(0).unwrap();
        assert_eq!(n, 5);
        assert_eq!(v, Value::Group(&[0x08, 0x07, 0x33, 0x34]));
        assert_eq!(r.read_field(0), Ok((2, Value::Varint(1))));
        // mismatched end
        let bad = [0x2b, 0x34];
        assert_eq!(
            Reader::new(&bad).read_field(0),
            Err(DecodeError::GroupMismatch {
                expected: Some(5),
                found: 6
            })
        );
        // stray end group
        assert_eq!(
            Reader::new(&[0x2c]).read_field(0),
            Err(DecodeError::GroupMismatch {
                expected: None,
                found: 5
            })
        );
        // unterminated
        assert_eq!(
            Reader::new(&[0x2b, 0x08, 0x01]).read_field(0),
            Err(DecodeError::Truncated)
        );
        // too deep: 200 nested start groups of field 1
        let deep = vec![0x0b; 200];
        assert_eq!(
            Reader::new(&deep).read_field(0),
            Err(DecodeError::DepthLimit(RECURSION_LIMIT))
        );
    }

    #[test]
    fn fixed() {
        let mut r = Reader::new(&[1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 9]);
        assert_eq!(r.read_fixed32(), Ok(1));
        assert_eq!(r.read_fixed64(), Ok(2));
        assert_eq!(r.read_fixed32(), Err(DecodeError::Truncated));
    }
}
