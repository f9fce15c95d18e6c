//! SASL against real Hadoop 3.5: our IPC client against Hadoop's own TOKEN-only
//! ContainerManagementProtocol servers (the real `NMTokenSecretManagerInNM`, one server per
//! `hadoop.rpc.protection`), with NMTokens minted by Hadoop's code. One JVM for the file.

use std::net::SocketAddr;
use std::time::Duration;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use hadoop_wire::pb::hadoop::common::rpc_response_header_proto::{
    RpcErrorCodeProto, RpcStatusProto,
};
use hadoop_wire::reader::{Reader, WireType};
use hadoop_wire::sasl::client::{ClientAuth, TokenCredential};
use hadoop_wire::sasl::Qop;
use hadoop_wire::writer::{Encode, Sink};
use hadoop_wire::yarn::ids::ContainerId;
use ipc::client::{Client, ClientConfig, ClientError};
use peer_harness::{Mode, Peer, Shared};
use serde_json::Value;

const KEY_HEX: &str = "8899aabbccddeeff";
const ATTEMPT: &str = "appattempt_1700000000000_0042_000001";
const PROTOCOL: &str = "org.apache.hadoop.yarn.api.ContainerManagementProtocolPB";

static SASL: Shared = Shared::new(Mode::Sasl, &["--nm-key-id", "11", "--nm-key", KEY_HEX]);

const LEVELS: [(&str, Qop); 3] = [
    ("authentication", Qop::Auth),
    ("integrity", Qop::AuthInt),
    ("privacy", Qop::AuthConf),
];

fn unb64(v: &Value) -> Vec<u8> {
    B64.decode(v.as_str().expect("base64 string"))
        .expect("base64")
}

/// An NMToken for the node at `addr`, minted by Hadoop (the peer's shared master key).
fn mint(peer: &mut Peer, addr: SocketAddr) -> TokenCredential {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("nm.token");
    let r = peer
        .command(&format!(
            "mint-nm-token {addr} {ATTEMPT} hotpath {}",
            file.display()
        ))
        .expect("mint-nm-token");
    TokenCredential {
        identifier: unb64(&r["identifier"]),
        password: unb64(&r["password"]),
    }
}

fn client(addr: SocketAddr, token: TokenCredential, qops: Vec<Qop>) -> Client {
    Client::new(
        addr,
        ClientConfig {
            protocol: PROTOCOL.into(),
            protocol_version: 1,
            user: "someone-else".into(),
            call_timeout: Duration::from_secs(60),
            max_connect_attempts: 1,
            auth: ClientAuth::token(token, qops),
            ..ClientConfig::default()
        },
    )
}

/// `GetContainerStatusesRequestProto { repeated ContainerIdProto container_id = 1 }`.
struct StatusesRequest<'a>(&'a [ContainerId]);

impl Encode for StatusesRequest<'_> {
    fn encode<S: Sink>(&self, s: &mut S) {
        for id in self.0 {
            s.message(1, id);
        }
    }
}

fn container(i: i64) -> ContainerId {
    ContainerId::parse(&format!("container_1700000000000_0042_01_{i:06}")).unwrap()
}

/// The messages of `GetContainerStatusesResponseProto.failed_requests[*].exception.message`
/// (the peer's server puts who authenticated there).
fn failed_messages(response: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    let mut r = Reader::new(response);
    while !r.is_empty() {
        let (f, wt) = r.read_tag().unwrap();
        if (f, wt) != (2, WireType::Len) {
            r.skip(f, wt, 0).unwrap();
            continue;
        }
        let mut map = Reader::new(r.read_len().unwrap());
        while !map.is_empty() {
            let (f, wt) = map.read_tag().unwrap();
            if (f, wt) != (2, WireType::Len) {
                map.skip(f, wt, 0).unwrap();
                continue;
            }
            let mut ex = Reader::new(map.read_len().unwrap());
            while !ex.is_empty() {
                let (f, wt) = ex.read_tag().unwrap();
                if (f, wt) == (1, WireType::Len) {
                    out.push(String::from_utf8(ex.read_len().unwrap().to_vec()).unwrap());
                } else {
                    ex.skip(f, wt, 0).unwrap();
                }
            }
        }
    }
    out
}

fn statuses(c: &Client, ids: &[ContainerId]) -> Result<Vec<String>, ClientError> {
    let mut req = Vec::new();
    hadoop_wire::writer::write(&mut req, &StatusesRequest(ids));
    let r = c.call("getContainerStatuses", &req)?;
    Ok(failed_messages(r.payload()))
}

#[test]
fn our_client_calls_hadoops_token_servers_at_every_protection_level() {
    let mut peer = SASL.lock().expect("sasl peer");
    for (name, qop) in LEVELS {
        let addr = peer.sasl_server(name).unwrap();
        let c = client(addr, mint(&mut peer, addr), vec![qop]);
        let m = statuses(&c, &[container(1)]).unwrap();
        // Hadoop's server saw the token's user, authenticated by TOKEN (the configured user
        // is not claimed)
        assert_eq!(m, [format!("user={ATTEMPT} auth=TOKEN ids=1")], "{name}");
        // a request of several WRAP packets (≈ 25 bytes per id), and calls in flight
        let many: Vec<ContainerId> = (1..=6000).map(container).collect();
        let m = statuses(&c, &many).unwrap();
        assert_eq!(m.len(), 6000, "{name}");
        assert!(m[0].ends_with("ids=6000"), "{name}: {}", m[0]);
        let calls: Vec<_> = (0..16)
            .map(|_| {
                let mut req = Vec::new();
                hadoop_wire::writer::write(&mut req, &StatusesRequest(&[container(7)]));
                c.start_call(
                    PROTOCOL,
                    1,
                    "getContainerStatuses",
                    &req,
                    Duration::from_secs(60),
                )
                .unwrap()
            })
            .collect();
        for p in calls {
            let r = p.wait().unwrap();
            assert_eq!(failed_messages(r.payload()).len(), 1);
        }
    }
}

#[test]
fn the_client_picks_its_preferred_level_among_the_servers() {
    let mut peer = SASL.lock().expect("sasl peer");
    // a client preferring privacy but accepting authentication, against the authentication
    // server: authentication
    let addr = peer.sasl_server("authentication").unwrap();
    let c = client(addr, mint(&mut peer, addr), vec![Qop::AuthConf, Qop::Auth]);
    assert_eq!(statuses(&c, &[container(1)]).unwrap().len(), 1);
    // privacy only against the authentication server: the JDK's refusal, on our side
    let c = client(addr, mint(&mut peer, addr), vec![Qop::AuthConf]);
    let e = statuses(&c, &[container(1)]).unwrap_err();
    assert!(
        e.to_string()
            .contains("DIGEST-MD5: No common protection layer between client and server"),
        "{e}"
    );
}

#[test]
fn hadoops_server_refuses_bad_tokens_and_we_report_its_exception() {
    let mut peer = SASL.lock().expect("sasl peer");
    for (name, qop) in LEVELS {
        let addr = peer.sasl_server(name).unwrap();
        // the right identifier, a wrong password
        let mut t = mint(&mut peer, addr);
        t.password[0] ^= 0x55;
        let e = statuses(&client(addr, t, vec![qop]), &[container(1)]).unwrap_err();
        match &e {
            ClientError::Remote {
                status,
                class,
                message,
                detail,
            } => {
                assert_eq!(*status, RpcStatusProto::Fatal);
                assert_eq!(class, "javax.security.sasl.SaslException", "{name}");
                assert_eq!(
                    message,
                    "DIGEST-MD5: digest response format violation. Mismatched response."
                );
                assert_eq!(*detail, Some(RpcErrorCodeProto::FatalUnauthorized));
            }
            other => panic!("{name}: {other:?}"),
        }
        // a token for another node
        let other_node: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let t = mint(&mut peer, other_node);
        let e = statuses(&client(addr, t, vec![qop]), &[container(1)]).unwrap_err();
        assert_eq!(
            e.remote_class(),
            Some("org.apache.hadoop.security.token.SecretManager$InvalidToken"),
            "{e}"
        );
        assert!(
            e.to_string()
                .contains("is not valid for current node manager"),
            "{e}"
        );
    }
    // without a token, a SIMPLE client is refused with Hadoop's text
    let addr = peer.sasl_server("authentication").unwrap();
    let c = Client::new(
        addr,
        ClientConfig {
            protocol: PROTOCOL.into(),
            max_connect_attempts: 1,
            ..ClientConfig::default()
        },
    );
    let e = statuses(&c, &[container(1)]).unwrap_err();
    // Java sends its FATAL and closes. The FATAL reaches us as the call's error, or as the
    // reason the connection closed when our reader took it before the call was queued; and
    // when Java closes with our unread call in its buffer, the kernel resets the connection
    // and may drop the FATAL before we read it (TCP, not us). Only that last case has no
    // text to check.
    let text = e.to_string();
    let reset = matches!(&e, ipc::client::ClientError::ConnectionLost(m) if m.contains("reset") || m.contains("Broken pipe") || m.contains("write failed"));
    assert!(
        e.remote_class() == Some("org.apache.hadoop.security.AccessControlException")
            || text.contains("SIMPLE authentication is not enabled.  Available:[TOKEN]")
            || reset,
        "{e}"
    );
}

// ---------------------------------------------------------------------------------------------
// Hadoop's Java client against our server

use std::sync::{Arc, RwLock};

use hadoop_wire::sasl::message::AuthMethod;
use hadoop_wire::sasl::server::ServerAuth;
use hadoop_wire::token::credentials::{Credentials, Format};
use hadoop_wire::token::identifier::{NmTokenIdentifier, NodeId};
use hadoop_wire::token::secret::{MasterKey, MasterKeys, NmTokenSecretManager};
use hadoop_wire::token::KIND_NM;
use hadoop_wire::yarn::ids::AttemptId;
use ipc::server::{Call, Registry, Reply, Server, ServerConfig};

const KEY_ID: i32 = 11;

fn key_bytes() -> Vec<u8> {
    (0..8)
        .map(|i| u8::from_str_radix(&KEY_HEX[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

/// `SerializedExceptionProto { message = 1 }` inside `ContainerExceptionMapProto { 1 id, 2 exception }`.
struct Failed<'a> {
    id: &'a [u8],
    message: &'a str,
}

impl Encode for Failed<'_> {
    fn encode<S: Sink>(&self, s: &mut S) {
        s.bytes(1, self.id);
        struct Ex<'a>(&'a str);
        impl Encode for Ex<'_> {
            fn encode<S: Sink>(&self, s: &mut S) {
                s.string(1, self.0);
            }
        }
        s.message(2, &Ex(self.message));
    }
}

/// Our ContainerManagementProtocol stand-in for this test: `getContainerStatuses` answers, like
/// the peer's Java server, a failure per container naming who authenticated.
fn who_registry() -> Registry {
    let mut r = Registry::new();
    r.register(
        PROTOCOL,
        1,
        "getContainerStatuses",
        |call: &Call<'_>, reply: &mut Reply<'_, '_>| {
            let mut ids = Vec::new();
            let mut rd = Reader::new(call.request);
            while !rd.is_empty() {
                let (f, wt) = rd
                    .read_tag()
                    .map_err(ipc::server::CallError::invalid_request)?;
                if (f, wt) == (1, WireType::Len) {
                    ids.push(
                        rd.read_len()
                            .map_err(ipc::server::CallError::invalid_request)?,
                    );
                } else {
                    rd.skip(f, wt, 0)
                        .map_err(ipc::server::CallError::invalid_request)?;
                }
            }
            let message = format!(
                "user={} auth={} ids={}",
                call.user.unwrap_or("-"),
                call.auth_method,
                ids.len()
            );
            struct Resp<'a>(&'a [&'a [u8]], &'a str);
            impl Encode for Resp<'_> {
                fn encode<S: Sink>(&self, s: &mut S) {
                    for id in self.0 {
                        s.message(
                            2,
                            &Failed {
                                id,
                                message: self.1,
                            },
                        );
                    }
                }
            }
            let mut out = Vec::new();
            hadoop_wire::writer::write(&mut out, &Resp(&ids, &message));
            reply.bytes(&out)?;
            Ok(())
        },
    );
    r
}

/// Our TOKEN-only server at `qop`, with a NodeManager's NMToken secret manager holding the
/// peer's master key and our address as its NodeId.
fn our_nm_server(qop: Qop) -> (Server, Arc<RwLock<NmTokenSecretManager>>) {
    let secrets = Arc::new(RwLock::new(NmTokenSecretManager::default()));
    secrets
        .write()
        .unwrap()
        .set_master_key(MasterKey::new(KEY_ID, key_bytes()).unwrap());
    let auth = ServerAuth::new(AuthMethod::Token, Some(secrets.clone()), vec![qop]).unwrap();
    let server = Server::start(
        "127.0.0.1:0".parse().unwrap(),
        ServerConfig {
            auth: Arc::new(auth),
            ..ServerConfig::default()
        },
        who_registry(),
    )
    .unwrap();
    let addr = server.local_addr();
    secrets
        .write()
        .unwrap()
        .set_node_id(NodeId::new(addr.ip().to_string(), i32::from(addr.port())));
    (server, secrets)
}

/// An NMToken minted by us for `addr` with `key`, in a Credentials file of `format`.
fn our_token_file(dir: &std::path::Path, addr: SocketAddr, key: &[u8], format: Format) -> String {
    let mut keys = MasterKeys::new();
    keys.set_master_key(MasterKey::new(KEY_ID, key.to_vec()).unwrap());
    // appattempt_1700000000000_0042_000001
    let attempt = AttemptId {
        app: hadoop_wire::yarn::ids::AppId {
            cluster_timestamp: 1_700_000_000_000,
            id: 42,
        },
        attempt: 1,
    };
    assert_eq!(attempt.to_string(), ATTEMPT);
    let node = NodeId::new(addr.ip().to_string(), i32::from(addr.port()));
    let id = NmTokenIdentifier::new(Some(attempt), Some(&node), "hotpath", KEY_ID);
    let service = addr.to_string();
    let token = keys.token(&id, &service).unwrap();
    let mut creds = Credentials::default();
    creds.add_token(&service, token);
    let path = dir.join(format!("ours-{}-{format:?}.token", addr.port()));
    std::fs::write(&path, creds.write(format)).unwrap();
    path.display().to_string()
}

#[test]
fn hadoops_client_calls_our_server_at_every_protection_level() {
    let mut peer = SASL.lock().expect("sasl peer");
    let dir = tempfile::tempdir().unwrap();
    for (name, qop) in LEVELS {
        let (server, _secrets) = our_nm_server(qop);
        let addr = server.local_addr();
        // a token minted by Hadoop for our node, in Hadoop's Credentials file; our reader
        // finds the same token in it
        let file = dir.path().join(format!("java-{name}.token"));
        let minted = peer
            .command(&format!(
                "mint-nm-token {addr} {ATTEMPT} hotpath {}",
                file.display()
            ))
            .unwrap();
        let creds = Credentials::read(&std::fs::read(&file).unwrap()).unwrap();
        let t = creds.find(KIND_NM, &addr.to_string()).expect("the NMToken");
        assert_eq!(t.identifier, unb64(&minted["identifier"]));
        assert_eq!(t.password, unb64(&minted["password"]));
        let r = peer
            .command(&format!("call {addr} {} {name}", file.display()))
            .unwrap();
        let want = format!("user={ATTEMPT} auth=TOKEN ids=1");
        assert_eq!(
            r["failed"].as_object().unwrap().values().next().unwrap(),
            &want,
            "{name}: {r}"
        );
        // tokens minted by us, in our Credentials files (both formats), read by Hadoop
        for format in [Format::Writable, Format::Protobuf] {
            let ours = our_token_file(dir.path(), addr, &key_bytes(), format);
            let read = peer.command(&format!("read-credentials {ours}")).unwrap();
            assert_eq!(read["tokens"][0]["kind"], "NMToken");
            assert_eq!(read["tokens"][0]["nm_token"]["app_attempt_id"], ATTEMPT);
            assert_eq!(read["tokens"][0]["nm_token"]["key_id"], KEY_ID);
            let r = peer
                .command(&format!("call {addr} {ours} {name} container_1700000000000_0042_01_000001 container_1700000000000_0042_01_000002"))
                .unwrap();
            let failed = r["failed"].as_object().unwrap();
            assert_eq!(failed.len(), 2, "{r}");
            for m in failed.values() {
                assert_eq!(m, &format!("user={ATTEMPT} auth=TOKEN ids=2"));
            }
        }
        let m = server.metrics();
        assert_eq!((m.auth_successes, m.auth_failures), (3, 0), "{name}");
        server.shutdown();
    }
}

#[test]
fn our_server_refuses_bad_tokens_as_hadoops_does() {
    let mut peer = SASL.lock().expect("sasl peer");
    let dir = tempfile::tempdir().unwrap();
    for (name, qop) in LEVELS {
        let (server, _secrets) = our_nm_server(qop);
        let ours = server.local_addr();
        let java = peer.sasl_server(name).unwrap();
        // a wrong password (a token made with another key but the same key id), for each server
        let refusal = |peer: &mut Peer, addr: SocketAddr| {
            let f = our_token_file(
                dir.path(),
                addr,
                b"\x01\x01\x01\x01\x01\x01\x01\x01",
                Format::Writable,
            );
            peer.command_expect_error(&format!("call {addr} {f} {name}"))
                .unwrap()
        };
        let theirs = refusal(&mut peer, java);
        let mine = refusal(&mut peer, ours);
        assert_eq!(
            theirs.class, "javax.security.sasl.SaslException",
            "{theirs:?}"
        );
        assert_eq!(
            (mine.class.as_str(), &mine.message),
            (theirs.class.as_str(), &theirs.message),
            "{name}"
        );
        assert!(mine.remote, "{mine:?}");
        // a token for another node: InvalidToken, the same text but for the addresses
        let other: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let refusal = |peer: &mut Peer, addr: SocketAddr| {
            let file = dir.path().join(format!("other-{}.token", addr.port()));
            peer.command(&format!(
                "mint-nm-token {other} {ATTEMPT} hotpath {} service={addr}",
                file.display()
            ))
            .unwrap();
            peer.command_expect_error(&format!("call {addr} {} {name}", file.display()))
                .unwrap()
        };
        let theirs = refusal(&mut peer, java);
        let mine = refusal(&mut peer, ours);
        assert_eq!(
            mine.class,
            "org.apache.hadoop.security.token.SecretManager$InvalidToken"
        );
        assert_eq!(mine.class, theirs.class);
        let strip =
            |m: &Option<String>, a: SocketAddr| m.clone().unwrap().replace(&a.to_string(), "ADDR");
        assert_eq!(
            strip(&mine.message, ours),
            strip(&theirs.message, java),
            "{name}"
        );
        let m = server.metrics();
        assert_eq!((m.auth_successes, m.auth_failures), (0, 2), "{name}");
        server.shutdown();
    }
}
