//! The agent's tests that need no JVM, no KDC and no Hadoop daemon, in one binary (one link
//! instead of ten): the `hotpath` binary's CLI and daemons as child processes, the CMP server,
//! the executor (process groups, cgroups, zygotes), localization from `file:` URLs, the log
//! HTTP server, restarts and the fault demo. Each module is one former `tests/<name>.rs`.
//!
//! Beside this directory: `tests/interop/` (Hadoop, the JVM), the Kerberos tests that set
//! MIT's process-wide environment (`KRB5_CONFIG`, `KRB5CCNAME`: one process each), and
//! `agent_footprint.rs` (a 50 ms registration bound, measured with no other test running).

#[path = "../support/cmp.rs"]
mod cmp;
#[path = "../support/daemon.rs"]
mod daemon;
#[path = "../support/mod.rs"]
mod support;

mod agent_cmp;
mod agent_localize_errors;
mod agent_restart;
mod agent_runtime;
mod cli;
mod demo_apps;
mod demo_faults;
mod disks_tmpfs;
mod executor;
mod logs_http;
mod mr_container;
mod resources;
mod rm_keep_containers;
mod rm_resync;
mod rm_signals;
mod shuffle_aux;
