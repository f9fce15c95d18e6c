//! rm-core's integration tests in one binary (one link instead of twelve): the tracker, the
//! dispatcher and service over TCP, applications, ACLs, tokens, robustness. Each module is one
//! former `tests/<name>.rs`.
//!
//! Beside this directory: `sasl_amrm_jdk.rs` (the JDK; `interop` feature). The heartbeat's
//! allocation-free check runs on the code `hotpath-bench heartbeat` measures, in benches
//! (`benches/tests/heartbeat_alloc_free.rs`).

#[path = "../support/mod.rs"]
mod support;

mod amrm_calls;
mod app_acls;
mod apps_churn;
mod apps_security;
mod client_methods;
mod client_to_am_recovery;
mod dispatcher;
mod merge;
mod proxy_users;
mod rm_admin;
mod rm_delegation;
mod robustness;
mod sasl_tokens;
mod service;
mod signals;
mod steady;
mod token_renewer;
mod tracker;
mod unknown_apps;
