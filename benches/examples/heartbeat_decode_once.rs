//! Runs one decode path N times on the 50-status heartbeat, for instruction counting:
//!
//! ```text
//! cargo build --release -p benches --example heartbeat_decode_once
//! for p in view prost; do for n in 0 1000; do
//!   timeout -s KILL 120 valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.$p.$n \
//!     target/release/examples/heartbeat_decode_once $p $n 2>&1 | grep refs
//! done; done
//! ```
//!
//! Instructions per heartbeat = (Ir(n=1000) − Ir(n=0)) / 1000: the difference removes
//! start-up and the building and encoding of the sample message.

use benches::heartbeat::{extract_prost, extract_view, extract_view_unvalidated, sample_request};
use ipc::view::yarn::NodeHeartbeatRequestView;
use prost::Message;
use std::hint::black_box;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = args.get(1).map(String::as_str).unwrap_or("view");
    let n: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1000);
    let bytes = sample_request(50).encode_to_vec();
    let mut out = Vec::with_capacity(64);
    for _ in 0..n {
        match path {
            "view" => extract_view(black_box(&bytes), &mut out).unwrap(),
            "prost" => extract_prost(black_box(&bytes), &mut out).unwrap(),
            "view-unvalidated" => {
                extract_view_unvalidated(NodeHeartbeatRequestView::new(black_box(&bytes)), &mut out).unwrap()
            }
            "validate" => NodeHeartbeatRequestView::new(black_box(&bytes)).validate().unwrap(),
            other => panic!("unknown path {other}: use view, view-unvalidated, validate or prost"),
        }
        black_box(&out);
    }
    println!(
        "{path} x{n}: {} bytes per heartbeat, {} statuses",
        bytes.len(),
        out.len()
    );
}
