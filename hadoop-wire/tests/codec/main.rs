//! The codec's tests in one binary (one link instead of eight; `view_support` compiled once):
//! encoders, frames, views against prost and hand-made vectors, robustness, the descriptor set,
//! token formats, the fuzz regressions and the YARN application protocols' messages. Each module
//! keeps its own docs.
//!
//! Tests that need a binary of their own stay beside this directory: the counting-allocator
//! tests (`*_alloc.rs`, `response_summary.rs`: one global allocator per binary) and the ones
//! that start the Java peer or regenerate code.

#[path = "../view_support/mod.rs"]
mod view_support;

mod encode_frames;
mod frame_decode;
mod frame_views;
mod fuzz_regressions;
mod sasl_negotiation;
mod token_formats;
mod view_descriptor;
mod view_equivalence;
mod view_robustness;
mod view_vectors;
mod yarn_app_protocols;
