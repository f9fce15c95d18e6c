//! A warm direct `getFileInfo` call allocates nothing on the calling thread, also over SASL
//! TOKEN (DIGEST-MD5) at `integrity` and `privacy`: the request, the WRAP packets, the unwrapped
//! response and the state machine's buffers are all reused (the alloc-counter allocator counts
//! this thread only; the in-process `ipc::server` runs on threads of its own).

use hadoop_wire::pb::hadoop::hdfs::{
    FsPermissionProto, GetFileInfoResponseProto, HdfsFileStatusProto,
};
use hadoop_wire::sasl::client::ClientAuth;
use hadoop_wire::sasl::server::ServerAuth;
use hadoop_wire::sasl::Qop;
use hdfs_io::namenode::{Endpoint, NameNodeClient, NameNodeConfig, CLIENT_PROTOCOL};
use ipc::server::{Call, CallError, Registry, Reply, Server};
use std::time::Duration;
use testkit::loopback::{start_local, OneToken};

#[global_allocator]
static GLOBAL: alloc_counter::Counting = alloc_counter::Counting;

const TOKEN: OneToken = OneToken {
    id: b"alloc-token",
    password: b"fedcba9876543210",
    user: "tokenuser",
};

/// Every path is a file of 4096 bytes.
fn server(auth: ServerAuth) -> Server {
    let mut reg = Registry::new();
    reg.register(
        CLIENT_PROTOCOL,
        1,
        "getFileInfo",
        move |_: &Call<'_>, reply: &mut Reply<'_, '_>| -> Result<(), CallError> {
            reply.message(&GetFileInfoResponseProto {
                fs: Some(HdfsFileStatusProto {
                    file_type: 2,
                    length: 4096,
                    permission: FsPermissionProto { perm: 0o644 },
                    owner: "tokenuser".into(),
                    group: "supergroup".into(),
                    ..Default::default()
                }),
            })?;
            Ok(())
        },
    );
    start_local(reg, auth)
}

fn client(addr: std::net::SocketAddr, auth: ClientAuth) -> NameNodeClient {
    client_with(addr, auth, None)
}

fn client_with(
    addr: std::net::SocketAddr,
    auth: ClientAuth,
    max_idle: Option<Duration>,
) -> NameNodeClient {
    NameNodeClient::new(
        vec![Endpoint {
            id: addr.to_string(),
            addr,
        }],
        NameNodeConfig {
            user: "alice".into(),
            retry_wait: Duration::from_millis(1),
            auth,
            max_idle,
            ..NameNodeConfig::default()
        },
    )
    .unwrap()
}

#[test]
fn warm_direct_calls_allocate_nothing_at_every_level() {
    let mut cases = vec![(None, ServerAuth::simple(), ClientAuth::default())];
    for qop in [Qop::Auth, Qop::AuthInt, Qop::AuthConf] {
        cases.push((
            Some(qop),
            TOKEN.server_auth(qop),
            ClientAuth::token(TOKEN.credential(), vec![qop]),
        ));
    }
    for (qop, sauth, cauth) in cases {
        let s = server(sauth);
        let nn = client(s.local_addr(), cauth);
        let mut scratch = Vec::new();
        let path = "/bench/filestatus/f12345";
        let mut call = || {
            nn.get_file_info_with(path, &mut scratch, |v| v.length)
                .unwrap()
                .unwrap()
        };
        for _ in 0..50 {
            assert_eq!(call(), 4096);
        }
        let (sum, c) = alloc_counter::thread(|| (0..500).map(|_| call()).sum::<u64>());
        assert_eq!(sum, 500 * 4096);
        assert_eq!(
            c.allocs, 0,
            "{qop:?}: {} allocations ({} bytes) in 500 warm calls",
            c.allocs, c.bytes
        );
        let st = nn.call_stats();
        assert_eq!((st.direct_calls, st.shared_calls), (550, 0), "{qop:?}");
        s.shutdown();
    }
}

#[test]
fn warm_direct_calls_allocate_nothing_with_the_idle_sweeper_running() {
    // With `max_idle` the pool's sweeper thread wakes every 30 ms (the connection's time is up,
    // but a call has just put it back) and at times finds it taken, then waits until the
    // next `put` wakes it: none of that costs the calling thread an allocation. A round in
    // which a call came late enough for the connection to be closed (a reconnect allocates)
    // is measured again.
    let s = server(ServerAuth::simple());
    let nn = client_with(
        s.local_addr(),
        ClientAuth::default(),
        Some(Duration::from_millis(30)),
    );
    let mut scratch = Vec::new();
    let path = "/bench/filestatus/f12345";
    let mut call = || {
        nn.get_file_info_with(path, &mut scratch, |v| v.length)
            .unwrap()
            .unwrap()
    };
    for _ in 0..50 {
        assert_eq!(call(), 4096);
    }
    let mut measured = false;
    for _ in 0..5 {
        let before = nn.call_stats().direct_connections;
        let t0 = std::time::Instant::now();
        let (sum, c) = alloc_counter::thread(|| (0..3000).map(|_| call()).sum::<u64>());
        let took = t0.elapsed();
        assert_eq!(sum, 3000 * 4096);
        if nn.call_stats().direct_connections != before {
            continue;
        }
        assert_eq!(
            c.allocs, 0,
            "{} allocations ({} bytes) in 3000 warm calls ({took:?})",
            c.allocs, c.bytes
        );
        measured = true;
        break;
    }
    assert!(measured, "every round reconnected");
    s.shutdown();
}
