//! The crate's error type. Every variant names what it is about (path, block, DataNode,
//! offset) and carries the server's message when there is one; none carries peer bytes
//! beyond such messages.

use std::fmt;

/// A block, as Java prints it: `BP-…:blk_<id>_<generation stamp>`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BlockName {
    pub pool_id: String,
    pub block_id: u64,
    pub generation_stamp: u64,
}

impl fmt::Display for BlockName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:blk_{}_{}",
            self.pool_id, self.block_id as i64, self.generation_stamp
        )
    }
}

/// Hadoop exception classes the client acts on (from `exceptionClassName` in the RPC
/// response header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteKind {
    /// `java.io.FileNotFoundException`.
    FileNotFound,
    /// `org.apache.hadoop.security.AccessControlException` (and its `…fs.permission` twin).
    AccessControl,
    /// `org.apache.hadoop.ipc.StandbyException`: ask another NameNode.
    Standby,
    /// `org.apache.hadoop.ipc.RetriableException`: ask the same NameNode again later.
    Retriable,
    /// `org.apache.hadoop.ipc.ObserverRetryOnActiveException`: the observer wants this call on
    /// the active.
    ObserverRetryOnActive,
    /// `org.apache.hadoop.hdfs.server.namenode.SafeModeException`.
    SafeMode,
    /// `org.apache.hadoop.fs.UnresolvedLinkException` / `…UnresolvedPathException`.
    UnresolvedLink,
    /// `org.apache.hadoop.fs.ParentNotDirectoryException`.
    ParentNotDirectory,
    /// `org.apache.hadoop.ipc.RpcNoSuchMethodException` / `RpcNoSuchProtocolException`.
    NoSuchMethod,
    /// `org.apache.hadoop.ipc.RpcServerException` and other server-side failures.
    Server,
    /// `org.apache.hadoop.security.token.SecretManager$InvalidToken`: the token is unknown to
    /// the server (cancelled, expired, never issued) or its password is wrong.
    InvalidToken,
    /// Any other class.
    Other,
}

impl RemoteKind {
    /// Maps a Java class name (short or fully qualified).
    pub fn from_class(class: &str) -> RemoteKind {
        let short = class.rsplit('.').next().unwrap_or(class);
        match short {
            "FileNotFoundException" => RemoteKind::FileNotFound,
            "AccessControlException" => RemoteKind::AccessControl,
            "StandbyException" => RemoteKind::Standby,
            "RetriableException" => RemoteKind::Retriable,
            "ObserverRetryOnActiveException" => RemoteKind::ObserverRetryOnActive,
            "SafeModeException" => RemoteKind::SafeMode,
            "UnresolvedLinkException" | "UnresolvedPathException" => RemoteKind::UnresolvedLink,
            "ParentNotDirectoryException" => RemoteKind::ParentNotDirectory,
            "RpcNoSuchMethodException" | "RpcNoSuchProtocolException" => RemoteKind::NoSuchMethod,
            "RpcServerException" => RemoteKind::Server,
            "SecretManager$InvalidToken" | "InvalidToken" => RemoteKind::InvalidToken,
            _ => RemoteKind::Other,
        }
    }
}

/// An exception the NameNode returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteException {
    pub kind: RemoteKind,
    /// `exceptionClassName` as sent.
    pub class: String,
    /// `errorMsg` as sent (Java puts the exception message here; for server errors, a stack
    /// trace).
    pub message: String,
    /// `errorDetail` (RpcErrorCodeProto), if sent.
    pub code: Option<i32>,
    /// FATAL: the server closes the connection.
    pub fatal: bool,
}

impl fmt::Display for RemoteException {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let short = self.class.rsplit('.').next().unwrap_or(&self.class);
        // first line only: errorMsg of server errors is a stack trace
        let msg = self.message.lines().next().unwrap_or("");
        write!(f, "{short}: {msg}")
    }
}

/// Everything that can go wrong in this crate.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A protobuf message from a peer could not be decoded.
    #[error("malformed {what}: {source}")]
    Decode {
        what: &'static str,
        #[source]
        source: hadoop_wire::reader::DecodeError,
    },
    /// A message decoded but breaks a rule of its protocol.
    #[error("malformed {what}: {reason}")]
    Malformed {
        what: &'static str,
        reason: &'static str,
    },
    /// IPC framing or encoding.
    #[error(transparent)]
    Ipc(#[from] hadoop_wire::Error),
    /// The NameNode answered with an exception.
    #[error("{0}")]
    Remote(RemoteException),
    /// No such file or directory (getFileInfo answered without a status).
    #[error("{path}: no such file or directory")]
    FileNotFound { path: String },
    /// The path is a directory (or symlink) where a file is needed.
    #[error("{path}: not a file")]
    NotAFile { path: String },
    /// A file feature this client does not implement; `feature` names it.
    #[error("{path}: {feature} is not supported by this client")]
    Unsupported { path: String, feature: &'static str },
    /// The DataNode refused the read (`BlockOpResponseProto.status` not SUCCESS).
    #[error("DataNode {datanode} refused to read {block}: {status} {message}")]
    DataNodeRefused {
        block: BlockName,
        datanode: String,
        status: &'static str,
        message: String,
    },
    /// A chunk's checksum does not match: the replica (or the transfer) is corrupt. No byte of
    /// the packet holding it was returned.
    #[error("checksum error in {block} at offset {offset} from DataNode {datanode}: expected {expected:#010x}, computed {computed:#010x}")]
    Checksum {
        block: BlockName,
        offset: u64,
        datanode: String,
        expected: u32,
        computed: u32,
    },
    /// The DataNode broke the DataTransfer protocol (packet order, offsets, lengths).
    #[error("DataTransfer protocol error reading {block} from {datanode}: {reason}")]
    Protocol {
        block: BlockName,
        datanode: String,
        reason: String,
    },
    /// The connection ended before the block was read.
    #[error(
        "DataNode {datanode} closed the connection after {received} of {expected} bytes of {block}"
    )]
    Truncated {
        block: BlockName,
        datanode: String,
        received: u64,
        expected: u64,
    },
    /// Every replica of a block failed `dfs.client.max.block.acquire.failures` times. `tried`
    /// says why each attempt failed; `checksum_failures` counts the attempts that failed on a
    /// checksum (a corrupt replica, reported to the NameNode when another served the block).
    #[error(
        "could not obtain {block} of {path} at offset {offset}: every replica failed ({tried})"
    )]
    BlockMissing {
        path: String,
        block: BlockName,
        offset: u64,
        tried: String,
        checksum_failures: u32,
    },
    /// A NameNode could not be reached: its address did not resolve, the connection failed or
    /// broke. `target` names it. (DataNode connection failures are per replica: they end up in
    /// [`Error::BlockMissing`] when no other replica serves the block.)
    #[error("{target}: {reason}")]
    Connection { target: String, reason: String },
    /// The caller's sink refused the data read (a local write failed). Not retried on another
    /// replica: the data was fine.
    #[error("writing the data read: {source}")]
    Sink {
        #[source]
        source: std::io::Error,
    },
    /// No NameNode could serve the call.
    #[error("no NameNode answered {method}: {reason}")]
    NoNameNode {
        method: &'static str,
        reason: String,
    },
    /// The DataTransfer SASL handshake with a DataNode failed (encrypted data transfer or
    /// `dfs.data.transfer.protection`): the DataNode's refusal keeps its kind
    /// (`ERROR_UNKNOWN_KEY`, an invalid block token), see [`Error::is_access_token_error`].
    #[error("SASL data transfer handshake with DataNode {datanode} for {block}: {source}")]
    DataTransferSasl {
        block: BlockName,
        datanode: String,
        #[source]
        source: hadoop_wire::hdfs::transfer_sasl::TransferSaslError,
    },
    /// The SASL stream layer (DIGEST-MD5 `auth-int` / `auth-conf` without AES) refused the
    /// DataNode's bytes: a frame over the cap, a bad MAC or padding, an out-of-order sequence
    /// number. The connection is closed.
    #[error("SASL stream layer with DataNode {datanode} for {block}: {source}")]
    DataTransferLayer {
        block: BlockName,
        datanode: String,
        #[source]
        source: hadoop_wire::hdfs::transfer_sasl::SaslStreamError,
    },
    /// Configuration: missing or bad key.
    #[error("configuration: {0}")]
    Config(String),
    /// The client's own Kerberos login failed (a keytab without the principal, an unreadable
    /// keytab, a KDC that refuses); `reason` names the principal and the keytab.
    #[error("{reason}")]
    Login { reason: String },
    /// A Kerberized NameNode was called without a delegation token for it (`credentials` says
    /// which credentials were looked in) and the Kerberos login that was tried instead failed
    /// (`reason`: no ticket, an expired one, ...). Not retried.
    #[error("{namenode}: no HDFS_DELEGATION_TOKEN for the NameNode {addr} in {credentials}, and the Kerberos login failed: {reason}")]
    NoToken {
        namenode: String,
        addr: std::net::SocketAddr,
        credentials: String,
        reason: String,
    },
    /// A NameNode refused the delegation token this client authenticated with (Java's
    /// `InvalidToken`: cancelled, expired, or not issued by it). `token` describes it as Java's
    /// `formatTokenId` does; [`Error::remote_kind`] is [`RemoteKind::InvalidToken`].
    #[error("{namenode} refused the delegation token {token} (cancelled, expired or never issued by it): {remote}")]
    TokenRefused {
        namenode: String,
        token: String,
        remote: RemoteException,
    },
    /// A token or a Credentials file could not be read (`context` names it).
    #[error("{context}: {source}")]
    Token {
        context: String,
        #[source]
        source: hadoop_wire::token::TokenError,
    },
    /// I/O with a peer.
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// The DataNode refused the block access token (expired or invalid): `ERROR_ACCESS_TOKEN`
    /// in its read response, or `accessTokenError` in the SASL handshake. Java's
    /// `DFSInputStream` then fetches new block locations (with new tokens) once.
    pub fn is_access_token_error(&self) -> bool {
        use hadoop_wire::hdfs::transfer_sasl::TransferSaslError;
        match self {
            Error::DataNodeRefused { status, .. } => *status == "ERROR_ACCESS_TOKEN",
            Error::DataTransferSasl { source, .. } => {
                matches!(source, TransferSaslError::AccessToken(_))
            }
            _ => false,
        }
    }

    /// The DataNode does not know the data encryption key (`ERROR_UNKNOWN_KEY`): Java's
    /// client fetches a new key from the NameNode and retries.
    pub fn is_unknown_encryption_key(&self) -> bool {
        matches!(
            self,
            Error::DataTransferSasl {
                source: hadoop_wire::hdfs::transfer_sasl::TransferSaslError::UnknownKey(_),
                ..
            }
        )
    }

    /// The NameNode exception kind, if this is one.
    pub fn remote_kind(&self) -> Option<RemoteKind> {
        match self {
            Error::Remote(r) | Error::TokenRefused { remote: r, .. } => Some(r.kind),
            _ => None,
        }
    }

    /// A missing path, whether found by getFileInfo or thrown by the NameNode.
    pub fn is_file_not_found(&self) -> bool {
        matches!(self, Error::FileNotFound { .. })
            || self.remote_kind() == Some(RemoteKind::FileNotFound)
    }

    #[allow(dead_code)] // used by the I/O modules
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io {
            context: context.into(),
            source,
        }
    }
}

impl From<conf::Error> for Error {
    fn from(e: conf::Error) -> Self {
        Error::Config(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_names() {
        assert_eq!(
            RemoteKind::from_class("java.io.FileNotFoundException"),
            RemoteKind::FileNotFound
        );
        assert_eq!(
            RemoteKind::from_class("org.apache.hadoop.security.AccessControlException"),
            RemoteKind::AccessControl
        );
        assert_eq!(
            RemoteKind::from_class("org.apache.hadoop.ipc.StandbyException"),
            RemoteKind::Standby
        );
        assert_eq!(
            RemoteKind::from_class("org.apache.hadoop.ipc.RetriableException"),
            RemoteKind::Retriable
        );
        assert_eq!(RemoteKind::from_class("x.y.Weird"), RemoteKind::Other);
        assert_eq!(
            RemoteKind::from_class("org.apache.hadoop.security.token.SecretManager$InvalidToken"),
            RemoteKind::InvalidToken
        );
        let r = RemoteException {
            kind: RemoteKind::FileNotFound,
            class: "java.io.FileNotFoundException".into(),
            message: "File does not exist: /nope\n\tat org...".into(),
            code: Some(1),
            fatal: false,
        };
        assert_eq!(
            r.to_string(),
            "FileNotFoundException: File does not exist: /nope"
        );
        assert!(Error::Remote(r).is_file_not_found());
        let b = BlockName {
            pool_id: "BP-1".into(),
            block_id: 1073741825,
            generation_stamp: 1001,
        };
        assert_eq!(b.to_string(), "BP-1:blk_1073741825_1001");
    }
}
