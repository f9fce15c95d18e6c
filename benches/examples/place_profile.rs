//! What immediate placement costs an `allocate` that brings a new ask, against the cluster's
//! size: `place_profile NODES N [heartbeat-only]`. An application's AM registers on a cluster
//! of NODES registered nodes, then makes N allocates, each raising its ANY ask by one
//! container (as an AM that asks as its work appears), timed with the wall clock and, for
//! `valgrind --tool=callgrind`, counted per call as `(cost(N2) - cost(N1)) / (N2 - N1)`.
//! With `heartbeat-only` the asks stay outstanding (no node updates): the same calls without
//! placement, the baseline. Sans-IO and single-threaded.

use std::time::Instant;

#[path = "support/registered_am.rs"]
mod registered_am;

use hadoop_wire::pb::hadoop::yarn::{AllocateRequestProto, PriorityProto, ResourceRequestProto};
use rm_core::apps::Res;

use registered_am::{registered_am, KEY_ID};

fn main() {
    let mut args = std::env::args().skip(1);
    let nodes: i32 = args.next().and_then(|s| s.parse().ok()).unwrap_or(10_000);
    let n: i32 = args.next().and_then(|s| s.parse().ok()).unwrap_or(1000);
    let immediate = args.next().as_deref() != Some("heartbeat-only");
    let (mut a, at, keys) = registered_am(nodes, immediate);
    let key_id = KEY_ID;
    let mut req = AllocateRequestProto {
        response_id: Some(0),
        progress: Some(0.1),
        ..Default::default()
    };
    let mut now = 50;
    let mut placed = 0usize;
    let t0 = Instant::now();
    for k in 1..=n {
        now += 1;
        req.ask = vec![ResourceRequestProto {
            priority: Some(PriorityProto { priority: Some(1) }),
            resource_name: Some("*".into()),
            capability: Some(Res::new(1024, 1).to_proto()),
            // Java's AMRMClient sends the total outstanding: one more than it has been given.
            num_containers: Some(if immediate { 1 } else { k }),
            relax_locality: Some(true),
            ..Default::default()
        }];
        let r = a.allocate(at, key_id, &req, &keys, now).expect("allocate");
        placed += r.allocated_containers.len();
        req.response_id = std::hint::black_box(r).response_id;
    }
    let el = t0.elapsed();
    println!(
        "nodes {nodes} calls {n} immediate {immediate}: {:.1} µs per allocate with a new ask, {placed} containers placed",
        el.as_secs_f64() * 1e6 / f64::from(n)
    );
}
