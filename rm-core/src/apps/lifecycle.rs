//! How containers, attempts and applications end, the transitions every protocol leads to
//! (`RMAppImpl`, `RMAppAttemptImpl`): a live container's completion (resources back to its
//! node, its status to its AM once, or, for an AM container, the end of its attempt); an
//! attempt's end (its containers released, retried while attempts remain, else the
//! application fails); an application's end (kept among the completed ones up to
//! `yarn.resourcemanager.max-completed-applications`); the AM launcher's results; and
//! [`Apps::tick`]: the AM liveness monitor and the allocation expiry.

use hadoop_wire::pb::hadoop::yarn::{ContainerLaunchContextProto, FinalApplicationStatusProto};
use hadoop_wire::token::identifier::attempt_to_proto;
use hadoop_wire::yarn::exit_status;
use hadoop_wire::yarn::ids::{AppId, AttemptId, ContainerId};

use crate::state_store::{AttemptEndedRec, Rec};

use super::{app_ended, status, AppState, Apps, Attempt, AttemptState, Cleanup};

/// Java's `shouldCountTowardsMaxAttemptRetry`: AM containers lost to the cluster do not count.
fn counts_as_failure(exit: i32) -> bool {
    !matches!(
        exit,
        exit_status::ABORTED
            | exit_status::PREEMPTED
            | exit_status::DISKS_FAILED
            | exit_status::KILLED_BY_RESOURCEMANAGER
    )
}

impl Apps {
    /// A live container completed: resources back to its node, its status to the AM (once),
    /// or, for an AM container, the attempt ends.
    pub(super) fn container_completed(
        &mut self,
        c: ContainerId,
        exit: i32,
        diagnostics: &str,
        now_ms: u64,
    ) {
        let Some(app) = self.apps.get_mut(&c.app.id).filter(|a| a.id == c.app) else {
            return;
        };
        let Some(at) = app.attempts.iter_mut().find(|t| t.id.attempt == c.attempt) else {
            return;
        };
        let Some(live) = at.live.remove(&c) else {
            return;
        };
        at.new_containers.retain(|n| n.id != c);
        self.nodes.update(&live.node, |n| {
            n.used = n.used.minus(live.res);
            n.containers = n.containers.saturating_sub(1);
        });
        if at.am_container == Some(c) {
            at.am_exit_status = Some(exit);
            self.cleanups.push(Cleanup::Ack(c));
            let attempt = at.id;
            self.am_container_finished(attempt, exit, diagnostics, now_ms);
        } else if !at.state.is_final() {
            at.completed.push(status(c, exit, diagnostics));
        } else if let Some(cur) = app.attempts.last_mut().filter(|t| !t.state.is_final()) {
            // A container an earlier attempt left to this one
            // (`keepContainersAcrossApplicationAttempts`): its AM hears of it, as Java's
            // scheduler, which moved it to the new attempt, tells it.
            cur.completed.push(status(c, exit, diagnostics));
        }
    }

    fn am_container_finished(&mut self, attempt: AttemptId, exit: i32, diag: &str, now_ms: u64) {
        let Some(app) = self.apps.get_mut(&attempt.app.id) else {
            return;
        };
        let Some(at) = app.attempts.iter().find(|t| t.id == attempt) else {
            return;
        };
        if at.state.is_final() {
            return;
        }
        if at.state == AttemptState::Finishing {
            self.end_attempt(attempt, AttemptState::Finished, String::new(), now_ms);
            return;
        }
        let text = format!(
            "AM Container for {attempt} exited with  exitCode: {exit}\nFailing this attempt.Diagnostics: {diag}\nFor more detailed output, check the application tracking page: N/A Then click on links to logs of each attempt.\n. Failing this attempt."
        );
        if counts_as_failure(exit) {
            app.count_failure(now_ms);
        }
        self.end_attempt(attempt, AttemptState::Failed, text, now_ms);
    }

    /// Ends an attempt: its containers are released (killed on their nodes), its AMRMToken
    /// stops verifying; a failed attempt is retried while attempts remain, else the
    /// application fails; a finished attempt finishes the application.
    pub(super) fn end_attempt(
        &mut self,
        attempt: AttemptId,
        to: AttemptState,
        diag: String,
        now_ms: u64,
    ) {
        let Some(app) = self.apps.get_mut(&attempt.app.id) else {
            return;
        };
        let Some(idx) = app.attempts.iter().position(|t| t.id == attempt) else {
            return;
        };
        if app.attempts[idx].state.is_final() {
            return;
        }
        // Java's work-preserving AM restart (`RMAppAttemptImpl`'s FAILED transition with
        // `keepContainersAcrossApplicationAttempts`, then the scheduler's
        // `doneApplicationAttempt`): when the failed attempt is followed by another (the same
        // test as the retry below), the application's RUNNING containers stay; the AM
        // container, and containers not yet seen RUNNING, are killed.
        let keep = app.keep_containers
            && to == AttemptState::Failed
            && !app.state.is_final()
            && app.failures_within_validity(now_ms) < app.max_attempts;
        let failures = app.failures;
        let at = &mut app.attempts[idx];
        at.state = to;
        at.finish_ms = now_ms;
        if !diag.is_empty() {
            at.diagnostics = diag.clone();
        }
        if let Some(ops) = self.store_ops.as_mut() {
            ops.push(Rec::AttemptEnded(AttemptEndedRec {
                attempt: attempt_to_proto(&attempt),
                state: to.code(),
                diagnostics: at.diagnostics.clone(),
                am_exit_status: at.am_exit_status,
                failures,
                final_status: at.final_status.map(|f| f as i32),
            }));
        }
        at.asks.clear();
        at.new_containers.clear();
        // Every attempt's live containers: earlier attempts hold those they left to this one.
        let (nodes, cleanups) = (&mut self.nodes, &mut self.cleanups);
        for t in &mut app.attempts {
            let am = t.am_container;
            t.live.retain(|c, l| {
                if keep && l.started && Some(*c) != am {
                    return true;
                }
                nodes.update(&l.node, |n| {
                    n.used = n.used.minus(l.res);
                    n.containers = n.containers.saturating_sub(1);
                });
                cleanups.push(Cleanup::Container(*c));
                false
            });
        }
        let at = &app.attempts[idx];
        self.amrm.write().application_master_finished(&attempt);
        match to {
            AttemptState::Finished => {
                let fs = at
                    .final_status
                    .unwrap_or(FinalApplicationStatusProto::AppUndefined);
                app.final_status = fs;
                self.finish_app(attempt.app, AppState::Finished, None, now_ms);
            }
            AttemptState::Failed => {
                let limit = app.max_attempts;
                if app.state.is_final() {
                } else if app.failures_within_validity(now_ms) < limit {
                    let next = AttemptId {
                        app: app.id,
                        attempt: app.attempts.len() as i32 + 1,
                    };
                    app.attempts.push(Attempt::new(next, self.epoch, now_ms));
                    app.state = AppState::Accepted;
                    self.unplaced = true;
                    self.pending
                        .insert(super::pend_key(app.priority, app.id.id));
                } else {
                    let global = self.cfg.max_attempts;
                    let text = format!(
                        "Application {} failed {} times (global limit ={}; local limit is ={}) due to {}. Failing the application.",
                        app.id, app.failures, global, limit, diag
                    );
                    app.final_status = FinalApplicationStatusProto::AppFailed;
                    self.finish_app(attempt.app, AppState::Failed, Some(text), now_ms);
                }
            }
            _ => {}
        }
        self.update_gate();
    }

    pub(super) fn finish_app(
        &mut self,
        id: AppId,
        to: AppState,
        diag: Option<String>,
        now_ms: u64,
    ) {
        let Some(app) = self.apps.get_mut(&id.id) else {
            return;
        };
        if app.state.is_final() {
            return;
        }
        app.state = to;
        app.am_spec = ContainerLaunchContextProto::default();
        self.live_apps = self.live_apps.saturating_sub(1);
        if let Some(d) = diag {
            app.diagnostics = d;
        }
        app.finish_ms = now_ms;
        if let Some(ops) = self.store_ops.as_mut() {
            ops.push(Rec::AppEnded(app_ended(app)));
        }
        self.cleanups.push(Cleanup::App(id));
        self.cleanups.push(Cleanup::ReleaseAcks(id));
        self.completed_order.push(id.id);
        while self.completed_order.len() > self.cfg.max_completed_apps {
            let old = self.completed_order.remove(0);
            self.apps.remove(&old);
        }
        self.update_gate();
    }

    /// The AM container was started on its node.
    pub fn am_launched(&mut self, a: AttemptId, now_ms: u64) {
        if let Ok((at, _)) = self.attempt_mut(a) {
            if at.state == AttemptState::Allocated {
                at.state = AttemptState::Launched;
                at.last_contact_ms = now_ms;
            }
        }
        if let Some(app) = self.apps.get_mut(&a.app.id) {
            if app.launch_ms == 0 {
                app.launch_ms = now_ms;
            }
        }
    }

    /// Starting the AM container failed (`LAUNCH_FAILED`).
    pub fn am_launch_failed(&mut self, a: AttemptId, error: &str, now_ms: u64) {
        let text = format!("Error launching {a}. Got exception: {error}");
        if let Some(app) = self.apps.get_mut(&a.app.id) {
            app.count_failure(now_ms);
        }
        self.end_attempt(a, AttemptState::Failed, text, now_ms);
    }

    /// The AM liveness monitor, and the allocation expiry: a container not reported RUNNING
    /// within `yarn.resourcemanager.rm.container-allocation.expiry-interval-ms` of its
    /// allocation completes ABORTED "Container expired since it was unused" (its AM is told;
    /// its node is told to clean it up). Returns the attempts expired.
    pub fn tick(&mut self, now_ms: u64) -> Vec<AttemptId> {
        let limit = self.cfg.container_token_expiry_ms;
        let mut unused = Vec::new();
        // The containers not seen RUNNING only, not every live one.
        let apps = &self.apps;
        self.unstarted_ids.retain(|c| {
            let live = apps
                .get(&c.app.id)
                .filter(|a| a.id == c.app)
                .and_then(|a| a.attempts.iter().find(|t| t.id.attempt == c.attempt))
                .and_then(|t| t.live.get(c));
            match live {
                Some(l) if !l.started => {
                    if now_ms.saturating_sub(l.allocated_ms) > limit {
                        unused.push(*c);
                    }
                    true
                }
                _ => false,
            }
        });
        self.unstarted = !self.unstarted_ids.is_empty();
        for c in unused {
            self.container_completed(
                c,
                exit_status::ABORTED,
                "Container expired since it was unused",
                now_ms,
            );
            self.cleanups.push(Cleanup::Container(c));
        }
        let expiry = self.cfg.am_expiry_ms;
        let mut expired = Vec::new();
        for app in self.apps.values() {
            if let Some(at) = app.current() {
                if matches!(
                    at.state,
                    AttemptState::Launched | AttemptState::Running | AttemptState::Finishing
                ) && now_ms.saturating_sub(at.last_contact_ms) > expiry
                {
                    expired.push((at.id, at.state));
                }
            }
        }
        for (a, s) in &expired {
            if *s == AttemptState::Finishing {
                self.end_attempt(*a, AttemptState::Finished, String::new(), now_ms);
            } else {
                if let Some(app) = self.apps.get_mut(&a.app.id) {
                    app.count_failure(now_ms);
                }
                let text = format!("ApplicationMaster for attempt {a} timed out");
                self.end_attempt(*a, AttemptState::Failed, text, now_ms);
            }
        }
        expired.into_iter().map(|(a, _)| a).collect()
    }
}

impl super::RmApp {
    /// An attempt failure that counts against the maximum attempts.
    pub(super) fn count_failure(&mut self, now_ms: u64) {
        self.failures += 1;
        if self.failures_validity_ms > 0 {
            // Only the window's failures are ever asked for: older ones are dropped.
            let since = now_ms.saturating_sub(self.failures_validity_ms as u64);
            self.failure_ms.retain(|&t| t > since);
            self.failure_ms.push(now_ms);
        }
    }

    /// The failures that count now (`RMAppImpl.getNumFailedAppAttempts`): all of them, or
    /// with an `attemptFailuresValidityInterval` only those that ended within it, so a
    /// long-running service whose AM fails now and then is not failed for old failures.
    pub(super) fn failures_within_validity(&self, now_ms: u64) -> i32 {
        if self.failures_validity_ms <= 0 {
            return self.failures;
        }
        let since = now_ms.saturating_sub(self.failures_validity_ms as u64);
        self.failure_ms.iter().filter(|&&t| t > since).count() as i32
    }
}
