//! hdfs-io against the real MiniDFSCluster (peer-harness `hdfs` mode: 3 DataNodes on
//! 127.0.0.2-4 in racks /r1, /r1, /r2, 1 MiB blocks). One peer per test binary; the shared
//! lock serialises the tests, and each leaves every DataNode running.

use hdfs_io::dfs::{DfsClient, DfsConfig};
use hdfs_io::file_status::FileType;
use hdfs_io::namenode::NameNodeClient;
use hdfs_io::topology::{LocalNode, RackMap};
use hdfs_io::Error;
use peer_harness::{content, Mode, Peer, Shared};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::io::Write;

static HDFS: Shared = Shared::new(
    Mode::Hdfs,
    &[
        // connections stay reusable however slow this machine is between reads
        "--set",
        "dfs.client.socketcache.expiryMsec=120000",
        "--set",
        "dfs.datanode.socket.reuse.keepalive=120000",
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

/// A client from the peer's site files; `local` pretends this host is that DataNode host
/// (so the local-first rule makes it the first choice).
fn client(peer: &Peer, local: Option<&str>) -> DfsClient {
    let c = conf_of(peer);
    let nn = NameNodeClient::from_conf(&c).expect("namenode client");
    let mut cfg = DfsConfig::from_conf(&c).expect("dfs config");
    cfg.retry_window_base = std::time::Duration::from_millis(200);
    let local = local
        .map(|h| LocalNode::with_names([h]))
        .unwrap_or_default();
    DfsClient::new(nn, cfg, local, RackMap::default(), None)
}

fn write(peer: &mut Peer, path: &str, bytes: u64) -> Value {
    peer.command(&format!("write {path} {bytes}"))
        .expect("write")
}

/// The replica hosts of block `i` of `path`, in the NameNode's order.
fn replica_hosts(peer: &mut Peer, path: &str, i: usize) -> Vec<(u64, String, String)> {
    let b = peer
        .command(&format!("block-locations {path}"))
        .expect("block-locations");
    b["blocks"][i]["locations"]
        .as_array()
        .expect("locations")
        .iter()
        .map(|l| {
            (
                l["dn_index"].as_u64().expect("dn_index"),
                l["host_name"].as_str().expect("host").to_string(),
                l["uuid"].as_str().expect("uuid").to_string(),
            )
        })
        .collect()
}

#[test]
fn stat_of_a_file_and_a_directory() {
    let mut peer = HDFS.lock().expect("hdfs peer");
    write(&mut peer, "/interop/stat/f", 2_500_000);
    let c = client(&peer, None);
    let st = c.stat("/interop/stat/f").expect("stat");
    assert_eq!(st.file_type, FileType::File);
    assert_eq!(st.length, 2_500_000);
    assert_eq!(st.blocksize, 1 << 20);
    assert_eq!(st.block_replication, 3);
    assert_eq!(st.mode_string(), "-rw-r--r--");
    assert!(!st.owner.is_empty() && !st.group.is_empty());
    assert!(st.modification_time > 1_600_000_000_000);
    assert!(!st.erasure_coded && !st.encrypted);
    let d = c.stat("/interop/stat").expect("stat dir");
    assert_eq!(d.file_type, FileType::Dir);
    assert_eq!(d.children_num, 1);
    assert!(
        c.namenode().state_id().is_some(),
        "the NameNode sends stateIds (state context enabled)"
    );
}

#[test]
fn missing_path_is_file_not_found() {
    let peer = HDFS.lock().expect("hdfs peer");
    let c = client(&peer, None);
    match c.stat("/interop/does/not/exist") {
        Err(e @ Error::FileNotFound { .. }) => {
            assert!(e.to_string().contains("/interop/does/not/exist"))
        }
        other => panic!("{other:?}"),
    }
    let mut out = Vec::new();
    let e = c
        .read("/interop/does/not/exist", 0, None, &mut out)
        .unwrap_err();
    assert!(e.is_file_not_found(), "{e:?}");
    // the NameNode's own exception, with its message
    if let Error::Remote(r) = &e {
        assert_eq!(r.class, "java.io.FileNotFoundException");
        assert!(
            r.message.contains("/interop/does/not/exist"),
            "{}",
            r.message
        );
    } else {
        panic!("expected the NameNode's FileNotFoundException, got {e:?}");
    }
    assert!(out.is_empty());
}

#[test]
fn cat_of_a_five_block_file_is_byte_identical() {
    let mut peer = HDFS.lock().expect("hdfs peer");
    let len = 5u64 << 20;
    let w = write(&mut peer, "/interop/cat/f5", len);
    assert_eq!(w["blocks"], 5);
    let c = client(&peer, None);
    let mut out = Vec::with_capacity(len as usize);
    let stats = c.read("/interop/cat/f5", 0, None, &mut out).expect("read");
    assert_eq!(out.len() as u64, len);
    assert_eq!(sha256_hex(&out), w["sha256"].as_str().expect("sha256"));
    assert_eq!(stats.blocks, 5);
    assert_eq!(stats.replica_failures, 0);
    // ranges: unaligned, across block boundaries, a single byte, the tail
    for (off, n) in [
        (1u64, 1u64),
        (511, 1025),
        ((1 << 20) - 3, 10),
        (3 << 20, 1 << 20),
        (len - 1, 1),
        (12345, 3_000_000),
    ] {
        let mut part = Vec::new();
        c.read("/interop/cat/f5", off, Some(n), &mut part)
            .expect("range read");
        assert_eq!(part, content::range(off, n as usize), "{off}+{n}");
    }
    // past the end: clamped, as Java's read returns EOF
    let mut tail = Vec::new();
    c.read("/interop/cat/f5", len - 10, Some(100), &mut tail)
        .expect("tail");
    assert_eq!(tail, content::range(len - 10, 10));
    // the connections were reused (peer cache)
    let stats = c
        .read("/interop/cat/f5", 0, Some(2 << 20), &mut Vec::new())
        .expect("again");
    assert!(stats.reused_connections >= 1, "{stats:?}");
}

/// Writes to `peer` (a command) once `after` bytes went by.
struct StopAfter<'a> {
    out: Vec<u8>,
    after: usize,
    peer: &'a mut Peer,
    command: Option<String>,
}

impl Write for StopAfter<'_> {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.out.extend_from_slice(b);
        if self.out.len() >= self.after {
            if let Some(c) = self.command.take() {
                self.peer.command(&c).map_err(std::io::Error::other)?;
            }
        }
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn read_survives_a_datanode_stopped_mid_file() {
    let mut peer = HDFS.lock().expect("hdfs peer");
    let len = 5u64 << 20;
    let w = write(&mut peer, "/interop/stop/f5", len);
    // prefer the first replica of block 0 (as if this client ran on its host), then stop that
    // DataNode once 1.5 blocks went by: later blocks on it must come from other replicas
    let (dn_index, host, uuid) = replica_hosts(&mut peer, "/interop/stop/f5", 0).remove(0);
    let c = client(&peer, Some(&host));
    let mut sink = StopAfter {
        out: Vec::new(),
        after: 3 << 19,
        peer: &mut peer,
        command: Some(format!("dn-stop {dn_index}")),
    };
    let res = c.read("/interop/stop/f5", 0, None, &mut sink);
    let out = std::mem::take(&mut sink.out);
    let stopped = sink.command.is_none();
    drop(sink);
    peer.command(&format!("dn-restart {dn_index}"))
        .expect("restart");
    let stats = res.expect("read with a DataNode stopped");
    assert!(stopped);
    assert_eq!(sha256_hex(&out), w["sha256"].as_str().expect("sha256"));
    assert!(stats.replica_failures >= 1, "{stats:?}");
    let dead = c.dead_nodes().snapshot(std::time::Instant::now());
    assert!(dead.iter().any(|d| d.uuid == uuid.as_bytes()), "{dead:?}");
    // the dead-node memory is shared by the next read: it does not try the stopped node again
    // (the NameNode still lists it: its heartbeat has not expired)
    let again = c
        .read("/interop/stop/f5", 0, None, &mut Vec::new())
        .expect("second read");
    assert_eq!(again.replica_failures, 0, "{again:?}");
}

#[test]
fn corrupt_replica_is_detected_reported_and_read_elsewhere() {
    let mut peer = HDFS.lock().expect("hdfs peer");
    let len = 3u64 << 20;
    let w = write(&mut peer, "/interop/corrupt/f3", len);
    // (the NameNode shuffles equally distant replicas per call: take the host from the reply)
    let r = peer
        .command("corrupt /interop/corrupt/f3 1 0")
        .expect("corrupt");
    let host = r["xfer"]
        .as_str()
        .and_then(|x| x.rsplit_once(':'))
        .expect("xfer")
        .0
        .to_string();
    let dn_index = r["dn_index"].as_u64().expect("dn_index") as usize;
    let uuid = peer
        .datanodes()
        .expect("datanodes")
        .into_iter()
        .find(|d| d.index == dn_index)
        .expect("dn")
        .uuid;
    // this client "runs on" the corrupt replica's host: it reads that replica first
    let c = client(&peer, Some(&host));
    let mut out = Vec::new();
    let stats = c
        .read("/interop/corrupt/f3", 0, None, &mut out)
        .expect("read");
    assert_eq!(sha256_hex(&out), w["sha256"].as_str().expect("sha256"));
    assert_eq!(stats.checksum_failures, 1, "{stats:?}");
    assert_eq!(stats.reported_bad, 1, "{stats:?}");
    let dead = c.dead_nodes().snapshot(std::time::Instant::now());
    assert!(
        dead.iter()
            .any(|d| d.uuid == uuid.as_bytes()
                && d.failure == hdfs_io::dead_nodes::Failure::Checksum),
        "{dead:?}"
    );
    // the NameNode took the report: the corrupt replica is gone from (or marked in) the locations
    let mut ok = false;
    for _ in 0..50 {
        let b = peer
            .command("block-locations /interop/corrupt/f3")
            .expect("block-locations");
        let blk = &b["blocks"][1];
        let still = blk["locations"]
            .as_array()
            .expect("locs")
            .iter()
            .any(|l| l["uuid"] == uuid.as_str());
        if !still || blk["corrupt"] == true {
            ok = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(ok, "the NameNode still lists the corrupt replica as good");
}

#[test]
fn filestatus_bench_runs_against_the_namenode() {
    let mut peer = HDFS.lock().expect("hdfs peer");
    peer.command("mkfiles /interop/fs 100").expect("mkfiles");
    let c = client(&peer, None);
    let paths: Vec<String> = (0..100).map(|i| format!("/interop/fs/f{i}")).collect();
    let r = testkit::filestatus::run(
        c.namenode(),
        &paths,
        4,
        std::time::Duration::from_secs(2),
        None,
    )
    .expect("bench");
    eprintln!("{}", r.to_json());
    assert!(r.ops > 100, "{r:?}");
    assert_eq!((r.errors, r.missing), (0, 0), "{r:?}");
    // paced: about the offered rate
    let p = testkit::filestatus::run(
        c.namenode(),
        &paths,
        2,
        std::time::Duration::from_secs(2),
        Some(200.0),
    )
    .expect("paced");
    assert!(p.ops_per_sec < 260.0 && p.ops_per_sec > 50.0, "{p:?}");
}

#[test]
fn both_receive_paths_read_identical_bytes_and_reuse_connections() {
    use hdfs_io::receive::{self, RecvPath};
    use ipc::transport::BackendChoice;
    let mut peer = HDFS.lock().expect("hdfs peer");
    let len = (3u64 << 20) + 4321;
    let w = write(&mut peer, "/interop/paths/f4", len);
    let uring_ok = ipc::transport::uring::probe().is_ok();
    for (io, want) in [
        (BackendChoice::Uring, RecvPath::Uring),
        (BackendChoice::Epoll, RecvPath::Blocking),
    ] {
        if want == RecvPath::Uring && !uring_ok {
            eprintln!("io_uring unavailable here: only the blocking path runs");
            continue;
        }
        let c = conf_of(&peer);
        let mut cfg = DfsConfig::from_conf(&c).expect("dfs config");
        cfg.io = io;
        let client = DfsClient::new(
            NameNodeClient::from_conf(&c).expect("namenode client"),
            cfg,
            LocalNode::default(),
            RackMap::default(),
            None,
        );
        assert_eq!(client.recv_path().expect("path"), want);
        // on a fresh thread: its own ring and pool
        let (out, stats, again, rx) = std::thread::scope(|s| {
            s.spawn(|| {
                let mut out = Vec::new();
                let stats = client
                    .read("/interop/paths/f4", 0, None, &mut out)
                    .expect("read");
                let mut part = Vec::new();
                let again = client
                    .read("/interop/paths/f4", 1_000_001, Some(2_000_000), &mut part)
                    .expect("range read");
                assert_eq!(part, content::range(1_000_001, 2_000_000));
                (out, stats, again, receive::thread_stats())
            })
            .join()
            .expect("reader thread")
        });
        assert_eq!(sha256_hex(&out), w["sha256"].as_str().expect("sha256"));
        assert_eq!(stats.blocks, 4);
        assert_eq!(stats.replica_failures, 0, "{stats:?}");
        assert!(again.reused_connections >= 1, "{io:?}: {again:?}");
        match want {
            RecvPath::Uring => {
                assert_eq!(stats.uring_reads, 4, "{stats:?}");
                let rx = rx.expect("the reading thread made a receiver");
                assert_eq!(rx.reads, 4 + again.uring_reads);
                assert!(rx.bytes >= len + 2_000_000, "{rx:?}");
                // 64 KiB packets: only prefixes (at most 64 bytes pending at a chunk's end)
                // move, never data in bulk
                let bound = 64 * (rx.bytes / (receive::CHUNK_SIZE as u64 / 2) + 2 * rx.reads);
                assert!(rx.moved <= bound && bound < rx.bytes / 1000, "{rx:?}");
                assert_eq!((rx.overflows, rx.timeouts), (0, 0), "{rx:?}");
                eprintln!("io_uring receive: {rx:?}");
            }
            RecvPath::Blocking => {
                assert_eq!(stats.uring_reads, 0, "{stats:?}");
                assert!(rx.is_none(), "no ring on the blocking path");
            }
        }
    }
}

/// A sink that refuses everything after `after` bytes, as a full disk would.
struct FullAfter {
    got: usize,
    after: usize,
}

impl Write for FullAfter {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        if self.got >= self.after {
            return Err(std::io::Error::new(
                std::io::ErrorKind::StorageFull,
                "no space left on device",
            ));
        }
        self.got += b.len();
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_failing_sink_ends_the_read_with_a_sink_error_and_blames_no_replica() {
    let mut peer = HDFS.lock().expect("hdfs peer");
    let len = 3u64 << 20;
    write(&mut peer, "/interop/sink/f3", len);
    let c = client(&peer, None);
    let mut sink = FullAfter {
        got: 0,
        after: 1 << 20,
    };
    let e = c
        .read("/interop/sink/f3", 0, None, &mut sink)
        .expect_err("the sink fails");
    match &e {
        Error::Sink { source } => assert_eq!(source.kind(), std::io::ErrorKind::StorageFull),
        other => panic!("expected Error::Sink, got {other:?}"),
    }
    // the data was fine: no replica was marked dead or tried again
    let dead = c.dead_nodes().snapshot(std::time::Instant::now());
    assert!(dead.is_empty(), "{dead:?}");
    assert!(
        sink.got >= 1 << 20 && sink.got < len as usize,
        "{}",
        sink.got
    );
}
