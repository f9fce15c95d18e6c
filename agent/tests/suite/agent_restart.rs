//! An agent restarted on the same node (same dirs, same NodeId) against the embedded rm-core.
//!
//! - With `yarn.nodemanager.recovery.enabled` the containers of the previous run are
//!   **recovered**: a still-running one is RUNNING again and can be stopped (−105, its process
//!   group dies); one that exited while the agent was away reports its exit code.
//! - Without it they are **reported lost**: the orphaned process group is killed and the
//!   container is COMPLETE with ABORTED (−100) in the new registration.
//!
//! The previous run ends with a graceful stop under recovery, which leaves exactly what a
//! `kill -9` leaves: running process groups, their pid files and records.

use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::time::Duration;

use agent::demo::{Cluster, DemoConfig};
use hadoop_wire::pb::hadoop::yarn::{
    StartContainersRequestProto, StartContainersResponseProto, StopContainersRequestProto,
};
use hadoop_wire::yarn::{cmp, exit_status};
use ipc::client::Client;
use nm_core::container_manager::Stage;
use nm_core::ids::{AppId, AttemptId, ContainerId};
use nm_core::table::ContainerState;
use nm_core::wire::container_id_proto;
use nm_runtime::{Agent, AgentConfig};

use crate::cmp as cmp_support;
use cmp_support::{call, now_ms, wait_for, Minter};

const IP: &str = "127.0.0.51";

fn attempt() -> AttemptId {
    AttemptId {
        app: AppId {
            cluster_timestamp: 1_700_000_000_000,
            id: 1,
        },
        attempt: 1,
    }
}

fn container(n: i64) -> ContainerId {
    ContainerId {
        app: attempt().app,
        attempt: 1,
        id: n,
    }
}

fn config(rm: SocketAddr, dir: &Path, port: u16, recovery: bool) -> AgentConfig {
    let mut cfg = AgentConfig::local(rm, IP.parse().unwrap(), dir).unwrap();
    cfg.node_port = port;
    cfg.memory_mb = 4096;
    cfg.vcores = 4;
    cfg.nm.recovery = recovery;
    // A completion recovered at start can be delivered and acknowledged (and so leave the
    // table) in the first heartbeat, before the test looks: the journal keeps it.
    cfg.journal = true;
    cfg
}

fn start_agent(cfg: AgentConfig) -> Agent {
    let a = Agent::start(cfg).unwrap();
    wait_for("keys", Duration::from_secs(10), || {
        a.shared().cm.lock().unwrap().has_keys()
    });
    a
}

fn client(a: &Agent) -> Client {
    Minter::new(a, "root").client(attempt())
}

fn start(a: &Agent, c: ContainerId, command: &str) {
    let m = Minter::new(a, "root");
    let req = StartContainersRequestProto {
        start_container_request: vec![m.start_request(
            c,
            &a.node_id(),
            now_ms() + 600_000,
            command,
        )],
    };
    let r: StartContainersResponseProto = call(&client(a), cmp::START_CONTAINERS, &req).unwrap();
    assert_eq!(r.succeeded_requests.len(), 1, "{r:?}");
    wait_for("launched", Duration::from_secs(10), || {
        a.shared().cm.lock().unwrap().stage(&c) == Some(Stage::Launched)
    });
}

fn state(a: &Agent, c: ContainerId) -> Option<(ContainerState, i32, String)> {
    a.shared()
        .table
        .lock()
        .unwrap()
        .get(&c)
        .map(|x| (x.state, x.exit_status, x.diagnostics.clone()))
}

/// A container's completion: from the table, or from the journal once the RM has acknowledged
/// it and the table forgot it.
fn completion(a: &Agent, c: ContainerId) -> Option<(ContainerState, i32, String)> {
    let mut t = a.shared().table.lock().unwrap();
    if let Some(x) = t.get(&c) {
        return Some((x.state, x.exit_status, x.diagnostics.clone()));
    }
    t.take_journal_entries()
        .into_iter()
        .rev()
        .find(|e| e.id == c)
        .map(|e| (ContainerState::Complete, e.exit_status, e.diagnostics))
}

/// The pid the container's pid file names (its process group), waiting up to 10 s for the
/// file to appear with a whole number in it.
fn pid_of(dir: &Path, c: ContainerId) -> i32 {
    let name = format!("{c}.pid");
    let find = || {
        let mut stack = vec![dir.join("local").join("nmPrivate")];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.file_name().is_some_and(|f| f == name.as_str()) {
                    return std::fs::read_to_string(&p).ok()?.trim().parse().ok();
                }
            }
        }
        None
    };
    let t0 = std::time::Instant::now();
    loop {
        if let Some(pid) = find() {
            return pid;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "no pid file for {c} after 10 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether container `c` has a cgroup dir under the agent's hierarchy (`None`: no writable
/// cgroups here, so the agent made none).
fn has_cgroup(c: ContainerId) -> Option<bool> {
    let cg = nm_runtime::cgroups::Cgroups::probe("hotpath").ok()?;
    Some(
        cg.base_dirs()
            .iter()
            .any(|d| d.join(c.to_string()).exists()),
    )
}

fn alive(pid: i32) -> bool {
    // A zombie is dead: read the state from /proc.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.rsplit_once(')')
                .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

#[test]
fn containers_are_recovered_with_recovery_and_reported_lost_without() {
    // rm-core does not know this test's application: a heartbeat would answer
    // applications_to_cleanup and the table would forget its containers once their
    // completions are delivered. One interval longer than the test keeps to the
    // registrations, which is what a restart is about.
    let cluster = Cluster::start(DemoConfig {
        agents: 0,
        heartbeat_ms: 120_000,
        ..DemoConfig::default()
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let port = TcpListener::bind((IP, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let rm = cluster.rm_addr();

    // Run 1: a long container and one that will exit 4 while the agent is away.
    let a1 = start_agent(config(rm, dir.path(), port, true));
    let long = container(2);
    let brief = container(3);
    start(&a1, long, "sleep 600");
    start(&a1, brief, "sleep 1; exit 4");
    let long_pid = pid_of(dir.path(), long);
    a1.stop();
    a1.join();
    assert!(
        alive(long_pid),
        "recovery keeps containers running over a restart"
    );
    std::thread::sleep(Duration::from_millis(1500));

    // Run 2, recovery enabled: both are back, with what happened meanwhile.
    let a2 = start_agent(config(rm, dir.path(), port, true));
    assert_eq!(state(&a2, long).map(|s| s.0), Some(ContainerState::Running));
    assert_eq!(
        a2.shared().cm.lock().unwrap().stage(&long),
        Some(Stage::Launched)
    );
    let b = completion(&a2, brief).unwrap();
    assert_eq!((b.0, b.1), (ContainerState::Complete, 4), "{b:?}");
    // It ended while no agent watched: its cgroup went at recovery.
    assert_ne!(
        has_cgroup(brief),
        Some(true),
        "the cgroup of {brief} is left"
    );
    // The recovered container is managed: stopContainers kills its group, −105.
    let stop = StopContainersRequestProto {
        container_id: vec![container_id_proto(&long)],
    };
    let _: hadoop_wire::pb::hadoop::yarn::StopContainersResponseProto =
        call(&client(&a2), cmp::STOP_CONTAINERS, &stop).unwrap();
    wait_for("-105", Duration::from_secs(10), || {
        state(&a2, long).is_some_and(|s| s.0 == ContainerState::Complete)
    });
    assert_eq!(
        state(&a2, long).unwrap().1,
        exit_status::KILLED_BY_APPMASTER
    );
    wait_for("process group gone", Duration::from_secs(5), || {
        !alive(long_pid)
    });

    // Run 3 leaves a running container behind; run 4 has recovery off and reports it lost.
    let orphan = container(4);
    start(&a2, orphan, "sleep 600");
    let orphan_pid = pid_of(dir.path(), orphan);
    a2.stop();
    a2.join();
    assert!(alive(orphan_pid));
    let a3 = start_agent(config(rm, dir.path(), port, false));
    let o = completion(&a3, orphan).unwrap();
    assert_eq!(
        (o.0, o.1),
        (ContainerState::Complete, exit_status::ABORTED),
        "{o:?}"
    );
    assert!(
        o.2.contains("was lost when the NodeManager restarted"),
        "{o:?}"
    );
    assert!(!alive(orphan_pid), "the orphaned process group is killed");
    wait_for(
        "the lost container's cgroup removed",
        Duration::from_secs(5),
        || has_cgroup(orphan) != Some(true),
    );
    a3.stop();
    a3.join();
}

/// Issue 35: a container token replayed after a restart under recovery, for a container that
/// already ran, is refused as Java's NodeManager refuses it (its state store keeps started
/// tokens); the agent used to run the container again. The first run is stopped as `kill -9`
/// leaves it (the store is written before the start is answered).
#[test]
fn a_replayed_container_token_is_refused_after_a_restart_with_recovery() {
    let cluster = Cluster::start(DemoConfig {
        agents: 0,
        heartbeat_ms: 120_000,
        ..DemoConfig::default()
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let port = TcpListener::bind((IP, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let rm = cluster.rm_addr();
    let a1 = start_agent(config(rm, dir.path(), port, true));
    let c = container(7);
    let req = StartContainersRequestProto {
        start_container_request: vec![Minter::new(&a1, "root").start_request(
            c,
            &a1.node_id(),
            now_ms() + 600_000,
            "exit 0",
        )],
    };
    let r: StartContainersResponseProto = call(&client(&a1), cmp::START_CONTAINERS, &req).unwrap();
    assert_eq!(r.succeeded_requests.len(), 1, "{r:?}");
    wait_for("ran", Duration::from_secs(20), || {
        completion(&a1, c).is_some_and(|x| x.0 == ContainerState::Complete)
    });
    a1.stop();
    a1.join();
    let a2 = start_agent(config(rm, dir.path(), port, true));
    let r: StartContainersResponseProto = call(&client(&a2), cmp::START_CONTAINERS, &req).unwrap();
    assert!(
        r.succeeded_requests.is_empty(),
        "the replay was accepted: {r:?}"
    );
    let m = r.failed_requests[0]
        .exception
        .as_ref()
        .unwrap()
        .message
        .clone()
        .unwrap();
    assert!(
        m.contains(&format!(
            "Attempt to relaunch the same container with id {c}."
        )),
        "{m}"
    );
    assert_ne!(
        a2.shared().cm.lock().unwrap().stage(&c),
        Some(Stage::Launched)
    );
    a2.stop();
    a2.join();
}

/// Issue 35: a container accepted before the agent went away while it still localized is
/// not forgotten: its record is on disk before localization, and the next start reports it
/// (ABORTED, −100, through the RM to its AM) instead of "not handled by this NodeManager".
/// The slow resource is on an "HDFS" whose NameNode accepts connections and never answers.
#[test]
fn a_container_still_localizing_at_a_restart_is_reported_not_forgotten() {
    use hadoop_wire::pb::hadoop::yarn::{
        LocalResourceProto, LocalResourceTypeProto, LocalResourceVisibilityProto,
        StringLocalResourceMapProto, UrlProto,
    };
    let cluster = Cluster::start(DemoConfig {
        agents: 0,
        heartbeat_ms: 120_000,
        ..DemoConfig::default()
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    // The stalling NameNode: its connections are held open, unanswered, until the test ends.
    let nn = TcpListener::bind("127.0.0.1:0").unwrap();
    let nn_addr = nn.local_addr().unwrap();
    let held = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    {
        let held = held.clone();
        std::thread::spawn(move || {
            for s in nn.incoming().flatten() {
                held.lock().unwrap().push(s);
            }
        });
    }
    let port = TcpListener::bind((IP, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let rm = cluster.rm_addr();
    let with_hdfs = |mut cfg: AgentConfig| {
        let mut conf = conf::Configuration::new();
        conf.set("fs.defaultFS", &format!("hdfs://{nn_addr}"));
        cfg.hdfs = nm_runtime::config::HdfsSettings::from_conf(&conf).unwrap();
        cfg.default_fs = format!("hdfs://{nn_addr}");
        cfg
    };
    let a1 = start_agent(with_hdfs(config(rm, dir.path(), port, true)));
    let c = container(9);
    let mut req =
        Minter::new(&a1, "root").start_request(c, &a1.node_id(), now_ms() + 600_000, "exit 0");
    req.container_launch_context
        .as_mut()
        .unwrap()
        .local_resources
        .push(StringLocalResourceMapProto {
            key: Some("slow".into()),
            value: Some(LocalResourceProto {
                resource: Some(UrlProto {
                    scheme: Some("hdfs".into()),
                    host: Some(nn_addr.ip().to_string()),
                    port: Some(i32::from(nn_addr.port())),
                    file: Some("/stalls".into()),
                    user_info: None,
                }),
                size: Some(1),
                timestamp: Some(1),
                r#type: Some(LocalResourceTypeProto::File as i32),
                visibility: Some(LocalResourceVisibilityProto::Application as i32),
                pattern: None,
                should_be_uploaded_to_shared_cache: None,
            }),
        });
    let r: StartContainersResponseProto = call(
        &client(&a1),
        cmp::START_CONTAINERS,
        &StartContainersRequestProto {
            start_container_request: vec![req],
        },
    )
    .unwrap();
    assert_eq!(r.succeeded_requests.len(), 1, "{r:?}");
    // Localizing: accepted, no process, the NameNode call unanswered.
    wait_for("the NameNode call", Duration::from_secs(10), || {
        !held.lock().unwrap().is_empty()
    });
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        a1.shared().cm.lock().unwrap().stage(&c),
        Some(Stage::Starting),
        "{:?}",
        completion(&a1, c)
    );
    a1.stop();
    a1.join();
    let a2 = start_agent(with_hdfs(config(rm, dir.path(), port, true)));
    let (state, status, diag) =
        completion(&a2, c).expect("the restarted agent forgot the container");
    assert_eq!(state, ContainerState::Complete);
    assert_eq!(status, exit_status::ABORTED);
    assert!(
        diag.contains("did not survive the NodeManager's restart"),
        "{diag}"
    );
    a2.stop();
    a2.join();
}
