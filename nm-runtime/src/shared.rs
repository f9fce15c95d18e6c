//! State shared by the agent's threads: the container table, the node's health, counters, a
//! status snapshot for reports, and the stop signal.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

use crate::metrics::AgentMetrics;
use nm_core::container_manager::ContainerManager;
use nm_core::status_updater::NodeIdentity;
use nm_core::table::ContainerTable;
use nm_core::wire::NodeHealth;

/// Locks a mutex, ignoring poisoning (a panicked thread leaves consistent data here: every
/// update is a single assignment or a table method).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// What the ring thread last knew, for reports (`getNodeReport`, `status`, the demo).
#[derive(Debug, Clone, Default)]
pub struct StatusSnapshot {
    /// `unregistered`, `registered`, or `stopped`.
    pub phase: &'static str,
    pub stopped_reason: Option<String>,
    pub response_id: i32,
    pub next_interval_ms: u64,
    /// Wall-clock ms of the last NORMAL heartbeat answer (0 = none).
    pub last_heartbeat_wall_ms: i64,
    /// Milliseconds from the agent's start to its first registration.
    pub registered_after_ms: Option<u64>,
    pub rm_identifier: Option<i64>,
    pub container_key_id: Option<i32>,
    pub nm_key_id: Option<i32>,
    /// Whether the RM is currently unreachable (calls failing).
    pub rm_unreachable: bool,
    /// RM HA: the rm-id the agent is calling (`None` without HA).
    pub rm_id: Option<String>,
}

/// A stop flag that sleeping threads can wait on.
#[derive(Debug, Default)]
pub struct Stopper {
    flag: AtomicBool,
    m: Mutex<()>,
    cv: Condvar,
}

impl Stopper {
    pub fn stop(&self) {
        self.flag.store(true, Ordering::Release);
        let _g = lock(&self.m);
        self.cv.notify_all();
    }

    pub fn is_stopped(&self) -> bool {
        self.flag.load(Ordering::Acquire)
    }

    /// Sleeps up to `d`; returns `true` if stopped meanwhile.
    pub fn sleep(&self, d: Duration) -> bool {
        let deadline = std::time::Instant::now() + d;
        let mut g = lock(&self.m);
        loop {
            if self.is_stopped() {
                return true;
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                return false;
            }
            g = self
                .cv
                .wait_timeout(g, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

/// Wakes the ring thread before its heartbeat interval is up: Java's NodeManager sends an
/// out-of-band heartbeat when a container completes, so the RM (and the ApplicationMaster)
/// hear of it at once rather than up to one interval later.
#[derive(Debug, Default)]
pub struct HeartbeatNow {
    flag: AtomicBool,
    m: Mutex<()>,
    cv: Condvar,
}

impl HeartbeatNow {
    /// Asks for a heartbeat now.
    pub fn request(&self) {
        self.flag.store(true, Ordering::Release);
        let _g = lock(&self.m);
        self.cv.notify_all();
    }

    /// Sleeps up to `d`, returning early (the request consumed) when a heartbeat is requested.
    /// Returns `true` if `stop` was set meanwhile (checked at least every 50 ms), as
    /// [`Stopper::sleep`] does.
    pub fn sleep(&self, d: Duration, stop: &Stopper) -> bool {
        let deadline = std::time::Instant::now() + d;
        let mut g = lock(&self.m);
        loop {
            if stop.is_stopped() {
                return true;
            }
            if self.flag.swap(false, Ordering::AcqRel) {
                return false;
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                return false;
            }
            let step = (deadline - now).min(Duration::from_millis(50));
            g = self
                .cv
                .wait_timeout(g, step)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

/// Everything the threads share.
#[derive(Debug)]
pub struct Shared {
    pub identity: NodeIdentity,
    /// ContainerManagementProtocol's state. Lock order: `cm` before `table`.
    pub cm: Mutex<ContainerManager>,
    pub table: Mutex<ContainerTable>,
    pub health: Mutex<NodeHealth>,
    /// The local and log dirs as the disk checks leave them (set once at start).
    pub dirs: std::sync::OnceLock<std::sync::Arc<crate::disks::LiveDirs>>,
    pub metrics: AgentMetrics,
    pub status: Mutex<StatusSnapshot>,
    pub stop: Stopper,
    /// Out-of-band heartbeats (container completions).
    pub heartbeat_now: HeartbeatNow,
    /// Pauses the simulator's new containers (running ones still finish).
    pub sim_paused: AtomicBool,
    /// Makes the simulator finish its running containers now (exit 0).
    pub sim_finish_now: AtomicBool,
}

impl Shared {
    /// State for `identity`, with a container manager for its NodeId and no aux services.
    pub fn new(identity: NodeIdentity, table: ContainerTable) -> Self {
        let cm = ContainerManager::new(
            nm_core::container_manager::ManagerConfig {
                node: hadoop_wire::token::identifier::NodeId::new(
                    identity.host.clone(),
                    identity.port,
                ),
                aux_services: Vec::new(),
                track_stopped_ms: nm_core::container_manager::DEFAULT_TRACK_STOPPED_MS,
            },
            std::sync::Arc::default(),
        );
        Self::with_manager(identity, cm, table)
    }

    /// State around an existing container manager.
    pub fn with_manager(
        identity: NodeIdentity,
        cm: ContainerManager,
        table: ContainerTable,
    ) -> Self {
        Self {
            identity,
            cm: Mutex::new(cm),
            table: Mutex::new(table),
            health: Mutex::new(NodeHealth::default()),
            dirs: std::sync::OnceLock::new(),
            metrics: AgentMetrics::default(),
            status: Mutex::new(StatusSnapshot {
                phase: "unregistered",
                ..Default::default()
            }),
            stop: Stopper::default(),
            heartbeat_now: HeartbeatNow::default(),
            sim_paused: AtomicBool::new(false),
            sim_finish_now: AtomicBool::new(false),
        }
    }
}
