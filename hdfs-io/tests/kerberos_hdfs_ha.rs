//! The HA MiniDFSCluster Kerberized (`hdfs-ha --kerberos true`: active, standby and observer
//! NameNodes and the DataNode all `hdfs/localhost@REALM`, SASL data-transfer protection on the
//! DataNode's unprivileged port), through the nameservice of the written site files
//! (`hdfs://hotpath-ns`, ObserverReadProxyProvider):
//!
//! - `getFileInfo` over SASL KERBEROS at the peer's `hadoop.rpc.protection` (the client picks
//!   `authentication`) and at `privacy` (`auth-conf`): the reads go to the observer, writes and
//!   `msync` to the active, the stateId shared (as `interop_hdfs_ha.rs` for SIMPLE);
//! - block reads (locations from the observer) byte-exact with `privacy` and AES/CTR/NoPadding,
//!   with `privacy` without AES (the DIGEST-MD5 stream layer, 3DES) and with `integrity`;
//! - an HDFS delegation token for the nameservice (service `ha-hdfs:hotpath-ns`), got over
//!   KERBEROS, then used with no Kerberos credentials at all for observer reads, a write and a
//!   block read; and a failover of the active (`failover TO`: the active to standby, TO to
//!   active), after which both the Kerberos and the token client write on the new active and
//!   read on the observer.
//!
//! MIT's environment variables are process-wide: each test sets them under the peer's lock.
//! The tests find the NameNodes by role (a failover moves the active).

#[macro_use]
#[path = "support/kerberos.rs"]
mod kerberos;

use std::sync::Arc;
use std::time::{Duration, Instant};

use hadoop_wire::token::{
    Credentials, DelegationIdentifier as _, DelegationTokenIdentifier, TokenIdentifier as _,
};
use hdfs_io::namenode::{NameNodeClient, NameNodeConfig, Role, OBSERVER_PROBE_PERIOD_KEY};
use kerberos::{dfs_client, index_of, kinit_client, log_count, rpc_requests, sha256_hex};
use peer_harness::{Kerberos, Mode, Peer, Shared};

static HA: Shared = Shared::new(
    Mode::HdfsHa,
    kerberos_read_args!("--log-level", "org.apache.hadoop.ipc.Server=DEBUG"),
);

const NS: &str = "hotpath-ns";

fn knows_an_observer(nn: &NameNodeClient) -> bool {
    nn.nodes().iter().any(|(_, r)| *r == Role::Observer)
}

fn assert_roles(nn: &NameNodeClient, peer: &mut Peer) {
    nn.discover_roles();
    let roles: Vec<Role> = nn.nodes().into_iter().map(|(_, r)| r).collect();
    assert_eq!(roles[index_of(peer, "active")], Role::Active, "{roles:?}");
    assert_eq!(
        roles[index_of(peer, "observer")],
        Role::Observer,
        "{roles:?}"
    );
}

/// `n` reads of existing paths: (observer, active) counter increments. The observer tails the
/// active's edits every 100 ms; the counters also count the DataNode's heartbeats.
fn observer_reads(peer: &mut Peer, nn: &NameNodeClient, paths: &[String]) -> (u64, u64) {
    let (obs0, act0) = (rpc_requests(peer, "observer"), rpc_requests(peer, "active"));
    for p in paths {
        assert!(
            nn.get_file_info(p)
                .unwrap_or_else(|e| panic!("getFileInfo {p}: {e}\n{}", peer.log_tail(40)))
                .is_some(),
            "{p}"
        );
    }
    // the NameNode's counter can lag the last response by a moment
    let t0 = Instant::now();
    loop {
        let (o, a) = (rpc_requests(peer, "observer"), rpc_requests(peer, "active"));
        if o - obs0 >= paths.len() as u64 || t0.elapsed() > Duration::from_secs(5) {
            return (o - obs0, a - act0);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn get_file_info_and_observer_reads_over_kerberos() {
    let mut peer = HA.lock().expect("Kerberized hdfs-ha peer");
    assert_eq!(peer.field_str("nameservice").unwrap(), NS);
    peer.command("mkfiles /kha 10").expect("mkfiles");
    peer.command("write /kha/len 4242").expect("write");
    let (k, _dir, mut conf) = kinit_client(&peer);
    assert_eq!(conf.get("fs.defaultFS"), Some("hdfs://hotpath-ns"));
    let paths: Vec<String> = (0..10).map(|i| format!("/kha/f{i}")).collect();
    // the peer's list (the client takes its first entry), then privacy alone
    for (protection, qop) in [
        (k.rpc_protection.as_str(), "auth"),
        ("privacy", "auth-conf"),
    ] {
        conf.set("hadoop.rpc.protection", protection);
        let negotiated = format!("Negotiated QoP is {qop}.");
        let before = log_count(&peer, &negotiated);
        let nn = NameNodeClient::from_conf(&conf).expect("namenode client");
        assert_roles(&nn, &mut peer);
        let st = nn
            .get_file_info("/kha/len")
            .unwrap_or_else(|e| panic!("{protection}: {e}\n{}", peer.log_tail(40)))
            .expect("/kha/len exists");
        assert_eq!(
            (st.length, st.owner.as_str()),
            (4242, "hdfs"),
            "{protection}"
        );
        // until the observer has caught up with this client's stateId, reads may wait there
        let (obs, act) = observer_reads(&mut peer, &nn, &paths);
        eprintln!("{protection}: 10 reads: observer +{obs} active +{act}");
        assert!(
            obs >= 10,
            "{protection}: the observer served {obs} of 10 reads"
        );
        let before_msync = nn.state_id().expect("stateId");
        nn.msync().expect("msync");
        assert!(nn.state_id().expect("stateId") >= before_msync);

        // a write on the active, then at once a read on the observer, no msync between: the
        // read carries the write's stateId and sees the write
        let (obs0, act0) = (
            rpc_requests(&mut peer, "observer"),
            rpc_requests(&mut peer, "active"),
        );
        for i in 0..3 {
            let before = nn.state_id().expect("stateId");
            let d = format!("/kha/by-client-{protection}/d{i}");
            assert!(nn.mkdirs(&d, 0o755).expect("mkdirs on the active"));
            let write = nn.state_id().expect("stateId");
            assert!(
                write > before,
                "{protection}: write stateId {write} after {before}"
            );
            let st = nn
                .get_file_info(&d)
                .expect("getFileInfo")
                .expect("the observer sees the write");
            // client@EXAMPLE.COM, mapped to its short name by the NameNode
            assert_eq!(st.owner, "client", "{protection}");
        }
        let t0 = Instant::now();
        let (obs1, act1) = loop {
            let (o, a) = (
                rpc_requests(&mut peer, "observer"),
                rpc_requests(&mut peer, "active"),
            );
            if (o - obs0 >= 3 && a - act0 >= 3) || t0.elapsed() > Duration::from_secs(5) {
                break (o, a);
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(
            obs1 - obs0 >= 3,
            "{protection}: the reads went to the observer"
        );
        assert!(
            act1 - act0 >= 3,
            "{protection}: the writes went to the active"
        );
        // one new connection per NameNode, each at this QoP (the DataNode's own connections,
        // at the cluster's first entry, `auth`, stay open)
        let n = log_count(&peer, &negotiated) - before;
        if qop == "auth-conf" {
            assert_eq!(n, 3, "{protection}: {n} connections at {qop}");
        } else {
            assert!(n >= 3, "{protection}: {n} connections at {qop}");
        }
    }
}

#[test]
fn block_reads_with_and_without_aes_located_by_the_observer() {
    let mut peer = HA.lock().expect("Kerberized hdfs-ha peer");
    // three blocks of 1 MiB and a tail
    let w = peer.command("write /kha/blocks 3500000").expect("write");
    let want = w["sha256"].as_str().unwrap().to_string();
    let (_k, _dir, mut conf) = kinit_client(&peer);
    conf.set("hadoop.rpc.protection", "privacy");
    // (data transfer protection, offer AES, reads through the DIGEST stream layer)
    for (protection, aes, layer) in [
        ("privacy", true, false),
        ("privacy", false, true),
        ("integrity", true, true),
    ] {
        conf.set("dfs.data.transfer.protection", protection);
        let nn = NameNodeClient::from_conf(&conf).expect("namenode client");
        let c = dfs_client(nn, &conf, aes);
        // the client's first read msyncs the active; the locations then come from the
        // observer (once it has caught up)
        assert!(c.stat("/kha/blocks").is_ok());
        let obs0 = rpc_requests(&mut peer, "observer");
        let mut out = Vec::new();
        let t = Instant::now();
        let r = c.read("/kha/blocks", 0, None, &mut out);
        assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
        let st = r.unwrap_or_else(|e| panic!("{protection}: {e}\n{}", peer.log_tail(40)));
        assert_eq!(sha256_hex(&out), want, "{protection} aes {aes}");
        assert_eq!(st.blocks, 4, "{st:?}");
        assert_eq!(st.replica_failures, 0, "{protection}: {st:?}");
        if layer {
            assert_eq!(st.sasl_layer_reads, st.blocks, "{protection}: {st:?}");
        } else {
            assert_eq!(st.sasl_layer_reads, 0, "{protection}: {st:?}");
        }
        let t0 = Instant::now();
        while rpc_requests(&mut peer, "observer") < obs0 + st.location_fetches
            && t0.elapsed() < Duration::from_secs(5)
        {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(
            rpc_requests(&mut peer, "observer") >= obs0 + st.location_fetches,
            "{protection}: getBlockLocations x{} on the observer",
            st.location_fetches
        );
        // a range on the cached connection
        let mut part = Vec::new();
        let st = c
            .read("/kha/blocks", 1_000_001, Some(70_000), &mut part)
            .unwrap_or_else(|e| panic!("{protection}: {e}"));
        assert_eq!(part, out[1_000_001..1_070_001], "{protection} aes {aes}");
        assert!(st.reused_connections >= 1, "{protection}: {st:?}");
    }
}

#[test]
fn a_nameservice_token_without_kerberos_and_a_failover() {
    let mut peer = HA.lock().expect("Kerberized hdfs-ha peer");
    let w = peer.command("write /kha/tok 1234567").expect("write");
    let want = w["sha256"].as_str().unwrap().to_string();
    // over KERBEROS, on the active: a token for the nameservice
    let (k, dir, mut conf) = kinit_client(&peer);
    // the observer may refuse the token until it has tailed its edit: then the client asks the
    // roles again after this period
    conf.set(OBSERVER_PROBE_PERIOD_KEY, "200");
    let krb = NameNodeClient::from_conf(&conf).expect("namenode client");
    let t = krb
        .get_delegation_token("client")
        .unwrap_or_else(|e| panic!("getDelegationToken: {e}\n{}", peer.log_tail(40)))
        .expect("a secure NameNode issues tokens");
    assert_eq!(t.service, format!("ha-hdfs:{NS}"));
    let id = DelegationTokenIdentifier::parse(&t.identifier).expect("identifier");
    assert_eq!(id.owner(), "client@EXAMPLE.COM");
    let mut creds = Credentials::new();
    creds.add_token(t.service.clone(), t.clone());
    let creds = Arc::new(creds);

    // without Kerberos: the token alone, picked by the nameservice for every NameNode
    Kerberos::clear_process_credentials(dir.path());
    let token_client = || {
        NameNodeClient::from_conf_with(
            &conf,
            NameNodeConfig {
                credentials: Some(creds.clone()),
                ..NameNodeConfig::default()
            },
        )
        .expect("namenode client")
    };
    let none = NameNodeClient::from_conf_with(
        &conf,
        NameNodeConfig {
            credentials: Some(Arc::new(Credentials::new())),
            ..NameNodeConfig::default()
        },
    )
    .expect("namenode client");
    let e = none.get_file_info("/kha/tok").unwrap_err().to_string();
    assert!(e.contains("Kerberos login"), "no token, no ticket: {e}");
    let tok = token_client();
    let before = log_count(&peer, "client@EXAMPLE.COM (auth:TOKEN)");
    // the token reaches the observer with the edits it tails (every 100 ms)
    let t0 = Instant::now();
    let st = loop {
        match tok.get_file_info("/kha/tok") {
            Ok(st) => break st,
            Err(e) if t0.elapsed() < Duration::from_secs(5) => {
                eprintln!("token read: {e}");
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => panic!("getFileInfo with the token: {e}\n{}", peer.log_tail(40)),
        }
    };
    assert_eq!(st.map(|s| s.length), Some(1_234_567));
    let paths: Vec<String> = (0..5).map(|i| format!("/kha/tok-f{i}")).collect();
    for p in &paths {
        assert!(tok.mkdirs(p, 0o755).expect("mkdirs with the token"));
    }
    let t0 = Instant::now();
    while !knows_an_observer(&tok) && t0.elapsed() < Duration::from_secs(5) {
        tok.get_file_info("/kha/tok").expect("read with the token");
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!(
        "token client: roles {:?} after {:?}",
        tok.nodes(),
        t0.elapsed()
    );
    let (obs, act) = observer_reads(&mut peer, &tok, &paths);
    eprintln!("token: 5 reads: observer +{obs} active +{act}");
    assert!(obs >= 5, "the observer served {obs} of 5 token reads");
    assert!(
        log_count(&peer, "client@EXAMPLE.COM (auth:TOKEN)") > before,
        "the NameNodes authenticated the token"
    );
    assert_eq!(
        tok.get_file_info("/kha/tok-f0").unwrap().unwrap().owner,
        "client",
        "the token's owner, as the NameNode sees it"
    );
    let c = dfs_client(token_client(), &conf, true);
    let mut out = Vec::new();
    c.read("/kha/tok", 0, None, &mut out)
        .unwrap_or_else(|e| panic!("read with the token: {e}\n{}", peer.log_tail(40)));
    assert_eq!(sha256_hex(&out), want);

    // a failover: the active to standby, the standby to active
    k.kinit_process(dir.path()).expect("kinit");
    let (old, new) = (
        index_of(&mut peer, "active"),
        index_of(&mut peer, "standby"),
    );
    let f = peer
        .command(&format!("failover {new}"))
        .unwrap_or_else(|e| panic!("failover: {e}\n{}", peer.log_tail(40)));
    assert_eq!(
        (f["from"].as_u64(), f["to"].as_u64()),
        (Some(old as u64), Some(new as u64))
    );
    assert_eq!(index_of(&mut peer, "active"), new);
    // the Kerberos client: its write fails over to the new active, its stateId carries on
    let s0 = krb.state_id().expect("stateId");
    let t0 = Instant::now();
    assert!(krb
        .mkdirs("/kha/after-failover/krb", 0o755)
        .unwrap_or_else(|e| panic!("mkdirs after the failover: {e}\n{}", peer.log_tail(40))));
    eprintln!(
        "Kerberos client: write after failover in {:?}",
        t0.elapsed()
    );
    assert!(krb.state_id().unwrap() > s0);
    assert_eq!(krb.nodes()[new].1, Role::Active, "{:?}", krb.nodes());
    assert_eq!(krb.nodes()[old].1, Role::Standby, "{:?}", krb.nodes());
    assert!(krb
        .get_file_info("/kha/after-failover/krb")
        .unwrap()
        .is_some());
    // the token client (no Kerberos): the new active knows the token from the edits
    Kerberos::clear_process_credentials(dir.path());
    assert!(tok
        .mkdirs("/kha/after-failover/tok", 0o755)
        .unwrap_or_else(|e| panic!(
            "token mkdirs after the failover: {e}\n{}",
            peer.log_tail(40)
        )));
    let (obs, _) = observer_reads(
        &mut peer,
        &tok,
        &[
            "/kha/after-failover/krb".to_string(),
            "/kha/after-failover/tok".to_string(),
            "/kha/tok".to_string(),
        ],
    );
    assert!(
        obs >= 3,
        "after the failover the observer served {obs} of 3 reads"
    );
    let mut again = Vec::new();
    c.read("/kha/tok", 0, None, &mut again)
        .unwrap_or_else(|e| panic!("read after the failover: {e}\n{}", peer.log_tail(40)));
    assert_eq!(sha256_hex(&again), want);
    // a fresh token client after the failover, too
    assert_eq!(
        token_client()
            .get_file_info("/kha/after-failover/tok")
            .unwrap_or_else(|e| panic!("{e}\n{}", peer.log_tail(40)))
            .map(|s| s.owner),
        Some("client".to_string())
    );
}

#[test]
fn an_observer_that_comes_back_is_found_after_the_probe_period() {
    let mut peer = HA.lock().expect("Kerberized hdfs-ha peer");
    peer.command("mkfiles /kha/probe 5").expect("mkfiles");
    let (_k, _dir, mut conf) = kinit_client(&peer);
    let period = Duration::from_millis(1500);
    conf.set(
        OBSERVER_PROBE_PERIOD_KEY,
        &format!("{}ms", period.as_millis()),
    );
    let paths: Vec<String> = (0..5).map(|i| format!("/kha/probe/f{i}")).collect();
    let obs = index_of(&mut peer, "observer");

    // no observer when the client asks the roles: its reads go to the active
    peer.command(&format!("transition {obs} standby"))
        .expect("observer to standby");
    let nn = NameNodeClient::from_conf(&conf).expect("namenode client");
    // (at or before the client asks the roles)
    let asked = Instant::now();
    nn.get_file_info(&paths[0]).expect("read").expect("exists");
    // (at or after it)
    let answered = Instant::now();
    assert!(!knows_an_observer(&nn), "{:?}", nn.nodes());
    peer.command(&format!("transition {obs} observer"))
        .expect("standby to observer");
    // within the period the client does not ask again: the active serves the reads
    let act0 = rpc_requests(&mut peer, "active");
    for p in &paths {
        nn.get_file_info(p).expect("read").expect("exists");
    }
    assert!(
        asked.elapsed() < period,
        "{:?}: too slow to tell",
        asked.elapsed()
    );
    assert!(!knows_an_observer(&nn), "{:?}", nn.nodes());
    let t0 = Instant::now();
    while rpc_requests(&mut peer, "active") < act0 + 5 && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        rpc_requests(&mut peer, "active") >= act0 + 5,
        "the active served the reads"
    );
    // after it, the next read asks the roles again and goes to the observer
    std::thread::sleep((period + Duration::from_millis(100)).saturating_sub(answered.elapsed()));
    let (o, _) = observer_reads(&mut peer, &nn, &paths);
    assert!(
        knows_an_observer(&nn),
        "{:?} {:?} {}",
        nn.nodes(),
        asked.elapsed(),
        peer.command("namenodes").unwrap()
    );
    assert!(
        o >= 5,
        "the observer served {o} of 5 reads after the probe period"
    );
}
