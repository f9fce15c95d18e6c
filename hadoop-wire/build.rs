//! Build script of `hadoop-wire`.
//!
//! Ordinary builds do nothing here: the generated code in `src/pb/` is checked in, so no
//! protobuf compiler is ever needed. With the `regen-proto` feature the script runs the
//! generator in `regen.rs` over `proto/*.proto` and rewrites `src/pb/` in the source tree
//! (see `regen.rs` for what each file is). `tests/pb_fresh.rs` runs the same generator into a
//! temp dir and fails when `src/pb/` is stale.
//!
//! Command: `cargo build -p hadoop-wire --features regen-proto`, then review and commit the diff
//! of `hadoop-wire/src/pb/`.

#[cfg(feature = "regen-proto")]
#[path = "regen.rs"]
mod regen;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "regen-proto")]
    {
        println!("cargo:rerun-if-changed=regen.rs");
        let root = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
        let proto_dir = root.join("proto");
        println!("cargo:rerun-if-changed={}", proto_dir.display());
        if let Err(e) = regen::generate(&proto_dir, &root.join("src").join("pb")) {
            panic!("regenerating src/pb: {e}");
        }
    }
}
