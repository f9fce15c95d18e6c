//! Client behaviour: per-call timeouts, reconnect with backoff, failing pending calls when the
//! connection breaks, and the response-length cap. Server-backed tests run on both backends.

use crate::server_support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::time::{Duration, Instant};

use ipc::buffer_protocol as bench;
use ipc::client::{Client, ClientConfig, ClientError};
use ipc::server::{Registry, ServerConfig};
use server_support::*;

/// A slow fake server: answers each call (echoing its request) `delay` after reading it.
fn slow_server(delay: Duration) -> (SocketAddr, std::thread::JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let t = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut pre = [0u8; 7];
        s.read_exact(&mut pre).unwrap();
        let _context = read_frame(&mut s).unwrap();
        while let Some(body) = read_frame(&mut s) {
            let f = hadoop_wire::frame::RequestFrame::split(&body).unwrap();
            let h = hadoop_wire::view::rpc::RpcRequestHeaderView::new(f.rpc_header);
            let call_id = h.call_id().unwrap();
            std::thread::sleep(delay);
            let mut out = Vec::new();
            hadoop_wire::encode::success_response_frame(
                &mut out,
                &hadoop_wire::encode::RpcResponseHeader::success(
                    call_id,
                    h.client_id().unwrap(),
                    0,
                ),
                f.payload.unwrap(),
            )
            .unwrap();
            if s.write_all(&out).is_err() {
                break;
            }
        }
    });
    (addr, t)
}

#[test]
fn a_call_times_out_and_its_late_response_is_dropped() {
    let (addr, t) = slow_server(Duration::from_millis(400));
    let c = client(addr);
    let t0 = Instant::now();
    let e = c
        .call_timeout(bench::ECHO, b"\x0a\x01A", Duration::from_millis(200))
        .unwrap_err();
    let took = t0.elapsed();
    assert!(
        matches!(e, ClientError::Timeout { call_id: 0, .. }),
        "{e:?}"
    );
    assert!(
        took >= Duration::from_millis(200) && took < Duration::from_secs(3),
        "{took:?}"
    );
    // The connection is still up; the next call gets its own answer, not call 0's late one.
    assert!(c.is_connected());
    let r = c
        .call_timeout(bench::ECHO, b"\x0a\x01B", Duration::from_secs(5))
        .unwrap();
    assert_eq!(r.payload(), b"\x0a\x01B");
    c.disconnect();
    t.join().unwrap();
}

#[test]
fn reconnects_with_backoff_after_the_server_restarts() {
    for_each_backend(|b| {
        // Find a free port, then use it for two server lifetimes.
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let mut cfg = ServerConfig::default();
        cfg.transport.backend = b;
        let srv = ipc::server::Server::start(addr, cfg.clone(), bench_registry()).unwrap();
        let c = Client::new(
            addr,
            ClientConfig {
                backoff_initial: Duration::from_millis(50),
                backoff_max: Duration::from_millis(200),
                max_connect_attempts: 4,
                ..client_config()
            },
        );
        get_buffer_checked(&c, 1000);
        srv.shutdown();
        // The server is gone: the next call fails (the broken connection or the connects).
        let t0 = Instant::now();
        let e = c.call(bench::ECHO, b"").unwrap_err();
        assert!(
            matches!(
                e,
                ClientError::ConnectionLost(_) | ClientError::Connect { .. }
            ),
            "{e:?}"
        );
        let e = c.call(bench::ECHO, b"").unwrap_err();
        match e {
            ClientError::Connect { attempts, .. } => assert_eq!(attempts, 4),
            other => panic!("{other:?}"),
        }
        // Four attempts with waits of 50, 100, 200 ms between them (and a carried-over wait).
        assert!(
            t0.elapsed() >= Duration::from_millis(350),
            "{:?}",
            t0.elapsed()
        );
        // Server back on the same port: the client reconnects.
        let srv = ipc::server::Server::start(addr, cfg, bench_registry()).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match c.call(bench::ECHO, b"\x0a\x01a") {
                Ok(r) => {
                    assert_eq!(r.payload(), b"\x0a\x01a");
                    break;
                }
                Err(e) if Instant::now() < deadline => {
                    eprintln!("retrying after {e}");
                }
                Err(e) => panic!("{e}"),
            }
        }
        get_buffer_checked(&c, 1_000_000);
        srv.shutdown();
    });
}

#[test]
fn pending_calls_fail_when_the_connection_breaks() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let t = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        // Read the preamble, context and some calls, then hang up.
        let mut b = [0u8; 512];
        let _ = s.read(&mut b);
        std::thread::sleep(Duration::from_millis(100));
    });
    let c = client(addr);
    let pending: Vec<_> = (0..5)
        .map(|_| {
            c.start_call(
                bench::PROTOCOL,
                1,
                bench::ECHO,
                b"",
                Duration::from_secs(10),
            )
            .unwrap()
        })
        .collect();
    for p in pending {
        let e = p.wait().unwrap_err();
        assert!(matches!(e, ClientError::ConnectionLost(_)), "{e:?}");
    }
    t.join().unwrap();
}

#[test]
fn an_oversized_response_closes_the_connection_without_allocating_it() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let t = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut b = [0u8; 512];
        let _ = s.read(&mut b);
        // A response frame claiming 2 GiB.
        let _ = s.write_all(&[0x80, 0, 0, 0, 1, 2, 3]);
        std::thread::sleep(Duration::from_millis(200));
    });
    let c = Client::new(
        addr,
        ClientConfig {
            max_response_length: 1 << 20,
            ..client_config()
        },
    );
    let e = c.call(bench::ECHO, b"").unwrap_err();
    match e {
        ClientError::ConnectionLost(why) => assert!(why.contains("exceeds"), "{why}"),
        other => panic!("{other:?}"),
    }
    t.join().unwrap();
}

#[test]
fn sixty_four_concurrent_clients() {
    for_each_backend(|b| {
        let srv = start(b, bench_registry(), |_| {});
        let addr = srv.local_addr();
        std::thread::scope(|s| {
            for _ in 0..64 {
                s.spawn(move || {
                    let c = client(addr);
                    for _ in 0..3 {
                        get_buffer_checked(&c, 1_000_000);
                    }
                });
            }
        });
        let m = srv.metrics();
        assert_eq!(m.calls, 192);
        assert_eq!(m.transport.accepted, 64);
        srv.shutdown();
    });
    // Registry with nothing: every call is an ERROR, and the client reports it.
    let srv = start(backends()[0], Registry::new(), |_| {});
    let c = client(srv.local_addr());
    assert!(c
        .call(bench::ECHO, b"")
        .unwrap_err()
        .remote_class()
        .is_some());
    srv.shutdown();
}

/// The `/proc/self/task/<tid>/status` of the thread called `name`, if one runs.
fn thread_status(name: &str) -> Option<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(Result::ok)
        .find(|t| {
            std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim_end() == name)
        })
        .and_then(|t| std::fs::read_to_string(t.path().join("status")).ok())
}

#[test]
fn the_reader_thread_has_the_configured_name_and_cpu() {
    let srv = start(backends()[0], bench_registry(), |_| {});
    let cpus = hw::affinity::current_cpus().unwrap();
    let cpu = *cpus.last().unwrap();
    let c = Client::new(
        srv.local_addr(),
        ClientConfig {
            reader_thread_name: "hp-test-rdr".into(),
            reader_cpu: Some(cpu),
            ..client_config()
        },
    );
    get_buffer_checked(&c, 1000);
    let status = thread_status("hp-test-rdr").expect("a thread named hp-test-rdr");
    let allowed = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim();
    assert_eq!(allowed, cpu.to_string());
    // Dropping the client closes the connection and ends its reader thread.
    drop(c);
    let deadline = Instant::now() + Duration::from_secs(10);
    while thread_status("hp-test-rdr").is_some() {
        assert!(
            Instant::now() < deadline,
            "the reader thread is still running"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // Unpinned by default, under the default name.
    let c = client(srv.local_addr());
    get_buffer_checked(&c, 1000);
    assert!(thread_status("hp-ipc-client").is_some());
    drop(c);
    srv.shutdown();
}

#[test]
fn a_reader_cpu_that_cannot_be_used_fails_the_connect_at_once() {
    let srv = start(backends()[0], bench_registry(), |_| {});
    let t0 = Instant::now();
    let c = Client::new(
        srv.local_addr(),
        ClientConfig {
            reader_cpu: Some(100_000),
            max_connect_attempts: 5,
            backoff_initial: Duration::from_secs(1),
            ..client_config()
        },
    );
    match c.call(bench::ECHO, b"").unwrap_err() {
        ClientError::ReaderThread(why) => assert!(why.contains("pinning"), "{why}"),
        other => panic!("{other:?}"),
    }
    // Not retried with backoff: a CPU that is refused once is refused again.
    assert!(t0.elapsed() < Duration::from_secs(1), "{:?}", t0.elapsed());
    assert!(!c.is_connected());
    srv.shutdown();
}
