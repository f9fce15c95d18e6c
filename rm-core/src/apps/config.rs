//! [`AppsConfig`]: the settings [`Apps`](super::Apps) reads, from a `conf::Configuration`
//! (Java's keys and defaults, with Java's checks and messages, and ours under `hotpath.rm.`).

use ipc::transport::BackendChoice;

use super::{Res, DEFAULT_QUEUE};

/// The settings [`Apps`](super::Apps) reads.
#[derive(Debug, Clone, PartialEq)]
pub struct AppsConfig {
    /// `yarn.resourcemanager.am.max-attempts` (2).
    pub max_attempts: i32,
    /// `yarn.scheduler.minimum-allocation-{mb,vcores}` (1024, 1).
    pub min_alloc: Res,
    /// `yarn.scheduler.maximum-allocation-{mb,vcores}` (8192, 4).
    pub max_alloc: Res,
    /// `yarn.am.liveness-monitor.expiry-interval-ms` (900000 in 3.5).
    pub am_expiry_ms: u64,
    /// `yarn.resourcemanager.rm.container-allocation.expiry-interval-ms` (600000): how long a
    /// container token is valid.
    pub container_token_expiry_ms: u64,
    /// The queues submissions may name.
    pub queues: Vec<String>,
    /// `yarn.cluster.max-application-priority` (0): the highest priority an application gets.
    pub max_app_priority: i32,
    /// Ours: most applications kept (finished ones beyond are forgotten, oldest first; new
    /// submissions beyond with only live ones are refused).
    pub max_apps: usize,
    /// `yarn.resourcemanager.max-completed-applications` (1000).
    pub max_completed_apps: usize,
    /// Ours: most outstanding containers one ask may name (`numContainers`).
    pub max_ask_containers: i32,
    /// Ours: most (priority, resource name) asks an attempt may hold.
    pub max_asks_per_attempt: usize,
    /// Ours: most blacklisted hosts per attempt.
    pub max_blacklist: usize,
    /// Ours (`hotpath.rm.max-submission-bytes`): largest encoded submission context kept per
    /// application (its AM launch context lives as long as the application runs).
    pub max_submission_bytes: usize,
    /// Ours (`hotpath.rm.scheduler.immediate-placement`, true): place containers as soon as
    /// they can be placed (the AM container in `submitApplication` and when an attempt is
    /// retried, new asks in the `allocate` that made them), not only on node heartbeats. False:
    /// only NODE_UPDATE allocates, as Java's FIFO scheduler does.
    pub immediate_placement: bool,
    /// Ours (`hotpath.rm.client.io-backend`: `auto`, `uring` or `epoll`; default `auto`,
    /// which follows `HOTPATH_IO`, then the io_uring probe): the `ipc` transport of the
    /// ApplicationClientProtocol server.
    pub client_io: BackendChoice,
    /// Ours (`hotpath.rm.scheduler.io-backend`, same values and default): the transport of the
    /// ApplicationMasterProtocol server. (Measured with AMs calling allocate back to back, one
    /// call at a time: epoll and io_uring cost the RM the same CPU per call within the noise,
    /// 7.2 vs 7.35 µs over 8 alternating pairs; see docs/performance.md.)
    pub scheduler_io: BackendChoice,
}

impl Default for AppsConfig {
    fn default() -> Self {
        AppsConfig {
            max_attempts: 2,
            min_alloc: Res::new(1024, 1),
            max_alloc: Res::new(8192, 4),
            am_expiry_ms: 900_000,
            container_token_expiry_ms: 600_000,
            queues: vec![DEFAULT_QUEUE.to_string()],
            max_app_priority: 0,
            max_apps: 10_000,
            max_completed_apps: 1000,
            max_ask_containers: 100_000,
            max_asks_per_attempt: 10_000,
            max_blacklist: 10_000,
            max_submission_bytes: 4 << 20,
            immediate_placement: true,
            client_io: BackendChoice::Auto,
            scheduler_io: BackendChoice::Auto,
        }
    }
}

impl AppsConfig {
    pub fn from_conf(conf: &conf::Configuration) -> Result<AppsConfig, crate::Error> {
        let d = AppsConfig::default();
        let int = |k: &str, dflt: i64| -> Result<i64, crate::Error> {
            match conf.try_get(k)? {
                None => Ok(dflt),
                Some(v) => v
                    .trim()
                    .parse::<i64>()
                    .map_err(|_| crate::Error::BadConfig(format!("{k}: not an integer: {v:?}"))),
            }
        };
        let backend = |k: &str, dflt: BackendChoice| -> Result<BackendChoice, crate::Error> {
            match conf.try_get(k)? {
                None => Ok(dflt),
                Some(v) => BackendChoice::parse(v).ok_or_else(|| {
                    crate::Error::BadConfig(format!("{k}: not auto, uring or epoll: {v:?}"))
                }),
            }
        };
        let cfg = AppsConfig {
            max_attempts: int("yarn.resourcemanager.am.max-attempts", 2)? as i32,
            min_alloc: Res::new(
                int("yarn.scheduler.minimum-allocation-mb", 1024)?,
                int("yarn.scheduler.minimum-allocation-vcores", 1)?,
            ),
            max_alloc: Res::new(
                int("yarn.scheduler.maximum-allocation-mb", 8192)?,
                int("yarn.scheduler.maximum-allocation-vcores", 4)?,
            ),
            am_expiry_ms: int("yarn.am.liveness-monitor.expiry-interval-ms", 900_000)? as u64,
            container_token_expiry_ms: int(
                "yarn.resourcemanager.rm.container-allocation.expiry-interval-ms",
                600_000,
            )? as u64,
            queues: d.queues.clone(),
            max_app_priority: int("yarn.cluster.max-application-priority", 0)? as i32,
            max_apps: int("hotpath.rm.max-applications", d.max_apps as i64)?.max(1) as usize,
            max_completed_apps: int(
                "yarn.resourcemanager.max-completed-applications",
                d.max_completed_apps as i64,
            )?
            .max(0) as usize,
            max_ask_containers: d.max_ask_containers,
            max_asks_per_attempt: d.max_asks_per_attempt,
            max_blacklist: d.max_blacklist,
            max_submission_bytes: int(
                "hotpath.rm.max-submission-bytes",
                d.max_submission_bytes as i64,
            )?
            .max(1024) as usize,
            immediate_placement: match conf.try_get(crate::config::IMMEDIATE_PLACEMENT)? {
                None => d.immediate_placement,
                Some(_) => conf.get_bool(crate::config::IMMEDIATE_PLACEMENT)?,
            },
            client_io: backend(crate::config::CLIENT_IO_BACKEND, d.client_io)?,
            scheduler_io: backend(crate::config::SCHEDULER_IO_BACKEND, d.scheduler_io)?,
        };
        if cfg.max_attempts <= 0 {
            return Err(crate::Error::BadConfig(format!(
                "Invalid global max attempts configuration, yarn.resourcemanager.am.max-attempts={}, it should be a positive integer.",
                cfg.max_attempts
            )));
        }
        if cfg.min_alloc.mem <= 0 || cfg.max_alloc.mem < cfg.min_alloc.mem {
            return Err(crate::Error::BadConfig(format!(
                "Invalid resource scheduler memory allocation configuration, yarn.scheduler.minimum-allocation-mb={}, yarn.scheduler.maximum-allocation-mb={}, min and max should be greater than 0, max should be no smaller than min.",
                cfg.min_alloc.mem, cfg.max_alloc.mem
            )));
        }
        if cfg.min_alloc.vcores <= 0 || cfg.max_alloc.vcores < cfg.min_alloc.vcores {
            return Err(crate::Error::BadConfig(format!(
                "Invalid resource scheduler vcores allocation configuration, yarn.scheduler.minimum-allocation-vcores={}, yarn.scheduler.maximum-allocation-vcores={}, min and max should be greater than 0, max should be no smaller than min.",
                cfg.min_alloc.vcores, cfg.max_alloc.vcores
            )));
        }
        Ok(cfg)
    }
}
