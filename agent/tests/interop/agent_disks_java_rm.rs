//! Our agent's NodeId and disk health as the Java ResourceManager and Hadoop's own `yarn node`
//! CLI (NodeCLI) see them, beside a Java NodeManager of the same MiniYARNCluster.
//!
//! - NodeId host: configured as MiniYARNCluster configures its NMs (`yarn.nodemanager.address
//!   = localhost:0`), the agent registers the canonical name of the bound IP, computed here
//!   from the system resolver, and the same host the Java NM registered.
//! - Disk health: two local dirs; one made bad (a file where the dir should be) leaves the node
//!   RUNNING with Java's report; both bad make it UNHEALTHY (`yarn node -status` shows the state
//!   and the report, `yarn node -list -all` lists it UNHEALTHY); repaired, RUNNING again with an
//!   empty report.

use std::path::Path;
use std::time::{Duration, Instant};

use conf::Configuration;
use nm_runtime::config::AgentConfig;
use nm_runtime::node_host::{canonical_host_name, SystemResolver};
use nm_runtime::Agent;
use peer_harness::{Mode, Peer};
use serde_json::Value;

fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < timeout, "{what}: not within {timeout:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn node(rm: &mut Peer, id: &str) -> Option<Value> {
    let r = rm.command("nodes").ok()?;
    r["nodes"]
        .as_array()?
        .iter()
        .find(|n| n["node_id"] == id)
        .cloned()
}

fn cli(client: &mut Peer, args: &str) -> String {
    let v = client
        .command(&format!("cli {args}"))
        .unwrap_or_else(|e| panic!("cli {args}: {e}"));
    assert_eq!(v["exit_code"], 0, "{v}");
    format!(
        "{}{}",
        v["stdout"].as_str().unwrap_or(""),
        v["stderr"].as_str().unwrap_or("")
    )
}

/// Makes `dir` bad: a file where the directory was.
fn break_dir(dir: &Path) {
    std::fs::remove_dir_all(dir).unwrap();
    std::fs::write(dir, b"not a directory").unwrap();
}

fn repair_dir(dir: &Path) {
    std::fs::remove_file(dir).unwrap();
}

#[test]
fn java_rm_and_yarn_node_cli_show_our_nodeid_host_and_disk_health_as_for_a_java_nm() {
    let mut rm =
        Peer::start(Mode::YarnRm, &["--nms", "1", "--log-level", "ERROR"]).expect("yarn-rm peer");
    let rt = rm.resource_tracker_addr().expect("resource tracker");
    let java_nm = rm.ready()["nms"][0]["node_id"]
        .as_str()
        .expect("the Java NM's node id")
        .to_string();
    let rm_addr = rm.field_str("rm_address").unwrap().to_string();
    let sched = rm.field_str("scheduler_address").unwrap().to_string();
    let mut client = Peer::start(Mode::YarnClient, &["--rm", &rm_addr, "--scheduler", &sched])
        .expect("yarn-client peer");

    let dir = tempfile::tempdir().unwrap();
    let (l1, l2) = (dir.path().join("l1"), dir.path().join("l2"));
    let mut conf = Configuration::new();
    for (k, v) in [
        (
            "yarn.resourcemanager.resource-tracker.address",
            rt.to_string(),
        ),
        // as MiniYARNCluster sets it for its NMs
        ("yarn.nodemanager.address", "localhost:0".into()),
        ("yarn.nodemanager.webapp.address", "127.0.0.1:0".into()),
        (
            "yarn.nodemanager.local-dirs",
            format!("{},{}", l1.display(), l2.display()),
        ),
        (
            "yarn.nodemanager.log-dirs",
            dir.path().join("logs").display().to_string(),
        ),
        (
            "yarn.nodemanager.disk-health-checker.interval-ms",
            "200".into(),
        ),
        // the disks of the machine running the test may be fuller than 90 %
        (
            "yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage",
            "100".into(),
        ),
        ("yarn.nodemanager.resource.memory-mb", "4096".into()),
        ("yarn.nodemanager.resource.cpu-vcores", "4".into()),
        (
            "hotpath.agent.control-socket",
            dir.path().join("agent.sock").display().to_string(),
        ),
    ] {
        conf.set(k, &v);
    }
    let mut cfg = AgentConfig::from_conf(&conf).expect("agent config");
    cfg.pin = false;
    cfg.nm.cgroups = false;
    cfg.nm.zygotes = 0;
    let agent = Agent::start(cfg).expect("agent starts");
    let id = agent.node_id();
    let (host, _) = id.rsplit_once(':').unwrap();

    // NodeId host: the canonical name of 127.0.0.1 (localhost resolves there), as Java's
    // getCanonicalHostName gives it, and what the Java NM registered.
    let expected = canonical_host_name(&SystemResolver, "127.0.0.1".parse().unwrap());
    assert_eq!(host, expected, "our NodeId {id}");
    let (java_host, _) = java_nm.rsplit_once(':').unwrap();
    assert_eq!(host, java_host, "ours {id}, the Java NM's {java_nm}");

    wait_for("our node RUNNING", Duration::from_secs(60), || {
        node(&mut rm, &id).is_some_and(|n| n["state"] == "RUNNING")
    });
    let n = node(&mut rm, &id).unwrap();
    assert_eq!(n["host"], expected, "{n}");
    assert_eq!(n["health_report"], "", "{n}");
    let out = cli(&mut client, "node -list -all");
    assert!(out.contains("Total Nodes:2"), "{out}");
    assert!(out.contains(&id) && out.contains(&java_nm), "{out}");

    // one bad dir of two: RUNNING, Java's report
    break_dir(&l1);
    let one_bad = format!(
        "1/2 local-dirs have errors:  [ {0} : Not a directory: {0} ] ",
        l1.display()
    );
    wait_for("the report of one bad dir", Duration::from_secs(30), || {
        node(&mut rm, &id).is_some_and(|n| n["health_report"] == one_bad.as_str())
    });
    assert_eq!(node(&mut rm, &id).unwrap()["state"], "RUNNING");
    let out = cli(&mut client, &format!("node -status {id}"));
    assert!(out.contains("Node-State : RUNNING"), "{out}");
    assert!(out.contains(&format!("Health-Report : {one_bad}")), "{out}");

    // both bad: UNHEALTHY
    break_dir(&l2);
    wait_for("UNHEALTHY", Duration::from_secs(30), || {
        node(&mut rm, &id).is_some_and(|n| n["state"] == "UNHEALTHY")
    });
    let n = node(&mut rm, &id).unwrap();
    let report = n["health_report"].as_str().unwrap().to_string();
    assert!(report.starts_with("2/2 local-dirs have errors:  [ "), "{n}");
    let out = cli(&mut client, &format!("node -status {id}"));
    assert!(out.contains("Node-State : UNHEALTHY"), "{out}");
    assert!(out.contains(&format!("Health-Report : {report}")), "{out}");
    let out = cli(&mut client, "node -list -all");
    let line = out.lines().find(|l| l.contains(&id)).unwrap_or("");
    assert!(line.contains("UNHEALTHY"), "{out}");
    let out = cli(&mut client, "node -list -states UNHEALTHY");
    assert!(out.contains(&id) && !out.contains(&java_nm), "{out}");

    // repaired: RUNNING, empty report
    repair_dir(&l1);
    repair_dir(&l2);
    wait_for("RUNNING again", Duration::from_secs(30), || {
        node(&mut rm, &id).is_some_and(|n| n["state"] == "RUNNING" && n["health_report"] == "")
    });
    let out = cli(&mut client, &format!("node -status {id}"));
    assert!(out.contains("Node-State : RUNNING"), "{out}");
    drop(agent);
}
