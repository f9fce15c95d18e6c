//! The agent joins a Kerberized Java ResourceManager (Hadoop 3.5, peer `yarn-rm --kerberos
//! true`: MiniKdc, realm EXAMPLE.COM) as Java's NodeManager does (issue 14, part 5):
//!
//! 1. For each of authentication, integrity, privacy the RM offers only that level
//!    (`hadoop.rpc.protection`) and the agents ask only for it, so a registration proves the
//!    level was negotiated. Two agents log in as `yarn.nodemanager.principal` from
//!    `yarn.nodemanager.keytab` (one names it `nm/_HOST@…`, `_HOST` = the local host's canonical
//!    name as Java's `SecurityUtil.login` finds it), accept the RM only as
//!    `yarn.resourcemanager.principal` (`rm/_HOST@…`, `_HOST` = the RM address's canonical
//!    name), register over SASL KERBEROS: the RM lists both RUNNING, their heartbeats advance
//!    without an IPC error, and a graceful stop unregisters (the RM moves them to SHUTDOWN).
//! 2. At privacy one agent reaches the RM through a TCP relay that then drops its
//!    connections: the agent connects again (a new connection, so a new GSSAPI exchange) and
//!    carries on heartbeating.
//! 3. Refused, each with a clear message and without retrying: a keytab that lacks the
//!    principal (`Agent::start` fails, `hotpath agent` exits naming both keys); a
//!    `yarn.resourcemanager.principal` the RM does not have (the agent stops after one
//!    attempt, quoting Java's "Server has invalid Kerberos principal"); an agent without
//!    Kerberos (the RM's "SIMPLE authentication is not enabled").
//! 4. At integrity the agent also joins `hotpath rm`, Kerberized with the Java RM's keytab.
//! 5. A real YARN application (the peer's ShellAm, submitted by `client` logged in from its
//!    keytab) runs on two Kerberized agents at privacy: the RM's AMLauncher and the AM reach
//!    the agents' ContainerManagementProtocol with their tokens (TOKEN only, as in Java).
//!
//! MIT's environment is process-wide: the tests of this binary run one at a time, each making
//! the process a client of its peer's realm without credentials (`KRB5_CONFIG`, an empty
//! `KRB5CCNAME`: the agents log in from their keytabs).

#[path = "support/relay.rs"]
mod relay;
mod support;
use relay::Relay;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nm_runtime::config::{AgentConfig, RmSecurity};
use nm_runtime::{Agent, ExitReason};
use peer_harness::{Kerberos, Mode, Peer};
use serde_json::Value;

struct Krb {
    krb5_conf: PathBuf,
    realm: String,
    rm_keytab: PathBuf,
    nm_keytab: PathBuf,
    nm_host_principal: String,
    /// Where `KRB5CCNAME` points (an empty cache).
    _env: tempfile::TempDir,
}

/// The peer's Kerberos READY; makes this process a client of its realm without credentials.
fn krb(peer: &Peer) -> Krb {
    let k = &peer.ready()["kerberos"];
    let s = |f: &str| {
        k[f].as_str()
            .unwrap_or_else(|| panic!("kerberos.{f} in READY {}", peer.ready()))
            .to_string()
    };
    let env = tempfile::tempdir().unwrap();
    let krb5_conf = PathBuf::from(s("krb5_conf"));
    Kerberos::realm_process(&krb5_conf, env.path());
    Krb {
        krb5_conf,
        realm: s("realm"),
        rm_keytab: s("rm_keytab").into(),
        nm_keytab: s("nm_keytab").into(),
        nm_host_principal: s("nm_host_principal"),
        _env: env,
    }
}

/// A Kerberized Java RM offering only `protection`.
fn start_rm(protection: &str) -> (Peer, Krb) {
    let rm = Peer::start(
        Mode::YarnRm,
        &[
            "--kerberos",
            "true",
            "--nms",
            "0",
            "--set",
            &format!("hadoop.rpc.protection={protection}"),
            "--set",
            "yarn.resourcemanager.nodemanagers.heartbeat-interval-ms=500",
            "--log-level",
            "ERROR",
        ],
    )
    .unwrap_or_else(|e| panic!("the Kerberized yarn-rm peer must start (mvn, JDK): {e}"));
    let k = krb(&rm);
    assert_eq!(
        rm.ready()["kerberos"]["rpc_protection"],
        protection,
        "{}",
        rm.ready()
    );
    (rm, k)
}

/// The Kerberos keys of an agent's configuration.
fn krb_conf(keys: &[(&str, String)]) -> conf::Configuration {
    let mut c = conf::Configuration::new();
    for (k, v) in keys {
        c.set(k, v);
    }
    c
}

fn agent_keys(k: &Krb, protection: &str, node_principal: &str) -> Vec<(&'static str, String)> {
    vec![
        ("hadoop.security.authentication", "kerberos".into()),
        ("hadoop.rpc.protection", protection.into()),
        ("yarn.nodemanager.principal", node_principal.into()),
        ("yarn.nodemanager.keytab", k.nm_keytab.display().to_string()),
        (
            "yarn.resourcemanager.principal",
            format!("rm/_HOST@{}", k.realm),
        ),
    ]
}

fn agent_config(rm: SocketAddr, dir: &Path, keys: &[(&str, String)]) -> AgentConfig {
    let mut cfg = AgentConfig::local(rm, "127.0.0.1".parse().unwrap(), dir).unwrap();
    cfg.memory_mb = 4096;
    cfg.vcores = 4;
    cfg.default_interval_ms = 500;
    cfg.connect_max_wait = Some(Duration::from_secs(60));
    cfg.retry_interval = Duration::from_millis(500);
    cfg.call_timeout = Duration::from_secs(10);
    cfg.nm.zygotes = 0;
    cfg.rm_security = RmSecurity::from_conf(&krb_conf(keys)).expect("Kerberos settings");
    cfg
}

fn node<'a>(nodes: &'a Value, id: &str) -> Option<&'a Value> {
    nodes.as_array()?.iter().find(|n| n["node_id"] == id)
}

fn wait_for(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !ok() {
        assert!(
            t0.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A Kerberized RM with the agents profile at privacy, two Kerberized agents, and the peer's
/// ShellAm application submitted by `client` (logged in from its keytab): the RM's AMLauncher
/// starts the AM on an agent and the AM its containers on both, over ContainerManagementProtocol
/// with their tokens (TOKEN only, at privacy, as Java's NodeManager serves it).
#[test]
fn a_yarn_application_runs_on_kerberized_agents() {
    let _g = serial();
    let protection = "privacy";
    let mut rm = Peer::start(
        Mode::YarnRm,
        &[
            "--kerberos",
            "true",
            "--profile",
            "agents",
            "--set",
            &format!("hadoop.rpc.protection={protection}"),
            "--log-level",
            "ERROR",
        ],
    )
    .unwrap_or_else(|e| panic!("the Kerberized yarn-rm peer must start (mvn, JDK): {e}"));
    let k = krb(&rm);
    let rt = rm.resource_tracker_addr().unwrap();
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let agents: Vec<Agent> = ["127.0.0.41", "127.0.0.42"]
        .iter()
        .zip(&dirs)
        .map(|(ip, d)| {
            let mut cfg = agent_config(
                rt,
                d.path(),
                &agent_keys(&k, protection, &format!("nm/localhost@{}", k.realm)),
            );
            cfg.bind_ip = ip.parse().unwrap();
            cfg.node_host = ip.to_string();
            cfg.default_interval_ms = 1000;
            // the cluster's hadoop.rpc.protection for ContainerManagementProtocol too
            cfg.nm.rpc_protection = vec![hadoop_wire::sasl::Qop::AuthConf];
            // the node's krb5.conf for the containers' JVMs (a real node has /etc/krb5.conf):
            // Hadoop's UGI in the AM needs the default realm, though it authenticates by token
            cfg.nm.admin_env = format!(
                "MALLOC_ARENA_MAX=$MALLOC_ARENA_MAX,JAVA_TOOL_OPTIONS=-Djava.security.krb5.conf={}",
                k.krb5_conf.display()
            );
            Agent::start(cfg).expect("agent")
        })
        .collect();
    for a in &agents {
        let id = a.node_id();
        wait_for(&format!("{id} RUNNING"), Duration::from_secs(60), || {
            running_rid(&mut rm, &id).is_some() && a.shared().cm.lock().unwrap().has_keys()
        });
    }
    let dir = tempfile::tempdir().unwrap();
    let result = dir.path().join("result.json");
    let submitted = rm
        .command(&format!(
            "app-submit containers=4 result={}",
            result.display()
        ))
        .unwrap_or_else(|e| panic!("app-submit: {e}\n{}", rm.log_tail(60)));
    let id = submitted["app_id"].as_str().expect("app_id").to_owned();
    let done = rm
        .command(&format!("app-wait {id} 180"))
        .unwrap_or_else(|e| panic!("app-wait: {e}\n{}", rm.log_tail(80)));
    eprintln!("application under the Kerberized RM: {done}");
    assert_eq!(done["timed_out"], false, "{done}\n{}", rm.log_tail(80));
    assert_eq!(done["state"], "FINISHED", "{done}");
    assert_eq!(done["final_status"], "SUCCEEDED", "{done}");
    let text = std::fs::read_to_string(&result).expect("the AM's result file");
    let r: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(r["errors"], Value::Array(vec![]), "{r}");
    let completions = r["completions"].as_array().expect("completions");
    assert_eq!(completions.len(), 4, "{r}");
    let mut nodes = std::collections::BTreeSet::new();
    for c in completions {
        assert_eq!(c["exit_status"], 0, "{c}");
        nodes.insert(c["node_id"].as_str().unwrap().to_string());
    }
    // the AM and its containers ran on the agents (the RM has no other node)
    let am_node = done["attempts"][0]["am_node_id"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let ids: Vec<String> = agents.iter().map(Agent::node_id).collect();
    assert!(ids.contains(&am_node), "AM on {am_node}, agents {ids:?}");
    assert!(nodes.iter().all(|n| ids.contains(n)), "{nodes:?} {ids:?}");
    // the application's user is the submitter's Kerberos short name (client@REALM -> client)
    assert!(
        dirs.iter()
            .any(|d| d.path().join("local/usercache/client").is_dir()),
        "no usercache/client on the agents"
    );
    for a in agents {
        assert_eq!(a.shared().metrics.rpc_errors.load(Relaxed), 0);
        a.stop();
        assert_eq!(a.join(), ExitReason::Stopped);
    }
}

/// The RM's response id for node `id` once it is RUNNING.
fn running_rid(rm: &mut Peer, id: &str) -> Option<i64> {
    let r = rm.command("nodes").expect("nodes");
    let n = node(&r["nodes"], id)?;
    (n["state"] == "RUNNING").then(|| n["response_id"].as_i64().unwrap_or(-1))
}

/// Two agents register and heartbeat over KERBEROS at `protection`; at privacy the second one
/// goes through a relay that drops its connection once.
fn agents_at_level(protection: &str) {
    let (mut rm, k) = start_rm(protection);
    let rt = rm.resource_tracker_addr().unwrap();
    // _HOST in the node principal: the canonical name Java found for this host
    let host = ipc::kerberos::server_host_name(std::net::Ipv4Addr::UNSPECIFIED.into());
    assert_eq!(
        format!("nm/{host}@{}", k.realm),
        k.nm_host_principal,
        "_HOST of yarn.nodemanager.principal: ours and Java's canonical local host name"
    );
    let relay = (protection == "privacy").then(|| Relay::start(rt));
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let agents: Vec<Agent> = dirs
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let principal = if i == 0 {
                format!("nm/localhost@{}", k.realm)
            } else {
                format!("nm/_HOST@{}", k.realm)
            };
            let target = match (&relay, i) {
                (Some(r), 1) => r.addr,
                _ => rt,
            };
            let cfg = agent_config(target, d.path(), &agent_keys(&k, protection, &principal));
            Agent::start(cfg).unwrap_or_else(|e| panic!("agent {i} at {protection}: {e}"))
        })
        .collect();
    let ids: Vec<String> = agents.iter().map(Agent::node_id).collect();
    let mut rid0 = Vec::new();
    for id in &ids {
        let mut rid = None;
        wait_for(
            &format!("{id} RUNNING at {protection}"),
            Duration::from_secs(60),
            || {
                rid = running_rid(&mut rm, id);
                rid.is_some()
            },
        );
        rid0.push(rid.unwrap());
    }
    // heartbeats advance on both
    for (id, r0) in ids.iter().zip(&rid0) {
        wait_for(
            &format!("{id}'s heartbeats at {protection}"),
            Duration::from_secs(30),
            || running_rid(&mut rm, id).is_some_and(|r| r >= r0 + 3),
        );
    }
    if let Some(relay) = &relay {
        assert_eq!(relay.accepted.load(Relaxed), 1);
        let m = &agents[1].shared().metrics;
        relay.drop_connections();
        let ok0 = m.heartbeats_ok.load(Relaxed);
        wait_for(
            "heartbeats over a new connection after the drop",
            Duration::from_secs(30),
            || relay.accepted.load(Relaxed) >= 2 && m.heartbeats_ok.load(Relaxed) >= ok0 + 3,
        );
        assert!(running_rid(&mut rm, &ids[1]).is_some(), "still RUNNING");
        eprintln!(
            "{protection}: after the dropped connection: {} connections, {} heartbeats ok, \
             {} failed",
            relay.accepted.load(Relaxed),
            m.heartbeats_ok.load(Relaxed),
            m.heartbeat_failures.load(Relaxed)
        );
    }
    for (a, id) in agents.iter().zip(&ids) {
        let m = &a.shared().metrics;
        assert_eq!(m.registrations.load(Relaxed), 1, "{id}");
        assert_eq!(m.registration_failures.load(Relaxed), 0, "{id}");
        assert_eq!(m.rpc_errors.load(Relaxed), 0, "{id}: IPC errors");
        eprintln!(
            "{protection}: {id} RUNNING, {} heartbeats ok",
            m.heartbeats_ok.load(Relaxed)
        );
    }
    for a in agents {
        a.stop();
        assert_eq!(a.join(), ExitReason::Stopped);
    }
    // the unregistrations (over KERBEROS too) reached the RM
    for id in &ids {
        wait_for(
            &format!("{id} SHUTDOWN after unregistering"),
            Duration::from_secs(20),
            || {
                let r = rm.command("nodes").unwrap();
                node(&r["inactive"], id).is_some_and(|n| n["state"] == "SHUTDOWN")
            },
        );
    }
    if protection == "authentication" {
        refusals(&mut rm, &k);
    }
    if protection == "integrity" {
        into_hotpath_rm(&k, protection);
    }
}

/// The same agent into `hotpath rm`, Kerberized with the Java RM's keytab (`rm/localhost`), at
/// `protection`: the RM's log names the agent's principal, KERBEROS and the QOP.
fn into_hotpath_rm(k: &Krb, protection: &str) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("rm.log");
    let rm = support::start_rm(
        dir.path(),
        &[
            "hadoop.security.authentication=kerberos".into(),
            format!("yarn.resourcemanager.principal=rm/_HOST@{}", k.realm),
            format!("yarn.resourcemanager.keytab={}", k.rm_keytab.display()),
            format!("hadoop.rpc.protection={protection}"),
            "yarn.resourcemanager.nodemanagers.heartbeat-interval-ms=500".into(),
        ],
        "info,ipc=debug",
        std::fs::File::create(&log).unwrap().into(),
    );
    let metric = |name: &str| support::metric(&rm.metrics, name) as u64;
    let adir = tempfile::tempdir().unwrap();
    let a = Agent::start(agent_config(
        rm.tracker.parse().unwrap(),
        adir.path(),
        &agent_keys(k, protection, &format!("nm/_HOST@{}", k.realm)),
    ))
    .expect("agent into hotpath rm");
    wait_for(
        "registration and heartbeats at hotpath rm",
        Duration::from_secs(30),
        || {
            metric("hotpath_rm_registrations_total") == 1
                && metric("hotpath_rm_heartbeats_total") >= 3
        },
    );
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let line = format!(
        "SASL: {} authenticated by KERBEROS at auth-int",
        k.nm_host_principal
    );
    assert!(text.contains(&line), "no {line:?} in the RM log:\n{text}");
    assert_eq!(a.shared().metrics.rpc_errors.load(Relaxed), 0);
    a.stop();
    assert_eq!(a.join(), ExitReason::Stopped);
    wait_for("the unregistration", Duration::from_secs(10), || {
        metric("hotpath_rm_unregistrations_total") == 1
    });
    eprintln!("{protection}: the agent registered with hotpath rm over KERBEROS");
}

/// The refused cases, against a running Kerberized RM.
fn refusals(rm: &mut Peer, k: &Krb) {
    let rt = rm.resource_tracker_addr().unwrap();
    let nm = format!("nm/localhost@{}", k.realm);

    // a keytab without the principal: the agent does not start
    let dir = tempfile::tempdir().unwrap();
    let mut keys = agent_keys(k, "authentication", &nm);
    keys[3].1 = k.rm_keytab.display().to_string();
    let e = Agent::start(agent_config(rt, dir.path(), &keys))
        .err()
        .expect("a keytab without nm/localhost")
        .to_string();
    eprintln!("keytab without the principal: {e}");
    assert!(
        e.contains(&format!(
            "the agent's Kerberos login (yarn.nodemanager.principal = {nm}, \
             yarn.nodemanager.keytab = {}) failed",
            k.rm_keytab.display()
        )) && e.contains(&format!("the keytab holds no key for {nm}")),
        "{e}"
    );
    // ... and `hotpath agent` exits with it
    let mut cmd = Command::new(support::hotpath_exe());
    cmd.args(["agent", "--rm", &rt.to_string(), "--node", "127.0.0.1:0"])
        .arg("--control-socket")
        .arg(dir.path().join("agent.sock"));
    for (key, v) in &keys {
        cmd.arg("--set").arg(format!("{key}={v}"));
    }
    let out = cmd
        .env("KRB5_CONFIG", &k.krb5_conf)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .expect("hotpath agent");
    let err = String::from_utf8_lossy(&out.stderr);
    let mut first = String::new();
    BufReader::new(&out.stdout[..])
        .read_line(&mut first)
        .unwrap();
    assert!(
        !out.status.success() && !first.starts_with("READY"),
        "{first}"
    );
    assert!(
        err.contains("yarn.nodemanager.principal = ") && err.contains("yarn.nodemanager.keytab = "),
        "{err}"
    );

    // a server principal the RM does not have: one attempt, then the agent stops
    let dir = tempfile::tempdir().unwrap();
    let mut keys = agent_keys(k, "authentication", &nm);
    keys[4].1 = format!("nm/_HOST@{}", k.realm);
    let t0 = Instant::now();
    let a = Agent::start(agent_config(rt, dir.path(), &keys)).expect("the login itself works");
    let m = a.shared().clone();
    let reason = a.join();
    let took = t0.elapsed();
    eprintln!("wrong RM principal after {took:?}: {reason:?}");
    let ExitReason::AuthFailed(why) = reason else {
        panic!("{reason:?}")
    };
    assert!(
        why.contains(&format!(
            "Server has invalid Kerberos principal: rm/localhost@{r}, expecting: nm/localhost@{r}",
            r = k.realm
        )),
        "{why}"
    );
    assert_eq!(m.metrics.registration_failures.load(Relaxed), 1);
    assert!(took < Duration::from_secs(10), "{took:?}");
    let reported = m.status.lock().unwrap().stopped_reason.clone();
    assert!(
        reported
            .as_deref()
            .is_some_and(|r| r.contains("Server has invalid Kerberos principal")),
        "the status names why: {reported:?}"
    );

    // an agent that asks only for privacy from an RM that offers only authentication
    let dir = tempfile::tempdir().unwrap();
    let a = Agent::start(agent_config(rt, dir.path(), &agent_keys(k, "privacy", &nm)))
        .expect("the login itself works");
    let reason = a.join();
    eprintln!("no common protection: {reason:?}");
    let ExitReason::AuthFailed(why) = reason else {
        panic!("{reason:?}")
    };
    assert!(why.contains("javax.security.sasl.SaslException"), "{why}");

    // an agent without Kerberos: the RM refuses SIMPLE
    let dir = tempfile::tempdir().unwrap();
    let a = Agent::start(agent_config(rt, dir.path(), &[])).unwrap();
    let reason = a.join();
    eprintln!("SIMPLE agent: {reason:?}");
    let ExitReason::AuthFailed(why) = reason else {
        panic!("{reason:?}")
    };
    assert!(
        why.contains("SIMPLE authentication is not enabled"),
        "{why}"
    );
    // none of them became a node
    let r = rm.command("nodes").unwrap();
    assert_eq!(r["nodes"].as_array().map(Vec::len), Some(0), "{r}");
}

/// The tests of this binary one at a time (`KRB5_CONFIG` names one peer's KDC).
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "warn,agent=info".into()),
        )
        .with_test_writer()
        .try_init();
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[test]
fn agents_join_a_kerberized_java_rm_at_every_protection_level() {
    let _g = serial();
    for protection in ["authentication", "integrity", "privacy"] {
        agents_at_level(protection);
    }
}
