//! The agent's settings, read from a `conf::Configuration` (yarn-site.xml and `--set`).
//!
//! | setting | key | default |
//! |---|---|---|
//! | RM address | `yarn.resourcemanager.resource-tracker.address` | `${yarn.resourcemanager.hostname}:8031` |
//! | RM HA ([`RmHa`]) | `yarn.resourcemanager.ha.enabled`, `…ha.rm-ids`; per rm-id `…resource-tracker.address.<id>`, else `…hostname.<id>`:8031 (the unsuffixed address is then ignored) | off |
//! | RM failover sleeps | `yarn.client.failover-sleep-base-ms`, `…-sleep-max-ms`, `…-max-attempts` (Java's arithmetic when set); else `hotpath.agent.rm-failover.sleep-base-ms`, `…sleep-max-ms` | 100, 2000 |
//! | containers on RESYNC | `yarn.resourcemanager.work-preserving-recovery.enabled` (false: killed before re-registering) | true |
//! | node address (NodeId; the agent's IPC server binds it; port 0 = ephemeral) | `yarn.nodemanager.address` | `${yarn.nodemanager.hostname}:0` |
//! | http port (`/metrics`) | `yarn.nodemanager.webapp.address` | `${yarn.nodemanager.hostname}:8042` |
//! | resources | `yarn.nodemanager.resource.memory-mb`, `…cpu-vcores` | 8192, 8 |
//! | RM unreachable | `yarn.nodemanager.resourcemanager.connect.max-wait.ms`, else `yarn.resourcemanager.connect.max-wait.ms` (-1: forever); `…connect.retry-interval.ms` likewise | 900000, 30000 |
//! | completions tracked | `yarn.nodemanager.duration-to-track-stopped-containers` | 600000 |
//! | health | `yarn.nodemanager.local-dirs`, `…log-dirs`, `…disk-health-checker.*` (`enable`, `interval-ms`, `min-healthy-disks`, `max-disk-utilization-per-disk-percentage`, `disk-utilization-watermark-low-per-disk-percentage`, `min-free-space-per-disk-mb`, `min-free-space-per-disk-watermark-high-mb`, `disk-utilization-threshold.enabled`, `disk-free-space-threshold.enabled`), `…health-checker.script.*` | Hadoop's |
//! | control socket | `hotpath.agent.control-socket` | `/tmp/hotpath-agent.sock` |
//! | cleanup grace | `hotpath.agent.cleanup-grace-ms` | 5000 |
//! | table size | `hotpath.agent.max-containers` | 10000 |
//! | HDFS reader (resource localization) | `fs.defaultFS` = `hdfs://…` starts it; `dfs.*` as for `hotpath hdfs` | `file:///`: none |
//! | localize requests that may wait | `hotpath.agent.localize.queue-depth` | 16 |
//! | RM authentication ([`RmSecurity`]) | `hadoop.security.authentication`, `hadoop.rpc.protection`, `yarn.nodemanager.principal`, `yarn.nodemanager.keytab`, `yarn.resourcemanager.principal` | SIMPLE |
//!
//! The HDFS reader's part is [`HdfsSettings`]; a value the agent cannot use is a
//! [`ConfigError`].
//!
//! The NodeId host is chosen as a Java NodeManager chooses it ([`node_address`],
//! [`crate::node_host`]): the canonical name of the bound IP (of the local host's IP when the
//! node binds `0.0.0.0`); `yarn.nodemanager.bind-host` is honoured.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

use conf::Configuration;

use crate::simulate::SimConfig;
use nm_core::health::HealthConfig;

/// Why the agent's settings cannot be read from the configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A value that does not parse as its key's type (the `conf` crate's error).
    #[error(transparent)]
    Conf(#[from] conf::Error),
    /// A value (or a combination of values) the agent cannot run with.
    #[error("configuration: {0}")]
    Invalid(String),
}

/// Localize requests that may wait for the reader when `hotpath.agent.localize.queue-depth`
/// is not set.
pub const DEFAULT_QUEUE_DEPTH: usize = 16;
/// The largest queue depth accepted from the configuration.
pub const MAX_QUEUE_DEPTH: usize = 1024;
/// Everything the agent needs to start.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// The resource tracker (under HA: the first rm-id's).
    pub rm_addr: SocketAddr,
    /// RM HA: every rm-id's resource tracker and the failover policy; `None`: one RM.
    pub rm_ha: Option<RmHa>,
    /// The IP the agent's servers bind.
    pub bind_ip: IpAddr,
    /// The host the node registers as.
    pub node_host: String,
    /// The node port; 0 = the IPC server's ephemeral port.
    pub node_port: u16,
    /// The metrics HTTP port (0 = ephemeral); `None` = no HTTP server (the http port is then
    /// reported as `http_port_fallback`).
    pub http_port: Option<u16>,
    pub memory_mb: i64,
    pub vcores: i32,
    /// `None` = retry forever.
    pub connect_max_wait: Option<Duration>,
    pub retry_interval: Duration,
    pub track_stopped_ms: u64,
    pub default_interval_ms: u64,
    pub call_timeout: Duration,
    pub control_socket: Option<PathBuf>,
    pub cleanup_grace: Duration,
    pub max_containers: usize,
    pub health: HealthConfig,
    pub simulate: Option<SimConfig>,
    /// Pin threads by the `hw` plan.
    pub pin: bool,
    /// Run the agent's own IPC server (getNodeReport, getBuffer).
    pub ipc_server: bool,
    /// Pool chunks of the IPC server (64 KiB each).
    pub ipc_pool_chunks: usize,
    /// Record every completion's id (the demo's accounting).
    pub journal: bool,
    /// `fs.defaultFS` as configured (named in the "HDFS not configured" answer).
    pub default_fs: String,
    /// The HDFS reader's settings when `fs.defaultFS` is `hdfs://…`; `None`: no reader thread.
    pub hdfs: Option<HdfsSettings>,
    /// Port of the agent's own IPC server (`getNodeReport`, `getBuffer`):
    /// `hotpath.agent.ipc.address`'s port, 0 (ephemeral) by default. The node address itself
    /// serves ContainerManagementProtocol.
    pub ipc_port: u16,
    /// The NodeManager's settings (containers, launch, logs).
    pub nm: NmSettings,
    /// How the agent authenticates to the RM's resource tracker.
    pub rm_security: RmSecurity,
    /// `ipc.client.connection.maxidletime` for the RM connection (`ipc::client::ClientConfig::
    /// max_idle`; heartbeats keep it busy, so it closes only when they stop); the NameNode
    /// connections of localization read the same key themselves.
    pub rm_max_idle: Option<Duration>,
}

/// RM HA from the node's side (production.md §1.1–§1.3), read as Java's `HAUtil` and
/// `ServerRMProxy` read it: `yarn.resourcemanager.ha.enabled=true` and
/// `yarn.resourcemanager.ha.rm-ids` in the agent's own configuration; each rm-id's resource
/// tracker from `yarn.resourcemanager.resource-tracker.address.<id>`, else
/// `yarn.resourcemanager.hostname.<id>` with port 8031 (never the unsuffixed key's port).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RmHa {
    /// In configured order (the first one is tried first).
    pub rms: Vec<RmEndpoint>,
    pub policy: nm_core::rm_failover::FailoverPolicy,
}

/// One ResourceManager of an HA set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RmEndpoint {
    /// Its rm-id (`rm1`).
    pub id: String,
    /// Its resource tracker.
    pub addr: SocketAddr,
}

impl RmHa {
    /// The HA settings, or `None` when `yarn.resourcemanager.ha.enabled` is false.
    /// `max_wait` / `interval` are the NM's connect budget (`None` = wait forever).
    pub fn from_conf(
        conf: &Configuration,
        max_wait: Option<Duration>,
        interval: Duration,
    ) -> Result<Option<RmHa>, ConfigError> {
        if !get_bool_or(conf, "yarn.resourcemanager.ha.enabled", false)? {
            return Ok(None);
        }
        // Java splits on ',' without trimming but trims the id when it looks a key up.
        let ids = conf.get_trimmed_strings("yarn.resourcemanager.ha.rm-ids")?;
        if ids.is_empty() {
            return Err(ConfigError::Invalid(
                "yarn.resourcemanager.ha.enabled is true but yarn.resourcemanager.ha.rm-ids \
                 names no ResourceManager"
                    .into(),
            ));
        }
        let mut rms = Vec::with_capacity(ids.len());
        for id in ids {
            let key = format!("yarn.resourcemanager.resource-tracker.address.{id}");
            let host_key = format!("yarn.resourcemanager.hostname.{id}");
            let hp = if conf.try_get(&key)?.is_some_and(|v| !v.trim().is_empty()) {
                conf.get_socket_addr(&key, 8031)?
            } else if let Some(h) = conf.try_get(&host_key)?.map(str::trim) {
                conf::HostPort {
                    host: h.to_string(),
                    port: 8031,
                }
            } else {
                // Java's HAUtil.checkAndSetRMRPCAddress, word for word.
                return Err(ConfigError::Invalid(format!(
                    "Invalid configuration! {host_key} or {key} needs to be set in an HA \
                     configuration."
                )));
            };
            let host = if hp.host == "0.0.0.0" {
                "127.0.0.1"
            } else {
                hp.host.as_str()
            };
            let addr = resolve(&format!("RM {id} resource-tracker address"), host, hp.port)?;
            if rms.iter().any(|r: &RmEndpoint| r.id == id) {
                return Err(ConfigError::Invalid(format!(
                    "yarn.resourcemanager.ha.rm-ids names {id} twice"
                )));
            }
            rms.push(RmEndpoint { id, addr });
        }
        let ms = |k: &str| -> Result<Option<Duration>, ConfigError> {
            Ok(match conf.try_get(k)? {
                Some(v) if !v.trim().is_empty() => {
                    Some(Duration::from_millis(conf.get_duration_ms(k)?))
                }
                _ => None,
            })
        };
        let base = ms("yarn.client.failover-sleep-base-ms")?;
        let policy = if base.is_some() {
            let attempts = match conf.try_get("yarn.client.failover-max-attempts")? {
                Some(v) if !v.trim().is_empty() => {
                    let n = conf.get_i64("yarn.client.failover-max-attempts")?;
                    (n >= 0).then(|| u32::try_from(n).unwrap_or(u32::MAX))
                }
                _ => None,
            };
            nm_core::rm_failover::FailoverPolicy::java(
                max_wait,
                interval,
                base,
                ms("yarn.client.failover-sleep-max-ms")?,
                attempts,
            )
        } else {
            nm_core::rm_failover::FailoverPolicy::agent_default(
                max_wait,
                ms("hotpath.agent.rm-failover.sleep-base-ms")?
                    .unwrap_or(Duration::from_millis(100)),
                ms("hotpath.agent.rm-failover.sleep-max-ms")?.unwrap_or(Duration::from_secs(2)),
            )
        };
        Ok(Some(RmHa { rms, policy }))
    }
}

/// How the agent authenticates to the RM's resource tracker, as Java's NodeManager does: SIMPLE,
/// or with `hadoop.security.authentication=kerberos` SASL KERBEROS (GSSAPI) as the node's own
/// principal, accepting only the RM's principal, at the `hadoop.rpc.protection` the RM offers.
#[derive(Debug, Clone, Default)]
pub struct RmSecurity {
    /// `hadoop.security.authentication`, `hadoop.rpc.protection`,
    /// `ipc.client.fallback-to-simple-auth-allowed` (`ipc::sasl::client_auth`).
    pub auth: hadoop_wire::sasl::client::ClientAuth,
    /// Set when `hadoop.security.authentication` is `kerberos`.
    pub kerberos: Option<RmKerberos>,
}

/// The agent's Kerberos settings for its RM connection.
#[derive(Debug, Clone)]
pub struct RmKerberos {
    /// `yarn.nodemanager.principal`, `_HOST` replaced by the local host's canonical name (Java's
    /// `SecurityUtil.login`); `None`: the ticket cache's principal.
    pub node_principal: Option<String>,
    /// `yarn.nodemanager.keytab`: the agent logs in from it itself, its tickets in memory
    /// (`ipc::kerberos::MitGss::from_keytab`); `None`: MIT's `KRB5CCNAME` /
    /// `KRB5_CLIENT_KTNAME` decide.
    pub keytab: Option<PathBuf>,
    /// `yarn.resourcemanager.principal` as configured; `_HOST` is replaced by the canonical name
    /// of the RM's address when connecting (Java's `SaslRpcClient`).
    pub rm_principal: String,
}

impl RmSecurity {
    /// Reads the keys (see [`RmSecurity`]). On a Kerberized cluster
    /// `yarn.resourcemanager.principal` must be set, and a `yarn.nodemanager.keytab` needs
    /// `yarn.nodemanager.principal` ([`node_keytab`]); nothing is asked of the KDC here.
    pub fn from_conf(conf: &Configuration) -> Result<RmSecurity, ConfigError> {
        let auth = ipc::sasl::client_auth(conf, None).map_err(|e| {
            ConfigError::Invalid(format!("the RM connection's authentication: {e}"))
        })?;
        let kerberos = conf
            .get("hadoop.security.authentication")
            .is_some_and(|m| m.trim().eq_ignore_ascii_case("kerberos"));
        if !kerberos {
            return Ok(RmSecurity {
                auth,
                kerberos: None,
            });
        }
        let Some(rm_principal) = conf
            .get("yarn.resourcemanager.principal")
            .map(str::trim)
            .filter(|p| !p.is_empty())
        else {
            return Err(ConfigError::Invalid(
                "hadoop.security.authentication is kerberos but yarn.resourcemanager.principal \
                 is not set: the agent accepts only the RM's own principal"
                    .into(),
            ));
        };
        let keytab = node_keytab(conf)?;
        let node_principal = node_principal(
            conf,
            &ipc::kerberos::server_host_name(std::net::Ipv4Addr::UNSPECIFIED.into()),
        );
        Ok(RmSecurity {
            auth,
            kerberos: Some(RmKerberos {
                node_principal,
                keytab,
                rm_principal: rm_principal.to_string(),
            }),
        })
    }

    /// The client authentication for the RM at `rm`: on a Kerberized cluster the agent logs in
    /// now (from its keytab: an AS exchange with the KDC, so a keytab without the principal, an
    /// unreadable one or a refusing KDC fail here, naming both keys), and expects the RM as
    /// `yarn.resourcemanager.principal` with `_HOST` = the canonical name of `rm`'s address.
    /// Every connection (a reconnect after an RM restart or a dropped connection included)
    /// acquires the credential again from the login's ticket cache; MIT gets a new ticket from
    /// the keytab when the old one is half-way to its expiry.
    pub fn login(
        &self,
        rm: SocketAddr,
    ) -> Result<hadoop_wire::sasl::client::ClientAuth, ConfigError> {
        let mut auth = self.auth.clone();
        let Some(k) = &self.kerberos else {
            return Ok(auth);
        };
        let gss = ipc::kerberos::MitGss::login(k.node_principal.clone(), k.keytab.as_deref())
            .map_err(|e| match e {
                ipc::kerberos::LoginError::Keytab {
                    principal,
                    keytab,
                    reason,
                } => ConfigError::Invalid(format!(
                    "the agent's Kerberos login (yarn.nodemanager.principal = {principal}, \
                     yarn.nodemanager.keytab = {}) failed: {reason}",
                    keytab.display()
                )),
                // `from_conf` refuses a keytab without a principal (`node_keytab`)
                e => ConfigError::Invalid(format!("the agent's Kerberos login: {e}")),
            })?;
        let host = ipc::kerberos::canonical_host_name(rm.ip());
        auth.kerberos = Some(hadoop_wire::sasl::gssapi::KerberosClient {
            server_principal: hadoop_wire::sasl::gssapi::replace_host(&k.rm_principal, &host),
            contexts: std::sync::Arc::new(gss),
        });
        Ok(auth)
    }
}

fn resolve(what: &str, host: &str, port: u16) -> Result<SocketAddr, ConfigError> {
    (host, port)
        .to_socket_addrs()
        .map_err(|e| ConfigError::Invalid(format!("{what} {host}:{port}: {e}")))?
        .next()
        .ok_or_else(|| ConfigError::Invalid(format!("{what} {host}:{port}: no address")))
}

/// The machine's host name (`/proc/sys/kernel/hostname`), else `localhost`.
pub fn local_hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// The address the node's servers bind and the NodeId host, as Java's NodeManager picks
/// them ([`crate::node_host`]): bind on `yarn.nodemanager.bind-host` if set, else on the
/// host of `yarn.nodemanager.address` (default `${yarn.nodemanager.hostname}:0`); the host is
/// the canonical (reverse-DNS, forward-checked) name of the bound IP, of the local host's IP
/// for a wildcard bind, or of the address's host when both keys are set.
pub fn node_address(
    conf: &Configuration,
    resolver: &dyn crate::node_host::Resolver,
) -> Result<(IpAddr, String), ConfigError> {
    let node = conf.get_address("yarn.nodemanager.address")?;
    let bind_host = conf
        .get("yarn.nodemanager.bind-host")
        .map(str::trim)
        .filter(|h| !h.is_empty());
    // yarn-default.xml sets it (`${yarn.nodemanager.hostname}:0`), so Java's check passes
    // whenever the expanded value is not empty
    let address_set = conf
        .get("yarn.nodemanager.address")
        .is_some_and(|v| !v.trim().is_empty());
    let unresolvable =
        |h: &str| ConfigError::Invalid(format!("node address {h}:{}: does not resolve", node.port));
    let bind_ip = match bind_host {
        Some(h) => crate::node_host::resolve_first(resolver, h).ok_or_else(|| unresolvable(h))?,
        None => crate::node_host::resolve_first(resolver, &node.host)
            .ok_or_else(|| unresolvable(&node.host))?,
    };
    let host_override = (bind_host.is_some() && address_set).then_some(node.host.as_str());
    let host = crate::node_host::node_host(resolver, bind_ip, host_override)
        .map_err(ConfigError::Invalid)?;
    Ok((bind_ip, host))
}

/// A comma-separated list of dirs (`yarn.nodemanager.local-dirs`, `…log-dirs`), each
/// validated and normalized as Java's `LocalDirsHandlerService.validatePaths` does.
pub fn dirs_from_conf(conf: &Configuration, key: &str) -> Result<Vec<PathBuf>, ConfigError> {
    conf.get_trimmed_strings(key)?
        .iter()
        .map(|d| {
            nm_core::disks::validate_dir(d)
                .map(PathBuf::from)
                .map_err(|e| ConfigError::Invalid(format!("{key}: {e}")))
        })
        .collect()
}

fn get_i64_or(conf: &Configuration, key: &str, default: i64) -> Result<i64, ConfigError> {
    match conf.try_get(key)? {
        Some(_) => Ok(conf.get_i64(key)?),
        None => Ok(default),
    }
}

fn get_bool_or(conf: &Configuration, key: &str, default: bool) -> Result<bool, ConfigError> {
    match conf.try_get(key)? {
        Some(v) if !v.trim().is_empty() => Ok(conf.get_bool(key)?),
        _ => Ok(default),
    }
}

/// What the NodeManager part of the agent reads from the configuration.
#[derive(Debug, Clone)]
pub struct NmSettings {
    /// `yarn.nodemanager.log-dirs` (`/tmp/logs` when unset, Java's code default).
    pub log_dirs: Vec<PathBuf>,
    /// `hadoop.rpc.protection` of the ContainerManagementProtocol server.
    pub rpc_protection: Vec<hadoop_wire::sasl::Qop>,
    /// `hadoop.security.sasl.mechanism`.
    pub sasl_mechanism: String,
    /// `yarn.nodemanager.aux-services`: at most `mapreduce_shuffle` (served by
    /// [`crate::shuffle`]; any other name stops the agent at start); a start naming a service
    /// not listed is refused as Java refuses an unknown one.
    pub aux_services: Vec<String>,
    /// `yarn.nodemanager.env-whitelist`.
    pub env_whitelist: Vec<String>,
    /// `yarn.resourcemanager.work-preserving-recovery.enabled` as the node reads it (Java's
    /// `NodeManager.resyncWithRM`): true (default) keeps the containers on a RESYNC; false
    /// kills them all, then re-registers with their final statuses.
    pub work_preserving_recovery: bool,
    /// `yarn.nodemanager.admin-env`.
    pub admin_env: String,
    /// `yarn.nodemanager.force.path`.
    pub force_path: Option<String>,
    /// `yarn.nodemanager.user-home-dir`.
    pub user_home_dir: String,
    /// `yarn.nodemanager.sleep-delay-before-sigkill.ms`.
    pub sigkill_delay: Duration,
    /// `yarn.nodemanager.process-kill-wait.ms`.
    pub process_kill_wait: Duration,
    /// `yarn.nodemanager.log-container-debug-info.enabled`.
    pub debug_info: bool,
    /// `hotpath.agent.cgroups`: `auto` (probe v1/v2) or `off` (affinity and rlimit only).
    pub cgroups: bool,
    /// `yarn.nodemanager.recovery.enabled`: containers of a restarted agent are recovered
    /// from their pid and exit-code files, else reported lost.
    pub recovery: bool,
    /// `yarn.nodemanager.pmem-check-enabled`: enforce each container's memory.
    pub pmem_check: bool,
    /// `hotpath.agent.launch.setup-in-agent` (default true): the agent makes the resource
    /// links and writes the debugging information itself instead of the launch script's
    /// `ln`, `cp`, `chmod`, `ls` and `find` processes ([`crate::setup`]).
    pub setup_in_agent: bool,
    /// `hotpath.agent.zygotes`: container processes kept ready (forked into their cgroups
    /// ahead of the launch); 0 forks at every launch. Default 4, at most 64.
    pub zygotes: usize,
    /// The `mapreduce_shuffle` service's settings (`mapreduce.shuffle.*`), when
    /// `yarn.nodemanager.aux-services` lists it ([`crate::shuffle::check_aux_services`]).
    pub shuffle: Option<crate::shuffle::ShuffleConfig>,
}

impl NmSettings {
    fn from_conf(conf: &Configuration) -> Result<NmSettings, ConfigError> {
        let strings = |key: &str, default: &str| -> Vec<String> {
            conf.get(key)
                .unwrap_or(default)
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect()
        };
        let flag = |key: &str, default: bool| -> Result<bool, ConfigError> {
            match conf.get(key).map(str::trim) {
                None | Some("") => Ok(default),
                Some(v) if v.eq_ignore_ascii_case("true") => Ok(true),
                Some(v) if v.eq_ignore_ascii_case("false") => Ok(false),
                Some(v) => Err(ConfigError::Invalid(format!(
                    "{key} = {v:?}: expected true or false"
                ))),
            }
        };
        let log_dirs = if conf
            .get("yarn.nodemanager.log-dirs")
            .is_some_and(|v| !v.trim().is_empty())
        {
            dirs_from_conf(conf, "yarn.nodemanager.log-dirs")?
        } else {
            vec![PathBuf::from("/tmp/logs")]
        };
        let aux_services = strings("yarn.nodemanager.aux-services", "");
        let shuffle = crate::shuffle::check_aux_services(conf, &aux_services)
            .and_then(|on| {
                on.then(|| crate::shuffle::ShuffleConfig::from_conf(conf))
                    .transpose()
            })
            .map_err(|e| ConfigError::Invalid(e.to_string()))?;
        let cgroups = match conf.get("hotpath.agent.cgroups").map(str::trim) {
            None | Some("") | Some("auto") => true,
            Some("off") => false,
            Some(v) => {
                return Err(ConfigError::Invalid(format!(
                    "hotpath.agent.cgroups = {v:?}: expected auto or off"
                )))
            }
        };
        Ok(NmSettings {
            log_dirs,
            rpc_protection: ipc::sasl::protection(conf)
                .map_err(|e| ConfigError::Invalid(e.to_string()))?,
            sasl_mechanism: conf
                .get("hadoop.security.sasl.mechanism")
                .unwrap_or("DIGEST-MD5")
                .trim()
                .to_string(),
            aux_services,
            env_whitelist: strings(
                "yarn.nodemanager.env-whitelist",
                "JAVA_HOME,HADOOP_COMMON_HOME,HADOOP_HDFS_HOME,HADOOP_CONF_DIR,CLASSPATH_PREPEND_DISTCACHE,HADOOP_YARN_HOME,HADOOP_HOME,PATH,LANG,TZ",
            ),
            admin_env: conf
                .get("yarn.nodemanager.admin-env")
                .unwrap_or("MALLOC_ARENA_MAX=$MALLOC_ARENA_MAX")
                .to_string(),
            force_path: conf
                .get("yarn.nodemanager.force.path")
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from),
            user_home_dir: conf
                .get("yarn.nodemanager.user-home-dir")
                .unwrap_or("/home/")
                .to_string(),
            sigkill_delay: Duration::from_millis(
                get_i64_or(conf, "yarn.nodemanager.sleep-delay-before-sigkill.ms", 250)?.max(0)
                    as u64,
            ),
            process_kill_wait: Duration::from_millis(
                get_i64_or(conf, "yarn.nodemanager.process-kill-wait.ms", 5000)?.max(0) as u64,
            ),
            debug_info: flag("yarn.nodemanager.log-container-debug-info.enabled", true)?,
            work_preserving_recovery: flag(
                "yarn.resourcemanager.work-preserving-recovery.enabled",
                true,
            )?,
            cgroups,
            recovery: flag("yarn.nodemanager.recovery.enabled", false)?,
            pmem_check: flag("yarn.nodemanager.pmem-check-enabled", true)?,
            setup_in_agent: flag("hotpath.agent.launch.setup-in-agent", true)?,
            zygotes: match get_i64_or(conf, "hotpath.agent.zygotes", 4)? {
                n @ 0..=64 => n as usize,
                n => {
                    return Err(ConfigError::Invalid(format!(
                        "hotpath.agent.zygotes = {n}: expected 0 to 64"
                    )))
                }
            },
            shuffle,
        })
    }
}

impl AgentConfig {
    /// Reads the settings (see the module docs).
    pub fn from_conf(conf: &Configuration) -> Result<Self, ConfigError> {
        // ServerRMProxy: the NM's own budget keys first, the RM client's as the fallback.
        let nm_or = |nm_key: &str, key: &str| -> Result<i64, ConfigError> {
            match conf.try_get(nm_key)? {
                Some(v) if !v.trim().is_empty() => Ok(conf.get_i64(nm_key)?),
                _ => Ok(conf.get_i64(key)?),
            }
        };
        let max_wait = nm_or(
            "yarn.nodemanager.resourcemanager.connect.max-wait.ms",
            "yarn.resourcemanager.connect.max-wait.ms",
        )?;
        let interval_key =
            match conf.try_get("yarn.nodemanager.resourcemanager.connect.retry-interval.ms")? {
                Some(v) if !v.trim().is_empty() => {
                    "yarn.nodemanager.resourcemanager.connect.retry-interval.ms"
                }
                _ => "yarn.resourcemanager.connect.retry-interval.ms",
            };
        let retry_interval = Duration::from_millis(conf.get_duration_ms(interval_key)?.max(1));
        let connect_max_wait = (max_wait >= 0).then(|| Duration::from_millis(max_wait as u64));
        let rm_ha = RmHa::from_conf(conf, connect_max_wait, retry_interval)?;
        let rm_addr = match &rm_ha {
            Some(ha) => ha.rms[0].addr,
            None => {
                let rm = conf.get_address("yarn.resourcemanager.resource-tracker.address")?;
                let rm_host = if rm.host == "0.0.0.0" {
                    "127.0.0.1"
                } else {
                    rm.host.as_str()
                };
                resolve("RM resource-tracker address", rm_host, rm.port)?
            }
        };
        let (bind_ip, node_host) = node_address(conf, &crate::node_host::SystemResolver)?;
        let node = conf.get_address("yarn.nodemanager.address")?;
        // Not in conf's defaults table yet (see the requests note): Hadoop's default.
        let webapp = match conf.try_get("yarn.nodemanager.webapp.address")? {
            Some(_) => conf.get_address("yarn.nodemanager.webapp.address")?.port,
            None => 8042,
        };
        let local_dirs = dirs_from_conf(conf, "yarn.nodemanager.local-dirs")?;
        let script = conf
            .get("yarn.nodemanager.health-checker.script.path")
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(PathBuf::from);
        let script_args = conf
            .get("yarn.nodemanager.health-checker.script.opts")
            .map(|s| s.split_whitespace().map(String::from).collect())
            .unwrap_or_default();
        const DHC: &str = "yarn.nodemanager.disk-health-checker.";
        let float = |key: &str| -> Result<Option<f32>, ConfigError> {
            conf.get(&format!("{DHC}{key}"))
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .map(|v| {
                    v.parse::<f32>().map_err(|_| {
                        ConfigError::Invalid(format!("{DHC}{key} = {v:?}: expected a number"))
                    })
                })
                .transpose()
        };
        let long = |key: &str| -> Result<Option<i64>, ConfigError> {
            let k = format!("{DHC}{key}");
            Ok(match conf.try_get(&k)? {
                Some(v) if !v.trim().is_empty() => Some(conf.get_i64(&k)?),
                _ => None,
            })
        };
        let flag = |key: &str| -> Result<bool, ConfigError> {
            match conf.get(&format!("{DHC}{key}")).map(str::trim) {
                None | Some("") => Ok(true),
                Some(v) if v.eq_ignore_ascii_case("true") => Ok(true),
                Some(v) if v.eq_ignore_ascii_case("false") => Ok(false),
                Some(v) => Err(ConfigError::Invalid(format!(
                    "{DHC}{key} = {v:?}: expected true or false"
                ))),
            }
        };
        let control_socket = conf
            .get("hotpath.agent.control-socket")
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(PathBuf::from);
        Ok(AgentConfig {
            rm_addr,
            rm_ha,
            bind_ip,
            node_host,
            node_port: node.port,
            http_port: Some(webapp),
            memory_mb: conf.get_i64("yarn.nodemanager.resource.memory-mb")?,
            vcores: conf
                .get_i64("yarn.nodemanager.resource.cpu-vcores")?
                .clamp(0, i32::MAX as i64) as i32,
            connect_max_wait,
            retry_interval,
            track_stopped_ms: conf
                .get_duration_ms("yarn.nodemanager.duration-to-track-stopped-containers")?,
            default_interval_ms: conf
                .get_duration_ms("yarn.resourcemanager.nodemanagers.heartbeat-interval-ms")?
                .max(1),
            call_timeout: Duration::from_secs(20),
            control_socket,
            cleanup_grace: Duration::from_millis(
                get_i64_or(conf, "hotpath.agent.cleanup-grace-ms", 5000)?.max(0) as u64,
            ),
            max_containers: get_i64_or(conf, "hotpath.agent.max-containers", 10_000)?.max(1)
                as usize,
            health: HealthConfig {
                local_dirs,
                max_utilization_percent: float("max-disk-utilization-per-disk-percentage")?
                    .unwrap_or(90.0),
                low_utilization_percent: float(
                    "disk-utilization-watermark-low-per-disk-percentage",
                )?,
                min_free_mb: long("min-free-space-per-disk-mb")?.unwrap_or(0),
                high_free_mb: long("min-free-space-per-disk-watermark-high-mb")?,
                utilization_check: flag("disk-utilization-threshold.enabled")?,
                free_space_check: flag("disk-free-space-threshold.enabled")?,
                min_healthy_disks: float("min-healthy-disks")?.unwrap_or(0.25),
                disk_check_enabled: flag("enable")?,
                disk_interval: Duration::from_millis(
                    long("interval-ms")?.unwrap_or(120_000).max(1) as u64,
                ),
                script,
                script_args,
                script_interval: Duration::from_millis(
                    conf.get_duration_ms("yarn.nodemanager.health-checker.interval-ms")?
                        .max(1),
                ),
                script_timeout: Duration::from_millis(
                    get_i64_or(
                        conf,
                        "yarn.nodemanager.health-checker.script.timeout-ms",
                        1_200_000,
                    )?
                    .max(1) as u64,
                ),
            },
            simulate: None,
            pin: true,
            ipc_server: true,
            ipc_pool_chunks: 16,
            journal: false,
            default_fs: default_fs(conf),
            hdfs: HdfsSettings::from_conf(conf)?,
            ipc_port: match conf.get("hotpath.agent.ipc.address").map(str::trim) {
                None | Some("") => 0,
                Some(v) => v
                    .rsplit_once(':')
                    .and_then(|(_, p)| p.parse().ok())
                    .ok_or_else(|| {
                        ConfigError::Invalid(format!(
                            "hotpath.agent.ipc.address = {v:?}: expected host:port"
                        ))
                    })?,
            },
            nm: NmSettings::from_conf(conf)?,
            rm_security: RmSecurity::from_conf(conf)?,
            rm_max_idle: ipc::client::max_idle_from_conf(conf)?,
        })
    }
}

impl AgentConfig {
    /// A self-contained agent on `ip` (port 0, http port 0) for the RM at `rm`: Hadoop's
    /// defaults otherwise, local dirs and control socket under `dir`, no pinning. Used by the
    /// demo and the tests.
    pub fn local(rm: SocketAddr, ip: IpAddr, dir: &std::path::Path) -> Result<Self, ConfigError> {
        let mut cfg = AgentConfig::from_conf(&Configuration::new())?;
        cfg.rm_addr = rm;
        cfg.bind_ip = ip;
        cfg.node_host = ip.to_string();
        cfg.node_port = 0;
        cfg.http_port = Some(0);
        cfg.control_socket = Some(dir.join("agent.sock"));
        cfg.health.local_dirs = vec![dir.join("local")];
        cfg.nm.log_dirs = vec![dir.join("logs")];
        cfg.health.max_utilization_percent = 100.0;
        cfg.pin = false;
        Ok(cfg)
    }
}

/// What the HDFS reader ([`crate::hdfs_reader`]) needs: the configuration its `DfsClient` is
/// built from.
#[derive(Debug, Clone)]
pub struct HdfsSettings {
    /// The whole configuration (`fs.defaultFS`, `dfs.*`, HA keys).
    pub conf: Configuration,
    /// `fs.defaultFS` as configured, e.g. `hdfs://nn1:8020`.
    pub default_fs: String,
    /// `hotpath.agent.localize.queue-depth`.
    pub queue_depth: usize,
}

/// `hadoop.security.authentication` is `kerberos`.
pub(crate) fn is_kerberos(conf: &Configuration) -> bool {
    conf.get("hadoop.security.authentication")
        .is_some_and(|m| m.trim().eq_ignore_ascii_case("kerberos"))
}

/// The agent's own principal for its HDFS reads: `yarn.nodemanager.principal` with `_HOST`
/// replaced by `host` (`None` when unset: the ticket cache's principal).
pub fn node_principal(conf: &Configuration, host: &str) -> Option<String> {
    conf.get("yarn.nodemanager.principal")
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| hadoop_wire::sasl::gssapi::replace_host(p, host))
}

/// `yarn.nodemanager.keytab`: the keytab of the agent's own login for its HDFS reads (`None`
/// when unset: MIT's `KRB5CCNAME` / `KRB5_CLIENT_KTNAME` decide). Set without
/// `yarn.nodemanager.principal` it is an error naming both (Java would log in as the OS user;
/// the agent refuses to guess).
pub fn node_keytab(conf: &Configuration) -> Result<Option<PathBuf>, ConfigError> {
    let Some(keytab) = conf
        .get("yarn.nodemanager.keytab")
        .map(str::trim)
        .filter(|k| !k.is_empty())
    else {
        return Ok(None);
    };
    if node_principal(conf, "_HOST").is_none() {
        return Err(ConfigError::Invalid(format!(
            "yarn.nodemanager.keytab is set ({keytab}) but yarn.nodemanager.principal is not: \
             the agent's Kerberos login needs the principal whose key the keytab holds"
        )));
    }
    Ok(Some(PathBuf::from(keytab)))
}

impl HdfsSettings {
    /// `Some` when `fs.defaultFS` is an `hdfs://` URI; `None` otherwise (no reader thread).
    /// On a Kerberized cluster a `yarn.nodemanager.keytab` without `yarn.nodemanager.principal`
    /// is refused here ([`node_keytab`]).
    pub fn from_conf(conf: &Configuration) -> Result<Option<HdfsSettings>, ConfigError> {
        let fs = default_fs(conf);
        if !fs.to_ascii_lowercase().starts_with("hdfs://") {
            return Ok(None);
        }
        if is_kerberos(conf) {
            node_keytab(conf)?;
        }
        let depth = match conf.try_get("hotpath.agent.localize.queue-depth")? {
            Some(_) => conf.get_i64("hotpath.agent.localize.queue-depth")?,
            None => DEFAULT_QUEUE_DEPTH as i64,
        };
        if !(1..=MAX_QUEUE_DEPTH as i64).contains(&depth) {
            return Err(ConfigError::Invalid(format!(
                "hotpath.agent.localize.queue-depth = {depth}: expected 1..={MAX_QUEUE_DEPTH}"
            )));
        }
        Ok(Some(HdfsSettings {
            conf: conf.clone(),
            default_fs: fs,
            queue_depth: depth as usize,
        }))
    }
}

/// `fs.defaultFS`, trimmed (`file:///` when unset).
pub fn default_fs(conf: &Configuration) -> String {
    conf.get("fs.defaultFS")
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .unwrap_or("file:///")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(keys: &[(&str, &str)]) -> Configuration {
        let mut c = Configuration::new();
        for (k, v) in keys {
            c.set(k, v);
        }
        c
    }

    #[test]
    fn the_node_binds_and_names_itself_as_javas_nodemanager() {
        use crate::node_host::{canonical_host_name, SystemResolver};
        let r = SystemResolver;
        let canon = |ip: &str| canonical_host_name(&r, ip.parse().unwrap());
        // ${yarn.nodemanager.hostname} expands into the default address
        let (ip, host) =
            node_address(&conf(&[("yarn.nodemanager.hostname", "127.0.0.2")]), &r).unwrap();
        assert_eq!(ip.to_string(), "127.0.0.2");
        assert_eq!(host, canon("127.0.0.2"));
        // an explicit address: its IP's canonical name (not the configured text)
        let (ip, host) =
            node_address(&conf(&[("yarn.nodemanager.address", "localhost:8041")]), &r).unwrap();
        assert_eq!(ip.to_string(), "127.0.0.1");
        assert_eq!(host, canon("127.0.0.1"));
        // bind-host 0.0.0.0 with an address: binds everything, named after the address
        let (ip, host) = node_address(
            &conf(&[
                ("yarn.nodemanager.bind-host", "0.0.0.0"),
                ("yarn.nodemanager.address", "127.0.0.1:8041"),
            ]),
            &r,
        )
        .unwrap();
        assert!(ip.is_unspecified());
        assert_eq!(host, canon("127.0.0.1"));
        // the default wildcard: the local host's canonical name
        let (ip, host) = node_address(&conf(&[]), &r).unwrap();
        assert!(ip.is_unspecified());
        assert_eq!(
            host,
            canonical_host_name(&r, crate::node_host::local_host_address(&r))
        );
        let cfg =
            AgentConfig::from_conf(&conf(&[("yarn.nodemanager.address", "127.0.0.1:0")])).unwrap();
        assert_eq!(cfg.node_host, canon("127.0.0.1"));
        // a dir with another scheme is refused as Java refuses it
        let e = AgentConfig::from_conf(&conf(&[("yarn.nodemanager.local-dirs", "hdfs://nn/x")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("hdfs://nn/x is not a valid path. Path should be with file scheme or without scheme"), "{e}");
    }

    #[test]
    fn without_ha_the_agent_talks_to_the_unsuffixed_resource_tracker() {
        let c = AgentConfig::from_conf(&conf(&[
            (
                "yarn.resourcemanager.resource-tracker.address",
                "127.0.0.1:9031",
            ),
            (
                "yarn.resourcemanager.resource-tracker.address.rm1",
                "127.0.0.2:1",
            ),
            ("yarn.resourcemanager.ha.rm-ids", "rm1,rm2"),
        ]))
        .unwrap();
        assert!(c.rm_ha.is_none());
        assert_eq!(c.rm_addr, "127.0.0.1:9031".parse().unwrap());
        assert!(c.nm.work_preserving_recovery);
    }

    #[test]
    fn ha_reads_each_rm_id_as_hautil_does_and_ignores_the_unsuffixed_key() {
        let c = AgentConfig::from_conf(&conf(&[
            ("yarn.resourcemanager.ha.enabled", "true"),
            ("yarn.resourcemanager.ha.rm-ids", "rmA, rmB ,rmC"),
            (
                "yarn.resourcemanager.resource-tracker.address",
                "127.0.0.9:9999",
            ),
            (
                "yarn.resourcemanager.resource-tracker.address.rmA",
                "127.0.0.1:18031",
            ),
            // hostname.<id> implies 8031, not the unsuffixed key's port
            ("yarn.resourcemanager.hostname.rmB", "127.0.0.2"),
            // the address wins over the hostname; a host alone gets 8031
            ("yarn.resourcemanager.hostname.rmC", "127.0.0.4"),
            (
                "yarn.resourcemanager.resource-tracker.address.rmC",
                "127.0.0.3",
            ),
        ]))
        .unwrap();
        let ha = c.rm_ha.as_ref().unwrap();
        let got: Vec<(&str, String)> = ha
            .rms
            .iter()
            .map(|r| (r.id.as_str(), r.addr.to_string()))
            .collect();
        assert_eq!(
            got,
            [
                ("rmA", "127.0.0.1:18031".to_string()),
                ("rmB", "127.0.0.2:8031".to_string()),
                ("rmC", "127.0.0.3:8031".to_string()),
            ]
        );
        assert_eq!(c.rm_addr, ha.rms[0].addr);
        // the agent's fast default sleeps, budget = connect.max-wait
        assert_eq!(ha.policy.base, Duration::from_millis(100));
        assert_eq!(ha.policy.max, Duration::from_secs(2));
        assert_eq!(ha.policy.max_wait, Some(Duration::from_secs(900)));
        assert_eq!(ha.policy.max_failovers, None);
    }

    #[test]
    fn an_rm_id_without_address_or_hostname_gets_javas_message() {
        let e = AgentConfig::from_conf(&conf(&[
            ("yarn.resourcemanager.ha.enabled", "true"),
            ("yarn.resourcemanager.ha.rm-ids", "rmA,rmB"),
            ("yarn.resourcemanager.hostname.rmA", "127.0.0.1"),
        ]))
        .unwrap_err()
        .to_string();
        assert!(
            e.contains(
                "Invalid configuration! yarn.resourcemanager.hostname.rmB or \
                 yarn.resourcemanager.resource-tracker.address.rmB needs to be set in an HA \
                 configuration."
            ),
            "{e}"
        );
        let e = AgentConfig::from_conf(&conf(&[("yarn.resourcemanager.ha.enabled", "true")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("rm-ids"), "{e}");
    }

    #[test]
    fn javas_failover_keys_and_the_nm_budget_keys() {
        let c = AgentConfig::from_conf(&conf(&[
            ("yarn.resourcemanager.ha.enabled", "true"),
            ("yarn.resourcemanager.ha.rm-ids", "rm1,rm2"),
            ("yarn.resourcemanager.hostname.rm1", "127.0.0.1"),
            ("yarn.resourcemanager.hostname.rm2", "127.0.0.2"),
            ("yarn.resourcemanager.connect.max-wait.ms", "1"),
            (
                "yarn.nodemanager.resourcemanager.connect.max-wait.ms",
                "8000",
            ),
            (
                "yarn.nodemanager.resourcemanager.connect.retry-interval.ms",
                "1000",
            ),
            ("yarn.client.failover-sleep-base-ms", "1000"),
            (
                "yarn.resourcemanager.work-preserving-recovery.enabled",
                "false",
            ),
        ]))
        .unwrap();
        assert_eq!(c.connect_max_wait, Some(Duration::from_secs(8)));
        assert_eq!(c.retry_interval, Duration::from_secs(1));
        let p = &c.rm_ha.unwrap().policy;
        assert_eq!(p.max_failovers, Some(8), "max-wait / base, as Java");
        assert_eq!(
            p.max,
            Duration::from_secs(1),
            "max falls back to the interval"
        );
        assert!(!c.nm.work_preserving_recovery);
    }

    #[test]
    fn the_rm_connection_is_simple_unless_kerberos_is_configured() {
        let s = RmSecurity::from_conf(&conf(&[("hadoop.rpc.protection", "privacy")])).unwrap();
        assert!(s.kerberos.is_none());
        assert!(!s.auth.uses_sasl());
        assert_eq!(s.auth.qops, vec![hadoop_wire::sasl::Qop::AuthConf]);
        // SIMPLE needs no login
        let a = s.login("127.0.0.1:8031".parse().unwrap()).unwrap();
        assert!(a.kerberos.is_none());
    }

    #[test]
    fn a_kerberized_agent_needs_the_rm_principal_and_a_principal_for_its_keytab() {
        let e = RmSecurity::from_conf(&conf(&[("hadoop.security.authentication", "kerberos")]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("yarn.resourcemanager.principal is not set"),
            "{e}"
        );
        let e = RmSecurity::from_conf(&conf(&[
            ("hadoop.security.authentication", "kerberos"),
            ("yarn.resourcemanager.principal", "rm/_HOST@EXAMPLE.COM"),
            ("yarn.nodemanager.keytab", "/etc/nm.keytab"),
        ]))
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("yarn.nodemanager.keytab is set (/etc/nm.keytab)")
                && e.contains("yarn.nodemanager.principal is not"),
            "{e}"
        );
        let s = RmSecurity::from_conf(&conf(&[
            ("hadoop.security.authentication", "kerberos"),
            ("hadoop.rpc.protection", "integrity"),
            ("yarn.resourcemanager.principal", " rm/_HOST@EXAMPLE.COM "),
            ("yarn.nodemanager.principal", "nm/node1@EXAMPLE.COM"),
        ]))
        .unwrap();
        let k = s.kerberos.as_ref().unwrap();
        assert_eq!(k.rm_principal, "rm/_HOST@EXAMPLE.COM");
        assert_eq!(k.node_principal.as_deref(), Some("nm/node1@EXAMPLE.COM"));
        assert!(k.keytab.is_none());
        assert!(s.auth.security_enabled);
        // without a keytab MIT's environment logs in (lazily); _HOST = the RM's canonical name
        let a = s.login("127.0.0.1:8031".parse().unwrap()).unwrap();
        assert_eq!(
            a.kerberos.unwrap().server_principal,
            "rm/localhost@EXAMPLE.COM"
        );
    }

    #[test]
    fn a_keytab_that_cannot_be_read_stops_the_login_naming_both_keys() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nm.keytab");
        let missing_s = missing.display().to_string();
        let s = RmSecurity::from_conf(&conf(&[
            ("hadoop.security.authentication", "kerberos"),
            ("yarn.resourcemanager.principal", "rm/_HOST@EXAMPLE.COM"),
            ("yarn.nodemanager.principal", "nm/node1@EXAMPLE.COM"),
            ("yarn.nodemanager.keytab", &missing_s),
        ]))
        .unwrap();
        let e = s
            .login("127.0.0.1:8031".parse().unwrap())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!(
                "the agent's Kerberos login (yarn.nodemanager.principal = nm/node1@EXAMPLE.COM, \
                 yarn.nodemanager.keytab = {missing_s}) failed: cannot read the keytab"
            )),
            "{e}"
        );
    }
}
