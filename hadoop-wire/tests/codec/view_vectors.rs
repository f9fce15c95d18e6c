//! Hand-made byte vectors for the tricky cases of the views.

use hadoop_wire::pb::hadoop::common::rpc_request_header_proto::OperationProto;
use hadoop_wire::pb::hadoop::common::rpc_response_header_proto::{
    RpcErrorCodeProto, RpcStatusProto,
};
use hadoop_wire::pb::hadoop::common::{IpcConnectionContextProto, RpcKindProto};
use hadoop_wire::pb::hadoop::hdfs::{PacketHeaderProto, StorageTypeProto};
use hadoop_wire::pb::hadoop::yarn::{ContainerStateProto, ExecutionTypeProto};
use hadoop_wire::reader::{DecodeError, Reader, RECURSION_LIMIT};
use hadoop_wire::view::hdfs::{LocatedBlockView, PacketHeader, PacketHeaderView};
use hadoop_wire::view::rpc::{RequestHeaderView, RpcRequestHeaderView, RpcResponseHeaderView};
use hadoop_wire::view::yarn::{ContainerStatusView, NodeHeartbeatRequestView};
use prost::Message;

const CLIENT_ID: [u8; 16] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15];
const CLIENT_PROTOCOL: &[u8] = b"org.apache.hadoop.hdfs.protocol.ClientProtocol";

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

fn missing(message: &'static str, field: &'static str) -> DecodeError {
    DecodeError::MissingRequired { message, field }
}

// ---------------------------------------------------------------------------------------
// RPC headers

#[test]
fn request_call_id_minus_3_is_zigzag_5() {
    // hadoop-wire.md A.9: kind 2, op 0, callId zigzag(-3) = 5, clientId, retry zigzag(-1) = 1
    let h = cat(&[
        &[0x08, 0x02, 0x10, 0x00, 0x18, 0x05, 0x22, 0x10],
        &CLIENT_ID,
        &[0x28, 0x01],
    ]);
    assert_eq!(h.len(), 26);
    let v = RpcRequestHeaderView::new(&h);
    v.validate().unwrap();
    assert_eq!(v.rpc_kind_raw(), Ok(Some(2)));
    assert_eq!(v.rpc_kind(), Ok(Some(RpcKindProto::RpcProtocolBuffer)));
    assert_eq!(v.rpc_op_raw(), Ok(Some(0)));
    assert_eq!(v.rpc_op(), Ok(Some(OperationProto::RpcFinalPacket)));
    assert_eq!(v.call_id(), Ok(-3));
    assert_eq!(v.client_id(), Ok(&CLIENT_ID[..]));
    assert_eq!(v.retry_count_opt(), Ok(Some(-1)));
    assert_eq!(v.state_id(), Ok(None));
}

#[test]
fn ping_call_id_minus_4_is_zigzag_7() {
    let h = cat(&[
        &[0x08, 0x02, 0x10, 0x00, 0x18, 0x07, 0x22, 0x10],
        &CLIENT_ID,
        &[0x28, 0x01],
    ]);
    let v = RpcRequestHeaderView::new(&h);
    v.validate().unwrap();
    assert_eq!(v.call_id(), Ok(-4));
}

#[test]
fn rpc_op_zero_present_vs_absent() {
    let present = [0x08, 0x02, 0x10, 0x00, 0x18, 0x00, 0x22, 0x00];
    let absent = [0x08, 0x02, 0x18, 0x00, 0x22, 0x00];
    let p = RpcRequestHeaderView::new(&present);
    let a = RpcRequestHeaderView::new(&absent);
    // Both are valid protobuf (rpcOp is optional); the server-level rule needs presence.
    p.validate().unwrap();
    a.validate().unwrap();
    assert_eq!(p.rpc_op_raw(), Ok(Some(0)));
    assert_eq!(a.rpc_op_raw(), Ok(None));
    assert_eq!(a.rpc_op(), Ok(None));
    // Absent retryCount has the proto2 default -1.
    assert_eq!(p.retry_count(), Ok(-1));
    assert_eq!(p.retry_count_opt(), Ok(None));
    // Empty clientId is present and empty.
    assert_eq!(p.client_id(), Ok(&[][..]));
}

#[test]
fn request_header_required_fields() {
    let no_call_id = [0x08, 0x02, 0x10, 0x00, 0x22, 0x00];
    let v = RpcRequestHeaderView::new(&no_call_id);
    assert_eq!(
        v.validate(),
        Err(missing("hadoop.common.RpcRequestHeaderProto", "callId"))
    );
    assert_eq!(
        v.call_id(),
        Err(missing("hadoop.common.RpcRequestHeaderProto", "callId"))
    );
    let no_client_id = [0x08, 0x02, 0x10, 0x00, 0x18, 0x00];
    let v = RpcRequestHeaderView::new(&no_client_id);
    assert_eq!(
        v.validate(),
        Err(missing("hadoop.common.RpcRequestHeaderProto", "clientId"))
    );
    assert_eq!(
        v.client_id(),
        Err(missing("hadoop.common.RpcRequestHeaderProto", "clientId"))
    );
}

#[test]
fn response_call_id_is_uint32() {
    // callId -1 as uint32: ff ff ff ff 0f; FATAL; FATAL_VERSION_MISMATCH (14)
    let h = [
        0x08, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x10, 0x02, 0x18, 0x09, 0x30, 0x0e,
    ];
    let v = RpcResponseHeaderView::new(&h);
    v.validate().unwrap();
    assert_eq!(v.call_id(), Ok(u32::MAX));
    assert_eq!(v.call_id_i32(), Ok(-1));
    assert_eq!(v.status(), Ok(RpcStatusProto::Fatal));
    assert_eq!(
        v.error_detail(),
        Ok(Some(RpcErrorCodeProto::FatalVersionMismatch))
    );
    // A Java int32 -1 written as a 10-byte varint also reads as u32::MAX (truncation).
    let wide = [
        0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x10, 0x00,
    ];
    assert_eq!(RpcResponseHeaderView::new(&wide).call_id_i32(), Ok(-1));
}

#[test]
fn response_success_example_from_a9() {
    let h = cat(&[
        &[0x08, 0x00, 0x10, 0x00, 0x18, 0x09, 0x3a, 0x10],
        &CLIENT_ID,
        &[0x40, 0x00, 0x48, 0xd2, 0x09],
    ]);
    let v = RpcResponseHeaderView::new(&h);
    v.validate().unwrap();
    assert_eq!(v.call_id(), Ok(0));
    assert_eq!(v.status(), Ok(RpcStatusProto::Success));
    assert_eq!(v.server_ipc_version_num(), Ok(Some(9)));
    assert_eq!(v.client_id(), Ok(Some(&CLIENT_ID[..])));
    assert_eq!(v.retry_count(), Ok(0));
    assert_eq!(v.state_id(), Ok(Some(1234)));
    assert_eq!(v.exception_class_name(), Ok(None));
}

#[test]
fn response_status_unknown_value_is_missing_like_java() {
    // status 7 is not an RpcStatusProto: Java files it as an unknown field, and the
    // required status is then missing.
    let h = [0x08, 0x01, 0x10, 0x07];
    let v = RpcResponseHeaderView::new(&h);
    assert_eq!(v.status_raw(), Ok(7));
    assert_eq!(
        v.status(),
        Err(missing("hadoop.common.RpcResponseHeaderProto", "status"))
    );
    assert_eq!(
        v.validate(),
        Err(missing("hadoop.common.RpcResponseHeaderProto", "status"))
    );
    // A known value followed by an unknown one: Java keeps the known one.
    let h = [0x08, 0x01, 0x10, 0x01, 0x10, 0x07];
    let v = RpcResponseHeaderView::new(&h);
    v.validate().unwrap();
    assert_eq!(v.status(), Ok(RpcStatusProto::Error));
    assert_eq!(v.status_raw(), Ok(7));
}

#[test]
fn worked_example_a9_frames() {
    // Connection-context frame (89 bytes).
    let header = cat(&[
        &[0x08, 0x02, 0x10, 0x00, 0x18, 0x05, 0x22, 0x10],
        &CLIENT_ID,
        &[0x28, 0x01],
    ]);
    let context = cat(&[
        &[0x12, 0x07, 0x0a, 0x05],
        b"alice",
        &[0x1a, 0x2e],
        CLIENT_PROTOCOL,
    ]);
    assert_eq!(context.len(), 0x39);
    let body = cat(&[
        &[header.len() as u8],
        &header,
        &[context.len() as u8],
        &context,
    ]);
    let frame = cat(&[&(body.len() as u32).to_be_bytes(), &body]);
    assert_eq!(frame.len(), 89);
    assert_eq!(&frame[..4], &[0, 0, 0, 0x55]);

    let mut r = Reader::new(&frame[4..]);
    let h = RpcRequestHeaderView::new(r.read_len().unwrap());
    h.validate().unwrap();
    assert_eq!(h.call_id(), Ok(-3));
    assert_eq!(h.retry_count(), Ok(-1));
    let ctx = IpcConnectionContextProto::decode(r.read_len().unwrap()).unwrap();
    assert_eq!(
        ctx.user_info.unwrap().effective_user.as_deref(),
        Some("alice")
    );
    assert_eq!(
        ctx.protocol.as_deref().map(str::as_bytes),
        Some(CLIENT_PROTOCOL)
    );
    assert!(r.is_empty());

    // getFileInfo("/tmp") call frame (102 bytes).
    let header = cat(&[
        &[0x08, 0x02, 0x10, 0x00, 0x18, 0x00, 0x22, 0x10],
        &CLIENT_ID,
        &[0x28, 0x00],
    ]);
    let rh = cat(&[
        &[0x0a, 0x0b],
        b"getFileInfo",
        &[0x12, 0x2e],
        CLIENT_PROTOCOL,
        &[0x18, 0x01],
    ]);
    assert_eq!(rh.len(), 0x3f);
    let req = cat(&[&[0x0a, 0x04], b"/tmp"]);
    let body = cat(&[
        &[header.len() as u8],
        &header,
        &[rh.len() as u8],
        &rh,
        &[req.len() as u8],
        &req,
    ]);
    assert_eq!(body.len(), 0x62);
    let mut r = Reader::new(&body);
    let h = RpcRequestHeaderView::new(r.read_len().unwrap());
    h.validate().unwrap();
    assert_eq!((h.call_id(), h.retry_count()), (Ok(0), Ok(0)));
    let rh = RequestHeaderView::new(r.read_len().unwrap());
    rh.validate().unwrap();
    assert_eq!(rh.method_name(), Ok("getFileInfo"));
    assert_eq!(
        rh.declaring_class_protocol_name_bytes(),
        Ok(CLIENT_PROTOCOL)
    );
    assert_eq!(rh.client_protocol_version(), Ok(1));
    let gfi = hadoop_wire::pb::hadoop::hdfs::GetFileInfoRequestProto::decode(r.read_len().unwrap())
        .unwrap();
    assert_eq!(gfi.src, "/tmp");
    assert!(r.is_empty());

    // Ping frame.
    let ping = cat(&[
        &[
            0, 0, 0, 0x1b, 0x1a, 0x08, 0x02, 0x10, 0x00, 0x18, 0x07, 0x22, 0x10,
        ],
        &CLIENT_ID,
        &[0x28, 0x01],
    ]);
    let mut r = Reader::new(&ping[4..]);
    assert_eq!(ping.len() - 4, 0x1b);
    assert_eq!(
        RpcRequestHeaderView::new(r.read_len().unwrap()).call_id(),
        Ok(-4)
    );
    assert!(r.is_empty());
}

#[test]
fn request_header_needs_all_three_fields() {
    let only_two = cat(&[&[0x0a, 0x01], b"m", &[0x12, 0x01], b"p"]);
    let v = RequestHeaderView::new(&only_two);
    assert_eq!(
        v.validate(),
        Err(missing(
            "hadoop.common.RequestHeaderProto",
            "clientProtocolVersion"
        ))
    );
    assert_eq!(v.method_name(), Ok("m"));
    assert_eq!(
        v.client_protocol_version(),
        Err(missing(
            "hadoop.common.RequestHeaderProto",
            "clientProtocolVersion"
        ))
    );
    assert_eq!(
        RequestHeaderView::new(&[]).validate(),
        Err(missing("hadoop.common.RequestHeaderProto", "methodName"))
    );
}

// ---------------------------------------------------------------------------------------
// Empty payload and proto2 defaults

#[test]
fn empty_payload_00() {
    // A SUCCESS response with an empty message ends with the length byte 00.
    let mut r = Reader::new(&[0x00]);
    let body = r.read_len().unwrap();
    assert!(body.is_empty() && r.is_empty());
    let hb = NodeHeartbeatRequestView::new(body);
    hb.validate().unwrap();
    assert_eq!(hb.node_status(), Ok(None));
    assert_eq!(hb.token_sequence_no(), Ok(None));
    // An empty ContainerStatusProto reads as all defaults.
    let cs = ContainerStatusView::new(body);
    cs.validate().unwrap();
    assert_eq!(cs.exit_status(), Ok(-1000));
    assert_eq!(cs.exit_status_opt(), Ok(None));
    assert_eq!(cs.execution_type(), Ok(ExecutionTypeProto::Guaranteed));
    assert_eq!(cs.execution_type_raw(), Ok(None));
    assert_eq!(cs.diagnostics(), Ok("N/A"));
    assert_eq!(cs.diagnostics_opt(), Ok(None));
    assert_eq!(cs.state(), Ok(None));
    let s = cs.summary().unwrap();
    assert_eq!(
        (s.exit_status, s.execution_type, s.state),
        (-1000, ExecutionTypeProto::Guaranteed, None)
    );
}

// ---------------------------------------------------------------------------------------
// Container status: enums, last-wins, duplicates, wire types, unknown fields

#[test]
fn container_status_enum_semantics() {
    // state 2 then 9 (unknown); executionType 2 then 5 (unknown); exit_status -1 (10 bytes)
    let b = [
        0x10, 0x02, 0x10, 0x09, 0x30, 0x02, 0x30, 0x05, 0x20, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0x01,
    ];
    let v = ContainerStatusView::new(&b);
    v.validate().unwrap();
    assert_eq!(v.state_raw(), Ok(Some(9)));
    assert_eq!(v.state(), Ok(Some(ContainerStateProto::CRunning)));
    assert_eq!(v.execution_type_raw(), Ok(Some(5)));
    assert_eq!(v.execution_type(), Ok(ExecutionTypeProto::Opportunistic));
    assert_eq!(v.exit_status(), Ok(-1));
    let s = v.summary().unwrap();
    assert_eq!(s.state_raw, Some(9));
    assert_eq!(s.state, Some(ContainerStateProto::CRunning));
    assert_eq!(s.execution_type, ExecutionTypeProto::Opportunistic);
    // Only unknown: typed state absent, execution type falls back to its default.
    let b = [0x10, 0x09, 0x30, 0x05];
    let v = ContainerStatusView::new(&b);
    assert_eq!(v.state(), Ok(None));
    assert_eq!(v.execution_type(), Ok(ExecutionTypeProto::Guaranteed));
}

#[test]
fn last_scalar_wins_and_duplicate_messages_are_refused() {
    // exit_status 1 then 2; container_id twice (id 1, then id 2)
    let b = [
        0x20, 0x01, 0x20, 0x02, 0x0a, 0x02, 0x18, 0x01, 0x0a, 0x02, 0x18, 0x02,
    ];
    let v = ContainerStatusView::new(&b);
    assert_eq!(v.exit_status(), Ok(2));
    assert_eq!(v.container_id().unwrap().unwrap().id(), Ok(Some(2)));
    assert_eq!(
        v.validate(),
        Err(DecodeError::DuplicateMessage {
            message: "hadoop.yarn.ContainerStatusProto",
            field: "container_id"
        })
    );
}

#[test]
fn wrong_wire_type_on_known_field() {
    // exit_status (4) sent as fixed32
    let b = [0x25, 1, 0, 0, 0];
    let v = ContainerStatusView::new(&b);
    let e = DecodeError::WrongWireType {
        message: "hadoop.yarn.ContainerStatusProto",
        field: "exit_status",
        actual: hadoop_wire::reader::WireType::Fixed32,
    };
    assert_eq!(v.validate(), Err(e.clone()));
    assert_eq!(v.exit_status(), Err(e.clone()));
    assert_eq!(v.summary(), Err(e));
}

#[test]
fn unknown_fields_of_every_wire_type_are_skipped() {
    let b = [
        0x20, 0x07, // exit_status 7
        0xc8, 0x01, 0x05, // field 25 varint
        0xd1, 0x01, 1, 2, 3, 4, 5, 6, 7, 8, // field 26 fixed64
        0xda, 0x01, 0x02, 0xaa, 0xbb, // field 27 len
        0xe5, 0x01, 1, 2, 3, 4, // field 28 fixed32
        0xeb, 0x01, // field 29 start group
        0x08, 0x01, 0xeb, 0x01, 0xec, 0x01, // nested: field 1 varint, group 29 { } end 29
        0xec, 0x01, // end group 29
        0x30, 0x02, // executionType OPPORTUNISTIC
    ];
    let v = ContainerStatusView::new(&b);
    v.validate().unwrap();
    assert_eq!(v.exit_status(), Ok(7));
    assert_eq!(v.execution_type(), Ok(ExecutionTypeProto::Opportunistic));
    let s = v.summary().unwrap();
    assert_eq!(
        (s.exit_status, s.execution_type),
        (7, ExecutionTypeProto::Opportunistic)
    );
}

#[test]
fn malformed_groups_are_errors() {
    // start group 29, end group 30
    let b = [0xeb, 0x01, 0xf4, 0x01];
    let v = ContainerStatusView::new(&b);
    assert_eq!(
        v.validate(),
        Err(DecodeError::GroupMismatch {
            expected: Some(29),
            found: 30
        })
    );
    assert_eq!(
        v.exit_status(),
        Err(DecodeError::GroupMismatch {
            expected: Some(29),
            found: 30
        })
    );
    // stray end group
    assert_eq!(
        ContainerStatusView::new(&[0xec, 0x01]).validate(),
        Err(DecodeError::GroupMismatch {
            expected: None,
            found: 29
        })
    );
    // unterminated
    assert_eq!(
        ContainerStatusView::new(&[0xeb, 0x01, 0x08, 0x01]).validate(),
        Err(DecodeError::Truncated)
    );
    // nested deeper than the limit
    let deep: Vec<u8> = std::iter::repeat_n([0xeb, 0x01], 150).flatten().collect();
    assert_eq!(
        ContainerStatusView::new(&deep).validate(),
        Err(DecodeError::DepthLimit(RECURSION_LIMIT))
    );
}

#[test]
fn nested_required_field_fails_the_whole_heartbeat() {
    // heartbeat { node_status { containersStatuses { capability { resource_value_map { value 5 } } } } }
    let ri = [0x10, 0x05]; // no key
    let res = cat(&[&[0x1a, ri.len() as u8], &ri]);
    let cs = cat(&[&[0x2a, res.len() as u8], &res]);
    let ns = cat(&[&[0x1a, cs.len() as u8], &cs]);
    let hb = cat(&[&[0x0a, ns.len() as u8], &ns]);
    let v = NodeHeartbeatRequestView::new(&hb);
    assert_eq!(
        v.validate(),
        Err(missing("hadoop.yarn.ResourceInformationProto", "key"))
    );
    // The hot fields are still readable without validate (the capability is skipped).
    let status = v
        .node_status()
        .unwrap()
        .unwrap()
        .containers_statuses()
        .next()
        .unwrap()
        .unwrap();
    assert_eq!(status.exit_status(), Ok(-1000));
}

#[test]
fn truncated_and_overlong_inputs() {
    // length claims more than remains
    let b = [0x0a, 0x05, 0x18];
    assert_eq!(
        ContainerStatusView::new(&b).validate(),
        Err(DecodeError::LengthOutOfBounds {
            len: 5,
            remaining: 1
        })
    );
    // 11-byte varint
    let b = [
        0x20, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00,
    ];
    assert_eq!(
        ContainerStatusView::new(&b).exit_status(),
        Err(DecodeError::VarintOverflow)
    );
    // wire type 7, field 0
    assert_eq!(
        ContainerStatusView::new(&[0x27]).validate(),
        Err(DecodeError::BadWireType(7))
    );
    assert_eq!(
        ContainerStatusView::new(&[0x00, 0x00]).validate(),
        Err(DecodeError::BadFieldNumber(0))
    );
}

// ---------------------------------------------------------------------------------------
// HDFS

fn extended_block() -> Vec<u8> {
    cat(&[&[0x0a, 0x02], b"bp", &[0x10, 0x2a, 0x18, 0x07]])
}

fn token() -> Vec<u8> {
    [0x0a, 0x00, 0x12, 0x00, 0x1a, 0x00, 0x22, 0x00].to_vec()
}

#[test]
fn located_block_packed_and_unpacked_scalars() {
    let eb = extended_block();
    let tok = token();
    let b = cat(&[
        &[0x0a, eb.len() as u8],
        &eb,
        &[0x10, 0x00], // offset
        &[0x20, 0x00], // corrupt
        &[0x2a, tok.len() as u8],
        &tok,
        &[0x32, 0x02, 0x01, 0x00],       // isCached packed [true, false]
        &[0x30, 0x01],                   // isCached unpacked true
        &[0x38, 0x02],                   // storageTypes unpacked SSD
        &[0x3a, 0x03, 0x01, 0x63, 0x04], // storageTypes packed [DISK, 99 (unknown), RAM_DISK]
    ]);
    let v = LocatedBlockView::new(&b);
    v.validate().unwrap();
    let cached: Vec<bool> = v.is_cached().map(Result::unwrap).collect();
    assert_eq!(cached, [true, false, true]);
    let raw: Vec<i32> = v.storage_types_raw().map(Result::unwrap).collect();
    assert_eq!(raw, [2, 1, 99, 4]);
    let typed: Vec<StorageTypeProto> = v.storage_types().map(Result::unwrap).collect();
    assert_eq!(
        typed,
        [
            StorageTypeProto::Ssd,
            StorageTypeProto::Disk,
            StorageTypeProto::RamDisk
        ]
    );
    assert_eq!(v.b().unwrap().pool_id(), Ok("bp"));
    assert_eq!(v.b().unwrap().block_id(), Ok(42));
    assert_eq!(v.b().unwrap().num_bytes(), Ok(0));
    // prost reads the same repeated values
    let p = hadoop_wire::pb::hadoop::hdfs::LocatedBlockProto::decode(&b[..]).unwrap();
    assert_eq!(p.is_cached, cached);
    assert_eq!(p.storage_types, raw);
}

#[test]
fn located_block_required_fields() {
    let eb = extended_block();
    // no blockToken
    let b = cat(&[&[0x0a, eb.len() as u8], &eb, &[0x10, 0x00, 0x20, 0x00]]);
    let v = LocatedBlockView::new(&b);
    assert_eq!(
        v.validate(),
        Err(missing("hadoop.hdfs.LocatedBlockProto", "blockToken"))
    );
    assert_eq!(
        v.block_token(),
        Err(missing("hadoop.hdfs.LocatedBlockProto", "blockToken"))
    );
    // ExtendedBlockProto without generationStamp
    let eb = cat(&[&[0x0a, 0x02], b"bp", &[0x10, 0x2a]]);
    let tok = token();
    let b = cat(&[
        &[0x0a, eb.len() as u8],
        &eb,
        &[0x10, 0x00, 0x20, 0x00, 0x2a, tok.len() as u8],
        &tok,
    ]);
    let v = LocatedBlockView::new(&b);
    assert_eq!(
        v.validate(),
        Err(missing("hadoop.hdfs.ExtendedBlockProto", "generationStamp"))
    );
    // a packed fixed-width body of the wrong size (isCached is varint: a bad varint instead)
    let b = [0x32, 0x01, 0x80];
    assert_eq!(
        LocatedBlockView::new(&b).is_cached().next(),
        Some(Err(DecodeError::Truncated))
    );
}

#[test]
fn packet_header_sizes_and_required_fields() {
    let p = PacketHeaderProto {
        offset_in_block: 65536,
        seqno: 3,
        last_packet_in_block: false,
        data_len: 65536,
        sync_block: None,
    };
    let b = p.encode_to_vec();
    assert_eq!(b.len(), 25);
    assert_eq!(b[0], 0x09); // field 1, fixed64
    assert_eq!(b[9], 0x11); // field 2, fixed64
    assert_eq!(&b[18..20], &[0x18, 0x00]); // field 3 bool
    assert_eq!(b[20], 0x25); // field 4, fixed32
    let v = PacketHeaderView::new(&b);
    v.validate().unwrap();
    assert_eq!(
        v.read(),
        Ok(PacketHeader {
            offset_in_block: 65536,
            seqno: 3,
            last_packet_in_block: false,
            data_len: 65536,
            sync_block: false
        })
    );
    let with_sync = PacketHeaderProto {
        sync_block: Some(true),
        ..p
    }
    .encode_to_vec();
    assert_eq!(with_sync.len(), 27);
    assert_eq!(PacketHeaderView::new(&with_sync).sync_block(), Ok(true));
    // last packet: dataLen 0, lastPacketInBlock true; drop dataLen -> missing
    let last = PacketHeaderProto {
        last_packet_in_block: true,
        data_len: 0,
        ..p
    }
    .encode_to_vec();
    let v = PacketHeaderView::new(&last[..20]);
    assert_eq!(
        v.validate(),
        Err(missing("hadoop.hdfs.PacketHeaderProto", "dataLen"))
    );
    assert_eq!(
        v.read(),
        Err(missing("hadoop.hdfs.PacketHeaderProto", "dataLen"))
    );
    assert_eq!(v.last_packet_in_block(), Ok(true));
}
