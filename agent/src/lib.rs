//! `agent`: the library behind the `hotpath` binary's `demo` subcommand.
//!
//! - [`demo`]: `hotpath demo`, an embedded rm-core with four agents, and its accounting.

pub mod demo;
