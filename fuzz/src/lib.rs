//! The fuzz targets' checks live in `hadoop-wire-checks` (hadoop-wire/checks), which
//! hadoop-wire's `fuzz_regressions` test replays on stable Rust; re-exported here under the name
//! the targets use.
pub use hadoop_wire_checks as checks;
