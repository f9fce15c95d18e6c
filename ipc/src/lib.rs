//! ipc: Hadoop IPC v9, sans-IO (placeholder overview; the final one is written when the modules land).
//!
//! Modules (each owned by one piece of work):
//! - `pb`: prost code generated from our own `.proto` files in `ipc/proto/` (checked in).
//! - `reader`: a borrowing protobuf `Reader<'a>`.
//! - `view`: lazy, allocation-free views over borrowed message bytes.
//! - `frame`: zerocopy fixed headers and frame decoding with a length cap.
//! - `encode`: length-prefix writer and request/response frame encoders.

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
