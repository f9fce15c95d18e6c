//! Every replica gone: the read refetches the locations `dfs.client.max.block.acquire.failures`
//! times with back-off, then fails with BlockMissing naming the block, the offset and what was
//! tried. Its own peer (one DataNode, replication 1), so that stopping it disturbs no other test.

use hdfs_io::dfs::{DfsClient, DfsConfig};
use hdfs_io::namenode::NameNodeClient;
use hdfs_io::topology::{LocalNode, RackMap};
use hdfs_io::Error;
use peer_harness::{content, Mode, Peer};
use std::time::{Duration, Instant};

#[test]
fn all_replicas_down_is_block_missing_after_refetches() {
    let mut peer = Peer::start(Mode::Hdfs, &["--datanodes", "1"]).expect("hdfs peer, 1 DataNode");
    peer.command("write /gone/f 1500000").expect("write");
    let conf = conf::Configuration::load_dir(peer.conf_dir()).expect("conf");
    let mut cfg = DfsConfig::from_conf(&conf).expect("cfg");
    cfg.retry_window_base = Duration::from_millis(100);
    cfg.socket_timeout = Duration::from_secs(5);
    let c = DfsClient::new(
        NameNodeClient::from_conf(&conf).expect("nn"),
        cfg,
        LocalNode::default(),
        RackMap::default(),
        None,
    );
    // block 0 is read; then the only DataNode stops
    let mut first = Vec::new();
    c.read("/gone/f", 0, Some(1000), &mut first)
        .expect("read while up");
    assert_eq!(first, content::range(0, 1000));
    peer.command("dn-stop 0").expect("dn-stop");
    let t = Instant::now();
    let mut out = Vec::new();
    let e = c.read("/gone/f", 1 << 20, None, &mut out).unwrap_err();
    let took = t.elapsed();
    match &e {
        Error::BlockMissing {
            path,
            offset,
            tried,
            checksum_failures,
            ..
        } => {
            assert_eq!(
                *checksum_failures, 0,
                "a stopped DataNode is not a corrupt replica"
            );
            assert_eq!(path, "/gone/f");
            assert_eq!(*offset, 1 << 20);
            assert!(tried.contains("127.0.0.2"), "{tried}");
        }
        other => panic!("{other:?}"),
    }
    assert!(out.is_empty());
    // three refetches with back-off base 100 ms: at least 0.1 + 0.2 + 0.3 s of windows
    assert!(took >= Duration::from_millis(300), "{took:?}");
    eprintln!("{e} after {took:?}");
    peer.command("dn-restart 0").expect("restart");
}
