//! `testkit::app_run` bound to this package's `hotpath` binary (`CARGO_BIN_EXE_hotpath`).
#![allow(dead_code, unused_imports)] // each test binary uses its part

use std::path::Path;

pub use testkit::app_run::{fail_one, RunResult};

/// `hotpath app run --conf-dir CONF ARGS… -- COMMAND`.
pub fn app_run(conf_dir: &Path, args: &[&str], command: &str) -> RunResult {
    testkit::app_run::app_run(
        Path::new(env!("CARGO_BIN_EXE_hotpath")),
        conf_dir,
        args,
        command,
    )
}
