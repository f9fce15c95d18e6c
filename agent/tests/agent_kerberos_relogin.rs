//! The agent's own Kerberos login outlives its tickets (issue 14: "re-login before the ticket
//! expires"). The KDC issues tickets lasting `LIFETIME` seconds; the agent logs in as
//! `yarn.nodemanager.principal` from `yarn.nodemanager.keytab`, with no ticket cache or client
//! keytab in the process's MIT environment, so every ticket it holds comes from its keytab.
//!
//! 1. HDFS (`hdfs --kerberos true --ticket-lifetime`) and `hotpath rm`, Kerberized in the same
//!    realm (the RM runs as the peer's `hdfs/localhost` from its service keytab), the RM reached
//!    through a TCP relay. The agent localizes a PUBLIC `hdfs:` resource for a container (its
//!    own login, `auth:KERBEROS` in the NameNode's audit log); its NameNode connections, idle
//!    for `ipc.client.connection.maxidletime` (10 s), are closed by the agent with no further
//!    call (the shared connection by its reader, the direct-call pool's by its sweeper), none
//!    left open, as Java's `Client` leaves none; after the first ticket has expired it
//!    localizes a second one over a new connection, authenticated anew (the NameNode logs
//!    another "Auth successful"; the KDC another AS exchange). Its RM connection, busy with
//!    heartbeats, stays up across the expiry; cut by the relay, it reconnects (a new GSSAPI
//!    exchange, logged by the RM) and keeps heartbeating.
//! 2. The Java ResourceManager (`yarn-rm --kerberos true --ticket-lifetime`): the agent's RM
//!    connection, cut after the agent's first ticket has expired, reconnects with a fresh
//!    ticket and keeps heartbeating, with no failed registration or IPC error.
//!
//! MIT's environment is process-wide: the tests of this binary run one at a time.

#[path = "support/relay.rs"]
mod relay;
mod support;
use relay::Relay;

use std::fs;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hadoop_wire::pb::hadoop::yarn::{
    LocalResourceProto, LocalResourceTypeProto, LocalResourceVisibilityProto,
    StartContainersRequestProto, StartContainersResponseProto, StringLocalResourceMapProto,
    UrlProto,
};
use hadoop_wire::yarn::cmp;
use hdfs_io::namenode::{NameNodeClient, NameNodeConfig, NameNodeKerberos};
use nm_core::ids::{AppId, AttemptId, ContainerId};
use nm_runtime::config::HdfsSettings;
use nm_runtime::config::{AgentConfig, RmSecurity};
use nm_runtime::{Agent, ExitReason};
use peer_harness::{Mode, Peer};

#[path = "support/cmp.rs"]
mod cmp_support;
use cmp_support::{call, now_ms, wait_for, Minter};

/// Seconds a ticket lasts. Just above MIT's 30 s refresh window (see
/// `hdfs-io/tests/kerberos_relogin.rs`): a ticket is replaced from the keytab once it is
/// within 30 s of its expiry.
const LIFETIME: u64 = 32;

fn serial() -> std::sync::MutexGuard<'static, ()> {
    static ONE: Mutex<()> = Mutex::new(());
    ONE.lock().unwrap_or_else(|p| p.into_inner())
}

fn log_count(path: &Path, pred: impl Fn(&str) -> bool) -> usize {
    fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| pred(l))
        .count()
}

/// AS exchanges the KDC (logging into `log`) issued for `principal`: its logins.
fn as_issued(log: &Path, principal: &str) -> usize {
    log_count(log, |l| {
        l.contains("AS_REQ ISSUE:") && l.contains(&format!("{principal} for krbtgt/"))
    })
}

/// This process's ESTABLISHED TCP connections to `port`.
fn connections_to(port: u16) -> usize {
    testkit::loopback::my_ports_to(port).len()
}

/// The agent's Kerberos keys: `principal` from `keytab`, the RM as `rm_principal`.
fn kerberos_keys(
    principal: &str,
    keytab: &Path,
    rm_principal: &str,
    protection: &str,
) -> Vec<(String, String)> {
    vec![
        ("hadoop.security.authentication".into(), "kerberos".into()),
        ("hadoop.rpc.protection".into(), protection.into()),
        ("yarn.nodemanager.principal".into(), principal.into()),
        (
            "yarn.nodemanager.keytab".into(),
            keytab.display().to_string(),
        ),
        ("yarn.resourcemanager.principal".into(), rm_principal.into()),
    ]
}

fn agent_config(rm: SocketAddr, ip: &str, dir: &Path, keys: &[(String, String)]) -> AgentConfig {
    let mut c = conf::Configuration::new();
    for (k, v) in keys {
        c.set(k, v);
    }
    let mut cfg = AgentConfig::local(rm, ip.parse().unwrap(), dir).unwrap();
    cfg.memory_mb = 4096;
    cfg.vcores = 4;
    cfg.default_interval_ms = 500;
    cfg.connect_max_wait = Some(Duration::from_secs(60));
    cfg.retry_interval = Duration::from_millis(500);
    cfg.call_timeout = Duration::from_secs(10);
    cfg.nm.zygotes = 0;
    cfg.rm_security = RmSecurity::from_conf(&c).expect("Kerberos settings");
    cfg
}

fn attempt() -> AttemptId {
    AttemptId {
        app: AppId {
            cluster_timestamp: 1_700_000_000_000,
            id: 1,
        },
        attempt: 1,
    }
}

fn container(n: i64) -> ContainerId {
    ContainerId {
        app: attempt().app,
        attempt: 1,
        id: n,
    }
}

fn public_resource(
    nn: SocketAddr,
    path: &str,
    len: u64,
    mtime: i64,
) -> StringLocalResourceMapProto {
    StringLocalResourceMapProto {
        key: Some(path.rsplit('/').next().unwrap().into()),
        value: Some(LocalResourceProto {
            resource: Some(UrlProto {
                scheme: Some("hdfs".into()),
                host: Some(nn.ip().to_string()),
                port: Some(i32::from(nn.port())),
                file: Some(path.into()),
                user_info: None,
            }),
            size: Some(len as i64),
            timestamp: Some(mtime),
            r#type: Some(LocalResourceTypeProto::File as i32),
            visibility: Some(LocalResourceVisibilityProto::Public as i32),
            pattern: None,
            should_be_uploaded_to_shared_cache: None,
        }),
    }
}

#[test]
fn the_agents_keytab_login_localizes_and_heartbeats_across_ticket_expiry() {
    let _g = serial();
    let lifetime = LIFETIME.to_string();
    let mut peer = Peer::start(
        Mode::Hdfs,
        &[
            "--datanodes",
            "1",
            "--shared-ip",
            "true",
            "--kerberos",
            "true",
            "--ticket-lifetime",
            &lifetime,
            "--log-level",
            "org.apache.hadoop.hdfs.server.namenode.FSNamesystem.audit=INFO",
        ],
    )
    .expect("Kerberized hdfs peer with short tickets");
    let k = peer.kerberos().expect("READY kerberos");
    let nn = peer.namenode_addr().unwrap();
    let dir = tempfile::tempdir().unwrap();
    // MIT's environment: the KDC's krb5.conf, no ticket, no client keytab: the agent's
    // tickets can only come from its own keytab login.
    std::env::set_var("KRB5_CONFIG", &k.krb5_conf);
    peer_harness::Kerberos::clear_process_credentials(dir.path());
    std::env::remove_var("HADOOP_TOKEN_FILE_LOCATION");

    let mut files = Vec::new();
    for (name, len) in [("a.bin", 70_001u64), ("b.bin", 130_003)] {
        let w = peer
            .command(&format!("write /relogin/{name} {len}"))
            .expect("write");
        files.push((
            format!("/relogin/{name}"),
            len,
            w["sha256"].as_str().unwrap().to_string(),
        ));
    }
    // the files' modification times, read by a client of the test's own (before any count
    // is taken: its connection authenticates too), from a copy of the keytab: a login's
    // in-memory ticket cache is named after its principal and keytab, so the agent's login
    // shares no ticket with it
    let mtimes: Vec<i64> = {
        let conf = conf::Configuration::load_dir(peer.conf_dir()).unwrap();
        let own_keytab = dir.path().join("test-client.keytab");
        fs::copy(&k.client_keytab, &own_keytab).unwrap();
        let c = NameNodeClient::from_conf_with(
            &conf,
            NameNodeConfig {
                kerberos: Some(NameNodeKerberos {
                    server_principal: String::new(),
                    client_principal: Some(k.client_principal.clone()),
                    keytab: Some(own_keytab),
                }),
                ..NameNodeConfig::default()
            },
        )
        .expect("the test's NameNode client");
        files
            .iter()
            .map(|(p, _, _)| c.get_file_info(p).unwrap().unwrap().modification_time as i64)
            .collect()
    };

    // hotpath rm in the same realm: the peer's hdfs/localhost is its principal
    let rm_dir = tempfile::tempdir().unwrap();
    let rm_log = rm_dir.path().join("rm.log");
    let rm = support::start_rm(
        rm_dir.path(),
        &[
            "hadoop.security.authentication=kerberos".into(),
            format!("yarn.resourcemanager.principal=hdfs/_HOST@{}", k.realm),
            format!("yarn.resourcemanager.keytab={}", k.service_keytab.display()),
            "hadoop.rpc.protection=privacy".into(),
            "yarn.resourcemanager.nodemanagers.heartbeat-interval-ms=500".into(),
        ],
        "info,ipc=debug",
        fs::File::create(&rm_log).unwrap().into(),
    );
    let relay = Relay::start(rm.tracker.parse().unwrap());

    // the agent: the peer's client principal and keytab stand in for nm's
    let keys = kerberos_keys(
        &k.client_principal,
        &k.client_keytab,
        &format!("hdfs/_HOST@{}", k.realm),
        "privacy",
    );
    let node_dir = dir.path().join("node");
    fs::create_dir(&node_dir).unwrap();
    let mut cfg = agent_config(relay.addr, "127.0.0.51", &node_dir, &keys);
    let mut hconf = conf::Configuration::load_dir(peer.conf_dir()).unwrap();
    for (key, v) in &keys {
        hconf.set(key, v);
    }
    cfg.hdfs = HdfsSettings::from_conf(&hconf).expect("HDFS settings");
    assert!(cfg.hdfs.is_some(), "fs.defaultFS is hdfs://");
    let log_root = cfg.nm.log_dirs[0].clone();
    let kdc_log = peer.log_path().to_path_buf();
    let logins0 = as_issued(&kdc_log, &k.client_principal);
    let agent = Agent::start(cfg).expect("Kerberized agent");
    let login_at = Instant::now();
    wait_for("registered, with keys", Duration::from_secs(30), || {
        agent.shared().cm.lock().unwrap().has_keys()
    });
    let m = &agent.shared().metrics;
    let rm_auth_line = format!(
        "SASL: {} authenticated by KERBEROS at auth-conf",
        k.client_principal
    );
    assert_eq!(log_count(&rm_log, |l| l.contains(&rm_auth_line)), 1);

    let minter = Minter::new(
        &agent,
        &std::env::var("USER").unwrap_or_else(|_| "root".into()),
    );
    let client = minter.client(attempt());
    let me = agent.node_id();
    let exit_code = |id: ContainerId| {
        let f = node_dir
            .join("local/nmPrivate")
            .join(id.app.to_string())
            .join(id.to_string())
            .join(format!("{id}.pid.exitcode"));
        fs::read_to_string(f).ok()?.trim().parse::<i32>().ok()
    };
    let nn_auths = |peer: &Peer| {
        log_count(peer.log_path(), |l| {
            l.contains(&format!("Auth successful for {}", k.client_principal))
                && l.contains("auth:KERBEROS")
        })
    };
    let kerberos_ugi = format!("{} (auth:KERBEROS)", k.client_principal);
    let opened = |peer: &Peer, src: &str| {
        log_count(peer.log_path(), |l| {
            l.contains(&format!("ugi={kerberos_ugi}\t"))
                && l.contains("cmd=open\t")
                && l.contains(&format!("src={src}\t"))
        })
    };
    // a container with file `i` as a PUBLIC resource: its sha256 in the container's stdout
    let run = |i: usize, n: i64| {
        let (path, len, sum) = &files[i];
        let name = path.rsplit('/').next().unwrap();
        let c = container(n);
        let mut req = minter.start_request(
            c,
            &me,
            now_ms() + 600_000,
            &format!("sha256sum {name} 1><LOG_DIR>/stdout 2><LOG_DIR>/stderr"),
        );
        req.container_launch_context
            .as_mut()
            .unwrap()
            .local_resources = vec![public_resource(nn, path, *len, mtimes[i])];
        let r: StartContainersResponseProto = call(
            &client,
            cmp::START_CONTAINERS,
            &StartContainersRequestProto {
                start_container_request: vec![req],
            },
        )
        .unwrap();
        assert_eq!(r.succeeded_requests.len(), 1, "{r:?}");
        wait_for(&format!("{c} exits"), Duration::from_secs(60), || {
            exit_code(c).is_some()
        });
        let logs = log_root.join(c.app.to_string()).join(c.to_string());
        let stdout = fs::read_to_string(logs.join("stdout")).unwrap_or_default();
        assert_eq!(
            exit_code(c),
            Some(0),
            "{c}: {stdout}{}\n{}",
            fs::read_to_string(logs.join("stderr")).unwrap_or_default(),
            peer.log_tail(30)
        );
        assert!(stdout.starts_with(sum.as_str()), "{c}: {stdout}");
    };

    // 1. the first resource, over the agent's own login
    let auths0 = nn_auths(&peer);
    run(0, 2);
    assert_eq!(opened(&peer, &files[0].0), 1, "read as {kerberos_ugi}");
    // The shared connection and, for the idempotent calls, the direct-call pool's: one or two
    // connections, each authenticated once (up unless the container took longer than the idle
    // time to run).
    let auths1 = nn_auths(&peer);
    assert!(
        (auths0 + 1..=auths0 + 2).contains(&auths1),
        "one or two authenticated NameNode connections: {} new",
        auths1 - auths0
    );
    assert!(
        connections_to(nn.port()) <= 2,
        "at most two NameNode connections"
    );
    let logins1 = as_issued(&kdc_log, &k.client_principal);
    assert!(logins1 > logins0, "the agent logged in from its keytab");

    // 2. past the first ticket's expiry: the idle NameNode connections have been closed by the
    //    agent; the RM connection, busy with heartbeats, is still the first one
    let past = Duration::from_secs(LIFETIME + 6);
    while login_at.elapsed() < past {
        std::thread::sleep(Duration::from_millis(200));
    }
    // Idle for ipc.client.connection.maxidletime (10 s, the default) since the first
    // localization, each is closed with no further call: the shared connection by its reader,
    // the direct-call pool's by its sweeper. None is left, as Java's Client leaves none. (The
    // last NameNode call may have come late if the container was slow: a deadline of a
    // maxidletime and then some from now, not a fixed wait.)
    wait_for(
        "no NameNode connection left open (ipc.client.connection.maxidletime)",
        Duration::from_secs(15),
        || connections_to(nn.port()) == 0,
    );
    assert_eq!(relay.accepted.load(Relaxed), 1, "one RM connection so far");
    let ok0 = m.heartbeats_ok.load(Relaxed);
    wait_for(
        "heartbeats after the expiry",
        Duration::from_secs(10),
        || m.heartbeats_ok.load(Relaxed) >= ok0 + 3,
    );

    // 3. the second resource: a new connection, authenticated with a ticket from the keytab
    run(1, 3);
    assert_eq!(opened(&peer, &files[1].0), 1, "read as {kerberos_ugi}");
    assert!(
        nn_auths(&peer) > auths1,
        "a new authenticated NameNode connection after the expiry"
    );
    let logins = as_issued(&kdc_log, &k.client_principal) - logins0;
    assert!(
        logins0 + logins > logins1,
        "a new ticket from the keytab for the new connection: {logins} AS exchanges in all"
    );

    // 4. the RM connection cut after the expiry: a new one, a new GSSAPI exchange, heartbeats
    relay.drop_connections();
    let ok1 = m.heartbeats_ok.load(Relaxed);
    wait_for(
        "heartbeats over a new RM connection",
        Duration::from_secs(30),
        || relay.accepted.load(Relaxed) >= 2 && m.heartbeats_ok.load(Relaxed) >= ok1 + 3,
    );
    assert_eq!(
        log_count(&rm_log, |l| l.contains(&rm_auth_line)),
        2,
        "the RM authenticated the agent again"
    );
    assert_eq!(m.registrations.load(Relaxed), 1);
    assert_eq!(m.registration_failures.load(Relaxed), 0);
    assert_eq!(m.localize.failed.load(Relaxed), 0);
    assert_eq!(m.rpc_errors.load(Relaxed), 0, "IPC errors");
    eprintln!(
        "{logins} AS exchanges for {}; {} NameNode authentications; {} RM connections; {} \
         heartbeats ok, {} failed",
        k.client_principal,
        nn_auths(&peer) - auths0,
        relay.accepted.load(Relaxed),
        m.heartbeats_ok.load(Relaxed),
        m.heartbeat_failures.load(Relaxed)
    );
    drop(client);
    agent.stop();
    assert_eq!(agent.join(), ExitReason::Stopped);
    drop(rm);
}

fn running_rid(rm: &mut Peer, id: &str) -> Option<i64> {
    let r = rm.command("nodes").expect("nodes");
    let n = r["nodes"]
        .as_array()?
        .iter()
        .find(|n| n["node_id"] == id)?
        .clone();
    (n["state"] == "RUNNING").then(|| n["response_id"].as_i64().unwrap_or(-1))
}

#[test]
fn the_agents_rm_connection_reconnects_to_a_java_rm_after_its_ticket_expired() {
    let _g = serial();
    let lifetime = LIFETIME.to_string();
    let mut rm = Peer::start(
        Mode::YarnRm,
        &[
            "--kerberos",
            "true",
            "--ticket-lifetime",
            &lifetime,
            "--nms",
            "0",
            "--set",
            "hadoop.rpc.protection=privacy",
            "--set",
            "yarn.resourcemanager.nodemanagers.heartbeat-interval-ms=500",
        ],
    )
    .unwrap_or_else(|e| panic!("the Kerberized yarn-rm peer must start (mvn, JDK): {e}"));
    let kr = &rm.ready()["kerberos"];
    let s = |f: &str| {
        kr[f]
            .as_str()
            .unwrap_or_else(|| panic!("kerberos.{f}"))
            .to_string()
    };
    let (realm, nm_keytab) = (s("realm"), s("nm_keytab"));
    let dir = tempfile::tempdir().unwrap();
    std::env::set_var("KRB5_CONFIG", s("krb5_conf"));
    peer_harness::Kerberos::clear_process_credentials(dir.path());
    std::env::remove_var("HADOOP_TOKEN_FILE_LOCATION");
    let relay = Relay::start(rm.resource_tracker_addr().unwrap());
    let principal = format!("nm/localhost@{realm}");
    let keys = kerberos_keys(
        &principal,
        Path::new(&nm_keytab),
        &format!("rm/_HOST@{realm}"),
        "privacy",
    );
    let kdc_log = rm.log_path().to_path_buf();
    let agent = Agent::start(agent_config(relay.addr, "127.0.0.52", dir.path(), &keys))
        .expect("Kerberized agent");
    let login_at = Instant::now();
    let id = agent.node_id();
    let mut rid = None;
    wait_for("RUNNING at the Java RM", Duration::from_secs(60), || {
        rid = running_rid(&mut rm, &id);
        rid.is_some()
    });
    let logins0 = as_issued(&kdc_log, &principal);
    assert!(logins0 >= 1, "the agent's login is in the KDC's log");

    // past the first ticket's expiry the first connection still carries the heartbeats
    while login_at.elapsed() < Duration::from_secs(LIFETIME + 4) {
        std::thread::sleep(Duration::from_millis(200));
    }
    let rid1 = running_rid(&mut rm, &id).expect("RUNNING");
    assert!(rid1 > rid.unwrap() + 10, "heartbeats: {rid:?} → {rid1}");
    assert_eq!(relay.accepted.load(Relaxed), 1);

    // cut: a new connection, a new GSSAPI exchange with a ticket from the keytab
    relay.drop_connections();
    let m = &agent.shared().metrics;
    let ok0 = m.heartbeats_ok.load(Relaxed);
    wait_for(
        "heartbeats over a new connection after the cut",
        Duration::from_secs(30),
        || relay.accepted.load(Relaxed) >= 2 && m.heartbeats_ok.load(Relaxed) >= ok0 + 3,
    );
    let rid2 = running_rid(&mut rm, &id).expect("still RUNNING");
    assert!(rid2 > rid1, "{rid1} → {rid2}");
    let logins = as_issued(&kdc_log, &principal);
    assert!(
        logins > logins0,
        "a new ticket from the keytab: {logins0} → {logins} AS exchanges"
    );
    assert_eq!(m.registrations.load(Relaxed), 1);
    assert_eq!(m.registration_failures.load(Relaxed), 0);
    assert_eq!(m.rpc_errors.load(Relaxed), 0, "IPC errors");
    eprintln!(
        "{} RM connections; {logins} AS exchanges for {principal}; {} heartbeats ok, {} failed",
        relay.accepted.load(Relaxed),
        m.heartbeats_ok.load(Relaxed),
        m.heartbeat_failures.load(Relaxed)
    );
    agent.stop();
    assert_eq!(agent.join(), ExitReason::Stopped);
}
