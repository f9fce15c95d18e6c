//! Frames with the header views: `RequestFrame::parse`, `ResponseFrame::parse`,
//! `RawPacket::parse` and the packet sequence rules.

use hadoop_wire::encode::*;
use hadoop_wire::frame::*;
use hadoop_wire::pb::hadoop::common::rpc_response_header_proto::{
    RpcErrorCodeProto, RpcStatusProto,
};
use hadoop_wire::pb::hadoop::hdfs::PacketHeaderProto;
use hadoop_wire::view::hdfs::PacketHeader;
use hadoop_wire::{Error, FrameError};
use prost::Message;

const CID: [u8; 16] = [9; 16];

fn body(frame: &[u8]) -> &[u8] {
    match FrameDecoder::default().decode(frame).unwrap() {
        Decoded::Frame(r) => &frame[r],
        other => panic!("{other:?}"),
    }
}

fn delimited(parts: &[&[u8]]) -> Vec<u8> {
    let mut v = Vec::new();
    for p in parts {
        prost::encoding::encode_varint(p.len() as u64, &mut v);
        v.extend_from_slice(p);
    }
    v
}

#[test]
fn request_parse_each_kind() {
    let rh = RequestHeader {
        method_name: "nodeHeartbeat",
        declaring_class_protocol_name: "org.apache.hadoop.yarn.server.api.ResourceTrackerPB",
        client_protocol_version: 1,
    };
    let mut buf = Vec::new();
    call_frame(
        &mut buf,
        &RpcRequestHeader::call(42, &CID, 0),
        &rh,
        &b"\x08\x01"[..],
    )
    .unwrap();
    let (f, id) = RequestFrame::parse(body(&buf)).unwrap();
    assert_eq!(id, 42);
    let h = f.rpc_header_view();
    assert_eq!(
        (h.client_id().unwrap(), h.retry_count().unwrap()),
        (&CID[..], 0)
    );
    assert_eq!(h.rpc_op_raw().unwrap(), Some(0));
    let r = f.request_header_view().unwrap();
    assert_eq!(r.method_name().unwrap(), "nodeHeartbeat");
    assert_eq!(r.client_protocol_version().unwrap(), 1);
    assert_eq!(f.payload, Some(&b"\x08\x01"[..]));

    buf.clear();
    connection_context_frame(&mut buf, &CID, &ConnectionContext::default()).unwrap();
    let (f, id) = RequestFrame::parse(body(&buf)).unwrap();
    assert_eq!(
        (id, f.request_header_view(), f.payload),
        (-3, None, Some(&[][..]))
    );

    buf.clear();
    ping_frame(&mut buf, &CID).unwrap();
    assert_eq!(RequestFrame::parse(body(&buf)).unwrap().1, -4);
}

#[test]
fn request_parse_rejects_mismatch_and_bad_headers() {
    let mut hdr = Vec::new();
    RpcRequestHeader::call(-3, &CID, -1).encode_body(&mut hdr);
    // A context header followed by three parts.
    let b = delimited(&[&hdr, b"", b""]);
    assert!(matches!(
        RequestFrame::parse(&b),
        Err(Error::Frame(FrameError::Shape { call_id: -3, .. }))
    ));
    // A call id of 5 with no RequestHeader.
    let mut hdr = Vec::new();
    RpcRequestHeader::call(5, &CID, 0).encode_body(&mut hdr);
    let b = delimited(&[&hdr, b""]);
    assert!(matches!(
        RequestFrame::parse(&b),
        Err(Error::Frame(FrameError::Shape { call_id: 5, .. }))
    ));
    // SASL's -33 is refused whatever the shape.
    let mut hdr = Vec::new();
    RpcRequestHeader::call(-33, &CID, -1).encode_body(&mut hdr);
    assert!(RequestFrame::parse(&delimited(&[&hdr, b""])).is_err());
    // A header without the required callId: a decode error, not a panic.
    let b = delimited(&[b"\x08\x02\x10\x00\x22\x00", b""]);
    assert!(matches!(RequestFrame::parse(&b), Err(Error::Decode(_))));
    // A header that is not protobuf.
    let b = delimited(&[b"\xff\xff", b""]);
    assert!(matches!(RequestFrame::parse(&b), Err(Error::Decode(_))));
}

#[test]
fn response_parse() {
    let mut buf = Vec::new();
    let h = RpcResponseHeader {
        state_id: Some(77),
        ..RpcResponseHeader::success(3, &CID, 1)
    };
    success_response_frame(&mut buf, &h, &b"\x08\x07"[..]).unwrap();
    let (f, v) = ResponseFrame::parse(body(&buf)).unwrap();
    assert_eq!(f.payload, Some(&b"\x08\x07"[..]));
    assert_eq!(
        (v.call_id().unwrap(), v.status().unwrap()),
        (3, RpcStatusProto::Success)
    );
    assert_eq!(
        (v.state_id().unwrap(), v.retry_count().unwrap()),
        (Some(77), 1)
    );

    buf.clear();
    let failure = RpcFailure {
        status: RpcStatusProto::Fatal,
        exception_class_name: "org.apache.hadoop.ipc.IpcException",
        error_msg: "bad",
        error_detail: RpcErrorCodeProto::FatalInvalidRpcHeader,
    };
    error_response_frame(&mut buf, &RpcResponseHeader::success(-1, &[], -1), &failure).unwrap();
    let (f, v) = ResponseFrame::parse(body(&buf)).unwrap();
    assert_eq!(f.payload, None);
    assert_eq!(v.call_id_i32().unwrap(), -1);
    assert_eq!(
        v.error_detail().unwrap(),
        Some(RpcErrorCodeProto::FatalInvalidRpcHeader)
    );
    assert_eq!(
        v.exception_class_name().unwrap(),
        Some(failure.exception_class_name)
    );

    // SUCCESS without payload, and FATAL with one: shape errors.
    let mut hdr = Vec::new();
    RpcResponseHeader::success(3, &CID, 0).encode_body(&mut hdr);
    assert!(matches!(
        ResponseFrame::parse(&delimited(&[&hdr])),
        Err(Error::Frame(FrameError::Shape { call_id: 3, .. }))
    ));
    let mut hdr = Vec::new();
    RpcResponseHeader {
        failure: Some(failure),
        ..RpcResponseHeader::success(-1, &[], -1)
    }
    .encode_body(&mut hdr);
    assert!(matches!(
        ResponseFrame::parse(&delimited(&[&hdr, b""])),
        Err(Error::Frame(FrameError::Shape { call_id: -1, .. }))
    ));
    // Missing status.
    assert!(matches!(
        ResponseFrame::parse(&delimited(&[b"\x08\x01", b""])),
        Err(Error::Decode(_))
    ));
}

fn wire_packet(h: &PacketHeaderProto, checksums: &[u8], data: &[u8]) -> Vec<u8> {
    use zerocopy::IntoBytes;
    let hb = h.encode_to_vec();
    let mut v = PacketPrefix::new((4 + checksums.len() + data.len()) as u32, hb.len() as u16)
        .as_bytes()
        .to_vec();
    v.extend_from_slice(&hb);
    v.extend_from_slice(checksums);
    v.extend_from_slice(data);
    v
}

#[test]
fn packet_parse_with_header_view() {
    let data = vec![5u8; 1500];
    let crcs = [0u8; 12];
    let h = PacketHeaderProto {
        offset_in_block: 1024,
        seqno: 0,
        last_packet_in_block: false,
        data_len: 1500,
        sync_block: None,
    };
    let last = PacketHeaderProto {
        offset_in_block: 2524,
        seqno: 1,
        last_packet_in_block: true,
        data_len: 0,
        sync_block: Some(false),
    };
    assert_eq!(h.encoded_len(), 25);
    assert_eq!(last.encoded_len(), 27);
    let mut wire = wire_packet(&h, &crcs, &data);
    wire.extend(wire_packet(&last, &[], &[]));

    let d = PacketDecoder::default();
    let PacketDecoded::Packet { packet, consumed } = d.decode(&wire).unwrap() else {
        panic!()
    };
    let (hdr, p) = packet.parse(512, 4).unwrap();
    assert_eq!(
        hdr,
        PacketHeader {
            offset_in_block: 1024,
            seqno: 0,
            last_packet_in_block: false,
            data_len: 1500,
            sync_block: false
        }
    );
    assert_eq!((p.checksums.len(), p.data), (12, &data[..]));
    check_packet_sequence(&hdr, -1).unwrap();
    let PacketDecoded::Packet { packet, .. } = d.decode(&wire[consumed..]).unwrap() else {
        panic!()
    };
    let (hdr2, p) = packet.parse(512, 4).unwrap();
    assert!(hdr2.last_packet_in_block && p.data.is_empty());
    check_packet_sequence(&hdr2, hdr.seqno).unwrap();
    assert!(check_packet_sequence(&hdr2, 5).is_err());
    assert!(check_packet_sequence(&PacketHeader { data_len: 0, ..hdr }, -1).is_err());
    assert!(check_packet_sequence(
        &PacketHeader {
            data_len: 1,
            ..hdr2
        },
        0
    )
    .is_err());
    assert!(check_packet_sequence(
        &PacketHeader {
            seqno: i64::MIN,
            ..hdr
        },
        i64::MAX
    )
    .is_err());

    // A header claiming more data than the packet holds, and one with a wrong chunking.
    let bad = wire_packet(
        &PacketHeaderProto {
            data_len: 1513,
            ..h
        },
        &crcs,
        &data,
    );
    let PacketDecoded::Packet { packet, .. } = d.decode(&bad).unwrap() else {
        panic!()
    };
    assert!(matches!(
        packet.parse(512, 4),
        Err(Error::Frame(FrameError::PacketDataLen {
            data_len: 1513,
            payload: 1512
        }))
    ));
    let PacketDecoded::Packet { packet, .. } = d.decode(&wire).unwrap() else {
        panic!()
    };
    assert!(matches!(
        packet.parse(1024, 4),
        Err(Error::Frame(FrameError::PacketChecksumLen {
            got: 12,
            expected: 8,
            ..
        }))
    ));
    // A header missing dataLen.
    let mut hb = h.encode_to_vec();
    hb.truncate(20);
    let raw = RawPacket {
        header: &hb,
        body: &[],
    };
    assert!(matches!(raw.parse(512, 4), Err(Error::Decode(_))));
}
