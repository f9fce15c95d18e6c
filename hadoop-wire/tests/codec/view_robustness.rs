//! Robustness: arbitrary bytes into every view's `validate()` and every accessor (and every
//! nested view reachable from it) never panic. Errors are fine; panics, hangs and
//! allocations sized by the input are not (the views allocate nothing at all).

use crate::view_support;

use hadoop_wire::view::common::TokenView;
use hadoop_wire::view::hdfs::*;
use hadoop_wire::view::rpc::*;
use hadoop_wire::view::schema::{validate_generated, validate_table_driven};
use hadoop_wire::view::yarn::*;
use hadoop_wire::view::MessageView;
use proptest::prelude::*;
use view_support::Visit;

fn all_views(bytes: &[u8]) {
    // The generated validators and the table-driven one accept exactly the same inputs.
    for schema in [
        <NodeHeartbeatRequestView as MessageView>::SCHEMA,
        <ContainerStatusView as MessageView>::SCHEMA,
        <RpcRequestHeaderView as MessageView>::SCHEMA,
        <RpcResponseHeaderView as MessageView>::SCHEMA,
        <RequestHeaderView as MessageView>::SCHEMA,
        <LocatedBlocksView as MessageView>::SCHEMA,
        <LocatedBlockView as MessageView>::SCHEMA,
        <PacketHeaderView as MessageView>::SCHEMA,
    ] {
        let table = validate_table_driven(schema, bytes);
        assert_eq!(
            validate_generated(schema, bytes),
            table.is_ok(),
            "{}: {:?} on {:?}",
            schema.name,
            table,
            bytes
        );
    }
    let mut v = Visit::new();
    v.heartbeat(NodeHeartbeatRequestView::new(bytes));
    v.node_status(NodeStatusView::new(bytes));
    v.container_status(ContainerStatusView::new(bytes));
    v.container_id(ContainerIdView::new(bytes));
    v.attempt_id(ApplicationAttemptIdView::new(bytes));
    v.app_id(ApplicationIdView::new(bytes));
    v.resource(ResourceView::new(bytes));
    v.master_key(MasterKeyView::new(bytes));
    v.rpc_request_header(RpcRequestHeaderView::new(bytes));
    v.rpc_response_header(RpcResponseHeaderView::new(bytes));
    v.request_header(RequestHeaderView::new(bytes));
    v.located_blocks(LocatedBlocksView::new(bytes));
    v.located_block(LocatedBlockView::new(bytes));
    v.datanode_info(DatanodeInfoView::new(bytes));
    v.extended_block(ExtendedBlockView::new(bytes));
    v.packet_header(PacketHeaderView::new(bytes));
    v.token(TokenView::new(bytes));
    let _ = NodeIdView::new(bytes).validate();
    let _ = NodeHealthStatusView::new(bytes).validate();
    let _ = ResourceInformationView::new(bytes).validate();
    let _ = StringStringMapView::new(bytes).validate();
    let _ = DatanodeIdView::new(bytes).validate();
}

/// Bytes that look like protobuf: random tags with small field numbers and plausible values,
/// so that the views get past the first tag and into nested messages.
fn protobuf_ish() -> impl Strategy<Value = Vec<u8>> {
    let item = prop_oneof![
        (1u8..20, any::<u8>()).prop_map(|(f, v)| vec![f << 3, v & 0x7f]),
        (1u8..20, proptest::collection::vec(any::<u8>(), 0..24)).prop_map(|(f, body)| [
            vec![(f << 3) | 2, body.len() as u8],
            body
        ]
        .concat()),
        (1u8..20).prop_map(|f| vec![(f << 3) | 1, 1, 2, 3, 4, 5, 6, 7, 8]),
        (1u8..20).prop_map(|f| vec![(f << 3) | 5, 1, 2, 3, 4]),
        (1u8..20).prop_map(|f| vec![(f << 3) | 3]),
        (1u8..20).prop_map(|f| vec![(f << 3) | 4]),
        any::<u8>().prop_map(|b| vec![b]),
    ];
    proptest::collection::vec(item, 0..24).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        all_views(&bytes);
    }

    #[test]
    fn protobuf_like_bytes_never_panic(bytes in protobuf_ish()) {
        all_views(&bytes);
    }

    #[test]
    fn one_pass_readers_agree_with_the_field_readers(bytes in protobuf_ish()) {
        // NodeHealthStatusView::read: the three one-field readers in one pass.
        let h = NodeHealthStatusView::new(&bytes);
        let each = (|| Ok::<_, hadoop_wire::reader::DecodeError>((
            h.is_node_healthy()?,
            h.health_report()?,
            h.last_health_report_time()?,
        )))();
        match (h.read(), each) {
            (Ok(all), Ok((a, b, c))) => prop_assert_eq!(
                (all.is_node_healthy, all.health_report, all.last_health_report_time),
                (a, b, c)
            ),
            (Err(_), Err(_)) => {}
            (one, each) => prop_assert!(false, "read {:?} vs fields {:?} on {:?}", one, each, bytes),
        }
        // ResourceUtilizationView::scalars against prost (which also rejects a wrong wire
        // type for a known field): the same values whenever prost decodes.
        use prost::Message;
        let u = ResourceUtilizationView::new(&bytes).scalars();
        if let Ok(p) = hadoop_wire::pb::hadoop::yarn::ResourceUtilizationProto::decode(&bytes[..]) {
            let u = u.expect("prost decoded it");
            prop_assert_eq!(
                (u.pmem, u.vmem, u.cpu.to_bits()),
                (p.pmem.unwrap_or(0), p.vmem.unwrap_or(0), p.cpu.unwrap_or(0.0).to_bits())
            );
        }
    }

    #[test]
    fn nested_protobuf_like_bytes_never_panic(inner in protobuf_ish(), outer_field in 1u8..10, middle_field in 1u8..10) {
        // wrap twice so that nested views see the random bytes
        let mid = [vec![(middle_field << 3) | 2], varint(inner.len()), inner].concat();
        let out = [vec![(outer_field << 3) | 2], varint(mid.len()), mid].concat();
        all_views(&out);
    }
}

fn varint(mut v: usize) -> Vec<u8> {
    let mut out = Vec::new();
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
    out
}
