//! Per-call cost of `ipc::client`: sequential small echo calls through one `Client`, timed,
//! with the calling thread's allocations counted.
//!
//! ```text
//! cargo run --release -p ipc --example client_calls -- [calls] [server] [payload bytes]
//!   server: uring | epoll (ipc::server with the bench protocol) | plain (a blocking std
//!           thread that answers each call) | addr=IP:PORT (a server already running, e.g.
//!           `client_calls serve`, which prints its address and answers like `plain`)
//! ```
//!
//! Instructions per call of the client alone (calling thread and reader thread), with the
//! server in another process so that callgrind does not see it; the difference of two runs
//! cancels start-up and connection set-up:
//!
//! ```text
//! target/release/examples/client_calls serve > addr &
//! for n in 10000 30000; do valgrind --tool=callgrind --callgrind-out-file=cg.$n \
//!   target/release/examples/client_calls $n addr=$(cat addr); done
//! # (Ir(30000) - Ir(10000)) / 20000
//! ```

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use ipc::buffer_protocol as bench;
use ipc::client::{Client, ClientConfig};
use ipc::server::{Registry, Server, ServerConfig};
use ipc::transport::BackendChoice;

#[global_allocator]
static GLOBAL: alloc_counter::Counting = alloc_counter::Counting;

fn read_frame(s: &mut TcpStream, body: &mut Vec<u8>) -> bool {
    let mut len = [0u8; 4];
    if s.read_exact(&mut len).is_err() {
        return false;
    }
    body.resize(u32::from_be_bytes(len) as usize, 0);
    s.read_exact(body).is_ok()
}

/// A blocking server answering every call with its request message (one thread per
/// connection).
fn plain_server() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { break };
            std::thread::spawn(move || {
                s.set_nodelay(true).unwrap();
                let mut pre = [0u8; 7];
                let (mut body, mut out) = (Vec::new(), Vec::new());
                if s.read_exact(&mut pre).is_err() || !read_frame(&mut s, &mut body) {
                    return;
                }
                while read_frame(&mut s, &mut body) {
                    let f = hadoop_wire::frame::RequestFrame::split(&body).unwrap();
                    let h = hadoop_wire::view::rpc::RpcRequestHeaderView::new(f.rpc_header);
                    out.clear();
                    hadoop_wire::encode::success_response_frame(
                        &mut out,
                        &hadoop_wire::encode::RpcResponseHeader::success(
                            h.call_id().unwrap(),
                            h.client_id().unwrap(),
                            0,
                        ),
                        f.payload.unwrap_or(&[]),
                    )
                    .unwrap();
                    if s.write_all(&out).is_err() {
                        break;
                    }
                }
            });
        }
    });
    addr
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("serve") {
        let addr = plain_server();
        println!("{addr}");
        loop {
            std::thread::park();
        }
    }
    let calls: u32 = args.get(1).map_or(100_000, |a| a.parse().unwrap());
    let server = args.get(2).map_or("uring", String::as_str);
    let payload: usize = args.get(3).map_or(16, |a| a.parse().unwrap());
    let mut srv = None;
    let addr = match server {
        "plain" => plain_server(),
        "uring" | "epoll" => {
            let mut cfg = ServerConfig::default();
            cfg.transport.backend = if server == "uring" {
                BackendChoice::Uring
            } else {
                BackendChoice::Epoll
            };
            let mut r = Registry::new();
            bench::register(&mut r, 64 << 20);
            let s = Server::start("127.0.0.1:0".parse().unwrap(), cfg, r).unwrap();
            let a = s.local_addr();
            srv = Some(s);
            a
        }
        other => match other.strip_prefix("addr=") {
            Some(a) => a.parse().unwrap(),
            None => panic!("server: uring, epoll, plain or addr=IP:PORT, not {other}"),
        },
    };
    let c = Client::new(
        addr,
        ClientConfig {
            protocol: bench::PROTOCOL.into(),
            protocol_version: bench::VERSION,
            call_timeout: Duration::from_secs(30),
            ..ClientConfig::default()
        },
    );
    // EchoRequestProto { data }: field 1, then the bytes.
    let mut req = vec![0x0a];
    let mut n = payload;
    while n >= 0x80 {
        req.push(n as u8 | 0x80);
        n >>= 7;
    }
    req.push(n as u8);
    req.extend((0..payload).map(|i| i as u8));
    for _ in 0..1_000.min(calls) {
        assert_eq!(c.call(bench::ECHO, &req).unwrap().payload(), &req[..]);
    }
    let t0 = Instant::now();
    let (_, counts) = alloc_counter::thread(|| {
        for _ in 0..calls {
            let r = c.call(bench::ECHO, &req).unwrap();
            assert_eq!(r.payload().len(), req.len());
        }
    });
    let took = t0.elapsed();
    println!(
        "{{\"calls\":{calls},\"server\":\"{server}\",\"payload\":{payload},\"ns_per_call\":{:.0},\"calling_thread_allocs_per_call\":{:.3}}}",
        took.as_nanos() as f64 / f64::from(calls),
        counts.allocs as f64 / f64::from(calls)
    );
    drop(c);
    if let Some(s) = srv {
        s.shutdown();
    }
}
