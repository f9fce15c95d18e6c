//! The ResourceTracker messages a node sends and receives, by hand: heartbeat requests are
//! written straight into a caller's reused buffer with the one protobuf writer
//! ([`hadoop_wire::writer::Encode`]), heartbeat responses are read in place with
//! `hadoop_wire::reader` and the views. Nothing here allocates (registration, a cold path, uses
//! prost in [`crate::status_updater`]).
//!
//! Lengths are counted before writing (exact, minimal varints, as protobuf-java writes them);
//! fields go out in field-number order. The tests check the bytes against prost.

use hadoop_wire::pb::hadoop::yarn::{ContainerStateProto, NodeActionProto};
use hadoop_wire::reader::{DecodeError, Reader, Value};
use hadoop_wire::view::yarn::{ApplicationIdView, ContainerIdView, MasterKeyView};
use hadoop_wire::writer::{Encode, Sink, Writer};

use crate::ids::{AppId, ContainerId};
use crate::table::{Container, ContainerState, Resource};

// ------------------------------------------------------------------------------- records

/// A `ContainerIdProto` as the node writes it: `app_id` (1), `app_attempt_id` (2), `id` (3).
/// Unlike [`ContainerId`]'s own encoding (the RM's, attempt and id only), the deprecated
/// `app_id` is filled too.
struct NodeContainerId<'a>(&'a ContainerId);

impl Encode for NodeContainerId<'_> {
    #[inline]
    fn encode<S: Sink>(&self, s: &mut S) {
        s.message(1, &self.0.app);
        s.message(2, &self.0.attempt_id());
        s.int64(3, self.0.id);
    }
}

/// `ResourceProto`: memory (1), vcores (2).
impl Encode for Resource {
    #[inline]
    fn encode<S: Sink>(&self, s: &mut S) {
        s.int64(1, self.memory_mb);
        s.int32(2, self.vcores);
    }
}

/// A `ContainerStatusProto`: id, state, diagnostics (when not empty), exit status, capability.
struct ContainerStatus<'a>(&'a Container);

impl Encode for ContainerStatus<'_> {
    #[inline]
    fn encode<S: Sink>(&self, s: &mut S) {
        let c = self.0;
        s.message(1, &NodeContainerId(&c.id));
        s.int32(2, c.state.proto());
        if !c.diagnostics.is_empty() {
            s.string(3, &c.diagnostics);
        }
        s.int32(4, c.exit_status);
        s.message(5, &c.resource);
    }
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

/// `NodeHealthStatusProto`: healthy (1), report (2, always), time of the last check (3).
impl Encode for NodeHealth {
    #[inline]
    fn encode<S: Sink>(&self, s: &mut S) {
        s.bool(1, self.healthy);
        s.string(2, &self.report);
        s.int64(3, self.last_report_wall_ms);
    }
}

/// A master key as last received from the RM.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MasterKey {
    pub key_id: i32,
    pub bytes: Vec<u8>,
}

/// `MasterKeyProto`: key id (1), bytes (2).
impl Encode for MasterKey {
    #[inline]
    fn encode<S: Sink>(&self, s: &mut S) {
        s.int32(1, self.key_id);
        s.bytes(2, &self.bytes);
    }
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

/// `NodeIdProto`: host (1), port (2).
struct NodeId<'a> {
    host: &'a str,
    port: i32,
}

impl Encode for NodeId<'_> {
    #[inline]
    fn encode<S: Sink>(&self, s: &mut S) {
        s.string(1, self.host);
        s.int32(2, self.port);
    }
}

/// `NodeStatusProto`: node id (1), response id (2), container statuses (3), health (4).
struct NodeStatus<'a, F> {
    head: &'a HeartbeatHead<'a>,
    statuses: &'a F,
}

impl<'c, F, I> Encode for NodeStatus<'_, F>
where
    F: Fn() -> I,
    I: Iterator<Item = &'c Container>,
{
    #[inline]
    fn encode<S: Sink>(&self, s: &mut S) {
        let h = self.head;
        s.message(
            1,
            &NodeId {
                host: h.host,
                port: h.port,
            },
        );
        s.int32(2, h.response_id);
        for c in (self.statuses)() {
            s.message(3, &ContainerStatus(c));
        }
        s.message(4, h.health);
    }
}

/// `NodeHeartbeatRequestProto`: node status (1), the last known master keys (2, 3), the token
/// sequence number (8).
struct Heartbeat<'a, F>(NodeStatus<'a, F>);

impl<'c, F, I> Encode for Heartbeat<'_, F>
where
    F: Fn() -> I,
    I: Iterator<Item = &'c Container>,
{
    #[inline]
    fn encode<S: Sink>(&self, s: &mut S) {
        let h = self.0.head;
        s.message(1, &self.0);
        if let Some(k) = h.container_key {
            s.message(2, k);
        }
        if let Some(k) = h.nm_key {
            s.message(3, k);
        }
        if let Some(t) = h.token_sequence_no {
            s.int64(8, t);
        }
    }
}

/// Appends a `NodeHeartbeatRequestProto` to `buf`: node status (node id, response id, the
/// container statuses `statuses` yields, health), the last known master keys, and the token
/// sequence number. `statuses` is called more than once (lengths, then bytes) and must yield
/// the same containers every time.
pub fn put_heartbeat<'c, I>(buf: &mut Vec<u8>, head: &HeartbeatHead<'_>, statuses: impl Fn() -> I)
where
    I: Iterator<Item = &'c Container>,
{
    let hb = Heartbeat(NodeStatus {
        head,
        statuses: &statuses,
    });
    hb.encode(&mut Writer::new(buf));
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
        match NodeActionProto::try_from(v) {
            Ok(NodeActionProto::Normal) => Ok(NodeAction::Normal),
            Ok(NodeActionProto::Resync) => Ok(NodeAction::Resync),
            Ok(NodeActionProto::Shutdown) => Ok(NodeAction::Shutdown),
            Err(_) => Err(WireError::UnknownAction(v)),
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
    let k = MasterKeyView::new(b);
    Ok(KeyRef {
        key_id: k.key_id()?.ok_or(WireError::Missing {
            message: "MasterKeyProto",
            field: "key_id",
        })?,
        bytes: k.key_bytes()?.unwrap_or(&[]),
    })
}

/// Reads an `ApplicationIdProto` (absent fields are 0, as Java's getters give them).
pub fn read_app_id(b: &[u8]) -> Result<AppId, WireError> {
    let (id, ts) = ApplicationIdView::new(b).parts()?;
    Ok(AppId::new(ts.unwrap_or(0), id.unwrap_or(0)))
}

/// Reads a `ContainerIdProto` (the application from app_attempt_id, else from app_id; an
/// absent attempt or id is 0).
pub fn read_container_id(b: &[u8]) -> Result<ContainerId, WireError> {
    let p = ContainerIdView::new(b).parts()?;
    // Both application ids are read (a malformed one is an error even when the other wins).
    let app = p.app_id.map(|a| read_app_id(a.as_bytes())).transpose()?;
    let (attempt_app, attempt) = match p.app_attempt_id {
        Some(a) => {
            let (app, attempt) = a.parts()?;
            (app.map(|a| read_app_id(a.as_bytes())).transpose()?, attempt)
        }
        None => (None, None),
    };
    let app = attempt_app.or(app).ok_or(WireError::Missing {
        message: "ContainerIdProto",
        field: "app_attempt_id",
    })?;
    Ok(ContainerId::new(
        app,
        attempt.unwrap_or(0),
        p.id.unwrap_or(0),
    ))
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
    /// Entries of field 13 `containers_to_signal` (read with
    /// [`containers_to_signal`](Self::containers_to_signal)).
    pub signals: u32,
    /// Entries of field 17 `containers_to_update`.
    pub updates: u32,
    /// Entries of field 12 `containers_to_decrease` (the DECREASE subset of field 17, kept
    /// for old NodeManagers; Java's NodeManager does not read it).
    pub decreases: u32,
}

/// One entry of `containers_to_signal`: a `SignalContainerRequestProto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignalOrder {
    pub container: ContainerId,
    /// A `SignalContainerCommandProto` number (not checked here: an unknown one is the
    /// receiver's to ignore).
    pub command: i32,
}

/// One entry of `containers_to_update` / `containers_to_decrease`: the parts of a
/// `ContainerProto` a NodeManager acts on (the token's identifier carries the same resource
/// and version, signed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContainerUpdate {
    pub container: ContainerId,
    /// Field 4 `resource`: memory (MB) and vcores.
    pub resource: Option<Resource>,
    /// Field 7 `execution_type` (GUARANTEED 1, OPPORTUNISTIC 2).
    pub execution_type: Option<i32>,
    /// Field 9 `version`.
    pub version: Option<i32>,
}

/// Reads a `SignalContainerRequestProto`: container id (1) and command (2), both required.
pub fn read_signal(b: &[u8]) -> Result<SignalOrder, WireError> {
    const M: &str = "SignalContainerRequestProto";
    let (mut container, mut command) = (None, None);
    let mut r = Reader::new(b);
    while !r.is_empty() {
        match r.read_field(0)? {
            (1, Value::Len(v)) => container = Some(read_container_id(v)?),
            (2, Value::Varint(v)) => command = Some(v as i32),
            (1 | 2, _) => return Err(wt(M, "field")),
            _ => {}
        }
    }
    Ok(SignalOrder {
        container: container.ok_or(WireError::Missing {
            message: M,
            field: "container_id",
        })?,
        command: command.ok_or(WireError::Missing {
            message: M,
            field: "command",
        })?,
    })
}

/// Reads a `ResourceProto`'s memory (1) and vcores (2) (absent ones are 0).
fn read_resource(b: &[u8]) -> Result<Resource, WireError> {
    let mut out = Resource {
        memory_mb: 0,
        vcores: 0,
    };
    let mut r = Reader::new(b);
    while !r.is_empty() {
        match r.read_field(0)? {
            (1, Value::Varint(v)) => out.memory_mb = v as i64,
            (2, Value::Varint(v)) => out.vcores = v as i32,
            (1 | 2, _) => return Err(wt("ResourceProto", "field")),
            _ => {}
        }
    }
    Ok(out)
}

/// Reads the parts of a `ContainerProto` in [`ContainerUpdate`] (the id is required).
pub fn read_container_update(b: &[u8]) -> Result<ContainerUpdate, WireError> {
    const M: &str = "ContainerProto";
    let mut out = ContainerUpdate {
        container: ContainerId::new(AppId::new(0, 0), 0, 0),
        resource: None,
        execution_type: None,
        version: None,
    };
    let mut have_id = false;
    let mut r = Reader::new(b);
    while !r.is_empty() {
        match r.read_field(0)? {
            (1, Value::Len(v)) => {
                out.container = read_container_id(v)?;
                have_id = true;
            }
            (4, Value::Len(v)) => out.resource = Some(read_resource(v)?),
            (7, Value::Varint(v)) => out.execution_type = Some(v as i32),
            (9, Value::Varint(v)) => out.version = Some(v as i32),
            (1 | 4 | 7 | 9, _) => return Err(wt(M, "field")),
            _ => {}
        }
    }
    if !have_id {
        return Err(WireError::Missing {
            message: M,
            field: "id",
        });
    }
    Ok(out)
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
            signals: 0,
            updates: 0,
            decreases: 0,
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
                (12, Value::Len(_)) => out.decreases += 1,
                (13, Value::Len(_)) => out.signals += 1,
                (17, Value::Len(_)) => out.updates += 1,
                (19, Value::Varint(v)) => out.token_sequence_no = Some(v as i64),
                (1..=9 | 12 | 13 | 17 | 19, _) => return Err(wt(M, "field")),
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

    /// Field 13 `containers_to_signal`, in the RM's order.
    pub fn containers_to_signal(
        &self,
    ) -> impl Iterator<Item = Result<SignalOrder, WireError>> + 'a {
        let it = self.ids(13);
        it.map(|b| b.and_then(read_signal))
    }

    /// Field 17 `containers_to_update`.
    pub fn containers_to_update(
        &self,
    ) -> impl Iterator<Item = Result<ContainerUpdate, WireError>> + 'a {
        let it = self.ids(17);
        it.map(|b| b.and_then(read_container_update))
    }

    /// Field 12 `containers_to_decrease`.
    pub fn containers_to_decrease(
        &self,
    ) -> impl Iterator<Item = Result<ContainerUpdate, WireError>> + 'a {
        let it = self.ids(12);
        it.map(|b| b.and_then(read_container_update))
    }
}

/// The prost form of what the node writes for a container id (`app_id` filled too; tests,
/// registration).
pub fn container_id_proto(c: &ContainerId) -> hadoop_wire::pb::hadoop::yarn::ContainerIdProto {
    hadoop_wire::pb::hadoop::yarn::ContainerIdProto {
        app_id: Some(c.app.to_proto()),
        ..c.to_proto()
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

/// The prost form of what [`put_heartbeat`] writes for a container status (tests, `getNodeReport`).
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
        match ContainerStateProto::try_from(v).ok()? {
            ContainerStateProto::CNew => Some(ContainerState::New),
            ContainerStateProto::CRunning => Some(ContainerState::Running),
            ContainerStateProto::CComplete => Some(ContainerState::Complete),
        }
    }
}
