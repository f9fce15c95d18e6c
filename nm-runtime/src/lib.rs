//! The node agent: a YARN NodeManager. The protocols themselves (container table, status
//! updater, heartbeat wire, health, container manager, launch and localization rules) are
//! `nm-core`; this module is their wiring: configuration, the servers and threads, the
//! processes, the files, the control socket, logs and metrics.
//!
//! How the pieces connect:
//!
//! ```text
//!  RM AMLauncher / ApplicationMasters ──ContainerManagementProtocol (TOKEN)──> cmp
//!        │ nm_core::container_manager (checks, stages)      │ LaunchOrder / kill / signal
//!        v                                                  v
//!  nm_core::table::ContainerTable <── exits ── launcher ── resources (localization)
//!        ▲   ▲ cleanup orders → kills                       └─ executor (+ cgroups): processes
//!        │   └── storm tools / --simulate ──control socket──┘ (launch/running/complete)
//!        │
//!  nm_core::status_updater::StatusUpdater (sans-IO: register / heartbeat / responses)
//!        │ bytes                              keys, rm id ──> container_manager
//!        v
//!  runtime (ring thread): ipc::client → RM
//! ```
//!
//! - [`cmp`]: the ContainerManagementProtocol handlers on the node address (TOKEN only).
//! - [`launcher`]: accepted starts to processes and processes to exit statuses; recovery of
//!   a previous run's containers.
//! - [`config`]: the agent's settings from the Hadoop configuration.
//! - [`runtime`]: the threads (ring, housekeeping, control) and the RPC calls.
//! - [`control`]: the control socket executors and scripts use.
//! - [`executor`]: container processes as Java's `DefaultContainerExecutor` runs them
//!   (`nm_core::launch` scripts, pid/exit-code files, process-group kills, recovery), confined
//!   by [`cgroups`] (cpuset, memory limit) or by affinity and rlimits.
//! - [`localize`]: resource localization (HDFS file → local path) on the pinned HDFS-reader
//!   thread, fed by the control socket through a bounded queue; only when `fs.defaultFS` is
//!   `hdfs://…`.
//! - [`logs`]: container logs and node info over HTTP (`/ws/v1/node/…`, as `yarn logs`
//!   reads them), served beside `/metrics` by the housekeeping thread ([`logs::poll_webapp`]).
//! - [`resources`]: container localization (every `LocalResource` of a container into the
//!   node's cache, unpacked, before launch), called from launch workers; HDFS sources go
//!   through the same reader thread ([`localize::HdfsFetcher`]).

pub mod cgroups;
pub mod client;
pub mod cmp_server;
pub mod config;
pub mod control;
pub mod executor;
pub mod hdfs_reader;
pub mod launcher;
pub mod localizer;
pub mod logs;
pub mod metrics;
pub mod report;
pub mod runtime;
pub mod setup;
pub mod shared;
pub mod simulate;
pub mod zygote;

pub use config::AgentConfig;
pub use runtime::{Agent, ExitReason};

/// Agent errors.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error(transparent)]
    Conf(#[from] conf::Error),
    #[error("configuration: {0}")]
    Config(String),
    #[error("bind: {0}")]
    Bind(String),
    #[error(transparent)]
    Control(#[from] control::ControlError),
    #[error("{0}")]
    Io(String),
    #[error("IPC: {0}")]
    Ipc(#[from] ipc::client::ClientError),
    #[error("the agent stopped: {0}")]
    Exited(String),
    /// A localize request the agent answered with an error (`kind` as in the reply).
    #[error("localize failed ({kind}): {error}")]
    Localize { kind: String, error: String },
}
