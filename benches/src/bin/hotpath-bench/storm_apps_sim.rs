//! The simulated cluster of `storm-apps`: N NodeManagers and the ApplicationMasters the RM
//! launches on them, all in this process, talking to the RM only through its protocols.
//!
//! - **Nodes** ([`SimNode`]: what each node runs; driven by [`crate::storm_apps_nodes`]): one
//!   nonblocking connection each to the ResourceTracker, a few epoll threads owning them all,
//!   `registerNodeManager` on a ramp (re-reporting the node's containers, as after a RESYNC)
//!   and then `nodeHeartbeat` every interval, phase-spread. Each heartbeat carries, as Hadoop
//!   3.5's NodeManager sends them, a RUNNING status for every container the node was asked to
//!   start, and a COMPLETE status for each container that ended since, until one call carrying
//!   it succeeds (wire doc trap 1); then the node forgets it. Containers end at the churn rate:
//!   each node accrues `churn / N` completions per second and ends one of its task containers
//!   (never an AM container) per whole completion. `containers_to_cleanup` ends a container
//!   with −106, `applications_to_cleanup` drops an application's containers.
//! - **ContainerManagementProtocol** ([`start_cmp`]): one `ipc::server` on `0.0.0.0:P`; every
//!   simulated node's NodeId is `127.a.b.c:P` (a loopback address of its own, one port), so the
//!   RM's AMLauncher and the AMs reach "the node" at its NodeId as on a real cluster. TOKEN
//!   only, as Java's NodeManager: the NMToken (DIGEST-MD5) is checked against the NM-token master
//!   key the RM sent the nodes, each container token against the container-token master key, and
//!   its `nmHostAddr` names the node it was placed on. A started container is RUNNING on that
//!   node from its next heartbeat. An AM container's launch context carries the attempt's
//!   AMRMToken (Credentials, as the RM's AMLauncher writes them): that starts a simulated AM.
//! - **AMs** ([`SimAm`]): `registerApplicationMaster`, then `allocate` every AM interval on the
//!   scheduler address with the AMRMToken (one connection each), asking (one ANY request, the
//!   total outstanding, sent when it changes, as `AMRMClient` does) for its share of
//!   `nodes × containers-per-node`; every allocated container is started with `startContainers`
//!   on its node (one call per node per allocate answer, with the NMToken the RM sent), extras
//!   are released. Completed statuses count against the ledger.
//! - **The ledger** counts every completion: `sent` when a heartbeat carrying the COMPLETE
//!   status succeeded, `delivered` when its AM got it in `allocate` (first time),
//!   `duplicated` each further time, and completions the AMs got that no node sent (a container
//!   the RM declared lost, ABORTED) apart.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use hadoop_wire::pb::hadoop::yarn::{
    AllocateRequestProto, AllocateResponseProto, ContainerLaunchContextProto, ContainerStateProto,
    ContainerStatusProto, ContainerSubStateProto, ContainerTypeProto, ExecutionTypeProto,
    PriorityProto, ResourceRequestProto, StartContainerRequestProto, StartContainersRequestProto,
    StartContainersResponseProto,
};
use hadoop_wire::sasl::client::{ClientAuth, TokenCredential};
use hadoop_wire::sasl::message::AuthMethod;
use hadoop_wire::sasl::server::{ServerAuth, TokenSecrets};
use hadoop_wire::sasl::Qop;
use hadoop_wire::token::credentials::Credentials;
use hadoop_wire::token::identifier::container_from_proto;
use hadoop_wire::token::secret::{ContainerTokenSecretManager, MasterKey, NmTokenSecretManager};
use hadoop_wire::token::{Limits, Token, KIND_AMRM};
use hadoop_wire::yarn::ids::{AttemptId, ContainerId};
use hadoop_wire::yarn::{cmp, CONTAINER_MANAGEMENT_PROTOCOL, CONTAINER_MANAGEMENT_VERSION};
use hdrhistogram::Histogram;
use ipc::client::{Client, ClientConfig};
use ipc::server::{Call, CallError, Registry, Reply, Server, ServerConfig};
use prost::Message;
use testkit::heartbeat::capability;
use yarn_client::application_master::ApplicationMaster;
use yarn_client::rpc::Retry;

/// `ContainerExitStatus.KILLED_BY_RESOURCEMANAGER`.
pub(crate) const EXIT_KILLED_BY_RM: i32 = -106;
/// `ContainerExitStatus.ABORTED` (a container the RM declared lost).
const EXIT_ABORTED: i32 = -100;
/// Histogram range, µs.
const HIST_MAX_US: u64 = 600_000_000;

/// What the simulated cluster runs.
#[derive(Debug, Clone)]
pub struct SimConfig {
    pub tracker: SocketAddr,
    pub scheduler: SocketAddr,
    pub nodes: usize,
    pub containers_per_node: usize,
    pub apps: usize,
    /// Container completions per second, cluster-wide (while churn is on).
    pub churn_per_s: f64,
    pub interval_ms: u64,
    pub am_interval_ms: u64,
    /// Every container's (and the AM's) memory; 1 vcore each.
    pub container_mb: i64,
    pub node_threads: usize,
    pub am_threads: usize,
    /// The most containers an AM asks for at once (see `--max-ask`).
    pub max_ask: usize,
}

impl SimConfig {
    /// Each node's capacity: its share of the task containers, of the AM containers, and two
    /// spare, so that the RM has room to place replacements anywhere.
    pub fn node_slots(&self) -> usize {
        self.containers_per_node + self.apps.div_ceil(self.nodes.max(1)) + 2
    }

    /// AM `a`'s share of `nodes × containers_per_node`.
    fn target_of(&self, a: usize) -> usize {
        let total = self.nodes * self.containers_per_node;
        let apps = self.apps.max(1);
        total / apps + usize::from(a < total % apps)
    }
}

/// A histogram of µs.
pub fn hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIST_MAX_US, 3).expect("static histogram bounds")
}

fn record(h: &Mutex<Histogram<u64>>, us: u64) {
    let _ = h
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .record(us.clamp(1, HIST_MAX_US));
}

/// Counters of the whole simulated cluster.
#[derive(Debug, Default)]
pub struct Counters {
    pub registrations: AtomicU64,
    pub registered: AtomicU64,
    pub heartbeats: AtomicU64,
    /// Heartbeat answers inside the measured window.
    pub heartbeats_window: AtomicU64,
    pub hb_errors: AtomicU64,
    pub resyncs: AtomicU64,
    pub shutdowns: AtomicU64,
    /// Beats due while the node's previous call was unanswered (sent when it is answered).
    pub deferred_beats: AtomicU64,
    /// Beats a node loop could not send within half an interval of their time (skipped).
    pub late_beats: AtomicU64,
    /// Beats dropped (connection down, or a second beat due while one waits).
    pub skipped_beats: AtomicU64,
    pub connect_failures: AtomicU64,
    pub disconnects: AtomicU64,
    pub containers_to_cleanup: AtomicU64,
    pub apps_to_cleanup: AtomicU64,
    pub cmp_starts: AtomicU64,
    pub cmp_start_failures: AtomicU64,
    pub am_starts: AtomicU64,
    pub duplicate_starts: AtomicU64,
    pub ams_registered: AtomicU64,
    pub am_errors: AtomicU64,
    pub allocates: AtomicU64,
    pub allocates_window: AtomicU64,
    pub allocated: AtomicU64,
    pub released: AtomicU64,
    /// Releases the RM reported back as completed containers (ABORTED), as Java does.
    pub releases_acknowledged: AtomicU64,
    pub start_call_errors: AtomicU64,
    /// Completions: see the ledger in the module docs.
    pub completions_sent: AtomicU64,
    pub completions_delivered: AtomicU64,
    pub completions_duplicated: AtomicU64,
    pub completions_unsent: AtomicU64,
    pub completions_aborted: AtomicU64,
}

/// Why the first things went wrong (the first few errors, for the report).
#[derive(Default)]
struct Errors(Mutex<Vec<String>>);

impl Errors {
    fn push(&self, e: String) {
        let mut v = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if v.len() < 8 {
            tracing::warn!("storm-apps: {e}");
            v.push(e);
        }
    }
}

/// A container a node runs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Live {
    pub(crate) id: ContainerId,
    pub(crate) am: bool,
}

#[derive(Default)]
pub(crate) struct NodeState {
    pub(crate) running: Vec<Live>,
    /// COMPLETE statuses not yet carried by a successful heartbeat: (id, exit status).
    pub(crate) completing: Vec<(ContainerId, i32)>,
    churn_acc: f64,
    rng: u64,
    /// Bumped on every change of `running` or `completing` (the node loop re-encodes its
    /// heartbeat only then).
    pub(crate) gen: u64,
}

/// One simulated NodeManager.
pub struct SimNode {
    pub(crate) host: String,
    pub(crate) port: i32,
    state: Mutex<NodeState>,
}

impl SimNode {
    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, NodeState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// COMPLETE statuses this node has not yet sent in a successful heartbeat.
    pub fn pending_completions(&self) -> usize {
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .completing
            .len()
    }
}

/// The ledger's flags per container.
pub(crate) const SENT: u8 = 1;
const DELIVERED: u8 = 2;
/// In a heartbeat on its way: the RM may hand it to the AM before the node reads the answer.
pub(crate) const CARRIED: u8 = 4;

/// The whole simulated cluster (shared by the node threads, the CMP server and the AM threads).
pub struct Sim {
    pub cfg: SimConfig,
    pub nodes: Vec<SimNode>,
    by_addr: HashMap<String, usize>,
    nm_keys: Arc<RwLock<NmTokenSecretManager>>,
    ct_keys: RwLock<ContainerTokenSecretManager>,
    ledger: Mutex<HashMap<ContainerId, u8>>,
    pub c: Counters,
    errors: Errors,
    /// AMs waiting for an AM thread: (attempt, AMRMToken).
    new_ams: Mutex<Vec<(AttemptId, Token)>>,
    pub churn: AtomicBool,
    pub stop: AtomicBool,
    pub clock0: Instant,
    /// The measured window, ns of `clock0` (0/0 until set).
    pub m0: AtomicU64,
    pub m1: AtomicU64,
    /// Latency from the scheduled send of heartbeats inside the window, µs.
    pub hb_sched: Mutex<Histogram<u64>>,
    /// `allocate` latency at the AM, µs, inside the window.
    pub alloc_rpc: Mutex<Histogram<u64>>,
    /// Task containers the AMs have started and not yet seen complete.
    pub live_tasks: AtomicU64,
    next_am: AtomicU64,
}

impl Sim {
    /// The nodes' NodeIds: `127.a.b.c:port`, `a.b.c` counting up from 0.1.1 (skipping .0 and
    /// .255 in the last octet).
    pub fn new(cfg: SimConfig, cmp_port: u16, nm_keys: Arc<RwLock<NmTokenSecretManager>>) -> Sim {
        let mut nodes = Vec::with_capacity(cfg.nodes);
        let mut by_addr = HashMap::with_capacity(cfg.nodes);
        for g in 0..cfg.nodes {
            let (hi, lo) = (g / 254, g % 254);
            let ip = Ipv4Addr::new(127, 1 + (hi / 256) as u8, (hi % 256) as u8, 1 + lo as u8);
            let host = ip.to_string();
            by_addr.insert(format!("{host}:{cmp_port}"), g);
            nodes.push(SimNode {
                host,
                port: cmp_port as i32,
                state: Mutex::new(NodeState {
                    rng: (g as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1,
                    ..NodeState::default()
                }),
            });
        }
        Sim {
            cfg,
            nodes,
            by_addr,
            nm_keys,
            ct_keys: RwLock::new(ContainerTokenSecretManager::default()),
            ledger: Mutex::new(HashMap::new()),
            c: Counters::default(),
            errors: Errors::default(),
            new_ams: Mutex::new(Vec::new()),
            churn: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            clock0: Instant::now(),
            m0: AtomicU64::new(u64::MAX),
            m1: AtomicU64::new(u64::MAX),
            hb_sched: Mutex::new(hist()),
            alloc_rpc: Mutex::new(hist()),
            live_tasks: AtomicU64::new(0),
            next_am: AtomicU64::new(0),
        }
    }

    pub fn now(&self) -> u64 {
        self.clock0.elapsed().as_nanos() as u64
    }

    pub(crate) fn in_window(&self, t: u64) -> bool {
        t >= self.m0.load(Relaxed) && t < self.m1.load(Relaxed)
    }

    pub fn first_errors(&self) -> Vec<String> {
        self.errors
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Completions sent by a node and not (yet) delivered to an AM.
    pub fn undelivered(&self) -> u64 {
        let l = self.ledger.lock().unwrap_or_else(|p| p.into_inner());
        l.values()
            .filter(|f| **f & (SENT | DELIVERED) == SENT)
            .count() as u64
    }

    /// Containers the nodes report RUNNING: (task containers, AM containers).
    pub fn running(&self) -> (u64, u64) {
        let (mut t, mut a) = (0, 0);
        for n in &self.nodes {
            let s = n.state.lock().unwrap_or_else(|p| p.into_inner());
            for l in &s.running {
                if l.am {
                    a += 1;
                } else {
                    t += 1;
                }
            }
        }
        (t, a)
    }

    pub(crate) fn take_keys(
        &self,
        ct: Option<&hadoop_wire::pb::hadoop::yarn::MasterKeyProto>,
        nm: Option<&hadoop_wire::pb::hadoop::yarn::MasterKeyProto>,
    ) {
        if let Some(k) = ct.and_then(|k| MasterKey::from_proto(k).ok()) {
            let mut w = self.ct_keys.write().unwrap_or_else(|p| p.into_inner());
            if w.keys().current().map(|c| c.key_id) != Some(k.key_id) {
                w.set_master_key(k);
            }
        }
        if let Some(k) = nm.and_then(|k| MasterKey::from_proto(k).ok()) {
            let mut w = self.nm_keys.write().unwrap_or_else(|p| p.into_inner());
            if w.keys().current().map(|c| c.key_id) != Some(k.key_id) {
                w.set_master_key(k);
            }
        }
    }
}

// ---- nodes ----------------------------------------------------------------------------------

pub(crate) fn status(
    id: ContainerId,
    state: ContainerStateProto,
    exit: i32,
    mb: i64,
) -> ContainerStatusProto {
    let done = state == ContainerStateProto::CComplete;
    ContainerStatusProto {
        container_id: Some(id.to_proto()),
        state: Some(state as i32),
        diagnostics: Some(String::new()),
        exit_status: Some(exit),
        capability: Some(capability(mb, 1)),
        execution_type: Some(ExecutionTypeProto::Guaranteed as i32),
        container_attributes: Vec::new(),
        container_sub_state: Some(if done {
            ContainerSubStateProto::CssDone as i32
        } else {
            ContainerSubStateProto::CssRunning as i32
        }),
    }
}

fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

impl Sim {
    /// Ends this node's share of the churn since its last beat: `churn / N` completions per
    /// second, one random task container (never an AM container) per whole completion.
    pub(crate) fn churn_step(&self, s: &mut NodeState) {
        let interval_s = self.cfg.interval_ms as f64 / 1000.0;
        s.churn_acc += self.cfg.churn_per_s / self.cfg.nodes as f64 * interval_s;
        while s.churn_acc >= 1.0 {
            let tasks = s.running.iter().filter(|l| !l.am).count();
            if tasks == 0 {
                s.churn_acc = s.churn_acc.min(1.0);
                break;
            }
            let mut k = (xorshift(&mut s.rng) % tasks as u64) as usize;
            let i = s
                .running
                .iter()
                .position(|l| {
                    if l.am {
                        return false;
                    }
                    if k == 0 {
                        return true;
                    }
                    k -= 1;
                    false
                })
                .expect("k < tasks");
            let l = s.running.swap_remove(i);
            s.completing.push((l.id, 0));
            s.churn_acc -= 1.0;
            s.gen += 1;
        }
    }

    pub(crate) fn ledger(&self) -> std::sync::MutexGuard<'_, HashMap<ContainerId, u8>> {
        self.ledger.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn push_error(&self, e: String) {
        self.errors.push(e);
    }

    /// A heartbeat's latency from its scheduled send, µs.
    pub(crate) fn record_beat(&self, us: u64) {
        record(&self.hb_sched, us);
    }
}

/// Sleeps until `t` ns of `clock0`.
pub fn sleep_until(clock0: Instant, t: u64) {
    let now = clock0.elapsed().as_nanos() as u64;
    if t > now {
        std::thread::sleep(Duration::from_nanos(t - now));
    }
}

// ---- ContainerManagementProtocol ------------------------------------------------------------

fn start_one(sim: &Sim, r: &StartContainerRequestProto) -> Result<ContainerId, String> {
    let token = r
        .container_token
        .clone()
        .ok_or("no container token")
        .and_then(|t| {
            Token::from_proto(t, &Limits::default()).map_err(|_| "bad container token")
        })?;
    let id = sim
        .ct_keys
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .verify(&token)
        .map_err(|e| e.to_string())?;
    let cid = id
        .container_id()
        .ok_or("container token without a container id")?;
    let &g = sim
        .by_addr
        .get(id.nm_host_addr())
        .ok_or_else(|| format!("container token for {}, no node of ours", id.nm_host_addr()))?;
    let am = id.container_type() == Some(ContainerTypeProto::ApplicationMaster);
    if am {
        let creds = r
            .container_launch_context
            .as_ref()
            .and_then(|c| c.tokens.as_deref())
            .ok_or("AM container without Credentials")?;
        let creds = Credentials::read(creds).map_err(|e| e.to_string())?;
        let amrm = creds
            .tokens_of_kind(KIND_AMRM)
            .next()
            .cloned()
            .ok_or("AM container without an AMRMToken")?;
        sim.new_ams
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((cid.attempt_id(), amrm));
        sim.c.am_starts.fetch_add(1, Relaxed);
    }
    let mut s = sim.nodes[g].state.lock().unwrap_or_else(|p| p.into_inner());
    if s.running.iter().any(|l| l.id == cid) {
        sim.c.duplicate_starts.fetch_add(1, Relaxed);
    } else {
        s.running.push(Live { id: cid, am });
        s.gen += 1;
    }
    Ok(cid)
}

/// Starts the one ContainerManagementProtocol server of every simulated node on `0.0.0.0:0`;
/// the port is every NodeId's.
pub fn start_cmp(
    sim_slot: Arc<std::sync::OnceLock<Arc<Sim>>>,
    nm_keys: Arc<RwLock<NmTokenSecretManager>>,
) -> Result<Server> {
    let mut reg = Registry::new();
    let slot = sim_slot.clone();
    reg.register(
        CONTAINER_MANAGEMENT_PROTOCOL,
        CONTAINER_MANAGEMENT_VERSION,
        cmp::START_CONTAINERS,
        move |call: &Call<'_>, reply: &mut Reply<'_, '_>| {
            let sim = slot
                .get()
                .ok_or_else(|| CallError::application("java.io.IOException", "not ready"))?;
            let req = StartContainersRequestProto::decode(call.request)
                .map_err(CallError::invalid_request)?;
            let mut resp = StartContainersResponseProto::default();
            for r in &req.start_container_request {
                sim.c.cmp_starts.fetch_add(1, Relaxed);
                match start_one(sim, r) {
                    Ok(cid) => resp.succeeded_requests.push(cid.to_proto()),
                    Err(e) => {
                        sim.c.cmp_start_failures.fetch_add(1, Relaxed);
                        sim.errors.push(format!("startContainers: {e}"));
                        resp.failed_requests.push(
                            hadoop_wire::pb::hadoop::yarn::ContainerExceptionMapProto {
                                container_id: None,
                                exception: Some(
                                    hadoop_wire::pb::hadoop::yarn::SerializedExceptionProto {
                                        message: Some(e),
                                        class_name: Some(
                                            "org.apache.hadoop.yarn.exceptions.YarnException"
                                                .into(),
                                        ),
                                        ..Default::default()
                                    },
                                ),
                            },
                        );
                    }
                }
            }
            reply.message(&resp)?;
            Ok(())
        },
    );
    let slot = sim_slot;
    reg.register(
        CONTAINER_MANAGEMENT_PROTOCOL,
        CONTAINER_MANAGEMENT_VERSION,
        cmp::STOP_CONTAINERS,
        move |call: &Call<'_>, reply: &mut Reply<'_, '_>| {
            let sim = slot
                .get()
                .ok_or_else(|| CallError::application("java.io.IOException", "not ready"))?;
            let req =
                hadoop_wire::pb::hadoop::yarn::StopContainersRequestProto::decode(call.request)
                    .map_err(CallError::invalid_request)?;
            // The RM stops an AM container after its attempt ended; the node drops it.
            for c in &req.container_id {
                if let Some(id) = container_from_proto(c) {
                    for n in &sim.nodes {
                        let mut s = n.lock();
                        let before = s.running.len();
                        s.running.retain(|l| l.id != id);
                        if s.running.len() != before {
                            s.gen += 1;
                        }
                    }
                }
            }
            reply.message(
                &hadoop_wire::pb::hadoop::yarn::StopContainersResponseProto {
                    succeeded_requests: req.container_id.clone(),
                    failed_requests: Vec::new(),
                },
            )?;
            Ok(())
        },
    );
    let auth = ServerAuth::new(
        AuthMethod::Token,
        Some(nm_keys as Arc<dyn TokenSecrets>),
        vec![Qop::Auth, Qop::AuthInt, Qop::AuthConf],
    )
    .map_err(|e| anyhow::anyhow!("CMP auth: {e}"))?;
    let transport = ipc::transport::TransportConfig {
        threads: 1,
        thread_names: vec!["sa-cmp".into()],
        max_connections: 4096,
        ..ipc::transport::TransportConfig::default()
    };
    Server::start(
        SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
        ServerConfig {
            transport,
            auth: Arc::new(auth),
            ..ServerConfig::default()
        },
        reg,
    )
    .context("starting the simulated nodes' ContainerManagementProtocol server")
}

// ---- ApplicationMasters ---------------------------------------------------------------------

/// One simulated ApplicationMaster.
struct SimAm {
    attempt: AttemptId,
    client: ApplicationMaster,
    target: usize,
    /// Task containers started and not yet seen complete.
    live: HashSet<ContainerId>,
    /// What the RM holds outstanding for this AM: the last total sent less what came since.
    asked: Option<i32>,
    response_id: i32,
    nm_tokens: HashMap<String, Token>,
    release: Vec<ContainerId>,
    /// Containers released and not yet reported complete.
    released: HashSet<ContainerId>,
    next_due: u64,
}

impl Sim {
    fn new_am(&self, attempt: AttemptId, token: Token) -> Result<SimAm> {
        let a = self.next_am.fetch_add(1, Relaxed) as usize;
        let client = ApplicationMaster::new(
            self.cfg.scheduler,
            token,
            &conf::Configuration::new(),
            &Retry::default(),
        )
        .map_err(|e| anyhow::anyhow!("AM client: {e}"))?;
        client
            .register("storm-apps-am", 0, "")
            .map_err(|e| anyhow::anyhow!("registerApplicationMaster of {attempt}: {e}"))?;
        self.c.ams_registered.fetch_add(1, Relaxed);
        Ok(SimAm {
            attempt,
            client,
            target: self.cfg.target_of(a),
            live: HashSet::new(),
            asked: None,
            response_id: 0,
            nm_tokens: HashMap::new(),
            release: Vec::new(),
            released: HashSet::new(),
            next_due: self.now(),
        })
    }

    fn allocate(&self, am: &mut SimAm) {
        // `asked` mirrors what the RM holds outstanding: the last total sent, less what it
        // allocated since (as `AMRMClient`'s table does once containers are taken).
        let want = am
            .target
            .saturating_sub(am.live.len())
            .min(self.cfg.max_ask) as i32;
        let ask = if am.asked != Some(want) {
            vec![ResourceRequestProto {
                priority: Some(PriorityProto { priority: Some(1) }),
                resource_name: Some("*".into()),
                capability: Some(capability(self.cfg.container_mb, 1)),
                num_containers: Some(want),
                relax_locality: Some(true),
                ..Default::default()
            }]
        } else {
            Vec::new()
        };
        let req = AllocateRequestProto {
            ask,
            release: am.release.iter().map(|c| c.to_proto()).collect(),
            response_id: Some(am.response_id),
            progress: Some(0.5),
            ..Default::default()
        };
        let t0 = self.now();
        let resp: AllocateResponseProto = match am.client.allocate(&req) {
            Ok(r) => r,
            Err(e) => {
                self.c.am_errors.fetch_add(1, Relaxed);
                self.errors
                    .push(format!("allocate of {}: {e:?}", am.attempt));
                return;
            }
        };
        let t1 = self.now();
        self.c.allocates.fetch_add(1, Relaxed);
        if self.in_window(t0) {
            self.c.allocates_window.fetch_add(1, Relaxed);
            record(&self.alloc_rpc, (t1 - t0) / 1000);
        }
        am.asked = Some(want);
        am.release.clear();
        am.response_id = resp.response_id.unwrap_or(am.response_id);
        for t in &resp.nm_tokens {
            let (Some(n), Some(tok)) = (&t.node_id, &t.token) else {
                continue;
            };
            if let Ok(tok) = Token::from_proto(tok.clone(), &Limits::default()) {
                am.nm_tokens.insert(
                    format!(
                        "{}:{}",
                        n.host.as_deref().unwrap_or(""),
                        n.port.unwrap_or(0)
                    ),
                    tok,
                );
            }
        }
        // Completions first (their room is what the new containers fill).
        for st in &resp.completed_container_statuses {
            let Some(id) = st.container_id.as_ref().and_then(container_from_proto) else {
                continue;
            };
            if am.released.remove(&id) {
                // A container this AM gave back (never started): its end, as the RM reports
                // every release, is no node's completion.
                self.c.releases_acknowledged.fetch_add(1, Relaxed);
                continue;
            }
            if am.live.remove(&id) {
                self.live_tasks.fetch_sub(1, Relaxed);
            }
            let mut l = self.ledger.lock().unwrap_or_else(|p| p.into_inner());
            let f = l.entry(id).or_default();
            if *f & DELIVERED != 0 {
                self.c.completions_duplicated.fetch_add(1, Relaxed);
            } else {
                *f |= DELIVERED;
                if *f & (SENT | CARRIED) != 0 {
                    self.c.completions_delivered.fetch_add(1, Relaxed);
                } else {
                    self.c.completions_unsent.fetch_add(1, Relaxed);
                    if st.exit_status == Some(EXIT_ABORTED) {
                        self.c.completions_aborted.fetch_add(1, Relaxed);
                    }
                    self.errors.push(format!(
                        "{id} reported complete to its AM (exit {:?}: {}) though no node sent it",
                        st.exit_status,
                        st.diagnostics.as_deref().unwrap_or("")
                    ));
                }
            }
        }
        // New containers: start up to the target, release the rest; one call per node.
        type Starts = (Vec<ContainerId>, Vec<StartContainerRequestProto>);
        let mut per_node: BTreeMap<String, Starts> = BTreeMap::new();
        let mut room = am.target.saturating_sub(am.live.len());
        let got = resp.allocated_containers.len() as i32;
        am.asked = Some(am.asked.unwrap_or(0).saturating_sub(got).max(0));
        for c in resp.allocated_containers {
            self.c.allocated.fetch_add(1, Relaxed);
            let Some(id) = c.id.as_ref().and_then(container_from_proto) else {
                continue;
            };
            if room == 0 {
                am.release.push(id);
                am.released.insert(id);
                self.c.released.fetch_add(1, Relaxed);
                continue;
            }
            room -= 1;
            let node = c
                .node_id
                .as_ref()
                .map(|n| {
                    format!(
                        "{}:{}",
                        n.host.as_deref().unwrap_or(""),
                        n.port.unwrap_or(0)
                    )
                })
                .unwrap_or_default();
            let e = per_node.entry(node).or_default();
            e.0.push(id);
            e.1.push(StartContainerRequestProto {
                container_launch_context: Some(ContainerLaunchContextProto {
                    command: vec!["sleep".into(), "3600".into()],
                    ..Default::default()
                }),
                container_token: c.container_token,
            });
        }
        for (node, (ids, reqs)) in per_node {
            match self.start_on(am, &node, reqs) {
                Ok(ok) => {
                    for id in ok {
                        if am.live.insert(id) {
                            self.live_tasks.fetch_add(1, Relaxed);
                        }
                    }
                }
                Err(e) => {
                    self.c.start_call_errors.fetch_add(1, Relaxed);
                    self.errors.push(format!("startContainers on {node}: {e}"));
                    // Not started: give them back.
                    am.released.extend(ids.iter().copied());
                    am.release.extend(ids);
                }
            }
        }
    }

    /// `startContainers` on `node` with the NMToken the RM gave for it.
    fn start_on(
        &self,
        am: &SimAm,
        node: &str,
        reqs: Vec<StartContainerRequestProto>,
    ) -> Result<Vec<ContainerId>, String> {
        let tok = am
            .nm_tokens
            .get(node)
            .ok_or_else(|| format!("no NMToken for {node}"))?;
        let addr: SocketAddr = node.parse().map_err(|e| format!("{node}: {e}"))?;
        let client = Client::new(
            addr,
            ClientConfig {
                protocol: CONTAINER_MANAGEMENT_PROTOCOL.into(),
                protocol_version: CONTAINER_MANAGEMENT_VERSION,
                user: am.attempt.to_string(),
                auth: ClientAuth::token(
                    TokenCredential {
                        identifier: tok.identifier.clone(),
                        password: tok.password.clone(),
                    },
                    vec![Qop::Auth],
                ),
                max_connect_attempts: 3,
                call_timeout: Duration::from_secs(30),
                reader_thread_name: "sa-am-cmp".into(),
                ..ClientConfig::default()
            },
        );
        let resp = client
            .call(
                cmp::START_CONTAINERS,
                &StartContainersRequestProto {
                    start_container_request: reqs,
                }
                .encode_to_vec(),
            )
            .map_err(|e| e.to_string())?;
        client.disconnect();
        let r: StartContainersResponseProto = resp.decode().map_err(|e| e.to_string())?;
        if let Some(f) = r.failed_requests.first() {
            return Err(format!(
                "{} failed: {:?}",
                r.failed_requests.len(),
                f.exception.as_ref().and_then(|e| e.message.as_deref())
            ));
        }
        Ok(r.succeeded_requests
            .iter()
            .filter_map(container_from_proto)
            .collect())
    }

    /// An AM thread: takes new AMs (thread `t` of `threads` takes whichever it finds first),
    /// and calls allocate for each on its interval until `stop`.
    fn am_thread(self: &Arc<Self>) {
        let iv = self.cfg.am_interval_ms * 1_000_000;
        let mut ams: Vec<SimAm> = Vec::new();
        while !self.stop.load(Relaxed) {
            let fresh = {
                let mut q = self.new_ams.lock().unwrap_or_else(|p| p.into_inner());
                q.pop()
            };
            if let Some((attempt, token)) = fresh {
                match self.new_am(attempt, token) {
                    Ok(am) => ams.push(am),
                    Err(e) => {
                        self.c.am_errors.fetch_add(1, Relaxed);
                        self.errors.push(e.to_string());
                    }
                }
                continue;
            }
            let Some(am) = ams.iter_mut().min_by_key(|a| a.next_due) else {
                std::thread::sleep(Duration::from_millis(5));
                continue;
            };
            let now = self.now();
            if am.next_due > now {
                std::thread::sleep(Duration::from_nanos((am.next_due - now).min(5_000_000)));
                continue;
            }
            self.allocate(am);
            am.next_due = (am.next_due + iv).max(self.now());
        }
    }
}

/// Starts the node loops (registering on a ramp from `start`, see [`crate::storm_apps_nodes`])
/// and the AM threads.
pub fn spawn(
    sim: &Arc<Sim>,
    start: u64,
    ramp_per_s: f64,
) -> Result<Vec<std::thread::JoinHandle<()>>> {
    let mut hs = crate::storm_apps_nodes::spawn(sim, sim.cfg.node_threads, start, ramp_per_s)?;
    for k in 0..sim.cfg.am_threads.max(1) {
        let s = sim.clone();
        hs.push(
            std::thread::Builder::new()
                .name(format!("sa-ams-{k}"))
                .spawn(move || s.am_thread())?,
        );
    }
    Ok(hs)
}
