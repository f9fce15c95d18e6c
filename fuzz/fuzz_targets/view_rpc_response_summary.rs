//! Fuzzes `RpcResponseHeaderView::summary` (the client's one-pass header read): on every
//! input it gives exactly `validate()`'s result (the same typed error), on valid input every
//! field equals the lazy accessor, and when prost also decodes the bytes, prost's value.
#![no_main]
use hadoop_wire::pb::hadoop::common::rpc_response_header_proto::RpcStatusProto;
use hadoop_wire::pb::hadoop::common::RpcResponseHeaderProto;
use hadoop_wire::view::rpc::RpcResponseHeaderView;
use prost::Message;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let v = RpcResponseHeaderView::new(data);
    let s = match (v.summary(), v.validate()) {
        (Ok(s), Ok(())) => s,
        (Err(e), Err(want)) => {
            assert_eq!(e, want, "summary and validate name different errors");
            return;
        }
        (s, want) => panic!("summary {s:?} but validate {want:?}"),
    };
    assert_eq!(Ok(s.call_id), v.call_id());
    assert_eq!(Ok(s.status_raw), v.status_raw());
    assert_eq!(Ok(s.status), v.status());
    assert_eq!(Ok(s.server_ipc_version_num), v.server_ipc_version_num());
    assert_eq!(s.exception_class_name(), v.exception_class_name());
    assert_eq!(s.error_msg(), v.error_msg());
    assert_eq!(Ok(s.error_detail_raw), v.error_detail_raw());
    assert_eq!(Ok(s.error_detail), v.error_detail());
    assert_eq!(Ok(s.client_id), v.client_id());
    assert_eq!(Ok(s.retry_count_opt), v.retry_count_opt());
    assert_eq!(Ok(s.state_id), v.state_id());
    assert_eq!(Ok(s.router_federated_state), v.router_federated_state());
    // prost refuses invalid UTF-8 in any occurrence of a string; otherwise it must agree.
    let Ok(p) = RpcResponseHeaderProto::decode(data) else {
        return;
    };
    assert_eq!(s.call_id, p.call_id);
    assert_eq!(s.status_raw, p.status);
    if let Ok(st) = RpcStatusProto::try_from(p.status) {
        assert_eq!(s.status, st);
    }
    assert_eq!(s.server_ipc_version_num, p.server_ipc_version_num);
    assert_eq!(
        s.exception_class_name(),
        Ok(p.exception_class_name.as_deref())
    );
    assert_eq!(s.error_msg(), Ok(p.error_msg.as_deref()));
    assert_eq!(s.error_detail_raw, p.error_detail);
    assert_eq!(s.client_id, p.client_id.as_deref());
    assert_eq!(s.retry_count_opt, p.retry_count);
    assert_eq!(s.state_id, p.state_id);
    assert_eq!(
        s.router_federated_state,
        p.router_federated_state.as_deref()
    );
});
