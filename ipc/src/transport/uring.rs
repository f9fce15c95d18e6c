//! The io_uring backend: one ring per ring thread.
//!
//! - Accept: one multishot accept on this ring's listening socket (each ring has its own on the
//!   same address, `SO_REUSEPORT`; see [`super::start`]), re-armed when a completion arrives
//!   without `IORING_CQE_F_MORE`.
//! - Receive: one multishot recv per connection, into a provided buffer ring
//!   (`register_buf_ring_with_flags`) of `recv_bufs × recv_buf_size` bytes owned by this thread.
//!   Each completion names the buffer it filled; the session consumes the bytes (copying only what
//!   it must keep) and the buffer goes straight back to the ring. ENOBUFS (the ring ran dry) and
//!   any completion without `F_MORE` end the multishot, and it is re-armed. Backpressure cancels
//!   it (`AsyncCancel` by `user_data`).
//! - Send: at most one send operation (or chain) per connection is in flight, so that sends
//!   cannot reorder. Without SEND_ZC, the queued segments (up to `MAX_IOV`, 64) go out as ONE
//!   SENDMSG whose iovecs cover them, like the epoll backend's `writev`; the header and iovecs
//!   live in a per-connection box (`MsgBuf`) that stays put until the completion. The
//!   completion is accounted by bytes: the queue's front advances by what was sent (a short send
//!   ends mid-segment), each finished segment returns its chunk reference, and the rest is
//!   resubmitted. With SEND_ZC the segments go out as one chain of linked sends (`IO_LINK`,
//!   `MSG_WAITALL`, so each completes whole or fails); each completion returns its chunk
//!   reference and the next chain starts when the last one completes. Segments of
//!   [`ZC_MIN_BYTES`] or more
//!   use SEND_ZC when the connection's policy says so, with `IORING_SEND_ZC_REPORT_USAGE`: the
//!   chunk is held until the notification, whose "copied" bit is counted in the metrics. With a
//!   registered pool, SEND_ZC uses the fixed buffer (`buf_index` = chunk index).
//! - The ring is set up with SINGLE_ISSUER|DEFER_TASKRUN where the kernel has them (falling back
//!   to COOP_TASKRUN, then to no flags); it is created on, and only used by, its own thread.
//! - A wake-up eventfd (polled) tells the thread to shut down; waits are bounded by a tick that
//!   drives the idle timeout and the linger of closing connections.
//! - One `io_uring_enter` per turn: it submits the turn's sends and waits for the next event.
//!   A plain send on a socket with room completes inside the submission, so waiting for one
//!   completion would return at once with only the sends' own, and the turn after that would
//!   enter again to wait (two enters per request). The wait therefore asks for one completion
//!   more than the sends it submits, bounded by [`SEND_WAIT_BOUND`] instead of the tick: a
//!   send that did not complete inline (a full socket) delays the next turn by at most that.
//! - Wake batching (`TransportConfig::batch_wait`, [`super::BATCH_WAIT_KEY`]): under load the
//!   wait asks for as many completions as the recent rate makes likely within the bound, with
//!   the bound as `min_wait_usec` (kernel 6.12+), so several requests share a wake-up; see
//!   `WakeBatch`.

use std::io;
use std::os::fd::RawFd;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use io_uring::{cqueue, opcode, squeue, types, IoUring, Probe};

use super::pool::{BufferPool, MAX_REGISTERED_CHUNKS};
use super::sched::{self, EventLoop, Marks, Phase, Queues, SchedConn, Slot};
use super::slab::Slab;
use super::tx::{Outbox, Starved, TxQueue};
use super::{Flow, SendZc, Service, Session, Shared, TransportError, ZC_MIN_BYTES};

/// `IORING_SEND_ZC_REPORT_USAGE` (kernel uapi; the crate keeps it private): ask the notification
/// to say whether the kernel fell back to copying.
pub const IORING_SEND_ZC_REPORT_USAGE: u16 = 1 << 3;
/// `IORING_NOTIF_USAGE_ZC_COPIED`: set in a SEND_ZC notification's `res` when the data was
/// copied (always on loopback).
pub const IORING_NOTIF_USAGE_ZC_COPIED: u32 = 1 << 31;

const OP_ACCEPT: u64 = 1;
const OP_WAKE: u64 = 2;
const OP_RECV: u64 = 3;
const OP_SEND: u64 = 4;
const OP_SENDZC: u64 = 5;
const OP_CANCEL: u64 = 6;
const OP_SENDMSG: u64 = 7;

/// Longest chain of linked sends submitted for one connection at once (SEND_ZC connections).
const MAX_CHAIN: usize = 16;

/// Most segments one SENDMSG covers (as the epoll backend's `writev`).
const MAX_IOV: usize = 64;

/// The message header and iovecs of a connection's SENDMSG. Boxed once per connection at
/// accept (its size is fixed, not chosen by the peer) so that it stays put while the kernel may
/// read it, even when the connection slab reallocates; rewritten only when no send of the
/// connection is in flight.
struct MsgBuf {
    hdr: libc::msghdr,
    iov: [libc::iovec; MAX_IOV],
}

impl MsgBuf {
    fn new() -> Box<Self> {
        Box::new(Self {
            // SAFETY: an all-zero msghdr is a valid "no address, no iovecs, no control" header.
            hdr: unsafe { std::mem::zeroed() },
            iov: [libc::iovec {
                iov_base: std::ptr::null_mut(),
                iov_len: 0,
            }; MAX_IOV],
        })
    }
}

fn ud(op: u64, idx: u32, gen: u16, chunk: u32) -> u64 {
    debug_assert!(idx < 1 << 24 && chunk < 1 << 16);
    op | (idx as u64) << 8 | (gen as u64) << 32 | (chunk as u64) << 48
}

fn ud_parts(u: u64) -> (u64, u32, u16, u32) {
    (
        u & 0xff,
        ((u >> 8) & 0xff_ffff) as u32,
        ((u >> 32) & 0xffff) as u16,
        (u >> 48) as u32,
    )
}

/// Builds a ring with the best setup flags the kernel accepts; returns it and a description.
/// A ring of `entries` SQEs (CQ 4× as large) with the best setup flags the kernel accepts:
/// SINGLE_ISSUER|DEFER_TASKRUN, else COOP_TASKRUN, else none. Returns the ring and which
/// setup it got (for a log line). Also used by [`RecvRing`](super::recv_ring::RecvRing).
pub fn build_ring(entries: u32) -> io::Result<(IoUring, &'static str)> {
    let cq = entries.saturating_mul(4);
    type Setup = fn(&mut io_uring::Builder);
    let attempts: [(&'static str, Setup); 3] = [
        ("SINGLE_ISSUER|DEFER_TASKRUN", |b| {
            b.setup_single_issuer().setup_defer_taskrun();
        }),
        ("COOP_TASKRUN", |b| {
            b.setup_coop_taskrun();
        }),
        ("no setup flags", |_| {}),
    ];
    let mut last = io::Error::from_raw_os_error(libc::EINVAL);
    for (desc, set) in attempts {
        let mut b = IoUring::builder();
        b.setup_cqsize(cq);
        set(&mut b);
        match b.build(entries) {
            Ok(r) => return Ok((r, desc)),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => last = e,
            Err(e) => return Err(e),
        }
    }
    Err(last)
}

/// Registers `pool`'s chunks as `ring`'s fixed buffers (buffer index = chunk index) and marks
/// the pool registered; returns whether it worked. The one registration fallback of every ring
/// here (the event loops' and [`RecvRing`](super::recv_ring::RecvRing)'s): when the kernel
/// refuses (an unprivileged user's `RLIMIT_MEMLOCK` is the usual reason) or the pool has more
/// chunks than io_uring registers, the pool stays unregistered and works with plain receives
/// and sends; the first refusal per `warned` flag logs one warning, naming `who`.
///
/// # Safety
/// The pool's mapping must outlive the registration: drop `ring` (or unregister) before `pool`.
// SAFETY: an unsafe fn: callers keep the pool mapped while registered (`# Safety` above).
pub(crate) unsafe fn register_pool(
    ring: &IoUring,
    pool: &mut BufferPool,
    who: &str,
    warned: &AtomicBool,
) -> bool {
    if pool.capacity() as usize > MAX_REGISTERED_CHUNKS {
        return false;
    }
    let iov = pool.iovecs();
    // SAFETY: the iovecs describe the pool's mapping, which the caller keeps alive until the
    // ring is dropped.
    match unsafe { ring.submitter().register_buffers(&iov) } {
        Ok(()) => {
            pool.set_registered(true);
            true
        }
        Err(e) => {
            if !warned.swap(true, Ordering::Relaxed) {
                let why = match e.raw_os_error() {
                    Some(libc::ENOMEM) | Some(libc::EPERM) => {
                        " (RLIMIT_MEMLOCK too low: raise it, e.g. LimitMEMLOCK= in the systemd unit)"
                    }
                    _ => "",
                };
                tracing::warn!(
                    "{who}: registering the {} byte buffer pool as io_uring fixed buffers failed: {e}{why}; using unregistered buffers",
                    pool.bytes()
                );
            }
            false
        }
    }
}

/// Checks that io_uring is usable for this backend: the ring can be created (not blocked by
/// seccomp or `kernel.io_uring_disabled`), the opcodes exist (SEND_ZC doubles as the check for a
/// 6.0+ kernel, which multishot recv needs), and a provided buffer ring can be registered.
/// Returns a short description of the setup for the startup log line.
///
/// The probe runs on a short-lived thread of its own: tearing a ring down can queue task work
/// (a TIF_NOTIFY_SIGNAL wake-up) on the thread that created it, which would interrupt a blocking
/// socket call of the caller's with EINTR.
pub fn probe() -> Result<String, String> {
    std::thread::Builder::new()
        .name("hp-uring-probe".into())
        .spawn(probe_here)
        .map_err(|e| format!("spawning the probe thread failed: {e}"))?
        .join()
        .map_err(|_| "the probe thread panicked".to_string())?
}

fn probe_here() -> Result<String, String> {
    let (ring, flags) = build_ring(8).map_err(|e| match e.raw_os_error() {
        Some(libc::ENOSYS) => "io_uring_setup is not implemented by this kernel".to_string(),
        Some(libc::EPERM) => {
            "io_uring_setup not permitted (kernel.io_uring_disabled or seccomp)".to_string()
        }
        _ => format!("io_uring_setup failed: {e}"),
    })?;
    let mut p = Probe::new();
    ring.submitter()
        .register_probe(&mut p)
        .map_err(|e| format!("opcode probe failed: {e}"))?;
    for (code, name) in [
        (opcode::AcceptMulti::CODE, "ACCEPT"),
        (opcode::RecvMulti::CODE, "RECV"),
        (opcode::Send::CODE, "SEND"),
        (opcode::SendMsg::CODE, "SENDMSG"),
        (opcode::SendZc::CODE, "SEND_ZC (kernel 6.0+)"),
        (opcode::AsyncCancel::CODE, "ASYNC_CANCEL"),
        (opcode::PollAdd::CODE, "POLL_ADD"),
    ] {
        if !p.is_supported(code) {
            return Err(format!("opcode {name} not supported"));
        }
    }
    let bufs = BufRing::new(1, 4096).map_err(|e| format!("buffer ring mapping: {e}"))?;
    // SAFETY: `bufs` (ring memory and buffers) outlives the registration: it is unregistered
    // below before `bufs` is dropped, and the ring itself is dropped right after.
    unsafe { bufs.register(&ring, 0) }
        .map_err(|e| format!("provided buffer ring registration failed: {e}"))?;
    let _ = ring.submitter().unregister_buf_ring(0);
    Ok(format!(
        "{flags}, multishot accept/recv, provided buffer ring"
    ))
}

/// A provided buffer ring: `entries` buffers of `size` bytes the kernel picks from for recv.
struct BufRing {
    ring: NonNull<u8>,
    ring_len: usize,
    bufs: NonNull<u8>,
    bufs_len: usize,
    entries: u16,
    size: usize,
    /// Local tail (published with a Release store).
    tail: u16,
}

/// Byte offset of the shared tail in `struct io_uring_buf_ring` (it overlays `bufs[0].resv`).
const BUF_RING_TAIL_OFFSET: usize = 14;
/// `sizeof(struct io_uring_buf)`.
const BUF_ENTRY_SIZE: usize = 16;

fn map_anon(len: usize) -> io::Result<NonNull<u8>> {
    // SAFETY: anonymous private mapping with a null hint; the result is checked.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    // The ring page is pinned by the kernel: not copied into forked children (see the pool).
    super::pool::exclude_from_fork(p, len);
    NonNull::new(p.cast()).ok_or_else(|| io::Error::from_raw_os_error(libc::ENOMEM))
}

impl BufRing {
    fn new(entries: u16, size: usize) -> io::Result<Self> {
        assert!(entries.is_power_of_two());
        let ring_len = (entries as usize * BUF_ENTRY_SIZE).next_multiple_of(4096);
        let bufs_len = entries as usize * size;
        let ring = map_anon(ring_len)?;
        let bufs = match map_anon(bufs_len) {
            Ok(b) => b,
            Err(e) => {
                // SAFETY: unmapping exactly what map_anon returned above.
                unsafe { libc::munmap(ring.as_ptr().cast(), ring_len) };
                return Err(e);
            }
        };
        let mut r = Self {
            ring,
            ring_len,
            bufs,
            bufs_len,
            entries,
            size,
            tail: 0,
        };
        for bid in 0..entries {
            r.push(bid);
        }
        r.publish();
        Ok(r)
    }

    /// Registers the ring as buffer group `bgid`.
    ///
    /// # Safety
    /// `self` must outlive the registration (unregister it or drop the ring first).
    // SAFETY: an unsafe fn: callers keep `self` mapped while registered (`# Safety` above).
    unsafe fn register(&self, ring: &IoUring, bgid: u16) -> io::Result<()> {
        // The ring memory is page-aligned and `entries` entries long.
        // SAFETY: it stays mapped while registered, per this function's contract.
        unsafe {
            ring.submitter().register_buf_ring_with_flags(
                self.ring.as_ptr() as u64,
                self.entries,
                bgid,
                0,
            )
        }
    }

    /// Hands buffer `bid` back (visible to the kernel after [`Self::publish`]).
    fn push(&mut self, bid: u16) {
        let idx = (self.tail & (self.entries - 1)) as usize;
        let addr = self.bufs.as_ptr() as u64 + bid as u64 * self.size as u64;
        // The kernel only reads entries between its head and the published tail; this one is
        // past the published tail, so nobody else accesses it now. Fields are written at their
        // uapi offsets (addr u64 @0, len u32 @8, bid u16 @12), each naturally aligned.
        // SAFETY: idx < entries keeps the 16-byte entry inside the ring mapping; no one else
        // touches it (above).
        unsafe {
            let e = self.ring.as_ptr().add(idx * BUF_ENTRY_SIZE);
            e.cast::<u64>().write(addr);
            e.add(8).cast::<u32>().write(self.size as u32);
            e.add(12).cast::<u16>().write(bid);
        }
        self.tail = self.tail.wrapping_add(1);
    }

    /// Publishes the local tail to the kernel.
    fn publish(&self) {
        // The kernel reads the tail concurrently, hence the atomic Release store (the entries
        // written before become visible first).
        // SAFETY: the tail is a naturally aligned u16 at offset 14 of the page-aligned mapping.
        unsafe {
            let t = &*(self.ring.as_ptr().add(BUF_RING_TAIL_OFFSET) as *const AtomicU16);
            t.store(self.tail, Ordering::Release);
        }
    }

    /// The first `len` bytes of buffer `bid`, which a completion just handed to us.
    fn buf(&self, bid: u16, len: usize) -> &[u8] {
        assert!(bid < self.entries && len <= self.size);
        // The completion that named `bid` handed the buffer to us; the kernel will not write it
        // again until we push it back (after this borrow ends).
        // SAFETY: bid < entries and len <= size keep the slice inside the buffer mapping.
        unsafe { std::slice::from_raw_parts(self.bufs.as_ptr().add(bid as usize * self.size), len) }
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the two mappings made in `new`; the ring that registered
        // them is dropped (or unregistered them) before this runs.
        unsafe {
            libc::munmap(self.ring.as_ptr().cast(), self.ring_len);
            libc::munmap(self.bufs.as_ptr().cast(), self.bufs_len);
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Open,
    /// Sending what is queued, then half-close.
    Flushing(Instant),
    /// Half-closed after a FATAL: discard input until the peer closes or the linger expires.
    Draining(Instant),
    /// Shut down; waiting for outstanding operations before the slot is freed.
    Closing,
}

struct Conn<S> {
    fd: RawFd,
    gen: u16,
    session: S,
    tx: TxQueue,
    state: State,
    last_active: Instant,
    recv_armed: bool,
    cancel_sent: bool,
    /// Operations whose completions (including SEND_ZC notifications) are outstanding.
    ops: u32,
    /// Send result completions outstanding (the current chain).
    sends_inflight: u32,
    zc: bool,
    marks: Marks,
    /// The SENDMSG header and iovecs (non-ZC connections); see [`MsgBuf`].
    msg: Box<MsgBuf>,
    /// The last [`WakeBatch`] window in which this connection received data.
    batch_epoch: u32,
    slot: Slot,
}

static REGISTER_WARNED: AtomicBool = AtomicBool::new(false);
static MIN_WAIT_WARNED: AtomicBool = AtomicBool::new(false);

/// Longest a turn that submitted sends waits for completions beyond theirs (see the module
/// docs): what a send that could not complete inline may add to the next turn's start.
pub const SEND_WAIT_BOUND: Duration = Duration::from_millis(1);

/// How often [`WakeBatch`] re-estimates the completion rate.
const BATCH_WINDOW: Duration = Duration::from_millis(20);

/// Most completions one batched wait asks for.
const MAX_BATCH: u64 = 64;

/// Wake batching ([`super::TransportConfig::batch_wait`]): how many completions the next wait
/// asks for. With `k` > 1 the wait also carries the bound as `min_wait_usec`: the kernel
/// (DEFER_TASKRUN) wakes the thread once `k` completions are queued, or at the bound if at
/// least one is, or else at the first one after it.
///
/// `k` is what the last window's receive rate makes likely within the bound, but at most half
/// the connections that sent anything in that window: a client that waits for each answer
/// before its next call (one connection, or a few) can have only that many requests in flight,
/// and waiting for more would hold every one of its calls for the whole bound.
struct WakeBatch {
    /// The bound in µs; 0 = off.
    wait_us: u32,
    /// Completions the next wait asks for (besides the sends'); 1 = no batching.
    k: u32,
    /// Which window this is: a connection counts once per window ([`Self::saw_conn`]).
    epoch: u32,
    window_start: Instant,
    window_events: u64,
    window_conns: u64,
}

impl WakeBatch {
    fn new(wait: Duration, now: Instant) -> Self {
        Self {
            wait_us: u32::try_from(wait.as_micros()).unwrap_or(u32::MAX),
            k: 1,
            epoch: 1,
            window_start: now,
            window_events: 0,
            window_conns: 0,
        }
    }

    /// A connection received data; `seen` is its mark of the last window it did.
    fn saw_conn(&mut self, seen: &mut u32) {
        if *seen != self.epoch {
            *seen = self.epoch;
            self.window_conns += 1;
        }
    }

    /// Counts a turn's request-side completions (receives, accepts) and, once a window has
    /// passed, sets `k` for the next one.
    fn record(&mut self, events: u64, now: Instant) {
        if self.wait_us == 0 {
            return;
        }
        self.window_events += events;
        let dt = now.duration_since(self.window_start);
        if dt >= BATCH_WINDOW {
            let dt_us = u64::try_from(dt.as_micros()).unwrap_or(u64::MAX).max(1);
            let expected = self.window_events.saturating_mul(u64::from(self.wait_us)) / dt_us;
            let k = expected.min(self.window_conns / 2).min(MAX_BATCH);
            self.k = k.max(1) as u32;
            self.epoch = self.epoch.wrapping_add(1).max(1);
            self.window_start = now;
            self.window_events = 0;
            self.window_conns = 0;
        }
    }
}

struct Loop<S: Service> {
    // Declared first so it is dropped first: the kernel lets go of the pool and buffer ring
    // before they are unmapped.
    ring: IoUring,
    bufs: BufRing,
    pool: BufferPool,
    /// SENDMSG headers of connections dropped at exit with a send possibly outstanding: kept
    /// until the ring (declared first) has been dropped.
    /// (Boxes, not values: the kernel may hold the boxed address.)
    #[allow(clippy::vec_box)]
    retired: Vec<Box<MsgBuf>>,
    conns: Slab<Conn<S::Session>>,
    service: Arc<S>,
    shared: Arc<Shared>,
    listen_fd: RawFd,
    wake_fd: RawFd,
    accept_armed: bool,
    accept_retry: Option<Instant>,
    queues: Queues,
    cqes: Vec<(u64, i32, u32)>,
    tick: Duration,
    /// Send operations (SEND, SEND_ZC, SENDMSG) pushed since the last wait: their completions
    /// do not count as the event the next wait is for.
    sends_pushed: u32,
    batch: WakeBatch,
    stopping: bool,
    synced: super::PoolStats,
}

/// Runs one ring thread until shutdown. Reports setup success or failure on `ready` first.
pub(crate) fn run<S: Service>(
    listen_fd: RawFd,
    wake_fd: RawFd,
    service: Arc<S>,
    shared: Arc<Shared>,
    ready: mpsc::Sender<Result<(), TransportError>>,
) {
    let lp = match Loop::new(listen_fd, wake_fd, service, shared) {
        Ok(l) => {
            let _ = ready.send(Ok(()));
            l
        }
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    drop(ready);
    lp.run();
}

impl<S: Service> Loop<S> {
    fn new(
        listen_fd: RawFd,
        wake_fd: RawFd,
        service: Arc<S>,
        shared: Arc<Shared>,
    ) -> Result<Self, TransportError> {
        let cfg = &shared.config;
        // Without CAP_IPC_LOCK the ring's own memory counts against RLIMIT_MEMLOCK: on ENOMEM,
        // retry with fewer entries before giving up.
        let mut entries = cfg.ring_entries.max(8);
        let ring = loop {
            match build_ring(entries) {
                Ok((r, _)) => break r,
                Err(e) if e.raw_os_error() == Some(libc::ENOMEM) && entries > 64 => {
                    entries /= 2;
                    tracing::warn!(
                        "io_uring_setup: ENOMEM (RLIMIT_MEMLOCK?); retrying with {entries} entries"
                    );
                }
                Err(e) => return Err(TransportError::io("io_uring_setup", e)),
            }
        };
        let mut pool = BufferPool::new(&cfg.pool)?;
        // `pool` moves into the Loop built below, whose field order drops `ring` (and with it
        // the registration) before the pool's mapping.
        let registered = cfg.pool.register
            // SAFETY: the pool outlives the ring's registration (Loop field order).
            && unsafe { register_pool(&ring, &mut pool, "io_uring transport", &REGISTER_WARNED) };
        if registered {
            shared.add(&shared.metrics.pools_registered, 1);
        }
        let bufs = BufRing::new(cfg.recv_bufs, cfg.recv_buf_size)
            .map_err(|e| TransportError::io("mmap(recv buffer ring)", e))?;
        // SAFETY: `bufs` lives in this Loop and is dropped after `ring` (field order).
        unsafe { bufs.register(&ring, 0) }
            .map_err(|e| TransportError::io("register_buf_ring", e))?;
        let mut tick = cfg
            .idle_timeout
            .map_or(Duration::from_secs(1), |t| t / 4)
            .min(cfg.linger / 2);
        tick = tick.clamp(Duration::from_millis(10), Duration::from_secs(1));
        let batch_wait = if cfg.batch_wait.is_zero() || ring.params().is_feature_min_timeout() {
            cfg.batch_wait
        } else {
            if !MIN_WAIT_WARNED.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    "io_uring without IORING_FEAT_MIN_TIMEOUT (kernel < 6.12): \
                     {} ignored, every completion wakes the ring thread",
                    super::BATCH_WAIT_KEY
                );
            }
            Duration::ZERO
        };
        let mut lp = Self {
            ring,
            bufs,
            pool,
            retired: Vec::new(),
            conns: Slab::new(),
            service,
            shared,
            listen_fd,
            wake_fd,
            accept_armed: false,
            accept_retry: None,
            queues: Queues::default(),
            cqes: Vec::with_capacity(1024),
            tick,
            sends_pushed: 0,
            batch: WakeBatch::new(batch_wait, Instant::now()),
            stopping: false,
            synced: super::PoolStats::default(),
        };
        lp.arm_accept();
        lp.arm_wake();
        lp.ring
            .submit()
            .map_err(|e| TransportError::io("io_uring_enter", e))?;
        Ok(lp)
    }

    fn push(&mut self, e: squeue::Entry) {
        loop {
            // Entries point at pool chunks (held by a reference until the send and its
            // notification complete), a connection's boxed SENDMSG header and iovecs (freed with
            // the connection only once no operation is outstanding, or after the ring is dropped:
            // `retired`), the buffer ring (registered, lives in this Loop), or nothing at all.
            // SAFETY: every entry points only at memory that outlives its completion (above).
            if unsafe { self.ring.submission().push(&e) }.is_ok() {
                return;
            }
            // Queue full: hand what is there to the kernel and retry.
            if let Err(err) = self.ring.submit() {
                if err.raw_os_error() != Some(libc::EBUSY) {
                    tracing::error!("io_uring submit failed: {err}");
                }
            }
        }
    }

    fn sq_room(&mut self) -> usize {
        let sq = self.ring.submission();
        sq.capacity() - sq.len()
    }

    fn arm_accept(&mut self) {
        if self.accept_armed || self.stopping {
            return;
        }
        let e = opcode::AcceptMulti::new(types::Fd(self.listen_fd))
            .flags(libc::SOCK_CLOEXEC)
            .build()
            .user_data(ud(OP_ACCEPT, 0, 0, 0));
        self.push(e);
        self.accept_armed = true;
    }

    fn arm_wake(&mut self) {
        let e = opcode::PollAdd::new(types::Fd(self.wake_fd), libc::POLLIN as u32)
            .build()
            .user_data(ud(OP_WAKE, 0, 0, 0));
        self.push(e);
    }

    fn arm_recv(&mut self, idx: u32, gen: u16) {
        let Some(c) = self.conns.get_mut(idx, gen) else {
            return;
        };
        if c.recv_armed || c.state == State::Closing {
            return;
        }
        c.recv_armed = true;
        c.cancel_sent = false;
        c.ops += 1;
        let e = opcode::RecvMulti::new(types::Fd(c.fd), 0)
            .build()
            .user_data(ud(OP_RECV, idx, gen, 0));
        self.push(e);
    }

    fn cancel_recv(&mut self, idx: u32, gen: u16) {
        let Some(c) = self.conns.get_mut(idx, gen) else {
            return;
        };
        if !c.recv_armed || c.cancel_sent {
            return;
        }
        c.cancel_sent = true;
        c.ops += 1;
        let e = opcode::AsyncCancel::new(ud(OP_RECV, idx, gen, 0))
            .build()
            .user_data(ud(OP_CANCEL, idx, gen, 0));
        self.push(e);
    }

    /// Submits the next chain of sends for a connection, if none is in flight.
    fn flush(&mut self, idx: u32, gen: u16) {
        let Some(c) = self.conns.get_mut(idx, gen) else {
            return;
        };
        if c.sends_inflight > 0 || c.state == State::Closing {
            return;
        }
        if !c.zc {
            return self.flush_sendmsg(idx, gen);
        }
        let n = c.tx.unsubmitted().min(MAX_CHAIN);
        if n == 0 {
            return;
        }
        let (fd, zc) = (c.fd, c.zc);
        if self.sq_room() < n {
            // A chain must not be split across submissions.
            let _ = self.ring.submit();
        }
        let registered = self.pool.is_registered();
        let mut zc_count = 0u64;
        for i in 0..n {
            let c = self.conns.get_mut(idx, gen).expect("conn");
            let seg = c.tx.unsubmitted_segment(i).expect("segment");
            // For the kernel: the segment's chunk holds a reference owned by the queue until this
            // send completes (and, for SEND_ZC, until its notification), so the bytes stay
            // mapped and unchanged while the kernel reads them.
            // SAFETY: `add` stays inside the chunk (start <= chunk size).
            let ptr = unsafe { self.pool.ptr(seg.chunk).add(seg.start as usize) };
            let len = seg.len() as u32;
            let flags = libc::MSG_WAITALL | libc::MSG_NOSIGNAL;
            let mut e = if zc && seg.len() >= ZC_MIN_BYTES {
                zc_count += 1;
                let mut op = opcode::SendZc::new(types::Fd(fd), ptr, len)
                    .flags(flags)
                    .zc_flags(IORING_SEND_ZC_REPORT_USAGE);
                if registered {
                    op = op.buf_index(Some(seg.chunk.index() as u16));
                }
                op.build()
                    .user_data(ud(OP_SENDZC, idx, gen, seg.chunk.index()))
            } else {
                opcode::Send::new(types::Fd(fd), ptr, len)
                    .flags(flags)
                    .build()
                    .user_data(ud(OP_SEND, idx, gen, seg.chunk.index()))
            };
            if i + 1 < n {
                e = e.flags(squeue::Flags::IO_LINK);
            }
            self.push(e);
        }
        let c = self.conns.get_mut(idx, gen).expect("conn");
        c.tx.mark_submitted(n);
        c.sends_inflight += n as u32;
        self.sends_pushed += n as u32;
        c.ops += n as u32;
        let m = &self.shared.metrics;
        self.shared.add(&m.sends, n as u64);
        if zc_count > 0 {
            self.shared.add(&m.zc_sends, zc_count);
        }
    }

    /// Submits one SENDMSG whose iovecs cover the connection's queued segments (up to
    /// [`MAX_IOV`]), like the epoll backend's `writev`. No send of the connection is in flight.
    fn flush_sendmsg(&mut self, idx: u32, gen: u16) {
        let Some(c) = self.conns.get_mut(idx, gen) else {
            return;
        };
        debug_assert_eq!(c.tx.submitted(), 0);
        let n = c.tx.unsubmitted().min(MAX_IOV);
        if n == 0 {
            return;
        }
        let m = &mut *c.msg;
        for i in 0..n {
            let seg = c.tx.unsubmitted_segment(i).expect("segment");
            let bytes = self
                .pool
                .slice(seg.chunk, seg.start as usize, seg.end as usize);
            m.iov[i] = libc::iovec {
                iov_base: bytes.as_ptr() as *mut libc::c_void,
                iov_len: bytes.len(),
            };
        }
        m.hdr.msg_iov = m.iov.as_mut_ptr();
        m.hdr.msg_iovlen = n as _;
        let hdr: *const libc::msghdr = &m.hdr;
        let e = opcode::SendMsg::new(types::Fd(c.fd), hdr)
            .flags(libc::MSG_NOSIGNAL as u32)
            .build()
            .user_data(ud(OP_SENDMSG, idx, gen, 0));
        c.tx.mark_submitted(n);
        c.sends_inflight += 1;
        c.ops += 1;
        self.sends_pushed += 1;
        self.push(e);
        self.shared.add(&self.shared.metrics.sends, 1);
    }

    fn mark_dirty(&mut self, idx: u32, gen: u16) {
        self.queues.mark_dirty(&mut self.conns, idx, gen);
    }

    /// Shuts the socket down and frees the slot once no operation is outstanding.
    fn close_now(&mut self, idx: u32, gen: u16) {
        let Some(c) = self.conns.get_mut(idx, gen) else {
            return;
        };
        if c.state != State::Closing {
            c.state = State::Closing;
            // The limits' places are given back at once (the slot frees when the kernel is
            // done with the socket): an evicted handshake makes room now.
            self.shared
                .release(&mut c.slot, &mut self.queues.handshakes);
            // SAFETY: plain syscall on a descriptor this connection owns.
            unsafe { libc::shutdown(c.fd, libc::SHUT_RDWR) };
            if c.ops > 0 {
                // Make sure nothing stays parked on the socket (a send waiting for room, the
                // multishot recv): cancel every request on this fd.
                c.ops += 1;
                let fd = c.fd;
                let e = opcode::AsyncCancel2::new(types::CancelBuilder::fd(types::Fd(fd)).all())
                    .build()
                    .user_data(ud(OP_CANCEL, idx, gen, 0));
                self.push(e);
            }
        }
        self.maybe_free(idx, gen);
    }

    fn maybe_free(&mut self, idx: u32, gen: u16) {
        let Some(c) = self.conns.get_mut(idx, gen) else {
            return;
        };
        if c.state != State::Closing || c.ops > 0 {
            return;
        }
        let mut c = self.conns.remove(idx).expect("conn");
        c.tx.unsubmit_all();
        c.tx.clear(&mut self.pool);
        // SAFETY: the descriptor is ours and no operation on it is outstanding.
        unsafe { libc::close(c.fd) };
        self.shared
            .release(&mut c.slot, &mut self.queues.handshakes);
        self.shared.closed_one();
    }

    /// After a session callback: act on the flow, park on pool starvation, send, and start or
    /// stop receiving.
    fn after(&mut self, idx: u32, gen: u16, flow: Flow, starved: Option<Starved>) {
        let now = Instant::now();
        if !sched::apply_flow(self, idx, gen, flow, starved, now) {
            return;
        }
        self.flush(idx, gen);
        let Some(c) = self.conns.get_mut(idx, gen) else {
            return;
        };
        let drained = c.sends_inflight == 0 && c.tx.is_empty();
        if drained {
            c.tx.release_idle(&mut self.pool);
        }
        match c.state {
            State::Open => {
                let wants = c.session.wants_input();
                if wants && !c.recv_armed {
                    self.arm_recv(idx, gen);
                } else if !wants && c.recv_armed && !c.cancel_sent {
                    self.shared.add(&self.shared.metrics.backpressure_pauses, 1);
                    self.cancel_recv(idx, gen);
                }
            }
            State::Flushing(_) => {
                if drained {
                    // SAFETY: plain syscall on a descriptor this connection owns.
                    unsafe { libc::shutdown(c.fd, libc::SHUT_WR) };
                    c.state = State::Draining(now);
                }
                if !c.recv_armed {
                    self.arm_recv(idx, gen);
                }
            }
            State::Draining(_) => {
                if !c.recv_armed {
                    self.arm_recv(idx, gen);
                }
            }
            State::Closing => self.maybe_free(idx, gen),
        }
    }

    fn on_accept(&mut self, res: i32, flags: u32) {
        if res >= 0 {
            let fd = res;
            let now = Instant::now();
            let slot = if self.stopping {
                None
            } else {
                sched::admit(self, now)
            };
            if let Some(slot) = slot {
                super::set_nodelay(fd);
                let peer = super::peer_addr(fd);
                let zc = match self.shared.config.send_zc {
                    SendZc::Off => false,
                    SendZc::On => true,
                    SendZc::Auto => !super::is_loopback(peer),
                };
                let session = self.service.open(peer);
                let (idx, gen) = self.conns.insert(|gen| Conn {
                    fd,
                    gen,
                    session,
                    tx: TxQueue::new(),
                    state: State::Open,
                    last_active: now,
                    recv_armed: false,
                    cancel_sent: false,
                    ops: 0,
                    sends_inflight: 0,
                    zc,
                    marks: Marks::default(),
                    msg: MsgBuf::new(),
                    batch_epoch: 0,
                    slot,
                });
                sched::admitted(&mut self.queues, slot, idx, gen);
                debug_assert_eq!(self.conns.get_mut(idx, gen).map(|c| c.gen), Some(gen));
                self.shared.add(&self.shared.metrics.accepted, 1);
                self.arm_recv(idx, gen);
            } else {
                if !self.stopping {
                    self.shared.add(&self.shared.metrics.refused, 1);
                }
                // SAFETY: a fresh descriptor we own and have not shared.
                unsafe { libc::close(fd) };
            }
        } else if res != -libc::ECANCELED {
            let err = io::Error::from_raw_os_error(-res);
            tracing::warn!(
                "io_uring accept failed: {err}; retrying after {:?}",
                self.tick
            );
            self.accept_retry = Some(Instant::now() + self.tick);
        }
        if !cqueue::more(flags) {
            self.accept_armed = false;
            if self.accept_retry.is_none() {
                self.arm_accept();
            }
        }
    }

    fn on_recv(&mut self, idx: u32, gen: u16, res: i32, flags: u32) {
        let bid = cqueue::buffer_select(flags);
        let more = cqueue::more(flags);
        let Some(c) = self.conns.get_mut(idx, gen) else {
            if let Some(b) = bid {
                self.bufs.push(b);
                self.bufs.publish();
            }
            return;
        };
        if !more {
            c.recv_armed = false;
            c.ops -= 1;
        }
        let mut outcome = None;
        if res > 0 {
            let n = res as usize;
            c.last_active = Instant::now();
            self.batch.saw_conn(&mut c.batch_epoch);
            self.shared.add(&self.shared.metrics.bytes_in, n as u64);
            let b = bid.expect("recv completion with data names its buffer");
            if c.state == State::Open {
                let data = self.bufs.buf(b, n);
                let mut ob = Outbox::new(&mut self.pool, &mut c.tx);
                let flow = c.session.on_recv(data, &mut ob);
                outcome = Some((flow, ob.starved()));
            }
            self.bufs.push(b);
            self.bufs.publish();
        } else {
            if let Some(b) = bid {
                self.bufs.push(b);
                self.bufs.publish();
            }
            if res == -libc::ENOBUFS {
                self.shared.add(&self.shared.metrics.recv_enobufs, 1);
            } else if res == -libc::ECANCELED && c.state == State::Open {
                // Our backpressure cancel; `after` re-arms when the session wants input again.
            } else {
                // EOF (0) or an error: the peer is gone.
                return self.close_now(idx, gen);
            }
        }
        match outcome {
            Some((flow, starved)) => self.after(idx, gen, flow, starved),
            None => self.after(idx, gen, Flow::Continue, None),
        }
    }

    fn on_send(&mut self, idx: u32, gen: u16, chunk: u32, res: i32, flags: u32, zc: bool) {
        let Some(c) = self.conns.get_mut(idx, gen) else {
            return;
        };
        if zc && cqueue::notif(flags) {
            c.ops -= 1;
            let m = &self.shared.metrics;
            self.shared.add(&m.zc_notifs, 1);
            if (res as u32) & IORING_NOTIF_USAGE_ZC_COPIED != 0 {
                self.shared.add(&m.zc_copied, 1);
            }
            c.tx.release_chunk(&mut self.pool, super::ChunkId::from_index(chunk));
            if c.state == State::Closing {
                self.maybe_free(idx, gen);
            } else {
                self.mark_dirty(idx, gen);
            }
            return;
        }
        c.ops -= 1;
        c.sends_inflight -= 1;
        if zc && cqueue::more(flags) {
            // A notification follows; the kernel may read the chunk until then.
            self.pool.retain(super::ChunkId::from_index(chunk));
            c.ops += 1;
        }
        let mut failed = false;
        if res >= 0 {
            if c.tx.submitted() > 0 {
                c.tx.complete_front(&mut self.pool, res as usize);
            }
            c.last_active = Instant::now();
            self.shared.add(&self.shared.metrics.bytes_out, res as u64);
        } else if res != -libc::ECANCELED {
            failed = true;
        }
        if c.sends_inflight == 0 {
            // Anything still marked submitted was cancelled (a broken chain): resubmit it.
            c.tx.unsubmit_all();
        }
        if failed || c.state == State::Closing {
            return self.close_now(idx, gen);
        }
        self.mark_dirty(idx, gen);
    }

    /// A SENDMSG completed: `res` bytes (possibly fewer than submitted) left the queue's front;
    /// the rest goes out with the next SENDMSG.
    fn on_sendmsg(&mut self, idx: u32, gen: u16, res: i32) {
        let Some(c) = self.conns.get_mut(idx, gen) else {
            return;
        };
        c.ops -= 1;
        c.sends_inflight -= 1;
        let mut failed = false;
        if res >= 0 {
            let mut n = res as usize;
            while n > 0 {
                let Some(seg) = c.tx.front() else { break };
                let k = n.min(seg.len());
                c.tx.complete_front(&mut self.pool, k);
                n -= k;
            }
            c.last_active = Instant::now();
            self.shared.add(&self.shared.metrics.bytes_out, res as u64);
        } else if res != -libc::ECANCELED {
            failed = true;
        }
        // What was submitted and not sent (a short send) is resubmitted.
        c.tx.unsubmit_all();
        if failed || c.state == State::Closing {
            return self.close_now(idx, gen);
        }
        self.mark_dirty(idx, gen);
    }

    fn on_cancel(&mut self, idx: u32, gen: u16) {
        if let Some(c) = self.conns.get_mut(idx, gen) {
            c.ops -= 1;
            if c.state == State::Closing {
                self.maybe_free(idx, gen);
            }
        }
    }

    fn on_wake(&mut self) {
        let mut v = 0u64;
        // SAFETY: reads 8 bytes into a live local from our own non-blocking eventfd.
        unsafe { libc::read(self.wake_fd, (&mut v as *mut u64).cast(), 8) };
        if self.shared.shutdown.load(Ordering::Acquire) {
            self.begin_stop();
        } else {
            self.arm_wake();
        }
    }

    fn begin_stop(&mut self) {
        if self.stopping {
            return;
        }
        self.stopping = true;
        if self.accept_armed {
            let e = opcode::AsyncCancel::new(ud(OP_ACCEPT, 0, 0, 0))
                .build()
                .user_data(ud(OP_CANCEL, u32::MAX >> 8, 0, 0));
            self.push(e);
        }
        for idx in self.conns.indexes() {
            if let Some(c) = self.conns.get_mut_any(idx) {
                let gen = c.gen;
                self.close_now(idx, gen);
            }
        }
    }

    /// The idle/linger sweep (a slice per turn, see [`sched::Sweep`]) and, once per tick, the
    /// accept retry.
    fn sweep(&mut self, sweep: &mut sched::Sweep, now: Instant, quiet: bool) {
        if !sweep.step(self, now, self.tick, quiet) {
            return;
        }
        if let Some(t) = self.accept_retry {
            if now >= t {
                self.accept_retry = None;
                self.arm_accept();
            }
        }
    }

    fn sync_stats(&mut self) {
        sched::sync_stats(&self.pool, &self.shared, &mut self.synced);
    }

    fn run(mut self) {
        let ts = types::Timespec::from(self.tick);
        let batch_bound = Duration::from_micros(u64::from(self.batch.wait_us));
        let ts_sends = types::Timespec::from(SEND_WAIT_BOUND.max(batch_bound).min(self.tick));
        let mut sweep = sched::Sweep::new(Instant::now());
        let stop_deadline = Duration::from_secs(2);
        let mut stop_at: Option<Instant> = None;
        loop {
            // Wait for one completion beyond those of the sends submitted now (see the module
            // docs); with sends in the batch, for at most SEND_WAIT_BOUND. With wake batching,
            // for `k` completions beyond the sends', or the batch bound (see `WakeBatch`).
            let sends = std::mem::take(&mut self.sends_pushed) as usize;
            let args = if sends == 0 {
                types::SubmitArgs::new().timespec(&ts)
            } else {
                types::SubmitArgs::new().timespec(&ts_sends)
            };
            let k = self.batch.k;
            let args = if k > 1 {
                args.min_wait_usec(self.batch.wait_us)
            } else {
                args
            };
            match self
                .ring
                .submitter()
                .submit_with_args(k as usize + sends, &args)
            {
                Ok(_) => {}
                Err(e) => match e.raw_os_error() {
                    Some(libc::ETIME) | Some(libc::EINTR) | Some(libc::EBUSY) => {}
                    _ => {
                        tracing::error!("io_uring_enter failed: {e}; ring thread exits");
                        break;
                    }
                },
            }
            self.cqes.clear();
            for cqe in self.ring.completion() {
                self.cqes.push((cqe.user_data(), cqe.result(), cqe.flags()));
            }
            let mut events = 0u64;
            for i in 0..self.cqes.len() {
                let (u, res, flags) = self.cqes[i];
                let (op, idx, gen, chunk) = ud_parts(u);
                events += u64::from(op == OP_RECV || op == OP_ACCEPT);
                match op {
                    OP_ACCEPT => self.on_accept(res, flags),
                    OP_WAKE => self.on_wake(),
                    OP_RECV => self.on_recv(idx, gen, res, flags),
                    OP_SEND => self.on_send(idx, gen, chunk, res, flags, false),
                    OP_SENDZC => self.on_send(idx, gen, chunk, res, flags, true),
                    OP_SENDMSG => self.on_sendmsg(idx, gen, res),
                    OP_CANCEL => self.on_cancel(idx, gen),
                    _ => {}
                }
            }
            sched::run_dirty(&mut self);
            let now = Instant::now();
            self.batch.record(events, now);
            self.sweep(&mut sweep, now, self.cqes.is_empty());
            self.sync_stats();
            if self.stopping {
                let at = *stop_at.get_or_insert(now + stop_deadline);
                if self.conns.len() == 0 || now >= at {
                    break;
                }
            } else if self.shared.shutdown.load(Ordering::Acquire) {
                self.begin_stop();
            }
        }
        // Connections still waiting for completions past the deadline: close their sockets;
        // dropping the ring cancels what is left before the pool and buffers are unmapped.
        for idx in self.conns.indexes() {
            if let Some(mut c) = self.conns.remove(idx) {
                // SAFETY: our descriptor; the ring (dropped next) holds its own file reference
                // for any request still outstanding.
                unsafe { libc::close(c.fd) };
                self.shared
                    .release(&mut c.slot, &mut self.queues.handshakes);
                self.shared.closed_one();
                self.retired.push(c.msg);
            }
        }
    }
}

impl<S: Session> SchedConn for Conn<S> {
    type Session = S;
    fn gen(&self) -> u16 {
        self.gen
    }
    fn phase(&self) -> Phase {
        match self.state {
            State::Open => Phase::Open,
            State::Flushing(t) | State::Draining(t) => Phase::Lingering(t),
            State::Closing => Phase::Closing,
        }
    }
    fn begin_flush(&mut self, now: Instant) {
        if self.state == State::Open {
            self.state = State::Flushing(now);
        }
    }
    fn quiet(&self) -> bool {
        self.session.is_idle() && self.tx.is_empty() && self.sends_inflight == 0
    }
    fn last_active(&self) -> Instant {
        self.last_active
    }
    fn marks(&mut self) -> &mut Marks {
        &mut self.marks
    }
    fn slot(&mut self) -> &mut Slot {
        &mut self.slot
    }
    fn session_and_tx(&mut self) -> (&mut S, &mut TxQueue) {
        (&mut self.session, &mut self.tx)
    }
}

impl<S: Service> EventLoop for Loop<S> {
    type Conn = Conn<S::Session>;
    fn parts(&mut self) -> (&mut Slab<Self::Conn>, &mut BufferPool, &mut Queues) {
        (&mut self.conns, &mut self.pool, &mut self.queues)
    }
    fn shared(&self) -> &Shared {
        &self.shared
    }
    fn continue_after(&mut self, idx: u32, gen: u16, flow: Flow, starved: Option<Starved>) {
        self.after(idx, gen, flow, starved);
    }
    fn close(&mut self, idx: u32, gen: u16) {
        self.close_now(idx, gen);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(b: &mut WakeBatch, start: Instant, events: u64, conns: u32, ms: u64) -> Instant {
        let mut seen = vec![0u32; conns as usize];
        for s in &mut seen {
            b.saw_conn(s);
            // A second receive on the same connection in the same window counts once.
            b.saw_conn(s);
        }
        let end = start + Duration::from_millis(ms);
        b.record(events, end);
        end
    }

    #[test]
    fn batch_follows_the_rate_within_the_bound() {
        let t0 = Instant::now();
        let mut b = WakeBatch::new(Duration::from_micros(500), t0);
        assert_eq!(b.k, 1);
        // 10,000 receives/s from 10,000 connections: 5 expected within 500 µs.
        let t1 = window(&mut b, t0, 200, 200, 20);
        assert_eq!(b.k, 5);
        // Far more: capped.
        let t2 = window(&mut b, t1, 200_000, 10_000, 20);
        assert_eq!(b.k, MAX_BATCH as u32);
        // Quiet: back to one at once.
        let t3 = window(&mut b, t2, 1, 1, 500);
        assert_eq!(b.k, 1);
        // A window not yet over changes nothing.
        b.record(1_000, t3 + Duration::from_millis(5));
        assert_eq!(b.k, 1);
    }

    #[test]
    fn closed_loop_clients_are_not_held() {
        let t0 = Instant::now();
        let mut b = WakeBatch::new(Duration::from_micros(500), t0);
        // One connection calling back to back, 20,000 calls/s: never more than one in flight.
        let t1 = window(&mut b, t0, 400, 1, 20);
        assert_eq!(b.k, 1);
        // Eight such connections: at most half of them.
        window(&mut b, t1, 3_200, 8, 20);
        assert_eq!(b.k, 4);
    }

    #[test]
    fn off_stays_off() {
        let t0 = Instant::now();
        let mut b = WakeBatch::new(Duration::ZERO, t0);
        window(&mut b, t0, 1_000_000, 10_000, 20);
        assert_eq!(b.k, 1);
    }
}
