//! Benchmarks and load generators.
//!
//! [`heartbeat`] builds a realistic `NodeHeartbeatRequestProto` and holds the two decode
//! paths the `heartbeat_decode` criterion bench compares (lazy views vs prost), so that the
//! bench, the callgrind example (`examples/heartbeat_decode_once.rs`) and the tests measure
//! exactly the same code.

pub mod heartbeat;
