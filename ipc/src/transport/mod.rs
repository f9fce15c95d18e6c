//! The socket layer: event loops that move bytes between TCP connections and sans-IO sessions.
//!
//! How the pieces connect:
//!
//! - A [`Service`] makes one [`Session`] per accepted connection. A session is a connection
//!   state machine (the IPC server's lives in [`crate::server`]): bytes in through
//!   [`Session::on_recv`], response bytes out through an [`Outbox`]. It never touches a socket.
//! - [`start`] runs the service on `threads` ring threads (`hp-ring-<cpu>`, or the names in
//!   [`TransportConfig::thread_names`], e.g. the `hw` plan's `hp-ring0-<cpu>`), each with its own
//!   event loop, its own [`BufferPool`] and its own connections. With more than one thread, each
//!   has its own listening socket on the same address (`SO_REUSEPORT`), so the kernel spreads
//!   new connections over the rings by their 4-tuple hash; several rings arming multishot
//!   accept on one shared socket would see almost every connection land on the first.
//! - Two backends drive the same sessions: [`uring`] (io_uring: multishot accept, multishot recv
//!   into a provided buffer ring, sends straight from pool chunks, SEND_ZC where it pays) and
//!   [`epoll`] (non-blocking sockets, `recv` into a per-thread buffer, `writev` from pool chunks).
//!   [`choose_backend`] probes io_uring at startup and falls back to epoll with one log line;
//!   `HOTPATH_IO=uring|epoll` forces one.
//! - Backpressure: when a session cannot get pool chunks (or has as many calls outstanding as it
//!   may), it says so through [`Session::wants_input`] and the loop stops receiving on that
//!   connection (io_uring: cancels its multishot recv; epoll: stops reading) until sends complete
//!   and free chunks. Unread requests stay in the kernel's socket buffer, and TCP flow control
//!   pushes back on the client. Nothing is allocated around an exhausted pool.
//! - Limits enforced here: the connection limit (new connections over it are closed at once),
//!   the idle timeout (connections with nothing outstanding and no traffic are closed).
//! - The scheduling both backends share (which connections continue when a send completes or a
//!   chunk frees, parking on an empty pool, the idle/linger sweep) is one sans-IO module,
//!   `sched`; the backends keep only their I/O.

pub mod epoll;
pub mod pool;
pub mod recv_ring;
mod sched;
use sched::{Handshakes, Slot};
mod slab;
pub mod tx;
pub mod uring;

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;

pub use pool::{BufferPool, ChunkId, PoolConfig, PoolError, PoolStats};
pub use recv_ring::{FixedUse, RecvRing, RecvRingStats, RingPoolMode};
pub use tx::{Outbox, Segment, Starved, TxQueue};

/// What the event loop should do after a session callback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Keep going.
    Continue,
    /// Send what is queued (e.g. a FATAL response), then close the connection.
    CloseAfterFlush,
    /// Close now, dropping anything queued.
    CloseNow,
}

/// A connection state machine, driven by a backend. Sans-IO: it sees bytes and an [`Outbox`].
pub trait Session: 'static {
    /// Bytes arrived. The session takes all of them: what it cannot act on now (a partial frame,
    /// or frames behind a full outbox) it keeps, and it reports that through
    /// [`Self::wants_input`].
    fn on_recv(&mut self, data: &[u8], out: &mut Outbox<'_>) -> Flow;

    /// Sends completed or the pool freed chunks: continue whatever was blocked (a streamed
    /// response, frames held back by backpressure).
    fn on_send_progress(&mut self, out: &mut Outbox<'_>) -> Flow;

    /// Whether the loop should read more from the socket. `false` is backpressure.
    fn wants_input(&self) -> bool;

    /// Whether nothing is outstanding (no partial frame, no call in progress), so that the idle
    /// timeout may close the connection.
    fn is_idle(&self) -> bool;

    /// Whether the peer finished its handshake (an IPC connection: authenticated and its
    /// connection context read). Until then the connection counts in the handshake budget
    /// ([`TransportConfig::max_handshaking`]), not in `max_connections`. Default: at once.
    fn established(&self) -> bool {
        true
    }
}

/// Makes sessions. Shared by all ring threads.
pub trait Service: Send + Sync + 'static {
    type Session: Session;
    /// A connection from `peer` was accepted.
    fn open(&self, peer: Option<SocketAddr>) -> Self::Session;
}

/// The two event-loop backends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    Uring,
    Epoll,
}

impl BackendKind {
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Uring => "io_uring",
            BackendKind::Epoll => "epoll",
        }
    }
}

impl std::fmt::Display for BackendKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Which backend to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BackendChoice {
    /// `HOTPATH_IO` if set, else io_uring if the probe passes, else epoll.
    #[default]
    Auto,
    /// io_uring or fail.
    Uring,
    /// epoll.
    Epoll,
}

/// The environment variable that forces a backend: `uring` or `epoll`.
pub const BACKEND_ENV: &str = "HOTPATH_IO";

impl BackendChoice {
    /// Parses `uring`, `io_uring`, `epoll` or `auto`.
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "uring" | "io_uring" | "io-uring" => Some(Self::Uring),
            "epoll" => Some(Self::Epoll),
            "auto" | "" => Some(Self::Auto),
            _ => None,
        }
    }
}

/// When to use SEND_ZC for response chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SendZc {
    /// Never.
    Off,
    /// For segments of at least [`ZC_MIN_BYTES`], on every connection (loopback included,
    /// where the kernel copies anyway: useful to measure that).
    On,
    /// Like `On`, but only for peers that are not on a loopback address (trap 10: packets to a
    /// local socket get a deferred copy, and SEND_ZC is slower than plain send there).
    #[default]
    Auto,
}

/// Segments shorter than this are sent with plain send even when SEND_ZC is on: the page
/// pinning and the extra notification cost more than copying a few KiB.
pub const ZC_MIN_BYTES: usize = 16 * 1024;

/// Transport configuration (per server).
#[derive(Debug, Clone)]
pub struct TransportConfig {
    /// Ring threads. Default 1.
    pub threads: usize,
    /// CPUs to pin ring thread `i` to (`cpus[i % len]`); empty = not pinned. The thread is named
    /// `hp-ring-<cpu>` (or `hp-ring-<i>` unpinned) unless [`TransportConfig::thread_names`]
    /// names it.
    pub cpus: Vec<u32>,
    /// Names of the ring threads: thread `i` is called `thread_names[i]` when present (Linux
    /// keeps 15 bytes). [`TransportConfig::name_threads_by_plan`] fills it with the `hw` plan's
    /// names (`hp-ring0-<cpu>`). Empty: the default names above.
    pub thread_names: Vec<String>,
    /// Backend selection.
    pub backend: BackendChoice,
    /// The per-thread send buffer pool.
    pub pool: PoolConfig,
    /// Size of one receive buffer (io_uring provided buffer, epoll read buffer). Default 16 KiB.
    pub recv_buf_size: usize,
    /// Receive buffers per io_uring ring (power of two). Default 64 (1 MiB per ring).
    pub recv_bufs: u16,
    /// Connection limit across all threads; further connections are closed at once. With a
    /// handshake budget ([`TransportConfig::max_handshaking`] > 0) it counts only connections
    /// whose session finished its handshake ([`Session::established`]).
    pub max_connections: usize,
    /// The separate budget of connections still in their handshake (an IPC connection before
    /// its SASL negotiation and connection context are done), across all threads (each thread
    /// keeps its share). A connection accepted over the budget does not wait: the thread's
    /// oldest unfinished handshake is closed to make room, so a flood of idle or slow peers
    /// costs at most this many sockets and never refuses a caller that completes its
    /// handshake promptly. 0: off (every connection counts in `max_connections` from accept).
    pub max_handshaking: usize,
    /// With a handshake budget: a connection that has not finished its handshake this long
    /// after accept is closed. `None`: only the idle timeout applies.
    pub handshake_timeout: Option<Duration>,
    /// Close connections idle this long (nothing outstanding, no traffic). `None` = never.
    pub idle_timeout: Option<Duration>,
    /// How long a connection closing after a FATAL response waits for the peer to close.
    pub linger: Duration,
    /// SEND_ZC policy.
    pub send_zc: SendZc,
    /// io_uring submission queue entries. Default 1024.
    pub ring_entries: u32,
    /// Wake batching (io_uring backend, kernel 6.12+ with `IORING_FEAT_MIN_TIMEOUT`; ignored by
    /// epoll): a ring thread that expects more than one completion within this long (from its
    /// recent completion rate) waits for that many, or for this long, whichever comes first, so
    /// that several requests share one wake-up and one `io_uring_enter`. A lone request on a
    /// quiet ring is not delayed (the expected count is then 1); under load a request waits at
    /// most this long before the thread wakes for it. Zero: wake for every completion.
    /// [`BATCH_WAIT_KEY`]; at most [`MAX_BATCH_WAIT`].
    pub batch_wait: Duration,
}

/// Hadoop-style key of [`TransportConfig::batch_wait`], in microseconds.
pub const BATCH_WAIT_KEY: &str = "hotpath.ipc.server.batch-wait-us";

/// Largest accepted [`TransportConfig::batch_wait`].
pub const MAX_BATCH_WAIT: Duration = Duration::from_millis(10);

/// Default [`TransportConfig::batch_wait`]: off. In the heartbeat storm (10,000 connections,
/// 10,000 calls/s, shared 2-vCPU machine) 500 µs cut the ring thread's wake-ups from about
/// 7,800/s to 2,400/s and the CPU per call by about a third for the raw reference server but
/// only a tenth for the RM, while the RM's p99 went over 2 ms in more runs (docs/performance.md,
/// "The heartbeat storm"): not worth it by default.
pub const DEFAULT_BATCH_WAIT: Duration = Duration::ZERO;

/// Errors reading the transport's keys from a configuration.
#[derive(Debug, thiserror::Error)]
pub enum TransportConfError {
    #[error(transparent)]
    Conf(#[from] conf::Error),
    #[error("{key} = {value} µs is more than the maximum, {max} µs")]
    TooLarge {
        key: &'static str,
        value: u64,
        max: u128,
    },
}

/// [`BATCH_WAIT_KEY`] from `conf`, if set (microseconds, at most [`MAX_BATCH_WAIT`]).
pub fn batch_wait_from_conf(
    conf: &conf::Configuration,
) -> Result<Option<Duration>, TransportConfError> {
    if conf.try_get(BATCH_WAIT_KEY)?.is_none() {
        return Ok(None);
    }
    let us = conf.get_u64(BATCH_WAIT_KEY)?;
    if u128::from(us) > MAX_BATCH_WAIT.as_micros() {
        return Err(TransportConfError::TooLarge {
            key: BATCH_WAIT_KEY,
            value: us,
            max: MAX_BATCH_WAIT.as_micros(),
        });
    }
    Ok(Some(Duration::from_micros(us)))
}

impl Default for TransportConfig {
    fn default() -> Self {
        Self {
            threads: 1,
            cpus: Vec::new(),
            thread_names: Vec::new(),
            backend: BackendChoice::Auto,
            pool: PoolConfig::default(),
            recv_buf_size: 16 * 1024,
            recv_bufs: 64,
            max_connections: 16 * 1024,
            max_handshaking: 0,
            handshake_timeout: None,
            // Hadoop's server closes connections idle for 2 × ipc.client.connection.maxidletime.
            idle_timeout: Some(Duration::from_secs(20)),
            linger: Duration::from_secs(1),
            send_zc: SendZc::Auto,
            ring_entries: 1024,
            batch_wait: DEFAULT_BATCH_WAIT,
        }
    }
}

impl TransportConfig {
    /// Names ring thread `i` as the `hw` plan names network ring `i` on the CPU it is pinned
    /// to: `hw::thread_name(&Role::NetRing(i), cpus[i % len])`, e.g. `hp-ring0-3`. Does nothing
    /// when no CPUs are set (unpinned threads keep `hp-ring-<i>`).
    pub fn name_threads_by_plan(&mut self) {
        if self.cpus.is_empty() {
            return;
        }
        self.thread_names = (0..self.threads)
            .map(|i| {
                let ring = hw::Role::NetRing(u16::try_from(i).unwrap_or(u16::MAX));
                hw::thread_name(&ring, self.cpus[i % self.cpus.len()])
            })
            .collect();
    }

    /// The name of ring thread `i` pinned to `cpu`.
    fn thread_name(&self, i: usize, cpu: Option<u32>) -> String {
        match (self.thread_names.get(i), cpu) {
            (Some(n), _) => n.clone(),
            (None, Some(c)) => format!("hp-ring-{c}"),
            (None, None) => format!("hp-ring-{i}"),
        }
    }
}

/// Errors of the transport.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// `HOTPATH_IO` holds something other than `uring` or `epoll`.
    #[error("{BACKEND_ENV}={0:?}: expected `uring` or `epoll`")]
    BadBackendEnv(String),
    /// io_uring was forced but is not usable here.
    #[error("io_uring was requested but is not usable: {0}")]
    UringUnavailable(String),
    /// The configuration is out of range.
    #[error("invalid transport configuration: {0}")]
    Config(&'static str),
    /// The buffer pool could not be created.
    #[error(transparent)]
    Pool(#[from] PoolError),
    /// A system call failed while setting up.
    #[error("{what}: {source}")]
    Io {
        what: &'static str,
        #[source]
        source: io::Error,
    },
    /// A ring thread died during startup.
    #[error("ring thread {0} exited during startup")]
    ThreadDied(usize),
}

impl TransportError {
    pub(crate) fn io(what: &'static str, source: io::Error) -> Self {
        Self::Io { what, source }
    }
}

/// Counters shared by all ring threads of one server.
#[derive(Debug, Default)]
pub struct Metrics {
    pub accepted: AtomicU64,
    /// Connections closed at accept because of the connection limit.
    pub refused: AtomicU64,
    pub closed: AtomicU64,
    /// Connections closed by the idle timeout.
    pub idle_closed: AtomicU64,
    /// Unfinished handshakes closed to make room for a new connection (handshake budget).
    pub handshake_evicted: AtomicU64,
    /// Unfinished handshakes closed by the handshake timeout.
    pub handshake_expired: AtomicU64,
    pub bytes_in: AtomicU64,
    pub bytes_out: AtomicU64,
    /// Send operations (one per segment).
    pub sends: AtomicU64,
    /// SEND_ZC operations.
    pub zc_sends: AtomicU64,
    /// SEND_ZC notifications received.
    pub zc_notifs: AtomicU64,
    /// SEND_ZC notifications that said the kernel copied the data anyway.
    pub zc_copied: AtomicU64,
    /// Chunk requests refused because the pool was empty.
    pub pool_exhausted: AtomicU64,
    /// Times a connection stopped reading because of backpressure.
    pub backpressure_pauses: AtomicU64,
    /// Highest number of chunks in use at once in any one pool.
    pub pool_peak_chunks: AtomicU64,
    /// Multishot receives that ended on ENOBUFS (buffer ring empty) and were re-armed.
    pub recv_enobufs: AtomicU64,
    /// Rings whose pool is registered as fixed buffers.
    pub pools_registered: AtomicU64,
}

/// A plain copy of [`Metrics`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MetricsSnapshot {
    pub accepted: u64,
    pub refused: u64,
    pub closed: u64,
    pub idle_closed: u64,
    pub handshake_evicted: u64,
    pub handshake_expired: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub sends: u64,
    pub zc_sends: u64,
    pub zc_notifs: u64,
    pub zc_copied: u64,
    pub pool_exhausted: u64,
    pub backpressure_pauses: u64,
    pub pool_peak_chunks: u64,
    pub recv_enobufs: u64,
    pub pools_registered: u64,
    /// Connections open now (handshakes included).
    pub open_connections: u64,
    /// Connections open now that have not finished their handshake (handshake budget on).
    pub handshaking: u64,
}

/// State shared by the ring threads of one server and its handle.
#[derive(Debug)]
pub(crate) struct Shared {
    pub metrics: Metrics,
    /// Connections holding a `max_connections` slot.
    pub connections: AtomicUsize,
    /// Connections in their handshake (handshake budget on), not holding a slot.
    pub handshaking: AtomicUsize,
    pub shutdown: AtomicBool,
    pub config: TransportConfig,
}

impl Shared {
    pub(crate) fn add(&self, c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn peak(&self, chunks: u32) {
        self.metrics
            .pool_peak_chunks
            .fetch_max(chunks as u64, Ordering::Relaxed);
    }

    /// Takes a connection slot; `false` when the limit is reached.
    pub(crate) fn try_open(&self) -> bool {
        let max = self.config.max_connections;
        self.connections
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .is_ok()
    }

    /// Gives back what the connection holds (its `max_connections` slot or its handshake
    /// budget place), once: the slot becomes [`Slot::Released`].
    pub(crate) fn release(&self, slot: &mut Slot, handshakes: &mut Handshakes) {
        match std::mem::replace(slot, Slot::Released) {
            Slot::Counted => {
                self.connections.fetch_sub(1, Ordering::AcqRel);
            }
            Slot::Handshake(_) => {
                self.handshaking.fetch_sub(1, Ordering::AcqRel);
                handshakes.open -= 1;
            }
            Slot::Released => {}
        }
    }

    /// A connection's socket was closed.
    pub(crate) fn closed_one(&self) {
        self.add(&self.metrics.closed, 1);
    }

    /// Whether connections start in the handshake budget.
    pub(crate) fn handshake_budget(&self) -> bool {
        self.config.max_handshaking > 0
    }

    /// A copy of the counters.
    pub(crate) fn snapshot(&self) -> MetricsSnapshot {
        let m = &self.metrics;
        let l = |c: &AtomicU64| c.load(Ordering::Relaxed);
        MetricsSnapshot {
            accepted: l(&m.accepted),
            refused: l(&m.refused),
            closed: l(&m.closed),
            idle_closed: l(&m.idle_closed),
            handshake_evicted: l(&m.handshake_evicted),
            handshake_expired: l(&m.handshake_expired),
            bytes_in: l(&m.bytes_in),
            bytes_out: l(&m.bytes_out),
            sends: l(&m.sends),
            zc_sends: l(&m.zc_sends),
            zc_notifs: l(&m.zc_notifs),
            zc_copied: l(&m.zc_copied),
            pool_exhausted: l(&m.pool_exhausted),
            backpressure_pauses: l(&m.backpressure_pauses),
            pool_peak_chunks: l(&m.pool_peak_chunks),
            recv_enobufs: l(&m.recv_enobufs),
            pools_registered: l(&m.pools_registered),
            open_connections: (self.connections.load(Ordering::Relaxed)
                + self.handshaking.load(Ordering::Relaxed)) as u64,
            handshaking: self.handshaking.load(Ordering::Relaxed) as u64,
        }
    }
}

/// Decides the backend: the configured choice, `HOTPATH_IO`, then the io_uring probe. Logs one
/// line saying which backend runs (and why, on a fallback).
pub fn choose_backend(choice: BackendChoice) -> Result<BackendKind, TransportError> {
    let choice = match choice {
        BackendChoice::Auto => match std::env::var(BACKEND_ENV) {
            Ok(v) => BackendChoice::parse(&v).ok_or(TransportError::BadBackendEnv(v))?,
            Err(_) => BackendChoice::Auto,
        },
        c => c,
    };
    match choice {
        BackendChoice::Epoll => {
            tracing::info!("ipc transport: epoll backend (forced)");
            Ok(BackendKind::Epoll)
        }
        BackendChoice::Uring => match uring::probe() {
            Ok(desc) => {
                tracing::info!("ipc transport: io_uring backend (forced; {desc})");
                Ok(BackendKind::Uring)
            }
            Err(why) => Err(TransportError::UringUnavailable(why)),
        },
        BackendChoice::Auto => match uring::probe() {
            Ok(desc) => {
                tracing::info!("ipc transport: io_uring backend ({desc})");
                Ok(BackendKind::Uring)
            }
            Err(why) => {
                tracing::info!("ipc transport: epoll backend (io_uring unavailable: {why})");
                Ok(BackendKind::Epoll)
            }
        },
    }
}

/// A running transport: ring threads serving one listener.
pub struct Running {
    backend: BackendKind,
    local_addr: SocketAddr,
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    wakers: Vec<Waker>,
    /// One per ring thread (see [`bind_listeners`]).
    _listeners: Vec<TcpListener>,
}

/// Wakes one ring thread (an eventfd it watches).
#[derive(Debug)]
pub(crate) struct Waker {
    fd: std::os::fd::OwnedFd,
}

impl Waker {
    pub(crate) fn new() -> io::Result<Self> {
        // SAFETY: eventfd takes no pointers; the result is checked before it is wrapped.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor that nothing else owns.
        let fd = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        Ok(Self { fd })
    }

    pub(crate) fn raw(&self) -> i32 {
        self.fd.as_raw_fd()
    }

    pub(crate) fn wake(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live local to our own eventfd.
        unsafe {
            libc::write(self.fd.as_raw_fd(), (&one as *const u64).cast(), 8);
        }
    }
}

impl Running {
    /// The backend that runs.
    pub fn backend(&self) -> BackendKind {
        self.backend
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Current counters.
    pub fn metrics(&self) -> MetricsSnapshot {
        self.shared.snapshot()
    }

    /// The shared state, for handles that read the counters after the transport is borrowed
    /// elsewhere (`ipc::server::ServerStats`).
    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Total pool bytes across ring threads.
    pub fn pool_bytes(&self) -> usize {
        self.shared.config.pool.bytes() * self.shared.config.threads
    }

    /// Stops the ring threads (closing every connection) and waits for them.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        self.shared.shutdown.store(true, Ordering::Release);
        for w in &self.wakers {
            w.wake();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        // Take the listeners out of LISTEN now. Closing our descriptor is not enough: an
        // io_uring ring's pending multishot accept holds its own reference to the socket, and
        // the kernel drops it only when it has torn the ring down, asynchronously, after the
        // thread is gone. Until then the port stays bound and a server restarted on it (an
        // agent restarted in place, a test) fails with EADDRINUSE. shutdown(2) on a listening
        // TCP socket closes it at once, whoever else holds it.
        for l in &self._listeners {
            let _ = socket2::SockRef::from(l).shutdown(std::net::Shutdown::Both);
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Binds `addr` and runs `service` on ring threads. Returns once every thread has its ring (or
/// epoll instance) and pool, so that startup errors surface here.
pub fn start<S: Service>(
    addr: SocketAddr,
    config: TransportConfig,
    service: Arc<S>,
) -> Result<Running, TransportError> {
    if config.threads == 0 {
        return Err(TransportError::Config("threads must be at least 1"));
    }
    if !config.recv_bufs.is_power_of_two() || config.recv_buf_size < 512 {
        return Err(TransportError::Config(
            "recv_bufs must be a power of two and recv_buf_size at least 512",
        ));
    }
    config.pool.validate()?;
    if config.batch_wait > MAX_BATCH_WAIT {
        return Err(TransportError::Config("batch_wait must be at most 10 ms"));
    }
    let backend = choose_backend(config.backend)?;
    let listeners = bind_listeners(addr, config.threads)?;
    let local_addr = listeners[0]
        .local_addr()
        .map_err(|e| TransportError::io("local_addr", e))?;
    let shared = Arc::new(Shared {
        metrics: Metrics::default(),
        connections: AtomicUsize::new(0),
        handshaking: AtomicUsize::new(0),
        shutdown: AtomicBool::new(false),
        config: config.clone(),
    });
    let mut running = Running {
        backend,
        local_addr,
        shared: shared.clone(),
        threads: Vec::new(),
        wakers: Vec::new(),
        _listeners: listeners,
    };
    let (ready_tx, ready_rx) = mpsc::channel::<Result<(), TransportError>>();
    for i in 0..config.threads {
        let cpu = (!config.cpus.is_empty()).then(|| config.cpus[i % config.cpus.len()]);
        let name = config.thread_name(i, cpu);
        let listen_fd = running._listeners[i].as_raw_fd();
        let waker = Waker::new().map_err(|e| TransportError::io("eventfd", e))?;
        let wake_fd = waker.raw();
        running.wakers.push(waker);
        let (svc, sh, ready) = (service.clone(), shared.clone(), ready_tx.clone());
        let t = std::thread::Builder::new()
            .name(name)
            .spawn(move || {
                // A ring thread on a refused CPU still serves (warned, unpinned).
                if let Some(cpu) = cpu {
                    let _ = hw::PinPolicy::BestEffort.pin_current_thread(cpu);
                }
                match backend {
                    BackendKind::Uring => uring::run(listen_fd, wake_fd, svc, sh, ready),
                    BackendKind::Epoll => epoll::run(listen_fd, wake_fd, svc, sh, ready),
                }
            })
            .map_err(|e| TransportError::io("spawn ring thread", e))?;
        running.threads.push(t);
    }
    drop(ready_tx);
    for i in 0..config.threads {
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err(TransportError::ThreadDied(i)),
        }
    }
    Ok(running)
}

/// The listening sockets of `threads` ring threads, non-blocking. One thread: a plain bind.
/// More: every socket sets `SO_REUSEPORT` before binding, the first binds `addr` (port 0 picks
/// a port) and the others bind the port it got, so the kernel spreads incoming connections over
/// the rings by their 4-tuple hash. (`SO_REUSEPORT` lets only a socket of the same effective
/// user join the group.)
fn bind_listeners(addr: SocketAddr, threads: usize) -> Result<Vec<TcpListener>, TransportError> {
    use socket2::{Domain, Socket, Type};
    let bind = |a: SocketAddr, reuse_port: bool| -> io::Result<TcpListener> {
        if !reuse_port {
            return TcpListener::bind(a);
        }
        let s = Socket::new(Domain::for_address(a), Type::STREAM, None)?;
        s.set_reuse_address(true)?;
        s.set_reuse_port(true)?;
        s.bind(&a.into())?;
        // std's backlog for TcpListener::bind.
        s.listen(128)?;
        Ok(s.into())
    };
    let first = bind(addr, threads > 1).map_err(|e| TransportError::io("bind", e))?;
    let port = first
        .local_addr()
        .map_err(|e| TransportError::io("local_addr", e))?
        .port();
    let mut all = vec![first];
    for _ in 1..threads {
        let mut a = addr;
        a.set_port(port);
        all.push(bind(a, true).map_err(|e| TransportError::io("bind (SO_REUSEPORT)", e))?);
    }
    for l in &all {
        l.set_nonblocking(true)
            .map_err(|e| TransportError::io("set_nonblocking(listener)", e))?;
    }
    Ok(all)
}

/// Whether `addr` is a loopback peer.
pub(crate) fn is_loopback(addr: Option<SocketAddr>) -> bool {
    match addr {
        Some(a) => {
            a.ip().is_loopback()
                || matches!(a.ip(), std::net::IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()))
        }
        None => false,
    }
}

/// The peer address of a connected socket.
pub(crate) fn peer_addr(fd: i32) -> Option<SocketAddr> {
    use std::mem::ManuallyDrop;
    use std::os::fd::FromRawFd;
    // SAFETY: borrows `fd` as a TcpStream only to call getpeername; ManuallyDrop keeps the
    // descriptor from being closed here.
    let s = ManuallyDrop::new(unsafe { std::net::TcpStream::from_raw_fd(fd) });
    s.peer_addr().ok()
}

/// Sets TCP_NODELAY (Hadoop's `ipc.server.tcpnodelay` defaults to true).
pub(crate) fn set_nodelay(fd: i32) {
    let one: libc::c_int = 1;
    // SAFETY: passes a pointer to a live c_int of the size given.
    unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_wait_key() {
        let mut c = conf::Configuration::new();
        assert_eq!(batch_wait_from_conf(&c).unwrap(), None);
        c.set(BATCH_WAIT_KEY, "200");
        assert_eq!(
            batch_wait_from_conf(&c).unwrap(),
            Some(Duration::from_micros(200))
        );
        c.set(BATCH_WAIT_KEY, "0");
        assert_eq!(batch_wait_from_conf(&c).unwrap(), Some(Duration::ZERO));
        c.set(BATCH_WAIT_KEY, "10001");
        assert!(matches!(
            batch_wait_from_conf(&c),
            Err(TransportConfError::TooLarge { value: 10001, .. })
        ));
        c.set(BATCH_WAIT_KEY, "soon");
        assert!(matches!(
            batch_wait_from_conf(&c),
            Err(TransportConfError::Conf(_))
        ));
    }
}
