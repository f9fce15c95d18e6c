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
use std::time::{Duration, Instant};

use agent::demo::{Cluster, DemoConfig};
use agent::node::{Agent, AgentConfig};
use hadoop_wire::pb::hadoop::yarn::{
    ContainerLaunchContextProto, ContainerTokenIdentifierProto, PriorityProto, ResourceProto,
    StartContainerRequestProto, StartContainersRequestProto, StartContainersResponseProto,
    StopContainersRequestProto,
};
use hadoop_wire::sasl::client::{ClientAuth, TokenCredential};
use hadoop_wire::sasl::Qop;
use hadoop_wire::token::identifier::{ContainerTokenIdentifier, NmTokenIdentifier, NodeId};
use hadoop_wire::token::TokenIdentifier;
use hadoop_wire::yarn::{cmp, exit_status, CONTAINER_MANAGEMENT_PROTOCOL};
use ipc::client::{Client, ClientConfig};
use nm_core::container_manager::Stage;
use nm_core::ids::{AppId, AttemptId, ContainerId};
use nm_core::table::ContainerState;
use nm_core::wire::container_id_proto;
use prost::Message as _;

fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < timeout, "{what}: not within {timeout:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

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
    let (_, nm_keys) = a.shared().cm.lock().unwrap().master_keys();
    let key = nm_keys.current().unwrap();
    let addr: SocketAddr = a.node_id().parse().unwrap();
    let node = NodeId::new(addr.ip().to_string(), i32::from(addr.port()));
    let id = NmTokenIdentifier::new(Some(attempt()), Some(&node), "root", key.key_id);
    let token = TokenCredential {
        identifier: id.bytes().to_vec(),
        password: key.password(id.bytes()).to_vec(),
    };
    Client::new(
        addr,
        ClientConfig {
            protocol: CONTAINER_MANAGEMENT_PROTOCOL.into(),
            protocol_version: 1,
            user: attempt().to_string(),
            auth: ClientAuth::token(token, vec![Qop::Auth]),
            max_connect_attempts: 1,
            call_timeout: Duration::from_secs(10),
            ..ClientConfig::default()
        },
    )
}

fn start(a: &Agent, c: ContainerId, command: &str) {
    let (ckeys, _) = a.shared().cm.lock().unwrap().master_keys();
    let rm_id = a.shared().cm.lock().unwrap().rm_identifier().unwrap();
    let key = ckeys.current().unwrap();
    let id = ContainerTokenIdentifier::from_proto(ContainerTokenIdentifierProto {
        container_id: Some(container_id_proto(&c)),
        nm_host_addr: Some(a.node_id()),
        app_submitter: Some("root".into()),
        resource: Some(ResourceProto {
            memory: Some(256),
            virtual_cores: Some(1),
            resource_value_map: vec![],
        }),
        expiry_time_stamp: Some(now_ms() + 600_000),
        master_key_id: Some(key.key_id),
        rm_identifier: Some(rm_id),
        priority: Some(PriorityProto { priority: Some(0) }),
        creation_time: Some(now_ms()),
        ..Default::default()
    });
    let token = ckeys.token(&id, &a.node_id()).unwrap();
    let req = StartContainersRequestProto {
        start_container_request: vec![StartContainerRequestProto {
            container_launch_context: Some(ContainerLaunchContextProto {
                command: vec![command.to_string()],
                ..Default::default()
            }),
            container_token: Some(token.to_proto()),
        }],
    };
    let resp = client(a)
        .call(cmp::START_CONTAINERS, &req.encode_to_vec())
        .unwrap();
    let r = StartContainersResponseProto::decode(resp.payload()).unwrap();
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

/// The pid the container's pid file names (its process group).
fn pid_of(dir: &Path, c: ContainerId) -> i32 {
    let name = format!("{c}.pid");
    let mut stack = vec![dir.join("local").join("nmPrivate")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.file_name().unwrap() == name.as_str() {
                return std::fs::read_to_string(&p).unwrap().trim().parse().unwrap();
            }
        }
    }
    panic!("no pid file for {c}");
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
    let cluster = Cluster::start(DemoConfig {
        agents: 0,
        heartbeat_ms: 200,
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
    let b = state(&a2, brief).unwrap();
    assert_eq!((b.0, b.1), (ContainerState::Complete, 4), "{b:?}");
    // The recovered container is managed: stopContainers kills its group, −105.
    let stop = StopContainersRequestProto {
        container_id: vec![container_id_proto(&long)],
    };
    client(&a2)
        .call(cmp::STOP_CONTAINERS, &stop.encode_to_vec())
        .unwrap();
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
    let o = state(&a3, orphan).unwrap();
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
    a3.stop();
    a3.join();
}
