//! Hadoop IPC (RPC v9): the protocol's constants, its exception class names, and the sans-IO
//! client connection state machine ([`client`]).
//!
//! Every RPC-level number or name the workspace uses is defined here once; [`crate::frame`] and
//! [`crate::encode`] re-export the ones they always exported, so their old paths keep working.

pub mod client;

/// `hrpc`, `RpcConstants.HEADER`: the first four bytes of every connection.
pub const MAGIC: [u8; 4] = *b"hrpc";
/// IPC version spoken here, `RpcConstants.CURRENT_VERSION`.
pub const IPC_VERSION: u8 = 9;
/// Auth protocol byte of the preamble for SIMPLE / NONE (`Server.AuthProtocol.NONE`).
pub const AUTH_NONE: u8 = 0x00;
/// Auth protocol byte of the preamble for SASL (`Server.AuthProtocol.SASL`, -33 as a Java byte).
pub const AUTH_SASL: u8 = 0xDF;

/// Call id of the connection-context frame (`RpcConstants.CONNECTION_CONTEXT_CALL_ID`).
pub const CONNECTION_CONTEXT_CALL_ID: i32 = -3;
/// Call id of the client's ping (`RpcConstants.PING_CALL_ID`).
pub const PING_CALL_ID: i32 = -4;
/// Call id the server uses for auth/version failures (`Server.AUTHORIZATION_FAILED_CALL_ID`).
pub const AUTHORIZATION_FAILED_CALL_ID: i32 = -1;
/// Call id of the SASL exchange (`AuthProtocol.SASL.callId`; not supported here yet).
pub const SASL_CALL_ID: i32 = -33;

/// `RpcKindProto.RPC_PROTOCOL_BUFFER`.
pub const RPC_KIND_PROTOCOL_BUFFER: i32 = 2;
/// `OperationProto.RPC_FINAL_PACKET`.
pub const RPC_OP_FINAL_PACKET: i32 = 0;
/// `RpcConstants.INVALID_RETRY_COUNT`, sent with the context and ping frames.
pub const INVALID_RETRY_COUNT: i32 = -1;

/// Exception class names that go on the wire in `RpcResponseHeaderProto.exceptionClassName`.
pub mod exception {
    /// What Hadoop names in its FATAL_VERSION_MISMATCH and ERROR_RPC_VERSION_MISMATCH responses.
    pub const VERSION_MISMATCH: &str = "org.apache.hadoop.ipc.RPC$VersionMismatch";
    /// What Java reports for fatal errors built from a message.
    pub const FATAL: &str = "org.apache.hadoop.ipc.Server$FatalRpcServerException";
    /// Unknown protocol name.
    pub const NO_SUCH_PROTOCOL: &str = "org.apache.hadoop.ipc.RpcNoSuchProtocolException";
    /// Unknown method of a known protocol.
    pub const NO_SUCH_METHOD: &str = "org.apache.hadoop.ipc.RpcNoSuchMethodException";
    /// A server-side failure outside the handler's own exceptions (a handler that panicked).
    pub const SERVER: &str = "org.apache.hadoop.ipc.RpcServerException";
    /// Java's exception for an undecodable request message.
    pub const INVALID_PROTOBUF: &str = "com.google.protobuf.InvalidProtocolBufferException";
}
