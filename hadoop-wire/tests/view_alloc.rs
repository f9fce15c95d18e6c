//! The view path allocates nothing: a counting global allocator (this test binary only)
//! counts the allocations made by the current thread inside a measured section.

use hadoop_wire::pb::hadoop::common::TokenProto;
use hadoop_wire::pb::hadoop::yarn::*;
use hadoop_wire::view::yarn::NodeHeartbeatRequestView;
use prost::Message;
use std::hint::black_box;

#[global_allocator]
static GLOBAL: alloc_counter::Counting = alloc_counter::Counting;

/// Allocations made by this thread while running `f`.
fn allocations<R>(f: impl FnOnce() -> R) -> (usize, R) {
    let (r, c) = alloc_counter::thread(f);
    (c.allocs as usize, r)
}

fn heartbeat(n: usize) -> NodeHeartbeatRequestProto {
    let ts = 1_767_000_000_000i64;
    let statuses = (0..n)
        .map(|i| {
            let app = ApplicationIdProto {
                id: Some(7 + (i % 3) as i32),
                cluster_timestamp: Some(ts),
            };
            ContainerStatusProto {
                container_id: Some(ContainerIdProto {
                    app_id: Some(app),
                    app_attempt_id: Some(ApplicationAttemptIdProto {
                        application_id: Some(app),
                        attempt_id: Some(1),
                    }),
                    id: Some(i as i64 + 1),
                }),
                state: Some(if i % 5 == 0 { 3 } else { 2 }),
                diagnostics: Some(if i % 5 == 0 {
                    "Container exited with a non-zero exit code 1".into()
                } else {
                    String::new()
                }),
                exit_status: Some(if i % 5 == 0 { 1 } else { -1000 }),
                capability: Some(ResourceProto {
                    memory: Some(2048),
                    virtual_cores: Some(1),
                    resource_value_map: vec![
                        ResourceInformationProto {
                            key: "memory-mb".into(),
                            value: Some(2048),
                            units: Some("Mi".into()),
                            r#type: Some(0),
                            ..Default::default()
                        },
                        ResourceInformationProto {
                            key: "vcores".into(),
                            value: Some(1),
                            units: Some(String::new()),
                            r#type: Some(0),
                            ..Default::default()
                        },
                    ],
                }),
                execution_type: Some(if i % 7 == 0 { 2 } else { 1 }),
                ..Default::default()
            }
        })
        .collect();
    NodeHeartbeatRequestProto {
        node_status: Some(NodeStatusProto {
            node_id: Some(NodeIdProto {
                host: Some("10.0.0.17".into()),
                port: Some(45454),
            }),
            response_id: Some(42),
            containers_statuses: statuses,
            node_health_status: Some(NodeHealthStatusProto {
                is_node_healthy: Some(true),
                health_report: Some(String::new()),
                last_health_report_time: Some(ts),
            }),
            ..Default::default()
        }),
        last_known_container_token_master_key: Some(MasterKeyProto {
            key_id: Some(5),
            bytes: Some(vec![7; 64]),
        }),
        last_known_nm_token_master_key: Some(MasterKeyProto {
            key_id: Some(6),
            bytes: Some(vec![9; 64]),
        }),
        registering_collectors: vec![AppCollectorDataProto {
            app_collector_token: Some(TokenProto {
                identifier: vec![1],
                password: vec![2],
                kind: "k".into(),
                service: "s".into(),
            }),
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// The hot path: validate once, then id, state, exit status and execution type of every status.
fn view_path(bytes: &[u8]) -> i64 {
    let req = NodeHeartbeatRequestView::new(bytes);
    req.validate().unwrap();
    let status = req.node_status().unwrap().unwrap();
    let mut acc = 0i64;
    for cs in status.containers_statuses() {
        let s = cs.unwrap().summary().unwrap();
        let id = s.container_id.unwrap().parts().unwrap();
        let (app, attempt) = id.app_attempt_id.unwrap().parts().unwrap();
        let (app_id, ts) = app.unwrap().parts().unwrap();
        acc = acc
            .wrapping_add(black_box(id.id.unwrap()))
            .wrapping_add(black_box(ts.unwrap()))
            .wrapping_add(black_box(
                i64::from(app_id.unwrap()) + i64::from(attempt.unwrap()),
            ))
            .wrapping_add(black_box(s.state_raw.unwrap() as i64))
            .wrapping_add(black_box(s.exit_status as i64))
            .wrapping_add(black_box(s.execution_type as i64));
    }
    acc
}

/// Every other accessor on the same message, including strings and the capability.
fn view_everything(bytes: &[u8]) -> usize {
    let req = NodeHeartbeatRequestView::new(bytes);
    let mut n = 0usize;
    let status = req.node_status().unwrap().unwrap();
    n = n.wrapping_add(
        status
            .node_id()
            .unwrap()
            .unwrap()
            .host()
            .unwrap()
            .unwrap()
            .len(),
    );
    n = n.wrapping_add(status.response_id().unwrap().unwrap() as usize);
    n = n.wrapping_add(
        status
            .node_health_status()
            .unwrap()
            .unwrap()
            .health_report()
            .unwrap()
            .unwrap()
            .len(),
    );
    n = n.wrapping_add(
        req.last_known_container_token_master_key()
            .unwrap()
            .unwrap()
            .key_bytes()
            .unwrap()
            .unwrap()
            .len(),
    );
    n = n.wrapping_add(req.registering_collectors().count());
    for cs in status.containers_statuses() {
        let cs = cs.unwrap();
        let h = cs.hot().unwrap();
        n = n.wrapping_add(h.container_id as usize ^ h.cluster_timestamp as usize);
        n = n.wrapping_add(cs.diagnostics().unwrap().len());
        n = n.wrapping_add(cs.state().unwrap().unwrap() as usize);
        n = n.wrapping_add(cs.exit_status().unwrap() as usize);
        n = n.wrapping_add(cs.execution_type().unwrap() as usize);
        let cap = cs.capability().unwrap().unwrap();
        n = n.wrapping_add(
            cap.memory().unwrap().unwrap() as usize
                + cap.virtual_cores().unwrap().unwrap() as usize,
        );
        for ri in cap.resource_value_map() {
            let ri = ri.unwrap();
            n = n.wrapping_add(ri.key().unwrap().len() + ri.units().unwrap().unwrap().len());
            n = n.wrapping_add(ri.value().unwrap().unwrap() as usize);
        }
        let id = cs.container_id().unwrap().unwrap();
        n = n.wrapping_add(id.id().unwrap().unwrap() as usize);
        n = n.wrapping_add(
            id.app_id()
                .unwrap()
                .unwrap()
                .cluster_timestamp()
                .unwrap()
                .unwrap() as usize,
        );
    }
    n
}

#[test]
fn the_counter_counts() {
    // The test must be able to fail: a deliberate allocation is seen.
    let (n, v) = allocations(|| black_box(Vec::<u8>::with_capacity(64)));
    drop(v);
    assert!(n >= 1, "counting allocator missed a Vec allocation");
    let (n, _) = allocations(|| black_box(String::from("x")));
    assert!(n >= 1);
}

#[test]
fn view_path_allocates_nothing() {
    let bytes = heartbeat(50).encode_to_vec();
    assert!(
        bytes.len() > 5000,
        "a realistic heartbeat: {} bytes",
        bytes.len()
    );
    let (n, acc) = allocations(|| view_path(&bytes));
    black_box(acc);
    assert_eq!(n, 0, "view path allocated {n} times");
    let (n, total) = allocations(|| view_everything(&bytes));
    assert!(total > 0);
    assert_eq!(n, 0, "view accessors allocated {n} times");
}

#[test]
fn prost_path_does_allocate() {
    // The contrast the bench measures: prost allocates per message, string and Vec.
    let bytes = heartbeat(50).encode_to_vec();
    let (n, msg) = allocations(|| NodeHeartbeatRequestProto::decode(&bytes[..]).unwrap());
    assert_eq!(
        msg.node_status.as_ref().unwrap().containers_statuses.len(),
        50
    );
    assert!(n > 50 * 4, "prost decode allocated only {n} times");
}
