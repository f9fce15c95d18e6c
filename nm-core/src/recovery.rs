//! What a restarted agent needs to know about the containers it started: one small record per
//! container, written beside its pid and exit-code files before the process starts (the part
//! of Java's NM state store that `yarn.nodemanager.recovery.enabled` relies on, as a file per
//! container instead of a LevelDB).
//!
//! The record is text, one `key=value` per line, so an operator can read it: `container`,
//! `user`, `memory_mb`, `vcores`, `priority`, `am`, `created_ms`, `token_expiry_ms`. Unknown keys
//! are ignored (a later version may add some); a missing key or a bad value is an error.
//! [`ContainerRecord::decode`] caps its input at [`MAX_RECORD_BYTES`].

use crate::ids::ContainerId;
use crate::table::Resource;

/// The record's file name, in the container's nmPrivate directory.
pub const RECORD_FILE: &str = "container.state";
/// Largest record accepted.
pub const MAX_RECORD_BYTES: usize = 4096;

/// A container as the launcher started it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerRecord {
    pub id: ContainerId,
    pub user: String,
    pub resource: Resource,
    pub priority: i32,
    pub is_am: bool,
    pub created_ms: i64,
    pub token_expiry_ms: i64,
}

/// A record that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("container record of {0} bytes exceeds {MAX_RECORD_BYTES}")]
    TooLong(usize),
    #[error("container record: missing {0}")]
    Missing(&'static str),
    #[error("container record: bad {key}: {value:?}")]
    Bad { key: &'static str, value: String },
}

impl ContainerRecord {
    /// The record's text.
    pub fn encode(&self) -> String {
        format!(
            "container={}\nuser={}\nmemory_mb={}\nvcores={}\npriority={}\nam={}\ncreated_ms={}\ntoken_expiry_ms={}\n",
            self.id,
            self.user,
            self.resource.memory_mb,
            self.resource.vcores,
            self.priority,
            self.is_am,
            self.created_ms,
            self.token_expiry_ms
        )
    }

    /// Reads a record written by [`Self::encode`].
    pub fn decode(bytes: &[u8]) -> Result<ContainerRecord, RecordError> {
        if bytes.len() > MAX_RECORD_BYTES {
            return Err(RecordError::TooLong(bytes.len()));
        }
        let text = String::from_utf8_lossy(bytes);
        let get = |key: &'static str| -> Result<&str, RecordError> {
            text.lines()
                .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
                .ok_or(RecordError::Missing(key))
        };
        fn num<T: std::str::FromStr>(key: &'static str, v: &str) -> Result<T, RecordError> {
            v.trim().parse().map_err(|_| RecordError::Bad {
                key,
                value: v.to_string(),
            })
        }
        let id_text = get("container")?;
        let id: ContainerId = id_text.trim().parse().map_err(|_| RecordError::Bad {
            key: "container",
            value: id_text.to_string(),
        })?;
        let user = get("user")?.to_string();
        if user.is_empty() || user.contains('/') {
            return Err(RecordError::Bad {
                key: "user",
                value: user,
            });
        }
        Ok(ContainerRecord {
            id,
            user,
            resource: Resource {
                memory_mb: num("memory_mb", get("memory_mb")?)?,
                vcores: num("vcores", get("vcores")?)?,
            },
            priority: num("priority", get("priority")?)?,
            is_am: num("am", get("am")?)?,
            created_ms: num("created_ms", get("created_ms")?)?,
            token_expiry_ms: num("token_expiry_ms", get("token_expiry_ms")?)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::AppId;

    fn record() -> ContainerRecord {
        ContainerRecord {
            id: ContainerId {
                app: AppId {
                    cluster_timestamp: 1_700_000_000_000,
                    id: 3,
                },
                attempt: 1,
                id: 7,
            },
            user: "alice".into(),
            resource: Resource {
                memory_mb: 1024,
                vcores: 2,
            },
            priority: 1,
            is_am: true,
            created_ms: 1_700_000_000_123,
            token_expiry_ms: 1_700_000_600_123,
        }
    }

    #[test]
    fn round_trips() {
        let r = record();
        let text = r.encode();
        assert!(text.starts_with("container=container_1700000000000_0003_01_000007\nuser=alice\n"));
        assert_eq!(ContainerRecord::decode(text.as_bytes()).unwrap(), r);
        // Unknown keys are ignored.
        let more = format!("{text}later=1\n");
        assert_eq!(ContainerRecord::decode(more.as_bytes()).unwrap(), r);
    }

    #[test]
    fn refuses_bad_records() {
        let text = record().encode();
        let no_user = text.replace("user=alice\n", "");
        assert_eq!(
            ContainerRecord::decode(no_user.as_bytes()),
            Err(RecordError::Missing("user"))
        );
        let bad = text.replace("vcores=2", "vcores=two");
        assert!(matches!(
            ContainerRecord::decode(bad.as_bytes()),
            Err(RecordError::Bad { key: "vcores", .. })
        ));
        let escape = text.replace("user=alice", "user=../root");
        assert!(ContainerRecord::decode(escape.as_bytes()).is_err());
        assert_eq!(
            ContainerRecord::decode(&vec![b'x'; MAX_RECORD_BYTES + 1]),
            Err(RecordError::TooLong(MAX_RECORD_BYTES + 1))
        );
    }
}
