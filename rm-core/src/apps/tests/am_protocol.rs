//! ApplicationMasterProtocol: an application from submission to FINISHED, allocate's checks,
//! caps and tokens.

use super::*;

#[test]
fn an_application_runs_from_submission_to_finished() {
    let mut a = apps(AppsConfig::default());
    let (id, at) = running(&mut a);
    let (h1, h2) = (NodeKey::new("h1", 1), NodeKey::new("h2", 2));
    let k = keys();
    let req = AllocateRequestProto {
        ask: vec![ask(0, ANY, 4, 1000, true)],
        response_id: Some(0),
        ..Default::default()
    };
    let r0 = a.allocate(at, 1, &req, &k, 50).unwrap();
    assert_eq!(r0.response_id, Some(1));
    assert!(
        r0.allocated_containers.is_empty(),
        "allocation happens on node updates"
    );
    // h1 has 3 GB left after the AM, h2 4 GB: 3 + 1.
    update(&mut a, &h1, &[], 60);
    update(&mut a, &h2, &[], 61);
    assert_eq!(a.node(&h1).unwrap().used, Res::new(4096, 4));
    let req = AllocateRequestProto {
        response_id: Some(1),
        ..Default::default()
    };
    let r1 = a.allocate(at, 1, &req, &k, 70).unwrap();
    assert_eq!(r1.allocated_containers.len(), 4);
    assert_eq!(r1.nm_tokens.len(), 2, "one NMToken per node");
    let first = &r1.allocated_containers[0];
    let ct =
        Token::from_proto(first.container_token.clone().unwrap(), &Default::default()).unwrap();
    let cid = ContainerTokenIdentifier::parse(&ct.identifier).unwrap();
    assert_eq!(
        cid.container_id().unwrap().to_string(),
        format!("container_{TS}_0001_01_000002")
    );
    assert_eq!(ct.password, k.container.password(cid.bytes()).to_vec());
    // A repeat of the same request gets the same response; an older one is refused.
    assert_eq!(a.allocate(at, 1, &req, &k, 71).unwrap(), r1);
    let stale = AllocateRequestProto {
        response_id: Some(7),
        ..Default::default()
    };
    let e = a.allocate(at, 1, &stale, &k, 72).unwrap_err();
    assert_eq!(e.class, exc::INVALID_AM_REQUEST);
    assert_eq!(
        e.message,
        format!("Invalid responseId in AllocateRequest from application attempt: {at} expect responseId to be 2 but get 7")
    );
    // Completions: reported twice by the NM, delivered once.
    let ids: Vec<ContainerId> = r1
        .allocated_containers
        .iter()
        .map(|c| container_from_proto(c.id.as_ref().unwrap()).unwrap())
        .collect();
    let on_h2 = ids
        .iter()
        .copied()
        .find(|c| a.apps[&1].attempts[0].live[c].node == h2)
        .unwrap();
    update(&mut a, &h2, &[(on_h2, 7)], 80);
    update(&mut a, &h2, &[(on_h2, 7)], 81);
    assert_eq!(a.node(&h2).unwrap().used, Res::default());
    let req = AllocateRequestProto {
        response_id: Some(2),
        release: vec![ids[0].to_proto()],
        ..Default::default()
    };
    let r2 = a.allocate(at, 1, &req, &k, 90).unwrap();
    let got: Vec<(ContainerId, i32)> = r2
        .completed_container_statuses
        .iter()
        .map(|s| {
            (
                container_from_proto(s.container_id.as_ref().unwrap()).unwrap(),
                s.exit_status.unwrap(),
            )
        })
        .collect();
    assert_eq!(got, vec![(on_h2, 7), (ids[0], exit_status::ABORTED)]);
    // The AM pulled both completions: their acknowledgements go out; the released one is
    // also killed on its node.
    assert_eq!(
        a.take_cleanups(),
        vec![
            Cleanup::HoldAcks(id),
            Cleanup::Ack(on_h2),
            Cleanup::Ack(ids[0]),
            Cleanup::Container(ids[0])
        ]
    );
    let req = AllocateRequestProto {
        response_id: Some(3),
        ..Default::default()
    };
    assert!(a
        .allocate(at, 1, &req, &k, 91)
        .unwrap()
        .completed_container_statuses
        .is_empty());
    // Unregister: FINISHED to clients at once; the AM container's exit ends the attempt.
    let fin = FinishApplicationMasterRequestProto {
        final_application_status: Some(FinalApplicationStatusProto::AppSucceeded as i32),
        diagnostics: Some("ok".into()),
        ..Default::default()
    };
    assert!(a.finish_am(at, &fin, 100).unwrap());
    let rep = a.report(id).unwrap();
    assert_eq!(
        rep.yarn_application_state,
        Some(YarnApplicationStateProto::Finished as i32)
    );
    assert_eq!(
        rep.final_application_status,
        Some(FinalApplicationStatusProto::AppSucceeded as i32)
    );
    let am = a.apps[&1].attempts[0].am_container.unwrap();
    update(&mut a, &h1, &[(am, 0)], 110);
    assert_eq!(a.app(id).unwrap().state, AppState::Finished);
    let mut cl = a.take_cleanups();
    assert_eq!(
        cl[0],
        Cleanup::Ack(am),
        "the AM container's is acknowledged at once"
    );
    // The two containers the AM left running are killed; then the application cleanup.
    assert_eq!(
        cl[cl.len() - 2..],
        [Cleanup::App(id), Cleanup::ReleaseAcks(id)]
    );
    cl.truncate(cl.len() - 2);
    cl.remove(0);
    cl.sort_by_key(|c| match c {
        Cleanup::Container(c) => c.id,
        _ => -1,
    });
    assert_eq!(
        cl,
        vec![Cleanup::Container(ids[1]), Cleanup::Container(ids[2])]
    );
    assert!(!a.amrm.read().is_registered(&at));
    assert!(!a.gate().load(Ordering::Relaxed), "nothing in flight");
    assert_eq!(a.node(&h1).unwrap().used, Res::default());
    assert_eq!(a.node(&h2).unwrap().used, Res::default());
}

#[test]
fn asks_and_blacklists_are_capped() {
    let mut a = apps(AppsConfig {
        max_asks_per_attempt: 3,
        max_blacklist: 1,
        ..Default::default()
    });
    let (_, at) = running(&mut a);
    let many = AllocateRequestProto {
        ask: (0..4)
            .map(|i| ask(0, &format!("host{i}"), 1, 1024, true))
            .collect(),
        response_id: Some(0),
        ..Default::default()
    };
    let e = a.allocate(at, 1, &many, &keys(), 50).unwrap_err();
    assert_eq!(e.class, exc::INVALID_RESOURCE_REQUEST);
    let bl = AllocateRequestProto {
        response_id: Some(0),
        blacklist_request: Some(
            hadoop_wire::pb::hadoop::yarn::ResourceBlacklistRequestProto {
                blacklist_additions: vec!["a".into(), "b".into()],
                blacklist_removals: vec![],
            },
        ),
        ..Default::default()
    };
    let e = a.allocate(at, 1, &bl, &keys(), 51).unwrap_err();
    assert_eq!(e.class, exc::INVALID_BLACKLIST_REQUEST);
    // Refused requests changed nothing: responseId 0 is still expected.
    let ok = AllocateRequestProto {
        response_id: Some(0),
        ask: vec![ask(0, ANY, 1, 1024, true)],
        ..Default::default()
    };
    assert_eq!(
        a.allocate(at, 1, &ok, &keys(), 52).unwrap().response_id,
        Some(1)
    );
    // A blacklisted host gets nothing.
    let bl = AllocateRequestProto {
        response_id: Some(1),
        blacklist_request: Some(
            hadoop_wire::pb::hadoop::yarn::ResourceBlacklistRequestProto {
                blacklist_additions: vec!["h2".into()],
                blacklist_removals: vec![],
            },
        ),
        ..Default::default()
    };
    a.allocate(at, 1, &bl, &keys(), 53).unwrap();
    update(&mut a, &NodeKey::new("h2", 2), &[], 60);
    assert_eq!(a.node(&NodeKey::new("h2", 2)).unwrap().used, Res::default());
    update(&mut a, &NodeKey::new("h1", 1), &[], 61);
    assert_eq!(
        a.node(&NodeKey::new("h1", 1)).unwrap().used,
        Res::new(2048, 2)
    );
}

#[test]
fn allocate_hands_out_the_rolled_amrm_token_until_the_am_uses_it() {
    let mut a = apps(AppsConfig::default());
    let (_, at) = running(&mut a);
    let old = a.amrm.read().current_key().key_id;
    let req = |rid: i32| AllocateRequestProto {
        response_id: Some(rid),
        ..Default::default()
    };
    assert!(a
        .allocate(at, old, &req(0), &keys(), 50)
        .unwrap()
        .am_rm_token
        .is_none());
    // Roll (the manager's interval is a day): a next key is pending.
    assert!(a
        .amrm
        .write()
        .tick(&mut SeededEntropy(9), 86_400_000)
        .unwrap());
    let next = a.amrm.read().next_key().unwrap().key_id;
    let r = a.allocate(at, old, &req(1), &keys(), 60).unwrap();
    let t = Token::from_proto(r.am_rm_token.clone().unwrap(), &Default::default()).unwrap();
    let id = hadoop_wire::token::AmrmTokenIdentifier::parse(&t.identifier).unwrap();
    assert_eq!((id.attempt_id(), id.key_id()), (Some(at), next));
    // Once the AM authenticates with the new token, no more.
    assert!(a
        .allocate(at, next, &req(2), &keys(), 70)
        .unwrap()
        .am_rm_token
        .is_none());
}

#[test]
fn releases_of_other_attempts_and_a_wildcard_blacklist_are_refused() {
    let mut a = apps(AppsConfig::default());
    let (id, at) = running(&mut a);
    let other = ContainerId {
        app: id,
        attempt: 2,
        id: 5,
    };
    let req = AllocateRequestProto {
        response_id: Some(0),
        release: vec![other.to_proto()],
        ..Default::default()
    };
    let e = a.allocate(at, 1, &req, &keys(), 50).unwrap_err();
    assert_eq!(e.class, exc::INVALID_CONTAINER_RELEASE);
    assert_eq!(
        e.message,
        format!(
            "Cannot release container : {other} not belonging to this application attempt : {at}"
        )
    );
    let req = AllocateRequestProto {
        response_id: Some(0),
        blacklist_request: Some(
            hadoop_wire::pb::hadoop::yarn::ResourceBlacklistRequestProto {
                blacklist_additions: vec![ANY.into()],
                blacklist_removals: vec![],
            },
        ),
        ..Default::default()
    };
    let e = a.allocate(at, 1, &req, &keys(), 51).unwrap_err();
    assert_eq!(
        (e.class, e.message.as_str()),
        (
            exc::INVALID_BLACKLIST_REQUEST,
            "Cannot add * to the blacklist!"
        )
    );
}

#[test]
fn rack_local_and_a_fresh_nm_token_after_the_key_rolled() {
    let mut a = apps(AppsConfig::default());
    let (_, at) = running(&mut a);
    let h1 = NodeKey::new("h1", 1);
    // Wanted on h3 (not in the cluster) or its rack: rack-local on h1.
    let req = AllocateRequestProto {
        ask: vec![
            ask(0, "h3", 1, 1024, true),
            ask(0, DEFAULT_RACK, 1, 1024, true),
            ask(0, ANY, 1, 1024, true),
        ],
        response_id: Some(0),
        ..Default::default()
    };
    a.allocate(at, 1, &req, &keys(), 50).unwrap();
    update(&mut a, &h1, &[], 60);
    let att = a.apps[&1].current().unwrap();
    assert_eq!(att.pending_containers(), 0);
    assert_eq!(att.asks[&0][DEFAULT_RACK].num, 0);
    assert_eq!(
        att.asks[&0]["h3"].num, 1,
        "the node-level count is not decremented"
    );
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
    assert_eq!(r.allocated_containers.len(), 1);
    assert_eq!(r.nm_tokens.len(), 1);
    // Another container on h1: no new NMToken with the same key, a new one after a roll.
    let more = AllocateRequestProto {
        response_id: Some(2),
        ask: vec![ask(0, ANY, 2, 1024, true)],
        ..Default::default()
    };
    a.allocate(at, 1, &more, &keys(), 80).unwrap();
    update(&mut a, &h1, &[], 90);
    let r = a
        .allocate(
            at,
            1,
            &AllocateRequestProto {
                response_id: Some(3),
                ..Default::default()
            },
            &keys(),
            100,
        )
        .unwrap();
    assert_eq!(r.allocated_containers.len(), 2);
    assert!(r.nm_tokens.is_empty());
    let h2 = NodeKey::new("h2", 2);
    let one = |rid: i32| AllocateRequestProto {
        response_id: Some(rid),
        ask: vec![ask(0, ANY, 1, 1024, true)],
        ..Default::default()
    };
    a.allocate(at, 1, &one(4), &keys(), 110).unwrap();
    update(&mut a, &h2, &[], 120);
    let r = a.allocate(at, 1, &one(5), &keys(), 130).unwrap();
    assert_eq!(
        (r.allocated_containers.len(), r.nm_tokens.len()),
        (1, 1),
        "a new node"
    );
    update(&mut a, &h2, &[], 140);
    let mut rolled = keys();
    rolled.nm = MasterKey::new(3, vec![3; 8]).unwrap();
    let r = a
        .allocate(
            at,
            1,
            &AllocateRequestProto {
                response_id: Some(6),
                ..Default::default()
            },
            &rolled,
            150,
        )
        .unwrap();
    assert_eq!(
        (r.allocated_containers.len(), r.nm_tokens.len()),
        (1, 1),
        "same node, new key"
    );
    let t = Token::from_proto(r.nm_tokens[0].token.clone().unwrap(), &Default::default()).unwrap();
    let id = hadoop_wire::token::NmTokenIdentifier::parse(&t.identifier).unwrap();
    assert_eq!(id.key_id(), 3);
}
