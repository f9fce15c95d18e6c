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
}

use crate::reader::{DecodeError, Reader, WireType, RECURSION_LIMIT};

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
pub fn validate(schema: &'static Schema, buf: &[u8], depth: u32) -> Result<(), DecodeError> {
    if depth >= RECURSION_LIMIT {
        return Err(DecodeError::DepthLimit(RECURSION_LIMIT));
    }
    let mut r = Reader::new(buf);
    let mut seen: u64 = 0;
    while !r.is_empty() {
        let (number, wt) = r.read_tag()?;
        let slot = schema.slots.get(number as usize).copied().unwrap_or(0);
        if slot == 0 {
            r.skip(number, wt, depth)?;
            continue;
        }
        let index = slot as usize - 1;
        let field = &schema.fields[index];
        let bit = 1u64 << index;
        match (field.kind, wt) {
            (Kind::Message(sub), WireType::Len) => {
                let body = r.read_len()?;
                if field.label != Label::Repeated && seen & bit != 0 {
                    return Err(DecodeError::DuplicateMessage {
                        message: schema.name,
                        field: field.name,
                    });
                }
                validate(sub, body, depth + 1)?;
                seen |= bit;
            }
            (Kind::String | Kind::Bytes, WireType::Len) => {
                r.read_len()?;
                seen |= bit;
            }
            (Kind::Enum(known), WireType::Varint) => {
                let v = r.read_varint()? as i32;
                if known.binary_search(&v).is_ok() {
                    seen |= bit;
                }
            }
            (kind, WireType::Len) if field.label == Label::Repeated => {
                // A packed run of scalars.
                let body = r.read_len()?;
                match kind.wire_type() {
                    WireType::Varint => {
                        let mut p = Reader::new(body);
                        while !p.is_empty() {
                            p.read_varint()?;
                        }
                    }
                    WireType::Fixed32 | WireType::Fixed64 => {
                        let width = if kind.wire_type() == WireType::Fixed32 {
                            4
                        } else {
                            8
                        };
                        if body.len() % width != 0 {
                            return Err(DecodeError::PackedLength {
                                message: schema.name,
                                field: field.name,
                                len: body.len(),
                                width,
                            });
                        }
                    }
                    _ => {
                        return Err(DecodeError::WrongWireType {
                            message: schema.name,
                            field: field.name,
                            actual: wt,
                        })
                    }
                }
                seen |= bit;
            }
            (kind, WireType::Varint) if kind.wire_type() == WireType::Varint => {
                r.read_varint()?;
                seen |= bit;
            }
            (kind, WireType::Fixed32) if kind.wire_type() == WireType::Fixed32 => {
                r.read_fixed32()?;
                seen |= bit;
            }
            (kind, WireType::Fixed64) if kind.wire_type() == WireType::Fixed64 => {
                r.read_fixed64()?;
                seen |= bit;
            }
            _ => {
                return Err(DecodeError::WrongWireType {
                    message: schema.name,
                    field: field.name,
                    actual: wt,
                })
            }
        }
    }
    let missing = schema.required & !seen;
    if missing != 0 {
        let field = &schema.fields[missing.trailing_zeros() as usize];
        return Err(DecodeError::MissingRequired {
            message: schema.name,
            field: field.name,
        });
    }
    Ok(())
}
