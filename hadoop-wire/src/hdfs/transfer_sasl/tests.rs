use super::*;
use crate::entropy::{Entropy, SeededEntropy};
use crate::sasl::digest::{DigestServer, DigestServerConfig};
use crate::sasl::ServerMechanism;
use crate::writer::{Encode, Sink, Writer};

fn key() -> DataEncryptionKey {
    DataEncryptionKey {
        key_id: 7,
        block_pool_id: "BP-1-127.0.0.1-1".into(),
        nonce: vec![1, 2, 3, 4, 5, 6, 7, 8],
        encryption_key: (0u8..20).collect(),
        expiry_date: 1_900_000_000_000,
        encryption_algorithm: None,
    }
}

/// A fake DataNode: DIGEST-MD5 server over the key, as `SaslDataTransferServer` runs it.
fn server_for(k: &DataEncryptionKey) -> DigestServer {
    let expect_user = k.username();
    let password = STANDARD.encode(&k.encryption_key);
    DigestServer::new(
        DigestServerConfig::data_transfer(vec![Qop::AuthConf]),
        &mut SeededEntropy(9),
        Box::new(move |user, _realm| {
            if user == expect_user {
                Ok(password.clone())
            } else {
                Err(SaslError::InvalidToken(format!("unknown user {user}")))
            }
        }),
    )
    .unwrap()
}

/// Splits one vint-delimited message off `buf`.
fn take_msg(buf: &mut Vec<u8>) -> Vec<u8> {
    let (head, len) = vint_prefix(buf).unwrap().unwrap();
    let body = buf[head..head + len].to_vec();
    buf.drain(..head + len);
    body
}

struct Opt<'a> {
    in_key: &'a [u8],
    in_iv: &'a [u8],
    out_key: &'a [u8],
    out_iv: &'a [u8],
}
impl Encode for Opt<'_> {
    fn encode<S: Sink>(&self, s: &mut S) {
        s.uint(1, u64::from(CIPHER_SUITE_AES_CTR));
        s.bytes(2, self.in_key);
        s.bytes(3, self.in_iv);
        s.bytes(4, self.out_key);
        s.bytes(5, self.out_iv);
    }
}
struct Reply<'a> {
    payload: &'a [u8],
    opt: Option<Opt<'a>>,
}
impl Encode for Reply<'_> {
    fn encode<S: Sink>(&self, s: &mut S) {
        s.uint(1, 0);
        s.bytes(2, self.payload);
        if let Some(o) = &self.opt {
            s.message(4, o);
        }
    }
}
fn delimited(m: &impl Encode) -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = Writer::new(&mut out);
    w.varint(m.encoded_len() as u64);
    m.encode(&mut w);
    out
}

/// Runs the client against the fake DataNode; `tamper` may change the final reply.
fn handshake(
    want_aes: bool,
    tamper: impl FnOnce(&mut Vec<u8>),
) -> (Result<Step, TransferSaslError>, Option<AesKeys>) {
    let k = key();
    let mut dn = server_for(&k);
    let mut c = TransferSaslClient::new(
        Credentials::EncryptionKey(&k),
        want_aes,
        &mut SeededEntropy(3),
    )
    .unwrap();
    let mut wire = Vec::new();
    c.start(&mut wire);
    assert_eq!(&wire[..4], &[0xde, 0xad, 0xbe, 0xef]);
    wire.drain(..4);
    let first_bytes = take_msg(&mut wire);
    let first = decode_message(&first_bytes).unwrap();
    assert_eq!(first.payload, Some(&[][..]));
    let challenge = dn.evaluate_response(first.payload.unwrap()).unwrap();
    let to_client = delimited(&Reply {
        payload: &challenge,
        opt: None,
    });
    let mut out = Vec::new();
    // byte by byte: NeedMore until the whole message is in
    for i in 0..to_client.len() - 1 {
        match c.poll(&to_client[..i], &mut out).unwrap() {
            Step::NeedMore(n) => assert!(n >= 1 && i + n <= to_client.len()),
            s => panic!("{s:?} at {i}"),
        }
    }
    match c.poll(&to_client, &mut out).unwrap() {
        Step::Send { consumed } => assert_eq!(consumed, to_client.len()),
        s => panic!("{s:?}"),
    }
    let resp_bytes = take_msg(&mut out);
    let resp = decode_message(&resp_bytes).unwrap();
    assert_eq!(resp.cipher_options.len(), usize::from(want_aes));
    let rspauth = dn.evaluate_response(resp.payload.unwrap()).unwrap();
    assert!(dn.is_complete());
    let mut layer = dn.take_layer().unwrap();
    let keys = AesKeys {
        in_key: (100u8..116).collect(),
        in_iv: [3; 16],
        out_key: (200u8..216).collect(),
        out_iv: [4; 16],
    };
    let (mut wi, mut wo) = (Vec::new(), Vec::new());
    layer.wrap(&keys.in_key, &mut wi).unwrap();
    layer.wrap(&keys.out_key, &mut wo).unwrap();
    let mut last = delimited(&Reply {
        payload: &rspauth,
        opt: want_aes.then_some(Opt {
            in_key: &wi,
            in_iv: &keys.in_iv,
            out_key: &wo,
            out_iv: &keys.out_iv,
        }),
    });
    tamper(&mut last);
    (c.poll(&last, &mut out), want_aes.then_some(keys))
}

#[test]
fn encrypted_handshake_negotiates_aes_and_streams_agree() {
    let (step, keys) = handshake(true, |_| {});
    let keys = keys.unwrap();
    let Step::Done { negotiated, .. } = step.unwrap() else {
        panic!("not done");
    };
    assert_eq!(negotiated.qop, Qop::AuthConf);
    assert!(negotiated.layer.is_none());
    let got = negotiated.aes.unwrap();
    assert_eq!(got, keys);
    let mut client = AesCtrStreams::client(&got).unwrap();
    let mut dn = AesCtrStreams::server(&got).unwrap();
    // continuous keystream across calls of any size, both directions
    let msg: Vec<u8> = (0..5000u32).map(|i| (i * 7) as u8).collect();
    let mut buf = msg.clone();
    client.encrypt(&mut buf[..13]);
    client.encrypt(&mut buf[13..]);
    assert_ne!(buf, msg);
    dn.decrypt(&mut buf[..4000]);
    dn.decrypt(&mut buf[4000..]);
    assert_eq!(buf, msg);
    let mut back = msg.clone();
    dn.encrypt(&mut back);
    client.decrypt(&mut back[..1]);
    client.decrypt(&mut back[1..]);
    assert_eq!(back, msg);
}

#[test]
fn without_aes_the_digest_layer_remains() {
    let (step, _) = handshake(false, |_| {});
    let Step::Done { negotiated, .. } = step.unwrap() else {
        panic!("not done");
    };
    assert_eq!(negotiated.qop, Qop::AuthConf);
    assert!(negotiated.aes.is_none() && negotiated.layer.is_some());
}

#[test]
fn aes_ctr_matches_nist_sp800_38a() {
    // F.5.1 CTR-AES128.Encrypt, first two blocks
    let unhex = |s: &str| -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    };
    let keys = AesKeys {
        in_key: unhex("2b7e151628aed2a6abf7158809cf4f3c"),
        in_iv: unhex("f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff")
            .try_into()
            .unwrap(),
        out_key: unhex("2b7e151628aed2a6abf7158809cf4f3c"),
        out_iv: [0; 16],
    };
    let mut s = AesCtrStreams::client(&keys).unwrap();
    let mut b = unhex("6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51");
    s.encrypt(&mut b[..5]);
    s.encrypt(&mut b[5..]);
    assert_eq!(
        b,
        unhex("874d6191b620e3261bef6864990db6ce9806f66b7970fdff8617187bb9fffdff")
    );
}

#[test]
fn tampered_wrapped_key_is_an_error() {
    let (step, _) = handshake(true, |m| {
        // flip a byte inside the wrapped outKey (the end of the message is outIv, 16 bytes,
        // behind its 2-byte key)
        let i = m.len() - 16 - 2 - 5;
        m[i] ^= 0x40;
    });
    let e = step.unwrap_err();
    assert!(
        matches!(
            e,
            TransferSaslError::Sasl(_) | TransferSaslError::Malformed(_)
        ),
        "{e:?}"
    );
}

#[test]
fn datanode_errors_keep_their_kind() {
    let mk = |status: u64, msg: &str, token_err: bool| {
        struct E<'a>(u64, &'a str, bool);
        impl Encode for E<'_> {
            fn encode<S: Sink>(&self, s: &mut S) {
                s.uint(1, self.0);
                s.string(3, self.1);
                if self.2 {
                    s.bool(6, true);
                }
            }
        }
        delimited(&E(status, msg, token_err))
    };
    let k = key();
    let run = |bytes: Vec<u8>| {
        let mut c =
            TransferSaslClient::new(Credentials::EncryptionKey(&k), true, &mut SeededEntropy(1))
                .unwrap();
        c.start(&mut Vec::new());
        let e = c.poll(&bytes, &mut Vec::new()).unwrap_err();
        // a failed client stays failed
        assert!(c.poll(&bytes, &mut Vec::new()).is_err());
        e
    };
    assert_eq!(
        run(mk(1, "Can't re-compute encryption key for nonce", false)),
        TransferSaslError::UnknownKey("Can't re-compute encryption key for nonce".into())
    );
    assert_eq!(
        run(mk(2, "Block token is expired", true)),
        TransferSaslError::AccessToken("Block token is expired".into())
    );
    assert!(matches!(
        run(mk(2, "nope", false)),
        TransferSaslError::Refused(m) if m.contains("nope")
    ));
}

#[test]
fn oversized_and_garbage_input_are_refused() {
    let k = key();
    let mut c =
        TransferSaslClient::new(Credentials::EncryptionKey(&k), true, &mut SeededEntropy(1))
            .unwrap();
    c.start(&mut Vec::new());
    // a 2 GiB message: refused from its prefix alone (this binary has no counting allocator,
    // so allocation is not checked here; `tests/sasl_stream_alloc.rs` checks the stream layer)
    let r = c.poll(&[0xff, 0xff, 0xff, 0xff, 0x07], &mut Vec::new());
    assert!(
        matches!(r, Err(TransferSaslError::Malformed(ref m)) if m.contains("cap")),
        "{r:?}"
    );
    let mut c =
        TransferSaslClient::new(Credentials::EncryptionKey(&k), true, &mut SeededEntropy(1))
            .unwrap();
    c.start(&mut Vec::new());
    assert!(c.poll(&[0x80; 6], &mut Vec::new()).is_err());
}

#[test]
fn key_round_trips_and_missing_fields_are_errors() {
    let k = key();
    let mut b = Vec::new();
    k.encode(&mut b);
    assert_eq!(DataEncryptionKey::decode(&b).unwrap(), k);
    // GetDataEncryptionKeyResponseProto{1: key} and the empty response
    let mut resp = vec![0x0a, b.len() as u8];
    resp.extend_from_slice(&b);
    assert_eq!(DataEncryptionKey::from_response(&resp).unwrap(), Some(k));
    assert_eq!(DataEncryptionKey::from_response(&[]).unwrap(), None);
    assert!(DataEncryptionKey::decode(&b[..b.len() - 3]).is_err());
    assert!(DataEncryptionKey::decode(&[0x08, 0x01]).is_err());
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 2048, failure_persistence: None, ..Default::default() })]
    #[test]
    fn random_datanode_bytes_never_panic(
        msgs in proptest::collection::vec(proptest::collection::vec(proptest::num::u8::ANY, 0..80), 1..4),
        aes in proptest::bool::ANY,
    ) {
        let k = key();
        let mut c = TransferSaslClient::new(Credentials::EncryptionKey(&k), aes, &mut SeededEntropy(5)).unwrap();
        c.start(&mut Vec::new());
        for m in msgs {
            let mut framed = vec![m.len() as u8];
            framed.extend_from_slice(&m);
            let _ = c.poll(&framed, &mut Vec::new());
            let _ = c.poll(&m, &mut Vec::new());
        }
        let _ = DataEncryptionKey::decode(&[0x12, 0x03, 0xff]);
    }
}

#[test]
fn keystream_matches_the_ctr_crate_across_counter_carries_and_call_sizes() {
    use ctr::cipher::{KeyIvInit, StreamCipher};
    let mut e = SeededEntropy(77);
    for (bits, iv_tail) in [(16usize, 0u8), (24, 0xfe), (32, 0xff)] {
        let mut key = vec![0u8; bits];
        e.fill(&mut key).unwrap();
        // the low 64 bits (or all 128) about to wrap: the carry must run into the high half
        let mut iv = [iv_tail; 16];
        iv[0] = 0x11;
        let keys = AesKeys {
            in_key: key.clone(),
            in_iv: iv,
            out_key: key.clone(),
            out_iv: [0xff; 16],
        };
        let mut ours = AesCtrStreams::client(&keys).unwrap();
        let mut theirs_in: Box<dyn StreamCipher> = match bits {
            16 => Box::new(ctr::Ctr128BE::<aes::Aes128>::new_from_slices(&key, &iv).unwrap()),
            24 => Box::new(ctr::Ctr128BE::<aes::Aes192>::new_from_slices(&key, &iv).unwrap()),
            _ => Box::new(ctr::Ctr128BE::<aes::Aes256>::new_from_slices(&key, &iv).unwrap()),
        };
        let mut theirs_out: Box<dyn StreamCipher> = match bits {
            16 => {
                Box::new(ctr::Ctr128BE::<aes::Aes128>::new_from_slices(&key, &[0xff; 16]).unwrap())
            }
            24 => {
                Box::new(ctr::Ctr128BE::<aes::Aes192>::new_from_slices(&key, &[0xff; 16]).unwrap())
            }
            _ => {
                Box::new(ctr::Ctr128BE::<aes::Aes256>::new_from_slices(&key, &[0xff; 16]).unwrap())
            }
        };
        let mut total = 0usize;
        for n in [1usize, 15, 16, 17, 1000, 1024, 1025, 4096, 70_000, 3, 2048] {
            let mut plain = vec![0u8; n];
            e.fill(&mut plain).unwrap();
            let (mut a, mut b) = (plain.clone(), plain.clone());
            ours.encrypt(&mut a);
            theirs_in.apply_keystream(&mut b);
            assert_eq!(a, b, "send, {bits}-byte key, at {total}+{n}");
            let (mut a, mut b) = (plain.clone(), plain);
            ours.decrypt(&mut a);
            theirs_out.apply_keystream(&mut b);
            assert_eq!(a, b, "recv, {bits}-byte key, at {total}+{n}");
            total += n;
        }
    }
}
