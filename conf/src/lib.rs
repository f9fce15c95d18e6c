//! `conf`: Hadoop configuration, read the way Hadoop reads it. The only place in hotpath
//! that parses XML or knows a Hadoop default.
//!
//! How the types connect:
//!
//! ```text
//!  $HADOOP_CONF_DIR/core-site.xml ─┐                  defaults::DEFAULTS (Hadoop's defaults
//!  $HADOOP_CONF_DIR/hdfs-site.xml ─┼─ resource::parse ─┐   of every key we read, documented)
//!  $HADOOP_CONF_DIR/yarn-site.xml ─┘  (roxmltree)      │          │
//!                                                      v          v
//!         flags ── Configuration::set ───────────> Configuration ──(${…} expansion:
//!                                                      │            substitution)
//!                        get / try_get / get_raw <─────┤
//!   get_u64 / get_bytes / get_duration_ms / get_bool / get_socket_addr / get_trimmed_strings
//!                                   (value: Hadoop's value syntaxes, pure parsers)
//! ```
//!
//! - [`Configuration::from_env`] loads [`SITE_FILES`] from `$HADOOP_CONF_DIR` in Hadoop's
//!   order, core → hdfs → yarn: a later file overrides an earlier one unless the earlier one
//!   marked the key `<final>true</final>`. [`Configuration::set`] (flags) overrides
//!   everything, final or not.
//! - [`Configuration::get`] answers from the files and flags, else from the
//!   [`defaults`] table, after `${key}` / `${env.VAR}` expansion with a depth limit
//!   ([`substitution`]).
//! - The typed getters accept Hadoop's suffixes: sizes `128m` ([`value::parse_bytes`]),
//!   durations `10s` ([`value::parse_duration`]). Bad values and malformed XML are typed
//!   [`Error`]s naming the key or the file.
//!
//! Not done: Hadoop's deprecated-key aliases, `<xi:include>` (refused with an error),
//! Java system properties beyond `user.name`, `user.home` and `java.io.tmpdir`.

#![forbid(unsafe_code)]

use std::path::PathBuf;

pub mod configuration;
pub mod defaults;
pub mod resource;
pub mod substitution;
pub mod value;

pub use configuration::{Configuration, Source, SITE_FILES};
pub use value::{HostPort, TimeUnit};

/// Everything that can go wrong reading a configuration.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A site file (or the configuration directory) could not be read.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A site file is not well-formed XML (or has a DTD, which we refuse).
    #[error("{path}: malformed XML: {source}")]
    Xml {
        path: PathBuf,
        source: roxmltree::Error,
    },
    /// The root element is not `<configuration>`.
    #[error("{path}: top-level element is <{root}>, not <configuration>")]
    NotAConfiguration { path: PathBuf, root: String },
    /// A construct we do not implement.
    #[error("{path}: {what} is not supported")]
    Unsupported { path: PathBuf, what: String },
    /// A site file over [`configuration::MAX_FILE_BYTES`].
    #[error("{path}: larger than {max} bytes")]
    TooLarge { path: PathBuf, max: u64 },
    /// A site file that is not UTF-8.
    #[error("{path}: not UTF-8 (at byte {offset})")]
    NotUtf8 { path: PathBuf, offset: usize },
    /// A typed getter found no value and no default.
    #[error("{key} is not set and has no default")]
    Missing { key: String },
    /// A typed getter could not read the value.
    #[error("{key} = {value:?}: expected {expected}")]
    Invalid {
        key: String,
        value: String,
        expected: &'static str,
    },
    /// `${…}` expansion did not finish within the depth limit (a reference loop).
    #[error("{key} = {value:?}: variable substitution depth too large ({max})")]
    SubstitutionDepth {
        key: String,
        value: String,
        max: usize,
    },
    /// `${…}` expansion grew past the length limit.
    #[error("{key}: variable substitution longer than {max} bytes")]
    SubstitutionTooLong { key: String, max: usize },
}
