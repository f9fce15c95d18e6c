//! Memory and resource limits of the server, on both backends (`HOTPATH_IO=uring|epoll` picks
//! one): a 2 GiB frame claim, pool exhaustion, 2,000 idle connections, the idle timeout and the
//! outstanding-call limit.
//!
//! The alloc-counter allocator, filtered to ring threads (`hp-ring-*`), records the largest
//! single allocation made on one, so "cut off before any allocation" and "backpressure, not allocation" are
//! measured, not assumed. The tests in this binary run one at a time (they share the allocator
//! counter and measure the process's RSS).

mod server_support;

use std::cell::Cell;
use std::io::Write;
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hadoop_wire::pb::hadoop::common::rpc_response_header_proto::{
    RpcErrorCodeProto, RpcStatusProto,
};
use ipc::buffer_protocol as bench;
use ipc::client::Client;
use ipc::transport::PoolConfig;
use server_support::*;

thread_local! {
    /// 0 = not checked yet, 1 = not a ring thread, 2 = a ring thread.
    static RING: Cell<u8> = const { Cell::new(0) };
}

fn on_ring_thread() -> bool {
    RING.with(|r| {
        if r.get() == 0 {
            let mut name = [0u8; 16];
            // SAFETY: a 16-byte buffer for a name Linux caps at 16 bytes including the NUL.
            let ok = unsafe {
                libc::pthread_getname_np(libc::pthread_self(), name.as_mut_ptr().cast(), 16)
            } == 0;
            // Only cache once the thread has its name (it is set right after creation).
            if ok && name[0] != 0 {
                r.set(if name.starts_with(b"hp-ring") { 2 } else { 1 });
            }
        }
        r.get() == 2
    })
}

#[global_allocator]
static GLOBAL: alloc_counter::Counting = alloc_counter::Counting;

/// Starts counting ring threads' allocations and forgets the largest one seen so far.
fn reset_ring_max() {
    alloc_counter::set_process_filter(Some(on_ring_thread));
    alloc_counter::enable_process();
    alloc_counter::reset_process_largest();
}

/// The largest single allocation a ring thread made since [`reset_ring_max`].
fn ring_max() -> usize {
    alloc_counter::process_largest()
}

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

#[test]
fn a_2_gib_frame_claim_is_cut_off_before_any_allocation_and_others_keep_going() {
    let _g = serial();
    for_each_backend(|b| {
        let srv = start(b, bench_registry(), |_| {});
        let addr = srv.local_addr();
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            // A well-behaved client keeps fetching the whole time.
            let worker = s.spawn(|| {
                let c = client(addr);
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) || n < 5 {
                    get_buffer_checked(&c, 300_000);
                    n += 1;
                }
                n
            });
            std::thread::sleep(Duration::from_millis(50));
            reset_ring_max();
            let mut bad = raw_connect(addr, true);
            // 0x80000000 = 2 GiB, a negative Java int; then some body bytes.
            bad.write_all(&[0x80, 0, 0, 0]).unwrap();
            let _ = bad.write_all(&[0x55; 4096]);
            let r = parse_response(&read_frame(&mut bad).expect("a FATAL before the close"));
            assert_eq!(r.status, RpcStatusProto::Fatal);
            assert_eq!(r.call_id, -1);
            assert_eq!(r.detail, Some(RpcErrorCodeProto::FatalInvalidRpcHeader));
            assert!(r.message.contains("2147483648"), "{}", r.message);
            assert!(closed_by_server(&mut bad));
            let biggest = ring_max();
            assert!(
                biggest < 256 * 1024,
                "a ring thread allocated {biggest} bytes at once"
            );
            stop.store(true, Ordering::Relaxed);
            let served = worker.join().unwrap();
            assert!(served >= 5);
        });
        // Just over a configured cap is refused the same way.
        let small = start(b, bench_registry(), |c| c.max_data_length = 1 << 20);
        let mut bad = raw_connect(small.local_addr(), true);
        bad.write_all(&((1u32 << 20) + 1).to_be_bytes()).unwrap();
        let r = parse_response(&read_frame(&mut bad).unwrap());
        assert_eq!(r.status, RpcStatusProto::Fatal);
        assert!(closed_by_server(&mut bad));
        // ... and exactly the cap is not.
        let c = client(small.local_addr());
        get_buffer_checked(&c, 10);
        assert_eq!(srv.metrics().oversized_frames, 1);
        assert_eq!(small.metrics().oversized_frames, 1);
        srv.shutdown();
        small.shutdown();
    });
}

#[test]
fn pool_exhaustion_is_backpressure_not_allocation() {
    let _g = serial();
    for_each_backend(|b| {
        // 8 chunks of 64 KiB = 512 KiB for 16 connections fetching 2 × 16 MB each. The clients
        // read only after a pause, so the socket buffers fill and chunks stay queued: 16
        // connections × a quota of 4 want far more than the 8 chunks there are.
        let srv = start(b, bench_registry(), |c| {
            c.transport.pool = PoolConfig {
                chunks: 8,
                per_conn_chunks: 4,
                ..PoolConfig::default()
            };
        });
        let addr = srv.local_addr();
        reset_ring_max();
        std::thread::scope(|s| {
            for t in 0..16 {
                s.spawn(move || {
                    let mut conn = raw_connect(addr, true);
                    let mut frames = Vec::new();
                    for i in 0..2 {
                        frames.extend_from_slice(&call_frame(
                            t * 10 + i,
                            bench::PROTOCOL,
                            bench::VERSION,
                            bench::GET_BUFFER,
                            &get_buffer_request(16_000_000),
                        ));
                    }
                    conn.write_all(&frames).unwrap();
                    std::thread::sleep(Duration::from_millis(200));
                    for i in 0..2 {
                        let r = parse_response(&read_frame(&mut conn).unwrap());
                        assert_eq!(r.call_id, t * 10 + i);
                        let data = bench::response_data(r.payload.as_deref().unwrap()).unwrap();
                        assert_eq!(data.len(), 16_000_000);
                        assert!(bench::is_pattern(data));
                    }
                });
            }
        });
        let m = srv.metrics();
        assert!(m.transport.pool_exhausted > 0, "{m:?}");
        assert!(m.transport.pool_peak_chunks <= 8, "{m:?}");
        let biggest = ring_max();
        assert!(
            biggest < 256 * 1024,
            "a ring thread allocated {biggest} bytes at once for 16 MB responses"
        );
        srv.shutdown();
    });
}

#[test]
fn two_thousand_idle_connections_stay_bounded() {
    let _g = serial();
    // 2,000 client sockets + 2,000 server sockets in this process.
    let limit = raise_nofile(4_500);
    assert!(
        limit >= 4_500,
        "RLIMIT_NOFILE {limit} is too low for this test"
    );
    for_each_backend(|b| {
        let srv = start(b, bench_registry(), |c| {
            c.transport.idle_timeout = Some(Duration::from_secs(120));
        });
        let addr = srv.local_addr();
        // Warm up: one connection and a call, so that lazily built state exists.
        get_buffer_checked(&client(addr), 100_000);
        let before = vm_rss_kb();
        let mut conns: Vec<TcpStream> = Vec::with_capacity(2000);
        for _ in 0..2000 {
            conns.push(raw_connect(addr, true));
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        while srv.metrics().transport.open_connections < 2000 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(srv.metrics().transport.open_connections >= 2000);
        std::thread::sleep(Duration::from_millis(200));
        let after = vm_rss_kb();
        let growth_kb = after.saturating_sub(before);
        eprintln!(
            "{b:?}: VmRSS {before} KiB -> {after} KiB for 2000 idle connections (+{growth_kb} KiB, {} B each)",
            growth_kb * 1024 / 2000
        );
        assert!(
            growth_kb < 8 * 1024,
            "2000 idle connections grew RSS by {growth_kb} KiB"
        );
        // They are alive: a sample answers.
        for (i, s) in conns.iter_mut().enumerate().step_by(100) {
            s.write_all(&call_frame(
                i as i32,
                bench::PROTOCOL,
                1,
                bench::ECHO,
                b"\x0a\x01z",
            ))
            .unwrap();
            let r = parse_response(&read_frame(s).unwrap());
            assert_eq!(r.call_id, i as i32);
            assert_eq!(r.status, RpcStatusProto::Success);
        }
        drop(conns);
        srv.shutdown();
    });
}

#[test]
fn idle_connections_are_closed_after_the_timeout() {
    let _g = serial();
    for_each_backend(|b| {
        let srv = start(b, bench_registry(), |c| {
            c.transport.idle_timeout = Some(Duration::from_millis(300));
        });
        let addr = srv.local_addr();
        let busy = client(addr);
        let mut idle = raw_connect(addr, true);
        let t0 = Instant::now();
        // The busy connection calls every 100 ms for 1.2 s and stays open throughout.
        for _ in 0..12 {
            get_buffer_checked(&busy, 1000);
            std::thread::sleep(Duration::from_millis(100));
        }
        assert!(busy.is_connected());
        assert!(closed_by_server(&mut idle));
        assert!(t0.elapsed() >= Duration::from_millis(250));
        assert!(srv.metrics().transport.idle_closed >= 1);
        srv.shutdown();
    });
}

#[test]
fn the_outstanding_call_limit_holds_back_pipelined_calls() {
    let _g = serial();
    for_each_backend(|b| {
        let srv = start(b, bench_registry(), |c| c.max_outstanding_calls = 2);
        let c = client(srv.local_addr());
        let pending: Vec<_> = (0..64u64)
            .map(|i| {
                let size = 100_000 + i * 1000;
                let p = c
                    .start_call(
                        bench::PROTOCOL,
                        bench::VERSION,
                        bench::GET_BUFFER,
                        &get_buffer_request(size),
                        Duration::from_secs(30),
                    )
                    .unwrap();
                (size, p)
            })
            .collect();
        for (size, p) in pending {
            let r = p.wait().unwrap();
            assert_eq!(
                bench::response_data(r.payload()).unwrap().len() as u64,
                size
            );
        }
        let m = srv.metrics();
        assert!(m.transport.backpressure_pauses > 0, "{m:?}");
        srv.shutdown();
    });
}

/// 300 idle connections that never finish their handshake (no preamble at all, or a preamble
/// without a connection context) against a server with room for 16 callers and 64
/// handshakes: the oldest handshakes are closed to make room, and a real caller that arrives
/// after them is served at once. Without the handshake budget the 300 idle peers hold every
/// `max_connections` slot and the caller is refused (the "connection reset" of issue 35).
#[test]
fn idle_unauthenticated_peers_do_not_refuse_a_real_caller() {
    let _g = serial();
    for_each_backend(|b| {
        let srv = start(b, bench_registry(), |c| {
            c.transport.max_connections = 16;
            c.transport.max_handshaking = 64;
            c.transport.handshake_timeout = Some(Duration::from_secs(30));
        });
        let addr = srv.local_addr();
        let mut idle = Vec::new();
        for i in 0..300 {
            if i % 2 == 0 {
                idle.push(TcpStream::connect(addr).unwrap());
            } else {
                let mut s = TcpStream::connect(addr).unwrap();
                let mut p = Vec::new();
                hadoop_wire::encode::preamble(&mut p, 0);
                s.write_all(&p).unwrap();
                idle.push(s);
            }
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while srv.metrics().transport.accepted < 300 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let m = srv.metrics().transport;
        assert_eq!(m.accepted, 300, "{m:?}");
        assert!(m.handshaking <= 64, "{m:?}");
        assert!(m.handshake_evicted >= 300 - 64, "{m:?}");
        // A real caller, then 15 more (the whole max_connections), all served.
        let t0 = Instant::now();
        let callers: Vec<_> = (0..16).map(|_| client(addr)).collect();
        for c in &callers {
            get_buffer_checked(c, 1000);
        }
        eprintln!(
            "{b:?}: 16 callers served in {:?} after 300 idle peers",
            t0.elapsed()
        );
        let m = srv.metrics().transport;
        assert_eq!(m.refused, 0, "{m:?}");
        // A 17th established caller is over max_connections: refused once it finishes its
        // handshake (the limit still holds for authenticated callers).
        let extra = Client::new(
            addr,
            ipc::client::ClientConfig {
                call_timeout: Duration::from_secs(5),
                ..client_config()
            },
        );
        assert!(extra
            .call(bench::GET_BUFFER, &get_buffer_request(10))
            .is_err());
        assert!(srv.metrics().transport.refused >= 1);
        drop(idle);
        srv.shutdown();
    });
}

/// A connection that does not finish its handshake within `handshake_timeout` is closed, even
/// though the idle timeout is far away; an established one is not.
#[test]
fn an_unfinished_handshake_is_closed_after_the_handshake_timeout() {
    let _g = serial();
    for_each_backend(|b| {
        let srv = start(b, bench_registry(), |c| {
            c.transport.max_handshaking = 64;
            c.transport.handshake_timeout = Some(Duration::from_millis(300));
            c.transport.idle_timeout = Some(Duration::from_secs(120));
        });
        let addr = srv.local_addr();
        let mut half = raw_connect(addr, false);
        let busy = client(addr);
        get_buffer_checked(&busy, 10);
        let t0 = Instant::now();
        assert!(closed_by_server(&mut half));
        assert!(t0.elapsed() < Duration::from_secs(5));
        std::thread::sleep(Duration::from_millis(500));
        get_buffer_checked(&busy, 10);
        let m = srv.metrics().transport;
        assert!(m.handshake_expired >= 1, "{m:?}");
        assert_eq!(m.handshaking, 0, "{m:?}");
        srv.shutdown();
    });
}
