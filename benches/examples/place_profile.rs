//! What immediate placement costs an `allocate` that brings a new ask, against the cluster's
//! size: `place_profile NODES N [heartbeat-only]`. An application's AM registers on a cluster
//! of NODES registered nodes, then makes N allocates, each raising its ANY ask by one
//! container (as an AM that asks as its work appears), timed with the wall clock and, for
//! `valgrind --tool=callgrind`, counted per call as `(cost(N2) - cost(N1)) / (N2 - N1)`.
//! With `heartbeat-only` the asks stay outstanding (no node updates): the same calls without
//! placement, the baseline. Sans-IO and single-threaded.

use std::sync::Arc;
use std::time::Instant;

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
    let n: i32 = args.next().and_then(|s| s.parse().ok()).unwrap_or(1000);
    let immediate = args.next().as_deref() != Some("heartbeat-only");
    let m = AmrmTokenSecretManager::new(&mut SeededEntropy(7), 0, 86_400_000, 1000, 100)
        .expect("amrm keys");
    let cfg = AppsConfig {
        immediate_placement: immediate,
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
    if immediate {
        a.place_unplaced(11);
    } else {
        // Heartbeat-only placement: the AM container goes to the first node on its update.
        let first = NodeKey::new("host00000", 8041);
        let status = NodeStatusProto {
            node_id: Some(first.to_proto()),
            response_id: Some(1),
            ..Default::default()
        }
        .encode_to_vec();
        a.node_update(&first.host, first.port, NodeStatusView::new(&status), 20);
    }
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
    let key_id = 1;
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
