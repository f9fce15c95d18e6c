//! SASL on our own server and client: TOKEN (DIGEST-MD5) at every protection level, on both
//! backends, and every refusal the server must make (each closes only its own connection and
//! is counted). Java's client and server are checked against these in `peers/`.

use crate::server_support;

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
use hadoop_wire::sasl::server::{ServerAuth, TokenPassword, TokenSecrets};
use hadoop_wire::sasl::{Qop, SaslError};
use hadoop_wire::token::delegation::{
    DelegationConfig, DelegationTokenSecretManager, DelegationTokenSecrets,
};
use hadoop_wire::token::identifier::{NmTokenIdentifier, NodeId};
use hadoop_wire::token::secret::NmTokenSecretManager;
use hadoop_wire::token::{MasterKey, TokenIdentifier};
use hadoop_wire::yarn::ids::{AppId, AttemptId};
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
    // `context`: the token context the connection kept (its text and where it lives)
    r.register(
        bench::PROTOCOL,
        bench::VERSION,
        "context",
        |call: &ipc::server::Call<'_>, reply: &mut ipc::server::Reply<'_, '_>| {
            let s = match call.token_context {
                Some(c) => format!(
                    "{} @{:p}",
                    c.downcast_ref::<String>().map_or("?", String::as_str),
                    c
                ),
                None => "-".into(),
            };
            reply.bytes(s.as_bytes())?;
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
            // what the secrets made of the token at authentication, the same for every call
            let ctx = |c: &Client| {
                let r = c.call("context", &[]).unwrap();
                String::from_utf8(r.payload().to_vec()).unwrap()
            };
            let first = ctx(&c);
            assert!(first.starts_with(":node-1:8041 @"), "{first}");
            assert_eq!(ctx(&c), first);
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
    let (s, r) = raw_sasl_with(addr, token(KEY), qop, |_| {});
    (s, r.expect("authenticated"))
}

/// A raw SASL negotiation with `cred` at `qop`; `tamper` may change each message before it is
/// sent. Returns the socket and the security layer, or the FATAL the server answered with.
#[allow(clippy::type_complexity)]
fn raw_sasl_with(
    addr: SocketAddr,
    cred: TokenCredential,
    qop: Qop,
    mut tamper: impl FnMut(&mut hadoop_wire::pb::hadoop::common::RpcSaslProto),
) -> (
    std::net::TcpStream,
    Result<Option<Box<dyn hadoop_wire::sasl::SecurityLayer>>, Parsed>,
) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut neg = ClientNegotiation::new(ClientAuth::token(cred, vec![qop]));
    let mut b = Vec::new();
    encode::sasl_preamble(&mut b, 0);
    message::client_frame(&mut b, &neg.start()).unwrap();
    s.write_all(&b).unwrap();
    let responses = Responses::new(1 << 20, StateIdCell::new());
    let mut rng = SeededEntropy(5);
    loop {
        let body = read_frame(&mut s).expect("a SASL reply");
        let p = parse_response(&body);
        if p.status == RpcStatusProto::Fatal {
            return (s, Err(p));
        }
        let r = responses.reply(&body).unwrap();
        match neg
            .on_reply(r.call_id, r.result.unwrap(), &mut rng)
            .unwrap()
        {
            ClientStep::Send(mut m) => {
                tamper(&mut m);
                let mut b = Vec::new();
                message::client_frame(&mut b, &m).unwrap();
                s.write_all(&b).unwrap();
            }
            ClientStep::Done(o) => return (s, Ok(o.layer)),
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

// ---------------------------------------------------------------------------------------------
// Bad input, one case at a time: each refusal names Java's exception class and text (ours,
// documented in `ipc::server`, where Java has none), closes the bad connection, counts exactly
// one authentication failure, and leaves a privacy connection authenticated before it served
// on that same connection.

/// The NodeId the NMTokens of these tests name.
fn nm_node() -> NodeId {
    NodeId::new("127.0.0.1", 8041)
}

const NM_KEY_ID: i32 = 7;
const NM_KEY: [u8; 8] = [9, 8, 7, 6, 5, 4, 3, 2];

fn nm_attempt() -> AttemptId {
    AttemptId {
        app: AppId {
            cluster_timestamp: 1_700_000_000_000,
            id: 2,
        },
        attempt: 1,
    }
}

/// An NMToken naming key `key_id`, its password made with `key`.
fn nm_token(key_id: i32, key: &[u8]) -> TokenCredential {
    let id = NmTokenIdentifier::new(Some(nm_attempt()), Some(&nm_node()), "bob", key_id);
    TokenCredential {
        password: MasterKey::new(key_id, key.to_vec())
            .unwrap()
            .password(id.bytes())
            .to_vec(),
        identifier: id.bytes().to_vec(),
    }
}

/// When the expired delegation token below was issued, and the server's fixed clock: one
/// millisecond past its renew date (issue + `dfs.namenode.delegation.token.renew-interval`).
const DT_ISSUED: i64 = 1_767_225_600_000; // 2026-01-01 00:00:00 UTC
const DT_NOW: i64 = DT_ISSUED + 86_400_000 + 1;

/// Java's text for it (`AbstractDelegationTokenSecretManager.checkToken`, hadoop-common 3.5.0:
/// "Token <realUser> has expired, current time: <now> expected renewal time: <renewDate>").
const EXPIRED_TEXT: &str = "Token oozie has expired, current time: 2026-01-02 00:00:00,001+0000 expected renewal time: 2026-01-02 00:00:00,000+0000";

/// The HDFS delegation-token secret manager of the bad-input server, with one token issued at
/// `DT_ISSUED` and never renewed, and its clock fixed at `DT_NOW`. Seeded, so two calls make
/// the same keys and the same token: the server holds one, the test's client the other's token.
fn expired_delegation() -> (DelegationTokenSecrets<fn() -> i64>, TokenCredential) {
    let mut m = DelegationTokenSecretManager::started(
        DelegationConfig::default(),
        &mut SeededEntropy(11),
        DT_ISSUED,
    )
    .unwrap();
    let (_, token) = m.create_token("alice", "yarn", "oozie", DT_ISSUED).unwrap();
    let clock: fn() -> i64 = || DT_NOW;
    let credential = TokenCredential {
        identifier: token.identifier,
        password: token.password,
    };
    (DelegationTokenSecrets::new(m, clock), credential)
}

/// The bad-input server's secrets: HDFS delegation tokens (their identifiers start with the
/// version byte 0) through the real delegation-token secret manager; test tokens (`USER…`)
/// with the HMAC key; everything else as NMTokens through the NodeManager's real secret manager.
struct BadInputSecrets {
    nm: std::sync::RwLock<NmTokenSecretManager>,
    delegation: DelegationTokenSecrets<fn() -> i64>,
    test: Secrets,
}

impl TokenSecrets for BadInputSecrets {
    fn retrieve(&self, identifier: &[u8]) -> Result<TokenPassword, SaslError> {
        if identifier.first() == Some(&0) {
            return self.delegation.retrieve(identifier);
        }
        if identifier.starts_with(USER.as_bytes()) {
            return self.test.retrieve(identifier);
        }
        self.nm.retrieve(identifier)
    }
}

fn bad_input_server(backend: BackendChoice) -> Server {
    let mut nm = NmTokenSecretManager::default();
    nm.set_node_id(nm_node());
    nm.set_master_key(MasterKey::new(NM_KEY_ID, NM_KEY.to_vec()).unwrap());
    let secrets = BadInputSecrets {
        nm: std::sync::RwLock::new(nm),
        delegation: expired_delegation().0,
        test: Secrets { key: KEY.to_vec() },
    };
    let auth = ServerAuth::new(
        AuthMethod::Token,
        Some(Arc::new(secrets)),
        vec![Qop::AuthConf, Qop::AuthInt, Qop::Auth],
    )
    .unwrap();
    start(backend, sasl_registry(), |c: &mut ServerConfig| {
        c.auth = Arc::new(auth);
    })
}

/// What a refused client was told: a FATAL's call id (when seen on the wire), class, text and
/// detail.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Told {
    call_id: Option<i32>,
    class: String,
    message: String,
    detail: Option<RpcErrorCodeProto>,
}

impl Told {
    fn expect(call_id: Option<i32>, class: &str, message: &str, detail: RpcErrorCodeProto) -> Self {
        Told {
            call_id,
            class: class.into(),
            message: message.into(),
            detail: Some(detail),
        }
    }
}

/// A FATAL read off the wire.
fn told(p: Parsed) -> Told {
    assert_eq!(p.status, RpcStatusProto::Fatal, "{p:?}");
    Told {
        call_id: Some(p.call_id),
        class: p.class,
        message: p.message,
        detail: p.detail,
    }
}

/// A FATAL as our client reports it.
fn told_client(e: ClientError) -> Told {
    match e {
        ClientError::Remote {
            status,
            class,
            message,
            detail,
        } => {
            assert_eq!(status, RpcStatusProto::Fatal);
            Told {
                call_id: None,
                class,
                message,
                detail,
            }
        }
        other => panic!("not a FATAL: {other:?}"),
    }
}

/// Waits (up to 10 s) until the server holds exactly `want` connections.
fn wait_open(server: &Server, want: u64, what: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let open = server.metrics().transport.open_connections;
        if open == want {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: {open} connections open, want {want}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// When a bad connection misbehaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum When {
    /// During negotiation: it never authenticates.
    Negotiating,
    /// On its protected stream, after its own SUCCESS.
    AfterSuccess,
}

/// One bad case against `server`: a privacy connection authenticates first; then `bad`
/// misbehaves on a connection of its own (raw cases check the server closed it) and returns
/// what it was told, which must be `want`. Afterwards exactly one more authentication
/// failure and no other authentication (but the bad connection's own when it misbehaves
/// after SUCCESS), the bad connection gone from the server, and the privacy connection still
/// served on the same connection (a reconnect would authenticate again).
fn one_bad_case(
    server: &Server,
    name: &str,
    when: When,
    want: Told,
    bad: impl FnOnce(SocketAddr) -> Told,
) {
    let bad_successes = u64::from(when == When::AfterSuccess);
    eprintln!("-- {name}");
    let addr = server.local_addr();
    wait_open(server, 0, name);
    let privacy = token_client(addr, token(KEY), vec![Qop::AuthConf]);
    assert!(whoami(&privacy).starts_with(USER), "{name}");
    let before = server.metrics();
    assert_eq!(bad(addr), want, "{name}");
    wait_open(server, 1, name);
    let after = server.metrics();
    assert_eq!(
        after.auth_failures - before.auth_failures,
        1,
        "{name}: auth_failures"
    );
    assert_eq!(
        after.auth_successes - before.auth_successes,
        bad_successes,
        "{name}: auth_successes"
    );
    echo_checked(&privacy, 70_000);
    assert!(whoami(&privacy).starts_with(USER), "{name}");
    let last = server.metrics();
    assert_eq!(
        (last.auth_successes, last.auth_failures),
        (after.auth_successes, after.auth_failures),
        "{name}: the earlier connection reconnected"
    );
    drop(privacy);
}

/// A connection refused during negotiation, through our client.
fn client_refused(addr: SocketAddr, cred: TokenCredential) -> Told {
    let c = token_client(addr, cred, vec![Qop::AuthConf]);
    let e = c.call("whoami", &[]).unwrap_err();
    drop(c);
    told_client(e)
}

/// A raw connection: the SASL preamble and `frames` in one write, then the first FATAL, and
/// the server closes.
fn raw_refused(addr: SocketAddr, frames: &[u8], after_first_reply: Option<&[u8]>) -> Told {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut b = Vec::new();
    encode::sasl_preamble(&mut b, 0);
    b.extend_from_slice(frames);
    s.write_all(&b).unwrap();
    if let Some(more) = after_first_reply {
        let p = parse_response(&read_frame(&mut s).expect("the NEGOTIATE reply"));
        assert_eq!(p.status, RpcStatusProto::Success);
        s.write_all(more).unwrap();
    }
    let p = parse_response(&read_frame(&mut s).expect("a FATAL"));
    assert!(closed_by_server(&mut s), "not closed");
    told(p)
}

fn sasl_frame(m: &hadoop_wire::pb::hadoop::common::RpcSaslProto) -> Vec<u8> {
    let mut b = Vec::new();
    message::client_frame(&mut b, m).unwrap();
    b
}

/// A protected connection whose first WRAP packet is sent as `packets` makes of it; returns the
/// FATAL (wrapped, as everything after SUCCESS) after `answers` wrapped answers.
fn protected_refused(
    addr: SocketAddr,
    qop: Qop,
    packets: impl FnOnce(Vec<u8>) -> Vec<Vec<u8>>,
    answers: usize,
) -> Told {
    let (mut s, layer) = raw_sasl(addr, qop);
    let mut layer = layer.expect("a security layer");
    let mut token = Vec::new();
    layer.wrap(&context_and_call(), &mut token).unwrap();
    let mut b = Vec::new();
    for t in packets(token) {
        message::client_wrap_frame(&mut b, &t).unwrap();
    }
    s.write_all(&b).unwrap();
    for _ in 0..answers {
        let p = read_wrapped(&mut s, layer.as_mut());
        assert_eq!((p.status, p.call_id), (RpcStatusProto::Success, 0));
    }
    let p = read_wrapped(&mut s, layer.as_mut());
    assert!(closed_by_server(&mut s), "not closed");
    told(p)
}

const SASL: &str = "javax.security.sasl.SaslException";
const INVALID_TOKEN: &str = "org.apache.hadoop.security.token.SecretManager$InvalidToken";
const ACE: &str = "org.apache.hadoop.security.AccessControlException";
const FATAL_RPC: &str = "org.apache.hadoop.ipc.Server$FatalRpcServerException";

#[test]
fn every_bad_input_is_refused_alone_and_counted_once() {
    use RpcErrorCodeProto::{FatalInvalidRpcHeader as Inval, FatalUnauthorized as Unauth};
    for_each_backend(|backend| {
        let server = bad_input_server(backend);
        let mismatched = "DIGEST-MD5: digest response format violation. Mismatched response.";

        // wrong DIGEST response: one hex digit of `response=` changed (the JDK's text)
        one_bad_case(
            &server,
            "wrong DIGEST response",
            When::Negotiating,
            Told::expect(Some(-33), SASL, mismatched, Unauth),
            |addr| {
                let (mut s, r) = raw_sasl_with(addr, token(KEY), Qop::AuthConf, |m| {
                    if m.state == SaslState::Initiate as i32 {
                        let t = m.token.as_mut().unwrap();
                        let at = t.windows(9).position(|w| w == b"response=").unwrap() + 9;
                        t[at] = if t[at] == b'0' { b'1' } else { b'0' };
                    }
                });
                let p = r.err().expect("refused");
                assert!(closed_by_server(&mut s));
                told(p)
            },
        );

        // forged token: the right key id, a password made with another key
        one_bad_case(
            &server,
            "forged NMToken",
            When::Negotiating,
            Told::expect(None, SASL, mismatched, Unauth),
            |addr| client_refused(addr, nm_token(NM_KEY_ID, b"notthekey")),
        );
        // the real NMToken is accepted (the forged one failed on its password alone); its
        // user is the attempt, as Java's NMTokenIdentifier.getUser says
        let c = token_client(
            server.local_addr(),
            nm_token(NM_KEY_ID, &NM_KEY),
            vec![Qop::AuthInt],
        );
        assert_eq!(
            whoami(&c),
            format!(
                "{} TOKEN {}",
                nm_attempt(),
                nm_token(NM_KEY_ID, &NM_KEY).identifier.len()
            )
        );
        drop(c);

        // a key the server does not hold (NMTokenSecretManagerInNM's text)
        one_bad_case(
            &server,
            "unknown-key NMToken",
            When::Negotiating,
Told::expect(
                None,
                INVALID_TOKEN,
                "Given NMToken for application : appattempt_1700000000000_0002_000001 seems to have been generated illegally.",
                Unauth,
            ),
            |addr| client_refused(addr, nm_token(NM_KEY_ID + 1, &NM_KEY)),
        );

        // an expired token: an HDFS delegation token past its renew date, refused by the real
        // delegation-token secret manager with Java's class and text
        one_bad_case(
            &server,
            "expired token",
            When::Negotiating,
            Told::expect(None, INVALID_TOKEN, EXPIRED_TEXT, Unauth),
            |addr| client_refused(addr, expired_delegation().1),
        );

        for qop in [Qop::AuthInt, Qop::AuthConf] {
            // a bad MAC: the JDK would drop the packet silently (and the peer wait); we answer
            // with a wrapped FATAL and close. The flipped byte is in the first block, so at
            // auth-conf the padding still checks and the MAC does not.
            one_bad_case(
                &server,
                &format!("bad MAC at {qop:?}"),
                When::AfterSuccess,
                Told::expect(Some(-33), SASL, "DIGEST-MD5: Unmatched MACs", Unauth),
                |addr| {
                    protected_refused(
                        addr,
                        qop,
                        |mut t| {
                            t[0] ^= 1;
                            vec![t]
                        },
                        0,
                    )
                },
            );
        }

        // a replayed packet: its sequence number was used (the JDK's text, "from server" on
        // both sides) ...
        one_bad_case(
            &server,
            "replayed sequence number at AuthInt",
            When::AfterSuccess,
            Told::expect(
                Some(-33),
                SASL,
                "DIGEST-MD5: Out of order sequencing of messages from server. Got: 0 Expected: 1",
                Unauth,
            ),
            |addr| protected_refused(addr, Qop::AuthInt, |t| vec![t.clone(), t], 1),
        );
        // ... and at auth-conf the CBC chain carried across packets garbles the replay's first
        // block, so it fails its MAC before its sequence number is looked at
        one_bad_case(
            &server,
            "replayed packet at AuthConf",
            When::AfterSuccess,
            Told::expect(Some(-33), SASL, "DIGEST-MD5: Unmatched MACs", Unauth),
            |addr| protected_refused(addr, Qop::AuthConf, |t| vec![t.clone(), t], 1),
        );

        // an oversized SASL message: refused on the frame's length, before its body is read
        // (only 16 bytes of the claimed MiB are ever sent)
        let negotiate = sasl_frame(&message::message(SaslState::Negotiate));
        let before = server.metrics().oversized_frames;
        one_bad_case(
            &server,
            "oversized SASL frame",
            When::Negotiating,
Told::expect(
                Some(-1),
                SASL,
                "Requested data length 1048576 is longer than maximum SASL negotiation length 66560.",
                Unauth,
            ),
            |addr| {
                let mut big = (1u32 << 20).to_be_bytes().to_vec();
                big.extend_from_slice(&[0; 16]);
                raw_refused(addr, &negotiate, Some(&big))
            },
        );
        assert_eq!(server.metrics().oversized_frames, before + 1);
        // a message over the 64 KiB cap in a frame under the frame cap: refused on its size
        let mut init = message::message(SaslState::Initiate);
        init.token = Some(vec![b'a'; 65_600]);
        let frame = sasl_frame(&init);
        let len = prost::Message::encoded_len(&init);
        one_bad_case(
            &server,
            "oversized SASL message",
            When::Negotiating,
            Told::expect(
                Some(-33),
                SASL,
                &format!("SASL message of {len} bytes exceeds the limit of 65536"),
                Unauth,
            ),
            |addr| raw_refused(addr, &negotiate, Some(&frame)),
        );

        // out of order: RESPONSE before INITIATE (Java: "Client did not send a token" without a
        // token, a NullPointerException and no reply with one; ours names the order) ...
        let mut response = message::message(SaslState::Response);
        response.token = Some(b"x".to_vec());
        one_bad_case(
            &server,
            "RESPONSE first",
            When::Negotiating,
            Told::expect(
                Some(-33),
                SASL,
                "Client sent RESPONSE before INITIATE",
                Unauth,
            ),
            |addr| raw_refused(addr, &sasl_frame(&response), None),
        );
        // ... NEGOTIATE twice ...
        one_bad_case(
            &server,
            "NEGOTIATE twice",
            When::Negotiating,
            Told::expect(
                Some(-33),
                ACE,
                "Client already attempted negotiation",
                Unauth,
            ),
            |addr| raw_refused(addr, &negotiate, Some(&negotiate)),
        );
        // ... a call before SUCCESS (Java's processOneRpc) ...
        let call = call_frame(0, bench::PROTOCOL, bench::VERSION, bench::ECHO, b"x");
        one_bad_case(
            &server,
            "call before SUCCESS",
            When::Negotiating,
            Told::expect(
                Some(0),
                FATAL_RPC,
                "Connection context not established",
                Inval,
            ),
            |addr| raw_refused(addr, &negotiate, Some(&call)),
        );
        // ... and the connection context before SUCCESS
        let mut ctx = Vec::new();
        encode::connection_context_frame(&mut ctx, &CLIENT_ID, &Default::default()).unwrap();
        one_bad_case(
            &server,
            "context before SUCCESS",
            When::Negotiating,
            Told::expect(
                Some(-3),
                FATAL_RPC,
                "Connection header sent during SASL negotiation",
                Inval,
            ),
            |addr| raw_refused(addr, &negotiate, Some(&ctx)),
        );
        // fourteen cases, each counted once, and what /metrics shows of them
        let m = server.metrics();
        assert_eq!(m.auth_failures, 14);
        let mut e = ipc::metrics::Exposition::new();
        e.ipc_servers("hotpath_test", &[("sasl", m)]);
        assert!(
            e.as_str()
                .contains("hotpath_test_ipc_auth_failures_total{server=\"sasl\"} 14\n"),
            "{}",
            e.as_str()
        );
        server.shutdown();
    });
}

/// Our client refuses a server's negotiation reply over the cap on its length, without reading
/// (or allocating for) the body.
#[test]
fn the_client_refuses_an_oversized_negotiation_reply_before_reading_it() {
    use std::io::Read;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        // the preamble and NEGOTIATE
        let mut head = [0u8; 7 + 18];
        s.read_exact(&mut head).unwrap();
        // a reply claiming 100 MB (under the general response cap), then silence
        s.write_all(&100_000_000u32.to_be_bytes()).unwrap();
        s.write_all(&[0; 16]).unwrap();
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
    });
    let mut cfg = client_config();
    cfg.auth = ClientAuth::token(token(KEY), vec![Qop::Auth]);
    cfg.max_connect_attempts = 1;
    cfg.call_timeout = Duration::from_secs(5);
    let c = Client::new(addr, cfg);
    let t0 = std::time::Instant::now();
    let e = c.call("whoami", &[]).unwrap_err();
    assert!(t0.elapsed() < Duration::from_secs(4), "waited for the body");
    assert!(
        e.to_string()
            .contains("SASL reply of 100000000 bytes exceeds the limit of 66560"),
        "{e}"
    );
    drop(c);
    server.join().unwrap();
}
