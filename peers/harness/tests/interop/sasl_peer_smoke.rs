//! The `sasl` peer against itself: Hadoop's Java IPC client and TOKEN-only servers with
//! NMTokens minted by Hadoop's own code (and the exact refusals of bad ones), Credentials files,
//! and JDK DIGEST-MD5 sessions driven one step at a time through the commands. One JVM serves
//! the whole file.

use std::path::Path;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use hmac::{Hmac, KeyInit, Mac};
use peer_harness::{JavaException, Mode, Peer, Shared};
use serde_json::Value;

const KEY_HEX: &str = "0011223344556677";
const KEY: [u8; 8] = [0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77];
const ATTEMPT: &str = "appattempt_1_0001_000001";
const PROTECTIONS: [&str; 3] = ["authentication", "integrity", "privacy"];

static SASL: Shared = Shared::new(Mode::Sasl, &["--nm-key-id", "7", "--nm-key", KEY_HEX]);

fn b64(b: &[u8]) -> String {
    B64.encode(b)
}

fn unb64(v: &Value) -> Vec<u8> {
    let s = v
        .as_str()
        .unwrap_or_else(|| panic!("base64 string expected, got {v}"));
    B64.decode(s)
        .unwrap_or_else(|e| panic!("bad base64 {s:?}: {e}"))
}

fn text(v: &Value) -> String {
    String::from_utf8(unb64(v)).expect("utf-8 SASL token")
}

fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn field(tag: u8, body: &[u8], out: &mut Vec<u8>) {
    out.push(tag);
    varint(body.len() as u64, out);
    out.extend_from_slice(body);
}

/// NMTokenIdentifierProto for `appattempt_1_0001_000001` (cluster ts 1, app 1, attempt 1), as
/// protobuf writes it: {1 appAttemptId {1 {1 id, 2 ts}, 2 attempt}, 2 nodeId {1 host, 2 port},
/// 3 appSubmitter, 4 keyId}.
fn nm_identifier(host: &str, port: u16, submitter: &str, key_id: u64) -> Vec<u8> {
    let app = [0x08, 0x01, 0x10, 0x01];
    let mut attempt = Vec::new();
    field(0x0a, &app, &mut attempt);
    attempt.extend_from_slice(&[0x10, 0x01]);
    let mut node = Vec::new();
    field(0x0a, host.as_bytes(), &mut node);
    node.push(0x10);
    varint(u64::from(port), &mut node);
    let mut id = Vec::new();
    field(0x0a, &attempt, &mut id);
    field(0x12, &node, &mut id);
    field(0x1a, submitter.as_bytes(), &mut id);
    id.push(0x20);
    varint(key_id, &mut id);
    id
}

fn hmac_sha1(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut m = <Hmac<sha1::Sha1> as KeyInit>::new_from_slice(key).expect("any key length");
    m.update(data);
    m.finalize().into_bytes().to_vec()
}

fn mint(peer: &mut Peer, addr: &str, file: &Path, extra: &str) -> Value {
    let line = format!(
        "mint-nm-token {addr} {ATTEMPT} alice {} {extra}",
        file.display()
    );
    peer.command(line.trim_end()).expect("mint-nm-token")
}

fn call(peer: &mut Peer, addr: &str, file: &Path, protection: &str, ids: &str) -> Value {
    let line = format!("call {addr} {} {protection} {ids}", file.display());
    peer.command(line.trim_end())
        .unwrap_or_else(|e| panic!("{line}: {e}"))
}

fn call_err(peer: &mut Peer, addr: &str, file: &Path, protection: &str) -> JavaException {
    let line = format!("call {addr} {} {protection}", file.display());
    peer.command_expect_error(&line)
        .unwrap_or_else(|e| panic!("{line}: {e}"))
}

fn servers(peer: &Peer) -> Vec<(String, String)> {
    PROTECTIONS
        .iter()
        .map(|p| {
            let a = peer.sasl_server(p).expect("sasl server address");
            assert_eq!(a.ip().to_string(), "127.0.0.1");
            ((*p).to_owned(), a.to_string())
        })
        .collect()
}

#[test]
fn java_client_authenticates_with_a_minted_nm_token_at_every_protection() {
    let mut peer = SASL.lock().expect("sasl peer");
    assert_eq!(peer.ready()["nm_key_id"], 7);
    let dir = tempfile::tempdir().expect("temp dir");
    for (protection, addr) in servers(&peer) {
        let file = dir.path().join(format!("{protection}.tok"));
        let minted = mint(&mut peer, &addr, &file, "");
        let port = peer.sasl_server(&protection).expect("addr").port();
        let id = unb64(&minted["identifier"]);
        assert_eq!(id, nm_identifier("127.0.0.1", port, "alice", 7), "{minted}");
        // the NMToken password is HmacSHA1(master key, identifier bytes)
        assert_eq!(unb64(&minted["password"]), hmac_sha1(&KEY, &id), "{minted}");
        assert_eq!(minted["kind"], "NMToken");
        assert_eq!(minted["service"], addr.as_str());
        assert_eq!(minted["node_id"], addr.as_str());
        assert_eq!(minted["key_id"], 7);

        let r = call(&mut peer, &addr, &file, &protection, "");
        let expect = format!("user={ATTEMPT} auth=TOKEN ids=1");
        assert_eq!(
            r["failed"],
            serde_json::json!({ "container_1_0001_01_000001": expect }),
            "{protection}: {r}"
        );
        assert_eq!(r["user"], ATTEMPT);
        assert!(r["ms"].as_f64().expect("ms") > 0.0, "{r}");

        let two = call(
            &mut peer,
            &addr,
            &file,
            &protection,
            "container_1_0001_01_000002 container_1_0001_01_000003",
        );
        let failed = two["failed"].as_object().expect("failed map");
        assert_eq!(failed.len(), 2, "{two}");
        for (cid, msg) in failed {
            assert!(cid.starts_with("container_1_0001_01_00000"), "{cid}");
            assert_eq!(msg, &format!("user={ATTEMPT} auth=TOKEN ids=2"));
        }
    }
    // a client listing several protections takes its first one the server offers
    let addr = peer.sasl_server("integrity").expect("addr").to_string();
    let file = dir.path().join("integrity.tok");
    let r = call(
        &mut peer,
        &addr,
        &file,
        "privacy,integrity,authentication",
        "",
    );
    assert_eq!(
        r["failed"]["container_1_0001_01_000001"],
        format!("user={ATTEMPT} auth=TOKEN ids=1")
    );
}

#[test]
fn bad_nm_tokens_are_refused_with_hadoops_own_errors() {
    let mut peer = SASL.lock().expect("sasl peer");
    let dir = tempfile::tempdir().expect("temp dir");
    let auth = peer.sasl_server("authentication").expect("a").to_string();
    let integ = peer.sasl_server("integrity").expect("i").to_string();
    let priv_ = peer.sasl_server("privacy").expect("p").to_string();

    // right key id, wrong key bytes: the DIGEST response does not match the server's password
    let wrong_key = dir.path().join("wrong-key.tok");
    mint(&mut peer, &integ, &wrong_key, "key=0011223344556678");
    let e = call_err(&mut peer, &integ, &wrong_key, "integrity");
    assert_eq!(e.class, "javax.security.sasl.SaslException", "{e:?}");
    assert_eq!(
        e.message.as_deref(),
        Some("DIGEST-MD5: digest response format violation. Mismatched response.")
    );
    assert_eq!(
        e.cause_class.as_deref(),
        Some("javax.security.sasl.SaslException")
    );
    assert!(e.remote, "{e:?}");

    // a key id the NodeManager does not know
    let wrong_id = dir.path().join("wrong-id.tok");
    mint(&mut peer, &integ, &wrong_id, "key-id=8");
    let e = call_err(&mut peer, &integ, &wrong_id, "integrity");
    assert_eq!(
        e.class,
        "org.apache.hadoop.security.token.SecretManager$InvalidToken"
    );
    assert_eq!(
        e.message.as_deref(),
        Some(
            "Given NMToken for application : appattempt_1_0001_000001 seems to have been \
             generated illegally."
        ),
        "{e:?}"
    );
    assert!(e.remote, "{e:?}");

    // an identifier for another node, under this server's service name
    let other_node = dir.path().join("other-node.tok");
    mint(&mut peer, &integ, &other_node, &format!("service={priv_}"));
    let e = call_err(&mut peer, &priv_, &other_node, "privacy");
    assert_eq!(
        e.class,
        "org.apache.hadoop.security.token.SecretManager$InvalidToken"
    );
    assert_eq!(
        e.message.as_deref(),
        Some(
            format!(
                "Given NMToken for application : appattempt_1_0001_000001 is not valid for \
                 current node manager.expected : {priv_} found : {integ}"
            )
            .as_str()
        ),
        "{e:?}"
    );
    assert!(e.remote, "{e:?}");

    // no token for this server's service: the Java client gives up before any SASL
    let e = call_err(&mut peer, &auth, &wrong_id, "authentication");
    assert_eq!(e.class, "java.io.IOException", "{e:?}");
    assert!(!e.remote, "{e:?}");
    assert_eq!(
        e.cause_message.as_deref(),
        Some("org.apache.hadoop.security.AccessControlException: Client cannot authenticate via:[TOKEN]"),
        "{e:?}"
    );

    // the client wants privacy, the server offers only auth: the JDK client refuses locally
    let good = dir.path().join("auth.tok");
    mint(&mut peer, &auth, &good, "");
    let e = call_err(&mut peer, &auth, &good, "privacy");
    assert_eq!(e.class, "java.io.IOException", "{e:?}");
    assert!(!e.remote, "{e:?}");
    assert_eq!(
        e.cause_message.as_deref(),
        Some(
            "javax.security.sasl.SaslException: DIGEST-MD5: No common protection layer between \
             client and server"
        ),
        "{e:?}"
    );

    // the servers still serve good tokens afterwards
    let r = call(&mut peer, &auth, &good, "authentication", "");
    assert_eq!(
        r["failed"]["container_1_0001_01_000001"],
        format!("user={ATTEMPT} auth=TOKEN ids=1")
    );
}

#[test]
fn credentials_files_written_by_hadoop_read_back() {
    let mut peer = SASL.lock().expect("sasl peer");
    let dir = tempfile::tempdir().expect("temp dir");
    let addr = peer.sasl_server("privacy").expect("addr").to_string();
    for (format, byte) in [("writable", 0u8), ("protobuf", 1u8)] {
        let file = dir.path().join(format!("{format}.tok"));
        let minted = mint(&mut peer, &addr, &file, &format!("format={format}"));
        assert_eq!(minted["format"], format);
        let raw = std::fs::read(&file).expect("token file");
        assert_eq!(&raw[..5], &[b'H', b'D', b'T', b'S', byte], "{format}");

        let r = peer
            .command(&format!("read-credentials {}", file.display()))
            .expect("read-credentials");
        assert_eq!(r["format"], format);
        assert_eq!(r["secrets"], serde_json::json!([]));
        let tokens = r["tokens"].as_array().expect("tokens");
        assert_eq!(tokens.len(), 1, "{r}");
        let t = &tokens[0];
        assert_eq!(t["alias"], addr.as_str());
        assert_eq!(t["service"], addr.as_str());
        assert_eq!(t["kind"], "NMToken");
        assert_eq!(t["identifier"], minted["identifier"]);
        assert_eq!(t["password"], minted["password"]);
        assert_eq!(
            t["nm_token"],
            serde_json::json!({
                "app_attempt_id": ATTEMPT,
                "node_id": addr,
                "app_submitter": "alice",
                "key_id": 7,
            })
        );
    }

    // a Writable file made here: no tokens, one secret key
    let file = dir.path().join("secret.tok");
    let mut raw = b"HDTS\x00\x00\x01".to_vec();
    raw.push(5);
    raw.extend_from_slice(b"alias");
    raw.extend_from_slice(&[3, 0xde, 0xad, 0x01]);
    std::fs::write(&file, &raw).expect("write");
    let r = peer
        .command(&format!("read-credentials {}", file.display()))
        .expect("read-credentials");
    assert_eq!(r["tokens"], serde_json::json!([]));
    assert_eq!(
        r["secrets"],
        serde_json::json!([{ "alias": "alias", "value": b64(&[0xde, 0xad, 0x01]) }])
    );
}

/// Server challenge, client response, rspauth, client completion; returns the client's response.
fn handshake(peer: &mut Peer, id: &str, qop: &str, cipher: &str, authzid: &str) -> String {
    let s = format!("{id}-s");
    let c = format!("{id}-c");
    let ch = peer
        .command(&format!(
            "jdk-server-new {s} - default auth-conf,auth-int,auth u p"
        ))
        .expect("jdk-server-new")["challenge"]
        .clone();
    let challenge = text(&ch);
    let nonce = challenge
        .strip_prefix("realm=\"default\",nonce=\"")
        .and_then(|r| r.split('"').next())
        .unwrap_or_else(|| panic!("challenge {challenge:?}"));
    assert_eq!(nonce.len(), 40, "{challenge}");
    assert!(
        challenge.ends_with(
            ",qop=\"auth-conf,auth-int,auth\",charset=utf-8,cipher=\"3des,rc4,des,rc4-56,rc4-40\",\
             algorithm=md5-sess"
        ),
        "{challenge}"
    );
    peer.command(&format!(
        "jdk-client-new {c} - default {qop} u p {authzid} {cipher}"
    ))
    .expect("jdk-client-new");
    let r = peer
        .command(&format!(
            "jdk-client-step {c} {}",
            ch.as_str().expect("b64")
        ))
        .expect("client response");
    assert_eq!(r["complete"], false, "{r}");
    let response = text(&r["token"]);
    let prefix = format!(
        "charset=utf-8,username=\"u\",realm=\"default\",nonce=\"{nonce}\",nc=00000001,cnonce=\""
    );
    assert!(response.starts_with(&prefix), "{response}");
    assert!(
        response.contains("\",digest-uri=\"/default\",maxbuf=65536,response="),
        "{response}"
    );
    let mut tail = format!(",qop={qop}");
    if qop == "auth-conf" {
        tail += &format!(",cipher=\"{cipher}\"");
    }
    if authzid != "-" {
        tail += &format!(",authzid=\"{authzid}\"");
    }
    assert!(response.ends_with(&tail), "{response} / {tail}");

    let done = peer
        .command(&format!(
            "jdk-server-step {s} {}",
            r["token"].as_str().expect("b64")
        ))
        .expect("server step");
    assert_eq!(done["complete"], true, "{done}");
    assert_eq!(done["qop"], qop);
    let rspauth = text(&done["token"]);
    let hex = rspauth.strip_prefix("rspauth=").expect("rspauth=");
    assert!(
        hex.len() == 32
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
        "{rspauth}"
    );
    let fin = peer
        .command(&format!(
            "jdk-client-step {c} {}",
            done["token"].as_str().expect("b64")
        ))
        .expect("client final step");
    assert_eq!(fin["complete"], true, "{fin}");
    assert_eq!(fin["token"], Value::Null, "{fin}");
    assert_eq!(fin["qop"], qop);
    if qop == "auth-conf" {
        assert_eq!(done["cipher"], cipher);
        assert_eq!(fin["cipher"], cipher);
    } else {
        assert!(done.get("cipher").is_none(), "{done}");
    }
    response
}

fn wrap(peer: &mut Peer, id: &str, plain: &[u8]) -> Vec<u8> {
    let r = peer
        .command(&format!("jdk-wrap {id} {}", b64(plain)))
        .expect("jdk-wrap");
    unb64(&r["token"])
}

fn unwrap(peer: &mut Peer, id: &str, token: &[u8]) -> Vec<u8> {
    let r = peer
        .command(&format!("jdk-unwrap {id} {}", b64(token)))
        .expect("jdk-unwrap");
    unb64(&r["plain"])
}

#[test]
fn jdk_digest_sessions_step_and_wrap_at_every_qop() {
    let mut peer = SASL.lock().expect("sasl peer");
    let msg = b"hello hotpath";
    // message ‖ 10-byte MAC (3DES: padded to 8 with the MAC) ‖ 00 01 ‖ u32 sequence number
    for (qop, cipher, wrapped_len) in [
        ("auth", "-", 0),
        ("auth-int", "-", 13 + 10 + 6),
        ("auth-conf", "3des", 24 + 6),
        ("auth-conf", "rc4", 13 + 10 + 6),
    ] {
        let id = format!("{qop}-{cipher}");
        let (s, c) = (format!("{id}-s"), format!("{id}-c"));
        handshake(&mut peer, &id, qop, cipher, "-");
        if qop == "auth" {
            let e = peer
                .command_expect_error(&format!("jdk-wrap {c} {}", b64(msg)))
                .expect("wrap refused");
            assert_eq!(e.class, "java.lang.IllegalStateException");
            assert_eq!(
                e.message.as_deref(),
                Some("Neither integrity nor privacy was negotiated")
            );
        } else {
            for (from, to) in [(&c, &s), (&s, &c)] {
                for seq in 0..2u8 {
                    let w = wrap(&mut peer, from, msg);
                    assert_eq!(w.len(), wrapped_len, "{id} {from}: {w:02x?}");
                    assert_eq!(&w[w.len() - 6..], &[0, 1, 0, 0, 0, seq], "{id} {from}");
                    if qop == "auth-int" {
                        assert_eq!(&w[..msg.len()], msg);
                    } else {
                        assert!(!w.windows(5).any(|x| x == b"hello"), "{id}: {w:02x?}");
                    }
                    assert_eq!(unwrap(&mut peer, to, &w), msg, "{id} {from} seq {seq}");
                    if seq == 1 {
                        // the same token again
                        let again = peer.command_raw(&format!("jdk-unwrap {to} {}", b64(&w)));
                        let again = again.expect("reply");
                        if qop == "auth-int" {
                            let e = JavaException::from_reply(&again).expect("replay refused");
                            assert_eq!(e.class, "javax.security.sasl.SaslException");
                            // the JDK says "from server" on both sides
                            assert_eq!(
                                e.message.as_deref(),
                                Some(
                                    "DIGEST-MD5: Out of order sequencing of messages from \
                                     server. Got: 1 Expected: 2"
                                ),
                                "{again}"
                            );
                        } else {
                            // decrypted with the moved-on cipher state: a bad MAC, dropped
                            assert_eq!(again["ok"], true, "{again}");
                            assert_eq!(again["plain"], "", "{again}");
                        }
                    }
                }
            }
            if qop == "auth-int" {
                // a bad MAC unwraps to nothing and does not use up the sequence number
                let w = wrap(&mut peer, &c, msg);
                let mut bad = w.clone();
                bad[msg.len()] ^= 1;
                assert_eq!(unwrap(&mut peer, &s, &bad), b"");
                assert_eq!(unwrap(&mut peer, &s, &w), msg);
            }
        }
        for x in [&s, &c] {
            let r = peer.command(&format!("jdk-dispose {x}")).expect("dispose");
            assert_eq!(r["existed"], true);
        }
    }

    // authzid: equal to the user is fine (and is in the response), another one is refused
    handshake(&mut peer, "authz", "auth", "-", "u");
    let ch = peer
        .command("jdk-server-new authz2-s - default auth u p")
        .expect("server")["challenge"]
        .clone();
    peer.command("jdk-client-new authz2-c - default auth u p other -")
        .expect("client");
    let r = peer
        .command(&format!(
            "jdk-client-step authz2-c {}",
            ch.as_str().expect("b64")
        ))
        .expect("response");
    let e = peer
        .command_expect_error(&format!(
            "jdk-server-step authz2-s {}",
            r["token"].as_str().expect("b64")
        ))
        .expect("refused");
    assert_eq!(e.class, "javax.security.sasl.SaslException");
    assert_eq!(
        e.message.as_deref(),
        Some("DIGEST-MD5: u is not authorized to act as other")
    );

    // a wrong password
    let ch = peer
        .command("jdk-server-new pw-s - default auth u p")
        .expect("server")["challenge"]
        .clone();
    peer.command("jdk-client-new pw-c - default auth u wrong")
        .expect("client");
    let r = peer
        .command(&format!(
            "jdk-client-step pw-c {}",
            ch.as_str().expect("b64")
        ))
        .expect("response");
    let e = peer
        .command_expect_error(&format!(
            "jdk-server-step pw-s {}",
            r["token"].as_str().expect("b64")
        ))
        .expect("refused");
    assert_eq!(e.class, "javax.security.sasl.SaslException");
    assert_eq!(
        e.message.as_deref(),
        Some("DIGEST-MD5: digest response format violation. Mismatched response.")
    );
    assert!(!e.remote);
    let e = peer
        .command_expect_error("jdk-server-step no-such-session -")
        .expect("unknown id");
    assert_eq!(
        e.message.as_deref(),
        Some("no JDK SASL session no-such-session")
    );
}

#[test]
fn benches_report_numbers() {
    let mut peer = SASL.lock().expect("sasl peer");
    let dir = tempfile::tempdir().expect("temp dir");
    let addr = peer.sasl_server("privacy").expect("addr").to_string();
    let file = dir.path().join("bench.tok");
    mint(&mut peer, &addr, &file, "");
    let r = peer
        .command(&format!(
            "bench-connect {addr} {} privacy 5",
            file.display()
        ))
        .expect("bench-connect");
    assert_eq!(r["n"], 5);
    assert_eq!(r["warmup"], 2);
    let f = |k: &str| r[k].as_f64().unwrap_or_else(|| panic!("{k} in {r}"));
    assert!(f("min_us") > 0.0, "{r}");
    assert!(
        f("min_us") <= f("p50_us") && f("p50_us") <= f("p99_us"),
        "{r}"
    );
    assert!(
        f("min_us") <= f("mean_us") && f("mean_us") <= f("max_us"),
        "{r}"
    );
    assert!(f("process_cpu_us_per_iter") > 0.0, "{r}");
    eprintln!("bench-connect privacy: {r}");

    for (cipher, expect, overhead) in [("rc4", "rc4", 16), ("-", "3des", 22)] {
        let r = peer
            .command(&format!("bench-wrap auth-conf {cipher} 1024 0.3"))
            .expect("bench-wrap");
        assert_eq!(r["qop"], "auth-conf");
        // without a cipher property the JDK client takes 3des
        assert_eq!(r["cipher"], expect, "{r}");
        assert_eq!(r["wrapped_bytes"], 1024 + overhead, "{r}");
        assert!(r["iterations"].as_u64().expect("iterations") > 0, "{r}");
        assert!(r["mb_per_s"].as_f64().expect("mb/s") > 0.0, "{r}");
        assert!(r["wrap_ns"].as_f64().expect("wrap_ns") > 0.0, "{r}");
        eprintln!("bench-wrap auth-conf {cipher}: {r}");
    }
    let e = peer
        .command_expect_error("bench-wrap auth - 100 0.1")
        .expect("auth has no security layer");
    assert_eq!(
        e.message.as_deref(),
        Some("Neither integrity nor privacy was negotiated")
    );
}
