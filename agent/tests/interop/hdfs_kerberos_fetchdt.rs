//! `hotpath hdfs fetchdt` against a Kerberized Hadoop 3.5 NameNode (`hdfs --kerberos true`):
//! fetch a delegation token with a `kinit` ticket into a Credentials file Java reads; use it
//! from `hotpath hdfs stat` with no Kerberos credentials (`HADOOP_TOKEN_FILE_LOCATION`); print,
//! renew and cancel it; a cancelled token is refused with Java's InvalidToken.

use std::path::Path;
use std::process::{Command, Output};

use peer_harness::{Mode, Peer};

fn hotpath(conf_dir: &Path, krb5_conf: &Path, ccache: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_hotpath"));
    c.arg("hdfs")
        .args(args)
        .arg("--conf-dir")
        .arg(conf_dir)
        .env("KRB5_CONFIG", krb5_conf)
        .env("KRB5CCNAME", format!("FILE:{}", ccache.display()))
        .env_remove("KRB5_CLIENT_KTNAME")
        .env_remove("HADOOP_TOKEN_FILE_LOCATION");
    c
}

fn ok(out: Output, what: &str, peer: &Peer) -> String {
    assert!(
        out.status.success(),
        "{what}: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        peer.log_tail(30)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn fetchdt_then_stat_with_the_token_alone_renew_print_cancel() {
    let mut peer = Peer::start(
        Mode::Hdfs,
        &[
            "--datanodes",
            "1",
            "--shared-ip",
            "true",
            "--kerberos",
            "true",
        ],
    )
    .expect("Kerberized hdfs peer");
    let k = peer.kerberos().expect("READY kerberos");
    peer.command("write /fetchdt/f 999").expect("write");
    let dir = tempfile::tempdir().unwrap();
    let ticket = dir.path().join("ccache");
    let empty = dir.path().join("empty-ccache");
    let kinit = Command::new("kinit")
        .env("KRB5_CONFIG", &k.krb5_conf)
        .env("KRB5CCNAME", format!("FILE:{}", ticket.display()))
        .arg("-kt")
        .arg(&k.client_keytab)
        .arg(&k.client_principal)
        .output()
        .expect("kinit");
    assert!(kinit.status.success(), "{kinit:?}");
    let conf = peer.conf_dir().to_path_buf();
    let file = dir.path().join("dt");
    let file_s = file.to_str().unwrap();
    let run = |cc: &Path, args: &[&str]| hotpath(&conf, &k.krb5_conf, cc, args);

    let out = ok(
        run(&ticket, &["fetchdt", "--renewer", "client", file_s])
            .output()
            .unwrap(),
        "fetchdt",
        &peer,
    );
    let nn = peer.namenode_addr().unwrap().to_string();
    assert!(out.starts_with("Fetched token (token for client: HDFS_DELEGATION_TOKEN owner=client@EXAMPLE.COM, renewer=client,"), "{out}");
    assert!(out.contains(&format!("for {nn} into {file_s}")), "{out}");
    use std::os::unix::fs::PermissionsExt as _;
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );

    // Java reads the file and authenticates with the token
    let j = peer
        .command(&format!("token-stat {file_s} /fetchdt/f"))
        .expect("Java reads the file");
    assert_eq!(j["length"], 999, "{j}");

    // no ticket: refused; with the token file: served
    let out = run(&empty, &["stat", "/fetchdt/f"]).output().unwrap();
    assert!(!out.status.success(), "no credentials at all");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "no HDFS_DELEGATION_TOKEN for the NameNode {} in no credentials (neither \
             HADOOP_TOKEN_FILE_LOCATION nor hadoop.token.files names a Credentials file), and \
             the Kerberos login failed",
            peer.namenode_addr().unwrap()
        )),
        "{err}"
    );
    let out = ok(
        run(&empty, &["stat", "--json", "/fetchdt/f"])
            .env("HADOOP_TOKEN_FILE_LOCATION", &file)
            .output()
            .unwrap(),
        "stat with the token",
        &peer,
    );
    assert!(out.contains("\"length\":999"), "{out}");

    let out = ok(
        run(&empty, &["fetchdt", "--print", file_s])
            .output()
            .unwrap(),
        "print",
        &peer,
    );
    assert!(
        out.starts_with("Token (token for client: HDFS_DELEGATION_TOKEN owner=client@EXAMPLE.COM")
            && out.contains(&format!("for {nn}")),
        "{out}"
    );
    let out = ok(
        run(&ticket, &["fetchdt", "--renew", file_s])
            .output()
            .unwrap(),
        "renew",
        &peer,
    );
    assert!(
        out.starts_with(&format!("Renewed token for {nn} until: ")),
        "{out}"
    );
    let out = ok(
        run(&ticket, &["fetchdt", "--cancel", file_s])
            .output()
            .unwrap(),
        "cancel",
        &peer,
    );
    assert!(
        out.starts_with("Cancelled token (token for client:"),
        "{out}"
    );

    let out = run(&empty, &["stat", "/fetchdt/f"])
        .env("HADOOP_TOKEN_FILE_LOCATION", &file)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    eprintln!("stat with a cancelled token: {err}");
    assert!(!out.status.success(), "a cancelled token");
    assert!(err.contains("InvalidToken"), "{err}");
}
