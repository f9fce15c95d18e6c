//! The transport on its own (no IPC protocol): a tiny streaming protocol driven by both backends.
//!
//! Request: 8 bytes, `u32 BE size`, `u32 BE seed`. Response: `size` bytes, byte `i` =
//! `seed + i` (mod 256), streamed chunk by chunk through the pool.
//!
//! Every test runs on io_uring and on epoll; `HOTPATH_IO=uring|epoll` restricts it to one.
//!
//! Short sends (the last test): a client with a small receive buffer that reads in small, paced
//! pieces, so that the server's sends (io_uring: one SENDMSG over many queued segments; epoll:
//! `writev`) complete with fewer bytes than were submitted, often in the middle of a segment.
//! Every byte must still arrive once, in order, and the pool must come back whole.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ipc::transport::{
    self, BackendChoice, BackendKind, Flow, Outbox, PoolConfig, Service, Session, TransportConfig,
};

/// The generator service. `piece`: most bytes sealed at once (smaller pieces make segments
/// that end mid-chunk).
struct Gen {
    piece: usize,
}

const WHOLE: Gen = Gen { piece: usize::MAX };

struct GenSession {
    piece: usize,
    input: Vec<u8>,
    /// (remaining, next byte value)
    stream: Option<(u64, u8)>,
}

impl GenSession {
    fn pump(&mut self, out: &mut Outbox<'_>) -> Flow {
        loop {
            if let Some((remaining, next)) = self.stream.as_mut() {
                while *remaining > 0 {
                    let Ok(tail) = out.tail() else {
                        return Flow::Continue;
                    };
                    let n = tail.len().min(*remaining as usize).min(self.piece);
                    for b in &mut tail[..n] {
                        *b = *next;
                        *next = next.wrapping_add(1);
                    }
                    out.advance(n);
                    out.seal();
                    *remaining -= n as u64;
                }
                self.stream = None;
            }
            if self.input.len() < 8 {
                return Flow::Continue;
            }
            let size = u32::from_be_bytes(self.input[0..4].try_into().unwrap());
            let seed = u32::from_be_bytes(self.input[4..8].try_into().unwrap());
            self.input.drain(..8);
            if size == u32::MAX {
                return Flow::CloseNow;
            }
            self.stream = Some((size as u64, seed as u8));
        }
    }
}

impl Session for GenSession {
    fn on_recv(&mut self, data: &[u8], out: &mut Outbox<'_>) -> Flow {
        self.input.extend_from_slice(data);
        self.pump(out)
    }
    fn on_send_progress(&mut self, out: &mut Outbox<'_>) -> Flow {
        self.pump(out)
    }
    fn wants_input(&self) -> bool {
        self.stream.is_none() && self.input.len() < 8
    }
    fn is_idle(&self) -> bool {
        self.stream.is_none() && self.input.is_empty()
    }
}

impl Service for Gen {
    type Session = GenSession;
    fn open(&self, _peer: Option<SocketAddr>) -> GenSession {
        GenSession {
            piece: self.piece,
            input: Vec::new(),
            stream: None,
        }
    }
}

fn backends() -> Vec<BackendChoice> {
    match std::env::var("HOTPATH_IO").ok().as_deref() {
        Some("uring") => vec![BackendChoice::Uring],
        Some("epoll") => vec![BackendChoice::Epoll],
        _ => vec![BackendChoice::Uring, BackendChoice::Epoll],
    }
}

fn start(backend: BackendChoice, tweak: impl FnOnce(&mut TransportConfig)) -> transport::Running {
    let mut cfg = TransportConfig {
        backend,
        ..TransportConfig::default()
    };
    tweak(&mut cfg);
    let r = transport::start("127.0.0.1:0".parse().unwrap(), cfg, Arc::new(WHOLE)).unwrap();
    let want = match backend {
        BackendChoice::Uring => BackendKind::Uring,
        _ => BackendKind::Epoll,
    };
    assert_eq!(r.backend(), want);
    r
}

fn request(s: &mut TcpStream, size: u32, seed: u32) {
    let mut b = [0u8; 8];
    b[..4].copy_from_slice(&size.to_be_bytes());
    b[4..].copy_from_slice(&seed.to_be_bytes());
    s.write_all(&b).unwrap();
}

fn read_check(s: &mut TcpStream, size: usize, seed: u32, buf: &mut Vec<u8>) {
    buf.resize(size, 0);
    s.read_exact(buf).unwrap();
    let mut v = seed as u8;
    for (i, &b) in buf.iter().enumerate() {
        assert_eq!(b, v, "byte {i} of {size}");
        v = v.wrapping_add(1);
    }
}

#[test]
fn small_and_large_round_trips() {
    for b in backends() {
        let srv = start(b, |_| {});
        let mut s = TcpStream::connect(srv.local_addr()).unwrap();
        let mut buf = Vec::new();
        for (i, size) in [1usize, 100, 65536, 65537, 10_000_000]
            .into_iter()
            .enumerate()
        {
            request(&mut s, size as u32, i as u32 * 7);
            read_check(&mut s, size, i as u32 * 7, &mut buf);
        }
        // Pipelined: several requests in one write, answered in order.
        let mut all = Vec::new();
        for i in 0..20u32 {
            all.extend_from_slice(&(1000 + i * 3000).to_be_bytes());
            all.extend_from_slice(&i.to_be_bytes());
        }
        s.write_all(&all).unwrap();
        for i in 0..20u32 {
            read_check(&mut s, (1000 + i * 3000) as usize, i, &mut buf);
        }
        let m = srv.metrics();
        assert!(m.bytes_out >= 10_000_000, "{m:?}");
        assert_eq!(m.open_connections, 1);
        drop(s);
        srv.shutdown();
    }
}

/// A pool of 4 chunks of 4 KiB shared by 8 connections each fetching 16 MB: the pool runs dry
/// again and again; connections wait (backpressure) rather than the server allocating, and every
/// byte arrives intact.
#[test]
fn pool_exhaustion_is_backpressure() {
    for b in backends() {
        let srv = start(b, |c| {
            c.pool = PoolConfig {
                chunk_size: 4096,
                chunks: 4,
                per_conn_chunks: 2,
                register: true,
            };
        });
        let addr = srv.local_addr();
        // 16 MB each, and nobody reads for a while: the socket buffers fill, chunks stay queued,
        // and 8 connections × a quota of 2 want more than the 4 chunks there are.
        let threads: Vec<_> = (0..8u32)
            .map(|t| {
                std::thread::spawn(move || {
                    let mut s = TcpStream::connect(addr).unwrap();
                    let mut buf = Vec::new();
                    for r in 0..2u32 {
                        request(&mut s, 16_000_000, t * 10 + r);
                        std::thread::sleep(Duration::from_millis(100));
                        read_check(&mut s, 16_000_000, t * 10 + r, &mut buf);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let m = srv.metrics();
        assert!(m.pool_exhausted > 0, "the pool must have run dry: {m:?}");
        assert!(m.pool_peak_chunks <= 4, "{m:?}");
        srv.shutdown();
    }
}

#[test]
fn idle_connections_are_closed() {
    for b in backends() {
        let srv = start(b, |c| {
            c.idle_timeout = Some(Duration::from_millis(200));
        });
        let mut s = TcpStream::connect(srv.local_addr()).unwrap();
        request(&mut s, 10, 1);
        let mut buf = Vec::new();
        read_check(&mut s, 10, 1, &mut buf);
        let t0 = Instant::now();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut one = [0u8; 1];
        let r = s.read(&mut one);
        assert!(
            matches!(r, Ok(0)),
            "{b:?}: expected EOF from the idle timeout: {r:?}"
        );
        let waited = t0.elapsed();
        assert!(
            waited >= Duration::from_millis(150),
            "{b:?}: closed too early: {waited:?} {:?}",
            srv.metrics()
        );
        assert!(
            waited < Duration::from_secs(3),
            "closed too late: {waited:?}"
        );
        assert_eq!(srv.metrics().idle_closed, 1);
        srv.shutdown();
    }
}

#[test]
fn connection_limit_refuses_extra_connections() {
    for b in backends() {
        let srv = start(b, |c| c.max_connections = 2);
        let mut a = TcpStream::connect(srv.local_addr()).unwrap();
        let mut bb = TcpStream::connect(srv.local_addr()).unwrap();
        let mut buf = Vec::new();
        request(&mut a, 5, 0);
        read_check(&mut a, 5, 0, &mut buf);
        request(&mut bb, 5, 0);
        read_check(&mut bb, 5, 0, &mut buf);
        let mut c = TcpStream::connect(srv.local_addr()).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        request(&mut c, 5, 0);
        let mut one = [0u8; 1];
        let r = c.read(&mut one);
        assert!(
            matches!(r, Ok(0) | Err(_)),
            "third connection must be closed: {r:?}"
        );
        assert_eq!(srv.metrics().refused, 1, "{b:?}: {r:?}");
        // Closing one frees a slot.
        drop(a);
        let deadline = Instant::now() + Duration::from_secs(5);
        while srv.metrics().open_connections > 1 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let mut d = TcpStream::connect(srv.local_addr()).unwrap();
        request(&mut d, 5, 3);
        read_check(&mut d, 5, 3, &mut buf);
        srv.shutdown();
    }
}

#[test]
fn session_close_only_closes_that_connection() {
    for b in backends() {
        let srv = start(b, |_| {});
        let mut a = TcpStream::connect(srv.local_addr()).unwrap();
        let mut other = TcpStream::connect(srv.local_addr()).unwrap();
        a.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        request(&mut a, u32::MAX, 0); // the session says CloseNow
        let mut one = [0u8; 1];
        assert!(matches!(a.read(&mut one), Ok(0) | Err(_)));
        let mut buf = Vec::new();
        request(&mut other, 70_000, 9);
        read_check(&mut other, 70_000, 9, &mut buf);
        srv.shutdown();
    }
}

#[test]
fn send_zc_on_loopback_reports_copies() {
    // SEND_ZC forced on: loopback copies anyway (trap 10), and the notifications say so.
    if !backends().contains(&BackendChoice::Uring) {
        return; // HOTPATH_IO=epoll: SEND_ZC is io_uring only
    }
    let srv = start(BackendChoice::Uring, |c| c.send_zc = transport::SendZc::On);
    let mut s = TcpStream::connect(srv.local_addr()).unwrap();
    let mut buf = Vec::new();
    for i in 0..3 {
        request(&mut s, 1_000_000, i);
        read_check(&mut s, 1_000_000, i, &mut buf);
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while srv.metrics().zc_notifs < srv.metrics().zc_sends && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let m = srv.metrics();
    assert!(m.zc_sends > 0, "{m:?}");
    assert_eq!(m.zc_notifs, m.zc_sends, "{m:?}");
    assert_eq!(m.zc_copied, m.zc_notifs, "loopback always copies: {m:?}");
    srv.shutdown();
}

/// Ring threads are named `hp-ring-<cpu>` and pinned to that CPU.
#[test]
fn ring_threads_are_named_and_pinned() {
    for b in backends() {
        let cpu = *hw_cpus().last().unwrap();
        let srv = start(b, |c| c.cpus = vec![cpu]);
        let name = format!("hp-ring-{cpu}");
        let mut found = None;
        for t in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
            let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
            if comm.trim() == name {
                found = Some(t.file_name().to_string_lossy().parse::<i32>().unwrap());
            }
        }
        let tid = found.unwrap_or_else(|| panic!("{b:?}: no thread named {name}"));
        // SAFETY: cpu_set_t is plain data; sched_getaffinity writes at most its size.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: see above; `set` is a live local of the size passed.
        let r = unsafe {
            libc::sched_getaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &mut set)
        };
        assert_eq!(r, 0);
        let on: Vec<u32> = (0..libc::CPU_SETSIZE as u32)
            // SAFETY: reads a bit of a live cpu_set_t.
            .filter(|&c| unsafe { libc::CPU_ISSET(c as usize, &set) })
            .collect();
        assert_eq!(on, vec![cpu], "{b:?}");
        srv.shutdown();
    }
}

/// CPUs this process may run on.
fn hw_cpus() -> Vec<u32> {
    // SAFETY: as above.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above, for the calling thread.
    unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    (0..libc::CPU_SETSIZE as u32)
        // SAFETY: reads a bit of a live cpu_set_t.
        .filter(|&c| unsafe { libc::CPU_ISSET(c as usize, &set) })
        .collect()
}

fn small_rcvbuf(s: &TcpStream) {
    let v: libc::c_int = 65536;
    // SAFETY: setsockopt on a socket we own, with a pointer to a live c_int and its size.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0);
}

#[test]
fn short_sends_deliver_every_byte_in_order() {
    for b in backends() {
        let cfg = TransportConfig {
            backend: b,
            pool: PoolConfig {
                chunk_size: 16384,
                chunks: 32,
                per_conn_chunks: 16,
                register: true,
            },
            ..TransportConfig::default()
        };
        let srv = transport::start(
            "127.0.0.1:0".parse().unwrap(),
            cfg,
            Arc::new(Gen { piece: 3001 }),
        )
        .unwrap();
        let want = match b {
            BackendChoice::Uring => BackendKind::Uring,
            _ => BackendKind::Epoll,
        };
        assert_eq!(srv.backend(), want);
        let addr = srv.local_addr();
        let threads: Vec<_> = (0..3u32)
            .map(|t| {
                std::thread::spawn(move || {
                    let mut s = TcpStream::connect(addr).unwrap();
                    small_rcvbuf(&s);
                    let sizes = [6_000_000u32, 1, 5000, 3_000_001];
                    let mut req = Vec::new();
                    for (i, size) in sizes.iter().enumerate() {
                        req.extend_from_slice(&size.to_be_bytes());
                        req.extend_from_slice(&(t * 10 + i as u32).to_be_bytes());
                    }
                    s.write_all(&req).unwrap();
                    let mut piece = [0u8; 1237];
                    let mut reads = 0u32;
                    for (i, &size) in sizes.iter().enumerate() {
                        let mut v = (t * 10 + i as u32) as u8;
                        let mut left = size as usize;
                        while left > 0 {
                            let k = left.min(piece.len());
                            s.read_exact(&mut piece[..k]).unwrap();
                            for (j, &byte) in piece[..k].iter().enumerate() {
                                assert_eq!(byte, v, "response {i}, {j} bytes into a piece");
                                v = v.wrapping_add(1);
                            }
                            left -= k;
                            reads += 1;
                            if reads % 64 == 0 {
                                std::thread::sleep(Duration::from_millis(1));
                            }
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        // The client may have read the last bytes before the server reaped their completion.
        let total: u64 = 3 * (6_000_000 + 1 + 5000 + 3_000_001);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let mut m = srv.metrics();
        while m.bytes_out < total && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
            m = srv.metrics();
        }
        assert_eq!(m.bytes_out, total, "{m:?}");
        assert!(m.pool_peak_chunks <= 32, "{m:?}");
        srv.shutdown();
    }
}

/// Wake batching (io_uring; epoll ignores the setting) with a long bound: 24 connections
/// calling back to back make the ring ask for several completions per wait, yet every call is
/// answered, the whole run is not slowed to the bound per call, and a lone call on the then
/// quiet server is answered without waiting for a batch that will not come.
#[test]
fn wake_batching_answers_every_call() {
    for b in backends() {
        let srv = start(b, |c| c.batch_wait = Duration::from_millis(10));
        let addr = srv.local_addr();
        let t0 = Instant::now();
        let clients: Vec<_> = (0..24u32)
            .map(|t| {
                std::thread::spawn(move || {
                    let mut s = TcpStream::connect(addr).unwrap();
                    s.set_nodelay(true).unwrap();
                    let mut buf = Vec::new();
                    for i in 0..300u32 {
                        request(&mut s, 40, t * 1000 + i);
                        read_check(&mut s, 40, t * 1000 + i, &mut buf);
                    }
                })
            })
            .collect();
        for c in clients {
            c.join().unwrap();
        }
        // 7,200 calls; waiting out the 10 ms bound for each would take over a minute.
        assert!(t0.elapsed() < Duration::from_secs(30), "{:?}", t0.elapsed());
        std::thread::sleep(Duration::from_millis(100));
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_nodelay(true).unwrap();
        let mut buf = Vec::new();
        let t1 = Instant::now();
        request(&mut s, 40, 7);
        read_check(&mut s, 40, 7, &mut buf);
        // The rate estimate needs up to one window (20 ms) plus the bound to come back to 1.
        assert!(
            t1.elapsed() < Duration::from_millis(500),
            "{:?}",
            t1.elapsed()
        );
        srv.shutdown();
    }
}

/// The idle sweep goes a slice of slots per busy turn: with 1,200 idle connections (more than
/// two slices) and one connection calling back to back, so that no turn finds the loop quiet,
/// every idle connection is still closed within a few ticks, and the busy one is not.
#[test]
fn idle_sweep_in_slices_reaches_every_connection() {
    for b in backends() {
        let srv = start(b, |c| {
            c.idle_timeout = Some(Duration::from_millis(200));
        });
        let addr = srv.local_addr();
        let idle: Vec<TcpStream> = (0..1200)
            .map(|_| TcpStream::connect(addr).unwrap())
            .collect();
        let mut busy = TcpStream::connect(addr).unwrap();
        busy.set_nodelay(true).unwrap();
        let mut buf = Vec::new();
        let t0 = Instant::now();
        let mut seed = 0u32;
        while srv.metrics().idle_closed < 1200 {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "{b:?}: {} of 1200 idle connections closed",
                srv.metrics().idle_closed
            );
            request(&mut busy, 16, seed);
            read_check(&mut busy, 16, seed, &mut buf);
            seed += 1;
        }
        assert_eq!(srv.metrics().idle_closed, 1200);
        request(&mut busy, 16, 1);
        read_check(&mut busy, 16, 1, &mut buf);
        drop(idle);
        srv.shutdown();
    }
}
