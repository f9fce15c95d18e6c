//! A real YARN application on hotpath agents under a real Java ResourceManager: a
//! MiniYARNCluster with no NodeManagers of its own (`yarn-rm --profile agents`), two agents,
//! and the peer's ShellAm application (Hadoop's own AMRMClientAsync, NMClientAsync and
//! YarnClient). The RM's AMLauncher starts the AM on an agent through ContainerManagementProtocol
//! with its NMToken and container token; the AM starts its shell containers on both agents.
//!
//! One agent runs in this process (so the hostile cases can mint tokens under the keys the RM
//! gave it); the other is a `hotpath agent` child process, so it can be killed −9.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agent::node::{Agent, AgentConfig};
use peer_harness::{Mode, Shared};
use serde_json::Value;

static RM: Shared = Shared::new(Mode::YarnRm, &["--profile", "agents"]);

const KILLED_BY_APPMASTER: i64 = -105;

fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < timeout, "{what}: not within {timeout:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {path:?}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parse {path:?}: {e}: {text}"))
}

fn http_get(addr: &str, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let code = out
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = out
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    (code, body)
}

/// `hotpath agent` in a child process.
struct ChildAgent {
    child: Child,
    node_id: String,
    _dir: tempfile::TempDir,
}

impl ChildAgent {
    fn start(rt: &str, ip: &str) -> ChildAgent {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let set = |k: &str, v: String| format!("{k}={v}");
        let mut child = Command::new(env!("CARGO_BIN_EXE_hotpath"))
            .arg("agent")
            .arg("--ready-line")
            .args(
                [
                    set("yarn.resourcemanager.resource-tracker.address", rt.into()),
                    set("yarn.nodemanager.address", format!("{ip}:0")),
                    set("yarn.nodemanager.webapp.address", format!("{ip}:0")),
                    set("hotpath.agent.ipc.address", format!("{ip}:0")),
                    set("yarn.nodemanager.local-dirs", d.join("local").display().to_string()),
                    set("yarn.nodemanager.log-dirs", d.join("logs").display().to_string()),
                    set("yarn.nodemanager.resource.memory-mb", "4096".into()),
                    set("yarn.nodemanager.resource.cpu-vcores", "8".into()),
                    set("hotpath.agent.control-socket", d.join("agent.sock").display().to_string()),
                    set("yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage", "100".into()),
                ]
                .iter()
                .flat_map(|kv| ["--set".to_string(), kv.clone()]),
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let ready: Value =
            serde_json::from_str(line.trim().strip_prefix("READY ").unwrap()).unwrap();
        ChildAgent {
            child,
            node_id: ready["node_id"].as_str().unwrap().to_string(),
            _dir: dir,
        }
    }

    fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for ChildAgent {
    fn drop(&mut self) {
        self.kill9();
    }
}

fn in_process_agent(rt: SocketAddr, ip: &str) -> (Agent, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = AgentConfig::local(rt, ip.parse().unwrap(), dir.path()).unwrap();
    cfg.memory_mb = 4096;
    cfg.vcores = 8;
    let a = Agent::start(cfg).unwrap();
    (a, dir)
}

struct Cluster {
    rm: peer_harness::SharedGuard<'static>,
    local: Agent,
    _local_dir: tempfile::TempDir,
    remote: ChildAgent,
}

fn cluster() -> Cluster {
    let rm = RM.lock().expect("yarn-rm --profile agents");
    let ready = rm.ready().clone();
    let rt = ready["resource_tracker"].as_str().unwrap().to_string();
    let (local, dir) = in_process_agent(rt.parse().unwrap(), "127.0.0.41");
    let remote = ChildAgent::start(&rt, "127.0.0.42");
    let mut c = Cluster {
        rm,
        local,
        _local_dir: dir,
        remote,
    };
    wait_for("both agents registered", Duration::from_secs(30), || {
        let nodes = c.rm_nodes();
        c.local.shared().cm.lock().unwrap().has_keys()
            && nodes.contains(&c.local.node_id())
            && nodes.contains(&c.remote.node_id)
    });
    c
}

impl Cluster {
    fn rm_nodes(&mut self) -> Vec<String> {
        let v = self.rm.command("nodes").unwrap_or(Value::Null);
        v["nodes"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter(|n| n["state"] == "RUNNING")
                    .filter_map(|n| n["node_id"].as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    }

    fn run(&mut self, words: &str, timeout_s: u32) -> (Value, Value) {
        let submitted = self
            .rm
            .command(&format!("app-submit {words}"))
            .unwrap_or_else(|e| panic!("app-submit: {e}\n{}", self.rm.log_tail(60)));
        let id = submitted["app_id"].as_str().expect("app_id").to_owned();
        let done = self
            .rm
            .command(&format!("app-wait {id} {timeout_s}"))
            .unwrap_or_else(|e| panic!("app-wait: {e}\n{}", self.rm.log_tail(80)));
        assert_eq!(done["timed_out"], false, "{done}\n{}", self.rm.log_tail(80));
        (submitted, done)
    }
}

#[test]
fn a_real_application_runs_on_two_agents_with_exact_exit_statuses_and_logs() {
    let mut c = cluster();
    let dir = tempfile::tempdir().unwrap();
    let result = dir.path().join("result.json");
    let (_, done) = c.run(
        &format!(
            "containers=10 exit=3:7 stop=5 container_mb=1024 result={}",
            result.display()
        ),
        120,
    );
    assert_eq!(done["state"], "FINISHED", "{done}");
    assert_eq!(done["final_status"], "SUCCEEDED", "{done}");
    let r = read_json(&result);
    assert_eq!(r["unexpected"], Value::Array(vec![]), "{r}");
    assert_eq!(r["errors"], Value::Array(vec![]), "{r}");
    let mut by_index = BTreeMap::new();
    for comp in r["completions"].as_array().unwrap() {
        by_index.insert(comp["index"].as_u64().unwrap(), comp.clone());
    }
    assert_eq!(by_index.len(), 10, "{r}");
    for (i, comp) in &by_index {
        let want = match i {
            3 => 7,
            5 => KILLED_BY_APPMASTER,
            _ => 0,
        };
        assert_eq!(comp["exit_status"], want, "container {i}: {comp}");
        // The status query right after the start found the container (our containers of
        // `echo; exit` are often done by then: COMPLETE, where Java's slower launch says
        // RUNNING).
        let st = comp["start_status_state"].as_str().unwrap_or("");
        assert!(st == "RUNNING" || st == "COMPLETE", "{comp}");
    }
    let nodes: std::collections::BTreeSet<String> = by_index
        .values()
        .map(|c| c["node_id"].as_str().unwrap().to_string())
        .collect();
    assert!(nodes.contains(&c.local.node_id()), "{nodes:?}");
    assert!(nodes.contains(&c.remote.node_id), "{nodes:?}");
    // A container's stdout through the agent's logs endpoint.
    let on_local = by_index
        .iter()
        .find(|(_, comp)| comp["node_id"] == c.local.node_id().as_str())
        .map(|(i, comp)| (*i, comp["container_id"].as_str().unwrap().to_string()))
        .unwrap();
    let web = c.local.metrics_addr().unwrap().to_string();
    let (code, body) = http_get(
        &web,
        &format!("/ws/v1/node/containers/{}/logs/stdout", on_local.1),
    );
    assert_eq!(code, 200, "{body}");
    assert!(body.contains(&format!("hello-{}", on_local.0)), "{body}");
    assert!(body.contains("LogType:stdout"), "{body}");
}

#[test]
fn an_am_that_exits_non_zero_gets_its_second_attempt() {
    let mut c = cluster();
    let dir = tempfile::tempdir().unwrap();
    let result = dir.path().join("result.json");
    let (_, done) = c.run(
        &format!("containers=2 fail_attempt=1 result={}", result.display()),
        120,
    );
    assert_eq!(done["final_status"], "SUCCEEDED", "{done}");
    assert_eq!(done["attempt_count"], 2, "{done}");
    assert_eq!(done["attempts"][0]["am_container_exit_status"], 3, "{done}");
    let r = read_json(&result);
    assert_eq!(r["attempt"], 2, "{r}");
}

#[allow(dead_code)]
fn _paths(_: &PathBuf) {}
