//! `ipc`: Hadoop IPC v9 (protobuf RPC, SIMPLE auth), the one crate that touches sockets.
//!
//! The codec is sans-IO (bytes in, values out); the transport drives it.
//!
//! ```text
//!   ipc/proto/*.proto ──(regen-proto: protox + prost-build)──> pb  (owned prost types; the reference codec)
//!                                                               │  DESCRIPTOR_SET (hotpath decode)
//!   socket bytes ─> transport (io_uring | epoll, one ring per pinned thread, BufferPool)
//!                     │ recv buffers                                     ▲ pool chunks
//!                     ▼                                                  │
//!                   frame::FrameDecoder / FrameAccumulator (4-byte length, capped before any allocation)
//!                     │ &[u8] frame body
//!                     ▼
//!                   frame::RequestFrame / ResponseFrame (split at varint prefixes)
//!                     │ &[u8] parts
//!                     ▼
//!                   view::* (lazy, allocation-free; built on reader::Reader) ──> server::Registry handler
//!                                                                                │ Reply
//!                   encode::* (LengthPrefixed writer, hand-encoded hot headers) ◀┘ into pool chunks
//! ```
//!
//! - [`pb`]: prost code generated from our own proto2 `.proto` files, checked in; regenerate with
//!   `cargo build -p ipc --features regen-proto` (no protoc needed). Views are checked against it.
//! - [`reader`]: the borrowing protobuf [`reader::Reader`] and [`reader::DecodeError`].
//! - [`view`]: lazy views of the hot messages (RPC headers, NodeHeartbeatRequest → ContainerStatus,
//!   LocatedBlocks → DatanodeInfo, PacketHeader). A view reads a field only when asked and never
//!   allocates; `validate()` checks a whole message once.
//! - [`frame`]: zerocopy fixed layouts (frame length, `hrpc` preamble, DataTransfer packet prefix),
//!   the capped frame decoder, request/response splitting, packet parsing.
//! - [`encode`]: the length-prefix writer that patches its length, and the frame encoders.
//! - [`transport`]: the event loops (io_uring with an epoll fallback, `HOTPATH_IO=uring|epoll`),
//!   the bounded buffer pool and transmit queue; [`server`] (protocol registry, Hadoop's
//!   ERROR/FATAL rules) and [`client`] (pipelined calls, timeouts, reconnect, stateId) sit on top.
//!
//! Errors: each layer has its typed enum ([`FrameError`], [`reader::DecodeError`],
//! [`EncodeError`], `transport::TransportError`, `server::ServerError`, `client::ClientError`);
//! [`Error`] unites the codec's.

pub mod client;
pub mod encode;
pub mod error;
pub mod frame;
pub mod pb;
pub mod reader;
pub mod server;
pub mod transport;
pub mod view;

pub use error::{EncodeError, Error, FrameError};
