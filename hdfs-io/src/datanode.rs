//! The DataNode I/O edge: one blocking `std::net` connection per block read, the
//! [`BlockRead`] state machine driven over it, and a [`PeerCache`] of idle connections.
//!
//! Blocking receive path (the fallback; io_uring receive is in [`crate::receive`]): bytes
//! land in a reused [`RecvBuf`] (one allocation per reader, sized for several 64 KiB packets
//! so one `read` often brings more than one), the state machine cuts packets in place and
//! hands verified data to the caller's sink as slices of that buffer.
//!
//! A connection whose SASL handshake settled on `auth-int` / `auth-conf` without AES carries
//! a [`SaslConn`]: its bytes are DIGEST-MD5 frames ([`read_block_on_sasl`]), received into the
//! same [`RecvBuf`] and unwrapped into the connection's plaintext buffer, which the state
//! machine parses. That path copies each byte once more than the plain and AES paths (frame →
//! plaintext) and always receives blocking (no io_uring variant: 3DES/RC4 and HMAC-MD5 cost
//! far more than the receive).
//!
//! After a clean read (the empty last packet consumed, CHECKSUM_OK sent) the DataNode waits
//! for another op on the same socket (`dfs.datanode.socket.reuse.keepalive`, 4 s), so the
//! connection goes to the [`PeerCache`] (capacity `dfs.client.socketcache.capacity` 16,
//! expiry `dfs.client.socketcache.expiryMsec` 3 s, as Java's `PeerCache`).

use crate::block_reader::{encode_read_block, BlockRead, Event, ReadBlockRequest};
use crate::error::{BlockName, Error};
use hadoop_wire::hdfs::transfer_sasl::{
    AesCtrStreams, Credentials, SaslStreamError, SaslStreams, Step, TransferSaslClient,
    TransferSaslError, MAX_MESSAGE_LEN,
};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A receive buffer: bytes `[start, end)` are received and not yet consumed. Its memory is
/// allocated on first use (a reader on the io_uring path never touches it).
#[derive(Debug)]
pub struct RecvBuf {
    buf: Vec<u8>,
    start: usize,
    end: usize,
    size: usize,
    max: usize,
}

impl RecvBuf {
    /// Default initial size: several 64 KiB packets.
    pub const DEFAULT_SIZE: usize = 512 * 1024;

    /// A buffer of `size` bytes that may grow to `max` for one oversized packet.
    pub fn new(size: usize, max: usize) -> RecvBuf {
        RecvBuf {
            buf: Vec::new(),
            start: 0,
            end: 0,
            size: size.max(64),
            max: max.max(size),
        }
    }

    fn clear(&mut self) {
        self.start = 0;
        self.end = 0;
    }

    /// Makes room for at least `need` more bytes after `end`.
    fn reserve(&mut self, need: usize) -> io::Result<()> {
        if self.buf.is_empty() {
            self.buf.resize(self.size, 0);
        }
        if self.buf.len() - self.end >= need {
            return Ok(());
        }
        // compact
        self.buf.copy_within(self.start..self.end, 0);
        self.end -= self.start;
        self.start = 0;
        if self.buf.len() - self.end < need {
            let want = (self.end + need).next_power_of_two().min(self.max);
            if want < self.end + need {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "packet larger than the receive buffer cap",
                ));
            }
            self.buf.resize(want, 0);
        }
        Ok(())
    }
}

impl Default for RecvBuf {
    fn default() -> Self {
        RecvBuf::new(Self::DEFAULT_SIZE, 17 << 20)
    }
}

/// A DataNode connection: the socket and what its SASL handshake left on it: the two AES-CTR
/// streams when the DataNode chose AES, or the DIGEST-MD5 stream layer for `auth-int` /
/// `auth-conf` without AES (counters and sequence numbers run on across the ops of the
/// connection). At most one of the two is set.
#[derive(Debug)]
pub struct Peer {
    pub stream: TcpStream,
    pub crypt: Option<Box<AesCtrStreams>>,
    pub sasl: Option<Box<SaslConn>>,
}

impl From<TcpStream> for Peer {
    fn from(stream: TcpStream) -> Peer {
        Peer {
            stream,
            crypt: None,
            sasl: None,
        }
    }
}

impl Peer {
    /// A connection with what [`handshake`] negotiated on it.
    pub fn new(stream: TcpStream, protection: Protection) -> Peer {
        let (crypt, sasl) = match protection {
            Protection::None => (None, None),
            Protection::Aes(c) => (Some(c), None),
            Protection::Sasl(l) => (None, Some(l)),
        };
        Peer {
            stream,
            crypt,
            sasl,
        }
    }
}

/// What the DataTransfer SASL handshake left on a connection.
#[derive(Debug)]
pub enum Protection {
    /// Plain streams: no handshake, or QOP `auth`.
    None,
    /// The DataNode chose AES/CTR/NoPadding.
    Aes(Box<AesCtrStreams>),
    /// `auth-int` or `auth-conf` without AES: DIGEST-MD5 frames both ways.
    Sasl(Box<SaslConn>),
}

/// A connection's DIGEST-MD5 stream layer and its buffers (kept with the connection, so its
/// ops after the first allocate nothing more once the buffers have grown).
#[derive(Debug)]
pub struct SaslConn {
    streams: SaslStreams,
    /// Unwrapped bytes not yet consumed by the state machine: `plain[start..]`.
    plain: Vec<u8>,
    start: usize,
    /// Frames to send.
    tx: Vec<u8>,
}

impl SaslConn {
    pub fn new(streams: SaslStreams) -> SaslConn {
        SaslConn {
            streams,
            plain: Vec::new(),
            start: 0,
            tx: Vec::new(),
        }
    }

    /// `auth-int` or `auth-conf`.
    pub fn qop(&self) -> hadoop_wire::sasl::Qop {
        self.streams.qop()
    }

    /// Wraps `plain` into frames and sends them.
    fn send(&mut self, s: &mut TcpStream, plain: &[u8]) -> Result<(), SendError> {
        self.tx.clear();
        self.streams
            .wrap(plain, &mut self.tx)
            .map_err(SendError::Layer)?;
        s.write_all(&self.tx).map_err(SendError::Io)
    }
}

enum SendError {
    Layer(SaslStreamError),
    Io(io::Error),
}

/// Idle DataNode connections, by address, with expiry.
#[derive(Debug)]
pub struct PeerCache {
    idle: Mutex<Vec<(SocketAddr, Peer, Instant)>>,
    capacity: usize,
    expiry: Duration,
}

impl Default for PeerCache {
    fn default() -> Self {
        PeerCache::new(16, Duration::from_millis(3000))
    }
}

impl PeerCache {
    pub fn new(capacity: usize, expiry: Duration) -> PeerCache {
        PeerCache {
            idle: Mutex::new(Vec::new()),
            capacity,
            expiry,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(SocketAddr, Peer, Instant)>> {
        self.idle.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The newest idle connection to `addr` that has not expired (expired ones are closed).
    pub fn take(&self, addr: SocketAddr, now: Instant) -> Option<Peer> {
        let mut v = self.lock();
        v.retain(|(_, _, t)| now.saturating_duration_since(*t) < self.expiry);
        let i = v.iter().rposition(|(a, _, _)| *a == addr)?;
        Some(v.remove(i).1)
    }

    /// Keeps a connection for reuse (the oldest goes when full).
    pub fn put(&self, addr: SocketAddr, s: Peer, now: Instant) {
        if self.capacity == 0 {
            return;
        }
        let mut v = self.lock();
        if v.len() >= self.capacity {
            v.remove(0);
        }
        v.push((addr, s, now));
    }

    /// Idle connections held.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// None held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// How a block read over one connection ended.
#[derive(Debug)]
pub struct BlockReadResult {
    /// Bytes handed to the sink.
    pub delivered: u64,
    /// Error, if the read did not finish; `delivered` bytes are good either way.
    pub error: Option<Error>,
    /// The DataNode answered at least one byte (a failure before that on a reused connection
    /// is the connection's, not the DataNode's).
    pub got_bytes: bool,
}

/// The end of a block read, for both receive paths: CHECKSUM_OK goes back to the DataNode
/// (so it may keep the connection for another read); failing to send it is the read's error,
/// and what was delivered stays delivered.
pub(crate) fn finish_read(
    s: &mut TcpStream,
    crypt: Option<&mut AesCtrStreams>,
    read: &BlockRead,
    got_bytes: bool,
    datanode: &str,
) -> BlockReadResult {
    let mut status = read.status_bytes();
    if let Some(c) = crypt {
        c.encrypt(&mut status);
    }
    let error = s
        .write_all(&status)
        .err()
        .map(|e| Error::io(format!("sending the read status to DataNode {datanode}"), e));
    BlockReadResult {
        delivered: read.delivered(),
        error,
        got_bytes,
    }
}

/// Sends the request on `s` and drives `read` to the end, handing verified bytes to `sink`.
/// On success the status is sent and the connection is ready for another op.
pub fn read_block_on(
    s: &mut TcpStream,
    req: &ReadBlockRequest<'_>,
    read: &mut BlockRead,
    buf: &mut RecvBuf,
    out: &mut Vec<u8>,
    sink: &mut dyn FnMut(&[u8]) -> io::Result<()>,
    datanode: &str,
) -> BlockReadResult {
    read_block_on_with(s, None, req, read, buf, out, sink, datanode)
}

/// [`read_block_on`] over a connection whose streams may be encrypted (`crypt`, from
/// [`handshake`]): the request and status are encrypted before they are sent, and each
/// receive is decrypted in place in the receive buffer before the state machine sees it.
#[allow(clippy::too_many_arguments)]
pub fn read_block_on_with(
    s: &mut TcpStream,
    mut crypt: Option<&mut AesCtrStreams>,
    req: &ReadBlockRequest<'_>,
    read: &mut BlockRead,
    buf: &mut RecvBuf,
    out: &mut Vec<u8>,
    sink: &mut dyn FnMut(&[u8]) -> io::Result<()>,
    datanode: &str,
) -> BlockReadResult {
    let mut got_bytes = false;
    let io_err = |what: &str, e: io::Error| Error::io(format!("{what} DataNode {datanode}"), e);
    out.clear();
    encode_read_block(req, out);
    if let Some(c) = crypt.as_deref_mut() {
        c.encrypt(out);
    }
    if let Err(e) = s.write_all(out) {
        return BlockReadResult {
            delivered: 0,
            error: Some(io_err("sending OP_READ_BLOCK to", e)),
            got_bytes,
        };
    }
    buf.clear();
    loop {
        let ev = read.poll(&buf.buf[buf.start..buf.end]);
        match ev {
            Ok(Event::NeedMore(n)) => {
                // read as much as fits: several packets per syscall
                if let Err(e) = buf.reserve(n.max(64 * 1024)) {
                    return BlockReadResult {
                        delivered: read.delivered(),
                        error: Some(io_err("reading from", e)),
                        got_bytes,
                    };
                }
                match s.read(&mut buf.buf[buf.end..]) {
                    Ok(0) => {
                        let e = read.truncated();
                        return BlockReadResult {
                            delivered: read.delivered(),
                            error: Some(e),
                            got_bytes,
                        };
                    }
                    Ok(k) => {
                        got_bytes = true;
                        if let Some(c) = crypt.as_deref_mut() {
                            c.decrypt(&mut buf.buf[buf.end..buf.end + k]);
                        }
                        buf.end += k;
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        return BlockReadResult {
                            delivered: read.delivered(),
                            error: Some(io_err("reading from", e)),
                            got_bytes,
                        }
                    }
                }
            }
            Ok(Event::Data { data, consumed }) => {
                if !data.is_empty() {
                    if let Err(e) = sink(data) {
                        let e = Error::Sink { source: e };
                        return BlockReadResult {
                            delivered: read.delivered() - data.len() as u64,
                            error: Some(e),
                            got_bytes,
                        };
                    }
                }
                buf.start += consumed;
            }
            Ok(Event::Done { consumed }) => {
                buf.start += consumed;
                return finish_read(s, crypt, read, got_bytes, datanode);
            }
            Err(e) => {
                return BlockReadResult {
                    delivered: read.delivered(),
                    error: Some(e),
                    got_bytes,
                }
            }
        }
    }
}

/// [`read_block_on`] over a connection with the DIGEST-MD5 stream layer (`sasl`, from
/// [`handshake`]): the request and the status go out as SASL frames; the DataNode's frames are
/// received into `buf` (several per `read` when they have arrived), each is checked (length
/// against [`MAX_FRAME_LEN`](hadoop_wire::hdfs::transfer_sasl::MAX_FRAME_LEN) from its prefix,
/// MAC, sequence number) and unwrapped into the connection's plaintext buffer, and the state
/// machine parses that. A refused frame fails the read with [`Error::DataTransferLayer`]; the
/// connection must then be dropped (it is not clean, so the caller does not cache it).
#[allow(clippy::too_many_arguments)]
pub fn read_block_on_sasl(
    s: &mut TcpStream,
    sasl: &mut SaslConn,
    req: &ReadBlockRequest<'_>,
    read: &mut BlockRead,
    buf: &mut RecvBuf,
    out: &mut Vec<u8>,
    sink: &mut dyn FnMut(&[u8]) -> io::Result<()>,
    datanode: &str,
) -> BlockReadResult {
    let mut got_bytes = false;
    let io_err = |what: &str, e: io::Error| Error::io(format!("{what} DataNode {datanode}"), e);
    let layer_err = |read: &BlockRead, source: SaslStreamError| Error::DataTransferLayer {
        block: read.block().clone(),
        datanode: datanode.to_string(),
        source,
    };
    let fail = |read: &BlockRead, error: Error, got_bytes: bool| BlockReadResult {
        delivered: read.delivered(),
        error: Some(error),
        got_bytes,
    };
    out.clear();
    encode_read_block(req, out);
    match sasl.send(s, out) {
        Ok(()) => {}
        Err(SendError::Layer(e)) => return fail(read, layer_err(read, e), got_bytes),
        Err(SendError::Io(e)) => {
            return fail(read, io_err("sending OP_READ_BLOCK to", e), got_bytes)
        }
    }
    buf.clear();
    sasl.plain.clear();
    sasl.start = 0;
    loop {
        let ev = read.poll(&sasl.plain[sasl.start..]);
        match ev {
            Ok(Event::NeedMore(_)) => {
                // the consumed plaintext goes; what is left is part of one packet
                sasl.plain.drain(..sasl.start);
                sasl.start = 0;
                let had = sasl.plain.len();
                // unwrap the frames received; receive when there is no complete one
                while sasl.plain.len() == had {
                    let pending = buf.end - buf.start;
                    if sasl.plain.capacity() - sasl.plain.len() < pending {
                        // once per connection (or per larger packet size): room for a whole
                        // receive buffer of frames beside a partial packet, so warm reads
                        // allocate nothing
                        let want = (sasl.plain.len() + pending).max(buf.buf.len() + 128 * 1024);
                        sasl.plain.reserve(want - sasl.plain.len());
                    }
                    let u = match sasl
                        .streams
                        .unwrap(&buf.buf[buf.start..buf.end], &mut sasl.plain)
                    {
                        Ok(u) => u,
                        Err(e) => return fail(read, layer_err(read, e), got_bytes),
                    };
                    buf.start += u.consumed;
                    if sasl.plain.len() > had {
                        break;
                    }
                    // at least the rest of the next frame (capped: MAX_FRAME_LEN < the
                    // buffer's cap), and as much more as fits
                    if let Err(e) = buf.reserve(u.need.max(64 * 1024)) {
                        return fail(read, io_err("reading from", e), got_bytes);
                    }
                    match s.read(&mut buf.buf[buf.end..]) {
                        Ok(0) => {
                            let e = read.truncated();
                            return fail(read, e, got_bytes);
                        }
                        Ok(k) => {
                            got_bytes = true;
                            buf.end += k;
                        }
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return fail(read, io_err("reading from", e), got_bytes),
                    }
                }
            }
            Ok(Event::Data { data, consumed }) => {
                if !data.is_empty() {
                    if let Err(e) = sink(data) {
                        return BlockReadResult {
                            delivered: read.delivered() - data.len() as u64,
                            error: Some(Error::Sink { source: e }),
                            got_bytes,
                        };
                    }
                }
                sasl.start += consumed;
            }
            Ok(Event::Done { consumed }) => {
                sasl.start += consumed;
                let status = read.status_bytes();
                let error = match sasl.send(s, &status) {
                    Ok(()) => None,
                    Err(SendError::Layer(e)) => Some(layer_err(read, e)),
                    Err(SendError::Io(e)) => Some(io_err("sending the read status to", e)),
                };
                return BlockReadResult {
                    delivered: read.delivered(),
                    error,
                    got_bytes,
                };
            }
            Err(e) => return fail(read, e, got_bytes),
        }
    }
}

/// Runs the DataTransfer SASL handshake (security.md §5) on a fresh connection, blocking with
/// the socket's timeouts: [`Protection::Aes`] when the DataNode chose AES,
/// [`Protection::Sasl`] for `auth-int` / `auth-conf` without AES (DIGEST-MD5 frames with
/// 3DES/RC4/DES under `auth-conf`), [`Protection::None`] for `auth`. Messages are capped at
/// [`MAX_MESSAGE_LEN`] before they are buffered.
pub fn handshake(
    s: &mut TcpStream,
    credentials: Credentials<'_>,
    want_aes: bool,
    block: &BlockName,
    datanode: &str,
) -> Result<Protection, Error> {
    let sasl = |source: TransferSaslError| Error::DataTransferSasl {
        block: block.clone(),
        datanode: datanode.to_string(),
        source,
    };
    let io_err = |e: io::Error| {
        Error::io(
            format!("SASL data transfer handshake with DataNode {datanode}"),
            e,
        )
    };
    let mut entropy = ipc::entropy::OsEntropy;
    let mut c = TransferSaslClient::new(credentials, want_aes, &mut entropy).map_err(sasl)?;
    let mut out = Vec::with_capacity(256);
    c.start(&mut out);
    s.write_all(&out).map_err(io_err)?;
    out.clear();
    let mut input: Vec<u8> = Vec::with_capacity(1024);
    loop {
        match c.poll(&input, &mut out) {
            Ok(Step::NeedMore(n)) => {
                // the DataNode sends nothing past its last message until the op arrives, so a
                // read can only bring bytes of the message in progress
                let have = input.len();
                let want = (have + n.max(512)).min(MAX_MESSAGE_LEN + 5).max(have + n);
                input.resize(want, 0);
                match s.read(&mut input[have..]) {
                    Ok(0) => {
                        input.truncate(have);
                        return Err(io_err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "the DataNode closed the connection during the handshake \
                             (does it expect SASL? dfs.encrypt.data.transfer / \
                             dfs.data.transfer.protection)",
                        )));
                    }
                    Ok(k) => input.truncate(have + k),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => input.truncate(have),
                    Err(e) => return Err(io_err(e)),
                }
            }
            Ok(Step::Send { consumed }) => {
                input.drain(..consumed);
                s.write_all(&out).map_err(io_err)?;
                out.clear();
            }
            Ok(Step::Done {
                consumed,
                negotiated,
            }) => {
                if consumed != input.len() {
                    return Err(sasl(TransferSaslError::Malformed(
                        "bytes after the handshake's last message".into(),
                    )));
                }
                if let Some(keys) = &negotiated.aes {
                    return Ok(Protection::Aes(Box::new(
                        AesCtrStreams::client(keys).map_err(sasl)?,
                    )));
                }
                if let Some(layer) = negotiated.layer {
                    return Ok(Protection::Sasl(Box::new(SaslConn::new(SaslStreams::new(
                        layer,
                    )))));
                }
                return Ok(Protection::None);
            }
            Err(e) => {
                // as Java's client: tell the DataNode why, then fail (best effort)
                if !matches!(
                    e,
                    TransferSaslError::UnknownKey(_)
                        | TransferSaslError::AccessToken(_)
                        | TransferSaslError::Refused(_)
                ) {
                    out.clear();
                    TransferSaslClient::encode_error(&e.to_string(), &mut out);
                    let _ = s.write_all(&out);
                }
                return Err(sasl(e));
            }
        }
    }
}

/// Opens a DataTransfer connection.
pub fn connect(
    addr: SocketAddr,
    connect_timeout: Duration,
    read_timeout: Duration,
) -> io::Result<TcpStream> {
    let s = TcpStream::connect_timeout(&addr, connect_timeout)?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(read_timeout))?;
    s.set_write_timeout(Some(read_timeout))?;
    Ok(s)
}

/// A block's name for messages, from its `ExtendedBlockProto` view.
pub fn block_name(b: &hadoop_wire::view::hdfs::ExtendedBlockView<'_>) -> Result<BlockName, Error> {
    let d = |e| Error::Decode {
        what: "ExtendedBlockProto",
        source: e,
    };
    Ok(BlockName {
        pool_id: String::from_utf8_lossy(b.pool_id_bytes().map_err(d)?).into_owned(),
        block_id: b.block_id().map_err(d)?,
        generation_stamp: b.generation_stamp().map_err(d)?,
    })
}
