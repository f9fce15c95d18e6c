//! KERBEROS on `hotpath rm`'s application ports (issue 14, "Kerberos on every RPC"): a
//! Kerberized `hotpath rm` (the yarn-nm peer's MiniKdc, realm EXAMPLE.COM, the RM as
//! `rm/_HOST` from its keytab, `hadoop.rpc.protection=privacy`, `hadoop.security.authorization`
//! with `security.applicationclient.protocol.acl=client`) and two Kerberized `hotpath agent`s:
//!
//! 1. Hadoop's own `YarnClient` (peer `yarn-client`, logged in as `client@EXAMPLE.COM` from its
//!    keytab) lists the nodes and submits the peer's ShellAm over KERBEROS; the AM talks to the
//!    scheduler port with its AMRMToken (TOKEN, the only method offered there, as in Java); the
//!    application finishes SUCCEEDED with the exact exit statuses asked for, and its user is the
//!    principal's short name, `client`.
//! 2. `hotpath app run` with a kinit'ed ticket cache runs an application (user `client`); without
//!    a ticket it fails naming the cause; as a SIMPLE client it is refused with Java's "SIMPLE
//!    authentication is not enabled.  Available:[TOKEN, KERBEROS]" (TOKEN: RM delegation
//!    tokens, as a Java RM's client port offers them); a SIMPLE caller of the scheduler
//!    port gets "...Available:[TOKEN]".
//! 3. An RM whose `hadoop.security.auth_to_local` maps `client@EXAMPLE.COM` to `alice` and whose
//!    `security.applicationclient.protocol.acl` lists only `client`: `hotpath app run` gets
//!    Java's AuthorizationException text, at once.
//!
//! MIT's environment (`KRB5_CONFIG`, `KRB5CCNAME`) is process-wide: everything runs in one
//! test, in order.

mod support;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use peer_harness::{Kerberos, Mode, Peer};
use serde_json::Value;

#[path = "support/app_run.rs"]
mod app_run;
#[path = "support/daemon.rs"]
mod daemon;
use daemon::{agent_command, Daemon};

const PROTECTION: &str = "privacy";

use testkit::kerberos::PeerKerberos as Krb;

fn krb(peer: &Peer) -> Krb {
    Krb::from_ready(peer.ready())
}

/// The harness's view of this KDC, for its MIT helpers (kinit as `client`).
fn harness(k: &Krb) -> Kerberos {
    Kerberos {
        realm: k.realm.clone(),
        kdc: String::new(),
        krb5_conf: k.krb5_conf.clone(),
        client_principal: k.client_principal.clone(),
        client_keytab: k.client_keytab.clone(),
        namenode_principal: String::new(),
        service_keytab: PathBuf::new(),
        rpc_protection: PROTECTION.into(),
    }
}

/// A Kerberized `hotpath rm` on 127.0.0.1 (every port ephemeral), with `extra` sets.
fn start_rm(k: &Krb, extra: &[String]) -> Daemon {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(support::hotpath_exe());
    cmd.args([
        "rm",
        "--address",
        "127.0.0.1:0",
        "--metrics-port",
        "0",
        "--ready-line",
    ]);
    let mut sets = vec![
        format!(
            "hotpath.rm.completion-log.dir={}",
            dir.path().join("completion-log").display()
        ),
        "yarn.resourcemanager.address=127.0.0.1:0".into(),
        "yarn.resourcemanager.scheduler.address=127.0.0.1:0".into(),
        "yarn.resourcemanager.admin.address=127.0.0.1:0".into(),
        "hadoop.security.authentication=kerberos".into(),
        format!("yarn.resourcemanager.principal={}", k.rm_principal()),
        format!("yarn.resourcemanager.keytab={}", k.rm_keytab.display()),
        format!("hadoop.rpc.protection={PROTECTION}"),
        "yarn.resourcemanager.nodemanagers.heartbeat-interval-ms=500".into(),
        "hadoop.security.authorization=true".into(),
    ];
    sets.extend_from_slice(extra);
    for s in sets {
        cmd.arg("--set").arg(s);
    }
    cmd.env("KRB5_CONFIG", &k.krb5_conf)
        .env("HOTPATH_LOG", "info,ipc=debug");
    Daemon::spawn(cmd, dir)
}

/// A Kerberized `hotpath agent` on `ip` (as `nm/localhost` from its keytab), registering with
/// the ResourceTracker `rt`; the containers' JVMs get the realm's krb5.conf (Hadoop's UGI in a
/// Java AM wants the default realm, though it authenticates by token).
fn start_agent(k: &Krb, rt: &str, ip: &str) -> Daemon {
    let extra = [
        ("hadoop.security.authentication", "kerberos".into()),
        ("hadoop.rpc.protection", PROTECTION.into()),
        (
            "yarn.nodemanager.principal",
            format!("nm/localhost@{}", k.realm),
        ),
        ("yarn.nodemanager.keytab", k.nm_keytab.display().to_string()),
        ("yarn.resourcemanager.principal", k.rm_principal()),
        (
            "yarn.nodemanager.admin-env",
            format!(
                "MALLOC_ARENA_MAX=$MALLOC_ARENA_MAX,JAVA_TOOL_OPTIONS=-Djava.security.krb5.conf={}",
                k.krb5_conf.display()
            ),
        ),
    ];
    let (mut cmd, dir) = agent_command(rt, ip, &extra);
    cmd.env("KRB5_CONFIG", &k.krb5_conf);
    Daemon::spawn(cmd, dir)
}

fn wait_for(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !ok() {
        assert!(
            t0.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `hotpath app run` against `rm` with `sets` (plus an empty conf dir), `containers` × `command`.
fn app_run(rm: &Daemon, sets: &[String], containers: u32, command: &str) -> app_run::RunResult {
    let conf = tempfile::tempdir().unwrap();
    let (client, scheduler) = (rm.field("client"), rm.field("scheduler"));
    let mut args: Vec<&str> = vec![
        "--rm",
        &client,
        "--scheduler",
        &scheduler,
        "--connect-attempts",
        "1",
        "--timeout",
        "120",
    ];
    let n = containers.to_string();
    args.extend(["--containers", &n]);
    for s in sets {
        args.extend(["--set", s]);
    }
    app_run::app_run(conf.path(), &args, command)
}

/// A SIMPLE caller of `protocol` at `addr`: the refusal text.
fn simple_call(addr: &str, protocol: &str) -> String {
    let client = ipc::client::Client::new(
        addr.parse().unwrap(),
        ipc::client::ClientConfig {
            protocol: protocol.into(),
            protocol_version: 1,
            user: "client".into(),
            connect_timeout: Duration::from_secs(10),
            call_timeout: Duration::from_secs(20),
            max_connect_attempts: 1,
            ..ipc::client::ClientConfig::default()
        },
    );
    client
        .call("getClusterMetrics", &[])
        .expect_err("a SIMPLE caller of a Kerberized RM")
        .to_string()
}

#[test]
fn kerberized_hotpath_rm_runs_applications_for_kerberos_clients() {
    let kdc = Peer::start(Mode::YarnNm, &["--kerberos", "true"])
        .unwrap_or_else(|e| panic!("the Kerberized yarn-nm peer (the KDC) must start: {e}"));
    let k = krb(&kdc);
    std::env::set_var("KRB5_CONFIG", &k.krb5_conf);
    let rm = start_rm(
        &k,
        &["security.applicationclient.protocol.acl=client".into()],
    );
    let rt = rm.field("resource_tracker");
    let agents = [
        start_agent(&k, &rt, "127.0.0.61"),
        start_agent(&k, &rt, "127.0.0.62"),
    ];
    let mut ids: Vec<String> = agents.iter().map(|a| a.field("node_id")).collect();
    ids.sort();

    // 1. Java's YarnClient, logged in from the client keytab
    let mut args: Vec<String> = [
        "--rm",
        &rm.field("client"),
        "--scheduler",
        &rm.field("scheduler"),
        "--principal",
        &k.client_principal,
        "--keytab",
        &k.client_keytab.display().to_string(),
        "--krb5-conf",
        &k.krb5_conf.display().to_string(),
        "--log-level",
        "ERROR",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for s in k.client_sets(PROTECTION) {
        args.extend(["--set".to_string(), s]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut yc = Peer::start(Mode::YarnClient, &args)
        .unwrap_or_else(|e| panic!("the Kerberized yarn-client peer must start: {e}"));
    wait_for(
        "both agents RUNNING (getClusterNodes over KERBEROS)",
        Duration::from_secs(60),
        || {
            let v = yc
                .command("nodes")
                .unwrap_or_else(|e| panic!("nodes over KERBEROS: {e}"));
            let mut running: Vec<String> = v["nodes"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter(|n| n["state"] == "RUNNING")
                        .filter_map(|n| n["node_id"].as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default();
            running.sort();
            running == ids
        },
    );
    let dir = tempfile::tempdir().unwrap();
    let result = dir.path().join("result.json");
    let submitted = yc
        .command(&format!(
            "app-submit containers=4 exit=1:5,3:2 container_mb=512 result={}",
            result.display()
        ))
        .unwrap_or_else(|e| panic!("app-submit over KERBEROS: {e}"));
    let id = submitted["app_id"].as_str().expect("app_id").to_owned();
    let done = yc
        .command(&format!("app-wait {id} 180"))
        .unwrap_or_else(|e| panic!("app-wait: {e}"));
    eprintln!("Java YarnClient's application on the Kerberized hotpath rm: {done}");
    assert_eq!(done["timed_out"], false, "{done}");
    assert_eq!(done["state"], "FINISHED", "{done}");
    assert_eq!(done["final_status"], "SUCCEEDED", "{done}");
    assert_eq!(done["user"], "client", "the principal's short name: {done}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&result).unwrap()).unwrap();
    assert_eq!(r["errors"], Value::Array(vec![]), "{r}");
    assert_eq!(r["unexpected"], Value::Array(vec![]), "{r}");
    let comps = r["completions"].as_array().expect("completions");
    assert_eq!(comps.len(), 4, "{r}");
    for c in comps {
        let want = match c["index"].as_u64() {
            Some(1) => 5,
            Some(3) => 2,
            _ => 0,
        };
        assert_eq!(c["exit_status"], want, "{c}");
        assert!(ids.contains(&c["node_id"].as_str().unwrap_or("").to_string()));
    }
    assert!(
        agents
            .iter()
            .any(|a| a.dir().join("local/usercache/client").is_dir()),
        "no usercache/client on the agents"
    );

    // 2. hotpath app run with a kinit'ed cache
    let h = harness(&k);
    let cc = tempfile::tempdir().unwrap();
    h.kinit_process(cc.path()).expect("kinit as client");
    let run = app_run(
        &rm,
        &k.client_sets(PROTECTION),
        3,
        &app_run::fail_one("000003", 7),
    );
    eprintln!(
        "hotpath app run over KERBEROS:\n{}{}",
        run.stdout, run.stderr
    );
    assert_eq!(
        (run.state.as_str(), run.final_status.as_str()),
        ("FINISHED", "FAILED"),
        "{run:#?}"
    );
    assert_eq!(run.code, 1, "{run:#?}");
    assert_eq!(run.exits(), ["0", "0", "7"], "{run:#?}");
    let rep = yc
        .command(&format!("app-report {}", run.app_id))
        .expect("app-report");
    assert_eq!(rep["user"], "client", "{rep}");

    // ... without a ticket: a clear error, no application
    Kerberos::clear_process_credentials(cc.path());
    let t0 = Instant::now();
    let run = app_run(&rm, &k.client_sets(PROTECTION), 1, "true");
    eprintln!("without a ticket: {}", run.stderr.trim());
    assert_eq!(run.code, 2, "{run:#?}");
    assert!(run.app_id.is_empty(), "{run:#?}");
    assert!(
        run.stderr.contains("No Kerberos credentials available")
            || run.stderr.contains("credentials cache"),
        "{}",
        run.stderr
    );
    assert!(t0.elapsed() < Duration::from_secs(30), "{:?}", t0.elapsed());

    // ... as a SIMPLE client: Java's refusal
    let run = app_run(
        &rm,
        &[format!("hadoop.rpc.protection={PROTECTION}")],
        1,
        "true",
    );
    eprintln!("SIMPLE client: {}", run.stderr.trim());
    assert_eq!(run.code, 2, "{run:#?}");
    assert!(
        run.stderr
            .contains("SIMPLE authentication is not enabled.  Available:[TOKEN, KERBEROS]"),
        "{}",
        run.stderr
    );
    // the scheduler port takes the AMRMToken only, as Java's ApplicationMasterService
    let text = simple_call(
        &rm.field("scheduler"),
        hadoop_wire::yarn::APPLICATION_MASTER_PROTOCOL,
    );
    assert!(
        text.contains("SIMPLE authentication is not enabled.  Available:[TOKEN]"),
        "{text}"
    );
    let text = simple_call(
        &rm.field("client"),
        hadoop_wire::yarn::APPLICATION_CLIENT_PROTOCOL,
    );
    assert!(
        text.contains("SIMPLE authentication is not enabled.  Available:[TOKEN, KERBEROS]"),
        "{text}"
    );
    drop(yc);
    drop(agents);
    drop(rm);

    // 3. an ACL without the caller's user: auth_to_local maps client@REALM to `alice`, and the
    // ACL lists `client` (the DEFAULT short name), so the mapped name is what it is checked on
    let rm = start_rm(
        &k,
        &[
            format!(
                "hadoop.security.auth_to_local=RULE:[1:$1@$0](client@{})s/.*/alice/ DEFAULT",
                k.realm
            ),
            "security.applicationclient.protocol.acl=client".into(),
        ],
    );
    h.kinit_process(cc.path()).expect("kinit as client");
    let t0 = Instant::now();
    let run = app_run(&rm, &k.client_sets(PROTECTION), 1, "true");
    eprintln!("ACL refusal: {}", run.stderr.trim());
    assert_eq!(run.code, 2, "{run:#?}");
    assert!(
        run.stderr
            .contains("org.apache.hadoop.security.authorize.AuthorizationException")
            && run.stderr.contains(&format!(
                "User {} (auth:KERBEROS) is not authorized for protocol interface \
                 org.apache.hadoop.yarn.api.ApplicationClientProtocolPB: denied by configured ACL",
                k.client_principal
            )),
        "{}",
        run.stderr
    );
    assert!(t0.elapsed() < Duration::from_secs(30), "{:?}", t0.elapsed());
    drop(kdc);
}
