//! Views of the IPC v9 headers: [`RpcRequestHeaderView`], [`RpcResponseHeaderView`] and
//! [`RequestHeaderView`] (ProtobufRpcEngine2).
//!
//! The trap these encode: `callId` is `sint32` (zigzag) in requests and `uint32` in
//! responses, so −3 is the single byte `05` in a request and −1 is `ff ff ff ff 0f` in a
//! response. `rpcOp` must be present although its value is 0: use
//! [`RpcRequestHeaderView::rpc_op_raw`] to tell absent from 0.

use super::schema::Schema;
use super::{last_known_enum, last_len, last_varint, message_view, required, utf8};
use crate::pb::hadoop::common::rpc_request_header_proto::OperationProto;
use crate::pb::hadoop::common::rpc_response_header_proto::{RpcErrorCodeProto, RpcStatusProto};
use crate::pb::hadoop::common::RpcKindProto;
use crate::pb::schema::hadoop::common as s;
use crate::reader::{exact, fail, zigzag32, DecodeError, Failure, Reader, WireType};

message_view! {
    /// `hadoop.common.RpcRequestHeaderProto`: the first delimited part of a request frame.
    RpcRequestHeaderView => s::RpcRequestHeaderProto
}

const REQ: &Schema = &s::RpcRequestHeaderProto;

impl<'a> RpcRequestHeaderView<'a> {
    /// Field 1 `rpcKind` as on the wire (last occurrence).
    #[inline]
    pub fn rpc_kind_raw(&self) -> Result<Option<i32>, DecodeError> {
        Ok(last_varint(self.bytes, REQ, 1)?.map(|v| v as i32))
    }
    /// Field 1 `rpcKind`, last known value.
    #[inline]
    pub fn rpc_kind(&self) -> Result<Option<RpcKindProto>, DecodeError> {
        let v = last_known_enum(self.bytes, REQ, 1, |v| RpcKindProto::try_from(v).is_ok())?;
        Ok(v.and_then(|v| RpcKindProto::try_from(v).ok()))
    }
    /// Field 2 `rpcOp` as on the wire: `None` when absent (servers reject that), `Some(0)`
    /// for RPC_FINAL_PACKET.
    #[inline]
    pub fn rpc_op_raw(&self) -> Result<Option<i32>, DecodeError> {
        Ok(last_varint(self.bytes, REQ, 2)?.map(|v| v as i32))
    }
    /// Field 2 `rpcOp`, last known value.
    #[inline]
    pub fn rpc_op(&self) -> Result<Option<OperationProto>, DecodeError> {
        let v = last_known_enum(self.bytes, REQ, 2, |v| OperationProto::try_from(v).is_ok())?;
        Ok(v.and_then(|v| OperationProto::try_from(v).ok()))
    }
    /// Field 3 `required sint32 callId` (zigzag: −3 is `05`).
    #[inline]
    pub fn call_id(&self) -> Result<i32, DecodeError> {
        let v = required(last_varint(self.bytes, REQ, 3)?, REQ, 3)?;
        Ok(zigzag32(v as u32))
    }
    /// Field 4 `required bytes clientId` (16-byte UUID from Java clients).
    #[inline]
    pub fn client_id(&self) -> Result<&'a [u8], DecodeError> {
        required(last_len(self.bytes, REQ, 4)?, REQ, 4)
    }
    /// Field 5 `sint32 retryCount [default = -1]`.
    #[inline]
    pub fn retry_count(&self) -> Result<i32, DecodeError> {
        Ok(self.retry_count_opt()?.unwrap_or(-1))
    }
    /// Field 5 with presence.
    #[inline]
    pub fn retry_count_opt(&self) -> Result<Option<i32>, DecodeError> {
        Ok(last_varint(self.bytes, REQ, 5)?.map(|v| zigzag32(v as u32)))
    }
    /// Field 6 `RPCTraceInfoProto traceInfo`, raw bytes.
    #[inline]
    pub fn trace_info(&self) -> Result<Option<&'a [u8]>, DecodeError> {
        last_len(self.bytes, REQ, 6)
    }
    /// Field 7 `RPCCallerContextProto callerContext`, raw bytes.
    #[inline]
    pub fn caller_context(&self) -> Result<Option<&'a [u8]>, DecodeError> {
        last_len(self.bytes, REQ, 7)
    }
    /// Field 8 `int64 stateId` (last seen NameNode transaction id).
    #[inline]
    pub fn state_id(&self) -> Result<Option<i64>, DecodeError> {
        Ok(last_varint(self.bytes, REQ, 8)?.map(|v| v as i64))
    }
    /// Field 9 `bytes routerFederatedState` (opaque; echo it).
    #[inline]
    pub fn router_federated_state(&self) -> Result<Option<&'a [u8]>, DecodeError> {
        last_len(self.bytes, REQ, 9)
    }
}

message_view! {
    /// `hadoop.common.RpcResponseHeaderProto`: the first delimited part of a response frame.
    RpcResponseHeaderView => s::RpcResponseHeaderProto
}

const RESP: &Schema = &s::RpcResponseHeaderProto;

/// Every field of an `RpcResponseHeaderProto`, read in one pass by
/// [`RpcResponseHeaderView::summary`]. Scalars follow the view accessors (last occurrence
/// wins; typed enums take the last *known* value); strings and bytes are borrowed unchecked,
/// with [`exception_class_name`](Self::exception_class_name) and
/// [`error_msg`](Self::error_msg) checking UTF-8 as the view accessors do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RpcResponseHeaderSummary<'a> {
    /// Field 1 `required uint32 callId`.
    pub call_id: u32,
    /// Field 2 `status`, last value on the wire (known or not).
    pub status_raw: i32,
    /// Field 2, last known value (a header without one does not validate).
    pub status: RpcStatusProto,
    /// Field 3 `serverIpcVersionNum`.
    pub server_ipc_version_num: Option<u32>,
    /// Field 4 `exceptionClassName`, bytes not checked for UTF-8.
    pub exception_class_name_bytes: Option<&'a [u8]>,
    /// Field 5 `errorMsg`, bytes not checked for UTF-8.
    pub error_msg_bytes: Option<&'a [u8]>,
    /// Field 6 `errorDetail` as on the wire.
    pub error_detail_raw: Option<i32>,
    /// Field 6, last known value.
    pub error_detail: Option<RpcErrorCodeProto>,
    /// Field 7 `clientId`.
    pub client_id: Option<&'a [u8]>,
    /// Field 8 `sint32 retryCount` with presence (default −1).
    pub retry_count_opt: Option<i32>,
    /// Field 9 `int64 stateId`.
    pub state_id: Option<i64>,
    /// Field 10 `routerFederatedState`.
    pub router_federated_state: Option<&'a [u8]>,
}

impl<'a> RpcResponseHeaderSummary<'a> {
    /// Field 1 reinterpreted as the request's signed call id (`ff ff ff ff 0f` → −1).
    #[inline]
    pub fn call_id_i32(&self) -> i32 {
        self.call_id as i32
    }
    /// Field 4 `string exceptionClassName`, UTF-8 checked.
    #[inline]
    pub fn exception_class_name(&self) -> Result<Option<&'a str>, DecodeError> {
        self.exception_class_name_bytes
            .map(|b| utf8(b, RESP, 4))
            .transpose()
    }
    /// Field 5 `string errorMsg`, UTF-8 checked.
    #[inline]
    pub fn error_msg(&self) -> Result<Option<&'a str>, DecodeError> {
        self.error_msg_bytes.map(|b| utf8(b, RESP, 5)).transpose()
    }
    /// Field 8 `sint32 retryCount [default = -1]`.
    #[inline]
    pub fn retry_count(&self) -> i32 {
        self.retry_count_opt.unwrap_or(-1)
    }
}

impl<'a> RpcResponseHeaderView<'a> {
    /// Validates the header and reads every field in one pass: `Ok` exactly when
    /// [`validate`](Self::validate) is `Ok`, and otherwise the same error `validate` gives.
    /// About as costly as `validate` alone, where `validate` followed by the accessors
    /// scans the header once per field read. Allocation-free.
    #[inline]
    pub fn summary(&self) -> Result<RpcResponseHeaderSummary<'a>, DecodeError> {
        exact!(self.summary_g::<E>())
    }

    /// [`summary`](Self::summary) with a generic failure type. It performs the checks of
    /// `schema::validate_g` for this message in the same order (tags and values in wire
    /// order, wrong wire types of known fields, unknown fields skipped with depth 0, then
    /// the required fields by number), so that the precise run names the same error.
    #[inline(always)]
    fn summary_g<E: Failure>(&self) -> Result<RpcResponseHeaderSummary<'a>, E> {
        let mut call_id = None;
        let mut status_raw = 0i32;
        let mut status = None;
        let mut server_ipc_version_num = None;
        let mut exception_class_name_bytes = None;
        let mut error_msg_bytes = None;
        let mut error_detail_raw = None;
        let mut error_detail = None;
        let mut client_id = None;
        let mut retry_count_opt = None;
        let mut state_id = None;
        let mut router_federated_state = None;
        let mut r = Reader::new(self.bytes);
        while !r.is_empty() {
            // Fast path: whole one-byte tags of every declared field.
            let (n, wt) = match r.one_byte_tag() {
                Some(0x08) => {
                    call_id = Some(r.varint::<E>()? as u32);
                    continue;
                }
                Some(0x10) => {
                    let x = r.varint::<E>()? as i32;
                    status_raw = x;
                    if let Ok(e) = RpcStatusProto::try_from(x) {
                        status = Some(e);
                    }
                    continue;
                }
                Some(0x18) => {
                    server_ipc_version_num = Some(r.varint::<E>()? as u32);
                    continue;
                }
                Some(0x22) => {
                    exception_class_name_bytes = Some(r.len_delimited::<E>()?);
                    continue;
                }
                Some(0x2a) => {
                    error_msg_bytes = Some(r.len_delimited::<E>()?);
                    continue;
                }
                Some(0x30) => {
                    let x = r.varint::<E>()? as i32;
                    error_detail_raw = Some(x);
                    if let Ok(e) = RpcErrorCodeProto::try_from(x) {
                        error_detail = Some(e);
                    }
                    continue;
                }
                Some(0x3a) => {
                    client_id = Some(r.len_delimited::<E>()?);
                    continue;
                }
                Some(0x40) => {
                    retry_count_opt = Some(zigzag32(r.varint::<E>()? as u32));
                    continue;
                }
                Some(0x48) => {
                    state_id = Some(r.varint::<E>()? as i64);
                    continue;
                }
                Some(0x52) => {
                    router_federated_state = Some(r.len_delimited::<E>()?);
                    continue;
                }
                Some(b) => Reader::split_tag::<E>(b)?,
                None => r.tag::<E>()?,
            };
            // Declared fields with multi-byte (non-minimal) tags, wrong wire types, unknown
            // fields.
            match (n, wt) {
                (1, WireType::Varint) => call_id = Some(r.varint::<E>()? as u32),
                (2, WireType::Varint) => {
                    let x = r.varint::<E>()? as i32;
                    status_raw = x;
                    if let Ok(e) = RpcStatusProto::try_from(x) {
                        status = Some(e);
                    }
                }
                (3, WireType::Varint) => server_ipc_version_num = Some(r.varint::<E>()? as u32),
                (4, WireType::Len) => exception_class_name_bytes = Some(r.len_delimited::<E>()?),
                (5, WireType::Len) => error_msg_bytes = Some(r.len_delimited::<E>()?),
                (6, WireType::Varint) => {
                    let x = r.varint::<E>()? as i32;
                    error_detail_raw = Some(x);
                    if let Ok(e) = RpcErrorCodeProto::try_from(x) {
                        error_detail = Some(e);
                    }
                }
                (7, WireType::Len) => client_id = Some(r.len_delimited::<E>()?),
                (8, WireType::Varint) => retry_count_opt = Some(zigzag32(r.varint::<E>()? as u32)),
                (9, WireType::Varint) => state_id = Some(r.varint::<E>()? as i64),
                (10, WireType::Len) => router_federated_state = Some(r.len_delimited::<E>()?),
                (1..=10, other) => return fail(|| super::wrong_wire(RESP, n, other)),
                _ => r.skip_value::<E>(n, wt, 0)?,
            }
        }
        let Some(call_id) = call_id else {
            return fail(|| super::missing(RESP, 1));
        };
        let Some(status) = status else {
            return fail(|| super::missing(RESP, 2));
        };
        Ok(RpcResponseHeaderSummary {
            call_id,
            status_raw,
            status,
            server_ipc_version_num,
            exception_class_name_bytes,
            error_msg_bytes,
            error_detail_raw,
            error_detail,
            client_id,
            retry_count_opt,
            state_id,
            router_federated_state,
        })
    }

    /// Field 1 `required uint32 callId`.
    #[inline]
    pub fn call_id(&self) -> Result<u32, DecodeError> {
        Ok(required(last_varint(self.bytes, RESP, 1)?, RESP, 1)? as u32)
    }
    /// Field 1 reinterpreted as the request's signed call id (`ff ff ff ff 0f` → −1).
    #[inline]
    pub fn call_id_i32(&self) -> Result<i32, DecodeError> {
        Ok(self.call_id()? as i32)
    }
    /// Field 2 `required RpcStatusProto status`, last value on the wire.
    #[inline]
    pub fn status_raw(&self) -> Result<i32, DecodeError> {
        Ok(required(last_varint(self.bytes, RESP, 2)?, RESP, 2)? as i32)
    }
    /// Field 2, last known value; `MissingRequired` when no known value is present (Java
    /// rejects such a header).
    #[inline]
    pub fn status(&self) -> Result<RpcStatusProto, DecodeError> {
        let v = last_known_enum(self.bytes, RESP, 2, |v| RpcStatusProto::try_from(v).is_ok())?;
        let v = required(v, RESP, 2)?;
        RpcStatusProto::try_from(v).map_err(|_| super::missing(RESP, 2))
    }
    /// Field 3 `uint32 serverIpcVersionNum` (9).
    #[inline]
    pub fn server_ipc_version_num(&self) -> Result<Option<u32>, DecodeError> {
        Ok(last_varint(self.bytes, RESP, 3)?.map(|v| v as u32))
    }
    /// Field 4 `string exceptionClassName`.
    #[inline]
    pub fn exception_class_name(&self) -> Result<Option<&'a str>, DecodeError> {
        last_len(self.bytes, RESP, 4)?
            .map(|b| utf8(b, RESP, 4))
            .transpose()
    }
    /// Field 5 `string errorMsg`.
    #[inline]
    pub fn error_msg(&self) -> Result<Option<&'a str>, DecodeError> {
        last_len(self.bytes, RESP, 5)?
            .map(|b| utf8(b, RESP, 5))
            .transpose()
    }
    /// Field 6 `RpcErrorCodeProto errorDetail` as on the wire.
    #[inline]
    pub fn error_detail_raw(&self) -> Result<Option<i32>, DecodeError> {
        Ok(last_varint(self.bytes, RESP, 6)?.map(|v| v as i32))
    }
    /// Field 6, last known value.
    #[inline]
    pub fn error_detail(&self) -> Result<Option<RpcErrorCodeProto>, DecodeError> {
        let v = last_known_enum(self.bytes, RESP, 6, |v| {
            RpcErrorCodeProto::try_from(v).is_ok()
        })?;
        Ok(v.and_then(|v| RpcErrorCodeProto::try_from(v).ok()))
    }
    /// Field 7 `bytes clientId`.
    #[inline]
    pub fn client_id(&self) -> Result<Option<&'a [u8]>, DecodeError> {
        last_len(self.bytes, RESP, 7)
    }
    /// Field 8 `sint32 retryCount [default = -1]`.
    #[inline]
    pub fn retry_count(&self) -> Result<i32, DecodeError> {
        Ok(self.retry_count_opt()?.unwrap_or(-1))
    }
    /// Field 8 with presence.
    #[inline]
    pub fn retry_count_opt(&self) -> Result<Option<i32>, DecodeError> {
        Ok(last_varint(self.bytes, RESP, 8)?.map(|v| zigzag32(v as u32)))
    }
    /// Field 9 `int64 stateId`.
    #[inline]
    pub fn state_id(&self) -> Result<Option<i64>, DecodeError> {
        Ok(last_varint(self.bytes, RESP, 9)?.map(|v| v as i64))
    }
    /// Field 10 `bytes routerFederatedState`.
    #[inline]
    pub fn router_federated_state(&self) -> Result<Option<&'a [u8]>, DecodeError> {
        last_len(self.bytes, RESP, 10)
    }
}

message_view! {
    /// `hadoop.common.RequestHeaderProto`: method, protocol and version of a call.
    RequestHeaderView => s::RequestHeaderProto
}

const RH: &Schema = &s::RequestHeaderProto;

impl<'a> RequestHeaderView<'a> {
    /// Field 1 `required string methodName`, e.g. `nodeHeartbeat`.
    #[inline]
    pub fn method_name(&self) -> Result<&'a str, DecodeError> {
        utf8(self.method_name_bytes()?, RH, 1)
    }
    /// Field 1 unchecked (for dispatch by byte comparison).
    #[inline]
    pub fn method_name_bytes(&self) -> Result<&'a [u8], DecodeError> {
        required(last_len(self.bytes, RH, 1)?, RH, 1)
    }
    /// Field 2 `required string declaringClassProtocolName`.
    #[inline]
    pub fn declaring_class_protocol_name(&self) -> Result<&'a str, DecodeError> {
        utf8(self.declaring_class_protocol_name_bytes()?, RH, 2)
    }
    /// Field 2 unchecked.
    #[inline]
    pub fn declaring_class_protocol_name_bytes(&self) -> Result<&'a [u8], DecodeError> {
        required(last_len(self.bytes, RH, 2)?, RH, 2)
    }
    /// Field 3 `required uint64 clientProtocolVersion`.
    #[inline]
    pub fn client_protocol_version(&self) -> Result<u64, DecodeError> {
        required(last_varint(self.bytes, RH, 3)?, RH, 3)
    }
}
