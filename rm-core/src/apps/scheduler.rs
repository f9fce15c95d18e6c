//! The FIFO scheduler's side of [`Apps`]: node events (registration, removal, NODE_UPDATE
//! with its completions), placement on one node (`schedule_on`: applications in submission
//! order, each its AM container first, then its asks by priority and locality, Java's
//! `FifoScheduler.assignContainersOnNode`), immediate placement on the roomiest nodes, and
//! the resource-request check shared by submission and `allocate`.

use std::collections::HashMap;

use hadoop_wire::pb::hadoop::yarn::{ContainerLaunchContextProto, ContainerStateProto};
use hadoop_wire::view::yarn::NodeStatusView;
use hadoop_wire::yarn::exit_status;
use hadoop_wire::yarn::ids::ContainerId;

use crate::ids::{ContainerKey, NodeKey, NodeKeyRef};
use crate::node::SchedChange;

/// The scheduler's container id of a shard's container key.
fn container_id(k: &ContainerKey) -> ContainerId {
    ContainerId {
        app: hadoop_wire::yarn::ids::AppId::new(k.app.cluster_timestamp, k.app.id),
        attempt: k.attempt,
        id: k.id,
    }
}

use super::{
    err, exc, AmLaunch, AppError, AppState, Apps, Ask, Attempt, AttemptState, Cleanup,
    LiveContainer, NewContainer, Reported, Res, ANY, DEFAULT_RACK,
};

impl Apps {
    /// A node registered (or re-registered) with this capability.
    pub fn node_added(&mut self, key: &NodeKey, http_address: String, total: Res) {
        self.nodes.upsert(key, |n| {
            n.http_address = http_address;
            n.total = total;
            n.active = true;
            n.unhealthy = false;
            n.health_report.clear();
        });
    }

    /// A node left (lost, shut down, decommissioned, rebooted): its containers are completed
    /// ABORTED "Container released on a *lost* node".
    pub fn node_removed(&mut self, key: &NodeKey, now_ms: u64) {
        let held = self.nodes.get(key).map_or(0, |n| n.containers);
        self.nodes.update(key, |n| {
            n.active = false;
            n.unhealthy = false;
        });
        // A node that holds nothing (every first registration, a node lost while idle) costs
        // no walk over every live container of the cluster.
        if held == 0 {
            self.update_gate();
            return;
        }
        let mut gone = Vec::new();
        for app in self.apps.values() {
            for at in &app.attempts {
                for (c, l) in &at.live {
                    if &l.node == key {
                        gone.push(*c);
                    }
                }
            }
        }
        for c in gone {
            self.container_completed(
                c,
                exit_status::ABORTED,
                "Container released on a *lost* node",
                now_ms,
            );
            // A node that comes back (re-registers) is told to kill what may still run there.
            self.cleanups.push(Cleanup::Container(c));
        }
        self.update_gate();
    }

    /// A node (re-)registered, reporting its containers, with no running applications. The
    /// reported completions complete with their real status, whatever else the RM had on the
    /// node is lost (Java removes and re-adds a node that reconnects running no application;
    /// see [`node_registered_running`](Self::node_registered_running)), and the node's capacity
    /// is (re)set. The first registration of a node after live applications
    /// were recovered reconciles instead (see the module docs).
    pub fn node_registered(
        &mut self,
        key: &NodeKey,
        http_address: String,
        total: Res,
        reported: &[Reported],
        now_ms: u64,
    ) {
        self.node_registered_running(key, http_address, total, reported, false, now_ms);
    }

    /// [`node_registered`](Self::node_registered) with whether the registration named running
    /// applications. A node registering again while it is in the scheduler is Java's
    /// reconnect (`RMNodeImpl`'s ReconnectNodeTransition): one that still runs applications
    /// (a NodeManager restarted with recovery on, the same NodeId) keeps its containers and
    /// takes its new capability and web address; one that runs none leaves the scheduler and
    /// comes back (its containers completed ABORTED as on a lost node). Completions it
    /// re-reports are applied either way.
    pub fn node_registered_running(
        &mut self,
        key: &NodeKey,
        http_address: String,
        total: Res,
        reported: &[Reported],
        running_apps: bool,
        now_ms: u64,
    ) {
        if self.reconcile && !self.nodes.contains_key(key) {
            self.reconcile_node(key, http_address, total, reported, now_ms);
            return;
        }
        for r in reported {
            if r.state == ContainerStateProto::CComplete {
                self.container_reported_complete(r.id, r.exit_status, &r.diagnostics, now_ms);
            }
        }
        if running_apps && self.nodes.get(key).is_some_and(|n| n.active) {
            self.nodes.update(key, |n| {
                n.http_address = http_address;
                n.total = total;
            });
            self.update_gate();
            return;
        }
        self.node_removed(key, now_ms);
        self.node_added(key, http_address, total);
    }

    /// Total and used resources over active nodes.
    pub fn cluster_resources(&self) -> (Res, Res) {
        let (_, total, used) = self.nodes.totals();
        (total, used)
    }

    /// Nodes out of the scheduler because they reported themselves unhealthy.
    pub fn unhealthy_nodes(&self) -> usize {
        self.nodes.unhealthy()
    }

    /// Active nodes (`numClusterNodes`).
    pub fn active_nodes(&self) -> usize {
        self.nodes.totals().0
    }

    /// A heartbeat of a node while [`work`](Self::work) is set (Java's NODE_UPDATE allocates
    /// in the node's heartbeat): the scheduler assigns containers on the node if it is
    /// healthy, active and has room for the smallest pending need. Completions and containers
    /// seen RUNNING do not come this way: the shards pass them on
    /// ([`apply_node_changes`](Self::apply_node_changes)). Allocates nothing unless it places
    /// a container.
    pub fn node_heartbeat(&mut self, host: &str, port: i32, healthy: bool, now_ms: u64) {
        if !healthy {
            return;
        }
        let Some(need) = self.min_need else {
            return;
        };
        let probe: &dyn NodeKeyRef = &(host, port);
        let Some(n) = self.nodes.get(probe) else {
            return;
        };
        if !n.active || !need.fits_in(n.total.minus(n.used)) {
            return;
        }
        let key = n.key.clone();
        self.schedule_on(&key, now_ms);
        self.update_gate();
    }

    /// What the shards saw change on the nodes, in a batch (see [`SchedChange`]): containers
    /// first seen RUNNING (for the allocation expiry), completions (each applied once: a
    /// container no longer live is skipped), and health transitions (an unhealthy node leaves
    /// the scheduler as in Java, its containers completed as lost; healthy again, it is
    /// back). Then the scheduler assigns containers on the nodes that completions freed room
    /// on, while applications are pending.
    pub fn apply_node_changes(&mut self, changes: &[SchedChange], now_ms: u64) {
        let mut freed: Vec<NodeKey> = Vec::new();
        for ch in changes {
            match ch {
                SchedChange::Started(k) => self.mark_started(container_id(k)),
                SchedChange::Completed {
                    container,
                    exit_status,
                    diagnostics,
                } => {
                    let c = container_id(container);
                    let node = self.live_node(c);
                    if let Some(node) = node {
                        self.container_completed(c, *exit_status, diagnostics, now_ms);
                        if !freed.contains(&node) {
                            freed.push(node);
                        }
                    }
                }
                SchedChange::Unhealthy { node, report } => {
                    // (A node already out, lost or gone, stays as it is.)
                    if self.nodes.get(node).is_some_and(|n| n.active) {
                        self.node_removed(node, now_ms);
                        self.nodes.update(node, |n| {
                            n.unhealthy = true;
                            n.health_report.clone_from(report);
                        });
                    }
                }
                SchedChange::Healthy { node } => {
                    self.nodes.update(node, |n| {
                        if n.unhealthy {
                            n.unhealthy = false;
                            n.health_report.clear();
                            n.active = true;
                        }
                    });
                }
            }
        }
        if !self.pending.is_empty() {
            for node in &freed {
                self.schedule_on(node, now_ms);
            }
        }
        self.update_gate();
    }

    /// The node a live container was placed on.
    fn live_node(&self, c: ContainerId) -> Option<NodeKey> {
        self.apps
            .get(&c.app.id)
            .filter(|a| a.id == c.app)
            .and_then(|a| a.attempts.iter().find(|t| t.id.attempt == c.attempt))
            .and_then(|t| t.live.get(&c))
            .map(|l| l.node.clone())
    }

    /// NODE_UPDATE: completed containers reported in this status are applied, then the
    /// scheduler assigns containers on the node. Malformed statuses are skipped. (The RM's
    /// heartbeat path no longer calls this: see [`node_heartbeat`](Self::node_heartbeat) and
    /// [`apply_node_changes`](Self::apply_node_changes). Kept for the unit tests and for a
    /// caller without shards.)
    pub fn node_update(&mut self, host: &str, port: i32, status: NodeStatusView<'_>, now_ms: u64) {
        let probe: &dyn NodeKeyRef = &(host, port);
        let Some(key) = self.nodes.get(probe).map(|n| n.key.clone()) else {
            return;
        };
        let mut done = Vec::new();
        for cs in status.containers_statuses() {
            let Ok(cs) = cs else { continue };
            let state = cs.state().ok().flatten();
            if state == Some(ContainerStateProto::CRunning) && self.unstarted {
                if let Some(c) = cs
                    .container_id()
                    .ok()
                    .flatten()
                    .and_then(|v| ContainerId::from_view(v).ok().flatten())
                {
                    self.mark_started(c);
                }
                continue;
            }
            if state != Some(ContainerStateProto::CComplete) {
                continue;
            }
            let Some(c) = cs
                .container_id()
                .ok()
                .flatten()
                .and_then(|v| ContainerId::from_view(v).ok().flatten())
            else {
                continue;
            };
            if self.is_live(c) {
                done.push((
                    c,
                    cs.exit_status().unwrap_or(exit_status::INVALID),
                    cs.diagnostics().unwrap_or("").to_string(),
                ));
            }
        }
        for (c, exit, diag) in done {
            self.container_completed(c, exit, &diag, now_ms);
        }
        self.schedule_on(&key, now_ms);
        self.update_gate();
    }

    /// A completion reported outside a heartbeat (the NodeManager's re-registration).
    pub fn container_reported_complete(
        &mut self,
        c: ContainerId,
        exit: i32,
        diagnostics: &str,
        now_ms: u64,
    ) {
        if self.is_live(c) {
            self.container_completed(c, exit, diagnostics, now_ms);
            self.update_gate();
        }
    }

    fn mark_started(&mut self, c: ContainerId) {
        if let Some(l) = self
            .apps
            .get_mut(&c.app.id)
            .filter(|a| a.id == c.app)
            .and_then(|a| a.attempts.iter_mut().find(|t| t.id.attempt == c.attempt))
            .and_then(|t| t.live.get_mut(&c))
        {
            l.started = true;
        }
        if !self.unstarted_ids.is_empty() {
            self.unstarted_ids.remove(&c);
        }
    }

    pub(super) fn is_live(&self, c: ContainerId) -> bool {
        self.apps
            .get(&c.app.id)
            .filter(|a| a.id == c.app)
            .and_then(|a| a.attempts.iter().find(|t| t.id.attempt == c.attempt))
            .is_some_and(|t| t.live.contains_key(&c))
    }

    fn schedule_on(&mut self, key: &NodeKey, now_ms: u64) {
        let Some(node) = self.nodes.get(key) else {
            return;
        };
        if !node.active {
            return;
        }
        // The pending applications (an index, not a walk over every application); one found
        // with nothing to place leaves the index.
        // Higher application priority first, then submission order (the CapacityScheduler's
        // FIFO ordering policy; with Java's default `yarn.cluster.max-application-priority`
        // of 0 every application has priority 0 and this is submission order).
        let mut from: Option<super::PendKey> = None;
        loop {
            let next = match from {
                None => self.pending.iter().next(),
                Some(f) => self
                    .pending
                    .range((std::ops::Bound::Excluded(f), std::ops::Bound::Unbounded))
                    .next(),
            };
            let Some(&k) = next else { break };
            from = Some(k);
            let i = k.1;
            if self.apps.get(&i).and_then(super::pending_need).is_none() {
                self.pending.remove(&k);
                continue;
            }
            let avail = match self.nodes.get(key) {
                Some(n) if !n.decommissioning => n.total.minus(n.used),
                _ => return,
            };
            if avail.mem <= 0 || avail.vcores <= 0 {
                return;
            }
            let Some(app) = self.apps.get_mut(&i) else {
                continue;
            };
            let am_res = app.am_res;
            let max_attempts = app.max_attempts;
            let priority = app.priority;
            let (user, spec) = match app.current() {
                Some(t) if t.state == AttemptState::Scheduled && am_res.fits_in(avail) => {
                    (app.user.clone(), app.am_spec.clone())
                }
                _ => (String::new(), ContainerLaunchContextProto::default()),
            };
            let Some(at) = app.current_mut() else {
                continue;
            };
            if at.blacklist.contains(&*key.host) {
                continue;
            }
            match at.state {
                AttemptState::Scheduled => {
                    if !am_res.fits_in(avail) {
                        continue;
                    }
                    let c = at.next_container();
                    at.live.insert(
                        c,
                        LiveContainer {
                            node: key.clone(),
                            res: am_res,
                            priority,
                            allocated_ms: now_ms,
                            started: true,
                        },
                    );
                    at.am_container = Some(c);
                    at.am_node = Some(key.clone());
                    at.state = AttemptState::Allocated;
                    at.last_contact_ms = now_ms;
                    let attempt = at.id;
                    self.nodes.update(key, |n| {
                        n.used = n.used.plus(am_res);
                        n.containers += 1;
                    });
                    let minted = self.amrm.write().create_and_get_amrm_token(attempt);
                    match minted {
                        Ok(t) => self.launches.push(AmLaunch {
                            attempt,
                            container: c,
                            node: key.clone(),
                            user,
                            res: am_res,
                            priority,
                            launch: spec,
                            amrm_token: t,
                            max_app_attempts: max_attempts,
                        }),
                        Err(e) => {
                            let d = format!("Error launching {attempt}. Got exception: {e}");
                            self.end_attempt(attempt, AttemptState::Failed, d, now_ms);
                        }
                    }
                }
                AttemptState::Launched | AttemptState::Running => {
                    let mut left = avail;
                    let before = at.new_containers.len();
                    assign_asks(at, key, &mut left, now_ms);
                    let added = at.new_containers.len() - before;
                    if added > 0 {
                        self.unstarted = true;
                        self.unstarted_ids
                            .extend(at.new_containers[before..].iter().map(|n| n.id));
                    }
                    self.nodes.update(key, |n| {
                        n.used = n.used.plus(avail.minus(left));
                        n.containers += added;
                    });
                }
                _ => {}
            }
        }
    }

    /// Whether an attempt became SCHEDULED since [`place_unplaced`](Self::place_unplaced) last
    /// ran (then it has something to do).
    pub fn has_unplaced(&self) -> bool {
        self.unplaced
    }

    /// With [`AppsConfig::immediate_placement`](super::AppsConfig::immediate_placement): AM
    /// containers of attempts that became SCHEDULED since the last call (submitted, retried)
    /// are placed now on the nodes with the most room, rather than on the next heartbeat of a
    /// node with room. Without work (or in heartbeat-only mode) this is one flag test: the
    /// heartbeat path may call it.
    pub fn place_unplaced(&mut self, now_ms: u64) {
        if !self.unplaced {
            return;
        }
        self.unplaced = false;
        if !self.cfg.immediate_placement {
            return;
        }
        let waiting = |a: &Apps| {
            a.pending
                .iter()
                .filter_map(|k| a.apps.get(&k.1))
                .filter(|x| {
                    matches!(x.state, AppState::Accepted)
                        && x.current()
                            .is_some_and(|t| t.state == AttemptState::Scheduled)
                })
                .map(|x| x.am_res)
                .reduce(Res::smallest)
        };
        // Only nodes with room for the smallest waiting AM are tried.
        if let Some(need) = waiting(self) {
            self.place_now(now_ms, need, |a| waiting(a).is_some());
        }
    }

    /// One scheduling pass outside a heartbeat: [`schedule_on`](Self::schedule_on) on each
    /// active node with room for `need`, the most free memory (then vcores) first, while
    /// `pending` says there is still something to place.
    pub(super) fn place_now(&mut self, now_ms: u64, need: Res, pending: impl Fn(&Apps) -> bool) {
        // Each node once: only the visited one's room changed, so the next roomiest unvisited
        // node is the next one of the order as it stood at the start.
        let mut visited = Vec::new();
        while pending(self) {
            let Some((slot, key)) = self.nodes.roomiest(need, &visited) else {
                break;
            };
            let key = key.clone();
            visited.push(slot);
            self.schedule_on(&key, now_ms);
        }
    }

    /// `SchedulerUtils.validateResourceRequest`: negative or over the maximum allocation.
    pub(super) fn validate(&self, r: Res) -> Result<(), AppError> {
        let max = self.cfg.max_alloc;
        let (kind, bad) = if r.mem < 0 {
            ("memory-mb", -1)
        } else if r.vcores < 0 {
            ("vcores", -1)
        } else if r.mem > max.mem {
            ("memory-mb", 1)
        } else if r.vcores > max.vcores {
            ("vcores", 1)
        } else {
            return Ok(());
        };
        let text = if bad < 0 {
            format!(
                "Invalid resource request! Cannot allocate containers as requested resource is less than 0! Requested resource type=[{kind}], Requested resource={r}"
            )
        } else {
            format!(
                "Invalid resource request! Cannot allocate containers as requested resource is greater than maximum allowed allocation. Requested resource type=[{kind}], Requested resource={r}, maximum allowed allocation={max}, please note that maximum allowed allocation is calculated by scheduler based on maximum resource of registered NodeManagers, which might be less than configured maximum allocation={max}"
            )
        };
        Err(err(exc::INVALID_RESOURCE_REQUEST, text))
    }
}

/// Assigns the attempt's asks on one node, priority by priority (FifoScheduler
/// `assignContainersOnNode`): node-local, rack-local, off-switch.
fn assign_asks(at: &mut Attempt, key: &NodeKey, avail: &mut Res, now_ms: u64) {
    // Priorities in order, without collecting them (this runs on heartbeats).
    let mut next = at.asks.keys().next().copied();
    while let Some(p) = next {
        next = at
            .asks
            .range((std::ops::Bound::Excluded(p), std::ops::Bound::Unbounded))
            .next()
            .map(|(&k, _)| k);
        while let Some(m) = at.asks.get(&p) {
            let Some(any) = m.get(ANY).copied() else {
                break;
            };
            if any.num <= 0 || !any.capability.fits_in(*avail) {
                break;
            }
            let host: &str = &key.host;
            let node_ask = m.get(host).copied().filter(|a| a.num > 0);
            let rack_ask = m.get(DEFAULT_RACK).copied();
            let level = if node_ask.is_some() && rack_ask.is_none_or(|r| r.num > 0) {
                // Java requires the rack request to be outstanding too; AMRMClient always
                // sends one with a node request.
                Some(0)
            } else if rack_ask.is_some_and(|r| r.num > 0) && any.relax {
                Some(1)
            } else if any.relax && rack_ask.is_none_or(|r| r.relax) && node_ask.is_none() {
                // Off-switch: only if no named node or rack in this priority forbids it. A
                // node-local ask elsewhere with relaxLocality false keeps its containers there.
                let strict_elsewhere = m
                    .iter()
                    .any(|(n, a)| n != ANY && !a.relax && a.num > 0 && n != host);
                (!strict_elsewhere).then_some(2)
            } else {
                None
            };
            let Some(level) = level else { break };
            let cap = any.capability;
            let m = at.asks.get_mut(&p).expect("present");
            let dec = |m: &mut HashMap<String, Ask>, k: &str| {
                if let Some(a) = m.get_mut(k) {
                    a.num = (a.num - 1).max(0);
                }
            };
            if level == 0 {
                dec(m, host);
            }
            if level <= 1 {
                dec(m, DEFAULT_RACK);
            }
            dec(m, ANY);
            let c = at.next_container();
            at.live.insert(
                c,
                LiveContainer {
                    node: key.clone(),
                    res: cap,
                    priority: p,
                    allocated_ms: now_ms,
                    started: false,
                },
            );
            at.new_containers.push(NewContainer {
                id: c,
                node: key.clone(),
                res: cap,
                priority: p,
            });
            *avail = avail.minus(cap);
        }
    }
}
