//! Encrypted data transfer on the Kerberized HA cluster (`hdfs-ha --kerberos true` with
//! `dfs.encrypt.data.transfer=true`): the data encryption key comes from the active
//! (`getDataEncryptionKey` over KERBEROS at `privacy`), the block locations and tokens from the
//! observer, and the DataNode runs the `0xDEADBEEF` handshake over that key, then AES/CTR/NoPadding
//! or, without AES offered, the DIGEST-MD5 (3DES) stream layer. After a failover the new active
//! hands out its own keys and the DataNodes still take the old active's: reads go on, byte-exact,
//! with the key the client holds and with a fresh client's. (`kerberos_hdfs_ha.rs` has the
//! general SASL handshake, `dfs.data.transfer.protection`, on the same kind of cluster.)
//!
//! MIT's environment variables are process-wide: the test sets them under the peer's lock.

#[macro_use]
#[path = "support/kerberos.rs"]
mod kerberos;

use hdfs_io::dfs::DfsClient;
use hdfs_io::namenode::NameNodeClient;
use kerberos::{dfs_client, index_of, kinit_client, sha256_hex};
use peer_harness::{Mode, Peer, Shared};

static HA: Shared = Shared::new(
    Mode::HdfsHa,
    kerberos_read_args!("--set", "dfs.encrypt.data.transfer=true"),
);

fn client(conf: &conf::Configuration, aes: bool) -> DfsClient {
    let nn = NameNodeClient::from_conf(conf).expect("namenode client");
    dfs_client(nn, conf, aes)
}

/// A whole read and a range on the cached connection, byte-exact; the stream layer or not.
fn check_read(
    peer: &Peer,
    c: &DfsClient,
    want: &str,
    aes: bool,
    what: &str,
) -> hdfs_io::dfs::ReadStats {
    let mut out = Vec::new();
    let st = c
        .read("/khe/f", 0, None, &mut out)
        .unwrap_or_else(|e| panic!("{what}: {e}\n{}", peer.log_tail(40)));
    assert_eq!(sha256_hex(&out), want, "{what}");
    assert_eq!(st.replica_failures, 0, "{what}: {st:?}");
    if aes {
        assert_eq!(st.sasl_layer_reads, 0, "{what}: {st:?}");
    } else {
        assert_eq!(st.sasl_layer_reads, st.blocks, "{what}: {st:?}");
    }
    let mut part = Vec::new();
    let st = c
        .read("/khe/f", 1_000_001, Some(70_000), &mut part)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(part, out[1_000_001..1_070_001], "{what}");
    assert_eq!(st.replica_failures, 0, "{what}: {st:?}");
    st
}

#[test]
fn encrypted_reads_with_and_without_aes_across_a_failover() {
    let mut peer = HA.lock().expect("Kerberized hdfs-ha peer");
    let w = peer.command("write /khe/f 2500000").expect("write");
    let want = w["sha256"].as_str().unwrap().to_string();
    let (_k, _dir, mut conf) = kinit_client(&peer);
    conf.set("hadoop.rpc.protection", "privacy");

    let mut keys = Vec::new();
    let clients: Vec<(bool, DfsClient)> = [true, false]
        .into_iter()
        .map(|aes| (aes, client(&conf, aes)))
        .collect();
    for (aes, c) in &clients {
        let key = c
            .namenode()
            .get_data_encryption_key()
            .expect("getDataEncryptionKey")
            .expect("the NameNode encrypts data transfer");
        keys.push(key.key_id);
        let mut out = Vec::new();
        let st = c
            .read("/khe/f", 0, None, &mut out)
            .unwrap_or_else(|e| panic!("aes {aes}: {e}\n{}", peer.log_tail(40)));
        assert!(st.encrypted_handshakes >= 1, "aes {aes}: {st:?}");
        check_read(&peer, c, &want, *aes, &format!("aes {aes}"));
        let mut out = Vec::new();
        let st = c.read("/khe/f", 0, Some(10), &mut out).expect("read");
        assert!(st.reused_connections >= 1, "aes {aes}: {st:?}");
    }

    // a failover: the clients keep the old active's key (and their cached connections); new
    // clients get the new active's
    let to = index_of(&mut peer, "standby");
    peer.command(&format!("failover {to}"))
        .unwrap_or_else(|e| panic!("failover: {e}\n{}", peer.log_tail(40)));
    for (aes, c) in &clients {
        check_read(
            &peer,
            c,
            &want,
            *aes,
            &format!("aes {aes}, after the failover"),
        );
    }
    for aes in [true, false] {
        let c = client(&conf, aes);
        let key = c
            .namenode()
            .get_data_encryption_key()
            .expect("getDataEncryptionKey on the new active")
            .expect("key");
        // each NameNode's block keys have ids of their own range
        assert!(!keys.contains(&key.key_id), "{key:?} after {keys:?}");
        check_read(
            &peer,
            &c,
            &want,
            aes,
            &format!("a new client, aes {aes}, after the failover"),
        );
    }
}
