//! `getFileInfo` over direct connections (one NameNode) against our own `ipc::server`: the
//! answer, a missing path, typed remote errors, RetriableException retries, the stateId, many
//! threads at once, and the same calls with direct calls off (through `ipc::client`); a
//! NameNode that went away.

use hadoop_wire::pb::hadoop::hdfs::{
    FsPermissionProto, GetFileInfoResponseProto, HdfsFileStatusProto,
};
use hadoop_wire::reader::{Reader, WireType};
use hdfs_io::namenode::{Endpoint, NameNodeClient, NameNodeConfig, CLIENT_PROTOCOL};
use hdfs_io::{Error, RemoteKind};
use ipc::server::{Call, CallError, Registry, Reply, Server, ServerConfig};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

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
/// AccessControlException; `/busy` is a RetriableException on every second call.
fn server() -> (Server, Arc<AtomicU32>) {
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
                p => GetFileInfoResponseProto {
                    fs: Some(status(p.trim_start_matches("/f").parse().unwrap_or(0))),
                },
            };
            reply.message(&resp)?;
            Ok(())
        },
    );
    reg.set_state_id(|| 4242);
    let s = Server::start("127.0.0.1:0".parse().unwrap(), ServerConfig::default(), reg).unwrap();
    (s, busy)
}

fn client(addr: std::net::SocketAddr, direct: bool) -> NameNodeClient {
    NameNodeClient::new(
        vec![Endpoint {
            id: addr.to_string(),
            addr,
        }],
        NameNodeConfig {
            user: "alice".into(),
            retry_wait: Duration::from_millis(1),
            direct_calls: direct,
            ..NameNodeConfig::default()
        },
    )
    .unwrap()
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
        // many threads at once, each path answered with its own length
        std::thread::scope(|sc| {
            for t in 0..8u64 {
                let nn = &nn;
                sc.spawn(move || {
                    let mut scratch = Vec::new();
                    for i in 0..200u64 {
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
