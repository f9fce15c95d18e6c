//! The encoders allocate nothing when the buffer has the capacity: a counting global allocator
//! (own test binary, one #[test]) watches every encoder on a pre-reserved `Vec`.

use hadoop_wire::encode::*;
use hadoop_wire::pb::hadoop::common::rpc_response_header_proto::{
    RpcErrorCodeProto, RpcStatusProto,
};
use hadoop_wire::pb::hadoop::hdfs::GetFileInfoRequestProto;

#[global_allocator]
static GLOBAL: alloc_counter::Counting = alloc_counter::Counting;

/// Allocations made by this thread while running `f`.
fn allocations(f: impl FnOnce()) -> usize {
    alloc_counter::thread(f).1.allocs as usize
}

#[test]
fn encoders_do_not_allocate_with_capacity() {
    const CID: [u8; 16] = [7; 16];
    let req = GetFileInfoRequestProto {
        src: "/user/alice/data".into(),
    };
    let rh = RequestHeader {
        method_name: "getFileInfo",
        declaring_class_protocol_name: "org.apache.hadoop.hdfs.protocol.ClientProtocol",
        client_protocol_version: 1,
    };
    let ctx = ConnectionContext {
        effective_user: Some("alice"),
        real_user: Some("bob"),
        protocol: Some("org.apache.hadoop.hdfs.protocol.ClientProtocol"),
    };
    let failure = RpcFailure {
        status: RpcStatusProto::Error,
        exception_class_name: "org.apache.hadoop.ipc.RetriableException",
        error_msg: "try again",
        error_detail: RpcErrorCodeProto::ErrorApplication,
    };
    let mut buf: Vec<u8> = Vec::with_capacity(4096);
    let mut msg = String::with_capacity(128);

    // The counter works: growing past the capacity is seen.
    let mut small: Vec<u8> = Vec::with_capacity(4);
    assert!(allocations(|| ping_frame(&mut small, &CID).map(drop).unwrap()) > 0);

    let n = allocations(|| {
        for i in 0..100 {
            preamble(&mut buf, 0);
            connection_context_frame(&mut buf, &CID, &ctx).unwrap();
            let mut h = RpcRequestHeader::call(i, &CID, 0);
            h.state_id = Some(i64::from(i) * 1000);
            call_frame(&mut buf, &h, &rh, &Proto(&req)).unwrap();
            call_frame(&mut buf, &h, &rh, &b"\x0a\x04/tmp"[..]).unwrap();
            ping_frame(&mut buf, &CID).unwrap();
            let rsp = RpcResponseHeader::success(i, &CID, 0);
            success_response_frame(&mut buf, &rsp, &Proto(&req)).unwrap();
            success_response_frame(&mut buf, &rsp, &[][..]).unwrap();
            error_response_frame(&mut buf, &rsp, &failure).unwrap();
            version_mismatch_response(&mut buf, 4, &mut msg).unwrap();
            assert!(buf.len() < 4096);
            buf.clear();
        }
    });
    assert_eq!(n, 0, "encoders allocated {n} times");
}
