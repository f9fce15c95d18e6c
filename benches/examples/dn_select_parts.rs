//! Where the time of one DataNode choice goes, in thread CPU time (median of 9 rounds of at
//! least 150 ms): the choice called directly, one address-cache hit alone, the choice over one
//! replica, and the choice through `DnSelect::ours` (the `dn-select` bench's path).
//! `cargo run --release -p benches --example dn_select_parts`
//!
//! The first and the last run the same code; a gap between them is the caller's code, e.g.
//! the store-forwarding stall that an owned `SocketAddr` in `Choice` caused (see
//! docs/performance.md, "DataNode choice").

use benches::dn_select::{thread_cpu_ns, DnSelect};
use hadoop_wire::view::hdfs::LocatedBlockView;
use hdfs_io::addr_cache::AddrCache;
use hdfs_io::dead_nodes::DeadNodes;
use hdfs_io::replica::decode_replicas;
use hdfs_io::selection::{LazyNow, Selector};
use hdfs_io::topology::{LocalNode, RackMap};
use std::hint::black_box;
use std::time::Instant;

fn time(name: &str, batch: u64, mut f: impl FnMut()) {
    let mut v = Vec::new();
    for _ in 0..9 {
        let (c0, t) = (thread_cpu_ns().unwrap_or(0), Instant::now());
        let mut k = 0;
        while t.elapsed().as_millis() < 150 {
            for _ in 0..batch {
                f();
            }
            k += batch;
        }
        let ns = match thread_cpu_ns() {
            Some(c1) if c1 > c0 => (c1 - c0) as f64,
            _ => t.elapsed().as_nanos() as f64,
        };
        v.push(ns / k as f64);
    }
    v.sort_by(f64::total_cmp);
    println!("{name:<22} {:>7.1} ns (min {:.1})", v[4], v[0]);
}

fn main() {
    let bytes = DnSelect::block_bytes();
    let mut reps = Vec::new();
    decode_replicas(&LocatedBlockView::new(&bytes), 0, &mut reps).expect("fixture decodes");
    // the same client as DnSelect::new
    let sel = Selector::new(
        LocalNode::with_names(["client.example", "10.9.9.9"]),
        RackMap::default(),
        Some(b"/r2"),
        false,
    );
    let mut cache = AddrCache::default();
    let t = Instant::now();
    for r in &reps {
        cache
            .resolve(r.ip_addr, r.xfer_port, t, |_, _| {
                unreachable!("IP literals")
            })
            .expect("literal");
    }
    let dead = DeadNodes::default();
    let bench = DnSelect::new();
    let batch = 10_000;
    time("choose (3 replicas)", batch, || {
        let mut now = LazyNow::new();
        black_box(sel.choose(black_box(&reps), &dead, &[], &cache, &mut now));
    });
    time("address-cache hit", batch, || {
        let r = &black_box(&reps)[1];
        black_box(cache.get(r.ip_addr, r.xfer_port, Instant::now));
    });
    let one = &reps[1..2];
    time("choose (1 replica)", batch, || {
        let mut now = LazyNow::new();
        black_box(sel.choose(black_box(one), &dead, &[], &cache, &mut now));
    });
    time("DnSelect::ours", batch, || {
        black_box(bench.ours(black_box(&reps)));
    });
    time("baseline", batch / 10, || {
        black_box(bench.baseline(black_box(&reps)));
    });
}
