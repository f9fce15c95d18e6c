//! The IPC server's protocol behaviour, on both backends (`HOTPATH_IO=uring|epoll` picks one):
//! round trips, pipelining, Hadoop's ERROR/FATAL answers, ping, observer state ids.

use crate::server_support;

use std::io::Write;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hadoop_wire::encode::{self, RpcRequestHeader};
use hadoop_wire::pb::hadoop::common::rpc_response_header_proto::{
    RpcErrorCodeProto, RpcStatusProto,
};
use ipc::buffer_protocol as bench;
use ipc::client::ClientError;
use ipc::server::{Call, CallError, Registry, Reply};
use server_support::*;

#[test]
fn echo_and_get_buffer_round_trips() {
    for_each_backend(|b| {
        let srv = start(b, bench_registry(), |_| {});
        let c = client(srv.local_addr());
        let r = c.call(bench::ECHO, b"\x0a\x05hello").unwrap();
        assert_eq!(r.payload(), b"\x0a\x05hello");
        // Empty request, empty response: one 00 length byte on the wire.
        assert_eq!(c.call(bench::ECHO, b"").unwrap().payload(), b"");
        for size in [0u64, 1, 65_000, 65_536, 1_000_000, 10_000_000] {
            get_buffer_checked(&c, size);
        }
        let m = srv.metrics();
        assert_eq!(m.calls, 8);
        assert_eq!(m.errors, 0);
        srv.shutdown();
    });
}

#[test]
fn pipelined_calls_on_one_connection_match_by_call_id() {
    for_each_backend(|b| {
        let srv = start(b, bench_registry(), |_| {});
        let c = client(srv.local_addr());
        // One thread, 200 calls in flight, mixed sizes, then all the waits.
        let mut pending = Vec::new();
        for i in 0..200u64 {
            let size = (i * 7919) % 300_000;
            let p = c
                .start_call(
                    bench::PROTOCOL,
                    bench::VERSION,
                    bench::GET_BUFFER,
                    &get_buffer_request(size),
                    Duration::from_secs(30),
                )
                .unwrap();
            pending.push((size, p));
        }
        let ids: std::collections::HashSet<i32> =
            pending.iter().map(|(_, p)| p.call_id()).collect();
        assert_eq!(ids.len(), 200, "call ids are unique");
        for (size, p) in pending {
            let r = p.wait().unwrap();
            let data = bench::response_data(r.payload()).unwrap();
            assert_eq!(data.len() as u64, size);
            assert!(bench::is_pattern(data));
        }
        // Eight threads sharing the same client (and connection).
        std::thread::scope(|s| {
            for t in 0..8 {
                let c = c.clone();
                s.spawn(move || {
                    for i in 0..20 {
                        let msg = format!("thread {t} call {i}");
                        let mut req = vec![0x0a, msg.len() as u8];
                        req.extend_from_slice(msg.as_bytes());
                        assert_eq!(c.call(bench::ECHO, &req).unwrap().payload(), &req[..]);
                    }
                });
            }
        });
        assert_eq!(
            srv.metrics().transport.accepted,
            1,
            "one connection carried it all"
        );
        srv.shutdown();
    });
}

#[test]
fn unknown_protocol_version_and_method_are_errors_and_the_connection_survives() {
    for_each_backend(|b| {
        let srv = start(b, bench_registry(), |_| {});
        let c = client(srv.local_addr());
        let e = c
            .start_call(
                "no.such.Protocol",
                1,
                "getBuffer",
                b"",
                Duration::from_secs(10),
            )
            .unwrap()
            .wait()
            .unwrap_err();
        assert_eq!(
            e.remote_class(),
            Some("org.apache.hadoop.ipc.RpcNoSuchProtocolException")
        );
        assert_eq!(
            e.remote_detail(),
            Some(RpcErrorCodeProto::ErrorNoSuchProtocol)
        );
        let e = c.call("noSuchMethod", b"").unwrap_err();
        assert_eq!(
            e.remote_class(),
            Some("org.apache.hadoop.ipc.RpcNoSuchMethodException")
        );
        assert_eq!(
            e.remote_detail(),
            Some(RpcErrorCodeProto::ErrorNoSuchMethod)
        );
        match &e {
            ClientError::Remote {
                status, message, ..
            } => {
                assert_eq!(*status, RpcStatusProto::Error);
                assert!(message.contains("noSuchMethod"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        let e = c
            .start_call(
                bench::PROTOCOL,
                7,
                bench::ECHO,
                b"",
                Duration::from_secs(10),
            )
            .unwrap()
            .wait()
            .unwrap_err();
        assert_eq!(
            e.remote_class(),
            Some("org.apache.hadoop.ipc.RPC$VersionMismatch")
        );
        assert_eq!(
            e.remote_detail(),
            Some(RpcErrorCodeProto::ErrorRpcVersionMismatch)
        );
        // A handler's own error, and a request the handler cannot decode.
        let e = c
            .call(bench::GET_BUFFER, &get_buffer_request(1 << 40))
            .unwrap_err();
        assert_eq!(e.remote_class(), Some("java.io.IOException"));
        assert_eq!(e.remote_detail(), Some(RpcErrorCodeProto::ErrorApplication));
        let e = c.call(bench::GET_BUFFER, b"\x08").unwrap_err();
        assert_eq!(
            e.remote_class(),
            Some("com.google.protobuf.InvalidProtocolBufferException")
        );
        // ERROR keeps the connection.
        get_buffer_checked(&c, 100_000);
        let m = srv.metrics();
        assert_eq!(m.errors, 5);
        assert_eq!(m.fatals, 0);
        assert_eq!(m.transport.accepted, 1);
        srv.shutdown();
    });
}

#[test]
fn a_call_before_the_connection_context_is_fatal_and_closes_only_that_connection() {
    for_each_backend(|b| {
        let srv = start(b, bench_registry(), |_| {});
        let good = client(srv.local_addr());
        get_buffer_checked(&good, 1000);
        let mut s = raw_connect(srv.local_addr(), false);
        s.write_all(&call_frame(5, bench::PROTOCOL, 1, bench::ECHO, b""))
            .unwrap();
        let r = parse_response(&read_frame(&mut s).expect("a FATAL response"));
        assert_eq!(r.call_id, 5);
        assert_eq!(r.status, RpcStatusProto::Fatal);
        assert_eq!(r.detail, Some(RpcErrorCodeProto::FatalInvalidRpcHeader));
        assert_eq!(
            r.class,
            "org.apache.hadoop.ipc.Server$FatalRpcServerException"
        );
        assert!(
            r.message.contains("Connection context not established"),
            "{}",
            r.message
        );
        assert!(closed_by_server(&mut s));
        // The other connection is unaffected.
        get_buffer_checked(&good, 2_000_000);
        assert_eq!(srv.metrics().fatals, 1);
        srv.shutdown();
    });
}

#[test]
fn bad_headers_are_fatal() {
    for_each_backend(|b| {
        let srv = start(b, bench_registry(), |_| {});
        // rpcOp missing.
        let mut s = raw_connect(srv.local_addr(), true);
        let mut hdr = Vec::new();
        // rpcKind 2, callId 9 (zigzag 18), clientId, no rpcOp.
        hdr.extend_from_slice(&[0x08, 0x02, 0x18, 18, 0x22, 16]);
        hdr.extend_from_slice(&CLIENT_ID);
        let mut body = vec![hdr.len() as u8];
        body.extend_from_slice(&hdr);
        body.extend_from_slice(&[0]);
        body.extend_from_slice(&[0]);
        let mut frame = (body.len() as u32).to_be_bytes().to_vec();
        frame.extend_from_slice(&body);
        s.write_all(&frame).unwrap();
        let r = parse_response(&read_frame(&mut s).unwrap());
        assert_eq!(r.status, RpcStatusProto::Fatal);
        assert_eq!(r.detail, Some(RpcErrorCodeProto::FatalInvalidRpcHeader));
        assert_eq!(r.call_id, 9);
        assert!(closed_by_server(&mut s));

        // A header that is not protobuf at all.
        let mut s = raw_connect(srv.local_addr(), true);
        s.write_all(&[0, 0, 0, 4, 3, 0xff, 0xff, 0xff]).unwrap();
        let r = parse_response(&read_frame(&mut s).unwrap());
        assert_eq!(r.status, RpcStatusProto::Fatal);
        assert_eq!(r.detail, Some(RpcErrorCodeProto::FatalDeserializingRequest));
        assert_eq!(r.call_id, -1);
        assert!(closed_by_server(&mut s));

        // A second connection context.
        let mut s = raw_connect(srv.local_addr(), true);
        let mut ctx = Vec::new();
        encode::connection_context_frame(&mut ctx, &CLIENT_ID, &Default::default()).unwrap();
        s.write_all(&ctx).unwrap();
        let r = parse_response(&read_frame(&mut s).unwrap());
        assert_eq!(r.detail, Some(RpcErrorCodeProto::FatalInvalidRpcHeader));
        assert_eq!(r.call_id, -3);
        assert!(closed_by_server(&mut s));

        // Wrong IPC version in the preamble.
        let mut s = std::net::TcpStream::connect(srv.local_addr()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(b"hrpc\x0a\x00\x00").unwrap();
        let r = parse_response(&read_frame(&mut s).unwrap());
        assert_eq!(r.detail, Some(RpcErrorCodeProto::FatalVersionMismatch));
        assert_eq!(r.call_id, -1);
        assert!(closed_by_server(&mut s));

        // HTTP on the IPC port.
        let mut s = std::net::TcpStream::connect(srv.local_addr()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut s, &mut text);
        assert!(text.starts_with("HTTP/1.1 404"), "{text}");
        srv.shutdown();
    });
}

#[test]
fn ping_is_accepted_silently() {
    for_each_backend(|b| {
        let srv = start(b, bench_registry(), |_| {});
        let mut s = raw_connect(srv.local_addr(), true);
        let mut f = Vec::new();
        encode::ping_frame(&mut f, &CLIENT_ID).unwrap();
        encode::ping_frame(&mut f, &CLIENT_ID).unwrap();
        f.extend_from_slice(&call_frame(
            1,
            bench::PROTOCOL,
            1,
            bench::ECHO,
            b"\x0a\x01x",
        ));
        s.write_all(&f).unwrap();
        // The first (and only) response is the call's.
        let r = parse_response(&read_frame(&mut s).unwrap());
        assert_eq!(r.call_id, 1);
        assert_eq!(r.status, RpcStatusProto::Success);
        assert_eq!(r.payload.as_deref(), Some(&b"\x0a\x01x"[..]));
        let c = client(srv.local_addr());
        c.ping().unwrap();
        get_buffer_checked(&c, 10);
        assert_eq!(srv.metrics().pings, 3);
        srv.shutdown();
    });
}

#[test]
fn the_client_tracks_and_sends_the_highest_state_id() {
    for_each_backend(|b| {
        let server_state = Arc::new(AtomicI64::new(100));
        let mut reg = Registry::new();
        let st = server_state.clone();
        reg.set_state_id(move || st.load(Ordering::Relaxed));
        // Answers with the stateId the client sent (as a varint message field 1), 0 if none.
        reg.register(
            "test.State",
            1,
            "seen",
            |call: &Call<'_>, reply: &mut Reply<'_, '_>| -> Result<(), CallError> {
                let v = call.client_state_id.unwrap_or(0) as u64;
                let mut m = vec![0x08];
                prost::encoding::encode_varint(v, &mut m);
                reply.bytes(&m)?;
                Ok(())
            },
        );
        let srv = start(b, reg, |_| {});
        let mut cfg = client_config();
        cfg.protocol = "test.State".into();
        let c = ipc::client::Client::new(srv.local_addr(), cfg);
        let seen = |c: &ipc::client::Client| {
            let r = c.call("seen", b"").unwrap();
            assert!(r.state_id().is_some());
            let mut rd = hadoop_wire::reader::Reader::new(r.payload());
            rd.read_tag().unwrap();
            rd.read_varint().unwrap() as i64
        };
        assert_eq!(seen(&c), 0, "no state id before the first response");
        assert_eq!(c.last_state_id(), Some(100));
        server_state.store(250, Ordering::Relaxed);
        assert_eq!(seen(&c), 100);
        assert_eq!(c.last_state_id(), Some(250));
        // A lagging server (an observer behind): the client keeps the highest.
        server_state.store(200, Ordering::Relaxed);
        assert_eq!(seen(&c), 250);
        assert_eq!(c.last_state_id(), Some(250));
        assert_eq!(seen(&c), 250);
        srv.shutdown();
    });
}

#[test]
fn raw_request_header_with_state_id_reaches_the_handler() {
    // The wire form the client uses: stateId = field 8 of the RPC request header.
    let h = RpcRequestHeader {
        state_id: Some(42),
        ..RpcRequestHeader::call(3, &CLIENT_ID, 0)
    };
    let mut f = Vec::new();
    encode::call_frame(
        &mut f,
        &h,
        &encode::RequestHeader {
            method_name: "m",
            declaring_class_protocol_name: "p",
            client_protocol_version: 1,
        },
        &b""[..],
    )
    .unwrap();
    let body = &f[4..];
    let rf = hadoop_wire::frame::RequestFrame::split(body).unwrap();
    let v = hadoop_wire::view::rpc::RpcRequestHeaderView::new(rf.rpc_header);
    assert_eq!(v.state_id().unwrap(), Some(42));
}

#[test]
fn a_prost_answer_larger_than_a_pool_chunk_is_streamed_whole() {
    // `storm-apps` found an allocate answer over one 64 KiB chunk failing with "stream it" and
    // its containers lost: `Reply::message` streams what does not fit a chunk.
    for_each_backend(|b| {
        let mut reg = Registry::new();
        reg.register(
            "test.Big",
            1,
            "big",
            |call: &Call<'_>, reply: &mut Reply<'_, '_>| -> Result<(), CallError> {
                // The request is the answer's size as a varint; the answer is one bytes field
                // of that many bytes counting up mod 251.
                let mut rd = hadoop_wire::reader::Reader::new(call.request);
                let n = rd.read_varint().unwrap() as usize;
                let m = hadoop_wire::pb::hadoop::common::TokenProto {
                    identifier: (0..n).map(|i| (i % 251) as u8).collect(),
                    password: Vec::new(),
                    kind: "big".into(),
                    service: String::new(),
                };
                reply.message(&m)?;
                Ok(())
            },
        );
        let srv = start(b, reg, |_| {});
        let mut cfg = client_config();
        cfg.protocol = "test.Big".into();
        let c = ipc::client::Client::new(srv.local_addr(), cfg);
        for n in [10usize, 65_000, 65_536, 200_000, 3_000_000] {
            let mut req = Vec::new();
            prost::encoding::encode_varint(n as u64, &mut req);
            let r = c.call("big", &req).unwrap();
            let m = <hadoop_wire::pb::hadoop::common::TokenProto as prost::Message>::decode(
                r.payload(),
            )
            .unwrap();
            assert_eq!(m.identifier.len(), n);
            assert!(m
                .identifier
                .iter()
                .enumerate()
                .all(|(i, &b)| b == (i % 251) as u8));
        }
        assert_eq!(srv.metrics().errors, 0);
        srv.shutdown();
    });
}
