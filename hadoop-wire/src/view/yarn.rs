//! Views of the NodeManager → ResourceManager heartbeat.
//!
//! [`NodeHeartbeatRequestView`] → [`NodeStatusView`] → [`ContainerStatusView`] →
//! [`ContainerIdView`] → [`ApplicationAttemptIdView`] → [`ApplicationIdView`], and
//! [`ResourceView`] → [`ResourceInformationView`] for the capability (which the hot path
//! skips, see YARN-11878). Also [`MasterKeyView`], [`NodeIdView`], [`NodeHealthStatusView`].
//!
//! The hot path:
//!
//! ```
//! # use hadoop_wire::view::yarn::NodeHeartbeatRequestView;
//! # fn f(bytes: &[u8]) -> Result<(), hadoop_wire::reader::DecodeError> {
//! let req = NodeHeartbeatRequestView::new(bytes);
//! req.validate()?; // once: structure, wire types, required fields, all levels
//! if let Some(status) = req.node_status()? {
//!     for cs in status.containers_statuses() {
//!         let s = cs?.summary()?; // one pass over the status: id, state, exit, type
//!         let _ = (s.container_id, s.state, s.exit_status, s.execution_type);
//!     }
//! }
//! # Ok(()) }
//! ```

use super::schema::Schema;
use super::{last_known_enum, last_len, last_varint, message_view, required, utf8, Repeated};
use crate::pb::hadoop::yarn::{
    ContainerStateProto, ContainerSubStateProto, ExecutionTypeProto, NodeActionProto,
    ResourceTypesProto,
};
use crate::pb::schema::hadoop::yarn as s;
use crate::reader::{exact, fail, DecodeError, Failure, Reader, WireType};

/// ContainerExitStatus.INVALID, the default of `ContainerStatusProto.exit_status`.
pub const EXIT_STATUS_INVALID: i32 = crate::yarn::exit_status::INVALID;

/// The default of `ContainerStatusProto.diagnostics`.
pub const DIAGNOSTICS_DEFAULT: &str = "N/A";

#[inline]
fn opt_str<'a>(
    b: Option<&'a [u8]>,
    schema: &'static Schema,
    number: u32,
) -> Result<Option<&'a str>, DecodeError> {
    b.map(|b| utf8(b, schema, number)).transpose()
}

#[inline]
fn known_state(v: i32) -> bool {
    ContainerStateProto::try_from(v).is_ok()
}
#[inline]
fn known_exec(v: i32) -> bool {
    ExecutionTypeProto::try_from(v).is_ok()
}

// ---------------------------------------------------------------------------------------

message_view! {
    /// `hadoop.yarn.NodeHeartbeatRequestProto`, the body of `nodeHeartbeat`.
    NodeHeartbeatRequestView => s::NodeHeartbeatRequestProto
}

const HB: &Schema = &s::NodeHeartbeatRequestProto;

impl<'a> NodeHeartbeatRequestView<'a> {
    /// Field 1 `NodeStatusProto node_status`.
    #[inline]
    pub fn node_status(&self) -> Result<Option<NodeStatusView<'a>>, DecodeError> {
        Ok(last_len(self.bytes, HB, 1)?.map(NodeStatusView::new))
    }
    /// Field 2 `MasterKeyProto last_known_container_token_master_key`.
    #[inline]
    pub fn last_known_container_token_master_key(
        &self,
    ) -> Result<Option<MasterKeyView<'a>>, DecodeError> {
        Ok(last_len(self.bytes, HB, 2)?.map(MasterKeyView::new))
    }
    /// Field 3 `MasterKeyProto last_known_nm_token_master_key`.
    #[inline]
    pub fn last_known_nm_token_master_key(&self) -> Result<Option<MasterKeyView<'a>>, DecodeError> {
        Ok(last_len(self.bytes, HB, 3)?.map(MasterKeyView::new))
    }
    /// Field 4 `NodeLabelsProto nodeLabels`, raw bytes.
    #[inline]
    pub fn node_labels(&self) -> Result<Option<&'a [u8]>, DecodeError> {
        last_len(self.bytes, HB, 4)
    }
    /// Field 5 `repeated LogAggregationReportProto`, raw bytes of each.
    #[inline]
    pub fn log_aggregation_reports_for_apps(&self) -> Repeated<'a, &'a [u8]> {
        Repeated::new(self.bytes, HB, 5)
    }
    /// Field 6 `repeated AppCollectorDataProto registering_collectors`, raw bytes of each.
    #[inline]
    pub fn registering_collectors(&self) -> Repeated<'a, &'a [u8]> {
        Repeated::new(self.bytes, HB, 6)
    }
    /// Field 7 `NodeAttributesProto nodeAttributes`, raw bytes.
    #[inline]
    pub fn node_attributes(&self) -> Result<Option<&'a [u8]>, DecodeError> {
        last_len(self.bytes, HB, 7)
    }
    /// Field 8 `int64 tokenSequenceNo`.
    #[inline]
    pub fn token_sequence_no(&self) -> Result<Option<i64>, DecodeError> {
        Ok(last_varint(self.bytes, HB, 8)?.map(|v| v as i64))
    }
}

// ---------------------------------------------------------------------------------------

message_view! {
    /// `hadoop.yarn.NodeStatusProto`: node id, response id, the container statuses.
    NodeStatusView => s::NodeStatusProto
}

const NS: &Schema = &s::NodeStatusProto;

impl<'a> NodeStatusView<'a> {
    /// Field 1 `NodeIdProto node_id`.
    #[inline]
    pub fn node_id(&self) -> Result<Option<NodeIdView<'a>>, DecodeError> {
        Ok(last_len(self.bytes, NS, 1)?.map(NodeIdView::new))
    }
    /// Field 2 `int32 response_id`.
    #[inline]
    pub fn response_id(&self) -> Result<Option<i32>, DecodeError> {
        Ok(last_varint(self.bytes, NS, 2)?.map(|v| v as i32))
    }
    /// Field 3 `repeated ContainerStatusProto containersStatuses`.
    #[inline]
    pub fn containers_statuses(&self) -> Repeated<'a, ContainerStatusView<'a>> {
        Repeated::new(self.bytes, NS, 3)
    }
    /// Field 4 `NodeHealthStatusProto nodeHealthStatus`.
    #[inline]
    pub fn node_health_status(&self) -> Result<Option<NodeHealthStatusView<'a>>, DecodeError> {
        Ok(last_len(self.bytes, NS, 4)?.map(NodeHealthStatusView::new))
    }
    /// Field 5 `repeated ApplicationIdProto keep_alive_applications`.
    #[inline]
    pub fn keep_alive_applications(&self) -> Repeated<'a, ApplicationIdView<'a>> {
        Repeated::new(self.bytes, NS, 5)
    }
    /// Field 6 `ResourceUtilizationProto containers_utilization`, raw bytes.
    #[inline]
    pub fn containers_utilization(&self) -> Result<Option<&'a [u8]>, DecodeError> {
        last_len(self.bytes, NS, 6)
    }
    /// Field 7 `ResourceUtilizationProto node_utilization`, raw bytes.
    #[inline]
    pub fn node_utilization(&self) -> Result<Option<&'a [u8]>, DecodeError> {
        last_len(self.bytes, NS, 7)
    }
    /// Field 8 `repeated ContainerProto increased_containers`, raw bytes of each.
    #[inline]
    pub fn increased_containers(&self) -> Repeated<'a, &'a [u8]> {
        Repeated::new(self.bytes, NS, 8)
    }
    /// Field 9 `OpportunisticContainersStatusProto`, raw bytes.
    #[inline]
    pub fn opportunistic_containers_status(&self) -> Result<Option<&'a [u8]>, DecodeError> {
        last_len(self.bytes, NS, 9)
    }
}

// ---------------------------------------------------------------------------------------

message_view! {
    /// `hadoop.yarn.ContainerStatusProto`: one container in a heartbeat.
    ContainerStatusView => s::ContainerStatusProto
}

const CS: &Schema = &s::ContainerStatusProto;

/// The four fields the RM's status update needs, read in one pass by
/// [`ContainerStatusView::summary`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContainerStatusSummary<'a> {
    /// Field 1 (last occurrence).
    pub container_id: Option<ContainerIdView<'a>>,
    /// Field 2 as on the wire (last occurrence).
    pub state_raw: Option<i32>,
    /// Field 2, last known value (Java semantics).
    pub state: Option<ContainerStateProto>,
    /// Field 4, −1000 ([`EXIT_STATUS_INVALID`]) when absent.
    pub exit_status: i32,
    /// Field 6 as on the wire (last occurrence).
    pub execution_type_raw: Option<i32>,
    /// Field 6, last known value, GUARANTEED when absent.
    pub execution_type: ExecutionTypeProto,
}

/// The status update's fields of one container, flattened: what
/// [`ContainerStatusView::hot`] reads in one pass over the status and its container id.
/// Absent fields read as 0 (ids) or their proto2 defaults; the `has_*` flags keep presence.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ContainerHot {
    /// `container_id.app_attempt_id.application_id.id` (Java's ContainerId takes the
    /// application from the attempt).
    pub app_id: i32,
    /// `container_id.app_attempt_id.application_id.cluster_timestamp`.
    pub cluster_timestamp: i64,
    /// `container_id.app_attempt_id.attemptId`.
    pub attempt_id: i32,
    /// `container_id.id` (epoch in the high bits).
    pub container_id: i64,
    /// True when `container_id`, its attempt and the attempt's application id are present.
    pub has_full_id: bool,
    /// `state` as on the wire, 0 when absent (ContainerStateProto starts at 1).
    pub state_raw: i32,
    /// `state`, last known value (Java semantics).
    pub state: Option<ContainerStateProto>,
    /// `exit_status`, −1000 when absent.
    pub exit_status: i32,
    /// `executionType`, last known value, GUARANTEED when absent.
    pub execution_type: ExecutionTypeProto,
}

impl<'a> ContainerStatusView<'a> {
    /// The hot path of the RM's status update in one pass: the container id (application id,
    /// cluster timestamp, attempt, id), state, exit status and execution type. Nested
    /// messages are read in place, without intermediate views; the capability and
    /// diagnostics are skipped by length. Checks the wire types of the fields it reads
    /// (last occurrence wins, as everywhere).
    #[inline]
    pub fn hot(&self) -> Result<ContainerHot, DecodeError> {
        exact!(self.hot_g::<E>())
    }

    #[inline(always)]
    fn hot_g<E: Failure>(&self) -> Result<ContainerHot, E> {
        let mut h = ContainerHot {
            exit_status: EXIT_STATUS_INVALID,
            execution_type: ExecutionTypeProto::Guaranteed,
            ..ContainerHot::default()
        };
        let mut id_bytes: Option<&[u8]> = None;
        let mut r = Reader::new(self.bytes);
        while !r.is_empty() {
            let (n, wt) = match r.one_byte_tag() {
                Some(0x0a) => {
                    id_bytes = Some(r.len_delimited::<E>()?);
                    continue;
                }
                Some(0x10) => {
                    let x = r.varint::<E>()? as i32;
                    h.state_raw = x;
                    if let Ok(e) = ContainerStateProto::try_from(x) {
                        h.state = Some(e);
                    }
                    continue;
                }
                Some(0x20) => {
                    h.exit_status = r.varint::<E>()? as i32;
                    continue;
                }
                Some(0x30) => {
                    if let Ok(e) = ExecutionTypeProto::try_from(r.varint::<E>()? as i32) {
                        h.execution_type = e;
                    }
                    continue;
                }
                Some(0x1a | 0x2a | 0x3a) => {
                    r.len_delimited::<E>()?;
                    continue;
                }
                Some(b) => Reader::split_tag::<E>(b)?,
                None => r.tag::<E>()?,
            };
            match (n, wt) {
                (1, WireType::Len) => id_bytes = Some(r.len_delimited::<E>()?),
                (2, WireType::Varint) => {
                    let x = r.varint::<E>()? as i32;
                    h.state_raw = x;
                    if let Ok(e) = ContainerStateProto::try_from(x) {
                        h.state = Some(e);
                    }
                }
                (4, WireType::Varint) => h.exit_status = r.varint::<E>()? as i32,
                (6, WireType::Varint) => {
                    if let Ok(e) = ExecutionTypeProto::try_from(r.varint::<E>()? as i32) {
                        h.execution_type = e;
                    }
                }
                (1 | 2 | 4 | 6, other) => return fail(|| super::wrong_wire(CS, n, other)),
                _ => r.skip_value::<E>(n, wt, 0)?,
            }
        }
        if let Some(id) = id_bytes {
            let p = ContainerIdView::new(id).parts_g::<E>()?;
            h.container_id = p.id.unwrap_or(0);
            if let Some(attempt) = p.app_attempt_id {
                let (app, attempt_id) = attempt.parts_g::<E>()?;
                h.attempt_id = attempt_id.unwrap_or(0);
                if let Some(app) = app {
                    let (app_id, ts) = app.parts_g::<E>()?;
                    h.app_id = app_id.unwrap_or(0);
                    h.cluster_timestamp = ts.unwrap_or(0);
                    h.has_full_id = true;
                }
            }
        }
        Ok(h)
    }

    /// Reads container id, state, exit status and execution type in one pass over the
    /// status (the capability and diagnostics are skipped by length). Only these four
    /// fields' wire types are checked here; `validate()` checks all.
    #[inline]
    pub fn summary(&self) -> Result<ContainerStatusSummary<'a>, DecodeError> {
        exact!(self.summary_g::<E>())
    }

    #[inline(always)]
    fn summary_g<E: Failure>(&self) -> Result<ContainerStatusSummary<'a>, E> {
        let mut container_id = None;
        let mut state_raw = None;
        let mut state = None;
        let mut exit_status = None;
        let mut execution_type_raw = None;
        let mut execution_type = None;
        let mut r = Reader::new(self.bytes);
        while !r.is_empty() {
            // Fast path: whole one-byte tags of the fields read here and of the ones skipped.
            let (n, wt) = match r.one_byte_tag() {
                Some(0x0a) => {
                    container_id = Some(ContainerIdView::new(r.len_delimited::<E>()?));
                    continue;
                }
                Some(0x10) => {
                    let x = r.varint::<E>()? as i32;
                    state_raw = Some(x);
                    if let Ok(e) = ContainerStateProto::try_from(x) {
                        state = Some(e);
                    }
                    continue;
                }
                Some(0x20) => {
                    exit_status = Some(r.varint::<E>()? as i32);
                    continue;
                }
                Some(0x30) => {
                    let x = r.varint::<E>()? as i32;
                    execution_type_raw = Some(x);
                    if let Ok(e) = ExecutionTypeProto::try_from(x) {
                        execution_type = Some(e);
                    }
                    continue;
                }
                Some(0x1a | 0x2a | 0x3a) => {
                    r.len_delimited::<E>()?;
                    continue;
                }
                Some(b) => Reader::split_tag::<E>(b)?,
                None => r.tag::<E>()?,
            };
            match (n, wt) {
                (1, WireType::Len) => {
                    container_id = Some(ContainerIdView::new(r.len_delimited::<E>()?))
                }
                (2, WireType::Varint) => {
                    let x = r.varint::<E>()? as i32;
                    state_raw = Some(x);
                    if let Ok(e) = ContainerStateProto::try_from(x) {
                        state = Some(e);
                    }
                }
                (4, WireType::Varint) => exit_status = Some(r.varint::<E>()? as i32),
                (6, WireType::Varint) => {
                    let x = r.varint::<E>()? as i32;
                    execution_type_raw = Some(x);
                    if let Ok(e) = ExecutionTypeProto::try_from(x) {
                        execution_type = Some(e);
                    }
                }
                (1 | 2 | 4 | 6, other) => return fail(|| super::wrong_wire(CS, n, other)),
                _ => r.skip_value::<E>(n, wt, 0)?,
            }
        }
        Ok(ContainerStatusSummary {
            container_id,
            state_raw,
            state,
            exit_status: exit_status.unwrap_or(EXIT_STATUS_INVALID),
            execution_type_raw,
            execution_type: execution_type.unwrap_or(ExecutionTypeProto::Guaranteed),
        })
    }

    /// Field 1 `ContainerIdProto container_id`.
    #[inline]
    pub fn container_id(&self) -> Result<Option<ContainerIdView<'a>>, DecodeError> {
        Ok(last_len(self.bytes, CS, 1)?.map(ContainerIdView::new))
    }
    /// Field 2 `ContainerStateProto state` as on the wire.
    #[inline]
    pub fn state_raw(&self) -> Result<Option<i32>, DecodeError> {
        Ok(last_varint(self.bytes, CS, 2)?.map(|v| v as i32))
    }
    /// Field 2, last known value.
    #[inline]
    pub fn state(&self) -> Result<Option<ContainerStateProto>, DecodeError> {
        let v = last_known_enum(self.bytes, CS, 2, known_state)?;
        Ok(v.and_then(|v| ContainerStateProto::try_from(v).ok()))
    }
    /// Field 3 `string diagnostics [default = "N/A"]`.
    #[inline]
    pub fn diagnostics(&self) -> Result<&'a str, DecodeError> {
        Ok(self.diagnostics_opt()?.unwrap_or(DIAGNOSTICS_DEFAULT))
    }
    /// Field 3 with presence.
    #[inline]
    pub fn diagnostics_opt(&self) -> Result<Option<&'a str>, DecodeError> {
        opt_str(last_len(self.bytes, CS, 3)?, CS, 3)
    }
    /// Field 4 `int32 exit_status [default = -1000]`.
    #[inline]
    pub fn exit_status(&self) -> Result<i32, DecodeError> {
        Ok(self.exit_status_opt()?.unwrap_or(EXIT_STATUS_INVALID))
    }
    /// Field 4 with presence.
    #[inline]
    pub fn exit_status_opt(&self) -> Result<Option<i32>, DecodeError> {
        Ok(last_varint(self.bytes, CS, 4)?.map(|v| v as i32))
    }
    /// Field 5 `ResourceProto capability`.
    #[inline]
    pub fn capability(&self) -> Result<Option<ResourceView<'a>>, DecodeError> {
        Ok(last_len(self.bytes, CS, 5)?.map(ResourceView::new))
    }
    /// Field 6 `ExecutionTypeProto executionType` as on the wire.
    #[inline]
    pub fn execution_type_raw(&self) -> Result<Option<i32>, DecodeError> {
        Ok(last_varint(self.bytes, CS, 6)?.map(|v| v as i32))
    }
    /// Field 6 `[default = GUARANTEED]`: last known value, else GUARANTEED.
    #[inline]
    pub fn execution_type(&self) -> Result<ExecutionTypeProto, DecodeError> {
        let v = last_known_enum(self.bytes, CS, 6, known_exec)?;
        Ok(v.and_then(|v| ExecutionTypeProto::try_from(v).ok())
            .unwrap_or(ExecutionTypeProto::Guaranteed))
    }
    /// Field 7 `repeated StringStringMapProto container_attributes`.
    #[inline]
    pub fn container_attributes(&self) -> Repeated<'a, StringStringMapView<'a>> {
        Repeated::new(self.bytes, CS, 7)
    }
    /// Field 8 `ContainerSubStateProto container_sub_state` as on the wire.
    #[inline]
    pub fn container_sub_state_raw(&self) -> Result<Option<i32>, DecodeError> {
        Ok(last_varint(self.bytes, CS, 8)?.map(|v| v as i32))
    }
    /// Field 8, last known value.
    #[inline]
    pub fn container_sub_state(&self) -> Result<Option<ContainerSubStateProto>, DecodeError> {
        let v = last_known_enum(self.bytes, CS, 8, |v| {
            ContainerSubStateProto::try_from(v).is_ok()
        })?;
        Ok(v.and_then(|v| ContainerSubStateProto::try_from(v).ok()))
    }
}

// ---------------------------------------------------------------------------------------

message_view! {
    /// `hadoop.yarn.ContainerIdProto`. Java builds a ContainerId from `app_attempt_id` and
    /// `id`; `app_id` duplicates the attempt's application id.
    ContainerIdView => s::ContainerIdProto
}

const CID: &Schema = &s::ContainerIdProto;

/// All fields of a [`ContainerIdView`], read in one pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContainerIdParts<'a> {
    pub app_id: Option<ApplicationIdView<'a>>,
    pub app_attempt_id: Option<ApplicationAttemptIdView<'a>>,
    pub id: Option<i64>,
}

impl<'a> ContainerIdView<'a> {
    /// Fields 1–3 in one pass.
    #[inline]
    pub fn parts(&self) -> Result<ContainerIdParts<'a>, DecodeError> {
        exact!(self.parts_g::<E>())
    }

    #[inline(always)]
    fn parts_g<E: Failure>(&self) -> Result<ContainerIdParts<'a>, E> {
        let mut p = ContainerIdParts {
            app_id: None,
            app_attempt_id: None,
            id: None,
        };
        let mut r = Reader::new(self.bytes);
        while !r.is_empty() {
            let (n, wt) = match r.one_byte_tag() {
                Some(0x0a) => {
                    p.app_id = Some(ApplicationIdView::new(r.len_delimited::<E>()?));
                    continue;
                }
                Some(0x12) => {
                    p.app_attempt_id = Some(ApplicationAttemptIdView::new(r.len_delimited::<E>()?));
                    continue;
                }
                Some(0x18) => {
                    p.id = Some(r.varint::<E>()? as i64);
                    continue;
                }
                Some(b) => Reader::split_tag::<E>(b)?,
                None => r.tag::<E>()?,
            };
            match (n, wt) {
                (1, WireType::Len) => {
                    p.app_id = Some(ApplicationIdView::new(r.len_delimited::<E>()?))
                }
                (2, WireType::Len) => {
                    p.app_attempt_id = Some(ApplicationAttemptIdView::new(r.len_delimited::<E>()?))
                }
                (3, WireType::Varint) => p.id = Some(r.varint::<E>()? as i64),
                (1..=3, other) => return fail(|| super::wrong_wire(CID, n, other)),
                _ => r.skip_value::<E>(n, wt, 0)?,
            }
        }
        Ok(p)
    }
    /// Field 1 `ApplicationIdProto app_id`.
    #[inline]
    pub fn app_id(&self) -> Result<Option<ApplicationIdView<'a>>, DecodeError> {
        Ok(last_len(self.bytes, CID, 1)?.map(ApplicationIdView::new))
    }
    /// Field 2 `ApplicationAttemptIdProto app_attempt_id`.
    #[inline]
    pub fn app_attempt_id(&self) -> Result<Option<ApplicationAttemptIdView<'a>>, DecodeError> {
        Ok(last_len(self.bytes, CID, 2)?.map(ApplicationAttemptIdView::new))
    }
    /// Field 3 `int64 id` (epoch in the high bits).
    #[inline]
    pub fn id(&self) -> Result<Option<i64>, DecodeError> {
        Ok(last_varint(self.bytes, CID, 3)?.map(|v| v as i64))
    }
}

message_view! {
    /// `hadoop.yarn.ApplicationAttemptIdProto`.
    ApplicationAttemptIdView => s::ApplicationAttemptIdProto
}

const AAID: &Schema = &s::ApplicationAttemptIdProto;

impl<'a> ApplicationAttemptIdView<'a> {
    /// Fields 1 and 2 in one pass.
    #[inline]
    pub fn parts(&self) -> Result<(Option<ApplicationIdView<'a>>, Option<i32>), DecodeError> {
        exact!(self.parts_g::<E>())
    }

    #[inline(always)]
    fn parts_g<E: Failure>(&self) -> Result<(Option<ApplicationIdView<'a>>, Option<i32>), E> {
        let (mut app, mut attempt) = (None, None);
        let mut r = Reader::new(self.bytes);
        while !r.is_empty() {
            let (n, wt) = match r.one_byte_tag() {
                Some(0x0a) => {
                    app = Some(ApplicationIdView::new(r.len_delimited::<E>()?));
                    continue;
                }
                Some(0x10) => {
                    attempt = Some(r.varint::<E>()? as i32);
                    continue;
                }
                Some(b) => Reader::split_tag::<E>(b)?,
                None => r.tag::<E>()?,
            };
            match (n, wt) {
                (1, WireType::Len) => app = Some(ApplicationIdView::new(r.len_delimited::<E>()?)),
                (2, WireType::Varint) => attempt = Some(r.varint::<E>()? as i32),
                (1 | 2, other) => return fail(|| super::wrong_wire(AAID, n, other)),
                _ => r.skip_value::<E>(n, wt, 0)?,
            }
        }
        Ok((app, attempt))
    }
    /// Field 1 `ApplicationIdProto application_id`.
    #[inline]
    pub fn application_id(&self) -> Result<Option<ApplicationIdView<'a>>, DecodeError> {
        Ok(last_len(self.bytes, AAID, 1)?.map(ApplicationIdView::new))
    }
    /// Field 2 `int32 attemptId`.
    #[inline]
    pub fn attempt_id(&self) -> Result<Option<i32>, DecodeError> {
        Ok(last_varint(self.bytes, AAID, 2)?.map(|v| v as i32))
    }
}

message_view! {
    /// `hadoop.yarn.ApplicationIdProto`.
    ApplicationIdView => s::ApplicationIdProto
}

const AID: &Schema = &s::ApplicationIdProto;

impl<'a> ApplicationIdView<'a> {
    /// Fields 1 and 2 (`id`, `cluster_timestamp`) in one pass.
    #[inline]
    pub fn parts(&self) -> Result<(Option<i32>, Option<i64>), DecodeError> {
        exact!(self.parts_g::<E>())
    }

    #[inline(always)]
    fn parts_g<E: Failure>(&self) -> Result<(Option<i32>, Option<i64>), E> {
        let (mut id, mut ts) = (None, None);
        let mut r = Reader::new(self.bytes);
        while !r.is_empty() {
            let (n, wt) = match r.one_byte_tag() {
                Some(0x08) => {
                    id = Some(r.varint::<E>()? as i32);
                    continue;
                }
                Some(0x10) => {
                    ts = Some(r.varint::<E>()? as i64);
                    continue;
                }
                Some(b) => Reader::split_tag::<E>(b)?,
                None => r.tag::<E>()?,
            };
            match (n, wt) {
                (1, WireType::Varint) => id = Some(r.varint::<E>()? as i32),
                (2, WireType::Varint) => ts = Some(r.varint::<E>()? as i64),
                (1 | 2, other) => return fail(|| super::wrong_wire(AID, n, other)),
                _ => r.skip_value::<E>(n, wt, 0)?,
            }
        }
        Ok((id, ts))
    }
    /// Field 1 `int32 id`.
    #[inline]
    pub fn id(&self) -> Result<Option<i32>, DecodeError> {
        Ok(last_varint(self.bytes, AID, 1)?.map(|v| v as i32))
    }
    /// Field 2 `int64 cluster_timestamp`.
    #[inline]
    pub fn cluster_timestamp(&self) -> Result<Option<i64>, DecodeError> {
        Ok(last_varint(self.bytes, AID, 2)?.map(|v| v as i64))
    }
}

// ---------------------------------------------------------------------------------------

message_view! {
    /// `hadoop.yarn.ResourceProto`: memory, vcores and one entry per resource type.
    ResourceView => s::ResourceProto
}

const RES: &Schema = &s::ResourceProto;

impl<'a> ResourceView<'a> {
    /// Field 1 `int64 memory` (MB).
    #[inline]
    pub fn memory(&self) -> Result<Option<i64>, DecodeError> {
        Ok(last_varint(self.bytes, RES, 1)?.map(|v| v as i64))
    }
    /// Field 2 `int32 virtual_cores`.
    #[inline]
    pub fn virtual_cores(&self) -> Result<Option<i32>, DecodeError> {
        Ok(last_varint(self.bytes, RES, 2)?.map(|v| v as i32))
    }
    /// Field 3 `repeated ResourceInformationProto resource_value_map`.
    #[inline]
    pub fn resource_value_map(&self) -> Repeated<'a, ResourceInformationView<'a>> {
        Repeated::new(self.bytes, RES, 3)
    }
}

message_view! {
    /// `hadoop.yarn.ResourceInformationProto`: one resource type's value (`memory-mb` in
    /// units `Mi`, `vcores`, GPUs, ...).
    ResourceInformationView => s::ResourceInformationProto
}

const RI: &Schema = &s::ResourceInformationProto;

impl<'a> ResourceInformationView<'a> {
    /// Field 1 `required string key`.
    #[inline]
    pub fn key(&self) -> Result<&'a str, DecodeError> {
        utf8(required(last_len(self.bytes, RI, 1)?, RI, 1)?, RI, 1)
    }
    /// Field 2 `int64 value`.
    #[inline]
    pub fn value(&self) -> Result<Option<i64>, DecodeError> {
        Ok(last_varint(self.bytes, RI, 2)?.map(|v| v as i64))
    }
    /// Field 3 `string units`.
    #[inline]
    pub fn units(&self) -> Result<Option<&'a str>, DecodeError> {
        opt_str(last_len(self.bytes, RI, 3)?, RI, 3)
    }
    /// Field 4 `ResourceTypesProto type` as on the wire.
    #[inline]
    pub fn resource_type_raw(&self) -> Result<Option<i32>, DecodeError> {
        Ok(last_varint(self.bytes, RI, 4)?.map(|v| v as i32))
    }
    /// Field 4, last known value.
    #[inline]
    pub fn resource_type(&self) -> Result<Option<ResourceTypesProto>, DecodeError> {
        let v = last_known_enum(self.bytes, RI, 4, |v| {
            ResourceTypesProto::try_from(v).is_ok()
        })?;
        Ok(v.and_then(|v| ResourceTypesProto::try_from(v).ok()))
    }
    /// Field 5 `repeated string tags`.
    #[inline]
    pub fn tags(&self) -> Repeated<'a, &'a str> {
        Repeated::new(self.bytes, RI, 5)
    }
    /// Field 6 `repeated StringStringMapProto attributes`.
    #[inline]
    pub fn attributes(&self) -> Repeated<'a, StringStringMapView<'a>> {
        Repeated::new(self.bytes, RI, 6)
    }
}

message_view! {
    /// `hadoop.yarn.StringStringMapProto`: an optional key and an optional value.
    StringStringMapView => s::StringStringMapProto
}

const SSM: &Schema = &s::StringStringMapProto;

impl<'a> StringStringMapView<'a> {
    /// Field 1 `string key`.
    #[inline]
    pub fn key(&self) -> Result<Option<&'a str>, DecodeError> {
        opt_str(last_len(self.bytes, SSM, 1)?, SSM, 1)
    }
    /// Field 2 `string value`.
    #[inline]
    pub fn value(&self) -> Result<Option<&'a str>, DecodeError> {
        opt_str(last_len(self.bytes, SSM, 2)?, SSM, 2)
    }
}

// ---------------------------------------------------------------------------------------

message_view! {
    /// `hadoop.yarn.MasterKeyProto`: a container-token or NM-token master key.
    MasterKeyView => s::MasterKeyProto
}

const MK: &Schema = &s::MasterKeyProto;

impl<'a> MasterKeyView<'a> {
    /// Field 1 `int32 key_id`.
    #[inline]
    pub fn key_id(&self) -> Result<Option<i32>, DecodeError> {
        Ok(last_varint(self.bytes, MK, 1)?.map(|v| v as i32))
    }
    /// Field 2 `bytes bytes` (the secret).
    #[inline]
    pub fn key_bytes(&self) -> Result<Option<&'a [u8]>, DecodeError> {
        last_len(self.bytes, MK, 2)
    }
}

message_view! {
    /// `hadoop.yarn.NodeIdProto`: host and port of a NodeManager.
    NodeIdView => s::NodeIdProto
}

const NID: &Schema = &s::NodeIdProto;

impl<'a> NodeIdView<'a> {
    /// Field 1 `string host`.
    #[inline]
    pub fn host(&self) -> Result<Option<&'a str>, DecodeError> {
        opt_str(last_len(self.bytes, NID, 1)?, NID, 1)
    }
    /// Field 2 `int32 port`.
    #[inline]
    pub fn port(&self) -> Result<Option<i32>, DecodeError> {
        Ok(last_varint(self.bytes, NID, 2)?.map(|v| v as i32))
    }
}

message_view! {
    /// `hadoop.yarn.NodeHealthStatusProto`.
    NodeHealthStatusView => s::NodeHealthStatusProto
}

const NH: &Schema = &s::NodeHealthStatusProto;

/// The three fields of a `NodeHealthStatusProto`, read in one pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NodeHealth<'a> {
    pub is_node_healthy: Option<bool>,
    pub health_report: Option<&'a str>,
    pub last_health_report_time: Option<i64>,
}

impl<'a> NodeHealthStatusView<'a> {
    /// All three fields in one pass (the last occurrence of each wins, as in the one-field
    /// readers); a wrong wire type or bad UTF-8 in the report is the error.
    #[inline]
    pub fn read(&self) -> Result<NodeHealth<'a>, DecodeError> {
        let raw = exact!(self.read_g::<E>())?;
        Ok(NodeHealth {
            is_node_healthy: raw.0,
            health_report: opt_str(raw.1, NH, 2)?,
            last_health_report_time: raw.2,
        })
    }

    #[inline(always)]
    #[allow(clippy::type_complexity)]
    fn read_g<E: Failure>(&self) -> Result<(Option<bool>, Option<&'a [u8]>, Option<i64>), E> {
        let (mut healthy, mut report, mut time) = (None, None, None);
        let mut r = Reader::new(self.bytes);
        while !r.is_empty() {
            let (n, wt) = match r.one_byte_tag() {
                Some(b) => Reader::split_tag::<E>(b)?,
                None => r.tag::<E>()?,
            };
            match (n, wt) {
                (1, WireType::Varint) => healthy = Some(r.varint::<E>()? != 0),
                (2, WireType::Len) => report = Some(r.len_delimited::<E>()?),
                (3, WireType::Varint) => time = Some(r.varint::<E>()? as i64),
                (1..=3, other) => return fail(|| super::wrong_wire(NH, n, other)),
                _ => r.skip_value::<E>(n, wt, 0)?,
            }
        }
        Ok((healthy, report, time))
    }

    /// Field 1 `bool is_node_healthy`.
    #[inline]
    pub fn is_node_healthy(&self) -> Result<Option<bool>, DecodeError> {
        Ok(last_varint(self.bytes, NH, 1)?.map(|v| v != 0))
    }
    /// Field 2 `string health_report`.
    #[inline]
    pub fn health_report(&self) -> Result<Option<&'a str>, DecodeError> {
        opt_str(last_len(self.bytes, NH, 2)?, NH, 2)
    }
    /// Field 3 `int64 last_health_report_time` (ms since the epoch).
    #[inline]
    pub fn last_health_report_time(&self) -> Result<Option<i64>, DecodeError> {
        Ok(last_varint(self.bytes, NH, 3)?.map(|v| v as i64))
    }
}

message_view! {
    /// `hadoop.yarn.ResourceUtilizationProto`: a node's or its containers' use.
    ResourceUtilizationView => s::ResourceUtilizationProto
}

const RU: &Schema = &s::ResourceUtilizationProto;

/// The scalar fields of a `ResourceUtilizationProto` (custom resources are not read).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ResourceUtilization {
    /// Field 1 `int32 pmem` (MB), 0 when absent.
    pub pmem: i32,
    /// Field 2 `int32 vmem` (MB), 0 when absent.
    pub vmem: i32,
    /// Field 3 `float cpu`, 0 when absent.
    pub cpu: f32,
}

impl ResourceUtilizationView<'_> {
    /// pmem, vmem and cpu in one pass (the last occurrence of each wins); other fields are
    /// skipped by their wire type.
    #[inline]
    pub fn scalars(&self) -> Result<ResourceUtilization, DecodeError> {
        exact!(self.scalars_g::<E>())
    }

    #[inline(always)]
    fn scalars_g<E: Failure>(&self) -> Result<ResourceUtilization, E> {
        let mut u = ResourceUtilization::default();
        let mut r = Reader::new(self.bytes);
        while !r.is_empty() {
            let (n, wt) = match r.one_byte_tag() {
                Some(b) => Reader::split_tag::<E>(b)?,
                None => r.tag::<E>()?,
            };
            match (n, wt) {
                (1, WireType::Varint) => u.pmem = r.varint::<E>()? as i32,
                (2, WireType::Varint) => u.vmem = r.varint::<E>()? as i32,
                (3, WireType::Fixed32) => u.cpu = f32::from_bits(r.fixed32::<E>()?),
                (1..=3, other) => return fail(|| super::wrong_wire(RU, n, other)),
                _ => r.skip_value::<E>(n, wt, 0)?,
            }
        }
        Ok(u)
    }
}

// ---------------------------------------------------------------------------------------
// The other direction: what the RM answers a heartbeat with, for node-side readers (the load
// generator in `benches` reads every response with it, once per heartbeat).

message_view! {
    /// `hadoop.yarn.NodeHeartbeatResponseProto`, the answer to `nodeHeartbeat`: the scalars a
    /// node acts on and the rolled master keys. The id lists and the rest are not read here.
    NodeHeartbeatResponseView => s::NodeHeartbeatResponseProto
}

const HBR: &Schema = &s::NodeHeartbeatResponseProto;

#[inline]
fn known_action(v: i32) -> bool {
    NodeActionProto::try_from(v).is_ok()
}

impl<'a> NodeHeartbeatResponseView<'a> {
    /// Field 1 `int32 response_id`.
    #[inline]
    pub fn response_id(&self) -> Result<Option<i32>, DecodeError> {
        Ok(last_varint(self.bytes, HBR, 1)?.map(|v| v as i32))
    }
    /// Field 2 `MasterKeyProto container_token_master_key` (sent when the RM rolled it).
    #[inline]
    pub fn container_token_master_key(&self) -> Result<Option<MasterKeyView<'a>>, DecodeError> {
        Ok(last_len(self.bytes, HBR, 2)?.map(MasterKeyView::new))
    }
    /// Field 3 `MasterKeyProto nm_token_master_key` (sent when the RM rolled it).
    #[inline]
    pub fn nm_token_master_key(&self) -> Result<Option<MasterKeyView<'a>>, DecodeError> {
        Ok(last_len(self.bytes, HBR, 3)?.map(MasterKeyView::new))
    }
    /// Field 4 `NodeActionProto nodeAction`; an unknown value is skipped as Java skips it, so
    /// `None` (absent or unknown) means the default, `NORMAL`.
    #[inline]
    pub fn node_action(&self) -> Result<Option<NodeActionProto>, DecodeError> {
        Ok(last_known_enum(self.bytes, HBR, 4, known_action)?
            .and_then(|v| NodeActionProto::try_from(v).ok()))
    }
    /// Field 7 `int64 nextHeartBeatInterval`, ms.
    #[inline]
    pub fn next_heart_beat_interval(&self) -> Result<Option<i64>, DecodeError> {
        Ok(last_varint(self.bytes, HBR, 7)?.map(|v| v as i64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pb::hadoop::yarn::{MasterKeyProto, NodeHeartbeatResponseProto};
    use prost::Message;

    #[test]
    fn heartbeat_response_view_reads_what_prost_wrote() {
        let mk = |id| MasterKeyProto {
            key_id: Some(id),
            bytes: Some(vec![1, 2, 3]),
        };
        let b = NodeHeartbeatResponseProto {
            response_id: Some(41),
            container_token_master_key: Some(mk(7)),
            nm_token_master_key: Some(mk(-3)),
            node_action: Some(NodeActionProto::Resync as i32),
            next_heart_beat_interval: Some(1000),
            diagnostics_message: Some("d".into()),
            ..Default::default()
        }
        .encode_to_vec();
        let v = NodeHeartbeatResponseView::new(&b);
        v.validate().unwrap();
        assert_eq!(v.response_id().unwrap(), Some(41));
        let ck = v.container_token_master_key().unwrap().unwrap();
        assert_eq!(
            (ck.key_id().unwrap(), ck.key_bytes().unwrap()),
            (Some(7), Some(&[1u8, 2, 3][..]))
        );
        let nk = v.nm_token_master_key().unwrap().unwrap();
        assert_eq!(nk.key_id().unwrap(), Some(-3));
        assert_eq!(v.node_action().unwrap(), Some(NodeActionProto::Resync));
        assert_eq!(v.next_heart_beat_interval().unwrap(), Some(1000));

        // Absent fields; an unknown action is skipped (Java: NORMAL).
        let e = NodeHeartbeatResponseProto {
            node_action: Some(7),
            ..Default::default()
        }
        .encode_to_vec();
        let v = NodeHeartbeatResponseView::new(&e);
        assert_eq!(v.response_id().unwrap(), None);
        assert!(v.container_token_master_key().unwrap().is_none());
        assert_eq!(v.node_action().unwrap(), None);

        // Truncated input (inside the last field) is an error, not a panic.
        let v = NodeHeartbeatResponseView::new(&b[..b.len() - 1]);
        assert!(v.validate().is_err());
    }
}
