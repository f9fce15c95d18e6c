//! Interop with the real Java ResourceManager (Hadoop 3.5, peer `yarn-rm`).
//!
//! Our agent registers, the RM lists the node RUNNING with our resources, and heartbeats
//! advance for `HOTPATH_INTEROP_SECS` seconds (default 30) across container-token and
//! NM-token master-key rolls (NM expiry 3 s, rolling interval 10 s: the RM requires the roll
//! interval to exceed 3 × the expiry) without a single IPC error. Then our agent reports a
//! RUNNING container of an application the RM does not know: within a few heartbeats the RM
//! answers with the application in `applications_to_cleanup` and the container in
//! `containers_to_cleanup` (trap 2), and the order reaches the executor on the control socket.
//! Finally a graceful stop unregisters: the RM moves the node to SHUTDOWN.

use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use nm_core::health::HealthConfig;
use nm_runtime::config::AgentConfig;
use nm_runtime::control::ControlClient;
use nm_runtime::{Agent, ExitReason};
use peer_harness::{Mode, Peer};
use serde_json::{json, Value};

const EXPIRY_MS: u64 = 3000;
const ROLL_SECS: u64 = 10;

fn node<'a>(nodes: &'a Value, id: &str) -> Option<&'a Value> {
    nodes.as_array()?.iter().find(|n| n["node_id"] == id)
}

fn config(rm: std::net::SocketAddr, dir: &std::path::Path) -> AgentConfig {
    AgentConfig {
        rm_addr: rm,
        rm_ha: None,
        bind_ip: "127.0.0.1".parse().unwrap(),
        node_host: "127.0.0.1".into(),
        node_port: 0,
        http_port: Some(0),
        memory_mb: 6144,
        vcores: 6,
        connect_max_wait: Some(Duration::from_secs(60)),
        retry_interval: Duration::from_millis(500),
        track_stopped_ms: 600_000,
        default_interval_ms: 1000,
        call_timeout: Duration::from_secs(10),
        control_socket: Some(dir.join("agent.sock")),
        cleanup_grace: Duration::from_secs(120),
        max_containers: 1000,
        health: HealthConfig {
            local_dirs: vec![dir.join("local")],
            max_utilization_percent: 100.0,
            script_timeout: Duration::from_secs(60),
            ..HealthConfig::default()
        },
        simulate: None,
        pin: true,
        ipc_server: true,
        ipc_pool_chunks: 16,
        journal: false,
        default_fs: "file:///".into(),
        hdfs: None,
        ipc_port: 0,
        nm: AgentConfig::local(rm, "127.0.0.1".parse().unwrap(), dir)
            .unwrap()
            .nm,
        rm_security: Default::default(),
        rm_max_idle: None,
    }
}

#[test]
fn java_rm_runs_our_node_across_key_rolls_and_cleans_up_an_unknown_application() {
    let secs: u64 = std::env::var("HOTPATH_INTEROP_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    let expiry = format!("yarn.nm.liveness-monitor.expiry-interval-ms={EXPIRY_MS}");
    let roll_c = format!(
        "yarn.resourcemanager.container-tokens.master-key-rolling-interval-secs={ROLL_SECS}"
    );
    let roll_n =
        format!("yarn.resourcemanager.nm-tokens.master-key-rolling-interval-secs={ROLL_SECS}");
    let mut rm = Peer::start(
        Mode::YarnRm,
        &[
            "--nms",
            "0",
            "--set",
            &expiry,
            "--set",
            &roll_c,
            "--set",
            &roll_n,
            "--log-level",
            "ERROR",
        ],
    )
    .expect("yarn-rm peer");
    eprintln!("yarn-rm READY after {:?}", rm.startup_time());
    let rt = rm
        .resource_tracker_addr()
        .expect("resource tracker address");
    let dir = tempfile::tempdir().unwrap();
    let t0 = Instant::now();
    let agent = Agent::start(config(rt, dir.path())).expect("agent starts");
    let id = agent.node_id();
    let shared = agent.shared().clone();

    // registered and RUNNING with our resources
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = rm.command("nodes").expect("nodes");
        if let Some(n) = node(&r["nodes"], &id) {
            if n["state"] == "RUNNING" {
                assert_eq!(n["memory_mb"], 6144, "{n}");
                assert_eq!(n["vcores"], 6, "{n}");
                break;
            }
        }
        assert!(Instant::now() < deadline, "node {id} not RUNNING: {r}");
        std::thread::sleep(Duration::from_millis(100));
    }
    // the RM lists the node as soon as it has answered; our side publishes just after
    let deadline = Instant::now() + Duration::from_secs(5);
    while shared.status.lock().unwrap().phase != "registered" {
        assert!(
            Instant::now() < deadline,
            "agent never saw its registration answered"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let reg_ms = agent_reg_ms(&shared);
    eprintln!(
        "registered {reg_ms:?} ms after start; RUNNING seen after {:?}",
        t0.elapsed()
    );
    let key0 = {
        let s = shared.status.lock().unwrap();
        (s.container_key_id, s.nm_key_id)
    };
    assert!(
        key0.0.is_some() && key0.1.is_some(),
        "registration gave keys: {key0:?}"
    );

    // heartbeats advance for `secs` seconds, across key rolls, without errors
    let run_start = Instant::now();
    let mut last_rid = -1i64;
    let mut advances = 0;
    while run_start.elapsed() < Duration::from_secs(secs) {
        std::thread::sleep(Duration::from_millis(2500));
        let r = rm.command("nodes").expect("nodes");
        let n = node(&r["nodes"], &id).unwrap_or_else(|| panic!("node gone: {r}"));
        assert_eq!(n["state"], "RUNNING", "{n}");
        assert!(
            n["last_heartbeat_ms_ago"].as_i64().unwrap() < EXPIRY_MS as i64,
            "{n}"
        );
        let rid = n["response_id"].as_i64().unwrap();
        assert!(
            rid > last_rid,
            "response id did not advance: {rid} after {last_rid}"
        );
        last_rid = rid;
        advances += 1;
    }
    let m = &shared.metrics;
    let (ok, fail, errs) = (
        m.heartbeats_ok.load(Relaxed),
        m.heartbeat_failures.load(Relaxed),
        m.rpc_errors.load(Relaxed),
    );
    let keys = {
        let s = shared.status.lock().unwrap();
        (s.container_key_id, s.nm_key_id)
    };
    eprintln!(
        "{secs} s: {ok} heartbeats ok, {fail} failed, {errs} IPC errors, RM response id {last_rid}, \
         keys {key0:?} -> {keys:?}, key changes {}",
        m.key_changes.load(Relaxed)
    );
    assert!(advances >= 3);
    assert_eq!(errs, 0, "IPC errors (trap 3: keys not echoed?)");
    assert_eq!(fail, 0);
    assert!(ok >= secs * 8 / 10, "{ok} heartbeats in {secs} s");
    if secs >= 3 * ROLL_SECS {
        assert_ne!(keys.0, key0.0, "container-token key rolled");
        assert_ne!(keys.1, key0.1, "NM-token key rolled");
    }
    assert_eq!(m.resyncs.load(Relaxed), 0);

    // trap 2: a RUNNING container of an application the RM does not know
    let sock = agent.control_path().unwrap().to_owned();
    let mut exec = ControlClient::connect(&sock).unwrap();
    exec.request(&json!({"op":"watch"})).unwrap();
    let cid = "container_1234567890123_0042_01_000001";
    exec.request(
        &json!({"op":"launch","container":cid,"running":true,"memory_mb":1024,"vcores":1}),
    )
    .unwrap();
    let hb0 = m.heartbeats_ok.load(Relaxed);
    let mut events = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while (m.containers_to_cleanup.load(Relaxed) == 0
        || m.applications_to_cleanup.load(Relaxed) == 0
        || m.heartbeats_ok.load(Relaxed) < hb0 + 3)
        && Instant::now() < deadline
    {
        if let Some(v) = exec.read_line(Some(Duration::from_millis(200))).unwrap() {
            events.push(v);
        }
    }
    let hbs = m.heartbeats_ok.load(Relaxed) - hb0;
    eprintln!(
        "after {hbs} heartbeats: applications_to_cleanup {} containers_to_cleanup {}; events {events:?}",
        m.applications_to_cleanup.load(Relaxed),
        m.containers_to_cleanup.load(Relaxed)
    );
    assert!(
        m.applications_to_cleanup.load(Relaxed) >= 1,
        "the RM named the unknown application"
    );
    assert!(
        m.containers_to_cleanup.load(Relaxed) >= 1,
        "the RM named the container"
    );
    while let Some(v) = exec.read_line(Some(Duration::from_millis(300))).unwrap() {
        events.push(v);
    }
    assert!(
        events
            .iter()
            .any(|e| e["event"] == "cleanup" && e["container"] == cid),
        "the executor got a cleanup order: {events:?}"
    );
    // the executor stops it; the completion is delivered in the next heartbeat
    exec.request(
        &json!({"op":"complete","container":cid,"exit_status":-106,"diagnostics":"killed"}),
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let l = exec.request(&json!({"op":"list"})).unwrap();
        let done = l["containers"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["delivery"] == "delivered");
        if done || l["containers"].as_array().unwrap().is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "completion not delivered: {l}");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(m.rpc_errors.load(Relaxed), 0);

    // a graceful stop unregisters
    agent.stop();
    assert_eq!(agent.join(), ExitReason::Stopped);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = rm.command("nodes").expect("nodes");
        if node(&r["inactive"], &id).is_some_and(|n| n["state"] == "SHUTDOWN") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "node not SHUTDOWN after unregistering: {r}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let log = rm.log_tail(200);
    assert!(!log.contains("NullPointerException"), "RM log: {log}");
}

fn agent_reg_ms(shared: &nm_runtime::shared::Shared) -> Option<u64> {
    shared.status.lock().unwrap().registered_after_ms
}
