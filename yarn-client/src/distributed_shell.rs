//! A DistributedShell ApplicationMaster as a sans-IO state machine, and the launch contexts of
//! the application (its AM container and its shell containers).
//!
//! [`DistributedShell`] is fed the RM's allocate responses and the outcomes of the container
//! starts, and says what to send and what to start:
//!
//! ```text
//!   allocate_request()  ──> AllocateRequestProto (responseId, the ask until the RM took it,
//!                           releases of surplus / unstartable containers, progress)
//!   on_allocate(resp)   ──> Vec<Start>   (allocated containers to start, with their node's NMToken)
//!                           completions recorded, NMTokens cached, surplus queued for release
//!   started(id) / start_failed(id, why)
//!   is_done()           ──> every wanted container completed or failed to start
//!   finish(abort)       ──> (final status, diagnostics): SUCCEEDED iff all exited 0 and no
//!                           abort, else FAILED with diagnostics naming each failure; from then
//!                           on nothing is asked and late allocations are released
//!   finish_request(..)  ──> FinishApplicationMasterRequestProto for it
//!   snapshot()          ──> counts and per-container node / state / exit status (status page)
//! ```
//!
//! A container goes Allocated → Running → Completed, or Allocated → StartFailed; a completion
//! can arrive before the start's answer (a fast command), and then it stays Completed. Every
//! input is idempotent (a container allocated or completed twice counts once), so a response
//! the RM replays for a retried allocate does no harm.

use std::collections::{BTreeMap, HashMap};

use hadoop_wire::pb::hadoop::yarn::{
    AllocateRequestProto, AllocateResponseProto, AmCommandProto, ContainerLaunchContextProto,
    ContainerProto, FinishApplicationMasterRequestProto, LocalResourceProto, PriorityProto,
    ResourceProto, ResourceRequestProto, StartContainerRequestProto, StringBytesMapProto,
    StringLocalResourceMapProto, StringStringMapProto, UrlProto,
};
use hadoop_wire::token::identifier::container_from_proto;
use hadoop_wire::token::Token;
use hadoop_wire::yarn::ids::ContainerId;

use crate::application_client::FinalStatus;
use crate::error::YarnError;

/// Longest diagnostics text sent in `finishApplicationMaster`.
const MAX_DIAGNOSTICS: usize = 8192;
/// Longest per-container diagnostics kept.
const MAX_CONTAINER_DIAGNOSTICS: usize = 2048;

/// What the application asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellSpec {
    /// Containers to run the command in.
    pub containers: u32,
    pub memory_mb: i64,
    pub vcores: i32,
    pub priority: i32,
    /// The command, one bash string (see [`shell_command`]).
    pub command: String,
    /// `service_data` of every shell container's launch context (auxiliary service name →
    /// bytes), as MapReduce sends its job token to `mapreduce_shuffle`.
    pub service_data: Vec<(String, Vec<u8>)>,
}

/// Where a container is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContainerState {
    /// Allocated; its start has not been answered yet.
    Allocated,
    /// The NodeManager accepted the start.
    Running,
    /// The RM reported it complete.
    Completed {
        exit_status: i32,
        diagnostics: String,
    },
    /// The NodeManager refused the start (or could not be reached).
    StartFailed { message: String },
}

impl ContainerState {
    /// A short name: `ALLOCATED`, `RUNNING`, `COMPLETED`, `START_FAILED`.
    pub fn name(&self) -> &'static str {
        match self {
            ContainerState::Allocated => "ALLOCATED",
            ContainerState::Running => "RUNNING",
            ContainerState::Completed { .. } => "COMPLETED",
            ContainerState::StartFailed { .. } => "START_FAILED",
        }
    }

    fn settled(&self) -> bool {
        matches!(
            self,
            ContainerState::Completed { .. } | ContainerState::StartFailed { .. }
        )
    }

    fn succeeded(&self) -> bool {
        matches!(self, ContainerState::Completed { exit_status: 0, .. })
    }
}

/// One of the application's containers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerInfo {
    pub id: ContainerId,
    /// Its NodeId, `host:port`.
    pub node: String,
    pub state: ContainerState,
}

/// A container to start: the request for `node`'s NodeManager and the NMToken to call it with.
#[derive(Debug, Clone)]
pub struct Start {
    pub container: ContainerId,
    pub node: String,
    pub nm_token: Token,
    pub request: StartContainerRequestProto,
}

/// The application's progress, for the status page and the client.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub requested: u32,
    pub allocated: u32,
    pub running: u32,
    /// Completed or failed to start.
    pub done: u32,
    /// Done, and not with exit status 0.
    pub failed: u32,
    /// Containers released: surplus beyond the ask, and those that could not be started.
    pub released: u32,
    /// Set once the AM decided how the application ends.
    pub final_status: Option<FinalStatus>,
    pub diagnostics: String,
    /// In allocation order.
    pub containers: Vec<ContainerInfo>,
    /// AMRMTokens the RM rolled and the AM switched to (filled in by the I/O driver,
    /// [`crate::shell_am`]; the state machine leaves it 0).
    pub amrm_token_rolls: u32,
}

/// The ApplicationMaster's logic.
#[derive(Debug)]
pub struct DistributedShell {
    spec: ShellSpec,
    response_id: i32,
    /// The ask went out and a response came back: the RM holds it.
    ask_taken: bool,
    /// Releases to send; the first `releases_in_flight` of them went with the last request.
    releases: Vec<ContainerId>,
    releases_in_flight: usize,
    /// Every container ever queued for release (a replayed allocation is not released twice).
    released_ids: std::collections::HashSet<ContainerId>,
    released: u32,
    containers: BTreeMap<ContainerId, ContainerInfo>,
    order: Vec<ContainerId>,
    nm_tokens: HashMap<String, Token>,
    final_status: Option<(FinalStatus, String)>,
}

fn node_string(c: &ContainerProto) -> Option<String> {
    let n = c.node_id.as_ref()?;
    Some(format!("{}:{}", n.host.as_deref()?, n.port?))
}

fn cap(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push('…');
    }
    s
}

impl DistributedShell {
    pub fn new(spec: ShellSpec) -> DistributedShell {
        DistributedShell {
            spec,
            response_id: 0,
            ask_taken: false,
            releases: Vec::new(),
            releases_in_flight: 0,
            released_ids: std::collections::HashSet::new(),
            released: 0,
            containers: BTreeMap::new(),
            order: Vec::new(),
            nm_tokens: HashMap::new(),
            final_status: None,
        }
    }

    pub fn spec(&self) -> &ShellSpec {
        &self.spec
    }

    /// The responseId the next allocate carries (the last response's).
    pub fn response_id(&self) -> i32 {
        self.response_id
    }

    /// NMTokens from `registerApplicationMaster`'s `nm_tokens_from_previous_attempts`.
    pub fn add_nm_tokens(&mut self, tokens: &[hadoop_wire::pb::hadoop::yarn::NmTokenProto]) {
        for t in tokens {
            if let (Some(n), Some(tok)) = (t.node_id.as_ref(), t.token.as_ref()) {
                if let (Some(h), Some(p)) = (n.host.as_deref(), n.port) {
                    self.nm_tokens.insert(
                        format!("{h}:{p}"),
                        Token::new(
                            tok.identifier.clone(),
                            tok.password.clone(),
                            tok.kind.clone(),
                            tok.service.clone(),
                        ),
                    );
                }
            }
        }
    }

    /// The NMToken cached for `node` (`host:port`).
    pub fn nm_token(&self, node: &str) -> Option<&Token> {
        self.nm_tokens.get(node)
    }

    fn settled(&self) -> u32 {
        self.containers
            .values()
            .filter(|c| c.state.settled())
            .count() as u32
    }

    /// The next allocate request.
    pub fn allocate_request(&mut self) -> AllocateRequestProto {
        let ask = if self.ask_taken || self.final_status.is_some() || self.spec.containers == 0 {
            vec![]
        } else {
            vec![ResourceRequestProto {
                priority: Some(PriorityProto {
                    priority: Some(self.spec.priority),
                }),
                resource_name: Some("*".into()),
                capability: Some(ResourceProto {
                    memory: Some(self.spec.memory_mb),
                    virtual_cores: Some(self.spec.vcores),
                    resource_value_map: vec![],
                }),
                num_containers: Some(self.spec.containers as i32),
                relax_locality: Some(true),
                ..Default::default()
            }]
        };
        self.releases_in_flight = self.releases.len();
        let progress = if self.spec.containers == 0 {
            1.0
        } else {
            self.settled() as f32 / self.spec.containers as f32
        };
        AllocateRequestProto {
            ask,
            release: self.releases.iter().map(|c| c.to_proto()).collect(),
            response_id: Some(self.response_id),
            progress: Some(progress.min(1.0)),
            ..Default::default()
        }
    }

    /// Takes an allocate response (to the last [`allocate_request`](Self::allocate_request)):
    /// the containers to start now.
    pub fn on_allocate(&mut self, resp: AllocateResponseProto) -> Result<Vec<Start>, YarnError> {
        match resp
            .a_m_command
            .and_then(|c| AmCommandProto::try_from(c).ok())
        {
            Some(AmCommandProto::AmShutdown) => {
                return Err(YarnError::Rm("allocate answered AM_SHUTDOWN".into()))
            }
            Some(AmCommandProto::AmResync) => {
                return Err(YarnError::Rm(
                    "allocate answered AM_RESYNC (the RM lost this attempt)".into(),
                ))
            }
            None => {}
        }
        let id = resp.response_id.ok_or_else(|| YarnError::Malformed {
            method: "allocate",
            detail: "no response_id".into(),
        })?;
        self.response_id = id;
        self.ask_taken = true;
        let sent = self.releases_in_flight.min(self.releases.len());
        self.releases.drain(..sent);
        self.released += sent as u32;
        self.releases_in_flight = 0;
        self.add_nm_tokens(&resp.nm_tokens);

        let mut starts = Vec::new();
        for c in &resp.allocated_containers {
            let Some(id) = c.id.as_ref().and_then(container_from_proto) else {
                continue;
            };
            if self.containers.contains_key(&id) || self.released_ids.contains(&id) {
                continue;
            }
            if self.containers.len() as u32 >= self.spec.containers || self.final_status.is_some() {
                self.release(id);
                continue;
            }
            let node = node_string(c).unwrap_or_default();
            let mut info = ContainerInfo {
                id,
                node: node.clone(),
                state: ContainerState::Allocated,
            };
            let token = c.container_token.clone();
            match (self.nm_tokens.get(&node), token) {
                (Some(nm), Some(ct)) => starts.push(Start {
                    container: id,
                    node,
                    nm_token: nm.clone(),
                    request: StartContainerRequestProto {
                        container_launch_context: Some(shell_launch_context(
                            &self.spec.command,
                            &self.spec.service_data,
                        )),
                        container_token: Some(ct),
                    },
                }),
                (None, _) => {
                    info.state = ContainerState::StartFailed {
                        message: format!("the RM sent no NMToken for node {node}"),
                    };
                    self.release(id);
                }
                (_, None) => {
                    info.state = ContainerState::StartFailed {
                        message: "the allocated container has no container token".into(),
                    };
                    self.release(id);
                }
            }
            self.containers.insert(id, info);
            self.order.push(id);
        }
        for s in &resp.completed_container_statuses {
            let Some(id) = s.container_id.as_ref().and_then(container_from_proto) else {
                continue;
            };
            let Some(info) = self.containers.get_mut(&id) else {
                continue; // released surplus, or not ours
            };
            if info.state.settled() {
                continue;
            }
            info.state = ContainerState::Completed {
                exit_status: s
                    .exit_status
                    .unwrap_or(hadoop_wire::yarn::exit_status::INVALID),
                diagnostics: cap(
                    s.diagnostics.clone().unwrap_or_default().trim().to_string(),
                    MAX_CONTAINER_DIAGNOSTICS,
                ),
            };
        }
        Ok(starts)
    }

    fn release(&mut self, id: ContainerId) {
        if self.released_ids.insert(id) {
            self.releases.push(id);
        }
    }

    /// The NodeManager accepted the start of `id`.
    pub fn started(&mut self, id: ContainerId) {
        if let Some(c) = self.containers.get_mut(&id) {
            if c.state == ContainerState::Allocated {
                c.state = ContainerState::Running;
            }
        }
    }

    /// The start of `id` failed: it counts as failed, and is released.
    pub fn start_failed(&mut self, id: ContainerId, message: &str) {
        if let Some(c) = self.containers.get_mut(&id) {
            if !c.state.settled() {
                c.state = ContainerState::StartFailed {
                    message: cap(message.trim().to_string(), MAX_CONTAINER_DIAGNOSTICS),
                };
                self.release(id);
            }
        }
    }

    /// Every wanted container completed or failed to start.
    pub fn is_done(&self) -> bool {
        self.settled() >= self.spec.containers
    }

    /// Containers started and not completed (to stop when the AM gives up).
    pub fn running(&self) -> Vec<(ContainerId, String)> {
        self.containers
            .values()
            .filter(|c| c.state == ContainerState::Running)
            .map(|c| (c.id, c.node.clone()))
            .collect()
    }

    /// Decides how the application ends: SUCCEEDED iff every wanted container exited 0 and
    /// `abort` is `None`; FAILED otherwise, with diagnostics naming each failure.
    pub fn finish(&mut self, abort: Option<&str>) -> (FinalStatus, String) {
        let n = self.spec.containers;
        let failures: Vec<String> = self
            .order
            .iter()
            .filter_map(|id| self.containers.get(id))
            .filter(|c| c.state.settled() && !c.state.succeeded())
            .map(|c| match &c.state {
                ContainerState::Completed {
                    exit_status,
                    diagnostics,
                } => {
                    let d = diagnostics_summary(diagnostics);
                    if d.is_empty() {
                        format!("{} on {}: exit status {exit_status}", c.id, c.node)
                    } else {
                        format!("{} on {}: exit status {exit_status} ({d})", c.id, c.node)
                    }
                }
                ContainerState::StartFailed { message } => {
                    format!("{} on {}: start failed: {message}", c.id, c.node)
                }
                _ => String::new(),
            })
            .collect();
        let ok = self
            .containers
            .values()
            .filter(|c| c.state.succeeded())
            .count() as u32;
        let (status, mut text) = if abort.is_none() && failures.is_empty() && ok >= n {
            (
                FinalStatus::Succeeded,
                format!("{ok} of {n} containers exited 0"),
            )
        } else {
            let mut t = String::new();
            if let Some(a) = abort {
                t.push_str(&format!("aborted: {a}; "));
            }
            t.push_str(&format!(
                "{} of {n} containers failed, {ok} exited 0, {} not finished",
                failures.len(),
                n.saturating_sub(self.settled())
            ));
            for f in &failures {
                t.push_str("\n  ");
                t.push_str(f);
            }
            (FinalStatus::Failed, t)
        };
        text = cap(text, MAX_DIAGNOSTICS);
        self.final_status = Some((status, text.clone()));
        (status, text)
    }

    /// Counts and containers, for the status page.
    pub fn snapshot(&self) -> Snapshot {
        let mut s = Snapshot {
            requested: self.spec.containers,
            allocated: self.containers.len() as u32,
            released: self.released + self.releases.len() as u32,
            final_status: self.final_status.as_ref().map(|f| f.0),
            diagnostics: self
                .final_status
                .as_ref()
                .map(|f| f.1.clone())
                .unwrap_or_default(),
            ..Snapshot::default()
        };
        for id in &self.order {
            let Some(c) = self.containers.get(id) else {
                continue;
            };
            match &c.state {
                ContainerState::Running => s.running += 1,
                st if st.settled() => {
                    s.done += 1;
                    if !st.succeeded() {
                        s.failed += 1;
                    }
                }
                _ => {}
            }
            s.containers.push(c.clone());
        }
        s
    }

    /// `finishApplicationMaster`'s request for [`finish`](Self::finish)'s outcome.
    pub fn finish_request(
        status: FinalStatus,
        diagnostics: &str,
        tracking_url: &str,
    ) -> FinishApplicationMasterRequestProto {
        FinishApplicationMasterRequestProto {
            diagnostics: Some(diagnostics.to_string()),
            tracking_url: Some(tracking_url.to_string()),
            final_application_status: Some(status.to_i32()),
        }
    }
}

/// The telling line of a container's diagnostics, without Java's `[timestamp]` prefix: the
/// first that says how it exited ("Container exited with a non-zero exit code 7.", "Container
/// killed by the ApplicationMaster."), else the first non-empty one.
pub fn diagnostics_summary(diagnostics: &str) -> &str {
    fn strip(l: &str) -> &str {
        let l = l.trim();
        match l.strip_prefix('[').and_then(|r| r.split_once(']')) {
            Some((_, rest)) => rest.trim(),
            None => l,
        }
    }
    let has = |words: &'static [&'static str]| {
        move |l: &&str| {
            let l = l.to_ascii_lowercase();
            words.iter().any(|w| l.contains(w))
        }
    };
    let lines = || diagnostics.lines().map(strip).filter(|l| !l.is_empty());
    lines()
        .find(has(&["exited with", "killed"]))
        .or_else(|| lines().find(has(&["exit code"])))
        .or_else(|| lines().next())
        .unwrap_or("")
}

/// The shell containers' launch context: `command` in a subshell, its stdout and stderr in the
/// container's log dir (`<LOG_DIR>/stdout`, `<LOG_DIR>/stderr`).
pub fn shell_launch_context(
    command: &str,
    service_data: &[(String, Vec<u8>)],
) -> ContainerLaunchContextProto {
    ContainerLaunchContextProto {
        command: vec![format!("({command}) 1><LOG_DIR>/stdout 2><LOG_DIR>/stderr")],
        service_data: service_data
            .iter()
            .map(|(k, v)| StringBytesMapProto {
                key: Some(k.clone()),
                value: Some(v.clone()),
            })
            .collect(),
        ..Default::default()
    }
}

/// One bash string from command words, the way it reaches the container.
///
/// The NodeManager writes the command into its launch script as `exec /bin/bash -c "<command>"`
/// without escaping, so the string is read twice by bash: once inside double quotes (`$VAR`
/// there is the container's environment, e.g. `$CONTAINER_ID`), then by `bash -c`. One word is
/// taken as a whole bash command (`'echo a; exit 3'`); several are single-quoted one by one
/// when needed. `"`, `` ` `` and `\` cannot pass the double quotes intact and are refused.
pub fn shell_command(words: &[String]) -> Result<String, YarnError> {
    if words.is_empty() || words.iter().all(|w| w.trim().is_empty()) {
        return Err(YarnError::Config("no command given (after `--`)".into()));
    }
    let cmd = if words.len() == 1 {
        words[0].clone()
    } else {
        words
            .iter()
            .map(|w| quote_word(w))
            .collect::<Result<Vec<_>, _>>()?
            .join(" ")
    };
    if let Some(bad) = cmd.chars().find(|c| matches!(c, '"' | '`' | '\\')) {
        return Err(YarnError::Config(format!(
            "the command contains {bad:?}, which the NodeManager's launch script \
             (exec /bin/bash -c \"...\") would not pass on intact: {cmd}"
        )));
    }
    Ok(cmd)
}

fn plain(w: &str) -> bool {
    !w.is_empty()
        && w.chars().all(|c| {
            c.is_ascii_alphanumeric()
                || matches!(c, '_' | '-' | '.' | '/' | ':' | '=' | ',' | '+' | '@' | '%')
        })
}

/// A word as it can stand in the launch script: as is when plain, else single-quoted.
pub fn quote_word(w: &str) -> Result<String, YarnError> {
    if plain(w) {
        return Ok(w.to_string());
    }
    if w.contains('\'') {
        return Err(YarnError::Config(format!(
            "the word {w:?} contains a single quote; give the whole command as one word instead"
        )));
    }
    Ok(format!("'{w}'"))
}

/// Lower-case hex of `bytes` (how the command travels to the AM on its command line).
pub fn hex_encode(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The inverse of [`hex_encode`].
pub fn hex_decode(text: &str) -> Result<Vec<u8>, YarnError> {
    let t = text.trim();
    if t.len() % 2 != 0 {
        return Err(YarnError::Config("hex text of odd length".into()));
    }
    (0..t.len())
        .step_by(2)
        .map(|i| {
            t.get(i..i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| YarnError::Config(format!("not hex: {t:?}")))
        })
        .collect()
}

/// A local file shipped to the AM container as a `file:` LocalResource (FILE, APPLICATION
/// visibility), as DistributedShell ships its jar; the NodeManager checks the timestamp.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShippedFile {
    /// Link name in the container's working directory.
    pub link: String,
    /// Absolute path on the submitting machine (a path every node can read: a shared or local
    /// file system at the same path).
    pub path: String,
    pub size: i64,
    /// Modification time, ms since the epoch.
    pub timestamp_ms: i64,
}

impl ShippedFile {
    /// `path`'s size and modification time.
    pub fn from_path(link: &str, path: &std::path::Path) -> Result<ShippedFile, YarnError> {
        let md = std::fs::metadata(path)
            .map_err(|e| YarnError::Config(format!("{}: {e}", path.display())))?;
        let mtime = md
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_millis() as i64);
        Ok(ShippedFile {
            link: link.to_string(),
            path: path.display().to_string(),
            size: md.len() as i64,
            timestamp_ms: mtime,
        })
    }

    fn to_proto(&self) -> StringLocalResourceMapProto {
        StringLocalResourceMapProto {
            key: Some(self.link.clone()),
            value: Some(LocalResourceProto {
                resource: Some(UrlProto {
                    scheme: Some("file".into()),
                    file: Some(self.path.clone()),
                    ..Default::default()
                }),
                size: Some(self.size),
                timestamp: Some(self.timestamp_ms),
                r#type: Some(hadoop_wire::pb::hadoop::yarn::LocalResourceTypeProto::File as i32),
                visibility: Some(
                    hadoop_wire::pb::hadoop::yarn::LocalResourceVisibilityProto::Application as i32,
                ),
                ..Default::default()
            }),
        }
    }
}

/// The AM container's launch context: `program args…` with stdout and stderr in
/// `<LOG_DIR>/AppMaster.stdout|stderr`, the environment, and the shipped files.
pub fn am_launch_context(
    program: &str,
    args: &[String],
    env: &[(String, String)],
    ship: &[ShippedFile],
) -> Result<ContainerLaunchContextProto, YarnError> {
    let mut words = vec![quote_word(program)?];
    for a in args {
        words.push(quote_word(a)?);
    }
    let command = format!(
        "{} 1><LOG_DIR>/AppMaster.stdout 2><LOG_DIR>/AppMaster.stderr",
        words.join(" ")
    );
    Ok(ContainerLaunchContextProto {
        local_resources: ship.iter().map(ShippedFile::to_proto).collect(),
        environment: env
            .iter()
            .map(|(k, v)| StringStringMapProto {
                key: Some(k.clone()),
                value: Some(v.clone()),
            })
            .collect(),
        command: vec![command],
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use hadoop_wire::pb::hadoop::common::TokenProto;
    use hadoop_wire::pb::hadoop::yarn::{ContainerStatusProto, NmTokenProto, NodeIdProto};
    use hadoop_wire::yarn::ids::AppId;

    const APP: AppId = AppId::new(1_700_000_000_000, 7);

    fn cid(n: i64) -> ContainerId {
        ContainerId::new(APP, 1, n)
    }

    fn spec(n: u32) -> ShellSpec {
        ShellSpec {
            containers: n,
            memory_mb: 128,
            vcores: 1,
            priority: 0,
            command: "exit 0".into(),
            service_data: vec![],
        }
    }

    fn node(h: &str) -> NodeIdProto {
        NodeIdProto {
            host: Some(h.into()),
            port: Some(8041),
        }
    }

    fn tok(b: u8) -> TokenProto {
        TokenProto {
            identifier: vec![b],
            password: vec![b, b],
            kind: "x".into(),
            service: String::new(),
        }
    }

    fn container(n: i64, host: &str) -> ContainerProto {
        ContainerProto {
            id: Some(cid(n).to_proto()),
            node_id: Some(node(host)),
            container_token: Some(tok(n as u8)),
            ..Default::default()
        }
    }

    fn nm_token(host: &str) -> NmTokenProto {
        NmTokenProto {
            node_id: Some(node(host)),
            token: Some(tok(200)),
        }
    }

    fn done(n: i64, exit: i32) -> ContainerStatusProto {
        ContainerStatusProto {
            container_id: Some(cid(n).to_proto()),
            state: Some(3),
            exit_status: Some(exit),
            diagnostics: Some(format!("diag {n}\nmore")),
            ..Default::default()
        }
    }

    fn resp(id: i32) -> AllocateResponseProto {
        AllocateResponseProto {
            response_id: Some(id),
            ..Default::default()
        }
    }

    #[test]
    fn the_response_id_is_echoed_and_the_ask_goes_until_the_rm_took_it() {
        let mut ds = DistributedShell::new(spec(3));
        let r = ds.allocate_request();
        assert_eq!(r.response_id, Some(0));
        assert_eq!(r.ask.len(), 1);
        assert_eq!(r.ask[0].num_containers, Some(3));
        assert_eq!(r.ask[0].resource_name.as_deref(), Some("*"));
        assert_eq!(r.ask[0].capability.as_ref().unwrap().memory, Some(128));
        // The call failed (no response): the next request still asks.
        let r = ds.allocate_request();
        assert_eq!((r.response_id, r.ask.len()), (Some(0), 1));
        ds.on_allocate(resp(1)).unwrap();
        let r = ds.allocate_request();
        assert_eq!((r.response_id, r.ask.len()), (Some(1), 0));
        ds.on_allocate(resp(2)).unwrap();
        assert_eq!(ds.allocate_request().response_id, Some(2));
        // A response without an id is malformed; AM commands are errors.
        assert!(ds.on_allocate(AllocateResponseProto::default()).is_err());
        let mut r = resp(3);
        r.a_m_command = Some(AmCommandProto::AmResync as i32);
        assert!(ds.on_allocate(r).is_err());
    }

    #[test]
    fn allocated_containers_are_started_once_and_surplus_is_released() {
        let mut ds = DistributedShell::new(spec(2));
        ds.allocate_request();
        let mut r = resp(1);
        r.nm_tokens = vec![nm_token("h1"), nm_token("h2")];
        r.allocated_containers = vec![container(2, "h1"), container(3, "h2"), container(4, "h1")];
        let starts = ds.on_allocate(r.clone()).unwrap();
        assert_eq!(
            starts
                .iter()
                .map(|s| (s.container, s.node.as_str()))
                .collect::<Vec<_>>(),
            [(cid(2), "h1:8041"), (cid(3), "h2:8041")]
        );
        assert_eq!(starts[0].nm_token.password, [200, 200]);
        let clc = starts[0].request.container_launch_context.as_ref().unwrap();
        assert_eq!(
            clc.command,
            ["(exit 0) 1><LOG_DIR>/stdout 2><LOG_DIR>/stderr"]
        );
        assert_eq!(starts[1].request.container_token, Some(tok(3)));
        // The surplus goes out as a release, once.
        let req = ds.allocate_request();
        assert_eq!(req.release, [cid(4).to_proto()]);
        // The same response replayed (a retried allocate) starts nothing again.
        let mut again = r;
        again.response_id = Some(2);
        assert!(ds.on_allocate(again).unwrap().is_empty());
        assert!(ds.allocate_request().release.is_empty());
        let s = ds.snapshot();
        assert_eq!((s.allocated, s.released, s.running, s.done), (2, 1, 0, 0));
    }

    #[test]
    fn completions_are_counted_once_and_decide_the_final_status() {
        let mut ds = DistributedShell::new(spec(3));
        ds.allocate_request();
        let mut r = resp(1);
        r.nm_tokens = vec![nm_token("h1")];
        r.allocated_containers = vec![container(2, "h1"), container(3, "h1"), container(4, "h1")];
        let starts = ds.on_allocate(r).unwrap();
        assert_eq!(starts.len(), 3);
        ds.started(cid(2));
        ds.started(cid(3));
        // 4's completion arrives before its start's answer: it stays completed.
        ds.allocate_request();
        let mut r = resp(2);
        r.completed_container_statuses = vec![done(4, 0), done(2, 0), done(99, 0)];
        ds.on_allocate(r).unwrap();
        ds.started(cid(4));
        let s = ds.snapshot();
        assert_eq!((s.running, s.done, s.failed), (1, 2, 0));
        assert!(!ds.is_done());
        ds.allocate_request();
        let mut r = resp(3);
        r.completed_container_statuses = vec![done(3, 7), done(3, 0)];
        ds.on_allocate(r).unwrap();
        assert!(ds.is_done());
        let (st, diag) = ds.finish(None);
        assert_eq!(st, FinalStatus::Failed);
        assert!(
            diag.contains("1 of 3 containers failed, 2 exited 0"),
            "{diag}"
        );
        assert!(
            diag.contains(&format!("{} on h1:8041: exit status 7 (diag 3)", cid(3))),
            "{diag}"
        );
        let s = ds.snapshot();
        assert_eq!(s.final_status, Some(FinalStatus::Failed));
        assert_eq!((s.done, s.failed), (3, 1));
    }

    #[test]
    fn all_zero_exits_succeed_and_start_failures_fail() {
        let mut ds = DistributedShell::new(spec(2));
        ds.allocate_request();
        let mut r = resp(1);
        r.nm_tokens = vec![nm_token("h1")];
        r.allocated_containers = vec![container(2, "h1"), container(3, "h2")];
        // h2 has no NMToken: failed at once, and released.
        let starts = ds.on_allocate(r).unwrap();
        assert_eq!(starts.len(), 1);
        assert_eq!(ds.allocate_request().release, [cid(3).to_proto()]);
        ds.start_failed(
            cid(2),
            "org.apache.hadoop.yarn.exceptions.YarnException: boom",
        );
        assert!(ds.is_done());
        let (st, diag) = ds.finish(None);
        assert_eq!(st, FinalStatus::Failed);
        assert!(
            diag.contains("start failed: org.apache.hadoop.yarn.exceptions.YarnException: boom"),
            "{diag}"
        );
        assert!(diag.contains("no NMToken for node h2:8041"), "{diag}");

        let mut ok = DistributedShell::new(spec(1));
        ok.allocate_request();
        let mut r = resp(1);
        r.nm_tokens = vec![nm_token("h1")];
        r.allocated_containers = vec![container(2, "h1")];
        ok.on_allocate(r).unwrap();
        ok.started(cid(2));
        let mut r = resp(2);
        r.completed_container_statuses = vec![done(2, 0)];
        ok.on_allocate(r).unwrap();
        assert_eq!(ok.finish(None).0, FinalStatus::Succeeded);
        // An abort fails even when everything that ran succeeded.
        assert_eq!(ok.finish(Some("timeout")).0, FinalStatus::Failed);

        // Once decided, nothing more is asked for, and whatever still arrives is released.
        let mut early = DistributedShell::new(spec(2));
        early.finish(Some("the cluster grants less"));
        assert!(early.allocate_request().ask.is_empty());
        let mut r = resp(1);
        r.nm_tokens = vec![nm_token("h1")];
        r.allocated_containers = vec![container(2, "h1")];
        assert!(early.on_allocate(r).unwrap().is_empty());
        assert_eq!(early.allocate_request().release, [cid(2).to_proto()]);
    }

    #[test]
    fn the_telling_diagnostics_line_is_picked() {
        let java = "[2026-12-04 17:14:48.972]Exception from container-launch.\nContainer id: c\n\
                    Exit code: 7\n\n[2026-12-04 17:14:48.973]Container exited with a non-zero exit code 7. Error file: prelaunch.err.";
        assert_eq!(
            diagnostics_summary(java),
            "Container exited with a non-zero exit code 7. Error file: prelaunch.err."
        );
        assert_eq!(
            diagnostics_summary("[t]Launch failed\nExit code: 1"),
            "Exit code: 1"
        );
        assert_eq!(diagnostics_summary("\n[x] plain\nmore"), "plain");
        assert_eq!(diagnostics_summary(""), "");
    }

    #[test]
    fn commands_are_quoted_for_the_launch_script_or_refused() {
        let w = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            shell_command(&w(&["echo hi; exit 3"])).unwrap(),
            "echo hi; exit 3"
        );
        assert_eq!(
            shell_command(&w(&["sh", "-c", "exit 3"])).unwrap(),
            "sh -c 'exit 3'"
        );
        assert!(shell_command(&w(&["echo \"x\""])).is_err());
        assert!(shell_command(&w(&["a", "it's"])).is_err());
        assert!(shell_command(&[]).is_err());
        let h = hex_encode("exit $X; é".as_bytes());
        assert_eq!(hex_decode(&h).unwrap(), "exit $X; é".as_bytes());
        assert!(hex_decode("abc").is_err() && hex_decode("zz").is_err());
        let clc = am_launch_context(
            "/opt/bin/hotpath",
            &w(&["app", "am", "--containers", "4"]),
            &[("K".into(), "V".into())],
            &[],
        )
        .unwrap();
        assert_eq!(
            clc.command,
            ["/opt/bin/hotpath app am --containers 4 1><LOG_DIR>/AppMaster.stdout 2><LOG_DIR>/AppMaster.stderr"]
        );
    }
}
