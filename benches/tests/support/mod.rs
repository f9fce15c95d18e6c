//! `testkit::hotpath` with the `hotpath` binary beside `hotpath-bench`, for the benches' test
//! binaries (`mod support;`).
#![allow(dead_code, unused_imports)] // each test binary uses its part

use std::path::{Path, PathBuf};
use std::process::Stdio;

pub use testkit::hotpath::{metric, RmChild};

/// The `hotpath` binary beside this package's `hotpath-bench`, built if needed.
pub fn hotpath_exe() -> PathBuf {
    testkit::hotpath::hotpath_beside(Path::new(env!("CARGO_BIN_EXE_hotpath-bench")))
}

/// [`testkit::hotpath::start_rm`] with that `hotpath`.
pub fn start_rm(dir: &Path, sets: &[String], log: &str, stderr: Stdio) -> RmChild {
    testkit::hotpath::start_rm(&hotpath_exe(), dir, sets, log, stderr)
}
