//! A dispatcher shard: the node state machines of the nodes hashed to it, their completion
//! log, and the loop that drains its [`Mailbox`].
//!
//! [`Shard::process`] is the sans-IO core (an [`Inbox`] in, node state, log batch and outbox
//! items out). [`Shard::run_once`] adds the hand-over: take the inbox, process it, commit the
//! completion log (write + fsync), then publish the cleanup items and — only now that the
//! completions are durable — the acknowledgements.

use std::sync::Arc;
use std::time::Duration;

use hadoop_wire::view::yarn::{ContainerStatusView, NodeStatusView};

use crate::completion_log::{CompletionLog, LoadReport};
use crate::ids::{AppKey, ContainerKey, FastSet};
use crate::mailbox::{ops, Global, Inbox, Mailbox, Op};
use crate::metrics::ShardMetrics;
use crate::node::{
    NodeEvent, NodeSnapshot, NodeState, NodeStats, OutItem, SchedChange, ShardCtx, UnknownApps,
};
use crate::Error;

/// What one batch did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchReport {
    pub entries: usize,
    pub merged: u64,
    pub committed: u64,
}

/// One shard's state (owned by its thread).
#[derive(Debug)]
pub struct Shard {
    index: usize,
    nodes: Vec<Option<NodeState>>,
    finished_apps: FastSet<AppKey>,
    /// Applications the RM runs (with [`UnknownApps::Clean`]).
    live_apps: FastSet<AppKey>,
    unknown_apps: UnknownApps,
    log: CompletionLog,
    spare: Inbox,
    out: Vec<(u32, OutItem)>,
    acks: Vec<(u32, ContainerKey)>,
    events: Vec<NodeEvent>,
    /// Changes for the scheduler since the last [`take_sched`](Self::take_sched).
    sched: Vec<SchedChange>,
    stats: NodeStats,
    opportunistic: bool,
    steady_fast_path: bool,
    metrics: Arc<ShardMetrics>,
    latencies: Vec<u64>,
}

impl Shard {
    /// A shard with its log already opened.
    pub fn new(
        index: usize,
        log: CompletionLog,
        opportunistic: bool,
        metrics: Arc<ShardMetrics>,
    ) -> Shard {
        Shard {
            index,
            nodes: Vec::new(),
            finished_apps: FastSet::default(),
            live_apps: FastSet::default(),
            unknown_apps: UnknownApps::Adopt,
            log,
            spare: Inbox::default(),
            out: Vec::new(),
            acks: Vec::new(),
            events: Vec::new(),
            sched: Vec::new(),
            stats: NodeStats::default(),
            opportunistic,
            steady_fast_path: true,
            metrics,
            latencies: Vec::new(),
        }
    }

    /// Opens the shard's completion log in `dir` and builds the shard.
    pub fn open(
        dir: &std::path::Path,
        index: usize,
        shards: usize,
        opportunistic: bool,
    ) -> Result<(Shard, LoadReport), Error> {
        let (log, report) = CompletionLog::open(dir, index, shards)?;
        Ok((
            Shard::new(index, log, opportunistic, Arc::new(ShardMetrics::default())),
            report,
        ))
    }

    pub fn index(&self) -> usize {
        self.index
    }

    /// Turns the steady-state fast path of status updates (see [`crate::node`]) on (the
    /// default) or off: off, every status update reads every container status, for
    /// measuring the full path and for checking that both end in the same state.
    pub fn set_steady_fast_path(&mut self, on: bool) {
        self.steady_fast_path = on;
    }

    pub fn metrics(&self) -> &Arc<ShardMetrics> {
        &self.metrics
    }

    pub fn log(&self) -> &CompletionLog {
        &self.log
    }

    pub fn stats(&self) -> &NodeStats {
        &self.stats
    }

    pub fn node(&self, node: u32) -> Option<&NodeState> {
        self.nodes.get(node as usize).and_then(Option::as_ref)
    }

    pub fn node_snapshot(&self, node: u32) -> Option<NodeSnapshot> {
        self.node(node).map(NodeState::snapshot)
    }

    /// Every node this shard knows.
    pub fn nodes(&self) -> impl Iterator<Item = &NodeState> {
        self.nodes.iter().flatten()
    }

    /// Events (transitions, releases) since the last call.
    pub fn drain_events(&mut self) -> std::vec::Drain<'_, NodeEvent> {
        self.events.drain(..)
    }

    /// Moves the changes for the scheduler collected so far (completions, containers first
    /// seen RUNNING, health transitions; only while the RM runs applications) into `into`,
    /// keeping the shard's buffer for reuse.
    pub fn take_sched(&mut self, into: &mut Vec<SchedChange>) {
        into.append(&mut self.sched);
    }

    /// Whether changes for the scheduler are waiting.
    pub fn has_sched(&self) -> bool {
        !self.sched.is_empty()
    }

    /// Items for responses produced so far and not yet published (cleanups at once; acks only
    /// after [`commit`](Self::commit)).
    pub fn take_out(&mut self, into: &mut Vec<(u32, OutItem)>) {
        into.append(&mut self.out);
    }

    fn ctx(&mut self, now_ms: u64) -> (&mut Vec<Option<NodeState>>, ShardCtx<'_>) {
        (
            &mut self.nodes,
            ShardCtx {
                now_ms,
                opportunistic: self.opportunistic,
                steady_fast_path: self.steady_fast_path,
                finished_apps: &self.finished_apps,
                live_apps: &self.live_apps,
                unknown_apps: self.unknown_apps,
                log: &mut self.log,
                out: &mut self.out,
                acks: &mut self.acks,
                events: &mut self.events,
                stats: &mut self.stats,
                sched: &mut self.sched,
            },
        )
    }

    /// Applies one status update to `node` directly (no inbox): the decode-and-update step
    /// by itself, for benches and tests. Unknown nodes are ignored.
    pub fn apply_status(
        &mut self,
        node: u32,
        status: NodeStatusView<'_>,
        now_ms: u64,
    ) -> Result<(), hadoop_wire::reader::DecodeError> {
        let (nodes, mut ctx) = self.ctx(now_ms);
        match nodes.get_mut(node as usize).and_then(Option::as_mut) {
            Some(n) => n.status_update(status, &mut ctx),
            None => Ok(()),
        }
    }

    /// [`apply_status`](Self::apply_status) from a prost-decoded status (the eager baseline).
    pub fn apply_status_owned(
        &mut self,
        node: u32,
        status: &hadoop_wire::pb::hadoop::yarn::NodeStatusProto,
        now_ms: u64,
        on_status: impl FnMut(&hadoop_wire::pb::hadoop::yarn::ContainerStatusProto),
    ) {
        let (nodes, mut ctx) = self.ctx(now_ms);
        if let Some(n) = nodes.get_mut(node as usize).and_then(Option::as_mut) {
            n.status_update_owned(status, &mut ctx, on_status);
        }
    }

    /// Applies one inbox (sans-IO). Records go to the log batch, cleanup items to the outbox
    /// list, acknowledgements to the pending-ack list.
    pub fn process(&mut self, inbox: &Inbox, now_ms: u64, now_ns: u64) -> BatchReport {
        let mut report = BatchReport::default();
        for (node, id) in &inbox.new_nodes {
            let n = *node as usize;
            if n >= self.nodes.len() {
                self.nodes.resize_with(n + 1, || None);
            }
            if self.nodes[n].is_none() {
                self.nodes[n] = Some(NodeState::new(*node, id.clone()));
            }
        }
        for g in &inbox.globals {
            match *g {
                Global::FinishApp(app) => {
                    self.finished_apps.insert(app);
                    self.live_apps.remove(&app);
                }
                Global::LiveApp(app) => {
                    if !self.finished_apps.contains(&app) {
                        self.live_apps.insert(app);
                    }
                }
                Global::CleanUnknownApps { recovery } => {
                    self.unknown_apps = UnknownApps::Clean { recovery };
                }
                Global::KillContainer(_) => {}
            }
        }
        let mut ctx = ShardCtx {
            now_ms,
            opportunistic: self.opportunistic,
            steady_fast_path: self.steady_fast_path,
            finished_apps: &self.finished_apps,
            live_apps: &self.live_apps,
            unknown_apps: self.unknown_apps,
            log: &mut self.log,
            out: &mut self.out,
            acks: &mut self.acks,
            events: &mut self.events,
            stats: &mut self.stats,
            sched: &mut self.sched,
        };
        for g in &inbox.globals {
            match *g {
                Global::FinishApp(app) => {
                    for n in self.nodes.iter_mut().flatten() {
                        n.finish_app(app, &mut ctx);
                    }
                }
                Global::KillContainer(c) => {
                    for n in self.nodes.iter_mut().flatten() {
                        n.kill_container(c, &mut ctx);
                    }
                }
                Global::LiveApp(_) | Global::CleanUnknownApps { .. } => {}
            }
        }
        for e in inbox.entries() {
            report.entries += 1;
            report.merged += e.merged as u64;
            let Some(node) = self.nodes.get_mut(e.node as usize).and_then(Option::as_mut) else {
                ctx.stats.malformed += 1;
                continue;
            };
            for op in ops(&e.ops) {
                match op {
                    Op::Complete(b) => {
                        if node
                            .carried_complete(ContainerStatusView::new(b), &mut ctx)
                            .is_err()
                        {
                            ctx.stats.malformed += 1;
                        }
                    }
                    Op::App(a) => node.see_app(a, &mut ctx),
                    Op::Reset(k) => node.reset(k, &mut ctx),
                    Op::Registered => node.end_registration(),
                }
            }
            if e.has_newest
                && node
                    .status_update(NodeStatusView::new(&e.newest), &mut ctx)
                    .is_err()
            {
                ctx.stats.malformed += 1;
            }
            self.latencies
                .push((now_ns.saturating_sub(e.enqueued_ns) / 1000).max(1));
        }
        self.metrics.add_batch(&report);
        self.metrics.publish_stats(&self.stats);
        self.metrics.record_latencies(&mut self.latencies);
        report
    }

    /// Writes and fsyncs the log batch; on success moves the pending acknowledgements to the
    /// outbox list. On failure they stay pending for the next attempt.
    pub fn commit(&mut self) -> Result<u64, Error> {
        let n = self.log.commit()?;
        self.out
            .extend(self.acks.drain(..).map(|(n, c)| (n, OutItem::Ack(c))));
        Ok(n)
    }

    /// One loop iteration: wait up to `wait` for work, process it, commit, publish.
    /// Returns `Ok(None)` on shutdown.
    pub fn run_once(
        &mut self,
        mailbox: &Mailbox,
        wait: Duration,
        clock: &dyn Fn() -> (u64, u64),
    ) -> Result<Option<BatchReport>, Error> {
        let mut inbox = std::mem::take(&mut self.spare);
        if !mailbox.take_inbox(&mut inbox, wait) {
            self.spare = inbox;
            return Ok(None);
        }
        let (now_ms, now_ns) = clock();
        let mut report = self.process(&inbox, now_ms, now_ns);
        inbox.clear();
        self.spare = inbox;
        let committed = self.commit();
        mailbox.publish(&mut self.out);
        if committed.is_err() {
            self.metrics
                .log_errors
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        report.committed = committed?;
        Ok(Some(report))
    }

    /// Publishes node-state gauges (O(nodes): call about once a second).
    pub fn publish_gauges(&self) {
        use crate::node::Lifecycle;
        use std::sync::atomic::Ordering::Relaxed;
        let (mut running, mut unhealthy, mut lost, mut containers) = (0, 0, 0, 0);
        for n in self.nodes() {
            match n.lifecycle() {
                Lifecycle::Running => running += 1,
                Lifecycle::Unhealthy => unhealthy += 1,
                Lifecycle::Lost => lost += 1,
                _ => {}
            }
            containers += n.launched_len() as u64;
        }
        self.metrics.nodes_running.store(running, Relaxed);
        self.metrics.nodes_unhealthy.store(unhealthy, Relaxed);
        self.metrics.nodes_lost.store(lost, Relaxed);
        self.metrics.containers.store(containers, Relaxed);
    }

    /// Forgets completed ids past the retention (housekeeping, once in a while).
    pub fn prune(&mut self, now_ms: u64, retention_ms: u64) -> usize {
        self.log.prune(now_ms, retention_ms)
    }
}
