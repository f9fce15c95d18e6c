//! Runs one measured path of the `dn-select` measurement in a loop, for instruction counts:
//! `valgrind --tool=callgrind target/release/examples/dn_select_once ours 100000`
//! (`ours`, `decode` or `baseline`). Run it for two values of N and divide the difference of
//! the totals by the difference of the Ns: that is the cost of one call, without the setup.
//!
//! The path is picked once, outside the loop, so that the loop holds only the call and the
//! count of answers (as `dn_select::measure`'s timed closures do).

use benches::dn_select::DnSelect;
use hadoop_wire::view::hdfs::LocatedBlockView;
use hdfs_io::replica::decode_replicas;
use std::hint::black_box;
use std::net::SocketAddr;

fn run(n: u64, mut f: impl FnMut() -> Option<SocketAddr>) -> u64 {
    let mut hits = 0u64;
    for _ in 0..n {
        hits += u64::from(black_box(f()).is_some());
    }
    hits
}

fn main() {
    let mut args = std::env::args().skip(1);
    let which = args.next().unwrap_or_else(|| "ours".into());
    let n: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let s = DnSelect::new();
    let bytes = DnSelect::block_bytes();
    let mut reps = Vec::new();
    decode_replicas(&LocatedBlockView::new(&bytes), 0, &mut reps).expect("decodes");
    let mut scratch = Vec::with_capacity(8);
    let hits = match which.as_str() {
        "ours" => run(n, || s.ours(black_box(&reps))),
        "decode" => run(n, || s.ours_with_decode(black_box(&bytes), &mut scratch)),
        "baseline" => run(n, || s.baseline(black_box(&reps))),
        other => panic!("unknown path {other} (ours, decode, baseline)"),
    };
    println!("{which}: {hits} of {n} calls returned an address");
}
