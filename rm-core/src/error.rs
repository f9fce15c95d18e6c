//! The crate's error type.

use std::path::PathBuf;

use hadoop_wire::reader::DecodeError;

/// Everything that can go wrong in rm-core.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A request body is not a well-formed message of the expected type.
    #[error("malformed {message}: {source}")]
    Decode {
        message: &'static str,
        source: DecodeError,
    },
    /// A request body prost could not decode (cold paths: register, unregister, admin).
    #[error("malformed {message}: {source}")]
    Prost {
        message: &'static str,
        source: prost::DecodeError,
    },
    /// A request lacks a field the protocol needs (e.g. a heartbeat without a node id).
    #[error("{message} has no {field}")]
    Missing {
        message: &'static str,
        field: &'static str,
    },
    /// A configuration value is unusable.
    #[error(transparent)]
    Conf(#[from] conf::Error),
    /// A configuration combination we refuse.
    #[error("configuration: {0}")]
    BadConfig(String),
    /// An include/exclude host file could not be read.
    #[error("host list {path}: {source}")]
    HostList {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A host list is larger than [`crate::hosts::MAX_HOST_FILE_BYTES`].
    #[error("host list {path}: larger than {max} bytes")]
    HostListTooLarge { path: PathBuf, max: u64 },
    /// The completion log could not be read, written or synced.
    #[error("completion log {path}: {source}")]
    LogIo {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The completion log is damaged before its tail (not a torn last write).
    #[error("completion log {path}: corrupt record at offset {offset}: {reason}")]
    LogCorrupt {
        path: PathBuf,
        offset: u64,
        reason: &'static str,
    },
    /// The RM state store could not be read, written or synced.
    #[error("RM state store {path}: {source}")]
    StoreIo {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The RM state store is damaged before its tail, or holds what this RM cannot recover.
    #[error("RM state store {path}: corrupt record at offset {offset}: {reason}")]
    StoreCorrupt {
        path: PathBuf,
        offset: u64,
        reason: &'static str,
    },
    /// The random source failed.
    #[error(transparent)]
    Entropy(#[from] hadoop_wire::entropy::EntropyError),
    /// A dispatcher thread could not be started.
    #[error("dispatcher: {0}")]
    Spawn(String),
}
