//! Steady-state client calls allocate nothing: not on the calling thread (frame buffer, call
//! slot and pending-table entry are reused) and not on the connection's reader thread
//! (response buffers are recycled, the read buffer is reused).
//!
//! The calling thread is counted with `alloc_counter::thread`. The reader thread is counted
//! process-wide, filtered to the one reader under test: each test names its client's reader
//! `hpa-<n>` with a fresh `n` and the filter counts only the thread whose name carries the
//! current `n` (the server's ring threads, libtest's threads and earlier tests' readers are
//! not counted). Tests take a lock so that only one window is measured at a time.

mod server_support;

use std::cell::Cell;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use ipc::buffer_protocol as bench;
use ipc::client::{Client, ClientConfig, PendingCall, Response};
use server_support::*;

#[global_allocator]
static GLOBAL: alloc_counter::Counting = alloc_counter::Counting;

/// The reader thread being counted (`hpa-<n>`).
static CURRENT: AtomicU32 = AtomicU32::new(0);
static NEXT: AtomicU32 = AtomicU32::new(1);
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

thread_local! {
    /// 0 = not checked yet, u32::MAX = not a test reader, else the reader's number.
    static READER: Cell<u32> = const { Cell::new(0) };
}

/// This thread's name (Linux: at most 15 bytes), once it has one. Allocation-free.
fn thread_name() -> Option<[u8; 16]> {
    let mut name = [0u8; 16];
    // SAFETY: a 16-byte buffer for a name Linux caps at 16 bytes including the NUL.
    let ok =
        unsafe { libc::pthread_getname_np(libc::pthread_self(), name.as_mut_ptr().cast(), 16) }
            == 0;
    (ok && name[0] != 0).then_some(name)
}

/// The process-wide filter: the current test's reader thread only. Allocation-free.
fn on_current_reader() -> bool {
    READER.with(|r| {
        if r.get() == 0 {
            // Only cache once the thread has its name (it is set right after creation).
            if let Some(name) = thread_name() {
                let n = name
                    .strip_prefix(b"hpa-")
                    .map(|rest| {
                        rest.iter()
                            .take_while(|b| b.is_ascii_digit())
                            .fold(0u32, |n, b| n * 10 + u32::from(b - b'0'))
                    })
                    .filter(|&n| n != 0);
                r.set(n.unwrap_or(u32::MAX));
            }
        }
        r.get() == CURRENT.load(Ordering::Relaxed)
    })
}

/// A client whose reader thread is the one counted from now on.
fn counted_client(addr: std::net::SocketAddr, tweak: impl FnOnce(&mut ClientConfig)) -> Client {
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    CURRENT.store(n, Ordering::Relaxed);
    let mut cfg = ClientConfig {
        reader_thread_name: format!("hpa-{n}"),
        ..client_config()
    };
    tweak(&mut cfg);
    let c = Client::new(addr, cfg);
    c.connect_now().unwrap();
    c
}

/// Runs `f` counting the calling thread and the current reader thread; returns (calling
/// thread, reader thread) allocations.
fn count(f: impl FnOnce()) -> (alloc_counter::Counts, alloc_counter::Counts) {
    alloc_counter::set_process_filter(Some(on_current_reader));
    let ((_, caller), reader) = alloc_counter::process(|| alloc_counter::thread(f));
    (caller, reader)
}

fn echo_request(i: u32) -> [u8; 6] {
    // EchoRequestProto { data = 4 bytes }: field 1, length 4.
    let b = i.to_le_bytes();
    [0x0a, 4, b[0], b[1], b[2], b[3]]
}

fn check_echo(r: &Response, i: u32) {
    assert_eq!(r.payload(), &echo_request(i)[..]);
}

#[test]
fn sequential_calls_allocate_nothing_after_warm_up() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    for_each_backend(|b| {
        let srv = start(b, bench_registry(), |_| {});
        // with the idle close on (its receive timeout is set once, at connect)
        let c = counted_client(srv.local_addr(), |cfg| {
            cfg.max_idle = Some(Duration::from_secs(60))
        });
        let big = get_buffer_request(1 << 20);
        for i in 0..50 {
            check_echo(&c.call(bench::ECHO, &echo_request(i)).unwrap(), i);
            drop(c.call(bench::GET_BUFFER, &big).unwrap());
        }
        let (caller, reader) = count(|| {
            for i in 0..2_000 {
                check_echo(&c.call(bench::ECHO, &echo_request(i)).unwrap(), i);
            }
            for _ in 0..20 {
                let r = c.call(bench::GET_BUFFER, &big).unwrap();
                let data = bench::response_data(r.payload()).unwrap();
                assert_eq!(data.len(), 1 << 20);
                assert!(bench::is_pattern(data));
            }
        });
        assert_eq!(caller.allocs, 0, "calling thread: {caller:?}");
        assert_eq!(reader.allocs, 0, "reader thread: {reader:?}");
        srv.shutdown();
    });
}

#[test]
fn pipelined_calls_allocate_nothing_after_warm_up() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    const DEPTH: usize = 8;
    for_each_backend(|b| {
        let srv = start(b, bench_registry(), |_| {});
        let c = counted_client(srv.local_addr(), |cfg| cfg.recycled_buffers = DEPTH);
        let start_call = |i: u32| {
            c.start_call(
                bench::PROTOCOL,
                bench::VERSION,
                bench::ECHO,
                &echo_request(i),
                Duration::from_secs(30),
            )
            .unwrap()
        };
        // Warm-up: DEPTH responses held at once, so DEPTH response buffers exist.
        for round in 0..10u32 {
            let calls: Vec<PendingCall> = (0..DEPTH as u32)
                .map(|k| start_call(round * 100 + k))
                .collect();
            let held: Vec<Response> = calls.into_iter().map(|p| p.wait().unwrap()).collect();
            for (k, r) in held.iter().enumerate() {
                check_echo(r, round * 100 + k as u32);
            }
        }
        let (caller, reader) = count(|| {
            let mut window: [Option<(u32, PendingCall)>; DEPTH] = Default::default();
            for i in 0..2_000u32 {
                let k = i as usize % DEPTH;
                if let Some((j, p)) = window[k].take() {
                    check_echo(&p.wait().unwrap(), j);
                }
                window[k] = Some((i, start_call(i)));
            }
            for (j, p) in window.iter_mut().filter_map(Option::take) {
                check_echo(&p.wait().unwrap(), j);
            }
        });
        assert_eq!(caller.allocs, 0, "calling thread: {caller:?}");
        assert_eq!(reader.allocs, 0, "reader thread: {reader:?}");
        srv.shutdown();
    });
}

#[test]
fn concurrent_callers_on_one_client_allocate_nothing_after_warm_up() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    const THREADS: u32 = 4;
    let srv = start(backends()[0], bench_registry(), |_| {});
    let c = counted_client(srv.local_addr(), |_| {});
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let c = c.clone();
                s.spawn(move || {
                    for i in 0..100 {
                        check_echo(
                            &c.call(bench::ECHO, &echo_request(t << 24 | i)).unwrap(),
                            t << 24 | i,
                        );
                    }
                    let (_, counts) = alloc_counter::thread(|| {
                        for i in 0..1_000 {
                            let id = t << 24 | i;
                            check_echo(&c.call(bench::ECHO, &echo_request(id)).unwrap(), id);
                        }
                    });
                    counts
                })
            })
            .collect();
        for h in handles {
            let counts = h.join().unwrap();
            assert_eq!(counts.allocs, 0, "a calling thread: {counts:?}");
        }
    });
    srv.shutdown();
}

#[test]
fn abandoned_and_timed_out_calls_do_not_leak_slots_into_later_calls() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let srv = start(backends()[0], bench_registry(), |_| {});
    let c = counted_client(srv.local_addr(), |cfg| cfg.call_slots = 2);
    for round in 0..50u32 {
        // Abandon some calls (dropped unwaited: their responses arrive later and are
        // discarded), time out others at once, and check every later answer is its own.
        for k in 0..3 {
            drop(
                c.start_call(
                    bench::PROTOCOL,
                    bench::VERSION,
                    bench::ECHO,
                    &echo_request(round * 10 + k),
                    Duration::from_secs(30),
                )
                .unwrap(),
            );
        }
        let _ = c.call_timeout(bench::ECHO, &echo_request(7), Duration::ZERO);
        for k in 5..9 {
            let id = round * 10 + k;
            check_echo(&c.call(bench::ECHO, &echo_request(id)).unwrap(), id);
        }
    }
    srv.shutdown();
}

/// The server's ring threads (`hp-ring-*`) or the current reader: counted together.
fn on_ring_or_current_reader() -> bool {
    thread_local! {
        static RING: Cell<u8> = const { Cell::new(0) };
    }
    let ring = RING.with(|r| {
        if r.get() == 0 {
            if let Some(name) = thread_name() {
                r.set(if name.starts_with(b"hp-ring") { 1 } else { 2 });
            }
        }
        r.get() == 1
    });
    ring || on_current_reader()
}

#[test]
fn token_sasl_calls_allocate_nothing_after_warm_up_at_every_level() {
    use hadoop_wire::sasl::client::ClientAuth;
    use hadoop_wire::sasl::message::AuthMethod;
    use hadoop_wire::sasl::server::ServerAuth;
    use hadoop_wire::sasl::Qop;
    use server_support::sasl::{token, Secrets, KEY};
    use std::sync::Arc;

    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    for_each_backend(|b| {
        for qop in [Qop::Auth, Qop::AuthInt, Qop::AuthConf] {
            let auth = ServerAuth::new(
                AuthMethod::Token,
                Some(Arc::new(Secrets { key: KEY.to_vec() })),
                vec![qop],
            )
            .unwrap();
            let srv = start(b, bench_registry(), |c| c.auth = Arc::new(auth));
            let c = counted_client(srv.local_addr(), |cfg| {
                cfg.auth = ClientAuth::token(token(KEY), vec![qop]);
            });
            // call ids past 127 (a longer varint in every header) before counting
            let big = get_buffer_request(256 << 10);
            for i in 0..150 {
                check_echo(&c.call(bench::ECHO, &echo_request(i)).unwrap(), i);
            }
            for _ in 0..10 {
                drop(c.call(bench::GET_BUFFER, &big).unwrap());
            }
            alloc_counter::set_process_filter(Some(on_ring_or_current_reader));
            let ((_, caller), others) = alloc_counter::process(|| {
                alloc_counter::thread(|| {
                    for i in 0..1_000 {
                        check_echo(&c.call(bench::ECHO, &echo_request(i)).unwrap(), i);
                    }
                })
            });
            eprintln!(
                "{b:?} {qop:?} echo: calling thread {caller:?}, reader + ring threads {others:?}"
            );
            assert_eq!(caller.allocs, 0, "{qop:?} calling thread: {caller:?}");
            assert_eq!(
                others.allocs, 0,
                "{qop:?} reader and server ring threads: {others:?}"
            );
            // Streamed responses: the handler boxes its body source (one 32-byte allocation
            // per response on the ring thread, with or without SASL); nothing else.
            let ((_, caller), others) = alloc_counter::process(|| {
                alloc_counter::thread(|| {
                    for _ in 0..10 {
                        let r = c.call(bench::GET_BUFFER, &big).unwrap();
                        assert!(bench::is_pattern(
                            bench::response_data(r.payload()).unwrap()
                        ));
                    }
                })
            });
            eprintln!("{b:?} {qop:?} getBuffer: calling thread {caller:?}, reader + ring threads {others:?}");
            assert_eq!(caller.allocs, 0, "{qop:?} calling thread: {caller:?}");
            assert_eq!(
                others.allocs, 10,
                "{qop:?} reader and server ring threads: {others:?}"
            );
            srv.shutdown();
        }
    });
}
