//! Runs one measured path of the `dn-select` measurement in a loop, for instruction counts:
//! `valgrind --tool=callgrind target/release/examples/dn_select_once ours 100000`
//! (`ours`, `decode` or `baseline`).

use benches::dn_select::DnSelect;
use hadoop_wire::view::hdfs::LocatedBlockView;
use hdfs_io::replica::decode_replicas;
use std::hint::black_box;

fn main() {
    let mut args = std::env::args().skip(1);
    let which = args.next().unwrap_or_else(|| "ours".into());
    let n: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let s = DnSelect::new();
    let bytes = DnSelect::block_bytes();
    let mut reps = Vec::new();
    decode_replicas(&LocatedBlockView::new(&bytes), 0, &mut reps).expect("decodes");
    let mut scratch = Vec::with_capacity(8);
    let mut hits = 0u64;
    for _ in 0..n {
        let a = match which.as_str() {
            "ours" => s.ours(black_box(&reps)),
            "decode" => s.ours_with_decode(black_box(&bytes), &mut scratch),
            "baseline" => s.baseline(black_box(&reps)),
            other => panic!("unknown path {other} (ours, decode, baseline)"),
        };
        hits += u64::from(a.is_some());
    }
    println!("{which}: {hits} of {n} calls returned an address");
}
