//! `hdfs --kerberos true`: the MiniKdc is a KDC that MIT Kerberos (the library our Rust client
//! links) talks to, the keytabs hold the principals READY names, and the Kerberized cluster works
//! for Hadoop's own client (SASL GSSAPI to the NameNode, SASL data transfer to the DataNode).

use std::path::Path;
use std::process::Command;

use peer_harness::{Mode, Peer};

fn klist_keytab(keytab: &Path) -> String {
    let out = Command::new("klist")
        .arg("-k")
        .arg(keytab)
        .output()
        .expect("klist (krb5-user, installed by scripts/setup.sh)");
    assert!(out.status.success(), "klist -k {keytab:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn kerberized_minidfs_with_a_kdc_that_mit_kinit_accepts() {
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
    eprintln!("kerberized hdfs READY after {:?}", peer.startup_time());
    let k = peer.kerberos().expect("READY kerberos");
    assert_eq!(k.realm, "EXAMPLE.COM");
    assert_eq!(k.namenode_principal, "hdfs/localhost@EXAMPLE.COM");
    assert_eq!(k.client_principal, "client@EXAMPLE.COM");
    assert_eq!(k.rpc_protection, "authentication,integrity,privacy");
    assert!(k.krb5_conf.is_file(), "{k:?}");
    let service = klist_keytab(&k.service_keytab);
    assert!(service.contains("hdfs/localhost@EXAMPLE.COM"), "{service}");
    assert!(service.contains("HTTP/localhost@EXAMPLE.COM"), "{service}");
    let client = klist_keytab(&k.client_keytab);
    assert!(client.contains("client@EXAMPLE.COM"), "{client}");
    assert!(!client.contains("hdfs/localhost"), "{client}");

    // MIT kinit gets a TGT from the MiniKdc with the client keytab, then a service ticket for the
    // NameNode's principal.
    let dir = tempfile::tempdir().expect("tempdir");
    let ccache = format!("FILE:{}", dir.path().join("cc").display());
    let run = |cmd: &mut Command| {
        let out = cmd
            .env("KRB5_CONFIG", &k.krb5_conf)
            .env("KRB5CCNAME", &ccache)
            .output()
            .expect("krb5-user tool");
        assert!(out.status.success(), "{cmd:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    run(Command::new("kinit")
        .arg("-kt")
        .arg(&k.client_keytab)
        .arg(&k.client_principal));
    let kvno = run(Command::new("kvno").arg(&k.namenode_principal));
    assert!(kvno.contains("hdfs/localhost@EXAMPLE.COM: kvno"), "{kvno}");

    // the site files tell a client that the cluster is Kerberized
    let core = std::fs::read_to_string(peer.conf_dir().join("core-site.xml")).expect("core-site");
    assert!(core.contains("<value>kerberos</value>"), "{core}");
    let hdfs = std::fs::read_to_string(peer.conf_dir().join("hdfs-site.xml")).expect("hdfs-site");
    assert!(hdfs.contains("hdfs/localhost@EXAMPLE.COM"), "{hdfs}");

    // Hadoop's own client, logged in from the service keytab, writes through the SASL-protected
    // DataNode (block tokens on)
    let w = peer
        .command("write /kerberos/f 100000")
        .unwrap_or_else(|e| {
            panic!(
                "write on the Kerberized cluster: {e}\n{}",
                peer.log_tail(60)
            )
        });
    assert_eq!(w["blocks"], 1, "{w}");
}
