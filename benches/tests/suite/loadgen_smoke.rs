//! `hotpath-bench loadgen heartbeats` against `hotpath rm` (separate processes), small and short:
//! every simulated node registers once, then the RM sees the paced rate (one heartbeat per node
//! per interval), with no error, resync or SHUTDOWN, and the loadgen's count agrees with the
//! RM's own `hotpath_rm_heartbeats_total` / `hotpath_rm_registrations_total`, and the RM
//! recorded the handling time of every heartbeat it answered.

use crate::support;

use std::process::Command;

use serde_json::Value;
use support::{metric, start_rm};

#[test]
fn loadgen_paces_and_agrees_with_the_rm() {
    let dir = tempfile::tempdir().unwrap();
    let rm = start_rm(dir.path(), &[], "warn", std::process::Stdio::inherit());
    let (tracker, metrics) = (rm.tracker.as_str(), rm.metrics.as_str());

    let (nodes, interval_ms, secs) = (200u64, 200u64, 3.0f64);
    let out = Command::new(env!("CARGO_BIN_EXE_hotpath-bench"))
        .args([
            "loadgen",
            "heartbeats",
            "--rm",
            tracker,
            "--json",
            "--connections",
            "3",
        ])
        .args([
            "--nodes",
            &nodes.to_string(),
            "--interval-ms",
            &interval_ms.to_string(),
        ])
        .args(["--duration", &secs.to_string(), "--metrics", metrics])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    eprintln!("{v}");
    for k in ["errors", "resyncs", "shutdowns"] {
        assert_eq!(v[k], 0, "{k}: {v}");
    }
    let target = (nodes * 1000 / interval_ms) as f64;
    let got = v["hb_per_s"].as_f64().unwrap();
    assert!(
        (got - target).abs() / target < 0.1,
        "{got} hb/s, target {target}"
    );
    assert!(v["p50_us"].as_u64().unwrap() > 0 && v["p99_us"].as_u64() >= v["p50_us"].as_u64());
    assert!(
        v["max_backlog"].as_u64().unwrap() <= nodes,
        "backlog beyond the node count: {v}"
    );

    assert_eq!(
        metric(metrics, "hotpath_rm_registrations_total") as u64,
        nodes
    );
    // The RM saw at least the measured window's heartbeats (plus warm-up and the tail).
    let rm_hb = metric(metrics, "hotpath_rm_heartbeats_total");
    assert!(
        rm_hb >= got * secs * 0.95,
        "RM counted {rm_hb}, loadgen {got}/s × {secs} s"
    );
    assert_eq!(metric(metrics, "hotpath_rm_bad_requests_total"), 0.0);
    // Every answered heartbeat's handling time was recorded, and the quantiles are real times.
    assert_eq!(
        metric(metrics, "hotpath_rm_heartbeat_handling_seconds_count"),
        metric(metrics, "hotpath_rm_heartbeats_total")
    );
    let p99 = metric(
        metrics,
        "hotpath_rm_heartbeat_handling_seconds{quantile=\"0.99\"}",
    );
    assert!(p99 > 0.0 && p99 < 10.0, "handling p99 {p99} s");
}
