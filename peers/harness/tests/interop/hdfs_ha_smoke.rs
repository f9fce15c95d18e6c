//! `hdfs-ha`: active, standby and observer NameNodes in one JVM; the Java client with
//! ObserverReadProxyProvider (from the written hdfs-site.xml) reads from the observer.

use peer_harness::{Driver, Mode, Peer};
use serde_json::Value;

fn rpc_requests(peer: &mut Peer, state: &str) -> u64 {
    let r = peer.command("namenodes").expect("namenodes");
    r["namenodes"]
        .as_array()
        .expect("namenodes")
        .iter()
        .find(|n| n["state"] == state)
        .and_then(|n| n["rpc_requests"].as_u64())
        .unwrap_or_else(|| panic!("no {state} NameNode in {r}"))
}

#[test]
fn observer_serves_the_java_clients_reads() {
    let mut peer = Peer::start(Mode::HdfsHa, &[]).expect("hdfs-ha peer");
    eprintln!("hdfs-ha READY after {:?}", peer.startup_time());
    let nns = peer.ready()["namenodes"]
        .as_array()
        .cloned()
        .expect("namenodes");
    let states: Vec<&str> = nns.iter().filter_map(|n| n["state"].as_str()).collect();
    assert_eq!(states, ["active", "standby", "observer"]);
    for s in ["active", "standby", "observer"] {
        peer.addr(s).expect("address of each NameNode");
    }
    let site = std::fs::read_to_string(peer.conf_dir().join("hdfs-site.xml")).expect("site");
    assert!(site.contains("dfs.ha.namenodes.hotpath-ns"), "{site}");
    assert!(site.contains("ObserverReadProxyProvider"), "{site}");

    peer.command("mkfiles /ha 50").expect("mkfiles");
    let before = rpc_requests(&mut peer, "observer");
    let fs: Value = peer
        .run_driver(
            Driver::FileStatus,
            &[
                "--threads",
                "1",
                "--files",
                "50",
                "--dir",
                "/ha",
                "--duration",
                "1",
                "--warmup",
                "0",
            ],
        )
        .expect("FileStatusDriver through the nameservice");
    assert_eq!(fs["errors"], 0, "{fs}");
    let ops = fs["ops"].as_u64().expect("ops");
    let after = rpc_requests(&mut peer, "observer");
    assert!(
        after - before >= ops,
        "observer served {} of {ops} calls",
        after - before
    );
}
