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
    assert_eq!(
        e.remote_class(),
        Some("org.apache.hadoop.security.AccessControlException")
    );
    assert!(
        e.to_string()
            .contains("SIMPLE authentication is not enabled.  Available:[TOKEN]"),
        "{e}"
    );
}
