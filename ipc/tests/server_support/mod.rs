//! Helpers shared by the server/client test binaries: run a body on both backends, start a
//! server with the benchmark protocol, raw sockets and frame parsing for the error cases.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use hadoop_wire::encode::{self, ConnectionContext, RequestHeader, RpcRequestHeader};
use hadoop_wire::frame::ResponseFrame;
use hadoop_wire::pb::hadoop::common::rpc_response_header_proto::{
    RpcErrorCodeProto, RpcStatusProto,
};
use hadoop_wire::view::rpc::RpcResponseHeaderView;
use ipc::buffer_protocol as bench;
use ipc::client::{Client, ClientConfig};
use ipc::server::{Registry, Server, ServerConfig};
use ipc::transport::{BackendChoice, BackendKind};

/// The backends to test: both, or the one `HOTPATH_IO` names.
pub fn backends() -> Vec<BackendChoice> {
    match std::env::var("HOTPATH_IO").ok().as_deref() {
        Some("uring") => vec![BackendChoice::Uring],
        Some("epoll") => vec![BackendChoice::Epoll],
        _ => vec![BackendChoice::Uring, BackendChoice::Epoll],
    }
}

/// Runs `body` once per backend.
pub fn for_each_backend(body: impl Fn(BackendChoice)) {
    for b in backends() {
        eprintln!("--- backend {b:?}");
        body(b);
    }
}

pub fn bench_registry() -> Registry {
    let mut r = Registry::new();
    bench::register(&mut r, 64 << 20);
    r
}

pub fn start(
    backend: BackendChoice,
    registry: Registry,
    tweak: impl FnOnce(&mut ServerConfig),
) -> Server {
    let mut cfg = ServerConfig::default();
    cfg.transport.backend = backend;
    tweak(&mut cfg);
    let s = Server::start("127.0.0.1:0".parse().unwrap(), cfg, registry).unwrap();
    let want = match backend {
        BackendChoice::Uring => BackendKind::Uring,
        _ => BackendKind::Epoll,
    };
    assert_eq!(s.backend(), want);
    s
}

pub fn client_config() -> ClientConfig {
    ClientConfig {
        protocol: bench::PROTOCOL.into(),
        protocol_version: bench::VERSION,
        user: "alice".into(),
        call_timeout: Duration::from_secs(30),
        ..ClientConfig::default()
    }
}

pub fn client(addr: SocketAddr) -> Client {
    Client::new(addr, client_config())
}

pub fn get_buffer_request(size: u64) -> Vec<u8> {
    let mut v = Vec::new();
    bench::encode_request(size, &mut v);
    v
}

/// getBuffer(size) through `c`, checking every byte.
pub fn get_buffer_checked(c: &Client, size: u64) {
    let r = c
        .call(bench::GET_BUFFER, &get_buffer_request(size))
        .unwrap();
    let data = bench::response_data(r.payload()).unwrap();
    assert_eq!(data.len() as u64, size);
    assert!(
        bench::is_pattern(data),
        "getBuffer({size}) returned wrong bytes"
    );
}

pub const CLIENT_ID: [u8; 16] = *b"0123456789abcdef";

/// A raw connection: the preamble, and the connection context if asked.
pub fn raw_connect(addr: SocketAddr, with_context: bool) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut b = Vec::new();
    encode::preamble(&mut b, 0);
    if with_context {
        encode::connection_context_frame(
            &mut b,
            &CLIENT_ID,
            &ConnectionContext {
                effective_user: Some("alice"),
                real_user: None,
                protocol: Some(bench::PROTOCOL),
            },
        )
        .unwrap();
    }
    s.write_all(&b).unwrap();
    s
}

/// A call frame with the given protocol, version and method.
pub fn call_frame(call_id: i32, protocol: &str, version: u64, method: &str, req: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    encode::call_frame(
        &mut b,
        &RpcRequestHeader::call(call_id, &CLIENT_ID, 0),
        &RequestHeader {
            method_name: method,
            declaring_class_protocol_name: protocol,
            client_protocol_version: version,
        },
        req,
    )
    .unwrap();
    b
}

/// Reads one frame body; `None` on EOF / reset.
pub fn read_frame(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).ok()?;
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut body).ok()?;
    Some(body)
}

/// Whether the server closed the connection (EOF or reset within the timeout).
pub fn closed_by_server(s: &mut TcpStream) -> bool {
    let mut b = [0u8; 1024];
    loop {
        match s.read(&mut b) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                return matches!(
                    e.kind(),
                    std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe
                )
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed {
    pub call_id: i32,
    pub status: RpcStatusProto,
    pub class: String,
    pub message: String,
    pub detail: Option<RpcErrorCodeProto>,
    pub state_id: Option<i64>,
    pub payload: Option<Vec<u8>>,
}

pub fn parse_response(body: &[u8]) -> Parsed {
    let f = ResponseFrame::split(body).unwrap();
    let h = RpcResponseHeaderView::new(f.header);
    h.validate().unwrap();
    Parsed {
        call_id: h.call_id_i32().unwrap(),
        status: h.status().unwrap(),
        class: h.exception_class_name().unwrap().unwrap_or("").into(),
        message: h.error_msg().unwrap().unwrap_or("").into(),
        detail: h.error_detail().unwrap(),
        state_id: h.state_id().unwrap(),
        payload: f.payload.map(|p| p.to_vec()),
    }
}

/// Resident set size of this process in KiB.
pub fn vm_rss_kb() -> u64 {
    status_kb("VmRSS:")
}

pub fn status_kb(key: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap()
}

/// Raises RLIMIT_NOFILE's soft limit to at least `want` (up to the hard limit).
pub fn raise_nofile(want: u64) -> u64 {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a pointer to a live local struct.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut r);
        if r.rlim_cur < want {
            r.rlim_cur = want.min(r.rlim_max);
            libc::setrlimit(libc::RLIMIT_NOFILE, &r);
            libc::getrlimit(libc::RLIMIT_NOFILE, &mut r);
        }
    }
    r.rlim_cur
}

// ---------------------------------------------------------------------------------------------
// SASL

pub mod sasl {
    use hadoop_wire::sasl::client::TokenCredential;
    use hadoop_wire::sasl::server::{TokenContext, TokenPassword, TokenSecrets};
    use hadoop_wire::sasl::SaslError;

    /// The token user every test token stands for.
    pub const USER: &str = "appattempt_1700000000000_0001_000001";

    /// Token secrets for these tests: HMAC-SHA1 over the identifier with one key; the identifier is
    /// `USER` followed by anything. (The real secret managers are tested in hadoop-wire.)
    pub struct Secrets {
        pub key: Vec<u8>,
    }

    pub fn hmac(key: &[u8], data: &[u8]) -> Vec<u8> {
        use hmac::{KeyInit, Mac};
        let mut m = hmac::Hmac::<sha1::Sha1>::new_from_slice(key).unwrap();
        m.update(data);
        m.finalize().into_bytes().to_vec()
    }

    impl TokenSecrets for Secrets {
        fn retrieve(&self, identifier: &[u8]) -> Result<TokenPassword, SaslError> {
            if !identifier.starts_with(USER.as_bytes()) {
                return Err(SaslError::InvalidToken(
                    "Given NMToken seems to have been generated illegally.".into(),
                ));
            }
            Ok(TokenPassword {
                password: hmac(&self.key, identifier),
                user: USER.into(),
            })
        }

        /// The connection's context: the identifier's text after the user.
        fn retrieve_with_context(
            &self,
            identifier: &[u8],
        ) -> Result<(TokenPassword, Option<TokenContext>), SaslError> {
            let p = self.retrieve(identifier)?;
            let rest = String::from_utf8_lossy(&identifier[USER.len()..]).into_owned();
            Ok((p, Some(std::sync::Arc::new(rest))))
        }
    }

    pub const KEY: &[u8] = b"\x01\x02\x03\x04\x05\x06\x07\x08";

    pub fn token(key: &[u8]) -> TokenCredential {
        let identifier = format!("{USER}:node-1:8041").into_bytes();
        TokenCredential {
            password: hmac(key, &identifier),
            identifier,
        }
    }
}
