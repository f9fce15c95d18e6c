//! Placement: locality, node re-registration, heartbeat-only and immediate placement.

use super::*;

#[test]
fn locality_node_then_rack_then_any_and_relax_locality_false() {
    let mut a = apps(AppsConfig::default());
    let (_, at) = running(&mut a);
    let (h1, h2) = (NodeKey::new("h1", 1), NodeKey::new("h2", 2));
    // Two containers wanted on h2 only (relaxLocality false at the rack and ANY).
    let req = AllocateRequestProto {
        ask: vec![
            ask(1, "h2", 2, 1024, true),
            ask(1, DEFAULT_RACK, 2, 1024, false),
            ask(1, ANY, 2, 1024, false),
        ],
        response_id: Some(0),
        ..Default::default()
    };
    a.allocate(at, 1, &req, &keys(), 50).unwrap();
    update(&mut a, &h1, &[], 60);
    assert_eq!(
        a.node(&h1).unwrap().used,
        Res::new(1024, 1),
        "nothing but the AM on h1"
    );
    update(&mut a, &h2, &[], 61);
    assert_eq!(a.node(&h2).unwrap().used, Res::new(2048, 2));
    let att = a.apps[&1].current().unwrap();
    assert_eq!(att.pending_containers(), 0);
}

/// A running application with two 1 GB containers placed on h2 (from h2's heartbeat) and
/// handed to its AM.
fn two_containers_on_h2() -> (Apps, AppId, AttemptId, NodeKey, Vec<ContainerId>) {
    let mut a = apps(AppsConfig::default());
    let (id, at) = running(&mut a);
    let h2 = NodeKey::new("h2", 2);
    let req = AllocateRequestProto {
        ask: vec![ask(0, ANY, 2, 1024, true)],
        response_id: Some(0),
        ..Default::default()
    };
    a.allocate(at, 1, &req, &keys(), 50).unwrap();
    update(&mut a, &h2, &[], 60);
    let r = a
        .allocate(
            at,
            1,
            &AllocateRequestProto {
                response_id: Some(1),
                ..Default::default()
            },
            &keys(),
            70,
        )
        .unwrap();
    let ids: Vec<ContainerId> = r
        .allocated_containers
        .iter()
        .map(|c| container_from_proto(c.id.as_ref().unwrap()).unwrap())
        .collect();
    (a, id, at, h2, ids)
}

#[test]
fn a_node_that_registers_again_loses_what_it_did_not_report_complete() {
    let (mut a, id, at, h2, ids) = two_containers_on_h2();
    a.take_cleanups();
    // h2 re-registers reporting the first complete (exit 4); the second is lost.
    a.node_registered(
        &h2,
        "h2:8042".into(),
        Res::new(4096, 4),
        &[Reported {
            id: ids[0],
            state: ContainerStateProto::CComplete,
            exit_status: 4,
            diagnostics: "done".into(),
            res: Res::new(1024, 1),
            priority: 0,
        }],
        80,
    );
    assert_eq!(a.take_cleanups(), vec![Cleanup::Container(ids[1])]);
    assert_eq!(a.node(&h2).unwrap().used, Res::default());
    assert!(a.node(&h2).unwrap().active);
    let r = a
        .allocate(
            at,
            1,
            &AllocateRequestProto {
                response_id: Some(2),
                ..Default::default()
            },
            &keys(),
            90,
        )
        .unwrap();
    let got: Vec<(i32, &str)> = r
        .completed_container_statuses
        .iter()
        .map(|s| (s.exit_status.unwrap(), s.diagnostics.as_deref().unwrap()))
        .collect();
    assert_eq!(
        got,
        vec![
            (4, "done"),
            (exit_status::ABORTED, "Container released on a *lost* node")
        ]
    );
    assert_eq!(a.app(id).unwrap().state, AppState::Running);
}

#[test]
fn a_node_that_registers_again_running_applications_keeps_its_containers() {
    // Java's reconnect with running applications (a NodeManager restarted with recovery on,
    // same NodeId): what it did not report complete stays live, and the new capability holds.
    let (mut a, id, at, h2, ids) = two_containers_on_h2();
    assert_eq!(ids.len(), 2);
    a.take_cleanups();
    a.node_registered_running(
        &h2,
        "h2:8043".into(),
        Res::new(8192, 8),
        &[Reported {
            id: ids[0],
            state: ContainerStateProto::CComplete,
            exit_status: 4,
            diagnostics: "done".into(),
            res: Res::new(1024, 1),
            priority: 0,
        }],
        true,
        80,
    );
    assert_eq!(a.take_cleanups(), vec![], "nothing to kill on the node");
    let n = a.node(&h2).unwrap();
    assert!(n.active);
    assert_eq!(
        n.used,
        Res::new(1024, 1),
        "the second container still holds its room"
    );
    assert_eq!(n.total, Res::new(8192, 8));
    assert_eq!(n.http_address, "h2:8043");
    let r = a
        .allocate(
            at,
            1,
            &AllocateRequestProto {
                response_id: Some(2),
                ..Default::default()
            },
            &keys(),
            90,
        )
        .unwrap();
    let got: Vec<(i32, &str)> = r
        .completed_container_statuses
        .iter()
        .map(|s| (s.exit_status.unwrap(), s.diagnostics.as_deref().unwrap()))
        .collect();
    assert_eq!(got, vec![(4, "done")]);
    assert_eq!(a.app(id).unwrap().state, AppState::Running);
}

#[test]
fn heartbeat_only_mode_places_on_node_updates_only() {
    let mut a = apps(AppsConfig::default());
    assert!(!a.config().immediate_placement);
    let (id, _) = a.new_application().unwrap();
    a.submit(ctx(id, 512, "default"), "alice", 10).unwrap();
    a.place_unplaced(11);
    assert!(a.take_launches().is_empty(), "no heartbeat yet");
    let cur = |a: &Apps| a.app(id).unwrap().current().unwrap().state;
    assert_eq!(cur(&a), AttemptState::Scheduled);
    update(&mut a, &NodeKey::new("h2", 2), &[], 20);
    let l = a.take_launches();
    assert_eq!(l.len(), 1);
    assert_eq!(
        l[0].node,
        NodeKey::new("h2", 2),
        "the node that heartbeated"
    );
    assert_eq!(cur(&a), AttemptState::Allocated);
}

#[test]
fn immediate_placement_at_submit_retry_and_allocate() {
    let mut a = apps_placing_now(AppsConfig::default());
    let (h1, h2) = (NodeKey::new("h1", 1), NodeKey::new("h2", 2));
    // h1 has less room: the AM goes to h2, the node with the most free memory.
    a.node_added(&h1, "h1:8042".into(), Res::new(2048, 4));
    let (id, _) = a.new_application().unwrap();
    a.submit(ctx(id, 1024, "default"), "alice", 10).unwrap();
    let l = a.take_launches();
    assert_eq!(
        l.len(),
        1,
        "placed in the submit call, before any heartbeat"
    );
    assert_eq!(l[0].node, h2);
    let at = l[0].attempt;
    assert_eq!(a.node(&h2).unwrap().used, Res::new(1024, 1));
    a.am_launched(at, 20);
    a.register_am(at, &RegisterApplicationMasterRequestProto::default(), 30)
        .unwrap();

    // New asks are placed within the allocate that made them: 3 GB left on h2, 2 on h1.
    let k = keys();
    let req = AllocateRequestProto {
        ask: vec![ask(0, ANY, 6, 1024, true)],
        response_id: Some(0),
        ..Default::default()
    };
    let r0 = a.allocate(at, 1, &req, &k, 40).unwrap();
    assert_eq!(r0.allocated_containers.len(), 5);
    assert_eq!(r0.nm_tokens.len(), 2);
    let on = |n: &NodeKey| {
        r0.allocated_containers
            .iter()
            .filter(|c| c.node_id.as_ref() == Some(&n.to_proto()))
            .count()
    };
    assert_eq!((on(&h2), on(&h1)), (3, 2));
    assert_eq!(
        r0.limit,
        Some(Res::new(0, 2).to_proto()),
        "headroom after the placement"
    );
    assert_eq!(
        a.app(id).unwrap().current().unwrap().pending_containers(),
        1
    );
    // A call without asks places nothing (the rest waits for room on a node update).
    let req = AllocateRequestProto {
        response_id: Some(1),
        ..Default::default()
    };
    assert!(a
        .allocate(at, 1, &req, &k, 50)
        .unwrap()
        .allocated_containers
        .is_empty());
    let first = container_from_proto(r0.allocated_containers[0].id.as_ref().unwrap()).unwrap();
    let node_of_first = a.apps[&1].attempts[0].live[&first].node.clone();
    update(&mut a, &node_of_first, &[(first, 0)], 60);
    let req = AllocateRequestProto {
        response_id: Some(2),
        ..Default::default()
    };
    assert_eq!(
        a.allocate(at, 1, &req, &k, 70)
            .unwrap()
            .allocated_containers
            .len(),
        1,
        "the last one on the node update that freed room"
    );

    assert_eq!(
        a.app(id).unwrap().current().unwrap().pending_containers(),
        0
    );
}

#[test]
fn a_retried_attempt_is_placed_at_once_or_on_a_heartbeat() {
    for immediate in [true, false] {
        let mut a = apps_placing_now(AppsConfig {
            immediate_placement: immediate,
            ..AppsConfig::default()
        });
        let (id, _) = a.new_application().unwrap();
        a.submit(ctx(id, 512, "default"), "alice", 10).unwrap();
        if !immediate {
            update(&mut a, &NodeKey::new("h1", 1), &[], 15);
        }
        let l = a.take_launches();
        assert_eq!(l.len(), 1);
        // The launch fails: a second attempt, SCHEDULED.
        a.am_launch_failed(l[0].attempt, "connection refused", 20);
        let app = a.app(id).unwrap();
        assert_eq!(app.attempts.len(), 2);
        assert_eq!(app.current().unwrap().state, AttemptState::Scheduled);
        // What `AppsRt::with` calls after every change.
        a.place_unplaced(21);
        let l = a.take_launches();
        if immediate {
            assert_eq!(l.len(), 1, "placed without a heartbeat");
            assert_eq!(l[0].attempt.attempt, 2);
        } else {
            assert!(l.is_empty());
            update(&mut a, &NodeKey::new("h2", 2), &[], 30);
            assert_eq!(a.take_launches().len(), 1, "placed on the heartbeat");
        }
        assert_eq!(
            a.app(id).unwrap().current().unwrap().state,
            AttemptState::Allocated
        );
    }
}

#[test]
fn an_am_that_fits_nowhere_now_waits_for_a_node_update() {
    let mut a = apps_placing_now(AppsConfig::default());
    let submit = |a: &mut Apps, mb: i64| {
        let (id, _) = a.new_application().unwrap();
        a.submit(ctx(id, mb, "default"), "alice", 10).unwrap();
        (id, a.take_launches())
    };
    // 3 GB on one node, 2 GB on the other (the one with more room), then 3 GB fits nowhere.
    let (first, l1) = submit(&mut a, 3072);
    let (_, l2) = submit(&mut a, 2048);
    assert_eq!((l1.len(), l2.len()), (1, 1));
    assert_ne!(l1[0].node, l2[0].node);
    let (third, l3) = submit(&mut a, 3072);
    assert!(l3.is_empty());
    let state = |a: &Apps| a.app(third).unwrap().current().unwrap().state;
    assert_eq!(state(&a), AttemptState::Scheduled);
    // The first application ends: its node has room again, used on its next heartbeat.
    a.kill(first, None, 20).unwrap();
    a.place_unplaced(21);
    assert_eq!(state(&a), AttemptState::Scheduled, "a kill retries nothing");
    update(&mut a, &l1[0].node, &[], 30);
    let l = a.take_launches();
    assert_eq!(l.len(), 1);
    assert_eq!((l[0].attempt.app, &l[0].node), (third, &l1[0].node));
}

/// The containers an attempt's next allocate pulls (response id `rid`).
fn pulled(a: &mut Apps, at: AttemptId, rid: i32, now: u64) -> Vec<ContainerId> {
    let req = AllocateRequestProto {
        response_id: Some(rid),
        ..Default::default()
    };
    a.allocate(at, 1, &req, &keys(), now)
        .unwrap()
        .allocated_containers
        .iter()
        .map(|c| container_from_proto(c.id.as_ref().unwrap()).unwrap())
        .collect()
}

#[test]
fn a_higher_priority_application_gets_containers_first() {
    let mut a = apps(AppsConfig {
        max_app_priority: 10,
        ..Default::default()
    });
    let (h1, h2) = (NodeKey::new("h1", 1), NodeKey::new("h2", 2));
    // First submitted, priority 0; its AM on h1.
    let (low, low_at) = running(&mut a);
    // Second, priority 5 (the cap is 10); its AM on h1 too.
    let (high, _) = a.new_application().unwrap();
    let c = ApplicationSubmissionContextProto {
        priority: Some(PriorityProto { priority: Some(5) }),
        ..ctx(high, 512, "default")
    };
    a.submit(c, "bob", 50).unwrap();
    update(&mut a, &h1, &[], 60);
    let high_at = a.take_launches()[0].attempt;
    a.am_launched(high_at, 70);
    a.register_am(
        high_at,
        &RegisterApplicationMasterRequestProto::default(),
        80,
    )
    .unwrap();
    assert_eq!(a.app(high).unwrap().priority, 5);
    // Both ask for more than the 6 GB left (2 on h1, 4 on h2): the earlier one asks first.
    for (at, n, t) in [(low_at, 6, 90), (high_at, 8, 91)] {
        let req = AllocateRequestProto {
            ask: vec![ask(0, ANY, n, 1024, true)],
            response_id: Some(0),
            ..Default::default()
        };
        a.allocate(at, 1, &req, &keys(), t).unwrap();
    }
    update(&mut a, &h1, &[], 100);
    update(&mut a, &h2, &[], 101);
    let got_high = pulled(&mut a, high_at, 1, 110);
    let got_low = pulled(&mut a, low_at, 1, 111);
    assert_eq!(
        (got_high.len(), got_low.len()),
        (6, 0),
        "priority 5 before 0, whatever the submission order"
    );
    // Raised above the other, the first application gets the room freed next although the
    // other still waits for two.
    assert_eq!(a.update_priority(low, 9).unwrap(), 9);
    let on_h2: Vec<ContainerId> = got_high
        .iter()
        .copied()
        .filter(|c| a.apps[&high.id].attempts[0].live[c].node == h2)
        .take(2)
        .collect();
    let done: Vec<(ContainerId, i32)> = on_h2.iter().map(|&c| (c, 0)).collect();
    update(&mut a, &h2, &done, 120);
    assert_eq!(pulled(&mut a, low_at, 2, 130).len(), 2);
    assert!(pulled(&mut a, high_at, 2, 131).is_empty());
    assert_eq!(
        a.app(high).unwrap().current().unwrap().pending_containers(),
        2
    );
}

#[test]
fn equal_priorities_go_in_submission_order() {
    let mut a = apps(AppsConfig {
        max_app_priority: 10,
        ..Default::default()
    });
    let (h1, h2) = (NodeKey::new("h1", 1), NodeKey::new("h2", 2));
    // Three applications at priority 3 whose AMs take a whole node each: two fit.
    let mut ids = Vec::new();
    for t in 0..3 {
        let (id, _) = a.new_application().unwrap();
        let c = ApplicationSubmissionContextProto {
            priority: Some(PriorityProto { priority: Some(3) }),
            ..ctx(id, 4096, "default")
        };
        a.submit(c, "alice", 10 + t).unwrap();
        ids.push(id);
    }
    update(&mut a, &h2, &[], 20);
    update(&mut a, &h1, &[], 21);
    let placed: Vec<AppId> = a.take_launches().iter().map(|l| l.attempt.app).collect();
    assert_eq!(placed, vec![ids[0], ids[1]]);
}
