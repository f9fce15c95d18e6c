//! DataNode choice for a 3-replica block with a warm address cache (ordering included),
//! against the Java read path's per-block `NetUtils.createSocketAddr` (URI parse + IP-literal
//! parse; no DNS). The measured code lives in `hdfs_io::measure`, shared with the CLI.
//!
//! `cargo bench -p benches --bench dn_select` (add `-- --quick --noplot` for a fast run).
//! After criterion's groups it prints one JSON line with `ours_ns`, `baseline_ns`, `ratio`,
//! `allocs` (per choice, from the counting allocator below) and friends.

use criterion::{criterion_group, Criterion};
use hdfs_io::measure::{measure, DnSelect};
use hdfs_io::replica::decode_replicas;
use ipc::view::hdfs::LocatedBlockView;
use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};

struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards every call unchanged to the system allocator; the bookkeeping is one
// relaxed atomic add, which neither allocates nor touches the memory handed out.
unsafe impl GlobalAlloc for Counting {
    // SAFETY: the caller upholds GlobalAlloc::alloc's contract; we forward it to System.
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same layout contract as our caller's.
        unsafe { System.alloc(layout) }
    }
    // SAFETY: the caller upholds GlobalAlloc::dealloc's contract; we forward it to System.
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: ptr was allocated by System with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    // SAFETY: the caller upholds GlobalAlloc::realloc's contract; we forward it to System.
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: ptr was allocated by System with this layout.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocs() -> u64 {
    ALLOCS.load(Ordering::Relaxed)
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
    let r = measure(1000, 15, Some(allocs));
    println!("{}", r.to_json());
}
