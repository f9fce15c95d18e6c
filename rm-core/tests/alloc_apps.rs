//! Zero allocations for an unchanged heartbeat with live applications: an `RmService` running
//! two applications whose 20 containers (and AM containers) run on the heartbeating node,
//! reported RUNNING in every heartbeat, nothing pending. Counted on the server's threads that
//! a heartbeat touches: the ring thread (tracker, the applications' check) and the shard
//! thread (status update, completion log, hand-over to the scheduler). Also prints what a
//! heartbeat reporting one completion allocates on those threads, through the scheduler's
//! batch. Its own test binary: it installs a counting global allocator (alloc-counter,
//! process-wide with a thread filter) and runs without libtest's harness. About 1 s.

#[path = "support/mod.rs"]
mod support;

use std::cell::Cell;

use support::apps_rig::{wait_until, Rig};

#[global_allocator]
static GLOBAL: alloc_counter::Counting = alloc_counter::Counting;

const RING_PREFIX: &[u8] = b"hp-ring";
const SHARD_PREFIX: &[u8] = b"hp-shard";

/// 1 a server ring thread, 2 a shard thread, 3 anything else (0: not known yet). Cached per
/// thread; allocation-free (the allocator calls it).
fn thread_class() -> u8 {
    thread_local! {
        static CLASS: Cell<u8> = const { Cell::new(0) };
    }
    CLASS.with(|c| {
        if c.get() == 0 {
            let mut name = [0u8; 16];
            // SAFETY: a 16-byte buffer for a name Linux caps at 16 bytes including the NUL.
            let ok = unsafe {
                libc::pthread_getname_np(libc::pthread_self(), name.as_mut_ptr().cast(), 16)
            } == 0;
            if ok && name[0] != 0 {
                let len = name.iter().position(|&b| b == 0).unwrap_or(16);
                let n = &name[..len];
                c.set(if n.starts_with(RING_PREFIX) {
                    1
                } else if n.starts_with(SHARD_PREFIX) {
                    2
                } else {
                    3
                });
            }
        }
        c.get()
    })
}

fn on_ring() -> bool {
    thread_class() == 1
}

fn on_shard() -> bool {
    thread_class() == 2
}

fn on_server() -> bool {
    matches!(thread_class(), 1 | 2)
}

fn main() {
    let mut rig = Rig::start(1, 65_536, 64);
    let mut ams = [rig.running_app("alice", 1024), rig.running_app("bob", 1024)];
    for am in ams.iter_mut() {
        let r = rig.allocate(am, 10, 1024);
        assert_eq!(r.allocated_containers.len(), 10, "placed at once");
        rig.allocate(am, 0, 1024);
    }
    assert_eq!(rig.nodes[0].running.len(), 22);
    // Until the shard has seen every container RUNNING and the scheduler heard of it.
    wait_until("every container started", 10, || {
        rig.heartbeat(0);
        rig.rt.with(|a| {
            a.apps()
                .filter_map(|x| x.current())
                .all(|t| t.live.len() == 11)
        })
    });
    for _ in 0..200 {
        rig.heartbeat(0);
    }
    assert!(rig.rt.active(), "applications are live");
    assert!(!rig.rt.has_work(), "nothing pending");
    let n = 2_000u64;
    let measure = |filter: fn() -> bool, rig: &mut Rig| {
        alloc_counter::set_process_filter(Some(filter));
        alloc_counter::enable_process();
        let (_, c) = alloc_counter::process(|| {
            for _ in 0..n {
                rig.heartbeat(0);
            }
            // The shard has taken every heartbeat sent.
            wait_until("the shard drained", 10, || rig.rm.backlog() == 0);
        });
        alloc_counter::disable_process();
        c.allocs
    };
    let ring = measure(on_ring, &mut rig);
    let shard = measure(on_shard, &mut rig);
    // One completion: the heartbeat that reports it, the shard's status update and log
    // record, the scheduler's batch (the AM's status built, the acknowledgement held).
    let c = rig.nodes[0].running[5];
    rig.complete(c, 0);
    alloc_counter::set_process_filter(Some(on_server));
    alloc_counter::enable_process();
    let (_, completion) = alloc_counter::process(|| {
        rig.heartbeat(0);
        wait_until("the completion reached the scheduler", 10, || {
            rig.rt.with(|a| {
                a.apps()
                    .filter_map(|x| x.current())
                    .all(|t| !t.live.contains_key(&c))
            })
        });
    });
    alloc_counter::disable_process();
    alloc_counter::set_process_filter(None);
    // The counter must see allocations, or a zero would prove nothing.
    alloc_counter::enable_process();
    let (_, counted) = alloc_counter::process(|| {
        let v: Vec<u8> = Vec::with_capacity(std::hint::black_box(64));
        drop(std::hint::black_box(v));
    });
    alloc_counter::disable_process();
    println!(
        "one heartbeat reporting one completion: {} allocations on the ring and shard threads ({} bytes)",
        completion.allocs, completion.bytes
    );
    let mut failed = 0;
    let checks = [
        ("allocator counts a Vec::with_capacity", counted.allocs >= 1),
        (
            "0 allocations per unchanged heartbeat with live applications, ring thread",
            ring == 0,
        ),
        (
            "0 allocations per unchanged heartbeat with live applications, shard thread",
            shard == 0,
        ),
        (
            "a completion is counted (the window saw the work)",
            completion.allocs > 0,
        ),
    ];
    for (name, ok) in checks {
        println!("test {name} ... {}", if ok { "ok" } else { "FAILED" });
        failed += usize::from(!ok);
    }
    println!("(ring: {ring} allocations in {n} heartbeats; shard: {shard})");
    println!(
        "test result: {}. {} passed; {failed} failed",
        if failed == 0 { "ok" } else { "FAILED" },
        checks.len() - failed
    );
    drop(rig);
    if failed > 0 {
        std::process::exit(1);
    }
}
