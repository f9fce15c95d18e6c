//! ContainerManagementProtocol for the agent tests (`#[path = "support/cmp.rs"] mod
//! cmp_support;`): waiting, and minting NMTokens and container tokens under the master keys a
//! running agent got from its RM (as the RM mints them), to call the agent the way an
//! ApplicationMaster does.

#![allow(dead_code)] // each test crate uses its part

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use hadoop_wire::pb::hadoop::yarn::{
    ContainerLaunchContextProto, ContainerTokenIdentifierProto, PriorityProto, ResourceProto,
    StartContainerRequestProto,
};
use hadoop_wire::sasl::client::{ClientAuth, TokenCredential};
use hadoop_wire::sasl::Qop;
use hadoop_wire::token::identifier::{ContainerTokenIdentifier, NmTokenIdentifier, NodeId};
use hadoop_wire::token::secret::MasterKey;
use hadoop_wire::token::TokenIdentifier;
use hadoop_wire::yarn::CONTAINER_MANAGEMENT_PROTOCOL;
use ipc::client::{Client, ClientConfig, ClientError};
use nm_core::ids::{AttemptId, ContainerId};
use nm_core::wire::container_id_proto;
use nm_runtime::Agent;

pub fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < timeout, "{what}: not within {timeout:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Tokens for one agent, under its RM's current keys.
pub struct Minter<'a> {
    pub agent: &'a Agent,
    /// `appSubmitter` of the tokens (the containers' user).
    pub submitter: String,
}

impl<'a> Minter<'a> {
    pub fn new(agent: &'a Agent, submitter: &str) -> Minter<'a> {
        Minter {
            agent,
            submitter: submitter.to_string(),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.agent.node_id().parse().unwrap()
    }

    /// The agent's NodeId.
    pub fn node(&self) -> NodeId {
        let a = self.addr();
        NodeId::new(a.ip().to_string(), i32::from(a.port()))
    }

    /// An NMToken for `a` naming `node`, signed with `key` (default: the RM's current one);
    /// `wrong_password` flips a bit of the password.
    pub fn nm_token(
        &self,
        a: AttemptId,
        node: &NodeId,
        key: Option<&MasterKey>,
        wrong_password: bool,
    ) -> TokenCredential {
        let (_, nm_keys) = self.agent.shared().cm.lock().unwrap().master_keys();
        let current = nm_keys.current().unwrap().clone();
        let key = key.unwrap_or(&current);
        let id = NmTokenIdentifier::new(Some(a), Some(node), &self.submitter, key.key_id);
        let mut password = key.password(id.bytes()).to_vec();
        if wrong_password {
            password[0] ^= 0x01;
        }
        TokenCredential {
            identifier: id.bytes().to_vec(),
            password,
        }
    }

    /// A ContainerManagementProtocol client authenticating with `token` as `user`.
    pub fn client_with(&self, auth: ClientAuth, user: &str) -> Client {
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

    /// A client of attempt `a` with a good NMToken for this node.
    pub fn client(&self, a: AttemptId) -> Client {
        let token = self.nm_token(a, &self.node(), None, false);
        self.client_with(ClientAuth::token(token, vec![Qop::Auth]), &a.to_string())
    }

    /// A start of `c` running `command`, its container token naming `host_addr` and expiring
    /// at `expiry` (wall ms).
    pub fn start_request(
        &self,
        c: ContainerId,
        host_addr: &str,
        expiry: i64,
        command: &str,
    ) -> StartContainerRequestProto {
        let (ckeys, _) = self.agent.shared().cm.lock().unwrap().master_keys();
        let rm_id = self
            .agent
            .shared()
            .cm
            .lock()
            .unwrap()
            .rm_identifier()
            .unwrap();
        let key = ckeys.current().unwrap();
        let id = ContainerTokenIdentifier::from_proto(ContainerTokenIdentifierProto {
            container_id: Some(container_id_proto(&c)),
            nm_host_addr: Some(host_addr.to_string()),
            app_submitter: Some(self.submitter.clone()),
            resource: Some(ResourceProto {
                memory: Some(256),
                virtual_cores: Some(1),
                resource_value_map: vec![],
            }),
            expiry_time_stamp: Some(expiry),
            master_key_id: Some(key.key_id),
            rm_identifier: Some(rm_id),
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
}

/// One call, its answer decoded.
pub fn call<R: prost::Message + Default>(
    c: &Client,
    method: &str,
    req: &impl prost::Message,
) -> Result<R, ClientError> {
    let resp = c.call(method, &prost::Message::encode_to_vec(req))?;
    Ok(R::decode(resp.payload()).unwrap())
}

/// The class and message of an ERROR answer.
pub fn remote(e: ClientError) -> (String, String) {
    match e {
        ClientError::Remote { class, message, .. } => (class, message),
        other => panic!("expected a remote error, got {other}"),
    }
}
