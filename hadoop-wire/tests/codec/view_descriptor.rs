//! The checked-in `DESCRIPTOR_SET` loads with prost-reflect, names every message the views
//! and `hotpath decode` need, and agrees with the checked-in prost code and field tables.

use hadoop_wire::pb::DESCRIPTOR_SET;
use hadoop_wire::view::yarn::{ContainerStatusView, NodeHeartbeatRequestView};
use hadoop_wire::view::MessageView;
use prost::Message;
use prost_reflect::{DescriptorPool, DynamicMessage};

fn pool() -> DescriptorPool {
    DescriptorPool::decode(DESCRIPTOR_SET).expect("descriptor.bin decodes")
}

#[test]
fn names_the_messages_and_services() {
    let pool = pool();
    for name in [
        "hadoop.common.RpcRequestHeaderProto",
        "hadoop.common.RpcResponseHeaderProto",
        "hadoop.common.RequestHeaderProto",
        "hadoop.common.IpcConnectionContextProto",
        "hadoop.common.TokenProto",
        "hadoop.yarn.NodeHeartbeatRequestProto",
        "hadoop.yarn.NodeHeartbeatResponseProto",
        "hadoop.yarn.RegisterNodeManagerRequestProto",
        "hadoop.yarn.RegisterNodeManagerResponseProto",
        "hadoop.yarn.UnRegisterNodeManagerRequestProto",
        "hadoop.yarn.NMContainerStatusProto",
        "hadoop.hdfs.GetBlockLocationsResponseProto",
        "hadoop.hdfs.HdfsFileStatusProto",
        "hadoop.hdfs.GetFileInfoResponseProto",
        "hadoop.hdfs.OpReadBlockProto",
        "hadoop.hdfs.BlockOpResponseProto",
        "hadoop.hdfs.PacketHeaderProto",
    ] {
        assert!(pool.get_message_by_name(name).is_some(), "{name} missing");
    }
    let rt = pool
        .get_service_by_name("hadoop.yarn.ResourceTrackerService")
        .unwrap();
    let methods: Vec<String> = rt.methods().map(|m| m.name().to_string()).collect();
    assert_eq!(
        methods,
        [
            "registerNodeManager",
            "nodeHeartbeat",
            "unRegisterNodeManager"
        ]
    );
    let nn = pool
        .get_service_by_name("hadoop.hdfs.ClientNamenodeProtocol")
        .unwrap();
    assert!(nn.methods().any(|m| m.name() == "getFileInfo"));
}

#[test]
fn descriptor_defaults_match_views() {
    // An empty ContainerStatusProto: the descriptor's defaults and the views' agree.
    let pool = pool();
    let desc = pool
        .get_message_by_name("hadoop.yarn.ContainerStatusProto")
        .unwrap();
    let m = DynamicMessage::decode(desc.clone(), &[][..]).unwrap();
    let v = ContainerStatusView::new(&[]);
    let exit = m.get_field_by_name("exit_status").unwrap();
    assert_eq!(exit.as_i32(), Some(v.exit_status().unwrap()));
    let diag = m.get_field_by_name("diagnostics").unwrap();
    assert_eq!(diag.as_str(), Some(v.diagnostics().unwrap()));
    let exec = m.get_field_by_name("executionType").unwrap();
    assert_eq!(
        exec.as_enum_number(),
        Some(v.execution_type().unwrap() as i32)
    );
}

#[test]
fn descriptor_field_numbers_match_the_view_tables() {
    // Every field of every table reachable from the heartbeat has the same number, label and
    // name in the descriptor.
    let pool = pool();
    let mut todo = vec![<NodeHeartbeatRequestView as MessageView>::SCHEMA];
    let mut seen = std::collections::HashSet::new();
    while let Some(schema) = todo.pop() {
        if !seen.insert(schema.name) {
            continue;
        }
        let desc = pool.get_message_by_name(schema.name).unwrap();
        assert_eq!(
            desc.fields().count(),
            schema.fields.len(),
            "{}",
            schema.name
        );
        for f in schema.fields {
            let d = desc.get_field(f.number).unwrap();
            assert_eq!(d.name(), f.name);
            assert_eq!(
                d.is_list(),
                f.label == hadoop_wire::view::schema::Label::Repeated,
                "{}.{}",
                schema.name,
                f.name
            );
            assert_eq!(
                d.cardinality() == prost_reflect::Cardinality::Required,
                f.label == hadoop_wire::view::schema::Label::Required
            );
            if let hadoop_wire::view::schema::Kind::Message(sub) = f.kind {
                todo.push(sub);
            }
        }
    }
    assert!(seen.len() > 15, "walked {} messages", seen.len());
}

#[test]
fn dynamic_decode_agrees_with_prost() {
    use hadoop_wire::pb::hadoop::yarn::*;
    let msg = NodeHeartbeatRequestProto {
        node_status: Some(NodeStatusProto {
            response_id: Some(7),
            containers_statuses: vec![ContainerStatusProto {
                exit_status: Some(143),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    let bytes = msg.encode_to_vec();
    let desc = pool()
        .get_message_by_name("hadoop.yarn.NodeHeartbeatRequestProto")
        .unwrap();
    let dynamic = DynamicMessage::decode(desc, &bytes[..]).unwrap();
    assert_eq!(dynamic.encode_to_vec(), bytes);
}
