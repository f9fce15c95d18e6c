//! The tokens minted with a container, under the tracker's current keys ([`TokenKeys`]):
//! its container token and the NMToken for its node. `allocate` hands them to AMs; the AM
//! launcher ([`crate::am_launcher`]) starts AM containers with them.

use hadoop_wire::pb::hadoop::yarn::{ContainerTypeProto, ExecutionTypeProto, PriorityProto};
use hadoop_wire::token::Token;
use hadoop_wire::yarn::ids::{AttemptId, ContainerId};

use crate::ids::NodeKey;

use super::{Res, TokenKeys};

/// Mints a container token (`RMContainerTokenSecretManager.createContainerToken`).
#[allow(clippy::too_many_arguments)]
pub fn container_token(
    keys: &TokenKeys,
    container: ContainerId,
    node: &NodeKey,
    user: &str,
    res: Res,
    priority: i32,
    now_ms: u64,
    expiry_ms: u64,
    container_type: ContainerTypeProto,
) -> Token {
    use hadoop_wire::pb::hadoop::yarn::ContainerTokenIdentifierProto;
    use hadoop_wire::token::ContainerTokenIdentifier;
    let id = ContainerTokenIdentifier::from_proto(ContainerTokenIdentifierProto {
        container_id: Some(container.to_proto()),
        nm_host_addr: Some(node.to_string()),
        app_submitter: Some(user.to_string()),
        resource: Some(res.to_proto()),
        expiry_time_stamp: Some((now_ms + expiry_ms) as i64),
        master_key_id: Some(keys.container.key_id),
        rm_identifier: Some(keys.rm_identifier),
        priority: Some(PriorityProto {
            priority: Some(priority),
        }),
        creation_time: Some(now_ms as i64),
        log_aggregation_context: None,
        node_label_expression: Some(String::new()),
        container_type: Some(container_type as i32),
        execution_type: Some(ExecutionTypeProto::Guaranteed as i32),
        version: Some(0),
        allocation_request_id: Some(-1),
        allocation_tags: Vec::new(),
    });
    let password = keys
        .container
        .password(hadoop_wire::token::TokenIdentifier::bytes(&id));
    Token::for_identifier(&id, &password, &node.to_string())
}

/// Mints an NMToken (`NMTokenSecretManagerInRM.createNMToken`).
pub fn nm_token(keys: &TokenKeys, attempt: AttemptId, node: &NodeKey, user: &str) -> Token {
    use hadoop_wire::token::identifier::NodeId;
    use hadoop_wire::token::NmTokenIdentifier;
    let id = NmTokenIdentifier::new(
        Some(attempt),
        Some(&NodeId::new(node.host.to_string(), node.port)),
        user,
        keys.nm.key_id,
    );
    let password = keys
        .nm
        .password(hadoop_wire::token::TokenIdentifier::bytes(&id));
    Token::for_identifier(&id, &password, &node.to_string())
}
