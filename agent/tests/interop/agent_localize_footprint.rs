//! The agent's footprint goal (RSS ≤ 16 MiB in steady state with 200 running containers)
//! with and without the HDFS-reader thread: the same `hotpath agent --simulate` process as
//! `agent_footprint.rs`, once with no `fs.defaultFS` (no reader) and once configured from a
//! real HDFS peer's conf dir (reader thread started), measured idle and again after it
//! localized an 8 MiB file.
//!
//! The 16 MiB goal is asserted for an optimised binary: set `HOTPATH_BIN` to
//! `target/release/hotpath`. The debug binary `cargo test` builds gets a looser bound.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agent::demo::{Cluster, DemoConfig};
use nm_runtime::control::ControlClient;
use peer_harness::{Mode, Peer};
use serde_json::json;

fn status_kb(pid: u32, key: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}

fn thread_names(pid: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("comm")).ok())
        .map(|s| s.trim().to_string())
        .collect()
}

struct Running {
    child: Child,
    ctl: ControlClient,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `hotpath agent` with 200 never-ending simulated containers, settled (3 heartbeats with
/// all 200 running, then 5 s).
fn start(bin: &str, rm: &Cluster, ip: &str, dir: &Path, conf_dir: &Path) -> Running {
    let mut child = Command::new(bin)
        .args(["agent", "--rm", &rm.rm_addr().to_string()])
        .args(["--node", &format!("{ip}:0"), "--http", &format!("{ip}:0")])
        .args(["--ready-line", "--simulate", "--sim-rate", "2000"])
        .args(["--sim-mean-ms", "36000000", "--sim-max-running", "200"])
        .arg("--conf-dir")
        .arg(conf_dir)
        .arg("--control-socket")
        .arg(dir.join("a.sock"))
        .arg("--set")
        .arg(format!(
            "yarn.nodemanager.local-dirs={}",
            dir.join("local").display()
        ))
        .arg("--set")
        .arg("yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage=100")
        .env("HOTPATH_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.starts_with("READY "), "{line}");
    let mut ctl = ControlClient::connect(&dir.join("a.sock")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let s = ctl.request(&json!({"op":"status"})).unwrap();
        if s["containers"]["running"] == 200 && s["heartbeats_ok"].as_u64().unwrap() >= 3 {
            break;
        }
        assert!(Instant::now() < deadline, "{s}");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(5));
    Running { child, ctl }
}

#[test]
fn stays_under_16_mib_with_200_containers_with_and_without_the_hdfs_reader() {
    let (bin, strict) = match std::env::var("HOTPATH_BIN") {
        Ok(b) => (b, true),
        Err(_) => (
            env!("CARGO_BIN_EXE_hotpath").to_string(),
            !cfg!(debug_assertions),
        ),
    };
    let limit_kb = if strict { 16 * 1024 } else { 48 * 1024 };
    let mut peer = Peer::start(Mode::Hdfs, &[]).expect("hdfs peer");
    let len = 8u64 << 20;
    let w = peer
        .command(&format!("write /footprint/lib.jar {len}"))
        .expect("write");
    let rm = Cluster::start(DemoConfig {
        agents: 0,
        heartbeat_ms: 1000,
        ..DemoConfig::default()
    })
    .unwrap();

    // without: no fs.defaultFS (an empty conf dir)
    let d1 = tempfile::tempdir().unwrap();
    let empty = d1.path().join("conf");
    std::fs::create_dir_all(&empty).unwrap();
    let mut a = start(&bin, &rm, "127.0.0.25", d1.path(), &empty);
    let pid = a.child.id();
    let names = thread_names(pid);
    assert!(!names.iter().any(|n| n.starts_with("hp-hdfs")), "{names:?}");
    let rss_without = status_kb(pid, "VmRSS:");
    let threads_without = names.len();
    let s = a.ctl.request(&json!({"op":"status"})).unwrap();
    assert_eq!(s["containers"]["running"], 200);
    assert_eq!(s["localize"]["hdfs_reader"], false);
    drop(a);

    // with: the peer's core-site.xml (fs.defaultFS = its NameNode)
    let d2 = tempfile::tempdir().unwrap();
    let mut b = start(&bin, &rm, "127.0.0.26", d2.path(), peer.conf_dir());
    let pid = b.child.id();
    let names = thread_names(pid);
    assert!(names.iter().any(|n| n.starts_with("hp-hdfs")), "{names:?}");
    let rss_idle = status_kb(pid, "VmRSS:");
    let threads_idle = names.len();
    let dest = d2.path().join("local/lib.jar");
    let r = b
        .ctl
        .request(
            &json!({"op":"localize","container":"container_1700000000000_0001_01_000001",
                         "source":"hdfs:///footprint/lib.jar","dest":dest}),
        )
        .unwrap();
    assert_eq!(r["bytes"], len, "{r}");
    // after the read, in steady state again (heartbeats with 200 containers go on)
    std::thread::sleep(Duration::from_secs(3));
    let s = b.ctl.request(&json!({"op":"status"})).unwrap();
    assert_eq!(s["containers"]["running"], 200);
    assert_eq!(s["localize"]["ok"], 1);
    let rss_after = status_kb(pid, "VmRSS:");
    let hwm_after = status_kb(pid, "VmHWM:");
    let threads_after = thread_names(pid).len();
    drop(b);
    let sha = Command::new("sha256sum").arg(&dest).output().unwrap();
    assert!(String::from_utf8_lossy(&sha.stdout).starts_with(w["sha256"].as_str().unwrap()));

    eprintln!(
        "{bin}: 200 containers: VmRSS without the HDFS reader {rss_without} kB ({threads_without} threads); \
         with it idle {rss_idle} kB ({threads_idle} threads); after localizing {len} bytes in {} ms \
         {rss_after} kB (VmHWM {hwm_after} kB, {threads_after} threads)",
        r["elapsed_ms"]
    );
    for (what, kb) in [
        ("without the reader", rss_without),
        ("with the reader, idle", rss_idle),
        ("after a localization", rss_after),
    ] {
        assert!(kb <= limit_kb, "{what}: VmRSS {kb} kB > {limit_kb} kB");
    }
}
