//! Receiving block data from a DataNode: io_uring into pooled buffers, or blocking `std::net`.
//!
//! **io_uring** (the default where the kernel allows it): each reading thread owns one
//! [`RecvRing`] (the `ipc` transport's blocking receive ring, with its bounded pool of
//! page-aligned fixed-size chunks, [`CHUNK_SIZE`] × [`CHUNKS`]), made on the thread's first
//! read and kept for its life; this module keeps the framing, the ring the io_uring details
//! (fixed buffers, timeouts, cancellation). The pool is registered as io_uring fixed buffers where `RLIMIT_MEMLOCK` allows (root,
//! or a limit above the pool's size), else it is used unregistered, with one warning per
//! process. Receives use the fixed buffer where the kernel accepts it for `RECV`; 6.18 does
//! not, and `READ_FIXED` (which it does accept on sockets) measured about 10 % more CPU per
//! GB than plain `RECV`, so there the registered chunks take plain `RECV` ([`PoolMode`]). A block read takes one chunk and receives the DataNode's stream into it with
//! exact framing ([`BlockRead::recv_hint`]): once a packet's 6-byte prefix has arrived, one
//! receive (`MSG_WAITALL`) brings exactly the rest of that packet plus the next packet's
//! prefix. So every packet lies whole in the chunk, placed where its length says it fits, and
//! [`BlockRead::poll`] parses it in place (zerocopy prefix, header view), verifies its CRC32C
//! chunks from the pooled bytes and hands the caller slices of them: the data is copied once,
//! into the caller's output. When the next packet does not fit behind the last one, the few
//! bytes already received of it (its prefix) move to the chunk's start. A packet larger than a
//! chunk (only with a non-default DataNode packet size) goes through an overflow buffer that
//! grows at most to the packet cap ([`OVERFLOW_CAP`]) and is kept for the thread's next ones.
//!
//! While the chunk has room for two more packets past the received bytes, a receive is
//! *greedy* instead: no `MSG_WAITALL`, as long as the free space minus one packet, so one
//! receive takes every packet that has arrived (several per call when the DataNode is ahead)
//! and the packet in progress at its end still completes in place. Near the chunk's end the
//! exact receives above finish the packet in progress, and the next one starts at the front.
//!
//! Timeouts: each receive waits at most the socket timeout (`io_uring_enter` with a timeout);
//! then it is cancelled, its completion reaped (the kernel no longer writes into the chunk),
//! and the read fails with `TimedOut`. Connects stay blocking with a timeout; the request and
//! the final status are small blocking writes with `SO_SNDTIMEO`. A read on a thread already
//! inside a read (the caller's sink reading HDFS again) uses the blocking path.
//!
//! **Blocking** ([`datanode::read_block_on`](crate::datanode::read_block_on)): `read` into a
//! reused heap buffer, several packets per call, a partial packet moved to the front when the
//! buffer fills. It runs when io_uring is unavailable (the `ipc` transport's probe fails, or
//! the ring cannot be set up on this thread) or when [`BACKEND_ENV`]`=epoll` (the transport's
//! switch: `uring` forces io_uring, `epoll` the fallback).
//!
//! Either way the connection is a plain [`TcpStream`], so the peer cache holds it between
//! reads whichever path received on it.

use crate::block_reader::{encode_read_block, BlockRead, Event, ReadBlockRequest, RecvHint};
use crate::datanode::{finish_read, BlockReadResult};
use crate::error::Error;
use hadoop_wire::hdfs::transfer_sasl::AesCtrStreams;
#[cfg(test)]
use ipc::transport::FixedUse;
use ipc::transport::{uring, BackendChoice, ChunkId, PoolConfig, RecvRing, BACKEND_ENV};
use std::cell::RefCell;
use std::io::{self, Write};
use std::net::TcpStream;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

/// Bytes per pooled receive chunk: 512 KiB holds seven default DataNode packets (64 KiB of
/// data, 512 B of CRCs and a header each); a greedy receive takes up to six at once.
pub const CHUNK_SIZE: usize = 512 * 1024;
/// Chunks per reading thread. A read holds one; the pool's minimum is two.
pub const CHUNKS: usize = 2;
/// Largest packet or response the overflow buffer grows to hold (the packet decoder's cap,
/// 16 MiB, plus room for the prefix and header).
pub const OVERFLOW_CAP: usize = 17 << 20;
/// A receive whose length is not known exactly asks for at least this much.
const SMALL_RECV: usize = 64;
/// Room kept free at the end of a chunk by a greedy receive, until a larger packet is seen:
/// a default DataNode packet (64 KiB of data, 512 B of CRCs, header, prefix) and the next
/// packet's prefix.
const MARGIN: usize = 68 * 1024;

/// How block data is received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecvPath {
    /// io_uring into pooled buffers.
    Uring,
    /// Blocking `std::net` reads (io_uring unavailable or `HOTPATH_IO=epoll`).
    Blocking,
}

impl RecvPath {
    pub fn name(self) -> &'static str {
        match self {
            RecvPath::Uring => "io_uring",
            RecvPath::Blocking => "blocking",
        }
    }
}

static PROBE: OnceLock<Result<String, String>> = OnceLock::new();
static BAD_ENV_WARNED: AtomicBool = AtomicBool::new(false);
static RING_WARNED: AtomicBool = AtomicBool::new(false);

/// The `ipc` transport's io_uring probe, run once per process.
fn probe() -> &'static Result<String, String> {
    PROBE.get_or_init(uring::probe)
}

/// Decides the receive path the way the `ipc` transport decides its backend: `choice`, then
/// [`BACKEND_ENV`] when `choice` is `Auto`, then the io_uring probe. A forced io_uring that
/// the probe refuses is an error; an unreadable `HOTPATH_IO` is warned about once and ignored.
pub fn choose(choice: BackendChoice) -> Result<RecvPath, Error> {
    let choice = match choice {
        BackendChoice::Auto => match std::env::var(BACKEND_ENV) {
            Ok(v) => BackendChoice::parse(&v).unwrap_or_else(|| {
                if !BAD_ENV_WARNED.swap(true, Ordering::Relaxed) {
                    tracing::warn!("{BACKEND_ENV}={v:?}: expected `uring` or `epoll`; ignored");
                }
                BackendChoice::Auto
            }),
            Err(_) => BackendChoice::Auto,
        },
        c => c,
    };
    match choice {
        BackendChoice::Epoll => Ok(RecvPath::Blocking),
        BackendChoice::Uring => match probe() {
            Ok(_) => Ok(RecvPath::Uring),
            Err(why) => Err(Error::io(
                "io_uring receive was requested",
                io::Error::new(io::ErrorKind::Unsupported, why.clone()),
            )),
        },
        BackendChoice::Auto => match probe() {
            Ok(desc) => {
                tracing::debug!("hdfs block reads: io_uring receive ({desc})");
                Ok(RecvPath::Uring)
            }
            Err(why) => {
                tracing::info!("hdfs block reads: blocking receive (io_uring unavailable: {why})");
                Ok(RecvPath::Blocking)
            }
        },
    }
}

/// Counters of this thread's io_uring receiver.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecvStats {
    /// Block reads received through io_uring on this thread.
    pub reads: u64,
    /// Receive operations submitted.
    pub recvs: u64,
    /// Bytes received.
    pub bytes: u64,
    /// Bytes moved inside the buffers to keep a packet whole (prefixes, a response's tail).
    pub moved: u64,
    /// Packets or responses that needed the overflow buffer (larger than a chunk).
    pub overflows: u64,
    /// Receives that timed out (and were cancelled).
    pub timeouts: u64,
    /// The pool is registered as fixed buffers.
    pub registered: bool,
    /// Receives into the pool use the fixed buffers (`RECV` with `IORING_RECVSEND_FIXED_BUF`,
    /// or `READ_FIXED` in [`PoolMode::ReadFixed`]). Kernel 6.18 refuses fixed-buffer `RECV`
    /// (EINVAL): then a registered pool is received into with plain `RECV`.
    pub fixed: bool,
}

/// How a thread's receive pool is used (the `ipc` receive ring's modes).
pub use ipc::transport::RingPoolMode as PoolMode;

/// This thread's receiver counters, if it has made one.
pub fn thread_stats() -> Option<RecvStats> {
    RX.with(|c| match c.try_borrow() {
        Ok(r) => match &*r {
            Some(Some(rx)) => Some(rx.stats()),
            _ => None,
        },
        Err(_) => None,
    })
}

thread_local! {
    /// `None`: not tried yet; `Some(None)`: the ring could not be set up on this thread.
    static RX: RefCell<Option<Option<Receiver>>> = const { RefCell::new(None) };
}

/// Where the pending bytes live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Region {
    Chunk,
    Overflow,
}

/// One thread's receive ring (with its pool) and overflow buffer.
struct Receiver {
    ring: RecvRing,
    overflow: Vec<u8>,
    /// This module's counters; the ring keeps its own (see [`Receiver::stats`]).
    reads: u64,
    moved: u64,
    overflows: u64,
}

impl Receiver {
    fn new(mode: PoolMode) -> Result<Receiver, String> {
        let pool = PoolConfig {
            chunk_size: CHUNK_SIZE,
            chunks: CHUNKS,
            per_conn_chunks: CHUNKS,
            register: mode != PoolMode::Unregistered,
        };
        let ring = RecvRing::new(&pool, mode, "hdfs block reads").map_err(|e| e.to_string())?;
        Ok(Receiver {
            ring,
            overflow: Vec::new(),
            reads: 0,
            moved: 0,
            overflows: 0,
        })
    }

    fn stats(&self) -> RecvStats {
        let r = self.ring.stats();
        RecvStats {
            reads: self.reads,
            recvs: r.recvs,
            bytes: r.bytes,
            moved: self.moved,
            overflows: self.overflows,
            timeouts: r.timeouts,
            registered: r.registered,
            fixed: r.fixed,
        }
    }

    /// How chunk receives are issued now.
    #[cfg(test)]
    fn fixed(&self) -> FixedUse {
        self.ring.fixed_use()
    }
}

/// Replaces this thread's receiver by a new one using its pool as `mode` says (for
/// measurements and tests; reads make a [`PoolMode::Registered`] one on first use). `false` when io_uring
/// cannot be set up here or this thread is inside a read.
pub fn renew_thread_receiver(mode: PoolMode) -> bool {
    RX.with(|cell| match cell.try_borrow_mut() {
        Ok(mut slot) => match Receiver::new(mode) {
            Ok(r) => {
                *slot = Some(Some(r));
                true
            }
            Err(_) => false,
        },
        Err(_) => false,
    })
}

/// Runs `f` with this thread's receiver, making it on first use. `None` when the ring cannot
/// be set up here (warned once per process) or when this thread is already inside a read.
fn with_receiver<R>(f: impl FnOnce(&mut Receiver) -> R) -> Option<R> {
    RX.with(|cell| {
        let mut slot = cell.try_borrow_mut().ok()?;
        if slot.is_none() {
            *slot = Some(match Receiver::new(PoolMode::Registered) {
                Ok(r) => Some(r),
                Err(e) => {
                    if !RING_WARNED.swap(true, Ordering::Relaxed) {
                        tracing::warn!(
                            "hdfs block reads: io_uring receiver unavailable on this thread ({e}); using blocking reads"
                        );
                    }
                    None
                }
            });
        }
        slot.as_mut()?.as_mut().map(f)
    })
}

/// Sends the request on `s` and drives `read` to the end over this thread's io_uring
/// receiver, handing verified bytes to `sink`; `None` when this thread has no receiver (the
/// caller then uses the blocking path). On success the status is sent and the connection is
/// ready for another op.
#[allow(clippy::too_many_arguments)]
pub fn read_block_uring(
    s: &mut TcpStream,
    req: &ReadBlockRequest<'_>,
    read: &mut BlockRead,
    scratch: &mut Vec<u8>,
    sink: &mut dyn FnMut(&[u8]) -> io::Result<()>,
    datanode: &str,
    timeout: Duration,
) -> Option<BlockReadResult> {
    read_block_uring_with(s, None, req, read, scratch, sink, datanode, timeout)
}

/// [`read_block_uring`] over a connection whose streams may be encrypted (`crypt`): the
/// request and status are encrypted before they are sent, and every receive is decrypted in
/// place in the pooled chunk (or the overflow buffer) before the state machine parses it, so
/// the data is still copied once, into the caller's output.
#[allow(clippy::too_many_arguments)]
pub fn read_block_uring_with(
    s: &mut TcpStream,
    crypt: Option<&mut AesCtrStreams>,
    req: &ReadBlockRequest<'_>,
    read: &mut BlockRead,
    scratch: &mut Vec<u8>,
    sink: &mut dyn FnMut(&[u8]) -> io::Result<()>,
    datanode: &str,
    timeout: Duration,
) -> Option<BlockReadResult> {
    with_receiver(|rx| {
        rx.reads += 1;
        let Some(chunk) = rx.ring.pool_mut().try_acquire() else {
            // one chunk per read and one read per thread at a time: cannot happen
            return BlockReadResult {
                delivered: 0,
                error: Some(Error::io(
                    format!("receiving from DataNode {datanode}"),
                    io::Error::new(io::ErrorKind::OutOfMemory, "receive pool exhausted"),
                )),
                got_bytes: false,
            };
        };
        let r = drive(
            rx, chunk, s, crypt, req, read, scratch, sink, datanode, timeout,
        );
        rx.ring.pool_mut().release(chunk);
        r
    })
}

/// The received-but-unconsumed window `[start, end)` of the current region.
struct Window {
    region: Region,
    start: usize,
    end: usize,
}

impl Receiver {
    fn bytes(&self, chunk: ChunkId, w: &Window) -> &[u8] {
        match w.region {
            Region::Chunk => self.ring.pool().slice(chunk, w.start, w.end),
            Region::Overflow => &self.overflow[w.start..w.end],
        }
    }

    /// Makes room for `need` more bytes behind the pending ones, keeping them contiguous:
    /// in place if they fit, else at the start of the chunk (moving the pending bytes), else
    /// in the overflow buffer (grown up to [`OVERFLOW_CAP`]).
    fn place(&mut self, chunk: ChunkId, w: &mut Window, need: usize) -> io::Result<()> {
        let pend = w.end - w.start;
        if w.region == Region::Chunk && w.end + need <= CHUNK_SIZE {
            return Ok(());
        }
        if pend + need <= CHUNK_SIZE {
            match w.region {
                Region::Chunk => {
                    let b = self.ring.pool_mut().slice_mut(chunk, 0, CHUNK_SIZE);
                    b.copy_within(w.start..w.end, 0);
                }
                Region::Overflow => {
                    let src = &self.overflow[w.start..w.end];
                    self.ring
                        .pool_mut()
                        .slice_mut(chunk, 0, pend)
                        .copy_from_slice(src);
                }
            }
            self.moved += pend as u64;
            *w = Window {
                region: Region::Chunk,
                start: 0,
                end: pend,
            };
            return Ok(());
        }
        if pend + need > OVERFLOW_CAP {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "a packet of {} bytes exceeds the receive cap of {OVERFLOW_CAP}",
                    pend + need
                ),
            ));
        }
        if w.region == Region::Overflow && w.end + need <= self.overflow.len() {
            return Ok(());
        }
        self.overflows += 1;
        if self.overflow.len() < pend + need {
            // capped above: at most OVERFLOW_CAP, whatever the peer announces
            self.overflow.resize(pend + need, 0);
        }
        match w.region {
            Region::Chunk => {
                let src = self.ring.pool().slice(chunk, w.start, w.end);
                self.overflow[..pend].copy_from_slice(src);
            }
            Region::Overflow => self.overflow.copy_within(w.start..w.end, 0),
        }
        self.moved += pend as u64;
        *w = Window {
            region: Region::Overflow,
            start: 0,
            end: pend,
        };
        Ok(())
    }

    /// One receive of `len` bytes at the end of the window (all of them with `waitall`, else
    /// at least one), waiting at most `timeout`. `Ok(0)` is end of stream.
    fn recv(
        &mut self,
        s: &TcpStream,
        chunk: ChunkId,
        w: &Window,
        len: usize,
        waitall: bool,
        timeout: Duration,
    ) -> io::Result<usize> {
        match w.region {
            Region::Chunk => self
                .ring
                .recv_chunk(s.as_fd(), chunk, w.end, len, waitall, timeout),
            Region::Overflow => self.ring.recv_into(
                s.as_fd(),
                &mut self.overflow[w.end..w.end + len],
                waitall,
                timeout,
            ),
        }
    }
}

/// The read itself (see the module docs).
#[allow(clippy::too_many_arguments)]
fn drive(
    rx: &mut Receiver,
    chunk: ChunkId,
    s: &mut TcpStream,
    mut crypt: Option<&mut AesCtrStreams>,
    req: &ReadBlockRequest<'_>,
    read: &mut BlockRead,
    scratch: &mut Vec<u8>,
    sink: &mut dyn FnMut(&[u8]) -> io::Result<()>,
    datanode: &str,
    timeout: Duration,
) -> BlockReadResult {
    let mut got_bytes = false;
    let io_err = |what: &str, e: io::Error| Error::io(format!("{what} DataNode {datanode}"), e);
    let fail = |read: &BlockRead, error: Error, got_bytes: bool| BlockReadResult {
        delivered: read.delivered(),
        error: Some(error),
        got_bytes,
    };
    scratch.clear();
    encode_read_block(req, scratch);
    if let Some(c) = crypt.as_deref_mut() {
        c.encrypt(scratch);
    }
    if let Err(e) = s.write_all(scratch) {
        return fail(read, io_err("sending OP_READ_BLOCK to", e), got_bytes);
    }
    let mut w = Window {
        region: Region::Chunk,
        start: 0,
        end: 0,
    };
    // the largest packet (with the next prefix) seen so far in this read
    let mut margin = MARGIN;
    enum Step {
        Recv(RecvHint),
        Consumed(usize),
        Done,
        Failed(Error),
    }
    loop {
        let step = {
            let pending = rx.bytes(chunk, &w);
            match read.poll(pending) {
                Ok(Event::NeedMore(n)) => Step::Recv(read.recv_hint(pending, n)),
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
                    Step::Consumed(consumed)
                }
                Ok(Event::Done { consumed }) => {
                    w.start += consumed;
                    Step::Done
                }
                Err(e) => Step::Failed(e),
            }
        };
        match step {
            Step::Consumed(c) => {
                w.start += c;
                if w.start == w.end {
                    w.start = 0;
                    w.end = 0;
                }
            }
            Step::Failed(e) => return fail(read, e, got_bytes),
            Step::Done => return finish_read(s, crypt, read, got_bytes, datanode),
            Step::Recv(hint) => {
                if let RecvHint::Exact(n) = hint {
                    // the packet in progress, whole (and the next prefix)
                    margin = margin.max(w.end - w.start + n);
                }
                let pend = w.end - w.start;
                if pend <= SMALL_RECV
                    && (w.region == Region::Overflow || CHUNK_SIZE - w.end < 2 * margin)
                {
                    // only a prefix (or nothing) pending near the end: to the front, for a
                    // greedy receive
                    if let Err(e) = rx.place(chunk, &mut w, CHUNK_SIZE - pend) {
                        return fail(read, io_err("receiving from", e), got_bytes);
                    }
                }
                let free = CHUNK_SIZE - w.end;
                let (len, waitall) = if w.region == Region::Chunk && free >= 2 * margin {
                    // greedy: whatever has arrived, several packets at once, leaving room for
                    // the packet that will be in progress at the end to complete in place
                    (free - margin, false)
                } else {
                    match hint {
                        RecvHint::Exact(n) => (n, true),
                        RecvHint::AtLeast(n) => (n.max(SMALL_RECV), false),
                    }
                };
                if let Err(e) = rx.place(chunk, &mut w, len) {
                    return fail(read, io_err("receiving from", e), got_bytes);
                }
                // a READ_FIXED may return short; the state machine asks again for the rest
                match rx.recv(s, chunk, &w, len, waitall, timeout) {
                    Ok(0) => {
                        let e = read.truncated();
                        return fail(read, e, got_bytes);
                    }
                    Ok(k) => {
                        got_bytes = true;
                        if let Some(c) = crypt.as_deref_mut() {
                            match w.region {
                                Region::Chunk => {
                                    c.decrypt(rx.ring.pool_mut().slice_mut(chunk, w.end, w.end + k))
                                }
                                Region::Overflow => c.decrypt(&mut rx.overflow[w.end..w.end + k]),
                            }
                        }
                        w.end += k;
                    }
                    Err(e) => return fail(read, io_err("reading from", e), got_bytes),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
