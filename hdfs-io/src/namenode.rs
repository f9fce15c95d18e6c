//! The NameNode client: `ClientProtocol` calls over [`ipc::client::Client`], with Hadoop's
//! exceptions as typed errors, stateId tracking and observer reads.
//!
//! - Requests are hand-encoded from borrowed arguments (a path is one length-delimited field;
//!   prost would need an owned `String`); responses are read in place ([`FileStatusView`],
//!   [`LocatedBlocksBuf`]).
//! - **Addresses**: `fs.defaultFS` = `hdfs://host:port` names one NameNode;
//!   `hdfs://<nameservice>` names the ones of `dfs.ha.namenodes.<nameservice>` at
//!   `dfs.namenode.rpc-address.<nameservice>.<id>`.
//! - **Roles**: with several NameNodes, each one's role is asked once (`getHAServiceState`) and
//!   again after a StandbyException or a broken connection; with observer reads on and no
//!   observer among the answers, again before a read once
//!   `dfs.client.failover.observer.probe.retry.period` (10 min) has passed (as Java's
//!   `ObserverReadProxyProvider` probes again). Writes, `msync` and `reportBadBlocks`
//!   go to the active; with `dfs.client.failover.proxy.provider.<ns>` =
//!   `…ObserverReadProxyProvider`, reads (`getFileInfo`, `getBlockLocations`) go to an observer.
//! - **stateId**: one [`StateIdCell`] per client, shared by every connection to every
//!   NameNode (each node's `ipc::client` and its direct-call pool), as Java's `ClientGSIContext`
//!   is shared by a client's proxies. Every response header's stateId is folded in (a
//!   `fetch_max`: an observer's older stateId never lowers it) and every request carries the
//!   highest seen on any connection. So a read on an observer after a write on the active
//!   carries the write's stateId, and the observer holds the call until it has applied that
//!   far (or answers RetriableException when too far behind; the read then tries the next
//!   observer, then the active): a read never sees state older than this client already saw.
//!   As Java's `ObserverReadProxyProvider`, the first read `msync`s the active, so writes by
//!   other clients before it are seen too; [`NameNodeClient::msync`] does it again on demand.
//! - **Direct calls**: with one NameNode (no HA), `getFileInfo` goes through a pool of
//!   connections each used by one caller at a time (`crate::connection`): the calling thread
//!   writes the call and reads its own response, so there is no reader thread and no condvar
//!   handoff per call, and the request and response buffers are reused. Threads calling at once
//!   use one connection each ([`NameNodeConfig::direct_calls`]; Java shares one connection).
//!   A reused connection that turns out closed is replaced and the (idempotent) call resent.
//!   With SASL (Kerberos or a token) each direct connection negotiates on its own, as the
//!   shared connection does, and at `integrity` / `privacy` wraps and unwraps its own calls
//!   with its own security layer. [`NameNodeClient::call_stats`] tells which path calls took.
//! - **Security**: `hadoop.security.authentication=kerberos` makes every NameNode connection
//!   negotiate SASL KERBEROS (GSSAPI, `ipc::kerberos` on MIT krb5) at `hadoop.rpc.protection`:
//!   the NameNode's principal is `dfs.namenode.kerberos.principal`, `_HOST` replaced per
//!   NameNode by the canonical host name of its address (as Java does); the client logs in as
//!   [`NameNodeKerberos::client_principal`] or the ticket cache's principal (`KRB5CCNAME`,
//!   `KRB5_CLIENT_KTNAME`), or, with [`NameNodeKerberos::keytab`], as that principal with its
//!   key from that keytab and its tickets in memory (`ipc::kerberos::MitGss::from_keytab`; the
//!   MIT environment is not used, so clients in one process may log in as different
//!   principals). Direct calls (above) authenticate the same way, a GSS context per connection.
//! - **Delegation tokens** (`crate::tokens`): [`NameNodeClient::get_delegation_token`],
//!   [`renew_delegation_token`](NameNodeClient::renew_delegation_token) and
//!   [`cancel_delegation_token`](NameNodeClient::cancel_delegation_token) (`ClientProtocol`, on
//!   the active). A client holding an `HDFS_DELEGATION_TOKEN` for a NameNode
//!   ([`NameNodeConfig::credentials`]; `from_conf` reads `HADOOP_TOKEN_FILE_LOCATION` and
//!   `hadoop.token.files`) authenticates to it with SASL TOKEN (DIGEST-MD5), as Java does: the
//!   NameNode offers TOKEN before KERBEROS, so no Kerberos login is needed then.
//! - **Retries**: RetriableException: the same NameNode again after a short, growing wait.
//!   StandbyException / ObserverRetryOnActiveException / a connection failure: another
//!   NameNode (reads fall back from the observer to the active; active calls re-discover the
//!   active). Anything else is returned as [`Error::Remote`].

use crate::connection::{CallFailure, ConnConfig, Connections, DirectStats, OpenFailure};
use crate::error::{Error, RemoteException, RemoteKind};
use crate::file_status::{FileStatus, FileStatusView};
use crate::tokens::{
    decode_get_delegation_token, decode_renew_delegation_token, encode_get_delegation_token,
    encode_token_request, logical_token_service, select_delegation_token, token_service,
};
use hadoop_wire::reader::{Reader, WireType};
use hadoop_wire::sasl::client::ClientAuth;
use hadoop_wire::sasl::gssapi::{replace_host, KerberosClient};
use hadoop_wire::token::{Credentials, Token};
use hadoop_wire::view::hdfs::LocatedBlocksView;
use hadoop_wire::writer::{Encode, Sink, Writer};
use ipc::client::{Client, ClientConfig, ClientError, Response, StateIdCell};
use ipc::kerberos::{canonical_host_name, LoginError, MitGss};
use std::net::{SocketAddr, ToSocketAddrs};
use std::ops::Range;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `HdfsConstants.CLIENT_NAMENODE_PROTOCOL_NAME`.
pub use hadoop_wire::hdfs::{CLIENT_PROTOCOL, CLIENT_PROTOCOL_VERSION};
/// How long reads go to the active when no observer was found (see
/// [`NameNodeConfig::observer_probe_period`]).
pub const OBSERVER_PROBE_PERIOD_KEY: &str = "dfs.client.failover.observer.probe.retry.period";
/// `hotpath.hdfs.client.direct-calls` (hotpath's own key, like the `hotpath.rm.*` ones not in
/// Hadoop's defaults table; unset means true): `false` turns [`NameNodeConfig::direct_calls`]
/// off in [`NameNodeClient::from_conf_with`] (`--set` it on the command line).
pub const DIRECT_CALLS_KEY: &str = "hotpath.hdfs.client.direct-calls";
/// Default NameNode RPC port.
pub const DEFAULT_PORT: u16 = 8020;

/// A NameNode's HA state (`HAServiceStateProto`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Unknown = 0,
    Active = 1,
    Standby = 2,
    Observer = 3,
    Initializing = 4,
}

impl Role {
    fn from_u8(v: u8) -> Role {
        match v {
            1 => Role::Active,
            2 => Role::Standby,
            3 => Role::Observer,
            4 => Role::Initializing,
            _ => Role::Unknown,
        }
    }
}

/// One NameNode to talk to.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// NameNode id (`nn1`), or the address text for a single NameNode.
    pub id: String,
    pub addr: SocketAddr,
}

/// Client settings.
#[derive(Debug, Clone)]
pub struct NameNodeConfig {
    /// `effectiveUser` of the connection (Java: the UGI's short name; `HADOOP_USER_NAME`).
    pub user: String,
    pub connect_timeout: Duration,
    pub call_timeout: Duration,
    /// Connect attempts per call before trying another NameNode.
    pub connect_attempts: u32,
    /// RetriableException retries on one NameNode.
    pub retries: u32,
    /// First wait after a RetriableException (doubles per retry).
    pub retry_wait: Duration,
    /// Send reads to observers.
    pub observer_reads: bool,
    /// With one NameNode, send `getFileInfo` over pooled connections each used by one caller
    /// at a time (see the module docs) instead of the shared `ipc::client` connection.
    /// [`DIRECT_CALLS_KEY`] = `false` turns it off in a configuration.
    pub direct_calls: bool,
    /// Name of each NameNode connection's `ipc::client` reader thread (`None`: the client's
    /// default, `hp-ipc-client`).
    pub reader_thread_name: Option<String>,
    /// CPU to pin those reader threads to, e.g. the caller's own planned CPU (`None`: unpinned).
    pub reader_cpu: Option<u32>,
    /// SASL settings of every NameNode connection (SIMPLE by default; see the module docs).
    pub auth: ClientAuth,
    /// KERBEROS: whom to expect and whom to log in as.
    pub kerberos: Option<NameNodeKerberos>,
    /// Tokens (Java: the UGI's): a connection to a NameNode authenticates with SASL TOKEN when
    /// this holds an `HDFS_DELEGATION_TOKEN` for it (`crate::tokens::select_delegation_token`),
    /// unless [`NameNodeConfig::auth`] already holds a token.
    pub credentials: Option<Arc<Credentials>>,
    /// `ha-hdfs:<nameservice>` when the NameNodes form a nameservice: the service of the tokens
    /// this client gets, and a second choice when selecting one.
    pub logical_token_service: Option<String>,
    /// With observer reads on and no NameNode known to be an observer (none answered as one
    /// when the roles were last asked: none configured, one restarting, or one that refused the
    /// connection, e.g. a delegation token it had not tailed yet), how long reads go to the
    /// active before the roles are asked again
    /// (`dfs.client.failover.observer.probe.retry.period`, Java's default 10 min).
    pub observer_probe_period: Duration,
    /// `ipc.client.connection.maxidletime` (`ipc::client::ClientConfig::max_idle`): every
    /// NameNode connection with no call in flight for this long is closed (a direct one by its
    /// pool's sweeper thread, with no further call needed), and the next call
    /// opens a new one (a new SASL negotiation: a Kerberos login's credential is acquired
    /// again). [`NameNodeClient::from_conf_with`] reads it (Hadoop's default 10 s); `None`:
    /// kept open.
    pub max_idle: Option<Duration>,
}

/// Which path a [`NameNodeClient`]'s calls took ([`NameNodeClient::call_stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallStats {
    /// Calls answered over direct connections.
    pub direct_calls: u64,
    /// Direct connections opened (each negotiated SASL on its own when SASL is on).
    pub direct_connections: u64,
    /// Of those, the ones with a security layer (`integrity` / `privacy`).
    pub direct_wrapped_connections: u64,
    /// Direct connections closed for having been idle [`NameNodeConfig::max_idle`].
    pub direct_idle_closed: u64,
    /// Calls started on the shared `ipc::client` connections (the role probes, writes, and
    /// every call when direct calls are off or there are several NameNodes).
    pub shared_calls: u64,
}

/// The Kerberos side of a NameNode client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameNodeKerberos {
    /// `dfs.namenode.kerberos.principal`, e.g. `hdfs/_HOST@EXAMPLE.COM`.
    pub server_principal: String,
    /// `user@REALM` to log in as; `None`: the ticket cache's principal.
    pub client_principal: Option<String>,
    /// The keytab holding [`NameNodeKerberos::client_principal`]'s key: the client logs in from
    /// it (once, when it is built; a keytab without the principal fails then) instead of from
    /// MIT's process-wide `KRB5CCNAME` / `KRB5_CLIENT_KTNAME`. Needs the principal.
    pub keytab: Option<PathBuf>,
}

impl Default for NameNodeConfig {
    fn default() -> Self {
        NameNodeConfig {
            user: default_user(),
            connect_timeout: Duration::from_secs(20),
            call_timeout: Duration::from_secs(60),
            connect_attempts: 3,
            retries: 5,
            retry_wait: Duration::from_millis(100),
            observer_reads: false,
            direct_calls: true,
            reader_thread_name: None,
            reader_cpu: None,
            auth: ClientAuth::default(),
            kerberos: None,
            credentials: None,
            logical_token_service: None,
            observer_probe_period: Duration::from_secs(600),
            max_idle: None,
        }
    }
}

/// `HADOOP_USER_NAME`, else `USER`, else `hotpath`: the SIMPLE-auth user as Java picks it.
pub fn default_user() -> String {
    std::env::var("HADOOP_USER_NAME")
        .or_else(|_| std::env::var("USER"))
        .unwrap_or_else(|_| "hotpath".to_string())
}

struct Node {
    ep: Endpoint,
    /// The delegation token its connections authenticate with, as Java's `formatTokenId`
    /// prints it (for the error when the NameNode refuses it).
    token: Option<String>,
    /// Without a token for it on a Kerberized cluster: the credentials that hold none (for the
    /// error when the Kerberos login tried instead fails).
    missing_token: Option<String>,
    client: Client,
    role: AtomicU8,
    /// Connections for direct calls.
    direct: Connections,
}

/// A `getBlockLocations` answer kept in its receive buffer.
pub struct LocatedBlocksBuf {
    resp: Response,
    range: Range<usize>,
}

impl LocatedBlocksBuf {
    /// The LocatedBlocksProto.
    pub fn view(&self) -> LocatedBlocksView<'_> {
        LocatedBlocksView::new(&self.resp.payload()[self.range.clone()])
    }

    /// Its bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.resp.payload()[self.range.clone()]
    }
}

impl std::fmt::Debug for LocatedBlocksBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LocatedBlocksBuf({} bytes)", self.range.len())
    }
}

/// A replica reported corrupt: the block's `ExtendedBlockProto` bytes, its offset in the file,
/// its `TokenProto` bytes and the `DatanodeInfoProto` bytes of the node holding the bad copy (all
/// as the NameNode sent them).
#[derive(Debug, Clone)]
pub struct BadBlock {
    pub block: Vec<u8>,
    pub offset: u64,
    pub token: Vec<u8>,
    pub datanode: Vec<u8>,
}

/// The NameNode client (see the module docs). Share it across threads (`&self` everywhere).
pub struct NameNodeClient {
    nodes: Vec<Node>,
    cfg: NameNodeConfig,
    /// Index of the node believed active.
    active: AtomicUsize,
    roles_known: AtomicBool,
    msynced: AtomicBool,
    /// The highest stateId seen, shared by every connection (see the module docs).
    state_id: StateIdCell,
    /// When the roles were last asked: ms since `created`, plus one (0: never).
    probed_at: AtomicU64,
    created: Instant,
}

impl std::fmt::Debug for NameNodeClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_list();
        for n in &self.nodes {
            d.entry(&(
                &n.ep.id,
                n.ep.addr,
                Role::from_u8(n.role.load(Ordering::Relaxed)),
            ));
        }
        d.finish()
    }
}

/// `GetFileInfoRequestProto{src}`.
pub fn encode_get_file_info(path: &str, out: &mut Vec<u8>) {
    Writer::new(out).string(1, path);
}

/// `GetBlockLocationsRequestProto{src, offset, length}`.
pub fn encode_get_block_locations(path: &str, offset: u64, length: u64, out: &mut Vec<u8>) {
    let mut w = Writer::new(out);
    w.string(1, path);
    w.uint(2, offset);
    w.uint(3, length);
}

/// `FsPermissionProto{perm}`.
struct FsPermission(u32);

impl Encode for FsPermission {
    fn encode<S: Sink>(&self, s: &mut S) {
        s.uint(1, u64::from(self.0));
    }
}

/// `MkdirsRequestProto{src, masked: FsPermissionProto{perm}, createParent: true}`.
pub fn encode_mkdirs(path: &str, permission: u32, out: &mut Vec<u8>) {
    let mut w = Writer::new(out);
    w.string(1, path);
    w.message(2, &FsPermission(permission));
    w.bool(3, true);
}

/// `LocatedBlockProto{b, offset, locs: [dn], corrupt: false, blockToken}` of a bad replica.
impl Encode for BadBlock {
    fn encode<S: Sink>(&self, s: &mut S) {
        s.bytes(1, &self.block);
        s.uint(2, self.offset);
        s.bytes(3, &self.datanode);
        s.bool(4, false);
        s.bytes(5, &self.token);
    }
}

/// `ReportBadBlocksRequestProto{blocks: [LocatedBlockProto{b, offset, locs: [dn], corrupt:
/// false, blockToken}]}`, as Java's `DFSClient.reportChecksumFailure` builds it.
pub fn encode_report_bad_blocks(bad: &[BadBlock], out: &mut Vec<u8>) {
    let mut w = Writer::new(out);
    for b in bad {
        w.message(1, b);
    }
}

/// The last occurrence of length-delimited field `field` of `msg`, as a range of `msg`.
fn field_range(msg: &[u8], field: u32, what: &'static str) -> Result<Option<Range<usize>>, Error> {
    let bad = |e| Error::Decode { what, source: e };
    let mut r = Reader::new(msg);
    let mut out = None;
    while !r.is_empty() {
        let (n, wt) = r.read_tag().map_err(bad)?;
        if n == field && wt == WireType::Len {
            let b = r.read_len().map_err(bad)?;
            let start = b.as_ptr() as usize - msg.as_ptr() as usize;
            out = Some(start..start + b.len());
        } else if n == field {
            return Err(Error::Malformed {
                what,
                reason: "wrong wire type",
            });
        } else {
            r.skip(n, wt, 0).map_err(bad)?;
        }
    }
    Ok(out)
}

fn remote(e: ClientError, node: &Endpoint) -> Error {
    match e {
        ClientError::Remote {
            status,
            class,
            message,
            detail,
        } => Error::Remote(RemoteException {
            kind: RemoteKind::from_class(&class),
            class,
            message,
            code: detail.map(|d| d as i32),
            fatal: status
                == hadoop_wire::pb::hadoop::common::rpc_response_header_proto::RpcStatusProto::Fatal,
        }),
        other => Error::Connection {
            target: format!("NameNode {} ({})", node.id, node.addr),
            reason: other.to_string(),
        },
    }
}

/// A failed call's (or connection's) error on node `n`, with the token's or credentials'
/// story when the SASL negotiation failed for want of a token, or the token was refused.
fn node_error(n: &Node, e: ClientError) -> Error {
    let e = match (e, &n.missing_token) {
        (ClientError::Auth { class, message }, Some(credentials)) => {
            return Error::NoToken {
                namenode: format!("NameNode {} ({})", n.ep.id, n.ep.addr),
                addr: n.ep.addr,
                credentials: credentials.clone(),
                reason: format!("{class}: {message}"),
            };
        }
        (e, _) => e,
    };
    match (remote(e, &n.ep), &n.token) {
        (Error::Remote(r), Some(token)) if r.kind == RemoteKind::InvalidToken => {
            Error::TokenRefused {
                namenode: format!("NameNode {} ({})", n.ep.id, n.ep.addr),
                token: token.clone(),
                remote: r,
            }
        }
        (e, _) => e,
    }
}

/// What to do after a failed call.
fn is_failover(e: &Error) -> bool {
    matches!(e, Error::Connection { .. })
        || matches!(
            e.remote_kind(),
            Some(RemoteKind::Standby | RemoteKind::ObserverRetryOnActive)
        )
}

impl NameNodeClient {
    /// A client for these NameNodes (one: no HA; several: roles are discovered).
    pub fn new(endpoints: Vec<Endpoint>, cfg: NameNodeConfig) -> Result<NameNodeClient, Error> {
        if endpoints.is_empty() {
            return Err(Error::Config("no NameNode address".into()));
        }
        let single = endpoints.len() == 1;
        let state_id = StateIdCell::new();
        // One login for every NameNode: from the keytab when one is named, else MIT's.
        let login = match &cfg.kerberos {
            Some(k) => Some(Arc::new(
                MitGss::login(k.client_principal.clone(), k.keytab.as_deref()).map_err(
                    |e| match e {
                        LoginError::MissingPrincipal { keytab } => Error::Config(format!(
                            "a Kerberos keytab ({}) is named for the NameNode client but no \
                             client principal to log in as with it",
                            keytab.display()
                        )),
                        e @ LoginError::Keytab { .. } => Error::Login {
                            reason: e.to_string(),
                        },
                    },
                )?,
            )),
            None => None,
        };
        let nodes = endpoints
            .into_iter()
            .map(|ep| {
                let mut auth = cfg.auth.clone();
                let mut token = None;
                if auth.token.is_none() {
                    if let Some(t) = cfg.credentials.as_deref().and_then(|c| {
                        select_delegation_token(c, ep.addr, cfg.logical_token_service.as_deref())
                    }) {
                        auth.token = Some(crate::tokens::credential(t));
                        token = Some(crate::tokens::describe(t));
                    }
                }
                let missing_token = match (&token, &cfg.kerberos, cfg.credentials.as_deref()) {
                    (None, Some(_), Some(c)) => Some(format!(
                        "the client's credentials ({} token{})",
                        c.tokens.len(),
                        if c.tokens.len() == 1 { "" } else { "s" }
                    )),
                    (None, Some(_), None) => Some(format!(
                        "no credentials (neither {} nor {} names a Credentials file)",
                        crate::tokens::TOKEN_FILE_ENV,
                        crate::tokens::TOKEN_FILES_KEY
                    )),
                    _ => None,
                };
                if let (Some(k), Some(login)) = (&cfg.kerberos, &login) {
                    let host = canonical_host_name(ep.addr.ip());
                    auth.kerberos = Some(KerberosClient {
                        server_principal: replace_host(&k.server_principal, &host),
                        contexts: login.clone(),
                    });
                }
                let icfg = ClientConfig {
                    auth: auth.clone(),
                    protocol: CLIENT_PROTOCOL.to_string(),
                    protocol_version: CLIENT_PROTOCOL_VERSION,
                    user: cfg.user.clone(),
                    connect_timeout: cfg.connect_timeout,
                    call_timeout: cfg.call_timeout,
                    max_connect_attempts: cfg.connect_attempts.max(1),
                    backoff_initial: Duration::from_millis(50),
                    backoff_max: Duration::from_secs(1),
                    state_id: Some(state_id.clone()),
                    reader_cpu: cfg.reader_cpu,
                    max_idle: cfg.max_idle,
                    ..ClientConfig::default()
                };
                let icfg = match &cfg.reader_thread_name {
                    Some(n) => ClientConfig {
                        reader_thread_name: n.clone(),
                        ..icfg
                    },
                    None => icfg,
                };
                let client = Client::new(ep.addr, icfg);
                // its own clientId: callIds of the two paths are counted apart
                let mut client_id = *client.client_id();
                client_id[0] ^= 0x80;
                let direct = Connections::new(
                    ConnConfig {
                        addr: ep.addr,
                        protocol: CLIENT_PROTOCOL,
                        version: CLIENT_PROTOCOL_VERSION,
                        user: cfg.user.clone(),
                        client_id,
                        connect_timeout: cfg.connect_timeout,
                        call_timeout: cfg.call_timeout,
                        max_response: hadoop_wire::frame::DEFAULT_MAX_DATA_LENGTH,
                        keep_idle: 64,
                        max_idle: cfg.max_idle,
                        auth,
                    },
                    state_id.clone(),
                );
                Node {
                    client,
                    direct,
                    token,
                    missing_token,
                    ep,
                    role: AtomicU8::new(if single {
                        Role::Active as u8
                    } else {
                        Role::Unknown as u8
                    }),
                }
            })
            .collect();
        Ok(NameNodeClient {
            nodes,
            cfg,
            active: AtomicUsize::new(0),
            roles_known: AtomicBool::new(single),
            msynced: AtomicBool::new(false),
            state_id,
            probed_at: AtomicU64::new(0),
            created: Instant::now(),
        })
    }

    /// From a configuration: `fs.defaultFS` and the HA keys (see the module docs).
    pub fn from_conf(conf: &conf::Configuration) -> Result<NameNodeClient, Error> {
        Self::from_conf_with(conf, NameNodeConfig::default())
    }

    /// As [`NameNodeClient::from_conf`], with the fields the configuration does not decide
    /// (user, retries, reader-thread placement, …) taken from `base`.
    pub fn from_conf_with(
        conf: &conf::Configuration,
        base: NameNodeConfig,
    ) -> Result<NameNodeClient, Error> {
        let (eps, observer) = endpoints_from_conf(conf)?;
        let credentials = match base.credentials.clone() {
            Some(c) => Some(c),
            None => crate::tokens::credentials_from_env(conf)?.map(Arc::new),
        };
        let logical_token_service = match base.logical_token_service.clone() {
            Some(s) => Some(s),
            None => nameservice_of(conf)?.map(|ns| logical_token_service(&ns)),
        };
        let config = |e: hadoop_wire::sasl::SaslError| Error::Config(e.to_string());
        let auth = ipc::sasl::client_auth(conf, None).map_err(config)?;
        let kerberos = match conf.get("hadoop.security.authentication") {
            Some(m) if m.trim().eq_ignore_ascii_case("kerberos") => {
                let key = "dfs.namenode.kerberos.principal";
                let Some(p) = conf.get(key) else {
                    return Err(Error::Config(format!(
                        "Failed to specify server's Kerberos principal name ({key} is not set)"
                    )));
                };
                Some(NameNodeKerberos {
                    server_principal: p.trim().to_string(),
                    client_principal: base
                        .kerberos
                        .as_ref()
                        .and_then(|k| k.client_principal.clone()),
                    keytab: base.kerberos.as_ref().and_then(|k| k.keytab.clone()),
                })
            }
            _ => None,
        };
        let cfg = NameNodeConfig {
            auth,
            kerberos,
            credentials,
            logical_token_service,
            observer_reads: observer,
            observer_probe_period: match conf.get(OBSERVER_PROBE_PERIOD_KEY) {
                Some(_) => Duration::from_millis(conf.get_duration_ms(OBSERVER_PROBE_PERIOD_KEY)?),
                None => base.observer_probe_period,
            },
            connect_timeout: Duration::from_millis(
                conf.get_duration_ms("ipc.client.connect.timeout")
                    .unwrap_or(20_000),
            ),
            max_idle: ipc::client::max_idle_from_conf(conf)?,
            // the key only turns them off: a caller's `false` stays
            direct_calls: base.direct_calls
                && match conf.get(DIRECT_CALLS_KEY) {
                    Some(_) => conf.get_bool(DIRECT_CALLS_KEY)?,
                    None => true,
                },
            ..base
        };
        NameNodeClient::new(eps, cfg)
    }

    /// The NameNodes and their last known roles.
    pub fn nodes(&self) -> Vec<(Endpoint, Role)> {
        self.nodes
            .iter()
            .map(|n| (n.ep.clone(), Role::from_u8(n.role.load(Ordering::Acquire))))
            .collect()
    }

    /// The highest stateId seen from any NameNode (the value every request carries).
    pub fn state_id(&self) -> Option<i64> {
        self.state_id.get()
    }

    /// The cell holding it, shared by every connection of this client.
    pub fn state_id_cell(&self) -> &StateIdCell {
        &self.state_id
    }

    /// Asks every NameNode its HA state (`getHAServiceState`).
    pub fn discover_roles(&self) {
        let mut active = None;
        for (i, n) in self.nodes.iter().enumerate() {
            let role = match n
                .client
                .call_timeout("getHAServiceState", &[], self.cfg.call_timeout)
            {
                Ok(resp) => {
                    let mut r = Reader::new(resp.payload());
                    let mut state = None;
                    while !r.is_empty() {
                        match r.read_tag() {
                            Ok((1, WireType::Varint)) => state = r.read_varint().ok(),
                            Ok((f, wt)) => {
                                if r.skip(f, wt, 0).is_err() {
                                    break;
                                }
                            }
                            Err(_) => break,
                        }
                    }
                    // HAServiceStateProto: INITIALIZING 0, ACTIVE 1, STANDBY 2, OBSERVER 3
                    match state {
                        Some(0) => Role::Initializing,
                        Some(1) => Role::Active,
                        Some(2) => Role::Standby,
                        Some(3) => Role::Observer,
                        _ => Role::Unknown,
                    }
                }
                Err(e) => {
                    tracing::debug!("getHAServiceState on {}: {e}", n.ep.id);
                    Role::Unknown
                }
            };
            n.role.store(role as u8, Ordering::Release);
            if role == Role::Active && active.is_none() {
                active = Some(i);
            }
        }
        if let Some(a) = active {
            self.active.store(a, Ordering::Release);
        }
        let ms = u64::try_from(self.created.elapsed().as_millis()).unwrap_or(u64::MAX - 1);
        self.probed_at.store(ms + 1, Ordering::Release);
        self.roles_known.store(true, Ordering::Release);
    }

    fn knows_an_observer(&self) -> bool {
        self.nodes
            .iter()
            .any(|n| Role::from_u8(n.role.load(Ordering::Acquire)) == Role::Observer)
    }

    /// Whether [`NameNodeConfig::observer_probe_period`] has passed since the roles were asked.
    fn probe_due(&self) -> bool {
        match self.probed_at.load(Ordering::Acquire) {
            0 => true,
            at => {
                let since = Duration::from_millis(at - 1);
                self.created.elapsed().saturating_sub(since) >= self.cfg.observer_probe_period
            }
        }
    }

    fn ensure_roles(&self) {
        if !self.roles_known.load(Ordering::Acquire) {
            self.discover_roles();
        }
    }

    /// One call on node `i`, with RetriableException retries.
    fn call_on(&self, i: usize, method: &str, req: &[u8]) -> Result<Response, Error> {
        self.call_on_retrying(i, method, req, self.cfg.retries)
    }

    /// One call on node `i`, with at most `retries` RetriableException retries.
    fn call_on_retrying(
        &self,
        i: usize,
        method: &str,
        req: &[u8],
        retries: u32,
    ) -> Result<Response, Error> {
        let n = &self.nodes[i];
        let mut wait = self.cfg.retry_wait;
        let mut attempt = 0;
        loop {
            match n.client.call_timeout(method, req, self.cfg.call_timeout) {
                Ok(r) => return Ok(r),
                Err(e) => {
                    let e = match node_error(n, e) {
                        // The login tried instead of a token failed: not retried.
                        e @ Error::NoToken { .. } => return Err(e),
                        e => e,
                    };
                    if e.remote_kind() == Some(RemoteKind::Retriable) && attempt < retries {
                        attempt += 1;
                        std::thread::sleep(wait);
                        wait = wait.saturating_mul(2);
                        continue;
                    }
                    return Err(e);
                }
            }
        }
    }

    /// An idempotent call on node `i` over a direct connection (see the module docs), with
    /// RetriableException retries and `connect_attempts` connect attempts; `f` reads the
    /// response message in place.
    fn direct_call<R>(
        &self,
        i: usize,
        method: &str,
        req: &[u8],
        f: impl FnOnce(&[u8]) -> Result<R, Error>,
    ) -> Result<R, Error> {
        let n = &self.nodes[i];
        let pool = &n.direct;
        let mut wait = self.cfg.retry_wait;
        let mut attempt = 0;
        let mut connect_failures = 0;
        loop {
            let mut c = match pool.take() {
                Ok(c) => c,
                Err(OpenFailure::Auth(e)) => return Err(node_error(n, e)),
                Err(OpenFailure::Io(reason)) => {
                    connect_failures += 1;
                    if connect_failures >= self.cfg.connect_attempts.max(1) {
                        return Err(Error::Connection {
                            target: format!("NameNode {} ({})", n.ep.id, n.ep.addr),
                            reason,
                        });
                    }
                    std::thread::sleep(Duration::from_millis(50) * connect_failures);
                    continue;
                }
            };
            match pool.call(&mut c, method, req) {
                Ok(()) => {
                    let r = f(c.payload());
                    pool.put(c);
                    return r;
                }
                // an idle connection the server closed: take another (each failure drops one)
                Err(CallFailure::Io { retry: true, .. }) => continue,
                Err(CallFailure::Io { reason, .. }) => {
                    return Err(Error::Connection {
                        target: format!("NameNode {} ({})", n.ep.id, n.ep.addr),
                        reason,
                    })
                }
                Err(CallFailure::Fatal(e)) => return Err(Error::Remote(e)),
                Err(CallFailure::Remote(e)) => {
                    pool.put(c);
                    if e.kind == RemoteKind::Retriable && attempt < self.cfg.retries {
                        attempt += 1;
                        std::thread::sleep(wait);
                        wait = wait.saturating_mul(2);
                        continue;
                    }
                    return Err(Error::Remote(e));
                }
            }
        }
    }

    /// A call for the active NameNode, failing over across the others.
    fn active_call(&self, method: &'static str, req: &[u8]) -> Result<Response, Error> {
        self.ensure_roles();
        let count = self.nodes.len();
        let mut last = None;
        for round in 0..2 {
            let start = self.active.load(Ordering::Acquire);
            for k in 0..count {
                let i = (start + k) % count;
                let role = Role::from_u8(self.nodes[i].role.load(Ordering::Acquire));
                // the believed active first; then the others, observers last
                if count > 1 && k > 0 && role == Role::Observer {
                    continue;
                }
                match self.call_on(i, method, req) {
                    Ok(r) => {
                        if count > 1 {
                            self.active.store(i, Ordering::Release);
                            self.nodes[i]
                                .role
                                .store(Role::Active as u8, Ordering::Release);
                        }
                        return Ok(r);
                    }
                    Err(e) if count > 1 && is_failover(&e) => {
                        if e.remote_kind() == Some(RemoteKind::Standby) {
                            self.nodes[i]
                                .role
                                .store(Role::Standby as u8, Ordering::Release);
                        }
                        last = Some(e);
                    }
                    Err(e) => return Err(e),
                }
            }
            if round == 0 && count > 1 {
                self.discover_roles();
            }
        }
        Err(last.unwrap_or(Error::NoNameNode {
            method,
            reason: "no NameNode is active".into(),
        }))
    }

    /// A read: an observer when observer reads are on, else the active. The call carries the
    /// shared stateId; an observer behind it holds the call until it caught up, or refuses it
    /// (RetriableException when too far behind, StandbyException / ObserverRetryOnActive):
    /// then the next observer, then the active.
    fn read_call(&self, method: &'static str, req: &[u8]) -> Result<Response, Error> {
        if self.cfg.observer_reads && self.nodes.len() > 1 {
            self.ensure_roles();
            if !self.knows_an_observer() && self.probe_due() {
                self.discover_roles();
            }
            if !self.msynced.load(Ordering::Acquire) {
                self.msync()?;
            }
            for (i, n) in self.nodes.iter().enumerate() {
                if Role::from_u8(n.role.load(Ordering::Acquire)) != Role::Observer {
                    continue;
                }
                match self.call_on_retrying(i, method, req, 0) {
                    Ok(r) => return Ok(r),
                    Err(e) if is_failover(&e) || e.remote_kind() == Some(RemoteKind::Retriable) => {
                        tracing::debug!("observer {} declined {method}: {e}", n.ep.id);
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        self.active_call(method, req)
    }

    /// `msync`: brings this client's stateId up to the active's (observer reads after it see
    /// everything committed before it).
    pub fn msync(&self) -> Result<(), Error> {
        self.active_call("msync", &[])?;
        self.msynced.store(true, Ordering::Release);
        Ok(())
    }

    /// Which path calls took so far: the direct-call pool's counters (summed over the
    /// NameNodes) and the calls started on the shared `ipc::client` connections.
    pub fn call_stats(&self) -> CallStats {
        let mut direct = DirectStats::default();
        let mut shared = 0u64;
        for n in &self.nodes {
            let d = n.direct.stats();
            direct.calls += d.calls;
            direct.opened += d.opened;
            direct.wrapped += d.wrapped;
            direct.idle_closed += d.idle_closed;
            shared += u64::try_from(n.client.calls_started()).unwrap_or(0);
        }
        CallStats {
            direct_calls: direct.calls,
            direct_connections: direct.opened,
            direct_wrapped_connections: direct.wrapped,
            direct_idle_closed: direct.idle_closed,
            shared_calls: shared,
        }
    }

    /// `getFileInfo`: the status of `path`, or `None` when it does not exist.
    pub fn get_file_info(&self, path: &str) -> Result<Option<FileStatus>, Error> {
        self.get_file_info_with(path, &mut Vec::new(), |v| v.to_owned())
    }

    /// `getFileInfo` with the status read in place: `f` sees a view of the response bytes.
    /// `scratch` holds the encoded request (reuse it to encode without allocating).
    pub fn get_file_info_with<R>(
        &self,
        path: &str,
        scratch: &mut Vec<u8>,
        f: impl FnOnce(&FileStatusView<'_>) -> R,
    ) -> Result<Option<R>, Error> {
        scratch.clear();
        encode_get_file_info(path, scratch);
        if self.cfg.direct_calls && self.nodes.len() == 1 {
            return self.direct_call(0, "getFileInfo", scratch, |payload| {
                match field_range(payload, 1, "GetFileInfoResponseProto")? {
                    None => Ok(None),
                    Some(r) => Ok(Some(f(&FileStatusView::decode(&payload[r])?))),
                }
            });
        }
        let resp = self.read_call("getFileInfo", scratch)?;
        let payload = resp.payload();
        match field_range(payload, 1, "GetFileInfoResponseProto")? {
            None => Ok(None),
            Some(r) => Ok(Some(f(&FileStatusView::decode(&payload[r])?))),
        }
    }

    /// `getBlockLocations(path, offset, length)`. A missing path is the NameNode's
    /// FileNotFoundException.
    pub fn get_block_locations(
        &self,
        path: &str,
        offset: u64,
        length: u64,
    ) -> Result<LocatedBlocksBuf, Error> {
        let mut req = Vec::with_capacity(path.len() + 24);
        encode_get_block_locations(path, offset, length, &mut req);
        let resp = self.read_call("getBlockLocations", &req)?;
        match field_range(resp.payload(), 1, "GetBlockLocationsResponseProto")? {
            Some(range) => {
                let lb = LocatedBlocksBuf { resp, range };
                lb.view().validate().map_err(|e| Error::Decode {
                    what: "LocatedBlocksProto",
                    source: e,
                })?;
                Ok(lb)
            }
            None => Err(Error::FileNotFound {
                path: path.to_string(),
            }),
        }
    }

    /// `mkdirs(path, permission, createParent=true)` on the active: whether the directory now
    /// exists (Java's `FileSystem.mkdirs`). The response's stateId is the write's: a read after
    /// it, on any NameNode, carries it.
    pub fn mkdirs(&self, path: &str, permission: u32) -> Result<bool, Error> {
        let mut req = Vec::with_capacity(path.len() + 12);
        encode_mkdirs(path, permission, &mut req);
        let resp = self.active_call("mkdirs", &req)?;
        // MkdirsResponseProto{result = 1 (bool)}
        let mut r = Reader::new(resp.payload());
        let bad = |e| Error::Decode {
            what: "MkdirsResponseProto",
            source: e,
        };
        let mut result = None;
        while !r.is_empty() {
            match r.read_tag().map_err(bad)? {
                (1, WireType::Varint) => result = Some(r.read_varint().map_err(bad)? != 0),
                (f, wt) => r.skip(f, wt, 0).map_err(bad)?,
            }
        }
        result.ok_or(Error::Malformed {
            what: "MkdirsResponseProto",
            reason: "no result",
        })
    }

    /// `getDataEncryptionKey()` on the active: the key for encrypted data transfer, `None` when
    /// the NameNode does not encrypt it (`dfs.encrypt.data.transfer` off: no key in the response).
    pub fn get_data_encryption_key(
        &self,
    ) -> Result<Option<hadoop_wire::hdfs::transfer_sasl::DataEncryptionKey>, Error> {
        let resp = self.active_call("getDataEncryptionKey", &[])?;
        hadoop_wire::hdfs::transfer_sasl::DataEncryptionKey::from_response(resp.payload()).map_err(
            |e| {
                tracing::warn!("getDataEncryptionKey: {e}");
                Error::Malformed {
                    what: "GetDataEncryptionKeyResponseProto",
                    reason: "undecodable DataEncryptionKeyProto",
                }
            },
        )
    }

    /// `reportBadBlocks` to the active.
    pub fn report_bad_blocks(&self, bad: &[BadBlock]) -> Result<(), Error> {
        let mut req = Vec::new();
        encode_report_bad_blocks(bad, &mut req);
        self.active_call("reportBadBlocks", &req).map(drop)
    }

    /// The service this client's delegation tokens carry: `ha-hdfs:<nameservice>`, else the
    /// (first) NameNode's `ip:port` (Java's `DFSClient.dtService`).
    pub fn token_service(&self) -> String {
        match &self.cfg.logical_token_service {
            Some(s) => s.clone(),
            None => token_service(self.nodes[0].ep.addr),
        }
    }

    /// `getDelegationToken(renewer)` on the active: a new `HDFS_DELEGATION_TOKEN` owned by the
    /// authenticated user, its service set to [`NameNodeClient::token_service`] (as
    /// `DFSClient.getDelegationToken` does). `renewer`: the short name of the user who may
    /// renew it (empty: nobody). `None` when the NameNode issues no tokens (security off). The
    /// NameNode issues tokens only over a Kerberos-authenticated connection.
    pub fn get_delegation_token(&self, renewer: &str) -> Result<Option<Token>, Error> {
        let mut req = Vec::with_capacity(renewer.len() + 2);
        encode_get_delegation_token(renewer, &mut req);
        let resp = self.active_call("getDelegationToken", &req)?;
        let token = decode_get_delegation_token(resp.payload())?;
        Ok(token.map(|mut t| {
            t.service = self.token_service();
            t
        }))
    }

    /// `renewDelegationToken(token)` on the active: the token's new expiry time (ms since the
    /// epoch). Only its renewer may renew it, over a Kerberos-authenticated connection.
    pub fn renew_delegation_token(&self, token: &Token) -> Result<i64, Error> {
        let mut req = Vec::new();
        encode_token_request(token, &mut req);
        let resp = self.active_call("renewDelegationToken", &req)?;
        decode_renew_delegation_token(resp.payload())
    }

    /// `cancelDelegationToken(token)` on the active: the NameNode forgets it (its owner or
    /// renewer may cancel it, also over a connection the token itself authenticated).
    pub fn cancel_delegation_token(&self, token: &Token) -> Result<(), Error> {
        let mut req = Vec::new();
        encode_token_request(token, &mut req);
        self.active_call("cancelDelegationToken", &req).map(drop)
    }
}

/// The nameservice `fs.defaultFS` names, if it names one (`dfs.nameservices`).
fn nameservice_of(conf: &conf::Configuration) -> Result<Option<String>, Error> {
    let fs = conf.get("fs.defaultFS").unwrap_or("file:///");
    let Some(rest) = fs.strip_prefix("hdfs://") else {
        return Ok(None);
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let nameservices = conf.get_trimmed_strings("dfs.nameservices")?;
    Ok(nameservices.into_iter().find(|n| n == authority))
}

/// The NameNode endpoints of a configuration and whether observer reads are configured.
pub fn endpoints_from_conf(conf: &conf::Configuration) -> Result<(Vec<Endpoint>, bool), Error> {
    let fs = conf.get("fs.defaultFS").unwrap_or("file:///");
    let Some(rest) = fs.strip_prefix("hdfs://") else {
        return Err(Error::Config(format!(
            "fs.defaultFS is {fs}, not an hdfs:// URI"
        )));
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let nameservices = conf.get_trimmed_strings("dfs.nameservices")?;
    if nameservices.iter().any(|n| n == authority) {
        let ns = authority;
        let ids = conf.get_trimmed_strings(&format!("dfs.ha.namenodes.{ns}"))?;
        if ids.is_empty() {
            return Err(Error::Config(format!("dfs.ha.namenodes.{ns} is not set")));
        }
        let mut eps = Vec::new();
        for id in ids {
            let key = format!("dfs.namenode.rpc-address.{ns}.{id}");
            let hp = conf.get_socket_addr(&key, DEFAULT_PORT)?;
            eps.push(Endpoint {
                addr: resolve(&hp.host, hp.port)?,
                id,
            });
        }
        let provider = conf
            .get(&format!("dfs.client.failover.proxy.provider.{ns}"))
            .unwrap_or("");
        Ok((eps, provider.ends_with("ObserverReadProxyProvider")))
    } else {
        let hp = conf::value::parse_host_port(fs, DEFAULT_PORT)
            .ok_or_else(|| Error::Config(format!("fs.defaultFS {fs}: no host")))?;
        Ok((
            vec![Endpoint {
                addr: resolve(&hp.host, hp.port)?,
                id: hp.to_string(),
            }],
            false,
        ))
    }
}

fn resolve(host: &str, port: u16) -> Result<SocketAddr, Error> {
    (host, port)
        .to_socket_addrs()
        .map_err(|e| Error::Connection {
            target: format!("NameNode {host}:{port}"),
            reason: format!("cannot resolve the address: {e}"),
        })?
        .next()
        .ok_or_else(|| Error::Config(format!("NameNode {host}:{port} has no address")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hadoop_wire::pb::hadoop::hdfs::{GetBlockLocationsRequestProto, GetFileInfoRequestProto};
    use prost::Message;

    #[test]
    fn requests_match_prost() {
        let mut b = Vec::new();
        encode_get_file_info("/user/alice/f", &mut b);
        assert_eq!(
            b,
            GetFileInfoRequestProto {
                src: "/user/alice/f".into()
            }
            .encode_to_vec()
        );
        b.clear();
        encode_get_block_locations("/x", 1 << 40, 10 << 20, &mut b);
        assert_eq!(
            b,
            GetBlockLocationsRequestProto {
                src: "/x".into(),
                offset: 1 << 40,
                length: 10 << 20
            }
            .encode_to_vec()
        );
    }

    #[test]
    fn mkdirs_bytes() {
        // MkdirsRequestProto is not in our .proto files: the bytes Java writes, by hand.
        // src (1), masked (2) = FsPermissionProto{perm (1) = 0o755 = ed 03}, createParent (3).
        let mut b = Vec::new();
        encode_mkdirs("/d", 0o755, &mut b);
        assert_eq!(b, [0x0a, 2, b'/', b'd', 0x12, 3, 0x08, 0xed, 0x03, 0x18, 1]);
        // The nested message decodes as FsPermissionProto.
        let perm = hadoop_wire::pb::hadoop::hdfs::FsPermissionProto::decode(&b[6..9]).unwrap();
        assert_eq!(perm.perm, 0o755);
    }

    #[test]
    fn report_bad_blocks_matches_prost() {
        use crate::fixtures::Dn;
        use hadoop_wire::pb::hadoop::common::TokenProto;
        use hadoop_wire::pb::hadoop::hdfs::{
            ExtendedBlockProto, LocatedBlockProto, ReportBadBlocksRequestProto,
        };
        let eb = ExtendedBlockProto {
            pool_id: "BP-1".into(),
            block_id: 7,
            generation_stamp: 1001,
            num_bytes: Some(9),
        };
        let tok = TokenProto {
            identifier: vec![],
            password: vec![],
            kind: String::new(),
            service: String::new(),
        };
        let dn = Dn::new(1, "/r1").to_proto();
        let bad = BadBlock {
            block: eb.encode_to_vec(),
            offset: 1 << 20,
            token: tok.encode_to_vec(),
            datanode: dn.encode_to_vec(),
        };
        let mut ours = Vec::new();
        encode_report_bad_blocks(&[bad.clone(), bad], &mut ours);
        let lb = LocatedBlockProto {
            b: eb,
            offset: 1 << 20,
            locs: vec![dn],
            corrupt: false,
            block_token: tok,
            ..Default::default()
        };
        assert_eq!(
            ours,
            ReportBadBlocksRequestProto {
                blocks: vec![lb.clone(), lb]
            }
            .encode_to_vec()
        );
    }

    #[test]
    fn endpoints_single_and_ha() {
        let mut c = conf::Configuration::new();
        c.set("fs.defaultFS", "hdfs://127.0.0.1:9000");
        let (e, obs) = endpoints_from_conf(&c).unwrap();
        assert_eq!(
            (e.len(), e[0].addr.to_string(), obs),
            (1, "127.0.0.1:9000".to_string(), false)
        );
        c.set("fs.defaultFS", "hdfs://ns1");
        c.set("dfs.nameservices", "ns1");
        assert!(endpoints_from_conf(&c).is_err(), "no dfs.ha.namenodes.ns1");
        c.set("dfs.ha.namenodes.ns1", "nn0, nn1");
        c.set("dfs.namenode.rpc-address.ns1.nn0", "127.0.0.1:9001");
        c.set("dfs.namenode.rpc-address.ns1.nn1", "127.0.0.1:9002");
        c.set(
            "dfs.client.failover.proxy.provider.ns1",
            "org.apache.hadoop.hdfs.server.namenode.ha.ObserverReadProxyProvider",
        );
        let (e, obs) = endpoints_from_conf(&c).unwrap();
        assert_eq!(
            e.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(),
            ["nn0", "nn1"]
        );
        assert_eq!(e[1].addr.port(), 9002);
        assert!(obs);
        c.set("fs.defaultFS", "file:///");
        assert!(endpoints_from_conf(&c).is_err());
    }
}
