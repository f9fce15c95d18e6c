//! The network service: the tracker and the dispatcher on the `ipc` server.
//!
//! [`RmService::start`] opens the completion logs, starts the shard threads
//! ([`Dispatcher`]), builds the [`ResourceTracker`] on their mailboxes, and serves on one
//! `ipc::server::Server`:
//!
//! - `org.apache.hadoop.yarn.server.api.ResourceTrackerPB` v1: `registerNodeManager`,
//!   `nodeHeartbeat`, `unRegisterNodeManager` (what a Java NodeManager calls);
//! - [`ADMIN_PROTOCOL`] v1, our own admin protocol: `finishApplication`, `killContainer`,
//!   `refreshNodes` (messages in [`admin`]; `hotpath rm finish-app|kill-container|refresh-nodes`
//!   are clients of it). Java serves its admin protocol on another port; we serve ours on the
//!   resource-tracker address, told apart by protocol name.
//!
//! The tracker sits behind one mutex: ring threads take it for one RPC at a time (the hot path
//! holds it for the tracker's ~1–2 µs of work), the housekeeping thread once a second. The
//! shards never take it. A housekeeping thread runs the liveness monitor and key rolling
//! ([`ResourceTracker::tick`]), samples heartbeats per second, and logs a summary line every
//! 10 s. Node joins, resyncs, shutdowns and losses are logged at INFO.
//!
//! With applications, a NORMAL heartbeat adds one relaxed load ([`AppsRt::has_work`]) to the
//! ring thread's work: the applications' lock is taken only while some pending need fits on
//! some node, to schedule on the heartbeat's node. What a heartbeat changes for the scheduler
//! (completions, containers first seen RUNNING, health) is found by the shard, whose steady
//! path skips unchanged statuses by comparing bytes, and handed to the scheduler in batches
//! from the shard thread ([`AppsRt::sched_sink`]). Registrations, unregistrations and node
//! losses still reach the scheduler from the thread that saw them (they are rare).
//!
//! Left to the binary: the `/metrics` HTTP endpoint (serve [`RmService::metrics_text`]),
//! SIGHUP (call [`RmService::refresh_nodes`]), thread placement of the rings
//! (`ServerConfig::transport.cpus`).

use std::cell::RefCell;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ipc::metrics::Exposition;
use ipc::server::{Call, CallError, Registry, Reply, Server, ServerConfig};

use crate::amrm_token::{AmrmTokenSecretManager, AmrmTokenSecrets};
use crate::app_service::{self, AppsRt};
use crate::apps::{Apps, Res};
use crate::dispatcher::{wall_ms, Clock, Dispatcher, Placement};
use crate::hosts::HostLists;
use crate::ids::{AppKey, ContainerKey, NodeKey};
use crate::master_key::OsEntropy;
use crate::metrics::render_prometheus;
use crate::tracker::{HeartbeatOutcome, RegisterOutcome, ResourceTracker};
use crate::{Error, RmConfig};
use hadoop_wire::yarn::{
    NODE_HEARTBEAT, REGISTER_NODE_MANAGER, RESOURCE_TRACKER_VERSION, UNREGISTER_NODE_MANAGER,
};

/// The NodeManager ↔ RM protocol name (defined in `hadoop_wire::yarn` with the NM side's).
pub use hadoop_wire::yarn::RESOURCE_TRACKER_PROTOCOL;
/// Our admin protocol name.
pub const ADMIN_PROTOCOL: &str = "org.hotpath.rm.RmAdminProtocolPB";

/// The service-level ACL key of each protocol on the ResourceTracker port (Java's
/// `RMPolicyProvider`; our admin protocol takes the key of Java's RM admin protocol), for
/// `ipc::authorize::ServiceAuthorization` when `hadoop.security.authorization` is true.
pub const TRACKER_SERVICE_ACLS: &[ipc::authorize::ProtocolPolicy] = &[
    ipc::authorize::ProtocolPolicy {
        protocol: RESOURCE_TRACKER_PROTOCOL,
        acl_key: "security.resourcetracker.protocol.acl",
        // RMNMSecurityInfoClass: only the NodeManagers' principal, when configured
        client_principal_key: Some("yarn.nodemanager.principal"),
    },
    ipc::authorize::ProtocolPolicy {
        protocol: ADMIN_PROTOCOL,
        acl_key: "security.resourcemanager-administration.protocol.acl",
        client_principal_key: None,
    },
];

/// The service-level ACL key of each application protocol (Java's `RMPolicyProvider`), for
/// `ipc::authorize::ServiceAuthorization` on the client and scheduler ports. Under TOKEN the
/// scheduler port's caller is the AMRMToken's user, the attempt id, as in Java.
pub const APPS_SERVICE_ACLS: &[ipc::authorize::ProtocolPolicy] = &[
    ipc::authorize::ProtocolPolicy {
        protocol: hadoop_wire::yarn::APPLICATION_CLIENT_PROTOCOL,
        acl_key: "security.applicationclient.protocol.acl",
        client_principal_key: None,
    },
    ipc::authorize::ProtocolPolicy {
        protocol: hadoop_wire::yarn::APPLICATION_MASTER_PROTOCOL,
        acl_key: "security.applicationmaster.protocol.acl",
        client_principal_key: None,
    },
];

/// Admin protocol messages (ours: `hadoop-wire/proto/hotpath_protocols.proto`).
pub mod admin {
    pub use hadoop_wire::pb::hotpath::{AdminRequestProto, AdminResponseProto};

    pub const FINISH_APPLICATION: &str = "finishApplication";
    pub const KILL_CONTAINER: &str = "killContainer";
    pub const REFRESH_NODES: &str = "refreshNodes";
}

thread_local! {
    static OUT: RefCell<Vec<u8>> = RefCell::new(Vec::with_capacity(4096));
}

fn lock(t: &Mutex<ResourceTracker>) -> MutexGuard<'_, ResourceTracker> {
    t.lock().unwrap_or_else(|p| p.into_inner())
}

fn bad_request(e: Error) -> CallError {
    CallError::invalid_request(e)
}

/// What `hotpath rm` needs to run applications: the scheduler's settings and the addresses of
/// ApplicationClientProtocol (`yarn.resourcemanager.address`) and ApplicationMasterProtocol
/// (`yarn.resourcemanager.scheduler.address`), and the accepted `hadoop.rpc.protection` levels
/// for the latter's TOKEN authentication, and what a secure cluster adds ([`AppsSecurity`]).
#[derive(Debug, Clone)]
pub struct AppsSetup {
    pub cfg: crate::apps::AppsConfig,
    pub client: SocketAddr,
    pub scheduler: SocketAddr,
    pub qops: Vec<hadoop_wire::sasl::Qop>,
    pub security: AppsSecurity,
}

/// The application ports in a secure cluster. The default is an insecure RM's: SIMPLE on the
/// client port, no ACLs. The scheduler port is TOKEN-only (the AMRMToken) either way: Java's
/// `ApplicationMasterService` sets its server's authentication to TOKEN whatever the
/// cluster's, so neither SIMPLE nor KERBEROS is offered there.
#[derive(Debug, Clone, Default)]
pub struct AppsSecurity {
    /// ApplicationClientProtocol's authentication (KERBEROS as the RM's principal when
    /// `hadoop.security.authentication=kerberos`); `None`: SIMPLE.
    pub client_auth: Option<Arc<hadoop_wire::sasl::server::ServerAuth>>,
    /// `hadoop.security.authorization`: [`APPS_SERVICE_ACLS`] on both ports.
    pub authorization: Option<Arc<ipc::authorize::ServiceAuthorization>>,
    /// `yarn.acl.enable`: the application ACLs the client protocol enforces
    /// ([`crate::app_acls`]); `None`: none (Java's default).
    pub app_acls: Option<Arc<crate::app_acls::AclPolicy>>,
    /// The RM delegation-token secrets ([`crate::rm_delegation`]), not yet started: the same
    /// ones `client_auth` verifies TOKEN callers with. `None`: a fresh manager with the
    /// default settings (get/renew/cancel served, no TOKEN auth on the client port).
    pub delegation: Option<Arc<crate::rm_delegation::RmDelegationSecrets>>,
    /// The RM's own user name (`yarn.resourcemanager.principal`, `_HOST` replaced), Java's
    /// login user: it renews any token as that token's renewer.
    pub login_user: Option<String>,
    /// `hadoop.proxyuser.*` on the client port: who may submit and call for others.
    pub proxy_users: Option<Arc<ipc::authorize::ProxyUsers>>,
}

/// The running RM.
pub struct RmService {
    server: Option<Server>,
    client_server: Option<Server>,
    master_server: Option<Server>,
    apps: Option<AppsRt>,
    dispatcher: Option<Dispatcher>,
    tracker: Arc<Mutex<ResourceTracker>>,
    cfg: RmConfig,
    clock: Clock,
    stop: Arc<AtomicBool>,
    housekeeping: Option<JoinHandle<()>>,
}

impl RmService {
    /// Starts everything; `listen` is the resource-tracker address (port 0 for any).
    pub fn start(
        cfg: RmConfig,
        listen: SocketAddr,
        placement: &Placement,
        server_cfg: ServerConfig,
    ) -> Result<RmService, Error> {
        Self::start_with_apps(cfg, listen, placement, server_cfg, None)
    }

    /// [`start`](Self::start), and with `apps` the application protocols and the scheduler
    /// ([`crate::app_service`]).
    pub fn start_with_apps(
        cfg: RmConfig,
        listen: SocketAddr,
        placement: &Placement,
        mut server_cfg: ServerConfig,
        apps: Option<AppsSetup>,
    ) -> Result<RmService, Error> {
        if let Some(w) = cfg.ipc_batch_wait {
            server_cfg.transport.batch_wait = w;
        }
        let clock = Clock::default();
        let hosts = HostLists::load(cfg.include_path.as_deref(), cfg.exclude_path.as_deref())?;
        let (dispatcher, reports) = Dispatcher::start(&cfg, placement, clock)?;
        for (i, r) in reports.iter().enumerate() {
            tracing::info!(
                shard = i,
                "completion log: {} records read from {} files, {} kept, {} torn-tail bytes cut",
                r.records,
                r.files,
                r.kept,
                r.truncated_bytes
            );
        }
        let tracker = ResourceTracker::new(
            cfg.clone(),
            hosts,
            dispatcher.mailboxes(),
            wall_ms() as i64,
            Box::new(OsEntropy),
            clock.now_ns(),
        )?;
        let tracker = Arc::new(Mutex::new(tracker));
        let (rt, app_servers) = match &apps {
            None => (None, (None, None)),
            Some(setup) => match start_apps(setup, &cfg, &tracker, &server_cfg, clock) {
                Ok((rt, c, m)) => (Some(rt), (Some(c), Some(m))),
                Err(e) => {
                    dispatcher.shutdown();
                    return Err(e);
                }
            },
        };
        if let Some(rt) = &rt {
            // Completions, containers seen RUNNING and health transitions reach the scheduler
            // from the shard threads, a batch at a time.
            dispatcher.set_sched_sink(rt.sched_sink());
        }
        let mut reg = Registry::new();
        register_tracker(&mut reg, &tracker, clock, rt.clone());
        register_admin(&mut reg, &tracker, &cfg, clock);
        let server = match Server::start(listen, server_cfg, reg) {
            Ok(s) => s,
            Err(e) => {
                if let Some(rt) = &rt {
                    rt.shutdown();
                }
                dispatcher.shutdown();
                return Err(Error::Spawn(format!("ipc server on {listen}: {e}")));
            }
        };
        let stop = Arc::new(AtomicBool::new(false));
        let hk = {
            let (tracker, stop, rt) = (tracker.clone(), stop.clone(), rt.clone());
            std::thread::Builder::new()
                .name("hp-rm-hk".into())
                .spawn(move || housekeeping(tracker, stop, clock, rt))
                .map_err(|e| Error::Spawn(e.to_string()))?
        };
        tracing::info!(
            "ResourceTracker listening on {} ({} shards, opportunistic {})",
            server.local_addr(),
            dispatcher.shards(),
            cfg.opportunistic
        );
        if let (Some(c), Some(m)) = &app_servers {
            tracing::info!(
                "ApplicationClientProtocol on {}, ApplicationMasterProtocol on {}",
                c.local_addr(),
                m.local_addr()
            );
        }
        Ok(RmService {
            server: Some(server),
            client_server: app_servers.0,
            master_server: app_servers.1,
            apps: rt,
            dispatcher: Some(dispatcher),
            tracker,
            cfg,
            clock,
            stop,
            housekeeping: Some(hk),
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.server
            .as_ref()
            .map(|s| s.local_addr())
            .unwrap_or_else(|| ([0, 0, 0, 0], 0).into())
    }

    /// Where ApplicationClientProtocol is served (with applications enabled).
    pub fn client_addr(&self) -> Option<SocketAddr> {
        self.client_server.as_ref().map(|s| s.local_addr())
    }

    /// Where ApplicationMasterProtocol is served (with applications enabled).
    pub fn scheduler_addr(&self) -> Option<SocketAddr> {
        self.master_server.as_ref().map(|s| s.local_addr())
    }

    /// The applications (with applications enabled).
    pub fn apps(&self) -> Option<&AppsRt> {
        self.apps.as_ref()
    }

    pub fn tracker(&self) -> &Arc<Mutex<ResourceTracker>> {
        &self.tracker
    }

    /// The monotonic clock the tracker's times are on (for [`crate::admin`]).
    pub fn clock(&self) -> Clock {
        self.clock
    }

    /// The Prometheus text for `/metrics`: the tracker's and shards' numbers, then the IPC
    /// servers' counters (`hotpath_rm_ipc_…{server="resource_tracker"|"client"|"scheduler"}`,
    /// authentication failures included), then the applications by state.
    pub fn metrics_text(&self) -> String {
        let views = self
            .dispatcher
            .as_ref()
            .map(|d| d.views())
            .unwrap_or_default();
        let t = lock(&self.tracker).metrics().clone();
        let mut text = render_prometheus(&t, &views);
        let mut servers = Vec::new();
        for (name, s) in [
            ("resource_tracker", &self.server),
            ("client", &self.client_server),
            ("scheduler", &self.master_server),
        ] {
            if let Some(s) = s {
                servers.push((name, s.metrics()));
            }
        }
        if !servers.is_empty() {
            let mut e = Exposition::new();
            e.ipc_servers("hotpath_rm", &servers);
            text.push_str(e.as_str());
        }
        if let Some(rt) = &self.apps {
            text.push_str(&rt.metrics_text());
        }
        text
    }

    /// The dispatcher backlog now: pending node entries summed over the shards' mailboxes.
    pub fn backlog(&self) -> u64 {
        self.dispatcher.as_ref().map(|d| d.backlog()).unwrap_or(0)
    }

    /// Largest shard backlog seen.
    pub fn max_backlog(&self) -> u64 {
        self.dispatcher
            .as_ref()
            .map(|d| d.max_backlog())
            .unwrap_or(0)
    }

    /// Re-reads the include/exclude files (SIGHUP, `refreshNodes`). Returns the nodes
    /// decommissioned by it.
    pub fn refresh_nodes(&self) -> Result<Vec<NodeKey>, Error> {
        refresh(&self.tracker, &self.cfg, self.clock)
    }

    /// Stops serving, finishes the shards' backlog, commits, joins everything.
    pub fn shutdown(mut self) {
        self.stop_all();
    }

    fn stop_all(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for s in [
            self.client_server.take(),
            self.master_server.take(),
            self.server.take(),
        ]
        .into_iter()
        .flatten()
        {
            s.shutdown();
        }
        if let Some(rt) = self.apps.take() {
            rt.shutdown();
        }
        if let Some(h) = self.housekeeping.take() {
            let _ = h.join();
        }
        if let Some(d) = self.dispatcher.take() {
            d.shutdown();
        }
    }
}

impl Drop for RmService {
    fn drop(&mut self) {
        self.stop_all();
    }
}

/// The applications' side: the AMRMToken secrets, [`Apps`] and its launcher, and the client
/// and scheduler servers (one unpinned ring thread each: their traffic is small beside the
/// heartbeats').
fn start_apps(
    setup: &AppsSetup,
    cfg: &RmConfig,
    tracker: &Arc<Mutex<ResourceTracker>>,
    server_cfg: &ServerConfig,
    clock: Clock,
) -> Result<(AppsRt, Server, Server), Error> {
    let amrm = Arc::new(AmrmTokenSecrets::new(AmrmTokenSecretManager::from_config(
        cfg,
        &mut OsEntropy,
        wall_ms(),
    )?));
    let secrets: Arc<dyn hadoop_wire::sasl::server::TokenSecrets> = amrm.clone();
    let auth = hadoop_wire::sasl::server::ServerAuth::new(
        hadoop_wire::sasl::message::AuthMethod::Token,
        Some(secrets),
        setup.qops.clone(),
    )
    .map_err(|e| Error::BadConfig(format!("ApplicationMasterProtocol auth: {e}")))?;
    let transport = |name: &str, backend| ipc::transport::TransportConfig {
        threads: 1,
        cpus: Vec::new(),
        thread_names: vec![name.to_string()],
        backend,
        ..server_cfg.transport.clone()
    };
    let rm_id = lock(tracker).rm_identifier();
    let mut apps = Apps::new(setup.cfg.clone(), rm_id, amrm.clone());
    let delegation = match &setup.security.delegation {
        Some(d) => d.clone(),
        None => Arc::new(crate::rm_delegation::RmDelegationSecrets::new(
            crate::rm_delegation::RmDelegationTokenSecretManager::new(Default::default())
                .map_err(|e| Error::BadConfig(e.to_string()))?,
            Box::new(|| wall_ms() as i64),
            crate::rm_delegation::ShortNames::new(None),
        )),
    };
    let (store, client_keys) = if cfg.recovery {
        let (s, k) = recover(cfg, &mut apps, &amrm, tracker, clock, &delegation)?;
        (Some(s), k)
    } else {
        (None, Vec::new())
    };
    // startThreads, after recovery: a new current key, then the remover's first pass.
    delegation
        .write()
        .start(&mut OsEntropy, wall_ms() as i64)
        .map_err(|e| Error::BadConfig(format!("RM delegation token keys: {e}")))?;
    let recovering = store.is_some();
    let rt = AppsRt::start(apps, amrm, tracker, store).map_err(|e| Error::Spawn(e.to_string()))?;
    // The recovered attempts' ClientToAM keys, before the compaction below writes them again.
    for (attempt, key) in client_keys {
        rt.client_to_am.restore(attempt, key);
    }
    rt.set_delegation(delegation);
    // The new keys reach the store (a compaction below writes them again).
    rt.with_delegation(|_| ());
    if recovering {
        rt.compact_store(true);
    }
    let mut creg = Registry::new();
    app_service::register_client(&mut creg, &rt, tracker, setup.security.app_acls.clone());
    let secure = setup.security.client_auth.as_ref().is_some_and(|a| {
        a.methods()
            .contains(&hadoop_wire::sasl::message::AuthMethod::Kerberos)
    });
    if secure {
        rt.set_secure();
    }
    crate::rm_delegation::register(&mut creg, &rt, secure, setup.security.login_user.clone());
    let mut mreg = Registry::new();
    app_service::register_master(&mut mreg, &rt, tracker);
    let defaults = ServerConfig::default();
    let client_cfg = ServerConfig {
        transport: transport("hp-rm-client", setup.cfg.client_io),
        auth: setup
            .security
            .client_auth
            .clone()
            .unwrap_or_else(|| defaults.auth.clone()),
        authorization: setup.security.authorization.clone(),
        proxy_users: setup.security.proxy_users.clone(),
        ..defaults.clone()
    };
    let master_cfg = ServerConfig {
        transport: transport("hp-rm-sched", setup.cfg.scheduler_io),
        auth: Arc::new(auth),
        authorization: setup.security.authorization.clone(),
        ..defaults
    };
    let started = Server::start(setup.client, client_cfg, creg)
        .map_err(|e| format!("ApplicationClientProtocol on {}: {e}", setup.client))
        .and_then(|c| {
            Server::start(setup.scheduler, master_cfg, mreg)
                .map(|m| (c, m))
                .map_err(|e| format!("ApplicationMasterProtocol on {}: {e}", setup.scheduler))
        });
    match started {
        Ok((c, m)) => Ok((rt, c, m)),
        Err(e) => {
            rt.shutdown();
            Err(Error::Spawn(e))
        }
    }
}

/// The recovered attempts' ClientToAM master keys.
type RecoveredClientKeys = Vec<(hadoop_wire::yarn::ids::AttemptId, Vec<u8>)>;

/// Opens the state store and rebuilds what it holds: the master keys (so tokens held by
/// running AMs and NodeManagers still verify), the epoch, and the applications.
fn recover(
    cfg: &RmConfig,
    apps: &mut Apps,
    amrm: &AmrmTokenSecrets,
    tracker: &Mutex<ResourceTracker>,
    clock: Clock,
    delegation: &crate::rm_delegation::RmDelegationSecrets,
) -> Result<(crate::state_store::StateStore, RecoveredClientKeys), Error> {
    use crate::master_key::MasterKey;
    let (store, rec) =
        crate::state_store::StateStore::open(&cfg.state_store_dir, cfg.state_store_max_bytes)?;
    let key = |k: &Option<hadoop_wire::pb::hadoop::yarn::MasterKeyProto>| {
        k.as_ref().and_then(|p| MasterKey::from_proto(p).ok())
    };
    if let Some(k) = &rec.keys {
        if let Some(cur) = key(&k.amrm_current) {
            amrm.write().restore_keys(cur, key(&k.amrm_next), wall_ms());
        }
        if let (Some(c), Some(n)) = (key(&k.container), key(&k.nm)) {
            lock(tracker).restore_keys(c, n, clock.now_ns());
        }
    }
    let dropped = crate::rm_delegation::recover_from(&mut delegation.write(), &rec);
    tracing::info!(
        "state store: {} RM delegation keys, {} RM delegation tokens recovered ({dropped} dropped: no key)",
        rec.dt_keys.len(),
        rec.dt_tokens.len() - dropped
    );
    let epoch = if rec.records == 0 { 0 } else { rec.epoch + 1 };
    apps.enable_store(epoch);
    let (live, done) = apps.recover(&rec, wall_ms());
    // The ClientToAM keys of the applications still running.
    let mut client_keys = Vec::new();
    for (&(ts, id), ra) in &rec.apps {
        let app = hadoop_wire::yarn::ids::AppId::new(ts, id);
        if apps.app(app).is_none_or(|a| a.state.is_final()) {
            continue;
        }
        for (&n, at) in &ra.attempts {
            if let Some(k) = &at.client_to_am_key {
                client_keys.push((
                    hadoop_wire::yarn::ids::AttemptId { app, attempt: n },
                    k.clone(),
                ));
            }
        }
    }
    tracing::info!(
        "state store {}: {} records ({} torn-tail bytes cut), epoch {epoch}: {live} running and {done} finished applications recovered ({} ClientToAM keys)",
        store.path().display(),
        rec.records,
        rec.truncated_bytes,
        client_keys.len()
    );
    Ok((store, client_keys))
}

fn refresh(
    tracker: &Mutex<ResourceTracker>,
    cfg: &RmConfig,
    clock: Clock,
) -> Result<Vec<NodeKey>, Error> {
    let hosts = HostLists::load(cfg.include_path.as_deref(), cfg.exclude_path.as_deref())?;
    let gone = lock(tracker).refresh_hosts(hosts, clock.now_ns());
    for n in &gone {
        tracing::info!("node {n} excluded by refreshNodes: decommissioned");
    }
    Ok(gone)
}

/// Tells the scheduler about nodes that left.
fn departed(rt: &Option<AppsRt>, gone: Vec<NodeKey>) {
    if let Some(rt) = rt {
        if !gone.is_empty() {
            rt.with_nowait(|a| {
                for n in &gone {
                    a.node_removed(n, wall_ms());
                }
            });
        }
    }
}

/// NODE_UPDATE for the scheduler, called only while [`AppsRt::has_work`] says some pending
/// application's need fits on some node: allocation on the heartbeat's node if it is healthy
/// and has room (Java allocates in the node's heartbeat). Completions and containers seen
/// RUNNING reach the scheduler from the shards instead ([`AppsRt::sched_sink`]), batched and
/// off the ring thread. Allocates nothing unless it places a container.
fn node_update(rt: &AppsRt, request: &[u8]) {
    use hadoop_wire::view::yarn::NodeHeartbeatRequestView;
    let Ok(Some(status)) = NodeHeartbeatRequestView::new(request).node_status() else {
        return;
    };
    let Ok(Some(nid)) = status.node_id() else {
        return;
    };
    let Ok((host, port)) = NodeKey::read(nid) else {
        return;
    };
    // proto2: an absent is_node_healthy reads as false, as in Java (and in the shard).
    let healthy = matches!(
        status
            .node_health_status()
            .map(|h| h.map(|h| h.is_node_healthy())),
        Ok(Some(Ok(Some(true))))
    );
    rt.with_nowait(|a| a.node_heartbeat(host, port, healthy, wall_ms()));
}

fn register_tracker(
    reg: &mut Registry,
    tracker: &Arc<Mutex<ResourceTracker>>,
    clock: Clock,
    rt: Option<AppsRt>,
) {
    let t = tracker.clone();
    let m = lock(tracker).metrics().clone();
    let r = rt.clone();
    reg.register(
        RESOURCE_TRACKER_PROTOCOL,
        RESOURCE_TRACKER_VERSION,
        NODE_HEARTBEAT,
        move |call: &Call<'_>, reply: &mut Reply<'_, '_>| {
            let t0 = std::time::Instant::now();
            OUT.with(|out| {
                let mut out = out.borrow_mut();
                out.clear();
                let mut g = lock(&t);
                let o = g
                    .node_heartbeat(call.request, clock.now_ns(), &mut out)
                    .map_err(bad_request)?;
                let gone = match o {
                    HeartbeatOutcome::Normal { .. } => Vec::new(),
                    _ => g.take_departed(),
                };
                drop(g);
                // With applications, an unchanged heartbeat costs one relaxed load here: no lock
                // on the applications, no allocation (rm-core/tests/alloc_apps.rs).
                if let Some(r) = &r {
                    if r.has_work() && matches!(o, HeartbeatOutcome::Normal { .. }) {
                        node_update(r, call.request);
                    }
                }
                departed(&r, gone);
                match o {
                    HeartbeatOutcome::Normal { .. } => {}
                    // The Java RM logs this at INFO too. The RPC's call id and retry count say
                    // whether the client's retry proxy resent the call or the NM sent a new one
                    // with a stale responseId (a response it never received).
                    HeartbeatOutcome::Duplicate => tracing::info!(
                        "duplicate heartbeat answered from the cache (call id {}, retry {}, client {})",
                        call.call_id,
                        call.retry_count,
                        hex(call.client_id)
                    ),
                    HeartbeatOutcome::ResyncUnknown => {
                        tracing::info!("heartbeat from an unknown node: RESYNC")
                    }
                    HeartbeatOutcome::ResyncBehind { last, got } => {
                        tracing::info!("heartbeat too far behind (rm {last}, nm {got}): RESYNC")
                    }
                    HeartbeatOutcome::Shutdown => {
                        tracing::info!("heartbeat from a disallowed host: SHUTDOWN")
                    }
                }
                let r = reply.bytes(&out).map_err(CallError::from);
                m.record_handling(t0.elapsed().as_nanos() as u64);
                r
            })
        },
    );
    let t = tracker.clone();
    let r = rt.clone();
    reg.register(
        RESOURCE_TRACKER_PROTOCOL,
        RESOURCE_TRACKER_VERSION,
        REGISTER_NODE_MANAGER,
        move |call: &Call<'_>, reply: &mut Reply<'_, '_>| {
            let mut out = Vec::new();
            let mut g = lock(&t);
            let o = g
                .register_node_manager(call.request, clock.now_ns(), &mut out)
                .map_err(bad_request)?;
            let info = match &o {
                RegisterOutcome::Accepted { node, .. } => g.node(&node.host, node.port).map(|n| {
                    (
                        format!("{}:{}", n.id.host, n.http_port),
                        Res::new(n.total_memory_mb, n.total_vcores as i64),
                    )
                }),
                _ => None,
            };
            let gone = g.take_departed();
            drop(g);
            departed(&r, gone);
            if let (Some(r), RegisterOutcome::Accepted { node, .. }, Some((http, total))) =
                (&r, &o, info)
            {
                registered(r, node, http, total, call.request);
            }
            match o {
                RegisterOutcome::Accepted { node, reconnected } => {
                    tracing::info!(
                        "node {node} {}",
                        if reconnected {
                            "re-registered"
                        } else {
                            "registered"
                        }
                    )
                }
                RegisterOutcome::Refused { node, reason } => {
                    tracing::info!("node {node} refused: {reason}")
                }
            }
            reply.bytes(&out).map_err(CallError::from)
        },
    );
    let t = tracker.clone();
    let r = rt;
    reg.register(
        RESOURCE_TRACKER_PROTOCOL,
        RESOURCE_TRACKER_VERSION,
        UNREGISTER_NODE_MANAGER,
        move |call: &Call<'_>, reply: &mut Reply<'_, '_>| {
            let mut out = Vec::new();
            let mut g = lock(&t);
            let n = g
                .unregister_node_manager(call.request, clock.now_ns(), &mut out)
                .map_err(bad_request)?;
            let gone = g.take_departed();
            drop(g);
            departed(&r, gone);
            if let Some(n) = n {
                tracing::info!("node {n} unregistered (SHUTDOWN)");
            }
            reply.bytes(&out).map_err(CallError::from)
        },
    );
}

/// A node (re-)registered: its capacity and the containers it reported, to the scheduler.
fn registered(rt: &AppsRt, node: &NodeKey, http: String, total: Res, request: &[u8]) {
    use crate::apps::Reported;
    use hadoop_wire::pb::hadoop::yarn::{ContainerStateProto, RegisterNodeManagerRequestProto};
    use prost::Message;
    let req = RegisterNodeManagerRequestProto::decode(request);
    let running_apps = req
        .as_ref()
        .is_ok_and(|r| !r.running_applications.is_empty());
    let reported: Vec<Reported> = req
        .map(|req| {
            req.container_statuses
                .iter()
                .filter_map(|c| {
                    let id = hadoop_wire::token::identifier::container_from_proto(
                        c.container_id.as_ref()?,
                    )?;
                    let state = c
                        .container_state
                        .and_then(|s| ContainerStateProto::try_from(s).ok())?;
                    Some(Reported {
                        id,
                        state,
                        exit_status: c.container_exit_status.unwrap_or(-1000),
                        diagnostics: c.diagnostics.clone().unwrap_or_default(),
                        res: c.resource.as_ref().map(Res::from_proto).unwrap_or_default(),
                        priority: c.priority.and_then(|p| p.priority).unwrap_or(0),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    rt.with_nowait(|a| {
        a.node_registered_running(node, http, total, &reported, running_apps, wall_ms())
    });
}

fn admin_id(call: &Call<'_>) -> Result<String, CallError> {
    use prost::Message;
    admin::AdminRequestProto::decode(call.request)
        .map_err(CallError::invalid_request)?
        .id
        .ok_or_else(|| CallError::application("java.lang.IllegalArgumentException", "no id"))
}

fn admin_reply(reply: &mut Reply<'_, '_>, message: String) -> Result<(), CallError> {
    reply
        .message(&admin::AdminResponseProto {
            message: Some(message),
        })
        .map_err(CallError::from)
}

fn register_admin(
    reg: &mut Registry,
    tracker: &Arc<Mutex<ResourceTracker>>,
    cfg: &RmConfig,
    clock: Clock,
) {
    let t = tracker.clone();
    reg.register(
        ADMIN_PROTOCOL,
        1,
        admin::FINISH_APPLICATION,
        move |call: &Call<'_>, reply: &mut Reply<'_, '_>| {
            let id = admin_id(call)?;
            let app = AppKey::parse(&id).ok_or_else(|| {
                CallError::application(
                    "java.lang.IllegalArgumentException",
                    format!("not an application id: {id}"),
                )
            })?;
            lock(&t).finish_app(app);
            tracing::info!("admin: application {app} finished");
            admin_reply(
                reply,
                format!("{app} finished; its nodes clean it up on their next heartbeat"),
            )
        },
    );
    let t = tracker.clone();
    reg.register(
        ADMIN_PROTOCOL,
        1,
        admin::KILL_CONTAINER,
        move |call: &Call<'_>, reply: &mut Reply<'_, '_>| {
            let id = admin_id(call)?;
            let c = ContainerKey::parse(&id).ok_or_else(|| {
                CallError::application(
                    "java.lang.IllegalArgumentException",
                    format!("not a container id: {id}"),
                )
            })?;
            lock(&t).kill_container(c);
            tracing::info!("admin: kill {c}");
            admin_reply(reply, format!("{c}: kill queued for the node running it"))
        },
    );
    let t = tracker.clone();
    let cfg = cfg.clone();
    reg.register(
        ADMIN_PROTOCOL,
        1,
        admin::REFRESH_NODES,
        move |_call: &Call<'_>, reply: &mut Reply<'_, '_>| {
            let gone = refresh(&t, &cfg, clock)
                .map_err(|e| CallError::application("java.io.IOException", e.to_string()))?;
            let names: Vec<String> = gone.iter().map(|n| n.to_string()).collect();
            admin_reply(
                reply,
                format!(
                    "host lists reloaded; decommissioned: [{}]",
                    names.join(", ")
                ),
            )
        },
    );
}

fn housekeeping(
    tracker: Arc<Mutex<ResourceTracker>>,
    stop: Arc<AtomicBool>,
    clock: Clock,
    rt: Option<AppsRt>,
) {
    let mut last_summary = Instant::now();
    let mut last_rate = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(200));
        // The tick scans every node under the tracker lock: once a second is enough for the
        // liveness monitor (Java checks every expiry/3) and keeps ring threads unblocked.
        if last_rate.elapsed() < Duration::from_secs(1) {
            continue;
        }
        let mut t = lock(&tracker);
        match t.tick(clock.now_ns()) {
            Ok(r) => {
                for n in &r.expired {
                    tracing::info!(
                        "node {n} LOST: silent past yarn.nm.liveness-monitor.expiry-interval-ms"
                    );
                }
            }
            Err(e) => tracing::error!("tracker tick: {e}"),
        }
        let m = t.metrics().clone();
        let active = t.active_nodes();
        let gone = t.take_departed();
        drop(t);
        departed(&rt, gone);
        if let Some(rt) = &rt {
            let now = wall_ms();
            if let Err(e) = rt.amrm.write().tick(&mut OsEntropy, now) {
                tracing::error!("AMRMToken key roll: {e}");
            }
            match rt.with_delegation(|m| m.tick(&mut OsEntropy, now as i64)) {
                Some(Err(e)) => tracing::error!("RM delegation token key roll: {e}"),
                Some(Ok(gone)) if !gone.is_empty() => {
                    tracing::info!("RM delegation tokens expired and removed: {gone:?}")
                }
                _ => {}
            }
            for a in rt.with(|a| a.tick(now)) {
                tracing::info!("ApplicationMaster for attempt {a} timed out");
            }
            rt.persist_keys();
            rt.compact_store(false);
        }
        let rate = m.sample_rate();
        last_rate = Instant::now();
        if last_summary.elapsed() >= Duration::from_secs(10) {
            tracing::info!(
                "summary: {active} active nodes, {rate:.0} heartbeats/s, {} heartbeats, {} resyncs",
                m.heartbeats.load(Ordering::Relaxed),
                m.resyncs.load(Ordering::Relaxed)
            );
            last_summary = Instant::now();
        }
    }
}

/// Lowercase hex of a short id (the 16-byte IPC client id), for log lines only.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
