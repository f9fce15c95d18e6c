//! peer-harness: real Apache Hadoop 3.5 as a test peer for hotpath's interop tests.
//!
//! How the pieces connect:
//! - [`build`] makes sure the Maven project in `peers/hadoop` is compiled once per machine
//!   state: a file lock serialises parallel test binaries, a stamp (hash of `pom.xml` and the
//!   Java sources) skips Maven when nothing changed, and `mvn -o` is tried before going online.
//!   It yields a [`build::Build`]: the `java` command line prefix (flags + classpath).
//! - [`peer`] starts one launcher JVM in a [`peer::Mode`] (`hdfs`, `hdfs-ha`, `yarn-rm`,
//!   `yarn-nm`, `yarn-client`, `sasl`; `mr-rm` from the MapReduce peer in `peers/hadoop-mr`,
//!   built the same way) inside a fresh temp dir, waits for its `READY {json}` line, and then exchanges
//!   one-line commands for one-line JSON replies. A [`Peer`] owns the JVM: dropping it (also
//!   during a panic) closes the JVM's stdin, which stops every Hadoop service, and kills it if
//!   it lingers. [`peer::Shared`] keeps one running peer per test binary behind a mutex, which
//!   also serialises the tests that use it.
//! - [`driver`] runs the Java measuring drivers (`FileStatusDriver`, `ReadDriver`) as separate
//!   JVMs against a peer's conf dir and returns their JSON result.
//! - [`content`] is the Rust twin of the launcher's `write` content, so tests can check bytes.
//! - [`mit_kdc`] runs MIT's own KDC on loopback for what the peers' MiniKdc cannot issue (the
//!   RFC 8009 enctypes).
//!
//! Every failure is a [`PeerError`]; start failures carry the tail of the launcher's log.

#![forbid(unsafe_code)]

pub mod build;
pub mod content;
pub mod driver;
pub mod error;
pub mod mit_kdc;
pub mod peer;

pub use driver::Driver;
pub use error::PeerError;
pub use mit_kdc::MitKdc;
pub use peer::{JavaException, Kerberos, Mode, Peer, Shared, SharedGuard};
