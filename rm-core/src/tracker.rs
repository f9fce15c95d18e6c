//! The ResourceTracker protocol, RM side, sans-IO: request bytes in, response bytes out.
//!
//! - [`ResourceTracker::node_heartbeat`] (hot path) reads through `hadoop_wire::view` only what the
//!   answer needs: the node id, the responseId and the last known master key ids. In Java's
//!   order (D.1, B.7): excluded host → SHUTDOWN; unknown or inactive node → RESYNC; duplicate
//!   responseId (`next(request) == last`) → the cached last response, byte for byte; any other
//!   mismatch → "too far behind": RESYNC, and the node is reset as REBOOTED. Otherwise the
//!   next responseId `(id + 1) & 0x7FFFFFFF`, NORMAL, `nextHeartBeatInterval`, a pending next
//!   master key if the node lacks it, and the node's queued cleanups, acknowledgements and
//!   `signalToContainer` signals ([`ResourceTracker::queue_signal`], [`crate::signals`]).
//!   The `NodeStatusProto` bytes go to the node's shard as one STATUS_UPDATE
//!   ([`crate::mailbox`]); the response is encoded into the node's cached-response buffer and
//!   copied to the caller's. Nothing is allocated in steady state.
//! - [`ResourceTracker::register_node_manager`] (cold, prost): minimum NM version, host lists,
//!   minimum allocation, node limit → SHUTDOWN with Java's diagnostics; else NORMAL with the
//!   current master keys, `rm_identifier` (the RM's start time) and `rm_version`. The node's
//!   shard gets a reset (a fresh incarnation), its `runningApplications` (adopted, or cleaned
//!   up there when finished or unknown to an RM running applications), then the container
//!   statuses the NodeManager re-reported (`NMContainerStatusProto`, trap 1) as a first status
//!   update, so completions it still holds are recorded and acknowledged.
//! - [`ResourceTracker::unregister_node_manager`]: the node leaves (SHUTDOWN) and its containers
//!   are released.
//! - [`ResourceTracker::tick`] (housekeeping, about once a second): the liveness monitor (a
//!   node silent for `yarn.nm.liveness-monitor.expiry-interval-ms` is LOST, its containers
//!   released) and master-key rolling.
//! - [`ResourceTracker::refresh_hosts`]: new include/exclude lists; active nodes no longer
//!   allowed are decommissioned at once and told SHUTDOWN on their next heartbeat.
//!
//! Time is a monotonic nanosecond count passed in by the caller (`now_ns`).

use std::sync::Arc;

use hadoop_wire::pb::hadoop::yarn::{
    ContainerStatusProto, NodeActionProto, NodeStatusProto, RegisterNodeManagerRequestProto,
    RegisterNodeManagerResponseProto, ResourceProto, UnRegisterNodeManagerRequestProto,
};
use hadoop_wire::reader::{DecodeError, Reader, WireType};
use hadoop_wire::view::yarn::{MasterKeyView, NodeHeartbeatRequestView, NodeIdView};
use prost::Message;

use crate::hosts::HostLists;
use crate::ids::{shard_of, AppKey, ContainerKey, FastMap, FastSet, NodeKey, NodeKeyRef};
use crate::mailbox::{Global, Mailbox};
use crate::master_key::{Entropy, KeyRoller, MasterKey};
use crate::metrics::TrackerMetrics;
use crate::node::{OutItem, ResetKind};
use crate::response::HeartbeatResponse;
use crate::signals::{NodeSignals, QueuedSignal};
use crate::version::check_nm_version;
use crate::{Error, RmConfig};

/// `(id + 1) & 0x7FFFFFFF`, Java's `getNextResponseId`.
#[inline]
pub fn next_response_id(id: i32) -> i32 {
    (id.wrapping_add(1)) & 0x7FFF_FFFF
}

/// The tracker's view of a node's membership.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Membership {
    Active,
    Lost,
    Shutdown,
    Decommissioned,
    Rebooted,
}

/// What a heartbeat was answered with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeartbeatOutcome {
    /// NORMAL; the status went to `shard`.
    Normal { shard: usize, node: u32 },
    /// A repeat of the last request: the cached response was sent again.
    Duplicate,
    /// RESYNC: the node is unknown or inactive.
    ResyncUnknown,
    /// RESYNC: responseId too far behind (the node was reset as REBOOTED).
    ResyncBehind { last: i32, got: i32 },
    /// SHUTDOWN: the host is not allowed.
    Shutdown,
}

/// What a registration was answered with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegisterOutcome {
    /// NORMAL; `reconnected` if the node was known before.
    Accepted { node: NodeKey, reconnected: bool },
    /// SHUTDOWN with the diagnostics sent.
    Refused { node: NodeKey, reason: String },
}

/// One NodeManager as the tracker knows it.
#[derive(Debug)]
pub struct TrackedNode {
    pub id: NodeKey,
    pub shard: usize,
    pub local: u32,
    pub membership: Membership,
    pub http_port: i32,
    pub total_memory_mb: i64,
    pub total_vcores: i32,
    pub nm_version: String,
    last_response_id: i32,
    last_response: Vec<u8>,
    last_seen_ms: u64,
    acks: Vec<ContainerKey>,
    apps_to_cleanup: Vec<AppKey>,
    containers_to_cleanup: Vec<ContainerKey>,
    /// `signalToContainer` signals for the next response ([`crate::signals`]).
    signals: NodeSignals,
}

impl TrackedNode {
    pub fn last_response_id(&self) -> i32 {
        self.last_response_id
    }
    pub fn last_seen_ms(&self) -> u64 {
        self.last_seen_ms
    }
    /// Signals waiting for the next response (`containers_to_signal`).
    pub fn queued_signals(&self) -> &[QueuedSignal] {
        self.signals.pending()
    }
    /// Items queued for the next response.
    pub fn queued(&self) -> (usize, usize, usize) {
        (
            self.acks.len(),
            self.apps_to_cleanup.len(),
            self.containers_to_cleanup.len(),
        )
    }
}

/// What [`ResourceTracker::tick`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TickReport {
    pub expired: Vec<NodeKey>,
    pub keys_changed: bool,
}

/// The RM side of the ResourceTracker protocol (see the module docs).
pub struct ResourceTracker {
    cfg: RmConfig,
    hosts: HostLists,
    container_keys: KeyRoller,
    nm_keys: KeyRoller,
    entropy: Box<dyn Entropy>,
    rm_identifier: i64,
    by_id: FastMap<NodeKey, (usize, u32)>,
    shards: Vec<Vec<TrackedNode>>,
    mailboxes: Vec<Arc<Mailbox>>,
    metrics: Arc<TrackerMetrics>,
    scratch: Vec<(u32, OutItem)>,
    active: usize,
    /// Nodes by [`Membership`] (indexed by its discriminant), kept as they change: cluster
    /// reports read them without walking the nodes under the lock.
    by_membership: [usize; 5],
    /// Nodes deactivated since the last [`ResourceTracker::take_departed`] (cold path only),
    /// for the scheduler; capped at the node count.
    departed: Vec<NodeKey>,
    /// Applications whose completed containers are acknowledged to the NodeManager only after
    /// their ApplicationMaster pulled them (trap 1; [`ResourceTracker::hold_acks`]).
    held_apps: FastSet<AppKey>,
    /// Acknowledgements waiting for the AM: container → (shard, node).
    parked: FastMap<ContainerKey, (usize, u32)>,
    /// Pulled by the AM before the shard's acknowledgement arrived: acknowledged on arrival.
    released_early: FastSet<ContainerKey>,
}

/// Most acknowledgements parked for ApplicationMasters; beyond it they go out at once.
pub const MAX_PARKED_ACKS: usize = 1_000_000;

/// Parks `c`'s acknowledgement if its application is held and its AM has not pulled it yet;
/// false if it goes out now.
#[inline(never)]
fn park(
    held: &FastSet<AppKey>,
    parked: &mut FastMap<ContainerKey, (usize, u32)>,
    released_early: &mut FastSet<ContainerKey>,
    c: ContainerKey,
    at: (usize, u32),
) -> bool {
    if !held.contains(&c.app) || released_early.remove(&c) || parked.len() >= MAX_PARKED_ACKS {
        return false;
    }
    parked.insert(c, at);
    true
}

fn dec(message: &'static str) -> impl Fn(hadoop_wire::reader::DecodeError) -> Error {
    move |source| Error::Decode { message, source }
}

fn key_id(k: Option<MasterKeyView<'_>>) -> Result<Option<i32>, Error> {
    match k {
        Some(k) => k.key_id().map_err(dec("MasterKeyProto")),
        None => Ok(None),
    }
}

/// Memory (MB) and vcores of a `ResourceProto`: fields 1 and 2, else the `memory-mb` and
/// `vcores` entries of the resource map.
fn resource_size(r: Option<&ResourceProto>) -> (i64, i64) {
    let Some(r) = r else { return (0, 0) };
    let find = |k: &str| {
        r.resource_value_map
            .iter()
            .find(|e| e.key == k)
            .and_then(|e| e.value)
    };
    let mem = r.memory.or_else(|| find("memory-mb")).unwrap_or(0);
    let vc = r
        .virtual_cores
        .map(i64::from)
        .or_else(|| find("vcores"))
        .unwrap_or(0);
    (mem, vc)
}

impl ResourceTracker {
    /// A tracker for `mailboxes.len()` shards. `rm_identifier` is the RM's start time (ms
    /// since the epoch); `now_ns` starts the key schedule.
    pub fn new(
        cfg: RmConfig,
        hosts: HostLists,
        mailboxes: Vec<Arc<Mailbox>>,
        rm_identifier: i64,
        mut entropy: Box<dyn Entropy>,
        now_ns: u64,
    ) -> Result<ResourceTracker, Error> {
        cfg.check()?;
        if mailboxes.is_empty() {
            return Err(Error::BadConfig("at least one dispatcher shard".into()));
        }
        let now_ms = now_ns / 1_000_000;
        let delay = cfg.key_activation_delay_ms();
        let container_keys =
            KeyRoller::new(&mut *entropy, now_ms, cfg.container_key_roll_ms, delay)?;
        let nm_keys = KeyRoller::new(&mut *entropy, now_ms, cfg.nm_key_roll_ms, delay)?;
        Ok(ResourceTracker {
            shards: (0..mailboxes.len()).map(|_| Vec::new()).collect(),
            cfg,
            hosts,
            container_keys,
            nm_keys,
            entropy,
            rm_identifier,
            by_id: FastMap::default(),
            mailboxes,
            metrics: Arc::new(TrackerMetrics::default()),
            scratch: Vec::new(),
            active: 0,
            by_membership: [0; 5],
            departed: Vec::new(),
            held_apps: FastSet::default(),
            parked: FastMap::default(),
            released_early: FastSet::default(),
        })
    }

    pub fn config(&self) -> &RmConfig {
        &self.cfg
    }

    pub fn metrics(&self) -> &Arc<TrackerMetrics> {
        &self.metrics
    }

    pub fn mailboxes(&self) -> &[Arc<Mailbox>] {
        &self.mailboxes
    }

    pub fn rm_identifier(&self) -> i64 {
        self.rm_identifier
    }

    /// Takes over the container-token and NMToken keys of an earlier run (the RM state
    /// store), so that tokens minted before a restart still verify on the NodeManagers.
    pub fn restore_keys(&mut self, container: MasterKey, nm: MasterKey, now_ns: u64) {
        let now_ms = now_ns / 1_000_000;
        self.container_keys.restore(container, None, now_ms);
        self.nm_keys.restore(nm, None, now_ms);
    }

    pub fn container_keys(&self) -> &KeyRoller {
        &self.container_keys
    }

    pub fn nm_keys(&self) -> &KeyRoller {
        &self.nm_keys
    }

    pub fn hosts(&self) -> &HostLists {
        &self.hosts
    }

    /// The node registered as `host:port`.
    pub fn node(&self, host: &str, port: i32) -> Option<&TrackedNode> {
        let probe: &dyn NodeKeyRef = &(host, port);
        self.by_id
            .get(probe)
            .map(|&(s, l)| &self.shards[s][l as usize])
    }

    /// Every node ever registered.
    pub fn nodes(&self) -> impl Iterator<Item = &TrackedNode> {
        self.shards.iter().flatten()
    }

    /// The number of shards (for [`shard_nodes`](Self::shard_nodes)).
    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }

    /// The nodes of shard `s` in registration order (empty for a shard that does not exist):
    /// a report can read them a range at a time.
    pub fn shard_nodes(&self, s: usize) -> &[TrackedNode] {
        self.shards.get(s).map_or(&[], Vec::as_slice)
    }

    /// Nodes in membership `m` (O(1): counted as they change).
    pub fn count(&self, m: Membership) -> usize {
        self.by_membership[m as usize]
    }

    /// Active nodes.
    pub fn active_nodes(&self) -> usize {
        self.active
    }

    fn count_active(&self) {
        self.metrics
            .nodes_active
            .store(self.active as u64, std::sync::atomic::Ordering::Relaxed);
    }

    /// Moves items the shards published into their nodes' queues.
    fn distribute(&mut self, shard: usize) {
        for (local, item) in self.scratch.drain(..) {
            // Held applications' acknowledgements are parked out of line, so this loop (inlined
            // into the heartbeat) stays as small as it was.
            if let OutItem::Ack(c) = item {
                if !self.held_apps.is_empty()
                    && park(
                        &self.held_apps,
                        &mut self.parked,
                        &mut self.released_early,
                        c,
                        (shard, local),
                    )
                {
                    continue;
                }
            }
            let Some(n) = self.shards[shard].get_mut(local as usize) else {
                continue;
            };
            match item {
                OutItem::Ack(c) => n.acks.push(c),
                OutItem::CleanupApp(a) => {
                    if !n.apps_to_cleanup.contains(&a) {
                        n.apps_to_cleanup.push(a)
                    }
                }
                OutItem::CleanupContainer(c) => {
                    if !n.containers_to_cleanup.contains(&c) {
                        n.containers_to_cleanup.push(c)
                    }
                }
            }
        }
    }

    fn deactivate(
        &mut self,
        shard: usize,
        local: u32,
        to: Membership,
        kind: ResetKind,
        now_ns: u64,
    ) {
        let n = &mut self.shards[shard][local as usize];
        if n.membership == Membership::Active {
            n.membership = to;
            // Its containers are released; Java's RMNodeImpl takes signals only while the
            // node is RUNNING or UNHEALTHY.
            n.signals.delivered();
            self.active -= 1;
            self.by_membership[Membership::Active as usize] -= 1;
            self.by_membership[to as usize] += 1;
            self.mailboxes[shard].push_reset(local, None, kind, now_ns);
            self.note_departed(shard, local);
            self.count_active();
        }
    }

    /// Records a deactivated node for [`take_departed`](Self::take_departed) (cold, out of line).
    #[cold]
    #[inline(never)]
    fn note_departed(&mut self, shard: usize, local: u32) {
        if self.departed.len() < self.by_id.len() {
            self.departed
                .push(self.shards[shard][local as usize].id.clone());
        }
    }

    /// `signalToContainer`: queues `signal` for `node`'s next heartbeat response (Java's
    /// `RMNodeSignalContainerEvent`, taken while the node is RUNNING or UNHEALTHY). False if
    /// the node is not active here (the signal is dropped, as Java's other node states do).
    pub fn queue_signal(&mut self, node: &NodeKey, signal: QueuedSignal) -> bool {
        let Some(&(s, l)) = self.by_id.get(node) else {
            return false;
        };
        let n = &mut self.shards[s][l as usize];
        if n.membership != Membership::Active {
            return false;
        }
        if !n.signals.push(signal) {
            tracing::warn!(
                "more than {} signals wait for node {}; the oldest was dropped",
                crate::signals::MAX_PER_NODE,
                n.id
            );
        }
        true
    }

    /// `nodeHeartbeat`. `out` receives the `NodeHeartbeatResponseProto` body.
    pub fn node_heartbeat(
        &mut self,
        request: &[u8],
        now_ns: u64,
        out: &mut Vec<u8>,
    ) -> Result<HeartbeatOutcome, Error> {
        use std::sync::atomic::Ordering::Relaxed;
        let r = self.heartbeat_inner(request, now_ns, out);
        match &r {
            Ok(HeartbeatOutcome::Normal { .. }) => {}
            Ok(HeartbeatOutcome::Duplicate) => {
                self.metrics.duplicates.fetch_add(1, Relaxed);
            }
            Ok(HeartbeatOutcome::ResyncUnknown | HeartbeatOutcome::ResyncBehind { .. }) => {
                self.metrics.resyncs.fetch_add(1, Relaxed);
            }
            Ok(HeartbeatOutcome::Shutdown) => {
                self.metrics.shutdowns.fetch_add(1, Relaxed);
            }
            Err(_) => {
                self.metrics.bad_requests.fetch_add(1, Relaxed);
                return r;
            }
        }
        self.metrics.heartbeats.fetch_add(1, Relaxed);
        r
    }

    fn heartbeat_inner(
        &mut self,
        request: &[u8],
        now_ns: u64,
        out: &mut Vec<u8>,
    ) -> Result<HeartbeatOutcome, Error> {
        let req = NodeHeartbeatRequestView::new(request);
        let status = req
            .node_status()
            .map_err(dec("NodeHeartbeatRequestProto"))?
            .ok_or(Error::Missing {
                message: "NodeHeartbeatRequestProto",
                field: "node_status",
            })?;
        // One pass over the status's top-level fields for the node id (1) and responseId (2);
        // the container statuses are skipped by length (the shard reads them).
        let (mut nid, mut rid) = (None, 0i32);
        // Tags are read and other fields skipped by wire type rather than materialized with
        // `read_field`: the same result, and a loop that does not depend on LLVM inlining
        // `read_field` here (it stopped doing so once rm-core grew its application modules,
        // costing ~2,200 instructions per heartbeat).
        let mut r = Reader::new(status.as_bytes());
        let d = dec("NodeStatusProto");
        while !r.is_empty() {
            let (n, wt) = r.read_tag().map_err(&d)?;
            match (n, wt) {
                (1, WireType::Len) => nid = Some(NodeIdView::new(r.read_len().map_err(&d)?)),
                (2, WireType::Varint) => rid = r.read_varint().map_err(&d)? as i32,
                (1 | 2, wt) if wt != WireType::EndGroup => {
                    return Err(Error::Decode {
                        message: "NodeStatusProto",
                        source: DecodeError::WrongWireType {
                            message: "hadoop.yarn.NodeStatusProto",
                            field: if n == 1 { "node_id" } else { "response_id" },
                            actual: wt,
                        },
                    })
                }
                (n, wt) => r.skip(n, wt, 0).map_err(&d)?,
            }
        }
        let nid = nid.ok_or(Error::Missing {
            message: "NodeStatusProto",
            field: "node_id",
        })?;
        let (host, port) = NodeKey::read(nid).map_err(dec("NodeIdProto"))?;
        let probe: &dyn NodeKeyRef = &(host, port);
        let slot = self.by_id.get(probe).copied();

        if !self.hosts.is_valid(host) {
            if let Some((s, l)) = slot {
                self.deactivate(
                    s,
                    l,
                    Membership::Decommissioned,
                    ResetKind::Decommissioned,
                    now_ns,
                );
            }
            let msg = format!("Disallowed NodeManager nodeId: {host}:{port} hostname:{host}");
            HeartbeatResponse::action(NodeActionProto::Shutdown, &msg).encode(out);
            return Ok(HeartbeatOutcome::Shutdown);
        }
        let Some((s, l)) =
            slot.filter(|&(s, l)| self.shards[s][l as usize].membership == Membership::Active)
        else {
            let msg = format!("Node not found resyncing {host}:{port}");
            HeartbeatResponse::action(NodeActionProto::Resync, &msg).encode(out);
            return Ok(HeartbeatOutcome::ResyncUnknown);
        };
        let now_ms = now_ns / 1_000_000;
        let node = &mut self.shards[s][l as usize];
        node.last_seen_ms = now_ms;
        let last = node.last_response_id;
        if next_response_id(rid) == last {
            out.extend_from_slice(&node.last_response);
            return Ok(HeartbeatOutcome::Duplicate);
        }
        if rid != last {
            self.deactivate(s, l, Membership::Rebooted, ResetKind::Rebooted, now_ns);
            let msg = format!("Too far behind rm response id:{last} nm response id:{rid}");
            HeartbeatResponse::action(NodeActionProto::Resync, &msg).encode(out);
            return Ok(HeartbeatOutcome::ResyncBehind { last, got: rid });
        }
        let ck = key_id(
            req.last_known_container_token_master_key()
                .map_err(dec("NodeHeartbeatRequestProto"))?,
        )?;
        let nk = key_id(
            req.last_known_nm_token_master_key()
                .map_err(dec("NodeHeartbeatRequestProto"))?,
        )?;

        // The status update goes to the shard; what the shard published comes back.
        let mut scratch = std::mem::take(&mut self.scratch);
        self.mailboxes[s].push_status(l, status.as_bytes(), now_ns, &mut scratch);
        self.scratch = scratch;
        self.distribute(s);

        let node = &mut self.shards[s][l as usize];
        let next = next_response_id(last);
        node.last_response.clear();
        HeartbeatResponse {
            response_id: Some(next),
            container_token_master_key: self.container_keys.key_for_heartbeat(ck),
            nm_token_master_key: self.nm_keys.key_for_heartbeat(nk),
            action: NodeActionProto::Normal,
            containers_to_cleanup: &node.containers_to_cleanup,
            applications_to_cleanup: &node.apps_to_cleanup,
            next_heartbeat_interval_ms: Some(self.cfg.heartbeat_interval_ms as i64),
            diagnostics: None,
            containers_to_be_removed_from_nm: &node.acks,
            containers_to_signal: node.signals.pending(),
        }
        .encode(&mut node.last_response);
        node.last_response_id = next;
        node.containers_to_cleanup.clear();
        node.apps_to_cleanup.clear();
        node.acks.clear();
        // Java's RMNodeImpl: the whole list goes in this response and is cleared (a duplicate
        // heartbeat gets the cached bytes, so the same signals, as in Java).
        node.signals.delivered();
        out.extend_from_slice(&node.last_response);
        Ok(HeartbeatOutcome::Normal { shard: s, node: l })
    }

    /// `registerNodeManager`. `out` receives the `RegisterNodeManagerResponseProto` body.
    pub fn register_node_manager(
        &mut self,
        request: &[u8],
        now_ns: u64,
        out: &mut Vec<u8>,
    ) -> Result<RegisterOutcome, Error> {
        use std::sync::atomic::Ordering::Relaxed;
        let req = RegisterNodeManagerRequestProto::decode(request).map_err(|source| {
            self.metrics.bad_requests.fetch_add(1, Relaxed);
            Error::Prost {
                message: "RegisterNodeManagerRequestProto",
                source,
            }
        })?;
        let nid = req.node_id.as_ref().ok_or(Error::Missing {
            message: "RegisterNodeManagerRequestProto",
            field: "node_id",
        })?;
        let key = NodeKey::new(nid.host(), nid.port());
        let refuse = |this: &mut Self, reason: String, out: &mut Vec<u8>| {
            this.metrics.registrations_refused.fetch_add(1, Relaxed);
            RegisterNodeManagerResponseProto {
                node_action: Some(NodeActionProto::Shutdown as i32),
                diagnostics_message: Some(reason.clone()),
                ..Default::default()
            }
            .encode(out)
            .map_err(|_| Error::BadConfig("response buffer".into()))?;
            Ok(RegisterOutcome::Refused {
                node: key.clone(),
                reason,
            })
        };
        if let Some(reason) = check_nm_version(
            &self.cfg.nm_min_version,
            &self.cfg.rm_version,
            req.nm_version.as_deref(),
        ) {
            return refuse(self, reason, out);
        }
        if !self.hosts.is_valid(&key.host) {
            let reason = format!(
                "Disallowed NodeManager from  {}, Sending SHUTDOWN signal to the NodeManager.",
                key.host
            );
            return refuse(self, reason, out);
        }
        let (mem, vcores) = resource_size(req.resource.as_ref());
        if mem < self.cfg.min_alloc_mb as i64 || vcores < self.cfg.min_alloc_vcores as i64 {
            let reason = format!(
                "NodeManager from  {} doesn't satisfy minimum allocations, Sending SHUTDOWN signal to the NodeManager.",
                key.host
            );
            return refuse(self, reason, out);
        }
        let existing = self.by_id.get(&key).copied();
        if existing.is_none() && self.by_id.len() >= self.cfg.max_nodes {
            let reason = format!(
                "The RM tracks its maximum of {} nodes; {} refused",
                self.cfg.max_nodes, key
            );
            return refuse(self, reason, out);
        }
        let now_ms = now_ns / 1_000_000;
        let (s, l) = match existing {
            Some(sl) => sl,
            None => {
                let s = shard_of(&key.host, key.port, self.shards.len());
                let l = self.shards[s].len() as u32;
                self.shards[s].push(TrackedNode {
                    id: key.clone(),
                    shard: s,
                    local: l,
                    membership: Membership::Lost,
                    http_port: 0,
                    total_memory_mb: 0,
                    total_vcores: 0,
                    nm_version: String::new(),
                    last_response_id: 0,
                    last_response: Vec::new(),
                    last_seen_ms: now_ms,
                    acks: Vec::new(),
                    apps_to_cleanup: Vec::new(),
                    containers_to_cleanup: Vec::new(),
                    signals: NodeSignals::default(),
                });
                self.by_id.insert(key.clone(), (s, l));
                self.by_membership[Membership::Lost as usize] += 1;
                (s, l)
            }
        };
        let n = &mut self.shards[s][l as usize];
        let reconnect = n.membership == Membership::Active;
        if !reconnect {
            self.active += 1;
        }
        self.by_membership[n.membership as usize] -= 1;
        self.by_membership[Membership::Active as usize] += 1;
        n.membership = Membership::Active;
        n.http_port = req.http_port.unwrap_or(0);
        n.total_memory_mb = mem;
        n.total_vcores = vcores as i32;
        n.nm_version = req.nm_version.clone().unwrap_or_default();
        n.last_response_id = 0;
        n.last_response.clear();
        n.last_seen_ms = now_ms;
        n.apps_to_cleanup.clear();
        n.containers_to_cleanup.clear();
        self.mailboxes[s].push_reset(
            l,
            existing.is_none().then(|| key.clone()),
            if reconnect {
                ResetKind::Reconnected
            } else {
                ResetKind::Registered
            },
            now_ns,
        );
        // Its running applications (Java's `handleRunningAppOnNode`): a finished one is
        // cleaned up there even when no container of it is left to report, e.g. one that
        // finished just before an RM restart; so is one an RM running applications does not
        // know (trap 2); the others are adopted.
        if !req.running_applications.is_empty() {
            let apps: Vec<AppKey> = req
                .running_applications
                .iter()
                .filter_map(|a| {
                    Some(AppKey {
                        cluster_timestamp: a.cluster_timestamp?,
                        id: a.id?,
                    })
                })
                .collect();
            self.mailboxes[s].push_apps(l, &apps, now_ns);
        }
        // Containers the NodeManager re-reports (trap 1) become the first status update, sent
        // even when there are none: it ends the node's registration (what Java does with the
        // containers of unknown applications differs there; see `crate::node`).
        {
            let first = NodeStatusProto {
                node_id: req.node_id.clone(),
                response_id: Some(0),
                containers_statuses: req
                    .container_statuses
                    .iter()
                    .map(|c| ContainerStatusProto {
                        container_id: c.container_id,
                        state: c.container_state,
                        diagnostics: c.diagnostics.clone(),
                        exit_status: c.container_exit_status,
                        capability: c.resource.clone(),
                        execution_type: c.execution_type,
                        container_attributes: Vec::new(),
                        container_sub_state: None,
                    })
                    .collect(),
                node_health_status: req
                    .node_status
                    .as_ref()
                    .and_then(|s| s.node_health_status.clone()),
                ..Default::default()
            };
            let mut scratch = std::mem::take(&mut self.scratch);
            self.mailboxes[s].push_registration_status(
                l,
                &first.encode_to_vec(),
                now_ns,
                &mut scratch,
            );
            self.scratch = scratch;
            self.distribute(s);
        }
        RegisterNodeManagerResponseProto {
            container_token_master_key: Some(self.container_keys.current().to_proto()),
            nm_token_master_key: Some(self.nm_keys.current().to_proto()),
            node_action: Some(NodeActionProto::Normal as i32),
            rm_identifier: Some(self.rm_identifier),
            diagnostics_message: None,
            rm_version: Some(self.cfg.rm_version.clone()),
            ..Default::default()
        }
        .encode(out)
        .map_err(|_| Error::BadConfig("response buffer".into()))?;
        self.metrics.registrations.fetch_add(1, Relaxed);
        self.count_active();
        Ok(RegisterOutcome::Accepted {
            node: key,
            reconnected: existing.is_some(),
        })
    }

    /// `unRegisterNodeManager`. `out` receives the (empty) response body. Returns the node
    /// if it was active.
    pub fn unregister_node_manager(
        &mut self,
        request: &[u8],
        now_ns: u64,
        _out: &mut Vec<u8>,
    ) -> Result<Option<NodeKey>, Error> {
        let req =
            UnRegisterNodeManagerRequestProto::decode(request).map_err(|source| Error::Prost {
                message: "UnRegisterNodeManagerRequestProto",
                source,
            })?;
        let nid = req.node_id.ok_or(Error::Missing {
            message: "UnRegisterNodeManagerRequestProto",
            field: "node_id",
        })?;
        let probe: &dyn NodeKeyRef = &(nid.host(), nid.port());
        let Some((s, l)) = self.by_id.get(probe).copied() else {
            return Ok(None);
        };
        if self.shards[s][l as usize].membership != Membership::Active {
            return Ok(None);
        }
        self.deactivate(s, l, Membership::Shutdown, ResetKind::Unregistered, now_ns);
        self.metrics
            .unregistrations
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.count_active();
        Ok(Some(self.shards[s][l as usize].id.clone()))
    }

    /// Liveness expiry and key rolling (housekeeping; call about once a second).
    pub fn tick(&mut self, now_ns: u64) -> Result<TickReport, Error> {
        let now_ms = now_ns / 1_000_000;
        let mut report = TickReport::default();
        let expiry = self.cfg.nm_expiry_ms;
        let mut expired = Vec::new();
        for (s, nodes) in self.shards.iter().enumerate() {
            for n in nodes {
                if n.membership == Membership::Active
                    && now_ms.saturating_sub(n.last_seen_ms) > expiry
                {
                    expired.push((s, n.local));
                }
            }
        }
        for (s, l) in expired {
            self.deactivate(s, l, Membership::Lost, ResetKind::Lost, now_ns);
            report.expired.push(self.shards[s][l as usize].id.clone());
        }
        self.metrics.expired.fetch_add(
            report.expired.len() as u64,
            std::sync::atomic::Ordering::Relaxed,
        );
        let a = self.container_keys.tick(&mut *self.entropy, now_ms)?;
        let b = self.nm_keys.tick(&mut *self.entropy, now_ms)?;
        report.keys_changed = a || b;
        self.count_active();
        Ok(report)
    }

    /// Installs new host lists. Active nodes no longer allowed are decommissioned (their
    /// containers released) and get SHUTDOWN on their next heartbeat. Returns them.
    pub fn refresh_hosts(&mut self, hosts: HostLists, now_ns: u64) -> Vec<NodeKey> {
        self.hosts = hosts;
        let mut out = Vec::new();
        let mut hit = Vec::new();
        for (s, nodes) in self.shards.iter().enumerate() {
            for n in nodes {
                if n.membership == Membership::Active && !self.hosts.is_valid(&n.id.host) {
                    hit.push((s, n.local));
                    out.push(n.id.clone());
                }
            }
        }
        for (s, l) in hit {
            self.deactivate(
                s,
                l,
                Membership::Decommissioned,
                ResetKind::Decommissioned,
                now_ns,
            );
        }
        self.count_active();
        out
    }

    /// Nodes that left the cluster (lost, rebooted, shut down, decommissioned) since the last
    /// call, for the scheduler to release their containers.
    pub fn take_departed(&mut self) -> Vec<NodeKey> {
        std::mem::take(&mut self.departed)
    }

    /// From now on, completed containers of `app` are acknowledged (sent in
    /// `containers_to_be_removed_from_nm`) only when [`release_ack`](Self::release_ack) says
    /// its ApplicationMaster pulled them, as Java does (trap 1).
    pub fn hold_acks(&mut self, app: AppKey) {
        self.held_apps.insert(app);
    }

    /// The AM pulled `c`'s completion: acknowledge it on its node's next heartbeat.
    pub fn release_ack(&mut self, c: ContainerKey) {
        if let Some((s, l)) = self.parked.remove(&c) {
            if let Some(n) = self.shards[s].get_mut(l as usize) {
                n.acks.push(c);
            }
        } else if self.held_apps.contains(&c.app) && self.released_early.len() < MAX_PARKED_ACKS {
            self.released_early.insert(c);
        }
    }

    /// `app` ended: every parked acknowledgement of it goes out, and no more are held.
    pub fn release_app_acks(&mut self, app: AppKey) {
        self.held_apps.remove(&app);
        self.released_early.retain(|c| c.app != app);
        let mine: Vec<ContainerKey> = self
            .parked
            .keys()
            .filter(|c| c.app == app)
            .copied()
            .collect();
        for c in mine {
            self.release_ack(c);
        }
    }

    /// Acknowledgements parked for ApplicationMasters.
    pub fn parked_acks(&self) -> usize {
        self.parked.len()
    }

    /// Admin: marks `app` finished on every shard.
    pub fn finish_app(&self, app: AppKey) {
        for m in &self.mailboxes {
            m.push_global(Global::FinishApp(app));
        }
    }

    /// Admin: asks the node running `c` to kill it.
    pub fn kill_container(&self, c: ContainerKey) {
        for m in &self.mailboxes {
            m.push_global(Global::KillContainer(c));
        }
    }

    /// Pulls published shard items into the nodes' queues without a heartbeat (tests, admin).
    pub fn collect_outboxes(&mut self) {
        for s in 0..self.mailboxes.len() {
            let mut scratch = std::mem::take(&mut self.scratch);
            self.mailboxes[s].take_outbox(&mut scratch);
            self.scratch = scratch;
            self.distribute(s);
        }
    }
}
