//! Idle close (`ClientConfig::max_idle`, Java's `ipc.client.connection.maxidletime`): a
//! connection with no call in flight and nothing received or started for that long is closed
//! by the client (the server reads EOF, nobody gets an error), not while a call is in flight or
//! while calls keep coming, and the next call opens a new connection (over SASL: a new
//! authentication). A ping keeps it open `max_idle` longer, as Java's `sendPing` does.

use crate::server_support;

use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hadoop_wire::sasl::client::ClientAuth;
use hadoop_wire::sasl::message::AuthMethod;
use hadoop_wire::sasl::server::ServerAuth;
use hadoop_wire::sasl::Qop;
use ipc::buffer_protocol as bench;
use ipc::client::{Client, ClientConfig};
use ipc::server::ServerConfig;
use server_support::sasl::*;
use server_support::*;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Event {
    /// Connection `n` accepted.
    Accepted(usize),
    /// Connection `n` answered a call (logged as the answer is written).
    Answered(usize),
    /// Connection `n` read EOF (the client closed it).
    Eof(usize),
    /// Connection `n` read a ping (answered with nothing).
    Pinged(usize),
}

type Log = Arc<Mutex<Vec<(Instant, Event)>>>;

/// A fake server: every connection on its own thread, each call echoed `delay` after it is
/// read; what happens is logged.
fn server(delay: Duration) -> (SocketAddr, Log) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let log: Log = Arc::default();
    let lg = log.clone();
    std::thread::spawn(move || {
        for (n, s) in l.incoming().enumerate() {
            let Ok(mut s) = s else { return };
            let lg = lg.clone();
            lg.lock()
                .unwrap()
                .push((Instant::now(), Event::Accepted(n)));
            std::thread::spawn(move || {
                let mut pre = [0u8; 7];
                if std::io::Read::read_exact(&mut s, &mut pre).is_err() {
                    return;
                }
                let _context = read_frame(&mut s);
                while let Some(body) = read_frame(&mut s) {
                    let f = hadoop_wire::frame::RequestFrame::split(&body).unwrap();
                    let h = hadoop_wire::view::rpc::RpcRequestHeaderView::new(f.rpc_header);
                    let call_id = h.call_id().unwrap();
                    if call_id == -4 {
                        lg.lock().unwrap().push((Instant::now(), Event::Pinged(n)));
                        continue;
                    }
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
                    // Logged before the write, so a client holding the answer always finds it
                    // in the log.
                    lg.lock()
                        .unwrap()
                        .push((Instant::now(), Event::Answered(n)));
                    if s.write_all(&out).is_err() {
                        return;
                    }
                }
                lg.lock().unwrap().push((Instant::now(), Event::Eof(n)));
            });
        }
    });
    (addr, log)
}

fn idle_client(addr: SocketAddr, idle: Duration) -> Client {
    Client::new(
        addr,
        ClientConfig {
            max_idle: Some(idle),
            ..client_config()
        },
    )
}

fn events(log: &Log) -> Vec<Event> {
    log.lock().unwrap().iter().map(|(_, e)| *e).collect()
}

fn when(log: &Log, e: Event) -> Option<Instant> {
    log.lock()
        .unwrap()
        .iter()
        .find(|(_, x)| *x == e)
        .map(|(t, _)| *t)
}

fn wait_for(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !ok() {
        assert!(t0.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn echo(c: &Client, what: &[u8]) {
    let r = c
        .call(bench::ECHO, what)
        .unwrap_or_else(|e| panic!("echo: {e}"));
    assert_eq!(r.payload(), what);
}

#[test]
fn an_idle_connection_is_closed_and_the_next_call_reconnects() {
    let (addr, log) = server(Duration::ZERO);
    let idle = Duration::from_millis(300);
    let c = idle_client(addr, idle);
    echo(&c, b"\x0a\x01A");
    let answered = when(&log, Event::Answered(0)).expect("answered");
    assert!(c.is_connected());
    wait_for("the server to read EOF", Duration::from_secs(5), || {
        when(&log, Event::Eof(0)).is_some()
    });
    let quiet = when(&log, Event::Eof(0)).unwrap() - answered;
    assert!(
        // (the upper bound only catches a close that never came; a loaded machine is slow)
        quiet >= idle - Duration::from_millis(20) && quiet < idle + Duration::from_secs(3),
        "closed {quiet:?} after the last response (max_idle {idle:?})"
    );
    assert!(!c.is_connected(), "the client knows it closed it");
    // The next call opens a new connection, without an error.
    echo(&c, b"\x0a\x01B");
    assert_eq!(
        events(&log),
        [
            Event::Accepted(0),
            Event::Answered(0),
            Event::Eof(0),
            Event::Accepted(1),
            Event::Answered(1)
        ]
    );
    // Without max_idle the connection stays.
    let (addr, log) = server(Duration::ZERO);
    let c = Client::new(addr, client_config());
    echo(&c, b"\x0a\x01C");
    std::thread::sleep(idle * 3);
    assert!(c.is_connected());
    assert_eq!(events(&log), [Event::Accepted(0), Event::Answered(0)]);
}

#[test]
fn not_while_a_call_is_in_flight_nor_while_calls_keep_coming() {
    // A call answered after three idle periods: the connection stays until it is answered.
    let idle = Duration::from_millis(200);
    let (addr, log) = server(idle * 3);
    let c = idle_client(addr, idle);
    echo(&c, b"\x0a\x01A");
    assert_eq!(events(&log), [Event::Accepted(0), Event::Answered(0)]);
    wait_for(
        "the close after the slow call",
        Duration::from_secs(5),
        || when(&log, Event::Eof(0)).is_some(),
    );

    // Calls every idle/5 for five idle periods: one connection throughout, closed after.
    let idle = Duration::from_millis(500);
    let (addr, log) = server(Duration::ZERO);
    let c = idle_client(addr, idle);
    let t0 = Instant::now();
    let mut n = 0;
    while t0.elapsed() < idle * 5 {
        echo(&c, b"\x0a\x01B");
        n += 1;
        std::thread::sleep(idle / 5);
    }
    let ev = events(&log);
    assert_eq!(ev.len(), n + 1, "{ev:?}");
    assert!(
        ev.iter()
            .all(|e| matches!(e, Event::Accepted(0) | Event::Answered(0))),
        "{ev:?}"
    );
    wait_for("the close once calls stop", Duration::from_secs(5), || {
        when(&log, Event::Eof(0)).is_some()
    });
}

#[test]
fn calls_racing_the_idle_close_never_fail() {
    // Rounds of calls from four threads at once, the rounds apart by gaps around max_idle
    // (20..50 ms for 30 ms): some calls find the connection just closed for idleness and open
    // another; none fails.
    let (addr, log) = server(Duration::ZERO);
    let idle = Duration::from_millis(30);
    let c = idle_client(addr, idle);
    let rounds = 40u64;
    let barrier = Arc::new(std::sync::Barrier::new(4));
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let c = c.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                for i in 0..rounds {
                    barrier.wait();
                    // each thread a little later than the one before
                    std::thread::sleep(Duration::from_millis(20 + (i * 7) % 30 + t));
                    echo(&c, b"\x0a\x01R");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let ev = events(&log);
    let answered = ev
        .iter()
        .filter(|e| matches!(e, Event::Answered(_)))
        .count();
    let accepted = ev
        .iter()
        .filter(|e| matches!(e, Event::Accepted(_)))
        .count();
    assert_eq!(answered as u64, rounds * 4);
    assert!(
        accepted >= 5,
        "idle closes happened: {accepted} connections"
    );
    eprintln!("{accepted} connections for {answered} calls");
}

#[test]
fn the_next_call_negotiates_sasl_again() {
    // TOKEN at privacy on our own server: every new connection is a new authentication.
    for_each_backend(|backend| {
        let auth = ServerAuth::new(
            AuthMethod::Token,
            Some(Arc::new(Secrets { key: KEY.to_vec() })),
            vec![Qop::AuthConf],
        )
        .unwrap();
        let server = start(backend, bench_registry(), |c: &mut ServerConfig| {
            c.auth = Arc::new(auth);
        });
        let c = Client::new(
            server.local_addr(),
            ClientConfig {
                auth: ClientAuth::token(token(KEY), vec![Qop::AuthConf]),
                max_idle: Some(Duration::from_millis(1000)),
                ..client_config()
            },
        );
        echo(&c, b"\x0a\x01A");
        echo(&c, b"\x0a\x01B");
        assert_eq!(server.metrics().auth_successes, 1);
        wait_for("the idle close", Duration::from_secs(10), || {
            !c.is_connected()
        });
        echo(&c, b"\x0a\x01C");
        let m = server.metrics();
        assert_eq!((m.auth_successes, m.auth_failures), (2, 0), "{backend:?}");
        server.shutdown();
    });
}

#[test]
fn a_ping_keeps_the_connection_open_max_idle_longer() {
    // Java's `sendPing` sets `lastActivity`: the idle close counts from the last ping.
    let (addr, log) = server(Duration::ZERO);
    let idle = Duration::from_millis(400);
    let c = idle_client(addr, idle);
    echo(&c, b"\x0a\x01A");
    // pings at 250 and 500 ms: without them the connection would close at 400 ms
    std::thread::sleep(Duration::from_millis(250));
    c.ping().unwrap();
    std::thread::sleep(Duration::from_millis(250));
    c.ping().unwrap();
    let last_ping = Instant::now();
    wait_for("the server to read EOF", Duration::from_secs(5), || {
        when(&log, Event::Eof(0)).is_some()
    });
    let eof = when(&log, Event::Eof(0)).unwrap();
    let after = eof.saturating_duration_since(last_ping);
    assert!(
        // (the upper bound only catches a close that waited a whole max_idle more)
        after >= idle - Duration::from_millis(20) && after < idle * 2,
        "closed {after:?} after the last ping (max_idle {idle:?}): {:?}",
        events(&log)
    );
    assert_eq!(
        events(&log),
        [
            Event::Accepted(0),
            Event::Answered(0),
            Event::Pinged(0),
            Event::Pinged(0),
            Event::Eof(0)
        ]
    );
    // A ping on a connection just closed for idleness opens a new one, without an error.
    c.ping().unwrap();
    wait_for(
        "the ping on a new connection",
        Duration::from_secs(5),
        || when(&log, Event::Pinged(1)).is_some(),
    );
}
