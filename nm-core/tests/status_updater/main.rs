//! The status updater's integration tests, one binary (one link step instead of three). Each
//! module is one former `agent/tests/agent_status_updater*.rs` file, unchanged but for paths.
//!
//! - [`responses`]: the sans-IO updater against hand-built RM responses (prost), and against
//!   rm-core's tracker across an RM restart.
//! - [`alloc`]: steady state allocates nothing (the counting allocator counts per thread, so
//!   the other modules' tests running beside it are not counted).
//! - [`vs_rmcore`]: our updater and rm-core's ResourceTracker against each other in memory.

mod alloc;
mod responses;
mod vs_rmcore;
