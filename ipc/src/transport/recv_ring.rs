//! A blocking receive ring for a client thread: one io_uring and one [`BufferPool`], one
//! receive at a time, each waiting at most a timeout.
//!
//! The event loops in [`uring`](super::uring) serve many connections at once from multishot
//! receives. A client reading one stream at a time (hdfs-io's block reader) wants the other
//! shape: put exactly `len` bytes (or whatever has arrived) at a chosen offset of a pooled
//! chunk, wait for it, and get the count back. [`RecvRing`] is that, with the io_uring details
//! kept here, beside the event loops that share them:
//!
//! - the ring is built by [`build_ring`] (the best setup flags the kernel accepts);
//! - the pool is registered as fixed buffers by `register_pool`, the same fallback the event
//!   loops use when `RLIMIT_MEMLOCK` refuses (unregistered, one warning per process);
//! - a registered chunk is received into with `RECV` + `IORING_RECVSEND_FIXED_BUF` where the
//!   kernel accepts it (6.18 answers EINVAL: then plain `RECV`, decided once per ring), or with
//!   `READ_FIXED` when asked ([`RingPoolMode::ReadFixed`], measured slower: for measurements);
//! - a receive that outlives its timeout is cancelled and its completion reaped before the
//!   call returns `TimedOut`, so the kernel never writes into the buffer after the call.
//!
//! Because every call waits for its own completion, the API is safe: the buffer (a chunk of the
//! ring's pool, or a caller's slice) is borrowed for the call only, and the kernel is done with
//! it when the call returns.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use io_uring::{cqueue, opcode, squeue, types, IoUring};

use super::pool::{BufferPool, ChunkId, PoolConfig};
use super::uring::{build_ring, register_pool};
use super::TransportError;

/// `IORING_RECVSEND_FIXED_BUF` (kernel uapi; the crate keeps it private): the receive uses
/// the registered buffer named by `buf_index`.
const IORING_RECVSEND_FIXED_BUF: u16 = 1 << 2;

const UD_RECV: u64 = 1;
const UD_CANCEL: u64 = 2;

/// Submission-queue entries of a receive ring: one receive and its cancel at a time.
const RING_ENTRIES: u32 = 8;

/// One warning per process when receive rings cannot register their pool.
static REGISTER_WARNED: AtomicBool = AtomicBool::new(false);

/// How a ring's pool is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RingPoolMode {
    /// Not registered: plain `RECV`.
    Unregistered,
    /// Registered as fixed buffers where `RLIMIT_MEMLOCK` allows (the default): `RECV` with
    /// the fixed buffer where the kernel accepts it, else plain `RECV`.
    Registered,
    /// Registered, received with `READ_FIXED` (no `MSG_WAITALL`: a short read is returned and
    /// the caller asks again). Measured at about 10 % more CPU per GB than plain `RECV` on
    /// sockets: for measurements only.
    ReadFixed,
}

/// How receives into the pool's chunks are issued right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FixedUse {
    /// Plain `RECV` into the chunk's user memory (not registered, or the kernel refused).
    No,
    /// `RECV` with `IORING_RECVSEND_FIXED_BUF` (buffer index = chunk index), not yet confirmed.
    RecvTry,
    /// `RECV` with the fixed buffer works here.
    Recv,
    /// `READ_FIXED` ([`RingPoolMode::ReadFixed`]).
    ReadFixed,
}

/// A ring's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecvRingStats {
    /// Receive operations submitted.
    pub recvs: u64,
    /// Bytes received.
    pub bytes: u64,
    /// Receives that timed out (and were cancelled).
    pub timeouts: u64,
    /// The pool is registered as fixed buffers.
    pub registered: bool,
    /// Receives into the pool use the fixed buffers (`false` once the kernel refused them).
    pub fixed: bool,
}

/// A ring and its pool (see the module docs). Field order matters: the ring (and its
/// registration of the pool) is dropped before the pool is unmapped.
pub struct RecvRing {
    ring: IoUring,
    pool: BufferPool,
    fixed: FixedUse,
    stats: RecvRingStats,
}

impl std::fmt::Debug for RecvRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecvRing")
            .field("pool", &self.pool)
            .field("fixed", &self.fixed)
            .field("stats", &self.stats)
            .finish()
    }
}

impl RecvRing {
    /// A ring with a pool of `pool`'s geometry, registered as `mode` says (`pool.register` is
    /// ignored: `mode` decides). `who` names the user in the one registration warning.
    pub fn new(pool: &PoolConfig, mode: RingPoolMode, who: &str) -> Result<Self, TransportError> {
        let register = mode != RingPoolMode::Unregistered;
        let (ring, _) =
            build_ring(RING_ENTRIES).map_err(|e| TransportError::io("io_uring_setup", e))?;
        let mut pool = BufferPool::new(&PoolConfig {
            register,
            ..pool.clone()
        })?;
        let mut stats = RecvRingStats::default();
        let mut fixed = FixedUse::No;
        // `pool` moves into the RecvRing built below, whose field order drops `ring` (and with
        // it the registration) before the pool's mapping.
        // SAFETY: the pool outlives the ring's registration (RecvRing field order).
        if register && unsafe { register_pool(&ring, &mut pool, who, &REGISTER_WARNED) } {
            fixed = if mode == RingPoolMode::ReadFixed {
                FixedUse::ReadFixed
            } else {
                FixedUse::RecvTry
            };
            stats.registered = true;
            stats.fixed = true;
        }
        Ok(RecvRing {
            ring,
            pool,
            fixed,
            stats,
        })
    }

    /// The pool the chunks come from.
    pub fn pool(&self) -> &BufferPool {
        &self.pool
    }

    /// The pool, to acquire, release and move bytes inside chunks.
    pub fn pool_mut(&mut self) -> &mut BufferPool {
        &mut self.pool
    }

    /// How chunk receives are issued now.
    pub fn fixed_use(&self) -> FixedUse {
        self.fixed
    }

    /// The counters.
    pub fn stats(&self) -> RecvRingStats {
        self.stats
    }

    /// One receive from `fd` into `chunk[at..at + len]`: all `len` bytes with `waitall`, else
    /// at least one (a `READ_FIXED` may return fewer either way), waiting at most `timeout`.
    /// `Ok(0)` is end of stream.
    pub fn recv_chunk(
        &mut self,
        fd: BorrowedFd<'_>,
        chunk: ChunkId,
        at: usize,
        len: usize,
        waitall: bool,
        timeout: Duration,
    ) -> io::Result<usize> {
        let flags = if waitall { libc::MSG_WAITALL } else { 0 };
        let fd = types::Fd(fd.as_raw_fd());
        let len32 = u32::try_from(len)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "receive over 4 GiB"))?;
        loop {
            let fixed = self.fixed;
            // panics on a range outside the chunk, before anything is submitted
            let ptr = self.pool.slice_mut(chunk, at, at + len).as_mut_ptr();
            let sqe = match fixed {
                FixedUse::No => opcode::Recv::new(fd, ptr, len32).flags(flags).build(),
                FixedUse::RecvTry | FixedUse::Recv => {
                    // buf_group shares the SQE field with buf_index: the fixed buffer's index
                    opcode::Recv::new(fd, ptr, len32)
                        .flags(flags)
                        .ioprio(IORING_RECVSEND_FIXED_BUF)
                        .buf_group(chunk.index() as u16)
                        .build()
                }
                FixedUse::ReadFixed => opcode::ReadFixed::new(fd, ptr, len32, chunk.index() as u16)
                    .offset(0) // a socket has no position
                    .build(),
            };
            // `ptr..ptr+len` is inside a chunk of `self.pool`, borrowed mutably through `self`
            // for this call, and `submit_one` does not return before the completion is reaped
            // (on timeout or error it cancels and waits), so the kernel is done with it.
            // SAFETY: the chunk range stays valid and unaliased until submit_one returns.
            let res = unsafe { self.submit_one(sqe.user_data(UD_RECV), timeout) }?;
            self.stats.recvs += 1;
            if res == -libc::EINVAL && fixed == FixedUse::RecvTry {
                tracing::debug!("io_uring RECV with a fixed buffer refused; plain RECV");
                self.fixed = FixedUse::No;
                self.stats.fixed = false;
                continue;
            }
            if fixed == FixedUse::RecvTry && res >= 0 {
                self.fixed = FixedUse::Recv;
            }
            if res == -libc::EINTR || res == -libc::EAGAIN {
                continue;
            }
            if res < 0 {
                return Err(io::Error::from_raw_os_error(-res));
            }
            self.stats.bytes += res as u64;
            return Ok(res as usize);
        }
    }

    /// One plain `RECV` from `fd` into `buf` (memory outside the pool, e.g. an overflow buffer
    /// for a message larger than a chunk), as [`RecvRing::recv_chunk`] otherwise.
    pub fn recv_into(
        &mut self,
        fd: BorrowedFd<'_>,
        buf: &mut [u8],
        waitall: bool,
        timeout: Duration,
    ) -> io::Result<usize> {
        let flags = if waitall { libc::MSG_WAITALL } else { 0 };
        let len = u32::try_from(buf.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "receive over 4 GiB"))?;
        loop {
            let sqe = opcode::Recv::new(types::Fd(fd.as_raw_fd()), buf.as_mut_ptr(), len)
                .flags(flags)
                .build();
            // `buf` is borrowed mutably for this call and `submit_one` does not return before
            // the completion is reaped, so the kernel is done with it by then.
            // SAFETY: `buf` stays valid and unaliased until submit_one returns.
            let res = unsafe { self.submit_one(sqe.user_data(UD_RECV), timeout) }?;
            self.stats.recvs += 1;
            if res == -libc::EINTR || res == -libc::EAGAIN {
                continue;
            }
            if res < 0 {
                return Err(io::Error::from_raw_os_error(-res));
            }
            self.stats.bytes += res as u64;
            return Ok(res as usize);
        }
    }

    /// Submits `sqe` and waits for its completion, at most `timeout`; on timeout the operation
    /// is cancelled and both completions are reaped before returning `TimedOut`.
    ///
    /// # Safety
    /// Any buffer `sqe` names must stay valid and unaliased until this returns (it returns
    /// only once the completion is reaped).
    // SAFETY: an unsafe fn: callers keep the SQE's buffer valid (`# Safety` above).
    unsafe fn submit_one(&mut self, sqe: squeue::Entry, timeout: Duration) -> io::Result<i32> {
        // SAFETY: the caller keeps the SQE's buffer valid until we return, and we return only
        // after its completion is reaped.
        unsafe { self.ring.submission().push(&sqe) }
            .map_err(|_| io::Error::other("io_uring submission queue full"))?;
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(res) = self.reap(UD_RECV) {
                return Ok(res);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            let ts = types::Timespec::from(left);
            let args = types::SubmitArgs::new().timespec(&ts);
            match self.ring.submitter().submit_with_args(1, &args) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::ETIME) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {}
                Err(e) => {
                    // the operation may be in flight: cancel it and reap before returning
                    self.cancel_and_reap();
                    return Err(e);
                }
            }
        }
        self.stats.timeouts += 1;
        self.cancel_and_reap();
        Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("no data for {} ms", timeout.as_millis()),
        ))
    }

    /// The result of the completion tagged `ud`, if it has arrived (other completions — a
    /// cancel's — are dropped).
    fn reap(&mut self, ud: u64) -> Option<i32> {
        let mut found = None;
        for cqe in self.ring.completion() {
            let c: cqueue::Entry = cqe;
            if c.user_data() == ud {
                found = Some(c.result());
            }
        }
        found
    }

    fn cancel_and_reap(&mut self) {
        let c = opcode::AsyncCancel::new(UD_RECV)
            .build()
            .user_data(UD_CANCEL);
        // SAFETY: a cancel carries no buffer.
        if unsafe { self.ring.submission().push(&c) }.is_err() {
            let _ = self.ring.submit();
            // SAFETY: as above; the queue was just flushed.
            let _ = unsafe { self.ring.submission().push(&c) };
        }
        // the cancelled operation completes promptly (-ECANCELED, or its result if it won)
        loop {
            match self.ring.submit_and_wait(1) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(_) => return,
            }
            if self.reap(UD_RECV).is_some() {
                return;
            }
        }
    }
}
