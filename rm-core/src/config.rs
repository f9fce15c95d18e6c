//! The RM's settings, read once from a [`conf::Configuration`].
//!
//! Hadoop keys (defaults in `conf::defaults`) plus a few of our own under `hotpath.rm.*`,
//! whose defaults live here because only this crate reads them.

use std::path::PathBuf;

use conf::{Configuration, TimeUnit};

use crate::Error;

/// `yarn.resourcemanager.nodemanagers.heartbeat-interval-ms`
pub const HEARTBEAT_INTERVAL: &str = "yarn.resourcemanager.nodemanagers.heartbeat-interval-ms";
/// `yarn.nm.liveness-monitor.expiry-interval-ms`
pub const NM_EXPIRY: &str = "yarn.nm.liveness-monitor.expiry-interval-ms";
/// `yarn.resourcemanager.opportunistic-container-allocation.enabled`
pub const OPPORTUNISTIC: &str = "yarn.resourcemanager.opportunistic-container-allocation.enabled";
/// `yarn.resourcemanager.nodes.include-path`
pub const INCLUDE_PATH: &str = "yarn.resourcemanager.nodes.include-path";
/// `yarn.resourcemanager.nodes.exclude-path`
pub const EXCLUDE_PATH: &str = "yarn.resourcemanager.nodes.exclude-path";
/// `yarn.resourcemanager.nodemanager.minimum.version`
pub const NM_MIN_VERSION: &str = "yarn.resourcemanager.nodemanager.minimum.version";
/// `yarn.resourcemanager.container-tokens.master-key-rolling-interval-secs`
pub const CONTAINER_KEY_ROLL: &str =
    "yarn.resourcemanager.container-tokens.master-key-rolling-interval-secs";
/// `yarn.resourcemanager.nm-tokens.master-key-rolling-interval-secs`
pub const NM_KEY_ROLL: &str = "yarn.resourcemanager.nm-tokens.master-key-rolling-interval-secs";
/// `yarn.resourcemanager.am-rm-tokens.master-key-rolling-interval-secs`
pub const AMRM_KEY_ROLL: &str =
    "yarn.resourcemanager.am-rm-tokens.master-key-rolling-interval-secs";
/// `yarn.am.liveness-monitor.expiry-interval-ms`
pub const AM_EXPIRY: &str = "yarn.am.liveness-monitor.expiry-interval-ms";
/// `yarn.scheduler.minimum-allocation-mb`
pub const MIN_ALLOC_MB: &str = "yarn.scheduler.minimum-allocation-mb";
/// `yarn.scheduler.minimum-allocation-vcores`
pub const MIN_ALLOC_VCORES: &str = "yarn.scheduler.minimum-allocation-vcores";

/// `yarn.resourcemanager.recovery.enabled` (false): keep applications across a restart.
pub const RECOVERY: &str = "yarn.resourcemanager.recovery.enabled";
/// Ours: directory of the RM state store (default `<completion-log.dir>/rmstore`; Java's
/// `yarn.resourcemanager.store.class` and its settings are not read).
pub const STATE_STORE_DIR: &str = "hotpath.rm.state-store.dir";
/// Ours: the state store's log is compacted once it grows past this many bytes (64 MiB).
pub const STATE_STORE_MAX_BYTES: &str = "hotpath.rm.state-store.max-log-bytes";
/// Ours: directory of the durable completion log (default `$TMPDIR/hotpath-rm`).
pub const COMPLETION_LOG_DIR: &str = "hotpath.rm.completion-log.dir";
/// Ours: most NodeManagers the RM tracks (registrations beyond are told SHUTDOWN).
pub const MAX_NODES: &str = "hotpath.rm.max-nodes";
/// Ours: the version string the RM reports (`rm_version`) and compares `EqualToRM` with.
pub const RM_VERSION: &str = "hotpath.rm.version";
/// Ours: how long a shard waits for more work before processing a partial batch.
pub const BATCH_INTERVAL: &str = "hotpath.rm.dispatcher.batch-interval-ms";
/// Ours: inbox depth at which the network side wakes a shard early.
pub const WAKE_DEPTH: &str = "hotpath.rm.dispatcher.wake-depth";
/// Ours: how long completed container ids are remembered for deduplication.
pub const DEDUP_RETENTION: &str = "hotpath.rm.completion-dedup-retention-ms";
/// Ours: the port of the Prometheus `/metrics` endpoint.
pub const METRICS_PORT: &str = "hotpath.rm.metrics.port";
/// Ours (boolean, default true): place containers as soon as they can be placed — an AM
/// container in `submitApplication` and when an attempt is retried, an AM's new asks in the
/// `allocate` call that made them — besides on node heartbeats; `false`: on node heartbeats
/// only (Java's FIFO scheduler). Read by [`crate::apps::AppsConfig::from_conf`].
pub const IMMEDIATE_PLACEMENT: &str = "hotpath.rm.scheduler.immediate-placement";
/// Ours (`auto`, `uring` or `epoll`; default `auto`): the `ipc` transport backend of the
/// ApplicationClientProtocol server (`auto` follows `HOTPATH_IO`, then the io_uring probe).
pub const CLIENT_IO_BACKEND: &str = "hotpath.rm.client.io-backend";
/// Ours (same values and default): the transport backend of the ApplicationMasterProtocol
/// server. The resource-tracker server's backend is the process's (`HOTPATH_IO`, then the
/// probe).
pub const SCHEDULER_IO_BACKEND: &str = "hotpath.rm.scheduler.io-backend";

/// The Hadoop version we speak to NodeManagers as (the peer's release line).
pub const DEFAULT_RM_VERSION: &str = hadoop_wire::yarn::HADOOP_VERSION;

/// Everything rm-core reads from the configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct RmConfig {
    pub heartbeat_interval_ms: u64,
    pub nm_expiry_ms: u64,
    pub opportunistic: bool,
    pub include_path: Option<PathBuf>,
    pub exclude_path: Option<PathBuf>,
    /// `NONE`, `EqualToRM`, or a version.
    pub nm_min_version: String,
    pub min_alloc_mb: u64,
    pub min_alloc_vcores: u64,
    pub container_key_roll_ms: u64,
    pub nm_key_roll_ms: u64,
    /// AMRM-token master key rolling interval (Hadoop's key is in seconds).
    pub amrm_key_roll_ms: u64,
    /// `yarn.am.liveness-monitor.expiry-interval-ms` (3.5.0 default 900000: 15 minutes).
    pub am_expiry_ms: u64,
    pub completion_log_dir: PathBuf,
    /// `yarn.resourcemanager.recovery.enabled`.
    pub recovery: bool,
    /// Where the state store lives (see [`STATE_STORE_DIR`]).
    pub state_store_dir: PathBuf,
    pub state_store_max_bytes: u64,
    pub max_nodes: usize,
    pub rm_version: String,
    pub batch_interval_ms: u64,
    pub wake_depth: usize,
    pub dedup_retention_ms: u64,
    pub metrics_port: u16,
    /// [`ipc::transport::BATCH_WAIT_KEY`] when set: the RM's servers' wake batching bound
    /// (`None`: the transport's default). Applied by [`crate::service::RmService`].
    pub ipc_batch_wait: Option<std::time::Duration>,
}

impl Default for RmConfig {
    /// Hadoop's defaults (the same as [`RmConfig::from_conf`] on an empty configuration).
    fn default() -> Self {
        RmConfig {
            heartbeat_interval_ms: 1000,
            nm_expiry_ms: 600_000,
            opportunistic: false,
            include_path: None,
            exclude_path: None,
            nm_min_version: "NONE".into(),
            min_alloc_mb: 1024,
            min_alloc_vcores: 1,
            container_key_roll_ms: 86_400_000,
            nm_key_roll_ms: 86_400_000,
            amrm_key_roll_ms: 86_400_000,
            am_expiry_ms: 900_000,
            completion_log_dir: std::env::temp_dir().join("hotpath-rm"),
            recovery: false,
            state_store_dir: std::env::temp_dir().join("hotpath-rm").join("rmstore"),
            state_store_max_bytes: 64 << 20,
            max_nodes: 1_000_000,
            rm_version: DEFAULT_RM_VERSION.into(),
            batch_interval_ms: 1,
            wake_depth: 256,
            dedup_retention_ms: 1_200_000,
            metrics_port: 8098,
            ipc_batch_wait: None,
        }
    }
}

fn opt_path(conf: &Configuration, key: &str) -> Result<Option<PathBuf>, Error> {
    Ok(conf
        .try_get(key)?
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(PathBuf::from))
}

fn u64_or(conf: &Configuration, key: &str, default: u64) -> Result<u64, Error> {
    match conf.try_get(key)? {
        None => Ok(default),
        Some(_) => Ok(conf.get_u64(key)?),
    }
}

fn ms_or(conf: &Configuration, key: &str, default: u64) -> Result<u64, Error> {
    match conf.try_get(key)? {
        None => Ok(default),
        Some(_) => Ok(conf.get_duration_ms(key)?),
    }
}

impl RmConfig {
    /// Reads every setting; a bad value is a typed error naming the key.
    pub fn from_conf(conf: &Configuration) -> Result<RmConfig, Error> {
        let d = RmConfig::default();
        let secs = |key: &str, default_ms: u64| -> Result<u64, Error> {
            match conf.try_get(key)? {
                None => Ok(default_ms),
                Some(_) => Ok(conf.get_duration(key, TimeUnit::Seconds)?.as_millis() as u64),
            }
        };
        let cfg = RmConfig {
            heartbeat_interval_ms: ms_or(conf, HEARTBEAT_INTERVAL, d.heartbeat_interval_ms)?,
            nm_expiry_ms: ms_or(conf, NM_EXPIRY, d.nm_expiry_ms)?,
            opportunistic: match conf.try_get(OPPORTUNISTIC)? {
                None => false,
                Some(_) => conf.get_bool(OPPORTUNISTIC)?,
            },
            include_path: opt_path(conf, INCLUDE_PATH)?,
            exclude_path: opt_path(conf, EXCLUDE_PATH)?,
            nm_min_version: conf
                .try_get(NM_MIN_VERSION)?
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .unwrap_or(d.nm_min_version),
            min_alloc_mb: u64_or(conf, MIN_ALLOC_MB, d.min_alloc_mb)?,
            min_alloc_vcores: u64_or(conf, MIN_ALLOC_VCORES, d.min_alloc_vcores)?,
            container_key_roll_ms: secs(CONTAINER_KEY_ROLL, d.container_key_roll_ms)?,
            nm_key_roll_ms: secs(NM_KEY_ROLL, d.nm_key_roll_ms)?,
            amrm_key_roll_ms: secs(AMRM_KEY_ROLL, d.amrm_key_roll_ms)?,
            am_expiry_ms: ms_or(conf, AM_EXPIRY, d.am_expiry_ms)?,
            completion_log_dir: opt_path(conf, COMPLETION_LOG_DIR)?
                .unwrap_or(d.completion_log_dir.clone()),
            recovery: match conf.try_get(RECOVERY)? {
                None => d.recovery,
                Some(_) => conf.get_bool(RECOVERY)?,
            },
            state_store_dir: match opt_path(conf, STATE_STORE_DIR)? {
                Some(p) => p,
                None => opt_path(conf, COMPLETION_LOG_DIR)?
                    .unwrap_or(d.completion_log_dir)
                    .join("rmstore"),
            },
            state_store_max_bytes: u64_or(conf, STATE_STORE_MAX_BYTES, d.state_store_max_bytes)?,
            max_nodes: u64_or(conf, MAX_NODES, d.max_nodes as u64)? as usize,
            rm_version: conf
                .try_get(RM_VERSION)?
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .unwrap_or(d.rm_version),
            batch_interval_ms: ms_or(conf, BATCH_INTERVAL, d.batch_interval_ms)?,
            wake_depth: u64_or(conf, WAKE_DEPTH, d.wake_depth as u64)? as usize,
            dedup_retention_ms: ms_or(conf, DEDUP_RETENTION, d.dedup_retention_ms)?,
            metrics_port: {
                let p = u64_or(conf, METRICS_PORT, d.metrics_port as u64)?;
                u16::try_from(p).map_err(|_| Error::BadConfig(format!("{METRICS_PORT} = {p}")))?
            },
            ipc_batch_wait: ipc::transport::batch_wait_from_conf(conf)
                .map_err(|e| Error::BadConfig(e.to_string()))?,
        };
        cfg.check()?;
        Ok(cfg)
    }

    /// The delay before a rolled master key becomes current: 1.5 × the NM expiry, as Java's
    /// secret managers use.
    pub fn key_activation_delay_ms(&self) -> u64 {
        self.nm_expiry_ms.saturating_mul(3) / 2
    }

    /// The delay before a rolled AMRM-token master key becomes current: 1.5 × the AM expiry
    /// (`AMRMTokenSecretManager`'s `activationDelay`).
    pub fn amrm_key_activation_delay_ms(&self) -> u64 {
        self.am_expiry_ms.saturating_mul(3) / 2
    }

    /// Refuses combinations Java refuses (or that would break the protocol).
    pub fn check(&self) -> Result<(), Error> {
        if self.heartbeat_interval_ms == 0 {
            return Err(Error::BadConfig(format!(
                "{HEARTBEAT_INTERVAL} must be > 0"
            )));
        }
        if self.nm_expiry_ms == 0 {
            return Err(Error::BadConfig(format!("{NM_EXPIRY} must be > 0")));
        }
        let delay = self.key_activation_delay_ms();
        for (key, roll) in [
            (CONTAINER_KEY_ROLL, self.container_key_roll_ms),
            (NM_KEY_ROLL, self.nm_key_roll_ms),
        ] {
            // Java (RMContainerTokenSecretManager's and NMTokenSecretManagerInRM's constructors,
            // IllegalArgumentException): the rolling interval must exceed twice the activation
            // delay, 3 x the NM expiry, so a rolled key is active well before the next roll.
            if roll <= delay.saturating_mul(2) {
                return Err(Error::BadConfig(format!(
                    "{key} should be more than 3 X {NM_EXPIRY}"
                )));
            }
        }
        if self.am_expiry_ms == 0 {
            return Err(Error::BadConfig(format!("{AM_EXPIRY} must be > 0")));
        }
        // Java (AMRMTokenSecretManager's constructor, IllegalArgumentException): the rolling
        // interval must exceed twice the activation delay, 3 x the AM expiry.
        if self.amrm_key_roll_ms <= self.amrm_key_activation_delay_ms().saturating_mul(2) {
            return Err(Error::BadConfig(format!(
                "{AMRM_KEY_ROLL} should be more than 3 X {AM_EXPIRY}"
            )));
        }
        if self.max_nodes == 0 || self.max_nodes > u32::MAX as usize / 2 {
            return Err(Error::BadConfig(format!("{MAX_NODES} out of range")));
        }
        Ok(())
    }
}

/// The files beside the site files that a Java RM reads ACLs from, in the order they are laid
/// over the site files: `capacity-scheduler.xml` (the queues' `acl_submit_applications` and
/// `acl_administer_queue`: `CapacitySchedulerConfiguration` is the RM's configuration with
/// this file added) and `hadoop-policy.xml` (the service ACLs `security.*.protocol.acl`: the
/// RM's services add it before reading them). A missing file is skipped, as Java's
/// configuration provider skips it.
pub const ACL_FILES: [&str; 2] = ["capacity-scheduler.xml", "hadoop-policy.xml"];

/// Java's `RMServerUtils.processRMProxyUsersConf`: each `yarn.resourcemanager.proxyuser.X`
/// also as `hadoop.proxyuser.X` (overriding it, as Java does): the RM's own proxy-user rules.
pub fn with_rm_proxy_users(mut conf: Configuration) -> Configuration {
    const RM_PREFIX: &str = "yarn.resourcemanager.proxyuser.";
    let extra: Vec<(String, String)> = conf
        .keys_with_prefix(RM_PREFIX)
        .filter_map(|k| {
            let v = conf.get(k)?.to_string();
            Some((format!("hadoop.proxyuser.{}", &k[RM_PREFIX.len()..]), v))
        })
        .collect();
    for (k, v) in extra {
        conf.set(&k, &v);
    }
    conf
}

/// The RM's configuration as Java's RM sees it: the site files of `dir` (else
/// `$HADOOP_CONF_DIR`), then [`ACL_FILES`] from the same directory, then the `KEY=VALUE`
/// overrides (`--set`). Read at start and again by each `yarn rmadmin` refresh.
pub fn rm_configuration(
    dir: Option<&std::path::Path>,
    overrides: &[String],
) -> Result<Configuration, Error> {
    let mut c = Configuration::from_flags(dir, &[])?;
    if let Some(d) = c.conf_dir().map(std::path::Path::to_path_buf) {
        for name in ACL_FILES {
            let path = d.join(name);
            if path.is_file() {
                c.add_resource(&path)?;
            }
        }
    }
    for kv in overrides {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| Error::BadConfig(format!("--set {kv}: not KEY=VALUE")))?;
        c.set(k.trim(), v.trim());
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_hadoop() {
        let c = RmConfig::from_conf(&Configuration::new()).unwrap();
        assert_eq!(c.heartbeat_interval_ms, 1000);
        assert_eq!(c.nm_expiry_ms, 600_000);
        assert!(!c.opportunistic);
        assert_eq!(c.nm_min_version, "NONE");
        assert_eq!(c.min_alloc_mb, 1024);
        assert_eq!(c.container_key_roll_ms, 86_400_000);
        assert_eq!(c.include_path, None);
        assert_eq!(c.key_activation_delay_ms(), 900_000);
        assert_eq!(c.amrm_key_roll_ms, 86_400_000);
        assert_eq!(c.am_expiry_ms, 900_000, "3.5.0: 15 minutes");
        assert_eq!(c.amrm_key_activation_delay_ms(), 1_350_000);
    }

    #[test]
    fn values_and_errors() {
        let mut conf = Configuration::new();
        conf.set(HEARTBEAT_INTERVAL, "250");
        conf.set(NM_EXPIRY, "3s");
        conf.set(OPPORTUNISTIC, "true");
        conf.set(INCLUDE_PATH, " /etc/hosts.include ");
        conf.set(COMPLETION_LOG_DIR, "/var/lib/x");
        let c = RmConfig::from_conf(&conf).unwrap();
        assert_eq!(c.heartbeat_interval_ms, 250);
        assert_eq!(c.nm_expiry_ms, 3000);
        assert!(c.opportunistic);
        assert_eq!(c.include_path, Some(PathBuf::from("/etc/hosts.include")));
        assert_eq!(c.completion_log_dir, PathBuf::from("/var/lib/x"));

        conf.set(OPPORTUNISTIC, "maybe");
        assert!(matches!(RmConfig::from_conf(&conf), Err(Error::Conf(_))));
        conf.set(OPPORTUNISTIC, "false");
        conf.set(CONTAINER_KEY_ROLL, "4"); // 4 s < 1.5 x 3 s
        assert!(matches!(
            RmConfig::from_conf(&conf),
            Err(Error::BadConfig(_))
        ));
    }

    #[test]
    fn token_rolls_must_exceed_three_nm_expiries() {
        // Java's RMContainerTokenSecretManager / NMTokenSecretManagerInRM: rolling interval >
        // 2 x (1.5 x NM expiry). With a 3 s expiry, 9 s is refused and 10 s taken.
        for key in [CONTAINER_KEY_ROLL, NM_KEY_ROLL] {
            let mut conf = Configuration::new();
            conf.set(NM_EXPIRY, "3000");
            conf.set(key, "9");
            match RmConfig::from_conf(&conf) {
                Err(Error::BadConfig(m)) => assert_eq!(
                    m,
                    format!(
                        "{key} should be more than 3 X yarn.nm.liveness-monitor.expiry-interval-ms"
                    )
                ),
                other => panic!("{key}: {other:?}"),
            }
            conf.set(key, "10");
            assert!(RmConfig::from_conf(&conf).is_ok(), "{key} = 10 s");
        }
    }

    #[test]
    fn amrm_roll_must_exceed_three_am_expiries() {
        let mut conf = Configuration::new();
        conf.set(AM_EXPIRY, "1000");
        conf.set(AMRM_KEY_ROLL, "3"); // 3000 ms = 2 x the 1500 ms delay: refused
        match RmConfig::from_conf(&conf) {
            Err(Error::BadConfig(m)) => assert_eq!(
                m,
                "yarn.resourcemanager.am-rm-tokens.master-key-rolling-interval-secs should be more than 3 X yarn.am.liveness-monitor.expiry-interval-ms"
            ),
            other => panic!("{other:?}"),
        }
        conf.set(AMRM_KEY_ROLL, "4");
        let c = RmConfig::from_conf(&conf).unwrap();
        assert_eq!(c.amrm_key_roll_ms, 4000);
        assert_eq!(c.amrm_key_activation_delay_ms(), 1500);
        conf.set(AM_EXPIRY, "2s");
        assert!(RmConfig::from_conf(&conf).is_err(), "4 s <= 2 x 3 s");
    }
}
