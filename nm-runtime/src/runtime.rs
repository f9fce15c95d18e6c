//! The agent's I/O edge: threads, sockets and timers around the sans-IO
//! [`StatusUpdater`].
//!
//! - **ring thread** (`hp-ring0-<cpu>`, the `hw` plan's network ring): registers, then
//!   heartbeats at the interval the RM returns, through `ipc::client` to
//!   `ResourceTrackerPB` (SIMPLE, or on a Kerberized cluster SASL KERBEROS as the node's own
//!   principal, [`crate::config::RmSecurity`]; an authentication failure before the first
//!   registration stops the agent: [`ExitReason::AuthFailed`]). Unanswered calls are retried
//!   with a backoff that starts at the heartbeat interval and doubles up to
//!   `yarn.resourcemanager.connect.retry-interval.ms`;
//!   after `yarn.resourcemanager.connect.max-wait.ms` of failures the agent gives up. The
//!   container table is untouched meanwhile, so nothing is lost. Under RM HA
//!   ([`crate::config::RmHa`]) there is one client per rm-id and a failed call (refused, EOF,
//!   reset, timeout, `StandbyException`) fails over to the next rm-id instead, with
//!   `nm_core::rm_failover`'s sleeps. RESYNC re-registers at once (with
//!   `yarn.resourcemanager.work-preserving-recovery.enabled=false`, after killing every
//!   container); SHUTDOWN stops with the RM's diagnostics; a stop request unregisters
//!   (`unRegisterNodeManager`). ContainerManagementProtocol (TOKEN only, [`crate::cmp_server`]) is
//!   served on the node address by an `ipc::server` ring pinned to the same CPU
//!   (`hp-ring0cmp-<cpu>`), the agent's own IPC server (`getNodeReport`, `getBuffer`) on
//!   `hotpath.agent.ipc.address` likewise (`hp-ring0srv-<cpu>`), and so is the RM client's
//!   reader thread (`hp-ring0rx-<cpu>`): the whole network role shares one core. A container
//!   completion wakes the ring for an out-of-band heartbeat.
//! - **launcher thread** (`hp-launcher`, [`crate::launcher`]) with one `hp-launch-<n>` worker
//!   per accepted start on the housekeeping CPU: localization, launch files, the process
//!   ([`crate::executor`]); it polls running containers every 10 ms and reports exits.
//! - **housekeeping thread** (`hp-hk-<cpu>`): the control socket, `/metrics`, node health,
//!   the simulator, cleanup orders (to executors, then forced completion after the grace
//!   time) and forgetting completions after the tracking duration. It polls every 10 ms.
//! - **HDFS-reader thread** (`hp-hdfs-<cpu>`, the plan's `HdfsReader`), only when
//!   `fs.defaultFS` is `hdfs://…`: owns the `hdfs_io::DfsClient` and serves resource
//!   localization requests from the control socket through a bounded queue
//!   ([`crate::hdfs_reader`]). Without it, localize requests are answered "HDFS not configured".
//!
//! [`Agent::start`] returns once the servers are bound and the threads run; registration
//! starts at once.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hadoop_wire::sasl::client::ClientAuth;
use hadoop_wire::sasl::message::AuthMethod;
use hadoop_wire::sasl::server::{ServerAuth, TokenSecrets};
use hadoop_wire::token::identifier::NodeId;
use hadoop_wire::token::secret::NmTokenSecretManager;
use hadoop_wire::yarn::{
    NODE_HEARTBEAT, REGISTER_NODE_MANAGER, RESOURCE_TRACKER_PROTOCOL, RESOURCE_TRACKER_VERSION,
    UNREGISTER_NODE_MANAGER,
};
use ipc::client::{Client, ClientConfig, ClientError};
use ipc::server::{Registry, Server, ServerConfig};
use ipc::transport::{PoolConfig, TransportConfig};
use nm_core::container_manager::{ContainerManager, ManagerConfig};
use nm_core::health::HealthChecker;
use nm_core::status_updater::{
    HeartbeatOutcome, NodeIdentity, Phase, RegisterOutcome, StatusUpdater, UpdaterConfig,
    NM_VERSION,
};
use nm_core::table::{ContainerTable, Resource};

use crate::cgroups::CgroupMode;
use crate::config::AgentConfig;
use crate::config::ConfigError;
use crate::control::{ControlServer, Localizer};
use crate::disks::LiveDirs;
use crate::error::Error;
use crate::executor::{Chain, Executor, ExecutorConfig};
use crate::launcher::{LaunchCommand, LauncherConfig, LauncherHandle};
use crate::localizer::ResourceLocalizer;
use crate::report;
use crate::shared::{lock, Shared};
use crate::simulate::Simulator;
use crate::sys::wall_ms;
use ipc::metrics::MetricsHttp;
use nm_core::container_manager::KillReason;
use nm_core::launch::NmDirs;
use nm_core::table::CleanupReason;

/// The control socket when `hotpath.agent.control-socket` is not set (also the default of
/// `hotpath container --socket`).
pub const DEFAULT_CONTROL_SOCKET: &str = "/tmp/hotpath-agent.sock";

/// Connections of one IPC server still in their handshake (SASL, connection context) at
/// once; a new one over it closes the oldest. Java's NodeManager has no such limit (its
/// `ipc.server.max.connections` is 0 by default): a flood there is bounded by file descriptors.
pub const HANDSHAKE_BUDGET: usize = 1024;
/// Time a peer has from connect to its connection context (a DIGEST-MD5 or Kerberos
/// negotiation takes milliseconds).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// Why the agent ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExitReason {
    /// Stopped on request (after unregistering if it was registered).
    Stopped,
    /// The RM answered SHUTDOWN.
    Shutdown(String),
    /// The RM stayed unreachable for `connect.max-wait`.
    GaveUp(String),
    /// The RM connection could not authenticate before the first registration (a wrong
    /// `yarn.resourcemanager.principal`, a refused login): a configuration error, not retried,
    /// as a Java NodeManager does not start then.
    AuthFailed(String),
}

/// A running agent.
pub struct Agent {
    shared: Arc<Shared>,
    ring: Option<JoinHandle<ExitReason>>,
    hk: Option<JoinHandle<()>>,
    hdfs: Option<JoinHandle<()>>,
    server: Option<Server>,
    cmp_server: Option<Server>,
    launcher: Option<JoinHandle<()>>,
    control_path: Option<PathBuf>,
    metrics_addr: Option<SocketAddr>,
    ipc_addr: Option<SocketAddr>,
    started: Instant,
    /// `mapreduce_shuffle`, when `yarn.nodemanager.aux-services` lists it.
    shuffle: Option<crate::shuffle::ShuffleServer>,
}

fn spawn<T: Send + 'static>(
    role: hw::Role,
    cpu: Option<u32>,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<JoinHandle<T>, Error> {
    // The plan's CPU when pinning works; an unpinned thread (warned) otherwise.
    let name = match cpu {
        Some(c) => hw::thread_name(&role, c),
        None => format!("hp-{}", role.short_name()),
    };
    // Returns once the pin is settled, so the thread runs where it will stay from the start.
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let t = std::thread::Builder::new()
        .name(name.clone())
        .spawn(move || {
            if let Some(c) = cpu {
                let _ = hw::PinPolicy::BestEffort.pin_current_thread(c);
            }
            let _ = tx.send(());
            f()
        })
        .map_err(|e| Error::Io(format!("spawn {name}: {e}")))?;
    let _ = rx.recv();
    Ok(t)
}

impl Agent {
    /// Starts an agent (see the module docs).
    pub fn start(cfg: AgentConfig) -> Result<Agent, Error> {
        let started = Instant::now();
        // The RM connection's login first: a Kerberos login that fails stops the agent here.
        // Under RM HA one login per rm-id (a Kerberos RM principal's _HOST is each RM's).
        let rm_auth = rm_endpoints(&cfg)
            .iter()
            .map(|(_, addr)| cfg.rm_security.login(*addr))
            .collect::<Result<Vec<_>, _>>()?;
        // Read before any thread is pinned (pinned threads' children inherit one CPU).
        let all_cpus = hw::affinity::current_cpus().unwrap_or_default();
        let (ring_cpu, hk_cpu, hdfs_cpu, work_cpus) = if cfg.pin {
            match hw::Topology::detect() {
                Ok(topo) => {
                    let plan = hw::Plan::for_agent(&topo);
                    (
                        plan.cpu_of(&hw::Role::NetRing(0)),
                        plan.cpu_of(&hw::Role::Housekeeping),
                        plan.cpu_of(&hw::Role::HdfsReader),
                        crate::executor::work_cpus(&plan),
                    )
                }
                Err(e) => {
                    tracing::warn!("no CPU topology ({e}); threads run unpinned");
                    (None, None, None, all_cpus.clone())
                }
            }
        } else {
            (None, None, None, all_cpus.clone())
        };
        let resource = Resource {
            memory_mb: cfg.memory_mb,
            vcores: cfg.vcores,
        };
        // Two IPC servers on the network ring's CPU: ContainerManagementProtocol on the node
        // address (TOKEN only; its port is the NodeId registered with the RM, bound first so
        // that an ephemeral port is known), and the agent's own protocols (getNodeReport,
        // getBuffer; SIMPLE) on `hotpath.agent.ipc.address`.
        let shared_slot: Arc<std::sync::OnceLock<Arc<Shared>>> = Arc::default();
        let transport = |name: &str| TransportConfig {
            threads: 1,
            cpus: ring_cpu.into_iter().collect(),
            pool: PoolConfig {
                chunk_size: 64 * 1024,
                chunks: cfg.ipc_pool_chunks.max(2),
                per_conn_chunks: 8.min(cfg.ipc_pool_chunks.max(2)),
                register: true,
            },
            recv_buf_size: 16 * 1024,
            recv_bufs: 8,
            // Callers that finished SASL and sent their connection context; peers still in
            // their handshake have their own budget (the oldest is closed to make room) and
            // a deadline, so a flood of idle or slow sockets never refuses an AM or the RM.
            max_connections: 256,
            max_handshaking: HANDSHAKE_BUDGET,
            handshake_timeout: Some(HANDSHAKE_TIMEOUT),
            thread_names: ring_cpu
                .map(|c| vec![format!("hp-{name}-{c}")])
                .unwrap_or_default(),
            ..TransportConfig::default()
        };
        let nm_tokens = Arc::new(std::sync::RwLock::new(NmTokenSecretManager::default()));
        let (launcher, launcher_rx) = LauncherHandle::channel();
        // Aux services: only mapreduce_shuffle (AgentConfig::from_conf refuses others; a
        // configuration built in code is checked here). Its jobs are registered by the CMP
        // handlers and dropped by the launcher at application cleanup.
        if let Some(other) = cfg
            .nm
            .aux_services
            .iter()
            .find(|n| n.as_str() != crate::shuffle::SERVICE_ID || cfg.nm.shuffle.is_none())
        {
            return Err(ConfigError::Invalid(format!(
                "yarn.nodemanager.aux-services names {other}, which this agent cannot serve \
                 (it serves only {} when configured)",
                crate::shuffle::SERVICE_ID
            ))
            .into());
        }
        let shuffle_jobs = cfg.nm.shuffle.as_ref().map(|_| {
            crate::shuffle::Jobs::new(cfg.nm.recovery.then(|| cfg.health.local_dirs.clone()))
        });
        // NM recovery: the started container tokens of earlier runs (Java's state store keeps
        // them), so that a replayed start of a container that already ran is refused.
        let (token_store, started_tokens) = match (cfg.nm.recovery, cfg.health.local_dirs.first()) {
            (true, Some(dir)) => {
                let (store, entries) = crate::token_store::TokenStore::open(dir, wall_ms())
                    .map_err(|e| {
                        Error::from(ConfigError::Invalid(format!(
                            "the started container token store under {}: {e}",
                            dir.display()
                        )))
                    })?;
                (Some(Arc::new(std::sync::Mutex::new(store))), entries)
            }
            _ => (None, Vec::new()),
        };
        let cmp_server = {
            let mut reg = Registry::new();
            crate::cmp_server::register(
                &mut reg,
                shared_slot.clone(),
                launcher.clone(),
                shuffle_jobs.clone(),
                token_store,
            );
            let auth = ServerAuth::new(
                AuthMethod::Token,
                Some(nm_tokens.clone() as Arc<dyn TokenSecrets>),
                cfg.nm.rpc_protection.clone(),
            )
            .and_then(|a| a.with_token_mechanism(&cfg.nm.sasl_mechanism))
            .map_err(|e| {
                Error::from(ConfigError::Invalid(format!(
                    "ContainerManagementProtocol auth: {e}"
                )))
            })?;
            Server::start(
                SocketAddr::new(cfg.bind_ip, cfg.node_port),
                ServerConfig {
                    transport: transport("ring0cmp"),
                    auth: Arc::new(auth),
                    ..ServerConfig::default()
                },
                reg,
            )
            .map_err(|e| {
                Error::Bind(format!(
                    "ContainerManagementProtocol server on {}:{}: {e}",
                    cfg.bind_ip, cfg.node_port
                ))
            })?
        };
        let node_port = cmp_server.local_addr().port();
        let server = if cfg.ipc_server {
            let mut reg = Registry::new();
            report::register(&mut reg, shared_slot.clone(), 64 << 20);
            let s = Server::start(
                SocketAddr::new(cfg.bind_ip, cfg.ipc_port),
                ServerConfig {
                    transport: transport("ring0srv"),
                    ..ServerConfig::default()
                },
                reg,
            )
            .map_err(|e| {
                Error::Bind(format!(
                    "IPC server on {}:{}: {e}",
                    cfg.bind_ip, cfg.ipc_port
                ))
            })?;
            Some(s)
        } else {
            None
        };
        let http =
            match cfg.http_port {
                Some(p) => Some(MetricsHttp::bind(SocketAddr::new(cfg.bind_ip, p)).map_err(
                    |e| Error::Bind(format!("metrics HTTP on {}:{p}: {e}", cfg.bind_ip)),
                )?),
                None => None,
            };
        let metrics_addr = http.as_ref().and_then(|h| h.local_addr().ok());
        let identity = NodeIdentity {
            host: cfg.node_host.clone(),
            port: i32::from(node_port),
            http_port: metrics_addr.map_or(8042, |a| i32::from(a.port())),
            resource,
            nm_version: NM_VERSION.into(),
        };
        let control_path = cfg
            .control_socket
            .clone()
            .unwrap_or_else(|| PathBuf::from(DEFAULT_CONTROL_SOCKET));
        let mut control = ControlServer::bind(
            &control_path,
            Resource {
                memory_mb: 1024,
                vcores: 1,
            },
        )?;
        let mut table = ContainerTable::new(cfg.max_containers);
        if cfg.journal {
            table.enable_journal();
        }
        let mut aux_services = cfg.nm.aux_services.clone();
        if shuffle_jobs.is_some() && aux_services.is_empty() {
            aux_services.push(crate::shuffle::SERVICE_ID.to_string());
        }
        let mut cm = ContainerManager::new(
            ManagerConfig {
                node: NodeId::new(identity.host.clone(), identity.port),
                aux_services,
                track_stopped_ms: cfg.track_stopped_ms as i64,
            },
            nm_tokens,
        );
        let now_wall = wall_ms();
        for (id, expiry) in &started_tokens {
            cm.restore_started(*expiry, *id, now_wall);
        }
        if !started_tokens.is_empty() {
            tracing::info!(
                "recovery: {} started container token(s) remembered",
                started_tokens.len()
            );
        }
        let shared = Arc::new(Shared::with_manager(identity.clone(), cm, table));
        // mapreduce_shuffle listens before the node registers (a reducer told of a port that
        // does not accept yet retries for minutes), with the jobs a previous run recorded.
        let mut aux_metadata = Vec::new();
        let shuffle = match (&cfg.nm.shuffle, &shuffle_jobs) {
            (Some(scfg), Some(jobs)) => {
                jobs.recover(&cfg.health.local_dirs);
                let server = crate::shuffle::ShuffleServer::start(
                    scfg.clone(),
                    cfg.health.local_dirs.clone(),
                    jobs.clone(),
                    shared.metrics.shuffle.clone(),
                )
                .map_err(|e| Error::Bind(e.to_string()))?;
                let meta = crate::shuffle::port_metadata(server.port());
                lock(&shared.cm).set_service_metadata(crate::shuffle::SERVICE_ID, meta.clone());
                aux_metadata.push((crate::shuffle::SERVICE_ID.to_string(), meta));
                Some(server)
            }
            _ => None,
        };
        let _ = shared_slot.set(shared.clone());
        shared.metrics.set_ipc_servers(
            std::iter::once(("container_management", cmp_server.stats()))
                .chain(server.as_ref().map(|s| ("agent", s.stats())))
                .collect(),
        );
        // The first health verdict before registering (the dirs: Java checks them at init;
        // the script, if any, reports on a later heartbeat). Bad dirs are left out of new
        // containers and downloads from now on.
        let mut health = HealthChecker::new(
            cfg.health.clone(),
            &cfg.nm.log_dirs,
            Box::new(crate::disks::SystemProbe),
        );
        let live_dirs = Arc::new(LiveDirs::new(NmDirs {
            local_dirs: cfg.health.local_dirs.clone(),
            log_dirs: cfg.nm.log_dirs.clone(),
        }));
        if let Some(h) = health.poll(Instant::now(), wall_ms()) {
            live_dirs.update(health.dirs());
            if let Some(c) = health.take_dirs_change() {
                log_dirs_change(&c, health.dirs());
            }
            *lock(&shared.health) = h;
        }
        let _ = shared.dirs.set(live_dirs.clone());
        let ipc_addr = server.as_ref().map(|s| s.local_addr());
        let mut hdfs_fetcher = None;
        let hdfs = match &cfg.hdfs {
            Some(settings) => {
                let (queue, end) = crate::hdfs_reader::queue(settings.queue_depth);
                let (shared, settings, dirs) = (
                    shared.clone(),
                    settings.clone(),
                    cfg.health.local_dirs.clone(),
                );
                hdfs_fetcher = Some(queue.fetcher(&settings.default_fs));
                control.set_localizer(Localizer::On {
                    queue,
                    default_fs: settings.default_fs.clone(),
                });
                Some(spawn(hw::Role::HdfsReader, hdfs_cpu, move || {
                    crate::hdfs_reader::run_reader(end, settings, dirs, shared, hdfs_cpu)
                })?)
            }
            None => {
                control.set_localizer(Localizer::Off {
                    default_fs: cfg.default_fs.clone(),
                });
                None
            }
        };
        // Containers: the executor (cgroups probed once), the resource cache (HDFS sources
        // through the reader thread), the containers a previous run left, the launcher.
        let dirs = NmDirs {
            local_dirs: cfg.health.local_dirs.clone(),
            log_dirs: cfg.nm.log_dirs.clone(),
        };
        let executor = Arc::new(Executor::new(ExecutorConfig {
            // Containers outlive the agent only with recovery; without it (Hadoop's default)
            // a restarted agent kills them, so nothing has to stay behind to record an exit.
            chain: if cfg.nm.recovery {
                Chain::Wrapped
            } else {
                Chain::Direct
            },
            cgroups: if cfg.nm.cgroups {
                CgroupMode::Auto
            } else {
                CgroupMode::Off
            },
            sigkill_delay: cfg.nm.sigkill_delay,
            process_kill_wait: cfg.nm.process_kill_wait,
            zygotes: cfg.nm.zygotes,
            helper_cpu: hk_cpu,
            live_dirs: Some(live_dirs.clone()),
            ..ExecutorConfig::new(dirs.clone(), work_cpus)
        }));
        let localizer = Arc::new(
            ResourceLocalizer::new(
                dirs.local_dirs.clone(),
                &cfg.default_fs,
                hdfs_fetcher,
                nm_core::localization::DEFAULT_MAX_FILES_PER_DIRECTORY,
            )
            .map_err(|e| Error::from(ConfigError::Invalid(format!("resource localization: {e}"))))?
            .with_live_dirs(live_dirs.clone()),
        );
        let recovered = crate::launcher::recover(&shared, &executor, &dirs, cfg.nm.recovery);
        let (agent_env, java17) = LauncherConfig::agent_env();
        let launcher_thread = crate::launcher::spawn(
            launcher_rx,
            shared.clone(),
            LauncherConfig {
                dirs,
                nm: cfg.nm.clone(),
                node_host: identity.host.clone(),
                node_port,
                http_port: u16::try_from(identity.http_port).unwrap_or(0),
                agent_env,
                java17,
                worker_cpu: hk_cpu,
                aux_services: aux_metadata,
                shuffle_jobs,
            },
            executor,
            localizer,
            recovered,
        )
        .map_err(|e| Error::Io(format!("spawn the launcher: {e}")))?;
        let ring = {
            let (shared, cfg, identity) = (shared.clone(), cfg.clone(), identity.clone());
            let ring_launcher = launcher.clone();
            spawn(hw::Role::NetRing(0), ring_cpu, move || {
                ring_loop(
                    &shared,
                    &cfg,
                    rm_auth,
                    identity,
                    started,
                    ring_cpu,
                    &ring_launcher,
                )
            })?
        };
        let hk = {
            let shared = shared.clone();
            let sim = cfg.simulate.clone().map(|s| Simulator::new(s, wall_ms()));
            let (grace, track) = (cfg.cleanup_grace, cfg.track_stopped_ms);
            let logs = crate::logs::ContainerLogs::new(
                cfg.nm.log_dirs.clone(),
                format!("{}:{}", identity.host, identity.port),
            );
            spawn(hw::Role::Housekeeping, hk_cpu, move || {
                housekeeping(
                    &shared, control, http, health, sim, grace, track, started, launcher, logs,
                )
            })?
        };
        Ok(Agent {
            shared,
            ring: Some(ring),
            hk: Some(hk),
            hdfs,
            server,
            cmp_server: Some(cmp_server),
            launcher: Some(launcher_thread),
            control_path: Some(control_path),
            metrics_addr,
            ipc_addr,
            started,
            shuffle,
        })
    }

    /// The port `mapreduce_shuffle` listens on (what every StartContainers answer carries),
    /// when it is configured.
    pub fn shuffle_port(&self) -> Option<u16> {
        self.shuffle.as_ref().map(|s| s.port())
    }

    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// `host:port` as registered.
    pub fn node_id(&self) -> String {
        format!(
            "{}:{}",
            self.shared.identity.host, self.shared.identity.port
        )
    }

    pub fn control_path(&self) -> Option<&std::path::Path> {
        self.control_path.as_deref()
    }

    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    pub fn ipc_addr(&self) -> Option<SocketAddr> {
        self.ipc_addr
    }

    pub fn started(&self) -> Instant {
        self.started
    }

    /// Asks the threads to stop (the ring thread unregisters first).
    pub fn stop(&self) {
        self.shared.stop.stop();
    }

    /// Whether the ring thread has ended (stop, SHUTDOWN, or gave up).
    pub fn is_finished(&self) -> bool {
        self.ring.as_ref().is_none_or(|r| r.is_finished())
    }

    /// Waits for the threads and closes the servers.
    pub fn join(mut self) -> ExitReason {
        let reason = self
            .ring
            .take()
            .map(|r| {
                r.join()
                    .unwrap_or_else(|_| ExitReason::GaveUp("ring thread panicked".into()))
            })
            .unwrap_or(ExitReason::Stopped);
        self.shared.stop.stop();
        if let Some(h) = self.hk.take() {
            let _ = h.join();
        }
        join_reader(self.hdfs.take());
        if let Some(l) = self.launcher.take() {
            let _ = l.join();
        }
        if let Some(s) = self.cmp_server.take() {
            s.shutdown();
        }
        if let Some(s) = self.server.take() {
            s.shutdown();
        }
        if let Some(s) = self.shuffle.take() {
            s.shutdown();
        }
        if let Some(p) = &self.control_path {
            let _ = std::fs::remove_file(p);
        }
        reason
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if self.ring.is_some() || self.hk.is_some() || self.hdfs.is_some() {
            self.shared.stop.stop();
            if let Some(r) = self.ring.take() {
                let _ = r.join();
            }
            if let Some(h) = self.hk.take() {
                let _ = h.join();
            }
            join_reader(self.hdfs.take());
            if let Some(p) = &self.control_path {
                let _ = std::fs::remove_file(p);
            }
        }
    }
}

/// Waits for the HDFS reader (the stop flag makes a running read fail at its next packet);
/// one stuck in a NameNode or DataNode timeout is left behind after 5 s.
fn join_reader(h: Option<JoinHandle<()>>) {
    let Some(h) = h else { return };
    let t0 = Instant::now();
    while !h.is_finished() && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
    }
    if h.is_finished() {
        let _ = h.join();
    } else {
        tracing::warn!("the HDFS reader is still in a call after 5 s; not waiting for it");
    }
}

fn publish(shared: &Shared, u: &StatusUpdater, unreachable: bool) {
    // The RM's keys and identifier, for the container manager's token checks (keys change only
    // when their id does).
    lock(&shared.cm).set_keys(
        u.container_key().map(|k| (k.key_id, k.bytes.as_slice())),
        u.nm_key().map(|k| (k.key_id, k.bytes.as_slice())),
        u.rm_identifier(),
    );
    let mut st = lock(&shared.status);
    st.phase = match u.phase() {
        Phase::Unregistered => "unregistered",
        Phase::Registered => "registered",
        Phase::Stopped(_) => "stopped",
    };
    if let Phase::Stopped(r) = u.phase() {
        if st.stopped_reason.is_none() {
            st.stopped_reason = Some(r.clone());
        }
    }
    st.response_id = u.response_id();
    st.next_interval_ms = u.next_interval_ms();
    st.rm_identifier = u.rm_identifier();
    st.container_key_id = u.container_key().map(|k| k.key_id);
    st.nm_key_id = u.nm_key().map(|k| k.key_id);
    st.rm_unreachable = unreachable;
}

/// Failed-call bookkeeping: backoff and the max-wait deadline.
struct Retry {
    failing_since: Option<Instant>,
    backoff: Duration,
}

/// A ResourceTracker client for one RM: one connection attempt per call (Java's HA provider
/// sets `ipc.client.connect.max.retries` to 0), so a refused connect fails over at once.
fn rm_client(
    cfg: &AgentConfig,
    addr: SocketAddr,
    rm_auth: ClientAuth,
    ring_cpu: Option<u32>,
) -> Client {
    Client::new(
        addr,
        ClientConfig {
            protocol: RESOURCE_TRACKER_PROTOCOL.into(),
            protocol_version: RESOURCE_TRACKER_VERSION,
            connect_timeout: cfg.call_timeout.min(Duration::from_secs(5)),
            call_timeout: cfg.call_timeout,
            backoff_initial: Duration::from_millis(1),
            backoff_max: Duration::from_millis(1),
            max_connect_attempts: 1,
            recycled_buffers: 2,
            reader_thread_name: ring_cpu
                .map_or_else(|| "hp-ring0rx".to_string(), |c| format!("hp-ring0rx-{c}")),
            reader_cpu: ring_cpu,
            auth: rm_auth,
            max_idle: cfg.rm_max_idle,
            ..ClientConfig::default()
        },
    )
}

/// The resource trackers to call, in order: every rm-id's under HA, else the one address
/// (with an empty id).
fn rm_endpoints(cfg: &AgentConfig) -> Vec<(String, SocketAddr)> {
    match &cfg.rm_ha {
        Some(ha) => ha.rms.iter().map(|r| (r.id.clone(), r.addr)).collect(),
        None => vec![(String::new(), cfg.rm_addr)],
    }
}

fn ring_loop(
    shared: &Shared,
    cfg: &AgentConfig,
    rm_auth: Vec<ClientAuth>,
    identity: NodeIdentity,
    started: Instant,
    ring_cpu: Option<u32>,
    launcher: &LauncherHandle,
) -> ExitReason {
    // One client per rm-id, each connecting lazily (Java's provider caches one proxy per
    // rm-id); `fo` says which one is current.
    let endpoints = rm_endpoints(cfg);
    let clients: Vec<Client> = endpoints
        .iter()
        .zip(rm_auth)
        .map(|((_, addr), auth)| rm_client(cfg, *addr, auth, ring_cpu))
        .collect();
    let mut fo = cfg.rm_ha.as_ref().map(|ha| {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
            ^ u64::from(std::process::id());
        nm_core::rm_failover::RmFailover::new(ha.policy.clone(), ha.rms.len(), seed)
    });
    let rm_name = |i: usize| -> String {
        let (id, addr) = &endpoints[i];
        if id.is_empty() {
            addr.to_string()
        } else {
            format!("{id} ({addr})")
        }
    };
    if fo.is_some() {
        lock(&shared.status).rm_id = Some(endpoints[0].0.clone());
    }
    let mut u = StatusUpdater::new(UpdaterConfig {
        identity,
        track_stopped_ms: cfg.track_stopped_ms,
        default_interval_ms: cfg.default_interval_ms,
    });
    let m = &shared.metrics;
    let mut retry = Retry {
        failing_since: None,
        backoff: Duration::ZERO,
    };
    let mut req = Vec::with_capacity(1024);
    let mut first_registration = true;
    let reason = loop {
        if shared.stop.is_stopped() {
            break ExitReason::Stopped;
        }
        let cur = fo.as_ref().map_or(0, |f| f.current());
        let client = &clients[cur];
        let now = Instant::now();
        let result: Result<Duration, ClientError> = match u.phase().clone() {
            Phase::Stopped(d) => break ExitReason::Shutdown(d),
            Phase::Unregistered => {
                req.clear();
                let encoded = {
                    // cm before table, as everywhere
                    let cm = lock(&shared.cm);
                    let t = lock(&shared.table);
                    let h = lock(&shared.health);
                    u.encode_register_with(&t, &h, |id| cm.token_fields(id), &mut req)
                };
                if let Err(e) = encoded {
                    break ExitReason::Shutdown(e.to_string());
                }
                let t0 = Instant::now();
                match client.call(REGISTER_NODE_MANAGER, &req) {
                    Ok(resp) => {
                        m.record_latency(t0.elapsed());
                        let out = {
                            let mut t = lock(&shared.table);
                            u.on_register_response(resp.payload(), &mut t, mono_ms(started))
                        };
                        match out {
                            Ok(RegisterOutcome::Registered { rm_identifier, .. }) => {
                                m.registrations.fetch_add(1, Relaxed);
                                if first_registration {
                                    first_registration = false;
                                    lock(&shared.status).registered_after_ms =
                                        Some(started.elapsed().as_millis() as u64);
                                }
                                tracing::info!(
                                    "registered as {}:{} with the RM {} (rm identifier {rm_identifier:?}) after {:?}",
                                    u.identity().host,
                                    u.identity().port,
                                    rm_name(cur),
                                    started.elapsed()
                                );
                                Ok(Duration::ZERO)
                            }
                            Ok(RegisterOutcome::Shutdown { diagnostics }) => {
                                tracing::error!("the RM refused the registration: {diagnostics}");
                                publish(shared, &u, false);
                                break ExitReason::Shutdown(diagnostics);
                            }
                            Err(e) => {
                                m.registration_failures.fetch_add(1, Relaxed);
                                Err(ClientError::Protocol(e.to_string()))
                            }
                        }
                    }
                    Err(e) => {
                        m.registration_failures.fetch_add(1, Relaxed);
                        Err(e)
                    }
                }
            }
            Phase::Registered => {
                let built = {
                    let mut t = lock(&shared.table);
                    let h = lock(&shared.health);
                    u.heartbeat_request(&mut t, &h).map(|b| {
                        req.clear();
                        req.extend_from_slice(b);
                    })
                };
                if let Err(e) = built {
                    tracing::warn!("heartbeat not built: {e}");
                    Ok(Duration::from_millis(u.next_interval_ms()))
                } else {
                    m.heartbeats_sent.fetch_add(1, Relaxed);
                    let t0 = Instant::now();
                    match client.call(NODE_HEARTBEAT, &req) {
                        Ok(resp) => {
                            m.record_latency(t0.elapsed());
                            let out = {
                                let mut t = lock(&shared.table);
                                let before = u.stats();
                                let o = u.on_heartbeat_response(
                                    resp.payload(),
                                    &mut t,
                                    mono_ms(started),
                                );
                                let after = u.stats();
                                m.containers_to_cleanup.fetch_add(
                                    after.containers_to_cleanup - before.containers_to_cleanup,
                                    Relaxed,
                                );
                                m.applications_to_cleanup.fetch_add(
                                    after.applications_to_cleanup - before.applications_to_cleanup,
                                    Relaxed,
                                );
                                m.removed_from_nm.fetch_add(
                                    after.removed_from_nm - before.removed_from_nm,
                                    Relaxed,
                                );
                                m.key_changes.fetch_add(
                                    (after.container_key_changes + after.nm_key_changes)
                                        - (before.container_key_changes + before.nm_key_changes),
                                    Relaxed,
                                );
                                o
                            };
                            match out {
                                Ok(HeartbeatOutcome::Normal { next_interval_ms }) => {
                                    m.heartbeats_ok.fetch_add(1, Relaxed);
                                    // Signals and container updates (none in an ordinary
                                    // heartbeat: nothing to read then).
                                    let orders = u.rm_orders();
                                    if orders.any() {
                                        crate::rm_orders::relay(
                                            shared,
                                            launcher,
                                            resp.payload(),
                                            orders,
                                        );
                                    }
                                    lock(&shared.status).last_heartbeat_wall_ms = wall_ms();
                                    Ok(Duration::from_millis(next_interval_ms)
                                        .saturating_sub(now.elapsed()))
                                }
                                Ok(HeartbeatOutcome::Resync) => {
                                    m.resyncs.fetch_add(1, Relaxed);
                                    tracing::warn!(
                                        "Node is out of sync with ResourceManager {}, hence resyncing.",
                                        rm_name(cur)
                                    );
                                    // Starts from the old RM are refused from now on.
                                    publish(shared, &u, false);
                                    if !cfg.nm.work_preserving_recovery {
                                        kill_all_on_resync(shared, cfg, started);
                                    }
                                    Ok(Duration::ZERO)
                                }
                                Ok(HeartbeatOutcome::Shutdown { diagnostics }) => {
                                    tracing::error!("the RM ordered SHUTDOWN: {diagnostics}");
                                    publish(shared, &u, false);
                                    break ExitReason::Shutdown(diagnostics);
                                }
                                Err(e) => {
                                    m.heartbeat_failures.fetch_add(1, Relaxed);
                                    u.on_heartbeat_failed();
                                    Err(ClientError::Protocol(e.to_string()))
                                }
                            }
                        }
                        Err(e) => {
                            m.heartbeat_failures.fetch_add(1, Relaxed);
                            u.on_heartbeat_failed();
                            Err(e)
                        }
                    }
                }
            }
        };
        match result {
            Ok(wait) => {
                if let Some(f) = &mut fo {
                    f.on_success();
                }
                if retry.failing_since.take().is_some() {
                    m.reconnects.fetch_add(1, Relaxed);
                    tracing::info!("the RM {} is reachable again", rm_name(cur));
                }
                retry.backoff = Duration::ZERO;
                publish(shared, &u, false);
                if !wait.is_zero() && shared.heartbeat_now.sleep(wait, &shared.stop) {
                    break ExitReason::Stopped;
                }
            }
            Err(e) => {
                if first_registration && is_auth_failure(&e) {
                    let why = format!("authenticating to the RM {} failed: {e}", rm_name(cur));
                    tracing::error!("{why}; stopping");
                    break ExitReason::AuthFailed(why);
                }
                // A standby RM refuses connections on this port; should one answer
                // StandbyException anyway (call-queue backoff), that is a failover too, as in
                // Java's FailoverOnNetworkExceptionRetry.
                let standby = matches!(&e, ClientError::Remote { class, .. }
                    if class == "org.apache.hadoop.ipc.StandbyException");
                let remote =
                    !standby && matches!(e, ClientError::Remote { .. } | ClientError::Protocol(_));
                if remote {
                    // The RM answered, with an error: keep the normal pace (Java logs and
                    // carries on); this is not an outage.
                    m.rpc_errors.fetch_add(1, Relaxed);
                    tracing::warn!("ResourceTracker call failed: {e}");
                    publish(shared, &u, false);
                    if shared
                        .stop
                        .sleep(Duration::from_millis(u.next_interval_ms()))
                    {
                        break ExitReason::Stopped;
                    }
                    continue;
                }
                let since = *retry.failing_since.get_or_insert(now);
                if let Some(f) = &mut fo {
                    publish(shared, &u, true);
                    match f.on_failure(since.elapsed()) {
                        nm_core::rm_failover::Decision::GiveUp => {
                            let why = format!(
                                "no ResourceManager of {} answered for {:?} ({} failovers): {e}",
                                endpoints
                                    .iter()
                                    .map(|(id, _)| id.as_str())
                                    .collect::<Vec<_>>()
                                    .join(","),
                                since.elapsed(),
                                f.failovers()
                            );
                            tracing::error!("{why}; giving up");
                            break ExitReason::GaveUp(why);
                        }
                        nm_core::rm_failover::Decision::FailOver { to, after } => {
                            // The old connection may be half-open (an RM that went standby):
                            // drop it, so that coming back to that RM connects afresh.
                            client.disconnect();
                            m.rm_failovers.fetch_add(1, Relaxed);
                            tracing::warn!(
                                "{e} calling the RM {}; failing over to {} in {after:?}",
                                rm_name(cur),
                                rm_name(to)
                            );
                            lock(&shared.status).rm_id = Some(endpoints[to].0.clone());
                            if !after.is_zero() && shared.stop.sleep(after) {
                                break ExitReason::Stopped;
                            }
                            continue;
                        }
                    }
                }
                retry.backoff = if retry.backoff.is_zero() {
                    Duration::from_millis(u.next_interval_ms()).min(cfg.retry_interval)
                } else {
                    (retry.backoff * 2).min(cfg.retry_interval)
                };
                publish(shared, &u, true);
                if let Some(max) = cfg.connect_max_wait {
                    if since.elapsed() >= max {
                        tracing::error!(
                            "the RM at {} was unreachable for {:?}; giving up: {e}",
                            rm_name(cur),
                            since.elapsed()
                        );
                        break ExitReason::GaveUp(format!(
                            "the RM at {} was unreachable for {:?}: {e}",
                            rm_name(cur),
                            since.elapsed()
                        ));
                    }
                }
                tracing::warn!(
                    "the RM at {} is unreachable ({e}); retrying in {:?}",
                    rm_name(cur),
                    retry.backoff
                );
                if shared.stop.sleep(retry.backoff) {
                    break ExitReason::Stopped;
                }
            }
        }
    };
    let client = &clients[fo.as_ref().map_or(0, |f| f.current())];
    if reason == ExitReason::Stopped && u.is_registered() {
        req.clear();
        u.encode_unregister(&mut req);
        match client.call_timeout(UNREGISTER_NODE_MANAGER, &req, Duration::from_secs(3)) {
            Ok(_) => tracing::info!("unregistered from the RM"),
            Err(e) => tracing::warn!("unRegisterNodeManager failed: {e}"),
        }
        u.stop("stopped");
    } else if let ExitReason::GaveUp(why) | ExitReason::AuthFailed(why) = &reason {
        u.stop(why);
    }
    publish(shared, &u, false);
    {
        let mut st = lock(&shared.status);
        st.phase = "stopped";
        if st.stopped_reason.is_none() {
            st.stopped_reason = Some(match &reason {
                ExitReason::Stopped => "stopped".into(),
                ExitReason::Shutdown(d) | ExitReason::GaveUp(d) | ExitReason::AuthFailed(d) => {
                    d.clone()
                }
            });
        }
    }
    for c in &clients {
        c.disconnect();
    }
    reason
}

/// RESYNC with `yarn.resourcemanager.work-preserving-recovery.enabled=false` in the node's
/// configuration (Java's `ContainerManagerImpl.cleanupContainersOnNMResync`): every live
/// container is killed (as `containers_to_cleanup` does: -106, "Container Killed by
/// ResourceManager"), and the re-registration waits until all are complete, so that it
/// reports their final statuses. Gives up waiting after the kill grace
/// (`sleep-delay-before-sigkill` + `process-kill-wait` + the cleanup grace).
fn kill_all_on_resync(shared: &Shared, cfg: &AgentConfig, started: Instant) {
    let now_ms = mono_ms(started);
    let live: Vec<nm_core::ids::ContainerId> = {
        let mut t = lock(&shared.table);
        let live: Vec<_> = t
            .iter()
            .filter(|c| c.state != nm_core::table::ContainerState::Complete)
            .map(|c| c.id)
            .collect();
        for id in &live {
            t.order_cleanup(*id, now_ms);
        }
        live
    };
    if live.is_empty() {
        return;
    }
    tracing::warn!(
        "work-preserving recovery is off: killing {} containers before re-registering",
        live.len()
    );
    let deadline = Instant::now()
        + cfg.nm.sigkill_delay
        + cfg.nm.process_kill_wait
        + cfg.cleanup_grace
        + Duration::from_secs(1);
    while Instant::now() < deadline {
        let done = {
            let t = lock(&shared.table);
            live.iter().all(|id| {
                t.get(id)
                    .is_none_or(|c| c.state == nm_core::table::ContainerState::Complete)
            })
        };
        if done || shared.stop.sleep(Duration::from_millis(10)) {
            return;
        }
    }
    tracing::warn!("containers still live after the kill grace; re-registering anyway");
}

/// A connection's authentication failed: on this side (`ClientError::Auth`: the RM's principal
/// is not the one expected, no usable credentials, no common protection), or refused by the
/// RM with a FATAL SASL or access-control error.
fn is_auth_failure(e: &ClientError) -> bool {
    match e {
        ClientError::Auth { .. } => true,
        ClientError::Remote { status, class, .. } => {
            *status
                == hadoop_wire::pb::hadoop::common::rpc_response_header_proto::RpcStatusProto::Fatal
                && matches!(
                    class.as_str(),
                    "javax.security.sasl.SaslException"
                        | "org.apache.hadoop.security.AccessControlException"
                        | "org.apache.hadoop.security.authorize.AuthorizationException"
                )
        }
        _ => false,
    }
}

/// Java's log lines for dirs that failed or came back (`DirectoryCollection.checkDirs`,
/// `LocalDirsHandlerService.logDiskStatus`).
fn log_dirs_change(c: &nm_core::health::DirsChange, dirs: &nm_core::disks::DirsHandler) {
    for (d, why) in c.local.turned_bad.iter().chain(&c.log.turned_bad) {
        tracing::warn!("Directory {d} error, {why}, removing from list of valid directories");
    }
    for d in c.local.turned_good.iter().chain(&c.log.turned_good) {
        tracing::info!("Directory {d} passed disk check, adding to list of valid directories.");
    }
    if !c.local.turned_bad.is_empty() || !c.log.turned_bad.is_empty() {
        tracing::info!("Disk(s) failed: {}", dirs.report());
    }
    if !c.local.turned_good.is_empty() || !c.log.turned_good.is_empty() {
        tracing::info!("Disk(s) turned good: {}", dirs.good_report());
    }
    if c.changed() && !dirs.healthy() {
        tracing::error!("Most of the disks failed. {}", dirs.report());
    }
}

fn mono_ms(started: Instant) -> u64 {
    started.elapsed().as_millis() as u64
}

#[allow(clippy::too_many_arguments)]
fn housekeeping(
    shared: &Shared,
    mut control: ControlServer,
    mut http: Option<MetricsHttp>,
    mut health: HealthChecker,
    mut sim: Option<Simulator>,
    grace: Duration,
    track_stopped_ms: u64,
    started: Instant,
    launcher: LauncherHandle,
    logs: crate::logs::ContainerLogs,
) {
    let mut orders = Vec::new();
    let mut external = Vec::new();
    let mut finished_apps = Vec::new();
    let mut last_expiry = Instant::now();
    loop {
        let now = Instant::now();
        let now_ms = started.elapsed().as_millis() as u64;
        let wall = wall_ms();
        control.poll(shared, wall);
        if let Some(h) = &mut http {
            // /metrics and the container logs (/ws/v1/node/...).
            crate::logs::poll_webapp(h, &logs, shared);
        }
        if let Some(h) = health.poll(now, wall) {
            if let Some(c) = health.take_dirs_change() {
                if let Some(live) = shared.dirs.get() {
                    live.update(health.dirs());
                }
                log_dirs_change(&c, health.dirs());
            }
            let mut cur = lock(&shared.health);
            if cur.healthy != h.healthy {
                tracing::warn!(
                    "node health: {} {}",
                    if h.healthy { "healthy" } else { "UNHEALTHY" },
                    h.report
                );
            }
            *cur = h;
        }
        {
            let mut t = lock(&shared.table);
            orders.clear();
            t.take_orders(&mut orders);
            finished_apps.clear();
            t.take_finished_apps(&mut finished_apps);
            if let Some(s) = &mut sim {
                s.on_orders(&mut t, &orders);
                s.set_paused(shared.sim_paused.load(Relaxed));
                if shared.sim_finish_now.swap(false, Relaxed) {
                    s.finish_all(&mut t);
                }
                s.tick(&mut t, now_ms, wall);
            }
            t.expire_cleanups(now_ms, grace.as_millis() as u64);
        }
        if !orders.is_empty() || !finished_apps.is_empty() {
            // Containers this node runs (started through ContainerManagementProtocol) are
            // killed by the launcher with the reason's exit status; the others belong to the
            // control socket's executors (the storm tools) as before. Every application in
            // `applications_to_cleanup` is finished here, whether or not a container of its
            // was still live (the launcher cleans its directories once none is).
            external.clear();
            {
                let mut cm = lock(&shared.cm);
                for o in &orders {
                    let reason = match o.reason {
                        CleanupReason::Container => KillReason::ByResourceManager,
                        CleanupReason::Application => KillReason::AfterAppCompletion,
                    };
                    if cm.stage(&o.container).is_some() {
                        if let Some(r) = cm.cleanup(&o.container, reason) {
                            launcher.send(LaunchCommand::Kill(o.container, r));
                        }
                    } else {
                        external.push(*o);
                    }
                }
                for app in &finished_apps {
                    cm.app_finished(*app);
                }
            }
            for app in &finished_apps {
                launcher.send(LaunchCommand::AppFinished(*app));
            }
            if !external.is_empty() {
                control.dispatch(&external);
            }
        }
        if now.duration_since(last_expiry) >= Duration::from_secs(1) {
            last_expiry = now;
            // Delivered times are the updater's monotonic ms from the same origin.
            let mut cm = lock(&shared.cm);
            let mut t = lock(&shared.table);
            t.expire_delivered(now_ms, track_stopped_ms);
            cm.sync_with_table(&t, wall);
        }
        if shared.stop.sleep(Duration::from_millis(10)) {
            break;
        }
    }
    // a last pass so that replies queued just before the stop go out
    control.poll(shared, wall_ms());
}
