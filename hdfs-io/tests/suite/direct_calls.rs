//! `getFileInfo` over direct connections (one NameNode) against our own `ipc::server`: the
//! answer, a missing path, typed remote errors, RetriableException retries, the stateId, many
//! threads at once, and the same calls with direct calls off (through `ipc::client`); a
//! NameNode that went away. With SASL TOKEN (DIGEST-MD5) at every protection level, calls and
//! responses larger than one WRAP packet; a WRAP packet tampered with on the way (a proxy
//! flips a byte) fails the call with the unwrap error and drops the connection.

use hadoop_wire::pb::hadoop::hdfs::{
    FsPermissionProto, GetFileInfoResponseProto, HdfsFileStatusProto,
};
use hadoop_wire::reader::{Reader, WireType};
use hadoop_wire::sasl::client::ClientAuth;
use hadoop_wire::sasl::server::ServerAuth;
use hadoop_wire::sasl::Qop;
use hdfs_io::namenode::{Endpoint, NameNodeClient, NameNodeConfig, CLIENT_PROTOCOL};
use hdfs_io::{Error, RemoteKind};
use ipc::server::{Call, CallError, Registry, Reply, Server};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;
use testkit::loopback::{start_local, wait_idle_closed, OneToken};

fn src(req: &[u8]) -> String {
    let mut r = Reader::new(req);
    while !r.is_empty() {
        let (f, wt) = r.read_tag().unwrap();
        if f == 1 && wt == WireType::Len {
            return String::from_utf8(r.read_len().unwrap().to_vec()).unwrap();
        }
        r.skip(f, wt, 0).unwrap();
    }
    String::new()
}

/// `/f<len>` exists with that length; `/missing` does not; `/denied` is an
/// AccessControlException; `/busy` is a RetriableException on every second call; `/long…`
/// has the path's length and its first 60000 bytes as its group (a long response).
fn server() -> (Server, Arc<AtomicU32>) {
    server_with(ServerAuth::simple())
}

fn server_with(auth: ServerAuth) -> (Server, Arc<AtomicU32>) {
    let busy = Arc::new(AtomicU32::new(0));
    let b = busy.clone();
    let mut reg = Registry::new();
    reg.register(
        CLIENT_PROTOCOL,
        1,
        "getFileInfo",
        move |call: &Call<'_>, reply: &mut Reply<'_, '_>| -> Result<(), CallError> {
            let path = src(call.request);
            let status = |len: u64| HdfsFileStatusProto {
                file_type: 2,
                length: len,
                permission: FsPermissionProto { perm: 0o644 },
                owner: call.user.unwrap_or("").into(),
                group: "supergroup".into(),
                ..Default::default()
            };
            let resp = match path.as_str() {
                "/missing" => GetFileInfoResponseProto { fs: None },
                "/denied" => {
                    return Err(CallError::application(
                        "org.apache.hadoop.security.AccessControlException",
                        "Permission denied: user=x",
                    ))
                }
                "/busy" => {
                    if b.fetch_add(1, Ordering::SeqCst) % 2 == 0 {
                        return Err(CallError::application(
                            "org.apache.hadoop.ipc.RetriableException",
                            "try again",
                        ));
                    }
                    GetFileInfoResponseProto {
                        fs: Some(status(1)),
                    }
                }
                p if p.starts_with("/long") => GetFileInfoResponseProto {
                    fs: Some(HdfsFileStatusProto {
                        // (a response under the server's 64 KiB chunk)
                        group: p.chars().take(60_000).collect(),
                        ..status(p.len() as u64)
                    }),
                },
                p => GetFileInfoResponseProto {
                    fs: Some(status(p.trim_start_matches("/f").parse().unwrap_or(0))),
                },
            };
            reply.message(&resp)?;
            Ok(())
        },
    );
    reg.set_state_id(|| 4242);
    (start_local(reg, auth), busy)
}

/// A client of the one NameNode at `addr`, as alice, with `cfg` otherwise.
fn client_with(addr: SocketAddr, cfg: NameNodeConfig) -> NameNodeClient {
    NameNodeClient::new(
        vec![Endpoint {
            id: addr.to_string(),
            addr,
        }],
        NameNodeConfig {
            user: "alice".into(),
            ..cfg
        },
    )
    .unwrap()
}

fn client(addr: SocketAddr, direct: bool) -> NameNodeClient {
    client_with(
        addr,
        NameNodeConfig {
            retry_wait: Duration::from_millis(1),
            direct_calls: direct,
            ..NameNodeConfig::default()
        },
    )
}

/// `threads` threads calling at once, `calls` calls each, for paths of their own: each path
/// answered with its own length.
fn from_threads(nn: &NameNodeClient, threads: u64, calls: u64) {
    std::thread::scope(|sc| {
        for t in 0..threads {
            sc.spawn(move || {
                let mut scratch = Vec::new();
                for i in 0..calls {
                    let len = t * 1000 + i;
                    let got = nn
                        .get_file_info_with(&format!("/f{len}"), &mut scratch, |v| v.length)
                        .unwrap();
                    assert_eq!(got, Some(len));
                }
            });
        }
    });
}

#[test]
fn direct_and_shared_paths_agree() {
    let (s, busy) = server();
    for direct in [true, false] {
        let nn = client(s.local_addr(), direct);
        let st = nn.get_file_info("/f12345").unwrap().unwrap();
        assert_eq!((st.length, st.owner.as_str()), (12345, "alice"));
        assert!(nn.get_file_info("/missing").unwrap().is_none());
        let e = nn.get_file_info("/denied").unwrap_err();
        assert_eq!(e.remote_kind(), Some(RemoteKind::AccessControl), "{e}");
        assert!(e.to_string().contains("Permission denied"), "{e}");
        let before = busy.load(Ordering::SeqCst);
        assert_eq!(nn.get_file_info("/busy").unwrap().unwrap().length, 1);
        assert!(busy.load(Ordering::SeqCst) - before >= 1);
        assert_eq!(nn.state_id(), Some(4242), "direct={direct}");
        from_threads(&nn, 8, 200);
    }
    s.shutdown();
}

#[test]
fn a_namenode_gone_is_a_connection_error() {
    let (s, _) = server();
    let addr = s.local_addr();
    let nn = client(addr, true);
    assert_eq!(nn.get_file_info("/f7").unwrap().unwrap().length, 7);
    s.shutdown();
    // nothing listens now: a clean connection error, not a hang or a panic
    let e = nn.get_file_info("/f7").unwrap_err();
    assert!(matches!(e, Error::Connection { .. }), "{e}");
}

#[test]
fn idle_direct_connections_close_with_no_further_call() {
    // `ipc.client.connection.maxidletime`: the pool's connections, left idle, are closed by
    // its sweeper; the server sees its sockets go, with no call on the client to trigger it.
    let (s, _) = server();
    let addr = s.local_addr();
    let idle = Duration::from_millis(400);
    let nn = client_with(
        addr,
        NameNodeConfig {
            max_idle: Some(idle),
            ..NameNodeConfig::default()
        },
    );
    let open = || s.metrics().transport.open_connections;
    // threads calling at once: several connections
    let barrier = std::sync::Barrier::new(4);
    std::thread::scope(|sc| {
        for _ in 0..4 {
            sc.spawn(|| {
                barrier.wait();
                for _ in 0..50 {
                    assert_eq!(nn.get_file_info("/f9").unwrap().unwrap().length, 9);
                }
            });
        }
    });
    let done = std::time::Instant::now();
    let st = nn.call_stats();
    assert_eq!((st.direct_calls, st.shared_calls), (200, 0), "{st:?}");
    let opened = st.direct_connections;
    assert!(opened >= 1, "{st:?}");
    assert_eq!(open(), opened, "all open while younger than max_idle");
    let window = idle - Duration::from_millis(50)..idle + Duration::from_secs(3);
    wait_idle_closed(
        &format!("the pool's {opened} connections"),
        done,
        window,
        open,
    );
    assert_eq!(nn.call_stats().direct_idle_closed, opened);
    // The next call opens a new one.
    assert_eq!(nn.get_file_info("/f5").unwrap().unwrap().length, 5);
    assert_eq!(nn.call_stats().direct_connections, opened + 1);
    assert_eq!(open(), 1);
    drop(nn);
    s.shutdown();
}

const TOKEN_USER: &str = "tokenuser";

const TOKEN: OneToken = OneToken {
    id: b"direct-calls-token",
    password: b"0123456789abcdef",
    user: TOKEN_USER,
};

fn token_server(qop: Qop) -> Server {
    server_with(TOKEN.server_auth(qop)).0
}

fn token_client(addr: SocketAddr, qop: Qop) -> NameNodeClient {
    client_with(
        addr,
        NameNodeConfig {
            retry_wait: Duration::from_millis(1),
            auth: ClientAuth::token(TOKEN.credential(), vec![qop]),
            ..NameNodeConfig::default()
        },
    )
}

#[test]
fn token_direct_calls_at_every_protection_level() {
    for qop in [Qop::Auth, Qop::AuthInt, Qop::AuthConf] {
        let s = token_server(qop);
        let nn = token_client(s.local_addr(), qop);
        let st = nn.get_file_info("/f77").unwrap().unwrap();
        // the token's user, not the configured one: TOKEN claims no user
        assert_eq!((st.length, st.owner.as_str()), (77, TOKEN_USER), "{qop:?}");
        assert!(nn.get_file_info("/missing").unwrap().is_none());
        let e = nn.get_file_info("/denied").unwrap_err();
        assert_eq!(e.remote_kind(), Some(RemoteKind::AccessControl), "{e}");
        // a request of several WRAP packets (DIGEST-MD5's 64 KiB), a 60 KB response
        let long = format!("/long{}", "x".repeat(200_000));
        let st = nn.get_file_info(&long).unwrap().unwrap();
        assert_eq!((st.length, st.group.len()), (long.len() as u64, 60_000));
        from_threads(&nn, 4, 100);
        let st = nn.call_stats();
        assert_eq!(st.shared_calls, 0, "{qop:?}: {st:?}");
        assert_eq!(st.direct_calls, 404, "{qop:?}: {st:?}");
        let wrapped = if qop == Qop::Auth {
            0
        } else {
            st.direct_connections
        };
        assert_eq!(st.direct_wrapped_connections, wrapped, "{qop:?}: {st:?}");
        s.shutdown();
    }
}

/// A proxy to `to` that forwards everything, flipping the last byte of every WRAP packet the
/// server sends while `tamper` is set.
fn tampering_proxy(to: SocketAddr, tamper: Arc<AtomicBool>) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut client) = c else { return };
            let Ok(mut server) = TcpStream::connect(to) else {
                return;
            };
            let (mut c2, mut s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut c2, &mut s2);
                let _ = s2.shutdown(std::net::Shutdown::Both);
            });
            let tamper = tamper.clone();
            std::thread::spawn(move || loop {
                let mut len = [0u8; 4];
                if server.read_exact(&mut len).is_err() {
                    let _ = client.shutdown(std::net::Shutdown::Both);
                    return;
                }
                let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
                if server.read_exact(&mut body).is_err() {
                    return;
                }
                if tamper.load(Ordering::SeqCst) && ipc::sasl::wrapped_token(&body).is_some() {
                    *body.last_mut().unwrap() ^= 0x40;
                }
                if client.write_all(&len).is_err() || client.write_all(&body).is_err() {
                    return;
                }
            });
        }
    });
    addr
}

#[test]
fn a_tampered_wrap_fails_the_call_and_drops_the_connection() {
    for qop in [Qop::AuthInt, Qop::AuthConf] {
        let s = token_server(qop);
        let tamper = Arc::new(AtomicBool::new(false));
        let nn = token_client(tampering_proxy(s.local_addr(), tamper.clone()), qop);
        assert_eq!(nn.get_file_info("/f5").unwrap().unwrap().length, 5);
        assert_eq!(nn.call_stats().direct_connections, 1);
        tamper.store(true, Ordering::SeqCst);
        let e = nn.get_file_info("/f6").unwrap_err();
        assert!(matches!(e, Error::Connection { .. }), "{qop:?}: {e}");
        assert!(e.to_string().contains("SASL unwrap"), "{qop:?}: {e}");
        // not retried on another connection (the bytes were wrong, not the socket)
        assert_eq!(nn.call_stats().direct_connections, 1, "{qop:?}");
        tamper.store(false, Ordering::SeqCst);
        // the broken connection was dropped: the next call opens (and negotiates) a new one
        assert_eq!(nn.get_file_info("/f7").unwrap().unwrap().length, 7);
        let st = nn.call_stats();
        assert_eq!((st.direct_connections, st.shared_calls), (2, 0), "{st:?}");
        s.shutdown();
    }
}

#[test]
fn the_direct_calls_key_turns_them_off() {
    let (s, _) = server();
    let mut conf = conf::Configuration::new();
    conf.set("fs.defaultFS", &format!("hdfs://{}", s.local_addr()));
    for (value, direct) in [(None, true), (Some("false"), false), (Some("true"), true)] {
        if let Some(v) = value {
            conf.set(hdfs_io::namenode::DIRECT_CALLS_KEY, v);
        }
        let nn = NameNodeClient::from_conf(&conf).unwrap();
        assert_eq!(nn.get_file_info("/f3").unwrap().unwrap().length, 3);
        let st = nn.call_stats();
        assert_eq!(
            (st.direct_calls, st.shared_calls),
            if direct { (1, 0) } else { (0, 1) },
            "{value:?}"
        );
    }
    conf.set(hdfs_io::namenode::DIRECT_CALLS_KEY, "maybe");
    assert!(NameNodeClient::from_conf(&conf).is_err());
    s.shutdown();
}
