//! A real YARN application under `hotpath rm`: Hadoop's `YarnClient` (the peer's `yarn-client`
//! mode) submits the peer's ShellAm application to `hotpath rm`'s ApplicationClientProtocol;
//! the RM schedules the AM container on one of two `hotpath agent`s and starts it
//! (startContainers with a container token and NMToken it minted, the AMRMToken in the launch
//! context's credentials); the AM registers and allocates through ApplicationMasterProtocol
//! with TOKEN authentication, starts its shell containers on both agents, and unregisters.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use peer_harness::{Mode, Peer};

use crate::daemon;
use daemon::{agent_running, processes_with, start_agent, start_rm_daemon, Daemon};
use serde_json::Value;

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {path:?}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parse {path:?}: {e}: {text}"))
}

fn start_rm() -> Daemon {
    start_rm_at("127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0")
}

fn start_rm_at(rt: &str, client: &str, scheduler: &str) -> Daemon {
    start_rm_with(rt, client, scheduler, &[])
}

fn start_rm_with(rt: &str, client: &str, scheduler: &str, extra: &[(&str, String)]) -> Daemon {
    start_rm_daemon(rt, client, scheduler, extra)
}

fn http_get(addr: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
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
    scheduler: String,
    _agents: Vec<Daemon>,
    _rm: Daemon,
}

fn cluster() -> Cluster {
    cluster_with(start_rm())
}

fn cluster_with(rm: Daemon) -> Cluster {
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
        scheduler: rm.field("scheduler"),
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
    // /metrics: the application by state, and the two new IPC servers' counters.
    // (FINISHING until the AM container's exit reaches the RM: clients see FINISHED already.)
    let addr = c._rm.field("metrics");
    wait_for("FINISHED in /metrics", Duration::from_secs(30), || {
        http_get(&addr, "/metrics").contains("hotpath_rm_applications{state=\"FINISHED\"} 1")
    });
    let m = http_get(&addr, "/metrics");
    assert!(m.contains("server=\"scheduler\""), "{m}");
    assert!(m.contains("server=\"client\""), "{m}");
    wait_for("containers released", Duration::from_secs(30), || {
        let v = c.client.command("nodes").unwrap();
        v["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|n| n["containers"] == 0 && n["used"]["memory_mb"] == 0)
    });
}

/// A file named `name` in a directory named `parent` somewhere under `root`.
fn find_file(root: &Path, parent: &str, name: &str) -> Option<std::path::PathBuf> {
    let rd = std::fs::read_dir(root).ok()?;
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            if p.file_name().is_some_and(|f| f == parent) && p.join(name).is_file() {
                return Some(p.join(name));
            }
            if let Some(f) = find_file(&p, parent, name) {
                return Some(f);
            }
        }
    }
    None
}

/// An ApplicationMasterProtocol client with `token` (or SIMPLE without one), as `user`.
fn amp_client(
    addr: &str,
    token: Option<&hadoop_wire::token::Token>,
    user: &str,
) -> ipc::client::Client {
    use hadoop_wire::sasl::client::{ClientAuth, TokenCredential};
    use hadoop_wire::sasl::Qop;
    ipc::client::Client::new(
        addr.parse().unwrap(),
        ipc::client::ClientConfig {
            protocol: hadoop_wire::yarn::APPLICATION_MASTER_PROTOCOL.into(),
            protocol_version: 1,
            user: user.into(),
            auth: match token {
                Some(t) => ClientAuth::token(
                    TokenCredential {
                        identifier: t.identifier.clone(),
                        password: t.password.clone(),
                    },
                    vec![Qop::Auth],
                ),
                None => ClientAuth::default(),
            },
            max_connect_attempts: 1,
            call_timeout: Duration::from_secs(10),
            ..Default::default()
        },
    )
}

fn amp_error(c: &ipc::client::Client, method: &str, body: Vec<u8>) -> String {
    match c.call(method, &body) {
        Ok(_) => panic!("{method} succeeded"),
        Err(e) => e.to_string(),
    }
}

/// Processes whose working directory is under an agent's application dirs (containers run
/// in theirs). Unique per test, unlike application ids, which repeat when two tests' RMs
/// start in the same millisecond.
fn container_processes(c: &Cluster) -> usize {
    let roots: Vec<std::path::PathBuf> = c
        ._agents
        .iter()
        .map(|a| a.dir().join("local").join("usercache"))
        .collect();
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return 0;
    };
    rd.flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter_map(|e| std::fs::read_link(e.path().join("cwd")).ok())
        .filter(|cwd| roots.iter().any(|r| cwd.starts_with(r)))
        .count()
}

fn cli(c: &mut Cluster, args: &str) -> (i64, String) {
    let v = c
        .client
        .command(&format!("cli {args}"))
        .unwrap_or_else(|e| panic!("cli {args}: {e}"));
    (
        v["exit_code"].as_i64().unwrap(),
        format!(
            "{}{}",
            v["stdout"].as_str().unwrap(),
            v["stderr"].as_str().unwrap()
        ),
    )
}

#[test]
fn yarn_cli_lists_reports_and_kills_and_bad_submissions_fail_as_in_java() {
    let mut c = cluster();
    // yarn node -list -all
    let (rc, out) = cli(&mut c, "node -list -all");
    assert_eq!(rc, 0, "{out}");
    assert!(out.contains("Total Nodes:2"), "{out}");
    for a in &c.agents {
        assert!(out.contains(a.as_str()), "{a} not in {out}");
    }
    let m = c.client.command("metrics").unwrap();
    assert_eq!(m["active"], 2, "{m}");
    let q = c.client.command("queue").unwrap();
    assert_eq!(q["queue"], "default", "{q}");
    assert_eq!(q["state"], "RUNNING", "{q}");
    let n = c.client.command("new-app").unwrap();
    assert_eq!(n["maximum_capability"]["memory_mb"], 8192, "{n}");
    assert_eq!(n["maximum_capability"]["vcores"], 4, "{n}");

    // A resource over the maximum allocation: Java's exception from submitApplication.
    let dir = tempfile::tempdir().unwrap();
    let result = dir.path().join("result.json");
    let e = c
        .client
        .command_expect_error(&format!(
            "app-submit am_mb=9000 result={}",
            result.display()
        ))
        .unwrap();
    assert_eq!(
        e.class, "org.apache.hadoop.yarn.exceptions.InvalidResourceRequestException",
        "{e:?}"
    );
    assert!(
        e.message.as_deref().unwrap_or("").contains(
            "Requested resource=<memory:9000, vCores:1>, maximum allowed allocation=<memory:8192, vCores:4>"
        ),
        "{e:?}"
    );
    // An unknown queue: the application is rejected (FAILED), as the CapacityScheduler does,
    // and YarnClient's submitApplication reports it with the diagnostics.
    let e = c
        .client
        .command_expect_error(&format!(
            "app-submit queue=nope result={}",
            result.display()
        ))
        .unwrap();
    assert_eq!(
        e.class, "org.apache.hadoop.yarn.exceptions.YarnException",
        "{e:?}"
    );
    let msg = e.message.unwrap_or_default();
    let id = msg
        .split_whitespace()
        .find(|w| w.starts_with("application_"))
        .unwrap_or_else(|| panic!("{msg}"))
        .to_string();
    assert_eq!(
        msg,
        format!(
            "Failed to submit {id} to YARN : Application {id} submitted by user root to unknown queue: nope"
        )
    );
    let r = c.client.command(&format!("app-report {id}")).unwrap();
    assert_eq!(r["state"], "FAILED", "{r}");
    assert_eq!(r["queue"], "nope", "{r}");

    // A running application: listed, reported, killed; the nodes clean it up.
    let shared = dir.path().join("shared");
    let s = c
        .client
        .command(&format!(
            "app-submit containers=2 hold=0,1 shared={} result={}",
            shared.display(),
            result.display()
        ))
        .unwrap();
    let id = s["app_id"].as_str().unwrap().to_string();
    wait_for(
        "both held containers running",
        Duration::from_secs(90),
        || {
            std::fs::read_dir(&shared)
                .map(|d| {
                    d.flatten()
                        .filter(|e| e.file_name().to_string_lossy().starts_with("held-"))
                        .count()
                })
                .unwrap_or(0)
                == 2
        },
    );
    let held = shared.join("held-").display().to_string();
    assert!(processes_with(&held) >= 2, "the held shells run");
    assert!(
        container_processes(&c) >= 3,
        "the AM and the shells run from the agents' dirs"
    );
    let (rc, out) = cli(&mut c, "application -list");
    assert_eq!(rc, 0, "{out}");
    assert!(out.contains(&id) && out.contains("RUNNING"), "{out}");
    let (rc, out) = cli(&mut c, &format!("application -status {id}"));
    assert_eq!(rc, 0, "{out}");
    assert!(out.contains("State : RUNNING"), "{out}");
    assert!(out.contains("Queue : default"), "{out}");
    assert!(out.contains("Application-Type : HOTPATH-SHELL"), "{out}");
    // The AM's own AMRMToken, from its container's credentials on the agent: a stale
    // responseId and a second registration get Java's exceptions; no token at all is refused.
    use hadoop_wire::pb::hadoop::yarn::{
        AllocateRequestProto, RegisterApplicationMasterRequestProto,
    };
    use hadoop_wire::yarn::amp;
    use prost::Message as _;
    let ts = &id["application_".len()..];
    let am = format!("container_{ts}_01_000001");
    let attempt = format!("appattempt_{ts}_000001");
    let file = c
        ._agents
        .iter()
        .find_map(|a| find_file(a.dir(), &am, "container_tokens"))
        .expect("the AM container's container_tokens");
    let creds =
        hadoop_wire::token::credentials::Credentials::read(&std::fs::read(&file).unwrap()).unwrap();
    let token = creds
        .tokens_of_kind("YARN_AM_RM_TOKEN")
        .next()
        .expect("AMRMToken in the AM's credentials")
        .clone();
    let amp = amp_client(&c.scheduler, Some(&token), &attempt);
    let stale = AllocateRequestProto {
        response_id: Some(1_000_000),
        ..Default::default()
    };
    let e = amp_error(&amp, amp::ALLOCATE, stale.encode_to_vec());
    assert!(
        e.contains("org.apache.hadoop.yarn.exceptions.InvalidApplicationMasterRequestException")
            && e.contains(&format!(
                "Invalid responseId in AllocateRequest from application attempt: {attempt} expect responseId to be"
            ))
            && e.contains("but get 1000000"),
        "{e}"
    );
    let e = amp_error(
        &amp,
        amp::REGISTER_APPLICATION_MASTER,
        RegisterApplicationMasterRequestProto::default().encode_to_vec(),
    );
    assert!(
        e.contains("InvalidApplicationMasterRequestException")
            && e.contains(&format!("Application Master is already registered : {id}")),
        "{e}"
    );
    let e = amp_error(
        &amp_client(&c.scheduler, None, "mallory"),
        amp::ALLOCATE,
        AllocateRequestProto::default().encode_to_vec(),
    );
    assert!(
        e.contains("SIMPLE authentication is not enabled.  Available:[TOKEN]"),
        "{e}"
    );
    // yarn applicationattempt / yarn container: the attempt and its live containers.
    let (rc, out) = cli(&mut c, &format!("applicationattempt -list {id}"));
    assert_eq!(rc, 0, "{out}");
    assert!(
        out.contains("Total number of application attempts :1"),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.contains(&attempt) && l.contains("RUNNING") && l.contains(&am)),
        "{out}"
    );
    let (rc, out) = cli(&mut c, &format!("applicationattempt -status {attempt}"));
    assert_eq!(rc, 0, "{out}");
    for want in [
        format!("ApplicationAttempt-Id : {attempt}"),
        "State : RUNNING".into(),
        format!("AMContainer : {am}"),
    ] {
        assert!(out.contains(&want), "{want} not in {out}");
    }
    let (rc, out) = cli(&mut c, &format!("container -list {attempt}"));
    assert_eq!(rc, 0, "{out}");
    assert!(out.contains("Total number of containers :3"), "{out}");
    let listed: Vec<&str> = out
        .lines()
        .filter(|l| l.trim_start().starts_with("container_"))
        .collect();
    assert_eq!(listed.len(), 3, "{out}");
    assert!(listed.iter().all(|l| l.contains("RUNNING")), "{out}");
    assert!(listed.iter().any(|l| l.contains(&am)), "{out}");
    let (rc, out) = cli(&mut c, &format!("container -status {am}"));
    assert_eq!(rc, 0, "{out}");
    for want in [
        format!("Container-Id : {am}"),
        "State : RUNNING".into(),
        "Execution-Type : GUARANTEED".into(),
        format!("/node/containerlogs/{am}/root"),
    ] {
        assert!(out.contains(&want), "{want} not in {out}");
    }
    let gone = format!("container_{ts}_01_000099");
    let (rc, out) = cli(&mut c, &format!("container -status {gone}"));
    assert_ne!(rc, 0, "{out}");
    assert!(
        out.contains(&format!("Container with id '{gone}' doesn't exist")),
        "{out}"
    );
    let (rc, out) = cli(
        &mut c,
        &format!("applicationattempt -status appattempt_{ts}_000002"),
    );
    assert_ne!(rc, 0, "{out}");
    assert!(
        out.contains(&format!(
            "Application Attempt with id 'appattempt_{ts}_000002' doesn't exist"
        )),
        "{out}"
    );
    let (rc, out) = cli(&mut c, &format!("application -kill {id}"));
    assert_eq!(rc, 0, "{out}");
    assert!(out.contains(&format!("Killing application {id}")), "{out}");
    let r = c.client.command(&format!("app-report {id}")).unwrap();
    assert_eq!(r["state"], "KILLED", "{r}");
    // The killed attempt: KILLED with a finish time, and no live containers left.
    let (rc, out) = cli(&mut c, &format!("applicationattempt -status {attempt}"));
    assert_eq!(rc, 0, "{out}");
    assert!(out.contains("State : KILLED"), "{out}");
    let (rc, out) = cli(&mut c, &format!("container -list {attempt}"));
    assert_eq!(rc, 0, "{out}");
    assert!(out.contains("Total number of containers :0"), "{out}");
    assert_eq!(r["final_status"], "KILLED", "{r}");
    assert_eq!(r["diagnostics"], "Application killed by user.", "{r}");
    // The AM and both held shells are gone from the machine: applications_to_cleanup.
    wait_for(
        "the application's processes end",
        Duration::from_secs(60),
        || processes_with(&held) == 0 && container_processes(&c) == 0,
    );
    // The killed attempt's AMRMToken no longer authenticates.
    let e = amp_error(
        &amp_client(&c.scheduler, Some(&token), &attempt),
        amp::ALLOCATE,
        AllocateRequestProto::default().encode_to_vec(),
    );
    assert!(
        e.contains(&format!("{attempt} not found in AMRMTokenSecretManager.")),
        "{e}"
    );
    wait_for("the RM's nodes idle", Duration::from_secs(30), || {
        let v = c.client.command("nodes").unwrap();
        v["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|n| n["containers"] == 0)
    });
}

#[test]
fn yarn_applicationattempt_fail_fails_the_attempt_and_the_next_one_runs() {
    let mut c = cluster();
    let dir = tempfile::tempdir().unwrap();
    let s = c
        .client
        .command(&format!(
            "app-submit containers=1 sleep=0:300 result={}",
            dir.path().join("result.json").display()
        ))
        .unwrap();
    let id = s["app_id"].as_str().unwrap().to_string();
    let ts = &id["application_".len()..];
    let (first, second) = (
        format!("appattempt_{ts}_000001"),
        format!("appattempt_{ts}_000002"),
    );
    let attempts = |c: &mut Cluster| cli(c, &format!("applicationattempt -list {id}")).1;
    let line_of = |out: &str, attempt: &str| -> String {
        out.lines()
            .find(|l| l.contains(attempt))
            .unwrap_or_default()
            .to_string()
    };
    wait_for("the first attempt RUNNING", Duration::from_secs(90), || {
        line_of(&attempts(&mut c), &first).contains("RUNNING")
    });
    // yarn applicationattempt -fail: Hadoop's CLI calls failApplicationAttempt.
    let (rc, out) = cli(&mut c, &format!("applicationattempt -fail {first}"));
    assert_eq!(rc, 0, "{out}");
    wait_for(
        "the second attempt RUNNING",
        Duration::from_secs(90),
        || line_of(&attempts(&mut c), &second).contains("RUNNING"),
    );
    let out = attempts(&mut c);
    assert!(
        out.contains("Total number of application attempts :2"),
        "{out}"
    );
    assert!(line_of(&out, &first).contains("FAILED"), "{out}");
    let (rc, out) = cli(&mut c, &format!("applicationattempt -status {first}"));
    assert_eq!(rc, 0, "{out}");
    assert!(out.contains("Attempt failed by user."), "{out}");
    let r = c.client.command(&format!("app-report {id}")).unwrap();
    assert_eq!(r["state"], "RUNNING", "{r}");
    assert_eq!(r["current_attempt_id"], second.as_str(), "{r}");
    // An attempt that already ended is left alone; the application goes on.
    let (rc, out) = cli(&mut c, &format!("applicationattempt -fail {first}"));
    assert_eq!(rc, 0, "{out}");
    let r = c.client.command(&format!("app-report {id}")).unwrap();
    assert_eq!(r["current_attempt_id"], second.as_str(), "{r}");
    let (rc, out) = cli(&mut c, &format!("application -kill {id}"));
    assert_eq!(rc, 0, "{out}");
}

#[test]
fn a_failed_am_gets_its_second_attempt_and_a_second_failure_fails_the_application() {
    let mut c = cluster();
    let dir = tempfile::tempdir().unwrap();
    let result = dir.path().join("result.json");
    let (s, done) = c.run(
        &format!("containers=2 fail_attempt=1 result={}", result.display()),
        180,
    );
    let id = s["app_id"].as_str().unwrap();
    assert_eq!(done["state"], "FINISHED", "{done}");
    assert_eq!(done["final_status"], "SUCCEEDED", "{done}");
    assert_eq!(
        done["current_attempt_id"],
        format!("appattempt_{}_000002", &id["application_".len()..]),
        "{done}"
    );
    let r = read_json(&result);
    assert_eq!(r["attempt"], 2, "{r}");
    assert_eq!(r["unexpected"], Value::Array(vec![]), "{r}");

    // Both attempts exit 3 (yarn.resourcemanager.am.max-attempts is 2).
    let result2 = dir.path().join("result2.json");
    let (s, done) = c.run(
        &format!("containers=1 fail_attempt=2 result={}", result2.display()),
        180,
    );
    let id = s["app_id"].as_str().unwrap();
    assert_eq!(done["state"], "FAILED", "{done}");
    assert_eq!(done["final_status"], "FAILED", "{done}");
    let d = done["diagnostics"].as_str().unwrap();
    assert!(
        d.starts_with(&format!(
            "Application {id} failed 2 times (global limit =2; local limit is =2) due to AM Container for appattempt_{}_000002 exited with  exitCode: 3",
            &id["application_".len()..]
        )),
        "{d}"
    );
    assert!(
        !result2.exists(),
        "no attempt got as far as writing a result"
    );
}

#[test]
fn a_java_node_manager_under_hotpath_rm_runs_the_am_and_its_containers() {
    let rm = start_rm();
    let rt = rm.field("resource_tracker");
    let nm = Peer::start(Mode::YarnNm, &["--rm", &rt]).expect("yarn-nm");
    let nm_id = nm.field_str("node_id").unwrap().to_string();
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
        "the Java NM RUNNING at the RM",
        Duration::from_secs(60),
        || {
            let v = client.command("nodes").unwrap_or(Value::Null);
            v["nodes"].as_array().is_some_and(|a| {
                a.iter()
                    .any(|n| n["node_id"] == nm_id.as_str() && n["state"] == "RUNNING")
            })
        },
    );
    let dir = tempfile::tempdir().unwrap();
    let result = dir.path().join("result.json");
    let s = client
        .command(&format!(
            "app-submit containers=4 exit=1:5 container_mb=1024 result={}",
            result.display()
        ))
        .unwrap();
    let id = s["app_id"].as_str().unwrap().to_string();
    let done = client
        .command(&format!("app-wait {id} 180"))
        .unwrap_or_else(|e| panic!("app-wait: {e}\n{}", nm.log_tail(80)));
    assert_eq!(done["timed_out"], false, "{done}\n{}", nm.log_tail(80));
    assert_eq!(done["state"], "FINISHED", "{done}\n{}", nm.log_tail(80));
    assert_eq!(done["final_status"], "SUCCEEDED", "{done}");
    let r = read_json(&result);
    assert_eq!(r["unexpected"], Value::Array(vec![]), "{r}");
    let comps = r["completions"].as_array().unwrap();
    assert_eq!(comps.len(), 4, "{r}");
    for comp in comps {
        let want = if comp["index"] == 1 { 5 } else { 0 };
        assert_eq!(comp["exit_status"], want, "{comp}");
        assert_eq!(comp["node_id"], nm_id.as_str(), "{comp}");
    }
}

#[test]
fn after_an_rm_restart_old_applications_are_unknown_and_their_containers_end() {
    let mut c = cluster();
    let dir = tempfile::tempdir().unwrap();
    let shared = dir.path().join("shared");
    let result = dir.path().join("result.json");
    let s = c
        .client
        .command(&format!(
            "app-submit containers=2 hold=0,1 shared={} result={}",
            shared.display(),
            result.display()
        ))
        .unwrap();
    let id = s["app_id"].as_str().unwrap().to_string();
    wait_for(
        "both held containers running",
        Duration::from_secs(90),
        || {
            std::fs::read_dir(&shared)
                .map(|d| {
                    d.flatten()
                        .filter(|e| e.file_name().to_string_lossy().starts_with("held-"))
                        .count()
                })
                .unwrap_or(0)
                == 2
        },
    );
    let held = shared.join("held-").display().to_string();
    assert!(processes_with(&held) >= 2);
    assert!(container_processes(&c) >= 3);
    // The RM dies (SIGKILL) and a new one starts on the same addresses.
    let (rt, client) = (c._rm.field("resource_tracker"), c._rm.field("client"));
    let _ = c._rm.child.kill();
    let _ = c._rm.child.wait();
    // The killed process's io_uring rings are torn down by the kernel after it exits, and
    // their listeners with them: wait until the addresses can be bound again.
    wait_for(
        "the old RM's addresses to be free",
        Duration::from_secs(30),
        || {
            [&rt, &client, &c.scheduler]
                .iter()
                .all(|a| std::net::TcpListener::bind(a.as_str()).is_ok())
        },
    );
    c._rm = start_rm_at(&rt, &client, &c.scheduler);
    // Recovery is off (Java's default): the old application is unknown to the new RM.
    let t0 = Instant::now();
    loop {
        match c.client.command("metrics") {
            Ok(_) => break,
            Err(e) => {
                eprintln!("metrics after the restart: {e}");
                assert!(
                    t0.elapsed() < Duration::from_secs(90),
                    "the new RM never answered"
                );
                std::thread::sleep(Duration::from_millis(500));
            }
        }
    }
    let e = c
        .client
        .command_expect_error(&format!("app-report {id}"))
        .unwrap();
    assert_eq!(
        e.class, "org.apache.hadoop.yarn.exceptions.ApplicationNotFoundException",
        "{e:?}"
    );
    assert_eq!(
        e.message.as_deref(),
        Some(format!("Application with id '{id}' doesn't exist in RM. Please check that the job submission was successful.").as_str())
    );
    // The agents re-register; the old application's AM and shells end.
    wait_for(
        "the old application's processes end",
        Duration::from_secs(90),
        || processes_with(&held) == 0 && container_processes(&c) == 0,
    );
    // And the new RM runs new applications.
    let result2 = dir.path().join("result2.json");
    let (_, done) = c.run(&format!("containers=2 result={}", result2.display()), 180);
    assert_eq!(done["final_status"], "SUCCEEDED", "{done}");
}

/// `yarn.resourcemanager.recovery.enabled`: the RM is killed −9 while an application runs and
/// its containers keep running on the agents; one of them completes while no RM is up. The
/// new RM recovers the application from its state store, the agents re-register with their
/// containers, the same AM attempt re-registers (Java's AMRMClient does so on
/// ApplicationMasterNotRegisteredException) and the application finishes SUCCEEDED with the
/// exact exit statuses, the one made during the outage included.
#[test]
fn with_recovery_an_rm_restart_keeps_the_running_application_and_its_containers() {
    let store = tempfile::tempdir().unwrap();
    let recovery = [
        ("yarn.resourcemanager.recovery.enabled", "true".to_string()),
        (
            "hotpath.rm.state-store.dir",
            store.path().join("rmstore").display().to_string(),
        ),
    ];
    let mut c = cluster_with(start_rm_with(
        "127.0.0.1:0",
        "127.0.0.1:0",
        "127.0.0.1:0",
        &recovery,
    ));
    let dir = tempfile::tempdir().unwrap();
    let result = dir.path().join("result.json");
    let s = c
        .client
        .command(&format!(
            "app-submit containers=3 exit=0:5 sleep=0:4,1:27,2:27 rm_retry_ms=500 result={}",
            result.display()
        ))
        .unwrap();
    let id = s["app_id"].as_str().unwrap().to_string();
    // Two shells per container carry the command line (the launch script's and the
    // command's own).
    wait_for("the three shells running", Duration::from_secs(90), || {
        processes_with("sleep 27") >= 4 && processes_with("sleep 4") >= 1
    });
    let am_before = container_processes(&c);
    assert!(am_before >= 4, "AM and 3 shells: {am_before}");
    let sleepers = processes_with("sleep 27");
    let t_sleepers = Instant::now();
    // The RM dies; shell 0 completes (exit 5) while none is up; a new one starts on the
    // same addresses and the same state store.
    let (rt, client) = (c._rm.field("resource_tracker"), c._rm.field("client"));
    let _ = c._rm.child.kill();
    let _ = c._rm.child.wait();
    wait_for(
        "shell 0 exits while the RM is down",
        Duration::from_secs(30),
        || processes_with("sleep 4") == 0,
    );
    c._rm = start_rm_with(&rt, &client, &c.scheduler, &recovery);
    let t0 = Instant::now();
    let report = loop {
        match c.client.command(&format!("app-report {id}")) {
            Ok(v) => break v,
            Err(e) => {
                eprintln!("app-report after the restart: {e}");
                assert!(
                    t0.elapsed() < Duration::from_secs(90),
                    "the new RM never answered"
                );
                std::thread::sleep(Duration::from_millis(500));
            }
        }
    };
    assert_ne!(report["state"], "FAILED", "{report}");
    assert_ne!(report["state"], "KILLED", "{report}");
    // The shells were not killed by the restart: none has gone yet, unless the restart took
    // so long (a loaded machine) that they may have ended by themselves; their exit statuses
    // below (0, not a kill's) are the proof either way.
    let now_sleeping = processes_with("sleep 27");
    assert!(
        now_sleeping == sleepers || t_sleepers.elapsed() > Duration::from_secs(20),
        "the running shells survive: {now_sleeping} of {sleepers} after {:?}",
        t_sleepers.elapsed()
    );
    let done = c
        .client
        .command(&format!("app-wait {id} 150"))
        .unwrap_or_else(|e| panic!("app-wait: {e}"));
    assert_eq!(done["timed_out"], false, "{done}");
    assert_eq!(done["state"], "FINISHED", "{done}");
    assert_eq!(done["final_status"], "SUCCEEDED", "{done}");
    let r = read_json(&result);
    assert_eq!(r["final_status"], "SUCCEEDED", "{r}");
    assert_eq!(r["attempt"], 1, "the same attempt finished the job: {r}");
    let mut exits: Vec<(i64, i64)> = r["completions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["index"].as_i64().unwrap(),
                x["exit_status"].as_i64().unwrap(),
            )
        })
        .collect();
    exits.sort();
    assert_eq!(exits, vec![(0, 5), (1, 0), (2, 0)], "{r}");
    // The new RM's metrics count the recovered application, and new applications get ids
    // that do not collide with it.
    let result2 = dir.path().join("result2.json");
    let (s2, done2) = c.run(&format!("containers=1 result={}", result2.display()), 180);
    assert_eq!(done2["final_status"], "SUCCEEDED", "{done2}");
    assert_ne!(s2["app_id"], id.as_str());
}

#[test]
fn an_agent_killed_minus_9_is_lost_its_containers_reported_to_the_am_and_replaced_elsewhere() {
    // A short NodeManager expiry, so that the dead agent is LOST within seconds.
    let rm = start_rm_with(
        "127.0.0.1:0",
        "127.0.0.1:0",
        "127.0.0.1:0",
        &[("yarn.nm.liveness-monitor.expiry-interval-ms", "3000".into())],
    );
    let rt = rm.field("resource_tracker");
    let stay = start_agent(&rt, "127.0.0.55");
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
    let running_nodes = |client: &mut Peer| -> Vec<String> {
        let v = client.command("nodes").unwrap_or(Value::Null);
        v["nodes"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter(|n| n["state"] == "RUNNING")
                    .filter_map(|n| n["node_id"].as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let stay_id = stay.field("node_id");
    wait_for("the first agent RUNNING", Duration::from_secs(60), || {
        running_nodes(&mut client) == vec![stay_id.clone()]
    });
    let dir = tempfile::tempdir().unwrap();
    let result = dir.path().join("result.json");
    let sleeps: Vec<String> = (0..6).map(|i| format!("{i}:12")).collect();
    let submitted = client
        .command(&format!(
            "app-submit containers=6 sleep={} container_mb=1024 result={}",
            sleeps.join(","),
            result.display()
        ))
        .unwrap();
    let id = submitted["app_id"].as_str().unwrap().to_string();
    // The AM runs on the only node; then a second agent joins and takes the containers that do
    // not fit on the first.
    wait_for("the AM on the first agent", Duration::from_secs(60), || {
        agent_running(&stay) >= 1
    });
    let mut gone = start_agent(&rt, "127.0.0.56");
    let gone_id = gone.field("node_id");
    // Every container placed and running (AM + 6), so that no start goes to the dead node.
    wait_for("all containers running", Duration::from_secs(90), || {
        agent_running(&stay) + agent_running(&gone) >= 7
    });
    assert!(agent_running(&gone) >= 1, "nothing ran on the second agent");
    gone.kill9();
    let done = client
        .command(&format!("app-wait {id} 180"))
        .unwrap_or_else(|e| panic!("app-wait: {e}"));
    assert_eq!(done["timed_out"], false, "{done}");
    assert_eq!(done["final_status"], "SUCCEEDED", "{done}");
    let r = read_json(&result);
    let comps = r["completions"].as_array().unwrap();
    // The RM reported the dead node's containers to the AM in allocate: ABORTED, "released on
    // a *lost* node", each from that node.
    let lost: Vec<&Value> = comps.iter().filter(|c| c["exit_status"] == -100).collect();
    assert!(!lost.is_empty(), "no container was reported lost: {r}");
    for l in &lost {
        assert_eq!(l["node_id"], gone_id.as_str(), "{l}");
    }
    assert!(
        r["replacements"].as_u64().unwrap() >= lost.len() as u64,
        "{r}"
    );
    // Every index finally succeeded, the replacements on the surviving agent.
    let mut ok = std::collections::BTreeSet::new();
    for c in comps.iter().filter(|c| c["exit_status"] == 0) {
        ok.insert(c["index"].as_u64().unwrap());
        assert_ne!(c["node_id"], gone_id.as_str(), "{c}");
    }
    assert_eq!(ok.len(), 6, "{r}");
    assert!(
        !running_nodes(&mut client).contains(&gone_id),
        "the killed agent is still RUNNING at the RM"
    );
}

#[test]
fn an_am_killed_minus_9_gets_a_second_attempt_that_finishes_the_job() {
    let mut c = cluster();
    let dir = tempfile::tempdir().unwrap();
    let result = dir.path().join("result.json");
    let submitted = c
        .client
        .command(&format!(
            "app-submit containers=2 sleep=0:6,1:6 result={}",
            result.display()
        ))
        .unwrap();
    let id = submitted["app_id"].as_str().unwrap().to_string();
    // The first attempt's AM container: container_<ts>_<n>_01_000001, its pid file written by
    // the agent that runs it (the pid leads the container's process group).
    let am = format!("container_{}_01_000001", &id["application_".len()..]);
    let mut pid_file = None;
    wait_for("the AM's pid file", Duration::from_secs(60), || {
        pid_file = c
            ._agents
            .iter()
            .find_map(|a| find_file(a.dir(), &am, &format!("{am}.pid")));
        pid_file.is_some()
    });
    let pid: i32 = std::fs::read_to_string(pid_file.unwrap())
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // SAFETY: kill(2) on the process group of a container this test's agents started.
    assert_eq!(unsafe { libc::kill(-pid, libc::SIGKILL) }, 0);
    let done = c
        .client
        .command(&format!("app-wait {id} 180"))
        .unwrap_or_else(|e| panic!("app-wait: {e}"));
    assert_eq!(done["timed_out"], false, "{done}");
    assert_eq!(done["state"], "FINISHED", "{done}");
    assert_eq!(done["final_status"], "SUCCEEDED", "{done}");
    assert_eq!(
        done["current_attempt_id"],
        format!("appattempt_{}_000002", &id["application_".len()..]),
        "{done}"
    );
    let r = read_json(&result);
    assert_eq!(r["attempt"], 2, "{r}");
    let ok = r["completions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["exit_status"] == 0)
        .count();
    assert_eq!(ok, 2, "{r}");
}
