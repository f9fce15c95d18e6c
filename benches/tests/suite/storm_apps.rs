//! `hotpath-bench storm-apps` against `hotpath rm` (its own child), small and short: 40
//! simulated nodes × 10 task containers of 8 simulated ApplicationMasters, 40 completions/s for 3
//! s. Every container is the RM's (allocated through `allocate`, started on its node through
//! ContainerManagementProtocol, reported RUNNING by that node); every completion a node sent
//! must reach its AM exactly once, none may reach an AM that no node sent (a container the RM
//! declared lost), and after the drain the AMs hold the configured containers again. It fails
//! today if the RM loses or repeats completions — that is the point. About 10–20 s.

use crate::support;

use std::process::Command;

use serde_json::Value;

#[test]
fn storm_apps_delivers_every_completion_once() {
    let (nodes, apps, per_node) = (40u64, 8u64, 10u64);
    let out = Command::new(env!("CARGO_BIN_EXE_hotpath-bench"))
        .args(["storm-apps", "--json", "--no-baselines"])
        .args(["--nodes", &nodes.to_string(), "--apps", &apps.to_string()])
        .args(["--containers-per-node", &per_node.to_string()])
        .args(["--churn", "40", "--duration", "3", "--interval-ms", "500"])
        .args(["--am-interval-ms", "500", "--fill-timeout", "30"])
        .args(["--drain-timeout", "15"])
        .arg("--hotpath-bin")
        .arg(support::hotpath_exe())
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
    assert_eq!(
        n("completions_unsent"),
        0,
        "the RM completed containers no node did: {v}"
    );
    assert_eq!(v["drained"], true, "{v}");
    assert_eq!(v["refilled"], true, "{v}");
    assert_eq!(
        n("live_task_containers_after_drain"),
        nodes * per_node,
        "{v}"
    );
    assert_eq!(n("live_am_containers_after_drain"), apps, "{v}");
    for k in [
        "hb_errors",
        "resyncs",
        "shutdowns",
        "cmp_start_failures",
        "duplicate_starts",
    ] {
        assert_eq!(n(k), 0, "{k}: {v}");
    }
    for k in ["start_call_errors", "am_errors", "apps_to_cleanup"] {
        assert_eq!(n(k), 0, "{k}: {v}");
    }
    let hb = v["hb_per_s"].as_f64().unwrap();
    assert!((hb - 80.0).abs() < 8.0, "{hb} hb/s, target 80: {v}");
    assert!(v["p99_us"].as_u64().unwrap() > 0, "{v}");
    assert!(v["allocate_p99_us"].as_u64().unwrap() > 0, "{v}");
}
