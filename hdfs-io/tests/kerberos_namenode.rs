//! `NameNodeClient::from_conf` on a Kerberized Hadoop 3.5 cluster (`hdfs --kerberos true`): the
//! site files the peer writes (`hadoop.security.authentication=kerberos`,
//! `dfs.namenode.kerberos.principal`) are enough, with a ticket cache filled by MIT
//! `kinit -kt` from the MiniKdc's client keytab. Permissions are off in this cluster so that the
//! client principal may create a directory: its owner shows whom the NameNode authenticated.
//!
//! MIT's environment variables are process-wide: each test sets them under the peer's lock.

use std::path::Path;
use std::process::Command;

use hdfs_io::namenode::NameNodeClient;
use peer_harness::{Kerberos, Mode, Peer, Shared};

static HDFS: Shared = Shared::new(
    Mode::Hdfs,
    &[
        "--datanodes",
        "1",
        "--shared-ip",
        "true",
        "--kerberos",
        "true",
        "--set",
        "dfs.permissions.enabled=false",
        "--log-level",
        "org.apache.hadoop.ipc.Server=DEBUG",
    ],
);

fn ccache_env(k: &Kerberos, dir: &Path) -> String {
    let cc = format!("FILE:{}", dir.join("ccache").display());
    std::env::set_var("KRB5_CONFIG", &k.krb5_conf);
    std::env::set_var("KRB5CCNAME", &cc);
    std::env::remove_var("KRB5_CLIENT_KTNAME");
    cc
}

fn log_count(peer: &Peer, needle: &str) -> usize {
    std::fs::read_to_string(peer.log_path())
        .expect("peer log")
        .matches(needle)
        .count()
}

#[test]
fn namenode_client_from_the_site_files_with_a_kinit_ticket_cache() {
    let mut peer = HDFS.lock().expect("Kerberized hdfs peer");
    let k = peer.kerberos().expect("READY kerberos");
    peer.command("write /kerberos/nn 4242").expect("write");
    let dir = tempfile::tempdir().unwrap();
    ccache_env(&k, dir.path());
    let out = Command::new("kinit")
        .arg("-kt")
        .arg(&k.client_keytab)
        .arg(&k.client_principal)
        .output()
        .expect("kinit (krb5-user, installed by scripts/setup.sh)");
    assert!(out.status.success(), "kinit: {out:?}");

    let mut conf = conf::Configuration::load_dir(peer.conf_dir()).expect("peer conf dir");
    for (protection, qop) in [("authentication", "auth"), ("privacy", "auth-conf")] {
        conf.set("hadoop.rpc.protection", protection);
        let negotiated = format!("Negotiated QoP is {qop}.");
        let before = log_count(&peer, &negotiated);
        let nn = NameNodeClient::from_conf(&conf).expect("namenode client");
        let st = nn
            .get_file_info("/kerberos/nn")
            .unwrap_or_else(|e| panic!("{protection}: {e}\n{}", peer.log_tail(40)))
            .expect("/kerberos/nn exists");
        assert_eq!(
            (st.length, st.owner.as_str()),
            (4242, "hdfs"),
            "{protection}"
        );
        let made = format!("/kerberos/by-client-{protection}");
        assert!(nn.mkdirs(&made, 0o755).expect("mkdirs"), "{protection}");
        let st = nn.get_file_info(&made).unwrap().expect("made");
        // client@EXAMPLE.COM, mapped to its short name by the NameNode
        assert_eq!(st.owner, "client", "{protection}");
        assert_eq!(log_count(&peer, &negotiated), before + 1, "{protection}");
    }
}

#[test]
fn without_a_ticket_the_error_names_the_cache() {
    let peer = HDFS.lock().expect("Kerberized hdfs peer");
    let k = peer.kerberos().expect("READY kerberos");
    let dir = tempfile::tempdir().unwrap();
    let cc = ccache_env(&k, dir.path());
    let conf = conf::Configuration::load_dir(peer.conf_dir()).expect("peer conf dir");
    let nn = NameNodeClient::from_conf(&conf).expect("namenode client");
    let t0 = std::time::Instant::now();
    let e = nn.get_file_info("/").unwrap_err().to_string();
    eprintln!("no ticket: {e} ({:?})", t0.elapsed());
    assert!(
        e.contains("Kerberos login as the ticket cache's principal failed"),
        "{e}"
    );
    assert!(e.contains(&cc), "{e}");
    assert!(
        t0.elapsed() < std::time::Duration::from_secs(20),
        "{:?}",
        t0.elapsed()
    );
}
