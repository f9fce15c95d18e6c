//! Prost types generated from our own `.proto` files in `hadoop-wire/proto/` (checked in).
//!
//! One module per protobuf package: [`hadoop::common`] (RPC headers, connection context,
//! RequestHeader, TokenProto, CredentialsProto), [`hadoop::yarn`] (ResourceTracker heartbeat
//! set, the token identifiers of `yarn_security_token.proto`) and
//! [`hadoop::hdfs`] (ClientNamenodeProtocol read subset, DataTransfer read path), and
//! [`hotpath`], hotpath's own protocols' messages (the only ones not Hadoop's). Field
//! names are prost's snake_case of Hadoop's names (`containersStatuses` →
//! `containers_statuses`), and type names are prost's CamelCase (`NMContainerStatusProto` →
//! `NmContainerStatusProto`, `DatanodeIDProto` → `DatanodeIdProto`).
//!
//! proto2 semantics in prost: `optional` fields are `Option<T>` with an accessor applying the
//! `.proto` default (`exit_status()` gives −1000 when absent), `required` fields are plain `T`
//! (always encoded; prost does not reject a message missing them — the views do), enums are
//! `i32` with typed accessors. prost drops unknown fields.
//!
//! [`DESCRIPTOR_SET`] is the encoded `FileDescriptorSet` of the same files (imports included),
//! for prost-reflect (e.g. `hotpath decode`).
//!
//! # Regenerating
//!
//! Ordinary builds never run a protobuf compiler. After editing `hadoop-wire/proto/*.proto`:
//!
//! ```text
//! cargo build -p hadoop-wire --features regen-proto   # protox + prost-build, pure Rust
//! git diff hadoop-wire/src/pb/                        # review, then commit
//! ```
//!
//! This runs `hadoop-wire/regen.rs` and rewrites `hadoop.{common,yarn,hdfs}.rs`, `hotpath.rs`, `descriptor.bin`
//! and `schema.rs` (the field tables and the generated per-message validators behind the views'
//! `validate()`, already rustfmt-formatted). `tests/pb_fresh.rs` runs the same generator into a
//! temp dir and fails unless the checked-in files match it byte for byte;
//! `tests/proto_vs_hadoop.rs` compares the `.proto` files with Hadoop 3.5's compiled descriptors.

#[allow(clippy::all, missing_docs, rustdoc::all)]
pub mod hadoop {
    pub mod common {
        include!("hadoop.common.rs");
    }
    pub mod yarn {
        include!("hadoop.yarn.rs");
    }
    pub mod hdfs {
        include!("hadoop.hdfs.rs");
    }
}

/// hotpath's own IPC messages (`proto/hotpath_protocols.proto`, package `hotpath`): the RM
/// admin protocol's request and response, the node agent's `getNodeReport` answer.
#[allow(clippy::all, missing_docs, rustdoc::all)]
pub mod hotpath {
    include!("hotpath.rs");
}

pub(crate) mod schema;

/// Encoded `google.protobuf.FileDescriptorSet` of every file in `hadoop-wire/proto/`, imports included.
pub const DESCRIPTOR_SET: &[u8] = include_bytes!("descriptor.bin");
