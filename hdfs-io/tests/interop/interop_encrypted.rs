//! Encrypted data transfer against the real MiniDFSCluster (peer-harness `hdfs` mode on a SIMPLE
//! cluster, as Java's `TestEncryptedTransfer`): `dfs.encrypt.data.transfer=true` with block
//! access tokens, AES/CTR/NoPadding offered by the client (security.md §5). One peer per test
//! binary; the shared lock serialises the tests.

use hadoop_wire::hdfs::transfer_sasl::{Credentials, DataEncryptionKey, TransferSaslError};
use hadoop_wire::pb::hadoop::hdfs::LocatedBlocksProto;
use hdfs_io::block_reader::{BlockRead, ReadBlockRequest};
use hdfs_io::datanode::{
    connect, handshake, read_block_on_sasl, read_block_on_with, Protection, RecvBuf,
};
use hdfs_io::dfs::{DfsClient, DfsConfig};
use hdfs_io::namenode::NameNodeClient;
use hdfs_io::topology::{LocalNode, RackMap};
use hdfs_io::{BlockName, Error};
use ipc::transport::BackendChoice;
use peer_harness::{content, Mode, Peer, Shared};
use prost::Message;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

static HDFS: Shared = Shared::new(
    Mode::Hdfs,
    &[
        // connections stay reusable however slow this machine is between reads
        "--set",
        "dfs.client.socketcache.expiryMsec=120000",
        "--set",
        "dfs.datanode.socket.reuse.keepalive=120000",
        "--set",
        "dfs.encrypt.data.transfer=true",
        "--set",
        "dfs.block.access.token.enable=true",
        "--set",
        "dfs.encrypt.data.transfer.cipher.suites=AES/CTR/NoPadding",
    ],
);

fn sha256_hex(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn conf_of(peer: &Peer) -> conf::Configuration {
    conf::Configuration::load_dir(peer.conf_dir()).expect("peer conf dir")
}

fn client(peer: &Peer, io: BackendChoice, aes: bool) -> DfsClient {
    let c = conf_of(peer);
    let nn = NameNodeClient::from_conf(&c).expect("namenode client");
    let mut cfg = DfsConfig::from_conf(&c).expect("dfs config");
    assert!(cfg.encrypt_aes, "the peer's hdfs-site.xml asks for AES");
    cfg.encrypt_aes = aes;
    cfg.io = io;
    cfg.retry_window_base = Duration::from_millis(200);
    cfg.max_block_acquire_failures = 1;
    // Every block has a replica on each of the 3 DataNodes (replication 3): pretending to be
    // DataNode 0's host makes it every read's first choice, so that a read finds the
    // connection an earlier one left in the cache (the NameNode shuffles equal distances).
    assert_eq!(peer.ready()["replication"], 3);
    let dn0 = peer.datanodes().expect("datanodes")[0].host.clone();
    DfsClient::new(
        nn,
        cfg,
        LocalNode::with_names([dn0]),
        RackMap::default(),
        None,
    )
}

fn write(peer: &mut Peer, path: &str, bytes: u64) -> Value {
    peer.command(&format!("write {path} {bytes}"))
        .expect("write")
}

#[test]
fn aes_read_of_a_multi_block_file_is_byte_identical() {
    let mut peer = HDFS.lock().expect("hdfs peer");
    let len = (4u64 << 20) + 12_345;
    let w = write(&mut peer, "/enc/f", len);
    assert_eq!(w["blocks"], 5);
    let mut ios = vec![BackendChoice::Epoll];
    if client(&peer, BackendChoice::Uring, true)
        .recv_path()
        .is_ok()
    {
        ios.push(BackendChoice::Uring);
    }
    for io in ios {
        let c = client(&peer, io, true);
        let mut out = Vec::with_capacity(len as usize);
        let st = c.read("/enc/f", 0, None, &mut out).expect("read");
        assert_eq!(out.len() as u64, len, "{io:?}");
        assert_eq!(sha256_hex(&out), w["sha256"].as_str().unwrap(), "{io:?}");
        assert_eq!(st.blocks, 5);
        assert_eq!(st.replica_failures, 0, "{st:?}");
        assert!(st.encrypted_handshakes >= 1, "{st:?}");
        // unaligned ranges across block boundaries, on the cached (encrypted) connections
        for (off, n) in [(511u64, 1025u64), ((1 << 20) - 3, 10), (12_345, 3_000_000)] {
            let mut part = Vec::new();
            let st = c
                .read("/enc/f", off, Some(n), &mut part)
                .expect("range read");
            assert_eq!(part, content::range(off, n as usize), "{io:?} {off}+{n}");
            assert_eq!(st.replica_failures, 0, "{st:?}");
        }
        let st = c
            .read("/enc/f", 0, Some(2 << 20), &mut Vec::new())
            .expect("again");
        assert!(st.reused_connections >= 1, "{st:?}");
    }
}

/// The first block of `path`: its ExtendedBlockProto and TokenProto bytes, and its first
/// replica's address.
fn first_block(
    nn: &NameNodeClient,
    path: &str,
) -> (
    Vec<u8>,
    hadoop_wire::pb::hadoop::common::TokenProto,
    SocketAddr,
    BlockName,
) {
    let locs = nn.get_block_locations(path, 0, 1).expect("locations");
    let lbs = LocatedBlocksProto::decode(locs.bytes()).expect("LocatedBlocksProto");
    let b = &lbs.blocks[0];
    let id = &b.locs[0].id;
    let addr: SocketAddr = format!("{}:{}", id.host_name, id.xfer_port)
        .parse()
        .expect("addr");
    let name = BlockName {
        pool_id: b.b.pool_id.clone(),
        block_id: b.b.block_id,
        generation_stamp: b.b.generation_stamp,
    };
    (b.b.encode_to_vec(), b.block_token.clone(), addr, name)
}

#[test]
fn a_wrong_or_unknown_encryption_key_fails_clearly_without_hanging() {
    let mut peer = HDFS.lock().expect("hdfs peer");
    write(&mut peer, "/enc/k", 1000);
    let nn = NameNodeClient::from_conf(&conf_of(&peer)).expect("nn");
    let key: DataEncryptionKey = nn
        .get_data_encryption_key()
        .expect("getDataEncryptionKey")
        .expect("the NameNode encrypts data transfer");
    let (_, _, addr, name) = first_block(&nn, "/enc/k");
    let timeout = Duration::from_secs(20);
    let run = |k: &DataEncryptionKey| {
        let mut s = connect(addr, timeout, timeout).expect("connect");
        let t = Instant::now();
        let r = handshake(&mut s, Credentials::EncryptionKey(k), true, &name, "dn");
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
        r
    };
    // the real key works
    assert!(
        matches!(run(&key).expect("handshake"), Protection::Aes(_)),
        "AES chosen"
    );
    // wrong key bytes: DIGEST-MD5 fails on the DataNode, which says so
    let mut wrong = key.clone();
    wrong.encryption_key[0] ^= 1;
    match run(&wrong) {
        Err(e @ Error::DataTransferSasl { .. }) => {
            assert!(!e.is_unknown_encryption_key(), "{e}");
            assert!(
                matches!(
                    &e,
                    Error::DataTransferSasl {
                        source: TransferSaslError::Refused(_),
                        ..
                    }
                ),
                "{e:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    // a key id the DataNode never heard of: ERROR_UNKNOWN_KEY (the client refetches)
    let mut unknown = key.clone();
    unknown.key_id = unknown.key_id.wrapping_add(7777);
    match run(&unknown) {
        Err(e) => assert!(e.is_unknown_encryption_key(), "{e:?}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_invalid_block_token_is_error_access_token() {
    let mut peer = HDFS.lock().expect("hdfs peer");
    write(&mut peer, "/enc/t", 3000);
    let nn = NameNodeClient::from_conf(&conf_of(&peer)).expect("nn");
    let key = nn
        .get_data_encryption_key()
        .expect("getDataEncryptionKey")
        .expect("key");
    let (block, token, addr, name) = first_block(&nn, "/enc/t");
    assert!(!token.password.is_empty(), "block tokens are on");
    let timeout = Duration::from_secs(20);
    let read_with = |token: &hadoop_wire::pb::hadoop::common::TokenProto| {
        let mut s = connect(addr, timeout, timeout).expect("connect");
        let Protection::Aes(mut crypt) =
            handshake(&mut s, Credentials::EncryptionKey(&key), true, &name, "dn")
                .expect("handshake")
        else {
            panic!("AES not chosen");
        };
        let tb = token.encode_to_vec();
        let req = ReadBlockRequest {
            block: &block,
            token: &tb,
            client_name: "DFSClient_hotpath_test",
            offset: 0,
            len: 3000,
        };
        let mut read = BlockRead::new(name.clone(), "dn".into(), 0, 3000);
        let mut out = Vec::new();
        let r = read_block_on_with(
            &mut s,
            Some(&mut crypt),
            &req,
            &mut read,
            &mut RecvBuf::default(),
            &mut Vec::new(),
            &mut |b: &[u8]| {
                out.extend_from_slice(b);
                Ok(())
            },
            "dn",
        );
        (r, out)
    };
    let (r, out) = read_with(&token);
    assert!(r.error.is_none(), "{:?}", r.error);
    assert_eq!(out, content::range(0, 3000));
    let mut forged = token.clone();
    forged.password[0] ^= 0x80;
    let (r, out) = read_with(&forged);
    let e = r.error.expect("refused");
    assert!(e.is_access_token_error(), "{e:?}");
    assert!(e.to_string().contains("ERROR_ACCESS_TOKEN"), "{e}");
    assert!(out.is_empty());
}

#[test]
fn without_aes_reads_go_through_the_digest_layer_byte_exact() {
    let mut peer = HDFS.lock().expect("hdfs peer");
    let len = (3u64 << 20) + 777;
    let w = write(&mut peer, "/enc/noaes", len);
    // the client offers no AES: the DataNode keeps the DIGEST auth-conf layer (3DES, the
    // JDK's first cipher) on the streams
    let c = client(&peer, BackendChoice::Auto, false);
    let mut out = Vec::new();
    let st = c.read("/enc/noaes", 0, None, &mut out).expect("3des read");
    assert_eq!(out.len() as u64, len);
    assert_eq!(sha256_hex(&out), w["sha256"].as_str().unwrap());
    assert_eq!(st.replica_failures, 0, "{st:?}");
    assert_eq!(st.sasl_layer_reads, st.blocks, "{st:?}");
    assert!(st.encrypted_handshakes >= 1, "{st:?}");
    // ranges on the cached connections: sequence numbers and CBC state run on across ops
    for (off, n) in [(511u64, 1025u64), ((1 << 20) - 3, 10), (12_345, 2_000_000)] {
        let mut part = Vec::new();
        let st = c
            .read("/enc/noaes", off, Some(n), &mut part)
            .expect("range read");
        assert_eq!(part, content::range(off, n as usize), "{off}+{n}");
        assert_eq!(st.replica_failures, 0, "{st:?}");
        assert!(st.reused_connections >= 1, "{st:?}");
    }

    // RC4 (`dfs.encrypt.data.transfer.algorithm=rc4` puts it in the key): the DataNode offers
    // it; two reads on one connection
    let nn = NameNodeClient::from_conf(&conf_of(&peer)).expect("nn");
    let mut key = nn
        .get_data_encryption_key()
        .expect("getDataEncryptionKey")
        .expect("key");
    key.encryption_algorithm = Some("rc4".into());
    let (block, token, addr, name) = first_block(&nn, "/enc/noaes");
    let timeout = Duration::from_secs(20);
    let mut s = connect(addr, timeout, timeout).expect("connect");
    let Protection::Sasl(mut layer) =
        handshake(&mut s, Credentials::EncryptionKey(&key), false, &name, "dn")
            .expect("rc4 handshake")
    else {
        panic!("no DIGEST layer");
    };
    assert_eq!(layer.qop(), hadoop_wire::sasl::Qop::AuthConf);
    let tb = token.encode_to_vec();
    let mut buf = RecvBuf::default();
    for (off, n) in [(0u64, 1u64 << 20), (100_001, 300_000)] {
        let req = ReadBlockRequest {
            block: &block,
            token: &tb,
            client_name: "DFSClient_hotpath_test",
            offset: off,
            len: n,
        };
        let mut read = BlockRead::new(name.clone(), "dn".into(), off, n);
        let mut part = Vec::new();
        let r = read_block_on_sasl(
            &mut s,
            &mut layer,
            &req,
            &mut read,
            &mut buf,
            &mut Vec::new(),
            &mut |b: &[u8]| {
                part.extend_from_slice(b);
                Ok(())
            },
            "dn",
        );
        assert!(r.error.is_none() && read.is_done(), "{:?}", r.error);
        assert_eq!(part, content::range(off, n as usize), "rc4 {off}+{n}");
    }
}
