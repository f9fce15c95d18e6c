//! Short sends: a client with a small receive buffer that reads in small, paced pieces, so that
//! the server's sends (io_uring: one SENDMSG over many queued segments; epoll: `writev`) complete
//! with fewer bytes than were submitted, often in the middle of a segment. Every byte must still
//! arrive once, in order, and the pool must come back whole.
//!
//! Request: 8 bytes, `u32 BE size`, `u32 BE seed`. Response: `size` bytes, byte `i` =
//! `seed + i` (mod 256), streamed through the pool. `HOTPATH_IO=uring|epoll` restricts the
//! backends.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Duration;

use ipc::transport::{
    self, BackendChoice, BackendKind, Flow, Outbox, PoolConfig, Service, Session, TransportConfig,
};

struct Gen;

#[derive(Default)]
struct GenSession {
    input: Vec<u8>,
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
                    // Odd-sized pieces, each sealed on its own: segments end mid-chunk.
                    let n = tail.len().min(*remaining as usize).min(3001);
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
        GenSession::default()
    }
}

fn backends() -> Vec<BackendChoice> {
    match std::env::var("HOTPATH_IO").ok().as_deref() {
        Some("uring") => vec![BackendChoice::Uring],
        Some("epoll") => vec![BackendChoice::Epoll],
        _ => vec![BackendChoice::Uring, BackendChoice::Epoll],
    }
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
        let srv = transport::start("127.0.0.1:0".parse().unwrap(), cfg, Arc::new(Gen)).unwrap();
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
