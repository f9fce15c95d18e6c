//! A NameNode connection used by one caller at a time: the caller writes its call and reads
//! the response itself, on its own thread.
//!
//! [`ipc::client::Client`] shares one connection among all threads and hands every response
//! from a reader thread to the waiting caller through a condvar; for small calls such as
//! `getFileInfo` that handoff (a futex wake and two context switches per call) is most of the
//! client's CPU. A [`Connections`] pool keeps idle connections; a call takes one (or opens
//! one), writes the frame, reads its response on the same thread, and puts the connection
//! back. Several threads calling at once use several connections (as many as call at once).
//!
//! The wire rules (handshake, call ids, framing, the response cap, stateId, ERROR/FATAL headers)
//! are hadoop-wire's client state machine, [`hadoop_wire::rpc::client::Connection`], the one
//! `ipc::client` drives too; this module only owns the socket. The request frame and the
//! response buffer belong to the state machine and are reused, so a call allocates nothing once
//! they have grown to size. A response frame longer than the configured cap is refused before
//! anything is allocated for it, and the connection is dropped. The stateId lives in a [`StateIdCell`] shared with the NameNode client's other
//! connections (every node's `ipc::client` and direct pool): each response header's stateId
//! is folded into it, and every request carries its current value, the highest seen on any
//! connection.
//!
//! **SASL** ([`ConnConfig::auth`]: Kerberos, a delegation token, security on): each connection
//! negotiates on its own when it opens, exactly as `ipc::client` does (`ipc::sasl::negotiate`,
//! bounded by the connect timeout; with Kerberos a GSS context of its own, so connections
//! opened by several threads at once each run their own exchange with the KDC's tickets),
//! then sends the connection context naming `ipc::sasl::context_user`. At `integrity` /
//! `privacy` the negotiated security layer is the connection's alone: a call's frame is wrapped
//! into WRAP packets of at most `max_wrap_input` bytes (`ipc::sasl::wrap_frames`) in a reused
//! buffer, and the response's WRAP packets are unwrapped (`ipc::sasl::Unwrapper`, each packet
//! refused over the response cap before it is read) into the state machine's receive buffer,
//! where the response cap applies again. A packet the layer refuses (tampered, replayed) fails
//! the call with the unwrap error and the connection is dropped.
//!
//! **Idle close** ([`ConnConfig::max_idle`], `ipc.client.connection.maxidletime`): a pooled
//! connection nobody has taken for that long is closed (the NameNode reads EOF and frees the
//! socket), as Java's client closes a connection with no call in flight after that long. A
//! sweeper thread of the pool's own (started by the first [`Connections::put`]) sleeps until
//! the oldest pooled connection's time is up and closes what has expired; with nothing pooled
//! it waits until a `put` wakes it (the only call-path cost: a flag read under the pool's lock,
//! and a wake once per sweep at most). [`Connections::take`] skips an expired connection the
//! sweeper has not reached yet. Dropping the pool stops the sweeper and waits for it (it may
//! hold a connection's GSS-API context, which must not outlive the process's krb5 state).

use crate::error::{RemoteException, RemoteKind};
use hadoop_wire::encode::{ConnectionContext, RequestHeader};
use hadoop_wire::rpc::client::{Caller, Connection, Responses};
use hadoop_wire::sasl::client::ClientAuth;
use hadoop_wire::sasl::SecurityLayer;
use ipc::client::{ClientError, StateIdCell};
use ipc::sasl::{NegotiateError, Unwrapper};
use std::io::{self, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Settings of a [`Connections`] pool.
#[derive(Debug, Clone)]
pub(crate) struct ConnConfig {
    pub addr: SocketAddr,
    pub protocol: &'static str,
    pub version: u64,
    pub user: String,
    pub client_id: [u8; 16],
    pub connect_timeout: Duration,
    pub call_timeout: Duration,
    /// Longest response frame accepted (`ipc.maximum.response.length`).
    pub max_response: u32,
    /// Idle connections kept.
    pub keep_idle: usize,
    /// `ipc.client.connection.maxidletime`: a pooled connection unused this long is closed by
    /// the pool's sweeper (see the module docs); `None`: kept.
    pub max_idle: Option<Duration>,
    /// How each connection authenticates (SIMPLE by default; see the module docs).
    pub auth: ClientAuth,
}

/// One connection: the socket and hadoop-wire's client state machine, which owns the reusable
/// send and receive buffers.
pub(crate) struct Conn {
    stream: TcpStream,
    wire: Connection,
    /// The security layer at `integrity` / `privacy`, with its reused buffers.
    layer: Option<Layer>,
    /// Whether this connection has already answered a call (a failure on it may just be the
    /// server having closed it while idle).
    used: bool,
    /// When it went back to the pool (with [`ConnConfig::max_idle`] only).
    idle_since: Option<Instant>,
}

/// A connection's security layer (its own: one caller at a time) and the buffers its framing
/// reuses.
struct Layer {
    layer: Box<dyn SecurityLayer>,
    /// The socket (a second handle) read through a buffer: a WRAP packet's length and body,
    /// and often the whole response, in one `read`.
    input: BufReader<TcpStream>,
    /// WRAP packets being written, and one wrapped token.
    wrapped: Vec<u8>,
    token: Vec<u8>,
    unwrapper: Unwrapper,
}

/// Bytes of a protected connection's read buffer (a few small responses; a larger packet body
/// is read past it, straight into the packet buffer).
const LAYER_READ_BUFFER: usize = 16 << 10;

/// Why reading or writing failed: `broken` for the socket (a reused connection may just have
/// been closed by the server while idle: worth another), else the bytes were wrong (a response
/// over the cap, a WRAP packet the layer refused: not retried).
struct IoFailure {
    reason: String,
    broken: bool,
}

impl IoFailure {
    fn of(what: &str, e: io::Error) -> IoFailure {
        IoFailure {
            broken: e.kind() != io::ErrorKind::InvalidData,
            reason: format!("{what}: {e}"),
        }
    }
}

impl Conn {
    /// The last response's message.
    pub fn payload(&self) -> &[u8] {
        self.wire.payload()
    }

    /// Writes `plain`: as it is, or wrapped by the security layer.
    fn write_plain(
        stream: &mut TcpStream,
        layer: Option<&mut Layer>,
        plain: &[u8],
    ) -> Result<(), IoFailure> {
        let written = match layer {
            None => stream.write_all(plain),
            Some(l) => {
                l.wrapped.clear();
                ipc::sasl::wrap_frames(&mut *l.layer, plain, &mut l.token, &mut l.wrapped)
                    .map_err(|e| IoFailure {
                        reason: e.to_string(),
                        broken: false,
                    })?;
                stream.write_all(&l.wrapped)
            }
        };
        written.map_err(|e| IoFailure::of("write", e))
    }

    /// Writes everything the state machine has queued.
    fn flush(&mut self) -> Result<(), IoFailure> {
        let out = self.wire.transmit();
        let n = out.len();
        Self::write_plain(&mut self.stream, self.layer.as_mut(), out)?;
        self.wire.sent(n);
        Ok(())
    }

    /// Reads as much as the socket has (usually a whole response in one `read`; with a layer,
    /// one WRAP packet's plaintext) into the state machine's receive buffer.
    fn fill(&mut self) -> Result<(), IoFailure> {
        loop {
            let got = match self.layer.as_mut() {
                None => self.stream.read(self.wire.recv_buf()),
                Some(l) => {
                    let layer = &mut l.layer;
                    l.unwrapper
                        .read(&mut l.input, self.wire.recv_buf(), |t, out| {
                            layer.unwrap(t, out)
                        })
                }
            };
            match got {
                Ok(0) => {
                    return Err(IoFailure {
                        reason: "closed by the server".to_string(),
                        broken: true,
                    })
                }
                Ok(k) => {
                    self.wire.received(k);
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(IoFailure::of("read", e)),
            }
        }
    }
}

/// Why a connection could not be opened.
#[derive(Debug)]
pub(crate) enum OpenFailure {
    /// The socket failed (connect, or during the negotiation): worth another attempt.
    Io(String),
    /// The negotiation failed otherwise (refused, a failed Kerberos login or context, a bad
    /// reply): not retried. As `ipc::client` reports it.
    Auth(ClientError),
}

/// What a [`Connections`] pool did so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DirectStats {
    /// Calls answered over direct connections (SUCCESS, ERROR or FATAL).
    pub calls: u64,
    /// Connections opened (each with its own SASL negotiation when SASL is on).
    pub opened: u64,
    /// Of those, the ones with a security layer (`integrity` / `privacy`).
    pub wrapped: u64,
    /// Connections closed for having been idle [`ConnConfig::max_idle`] (by the sweeper, or
    /// skipped by [`Connections::take`]).
    pub idle_closed: u64,
}

/// Why a call failed.
pub(crate) enum CallFailure {
    /// The connection is unusable (drop it). `retry`: it had answered calls before and the
    /// socket failed (it may just have been closed by the server while idle), so the call is
    /// worth another connection; not after bytes that were wrong (e.g. a refused WRAP packet).
    Io { reason: String, retry: bool },
    /// An ERROR response; the connection stays usable.
    Remote(RemoteException),
    /// A FATAL response; the server closes the connection.
    Fatal(RemoteException),
}

/// A pool of [`Conn`]s to one NameNode.
pub(crate) struct Connections {
    cfg: ConnConfig,
    idle: Arc<IdlePool>,
    /// The sweeper thread (with [`ConnConfig::max_idle`], once a connection was put back).
    sweeper: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Client id, call ids (counted across the pool's connections) and the highest stateId
    /// seen, in a cell shared with the client's other connections.
    caller: Arc<Caller>,
    calls: AtomicU64,
    opened: AtomicU64,
    wrapped: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The pooled connections, shared with the sweeper thread.
struct IdlePool {
    state: Mutex<IdleState>,
    /// Wakes the sweeper: a connection was put back while it waited with nothing to watch, or
    /// the pool is being dropped.
    wake: Condvar,
    idle_closed: AtomicU64,
}

struct IdleState {
    /// Most recently returned last (taken first); the oldest towards the front.
    conns: Vec<Conn>,
    /// The sweeper is started (or could not be: then `take` alone closes expired ones).
    sweeper_started: bool,
    /// The sweeper waits with no deadline (nothing was pooled): the next `put` wakes it.
    parked: bool,
    /// The pool is being dropped: the sweeper ends.
    stop: bool,
}

/// The sweeper: closes pooled connections idle `max` or longer, sleeping until the oldest
/// one's time is up (or, with none pooled, until a `put` wakes it).
fn sweep(pool: &IdlePool, max: Duration) {
    let mut st = lock(&pool.state);
    while !st.stop {
        let now = Instant::now();
        let expired_at = |c: &Conn| c.idle_since.map(|t| t + max);
        let mut expired = Vec::new();
        let mut i = 0;
        while i < st.conns.len() {
            if expired_at(&st.conns[i]).is_some_and(|t| t <= now) {
                // (`remove`, not `swap_remove`: the order of use is kept)
                expired.push(st.conns.remove(i));
            } else {
                i += 1;
            }
        }
        if !expired.is_empty() {
            drop(st);
            pool.idle_closed
                .fetch_add(expired.len() as u64, Ordering::Relaxed);
            tracing::debug!(
                "{} idle direct NameNode connection(s) closed",
                expired.len()
            );
            // Closes the sockets (the server reads EOF) outside the pool's lock.
            drop(expired);
            st = lock(&pool.state);
            continue;
        }
        let next = st.conns.iter().filter_map(expired_at).min();
        st = match next {
            Some(t) => {
                let wait = t.saturating_duration_since(now);
                pool.wake
                    .wait_timeout(st, wait)
                    .unwrap_or_else(|p| p.into_inner())
                    .0
            }
            None => {
                st.parked = true;
                let mut st = pool.wake.wait(st).unwrap_or_else(|p| p.into_inner());
                st.parked = false;
                st
            }
        };
    }
}

impl Connections {
    /// A pool whose calls fold response stateIds into `state_id` and send its value.
    pub fn new(cfg: ConnConfig, state_id: StateIdCell) -> Connections {
        let caller = Arc::new(Caller::new(cfg.client_id, state_id));
        Connections {
            cfg,
            idle: Arc::new(IdlePool {
                state: Mutex::new(IdleState {
                    conns: Vec::new(),
                    sweeper_started: false,
                    parked: false,
                    stop: false,
                }),
                wake: Condvar::new(),
                idle_closed: AtomicU64::new(0),
            }),
            sweeper: Mutex::new(None),
            caller,
            calls: AtomicU64::new(0),
            opened: AtomicU64::new(0),
            wrapped: AtomicU64::new(0),
        }
    }

    /// What the pool did so far.
    pub fn stats(&self) -> DirectStats {
        DirectStats {
            calls: self.calls.load(Ordering::Relaxed),
            opened: self.opened.load(Ordering::Relaxed),
            wrapped: self.wrapped.load(Ordering::Relaxed),
            idle_closed: self.idle.idle_closed.load(Ordering::Relaxed),
        }
    }

    /// Connections in the pool now (not taken by a caller).
    #[cfg(test)]
    fn pooled(&self) -> usize {
        lock(&self.idle.state).conns.len()
    }

    /// Starts the sweeper thread (once; with [`ConnConfig::max_idle`] only).
    fn start_sweeper(&self, max: Duration) {
        let pool = self.idle.clone();
        let spawned = std::thread::Builder::new()
            .name("hp-nn-idle".into())
            .spawn(move || sweep(&pool, max));
        match spawned {
            Ok(h) => *lock(&self.sweeper) = Some(h),
            // Expired connections are still closed when `take` reaches them.
            Err(e) => tracing::warn!(
                "no idle sweeper for the direct NameNode connections to {}: {e}",
                self.cfg.addr
            ),
        }
    }

    fn connect(&self) -> Result<Conn, OpenFailure> {
        let c = &self.cfg;
        let io = |what: &'static str| move |e: io::Error| OpenFailure::Io(format!("{what}: {e}"));
        let mut s =
            TcpStream::connect_timeout(&c.addr, c.connect_timeout).map_err(io("connect"))?;
        s.set_nodelay(true).map_err(io("socket setup"))?;
        s.set_write_timeout(Some(c.call_timeout))
            .map_err(io("socket setup"))?;
        let mut context = ConnectionContext {
            effective_user: Some(&c.user),
            real_user: None,
            protocol: Some(c.protocol),
        };
        let encoding = |e: hadoop_wire::error::EncodeError| {
            OpenFailure::Io(format!("encoding the connection context: {e}"))
        };
        let mut outcome;
        let (wire, layer) = if c.auth.uses_sasl() {
            // The negotiation is bounded by the connect timeout.
            s.set_read_timeout(Some(c.connect_timeout))
                .map_err(io("socket setup"))?;
            let responses = Responses::new(c.max_response, self.caller.state_id().clone());
            outcome = ipc::sasl::negotiate(&mut s, &c.auth, &responses).map_err(|e| match e {
                NegotiateError::Io(e) => OpenFailure::Io(format!("SASL negotiation: {e}")),
                e => OpenFailure::Auth(ClientError::from(e)),
            })?;
            let mut layer = match outcome.layer.take() {
                None => None,
                Some(layer) => Some(Layer {
                    layer,
                    input: BufReader::with_capacity(
                        LAYER_READ_BUFFER,
                        s.try_clone().map_err(io("socket setup"))?,
                    ),
                    wrapped: Vec::new(),
                    token: Vec::new(),
                    unwrapper: Unwrapper::new(c.max_response),
                }),
            };
            context.effective_user = ipc::sasl::context_user(&outcome, &c.user);
            let mut hello = Vec::with_capacity(256);
            hadoop_wire::encode::connection_context_frame(
                &mut hello,
                self.caller.client_id(),
                &context,
            )
            .map_err(encoding)?;
            Conn::write_plain(&mut s, layer.as_mut(), &hello)
                .map_err(|e| OpenFailure::Io(e.reason))?;
            let wire = Connection::negotiated(self.caller.clone(), c.max_response);
            (wire, layer)
        } else {
            let wire =
                Connection::new(self.caller.clone(), &context, c.max_response).map_err(encoding)?;
            (wire, None)
        };
        s.set_read_timeout(Some(c.call_timeout))
            .map_err(io("socket setup"))?;
        let wraps = layer.is_some();
        let mut conn = Conn {
            stream: s,
            wire,
            layer,
            used: false,
            idle_since: None,
        };
        conn.flush().map_err(|e| OpenFailure::Io(e.reason))?;
        self.opened.fetch_add(1, Ordering::Relaxed);
        if wraps {
            self.wrapped.fetch_add(1, Ordering::Relaxed);
        }
        Ok(conn)
    }

    /// Takes an idle connection or opens one.
    /// Connections idle longer than [`ConnConfig::max_idle`] are closed on the way.
    pub fn take(&self) -> Result<Conn, OpenFailure> {
        loop {
            let Some(c) = lock(&self.idle.state).conns.pop() else {
                break;
            };
            match (self.cfg.max_idle, c.idle_since) {
                (Some(max), Some(t)) if t.elapsed() >= max => {
                    self.idle.idle_closed.fetch_add(1, Ordering::Relaxed);
                    drop(c)
                }
                _ => return Ok(c),
            }
        }
        self.connect()
    }

    /// Returns a connection after a successful call or an ERROR response.
    pub fn put(&self, mut c: Conn) {
        let Some(max) = self.cfg.max_idle else {
            let mut st = lock(&self.idle.state);
            if st.conns.len() < self.cfg.keep_idle {
                st.conns.push(c);
            }
            return;
        };
        c.idle_since = Some(Instant::now());
        let mut st = lock(&self.idle.state);
        // Over `keep_idle`: dropped (closed) after the lock is released.
        let extra = if st.conns.len() < self.cfg.keep_idle {
            st.conns.push(c);
            None
        } else {
            Some(c)
        };
        let start = !st.sweeper_started;
        st.sweeper_started = true;
        if st.parked {
            st.parked = false;
            self.idle.wake.notify_one();
        }
        drop(st);
        drop(extra);
        if start {
            self.start_sweeper(max);
        }
    }

    /// One call of `method` with `request` on `c`; on success the message is `c.payload()`.
    /// After [`CallFailure::Io`] or [`CallFailure::Fatal`], drop `c`.
    pub fn call(&self, c: &mut Conn, method: &str, request: &[u8]) -> Result<(), CallFailure> {
        let reused = c.used;
        let io = |e: IoFailure| CallFailure::Io {
            reason: e.reason,
            retry: reused && e.broken,
        };
        let rh = RequestHeader {
            method_name: method,
            declaring_class_protocol_name: self.cfg.protocol,
            client_protocol_version: self.cfg.version,
        };
        c.wire.call(&rh, request).map_err(|e| {
            io(IoFailure {
                reason: format!("encoding the call: {e}"),
                broken: false,
            })
        })?;
        c.flush().map_err(io)?;
        // Responses to other call ids cannot come (one call at a time); the state machine
        // skips them, and answers this call with a FATAL whatever id it names.
        let answer = loop {
            match c.wire.poll() {
                Ok(Some(a)) => break a,
                Ok(None) => c.fill().map_err(io)?,
                Err(e) => {
                    return Err(io(IoFailure {
                        reason: e.to_string(),
                        broken: false,
                    }))
                }
            }
        };
        c.used = true;
        self.calls.fetch_add(1, Ordering::Relaxed);
        match answer.result {
            Ok(()) => Ok(()),
            Err(r) => {
                let e = RemoteException {
                    kind: RemoteKind::from_class(&r.class),
                    fatal: r.is_fatal(),
                    code: r.detail.map(|d| d as i32),
                    message: r.message,
                    class: r.class,
                };
                Err(if e.fatal {
                    CallFailure::Fatal(e)
                } else {
                    CallFailure::Remote(e)
                })
            }
        }
    }
}

impl Drop for Connections {
    /// Stops the sweeper and waits for it: it may be closing a connection, whose GSS-API
    /// context must be released before the process's exit tears down MIT krb5's state.
    fn drop(&mut self) {
        lock(&self.idle.state).stop = true;
        self.idle.wake.notify_all();
        let h = self
            .sweeper
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(h) = h {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::sync::mpsc;

    /// A listener that reports each accepted connection, and its EOF, on a channel.
    fn listener() -> (SocketAddr, mpsc::Receiver<(usize, &'static str)>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for (n, s) in l.incoming().enumerate() {
                let Ok(mut s) = s else { return };
                let tx = tx.clone();
                let _ = tx.send((n, "accepted"));
                std::thread::spawn(move || {
                    let mut b = [0u8; 256];
                    while matches!(s.read(&mut b), Ok(k) if k > 0) {}
                    let _ = tx.send((n, "eof"));
                });
            }
        });
        (addr, rx)
    }

    fn pool(addr: SocketAddr, max_idle: Option<Duration>) -> Connections {
        Connections::new(
            ConnConfig {
                addr,
                protocol: "p",
                version: 1,
                user: "u".into(),
                client_id: [7; 16],
                connect_timeout: Duration::from_secs(5),
                call_timeout: Duration::from_secs(5),
                max_response: 1 << 20,
                keep_idle: 4,
                max_idle,
                auth: ClientAuth::default(),
            },
            StateIdCell::new(),
        )
    }

    #[test]
    fn a_pooled_connection_idle_too_long_is_closed_not_used() {
        let t = Duration::from_secs(5);
        let (addr, events) = listener();
        let p = pool(addr, Some(Duration::from_millis(50)));
        p.put(p.take().unwrap());
        assert_eq!(events.recv_timeout(t).unwrap(), (0, "accepted"));
        // used again within max_idle: the same connection
        p.put(p.take().unwrap());
        std::thread::sleep(Duration::from_millis(120));
        // past it: closed (the server reads EOF) and a new one opened
        let c = p.take().unwrap();
        let mut got = vec![
            events.recv_timeout(t).unwrap(),
            events.recv_timeout(t).unwrap(),
        ];
        got.sort();
        assert_eq!(got, [(0, "eof"), (1, "accepted")]);
        drop(c);

        // without max_idle the connection is kept however long it waits
        let (addr, events) = listener();
        let p = pool(addr, None);
        p.put(p.take().unwrap());
        std::thread::sleep(Duration::from_millis(120));
        p.put(p.take().unwrap());
        assert_eq!(events.recv_timeout(t).unwrap(), (0, "accepted"));
        assert!(events.recv_timeout(Duration::from_millis(200)).is_err());
    }

    #[test]
    fn the_sweeper_closes_a_pooled_connection_with_no_further_call() {
        let t = Duration::from_secs(5);
        let idle = Duration::from_millis(200);
        let (addr, events) = listener();
        let p = pool(addr, Some(idle));
        let (a, b) = (p.take().unwrap(), p.take().unwrap());
        let mut got = vec![
            events.recv_timeout(t).unwrap(),
            events.recv_timeout(t).unwrap(),
        ];
        got.sort();
        assert_eq!(got, [(0, "accepted"), (1, "accepted")]);
        // Taken (a call in flight, as far as the pool knows): never closed, however long.
        std::thread::sleep(idle * 2);
        assert!(events.try_recv().is_err());
        p.put(a);
        let put_a = Instant::now();
        std::thread::sleep(idle / 2);
        p.put(b);
        let put_b = Instant::now();
        // Each closed `idle` after it came back, with no call on the pool to trigger it.
        assert_eq!(events.recv_timeout(t).unwrap(), (0, "eof"));
        let waited = put_a.elapsed();
        assert!(
            waited >= idle && waited < idle + Duration::from_secs(2),
            "{waited:?}"
        );
        assert_eq!(events.recv_timeout(t).unwrap(), (1, "eof"));
        let waited = put_b.elapsed();
        assert!(
            waited >= idle && waited < idle + Duration::from_secs(2),
            "{waited:?}"
        );
        assert_eq!(p.pooled(), 0);
        assert_eq!(p.stats().idle_closed, 2);
        // The sweeper waits for the next one put back (woken from its wait with nothing to
        // watch), and closes it too.
        std::thread::sleep(idle);
        p.put(p.take().unwrap());
        assert_eq!(events.recv_timeout(t).unwrap(), (2, "accepted"));
        assert_eq!(events.recv_timeout(t).unwrap(), (2, "eof"));
        assert_eq!(p.stats().idle_closed, 3);

        // Dropping the pool stops the sweeper and closes what is pooled, at once.
        let (addr, events) = listener();
        let p = pool(addr, Some(Duration::from_secs(3600)));
        p.put(p.take().unwrap());
        assert_eq!(events.recv_timeout(t).unwrap(), (0, "accepted"));
        let t0 = Instant::now();
        drop(p);
        assert!(t0.elapsed() < Duration::from_secs(1));
        assert_eq!(events.recv_timeout(t).unwrap(), (0, "eof"));
    }
}
