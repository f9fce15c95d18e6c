//! hdfs-io's tests against our own `ipc::server` standing in for a NameNode (no JVM), in one
//! binary: block-token refetches, direct calls, the shared state id. Each module is one
//! former `tests/<name>.rs`.
//!
//! Beside this directory: the counting-allocator tests (`*_alloc.rs`, `sasl_stream_read.rs`:
//! one global allocator each; the DataNode choice's is `benches/tests/dn_select_alloc.rs`, on
//! the code `hotpath-bench dn-select` measures), `receive_memlock.rs` (drops a capability), `tests/interop/`
//! and the `kerberos_*.rs` tests (the JVM; MIT's process-wide environment, one process each).

mod block_token_refetch;
mod direct_calls;
mod shared_state_id;
