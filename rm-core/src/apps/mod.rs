//! Applications, their attempts and the FIFO scheduler, sans-IO: ApplicationClientProtocol and
//! ApplicationMasterProtocol requests in, responses, AM launches and cleanups out.
//!
//! Named after Java's nouns:
//!
//! - [`RmApp`] (`RMAppImpl`): SUBMITTED → ACCEPTED → RUNNING → FINISHING → FINISHED, or FAILED /
//!   KILLED, with diagnostics. A submission is checked as Java's `RMAppManager` does (resource
//!   over the maximum allocation: `InvalidResourceRequestException`); an unknown queue is
//!   rejected as the CapacityScheduler rejects it (the application FAILED with "submitted by user
//!   … to unknown queue: …"). Attempts up to `yarn.resourcemanager.am.max-attempts` (or the
//!   submission's smaller positive value); AM containers that end ABORTED, PREEMPTED,
//!   DISKS_FAILED or KILLED_BY_RESOURCEMANAGER do not count, as in Java.
//! - [`Attempt`] (`RMAppAttemptImpl`): SCHEDULED (waiting for its AM container) → ALLOCATED
//!   (an [`AmLaunch`] is queued) → LAUNCHED → RUNNING (registered) → FINISHING (unregistered)
//!   → FINISHED, or FAILED / KILLED. The AM liveness monitor fails an attempt silent for
//!   `yarn.am.liveness-monitor.expiry-interval-ms` ("ApplicationMaster for attempt … timed out").
//!   With `keepContainersAcrossApplicationAttempts`, a failed attempt that is retried leaves
//!   its RUNNING containers (not its AM container) to the next attempt: they stay in the
//!   failed attempt's `live` map, their completions go to the current attempt's AM, and the
//!   next attempt's registration lists them with NMTokens for their nodes.
//! - The FIFO scheduler ([`SchedNode`] per NodeManager, capacity from its registration):
//!   applications by priority (higher first, as the CapacityScheduler's FIFO ordering policy;
//!   all 0 under Java's default `yarn.cluster.max-application-priority`), then in submission
//!   order; per application its AM container first, then its asks
//!   by priority (lower number first): node-local, then rack-local, then off-switch, with Java's
//!   `relaxLocality` rules and node/rack/ANY counts decremented together. Asks are normalized up
//!   to the minimum allocation; a container fits a node only if both memory and vcores fit.
//!   Only applications in the pending index (an AM container to place, or ANY asks with
//!   containers outstanding) are visited, in that order. Allocation happens in a node's
//!   heartbeat ([`Apps::node_heartbeat`], Java's NODE_UPDATE), which the heartbeat path calls
//!   only while [`Apps::work`] says some pending need fits on some node (an unchanged
//!   heartbeat otherwise costs one relaxed load: no lock, no allocation); on the nodes a
//!   batch of completions freed room on ([`Apps::apply_node_changes`]: the shards hand the
//!   scheduler completions, containers seen RUNNING and health transitions, off the ring
//!   threads, one lock per batch); and, with
//!   [`AppsConfig::immediate_placement`] (`hotpath.rm.scheduler.immediate-placement`, on by
//!   default), also as soon as there is something to place: an AM container at submission or
//!   at an attempt's retry ([`Apps::place_unplaced`]), an AM's new asks within its `allocate`
//!   call (the containers come back in that call's response), on the nodes with the most room
//!   first. Java's CapacityScheduler offers the same off the heartbeat as asynchronous
//!   scheduling; ours runs in the call that made the work.
//! - `allocate` (`ApplicationMasterService` + `DefaultAMSProcessor`): responseId rules (a
//!   repeat of the previous request gets the previous response again; any other mismatch is
//!   `InvalidApplicationMasterRequestException`), releases (completed ABORTED "Container released
//!   by application" and a kill sent to the node), blacklist, asks, newly allocated containers
//!   with container tokens, NMTokens for nodes the attempt has none for yet, completed container
//!   statuses (each delivered once), the AMRMToken while a next key is pending.
//!
//! Container ids: `container_[e<epoch>_]<clusterTimestamp>_<app>_<attempt>_<seq>`, a counter per
//! attempt starting at 1 (the AM container), with the RM epoch in the bits above the sequence
//! number as Java's (0, so no `e…_` part, unless the state store has seen an earlier run).
//!
//! Recovery (`yarn.resourcemanager.recovery.enabled`, work-preserving): with a state store the
//! changes that matter across a restart leave as [`Rec`] records ([`Apps::take_store_ops`]);
//! [`Apps::recover`] rebuilds the applications from them. A recovered attempt that had its AM
//! container waits, LAUNCHED, for its AM to register again (its `allocate` gets Java's
//! `ApplicationMasterNotRegisteredException`, on which `AMRMClient` re-registers and re-sends
//! its asks); an attempt that had none is scheduled again; a failed last attempt is retried
//! while attempts remain. A node's first registration after the restart brings back its
//! containers ([`Apps::node_registered`]): RUNNING ones of recovered attempts are live again
//! on it, completions that happened meanwhile go to their AMs, and a recovered container the
//! node no longer has is lost (ABORTED).
//!
//! Effects for the IO side: [`Apps::take_launches`] (AM containers to start on their nodes) and
//! [`Apps::take_cleanups`] (applications and containers to clean up through the heartbeat
//! outbox). Time is passed in (`now_ms`, wall clock milliseconds).
//!
//! The code is split by concern, each file with its own `impl Apps` block:
//!
//! - here: the types ([`Apps`], [`RmApp`], [`Attempt`], [`Res`], the states, the effects),
//!   the accessors, the effect queues and the gate;
//! - `config.rs`: [`AppsConfig`], read from a `conf::Configuration`;
//! - `nodes.rs`: the scheduler's nodes ([`SchedNode`]), with running totals over the active
//!   ones and an index by free room;
//! - `scheduler.rs`: node events, NODE_UPDATE ([`Apps::node_update`]), placement on a node
//!   (the AM container, then asks by locality), immediate placement
//!   ([`Apps::place_unplaced`]), and the resource-request check;
//! - `lifecycle.rs`: how containers, attempts and applications end (completions, AM exits,
//!   retries), the AM launcher's results, and [`Apps::tick`] (the AM liveness monitor and the
//!   allocation expiry);
//! - `client_protocol.rs`: ApplicationClientProtocol (new application, submit, report, kill,
//!   fail attempt) and the application reports ([`report`], [`reduced_report`]);
//! - `am_protocol.rs`: ApplicationMasterProtocol (register, allocate, finish);
//! - `tokens.rs`: container tokens and NMTokens ([`container_token`], [`nm_token`]);
//! - `recovery.rs`: rebuilding from the state store ([`Apps::recover`]), the compaction
//!   snapshot ([`Apps::store_snapshot`]), and a node's first registration after a restart;
//! - `tests/`: the unit tests, a file per concern.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use hadoop_wire::pb::hadoop::yarn::{
    AllocateResponseProto, ContainerLaunchContextProto, ContainerStateProto, ContainerStatusProto,
    ExecutionTypeProto, FinalApplicationStatusProto, ResourceProto, YarnApplicationStateProto,
};
use hadoop_wire::token::Token;
use hadoop_wire::yarn::ids::{AppId, AttemptId, ContainerId};

use crate::amrm_token::AmrmTokenSecrets;
use crate::ids::NodeKey;
use crate::master_key::MasterKey;
use crate::state_store::{AppEndedRec, Rec};

mod am_protocol;
mod client_protocol;
mod config;
mod decommission;
mod lifecycle;
mod nodes;
mod recovery;
mod renewal;
mod scheduler;
#[cfg(test)]
mod tests;
mod tokens;

pub use client_protocol::{reduced_report, report};
pub use config::AppsConfig;
pub use nodes::SchedNode;
pub use tokens::{container_token, nm_token};

use nodes::ClusterNodes;

/// The one queue.
pub const DEFAULT_QUEUE: &str = "default";
/// Every node's rack (no topology script).
pub const DEFAULT_RACK: &str = "/default-rack";
/// `ResourceRequest.ANY`.
pub const ANY: &str = "*";

/// Java exception classes the protocols answer with.
pub mod exc {
    pub const YARN: &str = "org.apache.hadoop.yarn.exceptions.YarnException";
    pub const APP_NOT_FOUND: &str =
        "org.apache.hadoop.yarn.exceptions.ApplicationNotFoundException";
    pub const ATTEMPT_NOT_FOUND: &str =
        "org.apache.hadoop.yarn.exceptions.ApplicationAttemptNotFoundException";
    pub const INVALID_RESOURCE_REQUEST: &str =
        "org.apache.hadoop.yarn.exceptions.InvalidResourceRequestException";
    pub const INVALID_AM_REQUEST: &str =
        "org.apache.hadoop.yarn.exceptions.InvalidApplicationMasterRequestException";
    pub const AM_NOT_REGISTERED: &str =
        "org.apache.hadoop.yarn.exceptions.ApplicationMasterNotRegisteredException";
    pub const INVALID_BLACKLIST_REQUEST: &str =
        "org.apache.hadoop.yarn.exceptions.InvalidResourceBlacklistRequestException";
    pub const INVALID_CONTAINER_RELEASE: &str =
        "org.apache.hadoop.yarn.exceptions.InvalidContainerReleaseException";
    pub const ILLEGAL_ARGUMENT: &str = "java.lang.IllegalArgumentException";
}

/// A Java exception for the caller: class and message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{class}: {message}")]
pub struct AppError {
    pub class: &'static str,
    pub message: String,
}

fn err(class: &'static str, message: impl Into<String>) -> AppError {
    AppError {
        class,
        message: message.into(),
    }
}

/// Memory (MB) and vcores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Res {
    pub mem: i64,
    pub vcores: i64,
}

impl Res {
    pub const fn new(mem: i64, vcores: i64) -> Res {
        Res { mem, vcores }
    }

    /// Fields 1 and 2, else the `memory-mb` / `vcores` entries of the resource map.
    pub fn from_proto(r: &ResourceProto) -> Res {
        let find = |k: &str| {
            r.resource_value_map
                .iter()
                .find(|e| e.key == k)
                .and_then(|e| e.value)
        };
        Res {
            mem: r.memory.or_else(|| find("memory-mb")).unwrap_or(0),
            vcores: r
                .virtual_cores
                .map(i64::from)
                .or_else(|| find("vcores"))
                .unwrap_or(0),
        }
    }

    pub fn to_proto(self) -> ResourceProto {
        ResourceProto {
            memory: Some(self.mem),
            virtual_cores: Some(self.vcores.clamp(0, i32::MAX as i64) as i32),
            ..Default::default()
        }
    }

    /// Both dimensions fit in `avail` (DominantResourceCalculator.fitsIn).
    pub fn fits_in(self, avail: Res) -> bool {
        self.mem <= avail.mem && self.vcores <= avail.vcores
    }

    pub fn plus(self, o: Res) -> Res {
        Res::new(
            self.mem.saturating_add(o.mem),
            self.vcores.saturating_add(o.vcores),
        )
    }

    /// The smaller of each dimension.
    pub fn smallest(self, o: Res) -> Res {
        Res::new(self.mem.min(o.mem), self.vcores.min(o.vcores))
    }

    pub fn minus(self, o: Res) -> Res {
        Res::new(
            self.mem.saturating_sub(o.mem).max(0),
            self.vcores.saturating_sub(o.vcores).max(0),
        )
    }

    /// Rounded up to a multiple of `step` (each dimension), at least `step`, at most `max`.
    pub fn normalize(self, step: Res, max: Res) -> Res {
        let up = |v: i64, s: i64| {
            if s <= 0 {
                return v;
            }
            let v = v.max(s);
            ((v + s - 1) / s).saturating_mul(s)
        };
        Res::new(
            up(self.mem, step.mem).min(max.mem),
            up(self.vcores, step.vcores).min(max.vcores),
        )
    }
}

impl std::fmt::Display for Res {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "<memory:{}, vCores:{}>", self.mem, self.vcores)
    }
}

/// `RMAppState`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppState {
    Submitted,
    Accepted,
    Running,
    Finishing,
    Finished,
    Failed,
    Killed,
}

impl AppState {
    /// The state store's number for the state.
    pub fn code(self) -> i32 {
        self as i32
    }

    /// The state a store number names.
    pub fn from_code(c: i32) -> Option<AppState> {
        use AppState::*;
        [
            Submitted, Accepted, Running, Finishing, Finished, Failed, Killed,
        ]
        .into_iter()
        .find(|s| s.code() == c)
    }

    pub fn is_final(self) -> bool {
        matches!(
            self,
            AppState::Finished | AppState::Failed | AppState::Killed
        )
    }

    /// What a client sees (`RMAppImpl.createApplicationState`: FINISHING reports FINISHED).
    pub fn yarn_state(self) -> YarnApplicationStateProto {
        match self {
            AppState::Submitted => YarnApplicationStateProto::Submitted,
            AppState::Accepted => YarnApplicationStateProto::Accepted,
            AppState::Running => YarnApplicationStateProto::Running,
            AppState::Finishing | AppState::Finished => YarnApplicationStateProto::Finished,
            AppState::Failed => YarnApplicationStateProto::Failed,
            AppState::Killed => YarnApplicationStateProto::Killed,
        }
    }
}

/// `RMAppAttemptState`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptState {
    Scheduled,
    Allocated,
    Launched,
    Running,
    Finishing,
    Finished,
    Failed,
    Killed,
}

impl AttemptState {
    /// The state store's number for the state.
    pub fn code(self) -> i32 {
        self as i32
    }

    /// The state a store number names.
    pub fn from_code(c: i32) -> Option<AttemptState> {
        use AttemptState::*;
        [
            Scheduled, Allocated, Launched, Running, Finishing, Finished, Failed, Killed,
        ]
        .into_iter()
        .find(|s| s.code() == c)
    }

    pub fn is_final(self) -> bool {
        matches!(
            self,
            AttemptState::Finished | AttemptState::Failed | AttemptState::Killed
        )
    }
}

/// An outstanding request at one (priority, resource name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ask {
    pub capability: Res,
    pub num: i32,
    pub relax: bool,
}

/// A container the RM allocated and has not seen complete.
#[derive(Debug, Clone)]
pub struct LiveContainer {
    pub node: NodeKey,
    pub res: Res,
    pub priority: i32,
    /// When it was allocated (for the allocation expiry).
    pub allocated_ms: u64,
    /// Reported RUNNING (or complete) by its NodeManager.
    pub started: bool,
}

/// A container allocated and not yet pulled by the AM.
#[derive(Debug, Clone)]
struct NewContainer {
    id: ContainerId,
    node: NodeKey,
    res: Res,
    priority: i32,
}

/// `RMAppAttemptImpl` plus the scheduler's `SchedulerApplicationAttempt`.
#[derive(Debug)]
pub struct Attempt {
    pub id: AttemptId,
    pub state: AttemptState,
    pub am_container: Option<ContainerId>,
    pub am_node: Option<NodeKey>,
    pub host: String,
    pub rpc_port: i32,
    pub tracking_url: String,
    pub diagnostics: String,
    pub am_exit_status: Option<i32>,
    pub final_status: Option<FinalApplicationStatusProto>,
    pub progress: f32,
    /// Wall-clock ms when the attempt started (`RMAppAttemptImpl.startTime`). After a restart:
    /// its AM's allocation time from the state store, else the application's submission.
    pub start_ms: u64,
    /// Wall-clock ms when it reached a final state; 0 before (and for an attempt that ended
    /// before a restart without ending its application: the store does not keep it).
    pub finish_ms: u64,
    /// Shared with the caller that encodes it: a resent request gets it again, and neither
    /// the answer nor its repeat copies the message.
    last_response: Option<Arc<AllocateResponseProto>>,
    /// priority → resource name → ask.
    asks: BTreeMap<i32, HashMap<String, Ask>>,
    blacklist: HashSet<String>,
    new_containers: Vec<NewContainer>,
    completed: Vec<ContainerStatusProto>,
    /// Nodes the AM has an NMToken for, and the NM key it was made with.
    nm_token_nodes: HashMap<NodeKey, i32>,
    pub live: HashMap<ContainerId, LiveContainer>,
    next_seq: i64,
    last_contact_ms: u64,
    /// Rebuilt from the state store and not yet reconciled with every node.
    recovered: bool,
}

impl Attempt {
    /// A new attempt whose containers carry `epoch`, started at `start_ms` (wall clock).
    fn new(id: AttemptId, epoch: i64, start_ms: u64) -> Attempt {
        Attempt {
            id,
            state: AttemptState::Scheduled,
            am_container: None,
            am_node: None,
            host: "N/A".into(),
            rpc_port: -1,
            tracking_url: String::new(),
            diagnostics: String::new(),
            am_exit_status: None,
            final_status: None,
            progress: 0.0,
            start_ms,
            finish_ms: 0,
            last_response: None,
            asks: BTreeMap::new(),
            blacklist: HashSet::new(),
            new_containers: Vec::new(),
            completed: Vec::new(),
            nm_token_nodes: HashMap::new(),
            live: HashMap::new(),
            next_seq: (epoch << 40) | 1,
            last_contact_ms: 0,
            recovered: false,
        }
    }

    fn next_container(&mut self) -> ContainerId {
        let id = ContainerId {
            app: self.id.app,
            attempt: self.id.attempt,
            id: self.next_seq,
        };
        self.next_seq += 1;
        id
    }

    /// Outstanding ANY containers summed over priorities.
    pub fn pending_containers(&self) -> i64 {
        self.asks
            .values()
            .filter_map(|m| m.get(ANY))
            .map(|a| a.num.max(0) as i64)
            .sum()
    }

    /// Completed statuses waiting for the AM's next allocate.
    pub fn undelivered_completions(&self) -> usize {
        self.completed.len()
    }
}

/// `RMAppImpl`.
#[derive(Debug)]
pub struct RmApp {
    pub id: AppId,
    pub name: String,
    pub queue: String,
    pub user: String,
    pub app_type: String,
    pub tags: Vec<String>,
    pub priority: i32,
    am_spec: ContainerLaunchContextProto,
    /// The submission's `application_ACLs` (kept after the launch context is dropped).
    pub acls: crate::app_acls::AppAcls,
    pub am_res: Res,
    pub max_attempts: i32,
    pub state: AppState,
    pub final_status: FinalApplicationStatusProto,
    pub diagnostics: String,
    pub submit_ms: u64,
    pub launch_ms: u64,
    pub finish_ms: u64,
    pub attempts: Vec<Attempt>,
    /// Attempt failures that count against `max_attempts`.
    failures: i32,
    /// The submission's `attemptFailuresValidityInterval` (ms; 0 or less: every failure
    /// counts), and when each counted failure happened (this RM's run only).
    failures_validity_ms: i64,
    failure_ms: Vec<u64>,
    /// The submission's `keepContainersAcrossApplicationAttempts`: a failed attempt that is
    /// retried leaves its running containers (not its AM's) to the next attempt.
    pub keep_containers: bool,
}

impl RmApp {
    pub fn current(&self) -> Option<&Attempt> {
        self.attempts.last()
    }

    fn current_mut(&mut self) -> Option<&mut Attempt> {
        self.attempts.last_mut()
    }
}

/// An AM container to start on its node.
#[derive(Debug, Clone)]
pub struct AmLaunch {
    pub attempt: AttemptId,
    pub container: ContainerId,
    pub node: NodeKey,
    pub user: String,
    pub res: Res,
    pub priority: i32,
    pub launch: ContainerLaunchContextProto,
    pub amrm_token: Token,
    pub max_app_attempts: i32,
}

/// Work for the nodes, sent through the heartbeat outbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cleanup {
    /// `applications_to_cleanup` on every node the application ran on.
    App(AppId),
    /// `containers_to_cleanup` on the node running it.
    Container(ContainerId),
    /// Acknowledge the application's completed containers to their NodeManagers only once
    /// its AM pulled them (trap 1).
    HoldAcks(AppId),
    /// The AM pulled this completion (or it was the AM container's): acknowledge it.
    Ack(ContainerId),
    /// The application ended: acknowledge everything of it.
    ReleaseAcks(AppId),
}

/// What minting container tokens and NMTokens needs (the tracker's current keys).
#[derive(Debug, Clone)]
pub struct TokenKeys {
    pub container: MasterKey,
    pub nm: MasterKey,
    pub rm_identifier: i64,
}

/// Applications, attempts and the FIFO scheduler (see the module docs).
pub struct Apps {
    cfg: AppsConfig,
    cluster_ts: i64,
    next_app: i32,
    apps: BTreeMap<i32, RmApp>,
    nodes: ClusterNodes,
    launches: Vec<AmLaunch>,
    cleanups: Vec<Cleanup>,
    amrm: Arc<AmrmTokenSecrets>,
    gate: Arc<AtomicBool>,
    completed_order: Vec<i32>,
    /// Applications not in a final state.
    live_apps: usize,
    /// Some allocated container may not have been reported RUNNING yet (set on allocation,
    /// recomputed by [`Apps::tick`]): only then do node updates look at RUNNING statuses.
    unstarted: bool,
    /// The containers allocated and not yet seen RUNNING (a superset: one that completed or
    /// started leaves at the next [`Apps::tick`]), so that the allocation expiry visits these
    /// rather than every live container.
    unstarted_ids: HashSet<ContainerId>,
    /// An attempt became SCHEDULED (submitted or retried) since [`Apps::place_unplaced`] last
    /// ran.
    unplaced: bool,
    /// The RM epoch (in the high bits of this run's container ids).
    epoch: i64,
    /// State-store records not yet written (`None`: recovery is off).
    store_ops: Option<Vec<Rec>>,
    /// Live applications were recovered: a node's first registration reconciles them.
    reconcile: bool,
    /// Applications that may have something to place (an attempt waiting for its AM
    /// container, or an ANY ask with containers outstanding), in scheduling order: a node's
    /// scheduling visits these, not every application. A superset: an application enters
    /// where it may gain work (submission, retry, recovery, an `allocate` with asks) and
    /// leaves when a visit or [`refresh_work`](Apps::refresh_work) finds it has none. Keyed
    /// by [`pend_key`]: higher application priority first, then submission order.
    pending: BTreeSet<PendKey>,
    /// The smallest resource some pending application waits for (as of the last
    /// [`refresh_work`](Apps::refresh_work)).
    min_need: Option<Res>,
    /// Some pending application's smallest need fits on some active node
    /// ([`refresh_work`](Apps::refresh_work)): only then does a heartbeat schedule on its
    /// node. One relaxed load on the ring thread.
    work: Arc<AtomicBool>,
}

/// A container a (re-)registering NodeManager reports (`NMContainerStatusProto`).
#[derive(Debug, Clone)]
pub struct Reported {
    pub id: ContainerId,
    /// RUNNING, NEW or COMPLETE.
    pub state: ContainerStateProto,
    pub exit_status: i32,
    pub diagnostics: String,
    pub res: Res,
    pub priority: i32,
}

fn status(c: ContainerId, exit: i32, diagnostics: &str) -> ContainerStatusProto {
    ContainerStatusProto {
        container_id: Some(c.to_proto()),
        state: Some(ContainerStateProto::CComplete as i32),
        diagnostics: Some(diagnostics.to_string()),
        exit_status: Some(exit),
        capability: None,
        execution_type: Some(ExecutionTypeProto::Guaranteed as i32),
        container_attributes: Vec::new(),
        container_sub_state: None,
    }
}

/// The pending index's key: (reversed application priority, application id), so that the
/// index iterates higher priorities first and, within one, in submission order.
pub(crate) type PendKey = (std::cmp::Reverse<i32>, i32);

pub(crate) fn pend_key(priority: i32, id: i32) -> PendKey {
    (std::cmp::Reverse(priority), id)
}

/// What `app` waits for, if anything: its AM container's resource while its attempt is
/// SCHEDULED, else the smallest capability of its outstanding ANY asks.
fn pending_need(app: &RmApp) -> Option<Res> {
    if !matches!(app.state, AppState::Accepted | AppState::Running) {
        return None;
    }
    let at = app.current()?;
    match at.state {
        AttemptState::Scheduled => Some(app.am_res),
        AttemptState::Launched | AttemptState::Running => at
            .asks
            .values()
            .filter_map(|m| m.get(ANY))
            .filter(|a| a.num > 0)
            .map(|a| a.capability)
            .reduce(Res::smallest),
        _ => None,
    }
}

/// An application's final state as a state-store record.
fn app_ended(app: &RmApp) -> AppEndedRec {
    AppEndedRec {
        app: app.id.to_proto(),
        state: app.state.code(),
        final_status: app.final_status as i32,
        diagnostics: app.diagnostics.clone(),
        finish_ms: app.finish_ms,
    }
}

impl Apps {
    /// `cluster_ts` is the RM's start time (application ids' cluster timestamp).
    pub fn new(cfg: AppsConfig, cluster_ts: i64, amrm: Arc<AmrmTokenSecrets>) -> Apps {
        Apps {
            cfg,
            cluster_ts,
            next_app: 0,
            apps: BTreeMap::new(),
            nodes: ClusterNodes::default(),
            launches: Vec::new(),
            cleanups: Vec::new(),
            amrm,
            gate: Arc::new(AtomicBool::new(false)),
            completed_order: Vec::new(),
            live_apps: 0,
            unstarted: false,
            unstarted_ids: HashSet::new(),
            epoch: 0,
            store_ops: None,
            reconcile: false,
            unplaced: false,
            pending: BTreeSet::new(),
            min_need: None,
            work: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Turns the state-store records on, for a run in `epoch`.
    pub fn enable_store(&mut self, epoch: i64) {
        self.epoch = epoch;
        self.store_ops.get_or_insert_with(Vec::new);
    }

    /// Queues a state-store record (nothing when recovery is off): for the callers that keep
    /// state beside the applications (the ClientToAM keys), so that it is written in order
    /// with the call's other changes.
    pub fn store_rec(&mut self, rec: Rec) {
        if let Some(ops) = self.store_ops.as_mut() {
            ops.push(rec);
        }
    }

    /// The RM epoch.
    pub fn epoch(&self) -> i64 {
        self.epoch
    }

    /// State-store records to write, in order.
    pub fn take_store_ops(&mut self) -> Vec<Rec> {
        self.store_ops
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    pub fn config(&self) -> &AppsConfig {
        &self.cfg
    }

    pub fn cluster_timestamp(&self) -> i64 {
        self.cluster_ts
    }

    /// True while some application is not in a final state: the heartbeat path checks it
    /// (one relaxed load) before calling [`node_update`](Self::node_update).
    pub fn gate(&self) -> Arc<AtomicBool> {
        self.gate.clone()
    }

    fn update_gate(&self) {
        let open = self.live_apps > 0;
        // Stored only on a change: the flag's cache line stays shared with the readers.
        if self.gate.load(Ordering::Relaxed) != open {
            self.gate.store(open, Ordering::Relaxed);
        }
    }

    /// True while some pending application's smallest need fits on some active node (see
    /// [`refresh_work`](Self::refresh_work)): the heartbeat path schedules on the heartbeat's
    /// node only then.
    pub fn work(&self) -> Arc<AtomicBool> {
        self.work.clone()
    }

    /// Drops applications with nothing to place from the pending index, and sets the
    /// [`work`](Self::work) flag: some pending application's smallest need fits on some
    /// active node. Called after every change ([`crate::app_service::AppsRt`] does);
    /// O(pending applications × their priorities), nothing when none is pending.
    pub fn refresh_work(&mut self) {
        let mut need: Option<Res> = None;
        let apps = &self.apps;
        self.pending
            .retain(|k| match apps.get(&k.1).and_then(pending_need) {
                Some(n) => {
                    need = Some(need.map_or(n, |m| m.smallest(n)));
                    true
                }
                None => false,
            });
        self.min_need = need;
        let work = need.is_some_and(|n| self.nodes.roomiest(n, &[]).is_some());
        if self.work.load(Ordering::Relaxed) != work {
            self.work.store(work, Ordering::Relaxed);
        }
    }

    /// Applications in the pending index (a superset of those with something to place).
    pub fn pending_apps(&self) -> usize {
        self.pending.len()
    }

    pub fn app(&self, id: AppId) -> Option<&RmApp> {
        self.apps.get(&id.id).filter(|a| a.id == id)
    }

    pub fn apps(&self) -> impl Iterator<Item = &RmApp> {
        self.apps.values()
    }

    pub fn node(&self, key: &NodeKey) -> Option<&SchedNode> {
        self.nodes.get(key)
    }

    /// AM containers to start.
    pub fn take_launches(&mut self) -> Vec<AmLaunch> {
        std::mem::take(&mut self.launches)
    }

    /// Cleanups for the heartbeat outbox.
    pub fn take_cleanups(&mut self) -> Vec<Cleanup> {
        std::mem::take(&mut self.cleanups)
    }
}
