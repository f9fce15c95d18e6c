//! Smoke tests of `hotpath-bench`'s measurements against our own servers (no JVM), small and
//! short, in one binary: the load generator, the heartbeat storm, `rm-apps`. Each module is one
//! former `tests/<name>.rs`. Only that the figures are there is checked, never their values.

#[path = "../../../agent/tests/support/mod.rs"]
mod support;

mod loadgen_smoke;
mod rm_apps_smoke;
mod storm;
