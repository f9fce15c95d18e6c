//! Checks shared by the fuzz targets and by hadoop-wire's `tests/codec/fuzz_regressions.rs`
//! (which includes `checks.rs` by path, so a crashing input replays as an ordinary test on
//! stable Rust).
pub mod checks;
