//! A realistic NodeManager heartbeat and the two ways to read what the RM's status update
//! needs from it: container id (application id, cluster timestamp, attempt, container id),
//! state, exit status and execution type of every container status.
//!
//! - [`extract_view`]: `validate()` once, then per status what the RM's shard runs
//!   (rm-core `node.rs`): `ContainerStatusView::summary` (one pass over the status; the
//!   capability, diagnostics and everything else are skipped by length) and
//!   `ContainerKey::from_view` on its container id.
//! - [`extract_prost`]: `NodeHeartbeatRequestProto::decode` (every field, every string and
//!   Vec materialised), then the same reads.
//!
//! Both write into a caller-provided `Vec` (cleared, capacity kept), so the output side
//! allocates nothing after the first call on either path.

use hadoop_wire::pb::hadoop::yarn::*;
use hadoop_wire::reader::DecodeError;
use hadoop_wire::view::yarn::NodeHeartbeatRequestView;
use prost::Message;
use rm_core::ids::{AppKey, ContainerKey};

/// What the status update needs from one container status.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Extracted {
    pub app_id: i32,
    pub cluster_timestamp: i64,
    pub attempt_id: i32,
    pub container_id: i64,
    /// Raw ContainerStateProto value (0 when absent).
    pub state: i32,
    /// −1000 when absent.
    pub exit_status: i32,
    /// ExecutionTypeProto, GUARANTEED (1) when absent.
    pub execution_type: i32,
}

/// A heartbeat like a Java NodeManager sends with `n` containers: node id, response id,
/// health status, utilisation, both master keys, and per container a full container id,
/// a RUNNING/COMPLETE mix, diagnostics, exit status, a capability of memory, vcores and
/// two ResourceInformationProto entries (`memory-mb` in `Mi`, `vcores`), and the execution
/// type.
pub fn sample_request(n: usize) -> NodeHeartbeatRequestProto {
    let ts = 1_767_225_600_000i64;
    let statuses = (0..n)
        .map(|i| {
            let app = ApplicationIdProto { id: Some(1000 + (i / 8) as i32), cluster_timestamp: Some(ts) };
            let complete = i % 5 == 4;
            let memory = 1024 * (1 + (i % 4) as i64);
            let vcores = 1 + (i % 2) as i32;
            ContainerStatusProto {
                container_id: Some(ContainerIdProto {
                    app_id: Some(app),
                    app_attempt_id: Some(ApplicationAttemptIdProto {
                        application_id: Some(app),
                        attempt_id: Some(1),
                    }),
                    // epoch 0 in the high bits, sequence in the low 40
                    id: Some(2 + i as i64),
                }),
                state: Some(if complete { ContainerStateProto::CComplete } else { ContainerStateProto::CRunning } as i32),
                diagnostics: Some(if complete {
                    "Container killed by the ApplicationMaster.\nContainer killed on request. Exit code is 143\n".into()
                } else {
                    String::new()
                }),
                exit_status: Some(if complete { 143 } else { -1000 }),
                capability: Some(ResourceProto {
                    memory: Some(memory),
                    virtual_cores: Some(vcores),
                    resource_value_map: vec![
                        ResourceInformationProto {
                            key: "memory-mb".into(),
                            value: Some(memory),
                            units: Some("Mi".into()),
                            r#type: Some(ResourceTypesProto::Countable as i32),
                            ..Default::default()
                        },
                        ResourceInformationProto {
                            key: "vcores".into(),
                            value: Some(i64::from(vcores)),
                            units: Some(String::new()),
                            r#type: Some(ResourceTypesProto::Countable as i32),
                            ..Default::default()
                        },
                    ],
                }),
                execution_type: Some(ExecutionTypeProto::Guaranteed as i32),
                ..Default::default()
            }
        })
        .collect();
    let utilization = |pmem, vmem, cpu| ResourceUtilizationProto {
        pmem: Some(pmem),
        vmem: Some(vmem),
        cpu: Some(cpu),
        custom_resources: Vec::new(),
    };
    NodeHeartbeatRequestProto {
        node_status: Some(NodeStatusProto {
            node_id: Some(NodeIdProto {
                host: Some("worker-0117.example.com".into()),
                port: Some(45454),
            }),
            response_id: Some(123_456),
            containers_statuses: statuses,
            node_health_status: Some(NodeHealthStatusProto {
                is_node_healthy: Some(true),
                health_report: Some(String::new()),
                last_health_report_time: Some(ts + 3_600_000),
            }),
            keep_alive_applications: Vec::new(),
            containers_utilization: Some(utilization(40_960, 86_016, 3.5)),
            node_utilization: Some(utilization(61_440, 92_160, 5.25)),
            increased_containers: Vec::new(),
            opportunistic_containers_status: Some(OpportunisticContainersStatusProto {
                running_opport_containers: Some(0),
                opport_memory_used: Some(0),
                opport_cores_used: Some(0),
                queued_opport_containers: Some(0),
                wait_queue_length: Some(0),
                estimated_queue_wait_time: Some(0),
                opport_queue_capacity: None,
            }),
        }),
        last_known_container_token_master_key: Some(MasterKeyProto {
            key_id: Some(-1_234_567),
            bytes: Some(vec![0x5a; 20]),
        }),
        last_known_nm_token_master_key: Some(MasterKeyProto {
            key_id: Some(7_654_321),
            bytes: Some(vec![0xa5; 20]),
        }),
        registering_collectors: Vec::new(),
        token_sequence_no: Some(17),
        ..Default::default()
    }
}

/// View path: validate once, then read the four fields of every status.
#[inline(never)]
pub fn extract_view(bytes: &[u8], out: &mut Vec<Extracted>) -> Result<(), DecodeError> {
    out.clear();
    let req = NodeHeartbeatRequestView::new(bytes);
    req.validate()?;
    extract_view_unvalidated(req, out)
}

/// View path without `validate()` (the accessors still check what they read).
#[inline(never)]
pub fn extract_view_unvalidated(
    req: NodeHeartbeatRequestView<'_>,
    out: &mut Vec<Extracted>,
) -> Result<(), DecodeError> {
    out.clear();
    let Some(status) = req.node_status()? else {
        return Ok(());
    };
    for cs in status.containers_statuses() {
        // What the RM's shard runs per status (rm-core `node.rs`): one `summary()` pass over
        // the status, then the container id's parts into a `ContainerKey`.
        let s = cs?.summary()?;
        let key = match s.container_id {
            Some(id) => ContainerKey::from_view(id)?,
            None => None,
        };
        let key = key.unwrap_or(ContainerKey {
            app: AppKey {
                cluster_timestamp: 0,
                id: 0,
            },
            attempt: 0,
            id: 0,
        });
        out.push(Extracted {
            app_id: key.app.id,
            cluster_timestamp: key.app.cluster_timestamp,
            attempt_id: key.attempt,
            container_id: key.id,
            state: s.state_raw.unwrap_or(0),
            exit_status: s.exit_status,
            execution_type: s.execution_type as i32,
        });
    }
    Ok(())
}

/// prost path: decode everything, then read the same fields.
#[inline(never)]
pub fn extract_prost(bytes: &[u8], out: &mut Vec<Extracted>) -> Result<(), prost::DecodeError> {
    out.clear();
    let req = NodeHeartbeatRequestProto::decode(bytes)?;
    let Some(status) = &req.node_status else {
        return Ok(());
    };
    for cs in &status.containers_statuses {
        let mut e = Extracted {
            state: cs.state.unwrap_or(0),
            exit_status: cs.exit_status(),
            execution_type: cs.execution_type() as i32,
            ..Extracted::default()
        };
        if let Some(id) = &cs.container_id {
            e.container_id = id.id.unwrap_or(0);
            if let Some(attempt) = &id.app_attempt_id {
                e.attempt_id = attempt.attempt_id.unwrap_or(0);
                if let Some(app) = &attempt.application_id {
                    e.app_id = app.id.unwrap_or(0);
                    e.cluster_timestamp = app.cluster_timestamp.unwrap_or(0);
                }
            }
        }
        out.push(e);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_paths_extract_the_same() {
        let bytes = sample_request(50).encode_to_vec();
        let (mut a, mut b) = (Vec::new(), Vec::new());
        extract_view(&bytes, &mut a).unwrap();
        extract_prost(&bytes, &mut b).unwrap();
        assert_eq!(a.len(), 50);
        assert_eq!(a, b);
        assert_eq!(a.iter().filter(|e| e.state == 3).count(), 10);
        assert!(a
            .iter()
            .all(|e| e.cluster_timestamp == 1_767_225_600_000 && e.attempt_id == 1));
    }
}
