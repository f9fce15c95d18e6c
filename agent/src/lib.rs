//! `agent`: the `hotpath` binary's crate (CLI and wiring; `src/main.rs`). Its library holds
//! the one piece of wiring the tests drive directly:
//!
//! - [`demo`]: `hotpath demo`, an embedded rm-core with four agents (`nm-runtime`) on
//!   loopback, and its accounting ([`demo::Cluster`]).
//!
//! The NodeManager itself is the `nm-runtime` crate, the ResourceManager `rm-core`.
#![forbid(unsafe_code)]

pub mod demo;
