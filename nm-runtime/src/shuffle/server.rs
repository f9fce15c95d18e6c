//! The shuffle service's listener and event loops.
//!
//! One listening socket on the wildcard address (Java binds `new InetSocketAddress(port)`),
//! shared by [`ShuffleConfig::loop_threads`] event loops (`hp-shuffle-<n>`), each an epoll set
//! (level-triggered; the listener added with `EPOLLEXCLUSIVE`, so an arrival wakes one loop).
//! A connection stays on the loop that accepted it and is in one of two phases:
//!
//! - **reading** its request head (at most [`MAX_REQUEST`] bytes, kept per connection only
//!   until the head is complete; it must arrive within the configured request timeout, Java
//!   has none), then answered: an error at once, or the 200 head and the map outputs;
//! - **writing** the answer: the HTTP head and each map's `ShuffleHeader` with `send(2)`
//!   (`MSG_MORE`, so a header rides with its segment's first bytes), each segment straight
//!   from the page cache with `sendfile(2)` (no copy through user space), at most
//!   `turn_bytes` per connection per loop turn so that one large partition does not hold up
//!   the loop's other fetches. A peer that reads nothing for [`WRITE_STALL`] is dropped.
//!
//! After the answer the connection closes (Java's default), or with keep-alive (configured,
//! or `keepAlive=true` in the request) waits up to the keep-alive timeout for the next one.
//! Every map output is checked (index read, data file opened, lengths within the file) before
//! the 200 is sent: one missing output fails the whole request with 500, as in 3.5.0.
//! Data files stay open between fetches (one per map output, at most the `max_open` bound,
//! oldest closed first, a job's closed when its application stops): a map output is fetched
//! once per reducer, and the path walk, `open`, `fstat` and `close` were most of a small
//! fetch's system time.
//!
//! Bounds: `mapreduce.shuffle.max.connections` open connections (Java's 429 with
//! `Retry-After: 1000` on accept beyond it, which the Fetcher retries without counting a
//! failure), and the agent's own `max_open`: a loop at its share evicts the connection that
//! has waited longest without a complete request, or answers 429 when all are transferring.
//!
//! With `mapreduce.shuffle.ssl.enabled` every connection is a rustls server session: the
//! handshake and the request are read through it, and the answer is encrypted in pieces of
//! `mapreduce.shuffle.ssl.file.buffer.size` read from the map output with `pread` (no
//! `sendfile` under TLS, as in Java), each piece handed to rustls only once the previous
//! one's records are on the socket, so a connection holds at most one piece. Over the
//! connection limits a TLS connection is closed without the plaintext 429.
//!
//! The socket calls go through `rustix` (epoll, `send`, `sendfile`, `posix_fadvise`): no
//! `unsafe` here.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::num::NonZeroU64;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustix::event::epoll;
use rustix::fs::{fadvise, Advice};
use rustix::net::{send, SendFlags};

use super::config::ShuffleConfig;
use super::hash::HmacAlgorithm;
use super::index::{
    is_map_attempt_id, relative_path, write_shuffle_header, DataFile, IndexCache, MapOutputError,
};
use super::jobs::Jobs;
use super::request::{
    authenticate, check, error_response, parse_head, too_many_response, Cause, Parse, MAX_REQUEST,
};
use super::ShuffleError;
use crate::metrics::ShuffleMetrics;

/// A peer that takes no bytes for this long is dropped (the Fetcher's own read timeout).
pub const WRITE_STALL: Duration = Duration::from_secs(180);
/// How often a loop wakes to check deadlines and the stop flag.
const TICK: Duration = Duration::from_millis(100);
/// Connections accepted per wake-up: one, so that connections arriving together spread over
/// the loops (the listener stays readable and wakes another loop for the next) instead of
/// all landing on the first loop that woke.
const ACCEPTS_PER_TURN: usize = 1;
const LISTENER: u64 = u64::MAX;
/// Segments below this size get no `POSIX_FADV_WILLNEED` (one syscall saved per small map).
const SMALL_SEGMENT: u64 = 256 << 10;

/// What the loops share.
struct Ctx {
    cfg: ShuffleConfig,
    port: u16,
    dirs: Vec<PathBuf>,
    jobs: Jobs,
    cache: Arc<IndexCache>,
    metrics: Arc<ShuffleMetrics>,
    /// Java's `activeConnections`: every open connection, counted from accept.
    active: AtomicUsize,
    stop: AtomicBool,
}

/// The running service.
pub struct ShuffleServer {
    port: u16,
    ctx: Arc<Ctx>,
    threads: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for ShuffleServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShuffleServer")
            .field("port", &self.port)
            .field("threads", &self.threads.len())
            .finish()
    }
}

fn bind(port: u16, backlog: u32) -> io::Result<TcpListener> {
    use socket2::{Domain, Socket, Type};
    let s = Socket::new(Domain::IPV4, Type::STREAM.cloexec(), None)?;
    // As Java's server sockets: a restarted agent rebinds its fixed port at once.
    s.set_reuse_address(true)?;
    s.bind(&SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port).into())?;
    s.listen(i32::try_from(backlog).unwrap_or(i32::MAX))?;
    s.set_nonblocking(true)?;
    Ok(s.into())
}

impl ShuffleServer {
    /// Binds `cfg.port` on every address and starts the loops. `local_dirs` are
    /// `yarn.nodemanager.local-dirs` (where map outputs are searched), `jobs` the registry the
    /// container starts fill.
    pub fn start(
        cfg: ShuffleConfig,
        local_dirs: Vec<PathBuf>,
        jobs: Jobs,
        metrics: Arc<ShuffleMetrics>,
    ) -> Result<ShuffleServer, ShuffleError> {
        let listener = bind(cfg.port, cfg.listen_queue).map_err(|source| ShuffleError::Bind {
            port: cfg.port,
            source,
        })?;
        let port = listener
            .local_addr()
            .map_err(|source| ShuffleError::Bind {
                port: cfg.port,
                source,
            })?
            .port();
        let threads = cfg.loop_threads();
        // Open data files: as many as the connections bound (the descriptors an operator
        // already provides for).
        let cache = Arc::new(IndexCache::new(cfg.index_cache_bytes, cfg.max_open));
        jobs.attach_cache(cache.clone());
        let ctx = Arc::new(Ctx {
            cache,
            cfg,
            port,
            dirs: local_dirs,
            jobs,
            metrics,
            active: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
        });
        let listener = Arc::new(listener);
        let mut handles = Vec::with_capacity(threads);
        let per_loop = ctx.cfg.max_open.div_ceil(threads).max(1);
        for n in 0..threads {
            let (ctx, listener) = (ctx.clone(), listener.clone());
            let ep = epoll::create(epoll::CreateFlags::CLOEXEC)
                .and_then(|ep| {
                    epoll::add(
                        &ep,
                        &*listener,
                        epoll::EventData::new_u64(LISTENER),
                        epoll::EventFlags::IN | epoll::EventFlags::EXCLUSIVE,
                    )?;
                    Ok(ep)
                })
                .map_err(|e| ShuffleError::Bind {
                    port,
                    source: e.into(),
                })?;
            let h = std::thread::Builder::new()
                .name(format!("hp-shuffle-{n}"))
                .spawn(move || {
                    Loop {
                        ctx: &ctx,
                        ep,
                        listener: &listener,
                        conns: Vec::new(),
                        free: Vec::new(),
                        open: 0,
                        max_open: per_loop,
                        scratch: vec![0u8; 16 << 10],
                        tls_buf: if ctx.cfg.tls.is_some() {
                            vec![0u8; ctx.cfg.ssl_chunk]
                        } else {
                            Vec::new()
                        },
                    }
                    .run()
                })
                .map_err(|source| ShuffleError::Bind { port, source })?;
            handles.push(h);
        }
        tracing::info!("mapreduce_shuffle listening on port {port} ({threads} loops)");
        Ok(ShuffleServer {
            port,
            ctx,
            threads: handles,
        })
    }

    /// The bound port (what `services_meta_data` carries).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The registry of served jobs.
    pub fn jobs(&self) -> &Jobs {
        &self.ctx.jobs
    }

    /// Bytes in the index cache now.
    pub fn index_cache_bytes(&self) -> usize {
        self.ctx.cache.bytes()
    }

    /// Stops the loops and closes every connection and the listener.
    pub fn shutdown(mut self) {
        self.stop_threads();
    }

    fn stop_threads(&mut self) {
        self.ctx.stop.store(true, Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for ShuffleServer {
    fn drop(&mut self) {
        self.stop_threads();
    }
}

/// One part of an answer still to send.
enum Part {
    Bytes(Vec<u8>, usize),
    File {
        file: Arc<DataFile>,
        start: u64,
        off: u64,
        end: u64,
    },
}

/// Counted when an answer's last byte is out.
struct Fetched {
    maps: u64,
    bytes: u64,
}

struct Conn {
    sock: TcpStream,
    gen: u32,
    buf: Vec<u8>,
    out: VecDeque<Part>,
    writing: bool,
    /// After the answer: wait for another request.
    keep_alive: bool,
    /// Reading: the request must be complete by then. Writing: the last progress + WRITE_STALL.
    deadline: Instant,
    /// Reading since (for eviction: the longest waiting goes first).
    since: Instant,
    fetched: Option<Fetched>,
    /// The TLS session (`mapreduce.shuffle.ssl.enabled`).
    tls: Option<Box<rustls::ServerConnection>>,
    /// Reading, TLS: the socket is also watched for room (handshake records wait to go out).
    tls_out: bool,
}

struct Loop<'a> {
    ctx: &'a Ctx,
    ep: std::os::fd::OwnedFd,
    listener: &'a TcpListener,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    open: usize,
    max_open: usize,
    scratch: Vec<u8>,
    /// TLS: one piece of a map output, read before it is encrypted.
    tls_buf: Vec<u8>,
}

fn token(idx: usize, gen: u32) -> u64 {
    idx as u64 | u64::from(gen) << 32
}

enum Step {
    Keep,
    Close,
    /// Closed for a failure `/metrics` counts.
    Abort,
}

impl Loop<'_> {
    fn run(mut self) {
        let mut events: Vec<epoll::Event> = Vec::with_capacity(256);
        let mut next_sweep = Instant::now() + TICK;
        let tick = rustix::event::Timespec {
            tv_sec: 0,
            tv_nsec: TICK.as_nanos() as _,
        };
        while !self.ctx.stop.load(Relaxed) {
            events.clear();
            match epoll::wait(
                &self.ep,
                rustix::buffer::spare_capacity(&mut events),
                Some(&tick),
            ) {
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => {
                    tracing::error!("mapreduce_shuffle: epoll_wait: {e}; this loop stops");
                    break;
                }
            }
            for ev in &events {
                let t = ev.data.u64();
                if t == LISTENER {
                    self.accept();
                    continue;
                }
                let (idx, gen) = ((t & 0xffff_ffff) as usize, (t >> 32) as u32);
                let live = matches!(self.conns.get(idx), Some(Some(c)) if c.gen == gen);
                if !live {
                    continue;
                }
                let step = self.on_event(idx, ev.flags);
                self.after(idx, step);
            }
            let now = Instant::now();
            if now >= next_sweep {
                next_sweep = now + TICK;
                self.sweep(now);
            }
        }
        for idx in 0..self.conns.len() {
            if self.conns[idx].is_some() {
                self.close(idx);
            }
        }
    }

    fn accept(&mut self) {
        for _ in 0..ACCEPTS_PER_TURN {
            let sock = match self.listener.accept() {
                Ok((s, _)) => s,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) => {
                    // EMFILE and the like: leave the rest in the backlog for the next turn.
                    tracing::warn!("mapreduce_shuffle: accept: {e}");
                    return;
                }
            };
            let m = &self.ctx.metrics;
            m.connections.fetch_add(1, Relaxed);
            let active = self.ctx.active.fetch_add(1, Relaxed) + 1;
            let max = self.ctx.cfg.max_connections;
            let over_java = max > 0 && active > max;
            let room = over_java || self.open < self.max_open || self.evict_idle();
            if over_java || !room {
                // Java's answer on connect: 429, Retry-After 1000 ms, close (under TLS: close).
                m.too_many.fetch_add(1, Relaxed);
                let _ = sock.set_nonblocking(true);
                if self.ctx.cfg.tls.is_none() {
                    let _ = send(&sock, &too_many_response(), SendFlags::NOSIGNAL);
                }
                self.ctx.active.fetch_sub(1, Relaxed);
                continue;
            }
            if sock.set_nonblocking(true).is_err() {
                self.ctx.active.fetch_sub(1, Relaxed);
                continue;
            }
            let _ = sock.set_nodelay(true);
            let tls = match &self.ctx.cfg.tls {
                Some(cfg) => match rustls::ServerConnection::new(cfg.clone()) {
                    Ok(mut t) => {
                        // Bounded by feeding one piece at a time instead (see `send_tls`).
                        t.set_buffer_limit(None);
                        Some(Box::new(t))
                    }
                    Err(e) => {
                        tracing::warn!("mapreduce_shuffle: TLS session: {e}");
                        self.ctx.active.fetch_sub(1, Relaxed);
                        continue;
                    }
                },
                None => None,
            };
            let idx = match self.free.pop() {
                Some(i) => i,
                None => {
                    self.conns.push(None);
                    self.conns.len() - 1
                }
            };
            let gen =
                (idx as u64).wrapping_mul(0x9e37_79b9) as u32 ^ m.connections.load(Relaxed) as u32;
            let now = Instant::now();
            if epoll::add(
                &self.ep,
                &sock,
                epoll::EventData::new_u64(token(idx, gen)),
                epoll::EventFlags::IN | epoll::EventFlags::RDHUP,
            )
            .is_err()
            {
                self.free.push(idx);
                self.ctx.active.fetch_sub(1, Relaxed);
                continue;
            }
            self.conns[idx] = Some(Conn {
                sock,
                gen,
                buf: Vec::new(),
                out: VecDeque::new(),
                writing: false,
                keep_alive: false,
                deadline: now + self.ctx.cfg.request_timeout,
                since: now,
                fetched: None,
                tls,
                tls_out: false,
            });
            self.open += 1;
            m.open.fetch_add(1, Relaxed);
        }
    }

    /// Closes the connection that has waited longest for its request; false if every one is
    /// transferring.
    fn evict_idle(&mut self) -> bool {
        let victim = self
            .conns
            .iter()
            .enumerate()
            .filter_map(|(i, c)| c.as_ref().filter(|c| !c.writing).map(|c| (i, c.since)))
            .min_by_key(|(_, since)| *since)
            .map(|(i, _)| i);
        match victim {
            Some(i) => {
                self.ctx.metrics.evicted.fetch_add(1, Relaxed);
                self.close(i);
                true
            }
            None => false,
        }
    }

    fn sweep(&mut self, now: Instant) {
        for idx in 0..self.conns.len() {
            let expired = matches!(&self.conns[idx], Some(c) if now >= c.deadline);
            if expired {
                self.ctx.metrics.timeouts.fetch_add(1, Relaxed);
                self.close(idx);
            }
        }
    }

    fn close(&mut self, idx: usize) {
        if let Some(c) = self.conns[idx].take() {
            let _ = epoll::delete(&self.ep, &c.sock);
            drop(c);
            self.free.push(idx);
            self.open -= 1;
            self.ctx.active.fetch_sub(1, Relaxed);
            self.ctx.metrics.open.fetch_sub(1, Relaxed);
        }
    }

    fn after(&mut self, idx: usize, step: Step) {
        match step {
            Step::Keep => {}
            Step::Close => self.close(idx),
            Step::Abort => {
                self.ctx.metrics.aborted.fetch_add(1, Relaxed);
                self.close(idx);
            }
        }
    }

    fn on_event(&mut self, idx: usize, flags: epoll::EventFlags) -> Step {
        let writing = self.conns[idx].as_ref().is_some_and(|c| c.writing);
        if writing {
            if flags.intersects(epoll::EventFlags::ERR) {
                return Step::Abort;
            }
            return self.pump(idx);
        }
        if self.conns[idx].as_ref().is_some_and(|c| c.tls.is_some()) {
            return self.read_tls(idx);
        }
        self.read(idx)
    }

    /// TLS, reading: records in, handshake records out, the request's plaintext gathered.
    fn read_tls(&mut self, idx: usize) -> Step {
        let Some(c) = self.conns[idx].as_mut() else {
            return Step::Close;
        };
        let Some(tls) = c.tls.as_deref_mut() else {
            return Step::Close;
        };
        let mut eof = false;
        loop {
            match tls.read_tls(&mut c.sock) {
                Ok(0) => {
                    eof = true;
                    break;
                }
                Ok(_) => {
                    if tls.process_new_packets().is_err() {
                        // the alert, if the socket takes it
                        let _ = tls_flush(tls, &mut c.sock);
                        return Step::Close;
                    }
                    match tls_plaintext(tls, &mut c.buf, &mut self.scratch) {
                        Ok(closed) => eof |= closed,
                        Err(()) => return Step::Close,
                    }
                    if eof || c.buf.len() >= MAX_REQUEST {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Step::Close,
            }
        }
        let all_out = match tls_flush(tls, &mut c.sock) {
            Ok((all, _)) => all,
            Err(_) => return Step::Close,
        };
        if all_out == c.tls_out {
            // watch for room while records wait, stop once they are out
            c.tls_out = !all_out;
            let mut flags = epoll::EventFlags::IN | epoll::EventFlags::RDHUP;
            if c.tls_out {
                flags |= epoll::EventFlags::OUT;
            }
            if epoll::modify(
                &self.ep,
                &c.sock,
                epoll::EventData::new_u64(token(idx, c.gen)),
                flags,
            )
            .is_err()
            {
                return Step::Close;
            }
        }
        if eof {
            if !matches!(parse_head(&c.buf), Parse::Done(_)) {
                return Step::Close;
            }
            c.keep_alive = false;
        }
        self.answer_buffered(idx, eof)
    }

    /// Reads what the socket has; answers once the head is complete.
    fn read(&mut self, idx: usize) -> Step {
        let Some(c) = self.conns[idx].as_mut() else {
            return Step::Close;
        };
        let mut eof = false;
        while c.buf.len() < MAX_REQUEST {
            let room = (MAX_REQUEST - c.buf.len()).min(self.scratch.len());
            match c.sock.read(&mut self.scratch[..room]) {
                Ok(0) => {
                    eof = true;
                    break;
                }
                Ok(n) => {
                    c.buf.extend_from_slice(&self.scratch[..n]);
                    if n < room {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return Step::Close,
            }
        }
        if eof {
            // A half-closed peer: answer a complete request, then close.
            if !matches!(parse_head(&c.buf), Parse::Done(_)) {
                return Step::Close;
            }
            c.keep_alive = false;
        }
        self.answer_buffered(idx, eof)
    }

    /// Answers the request at the start of the connection's buffer, if complete.
    fn answer_buffered(&mut self, idx: usize, eof: bool) -> Step {
        let ctx = self.ctx;
        let Some(c) = self.conns[idx].as_mut() else {
            return Step::Close;
        };
        let (answer, used) = match parse_head(&c.buf) {
            Parse::Partial if c.buf.len() < MAX_REQUEST => return Step::Keep,
            Parse::Partial | Parse::Bad => {
                // Netty's TooLongFrameException or a malformed head: 400, empty.
                count_failure(&ctx.metrics, Cause::BadRequest);
                (Answer::error(400, ""), c.buf.len())
            }
            Parse::Done(head) => (respond(ctx, &head), head.len),
        };
        c.buf.drain(..used.min(c.buf.len()));
        if c.buf.is_empty() && c.buf.capacity() > 4096 {
            c.buf = Vec::new();
        }
        c.out = answer.out;
        c.keep_alive = answer.keep_alive && !eof;
        c.fetched = answer.fetched;
        c.writing = true;
        c.deadline = Instant::now() + WRITE_STALL;
        if epoll::modify(
            &self.ep,
            &c.sock,
            epoll::EventData::new_u64(token(idx, c.gen)),
            // Not RDHUP: a peer that half-closed after its request still reads, and a
            // level-triggered RDHUP would spin the loop while its socket is full.
            epoll::EventFlags::OUT,
        )
        .is_err()
        {
            return Step::Abort;
        }
        self.pump(idx)
    }

    /// Sends what the socket takes, up to the turn's budget; then closes, or waits for the
    /// next request with keep-alive.
    fn pump(&mut self, idx: usize) -> Step {
        let ctx = self.ctx;
        let tls = self.conns[idx].as_ref().is_some_and(|c| c.tls.is_some());
        let done = match if tls {
            self.send_tls(idx)
        } else {
            self.send_plain(idx)
        } {
            Ok(done) => done,
            Err(step) => return step,
        };
        let Some(c) = self.conns[idx].as_mut() else {
            return Step::Close;
        };
        if !done {
            // Level-triggered: a socket with room (budget spent) comes back next turn.
            return Step::Keep;
        }
        if let Some(f) = c.fetched.take() {
            let m = &ctx.metrics;
            m.fetches.fetch_add(1, Relaxed);
            m.maps.fetch_add(f.maps, Relaxed);
            m.bytes.fetch_add(f.bytes, Relaxed);
        }
        if !c.keep_alive {
            if let Some(tls) = c.tls.as_deref_mut() {
                tls.send_close_notify();
                let _ = tls_flush(tls, &mut c.sock);
            }
            let _ = c.sock.shutdown(std::net::Shutdown::Write);
            return Step::Close;
        }
        // Keep-alive: wait for the next request (or answer one already buffered).
        c.writing = false;
        c.tls_out = false;
        let now = Instant::now();
        c.since = now;
        c.deadline = now + ctx.cfg.keep_alive_timeout;
        if epoll::modify(
            &self.ep,
            &c.sock,
            epoll::EventData::new_u64(token(idx, c.gen)),
            epoll::EventFlags::IN | epoll::EventFlags::RDHUP,
        )
        .is_err()
        {
            return Step::Close;
        }
        if c.buf.is_empty() {
            Step::Keep
        } else {
            self.answer_buffered(idx, false)
        }
    }

    /// Plain HTTP: header bytes with `send`, segments with `sendfile`, up to the turn's
    /// budget. `Ok(true)` once the whole answer is out.
    fn send_plain(&mut self, idx: usize) -> Result<bool, Step> {
        let ctx = self.ctx;
        let Some(c) = self.conns[idx].as_mut() else {
            return Err(Step::Close);
        };
        let mut budget = ctx.cfg.turn_bytes;
        let mut progressed = false;
        while budget > 0 {
            let more = c.out.len() > 1;
            let Some(part) = c.out.front_mut() else { break };
            match part {
                Part::Bytes(b, pos) => {
                    let flags = if more {
                        SendFlags::NOSIGNAL | SendFlags::MORE
                    } else {
                        SendFlags::NOSIGNAL
                    };
                    match send(&c.sock, &b[*pos..], flags) {
                        Ok(n) => {
                            *pos += n;
                            budget = budget.saturating_sub(n as u64);
                            progressed |= n > 0;
                            if *pos == b.len() {
                                c.out.pop_front();
                            }
                        }
                        Err(rustix::io::Errno::AGAIN) => break,
                        Err(rustix::io::Errno::INTR) => {}
                        Err(_) => return Err(Step::Abort),
                    }
                }
                Part::File {
                    file,
                    start,
                    off,
                    end,
                } => {
                    let want = (*end - *off).min(budget).min(1 << 30) as usize;
                    match rustix::fs::sendfile(&c.sock, &file.file, Some(off), want) {
                        Ok(0) => return Err(Step::Abort), // the file shrank under us
                        Ok(n) => {
                            budget = budget.saturating_sub(n as u64);
                            progressed = true;
                            if *off >= *end {
                                if ctx.cfg.manage_os_cache {
                                    let _ = fadvise(
                                        &file.file,
                                        *start,
                                        NonZeroU64::new(*end - *start),
                                        Advice::DontNeed,
                                    );
                                }
                                c.out.pop_front();
                            }
                        }
                        Err(rustix::io::Errno::AGAIN) => break,
                        Err(rustix::io::Errno::INTR) => {}
                        Err(_) => return Err(Step::Abort),
                    }
                }
            }
        }
        if progressed {
            c.deadline = Instant::now() + WRITE_STALL;
        }
        Ok(c.out.is_empty())
    }

    /// TLS: each part through the session, a file's bytes in pieces read with `pread`, a piece
    /// handed over only once the session's records are all on the socket.
    fn send_tls(&mut self, idx: usize) -> Result<bool, Step> {
        let ctx = self.ctx;
        let Some(c) = self.conns[idx].as_mut() else {
            return Err(Step::Close);
        };
        let Some(tls) = c.tls.as_deref_mut() else {
            return Err(Step::Close);
        };
        let mut budget = ctx.cfg.turn_bytes;
        let mut progressed = false;
        loop {
            let (all, n) = tls_flush(tls, &mut c.sock).map_err(|_| Step::Abort)?;
            progressed |= n > 0;
            budget = budget.saturating_sub(n);
            if !all || budget == 0 {
                break;
            }
            let Some(part) = c.out.front_mut() else { break };
            match part {
                Part::Bytes(b, pos) => {
                    let n = tls.writer().write(&b[*pos..]).map_err(|_| Step::Abort)?;
                    *pos += n;
                    if *pos == b.len() {
                        c.out.pop_front();
                    }
                }
                Part::File {
                    file,
                    start,
                    off,
                    end,
                } => {
                    let want = (*end - *off).min(self.tls_buf.len() as u64) as usize;
                    let n = match file.file.read_at(&mut self.tls_buf[..want], *off) {
                        Ok(0) => return Err(Step::Abort), // the file shrank under us
                        Ok(n) => n,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        Err(_) => return Err(Step::Abort),
                    };
                    tls.writer()
                        .write_all(&self.tls_buf[..n])
                        .map_err(|_| Step::Abort)?;
                    *off += n as u64;
                    if *off >= *end {
                        if ctx.cfg.manage_os_cache {
                            let _ = fadvise(
                                &file.file,
                                *start,
                                NonZeroU64::new(*end - *start),
                                Advice::DontNeed,
                            );
                        }
                        c.out.pop_front();
                    }
                }
            }
        }
        if progressed {
            c.deadline = Instant::now() + WRITE_STALL;
        }
        Ok(c.out.is_empty() && !tls.wants_write())
    }
}

/// An answer to one request.
struct Answer {
    out: VecDeque<Part>,
    keep_alive: bool,
    fetched: Option<Fetched>,
}

impl Answer {
    fn error(status: u16, body: &str) -> Answer {
        Answer {
            out: VecDeque::from([Part::Bytes(error_response(status, body), 0)]),
            keep_alive: false,
            fetched: None,
        }
    }
}

/// One map output checked and opened, ready to send.
struct Segment {
    header: Vec<u8>,
    file: Arc<DataFile>,
    start: u64,
    len: u64,
}

/// Java's processing of one request (see [`super::request`]): an error answer, or the 200
/// head and every map output's header and segment.
fn respond(ctx: &Ctx, head: &super::request::Head<'_>) -> Answer {
    let m = &ctx.metrics;
    let fetch = match check(head) {
        Ok(f) => f,
        Err(r) => {
            count_failure(m, r.cause);
            return Answer::error(r.status, &r.body);
        }
    };
    let job = ctx.jobs.get(&fetch.job);
    let has_hash = head.header("UrlHash").is_some();
    let alg: HmacAlgorithm = ctx.cfg.hmac;
    if let Err(r) = authenticate(
        &fetch,
        job.as_deref().map(|j| j.secret.as_slice()),
        has_hash,
        |s| alg.verify(s, ctx.port, fetch.path, fetch.query, fetch.url_hash),
    ) {
        count_failure(m, r.cause);
        return Answer::error(r.status, &r.body);
    }
    let Some(job) = job else {
        return Answer::error(500, "");
    };
    let app = job.app.to_string();
    let mut segments = Vec::with_capacity(fetch.maps.len());
    for map in &fetch.maps {
        match map_output(ctx, &fetch.job, &job.user, &app, map, fetch.reduce) {
            Ok(s) => segments.push(s),
            Err(MapOutputError(body)) => {
                count_failure(m, Cause::MapOutput);
                return Answer::error(500, &body);
            }
        }
    }
    let keep_alive =
        (ctx.cfg.keep_alive || fetch.keep_alive_param) && !head.wants_close() && !head.has_body();
    let content_length: u64 = segments.iter().map(|s| s.header.len() as u64 + s.len).sum();
    let mut first = format!(
        "HTTP/1.1 200 OK\r\nReplyHash: {}\r\nname: mapreduce\r\nversion: 1.0.0\r\n",
        alg.reply_hash(&job.secret, fetch.url_hash)
    );
    if keep_alive {
        first.push_str(&format!(
            "Connection: keep-alive\r\nKeep-Alive: timeout={}\r\n",
            ctx.cfg.keep_alive_timeout.as_secs()
        ));
    } else {
        first.push_str("Connection: close\r\n");
    }
    first.push_str(&format!("content-length: {content_length}\r\n\r\n"));
    let mut pending = first.into_bytes();
    let mut out = VecDeque::with_capacity(segments.len() * 2 + 1);
    let maps = segments.len() as u64;
    let mut bytes = 0;
    for s in segments {
        pending.extend_from_slice(&s.header);
        if s.len == 0 {
            continue;
        }
        bytes += s.len;
        // WILLNEED ahead of a large segment; a small one is the kernel's own readahead's.
        if ctx.cfg.readahead_bytes > 0 && s.len >= SMALL_SEGMENT {
            let _ = fadvise(
                &s.file.file,
                s.start,
                NonZeroU64::new(s.len.min(ctx.cfg.readahead_bytes)),
                Advice::WillNeed,
            );
        }
        out.push_back(Part::Bytes(std::mem::take(&mut pending), 0));
        out.push_back(Part::File {
            file: s.file,
            start: s.start,
            off: s.start,
            end: s.start + s.len,
        });
    }
    if !pending.is_empty() {
        out.push_back(Part::Bytes(pending, 0));
    }
    Answer {
        out,
        keep_alive,
        fetched: Some(Fetched { maps, bytes }),
    }
}

/// One map's segment for `reduce`: index record (cached), data file opened, lengths checked
/// against the file (Java would send a short body and close; this answers 500 before the 200).
fn map_output(
    ctx: &Ctx,
    job: &str,
    user: &str,
    app: &str,
    map: &str,
    reduce: i32,
) -> Result<Segment, MapOutputError> {
    let not_found = |file: &str| {
        MapOutputError(format!(
            "Could not find {} in any of the directories",
            relative_path(user, app, map, file)
        ))
    };
    if !is_map_attempt_id(map) {
        // Never a path on disk (`..`, `/`, anything but a map attempt id): not found.
        return Err(not_found("file.out.index"));
    }
    let index = ctx.cache.get(&ctx.dirs, job, user, app, map)?;
    let rec = usize::try_from(reduce)
        .ok()
        .and_then(|r| index.get(r))
        .ok_or_else(|| {
            MapOutputError(format!(
                "Invalid request  Map Id = {map} Reducer = {reduce} Index Info Length = {}",
                index.len()
            ))
        })?;
    let file = ctx.cache.data_file(&ctx.dirs, job, user, app, map)?;
    let (path, size) = (&file.path, file.size);
    let (start, len) = (rec.start_offset, rec.part_length);
    let fits = start >= 0
        && len >= 0
        && (start as u64)
            .checked_add(len as u64)
            .is_some_and(|e| e <= size);
    if !fits || rec.raw_length < 0 {
        return Err(MapOutputError(format!(
            "{} holds {size} bytes, but its index places partition {reduce} at {start}+{len}",
            path.display()
        )));
    }
    let mut header = Vec::with_capacity(map.len() + 24);
    write_shuffle_header(&mut header, map, rec, reduce);
    Ok(Segment {
        header,
        file,
        start: start as u64,
        len: len as u64,
    })
}

fn count_failure(m: &ShuffleMetrics, cause: Cause) {
    let c = match cause {
        Cause::BadRequest => &m.bad_requests,
        Cause::Unauthorized => &m.unauthorized,
        Cause::MapOutput => &m.map_output_errors,
    };
    c.fetch_add(1, Relaxed);
}

/// TLS: moves the session's pending records to the socket. `(all out, bytes sent)`.
fn tls_flush(tls: &mut rustls::ServerConnection, sock: &mut TcpStream) -> io::Result<(bool, u64)> {
    let mut sent = 0u64;
    while tls.wants_write() {
        match tls.write_tls(sock) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => sent += n as u64,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok((false, sent)),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok((true, sent))
}

/// TLS: the decrypted bytes into the request buffer (at most [`MAX_REQUEST`]). `Ok(true)`
/// when the peer closed the session.
fn tls_plaintext(
    tls: &mut rustls::ServerConnection,
    buf: &mut Vec<u8>,
    scratch: &mut [u8],
) -> Result<bool, ()> {
    while buf.len() < MAX_REQUEST {
        let room = (MAX_REQUEST - buf.len()).min(scratch.len());
        match tls.reader().read(&mut scratch[..room]) {
            Ok(0) => return Ok(true),
            Ok(n) => buf.extend_from_slice(&scratch[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(_) => return Err(()),
        }
    }
    Ok(false)
}
