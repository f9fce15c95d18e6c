//! Zero allocations per heartbeat in steady state: decode + state update (opportunistic
//! off, 50 container statuses, containers already known), and the whole sans-IO path
//! (tracker answer + hand-over + shard). Its own test binary because it installs a counting
//! global allocator (alloc-counter, process-wide) and runs single-threaded (no libtest harness).

use benches::rm_heartbeat::{allocs_per_call, HeartbeatBench};
#[global_allocator]
static GLOBAL: alloc_counter::Counting = alloc_counter::Counting;

fn allocations() -> u64 {
    alloc_counter::process_allocs()
}

fn main() {
    alloc_counter::enable_process();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut b = HeartbeatBench::new(dir.path(), false).expect("bench");
    let decode_update = allocs_per_call(10_000, &allocations, || b.ours()).expect("ours");
    let end_to_end = allocs_per_call(10_000, &allocations, || b.end_to_end()).expect("end to end");
    // The counter itself must see allocations, or a zero would prove nothing.
    let before = allocations();
    let v: Vec<u8> = Vec::with_capacity(std::hint::black_box(64));
    drop(std::hint::black_box(v));
    let counted = allocations() - before;
    let mut failed = 0;
    for (name, got, want) in [
        ("allocator counts a Vec::with_capacity", counted as f64, 1.0),
        (
            "allocations per heartbeat, decode + state update",
            decode_update,
            0.0,
        ),
        (
            "allocations per heartbeat, tracker + hand-over + shard",
            end_to_end,
            0.0,
        ),
    ] {
        let ok = got == want;
        println!(
            "test {name} ... {} ({got})",
            if ok { "ok" } else { "FAILED" }
        );
        failed += usize::from(!ok);
    }
    println!(
        "test result: {}. {} passed; {failed} failed",
        if failed == 0 { "ok" } else { "FAILED" },
        3 - failed
    );
    if failed > 0 {
        std::process::exit(1);
    }
}
