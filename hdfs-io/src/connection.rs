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

use crate::error::{RemoteException, RemoteKind};
use hadoop_wire::encode::{ConnectionContext, RequestHeader};
use hadoop_wire::rpc::client::{Caller, Connection};
use ipc::client::StateIdCell;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};
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
    /// `ipc.client.connection.maxidletime`: a pooled connection unused this long is closed
    /// instead of used (when the pool next reaches it: no timer); `None`: kept.
    pub max_idle: Option<Duration>,
}

/// One connection: the socket and hadoop-wire's client state machine, which owns the reusable
/// send and receive buffers.
pub(crate) struct Conn {
    stream: TcpStream,
    wire: Connection,
    /// Whether this connection has already answered a call (a failure on it may just be the
    /// server having closed it while idle).
    used: bool,
    /// When it went back to the pool (with [`ConnConfig::max_idle`] only).
    idle_since: Option<Instant>,
}

impl Conn {
    /// The last response's message.
    pub fn payload(&self) -> &[u8] {
        self.wire.payload()
    }

    /// Writes everything the state machine has queued.
    fn flush(&mut self) -> Result<(), String> {
        let out = self.wire.transmit();
        let n = out.len();
        self.stream
            .write_all(out)
            .map_err(|e| format!("write: {e}"))?;
        self.wire.sent(n);
        Ok(())
    }

    /// Reads as much as the socket has (usually a whole response in one `read`) into the state
    /// machine's receive buffer.
    fn fill(&mut self) -> Result<(), String> {
        loop {
            match self.stream.read(self.wire.recv_buf()) {
                Ok(0) => return Err("closed by the server".to_string()),
                Ok(k) => {
                    self.wire.received(k);
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("read: {e}")),
            }
        }
    }
}

/// Why a call failed.
pub(crate) enum CallFailure {
    /// The connection is unusable (drop it). `reused`: it had answered calls before.
    Io { reason: String, reused: bool },
    /// An ERROR response; the connection stays usable.
    Remote(RemoteException),
    /// A FATAL response; the server closes the connection.
    Fatal(RemoteException),
}

/// A pool of [`Conn`]s to one NameNode.
pub(crate) struct Connections {
    cfg: ConnConfig,
    idle: Mutex<Vec<Conn>>,
    /// Client id, call ids (counted across the pool's connections) and the highest stateId
    /// seen, in a cell shared with the client's other connections.
    caller: Arc<Caller>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Connections {
    /// A pool whose calls fold response stateIds into `state_id` and send its value.
    pub fn new(cfg: ConnConfig, state_id: StateIdCell) -> Connections {
        let caller = Arc::new(Caller::new(cfg.client_id, state_id));
        Connections {
            cfg,
            idle: Mutex::new(Vec::new()),
            caller,
        }
    }

    fn connect(&self) -> Result<Conn, String> {
        let c = &self.cfg;
        let s = TcpStream::connect_timeout(&c.addr, c.connect_timeout)
            .map_err(|e| format!("connect: {e}"))?;
        let io = |e: io::Error| format!("socket setup: {e}");
        s.set_nodelay(true).map_err(io)?;
        s.set_read_timeout(Some(c.call_timeout)).map_err(io)?;
        s.set_write_timeout(Some(c.call_timeout)).map_err(io)?;
        let context = ConnectionContext {
            effective_user: Some(&c.user),
            real_user: None,
            protocol: Some(c.protocol),
        };
        let wire = Connection::new(self.caller.clone(), &context, c.max_response)
            .map_err(|e| format!("encoding the connection context: {e}"))?;
        let mut conn = Conn {
            stream: s,
            wire,
            used: false,
            idle_since: None,
        };
        conn.flush()?;
        Ok(conn)
    }

    /// Takes an idle connection or opens one.
    /// Connections idle longer than [`ConnConfig::max_idle`] are closed on the way.
    pub fn take(&self) -> Result<Conn, String> {
        loop {
            let Some(c) = lock(&self.idle).pop() else {
                break;
            };
            match (self.cfg.max_idle, c.idle_since) {
                (Some(max), Some(t)) if t.elapsed() >= max => drop(c),
                _ => return Ok(c),
            }
        }
        self.connect()
    }

    /// Returns a connection after a successful call or an ERROR response.
    pub fn put(&self, mut c: Conn) {
        if self.cfg.max_idle.is_some() {
            c.idle_since = Some(Instant::now());
        }
        let mut idle = lock(&self.idle);
        if idle.len() < self.cfg.keep_idle {
            idle.push(c);
        }
    }

    /// One call of `method` with `request` on `c`; on success the message is `c.payload()`.
    /// After [`CallFailure::Io`] or [`CallFailure::Fatal`], drop `c`.
    pub fn call(&self, c: &mut Conn, method: &str, request: &[u8]) -> Result<(), CallFailure> {
        let reused = c.used;
        let io = |reason: String| CallFailure::Io { reason, reused };
        let rh = RequestHeader {
            method_name: method,
            declaring_class_protocol_name: self.cfg.protocol,
            client_protocol_version: self.cfg.version,
        };
        c.wire
            .call(&rh, request)
            .map_err(|e| io(format!("encoding the call: {e}")))?;
        c.flush().map_err(io)?;
        // Responses to other call ids cannot come (one call at a time); the state machine
        // skips them, and answers this call with a FATAL whatever id it names.
        let answer = loop {
            match c.wire.poll() {
                Ok(Some(a)) => break a,
                Ok(None) => c.fill().map_err(io)?,
                Err(e) => return Err(io(e.to_string())),
            }
        };
        c.used = true;
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
