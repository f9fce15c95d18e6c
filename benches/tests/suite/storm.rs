//! The heartbeat storm's load generator, small and short, against a fresh `hotpath rm` and the
//! raw reference server in one sitting (`loadgen heartbeats --target both`): one connection per
//! node, every node registered, heartbeats answered with responseIds rising by one, no error,
//! and the figures carry their keys; the raw server answers with the RM's heartbeat response
//! (same frame size). Then the raw server with two load processes and two loop threads each,
//! which goes through the children's shared start and the parent's merge. No timing checks.

use crate::support;

use std::process::Command;

use serde_json::Value;

const KEYS: &[&str] = &[
    "target",
    "nodes",
    "connections",
    "threads",
    "processes",
    "hb_per_s",
    "p50_us",
    "p99_us",
    "p999_us",
    "max_us",
    "sched_p50_us",
    "sched_p99_us",
    "sched_p999_us",
    "sched_max_us",
    "late",
    "skipped",
    "errors",
    "resyncs",
    "shutdowns",
    "registered",
    "heartbeats",
    "disconnects",
    "reconnects",
    "fds",
    "fd_limit",
    "server_cpu_us_per_hb",
    "loadgen_cpu_us_per_hb",
    "response_frame_bytes",
];

fn loadgen(args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_hotpath-bench"))
        .args(["loadgen", "heartbeats", "--json", "--nodes", "200"])
        .args(["--interval-ms", "500", "--duration", "2"])
        .arg("--hotpath-bin")
        .arg(support::hotpath_exe())
        .args(args)
        .env("HOTPATH_LOG", "warn")
        .output()
        .expect("running the loadgen");
    assert!(
        out.status.success(),
        "loadgen failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.lines().last().expect("a JSON line")).expect("loadgen JSON")
}

fn check_common(v: &Value) {
    for k in KEYS {
        assert!(v.get(*k).is_some(), "key {k} missing: {v}");
    }
    assert_eq!(v["nodes"], 200, "{v}");
    assert_eq!(v["connections"], 200, "one connection per node: {v}");
    assert_eq!(v["registered"], 200, "every node registered: {v}");
    for k in [
        "errors",
        "resyncs",
        "shutdowns",
        "disconnects",
        "connect_failures",
    ] {
        assert_eq!(v[k], 0, "{k}: {v}");
    }
    assert!(v["heartbeats"].as_u64().unwrap() > 0, "{v}");
    assert!(v["fds"].as_u64().unwrap() >= 200, "a socket per node: {v}");
}

#[test]
fn storm_against_rm_and_raw() {
    let v = loadgen(&["--target", "both"]);
    eprintln!("{v}");
    let (rm, raw) = (&v["rm"], &v["raw"]);
    check_common(rm);
    check_common(raw);
    assert_eq!(rm["target"], "rm");
    assert_eq!(raw["target"], "raw");
    assert_eq!(rm["registrations"], 200, "{rm}");
    // Every answer's responseId was the last one + 1, and every node got several.
    assert_eq!(rm["response_id_errors"], 0, "{rm}");
    assert!(rm["min_response_id"].as_i64().unwrap() >= 2, "{rm}");
    assert!(rm["rm_cpu_us_per_hb"].is_number(), "{rm}");
    // The raw server answered with the RM's heartbeat response: same frame size.
    assert_eq!(raw["response_source"], "rm", "{raw}");
    assert_eq!(raw["response_frame_bytes"], rm["response_frame_bytes"]);
    assert!(raw["raw_cpu_us_per_req"].is_number(), "{raw}");
    assert!(v.get("cpu_ratio_rm_over_raw").is_some(), "{v}");
}

#[test]
fn storm_with_two_load_processes() {
    let v = loadgen(&["--target", "raw", "--processes", "2", "--threads", "2"]);
    eprintln!("{v}");
    check_common(&v);
    assert_eq!(v["processes"], 2, "{v}");
    assert_eq!(v["threads"], 2, "{v}");
    assert_eq!(v["response_source"], "fixture", "{v}");
}

/// A dead server: every connection is counted down, retried after `--retry-ms`, and up again
/// once a server listens on the port again; the nodes go on heartbeating (no error: a lost
/// call is retried by the next beat, as the NodeManager's RM proxy retries).
#[test]
fn storm_reconnects_after_the_server_dies() {
    use std::io::{BufRead, BufReader};
    use std::process::{Child, Stdio};
    use std::time::Duration;

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    // A heartbeat answer (responseId 1, NORMAL).
    let payload = "08012000";
    let raw = |addr: &str| -> Child {
        let mut c = Command::new(env!("CARGO_BIN_EXE_hotpath-bench"))
            .args(["storm-raw", "--ready-line", "--address", addr])
            .args(["--payload-hex", payload])
            .env("HOTPATH_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("starting storm-raw");
        let mut line = String::new();
        BufReader::new(c.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(line.starts_with("READY "), "{line:?}");
        c
    };
    let mut first = raw(&addr);
    let lg = Command::new(env!("CARGO_BIN_EXE_hotpath-bench"))
        .args(["loadgen", "heartbeats", "--json", "--nodes", "200"])
        .args([
            "--interval-ms",
            "200",
            "--duration",
            "4",
            "--retry-ms",
            "200",
        ])
        .args(["--rm", &addr, "--raw-peer"])
        .env("HOTPATH_LOG", "error")
        .stdout(Stdio::piped())
        .spawn()
        .expect("running the loadgen");
    // Registered and beating by now (the ramp takes 0.1 s); then the server dies, and a new
    // one takes its port while the loadgen still runs.
    std::thread::sleep(Duration::from_millis(2000));
    first.kill().unwrap();
    first.wait().unwrap();
    std::thread::sleep(Duration::from_millis(600));
    let mut second = raw(&addr);
    let out = lg.wait_with_output().unwrap();
    drop(second.stdin.take());
    second.wait().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    eprintln!("{v}");
    assert_eq!(v["registered"], 200, "{v}");
    assert_eq!(v["disconnects"], 200, "every connection died once: {v}");
    assert_eq!(v["reconnects"], 200, "and came back: {v}");
    assert!(v["connect_failures"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(v["errors"], 0, "{v}");
    assert!(v["heartbeats"].as_u64().unwrap() > 0, "{v}");
}
