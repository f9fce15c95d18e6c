//! `ipc`: Hadoop IPC v9 (protobuf RPC; SIMPLE and SASL TOKEN and KERBEROS auth at every
//! protection level, client and server),
//! the one crate that touches sockets.
//!
//! The codec is `hadoop-wire` (sans-IO: bytes in, values out); this crate drives it.
//!
//! ```text
//!   socket bytes ─> transport (io_uring | epoll, one ring per pinned thread, BufferPool)
//!                     │ recv buffers                                     ▲ pool chunks
//!                     ▼                                                  │
//!                   hadoop_wire::frame (capped frame decoder, request/response splitting)
//!                     │ &[u8] parts
//!                     ▼
//!                   hadoop_wire::view::* ──> server::Registry handler
//!                                              │ Reply
//!                   hadoop_wire::encode::* ◀───┘ into pool chunks
//!
//!   SASL (callId −33, before the context): hadoop_wire::sasl::{server,client} negotiate;
//!   from SUCCESS on, a protected connection's bytes pass through its SecurityLayer:
//!     server  WRAP packets ─unwrap─> inner FrameAccumulator ─> the same frame handling
//!             responses ─> staging ─wrap─> WRAP packets (egress) ─> pool chunks
//!     client  frames ─wrap (pieces ≤ the peer's maxbuf)─> WRAP packets; reader: Unwrapped
//! ```
//!
//! - [`transport`]: the event loops (io_uring with an epoll fallback, `HOTPATH_IO=uring|epoll`),
//!   the bounded buffer pool and transmit queue.
//! - [`server`]: protocol registry, Hadoop's ERROR/FATAL rules, on the transport.
//! - [`client`]: pipelined calls, timeouts, reconnect, stateId, SASL ([`client::ClientConfig::auth`]).
//! - [`kerberos`]: GSS-API contexts on MIT krb5 for KERBEROS (GSSAPI) clients (the server
//!   principal from the protocol's key) and servers (their principal's keys from a keytab).
//! - [`authorize`]: service-level authorization (`hadoop.security.authorization`, per-protocol
//!   ACLs in Hadoop's format, Unix groups).
//! - [`sasl`]: SASL settings from Hadoop's keys (`hadoop.rpc.protection`, ...) and token selection;
//!   [`entropy::OsEntropy`] feeds the DIGEST-MD5 nonces.
//! - [`transport::RecvRing`]: a blocking per-thread receive ring for clients that read one
//!   stream at a time (hdfs-io's block reader), sharing the event loops' ring setup and
//!   registration fallback.
//! - [`buffer_protocol`]: our large-response service (`getBuffer`, `echo`; HADOOP-4797), which
//!   the agent serves and the benches and transport tests drive; registered on a [`server`].
//! - [`metrics`]: the Prometheus text renderer and the `/metrics` HTTP endpoint every service
//!   (RM core, agent) serves its counters with.
//!
//! Errors: `transport::TransportError`, `server::ServerError`, `client::ClientError`,
//! `kerberos::LoginError`; the codec's are `hadoop_wire::Error` and its parts.

pub mod authorize;
pub mod buffer_protocol;
pub mod client;
pub mod entropy;
pub mod kerberos;
pub mod metrics;
pub mod sasl;
pub mod server;
pub mod transport;
