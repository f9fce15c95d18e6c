//! The ResourceTracker messages the agent sends and receives, by hand: heartbeat requests are
//! encoded straight into a caller's reused buffer, heartbeat responses are read in place with
//! `hadoop_wire::reader`. Nothing here allocates (registration, a cold path, uses prost in
//! [`super::status_updater`]).
//!
//! Lengths are computed before writing (exact, minimal varints, as protobuf-java writes them);
//! fields go out in field-number order. The tests check the bytes against prost.

use hadoop_wire::reader::{DecodeError, Reader, Value};
use prost::encoding::{encode_varint, encoded_len_varint};

use super::ids::{AppId, ContainerId};
use super::table::{Container, ContainerState, Resource};

const VARINT: u32 = 0;
const LEN: u32 = 2;

#[inline]
fn i32v(v: i32) -> u64 {
    v as i64 as u64
}

#[inline]
fn tag(buf: &mut Vec<u8>, field: u32, wt: u32) {
    encode_varint(u64::from((field << 3) | wt), buf);
}

#[inline]
fn vf(field: u32, v: u64) -> usize {
    encoded_len_varint(u64::from(field << 3)) + encoded_len_varint(v)
}

#[inline]
fn lf(field: u32, n: usize) -> usize {
    encoded_len_varint(u64::from(field << 3)) + encoded_len_varint(n as u64) + n
}

#[inline]
fn put_v(buf: &mut Vec<u8>, field: u32, v: u64) {
    tag(buf, field, VARINT);
    encode_varint(v, buf);
}

#[inline]
fn put_l(buf: &mut Vec<u8>, field: u32, n: usize) {
    tag(buf, field, LEN);
    encode_varint(n as u64, buf);
}

#[inline]
fn put_bytes(buf: &mut Vec<u8>, field: u32, b: &[u8]) {
    put_l(buf, field, b.len());
    buf.extend_from_slice(b);
}

// ------------------------------------------------------------------------------- records

fn app_len(a: &AppId) -> usize {
    vf(1, i32v(a.id)) + vf(2, a.cluster_timestamp as u64)
}

fn put_app(buf: &mut Vec<u8>, a: &AppId) {
    put_v(buf, 1, i32v(a.id));
    put_v(buf, 2, a.cluster_timestamp as u64);
}

fn attempt_len(c: &ContainerId) -> usize {
    lf(1, app_len(&c.app)) + vf(2, i32v(c.attempt))
}

/// `ContainerIdProto` length (app_id, app_attempt_id, id: Java still fills the deprecated
/// app_id).
pub fn container_id_len(c: &ContainerId) -> usize {
    lf(1, app_len(&c.app)) + lf(2, attempt_len(c)) + vf(3, c.id as u64)
}

/// Writes a `ContainerIdProto` body.
pub fn put_container_id(buf: &mut Vec<u8>, c: &ContainerId) {
    put_l(buf, 1, app_len(&c.app));
    put_app(buf, &c.app);
    put_l(buf, 2, attempt_len(c));
    put_l(buf, 1, app_len(&c.app));
    put_app(buf, &c.app);
    put_v(buf, 2, i32v(c.attempt));
    put_v(buf, 3, c.id as u64);
}

fn resource_len(r: &Resource) -> usize {
    vf(1, r.memory_mb as u64) + vf(2, i32v(r.vcores))
}

fn put_resource(buf: &mut Vec<u8>, r: &Resource) {
    put_v(buf, 1, r.memory_mb as u64);
    put_v(buf, 2, i32v(r.vcores));
}

/// `ContainerStatusProto` length: id, state, diagnostics (when not empty), exit status,
/// capability.
pub fn container_status_len(c: &Container) -> usize {
    let mut n = lf(1, container_id_len(&c.id)) + vf(2, i32v(c.state.proto()));
    if !c.diagnostics.is_empty() {
        n += lf(3, c.diagnostics.len());
    }
    n + vf(4, i32v(c.exit_status)) + lf(5, resource_len(&c.resource))
}

pub fn put_container_status(buf: &mut Vec<u8>, c: &Container) {
    put_l(buf, 1, container_id_len(&c.id));
    put_container_id(buf, &c.id);
    put_v(buf, 2, i32v(c.state.proto()));
    if !c.diagnostics.is_empty() {
        put_bytes(buf, 3, c.diagnostics.as_bytes());
    }
    put_v(buf, 4, i32v(c.exit_status));
    put_l(buf, 5, resource_len(&c.resource));
    put_resource(buf, &c.resource);
}

/// The node's health as reported in `NodeHealthStatusProto`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeHealth {
    pub healthy: bool,
    pub report: String,
    /// Wall-clock time of the last check (ms since the epoch).
    pub last_report_wall_ms: i64,
}

impl Default for NodeHealth {
    fn default() -> Self {
        Self {
            healthy: true,
            report: String::new(),
            last_report_wall_ms: 0,
        }
    }
}

fn health_len(h: &NodeHealth) -> usize {
    vf(1, h.healthy as u64) + lf(2, h.report.len()) + vf(3, h.last_report_wall_ms as u64)
}

fn put_health(buf: &mut Vec<u8>, h: &NodeHealth) {
    put_v(buf, 1, h.healthy as u64);
    put_bytes(buf, 2, h.report.as_bytes());
    put_v(buf, 3, h.last_report_wall_ms as u64);
}

/// A master key as last received from the RM.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MasterKey {
    pub key_id: i32,
    pub bytes: Vec<u8>,
}

fn key_len(k: &MasterKey) -> usize {
    vf(1, i32v(k.key_id)) + lf(2, k.bytes.len())
}

fn put_key(buf: &mut Vec<u8>, field: u32, k: &MasterKey) {
    put_l(buf, field, key_len(k));
    put_v(buf, 1, i32v(k.key_id));
    put_bytes(buf, 2, &k.bytes);
}

/// The fixed parts of a heartbeat.
#[derive(Debug, Clone, Copy)]
pub struct HeartbeatHead<'a> {
    pub host: &'a str,
    pub port: i32,
    pub response_id: i32,
    pub health: &'a NodeHealth,
    pub container_key: Option<&'a MasterKey>,
    pub nm_key: Option<&'a MasterKey>,
    pub token_sequence_no: Option<i64>,
}

/// Appends a `NodeHeartbeatRequestProto` to `buf`: node status (node id, response id, the
/// container statuses `statuses` yields, health), the last known master keys, and the token
/// sequence number. `statuses` is called twice (lengths, then bytes) and must yield the same
/// containers both times.
pub fn put_heartbeat<'c, I>(buf: &mut Vec<u8>, head: &HeartbeatHead<'_>, statuses: impl Fn() -> I)
where
    I: Iterator<Item = &'c Container>,
{
    let node_id = lf(1, head.host.len()) + vf(2, i32v(head.port));
    let mut ns = lf(1, node_id) + vf(2, i32v(head.response_id));
    for c in statuses() {
        ns += lf(3, container_status_len(c));
    }
    ns += lf(4, health_len(head.health));

    put_l(buf, 1, ns);
    put_l(buf, 1, node_id);
    put_bytes(buf, 1, head.host.as_bytes());
    put_v(buf, 2, i32v(head.port));
    put_v(buf, 2, i32v(head.response_id));
    for c in statuses() {
        put_l(buf, 3, container_status_len(c));
        put_container_status(buf, c);
    }
    put_l(buf, 4, health_len(head.health));
    put_health(buf, head.health);
    if let Some(k) = head.container_key {
        put_key(buf, 2, k);
    }
    if let Some(k) = head.nm_key {
        put_key(buf, 3, k);
    }
    if let Some(t) = head.token_sequence_no {
        put_v(buf, 8, t as u64);
    }
}

// ------------------------------------------------------------------------------- responses

/// Why a response could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error(transparent)]
    Decode(#[from] DecodeError),
    #[error("{message}.{field}: unexpected wire type")]
    WireType {
        message: &'static str,
        field: &'static str,
    },
    #[error("{message}.{field}: not UTF-8")]
    Utf8 {
        message: &'static str,
        field: &'static str,
    },
    #[error("unknown NodeActionProto value {0}")]
    UnknownAction(i32),
    #[error("{message} lacks {field}")]
    Missing {
        message: &'static str,
        field: &'static str,
    },
}

fn wt(message: &'static str, field: &'static str) -> WireError {
    WireError::WireType { message, field }
}

/// `NodeActionProto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeAction {
    Normal,
    Resync,
    Shutdown,
}

impl NodeAction {
    pub fn from_proto(v: i32) -> Result<Self, WireError> {
        match v {
            0 => Ok(NodeAction::Normal),
            1 => Ok(NodeAction::Resync),
            2 => Ok(NodeAction::Shutdown),
            v => Err(WireError::UnknownAction(v)),
        }
    }
}

/// A master key in a response, borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyRef<'a> {
    pub key_id: i32,
    pub bytes: &'a [u8],
}

fn read_key(b: &[u8]) -> Result<KeyRef<'_>, WireError> {
    let mut r = Reader::new(b);
    let (mut id, mut bytes) = (None, &[][..]);
    while !r.is_empty() {
        match r.read_field(0)? {
            (1, Value::Varint(v)) => id = Some(v as i32),
            (1, _) => return Err(wt("MasterKeyProto", "key_id")),
            (2, Value::Len(v)) => bytes = v,
            (2, _) => return Err(wt("MasterKeyProto", "bytes")),
            _ => {}
        }
    }
    Ok(KeyRef {
        key_id: id.ok_or(WireError::Missing {
            message: "MasterKeyProto",
            field: "key_id",
        })?,
        bytes,
    })
}

/// Reads an `ApplicationIdProto`.
pub fn read_app_id(b: &[u8]) -> Result<AppId, WireError> {
    let mut r = Reader::new(b);
    let mut a = AppId::new(0, 0);
    while !r.is_empty() {
        match r.read_field(0)? {
            (1, Value::Varint(v)) => a.id = v as i32,
            (2, Value::Varint(v)) => a.cluster_timestamp = v as i64,
            (1 | 2, _) => return Err(wt("ApplicationIdProto", "id")),
            _ => {}
        }
    }
    Ok(a)
}

/// Reads a `ContainerIdProto` (the application from app_attempt_id, else from app_id).
pub fn read_container_id(b: &[u8]) -> Result<ContainerId, WireError> {
    let mut r = Reader::new(b);
    let (mut app, mut attempt_app, mut attempt, mut id) = (None, None, 0, 0);
    while !r.is_empty() {
        match r.read_field(0)? {
            (1, Value::Len(v)) => app = Some(read_app_id(v)?),
            (2, Value::Len(v)) => {
                let mut ar = Reader::new(v);
                while !ar.is_empty() {
                    match ar.read_field(0)? {
                        (1, Value::Len(a)) => attempt_app = Some(read_app_id(a)?),
                        (2, Value::Varint(n)) => attempt = n as i32,
                        (1 | 2, _) => return Err(wt("ApplicationAttemptIdProto", "field")),
                        _ => {}
                    }
                }
            }
            (3, Value::Varint(v)) => id = v as i64,
            (1..=3, _) => return Err(wt("ContainerIdProto", "field")),
            _ => {}
        }
    }
    let app = attempt_app.or(app).ok_or(WireError::Missing {
        message: "ContainerIdProto",
        field: "app_attempt_id",
    })?;
    Ok(ContainerId::new(app, attempt, id))
}

/// The scalar fields of a `NodeHeartbeatResponseProto`, read in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeartbeatResponse<'a> {
    pub bytes: &'a [u8],
    pub response_id: i32,
    pub action: NodeAction,
    pub container_key: Option<KeyRef<'a>>,
    pub nm_key: Option<KeyRef<'a>>,
    pub next_interval_ms: Option<i64>,
    pub diagnostics: Option<&'a str>,
    pub token_sequence_no: Option<i64>,
}

impl<'a> HeartbeatResponse<'a> {
    /// One pass over the response for the scalars; the id lists are walked on demand.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, WireError> {
        const M: &str = "NodeHeartbeatResponseProto";
        let mut r = Reader::new(bytes);
        let mut out = HeartbeatResponse {
            bytes,
            response_id: 0,
            action: NodeAction::Normal,
            container_key: None,
            nm_key: None,
            next_interval_ms: None,
            diagnostics: None,
            token_sequence_no: None,
        };
        let mut have_id = false;
        while !r.is_empty() {
            match r.read_field(0)? {
                (1, Value::Varint(v)) => {
                    out.response_id = v as i32;
                    have_id = true;
                }
                (2, Value::Len(v)) => out.container_key = Some(read_key(v)?),
                (3, Value::Len(v)) => out.nm_key = Some(read_key(v)?),
                (4, Value::Varint(v)) => out.action = NodeAction::from_proto(v as i32)?,
                (5 | 6 | 9, Value::Len(_)) => {}
                (7, Value::Varint(v)) => out.next_interval_ms = Some(v as i64),
                (8, Value::Len(v)) => {
                    out.diagnostics = Some(std::str::from_utf8(v).map_err(|_| WireError::Utf8 {
                        message: M,
                        field: "diagnostics_message",
                    })?)
                }
                (19, Value::Varint(v)) => out.token_sequence_no = Some(v as i64),
                (1..=9 | 19, _) => return Err(wt(M, "field")),
                _ => {}
            }
        }
        if !have_id && out.action == NodeAction::Normal {
            return Err(WireError::Missing {
                message: M,
                field: "response_id",
            });
        }
        Ok(out)
    }

    fn ids(&self, field: u32) -> impl Iterator<Item = Result<&'a [u8], WireError>> {
        let mut r = Reader::new(self.bytes);
        std::iter::from_fn(move || loop {
            if r.is_empty() {
                return None;
            }
            match r.read_field(0) {
                Err(e) => {
                    r = Reader::new(&[]);
                    return Some(Err(e.into()));
                }
                Ok((f, Value::Len(v))) if f == field => return Some(Ok(v)),
                Ok(_) => {}
            }
        })
    }

    /// Field 5 `containers_to_cleanup`.
    pub fn containers_to_cleanup(
        &self,
    ) -> impl Iterator<Item = Result<ContainerId, WireError>> + 'a {
        let it = self.ids(5);
        it.map(|b| b.and_then(read_container_id))
    }

    /// Field 6 `applications_to_cleanup`.
    pub fn applications_to_cleanup(&self) -> impl Iterator<Item = Result<AppId, WireError>> + 'a {
        let it = self.ids(6);
        it.map(|b| b.and_then(read_app_id))
    }

    /// Field 9 `containers_to_be_removed_from_nm`.
    pub fn containers_to_be_removed_from_nm(
        &self,
    ) -> impl Iterator<Item = Result<ContainerId, WireError>> + 'a {
        let it = self.ids(9);
        it.map(|b| b.and_then(read_container_id))
    }
}

/// Converts to prost (tests, cold paths).
pub fn container_id_proto(c: &ContainerId) -> hadoop_wire::pb::hadoop::yarn::ContainerIdProto {
    use hadoop_wire::pb::hadoop::yarn::{
        ApplicationAttemptIdProto, ApplicationIdProto, ContainerIdProto,
    };
    let app = ApplicationIdProto {
        id: Some(c.app.id),
        cluster_timestamp: Some(c.app.cluster_timestamp),
    };
    ContainerIdProto {
        app_id: Some(app),
        app_attempt_id: Some(ApplicationAttemptIdProto {
            application_id: Some(app),
            attempt_id: Some(c.attempt),
        }),
        id: Some(c.id),
    }
}

/// Converts to prost.
pub fn app_id_proto(a: &AppId) -> hadoop_wire::pb::hadoop::yarn::ApplicationIdProto {
    hadoop_wire::pb::hadoop::yarn::ApplicationIdProto {
        id: Some(a.id),
        cluster_timestamp: Some(a.cluster_timestamp),
    }
}

/// Converts to prost.
pub fn resource_proto(r: &Resource) -> hadoop_wire::pb::hadoop::yarn::ResourceProto {
    hadoop_wire::pb::hadoop::yarn::ResourceProto {
        memory: Some(r.memory_mb),
        virtual_cores: Some(r.vcores),
        resource_value_map: Vec::new(),
    }
}

/// The prost form of what [`put_container_status`] writes (tests, `getNodeReport`).
pub fn container_status_proto(
    c: &Container,
) -> hadoop_wire::pb::hadoop::yarn::ContainerStatusProto {
    hadoop_wire::pb::hadoop::yarn::ContainerStatusProto {
        container_id: Some(container_id_proto(&c.id)),
        state: Some(c.state.proto()),
        diagnostics: (!c.diagnostics.is_empty()).then(|| c.diagnostics.clone()),
        exit_status: Some(c.exit_status),
        capability: Some(resource_proto(&c.resource)),
        execution_type: None,
        container_attributes: Vec::new(),
        container_sub_state: None,
    }
}

impl ContainerState {
    /// From a `ContainerStateProto` number.
    pub fn from_proto(v: i32) -> Option<Self> {
        match v {
            1 => Some(ContainerState::New),
            2 => Some(ContainerState::Running),
            3 => Some(ContainerState::Complete),
            _ => None,
        }
    }
}
