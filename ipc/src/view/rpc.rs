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
use crate::reader::{zigzag32, DecodeError};

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

impl<'a> RpcResponseHeaderView<'a> {
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
