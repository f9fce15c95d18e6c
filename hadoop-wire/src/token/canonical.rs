//! What protobuf-java's `parseFrom(bytes).toByteArray()` produces for a proto2 message, driven
//! by the generated schema tables (`crate::pb::schema`).
//!
//! The YARN secret managers compute a token's password over `identifier.getBytes()`, which is
//! the *parsed and re-serialized* identifier, not the bytes on the wire. To accept exactly the
//! tokens Java accepts, the password must be checked over the same re-serialization:
//!
//! - known fields in ascending field number, each once; a non-repeated scalar keeps its last
//!   occurrence, a non-repeated message merges all its occurrences (the concatenation of their
//!   bodies, re-serialized); repeated fields keep every element in order, unpacked (no field of
//!   Hadoop's token messages is declared packed; packed input is accepted);
//! - values canonical: minimal varints, `int32` and enums sign-extended to 10 bytes when
//!   negative, `bool` as 0/1, `uint32`/`sint32` truncated to 32 bits; strings and bytes as is
//!   (proto2 Java does not check UTF-8);
//! - an enum value the schema does not know, and a known field number arriving with another
//!   wire type, become unknown fields; unknown fields follow the known ones, sorted by number,
//!   per number varints, fixed32s, fixed64s, length-delimited values, groups (protobuf-java's
//!   `UnknownFieldSet`), groups re-serialized the same way;
//! - a missing `required` field (at any depth) or nesting deeper than 100 fails the parse.
//!
//! Where Java is more lenient than [`Reader`] (a 10th varint byte above 1, a length or tag
//! varint beyond 32 bits) we refuse the input; Java and prost never write such bytes.

use std::collections::BTreeMap;

use crate::reader::{DecodeError, Reader, WireType, RECURSION_LIMIT};
use crate::view::schema::{Kind, Label, Schema};

/// Java's re-serialization of `buf` parsed as `schema`; with `keep_unknown = false`, without
/// the unknown fields (what the typed accessors of the parsed Java object see).
pub(crate) fn reserialize(
    schema: &'static Schema,
    buf: &[u8],
    keep_unknown: bool,
) -> Result<Vec<u8>, DecodeError> {
    let mut out = Vec::with_capacity(buf.len());
    message(schema, buf, keep_unknown, 0, &mut out)?;
    Ok(out)
}

#[derive(Clone, Copy)]
enum Elem<'a> {
    Varint(u64),
    Fixed32(u32),
    Fixed64(u64),
    Len(&'a [u8]),
}

#[derive(Default)]
struct Unknown<'a> {
    varint: Vec<u64>,
    fixed32: Vec<u32>,
    fixed64: Vec<u64>,
    len: Vec<&'a [u8]>,
    group: Vec<&'a [u8]>,
}

type UnknownSet<'a> = BTreeMap<u32, Unknown<'a>>;

fn message(
    schema: &'static Schema,
    buf: &[u8],
    keep_unknown: bool,
    depth: u32,
    out: &mut Vec<u8>,
) -> Result<(), DecodeError> {
    if depth >= RECURSION_LIMIT {
        return Err(DecodeError::DepthLimit(RECURSION_LIMIT));
    }
    let mut fields: Vec<Vec<Elem<'_>>> = vec![Vec::new(); schema.fields.len()];
    let mut unknown = UnknownSet::new();
    let mut r = Reader::new(buf);
    while !r.is_empty() {
        let (number, wt) = r.read_tag()?;
        let slot = schema.slots.get(number as usize).copied().unwrap_or(0);
        let Some(field) = (slot as usize)
            .checked_sub(1)
            .and_then(|i| schema.fields.get(i))
        else {
            read_unknown(&mut r, number, wt, depth, &mut unknown)?;
            continue;
        };
        let i = slot as usize - 1;
        let declared = field.kind.wire_type();
        if wt == declared {
            let e = read_elem(&mut r, wt)?;
            push_known(field.kind, number, e, &mut fields[i], &mut unknown);
        } else if wt == WireType::Len && field.label == Label::Repeated && declared != WireType::Len
        {
            // packed form of a repeated scalar
            let mut p = Reader::new(r.read_len()?);
            while !p.is_empty() {
                let e = read_elem(&mut p, declared)?;
                push_known(field.kind, number, e, &mut fields[i], &mut unknown);
            }
        } else {
            read_unknown(&mut r, number, wt, depth, &mut unknown)?;
        }
    }
    for (f, elems) in schema.fields.iter().zip(&fields) {
        if f.label == Label::Required && elems.is_empty() {
            return Err(DecodeError::MissingRequired {
                message: schema.name,
                field: f.name,
            });
        }
    }
    for (f, elems) in schema.fields.iter().zip(&fields) {
        match (f.label, f.kind) {
            (_, _) if elems.is_empty() => {}
            (Label::Repeated, Kind::Message(sub)) => {
                for e in elems {
                    if let Elem::Len(body) = e {
                        sub_message(sub, f.number, body, keep_unknown, depth, out)?;
                    }
                }
            }
            (Label::Repeated, kind) => {
                for e in elems {
                    write_value(out, f.number, kind, *e);
                }
            }
            (_, Kind::Message(sub)) => {
                let bodies: Vec<&[u8]> = elems
                    .iter()
                    .filter_map(|e| match e {
                        Elem::Len(b) => Some(*b),
                        _ => None,
                    })
                    .collect();
                let merged;
                let body: &[u8] = if bodies.len() == 1 {
                    bodies[0]
                } else {
                    merged = bodies.concat();
                    &merged
                };
                sub_message(sub, f.number, body, keep_unknown, depth, out)?;
            }
            (_, kind) => {
                if let Some(e) = elems.last() {
                    write_value(out, f.number, kind, *e);
                }
            }
        }
    }
    if keep_unknown {
        write_unknown(&unknown, depth, out)?;
    }
    Ok(())
}

fn sub_message(
    schema: &'static Schema,
    number: u32,
    body: &[u8],
    keep_unknown: bool,
    depth: u32,
    out: &mut Vec<u8>,
) -> Result<(), DecodeError> {
    let mut sub = Vec::with_capacity(body.len());
    message(schema, body, keep_unknown, depth + 1, &mut sub)?;
    put_tag(out, number, WireType::Len);
    put_varint(out, sub.len() as u64);
    out.extend_from_slice(&sub);
    Ok(())
}

/// Files a known field's value; an enum value the schema does not list goes to the unknown
/// fields as protobuf-java's `mergeUnknownVarintField` does (the `int` value, sign-extended).
fn push_known<'a>(
    kind: Kind,
    number: u32,
    e: Elem<'a>,
    elems: &mut Vec<Elem<'a>>,
    unknown: &mut UnknownSet<'a>,
) {
    if let (Kind::Enum(values), Elem::Varint(v)) = (kind, e) {
        let v = v as u32 as i32;
        if values.binary_search(&v).is_err() {
            unknown
                .entry(number)
                .or_default()
                .varint
                .push(v as i64 as u64);
            return;
        }
    }
    elems.push(e);
}

fn read_elem<'a>(r: &mut Reader<'a>, wt: WireType) -> Result<Elem<'a>, DecodeError> {
    Ok(match wt {
        WireType::Varint => Elem::Varint(r.read_varint()?),
        WireType::Fixed32 => Elem::Fixed32(r.read_fixed32()?),
        WireType::Fixed64 => Elem::Fixed64(r.read_fixed64()?),
        WireType::Len => Elem::Len(r.read_len()?),
        // A known field never has a group type in Hadoop's protos; the caller files groups
        // as unknown fields before getting here.
        WireType::StartGroup | WireType::EndGroup => {
            return Err(DecodeError::BadWireType(wt as u8))
        }
    })
}

fn read_unknown<'a>(
    r: &mut Reader<'a>,
    number: u32,
    wt: WireType,
    depth: u32,
    set: &mut UnknownSet<'a>,
) -> Result<(), DecodeError> {
    let u = set.entry(number).or_default();
    match wt {
        WireType::Varint => u.varint.push(r.read_varint()?),
        WireType::Fixed32 => u.fixed32.push(r.read_fixed32()?),
        WireType::Fixed64 => u.fixed64.push(r.read_fixed64()?),
        WireType::Len => u.len.push(r.read_len()?),
        WireType::StartGroup => u.group.push(r.read_group(number, depth)?),
        WireType::EndGroup => {
            return Err(DecodeError::GroupMismatch {
                expected: None,
                found: number,
            })
        }
    }
    Ok(())
}

fn write_unknown(set: &UnknownSet<'_>, depth: u32, out: &mut Vec<u8>) -> Result<(), DecodeError> {
    for (&n, u) in set {
        for &v in &u.varint {
            put_tag(out, n, WireType::Varint);
            put_varint(out, v);
        }
        for &v in &u.fixed32 {
            put_tag(out, n, WireType::Fixed32);
            out.extend_from_slice(&v.to_le_bytes());
        }
        for &v in &u.fixed64 {
            put_tag(out, n, WireType::Fixed64);
            out.extend_from_slice(&v.to_le_bytes());
        }
        for b in &u.len {
            put_tag(out, n, WireType::Len);
            put_varint(out, b.len() as u64);
            out.extend_from_slice(b);
        }
        for body in &u.group {
            put_tag(out, n, WireType::StartGroup);
            unknown_group(body, depth + 1, out)?;
            put_tag(out, n, WireType::EndGroup);
        }
    }
    Ok(())
}

/// A group's body parsed as an `UnknownFieldSet` and written back.
fn unknown_group(body: &[u8], depth: u32, out: &mut Vec<u8>) -> Result<(), DecodeError> {
    if depth >= RECURSION_LIMIT {
        return Err(DecodeError::DepthLimit(RECURSION_LIMIT));
    }
    let mut set = UnknownSet::new();
    let mut r = Reader::new(body);
    while !r.is_empty() {
        let (number, wt) = r.read_tag()?;
        read_unknown(&mut r, number, wt, depth, &mut set)?;
    }
    write_unknown(&set, depth, out)
}

fn write_value(out: &mut Vec<u8>, number: u32, kind: Kind, e: Elem<'_>) {
    match e {
        Elem::Varint(raw) => {
            let v = match kind {
                Kind::Int32 | Kind::Enum(_) => raw as u32 as i32 as i64 as u64,
                Kind::UInt32 | Kind::SInt32 => u64::from(raw as u32),
                Kind::Bool => u64::from(raw != 0),
                _ => raw,
            };
            put_tag(out, number, WireType::Varint);
            put_varint(out, v);
        }
        Elem::Fixed32(v) => {
            put_tag(out, number, WireType::Fixed32);
            out.extend_from_slice(&v.to_le_bytes());
        }
        Elem::Fixed64(v) => {
            put_tag(out, number, WireType::Fixed64);
            out.extend_from_slice(&v.to_le_bytes());
        }
        Elem::Len(b) => {
            put_tag(out, number, WireType::Len);
            put_varint(out, b.len() as u64);
            out.extend_from_slice(b);
        }
    }
}

fn put_tag(out: &mut Vec<u8>, number: u32, wt: WireType) {
    put_varint(out, (u64::from(number) << 3) | wt as u64);
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pb::hadoop::yarn as py;
    use crate::pb::schema::hadoop::yarn as sy;
    use prost::Message;

    #[test]
    fn prost_output_is_already_canonical() {
        let p = py::ContainerTokenIdentifierProto {
            container_id: Some(py::ContainerIdProto {
                app_id: None,
                app_attempt_id: Some(py::ApplicationAttemptIdProto {
                    application_id: Some(py::ApplicationIdProto {
                        id: Some(3),
                        cluster_timestamp: Some(1_700_000_000_000),
                    }),
                    attempt_id: Some(1),
                }),
                id: Some(2),
            }),
            nm_host_addr: Some("h:1".into()),
            master_key_id: Some(-5),
            container_type: Some(2),
            allocation_tags: vec!["a".into(), "b".into()],
            ..Default::default()
        };
        let b = p.encode_to_vec();
        assert_eq!(
            reserialize(&sy::ContainerTokenIdentifierProto, &b, true).unwrap(),
            b
        );
    }

    #[test]
    fn reorders_dedups_and_moves_unknowns_last() {
        // keyId=4 (field 4), unknown field 9 varint 7, appSubmitter "x" twice (last wins),
        // keyId with a non-minimal varint.
        let input = [
            0x20, 0x04, // keyId 4
            0x48, 0x07, // field 9 = 7 (unknown)
            0x1a, 0x01, b'y', // appSubmitter "y"
            0x1a, 0x01, b'x', // appSubmitter "x"
            0x20, 0x85, 0x00, // keyId 5, two bytes
        ];
        let out = reserialize(&sy::NMTokenIdentifierProto, &input, true).unwrap();
        assert_eq!(out, [0x1a, 0x01, b'x', 0x20, 0x05, 0x48, 0x07]);
        let known = reserialize(&sy::NMTokenIdentifierProto, &input, false).unwrap();
        assert_eq!(known, [0x1a, 0x01, b'x', 0x20, 0x05]);
    }

    #[test]
    fn unknown_enum_values_become_unknown_fields() {
        // containerType (12) = 1 then 7; executionType (13) = 9.
        let input = [0x60, 0x01, 0x60, 0x07, 0x68, 0x09];
        let out = reserialize(&sy::ContainerTokenIdentifierProto, &input, true).unwrap();
        assert_eq!(out, [0x60, 0x01, 0x60, 0x07, 0x68, 0x09]);
        let known = reserialize(&sy::ContainerTokenIdentifierProto, &input, false).unwrap();
        assert_eq!(known, [0x60, 0x01]);
        // the unknown 7 sorts after a known field 13
        let input = [0x60, 0x07, 0x68, 0x01];
        let out = reserialize(&sy::ContainerTokenIdentifierProto, &input, true).unwrap();
        assert_eq!(out, [0x68, 0x01, 0x60, 0x07]);
    }

    #[test]
    fn merges_repeated_occurrences_of_a_message() {
        // nodeId (2) twice: host "a", then port 5.
        let input = [0x12, 0x03, 0x0a, 0x01, b'a', 0x12, 0x02, 0x10, 0x05];
        let out = reserialize(&sy::NMTokenIdentifierProto, &input, true).unwrap();
        assert_eq!(out, [0x12, 0x05, 0x0a, 0x01, b'a', 0x10, 0x05]);
    }

    #[test]
    fn missing_required_nested_field_fails() {
        // ContainerTokenIdentifierProto.resource (4) = { resource_value_map (3) = {} }:
        // ResourceInformationProto.key is required.
        let input = [0x22, 0x02, 0x1a, 0x00];
        assert!(matches!(
            reserialize(&sy::ContainerTokenIdentifierProto, &input, true),
            Err(DecodeError::MissingRequired { .. })
        ));
    }

    #[test]
    fn wrong_wire_type_is_unknown_and_stray_end_group_fails() {
        // keyId (4) as fixed32
        let input = [0x25, 1, 0, 0, 0];
        let out = reserialize(&sy::NMTokenIdentifierProto, &input, true).unwrap();
        assert_eq!(out, input);
        assert!(reserialize(&sy::NMTokenIdentifierProto, &[0x24], true).is_err());
        // a group (field 7) holding a non-minimal varint is rewritten minimal
        let input = [0x3b, 0x08, 0x81, 0x00, 0x3c];
        let out = reserialize(&sy::NMTokenIdentifierProto, &input, true).unwrap();
        assert_eq!(out, [0x3b, 0x08, 0x01, 0x3c]);
    }
}
