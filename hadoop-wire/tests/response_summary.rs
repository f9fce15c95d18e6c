//! `RpcResponseHeaderView::summary()` (one pass) against `validate()` + the per-field
//! accessors, and against prost, the reference codec.
//!
//! Two generators: prost-encoded headers re-encoded by the splicer (`view_support::splice`:
//! unknown fields of every wire type, decoy earlier occurrences), and a field-level generator
//! of raw headers (every field repeated in any order, unknown enum values, non-minimal tags,
//! wrong wire types, unknown fields including nested groups, invalid UTF-8), optionally
//! truncated or mutated. On every input `summary()` must give exactly `validate()`'s result
//! (the same typed error), and on valid input every field must equal the view accessor and,
//! when prost decodes the bytes, prost's value. No input may make it allocate.

mod view_support;

use hadoop_wire::pb::hadoop::common::rpc_response_header_proto::{
    RpcErrorCodeProto, RpcStatusProto,
};
use hadoop_wire::pb::hadoop::common::RpcResponseHeaderProto;
use hadoop_wire::reader::{DecodeError, Reader, Value, WireType};
use hadoop_wire::view::rpc::{RpcResponseHeaderSummary, RpcResponseHeaderView};
use hadoop_wire::view::MessageView;
use proptest::prelude::*;
use prost::Message;
use view_support::{put_tag, put_varint, s_rpc_response_header, splice, SpliceRng};

#[global_allocator]
static GLOBAL: alloc_counter::Counting = alloc_counter::Counting;

type R = Result<(), TestCaseError>;

/// `summary()` counted for allocations on this thread (must be none, Ok or Err).
fn summary_no_alloc(
    v: RpcResponseHeaderView<'_>,
) -> Result<Result<RpcResponseHeaderSummary<'_>, DecodeError>, TestCaseError> {
    let (r, c) = alloc_counter::thread(|| v.summary());
    prop_assert_eq!(c.allocs, 0, "summary() allocated");
    Ok(r)
}

/// The whole contract on one input; returns whether the header validated.
fn check(bytes: &[u8]) -> Result<bool, TestCaseError> {
    let v = RpcResponseHeaderView::new(bytes);
    let validation = v.validate();
    let s = summary_no_alloc(v)?;
    let s = match (s, validation) {
        (Err(e), Err(want)) => {
            prop_assert_eq!(e, want, "summary and validate name different errors");
            return Ok(false);
        }
        (Ok(_), Err(want)) => {
            return Err(TestCaseError::fail(format!(
                "summary accepted what validate refused: {want}"
            )))
        }
        (Err(e), Ok(())) => {
            return Err(TestCaseError::fail(format!(
                "summary refused what validate accepted: {e}"
            )))
        }
        (Ok(s), Ok(())) => s,
    };
    against_view(&s, v)?;
    match RpcResponseHeaderProto::decode(bytes) {
        Ok(p) => against_prost(&s, &p)?,
        Err(e) => {
            // validate does not check UTF-8, prost does: the only allowed disagreement.
            prop_assert!(
                e.to_string().contains("UTF-8"),
                "prost refused a validated header: {}",
                e
            );
            // prost checks every occurrence of a string field, the views the last one.
            prop_assert!(
                any_bad_string(bytes),
                "prost found invalid UTF-8 where no string field has it"
            );
        }
    }
    Ok(true)
}

/// Whether some occurrence of exceptionClassName or errorMsg is not UTF-8.
fn any_bad_string(bytes: &[u8]) -> bool {
    let mut r = Reader::new(bytes);
    while !r.is_empty() {
        match r.read_field(0) {
            Ok((4 | 5, Value::Len(b))) if std::str::from_utf8(b).is_err() => return true,
            Ok(_) => {}
            Err(_) => return false,
        }
    }
    false
}

fn against_view(s: &RpcResponseHeaderSummary<'_>, v: RpcResponseHeaderView<'_>) -> R {
    prop_assert_eq!(Ok(s.call_id), v.call_id());
    prop_assert_eq!(Ok(s.call_id_i32()), v.call_id_i32());
    prop_assert_eq!(Ok(s.status_raw), v.status_raw());
    prop_assert_eq!(Ok(s.status), v.status());
    prop_assert_eq!(Ok(s.server_ipc_version_num), v.server_ipc_version_num());
    prop_assert_eq!(s.exception_class_name(), v.exception_class_name());
    prop_assert_eq!(s.error_msg(), v.error_msg());
    prop_assert_eq!(Ok(s.error_detail_raw), v.error_detail_raw());
    prop_assert_eq!(Ok(s.error_detail), v.error_detail());
    prop_assert_eq!(Ok(s.client_id), v.client_id());
    prop_assert_eq!(Ok(s.retry_count()), v.retry_count());
    prop_assert_eq!(Ok(s.retry_count_opt), v.retry_count_opt());
    prop_assert_eq!(Ok(s.state_id), v.state_id());
    prop_assert_eq!(Ok(s.router_federated_state), v.router_federated_state());
    Ok(())
}

fn against_prost(s: &RpcResponseHeaderSummary<'_>, p: &RpcResponseHeaderProto) -> R {
    prop_assert_eq!(s.call_id, p.call_id);
    prop_assert_eq!(s.status_raw, p.status);
    // prost keeps the last value on the wire; the typed value is the last known one, which
    // is the same whenever the last one is known.
    if let Ok(st) = RpcStatusProto::try_from(p.status) {
        prop_assert_eq!(s.status, st);
    }
    prop_assert_eq!(s.server_ipc_version_num, p.server_ipc_version_num);
    prop_assert_eq!(
        s.exception_class_name().unwrap(),
        p.exception_class_name.as_deref()
    );
    prop_assert_eq!(s.error_msg().unwrap(), p.error_msg.as_deref());
    prop_assert_eq!(s.error_detail_raw, p.error_detail);
    match p.error_detail.map(RpcErrorCodeProto::try_from) {
        Some(Ok(d)) => prop_assert_eq!(s.error_detail, Some(d)),
        None => prop_assert_eq!(s.error_detail, None),
        Some(Err(_)) => {} // an earlier known value may stand
    }
    prop_assert_eq!(s.client_id, p.client_id.as_deref());
    prop_assert_eq!(s.retry_count_opt, p.retry_count);
    prop_assert_eq!(s.retry_count(), p.retry_count());
    prop_assert_eq!(s.state_id, p.state_id);
    prop_assert_eq!(
        s.router_federated_state,
        p.router_federated_state.as_deref()
    );
    Ok(())
}

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

// ---------------------------------------------------------------------------------------
// Field-level generator of raw headers.

/// One piece of a generated header.
#[derive(Debug, Clone)]
enum Piece {
    /// A declared field with a value of its own wire type; `wide` encodes the tag in
    /// more bytes than needed (still a valid tag).
    Field {
        number: u32,
        value: u64,
        len: Vec<u8>,
        wide: bool,
    },
    /// A declared field with another wire type (always an error).
    WrongWire { number: u32, wt: u8 },
    /// An unknown field (number > 10), possibly a group holding more fields.
    Unknown {
        number: u32,
        kind: u8,
        value: u64,
        nested: u8,
    },
}

fn s_piece() -> impl Strategy<Value = Piece> {
    let varint = prop_oneof![
        0..4u64,
        any::<u64>(),
        Just(u64::MAX),
        Just(0xffff_ffff),
        0..20u64,
    ];
    let bytes = prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..12),
        "[a-zA-Z.$ ]{0,20}".prop_map(String::into_bytes),
    ];
    prop_oneof![
        8 => (1..=10u32, varint.clone(), bytes, proptest::bool::weighted(0.1))
            .prop_map(|(number, value, len, wide)| Piece::Field { number, value, len, wide }),
        1 => (1..=10u32, 0..6u8).prop_map(|(number, wt)| Piece::WrongWire { number, wt }),
        2 => (prop_oneof![11..40u32, 1000..3000u32, Just((1 << 29) - 1)], 0..5u8, varint, 0..4u8)
            .prop_map(|(number, kind, value, nested)| Piece::Unknown { number, kind, value, nested }),
    ]
}

fn declared_wire(number: u32) -> WireType {
    match number {
        4 | 5 | 7 | 10 => WireType::Len,
        _ => WireType::Varint,
    }
}

fn put_wide_tag(out: &mut Vec<u8>, number: u32, wt: WireType) {
    // One continuation byte too many: 0x80 | low bits, then 0x80, then the rest.
    let key = (u64::from(number) << 3) | wt as u64;
    out.push((key as u8 & 0x7f) | 0x80);
    out.push(0x80 | ((key >> 7) as u8 & 0x7f));
    out.push((key >> 14) as u8);
}

fn put_unknown(out: &mut Vec<u8>, number: u32, kind: u8, value: u64, nested: u8) {
    match kind {
        0 => {
            put_tag(out, number, WireType::Varint);
            put_varint(out, value);
        }
        1 => {
            put_tag(out, number, WireType::Fixed64);
            out.extend_from_slice(&value.to_le_bytes());
        }
        2 => {
            put_tag(out, number, WireType::Fixed32);
            out.extend_from_slice(&(value as u32).to_le_bytes());
        }
        3 => {
            put_tag(out, number, WireType::Len);
            let n = (value % 8) as usize;
            put_varint(out, n as u64);
            out.extend(std::iter::repeat_n(0xab, n));
        }
        _ => {
            put_tag(out, number, WireType::StartGroup);
            // Inside a group the numbers of declared fields mean nothing.
            for i in 0..nested {
                put_unknown(out, 1 + u32::from(i), (value >> i) as u8 % 4, value, 0);
            }
            if nested > 2 {
                put_unknown(out, 2, 4, value, 1);
            }
            put_tag(out, number, WireType::EndGroup);
        }
    }
}

fn encode(pieces: &[Piece]) -> Vec<u8> {
    let mut out = Vec::new();
    for p in pieces {
        match p {
            Piece::Field {
                number,
                value,
                len,
                wide,
            } => {
                let wt = declared_wire(*number);
                if *wide {
                    put_wide_tag(&mut out, *number, wt);
                } else {
                    put_tag(&mut out, *number, wt);
                }
                if wt == WireType::Len {
                    put_varint(&mut out, len.len() as u64);
                    out.extend_from_slice(len);
                } else if *number == 2 || *number == 6 {
                    // enums: known values mostly, unknown ones sometimes
                    put_varint(&mut out, value % 17);
                } else {
                    put_varint(&mut out, *value);
                }
            }
            Piece::WrongWire { number, wt } => {
                let wt = match (declared_wire(*number), wt) {
                    (WireType::Varint, 0) => WireType::Len,
                    (WireType::Len, 0) => WireType::Varint,
                    (_, 1) => WireType::Fixed64,
                    (_, 2) => WireType::Fixed32,
                    (_, 3) => WireType::StartGroup,
                    (_, 4) => WireType::EndGroup,
                    (WireType::Varint, _) => WireType::Fixed32,
                    (_, _) => WireType::Fixed64,
                };
                put_tag(&mut out, *number, wt);
                out.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
            }
            Piece::Unknown {
                number,
                kind,
                value,
                nested,
            } => put_unknown(&mut out, *number, *kind, *value, *nested),
        }
    }
    out
}

/// What happens to the encoded bytes before the check.
#[derive(Debug, Clone)]
enum Damage {
    None,
    Truncate(prop::sample::Index),
    Flip(prop::sample::Index, u8),
    Insert(prop::sample::Index, u8),
}

fn s_damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        4 => Just(Damage::None),
        2 => any::<prop::sample::Index>().prop_map(Damage::Truncate),
        1 => (any::<prop::sample::Index>(), any::<u8>()).prop_map(|(i, b)| Damage::Flip(i, b)),
        1 => (any::<prop::sample::Index>(), any::<u8>()).prop_map(|(i, b)| Damage::Insert(i, b)),
    ]
}

fn damage(mut b: Vec<u8>, d: &Damage) -> Vec<u8> {
    match d {
        Damage::None => {}
        _ if b.is_empty() => {}
        Damage::Truncate(i) => b.truncate(i.index(b.len())),
        Damage::Flip(i, x) => {
            let i = i.index(b.len());
            b[i] ^= x | 1;
        }
        Damage::Insert(i, x) => b.insert(i.index(b.len() + 1), *x),
    }
    b
}

/// A valid header prefix (callId and status), so that most generated inputs validate.
fn s_prefix() -> impl Strategy<Value = Vec<Piece>> {
    (any::<u32>(), 0..3u64).prop_map(|(id, st)| {
        vec![
            Piece::Field {
                number: 1,
                value: u64::from(id),
                len: vec![],
                wide: false,
            },
            Piece::Field {
                number: 2,
                value: st,
                len: vec![],
                wide: false,
            },
        ]
    })
}

proptest! {
    #![proptest_config(config(3000))]

    /// Raw headers: repeated fields (last wins), unknown fields, wrong wire types,
    /// non-minimal tags, unknown enum values, damage. summary == validate + accessors == prost.
    #[test]
    fn raw_headers(
        prefix in proptest::option::weighted(0.8, s_prefix()),
        pieces in proptest::collection::vec(s_piece(), 0..16),
        d in s_damage(),
    ) {
        let mut all = prefix.unwrap_or_default();
        all.extend(pieces);
        let bytes = damage(encode(&all), &d);
        check(&bytes)?;
    }

    /// Random bytes: mostly errors, which must be validate's.
    #[test]
    fn random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
        check(&bytes)?;
    }
}

proptest! {
    #![proptest_config(config(1000))]

    /// prost-encoded headers re-encoded with unknown fields and decoys: must validate and
    /// equal what prost decoded from the original message.
    #[test]
    fn prost_headers_spliced(msg in s_rpc_response_header(), seed in any::<u64>()) {
        let plain = msg.encode_to_vec();
        let mut rng = SpliceRng::new(seed);
        let bytes = splice(<RpcResponseHeaderView as MessageView>::SCHEMA, &plain, &mut rng);
        prop_assert!(check(&bytes)?, "a spliced prost header must validate");
        let s = RpcResponseHeaderView::new(&bytes).summary().unwrap();
        against_prost(&s, &msg)?;
        // and every prefix that cuts the header gives validate's error
        let cut = (seed % (bytes.len() as u64 + 1)) as usize;
        check(&bytes[..cut])?;
    }
}

#[test]
fn fixed_vectors() {
    // callId −1 as uint32 (five bytes), status ERROR, class, message, detail, stateId.
    let mut h = vec![0x08, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x10, 0x01];
    h.extend_from_slice(&[0x22, 3, b'a', b'.', b'B', 0x2a, 2, b'h', b'i', 0x30, 0x0b]);
    h.extend_from_slice(&[0x48, 0x96, 0x01]);
    let s = RpcResponseHeaderView::new(&h).summary().unwrap();
    assert_eq!(s.call_id_i32(), -1);
    assert_eq!(s.status, RpcStatusProto::Error);
    assert_eq!(s.exception_class_name(), Ok(Some("a.B")));
    assert_eq!(s.error_msg(), Ok(Some("hi")));
    assert_eq!(
        s.error_detail,
        Some(RpcErrorCodeProto::FatalUnsupportedSerialization)
    );
    assert_eq!(s.state_id, Some(150));
    assert_eq!(s.retry_count(), -1);

    // status only unknown: MissingRequired status, as validate says.
    let h = [0x08, 0x01, 0x10, 0x07];
    let e = RpcResponseHeaderView::new(&h).summary().unwrap_err();
    assert!(
        matches!(
            e,
            DecodeError::MissingRequired {
                field: "status",
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(Err(e), RpcResponseHeaderView::new(&h).validate());
    // a later unknown status does not hide an earlier known one; status_raw is the last
    let h = [0x08, 0x01, 0x10, 0x02, 0x10, 0x07];
    let s = RpcResponseHeaderView::new(&h).summary().unwrap();
    assert_eq!((s.status, s.status_raw), (RpcStatusProto::Fatal, 7));
    // both required fields missing: callId is named first
    let e = RpcResponseHeaderView::new(&[]).summary().unwrap_err();
    assert!(
        matches!(
            e,
            DecodeError::MissingRequired {
                field: "callId",
                ..
            }
        ),
        "{e}"
    );
    // a wrong wire type on a known field
    let e = RpcResponseHeaderView::new(&[0x08, 0x01, 0x10, 0x00, 0x4a, 0x00])
        .summary()
        .unwrap_err();
    assert!(
        matches!(
            e,
            DecodeError::WrongWireType {
                field: "stateId",
                ..
            }
        ),
        "{e}"
    );
    // truncated inside the length-delimited errorMsg
    let e = RpcResponseHeaderView::new(&[0x08, 0x01, 0x10, 0x00, 0x2a, 0x05, b'x'])
        .summary()
        .unwrap_err();
    assert_eq!(
        e,
        DecodeError::LengthOutOfBounds {
            len: 5,
            remaining: 1
        }
    );
}
