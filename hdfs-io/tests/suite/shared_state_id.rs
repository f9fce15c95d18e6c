//! One stateId shared by every NameNode connection of a client (Java's `ClientGSIContext`),
//! against our own `ipc::server`s standing in for an active and an observer NameNode that
//! record the stateId each request carries:
//!
//! - a read on the observer after a write on the active carries the write's stateId (the
//!   observer's own, older stateIds never lower it);
//! - with one NameNode, the stateId seen on the direct `getFileInfo` connections is the one the
//!   shared `ipc::client` connection sends, and the other way round.
//!
//! The same against the real HA MiniDFSCluster is in `interop_hdfs_ha.rs`.

use hadoop_wire::reader::{Reader, WireType};
use hdfs_io::file_status::FileType;
use hdfs_io::namenode::{Endpoint, NameNodeClient, NameNodeConfig, Role, CLIENT_PROTOCOL};
use ipc::server::{Call, CallError, Registry, Reply, Server, ServerConfig};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// (method, stateId the client sent) per call, in order.
type Seen = Arc<Mutex<Vec<(String, Option<i64>)>>>;

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

/// A NameNode in `role` (1 active, 3 observer). `mkdirs` adds the directory to `dirs`. Its
/// response headers carry `state`, raised by one per call when `advancing` (the active: each
/// call a transaction); the observer's stays where it is (it lags).
fn namenode(
    role: u8,
    state: Arc<AtomicI64>,
    advancing: bool,
    dirs: Arc<Mutex<Vec<String>>>,
) -> (Server, Seen) {
    let seen: Seen = Arc::default();
    let mut reg = Registry::new();
    let rec = |seen: &Seen, call: &Call<'_>| {
        seen.lock()
            .unwrap()
            .push((call.method.to_string(), call.client_state_id))
    };
    let s = seen.clone();
    reg.register(
        CLIENT_PROTOCOL,
        1,
        "getHAServiceState",
        move |call: &Call<'_>, reply: &mut Reply<'_, '_>| -> Result<(), CallError> {
            rec(&s, call);
            reply.bytes(&[0x08, role])?;
            Ok(())
        },
    );
    let s = seen.clone();
    reg.register(
        CLIENT_PROTOCOL,
        1,
        "msync",
        move |call: &Call<'_>, reply: &mut Reply<'_, '_>| -> Result<(), CallError> {
            rec(&s, call);
            reply.bytes(&[])?;
            Ok(())
        },
    );
    let (s, d) = (seen.clone(), dirs.clone());
    reg.register(
        CLIENT_PROTOCOL,
        1,
        "mkdirs",
        move |call: &Call<'_>, reply: &mut Reply<'_, '_>| -> Result<(), CallError> {
            rec(&s, call);
            d.lock().unwrap().push(src(call.request));
            reply.bytes(&[0x08, 1])?;
            Ok(())
        },
    );
    let (s, d) = (seen.clone(), dirs);
    reg.register(
        CLIENT_PROTOCOL,
        1,
        "getFileInfo",
        move |call: &Call<'_>, reply: &mut Reply<'_, '_>| -> Result<(), CallError> {
            rec(&s, call);
            let path = src(call.request);
            if d.lock().unwrap().contains(&path) {
                // GetFileInfoResponseProto{fs: HdfsFileStatusProto{fileType IS_DIR, path,
                // length 0, permission{0o755}, owner, group, mtime, atime}}
                let mut fs = vec![0x08, 1, 0x12, 0, 0x18, 0, 0x22, 3, 0x08, 0xed, 0x03];
                fs.extend_from_slice(&[0x2a, 1, b'u', 0x32, 1, b'g', 0x38, 1, 0x40, 1]);
                let mut msg = vec![0x0a, fs.len() as u8];
                msg.extend_from_slice(&fs);
                reply.bytes(&msg)?;
            } else {
                reply.bytes(&[])?;
            }
            Ok(())
        },
    );
    let s = seen.clone();
    reg.register(
        CLIENT_PROTOCOL,
        1,
        "getBlockLocations",
        move |call: &Call<'_>, _reply: &mut Reply<'_, '_>| -> Result<(), CallError> {
            rec(&s, call);
            Err(CallError::application(
                "java.io.FileNotFoundException",
                "File does not exist",
            ))
        },
    );
    // (the server takes the header's stateId before the handler runs)
    reg.set_state_id(move || {
        if advancing {
            state.fetch_add(1, Ordering::SeqCst) + 1
        } else {
            state.load(Ordering::SeqCst)
        }
    });
    let srv = Server::start("127.0.0.1:0".parse().unwrap(), ServerConfig::default(), reg)
        .expect("server");
    (srv, seen)
}

fn endpoint(id: &str, s: &Server) -> Endpoint {
    Endpoint {
        id: id.into(),
        addr: s.local_addr(),
    }
}

fn sent(seen: &Seen, method: &str) -> Vec<Option<i64>> {
    seen.lock()
        .unwrap()
        .iter()
        .filter(|(m, _)| m == method)
        .map(|(_, s)| *s)
        .collect()
}

#[test]
fn a_read_on_the_observer_carries_the_stateid_of_a_write_on_the_active() {
    let dirs: Arc<Mutex<Vec<String>>> = Arc::default();
    let (active, on_active) = namenode(1, Arc::new(AtomicI64::new(100)), true, dirs.clone());
    // the observer lags: its headers always say 7
    let (observer, on_observer) = namenode(3, Arc::new(AtomicI64::new(7)), false, dirs);
    let nn = NameNodeClient::new(
        vec![endpoint("nn0", &active), endpoint("nn2", &observer)],
        NameNodeConfig {
            observer_reads: true,
            retry_wait: Duration::from_millis(1),
            ..NameNodeConfig::default()
        },
    )
    .unwrap();
    nn.discover_roles();
    let roles: Vec<Role> = nn.nodes().into_iter().map(|(_, r)| r).collect();
    assert_eq!(roles, [Role::Active, Role::Observer]);
    let after_roles = nn
        .state_id()
        .expect("the active answered getHAServiceState");
    assert!(after_roles > 100, "{after_roles}");

    // first read: msync on the active (a higher stateId), then the observer, carrying it
    assert!(nn.get_file_info("/d0").unwrap().is_none());
    assert_eq!(sent(&on_active, "msync").len(), 1);
    let synced = nn.state_id().unwrap();
    assert!(synced > after_roles);
    assert_eq!(sent(&on_observer, "getFileInfo"), [Some(synced)]);
    assert_eq!(
        nn.state_id(),
        Some(synced),
        "the observer's 7 did not lower it"
    );

    let mut last = synced;
    for i in 1..=5 {
        let dir = format!("/d{i}");
        assert!(nn.mkdirs(&dir, 0o755).unwrap());
        let write = nn.state_id().unwrap();
        assert!(write > last, "the write's stateId {write} after {last}");
        assert_eq!(sent(&on_active, "mkdirs").last(), Some(&Some(last)));
        // the read goes to the observer (not the active) and carries the write's stateId,
        // although the observer's own connection only ever saw 7
        let st = nn.get_file_info(&dir).unwrap().expect("the write is seen");
        assert_eq!(st.file_type, FileType::Dir);
        assert_eq!(sent(&on_observer, "getFileInfo").last(), Some(&Some(write)));
        assert_eq!(nn.state_id(), Some(write));
        last = write;
    }
    assert!(
        sent(&on_active, "getFileInfo").is_empty(),
        "reads stay on the observer"
    );
    // getBlockLocations (through the same shared ipc client) carries it as well
    assert!(nn
        .get_block_locations("/missing", 0, 1)
        .unwrap_err()
        .is_file_not_found());
    assert_eq!(sent(&on_observer, "getBlockLocations"), [Some(last)]);
    assert!(nn.state_id_cell().get() == Some(last));
    active.shutdown();
    observer.shutdown();
}

#[test]
fn direct_connections_and_the_ipc_client_share_the_stateid() {
    let dirs: Arc<Mutex<Vec<String>>> = Arc::new(Mutex::new(vec!["/a".into()]));
    let (srv, seen) = namenode(1, Arc::new(AtomicI64::new(500)), true, dirs);
    let nn = NameNodeClient::new(
        vec![endpoint("nn", &srv)],
        NameNodeConfig {
            direct_calls: true,
            ..NameNodeConfig::default()
        },
    )
    .unwrap();
    // getFileInfo over a direct connection learns 501 ...
    assert!(nn.get_file_info("/a").unwrap().is_some());
    assert_eq!(nn.state_id(), Some(501));
    // ... which the ipc::client connection sends on its first call (and learns 502)
    assert!(nn.mkdirs("/b", 0o700).unwrap());
    assert_eq!(sent(&seen, "mkdirs"), [Some(501)]);
    assert_eq!(nn.state_id(), Some(502));
    // what the ipc::client connection learnt goes out on direct connections of several threads
    std::thread::scope(|s| {
        for _ in 0..4 {
            let nn = &nn;
            s.spawn(move || {
                let mut scratch = Vec::new();
                for _ in 0..10 {
                    assert_eq!(
                        nn.get_file_info_with("/b", &mut scratch, |v| v.file_type == FileType::Dir)
                            .unwrap(),
                        Some(true)
                    );
                }
            });
        }
    });
    let gfi = sent(&seen, "getFileInfo");
    assert_eq!(gfi.len(), 41);
    assert_eq!(gfi[0], None, "nothing seen before the first call");
    assert!(
        gfi[1..].iter().all(|s| s.is_some_and(|v| v >= 502)),
        "{gfi:?}"
    );
    // each direct call sent the highest seen before it: never below what a previous one learnt
    assert_eq!(nn.state_id(), Some(542));
    srv.shutdown();
}
