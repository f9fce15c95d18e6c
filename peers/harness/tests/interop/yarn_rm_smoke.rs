//! The YARN side of the real-Hadoop peer: a ResourceManager lists its nodes, and real
//! NodeManagers (in the RM's JVM, or in a `yarn-nm` peer) register, heartbeat and unregister.

use std::net::TcpStream;
use std::thread;
use std::time::{Duration, Instant};

use peer_harness::{Mode, Peer};
use serde_json::Value;

fn nodes(rm: &mut Peer) -> (Vec<Value>, Vec<Value>) {
    let r = rm.command("nodes").expect("nodes");
    let list = |k: &str| r[k].as_array().cloned().expect("node list");
    (list("nodes"), list("inactive"))
}

/// Polls `nodes` until `pred` holds (heartbeats are asynchronous) or 60 s pass.
fn wait_nodes(rm: &mut Peer, what: &str, pred: impl Fn(&[Value], &[Value]) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (active, inactive) = nodes(rm);
        if pred(&active, &inactive) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not reached in 60 s; nodes {active:?} inactive {inactive:?}"
        );
        thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn rm_without_nodes_then_a_separate_nodemanager_registers_and_unregisters() {
    // a short NM expiry, so that a killed NodeManager is LOST within seconds
    let mut rm = Peer::start(
        Mode::YarnRm,
        &["--set", "yarn.nm.liveness-monitor.expiry-interval-ms=3000"],
    )
    .expect("yarn-rm peer");
    assert_eq!(rm.ready()["nm_expiry_ms"], 3000);
    eprintln!("yarn-rm --nms 0 READY after {:?}", rm.startup_time());
    let (active, inactive) = nodes(&mut rm);
    assert!(
        active.is_empty() && inactive.is_empty(),
        "{active:?} {inactive:?}"
    );
    let rt = rm
        .resource_tracker_addr()
        .expect("resource tracker address");
    TcpStream::connect(rt).expect("resource tracker accepts TCP");
    let yarn_site = std::fs::read_to_string(rm.conf_dir().join("yarn-site.xml")).expect("site");
    assert!(yarn_site.contains(&rt.to_string()), "{yarn_site}");

    let rm_arg = rt.to_string();
    let mut nm = Peer::start(Mode::YarnNm, &["--rm", &rm_arg]).expect("yarn-nm peer");
    eprintln!("yarn-nm READY after {:?}", nm.startup_time());
    let node_id = nm.field_str("node_id").expect("node_id").to_owned();
    assert_eq!(nm.field_str("state").expect("state"), "STARTED");

    wait_nodes(&mut rm, "NM RUNNING", |a, _| {
        a.len() == 1 && a[0]["node_id"] == node_id.as_str() && a[0]["state"] == "RUNNING"
    });
    let (active, _) = nodes(&mut rm);
    let n = &active[0];
    assert!(n["memory_mb"].as_i64().expect("memory") > 0, "{n}");
    assert!(n["vcores"].as_i64().expect("vcores") > 0, "{n}");
    assert_eq!(n["nm_version"], "3.5.0");
    assert!(
        n["last_heartbeat_ms_ago"].as_i64().expect("last ping") < 30_000,
        "{n}"
    );

    // a stopped NodeManager unregisters: the RM moves it to its inactive nodes as SHUTDOWN
    let stopped = nm.command("nm-stop").expect("nm-stop");
    assert_eq!(stopped["state"], "STOPPED");
    wait_nodes(&mut rm, "NM SHUTDOWN", |a, i| {
        a.is_empty()
            && i.len() == 1
            && i[0]["node_id"] == node_id.as_str()
            && i[0]["state"] == "SHUTDOWN"
    });

    // and one started again on the same port comes back as the same node
    let restarted = nm.command("nm-start").expect("nm-start");
    assert_eq!(restarted["node_id"], node_id.as_str());
    wait_nodes(&mut rm, "NM RUNNING again", |a, _| {
        a.len() == 1 && a[0]["node_id"] == node_id.as_str() && a[0]["state"] == "RUNNING"
    });

    // a NodeManager that dies without a word expires: LOST
    nm.kill();
    wait_nodes(&mut rm, "NM LOST", |a, i| {
        a.is_empty()
            && i.len() == 1
            && i[0]["node_id"] == node_id.as_str()
            && i[0]["state"] == "LOST"
    });
}

#[test]
fn rm_with_its_own_nodemanager_lists_it_running_and_heartbeating() {
    let mut rm = Peer::start(Mode::YarnRm, &["--nms", "1"]).expect("yarn-rm --nms 1");
    eprintln!("yarn-rm --nms 1 READY after {:?}", rm.startup_time());
    let nms = rm.ready()["nms"].as_array().cloned().expect("nms");
    assert_eq!(nms.len(), 1, "{nms:?}");
    let node_id = nms[0]["node_id"].as_str().expect("node_id").to_owned();
    wait_nodes(&mut rm, "NM RUNNING", |a, _| {
        a.len() == 1 && a[0]["node_id"] == node_id.as_str() && a[0]["state"] == "RUNNING"
    });
    // heartbeats keep coming (1 s interval): the RM's response id grows
    wait_nodes(&mut rm, "three heartbeats", |a, _| {
        a.len() == 1 && a[0]["response_id"].as_i64().unwrap_or(0) >= 3
    });
    let unknown = rm
        .command("no-such-command")
        .expect_err("unknown command fails");
    assert!(unknown.to_string().contains("unknown command"), "{unknown}");
    // the peer still answers after an error
    rm.command("ping").expect("ping");
}
