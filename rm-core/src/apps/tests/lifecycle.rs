//! Ends of attempts: AM exits and retries, the liveness monitor, the allocation expiry.

use super::*;

#[test]
fn a_failed_am_gets_another_attempt_then_the_application_fails() {
    let mut a = apps(AppsConfig::default());
    let (id, at) = running(&mut a);
    let h1 = NodeKey::new("h1", 1);
    let am = a.apps[&1].attempts[0].am_container.unwrap();
    update(&mut a, &h1, &[(am, 3)], 100);
    assert_eq!(a.apps[&1].attempts[0].state, AttemptState::Failed);
    assert!(a.apps[&1].attempts[0]
        .diagnostics
        .starts_with(&format!("AM Container for {at} exited with  exitCode: 3\n")));
    assert_eq!(a.app(id).unwrap().state, AppState::Accepted);
    // The new attempt's AM container was allocated on the same update.
    let l = a.take_launches();
    assert_eq!(l.len(), 1);
    assert_eq!(
        l[0].container.to_string(),
        format!("container_{TS}_0001_02_000001")
    );
    // An AM lost with its node does not count; an exit does.
    a.node_removed(&h1, 150);
    assert_eq!(a.app(id).unwrap().state, AppState::Accepted);
    assert_eq!(a.app(id).unwrap().attempts.len(), 3);
    a.node_added(&h1, "h1:8042".into(), Res::new(4096, 4));
    update(&mut a, &h1, &[], 160);
    let l = a.take_launches();
    a.am_launch_failed(l[0].attempt, "connection refused", 170);
    let app = a.app(id).unwrap();
    assert_eq!(app.state, AppState::Failed);
    assert!(
        app.diagnostics.starts_with(&format!(
            "Application {id} failed 2 times (global limit =2; local limit is =2) due to Error launching"
        )),
        "{}",
        app.diagnostics
    );
    assert!(a.take_cleanups().contains(&Cleanup::App(id)));
}

#[test]
fn the_liveness_monitor_expires_a_silent_am() {
    let mut a = apps(AppsConfig {
        max_attempts: 1,
        am_expiry_ms: 1000,
        ..Default::default()
    });
    let (id, at) = running(&mut a);
    assert!(a.tick(1040).is_empty());
    assert_eq!(a.tick(1041), vec![at]);
    let app = a.app(id).unwrap();
    assert_eq!(app.state, AppState::Failed);
    assert!(app
        .diagnostics
        .contains(&format!("ApplicationMaster for attempt {at} timed out")));
}

#[test]
fn containers_never_started_expire_and_started_ones_do_not() {
    let mut a = apps(AppsConfig {
        container_token_expiry_ms: 1000,
        am_expiry_ms: 1_000_000,
        ..Default::default()
    });
    let (_, at) = running(&mut a);
    let h2 = NodeKey::new("h2", 2);
    let req = AllocateRequestProto {
        ask: vec![ask(0, ANY, 2, 1024, true)],
        response_id: Some(0),
        ..Default::default()
    };
    a.allocate(at, 1, &req, &keys(), 50).unwrap();
    update(&mut a, &h2, &[], 100);
    let r = a
        .allocate(
            at,
            1,
            &AllocateRequestProto {
                response_id: Some(1),
                ..Default::default()
            },
            &keys(),
            110,
        )
        .unwrap();
    let ids: Vec<ContainerId> = r
        .allocated_containers
        .iter()
        .map(|c| container_from_proto(c.id.as_ref().unwrap()).unwrap())
        .collect();
    assert_eq!(ids.len(), 2);
    // The NM reports the first RUNNING; the second never starts.
    let running = NodeStatusProto {
        node_id: Some(h2.to_proto()),
        response_id: Some(2),
        containers_statuses: vec![ContainerStatusProto {
            container_id: Some(ids[0].to_proto()),
            state: Some(ContainerStateProto::CRunning as i32),
            ..Default::default()
        }],
        ..Default::default()
    }
    .encode_to_vec();
    a.node_update("h2", 2, NodeStatusView::new(&running), 200);
    a.take_cleanups();
    a.tick(1100);
    assert_eq!(a.node(&h2).unwrap().used, Res::new(2048, 2), "not yet");
    a.tick(1101);
    assert_eq!(a.node(&h2).unwrap().used, Res::new(1024, 1));
    assert_eq!(a.take_cleanups(), vec![Cleanup::Container(ids[1])]);
    let r = a
        .allocate(
            at,
            1,
            &AllocateRequestProto {
                response_id: Some(2),
                ..Default::default()
            },
            &keys(),
            1200,
        )
        .unwrap();
    assert_eq!(r.completed_container_statuses.len(), 1);
    let st = &r.completed_container_statuses[0];
    assert_eq!(st.container_id, Some(ids[1].to_proto()));
    assert_eq!(st.exit_status, Some(exit_status::ABORTED));
    assert_eq!(
        st.diagnostics.as_deref(),
        Some("Container expired since it was unused")
    );
}
