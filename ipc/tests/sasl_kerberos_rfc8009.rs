//! Our RFC 4121 layer (`hadoop_wire::sasl::krb5_cfx`) with the RFC 8009 enctypes
//! (`aes128-cts-hmac-sha256-128` = 19, `aes256-cts-hmac-sha384-192` = 20) against MIT's
//! `gss_wrap` / `gss_unwrap`, in one process, both ways.
//!
//! The peers' MiniKdc (Apache Kerby 2.0.3) has no RFC 8009 enctypes, so these tests run MIT's
//! own KDC on loopback (`peer_harness::MitKdc`: Debian's `krb5-kdc`, set up by
//! `scripts/setup.sh`), in a realm whose client and service keys are of one enctype only and
//! whose krb5.conf permits only that enctype, so the tickets' session keys and the contexts'
//! subkeys are of it too. The token lengths MIT makes prove the enctype (a 16-byte MAC for 19,
//! 24 for 20, 12 for the RFC 3962 ones), and `ipc::kerberos::wrap_stats()` which layer made and
//! checked each token.
//!
//! MIT's environment (`KRB5_CONFIG`) is process-wide: the tests of this binary hold one lock.

use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use hadoop_wire::sasl::client::ClientAuth;
use hadoop_wire::sasl::gssapi::{GssContext, GssContextFactory, KerberosClient};
use hadoop_wire::sasl::gssapi_server::{GssAcceptor, GssAcceptorFactory, KerberosServer};
use hadoop_wire::sasl::kerberos_name::AuthToLocal;
use hadoop_wire::sasl::server::ServerAuth;
use hadoop_wire::sasl::{Qop, SaslError};
use ipc::kerberos::{wrap_stats, MitAcceptors, MitGss};
use peer_harness::{Kerberos, MitKdc};

static MIT_ENV: Mutex<()> = Mutex::new(());

const REALM: &str = "SHA2.TEST";
const ENCTYPES: [(i32, &str, usize); 2] = [
    (19, "aes128-cts-hmac-sha256-128", 16),
    (20, "aes256-cts-hmac-sha384-192", 24),
];

/// One enctype's principals in a keytab of their own, and this process a client of the realm
/// with only that enctype permitted. Returns (client, service) principals.
fn realm_of(kdc: &MitKdc, dir: &Path, enctype: i32, name: &str) -> (String, String) {
    let keytab = dir.join(format!("e{enctype}.keytab"));
    let client = kdc
        .add_principal(&format!("client{enctype}"), name, &keytab)
        .expect("client principal");
    let service = kdc
        .add_principal(&format!("hdfs{enctype}/localhost"), name, &keytab)
        .expect("service principal");
    let conf = dir.join(format!("krb5-{enctype}.conf"));
    kdc.write_krb5_conf(&conf, &[name]).expect("krb5.conf");
    Kerberos::realm_process(&conf, dir);
    (client, service)
}

fn establish(
    client: &str,
    service: &str,
    keytab: &Path,
    own_client: bool,
    own_server: bool,
) -> (Box<dyn GssContext>, Box<dyn GssAcceptor>) {
    let mut c = MitGss::from_keytab(client, keytab)
        .expect("client login from its keytab")
        .with_own_wrap(own_client)
        .client_context(service)
        .expect("client context");
    let mut a = MitAcceptors::from_keytab(service, keytab)
        .expect("acceptor keys")
        .with_own_wrap(own_server)
        .acceptor()
        .expect("acceptor");
    let mut tok = c.init_step(&[]).expect("init");
    while !(c.is_established() && a.is_established()) {
        let back = a.accept_step(&tok).expect("accept");
        tok = c.init_step(&back).expect("init");
    }
    assert_eq!(a.initiator().unwrap(), client);
    (c, a)
}

/// Our layer with MIT's both ways (and ours with ours, MIT's with MIT's), every message sealed
/// and not, of many lengths, both directions, for each RFC 8009 enctype; every token's length
/// is the enctype's; a tampered token and a replayed one are refused by either layer; the
/// process counters say which layer made and checked each token.
#[test]
fn our_rfc8009_layer_interoperates_with_mits_in_process() {
    let _env = MIT_ENV.lock().unwrap_or_else(|p| p.into_inner());
    let kdc = MitKdc::start(REALM, &ENCTYPES.map(|e| e.1)).expect("MIT's KDC");
    let dir = tempfile::tempdir().unwrap();
    for (enctype, name, mac) in ENCTYPES {
        let (client, service) = realm_of(&kdc, dir.path(), enctype, name);
        let keytab = dir.path().join(format!("e{enctype}.keytab"));
        for (own_client, own_server) in [(true, false), (false, true), (true, true), (false, false)]
        {
            let what =
                format!("enctype {enctype}, client own={own_client} server own={own_server}");
            let (mut c, mut a) = establish(&client, &service, &keytab, own_client, own_server);
            let s0 = wrap_stats();
            let mut n = 0u64;
            for len in [0usize, 1, 15, 16, 17, 31, 32, 33, 100, 1000, 65536] {
                let msg: Vec<u8> = (0..len).map(|i| (i * 31 + len) as u8).collect();
                for sealed in [true, false] {
                    let want_len = if sealed {
                        len + 48 + mac
                    } else {
                        len + 16 + mac
                    };
                    let (mut tok, mut out) = (Vec::new(), Vec::new());
                    c.wrap(sealed, &msg, &mut tok).unwrap();
                    assert_eq!(
                        tok.len(),
                        want_len,
                        "{what}: client's token, {len} {sealed}"
                    );
                    let conf = a
                        .unwrap(&tok, &mut out)
                        .unwrap_or_else(|e| panic!("{what}: client -> server {len} {sealed}: {e}"));
                    assert_eq!((out.as_slice(), conf), (msg.as_slice(), sealed), "{what}");
                    let (mut tok, mut out) = (Vec::new(), Vec::new());
                    a.wrap(sealed, &msg, &mut tok).unwrap();
                    assert_eq!(
                        tok.len(),
                        want_len,
                        "{what}: server's token, {len} {sealed}"
                    );
                    let conf = c
                        .unwrap(&tok, &mut out)
                        .unwrap_or_else(|e| panic!("{what}: server -> client {len} {sealed}: {e}"));
                    assert_eq!((out.as_slice(), conf), (msg.as_slice(), sealed), "{what}");
                    n += 2;
                }
            }
            // a tampered token (its MAC, then its ciphertext), then a replayed one, each way
            for at in [1usize, 40] {
                let mut tok = Vec::new();
                c.wrap(true, b"tamper with me, please", &mut tok).unwrap();
                let i = tok.len() - at;
                tok[i] ^= 0x40;
                let e = a.unwrap(&tok, &mut Vec::new()).unwrap_err();
                assert!(matches!(e, SaslError::Integrity(_)), "{what}: {e:?}");
            }
            let mut tok = Vec::new();
            a.wrap(false, b"replay me", &mut tok).unwrap();
            c.unwrap(&tok, &mut Vec::new()).unwrap();
            let e = c.unwrap(&tok, &mut Vec::new()).unwrap_err();
            assert!(matches!(e, SaslError::Integrity(_)), "{what}: {e:?}");
            let m = e.to_string();
            assert!(
                m.contains("sequence number") || m.contains("duplicate"),
                "{what}: the replay named: {m}"
            );
            eprintln!("{what}: tampering and replay refused ({m})");
            let s1 = wrap_stats();
            let own = u64::from(own_client) + u64::from(own_server);
            let mit = 2 - own;
            let (own_w, mit_w) = (s1.own_wraps - s0.own_wraps, s1.mit_wraps - s0.mit_wraps);
            let (own_u, mit_u) = (
                s1.own_unwraps - s0.own_unwraps,
                s1.mit_unwraps - s0.mit_unwraps,
            );
            // n/2 wraps and n/2 unwraps per side, the tamper (2 wraps, 2 unwraps) and replay (1
            // wrap, 2 unwraps) exchanges
            assert_eq!(own_w + mit_w, n + 3, "{what}");
            assert_eq!(own_u + mit_u, n + 4, "{what}");
            assert!(
                own_w >= own * (n / 2) && mit_w >= mit * (n / 2),
                "{what}: {s0:?} {s1:?}"
            );
            assert!(
                own_u >= own * (n / 2) && mit_u >= mit * (n / 2),
                "{what}: {s0:?} {s1:?}"
            );
        }
    }
}

/// Our IPC server and client over SASL GSSAPI at every protection level on each RFC 8009
/// enctype, our layer on both sides (counted): the principal mapped by `auth_to_local`, a
/// 300 KB request reassembled from several WRAP packets.
#[test]
fn our_kerberos_server_with_our_client_on_rfc8009_enctypes() {
    use ipc::buffer_protocol;
    use ipc::client::{Client, ClientConfig};
    use ipc::server::{Call, Registry, Reply, Server, ServerConfig};
    use std::sync::Arc;

    let _env = MIT_ENV.lock().unwrap_or_else(|p| p.into_inner());
    let kdc = MitKdc::start(REALM, &ENCTYPES.map(|e| e.1)).expect("MIT's KDC");
    let dir = tempfile::tempdir().unwrap();
    let big: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
    let big_sum: u64 = big.iter().map(|&b| u64::from(b)).sum();
    for (enctype, name, _) in ENCTYPES {
        let (client, service) = realm_of(&kdc, dir.path(), enctype, name);
        let keytab = dir.path().join(format!("e{enctype}.keytab"));
        let acceptors = MitAcceptors::from_keytab(&service, &keytab)
            .expect("service keys")
            .with_own_wrap(true);
        let krb =
            KerberosServer::new(Arc::new(acceptors), AuthToLocal::default_rules(REALM)).unwrap();
        let auth =
            ServerAuth::with_kerberos(krb, None, vec![Qop::Auth, Qop::AuthInt, Qop::AuthConf])
                .unwrap();
        let mut reg = Registry::new();
        reg.register(
            buffer_protocol::PROTOCOL,
            buffer_protocol::VERSION,
            "whoami",
            |call: &Call<'_>, reply: &mut Reply<'_, '_>| {
                let sum: u64 = call.request.iter().map(|&b| u64::from(b)).sum();
                let text = format!("{} {} {sum}", call.user.unwrap_or("-"), call.request.len());
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
        let login = MitGss::from_keytab(&client, &keytab)
            .expect("client login")
            .with_own_wrap(true);
        for qop in [Qop::Auth, Qop::AuthInt, Qop::AuthConf] {
            let s0 = wrap_stats();
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
                        kerberos: Some(KerberosClient {
                            server_principal: service.clone(),
                            contexts: Arc::new(login.clone()),
                        }),
                        ..ClientAuth::default()
                    },
                    ..ClientConfig::default()
                },
            );
            let r = c
                .call("whoami", &big)
                .unwrap_or_else(|e| panic!("enctype {enctype} {qop:?}: {e}"));
            assert_eq!(
                std::str::from_utf8(r.payload()).unwrap(),
                format!("client{enctype} 300000 {big_sum}"),
                "enctype {enctype} {qop:?}"
            );
            let s1 = wrap_stats();
            assert_eq!(s1.mit_wraps, s0.mit_wraps, "enctype {enctype} {qop:?}");
            assert_eq!(s1.mit_unwraps, s0.mit_unwraps, "enctype {enctype} {qop:?}");
            if qop != Qop::Auth {
                // several WRAP packets each way, made and checked by our layer
                assert!(s1.own_wraps - s0.own_wraps >= 4, "{qop:?}: {s0:?} {s1:?}");
                assert!(
                    s1.own_unwraps - s0.own_unwraps >= 4,
                    "{qop:?}: {s0:?} {s1:?}"
                );
            }
        }
        let m = server.metrics();
        assert_eq!((m.auth_successes, m.auth_failures), (3, 0), "{m:?}");
        server.shutdown();
    }
}
