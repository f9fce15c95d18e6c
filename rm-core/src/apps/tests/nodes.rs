//! The running cluster totals against a recount, after any sequence of events.

use super::*;

#[derive(Debug, Clone)]
enum NodeEvent {
    /// (Re-)registration with a capability (0 to 8 GB and vcores), reporting one handed-out
    /// container complete or running.
    Register(usize, i64, i64, Option<(usize, bool)>),
    /// Lost, unhealthy, decommissioned or shut down.
    Remove(usize),
    /// A heartbeat reporting a handed-out container complete.
    Update(usize, Option<usize>),
    Submit,
    /// The launched AMs start and register.
    Launch,
    /// An attempt asks for containers and releases one.
    Allocate(usize, i32, Option<usize>),
    Kill(usize),
    Tick(u64),
}

fn node_event() -> impl proptest::strategy::Strategy<Value = NodeEvent> {
    use proptest::prelude::*;
    let pick = proptest::option::of(0..16usize);
    prop_oneof![
        (
            0..6usize,
            0..5i64,
            0..5i64,
            proptest::option::of((0..16usize, any::<bool>()))
        )
            .prop_map(|(n, m, v, r)| NodeEvent::Register(n, m * 2048, v * 2, r)),
        (0..6usize).prop_map(NodeEvent::Remove),
        (0..6usize, pick.clone()).prop_map(|(n, c)| NodeEvent::Update(n, c)),
        Just(NodeEvent::Submit),
        Just(NodeEvent::Launch),
        (0..4usize, 0..6i32, pick).prop_map(|(a, n, c)| NodeEvent::Allocate(a, n, c)),
        (0..4usize).prop_map(NodeEvent::Kill),
        (0..700_000u64).prop_map(NodeEvent::Tick),
    ]
}

proptest::proptest! {
    /// The running cluster totals (active nodes, capacity, use) equal a full recount after
    /// any sequence of node and application events.
    #[test]
    fn cluster_totals_match_a_recount_after_any_node_events(
        immediate in proptest::bool::ANY,
        events in proptest::collection::vec(node_event(), 1..60),
    ) {
        let m = AmrmTokenSecretManager::new(&mut SeededEntropy(7), 0, 86_400_000, 1000, 100)
            .unwrap();
        let cfg = AppsConfig { immediate_placement: immediate, ..AppsConfig::default() };
        let mut a = Apps::new(cfg, TS, Arc::new(AmrmTokenSecrets::new(m)));
        let node = |i: usize| NodeKey::new(&format!("h{i}"), 1);
        let (mut apps, mut attempts, mut handed) = (Vec::new(), Vec::new(), Vec::new());
        let mut now = 10;
        for e in events {
            now += 10;
            match e {
                NodeEvent::Register(i, mb, vc, r) => {
                    let reported: Vec<Reported> = r
                        .and_then(|(k, done)| handed.get(k).map(|&c| (c, done)))
                        .map(|(c, done)| Reported {
                            id: c,
                            state: if done {
                                ContainerStateProto::CComplete
                            } else {
                                ContainerStateProto::CRunning
                            },
                            exit_status: 0,
                            diagnostics: String::new(),
                            res: Res::new(1024, 1),
                            priority: 0,
                        })
                        .into_iter()
                        .collect();
                    let key = node(i);
                    a.node_registered(&key, format!("h{i}:8042"), Res::new(mb, vc), &reported, now);
                }
                NodeEvent::Remove(i) => a.node_removed(&node(i), now),
                NodeEvent::Update(i, c) => {
                    let done: Vec<_> = c.and_then(|k| handed.get(k)).map(|&c| (c, 0)).into_iter().collect();
                    update(&mut a, &node(i), &done, now);
                }
                NodeEvent::Submit => {
                    if let Ok((id, _)) = a.new_application() {
                        if a.submit(ctx(id, 512, "default"), "alice", now).is_ok() {
                            apps.push(id);
                        }
                    }
                    a.place_unplaced(now);
                }
                NodeEvent::Launch => {
                    for l in a.take_launches() {
                        handed.push(l.container);
                        a.am_launched(l.attempt, now);
                        if a.register_am(l.attempt, &RegisterApplicationMasterRequestProto::default(), now).is_ok() {
                            attempts.push((l.attempt, 0));
                        }
                    }
                }
                NodeEvent::Allocate(k, n, c) => {
                    if let Some((at, rid)) = attempts.get_mut(k) {
                        let req = AllocateRequestProto {
                            ask: vec![ask(1, ANY, n, 1024, true)],
                            release: c.and_then(|k| handed.get(k)).map(|c| c.to_proto()).into_iter().collect(),
                            response_id: Some(*rid),
                            ..Default::default()
                        };
                        if let Ok(r) = a.allocate(*at, 1, &req, &keys(), now) {
                            *rid = r.response_id.unwrap_or(0);
                            let active = a.nodes.values().filter(|n| n.active).count();
                            proptest::prop_assert_eq!(r.num_cluster_nodes, Some(active as i32));
                            for c in &r.allocated_containers {
                                let id = c.id.as_ref().and_then(container_from_proto).unwrap();
                                handed.push(id);
                            }
                        }
                    }
                }
                NodeEvent::Kill(k) => {
                    if let Some(&id) = apps.get(k) {
                        let _ = a.kill(id, None, now);
                    }
                }
                NodeEvent::Tick(dt) => {
                    now += dt;
                    a.tick(now);
                }
            }
            proptest::prop_assert_eq!(a.nodes.totals, a.nodes.recount());
            let (total, used) = a.nodes.values().filter(|n| n.active).fold(
                (Res::default(), Res::default()),
                |(t, u), n| (t.plus(n.total), u.plus(n.used)),
            );
            proptest::prop_assert_eq!(a.cluster_resources(), (total, used));
            proptest::prop_assert_eq!(a.active_nodes(), a.nodes.values().filter(|n| n.active).count());
        }
    }
}
