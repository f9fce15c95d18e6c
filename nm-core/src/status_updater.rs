//! The client side of the ResourceTracker protocol, sans-IO (after Java's
//! `NodeStatusUpdaterImpl`): request bytes out, response bytes in, the container table updated.
//!
//! ```text
//!   Unregistered ──encode_register──> (RPC) ──on_register_response──> Registered ──┐
//!        ^   NORMAL: keys, responseId 0, completions reported in it are delivered   │
//!        │   SHUTDOWN ──> Stopped(diagnostics)                                       │
//!        │                                                                           v
//!        │                  heartbeat_request (reused buffer; resent unchanged after a failure)
//!        │                            │ (RPC)
//!        │                  on_heartbeat_response:
//!        └──── RESYNC ─────   NORMAL → responseId, keys, interval, containers_to_be_removed_from_nm,
//!                               completions in flight delivered, cleanup orders
//!                             SHUTDOWN → Stopped(the RM's diagnostics)
//! ```
//!
//! - **responseId**: every heartbeat carries the id of the last response received (0 right
//!   after registration). A heartbeat that got no answer is resent byte for byte, so that if
//!   the RM did process it, the RM's duplicate rule (B.7) returns the cached answer to exactly
//!   the request whose completions we then mark delivered. New completions wait for the next
//!   fresh heartbeat.
//! - **Master keys** (trap 3): the last container-token and NM-token master keys received are
//!   echoed in every heartbeat.
//! - **Completions** (trap 1): see [`crate::table`]. The registration reports every container
//!   the table holds as `NMContainerStatusProto`; the completions that request carried (noted
//!   when it is built) count as delivered once it is answered NORMAL. A container that
//!   completes while the registration RPC is in flight is not among them: it goes in the next
//!   heartbeat.
//! - **Forgetting**: `containers_to_be_removed_from_nm`, application cleanup, and
//!   [`StatusUpdater::expire`] after `yarn.nodemanager.duration-to-track-stopped-containers`.
//!
//! In steady state (registered, no key roll, table size stable) building a heartbeat and
//! handling its NORMAL response allocate nothing: `nm-core/tests/status_updater/alloc.rs`
//! counts.

use std::collections::BTreeSet;

use hadoop_wire::pb::hadoop::yarn::{
    NmContainerStatusProto, NodeHealthStatusProto, NodeIdProto, NodeStatusProto, PriorityProto,
    RegisterNodeManagerRequestProto, RegisterNodeManagerResponseProto,
    UnRegisterNodeManagerRequestProto,
};
use prost::Message;

use crate::ids::{AppId, ContainerId};
use crate::table::{ContainerState, ContainerTable, Resource};
use crate::wire::{
    self, container_id_proto, resource_proto, HeartbeatHead, HeartbeatResponse, KeyRef, MasterKey,
    NodeAction, NodeHealth, WireError,
};

/// The version string a node registers with by default (the Hadoop line it speaks). The
/// protocol's name, version and methods are in `hadoop_wire::yarn`.
pub const NM_VERSION: &str = hadoop_wire::yarn::HADOOP_VERSION;

/// Java's `ResourceManagerConstants.RM_INVALID_IDENTIFIER`: the RM identifier while the node
/// re-registers after a RESYNC.
pub const RM_INVALID_IDENTIFIER: i64 = -1;

/// The container-token fields a re-registration reports per container (Java's
/// `ContainerImpl.getNMContainerStatus`), for the containers the container manager started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenFields {
    pub version: i32,
    /// `ExecutionTypeProto` as its number (absent: GUARANTEED, the proto default).
    pub execution_type: Option<i32>,
    pub allocation_request_id: i64,
    pub allocation_tags: Vec<String>,
    pub node_label_expression: String,
}

/// Who this node is and what it offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeIdentity {
    pub host: String,
    pub port: i32,
    pub http_port: i32,
    pub resource: Resource,
    pub nm_version: String,
}

/// Updater settings.
#[derive(Debug, Clone)]
pub struct UpdaterConfig {
    pub identity: NodeIdentity,
    /// `yarn.nodemanager.duration-to-track-stopped-containers`.
    pub track_stopped_ms: u64,
    /// Interval used until the RM names one.
    pub default_interval_ms: u64,
}

/// Where the updater is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    Unregistered,
    Registered,
    /// SHUTDOWN from the RM (its diagnostics), or a local stop.
    Stopped(String),
}

/// What a registration was answered with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegisterOutcome {
    Registered {
        rm_identifier: Option<i64>,
        rm_version: Option<String>,
    },
    Shutdown {
        diagnostics: String,
    },
}

/// What a heartbeat was answered with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeartbeatOutcome {
    Normal {
        next_interval_ms: u64,
    },
    /// Re-register (reporting every container).
    Resync,
    Shutdown {
        diagnostics: String,
    },
}

/// Updater errors.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UpdaterError {
    #[error("not registered")]
    NotRegistered,
    #[error("stopped: {0}")]
    Stopped(String),
    #[error("no heartbeat is outstanding")]
    NoHeartbeatOutstanding,
    #[error("malformed RegisterNodeManagerResponseProto: {0}")]
    BadRegisterResponse(String),
    #[error("unexpected {0:?} in a registration response")]
    UnexpectedAction(NodeAction),
    #[error("malformed NodeHeartbeatResponseProto: {0}")]
    BadHeartbeatResponse(#[from] WireError),
}

/// Counters, for metrics and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UpdaterStats {
    pub registrations: u64,
    pub heartbeats_built: u64,
    pub heartbeats_resent: u64,
    pub heartbeats_ok: u64,
    pub resyncs: u64,
    pub container_key_changes: u64,
    pub nm_key_changes: u64,
    /// Entries received in `containers_to_cleanup`.
    pub containers_to_cleanup: u64,
    /// Entries received in `applications_to_cleanup`.
    pub applications_to_cleanup: u64,
    /// Entries received in `containers_to_be_removed_from_nm`.
    pub removed_from_nm: u64,
    /// Entries received in `containers_to_signal`.
    pub containers_to_signal: u64,
    /// Entries received in `containers_to_update` and `containers_to_decrease`.
    pub containers_to_update: u64,
}

/// What the last NORMAL response asked of the node beyond the table's work: the entries of
/// `containers_to_signal` (13), `containers_to_update` (17) and `containers_to_decrease` (12),
/// for the caller to act on (they need the executor). All zero in an ordinary heartbeat, so
/// the caller re-reads the response only when there is something to do.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RmOrders {
    pub signals: u32,
    pub updates: u32,
    pub decreases: u32,
}

impl RmOrders {
    pub fn any(&self) -> bool {
        self.signals + self.updates + self.decreases > 0
    }
}

/// The status updater (see the module docs).
#[derive(Debug)]
pub struct StatusUpdater {
    cfg: UpdaterConfig,
    phase: Phase,
    response_id: i32,
    container_key: Option<MasterKey>,
    nm_key: Option<MasterKey>,
    token_sequence_no: Option<i64>,
    next_interval_ms: u64,
    rm_identifier: Option<i64>,
    request: Vec<u8>,
    outstanding: bool,
    /// The completions the last registration request built reports (delivered by its answer).
    registration_completions: Vec<ContainerId>,
    stats: UpdaterStats,
    orders: RmOrders,
}

fn store_key(slot: &mut Option<MasterKey>, k: KeyRef<'_>) -> bool {
    match slot {
        Some(cur) if cur.key_id == k.key_id && cur.bytes == k.bytes => false,
        Some(cur) => {
            cur.key_id = k.key_id;
            cur.bytes.clear();
            cur.bytes.extend_from_slice(k.bytes);
            true
        }
        None => {
            *slot = Some(MasterKey {
                key_id: k.key_id,
                bytes: k.bytes.to_vec(),
            });
            true
        }
    }
}

fn key_from_proto(k: &hadoop_wire::pb::hadoop::yarn::MasterKeyProto) -> Option<MasterKey> {
    Some(MasterKey {
        key_id: k.key_id?,
        bytes: k.bytes.clone().unwrap_or_default(),
    })
}

impl StatusUpdater {
    pub fn new(cfg: UpdaterConfig) -> Self {
        let next_interval_ms = cfg.default_interval_ms;
        Self {
            cfg,
            phase: Phase::Unregistered,
            response_id: 0,
            container_key: None,
            nm_key: None,
            token_sequence_no: None,
            next_interval_ms,
            rm_identifier: None,
            request: Vec::with_capacity(4096),
            outstanding: false,
            registration_completions: Vec::new(),
            stats: UpdaterStats::default(),
            orders: RmOrders::default(),
        }
    }

    pub fn identity(&self) -> &NodeIdentity {
        &self.cfg.identity
    }

    pub fn phase(&self) -> &Phase {
        &self.phase
    }

    pub fn is_registered(&self) -> bool {
        self.phase == Phase::Registered
    }

    /// The responseId the next heartbeat carries.
    pub fn response_id(&self) -> i32 {
        self.response_id
    }

    pub fn container_key(&self) -> Option<&MasterKey> {
        self.container_key.as_ref()
    }

    pub fn nm_key(&self) -> Option<&MasterKey> {
        self.nm_key.as_ref()
    }

    pub fn rm_identifier(&self) -> Option<i64> {
        self.rm_identifier
    }

    /// The heartbeat interval the RM last named (or the default).
    pub fn next_interval_ms(&self) -> u64 {
        self.next_interval_ms
    }

    /// What the last heartbeat response (NORMAL) asked for besides the table's work; zero
    /// after any other answer.
    pub fn rm_orders(&self) -> RmOrders {
        self.orders
    }

    pub fn stats(&self) -> UpdaterStats {
        self.stats
    }

    /// Whether the last heartbeat built has not been answered (the next call resends it).
    pub fn heartbeat_outstanding(&self) -> bool {
        self.outstanding
    }

    /// Stops locally (graceful stop); further heartbeats are refused.
    pub fn stop(&mut self, why: &str) {
        self.phase = Phase::Stopped(why.to_string());
    }

    fn node_id(&self) -> NodeIdProto {
        NodeIdProto {
            host: Some(self.cfg.identity.host.clone()),
            port: Some(self.cfg.identity.port),
        }
    }

    /// Appends a `RegisterNodeManagerRequestProto` to `out`: node id, http port, total
    /// resource, NM version, every container in the table as `NMContainerStatusProto`, the
    /// applications with live containers, and the node status (health).
    pub fn encode_register(
        &mut self,
        table: &ContainerTable,
        health: &NodeHealth,
        out: &mut Vec<u8>,
    ) -> Result<(), UpdaterError> {
        self.encode_register_with(table, health, |_| None, out)
    }

    /// [`Self::encode_register`] with each container's token fields (`tokens`, `None` for a
    /// container without: the proto defaults are sent).
    pub fn encode_register_with<'a>(
        &mut self,
        table: &ContainerTable,
        health: &NodeHealth,
        tokens: impl Fn(&ContainerId) -> Option<&'a TokenFields>,
        out: &mut Vec<u8>,
    ) -> Result<(), UpdaterError> {
        if let Phase::Stopped(why) = &self.phase {
            return Err(UpdaterError::Stopped(why.clone()));
        }
        table.undelivered_completions(&mut self.registration_completions);
        let id = &self.cfg.identity;
        let mut apps = BTreeSet::new();
        let statuses = table
            .iter()
            .map(|c| {
                if c.state != ContainerState::Complete {
                    apps.insert(c.id.app);
                }
                let t = tokens(&c.id);
                NmContainerStatusProto {
                    container_id: Some(container_id_proto(&c.id)),
                    container_state: Some(c.state.proto()),
                    resource: Some(resource_proto(&c.resource)),
                    priority: Some(PriorityProto {
                        priority: Some(c.priority),
                    }),
                    diagnostics: Some(c.diagnostics.clone()),
                    container_exit_status: Some(c.exit_status),
                    creation_time: Some(c.created_wall_ms),
                    node_label_expression: t.map(|t| t.node_label_expression.clone()),
                    version: t.map(|t| t.version),
                    execution_type: t.and_then(|t| t.execution_type),
                    allocation_request_id: t.map(|t| t.allocation_request_id),
                    allocation_tags: t.map(|t| t.allocation_tags.clone()).unwrap_or_default(),
                }
            })
            .collect();
        let req = RegisterNodeManagerRequestProto {
            node_id: Some(self.node_id()),
            http_port: Some(id.http_port),
            resource: Some(resource_proto(&id.resource)),
            nm_version: Some(id.nm_version.clone()),
            container_statuses: statuses,
            running_applications: apps.iter().map(AppId::to_proto).collect(),
            physical_resource: Some(resource_proto(&id.resource)),
            node_status: Some(NodeStatusProto {
                node_id: Some(self.node_id()),
                response_id: Some(0),
                node_health_status: Some(NodeHealthStatusProto {
                    is_node_healthy: Some(health.healthy),
                    health_report: Some(health.report.clone()),
                    last_health_report_time: Some(health.last_report_wall_ms),
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        req.encode(out)
            .map_err(|e| UpdaterError::BadRegisterResponse(e.to_string()))?;
        Ok(())
    }

    /// Handles the registration response. NORMAL: registered with the RM's keys, responseId 0,
    /// the completions the request reported count as delivered (not those made after
    /// [`Self::encode_register`] built it: they go in the next heartbeat). SHUTDOWN: stopped
    /// with the RM's diagnostics.
    pub fn on_register_response(
        &mut self,
        payload: &[u8],
        table: &mut ContainerTable,
        now_ms: u64,
    ) -> Result<RegisterOutcome, UpdaterError> {
        let r = RegisterNodeManagerResponseProto::decode(payload)
            .map_err(|e| UpdaterError::BadRegisterResponse(e.to_string()))?;
        let action = NodeAction::from_proto(r.node_action.unwrap_or(0))
            .map_err(|e| UpdaterError::BadRegisterResponse(e.to_string()))?;
        match action {
            NodeAction::Shutdown => {
                let d = r.diagnostics_message.unwrap_or_default();
                self.phase = Phase::Stopped(d.clone());
                Ok(RegisterOutcome::Shutdown { diagnostics: d })
            }
            NodeAction::Resync => Err(UpdaterError::UnexpectedAction(action)),
            NodeAction::Normal => {
                self.container_key = r
                    .container_token_master_key
                    .as_ref()
                    .and_then(key_from_proto);
                self.nm_key = r.nm_token_master_key.as_ref().and_then(key_from_proto);
                self.response_id = 0;
                self.token_sequence_no = None;
                self.outstanding = false;
                self.rm_identifier = r.rm_identifier;
                if let Some(res) = &r.resource {
                    // The RM may override the node's capability (Java's NM adopts it).
                    let id = &mut self.cfg.identity;
                    id.resource = Resource {
                        memory_mb: res.memory.unwrap_or(id.resource.memory_mb),
                        vcores: res.virtual_cores.unwrap_or(id.resource.vcores),
                    };
                }
                self.phase = Phase::Registered;
                self.stats.registrations += 1;
                table.registered(&self.registration_completions, now_ms);
                self.registration_completions.clear();
                Ok(RegisterOutcome::Registered {
                    rm_identifier: r.rm_identifier,
                    rm_version: r.rm_version,
                })
            }
        }
    }

    /// The heartbeat to send: a fresh `NodeHeartbeatRequestProto` built into the updater's
    /// reused buffer, or, when the previous one got no answer, that one again unchanged.
    pub fn heartbeat_request(
        &mut self,
        table: &mut ContainerTable,
        health: &NodeHealth,
    ) -> Result<&[u8], UpdaterError> {
        match &self.phase {
            Phase::Registered => {}
            Phase::Unregistered => return Err(UpdaterError::NotRegistered),
            Phase::Stopped(why) => return Err(UpdaterError::Stopped(why.clone())),
        }
        if self.outstanding {
            self.stats.heartbeats_resent += 1;
            return Ok(&self.request);
        }
        // Mark the pending completions in flight (first pass), then encode the same set.
        for _ in table.heartbeat_statuses() {}
        self.request.clear();
        let head = HeartbeatHead {
            host: &self.cfg.identity.host,
            port: self.cfg.identity.port,
            response_id: self.response_id,
            health,
            container_key: self.container_key.as_ref(),
            nm_key: self.nm_key.as_ref(),
            token_sequence_no: self.token_sequence_no,
        };
        wire::put_heartbeat(&mut self.request, &head, || {
            table
                .iter()
                .filter(|c| !matches!(c.delivery, crate::table::Delivery::Delivered { .. }))
        });
        self.outstanding = true;
        self.stats.heartbeats_built += 1;
        Ok(&self.request)
    }

    /// The heartbeat got no answer (connection lost, timeout, an IPC error): it is resent as
    /// is next time.
    pub fn on_heartbeat_failed(&mut self) {}

    /// Handles a heartbeat response (see the module docs). A malformed response is an error
    /// and leaves the heartbeat outstanding (it is resent).
    pub fn on_heartbeat_response(
        &mut self,
        payload: &[u8],
        table: &mut ContainerTable,
        now_ms: u64,
    ) -> Result<HeartbeatOutcome, UpdaterError> {
        if !self.outstanding {
            return Err(UpdaterError::NoHeartbeatOutstanding);
        }
        let r = HeartbeatResponse::parse(payload)?;
        // Validate the id lists before changing anything.
        for c in r.containers_to_cleanup() {
            c?;
        }
        for a in r.applications_to_cleanup() {
            a?;
        }
        for c in r.containers_to_be_removed_from_nm() {
            c?;
        }
        // Signals and updates are read only when present (an ordinary heartbeat pays nothing).
        if r.signals > 0 {
            for s in r.containers_to_signal() {
                s?;
            }
        }
        if r.updates + r.decreases > 0 {
            for u in r.containers_to_update().chain(r.containers_to_decrease()) {
                u?;
            }
        }
        self.outstanding = false;
        self.orders = RmOrders::default();
        match r.action {
            NodeAction::Resync => {
                // Java's NodeStatusUpdaterImpl: the RM is not known until re-registered
                // (RM_INVALID_IDENTIFIER), so every start carrying a token of the old RM is
                // refused ("… rejected as it is allocated by a previous RM"). Nothing else of
                // a RESYNC answer is applied (it carries nothing else).
                self.rm_identifier = Some(RM_INVALID_IDENTIFIER);
                table.heartbeat_abandoned();
                self.phase = Phase::Unregistered;
                self.stats.resyncs += 1;
                Ok(HeartbeatOutcome::Resync)
            }
            NodeAction::Shutdown => {
                table.heartbeat_abandoned();
                let d = r.diagnostics.unwrap_or("").to_string();
                self.phase = Phase::Stopped(d.clone());
                Ok(HeartbeatOutcome::Shutdown { diagnostics: d })
            }
            NodeAction::Normal => {
                self.response_id = r.response_id;
                if let Some(k) = r.container_key {
                    if store_key(&mut self.container_key, k) {
                        self.stats.container_key_changes += 1;
                    }
                }
                if let Some(k) = r.nm_key {
                    if store_key(&mut self.nm_key, k) {
                        self.stats.nm_key_changes += 1;
                    }
                }
                if let Some(t) = r.token_sequence_no {
                    self.token_sequence_no = Some(t);
                }
                if let Some(i) = r.next_interval_ms.filter(|&i| i > 0) {
                    self.next_interval_ms = i as u64;
                }
                self.stats.heartbeats_ok += 1;
                // Java's order: forget acknowledged completions, then the in-flight ones are
                // delivered, then the cleanup orders.
                for c in r.containers_to_be_removed_from_nm().flatten() {
                    self.stats.removed_from_nm += 1;
                    table.remove_acked(&c);
                }
                table.heartbeat_delivered(now_ms);
                for c in r.containers_to_cleanup().flatten() {
                    self.stats.containers_to_cleanup += 1;
                    table.cleanup_container(c, now_ms);
                }
                for a in r.applications_to_cleanup().flatten() {
                    self.stats.applications_to_cleanup += 1;
                    table.cleanup_application(a, now_ms);
                }
                // Java's NodeStatusUpdaterImpl hands signals and updates to the container
                // manager after the cleanups; so does the caller, from `rm_orders`.
                self.orders = RmOrders {
                    signals: r.signals,
                    updates: r.updates,
                    decreases: r.decreases,
                };
                self.stats.containers_to_signal += u64::from(r.signals);
                self.stats.containers_to_update += u64::from(r.updates + r.decreases);
                Ok(HeartbeatOutcome::Normal {
                    next_interval_ms: self.next_interval_ms,
                })
            }
        }
    }

    /// Forgets delivered completions tracked longer than `duration-to-track-stopped-containers`.
    pub fn expire(&self, table: &mut ContainerTable, now_ms: u64) -> usize {
        table.expire_delivered(now_ms, self.cfg.track_stopped_ms)
    }

    /// Appends an `UnRegisterNodeManagerRequestProto` (graceful stop).
    pub fn encode_unregister(&self, out: &mut Vec<u8>) {
        let req = UnRegisterNodeManagerRequestProto {
            node_id: Some(self.node_id()),
        };
        // Vec<u8> grows as needed: encoding cannot fail.
        let _ = req.encode(out);
    }
}
