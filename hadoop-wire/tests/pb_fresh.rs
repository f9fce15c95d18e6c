//! Freshness of `src/pb/`: running the generator (`regen.rs`, the one `build.rs` runs with the
//! `regen-proto` feature) over `proto/` into a temp dir reproduces every checked-in generated
//! file byte for byte, and `src/pb/` holds no other generated file.
//!
//! On failure: `cargo build -p hadoop-wire --features regen-proto`, review and commit the diff.

#[allow(dead_code)]
#[path = "../regen.rs"]
mod regen;

use std::path::Path;

/// The generated files of `src/pb/` (everything there but the hand-written `mod.rs`).
const GENERATED: &[&str] = &[
    "descriptor.bin",
    "hadoop.common.rs",
    "hadoop.hdfs.rs",
    "hadoop.yarn.rs",
    "hotpath.rs",
    "schema.rs",
];

#[test]
fn regenerating_from_proto_reproduces_src_pb() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // inside the workspace (target/tmp), so rustfmt sees the same configuration as `cargo fmt`
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir");
    regen::generate(&root.join("proto"), dir.path()).expect("generate into the temp dir");

    let names = |d: &Path| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    assert_eq!(names(dir.path()), GENERATED, "files the generator writes");
    let mut checked_in = names(&root.join("src/pb"));
    checked_in.retain(|n| n != "mod.rs");
    assert_eq!(checked_in, GENERATED, "generated files in src/pb");

    let mut stale = Vec::new();
    for name in GENERATED {
        let fresh = std::fs::read(dir.path().join(name)).unwrap();
        let ours = std::fs::read(root.join("src/pb").join(name)).unwrap();
        if fresh != ours {
            let at = fresh
                .iter()
                .zip(&ours)
                .position(|(a, b)| a != b)
                .unwrap_or(fresh.len().min(ours.len()));
            let line = ours[..at].iter().filter(|&&b| b == b'\n').count() + 1;
            stale.push(format!(
                "src/pb/{name}: differs from a fresh generation at byte {at} (line {line}; {} bytes checked in, {} generated)",
                ours.len(),
                fresh.len()
            ));
        }
    }
    assert!(
        stale.is_empty(),
        "src/pb is stale (run `cargo build -p hadoop-wire --features regen-proto` and commit):\n{}",
        stale.join("\n")
    );
}
