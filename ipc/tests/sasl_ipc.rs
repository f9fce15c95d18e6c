//! SASL on our own server and client: TOKEN (DIGEST-MD5) at every protection level, on both
//! backends, and every refusal the server must make (each closes only its own connection and
//! is counted). Java's client and server are checked against these in `peers/`.

mod server_support;

use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hadoop_wire::encode;
use hadoop_wire::entropy::SeededEntropy;
use hadoop_wire::pb::hadoop::common::rpc_response_header_proto::{
    RpcErrorCodeProto, RpcStatusProto,
};
use hadoop_wire::pb::hadoop::common::rpc_sasl_proto::SaslState;
use hadoop_wire::rpc::client::Responses;
use hadoop_wire::rpc::client::StateIdCell;
use hadoop_wire::sasl::client::{ClientAuth, ClientNegotiation, ClientStep, TokenCredential};
use hadoop_wire::sasl::message::{self, AuthMethod};
use hadoop_wire::sasl::server::ServerAuth;
use hadoop_wire::sasl::Qop;
use ipc::buffer_protocol as bench;
use ipc::client::{Client, ClientError};
use ipc::server::{Registry, Server, ServerConfig};
use ipc::transport::BackendChoice;
use server_support::sasl::*;
use server_support::*;

fn token_server(backend: BackendChoice, qops: Vec<Qop>, simple_too: bool) -> Server {
    let configured = if simple_too {
        AuthMethod::Simple
    } else {
        AuthMethod::Token
    };
    let auth = ServerAuth::new(
        configured,
        Some(Arc::new(Secrets { key: KEY.to_vec() })),
        qops,
    )
    .unwrap();
    start(backend, sasl_registry(), |c: &mut ServerConfig| {
        c.auth = Arc::new(auth);
    })
}

/// The bench protocol plus `whoami`, which answers the call's user and auth method.
fn sasl_registry() -> Registry {
    let mut r = bench_registry();
    // `sum`: the request's length and byte sum, for requests larger than one WRAP packet
    r.register(
        bench::PROTOCOL,
        bench::VERSION,
        "sum",
        |call: &ipc::server::Call<'_>, reply: &mut ipc::server::Reply<'_, '_>| {
            let sum: u64 = call.request.iter().map(|&b| u64::from(b)).sum();
            reply.bytes(format!("{} {sum}", call.request.len()).as_bytes())?;
            Ok(())
        },
    );
    r.register(
        bench::PROTOCOL,
        bench::VERSION,
        "whoami",
        |call: &ipc::server::Call<'_>, reply: &mut ipc::server::Reply<'_, '_>| {
            let s = format!(
                "{} {} {}",
                call.user.unwrap_or("-"),
                call.auth_method,
                call.token_identifier.map_or(0, <[u8]>::len)
            );
            reply.bytes(s.as_bytes())?;
            Ok(())
        },
    );
    r
}

fn token_client(addr: SocketAddr, token: TokenCredential, qops: Vec<Qop>) -> Client {
    let mut cfg = client_config();
    cfg.auth = ClientAuth::token(token, qops);
    cfg.max_connect_attempts = 1;
    Client::new(addr, cfg)
}

fn whoami(c: &Client) -> String {
    let r = c.call("whoami", &[]).unwrap();
    String::from_utf8(r.payload().to_vec()).unwrap()
}

/// An echo of `len` bytes (up to a pool chunk), or for longer requests their length and sum.
fn echo_checked(c: &Client, len: usize) {
    let msg: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
    if len <= 60_000 {
        let r = c.call(bench::ECHO, &msg).unwrap();
        assert_eq!(r.payload(), &msg[..], "echo of {len} bytes");
    } else {
        let r = c.call("sum", &msg).unwrap();
        let sum: u64 = msg.iter().map(|&b| u64::from(b)).sum();
        assert_eq!(r.payload(), format!("{len} {sum}").as_bytes());
    }
}

#[test]
fn token_auth_at_every_protection_level_on_both_backends() {
    for_each_backend(|backend| {
        for qop in [Qop::Auth, Qop::AuthInt, Qop::AuthConf] {
            let server = token_server(backend, vec![qop], false);
            let c = token_client(server.local_addr(), token(KEY), vec![qop]);
            // the token's user, whatever the client's configured user says
            let id_len = token(KEY).identifier.len();
            assert_eq!(whoami(&c), format!("{USER} TOKEN {id_len}"), "{qop:?}");
            // small and large requests (several WRAP packets each way), pipelined
            for len in [0, 1, 100, 70_000, 300_000] {
                echo_checked(&c, len);
            }
            // streamed responses: 3 MB crosses many pool chunks and WRAP packets
            get_buffer_checked(&c, 3 << 20);
            get_buffer_checked(&c, 1);
            let calls: Vec<_> = (0..32)
                .map(|_| {
                    c.start_call(
                        bench::PROTOCOL,
                        bench::VERSION,
                        bench::ECHO,
                        b"pipelined",
                        Duration::from_secs(30),
                    )
                    .unwrap()
                })
                .collect();
            for p in calls {
                assert_eq!(p.wait().unwrap().payload(), b"pipelined");
            }
            let m = server.metrics();
            assert_eq!(
                (m.auth_successes, m.auth_failures, m.fatals),
                (1, 0, 0),
                "{qop:?}"
            );
            server.shutdown();
        }
    });
}

#[test]
fn the_client_takes_its_first_protection_the_server_offers() {
    let server = token_server(
        BackendChoice::Epoll,
        vec![Qop::AuthConf, Qop::AuthInt, Qop::Auth],
        false,
    );
    for prefs in [
        vec![Qop::AuthInt, Qop::AuthConf],
        vec![Qop::Auth],
        vec![Qop::AuthConf],
    ] {
        let c = token_client(server.local_addr(), token(KEY), prefs.clone());
        echo_checked(&c, 100_000);
        assert!(whoami(&c).starts_with(USER), "{prefs:?}");
    }
    // no overlap: the client refuses (the JDK's text)
    let only_auth = token_server(BackendChoice::Epoll, vec![Qop::Auth], false);
    let c = token_client(only_auth.local_addr(), token(KEY), vec![Qop::AuthConf]);
    let e = c.call("whoami", &[]).unwrap_err();
    assert!(e.to_string().contains("No common protection layer"), "{e}");
}

#[test]
fn a_wrong_password_is_refused_and_other_connections_are_unaffected() {
    for_each_backend(|backend| {
        let server = token_server(backend, vec![Qop::AuthConf], false);
        let good = token_client(server.local_addr(), token(KEY), vec![Qop::AuthConf]);
        assert!(whoami(&good).starts_with(USER));
        let bad = token_client(server.local_addr(), token(b"wrongkey"), vec![Qop::AuthConf]);
        let e = bad.call("whoami", &[]).unwrap_err();
        match &e {
            ClientError::Remote {
                status,
                class,
                message,
                detail,
            } => {
                assert_eq!(*status, RpcStatusProto::Fatal);
                assert_eq!(class, "javax.security.sasl.SaslException");
                assert!(message.contains("Mismatched response"), "{message}");
                assert_eq!(*detail, Some(RpcErrorCodeProto::FatalUnauthorized));
            }
            other => panic!("{other:?}"),
        }
        // a token the secrets do not know: InvalidToken with the secrets' text
        let forged = TokenCredential {
            identifier: b"someone-else".to_vec(),
            password: vec![0; 20],
        };
        let e = token_client(server.local_addr(), forged, vec![Qop::AuthConf])
            .call("whoami", &[])
            .unwrap_err();
        assert_eq!(
            e.remote_class(),
            Some("org.apache.hadoop.security.token.SecretManager$InvalidToken"),
            "{e}"
        );
        assert!(e.to_string().contains("generated illegally"), "{e}");
        // the first connection still works
        echo_checked(&good, 50_000);
        let m = server.metrics();
        assert_eq!((m.auth_successes, m.auth_failures), (1, 2));
        server.shutdown();
    });
}

#[test]
fn simple_clients_and_simple_servers() {
    // TOKEN-only server: a SIMPLE client is refused with Java's text, callId -1
    let server = token_server(BackendChoice::Epoll, vec![Qop::Auth], false);
    let mut s = raw_connect(server.local_addr(), true);
    let p = parse_response(&read_frame(&mut s).expect("a FATAL"));
    assert_eq!(p.call_id, -1);
    assert_eq!(p.status, RpcStatusProto::Fatal);
    assert_eq!(p.class, "org.apache.hadoop.security.AccessControlException");
    assert_eq!(
        p.message,
        "SIMPLE authentication is not enabled.  Available:[TOKEN]"
    );
    assert_eq!(p.detail, Some(RpcErrorCodeProto::FatalUnauthorized));
    assert!(closed_by_server(&mut s));
    server.shutdown();

    // a server offering [TOKEN, SIMPLE] serves both kinds of clients
    let server = token_server(BackendChoice::Epoll, vec![Qop::Auth], true);
    assert!(whoami(&client(server.local_addr())).starts_with("alice SIMPLE"));
    let c = token_client(server.local_addr(), token(KEY), vec![Qop::Auth]);
    assert!(whoami(&c).starts_with(USER));
    server.shutdown();

    // a SIMPLE-only server tells a token-holding client to switch to SIMPLE (Java does too)
    let server = start(BackendChoice::Epoll, sasl_registry(), |_| {});
    let c = token_client(server.local_addr(), token(KEY), vec![Qop::AuthConf]);
    assert!(whoami(&c).starts_with("alice SIMPLE"), "{}", whoami(&c));
    // ... unless the client is secure and may not fall back
    let mut cfg = client_config();
    cfg.auth = ClientAuth {
        security_enabled: true,
        ..ClientAuth::token(token(KEY), vec![Qop::Auth])
    };
    cfg.max_connect_attempts = 1;
    let e = Client::new(server.local_addr(), cfg.clone())
        .call("whoami", &[])
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("Server asks us to fall back to SIMPLE auth, but this client is configured to only allow secure connections."),
        "{e}"
    );
    cfg.auth.fallback_to_simple_allowed = true;
    assert!(whoami(&Client::new(server.local_addr(), cfg)).contains("SIMPLE"));
    server.shutdown();
}

/// A raw SASL connection driven by hadoop-wire's client negotiation, so tests can misbehave
/// after it: returns the socket and the security layer.
fn raw_sasl(
    addr: SocketAddr,
    qop: Qop,
) -> (
    std::net::TcpStream,
    Option<Box<dyn hadoop_wire::sasl::SecurityLayer>>,
) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut neg = ClientNegotiation::new(ClientAuth::token(token(KEY), vec![qop]));
    let mut b = Vec::new();
    encode::sasl_preamble(&mut b, 0);
    message::client_frame(&mut b, &neg.start()).unwrap();
    s.write_all(&b).unwrap();
    let responses = Responses::new(1 << 20, StateIdCell::new());
    let mut rng = SeededEntropy(5);
    loop {
        let body = read_frame(&mut s).expect("a SASL reply");
        let r = responses.reply(&body).unwrap();
        match neg
            .on_reply(r.call_id, r.result.unwrap(), &mut rng)
            .unwrap()
        {
            ClientStep::Send(m) => {
                let mut b = Vec::new();
                message::client_frame(&mut b, &m).unwrap();
                s.write_all(&b).unwrap();
            }
            ClientStep::Done(o) => return (s, o.layer),
            ClientStep::SendThenDone(..) => panic!("SIMPLE chosen"),
        }
    }
}

/// Reads one WRAP packet and the single response frame inside it.
fn read_wrapped(
    s: &mut std::net::TcpStream,
    layer: &mut dyn hadoop_wire::sasl::SecurityLayer,
) -> Parsed {
    let outer = read_frame(s).expect("a WRAP packet");
    let f = hadoop_wire::frame::ResponseFrame::split(&outer).unwrap();
    let v = message::SaslMessageView::read(f.payload.unwrap()).unwrap();
    assert!(v.is_wrap());
    let mut plain = Vec::new();
    layer.unwrap(v.token.unwrap(), &mut plain).unwrap();
    let len = u32::from_be_bytes(plain[..4].try_into().unwrap()) as usize;
    assert_eq!(plain.len(), 4 + len, "one whole frame per packet");
    parse_response(&plain[4..])
}

/// The context frame and one echo call as plaintext.
fn context_and_call() -> Vec<u8> {
    let mut plain = Vec::new();
    encode::connection_context_frame(
        &mut plain,
        &CLIENT_ID,
        &encode::ConnectionContext {
            effective_user: None,
            real_user: None,
            protocol: Some(bench::PROTOCOL),
        },
    )
    .unwrap();
    plain.extend(call_frame(
        0,
        bench::PROTOCOL,
        bench::VERSION,
        bench::ECHO,
        b"x",
    ));
    plain
}

#[test]
fn tampered_replayed_and_unwrapped_packets_close_the_connection() {
    for_each_backend(|backend| {
        let server = token_server(backend, vec![Qop::AuthInt, Qop::AuthConf], false);
        let addr = server.local_addr();
        for qop in [Qop::AuthInt, Qop::AuthConf] {
            // a flipped byte in the MAC
            let (mut s, layer) = raw_sasl(addr, qop);
            let mut layer = layer.expect("a security layer");
            let mut token = Vec::new();
            layer.wrap(&context_and_call(), &mut token).unwrap();
            let n = token.len();
            token[n - 8] ^= 1;
            let mut b = Vec::new();
            message::client_wrap_frame(&mut b, &token).unwrap();
            s.write_all(&b).unwrap();
            // the FATAL comes wrapped, as everything after SUCCESS (Java's setupResponse too)
            let p = read_wrapped(&mut s, layer.as_mut());
            assert_eq!(p.status, RpcStatusProto::Fatal, "{qop:?}");
            assert_eq!(p.class, "javax.security.sasl.SaslException");
            assert_eq!(p.detail, Some(RpcErrorCodeProto::FatalUnauthorized));
            assert!(closed_by_server(&mut s));

            // the same packet twice: the second has a sequence number already used
            let (mut s, layer) = raw_sasl(addr, qop);
            let mut layer = layer.unwrap();
            let mut token = Vec::new();
            layer.wrap(&context_and_call(), &mut token).unwrap();
            let mut b = Vec::new();
            message::client_wrap_frame(&mut b, &token).unwrap();
            s.write_all(&b).unwrap();
            s.write_all(&b).unwrap();
            // the echo answer arrives wrapped, then the FATAL for the replay
            let _answer = read_frame(&mut s).expect("the wrapped answer");
            assert!(closed_by_server(&mut s), "{qop:?}: replay not refused");

            // plaintext after negotiating a protection level
            let (mut s, layer) = raw_sasl(addr, qop);
            s.write_all(&context_and_call()).unwrap();
            let p = read_wrapped(&mut s, layer.unwrap().as_mut());
            assert_eq!(p.detail, Some(RpcErrorCodeProto::FatalInvalidRpcHeader));
            assert!(closed_by_server(&mut s));
        }
        let m = server.metrics();
        assert_eq!(m.auth_successes, 6);
        assert_eq!(m.auth_failures, 4);
        // and a well-behaved client is still served
        let c = token_client(addr, token(KEY), vec![Qop::AuthConf]);
        echo_checked(&c, 10_000);
        server.shutdown();
    });
}

#[test]
fn negotiation_out_of_order_oversized_or_after_success_is_fatal() {
    let server = token_server(BackendChoice::Epoll, vec![Qop::Auth], false);
    let addr = server.local_addr();
    let send = |msgs: &[hadoop_wire::pb::hadoop::common::RpcSaslProto]| {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut b = Vec::new();
        encode::sasl_preamble(&mut b, 0);
        for m in msgs {
            message::client_frame(&mut b, m).unwrap();
        }
        s.write_all(&b).unwrap();
        s
    };
    let last_fatal = |s: &mut std::net::TcpStream| loop {
        let p = parse_response(&read_frame(s).expect("a reply"));
        if p.status == RpcStatusProto::Fatal {
            assert!(closed_by_server(s));
            return p;
        }
    };
    // RESPONSE first
    let mut s = send(&[message::message(SaslState::Response)]);
    let p = last_fatal(&mut s);
    assert_eq!(
        (p.call_id, p.class.as_str()),
        (-33, "javax.security.sasl.SaslException")
    );
    // NEGOTIATE twice
    let n = message::message(SaslState::Negotiate);
    let mut s = send(&[n.clone(), n.clone()]);
    let p = last_fatal(&mut s);
    assert_eq!(p.message, "Client already attempted negotiation");
    assert_eq!(p.class, "org.apache.hadoop.security.AccessControlException");
    // INITIATE naming a method the server does not offer, after NEGOTIATE
    let mut init = message::message(SaslState::Initiate);
    init.auths
        .push(hadoop_wire::pb::hadoop::common::rpc_sasl_proto::SaslAuth {
            method: "SIMPLE".into(),
            mechanism: String::new(),
            protocol: None,
            server_id: None,
            challenge: None,
        });
    let mut s = send(&[n.clone(), init]);
    let p = last_fatal(&mut s);
    assert_eq!(
        p.message,
        "SIMPLE authentication is not enabled.  Available:[TOKEN]"
    );
    // a TOKEN INITIATE without the (present-but-empty) protocol does not match the offer
    let mut init = message::message(SaslState::Initiate);
    init.token = Some(Vec::new());
    init.auths
        .push(hadoop_wire::pb::hadoop::common::rpc_sasl_proto::SaslAuth {
            method: "TOKEN".into(),
            mechanism: "DIGEST-MD5".into(),
            protocol: None,
            server_id: Some("default".into()),
            challenge: None,
        });
    let mut s = send(&[n.clone(), init]);
    let p = last_fatal(&mut s);
    assert_eq!(
        p.message,
        "TOKEN authentication is not enabled.  Available:[TOKEN]"
    );
    // a message over the negotiation cap, in a frame over it: refused on the frame's length
    let mut big = message::message(SaslState::Initiate);
    big.token = Some(vec![b'a'; 100_000]);
    let mut s = send(&[n.clone(), big]);
    let p = last_fatal(&mut s);
    assert_eq!(p.call_id, -1);
    assert!(
        p.message.starts_with("Requested data length 100")
            && p.message
                .ends_with("is longer than maximum SASL negotiation length 66560."),
        "{}",
        p.message
    );
    // the connection context during negotiation
    let mut s = send(&[n]);
    let _negotiate = read_frame(&mut s).unwrap();
    let mut b = Vec::new();
    encode::connection_context_frame(&mut b, &CLIENT_ID, &Default::default()).unwrap();
    s.write_all(&b).unwrap();
    let p = last_fatal(&mut s);
    assert_eq!(p.message, "Connection header sent during SASL negotiation");
    // a context claiming another user than the token's
    let (mut s, _) = raw_sasl(addr, Qop::Auth);
    let mut b = Vec::new();
    encode::connection_context_frame(
        &mut b,
        &CLIENT_ID,
        &encode::ConnectionContext {
            effective_user: Some("mallory"),
            real_user: None,
            protocol: Some(bench::PROTOCOL),
        },
    )
    .unwrap();
    s.write_all(&b).unwrap();
    let p = last_fatal(&mut s);
    assert_eq!(
        p.message,
        format!("Authenticated user ({USER}) doesn't match what the client claims to be (mallory)")
    );
    assert_eq!(p.detail, Some(RpcErrorCodeProto::FatalUnauthorized));
    // six refused negotiations, and the TOKEN context claiming another user
    let m = server.metrics();
    assert_eq!((m.auth_failures, m.auth_successes), (7, 1), "{m:?}");
    assert_eq!(m.oversized_frames, 1);
    server.shutdown();
}
