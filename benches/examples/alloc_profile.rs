//! Runs rm-core's `allocate` N times on a cluster of M registered nodes, for
//! `valgrind --tool=callgrind` instruction counts: `alloc_profile NODES N`. An application's
//! AM registers, makes one allocate with 50 asks (heartbeat-only placement and no node
//! updates, so they stay outstanding, as in `hotpath-bench rm-apps`), then N more allocates
//! without new asks. The cost per call is the difference between two N over their difference.
//! Sans-IO and single-threaded, so it is safe under valgrind.

#[path = "support/registered_am.rs"]
mod registered_am;

use hadoop_wire::pb::hadoop::yarn::{AllocateRequestProto, PriorityProto, ResourceRequestProto};
use rm_core::apps::Res;

use registered_am::{registered_am, KEY_ID};

fn main() {
    let mut args = std::env::args().skip(1);
    let nodes: i32 = args.next().and_then(|s| s.parse().ok()).unwrap_or(10_000);
    let n: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(1000);
    // Heartbeat-only placement: the AM container goes to the first node on its update.
    let (mut a, at, keys) = registered_am(nodes, false);
    let key_id = KEY_ID;
    let asks = (0..50)
        .map(|p| ResourceRequestProto {
            priority: Some(PriorityProto { priority: Some(p) }),
            resource_name: Some("*".into()),
            capability: Some(Res::new(1024, 1).to_proto()),
            num_containers: Some(1),
            relax_locality: Some(true),
            ..Default::default()
        })
        .collect();
    let mut req = AllocateRequestProto {
        ask: asks,
        response_id: Some(0),
        progress: Some(0.1),
        ..Default::default()
    };
    let mut now = 50;
    let r = a.allocate(at, key_id, &req, &keys, now).expect("allocate");
    assert!(r.allocated_containers.is_empty(), "asks stay outstanding");
    req.ask.clear();
    req.response_id = r.response_id;
    for _ in 0..n {
        now += 1;
        let r = a.allocate(at, key_id, &req, &keys, now).expect("allocate");
        assert_eq!(r.num_cluster_nodes, Some(nodes));
        req.response_id = std::hint::black_box(r).response_id;
    }
}
