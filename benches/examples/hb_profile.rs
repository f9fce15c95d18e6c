//! Runs one heartbeat path N times, for `valgrind --tool=callgrind` instruction counts:
//! `hb_profile ours|cold|opportunistic|eager|e2e|e2e-apps|tracker N`. Single-threaded (no
//! io_uring), so it is safe under valgrind.
//!
//! `e2e-apps` is `e2e` plus what the RM's ring thread does for the applications on a NORMAL
//! heartbeat, with 100 live applications: the heartbeating node runs the first one's AM
//! container and its 49 containers (the fixture's 50, all RUNNING), 99 more run on another
//! node, and nothing is pending (every ask satisfied, each `*` ask left at 0).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use benches::rm_heartbeat::HeartbeatBench;
use hadoop_wire::pb::hadoop::yarn::{
    AllocateRequestProto, ApplicationSubmissionContextProto, ContainerStateProto,
    ExecutionTypeProto, PriorityProto, RegisterApplicationMasterRequestProto, ResourceRequestProto,
};
use rm_core::amrm_token::{AmrmTokenSecretManager, AmrmTokenSecrets};
use rm_core::apps::{Apps, AppsConfig, Res, TokenKeys};
use rm_core::ids::NodeKey;
use rm_core::master_key::{MasterKey, SeededEntropy};
use testkit::heartbeat::{
    container_status, containers, heartbeat_request, node_status, CLUSTER_TS,
};

/// Submits an application, places, launches and registers its AM, then asks for `n`
/// containers of 1 GB (placed at once) and pulls them.
fn running_app(a: &mut Apps, keys: &TokenKeys, n: i32) {
    let (id, _) = a.new_application().expect("id");
    let ctx = ApplicationSubmissionContextProto {
        application_id: Some(id.to_proto()),
        am_container_spec: Some(Default::default()),
        resource: Some(Res::new(1024, 1).to_proto()),
        ..Default::default()
    };
    a.submit(ctx, "alice", 1).expect("submit");
    let l = a.take_launches().pop().expect("AM placed");
    a.am_launched(l.attempt, 1);
    a.register_am(
        l.attempt,
        &RegisterApplicationMasterRequestProto::default(),
        1,
    )
    .expect("register");
    let ask = |num: i32, rid: i32| AllocateRequestProto {
        ask: vec![ResourceRequestProto {
            priority: Some(PriorityProto { priority: Some(1) }),
            resource_name: Some("*".into()),
            capability: Some(Res::new(1024, 1).to_proto()),
            num_containers: Some(num),
            relax_locality: Some(true),
            ..Default::default()
        }],
        response_id: Some(rid),
        ..Default::default()
    };
    let r = a
        .allocate(l.attempt, 0, &ask(n, 0), keys, 2)
        .expect("allocate");
    assert_eq!(r.allocated_containers.len(), n as usize);
    a.allocate(l.attempt, 0, &ask(0, 1), keys, 3)
        .expect("allocate");
}

/// The applications of `e2e-apps` (see the module docs).
fn live_apps() -> Apps {
    let m =
        AmrmTokenSecretManager::new(&mut SeededEntropy(7), 0, 86_400_000, 1000, 100).expect("keys");
    let mut a = Apps::new(
        AppsConfig::default(),
        CLUSTER_TS,
        Arc::new(AmrmTokenSecrets::new(m)),
    );
    let keys = TokenKeys {
        container: MasterKey::new(1, vec![1; 8]).expect("key"),
        nm: MasterKey::new(2, vec![2; 8]).expect("key"),
        rm_identifier: CLUSTER_TS,
    };
    a.node_added(
        &NodeKey::new("127.0.0.1", 45454),
        "127.0.0.1:8042".into(),
        Res::new(65_536, 64),
    );
    running_app(&mut a, &keys, 49);
    a.node_added(
        &NodeKey::new("other", 45454),
        "other:8042".into(),
        Res::new(1 << 20, 1 << 10),
    );
    for _ in 0..99 {
        running_app(&mut a, &keys, 1);
    }
    a.refresh_work();
    a
}

fn main() {
    let mut args = std::env::args().skip(1);
    let which = args.next().unwrap_or_else(|| "ours".into());
    let n: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(1000);
    let dir = std::env::temp_dir().join(format!("hb-profile-{}", std::process::id()));
    let mut b = HeartbeatBench::new(&dir, which == "opportunistic").expect("bench");
    let apps = (which == "e2e-apps").then(|| {
        let a = live_apps();
        let work = a.work();
        (Arc::new(Mutex::new(a)), work)
    });
    // The fixture's request (what `b` sends), for the applications' step.
    let statuses = containers(1, testkit::heartbeat::CONTAINERS)
        .into_iter()
        .map(|k| {
            container_status(
                k,
                ContainerStateProto::CRunning,
                -1000,
                ExecutionTypeProto::Guaranteed,
            )
        })
        .collect();
    let node = NodeKey::new("127.0.0.1", 45454);
    let (request, _) = heartbeat_request(&node_status(&node, statuses, true), 0, None);
    for _ in 0..n {
        match which.as_str() {
            "ours" | "opportunistic" => b.ours(),
            "cold" => b.ours_cold(),
            "eager" => b.eager(),
            "e2e" => b.end_to_end(),
            "e2e-apps" => {
                let r = b.end_to_end();
                let (apps, work) = apps.as_ref().expect("set up");
                // The ring thread's step (rm_core::service): schedule on the node only
                // while some pending need fits somewhere.
                if work.load(Ordering::Relaxed) {
                    let mut a = apps.lock().expect("lock");
                    a.node_heartbeat(&node.host, node.port, true, 4);
                }
                std::hint::black_box(&request);
                r
            }
            "tracker" => b.tracker_only(),
            other => panic!("unknown path {other}"),
        }
        .expect("heartbeat");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
