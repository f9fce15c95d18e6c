//! rm-core's integration tests in one binary (one link instead of twelve): the tracker, the
//! dispatcher and service over TCP, applications, ACLs, tokens, robustness. Each module is one
//! former `tests/<name>.rs`.
//!
//! Beside this directory: `alloc_free.rs` (its own `main`, process-wide allocation counts) and
//! `sasl_amrm_jdk.rs` (the JDK; `interop` feature).

#[path = "../support/mod.rs"]
mod support;

mod amrm_calls;
mod app_acls;
mod apps_security;
mod dispatcher;
mod merge;
mod rm_delegation;
mod robustness;
mod sasl_tokens;
mod service;
mod steady;
mod tracker;
mod unknown_apps;
