//! Token identifiers: what a token's `identifier` bytes say, per kind.
//!
//! The YARN ones are protobuf messages (`yarn_security_token.proto`); Java's `write` is
//! `proto.toByteArray()` and its `readFields` is `parseFrom`, so `getBytes()` — the bytes the
//! secret managers compute the password over — is the parsed message *re-serialized*. Each
//! identifier here therefore keeps two byte strings:
//!
//! - [`TokenIdentifier::raw`]: the bytes as received (or as built);
//! - [`TokenIdentifier::bytes`]: Java's re-serialization of what it parsed (fields in number
//!   order, each once, unknown fields last; see `canonical`). For anything prost or a Java RM
//!   writes, the two are equal; for other input they may differ, and the password is checked
//!   over `bytes()` as Java checks it.
//!
//! The typed accessors give what Java's getters give for the parsed message (proto defaults
//! for absent fields; unknown enum values invisible). `user()` is Java's `getUser()` name:
//! the application attempt (`appattempt_…`) for NM and AMRM tokens, the container id
//! (`container_…`) for container tokens, the owner for delegation tokens; `None` where Java
//! has no user or would throw.
//!
//! [`DelegationTokenIdentifier`] is the Writable layout of `AbstractDelegationTokenIdentifier`
//! (HDFS delegation tokens); Java re-serializes it with `writeImpl`, so `bytes()` is that
//! (minimal vlongs; trailing bytes dropped).

use std::fmt;

use super::canonical;
use super::delegation::{short_name, DelegationFields, DelegationIdentifier};
use super::writable::{self, WritableReader};
use super::{TokenError, TokenIdentifier};
use crate::pb::hadoop::yarn::{
    AmrmTokenIdentifierProto, ApplicationAttemptIdProto, ApplicationIdProto, ContainerIdProto,
    ContainerTokenIdentifierProto, ContainerTypeProto, ExecutionTypeProto,
    LogAggregationContextProto, NmTokenIdentifierProto, NodeIdProto, ResourceProto,
};
use crate::pb::schema::hadoop::yarn as schema;
use crate::view::schema::Schema;
use crate::yarn::ids::{AppId, AttemptId, ContainerId};

/// Largest identifier accepted, in bytes (Java's `Text.DEFAULT_MAX_LEN`).
pub const MAX_IDENTIFIER_BYTES: usize = 1 << 20;

/// A NodeManager's id (`NodeIdProto`): host and port, printed `host:port` as Java's
/// `NodeId.toString()`; the NM compares NMTokens and container tokens against exactly this.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId {
    pub host: String,
    pub port: i32,
}

impl NodeId {
    pub fn new(host: impl Into<String>, port: i32) -> NodeId {
        NodeId {
            host: host.into(),
            port,
        }
    }

    /// From the prost form; absent parts take the proto defaults (`""`, 0), as Java's getters.
    pub fn from_proto(p: &NodeIdProto) -> NodeId {
        NodeId::new(p.host().to_string(), p.port())
    }

    /// The prost form, as `NodeIdPBImpl` sets it (both fields).
    pub fn to_proto(&self) -> NodeIdProto {
        NodeIdProto {
            host: Some(self.host.clone()),
            port: Some(self.port),
        }
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

/// Java's `ApplicationAttemptIdPBImpl` over a proto: `None` without an application id (its
/// `toString` would throw).
pub fn attempt_from_proto(p: &ApplicationAttemptIdProto) -> Option<AttemptId> {
    let app = p.application_id.as_ref()?;
    Some(AttemptId {
        app: AppId::new(app.cluster_timestamp(), app.id()),
        attempt: p.attempt_id(),
    })
}

/// The proto Java's `ApplicationAttemptIdPBImpl` builds (both parts of the application id and
/// the attempt number set).
pub fn attempt_to_proto(a: &AttemptId) -> ApplicationAttemptIdProto {
    ApplicationAttemptIdProto {
        application_id: Some(ApplicationIdProto {
            id: Some(a.app.id),
            cluster_timestamp: Some(a.app.cluster_timestamp),
        }),
        attempt_id: Some(a.attempt),
    }
}

/// Java's `ContainerIdPBImpl` over a proto: the attempt (field 2, with its application id) and
/// the id; the deprecated `app_id` (field 1) is not used. `None` without an attempt.
pub fn container_from_proto(p: &ContainerIdProto) -> Option<ContainerId> {
    let attempt = attempt_from_proto(p.app_attempt_id.as_ref()?)?;
    Some(ContainerId::new(attempt.app, attempt.attempt, p.id()))
}

fn check_size(raw: &[u8], what: &'static str) -> Result<(), TokenError> {
    if raw.len() > MAX_IDENTIFIER_BYTES {
        return Err(TokenError::TooLong {
            what,
            len: raw.len() as u64,
            max: MAX_IDENTIFIER_BYTES,
        });
    }
    Ok(())
}

/// Parses a protobuf identifier as Java does: its re-serialization (unknown fields kept) and
/// the typed message (from the re-serialization without unknown fields).
fn parse_proto<P: prost::Message + Default>(
    schema: &'static Schema,
    raw: &[u8],
    what: &'static str,
) -> Result<(Vec<u8>, P), TokenError> {
    check_size(raw, what)?;
    let bytes = canonical::reserialize(schema, raw, true).map_err(TokenError::proto(what))?;
    let known = canonical::reserialize(schema, raw, false).map_err(TokenError::proto(what))?;
    let proto = P::decode(known.as_slice()).map_err(TokenError::prost(what))?;
    Ok((bytes, proto))
}

/// What Java's `toByteArray()` gives for a message built with these values.
fn encode_proto<P: prost::Message>(schema: &'static Schema, p: &P, what: &'static str) -> Vec<u8> {
    let b = p.encode_to_vec();
    // prost writes fields in declaration (= number) order; the pass only moves an enum value
    // Java could not have set (unknown to the schema) behind the known fields.
    canonical::reserialize(schema, &b, true).unwrap_or_else(|e| {
        debug_assert!(false, "{what}: prost output did not re-parse: {e}");
        b
    })
}

// ---- NMToken --------------------------------------------------------------------------------

/// `NMTokenIdentifier` (kind `NMToken`): an application attempt's grant to talk to one NM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NmTokenIdentifier {
    raw: Vec<u8>,
    bytes: Vec<u8>,
    proto: NmTokenIdentifierProto,
    legacy: bool,
}

impl NmTokenIdentifier {
    /// As Java's constructor builds it: the attempt and node when given, the submitter and the
    /// key id always.
    pub fn new(
        attempt: Option<AttemptId>,
        node: Option<&NodeId>,
        app_submitter: &str,
        key_id: i32,
    ) -> NmTokenIdentifier {
        NmTokenIdentifier::from_proto(NmTokenIdentifierProto {
            app_attempt_id: attempt.as_ref().map(attempt_to_proto),
            node_id: node.map(NodeId::to_proto),
            app_submitter: Some(app_submitter.to_string()),
            key_id: Some(key_id),
        })
    }

    /// An identifier with exactly these fields.
    pub fn from_proto(proto: NmTokenIdentifierProto) -> NmTokenIdentifier {
        let bytes = encode_proto(&schema::NMTokenIdentifierProto, &proto, "NMTokenIdentifier");
        NmTokenIdentifier {
            raw: bytes.clone(),
            bytes,
            proto,
            legacy: false,
        }
    }

    pub fn proto(&self) -> &NmTokenIdentifierProto {
        &self.proto
    }

    /// Whether the bytes were the pre-protobuf layout (Java's "Recovering old formatted
    /// token"); `bytes()` is then the protobuf form Java builds from it.
    pub fn is_legacy(&self) -> bool {
        self.legacy
    }

    pub fn attempt_id(&self) -> Option<AttemptId> {
        self.proto
            .app_attempt_id
            .as_ref()
            .and_then(attempt_from_proto)
    }

    pub fn node_id(&self) -> Option<NodeId> {
        self.proto.node_id.as_ref().map(NodeId::from_proto)
    }

    pub fn app_submitter(&self) -> &str {
        self.proto.app_submitter()
    }

    /// The NM-token master key id (−1 when absent).
    pub fn key_id(&self) -> i32 {
        self.proto.key_id()
    }

    /// The old layout: `long clusterTimestamp, int appId, int attemptId, UTF "host:port",
    /// UTF appSubmitter, int keyId`.
    fn parse_legacy(raw: &[u8]) -> Result<NmTokenIdentifier, TokenError> {
        const WHAT: &str = "NMTokenIdentifier (old format)";
        let mut r = WritableReader::new(raw);
        let ts = r.read_i64(WHAT)?;
        let app = r.read_i32(WHAT)?;
        let attempt = r.read_i32(WHAT)?;
        let host_addr = read_utf(&mut r, WHAT)?;
        let submitter = read_utf(&mut r, WHAT)?;
        let key_id = r.read_i32(WHAT)?;
        // Java: `hostAddr.split(":")` (trailing empty parts dropped), `[0]` and `parseInt([1])`.
        let mut parts: Vec<&str> = host_addr.split(':').collect();
        while parts.last() == Some(&"") {
            parts.pop();
        }
        let (Some(host), Some(port)) = (parts.first(), parts.get(1)) else {
            return Err(TokenError::Malformed {
                what: WHAT,
                reason: format!("node address {host_addr:?} is not host:port"),
            });
        };
        let port: i32 = port.parse().map_err(|_| TokenError::Malformed {
            what: WHAT,
            reason: format!("node address {host_addr:?}: bad port"),
        })?;
        let mut id = NmTokenIdentifier::new(
            Some(AttemptId {
                app: AppId::new(ts, app),
                attempt,
            }),
            Some(&NodeId::new(*host, port)),
            submitter,
            key_id,
        );
        id.raw = raw.to_vec();
        id.legacy = true;
        Ok(id)
    }
}

/// `DataInput.readUTF`: u16 length and (modified) UTF-8; we accept standard UTF-8 only.
fn read_utf<'a>(r: &mut WritableReader<'a>, what: &'static str) -> Result<&'a str, TokenError> {
    let len = r.read_u16(what)?;
    let b = r.read_bytes(usize::from(len), what)?;
    std::str::from_utf8(b).map_err(|_| TokenError::Utf8 { what })
}

impl TokenIdentifier for NmTokenIdentifier {
    const KIND: &'static str = super::KIND_NM;

    /// `parseFrom`; when that fails, the old layout, as Java's `readFields` falls back to it.
    /// Errors are the protobuf parse's.
    fn parse(raw: &[u8]) -> Result<Self, TokenError> {
        const WHAT: &str = "NMTokenIdentifier";
        match parse_proto(&schema::NMTokenIdentifierProto, raw, WHAT) {
            Ok((bytes, proto)) => Ok(NmTokenIdentifier {
                raw: raw.to_vec(),
                bytes,
                proto,
                legacy: false,
            }),
            Err(e @ TokenError::TooLong { .. }) => Err(e),
            Err(e) => NmTokenIdentifier::parse_legacy(raw).map_err(|_| e),
        }
    }

    fn raw(&self) -> &[u8] {
        &self.raw
    }

    fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    fn user(&self) -> Option<String> {
        self.attempt_id().map(|a| a.to_string())
    }

    fn key_id(&self) -> i32 {
        NmTokenIdentifier::key_id(self)
    }
}

// ---- AMRMToken ------------------------------------------------------------------------------

/// `AMRMTokenIdentifier` (kind `YARN_AM_RM_TOKEN`): an ApplicationMaster's grant to talk to
/// the RM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AmrmTokenIdentifier {
    raw: Vec<u8>,
    bytes: Vec<u8>,
    proto: AmrmTokenIdentifierProto,
}

impl AmrmTokenIdentifier {
    /// As Java's constructor builds it: the attempt when given, the key id always.
    pub fn new(attempt: Option<AttemptId>, key_id: i32) -> AmrmTokenIdentifier {
        AmrmTokenIdentifier::from_proto(AmrmTokenIdentifierProto {
            app_attempt_id: attempt.as_ref().map(attempt_to_proto),
            key_id: Some(key_id),
        })
    }

    pub fn from_proto(proto: AmrmTokenIdentifierProto) -> AmrmTokenIdentifier {
        let bytes = encode_proto(
            &schema::AMRMTokenIdentifierProto,
            &proto,
            "AMRMTokenIdentifier",
        );
        AmrmTokenIdentifier {
            raw: bytes.clone(),
            bytes,
            proto,
        }
    }

    pub fn proto(&self) -> &AmrmTokenIdentifierProto {
        &self.proto
    }

    pub fn attempt_id(&self) -> Option<AttemptId> {
        self.proto
            .app_attempt_id
            .as_ref()
            .and_then(attempt_from_proto)
    }

    /// The AMRM-token master key id (−1 when absent).
    pub fn key_id(&self) -> i32 {
        self.proto.key_id()
    }
}

impl TokenIdentifier for AmrmTokenIdentifier {
    const KIND: &'static str = super::KIND_AMRM;

    fn parse(raw: &[u8]) -> Result<Self, TokenError> {
        let (bytes, proto) = parse_proto(
            &schema::AMRMTokenIdentifierProto,
            raw,
            "AMRMTokenIdentifier",
        )?;
        Ok(AmrmTokenIdentifier {
            raw: raw.to_vec(),
            bytes,
            proto,
        })
    }

    fn raw(&self) -> &[u8] {
        &self.raw
    }

    fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    fn user(&self) -> Option<String> {
        self.attempt_id().map(|a| a.to_string())
    }

    fn key_id(&self) -> i32 {
        AmrmTokenIdentifier::key_id(self)
    }
}

// ---- ContainerToken -------------------------------------------------------------------------

/// `ContainerTokenIdentifier` (kind `ContainerToken`): the RM's grant to start one container on
/// one NM. All 16 fields of Hadoop 3.5's `ContainerTokenIdentifierProto` are kept.
///
/// Java's RM builds it with `version`, `nodeLabelExpression` (`""` when there is none),
/// `containerType` and `executionType` always set; an RM written in Rust must set the same
/// fields in [`ContainerTokenIdentifier::from_proto`] for a Java NM to see the same message
/// (the password covers the bytes, so any consistent choice verifies).
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerTokenIdentifier {
    raw: Vec<u8>,
    bytes: Vec<u8>,
    proto: ContainerTokenIdentifierProto,
}

impl ContainerTokenIdentifier {
    /// An identifier with exactly these fields.
    pub fn from_proto(proto: ContainerTokenIdentifierProto) -> ContainerTokenIdentifier {
        let bytes = encode_proto(
            &schema::ContainerTokenIdentifierProto,
            &proto,
            "ContainerTokenIdentifier",
        );
        ContainerTokenIdentifier {
            raw: bytes.clone(),
            bytes,
            proto,
        }
    }

    pub fn proto(&self) -> &ContainerTokenIdentifierProto {
        &self.proto
    }

    /// `getContainerID()`: `None` without an attempt (Java's would throw on use).
    pub fn container_id(&self) -> Option<ContainerId> {
        self.proto
            .container_id
            .as_ref()
            .and_then(container_from_proto)
    }

    /// `getNmHostAddress()`: the NM's `host:port` (`""` when absent).
    pub fn nm_host_addr(&self) -> &str {
        self.proto.nm_host_addr()
    }

    pub fn app_submitter(&self) -> &str {
        self.proto.app_submitter()
    }

    pub fn resource(&self) -> Option<&ResourceProto> {
        self.proto.resource.as_ref()
    }

    /// Milliseconds since the epoch after which the token must not start a container (0 when
    /// absent).
    pub fn expiry_time_stamp(&self) -> i64 {
        self.proto.expiry_time_stamp()
    }

    /// The container-token master key id (−1 when absent).
    pub fn master_key_id(&self) -> i32 {
        self.proto.master_key_id()
    }

    /// The RM's cluster timestamp (`RegisterNodeManagerResponseProto.rm_identifier`).
    pub fn rm_identifier(&self) -> i64 {
        self.proto.rm_identifier()
    }

    pub fn priority(&self) -> Option<i32> {
        self.proto.priority.as_ref().map(|p| p.priority())
    }

    pub fn creation_time(&self) -> i64 {
        self.proto.creation_time()
    }

    pub fn log_aggregation_context(&self) -> Option<&LogAggregationContextProto> {
        self.proto.log_aggregation_context.as_ref()
    }

    /// `getNodeLabelExpression()`: `""` (Java's `NO_LABEL`) when absent.
    pub fn node_label_expression(&self) -> &str {
        self.proto.node_label_expression()
    }

    /// `getContainerType()`: `None` when absent.
    pub fn container_type(&self) -> Option<ContainerTypeProto> {
        self.proto
            .container_type
            .map(|_| self.proto.container_type())
    }

    /// `getExecutionType()`: `None` when absent.
    pub fn execution_type(&self) -> Option<ExecutionTypeProto> {
        self.proto
            .execution_type
            .map(|_| self.proto.execution_type())
    }

    pub fn version(&self) -> i32 {
        self.proto.version()
    }

    pub fn allocation_request_id(&self) -> i64 {
        self.proto.allocation_request_id()
    }

    pub fn allocation_tags(&self) -> &[String] {
        &self.proto.allocation_tags
    }
}

impl TokenIdentifier for ContainerTokenIdentifier {
    const KIND: &'static str = super::KIND_CONTAINER;

    fn parse(raw: &[u8]) -> Result<Self, TokenError> {
        let (bytes, proto) = parse_proto(
            &schema::ContainerTokenIdentifierProto,
            raw,
            "ContainerTokenIdentifier",
        )?;
        Ok(ContainerTokenIdentifier {
            raw: raw.to_vec(),
            bytes,
            proto,
        })
    }

    fn raw(&self) -> &[u8] {
        &self.raw
    }

    fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    fn user(&self) -> Option<String> {
        self.container_id().map(|c| c.to_string())
    }

    fn key_id(&self) -> i32 {
        self.master_key_id()
    }
}

// ---- HDFS delegation token ------------------------------------------------------------------

/// The Writable identifier of HDFS delegation tokens (`AbstractDelegationTokenIdentifier`):
/// `byte version (0) ‖ Text owner ‖ Text renewer ‖ Text realUser ‖ vlong issueDate ‖
/// vlong maxDate ‖ vint sequenceNumber ‖ vint masterKeyId`. Its fields are read through
/// [`DelegationIdentifier`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DelegationTokenIdentifier {
    raw: Vec<u8>,
    bytes: Vec<u8>,
    fields: DelegationFields,
}

/// Java reads each `Text` with `Text.DEFAULT_MAX_LEN` (1 MiB) and refuses a length `>=` it.
const DT_MAX_TEXT: usize = (1 << 20) - 1;

impl DelegationTokenIdentifier {
    /// An identifier with these values. (Java's `setRenewer` shortens a Kerberos principal to
    /// its short name first; pass the short name.)
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        owner: &str,
        renewer: &str,
        real_user: &str,
        issue_date: i64,
        max_date: i64,
        sequence_number: i32,
        master_key_id: i32,
    ) -> DelegationTokenIdentifier {
        DelegationTokenIdentifier::from_fields(DelegationFields {
            owner: owner.to_string(),
            renewer: renewer.to_string(),
            real_user: real_user.to_string(),
            issue_date,
            max_date,
            sequence_number,
            master_key_id,
        })
    }

    /// `writeImpl`.
    fn encode(f: &DelegationFields) -> Vec<u8> {
        let mut out = Vec::with_capacity(
            1 + f.owner.len() + f.renewer.len() + f.real_user.len() + 3 * 5 + 2 * 9,
        );
        out.push(0);
        writable::write_text(&mut out, &f.owner);
        writable::write_text(&mut out, &f.renewer);
        writable::write_text(&mut out, &f.real_user);
        writable::write_vlong(&mut out, f.issue_date);
        writable::write_vlong(&mut out, f.max_date);
        writable::write_vint(&mut out, f.sequence_number);
        writable::write_vint(&mut out, f.master_key_id);
        out
    }

    /// Whether Java's `getUser()` is a proxy user: a real user that is set and differs from
    /// the owner (the owner acting through `real_user`).
    pub fn is_proxy(&self) -> bool {
        let f = &self.fields;
        !f.owner.is_empty() && !f.real_user.is_empty() && f.real_user != f.owner
    }
}

impl DelegationIdentifier for DelegationTokenIdentifier {
    const STORED: &'static str = "stored delegation tokens";

    fn from_fields(fields: DelegationFields) -> Self {
        let bytes = DelegationTokenIdentifier::encode(&fields);
        DelegationTokenIdentifier {
            raw: bytes.clone(),
            bytes,
            fields,
        }
    }

    fn fields(&self) -> &DelegationFields {
        &self.fields
    }

    /// `DelegationTokenIdentifier.toString()`: `token for <short owner>: ` and the abstract
    /// identifier's text.
    fn to_java_string(&self) -> Option<String> {
        if self.fields.owner.is_empty() {
            return None;
        }
        Some(format!(
            "token for {}: {}",
            short_name(&self.fields.owner),
            self.fields.java_string(super::KIND_HDFS_DELEGATION)
        ))
    }
}

impl TokenIdentifier for DelegationTokenIdentifier {
    const KIND: &'static str = super::KIND_HDFS_DELEGATION;

    /// `readFields`; bytes after `masterKeyId` are ignored, as Java ignores them.
    fn parse(raw: &[u8]) -> Result<Self, TokenError> {
        const WHAT: &str = "delegation token identifier";
        check_size(raw, WHAT)?;
        let mut r = WritableReader::new(raw);
        let version = r.read_u8(WHAT)?;
        if version != 0 {
            return Err(TokenError::DelegationVersion(version));
        }
        let owner = r.read_text("delegation token owner", DT_MAX_TEXT)?;
        let renewer = r.read_text("delegation token renewer", DT_MAX_TEXT)?;
        let real_user = r.read_text("delegation token realUser", DT_MAX_TEXT)?;
        let issue_date = r.read_vlong("delegation token issueDate")?;
        let max_date = r.read_vlong("delegation token maxDate")?;
        let sequence_number = r.read_vint("delegation token sequenceNumber")?;
        let master_key_id = r.read_vint("delegation token masterKeyId")?;
        let mut id = DelegationTokenIdentifier::new(
            owner,
            renewer,
            real_user,
            issue_date,
            max_date,
            sequence_number,
            master_key_id,
        );
        id.raw = raw.to_vec();
        Ok(id)
    }

    fn raw(&self) -> &[u8] {
        &self.raw
    }

    fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The owner (Java: `null` when the owner is empty).
    fn user(&self) -> Option<String> {
        (!self.fields.owner.is_empty()).then(|| self.fields.owner.clone())
    }

    fn key_id(&self) -> i32 {
        self.fields.master_key_id
    }
}
