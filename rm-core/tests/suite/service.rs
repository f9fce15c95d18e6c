//! The service over real TCP on 127.0.0.1: an IPC client speaks ResourceTrackerPB and the
//! admin protocol to `RmService`.

use std::time::{Duration, Instant};

use hadoop_wire::pb::hadoop::yarn::{
    ContainerStateProto, ExecutionTypeProto, NodeActionProto, NodeHeartbeatResponseProto,
    RegisterNodeManagerResponseProto, UnRegisterNodeManagerRequestProto,
};
use ipc::client::{Client, ClientConfig};
use ipc::server::ServerConfig;
use prost::Message;
use rm_core::completion_log::read_dir_records;
use rm_core::dispatcher::Placement;
use rm_core::ids::{AppKey, NodeKey};
use rm_core::service::{admin, RmService, ADMIN_PROTOCOL, RESOURCE_TRACKER_PROTOCOL};
use rm_core::RmConfig;
use testkit::heartbeat::{
    container_status, containers, heartbeat_request, node_status, register_request, CLUSTER_TS,
};

fn client(addr: std::net::SocketAddr, protocol: &str) -> Client {
    Client::new(
        addr,
        ClientConfig {
            protocol: protocol.into(),
            call_timeout: Duration::from_secs(10),
            ..ClientConfig::default()
        },
    )
}

#[test]
fn nodemanager_and_admin_over_tcp() {
    let dir = tempfile::tempdir().unwrap();
    let exclude = dir.path().join("exclude");
    std::fs::write(&exclude, "").unwrap();
    let cfg = RmConfig {
        completion_log_dir: dir.path().join("log"),
        exclude_path: Some(exclude.clone()),
        ..RmConfig::default()
    };
    let rm = RmService::start(
        cfg,
        "127.0.0.1:0".parse().unwrap(),
        &Placement::Unpinned(2),
        ServerConfig::default(),
    )
    .unwrap();
    let nm = client(rm.local_addr(), RESOURCE_TRACKER_PROTOCOL);
    let n = NodeKey::new("127.0.0.1", 45454);
    let r = nm
        .call(
            "registerNodeManager",
            &register_request(&n, 8192, 8, "3.4.1"),
        )
        .unwrap();
    let r: RegisterNodeManagerResponseProto = r.decode().unwrap();
    assert_eq!(r.node_action(), NodeActionProto::Normal);
    assert!(r.rm_identifier.unwrap() > CLUSTER_TS);

    let ids = containers(1, 3);
    let running = |ids: &[rm_core::ids::ContainerKey]| {
        ids.iter()
            .map(|k| {
                container_status(
                    *k,
                    ContainerStateProto::CRunning,
                    -1000,
                    ExecutionTypeProto::Guaranteed,
                )
            })
            .collect::<Vec<_>>()
    };
    let mut rid = 0;
    let mut beat = |st| {
        let (req, _) = heartbeat_request(&node_status(&n, st, true), rid, None);
        let r: NodeHeartbeatResponseProto =
            nm.call("nodeHeartbeat", &req).unwrap().decode().unwrap();
        if let Some(id) = r.response_id {
            rid = id;
        }
        r
    };
    let r = beat(running(&ids));
    assert_eq!(r.response_id, Some(1));
    assert_eq!(r.next_heart_beat_interval, Some(1000));
    let mut st = running(&ids[1..]);
    st.push(container_status(
        ids[0],
        ContainerStateProto::CComplete,
        0,
        ExecutionTypeProto::Guaranteed,
    ));
    beat(st);
    // The ack arrives once the shard has committed the completion.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut acked = false;
    while !acked && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        acked =
            beat(running(&ids[1..])).containers_to_be_removed_from_nm == vec![ids[0].to_proto()];
    }
    assert!(acked);
    assert_eq!(read_dir_records(&dir.path().join("log")).unwrap().len(), 1);

    // Admin: finish the application; the node is told to clean it up.
    let adm = client(rm.local_addr(), ADMIN_PROTOCOL);
    let app = AppKey {
        cluster_timestamp: CLUSTER_TS,
        id: 1,
    };
    let req = admin::AdminRequestProto {
        id: Some(app.to_string()),
    }
    .encode_to_vec();
    let r: admin::AdminResponseProto = adm
        .call(admin::FINISH_APPLICATION, &req)
        .unwrap()
        .decode()
        .unwrap();
    assert!(r.message.unwrap().contains("finished"));
    let bad = admin::AdminRequestProto {
        id: Some("nonsense".into()),
    }
    .encode_to_vec();
    assert!(adm.call(admin::FINISH_APPLICATION, &bad).is_err());
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut cleaned = false;
    while !cleaned && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        cleaned = beat(running(&ids[1..])).applications_to_cleanup == vec![app.to_proto()];
    }
    assert!(cleaned);

    let text = rm.metrics_text();
    assert!(text.contains("hotpath_rm_nodes_active 1"), "{text}");
    // the IPC server's counters: SIMPLE clients only, so no authentication either way
    assert!(
        text.contains(
            "# TYPE hotpath_rm_ipc_auth_failures_total counter\n\
             hotpath_rm_ipc_auth_failures_total{server=\"resource_tracker\"} 0\n"
        ),
        "{text}"
    );
    assert!(
        !text.contains("hotpath_rm_ipc_calls_total{server=\"resource_tracker\"} 0\n"),
        "{text}"
    );

    // refreshNodes with the node excluded: SHUTDOWN on its next heartbeat.
    std::fs::write(&exclude, "127.0.0.1\n").unwrap();
    let r: admin::AdminResponseProto = adm
        .call(
            admin::REFRESH_NODES,
            &admin::AdminRequestProto::default().encode_to_vec(),
        )
        .unwrap()
        .decode()
        .unwrap();
    assert!(r.message.unwrap().contains("127.0.0.1:45454"));
    assert_eq!(
        beat(running(&ids[1..])).node_action(),
        NodeActionProto::Shutdown
    );

    // Unregister (graceful stop) is answered with an empty message.
    let req = UnRegisterNodeManagerRequestProto {
        node_id: Some(n.to_proto()),
    }
    .encode_to_vec();
    assert!(nm
        .call("unRegisterNodeManager", &req)
        .unwrap()
        .payload()
        .is_empty());
    // Garbage is an ERROR response, and the connection keeps working.
    assert!(nm.call("nodeHeartbeat", &[0x0a, 0x7f]).is_err());
    assert!(nm
        .call(
            "registerNodeManager",
            &register_request(&NodeKey::new("127.0.0.2", 1), 8192, 8, "3.4.1")
        )
        .is_ok());
    rm.shutdown();
}
