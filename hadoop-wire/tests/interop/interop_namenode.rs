//! Interop smoke test against a real Hadoop 3.5 NameNode (peer `hdfs` mode): a raw Hadoop IPC
//! `getFileInfo("/")` built only with this crate's encoders, sent over a plain TCP socket, and
//! the response read back with this crate's frame splitter and views.
//!
//! This is the first proof that our bytes are Hadoop's bytes: the preamble, the connection
//! context (callId −3, no reply), a call frame with rpcOp present, and a response header whose
//! callId, status, version and stateId we read with the views.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use hadoop_wire::encode::{self, ConnectionContext, Proto, RequestHeader, RpcRequestHeader};
use hadoop_wire::frame::ResponseFrame;
use hadoop_wire::pb::hadoop::common::rpc_response_header_proto::RpcStatusProto;
use hadoop_wire::pb::hadoop::hdfs::{
    hdfs_file_status_proto::FileType, GetBlockLocationsRequestProto,
    GetBlockLocationsResponseProto, GetFileInfoRequestProto, GetFileInfoResponseProto,
};
use peer_harness::{Mode, Shared};
use prost::Message;
use prost_reflect::{DescriptorPool, DynamicMessage, Value};

const CLIENT_PROTOCOL: &str = "org.apache.hadoop.hdfs.protocol.ClientProtocol";
static HDFS: Shared = Shared::new(Mode::Hdfs, &[]);

/// Reads one response frame (length prefix included) with a 16 MiB cap.
fn read_frame(s: &mut TcpStream) -> Vec<u8> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).expect("response length");
    let n = u32::from_be_bytes(len) as usize;
    assert!(n < 16 << 20, "response frame of {n} bytes");
    let mut body = vec![0u8; n];
    s.read_exact(&mut body).expect("response body");
    body
}

fn call(s: &mut TcpStream, client_id: &[u8], call_id: i32, src: &str) -> Vec<u8> {
    let mut out = Vec::new();
    encode::call_frame(
        &mut out,
        &RpcRequestHeader::call(call_id, client_id, 0),
        &RequestHeader {
            method_name: "getFileInfo",
            declaring_class_protocol_name: CLIENT_PROTOCOL,
            client_protocol_version: 1,
        },
        &Proto(&GetFileInfoRequestProto { src: src.into() }),
    )
    .expect("encode call");
    s.write_all(&out).expect("send call");
    read_frame(s)
}

#[test]
fn raw_getfileinfo_of_root_is_a_directory_with_a_state_id() {
    let peer = HDFS
        .lock()
        .expect("hdfs peer (see the launcher log in the error)");
    let addr = peer.namenode_addr().expect("NameNode address");
    let mut s = TcpStream::connect(addr).expect("connect to the NameNode");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let client_id: [u8; 16] = *b"hotpath-interop!";

    // Preamble and connection context in one write, as Java does; the server answers neither.
    let mut out = Vec::new();
    encode::preamble(&mut out, 0);
    encode::connection_context_frame(
        &mut out,
        &client_id,
        &ConnectionContext {
            effective_user: Some("hotpath"),
            real_user: None,
            protocol: Some(CLIENT_PROTOCOL),
        },
    )
    .expect("encode context");
    s.write_all(&out).expect("send preamble and context");

    let body = call(&mut s, &client_id, 0, "/");
    let frame = ResponseFrame::split(&body).expect("response frame splits");
    let hdr = frame.header_view();
    hdr.validate().expect("response header is well formed");
    assert_eq!(hdr.call_id().unwrap(), 0);
    assert_eq!(hdr.status().unwrap(), RpcStatusProto::Success);
    assert_eq!(hdr.server_ipc_version_num().unwrap(), Some(9));
    assert_eq!(hdr.client_id().unwrap(), Some(&client_id[..]));
    let state_id = hdr
        .state_id()
        .unwrap()
        .expect("dfs.namenode.state.context.enabled=true puts a stateId on every response");
    assert!(state_id > 0, "stateId {state_id}");

    let payload = frame.payload.expect("a SUCCESS response carries a payload");
    let resp = GetFileInfoResponseProto::decode(payload).expect("GetFileInfoResponseProto");
    let fs = resp.fs.expect("/ exists");
    assert_eq!(fs.file_type, FileType::IsDir as i32);

    // A second call on the same connection: a missing path is an absent `fs`, not an error.
    let body = call(&mut s, &client_id, 1, "/no/such/path");
    let frame = ResponseFrame::split(&body).expect("second response");
    assert_eq!(frame.header_view().call_id().unwrap(), 1);
    assert_eq!(
        frame.header_view().status().unwrap(),
        RpcStatusProto::Success
    );
    let payload = frame.payload.expect("payload");
    let resp = GetFileInfoResponseProto::decode(payload).expect("GetFileInfoResponseProto");
    assert!(resp.fs.is_none(), "{resp:?}");
    let second_state = frame.header_view().state_id().unwrap().expect("stateId");
    assert!(second_state >= state_id);
}

#[test]
fn a_call_to_an_unknown_protocol_gets_an_error_and_the_connection_stays_open() {
    let peer = HDFS.lock().expect("hdfs peer");
    let addr = peer.namenode_addr().expect("NameNode address");
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let client_id = [7u8; 16];
    let mut out = Vec::new();
    encode::preamble(&mut out, 0);
    encode::connection_context_frame(
        &mut out,
        &client_id,
        &ConnectionContext {
            effective_user: Some("hotpath"),
            real_user: None,
            protocol: Some(CLIENT_PROTOCOL),
        },
    )
    .unwrap();
    encode::call_frame(
        &mut out,
        &RpcRequestHeader::call(5, &client_id, 0),
        &RequestHeader {
            method_name: "getFileInfo",
            declaring_class_protocol_name: "org.example.NoSuchProtocol",
            client_protocol_version: 1,
        },
        &Proto(&GetFileInfoRequestProto { src: "/".into() }),
    )
    .unwrap();
    s.write_all(&out).unwrap();
    let body = read_frame(&mut s);
    let frame = ResponseFrame::split(&body).expect("error frame");
    let hdr = frame.header_view();
    assert_eq!(hdr.call_id().unwrap(), 5);
    assert_eq!(hdr.status().unwrap(), RpcStatusProto::Error);
    let class = hdr.exception_class_name().unwrap().unwrap_or_default();
    assert!(class.contains("RpcNoSuchProtocolException"), "{class}");
    eprintln!(
        "unknown protocol → {class}, detail {:?}",
        hdr.error_detail().unwrap()
    );
    assert!(frame.payload.is_none());
    // The connection is still usable.
    let body = call(&mut s, &client_id, 6, "/");
    let frame = ResponseFrame::split(&body).expect("frame");
    assert_eq!(
        frame.header_view().status().unwrap(),
        RpcStatusProto::Success
    );
}

/// Every field number below `msg` that our descriptors do not know, as `path.#number`.
fn unknown_fields(msg: &DynamicMessage, path: &str, out: &mut Vec<String>) {
    for u in msg.unknown_fields() {
        out.push(format!("{path}.#{}", u.number()));
    }
    for (f, v) in msg.fields() {
        let at = format!("{path}.{}", f.name());
        match v {
            Value::Message(m) => unknown_fields(m, &at, out),
            Value::List(items) => {
                for (i, item) in items.iter().enumerate() {
                    if let Value::Message(m) = item {
                        unknown_fields(m, &format!("{at}[{i}]"), out);
                    }
                }
            }
            _ => {}
        }
    }
}

/// A real GetBlockLocations response holds no field our `.proto` files lack (so `hotpath decode`,
/// which decodes with the same descriptor set, prints all of it), and it carries the DataNodes'
/// `softwareVersion`, the field `proto_vs_hadoop` found missing.
#[test]
fn a_real_get_block_locations_response_has_no_field_we_do_not_know() {
    let mut peer = HDFS.lock().expect("hdfs peer");
    peer.command("write /proto-fields 1000")
        .expect("write a one-block file");
    let addr = peer.namenode_addr().expect("NameNode address");
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let client_id = *b"hotpath-fields!!";
    let mut out = Vec::new();
    encode::preamble(&mut out, 0);
    encode::connection_context_frame(
        &mut out,
        &client_id,
        &ConnectionContext {
            effective_user: Some("hotpath"),
            real_user: None,
            protocol: Some(CLIENT_PROTOCOL),
        },
    )
    .unwrap();
    encode::call_frame(
        &mut out,
        &RpcRequestHeader::call(0, &client_id, 0),
        &RequestHeader {
            method_name: "getBlockLocations",
            declaring_class_protocol_name: CLIENT_PROTOCOL,
            client_protocol_version: 1,
        },
        &Proto(&GetBlockLocationsRequestProto {
            src: "/proto-fields".into(),
            offset: 0,
            length: 1000,
        }),
    )
    .unwrap();
    s.write_all(&out).unwrap();
    let body = read_frame(&mut s);
    let frame = ResponseFrame::split(&body).expect("response frame");
    assert_eq!(
        frame.header_view().status().unwrap(),
        RpcStatusProto::Success
    );
    let payload = frame.payload.expect("payload");

    let pool = DescriptorPool::decode(hadoop_wire::pb::DESCRIPTOR_SET).expect("descriptor set");
    let mut unknown = Vec::new();
    for (name, bytes) in [
        ("hadoop.common.RpcResponseHeaderProto", frame.header),
        ("hadoop.hdfs.GetBlockLocationsResponseProto", payload),
    ] {
        let desc = pool.get_message_by_name(name).expect(name);
        let msg = DynamicMessage::decode(desc, bytes).expect(name);
        unknown_fields(&msg, name, &mut unknown);
    }
    assert!(
        unknown.is_empty(),
        "fields Hadoop 3.5 sent that hadoop-wire/proto lacks: {unknown:?}"
    );

    let resp = GetBlockLocationsResponseProto::decode(payload).expect("response");
    let blocks = resp.locations.expect("the file exists").blocks;
    assert_eq!(blocks.len(), 1, "{blocks:?}");
    assert!(!blocks[0].locs.is_empty(), "{:?}", blocks[0]);
    for dn in &blocks[0].locs {
        assert_eq!(dn.software_version.as_deref(), Some("3.5.0"), "{dn:?}");
    }
}
