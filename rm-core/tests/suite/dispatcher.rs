//! The threaded dispatcher: shards on their own threads (pinned by the hw plan when the
//! machine allows), the tracker on the test thread, completions acknowledged after the shard
//! committed them, metrics rendered as Prometheus text.

use std::time::{Duration, Instant};

use hadoop_wire::pb::hadoop::yarn::{
    ContainerStateProto, ExecutionTypeProto, NodeHeartbeatResponseProto,
};
use prost::Message;
use rm_core::completion_log::read_dir_records;
use rm_core::dispatcher::{Clock, Dispatcher, Placement};
use rm_core::hosts::HostLists;
use rm_core::ids::NodeKey;
use rm_core::master_key::SeededEntropy;
use rm_core::metrics::render_prometheus;
use rm_core::tracker::{HeartbeatOutcome, ResourceTracker};
use rm_core::RmConfig;
use testkit::heartbeat::{
    container_status, containers, heartbeat_request, node_status, register_request,
};

fn run(placement: Placement) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = RmConfig {
        completion_log_dir: dir.path().to_path_buf(),
        ..RmConfig::default()
    };
    let clock = Clock::default();
    let (disp, reports) = Dispatcher::start(&cfg, &placement, clock).unwrap();
    assert_eq!(reports.len(), disp.shards());
    let mut tracker = ResourceTracker::new(
        cfg,
        HostLists::default(),
        disp.mailboxes(),
        1,
        Box::new(SeededEntropy(3)),
        clock.now_ns(),
    )
    .unwrap();
    let nodes: Vec<NodeKey> = (0..20)
        .map(|i| NodeKey::new("127.0.0.1", 40000 + i))
        .collect();
    let mut out = Vec::new();
    for n in &nodes {
        out.clear();
        tracker
            .register_node_manager(
                &register_request(n, 8192, 8, "3.4.1"),
                clock.now_ns(),
                &mut out,
            )
            .unwrap();
    }
    let mut rids = vec![0i32; nodes.len()];
    let mut acked = 0usize;
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut round = 0i64;
    while acked < nodes.len() && Instant::now() < deadline {
        for (i, n) in nodes.iter().enumerate() {
            // Each node runs containers 1..=5 of its own application; container 1 completes
            // in round 3.
            let ids = containers(i as i32 + 1, 5);
            let mut st: Vec<_> = ids[1..]
                .iter()
                .map(|k| {
                    container_status(
                        *k,
                        ContainerStateProto::CRunning,
                        -1000,
                        ExecutionTypeProto::Guaranteed,
                    )
                })
                .collect();
            if round == 3 {
                st.push(container_status(
                    ids[0],
                    ContainerStateProto::CComplete,
                    0,
                    ExecutionTypeProto::Guaranteed,
                ));
            }
            let (req, _) = heartbeat_request(&node_status(n, st, true), rids[i], None);
            out.clear();
            let o = tracker
                .node_heartbeat(&req, clock.now_ns(), &mut out)
                .unwrap();
            assert!(matches!(o, HeartbeatOutcome::Normal { .. }), "{o:?}");
            let r = NodeHeartbeatResponseProto::decode(&out[..]).unwrap();
            rids[i] = r.response_id.unwrap();
            if r.containers_to_be_removed_from_nm == vec![ids[0].to_proto()] {
                acked += 1;
            }
        }
        round += 1;
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(acked, nodes.len(), "every completion acknowledged");
    let views = disp.views();
    let text = render_prometheus(tracker.metrics(), &views);
    assert!(text.contains("hotpath_rm_heartbeats_total "), "{text}");
    assert!(text.contains("hotpath_rm_shard_queue_depth{shard=\"0\"}"));
    assert!(
        text.contains("hotpath_rm_status_update_latency_seconds{shard=\"0\",quantile=\"0.99\"}")
    );
    let completions: u64 = views
        .iter()
        .map(|v| {
            v.metrics
                .completions
                .load(std::sync::atomic::Ordering::Relaxed)
        })
        .sum();
    assert_eq!(completions, nodes.len() as u64);
    assert!(disp.max_backlog() <= nodes.len() as u64);
    drop(views);
    disp.shutdown();
    assert_eq!(read_dir_records(dir.path()).unwrap().len(), nodes.len());
}

#[test]
fn unpinned_two_shards() {
    run(Placement::Unpinned(2));
}

#[test]
fn pinned_by_the_hw_plan() {
    let topo = hw::Topology::detect().expect("topology");
    let plan = hw::Plan::for_rm(&topo);
    assert!(plan
        .assignments()
        .iter()
        .any(|a| matches!(a.role, hw::Role::DispatcherShard(_))));
    run(Placement::Plan(plan));
}
