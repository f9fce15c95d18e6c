//! The one error type of the harness.

use std::path::PathBuf;
use std::time::Duration;

/// Everything that can go wrong while building, starting or talking to the peer.
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    /// A file or process operation failed.
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// Maven (or the environment it needs) failed.
    #[error("building peers/hadoop with `{command}` failed:\n{output}")]
    Build { command: String, output: String },
    /// The launcher exited before it printed READY.
    #[error(
        "peer {mode} exited ({status}) before READY; launcher log {log_path:?} ends with:\n{log}"
    )]
    Exited {
        mode: String,
        status: String,
        log_path: PathBuf,
        log: String,
    },
    /// No READY line in time.
    #[error("peer {mode} printed no READY within {timeout:?}; launcher log {log_path:?} ends with:\n{log}")]
    StartTimeout {
        mode: String,
        timeout: Duration,
        log_path: PathBuf,
        log: String,
    },
    /// A line from the launcher that is not what the protocol says.
    #[error("peer {mode}: unexpected line {line:?}: {reason}")]
    Protocol {
        mode: String,
        line: String,
        reason: String,
    },
    /// The launcher answered a command with `{"ok":false,...}`.
    #[error("peer command {command:?} failed: {error}")]
    Command { command: String, error: String },
    /// The launcher did not answer a command (it died, or took longer than the timeout).
    #[error("peer {mode}: no reply to {command:?} ({reason}); launcher log ends with:\n{log}")]
    NoReply {
        mode: String,
        command: String,
        reason: String,
        log: String,
    },
    /// READY lacks a field a helper needs, or it has the wrong shape.
    #[error("peer READY: field {field:?} missing or malformed in {ready}")]
    Field { field: String, ready: String },
    /// A measuring driver failed.
    #[error("driver {driver} exited ({status}); stdout {stdout:?}; stderr ends with:\n{stderr}")]
    Driver {
        driver: String,
        status: String,
        stdout: String,
        stderr: String,
    },
}

impl PeerError {
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        PeerError::Io {
            what: what.into(),
            source,
        }
    }
}

/// The last `max_lines` lines of a log file (best effort: an unreadable log says so).
pub(crate) fn tail(path: &std::path::Path, max_lines: usize) -> String {
    match std::fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let lines: Vec<&str> = text.lines().collect();
            let from = lines.len().saturating_sub(max_lines);
            lines[from..].join("\n")
        }
        Err(e) => format!("(log {path:?} unreadable: {e})"),
    }
}
