//! Replays every input under `tests/fuzz-regressions/<target>/` through the same checks the
//! cargo-fuzz targets run (`fuzz/src/checks.rs`, included by path), on stable Rust.
//!
//! Each directory holds the crashing inputs found by fuzzing (named `crash-*`, minimised, with
//! the fix in the commit that added them) and a few seed inputs (`seed-*`: valid frames,
//! packets and messages, also used as the fuzzers' starting corpus).

#[path = "../../fuzz/src/checks.rs"]
#[allow(dead_code)]
mod checks;

use std::path::Path;

fn replay(target: &str, check: fn(&[u8])) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz-regressions")
        .join(target);
    let mut n = 0;
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        let bytes = std::fs::read(&path).unwrap();
        let r = std::panic::catch_unwind(|| check(&bytes));
        assert!(r.is_ok(), "{} panicked", path.display());
        n += 1;
    }
    assert!(n > 0, "no inputs in {}", dir.display());
}

#[test]
fn frame_decoder() {
    replay("frame_decoder", checks::frame_decoder);
}

#[test]
fn packet() {
    replay("packet", checks::packet);
}
