//! The one error type of the crate.

use ipc::client::ClientError;

/// Everything that can go wrong talking to the RM and the NodeManagers, or in the AM's logic.
/// Sources are kept: a remote Java exception stays a [`ClientError::Remote`] with its class.
#[derive(Debug, thiserror::Error)]
pub enum YarnError {
    /// The server could not be reached (after the configured connect attempts).
    #[error("cannot reach the {service} at {addr}")]
    Unreachable {
        service: &'static str,
        addr: String,
        #[source]
        source: ClientError,
    },
    /// An RPC failed: a remote exception, a lost connection, a timeout.
    #[error("{method} on the {service} at {addr} failed")]
    Call {
        service: &'static str,
        method: &'static str,
        addr: String,
        #[source]
        source: ClientError,
    },
    /// A response was not the message it should be, or lacks a field Java always sets.
    #[error("{method}: malformed response: {detail}")]
    Malformed {
        method: &'static str,
        detail: String,
    },
    /// A host name did not resolve.
    #[error("cannot resolve {what} {addr:?}: {detail}")]
    Resolve {
        what: &'static str,
        addr: String,
        detail: String,
    },
    /// The configuration is unusable (a key, a value, a missing token).
    #[error("configuration: {0}")]
    Config(String),
    /// The configuration crate's error (a bad site file, a bad address value).
    #[error(transparent)]
    Conf(#[from] conf::Error),
    /// The credentials file (`HADOOP_TOKEN_FILE_LOCATION`) could not be read or parsed.
    #[error("credentials file {path}: {detail}")]
    Credentials { path: String, detail: String },
    /// SASL settings could not be built from the configuration.
    #[error("SASL settings: {0}")]
    Sasl(#[from] hadoop_wire::sasl::SaslError),
    /// The ResourceManager told the ApplicationMaster something it cannot go on from.
    #[error("the ResourceManager: {0}")]
    Rm(String),
    /// A command's arguments are unusable (`hotpath app …`: a count of 0, a bad application
    /// id, more than the cluster grants).
    #[error("{0}")]
    Usage(String),
    /// A local I/O failure of a command: `what` it was doing.
    #[error("{what}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// A step of a command (`what`) failed; `source` says why.
    #[error("{what}")]
    Step {
        what: String,
        #[source]
        source: Box<YarnError>,
    },
}

impl YarnError {
    /// The remote Java exception class, if the error is one.
    pub fn remote_class(&self) -> Option<&str> {
        match self {
            YarnError::Call { source, .. } | YarnError::Unreachable { source, .. } => {
                source.remote_class()
            }
            _ => None,
        }
    }
}

/// Maps a call's [`ClientError`]: a failed connect is [`YarnError::Unreachable`], the rest
/// [`YarnError::Call`].
pub(crate) fn call_error(
    service: &'static str,
    method: &'static str,
    addr: impl std::fmt::Display,
) -> impl FnOnce(ClientError) -> YarnError {
    move |source| match source {
        ClientError::Connect { .. } => YarnError::Unreachable {
            service,
            addr: addr.to_string(),
            source,
        },
        source => YarnError::Call {
            service,
            method,
            addr: addr.to_string(),
            source,
        },
    }
}
