//! Runs rm-core's `allocate` N times on a cluster of M registered nodes, for
//! `valgrind --tool=callgrind` instruction counts: `alloc_profile NODES N`. An application's
//! AM registers, makes one allocate with 50 asks (heartbeat-only placement and no node
//! updates, so they stay outstanding, as in `hotpath-bench rm-apps`), then N more allocates
//! without new asks. The cost per call is the difference between two N over their difference.
//! Sans-IO and single-threaded, so it is safe under valgrind.

use std::sync::Arc;

use hadoop_wire::pb::hadoop::yarn::{
    AllocateRequestProto, ApplicationSubmissionContextProto, ContainerLaunchContextProto,
    NodeStatusProto, PriorityProto, RegisterApplicationMasterRequestProto, ResourceRequestProto,
};
use hadoop_wire::view::yarn::NodeStatusView;
use prost::Message;
use rm_core::amrm_token::{AmrmTokenSecretManager, AmrmTokenSecrets};
use rm_core::apps::{Apps, AppsConfig, Res, TokenKeys};
use rm_core::ids::NodeKey;
use rm_core::master_key::{MasterKey, SeededEntropy};

const TS: i64 = 1_700_000_000_000;

fn main() {
    let mut args = std::env::args().skip(1);
    let nodes: i32 = args.next().and_then(|s| s.parse().ok()).unwrap_or(10_000);
    let n: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(1000);
    let m = AmrmTokenSecretManager::new(&mut SeededEntropy(7), 0, 86_400_000, 1000, 100)
        .expect("amrm keys");
    let cfg = AppsConfig {
        immediate_placement: false,
        ..AppsConfig::default()
    };
    let mut a = Apps::new(cfg, TS, Arc::new(AmrmTokenSecrets::new(m)));
    for i in 0..nodes {
        let host = format!("host{i:05}");
        let key = NodeKey::new(&host, 8041);
        a.node_registered(&key, format!("{host}:8042"), Res::new(8192, 8), &[], 1);
    }
    let (id, _) = a.new_application().expect("new application");
    let ctx = ApplicationSubmissionContextProto {
        application_id: Some(id.to_proto()),
        queue: Some("default".into()),
        am_container_spec: Some(ContainerLaunchContextProto::default()),
        resource: Some(Res::new(1024, 1).to_proto()),
        ..Default::default()
    };
    a.submit(ctx, "bench", 10).expect("submit");
    // Heartbeat-only placement: the AM container goes to the first node on its update.
    let first = NodeKey::new("host00000", 8041);
    let status = NodeStatusProto {
        node_id: Some(first.to_proto()),
        response_id: Some(1),
        ..Default::default()
    }
    .encode_to_vec();
    a.node_update(&first.host, first.port, NodeStatusView::new(&status), 20);
    let launch = a.take_launches().pop().expect("an AM container");
    let at = launch.attempt;
    a.am_launched(at, 30);
    a.register_am(at, &RegisterApplicationMasterRequestProto::default(), 40)
        .expect("register");
    let keys = TokenKeys {
        container: MasterKey::new(1, vec![1; 8]).expect("key"),
        nm: MasterKey::new(2, vec![2; 8]).expect("key"),
        rm_identifier: TS,
    };
    // The first AMRM master key (no rolling pending, so any id is answered alike).
    let key_id = 1;
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
