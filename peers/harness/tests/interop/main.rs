//! The harness's own tests: each starts the real Hadoop peer (HDFS, HA, Kerberized HDFS, YARN,
//! the SASL peer) or its launcher, so all of them are behind the `interop` feature, in one
//! binary. Each module is one former `tests/<name>.rs`.

mod harness_errors;
mod hdfs_ha_smoke;
mod hdfs_kerberos_smoke;
mod hdfs_smoke;
mod sasl_peer_smoke;
mod yarn_app_java;
mod yarn_rm_smoke;
