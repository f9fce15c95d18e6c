//! Recovery from the state store, compaction, and containers coming back with their nodes.

use super::*;

fn running_report(id: ContainerId, state: ContainerStateProto, exit: i32) -> Reported {
    Reported {
        id,
        state,
        exit_status: exit,
        diagnostics: if state == ContainerStateProto::CComplete {
            "done".into()
        } else {
            String::new()
        },
        res: Res::new(1024, 1),
        priority: 0,
    }
}

#[test]
fn a_finished_applications_acls_survive_compaction_and_recovery() {
    use crate::app_acls::AppAcls;
    use crate::state_store::Recovered;
    use hadoop_wire::pb::hadoop::yarn::{ApplicationAccessTypeProto, ApplicationAclMapProto};
    let m = AmrmTokenSecretManager::new(&mut SeededEntropy(7), 0, 86_400_000, 1000, 100).unwrap();
    let amrm = Arc::new(AmrmTokenSecrets::new(m));
    let mut a = Apps::new(AppsConfig::default(), TS, amrm.clone());
    a.enable_store(0);
    let (id, _) = a.new_application().unwrap();
    let mut c = ctx(id, 512, "default");
    let entries = vec![
        ApplicationAclMapProto {
            access_type: Some(ApplicationAccessTypeProto::AppaccessViewApp as i32),
            acl: Some("bob".into()),
        },
        ApplicationAclMapProto {
            access_type: Some(ApplicationAccessTypeProto::AppaccessModifyApp as i32),
            acl: Some(" ops".into()),
        },
    ];
    c.am_container_spec.as_mut().unwrap().application_ac_ls = entries.clone();
    a.submit(c, "alice", 10).unwrap();
    a.kill(id, None, 20).unwrap();
    let want = AppAcls::from_protos(&entries);
    assert_eq!(a.app(id).unwrap().acls, want);
    // Compaction writes the kept applications anew: the finished one has no launch
    // context left, its ACLs are written all the same.
    let mut rec = Recovered::default();
    for op in a.store_snapshot() {
        rec.apply(op);
    }
    let mut b = Apps::new(AppsConfig::default(), TS + 1, amrm);
    b.enable_store(1);
    assert_eq!(b.recover(&rec, 30), (0, 1));
    let app = b.app(id).unwrap();
    assert_eq!(app.state, AppState::Killed);
    assert_eq!(app.acls, want);

    // The reduced report keeps the identity, states and times, and blanks the rest.
    let full = report(app);
    let r = reduced_report(app);
    assert_eq!(r.application_id, full.application_id);
    assert_eq!(r.user.as_deref(), Some("alice"));
    assert_eq!(r.yarn_application_state, full.yarn_application_state);
    assert_eq!(r.final_application_status, full.final_application_status);
    assert_eq!(r.start_time, full.start_time);
    assert_eq!(r.finish_time, full.finish_time);
    assert_eq!(r.diagnostics.as_deref(), Some("N/A"));
    assert_ne!(full.diagnostics.as_deref(), Some("N/A"));
    assert_eq!(r.host.as_deref(), Some("N/A"));
    assert_eq!(r.rpc_port, Some(-1));
    assert_eq!(r.progress, Some(0.0));
    assert_eq!(
        r.current_application_attempt_id.unwrap().attempt_id,
        Some(-1)
    );
    let u = r.app_resource_usage.unwrap();
    assert_eq!(u.num_used_containers, Some(-1));
    assert_eq!(u.used_resources.unwrap().memory, Some(-1));
}

#[test]
fn a_running_application_is_recovered_and_its_containers_come_back_with_their_nodes() {
    use crate::state_store::Recovered;
    let m = AmrmTokenSecretManager::new(&mut SeededEntropy(7), 0, 86_400_000, 1000, 100).unwrap();
    let amrm = Arc::new(AmrmTokenSecrets::new(m));
    let heartbeat_only = AppsConfig {
        immediate_placement: false,
        ..AppsConfig::default()
    };
    let mut a = Apps::new(heartbeat_only.clone(), TS, amrm.clone());
    a.enable_store(0);
    a.node_added(&NodeKey::new("h1", 1), "h1:8042".into(), Res::new(4096, 4));
    a.node_added(&NodeKey::new("h2", 2), "h2:8042".into(), Res::new(4096, 4));
    let (id, at) = running(&mut a);
    let h1 = NodeKey::new("h1", 1);
    let h2 = NodeKey::new("h2", 2);
    let req = AllocateRequestProto {
        ask: vec![ask(0, ANY, 3, 1024, true)],
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
    let tasks: Vec<ContainerId> = r
        .allocated_containers
        .iter()
        .map(|c| container_from_proto(c.id.as_ref().unwrap()).unwrap())
        .collect();
    assert_eq!(tasks.len(), 3);
    // A second application finished before the restart.
    let (done_id, _) = a.new_application().unwrap();
    a.submit(ctx(done_id, 512, "default"), "bob", 75).unwrap();
    a.kill(done_id, None, 76).unwrap();
    // What the store got (the AM container's record comes from the launch, written by
    // the IO side: add it as it would).
    let mut rec = Recovered::default();
    for op in a.take_store_ops() {
        rec.apply(op);
    }
    let am = a.app(id).unwrap().current().unwrap().am_container.unwrap();
    rec.apply(Rec::AmAllocated(crate::state_store::AmAllocatedRec {
        attempt: attempt_to_proto(&at),
        container: am.id,
        host: "h1".into(),
        port: 1,
        allocated_ms: 20,
    }));
    rec.records = 9;
    drop(a);

    // The new RM: another cluster timestamp, epoch 1, the same AMRM secrets.
    let mut b = Apps::new(heartbeat_only, TS + 1000, amrm.clone());
    b.enable_store(1);
    assert_eq!(b.recover(&rec, 100), (1, 1));
    assert_eq!(b.app(done_id).unwrap().state, AppState::Killed);
    assert_eq!(b.app(id).unwrap().state, AppState::Accepted);
    assert_eq!(
        b.app(id).unwrap().current().unwrap().state,
        AttemptState::Launched
    );
    assert!(amrm.read().is_registered(&at));
    let cleanups = b.take_cleanups();
    assert!(cleanups.contains(&Cleanup::HoldAcks(id)), "{cleanups:?}");
    assert!(cleanups.contains(&Cleanup::App(done_id)), "{cleanups:?}");
    // New ids do not collide with recovered ones.
    let (next, _) = b.new_application().unwrap();
    assert_eq!(next.id, done_id.id + 1);
    // The AM's allocate before it re-registers: Java's re-register signal.
    let e = b
        .allocate(
            at,
            1,
            &AllocateRequestProto {
                response_id: Some(2),
                ..Default::default()
            },
            &keys(),
            110,
        )
        .unwrap_err();
    assert_eq!(e.class, exc::AM_NOT_REGISTERED);
    // h1 comes back with the AM container; h2 with one task running, one completed
    // while the RM was away, and without the third.
    b.node_registered(
        &h1,
        "h1:8042".into(),
        Res::new(4096, 4),
        &[running_report(am, ContainerStateProto::CRunning, 0)],
        120,
    );
    assert_eq!(b.node(&h1).unwrap().used, Res::new(1024, 1));
    b.node_registered(
        &h2,
        "h2:8042".into(),
        Res::new(4096, 4),
        &[
            running_report(tasks[0], ContainerStateProto::CRunning, 0),
            running_report(tasks[1], ContainerStateProto::CComplete, 3),
        ],
        130,
    );
    assert_eq!(b.node(&h2).unwrap().used, Res::new(1024, 1));
    b.register_am(at, &RegisterApplicationMasterRequestProto::default(), 140)
        .unwrap();
    let r = b
        .allocate(
            at,
            1,
            &AllocateRequestProto {
                response_id: Some(0),
                ask: vec![ask(0, ANY, 1, 1024, true)],
                release: vec![tasks[0].to_proto()],
                ..Default::default()
            },
            &keys(),
            150,
        )
        .unwrap();
    let got: Vec<(ContainerId, i32)> = r
        .completed_container_statuses
        .iter()
        .map(|s| {
            (
                container_from_proto(s.container_id.as_ref().unwrap()).unwrap(),
                s.exit_status.unwrap(),
            )
        })
        .collect();
    assert!(got.contains(&(tasks[1], 3)), "{got:?}");
    // The third one no node reported: the RM never knew it after the restart (as Java's,
    // which learns a container only from its NodeManager).
    assert!(!got.iter().any(|(c, _)| *c == tasks[2]), "{got:?}");
    assert!(
        got.contains(&(tasks[0], exit_status::ABORTED)),
        "released: {got:?}"
    );
    assert_eq!(b.node(&h2).unwrap().used, Res::default());
    // The replacement carries the new epoch.
    update(&mut b, &h2, &[], 160);
    let r = b
        .allocate(
            at,
            1,
            &AllocateRequestProto {
                response_id: Some(1),
                ..Default::default()
            },
            &keys(),
            170,
        )
        .unwrap();
    let new = container_from_proto(r.allocated_containers[0].id.as_ref().unwrap()).unwrap();
    assert_eq!(new.epoch(), 1);
    assert!(new.to_string().starts_with("container_e01_"), "{new}");
    assert_eq!(b.app(id).unwrap().state, AppState::Running);
}

#[test]
fn a_failed_last_attempt_is_retried_and_an_unallocated_one_scheduled_after_recovery() {
    use crate::state_store::Recovered;
    let mut a = apps(AppsConfig::default());
    a.enable_store(0);
    let (id, at) = running(&mut a);
    let am = a.app(id).unwrap().current().unwrap().am_container.unwrap();
    update(&mut a, &NodeKey::new("h1", 1), &[(am, 1)], 200);
    assert_eq!(a.app(id).unwrap().attempts.len(), 2);
    let (id2, _) = a.new_application().unwrap();
    a.submit(ctx(id2, 512, "default"), "bob", 210).unwrap();
    let mut rec = Recovered::default();
    for op in a.take_store_ops() {
        rec.apply(op);
    }
    rec.records = 5;
    let _ = at;
    let mut b = apps(AppsConfig::default());
    b.enable_store(1);
    assert_eq!(b.recover(&rec, 300), (2, 0));
    let app = b.app(id).unwrap();
    assert_eq!(app.attempts.len(), 2);
    assert_eq!(app.attempts[0].state, AttemptState::Failed);
    assert_eq!(app.current().unwrap().state, AttemptState::Scheduled);
    assert_eq!(app.failures, 1);
    assert_eq!(
        b.app(id2).unwrap().current().unwrap().state,
        AttemptState::Scheduled
    );
    // Both get AM containers on the next node update.
    update(&mut b, &NodeKey::new("h1", 1), &[], 310);
    assert_eq!(b.take_launches().len(), 2);
}
