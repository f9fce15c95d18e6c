//! What hotpath's tests share, as one crate that Cargo can see (no `#[path]` includes across
//! crates). A dev-dependency only: nothing that ships depends on it. `benches` uses its
//! fixtures too, so that the tests and `hotpath-bench` build the same requests.
//!
//! - [`hotpath`]: `hotpath rm` as a child process with its READY addresses, a `/metrics`
//!   sample, and finding the `hotpath` binary from another package's tests.
//! - [`daemon`]: `hotpath agent` / `hotpath rm` daemons for whole-cluster tests, from their
//!   READY line to SIGTERM on drop.
//! - [`app_run`]: `hotpath app run` and what it printed.
//! - [`relay`]: a TCP relay whose connections a test can cut.
//! - [`kerberos`]: a Kerberized peer's realm, keytabs and client principal from its READY line.
//! - [`loopback`]: our `ipc::server` standing in for a Hadoop server on loopback, one SASL token
//!   it accepts, the wait for idle connections to close, this process's TCP rows in `/proc`.
//! - [`heartbeat`]: NodeManager heartbeat and registration requests as Java encodes them.
//! - [`filestatus`]: the NNThroughputBenchmark-style getFileInfo load (`hotpath-bench
//!   filestatus` and hdfs-io's test of it against the real NameNode).
//!
//! The starters take the `hotpath` binary's path: cargo names it (`CARGO_BIN_EXE_hotpath`)
//! only inside the agent's own tests.
#![deny(unsafe_code)] // one exception: kill(2) in `daemon::Daemon`'s drop

pub mod app_run;
pub mod daemon;
pub mod filestatus;
pub mod heartbeat;
pub mod hotpath;
pub mod kerberos;
pub mod loopback;
pub mod relay;
