//! Reading one block from a DataNode, sans-IO: DataTransferProtocol v28 `OP_READ_BLOCK`.
//!
//! ```text
//! client → DN   u16 28 | u8 81 | varint len + OpReadBlockProto          (encode_read_block)
//! DN → client   varint len + BlockOpResponseProto                         (status, checksum, chunkOffset)
//! DN → client   packet*: u32 packetLen | u16 headerLen | PacketHeaderProto | CRCs | data
//!               … until the data covers the range, then an empty packet with lastPacketInBlock
//! client → DN   varint len + ClientReadStatusProto{CHECKSUM_OK}           (BlockRead::status_bytes)
//! ```
//!
//! [`BlockRead`] is the state machine: the caller feeds it the bytes received so far
//! ([`BlockRead::poll`]) and gets back how many it consumed and, for each data packet, the
//! verified bytes of the requested range (a borrowed slice of the input). A packet's bytes are
//! returned only after every chunk of it verified, so a checksum error returns no wrong byte.
//!
//! Alignment: the DataNode starts at the checksum chunk holding the requested offset
//! (`chunkOffset`, aligned down) and ends at the end of the chunk holding the last requested
//! byte (or the block's end, where the last chunk may be short). The reader discards
//! `offset − chunkOffset` bytes at the front and trims the tail.

use crate::checksum::{ChecksumKind, DataChecksum};
use crate::error::{BlockName, Error};
use hadoop_wire::frame::{check_packet_sequence, PacketDecoded, PacketDecoder};
use hadoop_wire::pb::hadoop::hdfs::{BlockOpResponseProto, Status};
use hadoop_wire::writer::{Encode, Sink, Writer};
use prost::encoding::encoded_len_varint;
use prost::Message;

pub use hadoop_wire::hdfs::{DATA_TRANSFER_VERSION, OP_READ_BLOCK};
/// Largest BlockOpResponseProto accepted (it holds a status, checksum info and a message).
pub const MAX_RESPONSE_LEN: usize = 1 << 20;

/// What to read.
#[derive(Debug, Clone, Copy)]
pub struct ReadBlockRequest<'a> {
    /// The `ExtendedBlockProto` bytes exactly as the NameNode sent them (`LocatedBlock.b`).
    pub block: &'a [u8],
    /// The `TokenProto` bytes as the NameNode sent them (`LocatedBlock.blockToken`).
    pub token: &'a [u8],
    /// `dfs.client.name`-like identity shown in DataNode logs (Java: `DFSClient_…`).
    pub client_name: &'a str,
    /// First byte, offset in the block.
    pub offset: u64,
    /// Bytes to read (> 0).
    pub len: u64,
}

/// `BaseHeaderProto{block, token}`, both copied as the NameNode sent them.
struct BaseHeader<'a> {
    block: &'a [u8],
    token: &'a [u8],
}

impl Encode for BaseHeader<'_> {
    fn encode<S: Sink>(&self, s: &mut S) {
        s.bytes(1, self.block);
        s.bytes(2, self.token);
    }
}

/// `ClientOperationHeaderProto{baseHeader, clientName}`.
struct ClientHeader<'a> {
    base: BaseHeader<'a>,
    client_name: &'a str,
}

impl Encode for ClientHeader<'_> {
    fn encode<S: Sink>(&self, s: &mut S) {
        s.message(1, &self.base);
        s.string(2, self.client_name);
    }
}

/// An empty `CachingStrategyProto` (Java sends one with neither field set).
struct NoCachingStrategy;

impl Encode for NoCachingStrategy {
    fn encode<S: Sink>(&self, _: &mut S) {}
}

/// `OpReadBlockProto`, field for field as Java's `Sender.readBlock` writes it.
struct OpReadBlock<'a>(&'a ReadBlockRequest<'a>);

impl Encode for OpReadBlock<'_> {
    fn encode<S: Sink>(&self, s: &mut S) {
        let r = self.0;
        let header = ClientHeader {
            base: BaseHeader {
                block: r.block,
                token: r.token,
            },
            client_name: r.client_name,
        };
        s.message(1, &header);
        s.uint(2, r.offset);
        s.uint(3, r.len);
        s.bool(4, true); // sendChecksums
        s.message(5, &NoCachingStrategy);
    }
}

/// Appends the request: version, op, and the delimited `OpReadBlockProto`, field for field as
/// Java's `Sender.readBlock` writes it (header{baseHeader{block, token}, clientName}, offset,
/// len, sendChecksums=true, an empty cachingStrategy). The block and token bytes are copied
/// from the NameNode's response without decoding.
pub fn encode_read_block(req: &ReadBlockRequest<'_>, out: &mut Vec<u8>) {
    let op = OpReadBlock(req);
    let body = op.encoded_len();
    out.reserve(3 + encoded_len_varint(body as u64) + body);
    out.extend_from_slice(&DATA_TRANSFER_VERSION.to_be_bytes());
    out.push(OP_READ_BLOCK);
    let mut w = Writer::new(out);
    w.varint(body as u64);
    op.encode(&mut w);
}

/// One step of [`BlockRead::poll`].
#[derive(Debug, PartialEq, Eq)]
pub enum Event<'a> {
    /// Nothing complete yet: receive at least this many more bytes.
    NeedMore(usize),
    /// The first `consumed` input bytes are done with; `data` (possibly empty, e.g. the
    /// response or a packet wholly before the range) are verified bytes of the range, in order.
    Data { data: &'a [u8], consumed: usize },
    /// The read is complete (the trailing empty packet was consumed): send
    /// [`BlockRead::status_bytes`]; the connection can then carry another request.
    Done { consumed: usize },
}

/// What [`BlockRead::recv_hint`] asks the I/O edge to receive next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecvHint {
    /// Exactly this many bytes: the rest of the current packet (and the next one's prefix).
    /// Receiving more could run into a packet whose length is not known yet.
    Exact(usize),
    /// At least this many; more is welcome (and is kept as pending input).
    AtLeast(usize),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Response,
    Packets,
    Done,
    Failed,
}

/// The read of one block range (see the module docs).
#[derive(Debug)]
pub struct BlockRead {
    block: BlockName,
    datanode: String,
    offset: u64,
    len: u64,
    state: State,
    checksum: DataChecksum,
    chunk_offset: u64,
    /// offsetInBlock the next data packet must have.
    next_offset: u64,
    last_seqno: i64,
    /// Bytes of the range returned so far.
    delivered: u64,
    decoder: PacketDecoder,
}

impl BlockRead {
    /// A read of `len` bytes at `offset` of `block` from `datanode` (named in errors).
    pub fn new(block: BlockName, datanode: String, offset: u64, len: u64) -> BlockRead {
        BlockRead {
            block,
            datanode,
            offset,
            len,
            state: State::Response,
            checksum: DataChecksum {
                kind: ChecksumKind::Null,
                bytes_per_checksum: 512,
            },
            chunk_offset: offset,
            next_offset: offset,
            last_seqno: -1,
            delivered: 0,
            decoder: PacketDecoder::default(),
        }
    }

    /// The block (for errors and reports).
    pub fn block(&self) -> &BlockName {
        &self.block
    }

    /// Bytes of the range returned so far.
    pub fn delivered(&self) -> u64 {
        self.delivered
    }

    /// Bytes of the range still to come.
    pub fn remaining(&self) -> u64 {
        self.len - self.delivered
    }

    /// The error for a connection that ended (EOF) before the range was read: what every
    /// receive path (blocking, SASL layer, io_uring) reports.
    pub fn truncated(&self) -> Error {
        Error::Truncated {
            block: self.block.clone(),
            datanode: self.datanode.clone(),
            received: self.delivered,
            expected: self.len,
        }
    }

    /// The checksum the DataNode announced (after the response).
    pub fn checksum(&self) -> DataChecksum {
        self.checksum
    }

    /// Finished cleanly.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// The `ClientReadStatusProto` to send after [`Event::Done`]: CHECKSUM_OK when the data was
    /// verified, SUCCESS for CHECKSUM_NULL (nothing verified).
    pub fn status_bytes(&self) -> [u8; 3] {
        let s = if self.checksum.kind == ChecksumKind::Null {
            Status::Success
        } else {
            Status::ChecksumOk
        };
        [2, 0x08, s as u8]
    }

    fn protocol(&mut self, reason: impl Into<String>) -> Error {
        self.state = State::Failed;
        Error::Protocol {
            block: self.block.clone(),
            datanode: self.datanode.clone(),
            reason: reason.into(),
        }
    }

    /// How to receive more after [`Self::poll`] returned `NeedMore(need)` on `pending` (the
    /// unconsumed bytes). When the next packet's length is known (its 6-byte prefix is in
    /// `pending`), exactly the rest of it, plus the following packet's prefix when a packet
    /// must follow (this one carries data or checksums; only the empty last packet has
    /// neither), so that a receive never runs into a packet whose length is unknown. Otherwise
    /// (the response, or a prefix not yet complete) at least `need` bytes.
    ///
    /// A DataNode that sends a packet with data and nothing after it breaks the protocol; a
    /// receive asking for that lookahead then waits for the socket timeout.
    pub fn recv_hint(&self, pending: &[u8], need: usize) -> RecvHint {
        if self.state != State::Packets || pending.len() < 6 {
            return RecvHint::AtLeast(need);
        }
        let packet_len = u32::from_be_bytes([pending[0], pending[1], pending[2], pending[3]]);
        let lookahead = if packet_len > 4 { 6 } else { 0 };
        RecvHint::Exact(need + lookahead)
    }

    /// Consumes what it can of `buf` (received bytes, starting where the last call's
    /// `consumed` ended).
    pub fn poll<'a>(&mut self, buf: &'a [u8]) -> Result<Event<'a>, Error> {
        match self.state {
            State::Response => self.on_response(buf),
            State::Packets => self.on_packet(buf),
            State::Done => Ok(Event::Done { consumed: 0 }),
            State::Failed => Err(self.protocol("read already failed")),
        }
    }

    fn on_response<'a>(&mut self, buf: &'a [u8]) -> Result<Event<'a>, Error> {
        // varint length (at most 5 bytes for a Java int)
        let mut len: u64 = 0;
        let mut i = 0;
        loop {
            let Some(&b) = buf.get(i) else {
                return Ok(Event::NeedMore(1));
            };
            len |= u64::from(b & 0x7f) << (7 * i);
            i += 1;
            if b < 0x80 {
                break;
            }
            if i == 5 {
                return Err(self.protocol("BlockOpResponseProto length varint longer than 5 bytes"));
            }
        }
        if len > MAX_RESPONSE_LEN as u64 {
            return Err(self.protocol(format!(
                "BlockOpResponseProto of {len} bytes exceeds {MAX_RESPONSE_LEN}"
            )));
        }
        let end = i + len as usize;
        if buf.len() < end {
            return Ok(Event::NeedMore(end - buf.len()));
        }
        let resp = match BlockOpResponseProto::decode(&buf[i..end]) {
            Ok(r) => r,
            Err(e) => return Err(self.protocol(format!("undecodable BlockOpResponseProto: {e}"))),
        };
        let status = Status::try_from(resp.status).ok();
        if status != Some(Status::Success) {
            self.state = State::Failed;
            return Err(Error::DataNodeRefused {
                block: self.block.clone(),
                datanode: self.datanode.clone(),
                status: status.map_or("UNKNOWN_STATUS", |s| s.as_str_name()),
                message: resp.message.unwrap_or_default(),
            });
        }
        let Some(info) = resp.read_op_checksum_info else {
            return Err(self.protocol("SUCCESS without readOpChecksumInfo"));
        };
        let Some(kind) = ChecksumKind::from_wire(info.checksum.r#type) else {
            return Err(self.protocol(format!("unknown checksum type {}", info.checksum.r#type)));
        };
        let bpc = info.checksum.bytes_per_checksum;
        if bpc == 0 || bpc > 16 << 20 {
            return Err(self.protocol(format!("bytesPerChecksum {bpc} out of range")));
        }
        // Java's BlockReaderRemote check: chunkOffset within one chunk before the offset
        let first = info.chunk_offset;
        if first > self.offset || self.offset - first >= u64::from(bpc) {
            return Err(self.protocol(format!(
                "chunkOffset {first} does not start the chunk holding offset {} ({bpc}-byte chunks)",
                self.offset
            )));
        }
        self.checksum = DataChecksum {
            kind,
            bytes_per_checksum: bpc,
        };
        self.chunk_offset = first;
        self.next_offset = first;
        self.state = State::Packets;
        Ok(Event::Data {
            data: &buf[..0],
            consumed: end,
        })
    }

    fn on_packet<'a>(&mut self, buf: &'a [u8]) -> Result<Event<'a>, Error> {
        let (raw, consumed) = match self.decoder.decode(buf) {
            Ok(PacketDecoded::NeedMore(n)) => return Ok(Event::NeedMore(n)),
            Ok(PacketDecoded::Packet { packet, consumed }) => (packet, consumed),
            Err(e) => return Err(self.protocol(e.to_string())),
        };
        let (header, packet) =
            match raw.parse(self.checksum.bytes_per_checksum, self.checksum.kind.size()) {
                Ok(x) => x,
                Err(e) => return Err(self.protocol(e.to_string())),
            };
        if let Err(e) = check_packet_sequence(&header, self.last_seqno) {
            return Err(self.protocol(e.to_string()));
        }
        self.last_seqno = header.seqno;
        let range_end = self.offset + self.len;
        if header.last_packet_in_block {
            if self.next_offset < range_end {
                return Err(self.protocol(format!(
                    "last packet at offset {} before the range end {range_end}",
                    self.next_offset
                )));
            }
            self.state = State::Done;
            return Ok(Event::Done { consumed });
        }
        if self.next_offset >= range_end {
            return Err(self.protocol(
                "data packet after the range was covered (expected the empty last packet)",
            ));
        }
        if header.offset_in_block < 0 || header.offset_in_block as u64 != self.next_offset {
            return Err(self.protocol(format!(
                "packet offset {} where {} was expected",
                header.offset_in_block, self.next_offset
            )));
        }
        // every chunk of the packet before any byte of it is returned
        if let Err(m) = self.checksum.verify(packet.data, packet.checksums) {
            self.state = State::Failed;
            return Err(Error::Checksum {
                block: self.block.clone(),
                offset: self.next_offset
                    + m.chunk as u64 * u64::from(self.checksum.bytes_per_checksum),
                datanode: self.datanode.clone(),
                expected: m.expected,
                computed: m.computed,
            });
        }
        let start = self.next_offset;
        let end = start + packet.data.len() as u64;
        self.next_offset = end;
        // the part of [start, end) inside [offset + delivered, range_end)
        let want_from = self.offset + self.delivered;
        let from = want_from.max(start);
        let to = end.min(range_end);
        let data = if from < to {
            &packet.data[(from - start) as usize..(to - start) as usize]
        } else {
            &packet.data[..0]
        };
        self.delivered += data.len() as u64;
        Ok(Event::Data { data, consumed })
    }
}

#[cfg(test)]
mod tests;
