//! ContainerManagementProtocol (caller → NodeManager), TOKEN auth with the NMToken for that
//! node; one cached connection per node.
//!
//! General on purpose: an ApplicationMaster starts its containers with it (NMTokens from
//! allocate's `nm_tokens`), and an RM's AM launcher can start AM containers with it (an NMToken
//! it minted). The caller names the node (`host:port` of the NodeId, which is where the NM
//! serves this protocol), gives the NMToken, and the requests; [`ContainerManager`] keeps one
//! IPC connection per node and replaces it when the node's NMToken changes (a rolled key).
//!
//! Per-container failures (`failed_requests`: a bad container token, a duplicate start, an
//! unknown aux service, ...) come back as [`ContainerFailure`]s next to the successes; a failure
//! of the whole call (no or bad NMToken, node unreachable) is a [`YarnError`].

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use conf::Configuration;
use hadoop_wire::pb::hadoop::yarn::{
    ContainerExceptionMapProto, ContainerStatusProto, GetContainerStatusesRequestProto,
    GetContainerStatusesResponseProto, SerializedExceptionProto, StartContainerRequestProto,
    StartContainersRequestProto, StartContainersResponseProto, StopContainersRequestProto,
    StopContainersResponseProto,
};
use hadoop_wire::sasl::client::TokenCredential;
use hadoop_wire::token::identifier::container_from_proto;
use hadoop_wire::token::Token;
use hadoop_wire::yarn::ids::ContainerId;
use hadoop_wire::yarn::{cmp, CONTAINER_MANAGEMENT_PROTOCOL};

use crate::error::YarnError;
use crate::rpc::{resolve, Retry, Rpc};

const SERVICE: &str = "NodeManager (ContainerManagementProtocol)";

/// Longest exception text kept from a NodeManager (its traces can be long).
const MAX_MESSAGE: usize = 4096;

/// A container the NodeManager refused (`ContainerExceptionMapProto`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerFailure {
    /// `None` if the NM named no (or an unparsable) container id.
    pub container: Option<ContainerId>,
    /// The Java class of the exception (`class_name`).
    pub class: String,
    /// Its message, with the messages of its causes after `": "`.
    pub message: String,
}

impl std::fmt::Display for ContainerFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.class, self.message)
    }
}

fn exception_text(e: Option<&SerializedExceptionProto>) -> (String, String) {
    let Some(e) = e else {
        return ("(none)".into(), "(no exception)".into());
    };
    let class = e.class_name.clone().unwrap_or_else(|| "(unknown)".into());
    let mut message = e.message.clone().unwrap_or_default();
    let mut cause = e.cause.as_deref();
    let mut depth = 0;
    while let Some(c) = cause {
        if depth >= 8 || message.len() >= MAX_MESSAGE {
            break;
        }
        if let Some(m) = c.message.as_deref().filter(|m| !message.contains(*m)) {
            message.push_str(": ");
            message.push_str(m);
        }
        cause = c.cause.as_deref();
        depth += 1;
    }
    if message.len() > MAX_MESSAGE {
        let mut end = MAX_MESSAGE;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
        message.push('…');
    }
    (class, message)
}

fn failures(list: Vec<ContainerExceptionMapProto>) -> Vec<ContainerFailure> {
    list.into_iter()
        .map(|f| {
            let (class, message) = exception_text(f.exception.as_ref());
            ContainerFailure {
                container: f.container_id.as_ref().and_then(container_from_proto),
                class,
                message,
            }
        })
        .collect()
}

fn ids(list: &[hadoop_wire::pb::hadoop::yarn::ContainerIdProto]) -> Vec<ContainerId> {
    list.iter().filter_map(container_from_proto).collect()
}

/// What `startContainers` / `stopContainers` answered per container.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    pub succeeded: Vec<ContainerId>,
    pub failed: Vec<ContainerFailure>,
}

/// What `getContainerStatuses` answered.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Statuses {
    pub statuses: Vec<ContainerStatusProto>,
    pub failed: Vec<ContainerFailure>,
}

struct NodeConn {
    token: Token,
    rpc: Arc<Rpc>,
}

/// ContainerManagementProtocol calls to any number of nodes, one connection each.
pub struct ContainerManager {
    conf: Configuration,
    retry: Retry,
    nodes: Mutex<HashMap<String, NodeConn>>,
}

impl ContainerManager {
    /// `conf` gives the SASL settings (`hadoop.rpc.protection`, ...) and
    /// `ipc.client.connection.maxidletime`; `retry` the connect rules for every node.
    pub fn new(conf: &Configuration, retry: &Retry) -> ContainerManager {
        ContainerManager {
            conf: conf.clone(),
            retry: retry.clone(),
            nodes: Mutex::new(HashMap::new()),
        }
    }

    /// The connection to `node` (`host:port`), made or replaced for `nm_token`.
    fn conn(&self, node: &str, nm_token: &Token) -> Result<Arc<Rpc>, YarnError> {
        let mut nodes = self.nodes.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = nodes.get(node) {
            if c.token.identifier == nm_token.identifier && c.token.password == nm_token.password {
                return Ok(c.rpc.clone());
            }
        }
        let addr: SocketAddr = resolve("NodeManager address", node)?;
        let auth = ipc::sasl::client_auth(
            &self.conf,
            Some(TokenCredential {
                identifier: nm_token.identifier.clone(),
                password: nm_token.password.clone(),
            }),
        )?;
        let rpc = Arc::new(Rpc::new(
            SERVICE,
            addr,
            CONTAINER_MANAGEMENT_PROTOCOL,
            "",
            auth,
            &self.retry,
            crate::rpc::max_idle(&self.conf)?,
        ));
        if let Some(old) = nodes.insert(
            node.to_string(),
            NodeConn {
                token: nm_token.clone(),
                rpc: rpc.clone(),
            },
        ) {
            old.rpc.client.disconnect();
        }
        Ok(rpc)
    }

    /// Forgets the connection to `node` (closed once no call uses it).
    pub fn forget(&self, node: &str) {
        if let Some(c) = self
            .nodes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(node)
        {
            c.rpc.client.disconnect();
        }
    }

    /// `startContainers` on `node` with `nm_token`.
    pub fn start(
        &self,
        node: &str,
        nm_token: &Token,
        requests: Vec<StartContainerRequestProto>,
    ) -> Result<Outcome, YarnError> {
        let r: StartContainersResponseProto = self.conn(node, nm_token)?.call(
            cmp::START_CONTAINERS,
            &StartContainersRequestProto {
                start_container_request: requests,
            },
        )?;
        Ok(Outcome {
            succeeded: ids(&r.succeeded_requests),
            failed: failures(r.failed_requests),
        })
    }

    /// `stopContainers` on `node`.
    pub fn stop(
        &self,
        node: &str,
        nm_token: &Token,
        containers: &[ContainerId],
    ) -> Result<Outcome, YarnError> {
        let r: StopContainersResponseProto = self.conn(node, nm_token)?.call(
            cmp::STOP_CONTAINERS,
            &StopContainersRequestProto {
                container_id: containers.iter().map(|c| c.to_proto()).collect(),
            },
        )?;
        Ok(Outcome {
            succeeded: ids(&r.succeeded_requests),
            failed: failures(r.failed_requests),
        })
    }

    /// `getContainerStatuses` on `node`.
    pub fn statuses(
        &self,
        node: &str,
        nm_token: &Token,
        containers: &[ContainerId],
    ) -> Result<Statuses, YarnError> {
        let r: GetContainerStatusesResponseProto = self.conn(node, nm_token)?.call(
            cmp::GET_CONTAINER_STATUSES,
            &GetContainerStatusesRequestProto {
                container_id: containers.iter().map(|c| c.to_proto()).collect(),
            },
        )?;
        Ok(Statuses {
            statuses: r.status,
            failed: failures(r.failed_requests),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exception_texts_join_causes_and_are_capped() {
        let e = SerializedExceptionProto {
            message: Some("outer".into()),
            trace: None,
            class_name: Some("org.apache.hadoop.yarn.exceptions.YarnException".into()),
            cause: Some(Box::new(SerializedExceptionProto {
                message: Some("inner".into()),
                ..Default::default()
            })),
        };
        let (c, m) = exception_text(Some(&e));
        assert_eq!(c, "org.apache.hadoop.yarn.exceptions.YarnException");
        assert_eq!(m, "outer: inner");
        let long = SerializedExceptionProto {
            message: Some("é".repeat(5000)),
            ..Default::default()
        };
        let (_, m) = exception_text(Some(&long));
        assert!(m.len() <= MAX_MESSAGE + '…'.len_utf8(), "{}", m.len());
        assert_eq!(exception_text(None).1, "(no exception)");
    }
}
