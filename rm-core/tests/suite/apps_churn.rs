//! Every completion reaches its ApplicationMaster exactly once under churn, through the real
//! path: simulated NodeManagers heartbeat over TCP (ring thread, shard, completion log), the
//! shard hands completions to the scheduler in batches, the AM pulls them with `allocate`,
//! and only then does the node get its acknowledgement. The cluster is kept over-asked, so
//! the room a completion frees is filled from the pending asks (placed when the completion
//! reaches the scheduler). Some heartbeats are sent twice in a row, so that the shard merges
//! them (a merged-away heartbeat's completions are carried). About 2 s.

use std::collections::HashMap;

use hadoop_wire::yarn::ids::ContainerId;

use crate::support::apps_rig::{wait_until, Rig, SimAm};

/// Completed statuses an allocate response carries: container → exit status, counting.
fn collect(
    resp: &hadoop_wire::pb::hadoop::yarn::AllocateResponseProto,
    delivered: &mut HashMap<ContainerId, (i32, u32)>,
) {
    for s in &resp.completed_container_statuses {
        let c = hadoop_wire::token::identifier::container_from_proto(
            s.container_id.as_ref().expect("an id"),
        )
        .expect("a container id");
        let e = delivered
            .entry(c)
            .or_insert((s.exit_status.unwrap_or(-1), 0));
        e.1 += 1;
    }
}

#[test]
fn every_completion_reaches_its_am_exactly_once_under_churn() {
    // 2 nodes of 8 GB / 8 vcores; 3 applications, each AM 1 GB and 5 × 1 GB containers
    // wanted: 18 GB asked of 16, so asks stay pending and completions free room for them.
    let mut rig = Rig::start(2, 8192, 8);
    let mut ams: Vec<SimAm> = (0..3).map(|_| rig.running_app("alice", 1024)).collect();
    rig.heartbeat_all();
    let am_containers: Vec<ContainerId> = rig.running().keys().copied().collect();
    let want = 5usize;
    let mut mine: Vec<Vec<ContainerId>> = vec![Vec::new(); ams.len()];
    let mut sent: HashMap<ContainerId, i32> = HashMap::new();
    let mut delivered: HashMap<ContainerId, (i32, u32)> = HashMap::new();
    let mut allocated = 0usize;
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n as u64) as usize
    };
    // Until 150 completions were sent (a round completes nothing for an AM whose containers
    // all completed and were not replaced yet).
    // (Bounded in time, not rounds: a round is a few calls, and a completion reaches the
    // scheduler when the shard's thread runs, which a loaded machine may delay.)
    let mut round = 0;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while sent.len() < 150 {
        round += 1;
        assert!(
            std::time::Instant::now() < deadline,
            "{} completions in {round} rounds",
            sent.len()
        );
        for (i, am) in ams.iter_mut().enumerate() {
            let ask = want.saturating_sub(mine[i].len()) as i32;
            let resp = rig.allocate(am, ask, 1024);
            for c in &resp.allocated_containers {
                let id =
                    hadoop_wire::token::identifier::container_from_proto(c.id.as_ref().unwrap())
                        .unwrap();
                mine[i].push(id);
                allocated += 1;
            }
            collect(&resp, &mut delivered);
        }
        // Up to three completions a round, with distinct exit statuses.
        for k in 0..3 {
            let i = next(ams.len());
            if mine[i].is_empty() {
                continue;
            }
            let at = next(mine[i].len());
            let c = mine[i].remove(at);
            let exit = (round * 3 + k) % 7;
            rig.complete(c, exit);
            sent.insert(c, exit);
        }
        for n in 0..rig.nodes.len() {
            rig.heartbeat(n);
            if next(4) == 0 {
                // The same status again at once: merged in the shard's inbox, or not.
                rig.heartbeat(n);
            }
        }
    }
    // Drain: nodes keep reporting what is not acknowledged; AMs keep pulling.
    wait_until("every completion delivered", 30, || {
        rig.heartbeat_all();
        for am in ams.iter_mut() {
            let resp = rig.allocate(am, 0, 1024);
            collect(&resp, &mut delivered);
        }
        sent.keys().all(|c| delivered.contains_key(c))
            && rig.nodes.iter().all(|n| n.done.is_empty())
    });
    for (c, (exit, n)) in &delivered {
        assert_eq!(*n, 1, "{c} delivered {n} times");
        assert_eq!(
            sent.get(c),
            Some(exit),
            "{c}: delivered, with this exit status, but never completed"
        );
    }
    assert_eq!(delivered.len(), sent.len());
    assert!(
        !am_containers.iter().any(|c| delivered.contains_key(c)),
        "an AM container was reported complete"
    );
    // Freed room was refilled from the pending asks: far more containers than fit at once.
    assert!(
        allocated >= sent.len(),
        "{allocated} allocated for {} completions",
        sent.len()
    );
    let live: usize = rig.rt.with(|a| {
        a.apps()
            .filter_map(|x| x.current())
            .map(|t| t.live.len())
            .sum()
    });
    assert_eq!(
        live,
        rig.running().len(),
        "the scheduler and the nodes agree on what runs"
    );
}

/// Java's RM takes a node that reports itself unhealthy out of the scheduler: its containers
/// complete ABORTED "Container released on a *lost* node" (and are cleaned up on the node), it
/// gets no new containers, its NodeReport says UNHEALTHY and the cluster metrics count it
/// apart; healthy again, it is back in the scheduler and its heartbeat gets it containers.
#[test]
fn an_unhealthy_node_leaves_the_scheduler_and_is_reported_unhealthy() {
    use hadoop_wire::pb::hadoop::yarn::{
        GetClusterMetricsRequestProto, GetClusterMetricsResponseProto, GetClusterNodesRequestProto,
        GetClusterNodesResponseProto, NodeStateProto,
    };
    use hadoop_wire::yarn::acp;

    let mut rig = Rig::start(2, 8192, 8);
    let mut am = rig.running_app("alice", 1024);
    let am_node = rig.running().values().copied().next().unwrap();
    let sick = 1 - am_node;
    // 8 containers of 1 GB over both nodes (the roomiest first).
    let r = rig.allocate(&mut am, 8, 1024);
    assert_eq!(r.allocated_containers.len(), 8);
    rig.heartbeat_all();
    let on_sick: Vec<ContainerId> = rig.nodes[sick].running.clone();
    assert!(!on_sick.is_empty());
    rig.nodes[sick].healthy = false;
    rig.heartbeat(sick);
    let key = rig.nodes[sick].key.clone();
    wait_until("the scheduler took the node out", 10, || {
        rig.rt
            .with(|a| a.node(&key).is_some_and(|n| n.unhealthy && !n.active))
    });
    // Its containers: completed for the AM, cleaned up on the node.
    let resp = rig.allocate(&mut am, 0, 1024);
    let mut lost: Vec<ContainerId> = Vec::new();
    for s in &resp.completed_container_statuses {
        assert_eq!(s.exit_status, Some(-100));
        assert_eq!(
            s.diagnostics.as_deref(),
            Some("Container released on a *lost* node")
        );
        lost.push(
            hadoop_wire::token::identifier::container_from_proto(s.container_id.as_ref().unwrap())
                .unwrap(),
        );
    }
    lost.sort();
    let mut want = on_sick.clone();
    want.sort();
    assert_eq!(lost, want);
    // (The shard publishes the cleanups as it applies the change: a heartbeat may come
    // before they are there.)
    let mut cleaned: Vec<ContainerId> = Vec::new();
    wait_until("the lost containers cleaned up on the node", 10, || {
        let hb = rig.heartbeat(sick);
        cleaned.extend(
            hb.containers_to_cleanup
                .iter()
                .filter_map(hadoop_wire::token::identifier::container_from_proto),
        );
        on_sick.iter().all(|c| cleaned.contains(c))
    });
    rig.nodes[sick].running.clear();
    // New asks: only the healthy node gets them.
    let r = rig.allocate(&mut am, 12, 1024);
    for c in &r.allocated_containers {
        assert_ne!(
            c.node_id.as_ref().unwrap().port,
            Some(key.port),
            "placed on the unhealthy node"
        );
    }
    for _ in 0..3 {
        rig.heartbeat(sick);
    }
    assert!(
        rig.nodes[sick].running.is_empty(),
        "nothing placed on the unhealthy node"
    );
    // Reports.
    let nodes: GetClusterNodesResponseProto = crate::support::call(
        &rig.rm,
        "alice",
        acp::GET_CLUSTER_NODES,
        &GetClusterNodesRequestProto {
            node_states: vec![NodeStateProto::NsUnhealthy as i32],
        },
    )
    .unwrap();
    assert_eq!(nodes.node_reports.len(), 1);
    let rep = &nodes.node_reports[0];
    assert_eq!(rep.node_state, Some(NodeStateProto::NsUnhealthy as i32));
    assert_eq!(rep.node_id.as_ref().unwrap().port, Some(key.port));
    let m: GetClusterMetricsResponseProto = crate::support::call(
        &rig.rm,
        "alice",
        acp::GET_CLUSTER_METRICS,
        &GetClusterMetricsRequestProto::default(),
    )
    .unwrap();
    let m = m.cluster_metrics.unwrap();
    assert_eq!((m.num_active_nms, m.num_unhealthy_nms), (Some(1), Some(1)));
    // Healthy again: back in the scheduler; its own heartbeat places the pending asks there.
    rig.nodes[sick].healthy = true;
    rig.heartbeat(sick);
    wait_until("the node is back", 10, || {
        rig.rt
            .with(|a| a.node(&key).is_some_and(|n| !n.unhealthy && n.active))
    });
    wait_until("pending asks placed on the node", 10, || {
        rig.heartbeat(sick);
        let r = rig.allocate(&mut am, 0, 1024);
        r.allocated_containers
            .iter()
            .any(|c| c.node_id.as_ref().unwrap().port == Some(key.port))
    });
}
