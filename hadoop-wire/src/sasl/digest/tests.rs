//! Client ↔ server in memory at every QOP and cipher, the §4.3 vector, the JDK's error texts,
//! and tampering with wrapped messages.

use super::*;
use crate::entropy::SeededEntropy;
use crate::sasl::{ClientMechanism, SecurityLayer, ServerMechanism};

// The hdfs-native / security.md §4.3 vector (HDFS delegation token).
const VEC_USER: &str = "ABpoZGZzL2xvY2FsaG9zdEBFWEFNUExFLkNPTQAAigGObf7Sk4oBjpILVpMBAg==";
const VEC_PASS: &str = "Dg+PX4ZBgQkixXcDcnNMy5QCq04=";
const VEC_NONCE: &str = "A+DoU3+eajz9Ei11Ib0S9CUKLyLPh0qFJbwn1/OZ";
const VEC_CNONCE: &str = "UGP4ejVb7M54KO4yqDwCsA==";

fn hex_of(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn text(b: &[u8]) -> &str {
    std::str::from_utf8(b).unwrap()
}

fn fixed_password(pw: &'static str) -> PasswordCallback {
    Box::new(move |_user, _realm| Ok(pw.to_string()))
}

fn server_cfg(cfg: DigestServerConfig, pw: &'static str) -> DigestServer {
    DigestServer::with_nonce(cfg, VEC_NONCE, fixed_password(pw)).unwrap()
}

fn server(qops: &[Qop]) -> DigestServer {
    server_cfg(DigestServerConfig::ipc(qops.to_vec()), VEC_PASS)
}

fn client_cfg(cfg: DigestClientConfig) -> DigestClient {
    DigestClient::with_cnonce(cfg, VEC_CNONCE).unwrap()
}

fn client(qops: &[Qop]) -> DigestClient {
    client_cfg(DigestClientConfig::ipc(
        VEC_USER.into(),
        VEC_PASS.into(),
        qops.to_vec(),
    ))
}

/// Runs the exchange; returns the server's error if it refuses the response.
fn exchange(c: &mut DigestClient, s: &mut DigestServer) -> Result<(), SaslError> {
    let challenge = s.evaluate_response(&[])?;
    let response = c.evaluate_challenge(&challenge)?;
    let rspauth = s.evaluate_response(&response)?;
    assert!(s.is_complete());
    let last = c.evaluate_challenge(&rspauth)?;
    assert!(last.is_empty());
    assert!(c.is_complete());
    Ok(())
}

fn layers(
    c: &mut DigestClient,
    s: &mut DigestServer,
) -> (Box<dyn SecurityLayer>, Box<dyn SecurityLayer>) {
    exchange(c, s).unwrap();
    (c.take_layer().unwrap(), s.take_layer().unwrap())
}

/// The response of a real client to `s`'s challenge, as text to edit.
fn response_text(s: &mut DigestServer, qops: &[Qop]) -> String {
    let challenge = s.evaluate_response(&[]).unwrap();
    let r = client(qops).evaluate_challenge(&challenge).unwrap();
    String::from_utf8(r).unwrap()
}

fn server_err(s: &mut DigestServer, response: &str) -> String {
    let e = s.evaluate_response(response.as_bytes()).unwrap_err();
    assert!(!s.is_complete());
    e.to_string()
}

#[test]
fn vector_h_a1_response_rspauth() {
    let h = h_a1(
        VEC_USER,
        "default",
        VEC_PASS,
        VEC_NONCE.as_bytes(),
        VEC_CNONCE.as_bytes(),
        None,
        true,
    );
    assert_eq!(hex_of(&h), "2fde11f2477fa5db05cc0d7439b3d726");
    let args = (
        VEC_NONCE.as_bytes(),
        VEC_CNONCE.as_bytes(),
        Qop::Auth,
        "/default",
    );
    let r = response_value(
        &h,
        args.0,
        args.1,
        args.2,
        args.3,
        true,
        ResponseKind::Client,
    );
    assert_eq!(text(&r), "6dca7e74e7ea760a91758106fa7c885c");
    let r = response_value(
        &h,
        args.0,
        args.1,
        args.2,
        args.3,
        true,
        ResponseKind::Server,
    );
    assert_eq!(text(&r), "bdf9d355de66df797d1262b9d0aca3bb");
}

#[test]
fn vector_through_client_and_server() {
    let mut s = server(&[Qop::Auth]);
    let mut c = client(&[Qop::Auth]);
    let challenge = s.evaluate_response(&[]).unwrap();
    assert_eq!(
        text(&challenge),
        format!(
            "realm=\"default\",nonce=\"{VEC_NONCE}\",qop=\"auth\",charset=utf-8,algorithm=md5-sess"
        )
    );
    let response = c.evaluate_challenge(&challenge).unwrap();
    assert_eq!(
        text(&response),
        format!(
            "charset=utf-8,username=\"{VEC_USER}\",realm=\"default\",nonce=\"{VEC_NONCE}\",nc=00000001,\
             cnonce=\"{VEC_CNONCE}\",digest-uri=\"/default\",maxbuf=65536,\
             response=6dca7e74e7ea760a91758106fa7c885c,qop=auth"
        )
    );
    let rspauth = s.evaluate_response(&response).unwrap();
    assert_eq!(text(&rspauth), "rspauth=bdf9d355de66df797d1262b9d0aca3bb");
    assert_eq!(s.authorization_id(), Some(VEC_USER));
    assert_eq!(s.negotiated_qop(), Some(Qop::Auth));
    assert!(c.negotiated_qop().is_none());
    assert!(c.evaluate_challenge(&rspauth).unwrap().is_empty());
    assert_eq!(c.negotiated_qop(), Some(Qop::Auth));
    assert!(c.take_layer().is_none());
    assert!(s.take_layer().is_none());
    assert!(s.session_keys().is_none());
    assert_eq!(c.mechanism(), "DIGEST-MD5");
    assert_eq!(s.mechanism(), "DIGEST-MD5");
    assert!(!c.has_initial_response());
}

#[test]
fn challenge_has_jdk_order_and_quoting() {
    // The JDK 17 example of security.md §4.1.
    let nonce = "s8nE6N/4aX1r+INbbvNEl5g9lTopELbMHF+UcSs+";
    let cfg = DigestServerConfig::ipc(vec![Qop::AuthConf, Qop::AuthInt, Qop::Auth]);
    let mut s = DigestServer::with_nonce(cfg.clone(), nonce, fixed_password("x")).unwrap();
    assert_eq!(
        text(&s.evaluate_response(&[]).unwrap()),
        "realm=\"default\",nonce=\"s8nE6N/4aX1r+INbbvNEl5g9lTopELbMHF+UcSs+\",qop=\"auth-conf,auth-int,auth\",\
         charset=utf-8,cipher=\"3des,rc4,des,rc4-56,rc4-40\",algorithm=md5-sess"
    );
    // maxbuf only when not 65536; ciphers always in CIPHER_TOKENS order.
    let cfg = DigestServerConfig {
        max_buf: 4096,
        ciphers: vec![DigestCipher::Rc4_40, DigestCipher::Des],
        ..DigestServerConfig::data_transfer(vec![Qop::AuthInt, Qop::AuthConf])
    };
    let mut s = DigestServer::with_nonce(cfg, "n\"x", fixed_password("x")).unwrap();
    assert_eq!(
        text(&s.evaluate_response(b"ignored initial response").unwrap()),
        "realm=\"0\",nonce=\"n\\\"x\",qop=\"auth-int,auth-conf\",maxbuf=\"4096\",charset=utf-8,\
         cipher=\"des,rc4-40\",algorithm=md5-sess"
    );
}

#[test]
fn nonces_come_from_entropy() {
    use base64::Engine as _;
    let cfg = DigestServerConfig::ipc(vec![Qop::Auth]);
    let a = DigestServer::new(cfg.clone(), &mut SeededEntropy(1), fixed_password("x")).unwrap();
    let b = DigestServer::new(cfg, &mut SeededEntropy(2), fixed_password("x")).unwrap();
    assert_eq!(a.nonce().len(), 40);
    let raw = base64::engine::general_purpose::STANDARD
        .decode(a.nonce())
        .unwrap();
    assert_eq!(raw.len(), RAW_NONCE_SIZE);
    assert_ne!(a.nonce(), b.nonce());
    let cc = DigestClientConfig::ipc("u".into(), "p".into(), vec![Qop::Auth]);
    let c = DigestClient::new(cc, &mut SeededEntropy(3)).unwrap();
    assert_eq!(c.cnonce().len(), 40);
}

/// Messages of many sizes both ways, checking each token's length and sequence number.
fn pump(client: &mut dyn SecurityLayer, server: &mut dyn SecurityLayer, block: usize) {
    let sizes = (1..=70usize).chain([255, 256, 1000, 4095, 65510, 70_000]);
    let mut wrapped = Vec::new();
    let mut plain = Vec::new();
    for (seq, n) in sizes.enumerate() {
        let msg: Vec<u8> = (0..n).map(|i| (i * 31 + seq) as u8).collect();
        let want_len = if block > 1 {
            n + (block - (n + 10) % block) + 16
        } else {
            n + 16
        };
        for client_sends in [true, false] {
            let (from, to): (&mut dyn SecurityLayer, &mut dyn SecurityLayer) = if client_sends {
                (&mut *client, &mut *server)
            } else {
                (&mut *server, &mut *client)
            };
            wrapped.clear();
            wrapped.extend_from_slice(b"prefix");
            from.wrap(&msg, &mut wrapped).unwrap();
            let token = &wrapped[6..];
            assert_eq!(token.len(), want_len, "size {n}");
            assert_eq!(&token[token.len() - 6..token.len() - 4], [0, 1]);
            assert_eq!(
                u32::from_be_bytes(token[token.len() - 4..].try_into().unwrap()),
                seq as u32
            );
            plain.clear();
            plain.push(7);
            to.unwrap(token, &mut plain).unwrap();
            assert_eq!(plain[0], 7);
            assert_eq!(&plain[1..], &msg[..], "size {n}");
        }
    }
}

#[test]
fn auth_int_round_trips_both_ways() {
    let mut c = client(&[Qop::AuthInt]);
    let mut s = server(&[Qop::AuthInt, Qop::Auth]);
    let (mut cl, mut sl) = layers(&mut c, &mut s);
    assert_eq!(cl.qop(), Qop::AuthInt);
    assert_eq!(sl.qop(), Qop::AuthInt);
    assert_eq!(cl.max_wrap_input(), 65520);
    assert_eq!(sl.max_wrap_input(), 65520);
    assert_eq!(s.negotiated_qop(), Some(Qop::AuthInt));
    assert_eq!(c.session_keys(), s.session_keys());
    pump(&mut *cl, &mut *sl, 0);
}

#[test]
fn auth_conf_round_trips_with_every_cipher() {
    for cipher in DigestCipher::ALL {
        let mut c = client_cfg(DigestClientConfig {
            cipher: Some(cipher),
            ..DigestClientConfig::ipc(VEC_USER.into(), VEC_PASS.into(), vec![Qop::AuthConf])
        });
        let mut s = server(&[Qop::AuthConf]);
        let (mut cl, mut sl) = layers(&mut c, &mut s);
        assert_eq!(c.negotiated_cipher(), Some(cipher));
        assert_eq!(s.negotiated_cipher(), Some(cipher));
        assert_eq!(cl.qop(), Qop::AuthConf);
        assert_eq!(cl.max_wrap_input(), 65510);
        let block = match cipher {
            DigestCipher::TripleDes | DigestCipher::Des => 8,
            _ => 1,
        };
        pump(&mut *cl, &mut *sl, block);
    }
}

#[test]
fn client_picks_its_own_first_qop_the_server_offers() {
    let mut c = client(&[Qop::AuthInt, Qop::AuthConf, Qop::Auth]);
    let mut s = server(&[Qop::AuthConf, Qop::AuthInt, Qop::Auth]);
    exchange(&mut c, &mut s).unwrap();
    assert_eq!(c.negotiated_qop(), Some(Qop::AuthInt));
    assert_eq!(s.negotiated_qop(), Some(Qop::AuthInt));
}

#[test]
fn default_cipher_is_the_jdk_choice() {
    let pick = |offered: &[DigestCipher]| {
        let mut s = server_cfg(
            DigestServerConfig {
                ciphers: offered.to_vec(),
                ..DigestServerConfig::ipc(vec![Qop::AuthConf])
            },
            VEC_PASS,
        );
        let mut c = client(&[Qop::AuthConf]);
        exchange(&mut c, &mut s).unwrap();
        c.negotiated_cipher().unwrap()
    };
    use DigestCipher::*;
    assert_eq!(pick(&DigestCipher::ALL), TripleDes);
    assert_eq!(pick(&[Des, Rc4]), Rc4);
    assert_eq!(pick(&[Rc4_40, Des, Rc4_56]), Des);
    assert_eq!(pick(&[Rc4_40, Rc4_56]), Rc4_56);
    assert_eq!(pick(&[Rc4_40]), Rc4_40);
}

#[test]
fn cipher_negotiation_errors() {
    let challenge = |cipher: &str| {
        format!("realm=\"default\",nonce=\"n\",qop=\"auth-conf\",charset=utf-8,{cipher}algorithm=md5-sess")
    };
    let err = |c: &mut DigestClient, ch: &str| {
        c.evaluate_challenge(ch.as_bytes()).unwrap_err().to_string()
    };
    assert_eq!(
        err(&mut client(&[Qop::AuthConf]), &challenge("")),
        "DIGEST-MD5: server did not specify cipher to use for 'auth-conf'"
    );
    assert_eq!(
        err(
            &mut client(&[Qop::AuthConf]),
            &challenge("cipher=\"aes,3DES\",")
        ),
        "DIGEST-MD5: Client supports none of these cipher suites: aes,3DES"
    );
    let mut c = client_cfg(DigestClientConfig {
        cipher: Some(DigestCipher::Des),
        ..DigestClientConfig::ipc("u".into(), "p".into(), vec![Qop::AuthConf])
    });
    assert_eq!(
        err(&mut c, &challenge("cipher=\"3des rc4\",")),
        "DIGEST-MD5: Unable to negotiate a strength level for 'auth-conf'"
    );
    // A server that offers auth-conf but gets no cipher, or one it did not offer.
    let mut s = server(&[Qop::AuthConf]);
    let r = response_text(&mut s, &[Qop::AuthConf]).replace(",cipher=\"3des\"", "");
    assert_eq!(
        server_err(&mut s, &r),
        "DIGEST-MD5: digest response format violation. No cipher specified."
    );
    let mut s = server_cfg(
        DigestServerConfig {
            ciphers: vec![DigestCipher::TripleDes, DigestCipher::Rc4],
            ..DigestServerConfig::ipc(vec![Qop::AuthConf])
        },
        VEC_PASS,
    );
    let r = response_text(&mut s, &[Qop::AuthConf]).replace("cipher=\"3des\"", "cipher=\"des\"");
    assert_eq!(
        server_err(&mut s, &r),
        "DIGEST-MD5: server does not support cipher: des"
    );
}

#[test]
fn wrap_sizes_and_max_wrap_input() {
    let mut out = Vec::new();
    let mut c = client(&[Qop::AuthInt]);
    let (mut cl, _) = layers(&mut c, &mut server(&[Qop::AuthInt]));
    cl.wrap(b"hello", &mut out).unwrap();
    assert_eq!(out.len(), 21);
    assert_eq!(&out[..5], b"hello");
    for (cipher, len) in [
        (DigestCipher::TripleDes, 22),
        (DigestCipher::Des, 22),
        (DigestCipher::Rc4, 21),
        (DigestCipher::Rc4_56, 21),
        (DigestCipher::Rc4_40, 21),
    ] {
        let mut c = client_cfg(DigestClientConfig {
            cipher: Some(cipher),
            ..DigestClientConfig::ipc(VEC_USER.into(), VEC_PASS.into(), vec![Qop::AuthConf])
        });
        let (mut cl, _) = layers(&mut c, &mut server(&[Qop::AuthConf]));
        out.clear();
        cl.wrap(b"hello", &mut out).unwrap();
        assert_eq!(out.len(), len, "{cipher:?}");
        assert_ne!(&out[..5], b"hello");
    }
    // Each side's limit is the other's maxbuf minus the overhead.
    let mut s = server_cfg(
        DigestServerConfig {
            max_buf: 4096,
            ..DigestServerConfig::ipc(vec![Qop::AuthInt])
        },
        VEC_PASS,
    );
    let mut c = client_cfg(DigestClientConfig {
        max_buf: 1000,
        ..DigestClientConfig::ipc(VEC_USER.into(), VEC_PASS.into(), vec![Qop::AuthInt])
    });
    let (cl, sl) = layers(&mut c, &mut s);
    assert_eq!(cl.max_wrap_input(), 4096 - 16);
    assert_eq!(sl.max_wrap_input(), 1000 - 16);
}

#[test]
fn empty_wrap_appends_nothing_and_uses_no_seq() {
    for qop in [Qop::AuthInt, Qop::AuthConf] {
        let (mut cl, mut sl) = layers(&mut client(&[qop]), &mut server(&[qop]));
        let mut out = vec![1, 2, 3];
        cl.wrap(&[], &mut out).unwrap();
        assert_eq!(out, [1, 2, 3]);
        sl.unwrap(&[], &mut out).unwrap();
        assert_eq!(out, [1, 2, 3]);
        out.clear();
        cl.wrap(b"x", &mut out).unwrap();
        assert_eq!(&out[out.len() - 4..], [0, 0, 0, 0]);
        let mut plain = Vec::new();
        sl.unwrap(&out, &mut plain).unwrap();
        assert_eq!(plain, b"x");
    }
}

fn wrap_one(l: &mut dyn SecurityLayer, msg: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    l.wrap(msg, &mut out).unwrap();
    out
}

fn conf(cipher: DigestCipher) -> (Box<dyn SecurityLayer>, Box<dyn SecurityLayer>) {
    let mut c = client_cfg(DigestClientConfig {
        cipher: Some(cipher),
        ..DigestClientConfig::ipc(VEC_USER.into(), VEC_PASS.into(), vec![Qop::AuthConf])
    });
    layers(&mut c, &mut server(&[Qop::AuthConf]))
}

#[test]
fn flipped_mac_byte_is_an_integrity_error_and_keeps_seq() {
    let (mut cl, mut sl) = layers(&mut client(&[Qop::AuthInt]), &mut server(&[Qop::AuthInt]));
    let good = wrap_one(&mut *cl, b"integrity protected");
    let mut bad = good.clone();
    bad[20] ^= 1; // inside the MAC
    let mut out = Vec::new();
    let e = sl.unwrap(&bad, &mut out).unwrap_err();
    assert!(matches!(e, SaslError::Integrity(_)), "{e:?}");
    assert_eq!(e.java_class(), "javax.security.sasl.SaslException");
    assert!(out.is_empty());
    let mut bad = good.clone();
    bad[0] ^= 1; // in the message
    assert!(matches!(
        sl.unwrap(&bad, &mut out),
        Err(SaslError::Integrity(_))
    ));
    // Nothing advanced: the genuine message still unwraps as seq 0.
    sl.unwrap(&good, &mut out).unwrap();
    assert_eq!(out, b"integrity protected");

    for cipher in DigestCipher::ALL {
        let (mut cl, mut sl) = conf(cipher);
        let mut bad = wrap_one(&mut *cl, b"confidential");
        let n = bad.len();
        bad[n - 7] ^= 0x80; // last encrypted byte: the MAC
        let mut out = vec![9];
        let e = sl.unwrap(&bad, &mut out).unwrap_err();
        assert!(matches!(e, SaslError::Integrity(_)), "{cipher:?}: {e:?}");
        assert_eq!(out, [9], "{cipher:?}: output restored");
    }
}

#[test]
fn replay_and_reorder_are_refused() {
    let (mut cl, mut sl) = layers(&mut client(&[Qop::AuthInt]), &mut server(&[Qop::AuthInt]));
    let m0 = wrap_one(&mut *cl, b"zero");
    let m1 = wrap_one(&mut *cl, b"one");
    let mut out = Vec::new();
    let e = sl.unwrap(&m1, &mut out).unwrap_err();
    assert_eq!(
        e,
        SaslError::Sasl(
            "DIGEST-MD5: Out of order sequencing of messages from server. Got: 1 Expected: 0"
                .into()
        )
    );
    sl.unwrap(&m0, &mut out).unwrap();
    let e = sl.unwrap(&m0, &mut out).unwrap_err();
    assert_eq!(
        e.to_string(),
        "DIGEST-MD5: Out of order sequencing of messages from server. Got: 0 Expected: 1"
    );
    sl.unwrap(&m1, &mut out).unwrap();
    assert_eq!(out, b"zeroone");

    // Under auth-conf a replayed message no longer decrypts (the cipher state has moved on).
    for cipher in DigestCipher::ALL {
        let (mut cl, mut sl) = conf(cipher);
        let m0 = wrap_one(&mut *cl, b"zero");
        let mut out = Vec::new();
        sl.unwrap(&m0, &mut out).unwrap();
        let e = sl.unwrap(&m0, &mut out).unwrap_err();
        assert!(matches!(e, SaslError::Integrity(_)), "{cipher:?}: {e:?}");
        assert_eq!(out, b"zero");
    }
}

#[test]
fn truncated_tokens_are_refused() {
    let (mut cl, mut sl) = layers(&mut client(&[Qop::AuthInt]), &mut server(&[Qop::AuthInt]));
    let m = wrap_one(&mut *cl, b"hello");
    let mut out = Vec::new();
    for n in [1, 5, 15, 16, 20] {
        let e = sl.unwrap(&m[..n], &mut out).unwrap_err();
        assert!(matches!(e, SaslError::Integrity(_)), "{n}: {e:?}");
    }
    for cipher in DigestCipher::ALL {
        let (mut cl, mut sl) = conf(cipher);
        let m = wrap_one(&mut *cl, b"hello");
        for n in [1, 6, 15, m.len() - 1] {
            let e = sl.unwrap(&m[..n], &mut out).unwrap_err();
            assert!(
                matches!(e, SaslError::Integrity(_)),
                "{cipher:?} {n}: {e:?}"
            );
        }
    }
    assert!(out.is_empty());
}

#[test]
fn wrong_message_type_has_jdk_text() {
    let (mut cl, mut sl) = layers(&mut client(&[Qop::AuthInt]), &mut server(&[Qop::AuthInt]));
    let mut m = wrap_one(&mut *cl, b"hello");
    let n = m.len();
    m[n - 5] = 2; // the MAC does not cover the type
    assert_eq!(
        sl.unwrap(&m, &mut Vec::new()).unwrap_err().to_string(),
        "DIGEST-MD5: invalid message type: 2"
    );
    let (mut cl, mut sl) = conf(DigestCipher::TripleDes);
    let mut m = wrap_one(&mut *cl, b"hello");
    let n = m.len();
    m[n - 6] = 1;
    assert_eq!(
        sl.unwrap(&m, &mut Vec::new()).unwrap_err().to_string(),
        "DIGEST-MD5: invalid message type: 257"
    );
}

#[test]
fn peer_layer_from_session_keys() {
    // What a JDK interop test does: rebuild the other side's layer from H(A1) alone.
    for (qop, cipher) in [
        (Qop::AuthInt, None),
        (Qop::AuthConf, Some(DigestCipher::TripleDes)),
    ] {
        let mut c = client_cfg(DigestClientConfig {
            cipher,
            ..DigestClientConfig::ipc(VEC_USER.into(), VEC_PASS.into(), vec![qop])
        });
        let mut s = server(&[qop]);
        exchange(&mut c, &mut s).unwrap();
        let keys = c.session_keys().unwrap().clone();
        assert_eq!(
            keys.h_a1(),
            &h_a1(
                VEC_USER,
                "default",
                VEC_PASS,
                VEC_NONCE.as_bytes(),
                VEC_CNONCE.as_bytes(),
                None,
                true
            )
        );
        let rebuilt = SessionKeys::new(*keys.h_a1(), qop, cipher).unwrap();
        assert_eq!(&rebuilt, s.session_keys().unwrap());
        let mut cl = c.take_layer().unwrap();
        assert!(c.take_layer().is_none(), "taken once");
        let sl = s.take_digest_layer().unwrap();
        assert_eq!((sl.send_seq(), sl.recv_seq()), (0, 0));
        assert!(s.take_layer().is_none(), "taken once");
        let mut twin = rebuilt.client_layer(DEFAULT_MAXBUF);
        let mut peer = rebuilt.server_layer(DEFAULT_MAXBUF);
        for msg in [&b"first"[..], b"second message", &[0u8; 100]] {
            let a = wrap_one(&mut *cl, msg);
            // The twin predicts the client's bytes exactly, and the peer reads them.
            assert_eq!(a, wrap_one(&mut twin, msg));
            let mut out = Vec::new();
            peer.unwrap(&a, &mut out).unwrap();
            assert_eq!(out, msg);
        }
        assert_eq!(twin.send_seq(), 3);
        assert_eq!(peer.recv_seq(), 3);
    }
    assert!(SessionKeys::new([0; 16], Qop::Auth, None).is_err());
    assert!(SessionKeys::new([0; 16], Qop::AuthConf, None).is_err());
    assert!(SessionKeys::new([0; 16], Qop::AuthInt, Some(DigestCipher::Rc4)).is_err());
}

#[test]
fn auth_int_wrap_layout_is_hmac_md5_of_seq_and_message() {
    use hmac::{Hmac, Mac};
    use md5::Md5;
    let h: [u8; 16] = [
        0x2f, 0xde, 0x11, 0xf2, 0x47, 0x7f, 0xa5, 0xdb, 0x05, 0xcc, 0x0d, 0x74, 0x39, 0xb3, 0xd7,
        0x26,
    ];
    let keys = SessionKeys::new(h, Qop::AuthInt, None).unwrap();
    let mut kic_in = h.to_vec();
    kic_in.extend_from_slice(b"Digest session key to client-to-server signing key magic constant");
    let kic: [u8; 16] = Md5::digest(&kic_in).into();
    assert_eq!(keys.integrity_keys().0, kic);
    let mut mac = <Hmac<Md5> as hmac::KeyInit>::new_from_slice(&kic).unwrap();
    mac.update(&[0, 0, 0, 1]);
    mac.update(b"hello");
    let tag = mac.finalize().into_bytes();
    let mut l = keys.client_layer(DEFAULT_MAXBUF);
    wrap_one(&mut l, b"first");
    let m = wrap_one(&mut l, b"hello");
    assert_eq!(&m[..5], b"hello");
    assert_eq!(&m[5..15], &tag[..10]);
    assert_eq!(&m[15..], [0, 1, 0, 0, 0, 1]);
}

#[test]
fn wrong_password_is_a_mismatched_response() {
    let mut s = server_cfg(DigestServerConfig::ipc(vec![Qop::Auth]), "wrong");
    let e = exchange(&mut client(&[Qop::Auth]), &mut s).unwrap_err();
    assert_eq!(
        e,
        SaslError::Sasl(
            "DIGEST-MD5: digest response format violation. Mismatched response.".into()
        )
    );
    assert!(!s.is_complete());
    assert!(s.authorization_id().is_none());
    assert_eq!(
        s.evaluate_response(b"").unwrap_err().to_string(),
        "DIGEST-MD5: Server at illegal state"
    );
}

#[test]
fn password_callback_errors_pass_through() {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    let cb: PasswordCallback = Box::new(move |user, realm| {
        log.lock()
            .unwrap()
            .push((user.to_string(), realm.to_string()));
        Err(SaslError::InvalidToken(
            "token (HDFS_DELEGATION_TOKEN token 1) is expired".into(),
        ))
    });
    let mut s =
        DigestServer::with_nonce(DigestServerConfig::ipc(vec![Qop::Auth]), VEC_NONCE, cb).unwrap();
    let e = exchange(&mut client(&[Qop::Auth]), &mut s).unwrap_err();
    assert_eq!(
        e.java_class(),
        "org.apache.hadoop.security.token.SecretManager$InvalidToken"
    );
    assert_eq!(
        *seen.lock().unwrap(),
        [(VEC_USER.to_string(), "default".to_string())]
    );
}

#[test]
fn response_checks_in_jdk_order_with_jdk_texts() {
    let fresh = || server(&[Qop::AuthInt, Qop::Auth]);
    let good = response_text(&mut fresh(), &[Qop::Auth]);
    let check = |edit: &dyn Fn(&str) -> String, want: &str| {
        let mut s = fresh();
        s.evaluate_response(&[]).unwrap();
        assert_eq!(server_err(&mut s, &edit(&good)), want, "{}", edit(&good));
    };
    let v = "DIGEST-MD5: digest response format violation. ";
    check(
        &|r| r.replace("charset=utf-8", "charset=utf8"),
        &format!("{v}Incompatible charset value: utf8"),
    );
    check(
        &|r| r.replace("maxbuf=65536", "maxbuf=lots"),
        &format!("{v}Invalid maxbuf value: lots"),
    );
    check(
        &|r| r.replace(&format!("username=\"{VEC_USER}\","), ""),
        &format!("{v}Missing username."),
    );
    check(
        &|r| r.replace("realm=\"default\"", "realm=\"other\""),
        &format!("{v}Nonexistent realm: other"),
    );
    check(
        &|r| r.replace("realm=\"default\",", ""),
        &format!("{v}Nonexistent realm: "),
    );
    check(
        &|r| r.replace(&format!("nonce=\"{VEC_NONCE}\""), "nonce=\"stale\""),
        &format!("{v}Mismatched nonce."),
    );
    check(
        &|r| r.replace(&format!("nonce=\"{VEC_NONCE}\","), ""),
        &format!("{v}Missing nonce."),
    );
    check(
        &|r| r.replace(&format!("cnonce=\"{VEC_CNONCE}\","), ""),
        &format!("{v}Missing cnonce."),
    );
    // `nc` is not in the JDK server's table; `nonce-count` is.
    check(
        &|r| format!("{r},nonce-count=00000002"),
        &format!("{v}Nonce count does not match: 00000002"),
    );
    check(
        &|r| r.replace("qop=auth", "qop=AUTH"),
        &format!("{v}Invalid QOP: AUTH"),
    );
    check(
        &|r| r.replace("qop=auth", "qop=auth-conf"),
        "DIGEST-MD5: server does not support  qop: auth-conf",
    );
    check(
        &|r| r.replace("digest-uri=\"/default\"", "digest-uri=\"hdfs/default\""),
        &format!("{v}Mismatched URI: hdfs/default; expecting: /default"),
    );
    check(
        &|r| r.replace("digest-uri=\"/default\",", ""),
        &format!("{v}Mismatched URI: null; expecting: /default"),
    );
    check(
        &|r| r.replace("response=6dca7e74e7ea760a91758106fa7c885c,", ""),
        "DIGEST-MD5: digest response format  violation. Missing response.",
    );
    check(
        &|r| {
            r.replace(
                "response=6dca7e74e7ea760a91758106fa7c885c",
                "response=6DCA7E74E7EA760A91758106FA7C885C",
            )
        },
        &format!("{v}Mismatched response."),
    );
    check(
        &|r| format!("{r},USERNAME=\"again\""),
        "DIGEST-MD5: peer sent more than one USERNAME directive: again",
    );
    check(
        &|r| format!("{r},realm"),
        "DIGEST-MD5: peer sent more than one realm directive: ",
    );
    // The untouched response passes, with unknown directives and `nc` ignored.
    let mut s = fresh();
    s.evaluate_response(&[]).unwrap();
    s.evaluate_response(format!("{good},nc=00000009,future=\"x\"").as_bytes())
        .unwrap();
    assert!(s.is_complete());
}

#[test]
fn digest_uri_matches_case_insensitively() {
    let mut c = client_cfg(DigestClientConfig {
        server_name: "DEFAULT".into(),
        ..DigestClientConfig::ipc(VEC_USER.into(), VEC_PASS.into(), vec![Qop::AuthInt])
    });
    let mut s = server(&[Qop::AuthInt]);
    exchange(&mut c, &mut s).unwrap();
    assert_eq!(c.session_keys(), s.session_keys());
    // A different server name is refused.
    let mut c = client_cfg(DigestClientConfig {
        server_name: "other".into(),
        ..DigestClientConfig::ipc(VEC_USER.into(), VEC_PASS.into(), vec![Qop::Auth])
    });
    assert_eq!(
        exchange(&mut c, &mut server(&[Qop::Auth]))
            .unwrap_err()
            .to_string(),
        "DIGEST-MD5: digest response format violation. Mismatched URI: /other; expecting: /default"
    );
}

#[test]
fn qop_not_offered() {
    let mut c = client(&[Qop::AuthConf, Qop::AuthInt]);
    let mut s = server(&[Qop::Auth]);
    let challenge = s.evaluate_response(&[]).unwrap();
    assert_eq!(
        c.evaluate_challenge(&challenge).unwrap_err().to_string(),
        "DIGEST-MD5: No common protection layer between client and server"
    );
    assert_eq!(
        c.evaluate_challenge(&challenge).unwrap_err().to_string(),
        "DIGEST-MD5: Client at illegal state"
    );
    // No qop directive means "auth".
    let mut c = client(&[Qop::Auth]);
    c.evaluate_challenge(b"nonce=\"n\",algorithm=md5-sess")
        .unwrap();
}

#[test]
fn authzid_is_sent_and_included_in_a1() {
    let cc =
        DigestClientConfig::data_transfer(VEC_USER.into(), VEC_PASS.into(), vec![Qop::AuthConf]);
    let mut c = client_cfg(cc);
    let mut s = server_cfg(
        DigestServerConfig::data_transfer(vec![Qop::AuthConf]),
        VEC_PASS,
    );
    let challenge = s.evaluate_response(&[]).unwrap();
    assert!(text(&challenge).starts_with("realm=\"0\","));
    let response = c.evaluate_challenge(&challenge).unwrap();
    let r = text(&response);
    assert!(r.contains(",realm=\"0\","), "{r}");
    assert!(r.contains(",digest-uri=\"hdfs/0\","), "{r}");
    assert!(
        r.ends_with(&format!(
            ",qop=auth-conf,cipher=\"3des\",authzid=\"{VEC_USER}\""
        )),
        "{r}"
    );
    let rspauth = s.evaluate_response(&response).unwrap();
    c.evaluate_challenge(&rspauth).unwrap();
    assert_eq!(s.authorization_id(), Some(VEC_USER));
    let args = (
        VEC_USER,
        "0",
        VEC_PASS,
        VEC_NONCE.as_bytes(),
        VEC_CNONCE.as_bytes(),
    );
    let with = h_a1(
        args.0,
        args.1,
        args.2,
        args.3,
        args.4,
        Some(VEC_USER.as_bytes()),
        true,
    );
    let without = h_a1(args.0, args.1, args.2, args.3, args.4, None, true);
    assert_ne!(with, without);
    assert_eq!(s.session_keys().unwrap().h_a1(), &with);
    assert_eq!(c.session_keys().unwrap().h_a1(), &with);
}

#[test]
fn authorization_policy() {
    let cfg = || DigestClientConfig {
        authzid: Some("someone-else".into()),
        ..DigestClientConfig::ipc(VEC_USER.into(), VEC_PASS.into(), vec![Qop::Auth])
    };
    let e = exchange(&mut client_cfg(cfg()), &mut server(&[Qop::Auth])).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("DIGEST-MD5: {VEC_USER} is not authorized to act as someone-else")
    );
    let mut s = server_cfg(
        DigestServerConfig {
            authz: AuthzPolicy::Any,
            ..DigestServerConfig::ipc(vec![Qop::Auth])
        },
        VEC_PASS,
    );
    exchange(&mut client_cfg(cfg()), &mut s).unwrap();
    assert_eq!(s.authorization_id(), Some("someone-else"));
}

#[test]
fn client_checks_rspauth() {
    for (edit, want) in [
        (
            "rspauth=bdf9d355de66df797d1262b9d0aca3bc",
            "Server's rspauth value does not match what client expects",
        ),
        (
            "rspauth=BDF9D355DE66DF797D1262B9D0ACA3BB",
            "Server's rspauth value does not match what client expects",
        ),
        (
            "rspauth=bdf9d355de66df797d1262b9d0aca3b",
            "Server's rspauth value does not match what client expects",
        ),
        (
            "",
            "DIGEST-MD5: Authenication failed. Expecting 'rspauth' authentication success message",
        ),
        (
            "rspauth=1,rspauth=2",
            "DIGEST-MD5: peer sent more than one rspauth directive: 2",
        ),
    ] {
        let mut s = server(&[Qop::Auth]);
        let mut c = client(&[Qop::Auth]);
        let response = c
            .evaluate_challenge(&s.evaluate_response(&[]).unwrap())
            .unwrap();
        assert_eq!(
            text(&s.evaluate_response(&response).unwrap()),
            "rspauth=bdf9d355de66df797d1262b9d0aca3bb"
        );
        assert_eq!(
            c.evaluate_challenge(edit.as_bytes())
                .unwrap_err()
                .to_string(),
            want
        );
        assert!(!c.is_complete());
        assert!(c.negotiated_qop().is_none());
    }
}

#[test]
fn client_checks_the_challenge() {
    let err = |ch: &str| {
        client(&[Qop::Auth])
            .evaluate_challenge(ch.as_bytes())
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        err("nonce=\"n\""),
        "DIGEST-MD5: Digest-challenge format violation: algorithm directive missing"
    );
    assert_eq!(
        err("nonce=\"n\",algorithm=md5"),
        "DIGEST-MD5: Digest-challenge format violation. Invalid value for 'algorithm' directive: md5"
    );
    assert_eq!(
        err("algorithm=md5-sess"),
        "DIGEST-MD5: Digest-challenge format violation: nonce directive missing"
    );
    assert_eq!(
        err("nonce=\"n\",charset=UTF-8,algorithm=md5-sess"),
        "DIGEST-MD5: digest-challenge format violation. Unrecognised charset value: UTF-8"
    );
    assert_eq!(
        err("realm=\"a\",realm=\"b\",nonce=\"n\",algorithm=md5-sess"),
        "DIGEST-MD5: Invalid realm chosen"
    );
    assert_eq!(
        err("nonce=\"n\",nonce=\"m\",algorithm=md5-sess"),
        "DIGEST-MD5: peer sent more than one nonce directive: m"
    );
    assert_eq!(
        err("nonce=\"n\",maxbuf=\"-1\",algorithm=md5-sess"),
        "DIGEST-MD5: digest-challenge format violation. Invalid maxbuf value: -1"
    );
    assert_eq!(
        err("nonce=\"n"),
        "Unmatched quote found for directive: nonce with value: n"
    );
    // Without charset the client answers in ISO-8859-1 and sends no charset; without a realm
    // it sends none.
    let r = client(&[Qop::Auth])
        .evaluate_challenge(b"nonce=\"n\",qop=\"auth\",algorithm=md5-sess")
        .unwrap();
    assert!(text(&r).starts_with(&format!("username=\"{VEC_USER}\",nonce=\"n\",nc=00000001,")));
}

#[test]
fn length_caps() {
    let big = vec![b' '; MAX_CHALLENGE_LENGTH + 1];
    assert_eq!(
        client(&[Qop::Auth])
            .evaluate_challenge(&big)
            .unwrap_err()
            .to_string(),
        "DIGEST-MD5: Invalid digest-challenge length. Got:  2049 Expected < 2048"
    );
    // 2048 is still parsed (and here fails on content).
    assert!(client(&[Qop::Auth])
        .evaluate_challenge(&big[1..])
        .unwrap_err()
        .to_string()
        .contains("algorithm directive missing"));
    let big = vec![b' '; MAX_RESPONSE_LENGTH + 1];
    let mut s = server(&[Qop::Auth]);
    assert_eq!(
        s.evaluate_response(&big).unwrap_err().to_string(),
        "DIGEST-MD5: Invalid digest response length. Got:  4097 Expected < 4096"
    );
    // A client whose response would exceed 4096 refuses to send it.
    let mut c = client_cfg(DigestClientConfig::ipc(
        "u".repeat(4000),
        "p".into(),
        vec![Qop::Auth],
    ));
    assert!(c
        .evaluate_challenge(b"nonce=\"n\",algorithm=md5-sess")
        .unwrap_err()
        .to_string()
        .starts_with("DIGEST-MD5: digest-response size too large. Length: "));
}

#[test]
fn quoted_values_are_escaped_and_unescaped() {
    let user = "we\"ird\\user";
    let cb: PasswordCallback = Box::new(move |u, _| {
        assert_eq!(u, user);
        Ok("pw".into())
    });
    let mut s =
        DigestServer::with_nonce(DigestServerConfig::ipc(vec![Qop::Auth]), VEC_NONCE, cb).unwrap();
    let mut c = client_cfg(DigestClientConfig::ipc(
        user.into(),
        "pw".into(),
        vec![Qop::Auth],
    ));
    let response = c
        .evaluate_challenge(&s.evaluate_response(&[]).unwrap())
        .unwrap();
    assert!(text(&response).contains("username=\"we\\\"ird\\\\user\","));
    c.evaluate_challenge(&s.evaluate_response(&response).unwrap())
        .unwrap();
    assert_eq!(s.authorization_id(), Some(user));
}

#[test]
fn non_ascii_names_hash_latin1_unless_wide() {
    use md5::Md5;
    // é is ≤ U+00FF: UTF-8 on the wire, ISO-8859-1 in A1. 用 is not: UTF-8 in both.
    for (user, a1_user) in [("josé", &b"jos\xe9"[..]), ("用户", "用户".as_bytes())] {
        let cb: PasswordCallback = Box::new(|_, _| Ok("pw".into()));
        let mut s =
            DigestServer::with_nonce(DigestServerConfig::ipc(vec![Qop::AuthInt]), "n", cb).unwrap();
        let mut c = client_cfg(DigestClientConfig::ipc(
            user.into(),
            "pw".into(),
            vec![Qop::AuthInt],
        ));
        let response = c
            .evaluate_challenge(&s.evaluate_response(&[]).unwrap())
            .unwrap();
        assert!(response.windows(user.len()).any(|w| w == user.as_bytes()));
        c.evaluate_challenge(&s.evaluate_response(&response).unwrap())
            .unwrap();
        let mut inner = a1_user.to_vec();
        inner.extend_from_slice(b":default:pw");
        let mut a1 = Md5::digest(&inner).to_vec();
        a1.extend_from_slice(format!(":n:{VEC_CNONCE}").as_bytes());
        let want: [u8; 16] = Md5::digest(&a1).into();
        assert_eq!(s.session_keys().unwrap().h_a1(), &want, "{user}");
        assert_eq!(s.authorization_id(), Some(user));
    }
}

#[test]
fn steps_after_completion_are_illegal() {
    let mut c = client(&[Qop::Auth]);
    let mut s = server(&[Qop::Auth]);
    exchange(&mut c, &mut s).unwrap();
    assert_eq!(
        c.evaluate_challenge(b"rspauth=x").unwrap_err().to_string(),
        "DIGEST-MD5: Client at illegal state"
    );
    assert_eq!(
        s.evaluate_response(b"").unwrap_err().to_string(),
        "DIGEST-MD5: Server at illegal state"
    );
}

#[test]
fn config_is_checked() {
    let e = DigestServer::with_nonce(DigestServerConfig::ipc(vec![]), "n", fixed_password("x"))
        .unwrap_err();
    assert!(matches!(e, SaslError::Config(_)));
    let cfg = DigestServerConfig {
        ciphers: vec![],
        ..DigestServerConfig::ipc(vec![Qop::AuthConf])
    };
    assert!(DigestServer::with_nonce(cfg, "n", fixed_password("x")).is_err());
    let cfg = DigestServerConfig {
        max_buf: u32::MAX,
        ..DigestServerConfig::ipc(vec![Qop::Auth])
    };
    assert!(DigestServer::with_nonce(cfg, "n", fixed_password("x")).is_err());
    assert!(DigestClient::with_cnonce(
        DigestClientConfig::ipc("u".into(), "p".into(), vec![]),
        "c"
    )
    .is_err());
}

/// Exchanges and wrapped messages made by JDK 17's own `SaslClient` / `SaslServer`
/// (`testdata/DigestVectors.java`, output `testdata/jdk17.txt`). For each case our server, fed
/// the JDK's nonce, must send the JDK's challenge byte for byte and accept the JDK client's
/// response with the JDK server's `rspauth`; our client, fed the JDK's cnonce, must send the JDK
/// client's response byte for byte; and our layers must produce every JDK wrap exactly and
/// unwrap the other side's.
#[test]
fn jdk17_vectors() {
    const VECTORS: &str = include_str!("testdata/jdk17.txt");
    let unhex = |s: &str| -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    };
    let msg = |size: usize, salt: usize| -> Vec<u8> {
        (0..size).map(|i| (i * 7 + size + salt) as u8).collect()
    };
    let directive = |text: &str, name: &str| -> String {
        directives(text.as_bytes())
            .map(Result::unwrap)
            .find(|d| d.is(name))
            .map(|d| String::from_utf8(d.value.into_owned()).unwrap())
            .unwrap()
    };
    let qops = |s: &str| -> Vec<Qop> {
        s.split(',')
            .map(|q| Qop::from_sasl_name(q).unwrap())
            .collect()
    };

    let mut cases = 0;
    let mut wraps = 0;
    let mut lines = VECTORS.lines().peekable();
    while let Some(line) = lines.next() {
        let name = line.strip_prefix("case ").unwrap();
        let mut field = |key: &str| -> String {
            let l = lines.next().unwrap();
            l.strip_prefix(key)
                .and_then(|r| r.strip_prefix(' '))
                .unwrap_or_else(|| panic!("{name}: expected {key}, got {l}"))
                .to_string()
        };
        let config = field("config");
        let cfg: Vec<&str> = config.split(' ').collect();
        let (challenge, response, rspauth) =
            (field("challenge"), field("response"), field("rspauth"));
        let qop = field("qop");
        let rawsend = field("rawsend");
        let authorized = field("authorized");
        let protocol = if cfg[3] == "-" { "" } else { cfg[3] };
        let with_authzid = cfg[5] == "authzid";

        let server_cfg = DigestServerConfig {
            protocol: protocol.into(),
            server_name: cfg[4].into(),
            authz: if with_authzid {
                AuthzPolicy::Any
            } else {
                AuthzPolicy::SameAsUser
            },
            ..DigestServerConfig::ipc(qops(cfg[0]))
        };
        let mut s = DigestServer::with_nonce(
            server_cfg,
            directive(&challenge, "nonce"),
            fixed_password(VEC_PASS),
        )
        .unwrap();
        assert_eq!(
            text(&s.evaluate_response(&[]).unwrap()),
            challenge,
            "{name}: challenge"
        );
        assert_eq!(
            text(&s.evaluate_response(response.as_bytes()).unwrap()),
            rspauth,
            "{name}: rspauth"
        );
        assert_eq!(s.authorization_id(), Some(authorized.as_str()), "{name}");

        let client_cfg = DigestClientConfig {
            authzid: with_authzid.then(|| VEC_USER.to_string()),
            protocol: protocol.into(),
            server_name: cfg[4].into(),
            cipher: DigestCipher::from_token(cfg[2]),
            ..DigestClientConfig::ipc(VEC_USER.into(), VEC_PASS.into(), qops(cfg[1]))
        };
        let mut c = DigestClient::with_cnonce(client_cfg, directive(&response, "cnonce")).unwrap();
        assert_eq!(
            text(&c.evaluate_challenge(challenge.as_bytes()).unwrap()),
            response,
            "{name}: response"
        );
        assert!(c.evaluate_challenge(rspauth.as_bytes()).unwrap().is_empty());
        let negotiated = Qop::from_sasl_name(qop.split(' ').next().unwrap()).unwrap();
        assert_eq!(c.negotiated_qop(), Some(negotiated), "{name}");
        assert_eq!(s.negotiated_qop(), Some(negotiated), "{name}");

        let mut cl = c.take_layer();
        let mut sl = s.take_layer();
        if let (Some(cl), Some(sl)) = (&cl, &sl) {
            assert_eq!(
                format!("{} {}", cl.max_wrap_input(), sl.max_wrap_input()),
                rawsend,
                "{name}"
            );
        }
        loop {
            let l = lines.next().unwrap();
            if l == "end" {
                break;
            }
            let mut parts = l.split(' ');
            let (dir, size, bytes) = (
                parts.next().unwrap(),
                parts.next().unwrap(),
                parts.next().unwrap(),
            );
            let size: usize = size.parse().unwrap();
            let jdk = unhex(bytes);
            let (from, to, salt) = match dir {
                "c2s" => (cl.as_mut().unwrap(), sl.as_mut().unwrap(), 0),
                "s2c" => (sl.as_mut().unwrap(), cl.as_mut().unwrap(), 1),
                other => panic!("{name}: {other}"),
            };
            let m = msg(size, salt);
            assert_eq!(
                hex_of(&wrap_one(&mut **from, &m)),
                bytes,
                "{name}: {dir} {size}"
            );
            let mut out = Vec::new();
            to.unwrap(&jdk, &mut out).unwrap();
            assert_eq!(out, m, "{name}: {dir} {size}");
            wraps += 1;
        }
        cases += 1;
    }
    assert_eq!((cases, wraps), (9, 128));
}
