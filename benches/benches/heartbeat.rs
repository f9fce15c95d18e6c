//! One NodeHeartbeatRequest with 50 container statuses (containers already known):
//!
//! - `ours`: decode through the views + node state update, opportunistic containers off;
//! - `ours_cold_ids`: ours with the statuses in alternating orders, so every container id is
//!   parsed and hashed (the per-position id cache never hits);
//! - `ours_opportunistic`: the same with opportunistic on (capabilities summed from the view);
//! - `eager`: the Java-like baseline (prost decode into owned structs, a map-based Resource
//!   built twice per container, the same state update);
//! - `end_to_end`: tracker answer + hand-over copy + shard handling;
//! - `tracker`: the tracker half alone.
//!
//! The code measured is `benches::rm_heartbeat` (shared with `hotpath-bench heartbeat`). After the
//! criterion groups, a summary line prints ns per heartbeat for each and the eager/ours ratio.
//! No counting allocator is installed here: it would tax the eager baseline's ~1,000
//! allocations per heartbeat and flatter the ratio. Allocations per heartbeat are counted by
//! `cargo test -p rm-core --test alloc_free` (0 in steady state).
//!
//! `cargo bench -p benches --bench heartbeat` (add `-- --quick --noplot` for a fast run).

use std::time::Duration;

use benches::rm_heartbeat::{measure, HeartbeatBench};
use criterion::{criterion_group, Criterion};

fn heartbeat(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut off = HeartbeatBench::new(&dir.path().join("off"), false).expect("bench");
    let mut on = HeartbeatBench::new(&dir.path().join("on"), true).expect("bench");
    let mut eager = HeartbeatBench::new(&dir.path().join("eager"), false).expect("bench");
    let mut e2e = HeartbeatBench::new(&dir.path().join("e2e"), false).expect("bench");
    let mut tr = HeartbeatBench::new(&dir.path().join("tracker"), false).expect("bench");
    let mut g = c.benchmark_group("heartbeat_50_containers");
    g.bench_function("ours", |b| b.iter(|| off.ours().expect("ours")));
    let mut cold = HeartbeatBench::new(&dir.path().join("cold"), false).expect("bench");
    g.bench_function("ours_cold_ids", |b| {
        b.iter(|| cold.ours_cold().expect("ours"))
    });
    g.bench_function("ours_opportunistic", |b| {
        b.iter(|| on.ours().expect("ours"))
    });
    g.bench_function("eager", |b| b.iter(|| eager.eager().expect("eager")));
    g.bench_function("end_to_end", |b| b.iter(|| e2e.end_to_end().expect("e2e")));
    g.bench_function("tracker", |b| {
        b.iter(|| tr.tracker_only().expect("tracker"))
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = heartbeat
}

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    let dir = tempfile::tempdir().expect("tempdir");
    match measure(dir.path(), Duration::from_millis(200), None) {
        Ok(f) => println!("heartbeat summary {}", f.to_json()),
        Err(e) => {
            eprintln!("heartbeat summary failed: {e}");
            std::process::exit(1);
        }
    }
}
