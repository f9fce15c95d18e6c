//! Lazy, allocation-free views over borrowed protobuf bytes (work in progress).

pub mod schema;
