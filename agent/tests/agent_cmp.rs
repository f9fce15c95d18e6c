//! ContainerManagementProtocol on a running agent, registered with the embedded rm-core: the
//! TOKEN-only server (SIMPLE refused, a forged NMToken refused), token checks through the real
//! IPC and SASL path, and the statuses a start produces (RUNNING in the table at once, then
//! the process's exit, or −105 after stopContainers).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use agent::demo::{Cluster, DemoConfig};
use agent::node::{Agent, AgentConfig};
use hadoop_wire::pb::hadoop::yarn::{
    ContainerLaunchContextProto, ContainerTokenIdentifierProto, GetContainerStatusesRequestProto,
    GetContainerStatusesResponseProto, PriorityProto, ResourceProto, StartContainerRequestProto,
    StartContainersRequestProto, StartContainersResponseProto, StopContainersRequestProto,
    StopContainersResponseProto,
};
use hadoop_wire::sasl::client::{ClientAuth, TokenCredential};
use hadoop_wire::sasl::Qop;
use hadoop_wire::token::identifier::{ContainerTokenIdentifier, NmTokenIdentifier, NodeId};
use hadoop_wire::token::TokenIdentifier;
use hadoop_wire::yarn::{cmp, exit_status, CONTAINER_MANAGEMENT_PROTOCOL};
use ipc::client::{Client, ClientConfig, ClientError};
use nm_core::ids::{AppId, AttemptId, ContainerId};
use nm_core::table::ContainerState;
use nm_core::wire::container_id_proto;

fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < timeout, "{what}: not within {timeout:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

struct Node {
    _cluster: Cluster,
    agent: Agent,
    _dir: tempfile::TempDir,
    rm_id: i64,
}

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
    let rm_id = agent.shared().cm.lock().unwrap().rm_identifier().unwrap();
    Node {
        _cluster: cluster,
        agent,
        _dir: dir,
        rm_id,
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
    fn addr(&self) -> SocketAddr {
        let id = self.agent.node_id();
        id.parse().unwrap()
    }

    fn node_id(&self) -> NodeId {
        let a = self.addr();
        NodeId::new(a.ip().to_string(), i32::from(a.port()))
    }

    fn nm_token(&self, a: AttemptId, forge: bool) -> TokenCredential {
        let (_, nm_keys) = self.agent.shared().cm.lock().unwrap().master_keys();
        let key = nm_keys.current().unwrap();
        let id = NmTokenIdentifier::new(Some(a), Some(&self.node_id()), "alice", key.key_id);
        let mut password = key.password(id.bytes()).to_vec();
        if forge {
            password[3] ^= 0x40;
        }
        TokenCredential {
            identifier: id.bytes().to_vec(),
            password,
        }
    }

    fn start_request(
        &self,
        c: ContainerId,
        host_addr: &str,
        expiry: i64,
        command: &str,
    ) -> StartContainerRequestProto {
        let (ckeys, _) = self.agent.shared().cm.lock().unwrap().master_keys();
        let key = ckeys.current().unwrap();
        let id = ContainerTokenIdentifier::from_proto(ContainerTokenIdentifierProto {
            container_id: Some(container_id_proto(&c)),
            nm_host_addr: Some(host_addr.to_string()),
            app_submitter: Some(whoami()),
            resource: Some(ResourceProto {
                memory: Some(256),
                virtual_cores: Some(1),
                resource_value_map: vec![],
            }),
            expiry_time_stamp: Some(expiry),
            master_key_id: Some(key.key_id),
            rm_identifier: Some(self.rm_id),
            priority: Some(PriorityProto { priority: Some(0) }),
            creation_time: Some(now_ms()),
            ..Default::default()
        });
        let token = ckeys.token(&id, &self.agent.node_id()).unwrap();
        StartContainerRequestProto {
            container_launch_context: Some(ContainerLaunchContextProto {
                command: vec![command.to_string()],
                ..Default::default()
            }),
            container_token: Some(token.to_proto()),
        }
    }

    fn client(&self, auth: ClientAuth, user: &str) -> Client {
        Client::new(
            self.addr(),
            ClientConfig {
                protocol: CONTAINER_MANAGEMENT_PROTOCOL.into(),
                protocol_version: 1,
                user: user.into(),
                auth,
                max_connect_attempts: 1,
                call_timeout: Duration::from_secs(10),
                ..ClientConfig::default()
            },
        )
    }
}

fn whoami() -> String {
    std::env::var("USER").unwrap_or_else(|_| "root".into())
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn call<R: prost::Message + Default>(
    c: &Client,
    method: &str,
    req: &impl prost::Message,
) -> Result<R, ClientError> {
    let resp = c.call(method, &req.encode_to_vec())?;
    Ok(R::decode(resp.payload()).unwrap())
}

fn remote(e: ClientError) -> (String, String) {
    match e {
        ClientError::Remote { class, message, .. } => (class, message),
        other => panic!("expected a remote error, got {other}"),
    }
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
