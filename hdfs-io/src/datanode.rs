//! The DataNode I/O edge: one blocking `std::net` connection per block read, the
//! [`BlockRead`] state machine driven over it, and a [`PeerCache`] of idle connections.
//!
//! Blocking receive path (the fallback; io_uring receive is in [`crate::receive`]): bytes
//! land in a reused [`RecvBuf`] (one allocation per reader, sized for several 64 KiB packets
//! so one `read` often brings more than one), the state machine cuts packets in place and
//! hands verified data to the caller's sink as slices of that buffer.
//!
//! After a clean read (the empty last packet consumed, CHECKSUM_OK sent) the DataNode waits
//! for another op on the same socket (`dfs.datanode.socket.reuse.keepalive`, 4 s), so the
//! connection goes to the [`PeerCache`] (capacity `dfs.client.socketcache.capacity` 16,
//! expiry `dfs.client.socketcache.expiryMsec` 3 s, as Java's `PeerCache`).

use crate::block_reader::{encode_read_block, BlockRead, Event, ReadBlockRequest};
use crate::error::{BlockName, Error};
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

/// Idle DataNode connections, by address, with expiry.
#[derive(Debug)]
pub struct PeerCache {
    idle: Mutex<Vec<(SocketAddr, TcpStream, Instant)>>,
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

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(SocketAddr, TcpStream, Instant)>> {
        self.idle.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The newest idle connection to `addr` that has not expired (expired ones are closed).
    pub fn take(&self, addr: SocketAddr, now: Instant) -> Option<TcpStream> {
        let mut v = self.lock();
        v.retain(|(_, _, t)| now.saturating_duration_since(*t) < self.expiry);
        let i = v.iter().rposition(|(a, _, _)| *a == addr)?;
        Some(v.remove(i).1)
    }

    /// Keeps a connection for reuse (the oldest goes when full).
    pub fn put(&self, addr: SocketAddr, s: TcpStream, now: Instant) {
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
    read: &BlockRead,
    got_bytes: bool,
    datanode: &str,
) -> BlockReadResult {
    let error = s
        .write_all(&read.status_bytes())
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
    let mut got_bytes = false;
    let io_err = |what: &str, e: io::Error| Error::io(format!("{what} DataNode {datanode}"), e);
    out.clear();
    encode_read_block(req, out);
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
                        let e = Error::Truncated {
                            block: read.block().clone(),
                            datanode: datanode.to_string(),
                            received: read.delivered(),
                            expected: read.delivered() + read.remaining(),
                        };
                        return BlockReadResult {
                            delivered: read.delivered(),
                            error: Some(e),
                            got_bytes,
                        };
                    }
                    Ok(k) => {
                        got_bytes = true;
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
                return finish_read(s, read, got_bytes, datanode);
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
