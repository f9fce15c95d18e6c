//! RESYNC as Java's NodeManager handles it (production.md §1.6), against the embedded RM
//! restarted on the same address (it no longer knows the node, so the first heartbeat is answered
//! RESYNC): by default (`yarn.resourcemanager.work-preserving-recovery.enabled=true`) the agent
//! keeps its containers and re-registers them; with it false in the agent's configuration, it
//! kills every live container first and re-registers their final statuses.

use std::process::Command;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use agent::demo::{Cluster, DemoConfig};
use nm_runtime::{Agent, AgentConfig};

fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < timeout, "{what}: not within {timeout:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn cli(sock: &std::path::Path, args: &[&str]) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_hotpath"))
        .arg("container")
        .arg("--socket")
        .arg(sock)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null)
}

fn resync_once(work_preserving: bool, ip: &str) -> serde_json::Value {
    let mut c = Cluster::start(DemoConfig {
        agents: 0,
        heartbeat_ms: 200,
        ..DemoConfig::default()
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = AgentConfig::local(c.rm_addr(), ip.parse().unwrap(), dir.path()).unwrap();
    cfg.cleanup_grace = Duration::from_millis(500);
    cfg.nm.work_preserving_recovery = work_preserving;
    let a = Agent::start(cfg).unwrap();
    let sh = a.shared().clone();
    let sock = a.control_path().unwrap().to_owned();
    wait_for("registered", Duration::from_secs(10), || {
        sh.metrics.heartbeats_ok.load(Relaxed) >= 2
    });
    let cid = "container_1700000000000_0009_01_000002";
    cli(&sock, &["launch", cid, "--running"]);
    let hb = sh.metrics.heartbeats_ok.load(Relaxed);
    wait_for("the RM saw it", Duration::from_secs(5), || {
        sh.metrics.heartbeats_ok.load(Relaxed) >= hb + 2
    });
    let before = cli(&sock, &["status"]);
    c.stop_rm();
    c.start_rm_again().unwrap();
    wait_for(
        "resynced and registered again",
        Duration::from_secs(20),
        || {
            sh.metrics.resyncs.load(Relaxed) >= 1
                && sh.metrics.registrations.load(Relaxed) >= 2
                && sh.metrics.heartbeats_ok.load(Relaxed) >= hb + 4
        },
    );
    let after = cli(&sock, &["status"]);
    assert_eq!(after["resyncs"], 1, "{after}");
    assert_eq!(after["phase"], "registered", "{after}");
    assert_eq!(before["rm_failovers"], 0, "no HA here: {before}");
    let list = cli(&sock, &["list"]);
    serde_json::json!({"after": after, "list": list})
}

#[test]
fn resync_keeps_containers_by_default() {
    let v = resync_once(true, "127.0.0.71");
    assert_eq!(v["list"]["containers"][0]["state"], "RUNNING", "{v}");
    assert_eq!(v["after"]["totals"]["cleanup_orders"], 0, "{v}");
}

#[test]
fn resync_kills_containers_first_when_work_preserving_recovery_is_off() {
    let v = resync_once(false, "127.0.0.72");
    // killed before the re-registration (nobody serves this control-socket container, so the
    // agent completes it itself after the cleanup grace), its final status re-registered and
    // acknowledged by the new RM, then forgotten
    let t = &v["after"]["totals"];
    assert_eq!(t["cleanup_orders"], 1, "{v}");
    assert_eq!(t["cleanup_forced"], 1, "{v}");
    assert_eq!(t["completed"], 1, "{v}");
    assert_eq!(v["list"]["containers"], serde_json::json!([]), "{v}");
}
