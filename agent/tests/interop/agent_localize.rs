//! Resource localization against real HDFS (peer-harness `hdfs` mode: MiniDFSCluster with 3
//! DataNodes, 1 MiB blocks): the agent is configured from the peer's own core-site.xml /
//! hdfs-site.xml (fs.defaultFS = its NameNode), starts its pinned HDFS-reader thread, and the
//! `hotpath container localize` CLI copies files through the control socket.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use agent::demo::{Cluster, DemoConfig};
use nm_runtime::{Agent, AgentConfig};
use peer_harness::{Mode, Peer, Shared};
use serde_json::Value;

static HDFS: Shared = Shared::new(Mode::Hdfs, &[]);

const CID: &str = "container_1700000000000_0042_01_000001";

fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < timeout, "{what}: not within {timeout:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `hotpath container --socket SOCK localize ...`: (success, stdout JSON, stderr).
fn localize(sock: &Path, source: &str, dest: &Path, extra: &[&str]) -> (bool, Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_hotpath"))
        .arg("container")
        .arg("--socket")
        .arg(sock)
        .args(["localize", "--container", CID, source])
        .arg(dest)
        .args(extra)
        .env("HOTPATH_LOG", "warn")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let v = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    (
        out.status.success(),
        v,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `sha256sum FILE`.
fn sha256_file(p: &Path) -> String {
    let out = Command::new("sha256sum").arg(p).output().unwrap();
    assert!(out.status.success(), "sha256sum {}", p.display());
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn http_get(addr: std::net::SocketAddr, path: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

fn metric(body: &str, name: &str) -> u64 {
    body.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("{name} missing:\n{body}"))
        .trim()
        .parse()
        .unwrap()
}

/// An agent configured from the peer's site files (fs.defaultFS = the peer's NameNode), on
/// `ip`, with its local dir and control socket under `dir`, registered with an embedded
/// rm-core, threads pinned by the plan.
fn start_agent(peer: &Peer, rm: &Cluster, ip: &str, dir: &Path) -> Agent {
    let mut conf = conf::Configuration::load_dir(peer.conf_dir()).unwrap();
    assert!(
        conf.get("fs.defaultFS").unwrap().starts_with("hdfs://"),
        "the peer's core-site.xml names its NameNode"
    );
    for (k, v) in [
        (
            "yarn.resourcemanager.resource-tracker.address",
            rm.rm_addr().to_string(),
        ),
        ("yarn.nodemanager.address", format!("{ip}:0")),
        ("yarn.nodemanager.webapp.address", format!("{ip}:0")),
        (
            "yarn.nodemanager.local-dirs",
            dir.join("local").display().to_string(),
        ),
        (
            "yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage",
            "100".into(),
        ),
        (
            "hotpath.agent.control-socket",
            dir.join("agent.sock").display().to_string(),
        ),
        // the all-replicas-failed refetch waits (3 s by default) kept short
        ("dfs.client.retry.window.base", "100".into()),
    ] {
        conf.set(k, &v);
    }
    let cfg = AgentConfig::from_conf(&conf).unwrap();
    assert!(cfg.hdfs.is_some());
    assert!(cfg.pin);
    let a = Agent::start(cfg).unwrap();
    let sh = a.shared().clone();
    wait_for("registered", Duration::from_secs(20), || {
        sh.metrics.heartbeats_ok.load(Relaxed) >= 1
    });
    a
}

/// The thread named `name` in this process: (tid, Cpus_allowed_list, CPU it last ran on).
fn find_thread(name: &str) -> Option<(String, String, u32)> {
    for e in std::fs::read_dir("/proc/self/task").unwrap() {
        let p = e.unwrap().path();
        let Ok(comm) = std::fs::read_to_string(p.join("comm")) else {
            continue;
        };
        if comm.trim() != name {
            continue;
        }
        let status = std::fs::read_to_string(p.join("status")).unwrap();
        let allowed = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .unwrap()
            .trim()
            .to_string();
        // field 39 of stat: the CPU the thread last ran on (fields after "(comm)" start at 3)
        let stat = std::fs::read_to_string(p.join("stat")).unwrap();
        let after = &stat[stat.rfind(')').unwrap() + 1..];
        let processor = after
            .split_whitespace()
            .nth(39 - 3)
            .unwrap()
            .parse()
            .unwrap();
        let tid = p.file_name().unwrap().to_string_lossy().into_owned();
        return Some((tid, allowed, processor));
    }
    None
}

#[test]
fn localizes_a_multi_block_file_through_the_cli_on_the_pinned_reader() {
    let mut peer = HDFS.lock().expect("hdfs peer");
    let len = (5u64 << 20) + 12_345;
    let w = peer
        .command(&format!("write /localize/app/job.jar {len}"))
        .expect("write");
    assert_eq!(w["blocks"], 6, "{w}");
    let sha = w["sha256"].as_str().unwrap().to_string();
    let len2 = 70_000u64;
    let w2 = peer
        .command(&format!("write /localize/app/small.txt {len2}"))
        .expect("write");
    let rm = Cluster::start(DemoConfig {
        agents: 0,
        heartbeat_ms: 200,
        ..DemoConfig::default()
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let a = start_agent(&peer, &rm, "127.0.0.21", dir.path());
    let sock = a.control_path().unwrap().to_owned();
    let app = dir.path().join("local/usercache/app_0042");
    std::fs::create_dir_all(&app).unwrap();

    // the reader thread: named by the plan, pinned to the plan's CPU
    let topo = hw::Topology::detect().unwrap();
    let cpu = hw::Plan::for_agent(&topo)
        .cpu_of(&hw::Role::HdfsReader)
        .expect("the agent plan has an HDFS reader");
    let name = hw::thread_name(&hw::Role::HdfsReader, cpu);
    assert!(name.starts_with("hp-hdfs-"), "{name}");
    let (_, allowed, _) = find_thread(&name).unwrap_or_else(|| panic!("no thread {name}"));
    assert_eq!(allowed, cpu.to_string(), "{name} affinity");

    // a 6-block file, byte-identical
    let dest = app.join("job.jar");
    let (ok, v, err) = localize(&sock, "hdfs:///localize/app/job.jar", &dest, &[]);
    assert!(ok, "{err} {v}");
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["bytes"], len, "{v}");
    assert_eq!(v["blocks"], 6, "{v}");
    assert_eq!(v["container"], CID);
    assert!(v["elapsed_ms"].as_f64().unwrap() > 0.0, "{v}");
    assert_eq!(v["checksum_failures"], 0, "{v}");
    assert_eq!(std::fs::metadata(&dest).unwrap().len(), len);
    assert_eq!(sha256_file(&dest), sha);
    assert_eq!(entries(&app), ["job.jar"], "no temp file left");
    eprintln!("localized {len} bytes: {v}");
    // it ran there: the kernel's last CPU for the thread is the planned one
    let (_, allowed, last_cpu) = find_thread(&name).unwrap();
    assert_eq!(
        (allowed.as_str(), last_cpu),
        (cpu.to_string().as_str(), cpu)
    );
    // ...and so does its NameNode connection's reader thread
    let rx = format!("hp-hdfsrx-{cpu}");
    let (_, allowed, _) = find_thread(&rx).unwrap_or_else(|| panic!("no {rx} thread"));
    assert_eq!(allowed, cpu.to_string(), "{rx} affinity");

    // a missing file: FileNotFound, nothing created
    let missing = app.join("missing.jar");
    let (ok, v, err) = localize(&sock, "hdfs:///localize/app/nope.jar", &missing, &[]);
    assert!(!ok);
    assert_eq!(v["kind"], "file_not_found", "{v}");
    assert!(err.contains("FileNotFound"), "{err}");
    assert!(err.contains("/localize/app/nope.jar"), "{err}");
    assert!(!missing.exists());
    assert_eq!(entries(&app), ["job.jar"]);

    // an existing destination is not replaced unless asked; the full URI form works
    let nn = peer.namenode_addr().unwrap();
    let full = format!("hdfs://{nn}/localize/app/small.txt");
    let (ok, v, _) = localize(&sock, &full, &dest, &[]);
    assert!(!ok);
    assert_eq!(v["kind"], "dest_exists", "{v}");
    assert_eq!(sha256_file(&dest), sha, "untouched");
    let (ok, v, err) = localize(&sock, &full, &dest, &["--overwrite"]);
    assert!(ok, "{err} {v}");
    assert_eq!(v["bytes"], len2);
    assert_eq!(sha256_file(&dest), w2["sha256"].as_str().unwrap());
    assert_eq!(entries(&app), ["job.jar"]);

    // outside the node's local dirs, and another file system: refused
    let outside = dir.path().join("outside.jar");
    let (ok, v, _) = localize(&sock, "/localize/app/small.txt", &outside, &[]);
    assert!(!ok);
    assert_eq!(v["kind"], "dest_not_allowed", "{v}");
    assert!(!outside.exists());
    let (ok, v, _) = localize(&sock, "hdfs://elsewhere:8020/x", &app.join("x"), &[]);
    assert!(!ok);
    assert_eq!(v["kind"], "other_filesystem", "{v}");
    // a directory is not a file
    let (ok, v, _) = localize(&sock, "hdfs:///localize/app", &app.join("d"), &[]);
    assert!(!ok);
    assert_eq!(v["kind"], "not_a_file", "{v}");
    assert_eq!(entries(&app), ["job.jar"]);

    // /metrics and status
    let body = http_get(a.metrics_addr().unwrap(), "/metrics");
    assert_eq!(metric(&body, "hotpath_agent_localizations_ok_total"), 2);
    assert_eq!(metric(&body, "hotpath_agent_localizations_failed_total"), 5);
    assert_eq!(metric(&body, "hotpath_agent_localizations_busy_total"), 0);
    assert_eq!(
        metric(&body, "hotpath_agent_localized_bytes_total"),
        len + len2
    );
    assert_eq!(metric(&body, "hotpath_agent_localizations_pending"), 0);
    assert_eq!(metric(&body, "hotpath_agent_hdfs_reader"), 1);

    a.stop();
    assert_eq!(a.join(), nm_runtime::ExitReason::Stopped);
    assert!(find_thread(&name).is_none(), "the reader thread ended");
}

#[test]
fn a_checksum_failure_on_every_replica_leaves_no_file() {
    let mut peer = HDFS.lock().expect("hdfs peer");
    let len = 3u64 << 20;
    let w = peer
        .command(&format!("write /localize/corrupt/c.bin {len}"))
        .expect("write");
    assert_eq!(w["blocks"], 3, "{w}");
    // `corrupt PATH BLOCK I` flips bytes of the I-th replica in the NameNode's order of that
    // call, and the NameNode shuffles replicas at equal distance: a replica may be hit twice
    // (flipped back). Keep going until each of the 3 DataNodes' copies was flipped an odd
    // number of times.
    let mut flips = [0u32; 3];
    let mut calls = 0;
    while flips.iter().any(|f| f % 2 == 0) {
        assert!(calls < 200, "could not corrupt every replica: {flips:?}");
        let r = peer
            .command(&format!("corrupt /localize/corrupt/c.bin 1 {}", calls % 3))
            .expect("corrupt");
        flips[r["dn_index"].as_u64().unwrap() as usize] += 1;
        calls += 1;
    }
    let rm = Cluster::start(DemoConfig {
        agents: 0,
        heartbeat_ms: 200,
        ..DemoConfig::default()
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let a = start_agent(&peer, &rm, "127.0.0.22", dir.path());
    let sock = a.control_path().unwrap().to_owned();
    let app: PathBuf = dir.path().join("local/filecache");
    std::fs::create_dir_all(&app).unwrap();
    let dest = app.join("c.bin");
    let (ok, v, err) = localize(&sock, "hdfs:///localize/corrupt/c.bin", &dest, &[]);
    assert!(!ok, "{v}");
    assert_eq!(v["kind"], "checksum", "{v}");
    assert!(err.contains("checksum"), "{err}");
    assert!(!dest.exists());
    assert!(entries(&app).is_empty(), "{:?}", entries(&app));
    let m = &a.shared().metrics.localize;
    assert_eq!((m.ok.load(Relaxed), m.failed.load(Relaxed)), (0, 1));
    assert_eq!(m.bytes.load(Relaxed), 0);
    a.stop();
    a.join();
    peer.command("delete /localize/corrupt").expect("delete");
}

#[test]
fn stopping_the_agent_mid_localization_leaves_the_file_whole_or_absent() {
    let mut peer = HDFS.lock().expect("hdfs peer");
    let len = 48u64 << 20;
    let w = peer
        .command(&format!("write /localize/big/b.bin {len}"))
        .expect("write");
    let rm = Cluster::start(DemoConfig {
        agents: 0,
        heartbeat_ms: 200,
        ..DemoConfig::default()
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let a = start_agent(&peer, &rm, "127.0.0.27", dir.path());
    let sock = a.control_path().unwrap().to_owned();
    let app = dir.path().join("local/filecache");
    std::fs::create_dir_all(&app).unwrap();
    let dest = app.join("b.bin");
    let cli = Command::new(env!("CARGO_BIN_EXE_hotpath"))
        .arg("container")
        .arg("--socket")
        .arg(&sock)
        .args(["localize", "--container", CID, "hdfs:///localize/big/b.bin"])
        .arg(&dest)
        .env("HOTPATH_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let sh = a.shared().clone();
    let lm = &sh.metrics.localize;
    wait_for("the reader took it", Duration::from_secs(10), || {
        lm.active.load(Relaxed) == 1 || lm.ok.load(Relaxed) + lm.failed.load(Relaxed) > 0
    });
    std::thread::sleep(Duration::from_millis(50));
    let t0 = Instant::now();
    a.stop();
    a.join();
    let stopped_in = t0.elapsed();
    let out = cli.wait_with_output().unwrap();
    let left = entries(&app);
    let whole = dest.exists();
    eprintln!(
        "stop took {stopped_in:?}; destination {}; CLI: {} {}",
        if whole { "whole" } else { "absent" },
        String::from_utf8_lossy(&out.stdout).trim(),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    assert!(stopped_in < Duration::from_secs(6), "{stopped_in:?}");
    if whole {
        assert_eq!(left, ["b.bin"]);
        assert_eq!(sha256_file(&dest), w["sha256"].as_str().unwrap());
    } else {
        assert!(left.is_empty(), "no temp file: {left:?}");
        assert!(!out.status.success());
    }
    peer.command("delete /localize/big").expect("delete");
}
