//! Work-preserving recovery (the rules are in the [module docs](super)): [`Apps::recover`]
//! rebuilds the applications from the state store's records, [`Apps::store_snapshot`] is what
//! compaction writes for the applications kept, and a node's first registration after the
//! restart brings back its containers (`reconcile_node`).

use std::collections::HashSet;

use hadoop_wire::pb::hadoop::yarn::{
    ApplicationSubmissionContextProto, ContainerLaunchContextProto, ContainerStateProto,
    FinalApplicationStatusProto, PriorityProto,
};
use hadoop_wire::token::identifier::attempt_to_proto;
use hadoop_wire::yarn::exit_status;
use hadoop_wire::yarn::ids::{AppId, AttemptId, ContainerId};

use crate::ids::NodeKey;
use crate::state_store::{AttemptEndedRec, Rec, Recovered, RecoveredApp, SubmittedRec};

use super::client_protocol::am_resource;
use super::{
    app_ended, status, AppState, Apps, Attempt, AttemptState, Cleanup, LiveContainer, Reported,
    Res, RmApp,
};

/// The submission context a kept application is stored with on compaction: what the RM
/// still uses of the original (ids, names, queue, type, tags, priority, AM resource and,
/// while it runs, its launch context).
fn kept_context(app: &RmApp) -> ApplicationSubmissionContextProto {
    let mut am_spec = app.am_spec.clone();
    if am_spec.application_ac_ls.is_empty() {
        // A finished application's launch context is gone, its ACLs still apply.
        am_spec.application_ac_ls = app.acls.to_protos();
    }
    ApplicationSubmissionContextProto {
        application_id: Some(app.id.to_proto()),
        application_name: Some(app.name.clone()),
        queue: Some(app.queue.clone()),
        priority: Some(PriorityProto {
            priority: Some(app.priority),
        }),
        am_container_spec: Some(am_spec),
        resource: Some(app.am_res.to_proto()),
        application_type: Some(app.app_type.clone()),
        application_tags: app.tags.clone(),
        max_app_attempts: Some(app.max_attempts),
        ..Default::default()
    }
}

impl Apps {
    /// Rebuilds the applications from the state store (see the module docs); call once,
    /// before anything else, after [`enable_store`](Self::enable_store). Returns the live and
    /// the finished applications recovered; applications whose stored submission cannot be
    /// used any more are skipped with a warning.
    pub fn recover(&mut self, rec: &Recovered, now_ms: u64) -> (usize, usize) {
        let (mut live, mut done) = (0, 0);
        for (&(ts, seq), ra) in &rec.apps {
            let id = AppId::new(ts, seq);
            self.next_app = self.next_app.max(seq);
            match self.recover_app(id, ra, now_ms) {
                Ok(app) => {
                    let id = app.id;
                    if app.state.is_final() {
                        done += 1;
                        self.completed_order.push(id.id);
                        // Whatever of it a node still runs is cleaned up there.
                        self.cleanups.push(Cleanup::App(id));
                    } else {
                        live += 1;
                        self.live_apps += 1;
                        self.cleanups.push(Cleanup::HoldAcks(id));
                    }
                    if let Some(old) = self.apps.insert(id.id, app) {
                        tracing::warn!("state store: {} replaced by {id}", old.id);
                    }
                }
                Err(why) => tracing::warn!("state store: application {id} not recovered: {why}"),
            }
        }
        self.completed_order.sort_unstable();
        while self.completed_order.len() > self.cfg.max_completed_apps {
            let old = self.completed_order.remove(0);
            self.apps.remove(&old);
        }
        self.reconcile = live > 0;
        self.unplaced = self.apps.values().any(|a| {
            !a.state.is_final()
                && a.current()
                    .is_some_and(|t| t.state == AttemptState::Scheduled)
        });
        self.unstarted_ids = self
            .apps
            .values()
            .flat_map(|a| &a.attempts)
            .flat_map(|t| &t.live)
            .filter(|(_, l)| !l.started)
            .map(|(&c, _)| c)
            .collect();
        self.unstarted = !self.unstarted_ids.is_empty();
        self.pending = self
            .apps
            .iter()
            .filter(|(_, a)| super::pending_need(a).is_some())
            .map(|(&i, a)| super::pend_key(a.priority, i))
            .collect();
        self.update_gate();
        (live, done)
    }

    fn recover_app(&mut self, id: AppId, ra: &RecoveredApp, now_ms: u64) -> Result<RmApp, String> {
        let ctx: ApplicationSubmissionContextProto =
            prost::Message::decode(ra.submitted.context.as_slice())
                .map_err(|e| format!("submission context does not decode: {e}"))?;
        let asked = am_resource(&ctx).ok_or("no AM resource")?;
        let am_spec = ctx.am_container_spec.clone().unwrap_or_default();
        let mut app = self.new_app(
            id,
            &ctx,
            am_spec,
            asked,
            &ra.submitted.user,
            ra.submitted.submit_ms,
        );
        app.state = AppState::Accepted;
        for (&n, rat) in &ra.attempts {
            let aid = AttemptId {
                app: id,
                attempt: n,
            };
            let start = rat
                .allocated
                .as_ref()
                .map_or(ra.submitted.submit_ms, |al| al.allocated_ms);
            let mut at = Attempt::new(aid, self.epoch, start);
            if let Some(al) = &rat.allocated {
                let node = NodeKey::new(&al.host, al.port);
                let c = ContainerId {
                    app: id,
                    attempt: n,
                    id: al.container,
                };
                at.am_container = Some(c);
                at.am_node = Some(node.clone());
                at.state = AttemptState::Launched;
                at.live.insert(
                    c,
                    LiveContainer {
                        node,
                        res: app.am_res,
                        priority: app.priority,
                        allocated_ms: now_ms,
                        started: true,
                    },
                );
                app.launch_ms = al.allocated_ms;
            }
            if let Some(e) = &rat.ended {
                at.state = AttemptState::from_code(e.state).ok_or("unknown attempt state")?;
                at.diagnostics = e.diagnostics.clone();
                at.am_exit_status = e.am_exit_status;
                at.final_status = e
                    .final_status
                    .and_then(|f| FinalApplicationStatusProto::try_from(f).ok());
                at.live.clear();
                app.failures = app.failures.max(e.failures);
            }
            app.attempts.push(at);
        }
        if let Some(e) = &ra.ended {
            app.state = AppState::from_code(e.state).ok_or("unknown application state")?;
            app.final_status = FinalApplicationStatusProto::try_from(e.final_status)
                .unwrap_or(FinalApplicationStatusProto::AppUndefined);
            app.diagnostics = e.diagnostics.clone();
            app.finish_ms = e.finish_ms;
            if let Some(last) = app.attempts.last_mut() {
                last.finish_ms = e.finish_ms;
            }
            if !app.state.is_final() {
                // FINISHING was stored as FINISHED; anything else is not a final record.
                app.state = AppState::Finished;
            }
            app.am_spec = ContainerLaunchContextProto::default();
            for at in &mut app.attempts {
                if !at.state.is_final() {
                    at.state = AttemptState::Finished;
                    at.live.clear();
                }
            }
            return Ok(app);
        }
        // A live application: what its last attempt says decides what comes next.
        let last = app.attempts.last().map(|t| (t.id.attempt, t.state));
        match last {
            None => app.attempts.push(Attempt::new(
                AttemptId {
                    app: id,
                    attempt: 1,
                },
                self.epoch,
                now_ms,
            )),
            Some((_, AttemptState::Launched)) => {
                let at = app.attempts.last_mut().expect("last exists");
                at.recovered = true;
                at.last_contact_ms = now_ms;
                self.amrm
                    .write()
                    .recover_attempt(at.id)
                    .map_err(|e| e.to_string())?;
            }
            Some((n, AttemptState::Failed)) if app.failures < app.max_attempts => {
                app.attempts.push(Attempt::new(
                    AttemptId {
                        app: id,
                        attempt: n + 1,
                    },
                    self.epoch,
                    now_ms,
                ));
            }
            Some((_, s)) => {
                // The attempt ended and the application's own record did not make it to disk.
                let (to, fs) = match s {
                    AttemptState::Finished => (
                        AppState::Finished,
                        FinalApplicationStatusProto::AppUndefined,
                    ),
                    AttemptState::Killed => {
                        (AppState::Killed, FinalApplicationStatusProto::AppKilled)
                    }
                    _ => (AppState::Failed, FinalApplicationStatusProto::AppFailed),
                };
                app.state = to;
                app.final_status = app
                    .attempts
                    .last()
                    .and_then(|t| t.final_status)
                    .unwrap_or(fs);
                app.diagnostics = app
                    .attempts
                    .last()
                    .map(|t| t.diagnostics.clone())
                    .unwrap_or_default();
                app.finish_ms = now_ms;
                app.am_spec = ContainerLaunchContextProto::default();
            }
        }
        Ok(app)
    }

    /// What the state store must hold for the applications kept now (for compaction; the
    /// caller adds the epoch and the keys).
    pub fn store_snapshot(&self) -> Vec<Rec> {
        use crate::state_store::AmAllocatedRec;
        let mut out = Vec::new();
        for app in self.apps.values() {
            out.push(Rec::Submitted(SubmittedRec {
                app: app.id.to_proto(),
                user: app.user.clone(),
                submit_ms: app.submit_ms,
                context: prost::Message::encode_to_vec(&kept_context(app)),
            }));
            for at in &app.attempts {
                if let (Some(c), Some(n)) = (at.am_container, &at.am_node) {
                    out.push(Rec::AmAllocated(AmAllocatedRec {
                        attempt: attempt_to_proto(&at.id),
                        container: c.id,
                        host: n.host.to_string(),
                        port: n.port,
                        allocated_ms: app.launch_ms,
                    }));
                }
                if at.state.is_final() {
                    out.push(Rec::AttemptEnded(AttemptEndedRec {
                        attempt: attempt_to_proto(&at.id),
                        state: at.state.code(),
                        diagnostics: at.diagnostics.clone(),
                        am_exit_status: at.am_exit_status,
                        failures: app.failures,
                        final_status: at.final_status.map(|f| f as i32),
                    }));
                }
            }
            if app.state.is_final() || app.state == AppState::Finishing {
                let mut e = app_ended(app);
                e.state = match app.state {
                    AppState::Finishing => AppState::Finished.code(),
                    s => s.code(),
                };
                out.push(Rec::AppEnded(e));
            }
        }
        out
    }

    /// The current, not final, recovered-or-live attempt a container belongs to.
    fn live_attempt_mut(&mut self, c: ContainerId) -> Option<&mut Attempt> {
        let app = self
            .apps
            .get_mut(&c.app.id)
            .filter(|a| a.id == c.app && !a.state.is_final())?;
        app.attempts
            .last_mut()
            .filter(|t| t.id.attempt == c.attempt && !t.state.is_final())
    }

    pub(super) fn reconcile_node(
        &mut self,
        key: &NodeKey,
        http_address: String,
        total: Res,
        reported: &[Reported],
        now_ms: u64,
    ) {
        self.node_added(key, http_address, total);
        // Running and new containers of live attempts are live again here.
        let mut seen = HashSet::new();
        for r in reported {
            seen.insert(r.id);
            if r.state == ContainerStateProto::CComplete {
                continue;
            }
            let started = r.state == ContainerStateProto::CRunning;
            let Some(at) = self.live_attempt_mut(r.id) else {
                continue;
            };
            let l = at.live.entry(r.id).or_insert_with(|| LiveContainer {
                node: key.clone(),
                res: r.res,
                priority: r.priority,
                allocated_ms: now_ms,
                started,
            });
            if &l.node != key {
                continue;
            }
            if !started {
                self.unstarted = true;
                self.unstarted_ids.insert(r.id);
            }
        }
        let (mut used, mut count) = (Res::default(), 0);
        let mut lost = Vec::new();
        for app in self.apps.values() {
            for at in &app.attempts {
                for (c, l) in &at.live {
                    if &l.node == key {
                        used = used.plus(l.res);
                        count += 1;
                        if !seen.contains(c) {
                            lost.push(*c);
                        }
                    }
                }
            }
        }
        self.nodes.update(key, |n| {
            n.used = used;
            n.containers = count;
        });
        // Completions made while the RM was away: to their AMs.
        for r in reported {
            if r.state != ContainerStateProto::CComplete {
                continue;
            }
            if self.is_live(r.id) {
                self.container_completed(r.id, r.exit_status, &r.diagnostics, now_ms);
            } else if let Some(at) = self.live_attempt_mut(r.id).filter(|t| t.recovered) {
                at.completed
                    .push(status(r.id, r.exit_status, &r.diagnostics));
            }
        }
        for c in lost {
            self.container_completed(
                c,
                exit_status::ABORTED,
                "Container released on a *lost* node",
                now_ms,
            );
            self.cleanups.push(Cleanup::Container(c));
        }
        self.update_gate();
    }
}
