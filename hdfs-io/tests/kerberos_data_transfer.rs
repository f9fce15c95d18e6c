//! Block reads on a Kerberized Hadoop 3.5 cluster (`hdfs --kerberos true`): the DataNodes
//! require the general SASL handshake (`dfs.data.transfer.protection`, DIGEST-MD5 over the
//! block token, security.md §5) on their unprivileged ports (the DataNode accepts
//! `authentication,integrity,privacy` and offers AES/CTR/NoPadding). The client asks for
//! `authentication` (no stream layer), `privacy` with AES/CTR/NoPadding (the DataNode's AES
//! keys, unwrapped through the DIGEST auth-conf layer), `integrity` (the DIGEST-MD5 stream
//! layer: HMAC-MD5 frames) and `privacy` without offering AES (the stream layer with 3DES).
//!
//! MIT's environment variables are process-wide: each test sets them under the peer's lock.

#[macro_use]
#[path = "support/kerberos.rs"]
mod kerberos;

use std::time::{Duration, Instant};

use hdfs_io::dfs::{DfsClient, DfsConfig};
use hdfs_io::namenode::NameNodeClient;
use hdfs_io::topology::{LocalNode, RackMap};
use kerberos::{dfs_client, kinit_client, sha256_hex};
use peer_harness::{Mode, Shared};

static HDFS: Shared = Shared::new(Mode::Hdfs, kerberos_read_args!());

#[test]
fn block_reads_with_each_data_transfer_protection() {
    let mut peer = HDFS.lock().expect("Kerberized hdfs peer");
    let w = peer.command("write /kerberos/dt/f 2500000").expect("write");
    let (_k, _dir, mut conf) = kinit_client(&peer);
    // (protection, offer AES, reads through the DIGEST stream layer)
    for (protection, aes, layer) in [
        ("authentication", true, false),
        ("privacy", true, false),
        ("integrity", true, true),
        ("privacy", false, true),
    ] {
        conf.set("dfs.data.transfer.protection", protection);
        let nn = NameNodeClient::from_conf(&conf).expect("namenode client");
        let c = dfs_client(nn, &conf, aes);
        let mut out = Vec::new();
        let t = Instant::now();
        let r = c.read("/kerberos/dt/f", 0, None, &mut out);
        assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
        let st = r.unwrap_or_else(|e| panic!("{protection}: {e}\n{}", peer.log_tail(40)));
        assert_eq!(
            sha256_hex(&out),
            w["sha256"].as_str().unwrap(),
            "{protection} aes {aes}"
        );
        assert_eq!(st.replica_failures, 0, "{protection}: {st:?}");
        if layer {
            assert_eq!(st.sasl_layer_reads, st.blocks, "{protection}: {st:?}");
            // a range on the cached connection: the sequence numbers run on
            let mut part = Vec::new();
            let st = c
                .read("/kerberos/dt/f", 1_000_001, Some(70_000), &mut part)
                .unwrap_or_else(|e| panic!("{protection}: {e}"));
            assert_eq!(part, out[1_000_001..1_070_001], "{protection}");
            assert!(st.reused_connections >= 1, "{protection}: {st:?}");
            assert_eq!(st.replica_failures, 0, "{protection}: {st:?}");
        } else {
            assert_eq!(st.sasl_layer_reads, 0, "{protection}: {st:?}");
        }
    }
    // without any protection the DataNode waits for the SASL magic and drops the connection:
    // a clear failure, no hang
    conf.set("dfs.data.transfer.protection", "");
    let nn = NameNodeClient::from_conf(&conf).expect("namenode client");
    let mut cfg = DfsConfig::from_conf(&conf).expect("dfs config");
    cfg.retry_window_base = Duration::from_millis(100);
    cfg.max_block_acquire_failures = 1;
    let c = DfsClient::new(nn, cfg, LocalNode::default(), RackMap::default(), None);
    let t = Instant::now();
    assert!(c.read("/kerberos/dt/f", 0, None, &mut Vec::new()).is_err());
    assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
}
