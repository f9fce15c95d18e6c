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
//! The request frame and the response buffer belong to the connection and are reused, so a
//! call allocates nothing once they have grown to size. A response frame longer than the
//! configured cap is refused before anything is allocated for it, and the connection is
//! dropped. The stateId lives in a [`StateIdCell`] shared with the NameNode client's other
//! connections (every node's `ipc::client` and direct pool): each response header's stateId
//! is folded into it, and every request carries its current value, the highest seen on any
//! connection.

use crate::error::{RemoteException, RemoteKind};
use hadoop_wire::encode::{self, ConnectionContext, RequestHeader, RpcRequestHeader};
use hadoop_wire::frame::ResponseFrame;
use hadoop_wire::pb::hadoop::common::rpc_response_header_proto::RpcStatusProto;
use hadoop_wire::view::rpc::RpcResponseHeaderView;
use ipc::client::StateIdCell;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::ops::Range;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Mutex;
use std::time::Duration;

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
}

/// One connection with its reusable buffers.
pub(crate) struct Conn {
    stream: TcpStream,
    out: Vec<u8>,
    /// Received bytes: `buf[..filled]`, of which `buf[pos..filled]` are not yet consumed.
    buf: Vec<u8>,
    filled: usize,
    pos: usize,
    /// Where the last response's message lies in `buf`.
    payload: Range<usize>,
    /// Whether this connection has already answered a call (a failure on it may just be the
    /// server having closed it while idle).
    used: bool,
}

impl Conn {
    /// The last response's message.
    pub fn payload(&self) -> &[u8] {
        &self.buf[self.payload.clone()]
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
    next_call_id: AtomicI32,
    /// Highest stateId seen, shared with the client's other connections.
    state_id: StateIdCell,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Connections {
    /// A pool whose calls fold response stateIds into `state_id` and send its value.
    pub fn new(cfg: ConnConfig, state_id: StateIdCell) -> Connections {
        Connections {
            cfg,
            idle: Mutex::new(Vec::new()),
            next_call_id: AtomicI32::new(0),
            state_id,
        }
    }

    /// The highest stateId seen (on any connection sharing the cell).
    pub fn last_state_id(&self) -> Option<i64> {
        self.state_id.get()
    }

    fn connect(&self) -> Result<Conn, String> {
        let c = &self.cfg;
        let s = TcpStream::connect_timeout(&c.addr, c.connect_timeout)
            .map_err(|e| format!("connect: {e}"))?;
        let io = |e: io::Error| format!("socket setup: {e}");
        s.set_nodelay(true).map_err(io)?;
        s.set_read_timeout(Some(c.call_timeout)).map_err(io)?;
        s.set_write_timeout(Some(c.call_timeout)).map_err(io)?;
        let mut hello = Vec::with_capacity(128);
        encode::preamble(&mut hello, 0);
        encode::connection_context_frame(
            &mut hello,
            &c.client_id,
            &ConnectionContext {
                effective_user: Some(&c.user),
                real_user: None,
                protocol: Some(c.protocol),
            },
        )
        .map_err(|e| format!("encoding the connection context: {e}"))?;
        let mut conn = Conn {
            stream: s,
            out: Vec::with_capacity(256),
            buf: vec![0; 4096],
            filled: 0,
            pos: 0,
            payload: 0..0,
            used: false,
        };
        conn.stream
            .write_all(&hello)
            .map_err(|e| format!("write: {e}"))?;
        Ok(conn)
    }

    /// Takes an idle connection or opens one.
    pub fn take(&self) -> Result<Conn, String> {
        if let Some(c) = lock(&self.idle).pop() {
            return Ok(c);
        }
        self.connect()
    }

    /// Returns a connection after a successful call or an ERROR response.
    pub fn put(&self, c: Conn) {
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
        let call_id = self.next_call_id.fetch_add(1, Ordering::Relaxed) & i32::MAX;
        let header = RpcRequestHeader {
            state_id: self.last_state_id(),
            ..RpcRequestHeader::call(call_id, &self.cfg.client_id, 0)
        };
        let rh = RequestHeader {
            method_name: method,
            declaring_class_protocol_name: self.cfg.protocol,
            client_protocol_version: self.cfg.version,
        };
        c.out.clear();
        encode::call_frame(&mut c.out, &header, &rh, request)
            .map_err(|e| io(format!("encoding the call: {e}")))?;
        c.stream
            .write_all(&c.out)
            .map_err(|e| io(format!("write: {e}")))?;
        loop {
            let body = self.read_frame(c).map_err(io)?;
            let frame = ResponseFrame::split(&c.buf[body]).map_err(|e| io(e.to_string()))?;
            // one pass over the header: validation and every field (same errors as validate())
            let h = RpcResponseHeaderView::new(frame.header)
                .summary()
                .map_err(|e| io(e.to_string()))?;
            let (id, status) = (h.call_id_i32(), h.status);
            if let Some(sid) = h.state_id {
                self.state_id.observe(sid);
            }
            if id != call_id && status != RpcStatusProto::Fatal {
                // not ours (cannot happen with one call at a time); skip it
                continue;
            }
            c.used = true;
            return match status {
                RpcStatusProto::Success => {
                    let Some(p) = frame.payload else {
                        return Err(io(format!("SUCCESS for call {id} without a message")));
                    };
                    let start = p.as_ptr() as usize - c.buf.as_ptr() as usize;
                    c.payload = start..start + p.len();
                    Ok(())
                }
                st => {
                    let class = h
                        .exception_class_name()
                        .ok()
                        .flatten()
                        .unwrap_or("")
                        .to_string();
                    let e = RemoteException {
                        kind: RemoteKind::from_class(&class),
                        message: h.error_msg().ok().flatten().unwrap_or("").to_string(),
                        code: h.error_detail.map(|d| d as i32),
                        fatal: st == RpcStatusProto::Fatal,
                        class,
                    };
                    Err(if e.fatal {
                        CallFailure::Fatal(e)
                    } else {
                        CallFailure::Remote(e)
                    })
                }
            };
        }
    }

    /// Reads one response frame; returns where its body lies in `c.buf`. Reads as much as the
    /// socket has (usually the whole frame in one `read`); bytes past the frame stay buffered.
    fn read_frame(&self, c: &mut Conn) -> Result<Range<usize>, String> {
        if c.pos > 0 {
            c.buf.copy_within(c.pos..c.filled, 0);
            c.filled -= c.pos;
            c.pos = 0;
        }
        fill_to(c, 4)?;
        let n = u32::from_be_bytes([c.buf[0], c.buf[1], c.buf[2], c.buf[3]]);
        if n > self.cfg.max_response || n > i32::MAX as u32 {
            return Err(format!(
                "response frame of {n} bytes exceeds the limit of {}",
                self.cfg.max_response
            ));
        }
        let end = 4 + n as usize;
        fill_to(c, end)?;
        c.pos = end;
        Ok(4..end)
    }
}

/// Reads until `c.buf[..want]` holds data (the buffer grows to `want` if needed).
fn fill_to(c: &mut Conn, want: usize) -> Result<(), String> {
    if c.buf.len() < want {
        c.buf.resize(want, 0);
    }
    while c.filled < want {
        match c.stream.read(&mut c.buf[c.filled..]) {
            Ok(0) => return Err("closed by the server".to_string()),
            Ok(k) => c.filled += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("read: {e}")),
        }
    }
    Ok(())
}
