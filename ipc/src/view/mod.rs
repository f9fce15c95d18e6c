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
//! [`common`] (TokenProto), and [`schema`] (the generic `validate` over the generated
//! field tables).
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

use crate::reader::{DecodeError, Reader, Value};
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
pub(crate) fn wrong_wire(s: &'static Schema, number: u32, v: &Value<'_>) -> DecodeError {
    DecodeError::WrongWireType {
        message: s.name,
        field: s.field_name(number),
        actual: v.wire_type(),
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

/// Last occurrence of varint field `number`.
#[inline]
pub(crate) fn last_varint(
    buf: &[u8],
    s: &'static Schema,
    number: u32,
) -> Result<Option<u64>, DecodeError> {
    let mut r = Reader::new(buf);
    let mut out = None;
    while !r.is_empty() {
        let (n, v) = r.read_field(0)?;
        if n == number {
            match v {
                Value::Varint(x) => out = Some(x),
                other => return Err(wrong_wire(s, number, &other)),
            }
        }
    }
    Ok(out)
}

/// Last occurrence of fixed64 field `number`.
#[inline]
pub(crate) fn last_fixed64(
    buf: &[u8],
    s: &'static Schema,
    number: u32,
) -> Result<Option<u64>, DecodeError> {
    let mut r = Reader::new(buf);
    let mut out = None;
    while !r.is_empty() {
        let (n, v) = r.read_field(0)?;
        if n == number {
            match v {
                Value::Fixed64(x) => out = Some(x),
                other => return Err(wrong_wire(s, number, &other)),
            }
        }
    }
    Ok(out)
}

/// Last occurrence of fixed32 field `number`.
#[inline]
pub(crate) fn last_fixed32(
    buf: &[u8],
    s: &'static Schema,
    number: u32,
) -> Result<Option<u32>, DecodeError> {
    let mut r = Reader::new(buf);
    let mut out = None;
    while !r.is_empty() {
        let (n, v) = r.read_field(0)?;
        if n == number {
            match v {
                Value::Fixed32(x) => out = Some(x),
                other => return Err(wrong_wire(s, number, &other)),
            }
        }
    }
    Ok(out)
}

/// Last occurrence of length-delimited field `number`.
#[inline]
pub(crate) fn last_len<'a>(
    buf: &'a [u8],
    s: &'static Schema,
    number: u32,
) -> Result<Option<&'a [u8]>, DecodeError> {
    let mut r = Reader::new(buf);
    let mut out = None;
    while !r.is_empty() {
        let (n, v) = r.read_field(0)?;
        if n == number {
            match v {
                Value::Len(x) => out = Some(x),
                other => return Err(wrong_wire(s, number, &other)),
            }
        }
    }
    Ok(out)
}

/// Last occurrence of enum field `number` whose value is in `known` (Java semantics).
#[inline]
pub(crate) fn last_known_enum(
    buf: &[u8],
    s: &'static Schema,
    number: u32,
    known: fn(i32) -> bool,
) -> Result<Option<i32>, DecodeError> {
    let mut r = Reader::new(buf);
    let mut out = None;
    while !r.is_empty() {
        let (n, v) = r.read_field(0)?;
        if n == number {
            match v {
                Value::Varint(x) => {
                    if known(x as i32) {
                        out = Some(x as i32)
                    }
                }
                other => return Err(wrong_wire(s, number, &other)),
            }
        }
    }
    Ok(out)
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

impl<'a, T: FromLen<'a>> Iterator for Repeated<'a, T> {
    type Item = Result<T, DecodeError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        while !self.reader.is_empty() {
            match self.reader.read_field(0) {
                Ok((n, v)) if n == self.number => {
                    let r = match v {
                        Value::Len(b) => T::from_len(b, self.schema, self.number),
                        other => Err(wrong_wire(self.schema, self.number, &other)),
                    };
                    if r.is_err() {
                        self.reader = Reader::new(&[]);
                    }
                    return Some(r);
                }
                Ok(_) => {}
                Err(e) => {
                    self.reader = Reader::new(&[]);
                    return Some(Err(e));
                }
            }
        }
        None
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

impl<'a, T: FromVarint> Iterator for RepeatedVarint<'a, T> {
    type Item = Result<T, DecodeError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if !self.packed.is_empty() {
                return match self.packed.read_varint() {
                    Ok(v) => Some(Ok(T::from_varint(v))),
                    Err(e) => self.fail(e),
                };
            }
            if self.reader.is_empty() {
                return None;
            }
            match self.reader.read_field(0) {
                Ok((n, v)) if n == self.number => match v {
                    Value::Varint(x) => return Some(Ok(T::from_varint(x))),
                    Value::Len(b) => self.packed = Reader::new(b),
                    other => {
                        let e = wrong_wire(self.schema, self.number, &other);
                        return self.fail(e);
                    }
                },
                Ok(_) => {}
                Err(e) => return self.fail(e),
            }
        }
    }
}
