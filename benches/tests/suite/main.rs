//! Smoke tests of `hotpath-bench`'s measurements against our own servers (no JVM), small and
//! short, in one binary: the load generator and the heartbeat storm. Each module is one former
//! `tests/<name>.rs`. Only that the figures are there is checked, never their values.
//! `rm_apps_smoke.rs` stays a binary of its own: its 1 s window of ApplicationMaster calls is too
//! short beside the storm's load generators on 2 vCPUs.

#[path = "../support/mod.rs"]
mod support;

mod loadgen_smoke;
mod storm;
mod storm_apps;
