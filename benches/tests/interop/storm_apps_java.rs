//! `hotpath-bench storm-apps --target java`: the same generator against the real Java
//! ResourceManager (peer `yarn-rm --profile agents`, Hadoop 3.5, FIFO, log level ERROR), small
//! and short: 20 simulated nodes × 5 task containers of 4 simulated ApplicationMasters, 10
//! completions/s for 3 s. Java's AMLauncher starts each AM container on its simulated node
//! (NMToken over SASL DIGEST-MD5 to the nodes' ContainerManagementProtocol server); the AMs
//! allocate with their AMRMTokens and start their containers on the nodes the RM chose. Every
//! completion a node sent must reach its AM exactly once, and after the drain the configured
//! containers run again. One JVM; about 40–60 s on an idle machine, 85 s measured beside
//! other builds (most of it the JVM and MiniYARNCluster start).

use std::process::Command;

use serde_json::Value;

#[test]
fn storm_apps_against_the_java_rm_delivers_every_completion_once() {
    let (nodes, apps, per_node) = (20u64, 4u64, 5u64);
    let out = Command::new(env!("CARGO_BIN_EXE_hotpath-bench"))
        .args(["storm-apps", "--json", "--no-baselines", "--target", "java"])
        .args(["--nodes", &nodes.to_string(), "--apps", &apps.to_string()])
        .args(["--containers-per-node", &per_node.to_string()])
        .args(["--churn", "10", "--duration", "3", "--interval-ms", "500"])
        .args(["--am-interval-ms", "500", "--fill-timeout", "60"])
        .args(["--drain-timeout", "20"])
        .env("HOTPATH_LOG", "warn")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    eprintln!("{v}");
    assert_eq!(v["target"], "java", "{v}");
    let n = |k: &str| {
        v[k].as_u64()
            .unwrap_or_else(|| panic!("{k} missing or not a count: {v}"))
    };
    assert_eq!(n("apps"), apps, "AMs registered: {v}");
    assert_eq!(n("am_containers_started"), apps, "{v}");
    assert!(n("completions_sent") > 0, "no churn: {v}");
    assert_eq!(
        n("completions_sent"),
        n("completions_delivered"),
        "completions lost on the way to the AMs: {v}"
    );
    assert_eq!(n("completions_duplicated"), 0, "{v}");
    assert_eq!(n("completions_unsent"), 0, "{v}");
    assert_eq!(v["drained"], true, "{v}");
    assert_eq!(v["refilled"], true, "{v}");
    assert_eq!(
        n("live_task_containers_after_drain"),
        nodes * per_node,
        "{v}"
    );
    for k in [
        "hb_errors",
        "resyncs",
        "shutdowns",
        "cmp_start_failures",
        "am_errors",
    ] {
        assert_eq!(n(k), 0, "{k}: {v}");
    }
    assert!(v["hb_per_s"].as_f64().unwrap() > 0.0, "{v}");
}
