//! The shuffle service's settings, read from the agent's configuration (yarn-site, core-site
//! and `--set`), with Java's keys and defaults, and the aux-service checks made at start.
//!
//! | setting | key | default |
//! |---|---|---|
//! | port (0 = ephemeral; the bound port is reported) | `mapreduce.shuffle.port` | 13562 |
//! | accept backlog | `mapreduce.shuffle.listen.queue.size` | 128 |
//! | connections before 429 (0 = no limit but the agent's own bound) | `mapreduce.shuffle.max.connections` | 0 |
//! | event-loop threads | `mapreduce.shuffle.max.threads` | 0 = 2 × cores, at most 8 |
//! | keep-alive for every answer | `mapreduce.shuffle.connection-keep-alive.enable` | false |
//! | keep-alive idle timeout (s, ≥ 1) | `mapreduce.shuffle.connection-keep-alive.timeout` | 5 |
//! | index cache (MiB) | `mapreduce.reduce.shuffle.indexcache.mb` (and its deprecated names) | 10 |
//! | drop sent pages from the page cache | `mapreduce.shuffle.manage.os.cache` | true |
//! | readahead per segment (bytes) | `mapreduce.shuffle.readahead.bytes` | 4194304 |
//! | bytes per connection per loop turn | `mapreduce.shuffle.transfer.buffer.size` × 32 | 4 MiB |
//! | HMAC of UrlHash/ReplyHash | `hadoop.security.secret-manager.key-generator.algorithm` | HmacSHA1 |
//! | TLS (keystore from `ssl-server.xml`, see [`super::tls`]) | `mapreduce.shuffle.ssl.enabled` | false |
//! | bytes read and encrypted per piece under TLS | `mapreduce.shuffle.ssl.file.buffer.size` | 65536 |
//!
//! Bounds of the agent's own, where Java has none: a connection must send its whole request
//! within [`REQUEST_TIMEOUT`]; at most `hotpath.shuffle.max-open-connections` (default
//! [`DEFAULT_MAX_OPEN`]) connections are open at once, beyond which the longest-idle
//! connection that has not sent a request is closed to make room (or, when every connection is
//! busy transferring, the new one gets Java's 429).

use std::sync::Arc;
use std::time::Duration;

use conf::Configuration;

use super::hash::HmacAlgorithm;
use super::{ShuffleError, SERVICE_ID, SHUFFLE_HANDLER_CLASS};

/// Java's default `mapreduce.shuffle.port`.
pub const DEFAULT_PORT: u16 = 13562;
/// The agent's default bound on open shuffle connections.
pub const DEFAULT_MAX_OPEN: usize = 4096;
/// How long a connection may take to send its request (whole request line and headers).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The shuffle service's settings (see the module docs).
#[derive(Debug, Clone)]
pub struct ShuffleConfig {
    /// `mapreduce.shuffle.port`; 0 = ephemeral.
    pub port: u16,
    /// `mapreduce.shuffle.listen.queue.size`.
    pub listen_queue: u32,
    /// `mapreduce.shuffle.max.connections` (0 = no limit of Java's).
    pub max_connections: usize,
    /// The agent's own bound on open connections (`hotpath.shuffle.max-open-connections`).
    pub max_open: usize,
    /// Event-loop threads (`mapreduce.shuffle.max.threads`; 0 = 2 × cores, at most 8).
    pub threads: usize,
    /// `mapreduce.shuffle.connection-keep-alive.enable`.
    pub keep_alive: bool,
    /// `mapreduce.shuffle.connection-keep-alive.timeout` (seconds, at least 1).
    pub keep_alive_timeout: Duration,
    /// `mapreduce.reduce.shuffle.indexcache.mb` in bytes.
    pub index_cache_bytes: usize,
    /// `mapreduce.shuffle.manage.os.cache`: `POSIX_FADV_DONTNEED` on a sent segment.
    pub manage_os_cache: bool,
    /// `mapreduce.shuffle.readahead.bytes`: `POSIX_FADV_WILLNEED` ahead of a segment (0: none).
    pub readahead_bytes: u64,
    /// Bytes one connection may send per loop turn before the others get theirs.
    pub turn_bytes: u64,
    /// `hadoop.security.secret-manager.key-generator.algorithm`.
    pub hmac: HmacAlgorithm,
    /// How long a connection may take to send its request.
    pub request_timeout: Duration,
    /// `mapreduce.shuffle.ssl.enabled`: the TLS configuration built from the keystore settings.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// `mapreduce.shuffle.ssl.file.buffer.size`: plaintext read from a map output per piece
    /// under TLS.
    pub ssl_chunk: usize,
}

impl Default for ShuffleConfig {
    /// Java's defaults.
    fn default() -> Self {
        ShuffleConfig {
            port: DEFAULT_PORT,
            listen_queue: 128,
            max_connections: 0,
            max_open: DEFAULT_MAX_OPEN,
            threads: 0,
            keep_alive: false,
            keep_alive_timeout: Duration::from_secs(5),
            index_cache_bytes: 10 << 20,
            manage_os_cache: true,
            readahead_bytes: 4 << 20,
            turn_bytes: 131_072 * 32,
            hmac: HmacAlgorithm::Sha1,
            request_timeout: REQUEST_TIMEOUT,
            tls: None,
            ssl_chunk: 65536,
        }
    }
}

fn int(conf: &Configuration, key: &str, default: i64) -> Result<i64, ShuffleError> {
    match conf.get(key).map(str::trim) {
        None | Some("") => Ok(default),
        Some(v) => v
            .parse()
            .map_err(|_| ShuffleError::Config(format!("{key} = {v:?}: expected an integer"))),
    }
}

fn flag(conf: &Configuration, key: &str, default: bool) -> Result<bool, ShuffleError> {
    match conf.get(key).map(str::trim) {
        None | Some("") => Ok(default),
        Some(v) if v.eq_ignore_ascii_case("true") => Ok(true),
        Some(v) if v.eq_ignore_ascii_case("false") => Ok(false),
        Some(v) => Err(ShuffleError::Config(format!(
            "{key} = {v:?}: expected true or false"
        ))),
    }
}

impl ShuffleConfig {
    /// Reads the keys (see the module docs). With `mapreduce.shuffle.ssl.enabled=true` the
    /// keystore is read here: a keystore the service cannot use stops the agent at start,
    /// saying why ([`super::tls::server_config`]).
    pub fn from_conf(conf: &Configuration) -> Result<ShuffleConfig, ShuffleError> {
        let tls = if flag(conf, "mapreduce.shuffle.ssl.enabled", false)? {
            Some(super::tls::server_config(conf)?)
        } else {
            None
        };
        let port = int(conf, "mapreduce.shuffle.port", i64::from(DEFAULT_PORT))?;
        let port = u16::try_from(port).map_err(|_| {
            ShuffleError::Config(format!(
                "mapreduce.shuffle.port = {port}: expected 0 to 65535"
            ))
        })?;
        let d = ShuffleConfig::default();
        let cache_mb = [
            "mapreduce.reduce.shuffle.indexcache.mb",
            "mapreduce.tasktracker.indexcache.mb",
            "mapred.tasktracker.indexcache.mb",
        ]
        .iter()
        .find(|k| conf.get(k).is_some_and(|v| !v.trim().is_empty()))
        .map_or(Ok(10), |k| int(conf, k, 10))?;
        let algorithm = conf
            .get("hadoop.security.secret-manager.key-generator.algorithm")
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .unwrap_or("HmacSHA1");
        let hmac = HmacAlgorithm::from_java_name(algorithm).ok_or_else(|| {
            ShuffleError::Config(format!(
                "hadoop.security.secret-manager.key-generator.algorithm = {algorithm:?}: the \
                 shuffle service knows HmacSHA1, HmacSHA224, HmacSHA256, HmacSHA384, \
                 HmacSHA512 and HmacMD5"
            ))
        })?;
        let max_open = int(
            conf,
            "hotpath.shuffle.max-open-connections",
            DEFAULT_MAX_OPEN as i64,
        )?;
        if max_open < 1 {
            return Err(ShuffleError::Config(format!(
                "hotpath.shuffle.max-open-connections = {max_open}: expected at least 1"
            )));
        }
        Ok(ShuffleConfig {
            port,
            listen_queue: int(conf, "mapreduce.shuffle.listen.queue.size", 128)?.clamp(1, 65535)
                as u32,
            max_connections: int(conf, "mapreduce.shuffle.max.connections", 0)?.max(0) as usize,
            max_open: max_open as usize,
            threads: int(conf, "mapreduce.shuffle.max.threads", 0)?.clamp(0, 256) as usize,
            keep_alive: flag(
                conf,
                "mapreduce.shuffle.connection-keep-alive.enable",
                false,
            )?,
            keep_alive_timeout: Duration::from_secs(
                int(conf, "mapreduce.shuffle.connection-keep-alive.timeout", 5)?.max(1) as u64,
            ),
            index_cache_bytes: (cache_mb.clamp(1, 4096) as usize) << 20,
            manage_os_cache: flag(conf, "mapreduce.shuffle.manage.os.cache", true)?,
            readahead_bytes: int(conf, "mapreduce.shuffle.readahead.bytes", 4 << 20)?.max(0) as u64,
            turn_bytes: (int(conf, "mapreduce.shuffle.transfer.buffer.size", 131_072)?
                .clamp(4096, 1 << 24) as u64)
                * 32,
            hmac,
            request_timeout: d.request_timeout,
            tls,
            ssl_chunk: int(conf, "mapreduce.shuffle.ssl.file.buffer.size", 65536)?
                .clamp(4096, 1 << 20) as usize,
        })
    }

    /// Event-loop threads to run: the configured number, or 2 × the CPUs this process may run
    /// on (Java's Netty default), at most 8.
    pub fn loop_threads(&self) -> usize {
        if self.threads > 0 {
            return self.threads;
        }
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        (2 * cpus).clamp(1, 8)
    }
}

/// Checks `yarn.nodemanager.aux-services` as Java's `AuxServices` would before serving: each
/// name must be a valid service name, and the agent serves only `mapreduce_shuffle` with
/// Hadoop's `ShuffleHandler` class. Returns whether `mapreduce_shuffle` is configured; an aux
/// service the agent cannot serve (e.g. `spark_shuffle`) is an error naming it and its class,
/// so the agent stops at start instead of failing applications later. The JSON manifest
/// (`yarn.nodemanager.aux-services.manifest.enabled`) is refused the same way.
pub fn check_aux_services(conf: &Configuration, names: &[String]) -> Result<bool, ShuffleError> {
    if flag(
        conf,
        "yarn.nodemanager.aux-services.manifest.enabled",
        false,
    )? {
        return Err(ShuffleError::Config(
            "yarn.nodemanager.aux-services.manifest.enabled is true: this agent reads aux \
             services from yarn.nodemanager.aux-services only (it serves mapreduce_shuffle)"
                .into(),
        ));
    }
    let mut shuffle = false;
    for name in names {
        let valid = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(ShuffleError::Config(format!(
                "yarn.nodemanager.aux-services: {name:?} is not a valid service name \
                 (letters, digits and underscores, not starting with a digit)"
            )));
        }
        let key = format!("yarn.nodemanager.aux-services.{name}.class");
        let class = conf.get(&key).map(str::trim).filter(|c| !c.is_empty());
        let class = match (name.as_str(), class) {
            (SERVICE_ID, None) => SHUFFLE_HANDLER_CLASS,
            (_, Some(c)) => c,
            (_, None) => {
                return Err(ShuffleError::Config(format!(
                    "yarn.nodemanager.aux-services names {name}, but {key} is not set: this \
                     agent serves only {SERVICE_ID} ({SHUFFLE_HANDLER_CLASS})"
                )))
            }
        };
        if name != SERVICE_ID || class != SHUFFLE_HANDLER_CLASS {
            return Err(ShuffleError::Config(format!(
                "yarn.nodemanager.aux-services names {name} ({key} = {class}), which this agent \
                 cannot serve: it serves only {SERVICE_ID} with {SHUFFLE_HANDLER_CLASS}; remove \
                 {name} from yarn.nodemanager.aux-services or run a Java NodeManager on this node"
            )));
        }
        shuffle = true;
    }
    Ok(shuffle)
}
