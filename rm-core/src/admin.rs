//! `yarn rmadmin`: Java's `ResourceManagerAdministrationProtocol` on
//! `yarn.resourcemanager.admin.address` (8033), as a non-HA Java RM's `AdminService` serves it.
//!
//! - The port authenticates as the RM's other client ports (SIMPLE, or KERBEROS as
//!   `yarn.resourcemanager.principal`: the caller builds the [`ServerConfig`]), and with
//!   `hadoop.security.authorization` checks `security.resourcemanager-administration.protocol.acl`
//!   ([`SERVICE_ACLS`]) per connection.
//! - Every call but `refreshServiceAcls`'s precondition first checks the caller against
//!   `yarn.admin.acl` (default `*`) plus the RM's own user, whatever `yarn.acl.enable` says
//!   (Java's `checkAcls` → `RMServerUtils.verifyAdminAccess`): a refusal is a `YarnException`
//!   wrapping `AccessControlException: User <u> doesn't have permission to call '<method>'`.
//! - Refreshes re-read the configuration as Java's do (site files, `capacity-scheduler.xml`,
//!   `hadoop-policy.xml`: the caller's [`AdminSetup::reload`]):
//!   `refreshNodes` the include/exclude files (NORMAL: excluded nodes are decommissioned at
//!   once; GRACEFUL: they become DECOMMISSIONING, keep their containers, get no new ones, and
//!   are decommissioned when they have none left or their timeout (the request's, else
//!   `yarn.resourcemanager.nodemanager-graceful-decommission-timeout-secs`, 3600) passes;
//!   FORCEFUL: every DECOMMISSIONING node now), `refreshAdminAcls` `yarn.admin.acl`,
//!   `refreshServiceAcls` every RM server's service ACLs, `refreshQueues` the queue ACLs.
//!   `refreshSuperUserGroupsConfiguration` re-reads the proxy users (`hadoop.proxyuser.*`);
//!   `refreshUserToGroupsMappings` has nothing to drop (groups are not cached) and succeeds
//!   after the admin check, as Java's does. `refreshNodesResources` and
//!   `refreshClusterMaxPriority` succeed as Java's do without `dynamic-resources.xml` and with
//!   the priority unused by our scheduler. The node-label methods answer Java's "Node-label-based
//!   scheduling is disabled" (labels are never enabled here).
//! - Differences from Java: a DECOMMISSIONING node is ready when it runs no containers (Java
//!   also waits for the applications that ran there to finish); readiness is polled every
//!   second instead of on each heartbeat. `updateNodeResource`, `mapAttributesToNodes` and
//!   `deregisterSubCluster` are not served (an unknown method).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hadoop_wire::pb::hadoop::yarn::{
    CheckForDecommissioningNodesResponseProto, GetGroupsForUserRequestProto,
    GetGroupsForUserResponseProto, NodeIdProto,
};
use ipc::authorize::{
    AccessControlList, GroupsMapping, ProtocolPolicy, ProxyUsers, ServiceAuthorization,
};
use ipc::server::{Call, CallError, Registry, Reply, Server, ServerConfig};

use crate::app_acls::{AclPolicy, ACCESS_CONTROL_EXCEPTION, ADMIN_ACL, DEFAULT_ADMIN_ACL};
use crate::app_service::AppsRt;
use crate::dispatcher::Clock;
use crate::hosts::HostLists;
use crate::ids::NodeKey;
use crate::service::RmService;
use crate::tracker::{Membership, ResourceTracker};
use crate::Error;

/// The protocol's name on the wire.
pub const PROTOCOL: &str =
    "org.apache.hadoop.yarn.server.api.ResourceManagerAdministrationProtocolPB";
/// Its version.
pub const VERSION: u64 = 1;
/// `yarn.resourcemanager.admin.address`.
pub const ADDRESS_KEY: &str = "yarn.resourcemanager.admin.address";
/// Its default port.
pub const DEFAULT_PORT: u16 = 8033;
/// `yarn.resourcemanager.nodemanager-graceful-decommission-timeout-secs` (default 3600).
pub const GRACEFUL_TIMEOUT_KEY: &str =
    "yarn.resourcemanager.nodemanager-graceful-decommission-timeout-secs";
/// Its default, seconds.
pub const DEFAULT_GRACEFUL_TIMEOUT_SECS: u64 = 3600;
/// The class of every refusal and failure (Java's `RPCUtil.getRemoteException`).
pub const YARN_EXCEPTION: &str = "org.apache.hadoop.yarn.exceptions.YarnException";

/// The service-level ACL of the admin protocol (Java's `RMPolicyProvider`).
pub const SERVICE_ACLS: &[ProtocolPolicy] = &[ProtocolPolicy {
    protocol: PROTOCOL,
    acl_key: "security.resourcemanager-administration.protocol.acl",
    client_principal_key: None,
}];

/// Method names, as Java's RMAdminCLI calls them.
pub mod method {
    pub const REFRESH_QUEUES: &str = "refreshQueues";
    pub const REFRESH_NODES: &str = "refreshNodes";
    pub const REFRESH_SUPER_USER_GROUPS: &str = "refreshSuperUserGroupsConfiguration";
    pub const REFRESH_USER_TO_GROUPS: &str = "refreshUserToGroupsMappings";
    pub const REFRESH_ADMIN_ACLS: &str = "refreshAdminAcls";
    pub const REFRESH_SERVICE_ACLS: &str = "refreshServiceAcls";
    pub const GET_GROUPS_FOR_USER: &str = "getGroupsForUser";
    pub const REFRESH_NODES_RESOURCES: &str = "refreshNodesResources";
    pub const CHECK_FOR_DECOMMISSIONING_NODES: &str = "checkForDecommissioningNodes";
    pub const REFRESH_CLUSTER_MAX_PRIORITY: &str = "refreshClusterMaxPriority";
    pub const ADD_TO_CLUSTER_NODE_LABELS: &str = "addToClusterNodeLabels";
    pub const REMOVE_FROM_CLUSTER_NODE_LABELS: &str = "removeFromClusterNodeLabels";
    pub const REPLACE_LABELS_ON_NODES: &str = "replaceLabelsOnNodes";
}

/// Hadoop's `RefreshNodesRequestProto` (`hadoop-wire` leaves it out: its enum's value names
/// clash with `NodeActionProto`'s). `decommission_type` is `DecommissionTypeProto`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RefreshNodesRequestProto {
    #[prost(int32, optional, tag = "1")]
    pub decommission_type: Option<i32>,
    /// Seconds.
    #[prost(int32, optional, tag = "2")]
    pub decommission_timeout: Option<i32>,
    #[prost(string, optional, tag = "3")]
    pub sub_cluster_id: Option<String>,
}

/// `DecommissionTypeProto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecommissionType {
    Normal = 1,
    Graceful = 2,
    Forceful = 3,
}

impl DecommissionType {
    /// From the wire (absent: NORMAL, the proto's default; an unknown number is NORMAL too, as
    /// proto2 Java reads an unknown enum value as the field's default).
    pub fn from_wire(v: Option<i32>) -> DecommissionType {
        match v {
            Some(2) => DecommissionType::Graceful,
            Some(3) => DecommissionType::Forceful,
            _ => DecommissionType::Normal,
        }
    }
}

/// Re-reads the RM's configuration (site files, `capacity-scheduler.xml`, `hadoop-policy.xml`,
/// command-line overrides), as each refresh does.
pub type Reload = Box<dyn Fn() -> Result<conf::Configuration, Error> + Send + Sync>;

/// What the admin service needs besides the running RM.
pub struct AdminSetup {
    /// Where to listen (`yarn.resourcemanager.admin.address`).
    pub address: SocketAddr,
    /// Its server: authentication as the RM's client port, and [`SERVICE_ACLS`] in
    /// `authorization` when `hadoop.security.authorization` is on.
    pub server: ServerConfig,
    pub reload: Reload,
    /// The RM's own short user name: an admin whatever `yarn.admin.acl` says.
    pub daemon_user: Option<String>,
    pub groups: Arc<dyn GroupsMapping>,
    /// Every RM server's service ACLs (this one's included), refreshed together by
    /// `refreshServiceAcls`; empty when `hadoop.security.authorization` is off.
    pub service_acls: Vec<Arc<ServiceAuthorization>>,
    /// The application ACLs (`yarn.acl.enable`), whose queue ACLs `refreshQueues` re-reads.
    pub app_acls: Option<Arc<AclPolicy>>,
    /// The queues the RM serves (their ACL keys are re-read).
    pub queues: Vec<String>,
    /// `hadoop.proxyuser.*` (the client and admin ports'), re-read by
    /// `refreshSuperUserGroupsConfiguration`.
    pub proxy_users: Option<Arc<ProxyUsers>>,
}

/// A host being decommissioned gracefully.
#[derive(Debug, Clone, Copy)]
struct Draining {
    since: Instant,
    timeout: Duration,
}

struct State {
    reload: Reload,
    daemon_user: Option<String>,
    groups: Arc<dyn GroupsMapping>,
    admin_acl: RwLock<AccessControlList>,
    service_acls: Vec<Arc<ServiceAuthorization>>,
    app_acls: Option<Arc<AclPolicy>>,
    queues: Vec<String>,
    proxy_users: Option<Arc<ProxyUsers>>,
    tracker: Arc<Mutex<ResourceTracker>>,
    apps: Option<AppsRt>,
    clock: Clock,
    /// The lists last read, and the hosts draining under them.
    hosts: Mutex<(HostLists, BTreeMap<String, Draining>)>,
}

/// The running admin service.
pub struct AdminService {
    server: Option<Server>,
    stop: Arc<AtomicBool>,
    watcher: Option<JoinHandle<()>>,
    state: Arc<State>,
}

fn yarn_error(cause_class: &str, message: impl std::fmt::Display) -> CallError {
    CallError::application(YARN_EXCEPTION, format!("{cause_class}: {message}"))
}

fn io_error(e: impl std::fmt::Display) -> CallError {
    yarn_error("java.io.IOException", e)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl State {
    /// Java's `checkAcls(method)`: the caller's short name, or the refusal.
    fn check(&self, call: &Call<'_>, method: &str) -> Result<String, CallError> {
        let user = call.user.unwrap_or("");
        let admin = self.daemon_user.as_deref() == Some(user)
            || self
                .admin_acl
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .allows(user, &|u: &str| self.groups.groups(u));
        if !admin {
            tracing::warn!("User {user} doesn't have permission to call '{method}'");
            return Err(yarn_error(
                ACCESS_CONTROL_EXCEPTION,
                format!("User {user} doesn't have permission to call '{method}'"),
            ));
        }
        tracing::info!("RM Admin: {method} invoked by user {user}");
        Ok(user.to_string())
    }

    fn conf(&self) -> Result<conf::Configuration, CallError> {
        (self.reload)().map_err(io_error)
    }

    /// Host lists from `conf`'s include/exclude paths.
    fn read_lists(conf: &conf::Configuration) -> Result<HostLists, Error> {
        let path = |k: &str| {
            conf.get(k)
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .map(std::path::PathBuf::from)
        };
        HostLists::load(
            path(crate::config::INCLUDE_PATH).as_deref(),
            path(crate::config::EXCLUDE_PATH).as_deref(),
        )
    }

    /// Installs `lists` with the draining hosts still allowed, recommissions nodes whose hosts
    /// are allowed again, marks the draining ones in the scheduler. Returns the nodes
    /// decommissioned now.
    fn apply(&self, lists: HostLists, draining: BTreeMap<String, Draining>) -> Vec<NodeKey> {
        let mut g = lock(&self.hosts);
        let back: Vec<String> =
            g.1.keys()
                .filter(|h| !draining.contains_key(*h))
                .cloned()
                .collect();
        let installed = lists.clone().with_grace(draining.keys().cloned());
        let (gone, marked, unmarked) = {
            let mut t = lock(&self.tracker);
            let gone = t.refresh_hosts(installed, self.clock.now_ns());
            let marked: Vec<NodeKey> = t
                .nodes()
                .filter(|n| {
                    n.membership == Membership::Active && draining.contains_key(&*n.id.host)
                })
                .map(|n| n.id.clone())
                .collect();
            // Whatever their state now: one decommissioned here keeps no mark for when it
            // registers again.
            let unmarked: Vec<NodeKey> = t
                .nodes()
                .filter(|n| back.iter().any(|b| **b == *n.id.host))
                .map(|n| n.id.clone())
                .collect();
            (gone, marked, unmarked)
        };
        *g = (lists, draining);
        drop(g);
        if let Some(rt) = &self.apps {
            rt.with(|a| {
                for n in &marked {
                    a.set_decommissioning(n, true);
                }
                for n in &unmarked {
                    a.set_decommissioning(n, false);
                }
            });
        }
        for n in &marked {
            tracing::info!("node {n}: DECOMMISSIONING");
        }
        for n in unmarked.iter().filter(|n| !gone.contains(n)) {
            tracing::info!("node {n}: back in service (RECOMMISSIONED)");
        }
        for n in &gone {
            tracing::info!("node {n} excluded by refreshNodes: DECOMMISSIONED");
        }
        gone
    }

    fn refresh_nodes(&self, kind: DecommissionType, timeout: Option<i32>) -> Result<(), CallError> {
        let (lists, mut draining) = {
            let g = lock(&self.hosts);
            (g.0.clone(), g.1.clone())
        };
        let lists = match kind {
            DecommissionType::Forceful => {
                draining.clear();
                lists
            }
            DecommissionType::Normal | DecommissionType::Graceful => {
                let conf = self.conf()?;
                let lists = State::read_lists(&conf).map_err(io_error)?;
                if kind == DecommissionType::Normal {
                    draining.clear();
                } else {
                    let timeout = match timeout {
                        Some(t) if t >= 0 => Duration::from_secs(t as u64),
                        _ => Duration::from_secs(match conf.get(GRACEFUL_TIMEOUT_KEY) {
                            None => DEFAULT_GRACEFUL_TIMEOUT_SECS,
                            Some(_) => conf.get_u64(GRACEFUL_TIMEOUT_KEY).map_err(io_error)?,
                        }),
                    };
                    draining.retain(|h, _| !lists.is_listed_valid(h));
                    for d in draining.values_mut() {
                        d.timeout = timeout;
                    }
                    let now = Instant::now();
                    let newly: Vec<String> = lock(&self.tracker)
                        .nodes()
                        .filter(|n| {
                            n.membership == Membership::Active && !lists.is_listed_valid(&n.id.host)
                        })
                        .map(|n| n.id.host.to_string())
                        .collect();
                    for h in newly {
                        draining.entry(h).or_insert(Draining {
                            since: now,
                            timeout,
                        });
                    }
                }
                lists
            }
        };
        self.apply(lists, draining);
        Ok(())
    }

    /// The DECOMMISSIONING nodes now.
    fn decommissioning(&self) -> Vec<NodeKey> {
        let g = lock(&self.hosts);
        let t = lock(&self.tracker);
        t.nodes()
            .filter(|n| n.membership == Membership::Active && g.1.contains_key(&*n.id.host))
            .map(|n| n.id.clone())
            .collect()
    }

    /// One pass of the decommissioning watcher: hosts whose nodes run nothing, or whose
    /// timeout passed, are decommissioned.
    fn watch(&self) {
        let (lists, draining) = {
            let g = lock(&self.hosts);
            if g.1.is_empty() {
                return;
            }
            (g.0.clone(), g.1.clone())
        };
        let nodes = self.decommissioning();
        let busy = |host: &str| -> bool {
            let Some(rt) = &self.apps else { return false };
            let mine: Vec<&NodeKey> = nodes.iter().filter(|n| &*n.host == host).collect();
            rt.with(|a| mine.iter().any(|n| a.containers_on(n).unwrap_or(0) > 0))
        };
        let mut keep = draining.clone();
        let mut done = false;
        for (host, d) in &draining {
            let timed_out = d.since.elapsed() >= d.timeout;
            if timed_out || !busy(host) {
                tracing::info!(
                    "{host}: {} — decommissioning",
                    if timed_out {
                        "graceful decommission timed out"
                    } else {
                        "no containers left"
                    }
                );
                keep.remove(host);
                done = true;
            }
        }
        if done {
            let finished: Vec<&NodeKey> = nodes
                .iter()
                .filter(|n| !keep.contains_key(&*n.host))
                .collect();
            if let Some(rt) = &self.apps {
                rt.with(|a| {
                    for n in &finished {
                        a.set_decommissioning(n, false);
                    }
                });
            }
            self.apply(lists, keep);
        }
    }
}

impl AdminService {
    /// Starts the admin service of `rm` (whose host lists it takes over) with `setup`.
    pub fn start(rm: &RmService, setup: AdminSetup) -> Result<AdminService, Error> {
        let conf = (setup.reload)()?;
        let lists = State::read_lists(&conf)?;
        let state = Arc::new(State {
            admin_acl: RwLock::new(AccessControlList::parse(
                conf.get(ADMIN_ACL).unwrap_or(DEFAULT_ADMIN_ACL),
            )),
            reload: setup.reload,
            daemon_user: setup.daemon_user.filter(|u| !u.is_empty()),
            groups: setup.groups,
            service_acls: setup.service_acls,
            app_acls: setup.app_acls,
            queues: setup.queues,
            proxy_users: setup.proxy_users,
            tracker: rm.tracker().clone(),
            apps: rm.apps().cloned(),
            clock: rm.clock(),
            hosts: Mutex::new((lists, BTreeMap::new())),
        });
        let mut reg = Registry::new();
        register(&mut reg, &state);
        let mut server_cfg = setup.server;
        server_cfg.transport.threads = 1;
        server_cfg.transport.cpus = Vec::new();
        server_cfg.transport.thread_names = vec!["hp-rm-admin".into()];
        let server = Server::start(setup.address, server_cfg, reg).map_err(|e| {
            Error::Spawn(format!(
                "ResourceManagerAdministrationProtocol on {}: {e}",
                setup.address
            ))
        })?;
        let stop = Arc::new(AtomicBool::new(false));
        let watcher = {
            let (state, stop) = (state.clone(), stop.clone());
            std::thread::Builder::new()
                .name("hp-rm-decom".into())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(250));
                        state.watch();
                    }
                })
                .map_err(|e| Error::Spawn(e.to_string()))?
        };
        tracing::info!(
            "ResourceManagerAdministrationProtocol on {}",
            server.local_addr()
        );
        Ok(AdminService {
            server: Some(server),
            stop,
            watcher: Some(watcher),
            state,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.server
            .as_ref()
            .map(|s| s.local_addr())
            .unwrap_or_else(|| ([0, 0, 0, 0], 0).into())
    }

    /// The DECOMMISSIONING nodes now (`checkForDecommissioningNodes`).
    pub fn decommissioning(&self) -> Vec<NodeKey> {
        self.state.decommissioning()
    }

    /// `refreshNodes` as SIGHUP asks for it (NORMAL, no admin check).
    pub fn refresh_nodes(&self) -> Result<(), String> {
        self.state
            .refresh_nodes(DecommissionType::Normal, None)
            .map_err(|e| e.message)
    }

    pub fn shutdown(mut self) {
        self.stop_all();
    }

    fn stop_all(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(s) = self.server.take() {
            s.shutdown();
        }
        if let Some(h) = self.watcher.take() {
            let _ = h.join();
        }
    }
}

impl Drop for AdminService {
    fn drop(&mut self) {
        self.stop_all();
    }
}

/// One method: the admin check, then `f`'s answer (an empty message when `f` gives none).
fn serve(
    reg: &mut Registry,
    state: &Arc<State>,
    name: &'static str,
    f: impl Fn(&State, &Call<'_>) -> Result<Vec<u8>, CallError> + Send + Sync + 'static,
) {
    let s = state.clone();
    reg.register(
        PROTOCOL,
        VERSION,
        name,
        move |call: &Call<'_>, reply: &mut Reply<'_, '_>| {
            let out = f(&s, call)?;
            reply.bytes(&out).map_err(CallError::from)
        },
    );
}

fn register(reg: &mut Registry, state: &Arc<State>) {
    use method::*;
    use prost::Message;
    serve(reg, state, REFRESH_NODES, |s, call| {
        s.check(call, REFRESH_NODES)?;
        let req =
            RefreshNodesRequestProto::decode(call.request).map_err(CallError::invalid_request)?;
        s.refresh_nodes(
            DecommissionType::from_wire(req.decommission_type),
            req.decommission_timeout,
        )?;
        Ok(Vec::new())
    });
    serve(reg, state, REFRESH_QUEUES, |s, call| {
        s.check(call, REFRESH_QUEUES)?;
        if let Some(p) = &s.app_acls {
            let conf = s.conf()?;
            p.reload(&conf, &s.queues).map_err(io_error)?;
        }
        Ok(Vec::new())
    });
    serve(reg, state, REFRESH_ADMIN_ACLS, |s, call| {
        s.check(call, REFRESH_ADMIN_ACLS)?;
        let conf = s.conf()?;
        let acl = AccessControlList::parse(conf.get(ADMIN_ACL).unwrap_or(DEFAULT_ADMIN_ACL));
        *s.admin_acl.write().unwrap_or_else(|p| p.into_inner()) = acl;
        Ok(Vec::new())
    });
    serve(reg, state, REFRESH_SERVICE_ACLS, |s, call| {
        if s.service_acls.is_empty() {
            return Err(io_error(
                "Service Authorization (hadoop.security.authorization) not enabled.",
            ));
        }
        s.check(call, REFRESH_SERVICE_ACLS)?;
        let conf = s.conf()?;
        for a in &s.service_acls {
            a.reload(&conf);
        }
        Ok(Vec::new())
    });
    serve(reg, state, REFRESH_SUPER_USER_GROUPS, |s, call| {
        s.check(call, REFRESH_SUPER_USER_GROUPS)?;
        if let Some(p) = &s.proxy_users {
            p.reload(&crate::config::with_rm_proxy_users(s.conf()?));
        }
        Ok(Vec::new())
    });
    for name in [
        REFRESH_USER_TO_GROUPS,
        REFRESH_NODES_RESOURCES,
        REFRESH_CLUSTER_MAX_PRIORITY,
    ] {
        serve(reg, state, name, move |s, call| {
            s.check(call, name)?;
            Ok(Vec::new())
        });
    }
    serve(reg, state, GET_GROUPS_FOR_USER, |s, call| {
        s.check(call, GET_GROUPS_FOR_USER)?;
        let req = GetGroupsForUserRequestProto::decode(call.request)
            .map_err(CallError::invalid_request)?;
        Ok(GetGroupsForUserResponseProto {
            groups: s.groups.groups(&req.user),
        }
        .encode_to_vec())
    });
    serve(reg, state, CHECK_FOR_DECOMMISSIONING_NODES, |s, call| {
        s.check(call, CHECK_FOR_DECOMMISSIONING_NODES)?;
        Ok(CheckForDecommissioningNodesResponseProto {
            decommissioning_nodes: s
                .decommissioning()
                .into_iter()
                .map(|n| NodeIdProto {
                    host: Some(n.host.to_string()),
                    port: Some(n.port),
                })
                .collect(),
        }
        .encode_to_vec())
    });
    for name in [
        ADD_TO_CLUSTER_NODE_LABELS,
        REMOVE_FROM_CLUSTER_NODE_LABELS,
        REPLACE_LABELS_ON_NODES,
    ] {
        serve(reg, state, name, move |s, call| {
            s.check(call, name)?;
            Err(io_error(
                "Node-label-based scheduling is disabled. Please check yarn.node-labels.enabled",
            ))
        });
    }
}
