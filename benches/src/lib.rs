//! Every measurement the project makes, kept out of the libraries and out of the installed
//! `hotpath` binary: the criterion benches (`benches/`), the `hotpath-bench` binary
//! (`src/bin/hotpath-bench`: `heartbeat`, `dn-select`, `ipc-large`, `filestatus`,
//! `filestatus-kerberos`, `sasl`, `loadgen heartbeats`, `storm-sweep`, `rm-apps`, `nm-launch`,
//! `loopback-floor`), the examples (`examples/`: `vs_java`, the callgrind profiles, the rate
//! probes), the counting allocator (`alloc-counter/`), and the measuring code they share:
//!
//! - [`heartbeat`] builds a realistic `NodeHeartbeatRequestProto` and holds the two decode
//!   paths the `heartbeat_decode` criterion bench compares (the RM's view path vs prost), so
//!   that the bench, the callgrind example (`examples/heartbeat_decode_once.rs`) and the tests
//!   measure exactly the same code.
//! - [`rm_heartbeat`]: rm-core's heartbeat handling (ours, opportunistic, the eager Java-like
//!   baseline, end to end), on the request fixtures rm-core's tests share (`testkit::heartbeat`).
//! - [`dn_select`]: hdfs-io's DataNode choice beside a per-call URI parse baseline.
//! - [`filestatus`]: the NNThroughputBenchmark-style getFileInfo load (`testkit::filestatus`,
//!   which hdfs-io's tests run against the real NameNode).
//! - [`checksum_rate`]: the read path's CRC verification rate.

#![forbid(unsafe_code)]

pub mod checksum_rate;
pub mod dn_select;
pub use testkit::filestatus;
pub mod heartbeat;
pub mod rm_heartbeat;
