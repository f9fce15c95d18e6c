//! Lazy, allocation-free views over borrowed protobuf bytes.
//!
//! A view (e.g. [`yarn::ContainerStatusView`]) is a `Copy` struct holding the `&'a [u8]` of one
//! encoded message. It reads a field only when asked, by scanning the bytes with
//! [`crate::reader::Reader`], and returns borrowed data (`&'a str`, `&'a [u8]`, nested views)
//! without allocating. The hot path calls [`validate`](yarn::NodeHeartbeatRequestView::validate)
//! once on the outermost view, then reads fields.
//!
//! Modules: [`rpc`] (RPC request/response headers, RequestHeader), [`yarn`] (heartbeat:
//! NodeHeartbeatRequest → NodeStatus → ContainerStatus → ContainerId / Resource),
//! [`hdfs`] (LocatedBlocks → LocatedBlock → DatanodeInfo, ExtendedBlock, PacketHeader),
//! [`common`] (TokenProto), and [`schema`] (`validate` over the generated field tables).
//!
//! # How it is fast
//!
//! - `validate()` runs a validator generated per message (in `pb/schema.rs`, by the same
//!   `regen-proto` step as the prost code): a `match` on whole one-byte tags that skips or
//!   recurses per field and fails with a one-bit [`crate::reader::Invalid`]. Only when it
//!   fails does the table-driven validator run to name the error. The tests
//!   check that both accept exactly the same inputs.
//! - The hot one-pass readers ([`yarn::ContainerStatusView::summary`],
//!   [`yarn::ContainerIdView::parts`], ...) match whole tag bytes too, and skip the
//!   capability and diagnostics by their length prefix.
//! - Varints are decoded and skipped a word at a time; the reader's internals are pure
//!   functions of the remaining slice, so the reader stays in registers.
//!
//! Measured on the 50-container heartbeat of `benches/` (callgrind, instructions per
//! heartbeat): validate ≈ 66 k, reading id/state/exit/type of all 50 ≈ 33 k, prost decode of
//! the same message plus the same reads ≈ 330 k.
//!
//! # Accessor conventions (proto2)
//!
//! | Field | Accessor | Absent |
//! |---|---|---|
//! | `required T` | `foo() -> Result<T>` | `Err(DecodeError::MissingRequired)` |
//! | `optional T` with `[default = d]` | `foo() -> Result<T>`, `foo_opt() -> Result<Option<T>>` | `d` / `None` |
//! | `optional T` without default | `foo() -> Result<Option<T>>` | `None` (Java's getter gives 0 / "" / false) |
//! | `optional Msg` | `foo() -> Result<Option<MsgView>>` (or raw `&[u8]` for cold messages) | `None` |
//! | `repeated` | `foo() -> Repeated…` iterator of `Result<_>` | empty |
//! | `enum E` | `foo_raw()` → the `i32` on the wire; `foo()` → typed `E` | see below |
//!
//! `string` accessors return `&'a str` and check UTF-8 ([`DecodeError::InvalidUtf8`]);
//! where the raw bytes are useful a `foo_bytes()` twin returns them unchecked.
//!
//! # Semantics, and where they differ from Java or prost
//!
//! - **Repeated occurrences of a scalar**: the last occurrence wins (Java and prost agree).
//! - **Repeated occurrences of a non-repeated embedded message**: Java and prost merge them.
//!   The accessors return the **last** occurrence, and `validate()` rejects such input with
//!   [`DecodeError::DuplicateMessage`]; no Hadoop encoder produces it. So on validated input
//!   the views and a merging decoder agree.
//! - **Enums**: `foo_raw()` returns the last value on the wire, known or not (as prost keeps
//!   it). The typed `foo()` follows proto2 Java, which files an unknown enum value under
//!   unknown fields: it returns the last *known* value, or the default (`None` for fields
//!   without one). A `required` enum with no known value is `MissingRequired`, as in Java.
//!   Repeated typed enums skip unknown values; the `_raw` iterators keep them.
//! - **Repeated scalars** are accepted packed, unpacked, or mixed, in wire order.
//! - **Wire-type mismatch** on a known field (e.g. `exit_status` sent as fixed32) is an
//!   error ([`DecodeError::WrongWireType`]), as in prost. (Java would file it under unknown
//!   fields and report the default; refusing is safer than a silent −1000.)
//! - **Strings**: `validate()` does not check UTF-8 (proto2 Java does not either); the `&str`
//!   accessors do. prost rejects the whole message on invalid UTF-8.
//! - **Varints** longer than 10 bytes or overflowing 64 bits are errors (as in prost; Java
//!   drops the excess bits).
//! - Unknown fields of every wire type are skipped, including groups (nested, at most
//!   [`crate::reader::RECURSION_LIMIT`] deep).
//!
//! Accessors called without `validate()` are still safe: they check what they read and
//! return errors, never panic, never allocate.

pub mod common;
pub mod hdfs;
pub mod rpc;
pub mod schema;
pub mod yarn;

use crate::reader::{exact, fail, DecodeError, Failure, Invalid, Reader, WireType};
use schema::Schema;
use std::marker::PhantomData;

/// Common behaviour of all message views.
pub trait MessageView<'a>: Copy + Sized {
    /// The message's schema (field table).
    const SCHEMA: &'static Schema;
    /// Wraps the bytes of one encoded message (no length prefix).
    fn new(bytes: &'a [u8]) -> Self;
    /// The bytes this view reads.
    fn as_bytes(&self) -> &'a [u8];
    /// Checks the whole message once (see [`schema::validate`]).
    #[inline]
    fn validate(&self) -> Result<(), DecodeError> {
        schema::validate(Self::SCHEMA, self.as_bytes(), 0)
    }
}

/// Declares a view struct with `new`, `as_bytes`, `validate` and [`MessageView`].
macro_rules! message_view {
    ($(#[$meta:meta])* $name:ident => $schema:path) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub struct $name<'a> {
            bytes: &'a [u8],
        }

        impl<'a> $name<'a> {
            /// Wraps the bytes of one encoded message (no length prefix). Reads nothing yet.
            #[inline]
            pub const fn new(bytes: &'a [u8]) -> Self {
                Self { bytes }
            }

            /// The bytes this view reads.
            #[inline]
            pub const fn as_bytes(&self) -> &'a [u8] {
                self.bytes
            }

            /// Checks the whole message once, without allocating: well-formed tags and
            /// values, wire types of known fields, `required` fields, no duplicate
            /// non-repeated embedded messages, nested messages recursively. Unknown fields
            /// (groups included) are skipped. UTF-8 is checked by the `&str` accessors.
            #[inline]
            pub fn validate(&self) -> Result<(), $crate::reader::DecodeError> {
                $crate::view::schema::validate(&$schema, self.bytes, 0)
            }
        }

        impl<'a> $crate::view::MessageView<'a> for $name<'a> {
            const SCHEMA: &'static $crate::view::schema::Schema = &$schema;
            #[inline]
            fn new(bytes: &'a [u8]) -> Self {
                Self { bytes }
            }
            #[inline]
            fn as_bytes(&self) -> &'a [u8] {
                self.bytes
            }
        }
    };
}
pub(crate) use message_view;

// ---------------------------------------------------------------------------------------
// Field scanning helpers shared by the views.

#[cold]
#[inline(never)]
pub(crate) fn wrong_wire(s: &'static Schema, number: u32, actual: WireType) -> DecodeError {
    DecodeError::WrongWireType {
        message: s.name,
        field: s.field_name(number),
        actual,
    }
}

#[cold]
#[inline(never)]
pub(crate) fn missing(s: &'static Schema, number: u32) -> DecodeError {
    DecodeError::MissingRequired {
        message: s.name,
        field: s.field_name(number),
    }
}

#[cold]
#[inline(never)]
pub(crate) fn bad_utf8(s: &'static Schema, number: u32) -> DecodeError {
    DecodeError::InvalidUtf8 {
        message: s.name,
        field: s.field_name(number),
    }
}

/// `Some(v)` or `MissingRequired`.
#[inline]
pub(crate) fn required<T>(v: Option<T>, s: &'static Schema, number: u32) -> Result<T, DecodeError> {
    match v {
        Some(v) => Ok(v),
        None => Err(missing(s, number)),
    }
}

/// UTF-8 check for a `string` field.
#[inline]
pub(crate) fn utf8<'a>(
    b: &'a [u8],
    s: &'static Schema,
    number: u32,
) -> Result<&'a str, DecodeError> {
    std::str::from_utf8(b).map_err(|_| bad_utf8(s, number))
}

/// Scans `buf` once; for every occurrence of field `number` (which must have wire type
/// `want`) calls `on_value` with the reader positioned at the value, which it must consume.
/// Every other field is skipped without decoding its value.
#[inline(always)]
pub(crate) fn scan<'a, E: Failure>(
    buf: &'a [u8],
    s: &'static Schema,
    number: u32,
    want: WireType,
    mut on_value: impl FnMut(&mut Reader<'a>) -> Result<(), E>,
) -> Result<(), E> {
    let mut r = Reader::new(buf);
    while !r.is_empty() {
        let (n, wt) = r.tag()?;
        if n == number {
            if wt != want {
                return fail(|| wrong_wire(s, number, wt));
            }
            on_value(&mut r)?;
        } else {
            r.skip_value(n, wt, 0)?;
        }
    }
    Ok(())
}

/// Defines `$name` (precise errors, fast path first) over the generic `$g`.
macro_rules! last_fn {
    ($(#[$m:meta])* $name:ident, $g:ident, $t:ty, $wt:expr, $read:ident) => {
        $(#[$m])*
        #[inline]
        #[allow(clippy::needless_lifetimes)]
        pub(crate) fn $name<'a>(
            buf: &'a [u8],
            s: &'static Schema,
            number: u32,
        ) -> Result<Option<$t>, DecodeError> {
            exact!($g::<E>(buf, s, number))
        }

        #[inline(always)]
        #[allow(clippy::needless_lifetimes)]
        pub(crate) fn $g<'a, E: Failure>(
            buf: &'a [u8],
            s: &'static Schema,
            number: u32,
        ) -> Result<Option<$t>, E> {
            let mut out = None;
            scan(buf, s, number, $wt, |r| {
                out = Some(r.$read()?);
                Ok(())
            })?;
            Ok(out)
        }
    };
}

last_fn!(
    /// Last occurrence of varint field `number`.
    last_varint, last_varint_g, u64, WireType::Varint, varint
);
last_fn!(
    /// Last occurrence of fixed64 field `number`.
    last_fixed64, last_fixed64_g, u64, WireType::Fixed64, fixed64
);
last_fn!(
    /// Last occurrence of fixed32 field `number`.
    last_fixed32, last_fixed32_g, u32, WireType::Fixed32, fixed32
);
last_fn!(
    /// Last occurrence of length-delimited field `number`.
    last_len, last_len_g, &'a [u8], WireType::Len, len_delimited
);

/// Last occurrence of enum field `number` whose value is known (Java semantics).
#[inline]
pub(crate) fn last_known_enum(
    buf: &[u8],
    s: &'static Schema,
    number: u32,
    known: fn(i32) -> bool,
) -> Result<Option<i32>, DecodeError> {
    exact!({
        let mut out = None;
        scan::<E>(buf, s, number, WireType::Varint, |r| {
            let v = r.varint()? as i32;
            if known(v) {
                out = Some(v);
            }
            Ok(())
        })
        .map(|()| out)
    })
}

/// Converts the bytes of one occurrence of a length-delimited field.
pub trait FromLen<'a>: Sized {
    /// `s` and `number` name the field in errors.
    fn from_len(bytes: &'a [u8], s: &'static Schema, number: u32) -> Result<Self, DecodeError>;
}

impl<'a> FromLen<'a> for &'a [u8] {
    #[inline]
    fn from_len(bytes: &'a [u8], _: &'static Schema, _: u32) -> Result<Self, DecodeError> {
        Ok(bytes)
    }
}

impl<'a> FromLen<'a> for &'a str {
    #[inline]
    fn from_len(bytes: &'a [u8], s: &'static Schema, number: u32) -> Result<Self, DecodeError> {
        utf8(bytes, s, number)
    }
}

impl<'a, V: MessageView<'a>> FromLen<'a> for V {
    #[inline]
    fn from_len(bytes: &'a [u8], _: &'static Schema, _: u32) -> Result<Self, DecodeError> {
        Ok(V::new(bytes))
    }
}

/// Iterator over every occurrence of a repeated length-delimited field (messages, strings,
/// bytes), in wire order. After an error it yields that error once and then ends.
#[derive(Clone, Debug)]
pub struct Repeated<'a, T> {
    reader: Reader<'a>,
    schema: &'static Schema,
    number: u32,
    _t: PhantomData<fn() -> T>,
}

impl<'a, T> Repeated<'a, T> {
    #[inline]
    pub(crate) fn new(buf: &'a [u8], schema: &'static Schema, number: u32) -> Self {
        Repeated {
            reader: Reader::new(buf),
            schema,
            number,
            _t: PhantomData,
        }
    }
}

impl<'a, T> Repeated<'a, T> {
    /// The next occurrence's bytes, or `None` at the end.
    #[inline(always)]
    fn next_bytes<E: Failure>(&mut self) -> Result<Option<&'a [u8]>, E> {
        let fast_tag = if self.number < 16 {
            (self.number as u8) << 3 | 2
        } else {
            0
        };
        while !self.reader.is_empty() {
            let (n, wt) = match self.reader.one_byte_tag() {
                Some(b) if b == fast_tag => return self.reader.len_delimited().map(Some),
                Some(b) => Reader::split_tag(b)?,
                None => self.reader.tag()?,
            };
            if n == self.number {
                if wt != WireType::Len {
                    return fail(|| wrong_wire(self.schema, n, wt));
                }
                return self.reader.len_delimited().map(Some);
            }
            self.reader.skip_value(n, wt, 0)?;
        }
        Ok(None)
    }
}

impl<'a, T: FromLen<'a>> Iterator for Repeated<'a, T> {
    type Item = Result<T, DecodeError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let saved = self.reader;
        let r = match self.next_bytes::<Invalid>() {
            Ok(b) => Ok(b),
            Err(Invalid) => {
                self.reader = saved;
                self.next_bytes::<DecodeError>()
            }
        };
        let r = match r {
            Ok(Some(b)) => T::from_len(b, self.schema, self.number),
            Ok(None) => return None,
            Err(e) => Err(e),
        };
        if r.is_err() {
            self.reader = Reader::new(&[]);
        }
        Some(r)
    }
}

/// Conversion of one varint into a repeated scalar's element type.
pub trait FromVarint: Sized {
    fn from_varint(v: u64) -> Self;
}
impl FromVarint for bool {
    #[inline]
    fn from_varint(v: u64) -> Self {
        v != 0
    }
}
impl FromVarint for i32 {
    #[inline]
    fn from_varint(v: u64) -> Self {
        v as i32
    }
}
impl FromVarint for u32 {
    #[inline]
    fn from_varint(v: u64) -> Self {
        v as u32
    }
}
impl FromVarint for i64 {
    #[inline]
    fn from_varint(v: u64) -> Self {
        v as i64
    }
}
impl FromVarint for u64 {
    #[inline]
    fn from_varint(v: u64) -> Self {
        v
    }
}

/// Iterator over a repeated varint scalar (bool, int32, enum, ...), accepting packed runs
/// and single values in any mix, in wire order. After an error it yields it once and ends.
#[derive(Clone, Debug)]
pub struct RepeatedVarint<'a, T> {
    reader: Reader<'a>,
    packed: Reader<'a>,
    schema: &'static Schema,
    number: u32,
    _t: PhantomData<fn() -> T>,
}

impl<'a, T> RepeatedVarint<'a, T> {
    #[inline]
    pub(crate) fn new(buf: &'a [u8], schema: &'static Schema, number: u32) -> Self {
        RepeatedVarint {
            reader: Reader::new(buf),
            packed: Reader::new(&[]),
            schema,
            number,
            _t: PhantomData,
        }
    }

    fn fail(&mut self, e: DecodeError) -> Option<Result<T, DecodeError>> {
        self.reader = Reader::new(&[]);
        self.packed = Reader::new(&[]);
        Some(Err(e))
    }
}

impl<'a, T> RepeatedVarint<'a, T> {
    #[inline(always)]
    fn next_raw<E: Failure>(&mut self) -> Result<Option<u64>, E> {
        loop {
            if !self.packed.is_empty() {
                return self.packed.varint().map(Some);
            }
            if self.reader.is_empty() {
                return Ok(None);
            }
            let (n, wt) = self.reader.tag()?;
            if n != self.number {
                self.reader.skip_value(n, wt, 0)?;
                continue;
            }
            match wt {
                WireType::Varint => return self.reader.varint().map(Some),
                WireType::Len => self.packed = Reader::new(self.reader.len_delimited()?),
                other => return fail(|| wrong_wire(self.schema, self.number, other)),
            }
        }
    }
}

impl<'a, T: FromVarint> Iterator for RepeatedVarint<'a, T> {
    type Item = Result<T, DecodeError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let saved = (self.reader, self.packed);
        let r = match self.next_raw::<Invalid>() {
            Ok(v) => Ok(v),
            Err(Invalid) => {
                (self.reader, self.packed) = saved;
                self.next_raw::<DecodeError>()
            }
        };
        match r {
            Ok(Some(v)) => Some(Ok(T::from_varint(v))),
            Ok(None) => None,
            Err(e) => self.fail(e),
        }
    }
}
