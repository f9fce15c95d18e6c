//! Side by side (issue 5, "Must show" 2–3): `hotpath-bench loadgen heartbeats` against `hotpath rm`
//! (a separate process) and against the real Java ResourceManager (peer `yarn-rm`, log level
//! ERROR, trap 9), with the same N, with 50 containers and with 0. Each RM is fresh per run; the
//! loadgen reads the RM process's utime+stime before and after the measured window (`--pid`).
//!
//! A measurement, so `#[ignore]`d; run it with the release binary:
//! `LOADGEN_NODES=1000,2000 LOADGEN_SECS=10 cargo test --release -p benches --test
//! loadgen_side_by_side -- --ignored --nocapture`. It fails if any run reports an RPC error, a
//! SHUTDOWN, or no heartbeats at all. `LOADGEN_SIDES=ours` or `java` runs one side only.

use crate::support;

use std::process::{Command, Stdio};

use peer_harness::{Mode, Peer};
use serde_json::Value;
use support::start_rm;

fn env_or(k: &str, d: &str) -> String {
    std::env::var(k).unwrap_or_else(|_| d.to_string())
}

fn loadgen(rm: &str, nodes: usize, containers: usize, pid: u32, metrics: Option<&str>) -> Value {
    let secs = env_or("LOADGEN_SECS", "10");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hotpath-bench"));
    cmd.args(["loadgen", "heartbeats", "--rm", rm, "--json"])
        .args(["--nodes", &nodes.to_string()])
        .args(["--containers", &containers.to_string()])
        .args(["--duration", &secs, "--interval-ms", "1000"])
        .args(["--pid", &pid.to_string()])
        .env("HOTPATH_LOG", "warn");
    if let Some(m) = metrics {
        cmd.args(["--metrics", m]);
    }
    let out = cmd.output().expect("running the loadgen");
    assert!(
        out.status.success(),
        "loadgen failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("loadgen JSON");
    assert_eq!(v["errors"], 0, "{v}");
    assert_eq!(v["shutdowns"], 0, "{v}");
    assert!(v["hb_per_s"].as_f64().unwrap() > 0.0, "{v}");
    v
}

fn row(side: &str, v: &Value) {
    println!(
        "| {side:5} | {:>6} | {:>3} | {:>8.0} | {:>6} | {:>7} | {:>8} | {:>8} | {:>7.1} | {:>6} | {:>5} |",
        v["nodes"],
        v["containers"],
        v["hb_per_s"].as_f64().unwrap(),
        v["p50_us"],
        v["p99_us"],
        v["p999_us"],
        v["max_backlog"],
        v["rm_cpu_us_per_hb"].as_f64().unwrap_or(f64::NAN),
        v["late"],
        v["resyncs"],
    );
}

#[test]
#[ignore = "measurement: minutes of load; run with --release -- --ignored --nocapture"]
fn loadgen_ours_beside_java() {
    let nodes: Vec<usize> = env_or("LOADGEN_NODES", "1000")
        .split(',')
        .map(|s| {
            s.trim()
                .parse()
                .expect("LOADGEN_NODES: comma-separated counts")
        })
        .collect();
    let sides = env_or("LOADGEN_SIDES", "ours,java");
    let mut rows = Vec::new();
    for &n in &nodes {
        for containers in [50, 0] {
            if sides.contains("ours") {
                let dir = tempfile::tempdir().unwrap();
                let rm = start_rm(dir.path(), &[], "warn", Stdio::inherit());
                let v = loadgen(&rm.tracker, n, containers, rm.pid, Some(&rm.metrics));
                eprintln!("ours: {v}");
                rows.push(("ours", v));
                drop(rm);
            }
            if sides.contains("java") {
                let peer = Peer::start(Mode::YarnRm, &["--nms", "0", "--log-level", "ERROR"])
                    .expect("the Java RM peer must start (mvn build in peers/hadoop)");
                let addr = peer.resource_tracker_addr().unwrap().to_string();
                let v = loadgen(&addr, n, containers, peer.pid(), None);
                eprintln!("java: {v}");
                rows.push(("java", v));
                peer.stop(std::time::Duration::from_secs(30));
            }
        }
    }
    println!(
        "| side  | nodes  | ctr | hb/s     | p50 µs | p99 µs  | p999 µs  | backlog  | RM CPU µs/hb | late | resyncs |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for (side, v) in &rows {
        row(side, v);
    }
}
