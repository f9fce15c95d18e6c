//! KERBEROS (SASL GSSAPI) against a Kerberized Hadoop 3.5 NameNode: the `hdfs --kerberos true`
//! peer (MiniKdc + MiniDFSCluster; `hadoop.rpc.protection = authentication,integrity,privacy`).
//! Our client logs in from the MiniKdc's client keytab through MIT krb5 (`KRB5_CLIENT_KTNAME`,
//! a fresh `KRB5CCNAME` per test), checks the NameNode's advertised principal against
//! `dfs.namenode.kerberos.principal`, and calls `getFileInfo`. The NameNode's own log
//! (`org.apache.hadoop.ipc.Server` at DEBUG) says which QOP each connection negotiated, so each
//! level is proven by the server, not by us.
//!
//! The environment variables MIT reads are process-wide: every test sets them while it holds
//! the peer's lock (the tests run one at a time).

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use conf::Configuration;
use hadoop_wire::hdfs::{CLIENT_PROTOCOL, CLIENT_PROTOCOL_VERSION};
use hadoop_wire::pb::hadoop::hdfs::{GetFileInfoRequestProto, GetFileInfoResponseProto};
use hadoop_wire::sasl::client::ClientAuth;
use hadoop_wire::sasl::Qop;
use ipc::client::{Client, ClientConfig, ClientError};
use ipc::kerberos::kerberos_client;
use peer_harness::{Kerberos, Mode, Peer, Shared};
use prost::Message;

static HDFS: Shared = Shared::new(
    Mode::Hdfs,
    &[
        "--datanodes",
        "1",
        "--shared-ip",
        "true",
        "--kerberos",
        "true",
        "--log-level",
        "org.apache.hadoop.ipc.Server=DEBUG",
    ],
);

/// MIT's environment for one test: the MiniKdc's krb5.conf, a client keytab, an empty cache.
fn login_env(k: &Kerberos, keytab: &Path, dir: &Path) {
    std::env::set_var("KRB5_CONFIG", &k.krb5_conf);
    std::env::set_var("KRB5_CLIENT_KTNAME", keytab);
    std::env::set_var(
        "KRB5CCNAME",
        format!("FILE:{}", dir.join("ccache").display()),
    );
}

fn client(addr: SocketAddr, k: &Kerberos, principal_conf: &str, qops: Vec<Qop>) -> Client {
    let mut conf = Configuration::new();
    conf.set("dfs.namenode.kerberos.principal", principal_conf);
    let krb = kerberos_client(
        &conf,
        "dfs.namenode.kerberos.principal",
        "localhost",
        Some(k.client_principal.clone()),
    )
    .expect("kerberos client settings");
    Client::new(
        addr,
        ClientConfig {
            protocol: CLIENT_PROTOCOL.into(),
            protocol_version: CLIENT_PROTOCOL_VERSION,
            // not the principal: under KERBEROS the client claims the principal it logged in as
            user: "someone-else".into(),
            connect_timeout: Duration::from_secs(20),
            call_timeout: Duration::from_secs(60),
            max_connect_attempts: 1,
            auth: ClientAuth {
                qops,
                security_enabled: true,
                kerberos: Some(krb),
                ..ClientAuth::default()
            },
            ..ClientConfig::default()
        },
    )
}

fn get_file_info(c: &Client, path: &str) -> Result<GetFileInfoResponseProto, ClientError> {
    let req = GetFileInfoRequestProto { src: path.into() }.encode_to_vec();
    let r = c.call("getFileInfo", &req)?;
    Ok(GetFileInfoResponseProto::decode(r.payload()).expect("GetFileInfoResponseProto"))
}

/// `getListing(src, startAfter = "", needLocation = false)`, hand-encoded; the raw
/// `GetListingResponseProto`.
fn get_listing(c: &Client, path: &str) -> Result<Vec<u8>, ClientError> {
    let mut req = vec![0x0a, path.len() as u8];
    req.extend_from_slice(path.as_bytes());
    req.extend_from_slice(&[0x12, 0x00, 0x18, 0x00]);
    Ok(c.call("getListing", &req)?.payload().to_vec())
}

fn count(hay: &[u8], needle: &[u8]) -> usize {
    hay.windows(needle.len()).filter(|w| *w == needle).count()
}

fn log_count(peer: &Peer, needle: &str) -> usize {
    std::fs::read_to_string(peer.log_path())
        .expect("peer log")
        .matches(needle)
        .count()
}

#[test]
fn get_file_info_on_a_kerberized_namenode_at_every_protection_level() {
    let mut peer = HDFS.lock().expect("Kerberized hdfs peer");
    let k = peer.kerberos().expect("READY kerberos");
    let nn = peer.namenode_addr().expect("namenode");
    let w = peer.command("write /kerberos/f 1000").expect("write");
    assert_eq!(w["blocks"], 1, "{w}");
    // a directory whose listing (1000 entries, dfs.ls.limit) is one response of ~100 KB: the
    // server wraps it whole, a token larger than our 64 KiB receive buffer
    peer.command("mkfiles /kerberos/many 1000")
        .expect("mkfiles");
    for qop in [Qop::Auth, Qop::AuthInt, Qop::AuthConf] {
        let dir = tempfile::tempdir().unwrap();
        login_env(&k, &k.client_keytab, dir.path());
        let negotiated = format!("Negotiated QoP is {}.", qop.sasl_name());
        let before = log_count(&peer, &negotiated);
        let t0 = Instant::now();
        let c = client(nn, &k, &k.namenode_principal, vec![qop]);
        let st = get_file_info(&c, "/kerberos/f")
            .unwrap_or_else(|e| panic!("{qop:?}: {e}\n{}", peer.log_tail(40)))
            .fs
            .expect("/kerberos/f exists");
        assert_eq!((st.length, st.owner.as_str()), (1000, "hdfs"), "{qop:?}");
        eprintln!(
            "{qop:?}: connect + SASL + getFileInfo in {:?}",
            t0.elapsed()
        );
        // the root, then a request of ~80 KB: more than one WRAP packet at integrity/privacy
        assert!(get_file_info(&c, "/").unwrap().fs.is_some());
        let long = format!("/{}", "d/".repeat(40_000));
        assert!(get_file_info(&c, &long).unwrap().fs.is_none(), "{qop:?}");
        let listing = get_listing(&c, "/kerberos/many")
            .unwrap_or_else(|e| panic!("{qop:?}: getListing: {e}"));
        assert!(listing.len() > 65536, "{qop:?}: {} bytes", listing.len());
        assert_eq!(count(&listing, b"f999"), 1, "{qop:?}");
        // the NameNode authenticated our principal by Kerberos, at this level
        assert_eq!(log_count(&peer, &negotiated), before + 1, "{qop:?}");
        assert!(
            log_count(
                &peer,
                "Auth successful for client@EXAMPLE.COM (auth:KERBEROS)"
            ) > 0,
            "{}",
            peer.log_tail(40)
        );
        // the ticket cache MIT filled from the keytab
        assert!(dir.path().join("ccache").is_file(), "{qop:?}");
    }
}

#[test]
fn a_wrong_server_principal_is_refused_before_any_ticket() {
    let peer = HDFS.lock().expect("Kerberized hdfs peer");
    let k = peer.kerberos().expect("READY kerberos");
    let dir = tempfile::tempdir().unwrap();
    login_env(&k, &k.client_keytab, dir.path());
    let t0 = Instant::now();
    let c = client(
        peer.namenode_addr().unwrap(),
        &k,
        "nn/_HOST@EXAMPLE.COM",
        vec![Qop::Auth],
    );
    let e = get_file_info(&c, "/").unwrap_err();
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    eprintln!("wrong server principal: {e}");
    assert!(
        e.to_string().contains(
            "Server has invalid Kerberos principal: hdfs/localhost@EXAMPLE.COM, expecting: \
             nn/localhost@EXAMPLE.COM"
        ),
        "{e}"
    );
    assert!(matches!(e, ClientError::Auth { .. }), "{e:?}");
    assert!(
        !dir.path().join("ccache").exists(),
        "no ticket was asked for"
    );
}

#[test]
fn a_keytab_without_the_client_principal_fails_naming_it() {
    let peer = HDFS.lock().expect("Kerberized hdfs peer");
    let k = peer.kerberos().expect("READY kerberos");
    let dir = tempfile::tempdir().unwrap();
    // the service keytab holds hdfs/localhost and HTTP/localhost, not client@EXAMPLE.COM
    login_env(&k, &k.service_keytab, dir.path());
    let t0 = Instant::now();
    let c = client(
        peer.namenode_addr().unwrap(),
        &k,
        &k.namenode_principal,
        vec![Qop::Auth],
    );
    let e = get_file_info(&c, "/").unwrap_err();
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    let m = e.to_string();
    eprintln!("keytab without the principal: {m}");
    assert!(
        m.contains("Kerberos login as client@EXAMPLE.COM failed"),
        "{m}"
    );
    assert!(m.contains(&k.service_keytab.display().to_string()), "{m}");
    assert!(matches!(e, ClientError::Auth { .. }), "{e:?}");
}

#[test]
fn a_secure_client_without_kerberos_cannot_authenticate() {
    let peer = HDFS.lock().expect("Kerberized hdfs peer");
    let c = Client::new(
        peer.namenode_addr().unwrap(),
        ClientConfig {
            protocol: CLIENT_PROTOCOL.into(),
            max_connect_attempts: 1,
            auth: ClientAuth {
                security_enabled: true,
                ..ClientAuth::default()
            },
            ..ClientConfig::default()
        },
    );
    let e = get_file_info(&c, "/").unwrap_err();
    assert!(
        e.to_string()
            .contains("Client cannot authenticate via:[TOKEN, KERBEROS]"),
        "{e}"
    );
}

/// Our own server as `hdfs/localhost` (the peer's service keytab, read through
/// `gss_acquire_cred_from`) and our client as `client`, over MIT krb5 at every level: the
/// server maps the principal by `auth_to_local` DEFAULT, reassembles a 300 KB request from
/// several WRAP packets and wraps a 300 KB streamed response.
#[test]
fn our_kerberos_server_with_our_client_at_every_protection_level() {
    use hadoop_wire::sasl::gssapi_server::KerberosServer;
    use hadoop_wire::sasl::kerberos_name::AuthToLocal;
    use hadoop_wire::sasl::server::ServerAuth;
    use ipc::buffer_protocol;
    use ipc::kerberos::MitAcceptors;
    use ipc::server::{Call, Registry, Reply, Server, ServerConfig};
    use std::sync::Arc;

    let peer = HDFS.lock().expect("Kerberized hdfs peer");
    let k = peer.kerberos().expect("READY kerberos");
    let acceptors = MitAcceptors::from_keytab(&k.namenode_principal, &k.service_keytab)
        .expect("the service keytab holds hdfs/localhost");
    let krb =
        KerberosServer::new(Arc::new(acceptors), AuthToLocal::default_rules(&k.realm)).unwrap();
    let auth =
        ServerAuth::with_kerberos(krb, None, vec![Qop::Auth, Qop::AuthInt, Qop::AuthConf]).unwrap();
    let mut reg = Registry::new();
    buffer_protocol::register(&mut reg, 1 << 20);
    reg.register(
        buffer_protocol::PROTOCOL,
        buffer_protocol::VERSION,
        "whoami",
        |call: &Call<'_>, reply: &mut Reply<'_, '_>| {
            let sum: u64 = call.request.iter().map(|&b| u64::from(b)).sum();
            let text = format!(
                "{} {} {} {sum}",
                call.user.unwrap_or("-"),
                call.auth_method,
                call.request.len()
            );
            reply.bytes(text.as_bytes())?;
            Ok(())
        },
    );
    let server = Server::start(
        "127.0.0.1:0".parse().unwrap(),
        ServerConfig {
            auth: Arc::new(auth),
            ..ServerConfig::default()
        },
        reg,
    )
    .expect("server");
    let big: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
    let big_sum: u64 = big.iter().map(|&b| u64::from(b)).sum();
    for qop in [Qop::Auth, Qop::AuthInt, Qop::AuthConf] {
        let dir = tempfile::tempdir().unwrap();
        login_env(&k, &k.client_keytab, dir.path());
        let mut conf = Configuration::new();
        conf.set("hotpath.test.principal", "hdfs/_HOST@EXAMPLE.COM");
        let krb = kerberos_client(
            &conf,
            "hotpath.test.principal",
            "localhost",
            Some(k.client_principal.clone()),
        )
        .unwrap();
        let c = Client::new(
            server.local_addr(),
            ClientConfig {
                protocol: buffer_protocol::PROTOCOL.into(),
                protocol_version: buffer_protocol::VERSION,
                connect_timeout: Duration::from_secs(10),
                call_timeout: Duration::from_secs(30),
                max_connect_attempts: 1,
                auth: ClientAuth {
                    qops: vec![qop],
                    security_enabled: true,
                    kerberos: Some(krb),
                    ..ClientAuth::default()
                },
                ..ClientConfig::default()
            },
        );
        let r = c
            .call("whoami", &big)
            .unwrap_or_else(|e| panic!("{qop:?}: {e}"));
        assert_eq!(
            std::str::from_utf8(r.payload()).unwrap(),
            format!("client KERBEROS 300000 {big_sum}"),
            "{qop:?}: the principal mapped to its short name, the request whole"
        );
        let mut req = Vec::new();
        buffer_protocol::encode_request(300_000, &mut req);
        let r = c.call(buffer_protocol::GET_BUFFER, &req).unwrap();
        let data = buffer_protocol::response_data(r.payload()).unwrap();
        assert_eq!(data.len(), 300_000, "{qop:?}");
        assert!(buffer_protocol::is_pattern(data), "{qop:?}");
    }
    let m = server.metrics();
    assert_eq!((m.auth_successes, m.auth_failures), (3, 0), "{m:?}");
    server.shutdown();
}

/// Our RFC 4121 layer (`hadoop_wire::sasl::krb5_cfx` on the keys of MIT's lucid context)
/// against MIT's `gss_wrap` / `gss_unwrap` in one process, both ways: our initiator with MIT's
/// acceptor and MIT's initiator with our acceptor (and ours with ours, MIT's with MIT's), every
/// message sealed and not, of many lengths, both directions; a tampered or replayed token of
/// ours is refused by MIT, and one of MIT's by ours (MIT's duplicate-token status, only
/// supplementary to GSS, is an error here too). The process counters say which layer did each
/// wrap.
#[test]
fn our_rfc4121_layer_interoperates_with_mits_in_process() {
    use hadoop_wire::sasl::gssapi::GssContextFactory;
    use hadoop_wire::sasl::gssapi_server::GssAcceptorFactory;
    use hadoop_wire::sasl::SaslError;
    use ipc::kerberos::{wrap_stats, MitAcceptors, MitGss};

    let peer = HDFS.lock().expect("Kerberized hdfs peer");
    let k = peer.kerberos().expect("READY kerberos");
    let dir = tempfile::tempdir().unwrap();
    login_env(&k, &k.client_keytab, dir.path());
    let establish = |own_client: bool, own_server: bool| {
        let mut c = MitGss::new(Some(k.client_principal.clone()))
            .with_own_wrap(own_client)
            .client_context(&k.namenode_principal)
            .expect("client context");
        let mut a = MitAcceptors::from_keytab(&k.namenode_principal, &k.service_keytab)
            .expect("acceptor keys")
            .with_own_wrap(own_server)
            .acceptor()
            .expect("acceptor");
        let mut tok = c.init_step(&[]).expect("init");
        while !(c.is_established() && a.is_established()) {
            let back = a.accept_step(&tok).expect("accept");
            tok = c.init_step(&back).expect("init");
        }
        assert_eq!(a.initiator().unwrap(), k.client_principal);
        (c, a)
    };
    for (own_client, own_server) in [(true, false), (false, true), (true, true), (false, false)] {
        let (mut c, mut a) = establish(own_client, own_server);
        let s0 = wrap_stats();
        let mut n = 0u64;
        for len in [0usize, 1, 15, 16, 17, 31, 32, 33, 100, 1000, 65536] {
            let msg: Vec<u8> = (0..len).map(|i| (i * 31 + len) as u8).collect();
            for sealed in [true, false] {
                let (mut tok, mut out) = (Vec::new(), Vec::new());
                c.wrap(sealed, &msg, &mut tok).unwrap();
                a.unwrap(&tok, &mut out).unwrap_or_else(|e| {
                    panic!("client {own_client} -> server {own_server}, {len} {sealed}: {e}")
                });
                assert_eq!(out, msg);
                let (mut tok, mut out) = (Vec::new(), Vec::new());
                a.wrap(sealed, &msg, &mut tok).unwrap();
                c.unwrap(&tok, &mut out).unwrap_or_else(|e| {
                    panic!("server {own_server} -> client {own_client}, {len} {sealed}: {e}")
                });
                assert_eq!(out, msg);
                n += 2;
            }
        }
        // a tampered token, then a replayed one, each way
        let mut tok = Vec::new();
        c.wrap(true, b"tamper with me", &mut tok).unwrap();
        let last = tok.len() - 1;
        tok[last] ^= 0x40;
        let e = a.unwrap(&tok, &mut Vec::new()).unwrap_err();
        assert!(matches!(e, SaslError::Integrity(_)), "{e:?}");
        let mut tok = Vec::new();
        a.wrap(false, b"replay me", &mut tok).unwrap();
        c.unwrap(&tok, &mut Vec::new()).unwrap();
        let e = c.unwrap(&tok, &mut Vec::new()).unwrap_err();
        assert!(matches!(e, SaslError::Integrity(_)), "{e:?}");
        eprintln!("client own={own_client} server own={own_server}: replay refused: {e}");
        let m = e.to_string();
        assert!(
            m.contains("sequence number") || m.contains("duplicate"),
            "the replay named: {m}"
        );
        let s1 = wrap_stats();
        let own = u64::from(own_client) + u64::from(own_server);
        let mit = 2 - own;
        // n/2 wraps and n/2 unwraps per side, the tamper (1 wrap, 1 unwrap) and replay (1
        // wrap, 2 unwraps) exchanges
        assert_eq!(
            (s1.own_wraps - s0.own_wraps) + (s1.mit_wraps - s0.mit_wraps),
            n + 2
        );
        assert!(
            s1.own_wraps - s0.own_wraps >= own * (n / 2),
            "{s0:?} {s1:?}"
        );
        assert!(
            s1.mit_wraps - s0.mit_wraps >= mit * (n / 2),
            "{s0:?} {s1:?}"
        );
        assert_eq!(
            (s1.own_unwraps - s0.own_unwraps) + (s1.mit_unwraps - s0.mit_unwraps),
            n + 3
        );
    }
}
