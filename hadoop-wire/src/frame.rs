//! Fixed wire headers and frame decoding, sans-IO: bytes in, borrowed slices out.
//!
//! - [`FrameLength`], [`Preamble`], [`PacketPrefix`]: the fixed layouts as zerocopy structs
//!   (big-endian integers, alignment 1, read straight out of a receive buffer).
//! - [`parse_preamble`]: the 7-byte connection preamble with Hadoop's server behaviour as a typed
//!   [`PreambleOutcome`].
//! - [`FrameDecoder`]: given the bytes received so far, says [`Decoded::NeedMore`] or
//!   [`Decoded::Frame`] (a range of the input). The length claim is checked against the cap
//!   before anything else happens; the decoder never allocates.
//! - [`FrameAccumulator`]: the straddling case. It hands out frames that lie whole in a receive
//!   buffer as borrowed slices and copies only the bytes of a frame that straddles buffers, into a
//!   `Vec` that grows with the bytes actually received, never with the peer's claim.
//! - [`RequestFrame`] / [`ResponseFrame`]: a frame body split into its varint-delimited parts,
//!   with the lazy header views of [`crate::view::rpc`] (`parse` = split, validate the RPC
//!   header, check the frame's shape against it).
//! - [`PacketDecoder`] / [`Packet`]: the DataTransfer packet (`packetLen`, `headerLen`, header,
//!   checksums, data) with its sanity checks; the header is read with
//!   [`PacketHeaderView`].

use std::ops::Range;

use zerocopy::byteorder::big_endian::{U16, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use crate::error::{Error, FrameError};
use crate::view::hdfs::{PacketHeader, PacketHeaderView};
use crate::view::rpc::{RequestHeaderView, RpcRequestHeaderView, RpcResponseHeaderView};

// The RPC constants live in `crate::rpc`; re-exported here, where they were first defined.
pub use crate::rpc::{
    AUTHORIZATION_FAILED_CALL_ID, AUTH_NONE, AUTH_SASL, CONNECTION_CONTEXT_CALL_ID, IPC_VERSION,
    MAGIC, PING_CALL_ID, SASL_CALL_ID,
};
/// The first four bytes of an HTTP GET, which Hadoop answers with a plain-text 404.
pub const HTTP_GET: [u8; 4] = *b"GET ";
/// Default cap on a request frame: `ipc.maximum.data.length` = 128 MiB.
pub const DEFAULT_MAX_DATA_LENGTH: u32 = 128 * 1024 * 1024;
/// Largest length a Java `int` can hold; a frame length above it is negative in Java.
pub const JAVA_INT_MAX: u32 = i32::MAX as u32;

/// A plain-text HTTP reply for [`PreambleOutcome::HttpProbe`] (our wording). Send it, then close.
pub const HTTP_PROBE_RESPONSE: &[u8] = b"HTTP/1.1 404 Not Found\r\n\
Content-type: text/plain\r\n\r\n\
This is a Hadoop IPC port, not an HTTP port. Point your browser at the web UI port instead.\r\n";

/// The 4-byte big-endian frame length that precedes every IPC frame in both directions. It counts
/// the bytes after itself.
#[derive(
    FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug, PartialEq, Eq,
)]
#[repr(C)]
pub struct FrameLength {
    pub len: U32,
}

impl FrameLength {
    pub const SIZE: usize = 4;

    pub fn new(len: u32) -> Self {
        Self { len: U32::new(len) }
    }

    pub fn get(&self) -> u32 {
        self.len.get()
    }
}

/// The 7-byte connection preamble a client sends once per connection.
#[derive(
    FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug, PartialEq, Eq,
)]
#[repr(C)]
pub struct Preamble {
    /// `hrpc`.
    pub magic: [u8; 4],
    /// IPC version, 9.
    pub version: u8,
    /// Service class (QoS hint, stored by the server).
    pub service_class: u8,
    /// Auth protocol: [`AUTH_NONE`] or [`AUTH_SASL`].
    pub auth_protocol: u8,
}

impl Preamble {
    pub const SIZE: usize = 7;

    /// The preamble of a SIMPLE-auth client with the given service class.
    pub const fn simple(service_class: u8) -> Self {
        Self {
            magic: MAGIC,
            version: IPC_VERSION,
            service_class,
            auth_protocol: AUTH_NONE,
        }
    }

    /// The preamble of a SASL client (auth protocol 0xDF) with the given service class.
    pub const fn sasl(service_class: u8) -> Self {
        Self {
            magic: MAGIC,
            version: IPC_VERSION,
            service_class,
            auth_protocol: AUTH_SASL,
        }
    }
}

/// The 6-byte prefix of a DataTransfer packet: `packetLen` (counts its own 4 bytes, the checksums
/// and the data, not the header) and `headerLen` (size of the PacketHeaderProto that follows).
#[derive(
    FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug, PartialEq, Eq,
)]
#[repr(C)]
pub struct PacketPrefix {
    pub packet_len: U32,
    pub header_len: U16,
}

impl PacketPrefix {
    pub const SIZE: usize = 6;

    pub fn new(packet_len: u32, header_len: u16) -> Self {
        Self {
            packet_len: U32::new(packet_len),
            header_len: U16::new(header_len),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Preamble

/// What a Hadoop server does with a connection preamble, as a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreambleOutcome {
    /// Fewer than 7 bytes so far: this many more are needed (Hadoop also waits for all 7).
    NeedMore(usize),
    /// `hrpc`, version 9, auth NONE: SIMPLE auth. The server sends nothing back; the next bytes
    /// are the connection-context frame.
    Simple { service_class: u8 },
    /// `hrpc`, version 9, auth SASL (0xDF): the next frame is the client's NEGOTIATE (or
    /// INITIATE), callId −33.
    Sasl { service_class: u8 },
    /// The first four bytes are `GET `: reply [`HTTP_PROBE_RESPONSE`] and close.
    HttpProbe,
    /// Wrong magic or a version other than 9. Hadoop answers a client version >= 9 with a FATAL
    /// response (callId -1, FATAL_VERSION_MISMATCH; see
    /// [`encode::version_mismatch_response`](crate::encode::version_mismatch_response)) and
    /// closes. `magic_ok` tells a wrong version from a non-Hadoop peer.
    VersionMismatch { magic_ok: bool, client_version: u8 },
}

/// Parses the connection preamble at the start of `buf` (the first [`Preamble::SIZE`] bytes; any
/// bytes after them belong to the first frame). An unknown auth protocol is an error.
pub fn parse_preamble(buf: &[u8]) -> Result<PreambleOutcome, FrameError> {
    let Ok((p, _rest)) = Preamble::ref_from_prefix(buf) else {
        return Ok(PreambleOutcome::NeedMore(Preamble::SIZE - buf.len()));
    };
    if p.magic == HTTP_GET {
        return Ok(PreambleOutcome::HttpProbe);
    }
    if p.magic != MAGIC || p.version != IPC_VERSION {
        return Ok(PreambleOutcome::VersionMismatch {
            magic_ok: p.magic == MAGIC,
            client_version: p.version,
        });
    }
    match p.auth_protocol {
        AUTH_NONE => Ok(PreambleOutcome::Simple {
            service_class: p.service_class,
        }),
        AUTH_SASL => Ok(PreambleOutcome::Sasl {
            service_class: p.service_class,
        }),
        other => Err(FrameError::UnknownAuthProtocol(other)),
    }
}

// ---------------------------------------------------------------------------------------------
// Frames

/// Result of [`FrameDecoder::decode`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decoded {
    /// At least this many more bytes are needed. Once the length is known it is exact: the frame
    /// is complete after exactly this many more bytes.
    NeedMore(usize),
    /// A whole frame: the body (after the 4 length bytes) is `buf[range]`, and `range.end` bytes
    /// of the input are consumed.
    Frame(Range<usize>),
}

/// Cuts length-prefixed IPC frames out of received bytes. Holds only the cap; never allocates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameDecoder {
    /// Largest accepted body length (the value of the 4-byte length). Claims above it, and any
    /// claim of 2^31 or more whatever this says, are refused.
    pub max_len: u32,
}

impl Default for FrameDecoder {
    fn default() -> Self {
        Self {
            max_len: DEFAULT_MAX_DATA_LENGTH,
        }
    }
}

impl FrameDecoder {
    pub const fn new(max_len: u32) -> Self {
        Self { max_len }
    }

    /// The effective cap: `max_len`, but never above `i32::MAX`.
    pub const fn cap(&self) -> u32 {
        if self.max_len > JAVA_INT_MAX {
            JAVA_INT_MAX
        } else {
            self.max_len
        }
    }

    /// Checks a length claim against the cap.
    pub const fn check_len(&self, len: u32) -> Result<u32, FrameError> {
        if len > self.cap() {
            Err(FrameError::FrameTooLong {
                len,
                max: self.cap(),
            })
        } else {
            Ok(len)
        }
    }

    /// Looks at the bytes received so far (starting at a frame boundary).
    pub fn decode(&self, buf: &[u8]) -> Result<Decoded, FrameError> {
        let Ok((len, _)) = FrameLength::ref_from_prefix(buf) else {
            return Ok(Decoded::NeedMore(FrameLength::SIZE - buf.len()));
        };
        let len = self.check_len(len.get())? as usize;
        let end = FrameLength::SIZE + len;
        if buf.len() < end {
            Ok(Decoded::NeedMore(end - buf.len()))
        } else {
            Ok(Decoded::Frame(FrameLength::SIZE..end))
        }
    }
}

/// Where [`FrameAccumulator::next_frame`] found a frame body.
#[derive(Debug, PartialEq, Eq)]
pub enum FrameBytes<'acc, 'input> {
    /// The whole frame lay in the input: no copy.
    Borrowed(&'input [u8]),
    /// The frame straddled inputs and was assembled in the accumulator.
    Assembled(&'acc [u8]),
}

impl std::ops::Deref for FrameBytes<'_, '_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            FrameBytes::Borrowed(b) => b,
            FrameBytes::Assembled(b) => b,
        }
    }
}

/// One step of [`FrameAccumulator::next_frame`].
#[derive(Debug, PartialEq, Eq)]
pub struct Step<'acc, 'input> {
    /// Bytes of the input used by this step (copied, or covered by the returned frame). Advance
    /// the input by this much before the next call.
    pub consumed: usize,
    /// A complete frame body, if one was completed.
    pub frame: Option<FrameBytes<'acc, 'input>>,
}

/// Frames from a stream of receive buffers. A frame that lies whole in one buffer is handed out
/// borrowed; only a frame that straddles buffers is copied, into an owned `Vec` that grows with
/// the bytes actually received (so its size is bounded by real data and by the cap, never by an
/// unchecked claim).
///
/// ```
/// # use hadoop_wire::frame::{FrameAccumulator, FrameDecoder};
/// let mut acc = FrameAccumulator::new(FrameDecoder::default());
/// let mut frames = Vec::new();
/// for chunk in [&[0u8, 0, 0][..], &[2, b'h', b'i', 0, 0, 0, 0][..]] {
///     let mut rest = chunk;
///     loop {
///         let step = acc.next_frame(rest).unwrap();
///         rest = &rest[step.consumed..];
///         match step.frame {
///             Some(f) => frames.push(f.to_vec()),
///             None => break,
///         }
///     }
/// }
/// assert_eq!(frames, [b"hi".to_vec(), Vec::new()]);
/// ```
#[derive(Debug)]
pub struct FrameAccumulator {
    decoder: FrameDecoder,
    /// Bytes of a partial frame, length prefix included.
    buf: Vec<u8>,
    /// `buf` holds a frame that was handed out; clear it on the next call.
    delivered: bool,
    /// Capacity kept after a large frame; anything above is released.
    retain: usize,
}

impl FrameAccumulator {
    /// Default capacity kept between straddling frames.
    pub const DEFAULT_RETAIN: usize = 64 * 1024;

    pub fn new(decoder: FrameDecoder) -> Self {
        Self {
            decoder,
            buf: Vec::new(),
            delivered: false,
            retain: Self::DEFAULT_RETAIN,
        }
    }

    /// Sets how much capacity is kept after a straddling frame has been handed out.
    pub fn with_retained_capacity(mut self, retain: usize) -> Self {
        self.retain = retain;
        self
    }

    pub fn decoder(&self) -> FrameDecoder {
        self.decoder
    }

    /// Changes the cap for what follows (a server lowers it while a connection is still
    /// negotiating SASL). A partial frame already held is checked against the new cap on the
    /// next call, before anything more of it is copied.
    pub fn set_decoder(&mut self, decoder: FrameDecoder) {
        self.decoder = decoder;
    }

    /// Bytes of an incomplete frame held (0 at a frame boundary).
    pub fn pending(&self) -> usize {
        if self.delivered {
            0
        } else {
            self.buf.len()
        }
    }

    /// Capacity of the internal buffer (for tests and metrics).
    pub fn capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// Consumes bytes from `input` until a frame is complete or the input is exhausted.
    ///
    /// Returns how much of `input` was used and, if a frame was completed, its body. Call again
    /// with the rest of the input (`&input[step.consumed..]`) until `frame` is `None`; then all of
    /// the input has been consumed. After an error the stream is unusable (Hadoop closes the
    /// connection).
    pub fn next_frame<'acc, 'input>(
        &'acc mut self,
        input: &'input [u8],
    ) -> Result<Step<'acc, 'input>, FrameError> {
        if self.delivered {
            self.buf.clear();
            if self.buf.capacity() > self.retain {
                self.buf.shrink_to(self.retain);
            }
            self.delivered = false;
        }
        if self.buf.is_empty() {
            // Fast path: frames that lie whole in the input are borrowed.
            return match self.decoder.decode(input)? {
                Decoded::Frame(range) => Ok(Step {
                    consumed: range.end,
                    frame: Some(FrameBytes::Borrowed(&input[range])),
                }),
                Decoded::NeedMore(_) => {
                    // Everything left is the start of one frame whose length (if known) is
                    // already checked against the cap.
                    self.buf.extend_from_slice(input);
                    Ok(Step {
                        consumed: input.len(),
                        frame: None,
                    })
                }
            };
        }
        let mut consumed = 0;
        // Complete the length prefix first, so the claim is checked before the body is copied.
        if self.buf.len() < FrameLength::SIZE {
            let take = (FrameLength::SIZE - self.buf.len()).min(input.len());
            self.buf.extend_from_slice(&input[..take]);
            consumed += take;
        }
        match self.decoder.decode(&self.buf)? {
            Decoded::Frame(_) => {}
            Decoded::NeedMore(missing) => {
                let take = missing.min(input.len() - consumed);
                self.buf
                    .extend_from_slice(&input[consumed..consumed + take]);
                consumed += take;
            }
        }
        match self.decoder.decode(&self.buf)? {
            Decoded::Frame(range) => {
                self.delivered = true;
                Ok(Step {
                    consumed,
                    frame: Some(FrameBytes::Assembled(&self.buf[range])),
                })
            }
            Decoded::NeedMore(_) => Ok(Step {
                consumed,
                frame: None,
            }),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Delimited parts

/// Reads a varint length prefix at `buf[*pos..]`: at most 5 bytes, value at most `i32::MAX`
/// (Java reads the size as an `int`; larger is negative). Advances `pos`.
fn read_len_varint(buf: &[u8], pos: &mut usize) -> Result<usize, FrameError> {
    let start = *pos;
    let mut value: u64 = 0;
    for i in 0..5 {
        let Some(&b) = buf.get(start + i) else {
            return Err(FrameError::Truncated {
                what: "varint length prefix",
                need: start + i + 1,
                have: buf.len(),
            });
        };
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            if value > u64::from(JAVA_INT_MAX) {
                return Err(FrameError::BadVarint { offset: start });
            }
            *pos = start + i + 1;
            return Ok(value as usize);
        }
    }
    Err(FrameError::BadVarint { offset: start })
}

/// Splits up to `N` varint-delimited parts off `body`. Returns the parts found and their count.
/// Bytes after the `N`th part are an error.
fn split_delimited<const N: usize>(body: &[u8]) -> Result<([&[u8]; N], usize), FrameError> {
    let mut parts: [&[u8]; N] = [&[]; N];
    let mut pos = 0;
    let mut n = 0;
    while pos < body.len() {
        if n == N {
            return Err(FrameError::TrailingBytes {
                parts: n,
                len: body.len() - pos,
            });
        }
        let len = read_len_varint(body, &mut pos)?;
        let remaining = body.len() - pos;
        if len > remaining {
            return Err(FrameError::PartOverrun {
                index: n,
                len,
                remaining,
            });
        }
        parts[n] = &body[pos..pos + len];
        pos += len;
        n += 1;
    }
    Ok((parts, n))
}

/// A request frame body (after the 4-byte length) split into its delimited parts.
///
/// The shape follows from the number of parts: 1 = ping (callId -4, header only); 2 = connection
/// context (callId -3: header and IpcConnectionContextProto); 3 = call (header, RequestHeaderProto
/// and request message). [`RequestFrame::check_call_id`] checks the shape against the header's
/// call id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestFrame<'a> {
    /// RpcRequestHeaderProto bytes.
    pub rpc_header: &'a [u8],
    /// RequestHeaderProto bytes (absent in context and ping frames).
    pub request_header: Option<&'a [u8]>,
    /// The message after the headers: the request, or the IpcConnectionContextProto of a context
    /// frame. Absent in a ping. An empty message is `Some(&[])` (one `00` length byte on the wire).
    pub payload: Option<&'a [u8]>,
}

impl<'a> RequestFrame<'a> {
    /// Splits a request frame body. Every length is bounds-checked; more than three parts, or
    /// none, is an error.
    pub fn split(body: &'a [u8]) -> Result<Self, FrameError> {
        let (p, n) = split_delimited::<3>(body)?;
        match n {
            0 => Err(FrameError::EmptyFrame),
            1 => Ok(Self {
                rpc_header: p[0],
                request_header: None,
                payload: None,
            }),
            2 => Ok(Self {
                rpc_header: p[0],
                request_header: None,
                payload: Some(p[1]),
            }),
            _ => Ok(Self {
                rpc_header: p[0],
                request_header: Some(p[1]),
                payload: Some(p[2]),
            }),
        }
    }

    /// Splits, validates the RPC header, and checks the shape against its call id. Returns the
    /// frame and the call id. (Whether rpcKind, rpcOp and the RequestHeader are acceptable is the
    /// server's call: read them from the views.)
    pub fn parse(body: &'a [u8]) -> Result<(Self, i32), Error> {
        let frame = Self::split(body)?;
        let header = frame.rpc_header_view();
        header.validate()?;
        let call_id = header.call_id()?;
        frame.check_call_id(call_id)?;
        Ok((frame, call_id))
    }

    /// The RPC header as a lazy view (nothing read yet).
    pub fn rpc_header_view(&self) -> RpcRequestHeaderView<'a> {
        RpcRequestHeaderView::new(self.rpc_header)
    }

    /// The RequestHeader (method, protocol, version) as a lazy view, if the frame has one.
    pub fn request_header_view(&self) -> Option<RequestHeaderView<'a>> {
        self.request_header.map(RequestHeaderView::new)
    }

    /// Checks that the frame's shape fits the call id from its RPC header: a ping (-4) is header
    /// only, a connection context (-3) has a payload and no RequestHeader, a call (>= 0) has
    /// both. Other negative ids (SASL -33, ...) are refused: this server speaks SIMPLE only.
    pub fn check_call_id(&self, call_id: i32) -> Result<(), FrameError> {
        let shape = (self.request_header.is_some(), self.payload.is_some());
        let ok = match call_id {
            PING_CALL_ID => shape == (false, false),
            CONNECTION_CONTEXT_CALL_ID => shape == (false, true),
            id if id >= 0 => shape == (true, true),
            _ => {
                return Err(FrameError::Shape {
                    call_id,
                    reason: "unsupported negative call id",
                })
            }
        };
        if ok {
            Ok(())
        } else {
            Err(FrameError::Shape {
                call_id,
                reason: match call_id {
                    PING_CALL_ID => "a ping carries only the RPC header",
                    CONNECTION_CONTEXT_CALL_ID => {
                        "a connection context is the RPC header and one message"
                    }
                    _ => "a call is the RPC header, a RequestHeader and a message",
                },
            })
        }
    }
}

/// A response frame body split into its delimited parts: the RpcResponseHeaderProto and, for
/// SUCCESS only, the response message (an empty one is `Some(&[])`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseFrame<'a> {
    pub header: &'a [u8],
    pub payload: Option<&'a [u8]>,
}

impl<'a> ResponseFrame<'a> {
    /// Splits, validates the header, and checks the shape against the status: a SUCCESS frame
    /// carries a payload, an ERROR or FATAL frame none.
    pub fn parse(body: &'a [u8]) -> Result<(Self, RpcResponseHeaderView<'a>), Error> {
        use crate::pb::hadoop::common::rpc_response_header_proto::RpcStatusProto;
        let frame = Self::split(body)?;
        let header = frame.header_view();
        header.validate()?;
        let success = header.status()? == RpcStatusProto::Success;
        if success != frame.payload.is_some() {
            return Err(FrameError::Shape {
                call_id: header.call_id_i32()?,
                reason: if success {
                    "a SUCCESS response carries a payload"
                } else {
                    "an ERROR or FATAL response carries no payload"
                },
            }
            .into());
        }
        Ok((frame, header))
    }

    /// The response header as a lazy view (nothing read yet).
    pub fn header_view(&self) -> RpcResponseHeaderView<'a> {
        RpcResponseHeaderView::new(self.header)
    }

    /// Splits a response frame body: one or two delimited parts, nothing after them.
    pub fn split(body: &'a [u8]) -> Result<Self, FrameError> {
        let (p, n) = split_delimited::<2>(body)?;
        match n {
            0 => Err(FrameError::EmptyFrame),
            1 => Ok(Self {
                header: p[0],
                payload: None,
            }),
            _ => Ok(Self {
                header: p[0],
                payload: Some(p[1]),
            }),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// DataTransfer packets

/// `PKT_MAX_HEADER_LEN`: the largest PacketHeaderProto (all fields present).
pub const PACKET_MAX_HEADER_LEN: u16 = 33;
/// Default cap on `packetLen + headerLen` (Java's `PacketReceiver.MAX_PACKET_SIZE`, 16 MiB).
pub const DEFAULT_MAX_PACKET_LEN: u32 = 16 * 1024 * 1024;
/// Size of one CRC32/CRC32C checksum on the wire.
pub const CRC_SIZE: u32 = 4;

/// Result of [`PacketDecoder::decode`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PacketDecoded<'a> {
    /// At least this many more bytes are needed (exact once the 6-byte prefix is in).
    NeedMore(usize),
    /// A whole packet; `consumed` bytes of the input belong to it.
    Packet {
        packet: RawPacket<'a>,
        consumed: usize,
    },
}

/// A packet cut at its prefix: the header bytes and the checksums-plus-data bytes, not yet split
/// (the split needs `dataLen` from the header; see [`RawPacket::split`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawPacket<'a> {
    /// PacketHeaderProto bytes (not length-delimited; `headerLen` gives the size).
    pub header: &'a [u8],
    /// Checksums followed by data: `packetLen - 4` bytes.
    pub body: &'a [u8],
}

/// A DataTransfer packet split into its parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<'a> {
    /// PacketHeaderProto bytes.
    pub header: &'a [u8],
    /// Checksums: one per chunk of `bytesPerChecksum` data bytes (the last chunk may be short).
    pub checksums: &'a [u8],
    /// Data bytes (`dataLen` of them).
    pub data: &'a [u8],
}

/// Cuts DataTransfer packets out of received bytes; holds only the cap, never allocates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketDecoder {
    /// Largest accepted `packetLen + headerLen`.
    pub max_len: u32,
}

impl Default for PacketDecoder {
    fn default() -> Self {
        Self {
            max_len: DEFAULT_MAX_PACKET_LEN,
        }
    }
}

impl PacketDecoder {
    pub const fn new(max_len: u32) -> Self {
        Self { max_len }
    }

    /// Looks at the bytes received so far (starting at a packet boundary).
    pub fn decode<'a>(&self, buf: &'a [u8]) -> Result<PacketDecoded<'a>, FrameError> {
        let Ok((prefix, _)) = PacketPrefix::ref_from_prefix(buf) else {
            return Ok(PacketDecoded::NeedMore(PacketPrefix::SIZE - buf.len()));
        };
        let packet_len = prefix.packet_len.get();
        let header_len = prefix.header_len.get();
        if packet_len < 4 {
            return Err(FrameError::PacketLenTooSmall { len: packet_len });
        }
        if header_len > PACKET_MAX_HEADER_LEN {
            return Err(FrameError::PacketHeaderTooLong {
                len: header_len,
                max: PACKET_MAX_HEADER_LEN,
            });
        }
        let total = u64::from(packet_len) + u64::from(header_len);
        if total > u64::from(self.max_len.min(JAVA_INT_MAX)) {
            return Err(FrameError::PacketTooLong {
                len: total,
                max: self.max_len.min(JAVA_INT_MAX),
            });
        }
        // Wire size: 6 prefix bytes + header + (packetLen - 4) checksum and data bytes.
        let header_end = PacketPrefix::SIZE + header_len as usize;
        let end = header_end + (packet_len as usize - 4);
        if buf.len() < end {
            return Ok(PacketDecoded::NeedMore(end - buf.len()));
        }
        Ok(PacketDecoded::Packet {
            packet: RawPacket {
                header: &buf[PacketPrefix::SIZE..header_end],
                body: &buf[header_end..end],
            },
            consumed: end,
        })
    }
}

/// Number of checksum bytes that `data_len` data bytes need: one checksum per started chunk.
pub fn checksum_len(
    data_len: usize,
    bytes_per_checksum: u32,
    checksum_size: u32,
) -> Result<usize, FrameError> {
    if bytes_per_checksum == 0 || !(checksum_size == 0 || checksum_size == CRC_SIZE) {
        return Err(FrameError::ChecksumParams {
            bytes_per_checksum,
            checksum_size,
        });
    }
    Ok(data_len.div_ceil(bytes_per_checksum as usize) * checksum_size as usize)
}

impl<'a> RawPacket<'a> {
    /// The packet header as a lazy view.
    pub fn header_view(&self) -> PacketHeaderView<'a> {
        PacketHeaderView::new(self.header)
    }

    /// Reads the header (required fields checked), splits the body with its `dataLen` and checks
    /// the checksum count: ready-to-verify parts.
    pub fn parse(
        &self,
        bytes_per_checksum: u32,
        checksum_size: u32,
    ) -> Result<(PacketHeader, Packet<'a>), Error> {
        let header = self.header_view().read()?;
        let packet = self.split_checked(header.data_len, bytes_per_checksum, checksum_size)?;
        Ok((header, packet))
    }

    /// Splits the body with `data_len` from the packet header: the checksums come first and
    /// take `body.len() - data_len` bytes. A negative `data_len`, or one larger than the body,
    /// is an error.
    pub fn split(&self, data_len: i32) -> Result<Packet<'a>, FrameError> {
        let payload = self.body.len();
        let dl = usize::try_from(data_len)
            .ok()
            .filter(|&d| d <= payload)
            .ok_or(FrameError::PacketDataLen { data_len, payload })?;
        let (checksums, data) = self.body.split_at(payload - dl);
        Ok(Packet {
            header: self.header,
            checksums,
            data,
        })
    }

    /// [`split`](Self::split), then checks the checksum count against the chunking:
    /// `ceil(dataLen / bytes_per_checksum) * checksum_size` bytes of checksums
    /// (`checksum_size` 4 for CRC32/CRC32C, 0 for CHECKSUM_NULL).
    pub fn split_checked(
        &self,
        data_len: i32,
        bytes_per_checksum: u32,
        checksum_size: u32,
    ) -> Result<Packet<'a>, FrameError> {
        let p = self.split(data_len)?;
        p.check_checksums(bytes_per_checksum, checksum_size)?;
        Ok(p)
    }
}

impl<'a> Packet<'a> {
    /// Checks that the number of checksum bytes matches the data length.
    pub fn check_checksums(
        &self,
        bytes_per_checksum: u32,
        checksum_size: u32,
    ) -> Result<(), FrameError> {
        let expected = checksum_len(self.data.len(), bytes_per_checksum, checksum_size)?;
        if self.checksums.len() != expected {
            return Err(FrameError::PacketChecksumLen {
                got: self.checksums.len(),
                expected,
                data_len: self.data.len(),
            });
        }
        Ok(())
    }

    /// Pairs each CRC (4 bytes, big-endian) with its chunk of data. Call after
    /// [`check_checksums`](Self::check_checksums) with the same `bytes_per_checksum`; stops at the
    /// shorter of the two sequences otherwise.
    pub fn crc_chunks(
        &self,
        bytes_per_checksum: u32,
    ) -> impl Iterator<Item = (u32, &'a [u8])> + 'a {
        let crcs = self.checksums.chunks_exact(CRC_SIZE as usize);
        let data = self.data.chunks(bytes_per_checksum.max(1) as usize);
        crcs.zip(data)
            .map(|(c, d)| (u32::from_be_bytes([c[0], c[1], c[2], c[3]]), d))
    }
}

/// The read-path sequence rules for consecutive packets (Java's `PacketHeader.sanityCheck`):
/// seqno is the previous one plus 1, only the last packet may have `dataLen <= 0`, and the last
/// packet carries no data. Pass `last_seqno = first_seqno - 1` for the first packet.
pub fn check_packet_sequence(header: &PacketHeader, last_seqno: i64) -> Result<(), FrameError> {
    let err = |reason| {
        Err(FrameError::PacketSequence {
            seqno: header.seqno,
            reason,
        })
    };
    if header.data_len <= 0 && !header.last_packet_in_block {
        return err("only the last packet may have no data");
    }
    if header.last_packet_in_block && header.data_len != 0 {
        return err("the last packet must carry no data");
    }
    if Some(header.seqno) != last_seqno.checked_add(1) {
        return err("seqno is not the previous one plus 1");
    }
    Ok(())
}
