//! The counter sees what it must and nothing else.

use std::hint::black_box;

#[global_allocator]
static A: alloc_counter::Counting = alloc_counter::Counting;

#[test]
fn counts_this_thread_and_ignores_others() {
    let (_, c) = alloc_counter::thread(|| {
        let v: Vec<u8> = black_box(Vec::with_capacity(100));
        drop(v);
    });
    assert_eq!(c.allocs, 1);
    assert_eq!(c.bytes, 100);
    assert_eq!(c.largest, 100);

    let (_, c) = alloc_counter::thread(|| {
        let mut v: Vec<u64> = black_box(Vec::with_capacity(1));
        v.reserve_exact(9); // a realloc
        black_box(&v);
    });
    assert_eq!(c.allocs, 2);

    // another thread's allocations are not ours
    let (_, c) = alloc_counter::thread(|| {
        std::thread::scope(|s| {
            s.spawn(|| {
                for _ in 0..1000 {
                    black_box(vec![0u8; 64]);
                }
            });
        });
    });
    assert!(
        c.allocs < 1000,
        "the spawned thread's allocations leaked in: {c:?}"
    );

    // ...but the process-wide counter sees them
    let (_, p) = alloc_counter::process(|| {
        std::thread::scope(|s| {
            s.spawn(|| {
                for _ in 0..1000 {
                    black_box(vec![0u8; 64]);
                }
            });
        });
    });
    assert!(p.allocs >= 1000, "{p:?}");

    // a filter narrows the process-wide counter to one class of threads
    thread_local! {
        static MARKED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }
    fn marked() -> bool {
        MARKED.with(|m| m.get())
    }
    alloc_counter::set_process_filter(Some(marked));
    alloc_counter::reset_process_largest();
    let (_, p) = alloc_counter::process(|| {
        std::thread::scope(|s| {
            s.spawn(|| black_box(vec![0u8; 7777]));
            s.spawn(|| {
                MARKED.with(|m| m.set(true));
                black_box(vec![0u8; 333]);
            });
        });
    });
    alloc_counter::set_process_filter(None);
    assert!(p.allocs >= 1 && p.allocs < 10, "{p:?}");
    assert_eq!(
        alloc_counter::process_largest(),
        333,
        "only the marked thread counts"
    );

    let (_, c) = alloc_counter::thread(|| black_box(1 + 1));
    assert_eq!(c, alloc_counter::Counts::default());
}
