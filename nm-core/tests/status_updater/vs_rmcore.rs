//! Both sides sans-IO, against each other: our status updater and rm-core's ResourceTracker,
//! bytes handed across by hand (no sockets). Registration, responseId progression, a lost
//! response answered from the RM's cache on the resend (B.7 duplicate rule), master keys
//! echoed across a roll (trap 3), and RESYNC from a restarted RM followed by re-registration
//! reporting every container.

use std::sync::Arc;

use nm_core::ids::{AppId, ContainerId};
use nm_core::status_updater::*;
use nm_core::table::*;
use nm_core::wire::NodeHealth;
use rm_core::hosts::HostLists;
use rm_core::mailbox::Mailbox;
use rm_core::master_key::SeededEntropy;
use rm_core::tracker::{
    HeartbeatOutcome as RmOutcome, RegisterOutcome as RmRegister, ResourceTracker,
};
use rm_core::RmConfig;

const SEC: u64 = 1_000_000_000;

fn tracker(now_ns: u64, expiry_ms: u64) -> ResourceTracker {
    let cfg = RmConfig {
        nm_expiry_ms: expiry_ms,
        container_key_roll_ms: 4 * expiry_ms,
        nm_key_roll_ms: 4 * expiry_ms,
        completion_log_dir: std::env::temp_dir().join("unused-by-the-tracker"),
        ..RmConfig::default()
    };
    ResourceTracker::new(
        cfg,
        HostLists::default(),
        vec![Arc::new(Mailbox::new(256))],
        1_700_000_000_000,
        Box::new(SeededEntropy(7)),
        now_ns,
    )
    .unwrap()
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

fn register(u: &mut StatusUpdater, rm: &mut ResourceTracker, t: &mut ContainerTable, now: u64) {
    let mut req = Vec::new();
    u.encode_register(t, &NodeHealth::default(), &mut req)
        .unwrap();
    let mut resp = Vec::new();
    let o = rm.register_node_manager(&req, now, &mut resp).unwrap();
    assert!(matches!(o, RmRegister::Accepted { .. }), "{o:?}");
    assert!(matches!(
        u.on_register_response(&resp, t, now / 1_000_000).unwrap(),
        RegisterOutcome::Registered { .. }
    ));
}

#[test]
fn updater_and_rm_core_tracker_agree() {
    let h = NodeHealth::default();
    let expiry_ms = 3000;
    let mut now = SEC;
    let mut rm = tracker(now, expiry_ms);
    let mut u = updater();
    let mut t = ContainerTable::new(100);
    let app = AppId::new(1_700_000_000_000, 1);
    t.launch(
        ContainerId::new(app, 1, 1),
        Resource {
            memory_mb: 1024,
            vcores: 1,
        },
        0,
        0,
        true,
    )
    .unwrap();
    register(&mut u, &mut rm, &mut t, now);
    let mut resp = Vec::new();
    let mut keys = std::collections::BTreeSet::new();
    for i in 1..=40 {
        now += SEC / 2;
        rm.tick(now).unwrap();
        let req = u.heartbeat_request(&mut t, &h).unwrap().to_vec();
        resp.clear();
        let o = rm.node_heartbeat(&req, now, &mut resp).unwrap();
        assert!(
            matches!(o, RmOutcome::Normal { .. }),
            "heartbeat {i}: {o:?}"
        );
        if i % 10 == 0 {
            // the response is lost: the resend carries the same bytes and the RM answers from
            // its cache, byte for byte
            u.on_heartbeat_failed();
            let again = u.heartbeat_request(&mut t, &h).unwrap().to_vec();
            assert_eq!(again, req);
            let mut cached = Vec::new();
            assert_eq!(
                rm.node_heartbeat(&again, now, &mut cached).unwrap(),
                RmOutcome::Duplicate
            );
            assert_eq!(cached, resp);
        }
        let o = u
            .on_heartbeat_response(&resp, &mut t, now / 1_000_000)
            .unwrap();
        assert!(matches!(o, HeartbeatOutcome::Normal { .. }));
        assert_eq!(
            u.response_id(),
            rm.node("127.0.0.2", 45454).unwrap().last_response_id()
        );
        keys.insert((
            u.container_key().unwrap().key_id,
            u.nm_key().unwrap().key_id,
        ));
    }
    // 20 s with a 12 s roll: the keys rolled and the RM never lacked our echo
    assert!(keys.len() >= 2, "{keys:?}");
    assert_eq!(
        rm.metrics()
            .bad_requests
            .load(std::sync::atomic::Ordering::Relaxed),
        0
    );

    // a restarted RM does not know the node: RESYNC, then a registration with every container
    t.complete(&ContainerId::new(app, 1, 1), 0, "").unwrap();
    t.launch(
        ContainerId::new(app, 1, 2),
        Resource {
            memory_mb: 1024,
            vcores: 1,
        },
        0,
        0,
        true,
    )
    .unwrap();
    let mut rm2 = tracker(now, expiry_ms);
    let req = u.heartbeat_request(&mut t, &h).unwrap().to_vec();
    resp.clear();
    assert_eq!(
        rm2.node_heartbeat(&req, now, &mut resp).unwrap(),
        RmOutcome::ResyncUnknown
    );
    assert_eq!(
        u.on_heartbeat_response(&resp, &mut t, 0).unwrap(),
        HeartbeatOutcome::Resync
    );
    let mut reg = Vec::new();
    u.encode_register(&t, &h, &mut reg).unwrap();
    let parsed =
        <hadoop_wire::pb::hadoop::yarn::RegisterNodeManagerRequestProto as prost::Message>::decode(
            &reg[..],
        )
        .unwrap();
    assert_eq!(parsed.container_statuses.len(), 2);
    register(&mut u, &mut rm2, &mut t, now);
    assert_eq!(u.response_id(), 0);
    let req = u.heartbeat_request(&mut t, &h).unwrap().to_vec();
    resp.clear();
    assert!(matches!(
        rm2.node_heartbeat(&req, now + SEC, &mut resp).unwrap(),
        RmOutcome::Normal { .. }
    ));
}
