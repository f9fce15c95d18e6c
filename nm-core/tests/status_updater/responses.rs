//! The sans-IO status updater against hand-built RM responses (prost), no sockets.

use hadoop_wire::pb::hadoop::yarn::{
    MasterKeyProto, NodeHeartbeatRequestProto, NodeHeartbeatResponseProto,
    RegisterNodeManagerRequestProto, RegisterNodeManagerResponseProto,
};
use nm_core::ids::{AppId, ContainerId};
use nm_core::status_updater::*;
use nm_core::table::*;
use nm_core::wire::{self, NodeHealth};
use prost::Message;

const APP: AppId = AppId::new(1_700_000_000_000, 3);

fn cid(n: i64) -> ContainerId {
    ContainerId::new(APP, 1, n)
}

fn updater() -> StatusUpdater {
    StatusUpdater::new(UpdaterConfig {
        identity: NodeIdentity {
            host: "127.0.0.2".into(),
            port: 45454,
            http_port: 8042,
            resource: Resource {
                memory_mb: 8192,
                vcores: 8,
            },
            nm_version: NM_VERSION.into(),
        },
        track_stopped_ms: 600_000,
        default_interval_ms: 1000,
    })
}

fn key(id: i32) -> MasterKeyProto {
    MasterKeyProto {
        key_id: Some(id),
        bytes: Some(vec![id as u8; 16]),
    }
}

fn register_ok() -> Vec<u8> {
    RegisterNodeManagerResponseProto {
        container_token_master_key: Some(key(11)),
        nm_token_master_key: Some(key(21)),
        node_action: Some(0),
        rm_identifier: Some(42),
        rm_version: Some("3.5.0".into()),
        ..Default::default()
    }
    .encode_to_vec()
}

fn hb(id: i32) -> NodeHeartbeatResponseProto {
    NodeHeartbeatResponseProto {
        response_id: Some(id),
        node_action: Some(0),
        next_heart_beat_interval: Some(500),
        ..Default::default()
    }
}

fn decode_hb(b: &[u8]) -> NodeHeartbeatRequestProto {
    NodeHeartbeatRequestProto::decode(b).expect("our heartbeat decodes with prost")
}

fn ids_in(req: &NodeHeartbeatRequestProto) -> Vec<(i64, i32)> {
    let mut v: Vec<_> = req
        .node_status
        .as_ref()
        .unwrap()
        .containers_statuses
        .iter()
        .map(|s| (s.container_id.unwrap().id.unwrap(), s.state.unwrap()))
        .collect();
    v.sort();
    v
}

fn registered(u: &mut StatusUpdater, t: &mut ContainerTable) {
    let mut out = Vec::new();
    u.encode_register(t, &NodeHealth::default(), &mut out)
        .unwrap();
    let out = u.on_register_response(&register_ok(), t, 0).unwrap();
    assert!(matches!(
        out,
        RegisterOutcome::Registered {
            rm_identifier: Some(42),
            ..
        }
    ));
}

#[test]
fn heartbeat_bytes_are_what_prost_writes_for_the_same_message() {
    let mut u = updater();
    let mut t = ContainerTable::new(100);
    registered(&mut u, &mut t);
    t.launch(
        cid(1),
        Resource {
            memory_mb: 1024,
            vcores: 1,
        },
        0,
        5,
        true,
    )
    .unwrap();
    t.launch(
        cid(1 << 41 | 2),
        Resource {
            memory_mb: 2048,
            vcores: 2,
        },
        0,
        5,
        false,
    )
    .unwrap();
    t.launch(
        cid(3),
        Resource {
            memory_mb: 512,
            vcores: 1,
        },
        0,
        5,
        true,
    )
    .unwrap();
    t.complete(&cid(3), -106, "killed ünïcode").unwrap();
    let health = NodeHealth {
        healthy: false,
        report: "1/1 local-dirs are bad".into(),
        last_report_wall_ms: 1_700_000_000_123,
    };
    let bytes = u.heartbeat_request(&mut t, &health).unwrap().to_vec();
    let req = decode_hb(&bytes);
    // byte equality with prost re-encoding the decoded message: same fields, same order,
    // minimal varints
    assert_eq!(req.encode_to_vec(), bytes);
    let ns = req.node_status.as_ref().unwrap();
    assert_eq!(
        ns.node_id.as_ref().unwrap().host.as_deref(),
        Some("127.0.0.2")
    );
    assert_eq!(ns.node_id.as_ref().unwrap().port, Some(45454));
    assert_eq!(ns.response_id, Some(0));
    let h = ns.node_health_status.as_ref().unwrap();
    assert_eq!(h.is_node_healthy, Some(false));
    assert_eq!(h.health_report.as_deref(), Some("1/1 local-dirs are bad"));
    assert_eq!(h.last_health_report_time, Some(1_700_000_000_123));
    assert_eq!(ids_in(&req), vec![(1, 2), (3, 3), (1 << 41 | 2, 1)]);
    let done = ns
        .containers_statuses
        .iter()
        .find(|s| s.container_id.unwrap().id == Some(3))
        .unwrap();
    assert_eq!(done.exit_status, Some(-106));
    assert_eq!(done.diagnostics.as_deref(), Some("killed ünïcode"));
    assert_eq!(done.capability.as_ref().unwrap().memory, Some(512));
    let c = done.container_id.unwrap();
    assert_eq!(
        c.app_attempt_id
            .unwrap()
            .application_id
            .unwrap()
            .cluster_timestamp,
        Some(APP.cluster_timestamp)
    );
    assert_eq!(c.app_attempt_id.unwrap().attempt_id, Some(1));
    // trap 3: both master keys echoed
    assert_eq!(req.last_known_container_token_master_key, Some(key(11)));
    assert_eq!(req.last_known_nm_token_master_key, Some(key(21)));
    // and the ipc view the RM side uses agrees
    let v = hadoop_wire::view::yarn::NodeHeartbeatRequestView::new(&bytes);
    v.validate().unwrap();
    assert_eq!(
        v.node_status()
            .unwrap()
            .unwrap()
            .containers_statuses()
            .count(),
        3
    );
}

#[test]
fn registration_reports_every_container_and_heartbeats_follow_the_response_ids() {
    let mut u = updater();
    let mut t = ContainerTable::new(100);
    t.launch(
        cid(1),
        Resource {
            memory_mb: 1024,
            vcores: 1,
        },
        7,
        99,
        true,
    )
    .unwrap();
    t.launch(
        cid(2),
        Resource {
            memory_mb: 1024,
            vcores: 1,
        },
        7,
        99,
        true,
    )
    .unwrap();
    t.complete(&cid(2), 0, "").unwrap();
    assert_eq!(
        u.heartbeat_request(&mut t, &NodeHealth::default()),
        Err(UpdaterError::NotRegistered)
    );
    let mut out = Vec::new();
    u.encode_register(&t, &NodeHealth::default(), &mut out)
        .unwrap();
    let req = RegisterNodeManagerRequestProto::decode(&out[..]).unwrap();
    assert_eq!(req.node_id.as_ref().unwrap().port, Some(45454));
    assert_eq!(req.http_port, Some(8042));
    assert_eq!(req.resource.as_ref().unwrap().memory, Some(8192));
    assert_eq!(req.resource.as_ref().unwrap().virtual_cores, Some(8));
    assert_eq!(req.nm_version.as_deref(), Some(NM_VERSION));
    let mut st: Vec<_> = req
        .container_statuses
        .iter()
        .map(|s| {
            (
                s.container_id.unwrap().id.unwrap(),
                s.container_state.unwrap(),
                s.container_exit_status.unwrap(),
            )
        })
        .collect();
    st.sort();
    assert_eq!(st, vec![(1, 2, -1000), (2, 3, 0)]);
    assert_eq!(req.running_applications.len(), 1);
    u.on_register_response(&register_ok(), &mut t, 10).unwrap();
    assert!(u.is_registered());
    // the completion was reported in the registration: delivered, not in heartbeats
    let r = decode_hb(u.heartbeat_request(&mut t, &NodeHealth::default()).unwrap());
    assert_eq!(ids_in(&r), vec![(1, 2)]);
    assert_eq!(r.node_status.as_ref().unwrap().response_id, Some(0));
    for id in [1, 2, 3, i32::MAX, 0] {
        let o = u
            .on_heartbeat_response(&hb(id).encode_to_vec(), &mut t, 20)
            .unwrap();
        assert_eq!(
            o,
            HeartbeatOutcome::Normal {
                next_interval_ms: 500
            }
        );
        let r = decode_hb(u.heartbeat_request(&mut t, &NodeHealth::default()).unwrap());
        assert_eq!(r.node_status.as_ref().unwrap().response_id, Some(id));
        // keys echoed on every heartbeat although the responses carry none
        assert_eq!(r.last_known_container_token_master_key, Some(key(11)));
        assert_eq!(r.last_known_nm_token_master_key, Some(key(21)));
    }
    assert_eq!(u.stats().heartbeats_ok, 5);
    // a second response for the same heartbeat is refused
    u.on_heartbeat_response(&hb(1).encode_to_vec(), &mut t, 20)
        .unwrap();
    assert_eq!(
        u.on_heartbeat_response(&hb(2).encode_to_vec(), &mut t, 20),
        Err(UpdaterError::NoHeartbeatOutstanding)
    );
}

#[test]
fn a_completion_is_sent_until_a_heartbeat_carrying_it_succeeds_then_kept_until_forgotten() {
    let mut u = updater();
    let mut t = ContainerTable::new(100);
    registered(&mut u, &mut t);
    let h = NodeHealth::default();
    for n in 1..=4 {
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
    u.heartbeat_request(&mut t, &h).unwrap();
    u.on_heartbeat_response(&hb(1).encode_to_vec(), &mut t, 100)
        .unwrap();
    t.complete(&cid(1), 0, "").unwrap();
    let first = u.heartbeat_request(&mut t, &h).unwrap().to_vec();
    assert!(ids_in(&decode_hb(&first)).contains(&(1, 3)));
    // no answer: a completion made meanwhile waits; the same bytes go again
    u.on_heartbeat_failed();
    t.complete(&cid(2), 1, "exit 1").unwrap();
    let again = u.heartbeat_request(&mut t, &h).unwrap().to_vec();
    assert_eq!(again, first);
    assert_eq!(u.stats().heartbeats_resent, 1);
    // a malformed answer is an error and also leaves it outstanding
    assert!(u.on_heartbeat_response(&[0x08], &mut t, 150).is_err());
    assert!(u
        .on_heartbeat_response(&[0x20, 0x07, 0x08, 0x01], &mut t, 150)
        .is_err());
    assert!(u.heartbeat_outstanding());
    u.on_heartbeat_response(&hb(2).encode_to_vec(), &mut t, 200)
        .unwrap();
    assert!(matches!(
        t.get(&cid(1)).unwrap().delivery,
        Delivery::Delivered { at_ms: 200 }
    ));
    let next = decode_hb(u.heartbeat_request(&mut t, &h).unwrap());
    assert_eq!(ids_in(&next), vec![(2, 3), (3, 2), (4, 2)]);
    // RESYNC: container 2 was in flight, not delivered; the registration reports both
    let o = u
        .on_heartbeat_response(
            &NodeHeartbeatResponseProto {
                node_action: Some(1),
                ..Default::default()
            }
            .encode_to_vec(),
            &mut t,
            300,
        )
        .unwrap();
    assert_eq!(o, HeartbeatOutcome::Resync);
    // until re-registered, the RM is unknown (Java's RM_INVALID_IDENTIFIER)
    assert_eq!(u.rm_identifier(), Some(-1));
    assert_eq!(t.get(&cid(2)).unwrap().delivery, Delivery::Pending);
    assert_eq!(
        u.heartbeat_request(&mut t, &h),
        Err(UpdaterError::NotRegistered)
    );
    let mut reg = Vec::new();
    u.encode_register(&t, &h, &mut reg).unwrap();
    let req = RegisterNodeManagerRequestProto::decode(&reg[..]).unwrap();
    let mut ids: Vec<_> = req
        .container_statuses
        .iter()
        .map(|s| s.container_id.unwrap().id.unwrap())
        .collect();
    ids.sort();
    assert_eq!(ids, vec![1, 2, 3, 4]);
    u.on_register_response(&register_ok(), &mut t, 400).unwrap();
    assert_eq!(u.response_id(), 0);
    // containers_to_be_removed_from_nm forgets completed containers only
    let mut r = hb(1);
    r.containers_to_be_removed_from_nm = vec![
        wire::container_id_proto(&cid(1)),
        wire::container_id_proto(&cid(3)),
    ];
    u.heartbeat_request(&mut t, &h).unwrap();
    u.on_heartbeat_response(&r.encode_to_vec(), &mut t, 500)
        .unwrap();
    assert!(t.get(&cid(1)).is_none());
    assert!(
        t.get(&cid(3)).is_some(),
        "a RUNNING container is not forgotten"
    );
    assert_eq!(t.totals().acked, 1);
    // duration-to-track-stopped-containers: container 2 was delivered at 400
    assert_eq!(u.expire(&mut t, 400 + 599_999), 0);
    assert_eq!(u.expire(&mut t, 400 + 600_000), 1);
    assert!(t.get(&cid(2)).is_none());
}

#[test]
fn key_rolls_cleanups_and_shutdown() {
    let mut u = updater();
    let mut t = ContainerTable::new(100);
    registered(&mut u, &mut t);
    let h = NodeHealth::default();
    let other = AppId::new(5, 5);
    t.launch(cid(1), Resource::default(), 0, 0, true).unwrap();
    t.launch(cid(2), Resource::default(), 0, 0, true).unwrap();
    t.launch(
        ContainerId::new(other, 1, 9),
        Resource::default(),
        0,
        0,
        true,
    )
    .unwrap();
    u.heartbeat_request(&mut t, &h).unwrap();
    let mut r = hb(1);
    r.container_token_master_key = Some(key(12));
    r.applications_to_cleanup = vec![APP.to_proto()];
    r.containers_to_cleanup = vec![wire::container_id_proto(&ContainerId::new(other, 1, 9))];
    u.on_heartbeat_response(&r.encode_to_vec(), &mut t, 10)
        .unwrap();
    let mut orders = Vec::new();
    t.take_orders(&mut orders);
    assert_eq!(orders.len(), 3);
    assert_eq!(u.stats().container_key_changes, 1); // the roll
    let req = decode_hb(u.heartbeat_request(&mut t, &h).unwrap());
    assert_eq!(req.last_known_container_token_master_key, Some(key(12)));
    assert_eq!(req.last_known_nm_token_master_key, Some(key(21)));
    // trap 2: the app comes again on the next heartbeat; no second order
    u.on_heartbeat_response(&r.encode_to_vec(), &mut t, 20)
        .unwrap();
    t.take_orders(&mut orders);
    assert_eq!(orders.len(), 3);
    // the executor reports them killed; after delivery the app's containers are forgotten
    t.complete(&cid(1), -107, "").unwrap();
    t.complete(&cid(2), -107, "").unwrap();
    u.heartbeat_request(&mut t, &h).unwrap();
    u.on_heartbeat_response(&hb(3).encode_to_vec(), &mut t, 30)
        .unwrap();
    assert!(t.get(&cid(1)).is_none() && t.get(&cid(2)).is_none());
    assert_eq!(t.len(), 1);
    u.heartbeat_request(&mut t, &h).unwrap();
    let down = NodeHeartbeatResponseProto {
        node_action: Some(2),
        diagnostics_message: Some("Disallowed NodeManager".into()),
        ..Default::default()
    };
    let o = u
        .on_heartbeat_response(&down.encode_to_vec(), &mut t, 40)
        .unwrap();
    assert_eq!(
        o,
        HeartbeatOutcome::Shutdown {
            diagnostics: "Disallowed NodeManager".into()
        }
    );
    assert_eq!(u.phase(), &Phase::Stopped("Disallowed NodeManager".into()));
    assert!(matches!(
        u.heartbeat_request(&mut t, &h),
        Err(UpdaterError::Stopped(_))
    ));
    // a registration refused with SHUTDOWN
    let mut u2 = updater();
    let refused = RegisterNodeManagerResponseProto {
        node_action: Some(2),
        diagnostics_message: Some("too small".into()),
        ..Default::default()
    };
    assert_eq!(
        u2.on_register_response(&refused.encode_to_vec(), &mut t, 0)
            .unwrap(),
        RegisterOutcome::Shutdown {
            diagnostics: "too small".into()
        }
    );
}

#[test]
fn garbage_responses_are_errors_never_panics() {
    let mut u = updater();
    let mut t = ContainerTable::new(100);
    registered(&mut u, &mut t);
    let h = NodeHealth::default();
    t.launch(cid(1), Resource::default(), 0, 0, true).unwrap();
    let mut good = hb(1);
    good.containers_to_cleanup = vec![wire::container_id_proto(&cid(1))];
    good.applications_to_cleanup = vec![APP.to_proto()];
    good.container_token_master_key = Some(key(3));
    good.diagnostics_message = Some("x".into());
    let good = good.encode_to_vec();
    let mut seed = 0x9e3779b97f4a7c15u64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let (mut ok, mut err) = (0, 0);
    for i in 0..20_000 {
        let mut b = good.clone();
        match i % 3 {
            0 => {
                let at = next() as usize % b.len();
                b[at] ^= 1 << (next() % 8);
            }
            1 => b.truncate(next() as usize % b.len()),
            _ => b = (0..next() % 64).map(|_| next() as u8).collect(),
        }
        u.heartbeat_request(&mut t, &h).unwrap();
        match u.on_heartbeat_response(&b, &mut t, 1) {
            Ok(_) => ok += 1,
            Err(_) => err += 1,
        }
        if !u.is_registered() {
            u = updater();
            registered(&mut u, &mut t);
        }
    }
    assert!(ok > 0 && err > 0, "ok {ok} err {err}");
}

fn launch_running(t: &mut ContainerTable, n: i64) {
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

/// Regression (issue 6: the RM-restart fault test left one container "delivered" and never
/// acknowledged about 1 run in 5). The registration request is built under the table lock,
/// the RPC runs without it, and a container can complete meanwhile: that completion was not
/// in the request, so the NORMAL answer must not mark it delivered. Before the fix
/// `on_register_response` marked every pending completion delivered, so it was never sent
/// to the RM, never logged and never acknowledged.
#[test]
fn a_completion_made_while_the_registration_is_in_flight_goes_in_the_next_heartbeat() {
    let mut u = updater();
    let mut t = ContainerTable::new(100);
    let h = NodeHealth::default();
    for n in 1..=3 {
        launch_running(&mut t, n);
    }
    t.complete(&cid(1), 0, "").unwrap();
    let mut reg = Vec::new();
    u.encode_register(&t, &h, &mut reg).unwrap();
    let req = RegisterNodeManagerRequestProto::decode(&reg[..]).unwrap();
    let mut reported: Vec<_> = req
        .container_statuses
        .iter()
        .map(|s| {
            (
                s.container_id.unwrap().id.unwrap(),
                s.container_state.unwrap(),
            )
        })
        .collect();
    reported.sort();
    assert_eq!(reported, vec![(1, 3), (2, 2), (3, 2)]);
    // the executor reports container 2 complete while the registration RPC is in flight
    t.complete(&cid(2), 7, "finished mid-registration").unwrap();
    u.on_register_response(&register_ok(), &mut t, 100).unwrap();
    assert_eq!(
        t.get(&cid(1)).unwrap().delivery,
        Delivery::Delivered { at_ms: 100 },
        "reported in the registration"
    );
    assert_eq!(
        t.get(&cid(2)).unwrap().delivery,
        Delivery::Pending,
        "not in the registration request: not delivered by its answer"
    );
    assert_eq!(
        t.counts(),
        Counts {
            new: 0,
            running: 1,
            completing: 1,
            delivered: 1
        }
    );
    let next = decode_hb(u.heartbeat_request(&mut t, &h).unwrap());
    assert_eq!(ids_in(&next), vec![(2, 3), (3, 2)]);
    u.on_heartbeat_response(&hb(1).encode_to_vec(), &mut t, 200)
        .unwrap();
    assert_eq!(
        t.get(&cid(2)).unwrap().delivery,
        Delivery::Delivered { at_ms: 200 }
    );

    // A registration that got no answer is built again: what completed meanwhile is in the
    // second request, and its answer delivers it.
    let mut u = updater();
    let mut t = ContainerTable::new(100);
    launch_running(&mut t, 4);
    reg.clear();
    u.encode_register(&t, &h, &mut reg).unwrap();
    t.complete(&cid(4), 0, "").unwrap();
    reg.clear();
    u.encode_register(&t, &h, &mut reg).unwrap();
    u.on_register_response(&register_ok(), &mut t, 300).unwrap();
    assert_eq!(
        t.get(&cid(4)).unwrap().delivery,
        Delivery::Delivered { at_ms: 300 }
    );
}

/// The same interleaving end to end against rm-core's real tracker, shard and completion log
/// (sans-IO, no sockets), around an RM restart as in `agent/tests/demo_faults.rs`: the restarted RM
/// answers RESYNC, the agent re-registers, a container completes while that registration is
/// in flight, and afterwards every completion is in the log exactly once and every one is
/// named in `containers_to_be_removed_from_nm` (the table ends empty).
#[test]
fn rm_restart_completion_during_reregistration_is_logged_once_and_acknowledged() {
    use rm_core::completion_log::read_dir_records;
    use rm_core::hosts::HostLists;
    use rm_core::mailbox::Mailbox;
    use rm_core::master_key::SeededEntropy;
    use rm_core::shard::Shard;
    use rm_core::tracker::{HeartbeatOutcome as RmOutcome, ResourceTracker};
    use std::sync::Arc;
    use std::time::Duration;

    struct Rm {
        tracker: ResourceTracker,
        shard: Shard,
        mailbox: Arc<Mailbox>,
    }
    fn rm_at(dir: &std::path::Path, rm_id: i64, now_ns: u64) -> Rm {
        let cfg = rm_core::RmConfig {
            completion_log_dir: dir.to_path_buf(),
            ..rm_core::RmConfig::default()
        };
        let mailbox = Arc::new(Mailbox::new(usize::MAX));
        let tracker = ResourceTracker::new(
            cfg,
            HostLists::default(),
            vec![mailbox.clone()],
            rm_id,
            Box::new(SeededEntropy(3)),
            now_ns,
        )
        .unwrap();
        let (shard, _) = Shard::open(dir, 0, 1, false).unwrap();
        Rm {
            tracker,
            shard,
            mailbox,
        }
    }
    impl Rm {
        /// The shard's turn: apply the inbox, commit the log, publish the acknowledgements.
        fn drain(&mut self, now_ns: u64) {
            self.shard
                .run_once(&self.mailbox, Duration::ZERO, &move || {
                    (now_ns / 1_000_000, now_ns)
                })
                .unwrap();
        }
    }
    // One heartbeat round trip, the shard running between heartbeats.
    fn beat(u: &mut StatusUpdater, rm: &mut Rm, t: &mut ContainerTable, now_ns: u64) -> RmOutcome {
        let req = u
            .heartbeat_request(t, &NodeHealth::default())
            .unwrap()
            .to_vec();
        let mut resp = Vec::new();
        let o = rm.tracker.node_heartbeat(&req, now_ns, &mut resp).unwrap();
        u.on_heartbeat_response(&resp, t, now_ns / 1_000_000)
            .unwrap();
        rm.drain(now_ns);
        o
    }
    fn register(u: &mut StatusUpdater, rm: &mut Rm, t: &mut ContainerTable, now_ns: u64) {
        let mut req = Vec::new();
        u.encode_register(t, &NodeHealth::default(), &mut req)
            .unwrap();
        let mut resp = Vec::new();
        rm.tracker
            .register_node_manager(&req, now_ns, &mut resp)
            .unwrap();
        u.on_register_response(&resp, t, now_ns / 1_000_000)
            .unwrap();
        rm.drain(now_ns);
    }

    let dir = tempfile::tempdir().unwrap();
    let h = NodeHealth::default();
    let mut now = 1_000_000_000u64;
    let mut u = updater();
    let mut t = ContainerTable::new(100);
    t.enable_journal();
    for n in 1..=4 {
        launch_running(&mut t, n);
    }
    let mut rm = rm_at(dir.path(), 1, now);
    register(&mut u, &mut rm, &mut t, now);
    t.complete(&cid(1), 0, "").unwrap();
    for _ in 0..3 {
        now += 100_000_000;
        assert!(matches!(
            beat(&mut u, &mut rm, &mut t, now),
            RmOutcome::Normal { .. }
        ));
    }
    assert!(t.get(&cid(1)).is_none(), "acknowledged before the restart");

    // The RM restarts on the same log. Container 3 completes while it is down.
    drop(rm);
    t.complete(&cid(3), 0, "").unwrap();
    let mut rm = rm_at(dir.path(), 2, now);
    now += 100_000_000;
    assert_eq!(beat(&mut u, &mut rm, &mut t, now), RmOutcome::ResyncUnknown);
    // Re-registration, with container 2 completing while the registration RPC is in flight.
    let mut req = Vec::new();
    u.encode_register(&t, &h, &mut req).unwrap();
    t.complete(&cid(2), 0, "finished mid-registration").unwrap();
    let mut resp = Vec::new();
    rm.tracker
        .register_node_manager(&req, now, &mut resp)
        .unwrap();
    u.on_register_response(&resp, &mut t, now / 1_000_000)
        .unwrap();
    rm.drain(now);
    t.complete(&cid(4), 0, "").unwrap();
    for _ in 0..4 {
        now += 100_000_000;
        assert!(matches!(
            beat(&mut u, &mut rm, &mut t, now),
            RmOutcome::Normal { .. }
        ));
    }
    assert_eq!(
        t.counts(),
        Counts::default(),
        "every completion named in containers_to_be_removed_from_nm"
    );
    assert_eq!(t.totals().acked, 4);
    let mut logged: Vec<i64> = read_dir_records(dir.path())
        .unwrap()
        .iter()
        .map(|r| r.container.id)
        .collect();
    logged.sort();
    assert_eq!(
        logged,
        vec![1, 2, 3, 4],
        "each completion logged exactly once"
    );
    let mut made: Vec<i64> = t.take_journal().iter().map(|c| c.id).collect();
    made.sort();
    assert_eq!(made, logged);
}

#[test]
fn a_reregistration_carries_each_containers_token_fields() {
    let mut u = updater();
    let mut t = ContainerTable::new(16);
    launch_running(&mut t, 1);
    launch_running(&mut t, 2);
    let fields = TokenFields {
        version: 3,
        execution_type: Some(2),
        allocation_request_id: 7,
        allocation_tags: vec!["spark".into()],
        node_label_expression: "gpu".into(),
    };
    let mut reg = Vec::new();
    u.encode_register_with(
        &t,
        &NodeHealth::default(),
        |id| (*id == cid(1)).then_some(&fields),
        &mut reg,
    )
    .unwrap();
    let req = RegisterNodeManagerRequestProto::decode(&reg[..]).unwrap();
    let by_id = |n: i64| {
        req.container_statuses
            .iter()
            .find(|s| s.container_id.unwrap().id == Some(n))
            .unwrap()
            .clone()
    };
    let s1 = by_id(1);
    assert_eq!(
        (
            s1.version,
            s1.execution_type,
            s1.allocation_request_id,
            s1.allocation_tags.clone(),
            s1.node_label_expression.as_deref()
        ),
        (
            Some(3),
            Some(2),
            Some(7),
            vec!["spark".to_string()],
            Some("gpu")
        )
    );
    // without token fields: the proto defaults (absent)
    let s2 = by_id(2);
    assert_eq!((s2.version, s2.allocation_request_id), (None, None));
}

#[test]
fn signals_and_updates_are_read_counted_and_handed_over_once() {
    use hadoop_wire::pb::hadoop::yarn::{
        ContainerProto, ResourceProto, SignalContainerCommandProto as Cmd,
        SignalContainerRequestProto,
    };
    let mut u = updater();
    let mut t = ContainerTable::new(100);
    registered(&mut u, &mut t);
    let sig = |n: i64, c: Cmd| SignalContainerRequestProto {
        container_id: wire::container_id_proto(&cid(n)),
        command: c as i32,
    };
    // An 3.5.0 ContainerProto: allocation_tags (10) and, by hand, exposed_ports (11).
    let update = ContainerProto {
        id: Some(cid(2).to_proto()),
        resource: Some(ResourceProto {
            memory: Some(512),
            virtual_cores: Some(1),
            resource_value_map: Vec::new(),
        }),
        execution_type: Some(1),
        version: Some(3),
        allocation_tags: vec!["tag".into()],
        ..Default::default()
    };
    let mut update_bytes = update.encode_to_vec();
    update_bytes.extend_from_slice(&[0x5a, 2, b'{', b'}']);
    let mut resp = NodeHeartbeatResponseProto {
        containers_to_signal: vec![
            sig(1, Cmd::OutputThreadDump),
            sig(2, Cmd::GracefulShutdown),
            sig(1, Cmd::ForcefulShutdown),
        ],
        containers_to_decrease: vec![update.clone()],
        ..hb(1)
    }
    .encode_to_vec();
    // field 17, length, the ContainerProto with field 11
    resp.push(0x8a);
    resp.push(0x01);
    resp.push(update_bytes.len() as u8);
    resp.extend_from_slice(&update_bytes);

    u.heartbeat_request(&mut t, &NodeHealth::default()).unwrap();
    u.on_heartbeat_response(&resp, &mut t, 10).unwrap();
    assert_eq!(
        u.rm_orders(),
        RmOrders {
            signals: 3,
            updates: 1,
            decreases: 1
        }
    );
    assert_eq!(u.stats().containers_to_signal, 3);
    assert_eq!(u.stats().containers_to_update, 2);
    let r = wire::HeartbeatResponse::parse(&resp).unwrap();
    let got: Vec<_> = r
        .containers_to_signal()
        .map(|s| s.map(|s| (s.container, s.command)))
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        got,
        vec![
            (cid(1), Cmd::OutputThreadDump as i32),
            (cid(2), Cmd::GracefulShutdown as i32),
            (cid(1), Cmd::ForcefulShutdown as i32)
        ]
    );
    let up: Vec<_> = r.containers_to_update().collect::<Result<_, _>>().unwrap();
    assert_eq!(
        up,
        vec![wire::ContainerUpdate {
            container: cid(2),
            resource: Some(Resource {
                memory_mb: 512,
                vcores: 1
            }),
            execution_type: Some(1),
            version: Some(3),
        }]
    );
    assert_eq!(r.containers_to_decrease().count(), 1);

    // The next ordinary response hands over nothing.
    u.heartbeat_request(&mut t, &NodeHealth::default()).unwrap();
    u.on_heartbeat_response(&hb(2).encode_to_vec(), &mut t, 20)
        .unwrap();
    assert_eq!(u.rm_orders(), RmOrders::default());
    assert!(!u.rm_orders().any());
    assert_eq!(u.stats().containers_to_signal, 3);

    // A malformed signal (no command; a container id that is not a message) is an error and
    // leaves the heartbeat outstanding, like the other lists.
    u.heartbeat_request(&mut t, &NodeHealth::default()).unwrap();
    let mut bad = hb(3).encode_to_vec();
    bad.extend_from_slice(&[0x6a, 0]); // field 13, empty: no container id, no command
    assert!(u.on_heartbeat_response(&bad, &mut t, 30).is_err());
    let mut bad = hb(3).encode_to_vec();
    bad.extend_from_slice(&[0x68, 1]); // field 13 as a varint
    assert!(u.on_heartbeat_response(&bad, &mut t, 30).is_err());
    assert!(u.heartbeat_outstanding());
    u.on_heartbeat_response(&hb(3).encode_to_vec(), &mut t, 30)
        .unwrap();
    assert_eq!(u.rm_orders(), RmOrders::default());
}
