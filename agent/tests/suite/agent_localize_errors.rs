//! Resource localization when HDFS is not there: no `fs.defaultFS` (no reader thread at all,
//! a clear "HDFS not configured"), a NameNode that does not answer (the bounded queue refuses
//! at once when full), and one that is gone ("NameNode unreachable"). No file is left behind.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use agent::demo::{Cluster, DemoConfig};
use nm_runtime::config::HdfsSettings;
use nm_runtime::{Agent, AgentConfig};
use serde_json::Value;

const CID: &str = "container_1700000000000_0043_01_000001";

fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < timeout, "{what}: not within {timeout:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn localize_cmd(sock: &Path, source: &str, dest: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_hotpath"));
    c.arg("container")
        .arg("--socket")
        .arg(sock)
        .args(["localize", "--container", CID, source])
        .arg(dest)
        .env("HOTPATH_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

fn finish(c: std::process::Child) -> (bool, Value, String) {
    let out = c.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    (
        out.status.success(),
        serde_json::from_str(&stdout).unwrap_or(Value::Null),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn thread_names(pid: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("comm")).ok())
        .map(|s| s.trim().to_string())
        .collect()
}

#[test]
fn without_an_hdfs_default_fs_there_is_no_reader_thread_and_localize_says_so() {
    let rm = Cluster::start(DemoConfig {
        agents: 0,
        ..DemoConfig::default()
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("a.sock");
    // `hotpath agent` as installed: no fs.defaultFS anywhere (Hadoop's default, file:///)
    let mut child = Command::new(env!("CARGO_BIN_EXE_hotpath"))
        .args(["agent", "--rm", &rm.rm_addr().to_string()])
        .args([
            "--node",
            "127.0.0.23:0",
            "--http",
            "127.0.0.23:0",
            "--ready-line",
        ])
        .arg("--control-socket")
        .arg(&sock)
        .arg("--conf-dir")
        .arg(dir.path())
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
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.starts_with("READY "), "{line}");
    let pid = child.id();
    let names = thread_names(pid);
    assert!(names.iter().any(|n| n.starts_with("hp-hk")), "{names:?}");
    assert!(
        !names.iter().any(|n| n.starts_with("hp-hdfs")),
        "no HDFS reader without fs.defaultFS: {names:?}"
    );
    let dest = dir.path().join("local/f");
    let (ok, v, err) = finish(localize_cmd(&sock, "hdfs:///f", &dest).spawn().unwrap());
    let _ = child.kill();
    let _ = child.wait();
    assert!(!ok);
    assert_eq!(v["kind"], "not_configured", "{v}");
    assert!(err.contains("HDFS not configured"), "{err}");
    assert!(err.contains("fs.defaultFS is file:///"), "{err}");
    assert!(!dest.exists());
}

#[test]
fn a_full_queue_answers_busy_at_once_and_a_lost_namenode_is_unreachable() {
    let rm = Cluster::start(DemoConfig {
        agents: 0,
        ..DemoConfig::default()
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    // a "NameNode" whose kernel completes the handshake but that never answers: the first
    // request occupies the reader until the listener goes away
    let hung = TcpListener::bind("127.0.0.1:0").unwrap();
    let nn = hung.local_addr().unwrap();
    let mut conf = conf::Configuration::new();
    conf.set("fs.defaultFS", &format!("hdfs://{nn}"));
    conf.set("hotpath.agent.localize.queue-depth", "1");
    let mut cfg =
        AgentConfig::local(rm.rm_addr(), "127.0.0.24".parse().unwrap(), dir.path()).unwrap();
    cfg.hdfs = HdfsSettings::from_conf(&conf).unwrap();
    assert_eq!(cfg.hdfs.as_ref().unwrap().queue_depth, 1);
    let a = Agent::start(cfg).unwrap();
    let sock = a.control_path().unwrap().to_owned();
    let m = &a.shared().metrics.localize;
    let local = dir.path().join("local");
    wait_for("local dir", Duration::from_secs(5), || local.is_dir());

    let first = localize_cmd(&sock, "hdfs:///a", &local.join("a"))
        .spawn()
        .unwrap();
    wait_for("the reader took the first", Duration::from_secs(10), || {
        m.active.load(Relaxed) == 1
    });
    let second = localize_cmd(&sock, "/b", &local.join("b")).spawn().unwrap();
    wait_for("the second waits", Duration::from_secs(10), || {
        m.pending.load(Relaxed) == 2
    });
    let t0 = Instant::now();
    let (ok, v, err) = finish(localize_cmd(&sock, "/c", &local.join("c")).spawn().unwrap());
    assert!(!ok);
    assert_eq!(v["kind"], "busy", "{v}");
    assert!(err.contains("busy"), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(5), "answered at once");
    assert_eq!(m.busy.load(Relaxed), 1);
    assert_eq!(m.active.load(Relaxed), 1, "the first is still being read");

    // the NameNode goes away: the waiting call fails, the next cannot connect
    drop(hung);
    for (c, what) in [(first, "a"), (second, "b")] {
        let (ok, v, err) = finish(c);
        assert!(!ok, "{what}");
        assert_eq!(v["kind"], "namenode_unreachable", "{what}: {v} {err}");
        assert!(err.contains("NameNode unreachable"), "{err}");
        assert!(err.contains(&nn.to_string()), "{err}");
    }
    let left: Vec<_> = std::fs::read_dir(&local)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "{left:?}");
    assert_eq!(m.failed.load(Relaxed), 3);
    assert_eq!(m.ok.load(Relaxed), 0);
    assert_eq!(m.pending.load(Relaxed), 0);
    a.stop();
    a.join();
}
