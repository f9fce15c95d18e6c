//! `hotpath demo` in its default mode runs real applications: rm-core with its client and
//! scheduler protocols, four agents launching real processes, and `hotpath app run` children
//! whose ApplicationMasters the RM launches on the agents. Nothing simulated.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

#[test]
fn the_demo_runs_real_applications_to_success_and_loses_no_completion() {
    let t0 = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_hotpath"))
        .args(["demo", "--json", "--applications", "3", "--concurrent", "2"])
        .args(["--containers", "4", "--command", "echo $CONTAINER_ID"])
        .args(["--duration", "120"])
        .output()
        .expect("running hotpath demo");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "demo failed: {stderr}");
    let line = String::from_utf8_lossy(&out.stdout);
    let r: Value = serde_json::from_str(line.trim()).unwrap_or_else(|e| panic!("{e}: {line}"));
    assert_eq!(r["applications"], 3, "{r}");
    assert_eq!(r["applications_succeeded"], 3, "{r}");
    assert_eq!(r["nodes_registered"], 4, "{r}");
    // Each application: its AM container and 4 shell containers, every completion acknowledged
    // by the RM and in its completion log exactly once.
    assert_eq!(r["containers_completed"], 15, "{r}");
    assert_eq!(r["completions_acked"], 15, "{r}");
    assert_eq!(r["completions_in_log"], 15, "{r}");
    assert_eq!(r["lost_completions"], 0, "{r}");
    assert_eq!(r["duplicate_log_records"], 0, "{r}");
    assert!(
        t0.elapsed() < Duration::from_secs(110),
        "{:?}",
        t0.elapsed()
    );
}
