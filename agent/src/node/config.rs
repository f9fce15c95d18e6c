//! The agent's settings, read from a `conf::Configuration` (yarn-site.xml and `--set`).
//!
//! | setting | key | default |
//! |---|---|---|
//! | RM address | `yarn.resourcemanager.resource-tracker.address` | `${yarn.resourcemanager.hostname}:8031` |
//! | node address (NodeId; the agent's IPC server binds it; port 0 = ephemeral) | `yarn.nodemanager.address` | `${yarn.nodemanager.hostname}:0` |
//! | http port (`/metrics`) | `yarn.nodemanager.webapp.address` | `${yarn.nodemanager.hostname}:8042` |
//! | resources | `yarn.nodemanager.resource.memory-mb`, `…cpu-vcores` | 8192, 8 |
//! | RM unreachable | `yarn.resourcemanager.connect.max-wait.ms` (-1: forever), `…retry-interval.ms` | 900000, 30000 |
//! | completions tracked | `yarn.nodemanager.duration-to-track-stopped-containers` | 600000 |
//! | health | `yarn.nodemanager.local-dirs`, `…disk-health-checker.*`, `…health-checker.script.*` | |
//! | control socket | `hotpath.agent.control-socket` | `/tmp/hotpath-agent.sock` |
//! | cleanup grace | `hotpath.agent.cleanup-grace-ms` | 5000 |
//! | table size | `hotpath.agent.max-containers` | 10000 |
//! | HDFS reader (resource localization) | `fs.defaultFS` = `hdfs://…` starts it; `dfs.*` as for `hotpath hdfs` | `file:///`: none |
//! | localize requests that may wait | `hotpath.agent.localize.queue-depth` | 16 |
//!
//! A node host of `0.0.0.0` binds every address and registers the machine's host name, as a
//! Java NodeManager does.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

use conf::Configuration;

use super::localize::{self, HdfsSettings};
use super::simulate::SimConfig;
use super::AgentError;
use nm_core::health::HealthConfig;

/// Everything the agent needs to start.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub rm_addr: SocketAddr,
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
}

fn resolve(what: &str, host: &str, port: u16) -> Result<SocketAddr, AgentError> {
    (host, port)
        .to_socket_addrs()
        .map_err(|e| AgentError::Config(format!("{what} {host}:{port}: {e}")))?
        .next()
        .ok_or_else(|| AgentError::Config(format!("{what} {host}:{port}: no address")))
}

/// The machine's host name (`/proc/sys/kernel/hostname`), else `localhost`.
pub fn local_hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

fn get_i64_or(conf: &Configuration, key: &str, default: i64) -> Result<i64, AgentError> {
    match conf.try_get(key)? {
        Some(_) => Ok(conf.get_i64(key)?),
        None => Ok(default),
    }
}

impl AgentConfig {
    /// Reads the settings (see the module docs).
    pub fn from_conf(conf: &Configuration) -> Result<Self, AgentError> {
        let rm = conf.get_address("yarn.resourcemanager.resource-tracker.address")?;
        let rm_host = if rm.host == "0.0.0.0" {
            "127.0.0.1"
        } else {
            rm.host.as_str()
        };
        let rm_addr = resolve("RM resource-tracker address", rm_host, rm.port)?;
        let node = conf.get_address("yarn.nodemanager.address")?;
        let (bind_ip, node_host) = if node.host == "0.0.0.0" {
            (IpAddr::from([0, 0, 0, 0]), local_hostname())
        } else {
            (
                resolve("node address", &node.host, node.port)?.ip(),
                node.host.clone(),
            )
        };
        let nm_hostname = conf
            .get("yarn.nodemanager.hostname")
            .unwrap_or("0.0.0.0")
            .to_string();
        // Not in conf's defaults table yet (see the requests note): Hadoop's default.
        let webapp = match conf.try_get("yarn.nodemanager.webapp.address")? {
            Some(_) => conf.get_address("yarn.nodemanager.webapp.address")?.port,
            None => {
                let _ = nm_hostname;
                8042
            }
        };
        let max_wait = conf.get_i64("yarn.resourcemanager.connect.max-wait.ms")?;
        let local_dirs = conf
            .get_trimmed_strings("yarn.nodemanager.local-dirs")?
            .into_iter()
            .map(|d| PathBuf::from(d.strip_prefix("file://").unwrap_or(&d)))
            .collect();
        let script = conf
            .get("yarn.nodemanager.health-checker.script.path")
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(PathBuf::from);
        let script_args = conf
            .get("yarn.nodemanager.health-checker.script.opts")
            .map(|s| s.split_whitespace().map(String::from).collect())
            .unwrap_or_default();
        let max_util = conf
            .get("yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage")
            .map(|v| {
                v.trim().parse::<f64>().map_err(|_| {
                    AgentError::Config(format!(
                        "yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage = {v:?}: expected a number"
                    ))
                })
            })
            .transpose()?
            .unwrap_or(90.0);
        let control_socket = conf
            .get("hotpath.agent.control-socket")
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(PathBuf::from);
        Ok(AgentConfig {
            rm_addr,
            bind_ip,
            node_host,
            node_port: node.port,
            http_port: Some(webapp),
            memory_mb: conf.get_i64("yarn.nodemanager.resource.memory-mb")?,
            vcores: conf
                .get_i64("yarn.nodemanager.resource.cpu-vcores")?
                .clamp(0, i32::MAX as i64) as i32,
            connect_max_wait: (max_wait >= 0).then(|| Duration::from_millis(max_wait as u64)),
            retry_interval: Duration::from_millis(
                conf.get_duration_ms("yarn.resourcemanager.connect.retry-interval.ms")?
                    .max(1),
            ),
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
                max_utilization_percent: max_util,
                min_free_mb: get_i64_or(
                    conf,
                    "yarn.nodemanager.disk-health-checker.min-free-space-per-disk-mb",
                    0,
                )?
                .max(0) as u64,
                disk_interval: Duration::from_millis(
                    get_i64_or(
                        conf,
                        "yarn.nodemanager.disk-health-checker.interval-ms",
                        120_000,
                    )?
                    .max(1) as u64,
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
            default_fs: localize::default_fs(conf),
            hdfs: HdfsSettings::from_conf(conf)?,
        })
    }
}

impl AgentConfig {
    /// A self-contained agent on `ip` (port 0, http port 0) for the RM at `rm`: Hadoop's
    /// defaults otherwise, local dirs and control socket under `dir`, no pinning. Used by the
    /// demo and the tests.
    pub fn local(rm: SocketAddr, ip: IpAddr, dir: &std::path::Path) -> Result<Self, AgentError> {
        let mut cfg = AgentConfig::from_conf(&Configuration::new())?;
        cfg.rm_addr = rm;
        cfg.bind_ip = ip;
        cfg.node_host = ip.to_string();
        cfg.node_port = 0;
        cfg.http_port = Some(0);
        cfg.control_socket = Some(dir.join("agent.sock"));
        cfg.health.local_dirs = vec![dir.join("local")];
        cfg.health.max_utilization_percent = 100.0;
        cfg.pin = false;
        Ok(cfg)
    }
}
