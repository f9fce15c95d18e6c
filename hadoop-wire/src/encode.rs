//! Encoders for IPC v9 request and response frames, sans-IO: values in, bytes appended to a
//! caller-provided buffer.
//!
//! - [`FrameBuf`]: a [`BufMut`] whose written bytes can be patched (`Vec<u8>`, `BytesMut`, or a
//!   buffer-pool chunk). Nothing here allocates when the buffer has the capacity.
//! - [`LengthPrefixed`]: reserves the 4-byte frame length, lets the body be written, then patches
//!   the length in [`finish`](LengthPrefixed::finish). Dropped unfinished, it removes the partial
//!   frame, so an encoder that fails half-way leaves the buffer as it found it.
//! - [`Body`]: anything that can be written as a varint-delimited part: the RPC headers
//!   ([`RpcRequestHeader`], [`RequestHeader`], [`ConnectionContext`], [`RpcResponseHeader`]),
//!   prost messages wrapped in [`Proto`], or raw bytes (`[u8]`).
//! - Frame encoders: [`preamble`], [`connection_context_frame`], [`call_frame`], [`ping_frame`],
//!   [`success_response_frame`], [`error_response_frame`], [`version_mismatch_response`].
//!
//! **Varint lengths: computed first, not reserved and shifted.** A delimited part's length is a
//! varint of 1-5 bytes. We compute the exact body length first ([`Body::encoded_len`]), write the
//! varint, then the body. For the hand-encoded headers the length is a sum of a few field sizes,
//! and prost's `encoded_len` walks the message once without writing. The alternative, reserving
//! 5 bytes and shifting the body back once its length is known, costs a memmove of every body,
//! and writing a padded (non-minimal) varint instead would break byte-equality with Java's
//! `writeDelimitedTo`. The 4-byte frame length, in contrast, is fixed width, so it is reserved and
//! patched (rustls style): no second pass over the parts.
//!
//! The hot headers are written from borrowed fields by the one protobuf writer
//! ([`crate::writer`]; a prost struct would need an owned `Vec<u8>` for the client id and
//! `String`s for names, i.e. allocations per call); fields are written in field-number order, as
//! protobuf-java does, and the tests check byte-equality against prost and Hadoop's bytes.

use bytes::BufMut;
use prost::encoding::{encode_varint, encoded_len_varint};

use crate::error::EncodeError;
use crate::frame::{Preamble, JAVA_INT_MAX};
use crate::pb::hadoop::common::rpc_response_header_proto::{RpcErrorCodeProto, RpcStatusProto};
use crate::rpc::{
    AUTHORIZATION_FAILED_CALL_ID, CONNECTION_CONTEXT_CALL_ID, IPC_VERSION, PING_CALL_ID,
};
use crate::writer::{Encode, Sink};

// Defined in `crate::rpc`; re-exported where they were first defined.
pub use crate::rpc::exception::VERSION_MISMATCH as VERSION_MISMATCH_EXCEPTION;
pub use crate::rpc::{INVALID_RETRY_COUNT, RPC_KIND_PROTOCOL_BUFFER, RPC_OP_FINAL_PACKET};

/// A buffer frames are written into: a [`BufMut`] whose already-written bytes can be overwritten
/// (to patch a reserved length) and cut back (to drop a half-written frame).
pub trait FrameBuf: BufMut {
    /// Bytes written so far.
    fn written(&self) -> usize;
    /// Overwrites `bytes.len()` already-written bytes at `at`.
    fn patch(&mut self, at: usize, bytes: &[u8]);
    /// Cuts the written bytes back to `len`.
    fn truncate_to(&mut self, len: usize);
}

impl FrameBuf for Vec<u8> {
    fn written(&self) -> usize {
        self.len()
    }
    fn patch(&mut self, at: usize, bytes: &[u8]) {
        self[at..at + bytes.len()].copy_from_slice(bytes);
    }
    fn truncate_to(&mut self, len: usize) {
        self.truncate(len);
    }
}

impl FrameBuf for bytes::BytesMut {
    fn written(&self) -> usize {
        self.len()
    }
    fn patch(&mut self, at: usize, bytes: &[u8]) {
        self[at..at + bytes.len()].copy_from_slice(bytes);
    }
    fn truncate_to(&mut self, len: usize) {
        self.truncate(len);
    }
}

/// Writes a 4-byte big-endian length, then a body, then patches the length.
///
/// ```
/// # use hadoop_wire::encode::LengthPrefixed;
/// let mut buf = Vec::new();
/// let mut frame = LengthPrefixed::new(&mut buf);
/// frame.buf().extend_from_slice(b"body");
/// assert_eq!(frame.finish().unwrap(), 8);
/// assert_eq!(buf, b"\0\0\0\x04body");
/// ```
#[must_use = "a LengthPrefixed dropped without finish() removes what was written"]
pub struct LengthPrefixed<'b, B: FrameBuf> {
    buf: &'b mut B,
    start: usize,
    finished: bool,
}

impl<'b, B: FrameBuf> LengthPrefixed<'b, B> {
    /// Reserves the 4 length bytes at the end of `buf`.
    pub fn new(buf: &'b mut B) -> Self {
        let start = buf.written();
        buf.put_u32(0);
        Self {
            buf,
            start,
            finished: false,
        }
    }

    /// The buffer, to write the body into.
    pub fn buf(&mut self) -> &mut B {
        self.buf
    }

    /// Body bytes written so far.
    pub fn body_len(&self) -> usize {
        self.buf.written() - self.start - 4
    }

    /// Patches the length; returns the whole frame's size (length bytes included). A body longer
    /// than `i32::MAX` is refused and removed.
    pub fn finish(mut self) -> Result<usize, EncodeError> {
        let len = self.body_len();
        if len > JAVA_INT_MAX as usize {
            return Err(EncodeError::FrameTooLong { len }); // Drop removes the frame.
        }
        self.buf.patch(self.start, &(len as u32).to_be_bytes());
        self.finished = true;
        Ok(len + 4)
    }
}

impl<B: FrameBuf> Drop for LengthPrefixed<'_, B> {
    fn drop(&mut self) {
        if !self.finished {
            self.buf.truncate_to(self.start);
        }
    }
}

/// A message that can be written as one varint-delimited part of a frame.
pub trait Body {
    /// Exact number of bytes [`encode_body`](Body::encode_body) writes.
    fn encoded_len(&self) -> usize;
    /// Writes the message (without its length).
    fn encode_body<B: BufMut>(&self, buf: &mut B);
}

/// Raw, already-encoded message bytes.
impl Body for [u8] {
    fn encoded_len(&self) -> usize {
        self.len()
    }
    fn encode_body<B: BufMut>(&self, buf: &mut B) {
        buf.put_slice(self);
    }
}

impl<T: Body + ?Sized> Body for &T {
    fn encoded_len(&self) -> usize {
        (**self).encoded_len()
    }
    fn encode_body<B: BufMut>(&self, buf: &mut B) {
        (**self).encode_body(buf)
    }
}

/// A prost message as a [`Body`].
#[derive(Debug, Clone, Copy)]
pub struct Proto<'m, M>(pub &'m M);

impl<M: prost::Message> Body for Proto<'_, M> {
    fn encoded_len(&self) -> usize {
        self.0.encoded_len()
    }
    fn encode_body<B: BufMut>(&self, buf: &mut B) {
        self.0.encode_raw(buf)
    }
}

/// A message written by the one protobuf writer ([`crate::writer::Encode`]) as a [`Body`].
#[derive(Debug, Clone, Copy)]
pub struct Encoded<'m, M: ?Sized>(pub &'m M);

impl<M: crate::writer::Encode + ?Sized> Body for Encoded<'_, M> {
    fn encoded_len(&self) -> usize {
        self.0.encoded_len()
    }
    fn encode_body<B: BufMut>(&self, buf: &mut B) {
        crate::writer::write(buf, self.0)
    }
}

/// Writes `body` as a varint-delimited part: exact length first, then the bytes.
pub fn write_delimited<B: BufMut, T: Body + ?Sized>(
    buf: &mut B,
    body: &T,
) -> Result<usize, EncodeError> {
    let len = body.encoded_len();
    if len > JAVA_INT_MAX as usize {
        return Err(EncodeError::PartTooLong { len });
    }
    encode_varint(len as u64, buf);
    body.encode_body(buf);
    Ok(encoded_len_varint(len as u64) + len)
}

/// The hand-encoded headers are [`Encode`] messages; as frame parts they are [`Body`]s through
/// the one writer (the same thing [`Encoded`] does for any other message).
macro_rules! body_via_writer {
    ($($t:ident),*) => {$(
        impl Body for $t<'_> {
            #[inline]
            fn encoded_len(&self) -> usize {
                Encode::encoded_len(self)
            }
            #[inline]
            fn encode_body<B: BufMut>(&self, buf: &mut B) {
                crate::writer::write(buf, self)
            }
        }
    )*};
}
body_via_writer!(
    RpcRequestHeader,
    RequestHeader,
    ConnectionContext,
    RpcResponseHeader
);

// ---------------------------------------------------------------------------------------------
// Hand-encoded messages

/// `RpcRequestHeaderProto` from borrowed fields, with rpcKind = RPC_PROTOCOL_BUFFER and
/// rpcOp = RPC_FINAL_PACKET always written (servers reject a header without rpcOp).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RpcRequestHeader<'a> {
    /// Signed, zigzag on the wire (-3 is `05`).
    pub call_id: i32,
    /// 16-byte UUID in Java clients.
    pub client_id: &'a [u8],
    /// 0 on a first attempt, -1 for the context and ping frames.
    pub retry_count: i32,
    /// Last seen NameNode state id (observer reads).
    pub state_id: Option<i64>,
    /// Opaque RBF router state, echoed from responses.
    pub router_federated_state: Option<&'a [u8]>,
}

impl<'a> RpcRequestHeader<'a> {
    /// A call's header: the given call id and retry count, no state id.
    pub fn call(call_id: i32, client_id: &'a [u8], retry_count: i32) -> Self {
        Self {
            call_id,
            client_id,
            retry_count,
            state_id: None,
            router_federated_state: None,
        }
    }
}

impl Encode for RpcRequestHeader<'_> {
    fn encode<S: Sink>(&self, s: &mut S) {
        s.int32(1, RPC_KIND_PROTOCOL_BUFFER);
        s.int32(2, RPC_OP_FINAL_PACKET);
        s.sint32(3, self.call_id);
        s.bytes(4, self.client_id);
        s.sint32(5, self.retry_count);
        if let Some(id) = self.state_id {
            s.int64(8, id);
        }
        if let Some(r) = self.router_federated_state {
            s.bytes(9, r);
        }
    }
}

/// `RequestHeaderProto` (ProtobufRpcEngine2): which method of which protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestHeader<'a> {
    /// e.g. `getFileInfo`, `nodeHeartbeat`.
    pub method_name: &'a str,
    /// e.g. `org.apache.hadoop.hdfs.protocol.ClientProtocol`.
    pub declaring_class_protocol_name: &'a str,
    /// 1 for every protocol used here.
    pub client_protocol_version: u64,
}

impl Encode for RequestHeader<'_> {
    fn encode<S: Sink>(&self, s: &mut S) {
        s.string(1, self.method_name);
        s.string(2, self.declaring_class_protocol_name);
        s.uint(3, self.client_protocol_version);
    }
}

/// `IpcConnectionContextProto { userInfo { effectiveUser, realUser }, protocol }`. `userInfo` is
/// written when either user is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ConnectionContext<'a> {
    pub effective_user: Option<&'a str>,
    /// Set only for proxy users.
    pub real_user: Option<&'a str>,
    /// Protocol name, equal to `declaringClassProtocolName` of the calls.
    pub protocol: Option<&'a str>,
}

/// `UserInformationProto { effectiveUser, realUser }`.
struct UserInfo<'a> {
    effective_user: Option<&'a str>,
    real_user: Option<&'a str>,
}

impl Encode for UserInfo<'_> {
    fn encode<S: Sink>(&self, s: &mut S) {
        if let Some(u) = self.effective_user {
            s.string(1, u);
        }
        if let Some(u) = self.real_user {
            s.string(2, u);
        }
    }
}

impl Encode for ConnectionContext<'_> {
    fn encode<S: Sink>(&self, s: &mut S) {
        if self.effective_user.is_some() || self.real_user.is_some() {
            let user = UserInfo {
                effective_user: self.effective_user,
                real_user: self.real_user,
            };
            s.message(2, &user);
        }
        if let Some(p) = self.protocol {
            s.string(3, p);
        }
    }
}

/// The failure part of an ERROR or FATAL response header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RpcFailure<'a> {
    /// `Error` (the connection stays open) or `Fatal` (the server closes it).
    pub status: RpcStatusProto,
    /// e.g. `org.apache.hadoop.ipc.StandbyException`.
    pub exception_class_name: &'a str,
    /// Message, often a stack trace.
    pub error_msg: &'a str,
    pub error_detail: RpcErrorCodeProto,
}

/// `RpcResponseHeaderProto` from borrowed fields. callId is a `uint32` here: negative ids are
/// 5-byte varints (-1 = `ff ff ff ff 0f`). serverIpcVersionNum (9), clientId and retryCount are
/// always written, as Hadoop does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RpcResponseHeader<'a> {
    pub call_id: i32,
    /// Echo of the request's client id.
    pub client_id: &'a [u8],
    /// Echo of the request's retry count.
    pub retry_count: i32,
    /// Server state id (NameNodes with the state context enabled set it on every response).
    pub state_id: Option<i64>,
    pub router_federated_state: Option<&'a [u8]>,
    /// `None` = SUCCESS.
    pub failure: Option<RpcFailure<'a>>,
}

impl<'a> RpcResponseHeader<'a> {
    /// A SUCCESS header echoing the request's call id, client id and retry count.
    pub fn success(call_id: i32, client_id: &'a [u8], retry_count: i32) -> Self {
        Self {
            call_id,
            client_id,
            retry_count,
            state_id: None,
            router_federated_state: None,
            failure: None,
        }
    }

    fn status(&self) -> i32 {
        self.failure
            .map_or(RpcStatusProto::Success as i32, |f| f.status as i32)
    }
}

impl Encode for RpcResponseHeader<'_> {
    fn encode<S: Sink>(&self, s: &mut S) {
        // `uint32 callId`: a negative id is its 32-bit pattern, a 5-byte varint.
        s.uint(1, u64::from(self.call_id as u32));
        s.int32(2, self.status());
        s.uint(3, u64::from(IPC_VERSION));
        if let Some(f) = &self.failure {
            s.string(4, f.exception_class_name);
            s.string(5, f.error_msg);
            s.int32(6, f.error_detail as i32);
        }
        s.bytes(7, self.client_id);
        s.sint32(8, self.retry_count);
        if let Some(id) = self.state_id {
            s.int64(9, id);
        }
        if let Some(r) = self.router_federated_state {
            s.bytes(10, r);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Frames

/// Appends the 7-byte SIMPLE-auth preamble (`hrpc`, 9, service class, 0).
pub fn preamble<B: BufMut>(buf: &mut B, service_class: u8) {
    use zerocopy::IntoBytes;
    buf.put_slice(Preamble::simple(service_class).as_bytes());
}

/// Appends the 7-byte SASL preamble (`hrpc`, 9, service class, 0xDF).
pub fn sasl_preamble<B: BufMut>(buf: &mut B, service_class: u8) {
    use zerocopy::IntoBytes;
    buf.put_slice(Preamble::sasl(service_class).as_bytes());
}

/// Appends a frame of delimited parts; returns its size. On error nothing is appended.
pub(crate) fn frame<B: FrameBuf>(
    buf: &mut B,
    write: impl FnOnce(&mut B) -> Result<(), EncodeError>,
) -> Result<usize, EncodeError> {
    let mut f = LengthPrefixed::new(buf);
    write(f.buf())?;
    f.finish()
}

/// Appends the connection-context frame: RPC header with callId -3 and retryCount -1, then the
/// delimited IpcConnectionContextProto (no RequestHeader). Returns the frame size.
pub fn connection_context_frame<B: FrameBuf>(
    buf: &mut B,
    client_id: &[u8],
    context: &ConnectionContext<'_>,
) -> Result<usize, EncodeError> {
    let header = RpcRequestHeader::call(CONNECTION_CONTEXT_CALL_ID, client_id, INVALID_RETRY_COUNT);
    frame(buf, |b| {
        write_delimited(b, &header)?;
        write_delimited(b, context)?;
        Ok(())
    })
}

/// Appends a call frame: RPC header, RequestHeader, request message. Returns the frame size.
pub fn call_frame<B: FrameBuf, T: Body + ?Sized>(
    buf: &mut B,
    header: &RpcRequestHeader<'_>,
    request_header: &RequestHeader<'_>,
    request: &T,
) -> Result<usize, EncodeError> {
    frame(buf, |b| {
        write_delimited(b, header)?;
        write_delimited(b, request_header)?;
        write_delimited(b, request)?;
        Ok(())
    })
}

/// Appends a ping frame: the RPC header alone, callId -4, retryCount -1. Returns the frame size.
pub fn ping_frame<B: FrameBuf>(buf: &mut B, client_id: &[u8]) -> Result<usize, EncodeError> {
    let header = RpcRequestHeader::call(PING_CALL_ID, client_id, INVALID_RETRY_COUNT);
    frame(buf, |b| write_delimited(b, &header).map(drop))
}

/// Appends a SUCCESS response frame: header, then the response message (an empty message is a
/// single `00` length byte). `header.failure` is ignored: the status is SUCCESS. Returns the
/// frame size.
pub fn success_response_frame<B: FrameBuf, T: Body + ?Sized>(
    buf: &mut B,
    header: &RpcResponseHeader<'_>,
    response: &T,
) -> Result<usize, EncodeError> {
    let header = RpcResponseHeader {
        failure: None,
        ..*header
    };
    frame(buf, |b| {
        write_delimited(b, &header)?;
        write_delimited(b, response)?;
        Ok(())
    })
}

/// Appends an ERROR or FATAL response frame: the header alone, with the failure fields set from
/// `failure`. Returns the frame size.
pub fn error_response_frame<B: FrameBuf>(
    buf: &mut B,
    header: &RpcResponseHeader<'_>,
    failure: &RpcFailure<'_>,
) -> Result<usize, EncodeError> {
    let header = RpcResponseHeader {
        failure: Some(*failure),
        ..*header
    };
    frame(buf, |b| write_delimited(b, &header).map(drop))
}

/// Appends Hadoop's answer to a preamble with a wrong version (client version >= 9): FATAL,
/// callId -1, FATAL_VERSION_MISMATCH, `RPC$VersionMismatch`, empty client id, retryCount -1.
/// `msg_buf` is scratch space for the message text (reused, so a warm one does not allocate).
pub fn version_mismatch_response<B: FrameBuf>(
    buf: &mut B,
    client_version: u8,
    msg_buf: &mut String,
) -> Result<usize, EncodeError> {
    use std::fmt::Write;
    msg_buf.clear();
    // Writing into a String cannot fail.
    let _ = write!(
        msg_buf,
        "Server IPC version {IPC_VERSION} cannot communicate with client version {client_version}"
    );
    let header = RpcResponseHeader::success(AUTHORIZATION_FAILED_CALL_ID, &[], INVALID_RETRY_COUNT);
    error_response_frame(
        buf,
        &header,
        &RpcFailure {
            status: RpcStatusProto::Fatal,
            exception_class_name: VERSION_MISMATCH_EXCEPTION,
            error_msg: msg_buf,
            error_detail: RpcErrorCodeProto::FatalVersionMismatch,
        },
    )
}
