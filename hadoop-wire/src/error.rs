//! Error types of the `ipc` crate.
//!
//! - [`FrameError`]: malformed or oversized framing (IPC frames, the connection preamble,
//!   delimited parts inside a frame, DataTransfer packets).
//! - [`EncodeError`]: an encoder was asked for something the wire cannot carry.
//! - [`Error`]: the crate's top-level error, wrapping the above and the protobuf
//!   [`DecodeError`](crate::reader::DecodeError) of the borrowing reader and the views.
//!
//! Every variant carries the numbers needed to log the problem; none carries peer bytes.

/// A framing error: the bytes do not form a valid frame, preamble or packet.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The 4-byte frame length claims more than the configured cap (`ipc.maximum.data.length`).
    /// Claims of 2^31 or more (negative as a Java `int`) always land here. Hadoop logs and closes
    /// the connection; it sends no response.
    #[error("frame length {len} exceeds the cap of {max} bytes")]
    FrameTooLong { len: u32, max: u32 },
    /// The input ended inside a structure whose size is known.
    #[error("truncated {what}: need {need} bytes, have {have}")]
    Truncated {
        what: &'static str,
        need: usize,
        have: usize,
    },
    /// A varint length prefix is longer than 5 bytes or does not fit an `i32`.
    #[error("malformed varint length prefix at offset {offset}")]
    BadVarint { offset: usize },
    /// A delimited part claims more bytes than remain in the frame.
    #[error("delimited part {index} claims {len} bytes, only {remaining} remain in the frame")]
    PartOverrun {
        index: usize,
        len: usize,
        remaining: usize,
    },
    /// The frame has more delimited parts (or bytes) than its kind allows.
    #[error("{len} unexpected trailing bytes in the frame after part {parts}")]
    TrailingBytes { parts: usize, len: usize },
    /// The frame body is empty: there is no RPC header.
    #[error("empty frame: no RPC header")]
    EmptyFrame,
    /// A frame's parts disagree with its header (e.g. a call without a RequestHeader).
    #[error("frame shape does not match call id {call_id}: {reason}")]
    Shape { call_id: i32, reason: &'static str },
    /// The connection preamble names an auth protocol Hadoop does not know.
    #[error("unknown auth protocol {0:#04x} in the connection preamble")]
    UnknownAuthProtocol(u8),
    /// A DataTransfer packet's `packetLen` is below 4 (it counts its own 4 bytes).
    #[error("packet length {len} is below the 4 bytes it must count for itself")]
    PacketLenTooSmall { len: u32 },
    /// A DataTransfer packet (header plus payload) is larger than the configured cap.
    #[error("packet of {len} bytes exceeds the cap of {max} bytes")]
    PacketTooLong { len: u64, max: u32 },
    /// A DataTransfer packet header is longer than `PKT_MAX_HEADER_LEN` (33).
    #[error("packet header length {len} exceeds the maximum of {max}")]
    PacketHeaderTooLong { len: u16, max: u16 },
    /// `dataLen` in the packet header is negative or larger than the packet's payload.
    #[error("packet dataLen {data_len} does not fit the {payload} payload bytes")]
    PacketDataLen { data_len: i32, payload: usize },
    /// The checksum bytes do not match the number of chunks of `dataLen`.
    #[error("packet carries {got} checksum bytes, {data_len} data bytes need {expected}")]
    PacketChecksumLen {
        got: usize,
        expected: usize,
        data_len: usize,
    },
    /// A packet header breaks the read-path sequence rules (seqno + 1, only the last packet
    /// without data, the last packet empty).
    #[error("packet seqno {seqno}: {reason}")]
    PacketSequence { seqno: i64, reason: &'static str },
    /// `bytesPerChecksum` of 0, or a checksum size other than 0 or 4.
    #[error("invalid checksum parameters: bytes_per_checksum {bytes_per_checksum}, checksum size {checksum_size}")]
    ChecksumParams {
        bytes_per_checksum: u32,
        checksum_size: u32,
    },
}

/// An encoder error: the requested frame cannot be represented on the wire.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// The frame body would not fit the 4-byte length as a non-negative Java `int`.
    #[error("frame body of {len} bytes does not fit a Java int length")]
    FrameTooLong { len: usize },
    /// A delimited part would not fit a non-negative Java `int` varint length.
    #[error("delimited part of {len} bytes is too long")]
    PartTooLong { len: usize },
}

/// The crate's top-level error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// Framing: lengths, preamble, delimited parts, packets.
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// Protobuf decoding of a message (borrowing reader and views).
    #[error(transparent)]
    Decode(#[from] crate::reader::DecodeError),
    /// Encoding.
    #[error(transparent)]
    Encode(#[from] EncodeError),
}
