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
    for round in 0..100 {
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
    assert!(sent.len() >= 100, "churned {} completions", sent.len());
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
