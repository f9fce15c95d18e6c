//! The node state machine (RMNodeImpl's container bookkeeping), sans-IO:
//! `(NodeState, Input) → (NodeState, actions in ShardCtx)`.
//!
//! # Inputs
//!
//! - a **status update** ([`NodeState::status_update`]): one heartbeat's `NodeStatusProto`,
//!   read through [`NodeStatusView`] — health, utilization, and every container status's id,
//!   state, exit status and execution type ([`ContainerStatusView::summary`]). The capability
//!   is read only when opportunistic containers are enabled, summed straight from the view.
//! - a **carried completion** or **carried application** ([`NodeState::carried_complete`],
//!   [`NodeState::see_app`]): what a merged-away heartbeat contributed (see
//!   [`crate::mailbox`]).
//! - a **reset** ([`ResetKind`]): registration, too-far-behind (REBOOTED), liveness expiry
//!   (LOST), unregistration (SHUTDOWN), exclusion (DECOMMISSIONED).
//! - admin: **finish application**, **kill container**.
//!
//! # Container rules
//!
//! - RUNNING: a container not yet launched becomes launched (if the node is healthy, it is not
//!   already completed, and its application is not finished). Launched containers remember
//!   their execution type.
//! - COMPLETE: the container leaves the launched set and is recorded in the completion log
//!   (deduplicated by id); it is acknowledged to the NodeManager after the log is synced.
//!   Completion is terminal: a completed id reported RUNNING again is ignored.
//! - Any other state (NEW, unknown, absent) is neither running nor complete: ignored and
//!   counted. (Java treats every non-RUNNING state as finished; we do not acknowledge a
//!   container the NodeManager has not reported complete.)
//! - **Lost**: launched containers not reported RUNNING in *this* heartbeat leave the launched
//!   set (trap 4). GUARANTEED ones are counted as lost; OPPORTUNISTIC ones are dropped quietly.
//!   A lost container is **released, not completed**: it is not written to the completion log
//!   (which holds what NodeManagers report, the things we acknowledge), and a later COMPLETE for
//!   it is recorded normally. That keeps the outcome of a run of heartbeats a function of the
//!   newest RUNNING snapshot and the ordered completions, which is what lets the dispatcher
//!   merge pending heartbeats without changing the result.
//!
//! So after a status update of a healthy node, `launched` is exactly the containers RUNNING in
//! that heartbeat minus the completed ones.
//!
//! # Applications (our decision on trap 2)
//!
//! rm-core has no application submission, so every application is "unknown" in Java's sense,
//! and Java's rule (clean up the application of every RUNNING container it does not know, on
//! every heartbeat) would kill every container. Instead an application is **adopted** as
//! running on a node when one of its containers is first reported there. `hotpath rm
//! finish-app` marks it finished: each node it runs on gets it in `applications_to_cleanup`
//! once. A RUNNING container of a finished application is not launched; its node gets the
//! application in `applications_to_cleanup` once per node registration (not on every
//! heartbeat as Java does: re-registration is the retry). `containers_to_cleanup` comes only
//! from `kill-container`.
//!
//! # Health
//!
//! A heartbeat reporting the node unhealthy takes it out (state UNHEALTHY): its launched
//! containers are released and RUNNING reports are not tracked until it reports healthy again.
//! Completions are still recorded and acknowledged.

use ipc::pb::hadoop::yarn::{ContainerStateProto, ExecutionTypeProto};
use ipc::reader::{DecodeError, Reader, Value};
use ipc::view::yarn::{ContainerStatusView, NodeStatusView};

use crate::completion_log::CompletionLog;
use crate::ids::{AppKey, ContainerKey, FastMap, FastSet, NodeKey};

/// A node's lifecycle state (Java's `NodeState`, without DECOMMISSIONING).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lifecycle {
    New,
    Running,
    Unhealthy,
    Lost,
    Shutdown,
    Decommissioned,
    Rebooted,
}

impl Lifecycle {
    /// Whether the node takes part in the cluster (RUNNING or UNHEALTHY).
    pub fn is_active(self) -> bool {
        matches!(
            self,
            Lifecycle::Running | Lifecycle::Unhealthy | Lifecycle::New
        )
    }

    pub fn name(self) -> &'static str {
        match self {
            Lifecycle::New => "NEW",
            Lifecycle::Running => "RUNNING",
            Lifecycle::Unhealthy => "UNHEALTHY",
            Lifecycle::Lost => "LOST",
            Lifecycle::Shutdown => "SHUTDOWN",
            Lifecycle::Decommissioned => "DECOMMISSIONED",
            Lifecycle::Rebooted => "REBOOTED",
        }
    }
}

/// Why a node's container state is reset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ResetKind {
    /// (Re-)registration: a fresh incarnation, RUNNING.
    Registered = 1,
    /// responseId too far behind: REBOOTED until it registers again.
    Rebooted = 2,
    /// Silent past the liveness expiry: LOST.
    Lost = 3,
    /// unRegisterNodeManager: SHUTDOWN.
    Unregistered = 4,
    /// Excluded by the host lists: DECOMMISSIONED.
    Decommissioned = 5,
}

impl ResetKind {
    pub fn from_u8(v: u8) -> Option<ResetKind> {
        Some(match v {
            1 => ResetKind::Registered,
            2 => ResetKind::Rebooted,
            3 => ResetKind::Lost,
            4 => ResetKind::Unregistered,
            5 => ResetKind::Decommissioned,
            _ => return None,
        })
    }

    fn lifecycle(self) -> Lifecycle {
        match self {
            ResetKind::Registered => Lifecycle::Running,
            ResetKind::Rebooted => Lifecycle::Rebooted,
            ResetKind::Lost => Lifecycle::Lost,
            ResetKind::Unregistered => Lifecycle::Shutdown,
            ResetKind::Decommissioned => Lifecycle::Decommissioned,
        }
    }
}

/// Something for the node's next heartbeat response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OutItem {
    /// `containers_to_be_removed_from_nm` (only after the completion is durable).
    Ack(ContainerKey),
    /// `applications_to_cleanup`.
    CleanupApp(AppKey),
    /// `containers_to_cleanup`.
    CleanupContainer(ContainerKey),
}

/// Something worth a log line or a metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeEvent {
    Transition {
        node: u32,
        from: Lifecycle,
        to: Lifecycle,
    },
    /// Launched containers released (lost from a snapshot, or the node left).
    Released { node: u32, count: u32 },
}

/// Counters a shard keeps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeStats {
    pub status_updates: u64,
    pub statuses: u64,
    pub launched: u64,
    pub completions_new: u64,
    pub completions_dup: u64,
    pub lost: u64,
    pub released: u64,
    pub ignored: u64,
    pub malformed: u64,
}

/// What the node state machine writes to (owned by the shard, shared by its nodes).
pub struct ShardCtx<'a> {
    pub now_ms: u64,
    pub opportunistic: bool,
    pub finished_apps: &'a FastSet<AppKey>,
    pub log: &'a mut CompletionLog,
    /// Cleanup items: go to the outbox at the end of the batch.
    pub out: &'a mut Vec<(u32, OutItem)>,
    /// Acknowledgements: go to the outbox only after the log commit.
    pub acks: &'a mut Vec<(u32, ContainerKey)>,
    pub events: &'a mut Vec<NodeEvent>,
    pub stats: &'a mut NodeStats,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Launched {
    exec: ExecutionTypeProto,
    seen: u32,
}

/// Resource sums read from capabilities (opportunistic mode only).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Allocated {
    pub memory_mb: i64,
    pub vcores: i64,
}

/// `ResourceUtilizationProto` fields.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Utilization {
    pub pmem: i32,
    pub vmem: i32,
    pub cpu: f32,
}

impl Utilization {
    /// Reads the three scalar fields (custom resources are skipped).
    pub fn read(bytes: &[u8]) -> Result<Utilization, DecodeError> {
        let mut u = Utilization::default();
        let mut r = Reader::new(bytes);
        while !r.is_empty() {
            match r.read_field(0)? {
                (1, Value::Varint(v)) => u.pmem = v as i32,
                (2, Value::Varint(v)) => u.vmem = v as i32,
                (3, Value::Fixed32(v)) => u.cpu = f32::from_bits(v),
                _ => {}
            }
        }
        Ok(u)
    }
}

/// One NodeManager as the dispatcher sees it.
#[derive(Debug, Clone)]
pub struct NodeState {
    index: u32,
    id: NodeKey,
    lifecycle: Lifecycle,
    launched: FastMap<ContainerKey, Launched>,
    running_apps: FastSet<AppKey>,
    apps_cleanup_sent: FastSet<AppKey>,
    epoch: u32,
    healthy: bool,
    health_report: String,
    last_health_report_time: i64,
    node_utilization: Utilization,
    containers_utilization: Utilization,
    allocated: Allocated,
    last_response_id: i32,
}

/// A comparable picture of a node (tests, admin, the proptest).
#[derive(Debug, Clone, PartialEq)]
pub struct NodeSnapshot {
    pub id: NodeKey,
    pub lifecycle: Lifecycle,
    pub launched: Vec<(ContainerKey, ExecutionTypeProto)>,
    pub running_apps: Vec<AppKey>,
    pub apps_cleanup_sent: Vec<AppKey>,
    pub healthy: bool,
    pub health_report: String,
    pub node_utilization: Utilization,
    pub allocated: Allocated,
    pub last_response_id: i32,
}

impl NodeState {
    /// A node known by the shard but not yet registered (state NEW).
    pub fn new(index: u32, id: NodeKey) -> NodeState {
        NodeState {
            index,
            id,
            lifecycle: Lifecycle::New,
            launched: FastMap::default(),
            running_apps: FastSet::default(),
            apps_cleanup_sent: FastSet::default(),
            epoch: 0,
            healthy: true,
            health_report: String::new(),
            last_health_report_time: 0,
            node_utilization: Utilization::default(),
            containers_utilization: Utilization::default(),
            allocated: Allocated::default(),
            last_response_id: 0,
        }
    }

    pub fn id(&self) -> &NodeKey {
        &self.id
    }

    pub fn lifecycle(&self) -> Lifecycle {
        self.lifecycle
    }

    pub fn launched_len(&self) -> usize {
        self.launched.len()
    }

    pub fn is_launched(&self, c: &ContainerKey) -> bool {
        self.launched.contains_key(c)
    }

    pub fn allocated(&self) -> Allocated {
        self.allocated
    }

    /// A sorted, comparable copy of the state.
    pub fn snapshot(&self) -> NodeSnapshot {
        let mut launched: Vec<_> = self.launched.iter().map(|(k, v)| (*k, v.exec)).collect();
        launched.sort();
        let mut running_apps: Vec<_> = self.running_apps.iter().copied().collect();
        running_apps.sort();
        let mut apps_cleanup_sent: Vec<_> = self.apps_cleanup_sent.iter().copied().collect();
        apps_cleanup_sent.sort();
        NodeSnapshot {
            id: self.id.clone(),
            lifecycle: self.lifecycle,
            launched,
            running_apps,
            apps_cleanup_sent,
            healthy: self.healthy,
            health_report: self.health_report.clone(),
            node_utilization: self.node_utilization,
            allocated: self.allocated,
            last_response_id: self.last_response_id,
        }
    }

    fn set_lifecycle(&mut self, to: Lifecycle, ctx: &mut ShardCtx<'_>) {
        if self.lifecycle != to {
            ctx.events.push(NodeEvent::Transition {
                node: self.index,
                from: self.lifecycle,
                to,
            });
            self.lifecycle = to;
        }
    }

    fn release_all(&mut self, ctx: &mut ShardCtx<'_>) {
        let n = self.launched.len();
        if n > 0 {
            self.launched.clear();
            ctx.stats.released += n as u64;
            ctx.events.push(NodeEvent::Released {
                node: self.index,
                count: n as u32,
            });
        }
        self.allocated = Allocated::default();
    }

    /// A reset: the node's containers are released and its applications forgotten.
    pub fn reset(&mut self, kind: ResetKind, ctx: &mut ShardCtx<'_>) {
        self.release_all(ctx);
        self.running_apps.clear();
        self.apps_cleanup_sent.clear();
        if kind == ResetKind::Registered {
            self.healthy = true;
            self.health_report.clear();
            self.last_response_id = 0;
        }
        self.set_lifecycle(kind.lifecycle(), ctx);
    }

    /// Queues `app` for `applications_to_cleanup` once (per registration).
    fn cleanup_app(&mut self, app: AppKey, ctx: &mut ShardCtx<'_>) {
        if self.apps_cleanup_sent.insert(app) {
            ctx.out.push((self.index, OutItem::CleanupApp(app)));
        }
    }

    /// A RUNNING report of `app` on this node (also what a merged-away heartbeat carries):
    /// adopt it, or ask the node to clean it up if it is finished.
    pub fn see_app(&mut self, app: AppKey, ctx: &mut ShardCtx<'_>) {
        if ctx.finished_apps.contains(&app) {
            self.cleanup_app(app, ctx);
        } else {
            self.running_apps.insert(app);
        }
    }

    /// Admin: `app` finished. Nodes running it get it in `applications_to_cleanup` once.
    pub fn finish_app(&mut self, app: AppKey, ctx: &mut ShardCtx<'_>) {
        if self.running_apps.remove(&app) {
            self.cleanup_app(app, ctx);
        }
    }

    /// Admin: kill `c` if it runs here. Returns whether it did.
    pub fn kill_container(&mut self, c: ContainerKey, ctx: &mut ShardCtx<'_>) -> bool {
        if self.launched.contains_key(&c) {
            ctx.out.push((self.index, OutItem::CleanupContainer(c)));
            true
        } else {
            false
        }
    }

    #[inline]
    fn on_running(
        &mut self,
        key: ContainerKey,
        exec: ExecutionTypeProto,
        tracking: bool,
        ctx: &mut ShardCtx<'_>,
    ) -> bool {
        if let Some(e) = self.launched.get_mut(&key) {
            // true only the first time this heartbeat marks it (a status may repeat).
            let fresh = e.seen != self.epoch;
            e.seen = self.epoch;
            e.exec = exec;
            return fresh;
        }
        self.see_app(key.app, ctx);
        if !tracking || ctx.log.is_completed(&key) || ctx.finished_apps.contains(&key.app) {
            return false;
        }
        self.launched.insert(
            key,
            Launched {
                exec,
                seen: self.epoch,
            },
        );
        ctx.stats.launched += 1;
        true
    }

    fn on_complete(
        &mut self,
        key: ContainerKey,
        exit_status: i32,
        diagnostics: &str,
        ctx: &mut ShardCtx<'_>,
    ) {
        self.launched.remove(&key);
        if !ctx.finished_apps.contains(&key.app) {
            self.running_apps.insert(key.app);
        }
        if ctx
            .log
            .record(key, exit_status, ctx.now_ms, &self.id, diagnostics)
        {
            ctx.stats.completions_new += 1;
        } else {
            ctx.stats.completions_dup += 1;
        }
        ctx.acks.push((self.index, key));
    }

    /// A COMPLETE status carried over from a merged-away heartbeat.
    pub fn carried_complete(
        &mut self,
        cs: ContainerStatusView<'_>,
        ctx: &mut ShardCtx<'_>,
    ) -> Result<(), DecodeError> {
        let s = cs.summary()?;
        let key = match s.container_id {
            Some(v) => ContainerKey::from_view(v)?,
            None => None,
        };
        match key {
            Some(key) if s.state == Some(ContainerStateProto::CComplete) => {
                self.on_complete(key, s.exit_status, cs.diagnostics()?, ctx);
            }
            _ => ctx.stats.malformed += 1,
        }
        Ok(())
    }

    /// One heartbeat's `NodeStatusProto`. On a decode error the statuses read so far stay
    /// applied, the lost-container sweep is skipped (a cut-short snapshot must not release
    /// containers), and the error is returned.
    pub fn status_update(
        &mut self,
        status: NodeStatusView<'_>,
        ctx: &mut ShardCtx<'_>,
    ) -> Result<(), DecodeError> {
        ctx.stats.status_updates += 1;
        self.epoch = self.epoch.wrapping_add(1);
        if let Some(id) = status.response_id()? {
            self.last_response_id = id;
        }
        if let Some(h) = status.node_health_status()? {
            // proto2: an absent is_node_healthy reads as false, as in Java.
            self.healthy = h.is_node_healthy()?.unwrap_or(false);
            let report = h.health_report()?.unwrap_or("");
            if self.health_report != report {
                self.health_report.clear();
                self.health_report.push_str(report);
            }
            self.last_health_report_time = h.last_health_report_time()?.unwrap_or(0);
        }
        if let Some(u) = status.node_utilization()? {
            self.node_utilization = Utilization::read(u)?;
        }
        if let Some(u) = status.containers_utilization()? {
            self.containers_utilization = Utilization::read(u)?;
        }
        if self.lifecycle.is_active() {
            let to = if self.healthy {
                Lifecycle::Running
            } else {
                Lifecycle::Unhealthy
            };
            if to == Lifecycle::Unhealthy && self.lifecycle != Lifecycle::Unhealthy {
                self.release_all(ctx);
            }
            self.set_lifecycle(to, ctx);
        }
        let tracking = self.lifecycle == Lifecycle::Running;
        let mut seen_now = 0usize;
        let mut alloc = Allocated::default();
        for cs in status.containers_statuses() {
            let cs = cs?;
            ctx.stats.statuses += 1;
            let s = cs.summary()?;
            let key = match s.container_id {
                Some(v) => ContainerKey::from_view(v)?,
                None => None,
            };
            let Some(key) = key else {
                ctx.stats.malformed += 1;
                continue;
            };
            match s.state {
                Some(ContainerStateProto::CRunning) => {
                    if self.on_running(key, s.execution_type, tracking, ctx) {
                        seen_now += 1;
                    }
                }
                Some(ContainerStateProto::CComplete) => {
                    self.on_complete(key, s.exit_status, cs.diagnostics()?, ctx);
                }
                _ => ctx.stats.ignored += 1,
            }
            if ctx.opportunistic
                && matches!(
                    s.state,
                    Some(ContainerStateProto::CRunning | ContainerStateProto::CNew)
                )
            {
                // YARN-11003's sum, read straight from the view: no Resource object.
                if let Some(cap) = cs.capability()? {
                    alloc.memory_mb += cap.memory()?.unwrap_or(0);
                    alloc.vcores += cap.virtual_cores()?.unwrap_or(0) as i64;
                }
            }
        }
        if ctx.opportunistic {
            self.allocated = alloc;
        }
        // seen_now counts launched entries marked by this heartbeat, each once: equal to the
        // map's size means nothing was lost, and the sweep is skipped.
        if seen_now != self.launched.len() {
            let epoch = self.epoch;
            let (mut lost, mut dropped) = (0u64, 0u64);
            self.launched.retain(|_, e| {
                if e.seen == epoch {
                    return true;
                }
                if e.exec == ExecutionTypeProto::Guaranteed {
                    lost += 1;
                } else {
                    dropped += 1;
                }
                false
            });
            if lost + dropped > 0 {
                ctx.stats.lost += lost;
                ctx.stats.released += lost + dropped;
                ctx.events.push(NodeEvent::Released {
                    node: self.index,
                    count: (lost + dropped) as u32,
                });
            }
        }
        Ok(())
    }
}
