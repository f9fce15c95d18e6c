//! Steady state allocates nothing: 200 containers, heartbeats built into the updater's reused
//! buffer and NORMAL responses (with acknowledgements and a completion per round) handled in
//! place. Counted on this thread by the alloc-counter allocator.

use hadoop_wire::pb::hadoop::yarn::{
    MasterKeyProto, NodeHeartbeatResponseProto, RegisterNodeManagerResponseProto,
};
use nm_core::ids::{AppId, ContainerId};
use nm_core::status_updater::*;
use nm_core::table::*;
use nm_core::wire::{self, NodeHealth};
use prost::Message;
#[global_allocator]
static GLOBAL: alloc_counter::Counting = alloc_counter::Counting;

#[test]
fn steady_state_heartbeats_allocate_nothing() {
    const N: i64 = 200;
    let app = AppId::new(1_700_000_000_000, 1);
    let cid = |n: i64| ContainerId::new(app, 1, n);
    let mut u = StatusUpdater::new(UpdaterConfig {
        identity: NodeIdentity {
            host: "127.0.0.2".into(),
            port: 45454,
            http_port: 8042,
            resource: Resource {
                memory_mb: 262_144,
                vcores: 64,
            },
            nm_version: NM_VERSION.into(),
        },
        track_stopped_ms: 600_000,
        default_interval_ms: 1000,
    });
    let mut t = ContainerTable::new(1000);
    let key = |id: i32| MasterKeyProto {
        key_id: Some(id),
        bytes: Some(vec![7; 32]),
    };
    let reg = RegisterNodeManagerResponseProto {
        container_token_master_key: Some(key(1)),
        nm_token_master_key: Some(key(2)),
        node_action: Some(0),
        ..Default::default()
    };
    let mut out = Vec::new();
    u.encode_register(&t, &NodeHealth::default(), &mut out)
        .unwrap();
    u.on_register_response(&reg.encode_to_vec(), &mut t, 0)
        .unwrap();
    let health = NodeHealth {
        healthy: true,
        report: "ok".into(),
        last_report_wall_ms: 1,
    };
    for n in 0..N {
        t.launch(
            cid(n),
            Resource {
                memory_mb: 1024,
                vcores: 1,
            },
            0,
            0,
            true,
        )
        .unwrap();
    }
    // Responses prepared up front: round r acknowledges the container completed in round r-1.
    let rounds = 300i64;
    let responses: Vec<Vec<u8>> = (0..rounds)
        .map(|r| {
            NodeHeartbeatResponseProto {
                response_id: Some(r as i32 + 1),
                node_action: Some(0),
                next_heart_beat_interval: Some(1000),
                container_token_master_key: Some(key(1)),
                nm_token_master_key: Some(key(2)),
                containers_to_be_removed_from_nm: if r > 0 {
                    vec![wire::container_id_proto(&cid(r - 1))]
                } else {
                    vec![]
                },
                ..Default::default()
            }
            .encode_to_vec()
        })
        .collect();
    let diag = "exit code 0";
    // Warm-up: the buffer and table reach their steady size.
    let mut sent = 0usize;
    let mut step = |u: &mut StatusUpdater, t: &mut ContainerTable, r: i64| {
        // one container completes and one replaces it each round
        t.complete(&cid(r), 0, diag).unwrap();
        t.launch(
            cid(N + r),
            Resource {
                memory_mb: 1024,
                vcores: 1,
            },
            0,
            0,
            true,
        )
        .unwrap();
        let b = u.heartbeat_request(t, &health).unwrap();
        sent += b.len();
        let o = u
            .on_heartbeat_response(&responses[r as usize], t, r as u64)
            .unwrap();
        assert!(matches!(o, HeartbeatOutcome::Normal { .. }));
    };
    for r in 0..100 {
        step(&mut u, &mut t, r);
    }
    // The completion strings and table inserts are the workload, not the heartbeat: count
    // only the heartbeat path.
    let mut counted = (0u64, 0usize);
    for r in 100..rounds {
        t.complete(&cid(r), 0, diag).unwrap();
        t.launch(
            cid(N + r),
            Resource {
                memory_mb: 1024,
                vcores: 1,
            },
            0,
            0,
            true,
        )
        .unwrap();
        let ((len, o), s) = alloc_counter::thread(|| {
            let len = u.heartbeat_request(&mut t, &health).unwrap().len();
            let o = u
                .on_heartbeat_response(&responses[r as usize], &mut t, r as u64)
                .unwrap();
            (len, o)
        });
        assert!(matches!(o, HeartbeatOutcome::Normal { .. }));
        assert!(
            len > 200 * 40,
            "a heartbeat of 200 containers is {len} bytes"
        );
        counted.0 += s.allocs;
        counted.1 += 1;
    }
    assert_eq!(t.counts().running, N as usize);
    assert!(t.totals().acked >= 190, "{:?}", t.totals());
    assert_eq!(
        counted.0, 0,
        "allocations in {} steady-state heartbeats",
        counted.1
    );
    assert!(sent > 0);
}
