//! The agent's own IPC protocol, `hotpath.agent.NodeAgentProtocol` v1, served by
//! `ipc::server` on the node address beside the `getBuffer` benchmark protocol.
//!
//! `getNodeReport(GetNodeReportRequestProto {})` → [`GetNodeReportResponseProto`]. The
//! message is ours (`hadoop-wire/proto/hotpath_protocols.proto`; field numbers ours, nested
//! records Hadoop's): the node id, http port,
//! total resource, health, every container in the table as a `ContainerStatusProto`, the
//! updater's phase, the last response id and the time of the last answered heartbeat.

use std::sync::{Arc, OnceLock};

use hadoop_wire::pb::hadoop::yarn::{NodeHealthStatusProto, NodeIdProto};
use ipc::server::{Call, CallError, Registry, Reply};

use crate::shared::{lock, Shared};
use nm_core::wire::{container_status_proto, resource_proto};

pub const PROTOCOL: &str = "hotpath.agent.NodeAgentProtocol";
pub const VERSION: u64 = 1;
pub const GET_NODE_REPORT: &str = "getNodeReport";

/// The `getNodeReport` answer (`hadoop-wire/proto/hotpath_protocols.proto`).
pub use hadoop_wire::pb::hotpath::GetNodeReportResponseProto;

/// Builds the report from the shared state.
pub fn node_report(shared: &Shared) -> GetNodeReportResponseProto {
    let id = &shared.identity;
    let st = lock(&shared.status).clone();
    let h = lock(&shared.health).clone();
    let containers = lock(&shared.table)
        .iter()
        .map(container_status_proto)
        .collect();
    GetNodeReportResponseProto {
        node_id: Some(NodeIdProto {
            host: Some(id.host.clone()),
            port: Some(id.port),
        }),
        http_port: Some(id.http_port),
        total: Some(resource_proto(&id.resource)),
        health: Some(NodeHealthStatusProto {
            is_node_healthy: Some(h.healthy),
            health_report: Some(h.report),
            last_health_report_time: Some(h.last_report_wall_ms),
        }),
        containers,
        phase: Some(st.phase.to_string()),
        last_response_id: Some(st.response_id),
        last_heartbeat_ms: Some(st.last_heartbeat_wall_ms),
        heartbeats: Some(
            shared
                .metrics
                .heartbeats_ok
                .load(std::sync::atomic::Ordering::Relaxed),
        ),
    }
}

/// Registers `getNodeReport` (answered once `shared` is set) and the benchmark protocol
/// (`getBuffer` up to `max_buffer` bytes).
pub fn register(reg: &mut Registry, shared: Arc<OnceLock<Arc<Shared>>>, max_buffer: u64) {
    reg.register(
        PROTOCOL,
        VERSION,
        GET_NODE_REPORT,
        move |_call: &Call<'_>, reply: &mut Reply<'_, '_>| {
            let Some(s) = shared.get() else {
                return Err(CallError::application(
                    "java.io.IOException",
                    "the agent is starting",
                ));
            };
            reply.message(&node_report(s))?;
            Ok(())
        },
    );
    ipc::buffer_protocol::register(reg, max_buffer);
}
