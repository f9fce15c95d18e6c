//! ResourceManager HA with hotpath agents: two real Java RMs (`yarn-rm-ha --profile agents`:
//! MiniYARNCluster, manual failover, a shared FileSystemRMStateStore), two `hotpath agent`
//! child processes configured as a Java NodeManager would be for HA (`ha.enabled`, `ha.rm-ids`,
//! `resource-tracker.address.rmI`), and the peer's ShellAm application (Hadoop's own
//! AMRMClientAsync with the HA configuration, so the AM fails over too).
//!
//! What a failover must not break: containers keep running (work-preserving recovery: the
//! agents re-register every live container with the new active RM), every completion reaches the
//! AM exactly once, containers allocated by the new active (their ids carry the new RM epoch,
//! `container_e01_…`) start on the agents with its new keys and identifier, and an agent that
//! was stopped during a failover finds the new active by itself.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use peer_harness::{Mode, Shared};
use serde_json::Value;

use crate::daemon;
use daemon::{agent_command, agent_running, Daemon};

static RM: Shared = Shared::new(Mode::YarnRmHa, &["--profile", "agents"]);

fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) -> Duration {
    let t0 = Instant::now();
    while !f() {
        assert!(
            t0.elapsed() < timeout,
            "timed out ({timeout:?}) waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    t0.elapsed()
}

/// The `--set`s that make an agent HA-aware for the peer's RMs (the unsuffixed
/// resource-tracker address `agent_command` sets is ignored under HA).
pub(crate) fn ha_sets(ready: &Value) -> Vec<(&'static str, String)> {
    let mut s = vec![
        ("yarn.resourcemanager.ha.enabled", "true".to_string()),
        (
            "yarn.resourcemanager.ha.rm-ids",
            ready["rm_ids"].as_str().unwrap().to_string(),
        ),
    ];
    for rm in ready["rms"].as_array().unwrap() {
        let key = format!(
            "yarn.resourcemanager.resource-tracker.address.{}",
            rm["rm_id"].as_str().unwrap()
        );
        s.push((
            Box::leak(key.into_boxed_str()),
            rm["resource_tracker"].as_str().unwrap().to_string(),
        ));
    }
    s
}

/// An HA agent on `ip`; the unsuffixed address points at nothing that listens.
pub(crate) fn start_ha_agent(ready: &Value, ip: &str, extra: &[(&str, String)]) -> Daemon {
    let mut sets = ha_sets(ready);
    sets.extend(extra.iter().cloned());
    let (cmd, dir) = agent_command("127.0.0.1:1", ip, &sets);
    Daemon::spawn(cmd, dir)
}

/// The agent's `status` from its control socket.
pub(crate) fn agent_status(a: &Daemon) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_hotpath"))
        .args(["container", "--socket"])
        .arg(a.dir().join("agent.sock"))
        .arg("status")
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

/// The active RM's RUNNING nodes, sorted, and that RM's index.
pub(crate) fn active_nodes(rm: &mut peer_harness::Peer) -> (i64, Vec<Value>) {
    let v = rm.command("nodes").unwrap_or(Value::Null);
    let nodes = v["nodes"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|n| n["state"] == "RUNNING")
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    (v["active"].as_i64().unwrap_or(-1), nodes)
}

fn node_ids(nodes: &[Value]) -> Vec<String> {
    let mut v: Vec<String> = nodes
        .iter()
        .filter_map(|n| n["node_id"].as_str().map(String::from))
        .collect();
    v.sort();
    v
}

pub(crate) fn active_index(rm: &mut peer_harness::Peer) -> i64 {
    rm.command("active").unwrap()["active"].as_i64().unwrap()
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {path:?}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parse {path:?}: {e}: {text}"))
}

fn signal(a: &Daemon, sig: i32) {
    // SAFETY: kill(2) on our own child's pid.
    #[allow(unsafe_code)]
    let r = unsafe { libc::kill(a.child.id() as i32, sig) };
    assert_eq!(r, 0, "kill({sig})");
}

/// Whether the agent is registered with rm-id `rm` after at least `regs` registrations.
fn registered_with(a: &Daemon, rm: &str, regs: u64) -> bool {
    let s = agent_status(a);
    s["phase"] == "registered" && s["rm_id"] == rm && s["registrations"].as_u64() >= Some(regs)
}

#[test]
fn an_application_runs_across_two_rm_failovers_one_while_an_agent_is_stopped() {
    let mut rm = RM.lock().expect("yarn-rm-ha --profile agents");
    let ready = rm.ready().clone();
    let ids: Vec<String> = ready["rms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["rm_id"].as_str().unwrap().to_string())
        .collect();
    let first = active_index(&mut rm);
    assert!(first >= 0, "no active RM");
    let (first, second) = (first as usize, 1 - first as usize);
    let a = start_ha_agent(&ready, "127.0.0.61", &[]);
    let b = start_ha_agent(&ready, "127.0.0.62", &[]);
    let mut want = vec![a.field("node_id"), b.field("node_id")];
    want.sort();
    // An agent starts on rm-ids[0]; if that is the standby it fails over by itself.
    wait_for(
        "both agents RUNNING at the active RM",
        Duration::from_secs(60),
        || node_ids(&active_nodes(&mut rm).1) == want,
    );

    // 12 containers of 1 GB on two 4 GB agents beside a 256 MB AM: 7 run at once, the other 5
    // are allocated as the first ones end, after both failovers (each lives 15 s).
    let dir = tempfile::tempdir().unwrap();
    let result = dir.path().join("result.json");
    let sleeps: Vec<String> = (0..12).map(|i| format!("{i}:15")).collect();
    let submitted = rm
        .command(&format!(
            "app-submit containers=12 container_mb=1024 sleep={} result={}",
            sleeps.join(","),
            result.display()
        ))
        .unwrap_or_else(|e| panic!("app-submit: {e}\n{}", rm.log_tail(60)));
    let app = submitted["app_id"].as_str().unwrap().to_string();
    wait_for("AM + 4 containers running", Duration::from_secs(90), || {
        agent_running(&a) + agent_running(&b) >= 5
    });
    let running_before = agent_running(&a) + agent_running(&b);

    // Failover 1, both agents up: rm(first) to standby, rm(second) to active.
    let regs_a = agent_status(&a)["registrations"].as_u64().unwrap();
    let regs_b = agent_status(&b)["registrations"].as_u64().unwrap();
    let fo = rm
        .command(&format!("failover {first} {second}"))
        .unwrap_or_else(|e| panic!("failover: {e}\n{}", rm.log_tail(60)));
    eprintln!("failover 1: {fo}");
    let took = wait_for(
        "both agents re-registered with the new active",
        Duration::from_secs(30),
        || {
            registered_with(&a, &ids[second], regs_a + 1)
                && registered_with(&b, &ids[second], regs_b + 1)
        },
    );
    eprintln!("agents re-registered {took:?} after the failover call returned");
    let (active, nodes) = active_nodes(&mut rm);
    assert_eq!(active, second as i64);
    assert_eq!(node_ids(&nodes), want);
    // every live container was re-reported and recovered by the new RM
    let launched: usize = nodes
        .iter()
        .map(|n| n["launched_containers"].as_array().map_or(0, Vec::len))
        .sum();
    assert!(
        launched as u64 >= running_before,
        "the new RM recovered {launched} containers, {running_before} were running: {nodes:?}"
    );
    for s in [agent_status(&a), agent_status(&b)] {
        assert!(s["resyncs"].as_u64() >= Some(1), "{s}");
        assert!(s["rm_failovers"].as_u64() >= Some(1), "{s}");
    }

    // Failover 2 while agent b is stopped (SIGSTOP: its containers live on, it hears nothing).
    let regs_a = agent_status(&a)["registrations"].as_u64().unwrap();
    let regs_b = agent_status(&b)["registrations"].as_u64().unwrap();
    signal(&b, libc::SIGSTOP);
    let fo = rm.command(&format!("failover {second} {first}"));
    wait_for("agent a on the new active", Duration::from_secs(30), || {
        registered_with(&a, &ids[first], regs_a + 1)
    });
    signal(&b, libc::SIGCONT);
    eprintln!("failover 2: {}", fo.unwrap());
    wait_for(
        "the stopped agent found the new active",
        Duration::from_secs(30),
        || registered_with(&b, &ids[first], regs_b + 1),
    );

    let done = rm
        .command(&format!("app-wait {app} 240"))
        .unwrap_or_else(|e| panic!("app-wait: {e}\n{}", rm.log_tail(80)));
    assert_eq!(done["timed_out"], false, "{done}\n{}", rm.log_tail(80));
    assert_eq!(
        (done["state"].as_str(), done["final_status"].as_str()),
        (Some("FINISHED"), Some("SUCCEEDED")),
        "{done}\n{}",
        rm.log_tail(80)
    );
    assert_eq!(
        done["attempt_count"], 1,
        "the AM survived both failovers: {done}"
    );
    let r = read_json(&result);
    assert_eq!(r["final_status"], "SUCCEEDED", "{r:#}");
    assert_eq!(r["unexpected"], serde_json::json!([]), "{r:#}");
    assert_eq!(r["surplus_completed"], 0, "{r:#}");
    // exactly once: 12 completions, 12 distinct containers, all exit 0
    let completions = r["completions"].as_array().unwrap();
    let mut cids: Vec<&str> = completions
        .iter()
        .map(|c| c["container_id"].as_str().unwrap())
        .collect();
    assert_eq!(cids.len(), 12, "{r:#}");
    cids.sort();
    cids.dedup();
    assert_eq!(cids.len(), 12, "a completion reached the AM twice: {r:#}");
    for c in completions {
        assert_eq!(c["exit_status"], 0, "{c}");
    }
    // containers the new actives allocated (a new RM epoch in their ids) started and ended
    let after = cids.iter().filter(|c| c.starts_with("container_e")).count();
    assert!(after >= 1, "no container from a later RM epoch: {cids:?}");
    eprintln!("{after} of 12 containers were allocated after a failover");
}

/// A loopback listener in front of an RM's resource tracker that counts every accepted
/// connection (the agent's connection attempts), whether or not the RM behind it accepts: a
/// refused upstream closes the relayed connection at once, which the client sees as EOF, the
/// same failover trigger as a refused connect.
struct CountingRelay {
    addr: std::net::SocketAddr,
    accepted: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl CountingRelay {
    fn start(upstream: std::net::SocketAddr) -> CountingRelay {
        use std::sync::atomic::Ordering::Relaxed;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let a = accepted.clone();
        std::thread::spawn(move || {
            for down in l.incoming() {
                let Ok(down) = down else { return };
                a.fetch_add(1, Relaxed);
                let Ok(up) = std::net::TcpStream::connect(upstream) else {
                    continue; // dropped: the client sees EOF
                };
                for (mut from, mut to) in [
                    (down.try_clone().unwrap(), up.try_clone().unwrap()),
                    (up, down),
                ] {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(std::net::Shutdown::Both);
                    });
                }
            }
        });
        CountingRelay { addr, accepted }
    }

    fn count(&self) -> usize {
        self.accepted.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// HA `--set`s naming `addrs[i]` as rm-id i's resource tracker.
fn ha_sets_to(ready: &Value, addrs: &[std::net::SocketAddr]) -> Vec<(&'static str, String)> {
    let mut s = ha_sets(ready);
    s.truncate(2);
    for (rm, a) in ready["rms"].as_array().unwrap().iter().zip(addrs) {
        let key = format!(
            "yarn.resourcemanager.resource-tracker.address.{}",
            rm["rm_id"].as_str().unwrap()
        );
        s.push((Box::leak(key.into_boxed_str()), a.to_string()));
    }
    s
}

fn epoch_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Polls the active RM until each of `nodes` has had a heartbeat answered (RUNNING, response
/// id ≥ 1 since its registration there); returns the epoch ms at which each was first seen
/// (`None`: not within `timeout`).
fn first_heartbeats(
    rm: &mut peer_harness::Peer,
    want_active: i64,
    nodes: &[String],
    timeout: Duration,
) -> Vec<Option<i64>> {
    let mut seen: Vec<Option<i64>> = vec![None; nodes.len()];
    let t0 = Instant::now();
    while seen.iter().any(Option::is_none) && t0.elapsed() < timeout {
        let (active, list) = active_nodes(rm);
        let now = epoch_ms();
        if active == want_active {
            for (i, id) in nodes.iter().enumerate() {
                if seen[i].is_none()
                    && list.iter().any(|n| {
                        n["node_id"] == id.as_str() && n["response_id"].as_i64() >= Some(1)
                    })
                {
                    seen[i] = Some(now);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    seen
}

fn median(v: &mut [i64]) -> i64 {
    v.sort();
    v[v.len() / 2]
}

/// The failover goal, as a logged figure (a Java NodeManager beside the agent, same RMs, same
/// run): (1) three outages, the active RM to standby, 5 s with no active RM, then the other
/// one active: time from the new active being ready to each node's first heartbeat it
/// answers, and the connection attempts per second each made during the outage (counted by
/// loopback relays in front of both RMs); (2) ten consecutive failovers under a running
/// application on two agents: time from the old active's transition to standby to each agent's
/// first answered heartbeat, and 0 containers lost, 0 completions lost or duplicated.
#[test]
fn failover_goal_ten_failovers_under_an_application_beside_a_java_nodemanager() {
    let mut rm = RM.lock().expect("yarn-rm-ha --profile agents");
    let ready = rm.ready().clone();
    let rts: Vec<std::net::SocketAddr> = ready["rms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["resource_tracker"].as_str().unwrap().parse().unwrap())
        .collect();
    let relays_agent: Vec<CountingRelay> = rts.iter().map(|a| CountingRelay::start(*a)).collect();
    let relays_java: Vec<CountingRelay> = rts.iter().map(|a| CountingRelay::start(*a)).collect();
    let agent_addrs: Vec<_> = relays_agent.iter().map(|r| r.addr).collect();
    let java_addrs: Vec<_> = relays_java.iter().map(|r| r.addr).collect();
    let a = start_ha_agent(&ready, "127.0.0.63", &ha_sets_to(&ready, &agent_addrs)[2..]);
    // A Java NodeManager, HA-configured the same way, with Java's default retry settings.
    let mut java_args: Vec<String> = vec!["--rm".into(), java_addrs[0].to_string()];
    for (k, v) in ha_sets_to(&ready, &java_addrs) {
        java_args.push("--set".into());
        java_args.push(format!("{k}={v}"));
    }
    let java_refs: Vec<&str> = java_args.iter().map(String::as_str).collect();
    let mut java = peer_harness::Peer::start(Mode::YarnNm, &java_refs).expect("yarn-nm");
    let java_id = java.ready()["node_id"].as_str().unwrap().to_string();
    let nodes = vec![a.field("node_id"), java_id.clone()];
    let mut active = active_index(&mut rm);
    wait_for("agent and Java NM RUNNING", Duration::from_secs(90), || {
        let got = node_ids(&active_nodes(&mut rm).1);
        nodes.iter().all(|n| got.contains(n))
    });

    // (1) outages
    let (mut ready_agent, mut ready_java) = (Vec::new(), Vec::new());
    let (mut rate_agent, mut rate_java) = (Vec::new(), Vec::new());
    for round in 0..3 {
        let next = 1 - active;
        let c_agent: usize = relays_agent.iter().map(CountingRelay::count).sum();
        let c_java: usize = relays_java.iter().map(CountingRelay::count).sum();
        rm.command(&format!("transition {active} standby")).unwrap();
        let outage = Instant::now();
        while outage.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let n_agent = relays_agent.iter().map(CountingRelay::count).sum::<usize>() - c_agent;
        let n_java = relays_java.iter().map(CountingRelay::count).sum::<usize>() - c_java;
        let secs = outage.elapsed().as_secs_f64();
        let t = rm.command(&format!("transition {next} active")).unwrap();
        let t0 = t["done_epoch_ms"].as_i64().unwrap();
        let seen = first_heartbeats(&mut rm, next, &nodes, Duration::from_secs(120));
        let da = seen[0].map(|s| s - t0);
        let dj = seen[1].map(|s| s - t0);
        eprintln!(
            "outage {round}: attempts/s during 5 s without an active RM: agent {:.1}, Java NM {:.1}; \
             new active ready -> first answered heartbeat: agent {da:?} ms, Java NM {dj:?} ms",
            n_agent as f64 / secs,
            n_java as f64 / secs
        );
        ready_agent.push(da.expect("the agent never reached the new active"));
        if let Some(d) = dj {
            ready_java.push(d);
        }
        rate_agent.push((n_agent as f64 / secs * 10.0) as i64);
        rate_java.push((n_java as f64 / secs * 10.0) as i64);
        active = next;
    }
    eprintln!(
        "FIGURE outage: new active -> first heartbeat median agent {} ms {:?}, Java NM {:?} ms; \
         attempts/s x10 agent {:?}, Java NM {:?}",
        median(&mut ready_agent.clone()),
        ready_agent,
        ready_java,
        rate_agent,
        rate_java
    );
    // bounded attempts: no storm (the agent's sleeps double from 100 ms to 2 s)
    for r in &rate_agent {
        assert!(
            *r <= 50,
            "more than 5 connection attempts/s during an outage: {rate_agent:?}"
        );
    }
    let _ = java.command("nm-stop");
    drop(java);

    // (2) ten failovers under an application on two agents
    let b = start_ha_agent(&ready, "127.0.0.64", &[]);
    let want = {
        let mut v = vec![a.field("node_id"), b.field("node_id")];
        v.sort();
        v
    };
    wait_for("both agents RUNNING", Duration::from_secs(60), || {
        let got = node_ids(&active_nodes(&mut rm).1);
        want.iter().all(|n| got.contains(n))
    });
    let dir = tempfile::tempdir().unwrap();
    let result = dir.path().join("result.json");
    let sleeps: Vec<String> = (0..16).map(|i| format!("{i}:{}", 10 + i % 4 * 5)).collect();
    let submitted = rm
        .command(&format!(
            "app-submit containers=16 container_mb=1024 sleep={} result={}",
            sleeps.join(","),
            result.display()
        ))
        .unwrap_or_else(|e| panic!("app-submit: {e}\n{}", rm.log_tail(60)));
    let app = submitted["app_id"].as_str().unwrap().to_string();
    wait_for("containers running", Duration::from_secs(90), || {
        agent_running(&a) + agent_running(&b) >= 4
    });
    let mut took = Vec::new();
    for i in 0..10 {
        let next = 1 - active;
        let fo = rm
            .command(&format!("failover {active} {next}"))
            .unwrap_or_else(|e| panic!("failover {i}: {e}\n{}", rm.log_tail(60)));
        let t0 = fo["standby_done_epoch_ms"].as_i64().unwrap();
        let seen = first_heartbeats(&mut rm, next, &want, Duration::from_secs(60));
        for s in &seen {
            took.push(s.expect("an agent never reached the new active") - t0);
        }
        active = next;
    }
    let mut sorted = took.clone();
    sorted.sort();
    eprintln!(
        "FIGURE 10 failovers: old active standby -> agent's first answered heartbeat at the new \
         active: median {} ms, min {} ms, max {} ms (20 samples: {took:?})",
        sorted[sorted.len() / 2],
        sorted[0],
        sorted[sorted.len() - 1]
    );
    let done = rm
        .command(&format!("app-wait {app} 300"))
        .unwrap_or_else(|e| panic!("app-wait: {e}\n{}", rm.log_tail(80)));
    assert_eq!(done["timed_out"], false, "{done}\n{}", rm.log_tail(80));
    assert_eq!(
        done["final_status"],
        "SUCCEEDED",
        "{done}\n{}",
        rm.log_tail(80)
    );
    assert_eq!(done["attempt_count"], 1, "{done}");
    let r = read_json(&result);
    assert_eq!(r["unexpected"], serde_json::json!([]), "{r:#}");
    let completions = r["completions"].as_array().unwrap();
    let mut cids: Vec<&str> = completions
        .iter()
        .map(|c| c["container_id"].as_str().unwrap())
        .collect();
    let total = cids.len();
    cids.sort();
    cids.dedup();
    let lost = completions.iter().filter(|c| c["exit_status"] != 0).count();
    eprintln!(
        "FIGURE 10 failovers: {total} completions for 16 containers, {} distinct, {lost} not exit 0",
        cids.len()
    );
    assert_eq!((total, cids.len(), lost), (16, 16, 0), "{r:#}");
}
