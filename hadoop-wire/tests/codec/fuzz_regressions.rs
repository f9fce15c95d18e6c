//! Replays every input under `tests/fuzz-regressions/<target>/` through the same checks the
//! cargo-fuzz targets run (`hadoop-wire-checks`, hadoop-wire/checks), on stable Rust.
//!
//! Each directory holds the crashing inputs found by fuzzing (named `crash-*`, minimised, with
//! the fix in the commit that added them) and a few seed inputs (`seed-*`: valid frames,
//! packets and messages, also used as the fuzzers' starting corpus; they must decode fully), and
//! other hand-made inputs (`input-*`).

use hadoop_wire_checks as checks;

use std::path::Path;

fn replay(target: &str, check: fn(&[u8]) -> bool) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz-regressions")
        .join(target);
    let mut n = 0;
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        let bytes = std::fs::read(&path).unwrap();
        let r = std::panic::catch_unwind(|| check(&bytes));
        let Ok(complete) = r else {
            panic!("{} panicked", path.display());
        };
        let seed = path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("seed-");
        assert!(
            complete || !seed,
            "seed {} did not decode fully",
            path.display()
        );
        n += 1;
    }
    assert!(n > 0, "no inputs in {}", dir.display());
}

#[test]
fn frame_decoder() {
    replay("frame_decoder", checks::frame_decoder);
}

#[test]
fn packet() {
    replay("packet", checks::packet);
}

macro_rules! replay_tests {
    ($($name:ident),* $(,)?) => {$(
        #[test]
        fn $name() {
            replay(stringify!($name), checks::$name);
        }
    )*};
}

replay_tests!(
    view_token,
    view_rpc_request_header,
    view_rpc_response_header,
    view_request_header,
    view_node_heartbeat_request,
    view_node_status,
    view_container_status,
    view_container_id,
    view_application_attempt_id,
    view_application_id,
    view_resource,
    view_resource_information,
    view_string_string_map,
    view_master_key,
    view_node_id,
    view_node_health_status,
    view_located_blocks,
    view_located_block,
    view_extended_block,
    view_datanode_id,
    view_datanode_info,
    view_packet_header,
    view_frames,
    credentials,
    digest_directives,
    sasl_messages,
);

/// Writes the `seed-*` inputs of the view targets (valid messages built with prost).
/// Run after changing the messages: `cargo test -p hadoop-wire --test fuzz_regressions -- --ignored`.
#[test]
#[ignore]
fn write_view_seeds() {
    use hadoop_wire::encode::*;
    use hadoop_wire::pb::hadoop::{common as pc, hdfs as ph, yarn as py};
    use prost::Message;

    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz-regressions");
    let write = |target: &str, name: &str, bytes: &[u8]| {
        let d = dir.join(target);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join(format!("seed-{name}")), bytes).unwrap();
    };

    // Credentials files, both formats (the `credentials` target)
    {
        use hadoop_wire::token::{Credentials, Format, Token};
        let mut c = Credentials::new();
        c.add_token(
            "nm",
            Token::new(vec![1; 12], vec![2; 20], "NMToken", "10.0.0.1:45454"),
        );
        c.add_token("empty", Token::default());
        c.add_secret("key", vec![7; 4]);
        write("credentials", "writable", &c.write(Format::Writable));
        write("credentials", "protobuf", &c.write(Format::Protobuf));
        write(
            "credentials",
            "empty",
            &Credentials::new().write(Format::Writable),
        );
    }

    let cid: Vec<u8> = (0..16).collect();
    let app = py::ApplicationIdProto {
        id: Some(7),
        cluster_timestamp: Some(1_700_000_000_000),
    };
    let attempt = py::ApplicationAttemptIdProto {
        application_id: Some(app),
        attempt_id: Some(1),
    };
    let ssm = py::StringStringMapProto {
        key: Some("k".into()),
        value: Some("v".into()),
    };
    let info = py::ResourceInformationProto {
        key: "yarn.io/gpu".into(),
        value: Some(2),
        units: Some("".into()),
        r#type: Some(0),
        tags: vec!["t".into()],
        attributes: vec![ssm.clone()],
    };
    let resource = py::ResourceProto {
        memory: Some(4096),
        virtual_cores: Some(2),
        resource_value_map: vec![
            info.clone(),
            py::ResourceInformationProto {
                key: "memory-mb".into(),
                value: Some(4096),
                ..Default::default()
            },
        ],
    };
    let cont = |i: i64, state: i32| py::ContainerStatusProto {
        container_id: Some(py::ContainerIdProto {
            app_id: Some(app),
            app_attempt_id: Some(attempt),
            id: Some(i),
        }),
        state: Some(state),
        diagnostics: (state == 3).then(|| "killed".into()),
        exit_status: (state == 3).then_some(143),
        capability: Some(resource.clone()),
        execution_type: Some(1),
        container_attributes: vec![ssm.clone()],
        container_sub_state: Some(2),
    };
    let node_id = py::NodeIdProto {
        host: Some("127.0.0.1".into()),
        port: Some(45454),
    };
    let health = py::NodeHealthStatusProto {
        is_node_healthy: Some(true),
        health_report: Some("".into()),
        last_health_report_time: Some(12345),
    };
    let status = py::NodeStatusProto {
        node_id: Some(node_id.clone()),
        response_id: Some(41),
        containers_statuses: vec![cont(1, 2), cont(2, 3), cont(3, 1)],
        node_health_status: Some(health.clone()),
        keep_alive_applications: vec![app],
        ..Default::default()
    };
    let key = py::MasterKeyProto {
        key_id: Some(9),
        bytes: Some(vec![1, 2, 3]),
    };
    let hb = py::NodeHeartbeatRequestProto {
        node_status: Some(status.clone()),
        last_known_container_token_master_key: Some(key.clone()),
        last_known_nm_token_master_key: Some(key.clone()),
        token_sequence_no: Some(3),
        ..Default::default()
    };
    write(
        "view_node_heartbeat_request",
        "3-containers",
        &hb.encode_to_vec(),
    );
    write("view_node_status", "3-containers", &status.encode_to_vec());
    write(
        "view_container_status",
        "complete",
        &cont(2, 3).encode_to_vec(),
    );
    write(
        "view_container_id",
        "full",
        &cont(1, 2).container_id.unwrap().encode_to_vec(),
    );
    write(
        "view_application_attempt_id",
        "full",
        &attempt.encode_to_vec(),
    );
    write("view_application_id", "full", &app.encode_to_vec());
    write("view_resource", "two-infos", &resource.encode_to_vec());
    write("view_resource_information", "gpu", &info.encode_to_vec());
    write("view_string_string_map", "kv", &ssm.encode_to_vec());
    write("view_master_key", "key", &key.encode_to_vec());
    write("view_node_id", "loopback", &node_id.encode_to_vec());
    write(
        "view_node_health_status",
        "healthy",
        &health.encode_to_vec(),
    );

    let token = pc::TokenProto {
        identifier: vec![1; 8],
        password: vec![2; 8],
        kind: "HDFS_BLOCK_TOKEN".into(),
        service: "".into(),
    };
    write("view_token", "block-token", &token.encode_to_vec());
    let dn_id = ph::DatanodeIdProto {
        ip_addr: "127.0.0.1".into(),
        host_name: "localhost".into(),
        datanode_uuid: "uuid-1".into(),
        xfer_port: 9866,
        info_port: 9864,
        ipc_port: 9867,
        info_secure_port: Some(0),
    };
    let dn = ph::DatanodeInfoProto {
        id: dn_id.clone(),
        capacity: Some(1 << 40),
        dfs_used: Some(1 << 30),
        remaining: Some(1 << 39),
        xceiver_count: Some(3),
        location: Some("/default-rack".into()),
        admin_state: Some(0),
        num_blocks: Some(12),
        ..Default::default()
    };
    let eb = ph::ExtendedBlockProto {
        pool_id: "BP-1-127.0.0.1-1".into(),
        block_id: 1073741825,
        generation_stamp: 1001,
        num_bytes: Some(134217728),
    };
    let lb = ph::LocatedBlockProto {
        b: eb.clone(),
        offset: 0,
        locs: vec![dn.clone(), dn.clone()],
        corrupt: false,
        block_token: token.clone(),
        is_cached: vec![false, false],
        storage_types: vec![1, 2],
        storage_i_ds: vec!["DS-1".into(), "DS-2".into()],
        ..Default::default()
    };
    let lbs = ph::LocatedBlocksProto {
        file_length: 1 << 28,
        blocks: vec![lb.clone(), lb.clone()],
        under_construction: false,
        last_block: Some(lb.clone()),
        is_last_block_complete: true,
        ..Default::default()
    };
    write("view_located_blocks", "two-blocks", &lbs.encode_to_vec());
    write("view_located_block", "two-locs", &lb.encode_to_vec());
    write("view_extended_block", "block", &eb.encode_to_vec());
    write("view_datanode_id", "dn", &dn_id.encode_to_vec());
    write("view_datanode_info", "dn", &dn.encode_to_vec());
    let ph_ = ph::PacketHeaderProto {
        offset_in_block: 65536,
        seqno: 1,
        last_packet_in_block: false,
        data_len: 65536,
        sync_block: Some(true),
    };
    write("view_packet_header", "with-sync", &ph_.encode_to_vec());

    let mut hdr = Vec::new();
    RpcRequestHeader {
        state_id: Some(99),
        ..RpcRequestHeader::call(5, &cid, 0)
    }
    .encode_body(&mut hdr);
    write("view_rpc_request_header", "call-5", &hdr);
    let mut rsp = Vec::new();
    RpcResponseHeader {
        state_id: Some(1234),
        ..RpcResponseHeader::success(0, &cid, 0)
    }
    .encode_body(&mut rsp);
    write("view_rpc_response_header", "a9-success", &rsp);
    let mut rsp_err = Vec::new();
    RpcResponseHeader {
        failure: Some(RpcFailure {
            status: hadoop_wire::pb::hadoop::common::rpc_response_header_proto::RpcStatusProto::Error,
            exception_class_name: "org.apache.hadoop.ipc.StandbyException",
            error_msg: "standby",
            error_detail: hadoop_wire::pb::hadoop::common::rpc_response_header_proto::RpcErrorCodeProto::ErrorApplication,
        }),
        ..RpcResponseHeader::success(-1, &cid, 0)
    }
    .encode_body(&mut rsp_err);
    write("view_rpc_response_header", "error", &rsp_err);
    let rh = RequestHeader {
        method_name: "nodeHeartbeat",
        declaring_class_protocol_name: "org.apache.hadoop.yarn.server.api.ResourceTrackerPB",
        client_protocol_version: 1,
    };
    let mut rhb = Vec::new();
    rh.encode_body(&mut rhb);
    write("view_request_header", "heartbeat", &rhb);

    let body = |frame: &[u8]| frame[4..].to_vec();
    let mut f = Vec::new();
    call_frame(
        &mut f,
        &RpcRequestHeader::call(5, &cid, 0),
        &rh,
        &Proto(&hb),
    )
    .unwrap();
    write(
        "view_frames",
        "request-heartbeat",
        &[&[0u8][..], &body(&f)].concat(),
    );
    f.clear();
    success_response_frame(
        &mut f,
        &RpcResponseHeader::success(5, &cid, 0),
        &Proto(&key),
    )
    .unwrap();
    write(
        "view_frames",
        "response-success",
        &[&[1u8][..], &body(&f)].concat(),
    );
    write(
        "view_frames",
        "response-error",
        &[&[1u8, rsp_err.len() as u8][..], &rsp_err].concat(),
    );
}

/// Stable-Rust mutation of the SASL seeds (cargo-fuzz needs nightly): bit flips, cut and
/// spliced messages through both negotiation state machines.
#[test]
fn sasl_messages_survive_mutated_seeds() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz-regressions/sasl_messages");
    let seeds: Vec<Vec<u8>> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| std::fs::read(e.unwrap().path()).unwrap())
        .collect();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for i in 0..20_000 {
        let mut d = seeds[i % seeds.len()].clone();
        for _ in 0..(next() % 4 + 1) {
            match next() % 4 {
                0 if !d.is_empty() => {
                    let at = (next() as usize) % d.len();
                    d[at] ^= 1 << (next() % 8);
                }
                1 => d.insert((next() as usize) % (d.len() + 1), next() as u8),
                2 if !d.is_empty() => {
                    d.truncate((next() as usize) % d.len());
                }
                _ => {
                    let other = &seeds[(next() as usize) % seeds.len()];
                    d.extend_from_slice(other);
                }
            }
        }
        checks::sasl_messages(&d);
    }
}
