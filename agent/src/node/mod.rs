//! The node agent: a NodeManager's ResourceTracker side without the container launcher.
//!
//! How the pieces connect:
//!
//! ```text
//!  executors / scripts / --simulate ──control socket──> table::ContainerTable <──┐
//!        ^ cleanup orders                                   │                      │
//!        └──────────────────────────────────────────────────┘                      │
//!                                                          status_updater::StatusUpdater
//!                                                          (sans-IO: register / heartbeat /
//!                                                           response handling, wire.rs bytes)
//!                                                                   │ bytes
//!                                                                   v
//!                                            runtime (ring thread): ipc::client → RM
//! ```
//!
//! - [`ids`]: application and container ids with Java's string forms.
//! - [`table`]: the container table and the completion delivery rules (trap 1).
//! - [`wire`]: heartbeat requests encoded into a reused buffer, responses read in place.
//! - [`status_updater`]: `NodeStatusUpdaterImpl`'s protocol logic, no I/O.
//! - [`localize`]: resource localization (HDFS file → local path) on the pinned HDFS-reader
//!   thread, fed by the control socket through a bounded queue; only when `fs.defaultFS` is
//!   `hdfs://…`.

pub mod cli;
pub mod config;
pub mod control;
pub mod health;
pub mod ids;
pub mod localize;
pub mod metrics;
pub mod report;
pub mod runtime;
pub mod shared;
pub mod simulate;
pub mod status_updater;
pub mod table;
pub mod wire;

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
