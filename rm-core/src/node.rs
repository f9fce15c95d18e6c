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
//! # Applications (trap 2)
//!
//! Which applications the RM knows depends on the shard's [`UnknownApps`] rule.
//!
//! - **Adopt** (the default; the RM without its application protocols, whose every application
//!   is "unknown" in Java's sense, so Java's rule would kill every container): an application
//!   is adopted as running on a node when one of its containers is first reported there.
//!   `hotpath rm finish-app` marks it finished: each node it runs on gets it in
//!   `applications_to_cleanup` once.
//! - **Clean** (the RM running applications): an application is known from its submission (or
//!   recovery) on ([`Global::LiveApp`](crate::mailbox::Global)), and Java's rule applies to the
//!   others, as `RMNodeImpl.handleContainerStatus` / `handleRunningAppOnNode` and the
//!   scheduler's `containerLaunchedOnNode` apply it: the first status of an unknown application
//!   in a status update puts the application in `applications_to_cleanup` (every update that
//!   reports it), and if that status is a RUNNING container not met before, the container goes
//!   to `containers_to_cleanup` once; further statuses of that application in the same update
//!   are skipped, as Java skips them. At registration (the container statuses the NodeManager
//!   re-reports, `NMContainerStatus`, of a node that was not active) Java's new node takes
//!   RUNNING containers as launched
//!   without asking about their application: with recovery off they are never cleaned up one
//!   by one; with recovery on the scheduler's `recoverContainersOnNode` queues every
//!   non-COMPLETE container of an unknown application for cleanup once
//!   (`killOrphanContainerOnNode`). A registration's `runningApplications` that are unknown go
//!   to `applications_to_cleanup`. None of this touches the launched set. (A heartbeat that
//!   reaches the shard's inbox before the registration's statuses were applied merges with
//!   them and stands in for them: a re-reported container it no longer lists is then not
//!   cleaned up one by one; its application's cleanup still covers it.)
//!
//! Either way, a RUNNING container of a finished application is not launched; its node gets
//! the application in `applications_to_cleanup` once per node registration (not on every
//! heartbeat as Java does: re-registration is the retry). `containers_to_cleanup` otherwise
//! comes only from kills (`kill-container`, the scheduler's releases).
//!
//! # Reading a status (the hot loop)
//!
//! One pass over the `NodeStatusProto` fields; each container status is read with
//! [`ContainerStatusView::summary`] (id, state, exit status, execution type in one pass; the
//! capability and diagnostics are skipped by length). NodeManagers list their containers in
//! the same order every heartbeat, so each node remembers, per position, the container id
//! bytes it saw there and the launched slot they map to: when the bytes at a position are
//! equal, the id is known without parsing it and the slot is reached without hashing. Any
//! difference falls back to parsing the id and a hash lookup, and refreshes the entry. Equal
//! bytes decode to the same id, so this changes nothing but the cost (28k instructions per
//! 50-container heartbeat with hits, 51k with every position missing; see `benches::rm_heartbeat`).
//!
//! # Repeated heartbeats (the steady-state fast path)
//!
//! Most heartbeats of a busy cluster repeat the previous one's container statuses byte for
//! byte: the same containers, RUNNING, in the same order. When a status update leaves every
//! status it reported RUNNING, launched and marked, and those are all of the node's launched
//! containers, the node keeps a copy of that run of statuses (`steady`, a buffer reused across
//! heartbeats: a few KB per node). The next update whose statuses are equal bytes skips them:
//! reading them again would only mark the same launched containers and release none. Its
//! responseId, health and utilization are applied as always, and the counters count it as
//! the full path does. Anything else that touches the launched set or the lifecycle (a
//! completion, carried or reported, a reset, a release) drops the copy, and opportunistic mode
//! never uses it (its allocation sum is per heartbeat). The full path and the fast path end in
//! the same state: `tests/steady.rs` runs both side by side. Measured with callgrind on the
//! RM under the storm load (50 RUNNING containers): the shard's status update goes from about
//! 27,600 to about 2,900 instructions per heartbeat.
//!
//! # Health
//!
//! A heartbeat reporting the node unhealthy takes it out (state UNHEALTHY): its launched
//! containers are released and RUNNING reports are not tracked until it reports healthy again.
//! Completions are still recorded and acknowledged.

use hadoop_wire::pb::hadoop::yarn::{ContainerStateProto, ExecutionTypeProto};
use hadoop_wire::reader::{DecodeError, Reader, Value};
use hadoop_wire::view::yarn::{ContainerStatusView, NodeStatusView};

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
    /// Registration of a node that was active (Java's reconnect): as `Registered`, except that
    /// the re-reported containers then go through the heartbeat rules (Java's
    /// `ReconnectNodeTransition` hands them to `handleContainerStatus`).
    Reconnected = 6,
}

impl ResetKind {
    pub fn from_u8(v: u8) -> Option<ResetKind> {
        Some(match v {
            1 => ResetKind::Registered,
            2 => ResetKind::Rebooted,
            3 => ResetKind::Lost,
            4 => ResetKind::Unregistered,
            5 => ResetKind::Decommissioned,
            6 => ResetKind::Reconnected,
            _ => return None,
        })
    }

    fn lifecycle(self) -> Lifecycle {
        match self {
            ResetKind::Registered | ResetKind::Reconnected => Lifecycle::Running,
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

/// A change the scheduler must hear of, collected by the shard while the RM runs applications
/// ([`UnknownApps::Clean`]) and handed to it in batches off the heartbeat path (see
/// [`crate::dispatcher`]). An unchanged heartbeat (the steady fast path) produces none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SchedChange {
    /// A container of a live application first reported RUNNING on its node.
    Started(ContainerKey),
    /// A container of a live application reported COMPLETE for the first time (the report
    /// the completion log recorded; repeats until the acknowledgement are not passed on).
    Completed {
        container: ContainerKey,
        exit_status: i32,
        diagnostics: String,
    },
    /// The node reported itself unhealthy (Java removes it from the scheduler).
    Unhealthy { node: NodeKey, report: String },
    /// The node is healthy: again after being unhealthy, or first after a registration (the
    /// scheduler ignores it for a node it does not hold out as unhealthy).
    Healthy { node: NodeKey },
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

/// What a shard does with containers of applications the RM does not know (see
/// "Applications" above).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum UnknownApps {
    /// Adopt the application on the node (no application protocols: nothing is known).
    #[default]
    Adopt,
    /// Java's rule; `recovery`: `yarn.resourcemanager.recovery.enabled` (work-preserving), which
    /// decides what happens to the containers a registration re-reports.
    Clean { recovery: bool },
}

/// Most applications a node's status update flags as unknown, and most containers of unknown
/// applications a node remembers (so that a peer cannot grow either without bound).
pub const MAX_UNKNOWN_PER_NODE: usize = 65_536;

/// What the node state machine writes to (owned by the shard, shared by its nodes).
pub struct ShardCtx<'a> {
    pub now_ms: u64,
    pub opportunistic: bool,
    /// Whether status updates may take the steady-state fast path (on in the RM; off to
    /// measure or test the full path).
    pub steady_fast_path: bool,
    pub finished_apps: &'a FastSet<AppKey>,
    /// Applications the RM runs (submitted or recovered, not finished); read under
    /// [`UnknownApps::Clean`] only.
    pub live_apps: &'a FastSet<AppKey>,
    /// What happens to containers of applications the RM does not know.
    pub unknown_apps: UnknownApps,
    pub log: &'a mut CompletionLog,
    /// Cleanup items: go to the outbox at the end of the batch.
    pub out: &'a mut Vec<(u32, OutItem)>,
    /// Acknowledgements: go to the outbox only after the log commit.
    pub acks: &'a mut Vec<(u32, ContainerKey)>,
    pub events: &'a mut Vec<NodeEvent>,
    pub stats: &'a mut NodeStats,
    /// Changes for the scheduler (only under [`UnknownApps::Clean`]).
    pub sched: &'a mut Vec<SchedChange>,
}

const NO_SLOT: u32 = u32::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Slot {
    key: ContainerKey,
    exec: ExecutionTypeProto,
    seen: u32,
    /// The insert's generation, so a stale [`PosEntry`] cannot match a reused slot.
    gen: u32,
    live: bool,
}

/// The launched containers: a slab of slots plus a key → slot index, so that a heartbeat's
/// statuses can reach their slot without hashing when the position cache hits.
#[derive(Debug, Clone, Default)]
struct LaunchedSet {
    slots: Vec<Slot>,
    index: FastMap<ContainerKey, u32>,
    free: Vec<u32>,
    /// Generation of the next insert: unique per insert (wrapping after 2^32), so a cleared
    /// and refilled slab cannot be mistaken for the old one.
    next_gen: u32,
}

impl LaunchedSet {
    fn len(&self) -> usize {
        self.index.len()
    }

    fn contains(&self, k: &ContainerKey) -> bool {
        self.index.contains_key(k)
    }

    #[inline]
    fn live(&self, slot: u32, gen: u32) -> bool {
        matches!(self.slots.get(slot as usize), Some(s) if s.live && s.gen == gen)
    }

    /// Marks `slot` seen in `epoch`; true the first time this epoch.
    #[inline]
    fn mark(&mut self, slot: u32, epoch: u32, exec: ExecutionTypeProto) -> bool {
        let s = &mut self.slots[slot as usize];
        let fresh = s.seen != epoch;
        s.seen = epoch;
        s.exec = exec;
        fresh
    }

    fn insert(&mut self, key: ContainerKey, exec: ExecutionTypeProto, epoch: u32) -> (u32, u32) {
        let gen = self.next_gen;
        self.next_gen = gen.wrapping_add(1);
        let slot = match self.free.pop() {
            Some(i) => {
                let s = &mut self.slots[i as usize];
                s.gen = gen;
                s.key = key;
                s.exec = exec;
                s.seen = epoch;
                s.live = true;
                i
            }
            None => {
                self.slots.push(Slot {
                    key,
                    exec,
                    seen: epoch,
                    gen,
                    live: true,
                });
                (self.slots.len() - 1) as u32
            }
        };
        self.index.insert(key, slot);
        (slot, self.slots[slot as usize].gen)
    }

    fn remove(&mut self, key: &ContainerKey) -> bool {
        match self.index.remove(key) {
            Some(i) => {
                self.slots[i as usize].live = false;
                self.free.push(i);
                true
            }
            None => false,
        }
    }

    fn clear(&mut self) {
        self.index.clear();
        self.free.clear();
        self.slots.clear();
    }

    /// Removes live slots not seen in `epoch`: (GUARANTEED, OPPORTUNISTIC) counts.
    fn sweep(&mut self, epoch: u32) -> (u64, u64) {
        let (mut lost, mut dropped) = (0, 0);
        for (i, s) in self.slots.iter_mut().enumerate() {
            if s.live && s.seen != epoch {
                s.live = false;
                self.index.remove(&s.key);
                self.free.push(i as u32);
                if s.exec == ExecutionTypeProto::Guaranteed {
                    lost += 1;
                } else {
                    dropped += 1;
                }
            }
        }
        (lost, dropped)
    }

    fn iter(&self) -> impl Iterator<Item = &Slot> {
        self.slots.iter().filter(|s| s.live)
    }
}

/// What the status at one position of the previous heartbeat had: its container id bytes
/// and launched slot. NodeManagers list their containers in the same order every
/// heartbeat, so equal bytes at the same position skip parsing the id and hashing it.
#[derive(Debug, Clone, Copy)]
struct PosEntry {
    len: u8,
    bytes: [u8; POS_ID_BYTES],
    slot: u32,
    gen: u32,
}

/// Longest container id (encoded) the position cache keeps; Java's are 16–22 bytes.
const POS_ID_BYTES: usize = 23;

/// Positions the cache covers (statuses beyond are parsed every time), so that a peer's
/// status count cannot size it.
pub const POS_CACHE_MAX: usize = 4096;

/// Most containers a node may have launched at once; RUNNING reports of further new
/// containers are ignored (and counted), so that a peer cannot grow a node without bound.
pub const MAX_LAUNCHED_PER_NODE: usize = 65_536;

impl PosEntry {
    const EMPTY: PosEntry = PosEntry {
        len: 0,
        bytes: [0; POS_ID_BYTES],
        slot: NO_SLOT,
        gen: 0,
    };

    /// Word-wise comparison (ids are ~18 bytes: a libc memcmp call costs more than this).
    #[inline]
    fn matches(&self, id: &[u8]) -> bool {
        let n = id.len();
        if self.len as usize != n {
            return false;
        }
        let (mut a, mut b) = (id, &self.bytes[..n]);
        while a.len() >= 8 {
            let (x, ra) = a.split_at(8);
            let (y, rb) = b.split_at(8);
            if u64::from_ne_bytes(x.try_into().unwrap_or([0; 8]))
                != u64::from_ne_bytes(y.try_into().unwrap_or([1; 8]))
            {
                return false;
            }
            a = ra;
            b = rb;
        }
        a.iter().zip(b).all(|(x, y)| x == y)
    }
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
        let u = hadoop_wire::view::yarn::ResourceUtilizationView::new(bytes).scalars()?;
        Ok(Utilization {
            pmem: u.pmem,
            vmem: u.vmem,
            cpu: u.cpu,
        })
    }
}

/// One NodeManager as the dispatcher sees it.
#[derive(Debug, Clone)]
pub struct NodeState {
    index: u32,
    id: NodeKey,
    lifecycle: Lifecycle,
    launched: LaunchedSet,
    pos: Vec<PosEntry>,
    running_apps: FastSet<AppKey>,
    apps_cleanup_sent: FastSet<AppKey>,
    /// RUNNING containers of unknown applications already handled (Java's `launchedContainers`
    /// entries for them): each is queued for cleanup at most once per registration.
    orphans: FastSet<ContainerKey>,
    /// Containers released when the node turned unhealthy: the scheduler kills them (Java
    /// removes the node from the scheduler), and a kill of one of them reaches the node
    /// although it is no longer launched. Cleared when the node is healthy again or resets.
    released_unhealthy: FastSet<ContainerKey>,
    /// Unknown applications flagged in the status update of epoch `unknown_epoch`.
    unknown_seen: FastSet<AppKey>,
    unknown_epoch: u32,
    /// Registered, and the registration's container statuses not applied yet.
    registering: bool,
    epoch: u32,
    healthy: bool,
    health_report: String,
    last_health_report_time: i64,
    node_utilization: Utilization,
    containers_utilization: Utilization,
    allocated: Allocated,
    last_response_id: i32,
    /// The steady-state fast path (see "Repeated heartbeats" above): the container statuses
    /// (tags and all, as one contiguous run of the `NodeStatusProto`) of the last status
    /// update, kept while that update left every reported container launched and marked.
    steady: Vec<u8>,
    /// How many statuses `steady` holds.
    steady_count: u64,
    /// Whether `steady` still describes the node: cleared by anything that changes the
    /// launched set or the lifecycle outside a status update that re-establishes it.
    steady_ok: bool,
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

/// Whether `app` (not finished) is one the RM does not know, under Java's rule.
#[inline]
fn is_unknown(app: AppKey, ctx: &ShardCtx<'_>) -> bool {
    ctx.unknown_apps != UnknownApps::Adopt && !ctx.live_apps.contains(&app)
}

impl NodeState {
    /// A node known by the shard but not yet registered (state NEW).
    pub fn new(index: u32, id: NodeKey) -> NodeState {
        NodeState {
            index,
            id,
            lifecycle: Lifecycle::New,
            launched: LaunchedSet::default(),
            pos: Vec::new(),
            running_apps: FastSet::default(),
            apps_cleanup_sent: FastSet::default(),
            orphans: FastSet::default(),
            released_unhealthy: FastSet::default(),
            unknown_seen: FastSet::default(),
            unknown_epoch: 0,
            registering: false,
            epoch: 0,
            healthy: true,
            health_report: String::new(),
            last_health_report_time: 0,
            node_utilization: Utilization::default(),
            containers_utilization: Utilization::default(),
            allocated: Allocated::default(),
            last_response_id: 0,
            steady: Vec::new(),
            steady_count: 0,
            steady_ok: false,
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
        self.launched.contains(c)
    }

    pub fn allocated(&self) -> Allocated {
        self.allocated
    }

    /// A sorted, comparable copy of the state.
    pub fn snapshot(&self) -> NodeSnapshot {
        let mut launched: Vec<_> = self.launched.iter().map(|s| (s.key, s.exec)).collect();
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
            if ctx.unknown_apps != UnknownApps::Adopt {
                if to == Lifecycle::Unhealthy {
                    ctx.sched.push(SchedChange::Unhealthy {
                        node: self.id.clone(),
                        report: self.health_report.clone(),
                    });
                } else if to == Lifecycle::Running {
                    // Also after a registration (NEW → RUNNING): an unhealthy report the
                    // scheduler heard of after the node re-registered must not keep it out.
                    ctx.sched.push(SchedChange::Healthy {
                        node: self.id.clone(),
                    });
                }
            }
            self.lifecycle = to;
        }
    }

    fn release_all(&mut self, ctx: &mut ShardCtx<'_>) {
        self.steady_ok = false;
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
        self.steady_ok = false;
        self.release_all(ctx);
        self.running_apps.clear();
        self.apps_cleanup_sent.clear();
        self.orphans.clear();
        self.released_unhealthy.clear();
        self.registering = kind == ResetKind::Registered;
        if matches!(kind, ResetKind::Registered | ResetKind::Reconnected) {
            self.healthy = true;
            self.health_report.clear();
            self.last_response_id = 0;
        }
        self.set_lifecycle(kind.lifecycle(), ctx);
    }

    /// The registration's statuses were applied (carried, a heartbeat having merged in after
    /// them): what follows is the node's heartbeats.
    pub(crate) fn end_registration(&mut self) {
        self.registering = false;
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
        } else if is_unknown(app, ctx) {
            // (Carried from a merged-away heartbeat or a registration's
            // `runningApplications`: each such record stands for one more report of it.)
            ctx.out.push((self.index, OutItem::CleanupApp(app)));
        } else {
            self.running_apps.insert(app);
        }
    }

    /// Java's `handleRunningAppOnNode` for an application the RM does not know: it goes to
    /// `applications_to_cleanup`. Returns true the first time in this status update (Java
    /// skips the application's further statuses in the same update).
    #[cold]
    #[inline(never)]
    fn unknown_app(&mut self, app: AppKey, ctx: &mut ShardCtx<'_>) -> bool {
        if self.unknown_epoch != self.epoch {
            self.unknown_seen.clear();
            self.unknown_epoch = self.epoch;
        }
        if self.unknown_seen.contains(&app) {
            return false;
        }
        if self.unknown_seen.len() < MAX_UNKNOWN_PER_NODE {
            self.unknown_seen.insert(app);
        }
        ctx.out.push((self.index, OutItem::CleanupApp(app)));
        true
    }

    /// A status of a container of an application the RM does not know (Java's rule; see
    /// "Applications" above): never launched. `running`: its state is RUNNING (else it is
    /// neither RUNNING nor COMPLETE, which matters at a registration with recovery on only).
    #[cold]
    #[inline(never)]
    fn unknown_container(&mut self, key: ContainerKey, running: bool, ctx: &mut ShardCtx<'_>) {
        let recovery = matches!(ctx.unknown_apps, UnknownApps::Clean { recovery: true });
        let clean = if self.registering {
            // Java's new node takes RUNNING ones as launched; with recovery on the scheduler
            // kills every non-COMPLETE one (`killOrphanContainerOnNode`).
            if !running && !recovery {
                return;
            }
            recovery
        } else {
            // The first status of the application in this update only; the scheduler cleans
            // up a newly launched RUNNING container of it.
            if !self.unknown_app(key.app, ctx) || !running {
                return;
            }
            true
        };
        if self.orphans.len() < MAX_UNKNOWN_PER_NODE && self.orphans.insert(key) && clean {
            ctx.out.push((self.index, OutItem::CleanupContainer(key)));
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
        if self.launched.contains(&c) || self.released_unhealthy.remove(&c) {
            ctx.out.push((self.index, OutItem::CleanupContainer(c)));
            true
        } else {
            false
        }
    }

    /// A re-reported container neither RUNNING nor COMPLETE (NEW, SCHEDULED, …) at a
    /// registration with recovery on: cleaned up if its application is unknown.
    #[cold]
    #[inline(never)]
    fn registered_other(
        &mut self,
        id: hadoop_wire::view::yarn::ContainerIdView<'_>,
        ctx: &mut ShardCtx<'_>,
    ) -> Result<(), DecodeError> {
        if let Some(key) = ContainerKey::from_view(id)? {
            if !ctx.finished_apps.contains(&key.app) && is_unknown(key.app, ctx) {
                self.unknown_container(key, false, ctx);
            }
        }
        Ok(())
    }

    /// A RUNNING status whose key is known. Returns (newly marked this heartbeat, slot+gen
    /// if launched).
    #[inline]
    fn on_running(
        &mut self,
        key: ContainerKey,
        exec: ExecutionTypeProto,
        tracking: bool,
        ctx: &mut ShardCtx<'_>,
    ) -> (bool, Option<(u32, u32)>) {
        if let Some(&slot) = self.launched.index.get(&key) {
            let fresh = self.launched.mark(slot, self.epoch, exec);
            return (fresh, Some((slot, self.launched.slots[slot as usize].gen)));
        }
        if ctx.unknown_apps != UnknownApps::Adopt
            && !ctx.finished_apps.contains(&key.app)
            && is_unknown(key.app, ctx)
        {
            self.unknown_container(key, true, ctx);
            return (false, None);
        }
        self.see_app(key.app, ctx);
        if !tracking || ctx.log.is_completed(&key) || ctx.finished_apps.contains(&key.app) {
            return (false, None);
        }
        if self.launched.len() >= MAX_LAUNCHED_PER_NODE {
            ctx.stats.ignored += 1;
            return (false, None);
        }
        let sg = self.launched.insert(key, exec, self.epoch);
        ctx.stats.launched += 1;
        if ctx.unknown_apps != UnknownApps::Adopt && !self.registering {
            ctx.sched.push(SchedChange::Started(key));
        }
        (true, Some(sg))
    }

    /// A RUNNING status at position `pos` of the heartbeat, with its raw container id.
    /// Returns whether a launched entry was newly marked.
    #[inline]
    fn running_at(
        &mut self,
        pos: usize,
        id: hadoop_wire::view::yarn::ContainerIdView<'_>,
        exec: ExecutionTypeProto,
        tracking: bool,
        ctx: &mut ShardCtx<'_>,
    ) -> Result<bool, DecodeError> {
        let raw = id.as_bytes();
        if let Some(pe) = self.pos.get(pos) {
            if pe.slot != NO_SLOT && pe.matches(raw) && self.launched.live(pe.slot, pe.gen) {
                return Ok(self.launched.mark(pe.slot, self.epoch, exec));
            }
        }
        let Some(key) = ContainerKey::from_view(id)? else {
            ctx.stats.malformed += 1;
            return Ok(false);
        };
        let (fresh, sg) = self.on_running(key, exec, tracking, ctx);
        if raw.len() <= POS_ID_BYTES && pos < POS_CACHE_MAX {
            if self.pos.len() <= pos {
                self.pos.resize(pos + 1, PosEntry::EMPTY);
            }
            let pe = &mut self.pos[pos];
            pe.len = raw.len() as u8;
            pe.bytes[..raw.len()].copy_from_slice(raw);
            (pe.slot, pe.gen) = sg.unwrap_or((NO_SLOT, 0));
        }
        Ok(fresh)
    }

    fn on_complete(
        &mut self,
        key: ContainerKey,
        exit_status: i32,
        diagnostics: &str,
        ctx: &mut ShardCtx<'_>,
    ) {
        self.steady_ok = false;
        self.launched.remove(&key);
        if !self.orphans.is_empty() {
            self.orphans.remove(&key);
        }
        if !ctx.finished_apps.contains(&key.app) {
            if !is_unknown(key.app, ctx) {
                self.running_apps.insert(key.app);
            } else if !self.registering {
                // Java: a status of an unknown application (of any state) flags it, except
                // in the statuses a registration re-reports.
                self.unknown_app(key.app, ctx);
            }
        }
        if ctx
            .log
            .record(key, exit_status, ctx.now_ms, &self.id, diagnostics)
        {
            ctx.stats.completions_new += 1;
            if ctx.unknown_apps != UnknownApps::Adopt
                && !self.registering
                && ctx.live_apps.contains(&key.app)
            {
                // (A registration's statuses reach the scheduler with the registration.)
                ctx.sched.push(SchedChange::Completed {
                    container: key,
                    exit_status,
                    diagnostics: diagnostics.to_string(),
                });
            }
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

    fn set_health(&mut self, healthy: bool, report: &str, time: i64) {
        self.healthy = healthy;
        if self.health_report != report {
            self.health_report.clear();
            self.health_report.push_str(report);
        }
        self.last_health_report_time = time;
    }

    /// RUNNING ↔ UNHEALTHY from the latest health report (active nodes only).
    fn apply_health(&mut self, ctx: &mut ShardCtx<'_>) {
        if self.lifecycle.is_active() {
            let to = if self.healthy {
                Lifecycle::Running
            } else {
                Lifecycle::Unhealthy
            };
            if to == Lifecycle::Unhealthy && self.lifecycle != Lifecycle::Unhealthy {
                if ctx.unknown_apps != UnknownApps::Adopt {
                    self.released_unhealthy
                        .extend(self.launched.iter().map(|s| s.key));
                }
                self.release_all(ctx);
            } else if to == Lifecycle::Running && !self.released_unhealthy.is_empty() {
                self.released_unhealthy.clear();
            }
            self.set_lifecycle(to, ctx);
        }
    }

    /// Releases launched containers this heartbeat did not report RUNNING. `seen_now` counts
    /// launched entries marked by this heartbeat, each once: equal to the map's size means
    /// nothing was lost, and the sweep is skipped.
    fn sweep(&mut self, seen_now: usize, ctx: &mut ShardCtx<'_>) {
        if seen_now == self.launched.len() {
            return;
        }
        let (lost, dropped) = self.launched.sweep(self.epoch);
        if lost + dropped > 0 {
            ctx.stats.lost += lost;
            ctx.stats.released += lost + dropped;
            ctx.events.push(NodeEvent::Released {
                node: self.index,
                count: (lost + dropped) as u32,
            });
        }
    }

    /// The same status update from a prost-decoded `NodeStatusProto` (the eager baseline in
    /// `benches::rm_heartbeat`; the server never uses it). `on_status` is called for each container
    /// status first, so the baseline can do Java's per-status work there.
    pub fn status_update_owned(
        &mut self,
        status: &hadoop_wire::pb::hadoop::yarn::NodeStatusProto,
        ctx: &mut ShardCtx<'_>,
        mut on_status: impl FnMut(&hadoop_wire::pb::hadoop::yarn::ContainerStatusProto),
    ) {
        self.steady_ok = false;
        ctx.stats.status_updates += 1;
        self.epoch = self.epoch.wrapping_add(1);
        if let Some(id) = status.response_id {
            self.last_response_id = id;
        }
        if let Some(h) = &status.node_health_status {
            self.set_health(
                h.is_node_healthy.unwrap_or(false),
                h.health_report.as_deref().unwrap_or(""),
                h.last_health_report_time.unwrap_or(0),
            );
        }
        if let Some(u) = &status.node_utilization {
            self.node_utilization = Utilization {
                pmem: u.pmem.unwrap_or(0),
                vmem: u.vmem.unwrap_or(0),
                cpu: u.cpu.unwrap_or(0.0),
            };
        }
        self.apply_health(ctx);
        let tracking = self.lifecycle == Lifecycle::Running;
        let mut seen_now = 0usize;
        for cs in &status.containers_statuses {
            ctx.stats.statuses += 1;
            on_status(cs);
            let key = cs.container_id.as_ref().and_then(|c| {
                let att = c.app_attempt_id.as_ref()?;
                let app = att.application_id.as_ref().or(c.app_id.as_ref())?;
                Some(ContainerKey {
                    app: AppKey {
                        cluster_timestamp: app.cluster_timestamp.unwrap_or(0),
                        id: app.id?,
                    },
                    attempt: att.attempt_id.unwrap_or(0),
                    id: c.id?,
                })
            });
            let Some(key) = key else {
                ctx.stats.malformed += 1;
                continue;
            };
            match ContainerStateProto::try_from(cs.state.unwrap_or(0)) {
                Ok(ContainerStateProto::CRunning) => {
                    if self.on_running(key, cs.execution_type(), tracking, ctx).0 {
                        seen_now += 1;
                    }
                }
                Ok(ContainerStateProto::CComplete) => {
                    let diag = cs.diagnostics();
                    self.on_complete(key, cs.exit_status(), diag, ctx);
                }
                _ => ctx.stats.ignored += 1,
            }
        }
        self.sweep(seen_now, ctx);
        self.registering = false;
    }

    /// One heartbeat's `NodeStatusProto`, read in one pass over its fields (health and
    /// utilization usually follow the statuses; a node that turns healthy in this heartbeat
    /// gets a second pass over its RUNNING statuses). On a decode error the statuses read so
    /// far stay applied, the lost-container sweep is skipped (a cut-short snapshot must not
    /// release containers), and the error is returned.
    pub fn status_update(
        &mut self,
        status: NodeStatusView<'_>,
        ctx: &mut ShardCtx<'_>,
    ) -> Result<(), DecodeError> {
        if self.steady_ok
            && ctx.steady_fast_path
            && !ctx.opportunistic
            && self.lifecycle == Lifecycle::Running
            && self.steady_update(status, ctx)
        {
            return Ok(());
        }
        self.steady_ok = false;
        ctx.stats.status_updates += 1;
        self.epoch = self.epoch.wrapping_add(1);
        let tracking = self.lifecycle == Lifecycle::Running;
        let mut seen_now = 0usize;
        let mut alloc = Allocated::default();
        let mut pos = 0usize;
        let (mut health, mut node_util, mut cont_util) = (None, None, None);
        let bytes = status.as_bytes();
        // The statuses' run (start, end), while they are contiguous: kept only when the fast
        // path could use it (the measurement with the fast path off pays nothing for it).
        let record = ctx.steady_fast_path && !ctx.opportunistic;
        let mut run: Option<(usize, usize)> = None;
        let mut contiguous = record;
        let mut r = Reader::new(bytes);
        while !r.is_empty() {
            let start = bytes.len() - r.remaining().len();
            match r.read_field(0)? {
                (3, Value::Len(b)) => {
                    if contiguous {
                        let end = bytes.len() - r.remaining().len();
                        run = match run {
                            None => Some((start, end)),
                            Some((s, e)) if e == start => Some((s, end)),
                            other => {
                                contiguous = false;
                                other
                            }
                        };
                    }
                    let cs = ContainerStatusView::new(b);
                    ctx.stats.statuses += 1;
                    if self.status_at(pos, cs, tracking, &mut alloc, ctx)? {
                        seen_now += 1;
                    }
                    pos += 1;
                }
                (2, Value::Varint(v)) => self.last_response_id = v as i32,
                (4, Value::Len(b)) => health = Some(b),
                (6, Value::Len(b)) => cont_util = Some(b),
                (7, Value::Len(b)) => node_util = Some(b),
                (n @ (2 | 3 | 4 | 6 | 7), v) => {
                    return Err(DecodeError::WrongWireType {
                        message: "hadoop.yarn.NodeStatusProto",
                        field: match n {
                            2 => "response_id",
                            3 => "containersStatuses",
                            4 => "nodeHealthStatus",
                            6 => "containers_utilization",
                            _ => "node_utilization",
                        },
                        actual: v.wire_type(),
                    })
                }
                _ => {}
            }
        }
        self.apply_scalars(health, node_util, cont_util, ctx)?;
        if self.lifecycle == Lifecycle::Running && !tracking {
            // Healthy again (or first report): track this heartbeat's RUNNING containers.
            seen_now = 0;
            for (pos, cs) in status.containers_statuses().enumerate() {
                let cs = cs?;
                let s = cs.summary()?;
                if let (Some(ContainerStateProto::CRunning), Some(id)) = (s.state, s.container_id) {
                    if self.running_at(pos, id, s.execution_type, true, ctx)? {
                        seen_now += 1;
                    }
                }
            }
        }
        if ctx.opportunistic {
            self.allocated = alloc;
        }
        self.sweep(seen_now, ctx);
        self.registering = false;
        // Every status was RUNNING and marked a launched container of its own, and those are
        // all the launched containers: the same statuses again would change nothing but the
        // counters and the scalar fields, which the fast path applies.
        if contiguous
            && tracking
            && self.lifecycle == Lifecycle::Running
            && seen_now == pos
            && seen_now == self.launched.len()
        {
            let (s, e) = run.unwrap_or((0, 0));
            self.steady.clear();
            self.steady.extend_from_slice(&bytes[s..e]);
            self.steady_count = pos as u64;
            self.steady_ok = true;
        }
        Ok(())
    }

    /// The fast path of [`status_update`](Self::status_update) for a heartbeat whose container
    /// statuses are byte for byte those of the node's last status update, which left every
    /// one of them launched and marked (`steady_ok`). Reading them again would mark the same
    /// launched containers and release none, so only the counters and the scalar fields
    /// (responseId, health, utilization) are applied, exactly as the full path applies them.
    /// Returns false when the statuses differ (having changed nothing) or a scalar field fails
    /// to decode (having set, at most, fields the full path then sets again from the same
    /// bytes): the full path then runs and reports the error as it always has.
    fn steady_update(&mut self, status: NodeStatusView<'_>, ctx: &mut ShardCtx<'_>) -> bool {
        // Field 3 (containersStatuses), wire type 2, as a one-byte tag.
        const STATUS_TAG: u8 = 3 << 3 | 2;
        let mut run_found = false;
        let (mut health, mut node_util, mut cont_util, mut response_id) = (None, None, None, None);
        let mut r = Reader::new(status.as_bytes());
        while !r.is_empty() {
            let rest = r.remaining();
            if !run_found && !self.steady.is_empty() && rest.first() == Some(&STATUS_TAG) {
                // Equal bytes parse as the same `steady_count` statuses: compare, don't read.
                match rest.get(..self.steady.len()) {
                    Some(run) if run == &self.steady[..] => {
                        r = Reader::new(&rest[self.steady.len()..]);
                        run_found = true;
                        continue;
                    }
                    _ => return false,
                }
            }
            let Ok(field) = r.read_field(0) else {
                return false;
            };
            match field {
                // A status outside the run: not the same statuses.
                (3, _) => return false,
                (2, Value::Varint(v)) => response_id = Some(v as i32),
                (4, Value::Len(b)) => health = Some(b),
                (6, Value::Len(b)) => cont_util = Some(b),
                (7, Value::Len(b)) => node_util = Some(b),
                (2 | 4 | 6 | 7, _) => return false,
                _ => {}
            }
        }
        if run_found == self.steady.is_empty() {
            return false;
        }
        // A field that does not decode: the full path runs next, sets the same fields from
        // the same bytes and reports the error.
        if self
            .apply_scalars(health, node_util, cont_util, ctx)
            .is_err()
        {
            return false;
        }
        ctx.stats.status_updates += 1;
        ctx.stats.statuses += self.steady_count;
        if let Some(v) = response_id {
            self.last_response_id = v;
        }
        true
    }

    /// The health report and the two utilizations of a status update, each applied as it
    /// decodes (the first that does not is the error), then the lifecycle follows the health.
    fn apply_scalars(
        &mut self,
        health: Option<&[u8]>,
        node_util: Option<&[u8]>,
        cont_util: Option<&[u8]>,
        ctx: &mut ShardCtx<'_>,
    ) -> Result<(), DecodeError> {
        if let Some(b) = health {
            let h = hadoop_wire::view::yarn::NodeHealthStatusView::new(b).read()?;
            // proto2: an absent is_node_healthy reads as false, as in Java.
            self.set_health(
                h.is_node_healthy.unwrap_or(false),
                h.health_report.unwrap_or(""),
                h.last_health_report_time.unwrap_or(0),
            );
        }
        if let Some(u) = node_util {
            self.node_utilization = Utilization::read(u)?;
        }
        if let Some(u) = cont_util {
            self.containers_utilization = Utilization::read(u)?;
        }
        self.apply_health(ctx);
        Ok(())
    }

    /// One container status at position `pos`. Returns whether a launched entry was newly
    /// marked.
    #[inline]
    fn status_at(
        &mut self,
        pos: usize,
        cs: ContainerStatusView<'_>,
        tracking: bool,
        alloc: &mut Allocated,
        ctx: &mut ShardCtx<'_>,
    ) -> Result<bool, DecodeError> {
        let s = cs.summary()?;
        let Some(id) = s.container_id else {
            ctx.stats.malformed += 1;
            return Ok(false);
        };
        let mut fresh = false;
        match s.state {
            Some(ContainerStateProto::CRunning) => {
                fresh = self.running_at(pos, id, s.execution_type, tracking, ctx)?;
            }
            Some(ContainerStateProto::CComplete) => match ContainerKey::from_view(id)? {
                Some(key) => self.on_complete(key, s.exit_status, cs.diagnostics()?, ctx),
                None => ctx.stats.malformed += 1,
            },
            state => {
                ctx.stats.ignored += 1;
                if state.is_some()
                    && self.registering
                    && ctx.unknown_apps == (UnknownApps::Clean { recovery: true })
                {
                    self.registered_other(id, ctx)?;
                }
            }
        }
        if ctx.opportunistic
            && matches!(
                s.state,
                Some(ContainerStateProto::CRunning | ContainerStateProto::CNew)
            )
        {
            // YARN-11003's sum, read straight from the view: no Resource object.
            // One pass over the ResourceProto: memory (1) and virtual_cores (2), last wins.
            if let Some(cap) = cs.capability()? {
                let (mut mem, mut vc) = (0i64, 0i64);
                let mut r = Reader::new(cap.as_bytes());
                while !r.is_empty() {
                    match r.read_field(0)? {
                        (1, Value::Varint(v)) => mem = v as i64,
                        (2, Value::Varint(v)) => vc = v as i32 as i64,
                        (n @ (1 | 2), v) => {
                            return Err(DecodeError::WrongWireType {
                                message: "hadoop.yarn.ResourceProto",
                                field: if n == 1 { "memory" } else { "virtual_cores" },
                                actual: v.wire_type(),
                            })
                        }
                        _ => {}
                    }
                }
                alloc.memory_mb += mem;
                alloc.vcores += vc;
            }
        }
        Ok(fresh)
    }
}
