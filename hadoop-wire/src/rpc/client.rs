//! The client side of an IPC v9 connection, sans-IO: bytes to send out, received bytes in,
//! typed replies back. The socket, threads and waiting belong to the driver (`ipc::client`,
//! `hdfs-io`'s direct NameNode connections).
//!
//! ```text
//!   Caller (one per client; shared by its connections and threads, &self)
//!     client id, call-id counter, StateIdCell
//!     hello()       preamble + connection-context frame      ─┐
//!     call_frame()  RPC header (call id, stateId) + RequestHeader + request  ─┼─> bytes to send
//!     ping_frame()  callId −4                                 ─┘
//!   Responses (one per connection, the receiving side)
//!     frame_len()   the 4-byte length, checked against the cap before anything is allocated
//!     reply()       one response frame body → Reply { call_id, state_id, payload | RemoteError };
//!                   folds the header's stateId into the Caller's StateIdCell
//!   Connection (one owner: Caller + Responses + its own send and receive buffers)
//!     call() → call id;  transmit()/sent();  recv_buf()/received();  poll() → Reply of a call
//!     in flight (responses for other call ids are skipped)
//! ```
//!
//! Why two layers: `ipc::client` lets many threads send on one connection while a reader thread
//! receives into per-response buffers it hands to the callers, so it drives [`Caller`] and
//! [`Responses`] separately; a connection used by one caller at a time (or a test) drives the
//! whole [`Connection`]. Both share every wire rule here: call ids, framing, the stateId of
//! observer reads (Hadoop's `ClientGSIContext`: send the highest seen, fold in every response's),
//! the response cap, and how an ERROR or FATAL header becomes a [`RemoteError`].
//!
//! Nothing allocates per call once the buffers have grown, except a [`RemoteError`]'s strings.

use std::ops::Range;
use std::sync::atomic::{AtomicI32, AtomicI64, Ordering};
use std::sync::Arc;

use crate::encode::{self, Body, ConnectionContext, FrameBuf, RequestHeader, RpcRequestHeader};
use crate::error::EncodeError;
use crate::frame::ResponseFrame;
use crate::pb::hadoop::common::rpc_response_header_proto::{RpcErrorCodeProto, RpcStatusProto};
use crate::view::rpc::RpcResponseHeaderView;

/// The highest NameNode `stateId` seen, shareable across connections (observer reads).
///
/// Clones share one value. [`StateIdCell::observe`] only ever raises it (a `fetch_max`), so
/// responses arriving out of order on different connections cannot move it back.
#[derive(Clone)]
pub struct StateIdCell(Arc<AtomicI64>);

impl StateIdCell {
    /// A cell that has seen no stateId yet.
    pub fn new() -> Self {
        Self(Arc::new(AtomicI64::new(i64::MIN)))
    }

    /// Folds in a stateId seen in a response header: the cell keeps the highest.
    pub fn observe(&self, state_id: i64) {
        self.0.fetch_max(state_id, Ordering::AcqRel);
    }

    /// The highest stateId seen, if any.
    pub fn get(&self) -> Option<i64> {
        match self.0.load(Ordering::Acquire) {
            i64::MIN => None,
            s => Some(s),
        }
    }

    /// Whether `self` and `other` are the same shared cell.
    pub fn same_cell(&self, other: &StateIdCell) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Default for StateIdCell {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for StateIdCell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("StateIdCell").field(&self.get()).finish()
    }
}

/// The sending side of a client: its identity, call ids and stateId. `&self` everywhere, so one
/// `Caller` serves every connection and thread of a client.
#[derive(Debug)]
pub struct Caller {
    client_id: [u8; 16],
    next_call_id: AtomicI32,
    state_id: StateIdCell,
}

impl Caller {
    /// A caller sending `client_id` (Java: a random 16-byte UUID) and the stateId of `state_id`.
    pub fn new(client_id: [u8; 16], state_id: StateIdCell) -> Self {
        Self {
            client_id,
            next_call_id: AtomicI32::new(0),
            state_id,
        }
    }

    /// The client id in every request header.
    pub fn client_id(&self) -> &[u8; 16] {
        &self.client_id
    }

    /// Where the highest stateId seen is kept (and read for every request).
    pub fn state_id(&self) -> &StateIdCell {
        &self.state_id
    }

    /// A fresh call id: 0, 1, 2, … wrapping within the non-negative `i32`s, as Java's
    /// `Client.nextCallId` does (negative ids are Hadoop's special frames).
    pub fn next_call_id(&self) -> i32 {
        self.next_call_id.fetch_add(1, Ordering::Relaxed) & i32::MAX
    }

    /// How many call ids have been handed out (wrapping): a value that changes whenever a call
    /// starts, for telling whether any call started between two looks.
    pub fn calls_started(&self) -> i32 {
        self.next_call_id.load(Ordering::Relaxed)
    }

    /// Appends what a connection starts with: the SIMPLE-auth preamble (service class 0) and the
    /// connection-context frame. The server answers nothing to either. Returns the bytes added.
    pub fn hello<B: FrameBuf>(
        &self,
        buf: &mut B,
        context: &ConnectionContext<'_>,
    ) -> Result<usize, EncodeError> {
        let start = buf.written();
        encode::preamble(buf, 0);
        match encode::connection_context_frame(buf, &self.client_id, context) {
            Ok(_) => Ok(buf.written() - start),
            Err(e) => {
                buf.truncate_to(start);
                Err(e)
            }
        }
    }

    /// Appends the frame of call `call_id` (from [`next_call_id`](Self::next_call_id)): retry
    /// count 0 and the stateId as it is now. Read the id first and register the call, then
    /// encode: a response raising the stateId in between is then reflected in this header.
    pub fn call_frame<B: FrameBuf, T: Body + ?Sized>(
        &self,
        buf: &mut B,
        call_id: i32,
        request_header: &RequestHeader<'_>,
        request: &T,
    ) -> Result<usize, EncodeError> {
        let header = RpcRequestHeader {
            state_id: self.state_id.get(),
            ..RpcRequestHeader::call(call_id, &self.client_id, 0)
        };
        encode::call_frame(buf, &header, request_header, request)
    }

    /// Appends a ping frame (callId −4); the server answers nothing.
    pub fn ping_frame<B: FrameBuf>(&self, buf: &mut B) -> Result<usize, EncodeError> {
        encode::ping_frame(buf, &self.client_id)
    }
}

/// Why received bytes are not a response the client can use. Each one ends the connection.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ResponseError {
    /// The length claim is over the cap (`ipc.maximum.response.length`) or a Java int.
    #[error("response frame of {len} bytes exceeds the limit of {max}")]
    TooLong { len: u32, max: u32 },
    /// The frame or its header does not parse.
    #[error(transparent)]
    Malformed(#[from] crate::Error),
    /// A SUCCESS header without the message part.
    #[error("SUCCESS response for call {call_id} without a message")]
    NoMessage { call_id: i32 },
}

/// An ERROR or FATAL response header, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteError {
    /// `Error` (the connection stays usable) or `Fatal` (the server closes it).
    pub status: RpcStatusProto,
    /// `exceptionClassName` (empty when absent).
    pub class: String,
    /// `errorMsg` (empty when absent).
    pub message: String,
    /// `errorDetail`, when it is a known code.
    pub detail: Option<RpcErrorCodeProto>,
}

impl RemoteError {
    /// A FATAL error: the server closes the connection, every call on it is lost.
    pub fn is_fatal(&self) -> bool {
        self.status == RpcStatusProto::Fatal
    }
}

/// One response, read from a frame body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply<'a> {
    /// The call it answers (−1 for a FATAL not tied to a call).
    pub call_id: i32,
    /// The header's stateId (already folded into the caller's [`StateIdCell`]).
    pub state_id: Option<i64>,
    /// SUCCESS: the response message bytes (a slice of the frame body). Otherwise the error.
    pub result: Result<&'a [u8], RemoteError>,
}

/// The receiving side of one connection.
#[derive(Debug, Clone)]
pub struct Responses {
    max_len: u32,
    state_id: StateIdCell,
}

impl Responses {
    /// Accepts response frames up to `max_response_length` bytes; stateIds go into `state_id`.
    pub fn new(max_response_length: u32, state_id: StateIdCell) -> Self {
        Self {
            max_len: max_response_length,
            state_id,
        }
    }

    /// The body length a frame's 4-byte prefix claims, refused over the cap (before anything is
    /// allocated or read for it).
    pub fn frame_len(&self, prefix: [u8; 4]) -> Result<usize, ResponseError> {
        let len = u32::from_be_bytes(prefix);
        if len > self.max_len || len > i32::MAX as u32 {
            return Err(ResponseError::TooLong {
                len,
                max: self.max_len,
            });
        }
        Ok(len as usize)
    }

    /// Reads one response frame body (after the 4 length bytes): one pass over the header
    /// (validation and every field), its stateId folded into the cell, then the outcome.
    pub fn reply<'a>(&self, body: &'a [u8]) -> Result<Reply<'a>, ResponseError> {
        let frame = ResponseFrame::split(body).map_err(crate::Error::from)?;
        let h = RpcResponseHeaderView::new(frame.header)
            .summary()
            .map_err(crate::Error::from)?;
        let call_id = h.call_id_i32();
        if let Some(sid) = h.state_id {
            self.state_id.observe(sid);
        }
        let result = match h.status {
            RpcStatusProto::Success => match frame.payload {
                Some(p) => Ok(p),
                None => return Err(ResponseError::NoMessage { call_id }),
            },
            status => Err(RemoteError {
                status,
                class: h
                    .exception_class_name()
                    .ok()
                    .flatten()
                    .unwrap_or("")
                    .to_string(),
                message: h.error_msg().ok().flatten().unwrap_or("").to_string(),
                detail: h.error_detail,
            }),
        };
        Ok(Reply {
            call_id,
            state_id: h.state_id,
            result,
        })
    }
}

/// Bytes of the receive buffer a new [`Connection`] starts with (many small responses fit).
const RECV_BUFFER: usize = 4096;

/// The outcome of a call, from [`Connection::poll`]. A SUCCESS message is
/// [`Connection::payload`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub call_id: i32,
    pub state_id: Option<i64>,
    pub result: Result<(), RemoteError>,
}

/// One client connection with one owner: a [`Caller`], a [`Responses`] and the connection's own
/// send and receive buffers, driven by whoever owns the socket (quinn-proto style):
///
/// 1. send [`transmit`](Self::transmit), then report it with [`sent`](Self::sent);
/// 2. [`call`](Self::call) queues a call's frame and returns its id;
/// 3. read into [`recv_buf`](Self::recv_buf), report with [`received`](Self::received);
/// 4. [`poll`](Self::poll) until it returns `None` (more bytes needed).
pub struct Connection {
    caller: Arc<Caller>,
    responses: Responses,
    out: Vec<u8>,
    /// Received bytes: `buf[..filled]`, of which `buf[pos..filled]` are not yet consumed.
    buf: Vec<u8>,
    filled: usize,
    pos: usize,
    /// Where the last SUCCESS message lies in `buf`.
    payload: Range<usize>,
    /// Calls sent and not yet answered.
    in_flight: Vec<i32>,
}

impl Connection {
    /// A new connection of `caller`: the preamble and the connection context are queued to send.
    pub fn new(
        caller: Arc<Caller>,
        context: &ConnectionContext<'_>,
        max_response_length: u32,
    ) -> Result<Self, EncodeError> {
        let mut c = Self::negotiated(caller, max_response_length);
        let caller = c.caller.clone();
        caller.hello(&mut c.out, context)?;
        Ok(c)
    }

    /// A connection whose preamble, SASL negotiation and connection context its owner has
    /// already sent (a SASL connection: see `ipc::sasl::negotiate`): nothing is queued, calls
    /// come next. With a security layer the owner wraps what [`transmit`](Self::transmit)
    /// returns and unwraps what it puts into [`recv_buf`](Self::recv_buf).
    pub fn negotiated(caller: Arc<Caller>, max_response_length: u32) -> Self {
        let responses = Responses::new(max_response_length, caller.state_id().clone());
        Self {
            caller,
            responses,
            out: Vec::with_capacity(256),
            buf: vec![0; RECV_BUFFER],
            filled: 0,
            pos: 0,
            payload: 0..0,
            in_flight: Vec::with_capacity(4),
        }
    }

    /// The caller this connection sends for.
    pub fn caller(&self) -> &Arc<Caller> {
        &self.caller
    }

    /// Queues a call (a fresh call id, the current stateId) and returns its id. On an encoding
    /// error nothing is queued.
    pub fn call<T: Body + ?Sized>(
        &mut self,
        request_header: &RequestHeader<'_>,
        request: &T,
    ) -> Result<i32, EncodeError> {
        let call_id = self.caller.next_call_id();
        self.caller
            .call_frame(&mut self.out, call_id, request_header, request)?;
        self.in_flight.push(call_id);
        Ok(call_id)
    }

    /// Queues a ping frame.
    pub fn ping(&mut self) -> Result<(), EncodeError> {
        self.caller.ping_frame(&mut self.out).map(drop)
    }

    /// Bytes waiting to be sent.
    pub fn transmit(&self) -> &[u8] {
        &self.out
    }

    /// The first `n` bytes of [`transmit`](Self::transmit) were sent.
    pub fn sent(&mut self, n: usize) {
        if n >= self.out.len() {
            self.out.clear();
        } else {
            self.out.drain(..n);
        }
    }

    /// Calls sent and not yet answered, oldest first.
    pub fn in_flight(&self) -> &[i32] {
        &self.in_flight
    }

    /// Where to put received bytes: free room that holds at least what the frame being
    /// received still needs (the buffer grows to a frame's size once its length is known).
    pub fn recv_buf(&mut self) -> &mut [u8] {
        let want = self.filled + self.need();
        if self.buf.len() < want {
            self.buf.resize(want, 0);
        }
        &mut self.buf[self.filled..]
    }

    /// `n` bytes were written at the start of [`recv_buf`](Self::recv_buf).
    pub fn received(&mut self, n: usize) {
        self.filled = (self.filled + n).min(self.buf.len());
    }

    /// Bytes still missing before the next frame is complete (at least 1). Once its length
    /// prefix is in, exact. An over-cap length shows up in [`poll`](Self::poll), not here.
    fn need(&self) -> usize {
        let have = self.filled - self.pos;
        if have < 4 {
            return 4 - have;
        }
        let b = &self.buf[self.pos..self.pos + 4];
        let len = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        let total = 4 + (len.min(self.responses.max_len) as usize);
        total.saturating_sub(have).max(1)
    }

    /// The next answer to a call in flight, `Ok(None)` when more bytes are needed. A response
    /// for a call not in flight (one given up on) is skipped; a FATAL answers the oldest call
    /// in flight when it names none of them, as it ends them all. Any error ends the
    /// connection.
    pub fn poll(&mut self) -> Result<Option<Answer>, ResponseError> {
        loop {
            // Bytes of consumed frames go: the last payload is no longer needed.
            if self.pos > 0 {
                self.buf.copy_within(self.pos..self.filled, 0);
                self.filled -= self.pos;
                self.pos = 0;
                self.payload = 0..0;
            }
            if self.filled < 4 {
                return Ok(None);
            }
            let len =
                self.responses
                    .frame_len([self.buf[0], self.buf[1], self.buf[2], self.buf[3]])?;
            let end = 4 + len;
            if self.filled < end {
                return Ok(None);
            }
            self.pos = end;
            let reply = self.responses.reply(&self.buf[4..end])?;
            let fatal = reply.result.as_ref().is_err_and(RemoteError::is_fatal);
            let slot = self.in_flight.iter().position(|&id| id == reply.call_id);
            let call_id = match (slot, fatal) {
                (Some(i), _) => self.in_flight.remove(i),
                (None, true) if !self.in_flight.is_empty() => self.in_flight.remove(0),
                (None, true) => reply.call_id,
                (None, false) => continue,
            };
            let result = match reply.result {
                Ok(p) => {
                    let start = p.as_ptr() as usize - self.buf.as_ptr() as usize;
                    self.payload = start..start + p.len();
                    Ok(())
                }
                Err(e) => Err(e),
            };
            return Ok(Some(Answer {
                call_id,
                state_id: reply.state_id,
                result,
            }));
        }
    }

    /// The message of the last SUCCESS [`poll`](Self::poll) returned (valid until the next).
    pub fn payload(&self) -> &[u8] {
        &self.buf[self.payload.clone()]
    }
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("to_send", &self.out.len())
            .field("received", &(self.filled - self.pos))
            .field("in_flight", &self.in_flight)
            .finish()
    }
}

#[cfg(test)]
mod tests;
