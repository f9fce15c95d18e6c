//! `hadoop-wire`: Hadoop's wire formats, sans-IO. Bytes in, values out; no sockets, no threads,
//! no io_uring, no libc. `ipc` (the only crate that touches sockets) drives it, and the fuzz
//! targets test it alone.
//!
//! ```text
//!   proto/*.proto ──(regen-proto: protox + prost-build)──> pb  (owned prost types; the reference codec)
//!                                                          │  DESCRIPTOR_SET (hotpath decode)
//!   bytes from a transport
//!       │
//!       ▼
//!   frame::FrameDecoder / FrameAccumulator (4-byte length, capped before any allocation)
//!       │ &[u8] frame body
//!       ▼
//!   frame::RequestFrame / ResponseFrame (split at varint prefixes)
//!       │ &[u8] parts
//!       ▼
//!   view::* (lazy, allocation-free; built on reader::Reader) ──> a protocol handler
//!                                                                 │ reply
//!   encode::* (LengthPrefixed writer, hand-encoded hot headers) ◀─┘ into the caller's buffer
//! ```
//!
//! - [`pb`]: prost code generated from our own proto2 `.proto` files, checked in; regenerate with
//!   `cargo build -p hadoop-wire --features regen-proto` (no protoc needed). Views are checked
//!   against it.
//! - [`reader`]: the borrowing protobuf [`reader::Reader`] and [`reader::DecodeError`].
//! - [`view`]: lazy views of the hot messages (RPC headers, NodeHeartbeatRequest → ContainerStatus,
//!   LocatedBlocks → DatanodeInfo, PacketHeader). A view reads a field only when asked and never
//!   allocates; `validate()` checks a whole message once.
//! - [`frame`]: zerocopy fixed layouts (frame length, `hrpc` preamble, DataTransfer packet prefix),
//!   the capped frame decoder, request/response splitting, packet parsing.
//! - [`writer`]: the one protobuf writer ([`writer::Encode`] over a [`writer::Sink`]: a
//!   [`writer::Writer`] for bytes, a [`writer::Counter`] for exact lengths).
//! - [`encode`]: the length-prefix writer that patches its length, and the frame encoders.
//! - [`rpc`], [`hdfs`]: modules by protocol noun that own their constants and exception class
//!   names; [`rpc::client`] is the sans-IO client connection state machine.
//! - [`sasl`]: SASL on IPC: the mechanism traits, DIGEST-MD5, the protection layer, the
//!   negotiation state machines, our Kerberos per-message layer (RFC 4121 with RFC 3962 and
//!   RFC 8009 enctypes). [`token`]: tokens, Credentials files, identifiers, the secret
//!   managers. [`entropy`]: random bytes, supplied by the caller. [`time`]: the calendar
//!   arithmetic behind the dates Java prints into wire texts.
//! - [`yarn`]: YARN's protocol nouns: application and container ids, `ContainerExitStatus`,
//!   the names and methods of the ResourceTracker, ContainerManagement, ApplicationClient and
//!   ApplicationMaster protocols, the Hadoop version we report.
//!
//! Errors: each layer has its typed enum ([`FrameError`], [`reader::DecodeError`],
//! [`EncodeError`]); [`Error`] unites them.

#![forbid(unsafe_code)]

pub mod encode;
pub mod entropy;
pub mod error;
pub mod frame;
pub mod hdfs;
pub mod pb;
pub mod reader;
pub mod rpc;
pub mod sasl;
pub mod time;
pub mod token;
pub mod view;
pub mod writer;
pub mod yarn;

pub use error::{EncodeError, Error, FrameError};
