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

const ALL: [i32; 4] = [
    ENCTYPE_AES128_CTS_HMAC_SHA1_96,
    ENCTYPE_AES256_CTS_HMAC_SHA1_96,
    ENCTYPE_AES128_CTS_HMAC_SHA256_128,
    ENCTYPE_AES256_CTS_HMAC_SHA384_192,
];

fn key_len(enctype: i32) -> usize {
    match enctype {
        ENCTYPE_AES256_CTS_HMAC_SHA1_96 | ENCTYPE_AES256_CTS_HMAC_SHA384_192 => 32,
        _ => 16,
    }
}

fn pair(enctype: i32, subkey: bool) -> (CfxContext, CfxContext) {
    let len = key_len(enctype);
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
    for enctype in ALL {
        let mac = mac_len(enctype).unwrap();
        for subkey in [false, true] {
            let (mut i, mut a) = pair(enctype, subkey);
            for len in 0..80 {
                let msg: Vec<u8> = (0..len).map(|k| (k * 7 + len) as u8).collect();
                for sealed in [true, false] {
                    let mut tok = Vec::new();
                    i.wrap(sealed, &msg, &mut tok);
                    let want = if sealed {
                        len + 48 + mac
                    } else {
                        len + 16 + mac
                    };
                    assert_eq!(tok.len(), want, "enctype {enctype}");
                    if !sealed {
                        assert_eq!(usize::from(tok[5]), mac, "EC = the checksum's length");
                    }
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
    for enctype in ALL {
        let (mut i, mut a) = pair(enctype, false);
        for (rrc, sealed) in [(28u16, true), (5, true), (12, false), (1000, false)] {
            let mut tok = Vec::new();
            i.wrap(sealed, b"rotate me please", &mut tok);
            tok[6..8].copy_from_slice(&rrc.to_be_bytes());
            let n = tok.len() - 16;
            tok[16..].rotate_right(usize::from(rrc) % n);
            let mut out = Vec::new();
            a.unwrap(&tok, &mut out).unwrap();
            assert_eq!(out, b"rotate me please", "enctype {enctype}");
        }
        // EC = 3: the sender's plaintext is data | 3 filler bytes | header (with EC = 3).
        let seq = i.send_seq();
        let hdr = header(FLAG_SEALED, 3, 0, seq);
        let mut body = Vec::new();
        body.extend_from_slice(&[0x5a; 16]);
        body.extend_from_slice(b"filled");
        body.extend_from_slice(b"xxx");
        body.extend_from_slice(&hdr);
        let mac = i.send.seal(&mut body);
        let mut tok = hdr.to_vec();
        tok.extend_from_slice(&body);
        tok.extend_from_slice(&mac[..i.send.mac_len]);
        let mut out = Vec::new();
        a.unwrap(&tok, &mut out).unwrap();
        assert_eq!(out, b"filled", "enctype {enctype}");
    }
}

fn integrity_err(r: Result<bool, SaslError>) -> String {
    match r {
        Err(SaslError::Integrity(m)) => m,
        other => panic!("expected an integrity error, got {other:?}"),
    }
}

#[test]
fn bad_tokens_are_integrity_errors_naming_the_cause() {
    for (enctype, sealed) in ALL.into_iter().flat_map(|e| [(e, true), (e, false)]) {
        let (mut i, mut a) = pair(enctype, true);
        let mut tok = Vec::new();
        i.wrap(sealed, b"hello, NameNode", &mut tok);
        let mut out = vec![1, 2, 3];
        // every single bit flipped after the header's flags is caught
        for bit in 0..tok.len() * 8 {
            let mut t = tok.clone();
            t[bit / 8] ^= 1 << (bit % 8);
            let before = (a.recv_seq(), out.clone());
            assert!(
                a.unwrap(&t, &mut out).is_err(),
                "enctype {enctype} bit {bit} sealed={sealed}"
            );
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
    for enctype in ALL {
        let (mut i, mut a) = pair(enctype, false);
        let mut tok = Vec::new();
        i.wrap(false, b"abc", &mut tok);
        tok[5] = 11;
        let m = integrity_err(a.unwrap(&tok, &mut Vec::new()));
        let want = format!(
            "EC is 11, not the checksum's {} bytes",
            mac_len(enctype).unwrap()
        );
        assert!(m.contains(&want), "{m}");
    }
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
    let p = CfxParams {
        ctx_key: CfxKey {
            enctype: 20,
            key: &key[..16],
        },
        ..p
    };
    assert_eq!(
        CfxContext::new(&p, &[0; 32]).unwrap_err(),
        CfxKeyError::KeyLength {
            enctype: 20,
            len: 16
        }
    );
    assert!((17..=20).all(supports) && !supports(16) && !supports(21) && !supports(23));
    assert_eq!(
        [16, 17, 18, 19, 20, 21].map(mac_len),
        [None, Some(12), Some(12), Some(16), Some(24), None]
    );
}

// RFC 8009 Appendix A, as printed there: the base keys (key usage 2) of the "Sample results
// for key derivation", which the sample encryptions and checksums use too.
const RFC8009_BASE_19: &str = "37 05 D9 60 80 C1 77 28 A0 E8 00 EA B6 E0 D2 3C";
const RFC8009_BASE_20: &str = "6D 40 4D 37 FA F7 9F 9D F0 D3 35 68 D3 20 66 98
                               00 EB 48 36 47 2E A8 A0 26 D1 6B 71 82 46 0C 52";

/// RFC 8009 Appendix A, "Sample results for key derivation": Kc, Ke and Ki of key usage 2.
#[test]
fn kdf_matches_rfc_8009_vectors() {
    let b19 = hex(RFC8009_BASE_19);
    let b20 = hex(RFC8009_BASE_20);
    let k19 = |c: u8, len: usize| {
        let mut k = vec![0u8; len];
        kdf_hmac_sha2::<HmacSha256>(&b19, 2, c, &mut k);
        k
    };
    let k20 = |c: u8, len: usize| {
        let mut k = vec![0u8; len];
        kdf_hmac_sha2::<HmacSha384>(&b20, 2, c, &mut k);
        k
    };
    assert_eq!(
        k19(0x99, 16),
        hex("B3 1A 01 8A 48 F5 47 76 F4 03 E9 A3 96 32 5D C3")
    );
    assert_eq!(
        k19(0xAA, 16),
        hex("9B 19 7D D1 E8 C5 60 9D 6E 67 C3 E3 7C 62 C7 2E")
    );
    assert_eq!(
        k19(0x55, 16),
        hex("9F DA 0E 56 AB 2D 85 E1 56 9A 68 86 96 C2 6A 6C")
    );
    assert_eq!(
        k20(0x99, 24),
        hex("EF 57 18 BE 86 CC 84 96 3D 8B BB 50 31 E9 F5 C4
             BA 41 F2 8F AF 69 E7 3D")
    );
    assert_eq!(
        k20(0xAA, 32),
        hex("56 AB 22 BE E6 3D 82 D7 BC 52 27 F6 77 3F 8E A7
             A5 EB 1C 82 51 60 C3 83 12 98 0C 44 2E 5C 7E 49")
    );
    assert_eq!(
        k20(0x55, 24),
        hex("69 B1 65 14 E3 CD 8E 56 B8 20 10 D5 C7 30 12 B6
             22 C4 D0 0F FC 23 ED 1F")
    );
}

/// RFC 8009 Appendix A, "Sample encryptions (all using the default cipher state)": key usage 2,
/// the given confounder, plaintexts of 0, 6, 16 and 21 bytes; the output is the AES-CTS
/// ciphertext followed by the truncated HMAC. The keys of [`DirKeys`] seal them (as a Wrap
/// token's body is sealed) and open them again; a flipped bit anywhere is refused.
#[test]
fn encryption_matches_rfc_8009_vectors() {
    let plain = hex("00 01 02 03 04 05 06 07 08 09 0A 0B 0C 0D 0E 0F 10 11 12 13 14");
    let cases: &[(i32, &str, usize, &str)] = &[
        (
            19,
            "7E 58 95 EA F2 67 24 35 BA D8 17 F5 45 A3 71 48",
            0,
            "EF 85 FB 89 0B B8 47 2F 4D AB 20 39 4D CA 78 1D
             AD 87 7E DA 39 D5 0C 87 0C 0D 5A 0A 8E 48 C7 18",
        ),
        (
            19,
            "7B CA 28 5E 2F D4 13 0F B5 5B 1A 5C 83 BC 5B 24",
            6,
            "84 D7 F3 07 54 ED 98 7B AB 0B F3 50 6B EB 09 CF
             B5 54 02 CE F7 E6 87 7C E9 9E 24 7E 52 D1 6E D4
             42 1D FD F8 97 6C",
        ),
        (
            19,
            "56 AB 21 71 3F F6 2C 0A 14 57 20 0F 6F A9 94 8F",
            16,
            "35 17 D6 40 F5 0D DC 8A D3 62 87 22 B3 56 9D 2A
             E0 74 93 FA 82 63 25 40 80 EA 65 C1 00 8E 8F C2
             95 FB 48 52 E7 D8 3E 1E 7C 48 C3 7E EB E6 B0 D3",
        ),
        (
            19,
            "A7 A4 E2 9A 47 28 CE 10 66 4F B6 4E 49 AD 3F AC",
            21,
            "72 0F 73 B1 8D 98 59 CD 6C CB 43 46 11 5C D3 36
             C7 0F 58 ED C0 C4 43 7C 55 73 54 4C 31 C8 13 BC
             E1 E6 D0 72 C1 86 B3 9A 41 3C 2F 92 CA 9B 83 34
             A2 87 FF CB FC",
        ),
        (
            20,
            "F7 64 E9 FA 15 C2 76 47 8B 2C 7D 0C 4E 5F 58 E4",
            0,
            "41 F5 3F A5 BF E7 02 6D 91 FA F9 BE 95 91 95 A0
             58 70 72 73 A9 6A 40 F0 A0 19 60 62 1A C6 12 74
             8B 9B BF BE 7E B4 CE 3C",
        ),
        (
            20,
            "B8 0D 32 51 C1 F6 47 14 94 25 6F FE 71 2D 0B 9A",
            6,
            "4E D7 B3 7C 2B CA C8 F7 4F 23 C1 CF 07 E6 2B C7
             B7 5F B3 F6 37 B9 F5 59 C7 F6 64 F6 9E AB 7B 60
             92 23 75 26 EA 0D 1F 61 CB 20 D6 9D 10 F2",
        ),
        (
            20,
            "53 BF 8A 0D 10 52 65 D4 E2 76 42 86 24 CE 5E 63",
            16,
            "BC 47 FF EC 79 98 EB 91 E8 11 5C F8 D1 9D AC 4B
             BB E2 E1 63 E8 7D D3 7F 49 BE CA 92 02 77 64 F6
             8C F5 1F 14 D7 98 C2 27 3F 35 DF 57 4D 1F 93 2E
             40 C4 FF 25 5B 36 A2 66",
        ),
        (
            20,
            "76 3E 65 36 7E 86 4F 02 F5 51 53 C7 E3 B5 8A F1",
            21,
            "40 01 3E 2D F5 8E 87 51 95 7D 28 78 BC D2 D6 FE
             10 1C CF D5 56 CB 1E AE 79 DB 3C 3E E8 64 29 F2
             B2 A6 02 AC 86 FE F6 EC B6 47 D6 29 5F AE 07 7A
             1F EB 51 75 08 D2 C1 6B 41 92 E0 1F 62",
        ),
    ];
    for (enctype, confounder, len, want) in cases {
        let base = hex(if *enctype == 19 {
            RFC8009_BASE_19
        } else {
            RFC8009_BASE_20
        });
        let keys = DirKeys::new(
            CfxKey {
                enctype: *enctype,
                key: &base,
            },
            2,
        )
        .unwrap();
        let mut body = hex(confounder);
        body.extend_from_slice(&plain[..*len]);
        let mac = keys.seal(&mut body);
        let mut got = body.clone();
        got.extend_from_slice(&mac[..keys.mac_len]);
        assert_eq!(got, hex(want), "enctype {enctype}, {len} bytes");
        let (c, m) = got.split_at(body.len());
        for bit in 0..got.len() * 8 {
            let (mut c2, mut m2) = (c.to_vec(), m.to_vec());
            if bit / 8 < c.len() {
                c2[bit / 8] ^= 1 << (bit % 8);
            } else {
                m2[bit / 8 - c.len()] ^= 1 << (bit % 8);
            }
            assert!(!keys.open(&mut c2, &m2), "enctype {enctype}, bit {bit}");
        }
        let mut c = c.to_vec();
        assert!(keys.open(&mut c, m), "enctype {enctype}, {len} bytes");
        assert_eq!(&c[16..], &plain[..*len]);
        assert_eq!(c[..16], hex(confounder));
    }
}

/// RFC 8009 Appendix A, "Sample checksums": key usage 2 (`Kc`) over 21 bytes.
#[test]
fn checksums_match_rfc_8009_vectors() {
    let msg = hex("00 01 02 03 04 05 06 07 08 09 0A 0B 0C 0D 0E 0F 10 11 12 13 14");
    for (enctype, base, want) in [
        (
            19,
            RFC8009_BASE_19,
            "D7 83 67 18 66 43 D6 7B 41 1C BA 91 39 FC 1D EE",
        ),
        (
            20,
            RFC8009_BASE_20,
            "45 EE 79 15 67 EE FC A3 7F 4A C1 E0 22 2D E8 0D
             43 C3 BF A0 66 99 67 2A",
        ),
    ] {
        let base = hex(base);
        let keys = DirKeys::new(
            CfxKey {
                enctype,
                key: &base,
            },
            2,
        )
        .unwrap();
        let sum = keys.kc.tag(&[&msg]);
        assert_eq!(sum[..keys.mac_len], hex(want), "enctype {enctype}");
    }
}
