//! ContainerManagementProtocol on the NodeManager: the checks of Java's `ContainerManagerImpl`
//! in its order, and each managed container's life from an accepted start to its exit status.
//! No I/O and no clock: the agent's IPC handler passes the authenticated NMToken, the decoded
//! request and the wall time, and gets back the response and the work to do (launch, kill,
//! signal), which its launcher threads carry out and report back with [`ContainerManager::exited`].
//!
//! How the types connect:
//!
//! ```text
//!  ipc server (TOKEN only)  ── NMToken identifier bytes + request ──> ContainerManager
//!     ▲  NmTokenSecretManager (shared, RwLock): SASL passwords         │ checks (2.3 of the notes):
//!     │                                                                │  NMToken, user, container token
//!     │                                                                │  (ContainerTokenSecretManager),
//!     │                                                                │  authorization, RM id, aux services,
//!     │                                                                │  resources, duplicates
//!     │                                                                v
//!     │           StartOutcome { response, launches: Vec<LaunchOrder> } ──> launcher (agent)
//!     │           StopOutcome  { response, kills: Vec<(id, KillReason)> } ──> executor (agent)
//!     │                                                                │
//!  status updater ── master keys, rm_identifier ──> set_keys            │ exited(id, status, diag)
//!                                                                      v
//!                         table::ContainerTable (what heartbeats report: RUNNING from the
//!                         accepted start on, COMPLETE with the exit status, delivered durably)
//! ```
//!
//! The container table is the NodeManager's "context": a container stays in it from its start
//! until the RM lets it go, so stop and getContainerStatuses find completed containers there
//! too. A container that has left the table is still known for
//! `yarn.nodemanager.duration-to-track-stopped-containers` (the recently-stopped cache), so the
//! ApplicationMaster's final `stopContainers` of everything it ever started succeeds.
//!
//! Whole-call failures ([`CallFailure`]) are RPC errors with a class a Java client can load;
//! per-container failures go into `failed_requests` as `SerializedExceptionProto`.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, RwLock};

use hadoop_wire::pb::hadoop::yarn::{
    ContainerExceptionMapProto, ContainerLaunchContextProto, ContainerTypeProto,
    GetContainerStatusesRequestProto, GetContainerStatusesResponseProto, SerializedExceptionProto,
    SignalContainerCommandProto, SignalContainerRequestProto, StartContainerRequestProto,
    StartContainersRequestProto, StartContainersResponseProto, StopContainersRequestProto,
    StopContainersResponseProto, StringBytesMapProto,
};
use hadoop_wire::token::identifier::{
    container_from_proto, ContainerTokenIdentifier, NmTokenIdentifier, NodeId,
};
use hadoop_wire::token::secret::{
    ContainerTokenSecretManager, MasterKey, MasterKeys, NmTokenSecretManager,
};
use hadoop_wire::token::{Limits, Token, TokenError, TokenIdentifier};
use hadoop_wire::yarn::exception;

use crate::ids::{AppId, AttemptId, ContainerId};
use crate::table::{ContainerState, ContainerTable, Resource};
use crate::wire::{container_id_proto, container_status_proto};

/// `yarn.nodemanager.duration-to-track-stopped-containers` when not set (Java's code default).
pub const DEFAULT_TRACK_STOPPED_MS: i64 = 600_000;
/// Most containers remembered as recently stopped; the oldest go first beyond it.
pub const MAX_RECENTLY_STOPPED: usize = 65_536;

/// A whole-call failure: the RPC answers ERROR with this class and message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{class}: {message}")]
pub struct CallFailure {
    /// The Java class the client sees (`exceptionClassName`).
    pub class: &'static str,
    pub message: String,
}

impl CallFailure {
    fn yarn(message: impl Into<String>) -> CallFailure {
        CallFailure {
            class: exception::YARN,
            message: message.into(),
        }
    }

    fn from_token(e: TokenError) -> CallFailure {
        match e {
            TokenError::InvalidToken(m) => CallFailure {
                class: exception::INVALID_TOKEN,
                message: m,
            },
            other => CallFailure::yarn(other.to_string()),
        }
    }
}

pub use crate::launch::KillReason;

/// A signal for `signalToContainer` (Java's translation of the command).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// OUTPUT_THREAD_DUMP.
    Quit,
    /// GRACEFUL_SHUTDOWN.
    Term,
    /// FORCEFUL_SHUTDOWN.
    Kill,
}

impl Signal {
    /// The signal's number (Linux: SIGQUIT 3, SIGTERM 15, SIGKILL 9).
    pub fn number(self) -> i32 {
        match self {
            Signal::Quit => 3,
            Signal::Term => 15,
            Signal::Kill => 9,
        }
    }

    /// Java's `translateCommandToSignal`: OUTPUT_THREAD_DUMP → SIGQUIT, GRACEFUL_SHUTDOWN →
    /// SIGTERM, FORCEFUL_SHUTDOWN → SIGKILL; `None` for a number that is no command.
    pub fn from_command(command: i32) -> Option<Signal> {
        Some(match SignalContainerCommandProto::try_from(command).ok()? {
            SignalContainerCommandProto::OutputThreadDump => Signal::Quit,
            SignalContainerCommandProto::GracefulShutdown => Signal::Term,
            SignalContainerCommandProto::ForcefulShutdown => Signal::Kill,
        })
    }

    /// The command's name, as Java logs `SignalContainerCommand`.
    pub fn command_name(self) -> &'static str {
        match self {
            Signal::Quit => "OUTPUT_THREAD_DUMP",
            Signal::Term => "GRACEFUL_SHUTDOWN",
            Signal::Kill => "FORCEFUL_SHUTDOWN",
        }
    }

    /// The signal's name, as Java's `ContainerExecutor.Signal.toString()` gives it.
    pub fn name(self) -> &'static str {
        match self {
            Signal::Quit => "SIGQUIT",
            Signal::Term => "SIGTERM",
            Signal::Kill => "SIGKILL",
        }
    }
}

/// Where a signal from the RM's heartbeat (`containers_to_signal`) goes, after Java's
/// `ContainerManagerImpl.internalSignalToContainer` and `ContainersLauncher`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignalTarget {
    /// A container this node runs: send the signal to its process group.
    Send(ContainerId, Signal),
    /// Not known here (never, or forgotten): `Container <id> no longer exists`.
    Unknown(ContainerId),
    /// Known but no process runs (being localized, or exited): `Container <id> not running,
    /// nothing to signal.`
    NotRunning(ContainerId, Signal),
    /// A command number that is none of the three (not in Java's enum): ignored.
    BadCommand(ContainerId, i32),
}

/// Work for the launcher: one accepted start.
#[derive(Debug, Clone)]
pub struct LaunchOrder {
    pub id: ContainerId,
    /// The application submitter (`appSubmitter` of the container token): the container's user.
    pub user: String,
    pub resource: Resource,
    pub priority: i32,
    pub is_am: bool,
    /// The launch context as the ApplicationMaster sent it.
    pub context: ContainerLaunchContextProto,
    /// The container token's expiry (wall ms).
    pub token_expiry_ms: i64,
}

/// What an accepted startContainers call returns.
#[derive(Debug, Default)]
pub struct StartOutcome {
    pub response: StartContainersResponseProto,
    pub launches: Vec<LaunchOrder>,
}

/// What stopContainers returns.
#[derive(Debug, Default)]
pub struct StopOutcome {
    pub response: StopContainersResponseProto,
    /// Containers to kill (the launcher kills the process group and then reports the exit).
    pub kills: Vec<(ContainerId, KillReason)>,
}

/// Where a managed container is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Accepted; localizing and being prepared. No process yet.
    Starting,
    /// Its process runs.
    Launched,
    /// It has exited (or never ran); the table holds its status.
    Done,
}

#[derive(Debug, Clone)]
struct Managed {
    user: String,
    stage: Stage,
    kill: Option<KillReason>,
    /// From its container token, for the re-registration after a RESYNC (`None` for a
    /// container recovered from disk: the defaults are reported).
    token_fields: Option<crate::status_updater::TokenFields>,
}

/// Settings of the container manager.
#[derive(Debug, Clone)]
pub struct ManagerConfig {
    /// The NodeId registered with the RM (the CMP server's host and port).
    pub node: NodeId,
    /// `yarn.nodemanager.aux-services`: the names a launch context may name in `service_data`.
    pub aux_services: Vec<String>,
    /// `yarn.nodemanager.duration-to-track-stopped-containers`.
    pub track_stopped_ms: i64,
}

/// Counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ManagerStats {
    pub started: u64,
    pub start_failures: u64,
    pub call_failures: u64,
    pub stops: u64,
    pub exited: u64,
}

/// The NodeManager's container manager (see the module docs).
#[derive(Debug)]
pub struct ContainerManager {
    cfg: ManagerConfig,
    nm_tokens: Arc<RwLock<NmTokenSecretManager>>,
    container_tokens: ContainerTokenSecretManager,
    rm_identifier: Option<i64>,
    managed: HashMap<ContainerId, Managed>,
    /// Containers that left the table, until the tracking time ends (wall ms).
    recently_stopped: HashMap<ContainerId, i64>,
    stopped_order: VecDeque<(i64, ContainerId)>,
    shutting_down: bool,
    stats: ManagerStats,
    /// `services_meta_data` of every StartContainers answer: each running aux service's
    /// metadata (Java's `AuxServices.getMetaData()`, e.g. the shuffle port).
    service_metadata: Vec<StringBytesMapProto>,
}

fn serialized(class: &str, message: &str) -> SerializedExceptionProto {
    SerializedExceptionProto {
        message: Some(message.to_string()),
        // Java's printStackTrace text starts with `class: message`; we have no frames.
        trace: Some(format!("{class}: {message}\n")),
        class_name: Some(class.to_string()),
        cause: None,
    }
}

fn failed(id: &ContainerId, class: &str, message: &str) -> ContainerExceptionMapProto {
    ContainerExceptionMapProto {
        container_id: Some(container_id_proto(id)),
        exception: Some(serialized(class, message)),
    }
}

impl ContainerManager {
    /// A manager for the node `cfg.node`, verifying NMTokens with `nm_tokens` (the same secret
    /// manager the CMP server's SASL layer uses).
    pub fn new(cfg: ManagerConfig, nm_tokens: Arc<RwLock<NmTokenSecretManager>>) -> Self {
        let mut container_tokens = ContainerTokenSecretManager::default();
        container_tokens.set_node_id(&cfg.node);
        if let Ok(mut m) = nm_tokens.write() {
            m.set_node_id(cfg.node.clone());
        }
        ContainerManager {
            cfg,
            nm_tokens,
            container_tokens,
            rm_identifier: None,
            managed: HashMap::new(),
            recently_stopped: HashMap::new(),
            stopped_order: VecDeque::new(),
            shutting_down: false,
            stats: ManagerStats::default(),
            service_metadata: Vec::new(),
        }
    }

    pub fn node(&self) -> &NodeId {
        &self.cfg.node
    }

    pub fn stats(&self) -> ManagerStats {
        self.stats
    }

    /// The RM's keys and identifier from a registration or heartbeat response. Keys change
    /// only when their id changes (the previous one is kept).
    pub fn set_keys(
        &mut self,
        container_key: Option<(i32, &[u8])>,
        nm_key: Option<(i32, &[u8])>,
        rm_identifier: Option<i64>,
    ) {
        // Called after every heartbeat: nothing is copied (or locked for writing) unless the
        // key id changed.
        if let Some((id, bytes)) = container_key {
            let known = self.container_tokens.keys().current().map(|k| k.key_id);
            if known != Some(id) {
                if let Ok(k) = MasterKey::new(id, bytes.to_vec()) {
                    self.container_tokens.set_master_key(k);
                }
            }
        }
        if let Some((id, bytes)) = nm_key {
            let known = self
                .nm_tokens
                .read()
                .ok()
                .and_then(|m| m.keys().current().map(|k| k.key_id));
            if known != Some(id) {
                if let Ok(k) = MasterKey::new(id, bytes.to_vec()) {
                    if let Ok(mut m) = self.nm_tokens.write() {
                        m.set_master_key(k);
                    }
                }
            }
        }
        if rm_identifier.is_some() {
            self.rm_identifier = rm_identifier;
        }
    }

    /// Whether the RM's container-token key and identifier are known (a start before the
    /// first registration cannot be verified).
    pub fn has_keys(&self) -> bool {
        self.container_tokens.keys().current().is_some() && self.rm_identifier.is_some()
    }

    /// The RM's current and previous keys (container tokens, NMTokens), for tools and tests
    /// that mint tokens the way the RM does. The keys stay in this process.
    pub fn master_keys(&self) -> (MasterKeys, MasterKeys) {
        let nm = self
            .nm_tokens
            .read()
            .map(|m| m.keys().clone())
            .unwrap_or_default();
        (self.container_tokens.keys().clone(), nm)
    }

    /// The RM identifier from the registration.
    pub fn rm_identifier(&self) -> Option<i64> {
        self.rm_identifier
    }

    /// A running aux service's metadata (for `mapreduce_shuffle` its port as a 4-byte
    /// big-endian int): every StartContainers answer carries all of them, as Java's does,
    /// whether or not the request named the service. Setting a name again replaces it.
    pub fn set_service_metadata(&mut self, name: &str, metadata: Vec<u8>) {
        self.service_metadata
            .retain(|e| e.key.as_deref() != Some(name));
        self.service_metadata.push(StringBytesMapProto {
            key: Some(name.to_string()),
            value: Some(metadata),
        });
    }

    /// The node is stopping: further starts are refused.
    pub fn set_shutting_down(&mut self) {
        self.shutting_down = true;
    }

    /// Where a managed container is (None once forgotten).
    pub fn stage(&self, id: &ContainerId) -> Option<Stage> {
        self.managed.get(id).map(|m| m.stage)
    }

    /// The container's user, while it is managed.
    pub fn user(&self, id: &ContainerId) -> Option<&str> {
        self.managed.get(id).map(|m| m.user.as_str())
    }

    /// The kill requested for a container, if any.
    pub fn kill_reason(&self, id: &ContainerId) -> Option<KillReason> {
        self.managed.get(id).and_then(|m| m.kill.clone())
    }

    /// Containers managed now (any stage).
    pub fn managed(&self) -> impl Iterator<Item = (&ContainerId, Stage)> {
        self.managed.iter().map(|(id, m)| (id, m.stage))
    }

    fn nm_token(identifier: Option<&[u8]>) -> Result<NmTokenIdentifier, CallFailure> {
        // selectNMTokenIdentifier: the connection's token must be an NMToken.
        let raw = identifier.ok_or_else(|| CallFailure::yarn("Invalid NMToken"))?;
        NmTokenIdentifier::parse(raw).map_err(|_| CallFailure::yarn("Invalid NMToken"))
    }

    /// `startContainers`. `identifier` is the NMToken identifier the connection authenticated
    /// with, `user` the connection's user. Accepted containers enter `table` as RUNNING (Java
    /// reports RUNNING from the accepted start on) and come back as launch orders.
    pub fn start_containers(
        &mut self,
        identifier: Option<&[u8]>,
        user: Option<&str>,
        req: StartContainersRequestProto,
        now_wall_ms: i64,
        table: &mut ContainerTable,
    ) -> Result<StartOutcome, CallFailure> {
        let r = self.start_inner(identifier, user, req, now_wall_ms, table);
        match &r {
            Ok(o) => {
                self.stats.started += o.launches.len() as u64;
                self.stats.start_failures += o.response.failed_requests.len() as u64;
            }
            Err(_) => self.stats.call_failures += 1,
        }
        r
    }

    fn start_inner(
        &mut self,
        identifier: Option<&[u8]>,
        user: Option<&str>,
        req: StartContainersRequestProto,
        now_wall_ms: i64,
        table: &mut ContainerTable,
    ) -> Result<StartOutcome, CallFailure> {
        let nm = Self::nm_token(identifier)?;
        // authorizeUser: the remote user must be the NMToken's attempt.
        let attempt = nm.attempt_id().map(|a| a.to_string()).unwrap_or_default();
        let remote = user.unwrap_or("");
        if remote != attempt {
            return Err(CallFailure::yarn(format!(
                "Expected applicationAttemptId: {remote}Found: {attempt}"
            )));
        }
        let mut out = StartOutcome::default();
        out.response.services_meta_data = self.service_metadata.clone();
        for one in req.start_container_request {
            let StartContainerRequestProto {
                container_launch_context,
                container_token,
            } = one;
            // Invalid ContainerToken: the whole call fails.
            let token = container_token
                .ok_or_else(|| CallFailure::yarn("Invalid ContainerToken"))
                .and_then(|t| {
                    Token::from_proto(t, &Limits::default())
                        .map_err(|_| CallFailure::yarn("Invalid ContainerToken"))
                })?;
            if token.identifier.is_empty() {
                return Err(CallFailure::yarn("Invalid ContainerToken"));
            }
            // Key, nmHostAddr and password: an InvalidToken fails the whole call.
            let cti = self
                .container_tokens
                .verify(&token)
                .map_err(CallFailure::from_token)?;
            let Some(id) = cti.container_id() else {
                return Err(CallFailure::yarn("Invalid ContainerToken"));
            };
            match self.check_start(
                &nm,
                &cti,
                &id,
                container_launch_context.as_ref(),
                now_wall_ms,
                table,
            ) {
                Ok(()) => {}
                Err((class, message)) => {
                    out.response
                        .failed_requests
                        .push(failed(&id, class, &message));
                    continue;
                }
            }
            let resource = cti.resource().map_or(Resource::default(), |r| Resource {
                memory_mb: r.memory.unwrap_or(0),
                vcores: r.virtual_cores.unwrap_or(0),
            });
            let priority = cti.priority().unwrap_or(0);
            // startContainerSuccessful before the table: a start the replay guard cannot
            // remember (full of unexpired starts) is refused rather than left unguarded.
            if let Err(e) = self
                .container_tokens
                .start_container_successful(&cti, now_wall_ms)
            {
                out.response
                    .failed_requests
                    .push(failed(&id, exception::YARN, &token_message(e)));
                continue;
            }
            if let Err(e) = table.launch(id, resource, priority, now_wall_ms, true) {
                out.response
                    .failed_requests
                    .push(failed(&id, exception::YARN, &e.to_string()));
                continue;
            }
            self.recently_stopped.remove(&id);
            self.managed.insert(
                id,
                Managed {
                    user: cti.app_submitter().to_string(),
                    stage: Stage::Starting,
                    kill: None,
                    token_fields: Some(crate::status_updater::TokenFields {
                        version: cti.version(),
                        execution_type: cti.execution_type().map(|e| e as i32),
                        allocation_request_id: cti.allocation_request_id(),
                        allocation_tags: cti.allocation_tags().to_vec(),
                        node_label_expression: cti.node_label_expression().to_string(),
                    }),
                },
            );
            out.response
                .succeeded_requests
                .push(container_id_proto(&id));
            out.launches.push(LaunchOrder {
                id,
                user: cti.app_submitter().to_string(),
                resource,
                priority,
                is_am: cti.container_type() == Some(ContainerTypeProto::ApplicationMaster),
                context: container_launch_context.unwrap_or_default(),
                token_expiry_ms: cti.expiry_time_stamp(),
            });
        }
        Ok(out)
    }

    /// The per-container checks after the token verified: authorization (application,
    /// relaunch, expiry), the RM identifier, aux services, resources, duplicates, shutdown.
    fn check_start(
        &mut self,
        nm: &NmTokenIdentifier,
        cti: &ContainerTokenIdentifier,
        id: &ContainerId,
        clc: Option<&ContainerLaunchContextProto>,
        now_wall_ms: i64,
        table: &ContainerTable,
    ) -> Result<(), (&'static str, String)> {
        self.container_tokens
            .authorize_start(nm, cti, now_wall_ms)
            .map_err(|e| (exception::YARN, token_message(e)))?;
        if Some(cti.rm_identifier()) != self.rm_identifier {
            return Err((
                exception::INVALID_CONTAINER,
                format!("\nContainer {id} rejected as it is allocated by a previous RM"),
            ));
        }
        // updateNMTokenIdentifier: remember the attempt's key.
        if let Ok(mut m) = self.nm_tokens.write() {
            m.app_attempt_start_container(nm)
                .map_err(|e| (exception::YARN, token_message(e)))?;
        }
        if let Some(clc) = clc {
            for sd in &clc.service_data {
                let name = sd.key.as_deref().unwrap_or("");
                if !self.cfg.aux_services.iter().any(|a| a == name) {
                    return Err((
                        exception::INVALID_AUX_SERVICE,
                        format!("The auxService:{name} does not exist"),
                    ));
                }
            }
            for lr in &clc.local_resources {
                let key = lr.key.as_deref().unwrap_or("null");
                let Some(v) = &lr.value else {
                    return Err((
                        exception::YARN,
                        format!("Null resource URL for local resource {key} : null"),
                    ));
                };
                let what = if v.resource.is_none() {
                    Some("URL")
                } else if v.r#type.is_none() {
                    Some("type")
                } else if v.visibility.is_none() {
                    Some("visibility")
                } else {
                    None
                };
                if let Some(what) = what {
                    return Err((
                        exception::YARN,
                        format!("Null resource {what} for local resource {key} : {v:?}"),
                    ));
                }
            }
            if let Some(t) = &clc.tokens {
                if !t.is_empty() {
                    hadoop_wire::token::credentials::Credentials::read(t).map_err(|e| {
                        (exception::YARN, format!("Failed to parse credentials: {e}"))
                    })?;
                }
            }
        }
        if table.get(id).is_some() || self.managed.contains_key(id) {
            return Err((
                exception::YARN,
                format!("Container {id} already is running on this node!!"),
            ));
        }
        if self.shutting_down {
            return Err((
                exception::YARN,
                "Container start failed as the NodeManager is in the process of shutting down"
                    .into(),
            ));
        }
        Ok(())
    }

    /// A container of this agent's previous run, found on disk at start
    /// (`yarn.nodemanager.recovery.enabled`): managed again, as launched when its process still
    /// runs, else as done. The caller puts it in the table.
    pub fn recover(&mut self, id: ContainerId, user: &str, running: bool) {
        self.managed.insert(
            id,
            Managed {
                user: user.to_string(),
                stage: if running {
                    Stage::Launched
                } else {
                    Stage::Done
                },
                kill: None,
                token_fields: None,
            },
        );
    }

    /// What the container token said that the re-registration's `NMContainerStatusProto`
    /// carries (version, execution type, allocation request id, tags, label expression), as
    /// Java's `ContainerImpl.getNMContainerStatus` reads it from the token.
    pub fn token_fields(&self, id: &ContainerId) -> Option<&crate::status_updater::TokenFields> {
        self.managed.get(id)?.token_fields.as_ref()
    }

    /// A container start of a previous run, from the started-token store (NM recovery): a
    /// replay of its token is refused as a relaunch until the token expires.
    pub fn restore_started(&mut self, expiry_ms: i64, id: ContainerId, now_wall_ms: i64) {
        self.container_tokens
            .restore_start(expiry_ms, id, now_wall_ms);
    }

    /// The launcher started the container's process.
    pub fn launched(&mut self, id: &ContainerId) {
        if let Some(m) = self.managed.get_mut(id) {
            if m.stage == Stage::Starting {
                m.stage = Stage::Launched;
            }
        }
    }

    /// The container ended (exited, killed, or never ran: a localization or launch failure
    /// reports −1000 or −1 with the diagnostics), with its final status as the launcher
    /// classified it ([`crate::launch::classify_exit`]: a requested kill's status wins over
    /// the process's code). Completes it in the table, which delivers the status to the RM.
    /// Returns false if it was already complete.
    pub fn exited(
        &mut self,
        id: &ContainerId,
        exit_status: i32,
        diagnostics: &str,
        table: &mut ContainerTable,
    ) -> bool {
        if let Some(m) = self.managed.get_mut(id) {
            m.stage = Stage::Done;
        }
        self.stats.exited += 1;
        table
            .complete(id, exit_status, diagnostics)
            .unwrap_or(false)
    }

    fn authorize_get_stop(
        nm: &NmTokenIdentifier,
        id: &ContainerId,
        verb: &str,
    ) -> Result<(), String> {
        let attempt: Option<AttemptId> = nm.attempt_id();
        if attempt.map(|a| a.app) != Some(id.app) {
            return Err(format!(
                "{} attempted to {verb} non-application container : {id}",
                attempt.map_or_else(|| "null".to_string(), |a| a.to_string())
            ));
        }
        Ok(())
    }

    /// `stopContainers`: a running container gets a kill order (its exit reports −105); a
    /// completed or recently stopped one succeeds without anything to do.
    pub fn stop_containers(
        &mut self,
        identifier: Option<&[u8]>,
        req: &StopContainersRequestProto,
        now_wall_ms: i64,
        table: &mut ContainerTable,
    ) -> Result<StopOutcome, CallFailure> {
        let nm = Self::nm_token(identifier)?;
        let mut out = StopOutcome::default();
        for p in &req.container_id {
            let Some(id) = container_from_proto(p) else {
                continue;
            };
            self.stats.stops += 1;
            // Java's order: the NMToken's application is checked first, whether or not the
            // container exists, so another application's caller learns nothing of what runs
            // here (the same answer for a real and a made-up container id).
            if let Err(m) = Self::authorize_get_stop(&nm, &id, "stop") {
                out.response
                    .failed_requests
                    .push(failed(&id, exception::YARN, &m));
                continue;
            }
            match table.get(&id).map(|c| c.state) {
                None => {
                    if self.is_recently_stopped(&id, now_wall_ms) {
                        out.response
                            .succeeded_requests
                            .push(container_id_proto(&id));
                    } else {
                        out.response.failed_requests.push(failed(
                            &id,
                            exception::YARN,
                            &format!("Container {id} is not handled by this NodeManager"),
                        ));
                    }
                }
                Some(state) => {
                    if state != ContainerState::Complete {
                        if let Some(k) = self.request_kill(&id, KillReason::ByAppMaster) {
                            out.kills.push((id, k));
                        }
                    }
                    out.response
                        .succeeded_requests
                        .push(container_id_proto(&id));
                }
            }
        }
        Ok(out)
    }

    /// Records a kill for a live container. Returns the reason when the launcher has to act
    /// (the first kill wins; none once done).
    pub fn request_kill(&mut self, id: &ContainerId, reason: KillReason) -> Option<KillReason> {
        let m = self.managed.get_mut(id)?;
        if m.stage == Stage::Done {
            return None;
        }
        if m.kill.is_none() {
            m.kill = Some(reason);
        }
        m.kill.clone()
    }

    /// `getContainerStatuses`.
    pub fn get_statuses(
        &self,
        identifier: Option<&[u8]>,
        req: &GetContainerStatusesRequestProto,
        now_wall_ms: i64,
        table: &ContainerTable,
    ) -> Result<GetContainerStatusesResponseProto, CallFailure> {
        let nm = Self::nm_token(identifier)?;
        let mut out = GetContainerStatusesResponseProto::default();
        for p in &req.container_id {
            let Some(id) = container_from_proto(p) else {
                continue;
            };
            // As for stop: authorization before existence (no oracle).
            if let Err(m) = Self::authorize_get_stop(&nm, &id, "get status for") {
                out.failed_requests.push(failed(&id, exception::YARN, &m));
                continue;
            }
            match table.get(&id) {
                Some(c) => {
                    let mut s = container_status_proto(c);
                    if s.diagnostics.is_none() {
                        s.diagnostics = Some(String::new());
                    }
                    out.status.push(s);
                }
                None => {
                    // Done and gone from the table: the RM let it go and `sync_with_table` has
                    // not run yet; it is recently stopped all the same.
                    let done = self.stage(&id) == Some(Stage::Done);
                    let m = if done || self.is_recently_stopped(&id, now_wall_ms) {
                        format!("Container {id} was recently stopped on node manager.")
                    } else {
                        format!("Container {id} is not handled by this NodeManager")
                    };
                    out.failed_requests.push(failed(&id, exception::YARN, &m));
                }
            }
        }
        Ok(out)
    }

    /// `signalToContainer`'s authorization, which Java does not have (any holder of an NMToken
    /// can signal any container on the node there): the NMToken's application must be the
    /// container's, else the call fails with `"<attempt> attempted to signal
    /// non-application container : <cid>"`, the same for a real or a made-up id.
    pub fn authorize_signal(
        identifier: Option<&[u8]>,
        req: &SignalContainerRequestProto,
    ) -> Result<(), CallFailure> {
        let nm = Self::nm_token(identifier)?;
        let Some(id) = container_from_proto(&req.container_id) else {
            return Ok(());
        };
        Self::authorize_get_stop(&nm, &id, "signal").map_err(CallFailure::yarn)
    }

    /// `signalToContainer`: the signal for a launched container; nothing for others (Java
    /// logs and ignores them).
    pub fn signal(&self, req: &SignalContainerRequestProto) -> Option<(ContainerId, Signal)> {
        let id = container_from_proto(&req.container_id)?;
        let sig = match SignalContainerCommandProto::try_from(req.command).ok()? {
            SignalContainerCommandProto::OutputThreadDump => Signal::Quit,
            SignalContainerCommandProto::GracefulShutdown => Signal::Term,
            SignalContainerCommandProto::ForcefulShutdown => Signal::Kill,
        };
        (self.stage(&id) == Some(Stage::Launched)).then_some((id, sig))
    }

    /// Where a signal the RM relayed in a heartbeat goes (see [`SignalTarget`]).
    pub fn signal_target(&self, id: ContainerId, command: i32) -> SignalTarget {
        let Some(sig) = Signal::from_command(command) else {
            return SignalTarget::BadCommand(id, command);
        };
        match self.stage(&id) {
            None => SignalTarget::Unknown(id),
            Some(Stage::Launched) => SignalTarget::Send(id, sig),
            Some(Stage::Starting | Stage::Done) => SignalTarget::NotRunning(id, sig),
        }
    }

    /// Kill orders for cleanup requests from the RM (`containers_to_cleanup`,
    /// `applications_to_cleanup`), for containers this manager runs.
    pub fn cleanup(&mut self, id: &ContainerId, reason: KillReason) -> Option<KillReason> {
        self.request_kill(id, reason)
    }

    /// An application finished on this node: its NMToken keys are forgotten.
    pub fn app_finished(&mut self, app: AppId) {
        if let Ok(mut m) = self.nm_tokens.write() {
            m.app_finished(app);
        }
    }

    /// Forgets managed containers the table no longer holds (the RM let them go), keeping
    /// them as recently stopped for the tracking time.
    pub fn sync_with_table(&mut self, table: &ContainerTable, now_wall_ms: i64) {
        let gone: Vec<ContainerId> = self
            .managed
            .iter()
            .filter(|(id, m)| m.stage == Stage::Done && table.get(id).is_none())
            .map(|(id, _)| *id)
            .collect();
        for id in gone {
            self.managed.remove(&id);
            self.remember_stopped(id, now_wall_ms);
        }
        while let Some(&(exp, id)) = self.stopped_order.front() {
            if exp > now_wall_ms && self.stopped_order.len() <= MAX_RECENTLY_STOPPED {
                break;
            }
            self.stopped_order.pop_front();
            if self.recently_stopped.get(&id) == Some(&exp) {
                self.recently_stopped.remove(&id);
            }
        }
    }

    fn remember_stopped(&mut self, id: ContainerId, now_wall_ms: i64) {
        let exp = now_wall_ms.saturating_add(self.cfg.track_stopped_ms);
        self.recently_stopped.insert(id, exp);
        self.stopped_order.push_back((exp, id));
    }

    fn is_recently_stopped(&self, id: &ContainerId, now_wall_ms: i64) -> bool {
        self.recently_stopped
            .get(id)
            .is_some_and(|&exp| exp > now_wall_ms)
    }
}

fn token_message(e: TokenError) -> String {
    match e {
        TokenError::InvalidToken(m) | TokenError::Unauthorized(m) => m,
        other => other.to_string(),
    }
}
