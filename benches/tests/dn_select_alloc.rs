//! The DataNode choice allocates nothing: the alloc-counter allocator counts every allocation
//! this thread makes while the warm path runs (other threads, like libtest's, are not counted).

use benches::dn_select::DnSelect;
use hadoop_wire::view::hdfs::LocatedBlockView;
use hdfs_io::addr_cache::AddrCache;
use hdfs_io::dead_nodes::{DeadNodes, Failure};
use hdfs_io::replica::decode_replicas;
use hdfs_io::selection::{LazyNow, Selector};
use hdfs_io::topology::{LocalNode, RackMap};
use std::hint::black_box;
use std::time::Instant;

#[global_allocator]
static GLOBAL: alloc_counter::Counting = alloc_counter::Counting;

fn count(f: impl FnOnce()) -> u64 {
    alloc_counter::thread(f).1.allocs
}

#[test]
fn choice_with_a_cache_hit_allocates_nothing() {
    let s = DnSelect::new();
    let bytes = DnSelect::block_bytes();
    let mut reps = Vec::with_capacity(8);
    decode_replicas(&LocatedBlockView::new(&bytes), 0, &mut reps).unwrap();
    let mut scratch = Vec::with_capacity(8);
    s.ours(&reps).expect("warm");
    // the measured path: ranking + cache hit
    let n = count(|| {
        for _ in 0..10_000 {
            black_box(s.ours(black_box(&reps)).expect("hit"));
        }
    });
    assert_eq!(n, 0, "allocations in 10 000 choices");
    // decoding into a reused vector does not allocate either
    let n = count(|| {
        for _ in 0..1000 {
            black_box(
                s.ours_with_decode(black_box(&bytes), &mut scratch)
                    .expect("hit"),
            );
        }
    });
    assert_eq!(n, 0, "allocations in 1000 decode + choice");
    // the baseline does (the URI text and url's serialization): the counter works
    let n = count(|| {
        black_box(s.baseline(black_box(&reps)));
    });
    assert!(n >= 1, "baseline allocated {n} times");

    // with dead nodes in the memory, a rack table and a hostname cache entry: still none
    let dead = DeadNodes::default();
    dead.mark(reps[0].uuid, Failure::Connect, Instant::now());
    let sel = Selector::new(
        LocalNode::with_names(["10.1.1.1", "client"]),
        RackMap::parse_table("127.0.0.3 /r2\nclient /r2\n"),
        None,
        true,
    );
    let mut cache = AddrCache::default();
    let t = Instant::now();
    for r in &reps {
        cache
            .resolve(r.host_name, r.xfer_port, t, |_, p| {
                Ok(std::net::SocketAddr::new([10, 0, 0, 1].into(), p))
            })
            .unwrap();
    }
    let mut out = Vec::with_capacity(8);
    let n = count(|| {
        for _ in 0..1000 {
            let mut now = LazyNow::at(t);
            let c = sel
                .choose(&reps, &dead, &[], &cache, &mut now)
                .expect("a replica");
            assert_eq!(c.index, 1, "the /r2 replica, dead replica 0 skipped");
            assert!(c.addr.is_some());
            sel.order(&reps, &dead, &[reps[2].uuid], &mut now, &mut out);
            assert_eq!(out.len(), 1);
        }
    });
    assert_eq!(
        n, 0,
        "allocations with dead nodes, a rack table and host names"
    );
}
