//! DataNode choice for a 3-replica block with a warm address cache (ordering included),
//! against the Java read path's per-block `NetUtils.createSocketAddr` (URI parse + IP-literal
//! parse; no DNS). The measured code lives in `benches::dn_select`, shared with `hotpath-bench dn-select`.
//!
//! `cargo bench -p benches --bench dn_select` (add `-- --quick --noplot` for a fast run).
//! After criterion's groups it prints one JSON line with `ours_ns`, `baseline_ns`, `ratio`,
//! `allocs` (per choice, from the alloc-counter allocator, process-wide: nothing else runs) and friends.

use benches::dn_select::{measure, DnSelect};
use criterion::{criterion_group, Criterion};
use hadoop_wire::view::hdfs::LocatedBlockView;
use hdfs_io::replica::decode_replicas;
use std::hint::black_box;

#[global_allocator]
static GLOBAL: alloc_counter::Counting = alloc_counter::Counting;

/// Allocations counted so far in the process (enabled just before `measure`, which runs alone).
fn allocs() -> u64 {
    alloc_counter::process_allocs()
}

fn dn_select(c: &mut Criterion) {
    let s = DnSelect::new();
    let bytes = DnSelect::block_bytes();
    let mut reps = Vec::new();
    decode_replicas(&LocatedBlockView::new(&bytes), 0, &mut reps).unwrap();
    let mut g = c.benchmark_group("dn_select_3_replicas");
    g.bench_function("ours", |b| b.iter(|| black_box(s.ours(black_box(&reps)))));
    g.bench_function("baseline_create_socket_addr", |b| {
        b.iter(|| black_box(s.baseline(black_box(&reps))))
    });
    let mut scratch = Vec::with_capacity(8);
    g.bench_function("ours_with_decode", |b| {
        b.iter(|| black_box(s.ours_with_decode(black_box(&bytes), &mut scratch)))
    });
    g.finish();
}

criterion_group!(benches, dn_select);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    alloc_counter::enable_process();
    let r = measure(1000, 15, Some(allocs));
    println!("{}", r.to_json());
}
