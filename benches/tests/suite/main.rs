//! Smoke tests of `hotpath-bench`'s measurements against our own servers (no JVM), small and
//! short, in one binary: the load generator, the heartbeat storm, `rm-apps`. Each module is one
//! former `tests/<name>.rs`. Only that the figures are there is checked, never their values.

mod support {
    //! `testkit::hotpath` with the `hotpath` binary beside `hotpath-bench`.
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
}

mod loadgen_smoke;
mod rm_apps_smoke;
mod storm;
