//! `testkit::hotpath` bound to this package's `hotpath` binary, for the agent's test binaries.
#![allow(dead_code, unused_imports)] // each test binary uses its part

use std::path::{Path, PathBuf};
use std::process::Stdio;

pub use testkit::hotpath::{metric, RmChild};

/// The `hotpath` binary cargo built for these tests.
pub fn hotpath_exe() -> PathBuf {
    env!("CARGO_BIN_EXE_hotpath").into()
}

/// [`testkit::hotpath::start_rm`] with this package's `hotpath`.
pub fn start_rm(dir: &Path, sets: &[String], log: &str, stderr: Stdio) -> RmChild {
    testkit::hotpath::start_rm(&hotpath_exe(), dir, sets, log, stderr)
}
