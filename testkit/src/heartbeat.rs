//! The heartbeat fixtures: what a Java NodeManager sends to the ResourceManager, built with
//! prost as Hadoop's `*PBImpl`s encode it. A `NodeHeartbeatRequestProto` whose `NodeStatusProto`
//! carries RUNNING GUARANTEED container statuses, each with a full container id, empty
//! diagnostics, exit status −1000, a capability with memory, vcores and the `memory-mb` /
//! `vcores` resource map entries (as `ResourcePBImpl` writes them), the execution type and the
//! sub-state; plus health, utilization and both last-known master keys; and the registration.
//!
//! rm-core's tests and `examples/rm_smoke.rs` build their requests with these, and
//! `hotpath-bench heartbeat` (`benches::rm_heartbeat`) measures rm-core on them.

use hadoop_wire::pb::hadoop::yarn::{
    ContainerStateProto, ContainerStatusProto, ContainerSubStateProto, ExecutionTypeProto,
    MasterKeyProto, NodeHealthStatusProto, NodeHeartbeatRequestProto, NodeStatusProto,
    RegisterNodeManagerRequestProto, ResourceInformationProto, ResourceProto,
    ResourceUtilizationProto,
};
use prost::Message;
use rm_core::ids::{AppKey, ContainerKey, NodeKey};

/// Container statuses per heartbeat in the fixture.
pub const CONTAINERS: usize = 50;

/// The fixture's cluster timestamp.
pub const CLUSTER_TS: i64 = 1_760_000_000_000;

/// A container status as a Java NodeManager encodes it.
pub fn container_status(
    key: ContainerKey,
    state: ContainerStateProto,
    exit_status: i32,
    exec: ExecutionTypeProto,
) -> ContainerStatusProto {
    ContainerStatusProto {
        container_id: Some(key.to_proto()),
        state: Some(state as i32),
        diagnostics: Some(String::new()),
        exit_status: Some(exit_status),
        capability: Some(capability(2048, 1)),
        execution_type: Some(exec as i32),
        container_attributes: Vec::new(),
        container_sub_state: Some(if state == ContainerStateProto::CComplete {
            ContainerSubStateProto::CssDone as i32
        } else {
            ContainerSubStateProto::CssRunning as i32
        }),
    }
}

/// A `ResourceProto` as `ResourcePBImpl` writes it: memory, vcores, and the map entries.
pub fn capability(memory_mb: i64, vcores: i32) -> ResourceProto {
    ResourceProto {
        memory: Some(memory_mb),
        virtual_cores: Some(vcores),
        resource_value_map: vec![
            ResourceInformationProto {
                key: "memory-mb".into(),
                value: Some(memory_mb),
                units: Some("Mi".into()),
                r#type: Some(0),
                tags: Vec::new(),
                attributes: Vec::new(),
            },
            ResourceInformationProto {
                key: "vcores".into(),
                value: Some(vcores as i64),
                units: Some(String::new()),
                r#type: Some(0),
                tags: Vec::new(),
                attributes: Vec::new(),
            },
        ],
    }
}

/// The fixture's container ids: application `app`, attempt 1, ids `1..=n`.
pub fn containers(app: i32, n: usize) -> Vec<ContainerKey> {
    (1..=n as i64)
        .map(|id| ContainerKey {
            app: AppKey {
                cluster_timestamp: CLUSTER_TS,
                id: app,
            },
            attempt: 1,
            id,
        })
        .collect()
}

/// A `NodeStatusProto` for `node` (response id set by [`heartbeat_request`]).
pub fn node_status(
    node: &NodeKey,
    statuses: Vec<ContainerStatusProto>,
    healthy: bool,
) -> NodeStatusProto {
    NodeStatusProto {
        node_id: Some(node.to_proto()),
        response_id: None,
        containers_statuses: statuses,
        node_health_status: Some(NodeHealthStatusProto {
            is_node_healthy: Some(healthy),
            health_report: Some(String::new()),
            last_health_report_time: Some(CLUSTER_TS),
        }),
        keep_alive_applications: Vec::new(),
        containers_utilization: Some(ResourceUtilizationProto {
            pmem: Some(40_000),
            vmem: Some(80_000),
            cpu: Some(12.5),
            custom_resources: Vec::new(),
        }),
        node_utilization: Some(ResourceUtilizationProto {
            pmem: Some(50_000),
            vmem: Some(90_000),
            cpu: Some(20.0),
            custom_resources: Vec::new(),
        }),
        increased_containers: Vec::new(),
        opportunistic_containers_status: None,
    }
}

/// Encodes a heartbeat request whose responseId is a 5-byte varint at a fixed offset, so that
/// a timing loop can advance it in place ([`set_response_id`]). Returns (bytes, offset).
pub fn heartbeat_request(
    status: &NodeStatusProto,
    response_id: i32,
    keys: Option<(i32, i32)>,
) -> (Vec<u8>, usize) {
    let mut ns = status.encode_to_vec();
    ns.push(0x10); // field 2, varint: the last occurrence wins
    let rid_in_ns = ns.len();
    ns.extend_from_slice(&[0x80, 0x80, 0x80, 0x80, 0x00]);
    let mut out = Vec::with_capacity(ns.len() + 64);
    out.push(0x0a);
    prost::encoding::encode_varint(ns.len() as u64, &mut out);
    let at = out.len() + rid_in_ns;
    out.extend_from_slice(&ns);
    if let Some((ck, nk)) = keys {
        let rest = NodeHeartbeatRequestProto {
            last_known_container_token_master_key: Some(MasterKeyProto {
                key_id: Some(ck),
                bytes: Some(vec![0; 8]),
            }),
            last_known_nm_token_master_key: Some(MasterKeyProto {
                key_id: Some(nk),
                bytes: Some(vec![0; 8]),
            }),
            ..Default::default()
        };
        rest.encode(&mut out).unwrap_or_default();
    }
    set_response_id(&mut out, at, response_id);
    (out, at)
}

/// Rewrites the 5-byte responseId varint at `at`. `#[inline]`: `hotpath-bench heartbeat` calls it
/// in its timed loop from another crate, as it did when the fixture lived in `benches`.
#[inline]
pub fn set_response_id(buf: &mut [u8], at: usize, id: i32) {
    let v = id as u32;
    buf[at] = (v & 0x7f) as u8 | 0x80;
    buf[at + 1] = ((v >> 7) & 0x7f) as u8 | 0x80;
    buf[at + 2] = ((v >> 14) & 0x7f) as u8 | 0x80;
    buf[at + 3] = ((v >> 21) & 0x7f) as u8 | 0x80;
    buf[at + 4] = ((v >> 28) & 0x7f) as u8;
}

/// A registration request for `node` with `memory_mb` / `vcores`.
pub fn register_request(node: &NodeKey, memory_mb: i64, vcores: i32, version: &str) -> Vec<u8> {
    RegisterNodeManagerRequestProto {
        node_id: Some(node.to_proto()),
        http_port: Some(8042),
        resource: Some(capability(memory_mb, vcores)),
        nm_version: Some(version.into()),
        ..Default::default()
    }
    .encode_to_vec()
}
