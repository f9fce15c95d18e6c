//! The hand-over between the network side and a dispatcher shard, with the merge that bounds
//! the backlog.
//!
//! # Byte ownership (the design decision)
//!
//! A heartbeat arrives as a view over the ring's receive buffer, and the kernel wants that
//! buffer back as soon as the response is sent. The network side therefore **copies** the
//! `NodeStatusProto` bytes (a few KB for 50 containers) into the node's pending [`Entry`] in
//! the shard's [`Inbox`], a buffer the shard owns and reuses (its capacity survives across
//! batches, so steady state allocates nothing). The alternative, handing the receive buffer
//! itself to the shard, would hold provided buffers for as long as the shard's queue is
//! long — the ring would run out of buffers exactly when the RM is busiest — and a frame that
//! straddles two buffers needs a copy anyway. Measured on the 50-container fixture
//! (`rm-core/examples/hb_profile`, callgrind): the copy is ~500 of the tracker's ~5,800
//! instructions per heartbeat (a ~5 KB memcpy, ~100 ns), against ~28,000 for the shard's
//! decode and update — the copy is under 2 % of the heartbeat's sans-IO cost.
//!
//! # At most one pending STATUS_UPDATE per node
//!
//! An inbox holds at most one [`Entry`] per node. When a node's next heartbeat arrives while
//! the previous one is still pending, it **merges** into the entry ([`Inbox::push_status`]):
//! the older heartbeat's COMPLETE statuses are moved, in order, into the entry's `ops` log,
//! together with one "application seen" record per application it reported RUNNING, and the
//! newer heartbeat replaces it as the entry's snapshot (the newest RUNNING set, health,
//! utilization and responseId win). Resets (registration, LOST, ...) go into the same `ops` log
//! in order. The shard applies `ops` first, then the snapshot. By the node rules in
//! [`crate::node`] (lost containers are released, not completed) this ends in the same node
//! state and the same completion log as applying every heartbeat one by one; the property test
//! in `tests/merge.rs` checks that.
//!
//! So a shard's backlog is at most its node count, plus admin broadcasts.
//!
//! # Synchronisation
//!
//! Each shard has one [`Mailbox`]: a mutex around the filling inbox and the outbox, and a
//! condition variable. The network side locks it for one merge-or-append (a memcpy) per
//! heartbeat; the shard locks it twice per batch, to swap the filled inbox with its empty spare
//! and to publish responses' items to the outbox. Node state itself is touched only by its
//! shard's thread: no locks there.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

use ipc::pb::hadoop::yarn::ContainerStateProto;
use ipc::view::yarn::NodeStatusView;
use prost::encoding::{decode_varint, encode_varint};

use crate::ids::{AppKey, ContainerKey, NodeKey};
use crate::node::{OutItem, ResetKind};

pub(crate) const OP_COMPLETE: u8 = 1;
pub(crate) const OP_APP: u8 = 2;
pub(crate) const OP_RESET: u8 = 3;

/// A broadcast to every node of a shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Global {
    FinishApp(AppKey),
    KillContainer(ContainerKey),
}

/// One node's pending work.
#[derive(Debug, Default, Clone)]
pub struct Entry {
    pub(crate) node: u32,
    pub(crate) newest: Vec<u8>,
    pub(crate) has_newest: bool,
    pub(crate) ops: Vec<u8>,
    apps: Vec<AppKey>,
    /// When the oldest heartbeat in this entry was enqueued (ns on the caller's clock).
    pub(crate) enqueued_ns: u64,
    /// Heartbeats merged into this entry.
    pub(crate) merged: u32,
}

/// A decoded `ops` record.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Op<'a> {
    Complete(&'a [u8]),
    App(AppKey),
    Reset(ResetKind),
}

/// Iterates an entry's `ops` (written only by [`Inbox`], so well-formed).
pub(crate) fn ops(mut b: &[u8]) -> impl Iterator<Item = Op<'_>> {
    std::iter::from_fn(move || loop {
        let (&tag, rest) = b.split_first()?;
        b = rest;
        match tag {
            OP_COMPLETE => {
                let mut r = b;
                let len = decode_varint(&mut r).ok()? as usize;
                let bytes = r.get(..len)?;
                b = &r[len..];
                return Some(Op::Complete(bytes));
            }
            OP_APP => {
                let ts = i64::from_le_bytes(b.get(..8)?.try_into().ok()?);
                let id = i32::from_le_bytes(b.get(8..12)?.try_into().ok()?);
                b = &b[12..];
                return Some(Op::App(AppKey {
                    cluster_timestamp: ts,
                    id,
                }));
            }
            OP_RESET => {
                let k = *b.first()?;
                b = &b[1..];
                if let Some(k) = ResetKind::from_u8(k) {
                    return Some(Op::Reset(k));
                }
            }
            _ => return None,
        }
    })
}

impl Entry {
    /// Moves the snapshot's one-shot content (COMPLETE statuses, RUNNING applications) into
    /// `ops`, leaving the entry without a snapshot.
    fn fold_newest(&mut self) {
        if !self.has_newest {
            return;
        }
        self.has_newest = false;
        let status = NodeStatusView::new(&self.newest);
        for cs in status.containers_statuses() {
            // A status the shard could not read either is skipped the same way.
            let Ok(cs) = cs else { break };
            let Ok(s) = cs.summary() else { break };
            match s.state {
                Some(ContainerStateProto::CComplete) => {
                    self.ops.push(OP_COMPLETE);
                    encode_varint(cs.as_bytes().len() as u64, &mut self.ops);
                    self.ops.extend_from_slice(cs.as_bytes());
                }
                Some(ContainerStateProto::CRunning) => {
                    let app = s
                        .container_id
                        .and_then(|v| ContainerKey::from_view(v).ok().flatten())
                        .map(|k| k.app);
                    if let Some(app) = app {
                        if !self.apps.contains(&app) {
                            self.apps.push(app);
                            self.ops.push(OP_APP);
                            self.ops
                                .extend_from_slice(&app.cluster_timestamp.to_le_bytes());
                            self.ops.extend_from_slice(&app.id.to_le_bytes());
                        }
                    }
                }
                _ => {}
            }
        }
        self.newest.clear();
    }

    fn clear(&mut self) {
        self.newest.clear();
        self.has_newest = false;
        self.ops.clear();
        self.apps.clear();
        self.merged = 0;
    }
}

/// The pending work of one shard.
#[derive(Debug, Default)]
pub struct Inbox {
    entries: Vec<Entry>,
    used: usize,
    /// Node index → entry position + 1 (0: none).
    index: Vec<u32>,
    pub(crate) globals: Vec<Global>,
    pub(crate) new_nodes: Vec<(u32, NodeKey)>,
}

impl Inbox {
    /// Pending node entries (the backlog).
    pub fn depth(&self) -> usize {
        self.used
    }

    pub fn is_empty(&self) -> bool {
        self.used == 0 && self.globals.is_empty() && self.new_nodes.is_empty()
    }

    pub(crate) fn entries(&self) -> &[Entry] {
        &self.entries[..self.used]
    }

    fn entry(&mut self, node: u32, now_ns: u64) -> (&mut Entry, bool) {
        let n = node as usize;
        if n >= self.index.len() {
            self.index.resize(n + 1, 0);
        }
        let pos = self.index[n];
        if pos != 0 {
            return (&mut self.entries[pos as usize - 1], true);
        }
        if self.used == self.entries.len() {
            self.entries.push(Entry::default());
        }
        let e = &mut self.entries[self.used];
        self.used += 1;
        self.index[n] = self.used as u32;
        e.clear();
        e.node = node;
        e.enqueued_ns = now_ns;
        (e, false)
    }

    /// A node the shard has not seen yet (its first registration).
    pub fn add_node(&mut self, node: u32, id: NodeKey) {
        self.new_nodes.push((node, id));
    }

    /// One heartbeat's `NodeStatusProto` bytes (copied). Returns true if it merged into a
    /// pending heartbeat of the same node.
    pub fn push_status(&mut self, node: u32, status: &[u8], now_ns: u64) -> bool {
        let (e, existed) = self.entry(node, now_ns);
        let merged = existed && e.has_newest;
        if merged {
            e.fold_newest();
            e.merged += 1;
        }
        e.newest.clear();
        e.newest.extend_from_slice(status);
        e.has_newest = true;
        merged
    }

    /// A reset of the node, ordered after everything pending for it.
    pub fn push_reset(&mut self, node: u32, kind: ResetKind, now_ns: u64) {
        let (e, _) = self.entry(node, now_ns);
        e.fold_newest();
        e.apps.clear();
        e.ops.push(OP_RESET);
        e.ops.push(kind as u8);
    }

    /// A broadcast (applied before the node entries of the same batch).
    pub fn push_global(&mut self, g: Global) {
        self.globals.push(g);
    }

    /// Empties the inbox, keeping every buffer's capacity.
    pub fn clear(&mut self) {
        for e in &mut self.entries[..self.used] {
            if let Some(slot) = self.index.get_mut(e.node as usize) {
                *slot = 0;
            }
            e.clear();
        }
        self.used = 0;
        self.globals.clear();
        self.new_nodes.clear();
    }
}

/// Counters shared between the network side, the shard and the metrics renderer.
#[derive(Debug, Default)]
pub struct MailboxCounters {
    pub enqueued: AtomicU64,
    pub merged: AtomicU64,
    pub depth: AtomicU64,
    pub max_depth: AtomicU64,
}

#[derive(Debug, Default)]
pub(crate) struct Shared {
    pub(crate) inbox: Inbox,
    pub(crate) outbox: Vec<(u32, OutItem)>,
    pub(crate) shutdown: bool,
}

/// One shard's hand-over point (see the module docs).
#[derive(Debug)]
pub struct Mailbox {
    shared: Mutex<Shared>,
    cond: Condvar,
    wake_depth: usize,
    pub counters: MailboxCounters,
}

impl Mailbox {
    /// `wake_depth`: backlog at which a push wakes the shard before its batch interval ends.
    pub fn new(wake_depth: usize) -> Mailbox {
        Mailbox {
            shared: Mutex::new(Shared::default()),
            cond: Condvar::new(),
            wake_depth: wake_depth.max(1),
            counters: MailboxCounters::default(),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Shared> {
        // A panic while holding the lock leaves plain data; keep serving.
        self.shared.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Network side: enqueue a heartbeat and take the outbox in one lock. `outbox` receives
    /// the items the shard published (it is swapped with the shared one, so both keep their
    /// capacity).
    pub fn push_status(
        &self,
        node: u32,
        status: &[u8],
        now_ns: u64,
        outbox: &mut Vec<(u32, OutItem)>,
    ) {
        let mut g = self.lock();
        let merged = g.inbox.push_status(node, status, now_ns);
        if !g.outbox.is_empty() {
            std::mem::swap(&mut g.outbox, outbox);
        }
        let depth = g.inbox.depth();
        drop(g);
        self.counters.enqueued.fetch_add(1, Ordering::Relaxed);
        if merged {
            self.counters.merged.fetch_add(1, Ordering::Relaxed);
        }
        self.note_depth(depth);
    }

    fn note_depth(&self, depth: usize) {
        self.counters.depth.store(depth as u64, Ordering::Relaxed);
        self.counters
            .max_depth
            .fetch_max(depth as u64, Ordering::Relaxed);
        if depth == self.wake_depth {
            self.cond.notify_one();
        }
    }

    /// Network side: take published outbox items without enqueuing anything.
    pub fn take_outbox(&self, outbox: &mut Vec<(u32, OutItem)>) {
        let mut g = self.lock();
        if !g.outbox.is_empty() {
            std::mem::swap(&mut g.outbox, outbox);
        }
    }

    /// Control: a reset for `node` (and `id` if the shard has never seen it).
    pub fn push_reset(&self, node: u32, new_id: Option<NodeKey>, kind: ResetKind, now_ns: u64) {
        let mut g = self.lock();
        if let Some(id) = new_id {
            g.inbox.add_node(node, id);
        }
        g.inbox.push_reset(node, kind, now_ns);
        let depth = g.inbox.depth();
        drop(g);
        self.note_depth(depth);
        self.cond.notify_one();
    }

    /// Control: a broadcast.
    pub fn push_global(&self, gl: Global) {
        self.lock().inbox.push_global(gl);
        self.cond.notify_one();
    }

    /// Shard side: swap the filled inbox with `spare` (which must be empty), waiting up to
    /// `wait` for work. Returns false on shutdown.
    pub fn take_inbox(&self, spare: &mut Inbox, wait: Duration) -> bool {
        let mut g = self.lock();
        if g.inbox.is_empty() && !g.shutdown && !wait.is_zero() {
            g = self
                .cond
                .wait_timeout(g, wait)
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
        if g.shutdown && g.inbox.is_empty() {
            return false;
        }
        std::mem::swap(&mut g.inbox, spare);
        drop(g);
        self.counters.depth.store(0, Ordering::Relaxed);
        true
    }

    /// Shard side: publish items for the network side.
    pub fn publish(&self, items: &mut Vec<(u32, OutItem)>) {
        if items.is_empty() {
            return;
        }
        let mut g = self.lock();
        if g.outbox.is_empty() {
            std::mem::swap(&mut g.outbox, items);
        } else {
            g.outbox.append(items);
        }
    }

    /// Asks the shard to finish its backlog and stop.
    pub fn shutdown(&self) {
        self.lock().shutdown = true;
        self.cond.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ipc::pb::hadoop::yarn::{ContainerStatusProto, NodeStatusProto};
    use prost::Message;

    fn status(id: i64, state: ContainerStateProto) -> ContainerStatusProto {
        ContainerStatusProto {
            container_id: Some(
                ContainerKey {
                    app: AppKey {
                        cluster_timestamp: 5,
                        id: (id % 3) as i32,
                    },
                    attempt: 1,
                    id,
                }
                .to_proto(),
            ),
            state: Some(state as i32),
            ..Default::default()
        }
    }

    fn hb(statuses: Vec<ContainerStatusProto>) -> Vec<u8> {
        NodeStatusProto {
            containers_statuses: statuses,
            ..Default::default()
        }
        .encode_to_vec()
    }

    #[test]
    fn one_entry_per_node_and_fold_keeps_completions_in_order() {
        let mut ib = Inbox::default();
        let h1 = hb(vec![
            status(1, ContainerStateProto::CComplete),
            status(2, ContainerStateProto::CRunning),
            status(3, ContainerStateProto::CComplete),
            status(5, ContainerStateProto::CRunning),
        ]);
        let h2 = hb(vec![status(4, ContainerStateProto::CRunning)]);
        assert!(!ib.push_status(7, &h1, 1));
        assert!(ib.push_status(7, &h2, 2));
        assert!(!ib.push_status(8, &h2, 3));
        assert_eq!(ib.depth(), 2);
        let e = &ib.entries()[0];
        assert_eq!(e.newest, h2);
        assert_eq!(e.merged, 1);
        assert_eq!(e.enqueued_ns, 1);
        let got: Vec<String> = ops(&e.ops)
            .map(|o| match o {
                Op::Complete(b) => {
                    let v = ipc::view::yarn::ContainerStatusView::new(b);
                    let k = ContainerKey::from_view(v.container_id().unwrap().unwrap())
                        .unwrap()
                        .unwrap();
                    format!("C{}", k.id)
                }
                Op::App(a) => format!("A{}", a.id),
                Op::Reset(k) => format!("R{k:?}"),
            })
            .collect();
        // Apps 2 % 3 = 2 and 5 % 3 = 2: one record.
        assert_eq!(got, ["C1", "A2", "C3"]);
        ib.push_reset(7, ResetKind::Lost, 4);
        let e = &ib.entries()[0];
        assert!(!e.has_newest, "a reset folds the snapshot");
        assert!(matches!(
            ops(&e.ops).last(),
            Some(Op::Reset(ResetKind::Lost))
        ));
        ib.clear();
        assert!(ib.is_empty());
        assert!(!ib.push_status(7, &h2, 9), "cleared: a fresh entry");
    }
}
