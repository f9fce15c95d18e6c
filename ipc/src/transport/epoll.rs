//! The epoll backend: the fallback when io_uring is not usable, behind the same [`Session`]
//! interface.
//!
//! Non-blocking sockets registered edge-triggered (`EPOLLIN|EPOLLOUT|EPOLLRDHUP|EPOLLET`). Each
//! ring thread has its own listening socket on the same address (`SO_REUSEPORT`; see
//! [`super::start`]), registered with `EPOLLEXCLUSIVE` as before. Reads go into one
//! per-thread buffer and straight into the session; at most [`READS_PER_TURN`] reads per
//! connection per turn keep one busy sender from starving the rest; a short read counts as
//! draining the socket (the next arrival is a new edge), unless the peer hung up. Writes are
//! `sendmsg` with an iovec per queued segment (pool chunks, no copy), `MSG_NOSIGNAL`.
//! Backpressure is simply not reading: with edge triggering the loop remembers that the socket
//! may still hold data and reads again when the session wants input.

use std::collections::VecDeque;
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use super::pool::BufferPool;
use super::sched::{self, EventLoop, Marks, Phase, Queues, SchedConn, Slot};
use super::slab::Slab;
use super::tx::{Outbox, Starved, TxQueue};
use super::{Flow, Service, Session, Shared, TransportError};

/// Reads per connection per loop turn.
pub const READS_PER_TURN: usize = 16;
/// Segments per `sendmsg`.
const IOV_MAX_SEGS: usize = 64;

const TOKEN_LISTEN: u64 = u64::MAX;
const TOKEN_WAKE: u64 = u64::MAX - 1;

fn token(idx: u32, gen: u16) -> u64 {
    idx as u64 | (gen as u64) << 32
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Open,
    Flushing(Instant),
    Draining(Instant),
}

struct Conn<S> {
    fd: RawFd,
    gen: u16,
    session: S,
    tx: TxQueue,
    state: State,
    last_active: Instant,
    /// Edge-triggered: the socket may have unread bytes.
    readable: bool,
    /// Edge-triggered: the socket may take more bytes.
    writable: bool,
    /// The peer hung up or the socket has an error (EPOLLRDHUP/HUP/ERR seen): read until
    /// `recv` says so, even after a short read.
    hup: bool,
    read_queued: bool,
    /// Backpressure: the session refused input (counted once per pause).
    paused: bool,
    marks: Marks,
    slot: Slot,
}

struct Loop<S: Service> {
    epfd: RawFd,
    pool: BufferPool,
    conns: Slab<Conn<S::Session>>,
    service: Arc<S>,
    shared: Arc<Shared>,
    listen_fd: RawFd,
    wake_fd: RawFd,
    scratch: Vec<u8>,
    queues: Queues,
    to_read: VecDeque<(u32, u16)>,
    tick: Duration,
    accept_paused_until: Option<Instant>,
    synced: super::PoolStats,
}

impl<S: Service> Drop for Loop<S> {
    fn drop(&mut self) {
        for idx in self.conns.indexes() {
            if let Some(mut c) = self.conns.remove(idx) {
                c.tx.clear(&mut self.pool);
                // SAFETY: our descriptor, closed once.
                unsafe { libc::close(c.fd) };
                self.shared
                    .release(&mut c.slot, &mut self.queues.handshakes);
                self.shared.closed_one();
            }
        }
        // SAFETY: our epoll descriptor, closed once.
        unsafe { libc::close(self.epfd) };
    }
}

/// Runs one epoll thread until shutdown. Reports setup success or failure on `ready` first.
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

fn ctl(epfd: RawFd, op: i32, fd: RawFd, events: u32, data: u64) -> io::Result<()> {
    let mut ev = libc::epoll_event { events, u64: data };
    // SAFETY: `ev` is a live local; epoll_ctl copies it.
    if unsafe { libc::epoll_ctl(epfd, op, fd, &mut ev) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

impl<S: Service> Loop<S> {
    fn new(
        listen_fd: RawFd,
        wake_fd: RawFd,
        service: Arc<S>,
        shared: Arc<Shared>,
    ) -> Result<Self, TransportError> {
        let cfg = &shared.config;
        let pool = BufferPool::new(&cfg.pool)?;
        // SAFETY: no pointers; the result is checked.
        let epfd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if epfd < 0 {
            return Err(TransportError::io(
                "epoll_create1",
                io::Error::last_os_error(),
            ));
        }
        let mut tick = cfg
            .idle_timeout
            .map_or(Duration::from_secs(1), |t| t / 4)
            .min(cfg.linger / 2);
        tick = tick.clamp(Duration::from_millis(10), Duration::from_secs(1));
        let lp = Self {
            epfd,
            pool,
            conns: Slab::new(),
            service,
            shared: shared.clone(),
            listen_fd,
            wake_fd,
            scratch: vec![0u8; cfg.recv_buf_size.max(64 * 1024)],
            queues: Queues::default(),
            to_read: VecDeque::new(),
            tick,
            accept_paused_until: None,
            synced: super::PoolStats::default(),
        };
        ctl(
            epfd,
            libc::EPOLL_CTL_ADD,
            listen_fd,
            (libc::EPOLLIN | libc::EPOLLEXCLUSIVE) as u32,
            TOKEN_LISTEN,
        )
        .map_err(|e| TransportError::io("epoll_ctl(listener)", e))?;
        ctl(
            epfd,
            libc::EPOLL_CTL_ADD,
            wake_fd,
            libc::EPOLLIN as u32,
            TOKEN_WAKE,
        )
        .map_err(|e| TransportError::io("epoll_ctl(eventfd)", e))?;
        Ok(lp)
    }

    fn accept_all(&mut self) {
        if self.accept_paused_until.is_some() {
            return;
        }
        for _ in 0..64 {
            // SAFETY: null address pointers are allowed (we do not want the peer address here).
            let fd = unsafe {
                libc::accept4(
                    self.listen_fd,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                )
            };
            if fd < 0 {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EAGAIN) | Some(libc::EINTR) | Some(libc::ECONNABORTED) => {}
                    _ => {
                        tracing::warn!("accept failed: {e}; pausing accepts for {:?}", self.tick);
                        self.accept_paused_until = Some(Instant::now() + self.tick);
                    }
                }
                return;
            }
            let now = Instant::now();
            let Some(slot) = sched::admit(self, now) else {
                self.shared.add(&self.shared.metrics.refused, 1);
                // SAFETY: a fresh descriptor we own.
                unsafe { libc::close(fd) };
                continue;
            };
            super::set_nodelay(fd);
            let peer = super::peer_addr(fd);
            let session = self.service.open(peer);
            let (idx, gen) = self.conns.insert(|gen| Conn {
                fd,
                gen,
                session,
                tx: TxQueue::new(),
                state: State::Open,
                last_active: now,
                readable: false,
                writable: true,
                hup: false,
                read_queued: false,
                paused: false,
                marks: Marks::default(),
                slot,
            });
            sched::admitted(&mut self.queues, slot, idx, gen);
            let ev = (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET) as u32;
            if let Err(e) = ctl(self.epfd, libc::EPOLL_CTL_ADD, fd, ev, token(idx, gen)) {
                tracing::warn!("epoll_ctl(add connection) failed: {e}");
                self.close_now(idx, gen);
                continue;
            }
            self.shared.add(&self.shared.metrics.accepted, 1);
        }
    }

    fn close_now(&mut self, idx: u32, gen: u16) {
        if self.conns.get_mut(idx, gen).is_none() {
            return;
        }
        let mut c = self.conns.remove(idx).expect("conn");
        c.tx.clear(&mut self.pool);
        // SAFETY: our descriptor, closed once (close also removes it from the epoll set).
        unsafe { libc::close(c.fd) };
        self.shared
            .release(&mut c.slot, &mut self.queues.handshakes);
        self.shared.closed_one();
    }

    fn mark_dirty(&mut self, idx: u32, gen: u16) {
        self.queues.mark_dirty(&mut self.conns, idx, gen);
    }

    fn queue_read(&mut self, idx: u32, gen: u16) {
        if let Some(c) = self.conns.get_mut(idx, gen) {
            if !c.read_queued {
                c.read_queued = true;
                self.to_read.push_back((idx, gen));
            }
        }
    }

    /// Sends queued segments until the socket is full or the queue is empty. Returns false if
    /// the connection was closed.
    fn write_out(&mut self, idx: u32, gen: u16) -> bool {
        let Some(c) = self.conns.get_mut(idx, gen) else {
            return false;
        };
        let mut progressed = false;
        while c.writable && c.tx.segments() > 0 {
            let mut iov = [libc::iovec {
                iov_base: std::ptr::null_mut(),
                iov_len: 0,
            }; IOV_MAX_SEGS];
            let mut cnt = 0;
            while cnt < IOV_MAX_SEGS {
                let Some(seg) = c.tx.segment(cnt) else { break };
                let bytes = self
                    .pool
                    .slice(seg.chunk, seg.start as usize, seg.end as usize);
                iov[cnt] = libc::iovec {
                    iov_base: bytes.as_ptr() as *mut libc::c_void,
                    iov_len: bytes.len(),
                };
                cnt += 1;
            }
            // SAFETY: zeroed msghdr is a valid "no address, no control" header.
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            msg.msg_iov = iov.as_mut_ptr();
            msg.msg_iovlen = cnt as _;
            // SAFETY: the iovecs point into pool chunks held by the queue's references; they
            // stay valid for the duration of this synchronous call.
            let n = unsafe { libc::sendmsg(c.fd, &msg, libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT) };
            if n < 0 {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EAGAIN) => c.writable = false,
                    Some(libc::EINTR) => continue,
                    _ => {
                        self.close_now(idx, gen);
                        return false;
                    }
                }
                break;
            }
            let mut n = n as usize;
            self.shared.add(&self.shared.metrics.bytes_out, n as u64);
            self.shared.add(&self.shared.metrics.sends, 1);
            c.last_active = Instant::now();
            progressed = true;
            while n > 0 {
                let seg = c.tx.front().expect("sent bytes belong to queued segments");
                let k = n.min(seg.len());
                c.tx.complete_front(&mut self.pool, k);
                n -= k;
            }
        }
        if progressed {
            self.mark_dirty(idx, gen);
        }
        true
    }

    fn read_some(&mut self, idx: u32, gen: u16) {
        for _ in 0..READS_PER_TURN {
            let Some(c) = self.conns.get_mut(idx, gen) else {
                return;
            };
            let reading = match c.state {
                State::Open => c.session.wants_input(),
                State::Flushing(_) | State::Draining(_) => true,
            };
            if !c.readable || !reading {
                return;
            }
            // SAFETY: reads into our scratch buffer, within its length.
            let n = unsafe {
                libc::recv(
                    c.fd,
                    self.scratch.as_mut_ptr().cast(),
                    self.scratch.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EAGAIN) => c.readable = false,
                    Some(libc::EINTR) => continue,
                    _ => self.close_now(idx, gen),
                }
                return;
            }
            if n == 0 {
                return self.close_now(idx, gen);
            }
            let n = n as usize;
            if n < self.scratch.len() && !c.hup {
                // A short read emptied the receive queue. Edge-triggered epoll reports every
                // later arrival as a new event, so a second recv only to see EAGAIN (one
                // syscall per request) is not needed. A hang-up or error may sit behind the
                // data, so after one of those we read on until recv reports it.
                c.readable = false;
            }
            c.last_active = Instant::now();
            self.shared.add(&self.shared.metrics.bytes_in, n as u64);
            if c.state != State::Open {
                continue; // draining after a FATAL: discard
            }
            let mut ob = Outbox::new(&mut self.pool, &mut c.tx);
            let flow = c.session.on_recv(&self.scratch[..n], &mut ob);
            let starved = ob.starved();
            self.after(idx, gen, flow, starved);
        }
        // Still readable after a full turn: continue next turn.
        if let Some(c) = self.conns.get_mut(idx, gen) {
            if c.readable {
                self.queue_read(idx, gen);
            }
        }
    }

    fn after(&mut self, idx: u32, gen: u16, flow: Flow, starved: Option<Starved>) {
        let now = Instant::now();
        if !sched::apply_flow(self, idx, gen, flow, starved, now) {
            return;
        }
        if !self.write_out(idx, gen) {
            return;
        }
        let Some(c) = self.conns.get_mut(idx, gen) else {
            return;
        };
        let drained = c.tx.is_empty();
        if drained {
            c.tx.release_idle(&mut self.pool);
        }
        match c.state {
            State::Open => {
                let wants = c.session.wants_input();
                if !wants && !c.paused {
                    c.paused = true;
                    self.shared.add(&self.shared.metrics.backpressure_pauses, 1);
                } else if wants {
                    c.paused = false;
                    if c.readable {
                        self.queue_read(idx, gen);
                    }
                }
            }
            State::Flushing(_) => {
                if drained {
                    // SAFETY: plain syscall on our descriptor.
                    unsafe { libc::shutdown(c.fd, libc::SHUT_WR) };
                    c.state = State::Draining(now);
                }
                if c.readable {
                    self.queue_read(idx, gen);
                }
            }
            State::Draining(_) => {
                if c.readable {
                    self.queue_read(idx, gen);
                }
            }
        }
    }

    /// The idle/linger sweep (a slice per turn, see [`sched::Sweep`]) and, once per tick, the
    /// paused accept's retry.
    fn sweep(&mut self, sweep: &mut sched::Sweep, now: Instant, quiet: bool) {
        if !sweep.step(self, now, self.tick, quiet) {
            return;
        }
        if self.accept_paused_until.is_some_and(|t| now >= t) {
            self.accept_paused_until = None;
            self.accept_all();
        }
    }

    fn sync_stats(&mut self) {
        sched::sync_stats(&self.pool, &self.shared, &mut self.synced);
    }

    fn run(mut self) {
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 256];
        let mut sweep = sched::Sweep::new(Instant::now());
        loop {
            let timeout = if self.to_read.is_empty() && !self.queues.has_dirty() {
                self.tick.as_millis() as i32
            } else {
                0
            };
            // SAFETY: `events` is a live buffer of the length passed.
            let n = unsafe {
                libc::epoll_wait(self.epfd, events.as_mut_ptr(), events.len() as i32, timeout)
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::EINTR) {
                    tracing::error!("epoll_wait failed: {e}; ring thread exits");
                    return;
                }
            }
            for ev in events.iter().take(n.max(0) as usize) {
                let (flags, tok) = (ev.events, ev.u64);
                match tok {
                    TOKEN_LISTEN => self.accept_all(),
                    TOKEN_WAKE => {
                        let mut v = 0u64;
                        // SAFETY: reads 8 bytes into a live local from our eventfd.
                        unsafe { libc::read(self.wake_fd, (&mut v as *mut u64).cast(), 8) };
                    }
                    t => {
                        let (idx, gen) = (t as u32, (t >> 32) as u16);
                        let Some(c) = self.conns.get_mut(idx, gen) else {
                            continue;
                        };
                        if flags & (libc::EPOLLOUT as u32) != 0 {
                            c.writable = true;
                        }
                        if flags
                            & (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLHUP | libc::EPOLLERR)
                                as u32
                            != 0
                        {
                            c.readable = true;
                        }
                        if flags & (libc::EPOLLRDHUP | libc::EPOLLHUP | libc::EPOLLERR) as u32 != 0
                        {
                            c.hup = true;
                        }
                        if flags & (libc::EPOLLOUT as u32) != 0 && !self.write_out(idx, gen) {
                            continue;
                        }
                        self.queue_read(idx, gen);
                    }
                }
            }
            // Reads queued by events or by sessions that want input again.
            let pending = self.to_read.len();
            for _ in 0..pending {
                let Some((idx, gen)) = self.to_read.pop_front() else {
                    break;
                };
                if let Some(c) = self.conns.get_mut(idx, gen) {
                    c.read_queued = false;
                    self.read_some(idx, gen);
                }
            }
            sched::run_dirty(&mut self);
            let now = Instant::now();
            self.sweep(&mut sweep, now, n <= 0);
            self.sync_stats();
            if self.shared.shutdown.load(Ordering::Acquire) {
                return;
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
        }
    }
    fn begin_flush(&mut self, now: Instant) {
        if self.state == State::Open {
            self.state = State::Flushing(now);
        }
    }
    fn quiet(&self) -> bool {
        self.session.is_idle() && self.tx.is_empty()
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
