//! ApplicationMasterProtocol on [`Apps`]: `registerApplicationMaster`, `allocate` (responseId
//! rules, releases, blacklist, asks, immediate placement of new asks, new containers with
//! their tokens and NMTokens, completed statuses, the rolled AMRMToken) and
//! `finishApplicationMaster`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use hadoop_wire::pb::hadoop::yarn::{
    AllocateRequestProto, AllocateResponseProto, ContainerProto, ContainerTypeProto,
    ExecutionTypeProto, FinalApplicationStatusProto, FinishApplicationMasterRequestProto,
    NmTokenProto, PriorityProto, RegisterApplicationMasterRequestProto,
    RegisterApplicationMasterResponseProto, SchedulerResourceTypes,
};
use hadoop_wire::token::identifier::container_from_proto;
use hadoop_wire::yarn::exit_status;
use hadoop_wire::yarn::ids::{AttemptId, ContainerId};

use crate::state_store::Rec;

use super::{
    app_ended, container_token, err, exc, nm_token, status, AppError, AppState, Apps, Ask, Attempt,
    AttemptState, Cleanup, Res, RmApp, TokenKeys, ANY,
};

impl Apps {
    pub(super) fn attempt_mut(&mut self, a: AttemptId) -> Result<(&mut Attempt, &str), AppError> {
        Self::attempt_in(&mut self.apps, a)
    }

    /// [`attempt_mut`](Self::attempt_mut) borrowing only the applications.
    fn attempt_in(
        apps: &mut BTreeMap<i32, RmApp>,
        a: AttemptId,
    ) -> Result<(&mut Attempt, &str), AppError> {
        let app = apps
            .get_mut(&a.app.id)
            .filter(|x| x.id == a.app)
            .ok_or_else(|| {
                err(
                    exc::ATTEMPT_NOT_FOUND,
                    format!(
                        "Application attempt {a} doesn't exist in ApplicationMasterService cache."
                    ),
                )
            })?;
        let user = app.user.as_str();
        let at = app.attempts.iter_mut().find(|t| t.id == a).ok_or_else(|| {
            err(
                exc::ATTEMPT_NOT_FOUND,
                format!("Application attempt {a} doesn't exist in ApplicationMasterService cache."),
            )
        })?;
        Ok((at, user))
    }

    /// `registerApplicationMaster` without token keys (containers from previous attempts
    /// come without tokens): [`register_am_with`](Self::register_am_with).
    pub fn register_am(
        &mut self,
        a: AttemptId,
        req: &RegisterApplicationMasterRequestProto,
        now_ms: u64,
    ) -> Result<RegisterApplicationMasterResponseProto, AppError> {
        self.register_am_with(a, req, None, now_ms)
    }

    /// `registerApplicationMaster`. For an application with
    /// `keepContainersAcrossApplicationAttempts`, the containers earlier attempts left to this
    /// one (Java's `getTransferredContainers`: the application's live containers but its AM's)
    /// in `containers_from_previous_attempts`, and an NMToken for each of their nodes in
    /// `nm_tokens_from_previous_attempts` (minted with `keys`; `DefaultAMSProcessor`).
    pub fn register_am_with(
        &mut self,
        a: AttemptId,
        req: &RegisterApplicationMasterRequestProto,
        keys: Option<&TokenKeys>,
        now_ms: u64,
    ) -> Result<RegisterApplicationMasterResponseProto, AppError> {
        let max = self.cfg.max_alloc;
        let expiry = self.cfg.container_token_expiry_ms;
        let (at, _) = self.attempt_mut(a)?;
        match at.state {
            AttemptState::Allocated | AttemptState::Launched => {}
            AttemptState::Running | AttemptState::Finishing => {
                return Err(err(
                    exc::INVALID_AM_REQUEST,
                    format!("Application Master is already registered : {}", a.app),
                ))
            }
            _ => {
                return Err(err(
                    exc::ATTEMPT_NOT_FOUND,
                    format!(
                        "Application attempt {a} doesn't exist in ApplicationMasterService cache."
                    ),
                ))
            }
        }
        at.state = AttemptState::Running;
        at.host = req.host.clone().unwrap_or_default();
        at.rpc_port = req.rpc_port.unwrap_or(-1);
        at.tracking_url = req.tracking_url.clone().unwrap_or_default();
        at.last_contact_ms = now_ms;
        at.last_response = Some(Arc::new(AllocateResponseProto {
            response_id: Some(0),
            ..Default::default()
        }));
        let app = self.apps.get_mut(&a.app.id).expect("attempt found above");
        app.state = AppState::Running;
        let (previous, nm_tokens) = if app.keep_containers {
            self.transferred(a, keys, now_ms, expiry)
        } else {
            (Vec::new(), Vec::new())
        };
        let app = self.apps.get(&a.app.id).expect("attempt found above");
        // As Java's ApplicationMasterService: the resource types (AMRMClient re-initializes
        // its own from them; an AM given none cannot read a Resource), the types the
        // scheduler schedules by (Java's Capacity scheduler with its default calculator:
        // memory), and the application's ACLs.
        Ok(RegisterApplicationMasterResponseProto {
            maximum_capability: Some(max.to_proto()),
            application_ac_ls: app.acls.to_protos(),
            queue: Some(app.queue.clone()),
            scheduler_resource_types: vec![SchedulerResourceTypes::Memory as i32],
            resource_types: crate::queues::resource_types(),
            containers_from_previous_attempts: previous,
            nm_tokens_from_previous_attempts: nm_tokens,
            ..Default::default()
        })
    }

    /// The live containers of `a`'s earlier attempts (those a failed attempt left), in id
    /// order, and an NMToken per node of theirs (recorded as the attempt's, so that
    /// `allocate` does not send another for those nodes under the same key).
    fn transferred(
        &mut self,
        a: AttemptId,
        keys: Option<&TokenKeys>,
        now_ms: u64,
        expiry: u64,
    ) -> (Vec<ContainerProto>, Vec<NmTokenProto>) {
        let Some(app) = self.apps.get_mut(&a.app.id) else {
            return (Vec::new(), Vec::new());
        };
        let user = app.user.clone();
        let mut kept: Vec<(ContainerId, super::LiveContainer)> = app
            .attempts
            .iter()
            .filter(|t| t.id != a)
            .flat_map(|t| {
                t.live
                    .iter()
                    .filter(move |(c, _)| Some(**c) != t.am_container)
                    .map(|(c, l)| (*c, l.clone()))
            })
            .collect();
        kept.sort_by_key(|(c, _)| (c.attempt, c.id));
        let Some(at) = app.attempts.iter_mut().find(|t| t.id == a) else {
            return (Vec::new(), Vec::new());
        };
        let mut containers = Vec::with_capacity(kept.len());
        let mut tokens = Vec::new();
        for (c, l) in kept {
            if let Some(keys) = keys {
                if at.nm_token_nodes.insert(l.node.clone(), keys.nm.key_id) != Some(keys.nm.key_id)
                {
                    tokens.push(NmTokenProto {
                        node_id: Some(l.node.to_proto()),
                        token: Some(nm_token(keys, a, &l.node, &user).to_proto()),
                    });
                }
            }
            let token = keys.map(|k| {
                container_token(
                    k,
                    c,
                    &l.node,
                    &user,
                    l.res,
                    l.priority,
                    now_ms,
                    expiry,
                    ContainerTypeProto::Task,
                )
                .to_proto()
            });
            containers.push(ContainerProto {
                id: Some(c.to_proto()),
                node_id: Some(l.node.to_proto()),
                node_http_address: self.nodes.get(&l.node).map(|x| x.http_address.clone()),
                resource: Some(l.res.to_proto()),
                priority: Some(PriorityProto {
                    priority: Some(l.priority),
                }),
                container_token: token,
                execution_type: Some(ExecutionTypeProto::Guaranteed as i32),
                allocation_request_id: Some(-1),
                version: Some(0),
                allocation_tags: Vec::new(),
                exposed_ports: None,
            });
        }
        (containers, tokens)
    }

    /// `finishApplicationMaster`: true when unregistered.
    pub fn finish_am(
        &mut self,
        a: AttemptId,
        req: &FinishApplicationMasterRequestProto,
        now_ms: u64,
    ) -> Result<bool, AppError> {
        let (at, _) = self.attempt_mut(a)?;
        match at.state {
            AttemptState::Running => {}
            AttemptState::Finishing | AttemptState::Finished => return Ok(true),
            AttemptState::Allocated | AttemptState::Launched => {
                return Err(err(
                    exc::AM_NOT_REGISTERED,
                    format!(
                        "Application Master is trying to unregister before registering for: {a}"
                    ),
                ))
            }
            _ => {
                return Err(err(
                    exc::ATTEMPT_NOT_FOUND,
                    format!(
                        "Application attempt {a} doesn't exist in ApplicationMasterService cache."
                    ),
                ))
            }
        }
        let fs = req
            .final_application_status
            .and_then(|v| FinalApplicationStatusProto::try_from(v).ok())
            .unwrap_or(FinalApplicationStatusProto::AppUndefined);
        at.state = AttemptState::Finishing;
        at.final_status = Some(fs);
        at.last_contact_ms = now_ms;
        at.asks.clear();
        if let Some(u) = &req.tracking_url {
            at.tracking_url = u.clone();
        }
        let diag = req.diagnostics.clone().unwrap_or_default();
        at.diagnostics = diag.clone();
        let app = self.apps.get_mut(&a.app.id).expect("attempt found above");
        app.state = AppState::Finishing;
        app.final_status = fs;
        app.diagnostics = diag;
        if let Some(ops) = self.store_ops.as_mut() {
            // Java's FINAL_SAVING: a restart from here on finds the application finished.
            let mut e = app_ended(app);
            e.state = AppState::Finished.code();
            e.finish_ms = now_ms;
            ops.push(Rec::AppEnded(e));
        }
        self.update_gate();
        Ok(true)
    }

    /// `allocate`.
    pub fn allocate(
        &mut self,
        a: AttemptId,
        caller_key_id: i32,
        req: &AllocateRequestProto,
        keys: &TokenKeys,
        now_ms: u64,
    ) -> Result<Arc<AllocateResponseProto>, AppError> {
        self.allocate_with(a, caller_key_id, req, || keys.clone(), now_ms)
    }

    /// `allocate`, asking `keys` for the current container and NM keys only when the response
    /// carries new containers (the RM's allocate handler reads them from the tracker).
    pub fn allocate_with(
        &mut self,
        a: AttemptId,
        caller_key_id: i32,
        req: &AllocateRequestProto,
        keys: impl Fn() -> TokenKeys,
        now_ms: u64,
    ) -> Result<Arc<AllocateResponseProto>, AppError> {
        let max = self.cfg.max_alloc;
        let min = self.cfg.min_alloc;
        let cap = self.cfg.max_ask_containers;
        let expiry = self.cfg.container_token_expiry_ms;
        let immediate = self.cfg.immediate_placement;
        let (active, total, used) = self.nodes.totals();
        let cluster_nodes = i32::try_from(active).unwrap_or(i32::MAX);
        // Validate asks before touching any state.
        for r in &req.ask {
            let res = r
                .capability
                .as_ref()
                .map(Res::from_proto)
                .unwrap_or_default();
            self.validate(res)?;
            let n = r.num_containers.unwrap_or(0);
            if n < 0 || n > cap {
                return Err(err(
                    exc::INVALID_RESOURCE_REQUEST,
                    format!("Invalid resource ask by application {a}: numContainers {n} outside [0, {cap}]"),
                ));
            }
        }
        let amrm = self.amrm.clone();
        let app_priority = self.apps.get(&a.app.id).map_or(0, |x| x.priority);
        let (max_asks, max_blacklist) = (self.cfg.max_asks_per_attempt, self.cfg.max_blacklist);
        // The attempt borrowed from `apps` alone: `nodes` stays readable beside it.
        let (at, user) = Self::attempt_in(&mut self.apps, a)?;
        match at.state {
            AttemptState::Running | AttemptState::Finishing => {}
            AttemptState::Allocated | AttemptState::Launched => {
                return Err(err(
                    exc::AM_NOT_REGISTERED,
                    format!(
                        "AM is not registered for known application attempt: {a} or RM had restarted after AM registered.  AM should re-register."
                    ),
                ))
            }
            _ => {
                return Err(err(
                    exc::ATTEMPT_NOT_FOUND,
                    format!("Application attempt {a} doesn't exist in ApplicationMasterService cache."),
                ))
            }
        }
        let last = at
            .last_response
            .as_ref()
            .and_then(|r| r.response_id)
            .unwrap_or(0);
        let rid = req.response_id.unwrap_or(0);
        at.last_contact_ms = now_ms;
        if crate::tracker::next_response_id(rid) == last {
            if let Some(r) = &at.last_response {
                return Ok(r.clone());
            }
        }
        if rid != last {
            return Err(err(
                exc::INVALID_AM_REQUEST,
                format!(
                    "Invalid responseId in AllocateRequest from application attempt: {a} expect responseId to be {last} but get {rid}"
                ),
            ));
        }
        // RMServerUtils: a release of another attempt's container (also one an earlier attempt
        // left to this one: Java compares the attempt ids), or * in the blacklist.
        for c in &req.release {
            if let Some(c) = container_from_proto(c) {
                if c.app != a.app || c.attempt != a.attempt {
                    return Err(err(
                        exc::INVALID_CONTAINER_RELEASE,
                        format!(
                            "Cannot release container : {c} not belonging to this application attempt : {a}"
                        ),
                    ));
                }
            }
        }
        if req
            .blacklist_request
            .as_ref()
            .is_some_and(|b| b.blacklist_additions.iter().any(|h| h == ANY))
        {
            return Err(err(
                exc::INVALID_BLACKLIST_REQUEST,
                "Cannot add * to the blacklist!",
            ));
        }
        let asks_now: usize = at.asks.values().map(HashMap::len).sum();
        if asks_now + req.ask.len() > max_asks {
            return Err(err(
                exc::INVALID_RESOURCE_REQUEST,
                format!(
                    "Invalid resource ask by application {a}: more than {} outstanding resource requests",
                    max_asks
                ),
            ));
        }
        if let Some(b) = &req.blacklist_request {
            if at.blacklist.len() + b.blacklist_additions.len() > max_blacklist {
                return Err(err(
                    exc::INVALID_BLACKLIST_REQUEST,
                    format!(
                        "Invalid blacklist request by application {a}: more than {} hosts",
                        max_blacklist
                    ),
                ));
            }
        }
        at.progress = req.progress.unwrap_or(at.progress);
        if let Some(b) = &req.blacklist_request {
            for h in &b.blacklist_additions {
                at.blacklist.insert(h.clone());
            }
            for h in &b.blacklist_removals {
                at.blacklist.remove(h);
            }
        }
        if at.state == AttemptState::Running {
            for r in &req.ask {
                let res = r
                    .capability
                    .as_ref()
                    .map(Res::from_proto)
                    .unwrap_or_default()
                    .normalize(min, max);
                let prio = r.priority.and_then(|p| p.priority).unwrap_or(0);
                let name = r.resource_name.clone().unwrap_or_else(|| ANY.into());
                let ask = Ask {
                    capability: res,
                    num: r.num_containers.unwrap_or(0),
                    relax: r.relax_locality.unwrap_or(true),
                };
                let m = at.asks.entry(prio).or_default();
                if ask.num == 0 && name != ANY {
                    m.remove(&name);
                } else {
                    m.insert(name, ask);
                }
            }
            if !req.ask.is_empty() {
                self.pending.insert(super::pend_key(app_priority, a.app.id));
            }
        }
        // Immediate placement: new asks are placed now and come back in this response (Java's
        // asynchronous scheduling also allocates between an AM's calls).
        // Only nodes with room for the attempt's smallest outstanding ask are tried.
        let need = if immediate && at.state == AttemptState::Running && !req.ask.is_empty() {
            at.asks
                .values()
                .filter_map(|m| m.get(ANY))
                .filter(|x| x.num > 0)
                .map(|x| x.capability)
                .reduce(Res::smallest)
        } else {
            None
        };
        let (at, user, total, used) = match need {
            Some(need) => {
                self.place_now(now_ms, need, |x| {
                    x.app(a.app)
                        .and_then(|app| app.attempts.iter().find(|t| t.id == a))
                        .is_some_and(|t| t.pending_containers() > 0)
                });
                let (total, used) = self.cluster_resources();
                let (at, user) = Self::attempt_in(&mut self.apps, a)?;
                (at, user, total, used)
            }
            _ => (at, user, total, used),
        };
        let mut released = Vec::new();
        for c in &req.release {
            let Some(c) = container_from_proto(c) else {
                continue;
            };
            if at.am_container == Some(c) {
                continue;
            }
            if let Some(l) = at.live.remove(&c) {
                at.new_containers.retain(|n| n.id != c);
                released.push((c, l));
            }
        }
        for (c, _) in &released {
            at.completed.push(status(
                *c,
                exit_status::ABORTED,
                "Container released by application",
            ));
        }
        // Newly allocated containers, with tokens.
        let mut resp = AllocateResponseProto {
            a_m_command: None,
            response_id: Some(crate::tracker::next_response_id(last)),
            num_cluster_nodes: Some(cluster_nodes),
            limit: Some(total.minus(used).to_proto()),
            ..Default::default()
        };
        let mut minting: Option<TokenKeys> = None;
        for n in at.new_containers.drain(..) {
            // The keys only when there is something to mint (most calls have not).
            let keys = minting.get_or_insert_with(&keys);
            let token = container_token(
                keys,
                n.id,
                &n.node,
                user,
                n.res,
                n.priority,
                now_ms,
                expiry,
                ContainerTypeProto::Task,
            );
            // A token per node, again after the NM key rolled (Java clears its record on
            // activating the next key).
            if at.nm_token_nodes.insert(n.node.clone(), keys.nm.key_id) != Some(keys.nm.key_id) {
                resp.nm_tokens.push(NmTokenProto {
                    node_id: Some(n.node.to_proto()),
                    token: Some(nm_token(keys, a, &n.node, user).to_proto()),
                });
            }
            resp.allocated_containers.push(ContainerProto {
                id: Some(n.id.to_proto()),
                node_id: Some(n.node.to_proto()),
                node_http_address: self.nodes.get(&n.node).map(|x| x.http_address.clone()),
                resource: Some(n.res.to_proto()),
                priority: Some(PriorityProto {
                    priority: Some(n.priority),
                }),
                container_token: Some(token.to_proto()),
                execution_type: Some(ExecutionTypeProto::Guaranteed as i32),
                allocation_request_id: Some(-1),
                version: Some(0),
                allocation_tags: Vec::new(),
                exposed_ports: None,
            });
        }
        resp.completed_container_statuses = std::mem::take(&mut at.completed);
        let pulled: Vec<ContainerId> = resp
            .completed_container_statuses
            .iter()
            .filter_map(|s| s.container_id.as_ref().and_then(container_from_proto))
            .collect();
        // AMRMToken rolling: while a next key is pending, a caller whose token was made with
        // another key gets a token under the next key (Java's "rolled-over" branch).
        // Without a pending key (nearly always) that is one read-lock check.
        let rolled = amrm
            .read()
            .next_key()
            .is_some_and(|k| k.key_id != caller_key_id);
        if rolled {
            let caller = hadoop_wire::token::AmrmTokenIdentifier::new(Some(a), caller_key_id);
            if let Ok(Some(t)) = amrm.write().token_for_allocate(&caller) {
                resp.am_rm_token = Some(t.to_proto());
            }
        }
        let resp = Arc::new(resp);
        at.last_response = Some(resp.clone());
        self.cleanups.extend(pulled.into_iter().map(Cleanup::Ack));
        for (c, l) in released {
            self.nodes.update(&l.node, |n| {
                n.used = n.used.minus(l.res);
                n.containers = n.containers.saturating_sub(1);
            });
            self.cleanups.push(Cleanup::Container(c));
        }
        Ok(resp)
    }
}
