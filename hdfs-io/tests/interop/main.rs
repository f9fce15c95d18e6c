//! hdfs-io against the real HDFS peer (MiniDFSCluster), in one binary built only with the
//! `interop` feature: reads, encryption, HA, missing blocks. Each module is one former
//! `tests/<name>.rs`. The Kerberized ones (`tests/kerberos_*.rs`) set MIT's process-wide
//! environment and stay binaries of their own, behind the same feature.

mod interop_block_missing;
mod interop_encrypted;
mod interop_hdfs;
mod interop_hdfs_ha;
