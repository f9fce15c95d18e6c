//! What the Kerberized hdfs-io tests (`kerberos_*.rs`, each its own peer) share: one definition
//! of the peer's arguments, a client of the peer's realm with a kinit ticket cache, and what
//! they read from the peer.

#![allow(dead_code, unused_macros)] // each test file uses its part

use std::path::Path;
use std::time::Duration;

use hdfs_io::dfs::{DfsClient, DfsConfig};
use hdfs_io::namenode::{NameNodeClient, NameNodeConfig, NameNodeKerberos};
use hdfs_io::topology::{LocalNode, RackMap};
use peer_harness::{Kerberos, Peer};
use sha2::{Digest, Sha256};
use tempfile::TempDir;

/// `hdfs` or `hdfs-ha` with `--kerberos true`: one DataNode on the shared IP, permissions off
/// (a client principal may create what it likes); then the test file's own arguments
/// (`$extra`).
macro_rules! kerberos_args {
    ($($extra:expr),* $(,)?) => {
        &[
            "--datanodes",
            "1",
            "--shared-ip",
            "true",
            "--kerberos",
            "true",
            "--set",
            "dfs.permissions.enabled=false",
            $($extra),*
        ]
    };
}

/// `kerberos_args!` for block reads: AES/CTR/NoPadding offered for the data transfer,
/// connections kept reusable however slow this machine is between reads; then `$extra`.
macro_rules! kerberos_read_args {
    ($($extra:expr),* $(,)?) => {
        kerberos_args!(
            "--set",
            "dfs.client.socketcache.expiryMsec=120000",
            "--set",
            "dfs.datanode.socket.reuse.keepalive=120000",
            "--set",
            "dfs.encrypt.data.transfer.cipher.suites=AES/CTR/NoPadding",
            $($extra),*
        )
    };
}

/// The peer's READY `kerberos`, this process made a client of its realm with a ticket cache
/// `kinit` filled in a new directory (`Kerberos::kinit_process`: MIT's environment is
/// process-wide, call this under the peer's lock), and the site files the peer wrote. The
/// cache lives as long as the directory.
pub fn kinit_client(peer: &Peer) -> (Kerberos, TempDir, conf::Configuration) {
    let k = peer.kerberos().expect("READY kerberos");
    let dir = tempfile::tempdir().unwrap();
    k.kinit_process(dir.path()).expect("kinit");
    let conf = conf::Configuration::load_dir(peer.conf_dir()).expect("peer conf dir");
    (k, dir, conf)
}

/// A client logging in as `principal` from `keytab` (the MIT environment not used).
pub fn keytab_client(
    conf: &conf::Configuration,
    principal: Option<&str>,
    keytab: &Path,
) -> Result<NameNodeClient, hdfs_io::Error> {
    NameNodeClient::from_conf_with(
        conf,
        NameNodeConfig {
            kerberos: Some(NameNodeKerberos {
                server_principal: String::new(),
                client_principal: principal.map(str::to_string),
                keytab: Some(keytab.to_path_buf()),
            }),
            ..NameNodeConfig::default()
        },
    )
}

/// A block-reading client on `nn` from the site files (Kerberized, AES offered there), AES
/// offered or not (`aes`); a short retry window and one attempt at a block, so that a failure
/// shows at once.
pub fn dfs_client(nn: NameNodeClient, conf: &conf::Configuration, aes: bool) -> DfsClient {
    let mut cfg = DfsConfig::from_conf(conf).expect("dfs config");
    assert!(cfg.kerberos && cfg.encrypt_aes, "{cfg:?}");
    cfg.encrypt_aes = aes;
    cfg.retry_window_base = Duration::from_millis(100);
    cfg.max_block_acquire_failures = 1;
    DfsClient::new(nn, cfg, LocalNode::default(), RackMap::default(), None)
}

/// How many times `needle` occurs in the peer's log.
pub fn log_count(peer: &Peer, needle: &str) -> usize {
    std::fs::read_to_string(peer.log_path())
        .expect("peer log")
        .matches(needle)
        .count()
}

pub fn sha256_hex(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The number `field` of the HA NameNode in `state`, from the peer's `namenodes`.
fn namenode_number(peer: &mut Peer, state: &str, field: &str) -> u64 {
    let r = peer.command("namenodes").expect("namenodes");
    r["namenodes"]
        .as_array()
        .expect("namenodes")
        .iter()
        .find(|n| n["state"] == state)
        .and_then(|n| n[field].as_u64())
        .unwrap_or_else(|| panic!("no {state} NameNode in {r}"))
}

/// The index of the HA NameNode in `state` (nn0, nn1, nn2 in the site files).
pub fn index_of(peer: &mut Peer, state: &str) -> usize {
    namenode_number(peer, state, "index") as usize
}

/// The `rpc_requests` counter of the HA NameNode in `state`.
pub fn rpc_requests(peer: &mut Peer, state: &str) -> u64 {
    namenode_number(peer, state, "rpc_requests")
}
