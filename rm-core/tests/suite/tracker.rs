//! The ResourceTracker protocol end to end, sans-IO: request bytes in, response bytes out,
//! with a real shard and a real completion log in a temporary directory.

use std::sync::Arc;
use std::time::Duration;

use hadoop_wire::pb::hadoop::yarn::{
    ContainerStateProto, ExecutionTypeProto, NmContainerStatusProto, NodeActionProto,
    NodeHeartbeatResponseProto, RegisterNodeManagerRequestProto, RegisterNodeManagerResponseProto,
    UnRegisterNodeManagerRequestProto,
};
use prost::Message;
use rm_core::completion_log::read_dir_records;
use rm_core::hosts::HostLists;
use rm_core::ids::{AppKey, ContainerKey, NodeKey};
use rm_core::mailbox::Mailbox;
use rm_core::master_key::SeededEntropy;
use rm_core::node::Lifecycle;
use rm_core::shard::Shard;
use rm_core::tracker::{HeartbeatOutcome, Membership, RegisterOutcome, ResourceTracker};
use rm_core::{Error, RmConfig};
use testkit::heartbeat::{
    container_status, containers, heartbeat_request, node_status, register_request, CLUSTER_TS,
};

const MS: u64 = 1_000_000;

struct Rm {
    tracker: ResourceTracker,
    shard: Shard,
    mailbox: Arc<Mailbox>,
    dir: std::path::PathBuf,
    _keep: Option<tempfile::TempDir>,
    now_ns: u64,
}

impl Rm {
    fn new(cfg: RmConfig, hosts: HostLists) -> Rm {
        let dir = tempfile::tempdir().unwrap();
        let mut rm = Rm::at(cfg, hosts, dir.path(), 1234);
        rm._keep = Some(dir);
        rm
    }

    /// An RM on `dir` (an existing completion log is reloaded).
    fn at(mut cfg: RmConfig, hosts: HostLists, dir: &std::path::Path, rm_id: i64) -> Rm {
        cfg.completion_log_dir = dir.to_path_buf();
        let mailbox = Arc::new(Mailbox::new(usize::MAX));
        let now_ns = 10_000 * MS;
        let tracker = ResourceTracker::new(
            cfg.clone(),
            hosts,
            vec![mailbox.clone()],
            rm_id,
            Box::new(SeededEntropy(1)),
            now_ns,
        )
        .unwrap();
        let (shard, _) = Shard::open(dir, 0, 1, cfg.opportunistic).unwrap();
        Rm {
            tracker,
            shard,
            mailbox,
            dir: dir.to_path_buf(),
            _keep: None,
            now_ns,
        }
    }

    fn drain(&mut self) {
        let now = self.now_ns;
        self.shard
            .run_once(&self.mailbox, Duration::ZERO, &move || (now / MS, now))
            .unwrap();
    }

    fn register(&mut self, node: &NodeKey) -> (RegisterOutcome, RegisterNodeManagerResponseProto) {
        self.register_raw(&register_request(node, 8192, 8, "3.4.1"))
    }

    fn register_raw(&mut self, req: &[u8]) -> (RegisterOutcome, RegisterNodeManagerResponseProto) {
        let mut out = Vec::new();
        let o = self
            .tracker
            .register_node_manager(req, self.now_ns, &mut out)
            .unwrap();
        self.drain();
        (
            o,
            RegisterNodeManagerResponseProto::decode(&out[..]).unwrap(),
        )
    }

    fn heartbeat(
        &mut self,
        node: &NodeKey,
        rid: i32,
        statuses: Vec<hadoop_wire::pb::hadoop::yarn::ContainerStatusProto>,
        healthy: bool,
    ) -> (HeartbeatOutcome, NodeHeartbeatResponseProto, Vec<u8>) {
        let ck = self.tracker.container_keys().current().key_id;
        let nk = self.tracker.nm_keys().current().key_id;
        let (req, _) =
            heartbeat_request(&node_status(node, statuses, healthy), rid, Some((ck, nk)));
        self.heartbeat_raw(&req)
    }

    fn heartbeat_raw(
        &mut self,
        req: &[u8],
    ) -> (HeartbeatOutcome, NodeHeartbeatResponseProto, Vec<u8>) {
        let mut out = Vec::new();
        let o = self
            .tracker
            .node_heartbeat(req, self.now_ns, &mut out)
            .unwrap();
        (
            o,
            NodeHeartbeatResponseProto::decode(&out[..]).unwrap(),
            out,
        )
    }

    fn lifecycle(&self, node: &NodeKey) -> Lifecycle {
        let local = self.tracker.node(&node.host, node.port).unwrap().local;
        self.shard.node(local).unwrap().lifecycle()
    }

    fn launched(&self, node: &NodeKey) -> usize {
        let local = self.tracker.node(&node.host, node.port).unwrap().local;
        self.shard.node(local).unwrap().launched_len()
    }
}

fn running(ids: &[ContainerKey]) -> Vec<hadoop_wire::pb::hadoop::yarn::ContainerStatusProto> {
    ids.iter()
        .map(|k| {
            container_status(
                *k,
                ContainerStateProto::CRunning,
                -1000,
                ExecutionTypeProto::Guaranteed,
            )
        })
        .collect()
}

fn complete(k: ContainerKey, exit: i32) -> hadoop_wire::pb::hadoop::yarn::ContainerStatusProto {
    container_status(
        k,
        ContainerStateProto::CComplete,
        exit,
        ExecutionTypeProto::Guaranteed,
    )
}

fn node() -> NodeKey {
    NodeKey::new("127.0.0.1", 45454)
}

#[test]
fn register_then_heartbeats_advance_and_duplicates_are_cached() {
    let mut rm = Rm::new(RmConfig::default(), HostLists::default());
    let n = node();
    let (o, r) = rm.register(&n);
    assert_eq!(
        o,
        RegisterOutcome::Accepted {
            node: n.clone(),
            reconnected: false
        }
    );
    assert_eq!(r.node_action(), NodeActionProto::Normal);
    assert_eq!(r.rm_identifier, Some(1234));
    assert_eq!(r.rm_version.as_deref(), Some("3.5.0"));
    assert_eq!(
        r.container_token_master_key.unwrap().key_id,
        Some(rm.tracker.container_keys().current().key_id)
    );
    assert!(r.nm_token_master_key.is_some());
    assert_eq!(rm.lifecycle(&n), Lifecycle::Running);

    let ids = containers(1, 5);
    let (o, r1, bytes1) = rm.heartbeat(&n, 0, running(&ids), true);
    assert!(matches!(o, HeartbeatOutcome::Normal { .. }));
    assert_eq!(r1.response_id, Some(1));
    assert_eq!(r1.node_action(), NodeActionProto::Normal);
    assert_eq!(r1.next_heart_beat_interval, Some(1000));
    assert_eq!(r1.container_token_master_key, None, "no key pending");
    rm.drain();
    assert_eq!(rm.launched(&n), 5);

    // The NodeManager did not get the answer and sends the same request again.
    let (o, _, again) = rm.heartbeat(&n, 0, running(&ids), true);
    assert_eq!(o, HeartbeatOutcome::Duplicate);
    assert_eq!(again, bytes1, "the cached response, byte for byte");

    let (_, r2, _) = rm.heartbeat(&n, 1, running(&ids), true);
    assert_eq!(r2.response_id, Some(2));
    // Wrap-around: (0x7FFFFFFF + 1) & 0x7FFFFFFF == 0.
    assert_eq!(rm_core::tracker::next_response_id(i32::MAX), 0);
}

#[test]
fn resync_cases_and_shutdown() {
    let mut rm = Rm::new(
        RmConfig::default(),
        HostLists::new(Vec::<String>::new(), ["10.9.9.9"]),
    );
    let n = node();
    // Unknown node.
    let (o, r, _) = rm.heartbeat(&n, 0, vec![], true);
    assert_eq!(o, HeartbeatOutcome::ResyncUnknown);
    assert_eq!(r.node_action(), NodeActionProto::Resync);
    assert_eq!(
        r.diagnostics_message.as_deref(),
        Some("Node not found resyncing 127.0.0.1:45454")
    );
    assert_eq!(r.response_id, None);

    rm.register(&n);
    let ids = containers(1, 3);
    rm.heartbeat(&n, 0, running(&ids), true);
    rm.drain();
    assert_eq!(rm.launched(&n), 3);
    // Too far behind: RESYNC, node reset (REBOOTED), containers released.
    let (o, r, _) = rm.heartbeat(&n, 7, running(&ids), true);
    assert_eq!(o, HeartbeatOutcome::ResyncBehind { last: 1, got: 7 });
    assert_eq!(
        r.diagnostics_message.as_deref(),
        Some("Too far behind rm response id:1 nm response id:7")
    );
    rm.drain();
    assert_eq!(rm.lifecycle(&n), Lifecycle::Rebooted);
    assert_eq!(rm.launched(&n), 0);
    // Now unknown until it registers again.
    let (o, _, _) = rm.heartbeat(&n, 1, running(&ids), true);
    assert_eq!(o, HeartbeatOutcome::ResyncUnknown);
    let (o, _) = rm.register(&n);
    assert_eq!(
        o,
        RegisterOutcome::Accepted {
            node: n.clone(),
            reconnected: true
        }
    );
    let (_, r, _) = rm.heartbeat(&n, 0, running(&ids), true);
    assert_eq!(r.response_id, Some(1));

    // Excluded host: registration and heartbeats get SHUTDOWN.
    let bad = NodeKey::new("10.9.9.9", 1);
    let (o, r) = rm.register(&bad);
    assert!(matches!(o, RegisterOutcome::Refused { .. }));
    assert_eq!(r.node_action(), NodeActionProto::Shutdown);
    assert!(r
        .diagnostics_message
        .unwrap()
        .starts_with("Disallowed NodeManager from  10.9.9.9"));
    let (o, r, _) = rm.heartbeat(&bad, 0, vec![], true);
    assert_eq!(o, HeartbeatOutcome::Shutdown);
    assert_eq!(r.node_action(), NodeActionProto::Shutdown);

    // A refresh that excludes a registered node: decommissioned now, SHUTDOWN next time.
    let gone = rm.tracker.refresh_hosts(
        HostLists::new(Vec::<String>::new(), ["127.0.0.1"]),
        rm.now_ns,
    );
    assert_eq!(gone, vec![n.clone()]);
    rm.drain();
    assert_eq!(rm.lifecycle(&n), Lifecycle::Decommissioned);
    assert_eq!(rm.launched(&n), 0);
    let (o, _, _) = rm.heartbeat(&n, 1, running(&ids), true);
    assert_eq!(o, HeartbeatOutcome::Shutdown);
}

#[test]
fn registration_checks() {
    let cfg = RmConfig {
        nm_min_version: "3.3.0".into(),
        ..RmConfig::default()
    };
    let mut rm = Rm::new(cfg, HostLists::new(["127.0.0.1"], Vec::<String>::new()));
    let n = node();
    let (o, r) = rm.register_raw(&register_request(&n, 8192, 8, "3.2.4"));
    assert!(matches!(o, RegisterOutcome::Refused { .. }));
    assert_eq!(
        r.diagnostics_message.as_deref(),
        Some("Disallowed NodeManager Version 3.2.4, is less than the minimum version 3.3.0")
    );
    let (o, r) = rm.register_raw(&register_request(&n, 512, 8, "3.4.1"));
    assert!(matches!(o, RegisterOutcome::Refused { .. }));
    assert!(r
        .diagnostics_message
        .unwrap()
        .contains("doesn't satisfy minimum allocations"));
    let (o, _) = rm.register_raw(&register_request(
        &NodeKey::new("127.0.0.2", 1),
        8192,
        8,
        "3.4.1",
    ));
    assert!(
        matches!(o, RegisterOutcome::Refused { .. }),
        "not in the include list"
    );
    let (o, _) = rm.register_raw(&register_request(&n, 8192, 8, "3.4.1"));
    assert!(matches!(o, RegisterOutcome::Accepted { .. }));
    // Bad bytes are a typed error, not a panic.
    let mut out = Vec::new();
    assert!(matches!(
        rm.tracker.register_node_manager(&[0x0a, 0xff], 0, &mut out),
        Err(Error::Prost { .. })
    ));
    assert!(rm
        .tracker
        .node_heartbeat(&[0x0a, 0x05, 0x01], 0, &mut out)
        .is_err());
    assert!(matches!(
        rm.tracker.node_heartbeat(&[], 0, &mut out),
        Err(Error::Missing { .. })
    ));
    // A register without node id.
    let empty = RegisterNodeManagerRequestProto::default().encode_to_vec();
    assert!(matches!(
        rm.tracker.register_node_manager(&empty, 0, &mut out),
        Err(Error::Missing { .. })
    ));
}

#[test]
fn completions_are_acknowledged_only_after_the_log_commit() {
    let mut rm = Rm::new(RmConfig::default(), HostLists::default());
    let n = node();
    rm.register(&n);
    let ids = containers(1, 3);
    rm.heartbeat(&n, 0, running(&ids), true);
    rm.drain();
    // Container 2 finishes.
    let (_, r, _) = rm.heartbeat(
        &n,
        1,
        vec![
            complete(ids[1], 0),
            running(&[ids[0], ids[2]]).remove(0),
            running(&[ids[2]]).remove(0),
        ],
        true,
    );
    assert!(
        r.containers_to_be_removed_from_nm.is_empty(),
        "not durable yet: no ack"
    );
    assert!(read_dir_records(&rm.dir).unwrap().is_empty());
    rm.drain();
    let log = read_dir_records(&rm.dir).unwrap();
    assert_eq!(log.len(), 1);
    assert_eq!(log[0].container, ids[1]);
    assert_eq!(log[0].exit_status, 0);
    assert_eq!(log[0].node, n);
    assert_eq!(rm.launched(&n), 2);
    // The next response carries the ack, once.
    let (_, r, _) = rm.heartbeat(&n, 2, running(&[ids[0], ids[2]]), true);
    assert_eq!(r.containers_to_be_removed_from_nm, vec![ids[1].to_proto()]);
    rm.drain();
    let (_, r, _) = rm.heartbeat(&n, 3, running(&[ids[0], ids[2]]), true);
    assert!(r.containers_to_be_removed_from_nm.is_empty());
    // Reported again (an NM that missed the ack): acknowledged again, logged once.
    rm.drain();
    rm.heartbeat(&n, 4, vec![complete(ids[1], 0)], true);
    rm.drain();
    let (_, r, _) = rm.heartbeat(&n, 5, vec![], true);
    assert_eq!(r.containers_to_be_removed_from_nm, vec![ids[1].to_proto()]);
    assert_eq!(read_dir_records(&rm.dir).unwrap().len(), 1);
}

#[test]
fn restart_reloads_the_log_and_registration_statuses_are_recorded() {
    let n = node();
    let ids = containers(1, 4);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    {
        let mut rm = Rm::at(RmConfig::default(), HostLists::default(), &path, 1234);
        rm.register(&n);
        rm.heartbeat(&n, 0, vec![complete(ids[0], 1)], true);
        rm.drain();
    }
    // Restart on the same directory: a new RM with the old log.
    let mut rm = Rm::at(RmConfig::default(), HostLists::default(), &path, 99);
    assert!(rm.shard.log().is_completed(&ids[0]));
    // The NodeManager re-registers with what it still holds (trap 1): the old completion
    // (already durable) and a new one, plus a running container.
    let req = RegisterNodeManagerRequestProto {
        node_id: Some(n.to_proto()),
        http_port: Some(8042),
        resource: Some(testkit::heartbeat::capability(8192, 8)),
        nm_version: Some("3.4.1".into()),
        container_statuses: vec![
            NmContainerStatusProto {
                container_id: Some(ids[0].to_proto()),
                container_state: Some(ContainerStateProto::CComplete as i32),
                container_exit_status: Some(1),
                ..Default::default()
            },
            NmContainerStatusProto {
                container_id: Some(ids[1].to_proto()),
                container_state: Some(ContainerStateProto::CComplete as i32),
                container_exit_status: Some(0),
                ..Default::default()
            },
            NmContainerStatusProto {
                container_id: Some(ids[2].to_proto()),
                container_state: Some(ContainerStateProto::CRunning as i32),
                ..Default::default()
            },
        ],
        ..Default::default()
    }
    .encode_to_vec();
    let (o, r) = rm.register_raw(&req);
    assert!(matches!(
        o,
        RegisterOutcome::Accepted {
            reconnected: false,
            ..
        }
    ));
    assert_eq!(r.rm_identifier, Some(99));
    let log = read_dir_records(&path).unwrap();
    assert_eq!(
        log.iter().map(|r| r.container).collect::<Vec<_>>(),
        vec![ids[0], ids[1]]
    );
    assert_eq!(rm.launched(&n), 1);
    let (_, r, _) = rm.heartbeat(&n, 0, running(&[ids[2]]), true);
    let mut acked = r.containers_to_be_removed_from_nm.clone();
    acked.sort_by_key(|c| c.id);
    assert_eq!(acked, vec![ids[0].to_proto(), ids[1].to_proto()]);
}

#[test]
fn lost_unhealthy_unregister_and_liveness() {
    let cfg = RmConfig {
        nm_expiry_ms: 3000,
        container_key_roll_ms: 10_000,
        nm_key_roll_ms: 10_000,
        ..RmConfig::default()
    };
    let mut rm = Rm::new(cfg, HostLists::default());
    let n = node();
    rm.register(&n);
    let ids = containers(1, 4);
    rm.heartbeat(&n, 0, running(&ids), true);
    rm.drain();
    assert_eq!(rm.launched(&n), 4);
    // Container 4 vanishes from the snapshot: lost (released, not completed).
    rm.heartbeat(&n, 1, running(&ids[..3]), true);
    rm.drain();
    assert_eq!(rm.launched(&n), 3);
    assert_eq!(rm.shard.stats().lost, 1);
    assert!(read_dir_records(&rm.dir).unwrap().is_empty());
    // Unhealthy: the node is taken out, its containers released.
    rm.heartbeat(&n, 2, running(&ids[..3]), false);
    rm.drain();
    assert_eq!(rm.lifecycle(&n), Lifecycle::Unhealthy);
    assert_eq!(rm.launched(&n), 0);
    // Healthy again: tracking resumes from the snapshot.
    rm.heartbeat(&n, 3, running(&ids[..3]), true);
    rm.drain();
    assert_eq!(rm.lifecycle(&n), Lifecycle::Running);
    assert_eq!(rm.launched(&n), 3);
    // Silent past the expiry: LOST, containers released, RESYNC afterwards.
    rm.now_ns += 2000 * MS;
    assert!(rm.tracker.tick(rm.now_ns).unwrap().expired.is_empty());
    rm.now_ns += 1001 * MS;
    let t = rm.tracker.tick(rm.now_ns).unwrap();
    assert_eq!(t.expired, vec![n.clone()]);
    rm.drain();
    assert_eq!(rm.lifecycle(&n), Lifecycle::Lost);
    assert_eq!(rm.launched(&n), 0);
    assert_eq!(
        rm.tracker.node(&n.host, n.port).unwrap().membership,
        Membership::Lost
    );
    let (o, _, _) = rm.heartbeat(&n, 4, running(&ids[..3]), true);
    assert_eq!(o, HeartbeatOutcome::ResyncUnknown);
    // Back, then a graceful stop.
    rm.register(&n);
    rm.heartbeat(&n, 0, running(&ids[..2]), true);
    rm.drain();
    assert_eq!(rm.launched(&n), 2);
    let mut out = Vec::new();
    let req = UnRegisterNodeManagerRequestProto {
        node_id: Some(n.to_proto()),
    }
    .encode_to_vec();
    assert_eq!(
        rm.tracker
            .unregister_node_manager(&req, rm.now_ns, &mut out)
            .unwrap(),
        Some(n.clone())
    );
    rm.drain();
    assert_eq!(rm.lifecycle(&n), Lifecycle::Shutdown);
    assert_eq!(rm.launched(&n), 0);
    assert_eq!(rm.tracker.active_nodes(), 0);
    assert_eq!(
        rm.tracker
            .unregister_node_manager(&req, rm.now_ns, &mut out)
            .unwrap(),
        None
    );
}

#[test]
fn keys_roll_and_are_sent_until_echoed() {
    let cfg = RmConfig {
        nm_expiry_ms: 1000,
        container_key_roll_ms: 5000,
        nm_key_roll_ms: 5000,
        ..RmConfig::default()
    };
    let mut rm = Rm::new(cfg, HostLists::default());
    let n = node();
    rm.register(&n);
    let old = rm.tracker.container_keys().current().key_id;
    rm.now_ns += 5000 * MS;
    rm.heartbeat(&n, 0, vec![], true); // alive (expiry is 1 s)
    assert!(rm.tracker.tick(rm.now_ns).unwrap().keys_changed);
    let next = rm.tracker.container_keys().next().unwrap().key_id;
    assert_ne!(old, next);
    // The node echoes the old key: the response carries the next one.
    let st = node_status(&n, vec![], true);
    let (req, _) = heartbeat_request(&st, 1, Some((old, rm.tracker.nm_keys().current().key_id)));
    let (_, r, _) = rm.heartbeat_raw(&req);
    assert_eq!(r.container_token_master_key.unwrap().key_id, Some(next));
    assert!(r.nm_token_master_key.is_some());
    // Without any key (trap 3): sent too, no error.
    let (req, _) = heartbeat_request(&st, 2, None);
    let (_, r, _) = rm.heartbeat_raw(&req);
    assert_eq!(r.container_token_master_key.unwrap().key_id, Some(next));
    // Echoed: not sent.
    let nk = rm.tracker.nm_keys().next().unwrap().key_id;
    let (req, _) = heartbeat_request(&st, 3, Some((next, nk)));
    let (_, r, _) = rm.heartbeat_raw(&req);
    assert_eq!(r.container_token_master_key, None);
    assert_eq!(r.nm_token_master_key, None);
    // After 1.5 x expiry the next key is current and nothing is pending.
    rm.now_ns += 1500 * MS;
    rm.tracker.tick(rm.now_ns).unwrap();
    assert_eq!(rm.tracker.container_keys().current().key_id, next);
    assert!(rm.tracker.container_keys().next().is_none());
}

/// A NodeManager re-registering (after an RM restart, say) with an application in
/// `runningApplications` that the RM has finished, and no container of it left to report
/// RUNNING (its last one completed): the application is cleaned up there, as Java's
/// `handleRunningAppOnNode` does, and its completion is acknowledged. A live application it
/// names is adopted: its later end reaches the node although no container of it was ever
/// reported there.
#[test]
fn registration_running_applications_finished_ones_are_cleaned_up_live_ones_adopted() {
    let mut rm = Rm::new(RmConfig::default(), HostLists::default());
    let n = node();
    let app = |id| AppKey {
        cluster_timestamp: CLUSTER_TS,
        id,
    };
    rm.tracker.finish_app(app(1));
    rm.drain();
    let done = containers(1, 1)[0];
    let req = RegisterNodeManagerRequestProto {
        node_id: Some(n.to_proto()),
        http_port: Some(8042),
        resource: Some(testkit::heartbeat::capability(8192, 8)),
        nm_version: Some("3.4.1".into()),
        container_statuses: vec![NmContainerStatusProto {
            container_id: Some(done.to_proto()),
            container_state: Some(ContainerStateProto::CComplete as i32),
            container_exit_status: Some(0),
            ..Default::default()
        }],
        running_applications: vec![app(1).to_proto(), app(2).to_proto()],
        ..Default::default()
    }
    .encode_to_vec();
    rm.register_raw(&req);
    let (_, r, _) = rm.heartbeat(&n, 0, vec![], true);
    assert_eq!(r.applications_to_cleanup, vec![app(1).to_proto()]);
    assert_eq!(r.containers_to_be_removed_from_nm, vec![done.to_proto()]);
    rm.drain();
    // Once per registration.
    let (_, r, _) = rm.heartbeat(&n, 1, vec![], true);
    assert!(r.applications_to_cleanup.is_empty());
    rm.drain();
    rm.tracker.finish_app(app(2));
    rm.drain();
    let (_, r, _) = rm.heartbeat(&n, 2, vec![], true);
    assert_eq!(r.applications_to_cleanup, vec![app(2).to_proto()]);
    // Without runningApplications a registration cleans nothing up.
    rm.drain();
    let (_, r) = rm.register(&n);
    assert_eq!(r.node_action, Some(NodeActionProto::Normal as i32));
    let (_, r, _) = rm.heartbeat(&n, 0, vec![], true);
    assert!(r.applications_to_cleanup.is_empty());
}

#[test]
fn finish_app_and_kill_container() {
    let mut rm = Rm::new(RmConfig::default(), HostLists::default());
    let (a, b) = (node(), NodeKey::new("127.0.0.2", 45454));
    rm.register(&a);
    rm.register(&b);
    let app1 = containers(1, 3);
    let app2 = containers(2, 2);
    rm.heartbeat(&a, 0, running(&[app1[0], app1[1], app2[0]]), true);
    rm.heartbeat(&b, 0, running(&[app1[2]]), true);
    rm.drain();
    let app = AppKey {
        cluster_timestamp: CLUSTER_TS,
        id: 1,
    };
    rm.tracker.finish_app(app);
    rm.tracker.kill_container(app2[0]);
    rm.drain();
    let (_, ra, _) = rm.heartbeat(&a, 1, running(&[app1[0], app1[1], app2[0]]), true);
    let (_, rb, _) = rm.heartbeat(&b, 1, running(&[app1[2]]), true);
    assert_eq!(ra.applications_to_cleanup, vec![app.to_proto()]);
    assert_eq!(rb.applications_to_cleanup, vec![app.to_proto()]);
    assert_eq!(ra.containers_to_cleanup, vec![app2[0].to_proto()]);
    assert!(rb.containers_to_cleanup.is_empty());
    rm.drain();
    // Once per node: the next responses do not repeat them, although the NM still reports
    // the containers RUNNING.
    let (_, ra, _) = rm.heartbeat(&a, 2, running(&[app1[0], app1[1], app2[0]]), true);
    assert!(ra.applications_to_cleanup.is_empty() && ra.containers_to_cleanup.is_empty());
    rm.drain();
    // A new container of the finished app is not launched; a new node reporting it gets the
    // cleanup once.
    let c = NodeKey::new("127.0.0.3", 45454);
    rm.register(&c);
    rm.heartbeat(&c, 0, running(&[containers(1, 9)[8]]), true);
    rm.drain();
    assert_eq!(rm.launched(&c), 0);
    let (_, rc, _) = rm.heartbeat(&c, 1, vec![], true);
    assert_eq!(rc.applications_to_cleanup, vec![app.to_proto()]);
    // The killed container completes: recorded and acknowledged like any other.
    rm.heartbeat(&a, 3, vec![complete(app2[0], -105)], true);
    rm.drain();
    let (_, ra, _) = rm.heartbeat(&a, 4, vec![], true);
    assert_eq!(
        ra.containers_to_be_removed_from_nm,
        vec![app2[0].to_proto()]
    );
}

#[test]
fn opportunistic_capability_sum_from_the_view() {
    let cfg = RmConfig {
        opportunistic: true,
        ..RmConfig::default()
    };
    let mut rm = Rm::new(cfg, HostLists::default());
    let n = node();
    rm.register(&n);
    let ids = containers(1, 3);
    let mut st = running(&ids);
    st[2].execution_type = Some(ExecutionTypeProto::Opportunistic as i32);
    st.push(container_status(
        containers(1, 4)[3],
        ContainerStateProto::CNew,
        -1000,
        ExecutionTypeProto::Guaranteed,
    ));
    rm.heartbeat(&n, 0, st, true);
    rm.drain();
    let local = rm.tracker.node(&n.host, n.port).unwrap().local;
    let alloc = rm.shard.node(local).unwrap().allocated();
    assert_eq!(
        alloc.memory_mb,
        4 * 2048,
        "RUNNING and NEW, as Java sums them"
    );
    assert_eq!(alloc.vcores, 4);
    assert_eq!(rm.launched(&n), 3);
    // An OPPORTUNISTIC container that vanishes is dropped but not counted as lost.
    rm.heartbeat(&n, 1, running(&ids[..2]), true);
    rm.drain();
    assert_eq!(rm.launched(&n), 2);
    assert_eq!(rm.shard.stats().lost, 0);
    assert_eq!(rm.shard.stats().released, 1);
}

#[test]
fn acknowledgements_of_held_applications_wait_for_the_application_master() {
    let mut rm = Rm::new(RmConfig::default(), HostLists::default());
    let n = node();
    rm.register(&n);
    let ids = containers(1, 3);
    let app = ids[0].app;
    rm.tracker.hold_acks(app);
    rm.heartbeat(&n, 0, running(&ids), true);
    rm.drain();
    // Two finish; the log commit would acknowledge them, but their AM has not pulled them.
    rm.heartbeat(&n, 1, vec![complete(ids[0], 0), complete(ids[1], 3)], true);
    rm.drain();
    let (_, r, _) = rm.heartbeat(&n, 2, running(&[ids[2]]), true);
    assert!(r.containers_to_be_removed_from_nm.is_empty(), "held");
    assert_eq!(rm.tracker.parked_acks(), 2);
    // The AM pulled the first: it goes out on the next heartbeat, once.
    rm.tracker.release_ack(ids[0]);
    rm.drain();
    let (_, r, _) = rm.heartbeat(&n, 3, running(&[ids[2]]), true);
    assert_eq!(r.containers_to_be_removed_from_nm, vec![ids[0].to_proto()]);
    // Pulled before the shard's acknowledgement arrived: sent as soon as it does.
    rm.tracker.release_ack(ids[2]);
    rm.drain();
    rm.heartbeat(&n, 4, vec![complete(ids[2], 0)], true);
    rm.drain();
    let (_, r, _) = rm.heartbeat(&n, 5, vec![], true);
    assert_eq!(r.containers_to_be_removed_from_nm, vec![ids[2].to_proto()]);
    // The application ends: the rest goes out, and nothing is held any more.
    rm.tracker.release_app_acks(app);
    rm.drain();
    let (_, r, _) = rm.heartbeat(&n, 6, vec![], true);
    assert_eq!(r.containers_to_be_removed_from_nm, vec![ids[1].to_proto()]);
    assert_eq!(rm.tracker.parked_acks(), 0);
}
