//! A DataNode that refuses the block token (`ERROR_ACCESS_TOKEN`) makes the client fetch new
//! block locations once, as Java's `DFSInputStream` does, and read with the new token from the
//! same DataNode (not held against it); a DataNode that refuses the new token too ends the read
//! with a clear error, without a retry storm. Our own `ipc::server` stands in for the NameNode
//! (new tokens on each `getBlockLocations`, no data encryption key) and a thread for the
//! DataNode.

use hadoop_wire::pb::hadoop::hdfs::{LocatedBlockProto, LocatedBlocksProto, OpReadBlockProto};
use hdfs_io::checksum::{ChecksumKind, DataChecksum};
use hdfs_io::dfs::{DfsClient, DfsConfig};
use hdfs_io::fixtures::{dn_response, dn_stream, located_block, Dn};
use hdfs_io::namenode::{Endpoint, NameNodeClient, NameNodeConfig, CLIENT_PROTOCOL};
use hdfs_io::topology::{LocalNode, RackMap};
use ipc::server::{Call, CallError, Registry, Reply, Server, ServerConfig};
use prost::Message;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const LEN: u64 = 100_000;

fn data() -> Vec<u8> {
    (0..LEN as usize).map(|i| (i * 13 % 241) as u8).collect()
}

/// Reads one OP_READ_BLOCK request; its token password.
fn request_password(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut head = [0u8; 3];
    s.read_exact(&mut head).ok()?;
    let (mut len, mut shift) = (0usize, 0);
    loop {
        let mut b = [0u8; 1];
        s.read_exact(&mut b).ok()?;
        len |= usize::from(b[0] & 0x7f) << shift;
        shift += 7;
        if b[0] < 0x80 {
            break;
        }
    }
    let mut body = vec![0; len];
    s.read_exact(&mut body).ok()?;
    let op = OpReadBlockProto::decode(&body[..]).ok()?;
    Some(op.header.base_header.token?.password)
}

/// Accepts connections; answers a request carrying `good` with the block, anything else with
/// ERROR_ACCESS_TOKEN. Counts requests.
fn datanode(good: &'static [u8], requests: Arc<AtomicU32>) -> std::net::SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            let requests = requests.clone();
            std::thread::spawn(move || {
                while let Some(pw) = request_password(&mut s) {
                    requests.fetch_add(1, Ordering::SeqCst);
                    if pw == good {
                        let c = DataChecksum {
                            kind: ChecksumKind::Crc32c,
                            bytes_per_checksum: 512,
                        };
                        s.write_all(&dn_stream(&data(), 0, LEN, c, 64 * 1024))
                            .unwrap();
                        let mut st = [0u8; 3];
                        if s.read_exact(&mut st).is_err() {
                            return;
                        }
                    } else {
                        let r = dn_response(
                            5,
                            None,
                            Some("Block token with block_token_identifier ... is expired."),
                        );
                        let _ = s.write_all(&r);
                        return;
                    }
                }
            });
        }
    });
    addr
}

/// A NameNode whose n-th `getBlockLocations` hands out token password `tokens[min(n, last)]`.
fn namenode(
    dn: std::net::SocketAddr,
    tokens: &'static [&'static [u8]],
) -> (Server, Arc<AtomicU32>) {
    let calls = Arc::new(AtomicU32::new(0));
    let mut reg = Registry::new();
    let c = calls.clone();
    reg.register(
        CLIENT_PROTOCOL,
        1,
        "getBlockLocations",
        move |_: &Call<'_>, reply: &mut Reply<'_, '_>| -> Result<(), CallError> {
            let n = c.fetch_add(1, Ordering::SeqCst) as usize;
            let mut d = Dn::new(0, "/r1");
            d.ip = "127.0.0.1".into();
            d.xfer_port = u32::from(dn.port());
            let mut b = LocatedBlockProto::decode(&located_block(&[d])[..]).unwrap();
            b.b.num_bytes = Some(LEN);
            b.block_token.identifier = b"id".to_vec();
            b.block_token.password = tokens[n.min(tokens.len() - 1)].to_vec();
            b.block_token.kind = "HDFS_BLOCK_TOKEN".into();
            let lbs = LocatedBlocksProto {
                file_length: LEN,
                blocks: vec![b.clone()],
                under_construction: false,
                last_block: Some(b),
                is_last_block_complete: true,
                ..Default::default()
            };
            // GetBlockLocationsResponseProto{1: locations}
            let inner = lbs.encode_to_vec();
            let mut msg = Vec::new();
            prost::encoding::encode_key(1, prost::encoding::WireType::LengthDelimited, &mut msg);
            prost::encoding::encode_varint(inner.len() as u64, &mut msg);
            msg.extend_from_slice(&inner);
            reply.bytes(&msg)?;
            Ok(())
        },
    );
    reg.register(
        CLIENT_PROTOCOL,
        1,
        "getDataEncryptionKey",
        // no key: the NameNode does not encrypt data transfer
        |_: &Call<'_>, reply: &mut Reply<'_, '_>| -> Result<(), CallError> {
            reply.bytes(&[])?;
            Ok(())
        },
    );
    let srv = Server::start("127.0.0.1:0".parse().unwrap(), ServerConfig::default(), reg)
        .expect("server");
    (srv, calls)
}

fn client(nn: &Server) -> DfsClient {
    let nn = NameNodeClient::new(
        vec![Endpoint {
            id: "nn0".into(),
            addr: nn.local_addr(),
        }],
        NameNodeConfig::default(),
    )
    .unwrap();
    let cfg = DfsConfig {
        retry_window_base: Duration::from_millis(50),
        max_block_acquire_failures: 1,
        socket_timeout: Duration::from_secs(10),
        ..DfsConfig::default()
    };
    DfsClient::new(nn, cfg, LocalNode::default(), RackMap::default(), None)
}

#[test]
fn an_expired_block_token_is_refetched_once() {
    let requests = Arc::new(AtomicU32::new(0));
    let dn = datanode(b"new", requests.clone());
    let (nn, calls) = namenode(dn, &[b"old", b"new"]);
    let c = client(&nn);
    let mut out = Vec::new();
    let st = c
        .read("/f", 0, None, &mut out)
        .expect("read after a refetch");
    assert_eq!(out, data());
    assert_eq!(st.token_refetches, 1, "{st:?}");
    assert_eq!(
        st.replica_failures, 0,
        "not held against the DataNode: {st:?}"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 2, "one refetch");
    assert_eq!(requests.load(Ordering::SeqCst), 2);
    assert!(c.dead_nodes().is_empty(), "the DataNode is not marked dead");
}

#[test]
fn a_token_refused_after_the_refetch_fails_clearly() {
    let requests = Arc::new(AtomicU32::new(0));
    let dn = datanode(b"never", requests.clone());
    let (nn, calls) = namenode(dn, &[b"old", b"still-old"]);
    let c = client(&nn);
    let t = Instant::now();
    let e = c
        .read("/f", 0, None, &mut Vec::new())
        .expect_err("every token refused");
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    assert!(e.to_string().contains("ERROR_ACCESS_TOKEN"), "{e}");
    // one token refetch, then the ordinary failure handling (one more location fetch with
    // max_block_acquire_failures = 1): no storm
    let n = calls.load(Ordering::SeqCst);
    assert!((2..=4).contains(&n), "{n} getBlockLocations");
    assert!(requests.load(Ordering::SeqCst) <= 4);
}
