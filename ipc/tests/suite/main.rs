//! ipc's client and server against each other in one binary (no JVM): client behaviour, idle
//! close, shared state ids, SASL over IPC, the server's protocol handling. Each module is one
//! former `tests/<name>.rs`.
//!
//! Beside this directory, each its own process: `client_alloc.rs` and `server_limits.rs`
//! (a global counting allocator, process-wide counts), `transport_memlock.rs` (drops a
//! capability), `transport_backends.rs` and `transport_threads.rs` (they find ring threads by
//! name in `/proc/self/task`), and the `interop` tests (`sasl_java.rs`, `sasl_kerberos*.rs`).

#[path = "../server_support/mod.rs"]
mod server_support;

mod client_behaviour;
mod client_idle;
mod client_state_id;
mod proxy_users;
mod sasl_ipc;
mod server_protocol;
