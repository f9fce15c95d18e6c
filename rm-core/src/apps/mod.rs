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
//! - The FIFO scheduler ([`SchedNode`] per NodeManager, capacity from its registration):
//!   applications in submission order; per application its AM container first, then its asks
//!   by priority (lower number first): node-local, then rack-local, then off-switch, with Java's
//!   `relaxLocality` rules and node/rack/ANY counts decremented together. Asks are normalized up
//!   to the minimum allocation; a container fits a node only if both memory and vcores fit.
//!   Allocation happens on a node update ([`Apps::node_update`], Java's NODE_UPDATE), which the
//!   heartbeat path calls only while [`Apps::gate`] says something is in flight; and, with
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

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use hadoop_wire::pb::hadoop::yarn::{
    AllocateRequestProto, AllocateResponseProto, ApplicationReportProto,
    ApplicationResourceUsageReportProto, ApplicationSubmissionContextProto,
    ContainerLaunchContextProto, ContainerProto, ContainerStateProto, ContainerStatusProto,
    ContainerTypeProto, ExecutionTypeProto, FinalApplicationStatusProto,
    FinishApplicationMasterRequestProto, NmTokenProto, PriorityProto,
    RegisterApplicationMasterRequestProto, RegisterApplicationMasterResponseProto, ResourceProto,
    YarnApplicationStateProto,
};
use hadoop_wire::token::identifier::{attempt_to_proto, container_from_proto};
use hadoop_wire::token::Token;
use hadoop_wire::view::yarn::NodeStatusView;
use hadoop_wire::yarn::exit_status;
use hadoop_wire::yarn::ids::{AppId, AttemptId, ContainerId};

use ipc::transport::BackendChoice;

use crate::amrm_token::AmrmTokenSecrets;
use crate::ids::{FastMap, NodeKey, NodeKeyRef};
use crate::master_key::MasterKey;
use crate::state_store::{
    AppEndedRec, AttemptEndedRec, Rec, Recovered, RecoveredApp, SubmittedRec,
};

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

/// The settings this module reads.
#[derive(Debug, Clone, PartialEq)]
pub struct AppsConfig {
    /// `yarn.resourcemanager.am.max-attempts` (2).
    pub max_attempts: i32,
    /// `yarn.scheduler.minimum-allocation-{mb,vcores}` (1024, 1).
    pub min_alloc: Res,
    /// `yarn.scheduler.maximum-allocation-{mb,vcores}` (8192, 4).
    pub max_alloc: Res,
    /// `yarn.am.liveness-monitor.expiry-interval-ms` (900000 in 3.5).
    pub am_expiry_ms: u64,
    /// `yarn.resourcemanager.rm.container-allocation.expiry-interval-ms` (600000): how long a
    /// container token is valid.
    pub container_token_expiry_ms: u64,
    /// The queues submissions may name.
    pub queues: Vec<String>,
    /// Ours: most applications kept (finished ones beyond are forgotten, oldest first; new
    /// submissions beyond with only live ones are refused).
    pub max_apps: usize,
    /// `yarn.resourcemanager.max-completed-applications` (1000).
    pub max_completed_apps: usize,
    /// Ours: most outstanding containers one ask may name (`numContainers`).
    pub max_ask_containers: i32,
    /// Ours: most (priority, resource name) asks an attempt may hold.
    pub max_asks_per_attempt: usize,
    /// Ours: most blacklisted hosts per attempt.
    pub max_blacklist: usize,
    /// Ours (`hotpath.rm.max-submission-bytes`): largest encoded submission context kept per
    /// application (its AM launch context lives as long as the application runs).
    pub max_submission_bytes: usize,
    /// Ours (`hotpath.rm.scheduler.immediate-placement`, true): place containers as soon as
    /// they can be placed (the AM container in `submitApplication` and when an attempt is
    /// retried, new asks in the `allocate` that made them), not only on node heartbeats. False:
    /// only NODE_UPDATE allocates, as Java's FIFO scheduler does.
    pub immediate_placement: bool,
    /// Ours (`hotpath.rm.client.io-backend`: `auto`, `uring` or `epoll`; default `auto`,
    /// which follows `HOTPATH_IO`, then the io_uring probe): the `ipc` transport of the
    /// ApplicationClientProtocol server.
    pub client_io: BackendChoice,
    /// Ours (`hotpath.rm.scheduler.io-backend`, same values and default): the transport of the
    /// ApplicationMasterProtocol server. (Measured with AMs calling allocate back to back, one
    /// call at a time: epoll and io_uring cost the RM the same CPU per call within the noise,
    /// 7.2 vs 7.35 µs over 8 alternating pairs; see the README.)
    pub scheduler_io: BackendChoice,
}

impl Default for AppsConfig {
    fn default() -> Self {
        AppsConfig {
            max_attempts: 2,
            min_alloc: Res::new(1024, 1),
            max_alloc: Res::new(8192, 4),
            am_expiry_ms: 900_000,
            container_token_expiry_ms: 600_000,
            queues: vec![DEFAULT_QUEUE.to_string()],
            max_apps: 10_000,
            max_completed_apps: 1000,
            max_ask_containers: 100_000,
            max_asks_per_attempt: 10_000,
            max_blacklist: 10_000,
            max_submission_bytes: 4 << 20,
            immediate_placement: true,
            client_io: BackendChoice::Auto,
            scheduler_io: BackendChoice::Auto,
        }
    }
}

impl AppsConfig {
    pub fn from_conf(conf: &conf::Configuration) -> Result<AppsConfig, crate::Error> {
        let d = AppsConfig::default();
        let int = |k: &str, dflt: i64| -> Result<i64, crate::Error> {
            match conf.try_get(k)? {
                None => Ok(dflt),
                Some(v) => v
                    .trim()
                    .parse::<i64>()
                    .map_err(|_| crate::Error::BadConfig(format!("{k}: not an integer: {v:?}"))),
            }
        };
        let backend = |k: &str, dflt: BackendChoice| -> Result<BackendChoice, crate::Error> {
            match conf.try_get(k)? {
                None => Ok(dflt),
                Some(v) => BackendChoice::parse(v).ok_or_else(|| {
                    crate::Error::BadConfig(format!("{k}: not auto, uring or epoll: {v:?}"))
                }),
            }
        };
        let cfg = AppsConfig {
            max_attempts: int("yarn.resourcemanager.am.max-attempts", 2)? as i32,
            min_alloc: Res::new(
                int("yarn.scheduler.minimum-allocation-mb", 1024)?,
                int("yarn.scheduler.minimum-allocation-vcores", 1)?,
            ),
            max_alloc: Res::new(
                int("yarn.scheduler.maximum-allocation-mb", 8192)?,
                int("yarn.scheduler.maximum-allocation-vcores", 4)?,
            ),
            am_expiry_ms: int("yarn.am.liveness-monitor.expiry-interval-ms", 900_000)? as u64,
            container_token_expiry_ms: int(
                "yarn.resourcemanager.rm.container-allocation.expiry-interval-ms",
                600_000,
            )? as u64,
            queues: d.queues.clone(),
            max_apps: int("hotpath.rm.max-applications", d.max_apps as i64)?.max(1) as usize,
            max_completed_apps: int(
                "yarn.resourcemanager.max-completed-applications",
                d.max_completed_apps as i64,
            )?
            .max(0) as usize,
            max_ask_containers: d.max_ask_containers,
            max_asks_per_attempt: d.max_asks_per_attempt,
            max_blacklist: d.max_blacklist,
            max_submission_bytes: int(
                "hotpath.rm.max-submission-bytes",
                d.max_submission_bytes as i64,
            )?
            .max(1024) as usize,
            immediate_placement: match conf.try_get(crate::config::IMMEDIATE_PLACEMENT)? {
                None => d.immediate_placement,
                Some(_) => conf.get_bool(crate::config::IMMEDIATE_PLACEMENT)?,
            },
            client_io: backend(crate::config::CLIENT_IO_BACKEND, d.client_io)?,
            scheduler_io: backend(crate::config::SCHEDULER_IO_BACKEND, d.scheduler_io)?,
        };
        if cfg.max_attempts <= 0 {
            return Err(crate::Error::BadConfig(format!(
                "Invalid global max attempts configuration, yarn.resourcemanager.am.max-attempts={}, it should be a positive integer.",
                cfg.max_attempts
            )));
        }
        if cfg.min_alloc.mem <= 0 || cfg.max_alloc.mem < cfg.min_alloc.mem {
            return Err(crate::Error::BadConfig(format!(
                "Invalid resource scheduler memory allocation configuration, yarn.scheduler.minimum-allocation-mb={}, yarn.scheduler.maximum-allocation-mb={}, min and max should be greater than 0, max should be no smaller than min.",
                cfg.min_alloc.mem, cfg.max_alloc.mem
            )));
        }
        if cfg.min_alloc.vcores <= 0 || cfg.max_alloc.vcores < cfg.min_alloc.vcores {
            return Err(crate::Error::BadConfig(format!(
                "Invalid resource scheduler vcores allocation configuration, yarn.scheduler.minimum-allocation-vcores={}, yarn.scheduler.maximum-allocation-vcores={}, min and max should be greater than 0, max should be no smaller than min.",
                cfg.min_alloc.vcores, cfg.max_alloc.vcores
            )));
        }
        Ok(cfg)
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
}

impl RmApp {
    pub fn current(&self) -> Option<&Attempt> {
        self.attempts.last()
    }

    fn current_mut(&mut self) -> Option<&mut Attempt> {
        self.attempts.last_mut()
    }
}

/// `SchedulerNode`: a NodeManager's capacity and what is allocated on it.
#[derive(Debug, Clone)]
pub struct SchedNode {
    pub key: NodeKey,
    pub http_address: String,
    pub total: Res,
    pub used: Res,
    pub containers: usize,
    pub active: bool,
    /// Its number in [`ClusterNodes`]'s room index (registration order; never reused).
    slot: u32,
}

/// A sum of [`Res`] wide enough never to overflow (i64 per node, far fewer than 2^64 nodes).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct ResSum {
    mem: i128,
    vcores: i128,
}

impl ResSum {
    fn add(&mut self, r: Res) {
        self.mem += i128::from(r.mem);
        self.vcores += i128::from(r.vcores);
    }

    fn sub(&mut self, r: Res) {
        self.mem -= i128::from(r.mem);
        self.vcores -= i128::from(r.vcores);
    }

    /// Clamped to `Res`'s range (as a saturating sum of non-negative values would be).
    fn res(self) -> Res {
        let clamp = |v: i128| v.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64;
        Res::new(clamp(self.mem), clamp(self.vcores))
    }
}

/// The scheduler's nodes, with running totals over the active ones (Java's
/// `ClusterNodeTracker`): `allocate` reads the cluster's size, capacity and use in O(1)
/// instead of walking every node. The map is never lent out mutably: every change to a node
/// (registration, re-registration with another capability, removal as lost, unhealthy,
/// decommissioned or shut down, and each container placed or completed) goes through
/// [`update`](Self::update), which takes the node's old contribution out of the totals and
/// puts its new one in, and moves the node in the room index.
///
/// The room index orders the active nodes with room by free memory, then free vcores, most
/// first (ties in registration order), so that immediate placement finds the roomiest node
/// that fits in O(log n) instead of sorting every node on each call (at 10,000 nodes that
/// sort was most of an `allocate` bringing new asks: `benches/examples/place_profile.rs`).
/// It changes only when a node's room does, so an unchanged heartbeat never touches it.
#[derive(Debug, Default)]
struct ClusterNodes {
    map: FastMap<NodeKey, SchedNode>,
    totals: Totals,
    by_room: BTreeSet<RoomKey>,
    /// Slot → key.
    keys: Vec<NodeKey>,
}

/// (free memory, free vcores, slot), most room first.
type RoomKey = (Reverse<i64>, Reverse<i64>, u32);

/// Where `n` stands in the room index: nowhere unless it is active and has room.
fn room_key(n: &SchedNode) -> Option<RoomKey> {
    let room = n.total.minus(n.used);
    (n.active && room.mem > 0 && room.vcores > 0).then_some((
        Reverse(room.mem),
        Reverse(room.vcores),
        n.slot,
    ))
}

/// Moves a node in the room index from `before` to `after`.
fn reindex(by_room: &mut BTreeSet<RoomKey>, before: Option<RoomKey>, after: Option<RoomKey>) {
    if before != after {
        if let Some(b) = before {
            by_room.remove(&b);
        }
        if let Some(a) = after {
            by_room.insert(a);
        }
    }
}

/// Running totals over the active nodes.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Totals {
    active: usize,
    total: ResSum,
    used: ResSum,
}

impl Totals {
    /// Changes `n` with `f`, moving its contribution out and back in.
    fn apply<R>(&mut self, n: &mut SchedNode, f: impl FnOnce(&mut SchedNode) -> R) -> R {
        if n.active {
            self.active -= 1;
            self.total.sub(n.total);
            self.used.sub(n.used);
        }
        let r = f(n);
        if n.active {
            self.active += 1;
            self.total.add(n.total);
            self.used.add(n.used);
        }
        r
    }
}

impl ClusterNodes {
    fn get<Q>(&self, key: &Q) -> Option<&SchedNode>
    where
        NodeKey: std::borrow::Borrow<Q>,
        Q: std::hash::Hash + Eq + ?Sized,
    {
        self.map.get(key)
    }

    fn contains_key(&self, key: &NodeKey) -> bool {
        self.map.contains_key(key)
    }

    #[cfg(test)]
    fn values(&self) -> impl Iterator<Item = &SchedNode> {
        self.map.values()
    }

    /// Changes one node with `f`, keeping the totals; `None` for an unknown node.
    fn update<R>(&mut self, key: &NodeKey, f: impl FnOnce(&mut SchedNode) -> R) -> Option<R> {
        let n = self.map.get_mut(key)?;
        let before = room_key(n);
        let r = self.totals.apply(n, f);
        reindex(&mut self.by_room, before, room_key(n));
        self.check();
        Some(r)
    }

    /// Like [`update`](Self::update), first adding the node (inactive and empty: it counts
    /// for nothing until `f` makes it active) if it is new.
    fn upsert<R>(&mut self, key: &NodeKey, f: impl FnOnce(&mut SchedNode) -> R) -> R {
        let keys = &mut self.keys;
        let n = self.map.entry(key.clone()).or_insert_with(|| {
            let slot = u32::try_from(keys.len()).expect("fewer than 2^32 nodes");
            keys.push(key.clone());
            SchedNode {
                key: key.clone(),
                http_address: String::new(),
                total: Res::default(),
                used: Res::default(),
                containers: 0,
                active: false,
                slot,
            }
        });
        let before = room_key(n);
        let r = self.totals.apply(n, f);
        reindex(&mut self.by_room, before, room_key(n));
        self.check();
        r
    }

    /// The active node with the most free memory (then vcores) that `need` fits in, other
    /// than the slots in `skip`: its slot and key.
    fn roomiest(&self, need: Res, skip: &[u32]) -> Option<(u32, &NodeKey)> {
        self.by_room
            .iter()
            .take_while(|(mem, ..)| mem.0 >= need.mem)
            .find(|(_, vcores, slot)| vcores.0 >= need.vcores && !skip.contains(slot))
            .map(|&(.., slot)| (slot, &self.keys[slot as usize]))
    }

    /// Active nodes, their total and their used resources.
    fn totals(&self) -> (usize, Res, Res) {
        let t = &self.totals;
        (t.active, t.total.res(), t.used.res())
    }

    /// The totals from a full walk over the nodes (what [`Totals::apply`] keeps running).
    #[cfg(test)]
    fn recount(&self) -> Totals {
        let mut t = Totals::default();
        for n in self.map.values().filter(|n| n.active) {
            t.active += 1;
            t.total.add(n.total);
            t.used.add(n.used);
        }
        t
    }

    /// Unit tests compare the running totals and the room index with a full recount after
    /// every change.
    fn check(&self) {
        #[cfg(test)]
        {
            assert_eq!(self.totals, self.recount(), "running totals drifted");
            let index: BTreeSet<RoomKey> = self.map.values().filter_map(room_key).collect();
            assert_eq!(self.by_room, index, "room index drifted");
        }
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
    /// An attempt became SCHEDULED (submitted or retried) since [`Apps::place_unplaced`] last
    /// ran.
    unplaced: bool,
    /// The RM epoch (in the high bits of this run's container ids).
    epoch: i64,
    /// State-store records not yet written (`None`: recovery is off).
    store_ops: Option<Vec<Rec>>,
    /// Live applications were recovered: a node's first registration reconciles them.
    reconcile: bool,
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

/// The AM resource a submission asks for: its resource request for `*`, else `resource`.
fn am_resource(ctx: &ApplicationSubmissionContextProto) -> Option<Res> {
    ctx.am_container_resource_request
        .iter()
        .find(|r| r.resource_name.as_deref() == Some(ANY))
        .and_then(|r| r.capability.as_ref())
        .or(ctx.resource.as_ref())
        .map(Res::from_proto)
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

/// The submission context a kept application is stored with on compaction: what the RM
/// still uses of the original (ids, names, queue, type, tags, priority, AM resource and,
/// while it runs, its launch context).
fn kept_context(app: &RmApp) -> ApplicationSubmissionContextProto {
    let mut am_spec = app.am_spec.clone();
    if am_spec.application_ac_ls.is_empty() {
        // A finished application's launch context is gone, its ACLs still apply.
        am_spec.application_ac_ls = app.acls.to_protos();
    }
    ApplicationSubmissionContextProto {
        application_id: Some(app.id.to_proto()),
        application_name: Some(app.name.clone()),
        queue: Some(app.queue.clone()),
        priority: Some(PriorityProto {
            priority: Some(app.priority),
        }),
        am_container_spec: Some(am_spec),
        resource: Some(app.am_res.to_proto()),
        application_type: Some(app.app_type.clone()),
        application_tags: app.tags.clone(),
        max_app_attempts: Some(app.max_attempts),
        ..Default::default()
    }
}

/// Java's `shouldCountTowardsMaxAttemptRetry`: AM containers lost to the cluster do not count.
fn counts_as_failure(exit: i32) -> bool {
    !matches!(
        exit,
        exit_status::ABORTED
            | exit_status::PREEMPTED
            | exit_status::DISKS_FAILED
            | exit_status::KILLED_BY_RESOURCEMANAGER
    )
}

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
            epoch: 0,
            store_ops: None,
            reconcile: false,
            unplaced: false,
        }
    }

    /// Turns the state-store records on, for a run in `epoch`.
    pub fn enable_store(&mut self, epoch: i64) {
        self.epoch = epoch;
        self.store_ops.get_or_insert_with(Vec::new);
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
        self.gate.store(self.live_apps > 0, Ordering::Relaxed);
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

    /// Rebuilds the applications from the state store (see the module docs); call once,
    /// before anything else, after [`enable_store`](Self::enable_store). Returns the live and
    /// the finished applications recovered; applications whose stored submission cannot be
    /// used any more are skipped with a warning.
    pub fn recover(&mut self, rec: &Recovered, now_ms: u64) -> (usize, usize) {
        let (mut live, mut done) = (0, 0);
        for (&(ts, seq), ra) in &rec.apps {
            let id = AppId::new(ts, seq);
            self.next_app = self.next_app.max(seq);
            match self.recover_app(id, ra, now_ms) {
                Ok(app) => {
                    let id = app.id;
                    if app.state.is_final() {
                        done += 1;
                        self.completed_order.push(id.id);
                        // Whatever of it a node still runs is cleaned up there.
                        self.cleanups.push(Cleanup::App(id));
                    } else {
                        live += 1;
                        self.live_apps += 1;
                        self.cleanups.push(Cleanup::HoldAcks(id));
                    }
                    if let Some(old) = self.apps.insert(id.id, app) {
                        tracing::warn!("state store: {} replaced by {id}", old.id);
                    }
                }
                Err(why) => tracing::warn!("state store: application {id} not recovered: {why}"),
            }
        }
        self.completed_order.sort_unstable();
        while self.completed_order.len() > self.cfg.max_completed_apps {
            let old = self.completed_order.remove(0);
            self.apps.remove(&old);
        }
        self.reconcile = live > 0;
        self.unplaced = self.apps.values().any(|a| {
            !a.state.is_final()
                && a.current()
                    .is_some_and(|t| t.state == AttemptState::Scheduled)
        });
        self.update_gate();
        (live, done)
    }

    /// A SUBMITTED application from its submission context (shared by submit and recovery).
    fn new_app(
        &self,
        id: AppId,
        ctx: &ApplicationSubmissionContextProto,
        am_spec: ContainerLaunchContextProto,
        asked: Res,
        user: &str,
        submit_ms: u64,
    ) -> RmApp {
        let global = self.cfg.max_attempts;
        RmApp {
            id,
            name: ctx.application_name.clone().unwrap_or_else(|| "N/A".into()),
            queue: ctx.queue.clone().unwrap_or_else(|| DEFAULT_QUEUE.into()),
            user: user.to_string(),
            app_type: ctx
                .application_type
                .clone()
                .unwrap_or_else(|| "YARN".into()),
            tags: ctx.application_tags.clone(),
            priority: ctx.priority.and_then(|p| p.priority).unwrap_or(0),
            acls: crate::app_acls::AppAcls::from_protos(&am_spec.application_ac_ls),
            am_spec,
            am_res: asked.normalize(self.cfg.min_alloc, self.cfg.max_alloc),
            max_attempts: match ctx.max_app_attempts.unwrap_or(0) {
                n if n <= 0 || n > global => global,
                n => n,
            },
            state: AppState::Submitted,
            final_status: FinalApplicationStatusProto::AppUndefined,
            diagnostics: String::new(),
            submit_ms,
            launch_ms: 0,
            finish_ms: 0,
            attempts: Vec::new(),
            failures: 0,
        }
    }

    fn recover_app(&mut self, id: AppId, ra: &RecoveredApp, now_ms: u64) -> Result<RmApp, String> {
        let ctx: ApplicationSubmissionContextProto =
            prost::Message::decode(ra.submitted.context.as_slice())
                .map_err(|e| format!("submission context does not decode: {e}"))?;
        let asked = am_resource(&ctx).ok_or("no AM resource")?;
        let am_spec = ctx.am_container_spec.clone().unwrap_or_default();
        let mut app = self.new_app(
            id,
            &ctx,
            am_spec,
            asked,
            &ra.submitted.user,
            ra.submitted.submit_ms,
        );
        app.state = AppState::Accepted;
        for (&n, rat) in &ra.attempts {
            let aid = AttemptId {
                app: id,
                attempt: n,
            };
            let start = rat
                .allocated
                .as_ref()
                .map_or(ra.submitted.submit_ms, |al| al.allocated_ms);
            let mut at = Attempt::new(aid, self.epoch, start);
            if let Some(al) = &rat.allocated {
                let node = NodeKey::new(&al.host, al.port);
                let c = ContainerId {
                    app: id,
                    attempt: n,
                    id: al.container,
                };
                at.am_container = Some(c);
                at.am_node = Some(node.clone());
                at.state = AttemptState::Launched;
                at.live.insert(
                    c,
                    LiveContainer {
                        node,
                        res: app.am_res,
                        priority: app.priority,
                        allocated_ms: now_ms,
                        started: true,
                    },
                );
                app.launch_ms = al.allocated_ms;
            }
            if let Some(e) = &rat.ended {
                at.state = AttemptState::from_code(e.state).ok_or("unknown attempt state")?;
                at.diagnostics = e.diagnostics.clone();
                at.am_exit_status = e.am_exit_status;
                at.final_status = e
                    .final_status
                    .and_then(|f| FinalApplicationStatusProto::try_from(f).ok());
                at.live.clear();
                app.failures = app.failures.max(e.failures);
            }
            app.attempts.push(at);
        }
        if let Some(e) = &ra.ended {
            app.state = AppState::from_code(e.state).ok_or("unknown application state")?;
            app.final_status = FinalApplicationStatusProto::try_from(e.final_status)
                .unwrap_or(FinalApplicationStatusProto::AppUndefined);
            app.diagnostics = e.diagnostics.clone();
            app.finish_ms = e.finish_ms;
            if let Some(last) = app.attempts.last_mut() {
                last.finish_ms = e.finish_ms;
            }
            if !app.state.is_final() {
                // FINISHING was stored as FINISHED; anything else is not a final record.
                app.state = AppState::Finished;
            }
            app.am_spec = ContainerLaunchContextProto::default();
            for at in &mut app.attempts {
                if !at.state.is_final() {
                    at.state = AttemptState::Finished;
                    at.live.clear();
                }
            }
            return Ok(app);
        }
        // A live application: what its last attempt says decides what comes next.
        let last = app.attempts.last().map(|t| (t.id.attempt, t.state));
        match last {
            None => app.attempts.push(Attempt::new(
                AttemptId {
                    app: id,
                    attempt: 1,
                },
                self.epoch,
                now_ms,
            )),
            Some((_, AttemptState::Launched)) => {
                let at = app.attempts.last_mut().expect("last exists");
                at.recovered = true;
                at.last_contact_ms = now_ms;
                self.amrm
                    .write()
                    .recover_attempt(at.id)
                    .map_err(|e| e.to_string())?;
            }
            Some((n, AttemptState::Failed)) if app.failures < app.max_attempts => {
                app.attempts.push(Attempt::new(
                    AttemptId {
                        app: id,
                        attempt: n + 1,
                    },
                    self.epoch,
                    now_ms,
                ));
            }
            Some((_, s)) => {
                // The attempt ended and the application's own record did not make it to disk.
                let (to, fs) = match s {
                    AttemptState::Finished => (
                        AppState::Finished,
                        FinalApplicationStatusProto::AppUndefined,
                    ),
                    AttemptState::Killed => {
                        (AppState::Killed, FinalApplicationStatusProto::AppKilled)
                    }
                    _ => (AppState::Failed, FinalApplicationStatusProto::AppFailed),
                };
                app.state = to;
                app.final_status = app
                    .attempts
                    .last()
                    .and_then(|t| t.final_status)
                    .unwrap_or(fs);
                app.diagnostics = app
                    .attempts
                    .last()
                    .map(|t| t.diagnostics.clone())
                    .unwrap_or_default();
                app.finish_ms = now_ms;
                app.am_spec = ContainerLaunchContextProto::default();
            }
        }
        Ok(app)
    }

    /// What the state store must hold for the applications kept now (for compaction; the
    /// caller adds the epoch and the keys).
    pub fn store_snapshot(&self) -> Vec<Rec> {
        use crate::state_store::AmAllocatedRec;
        let mut out = Vec::new();
        for app in self.apps.values() {
            out.push(Rec::Submitted(SubmittedRec {
                app: app.id.to_proto(),
                user: app.user.clone(),
                submit_ms: app.submit_ms,
                context: prost::Message::encode_to_vec(&kept_context(app)),
            }));
            for at in &app.attempts {
                if let (Some(c), Some(n)) = (at.am_container, &at.am_node) {
                    out.push(Rec::AmAllocated(AmAllocatedRec {
                        attempt: attempt_to_proto(&at.id),
                        container: c.id,
                        host: n.host.to_string(),
                        port: n.port,
                        allocated_ms: app.launch_ms,
                    }));
                }
                if at.state.is_final() {
                    out.push(Rec::AttemptEnded(AttemptEndedRec {
                        attempt: attempt_to_proto(&at.id),
                        state: at.state.code(),
                        diagnostics: at.diagnostics.clone(),
                        am_exit_status: at.am_exit_status,
                        failures: app.failures,
                        final_status: at.final_status.map(|f| f as i32),
                    }));
                }
            }
            if app.state.is_final() || app.state == AppState::Finishing {
                let mut e = app_ended(app);
                e.state = match app.state {
                    AppState::Finishing => AppState::Finished.code(),
                    s => s.code(),
                };
                out.push(Rec::AppEnded(e));
            }
        }
        out
    }

    // ---- nodes ---------------------------------------------------------------------------

    /// A node registered (or re-registered) with this capability.
    pub fn node_added(&mut self, key: &NodeKey, http_address: String, total: Res) {
        self.nodes.upsert(key, |n| {
            n.http_address = http_address;
            n.total = total;
            n.active = true;
        });
    }

    /// A node left (lost, shut down, decommissioned, rebooted): its containers are completed
    /// ABORTED "Container released on a *lost* node".
    pub fn node_removed(&mut self, key: &NodeKey, now_ms: u64) {
        self.nodes.update(key, |n| n.active = false);
        let mut gone = Vec::new();
        for app in self.apps.values() {
            for at in &app.attempts {
                for (c, l) in &at.live {
                    if &l.node == key {
                        gone.push(*c);
                    }
                }
            }
        }
        for c in gone {
            self.container_completed(
                c,
                exit_status::ABORTED,
                "Container released on a *lost* node",
                now_ms,
            );
            // A node that comes back (re-registers) is told to kill what may still run there.
            self.cleanups.push(Cleanup::Container(c));
        }
        self.update_gate();
    }

    /// A node (re-)registered, reporting its containers. Normally the reported completions
    /// complete with their real status, whatever else the RM had on the node is lost (Java
    /// without work-preserving recovery removes and re-adds a reconnected node), and the
    /// node's capacity is (re)set. The first registration of a node after live applications
    /// were recovered reconciles instead (see the module docs).
    pub fn node_registered(
        &mut self,
        key: &NodeKey,
        http_address: String,
        total: Res,
        reported: &[Reported],
        now_ms: u64,
    ) {
        if self.reconcile && !self.nodes.contains_key(key) {
            self.reconcile_node(key, http_address, total, reported, now_ms);
            return;
        }
        for r in reported {
            if r.state == ContainerStateProto::CComplete {
                self.container_reported_complete(r.id, r.exit_status, &r.diagnostics, now_ms);
            }
        }
        self.node_removed(key, now_ms);
        self.node_added(key, http_address, total);
    }

    /// The current, not final, recovered-or-live attempt a container belongs to.
    fn live_attempt_mut(&mut self, c: ContainerId) -> Option<&mut Attempt> {
        let app = self
            .apps
            .get_mut(&c.app.id)
            .filter(|a| a.id == c.app && !a.state.is_final())?;
        app.attempts
            .last_mut()
            .filter(|t| t.id.attempt == c.attempt && !t.state.is_final())
    }

    fn reconcile_node(
        &mut self,
        key: &NodeKey,
        http_address: String,
        total: Res,
        reported: &[Reported],
        now_ms: u64,
    ) {
        self.node_added(key, http_address, total);
        // Running and new containers of live attempts are live again here.
        let mut seen = HashSet::new();
        for r in reported {
            seen.insert(r.id);
            if r.state == ContainerStateProto::CComplete {
                continue;
            }
            let started = r.state == ContainerStateProto::CRunning;
            let Some(at) = self.live_attempt_mut(r.id) else {
                continue;
            };
            let l = at.live.entry(r.id).or_insert_with(|| LiveContainer {
                node: key.clone(),
                res: r.res,
                priority: r.priority,
                allocated_ms: now_ms,
                started,
            });
            if &l.node != key {
                continue;
            }
            if !started {
                self.unstarted = true;
            }
        }
        let (mut used, mut count) = (Res::default(), 0);
        let mut lost = Vec::new();
        for app in self.apps.values() {
            for at in &app.attempts {
                for (c, l) in &at.live {
                    if &l.node == key {
                        used = used.plus(l.res);
                        count += 1;
                        if !seen.contains(c) {
                            lost.push(*c);
                        }
                    }
                }
            }
        }
        self.nodes.update(key, |n| {
            n.used = used;
            n.containers = count;
        });
        // Completions made while the RM was away: to their AMs.
        for r in reported {
            if r.state != ContainerStateProto::CComplete {
                continue;
            }
            if self.is_live(r.id) {
                self.container_completed(r.id, r.exit_status, &r.diagnostics, now_ms);
            } else if let Some(at) = self.live_attempt_mut(r.id).filter(|t| t.recovered) {
                at.completed
                    .push(status(r.id, r.exit_status, &r.diagnostics));
            }
        }
        for c in lost {
            self.container_completed(
                c,
                exit_status::ABORTED,
                "Container released on a *lost* node",
                now_ms,
            );
            self.cleanups.push(Cleanup::Container(c));
        }
        self.update_gate();
    }

    /// Total and used resources over active nodes.
    pub fn cluster_resources(&self) -> (Res, Res) {
        let (_, total, used) = self.nodes.totals();
        (total, used)
    }

    /// Active nodes (`numClusterNodes`).
    pub fn active_nodes(&self) -> usize {
        self.nodes.totals().0
    }

    /// NODE_UPDATE: completed containers reported in this status are applied, then the
    /// scheduler assigns containers on the node. Malformed statuses are skipped.
    pub fn node_update(&mut self, host: &str, port: i32, status: NodeStatusView<'_>, now_ms: u64) {
        let probe: &dyn NodeKeyRef = &(host, port);
        let Some(key) = self.nodes.get(probe).map(|n| n.key.clone()) else {
            return;
        };
        let mut done = Vec::new();
        for cs in status.containers_statuses() {
            let Ok(cs) = cs else { continue };
            let state = cs.state().ok().flatten();
            if state == Some(ContainerStateProto::CRunning) && self.unstarted {
                if let Some(c) = cs
                    .container_id()
                    .ok()
                    .flatten()
                    .and_then(|v| ContainerId::from_view(v).ok().flatten())
                {
                    self.mark_started(c);
                }
                continue;
            }
            if state != Some(ContainerStateProto::CComplete) {
                continue;
            }
            let Some(c) = cs
                .container_id()
                .ok()
                .flatten()
                .and_then(|v| ContainerId::from_view(v).ok().flatten())
            else {
                continue;
            };
            if self.is_live(c) {
                done.push((
                    c,
                    cs.exit_status().unwrap_or(exit_status::INVALID),
                    cs.diagnostics().unwrap_or("").to_string(),
                ));
            }
        }
        for (c, exit, diag) in done {
            self.container_completed(c, exit, &diag, now_ms);
        }
        self.schedule_on(&key, now_ms);
        self.update_gate();
    }

    /// A completion reported outside a heartbeat (the NodeManager's re-registration).
    pub fn container_reported_complete(
        &mut self,
        c: ContainerId,
        exit: i32,
        diagnostics: &str,
        now_ms: u64,
    ) {
        if self.is_live(c) {
            self.container_completed(c, exit, diagnostics, now_ms);
            self.update_gate();
        }
    }

    fn mark_started(&mut self, c: ContainerId) {
        if let Some(l) = self
            .apps
            .get_mut(&c.app.id)
            .filter(|a| a.id == c.app)
            .and_then(|a| a.attempts.iter_mut().find(|t| t.id.attempt == c.attempt))
            .and_then(|t| t.live.get_mut(&c))
        {
            l.started = true;
        }
    }

    fn is_live(&self, c: ContainerId) -> bool {
        self.apps
            .get(&c.app.id)
            .filter(|a| a.id == c.app)
            .and_then(|a| a.attempts.iter().find(|t| t.id.attempt == c.attempt))
            .is_some_and(|t| t.live.contains_key(&c))
    }

    /// A live container completed: resources back to its node, its status to the AM (once),
    /// or, for an AM container, the attempt ends.
    fn container_completed(&mut self, c: ContainerId, exit: i32, diagnostics: &str, now_ms: u64) {
        let Some(app) = self.apps.get_mut(&c.app.id).filter(|a| a.id == c.app) else {
            return;
        };
        let Some(at) = app.attempts.iter_mut().find(|t| t.id.attempt == c.attempt) else {
            return;
        };
        let Some(live) = at.live.remove(&c) else {
            return;
        };
        at.new_containers.retain(|n| n.id != c);
        self.nodes.update(&live.node, |n| {
            n.used = n.used.minus(live.res);
            n.containers = n.containers.saturating_sub(1);
        });
        if at.am_container == Some(c) {
            at.am_exit_status = Some(exit);
            self.cleanups.push(Cleanup::Ack(c));
            let attempt = at.id;
            self.am_container_finished(attempt, exit, diagnostics, now_ms);
        } else if !at.state.is_final() {
            at.completed.push(status(c, exit, diagnostics));
        }
    }

    fn am_container_finished(&mut self, attempt: AttemptId, exit: i32, diag: &str, now_ms: u64) {
        let Some(app) = self.apps.get_mut(&attempt.app.id) else {
            return;
        };
        let Some(at) = app.attempts.iter().find(|t| t.id == attempt) else {
            return;
        };
        if at.state.is_final() {
            return;
        }
        if at.state == AttemptState::Finishing {
            self.end_attempt(attempt, AttemptState::Finished, String::new(), now_ms);
            return;
        }
        let text = format!(
            "AM Container for {attempt} exited with  exitCode: {exit}\nFailing this attempt.Diagnostics: {diag}\nFor more detailed output, check the application tracking page: N/A Then click on links to logs of each attempt.\n. Failing this attempt."
        );
        if counts_as_failure(exit) {
            app.failures += 1;
        }
        self.end_attempt(attempt, AttemptState::Failed, text, now_ms);
    }

    /// Ends an attempt: its containers are released (killed on their nodes), its AMRMToken
    /// stops verifying; a failed attempt is retried while attempts remain, else the
    /// application fails; a finished attempt finishes the application.
    fn end_attempt(&mut self, attempt: AttemptId, to: AttemptState, diag: String, now_ms: u64) {
        let Some(app) = self.apps.get_mut(&attempt.app.id) else {
            return;
        };
        let Some(at) = app.attempts.iter_mut().find(|t| t.id == attempt) else {
            return;
        };
        if at.state.is_final() {
            return;
        }
        at.state = to;
        at.finish_ms = now_ms;
        if !diag.is_empty() {
            at.diagnostics = diag.clone();
        }
        if let Some(ops) = self.store_ops.as_mut() {
            ops.push(Rec::AttemptEnded(AttemptEndedRec {
                attempt: attempt_to_proto(&attempt),
                state: to.code(),
                diagnostics: at.diagnostics.clone(),
                am_exit_status: at.am_exit_status,
                failures: app.failures,
                final_status: at.final_status.map(|f| f as i32),
            }));
        }
        at.asks.clear();
        at.new_containers.clear();
        for (c, l) in at.live.drain() {
            self.nodes.update(&l.node, |n| {
                n.used = n.used.minus(l.res);
                n.containers = n.containers.saturating_sub(1);
            });
            self.cleanups.push(Cleanup::Container(c));
        }
        self.amrm.write().application_master_finished(&attempt);
        match to {
            AttemptState::Finished => {
                let fs = at
                    .final_status
                    .unwrap_or(FinalApplicationStatusProto::AppUndefined);
                app.final_status = fs;
                self.finish_app(attempt.app, AppState::Finished, None, now_ms);
            }
            AttemptState::Failed => {
                let limit = app.max_attempts;
                if app.state.is_final() {
                } else if app.failures < limit {
                    let next = AttemptId {
                        app: app.id,
                        attempt: app.attempts.len() as i32 + 1,
                    };
                    app.attempts.push(Attempt::new(next, self.epoch, now_ms));
                    app.state = AppState::Accepted;
                    self.unplaced = true;
                } else {
                    let global = self.cfg.max_attempts;
                    let text = format!(
                        "Application {} failed {} times (global limit ={}; local limit is ={}) due to {}. Failing the application.",
                        app.id, app.failures, global, limit, diag
                    );
                    app.final_status = FinalApplicationStatusProto::AppFailed;
                    self.finish_app(attempt.app, AppState::Failed, Some(text), now_ms);
                }
            }
            _ => {}
        }
        self.update_gate();
    }

    fn finish_app(&mut self, id: AppId, to: AppState, diag: Option<String>, now_ms: u64) {
        let Some(app) = self.apps.get_mut(&id.id) else {
            return;
        };
        if app.state.is_final() {
            return;
        }
        app.state = to;
        app.am_spec = ContainerLaunchContextProto::default();
        self.live_apps = self.live_apps.saturating_sub(1);
        if let Some(d) = diag {
            app.diagnostics = d;
        }
        app.finish_ms = now_ms;
        if let Some(ops) = self.store_ops.as_mut() {
            ops.push(Rec::AppEnded(app_ended(app)));
        }
        self.cleanups.push(Cleanup::App(id));
        self.cleanups.push(Cleanup::ReleaseAcks(id));
        self.completed_order.push(id.id);
        while self.completed_order.len() > self.cfg.max_completed_apps {
            let old = self.completed_order.remove(0);
            self.apps.remove(&old);
        }
        self.update_gate();
    }

    // ---- scheduling ----------------------------------------------------------------------

    fn schedule_on(&mut self, key: &NodeKey, now_ms: u64) {
        let Some(node) = self.nodes.get(key) else {
            return;
        };
        if !node.active {
            return;
        }
        // Applications in submission order, without collecting them (this runs on every
        // heartbeat while something is in flight).
        let mut from = Some(0);
        while let Some(i) = from.and_then(|f| {
            self.apps
                .range(f..)
                .find(|(_, a)| {
                    matches!(a.state, AppState::Accepted | AppState::Running)
                        && a.current().is_some_and(|t| {
                            t.state == AttemptState::Scheduled
                                || (matches!(
                                    t.state,
                                    AttemptState::Launched | AttemptState::Running
                                ) && !t.asks.is_empty())
                        })
                })
                .map(|(&i, _)| i)
        }) {
            from = i.checked_add(1);
            let avail = match self.nodes.get(key) {
                Some(n) => n.total.minus(n.used),
                None => return,
            };
            if avail.mem <= 0 || avail.vcores <= 0 {
                return;
            }
            let Some(app) = self.apps.get_mut(&i) else {
                continue;
            };
            let am_res = app.am_res;
            let max_attempts = app.max_attempts;
            let priority = app.priority;
            let (user, spec) = match app.current() {
                Some(t) if t.state == AttemptState::Scheduled && am_res.fits_in(avail) => {
                    (app.user.clone(), app.am_spec.clone())
                }
                _ => (String::new(), ContainerLaunchContextProto::default()),
            };
            let Some(at) = app.current_mut() else {
                continue;
            };
            if at.blacklist.contains(&*key.host) {
                continue;
            }
            match at.state {
                AttemptState::Scheduled => {
                    if !am_res.fits_in(avail) {
                        continue;
                    }
                    let c = at.next_container();
                    at.live.insert(
                        c,
                        LiveContainer {
                            node: key.clone(),
                            res: am_res,
                            priority,
                            allocated_ms: now_ms,
                            started: true,
                        },
                    );
                    at.am_container = Some(c);
                    at.am_node = Some(key.clone());
                    at.state = AttemptState::Allocated;
                    at.last_contact_ms = now_ms;
                    let attempt = at.id;
                    self.nodes.update(key, |n| {
                        n.used = n.used.plus(am_res);
                        n.containers += 1;
                    });
                    let minted = self.amrm.write().create_and_get_amrm_token(attempt);
                    match minted {
                        Ok(t) => self.launches.push(AmLaunch {
                            attempt,
                            container: c,
                            node: key.clone(),
                            user,
                            res: am_res,
                            priority,
                            launch: spec,
                            amrm_token: t,
                            max_app_attempts: max_attempts,
                        }),
                        Err(e) => {
                            let d = format!("Error launching {attempt}. Got exception: {e}");
                            self.end_attempt(attempt, AttemptState::Failed, d, now_ms);
                        }
                    }
                }
                AttemptState::Launched | AttemptState::Running => {
                    let mut left = avail;
                    let before = at.new_containers.len();
                    assign_asks(at, key, &mut left, now_ms);
                    let added = at.new_containers.len() - before;
                    if added > 0 {
                        self.unstarted = true;
                    }
                    self.nodes.update(key, |n| {
                        n.used = n.used.plus(avail.minus(left));
                        n.containers += added;
                    });
                }
                _ => {}
            }
        }
    }

    /// Whether an attempt became SCHEDULED since [`place_unplaced`](Self::place_unplaced) last
    /// ran (then it has something to do).
    pub fn has_unplaced(&self) -> bool {
        self.unplaced
    }

    /// With [`AppsConfig::immediate_placement`]: AM containers of attempts that became
    /// SCHEDULED since the last call (submitted, retried) are placed now on the nodes with the
    /// most room, rather than on the next heartbeat of a node with room. Without work (or in
    /// heartbeat-only mode) this is one flag test: the heartbeat path may call it.
    pub fn place_unplaced(&mut self, now_ms: u64) {
        if !self.unplaced {
            return;
        }
        self.unplaced = false;
        if !self.cfg.immediate_placement {
            return;
        }
        let waiting = |a: &Apps| {
            a.apps
                .values()
                .filter(|x| {
                    matches!(x.state, AppState::Accepted)
                        && x.current()
                            .is_some_and(|t| t.state == AttemptState::Scheduled)
                })
                .map(|x| x.am_res)
                .reduce(Res::smallest)
        };
        // Only nodes with room for the smallest waiting AM are tried.
        if let Some(need) = waiting(self) {
            self.place_now(now_ms, need, |a| waiting(a).is_some());
        }
    }

    /// One scheduling pass outside a heartbeat: [`schedule_on`](Self::schedule_on) on each
    /// active node with room for `need`, the most free memory (then vcores) first, while
    /// `pending` says there is still something to place.
    fn place_now(&mut self, now_ms: u64, need: Res, pending: impl Fn(&Apps) -> bool) {
        // Each node once: only the visited one's room changed, so the next roomiest unvisited
        // node is the next one of the order as it stood at the start.
        let mut visited = Vec::new();
        while pending(self) {
            let Some((slot, key)) = self.nodes.roomiest(need, &visited) else {
                break;
            };
            let key = key.clone();
            visited.push(slot);
            self.schedule_on(&key, now_ms);
        }
    }

    // ---- ApplicationClientProtocol -------------------------------------------------------

    /// `getNewApplication`: the next id and the maximum capability.
    pub fn new_application(&mut self) -> Result<(AppId, Res), AppError> {
        let live = self.live_apps;
        if live >= self.cfg.max_apps {
            return Err(err(
                exc::YARN,
                format!(
                    "The RM keeps at most {} applications; {} are not finished",
                    self.cfg.max_apps, live
                ),
            ));
        }
        self.next_app = self.next_app.checked_add(1).ok_or_else(|| {
            err(
                exc::YARN,
                "application ids exhausted for this cluster timestamp",
            )
        })?;
        Ok((
            AppId::new(self.cluster_ts, self.next_app),
            self.cfg.max_alloc,
        ))
    }

    /// `submitApplication`.
    pub fn submit(
        &mut self,
        ctx: ApplicationSubmissionContextProto,
        user: &str,
        now_ms: u64,
    ) -> Result<AppId, AppError> {
        self.submit_checked(ctx, user, now_ms, |_| true)
    }

    /// [`submit`](Self::submit) with the queue ACL of `yarn.acl.enable`: `may_submit(queue)`
    /// false refuses the submission with Java's `YarnException` wrapping an
    /// `AccessControlException` ([`crate::app_acls::submit_denied_message`]). As in Java's
    /// `RMAppManager` it is asked after the resource checks, and only for a queue the
    /// scheduler has (an unknown queue fails the application as before).
    pub fn submit_checked(
        &mut self,
        ctx: ApplicationSubmissionContextProto,
        user: &str,
        now_ms: u64,
        may_submit: impl FnOnce(&str) -> bool,
    ) -> Result<AppId, AppError> {
        let Some(id) = ctx
            .application_id
            .as_ref()
            .filter(|p| p.id.is_some())
            .map(|p| AppId::new(p.cluster_timestamp.unwrap_or(0), p.id.unwrap_or(0)))
        else {
            return Err(err(exc::ILLEGAL_ARGUMENT, "Invalid application id: null"));
        };
        if let Some(a) = self.app(id) {
            // Java: an earlier submitted application is answered without error.
            let _ = a;
            return Ok(id);
        }
        if id.cluster_timestamp != self.cluster_ts || id.id <= 0 || id.id > self.next_app {
            return Err(err(
                exc::YARN,
                format!("Application with id {id} is not known to this RM (use getNewApplication)"),
            ));
        }
        let size = prost::Message::encoded_len(&ctx);
        if size > self.cfg.max_submission_bytes {
            return Err(err(
                exc::YARN,
                format!(
                    "Application submission context of {id} is {size} bytes, over the limit of {} (hotpath.rm.max-submission-bytes)",
                    self.cfg.max_submission_bytes
                ),
            ));
        }
        if ctx.unmanaged_am.unwrap_or(false) {
            return Err(err(
                exc::YARN,
                "unmanaged ApplicationMasters are not supported",
            ));
        }
        let Some(am_spec) = ctx.am_container_spec.clone() else {
            return Err(err(
                exc::INVALID_RESOURCE_REQUEST,
                "Invalid resource request, no resources requested",
            ));
        };
        // The AM resource: the resource request with *, else `resource`.
        let asked = am_resource(&ctx).ok_or_else(|| {
            err(
                exc::INVALID_RESOURCE_REQUEST,
                "Invalid resource request, no resources requested",
            )
        })?;
        self.validate(asked)?;
        let queue = ctx.queue.as_deref().unwrap_or(DEFAULT_QUEUE);
        if self.cfg.queues.iter().any(|q| q == queue) && !may_submit(queue) {
            return Err(err(
                exc::YARN,
                crate::app_acls::submit_denied_message(user, id, queue),
            ));
        }
        let mut app = self.new_app(id, &ctx, am_spec, asked, user, now_ms);
        let queue = app.queue.clone();
        let unknown_queue = !self.cfg.queues.contains(&queue);
        if !unknown_queue {
            self.cleanups.push(Cleanup::HoldAcks(id));
            app.state = AppState::Accepted;
            app.attempts.push(Attempt::new(
                AttemptId {
                    app: id,
                    attempt: 1,
                },
                self.epoch,
                now_ms,
            ));
            self.unplaced = true;
        }
        if let Some(ops) = self.store_ops.as_mut() {
            ops.push(Rec::Submitted(SubmittedRec {
                app: id.to_proto(),
                user: user.to_string(),
                submit_ms: now_ms,
                context: prost::Message::encode_to_vec(&ctx),
            }));
        }
        self.apps.insert(id.id, app);
        self.live_apps += 1;
        if unknown_queue {
            let text =
                format!("Application {id} submitted by user {user} to unknown queue: {queue}");
            if let Some(a) = self.apps.get_mut(&id.id) {
                a.final_status = FinalApplicationStatusProto::AppFailed;
            }
            self.finish_app(id, AppState::Failed, Some(text), now_ms);
        }
        self.update_gate();
        self.place_unplaced(now_ms);
        Ok(id)
    }

    /// `SchedulerUtils.validateResourceRequest`: negative or over the maximum allocation.
    fn validate(&self, r: Res) -> Result<(), AppError> {
        let max = self.cfg.max_alloc;
        let (kind, bad) = if r.mem < 0 {
            ("memory-mb", -1)
        } else if r.vcores < 0 {
            ("vcores", -1)
        } else if r.mem > max.mem {
            ("memory-mb", 1)
        } else if r.vcores > max.vcores {
            ("vcores", 1)
        } else {
            return Ok(());
        };
        let text = if bad < 0 {
            format!(
                "Invalid resource request! Cannot allocate containers as requested resource is less than 0! Requested resource type=[{kind}], Requested resource={r}"
            )
        } else {
            format!(
                "Invalid resource request! Cannot allocate containers as requested resource is greater than maximum allowed allocation. Requested resource type=[{kind}], Requested resource={r}, maximum allowed allocation={max}, please note that maximum allowed allocation is calculated by scheduler based on maximum resource of registered NodeManagers, which might be less than configured maximum allocation={max}"
            )
        };
        Err(err(exc::INVALID_RESOURCE_REQUEST, text))
    }

    pub(crate) fn not_found(id: AppId) -> AppError {
        err(
            exc::APP_NOT_FOUND,
            format!(
                "Application with id '{id}' doesn't exist in RM. Please check that the job submission was successful."
            ),
        )
    }

    /// `getApplicationReport`.
    pub fn report(&self, id: AppId) -> Result<ApplicationReportProto, AppError> {
        self.app(id).map(report).ok_or_else(|| Self::not_found(id))
    }

    /// `killApplication`: true when the application is (now or already) in a final state.
    pub fn kill(
        &mut self,
        id: AppId,
        diagnostics: Option<&str>,
        now_ms: u64,
    ) -> Result<bool, AppError> {
        let Some(app) = self.apps.get_mut(&id.id).filter(|a| a.id == id) else {
            return Err(err(
                exc::APP_NOT_FOUND,
                format!("Trying to kill an absent application {id}"),
            ));
        };
        if app.state.is_final() || app.state == AppState::Finishing {
            return Ok(true);
        }
        let text = match diagnostics {
            Some(d) if !d.is_empty() => d.to_string(),
            _ => "Application killed by user.".to_string(),
        };
        app.final_status = FinalApplicationStatusProto::AppKilled;
        if let Some(a) = app.current().map(|a| a.id) {
            self.end_attempt(a, AttemptState::Killed, text.clone(), now_ms);
        }
        self.finish_app(id, AppState::Killed, Some(text), now_ms);
        Ok(true)
    }

    /// `failApplicationAttempt` (the caller's MODIFY_APP is checked before): an unknown
    /// application is `ApplicationNotFoundException`, an attempt it never had
    /// `ApplicationAttemptNotFoundException` (Java's texts); an application in a completed
    /// state (FINISHING, FINISHED, FAILED, KILLED) or an attempt already ended is left alone,
    /// as Java answers them. Otherwise the attempt fails with Java's diagnostics, "Attempt
    /// failed by user.", which counts towards `yarn.resourcemanager.am.max-attempts`: a new
    /// attempt follows while attempts remain, else the application FAILS.
    pub fn fail_attempt(&mut self, attempt: AttemptId, now_ms: u64) -> Result<(), AppError> {
        let Some(app) = self
            .apps
            .get_mut(&attempt.app.id)
            .filter(|a| a.id == attempt.app)
        else {
            return Err(Self::not_found(attempt.app));
        };
        let Some(at) = app.attempts.iter().find(|t| t.id == attempt) else {
            return Err(err(
                exc::ATTEMPT_NOT_FOUND,
                format!("ApplicationAttempt with id '{attempt}' doesn't exist in RM."),
            ));
        };
        if app.state.is_final()
            || app.state == AppState::Finishing
            || at.state.is_final()
            || at.state == AttemptState::Finishing
        {
            return Ok(());
        }
        app.failures += 1;
        self.end_attempt(
            attempt,
            AttemptState::Failed,
            "Attempt failed by user.".to_string(),
            now_ms,
        );
        Ok(())
    }

    // ---- ApplicationMasterProtocol -------------------------------------------------------

    fn attempt_mut(&mut self, a: AttemptId) -> Result<(&mut Attempt, &str), AppError> {
        Self::attempt_in(&mut self.apps, a)
    }

    /// [`attempt_mut`](Self::attempt_mut) borrowing only the applications.
    fn attempt_in(
        apps: &mut BTreeMap<i32, RmApp>,
        a: AttemptId,
    ) -> Result<(&mut Attempt, &str), AppError> {
        let app = apps
            .get_mut(&a.app.id)
            .filter(|x| x.id == a.app)
            .ok_or_else(|| {
                err(
                    exc::ATTEMPT_NOT_FOUND,
                    format!(
                        "Application attempt {a} doesn't exist in ApplicationMasterService cache."
                    ),
                )
            })?;
        let user = app.user.as_str();
        let at = app.attempts.iter_mut().find(|t| t.id == a).ok_or_else(|| {
            err(
                exc::ATTEMPT_NOT_FOUND,
                format!("Application attempt {a} doesn't exist in ApplicationMasterService cache."),
            )
        })?;
        Ok((at, user))
    }

    /// `registerApplicationMaster`.
    pub fn register_am(
        &mut self,
        a: AttemptId,
        req: &RegisterApplicationMasterRequestProto,
        now_ms: u64,
    ) -> Result<RegisterApplicationMasterResponseProto, AppError> {
        let max = self.cfg.max_alloc;
        let (at, _) = self.attempt_mut(a)?;
        match at.state {
            AttemptState::Allocated | AttemptState::Launched => {}
            AttemptState::Running | AttemptState::Finishing => {
                return Err(err(
                    exc::INVALID_AM_REQUEST,
                    format!("Application Master is already registered : {}", a.app),
                ))
            }
            _ => {
                return Err(err(
                    exc::ATTEMPT_NOT_FOUND,
                    format!(
                        "Application attempt {a} doesn't exist in ApplicationMasterService cache."
                    ),
                ))
            }
        }
        at.state = AttemptState::Running;
        at.host = req.host.clone().unwrap_or_default();
        at.rpc_port = req.rpc_port.unwrap_or(-1);
        at.tracking_url = req.tracking_url.clone().unwrap_or_default();
        at.last_contact_ms = now_ms;
        at.last_response = Some(Arc::new(AllocateResponseProto {
            response_id: Some(0),
            ..Default::default()
        }));
        let app = self.apps.get_mut(&a.app.id).expect("attempt found above");
        app.state = AppState::Running;
        Ok(RegisterApplicationMasterResponseProto {
            maximum_capability: Some(max.to_proto()),
            queue: Some(app.queue.clone()),
            ..Default::default()
        })
    }

    /// `finishApplicationMaster`: true when unregistered.
    pub fn finish_am(
        &mut self,
        a: AttemptId,
        req: &FinishApplicationMasterRequestProto,
        now_ms: u64,
    ) -> Result<bool, AppError> {
        let (at, _) = self.attempt_mut(a)?;
        match at.state {
            AttemptState::Running => {}
            AttemptState::Finishing | AttemptState::Finished => return Ok(true),
            AttemptState::Allocated | AttemptState::Launched => {
                return Err(err(
                    exc::AM_NOT_REGISTERED,
                    format!(
                        "Application Master is trying to unregister before registering for: {a}"
                    ),
                ))
            }
            _ => {
                return Err(err(
                    exc::ATTEMPT_NOT_FOUND,
                    format!(
                        "Application attempt {a} doesn't exist in ApplicationMasterService cache."
                    ),
                ))
            }
        }
        let fs = req
            .final_application_status
            .and_then(|v| FinalApplicationStatusProto::try_from(v).ok())
            .unwrap_or(FinalApplicationStatusProto::AppUndefined);
        at.state = AttemptState::Finishing;
        at.final_status = Some(fs);
        at.last_contact_ms = now_ms;
        at.asks.clear();
        if let Some(u) = &req.tracking_url {
            at.tracking_url = u.clone();
        }
        let diag = req.diagnostics.clone().unwrap_or_default();
        at.diagnostics = diag.clone();
        let app = self.apps.get_mut(&a.app.id).expect("attempt found above");
        app.state = AppState::Finishing;
        app.final_status = fs;
        app.diagnostics = diag;
        if let Some(ops) = self.store_ops.as_mut() {
            // Java's FINAL_SAVING: a restart from here on finds the application finished.
            let mut e = app_ended(app);
            e.state = AppState::Finished.code();
            e.finish_ms = now_ms;
            ops.push(Rec::AppEnded(e));
        }
        self.update_gate();
        Ok(true)
    }

    /// `allocate`.
    pub fn allocate(
        &mut self,
        a: AttemptId,
        caller_key_id: i32,
        req: &AllocateRequestProto,
        keys: &TokenKeys,
        now_ms: u64,
    ) -> Result<Arc<AllocateResponseProto>, AppError> {
        self.allocate_with(a, caller_key_id, req, || keys.clone(), now_ms)
    }

    /// `allocate`, asking `keys` for the current container and NM keys only when the response
    /// carries new containers (the RM's allocate handler reads them from the tracker).
    pub fn allocate_with(
        &mut self,
        a: AttemptId,
        caller_key_id: i32,
        req: &AllocateRequestProto,
        keys: impl Fn() -> TokenKeys,
        now_ms: u64,
    ) -> Result<Arc<AllocateResponseProto>, AppError> {
        let max = self.cfg.max_alloc;
        let min = self.cfg.min_alloc;
        let cap = self.cfg.max_ask_containers;
        let expiry = self.cfg.container_token_expiry_ms;
        let immediate = self.cfg.immediate_placement;
        let (active, total, used) = self.nodes.totals();
        let cluster_nodes = i32::try_from(active).unwrap_or(i32::MAX);
        // Validate asks before touching any state.
        for r in &req.ask {
            let res = r
                .capability
                .as_ref()
                .map(Res::from_proto)
                .unwrap_or_default();
            self.validate(res)?;
            let n = r.num_containers.unwrap_or(0);
            if n < 0 || n > cap {
                return Err(err(
                    exc::INVALID_RESOURCE_REQUEST,
                    format!("Invalid resource ask by application {a}: numContainers {n} outside [0, {cap}]"),
                ));
            }
        }
        let amrm = self.amrm.clone();
        let (max_asks, max_blacklist) = (self.cfg.max_asks_per_attempt, self.cfg.max_blacklist);
        // The attempt borrowed from `apps` alone: `nodes` stays readable beside it.
        let (at, user) = Self::attempt_in(&mut self.apps, a)?;
        match at.state {
            AttemptState::Running | AttemptState::Finishing => {}
            AttemptState::Allocated | AttemptState::Launched => {
                return Err(err(
                    exc::AM_NOT_REGISTERED,
                    format!(
                        "AM is not registered for known application attempt: {a} or RM had restarted after AM registered.  AM should re-register."
                    ),
                ))
            }
            _ => {
                return Err(err(
                    exc::ATTEMPT_NOT_FOUND,
                    format!("Application attempt {a} doesn't exist in ApplicationMasterService cache."),
                ))
            }
        }
        let last = at
            .last_response
            .as_ref()
            .and_then(|r| r.response_id)
            .unwrap_or(0);
        let rid = req.response_id.unwrap_or(0);
        at.last_contact_ms = now_ms;
        if crate::tracker::next_response_id(rid) == last {
            if let Some(r) = &at.last_response {
                return Ok(r.clone());
            }
        }
        if rid != last {
            return Err(err(
                exc::INVALID_AM_REQUEST,
                format!(
                    "Invalid responseId in AllocateRequest from application attempt: {a} expect responseId to be {last} but get {rid}"
                ),
            ));
        }
        // RMServerUtils: a release of another attempt's container, or * in the blacklist.
        for c in &req.release {
            if let Some(c) = container_from_proto(c) {
                if c.app != a.app || c.attempt != a.attempt {
                    return Err(err(
                        exc::INVALID_CONTAINER_RELEASE,
                        format!(
                            "Cannot release container : {c} not belonging to this application attempt : {a}"
                        ),
                    ));
                }
            }
        }
        if req
            .blacklist_request
            .as_ref()
            .is_some_and(|b| b.blacklist_additions.iter().any(|h| h == ANY))
        {
            return Err(err(
                exc::INVALID_BLACKLIST_REQUEST,
                "Cannot add * to the blacklist!",
            ));
        }
        let asks_now: usize = at.asks.values().map(HashMap::len).sum();
        if asks_now + req.ask.len() > max_asks {
            return Err(err(
                exc::INVALID_RESOURCE_REQUEST,
                format!(
                    "Invalid resource ask by application {a}: more than {} outstanding resource requests",
                    max_asks
                ),
            ));
        }
        if let Some(b) = &req.blacklist_request {
            if at.blacklist.len() + b.blacklist_additions.len() > max_blacklist {
                return Err(err(
                    exc::INVALID_BLACKLIST_REQUEST,
                    format!(
                        "Invalid blacklist request by application {a}: more than {} hosts",
                        max_blacklist
                    ),
                ));
            }
        }
        at.progress = req.progress.unwrap_or(at.progress);
        if let Some(b) = &req.blacklist_request {
            for h in &b.blacklist_additions {
                at.blacklist.insert(h.clone());
            }
            for h in &b.blacklist_removals {
                at.blacklist.remove(h);
            }
        }
        if at.state == AttemptState::Running {
            for r in &req.ask {
                let res = r
                    .capability
                    .as_ref()
                    .map(Res::from_proto)
                    .unwrap_or_default()
                    .normalize(min, max);
                let prio = r.priority.and_then(|p| p.priority).unwrap_or(0);
                let name = r.resource_name.clone().unwrap_or_else(|| ANY.into());
                let ask = Ask {
                    capability: res,
                    num: r.num_containers.unwrap_or(0),
                    relax: r.relax_locality.unwrap_or(true),
                };
                let m = at.asks.entry(prio).or_default();
                if ask.num == 0 && name != ANY {
                    m.remove(&name);
                } else {
                    m.insert(name, ask);
                }
            }
        }
        // Immediate placement: new asks are placed now and come back in this response (Java's
        // asynchronous scheduling also allocates between an AM's calls).
        // Only nodes with room for the attempt's smallest outstanding ask are tried.
        let need = if immediate && at.state == AttemptState::Running && !req.ask.is_empty() {
            at.asks
                .values()
                .filter_map(|m| m.get(ANY))
                .filter(|x| x.num > 0)
                .map(|x| x.capability)
                .reduce(Res::smallest)
        } else {
            None
        };
        let (at, user, total, used) = match need {
            Some(need) => {
                self.place_now(now_ms, need, |x| {
                    x.app(a.app)
                        .and_then(|app| app.attempts.iter().find(|t| t.id == a))
                        .is_some_and(|t| t.pending_containers() > 0)
                });
                let (total, used) = self.cluster_resources();
                let (at, user) = Self::attempt_in(&mut self.apps, a)?;
                (at, user, total, used)
            }
            _ => (at, user, total, used),
        };
        let mut released = Vec::new();
        for c in &req.release {
            let Some(c) = container_from_proto(c) else {
                continue;
            };
            if at.am_container == Some(c) {
                continue;
            }
            if let Some(l) = at.live.remove(&c) {
                at.new_containers.retain(|n| n.id != c);
                released.push((c, l));
            }
        }
        for (c, _) in &released {
            at.completed.push(status(
                *c,
                exit_status::ABORTED,
                "Container released by application",
            ));
        }
        // Newly allocated containers, with tokens.
        let mut resp = AllocateResponseProto {
            a_m_command: None,
            response_id: Some(crate::tracker::next_response_id(last)),
            num_cluster_nodes: Some(cluster_nodes),
            limit: Some(total.minus(used).to_proto()),
            ..Default::default()
        };
        let mut minting: Option<TokenKeys> = None;
        for n in at.new_containers.drain(..) {
            // The keys only when there is something to mint (most calls have not).
            let keys = minting.get_or_insert_with(&keys);
            let token = container_token(
                keys,
                n.id,
                &n.node,
                user,
                n.res,
                n.priority,
                now_ms,
                expiry,
                ContainerTypeProto::Task,
            );
            // A token per node, again after the NM key rolled (Java clears its record on
            // activating the next key).
            if at.nm_token_nodes.insert(n.node.clone(), keys.nm.key_id) != Some(keys.nm.key_id) {
                resp.nm_tokens.push(NmTokenProto {
                    node_id: Some(n.node.to_proto()),
                    token: Some(nm_token(keys, a, &n.node, user).to_proto()),
                });
            }
            resp.allocated_containers.push(ContainerProto {
                id: Some(n.id.to_proto()),
                node_id: Some(n.node.to_proto()),
                node_http_address: self.nodes.get(&n.node).map(|x| x.http_address.clone()),
                resource: Some(n.res.to_proto()),
                priority: Some(PriorityProto {
                    priority: Some(n.priority),
                }),
                container_token: Some(token.to_proto()),
                execution_type: Some(ExecutionTypeProto::Guaranteed as i32),
                allocation_request_id: Some(-1),
                version: Some(0),
                allocation_tags: Vec::new(),
                exposed_ports: None,
            });
        }
        resp.completed_container_statuses = std::mem::take(&mut at.completed);
        let pulled: Vec<ContainerId> = resp
            .completed_container_statuses
            .iter()
            .filter_map(|s| s.container_id.as_ref().and_then(container_from_proto))
            .collect();
        // AMRMToken rolling: while a next key is pending, a caller whose token was made with
        // another key gets a token under the next key (Java's "rolled-over" branch).
        // Without a pending key (nearly always) that is one read-lock check.
        let rolled = amrm
            .read()
            .next_key()
            .is_some_and(|k| k.key_id != caller_key_id);
        if rolled {
            let caller = hadoop_wire::token::AmrmTokenIdentifier::new(Some(a), caller_key_id);
            if let Ok(Some(t)) = amrm.write().token_for_allocate(&caller) {
                resp.am_rm_token = Some(t.to_proto());
            }
        }
        let resp = Arc::new(resp);
        at.last_response = Some(resp.clone());
        self.cleanups.extend(pulled.into_iter().map(Cleanup::Ack));
        for (c, l) in released {
            self.nodes.update(&l.node, |n| {
                n.used = n.used.minus(l.res);
                n.containers = n.containers.saturating_sub(1);
            });
            self.cleanups.push(Cleanup::Container(c));
        }
        Ok(resp)
    }

    // ---- the launcher's results and the liveness monitor ---------------------------------

    /// The AM container was started on its node.
    pub fn am_launched(&mut self, a: AttemptId, now_ms: u64) {
        if let Ok((at, _)) = self.attempt_mut(a) {
            if at.state == AttemptState::Allocated {
                at.state = AttemptState::Launched;
                at.last_contact_ms = now_ms;
            }
        }
        if let Some(app) = self.apps.get_mut(&a.app.id) {
            if app.launch_ms == 0 {
                app.launch_ms = now_ms;
            }
        }
    }

    /// Starting the AM container failed (`LAUNCH_FAILED`).
    pub fn am_launch_failed(&mut self, a: AttemptId, error: &str, now_ms: u64) {
        let text = format!("Error launching {a}. Got exception: {error}");
        if let Some(app) = self.apps.get_mut(&a.app.id) {
            app.failures += 1;
        }
        self.end_attempt(a, AttemptState::Failed, text, now_ms);
    }

    /// The AM liveness monitor, and the allocation expiry: a container not reported RUNNING
    /// within `yarn.resourcemanager.rm.container-allocation.expiry-interval-ms` of its
    /// allocation completes ABORTED "Container expired since it was unused" (its AM is told;
    /// its node is told to clean it up). Returns the attempts expired.
    pub fn tick(&mut self, now_ms: u64) -> Vec<AttemptId> {
        let limit = self.cfg.container_token_expiry_ms;
        let mut unused = Vec::new();
        let mut unstarted = false;
        for app in self.apps.values() {
            for at in &app.attempts {
                for (c, l) in &at.live {
                    if !l.started {
                        unstarted = true;
                        if now_ms.saturating_sub(l.allocated_ms) > limit {
                            unused.push(*c);
                        }
                    }
                }
            }
        }
        self.unstarted = unstarted;
        for c in unused {
            self.container_completed(
                c,
                exit_status::ABORTED,
                "Container expired since it was unused",
                now_ms,
            );
            self.cleanups.push(Cleanup::Container(c));
        }
        let expiry = self.cfg.am_expiry_ms;
        let mut expired = Vec::new();
        for app in self.apps.values() {
            if let Some(at) = app.current() {
                if matches!(
                    at.state,
                    AttemptState::Launched | AttemptState::Running | AttemptState::Finishing
                ) && now_ms.saturating_sub(at.last_contact_ms) > expiry
                {
                    expired.push((at.id, at.state));
                }
            }
        }
        for (a, s) in &expired {
            if *s == AttemptState::Finishing {
                self.end_attempt(*a, AttemptState::Finished, String::new(), now_ms);
            } else {
                if let Some(app) = self.apps.get_mut(&a.app.id) {
                    app.failures += 1;
                }
                let text = format!("ApplicationMaster for attempt {a} timed out");
                self.end_attempt(*a, AttemptState::Failed, text, now_ms);
            }
        }
        expired.into_iter().map(|(a, _)| a).collect()
    }
}

/// Assigns the attempt's asks on one node, priority by priority (FifoScheduler
/// `assignContainersOnNode`): node-local, rack-local, off-switch.
fn assign_asks(at: &mut Attempt, key: &NodeKey, avail: &mut Res, now_ms: u64) {
    let prios: Vec<i32> = at.asks.keys().copied().collect();
    for p in prios {
        while let Some(m) = at.asks.get(&p) {
            let Some(any) = m.get(ANY).copied() else {
                break;
            };
            if any.num <= 0 || !any.capability.fits_in(*avail) {
                break;
            }
            let host: &str = &key.host;
            let node_ask = m.get(host).copied().filter(|a| a.num > 0);
            let rack_ask = m.get(DEFAULT_RACK).copied();
            let level = if node_ask.is_some() && rack_ask.is_none_or(|r| r.num > 0) {
                // Java requires the rack request to be outstanding too; AMRMClient always
                // sends one with a node request.
                Some(0)
            } else if rack_ask.is_some_and(|r| r.num > 0) && any.relax {
                Some(1)
            } else if any.relax && rack_ask.is_none_or(|r| r.relax) && node_ask.is_none() {
                // Off-switch: only if no named node or rack in this priority forbids it. A
                // node-local ask elsewhere with relaxLocality false keeps its containers there.
                let strict_elsewhere = m
                    .iter()
                    .any(|(n, a)| n != ANY && !a.relax && a.num > 0 && n != host);
                (!strict_elsewhere).then_some(2)
            } else {
                None
            };
            let Some(level) = level else { break };
            let cap = any.capability;
            let m = at.asks.get_mut(&p).expect("present");
            let dec = |m: &mut HashMap<String, Ask>, k: &str| {
                if let Some(a) = m.get_mut(k) {
                    a.num = (a.num - 1).max(0);
                }
            };
            if level == 0 {
                dec(m, host);
            }
            if level <= 1 {
                dec(m, DEFAULT_RACK);
            }
            dec(m, ANY);
            let c = at.next_container();
            at.live.insert(
                c,
                LiveContainer {
                    node: key.clone(),
                    res: cap,
                    priority: p,
                    allocated_ms: now_ms,
                    started: false,
                },
            );
            at.new_containers.push(NewContainer {
                id: c,
                node: key.clone(),
                res: cap,
                priority: p,
            });
            *avail = avail.minus(cap);
        }
    }
}

/// `ApplicationReport` of an application.
pub fn report(app: &RmApp) -> ApplicationReportProto {
    let cur = app.current();
    let state = app.state.yarn_state();
    let diagnostics = if !app.diagnostics.is_empty() {
        app.diagnostics.clone()
    } else {
        cur.map(|a| a.diagnostics.clone()).unwrap_or_default()
    };
    let running = matches!(app.state, AppState::Running | AppState::Finishing);
    ApplicationReportProto {
        application_id: Some(app.id.to_proto()),
        user: Some(app.user.clone()),
        queue: Some(app.queue.clone()),
        name: Some(app.name.clone()),
        host: Some(
            cur.filter(|_| running)
                .map(|a| a.host.clone())
                .unwrap_or_else(|| "N/A".into()),
        ),
        rpc_port: Some(cur.filter(|_| running).map(|a| a.rpc_port).unwrap_or(-1)),
        yarn_application_state: Some(state as i32),
        tracking_url: Some(
            cur.map(|a| a.tracking_url.clone())
                .filter(|u| !u.is_empty())
                .unwrap_or_else(|| "N/A".into()),
        ),
        diagnostics: Some(diagnostics),
        start_time: Some(app.submit_ms as i64),
        finish_time: Some(app.finish_ms as i64),
        final_application_status: Some(app.final_status as i32),
        original_tracking_url: Some(
            cur.map(|a| a.tracking_url.clone())
                .filter(|u| !u.is_empty())
                .unwrap_or_else(|| "N/A".into()),
        ),
        current_application_attempt_id: cur.map(|a| attempt_to_proto(&a.id)),
        progress: Some(match app.state {
            AppState::Finished | AppState::Failed | AppState::Killed | AppState::Finishing => 1.0,
            _ => cur.map(|a| a.progress).unwrap_or(0.0),
        }),
        application_type: Some(app.app_type.clone()),
        application_tags: app.tags.clone(),
        unmanaged_application: Some(false),
        priority: Some(PriorityProto {
            priority: Some(app.priority),
        }),
        launch_time: Some(app.launch_ms as i64),
        submit_time: Some(app.submit_ms as i64),
        ..Default::default()
    }
}

/// The report of a caller without VIEW_APP access: `RMAppImpl.createAndGetApplicationReport`
/// with `allowAccess=false`. The id, user, queue, name, states, times, type, tags and priority
/// stay; the attempt id is the dummy `-1`, host, tracking URLs and diagnostics are "N/A", the
/// RPC port -1, progress 0, no tokens, and the usage is Java's dummy report (-1 containers,
/// resources of -1).
pub fn reduced_report(app: &RmApp) -> ApplicationReportProto {
    let na = || Some("N/A".to_string());
    let minus_one = || Some(Res::new(-1, -1).to_proto());
    ApplicationReportProto {
        host: na(),
        rpc_port: Some(-1),
        client_to_am_token: None,
        tracking_url: na(),
        original_tracking_url: na(),
        diagnostics: na(),
        current_application_attempt_id: Some(attempt_to_proto(&AttemptId {
            app: app.id,
            attempt: -1,
        })),
        progress: Some(0.0),
        am_rm_token: None,
        app_resource_usage: Some(ApplicationResourceUsageReportProto {
            num_used_containers: Some(-1),
            num_reserved_containers: Some(-1),
            used_resources: minus_one(),
            reserved_resources: minus_one(),
            needed_resources: minus_one(),
            memory_seconds: Some(0),
            vcore_seconds: Some(0),
            ..Default::default()
        }),
        log_aggregation_status: None,
        ..report(app)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::amrm_token::AmrmTokenSecretManager;
    use hadoop_wire::entropy::SeededEntropy;
    use hadoop_wire::pb::hadoop::yarn::{NodeStatusProto, ResourceRequestProto};
    use hadoop_wire::token::{ContainerTokenIdentifier, TokenIdentifier};
    use prost::Message;

    const TS: i64 = 1_700_000_000_000;

    /// Heartbeat-only placement: these tests drive allocation by node updates (the
    /// immediate mode has its own tests, with [`apps_placing_now`]).
    fn apps(cfg: AppsConfig) -> Apps {
        apps_placing_now(AppsConfig {
            immediate_placement: false,
            ..cfg
        })
    }

    fn apps_placing_now(cfg: AppsConfig) -> Apps {
        let m =
            AmrmTokenSecretManager::new(&mut SeededEntropy(7), 0, 86_400_000, 1000, 100).unwrap();
        let mut a = Apps::new(cfg, TS, Arc::new(AmrmTokenSecrets::new(m)));
        a.node_added(&NodeKey::new("h1", 1), "h1:8042".into(), Res::new(4096, 4));
        a.node_added(&NodeKey::new("h2", 2), "h2:8042".into(), Res::new(4096, 4));
        a
    }

    fn keys() -> TokenKeys {
        TokenKeys {
            container: MasterKey::new(1, vec![1; 8]).unwrap(),
            nm: MasterKey::new(2, vec![2; 8]).unwrap(),
            rm_identifier: TS,
        }
    }

    fn ctx(id: AppId, mb: i64, queue: &str) -> ApplicationSubmissionContextProto {
        ApplicationSubmissionContextProto {
            application_id: Some(id.to_proto()),
            queue: Some(queue.into()),
            am_container_spec: Some(ContainerLaunchContextProto::default()),
            resource: Some(Res::new(mb, 1).to_proto()),
            ..Default::default()
        }
    }

    fn status_bytes(node: &NodeKey, done: &[(ContainerId, i32)]) -> Vec<u8> {
        NodeStatusProto {
            node_id: Some(node.to_proto()),
            response_id: Some(1),
            containers_statuses: done.iter().map(|&(c, e)| status(c, e, "done")).collect(),
            ..Default::default()
        }
        .encode_to_vec()
    }

    fn update(a: &mut Apps, node: &NodeKey, done: &[(ContainerId, i32)], now: u64) {
        let b = status_bytes(node, done);
        a.node_update(&node.host, node.port, NodeStatusView::new(&b), now);
    }

    fn ask(prio: i32, name: &str, n: i32, mb: i64, relax: bool) -> ResourceRequestProto {
        ResourceRequestProto {
            priority: Some(PriorityProto {
                priority: Some(prio),
            }),
            resource_name: Some(name.into()),
            capability: Some(Res::new(mb, 1).to_proto()),
            num_containers: Some(n),
            relax_locality: Some(relax),
            ..Default::default()
        }
    }

    /// Submits, allocates the AM container on h1, launches and registers it.
    fn running(a: &mut Apps) -> (AppId, AttemptId) {
        let (id, _) = a.new_application().unwrap();
        a.submit(ctx(id, 512, "default"), "alice", 10).unwrap();
        assert!(a.gate().load(Ordering::Relaxed));
        let h1 = NodeKey::new("h1", 1);
        update(a, &h1, &[], 20);
        let l = a.take_launches();
        assert_eq!(l.len(), 1);
        let at = l[0].attempt;
        assert_eq!(
            l[0].container.to_string(),
            format!("container_{TS}_0001_01_000001")
        );
        assert_eq!(
            l[0].res,
            Res::new(1024, 1),
            "normalized to the minimum allocation"
        );
        assert!(a.amrm.read().is_registered(&at));
        a.am_launched(at, 30);
        a.register_am(at, &RegisterApplicationMasterRequestProto::default(), 40)
            .unwrap();
        assert_eq!(a.app(id).unwrap().state, AppState::Running);
        (id, at)
    }

    #[test]
    fn a_user_failed_running_attempt_releases_its_am_container_and_is_retried() {
        let mut a = apps(AppsConfig::default());
        let (id, at) = running(&mut a);
        a.take_cleanups();
        a.fail_attempt(at, 50).unwrap();
        let app = a.app(id).unwrap();
        assert_eq!(app.attempts[0].state, AttemptState::Failed);
        assert_eq!(app.attempts[0].diagnostics, "Attempt failed by user.");
        assert_eq!(app.failures, 1);
        assert_eq!(app.state, AppState::Accepted);
        assert_eq!(app.attempts[1].state, AttemptState::Scheduled);
        let am = ContainerId {
            app: id,
            attempt: 1,
            id: 1,
        };
        assert!(a.take_cleanups().contains(&Cleanup::Container(am)));
        assert!(
            !a.amrm.read().is_registered(&at),
            "its AMRMToken stops verifying"
        );
        // Java: FAIL to an ended attempt changes nothing
        a.fail_attempt(at, 60).unwrap();
        assert_eq!(a.app(id).unwrap().failures, 1);
        // one attempt allowed: the application fails
        let mut b = apps(AppsConfig {
            max_attempts: 1,
            ..Default::default()
        });
        let (id, at) = running(&mut b);
        b.fail_attempt(at, 50).unwrap();
        let app = b.app(id).unwrap();
        assert_eq!(app.state, AppState::Failed);
        assert_eq!(
            app.diagnostics,
            format!(
                "Application {id} failed 1 times (global limit =1; local limit is =1) due to \
                 Attempt failed by user.. Failing the application."
            )
        );
    }

    #[test]
    fn an_application_runs_from_submission_to_finished() {
        let mut a = apps(AppsConfig::default());
        let (id, at) = running(&mut a);
        let (h1, h2) = (NodeKey::new("h1", 1), NodeKey::new("h2", 2));
        let k = keys();
        let req = AllocateRequestProto {
            ask: vec![ask(0, ANY, 4, 1000, true)],
            response_id: Some(0),
            ..Default::default()
        };
        let r0 = a.allocate(at, 1, &req, &k, 50).unwrap();
        assert_eq!(r0.response_id, Some(1));
        assert!(
            r0.allocated_containers.is_empty(),
            "allocation happens on node updates"
        );
        // h1 has 3 GB left after the AM, h2 4 GB: 3 + 1.
        update(&mut a, &h1, &[], 60);
        update(&mut a, &h2, &[], 61);
        assert_eq!(a.node(&h1).unwrap().used, Res::new(4096, 4));
        let req = AllocateRequestProto {
            response_id: Some(1),
            ..Default::default()
        };
        let r1 = a.allocate(at, 1, &req, &k, 70).unwrap();
        assert_eq!(r1.allocated_containers.len(), 4);
        assert_eq!(r1.nm_tokens.len(), 2, "one NMToken per node");
        let first = &r1.allocated_containers[0];
        let ct =
            Token::from_proto(first.container_token.clone().unwrap(), &Default::default()).unwrap();
        let cid = ContainerTokenIdentifier::parse(&ct.identifier).unwrap();
        assert_eq!(
            cid.container_id().unwrap().to_string(),
            format!("container_{TS}_0001_01_000002")
        );
        assert_eq!(ct.password, k.container.password(cid.bytes()).to_vec());
        // A repeat of the same request gets the same response; an older one is refused.
        assert_eq!(a.allocate(at, 1, &req, &k, 71).unwrap(), r1);
        let stale = AllocateRequestProto {
            response_id: Some(7),
            ..Default::default()
        };
        let e = a.allocate(at, 1, &stale, &k, 72).unwrap_err();
        assert_eq!(e.class, exc::INVALID_AM_REQUEST);
        assert_eq!(
            e.message,
            format!("Invalid responseId in AllocateRequest from application attempt: {at} expect responseId to be 2 but get 7")
        );
        // Completions: reported twice by the NM, delivered once.
        let ids: Vec<ContainerId> = r1
            .allocated_containers
            .iter()
            .map(|c| container_from_proto(c.id.as_ref().unwrap()).unwrap())
            .collect();
        let on_h2 = ids
            .iter()
            .copied()
            .find(|c| a.apps[&1].attempts[0].live[c].node == h2)
            .unwrap();
        update(&mut a, &h2, &[(on_h2, 7)], 80);
        update(&mut a, &h2, &[(on_h2, 7)], 81);
        assert_eq!(a.node(&h2).unwrap().used, Res::default());
        let req = AllocateRequestProto {
            response_id: Some(2),
            release: vec![ids[0].to_proto()],
            ..Default::default()
        };
        let r2 = a.allocate(at, 1, &req, &k, 90).unwrap();
        let got: Vec<(ContainerId, i32)> = r2
            .completed_container_statuses
            .iter()
            .map(|s| {
                (
                    container_from_proto(s.container_id.as_ref().unwrap()).unwrap(),
                    s.exit_status.unwrap(),
                )
            })
            .collect();
        assert_eq!(got, vec![(on_h2, 7), (ids[0], exit_status::ABORTED)]);
        // The AM pulled both completions: their acknowledgements go out; the released one is
        // also killed on its node.
        assert_eq!(
            a.take_cleanups(),
            vec![
                Cleanup::HoldAcks(id),
                Cleanup::Ack(on_h2),
                Cleanup::Ack(ids[0]),
                Cleanup::Container(ids[0])
            ]
        );
        let req = AllocateRequestProto {
            response_id: Some(3),
            ..Default::default()
        };
        assert!(a
            .allocate(at, 1, &req, &k, 91)
            .unwrap()
            .completed_container_statuses
            .is_empty());
        // Unregister: FINISHED to clients at once; the AM container's exit ends the attempt.
        let fin = FinishApplicationMasterRequestProto {
            final_application_status: Some(FinalApplicationStatusProto::AppSucceeded as i32),
            diagnostics: Some("ok".into()),
            ..Default::default()
        };
        assert!(a.finish_am(at, &fin, 100).unwrap());
        let rep = a.report(id).unwrap();
        assert_eq!(
            rep.yarn_application_state,
            Some(YarnApplicationStateProto::Finished as i32)
        );
        assert_eq!(
            rep.final_application_status,
            Some(FinalApplicationStatusProto::AppSucceeded as i32)
        );
        let am = a.apps[&1].attempts[0].am_container.unwrap();
        update(&mut a, &h1, &[(am, 0)], 110);
        assert_eq!(a.app(id).unwrap().state, AppState::Finished);
        let mut cl = a.take_cleanups();
        assert_eq!(
            cl[0],
            Cleanup::Ack(am),
            "the AM container's is acknowledged at once"
        );
        // The two containers the AM left running are killed; then the application cleanup.
        assert_eq!(
            cl[cl.len() - 2..],
            [Cleanup::App(id), Cleanup::ReleaseAcks(id)]
        );
        cl.truncate(cl.len() - 2);
        cl.remove(0);
        cl.sort_by_key(|c| match c {
            Cleanup::Container(c) => c.id,
            _ => -1,
        });
        assert_eq!(
            cl,
            vec![Cleanup::Container(ids[1]), Cleanup::Container(ids[2])]
        );
        assert!(!a.amrm.read().is_registered(&at));
        assert!(!a.gate().load(Ordering::Relaxed), "nothing in flight");
        assert_eq!(a.node(&h1).unwrap().used, Res::default());
        assert_eq!(a.node(&h2).unwrap().used, Res::default());
    }

    #[test]
    fn attempt_and_container_reports_follow_the_attempts() {
        use crate::reports;
        use hadoop_wire::pb::hadoop::yarn::YarnApplicationAttemptStateProto as Y;
        let mut a = apps(AppsConfig::default());
        let (id, at) = running(&mut a);
        let app = a.app(id).unwrap();
        let r = reports::attempt_report(&app.attempts[0]);
        assert_eq!(
            r.yarn_application_attempt_state,
            Some(Y::AppAttemptRunning as i32)
        );
        assert_eq!((r.start_time, r.finish_time), (Some(10), Some(0)));
        let am = app.attempts[0].am_container.unwrap();
        assert_eq!(r.am_container_id, Some(am.to_proto()));
        let live = reports::containers(&a, app, &app.attempts[0]);
        assert_eq!(live.len(), 1);
        let c = &live[0];
        assert_eq!(
            c.container_state,
            Some(ContainerStateProto::CRunning as i32)
        );
        assert_eq!(c.node_http_address.as_deref(), Some("http://h1:8042"));
        assert_eq!(
            c.log_url.as_deref(),
            Some(format!("http://h1:8042/node/containerlogs/{am}/alice").as_str())
        );
        assert_eq!((c.creation_time, c.finish_time), (Some(20), Some(0)));
        assert!(reports::container(&a, app, &app.attempts[0], am).is_ok());
        // The AM exits: its attempt FAILED at that time, without live containers (a completed
        // container is "not found", as the scheduler forgets it); the retry started then.
        update(&mut a, &NodeKey::new("h1", 1), &[(am, 3)], 100);
        let app = a.app(id).unwrap();
        let r = reports::attempt_report(&app.attempts[0]);
        assert_eq!(
            r.yarn_application_attempt_state,
            Some(Y::AppAttemptFailed as i32)
        );
        assert_eq!(r.finish_time, Some(100));
        assert!(reports::containers(&a, app, &app.attempts[0]).is_empty());
        let e = reports::container(&a, app, &app.attempts[0], am).unwrap_err();
        assert_eq!(e.class, reports::CONTAINER_NOT_FOUND);
        assert_eq!(
            e.message,
            format!("Container with id '{am}' doesn't exist in RM.")
        );
        assert_eq!(app.attempts[1].start_ms, 100);
        let second = AttemptId { attempt: 2, ..at };
        assert!(reports::attempt(app, second).is_ok());
        let third = AttemptId { attempt: 3, ..at };
        let e = reports::attempt(app, third).unwrap_err();
        assert_eq!(e.class, exc::ATTEMPT_NOT_FOUND);
        assert_eq!(
            e.message,
            format!("ApplicationAttempt with id '{third}' doesn't exist in RM.")
        );
    }

    #[test]
    fn a_failed_am_gets_another_attempt_then_the_application_fails() {
        let mut a = apps(AppsConfig::default());
        let (id, at) = running(&mut a);
        let h1 = NodeKey::new("h1", 1);
        let am = a.apps[&1].attempts[0].am_container.unwrap();
        update(&mut a, &h1, &[(am, 3)], 100);
        assert_eq!(a.apps[&1].attempts[0].state, AttemptState::Failed);
        assert!(a.apps[&1].attempts[0]
            .diagnostics
            .starts_with(&format!("AM Container for {at} exited with  exitCode: 3\n")));
        assert_eq!(a.app(id).unwrap().state, AppState::Accepted);
        // The new attempt's AM container was allocated on the same update.
        let l = a.take_launches();
        assert_eq!(l.len(), 1);
        assert_eq!(
            l[0].container.to_string(),
            format!("container_{TS}_0001_02_000001")
        );
        // An AM lost with its node does not count; an exit does.
        a.node_removed(&h1, 150);
        assert_eq!(a.app(id).unwrap().state, AppState::Accepted);
        assert_eq!(a.app(id).unwrap().attempts.len(), 3);
        a.node_added(&h1, "h1:8042".into(), Res::new(4096, 4));
        update(&mut a, &h1, &[], 160);
        let l = a.take_launches();
        a.am_launch_failed(l[0].attempt, "connection refused", 170);
        let app = a.app(id).unwrap();
        assert_eq!(app.state, AppState::Failed);
        assert!(
            app.diagnostics.starts_with(&format!(
                "Application {id} failed 2 times (global limit =2; local limit is =2) due to Error launching"
            )),
            "{}",
            app.diagnostics
        );
        assert!(a.take_cleanups().contains(&Cleanup::App(id)));
    }

    #[test]
    fn the_liveness_monitor_expires_a_silent_am() {
        let mut a = apps(AppsConfig {
            max_attempts: 1,
            am_expiry_ms: 1000,
            ..Default::default()
        });
        let (id, at) = running(&mut a);
        assert!(a.tick(1040).is_empty());
        assert_eq!(a.tick(1041), vec![at]);
        let app = a.app(id).unwrap();
        assert_eq!(app.state, AppState::Failed);
        assert!(app
            .diagnostics
            .contains(&format!("ApplicationMaster for attempt {at} timed out")));
    }

    #[test]
    fn bad_submissions_and_calls_get_javas_exceptions() {
        let mut a = apps(AppsConfig::default());
        let (id, _) = a.new_application().unwrap();
        let e = a.submit(ctx(id, 9000, "default"), "bob", 1).unwrap_err();
        assert_eq!(e.class, exc::INVALID_RESOURCE_REQUEST);
        assert_eq!(e.message, "Invalid resource request! Cannot allocate containers as requested resource is greater than maximum allowed allocation. Requested resource type=[memory-mb], Requested resource=<memory:9000, vCores:1>, maximum allowed allocation=<memory:8192, vCores:4>, please note that maximum allowed allocation is calculated by scheduler based on maximum resource of registered NodeManagers, which might be less than configured maximum allocation=<memory:8192, vCores:4>");
        let mut big = ctx(id, 512, "default");
        big.am_container_spec = Some(ContainerLaunchContextProto {
            command: vec!["x".repeat(5 << 20)],
            ..Default::default()
        });
        let e = a.submit(big, "bob", 1).unwrap_err();
        assert_eq!(e.class, exc::YARN);
        assert!(
            e.message.contains("over the limit of 4194304"),
            "{}",
            e.message
        );
        a.submit(ctx(id, 512, "nope"), "bob", 1).unwrap();
        let app = a.app(id).unwrap();
        assert_eq!(app.state, AppState::Failed);
        assert_eq!(
            app.diagnostics,
            format!("Application {id} submitted by user bob to unknown queue: nope")
        );
        let ghost = AppId::new(TS, 99);
        assert_eq!(a.report(ghost).unwrap_err().class, exc::APP_NOT_FOUND);
        let e = a
            .allocate(
                AttemptId {
                    app: ghost,
                    attempt: 1,
                },
                1,
                &AllocateRequestProto::default(),
                &keys(),
                1,
            )
            .unwrap_err();
        assert_eq!(e.class, exc::ATTEMPT_NOT_FOUND);
        // Allocate before registering.
        let (id2, _) = a.new_application().unwrap();
        a.submit(ctx(id2, 512, "default"), "bob", 1).unwrap();
        update(&mut a, &NodeKey::new("h2", 2), &[], 2);
        let at = a.take_launches()[0].attempt;
        let e = a
            .allocate(at, 1, &AllocateRequestProto::default(), &keys(), 3)
            .unwrap_err();
        assert_eq!(e.class, exc::AM_NOT_REGISTERED);
        // Kill.
        assert!(a.kill(id2, None, 4).unwrap());
        let app = a.app(id2).unwrap();
        assert_eq!(app.state, AppState::Killed);
        assert_eq!(app.diagnostics, "Application killed by user.");
        let cl = a.take_cleanups();
        assert!(cl.contains(&Cleanup::App(id2)));
        assert!(!a.amrm.read().is_registered(&at));
    }

    #[test]
    fn locality_node_then_rack_then_any_and_relax_locality_false() {
        let mut a = apps(AppsConfig::default());
        let (_, at) = running(&mut a);
        let (h1, h2) = (NodeKey::new("h1", 1), NodeKey::new("h2", 2));
        // Two containers wanted on h2 only (relaxLocality false at the rack and ANY).
        let req = AllocateRequestProto {
            ask: vec![
                ask(1, "h2", 2, 1024, true),
                ask(1, DEFAULT_RACK, 2, 1024, false),
                ask(1, ANY, 2, 1024, false),
            ],
            response_id: Some(0),
            ..Default::default()
        };
        a.allocate(at, 1, &req, &keys(), 50).unwrap();
        update(&mut a, &h1, &[], 60);
        assert_eq!(
            a.node(&h1).unwrap().used,
            Res::new(1024, 1),
            "nothing but the AM on h1"
        );
        update(&mut a, &h2, &[], 61);
        assert_eq!(a.node(&h2).unwrap().used, Res::new(2048, 2));
        let att = a.apps[&1].current().unwrap();
        assert_eq!(att.pending_containers(), 0);
    }

    #[test]
    fn asks_and_blacklists_are_capped() {
        let mut a = apps(AppsConfig {
            max_asks_per_attempt: 3,
            max_blacklist: 1,
            ..Default::default()
        });
        let (_, at) = running(&mut a);
        let many = AllocateRequestProto {
            ask: (0..4)
                .map(|i| ask(0, &format!("host{i}"), 1, 1024, true))
                .collect(),
            response_id: Some(0),
            ..Default::default()
        };
        let e = a.allocate(at, 1, &many, &keys(), 50).unwrap_err();
        assert_eq!(e.class, exc::INVALID_RESOURCE_REQUEST);
        let bl = AllocateRequestProto {
            response_id: Some(0),
            blacklist_request: Some(
                hadoop_wire::pb::hadoop::yarn::ResourceBlacklistRequestProto {
                    blacklist_additions: vec!["a".into(), "b".into()],
                    blacklist_removals: vec![],
                },
            ),
            ..Default::default()
        };
        let e = a.allocate(at, 1, &bl, &keys(), 51).unwrap_err();
        assert_eq!(e.class, exc::INVALID_BLACKLIST_REQUEST);
        // Refused requests changed nothing: responseId 0 is still expected.
        let ok = AllocateRequestProto {
            response_id: Some(0),
            ask: vec![ask(0, ANY, 1, 1024, true)],
            ..Default::default()
        };
        assert_eq!(
            a.allocate(at, 1, &ok, &keys(), 52).unwrap().response_id,
            Some(1)
        );
        // A blacklisted host gets nothing.
        let bl = AllocateRequestProto {
            response_id: Some(1),
            blacklist_request: Some(
                hadoop_wire::pb::hadoop::yarn::ResourceBlacklistRequestProto {
                    blacklist_additions: vec!["h2".into()],
                    blacklist_removals: vec![],
                },
            ),
            ..Default::default()
        };
        a.allocate(at, 1, &bl, &keys(), 53).unwrap();
        update(&mut a, &NodeKey::new("h2", 2), &[], 60);
        assert_eq!(a.node(&NodeKey::new("h2", 2)).unwrap().used, Res::default());
        update(&mut a, &NodeKey::new("h1", 1), &[], 61);
        assert_eq!(
            a.node(&NodeKey::new("h1", 1)).unwrap().used,
            Res::new(2048, 2)
        );
    }

    #[test]
    fn allocate_hands_out_the_rolled_amrm_token_until_the_am_uses_it() {
        let mut a = apps(AppsConfig::default());
        let (_, at) = running(&mut a);
        let old = a.amrm.read().current_key().key_id;
        let req = |rid: i32| AllocateRequestProto {
            response_id: Some(rid),
            ..Default::default()
        };
        assert!(a
            .allocate(at, old, &req(0), &keys(), 50)
            .unwrap()
            .am_rm_token
            .is_none());
        // Roll (the manager's interval is a day): a next key is pending.
        assert!(a
            .amrm
            .write()
            .tick(&mut SeededEntropy(9), 86_400_000)
            .unwrap());
        let next = a.amrm.read().next_key().unwrap().key_id;
        let r = a.allocate(at, old, &req(1), &keys(), 60).unwrap();
        let t = Token::from_proto(r.am_rm_token.clone().unwrap(), &Default::default()).unwrap();
        let id = hadoop_wire::token::AmrmTokenIdentifier::parse(&t.identifier).unwrap();
        assert_eq!((id.attempt_id(), id.key_id()), (Some(at), next));
        // Once the AM authenticates with the new token, no more.
        assert!(a
            .allocate(at, next, &req(2), &keys(), 70)
            .unwrap()
            .am_rm_token
            .is_none());
    }

    #[test]
    fn releases_of_other_attempts_and_a_wildcard_blacklist_are_refused() {
        let mut a = apps(AppsConfig::default());
        let (id, at) = running(&mut a);
        let other = ContainerId {
            app: id,
            attempt: 2,
            id: 5,
        };
        let req = AllocateRequestProto {
            response_id: Some(0),
            release: vec![other.to_proto()],
            ..Default::default()
        };
        let e = a.allocate(at, 1, &req, &keys(), 50).unwrap_err();
        assert_eq!(e.class, exc::INVALID_CONTAINER_RELEASE);
        assert_eq!(
            e.message,
            format!("Cannot release container : {other} not belonging to this application attempt : {at}")
        );
        let req = AllocateRequestProto {
            response_id: Some(0),
            blacklist_request: Some(
                hadoop_wire::pb::hadoop::yarn::ResourceBlacklistRequestProto {
                    blacklist_additions: vec![ANY.into()],
                    blacklist_removals: vec![],
                },
            ),
            ..Default::default()
        };
        let e = a.allocate(at, 1, &req, &keys(), 51).unwrap_err();
        assert_eq!(
            (e.class, e.message.as_str()),
            (
                exc::INVALID_BLACKLIST_REQUEST,
                "Cannot add * to the blacklist!"
            )
        );
    }

    #[test]
    fn containers_never_started_expire_and_started_ones_do_not() {
        let mut a = apps(AppsConfig {
            container_token_expiry_ms: 1000,
            am_expiry_ms: 1_000_000,
            ..Default::default()
        });
        let (_, at) = running(&mut a);
        let h2 = NodeKey::new("h2", 2);
        let req = AllocateRequestProto {
            ask: vec![ask(0, ANY, 2, 1024, true)],
            response_id: Some(0),
            ..Default::default()
        };
        a.allocate(at, 1, &req, &keys(), 50).unwrap();
        update(&mut a, &h2, &[], 100);
        let r = a
            .allocate(
                at,
                1,
                &AllocateRequestProto {
                    response_id: Some(1),
                    ..Default::default()
                },
                &keys(),
                110,
            )
            .unwrap();
        let ids: Vec<ContainerId> = r
            .allocated_containers
            .iter()
            .map(|c| container_from_proto(c.id.as_ref().unwrap()).unwrap())
            .collect();
        assert_eq!(ids.len(), 2);
        // The NM reports the first RUNNING; the second never starts.
        let running = NodeStatusProto {
            node_id: Some(h2.to_proto()),
            response_id: Some(2),
            containers_statuses: vec![ContainerStatusProto {
                container_id: Some(ids[0].to_proto()),
                state: Some(ContainerStateProto::CRunning as i32),
                ..Default::default()
            }],
            ..Default::default()
        }
        .encode_to_vec();
        a.node_update("h2", 2, NodeStatusView::new(&running), 200);
        a.take_cleanups();
        a.tick(1100);
        assert_eq!(a.node(&h2).unwrap().used, Res::new(2048, 2), "not yet");
        a.tick(1101);
        assert_eq!(a.node(&h2).unwrap().used, Res::new(1024, 1));
        assert_eq!(a.take_cleanups(), vec![Cleanup::Container(ids[1])]);
        let r = a
            .allocate(
                at,
                1,
                &AllocateRequestProto {
                    response_id: Some(2),
                    ..Default::default()
                },
                &keys(),
                1200,
            )
            .unwrap();
        assert_eq!(r.completed_container_statuses.len(), 1);
        let st = &r.completed_container_statuses[0];
        assert_eq!(st.container_id, Some(ids[1].to_proto()));
        assert_eq!(st.exit_status, Some(exit_status::ABORTED));
        assert_eq!(
            st.diagnostics.as_deref(),
            Some("Container expired since it was unused")
        );
    }

    #[test]
    fn rack_local_and_a_fresh_nm_token_after_the_key_rolled() {
        let mut a = apps(AppsConfig::default());
        let (_, at) = running(&mut a);
        let h1 = NodeKey::new("h1", 1);
        // Wanted on h3 (not in the cluster) or its rack: rack-local on h1.
        let req = AllocateRequestProto {
            ask: vec![
                ask(0, "h3", 1, 1024, true),
                ask(0, DEFAULT_RACK, 1, 1024, true),
                ask(0, ANY, 1, 1024, true),
            ],
            response_id: Some(0),
            ..Default::default()
        };
        a.allocate(at, 1, &req, &keys(), 50).unwrap();
        update(&mut a, &h1, &[], 60);
        let att = a.apps[&1].current().unwrap();
        assert_eq!(att.pending_containers(), 0);
        assert_eq!(att.asks[&0][DEFAULT_RACK].num, 0);
        assert_eq!(
            att.asks[&0]["h3"].num, 1,
            "the node-level count is not decremented"
        );
        let r = a
            .allocate(
                at,
                1,
                &AllocateRequestProto {
                    response_id: Some(1),
                    ..Default::default()
                },
                &keys(),
                70,
            )
            .unwrap();
        assert_eq!(r.allocated_containers.len(), 1);
        assert_eq!(r.nm_tokens.len(), 1);
        // Another container on h1: no new NMToken with the same key, a new one after a roll.
        let more = AllocateRequestProto {
            response_id: Some(2),
            ask: vec![ask(0, ANY, 2, 1024, true)],
            ..Default::default()
        };
        a.allocate(at, 1, &more, &keys(), 80).unwrap();
        update(&mut a, &h1, &[], 90);
        let r = a
            .allocate(
                at,
                1,
                &AllocateRequestProto {
                    response_id: Some(3),
                    ..Default::default()
                },
                &keys(),
                100,
            )
            .unwrap();
        assert_eq!(r.allocated_containers.len(), 2);
        assert!(r.nm_tokens.is_empty());
        let h2 = NodeKey::new("h2", 2);
        let one = |rid: i32| AllocateRequestProto {
            response_id: Some(rid),
            ask: vec![ask(0, ANY, 1, 1024, true)],
            ..Default::default()
        };
        a.allocate(at, 1, &one(4), &keys(), 110).unwrap();
        update(&mut a, &h2, &[], 120);
        let r = a.allocate(at, 1, &one(5), &keys(), 130).unwrap();
        assert_eq!(
            (r.allocated_containers.len(), r.nm_tokens.len()),
            (1, 1),
            "a new node"
        );
        update(&mut a, &h2, &[], 140);
        let mut rolled = keys();
        rolled.nm = MasterKey::new(3, vec![3; 8]).unwrap();
        let r = a
            .allocate(
                at,
                1,
                &AllocateRequestProto {
                    response_id: Some(6),
                    ..Default::default()
                },
                &rolled,
                150,
            )
            .unwrap();
        assert_eq!(
            (r.allocated_containers.len(), r.nm_tokens.len()),
            (1, 1),
            "same node, new key"
        );
        let t =
            Token::from_proto(r.nm_tokens[0].token.clone().unwrap(), &Default::default()).unwrap();
        let id = hadoop_wire::token::NmTokenIdentifier::parse(&t.identifier).unwrap();
        assert_eq!(id.key_id(), 3);
    }

    #[test]
    fn a_node_that_registers_again_loses_what_it_did_not_report_complete() {
        let mut a = apps(AppsConfig::default());
        let (id, at) = running(&mut a);
        let h2 = NodeKey::new("h2", 2);
        let req = AllocateRequestProto {
            ask: vec![ask(0, ANY, 2, 1024, true)],
            response_id: Some(0),
            ..Default::default()
        };
        a.allocate(at, 1, &req, &keys(), 50).unwrap();
        update(&mut a, &h2, &[], 60);
        let r = a
            .allocate(
                at,
                1,
                &AllocateRequestProto {
                    response_id: Some(1),
                    ..Default::default()
                },
                &keys(),
                70,
            )
            .unwrap();
        let ids: Vec<ContainerId> = r
            .allocated_containers
            .iter()
            .map(|c| container_from_proto(c.id.as_ref().unwrap()).unwrap())
            .collect();
        a.take_cleanups();
        // h2 re-registers reporting the first complete (exit 4); the second is lost.
        a.node_registered(
            &h2,
            "h2:8042".into(),
            Res::new(4096, 4),
            &[Reported {
                id: ids[0],
                state: ContainerStateProto::CComplete,
                exit_status: 4,
                diagnostics: "done".into(),
                res: Res::new(1024, 1),
                priority: 0,
            }],
            80,
        );
        assert_eq!(a.take_cleanups(), vec![Cleanup::Container(ids[1])]);
        assert_eq!(a.node(&h2).unwrap().used, Res::default());
        assert!(a.node(&h2).unwrap().active);
        let r = a
            .allocate(
                at,
                1,
                &AllocateRequestProto {
                    response_id: Some(2),
                    ..Default::default()
                },
                &keys(),
                90,
            )
            .unwrap();
        let got: Vec<(i32, &str)> = r
            .completed_container_statuses
            .iter()
            .map(|s| (s.exit_status.unwrap(), s.diagnostics.as_deref().unwrap()))
            .collect();
        assert_eq!(
            got,
            vec![
                (4, "done"),
                (exit_status::ABORTED, "Container released on a *lost* node")
            ]
        );
        assert_eq!(a.app(id).unwrap().state, AppState::Running);
    }

    fn running_report(id: ContainerId, state: ContainerStateProto, exit: i32) -> Reported {
        Reported {
            id,
            state,
            exit_status: exit,
            diagnostics: if state == ContainerStateProto::CComplete {
                "done".into()
            } else {
                String::new()
            },
            res: Res::new(1024, 1),
            priority: 0,
        }
    }

    #[test]
    fn a_finished_applications_acls_survive_compaction_and_recovery() {
        use crate::app_acls::AppAcls;
        use crate::state_store::Recovered;
        use hadoop_wire::pb::hadoop::yarn::{ApplicationAccessTypeProto, ApplicationAclMapProto};
        let m =
            AmrmTokenSecretManager::new(&mut SeededEntropy(7), 0, 86_400_000, 1000, 100).unwrap();
        let amrm = Arc::new(AmrmTokenSecrets::new(m));
        let mut a = Apps::new(AppsConfig::default(), TS, amrm.clone());
        a.enable_store(0);
        let (id, _) = a.new_application().unwrap();
        let mut c = ctx(id, 512, "default");
        let entries = vec![
            ApplicationAclMapProto {
                access_type: Some(ApplicationAccessTypeProto::AppaccessViewApp as i32),
                acl: Some("bob".into()),
            },
            ApplicationAclMapProto {
                access_type: Some(ApplicationAccessTypeProto::AppaccessModifyApp as i32),
                acl: Some(" ops".into()),
            },
        ];
        c.am_container_spec.as_mut().unwrap().application_ac_ls = entries.clone();
        a.submit(c, "alice", 10).unwrap();
        a.kill(id, None, 20).unwrap();
        let want = AppAcls::from_protos(&entries);
        assert_eq!(a.app(id).unwrap().acls, want);
        // Compaction writes the kept applications anew: the finished one has no launch
        // context left, its ACLs are written all the same.
        let mut rec = Recovered::default();
        for op in a.store_snapshot() {
            rec.apply(op);
        }
        let mut b = Apps::new(AppsConfig::default(), TS + 1, amrm);
        b.enable_store(1);
        assert_eq!(b.recover(&rec, 30), (0, 1));
        let app = b.app(id).unwrap();
        assert_eq!(app.state, AppState::Killed);
        assert_eq!(app.acls, want);

        // The reduced report keeps the identity, states and times, and blanks the rest.
        let full = report(app);
        let r = reduced_report(app);
        assert_eq!(r.application_id, full.application_id);
        assert_eq!(r.user.as_deref(), Some("alice"));
        assert_eq!(r.yarn_application_state, full.yarn_application_state);
        assert_eq!(r.final_application_status, full.final_application_status);
        assert_eq!(r.start_time, full.start_time);
        assert_eq!(r.finish_time, full.finish_time);
        assert_eq!(r.diagnostics.as_deref(), Some("N/A"));
        assert_ne!(full.diagnostics.as_deref(), Some("N/A"));
        assert_eq!(r.host.as_deref(), Some("N/A"));
        assert_eq!(r.rpc_port, Some(-1));
        assert_eq!(r.progress, Some(0.0));
        assert_eq!(
            r.current_application_attempt_id.unwrap().attempt_id,
            Some(-1)
        );
        let u = r.app_resource_usage.unwrap();
        assert_eq!(u.num_used_containers, Some(-1));
        assert_eq!(u.used_resources.unwrap().memory, Some(-1));
    }

    #[test]
    fn a_running_application_is_recovered_and_its_containers_come_back_with_their_nodes() {
        use crate::state_store::Recovered;
        let m =
            AmrmTokenSecretManager::new(&mut SeededEntropy(7), 0, 86_400_000, 1000, 100).unwrap();
        let amrm = Arc::new(AmrmTokenSecrets::new(m));
        let heartbeat_only = AppsConfig {
            immediate_placement: false,
            ..AppsConfig::default()
        };
        let mut a = Apps::new(heartbeat_only.clone(), TS, amrm.clone());
        a.enable_store(0);
        a.node_added(&NodeKey::new("h1", 1), "h1:8042".into(), Res::new(4096, 4));
        a.node_added(&NodeKey::new("h2", 2), "h2:8042".into(), Res::new(4096, 4));
        let (id, at) = running(&mut a);
        let h1 = NodeKey::new("h1", 1);
        let h2 = NodeKey::new("h2", 2);
        let req = AllocateRequestProto {
            ask: vec![ask(0, ANY, 3, 1024, true)],
            response_id: Some(0),
            ..Default::default()
        };
        a.allocate(at, 1, &req, &keys(), 50).unwrap();
        update(&mut a, &h2, &[], 60);
        let r = a
            .allocate(
                at,
                1,
                &AllocateRequestProto {
                    response_id: Some(1),
                    ..Default::default()
                },
                &keys(),
                70,
            )
            .unwrap();
        let tasks: Vec<ContainerId> = r
            .allocated_containers
            .iter()
            .map(|c| container_from_proto(c.id.as_ref().unwrap()).unwrap())
            .collect();
        assert_eq!(tasks.len(), 3);
        // A second application finished before the restart.
        let (done_id, _) = a.new_application().unwrap();
        a.submit(ctx(done_id, 512, "default"), "bob", 75).unwrap();
        a.kill(done_id, None, 76).unwrap();
        // What the store got (the AM container's record comes from the launch, written by
        // the IO side: add it as it would).
        let mut rec = Recovered::default();
        for op in a.take_store_ops() {
            rec.apply(op);
        }
        let am = a.app(id).unwrap().current().unwrap().am_container.unwrap();
        rec.apply(Rec::AmAllocated(crate::state_store::AmAllocatedRec {
            attempt: attempt_to_proto(&at),
            container: am.id,
            host: "h1".into(),
            port: 1,
            allocated_ms: 20,
        }));
        rec.records = 9;
        drop(a);

        // The new RM: another cluster timestamp, epoch 1, the same AMRM secrets.
        let mut b = Apps::new(heartbeat_only, TS + 1000, amrm.clone());
        b.enable_store(1);
        assert_eq!(b.recover(&rec, 100), (1, 1));
        assert_eq!(b.app(done_id).unwrap().state, AppState::Killed);
        assert_eq!(b.app(id).unwrap().state, AppState::Accepted);
        assert_eq!(
            b.app(id).unwrap().current().unwrap().state,
            AttemptState::Launched
        );
        assert!(amrm.read().is_registered(&at));
        let cleanups = b.take_cleanups();
        assert!(cleanups.contains(&Cleanup::HoldAcks(id)), "{cleanups:?}");
        assert!(cleanups.contains(&Cleanup::App(done_id)), "{cleanups:?}");
        // New ids do not collide with recovered ones.
        let (next, _) = b.new_application().unwrap();
        assert_eq!(next.id, done_id.id + 1);
        // The AM's allocate before it re-registers: Java's re-register signal.
        let e = b
            .allocate(
                at,
                1,
                &AllocateRequestProto {
                    response_id: Some(2),
                    ..Default::default()
                },
                &keys(),
                110,
            )
            .unwrap_err();
        assert_eq!(e.class, exc::AM_NOT_REGISTERED);
        // h1 comes back with the AM container; h2 with one task running, one completed
        // while the RM was away, and without the third.
        b.node_registered(
            &h1,
            "h1:8042".into(),
            Res::new(4096, 4),
            &[running_report(am, ContainerStateProto::CRunning, 0)],
            120,
        );
        assert_eq!(b.node(&h1).unwrap().used, Res::new(1024, 1));
        b.node_registered(
            &h2,
            "h2:8042".into(),
            Res::new(4096, 4),
            &[
                running_report(tasks[0], ContainerStateProto::CRunning, 0),
                running_report(tasks[1], ContainerStateProto::CComplete, 3),
            ],
            130,
        );
        assert_eq!(b.node(&h2).unwrap().used, Res::new(1024, 1));
        b.register_am(at, &RegisterApplicationMasterRequestProto::default(), 140)
            .unwrap();
        let r = b
            .allocate(
                at,
                1,
                &AllocateRequestProto {
                    response_id: Some(0),
                    ask: vec![ask(0, ANY, 1, 1024, true)],
                    release: vec![tasks[0].to_proto()],
                    ..Default::default()
                },
                &keys(),
                150,
            )
            .unwrap();
        let got: Vec<(ContainerId, i32)> = r
            .completed_container_statuses
            .iter()
            .map(|s| {
                (
                    container_from_proto(s.container_id.as_ref().unwrap()).unwrap(),
                    s.exit_status.unwrap(),
                )
            })
            .collect();
        assert!(got.contains(&(tasks[1], 3)), "{got:?}");
        // The third one no node reported: the RM never knew it after the restart (as Java's,
        // which learns a container only from its NodeManager).
        assert!(!got.iter().any(|(c, _)| *c == tasks[2]), "{got:?}");
        assert!(
            got.contains(&(tasks[0], exit_status::ABORTED)),
            "released: {got:?}"
        );
        assert_eq!(b.node(&h2).unwrap().used, Res::default());
        // The replacement carries the new epoch.
        update(&mut b, &h2, &[], 160);
        let r = b
            .allocate(
                at,
                1,
                &AllocateRequestProto {
                    response_id: Some(1),
                    ..Default::default()
                },
                &keys(),
                170,
            )
            .unwrap();
        let new = container_from_proto(r.allocated_containers[0].id.as_ref().unwrap()).unwrap();
        assert_eq!(new.epoch(), 1);
        assert!(new.to_string().starts_with("container_e01_"), "{new}");
        assert_eq!(b.app(id).unwrap().state, AppState::Running);
    }

    #[test]
    fn a_failed_last_attempt_is_retried_and_an_unallocated_one_scheduled_after_recovery() {
        use crate::state_store::Recovered;
        let mut a = apps(AppsConfig::default());
        a.enable_store(0);
        let (id, at) = running(&mut a);
        let am = a.app(id).unwrap().current().unwrap().am_container.unwrap();
        update(&mut a, &NodeKey::new("h1", 1), &[(am, 1)], 200);
        assert_eq!(a.app(id).unwrap().attempts.len(), 2);
        let (id2, _) = a.new_application().unwrap();
        a.submit(ctx(id2, 512, "default"), "bob", 210).unwrap();
        let mut rec = Recovered::default();
        for op in a.take_store_ops() {
            rec.apply(op);
        }
        rec.records = 5;
        let _ = at;
        let mut b = apps(AppsConfig::default());
        b.enable_store(1);
        assert_eq!(b.recover(&rec, 300), (2, 0));
        let app = b.app(id).unwrap();
        assert_eq!(app.attempts.len(), 2);
        assert_eq!(app.attempts[0].state, AttemptState::Failed);
        assert_eq!(app.current().unwrap().state, AttemptState::Scheduled);
        assert_eq!(app.failures, 1);
        assert_eq!(
            b.app(id2).unwrap().current().unwrap().state,
            AttemptState::Scheduled
        );
        // Both get AM containers on the next node update.
        update(&mut b, &NodeKey::new("h1", 1), &[], 310);
        assert_eq!(b.take_launches().len(), 2);
    }

    #[test]
    fn immediate_placement_is_a_config_key_on_by_default() {
        let on = AppsConfig::from_conf(&conf::Configuration::new()).unwrap();
        assert!(on.immediate_placement);
        assert_eq!(on, AppsConfig::default());
        let mut c = conf::Configuration::new();
        c.set(crate::config::IMMEDIATE_PLACEMENT, "false");
        assert!(!AppsConfig::from_conf(&c).unwrap().immediate_placement);
        c.set(crate::config::IMMEDIATE_PLACEMENT, "sometimes");
        assert!(AppsConfig::from_conf(&c).is_err());
    }

    #[test]
    fn io_backends_per_server() {
        let d = AppsConfig::from_conf(&conf::Configuration::new()).unwrap();
        assert_eq!(
            (d.client_io, d.scheduler_io),
            (BackendChoice::Auto, BackendChoice::Auto)
        );
        let mut c = conf::Configuration::new();
        c.set(crate::config::CLIENT_IO_BACKEND, "epoll");
        c.set(crate::config::SCHEDULER_IO_BACKEND, "io_uring");
        let got = AppsConfig::from_conf(&c).unwrap();
        assert_eq!(
            (got.client_io, got.scheduler_io),
            (BackendChoice::Epoll, BackendChoice::Uring)
        );
        c.set(crate::config::SCHEDULER_IO_BACKEND, "kqueue");
        let e = AppsConfig::from_conf(&c).unwrap_err().to_string();
        assert!(e.contains("hotpath.rm.scheduler.io-backend"), "{e}");
    }

    #[test]
    fn heartbeat_only_mode_places_on_node_updates_only() {
        let mut a = apps(AppsConfig::default());
        assert!(!a.config().immediate_placement);
        let (id, _) = a.new_application().unwrap();
        a.submit(ctx(id, 512, "default"), "alice", 10).unwrap();
        a.place_unplaced(11);
        assert!(a.take_launches().is_empty(), "no heartbeat yet");
        let cur = |a: &Apps| a.app(id).unwrap().current().unwrap().state;
        assert_eq!(cur(&a), AttemptState::Scheduled);
        update(&mut a, &NodeKey::new("h2", 2), &[], 20);
        let l = a.take_launches();
        assert_eq!(l.len(), 1);
        assert_eq!(
            l[0].node,
            NodeKey::new("h2", 2),
            "the node that heartbeated"
        );
        assert_eq!(cur(&a), AttemptState::Allocated);
    }

    #[test]
    fn immediate_placement_at_submit_retry_and_allocate() {
        let mut a = apps_placing_now(AppsConfig::default());
        let (h1, h2) = (NodeKey::new("h1", 1), NodeKey::new("h2", 2));
        // h1 has less room: the AM goes to h2, the node with the most free memory.
        a.node_added(&h1, "h1:8042".into(), Res::new(2048, 4));
        let (id, _) = a.new_application().unwrap();
        a.submit(ctx(id, 1024, "default"), "alice", 10).unwrap();
        let l = a.take_launches();
        assert_eq!(
            l.len(),
            1,
            "placed in the submit call, before any heartbeat"
        );
        assert_eq!(l[0].node, h2);
        let at = l[0].attempt;
        assert_eq!(a.node(&h2).unwrap().used, Res::new(1024, 1));
        a.am_launched(at, 20);
        a.register_am(at, &RegisterApplicationMasterRequestProto::default(), 30)
            .unwrap();

        // New asks are placed within the allocate that made them: 3 GB left on h2, 2 on h1.
        let k = keys();
        let req = AllocateRequestProto {
            ask: vec![ask(0, ANY, 6, 1024, true)],
            response_id: Some(0),
            ..Default::default()
        };
        let r0 = a.allocate(at, 1, &req, &k, 40).unwrap();
        assert_eq!(r0.allocated_containers.len(), 5);
        assert_eq!(r0.nm_tokens.len(), 2);
        let on = |n: &NodeKey| {
            r0.allocated_containers
                .iter()
                .filter(|c| c.node_id.as_ref() == Some(&n.to_proto()))
                .count()
        };
        assert_eq!((on(&h2), on(&h1)), (3, 2));
        assert_eq!(
            r0.limit,
            Some(Res::new(0, 2).to_proto()),
            "headroom after the placement"
        );
        assert_eq!(
            a.app(id).unwrap().current().unwrap().pending_containers(),
            1
        );
        // A call without asks places nothing (the rest waits for room on a node update).
        let req = AllocateRequestProto {
            response_id: Some(1),
            ..Default::default()
        };
        assert!(a
            .allocate(at, 1, &req, &k, 50)
            .unwrap()
            .allocated_containers
            .is_empty());
        let first = container_from_proto(r0.allocated_containers[0].id.as_ref().unwrap()).unwrap();
        let node_of_first = a.apps[&1].attempts[0].live[&first].node.clone();
        update(&mut a, &node_of_first, &[(first, 0)], 60);
        let req = AllocateRequestProto {
            response_id: Some(2),
            ..Default::default()
        };
        assert_eq!(
            a.allocate(at, 1, &req, &k, 70)
                .unwrap()
                .allocated_containers
                .len(),
            1,
            "the last one on the node update that freed room"
        );

        assert_eq!(
            a.app(id).unwrap().current().unwrap().pending_containers(),
            0
        );
    }

    #[test]
    fn a_retried_attempt_is_placed_at_once_or_on_a_heartbeat() {
        for immediate in [true, false] {
            let mut a = apps_placing_now(AppsConfig {
                immediate_placement: immediate,
                ..AppsConfig::default()
            });
            let (id, _) = a.new_application().unwrap();
            a.submit(ctx(id, 512, "default"), "alice", 10).unwrap();
            if !immediate {
                update(&mut a, &NodeKey::new("h1", 1), &[], 15);
            }
            let l = a.take_launches();
            assert_eq!(l.len(), 1);
            // The launch fails: a second attempt, SCHEDULED.
            a.am_launch_failed(l[0].attempt, "connection refused", 20);
            let app = a.app(id).unwrap();
            assert_eq!(app.attempts.len(), 2);
            assert_eq!(app.current().unwrap().state, AttemptState::Scheduled);
            // What `AppsRt::with` calls after every change.
            a.place_unplaced(21);
            let l = a.take_launches();
            if immediate {
                assert_eq!(l.len(), 1, "placed without a heartbeat");
                assert_eq!(l[0].attempt.attempt, 2);
            } else {
                assert!(l.is_empty());
                update(&mut a, &NodeKey::new("h2", 2), &[], 30);
                assert_eq!(a.take_launches().len(), 1, "placed on the heartbeat");
            }
            assert_eq!(
                a.app(id).unwrap().current().unwrap().state,
                AttemptState::Allocated
            );
        }
    }

    #[test]
    fn an_am_that_fits_nowhere_now_waits_for_a_node_update() {
        let mut a = apps_placing_now(AppsConfig::default());
        let submit = |a: &mut Apps, mb: i64| {
            let (id, _) = a.new_application().unwrap();
            a.submit(ctx(id, mb, "default"), "alice", 10).unwrap();
            (id, a.take_launches())
        };
        // 3 GB on one node, 2 GB on the other (the one with more room), then 3 GB fits nowhere.
        let (first, l1) = submit(&mut a, 3072);
        let (_, l2) = submit(&mut a, 2048);
        assert_eq!((l1.len(), l2.len()), (1, 1));
        assert_ne!(l1[0].node, l2[0].node);
        let (third, l3) = submit(&mut a, 3072);
        assert!(l3.is_empty());
        let state = |a: &Apps| a.app(third).unwrap().current().unwrap().state;
        assert_eq!(state(&a), AttemptState::Scheduled);
        // The first application ends: its node has room again, used on its next heartbeat.
        a.kill(first, None, 20).unwrap();
        a.place_unplaced(21);
        assert_eq!(state(&a), AttemptState::Scheduled, "a kill retries nothing");
        update(&mut a, &l1[0].node, &[], 30);
        let l = a.take_launches();
        assert_eq!(l.len(), 1);
        assert_eq!((l[0].attempt.app, &l[0].node), (third, &l1[0].node));
    }

    #[derive(Debug, Clone)]
    enum NodeEvent {
        /// (Re-)registration with a capability (0 to 8 GB and vcores), reporting one handed-out
        /// container complete or running.
        Register(usize, i64, i64, Option<(usize, bool)>),
        /// Lost, unhealthy, decommissioned or shut down.
        Remove(usize),
        /// A heartbeat reporting a handed-out container complete.
        Update(usize, Option<usize>),
        Submit,
        /// The launched AMs start and register.
        Launch,
        /// An attempt asks for containers and releases one.
        Allocate(usize, i32, Option<usize>),
        Kill(usize),
        Tick(u64),
    }

    fn node_event() -> impl proptest::strategy::Strategy<Value = NodeEvent> {
        use proptest::prelude::*;
        let pick = proptest::option::of(0..16usize);
        prop_oneof![
            (
                0..6usize,
                0..5i64,
                0..5i64,
                proptest::option::of((0..16usize, any::<bool>()))
            )
                .prop_map(|(n, m, v, r)| NodeEvent::Register(n, m * 2048, v * 2, r)),
            (0..6usize).prop_map(NodeEvent::Remove),
            (0..6usize, pick.clone()).prop_map(|(n, c)| NodeEvent::Update(n, c)),
            Just(NodeEvent::Submit),
            Just(NodeEvent::Launch),
            (0..4usize, 0..6i32, pick).prop_map(|(a, n, c)| NodeEvent::Allocate(a, n, c)),
            (0..4usize).prop_map(NodeEvent::Kill),
            (0..700_000u64).prop_map(NodeEvent::Tick),
        ]
    }

    proptest::proptest! {
        /// The running cluster totals (active nodes, capacity, use) equal a full recount after
        /// any sequence of node and application events.
        #[test]
        fn cluster_totals_match_a_recount_after_any_node_events(
            immediate in proptest::bool::ANY,
            events in proptest::collection::vec(node_event(), 1..60),
        ) {
            let m = AmrmTokenSecretManager::new(&mut SeededEntropy(7), 0, 86_400_000, 1000, 100)
                .unwrap();
            let cfg = AppsConfig { immediate_placement: immediate, ..AppsConfig::default() };
            let mut a = Apps::new(cfg, TS, Arc::new(AmrmTokenSecrets::new(m)));
            let node = |i: usize| NodeKey::new(&format!("h{i}"), 1);
            let (mut apps, mut attempts, mut handed) = (Vec::new(), Vec::new(), Vec::new());
            let mut now = 10;
            for e in events {
                now += 10;
                match e {
                    NodeEvent::Register(i, mb, vc, r) => {
                        let reported: Vec<Reported> = r
                            .and_then(|(k, done)| handed.get(k).map(|&c| (c, done)))
                            .map(|(c, done)| Reported {
                                id: c,
                                state: if done {
                                    ContainerStateProto::CComplete
                                } else {
                                    ContainerStateProto::CRunning
                                },
                                exit_status: 0,
                                diagnostics: String::new(),
                                res: Res::new(1024, 1),
                                priority: 0,
                            })
                            .into_iter()
                            .collect();
                        let key = node(i);
                        a.node_registered(&key, format!("h{i}:8042"), Res::new(mb, vc), &reported, now);
                    }
                    NodeEvent::Remove(i) => a.node_removed(&node(i), now),
                    NodeEvent::Update(i, c) => {
                        let done: Vec<_> = c.and_then(|k| handed.get(k)).map(|&c| (c, 0)).into_iter().collect();
                        update(&mut a, &node(i), &done, now);
                    }
                    NodeEvent::Submit => {
                        if let Ok((id, _)) = a.new_application() {
                            if a.submit(ctx(id, 512, "default"), "alice", now).is_ok() {
                                apps.push(id);
                            }
                        }
                        a.place_unplaced(now);
                    }
                    NodeEvent::Launch => {
                        for l in a.take_launches() {
                            handed.push(l.container);
                            a.am_launched(l.attempt, now);
                            if a.register_am(l.attempt, &RegisterApplicationMasterRequestProto::default(), now).is_ok() {
                                attempts.push((l.attempt, 0));
                            }
                        }
                    }
                    NodeEvent::Allocate(k, n, c) => {
                        if let Some((at, rid)) = attempts.get_mut(k) {
                            let req = AllocateRequestProto {
                                ask: vec![ask(1, ANY, n, 1024, true)],
                                release: c.and_then(|k| handed.get(k)).map(|c| c.to_proto()).into_iter().collect(),
                                response_id: Some(*rid),
                                ..Default::default()
                            };
                            if let Ok(r) = a.allocate(*at, 1, &req, &keys(), now) {
                                *rid = r.response_id.unwrap_or(0);
                                let active = a.nodes.values().filter(|n| n.active).count();
                                proptest::prop_assert_eq!(r.num_cluster_nodes, Some(active as i32));
                                for c in &r.allocated_containers {
                                    let id = c.id.as_ref().and_then(container_from_proto).unwrap();
                                    handed.push(id);
                                }
                            }
                        }
                    }
                    NodeEvent::Kill(k) => {
                        if let Some(&id) = apps.get(k) {
                            let _ = a.kill(id, None, now);
                        }
                    }
                    NodeEvent::Tick(dt) => {
                        now += dt;
                        a.tick(now);
                    }
                }
                proptest::prop_assert_eq!(a.nodes.totals, a.nodes.recount());
                let (total, used) = a.nodes.values().filter(|n| n.active).fold(
                    (Res::default(), Res::default()),
                    |(t, u), n| (t.plus(n.total), u.plus(n.used)),
                );
                proptest::prop_assert_eq!(a.cluster_resources(), (total, used));
                proptest::prop_assert_eq!(a.active_nodes(), a.nodes.values().filter(|n| n.active).count());
            }
        }
    }
}
