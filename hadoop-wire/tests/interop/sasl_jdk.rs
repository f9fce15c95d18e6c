//! DIGEST-MD5 against the JDK's own `javax.security.sasl` (the code Hadoop runs), through the
//! peer's `jdk-*` commands: our client with a JDK server and a JDK client with our server, at
//! every protection level and cipher; every wrap checked byte for byte in both directions.
//!
//! Byte for byte: after a handshake both sides hold the same session (H(A1), qop, cipher), so
//! our `SessionKeys` can build the *other* side's layer too. What the JDK wraps must equal what
//! our layer for the JDK's side wraps, message after message (sequence numbers and CBC / RC4
//! state carried on), and what we wrap the JDK must unwrap to the same plaintext.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use hadoop_wire::entropy::SeededEntropy;
use hadoop_wire::sasl::digest::{
    DigestCipher, DigestClient, DigestClientConfig, DigestServer, DigestServerConfig,
};
use hadoop_wire::sasl::{ClientMechanism, Qop, SaslError, SecurityLayer, ServerMechanism};
use peer_harness::{Mode, Shared};
use serde_json::Value;

static PEER: Shared = Shared::new(
    Mode::Sasl,
    &["--nm-key-id", "1", "--nm-key", "0102030405060708"],
);

/// A Hadoop-style SASL username and password (base64 of token bytes).
const USER: &str = "AAFhdHRlbXB0X2lkLWJ5dGVz";
const PASS: &str = "c2VjcmV0LXBhc3N3b3JkLWJ5dGVzISE=";
const JDK_MAXBUF: u32 = 65536;

fn b64(b: &[u8]) -> String {
    if b.is_empty() {
        "-".into()
    } else {
        B64.encode(b)
    }
}

fn bytes(v: &Value) -> Vec<u8> {
    match v.as_str() {
        None | Some("") => Vec::new(),
        Some(s) => B64.decode(s).expect("base64"),
    }
}

/// Every level, and at privacy every cipher the JDK offers.
fn cases() -> Vec<(Qop, Option<DigestCipher>)> {
    let mut v = vec![(Qop::Auth, None), (Qop::AuthInt, None)];
    v.extend(
        DigestCipher::ALL
            .into_iter()
            .map(|c| (Qop::AuthConf, Some(c))),
    );
    v
}

/// Message sizes around the cipher block and MAC boundaries, and a large one.
const SIZES: [usize; 10] = [1, 5, 7, 8, 9, 15, 16, 100, 4095, 60_000];

fn message(i: usize, len: usize) -> Vec<u8> {
    (0..len).map(|j| (j * 13 + i * 7 + 1) as u8).collect()
}

#[test]
fn our_client_with_the_jdk_server() {
    let mut peer = PEER.lock().expect("sasl peer");
    for (n, (qop, cipher)) in cases().into_iter().enumerate() {
        let id = format!("s{n}");
        let challenge = peer
            .command(&format!(
                "jdk-server-new {id} - default auth-conf,auth-int,auth {USER} {PASS}"
            ))
            .unwrap()["challenge"]
            .clone();
        let mut cfg = DigestClientConfig::ipc(USER.into(), PASS.into(), vec![qop]);
        cfg.cipher = cipher;
        let mut client = DigestClient::new(cfg, &mut SeededEntropy(n as u64 + 1)).unwrap();
        let response = client.evaluate_challenge(&bytes(&challenge)).unwrap();
        let step = peer
            .command(&format!("jdk-server-step {id} {}", b64(&response)))
            .unwrap();
        assert_eq!(step["complete"], true, "{qop:?} {cipher:?}");
        assert_eq!(step["qop"], qop.sasl_name());
        if let Some(c) = cipher {
            assert_eq!(step["cipher"], c.token());
        }
        let rspauth = bytes(&step["token"]);
        assert!(client.evaluate_challenge(&rspauth).unwrap().is_empty());
        assert!(client.is_complete());
        assert_eq!(client.negotiated_qop(), Some(qop));
        if !qop.wraps() {
            assert!(client.take_layer().is_none());
            continue;
        }
        let mut ours = client.take_layer().unwrap();
        // the JDK server's side of the same session, built from our keys
        let mut mirror = client.session_keys().unwrap().server_layer(JDK_MAXBUF);
        for (i, len) in SIZES.into_iter().enumerate() {
            // client → JDK server
            let m = message(i, len);
            let mut w = Vec::new();
            ours.wrap(&m, &mut w).unwrap();
            let r = peer
                .command(&format!("jdk-unwrap {id} {}", b64(&w)))
                .unwrap();
            assert_eq!(bytes(&r["plain"]), m, "{qop:?} {cipher:?} c→s {len}");
            let mut p = Vec::new();
            mirror.unwrap(&w, &mut p).unwrap();
            assert_eq!(p, m);
            // JDK server → client: the JDK's bytes are exactly our server layer's
            let m = message(i + 100, len);
            let r = peer.command(&format!("jdk-wrap {id} {}", b64(&m))).unwrap();
            let jdk = bytes(&r["token"]);
            let mut expect = Vec::new();
            mirror.wrap(&m, &mut expect).unwrap();
            assert_eq!(
                jdk, expect,
                "{qop:?} {cipher:?} s→c {len}: wrap differs from the JDK's"
            );
            let mut p = Vec::new();
            ours.unwrap(&jdk, &mut p).unwrap();
            assert_eq!(p, m);
        }
        // a JDK packet with one bit flipped: we refuse it (the JDK would drop it silently)
        let r = peer
            .command(&format!("jdk-wrap {id} {}", b64(b"tamper")))
            .unwrap();
        let mut bad = bytes(&r["token"]);
        bad[0] ^= 0x80;
        let e = ours.unwrap(&bad, &mut Vec::new()).unwrap_err();
        assert!(matches!(e, SaslError::Integrity(_)), "{e:?}");
        // and our packet with a flipped bit is dropped by the JDK (empty plaintext)
        let mut w = Vec::new();
        ours.wrap(b"tamper", &mut w).unwrap();
        w[2] ^= 1;
        let r = peer
            .command(&format!("jdk-unwrap {id} {}", b64(&w)))
            .unwrap();
        assert!(bytes(&r["plain"]).is_empty(), "{qop:?} {cipher:?}");
        peer.command(&format!("jdk-dispose {id}")).unwrap();
    }
}

#[test]
fn the_jdk_client_with_our_server() {
    let mut peer = PEER.lock().expect("sasl peer");
    for (n, (qop, cipher)) in cases().into_iter().enumerate() {
        let id = format!("c{n}");
        let lookup = |user: &str, realm: &str| -> Result<String, SaslError> {
            assert_eq!(realm, "default");
            if user == USER {
                Ok(PASS.into())
            } else {
                Err(SaslError::InvalidToken("unknown".into()))
            }
        };
        let cfg = DigestServerConfig::ipc(vec![Qop::AuthConf, Qop::AuthInt, Qop::Auth]);
        let mut server =
            DigestServer::new(cfg, &mut SeededEntropy(n as u64 + 50), Box::new(lookup)).unwrap();
        let challenge = server.evaluate_response(&[]).unwrap();
        let cipher_arg = cipher.map_or("-", DigestCipher::token);
        peer.command(&format!(
            "jdk-client-new {id} - default {} {USER} {PASS} - {cipher_arg}",
            qop.sasl_name()
        ))
        .unwrap();
        let step = peer
            .command(&format!("jdk-client-step {id} {}", b64(&challenge)))
            .unwrap();
        let response = bytes(&step["token"]);
        let rspauth = server.evaluate_response(&response).unwrap();
        assert!(server.is_complete());
        assert_eq!(server.authorization_id(), Some(USER));
        let step = peer
            .command(&format!("jdk-client-step {id} {}", b64(&rspauth)))
            .unwrap();
        assert_eq!(step["complete"], true, "{qop:?} {cipher:?}");
        assert_eq!(server.negotiated_qop(), Some(qop));
        if !qop.wraps() {
            assert!(server.take_layer().is_none());
            continue;
        }
        assert_eq!(server.negotiated_cipher(), cipher);
        let mut ours = server.take_layer().unwrap();
        let mut mirror = server.session_keys().unwrap().client_layer(JDK_MAXBUF);
        for (i, len) in SIZES.into_iter().enumerate() {
            // JDK client → our server: byte for byte our client layer's output
            let m = message(i, len);
            let r = peer.command(&format!("jdk-wrap {id} {}", b64(&m))).unwrap();
            let jdk = bytes(&r["token"]);
            let mut expect = Vec::new();
            mirror.wrap(&m, &mut expect).unwrap();
            assert_eq!(
                jdk, expect,
                "{qop:?} {cipher:?} c→s {len}: wrap differs from the JDK's"
            );
            let mut p = Vec::new();
            ours.unwrap(&jdk, &mut p).unwrap();
            assert_eq!(p, m);
            // our server → JDK client
            let m = message(i + 100, len);
            let mut w = Vec::new();
            ours.wrap(&m, &mut w).unwrap();
            let r = peer
                .command(&format!("jdk-unwrap {id} {}", b64(&w)))
                .unwrap();
            assert_eq!(bytes(&r["plain"]), m, "{qop:?} {cipher:?} s→c {len}");
            let mut p = Vec::new();
            mirror.unwrap(&w, &mut p).unwrap();
            assert_eq!(p, m);
        }
        // a replayed JDK packet: out of order at auth-int; at auth-conf the cipher state has
        // moved on, so it no longer decrypts (padding or MAC)
        let r = peer
            .command(&format!("jdk-wrap {id} {}", b64(b"once")))
            .unwrap();
        let w = bytes(&r["token"]);
        ours.unwrap(&w, &mut Vec::new()).unwrap();
        let e = ours.unwrap(&w, &mut Vec::new()).unwrap_err();
        match qop {
            Qop::AuthInt => assert!(e.to_string().contains("Out of order sequencing"), "{e}"),
            _ => assert!(
                matches!(e, SaslError::Integrity(_)),
                "{qop:?} {cipher:?}: {e:?}"
            ),
        }
        peer.command(&format!("jdk-dispose {id}")).unwrap();
    }
}

#[test]
fn a_wrong_password_gets_the_jdks_refusal_both_ways() {
    let mut peer = PEER.lock().expect("sasl peer");
    // our client, wrong password → the JDK server's text
    let challenge = peer
        .command(&format!("jdk-server-new w1 - default auth {USER} {PASS}"))
        .unwrap()["challenge"]
        .clone();
    let mut client = DigestClient::new(
        DigestClientConfig::ipc(USER.into(), "d3Jvbmc=".into(), vec![Qop::Auth]),
        &mut SeededEntropy(9),
    )
    .unwrap();
    let response = client.evaluate_challenge(&bytes(&challenge)).unwrap();
    let jdk = peer
        .command_expect_error(&format!("jdk-server-step w1 {}", b64(&response)))
        .unwrap();
    // the JDK client, wrong password → our server's text, the same
    let lookup = |_: &str, _: &str| -> Result<String, SaslError> { Ok(PASS.into()) };
    let mut server = DigestServer::new(
        DigestServerConfig::ipc(vec![Qop::Auth]),
        &mut SeededEntropy(10),
        Box::new(lookup),
    )
    .unwrap();
    let challenge = server.evaluate_response(&[]).unwrap();
    peer.command(&format!(
        "jdk-client-new w2 - default auth {USER} d3Jvbmc= - -"
    ))
    .unwrap();
    let step = peer
        .command(&format!("jdk-client-step w2 {}", b64(&challenge)))
        .unwrap();
    let ours = server
        .evaluate_response(&bytes(&step["token"]))
        .unwrap_err();
    assert_eq!(jdk.class, "javax.security.sasl.SaslException");
    assert_eq!(ours.java_class(), jdk.class);
    assert_eq!(Some(ours.to_string()), jdk.message);
}
