//! `agent`: the library behind the `hotpath` binary's `agent`, `container` and `demo`
//! subcommands.
//!
//! - [`node`]: the node agent — container table, sans-IO status updater (the client side of
//!   the ResourceTracker protocol), and the I/O edge that runs them.
//! - [`demo`]: `hotpath demo`, an embedded rm-core with four agents, and its accounting.

pub mod demo;
pub mod node;
