//! HDFS protocol names and numbers: ClientNamenodeProtocol and DataTransferProtocol.
//!
//! Each lives here once; `hdfs-io` and the tests name them from here.

/// `declaringClassProtocolName` of every ClientNamenodeProtocol call, and the protocol of its
/// connection context (`ClientProtocol.class.getCanonicalName()`; the NameNode's observer-read
/// check `isCoordinatedCall` compares against exactly this string).
pub const CLIENT_PROTOCOL: &str = "org.apache.hadoop.hdfs.protocol.ClientProtocol";
/// `clientProtocolVersion` of ClientNamenodeProtocol calls (`ClientNamenodeProtocolPB`'s
/// `@ProtocolInfo(protocolVersion = 1)`).
pub const CLIENT_PROTOCOL_VERSION: u64 = 1;

/// `DataTransferProtocol.DATA_TRANSFER_VERSION`: the u16 that starts every DataTransfer request.
pub const DATA_TRANSFER_VERSION: u16 = 28;
/// `Op.READ_BLOCK`.
pub const OP_READ_BLOCK: u8 = 81;

pub mod transfer_sasl;
