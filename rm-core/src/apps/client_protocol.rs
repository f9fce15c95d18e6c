//! ApplicationClientProtocol on [`Apps`]: `getNewApplication`, `submitApplication` (the queue
//! ACL is the caller's answer), `getApplicationReport`, `killApplication`,
//! `failApplicationAttempt`, and the application reports ([`report`], [`reduced_report`]).
//! The RPC server, the other ACL checks and the queue info are in [`crate::app_service`] and
//! [`crate::app_acls`].

use hadoop_wire::pb::hadoop::yarn::{
    ApplicationReportProto, ApplicationResourceUsageReportProto, ApplicationSubmissionContextProto,
    ContainerLaunchContextProto, FinalApplicationStatusProto, PriorityProto,
};
use hadoop_wire::token::identifier::attempt_to_proto;
use hadoop_wire::yarn::ids::{AppId, AttemptId};

use crate::state_store::{Rec, SubmittedRec};

use super::{
    err, exc, AppError, AppState, Apps, Attempt, AttemptState, Cleanup, Res, RmApp, ANY,
    DEFAULT_QUEUE,
};

/// The AM resource a submission asks for: its resource request for `*`, else `resource`.
pub(super) fn am_resource(ctx: &ApplicationSubmissionContextProto) -> Option<Res> {
    ctx.am_container_resource_request
        .iter()
        .find(|r| r.resource_name.as_deref() == Some(ANY))
        .and_then(|r| r.capability.as_ref())
        .or(ctx.resource.as_ref())
        .map(Res::from_proto)
}

impl Apps {
    /// A SUBMITTED application from its submission context (shared by submit and recovery).
    pub(super) fn new_app(
        &self,
        id: AppId,
        ctx: &ApplicationSubmissionContextProto,
        am_spec: ContainerLaunchContextProto,
        asked: Res,
        user: &str,
        submit_ms: u64,
    ) -> RmApp {
        let global = self.cfg.max_attempts;
        let mut am_spec = am_spec;
        crate::am_launcher::set_am_environment(&mut am_spec, id, submit_ms);
        RmApp {
            id,
            name: ctx.application_name.clone().unwrap_or_else(|| "N/A".into()),
            queue: ctx.queue.clone().unwrap_or_else(|| DEFAULT_QUEUE.into()),
            user: user.to_string(),
            app_type: ctx
                .application_type
                .clone()
                .unwrap_or_else(|| "YARN".into()),
            tags: ctx.application_tags.clone(),
            priority: self.capped_priority(ctx.priority.and_then(|p| p.priority)),
            acls: crate::app_acls::AppAcls::from_protos(&am_spec.application_ac_ls),
            am_spec,
            am_res: asked.normalize(self.cfg.min_alloc, self.cfg.max_alloc),
            max_attempts: match ctx.max_app_attempts.unwrap_or(0) {
                n if n <= 0 || n > global => global,
                n => n,
            },
            state: AppState::Submitted,
            final_status: FinalApplicationStatusProto::AppUndefined,
            diagnostics: String::new(),
            submit_ms,
            launch_ms: 0,
            finish_ms: 0,
            attempts: Vec::new(),
            failures: 0,
            failures_validity_ms: ctx.attempt_failures_validity_interval.unwrap_or(0),
            failure_ms: Vec::new(),
            keep_containers: ctx
                .keep_containers_across_application_attempts
                .unwrap_or(false),
        }
    }

    /// The priority an application gets for `asked` (`CapacityScheduler.checkAndGetApplicationPriority`):
    /// the queue's default (0) when it asked none, at most `yarn.cluster.max-application-priority`.
    fn capped_priority(&self, asked: Option<i32>) -> i32 {
        asked.unwrap_or(0).min(self.cfg.max_app_priority)
    }

    /// The RMAppState name Java's messages print for `state`.
    fn rm_state_name(state: AppState) -> &'static str {
        match state {
            AppState::Submitted => "SUBMITTED",
            AppState::Accepted => "ACCEPTED",
            AppState::Running => "RUNNING",
            AppState::Finishing => "FINISHING",
            AppState::Finished => "FINISHED",
            AppState::Failed => "FAILED",
            AppState::Killed => "KILLED",
        }
    }

    /// `updateApplicationPriority` (the caller's MODIFY_APP is checked before): the priority
    /// the application has afterwards. Java's answers: an unknown application is
    /// `ApplicationNotFoundException`; a finished (or finishing) one keeps its priority and
    /// says so; one not yet accepted is "Application in SUBMITTED state cannot update
    /// priority."; otherwise the priority becomes `priority`, capped at
    /// `yarn.cluster.max-application-priority` (0 unless configured, so with Java's defaults
    /// every application stays at 0).
    pub fn update_priority(&mut self, id: AppId, priority: i32) -> Result<i32, AppError> {
        let capped = self.capped_priority(Some(priority));
        let Some(app) = self.apps.get_mut(&id.id).filter(|a| a.id == id) else {
            return Err(Self::not_found(id));
        };
        match app.state {
            AppState::Accepted | AppState::Running => {}
            s if s.is_final() || s == AppState::Finishing => return Ok(app.priority),
            s => {
                return Err(err(
                    exc::YARN,
                    format!(
                        "Application in {} state cannot update priority.",
                        Self::rm_state_name(s)
                    ),
                ))
            }
        }
        // The pending index orders by priority: re-keyed.
        if self.pending.remove(&super::pend_key(app.priority, id.id)) {
            self.pending.insert(super::pend_key(capped, id.id));
        }
        app.priority = capped;
        Ok(capped)
    }

    /// `moveApplicationAcrossQueues` (the caller's MODIFY_APP, and with ACLs its right to
    /// submit to `target`, are checked before). Java's answers: an unknown application is
    /// `ApplicationNotFoundException`; one not ACCEPTED or RUNNING "App in FINISHED state
    /// cannot be moved."; a target the scheduler does not have "The specified Queue: x doesn't
    /// exist", root "The specified Queue: root is not a Leaf Queue." (`getAndCheckLeafQueue`);
    /// otherwise the application is in `target` (given as a leaf name or its full path).
    pub fn move_app(&mut self, id: AppId, target: &str) -> Result<(), AppError> {
        let Some(app) = self.apps.get(&id.id).filter(|a| a.id == id) else {
            return Err(Self::not_found(id));
        };
        if !matches!(app.state, AppState::Accepted | AppState::Running) {
            return Err(err(
                exc::YARN,
                format!(
                    "App in {} state cannot be moved.",
                    Self::rm_state_name(app.state)
                ),
            ));
        }
        let leaf = match crate::queues::resolve(self, target) {
            None => {
                return Err(err(
                    exc::YARN,
                    format!("The specified Queue: {target} doesn't exist"),
                ))
            }
            Some(None) => {
                return Err(err(
                    exc::YARN,
                    format!("The specified Queue: {target} is not a Leaf Queue."),
                ))
            }
            Some(Some(q)) => q.to_string(),
        };
        if let Some(app) = self.apps.get_mut(&id.id) {
            app.queue = leaf;
        }
        Ok(())
    }

    /// `getNewApplication`: the next id and the maximum capability.
    pub fn new_application(&mut self) -> Result<(AppId, Res), AppError> {
        let live = self.live_apps;
        if live >= self.cfg.max_apps {
            return Err(err(
                exc::YARN,
                format!(
                    "The RM keeps at most {} applications; {} are not finished",
                    self.cfg.max_apps, live
                ),
            ));
        }
        self.next_app = self.next_app.checked_add(1).ok_or_else(|| {
            err(
                exc::YARN,
                "application ids exhausted for this cluster timestamp",
            )
        })?;
        Ok((
            AppId::new(self.cluster_ts, self.next_app),
            self.cfg.max_alloc,
        ))
    }

    /// `submitApplication`.
    pub fn submit(
        &mut self,
        ctx: ApplicationSubmissionContextProto,
        user: &str,
        now_ms: u64,
    ) -> Result<AppId, AppError> {
        self.submit_checked(ctx, user, now_ms, |_| true)
    }

    /// [`submit`](Self::submit) with the queue ACL of `yarn.acl.enable`: `may_submit(queue)`
    /// false refuses the submission with Java's `YarnException` wrapping an
    /// `AccessControlException` ([`crate::app_acls::submit_denied_message`]). As in Java's
    /// `RMAppManager` it is asked after the resource checks, and only for a queue the
    /// scheduler has (an unknown queue fails the application as before).
    pub fn submit_checked(
        &mut self,
        ctx: ApplicationSubmissionContextProto,
        user: &str,
        now_ms: u64,
        may_submit: impl FnOnce(&str) -> bool,
    ) -> Result<AppId, AppError> {
        let Some(id) = ctx
            .application_id
            .as_ref()
            .filter(|p| p.id.is_some())
            .map(|p| AppId::new(p.cluster_timestamp.unwrap_or(0), p.id.unwrap_or(0)))
        else {
            return Err(err(exc::ILLEGAL_ARGUMENT, "Invalid application id: null"));
        };
        if let Some(a) = self.app(id) {
            // Java: an earlier submitted application is answered without error.
            let _ = a;
            return Ok(id);
        }
        if id.cluster_timestamp != self.cluster_ts || id.id <= 0 || id.id > self.next_app {
            return Err(err(
                exc::YARN,
                format!("Application with id {id} is not known to this RM (use getNewApplication)"),
            ));
        }
        let size = prost::Message::encoded_len(&ctx);
        if size > self.cfg.max_submission_bytes {
            return Err(err(
                exc::YARN,
                format!(
                    "Application submission context of {id} is {size} bytes, over the limit of {} (hotpath.rm.max-submission-bytes)",
                    self.cfg.max_submission_bytes
                ),
            ));
        }
        if ctx.unmanaged_am.unwrap_or(false) {
            return Err(err(
                exc::YARN,
                "unmanaged ApplicationMasters are not supported",
            ));
        }
        let Some(am_spec) = ctx.am_container_spec.clone() else {
            return Err(err(
                exc::INVALID_RESOURCE_REQUEST,
                "Invalid resource request, no resources requested",
            ));
        };
        // The AM resource: the resource request with *, else `resource`.
        let asked = am_resource(&ctx).ok_or_else(|| {
            err(
                exc::INVALID_RESOURCE_REQUEST,
                "Invalid resource request, no resources requested",
            )
        })?;
        self.validate(asked)?;
        let queue = ctx.queue.as_deref().unwrap_or(DEFAULT_QUEUE);
        if self.cfg.queues.iter().any(|q| q == queue) && !may_submit(queue) {
            return Err(err(
                exc::YARN,
                crate::app_acls::submit_denied_message(user, id, queue),
            ));
        }
        let mut app = self.new_app(id, &ctx, am_spec, asked, user, now_ms);
        let queue = app.queue.clone();
        let unknown_queue = !self.cfg.queues.contains(&queue);
        if !unknown_queue {
            self.cleanups.push(Cleanup::HoldAcks(id));
            app.state = AppState::Accepted;
            app.attempts.push(Attempt::new(
                AttemptId {
                    app: id,
                    attempt: 1,
                },
                self.epoch,
                now_ms,
            ));
            self.unplaced = true;
            self.pending.insert(super::pend_key(app.priority, id.id));
        }
        if let Some(ops) = self.store_ops.as_mut() {
            ops.push(Rec::Submitted(SubmittedRec {
                app: id.to_proto(),
                user: user.to_string(),
                submit_ms: now_ms,
                context: prost::Message::encode_to_vec(&ctx),
            }));
        }
        self.apps.insert(id.id, app);
        self.live_apps += 1;
        if unknown_queue {
            let text =
                format!("Application {id} submitted by user {user} to unknown queue: {queue}");
            if let Some(a) = self.apps.get_mut(&id.id) {
                a.final_status = FinalApplicationStatusProto::AppFailed;
            }
            self.finish_app(id, AppState::Failed, Some(text), now_ms);
        }
        self.update_gate();
        self.place_unplaced(now_ms);
        Ok(id)
    }

    pub(crate) fn not_found(id: AppId) -> AppError {
        err(
            exc::APP_NOT_FOUND,
            format!(
                "Application with id '{id}' doesn't exist in RM. Please check that the job submission was successful."
            ),
        )
    }

    /// `getApplicationReport`.
    pub fn report(&self, id: AppId) -> Result<ApplicationReportProto, AppError> {
        self.app(id).map(report).ok_or_else(|| Self::not_found(id))
    }

    /// `killApplication`: true when the application is (now or already) in a final state.
    pub fn kill(
        &mut self,
        id: AppId,
        diagnostics: Option<&str>,
        now_ms: u64,
    ) -> Result<bool, AppError> {
        let Some(app) = self.apps.get_mut(&id.id).filter(|a| a.id == id) else {
            return Err(err(
                exc::APP_NOT_FOUND,
                format!("Trying to kill an absent application {id}"),
            ));
        };
        if app.state.is_final() || app.state == AppState::Finishing {
            return Ok(true);
        }
        let text = match diagnostics {
            Some(d) if !d.is_empty() => d.to_string(),
            _ => "Application killed by user.".to_string(),
        };
        app.final_status = FinalApplicationStatusProto::AppKilled;
        if let Some(a) = app.current().map(|a| a.id) {
            self.end_attempt(a, AttemptState::Killed, text.clone(), now_ms);
        }
        self.finish_app(id, AppState::Killed, Some(text), now_ms);
        Ok(true)
    }

    /// `failApplicationAttempt` (the caller's MODIFY_APP is checked before): an unknown
    /// application is `ApplicationNotFoundException`, an attempt it never had
    /// `ApplicationAttemptNotFoundException` (Java's texts); an application in a completed
    /// state (FINISHING, FINISHED, FAILED, KILLED) or an attempt already ended is left alone,
    /// as Java answers them. Otherwise the attempt fails with Java's diagnostics, "Attempt
    /// failed by user.", which counts towards `yarn.resourcemanager.am.max-attempts`: a new
    /// attempt follows while attempts remain, else the application FAILS.
    pub fn fail_attempt(&mut self, attempt: AttemptId, now_ms: u64) -> Result<(), AppError> {
        let Some(app) = self
            .apps
            .get_mut(&attempt.app.id)
            .filter(|a| a.id == attempt.app)
        else {
            return Err(Self::not_found(attempt.app));
        };
        let Some(at) = app.attempts.iter().find(|t| t.id == attempt) else {
            return Err(err(
                exc::ATTEMPT_NOT_FOUND,
                format!("ApplicationAttempt with id '{attempt}' doesn't exist in RM."),
            ));
        };
        if app.state.is_final()
            || app.state == AppState::Finishing
            || at.state.is_final()
            || at.state == AttemptState::Finishing
        {
            return Ok(());
        }
        app.count_failure(now_ms);
        self.end_attempt(
            attempt,
            AttemptState::Failed,
            "Attempt failed by user.".to_string(),
            now_ms,
        );
        Ok(())
    }
}

/// `ApplicationReport` of an application.
pub fn report(app: &RmApp) -> ApplicationReportProto {
    let cur = app.current();
    let state = app.state.yarn_state();
    let diagnostics = if !app.diagnostics.is_empty() {
        app.diagnostics.clone()
    } else {
        cur.map(|a| a.diagnostics.clone()).unwrap_or_default()
    };
    let running = matches!(app.state, AppState::Running | AppState::Finishing);
    ApplicationReportProto {
        application_id: Some(app.id.to_proto()),
        user: Some(app.user.clone()),
        queue: Some(app.queue.clone()),
        name: Some(app.name.clone()),
        host: Some(
            cur.filter(|_| running)
                .map(|a| a.host.clone())
                .unwrap_or_else(|| "N/A".into()),
        ),
        rpc_port: Some(cur.filter(|_| running).map(|a| a.rpc_port).unwrap_or(-1)),
        yarn_application_state: Some(state as i32),
        tracking_url: Some(
            cur.map(|a| a.tracking_url.clone())
                .filter(|u| !u.is_empty())
                .unwrap_or_else(|| "N/A".into()),
        ),
        diagnostics: Some(diagnostics),
        start_time: Some(app.submit_ms as i64),
        finish_time: Some(app.finish_ms as i64),
        final_application_status: Some(app.final_status as i32),
        original_tracking_url: Some(
            cur.map(|a| a.tracking_url.clone())
                .filter(|u| !u.is_empty())
                .unwrap_or_else(|| "N/A".into()),
        ),
        current_application_attempt_id: cur.map(|a| attempt_to_proto(&a.id)),
        progress: Some(match app.state {
            AppState::Finished | AppState::Failed | AppState::Killed | AppState::Finishing => 1.0,
            _ => cur.map(|a| a.progress).unwrap_or(0.0),
        }),
        application_type: Some(app.app_type.clone()),
        application_tags: app.tags.clone(),
        unmanaged_application: Some(false),
        priority: Some(PriorityProto {
            priority: Some(app.priority),
        }),
        launch_time: Some(app.launch_ms as i64),
        submit_time: Some(app.submit_ms as i64),
        ..Default::default()
    }
}

/// The report of a caller without VIEW_APP access: `RMAppImpl.createAndGetApplicationReport`
/// with `allowAccess=false`. The id, user, queue, name, states, times, type, tags and priority
/// stay; the attempt id is the dummy `-1`, host, tracking URLs and diagnostics are "N/A", the
/// RPC port -1, progress 0, no tokens, and the usage is Java's dummy report (-1 containers,
/// resources of -1).
pub fn reduced_report(app: &RmApp) -> ApplicationReportProto {
    let na = || Some("N/A".to_string());
    let minus_one = || Some(Res::new(-1, -1).to_proto());
    ApplicationReportProto {
        host: na(),
        rpc_port: Some(-1),
        client_to_am_token: None,
        tracking_url: na(),
        original_tracking_url: na(),
        diagnostics: na(),
        current_application_attempt_id: Some(attempt_to_proto(&AttemptId {
            app: app.id,
            attempt: -1,
        })),
        progress: Some(0.0),
        am_rm_token: None,
        app_resource_usage: Some(ApplicationResourceUsageReportProto {
            num_used_containers: Some(-1),
            num_reserved_containers: Some(-1),
            used_resources: minus_one(),
            reserved_resources: minus_one(),
            needed_resources: minus_one(),
            memory_seconds: Some(0),
            vcore_seconds: Some(0),
            ..Default::default()
        }),
        log_aggregation_status: None,
        ..report(app)
    }
}
