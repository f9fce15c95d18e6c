//! The Kerberized HA MiniDFSCluster that `kerberos_hdfs_ha.rs` and `kerberos_hdfs_ha_encrypted.rs`
//! start (each its own peer): one definition of the arguments both share.

/// `hdfs-ha --kerberos true`: one DataNode on the shared IP, permissions off, AES/CTR/NoPadding
/// offered for the data transfer, connections kept reusable however slow this machine is
/// between reads; then the test file's own arguments (`$extra`).
macro_rules! kerberos_ha_args {
    ($($extra:literal),* $(,)?) => {
        &[
            "--set",
            "dfs.client.socketcache.expiryMsec=120000",
            "--set",
            "dfs.datanode.socket.reuse.keepalive=120000",
            "--datanodes",
            "1",
            "--shared-ip",
            "true",
            "--kerberos",
            "true",
            "--set",
            "dfs.permissions.enabled=false",
            "--set",
            "dfs.encrypt.data.transfer.cipher.suites=AES/CTR/NoPadding",
            $($extra),*
        ]
    };
}
