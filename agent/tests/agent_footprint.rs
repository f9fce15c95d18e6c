//! Footprint of the `hotpath agent` process: time from spawn to "the RM lists the node"
//! (embedded rm-core on loopback, polled every millisecond), and resident memory in steady
//! state with 200 running containers (`--simulate`, containers that never finish).
//!
//! The goals (≤ 50 ms, ≤ 16 MiB) are asserted for an optimised binary: set `HOTPATH_BIN` to
//! `target/release/hotpath`. The debug binary `cargo test` builds gets looser bounds.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agent::demo::{Cluster, DemoConfig};
use nm_runtime::control::ControlClient;
use rm_core::tracker::Membership;

fn status_kb(pid: u32, key: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}

#[test]
fn registers_within_50_ms_and_stays_under_16_mib_with_200_containers() {
    let (bin, strict) = match std::env::var("HOTPATH_BIN") {
        Ok(b) => (b, true),
        Err(_) => (
            env!("CARGO_BIN_EXE_hotpath").to_string(),
            !cfg!(debug_assertions),
        ),
    };
    let c = Cluster::start(DemoConfig {
        agents: 0,
        heartbeat_ms: 1000,
        ..DemoConfig::default()
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ip = "127.0.0.14";
    let t0 = Instant::now();
    let mut child = Command::new(&bin)
        .args([
            "agent",
            "--rm",
            &c.rm_addr().to_string(),
            "--node",
            &format!("{ip}:0"),
            "--http",
            &format!("{ip}:0"),
            "--ready-line",
            "--simulate",
            "--sim-rate",
            "2000",
            "--sim-mean-ms",
            "36000000",
            "--sim-max-running",
            "200",
        ])
        .arg("--control-socket")
        .arg(dir.path().join("a.sock"))
        .arg("--set")
        .arg(format!(
            "yarn.nodemanager.local-dirs={}",
            dir.path().join("local").display()
        ))
        .arg("--set")
        .arg("yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage=100")
        .env("HOTPATH_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let registered = loop {
        let active = {
            let t = c.rm().unwrap().tracker().lock().unwrap();
            let a = t
                .nodes()
                .any(|n| &*n.id.host == ip && n.membership == Membership::Active);
            a
        };
        if active {
            break t0.elapsed();
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "not registered");
        std::thread::sleep(Duration::from_millis(1));
    };
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let pid = child.id();
    let mut ctl = ControlClient::connect(&dir.path().join("a.sock")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let s = ctl.request(&serde_json::json!({"op":"status"})).unwrap();
        if s["containers"]["running"] == 200 && s["heartbeats_ok"].as_u64().unwrap() >= 3 {
            break;
        }
        assert!(Instant::now() < deadline, "{s}");
        std::thread::sleep(Duration::from_millis(100));
    }
    // steady state: heartbeats carrying 200 containers
    std::thread::sleep(Duration::from_secs(5));
    let s = ctl.request(&serde_json::json!({"op":"status"})).unwrap();
    let rss = status_kb(pid, "VmRSS:");
    let hwm = status_kb(pid, "VmHWM:");
    let threads = status_kb(pid, "Threads:");
    eprintln!(
        "{bin}: registered {registered:?} after spawn; 200 containers, {} heartbeats: VmRSS {rss} kB, VmHWM {hwm} kB, {threads} threads",
        s["heartbeats_ok"]
    );
    child.kill().unwrap();
    let _ = child.wait();
    assert_eq!(s["containers"]["running"], 200);
    let (reg_limit, rss_limit_kb) = if strict {
        (50, 16 * 1024)
    } else {
        (1000, 48 * 1024)
    };
    assert!(
        registered <= Duration::from_millis(reg_limit),
        "registered after {registered:?}"
    );
    assert!(rss <= rss_limit_kb, "VmRSS {rss} kB");
}
