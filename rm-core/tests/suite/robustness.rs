//! Bad input never panics: random and mutated heartbeat, registration and unregistration
//! bytes through the tracker, mutated status bytes through the shard, random bytes through the
//! completion log scanner. Every failure is a typed error (or a counted, skipped status).

use std::sync::Arc;
use std::time::Duration;

use hadoop_wire::pb::hadoop::yarn::{ContainerStateProto, ExecutionTypeProto};
use proptest::prelude::*;
use rm_core::completion_log::scan;
use rm_core::hosts::HostLists;
use rm_core::ids::NodeKey;
use rm_core::mailbox::Mailbox;
use rm_core::master_key::SeededEntropy;
use rm_core::shard::Shard;
use rm_core::tracker::ResourceTracker;
use rm_core::RmConfig;
use testkit::heartbeat::{
    container_status, containers, heartbeat_request, node_status, register_request,
};

fn valid_heartbeat() -> Vec<u8> {
    let n = NodeKey::new("127.0.0.1", 45454);
    let mut st: Vec<_> = containers(1, 6)
        .into_iter()
        .map(|k| {
            container_status(
                k,
                ContainerStateProto::CRunning,
                -1000,
                ExecutionTypeProto::Guaranteed,
            )
        })
        .collect();
    st.push(container_status(
        containers(1, 7)[6],
        ContainerStateProto::CComplete,
        0,
        ExecutionTypeProto::Guaranteed,
    ));
    heartbeat_request(&node_status(&n, st, true), 0, Some((1, 2))).0
}

struct Rig {
    tracker: ResourceTracker,
    shard: Shard,
    mailbox: Arc<Mailbox>,
    _dir: tempfile::TempDir,
}

fn rig() -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let cfg = RmConfig {
        completion_log_dir: dir.path().to_path_buf(),
        ..RmConfig::default()
    };
    let mailbox = Arc::new(Mailbox::new(usize::MAX));
    let mut tracker = ResourceTracker::new(
        cfg,
        HostLists::default(),
        vec![mailbox.clone()],
        1,
        Box::new(SeededEntropy(9)),
        0,
    )
    .unwrap();
    let mut out = Vec::new();
    tracker
        .register_node_manager(
            &register_request(&NodeKey::new("127.0.0.1", 45454), 8192, 8, "3.4.1"),
            0,
            &mut out,
        )
        .unwrap();
    let (shard, _) = Shard::open(dir.path(), 0, 1, true).unwrap();
    Rig {
        tracker,
        shard,
        mailbox,
        _dir: dir,
    }
}

fn mutate(mut b: Vec<u8>, edits: &[(usize, u8)], cut: Option<usize>) -> Vec<u8> {
    for &(i, v) in edits {
        if !b.is_empty() {
            let n = b.len();
            b[i % n] = v;
        }
    }
    if let Some(c) = cut {
        let n = b.len();
        b.truncate(c % (n + 1));
    }
    b
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn mutated_heartbeats_never_panic(
        edits in prop::collection::vec((any::<usize>(), any::<u8>()), 0..6),
        cut in prop::option::of(any::<usize>()),
    ) {
        let mut r = rig();
        let req = mutate(valid_heartbeat(), &edits, cut);
        let mut out = Vec::new();
        let _ = r.tracker.node_heartbeat(&req, 1, &mut out);
        let now = || (1u64, 1u64);
        r.shard.run_once(&r.mailbox, Duration::ZERO, &now).unwrap();
        // The status bytes straight into the shard too, bypassing the tracker's checks.
        let mut scratch = Vec::new();
        let status = match hadoop_wire::view::yarn::NodeHeartbeatRequestView::new(&req).node_status() {
            Ok(Some(s)) => s.as_bytes().to_vec(),
            _ => req.clone(),
        };
        r.mailbox.push_status(0, &status, 2, &mut scratch);
        r.mailbox.push_status(0, &mutate(req.clone(), &edits, None), 3, &mut scratch);
        r.shard.run_once(&r.mailbox, Duration::ZERO, &now).unwrap();
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let mut r = rig();
        let mut out = Vec::new();
        let _ = r.tracker.node_heartbeat(&bytes, 1, &mut out);
        let _ = r.tracker.register_node_manager(&bytes, 1, &mut out);
        let _ = r.tracker.unregister_node_manager(&bytes, 1, &mut out);
        let mut scratch = Vec::new();
        r.mailbox.push_status(0, &bytes, 2, &mut scratch);
        let now = || (1u64, 1u64);
        r.shard.run_once(&r.mailbox, Duration::ZERO, &now).unwrap();
        let mut file = rm_core::completion_log::MAGIC.to_vec();
        file.extend_from_slice(&bytes);
        let s = scan(&file);
        prop_assert!(s.valid_len as usize <= file.len());
        let _ = scan(&bytes);
    }
}
