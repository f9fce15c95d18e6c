//! Benchmarks and load generators live in benches/.
