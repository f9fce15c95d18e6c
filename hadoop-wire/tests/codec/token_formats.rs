//! Token formats (`hadoop_wire::token`): Writable primitives, the Token's forms and strings,
//! Credentials files in both formats, the identifiers and their Java re-serialization, and the
//! secret managers' passwords and refusals.
//!
//! Vectors: the HDFS delegation token of security.md §4.3 (from hdfs-native's DIGEST-MD5 test,
//! recomputed there), RFC 2202's HMAC-SHA1 cases, and identifier re-serializations produced by
//! protobuf-java (Hadoop 3.5's shaded copy) for the same input bytes.

use hadoop_wire::pb::hadoop::common::{CredentialsKvProto, CredentialsProto, TokenProto};
use hadoop_wire::pb::hadoop::yarn as py;
use hadoop_wire::sasl::SaslError;
use hadoop_wire::token::secret::{
    create_password, passwords_match, ContainerTokenSecretManager, NmTokenSecretManager,
};
use hadoop_wire::token::writable::{self, WritableReader};
use hadoop_wire::token::{
    sasl_decode, AmrmTokenIdentifier, ContainerTokenIdentifier, Credentials,
    DelegationIdentifier as _, DelegationTokenIdentifier, Format, Limits, MasterKey, MasterKeys,
    NmTokenIdentifier, NodeId, Token, TokenError, TokenIdentifier, KIND_CONTAINER,
    KIND_HDFS_DELEGATION, KIND_NM,
};
use hadoop_wire::yarn::ids::{AppId, AttemptId, ContainerId};
use prost::Message;

fn unhex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// security.md §4.3: an HDFS delegation token identifier and its password.
fn dt_vector() -> (Vec<u8>, Vec<u8>) {
    let mut id = vec![0x00, 0x1a];
    id.extend_from_slice(b"hdfs/localhost@EXAMPLE.COM");
    id.extend_from_slice(&unhex("0000 8a018e6dfed293 8a018e920b5693 01 02"));
    (id, unhex("0e0f8f5f8641810922c5770372734ccb9402ab4e"))
}

#[test]
fn delegation_token_vector_decodes() {
    let (raw, _) = dt_vector();
    let id = DelegationTokenIdentifier::parse(&raw).unwrap();
    assert_eq!(id.owner(), "hdfs/localhost@EXAMPLE.COM");
    assert_eq!(id.renewer(), "");
    assert_eq!(id.real_user(), "");
    assert_eq!(id.issue_date(), 1711242400403);
    assert_eq!(id.max_date(), 1711847200403);
    assert_eq!(id.sequence_number(), 1);
    assert_eq!(id.master_key_id(), 2);
    assert_eq!(id.user().as_deref(), Some("hdfs/localhost@EXAMPLE.COM"));
    assert!(!id.is_proxy());
    assert_eq!(id.raw(), &raw[..]);
    assert_eq!(id.bytes(), &raw[..], "canonical input re-encodes to itself");
    let built = DelegationTokenIdentifier::new(
        "hdfs/localhost@EXAMPLE.COM",
        "",
        "",
        1711242400403,
        1711847200403,
        1,
        2,
    );
    assert_eq!(built.bytes(), &raw[..]);
    assert_eq!(
        DelegationTokenIdentifier::KIND,
        KIND_HDFS_DELEGATION,
        "kind"
    );
}

#[test]
fn delegation_token_bad_inputs() {
    let (raw, _) = dt_vector();
    for n in 0..raw.len() {
        assert!(
            DelegationTokenIdentifier::parse(&raw[..n]).is_err(),
            "prefix {n}"
        );
    }
    let mut v1 = raw.clone();
    v1[0] = 1;
    assert_eq!(
        DelegationTokenIdentifier::parse(&v1),
        Err(TokenError::DelegationVersion(1))
    );
    // trailing bytes are ignored (Java's readFields stops after masterKeyId) and dropped by
    // the re-serialization
    let mut long = raw.clone();
    long.extend_from_slice(b"xyz");
    let id = DelegationTokenIdentifier::parse(&long).unwrap();
    assert_eq!(id.bytes(), &raw[..]);
    assert_eq!(id.raw(), &long[..]);
    // a non-minimal vlong is read (as Java reads it) and re-written minimal
    let mut loose = vec![0, 0, 0, 0];
    loose.extend_from_slice(&[0x8f, 0x05, 0x00, 0x00, 0x00]);
    let id = DelegationTokenIdentifier::parse(&loose).unwrap();
    assert_eq!(id.issue_date(), 5);
    assert_eq!(id.bytes(), [0, 0, 0, 0, 5, 0, 0, 0]);
    assert_eq!(id.user(), None, "empty owner: no user");
    // an owner length over Text.DEFAULT_MAX_LEN
    let mut huge = vec![0];
    writable::write_vint(&mut huge, 1 << 20);
    assert!(matches!(
        DelegationTokenIdentifier::parse(&huge),
        Err(TokenError::TooLong { .. })
    ));
}

#[test]
fn sasl_strings_of_the_vector() {
    let (id, pw) = dt_vector();
    let t = Token::new(
        id.clone(),
        pw.clone(),
        KIND_HDFS_DELEGATION,
        "127.0.0.1:8020",
    );
    assert_eq!(
        t.sasl_username(),
        "ABpoZGZzL2xvY2FsaG9zdEBFWEFNUExFLkNPTQAAigGObf7Sk4oBjpILVpMBAg=="
    );
    assert_eq!(t.sasl_password(), "Dg+PX4ZBgQkixXcDcnNMy5QCq04=");
    assert_eq!(sasl_decode(&t.sasl_username(), "username").unwrap(), id);
    assert_eq!(sasl_decode(&t.sasl_password(), "password").unwrap(), pw);
    assert!(sasl_decode("@@@", "username").is_err());
    assert!(
        !format!("{t:?}").contains("Dg+P"),
        "Debug hides the password"
    );
}

#[test]
fn vint_and_vlong_edges() {
    let cases: &[(i64, &str)] = &[
        (0, "00"),
        (-1, "ff"),
        (-112, "90"),
        (127, "7f"),
        (-113, "8770"),
        (128, "8f80"),
        (i64::from(i32::MAX), "8c7fffffff"),
        (i64::from(i32::MIN), "847fffffff"),
        (i64::MAX, "887fffffffffffffff"),
        (i64::MIN, "807fffffffffffffff"),
    ];
    for &(v, hex) in cases {
        let mut b = Vec::new();
        writable::write_vlong(&mut b, v);
        assert_eq!(b, unhex(hex), "writeVLong({v})");
        assert_eq!(writable::vlong_size(v), b.len(), "getVIntSize({v})");
        let mut r = WritableReader::new(&b);
        assert_eq!(r.read_vlong("v").unwrap(), v);
        assert!(r.is_empty());
        let fits = i32::try_from(v).is_ok();
        let read = WritableReader::new(&b).read_vint("v");
        if fits {
            assert_eq!(read.unwrap() as i64, v);
            let mut b2 = Vec::new();
            writable::write_vint(&mut b2, v as i32);
            assert_eq!(b2, b);
        } else {
            assert_eq!(
                read,
                Err(TokenError::VIntRange {
                    what: "v",
                    value: v
                })
            );
        }
        for n in 0..b.len() {
            assert_eq!(
                WritableReader::new(&b[..n]).read_vlong("v"),
                Err(TokenError::Truncated { what: "v" })
            );
        }
    }
    // lengths: negative and over the cap
    let mut neg = Vec::new();
    writable::write_vint(&mut neg, -5);
    assert!(matches!(
        WritableReader::new(&neg).read_vint_bytes("b", 100),
        Err(TokenError::NegativeLength { len: -5, .. })
    ));
    let mut big = Vec::new();
    writable::write_vint(&mut big, i32::MAX);
    assert!(matches!(
        WritableReader::new(&big).read_vint_bytes("b", 100),
        Err(TokenError::TooLong { .. })
    ));
    assert_eq!(
        WritableReader::new(&big).read_vint_bytes("b", usize::MAX),
        Err(TokenError::Truncated { what: "b" })
    );
    // WritableUtils.writeString: int32 length, -1 = null; other negatives are errors
    assert!(WritableReader::new(&[0xff, 0xff, 0xff, 0xfe])
        .read_string("s", 10)
        .is_err());
    assert!(WritableReader::new(&[0, 0, 0, 1, 0xff])
        .read_string("s", 10)
        .is_err());
}

fn sample_token(i: u8) -> Token {
    Token::new(
        vec![i; 30],
        vec![i.wrapping_mul(7); 20],
        if i % 2 == 0 { KIND_NM } else { KIND_CONTAINER },
        format!("10.0.0.{i}:8041"),
    )
}

#[test]
fn token_forms_round_trip() {
    let limits = Limits::DEFAULT;
    let t = sample_token(3);
    let w = t.to_writable();
    let mut expect = vec![30];
    expect.extend_from_slice(&[3; 30]);
    expect.push(20);
    expect.extend_from_slice(&[21; 20]);
    expect.push(14);
    expect.extend_from_slice(b"ContainerToken");
    expect.push(13);
    expect.extend_from_slice(b"10.0.0.3:8041");
    assert_eq!(w, expect);
    assert_eq!(Token::from_writable(&w, &limits).unwrap(), t);

    let p = t.encode_proto();
    assert_eq!(
        p,
        TokenProto {
            identifier: t.identifier.clone(),
            password: t.password.clone(),
            kind: t.kind.clone(),
            service: t.service.clone(),
        }
        .encode_to_vec()
    );
    assert_eq!(Token::decode_proto(&p, &limits).unwrap(), t);
    // all four fields are required
    let no_service = &p[..p.len() - 15];
    assert!(matches!(
        Token::decode_proto(no_service, &limits),
        Err(TokenError::Proto { .. })
    ));

    let url = t.encode_to_url_string();
    assert!(!url.contains(['=', '+', '/']), "{url}");
    assert_eq!(Token::decode_from_url_string(&url, &limits).unwrap(), t);
    // commons-codec decodes the standard alphabet and padding too
    use base64::Engine;
    let std = base64::engine::general_purpose::STANDARD.encode(&w);
    assert_eq!(Token::decode_from_url_string(&std, &limits).unwrap(), t);
    assert!(Token::decode_from_url_string("!!", &limits).is_err());

    // the empty token (insecure clusters)
    let empty = Token::default();
    assert_eq!(empty.to_writable(), [0, 0, 0, 0]);
    assert_eq!(Token::from_writable(&[0, 0, 0, 0], &limits).unwrap(), empty);
    for n in 0..w.len() {
        assert!(
            Token::from_writable(&w[..n], &limits).is_err(),
            "prefix {n}"
        );
    }
}

fn sample_credentials() -> Credentials {
    let mut c = Credentials::new();
    c.add_token("nm", sample_token(2));
    c.add_token("ct", sample_token(3));
    c.add_token("", Token::default());
    c.add_secret("key.one", vec![1, 2, 3]);
    c.add_secret("key.empty", Vec::new());
    c
}

#[test]
fn credentials_round_trip_both_formats() {
    assert_eq!(
        Credentials::new().write(Format::Writable),
        unhex("48445453 00 00 00")
    );
    assert_eq!(Format::default(), Format::Writable, "Hadoop 3.5's default");
    let c = sample_credentials();
    for format in [Format::Writable, Format::Protobuf] {
        let b = c.write(format);
        assert_eq!(&b[..4], b"HDTS");
        assert_eq!(b[4], format.byte());
        let (back, f) = Credentials::read_format(&b, &Limits::DEFAULT).unwrap();
        assert_eq!(f, format);
        assert_eq!(back, c, "{format:?}");
        assert_eq!(Credentials::read(&b).unwrap(), c);
    }
    assert_eq!(c.find(KIND_NM, "10.0.0.2:8041"), Some(&sample_token(2)));
    assert_eq!(c.find(KIND_NM, "10.0.0.3:8041"), None);
    assert_eq!(c.token("ct"), Some(&sample_token(3)));
    assert_eq!(c.secret("key.one"), Some(&[1u8, 2, 3][..]));
    assert_eq!(c.tokens_of_kind(KIND_CONTAINER).count(), 1);
    assert!(
        !format!("{c:?}").contains("[1, 2, 3]"),
        "Debug hides secrets"
    );

    // a repeated alias replaces the earlier entry (Java's maps), keeping its position
    let mut w = Vec::new();
    w.extend_from_slice(b"HDTS\0");
    writable::write_vint(&mut w, 2);
    for i in [4u8, 5] {
        writable::write_text(&mut w, "same");
        sample_token(i).write_writable(&mut w);
    }
    writable::write_vint(&mut w, 0);
    let d = Credentials::read(&w).unwrap();
    assert_eq!(d.tokens, vec![("same".to_string(), sample_token(5))]);
}

#[test]
fn credentials_protobuf_layout() {
    let c = sample_credentials();
    let b = c.write(Format::Protobuf);
    let body = CredentialsProto {
        tokens: c
            .tokens
            .iter()
            .map(|(a, t)| CredentialsKvProto {
                alias: a.clone(),
                token: Some(t.to_proto()),
                secret: None,
            })
            .collect(),
        secrets: c
            .secrets
            .iter()
            .map(|(a, s)| CredentialsKvProto {
                alias: a.clone(),
                token: None,
                secret: Some(s.clone()),
            })
            .collect(),
    };
    let mut expect = b"HDTS\x01".to_vec();
    expect.extend_from_slice(&body.encode_length_delimited_to_vec());
    assert_eq!(b, expect);
    // a token entry without its token is Java's empty default token
    let bare = CredentialsProto {
        tokens: vec![CredentialsKvProto {
            alias: "a".into(),
            token: None,
            secret: None,
        }],
        secrets: vec![],
    };
    let mut f = b"HDTS\x01".to_vec();
    f.extend_from_slice(&bare.encode_length_delimited_to_vec());
    assert_eq!(
        Credentials::read(&f).unwrap().tokens,
        vec![("a".to_string(), Token::default())]
    );
    // the alias is required
    let mut g = b"HDTS\x01".to_vec();
    g.extend_from_slice(&[4, 0x0a, 2, 0x1a, 0]);
    assert!(matches!(
        Credentials::read(&g),
        Err(TokenError::Proto { .. })
    ));
}

#[test]
fn credentials_truncated_and_oversized_inputs_fail() {
    let c = sample_credentials();
    for format in [Format::Writable, Format::Protobuf] {
        let b = c.write(format);
        for n in 0..b.len() {
            assert!(
                Credentials::read(&b[..n]).is_err(),
                "{format:?} prefix {n} of {}",
                b.len()
            );
        }
    }
    assert_eq!(Credentials::read(b"HDTX\0\0\0"), Err(TokenError::BadMagic));
    assert_eq!(Credentials::read(b"HD"), Err(TokenError::BadMagic));
    assert_eq!(
        Credentials::read(b"HDTS\x02"),
        Err(TokenError::UnknownFormat(2))
    );

    // counts: negative, over the cap, and a huge claim with no data behind it
    let file = |tokens: i32| {
        let mut w = b"HDTS\0".to_vec();
        writable::write_vint(&mut w, tokens);
        w
    };
    assert!(matches!(
        Credentials::read(&file(-1)),
        Err(TokenError::TooMany { count: -1, .. })
    ));
    assert!(matches!(
        Credentials::read(&file(10_001)),
        Err(TokenError::TooMany { .. })
    ));
    assert!(matches!(
        Credentials::read(&file(10_000)),
        Err(TokenError::Truncated { .. })
    ));
    let small = Limits {
        max_tokens: 2,
        max_secrets: 1,
        max_bytes: 16,
        max_text: 8,
        max_file: 4096,
    };
    let b = c.write(Format::Writable);
    assert!(matches!(
        Credentials::read_with(&b, &small),
        Err(TokenError::TooMany { .. })
    ));
    let one = {
        let mut x = Credentials::new();
        x.add_token("t", sample_token(1));
        x
    };
    for format in [Format::Writable, Format::Protobuf] {
        assert!(
            matches!(
                Credentials::read_with(&one.write(format), &small),
                Err(TokenError::TooLong { .. })
            ),
            "{format:?}: a 30-byte identifier over max_bytes 16"
        );
    }
    let long_alias = {
        let mut x = Credentials::new();
        x.add_secret("a-long-alias", vec![1]);
        x
    };
    for format in [Format::Writable, Format::Protobuf] {
        assert!(matches!(
            Credentials::read_with(&long_alias.write(format), &small),
            Err(TokenError::TooLong { .. })
        ));
    }
    let tiny_file = Limits {
        max_file: 8,
        ..Limits::DEFAULT
    };
    assert!(matches!(
        Credentials::read_with(&c.write(Format::Writable), &tiny_file),
        Err(TokenError::TooLong { .. })
    ));
    // a protobuf body length beyond the bytes present
    let mut p = b"HDTS\x01".to_vec();
    p.extend_from_slice(&[0xff, 0xff, 0x03, 0x0a]);
    assert!(matches!(
        Credentials::read(&p),
        Err(TokenError::Truncated { .. })
    ));
    // a secret length beyond the bytes present
    let mut s = b"HDTS\0\0\x01\x01k".to_vec();
    writable::write_vint(&mut s, 1_000_000);
    assert!(matches!(
        Credentials::read(&s),
        Err(TokenError::Truncated { .. })
    ));
    // text that is not UTF-8
    let bad_alias = b"HDTS\0\x01\x01\xff\0\0\0\0";
    assert!(matches!(
        Credentials::read(bad_alias),
        Err(TokenError::Utf8 { .. })
    ));
}

#[test]
fn hmac_sha1_rfc2202_vectors() {
    assert_eq!(
        create_password(&[0x0b; 20], b"Hi There").to_vec(),
        unhex("b617318655057264e28bc0b6fb378c8ef146be00")
    );
    assert_eq!(
        create_password(b"Jefe", b"what do ya want for nothing?").to_vec(),
        unhex("effcdf6ae5eb2fa2d27416d5f184df9c259a7c79")
    );
    assert_eq!(
        create_password(&[0xaa; 20], &[0xdd; 50]).to_vec(),
        unhex("125d7342b9ac11cd91a39af48aa17b4f63f175d3")
    );
    assert_eq!(
        create_password(
            &[0xaa; 80],
            b"Test Using Larger Than Block-Size Key - Hash Key First"
        )
        .to_vec(),
        unhex("aa4ae5e15272d00e95705637ce8a3b55ed402112")
    );
    let pw = create_password(b"k", b"id");
    assert!(passwords_match(&pw, &pw));
    let mut other = pw;
    other[19] ^= 1;
    assert!(!passwords_match(&pw, &other));
    assert!(!passwords_match(&pw, &pw[..19]));
}

fn attempt(app: i32, n: i32) -> AttemptId {
    AttemptId {
        app: AppId::new(1_700_000_000_000, app),
        attempt: n,
    }
}

fn node() -> NodeId {
    NodeId::new("nm1.example.com", 45454)
}

fn key(id: i32) -> MasterKey {
    MasterKey::new(id, [id as u8; 8]).unwrap()
}

#[test]
fn mint_and_verify_with_current_previous_and_unknown_key() {
    let mut keys = MasterKeys::new();
    let id1 = NmTokenIdentifier::new(Some(attempt(1, 1)), Some(&node()), "alice", 11);
    assert_eq!(keys.mint(&id1), Err(TokenError::NoCurrentKey));
    keys.set_master_key(key(11));
    let t = keys.token(&id1, "10.0.0.1:45454").unwrap();
    assert_eq!(t.kind, KIND_NM);
    assert_eq!(t.identifier, id1.bytes());
    assert_eq!(t.password, create_password(&[11; 8], id1.bytes()));

    let mut nm = NmTokenSecretManager::default();
    nm.set_node_id(node());
    nm.set_master_key(key(11));
    let parsed = NmTokenIdentifier::parse(&t.identifier).unwrap();
    assert_eq!(
        parsed.user().as_deref(),
        Some("appattempt_1700000000000_0001_000001")
    );
    assert_eq!(nm.retrieve_password(&parsed).unwrap()[..], t.password[..]);

    // one roll: the token's key is the previous one and still verifies
    keys.set_master_key(key(12));
    nm.set_master_key(key(12));
    assert_eq!(nm.retrieve_password(&parsed).unwrap()[..], t.password[..]);
    assert_eq!(keys.mint(&id1).unwrap()[..], t.password[..]);

    // two rolls: unknown
    keys.set_master_key(key(13));
    nm.set_master_key(key(13));
    assert_eq!(keys.mint(&id1), Err(TokenError::UnknownKey(11)));
    assert_eq!(
        nm.retrieve_password(&parsed),
        Err(TokenError::InvalidToken(
            "Given NMToken for application : appattempt_1700000000000_0001_000001 seems to have been generated illegally.".into()
        ))
    );

    // the key an attempt started a container with is remembered past rolls
    let id2 = NmTokenIdentifier::new(Some(attempt(2, 1)), Some(&node()), "bob", 13);
    nm.app_attempt_start_container(&id2).unwrap();
    assert!(nm.has_attempt_key(&attempt(2, 1)));
    let pw2 = nm.retrieve_password(&id2).unwrap();
    nm.set_master_key(key(14));
    nm.set_master_key(key(15));
    assert_eq!(nm.retrieve_password(&id2).unwrap(), pw2);
    assert_eq!(
        nm.app_attempt_start_container(&id2),
        Ok(()),
        "same key id as remembered"
    );
    let old = NmTokenIdentifier::new(Some(attempt(3, 1)), Some(&node()), "bob", 12);
    assert_eq!(
        nm.app_attempt_start_container(&old),
        Err(TokenError::InvalidToken(
            "Older NMToken should not be used while starting the container.".into()
        ))
    );
    nm.app_finished(AppId::new(1_700_000_000_000, 2));
    assert!(!nm.has_attempt_key(&attempt(2, 1)));

    // another node's token
    let elsewhere =
        NmTokenIdentifier::new(Some(attempt(1, 1)), Some(&NodeId::new("nm2", 1)), "a", 15);
    assert_eq!(
        nm.retrieve_password(&elsewhere),
        Err(TokenError::InvalidToken(
            "Given NMToken for application : appattempt_1700000000000_0001_000001 is not valid for current node manager.expected : nm1.example.com:45454 found : nm2:1".into()
        ))
    );
    let e: SaslError = nm.retrieve_password(&elsewhere).unwrap_err().into();
    assert!(matches!(e, SaslError::InvalidToken(ref m) if m.contains("nm2:1")));
    assert_eq!(
        e.java_class(),
        "org.apache.hadoop.security.token.SecretManager$InvalidToken"
    );
}

fn container(app: i32, id: i64) -> ContainerId {
    ContainerId::new(AppId::new(1_700_000_000_000, app), 1, id)
}

fn container_token_id(
    c: ContainerId,
    key_id: i32,
    expiry: i64,
    nm_addr: &str,
) -> ContainerTokenIdentifier {
    ContainerTokenIdentifier::from_proto(py::ContainerTokenIdentifierProto {
        container_id: Some(c.to_proto()),
        nm_host_addr: Some(nm_addr.into()),
        app_submitter: Some("alice".into()),
        resource: Some(py::ResourceProto {
            memory: Some(1024),
            virtual_cores: Some(1),
            resource_value_map: vec![],
        }),
        expiry_time_stamp: Some(expiry),
        master_key_id: Some(key_id),
        rm_identifier: Some(1_700_000_000_000),
        priority: Some(py::PriorityProto { priority: Some(0) }),
        creation_time: Some(expiry - 600_000),
        node_label_expression: Some(String::new()),
        container_type: Some(py::ContainerTypeProto::Task as i32),
        execution_type: Some(py::ExecutionTypeProto::Guaranteed as i32),
        version: Some(0),
        ..Default::default()
    })
}

#[test]
fn container_token_checks() {
    let now = 1_700_000_100_000;
    let addr = node().to_string();
    let mut rm_keys = MasterKeys::new();
    rm_keys.set_master_key(key(21));
    let mut nm = ContainerTokenSecretManager::new(2);
    nm.set_node_id(&node());
    nm.set_master_key(key(21));

    let ct = container_token_id(container(1, 5), 21, now + 600_000, &addr);
    let token = rm_keys.token(&ct, "10.0.0.1:45454").unwrap();
    assert_eq!(token.kind, KIND_CONTAINER);
    let checked = nm.verify(&token).unwrap();
    assert_eq!(
        checked.user().as_deref(),
        Some("container_1700000000000_0001_01_000005")
    );
    assert_eq!(checked.bytes(), ct.bytes());

    let mut forged = token.clone();
    forged.password[0] ^= 1;
    assert_eq!(
        nm.verify(&forged).unwrap_err(),
        TokenError::InvalidToken(
            "Invalid container token used for starting container on : nm1.example.com:45454".into()
        )
    );
    let wrong_node = container_token_id(container(1, 6), 21, now + 600_000, "other:1");
    assert_eq!(
        nm.verify(&rm_keys.token(&wrong_node, "").unwrap()).unwrap_err(),
        TokenError::InvalidToken(
            "Given Container container_1700000000000_0001_01_000006 identifier is not valid for current Node manager. Expected : nm1.example.com:45454 Found : other:1".into()
        )
    );
    let unknown_key = container_token_id(container(1, 7), 99, now + 600_000, &addr);
    assert_eq!(
        nm.retrieve_password(&unknown_key).unwrap_err(),
        TokenError::InvalidToken(
            "Given Container container_1700000000000_0001_01_000007 seems to have an illegally generated token.".into()
        )
    );
    assert_eq!(
        nm.verify(&Token::default()).unwrap_err(),
        TokenError::InvalidToken("Invalid ContainerToken".into())
    );

    // start authorization: application, relaunch, expiry
    let nm_token = NmTokenIdentifier::new(Some(attempt(1, 1)), Some(&node()), "alice", 1);
    nm.authorize_start(&nm_token, &checked, now).unwrap();
    nm.start_container_successful(&checked, now).unwrap();
    assert_eq!(
        nm.authorize_start(&nm_token, &checked, now).unwrap_err(),
        TokenError::Unauthorized(
            "Unauthorized request to start container.\n Attempt to relaunch the same container with id container_1700000000000_0001_01_000005.".into()
        )
    );
    let other_app = NmTokenIdentifier::new(Some(attempt(9, 1)), Some(&node()), "eve", 1);
    let e = nm.authorize_start(&other_app, &checked, now).unwrap_err();
    assert_eq!(
        e,
        TokenError::Unauthorized(
            "Unauthorized request to start container.\nNMToken for application attempt : appattempt_1700000000000_0009_000001 was used for starting container with container token issued for application attempt : appattempt_1700000000000_0001_000001".into()
        )
    );
    assert_eq!(
        e.java_class(),
        "org.apache.hadoop.yarn.exceptions.YarnException"
    );
    // after the token expired the start is forgotten, and the token refused as expired
    let later = now + 600_001;
    assert_eq!(
        nm.authorize_start(&nm_token, &checked, later).unwrap_err(),
        TokenError::Unauthorized(format!(
            "Unauthorized request to start container.\nThis token is expired. current time is {later} found {}\nNote: System times on machines may be out of sync. Check system time and time zones.",
            now + 600_000
        ))
    );
    assert_eq!(nm.remembered_starts(), 0);

    // the replay guard is bounded
    for i in 10..12 {
        let c = container_token_id(container(1, i), 21, now + 600_000, &addr);
        nm.start_container_successful(&c, now).unwrap();
    }
    let c = container_token_id(container(1, 12), 21, now + 600_000, &addr);
    assert!(matches!(
        nm.start_container_successful(&c, now),
        Err(TokenError::Full { max: 2, .. })
    ));
    // the previous key still verifies after one roll, not after two
    nm.set_master_key(key(22));
    assert!(nm.verify(&token).is_ok());
    nm.set_master_key(key(23));
    assert!(nm.verify(&token).is_err());
}

#[test]
fn identifiers_re_encode_canonical_input_to_itself() {
    // container token with all 16 fields
    let mut p = container_token_id(container(4, (3 << 40) | 8), 5, 1_700_000_600_000, "h:1")
        .proto()
        .clone();
    p.log_aggregation_context = Some(py::LogAggregationContextProto {
        include_pattern: Some(".*".into()),
        exclude_pattern: Some("x".into()),
        ..Default::default()
    });
    p.node_label_expression = Some("gpu".into());
    p.allocation_request_id = Some(-1);
    p.allocation_tags = vec!["a".into(), "b".into()];
    p.resource.as_mut().unwrap().resource_value_map = vec![py::ResourceInformationProto {
        key: "memory-mb".into(),
        value: Some(1024),
        units: Some("Mi".into()),
        r#type: Some(0),
        tags: vec![],
        attributes: vec![],
    }];
    let raw = p.encode_to_vec();
    let ct = ContainerTokenIdentifier::parse(&raw).unwrap();
    assert_eq!(ct.bytes(), &raw[..]);
    assert_eq!(ct.raw(), &raw[..]);
    assert_eq!(ct.proto(), &p);
    assert_eq!(
        ct.user().as_deref(),
        Some("container_e03_1700000000000_0004_01_000008")
    );
    assert_eq!(ct.container_id(), Some(container(4, (3 << 40) | 8)));
    assert_eq!(ct.nm_host_addr(), "h:1");
    assert_eq!(ct.master_key_id(), 5);
    assert_eq!(ct.expiry_time_stamp(), 1_700_000_600_000);
    assert_eq!(ct.node_label_expression(), "gpu");
    assert_eq!(ct.container_type(), Some(py::ContainerTypeProto::Task));
    assert_eq!(
        ct.execution_type(),
        Some(py::ExecutionTypeProto::Guaranteed)
    );
    assert_eq!(ct.allocation_tags(), ["a", "b"]);
    assert_eq!(ct.allocation_request_id(), -1);
    assert_eq!(ct.priority(), Some(0));

    let nm = NmTokenIdentifier::new(Some(attempt(7, 2)), Some(&node()), "alice", -3);
    let again = NmTokenIdentifier::parse(nm.bytes()).unwrap();
    assert_eq!(again.bytes(), nm.bytes());
    assert_eq!(again.node_id(), Some(node()));
    assert_eq!(again.key_id(), -3);
    assert_eq!(again.app_submitter(), "alice");
    assert!(!again.is_legacy());

    let am = AmrmTokenIdentifier::new(Some(attempt(7, 2)), 4);
    let again = AmrmTokenIdentifier::parse(am.bytes()).unwrap();
    assert_eq!(again.bytes(), am.bytes());
    assert_eq!(
        again.user().as_deref(),
        Some("appattempt_1700000000000_0007_000002")
    );
    assert_eq!(again.key_id(), 4);
    assert_eq!(
        AmrmTokenIdentifier::parse(&[]).unwrap().key_id(),
        -1,
        "proto default"
    );
    assert_eq!(AmrmTokenIdentifier::parse(&[]).unwrap().user(), None);
}

#[test]
fn non_canonical_identifiers_are_re_serialized_as_java_does() {
    // Pairs (input, protobuf-java's parseFrom(input).toByteArray()), NMTokenIdentifierProto.
    let nm_cases = [
        // keyId 4, unknown field 9, appSubmitter twice (last wins), keyId again non-minimal
        ("200448071a01791a0178208500", "1a017820054807"),
        // nodeId in two pieces: merged
        ("12030a016112021005", "12050a01611005"),
        // keyId as fixed32: an unknown field
        ("2501000000", "2501000000"),
        // unknown group with a non-minimal varint inside
        ("3b0881003c", "3b08013c"),
    ];
    for (input, java) in nm_cases {
        let id = NmTokenIdentifier::parse(&unhex(input)).unwrap();
        assert_eq!(id.bytes(), &unhex(java)[..], "{input}");
        assert_eq!(id.raw(), &unhex(input)[..]);
    }
    // ContainerTokenIdentifierProto: unknown enum values follow the known fields
    for (input, java) in [("600160076809", "600160076809"), ("60076801", "68016007")] {
        let id = ContainerTokenIdentifier::parse(&unhex(input)).unwrap();
        assert_eq!(id.bytes(), &unhex(java)[..], "{input}");
    }
    let id = ContainerTokenIdentifier::parse(&unhex("60076801")).unwrap();
    assert_eq!(
        id.container_type(),
        None,
        "an unknown enum value is not seen"
    );
    // what protobuf-java refuses: a stray end-group tag, a missing required nested field
    assert!(NmTokenIdentifier::parse(&[0x24]).is_err());
    assert!(ContainerTokenIdentifier::parse(&unhex("22021a00")).is_err());

    // the password covers the re-serialization: a token whose identifier is sent in another
    // field order verifies when minted over Java's bytes
    let mut nm = NmTokenSecretManager::default();
    nm.set_master_key(key(4));
    let id = NmTokenIdentifier::parse(&unhex("200448071a01791a0178208500")).unwrap();
    assert_eq!(id.key_id(), 5);
    let mut keys = MasterKeys::new();
    keys.set_master_key(key(5));
    nm.set_master_key(key(5));
    let pw = create_password(&[5; 8], &unhex("1a017820054807"));
    assert_eq!(nm.retrieve_password(&id).unwrap(), pw);
    assert_eq!(keys.mint(&id).unwrap(), pw);
}

#[test]
fn legacy_nm_token_identifier_is_read_as_java_recovers_it() {
    let mut raw = Vec::new();
    raw.extend_from_slice(&1_700_000_000_000i64.to_be_bytes());
    raw.extend_from_slice(&7i32.to_be_bytes());
    raw.extend_from_slice(&2i32.to_be_bytes());
    for s in ["nm1.example.com:45454", "alice"] {
        raw.extend_from_slice(&(s.len() as u16).to_be_bytes());
        raw.extend_from_slice(s.as_bytes());
    }
    raw.extend_from_slice(&(-3i32).to_be_bytes());
    let id = NmTokenIdentifier::parse(&raw).unwrap();
    assert!(id.is_legacy());
    assert_eq!(id.raw(), &raw[..]);
    let built = NmTokenIdentifier::new(Some(attempt(7, 2)), Some(&node()), "alice", -3);
    assert_eq!(
        id.bytes(),
        built.bytes(),
        "Java hashes the protobuf form it builds"
    );
    // a bad port is refused
    let mut bad = raw.clone();
    let at = 16 + 2 + "nm1.example.com:".len();
    bad[at] = b'x';
    assert!(NmTokenIdentifier::parse(&bad).is_err());
}

#[test]
fn identifiers_refuse_oversized_input() {
    let big = vec![0u8; (1 << 20) + 1];
    assert!(matches!(
        ContainerTokenIdentifier::parse(&big),
        Err(TokenError::TooLong { .. })
    ));
    assert!(matches!(
        NmTokenIdentifier::parse(&big),
        Err(TokenError::TooLong { .. })
    ));
    assert!(matches!(
        DelegationTokenIdentifier::parse(&big),
        Err(TokenError::TooLong { .. })
    ));
}

#[test]
fn token_errors_become_sasl_invalid_token() {
    let e: SaslError = TokenError::BadMagic.into();
    assert_eq!(
        e,
        SaslError::InvalidToken("Bad header found in token storage.".into())
    );
    assert_eq!(TokenError::BadMagic.java_class(), "java.io.IOException");
}

#[test]
fn unknown_format_byte_is_named_as_java_names_it() {
    assert_eq!(
        Credentials::read(b"HDTS\xff").unwrap_err().to_string(),
        "Unknown credential format: -1"
    );
}
