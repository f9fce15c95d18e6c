//! One function per fuzz target: run the code under test on arbitrary bytes and assert its
//! invariants. A panic here is a finding. Each returns whether the input got all the way through
//! (a frame or packet decoded; a view validated and decoded by prost), which the regression
//! test requires of its `seed-*` inputs. Used by the cargo-fuzz targets (`fuzz/`, nightly) and
//! by hadoop-wire's `fuzz_regressions` test (stable), so a crashing input replays as an
//! ordinary test.
#![forbid(unsafe_code)]

use hadoop_wire::frame::{
    parse_preamble, Decoded, FrameAccumulator, FrameDecoder, PacketDecoded, PacketDecoder,
    RequestFrame, ResponseFrame,
};

/// The frame decoder, the accumulator and request/response splitting. The first byte picks the
/// cap and the chunking of the rest; contiguous decoding and the accumulator must agree.
pub fn frame_decoder(data: &[u8]) -> bool {
    let Some((&ctl, bytes)) = data.split_first() else {
        return false;
    };
    let _ = parse_preamble(bytes);
    let cap = if ctl & 0x80 != 0 {
        u32::MAX
    } else {
        u32::from(ctl) * 16
    };
    let decoder = FrameDecoder::new(cap);

    let mut contiguous = Vec::new();
    let mut rest = bytes;
    loop {
        match decoder.decode(rest) {
            Ok(Decoded::Frame(r)) => {
                assert!(r.end <= rest.len());
                assert!((r.end - r.start) as u64 <= u64::from(decoder.cap()));
                let body = &rest[r.clone()];
                split(body);
                contiguous.push(body.to_vec());
                rest = &rest[r.end..];
            }
            Ok(Decoded::NeedMore(n)) => {
                assert!(n > 0);
                break;
            }
            Err(_) => break,
        }
    }

    let chunk = usize::from(ctl & 7) + 1;
    let mut acc = FrameAccumulator::new(decoder).with_retained_capacity(64);
    let mut assembled = Vec::new();
    'outer: for piece in bytes.chunks(chunk) {
        let mut rest = piece;
        loop {
            match acc.next_frame(rest) {
                Ok(step) => {
                    assert!(step.consumed <= rest.len());
                    rest = &rest[step.consumed..];
                    match step.frame {
                        Some(f) => assembled.push(f.to_vec()),
                        None => {
                            assert!(rest.is_empty());
                            break;
                        }
                    }
                }
                Err(_) => break 'outer,
            }
        }
    }
    assert_eq!(contiguous, assembled);
    !contiguous.is_empty()
}

fn split(body: &[u8]) {
    if let Ok(f) = RequestFrame::split(body) {
        let parts = 1 + usize::from(f.request_header.is_some()) + usize::from(f.payload.is_some());
        assert!(f.request_header.is_none() || f.payload.is_some());
        assert!(parts >= 1);
        for id in [-33, -4, -3, -1, 0, 1] {
            let _ = f.check_call_id(id);
        }
    }
    if let Ok(f) = ResponseFrame::split(body) {
        assert!(f.header.len() < body.len());
    }
}

/// The DataTransfer packet decoder and splitter. The first byte picks bytes-per-checksum.
pub fn packet(data: &[u8]) -> bool {
    let Some((&ctl, bytes)) = data.split_first() else {
        return false;
    };
    let bpc = u32::from(ctl) * 4;
    let decoder = PacketDecoder::new(1 << 20);
    let mut rest = bytes;
    let mut packets = 0;
    while let Ok(PacketDecoded::Packet { packet, consumed }) = decoder.decode(rest) {
        packets += 1;
        assert!(consumed >= 6 && consumed <= rest.len());
        assert!(packet.header.len() <= 33);
        let n = packet.body.len() as i32;
        for data_len in [0, 1, n / 2, n, n + 1, -1] {
            if let Ok(p) = packet.split(data_len) {
                assert_eq!(p.data.len(), data_len as usize);
                assert_eq!(p.checksums.len() + p.data.len(), packet.body.len());
                if p.check_checksums(bpc, 4).is_ok() {
                    let total: usize = p.crc_chunks(bpc).map(|(_, d)| d.len()).sum();
                    assert_eq!(total, p.data.len());
                }
                let _ = p.check_checksums(bpc, 0);
            }
        }
        rest = &rest[consumed..];
    }
    packets > 0
}

// ---------------------------------------------------------------------------------------------
// Views: validate, then every accessor, iterators drained, nested views followed.
//
// Invariants: nothing panics; when `validate()` succeeds every accessor succeeds (the `&str`
// ones only when the message is also valid UTF-8, which `validate` does not check: that is
// taken as "prost decodes it"); and on such input the hot accessors agree with prost.

use hadoop_wire::view::common::TokenView;
use hadoop_wire::view::hdfs::{
    DatanodeIdView, DatanodeInfoView, ExtendedBlockView, LocatedBlockView, LocatedBlocksView,
    PacketHeaderView,
};
use hadoop_wire::view::rpc::{RequestHeaderView, RpcRequestHeaderView, RpcResponseHeaderView};
use hadoop_wire::view::yarn::{
    ApplicationAttemptIdView, ApplicationIdView, ContainerIdView, ContainerStatusView,
    MasterKeyView, NodeHealthStatusView, NodeHeartbeatRequestView, NodeIdView, NodeStatusView,
    ResourceInformationView, ResourceView, StringStringMapView,
};
use prost::Message;

/// `v`: the outer message validated; `s`: validated and decodable by prost (valid UTF-8).
#[derive(Clone, Copy)]
struct Expect {
    v: bool,
    s: bool,
}

/// Evaluates an accessor; if `$flag` holds it must succeed.
macro_rules! must {
    ($flag:expr, $e:expr) => {{
        let r = $e;
        if $flag {
            assert!(
                r.is_ok(),
                "{} failed on validated input: {:?}",
                stringify!($e),
                r.as_ref().err()
            );
        }
        r
    }};
}

/// Drains an iterator of results, calling `$f` on each Ok item.
macro_rules! drain {
    ($flag:expr, $iter:expr, $f:expr) => {{
        let mut n = 0usize;
        for item in $iter {
            if let Ok(x) = must!($flag, item) {
                #[allow(clippy::redundant_closure_call)]
                ($f)(x);
            }
            n += 1;
            assert!(n <= 1 << 20, "iterator does not end");
        }
        n
    }};
}

/// Runs a view check: validate, exercise, and if prost also decodes, compare.
fn view<'a, V: Copy, P: Message + Default>(
    data: &'a [u8],
    new: fn(&'a [u8]) -> V,
    validate: fn(&V) -> Result<(), hadoop_wire::reader::DecodeError>,
    exercise: fn(V, Expect),
    compare: fn(V, &P),
) -> bool {
    let view = new(data);
    let v = validate(&view).is_ok();
    let prost = P::decode(data);
    let s = v && prost.is_ok();
    exercise(view, Expect { v, s });
    if s {
        compare(view, &prost.unwrap());
    }
    s
}

fn token(t: TokenView<'_>, e: Expect) {
    let _ = must!(e.v, t.identifier());
    let _ = must!(e.v, t.password());
    let _ = must!(e.s, t.kind());
    let _ = must!(e.v, t.kind_bytes());
    let _ = must!(e.s, t.service());
    let _ = must!(e.v, t.service_bytes());
}

fn rpc_request_header(h: RpcRequestHeaderView<'_>, e: Expect) {
    let _ = must!(e.v, h.rpc_kind_raw());
    let _ = must!(e.v, h.rpc_kind());
    let _ = must!(e.v, h.rpc_op_raw());
    let _ = must!(e.v, h.rpc_op());
    let _ = must!(e.v, h.call_id());
    let _ = must!(e.v, h.client_id());
    let _ = must!(e.v, h.retry_count());
    let _ = must!(e.v, h.retry_count_opt());
    let _ = must!(e.v, h.trace_info());
    let _ = must!(e.v, h.caller_context());
    let _ = must!(e.v, h.state_id());
    let _ = must!(e.v, h.router_federated_state());
}

fn rpc_response_header(h: RpcResponseHeaderView<'_>, e: Expect) {
    let _ = must!(e.v, h.call_id());
    let _ = must!(e.v, h.call_id_i32());
    let _ = must!(e.v, h.status_raw());
    // A required enum holding only unknown values validates (the wire is fine) but has no
    // typed value, as in Java: not asserted.
    let _ = h.status();
    let _ = must!(e.v, h.server_ipc_version_num());
    let _ = must!(e.s, h.exception_class_name());
    let _ = must!(e.s, h.error_msg());
    let _ = must!(e.v, h.error_detail_raw());
    let _ = must!(e.v, h.error_detail());
    let _ = must!(e.v, h.client_id());
    let _ = must!(e.v, h.retry_count());
    let _ = must!(e.v, h.retry_count_opt());
    let _ = must!(e.v, h.state_id());
    let _ = must!(e.v, h.router_federated_state());
}

fn request_header(h: RequestHeaderView<'_>, e: Expect) {
    let _ = must!(e.s, h.method_name());
    let _ = must!(e.v, h.method_name_bytes());
    let _ = must!(e.s, h.declaring_class_protocol_name());
    let _ = must!(e.v, h.declaring_class_protocol_name_bytes());
    let _ = must!(e.v, h.client_protocol_version());
}

fn node_heartbeat_request(h: NodeHeartbeatRequestView<'_>, e: Expect) {
    if let Ok(Some(ns)) = must!(e.v, h.node_status()) {
        node_status(ns, e);
    }
    if let Ok(Some(k)) = must!(e.v, h.last_known_container_token_master_key()) {
        master_key(k, e);
    }
    if let Ok(Some(k)) = must!(e.v, h.last_known_nm_token_master_key()) {
        master_key(k, e);
    }
    let _ = must!(e.v, h.node_labels());
    drain!(e.v, h.log_aggregation_reports_for_apps(), |_| ());
    drain!(e.v, h.registering_collectors(), |_| ());
    let _ = must!(e.v, h.node_attributes());
    let _ = must!(e.v, h.token_sequence_no());
}

fn node_status(n: NodeStatusView<'_>, e: Expect) {
    if let Ok(Some(id)) = must!(e.v, n.node_id()) {
        node_id(id, e);
    }
    let _ = must!(e.v, n.response_id());
    drain!(e.v, n.containers_statuses(), |c| container_status(c, e));
    if let Ok(Some(h)) = must!(e.v, n.node_health_status()) {
        node_health_status(h, e);
    }
    drain!(e.v, n.keep_alive_applications(), |a| application_id(a, e));
    let _ = must!(e.v, n.containers_utilization());
    let _ = must!(e.v, n.node_utilization());
    drain!(e.v, n.increased_containers(), |_| ());
    let _ = must!(e.v, n.opportunistic_containers_status());
}

fn container_status(c: ContainerStatusView<'_>, e: Expect) {
    if let Ok(s) = must!(e.v, c.summary()) {
        assert_eq!(s.container_id, c.container_id().unwrap());
        assert_eq!(s.state_raw, c.state_raw().unwrap());
        assert_eq!(s.state, c.state().unwrap());
        assert_eq!(s.exit_status, c.exit_status().unwrap());
        assert_eq!(s.execution_type_raw, c.execution_type_raw().unwrap());
        assert_eq!(s.execution_type, c.execution_type().unwrap());
    }
    if let Ok(Some(id)) = must!(e.v, c.container_id()) {
        container_id(id, e);
    }
    let _ = must!(e.v, c.state_raw());
    let _ = must!(e.v, c.state());
    let _ = must!(e.s, c.diagnostics());
    let _ = must!(e.s, c.diagnostics_opt());
    let _ = must!(e.v, c.exit_status());
    let _ = must!(e.v, c.exit_status_opt());
    if let Ok(Some(r)) = must!(e.v, c.capability()) {
        resource(r, e);
    }
    let _ = must!(e.v, c.execution_type_raw());
    let _ = must!(e.v, c.execution_type());
    drain!(e.v, c.container_attributes(), |m| string_string_map(m, e));
    let _ = must!(e.v, c.container_sub_state_raw());
    let _ = must!(e.v, c.container_sub_state());
}

fn container_id(c: ContainerIdView<'_>, e: Expect) {
    if let Ok(p) = must!(e.v, c.parts()) {
        assert_eq!(p.app_id, c.app_id().unwrap());
        assert_eq!(p.app_attempt_id, c.app_attempt_id().unwrap());
        assert_eq!(p.id, c.id().unwrap());
    }
    if let Ok(Some(a)) = must!(e.v, c.app_id()) {
        application_id(a, e);
    }
    if let Ok(Some(a)) = must!(e.v, c.app_attempt_id()) {
        application_attempt_id(a, e);
    }
    let _ = must!(e.v, c.id());
}

fn application_attempt_id(a: ApplicationAttemptIdView<'_>, e: Expect) {
    if let Ok((app, attempt)) = must!(e.v, a.parts()) {
        assert_eq!(app, a.application_id().unwrap());
        assert_eq!(attempt, a.attempt_id().unwrap());
    }
    if let Ok(Some(app)) = must!(e.v, a.application_id()) {
        application_id(app, e);
    }
    let _ = must!(e.v, a.attempt_id());
}

fn application_id(a: ApplicationIdView<'_>, e: Expect) {
    if let Ok((id, ts)) = must!(e.v, a.parts()) {
        assert_eq!(id, a.id().unwrap());
        assert_eq!(ts, a.cluster_timestamp().unwrap());
    }
    let _ = must!(e.v, a.id());
    let _ = must!(e.v, a.cluster_timestamp());
}

fn resource(r: ResourceView<'_>, e: Expect) {
    let _ = must!(e.v, r.memory());
    let _ = must!(e.v, r.virtual_cores());
    drain!(e.v, r.resource_value_map(), |i| resource_information(i, e));
}

fn resource_information(r: ResourceInformationView<'_>, e: Expect) {
    let _ = must!(e.s, r.key());
    let _ = must!(e.v, r.value());
    let _ = must!(e.s, r.units());
    let _ = must!(e.v, r.resource_type_raw());
    let _ = must!(e.v, r.resource_type());
    drain!(e.s, r.tags(), |_| ());
    drain!(e.v, r.attributes(), |m| string_string_map(m, e));
}

fn string_string_map(m: StringStringMapView<'_>, e: Expect) {
    let _ = must!(e.s, m.key());
    let _ = must!(e.s, m.value());
}

fn master_key(k: MasterKeyView<'_>, e: Expect) {
    let _ = must!(e.v, k.key_id());
    let _ = must!(e.v, k.key_bytes());
}

fn node_id(n: NodeIdView<'_>, e: Expect) {
    let _ = must!(e.s, n.host());
    let _ = must!(e.v, n.port());
}

fn node_health_status(h: NodeHealthStatusView<'_>, e: Expect) {
    let _ = must!(e.v, h.is_node_healthy());
    let _ = must!(e.s, h.health_report());
    let _ = must!(e.v, h.last_health_report_time());
}

fn located_blocks(l: LocatedBlocksView<'_>, e: Expect) {
    let _ = must!(e.v, l.file_length());
    drain!(e.v, l.blocks(), |b| located_block(b, e));
    let _ = must!(e.v, l.under_construction());
    if let Ok(Some(b)) = must!(e.v, l.last_block()) {
        located_block(b, e);
    }
    let _ = must!(e.v, l.is_last_block_complete());
    let _ = must!(e.v, l.file_encryption_info());
    let _ = must!(e.v, l.ec_policy());
}

fn located_block(b: LocatedBlockView<'_>, e: Expect) {
    if let Ok(x) = must!(e.v, b.b()) {
        extended_block(x, e);
    }
    let _ = must!(e.v, b.offset());
    drain!(e.v, b.locs(), |d| datanode_info(d, e));
    let _ = must!(e.v, b.corrupt());
    if let Ok(t) = must!(e.v, b.block_token()) {
        token(t, e);
    }
    drain!(e.v, b.is_cached(), |_| ());
    let raw = drain!(e.v, b.storage_types_raw(), |_| ());
    let typed = drain!(e.v, b.storage_types(), |_| ());
    assert!(typed <= raw);
    drain!(e.s, b.storage_ids(), |_| ());
    let _ = must!(e.v, b.block_indices());
    drain!(e.v, b.block_tokens(), |t| token(t, e));
}

fn extended_block(b: ExtendedBlockView<'_>, e: Expect) {
    let _ = must!(e.s, b.pool_id());
    let _ = must!(e.v, b.pool_id_bytes());
    let _ = must!(e.v, b.block_id());
    let _ = must!(e.v, b.generation_stamp());
    let _ = must!(e.v, b.num_bytes());
    let _ = must!(e.v, b.num_bytes_opt());
}

fn datanode_id(d: DatanodeIdView<'_>, e: Expect) {
    let _ = must!(e.s, d.ip_addr());
    let _ = must!(e.s, d.host_name());
    let _ = must!(e.s, d.datanode_uuid());
    let _ = must!(e.v, d.xfer_port());
    let _ = must!(e.v, d.info_port());
    let _ = must!(e.v, d.ipc_port());
    let _ = must!(e.v, d.info_secure_port());
    let _ = must!(e.v, d.info_secure_port_opt());
}

fn datanode_info(d: DatanodeInfoView<'_>, e: Expect) {
    if let Ok(id) = must!(e.v, d.id()) {
        datanode_id(id, e);
    }
    let _ = must!(e.v, d.capacity());
    let _ = must!(e.v, d.capacity_opt());
    let _ = must!(e.v, d.dfs_used());
    let _ = must!(e.v, d.dfs_used_opt());
    let _ = must!(e.v, d.remaining());
    let _ = must!(e.v, d.remaining_opt());
    let _ = must!(e.v, d.block_pool_used());
    let _ = must!(e.v, d.block_pool_used_opt());
    let _ = must!(e.v, d.last_update());
    let _ = must!(e.v, d.last_update_opt());
    let _ = must!(e.v, d.cache_capacity());
    let _ = must!(e.v, d.cache_capacity_opt());
    let _ = must!(e.v, d.cache_used());
    let _ = must!(e.v, d.cache_used_opt());
    let _ = must!(e.v, d.last_update_monotonic());
    let _ = must!(e.v, d.last_update_monotonic_opt());
    let _ = must!(e.v, d.last_block_report_time());
    let _ = must!(e.v, d.last_block_report_time_opt());
    let _ = must!(e.v, d.last_block_report_monotonic());
    let _ = must!(e.v, d.last_block_report_monotonic_opt());
    let _ = must!(e.v, d.xceiver_count());
    let _ = must!(e.v, d.xceiver_count_opt());
    let _ = must!(e.s, d.location());
    let _ = must!(e.v, d.non_dfs_used());
    let _ = must!(e.v, d.admin_state_raw());
    let _ = must!(e.v, d.admin_state());
    let _ = must!(e.s, d.upgrade_domain());
    let _ = must!(e.v, d.num_blocks());
    let _ = must!(e.v, d.num_blocks_opt());
}

fn packet_header(h: PacketHeaderView<'_>, e: Expect) {
    let r = must!(e.v, h.read());
    let parts = (|| {
        Ok::<_, hadoop_wire::reader::DecodeError>((
            h.offset_in_block()?,
            h.seqno()?,
            h.last_packet_in_block()?,
            h.data_len()?,
            h.sync_block()?,
        ))
    })();
    let _ = must!(e.v, h.sync_block_opt());
    // read() and the single-field accessors agree.
    if let (Ok(r), Ok(p)) = (&r, &parts) {
        assert_eq!(
            (
                r.offset_in_block,
                r.seqno,
                r.last_packet_in_block,
                r.data_len,
                r.sync_block
            ),
            *p
        );
    }
    assert_eq!(
        r.is_ok(),
        parts.is_ok(),
        "read() and the accessors disagree"
    )
}

// --- one entry point per view ----------------------------------------------------------------

use hadoop_wire::pb::hadoop::{common as pc, hdfs as ph, yarn as py};

pub fn view_token(d: &[u8]) -> bool {
    view::<_, pc::TokenProto>(d, TokenView::new, TokenView::validate, token, |v, p| {
        assert_eq!(v.identifier().unwrap(), &p.identifier[..]);
        assert_eq!(v.kind().unwrap(), p.kind);
        assert_eq!(v.service().unwrap(), p.service);
    })
}

pub fn view_rpc_request_header(d: &[u8]) -> bool {
    view::<_, pc::RpcRequestHeaderProto>(
        d,
        RpcRequestHeaderView::new,
        RpcRequestHeaderView::validate,
        rpc_request_header,
        |v, p| {
            assert_eq!(v.call_id().unwrap(), p.call_id);
            assert_eq!(v.client_id().unwrap(), &p.client_id[..]);
            assert_eq!(v.retry_count().unwrap(), p.retry_count());
            assert_eq!(v.rpc_kind_raw().unwrap(), p.rpc_kind);
            assert_eq!(v.rpc_op_raw().unwrap(), p.rpc_op);
            assert_eq!(v.state_id().unwrap(), p.state_id);
            assert_eq!(
                v.router_federated_state().unwrap(),
                p.router_federated_state.as_deref()
            );
        },
    )
}

pub fn view_rpc_response_header(d: &[u8]) -> bool {
    view::<_, pc::RpcResponseHeaderProto>(
        d,
        RpcResponseHeaderView::new,
        RpcResponseHeaderView::validate,
        rpc_response_header,
        |v, p| {
            assert_eq!(v.call_id().unwrap(), p.call_id);
            assert_eq!(v.status_raw().unwrap(), p.status);
            assert_eq!(
                v.server_ipc_version_num().unwrap(),
                p.server_ipc_version_num
            );
            assert_eq!(
                v.exception_class_name().unwrap(),
                p.exception_class_name.as_deref()
            );
            assert_eq!(v.error_msg().unwrap(), p.error_msg.as_deref());
            assert_eq!(v.error_detail_raw().unwrap(), p.error_detail);
            assert_eq!(v.client_id().unwrap(), p.client_id.as_deref());
            assert_eq!(v.retry_count().unwrap(), p.retry_count());
            assert_eq!(v.state_id().unwrap(), p.state_id);
        },
    )
}

pub fn view_request_header(d: &[u8]) -> bool {
    view::<_, pc::RequestHeaderProto>(
        d,
        RequestHeaderView::new,
        RequestHeaderView::validate,
        request_header,
        |v, p| {
            assert_eq!(v.method_name().unwrap(), p.method_name);
            assert_eq!(
                v.declaring_class_protocol_name().unwrap(),
                p.declaring_class_protocol_name
            );
            assert_eq!(
                v.client_protocol_version().unwrap(),
                p.client_protocol_version
            );
        },
    )
}

pub fn view_node_heartbeat_request(d: &[u8]) -> bool {
    view::<_, py::NodeHeartbeatRequestProto>(
        d,
        NodeHeartbeatRequestView::new,
        NodeHeartbeatRequestView::validate,
        node_heartbeat_request,
        |v, p| {
            assert_eq!(v.token_sequence_no().unwrap(), p.token_sequence_no);
            let ns = v.node_status().unwrap();
            assert_eq!(ns.is_some(), p.node_status.is_some());
            if let (Some(ns), Some(pn)) = (ns, &p.node_status) {
                assert_eq!(ns.response_id().unwrap(), pn.response_id);
                let ours: Vec<_> = ns
                    .containers_statuses()
                    .map(|c| c.unwrap().summary().unwrap())
                    .map(|s| (s.state_raw, s.exit_status, s.execution_type_raw))
                    .collect();
                let theirs: Vec<_> = pn
                    .containers_statuses
                    .iter()
                    .map(|c| (c.state, c.exit_status(), c.execution_type))
                    .collect();
                assert_eq!(ours, theirs);
            }
        },
    )
}

pub fn view_node_status(d: &[u8]) -> bool {
    view::<_, py::NodeStatusProto>(
        d,
        NodeStatusView::new,
        NodeStatusView::validate,
        node_status,
        |v, p| {
            assert_eq!(v.response_id().unwrap(), p.response_id);
            assert_eq!(v.containers_statuses().count(), p.containers_statuses.len());
            assert_eq!(
                v.keep_alive_applications().count(),
                p.keep_alive_applications.len()
            );
            assert_eq!(
                v.increased_containers().count(),
                p.increased_containers.len()
            );
        },
    )
}

pub fn view_container_status(d: &[u8]) -> bool {
    view::<_, py::ContainerStatusProto>(
        d,
        ContainerStatusView::new,
        ContainerStatusView::validate,
        container_status,
        |v, p| {
            assert_eq!(v.state_raw().unwrap(), p.state);
            assert_eq!(v.exit_status().unwrap(), p.exit_status());
            assert_eq!(v.diagnostics().unwrap(), p.diagnostics());
            assert_eq!(v.execution_type_raw().unwrap(), p.execution_type);
            assert_eq!(v.container_sub_state_raw().unwrap(), p.container_sub_state);
            assert_eq!(
                v.container_attributes().count(),
                p.container_attributes.len()
            );
            let id = v.container_id().unwrap().map(|c| c.id().unwrap());
            assert_eq!(id, p.container_id.as_ref().map(|c| c.id));
        },
    )
}

pub fn view_container_id(d: &[u8]) -> bool {
    view::<_, py::ContainerIdProto>(
        d,
        ContainerIdView::new,
        ContainerIdView::validate,
        container_id,
        |v, p| {
            assert_eq!(v.id().unwrap(), p.id);
            let app = v.app_id().unwrap().map(|a| a.parts().unwrap());
            assert_eq!(app, p.app_id.as_ref().map(|a| (a.id, a.cluster_timestamp)));
        },
    )
}

pub fn view_application_attempt_id(d: &[u8]) -> bool {
    view::<_, py::ApplicationAttemptIdProto>(
        d,
        ApplicationAttemptIdView::new,
        ApplicationAttemptIdView::validate,
        application_attempt_id,
        |v, p| assert_eq!(v.attempt_id().unwrap(), p.attempt_id),
    )
}

pub fn view_application_id(d: &[u8]) -> bool {
    view::<_, py::ApplicationIdProto>(
        d,
        ApplicationIdView::new,
        ApplicationIdView::validate,
        application_id,
        |v, p| assert_eq!(v.parts().unwrap(), (p.id, p.cluster_timestamp)),
    )
}

pub fn view_resource(d: &[u8]) -> bool {
    view::<_, py::ResourceProto>(
        d,
        ResourceView::new,
        ResourceView::validate,
        resource,
        |v, p| {
            assert_eq!(v.memory().unwrap(), p.memory);
            assert_eq!(v.virtual_cores().unwrap(), p.virtual_cores);
            let ours: Vec<_> = v
                .resource_value_map()
                .map(|r| {
                    let r = r.unwrap();
                    (r.key().unwrap().to_string(), r.value().unwrap())
                })
                .collect();
            let theirs: Vec<_> = p
                .resource_value_map
                .iter()
                .map(|r| (r.key.clone(), r.value))
                .collect();
            assert_eq!(ours, theirs);
        },
    )
}

pub fn view_resource_information(d: &[u8]) -> bool {
    view::<_, py::ResourceInformationProto>(
        d,
        ResourceInformationView::new,
        ResourceInformationView::validate,
        resource_information,
        |v, p| {
            assert_eq!(v.key().unwrap(), p.key);
            assert_eq!(v.value().unwrap(), p.value);
            assert_eq!(v.units().unwrap(), p.units.as_deref());
            assert_eq!(v.resource_type_raw().unwrap(), p.r#type);
        },
    )
}

pub fn view_string_string_map(d: &[u8]) -> bool {
    view::<_, py::StringStringMapProto>(
        d,
        StringStringMapView::new,
        StringStringMapView::validate,
        string_string_map,
        |v, p| {
            assert_eq!(v.key().unwrap(), p.key.as_deref());
            assert_eq!(v.value().unwrap(), p.value.as_deref());
        },
    )
}

pub fn view_master_key(d: &[u8]) -> bool {
    view::<_, py::MasterKeyProto>(
        d,
        MasterKeyView::new,
        MasterKeyView::validate,
        master_key,
        |v, p| {
            assert_eq!(v.key_id().unwrap(), p.key_id);
            assert_eq!(v.key_bytes().unwrap(), p.bytes.as_deref());
        },
    )
}

pub fn view_node_id(d: &[u8]) -> bool {
    view::<_, py::NodeIdProto>(d, NodeIdView::new, NodeIdView::validate, node_id, |v, p| {
        assert_eq!(v.host().unwrap(), p.host.as_deref());
        assert_eq!(v.port().unwrap(), p.port);
    })
}

pub fn view_node_health_status(d: &[u8]) -> bool {
    view::<_, py::NodeHealthStatusProto>(
        d,
        NodeHealthStatusView::new,
        NodeHealthStatusView::validate,
        node_health_status,
        |v, p| {
            assert_eq!(v.is_node_healthy().unwrap(), p.is_node_healthy);
            assert_eq!(v.health_report().unwrap(), p.health_report.as_deref());
            assert_eq!(
                v.last_health_report_time().unwrap(),
                p.last_health_report_time
            );
        },
    )
}

pub fn view_located_blocks(d: &[u8]) -> bool {
    view::<_, ph::LocatedBlocksProto>(
        d,
        LocatedBlocksView::new,
        LocatedBlocksView::validate,
        located_blocks,
        |v, p| {
            assert_eq!(v.file_length().unwrap(), p.file_length);
            assert_eq!(v.blocks().count(), p.blocks.len());
            assert_eq!(v.under_construction().unwrap(), p.under_construction);
            assert_eq!(
                v.is_last_block_complete().unwrap(),
                p.is_last_block_complete
            );
            assert_eq!(v.last_block().unwrap().is_some(), p.last_block.is_some());
        },
    )
}

pub fn view_located_block(d: &[u8]) -> bool {
    view::<_, ph::LocatedBlockProto>(
        d,
        LocatedBlockView::new,
        LocatedBlockView::validate,
        located_block,
        |v, p| {
            assert_eq!(v.offset().unwrap(), p.offset);
            assert_eq!(v.corrupt().unwrap(), p.corrupt);
            assert_eq!(v.b().unwrap().block_id().unwrap(), p.b.block_id);
            assert_eq!(v.locs().count(), p.locs.len());
            let ours: Vec<i32> = v.storage_types_raw().map(Result::unwrap).collect();
            assert_eq!(ours, p.storage_types);
            let ours: Vec<bool> = v.is_cached().map(Result::unwrap).collect();
            assert_eq!(ours, p.is_cached);
            let ours: Vec<&str> = v.storage_ids().map(Result::unwrap).collect();
            assert_eq!(ours, p.storage_i_ds);
        },
    )
}

pub fn view_extended_block(d: &[u8]) -> bool {
    view::<_, ph::ExtendedBlockProto>(
        d,
        ExtendedBlockView::new,
        ExtendedBlockView::validate,
        extended_block,
        |v, p| {
            assert_eq!(v.pool_id().unwrap(), p.pool_id);
            assert_eq!(v.block_id().unwrap(), p.block_id);
            assert_eq!(v.generation_stamp().unwrap(), p.generation_stamp);
            assert_eq!(v.num_bytes().unwrap(), p.num_bytes());
        },
    )
}

pub fn view_datanode_id(d: &[u8]) -> bool {
    view::<_, ph::DatanodeIdProto>(
        d,
        DatanodeIdView::new,
        DatanodeIdView::validate,
        datanode_id,
        |v, p| {
            assert_eq!(v.ip_addr().unwrap(), p.ip_addr);
            assert_eq!(v.host_name().unwrap(), p.host_name);
            assert_eq!(v.datanode_uuid().unwrap(), p.datanode_uuid);
            assert_eq!(v.xfer_port().unwrap(), p.xfer_port);
            assert_eq!(v.info_port().unwrap(), p.info_port);
            assert_eq!(v.ipc_port().unwrap(), p.ipc_port);
            assert_eq!(v.info_secure_port().unwrap(), p.info_secure_port());
        },
    )
}

pub fn view_datanode_info(d: &[u8]) -> bool {
    view::<_, ph::DatanodeInfoProto>(
        d,
        DatanodeInfoView::new,
        DatanodeInfoView::validate,
        datanode_info,
        |v, p| {
            assert_eq!(v.id().unwrap().xfer_port().unwrap(), p.id.xfer_port);
            assert_eq!(v.capacity().unwrap(), p.capacity());
            assert_eq!(v.dfs_used().unwrap(), p.dfs_used());
            assert_eq!(v.remaining().unwrap(), p.remaining());
            assert_eq!(v.xceiver_count().unwrap(), p.xceiver_count());
            assert_eq!(v.location().unwrap(), p.location.as_deref());
            assert_eq!(v.non_dfs_used().unwrap(), p.non_dfs_used);
            assert_eq!(v.admin_state_raw().unwrap(), p.admin_state);
            assert_eq!(v.upgrade_domain().unwrap(), p.upgrade_domain.as_deref());
            assert_eq!(v.num_blocks().unwrap(), p.num_blocks());
        },
    )
}

pub fn view_packet_header(d: &[u8]) -> bool {
    view::<_, ph::PacketHeaderProto>(
        d,
        PacketHeaderView::new,
        PacketHeaderView::validate,
        packet_header,
        |v, p| {
            let r = v.read().unwrap();
            assert_eq!(
                (
                    r.offset_in_block,
                    r.seqno,
                    r.last_packet_in_block,
                    r.data_len,
                    r.sync_block
                ),
                (
                    p.offset_in_block,
                    p.seqno,
                    p.last_packet_in_block,
                    p.data_len,
                    p.sync_block()
                )
            );
        },
    )
}

/// Frames with their views: `RequestFrame::parse` / `ResponseFrame::parse` and the views of
/// every part. The first byte picks request or response.
pub fn view_frames(d: &[u8]) -> bool {
    let Some((&ctl, body)) = d.split_first() else {
        return false;
    };
    if ctl & 1 == 0 {
        let parsed = RequestFrame::parse(body);
        let ok = parsed.is_ok();
        if let Ok(f) = RequestFrame::split(body) {
            let h = f.rpc_header_view();
            let v = h.validate().is_ok();
            rpc_request_header(h, Expect { v, s: v });
            if let Some(r) = f.request_header_view() {
                let v = r.validate().is_ok();
                let s = v && pc::RequestHeaderProto::decode(r.as_bytes()).is_ok();
                request_header(r, Expect { v, s });
            }
            if v {
                let id = h.call_id().unwrap();
                let expected = f.check_call_id(id).ok().map(|_| id);
                assert_eq!(parsed.map(|p| p.1).ok(), expected);
            } else {
                assert!(!ok);
            }
        } else {
            assert!(!ok);
        }
        ok
    } else {
        match ResponseFrame::parse(body) {
            Ok((f, h)) => {
                assert_eq!(f, ResponseFrame::split(body).unwrap());
                let s = pc::RpcResponseHeaderProto::decode(h.as_bytes()).is_ok();
                rpc_response_header(h, Expect { v: true, s });
                true
            }
            Err(_) => false,
        }
    }
}

// --- tokens ----------------------------------------------------------------------------------

/// Credentials files ("HDTS", both formats), the Writable and protobuf `Token`, and every token
/// identifier, on the same bytes. Whatever parses must write back to something that parses to
/// the same value; an identifier's Java re-serialization must be a fixed point. Returns whether
/// the bytes were a whole Credentials file.
pub fn credentials(d: &[u8]) -> bool {
    use hadoop_wire::token::{
        AmrmTokenIdentifier, ContainerTokenIdentifier, Credentials, DelegationTokenIdentifier,
        Format, Limits, NmTokenIdentifier, Token, TokenIdentifier,
    };

    fn fixed_point<I: TokenIdentifier>(d: &[u8]) {
        if let Ok(id) = I::parse(d) {
            let _ = id.user();
            let again = I::parse(id.bytes()).expect("re-serialized identifier parses");
            assert_eq!(
                again.bytes(),
                id.bytes(),
                "re-serialization is a fixed point"
            );
            assert_eq!(again.key_id(), id.key_id());
            assert_eq!(again.user(), id.user());
        }
    }
    fixed_point::<NmTokenIdentifier>(d);
    fixed_point::<ContainerTokenIdentifier>(d);
    fixed_point::<AmrmTokenIdentifier>(d);
    fixed_point::<DelegationTokenIdentifier>(d);

    let limits = Limits::DEFAULT;
    if let Ok(t) = Token::from_writable(d, &limits) {
        assert_eq!(Token::from_writable(&t.to_writable(), &limits).unwrap(), t);
        assert_eq!(
            Token::decode_from_url_string(&t.encode_to_url_string(), &limits).unwrap(),
            t
        );
    }
    if let Ok(t) = Token::decode_proto(d, &limits) {
        assert_eq!(Token::decode_proto(&t.encode_proto(), &limits).unwrap(), t);
    }

    let Ok(c) = Credentials::read(d) else {
        return false;
    };
    for format in [Format::Writable, Format::Protobuf] {
        let back = Credentials::read(&c.write(format)).expect("written Credentials read back");
        assert_eq!(back, c, "{format:?}");
    }
    true
}

// --- DIGEST-MD5 ---------------------------------------------------------------------------------

/// DIGEST-MD5 on arbitrary bytes. The directive parser is drained; the bytes go to a client as
/// its challenge (and, if accepted, as the `rspauth` after it), to a server as the response to
/// its challenge, and to every security layer's `unwrap`; none may panic, and a refused token
/// leaves the output untouched. Then the bytes are used as credentials and as a message: split
/// at the first zero byte into username and password (lossy UTF-8), a full client ↔ server
/// exchange must succeed at every QOP and the message must survive wrap/unwrap both ways.
/// Returns whether the bytes parse as a directive list without error.
pub fn digest_directives(data: &[u8]) -> bool {
    use hadoop_wire::sasl::digest::{
        directives, DigestCipher, DigestClient, DigestClientConfig, DigestServer,
        DigestServerConfig, SessionKeys, MAX_RESPONSE_LENGTH,
    };
    use hadoop_wire::sasl::{ClientMechanism, Qop, SecurityLayer, ServerMechanism};

    let mut complete = true;
    for d in directives(data) {
        match d {
            Ok(d) => assert!(d.name.len() + d.value.len() <= data.len()),
            Err(_) => complete = false,
        }
    }

    let all = [Qop::AuthConf, Qop::AuthInt, Qop::Auth];
    let password = |pw: String| -> hadoop_wire::sasl::digest::PasswordCallback {
        Box::new(move |_: &str, _: &str| Ok(pw.clone()))
    };
    for qops in [&[Qop::Auth][..], &all[..]] {
        let cfg = DigestClientConfig::ipc("user".into(), "pw".into(), qops.to_vec());
        let mut c = DigestClient::with_cnonce(cfg, "cnonce").unwrap();
        if let Ok(r) = c.evaluate_challenge(data) {
            assert!(r.len() <= MAX_RESPONSE_LENGTH);
            assert!(directives(&r).all(|d| d.is_ok()));
            let _ = c.evaluate_challenge(data);
        }
        let cfg = DigestServerConfig::ipc(qops.to_vec());
        let mut s = DigestServer::with_nonce(cfg, "nonce", password("pw".into())).unwrap();
        s.evaluate_response(&[]).unwrap();
        if s.evaluate_response(data).is_ok() {
            assert!(s.is_complete());
        }
    }

    let mut layers = vec![SessionKeys::new([7; 16], Qop::AuthInt, None).unwrap()];
    for c in DigestCipher::ALL {
        layers.push(SessionKeys::new([7; 16], Qop::AuthConf, Some(c)).unwrap());
    }
    for keys in &layers {
        let mut out = vec![0xAA];
        match keys.server_layer(65536).unwrap(data, &mut out) {
            Ok(()) => assert!(out.len() <= data.len() + 1),
            Err(_) => assert_eq!(out, [0xAA]),
        }
    }

    let (user, pass) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let (user, pass) = (
        String::from_utf8_lossy(user).into_owned(),
        String::from_utf8_lossy(pass).into_owned(),
    );
    for qop in all {
        let cfg = DigestServerConfig::ipc(all.to_vec());
        let mut s = DigestServer::with_nonce(cfg, "nonce", password(pass.clone())).unwrap();
        let cfg = DigestClientConfig::ipc(user.clone(), pass.clone(), vec![qop]);
        let mut c = DigestClient::with_cnonce(cfg, "cnonce").unwrap();
        let challenge = s.evaluate_response(&[]).unwrap();
        let response = match c.evaluate_challenge(&challenge) {
            Ok(r) => r,
            // Only a response over the cap may be refused.
            Err(e) => {
                assert!(e.to_string().contains("size too large"), "{e}");
                continue;
            }
        };
        let rspauth = s.evaluate_response(&response).unwrap();
        c.evaluate_challenge(&rspauth).unwrap();
        assert_eq!(s.authorization_id(), Some(user.as_str()));
        let (Some(mut cl), Some(mut sl)) = (c.take_layer(), s.take_layer()) else {
            assert_eq!(qop, Qop::Auth);
            continue;
        };
        for _ in 0..2 {
            let mut wrapped = Vec::new();
            cl.wrap(data, &mut wrapped).unwrap();
            let mut plain = Vec::new();
            sl.unwrap(&wrapped, &mut plain).unwrap();
            assert_eq!(plain, data);
            wrapped.clear();
            plain.clear();
            sl.wrap(data, &mut wrapped).unwrap();
            cl.unwrap(&wrapped, &mut plain).unwrap();
            assert_eq!(plain, data);
        }
    }
    complete
}

// --- SASL negotiation ----------------------------------------------------------------------

/// The SASL negotiation state machines on arbitrary messages. The bytes are a sequence of
/// messages, each `u8 length ‖ bytes` (a short final one takes the rest): each goes to a
/// server (TOKEN and SIMPLE enabled, at every protection level) as a client message, and to a
/// client holding a token as a server reply, until either side refuses or finishes. Nothing may
/// panic; the WRAP view must agree with prost on the state and token. Returns whether every
/// message decodes as an `RpcSaslProto`.
pub fn sasl_messages(data: &[u8]) -> bool {
    use std::sync::Arc;

    use hadoop_wire::entropy::SeededEntropy;
    use hadoop_wire::pb::hadoop::common::RpcSaslProto;
    use hadoop_wire::sasl::client::{ClientAuth, ClientNegotiation, ClientStep, TokenCredential};
    use hadoop_wire::sasl::message::{AuthMethod, SaslMessageView};
    use hadoop_wire::sasl::server::{ServerAuth, ServerNegotiation, TokenPassword, TokenSecrets};
    use hadoop_wire::sasl::{Qop, SaslError};

    struct Secrets;
    impl TokenSecrets for Secrets {
        fn retrieve(&self, identifier: &[u8]) -> Result<TokenPassword, SaslError> {
            if identifier.first() == Some(&b'x') {
                return Err(SaslError::InvalidToken("unknown".into()));
            }
            Ok(TokenPassword {
                password: identifier.to_vec(),
                user: "u".into(),
            })
        }
    }

    let mut msgs = Vec::new();
    let mut rest = data;
    while let Some((&len, tail)) = rest.split_first() {
        let n = (len as usize).min(tail.len());
        msgs.push(&tail[..n]);
        rest = &tail[n..];
    }
    let mut complete = true;
    for m in &msgs {
        let view = SaslMessageView::read(m);
        match RpcSaslProto::decode(*m) {
            Ok(p) => {
                let v = view.expect("prost decoded what the view refused");
                // prost gives an absent required state its default
                assert_eq!(v.state.unwrap_or(0), p.state);
                assert_eq!(v.token, p.token.as_deref());
            }
            Err(_) => complete = false,
        }
    }
    let mut rng = SeededEntropy(1);
    for qops in [
        vec![Qop::Auth],
        vec![Qop::AuthInt],
        vec![Qop::AuthConf, Qop::Auth],
    ] {
        let auth = Arc::new(
            ServerAuth::new(AuthMethod::Simple, Some(Arc::new(Secrets)), qops.clone()).unwrap(),
        );
        let mut server = ServerNegotiation::new(auth);
        for m in &msgs {
            if server.on_message(m, &mut rng).is_err() || server.is_complete() {
                break;
            }
        }
        let token = TokenCredential {
            identifier: b"id".to_vec(),
            password: b"id".to_vec(),
        };
        let mut client = ClientNegotiation::new(ClientAuth::token(token, qops));
        for m in &msgs {
            match client.on_reply(-33, m, &mut rng) {
                Ok(ClientStep::Send(_)) => {}
                Ok(_) | Err(_) => break,
            }
        }
    }
    complete
}
