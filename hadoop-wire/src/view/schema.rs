//! Static message schemas (generated into `crate::pb::schema`) and the generic validator.
//!
//! A [`Schema`] lists a message's fields by number with their type ([`Kind`]) and label
//! ([`Label`]). [`validate`] walks a message once against its schema.

/// How a field is labelled in the `.proto` file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Label {
    /// `optional`: absent means the proto2 default.
    Optional,
    /// `required`: Java rejects a message without it.
    Required,
    /// `repeated`: any number of occurrences; scalars may be packed or not.
    Repeated,
}

/// The declared type of a field.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    Int32,
    Int64,
    UInt32,
    UInt64,
    SInt32,
    SInt64,
    Bool,
    /// An enum with its known values (sorted).
    Enum(&'static [i32]),
    Fixed32,
    SFixed32,
    Float,
    Fixed64,
    SFixed64,
    Double,
    String,
    Bytes,
    /// An embedded message.
    Message(&'static Schema),
}

/// One field of a message.
#[derive(Debug, Clone, Copy)]
pub struct Field {
    pub number: u32,
    pub name: &'static str,
    pub kind: Kind,
    pub label: Label,
}

/// A message's fields, sorted by number, with a number → index table.
#[derive(Debug)]
pub struct Schema {
    /// Full protobuf name, e.g. `hadoop.yarn.ContainerStatusProto`.
    pub name: &'static str,
    pub fields: &'static [Field],
    /// `slots[number]` is the field's index + 1, or 0 for an unknown number.
    pub slots: &'static [u8],
    /// Bit `i` set when `fields[i]` is required.
    pub required: u64,
    /// The generated validator of this message (see [`validate`]).
    pub fast: fn(&[u8], u32) -> Result<(), Invalid>,
}

use crate::reader::{
    exact, fail, DecodeError, Failure, Invalid, Reader, WireType, RECURSION_LIMIT,
};

impl Kind {
    /// The wire type a single (unpacked) value of this kind uses.
    #[inline]
    pub fn wire_type(self) -> WireType {
        match self {
            Kind::Int32
            | Kind::Int64
            | Kind::UInt32
            | Kind::UInt64
            | Kind::SInt32
            | Kind::SInt64
            | Kind::Bool
            | Kind::Enum(_) => WireType::Varint,
            Kind::Fixed32 | Kind::SFixed32 | Kind::Float => WireType::Fixed32,
            Kind::Fixed64 | Kind::SFixed64 | Kind::Double => WireType::Fixed64,
            Kind::String | Kind::Bytes | Kind::Message(_) => WireType::Len,
        }
    }
}

impl Schema {
    /// The field with this number, if the message declares it.
    #[inline]
    pub fn field(&'static self, number: u32) -> Option<&'static Field> {
        let slot = *self.slots.get(number as usize)?;
        if slot == 0 {
            None
        } else {
            self.fields.get(slot as usize - 1)
        }
    }

    /// The declared name of field `number` (for error messages), or `"?"`.
    #[cold]
    pub fn field_name(&'static self, number: u32) -> &'static str {
        self.field(number).map_or("?", |f| f.name)
    }
}

/// Checks a whole message once against its schema, without allocating:
///
/// - every tag and value is well-formed (varints, lengths in bounds, groups matched and
///   nested at most [`RECURSION_LIMIT`] deep, counting message nesting too);
/// - every known field has a wire type its declared type allows (repeated scalars: packed
///   or not; a packed fixed-width body is a multiple of the width);
/// - every `required` field is present; a required enum counts only with a known value,
///   because Java files unknown enum values as unknown fields;
/// - a non-repeated embedded message occurs at most once ([`DecodeError::DuplicateMessage`]);
/// - embedded messages (known fields) are validated recursively against their schema.
///
/// Unknown fields are skipped (but must be well-formed). `string` fields are not checked for
/// UTF-8: proto2 Java does not check them either; the `&str` accessors do.
///
/// Runs the generated validator of the message first (`Schema::fast`: a `match` on whole
/// one-byte tags, failing with the one-bit [`Invalid`]); only when that fails does the
/// table-driven `validate_g` run to name the error. Both implement the rules above; the
/// tests check that they accept exactly the same inputs.
#[inline]
pub fn validate(schema: &'static Schema, buf: &[u8], depth: u32) -> Result<(), DecodeError> {
    match (schema.fast)(buf, depth) {
        Ok(()) => Ok(()),
        Err(Invalid) => validate_g::<DecodeError>(schema, buf, depth),
    }
}

/// The table-driven validator alone (for tests comparing it with the generated one).
#[doc(hidden)]
pub fn validate_table_driven(schema: &'static Schema, buf: &[u8]) -> Result<(), DecodeError> {
    exact!(validate_g::<E>(schema, buf, 0))
}

/// The generated validator alone (for tests comparing it with the table-driven one).
#[doc(hidden)]
pub fn validate_generated(schema: &'static Schema, buf: &[u8]) -> bool {
    (schema.fast)(buf, 0).is_ok()
}

/// [`validate`] with a generic failure type, driven by the field table.
pub(crate) fn validate_g<E: Failure>(
    schema: &'static Schema,
    buf: &[u8],
    depth: u32,
) -> Result<(), E> {
    if depth >= RECURSION_LIMIT {
        return fail(|| DecodeError::DepthLimit(RECURSION_LIMIT));
    }
    let mut r = Reader::new(buf);
    let mut seen: u64 = 0;
    while !r.is_empty() {
        let (number, wt) = r.tag()?;
        (r, seen) = field_g(schema, r, number, wt, seen, depth)?;
    }
    required_g(schema, seen)
}

/// Checks the `required` fields once the message has been read (`seen`: bit per field index).
#[inline]
pub(crate) fn required_g<E: Failure>(schema: &'static Schema, seen: u64) -> Result<(), E> {
    let missing = schema.required & !seen;
    if missing != 0 {
        let field = &schema.fields[missing.trailing_zeros() as usize];
        return fail(|| DecodeError::MissingRequired {
            message: schema.name,
            field: field.name,
        });
    }
    Ok(())
}

/// Validates the value of one field whose tag has just been read; sets the field's bit in
/// `seen` (bit = index in `schema.fields`). Shared by [`validate_g`] and the slow path of the
/// generated validators.
///
/// Takes and returns the reader and `seen` by value, so that callers' copies can stay in
/// registers.
pub(crate) fn field_g<'a, E: Failure>(
    schema: &'static Schema,
    mut r: Reader<'a>,
    number: u32,
    wt: WireType,
    mut seen: u64,
    depth: u32,
) -> Result<(Reader<'a>, u64), E> {
    let slot = match schema.slots.get(number as usize) {
        Some(&slot) if slot != 0 => slot,
        _ => {
            r.skip_value(number, wt, depth)?;
            return Ok((r, seen));
        }
    };
    let index = slot as usize - 1;
    let field = &schema.fields[index];
    let bit = 1u64 << index;
    let expected = field.kind.wire_type();
    if wt == expected {
        match field.kind {
            Kind::Message(sub) => {
                let body = r.len_delimited()?;
                if seen & bit != 0 && field.label != Label::Repeated {
                    return fail(|| DecodeError::DuplicateMessage {
                        message: schema.name,
                        field: field.name,
                    });
                }
                validate_g::<E>(sub, body, depth + 1)?;
            }
            Kind::Enum(known) if field.label == Label::Required => {
                // Java files an unknown value under unknown fields: it does not count.
                let v = r.varint()? as i32;
                if known.binary_search(&v).is_err() {
                    return Ok((r, seen));
                }
            }
            _ => r.skip_value(number, wt, depth)?,
        }
        seen |= bit;
        Ok((r, seen))
    } else if wt == WireType::Len && field.label == Label::Repeated {
        // A packed run of scalars.
        let body = r.len_delimited()?;
        packed_g(schema, field, expected, body)?;
        seen |= bit;
        Ok((r, seen))
    } else {
        fail(|| DecodeError::WrongWireType {
            message: schema.name,
            field: field.name,
            actual: wt,
        })
    }
}

/// Checks the body of a packed run of scalars whose single values have wire type `expected`.
#[inline]
pub(crate) fn packed_g<E: Failure>(
    schema: &'static Schema,
    field: &'static Field,
    expected: WireType,
    body: &[u8],
) -> Result<(), E> {
    match expected {
        WireType::Varint => {
            let mut p = Reader::new(body);
            while !p.is_empty() {
                p.skip_varint_g::<E>()?;
            }
            Ok(())
        }
        _ => {
            let width = if expected == WireType::Fixed32 { 4 } else { 8 };
            if body.len() % width != 0 {
                return fail(|| DecodeError::PackedLength {
                    message: schema.name,
                    field: field.name,
                    len: body.len(),
                    width,
                });
            }
            Ok(())
        }
    }
}
