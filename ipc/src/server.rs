//! The IPC v9 server: protocols and methods by name, Hadoop's error behaviour, responses written
//! straight into the transport's buffer pool.
//!
//! How it fits together:
//!
//! - A [`Registry`] maps (`declaringClassProtocolName`, `clientProtocolVersion`, `methodName`)
//!   to a [`Handler`]. [`Server::start`] runs it on the [`transport`] (io_uring
//!   or epoll ring threads).
//! - Each connection is a [`ServerConn`], a sans-IO [`Session`]: preamble → connection context →
//!   calls. Frames are cut with the capped [`FrameAccumulator`] (the 4-byte length is checked
//!   against `ipc.maximum.data.length`, or while SASL negotiates against the much smaller
//!   negotiation cap, before a single body byte is copied or anything is allocated) and read
//!   through the lazy header views; nothing is decoded into owned structs.
//! - A handler gets a [`Call`] (views and slices of the request frame, borrowed from the receive
//!   buffer) and a [`Reply`]. It answers with a message of up to one pool chunk
//!   ([`Reply::message`], [`Reply::bytes`], [`Reply::with`]), written into the chunk in one
//!   piece after the response header, or with a streamed body of any length
//!   ([`Reply::stream`]): a [`BodySource`] that fills chunk after chunk as the pool allows. No
//!   allocation on the response path is sized by the response.
//! - Backpressure: a call is dispatched only when the connection can get a whole chunk for its
//!   reply (a spare), and no further frames are read while a streamed body is in progress or
//!   while `max_outstanding_calls` responses are not yet completely sent.
//!
//! Hadoop's behaviour on errors (server side of `Server.processOneRpc`):
//!
//! | Input | Answer |
//! |---|---|
//! | unknown protocol name | ERROR, `ERROR_NO_SUCH_PROTOCOL`, `org.apache.hadoop.ipc.RpcNoSuchProtocolException` |
//! | known protocol, other version | ERROR, `ERROR_RPC_VERSION_MISMATCH`, `org.apache.hadoop.ipc.RPC$VersionMismatch` |
//! | unknown method | ERROR, `ERROR_NO_SUCH_METHOD`, `org.apache.hadoop.ipc.RpcNoSuchMethodException` |
//! | handler error | ERROR with the handler's class, message and code |
//! | undecodable RPC header / RequestHeader / context | FATAL, `FATAL_DESERIALIZING_REQUEST`, close |
//! | rpcOp absent or not FINAL, rpcKind absent or not PROTOCOL_BUFFER | FATAL, `FATAL_INVALID_RPC_HEADER`, close |
//! | call before the connection context, second context | FATAL, `FATAL_INVALID_RPC_HEADER`, close |
//! | ping (callId −4) | nothing (ignored) |
//! | wrong magic / version in the preamble | FATAL `FATAL_VERSION_MISMATCH` (callId −1), close |
//! | `GET ` instead of a preamble | Hadoop's plain-text HTTP reply, close |
//! | frame length over `ipc.maximum.data.length` (or ≥ 2^31) | **FATAL** (callId −1, `FATAL_INVALID_RPC_HEADER`), close |
//! | SIMPLE preamble, SIMPLE not enabled | FATAL (callId −1, `FATAL_UNAUTHORIZED`), `AccessControlException` "SIMPLE authentication is not enabled.  Available:\[TOKEN\]" |
//! | SASL refused (wrong DIGEST response, unknown/forged/expired token, method not offered, out of order, message over the negotiation cap) | FATAL (callId −33, `FATAL_UNAUTHORIZED`) naming the true cause (`SaslException`, `SecretManager$InvalidToken`, `AccessControlException`), close; `auth_failures` counted |
//! | frame length over the SASL negotiation cap (64 KiB message + 1 KiB) before SUCCESS | FATAL (callId −1, `FATAL_UNAUTHORIZED`), `SaslException` "Requested data length N is longer than maximum SASL negotiation length M.", refused on the length before buffering, close; `auth_failures` and `oversized_frames` counted. Java checks only `ipc.maximum.data.length` here |
//! | context or call during negotiation; WRAP without a layer; negotiation after SUCCESS | FATAL `FATAL_INVALID_RPC_HEADER` (Java's texts: "Connection header sent during SASL negotiation", "Connection context not established", …), close; before SUCCESS `auth_failures` counted (Java counts only refused SASL messages) |
//! | SIMPLE context with a `realUser` acting as `effectiveUser` not granted by [`ServerConfig::proxy_users`] | FATAL `FATAL_UNAUTHORIZED`, `AuthorizationException` "User: … is not allowed to impersonate …" (or "Unauthorized connection for super-user: … from IP …"); `auth_failures` counted |
//! | TOKEN context claiming another user | FATAL `FATAL_UNAUTHORIZED`, `AccessControlException` "Authenticated user (…) doesn't match what the client claims to be (…)" |
//! | KERBEROS context claiming another user than the principal (a proxy-user request) not granted by [`ServerConfig::proxy_users`] | FATAL `FATAL_UNAUTHORIZED`, `AuthorizationException` "User: … is not allowed to impersonate …"; `auth_failures` counted |
//! | service-level authorization ([`ServerConfig::authorization`]) refuses the context's protocol for the user | FATAL `FATAL_UNAUTHORIZED`, `AuthorizationException` "User … (auth:…) is not authorized for protocol interface …: denied by configured ACL" (or ": this service is only accessible by …"); `auth_failures` counted |
//! | protected connection: bad MAC / padding, replayed or reordered sequence number | FATAL (wrapped), `SaslException`, close; `auth_failures` counted. The JDK drops a bad MAC silently, so a Java peer would just wait: we close |
//! | protected connection: a frame in the clear | FATAL `FATAL_INVALID_RPC_HEADER` (our choice; Java would process it) |
//!
//! SASL: [`ServerConfig::auth`] says which methods are enabled (SIMPLE only by default, where a
//! SASL client is told to switch to SIMPLE as Java's server does) and which protection levels.
//! Negotiation replies go out in the clear; after SUCCESS at `auth-int`/`auth-conf` every
//! incoming WRAP packet is unwrapped and its plaintext cut into frames by a second capped
//! accumulator (several frames per packet, or one across packets), and every response is
//! written into a staging buffer, wrapped whole (in pieces of at most the client's maxbuf) and
//! queued; a streamed body is wrapped piece by piece. Wrapping costs one copy into staging and
//! one from the egress buffer into pool chunks; the buffers are kept per connection (nothing
//! allocated per call once warm; `client_alloc.rs` counts it), and given back above 256 KiB.
//!
//! On the oversized frame Java only logs and closes. We send a FATAL first (our choice) so that
//! a client learns why instead of seeing a reset: it costs one small frame, nothing is read or
//! allocated for the claimed body, and the connection is then half-closed and drained for at
//! most the linger time. FATAL responses name `org.apache.hadoop.ipc.Server$FatalRpcServerException`
//! as Java does for string-constructed fatal errors. A FATAL closes only its own connection.
//!
//! Deviation: a clientId longer than [`MAX_CLIENT_ID`] bytes (Java clients send 16) is FATAL
//! `FATAL_INVALID_RPC_HEADER`, so that every response header fits in a fixed-size buffer.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::BufMut;
use prost::encoding::{encode_varint, encoded_len_varint};
use prost::Message as _;

use crate::transport::{
    self, BackendKind, Flow, MetricsSnapshot, Outbox, Service, Session, TransportConfig,
    TransportError,
};
use hadoop_wire::encode::{self, Body, RpcFailure, RpcResponseHeader};
use hadoop_wire::frame::{
    self, FrameAccumulator, FrameDecoder, PreambleOutcome, RequestFrame, DEFAULT_MAX_DATA_LENGTH,
};
use hadoop_wire::pb::hadoop::common::rpc_response_header_proto::{
    RpcErrorCodeProto, RpcStatusProto,
};
use hadoop_wire::pb::hadoop::common::IpcConnectionContextProto;
use hadoop_wire::rpc::{
    AUTHORIZATION_FAILED_CALL_ID, CONNECTION_CONTEXT_CALL_ID, IPC_VERSION, PING_CALL_ID,
    SASL_CALL_ID,
};
use hadoop_wire::sasl::message::{self as sasl_message, AuthMethod, SaslMessageView};
use hadoop_wire::sasl::server::{ServerAuth, ServerFailure, ServerNegotiation, ServerStep};
use hadoop_wire::sasl::{SaslError, SecurityLayer};
use hadoop_wire::view::rpc::{RequestHeaderView, RpcRequestHeaderView};

use crate::authorize::{ProxyUsers, ServiceAuthorization, Subject, AUTHORIZATION_EXCEPTION};
use crate::entropy::OsEntropy;

/// Longest clientId accepted (and echoed). Java clients send a 16-byte UUID.
pub const MAX_CLIENT_ID: usize = 64;
/// Peer-provided names quoted in error messages are cut to this many bytes.
const MAX_QUOTED: usize = 256;

// The exception class names live in `hadoop_wire::rpc::exception`; re-exported under the names
// this module always gave them.
pub use hadoop_wire::rpc::exception::{
    FATAL as FATAL_EXCEPTION, INVALID_PROTOBUF as INVALID_PROTOBUF_EXCEPTION,
    NO_SUCH_METHOD as NO_SUCH_METHOD_EXCEPTION, NO_SUCH_PROTOCOL as NO_SUCH_PROTOCOL_EXCEPTION,
    SERVER as SERVER_EXCEPTION, VERSION_MISMATCH as VERSION_MISMATCH_EXCEPTION,
};

// ---------------------------------------------------------------------------------------------
// Handlers

/// One call, as the handler sees it: slices and views of the request frame, borrowed from the
/// receive buffer (or the frame accumulator when the frame straddled buffers).
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    pub call_id: i32,
    pub retry_count: i32,
    pub client_id: &'a [u8],
    /// The highest state id the client has seen (observer reads), if it sent one.
    pub client_state_id: Option<i64>,
    pub protocol: &'a str,
    pub protocol_version: u64,
    pub method: &'a str,
    /// The request message (protobuf bytes, without its length prefix).
    pub request: &'a [u8],
    /// The whole RPC request header.
    pub rpc_header: RpcRequestHeaderView<'a>,
    /// The whole RequestHeader.
    pub request_header: RequestHeaderView<'a>,
    /// The remote user: the token's user after TOKEN authentication, else `effectiveUser`
    /// from the connection context.
    pub user: Option<&'a str>,
    /// How the connection authenticated.
    pub auth_method: AuthMethod,
    /// KERBEROS: the authenticated principal (Java's `ugi.getUserName()`; `user` is its short
    /// name).
    pub principal: Option<&'a str>,
    /// TOKEN: the token identifier as the client sent it.
    pub token_identifier: Option<&'a [u8]>,
    /// TOKEN: what the server's token secrets made of the identifier when the connection
    /// authenticated (`TokenSecrets::retrieve_with_context`), kept for its calls.
    pub token_context: Option<&'a (dyn std::any::Any + Send + Sync)>,
}

/// An application-level failure: answered with an ERROR response, the connection stays open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallError {
    /// Java exception class name the client will see, e.g. `java.io.IOException`.
    pub exception_class: String,
    pub message: String,
    pub detail: RpcErrorCodeProto,
}

impl CallError {
    /// `ERROR_APPLICATION` with the given class and message.
    pub fn application(class: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            exception_class: class.into(),
            message: message.into(),
            detail: RpcErrorCodeProto::ErrorApplication,
        }
    }

    /// The request message did not decode.
    pub fn invalid_request(err: impl std::fmt::Display) -> Self {
        Self::application(INVALID_PROTOBUF_EXCEPTION, err.to_string())
    }
}

impl From<ReplyError> for CallError {
    fn from(e: ReplyError) -> Self {
        Self {
            exception_class: SERVER_EXCEPTION.into(),
            message: e.to_string(),
            detail: RpcErrorCodeProto::ErrorSerializingResponse,
        }
    }
}

/// Why a reply could not be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ReplyError {
    /// An unstreamed reply must fit one pool chunk with its header.
    #[error("response of {len} bytes does not fit a {chunk}-byte pool chunk; stream it")]
    TooLarge { len: u64, chunk: usize },
    /// A streamed reply must fit a Java int frame length.
    #[error("streamed response of {len} bytes exceeds the 2 GiB frame limit")]
    FrameTooLarge { len: u64 },
    /// The handler already replied.
    #[error("the call was already answered")]
    AlreadyReplied,
}

/// Produces a streamed response message chunk by chunk. Called until `len` bytes (the length
/// given to [`Reply::stream`]) have been produced, each time with the room the current pool chunk
/// has left (never more than what remains).
pub trait BodySource {
    /// Fills all of `dst` with the next bytes of the message.
    fn fill(&mut self, dst: &mut [u8]);
}

/// A streamed reply body from an owned buffer.
pub struct OwnedBody {
    bytes: Vec<u8>,
    pos: usize,
}

impl OwnedBody {
    pub fn new(bytes: Vec<u8>) -> OwnedBody {
        OwnedBody { bytes, pos: 0 }
    }
}

impl BodySource for OwnedBody {
    fn fill(&mut self, dst: &mut [u8]) {
        let n = dst.len().min(self.bytes.len() - self.pos);
        dst[..n].copy_from_slice(&self.bytes[self.pos..self.pos + n]);
        self.pos += n;
    }
}

/// Serves one method.
pub trait Handler: Send + Sync + 'static {
    /// Answers `call` through `reply`. Writing nothing answers with an empty message. An `Err`
    /// (before replying) is sent as an ERROR response.
    fn call(&self, call: &Call<'_>, reply: &mut Reply<'_, '_>) -> Result<(), CallError>;
}

impl<F> Handler for F
where
    F: Fn(&Call<'_>, &mut Reply<'_, '_>) -> Result<(), CallError> + Send + Sync + 'static,
{
    fn call(&self, call: &Call<'_>, reply: &mut Reply<'_, '_>) -> Result<(), CallError> {
        self(call, reply)
    }
}

/// Where a reply's bytes go: straight into the pool chunk, or (on a connection with a security
/// layer) into the connection's staging buffer, which is wrapped once the handler is done.
enum ReplySink<'o, 'p> {
    Direct(&'o mut Outbox<'p>),
    Staged { buf: &'o mut Vec<u8>, chunk: usize },
}

/// The sink of a reply: staged on a connection with a security layer, else direct.
fn reply_sink<'o, 'p>(
    staged: bool,
    chunk: usize,
    out: &'o mut Outbox<'p>,
    staging: &'o mut Vec<u8>,
) -> ReplySink<'o, 'p> {
    if staged {
        ReplySink::Staged {
            buf: staging,
            chunk,
        }
    } else {
        ReplySink::Direct(out)
    }
}

impl ReplySink<'_, '_> {
    fn chunk_size(&self) -> usize {
        match self {
            ReplySink::Direct(out) => out.chunk_size(),
            ReplySink::Staged { chunk, .. } => *chunk,
        }
    }
}

/// Where a handler writes its answer. See [`Handler::call`].
pub struct Reply<'o, 'p> {
    sink: ReplySink<'o, 'p>,
    head: HeadFields,
    replied: bool,
    stream: Option<(Box<dyn BodySource>, u64)>,
}

/// The response header fields known before the handler runs.
#[derive(Debug, Clone, Copy)]
struct HeadFields {
    call_id: i32,
    retry_count: i32,
    client_id: [u8; MAX_CLIENT_ID],
    client_id_len: usize,
    state_id: Option<i64>,
}

impl HeadFields {
    fn header(&self) -> RpcResponseHeader<'_> {
        RpcResponseHeader {
            state_id: self.state_id,
            ..RpcResponseHeader::success(
                self.call_id,
                &self.client_id[..self.client_id_len],
                self.retry_count,
            )
        }
    }
}

/// Bytes before the message in a SUCCESS frame: length, delimited header, message length.
fn success_prefix_len(header: &RpcResponseHeader<'_>, msg_len: u64) -> usize {
    let hlen = header.encoded_len();
    4 + encoded_len_varint(hlen as u64) + hlen + encoded_len_varint(msg_len)
}

fn write_success_prefix(dst: &mut [u8], header: &RpcResponseHeader<'_>, msg_len: u64) {
    let hlen = header.encoded_len();
    let body =
        encoded_len_varint(hlen as u64) + hlen + encoded_len_varint(msg_len) + msg_len as usize;
    let mut w: &mut [u8] = dst;
    w.put_u32(body as u32);
    encode_varint(hlen as u64, &mut w);
    header.encode_body(&mut w);
    encode_varint(msg_len, &mut w);
}

impl<'o, 'p> Reply<'o, 'p> {
    /// Largest message [`Self::with`] and friends accept (one chunk minus the header).
    pub fn max_unstreamed(&self) -> usize {
        let h = self.head.header();
        let chunk = self.sink.chunk_size();
        chunk - success_prefix_len(&h, chunk as u64)
    }

    /// Answers with a message of exactly `len` bytes written by `fill` into the pool chunk.
    pub fn with(&mut self, len: usize, fill: impl FnOnce(&mut [u8])) -> Result<(), ReplyError> {
        if self.replied {
            return Err(ReplyError::AlreadyReplied);
        }
        let header = self.head.header();
        let p = success_prefix_len(&header, len as u64);
        let total = p + len;
        let chunk = self.sink.chunk_size();
        if total > chunk {
            return Err(ReplyError::TooLarge {
                len: len as u64,
                chunk,
            });
        }
        match &mut self.sink {
            ReplySink::Direct(out) => {
                // The server reserved a whole chunk before calling the handler, so this cannot
                // starve.
                let Ok(dst) = out.contiguous(total) else {
                    return Err(ReplyError::TooLarge {
                        len: len as u64,
                        chunk,
                    });
                };
                write_success_prefix(&mut dst[..p], &header, len as u64);
                fill(&mut dst[p..]);
                out.advance(total);
                out.seal();
            }
            ReplySink::Staged { buf, .. } => {
                let at = buf.len();
                buf.resize(at + total, 0);
                write_success_prefix(&mut buf[at..at + p], &header, len as u64);
                fill(&mut buf[at + p..]);
            }
        }
        self.replied = true;
        Ok(())
    }

    /// Answers with already-encoded message bytes: copied into the pool chunk, or streamed
    /// from a heap copy when they do not fit one (as [`Self::message`]).
    pub fn bytes(&mut self, message: &[u8]) -> Result<(), ReplyError> {
        match self.with(message.len(), |d| d.copy_from_slice(message)) {
            Err(ReplyError::TooLarge { .. }) => self.stream(
                message.len() as u64,
                Box::new(OwnedBody::new(message.to_vec())),
            ),
            r => r,
        }
    }

    /// Answers with a prost message: encoded straight into the pool chunk when it fits one
    /// (every answer on the hot paths), else encoded once on the heap and streamed as chunks
    /// free up (an allocate answer with thousands of containers, a report of every
    /// application: rare, so the allocation is the price of not failing them).
    pub fn message<M: prost::Message>(&mut self, m: &M) -> Result<(), ReplyError> {
        let len = m.encoded_len();
        match self.with(len, |mut d| m.encode_raw(&mut d)) {
            Err(ReplyError::TooLarge { .. }) => {
                let mut bytes = Vec::with_capacity(len);
                m.encode_raw(&mut bytes);
                self.stream(len as u64, Box::new(OwnedBody::new(bytes)))
            }
            r => r,
        }
    }

    /// Answers with a message of `len` bytes produced by `source` as pool chunks free up.
    pub fn stream(&mut self, len: u64, source: Box<dyn BodySource>) -> Result<(), ReplyError> {
        if self.replied {
            return Err(ReplyError::AlreadyReplied);
        }
        let header = self.head.header();
        let p = success_prefix_len(&header, len);
        if (p as u64 - 4).saturating_add(len) > frame::JAVA_INT_MAX as u64 {
            return Err(ReplyError::FrameTooLarge { len });
        }
        let chunk = self.sink.chunk_size();
        match &mut self.sink {
            ReplySink::Direct(out) => {
                let Ok(dst) = out.contiguous(p) else {
                    return Err(ReplyError::TooLarge { len, chunk });
                };
                write_success_prefix(dst, &header, len);
                out.advance(p);
                out.seal();
            }
            ReplySink::Staged { buf, .. } => {
                let at = buf.len();
                buf.resize(at + p, 0);
                write_success_prefix(&mut buf[at..], &header, len);
            }
        }
        self.replied = true;
        self.stream = Some((source, len));
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Registry

/// Methods of one protocol version: (name, handler).
type Methods = Vec<(Box<str>, Arc<dyn Handler>)>;
/// Versions of one protocol: (version, methods).
type Versions = Vec<(u64, Methods)>;

/// Protocols and their methods.
///
/// Looked up on every call, so kept as small vectors scanned in order rather than hash maps:
/// a server has a handful of protocols and at most a few dozen methods each, and a scan that
/// compares lengths first costs a few instructions per entry, where SipHash over a 50-byte
/// protocol name and the method name cost about 800 per call (callgrind, heartbeat storm).
#[derive(Default, Clone)]
pub struct Registry {
    /// name → version → method → handler
    protocols: Vec<(Box<str>, Versions)>,
    state_id: Option<Arc<dyn Fn() -> i64 + Send + Sync>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut m = f.debug_map();
        for (name, versions) in &self.protocols {
            for (v, methods) in versions {
                let mut names: Vec<&str> = methods.iter().map(|(k, _)| &**k).collect();
                names.sort_unstable();
                m.entry(&format!("{name} v{v}"), &names);
            }
        }
        m.finish()
    }
}

/// The entry keyed `key` in a small vector, made (with `V::default()`) if absent.
fn entry_of<'v, K: PartialEq + ?Sized, B: std::borrow::Borrow<K>, V: Default>(
    v: &'v mut Vec<(B, V)>,
    key: &K,
    make: impl FnOnce() -> B,
) -> &'v mut V {
    let i = match v.iter().position(|(k, _)| k.borrow() == key) {
        Some(i) => i,
        None => {
            v.push((make(), V::default()));
            v.len() - 1
        }
    };
    &mut v[i].1
}

impl Registry {
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `handler` for `method` of (`protocol`, `version`), replacing any previous one.
    pub fn register(
        &mut self,
        protocol: &str,
        version: u64,
        method: &str,
        handler: impl Handler,
    ) -> &mut Self {
        let versions = entry_of(&mut self.protocols, protocol, || protocol.into());
        let methods = entry_of(versions, &version, || version);
        let handler: Arc<dyn Handler> = Arc::new(handler);
        match methods.iter_mut().find(|(m, _)| **m == *method) {
            Some((_, h)) => *h = handler,
            None => methods.push((method.into(), handler)),
        }
        self
    }

    /// Sets the state id written into every response header (a NameNode's last applied txid,
    /// for observer reads).
    pub fn set_state_id(&mut self, f: impl Fn() -> i64 + Send + Sync + 'static) -> &mut Self {
        self.state_id = Some(Arc::new(f));
        self
    }

    fn lookup(&self, protocol: &str, version: u64, method: &str) -> Lookup<'_> {
        let Some((_, versions)) = self.protocols.iter().find(|(p, _)| **p == *protocol) else {
            return Lookup::NoProtocol;
        };
        let Some((_, methods)) = versions.iter().find(|(v, _)| *v == version) else {
            let highest = versions.iter().map(|(v, _)| *v).max().unwrap_or(0);
            return Lookup::Version { highest };
        };
        match methods.iter().find(|(m, _)| **m == *method) {
            Some((_, h)) => Lookup::Found(h),
            None => Lookup::NoMethod,
        }
    }
}

enum Lookup<'a> {
    Found(&'a Arc<dyn Handler>),
    NoProtocol,
    Version { highest: u64 },
    NoMethod,
}

// ---------------------------------------------------------------------------------------------
// Server

/// Server configuration.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub transport: TransportConfig,
    /// `ipc.maximum.data.length`: largest request frame (default 128 MiB).
    pub max_data_length: u32,
    /// Calls per connection whose responses are not yet completely sent. At the limit the
    /// connection reads nothing more until sends complete. Default 256.
    pub max_outstanding_calls: usize,
    /// Who may connect: the enabled auth methods (SIMPLE, TOKEN with its secrets), the accepted
    /// `hadoop.rpc.protection` levels. Default: SIMPLE only (a SASL client is told to switch to
    /// SIMPLE, as Java's server does).
    pub auth: Arc<ServerAuth>,
    /// Service-level authorization (`hadoop.security.authorization`): the ACL of each
    /// enforced protocol, checked when the connection context names the protocol. `None`:
    /// nothing checked.
    pub authorization: Option<Arc<ServiceAuthorization>>,
    /// `hadoop.proxyuser.*`: a KERBEROS caller whose connection context names another user acts
    /// as that user when these rules let it. `None`: no impersonation.
    pub proxy_users: Option<Arc<ProxyUsers>>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            transport: TransportConfig::default(),
            max_data_length: DEFAULT_MAX_DATA_LENGTH,
            max_outstanding_calls: 256,
            auth: Arc::new(ServerAuth::simple()),
            authorization: None,
            proxy_users: None,
        }
    }
}

/// Errors starting a server.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error(transparent)]
    Transport(#[from] TransportError),
    #[error("invalid server configuration: {0}")]
    Config(&'static str),
}

/// Server-level counters.
#[derive(Debug, Default)]
struct Counters {
    calls: AtomicU64,
    errors: AtomicU64,
    fatals: AtomicU64,
    pings: AtomicU64,
    oversized_frames: AtomicU64,
    auth_successes: AtomicU64,
    auth_failures: AtomicU64,
}

/// A copy of the server's counters (transport counters included).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServerMetrics {
    /// Calls dispatched to a handler or answered with an ERROR.
    pub calls: u64,
    /// ERROR responses.
    pub errors: u64,
    /// FATAL responses (each closes its connection).
    pub fatals: u64,
    /// Pings received (and ignored).
    pub pings: u64,
    /// Frames refused for their length before anything was read or allocated.
    pub oversized_frames: u64,
    /// SASL negotiations that authenticated a client (Java: `RpcAuthenticationSuccesses`).
    pub auth_successes: u64,
    /// Connections refused authentication (Java: `RpcAuthenticationFailures`), each closed:
    /// every FATAL on a SASL connection before SUCCESS (a refused or oversized negotiation
    /// message, a context or call before authenticating; Java counts only the refused
    /// messages), a SIMPLE preamble when SIMPLE is not enabled, a TOKEN context claiming
    /// another user, and wrapped packets that failed their MAC or sequence check.
    pub auth_failures: u64,
    pub transport: MetricsSnapshot,
}

struct ServerShared {
    registry: Registry,
    auth: Arc<ServerAuth>,
    authorization: Option<Arc<ServiceAuthorization>>,
    proxy_users: Option<Arc<ProxyUsers>>,
    max_data_length: u32,
    max_outstanding: usize,
    counters: Counters,
}

/// The transport service: makes a [`ServerConn`] per connection.
struct ServerService(Arc<ServerShared>);

impl Service for ServerService {
    type Session = ServerConn;
    fn open(&self, peer: Option<SocketAddr>) -> ServerConn {
        ServerConn::new(self.0.clone(), peer)
    }
}

/// Reads a server's counters ([`Server::stats`]); cheap to clone, usable from any thread,
/// and still readable (the last values) after the server is shut down.
#[derive(Clone)]
pub struct ServerStats {
    shared: Arc<ServerShared>,
    transport: Arc<transport::Shared>,
}

impl std::fmt::Debug for ServerStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ServerStats").field(&self.metrics()).finish()
    }
}

impl ServerStats {
    /// The counters now.
    pub fn metrics(&self) -> ServerMetrics {
        let c = &self.shared.counters;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ServerMetrics {
            calls: l(&c.calls),
            errors: l(&c.errors),
            fatals: l(&c.fatals),
            pings: l(&c.pings),
            oversized_frames: l(&c.oversized_frames),
            auth_successes: l(&c.auth_successes),
            auth_failures: l(&c.auth_failures),
            transport: self.transport.snapshot(),
        }
    }
}

/// A running IPC server.
pub struct Server {
    running: transport::Running,
    shared: Arc<ServerShared>,
}

impl Server {
    /// Binds `addr` and starts serving `registry`.
    pub fn start(
        addr: SocketAddr,
        config: ServerConfig,
        registry: Registry,
    ) -> Result<Server, ServerError> {
        if config.max_outstanding_calls == 0 {
            return Err(ServerError::Config(
                "max_outstanding_calls must be at least 1",
            ));
        }
        if config.max_data_length == 0 {
            return Err(ServerError::Config("max_data_length must be at least 1"));
        }
        let shared = Arc::new(ServerShared {
            registry,
            auth: config.auth,
            authorization: config.authorization,
            proxy_users: config.proxy_users,
            max_data_length: config.max_data_length,
            max_outstanding: config.max_outstanding_calls,
            counters: Counters::default(),
        });
        let running = transport::start(
            addr,
            config.transport,
            Arc::new(ServerService(shared.clone())),
        )?;
        Ok(Server { running, shared })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.running.local_addr()
    }

    pub fn backend(&self) -> BackendKind {
        self.running.backend()
    }

    /// Total pool bytes (all ring threads).
    pub fn pool_bytes(&self) -> usize {
        self.running.pool_bytes()
    }

    pub fn metrics(&self) -> ServerMetrics {
        self.stats().metrics()
    }

    /// A handle on the counters that can go to another thread (a `/metrics` renderer).
    pub fn stats(&self) -> ServerStats {
        ServerStats {
            shared: self.shared.clone(),
            transport: self.running.shared().clone(),
        }
    }

    /// Closes every connection and stops the ring threads.
    pub fn shutdown(self) {
        self.running.shutdown();
    }
}

// ---------------------------------------------------------------------------------------------
// The connection state machine

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Preamble {
        buf: [u8; 7],
        have: u8,
    },
    /// SASL preamble: negotiation on callId −33 until SUCCESS (or SIMPLE).
    Sasl,
    /// Preamble (and SASL) done; the connection context must come next.
    Context,
    Ready,
    /// A FATAL was sent (or the preamble was refused): ignore everything.
    Dead,
}

/// A streamed response in progress.
struct Streaming {
    source: Box<dyn BodySource>,
    remaining: u64,
}

/// Largest plaintext piece of a streamed body wrapped at a time (also capped by the layer's
/// `max_wrap_input`, the client's receive buffer).
const WRAP_PIECE: usize = 64 * 1024;
/// Initial room of the staging, egress and token buffers of a protected connection.
const WRAP_SCRATCH: usize = 4096;
/// Staging and egress buffers above this size are given back after use.
const KEEP_WRAP_BUFFER: usize = 256 * 1024;

/// One server connection: a sans-IO [`Session`]. Bytes in, response frames out.
pub struct ServerConn {
    acc: FrameAccumulator,
    /// Inner frames inside unwrapped WRAP packets (a security layer is on): several per packet,
    /// or one across several packets.
    inner: FrameAccumulator,
    /// Unwrapped plaintext: `unwrapped[upos..]` is not yet fed to `inner`.
    unwrapped: Vec<u8>,
    upos: usize,
    core: Core,
    /// Input that arrived while the connection could not act on it (backpressure).
    held: Vec<u8>,
}

struct Core {
    sh: Arc<ServerShared>,
    phase: Phase,
    user: Option<Box<str>>,
    stream: Option<Streaming>,
    /// `sealed_total` of the transmit queue at the end of each response not yet fully sent.
    ends: VecDeque<u64>,
    /// Scratch for error frames and messages (reused; capped contents).
    scratch: Vec<u8>,
    msg: String,
    /// The preamble asked for SASL.
    sasl_requested: bool,
    negotiation: Option<Box<ServerNegotiation>>,
    auth_method: AuthMethod,
    token_identifier: Option<Box<[u8]>>,
    /// KERBEROS: the authenticated principal (`user` is its short name).
    principal: Option<Box<str>>,
    /// The client's address (service-level authorization may need its host name).
    peer: Option<SocketAddr>,
    token_context: Option<hadoop_wire::sasl::server::TokenContext>,
    /// The security layer, from SUCCESS on, for `auth-int` / `auth-conf`.
    layer: Option<Box<dyn SecurityLayer>>,
    /// Plain responses written by a handler, wrapped when it is done.
    staging: Vec<u8>,
    /// Wrapped frames not yet copied into the transmit queue: `egress[epos..]`.
    egress: Vec<u8>,
    epos: usize,
    /// Scratch: one wrapped token; one plaintext piece of a streamed body.
    token: Vec<u8>,
    piece: Vec<u8>,
}

/// What handling one frame led to.
enum Next {
    Continue,
    Close,
}

impl ServerConn {
    fn new(sh: Arc<ServerShared>, peer: Option<SocketAddr>) -> Self {
        let decoder = FrameDecoder::new(sh.max_data_length);
        Self {
            acc: FrameAccumulator::new(decoder).with_retained_capacity(16 * 1024),
            inner: FrameAccumulator::new(decoder).with_retained_capacity(16 * 1024),
            unwrapped: Vec::new(),
            upos: 0,
            core: Core {
                sh,
                phase: Phase::Preamble {
                    buf: [0; 7],
                    have: 0,
                },
                user: None,
                stream: None,
                ends: VecDeque::new(),
                scratch: Vec::new(),
                msg: String::new(),
                sasl_requested: false,
                negotiation: None,
                auth_method: AuthMethod::Simple,
                token_identifier: None,
                principal: None,
                peer,
                token_context: None,
                layer: None,
                staging: Vec::new(),
                egress: Vec::new(),
                epos: 0,
                token: Vec::new(),
                piece: Vec::new(),
            },
            held: Vec::new(),
        }
    }

    /// Processes `input` as far as possible; returns how many bytes were used and the flow.
    fn process(&mut self, input: &[u8], out: &mut Outbox<'_>) -> (usize, Flow) {
        let mut used = 0;
        loop {
            if self.core.blocked() {
                return (used, Flow::Continue);
            }
            // Unwrapped plaintext goes first: it arrived before anything still in `input`.
            if self.upos < self.unwrapped.len() {
                if out.reserve_spare().is_err() {
                    return (used, Flow::Continue);
                }
                if let Next::Close = self.inner_frame(out) {
                    return (input.len(), Flow::CloseAfterFlush);
                }
                continue;
            }
            let rest = &input[used..];
            if rest.is_empty() {
                return (used, Flow::Continue);
            }
            // Whatever comes next may need to answer: make sure a whole chunk is at hand
            // before anything is consumed, so that a handler never runs without room.
            if out.reserve_spare().is_err() {
                return (used, Flow::Continue);
            }
            if let Phase::Preamble { mut buf, mut have } = self.core.phase {
                let take = (7 - have as usize).min(rest.len());
                buf[have as usize..have as usize + take].copy_from_slice(&rest[..take]);
                have += take as u8;
                used += take;
                self.core.phase = Phase::Preamble { buf, have };
                if have < 7 {
                    return (used, Flow::Continue);
                }
                if let Next::Close = self.core.preamble(&buf, out) {
                    return (used, Flow::CloseAfterFlush);
                }
                continue;
            }
            if self.core.phase == Phase::Dead {
                return (input.len(), Flow::Continue);
            }
            // While SASL negotiates, frames are capped at the negotiation limit; from SUCCESS
            // (or SIMPLE) on at `ipc.maximum.data.length`. The accumulator is at a frame
            // boundary whenever the phase changes, so the new cap applies to the next length.
            let cap = self.core.frame_cap();
            if self.acc.decoder().max_len != cap {
                self.acc.set_decoder(FrameDecoder::new(cap));
            }
            let step = match self.acc.next_frame(rest) {
                Ok(s) => s,
                Err(e) => {
                    // Only the length check fails here: nothing of the claimed body was read
                    // and nothing was allocated for it.
                    if self.core.phase == Phase::Sasl {
                        self.core.oversized_negotiation(&e, out);
                    } else {
                        self.core.oversized(&e, self.acc.decoder().cap(), out);
                    }
                    return (input.len(), Flow::CloseAfterFlush);
                }
            };
            used += step.consumed;
            let Some(body) = step.frame else {
                return (used, Flow::Continue);
            };
            let next = if self.core.layer.is_some() {
                self.core.unwrap_packet(&body, &mut self.unwrapped, out)
            } else {
                self.core.frame(&body, out)
            };
            if let Next::Close = next {
                return (input.len(), Flow::CloseAfterFlush);
            }
        }
    }

    /// Feeds unwrapped plaintext to the inner frame accumulator and handles the frame it
    /// completes, if any.
    fn inner_frame(&mut self, out: &mut Outbox<'_>) -> Next {
        let rest = &self.unwrapped[self.upos..];
        let step = match self.inner.next_frame(rest) {
            Ok(s) => s,
            Err(e) => {
                self.core.oversized(&e, self.inner.decoder().cap(), out);
                return Next::Close;
            }
        };
        self.upos += step.consumed;
        let next = match step.frame {
            Some(body) => self.core.frame(&body, out),
            None => Next::Continue,
        };
        if self.upos == self.unwrapped.len() {
            self.unwrapped.clear();
            self.upos = 0;
            if self.unwrapped.capacity() > KEEP_WRAP_BUFFER {
                self.unwrapped = Vec::new();
            }
        }
        next
    }

    /// Continues a streamed body, then input held back by backpressure.
    fn resume(&mut self, out: &mut Outbox<'_>) -> Flow {
        self.core.retire(out);
        if !self.core.pump(out) {
            return Flow::Continue;
        }
        if self.core.phase == Phase::Dead {
            return Flow::Continue;
        }
        if (self.held.is_empty() && self.upos == self.unwrapped.len()) || self.core.blocked() {
            return Flow::Continue;
        }
        let held = std::mem::take(&mut self.held);
        let (used, flow) = self.process(&held, out);
        let mut held = held;
        if flow == Flow::Continue && used < held.len() {
            held.drain(..used);
            self.held = held;
        } else {
            // Keep the allocation for next time only if it is small.
            held.clear();
            if held.capacity() <= 64 * 1024 {
                self.held = held;
            }
        }
        flow
    }
}

impl Session for ServerConn {
    fn on_recv(&mut self, data: &[u8], out: &mut Outbox<'_>) -> Flow {
        self.core.retire(out);
        if !self.held.is_empty() || self.upos < self.unwrapped.len() || self.core.blocked() {
            if self.core.phase != Phase::Dead {
                self.held.extend_from_slice(data);
            }
            return self.resume(out);
        }
        let (used, flow) = self.process(data, out);
        if flow == Flow::Continue && used < data.len() {
            self.held.extend_from_slice(&data[used..]);
        }
        flow
    }

    fn on_send_progress(&mut self, out: &mut Outbox<'_>) -> Flow {
        self.resume(out)
    }

    fn wants_input(&self) -> bool {
        self.held.is_empty() && self.upos == self.unwrapped.len() && !self.core.blocked()
    }

    fn is_idle(&self) -> bool {
        self.held.is_empty()
            && self.acc.pending() == 0
            && self.inner.pending() == 0
            && self.upos == self.unwrapped.len()
            && self.core.stream.is_none()
            && self.core.epos == self.core.egress.len()
            && self.core.ends.is_empty()
    }

    /// Authenticated (SASL SUCCESS or SIMPLE) and the connection context read.
    fn established(&self) -> bool {
        self.core.phase == Phase::Ready
    }
}

fn quote(s: &str) -> &str {
    if s.len() <= MAX_QUOTED {
        return s;
    }
    let mut end = MAX_QUOTED;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

impl Core {
    /// Whether new frames must wait: a streamed body is in progress, the outstanding-call limit
    /// is reached, or the connection is finished.
    fn blocked(&self) -> bool {
        self.stream.is_some()
            || self.epos < self.egress.len()
            || self.ends.len() >= self.sh.max_outstanding
            || self.phase == Phase::Dead
    }

    /// Forgets responses that are completely sent.
    fn retire(&mut self, out: &Outbox<'_>) {
        let sent = out.queue().sent_total();
        while self.ends.front().is_some_and(|&e| e <= sent) {
            self.ends.pop_front();
        }
    }

    /// Pushes wrapped bytes and the streamed body as far as the pool allows; true when both are
    /// done (or there are none).
    fn pump(&mut self, out: &mut Outbox<'_>) -> bool {
        if !drain(&mut self.egress, &mut self.epos, out) {
            return false;
        }
        let Some(s) = self.stream.as_mut() else {
            return true;
        };
        match self.layer.as_mut() {
            None => {
                while s.remaining > 0 {
                    let Ok(tail) = out.tail() else {
                        return false;
                    };
                    let n = (tail.len() as u64).min(s.remaining) as usize;
                    s.source.fill(&mut tail[..n]);
                    out.advance(n);
                    out.seal();
                    s.remaining -= n as u64;
                }
            }
            Some(layer) => {
                // Each piece of the body becomes one WRAP packet; the client reads the
                // unwrapped bytes as one stream, so the response may span packets.
                let piece = WRAP_PIECE.min(layer.max_wrap_input().max(1));
                while s.remaining > 0 {
                    let n = (piece as u64).min(s.remaining) as usize;
                    self.piece.resize(n, 0);
                    s.source.fill(&mut self.piece);
                    s.remaining -= n as u64;
                    if let Err(e) = wrap_into(
                        layer.as_mut(),
                        &self.piece,
                        &mut self.token,
                        &mut self.egress,
                    ) {
                        tracing::error!("wrapping a streamed response failed: {e}");
                        self.stream = None;
                        self.phase = Phase::Dead;
                        return true;
                    }
                    if !drain(&mut self.egress, &mut self.epos, out) {
                        if s.remaining == 0 {
                            self.stream = None;
                            let end =
                                out.queue().sealed_total() + (self.egress.len() - self.epos) as u64;
                            self.ends.push_back(end);
                        }
                        return false;
                    }
                }
                if self.piece.capacity() > KEEP_WRAP_BUFFER {
                    self.piece = Vec::new();
                }
            }
        }
        self.stream = None;
        self.ends.push_back(out.queue().sealed_total());
        true
    }

    /// Sends `self.scratch` (a complete response frame): wrapped when a security layer is on.
    /// Returns the end of the response in the transmit queue's sealed count.
    fn send_scratch(&mut self, out: &mut Outbox<'_>) -> u64 {
        match self.layer.as_mut() {
            None => {
                if self.scratch.len() <= out.chunk_size() {
                    let _ = out.write_sealed(&self.scratch);
                }
            }
            Some(layer) => {
                if let Err(e) = wrap_into(
                    layer.as_mut(),
                    &self.scratch,
                    &mut self.token,
                    &mut self.egress,
                ) {
                    tracing::error!("wrapping a response failed: {e}");
                    self.phase = Phase::Dead;
                }
                drain(&mut self.egress, &mut self.epos, out);
            }
        }
        out.queue().sealed_total() + (self.egress.len() - self.epos) as u64
    }

    /// Wraps what a handler staged (one response, in pieces the client's buffer takes) into
    /// egress and pushes it out as far as the pool allows.
    fn flush_staged(&mut self, out: &mut Outbox<'_>) {
        let Some(layer) = self.layer.as_mut() else {
            return;
        };
        let piece = layer.max_wrap_input().max(1);
        for part in self.staging.chunks(piece) {
            if let Err(e) = wrap_into(layer.as_mut(), part, &mut self.token, &mut self.egress) {
                tracing::error!("wrapping a response failed: {e}");
                self.phase = Phase::Dead;
                break;
            }
        }
        self.staging.clear();
        if self.staging.capacity() > KEEP_WRAP_BUFFER {
            self.staging = Vec::new();
        }
        drain(&mut self.egress, &mut self.epos, out);
    }

    /// An outer frame on a connection with a security layer: it must be a WRAP packet; its
    /// plaintext is appended to `unwrapped` for the inner frame accumulator.
    fn unwrap_packet(
        &mut self,
        body: &[u8],
        unwrapped: &mut Vec<u8>,
        out: &mut Outbox<'_>,
    ) -> Next {
        use RpcErrorCodeProto::FatalInvalidRpcHeader as Inval;
        let token = RequestFrame::split(body).ok().and_then(|f| {
            let h = RpcRequestHeaderView::new(f.rpc_header);
            let call_id = h.call_id().ok()?;
            if call_id != SASL_CALL_ID || f.request_header.is_some() {
                return None;
            }
            let v = SaslMessageView::read(f.payload?).ok()?;
            v.is_wrap().then_some(v.token.unwrap_or(&[]))
        });
        let Some(token) = token else {
            // Java would take an unwrapped frame here; a client that negotiated a protection
            // level and then sends in the clear is refused (our choice).
            return self.fatal_class(
                AUTHORIZATION_FAILED_CALL_ID,
                SASL_EXCEPTION,
                Inval,
                format_args!("Unwrapped frame on a connection protected by SASL"),
                out,
            );
        };
        let layer = self.layer.as_mut().expect("unwrap_packet with a layer");
        if let Err(e) = layer.unwrap(token, unwrapped) {
            self.sh
                .counters
                .auth_failures
                .fetch_add(1, Ordering::Relaxed);
            tracing::warn!("closing connection: {e}");
            let class = e.java_class();
            return self.fatal_class(
                SASL_CALL_ID,
                class,
                RpcErrorCodeProto::FatalUnauthorized,
                format_args!("{e}"),
                out,
            );
        }
        Next::Continue
    }

    fn preamble(&mut self, buf: &[u8; 7], out: &mut Outbox<'_>) -> Next {
        match frame::parse_preamble(buf) {
            Ok(PreambleOutcome::Simple { .. }) => {
                if !self.sh.auth.simple_enabled() {
                    self.sh
                        .counters
                        .auth_failures
                        .fetch_add(1, Ordering::Relaxed);
                    let methods = self.sh.auth.methods_text();
                    return self.fatal_class(
                        AUTHORIZATION_FAILED_CALL_ID,
                        ACCESS_CONTROL_EXCEPTION,
                        RpcErrorCodeProto::FatalUnauthorized,
                        format_args!("SIMPLE authentication is not enabled.  Available:{methods}"),
                        out,
                    );
                }
                self.phase = Phase::Context;
                Next::Continue
            }
            Ok(PreambleOutcome::Sasl { .. }) => {
                self.sasl_requested = true;
                self.negotiation = Some(Box::new(ServerNegotiation::new(self.sh.auth.clone())));
                self.phase = Phase::Sasl;
                Next::Continue
            }
            Ok(PreambleOutcome::HttpProbe) => {
                let _ = out.write_sealed(frame::HTTP_PROBE_RESPONSE);
                self.phase = Phase::Dead;
                Next::Close
            }
            Ok(PreambleOutcome::VersionMismatch {
                magic_ok,
                client_version,
            }) => {
                // Java answers clients of version >= 9 (the FATAL format exists there) and
                // just closes on anything else.
                if magic_ok && client_version >= IPC_VERSION {
                    self.scratch.clear();
                    if encode::version_mismatch_response(
                        &mut self.scratch,
                        client_version,
                        &mut self.msg,
                    )
                    .is_ok()
                    {
                        let _ = out.write_sealed(&self.scratch);
                    }
                }
                self.sh.counters.fatals.fetch_add(1, Ordering::Relaxed);
                self.phase = Phase::Dead;
                Next::Close
            }
            Ok(PreambleOutcome::NeedMore(_)) => Next::Continue,
            Err(e) => {
                // An unknown auth protocol.
                self.msg.clear();
                let _ = write!(self.msg, "{e}");
                self.fatal(
                    AUTHORIZATION_FAILED_CALL_ID,
                    &[],
                    -1,
                    RpcErrorCodeProto::FatalUnauthorized,
                    None,
                    out,
                );
                Next::Close
            }
        }
    }

    /// The cap on the next outer frame's length: the SASL negotiation limit until the
    /// connection is authenticated (SASL preamble, negotiation not finished), else
    /// `ipc.maximum.data.length`.
    fn frame_cap(&self) -> u32 {
        if self.phase == Phase::Sasl {
            sasl_message::max_negotiation_frame(self.sh.auth.max_message())
                .min(self.sh.max_data_length)
        } else {
            self.sh.max_data_length
        }
    }

    /// A frame over the negotiation cap ([`sasl_message::max_negotiation_frame`]) while SASL
    /// is negotiating, refused on its 4-byte length before any of the body is buffered.
    ///
    /// Java has no such cap: its server checks every length only against
    /// `ipc.maximum.data.length` (`Connection.checkDataLength`: it logs "Requested data length
    /// N is longer than maximum configured RPC length M.  RPC came from HOST", throws an
    /// `IOException` and closes without a reply), so a peer that has not authenticated can make
    /// it buffer up to 128 MiB. We refuse at the SASL cap, answer with a FATAL in Java's words
    /// (callId −1, as no header was read; `FATAL_UNAUTHORIZED`; `SaslException`, as the other
    /// negotiation refusals), count an authentication failure (and an oversized frame), close.
    fn oversized_negotiation(&mut self, e: &hadoop_wire::FrameError, out: &mut Outbox<'_>) {
        // The authentication failure is counted by `fatal_with`.
        self.sh
            .counters
            .oversized_frames
            .fetch_add(1, Ordering::Relaxed);
        tracing::info!("SASL refused: {e} during negotiation");
        self.negotiation = None;
        let text = match e {
            hadoop_wire::FrameError::FrameTooLong { len, max } => format!(
                "Requested data length {len} is longer than maximum SASL negotiation length {max}."
            ),
            other => other.to_string(),
        };
        let _ = self.fatal_class(
            AUTHORIZATION_FAILED_CALL_ID,
            SASL_EXCEPTION,
            RpcErrorCodeProto::FatalUnauthorized,
            format_args!("{text}"),
            out,
        );
    }

    /// A frame (outer, or inner in unwrapped data) claimed more than `cap` bytes: counted, a
    /// FATAL (callId −1), and the connection closes.
    fn oversized(&mut self, e: &hadoop_wire::FrameError, cap: u32, out: &mut Outbox<'_>) {
        self.sh
            .counters
            .oversized_frames
            .fetch_add(1, Ordering::Relaxed);
        tracing::warn!("closing connection: {e}");
        self.msg.clear();
        let _ = write!(
            self.msg,
            "Requested data length is longer than maximum configured RPC length {cap}: {e}"
        );
        self.fatal(
            AUTHORIZATION_FAILED_CALL_ID,
            &[],
            -1,
            RpcErrorCodeProto::FatalInvalidRpcHeader,
            None,
            out,
        );
    }

    /// Writes a FATAL response with `self.msg` (or `msg`) and marks the connection dead.
    fn fatal(
        &mut self,
        call_id: i32,
        client_id: &[u8],
        retry_count: i32,
        code: RpcErrorCodeProto,
        msg: Option<&str>,
        out: &mut Outbox<'_>,
    ) {
        self.fatal_with(
            call_id,
            client_id,
            retry_count,
            FATAL_EXCEPTION,
            code,
            msg,
            out,
        )
    }

    /// A FATAL naming `class` (SASL refusals name the true cause, as Java's server does), with
    /// an empty client id and retry count −1, closing the connection.
    fn fatal_class(
        &mut self,
        call_id: i32,
        class: &str,
        code: RpcErrorCodeProto,
        args: std::fmt::Arguments<'_>,
        out: &mut Outbox<'_>,
    ) -> Next {
        self.msg.clear();
        let _ = self.msg.write_fmt(args);
        self.fatal_with(call_id, &[], -1, class, code, None, out);
        Next::Close
    }

    #[allow(clippy::too_many_arguments)]
    fn fatal_with(
        &mut self,
        call_id: i32,
        client_id: &[u8],
        retry_count: i32,
        class: &str,
        code: RpcErrorCodeProto,
        msg: Option<&str>,
        out: &mut Outbox<'_>,
    ) {
        let message = msg.unwrap_or(&self.msg);
        let client_id = if client_id.len() <= MAX_CLIENT_ID {
            client_id
        } else {
            &[]
        };
        let header = RpcResponseHeader::success(call_id, client_id, retry_count);
        let failure = RpcFailure {
            status: RpcStatusProto::Fatal,
            exception_class_name: class,
            error_msg: message,
            error_detail: code,
        };
        self.scratch.clear();
        if encode::error_response_frame(&mut self.scratch, &header, &failure).is_ok() {
            self.send_scratch(out);
        }
        self.sh.counters.fatals.fetch_add(1, Ordering::Relaxed);
        if self.phase == Phase::Sasl {
            // Whatever ends a SASL connection before SUCCESS (a refused message, one over the
            // cap, a context or a call before authenticating) is an authentication failure.
            // Java counts only what `processSaslMessage` refuses; its other errors here are
            // the same FATALs, just not counted.
            self.sh
                .counters
                .auth_failures
                .fetch_add(1, Ordering::Relaxed);
        }
        self.phase = Phase::Dead;
    }

    fn fatal_fmt(
        &mut self,
        call_id: i32,
        client_id: &[u8],
        retry_count: i32,
        code: RpcErrorCodeProto,
        args: std::fmt::Arguments<'_>,
        out: &mut Outbox<'_>,
    ) -> Next {
        self.msg.clear();
        let _ = self.msg.write_fmt(args);
        self.fatal(call_id, client_id, retry_count, code, None, out);
        Next::Close
    }

    /// Writes an ERROR response; the connection stays open.
    fn error(
        &mut self,
        head: &HeadFields,
        class: &str,
        message: &str,
        code: RpcErrorCodeProto,
        out: &mut Outbox<'_>,
    ) {
        let header = head.header();
        let failure = RpcFailure {
            status: RpcStatusProto::Error,
            exception_class_name: quote(class),
            error_msg: if message.len() > 4 * MAX_QUOTED {
                quote(message)
            } else {
                message
            },
            error_detail: code,
        };
        self.scratch.clear();
        let mut end = out.queue().sealed_total();
        if encode::error_response_frame(&mut self.scratch, &header, &failure).is_ok() {
            end = self.send_scratch(out);
        }
        self.sh.counters.errors.fetch_add(1, Ordering::Relaxed);
        self.ends.push_back(end);
    }

    /// Handles one request frame body.
    fn frame(&mut self, body: &[u8], out: &mut Outbox<'_>) -> Next {
        use RpcErrorCodeProto::{
            FatalDeserializingRequest as Deser, FatalInvalidRpcHeader as Inval,
        };
        let f = match RequestFrame::split(body) {
            Ok(f) => f,
            Err(e) => {
                return self.fatal_fmt(
                    -1,
                    &[],
                    -1,
                    Deser,
                    format_args!("Error decoding RpcRequestHeaderProto: {e}"),
                    out,
                )
            }
        };
        let h = RpcRequestHeaderView::new(f.rpc_header);
        if let Err(e) = h.validate() {
            return self.fatal_fmt(
                -1,
                &[],
                -1,
                Deser,
                format_args!("Error decoding RpcRequestHeaderProto: {e}"),
                out,
            );
        }
        // validate() checked the required fields, so these reads succeed.
        let call_id = h.call_id().unwrap_or(-1);
        let retry = h.retry_count().unwrap_or(-1);
        let client_id = h.client_id().unwrap_or(&[]);
        match h.rpc_op_raw() {
            Ok(Some(0)) => {}
            Ok(Some(op)) => {
                return self.fatal_fmt(
                    call_id,
                    client_id,
                    retry,
                    Inval,
                    format_args!("IPC Server does not implement rpc header operation{op}"),
                    out,
                )
            }
            _ => {
                return self.fatal_fmt(
                    call_id,
                    client_id,
                    retry,
                    Inval,
                    format_args!(" IPC Server: No rpc op in rpcRequestHeader"),
                    out,
                )
            }
        }
        let kind = match h.rpc_kind_raw() {
            Ok(Some(k)) => k,
            _ => {
                return self.fatal_fmt(
                    call_id,
                    client_id,
                    retry,
                    Inval,
                    format_args!(" IPC Server: No rpc kind in rpcRequestHeader"),
                    out,
                )
            }
        };
        if client_id.len() > MAX_CLIENT_ID {
            return self.fatal_fmt(
                call_id,
                &[],
                retry,
                Inval,
                format_args!(
                    "clientId of {} bytes; this server accepts at most {MAX_CLIENT_ID}",
                    client_id.len()
                ),
                out,
            );
        }
        if call_id < 0 {
            return self.out_of_band(call_id, client_id, retry, &f, out);
        }
        if self.phase != Phase::Ready {
            return self.fatal_fmt(
                call_id,
                client_id,
                retry,
                Inval,
                format_args!("Connection context not established"),
                out,
            );
        }
        if kind != encode::RPC_KIND_PROTOCOL_BUFFER {
            return self.fatal_fmt(
                call_id,
                client_id,
                retry,
                Inval,
                format_args!("Unknown rpc kind in rpc header{kind}"),
                out,
            );
        }
        let (Some(rh), Some(request)) = (f.request_header, f.payload) else {
            return self.fatal_fmt(call_id, client_id, retry, Deser, format_args!("IPC server unable to read call parameters: a call needs a RequestHeaderProto and a request"), out);
        };
        let rh = RequestHeaderView::new(rh);
        let names = rh.validate().and_then(|()| {
            Ok((
                rh.declaring_class_protocol_name()?,
                rh.method_name()?,
                rh.client_protocol_version()?,
            ))
        });
        let (protocol, method, version) = match names {
            Ok(n) => n,
            Err(e) => {
                return self.fatal_fmt(
                    call_id,
                    client_id,
                    retry,
                    Deser,
                    format_args!("IPC server unable to read call parameters: {e}"),
                    out,
                )
            }
        };
        let mut head = HeadFields {
            call_id,
            retry_count: retry,
            client_id: [0; MAX_CLIENT_ID],
            client_id_len: client_id.len(),
            state_id: self.sh.registry.state_id.as_ref().map(|f| f()),
        };
        head.client_id[..client_id.len()].copy_from_slice(client_id);
        self.sh.counters.calls.fetch_add(1, Ordering::Relaxed);
        let sh = self.sh.clone();
        let handler = match sh.registry.lookup(protocol, version, method) {
            Lookup::Found(h) => h,
            Lookup::NoProtocol => {
                self.msg.clear();
                let _ = write!(self.msg, "Unknown protocol: {}", quote(protocol));
                let m = std::mem::take(&mut self.msg);
                self.error(
                    &head,
                    NO_SUCH_PROTOCOL_EXCEPTION,
                    &m,
                    RpcErrorCodeProto::ErrorNoSuchProtocol,
                    out,
                );
                self.msg = m;
                return Next::Continue;
            }
            Lookup::Version { highest } => {
                self.msg.clear();
                let _ = write!(
                    self.msg,
                    "Protocol {} version mismatch. (client = {version}, server = {highest})",
                    quote(protocol)
                );
                let m = std::mem::take(&mut self.msg);
                self.error(
                    &head,
                    VERSION_MISMATCH_EXCEPTION,
                    &m,
                    RpcErrorCodeProto::ErrorRpcVersionMismatch,
                    out,
                );
                self.msg = m;
                return Next::Continue;
            }
            Lookup::NoMethod => {
                self.msg.clear();
                let _ = write!(
                    self.msg,
                    "Unknown method {} called on {} protocol.",
                    quote(method),
                    quote(protocol)
                );
                let m = std::mem::take(&mut self.msg);
                self.error(
                    &head,
                    NO_SUCH_METHOD_EXCEPTION,
                    &m,
                    RpcErrorCodeProto::ErrorNoSuchMethod,
                    out,
                );
                self.msg = m;
                return Next::Continue;
            }
        };
        let call = Call {
            call_id,
            retry_count: retry,
            client_id,
            client_state_id: h.state_id().ok().flatten(),
            protocol,
            protocol_version: version,
            method,
            request,
            rpc_header: h,
            request_header: rh,
            user: self.user.as_deref(),
            auth_method: self.auth_method,
            principal: self.principal.as_deref(),
            token_identifier: self.token_identifier.as_deref(),
            token_context: self.token_context.as_deref(),
        };
        let staged = self.layer.is_some();
        let chunk = out.chunk_size();
        let mut reply = Reply {
            sink: reply_sink(staged, chunk, out, &mut self.staging),
            head,
            replied: false,
            stream: None,
        };
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| handler.call(&call, &mut reply)));
        let (replied, stream) = (reply.replied, reply.stream.take());
        drop(reply);
        match result {
            Ok(Ok(())) => {
                if !replied {
                    // Nothing written: an empty message (one 00 length byte).
                    let mut r = Reply {
                        sink: reply_sink(staged, chunk, out, &mut self.staging),
                        head,
                        replied: false,
                        stream: None,
                    };
                    let _ = r.with(0, |_| {});
                }
            }
            Ok(Err(e)) => {
                if replied {
                    tracing::warn!(
                        "handler for {}.{} returned an error after replying; the reply stands: {}",
                        quote(protocol),
                        quote(method),
                        e.message
                    );
                } else {
                    out.rollback();
                    self.staging.clear();
                    self.error(&head, &e.exception_class, &e.message, e.detail, out);
                    return Next::Continue;
                }
            }
            Err(_) => {
                tracing::error!("handler for {}.{} panicked", quote(protocol), quote(method));
                if !replied {
                    out.rollback();
                    self.staging.clear();
                    self.error(
                        &head,
                        SERVER_EXCEPTION,
                        "the handler panicked",
                        RpcErrorCodeProto::ErrorRpcServer,
                        out,
                    );
                    return Next::Continue;
                }
                if stream.is_some() {
                    // The header promised a body we cannot produce: the stream is broken.
                    return self.fatal_fmt(
                        call_id,
                        client_id,
                        retry,
                        RpcErrorCodeProto::FatalUnknown,
                        format_args!("the handler panicked while streaming"),
                        out,
                    );
                }
            }
        }
        if staged {
            self.flush_staged(out);
        }
        match stream {
            Some((source, len)) => {
                self.stream = Some(Streaming {
                    source,
                    remaining: len,
                });
                self.pump(out);
            }
            None => {
                let end = out.queue().sealed_total() + (self.egress.len() - self.epos) as u64;
                self.ends.push_back(end);
            }
        }
        Next::Continue
    }

    fn out_of_band(
        &mut self,
        call_id: i32,
        client_id: &[u8],
        retry: i32,
        f: &RequestFrame<'_>,
        out: &mut Outbox<'_>,
    ) -> Next {
        use RpcErrorCodeProto::{
            FatalDeserializingRequest as Deser, FatalInvalidRpcHeader as Inval,
        };
        match call_id {
            CONNECTION_CONTEXT_CALL_ID => {
                if self.phase == Phase::Sasl {
                    return self.fatal_fmt(
                        call_id,
                        client_id,
                        retry,
                        Inval,
                        format_args!("Connection header sent during SASL negotiation"),
                        out,
                    );
                }
                if self.phase == Phase::Ready {
                    return self.fatal_fmt(
                        call_id,
                        client_id,
                        retry,
                        Inval,
                        format_args!("Connection context already processed"),
                        out,
                    );
                }
                if f.check_call_id(call_id).is_err() {
                    return self.fatal_fmt(call_id, client_id, retry, Deser, format_args!("Error decoding IpcConnectionContextProto: the frame must be the RPC header and one message"), out);
                }
                let ctx = match IpcConnectionContextProto::decode(f.payload.unwrap_or(&[])) {
                    Ok(c) => c,
                    Err(e) => {
                        return self.fatal_fmt(
                            call_id,
                            client_id,
                            retry,
                            Deser,
                            format_args!("Error decoding IpcConnectionContextProto: {e}"),
                            out,
                        )
                    }
                };
                let real_user = ctx.user_info.as_ref().and_then(|u| u.real_user.clone());
                let claimed = ctx.user_info.and_then(|u| u.effective_user);
                if self.auth_method == AuthMethod::Token {
                    // The token decides who this is; a different claim is refused (Java's
                    // authorizeConnection). No claim, as Java's TOKEN clients send, is fine.
                    if let Some(c) = claimed.as_deref() {
                        let authenticated = self.user.as_deref().unwrap_or("");
                        if c != authenticated {
                            self.sh
                                .counters
                                .auth_failures
                                .fetch_add(1, Ordering::Relaxed);
                            let authenticated = authenticated.to_string();
                            return self.fatal_class(
                                call_id,
                                ACCESS_CONTROL_EXCEPTION,
                                RpcErrorCodeProto::FatalUnauthorized,
                                format_args!(
                                    "Authenticated user ({authenticated}) doesn't match what the client claims to be ({})",
                                    quote(c)
                                ),
                                out,
                            );
                        }
                    }
                } else if self.auth_method == AuthMethod::Kerberos {
                    // Java's client claims `ugi.getUserName()`, the principal itself; another
                    // name is a proxy-user request, granted by the `hadoop.proxyuser.*` rules.
                    let principal = self.principal.as_deref().unwrap_or("");
                    if let Some(c) = claimed.as_deref().filter(|c| *c != principal) {
                        let real = self.user.as_deref().unwrap_or("");
                        let verdict = match &self.sh.proxy_users {
                            // A name too long to keep whole is never granted (it would be
                            // kept cut short, perhaps as someone else's).
                            Some(p) if c.len() <= MAX_QUOTED => {
                                p.authorize(real, principal, c, self.peer.map(|a| a.ip()))
                            }
                            _ => Err(format!(
                                "User: {principal} is not allowed to impersonate {}",
                                quote(c)
                            )),
                        };
                        match verdict {
                            Ok(()) => {
                                tracing::debug!("{principal} acts as {c}");
                                self.user = Some(c.into());
                            }
                            Err(why) => {
                                self.sh
                                    .counters
                                    .auth_failures
                                    .fetch_add(1, Ordering::Relaxed);
                                return self.fatal_class(
                                    call_id,
                                    AUTHORIZATION_EXCEPTION,
                                    RpcErrorCodeProto::FatalUnauthorized,
                                    format_args!("{why}"),
                                    out,
                                );
                            }
                        }
                    }
                } else {
                    // SIMPLE: a `realUser` asks to act as `effectiveUser` (Java's
                    // createProxyUser + ProxyUsers.authorize); without rules nobody may.
                    if let (Some(r), Some(c)) = (real_user.as_deref(), claimed.as_deref()) {
                        let verdict = match &self.sh.proxy_users {
                            Some(p) if c.len() <= MAX_QUOTED => {
                                p.authorize(r, r, c, self.peer.map(|a| a.ip()))
                            }
                            _ => Err(format!(
                                "User: {} is not allowed to impersonate {}",
                                quote(r),
                                quote(c)
                            )),
                        };
                        if let Err(why) = verdict {
                            self.sh
                                .counters
                                .auth_failures
                                .fetch_add(1, Ordering::Relaxed);
                            return self.fatal_class(
                                call_id,
                                AUTHORIZATION_EXCEPTION,
                                RpcErrorCodeProto::FatalUnauthorized,
                                format_args!("{why}"),
                                out,
                            );
                        }
                    }
                    self.user = claimed.map(|u| quote(&u).into());
                }
                if let Some(authz) = self.sh.authorization.clone() {
                    let user = self.user.as_deref().unwrap_or("");
                    let who = Subject {
                        user,
                        full_name: self.principal.as_deref().unwrap_or(user),
                        method: self.auth_method,
                        peer: self.peer.map(|p| p.ip()),
                    };
                    let protocol = ctx.protocol.as_deref().unwrap_or("");
                    if let Err(why) = authz.authorize(&who, protocol) {
                        self.sh
                            .counters
                            .auth_failures
                            .fetch_add(1, Ordering::Relaxed);
                        return self.fatal_class(
                            call_id,
                            AUTHORIZATION_EXCEPTION,
                            RpcErrorCodeProto::FatalUnauthorized,
                            format_args!("{why}"),
                            out,
                        );
                    }
                }
                self.phase = Phase::Ready;
                Next::Continue
            }
            PING_CALL_ID => {
                self.sh.counters.pings.fetch_add(1, Ordering::Relaxed);
                Next::Continue
            }
            SASL_CALL_ID => self.sasl(f.payload, out),
            _ => self.fatal_fmt(
                call_id,
                client_id,
                retry,
                Inval,
                format_args!("Unknown out of band call #{call_id}"),
                out,
            ),
        }
    }
}

/// `javax.security.sasl.SaslException`.
const SASL_EXCEPTION: &str = "javax.security.sasl.SaslException";
/// `org.apache.hadoop.security.AccessControlException`.
const ACCESS_CONTROL_EXCEPTION: &str = "org.apache.hadoop.security.AccessControlException";

impl Core {
    /// A callId −33 frame that is not an unwrapped packet: negotiation, or a protocol error.
    fn sasl(&mut self, payload: Option<&[u8]>, out: &mut Outbox<'_>) -> Next {
        use RpcErrorCodeProto::FatalInvalidRpcHeader as Inval;
        let payload = payload.unwrap_or(&[]);
        if !self.sasl_requested {
            return self.fatal_class(
                SASL_CALL_ID,
                FATAL_EXCEPTION,
                Inval,
                format_args!("SASL protocol not requested by client"),
                out,
            );
        }
        let wrap = SaslMessageView::read(payload).is_ok_and(|v| v.is_wrap());
        let Some(negotiation) = self.negotiation.as_mut() else {
            // Negotiation finished: only WRAP packets may follow, and only with a layer (which
            // `unwrap_packet` handles before frames get here).
            let text = if wrap {
                "Server is not wrapping data"
            } else {
                "Negotiation is already complete"
            };
            return self.fatal_class(
                SASL_CALL_ID,
                SASL_EXCEPTION,
                Inval,
                format_args!("{text}"),
                out,
            );
        };
        if wrap {
            return self.fatal_class(
                SASL_CALL_ID,
                SASL_EXCEPTION,
                Inval,
                format_args!("Server is not wrapping data"),
                out,
            );
        }
        match negotiation.on_message(payload, &mut OsEntropy) {
            Ok(ServerStep::Reply(m)) => {
                self.send_negotiation(&m, out);
                Next::Continue
            }
            Ok(ServerStep::Simple { reply }) => {
                if let Some(m) = reply {
                    self.send_negotiation(&m, out);
                }
                self.negotiation = None;
                self.auth_method = AuthMethod::Simple;
                self.phase = Phase::Context;
                Next::Continue
            }
            Ok(ServerStep::Success { reply, auth }) => {
                // SUCCESS goes out in the clear; the layer applies from the next byte on.
                self.send_negotiation(&reply, out);
                self.sh
                    .counters
                    .auth_successes
                    .fetch_add(1, Ordering::Relaxed);
                self.negotiation = None;
                self.auth_method = auth.method;
                self.user = Some(quote(&auth.user).into());
                self.token_identifier = auth.token_identifier.map(Vec::into_boxed_slice);
                self.principal = auth.principal.map(String::into_boxed_str);
                tracing::debug!(
                    "SASL: {} authenticated by {} at {} (user {})",
                    self.principal.as_deref().unwrap_or(&auth.user),
                    auth.method,
                    auth.qop.sasl_name(),
                    auth.user
                );
                self.token_context = auth.token_context;
                if auth.layer.is_some() {
                    // Room for small responses from the start, so that a response growing by
                    // a byte (longer call ids) does not reallocate in the steady state.
                    self.staging.reserve(WRAP_SCRATCH);
                    self.egress.reserve(WRAP_SCRATCH);
                    self.token.reserve(WRAP_SCRATCH);
                }
                self.layer = auth.layer;
                self.phase = Phase::Context;
                Next::Continue
            }
            Err(ServerFailure { error, code }) => {
                // Counted by `fatal_with` (a FATAL during negotiation).
                tracing::info!("SASL refused: {} {error}", error.java_class());
                self.negotiation = None;
                let class = error.java_class();
                self.fatal_class(SASL_CALL_ID, class, code, format_args!("{error}"), out)
            }
        }
    }

    /// Writes a negotiation reply (in the clear).
    fn send_negotiation(
        &mut self,
        m: &hadoop_wire::pb::hadoop::common::RpcSaslProto,
        out: &mut Outbox<'_>,
    ) {
        self.scratch.clear();
        if sasl_message::server_frame(&mut self.scratch, m).is_ok()
            && self.scratch.len() <= out.chunk_size()
        {
            let _ = out.write_sealed(&self.scratch);
        } else {
            tracing::error!(
                "SASL reply of {} bytes does not fit a pool chunk",
                self.scratch.len()
            );
            self.phase = Phase::Dead;
        }
        let end = out.queue().sealed_total();
        self.ends.push_back(end);
    }
}

/// Wraps `plain` with `layer` and appends it to `egress` as one WRAP frame (`token` is scratch).
fn wrap_into(
    layer: &mut dyn SecurityLayer,
    plain: &[u8],
    token: &mut Vec<u8>,
    egress: &mut Vec<u8>,
) -> Result<(), SaslError> {
    token.clear();
    layer.wrap(plain, token)?;
    sasl_message::server_wrap_frame(egress, token)
        .map_err(|e| SaslError::Sasl(format!("WRAP frame: {e}")))?;
    if token.capacity() > KEEP_WRAP_BUFFER {
        *token = Vec::new();
    }
    Ok(())
}

/// Copies `egress[*epos..]` into the transmit queue as far as the pool allows; true when all of
/// it is queued (the buffer is then emptied).
fn drain(egress: &mut Vec<u8>, epos: &mut usize, out: &mut Outbox<'_>) -> bool {
    while *epos < egress.len() {
        let Ok(tail) = out.tail() else {
            return false;
        };
        let n = tail.len().min(egress.len() - *epos);
        tail[..n].copy_from_slice(&egress[*epos..*epos + n]);
        out.advance(n);
        out.seal();
        *epos += n;
    }
    egress.clear();
    *epos = 0;
    if egress.capacity() > KEEP_WRAP_BUFFER {
        *egress = Vec::new();
    }
    true
}
