//! Smoke tests of the `hotpath-bench` measurements that need Hadoop (the Java RM beside ours,
//! the Kerberized HDFS peer), in one binary built only with the `interop` feature.

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

mod filestatus_kerberos_smoke;
mod loadgen_side_by_side;
