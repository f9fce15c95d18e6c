//! A real YARN application on hotpath agents under a real Java ResourceManager: a
//! MiniYARNCluster with no NodeManagers of its own (`yarn-rm --profile agents`), two agents,
//! and the peer's ShellAm application (Hadoop's own AMRMClientAsync, NMClientAsync and
//! YarnClient). The RM's AMLauncher starts the AM on an agent through ContainerManagementProtocol
//! with its NMToken and container token; the AM starts its shell containers on both agents.
//!
//! One agent runs in this process (so the hostile cases can mint tokens under the keys the RM
//! gave it); the other is a `hotpath agent` child process, so it can be killed −9.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use nm_runtime::{Agent, AgentConfig};
use peer_harness::{Mode, Shared};
use serde_json::Value;

use crate::daemon;
use daemon::{agent_running, start_agent, Daemon};

static RM: Shared = Shared::new(Mode::YarnRm, &["--profile", "agents"]);

const KILLED_BY_APPMASTER: i64 = -105;

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

/// The RM's RUNNING nodes.
fn running_nodes(rm: &mut peer_harness::Peer) -> Vec<String> {
    let v = rm.command("nodes").unwrap_or(Value::Null);
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
    /// A `hotpath agent` child process.
    remote: Daemon,
}

fn cluster() -> Cluster {
    let rm = RM.lock().expect("yarn-rm --profile agents");
    let ready = rm.ready().clone();
    let rt = ready["resource_tracker"].as_str().unwrap().to_string();
    let (local, dir) = in_process_agent(rt.parse().unwrap(), "127.0.0.41");
    let remote = start_agent(&rt, "127.0.0.42");
    let mut c = Cluster {
        rm,
        local,
        _local_dir: dir,
        remote,
    };
    // Exactly these two: no node of an earlier test is still RUNNING at the RM.
    wait_for(
        "both agents registered, alone",
        Duration::from_secs(60),
        || {
            let mut nodes = c.rm_nodes();
            nodes.sort();
            let mut want = vec![c.local.node_id(), c.remote.field("node_id")];
            want.sort();
            c.local.shared().cm.lock().unwrap().has_keys() && nodes == want
        },
    );
    c
}

impl Cluster {
    fn rm_nodes(&mut self) -> Vec<String> {
        running_nodes(&mut self.rm)
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
        // The status query right after the start did not fail (`errors` is empty). Our
        // containers of `echo; exit` are often done by then (COMPLETE, where Java's slower
        // launch says RUNNING), and with the out-of-band heartbeat the completion can reach
        // the AM through the RM before the query's answer (then the AM records none), or the
        // RM has acknowledged it already (then the answer is "recently stopped").
        let st = comp["start_status_state"].as_str().unwrap_or("none");
        assert!(
            matches!(st, "RUNNING" | "COMPLETE" | "RECENTLY_STOPPED" | "none"),
            "{comp}"
        );
    }
    let nodes: std::collections::BTreeSet<String> = by_index
        .values()
        .map(|c| c["node_id"].as_str().unwrap().to_string())
        .collect();
    assert!(nodes.contains(&c.local.node_id()), "{nodes:?}");
    assert!(nodes.contains(&c.remote.field("node_id")), "{nodes:?}");
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
    // The debugging information the agent wrote in place of the script's ls/find steps.
    let (code, body) = http_get(
        &web,
        &format!("/ws/v1/node/containers/{}/logs/directory.info", on_local.1),
    );
    assert_eq!(code, 200, "{body}");
    for want in [
        "ls -l:\ntotal ",
        " launch_container.sh\n",
        "find -L . -maxdepth 5 -ls:\n",
        " ./container_tokens\n",
        " ./tmp\n",
        "broken symlinks(find -L . -maxdepth 5 -type l -ls):\n",
    ] {
        assert!(body.contains(want), "{want:?} not in {body}");
    }
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

// ---------------------------------------------------------------------------------------------
// Hostile callers, while a real application runs

use hadoop_wire::pb::hadoop::yarn::{
    StartContainerRequestProto, StartContainersRequestProto, StartContainersResponseProto,
};
use hadoop_wire::sasl::client::{ClientAuth, TokenCredential};
use hadoop_wire::sasl::Qop;
use hadoop_wire::token::identifier::NodeId;
use hadoop_wire::token::secret::MasterKey;
use hadoop_wire::yarn::cmp;
use ipc::client::{Client, ClientError};
use nm_core::ids::{AppId, AttemptId, ContainerId};
use prost::Message as _;

use crate::cmp as cmp_support;
use cmp_support::{now_ms, remote, wait_for, Minter};

fn token_client(m: &Minter<'_>, token: TokenCredential, a: AttemptId) -> Client {
    m.client_with(ClientAuth::token(token, vec![Qop::Auth]), &a.to_string())
}

fn start_call(
    c: &Client,
    reqs: Vec<StartContainerRequestProto>,
) -> Result<StartContainersResponseProto, ClientError> {
    let req = StartContainersRequestProto {
        start_container_request: reqs,
    };
    let resp = c.call(cmp::START_CONTAINERS, &req.encode_to_vec())?;
    Ok(StartContainersResponseProto::decode(resp.payload()).unwrap())
}

#[test]
fn hostile_callers_fail_as_java_fails_them_while_the_application_runs() {
    let mut c = cluster();
    let dir = tempfile::tempdir().unwrap();
    let result = dir.path().join("result.json");
    let sleeps: Vec<String> = (0..6).map(|i| format!("{i}:8")).collect();
    let submitted =
        c.rm.command(&format!(
            "app-submit containers=6 sleep={} container_mb=1024 result={}",
            sleeps.join(","),
            result.display()
        ))
        .unwrap();
    let app_id: AppId = submitted["app_id"].as_str().unwrap().parse().unwrap();
    let caller = Minter::new(&c.local, "root");
    let me = caller.node();
    let me_s = c.local.node_id();
    // Wait until the application has containers on this agent.
    wait_for(
        "containers on the local agent",
        Duration::from_secs(60),
        || {
            c.local
                .shared()
                .table
                .lock()
                .unwrap()
                .iter()
                .any(|x| x.id.app == app_id)
        },
    );
    let real = AttemptId {
        app: app_id,
        attempt: 1,
    };
    // 1. A wrong DIGEST response (the right NMToken identifier, a wrong password).
    let e = start_call(
        &token_client(&caller, caller.nm_token(real, &me, None, true), real),
        vec![],
    )
    .unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("javax.security.sasl.SaslException") && text.contains("DIGEST-MD5"),
        "{text}"
    );
    // 2. A forged NMToken: signed with a key the RM never issued. For an attempt this node
    // knows, Java checks it against the attempt's remembered key (a mismatched response);
    // for any other, no key exists ("generated illegally").
    let forged_key = MasterKey::new(0x5eed, vec![7; 8]).unwrap();
    let e = start_call(
        &token_client(
            &caller,
            caller.nm_token(real, &me, Some(&forged_key), false),
            real,
        ),
        vec![],
    )
    .unwrap_err();
    let text = e.to_string();
    assert!(text.contains("Mismatched response"), "{text}");
    let stranger = AttemptId {
        app: AppId {
            cluster_timestamp: app_id.cluster_timestamp,
            id: 9998,
        },
        attempt: 1,
    };
    let e = start_call(
        &token_client(
            &caller,
            caller.nm_token(stranger, &me, Some(&forged_key), false),
            stranger,
        ),
        vec![],
    )
    .unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("SecretManager$InvalidToken")
            && text.contains("seems to have been generated illegally"),
        "{text}"
    );
    // 3. An NMToken for another node.
    let elsewhere = NodeId::new("10.1.2.3", 8041);
    let e = start_call(
        &token_client(
            &caller,
            caller.nm_token(real, &elsewhere, None, false),
            real,
        ),
        vec![],
    )
    .unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("is not valid for current node manager"),
        "{text}"
    );
    // A fake application (the RM does not know it) for the container-token cases.
    let fake = AttemptId {
        app: AppId {
            cluster_timestamp: app_id.cluster_timestamp,
            id: 9999,
        },
        attempt: 1,
    };
    let client = token_client(&caller, caller.nm_token(fake, &me, None, false), fake);
    let cid = |n| ContainerId {
        app: fake.app,
        attempt: 1,
        id: n,
    };
    // 4. A container token for another node: the whole call fails with InvalidToken.
    let e = start_call(
        &client,
        vec![caller.start_request(cid(1), "10.1.2.3:8041", now_ms() + 600_000, "true")],
    )
    .unwrap_err();
    let (class, msg) = remote(e);
    assert_eq!(
        class,
        "org.apache.hadoop.security.token.SecretManager$InvalidToken"
    );
    assert!(
        msg.contains(&format!("Expected : {me_s} Found : 10.1.2.3:8041")),
        "{msg}"
    );
    // 5. An expired container token: a per-container failure.
    let r = start_call(
        &client,
        vec![caller.start_request(cid(2), &me_s, now_ms() - 1, "true")],
    )
    .unwrap();
    let m = r.failed_requests[0]
        .exception
        .as_ref()
        .unwrap()
        .message
        .clone()
        .unwrap();
    assert!(m.contains("This token is expired. current time is"), "{m}");
    // 6. A replayed start.
    let good = caller.start_request(cid(3), &me_s, now_ms() + 600_000, "true");
    let r = start_call(&client, vec![good.clone()]).unwrap();
    assert_eq!(r.succeeded_requests.len(), 1, "{r:?}");
    let r = start_call(&client, vec![good]).unwrap();
    let m = r.failed_requests[0]
        .exception
        .as_ref()
        .unwrap()
        .message
        .clone()
        .unwrap();
    assert!(
        m.contains("Attempt to relaunch the same container with id"),
        "{m}"
    );
    // The real application did not notice.
    let id = submitted["app_id"].as_str().unwrap();
    let done = c.rm.command(&format!("app-wait {id} 120")).unwrap();
    assert_eq!(done["final_status"], "SUCCEEDED", "{done}");
    let r = read_json(&result);
    assert_eq!(r["unexpected"], Value::Array(vec![]), "{r}");
    let statuses: Vec<i64> = r["completions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["exit_status"].as_i64().unwrap())
        .collect();
    assert_eq!(statuses, vec![0; 6], "{r}");
}

// ---------------------------------------------------------------------------------------------
// An agent killed −9 in the middle of an application

#[test]
fn an_agent_killed_minus_9_loses_its_containers_and_the_am_finishes_elsewhere() {
    let mut rm = RM.lock().expect("yarn-rm --profile agents");
    let rt = rm.ready()["resource_tracker"].as_str().unwrap().to_string();
    let (local, _dir) = in_process_agent(rt.parse().unwrap(), "127.0.0.43");
    wait_for("registered", Duration::from_secs(30), || {
        local.shared().cm.lock().unwrap().has_keys()
    });
    let dir = tempfile::tempdir().unwrap();
    let result = dir.path().join("result.json");
    let sleeps: Vec<String> = (0..6).map(|i| format!("{i}:12")).collect();
    let submitted = rm
        .command(&format!(
            "app-submit containers=6 sleep={} container_mb=1024 result={}",
            sleeps.join(","),
            result.display()
        ))
        .unwrap();
    let app_id: AppId = submitted["app_id"].as_str().unwrap().parse().unwrap();
    // The AM runs here (the only node); then a second agent joins and gets containers.
    wait_for("the AM on the local agent", Duration::from_secs(60), || {
        local
            .shared()
            .table
            .lock()
            .unwrap()
            .iter()
            .any(|x| x.id.app == app_id && x.id.id == 1)
    });
    let mut other = start_agent(&rt, "127.0.0.44");
    // Every container placed and running (the AM and three here, three there), so that no
    // start goes to the node after it died (an AM's start on a dead node fails the start).
    wait_for("all containers running", Duration::from_secs(90), || {
        let here = local
            .shared()
            .table
            .lock()
            .unwrap()
            .iter()
            .filter(|x| x.id.app == app_id && x.state == nm_core::table::ContainerState::Running)
            .count() as u64;
        here + agent_running(&other) >= 7
    });
    let lost_node = other.field("node_id");
    other.kill9();
    let id = submitted["app_id"].as_str().unwrap();
    let done = rm
        .command(&format!("app-wait {id} 180"))
        .unwrap_or_else(|e| panic!("app-wait: {e}\n{}", rm.log_tail(60)));
    assert_eq!(done["final_status"], "SUCCEEDED", "{done}");
    let r = read_json(&result);
    let comps = r["completions"].as_array().unwrap();
    let lost: Vec<&Value> = comps.iter().filter(|c| c["exit_status"] == -100).collect();
    assert!(!lost.is_empty(), "no container was reported lost: {r}");
    for l in &lost {
        assert_eq!(l["node_id"], lost_node.as_str(), "{l}");
    }
    assert!(
        r["replacements"].as_u64().unwrap() >= lost.len() as u64,
        "{r}"
    );
    // Every index finally succeeded.
    let mut ok = std::collections::BTreeSet::new();
    for c in comps.iter().filter(|c| c["exit_status"] == 0) {
        ok.insert(c["index"].as_u64().unwrap());
    }
    assert_eq!(ok.len(), 6, "{r}");
    // The RM has let the dead node go (LOST) before the next test uses this RM.
    wait_for("the killed node LOST", Duration::from_secs(60), || {
        !running_nodes(&mut rm).contains(&lost_node)
    });
}

// ---------------------------------------------------------------------------------------------
// RM-driven cleanup and failed localization, end to end

const ABORTED: i64 = -100;
const KILLED_BY_RESOURCEMANAGER: i32 = -106;
const KILLED_AFTER_APP_COMPLETION: i32 = -107;
const INVALID: i64 = -1000;

/// One in-process agent, the only RUNNING node of the shared RM (so every container of the
/// test's applications runs here, where the test can see its table, processes and dirs).
fn lone_agent(ip: &str) -> (peer_harness::SharedGuard<'static>, Agent, tempfile::TempDir) {
    let mut rm = RM.lock().expect("yarn-rm --profile agents");
    let rt = rm.ready()["resource_tracker"].as_str().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = AgentConfig::local(rt.parse().unwrap(), ip.parse().unwrap(), dir.path()).unwrap();
    cfg.memory_mb = 4096;
    cfg.vcores = 8;
    cfg.journal = true;
    let local = Agent::start(cfg).unwrap();
    let me = local.node_id();
    wait_for("registered, alone", Duration::from_secs(60), || {
        local.shared().cm.lock().unwrap().has_keys() && running_nodes(&mut rm) == vec![me.clone()]
    });
    (rm, local, dir)
}

/// A live process: its pid, process group and `CONTAINER_ID`.
#[derive(Debug, Clone, PartialEq)]
struct Proc {
    pid: i32,
    pgid: i32,
    container: String,
}

/// Every live (not zombie) process whose environment names a container of `app` (the launch
/// script exports `CONTAINER_ID`; the container's children inherit it).
fn container_procs(app: &str) -> Vec<Proc> {
    let suffix = app.strip_prefix("application_").unwrap_or(app);
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in rd.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Some((state, pgid)) = proc_stat(pid) else {
            continue;
        };
        if state == 'Z' {
            continue;
        }
        let Ok(env) = std::fs::read(e.path().join("environ")) else {
            continue;
        };
        for var in env.split(|&b| b == 0) {
            if let Some(v) = var.strip_prefix(b"CONTAINER_ID=") {
                let v = String::from_utf8_lossy(v).to_string();
                if v.starts_with(&format!("container_{suffix}_")) {
                    out.push(Proc {
                        pid,
                        pgid,
                        container: v,
                    });
                }
            }
        }
    }
    out
}

/// (state, pgid) from `/proc/PID/stat`.
fn proc_stat(pid: i32) -> Option<(char, i32)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 2..];
    let mut f = rest.split_whitespace();
    let state = f.next()?.chars().next()?;
    let _ppid = f.next()?;
    let pgid = f.next()?.parse().ok()?;
    Some((state, pgid))
}

/// Live (not zombie) processes in process group `pgid`.
fn group_members(pgid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.flatten() {
            if let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() {
                if proc_stat(pid).is_some_and(|(st, g)| g == pgid && st != 'Z') {
                    out.push(pid);
                }
            }
        }
    }
    out
}

/// Kills the process groups it holds when dropped (a failed test leaves no `sleep 600`).
#[derive(Default)]
struct GroupReaper(Vec<i32>);

impl Drop for GroupReaper {
    fn drop(&mut self) {
        for &g in &self.0 {
            if g > 1 && !group_members(g).is_empty() {
                // SAFETY: kill(2) on a process group this test saw its own containers in.
                unsafe {
                    libc::kill(-g, libc::SIGKILL);
                }
            }
        }
    }
}

/// The statuses the agent's table completed its containers with, from its journal (the
/// table itself forgets a delivered completion as soon as its application is cleaned up).
struct Completions<'a> {
    agent: &'a Agent,
    seen: BTreeMap<String, (i32, String)>,
}

impl<'a> Completions<'a> {
    fn new(agent: &'a Agent) -> Self {
        Completions {
            agent,
            seen: BTreeMap::new(),
        }
    }

    fn get(&mut self, cid: &str) -> Option<(i32, String)> {
        let entries = self
            .agent
            .shared()
            .table
            .lock()
            .unwrap()
            .take_journal_entries();
        for e in entries {
            self.seen
                .entry(e.id.to_string())
                .or_insert((e.exit_status, e.diagnostics));
        }
        self.seen.get(cid).cloned()
    }
}

/// `<local>/usercache/*/appcache/<app>` and `<local>/nmPrivate/<app>` that exist.
fn app_dirs(local: &Path, app: &str) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    if let Ok(users) = std::fs::read_dir(local.join("usercache")) {
        for u in users.flatten() {
            let d = u.path().join("appcache").join(app);
            if d.exists() {
                out.push(d);
            }
        }
    }
    let p = local.join("nmPrivate").join(app);
    if p.exists() {
        out.push(p);
    }
    out
}

fn metric(a: &Agent, line_prefix: &str) -> Option<u64> {
    let (code, body) = http_get(&a.metrics_addr().unwrap().to_string(), "/metrics");
    assert_eq!(code, 200, "{body}");
    body.lines()
        .find_map(|l| l.strip_prefix(line_prefix))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map(|v| v as u64)
}

#[test]
fn the_rm_cleans_up_a_released_container_and_a_killed_applications_containers() {
    let (mut rm, local, dir) = lone_agent("127.0.0.45");
    let local_dir = dir.path().join("local");
    let log_dir = dir.path().join("logs");
    let mut reaper = GroupReaper::default();
    let mut rec = Completions::new(&local);
    let bound = Duration::from_secs(60);

    // 1. The AM releases its running container (a shell with a `sleep 600` child): the RM
    // puts it in containers_to_cleanup; the AM hears ABORTED from the RM's scheduler, the
    // agent kills the whole group and reports KILLED_BY_RESOURCEMANAGER.
    let work = tempfile::tempdir().unwrap();
    let result = work.path().join("released.json");
    let submitted = rm
        .command(&format!(
            "app-submit containers=1 release=0 result={}",
            result.display()
        ))
        .unwrap();
    let app1 = submitted["app_id"].as_str().unwrap().to_string();
    let mut held: Vec<Proc> = Vec::new();
    wait_for(
        "the released container's shell and its child",
        bound,
        || {
            held = container_procs(&app1)
                .into_iter()
                .filter(|p| !p.container.ends_with("_000001"))
                .collect();
            held.len() >= 2
        },
    );
    let cid1 = held[0].container.clone();
    let groups: std::collections::BTreeSet<i32> = held.iter().map(|p| p.pgid).collect();
    reaper.0.extend(&groups);
    assert!(
        app_dirs(&local_dir, &app1).len() >= 2,
        "{:?}",
        app_dirs(&local_dir, &app1)
    );
    let done = rm
        .command(&format!("app-wait {app1} 120"))
        .unwrap_or_else(|e| panic!("app-wait: {e}\n{}", rm.log_tail(60)));
    assert_eq!(done["final_status"], "SUCCEEDED", "{done}");
    let r = read_json(&result);
    assert_eq!(r["unexpected"], Value::Array(vec![]), "{r}");
    assert_eq!(r["replacements"], 0, "{r}");
    let comp = &r["completions"][0];
    assert_eq!(comp["container_id"], cid1.as_str(), "{r}");
    assert_eq!(comp["exit_status"], ABORTED, "{r}");
    assert!(
        comp["diagnostics"]
            .as_str()
            .unwrap()
            .contains("Container released by application"),
        "{r}"
    );
    // The agent's own status for it: Java's NM kills a containers_to_cleanup entry with
    // KILLED_BY_RESOURCEMANAGER and "Container Killed by ResourceManager" (checked in the
    // 3.5.0 jar: ContainerManagerImpl), the reason winning over the shell's 143.
    let (status, diag) = rec
        .get(&cid1)
        .expect("the released container completed here");
    assert_eq!(status, KILLED_BY_RESOURCEMANAGER, "{diag}");
    assert!(
        diag.contains("Container Killed by ResourceManager"),
        "{diag}"
    );
    eprintln!("released container, as the AM saw it: {comp}");
    // The AM asked the agent too (getContainerStatuses, before its own end stops everything):
    // the same status, unless the RM had already let the agent forget it.
    match comp["nm_state"].as_str() {
        Some("COMPLETE") => {
            assert_eq!(comp["nm_exit_status"], KILLED_BY_RESOURCEMANAGER, "{r}");
            assert_eq!(comp["nm_diagnostics"], diag.as_str(), "{r}");
        }
        Some("RECENTLY_STOPPED") => {}
        _ => panic!("the AM got no final status from the agent: {r}"),
    }
    wait_for("the released container's processes gone", bound, || {
        container_procs(&app1).is_empty()
    });
    for g in &groups {
        wait_for("the released container's group gone", bound, || {
            group_members(*g).is_empty()
        });
    }
    // The application finished; its containers here were all complete and delivered when
    // applications_to_cleanup came: its directories still go (the logs stay, as with Java's
    // NonAggregatingLogHandler for log.retain-seconds).
    wait_for("app 1's directories removed", bound, || {
        app_dirs(&local_dir, &app1).is_empty()
    });
    assert!(log_dir.join(&app1).join(&cid1).join("stdout").exists());

    // 2. The client kills an application whose container holds a `sleep 600` child: the RM
    // names the container (containers_to_cleanup) and the application
    // (applications_to_cleanup); whichever reaches the agent first is the kill reason, as in
    // Java's NM, and every process of the application is gone.
    let result = work.path().join("killed.json");
    let submitted = rm
        .command(&format!(
            "app-submit containers=1 hold=0 result={}",
            result.display()
        ))
        .unwrap();
    let app2 = submitted["app_id"].as_str().unwrap().to_string();
    let mut procs: Vec<Proc> = Vec::new();
    wait_for("the held container's shell and its child", bound, || {
        procs = container_procs(&app2);
        procs
            .iter()
            .filter(|p| !p.container.ends_with("_000001"))
            .count()
            >= 2
    });
    let cid2 = procs
        .iter()
        .find(|p| !p.container.ends_with("_000001"))
        .unwrap()
        .container
        .clone();
    let am_cid = format!("{}_01_000001", app2.replace("application_", "container_"));
    let groups: std::collections::BTreeSet<i32> = procs.iter().map(|p| p.pgid).collect();
    reaper.0.extend(&groups);
    assert!(!app_dirs(&local_dir, &app2).is_empty());
    assert!(
        metric(&local, "hotpath_agent_containers{state=\"running\"}").unwrap() >= 2,
        "AM and held container running"
    );
    let t0 = Instant::now();
    let killed = rm
        .command(&format!("app-kill {app2}"))
        .unwrap_or_else(|e| panic!("app-kill: {e}\n{}", rm.log_tail(60)));
    assert_eq!(killed["state"], "KILLED", "{killed}");
    wait_for(
        "every process of the killed application gone",
        bound,
        || {
            let groups_gone = groups.iter().all(|g| group_members(*g).is_empty());
            groups_gone && container_procs(&app2).is_empty()
        },
    );
    eprintln!(
        "killed application's processes gone {:?} after the app-kill call",
        t0.elapsed()
    );
    wait_for("the held and AM containers complete", bound, || {
        rec.get(&cid2).is_some() && rec.get(&am_cid).is_some()
    });
    // The held container's status as the agent reported it: the first cleanup list to reach
    // the agent is the reason (Java: ContainerImpl keeps the first kill's status), never the
    // shell's 143.
    let (status, diag) = rec.get(&cid2).unwrap();
    match status {
        KILLED_BY_RESOURCEMANAGER => {
            assert!(diag.contains("Container Killed by ResourceManager"), "{diag}")
        }
        KILLED_AFTER_APP_COMPLETION => assert!(
            diag.contains(
                "Container killed on application-finish event: Application killed by ResourceManager"
            ),
            "{diag}"
        ),
        // The AM stopped it on its way out before a cleanup list reached the agent.
        -105 => assert!(
            diag.contains("Container killed by the ApplicationMaster"),
            "{diag}"
        ),
        other => panic!("held container: exit status {other}, {diag}"),
    }
    eprintln!("held container: {status} {diag:?}");
    // The AM container was stopped too (by the RM's AMLauncher, or by the cleanup lists).
    let (s, d) = rec.get(&am_cid).unwrap();
    assert!(
        [-105, KILLED_BY_RESOURCEMANAGER, KILLED_AFTER_APP_COMPLETION].contains(&s),
        "AM container exit status {s}: {d}"
    );
    eprintln!("AM container: {s} {d:?}");
    // Nothing of the application is running any more: not in the table, not on /metrics.
    wait_for("no container of app 2 running", bound, || {
        let t = local.shared().table.lock().unwrap();
        let live = t.iter().any(|c| {
            c.id.app.to_string() == app2 && c.state != nm_core::table::ContainerState::Complete
        });
        !live
    });
    wait_for("/metrics shows nothing running", bound, || {
        metric(&local, "hotpath_agent_containers{state=\"running\"}") == Some(0)
    });
    wait_for("app 2's directories removed", bound, || {
        app_dirs(&local_dir, &app2).is_empty()
    });
    assert!(log_dir.join(&app2).join(&cid2).join("stdout").exists());
}

/// The text after a Java 3.5 diagnostics entry's `[yyyy-MM-dd HH:mm:ss.SSS]`; panics when
/// the prefix is not there.
fn after_diagnostics_time(d: &str) -> &str {
    let shape = "[dddd-dd-dd dd:dd:dd.ddd]";
    let ok = d.len() > shape.len()
        && d.bytes().zip(shape.bytes()).all(|(c, s)| match s {
            b'd' => c.is_ascii_digit(),
            _ => c == s,
        });
    assert!(ok, "no [yyyy-MM-dd HH:mm:ss.SSS] prefix: {d:?}");
    &d[shape.len()..]
}

#[test]
fn a_container_whose_resource_cannot_be_localized_completes_with_invalid_status() {
    let (mut rm, _local, dir) = lone_agent("127.0.0.46");
    let local_dir = dir.path().join("local");
    let work = tempfile::tempdir().unwrap();
    let result = work.path().join("result.json");
    // Index 1 names a resource that does not exist, index 2 one whose timestamp is 1 ms off
    // its file's; index 0 is an ordinary container and must not notice.
    let (app, done) = {
        let submitted = rm
            .command(&format!(
                "app-submit containers=3 bad_resource=1:missing,2:stale result={}",
                result.display()
            ))
            .unwrap_or_else(|e| panic!("app-submit: {e}\n{}", rm.log_tail(60)));
        let id = submitted["app_id"].as_str().unwrap();
        let done = rm
            .command(&format!("app-wait {id} 120"))
            .unwrap_or_else(|e| panic!("app-wait: {e}\n{}", rm.log_tail(80)));
        assert_eq!(done["timed_out"], false, "{done}");
        (submitted, done)
    };
    let shared = app["shared"].as_str().unwrap().to_string();
    let app = app["app_id"].as_str().unwrap().to_string();
    assert_eq!(done["final_status"], "SUCCEEDED", "{done}");
    let r = read_json(&result);
    assert_eq!(r["unexpected"], Value::Array(vec![]), "{r}");
    assert_eq!(r["errors"], Value::Array(vec![]), "{r}");
    let mut by_index = BTreeMap::new();
    for comp in r["completions"].as_array().unwrap() {
        by_index.insert(comp["index"].as_u64().unwrap(), comp.clone());
    }
    assert_eq!(by_index.len(), 3, "{r}");
    // The ordinary one ran and exited 0; its output is there.
    assert_eq!(by_index[&0]["exit_status"], 0, "{r}");
    // The two that failed localization: COMPLETE with INVALID (-1000; ContainerExitStatus in
    // the 3.5.0 jar), never launched, and Java's FSDownload text as the diagnostics.
    for i in [1, 2] {
        let comp = &by_index[&i];
        assert_eq!(comp["state"], "COMPLETE", "{comp}");
        assert_eq!(comp["exit_status"], INVALID, "{comp}");
        assert_eq!(comp["start_error"], Value::Null, "{comp}");
    }
    // Java 3.5's shape (ContainerImpl.addDiagnostics, ResourceFailedTransition; FSDownload
    // through RawLocalFileSystem): `[yyyy-MM-dd HH:mm:ss.SSS]<message>\n`.
    let missing = by_index[&1]["diagnostics"].as_str().unwrap();
    let cid1 = by_index[&1]["container_id"].as_str().unwrap();
    assert_eq!(
        after_diagnostics_time(missing),
        format!("File file:{shared}/bad-{cid1}.txt does not exist\n"),
        "{missing:?}"
    );
    let stale = by_index[&2]["diagnostics"].as_str().unwrap();
    let cid2 = by_index[&2]["container_id"].as_str().unwrap();
    let rest = after_diagnostics_time(stale);
    assert!(
        rest.starts_with(&format!(
            "Resource file:{shared}/bad-{cid2}.txt changed on src filesystem - expected: \""
        )) && rest.contains("\", was: \"")
            && rest.contains("\", current time: \"")
            && rest.ends_with("\"\n"),
        "{stale:?}"
    );
    // The application's containers are gone, and so are its directories (the agent's
    // applications_to_cleanup handling; every container here had long been delivered).
    assert!(container_procs(&app).is_empty());
    wait_for(
        "the application's directories removed",
        Duration::from_secs(60),
        || app_dirs(&local_dir, &app).is_empty(),
    );
    eprintln!("missing: {missing:?}\nstale: {stale:?}");
}
