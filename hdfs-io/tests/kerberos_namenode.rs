//! `NameNodeClient::from_conf` on a Kerberized Hadoop 3.5 cluster (`hdfs --kerberos true`): the
//! site files the peer writes (`hadoop.security.authentication=kerberos`,
//! `dfs.namenode.kerberos.principal`) are enough, with a ticket cache filled by MIT
//! `kinit -kt` from the MiniKdc's client keytab. Permissions are off in this cluster so that the
//! client principal may create a directory: its owner shows whom the NameNode authenticated.
//!
//! A client may also log in from a keytab of its own (`NameNodeKerberos::keytab`), its tickets
//! in memory: several such clients in one process hold different identities, whatever the
//! process-wide MIT environment says.
//!
//! MIT's environment variables are process-wide: each test sets them under the peer's lock.

#[macro_use]
#[path = "support/kerberos.rs"]
mod kerberos;

use hdfs_io::namenode::NameNodeClient;
use kerberos::{keytab_client, kinit_client, log_count};
use peer_harness::{Mode, Shared};

static HDFS: Shared = Shared::new(
    Mode::Hdfs,
    kerberos_args!("--log-level", "org.apache.hadoop.ipc.Server=DEBUG"),
);

#[test]
fn namenode_client_from_the_site_files_with_a_kinit_ticket_cache() {
    let mut peer = HDFS.lock().expect("Kerberized hdfs peer");
    peer.command("write /kerberos/nn 4242").expect("write");
    let (_k, _dir, mut conf) = kinit_client(&peer);
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
        // one negotiation for the shared connection (mkdirs), one per direct connection
        // (getFileInfo: one here)
        let direct = nn.call_stats().direct_connections as usize;
        assert_eq!(direct, 1, "{protection}");
        assert_eq!(
            log_count(&peer, &negotiated),
            before + 1 + direct,
            "{protection}"
        );
    }
}

#[test]
fn without_a_ticket_the_error_names_the_cache() {
    let peer = HDFS.lock().expect("Kerberized hdfs peer");
    let k = peer.kerberos().expect("READY kerberos");
    let dir = tempfile::tempdir().unwrap();
    // the realm, and a ticket cache that was never filled
    let cc = format!("FILE:{}", dir.path().join("ccache").display());
    std::env::set_var("KRB5_CONFIG", &k.krb5_conf);
    std::env::set_var("KRB5CCNAME", &cc);
    std::env::remove_var("KRB5_CLIENT_KTNAME");
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

#[test]
fn clients_with_keytabs_of_their_own_while_the_environment_points_elsewhere() {
    let peer = HDFS.lock().expect("Kerberized hdfs peer");
    // The process-wide login: a kinit cache and a client keytab, both for client@REALM.
    let (k, dir, conf) = kinit_client(&peer);
    std::env::set_var("KRB5_CLIENT_KTNAME", &k.client_keytab);

    // hdfs/localhost@REALM from the service keytab, and the environment's client, at once
    let nn = keytab_client(&conf, Some(&k.namenode_principal), &k.service_keytab)
        .unwrap_or_else(|e| panic!("keytab login: {e}\n{}", peer.log_tail(40)));
    let env = NameNodeClient::from_conf(&conf).expect("namenode client");
    let owner = |c: &NameNodeClient, p: &str| {
        assert!(
            c.mkdirs(p, 0o755)
                .unwrap_or_else(|e| panic!("{p}: {e}\n{}", peer.log_tail(40))),
            "{p}"
        );
        c.get_file_info(p).unwrap().expect("made").owner
    };
    assert_eq!(owner(&nn, "/kerberos/keytab-hdfs-1"), "hdfs");
    assert_eq!(owner(&env, "/kerberos/keytab-env"), "client");
    assert_eq!(owner(&nn, "/kerberos/keytab-hdfs-2"), "hdfs");
    // a second client of the same identity, built later, works beside the first
    let nn2 = keytab_client(&conf, Some(&k.namenode_principal), &k.service_keytab).unwrap();
    assert_eq!(owner(&nn2, "/kerberos/keytab-hdfs-3"), "hdfs");

    // client@REALM from its keytab with the environment pointing at an empty cache and no
    // client keytab: the environment is not consulted
    std::env::set_var(
        "KRB5CCNAME",
        format!("FILE:{}", dir.path().join("empty-ccache").display()),
    );
    std::env::remove_var("KRB5_CLIENT_KTNAME");
    let client = keytab_client(&conf, Some(&k.client_principal), &k.client_keytab).unwrap();
    assert_eq!(owner(&client, "/kerberos/keytab-client"), "client");
    assert!(
        !dir.path().join("empty-ccache").exists(),
        "the env's cache untouched"
    );

    // a keytab without the principal: the client is not built, the error names both
    let t0 = std::time::Instant::now();
    let Err(e) = keytab_client(&conf, Some(&k.client_principal), &k.service_keytab) else {
        panic!("the service keytab holds no key for the client");
    };
    let e = e.to_string();
    eprintln!("keytab without the principal: {e}");
    assert!(
        e.starts_with(&format!(
            "Kerberos login as {} from keytab {} failed: the keytab holds no key for {}",
            k.client_principal,
            k.service_keytab.display(),
            k.client_principal
        )),
        "{e}"
    );
    assert!(t0.elapsed() < std::time::Duration::from_secs(5));
    // a keytab and no principal
    let Err(e) = keytab_client(&conf, None, &k.client_keytab) else {
        panic!("a keytab without a principal");
    };
    let e = e.to_string();
    assert!(
        e.contains(&k.client_keytab.display().to_string()) && e.contains("no client principal"),
        "{e}"
    );
}
