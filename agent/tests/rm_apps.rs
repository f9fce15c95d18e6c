//! A real YARN application under `hotpath rm`: Hadoop's `YarnClient` (the peer's `yarn-client`
//! mode) submits the peer's ShellAm application to `hotpath rm`'s ApplicationClientProtocol;
//! the RM schedules the AM container on one of two `hotpath agent`s and starts it
//! (startContainers with a container token and NMToken it minted, the AMRMToken in the launch
//! context's credentials); the AM registers and allocates through ApplicationMasterProtocol
//! with TOKEN authentication, starts its shell containers on both agents, and unregisters.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use peer_harness::{Mode, Peer};
use serde_json::Value;

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {path:?}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parse {path:?}: {e}: {text}"))
}

fn set_args(kvs: &[(&str, String)]) -> Vec<String> {
    kvs.iter()
        .flat_map(|(k, v)| ["--set".to_string(), format!("{k}={v}")])
        .collect()
}

/// A child process that printed `READY {json}`; SIGTERM on drop, then SIGKILL.
struct Ready {
    child: Child,
    ready: Value,
    _dir: tempfile::TempDir,
}

impl Ready {
    fn spawn(mut cmd: Command, dir: tempfile::TempDir) -> Ready {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let ready: Value = serde_json::from_str(
            line.trim()
                .strip_prefix("READY ")
                .unwrap_or_else(|| panic!("no READY line: {line:?}")),
        )
        .unwrap();
        Ready {
            child,
            ready,
            _dir: dir,
        }
    }

    fn field(&self, k: &str) -> String {
        self.ready[k]
            .as_str()
            .unwrap_or_else(|| panic!("{k} in {}", self.ready))
            .to_string()
    }
}

impl Drop for Ready {
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_rm() -> Ready {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hotpath"));
    cmd.arg("rm")
        .arg("--ready-line")
        .arg("--metrics-port")
        .arg("0");
    cmd.args(set_args(&[
        (
            "yarn.resourcemanager.resource-tracker.address",
            "127.0.0.1:0".into(),
        ),
        ("yarn.resourcemanager.address", "127.0.0.1:0".into()),
        (
            "yarn.resourcemanager.scheduler.address",
            "127.0.0.1:0".into(),
        ),
        (
            "yarn.resourcemanager.nodemanagers.heartbeat-interval-ms",
            "200".into(),
        ),
        (
            "hotpath.rm.completion-log.dir",
            dir.path().join("log").display().to_string(),
        ),
    ]));
    Ready::spawn(cmd, dir)
}

fn start_agent(rt: &str, ip: &str) -> Ready {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hotpath"));
    cmd.arg("agent").arg("--ready-line");
    cmd.args(set_args(&[
        ("yarn.resourcemanager.resource-tracker.address", rt.into()),
        ("yarn.nodemanager.address", format!("{ip}:0")),
        ("yarn.nodemanager.webapp.address", format!("{ip}:0")),
        ("hotpath.agent.ipc.address", format!("{ip}:0")),
        (
            "yarn.nodemanager.local-dirs",
            d.join("local").display().to_string(),
        ),
        (
            "yarn.nodemanager.log-dirs",
            d.join("logs").display().to_string(),
        ),
        ("yarn.nodemanager.resource.memory-mb", "4096".into()),
        ("yarn.nodemanager.resource.cpu-vcores", "8".into()),
        (
            "hotpath.agent.control-socket",
            d.join("agent.sock").display().to_string(),
        ),
        (
            "yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage",
            "100".into(),
        ),
    ]));
    Ready::spawn(cmd, dir)
}

fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

struct Cluster {
    client: Peer,
    agents: Vec<String>,
    _agents: Vec<Ready>,
    _rm: Ready,
}

fn cluster() -> Cluster {
    let rm = start_rm();
    let rt = rm.field("resource_tracker");
    let agents = vec![
        start_agent(&rt, "127.0.0.51"),
        start_agent(&rt, "127.0.0.52"),
    ];
    let ids: Vec<String> = agents.iter().map(|a| a.field("node_id")).collect();
    let mut client = Peer::start(
        Mode::YarnClient,
        &[
            "--rm",
            &rm.field("client"),
            "--scheduler",
            &rm.field("scheduler"),
        ],
    )
    .expect("yarn-client");
    wait_for(
        "both agents RUNNING at the RM",
        Duration::from_secs(60),
        || {
            let v = client.command("nodes").unwrap_or(Value::Null);
            let mut running: Vec<String> = v["nodes"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter(|n| n["state"] == "RUNNING")
                        .filter_map(|n| n["node_id"].as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default();
            running.sort();
            let mut want = ids.clone();
            want.sort();
            running == want
        },
    );
    Cluster {
        client,
        agents: ids,
        _agents: agents,
        _rm: rm,
    }
}

impl Cluster {
    fn run(&mut self, words: &str, timeout_s: u32) -> (Value, Value) {
        let submitted = self
            .client
            .command(&format!("app-submit {words}"))
            .unwrap_or_else(|e| panic!("app-submit: {e}"));
        let id = submitted["app_id"].as_str().expect("app_id").to_owned();
        let done = self
            .client
            .command(&format!("app-wait {id} {timeout_s}"))
            .unwrap_or_else(|e| panic!("app-wait: {e}"));
        assert_eq!(done["timed_out"], false, "{done}");
        (submitted, done)
    }
}

#[test]
fn yarn_client_runs_shell_am_on_hotpath_rm_and_agents_with_exact_exit_statuses() {
    let mut c = cluster();
    let dir = tempfile::tempdir().unwrap();
    let result = dir.path().join("result.json");
    let (submitted, done) = c.run(
        &format!(
            "containers=8 exit=3:7,6:2 stop=5 container_mb=1024 result={}",
            result.display()
        ),
        180,
    );
    assert_eq!(done["state"], "FINISHED", "{done}");
    assert_eq!(done["final_status"], "SUCCEEDED", "{done}");
    assert_eq!(done["queue"], "default", "{done}");
    assert_eq!(done["type"], "HOTPATH-SHELL", "{done}");
    let app_id = submitted["app_id"].as_str().unwrap();
    assert_eq!(
        done["current_attempt_id"],
        format!("appattempt_{}_000001", &app_id["application_".len()..]),
        "{done}"
    );
    let r = read_json(&result);
    assert_eq!(r["unexpected"], Value::Array(vec![]), "{r}");
    assert_eq!(r["errors"], Value::Array(vec![]), "{r}");
    assert_eq!(r["attempt"], 1, "{r}");
    let mut by_index = BTreeMap::new();
    for comp in r["completions"].as_array().unwrap() {
        let i = comp["index"].as_u64().unwrap();
        assert!(
            by_index.insert(i, comp.clone()).is_none(),
            "container {i} completed twice: {r}"
        );
    }
    assert_eq!(by_index.len(), 8, "{r}");
    for (i, comp) in &by_index {
        let want = match i {
            3 => 7,
            6 => 2,
            5 => -105,
            _ => 0,
        };
        assert_eq!(comp["exit_status"], want, "container {i}: {comp}");
        assert_eq!(comp["state"], "COMPLETE", "{comp}");
        // Container ids are the attempt's: AM is 000001, the shell containers follow.
        let cid = comp["container_id"].as_str().unwrap();
        assert!(
            cid.starts_with(&format!(
                "container_{}_01_",
                &app_id["application_".len()..]
            )),
            "{cid}"
        );
        assert!(!cid.ends_with("_000001"), "{cid} is the AM container's id");
    }
    let nodes: std::collections::BTreeSet<&str> = by_index
        .values()
        .map(|c| c["node_id"].as_str().unwrap())
        .collect();
    for a in &c.agents {
        assert!(nodes.contains(a.as_str()), "{a} ran none of {nodes:?}");
    }
    // The application is listed as finished, and the nodes are idle again.
    let apps = c.client.command("apps").unwrap();
    assert!(
        apps["apps"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["app_id"] == app_id && a["state"] == "FINISHED"),
        "{apps}"
    );
    wait_for("containers released", Duration::from_secs(30), || {
        let v = c.client.command("nodes").unwrap();
        v["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|n| n["containers"] == 0 && n["used"]["memory_mb"] == 0)
    });
}
