//! ContainerManagementProtocol on a running agent, registered with the embedded rm-core: the
//! TOKEN-only server (SIMPLE refused, a forged NMToken refused), token checks through the real
//! IPC and SASL path, and the statuses a start produces (RUNNING in the table at once, then
//! the process's exit, or −105 after stopContainers).

use std::time::Duration;

use agent::demo::{Cluster, DemoConfig};
use hadoop_wire::pb::hadoop::yarn::{
    GetContainerStatusesRequestProto, GetContainerStatusesResponseProto,
    StartContainerRequestProto, StartContainersRequestProto, StartContainersResponseProto,
    StopContainersRequestProto, StopContainersResponseProto,
};
use hadoop_wire::sasl::client::{ClientAuth, TokenCredential};
use hadoop_wire::sasl::Qop;
use hadoop_wire::yarn::{cmp, exit_status};
use ipc::client::Client;
use nm_core::ids::{AppId, AttemptId, ContainerId};
use nm_core::table::ContainerState;
use nm_core::wire::container_id_proto;
use nm_runtime::{Agent, AgentConfig};

struct Node {
    _cluster: Cluster,
    agent: Agent,
    _dir: tempfile::TempDir,
}

use crate::cmp as cmp_support;
use cmp_support::{call, now_ms, remote, wait_for, Minter};

fn node() -> Node {
    let cluster = Cluster::start(DemoConfig {
        agents: 0,
        heartbeat_ms: 200,
        ..DemoConfig::default()
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg =
        AgentConfig::local(cluster.rm_addr(), "127.0.0.23".parse().unwrap(), dir.path()).unwrap();
    cfg.memory_mb = 8192;
    cfg.vcores = 4;
    let agent = Agent::start(cfg).unwrap();
    wait_for("keys", Duration::from_secs(10), || {
        agent.shared().cm.lock().unwrap().has_keys()
    });
    Node {
        _cluster: cluster,
        agent,
        _dir: dir,
    }
}

fn attempt(app: i32) -> AttemptId {
    AttemptId {
        app: AppId {
            cluster_timestamp: 1_700_000_000_000,
            id: app,
        },
        attempt: 1,
    }
}

fn container(app: i32, n: i64) -> ContainerId {
    ContainerId {
        app: attempt(app).app,
        attempt: 1,
        id: n,
    }
}

impl Node {
    fn minter(&self) -> Minter<'_> {
        Minter::new(&self.agent, &whoami())
    }

    fn nm_token(&self, a: AttemptId, forge: bool) -> TokenCredential {
        let m = self.minter();
        m.nm_token(a, &m.node(), None, forge)
    }

    fn start_request(
        &self,
        c: ContainerId,
        host_addr: &str,
        expiry: i64,
        command: &str,
    ) -> StartContainerRequestProto {
        self.minter().start_request(c, host_addr, expiry, command)
    }

    fn client(&self, auth: ClientAuth, user: &str) -> Client {
        self.minter().client_with(auth, user)
    }
}

fn whoami() -> String {
    std::env::var("USER").unwrap_or_else(|_| "root".into())
}

#[test]
fn simple_and_forged_tokens_are_refused_at_connection_time() {
    let n = node();
    // SIMPLE: Java's NodeManager is TOKEN-only even on insecure clusters. The FATAL reaches
    // the client either as the call's error or as the reason the connection closed.
    let simple = n.client(ClientAuth::default(), "alice");
    let e = call::<StartContainersResponseProto>(
        &simple,
        cmp::START_CONTAINERS,
        &StartContainersRequestProto::default(),
    )
    .unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("org.apache.hadoop.security.AccessControlException")
            && text.contains("SIMPLE authentication is not enabled.  Available:[TOKEN]"),
        "{text}"
    );
    // An NMToken with a wrong password: the DIGEST-MD5 exchange fails.
    let a = attempt(1);
    let forged = n.client(
        ClientAuth::token(n.nm_token(a, true), vec![Qop::Auth]),
        &a.to_string(),
    );
    let e = call::<StartContainersResponseProto>(
        &forged,
        cmp::START_CONTAINERS,
        &StartContainersRequestProto::default(),
    )
    .unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("DIGEST-MD5")
            || text.contains("InvalidToken")
            || text.contains("SaslException"),
        "{text}"
    );
    assert_eq!(n.agent.shared().table.lock().unwrap().len(), 0);
    // both refusals are authentication failures on /metrics
    let body = http_get(n.agent.metrics_addr().unwrap(), "/metrics");
    for k in [
        "hotpath_agent_ipc_auth_failures_total{server=\"container_management\"} 2\n",
        "hotpath_agent_ipc_auth_successes_total{server=\"container_management\"} 0\n",
        "hotpath_agent_ipc_auth_failures_total{server=\"agent\"} 0\n",
    ] {
        assert!(body.contains(k), "{k} missing:\n{body}");
    }
}

/// The response to `GET path` (HTTP/1.0, whole).
fn http_get(addr: std::net::SocketAddr, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn starts_run_and_report_exit_statuses_and_stops_give_minus_105() {
    let n = node();
    let a = attempt(1);
    let c = n.client(
        ClientAuth::token(n.nm_token(a, false), vec![Qop::Auth]),
        &a.to_string(),
    );
    let exp = now_ms() + 600_000;
    let me = n.agent.node_id();
    // A token for another node: the whole call fails with InvalidToken.
    let other = n.start_request(container(1, 1), "10.9.9.9:1234", exp, "true");
    let e = call::<StartContainersResponseProto>(
        &c,
        cmp::START_CONTAINERS,
        &StartContainersRequestProto {
            start_container_request: vec![other],
        },
    )
    .unwrap_err();
    let (class, msg) = remote(e);
    assert_eq!(
        class,
        "org.apache.hadoop.security.token.SecretManager$InvalidToken"
    );
    assert!(
        msg.contains(&format!("Expected : {me} Found : 10.9.9.9:1234")),
        "{msg}"
    );
    // An expired token: a per-container failure.
    let old = n.start_request(container(1, 2), &me, now_ms() - 1000, "true");
    let r: StartContainersResponseProto = call(
        &c,
        cmp::START_CONTAINERS,
        &StartContainersRequestProto {
            start_container_request: vec![old],
        },
    )
    .unwrap();
    assert!(r.failed_requests[0]
        .exception
        .as_ref()
        .unwrap()
        .message
        .as_deref()
        .unwrap()
        .contains("This token is expired"));
    // Two good ones: one exits 3, one sleeps until stopped.
    let quick = container(1, 3);
    let slow = container(1, 4);
    let q = n.start_request(quick, &me, exp, "exit 3");
    let s = n.start_request(slow, &me, exp, "sleep 600");
    let r: StartContainersResponseProto = call(
        &c,
        cmp::START_CONTAINERS,
        &StartContainersRequestProto {
            start_container_request: vec![q.clone(), s],
        },
    )
    .unwrap();
    assert_eq!(r.succeeded_requests.len(), 2, "{r:?}");
    // A replay of a start.
    let r: StartContainersResponseProto = call(
        &c,
        cmp::START_CONTAINERS,
        &StartContainersRequestProto {
            start_container_request: vec![q],
        },
    )
    .unwrap();
    assert!(r.failed_requests[0]
        .exception
        .as_ref()
        .unwrap()
        .message
        .as_deref()
        .unwrap()
        .contains("Attempt to relaunch the same container"));
    let state = |id: ContainerId| {
        n.agent
            .shared()
            .table
            .lock()
            .unwrap()
            .get(&id)
            .map(|c| (c.state, c.exit_status))
    };
    wait_for("exit 3", Duration::from_secs(20), || {
        state(quick) == Some((ContainerState::Complete, 3))
    });
    let st: GetContainerStatusesResponseProto = call(
        &c,
        cmp::GET_CONTAINER_STATUSES,
        &GetContainerStatusesRequestProto {
            container_id: vec![container_id_proto(&slow)],
        },
    )
    .unwrap();
    assert_eq!(st.status[0].state, Some(ContainerState::Running.proto()));
    let r: StopContainersResponseProto = call(
        &c,
        cmp::STOP_CONTAINERS,
        &StopContainersRequestProto {
            container_id: vec![container_id_proto(&slow)],
        },
    )
    .unwrap();
    assert_eq!(r.succeeded_requests.len(), 1);
    wait_for("-105", Duration::from_secs(20), || {
        state(slow) == Some((ContainerState::Complete, exit_status::KILLED_BY_APPMASTER))
    });
    // Another application's NMToken cannot read the container.
    let b = attempt(2);
    let c2 = n.client(
        ClientAuth::token(n.nm_token(b, false), vec![Qop::Auth]),
        &b.to_string(),
    );
    let st: GetContainerStatusesResponseProto = call(
        &c2,
        cmp::GET_CONTAINER_STATUSES,
        &GetContainerStatusesRequestProto {
            container_id: vec![container_id_proto(&slow)],
        },
    )
    .unwrap();
    assert!(st.status.is_empty());
    assert!(st.failed_requests[0]
        .exception
        .as_ref()
        .unwrap()
        .message
        .as_deref()
        .unwrap()
        .contains("attempted to get status for non-application container"));
    // Methods the agent does not serve answer at once.
    let e = c.call(cmp::UPDATE_CONTAINER, &[]).unwrap_err();
    let (class, msg) = remote(e);
    assert_eq!(class, "org.apache.hadoop.yarn.exceptions.YarnException");
    assert!(msg.starts_with("updateContainer is not supported"), "{msg}");
}

/// Issue 35, the agent's doors: 300 idle sockets that never authenticate (Java's NodeManager
/// serves the next call; the agent used to reset it, its 256 connections all taken), then a
/// real AM's startContainers, served; and signalToContainer by another application's AM is
/// refused (Java has no check) while the owner's works.
#[test]
fn idle_unauthenticated_sockets_do_not_keep_an_am_out_and_signals_need_the_owner() {
    use hadoop_wire::pb::hadoop::yarn::{
        SignalContainerCommandProto, SignalContainerRequestProto, SignalContainerResponseProto,
    };
    let n = node();
    let me = n.agent.node_id();
    let addr: std::net::SocketAddr = me.parse().unwrap();
    let idle: Vec<std::net::TcpStream> = (0..300)
        .map(|_| std::net::TcpStream::connect(addr).unwrap())
        .collect();
    let a = attempt(1);
    let t0 = std::time::Instant::now();
    let c = n.client(
        ClientAuth::token(n.nm_token(a, false), vec![Qop::Auth]),
        &a.to_string(),
    );
    let id = container(1, 1);
    let r: StartContainersResponseProto = call(
        &c,
        cmp::START_CONTAINERS,
        &StartContainersRequestProto {
            start_container_request: vec![n.start_request(
                id,
                &me,
                now_ms() + 600_000,
                "sleep 600",
            )],
        },
    )
    .unwrap();
    eprintln!(
        "startContainers answered {:?} after 300 idle sockets",
        t0.elapsed()
    );
    assert_eq!(r.succeeded_requests.len(), 1, "{r:?}");
    wait_for("running", Duration::from_secs(20), || {
        n.agent.shared().cm.lock().unwrap().stage(&id)
            == Some(nm_core::container_manager::Stage::Launched)
    });
    // Another application's AM: refused, for this container and a made-up one alike.
    let b = attempt(2);
    let other = n.client(
        ClientAuth::token(n.nm_token(b, false), vec![Qop::Auth]),
        &b.to_string(),
    );
    for target in [id, container(1, 99)] {
        let e = call::<SignalContainerResponseProto>(
            &other,
            cmp::SIGNAL_TO_CONTAINER,
            &SignalContainerRequestProto {
                container_id: container_id_proto(&target),
                command: SignalContainerCommandProto::GracefulShutdown as i32,
            },
        )
        .unwrap_err();
        let (class, msg) = remote(e);
        assert_eq!(class, "org.apache.hadoop.yarn.exceptions.YarnException");
        assert_eq!(
            msg,
            format!("{b} attempted to signal non-application container : {target}")
        );
    }
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        n.agent.shared().cm.lock().unwrap().stage(&id),
        Some(nm_core::container_manager::Stage::Launched),
        "another application's signal reached the container"
    );
    // The owner's signal goes through.
    let _: SignalContainerResponseProto = call(
        &c,
        cmp::SIGNAL_TO_CONTAINER,
        &SignalContainerRequestProto {
            container_id: container_id_proto(&id),
            command: SignalContainerCommandProto::ForcefulShutdown as i32,
        },
    )
    .unwrap();
    wait_for("killed by its owner", Duration::from_secs(20), || {
        n.agent.shared().cm.lock().unwrap().stage(&id)
            == Some(nm_core::container_manager::Stage::Done)
    });
    drop(idle);
}
