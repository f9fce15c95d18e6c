use super::*;

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// RFC 3961 Appendix A.1.
#[test]
fn nfold_matches_rfc_3961_vectors() {
    let cases: &[(usize, &str, &str)] = &[
        (64, "012345", "be072631276b1955"),
        (56, "password", "78a07b6caf85fa"),
        (64, "Rough Consensus, and Running Code", "bb6ed30870b7f0e0"),
        (
            168,
            "password",
            "59e4a8ca7c0385c3c37b3f6d2000247cb6e6bd5b3e",
        ),
        (
            192,
            "MASSACHVSETTS INSTITVTE OF TECHNOLOGY",
            "db3b0d8f0b061e603282b308a50841229ad798fab9540c1b",
        ),
        (168, "Q", "518a54a215a8452a518a54a215a8452a518a54a215"),
        (168, "ba", "fb25d531ae8974499f52fd92ea9857c4ba24cf297e"),
        (64, "kerberos", "6b65726265726f73"),
        (128, "kerberos", "6b65726265726f737b9b5b2b93132b93"),
        (
            168,
            "kerberos",
            "8372c236344e5f1550cd0747e15d62ca7a5a3bcea4",
        ),
        (
            256,
            "kerberos",
            "6b65726265726f737b9b5b2b93132b935c9bdcdad95c9899c4cae4dee6d6cae4",
        ),
    ];
    for (bits, input, want) in cases {
        let mut out = vec![0u8; bits / 8];
        nfold(input.as_bytes(), &mut out);
        assert_eq!(out, hex(want), "{bits}-fold({input:?})");
    }
}

/// RFC 3962 Appendix B: AES-128 CTS with a zero IV, key "chicken teriyaki".
#[test]
fn cts_matches_rfc_3962_vectors() {
    let key = hex("636869636b656e207465726979616b69");
    let aes = Aes::new(CfxKey {
        enctype: ENCTYPE_AES128_CTS_HMAC_SHA1_96,
        key: &key,
    })
    .unwrap();
    let text = b"I would like the General Gau's Chicken, please, and wonton soup.";
    let cases: &[(usize, &str)] = &[
        (17, "c6353568f2bf8cb4d8a580362da7ff7f97"),
        (
            31,
            "fc00783e0efdb2c1d445d4c8eff7ed2297687268d6ecccc0c07b25e25ecfe5",
        ),
        (
            32,
            "39312523a78662d5be7fcbcc98ebf5a897687268d6ecccc0c07b25e25ecfe584",
        ),
        (
            47,
            "97687268d6ecccc0c07b25e25ecfe584b3fffd940c16a18c1b5549d2f838029e\
             39312523a78662d5be7fcbcc98ebf5",
        ),
        (
            48,
            "97687268d6ecccc0c07b25e25ecfe5849dad8bbb96c4cdc03bc103e1a194bbd8\
             39312523a78662d5be7fcbcc98ebf5a8",
        ),
        (
            64,
            "97687268d6ecccc0c07b25e25ecfe58439312523a78662d5be7fcbcc98ebf5a8\
             4807efe836ee89a526730dbc2f7bc8409dad8bbb96c4cdc03bc103e1a194bbd8",
        ),
    ];
    for (len, want) in cases {
        let mut buf = text[..*len].to_vec();
        cts_encrypt(&aes, &mut buf);
        assert_eq!(buf, hex(want), "{len} bytes");
        cts_decrypt(&aes, &mut buf);
        assert_eq!(buf, &text[..*len], "{len} bytes back");
    }
}

/// RFC 3962 Appendix B, first string-to-key case: the AES keys are `DK(PBKDF2 output,
/// "kerberos")`, the derivation this module keys its tokens with.
#[test]
fn dk_matches_rfc_3962_string_to_key_vectors() {
    let tkey = hex("cdedb5281bb2f801565a1122b2563515");
    let aes = Aes::new(CfxKey {
        enctype: ENCTYPE_AES128_CTS_HMAC_SHA1_96,
        key: &tkey,
    })
    .unwrap();
    let mut k = [0u8; 16];
    derive_with(&aes, b"kerberos", &mut k);
    assert_eq!(k.to_vec(), hex("42263c6e89f4fc28b8df68ee09799f15"));
    let tkey = hex("cdedb5281bb2f801565a1122b25635150ad1f7a04bb9f3a333ecc0e2e1f70837");
    let aes = Aes::new(CfxKey {
        enctype: ENCTYPE_AES256_CTS_HMAC_SHA1_96,
        key: &tkey,
    })
    .unwrap();
    let mut k = [0u8; 32];
    derive_with(&aes, b"kerberos", &mut k);
    assert_eq!(
        k.to_vec(),
        hex("fe697b52bc0d3ce14432ba036a92e65bbb52280990a2fa27883998d72af30161")
    );
}

fn pair(enctype: i32, subkey: bool) -> (CfxContext, CfxContext) {
    let len = if enctype == ENCTYPE_AES256_CTS_HMAC_SHA1_96 {
        32
    } else {
        16
    };
    let ctx_key = vec![0x11u8; len];
    let sub = vec![0x22u8; len];
    let p = |initiator: bool, send: u64, recv: u64| CfxParams {
        initiator,
        ctx_key: CfxKey {
            enctype,
            key: &ctx_key,
        },
        acceptor_subkey: subkey.then_some(CfxKey { enctype, key: &sub }),
        send_seq: send,
        recv_seq: recv,
    };
    let i = CfxContext::new(&p(true, 1000, 7), &[1; 32]).unwrap();
    let a = CfxContext::new(&p(false, 7, 1000), &[2; 32]).unwrap();
    (i, a)
}

#[test]
fn tokens_round_trip_both_ways_at_every_length() {
    for enctype in [
        ENCTYPE_AES128_CTS_HMAC_SHA1_96,
        ENCTYPE_AES256_CTS_HMAC_SHA1_96,
    ] {
        for subkey in [false, true] {
            let (mut i, mut a) = pair(enctype, subkey);
            for len in 0..80 {
                let msg: Vec<u8> = (0..len).map(|k| (k * 7 + len) as u8).collect();
                for sealed in [true, false] {
                    let mut tok = Vec::new();
                    i.wrap(sealed, &msg, &mut tok);
                    let want = if sealed { len + 60 } else { len + 28 };
                    assert_eq!(tok.len(), want);
                    assert_eq!(tok[2] & FLAG_SENT_BY_ACCEPTOR, 0);
                    assert_eq!(tok[2] & FLAG_ACCEPTOR_SUBKEY != 0, subkey);
                    if sealed && len >= 8 {
                        assert!(!tok.windows(8).any(|w| w == &msg[..8]), "plaintext visible");
                    }
                    let mut out = vec![9u8];
                    assert_eq!(a.unwrap(&tok, &mut out).unwrap(), sealed);
                    assert_eq!(&out[1..], &msg[..]);
                    let mut back = Vec::new();
                    a.wrap(sealed, &msg, &mut back);
                    assert_eq!(back[2] & FLAG_SENT_BY_ACCEPTOR, FLAG_SENT_BY_ACCEPTOR);
                    let mut out = Vec::new();
                    assert_eq!(i.unwrap(&back, &mut out).unwrap(), sealed);
                    assert_eq!(out, msg);
                }
            }
            assert_eq!(i.send_seq(), 1160);
            assert_eq!(a.recv_seq(), 1160);
        }
    }
}

#[test]
fn the_same_message_seals_differently_each_time() {
    let (mut i, _) = pair(ENCTYPE_AES128_CTS_HMAC_SHA1_96, true);
    let (mut t1, mut t2) = (Vec::new(), Vec::new());
    i.wrap(true, b"same", &mut t1);
    i.wrap(true, b"same", &mut t2);
    assert_ne!(t1[16..], t2[16..]);
}

/// A token rotated by RRC (as Windows sends them) and one with filler (EC > 0), built the way
/// RFC 4121 §4.2.4-5 describes, are accepted.
#[test]
fn rotated_tokens_and_filler_are_accepted() {
    let (mut i, mut a) = pair(ENCTYPE_AES128_CTS_HMAC_SHA1_96, false);
    for (rrc, sealed) in [(28u16, true), (5, true), (12, false), (1000, false)] {
        let mut tok = Vec::new();
        i.wrap(sealed, b"rotate me please", &mut tok);
        tok[6..8].copy_from_slice(&rrc.to_be_bytes());
        let n = tok.len() - 16;
        tok[16..].rotate_right(usize::from(rrc) % n);
        let mut out = Vec::new();
        a.unwrap(&tok, &mut out).unwrap();
        assert_eq!(out, b"rotate me please");
    }
    // EC = 3: the sender's plaintext is data | 3 filler bytes | header (with EC = 3).
    let seq = i.send_seq();
    let hdr = header(FLAG_SEALED, 3, 0, seq);
    let mut body = Vec::new();
    body.extend_from_slice(&[0x5a; 16]);
    body.extend_from_slice(b"filled");
    body.extend_from_slice(b"xxx");
    body.extend_from_slice(&hdr);
    let mac = mac12(i.send.ki.clone(), &[&body]);
    cts_encrypt(&i.send.ke, &mut body);
    let mut tok = hdr.to_vec();
    tok.extend_from_slice(&body);
    tok.extend_from_slice(&mac);
    let mut out = Vec::new();
    a.unwrap(&tok, &mut out).unwrap();
    assert_eq!(out, b"filled");
}

fn integrity_err(r: Result<bool, SaslError>) -> String {
    match r {
        Err(SaslError::Integrity(m)) => m,
        other => panic!("expected an integrity error, got {other:?}"),
    }
}

#[test]
fn bad_tokens_are_integrity_errors_naming_the_cause() {
    for sealed in [true, false] {
        let (mut i, mut a) = pair(ENCTYPE_AES128_CTS_HMAC_SHA1_96, true);
        let mut tok = Vec::new();
        i.wrap(sealed, b"hello, NameNode", &mut tok);
        let mut out = vec![1, 2, 3];
        // every single bit flipped after the header's flags is caught
        for bit in 0..tok.len() * 8 {
            let mut t = tok.clone();
            t[bit / 8] ^= 1 << (bit % 8);
            let before = (a.recv_seq(), out.clone());
            assert!(a.unwrap(&t, &mut out).is_err(), "bit {bit} sealed={sealed}");
            assert_eq!((a.recv_seq(), out.clone()), before);
        }
        let m = integrity_err(a.unwrap(&tok[..10], &mut out));
        assert!(m.contains("shorter than its 16-byte header"), "{m}");
        let m = integrity_err(a.unwrap(&tok[..tok.len() - 1], &mut out));
        assert!(
            m.contains("does not match") || m.contains("too short"),
            "{m}"
        );
        let m = integrity_err(a.unwrap(&tok[..20], &mut out));
        assert!(
            m.contains("too short") || m.contains("does not match"),
            "{m}"
        );
        // our own token back to us: the direction flag is wrong
        let m = integrity_err(i.unwrap(&tok, &mut out));
        assert!(m.contains("wrong direction"), "{m}");
        // the subkey flag cleared
        let mut t = tok.clone();
        t[2] &= !FLAG_ACCEPTOR_SUBKEY;
        let m = integrity_err(a.unwrap(&t, &mut out));
        assert!(m.contains("AcceptorSubkey"), "{m}");
        let mut t = tok.clone();
        t[0] = 0x04;
        let m = integrity_err(a.unwrap(&t, &mut out));
        assert!(m.contains("not a Wrap token"), "{m}");
        let mut t = tok.clone();
        t[15] ^= 1;
        let m = integrity_err(a.unwrap(&t, &mut out));
        assert!(
            m.contains("does not match") || m.contains("inner header"),
            "{m}"
        );
        // the good token passes once; replayed, it is refused
        a.unwrap(&tok, &mut out).unwrap();
        assert_eq!(out, b"\x01\x02\x03hello, NameNode");
        let m = integrity_err(a.unwrap(&tok, &mut out));
        assert!(m.contains("sequence number 1000, expected 1001"), "{m}");
        // reordered: the third before the second
        let (mut t2, mut t3) = (Vec::new(), Vec::new());
        i.wrap(sealed, b"2", &mut t2);
        i.wrap(sealed, b"3", &mut t3);
        let m = integrity_err(a.unwrap(&t3, &mut out));
        assert!(m.contains("sequence number 1002, expected 1001"), "{m}");
        a.unwrap(&t2, &mut out).unwrap();
        a.unwrap(&t3, &mut out).unwrap();
    }
}

#[test]
fn an_integrity_token_with_a_wrong_ec_is_refused() {
    let (mut i, mut a) = pair(ENCTYPE_AES256_CTS_HMAC_SHA1_96, false);
    let mut tok = Vec::new();
    i.wrap(false, b"abc", &mut tok);
    tok[5] = 11;
    let m = integrity_err(a.unwrap(&tok, &mut Vec::new()));
    assert!(m.contains("EC is 11"), "{m}");
}

#[test]
fn other_enctypes_and_bad_keys_are_refused() {
    let key = [0u8; 24];
    let p = CfxParams {
        initiator: true,
        ctx_key: CfxKey {
            enctype: 16,
            key: &key,
        },
        acceptor_subkey: None,
        send_seq: 0,
        recv_seq: 0,
    };
    assert_eq!(
        CfxContext::new(&p, &[0; 32]).unwrap_err(),
        CfxKeyError::Enctype(16)
    );
    let p = CfxParams {
        ctx_key: CfxKey {
            enctype: 17,
            key: &key,
        },
        ..p
    };
    assert_eq!(
        CfxContext::new(&p, &[0; 32]).unwrap_err(),
        CfxKeyError::KeyLength {
            enctype: 17,
            len: 24
        }
    );
    assert!(supports(17) && supports(18) && !supports(16) && !supports(23));
}
