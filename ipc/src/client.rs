//! A blocking IPC v9 client over `std::net`: one TCP connection carries many pipelined calls,
//! matched by callId.
//!
//! How it fits together: [`Client`] owns the current `Conn` (a socket, the table of pending
//! calls, and a reader thread). [`Client::start_call`] takes a call slot, registers it under a
//! fresh callId, encodes the call frame and writes it; [`PendingCall::wait`] blocks until the
//! reader thread delivers the response for that callId, or the call's timeout passes. Any number
//! of threads may call through one `Client` at once, and one thread may have many calls in
//! flight.
//!
//! - **Why blocking threads, not the io_uring backend:** a client holds one connection (or a
//!   few), where a ring buys nothing over a blocked `read`; the server is where thousands of
//!   connections share a core. A plain client also works in tests and benchmarks without a ring
//!   thread, and behaves the same whichever backend the server runs.
//! - **No allocation per call in the steady state:** each connection keeps a request-frame
//!   buffer (encoded into under the write lock, kept up to [`ClientConfig::keep_frame_buffer`]),
//!   a free list of call slots and a pending table sized for [`ClientConfig::call_slots`] calls
//!   in flight; the reader thread reads through one 64 KiB buffer (several small responses per
//!   `read`) into response buffers that are recycled when the [`Response`] is dropped (up to
//!   [`ClientConfig::recycled_buffers`] of them), so a benchmark fetching 10 MB responses does
//!   not fault in fresh memory per call either. `ipc/tests/client_alloc.rs` counts it: zero
//!   allocations on the calling thread and on the reader thread per call after warm-up, as long
//!   as responses are dropped before more than `recycled_buffers` are held. Errors (remote
//!   exceptions, timeouts) still allocate their messages.
//! - **Reader thread placement:** named [`ClientConfig::reader_thread_name`] (`hp-ipc-client`),
//!   optionally pinned to [`ClientConfig::reader_cpu`].
//! - **Timeouts:** per call ([`ClientConfig::call_timeout`] or [`Client::call_timeout`]). A call
//!   that times out is forgotten; a late response for it is discarded.
//! - **Reconnect with backoff:** when the connection breaks, pending calls fail with
//!   [`ClientError::ConnectionLost`] (calls are not resent: they may not be idempotent). The next
//!   call reconnects, waiting `initial × 2^(failures−1)` (capped) between failed attempts, up to
//!   `max_connect_attempts`.
//! - **Observer reads:** the client keeps the highest `stateId` seen in any response header and
//!   sends it in every request header, as Hadoop's `ClientGSIContext` does. The value lives in a
//!   [`StateIdCell`]; by default each client has its own. To share it across connections (the
//!   active NameNode and its observers, or per-thread direct connections), create one cell and
//!   put a clone in each [`ClientConfig::state_id`] (or take [`Client::state_id_cell`] from one
//!   client): every response's `RpcResponseHeaderProto.stateId` on any of them is folded in
//!   with a `fetch_max`, and every request header on any of them carries the current value.
//!
//!   ```no_run
//!   # use ipc::client::{Client, ClientConfig, StateIdCell};
//!   let cell = StateIdCell::new();
//!   let cfg = ClientConfig { state_id: Some(cell.clone()), ..ClientConfig::default() };
//!   let active = Client::new("127.0.0.1:8020".parse().unwrap(), cfg.clone());
//!   let observer = Client::new("127.0.0.1:8021".parse().unwrap(), cfg);
//!   // A write on `active` raises `cell`; the next read on `observer` sends that stateId.
//!   # drop((active, observer));
//!   ```
//! - Response frames longer than `max_response_length` (`ipc.maximum.response.length`) close the
//!   connection before anything is allocated for them.
//! - **Idle close** ([`ClientConfig::max_idle`], `ipc.client.connection.maxidletime`): as Java's
//!   `Client.Connection.waitForWork` does, a connection with no call in flight that has
//!   received nothing and started no call for that long is closed by its reader thread: cleanly
//!   (a FIN to the server, the thread ends, nobody gets an error), and the next call opens a
//!   new one, with a new SASL negotiation (a Kerberos client acquires its credential again then,
//!   so a keytab login takes a fresh ticket once the old one nears its expiry). It costs
//!   nothing per call: the socket's receive timeout is set once, at connect, and the reader
//!   tells whether a call started during the quiet spell from the callId counter. A ping
//!   ([`Client::ping`]) counts as activity too, as Java's `sendPing` sets `lastActivity`: the
//!   connection is closed `max_idle` after the last ping, call or response, whichever came
//!   last (the reader then waits out the rest of the time with a shorter receive timeout).

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::io::{self, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use hadoop_wire::encode::{ConnectionContext, RequestHeader};
use hadoop_wire::frame::DEFAULT_MAX_DATA_LENGTH;
use hadoop_wire::pb::hadoop::common::rpc_response_header_proto::{
    RpcErrorCodeProto, RpcStatusProto,
};
/// The stateId cell is hadoop-wire's ([`hadoop_wire::rpc::client::StateIdCell`]), named here
/// as it always was.
pub use hadoop_wire::rpc::client::StateIdCell;
use hadoop_wire::rpc::client::{Caller, RemoteError, Responses};
use hadoop_wire::sasl::client::{ClientAuth, ClientOutcome};
use hadoop_wire::sasl::SecurityLayer;

/// Client configuration.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Protocol name for calls made with [`Client::call`] and for the connection context.
    pub protocol: String,
    /// Protocol version for [`Client::call`].
    pub protocol_version: u64,
    /// `effectiveUser` in the connection context.
    pub user: String,
    pub connect_timeout: Duration,
    /// Default per-call timeout.
    pub call_timeout: Duration,
    /// `ipc.maximum.response.length`: longest response frame accepted.
    pub max_response_length: u32,
    /// First wait after a failed connect.
    pub backoff_initial: Duration,
    /// Longest wait between connect attempts.
    pub backoff_max: Duration,
    /// Connect attempts per call before giving up.
    pub max_connect_attempts: u32,
    /// Response buffers kept for reuse.
    pub recycled_buffers: usize,
    /// Where the highest stateId seen is kept. `None` (the default): a cell of this client's
    /// own. `Some(cell)`: a cell shared with every other client given a clone of it.
    pub state_id: Option<StateIdCell>,
    /// Calls in flight a connection is prepared for: call slots and pending-table room made
    /// when it opens, and the most idle slots kept. Up to this many calls in flight allocate
    /// nothing; more work, their slots are allocated and freed.
    pub call_slots: usize,
    /// Longest request-frame buffer kept between calls (bytes). A longer request is encoded
    /// into a buffer freed after its write.
    pub keep_frame_buffer: usize,
    /// Name of the connection's reader thread (Linux shows 15 bytes).
    pub reader_thread_name: String,
    /// CPU to pin the reader thread to (`hw::PinPolicy::Required`: a refused CPU
    /// fails the connect with [`ClientError::ReaderThread`]). `None`: not pinned.
    pub reader_cpu: Option<u32>,
    /// How to authenticate: SIMPLE by default; holding a token (or security on) makes the
    /// client negotiate SASL, as Java's does, and wrap everything after SUCCESS at
    /// `auth-int` / `auth-conf`.
    pub auth: ClientAuth,
    /// `ipc.client.connection.maxidletime` ([`max_idle_from_conf`]): a connection with no call
    /// in flight that has received nothing and started no call for this long is closed (see
    /// the module docs); the next call reconnects. `None` (the default): kept open.
    pub max_idle: Option<Duration>,
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            protocol: String::new(),
            protocol_version: 1,
            user: std::env::var("USER").unwrap_or_else(|_| "hotpath".into()),
            connect_timeout: Duration::from_secs(20),
            call_timeout: Duration::from_secs(60),
            max_response_length: DEFAULT_MAX_DATA_LENGTH,
            backoff_initial: Duration::from_millis(100),
            backoff_max: Duration::from_secs(10),
            max_connect_attempts: 10,
            recycled_buffers: 4,
            state_id: None,
            call_slots: 64,
            keep_frame_buffer: 1 << 20,
            reader_thread_name: "hp-ipc-client".into(),
            reader_cpu: None,
            auth: ClientAuth::default(),
            max_idle: None,
        }
    }
}

/// `ipc.client.connection.maxidletime` (milliseconds, Hadoop's default 10000) as
/// [`ClientConfig::max_idle`]. Java reads it with `getInt`; a value of 0 or less, which makes
/// Java's client close a connection as soon as no call is in flight, is taken here as "never
/// close" (`None`).
pub fn max_idle_from_conf(conf: &conf::Configuration) -> Result<Option<Duration>, conf::Error> {
    let ms = conf.get_i64(MAX_IDLE_KEY)?;
    Ok((ms > 0).then(|| Duration::from_millis(ms as u64)))
}

/// The key of [`max_idle_from_conf`].
pub const MAX_IDLE_KEY: &str = "ipc.client.connection.maxidletime";

/// Client errors.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ClientError {
    /// Could not connect after the configured attempts.
    #[error("connecting to {addr} failed after {attempts} attempts: {last}")]
    Connect {
        addr: SocketAddr,
        attempts: u32,
        last: String,
    },
    /// The connection broke while the call was pending (or while sending it).
    #[error("connection lost: {0}")]
    ConnectionLost(String),
    /// No response within the call's timeout.
    #[error("call {call_id} timed out after {timeout:?}")]
    Timeout { call_id: i32, timeout: Duration },
    /// The server answered ERROR (the connection stays usable) or FATAL (it closed it).
    #[error("{status:?} {class}: {message} ({detail:?})")]
    Remote {
        status: RpcStatusProto,
        class: String,
        message: String,
        detail: Option<RpcErrorCodeProto>,
    },
    /// The server sent bytes that are not a valid response.
    #[error("malformed response: {0}")]
    Protocol(String),
    /// The connection's reader thread could not be started or pinned (not retried).
    #[error("reader thread: {0}")]
    ReaderThread(String),
    /// The request could not be encoded.
    #[error("encoding the request failed: {0}")]
    Encode(#[from] hadoop_wire::error::EncodeError),
    /// SASL failed on this side (no usable method, fallback refused, a bad server reply).
    /// Refusals sent by the server are [`ClientError::Remote`]. Not retried.
    #[error("{class}: {message}")]
    Auth { class: String, message: String },
}

impl From<RemoteError> for ClientError {
    fn from(e: RemoteError) -> Self {
        ClientError::Remote {
            status: e.status,
            class: e.class,
            message: e.message,
            detail: e.detail,
        }
    }
}

impl From<crate::sasl::NegotiateError> for ClientError {
    fn from(e: crate::sasl::NegotiateError) -> Self {
        use crate::sasl::NegotiateError as N;
        match e {
            N::Io(e) => ClientError::ConnectionLost(format!("SASL negotiation: {e}")),
            N::Auth { class, message } => ClientError::Auth { class, message },
            N::Protocol(m) => ClientError::Protocol(m),
            N::Remote(r) => ClientError::from(r),
        }
    }
}

impl ClientError {
    /// The exception class of a remote error.
    pub fn remote_class(&self) -> Option<&str> {
        match self {
            ClientError::Remote { class, .. } => Some(class),
            _ => None,
        }
    }

    /// The error code of a remote error.
    pub fn remote_detail(&self) -> Option<RpcErrorCodeProto> {
        match self {
            ClientError::Remote { detail, .. } => *detail,
            _ => None,
        }
    }
}

/// A SUCCESS response: the response message bytes, in a buffer that goes back to the client's
/// recycle list when dropped.
pub struct Response {
    buf: Vec<u8>,
    payload: Range<usize>,
    state_id: Option<i64>,
    recycle: Weak<Recycler>,
}

impl Response {
    /// The response message (protobuf bytes).
    pub fn payload(&self) -> &[u8] {
        &self.buf[self.payload.clone()]
    }

    /// The `stateId` in the response header, if any.
    pub fn state_id(&self) -> Option<i64> {
        self.state_id
    }

    /// Decodes the message with prost.
    pub fn decode<M: prost::Message + Default>(&self) -> Result<M, ClientError> {
        M::decode(self.payload()).map_err(|e| ClientError::Protocol(e.to_string()))
    }
}

impl std::fmt::Debug for Response {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Response")
            .field("payload_len", &self.payload.len())
            .field("state_id", &self.state_id)
            .finish()
    }
}

impl Drop for Response {
    fn drop(&mut self) {
        if let Some(r) = self.recycle.upgrade() {
            r.put(std::mem::take(&mut self.buf));
        }
    }
}

/// Reusable response buffers.
struct Recycler {
    free: Mutex<Vec<Vec<u8>>>,
    keep: usize,
}

impl Recycler {
    fn take(&self) -> Vec<u8> {
        lock(&self.free).pop().unwrap_or_default()
    }

    fn put(&self, buf: Vec<u8>) {
        if buf.capacity() == 0 {
            return;
        }
        let mut f = lock(&self.free);
        if f.len() < self.keep {
            f.push(buf);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

type Outcome = Result<Response, ClientError>;

/// Where the reader thread leaves a call's outcome.
///
/// Slots are reused (see [`CallTable`]): whoever removes a slot from the table of pending calls
/// (the reader for a response, [`Conn::fail`], or the caller giving up at its timeout) is the
/// one that delivers into it, so once the caller has taken an outcome nobody writes to the slot
/// again and it can go back to the free list even while a deliverer still holds a reference.
struct Slot {
    outcome: Mutex<Option<Outcome>>,
    ready: Condvar,
}

impl Slot {
    fn new() -> Arc<Slot> {
        Arc::new(Slot {
            outcome: Mutex::new(None),
            ready: Condvar::new(),
        })
    }

    fn deliver(&self, o: Outcome) {
        *lock(&self.outcome) = Some(o);
        self.ready.notify_all();
    }
}

/// A `BuildHasher` for callIds: they are sequential, so one multiply spreads them over the
/// table (SipHash's DoS resistance buys nothing for ids we choose ourselves).
#[derive(Clone, Copy, Default)]
struct CallIdHash;

struct CallIdHasher(u64);

impl BuildHasher for CallIdHash {
    type Hasher = CallIdHasher;
    fn build_hasher(&self) -> CallIdHasher {
        CallIdHasher(0)
    }
}

impl Hasher for CallIdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_i32(&mut self, i: i32) {
        self.0 = (u64::from(i as u32) ^ self.0).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// The pending calls of one connection and the free call slots.
///
/// Both are sized when the connection opens ([`ClientConfig::call_slots`]), so a call takes a
/// slot and a table entry without allocating while no more than that many are in flight.
struct CallTable {
    pending: HashMap<i32, Arc<Slot>, CallIdHash>,
    free: Vec<Arc<Slot>>,
    /// Most free slots kept.
    keep: usize,
}

impl CallTable {
    fn new(slots: usize) -> Self {
        let mut free = Vec::with_capacity(slots);
        free.extend((0..slots).map(|_| Slot::new()));
        Self {
            pending: HashMap::with_capacity_and_hasher(slots, CallIdHash),
            free,
            keep: slots,
        }
    }

    /// Puts a slot whose outcome has been taken back on the free list.
    fn recycle(&mut self, slot: Arc<Slot>) {
        if self.free.len() < self.keep {
            self.free.push(slot);
        }
    }
}

/// The sending half: the socket and the buffer call frames are encoded into.
/// The security layer of a connection, shared by its writer (wrap) and reader thread (unwrap).
type SharedLayer = Arc<Mutex<Box<dyn SecurityLayer>>>;

struct Writer {
    stream: TcpStream,
    frame: Vec<u8>,
    /// Longest frame buffer kept after a write.
    keep: usize,
    /// With a security layer: every frame goes out in WRAP packets.
    layer: Option<SharedLayer>,
    /// WRAP packets being written, and one wrapped token (reused).
    wrapped: Vec<u8>,
    token: Vec<u8>,
}

impl Writer {
    /// Encodes one frame with `encode` into the reused buffer and writes it.
    fn send(
        &mut self,
        encode: impl FnOnce(&mut Vec<u8>) -> Result<usize, hadoop_wire::error::EncodeError>,
    ) -> Result<Result<(), io::Error>, hadoop_wire::error::EncodeError> {
        self.frame.clear();
        let encoded = encode(&mut self.frame);
        let written = match encoded {
            Ok(_) => Ok(self.write_out()),
            Err(e) => Err(e),
        };
        if self.frame.capacity() > self.keep {
            self.frame = Vec::new();
        }
        written
    }

    /// Writes `self.frame`: as it is, or wrapped in packets of at most the server's
    /// `max_wrap_input` plaintext bytes (Java's client does the same through its buffered
    /// stream). Wrapping happens under the writer's lock, so sequence numbers follow the order
    /// of the bytes on the wire.
    fn write_out(&mut self) -> io::Result<()> {
        let Some(layer) = self.layer.as_ref() else {
            return self.stream.write_all(&self.frame);
        };
        self.wrapped.clear();
        crate::sasl::wrap_frames(
            &mut **lock(layer),
            &self.frame,
            &mut self.token,
            &mut self.wrapped,
        )?;
        let r = self.stream.write_all(&self.wrapped);
        if self.wrapped.capacity() > self.keep {
            self.wrapped = Vec::new();
            self.token = Vec::new();
        }
        r
    }
}

/// One TCP connection with its pending calls.
struct Conn {
    writer: Mutex<Writer>,
    table: Mutex<CallTable>,
    broken: AtomicBool,
    /// Closed by its reader for being idle ([`ClientConfig::max_idle`]): a call that finds it
    /// so opens a new connection instead of failing.
    idle_closed: AtomicBool,
    why: Mutex<String>,
    /// The reader thread, joined when the client is dropped.
    reader: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// When the connection opened: the origin of [`Conn::pinged`].
    opened: Instant,
    /// When the last ping was sent, in nanoseconds after `opened` plus one (0: none): a ping
    /// is activity for the idle close, as Java's `sendPing` sets `lastActivity`.
    pinged: AtomicU64,
}

/// What the reader finds when its receive timeout passes ([`Conn::close_if_idle`]).
enum IdleCheck {
    /// Closed for idleness.
    Closed,
    /// A call is in flight or one started during the quiet spell: wait `max_idle` again.
    Busy,
    /// A ping went out during the quiet spell: idle, unless something happens in this long.
    PingedRecently(Duration),
}

impl Conn {
    /// Closes the connection if no call is pending and none started since the counter read
    /// `started` (`Caller::calls_started`); otherwise returns `false` with `started` updated.
    /// Decided under the table's lock, where `start_call` registers its call and checks
    /// `broken`: a call either is registered first (and the connection stays) or finds the
    /// connection closed for idleness (and reconnects).
    /// A ping sent less than `max_idle` ago keeps it open for the rest of that time.
    fn close_if_idle(&self, caller: &Caller, started: &mut i32, max_idle: Duration) -> IdleCheck {
        {
            let table = lock(&self.table);
            let now = caller.calls_started();
            if !table.pending.is_empty() || now != *started {
                *started = now;
                return IdleCheck::Busy;
            }
            let pinged = self.pinged.load(Ordering::Acquire);
            if pinged != 0 {
                let at = self.opened + Duration::from_nanos(pinged - 1);
                let left = (at + max_idle).saturating_duration_since(Instant::now());
                if !left.is_zero() {
                    return IdleCheck::PingedRecently(left);
                }
            }
            let mut w = lock(&self.why);
            if self.broken.load(Ordering::Acquire) {
                return IdleCheck::Closed;
            }
            *w = IDLE_CLOSED.to_string();
            self.idle_closed.store(true, Ordering::Release);
            self.broken.store(true, Ordering::Release);
        }
        let _ = lock(&self.writer).stream.shutdown(Shutdown::Both);
        IdleCheck::Closed
    }

    /// Records a ping as activity (see [`Conn::pinged`]).
    fn touch_ping(&self) {
        let nanos = u64::try_from(self.opened.elapsed().as_nanos()).unwrap_or(u64::MAX - 1);
        self.pinged.store(nanos + 1, Ordering::Release);
    }

    /// Marks the connection broken and fails every pending call.
    fn fail(&self, why: &str) {
        {
            // The reason is recorded before the flag, under its lock, so that whoever sees the
            // flag finds the reason.
            let mut w = lock(&self.why);
            if self.broken.load(Ordering::Acquire) {
                return;
            }
            *w = why.to_string();
            self.broken.store(true, Ordering::Release);
        }
        let _ = lock(&self.writer).stream.shutdown(Shutdown::Both);
        let pending: Vec<_> = lock(&self.table).pending.drain().collect();
        for (_, slot) in pending {
            slot.deliver(Err(ClientError::ConnectionLost(why.to_string())));
        }
    }
}

struct Backoff {
    failures: u32,
    next_attempt: Option<Instant>,
}

struct Inner {
    addr: SocketAddr,
    cfg: ClientConfig,
    /// Client id, call ids and the highest stateId seen (the cell maybe shared with other
    /// clients): the sending side of hadoop-wire's client state machine. Shared with the
    /// reader threads, which read its callId counter to tell an idle connection.
    caller: Arc<Caller>,
    conn: Mutex<Option<Arc<Conn>>>,
    backoff: Mutex<Backoff>,
    recycler: Arc<Recycler>,
}

impl Drop for Inner {
    /// The last clone of a client closes its connection and waits for the reader thread to end
    /// (at once: the socket is shut down). The thread owns the connection's security layer, a
    /// GSS-API context with Kerberos: released on a thread that outlived the client, it could
    /// race the process's exit, where MIT krb5's destructors have already torn down its locks
    /// (`k5_mutex_lock` assertion, SIGABRT).
    fn drop(&mut self) {
        let conn = self
            .conn
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(c) = conn {
            c.fail("client dropped");
            let reader = lock(&c.reader).take();
            if let Some(h) = reader {
                if h.thread().id() != std::thread::current().id() {
                    let _ = h.join();
                }
            }
        }
    }
}

/// A pipelining IPC client. Cheap to clone (clones share the connection); dropping the last
/// clone closes it.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

/// A call in flight. Dropping it without [`PendingCall::wait`] abandons the call (a late
/// response is discarded).
pub struct PendingCall {
    call_id: i32,
    /// `None` once the outcome has been taken (the slot went back to the free list).
    slot: Option<Arc<Slot>>,
    conn: Weak<Conn>,
    deadline: Instant,
    timeout: Duration,
}

impl PendingCall {
    /// The callId this call was sent with.
    pub fn call_id(&self) -> i32 {
        self.call_id
    }

    /// Waits for the response or the call's timeout.
    pub fn wait(mut self) -> Outcome {
        let slot = self
            .slot
            .take()
            .expect("a PendingCall holds its slot until it is waited for");
        let (outcome, reusable) = self.wait_slot(&slot);
        if reusable {
            self.recycle(slot);
        }
        outcome
    }

    /// The outcome, and whether the slot is free of any later delivery.
    fn wait_slot(&self, slot: &Slot) -> (Outcome, bool) {
        let mut g = lock(&slot.outcome);
        loop {
            if let Some(o) = g.take() {
                return (o, true);
            }
            let now = Instant::now();
            if now >= self.deadline {
                drop(g);
                let timeout = ClientError::Timeout {
                    call_id: self.call_id,
                    timeout: self.timeout,
                };
                if self.unregister() {
                    return (Err(timeout), true);
                }
                // The reader (or a failing connection) took the call out of the table just
                // now and is delivering its outcome; wait for it (boundedly, in case the
                // deliverer died, when the slot is not reused).
                let grace = Instant::now() + DELIVERY_GRACE;
                let mut g = lock(&slot.outcome);
                loop {
                    if let Some(o) = g.take() {
                        return (o, true);
                    }
                    let now = Instant::now();
                    if now >= grace {
                        return (Err(timeout), false);
                    }
                    g = slot
                        .ready
                        .wait_timeout(g, grace - now)
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                }
            }
            g = slot
                .ready
                .wait_timeout(g, self.deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// Takes this call out of the table; `false` if someone else already did (and so is
    /// delivering its outcome).
    fn unregister(&self) -> bool {
        self.conn
            .upgrade()
            .is_some_and(|c| lock(&c.table).pending.remove(&self.call_id).is_some())
    }

    /// Returns a slot whose outcome has been taken (or that was never delivered into) to the
    /// free list.
    fn recycle(&self, slot: Arc<Slot>) {
        if let Some(c) = self.conn.upgrade() {
            lock(&c.table).recycle(slot);
        }
    }
}

impl Drop for PendingCall {
    fn drop(&mut self) {
        // Abandoned without waiting: if the call is still pending, take it out (nobody will
        // deliver into the slot then) and reuse the slot.
        if let Some(slot) = self.slot.take() {
            if self.unregister() {
                self.recycle(slot);
            }
        }
    }
}

fn random_client_id() -> [u8; 16] {
    let s = std::collections::hash_map::RandomState::new();
    let mut out = [0u8; 16];
    for (i, part) in out.chunks_mut(8).enumerate() {
        let mut h = s.build_hasher();
        h.write_u64(i as u64);
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
        );
        h.write_u32(std::process::id());
        part.copy_from_slice(&h.finish().to_le_bytes());
    }
    out
}

impl Client {
    /// A client for `addr`. Connects lazily, on the first call (or [`Client::connect_now`]).
    pub fn new(addr: SocketAddr, cfg: ClientConfig) -> Self {
        let keep = cfg.recycled_buffers;
        let state_id = cfg.state_id.clone().unwrap_or_default();
        Self {
            inner: Arc::new(Inner {
                addr,
                cfg,
                caller: Arc::new(Caller::new(random_client_id(), state_id)),
                conn: Mutex::new(None),
                backoff: Mutex::new(Backoff {
                    failures: 0,
                    next_attempt: None,
                }),
                recycler: Arc::new(Recycler {
                    free: Mutex::new(Vec::with_capacity(keep)),
                    keep,
                }),
            }),
        }
    }

    /// Connects now (with the reconnect rules), so that the first call does not pay for it.
    pub fn connect_now(&self) -> Result<(), ClientError> {
        self.conn().map(drop)
    }

    /// The 16-byte client id sent in every request header.
    pub fn client_id(&self) -> &[u8; 16] {
        self.inner.caller.client_id()
    }

    /// The highest stateId seen in a response header (on any client sharing this one's
    /// [`StateIdCell`]).
    pub fn last_state_id(&self) -> Option<i64> {
        self.inner.caller.state_id().get()
    }

    /// The cell this client reads and raises the stateId in; give clones of it to other
    /// clients (in [`ClientConfig::state_id`]) to share it.
    pub fn state_id_cell(&self) -> &StateIdCell {
        self.inner.caller.state_id()
    }

    /// Calls started through this client so far (its callId counter: every call, answered or
    /// not, on any of its connections).
    pub fn calls_started(&self) -> i32 {
        self.inner.caller.calls_started()
    }

    /// Whether a connection is open now.
    pub fn is_connected(&self) -> bool {
        lock(&self.inner.conn)
            .as_ref()
            .is_some_and(|c| !c.broken.load(Ordering::Acquire))
    }

    /// Calls `method` of the configured protocol with already-encoded request bytes.
    pub fn call(&self, method: &str, request: &[u8]) -> Outcome {
        let cfg = &self.inner.cfg;
        self.start_call(
            &cfg.protocol,
            cfg.protocol_version,
            method,
            request,
            cfg.call_timeout,
        )?
        .wait()
    }

    /// Like [`Client::call`] with an explicit timeout.
    pub fn call_timeout(&self, method: &str, request: &[u8], timeout: Duration) -> Outcome {
        let cfg = &self.inner.cfg;
        self.start_call(
            &cfg.protocol,
            cfg.protocol_version,
            method,
            request,
            timeout,
        )?
        .wait()
    }

    /// Sends a call and returns without waiting: pipelining.
    pub fn start_call(
        &self,
        protocol: &str,
        version: u64,
        method: &str,
        request: &[u8],
        timeout: Duration,
    ) -> Result<PendingCall, ClientError> {
        let caller = &self.inner.caller;
        let (conn, call_id, slot) = loop {
            let conn = self.conn()?;
            let call_id = caller.next_call_id();
            // Checked under the lock: `fail` marks the connection broken before it drains the
            // table, so a slot inserted here is either drained by it or refused here.
            let mut table = lock(&conn.table);
            if conn.broken.load(Ordering::Acquire) {
                drop(table);
                if conn.idle_closed.load(Ordering::Acquire) {
                    // closed for idleness just now: not an error, open a new one
                    continue;
                }
                return Err(ClientError::ConnectionLost(lock(&conn.why).clone()));
            }
            let slot = table.free.pop().unwrap_or_else(Slot::new);
            table.pending.insert(call_id, slot.clone());
            drop(table);
            break (conn, call_id, slot);
        };
        let call = PendingCall {
            call_id,
            slot: Some(slot),
            conn: Arc::downgrade(&conn),
            deadline: Instant::now() + timeout,
            timeout,
        };
        // The stateId is read when the frame is encoded, after registering: a response
        // raising it before this point is reflected in the header.
        let rh = RequestHeader {
            method_name: method,
            declaring_class_protocol_name: protocol,
            client_protocol_version: version,
        };
        let sent = lock(&conn.writer).send(|f| caller.call_frame(f, call_id, &rh, request));
        match sent {
            // Dropping `call` takes it out of the table again.
            Err(e) => Err(e.into()),
            Ok(Err(e)) => {
                conn.fail(&format!("write failed: {e}"));
                Ok(call)
            }
            Ok(Ok(())) => Ok(call),
        }
    }

    /// Sends a ping frame (callId −4); the server answers nothing. With
    /// [`ClientConfig::max_idle`] the ping counts as activity: the connection stays open at
    /// least `max_idle` after it, as Java's `sendPing` does.
    pub fn ping(&self) -> Result<(), ClientError> {
        let caller = &self.inner.caller;
        let conn = loop {
            let conn = self.conn()?;
            // Recorded under the table's lock, where the reader decides the connection is
            // idle: the reader either sees the ping or has closed the connection, and then
            // the ping goes on a new one (as a call does).
            let table = lock(&conn.table);
            if conn.broken.load(Ordering::Acquire) {
                drop(table);
                if conn.idle_closed.load(Ordering::Acquire) {
                    continue;
                }
                return Err(ClientError::ConnectionLost(lock(&conn.why).clone()));
            }
            conn.touch_ping();
            drop(table);
            break conn;
        };
        let r = lock(&conn.writer).send(|f| caller.ping_frame(f))?;
        r.map_err(|e| {
            conn.fail(&format!("write failed: {e}"));
            ClientError::ConnectionLost(e.to_string())
        })
    }

    /// Closes the connection (pending calls fail); the next call reconnects.
    pub fn disconnect(&self) {
        if let Some(c) = lock(&self.inner.conn).take() {
            c.fail("closed by the client");
        }
    }

    /// The open connection, or a new one (waiting out the backoff between failed attempts).
    fn conn(&self) -> Result<Arc<Conn>, ClientError> {
        let mut guard = lock(&self.inner.conn);
        if let Some(c) = guard.as_ref() {
            if !c.broken.load(Ordering::Acquire) {
                return Ok(c.clone());
            }
        }
        *guard = None;
        let cfg = &self.inner.cfg;
        let mut last = String::new();
        for attempt in 1..=cfg.max_connect_attempts.max(1) {
            let wait = lock(&self.inner.backoff)
                .next_attempt
                .map(|t| t.saturating_duration_since(Instant::now()));
            if let Some(w) = wait.filter(|w| !w.is_zero()) {
                std::thread::sleep(w);
            }
            match self.open() {
                Ok(c) => {
                    let mut b = lock(&self.inner.backoff);
                    b.failures = 0;
                    b.next_attempt = None;
                    *guard = Some(c.clone());
                    return Ok(c);
                }
                Err(Opened::Thread(e)) => return Err(e),
                Err(Opened::Io(e)) => {
                    last = e.to_string();
                    let mut b = lock(&self.inner.backoff);
                    b.failures += 1;
                    let exp = cfg
                        .backoff_initial
                        .saturating_mul(1u32 << (b.failures - 1).min(16));
                    b.next_attempt = Some(Instant::now() + exp.min(cfg.backoff_max));
                    tracing::debug!(
                        "connect to {} failed (attempt {attempt}): {e}",
                        self.inner.addr
                    );
                }
            }
        }
        Err(ClientError::Connect {
            addr: self.inner.addr,
            attempts: cfg.max_connect_attempts.max(1),
            last,
        })
    }

    fn open(&self) -> Result<Arc<Conn>, Opened> {
        let cfg = &self.inner.cfg;
        let mut s = TcpStream::connect_timeout(&self.inner.addr, cfg.connect_timeout)?;
        s.set_nodelay(true)?;
        let responses = Responses::new(
            cfg.max_response_length,
            self.inner.caller.state_id().clone(),
        );
        let mut outcome: ClientOutcome;
        let mut ctx = ConnectionContext {
            effective_user: Some(&cfg.user),
            real_user: None,
            protocol: (!cfg.protocol.is_empty()).then_some(cfg.protocol.as_str()),
        };
        let mut hello = Vec::with_capacity(FRAME_BUFFER);
        let mut layer = None;
        if cfg.auth.uses_sasl() {
            // The negotiation is bounded by the connect timeout.
            s.set_read_timeout(Some(cfg.connect_timeout))?;
            outcome = crate::sasl::negotiate(&mut s, &cfg.auth, &responses).map_err(opened)?;
            s.set_read_timeout(cfg.max_idle)?;
            layer = outcome.layer.take().map(|l| Arc::new(Mutex::new(l)));
            ctx.effective_user = crate::sasl::context_user(&outcome, &cfg.user);
            hadoop_wire::encode::connection_context_frame(
                &mut hello,
                self.inner.caller.client_id(),
                &ctx,
            )
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        } else {
            self.inner
                .caller
                .hello(&mut hello, &ctx)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
            if cfg.max_idle.is_some() {
                s.set_read_timeout(cfg.max_idle)?;
            }
        }
        let mut writer = Writer {
            stream: s.try_clone()?,
            frame: hello,
            keep: cfg.keep_frame_buffer.max(FRAME_BUFFER),
            layer: layer.clone(),
            wrapped: Vec::new(),
            token: Vec::new(),
        };
        writer.write_out()?;
        writer.frame.clear();
        let conn = Arc::new(Conn {
            writer: Mutex::new(writer),
            table: Mutex::new(CallTable::new(cfg.call_slots)),
            broken: AtomicBool::new(false),
            idle_closed: AtomicBool::new(false),
            why: Mutex::new(String::new()),
            reader: Mutex::new(None),
            opened: Instant::now(),
            pinged: AtomicU64::new(0),
        });
        let c = conn.clone();
        let reader = BufReader::with_capacity(
            READ_BUFFER,
            IdleRead {
                stream: s,
                idle: cfg.max_idle.map(|max_idle| Idle {
                    conn: conn.clone(),
                    caller: self.inner.caller.clone(),
                    started: self.inner.caller.calls_started(),
                    max_idle,
                    shortened: false,
                }),
            },
        );
        let ctx = ReaderContext {
            responses,
            recycler: self.inner.recycler.clone(),
        };
        let max_len = cfg.max_response_length;
        let cpu = cfg.reader_cpu;
        let (pinned_tx, pinned_rx) = std::sync::mpsc::sync_channel(1);
        let spawned = std::thread::Builder::new()
            .name(cfg.reader_thread_name.clone())
            .spawn(move || {
                if let Some(cpu) = cpu {
                    let pinned = hw::PinPolicy::Required.pin_current_thread(cpu);
                    let failed = pinned.is_err();
                    let _ = pinned_tx.send(pinned.map(drop));
                    if failed {
                        return;
                    }
                } else {
                    let _ = pinned_tx.send(Ok(()));
                }
                match layer {
                    None => read_loop(reader, c, ctx),
                    Some(layer) => read_loop(
                        Unwrapped {
                            inner: reader,
                            layer,
                            unwrapper: crate::sasl::Unwrapper::new(max_len),
                        },
                        c,
                        ctx,
                    ),
                }
            });
        let thread_error = |why: String| {
            conn.fail(&why);
            Opened::Thread(ClientError::ReaderThread(why))
        };
        match spawned {
            Ok(h) => *lock(&conn.reader) = Some(h),
            Err(e) => return Err(thread_error(format!("spawning the reader thread: {e}"))),
        }
        match pinned_rx.recv() {
            Ok(Ok(())) => Ok(conn),
            Ok(Err(e)) => Err(thread_error(format!("pinning the reader thread: {e}"))),
            Err(_) => Err(thread_error("the reader thread exited at start".into())),
        }
    }
}

/// How long a caller past its deadline waits for an outcome already being delivered.
const DELIVERY_GRACE: Duration = Duration::from_secs(1);
/// Bytes read from the socket at a time by the reader thread (many small responses per
/// `read`; responses longer than this are read straight into their own buffer).
const READ_BUFFER: usize = 64 << 10;
/// Initial capacity of a connection's frame buffer.
const FRAME_BUFFER: usize = 4 << 10;

/// The reason recorded for a connection closed for idleness.
const IDLE_CLOSED: &str = "closed by the client: idle";

/// The socket as the reader thread reads it. With [`ClientConfig::max_idle`] the socket's
/// receive timeout is that long: a `read` that times out asks the connection whether it is
/// idle ([`Conn::close_if_idle`]) and reads on if not, so callers above never see the timeout
/// (a frame read part-way is never cut); an idle connection is closed and the read fails,
/// which ends the reader thread (the connection is already closed, so nobody is told).
struct IdleRead {
    stream: TcpStream,
    idle: Option<Idle>,
}

struct Idle {
    conn: Arc<Conn>,
    caller: Arc<Caller>,
    /// `Caller::calls_started` when the last quiet spell began.
    started: i32,
    max_idle: Duration,
    /// The receive timeout is shorter than `max_idle` (the rest of a ping's time).
    shortened: bool,
}

impl IdleRead {
    /// Sets the socket's receive timeout to `max_idle` again after a shortened one.
    fn restore_timeout(&mut self) -> io::Result<()> {
        if let Some(idle) = self.idle.as_mut().filter(|i| i.shortened) {
            idle.shortened = false;
            self.stream.set_read_timeout(Some(idle.max_idle))?;
        }
        Ok(())
    }
}

impl Read for IdleRead {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.stream.read(buf) {
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    let Some(idle) = self.idle.as_mut() else {
                        return Err(e);
                    };
                    match idle
                        .conn
                        .close_if_idle(&idle.caller, &mut idle.started, idle.max_idle)
                    {
                        IdleCheck::Closed => {
                            tracing::debug!("idle IPC connection closed");
                            return Err(io::Error::other(IDLE_CLOSED));
                        }
                        IdleCheck::Busy => self.restore_timeout()?,
                        IdleCheck::PingedRecently(left) => {
                            idle.shortened = true;
                            // (never zero: that would mean no timeout)
                            let left = left.max(Duration::from_millis(1));
                            self.stream.set_read_timeout(Some(left))?;
                        }
                    }
                }
                Ok(n) => {
                    if let Some(idle) = self.idle.as_mut() {
                        // bytes came: the quiet spell starts again; calls started before now
                        // are answered or pending
                        idle.started = idle.caller.calls_started();
                    }
                    self.restore_timeout()?;
                    return Ok(n);
                }
                r => return r,
            }
        }
    }
}

/// Why opening a connection failed: I/O is retried with backoff, the reader thread is not.
enum Opened {
    Io(io::Error),
    Thread(ClientError),
}

/// Reads the unwrapped bytes of a protected connection ([`crate::sasl::Unwrapper`]), locking
/// the shared layer for each packet's unwrap only.
struct Unwrapped<R> {
    inner: R,
    layer: SharedLayer,
    unwrapper: crate::sasl::Unwrapper,
}

impl<R: Read> Read for Unwrapped<R> {
    fn read(&mut self, dst: &mut [u8]) -> io::Result<usize> {
        let layer = &self.layer;
        self.unwrapper
            .read(&mut self.inner, dst, |t, out| lock(layer).unwrap(t, out))
    }
}

/// A failed negotiation as the client reports it: socket errors are retried, the rest not.
fn opened(e: crate::sasl::NegotiateError) -> Opened {
    match e {
        crate::sasl::NegotiateError::Io(e) => Opened::Io(e),
        e => Opened::Thread(ClientError::from(e)),
    }
}

impl From<io::Error> for Opened {
    fn from(e: io::Error) -> Self {
        Opened::Io(e)
    }
}

/// Reads response frames and hands each to its pending call.
fn read_loop<R: Read>(mut s: R, conn: Arc<Conn>, ctx: ReaderContext) {
    let why = loop {
        match read_one(&mut s, &conn, &ctx) {
            Ok(true) => {}
            Ok(false) => break "closed by the server".to_string(),
            Err(e) => break e,
        }
        if conn.broken.load(Ordering::Acquire) {
            break lock(&conn.why).clone();
        }
    };
    conn.fail(&why);
}

/// What the reader thread needs from its client. It holds no reference to the client
/// itself, so dropping the last `Client` closes the connection, which ends the thread.
struct ReaderContext {
    /// The receiving side of hadoop-wire's client state machine (cap, header, stateId).
    responses: Responses,
    recycler: Arc<Recycler>,
}

/// Reads one response frame. `Ok(false)` on a clean EOF at a frame boundary.
fn read_one<R: Read>(s: &mut R, conn: &Conn, client: &ReaderContext) -> Result<bool, String> {
    let mut len = [0u8; 4];
    match s.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(false),
        Err(e) => return Err(format!("read failed: {e}")),
    }
    let n = client.responses.frame_len(len).map_err(|e| e.to_string())?;
    let mut buf = client.recycler.take();
    // Grow (zeroing only new bytes) or cut back; a recycled buffer of the same size is reused
    // as is. A buffer too small is replaced by one with room up to the next power of two, so
    // that responses growing by a few bytes (callIds and stateIds get longer varints) do not
    // reallocate it again; the room past `n` is reserved, not touched.
    if buf.capacity() < n {
        buf.clear();
        buf.reserve_exact(n.next_power_of_two());
    }
    if buf.len() < n {
        buf.resize(n, 0);
    } else {
        buf.truncate(n);
    }
    s.read_exact(&mut buf)
        .map_err(|e| format!("read failed: {e}"))?;
    let reply = client.responses.reply(&buf).map_err(|e| e.to_string())?;
    let (call_id, state_id) = (reply.call_id, reply.state_id);
    let outcome = match reply.result {
        Ok(p) => {
            let start = p.as_ptr() as usize - buf.as_ptr() as usize;
            let payload = start..start + p.len();
            Ok(Response {
                buf,
                payload,
                state_id,
                recycle: Arc::downgrade(&client.recycler),
            })
        }
        Err(remote) => {
            let fatal = remote.is_fatal();
            let err = ClientError::from(remote);
            client.recycler.put(buf);
            if fatal {
                // The server closes the connection: the FATAL goes to its call (if it names
                // one) and to every other pending call.
                let pending: Vec<_> = lock(&conn.table).pending.drain().collect();
                for (_, slot) in pending {
                    slot.deliver(Err(err.clone()));
                }
                return Err(format!("FATAL from the server: {err}"));
            }
            Err(err)
        }
    };
    let slot = lock(&conn.table).pending.remove(&call_id);
    match slot {
        Some(slot) => slot.deliver(outcome),
        None => tracing::debug!("response for unknown or timed-out call {call_id} dropped"),
    }
    Ok(true)
}
