//! The HDFS-reader thread: HDFS files copied onto this node, as a NodeManager's localizer
//! does (`FSDownload`), for the control socket's `localize` requests and, through
//! [`HdfsFetcher`], for the `hdfs:` resources of a container's localization
//! ([`crate::localizer`]). Its settings are [`HdfsSettings`] (in [`crate::config`]).
//!
//! How the pieces connect:
//!
//! ```text
//!  hotpath container localize ──control socket──> control::ControlServer (housekeeping thread)
//!                                                   │ Request::from_json (syntax only)
//!                                                   │ Queue::submit: bounded queue, full → Busy
//!                                                   v
//!                         reader thread hp-hdfs-<cpu> (the hw plan's HdfsReader), run_reader:
//!                           one hdfs_io::DfsClient; per job: destination checks → getFileInfo →
//!                           free space → CRC-verified read into a temp file beside the
//!                           destination → fsync → atomic rename → fsync of the directory
//!                                                   │ Done (the reply line)
//!                                                   v
//!                         ControlServer::poll picks it up (every 10 ms) and answers the caller
//! ```
//!
//! The same thread also serves [`FetchRequest`]s from container localization
//! (`crate::localizer`): a launch worker calls [`HdfsFetcher::fetch`], which queues the job
//! (waiting while the queue is full, not refusing) and blocks until the reader answered. Such a
//! fetch reads as the application's submitter: the reader keeps one `DfsClient` per HDFS user
//! (the NameNode connection context's `effectiveUser`, SIMPLE auth), at most
//! [`MAX_USER_CLIENTS`] of them, and checks the source's modification time (and, for PUBLIC
//! resources, that everyone may read it) before reading.
//!
//! On a Kerberized cluster (`hadoop.security.authentication=kerberos`) the reader does what
//! Java's NodeManager does: APPLICATION and PRIVATE resources are read with the application's
//! credentials only ([`FetchRequest::tokens`], the launch context's Credentials): the
//! `HDFS_DELEGATION_TOKEN` for the NameNode (`ip:port`, or `ha-hdfs:<nameservice>`) is
//! presented with SASL TOKEN, and without one the fetch fails at once
//! ([`LocalizeError::NoDelegationToken`]), never falling back to the agent's own login. PUBLIC
//! resources are read with the agent's own Kerberos login: `yarn.nodemanager.principal`, `_HOST`
//! replaced by the local host's canonical name (Java's `SecurityUtil.login`), its key read from
//! `yarn.nodemanager.keytab` (its tickets kept in memory; MIT's `KRB5CCNAME` and
//! `KRB5_CLIENT_KTNAME` are neither read nor changed), or, without that key, found by MIT krb5
//! in the ticket cache or the client keytab the agent was started with (`KRB5CCNAME`,
//! `KRB5_CLIENT_KTNAME`). A keytab without the principal stops the agent at start, naming both
//! keys ([`node_keytab`]). The clients are kept per user and token, as above.
//!
//! The reader thread exists only when `fs.defaultFS` names an `hdfs://` file system
//! ([`HdfsSettings::from_conf`]); otherwise a localize request is answered with
//! [`LocalizeError::NotConfigured`].
//!
//! Rules a caller can rely on:
//! - The destination appears whole or not at all: bytes go to `.<name>.hotpath-<pid>-<n>.tmp`
//!   in the destination's directory, which is fsynced and then renamed over the destination
//!   (`--overwrite`) or hard-linked to it and unlinked (the default: an existing destination is
//!   never replaced, and the check cannot race). Every failure removes the temp file.
//! - The destination must lie inside one of the node's `yarn.nodemanager.local-dirs` (after
//!   resolving symlinks), its directory must exist, and it must be absolute.
//! - Every byte was checked against the DataNode's CRC32C/CRC32 checksums; a replica that
//!   fails is replaced by another (see `hdfs_io::dfs`). The byte count must equal the length
//!   `getFileInfo` reported before the read.
//! - At most `hotpath.agent.localize.queue-depth` requests wait; one more is refused with
//!   [`LocalizeError::Busy`] at once (no unbounded memory). Requests on one control
//!   connection are answered in order: the connection's next line is read only after the
//!   localize reply.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use conf::Configuration;
use hdfs_io::dfs::DfsClient;
use hdfs_io::file_status::{FileStatus, FileType};
use serde_json::{json, Value};

use crate::config::{is_kerberos, node_keytab, node_principal, HdfsSettings};
use crate::metrics::LocalizeMetrics;
use crate::shared::{Shared, Stopper};
use nm_core::ids::ContainerId;
use nm_core::localization::LocalizationError;

/// Write buffer between the block reader and the temp file.
const WRITE_BUFFER: usize = 256 * 1024;
/// HDFS users the reader keeps a client for (the agent's own one included); one more
/// replaces the least recently used.
pub const MAX_USER_CLIENTS: usize = 8;

/// Why a localization failed. [`kind`](LocalizeError::kind) is the reply's `kind` field.
#[derive(Debug, thiserror::Error)]
pub enum LocalizeError {
    #[error("HDFS not configured: fs.defaultFS is {default_fs}; set it to hdfs://NAMENODE:PORT in core-site.xml (or --set fs.defaultFS=...) and restart the agent")]
    NotConfigured { default_fs: String },
    #[error("busy: {depth} localizations already wait for the HDFS reader; retry later")]
    Busy { depth: usize },
    #[error("the HDFS reader thread is not running")]
    ReaderGone,
    #[error("bad localize request: {0}")]
    BadRequest(String),
    #[error("{source_uri} is not on this node's file system {default_fs}")]
    OtherFileSystem {
        source_uri: String,
        default_fs: String,
    },
    #[error("FileNotFound: {path} does not exist in HDFS")]
    FileNotFound { path: String },
    #[error("{path} is a {what} in HDFS, not a file (only files are localized)")]
    NotAFile { path: String, what: &'static str },
    #[error("checksum failure on every replica: {0}")]
    Checksum(hdfs_io::Error),
    #[error("block unreadable: {0}")]
    BlockMissing(hdfs_io::Error),
    #[error("NameNode unreachable: {0}")]
    NameNodeUnreachable(hdfs_io::Error),
    #[error("HDFS: {0}")]
    Hdfs(hdfs_io::Error),
    #[error("destination {dest} is outside the node's local dirs ({dirs})")]
    DestinationNotAllowed { dest: PathBuf, dirs: String },
    #[error("destination directory {0} does not exist")]
    DestinationDirMissing(PathBuf),
    #[error("destination {0} already exists (--overwrite replaces it)")]
    DestinationExists(PathBuf),
    #[error("destination {0} is a directory")]
    DestinationIsDir(PathBuf),
    #[error("not enough space in {dir}: {need} bytes needed, {available} available")]
    NoSpace {
        dir: PathBuf,
        need: u64,
        available: u64,
    },
    #[error(
        "{path} changed during localization: getFileInfo said {expected} bytes, {got} were read"
    )]
    Changed {
        path: String,
        expected: u64,
        got: u64,
    },
    #[error("{context}: {source}")]
    Local {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the agent is stopping")]
    Stopping,
    /// Kerberized cluster, APPLICATION/PRIVATE resource: the application gave no token to read
    /// it with (Java's localizer fails with the same SASL message).
    #[error("{user} cannot read {path}: the application's credentials hold no HDFS_DELEGATION_TOKEN for the NameNode ({services}); the NameNode is Kerberized and the agent does not read an application's resources with its own login (Client cannot authenticate via:[TOKEN, KERBEROS])")]
    NoDelegationToken {
        user: String,
        path: String,
        services: String,
    },
    /// The launch context's tokens are not a Credentials file.
    #[error("the application's credentials (the launch context's tokens) cannot be read: {0}")]
    BadCredentials(hadoop_wire::token::TokenError),
    /// The NameNode refused the application's delegation token (cancelled, expired).
    #[error("{0}")]
    TokenRefused(hdfs_io::Error),
    /// A localization rule refused the source (changed timestamp, not public).
    #[error(transparent)]
    Resource(#[from] LocalizationError),
}

impl LocalizeError {
    /// A stable name for scripts (`"kind"` in the reply).
    pub fn kind(&self) -> &'static str {
        match self {
            LocalizeError::NotConfigured { .. } => "not_configured",
            LocalizeError::Busy { .. } => "busy",
            LocalizeError::ReaderGone => "reader_gone",
            LocalizeError::BadRequest(_) => "bad_request",
            LocalizeError::OtherFileSystem { .. } => "other_filesystem",
            LocalizeError::FileNotFound { .. } => "file_not_found",
            LocalizeError::NotAFile { .. } => "not_a_file",
            LocalizeError::Checksum(_) => "checksum",
            LocalizeError::BlockMissing(_) => "block_missing",
            LocalizeError::NameNodeUnreachable(_) => "namenode_unreachable",
            LocalizeError::Hdfs(_) => "hdfs",
            LocalizeError::DestinationNotAllowed { .. } => "dest_not_allowed",
            LocalizeError::DestinationDirMissing(_) => "dest_dir_missing",
            LocalizeError::DestinationExists(_) => "dest_exists",
            LocalizeError::DestinationIsDir(_) => "dest_is_dir",
            LocalizeError::NoSpace { .. } => "no_space",
            LocalizeError::Changed { .. } => "changed",
            LocalizeError::Local { .. } => "local_io",
            LocalizeError::Stopping => "stopping",
            LocalizeError::NoDelegationToken { .. } => "no_delegation_token",
            LocalizeError::BadCredentials(_) => "bad_credentials",
            LocalizeError::TokenRefused(_) => "token_refused",
            LocalizeError::Resource(_) => "resource",
        }
    }

    /// The control socket's error reply.
    pub fn to_reply(&self) -> Value {
        json!({"ok": false, "error": self.to_string(), "kind": self.kind()})
    }

    fn local(context: impl Into<String>, source: std::io::Error) -> Self {
        LocalizeError::Local {
            context: context.into(),
            source,
        }
    }

    /// Sorts an `hdfs_io` error by what the operator should look at.
    fn from_hdfs(e: hdfs_io::Error, path: &str) -> Self {
        use hdfs_io::Error as E;
        if e.is_file_not_found() {
            return LocalizeError::FileNotFound {
                path: path.to_string(),
            };
        }
        match &e {
            E::NotAFile { .. } => LocalizeError::NotAFile {
                path: path.to_string(),
                what: "directory",
            },
            E::NoNameNode { .. } | E::Connection { .. } => LocalizeError::NameNodeUnreachable(e),
            E::TokenRefused { .. } => LocalizeError::TokenRefused(e),
            // every replica failed, at least one on a checksum (`tried` says why each one did)
            E::BlockMissing {
                checksum_failures, ..
            } if *checksum_failures > 0 => LocalizeError::Checksum(e),
            E::BlockMissing { .. } => LocalizeError::BlockMissing(e),
            _ => LocalizeError::Hdfs(e),
        }
    }
}

/// One localization, as parsed from the control socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub container: ContainerId,
    /// The source as given (`hdfs:///p`, `hdfs://nn:8020/p` or `/p`).
    pub source: String,
    /// The absolute HDFS path.
    pub path: String,
    /// The absolute local destination.
    pub dest: PathBuf,
    /// Replace an existing destination.
    pub overwrite: bool,
}

impl Request {
    /// `{"op":"localize","container":ID,"source":URI,"dest":PATH,"overwrite":false}`; `source`
    /// must be on `default_fs`.
    pub fn from_json(v: &Value, default_fs: &str) -> Result<Request, LocalizeError> {
        let s = |k: &str| {
            v[k].as_str()
                .ok_or_else(|| LocalizeError::BadRequest(format!("missing \"{k}\"")))
        };
        let container: ContainerId = s("container")?
            .parse()
            .map_err(|e| LocalizeError::BadRequest(format!("{e}")))?;
        let source = s("source")?.to_string();
        let path = hdfs_path(&source, default_fs)?;
        let dest = PathBuf::from(s("dest")?);
        if !dest.is_absolute() {
            return Err(LocalizeError::BadRequest(format!(
                "destination {} is not an absolute path",
                dest.display()
            )));
        }
        if dest.file_name().is_none() || s("dest")?.ends_with('/') {
            return Err(LocalizeError::BadRequest(format!(
                "destination {} names no file",
                dest.display()
            )));
        }
        let overwrite = match &v["overwrite"] {
            Value::Null => false,
            Value::Bool(b) => *b,
            _ => {
                return Err(LocalizeError::BadRequest(
                    "\"overwrite\" must be true or false".into(),
                ))
            }
        };
        Ok(Request {
            container,
            source,
            path,
            dest,
            overwrite,
        })
    }
}

/// The authority of an `hdfs://` URI, lower-cased, with `:8020` added when no port is given.
fn authority(uri: &str) -> Option<String> {
    let rest = uri.get(7..).filter(|_| {
        uri.get(..7)
            .is_some_and(|p| p.eq_ignore_ascii_case("hdfs://"))
    })?;
    let a = rest.split(['/', '?', '#']).next().unwrap_or("");
    let a = a.to_ascii_lowercase();
    if a.is_empty() || a.contains(':') || a.contains('[') {
        Some(a)
    } else {
        Some(format!("{a}:{}", hdfs_io::namenode::DEFAULT_PORT))
    }
}

/// The absolute HDFS path of `source` on the file system `default_fs`.
pub fn hdfs_path(source: &str, default_fs: &str) -> Result<String, LocalizeError> {
    let path = if source.starts_with('/') {
        source
    } else if let Some(src_auth) = authority(source) {
        let rest = &source[7..];
        let p = &rest[rest.find('/').unwrap_or(rest.len())..];
        if !src_auth.is_empty() && authority(default_fs).as_deref() != Some(src_auth.as_str()) {
            return Err(LocalizeError::OtherFileSystem {
                source_uri: source.to_string(),
                default_fs: default_fs.to_string(),
            });
        }
        p
    } else {
        return Err(LocalizeError::BadRequest(format!(
            "source {source:?}: expected hdfs:///PATH, hdfs://NAMENODE/PATH or /PATH"
        )));
    };
    if path.is_empty() || !path.starts_with('/') {
        return Err(LocalizeError::BadRequest(format!(
            "source {source:?} names no path"
        )));
    }
    if path.contains(['?', '#']) || path.contains('\0') {
        return Err(LocalizeError::BadRequest(format!(
            "source {source:?}: queries, fragments and NUL are not part of an HDFS path"
        )));
    }
    if path.split('/').any(|c| c == "." || c == "..") {
        return Err(LocalizeError::BadRequest(format!(
            "source {source:?}: '.' and '..' are not allowed in HDFS paths"
        )));
    }
    Ok(path.to_string())
}

/// A finished localization.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Localized {
    pub bytes: u64,
    pub blocks: u64,
    pub replica_failures: u64,
    pub checksum_failures: u64,
    /// The destination as placed (its directory with symlinks resolved).
    pub dest: PathBuf,
}

/// A queued request: which control connection waits for the answer.
#[derive(Debug)]
pub struct Job {
    pub conn: u64,
    pub req: Request,
    pub queued: Instant,
}

/// A reply for a control connection.
#[derive(Debug)]
pub struct Done {
    pub conn: u64,
    pub reply: Value,
}

/// What the reader thread is asked to do.
#[derive(Debug)]
enum Work {
    /// A control-socket request; answered on the queue's `Done` channel.
    Control(Job),
    /// A container resource; answered on its own channel.
    Fetch(FetchRequest, Sender<Result<Fetched, LocalizeError>>),
}

/// One HDFS file for container localization.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchRequest {
    /// The resource's URL as Java prints it (for messages).
    pub url: nm_core::localization::ResourceUrl,
    /// The absolute HDFS path.
    pub path: String,
    /// The HDFS user to read as (the application submitter); `None`: the agent's own user
    /// (PUBLIC resources, as Java's NM reads them).
    pub user: Option<String>,
    /// The source's modification time must equal this (ms).
    pub timestamp: i64,
    /// Check that everyone may read the file: `o+r` on it, `o+x` on every parent directory.
    pub public: bool,
    /// The local file to create (it must not exist; its directory must).
    pub dest: PathBuf,
    /// The application's Credentials (the launch context's `tokens`) for a non-PUBLIC fetch;
    /// used only on a Kerberized cluster (see the module docs).
    pub tokens: Option<Arc<[u8]>>,
}

/// A finished fetch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    pub bytes: u64,
    /// The source's modification time (ms).
    pub modification_time: u64,
}

/// A handle for container localization to the HDFS reader: clone it freely, call it from any
/// thread but the reader's own.
#[derive(Debug, Clone)]
pub struct HdfsFetcher {
    tx: SyncSender<Work>,
    default_fs: String,
}

impl HdfsFetcher {
    /// `fs.defaultFS` of the reader.
    pub fn default_fs(&self) -> &str {
        &self.default_fs
    }

    /// Queues `req` (waiting while the queue is full) and waits for the reader's answer. On
    /// failure `req.dest` does not exist.
    pub fn fetch(&self, req: FetchRequest) -> Result<Fetched, LocalizeError> {
        let (tx, rx) = mpsc::channel();
        self.tx
            .send(Work::Fetch(req, tx))
            .map_err(|_| LocalizeError::ReaderGone)?;
        rx.recv().map_err(|_| LocalizeError::ReaderGone)?
    }
}

/// The control socket's end: submit jobs, collect replies.
#[derive(Debug)]
pub struct Queue {
    tx: SyncSender<Work>,
    done: Receiver<Done>,
    depth: usize,
}

/// The reader thread's end.
#[derive(Debug)]
pub struct ReaderEnd {
    rx: Receiver<Work>,
    done: Sender<Done>,
}

/// A queue of `depth` waiting jobs. Replies travel back unbounded, but there is at most one
/// per job accepted.
pub fn queue(depth: usize) -> (Queue, ReaderEnd) {
    let (tx, rx) = mpsc::sync_channel(depth);
    let (dtx, drx) = mpsc::channel();
    (
        Queue {
            tx,
            done: drx,
            depth,
        },
        ReaderEnd { rx, done: dtx },
    )
}

impl Queue {
    /// Queues `job` for the reader; [`LocalizeError::Busy`] at once when `depth` jobs wait.
    pub fn submit(&self, job: Job, m: &LocalizeMetrics) -> Result<(), LocalizeError> {
        m.pending.fetch_add(1, Relaxed);
        match self.tx.try_send(Work::Control(job)) {
            Ok(()) => Ok(()),
            Err(e) => {
                m.pending.fetch_sub(1, Relaxed);
                Err(match e {
                    TrySendError::Full(_) => LocalizeError::Busy { depth: self.depth },
                    TrySendError::Disconnected(_) => LocalizeError::ReaderGone,
                })
            }
        }
    }

    /// A finished job's reply, if one is ready.
    pub fn try_done(&self) -> Option<Done> {
        self.done.try_recv().ok()
    }

    pub fn depth(&self) -> usize {
        self.depth
    }

    /// A handle for container localization (`default_fs` as in [`HdfsSettings`]).
    pub fn fetcher(&self, default_fs: &str) -> HdfsFetcher {
        HdfsFetcher {
            tx: self.tx.clone(),
            default_fs: default_fs.to_string(),
        }
    }
}

/// Which client serves a fetch: the HDFS user, and on a Kerberized cluster the identifier of
/// the delegation token it authenticates with (`None`: the agent's own login).
#[derive(Debug, Clone, PartialEq, Eq)]
struct ClientKey {
    user: String,
    token: Option<Vec<u8>>,
}

/// The reader's `DfsClient`s, one per HDFS user (and token, when Kerberized), built on first
/// use (again after a failed build), the least recently used dropped beyond
/// [`MAX_USER_CLIENTS`].
struct Clients {
    conf: Configuration,
    placement: hdfs_io::namenode::NameNodeConfig,
    own_user: String,
    /// `hadoop.security.authentication=kerberos`.
    kerberos: bool,
    /// Why the agent's own login cannot be configured ([`node_keytab`]); its client is then
    /// not built (an application's token clients are).
    own_login_error: Option<String>,
    /// Most recently used last.
    clients: Vec<(ClientKey, DfsClient)>,
}

impl Clients {
    fn new(settings: &HdfsSettings, cpu: Option<u32>) -> Clients {
        let kerberos = is_kerberos(&settings.conf);
        let (keytab, own_login_error) = match kerberos.then(|| node_keytab(&settings.conf)) {
            Some(Ok(k)) => (k, None),
            Some(Err(e)) => (None, Some(e.to_string())),
            None => (None, None),
        };
        // The NameNode connections' reader threads sit on this thread's CPU, named after it.
        let placement = hdfs_io::namenode::NameNodeConfig {
            reader_thread_name: Some(
                cpu.map_or_else(|| "hp-hdfsrx".into(), |c| format!("hp-hdfsrx-{c}")),
            ),
            reader_cpu: cpu,
            // the agent's own login (from_conf_with takes only the client principal and the
            // keytab from here)
            kerberos: kerberos.then(|| hdfs_io::namenode::NameNodeKerberos {
                server_principal: String::new(),
                client_principal: node_principal(
                    &settings.conf,
                    &ipc::kerberos::server_host_name(std::net::Ipv4Addr::UNSPECIFIED.into()),
                ),
                keytab,
            }),
            ..Default::default()
        };
        Clients {
            conf: settings.conf.clone(),
            own_user: placement.user.clone(),
            kerberos,
            own_login_error,
            placement,
            clients: Vec::new(),
        }
    }

    /// The client reading `path` as `user` (`None`: the agent's own user and login); on a
    /// Kerberized cluster a user's client authenticates with the delegation token in `tokens`.
    fn get(
        &mut self,
        user: Option<&str>,
        tokens: Option<&[u8]>,
        path: &str,
    ) -> Result<&DfsClient, LocalizeError> {
        let mut creds = None;
        let key = match user {
            Some(u) if self.kerberos => {
                let c = app_credentials(tokens)?;
                let token = self.delegation_token(&c, u, path)?;
                creds = Some(Arc::new(c));
                ClientKey {
                    user: u.to_string(),
                    token: Some(token),
                }
            }
            u => ClientKey {
                user: u.unwrap_or(&self.own_user).to_string(),
                token: None,
            },
        };
        if let Some(i) = self.clients.iter().position(|(k, _)| *k == key) {
            let c = self.clients.remove(i);
            self.clients.push(c);
        } else {
            let mut cfg = hdfs_io::namenode::NameNodeConfig {
                user: key.user.clone(),
                ..self.placement.clone()
            };
            if creds.is_some() {
                // The application's token: the NameNode offers TOKEN before KERBEROS, so the
                // token is what authenticates, and a refused token fails the call (the SASL
                // client takes the first mechanism offered that it holds credentials for).
                // The agent's principal is not named for these clients.
                cfg.credentials = creds;
                cfg.kerberos = None;
            } else if let Some(e) = &self.own_login_error {
                return Err(LocalizeError::Hdfs(hdfs_io::Error::Config(e.clone())));
            }
            let c = DfsClient::from_conf_with(&self.conf, cfg)
                .map_err(|e| LocalizeError::from_hdfs(e, path))?;
            if self.clients.len() >= MAX_USER_CLIENTS {
                self.clients.remove(0);
            }
            self.clients.push((key, c));
        }
        Ok(&self.clients[self.clients.len() - 1].1)
    }

    /// The identifier of the `HDFS_DELEGATION_TOKEN` in `creds` for one of the configured
    /// NameNodes (`ip:port`) or for a nameservice (`ha-hdfs:…`).
    fn delegation_token(
        &self,
        creds: &hadoop_wire::token::Credentials,
        user: &str,
        path: &str,
    ) -> Result<Vec<u8>, LocalizeError> {
        let (eps, _) = hdfs_io::namenode::endpoints_from_conf(&self.conf)
            .map_err(|e| LocalizeError::from_hdfs(e, path))?;
        let found = creds.tokens.iter().map(|(_, t)| t).find(|t| {
            t.kind == hadoop_wire::token::KIND_HDFS_DELEGATION
                && (t.service.starts_with(hdfs_io::tokens::HA_DT_SERVICE_PREFIX)
                    || eps
                        .iter()
                        .any(|ep| t.service == hdfs_io::tokens::token_service(ep.addr)))
        });
        match found {
            Some(t) => Ok(t.identifier.clone()),
            None => Err(LocalizeError::NoDelegationToken {
                user: user.to_string(),
                path: path.to_string(),
                services: eps
                    .iter()
                    .map(|ep| hdfs_io::tokens::token_service(ep.addr))
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
        }
    }
}

/// The launch context's tokens as Credentials (none: empty).
fn app_credentials(
    tokens: Option<&[u8]>,
) -> Result<hadoop_wire::token::Credentials, LocalizeError> {
    match tokens {
        Some(b) if !b.is_empty() => {
            hadoop_wire::token::Credentials::read(b).map_err(LocalizeError::BadCredentials)
        }
        _ => Ok(hadoop_wire::token::Credentials::new()),
    }
}

/// The HDFS-reader thread's body: serves jobs until every sender is gone or the agent stops.
/// Clients are built on first use (again on the next job if building failed, e.g. an
/// unresolvable NameNode host).
pub fn run_reader(
    end: ReaderEnd,
    settings: HdfsSettings,
    local_dirs: Vec<PathBuf>,
    shared: Arc<Shared>,
    cpu: Option<u32>,
) {
    let m = &shared.metrics.localize;
    m.reader_running.store(1, Relaxed);
    let mut clients = Clients::new(&settings, cpu);
    match clients.get(None, None, "/") {
        Ok(_) => tracing::info!(
            "HDFS reader for {} ready ({} localizations may wait)",
            settings.default_fs,
            settings.queue_depth
        ),
        Err(e) => tracing::warn!(
            "HDFS reader: no client for {} yet ({e}); retrying on the first request",
            settings.default_fs
        ),
    }
    let mut seq = 0u64;
    loop {
        let work = match end.rx.recv_timeout(Duration::from_millis(200)) {
            Ok(j) => j,
            Err(RecvTimeoutError::Timeout) => {
                if shared.stop.is_stopped() {
                    break;
                }
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => break,
        };
        seq += 1;
        let job = match work {
            Work::Control(job) => job,
            Work::Fetch(req, reply) => {
                m.active.store(1, Relaxed);
                let t0 = Instant::now();
                let result = if shared.stop.is_stopped() {
                    Err(LocalizeError::Stopping)
                } else {
                    match clients.get(req.user.as_deref(), req.tokens.as_deref(), &req.path) {
                        Ok(c) => fetch(c, &req, &shared.stop, seq),
                        Err(e) => Err(e),
                    }
                };
                m.active.store(0, Relaxed);
                match &result {
                    Ok(f) => {
                        m.ok.fetch_add(1, Relaxed);
                        m.bytes.fetch_add(f.bytes, Relaxed);
                        tracing::info!(
                            "fetched {} as {} to {}: {} bytes in {:?}",
                            req.url,
                            req.user.as_deref().unwrap_or(&clients.own_user),
                            req.dest.display(),
                            f.bytes,
                            t0.elapsed()
                        );
                    }
                    Err(e) => {
                        m.failed.fetch_add(1, Relaxed);
                        tracing::warn!("fetching {} failed: {e}", req.url);
                    }
                }
                // the caller may have given up; nothing to do then
                let _ = reply.send(result);
                continue;
            }
        };
        m.active.store(1, Relaxed);
        let t0 = Instant::now();
        let queued_ms = t0.duration_since(job.queued).as_secs_f64() * 1e3;
        let result = if shared.stop.is_stopped() {
            Err(LocalizeError::Stopping)
        } else {
            match clients.get(None, None, &job.req.path) {
                Ok(c) => localize(c, &job.req, &local_dirs, &shared.stop, seq),
                Err(e) => Err(e),
            }
        };
        let elapsed = t0.elapsed();
        let r = &job.req;
        let reply = match result {
            Ok(done) => {
                m.ok.fetch_add(1, Relaxed);
                m.bytes.fetch_add(done.bytes, Relaxed);
                tracing::info!(
                    "localized {} for {} to {}: {} bytes in {elapsed:?}",
                    r.source,
                    r.container,
                    done.dest.display(),
                    done.bytes
                );
                json!({
                    "ok": true,
                    "container": r.container.to_string(),
                    "source": r.source,
                    "dest": done.dest.display().to_string(),
                    "bytes": done.bytes,
                    "blocks": done.blocks,
                    "elapsed_ms": round3(elapsed.as_secs_f64() * 1e3),
                    "queued_ms": round3(queued_ms),
                    "replica_failures": done.replica_failures,
                    "checksum_failures": done.checksum_failures,
                })
            }
            Err(e) => {
                m.failed.fetch_add(1, Relaxed);
                tracing::warn!(
                    "localizing {} for {} to {} failed after {elapsed:?}: {e}",
                    r.source,
                    r.container,
                    r.dest.display()
                );
                let mut v = e.to_reply();
                v["container"] = json!(r.container.to_string());
                v["elapsed_ms"] = json!(round3(elapsed.as_secs_f64() * 1e3));
                v
            }
        };
        m.active.store(0, Relaxed);
        m.pending.fetch_sub(1, Relaxed);
        if end
            .done
            .send(Done {
                conn: job.conn,
                reply,
            })
            .is_err()
        {
            break;
        }
    }
    m.reader_running.store(0, Relaxed);
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Removes the temp file unless it was placed.
struct TempFile {
    path: PathBuf,
    armed: bool,
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if self.armed {
            if let Err(e) = std::fs::remove_file(&self.path) {
                tracing::warn!("removing {}: {e}", self.path.display());
            }
        }
    }
}

/// The temp file's writer: counts bytes and fails the read once the agent stops (the block
/// reader then gives up at once).
struct Sink<'a> {
    out: BufWriter<File>,
    stop: &'a Stopper,
}

impl Write for Sink<'_> {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        if self.stop.is_stopped() {
            return Err(std::io::Error::other("the agent is stopping"));
        }
        self.out.write(b)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

static TEMP_SEQ: AtomicU64 = AtomicU64::new(0);

/// The destination's directory, with symlinks resolved, checked against the local dirs.
fn check_destination(
    dest: &Path,
    local_dirs: &[PathBuf],
    overwrite: bool,
) -> Result<PathBuf, LocalizeError> {
    let (Some(dir), Some(name)) = (dest.parent(), dest.file_name()) else {
        return Err(LocalizeError::BadRequest(format!(
            "destination {} names no file",
            dest.display()
        )));
    };
    let dir = match dir.canonicalize() {
        Ok(d) if d.is_dir() => d,
        Ok(_) => {
            return Err(LocalizeError::DestinationDirMissing(dir.to_path_buf()));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(LocalizeError::DestinationDirMissing(dir.to_path_buf()));
        }
        Err(e) => return Err(LocalizeError::local(format!("{}", dir.display()), e)),
    };
    let allowed = local_dirs
        .iter()
        .filter_map(|d| d.canonicalize().ok())
        .any(|d| dir.starts_with(&d));
    if !allowed {
        return Err(LocalizeError::DestinationNotAllowed {
            dest: dest.to_path_buf(),
            dirs: local_dirs
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(","),
        });
    }
    let dest = dir.join(name);
    match std::fs::symlink_metadata(&dest) {
        Ok(md) if md.is_dir() => return Err(LocalizeError::DestinationIsDir(dest)),
        Ok(_) if !overwrite => return Err(LocalizeError::DestinationExists(dest)),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(LocalizeError::local(format!("{}", dest.display()), e)),
    }
    Ok(dest)
}

/// Copies `req.path` to `req.dest` (see the module docs). Nothing is left behind on failure.
pub fn localize(
    client: &DfsClient,
    req: &Request,
    local_dirs: &[PathBuf],
    stop: &Stopper,
    seq: u64,
) -> Result<Localized, LocalizeError> {
    let dest = check_destination(&req.dest, local_dirs, req.overwrite)?;
    let dir = dest.parent().unwrap_or(Path::new("/")).to_path_buf();
    let st = stat_file(client, &req.path)?;
    if let Ok(available) = fs4::available_space(&dir) {
        if available < st.length {
            return Err(LocalizeError::NoSpace {
                dir,
                need: st.length,
                available,
            });
        }
    }
    let name = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp_path = dir.join(format!(
        ".{name}.hotpath-{}-{seq}-{}.tmp",
        std::process::id(),
        TEMP_SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let (mut tmp, stats) = read_into_new_file(client, &req.path, st.length, &tmp_path, stop)?;
    if req.overwrite {
        std::fs::rename(&tmp.path, &dest).map_err(|e| {
            LocalizeError::local(
                format!("renaming {} to {}", tmp.path.display(), dest.display()),
                e,
            )
        })?;
        tmp.armed = false;
    } else {
        // link(2) fails if the destination appeared meanwhile: never replaces
        std::fs::hard_link(&tmp.path, &dest).map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                LocalizeError::DestinationExists(dest.clone())
            } else {
                LocalizeError::local(
                    format!("linking {} to {}", tmp.path.display(), dest.display()),
                    e,
                )
            }
        })?;
        // the temp name goes (the drop guard unlinks it); the destination keeps the data
    }
    drop(tmp);
    File::open(&dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| LocalizeError::local(format!("fsync of directory {}", dir.display()), e))?;
    Ok(Localized {
        bytes: stats.bytes,
        blocks: stats.blocks,
        replica_failures: stats.replica_failures,
        checksum_failures: stats.checksum_failures,
        dest,
    })
}

/// `getFileInfo` of an HDFS path that must be a plain file.
fn stat_file(client: &DfsClient, path: &str) -> Result<FileStatus, LocalizeError> {
    let st = client
        .stat(path)
        .map_err(|e| LocalizeError::from_hdfs(e, path))?;
    let what = match st.file_type {
        FileType::File => return Ok(st),
        FileType::Dir => "directory",
        FileType::Symlink => "symlink",
    };
    Err(LocalizeError::NotAFile {
        path: path.to_string(),
        what,
    })
}

/// Reads HDFS file `src` (of `expected` bytes by its status) into a new local file at `path`
/// (`create_new`: never an existing one), CRC-verified, and fsyncs it. Returns the file's
/// guard, still armed (it unlinks the file when dropped), and the read's figures; on any
/// failure the file is gone.
fn read_into_new_file(
    client: &DfsClient,
    src: &str,
    expected: u64,
    path: &Path,
    stop: &Stopper,
) -> Result<(TempFile, hdfs_io::dfs::ReadStats), LocalizeError> {
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| LocalizeError::local(format!("creating {}", path.display()), e))?;
    let guard = TempFile {
        path: path.to_path_buf(),
        armed: true,
    };
    let mut sink = Sink {
        out: BufWriter::with_capacity(WRITE_BUFFER, file),
        stop,
    };
    let stats = match client.read(src, 0, None, &mut sink) {
        Ok(s) => s,
        Err(_) if stop.is_stopped() => return Err(LocalizeError::Stopping),
        Err(hdfs_io::Error::Sink { source }) => {
            return Err(LocalizeError::local(
                format!("writing {}", path.display()),
                source,
            ))
        }
        Err(e) => return Err(LocalizeError::from_hdfs(e, src)),
    };
    if stats.bytes != expected {
        return Err(LocalizeError::Changed {
            path: src.to_string(),
            expected,
            got: stats.bytes,
        });
    }
    let file = sink
        .out
        .into_inner()
        .map_err(|e| LocalizeError::local(format!("writing {}", path.display()), e.into_error()))?;
    file.sync_all()
        .map_err(|e| LocalizeError::local(format!("fsync {}", path.display()), e))?;
    Ok((guard, stats))
}

/// A container resource from HDFS into `req.dest` (see [`FetchRequest`]): stat, timestamp
/// and public checks, CRC-verified read, fsync. Nothing is left behind on failure.
pub fn fetch(
    client: &DfsClient,
    req: &FetchRequest,
    stop: &Stopper,
    seq: u64,
) -> Result<Fetched, LocalizeError> {
    let st = stat_file(client, &req.path)?;
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    nm_core::localization::check_timestamp(
        &req.url,
        req.timestamp,
        st.modification_time as i64,
        now_ms,
    )?;
    if req.public {
        // everyone reads the file and traverses every directory above it
        let mut public = st.permission & 0o004 != 0;
        for dir in req.url.ancestors() {
            if !public {
                break;
            }
            let d = client
                .stat(dir)
                .map_err(|e| LocalizeError::from_hdfs(e, dir))?;
            public = d.permission & 0o001 != 0;
        }
        if !public {
            return Err(LocalizationError::NotPublic {
                path: req.url.to_string(),
            }
            .into());
        }
    }
    let dir = req.dest.parent().unwrap_or(Path::new("/")).to_path_buf();
    if let Ok(available) = fs4::available_space(&dir) {
        if available < st.length {
            return Err(LocalizeError::NoSpace {
                dir,
                need: st.length,
                available,
            });
        }
    }
    let (mut placed, stats) = read_into_new_file(client, &req.path, st.length, &req.dest, stop)?;
    placed.armed = false;
    tracing::debug!("fetch #{seq}: {} bytes of {}", stats.bytes, req.path);
    Ok(Fetched {
        bytes: stats.bytes,
        modification_time: st.modification_time,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const CID: &str = "container_1700000000000_0001_01_000002";

    #[test]
    fn sources_on_the_default_file_system() {
        let fs = "hdfs://nn.example.com:8020";
        assert_eq!(hdfs_path("hdfs:///a/b", fs).unwrap(), "/a/b");
        assert_eq!(hdfs_path("/a/b", fs).unwrap(), "/a/b");
        assert_eq!(hdfs_path("hdfs://nn.example.com:8020/a", fs).unwrap(), "/a");
        assert_eq!(hdfs_path("HDFS://NN.example.com/a", fs).unwrap(), "/a");
        assert!(matches!(
            hdfs_path("hdfs://other:8020/a", fs),
            Err(LocalizeError::OtherFileSystem { .. })
        ));
        for bad in [
            "s3a://b/k",
            "a/b",
            "hdfs://nn.example.com:8020",
            "/a/../b",
            "/a?x",
        ] {
            let e = hdfs_path(bad, fs).unwrap_err();
            assert_eq!(e.kind(), "bad_request", "{bad}: {e}");
        }
    }

    #[test]
    fn requests_are_checked_before_queueing() {
        let fs = "hdfs://127.0.0.1:9000";
        let ok = json!({"container": CID, "source": "hdfs:///x", "dest": "/tmp/d/x"});
        let r = Request::from_json(&ok, fs).unwrap();
        assert_eq!(r.path, "/x");
        assert!(!r.overwrite);
        for (v, what) in [
            (json!({"source": "/x", "dest": "/d/x"}), "container"),
            (
                json!({"container": "c_1", "source": "/x", "dest": "/d/x"}),
                "container",
            ),
            (json!({"container": CID, "dest": "/d/x"}), "source"),
            (
                json!({"container": CID, "source": "/x", "dest": "d/x"}),
                "absolute",
            ),
            (
                json!({"container": CID, "source": "/x", "dest": "/d/"}),
                "names no file",
            ),
            (
                json!({"container": CID, "source": "/x", "dest": "/d/x", "overwrite": 1}),
                "overwrite",
            ),
        ] {
            let e = Request::from_json(&v, fs).unwrap_err();
            assert_eq!(e.kind(), "bad_request");
            assert!(e.to_string().contains(what), "{e}");
        }
    }

    #[test]
    fn a_full_queue_refuses_at_once_and_a_gone_reader_is_reported() {
        let m = LocalizeMetrics::default();
        let (q, end) = queue(2);
        let job = || Job {
            conn: 1,
            req: Request::from_json(
                &json!({"container": CID, "source": "/x", "dest": "/d/x"}),
                "hdfs://h:1",
            )
            .unwrap(),
            queued: Instant::now(),
        };
        q.submit(job(), &m).unwrap();
        q.submit(job(), &m).unwrap();
        let e = q.submit(job(), &m).unwrap_err();
        assert_eq!(e.kind(), "busy");
        assert!(
            e.to_string().contains("2 localizations already wait"),
            "{e}"
        );
        assert_eq!(m.pending.load(Relaxed), 2);
        // the reader takes one: room for one more
        let Ok(Work::Control(first)) = end.rx.try_recv() else {
            panic!("a control job first")
        };
        assert_eq!(first.conn, 1);
        q.submit(job(), &m).unwrap();
        drop(end);
        assert_eq!(q.submit(job(), &m).unwrap_err().kind(), "reader_gone");
    }

    #[test]
    fn destination_rules() {
        let d = tempfile::tempdir().unwrap();
        let local = d.path().join("local");
        std::fs::create_dir_all(local.join("app")).unwrap();
        let dirs = vec![local.clone()];
        let ok = check_destination(&local.join("app/f"), &dirs, false).unwrap();
        assert_eq!(ok, local.canonicalize().unwrap().join("app/f"));
        let e = check_destination(&d.path().join("f"), &dirs, false).unwrap_err();
        assert_eq!(e.kind(), "dest_not_allowed");
        // a symlink out of the local dirs does not get around it
        std::os::unix::fs::symlink(d.path(), local.join("out")).unwrap();
        let e = check_destination(&local.join("out/f"), &dirs, false).unwrap_err();
        assert_eq!(e.kind(), "dest_not_allowed");
        let e = check_destination(&local.join("nope/f"), &dirs, false).unwrap_err();
        assert_eq!(e.kind(), "dest_dir_missing");
        std::fs::write(local.join("app/f"), b"x").unwrap();
        let e = check_destination(&local.join("app/f"), &dirs, false).unwrap_err();
        assert_eq!(e.kind(), "dest_exists");
        assert!(check_destination(&local.join("app/f"), &dirs, true).is_ok());
        let e = check_destination(&local.join("app"), &dirs, true).unwrap_err();
        assert_eq!(e.kind(), "dest_is_dir");
    }
}
