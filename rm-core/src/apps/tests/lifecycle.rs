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

/// `running` for a submission with `keepContainersAcrossApplicationAttempts`, then two task
/// containers on h2 of which the first is reported RUNNING: (app, attempt, [running, not
/// started]).
fn keeping(a: &mut Apps) -> (AppId, AttemptId, [ContainerId; 2]) {
    let (id, _) = a.new_application().unwrap();
    let c = ApplicationSubmissionContextProto {
        keep_containers_across_application_attempts: Some(true),
        ..ctx(id, 512, "default")
    };
    a.submit(c, "alice", 10).unwrap();
    let (h1, h2) = (NodeKey::new("h1", 1), NodeKey::new("h2", 2));
    update(a, &h1, &[], 20);
    let at = a.take_launches()[0].attempt;
    a.am_launched(at, 30);
    a.register_am(at, &RegisterApplicationMasterRequestProto::default(), 40)
        .unwrap();
    let req = AllocateRequestProto {
        ask: vec![ask(0, ANY, 2, 1024, true)],
        response_id: Some(0),
        ..Default::default()
    };
    a.allocate(at, 1, &req, &keys(), 50).unwrap();
    update(a, &h2, &[], 60);
    let req = AllocateRequestProto {
        response_id: Some(1),
        ..Default::default()
    };
    let r = a.allocate(at, 1, &req, &keys(), 70).unwrap();
    let ids: Vec<ContainerId> = r
        .allocated_containers
        .iter()
        .map(|c| container_from_proto(c.id.as_ref().unwrap()).unwrap())
        .collect();
    assert_eq!(ids.len(), 2);
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
    a.node_update("h2", 2, NodeStatusView::new(&running), 80);
    a.take_cleanups();
    (id, at, [ids[0], ids[1]])
}

#[test]
fn a_retried_attempt_keeps_running_containers_with_keep_containers() {
    let mut a = apps(AppsConfig {
        max_attempts: 3,
        ..Default::default()
    });
    let (id, at1, [kept, unstarted]) = keeping(&mut a);
    let (h1, h2) = (NodeKey::new("h1", 1), NodeKey::new("h2", 2));
    let am1 = a.apps[&1].attempts[0].am_container.unwrap();
    // The user fails the attempt (`failApplicationAttempt`): its AM container is killed, the
    // container never seen RUNNING too; the RUNNING one stays, with its resources.
    a.fail_attempt(at1, 100).unwrap();
    let cleanups = a.take_cleanups();
    assert!(cleanups.contains(&Cleanup::Container(am1)), "{cleanups:?}");
    assert!(
        cleanups.contains(&Cleanup::Container(unstarted)),
        "{cleanups:?}"
    );
    assert!(
        !cleanups.contains(&Cleanup::Container(kept)),
        "{cleanups:?}"
    );
    assert!(a.is_live(kept));
    assert!(!a.is_live(unstarted));
    assert_eq!(a.node(&h2).unwrap().used, Res::new(1024, 1));
    // The next attempt registers: the kept container, with an NMToken for its node.
    update(&mut a, &h1, &[], 110);
    let l = a.take_launches();
    let at2 = l[0].attempt;
    assert_eq!(at2.attempt, 2);
    a.am_launched(at2, 120);
    let k = keys();
    let reg = a
        .register_am_with(
            at2,
            &RegisterApplicationMasterRequestProto::default(),
            Some(&k),
            130,
        )
        .unwrap();
    assert_eq!(reg.containers_from_previous_attempts.len(), 1);
    let prev = &reg.containers_from_previous_attempts[0];
    assert_eq!(prev.id, Some(kept.to_proto()));
    assert_eq!(prev.node_id, Some(h2.to_proto()));
    assert_eq!(prev.node_http_address.as_deref(), Some("h2:8042"));
    assert_eq!(prev.resource, Some(Res::new(1024, 1).to_proto()));
    assert_eq!(reg.nm_tokens_from_previous_attempts.len(), 1);
    assert_eq!(
        reg.nm_tokens_from_previous_attempts[0].node_id,
        Some(h2.to_proto())
    );
    let tok = hadoop_wire::token::Token::from_proto(
        reg.nm_tokens_from_previous_attempts[0]
            .token
            .clone()
            .unwrap(),
        &Default::default(),
    )
    .unwrap();
    let nm_id = hadoop_wire::token::NmTokenIdentifier::parse(&tok.identifier).unwrap();
    assert_eq!(
        nm_id.attempt_id(),
        Some(at2),
        "the NMToken is the new attempt's"
    );
    // An attempt's own release of a container an earlier attempt left is refused, as
    // Java's `RMServerUtils` compares attempt ids.
    let rel = AllocateRequestProto {
        response_id: Some(0),
        release: vec![kept.to_proto()],
        ..Default::default()
    };
    let e = a.allocate(at2, 1, &rel, &k, 140).unwrap_err();
    assert_eq!(e.class, exc::INVALID_CONTAINER_RELEASE);
    // Its completion goes to the new attempt's AM, once.
    update(&mut a, &h2, &[(kept, 0)], 150);
    assert_eq!(a.node(&h2).unwrap().used, Res::new(0, 0));
    let req = AllocateRequestProto {
        response_id: Some(0),
        ..Default::default()
    };
    let r = a.allocate(at2, 1, &req, &k, 160).unwrap();
    assert_eq!(r.completed_container_statuses.len(), 1);
    assert_eq!(
        r.completed_container_statuses[0].container_id,
        Some(kept.to_proto())
    );
    assert_eq!(a.app(id).unwrap().state, AppState::Running);
}

#[test]
fn kept_containers_die_with_the_last_attempt_and_without_keep_containers() {
    // max 2 attempts: the first failure keeps, the second (the last) kills them.
    let mut a = apps(AppsConfig::default());
    let (id, at1, [kept, _]) = keeping(&mut a);
    let h1 = NodeKey::new("h1", 1);
    a.fail_attempt(at1, 100).unwrap();
    assert!(a.is_live(kept));
    update(&mut a, &h1, &[], 110);
    let at2 = a.take_launches()[0].attempt;
    a.take_cleanups();
    a.fail_attempt(at2, 120).unwrap();
    assert_eq!(a.app(id).unwrap().state, AppState::Failed);
    assert!(!a.is_live(kept));
    assert!(a.take_cleanups().contains(&Cleanup::Container(kept)));
    assert_eq!(a.cluster_resources().1, Res::new(0, 0));

    // Without the flag a failed attempt's containers are all killed.
    let mut a = apps(AppsConfig {
        max_attempts: 3,
        ..Default::default()
    });
    let (_, at) = running(&mut a);
    let req = AllocateRequestProto {
        ask: vec![ask(0, ANY, 1, 1024, true)],
        response_id: Some(0),
        ..Default::default()
    };
    a.allocate(at, 1, &req, &keys(), 50).unwrap();
    update(&mut a, &NodeKey::new("h2", 2), &[], 60);
    let c = *a.apps[&1].attempts[0]
        .live
        .keys()
        .find(|c| c.id != 1)
        .unwrap();
    a.apps.get_mut(&1).unwrap().attempts[0]
        .live
        .get_mut(&c)
        .unwrap()
        .started = true;
    a.fail_attempt(at, 100).unwrap();
    assert!(!a.is_live(c));
    assert!(a.take_cleanups().contains(&Cleanup::Container(c)));
}
