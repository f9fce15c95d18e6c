//! The container table: every container the node knows, its state, and where its completion
//! is in the delivery protocol (trap 1).
//!
//! A container is NEW, RUNNING or COMPLETE (the three `ContainerStateProto` values a
//! NodeManager reports). Executors and scripts move it forward through the control socket;
//! completion is terminal. A completed container then goes through:
//!
//! ```text
//!  COMPLETE ─heartbeat built─> in flight ─heartbeat answered NORMAL─> delivered ─┬─ containers_to_be_removed_from_nm ─> forgotten
//!     ^                            │                                            ├─ its application cleaned up ─────────> forgotten
//!     └──── RESYNC (re-sent in the registration instead) ────┘                  └─ duration-to-track-stopped-containers > forgotten
//! ```
//!
//! A registration answered NORMAL also delivers the completions its request reported, and only
//! those: one that completed while the registration was in flight goes in the next heartbeat.
//!
//! A delivered container is no longer sent in heartbeats but stays in the table, and every
//! registration re-reports it (`NMContainerStatusProto`), until one of the three forgetting
//! rules applies. Delivery is therefore at least once; the RM deduplicates by container id.
//!
//! Cleanup orders (`containers_to_cleanup`, `applications_to_cleanup`) become
//! [`CleanupOrder`]s, queued once per container for whoever launched it (the control socket
//! forwards them). A container still not complete [`ContainerTable::expire_cleanups`]'s grace
//! time after its order is completed by the table itself with Java's exit status for the case.

use std::collections::{HashMap, VecDeque};

use hadoop_wire::pb::hadoop::yarn::ContainerStateProto;
use hadoop_wire::yarn::exit_status;

use crate::ids::{AppId, ContainerId};

/// Longest diagnostics string kept per container (longer ones are cut at a char boundary).
pub const MAX_DIAGNOSTICS: usize = 4096;

/// A container's state, as a NodeManager reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ContainerState {
    New,
    Running,
    Complete,
}

impl ContainerState {
    /// The `ContainerStateProto` number (C_NEW 1, C_RUNNING 2, C_COMPLETE 3).
    pub fn proto(self) -> i32 {
        let p = match self {
            ContainerState::New => ContainerStateProto::CNew,
            ContainerState::Running => ContainerStateProto::CRunning,
            ContainerState::Complete => ContainerStateProto::CComplete,
        };
        p as i32
    }

    pub fn name(self) -> &'static str {
        match self {
            ContainerState::New => "NEW",
            ContainerState::Running => "RUNNING",
            ContainerState::Complete => "COMPLETE",
        }
    }
}

/// Memory and vcores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Resource {
    pub memory_mb: i64,
    pub vcores: i32,
}

/// Where a completion is in the delivery protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Not complete yet.
    NotDue,
    /// Complete; to be sent in the next heartbeat.
    Pending,
    /// Sent in the heartbeat now outstanding (or being retried).
    InFlight,
    /// A heartbeat carrying it (or a registration reporting it) succeeded at this monotonic
    /// time (ms); no longer sent in heartbeats.
    Delivered { at_ms: u64 },
}

/// Why a container is to be stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CleanupReason {
    /// The RM named it in `containers_to_cleanup`.
    Container,
    /// The RM named its application in `applications_to_cleanup`.
    Application,
}

impl CleanupReason {
    pub fn name(self) -> &'static str {
        match self {
            CleanupReason::Container => "containers_to_cleanup",
            CleanupReason::Application => "applications_to_cleanup",
        }
    }

    /// The exit status the table uses when it completes the container itself.
    pub fn exit_status(self) -> i32 {
        match self {
            CleanupReason::Container => exit_status::KILLED_BY_RESOURCEMANAGER,
            CleanupReason::Application => exit_status::KILLED_AFTER_APP_COMPLETION,
        }
    }
}

/// An order for the executor of a container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CleanupOrder {
    pub container: ContainerId,
    pub reason: CleanupReason,
}

/// One container.
#[derive(Debug, Clone)]
pub struct Container {
    pub id: ContainerId,
    pub state: ContainerState,
    pub resource: Resource,
    pub priority: i32,
    /// Wall-clock creation time (ms since the epoch).
    pub created_wall_ms: i64,
    /// [`exit_status::INVALID`] until complete.
    pub exit_status: i32,
    pub diagnostics: String,
    pub delivery: Delivery,
    /// When a cleanup order was issued (monotonic ms), and why.
    pub cleanup: Option<(u64, CleanupReason)>,
    /// Its application was cleaned up: forget it as soon as its completion is delivered.
    pub app_cleaned: bool,
}

/// Table errors (control-socket requests that cannot be applied).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TableError {
    #[error("unknown container {0}")]
    Unknown(ContainerId),
    #[error("container {0} already exists")]
    Exists(ContainerId),
    #[error("the container table is full ({0} containers)")]
    Full(usize),
    #[error("container {id} is {from}; cannot become {to}")]
    BadTransition {
        id: ContainerId,
        from: &'static str,
        to: &'static str,
    },
}

/// Container counts by state and delivery.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub new: usize,
    pub running: usize,
    /// Complete, not yet delivered (pending or in flight).
    pub completing: usize,
    /// Complete and delivered, kept until forgotten.
    pub delivered: usize,
}

/// Lifetime counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TableTotals {
    pub launched: u64,
    pub completed: u64,
    /// Forgotten because the RM named them in `containers_to_be_removed_from_nm`.
    pub acked: u64,
    /// Forgotten with their application.
    pub forgotten_with_app: u64,
    /// Forgotten after `duration-to-track-stopped-containers`.
    pub expired: u64,
    /// Completed by the table after an unanswered cleanup order.
    pub cleanup_forced: u64,
    pub cleanup_orders: u64,
}

/// A journaled completion (see [`ContainerTable::enable_journal`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalEntry {
    pub id: ContainerId,
    pub exit_status: i32,
    pub diagnostics: String,
}

/// The container table (see the module docs).
#[derive(Debug)]
pub struct ContainerTable {
    map: HashMap<ContainerId, Container>,
    capacity: usize,
    orders: VecDeque<CleanupOrder>,
    totals: TableTotals,
    /// Completed containers (id, exit status, diagnostics), in completion order, when
    /// journaling is on (tests, demo).
    journal: Option<Vec<JournalEntry>>,
    scratch: Vec<ContainerId>,
    /// Applications named in `applications_to_cleanup`, not yet taken by the agent (see
    /// [`Self::take_finished_apps`]).
    finished_apps: Vec<AppId>,
}

/// Appends `s` to `d`, keeping `d` within [`MAX_DIAGNOSTICS`] (cut at a char boundary).
fn push_cut(d: &mut String, s: &str) {
    let room = MAX_DIAGNOSTICS.saturating_sub(d.len());
    if s.len() <= room {
        d.push_str(s);
        return;
    }
    let mut end = room;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    d.push_str(&s[..end]);
}

impl ContainerTable {
    /// A table holding at most `capacity` containers (live and not yet forgotten).
    pub fn new(capacity: usize) -> Self {
        Self {
            map: HashMap::with_capacity(capacity.min(4096)),
            capacity,
            orders: VecDeque::new(),
            totals: TableTotals::default(),
            journal: None,
            scratch: Vec::new(),
            finished_apps: Vec::new(),
        }
    }

    /// Records the id of every completion from now on (see [`Self::take_journal`]).
    pub fn enable_journal(&mut self) {
        self.journal.get_or_insert_with(Vec::new);
    }

    /// The ids of the completions recorded since the last take.
    pub fn take_journal(&mut self) -> Vec<ContainerId> {
        self.take_journal_entries()
            .into_iter()
            .map(|e| e.id)
            .collect()
    }

    /// The completions recorded since the last take, with the status each was reported with
    /// (a completion stays in the table only until the RM has it, and an application's
    /// cleanup forgets it then, so tests that must see what a container reported read it
    /// here).
    pub fn take_journal_entries(&mut self) -> Vec<JournalEntry> {
        self.journal
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub fn get(&self, id: &ContainerId) -> Option<&Container> {
        self.map.get(id)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Container> {
        self.map.values()
    }

    pub fn totals(&self) -> TableTotals {
        self.totals
    }

    pub fn counts(&self) -> Counts {
        let mut c = Counts::default();
        for x in self.map.values() {
            match (x.state, x.delivery) {
                (ContainerState::New, _) => c.new += 1,
                (ContainerState::Running, _) => c.running += 1,
                (ContainerState::Complete, Delivery::Delivered { .. }) => c.delivered += 1,
                (ContainerState::Complete, _) => c.completing += 1,
            }
        }
        c
    }

    /// A new container (NEW), or with `running` straight to RUNNING.
    pub fn launch(
        &mut self,
        id: ContainerId,
        resource: Resource,
        priority: i32,
        wall_ms: i64,
        running: bool,
    ) -> Result<(), TableError> {
        if self.map.contains_key(&id) {
            return Err(TableError::Exists(id));
        }
        if self.map.len() >= self.capacity {
            return Err(TableError::Full(self.capacity));
        }
        self.map.insert(
            id,
            Container {
                id,
                state: if running {
                    ContainerState::Running
                } else {
                    ContainerState::New
                },
                resource,
                priority,
                created_wall_ms: wall_ms,
                exit_status: exit_status::INVALID,
                diagnostics: String::new(),
                delivery: Delivery::NotDue,
                cleanup: None,
                app_cleaned: false,
            },
        );
        self.totals.launched += 1;
        Ok(())
    }

    /// NEW → RUNNING (RUNNING → RUNNING is accepted and changes nothing).
    pub fn running(&mut self, id: &ContainerId) -> Result<(), TableError> {
        let c = self.map.get_mut(id).ok_or(TableError::Unknown(*id))?;
        match c.state {
            ContainerState::New | ContainerState::Running => {
                c.state = ContainerState::Running;
                Ok(())
            }
            ContainerState::Complete => Err(TableError::BadTransition {
                id: *id,
                from: "COMPLETE",
                to: "RUNNING",
            }),
        }
    }

    /// → COMPLETE with an exit status and diagnostics. `Ok(false)` if it was already complete
    /// (the first report wins).
    pub fn complete(
        &mut self,
        id: &ContainerId,
        exit_status: i32,
        diagnostics: &str,
    ) -> Result<bool, TableError> {
        let c = self.map.get_mut(id).ok_or(TableError::Unknown(*id))?;
        if c.state == ContainerState::Complete {
            return Ok(false);
        }
        c.state = ContainerState::Complete;
        c.exit_status = exit_status;
        // After what was added while it ran (a signal's line), as Java's container
        // diagnostics accumulate.
        push_cut(&mut c.diagnostics, diagnostics);
        c.delivery = Delivery::Pending;
        self.totals.completed += 1;
        if let Some(j) = &mut self.journal {
            j.push(JournalEntry {
                id: *id,
                exit_status,
                diagnostics: c.diagnostics.clone(),
            });
        }
        Ok(true)
    }

    /// Appends a line to a container's diagnostics (Java's `ContainerDiagnosticsUpdateEvent`:
    /// the text and a newline), up to [`MAX_DIAGNOSTICS`].
    pub fn add_diagnostics(&mut self, id: &ContainerId, line: &str) -> Result<(), TableError> {
        let c = self.map.get_mut(id).ok_or(TableError::Unknown(*id))?;
        push_cut(&mut c.diagnostics, line);
        push_cut(&mut c.diagnostics, "\n");
        Ok(())
    }

    /// Moves queued cleanup orders into `into`.
    pub fn take_orders(&mut self, into: &mut Vec<CleanupOrder>) {
        into.extend(self.orders.drain(..));
    }

    /// Moves the applications the RM named in `applications_to_cleanup` since the last call
    /// into `into` (each once). They finished whether or not a container of theirs was still
    /// live here (the usual case: every one of them has completed and been delivered), and
    /// their directories are to go either way.
    pub fn take_finished_apps(&mut self, into: &mut Vec<AppId>) {
        into.append(&mut self.finished_apps);
    }

    /// Completes containers whose cleanup order is older than `grace_ms` (no executor
    /// answered), with the reason's exit status. Returns how many.
    pub fn expire_cleanups(&mut self, now_ms: u64, grace_ms: u64) -> usize {
        let mut ids = std::mem::take(&mut self.scratch);
        ids.clear();
        ids.extend(
            self.map
                .values()
                .filter(|c| {
                    c.state != ContainerState::Complete
                        && c.cleanup
                            .is_some_and(|(at, _)| now_ms.saturating_sub(at) >= grace_ms)
                })
                .map(|c| c.id),
        );
        for id in &ids {
            let reason = self.map[id].cleanup.map(|(_, r)| r);
            if let Some(r) = reason {
                let _ = self.complete(
                    id,
                    r.exit_status(),
                    "Container killed on request of the ResourceManager (no executor answered the cleanup order)",
                );
                self.totals.cleanup_forced += 1;
            }
        }
        let n = ids.len();
        self.scratch = ids;
        n
    }

    /// Forgets delivered completions older than `track_ms` (duration-to-track-stopped-
    /// containers). Returns how many.
    pub fn expire_delivered(&mut self, now_ms: u64, track_ms: u64) -> usize {
        let before = self.map.len();
        self.map.retain(|_, c| match c.delivery {
            Delivery::Delivered { at_ms } => now_ms.saturating_sub(at_ms) < track_ms,
            _ => true,
        });
        let n = before - self.map.len();
        self.totals.expired += n as u64;
        n
    }

    // ----------------------------------------------------------------------------- updater side

    /// Containers to put in a heartbeat: every NEW and RUNNING one, and the completions not yet
    /// delivered, which become in flight.
    pub(crate) fn heartbeat_statuses(&mut self) -> impl Iterator<Item = &Container> {
        self.map.values_mut().filter_map(|c| match c.delivery {
            Delivery::Delivered { .. } => None,
            Delivery::Pending => {
                c.delivery = Delivery::InFlight;
                Some(&*c)
            }
            Delivery::NotDue | Delivery::InFlight => Some(&*c),
        })
    }

    /// The heartbeat succeeded: its completions are delivered.
    pub(crate) fn heartbeat_delivered(&mut self, now_ms: u64) {
        let mut forgotten = 0;
        self.map.retain(|_, c| {
            if c.delivery == Delivery::InFlight {
                if c.app_cleaned {
                    forgotten += 1;
                    return false;
                }
                c.delivery = Delivery::Delivered { at_ms: now_ms };
            }
            true
        });
        self.totals.forgotten_with_app += forgotten;
    }

    /// RESYNC: completions in flight were not acknowledged by anyone; they go back to pending
    /// (the registration reports them anyway).
    pub(crate) fn heartbeat_abandoned(&mut self) {
        for c in self.map.values_mut() {
            if c.delivery == Delivery::InFlight {
                c.delivery = Delivery::Pending;
            }
        }
    }

    /// Ids of the completions a registration request built now reports and its success will
    /// deliver (complete, not yet delivered), into `into` (cleared first).
    pub(crate) fn undelivered_completions(&self, into: &mut Vec<ContainerId>) {
        into.clear();
        into.extend(
            self.map
                .values()
                .filter(|c| {
                    c.state == ContainerState::Complete
                        && matches!(c.delivery, Delivery::Pending | Delivery::InFlight)
                })
                .map(|c| c.id),
        );
    }

    /// A registration succeeded: the completions it reported (`reported`, collected by
    /// [`Self::undelivered_completions`] when its request was built) are delivered.
    ///
    /// Only those: the request is built under the table lock but the RPC runs without it, so a
    /// container can complete while the registration is in flight. That completion was not in
    /// the request; it stays pending and goes in the next heartbeat. (Marking every pending
    /// completion delivered here lost it: never sent, never logged by the RM, never named in
    /// `containers_to_be_removed_from_nm`.)
    pub(crate) fn registered(&mut self, reported: &[ContainerId], now_ms: u64) {
        for id in reported {
            if let Some(c) = self.map.get_mut(id) {
                if matches!(c.delivery, Delivery::Pending | Delivery::InFlight) {
                    c.delivery = Delivery::Delivered { at_ms: now_ms };
                }
            }
        }
    }

    /// `containers_to_be_removed_from_nm`: forget it if complete.
    pub(crate) fn remove_acked(&mut self, id: &ContainerId) -> bool {
        if self
            .map
            .get(id)
            .is_some_and(|c| c.state == ContainerState::Complete)
        {
            self.map.remove(id);
            self.totals.acked += 1;
            true
        } else {
            false
        }
    }

    fn order(&mut self, id: ContainerId, reason: CleanupReason, now_ms: u64) -> bool {
        let Some(c) = self.map.get_mut(&id) else {
            return false;
        };
        if c.state == ContainerState::Complete || c.cleanup.is_some() {
            return false;
        }
        c.cleanup = Some((now_ms, reason));
        self.orders.push_back(CleanupOrder {
            container: id,
            reason,
        });
        self.totals.cleanup_orders += 1;
        true
    }

    /// Orders a live container stopped (once) as `containers_to_cleanup` does, on the node's
    /// own decision: a RESYNC with work-preserving recovery off (Java's
    /// `cleanupContainersOnNMResync`).
    pub fn order_cleanup(&mut self, id: ContainerId, now_ms: u64) -> bool {
        self.cleanup_container(id, now_ms)
    }

    /// `containers_to_cleanup`: order a live container stopped (once).
    pub(crate) fn cleanup_container(&mut self, id: ContainerId, now_ms: u64) -> bool {
        self.order(id, CleanupReason::Container, now_ms)
    }

    /// `applications_to_cleanup`: order its live containers stopped (once each), forget its
    /// delivered completions, and forget the others once delivered.
    pub(crate) fn cleanup_application(&mut self, app: AppId, now_ms: u64) {
        if !self.finished_apps.contains(&app) {
            self.finished_apps.push(app);
        }
        let mut ids = std::mem::take(&mut self.scratch);
        ids.clear();
        ids.extend(self.map.values().filter(|c| c.id.app == app).map(|c| c.id));
        for id in &ids {
            let Some(c) = self.map.get_mut(id) else {
                continue;
            };
            c.app_cleaned = true;
            if let Delivery::Delivered { .. } = c.delivery {
                self.map.remove(id);
                self.totals.forgotten_with_app += 1;
            } else {
                self.order(*id, CleanupReason::Application, now_ms);
            }
        }
        self.scratch = ids;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cid(app: i32, n: i64) -> ContainerId {
        ContainerId::new(AppId::new(7, app), 1, n)
    }
    const R: Resource = Resource {
        memory_mb: 1024,
        vcores: 1,
    };

    #[test]
    fn diagnostics_added_while_running_come_before_the_exit_and_stay_capped() {
        let mut t = ContainerTable::new(4);
        t.launch(cid(1, 1), R, 0, 0, true).unwrap();
        assert_eq!(
            t.add_diagnostics(&cid(9, 9), "x"),
            Err(TableError::Unknown(cid(9, 9)))
        );
        t.add_diagnostics(&cid(1, 1), "Sent signal GRACEFUL_SHUTDOWN (SIGTERM) ...")
            .unwrap();
        assert_eq!(
            t.get(&cid(1, 1)).unwrap().diagnostics,
            "Sent signal GRACEFUL_SHUTDOWN (SIGTERM) ...\n"
        );
        t.complete(&cid(1, 1), 143, "Exit code: 143").unwrap();
        let c = t.get(&cid(1, 1)).unwrap();
        assert_eq!(c.exit_status, 143);
        assert_eq!(
            c.diagnostics,
            "Sent signal GRACEFUL_SHUTDOWN (SIGTERM) ...\nExit code: 143"
        );
        t.launch(cid(1, 2), R, 0, 0, true).unwrap();
        for _ in 0..100 {
            t.add_diagnostics(&cid(1, 2), &"é".repeat(40)).unwrap();
        }
        t.complete(&cid(1, 2), 137, "tail").unwrap();
        let d = &t.get(&cid(1, 2)).unwrap().diagnostics;
        assert!(d.len() <= MAX_DIAGNOSTICS && d.len() > MAX_DIAGNOSTICS - 4);
    }

    #[test]
    fn transitions_and_errors() {
        let mut t = ContainerTable::new(2);
        t.launch(cid(1, 1), R, 0, 0, false).unwrap();
        assert_eq!(
            t.launch(cid(1, 1), R, 0, 0, false),
            Err(TableError::Exists(cid(1, 1)))
        );
        t.launch(cid(1, 2), R, 0, 0, true).unwrap();
        assert_eq!(t.launch(cid(1, 3), R, 0, 0, true), Err(TableError::Full(2)));
        assert_eq!(t.running(&cid(9, 9)), Err(TableError::Unknown(cid(9, 9))));
        t.running(&cid(1, 1)).unwrap();
        assert!(t.complete(&cid(1, 1), 0, "done").unwrap());
        assert!(!t.complete(&cid(1, 1), 1, "again").unwrap());
        assert_eq!(t.get(&cid(1, 1)).unwrap().exit_status, 0);
        assert!(matches!(
            t.running(&cid(1, 1)),
            Err(TableError::BadTransition { .. })
        ));
        let long = "é".repeat(MAX_DIAGNOSTICS);
        t.complete(&cid(1, 2), 0, &long).unwrap();
        assert!(t.get(&cid(1, 2)).unwrap().diagnostics.len() <= MAX_DIAGNOSTICS);
    }

    #[test]
    fn cleanup_orders_once_then_forced_completion_after_grace() {
        let mut t = ContainerTable::new(10);
        t.launch(cid(1, 1), R, 0, 0, true).unwrap();
        t.launch(cid(1, 2), R, 0, 0, true).unwrap();
        t.launch(cid(2, 3), R, 0, 0, true).unwrap();
        t.cleanup_application(AppId::new(7, 1), 100);
        t.cleanup_application(AppId::new(7, 1), 200);
        assert!(t.cleanup_container(cid(2, 3), 100));
        assert!(!t.cleanup_container(cid(2, 3), 150));
        let mut o = Vec::new();
        t.take_orders(&mut o);
        assert_eq!(o.len(), 3, "{o:?}");
        assert_eq!(t.expire_cleanups(1000, 5000), 0);
        assert_eq!(t.expire_cleanups(5100, 5000), 3);
        assert_eq!(
            t.get(&cid(2, 3)).unwrap().exit_status,
            exit_status::KILLED_BY_RESOURCEMANAGER
        );
        assert_eq!(
            t.get(&cid(1, 1)).unwrap().exit_status,
            exit_status::KILLED_AFTER_APP_COMPLETION
        );
        // app-cleaned containers are forgotten once their completion is delivered
        let n = t.heartbeat_statuses().count();
        assert_eq!(n, 3);
        t.heartbeat_delivered(6000);
        assert!(t.get(&cid(1, 1)).is_none());
        assert!(t.get(&cid(2, 3)).is_some());
        assert_eq!(t.totals().forgotten_with_app, 2);
    }

    #[test]
    fn finished_apps_are_reported_even_with_nothing_left_to_kill() {
        let mut t = ContainerTable::new(10);
        // app 1: its only container completed and was delivered before the cleanup
        t.launch(cid(1, 1), R, 0, 0, true).unwrap();
        t.complete(&cid(1, 1), 0, "").unwrap();
        assert_eq!(t.heartbeat_statuses().count(), 1);
        t.heartbeat_delivered(50);
        // app 2: still running
        t.launch(cid(2, 2), R, 0, 0, true).unwrap();
        t.cleanup_application(AppId::new(7, 1), 100);
        t.cleanup_application(AppId::new(7, 2), 100);
        t.cleanup_application(AppId::new(7, 1), 200);
        // app 3: never ran here
        t.cleanup_application(AppId::new(7, 3), 200);
        let mut o = Vec::new();
        t.take_orders(&mut o);
        assert_eq!(o.len(), 1, "{o:?}");
        let mut apps = Vec::new();
        t.take_finished_apps(&mut apps);
        assert_eq!(
            apps,
            vec![AppId::new(7, 1), AppId::new(7, 2), AppId::new(7, 3)]
        );
        t.take_finished_apps(&mut apps);
        assert_eq!(apps.len(), 3, "taken once");
    }
}
