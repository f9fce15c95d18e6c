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
//! start-up and the building and encoding of the sample message. Paths: `view`,
//! `view-unvalidated`, `validate`, `prost`; `time` prints wall-clock minimum and median per
//! path instead.

use benches::heartbeat::{extract_prost, extract_view, extract_view_unvalidated, sample_request};
use hadoop_wire::view::yarn::NodeHeartbeatRequestView;
use prost::Message;
use std::hint::black_box;

/// One decode path under test: reads a heartbeat's bytes into the output vector.
type DecodePath<'a> = (
    &'a str,
    &'a dyn Fn(&[u8], &mut Vec<benches::heartbeat::Extracted>),
);

/// `time` mode: the minimum and median over 300 trials of 200 heartbeats each, per path.
/// The minimum is robust against other processes sharing the CPU.
fn time_all(bytes: &[u8]) {
    let mut out = Vec::with_capacity(64);
    let paths: [DecodePath; 4] = [
        ("view (validate + summary reads, as the RM)", &|b, o| {
            extract_view(b, o).unwrap()
        }),
        ("view reads without validate", &|b, o| {
            extract_view_unvalidated(NodeHeartbeatRequestView::new(b), o).unwrap()
        }),
        ("validate only", &|b, _| {
            NodeHeartbeatRequestView::new(b).validate().unwrap()
        }),
        ("prost decode + reads", &|b, o| extract_prost(b, o).unwrap()),
    ];
    for (name, f) in paths {
        let mut per_iter = Vec::with_capacity(300);
        for _ in 0..300 {
            let t = std::time::Instant::now();
            for _ in 0..200 {
                f(black_box(bytes), &mut out);
                black_box(&out);
            }
            per_iter.push(t.elapsed().as_nanos() as f64 / 200.0);
        }
        per_iter.sort_by(f64::total_cmp);
        println!(
            "{name:30} min {:8.0} ns  median {:8.0} ns per heartbeat",
            per_iter[0], per_iter[150]
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = args.get(1).map(String::as_str).unwrap_or("view");
    if path == "time" {
        time_all(&sample_request(50).encode_to_vec());
        return;
    }
    let n: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1000);
    let bytes = sample_request(50).encode_to_vec();
    let mut out = Vec::with_capacity(64);
    for _ in 0..n {
        match path {
            "view" => extract_view(black_box(&bytes), &mut out).unwrap(),
            "prost" => extract_prost(black_box(&bytes), &mut out).unwrap(),
            "view-unvalidated" => {
                extract_view_unvalidated(NodeHeartbeatRequestView::new(black_box(&bytes)), &mut out)
                    .unwrap()
            }
            "validate" => NodeHeartbeatRequestView::new(black_box(&bytes))
                .validate()
                .unwrap(),
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
