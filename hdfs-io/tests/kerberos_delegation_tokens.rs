//! HDFS delegation tokens against a Kerberized Hadoop 3.5 NameNode (`hdfs --kerberos true`,
//! MiniKdc): a token got over KERBEROS, written to a Credentials file, then used by a client
//! with no Kerberos credentials at all (its ticket cache is empty) through SASL TOKEN
//! (DIGEST-MD5); renewed (a later expiry each time), refused for renewal over a token
//! connection, cancelled (then refused with Java's `InvalidToken`); Credentials files crossing
//! between Java (`hdfs fetchdt`'s code, `Credentials.readTokenStorageFile`) and us both ways.
//!
//! MIT's and Hadoop's environment variables are process-wide: each test sets them under the
//! peer's lock.

#[macro_use]
#[path = "support/kerberos.rs"]
mod kerberos;

use std::sync::Arc;
use std::time::{Duration, Instant};

use hadoop_wire::token::{
    Credentials, DelegationIdentifier as _, DelegationTokenIdentifier, TokenIdentifier,
    KIND_HDFS_DELEGATION,
};
use hdfs_io::namenode::{NameNodeClient, NameNodeConfig};
use hdfs_io::tokens::{read_credentials_file, write_credentials_file, TOKEN_FILE_ENV};
use hdfs_io::RemoteKind;
use kerberos::{kinit_client, log_count};
use peer_harness::{Kerberos, Mode, Shared};

static HDFS: Shared = Shared::new(
    Mode::Hdfs,
    kerberos_args!("--log-level", "org.apache.hadoop.ipc.Server=DEBUG"),
);

/// A client holding only `creds` (no token file from the environment).
fn token_client(conf: &conf::Configuration, creds: Credentials) -> NameNodeClient {
    NameNodeClient::from_conf_with(
        conf,
        NameNodeConfig {
            credentials: Some(Arc::new(creds)),
            ..NameNodeConfig::default()
        },
    )
    .expect("namenode client")
}

#[test]
fn get_a_token_with_kerberos_use_it_without_renew_and_cancel() {
    let mut peer = HDFS.lock().expect("Kerberized hdfs peer");
    let nn_addr = peer.namenode_addr().unwrap();
    peer.command("write /dtok/f 4321").expect("write");

    // 1. over KERBEROS
    let (k, dir, conf) = kinit_client(&peer);
    let krb = NameNodeClient::from_conf(&conf).expect("namenode client");
    let t0 = krb
        .get_delegation_token("client")
        .unwrap_or_else(|e| panic!("getDelegationToken: {e}\n{}", peer.log_tail(40)))
        .expect("a secure NameNode issues tokens");
    assert_eq!(t0.kind, KIND_HDFS_DELEGATION);
    assert_eq!(
        t0.service,
        nn_addr.to_string(),
        "ip:port, as buildTokenService"
    );
    let id = DelegationTokenIdentifier::parse(&t0.identifier).expect("identifier");
    assert_eq!(
        (id.owner(), id.renewer(), id.real_user()),
        ("client@EXAMPLE.COM", "client", "")
    );
    let file = dir.path().join("tokens");
    let mut creds = Credentials::new();
    creds.add_token(t0.service.clone(), t0.clone());
    write_credentials_file(&file, &creds).unwrap();

    // 2. without Kerberos: the token alone
    Kerberos::clear_process_credentials(dir.path());
    let none = token_client(&conf, Credentials::new());
    let e = none.get_file_info("/dtok/f").unwrap_err().to_string();
    assert!(e.contains("Kerberos login"), "no token, no ticket: {e}");
    let read = read_credentials_file(&file).expect("our file");
    assert_eq!(read.tokens.len(), 1);
    let before = log_count(&peer, "client@EXAMPLE.COM (auth:TOKEN)");
    let tok = token_client(&conf, read);
    let st = tok
        .get_file_info("/dtok/f")
        .unwrap_or_else(|e| panic!("getFileInfo with the token: {e}\n{}", peer.log_tail(40)))
        .expect("/dtok/f");
    assert_eq!(st.length, 4321);
    assert!(tok.mkdirs("/dtok/by-token", 0o755).expect("mkdirs"));
    let made = tok.get_file_info("/dtok/by-token").unwrap().expect("made");
    assert_eq!(
        made.owner, "client",
        "the token's owner, as the NameNode sees it"
    );
    assert!(
        log_count(&peer, "client@EXAMPLE.COM (auth:TOKEN)") > before,
        "the NameNode authenticated the token"
    );
    // the same through HADOOP_TOKEN_FILE_LOCATION
    std::env::set_var(TOKEN_FILE_ENV, &file);
    let from_env = NameNodeClient::from_conf(&conf).expect("namenode client");
    std::env::remove_var(TOKEN_FILE_ENV);
    assert_eq!(
        from_env.get_file_info("/dtok/f").unwrap().map(|s| s.length),
        Some(4321)
    );
    // Java reads our file and authenticates with its token (no Kerberos on its side either)
    let j = peer
        .command(&format!("token-stat {} /dtok/f", file.display()))
        .expect("Java reads our Credentials file");
    assert_eq!(j["length"], 4321, "{j}");
    assert_eq!(j["tokens"][0]["owner"], "client@EXAMPLE.COM", "{j}");
    assert_eq!(j["tokens"][0]["service"], t0.service.as_str(), "{j}");
    assert_eq!(
        j["tokens"][0]["url"],
        t0.encode_to_url_string().as_str(),
        "{j}"
    );

    // 3. renew: only over KERBEROS, a later expiry each time
    let e = tok.renew_delegation_token(&t0).unwrap_err().to_string();
    assert!(
        e.contains("Delegation Token can be renewed only with kerberos or web authentication"),
        "{e}"
    );
    k.kinit_process(dir.path()).expect("kinit");
    let e1 = krb.renew_delegation_token(&t0).expect("renew");
    std::thread::sleep(Duration::from_millis(20));
    let e2 = krb.renew_delegation_token(&t0).expect("renew again");
    assert!(e1 > id.issue_date() && e1 <= id.max_date(), "{e1} {id:?}");
    assert!(e2 > e1, "{e2} after {e1}");

    // 4. cancel: the token is refused from then on
    krb.cancel_delegation_token(&t0).expect("cancel");
    Kerberos::clear_process_credentials(dir.path());
    let fresh = token_client(&conf, read_credentials_file(&file).unwrap());
    let refused = log_count(&peer, "Auth failed for");
    let t = Instant::now();
    let e = fresh.get_file_info("/dtok/f").unwrap_err();
    let took = t.elapsed();
    eprintln!("cancelled token: {e} ({took:?})");
    assert_eq!(e.remote_kind(), Some(RemoteKind::InvalidToken), "{e}");
    let text = e.to_string();
    assert!(text.contains("can't be found in cache"), "{e}");
    assert!(
        text.contains(&format!(
            "({nn_addr}) refused the delegation token (token for client: HDFS_DELEGATION_TOKEN \
             owner=client@EXAMPLE.COM, renewer=client,"
        )) && text.contains(&format!("sequenceNumber={}", id.sequence_number())),
        "{e}"
    );
    assert!(took < Duration::from_secs(10), "{took:?}");
    // one connection attempt, refused once: no retries of a token the NameNode does not know
    assert_eq!(log_count(&peer, "Auth failed for"), refused + 1);
    k.kinit_process(dir.path()).expect("kinit");
    let e = krb.renew_delegation_token(&t0).unwrap_err();
    assert_eq!(e.remote_kind(), Some(RemoteKind::InvalidToken), "{e}");
}

#[test]
fn a_token_file_written_by_java_fetchdt() {
    let mut peer = HDFS.lock().expect("Kerberized hdfs peer");
    let k = peer.kerberos().expect("READY kerberos");
    let nn_addr = peer.namenode_addr().unwrap();
    peer.command("write /dtok/java 77").expect("write");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("java-tokens");
    let j = peer
        .command(&format!("fetchdt {} client", file.display()))
        .expect("fetchdt");
    let conf = conf::Configuration::load_dir(peer.conf_dir()).expect("peer conf dir");

    let creds = read_credentials_file(&file).expect("Java's Credentials file");
    let t = creds
        .find(KIND_HDFS_DELEGATION, &nn_addr.to_string())
        .expect("an HDFS_DELEGATION_TOKEN for the NameNode's ip:port")
        .clone();
    let id = DelegationTokenIdentifier::parse(&t.identifier).expect("identifier");
    assert_eq!(id.owner(), j["tokens"][0]["owner"], "{j}");
    assert_eq!(id.owner(), "hdfs/localhost@EXAMPLE.COM");
    assert_eq!(id.renewer(), "client");
    assert_eq!(
        i64::from(id.sequence_number()),
        j["tokens"][0]["sequence_number"].as_i64().unwrap()
    );

    k.kinit_process(dir.path()).expect("kinit");
    std::env::set_var(TOKEN_FILE_ENV, &file);
    Kerberos::clear_process_credentials(dir.path());
    let tok = NameNodeClient::from_conf(&conf).expect("namenode client");
    std::env::remove_var(TOKEN_FILE_ENV);
    let st = tok
        .get_file_info("/dtok/java")
        .unwrap_or_else(|e| panic!("{e}\n{}", peer.log_tail(40)))
        .expect("/dtok/java");
    assert_eq!(st.length, 77);

    // its renewer (us, over KERBEROS) renews it; its owner cancels it over the token itself
    k.kinit_process(dir.path()).expect("kinit");
    let krb = NameNodeClient::from_conf(&conf).expect("namenode client");
    assert!(krb.renew_delegation_token(&t).expect("renew") > id.issue_date());
    Kerberos::clear_process_credentials(dir.path());
    tok.cancel_delegation_token(&t)
        .expect("the owner cancels over its token's connection");
    let e = token_client(&conf, creds)
        .get_file_info("/dtok/java")
        .unwrap_err();
    assert_eq!(e.remote_kind(), Some(RemoteKind::InvalidToken), "{e}");
}
