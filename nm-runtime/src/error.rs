//! The crate's error: why an agent did not start or a client of a running agent failed. Each
//! module's own failures (`ExecutorError`, `LocalizeError`, `ResourceError`, `CgroupError`)
//! stay with their module; this one gathers what [`crate::Agent::start`] and
//! [`crate::client`] meet.

use crate::config::ConfigError;
use crate::control::ControlError;

/// Why an agent did not start, or a call to a running one failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The settings (`yarn-site.xml`, `--set`) are unusable.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A server could not bind its address.
    #[error("bind: {0}")]
    Bind(String),
    /// The control socket could not be bound or talked to.
    #[error(transparent)]
    Control(#[from] ControlError),
    /// A thread could not be started, or a local read or write failed.
    #[error("{0}")]
    Io(String),
    /// An IPC call to the agent failed.
    #[error("IPC: {0}")]
    Ipc(#[from] ipc::client::ClientError),
}
