//! `testkit::daemon` bound to this package's `hotpath` binary (`CARGO_BIN_EXE_hotpath`).
#![allow(dead_code, unused_imports)] // each test binary uses its part

use std::path::Path;
use std::process::Command;

pub use testkit::daemon::{processes_with, set_args, Daemon};

fn hotpath() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_hotpath"))
}

/// [`testkit::daemon::start_agent`] with this package's `hotpath`.
pub fn start_agent(rt: &str, ip: &str) -> Daemon {
    testkit::daemon::start_agent(hotpath(), rt, ip)
}

/// [`testkit::daemon::agent_command`] with this package's `hotpath`.
pub fn agent_command(rt: &str, ip: &str, extra: &[(&str, String)]) -> (Command, tempfile::TempDir) {
    testkit::daemon::agent_command(hotpath(), rt, ip, extra)
}

/// [`testkit::daemon::agent_running`] with this package's `hotpath`.
pub fn agent_running(a: &Daemon) -> u64 {
    testkit::daemon::agent_running(hotpath(), a)
}

/// [`testkit::daemon::start_rm_daemon`] with this package's `hotpath`.
pub fn start_rm_daemon(
    rt: &str,
    client: &str,
    scheduler: &str,
    extra: &[(&str, String)],
) -> Daemon {
    testkit::daemon::start_rm_daemon(hotpath(), rt, client, scheduler, extra)
}
