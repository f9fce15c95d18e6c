//! A client [`Connection`] and a server end built from hadoop-wire's own decoders and encoders,
//! driven against each other in memory: no sockets, every byte boundary reachable.

use super::*;
use crate::encode::{error_response_frame, success_response_frame, RpcFailure, RpcResponseHeader};
use crate::frame::{parse_preamble, Decoded, FrameDecoder, PreambleOutcome, RequestFrame};
use crate::hdfs::{CLIENT_PROTOCOL, CLIENT_PROTOCOL_VERSION};
use crate::pb::hadoop::common::IpcConnectionContextProto;
use crate::rpc::{CONNECTION_CONTEXT_CALL_ID, PING_CALL_ID};
use prost::Message as _;

const CID: [u8; 16] = *b"0123456789abcdef";

fn header(method: &str) -> RequestHeader<'_> {
    RequestHeader {
        method_name: method,
        declaring_class_protocol_name: CLIENT_PROTOCOL,
        client_protocol_version: CLIENT_PROTOCOL_VERSION,
    }
}

fn connection(state_id: StateIdCell) -> Connection {
    let caller = Arc::new(Caller::new(CID, state_id));
    let ctx = ConnectionContext {
        effective_user: Some("alice"),
        real_user: None,
        protocol: Some(CLIENT_PROTOCOL),
    };
    Connection::new(caller, &ctx, 1 << 20).unwrap()
}

/// One call as the server end saw it.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    call_id: i32,
    retry_count: i32,
    state_id: Option<i64>,
    method: String,
    payload: Vec<u8>,
}

/// The server end: the preamble, the context, then calls.
#[derive(Default)]
struct ServerEnd {
    input: Vec<u8>,
    preamble_done: bool,
    context: Option<IpcConnectionContextProto>,
    calls: Vec<Seen>,
    pings: usize,
}

impl ServerEnd {
    fn feed(&mut self, bytes: &[u8]) {
        self.input.extend_from_slice(bytes);
        if !self.preamble_done {
            match parse_preamble(&self.input).unwrap() {
                PreambleOutcome::NeedMore(_) => return,
                PreambleOutcome::Simple { service_class: 0 } => {}
                other => panic!("unexpected preamble {other:?}"),
            }
            self.input.drain(..7);
            self.preamble_done = true;
        }
        while let Decoded::Frame(r) = FrameDecoder::default().decode(&self.input).unwrap() {
            let (frame, call_id) = RequestFrame::parse(&self.input[r.clone()]).unwrap();
            let h = frame.rpc_header_view();
            assert_eq!(h.client_id().unwrap(), CID);
            match call_id {
                CONNECTION_CONTEXT_CALL_ID => {
                    assert!(self.context.is_none(), "a second context");
                    assert_eq!(h.retry_count().unwrap(), -1);
                    let c = IpcConnectionContextProto::decode(frame.payload.unwrap()).unwrap();
                    self.context = Some(c);
                }
                PING_CALL_ID => self.pings += 1,
                id => {
                    assert!(self.context.is_some(), "call before the context");
                    self.calls.push(Seen {
                        call_id: id,
                        retry_count: h.retry_count().unwrap(),
                        state_id: h.state_id().unwrap(),
                        method: frame
                            .request_header_view()
                            .unwrap()
                            .method_name()
                            .unwrap()
                            .to_string(),
                        payload: frame.payload.unwrap().to_vec(),
                    });
                }
            }
            self.input.drain(..r.end);
        }
    }

    fn success(out: &mut Vec<u8>, call_id: i32, state_id: Option<i64>, msg: &[u8]) {
        let h = RpcResponseHeader {
            state_id,
            ..RpcResponseHeader::success(call_id, &CID, 0)
        };
        success_response_frame(out, &h, msg).unwrap();
    }

    fn failure(out: &mut Vec<u8>, call_id: i32, status: RpcStatusProto, class: &str) {
        let h = RpcResponseHeader::success(call_id, &CID, 0);
        let f = RpcFailure {
            status,
            exception_class_name: class,
            error_msg: "it failed",
            error_detail: RpcErrorCodeProto::ErrorApplication,
        };
        error_response_frame(out, &h, &f).unwrap();
    }
}

/// Sends what the client has queued to the server end, `piece` bytes at a time.
fn flush(c: &mut Connection, s: &mut ServerEnd, piece: usize) {
    let bytes = c.transmit().to_vec();
    for chunk in bytes.chunks(piece) {
        s.feed(chunk);
    }
    c.sent(bytes.len());
    assert!(c.transmit().is_empty());
}

/// Delivers `bytes` to the client `piece` bytes at a time (never more than it asks room for)
/// and collects every answer with its payload.
fn deliver(
    c: &mut Connection,
    bytes: &[u8],
    piece: usize,
) -> Vec<Result<(Answer, Vec<u8>), ResponseError>> {
    let mut out = Vec::new();
    let mut fed = 0;
    loop {
        match c.poll() {
            Ok(Some(a)) => {
                let p = c.payload().to_vec();
                out.push(Ok((a, p)));
                continue;
            }
            Ok(None) => {}
            Err(e) => {
                out.push(Err(e));
                return out;
            }
        }
        if fed == bytes.len() {
            return out;
        }
        let room = c.recv_buf();
        let k = piece.min(bytes.len() - fed).min(room.len());
        assert!(k > 0, "recv_buf offers room");
        room[..k].copy_from_slice(&bytes[fed..fed + k]);
        c.received(k);
        fed += k;
    }
}

#[test]
fn handshake_then_pipelined_calls_answered_out_of_order() {
    for piece in [1, 3, 7, 4096] {
        let mut c = connection(StateIdCell::new());
        let mut s = ServerEnd::default();
        let a = c.call(&header("getFileInfo"), &b"\x0a\x02/a"[..]).unwrap();
        let b = c
            .call(&header("getBlockLocations"), &b"\x0a\x02/b"[..])
            .unwrap();
        assert_eq!((a, b), (0, 1));
        c.ping().unwrap();
        flush(&mut c, &mut s, piece);
        let ctx = s.context.clone().unwrap();
        assert_eq!(ctx.protocol.as_deref(), Some(CLIENT_PROTOCOL));
        assert_eq!(
            ctx.user_info.unwrap().effective_user.as_deref(),
            Some("alice")
        );
        assert_eq!(s.pings, 1);
        assert_eq!(
            s.calls
                .iter()
                .map(|x| (x.call_id, x.retry_count, x.method.as_str()))
                .collect::<Vec<_>>(),
            [(0, 0, "getFileInfo"), (1, 0, "getBlockLocations")]
        );
        assert_eq!(s.calls[1].payload, b"\x0a\x02/b");
        assert_eq!(c.in_flight(), [0, 1]);

        let mut resp = Vec::new();
        ServerEnd::success(&mut resp, 1, None, b"second");
        ServerEnd::success(&mut resp, 0, None, b"");
        let got = deliver(&mut c, &resp, piece);
        let got: Vec<_> = got
            .into_iter()
            .map(|r| {
                let (a, p) = r.unwrap();
                (a.call_id, a.result, p)
            })
            .collect();
        assert_eq!(
            got,
            [(1, Ok(()), b"second".to_vec()), (0, Ok(()), Vec::new())]
        );
        assert!(c.in_flight().is_empty());
    }
}

#[test]
fn state_id_is_folded_in_and_sent_on_the_next_call() {
    let cell = StateIdCell::new();
    let mut c = connection(cell.clone());
    let mut s = ServerEnd::default();
    c.call(&header("msync"), &[][..]).unwrap();
    flush(&mut c, &mut s, 64);
    assert_eq!(s.calls[0].state_id, None, "nothing seen yet");
    let mut resp = Vec::new();
    ServerEnd::success(&mut resp, 0, Some(42), b"");
    let a = deliver(&mut c, &resp, 64).remove(0).unwrap().0;
    assert_eq!(a.state_id, Some(42));
    assert_eq!(cell.get(), Some(42));
    // a lower one (another connection's older answer) does not move it back
    c.call(&header("getFileInfo"), &[][..]).unwrap();
    let mut resp = Vec::new();
    ServerEnd::success(&mut resp, 1, Some(7), b"");
    deliver(&mut c, &resp, 64).remove(0).unwrap();
    assert_eq!(cell.get(), Some(42));
    c.call(&header("getFileInfo"), &[][..]).unwrap();
    flush(&mut c, &mut s, 64);
    assert_eq!(s.calls.last().unwrap().state_id, Some(42));
}

#[test]
fn errors_are_typed_and_fatal_ends_the_calls() {
    let mut c = connection(StateIdCell::new());
    for _ in 0..3 {
        c.call(&header("getFileInfo"), &[][..]).unwrap();
    }
    let mut resp = Vec::new();
    ServerEnd::failure(
        &mut resp,
        0,
        RpcStatusProto::Error,
        "org.apache.hadoop.ipc.StandbyException",
    );
    ServerEnd::success(&mut resp, 1, None, b"ok");
    // a FATAL not naming a call (-1) answers the oldest one in flight
    ServerEnd::failure(
        &mut resp,
        -1,
        RpcStatusProto::Fatal,
        crate::rpc::exception::FATAL,
    );
    let got = deliver(&mut c, &resp, 5);
    assert_eq!(got.len(), 3);
    let (a, _) = got[0].clone().unwrap();
    let e = a.result.unwrap_err();
    assert_eq!(
        (a.call_id, e.status, e.class.as_str(), e.message.as_str()),
        (
            0,
            RpcStatusProto::Error,
            "org.apache.hadoop.ipc.StandbyException",
            "it failed"
        )
    );
    assert_eq!(e.detail, Some(RpcErrorCodeProto::ErrorApplication));
    assert!(!e.is_fatal());
    assert_eq!(got[1].clone().unwrap().1, b"ok", "the connection went on");
    let (a, _) = got[2].clone().unwrap();
    assert_eq!(a.call_id, 2);
    assert!(a.result.unwrap_err().is_fatal());
}

#[test]
fn responses_for_calls_not_in_flight_are_skipped() {
    let mut c = connection(StateIdCell::new());
    let id = c.call(&header("getFileInfo"), &[][..]).unwrap();
    let mut resp = Vec::new();
    ServerEnd::success(&mut resp, 99, Some(5), b"stale");
    ServerEnd::success(&mut resp, id, None, b"mine");
    let got = deliver(&mut c, &resp, 3);
    assert_eq!(got.len(), 1);
    let (a, p) = got[0].clone().unwrap();
    assert_eq!((a.call_id, p.as_slice()), (id, &b"mine"[..]));
    // the skipped one's stateId still counted: it is the server's state either way
    assert_eq!(c.caller().state_id().get(), Some(5));
}

#[test]
fn over_cap_length_is_refused_before_growing() {
    let caller = Arc::new(Caller::new(CID, StateIdCell::new()));
    let mut c = Connection::new(caller, &ConnectionContext::default(), 1000).unwrap();
    c.call(&header("getFileInfo"), &[][..]).unwrap();
    let claim = 1001u32.to_be_bytes();
    let got = deliver(&mut c, &claim, 4);
    assert_eq!(
        got,
        [Err(ResponseError::TooLong {
            len: 1001,
            max: 1000
        })]
    );
    assert!(
        c.buf.len() <= RECV_BUFFER,
        "nothing allocated for the claim"
    );
    // a Java-negative length is refused whatever the cap
    let r = Responses::new(u32::MAX, StateIdCell::new());
    assert!(matches!(
        r.frame_len(0x8000_0000u32.to_be_bytes()),
        Err(ResponseError::TooLong { .. })
    ));
}

#[test]
fn malformed_and_messageless_responses_are_errors() {
    let r = Responses::new(1 << 20, StateIdCell::new());
    assert!(matches!(r.reply(&[]), Err(ResponseError::Malformed(_))));
    // a SUCCESS header alone
    let mut f = Vec::new();
    ServerEnd::success(&mut f, 3, None, b"");
    let body = &f[4..];
    let header_only = &body[..body.len() - 1];
    assert_eq!(
        r.reply(header_only),
        Err(ResponseError::NoMessage { call_id: 3 })
    );
    assert_eq!(
        ResponseError::NoMessage { call_id: 3 }.to_string(),
        "SUCCESS response for call 3 without a message"
    );
}

#[test]
fn a_large_response_grows_the_buffer_once() {
    let mut c = connection(StateIdCell::new());
    c.call(&header("getBlockLocations"), &[][..]).unwrap();
    let big = vec![7u8; 100_000];
    let mut resp = Vec::new();
    ServerEnd::success(&mut resp, 0, None, &big);
    let got = deliver(&mut c, &resp, 1 << 20);
    assert_eq!(got[0].clone().unwrap().1, big);
}

#[test]
fn call_ids_wrap_within_non_negative_ints() {
    let caller = Caller::new(CID, StateIdCell::new());
    caller.next_call_id.store(i32::MAX, Ordering::Relaxed);
    assert_eq!(caller.next_call_id(), i32::MAX);
    assert_eq!(caller.next_call_id(), 0);
}
