//! Encoders: the worked example A.9 byte for byte, byte-equality of the hand-encoded headers with
//! prost, and encode -> decode round trips for every frame kind.

use hadoop_wire::encode::*;
use hadoop_wire::frame::{Decoded, FrameDecoder, RequestFrame, ResponseFrame};
use hadoop_wire::pb::hadoop::common::rpc_response_header_proto::{
    RpcErrorCodeProto, RpcStatusProto,
};
use hadoop_wire::pb::hadoop::common::{
    IpcConnectionContextProto, RequestHeaderProto, RpcRequestHeaderProto, RpcResponseHeaderProto,
    UserInformationProto,
};
use hadoop_wire::pb::hadoop::hdfs::GetFileInfoRequestProto;
use hadoop_wire::EncodeError;
use proptest::prelude::*;
use prost::Message;

const CLIENT_ID: [u8; 16] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15];
const CLIENT_PROTOCOL: &str = "org.apache.hadoop.hdfs.protocol.ClientProtocol";

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// Cuts the one frame in `buf` and returns its body.
fn body(buf: &[u8]) -> &[u8] {
    match FrameDecoder::default().decode(buf).unwrap() {
        Decoded::Frame(r) => {
            assert_eq!(r.end, buf.len(), "exactly one frame");
            &buf[r]
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a9_preamble() {
    let mut buf = Vec::new();
    preamble(&mut buf, 0);
    assert_eq!(buf, hex("68 72 70 63 09 00 00"));
}

#[test]
fn a9_connection_context() {
    let mut buf = Vec::new();
    let ctx = ConnectionContext {
        effective_user: Some("alice"),
        real_user: None,
        protocol: Some(CLIENT_PROTOCOL),
    };
    let n = connection_context_frame(&mut buf, &CLIENT_ID, &ctx).unwrap();
    let mut want = hex("00 00 00 55 1a 08 02 10 00 18 05 22 10");
    want.extend_from_slice(&CLIENT_ID);
    want.extend(hex("28 01 39 12 07 0a 05"));
    want.extend_from_slice(b"alice");
    want.extend(hex("1a 2e"));
    want.extend_from_slice(CLIENT_PROTOCOL.as_bytes());
    assert_eq!(n, 89);
    assert_eq!(buf, want);

    let f = RequestFrame::split(body(&buf)).unwrap();
    f.check_call_id(-3).unwrap();
    let h = RpcRequestHeaderProto::decode(f.rpc_header).unwrap();
    assert_eq!(
        (h.call_id, h.retry_count, h.rpc_kind, h.rpc_op),
        (-3, Some(-1), Some(2), Some(0))
    );
    let c = IpcConnectionContextProto::decode(f.payload.unwrap()).unwrap();
    assert_eq!(
        c.user_info.unwrap().effective_user.as_deref(),
        Some("alice")
    );
    assert_eq!(c.protocol.as_deref(), Some(CLIENT_PROTOCOL));
}

#[test]
fn a9_get_file_info_call() {
    let header = RpcRequestHeader::call(0, &CLIENT_ID, 0);
    let rh = RequestHeader {
        method_name: "getFileInfo",
        declaring_class_protocol_name: CLIENT_PROTOCOL,
        client_protocol_version: 1,
    };
    let req = GetFileInfoRequestProto { src: "/tmp".into() };
    let mut want = hex("00 00 00 62 1a 08 02 10 00 18 00 22 10");
    want.extend_from_slice(&CLIENT_ID);
    want.extend(hex("28 00 3f 0a 0b"));
    want.extend_from_slice(b"getFileInfo");
    want.extend(hex("12 2e"));
    want.extend_from_slice(CLIENT_PROTOCOL.as_bytes());
    want.extend(hex("18 01 06 0a 04"));
    want.extend_from_slice(b"/tmp");

    // As a prost message and as raw bytes: the same 102 bytes.
    let mut buf = Vec::new();
    assert_eq!(
        call_frame(&mut buf, &header, &rh, &Proto(&req)).unwrap(),
        102
    );
    assert_eq!(buf, want);
    let mut raw = Vec::new();
    call_frame(&mut raw, &header, &rh, &b"\x0a\x04/tmp"[..]).unwrap();
    assert_eq!(raw, want);

    let f = RequestFrame::split(body(&buf)).unwrap();
    f.check_call_id(0).unwrap();
    let r = RequestHeaderProto::decode(f.request_header.unwrap()).unwrap();
    assert_eq!(
        (r.method_name.as_str(), r.client_protocol_version),
        ("getFileInfo", 1)
    );
    assert_eq!(
        GetFileInfoRequestProto::decode(f.payload.unwrap()).unwrap(),
        req
    );
}

#[test]
fn a9_ping() {
    let mut buf = Vec::new();
    assert_eq!(ping_frame(&mut buf, &CLIENT_ID).unwrap(), 31);
    let mut want = hex("00 00 00 1b 1a 08 02 10 00 18 07 22 10");
    want.extend_from_slice(&CLIENT_ID);
    want.extend(hex("28 01"));
    assert_eq!(buf, want);
    let f = RequestFrame::split(body(&buf)).unwrap();
    f.check_call_id(-4).unwrap();
    assert_eq!((f.request_header, f.payload), (None, None));
}

#[test]
fn a9_success_response() {
    let header = RpcResponseHeader {
        state_id: Some(1234),
        ..RpcResponseHeader::success(0, &CLIENT_ID, 0)
    };
    let mut want_header = hex("08 00 10 00 18 09 3a 10");
    want_header.extend_from_slice(&CLIENT_ID);
    want_header.extend(hex("40 00 48 d2 09"));
    let mut buf = Vec::new();
    let n = success_response_frame(&mut buf, &header, &[][..]).unwrap();
    // length, header length byte, header, and the empty payload's single 00.
    assert_eq!(n, 4 + 1 + want_header.len() + 1);
    let f = ResponseFrame::split(body(&buf)).unwrap();
    assert_eq!(f.header, want_header);
    assert_eq!(f.payload, Some(&[][..]));
    assert_eq!(*buf.last().unwrap(), 0x00);
    let h = RpcResponseHeaderProto::decode(f.header).unwrap();
    assert_eq!((h.call_id, h.status, h.state_id), (0, 0, Some(1234)));
}

#[test]
fn error_and_fatal_responses() {
    for (status, code) in [
        (RpcStatusProto::Error, RpcErrorCodeProto::ErrorApplication),
        (
            RpcStatusProto::Fatal,
            RpcErrorCodeProto::FatalInvalidRpcHeader,
        ),
    ] {
        let mut buf = Vec::new();
        let failure = RpcFailure {
            status,
            exception_class_name: "org.apache.hadoop.ipc.StandbyException",
            error_msg: "Operation category READ is not supported in state standby",
            error_detail: code,
        };
        error_response_frame(
            &mut buf,
            &RpcResponseHeader::success(-1, &CLIENT_ID, 3),
            &failure,
        )
        .unwrap();
        let f = ResponseFrame::split(body(&buf)).unwrap();
        assert_eq!(f.payload, None, "no payload after a failure header");
        // callId -1 as uint32: ff ff ff ff 0f.
        assert_eq!(&f.header[..6], hex("08 ff ff ff ff 0f"));
        let h = RpcResponseHeaderProto::decode(f.header).unwrap();
        assert_eq!(h.call_id, u32::MAX);
        assert_eq!(h.status, status as i32);
        assert_eq!(h.error_detail, Some(code as i32));
        assert_eq!(
            h.exception_class_name.as_deref(),
            Some(failure.exception_class_name)
        );
        assert_eq!(h.error_msg.as_deref(), Some(failure.error_msg));
        assert_eq!(h.server_ipc_version_num, Some(9));
        assert_eq!(
            (h.client_id.as_deref(), h.retry_count),
            (Some(&CLIENT_ID[..]), Some(3))
        );
    }
}

#[test]
fn version_mismatch() {
    let mut buf = Vec::new();
    let mut msg = String::new();
    version_mismatch_response(&mut buf, 10, &mut msg).unwrap();
    let f = ResponseFrame::split(body(&buf)).unwrap();
    let h = RpcResponseHeaderProto::decode(f.header).unwrap();
    assert_eq!(h.call_id as i32, -1);
    assert_eq!(h.status, RpcStatusProto::Fatal as i32);
    assert_eq!(
        h.error_detail,
        Some(RpcErrorCodeProto::FatalVersionMismatch as i32)
    );
    assert_eq!(
        h.exception_class_name.as_deref(),
        Some(VERSION_MISMATCH_EXCEPTION)
    );
    assert!(h.error_msg.unwrap().ends_with("client version 10"));
    assert_eq!((h.client_id, h.retry_count), (Some(Vec::new()), Some(-1)));
}

#[test]
fn length_prefixed_drop_removes_partial_frame() {
    let mut buf = b"keep".to_vec();
    {
        let mut f = LengthPrefixed::new(&mut buf);
        f.buf().extend_from_slice(b"half-written");
        assert_eq!(f.body_len(), 12);
    }
    assert_eq!(buf, b"keep");
    let mut f = LengthPrefixed::new(&mut buf);
    f.buf().extend_from_slice(b"xy");
    assert_eq!(f.finish(), Ok(6));
    assert_eq!(buf, b"keep\0\0\0\x02xy");
    // Frames append: two in one buffer decode one after the other.
    let mut two = Vec::new();
    ping_frame(&mut two, &CLIENT_ID).unwrap();
    ping_frame(&mut two, &CLIENT_ID).unwrap();
    assert_eq!(
        FrameDecoder::default().decode(&two[31..]),
        Ok(Decoded::Frame(4..31))
    );
}

/// A body that lies about its length, to reach the "too long" paths without 2 GiB of memory.
struct Huge;
impl Body for Huge {
    fn encoded_len(&self) -> usize {
        i32::MAX as usize + 1
    }
    fn encode_body<B: bytes::BufMut>(&self, _: &mut B) {
        unreachable!("refused before writing")
    }
}

#[test]
fn oversized_parts_are_refused_and_leave_no_bytes() {
    let mut buf = b"prior".to_vec();
    let rh = RequestHeader {
        method_name: "m",
        declaring_class_protocol_name: "p",
        client_protocol_version: 1,
    };
    let r = call_frame(
        &mut buf,
        &RpcRequestHeader::call(1, &CLIENT_ID, 0),
        &rh,
        &Huge,
    );
    assert_eq!(r, Err(EncodeError::PartTooLong { len: 1 << 31 }));
    assert_eq!(buf, b"prior");
}

#[test]
fn bytes_mut_buffer() {
    let mut a = bytes::BytesMut::with_capacity(128);
    let mut b = Vec::new();
    ping_frame(&mut a, &CLIENT_ID).unwrap();
    ping_frame(&mut b, &CLIENT_ID).unwrap();
    assert_eq!(&a[..], &b[..]);
}

// --- byte-equality with prost on random headers --------------------------------------------

fn opt_str() -> impl Strategy<Value = Option<String>> {
    proptest::option::of("[a-zA-Z0-9./$]{0,40}")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn request_header_matches_prost(call_id in any::<i32>(), retry in any::<i32>(),
            client_id in proptest::collection::vec(any::<u8>(), 0..20),
            state_id in proptest::option::of(any::<i64>()),
            rfs in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..20))) {
        let ours = RpcRequestHeader { call_id, client_id: &client_id, retry_count: retry, state_id,
            router_federated_state: rfs.as_deref() };
        let theirs = RpcRequestHeaderProto {
            rpc_kind: Some(2), rpc_op: Some(0), call_id, client_id: client_id.clone(),
            retry_count: Some(retry), state_id, router_federated_state: rfs.clone(),
            ..Default::default()
        };
        let mut a = Vec::new();
        ours.encode_body(&mut a);
        prop_assert_eq!(ours.encoded_len(), a.len());
        prop_assert_eq!(a, theirs.encode_to_vec());
    }

    #[test]
    fn request_header_proto_matches_prost(m in "[a-zA-Z]{0,30}", p in "[a-zA-Z.]{0,80}", v in any::<u64>()) {
        let ours = RequestHeader { method_name: &m, declaring_class_protocol_name: &p, client_protocol_version: v };
        let theirs = RequestHeaderProto { method_name: m.clone(), declaring_class_protocol_name: p.clone(), client_protocol_version: v };
        let mut a = Vec::new();
        ours.encode_body(&mut a);
        prop_assert_eq!(ours.encoded_len(), a.len());
        prop_assert_eq!(a, theirs.encode_to_vec());
    }

    #[test]
    fn connection_context_matches_prost(eff in opt_str(), real in opt_str(), proto in opt_str()) {
        let ours = ConnectionContext { effective_user: eff.as_deref(), real_user: real.as_deref(), protocol: proto.as_deref() };
        let user_info = (eff.is_some() || real.is_some())
            .then(|| UserInformationProto { effective_user: eff.clone(), real_user: real.clone() });
        let theirs = IpcConnectionContextProto { user_info, protocol: proto.clone() };
        let mut a = Vec::new();
        ours.encode_body(&mut a);
        prop_assert_eq!(ours.encoded_len(), a.len());
        prop_assert_eq!(a, theirs.encode_to_vec());
    }

    #[test]
    fn response_header_matches_prost(call_id in any::<i32>(), retry in any::<i32>(),
            client_id in proptest::collection::vec(any::<u8>(), 0..20),
            state_id in proptest::option::of(any::<i64>()),
            rfs in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..20)),
            failure in proptest::option::of(("[a-zA-Z.$]{0,60}", ".{0,100}", 0usize..12, any::<bool>()))) {
        const CODES: [RpcErrorCodeProto; 12] = [
            RpcErrorCodeProto::ErrorApplication, RpcErrorCodeProto::ErrorNoSuchMethod,
            RpcErrorCodeProto::ErrorNoSuchProtocol, RpcErrorCodeProto::ErrorRpcServer,
            RpcErrorCodeProto::ErrorSerializingResponse, RpcErrorCodeProto::ErrorRpcVersionMismatch,
            RpcErrorCodeProto::FatalUnknown, RpcErrorCodeProto::FatalUnsupportedSerialization,
            RpcErrorCodeProto::FatalInvalidRpcHeader, RpcErrorCodeProto::FatalDeserializingRequest,
            RpcErrorCodeProto::FatalVersionMismatch, RpcErrorCodeProto::FatalUnauthorized,
        ];
        let f = failure.as_ref().map(|(c, m, code, fatal)| RpcFailure {
            status: if *fatal { RpcStatusProto::Fatal } else { RpcStatusProto::Error },
            exception_class_name: c, error_msg: m, error_detail: CODES[*code],
        });
        let ours = RpcResponseHeader { call_id, client_id: &client_id, retry_count: retry, state_id,
            router_federated_state: rfs.as_deref(), failure: f };
        let theirs = RpcResponseHeaderProto {
            call_id: call_id as u32,
            status: f.map_or(0, |f| f.status as i32),
            server_ipc_version_num: Some(9),
            exception_class_name: f.map(|f| f.exception_class_name.to_string()),
            error_msg: f.map(|f| f.error_msg.to_string()),
            error_detail: f.map(|f| f.error_detail as i32),
            client_id: Some(client_id.clone()),
            retry_count: Some(retry),
            state_id,
            router_federated_state: rfs.clone(),
        };
        let mut a = Vec::new();
        ours.encode_body(&mut a);
        prop_assert_eq!(ours.encoded_len(), a.len());
        prop_assert_eq!(&a, &theirs.encode_to_vec());
        prop_assert_eq!(RpcResponseHeaderProto::decode(&a[..]).unwrap(), theirs);
    }

    /// Every frame kind, encoded back to back into one buffer, comes back out of the decoder and
    /// the splitters with the same parts.
    #[test]
    fn round_trip_all_kinds(call_id in 0i32..=i32::MAX, payload in proptest::collection::vec(any::<u8>(), 0..600),
                            cut in any::<proptest::sample::Index>()) {
        let mut buf = Vec::new();
        preamble(&mut buf, 0);
        let ctx = ConnectionContext { effective_user: Some("alice"), real_user: None, protocol: Some(CLIENT_PROTOCOL) };
        connection_context_frame(&mut buf, &CLIENT_ID, &ctx).unwrap();
        let rh = RequestHeader { method_name: "nodeHeartbeat",
            declaring_class_protocol_name: "org.apache.hadoop.yarn.server.api.ResourceTrackerPB", client_protocol_version: 1 };
        call_frame(&mut buf, &RpcRequestHeader::call(call_id, &CLIENT_ID, 0), &rh, &payload[..]).unwrap();
        ping_frame(&mut buf, &CLIENT_ID).unwrap();
        success_response_frame(&mut buf, &RpcResponseHeader::success(call_id, &CLIENT_ID, 0), &payload[..]).unwrap();
        let failure = RpcFailure { status: RpcStatusProto::Error, exception_class_name: "E", error_msg: "m",
            error_detail: RpcErrorCodeProto::ErrorNoSuchMethod };
        error_response_frame(&mut buf, &RpcResponseHeader::success(call_id, &CLIENT_ID, 0), &failure).unwrap();

        prop_assert_eq!(hadoop_wire::frame::parse_preamble(&buf), Ok(hadoop_wire::frame::PreambleOutcome::Simple { service_class: 0 }));
        // Feed the frames to the accumulator in two arbitrary pieces.
        let stream = &buf[7..];
        let at = cut.index(stream.len() + 1);
        let mut acc = hadoop_wire::frame::FrameAccumulator::new(FrameDecoder::default());
        let mut bodies = Vec::new();
        for piece in [&stream[..at], &stream[at..]] {
            let mut rest = piece;
            loop {
                let step = acc.next_frame(rest).unwrap();
                rest = &rest[step.consumed..];
                match step.frame { Some(f) => bodies.push(f.to_vec()), None => break }
            }
        }
        prop_assert_eq!(bodies.len(), 5);
        let ids: Vec<i32> = bodies[..3].iter().map(|b| {
            let f = RequestFrame::split(b).unwrap();
            let id = RpcRequestHeaderProto::decode(f.rpc_header).unwrap().call_id;
            f.check_call_id(id).unwrap();
            id
        }).collect();
        prop_assert_eq!(ids, vec![-3, call_id, -4]);
        let call = RequestFrame::split(&bodies[1]).unwrap();
        prop_assert_eq!(call.payload, Some(&payload[..]));
        let ok = ResponseFrame::split(&bodies[3]).unwrap();
        prop_assert_eq!(ok.payload, Some(&payload[..]));
        prop_assert_eq!(RpcResponseHeaderProto::decode(ok.header).unwrap().call_id, call_id as u32);
        let err = ResponseFrame::split(&bodies[4]).unwrap();
        prop_assert_eq!(err.payload, None);
        prop_assert_eq!(RpcResponseHeaderProto::decode(err.header).unwrap().status, 1);
    }
}

#[test]
fn success_frame_ignores_a_failure_in_the_header() {
    let failure = RpcFailure {
        status: RpcStatusProto::Fatal,
        exception_class_name: "E",
        error_msg: "m",
        error_detail: RpcErrorCodeProto::FatalUnknown,
    };
    let header = RpcResponseHeader {
        failure: Some(failure),
        ..RpcResponseHeader::success(1, &CLIENT_ID, 0)
    };
    let mut a = Vec::new();
    let mut b = Vec::new();
    success_response_frame(&mut a, &header, &b"x"[..]).unwrap();
    success_response_frame(
        &mut b,
        &RpcResponseHeader::success(1, &CLIENT_ID, 0),
        &b"x"[..],
    )
    .unwrap();
    assert_eq!(a, b);
    let h = RpcResponseHeaderProto::decode(ResponseFrame::split(body(&a)).unwrap().header).unwrap();
    assert_eq!((h.status, h.exception_class_name), (0, None));
}
