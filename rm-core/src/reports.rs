//! Attempt and container reports of ApplicationClientProtocol (`getApplicationAttemptReport`,
//! `getApplicationAttempts`, `getContainerReport`, `getContainers`): what `yarn
//! applicationattempt -list/-status` and `yarn container -list/-status` print.
//!
//! Java builds them in `RMAppAttemptImpl.createApplicationAttemptReport` and
//! `RMContainerImpl.createContainerReport`; `ClientRMService` lists every attempt of an
//! application, and for containers only the scheduler's *live* ones of an attempt (allocated and
//! not yet complete, the AM's included), so a finished attempt has none and a completed
//! container is "not found". The access checks (VIEW_APP) are the caller's
//! ([`crate::app_service`]), as are the exceptions' texts below.

use hadoop_wire::pb::hadoop::yarn::{
    ApplicationAttemptReportProto, ContainerReportProto, ContainerStateProto, ExecutionTypeProto,
    PriorityProto, YarnApplicationAttemptStateProto,
};
use hadoop_wire::token::identifier::attempt_to_proto;
use hadoop_wire::yarn::ids::{AttemptId, ContainerId};

use crate::apps::{exc, AppError, Apps, Attempt, AttemptState, LiveContainer, RmApp};

/// `ContainerNotFoundException`.
pub const CONTAINER_NOT_FOUND: &str =
    "org.apache.hadoop.yarn.exceptions.ContainerNotFoundException";

/// What a client sees of an attempt's state (`YarnApplicationAttemptState`).
pub fn attempt_state(s: AttemptState) -> YarnApplicationAttemptStateProto {
    use YarnApplicationAttemptStateProto as Y;
    match s {
        AttemptState::Scheduled => Y::AppAttemptScheduled,
        AttemptState::Allocated => Y::AppAttemptAllocated,
        AttemptState::Launched => Y::AppAttemptLaunched,
        AttemptState::Running => Y::AppAttemptRunning,
        AttemptState::Finishing => Y::AppAttemptFinishing,
        AttemptState::Finished => Y::AppAttemptFinished,
        AttemptState::Failed => Y::AppAttemptFailed,
        AttemptState::Killed => Y::AppAttemptKilled,
    }
}

/// `RMAppAttemptImpl.createApplicationAttemptReport`. Host "N/A" and RPC port -1 until the AM
/// registers; the tracking URLs as the application report gives them ("N/A" without one: this
/// RM runs no web proxy); diagnostics empty when there are none, as Java's.
pub fn attempt_report(at: &Attempt) -> ApplicationAttemptReportProto {
    let url = || {
        Some(if at.tracking_url.is_empty() {
            "N/A".to_string()
        } else {
            at.tracking_url.clone()
        })
    };
    ApplicationAttemptReportProto {
        application_attempt_id: Some(attempt_to_proto(&at.id)),
        host: Some(at.host.clone()),
        rpc_port: Some(at.rpc_port),
        tracking_url: url(),
        diagnostics: Some(at.diagnostics.clone()),
        yarn_application_attempt_state: Some(attempt_state(at.state) as i32),
        am_container_id: at.am_container.map(|c| c.to_proto()),
        original_tracking_url: url(),
        start_time: Some(at.start_ms as i64),
        finish_time: Some(at.finish_ms as i64),
    }
}

/// `RMContainerImpl.createContainerReport` of a live container: RUNNING, exit status 0, no
/// finish time and no diagnostics (the proto's "N/A") until it completes, and the NodeManager's
/// log page for it.
pub fn container_report(
    apps: &Apps,
    app: &RmApp,
    id: ContainerId,
    l: &LiveContainer,
) -> ContainerReportProto {
    let http = apps
        .node(&l.node)
        .map(|n| n.http_address.as_str())
        .filter(|h| !h.is_empty());
    ContainerReportProto {
        container_id: Some(id.to_proto()),
        resource: Some(l.res.to_proto()),
        node_id: Some(l.node.to_proto()),
        priority: Some(PriorityProto {
            priority: Some(l.priority),
        }),
        creation_time: Some(l.allocated_ms as i64),
        finish_time: Some(0),
        diagnostics_info: None,
        log_url: http.map(|h| format!("http://{h}/node/containerlogs/{id}/{}", app.user)),
        container_exit_status: Some(0),
        container_state: Some(ContainerStateProto::CRunning as i32),
        node_http_address: http.map(|h| format!("http://{h}")),
        execution_type: Some(ExecutionTypeProto::Guaranteed as i32),
        exposed_ports: None,
    }
}

/// An application's attempt, or Java's `ApplicationAttemptNotFoundException`.
pub fn attempt(app: &RmApp, id: AttemptId) -> Result<&Attempt, AppError> {
    app.attempts
        .iter()
        .find(|a| a.id == id)
        .ok_or_else(|| AppError {
            class: exc::ATTEMPT_NOT_FOUND,
            message: format!("ApplicationAttempt with id '{id}' doesn't exist in RM."),
        })
}

/// The attempt's live containers, in container-number order.
pub fn containers(apps: &Apps, app: &RmApp, at: &Attempt) -> Vec<ContainerReportProto> {
    let mut live: Vec<_> = at.live.iter().collect();
    live.sort_by_key(|(c, _)| c.id);
    live.into_iter()
        .map(|(&c, l)| container_report(apps, app, c, l))
        .collect()
}

/// One live container of an attempt, or Java's `ContainerNotFoundException`.
pub fn container(
    apps: &Apps,
    app: &RmApp,
    at: &Attempt,
    id: ContainerId,
) -> Result<ContainerReportProto, AppError> {
    at.live
        .get(&id)
        .map(|l| container_report(apps, app, id, l))
        .ok_or_else(|| AppError {
            class: CONTAINER_NOT_FOUND,
            message: format!("Container with id '{id}' doesn't exist in RM."),
        })
}
