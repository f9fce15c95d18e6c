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
//! (`benches/examples/hb_profile`, callgrind): the copy is ~500 of the tracker's ~5,800
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
//!
//! A heartbeat push does not signal the shard (a futex wake per heartbeat on the network
//! side): the shard waits out its batch interval and takes what arrived, or is woken early
//! when the backlog reaches the wake depth. A shard that found nothing for
//! [`PARK_AFTER_IDLE_POLLS`] intervals in a row **parks** ([`Mailbox::take_inbox`]): the
//! first push that finds it parked signals it, so an idle RM's shards sleep instead of
//! polling, and a parked shard starts on the first heartbeat at once.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

use hadoop_wire::pb::hadoop::yarn::ContainerStateProto;
use hadoop_wire::view::yarn::NodeStatusView;
use prost::encoding::{decode_varint, encode_varint};

use crate::ids::{AppKey, ContainerKey, NodeKey};
use crate::node::{OutItem, ResetKind};

pub(crate) const OP_COMPLETE: u8 = 1;
pub(crate) const OP_APP: u8 = 2;
pub(crate) const OP_RESET: u8 = 3;
/// The end of a registration's statuses (see [`Inbox::push_registration_status`]).
pub(crate) const OP_REGISTERED: u8 = 4;

/// A broadcast to every node of a shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Global {
    FinishApp(AppKey),
    KillContainer(ContainerKey),
    /// An application the RM runs (submitted or recovered): known from now on.
    LiveApp(AppKey),
    /// From now on, containers of applications the RM does not know are cleaned up as Java
    /// does ([`crate::node::UnknownApps::Clean`]) instead of adopted.
    CleanUnknownApps {
        recovery: bool,
    },
}

/// One node's pending work.
#[derive(Debug, Default, Clone)]
pub struct Entry {
    pub(crate) node: u32,
    pub(crate) newest: Vec<u8>,
    pub(crate) has_newest: bool,
    /// `newest` is a registration's statuses (its containers, re-reported), not a heartbeat.
    newest_registration: bool,
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
    /// What follows is no longer the registration's.
    Registered,
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
            OP_REGISTERED => return Some(Op::Registered),
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
        // The registration's statuses end here: the COMPLETE statuses of heartbeats merged
        // after them are the heartbeats' own, for the scheduler as any heartbeat's are.
        if std::mem::take(&mut self.newest_registration) {
            self.ops.push(OP_REGISTERED);
        }
    }

    /// An application RUNNING on the node, once per entry (as [`Entry::fold_newest`] adds
    /// those of RUNNING containers).
    fn push_app(&mut self, app: AppKey) {
        if !self.apps.contains(&app) {
            self.apps.push(app);
            self.ops.push(OP_APP);
            self.ops
                .extend_from_slice(&app.cluster_timestamp.to_le_bytes());
            self.ops.extend_from_slice(&app.id.to_le_bytes());
        }
    }

    fn clear(&mut self) {
        self.newest.clear();
        self.has_newest = false;
        self.newest_registration = false;
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
        self.push_snapshot(node, status, now_ns, false)
    }

    /// A registration's statuses (the containers it re-reports), which end the registration.
    /// If a heartbeat merges in before the shard applies them, they are folded into `ops`
    /// followed by an end-of-registration record, so that the heartbeat's own completions
    /// are not taken for the registration's.
    pub fn push_registration_status(&mut self, node: u32, status: &[u8], now_ns: u64) -> bool {
        self.push_snapshot(node, status, now_ns, true)
    }

    fn push_snapshot(&mut self, node: u32, status: &[u8], now_ns: u64, reg: bool) -> bool {
        let (e, existed) = self.entry(node, now_ns);
        let merged = existed && e.has_newest;
        if merged {
            e.fold_newest();
            e.merged += 1;
        }
        e.newest.clear();
        e.newest.extend_from_slice(status);
        e.has_newest = true;
        e.newest_registration = reg;
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

    /// Applications the node says run there (a registration's `runningApplications`),
    /// ordered after everything pending for it: each is adopted, or cleaned up there if it
    /// is finished, as a RUNNING container of it would be.
    pub fn push_apps(&mut self, node: u32, apps: &[AppKey], now_ns: u64) {
        let (e, _) = self.entry(node, now_ns);
        e.fold_newest();
        for &app in apps {
            e.push_app(app);
        }
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
    /// The shard is parked (idle): the next push wakes it.
    parked: bool,
    /// Consecutive batch-interval waits that found nothing.
    idle_polls: u32,
}

/// Consecutive empty batch-interval waits after which an idle shard parks (about 10 ms at the
/// default 1 ms interval).
pub const PARK_AFTER_IDLE_POLLS: u32 = 10;

/// Longest a parked shard sleeps without a push (its once-a-second housekeeping).
pub const PARK_TIMEOUT: Duration = Duration::from_secs(1);

/// One shard's hand-over point (see the module docs).
#[derive(Debug)]
pub struct Mailbox {
    shared: Mutex<Shared>,
    cond: Condvar,
    wake_depth: usize,
    park_after: u32,
    park_timeout: Duration,
    pub counters: MailboxCounters,
}

impl Mailbox {
    /// `wake_depth`: backlog at which a push wakes the shard before its batch interval ends.
    /// An idle shard parks after [`PARK_AFTER_IDLE_POLLS`] empty waits (see
    /// [`Mailbox::take_inbox`]).
    pub fn new(wake_depth: usize) -> Mailbox {
        Mailbox::with_parking(wake_depth, PARK_AFTER_IDLE_POLLS, PARK_TIMEOUT)
    }

    /// [`Mailbox::new`] with the parking rule spelled out: park after `park_after` empty
    /// batch-interval waits, for at most `park_timeout` per wait.
    pub fn with_parking(wake_depth: usize, park_after: u32, park_timeout: Duration) -> Mailbox {
        Mailbox {
            shared: Mutex::new(Shared::default()),
            cond: Condvar::new(),
            wake_depth: wake_depth.max(1),
            park_after,
            park_timeout,
            counters: MailboxCounters::default(),
        }
    }

    /// Pending node entries now (0 after the shard took its inbox).
    pub fn depth(&self) -> u64 {
        self.counters.depth.load(Ordering::Relaxed)
    }

    /// Whether the shard is parked now (tests, diagnostics).
    pub fn is_parked(&self) -> bool {
        self.lock().parked
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
        self.push_snapshot(node, status, now_ns, outbox, false);
    }

    /// Control: a registration's statuses ([`Inbox::push_registration_status`]), with the
    /// outbox taken as [`push_status`](Self::push_status) takes it.
    pub fn push_registration_status(
        &self,
        node: u32,
        status: &[u8],
        now_ns: u64,
        outbox: &mut Vec<(u32, OutItem)>,
    ) {
        self.push_snapshot(node, status, now_ns, outbox, true);
    }

    fn push_snapshot(
        &self,
        node: u32,
        status: &[u8],
        now_ns: u64,
        outbox: &mut Vec<(u32, OutItem)>,
        registration: bool,
    ) {
        let mut g = self.lock();
        let merged = g.inbox.push_snapshot(node, status, now_ns, registration);
        if !g.outbox.is_empty() {
            std::mem::swap(&mut g.outbox, outbox);
        }
        let depth = g.inbox.depth();
        let unpark = std::mem::take(&mut g.parked);
        drop(g);
        self.counters.enqueued.fetch_add(1, Ordering::Relaxed);
        if merged {
            self.counters.merged.fetch_add(1, Ordering::Relaxed);
        }
        self.note_depth(depth, unpark);
    }

    /// Publishes the depth; wakes the shard at the wake depth, or if it was parked (the one
    /// futex wake an idle shard costs the network side: none while the shard is polling).
    fn note_depth(&self, depth: usize, unpark: bool) {
        self.counters.depth.store(depth as u64, Ordering::Relaxed);
        self.counters
            .max_depth
            .fetch_max(depth as u64, Ordering::Relaxed);
        if unpark || depth == self.wake_depth {
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
        g.parked = false;
        drop(g);
        self.note_depth(depth, true);
    }

    /// Control: applications a (re-)registering node runs ([`Inbox::push_apps`]).
    pub fn push_apps(&self, node: u32, apps: &[AppKey], now_ns: u64) {
        let mut g = self.lock();
        g.inbox.push_apps(node, apps, now_ns);
        let depth = g.inbox.depth();
        g.parked = false;
        drop(g);
        self.note_depth(depth, true);
    }

    /// Control: a broadcast.
    pub fn push_global(&self, gl: Global) {
        let mut g = self.lock();
        g.inbox.push_global(gl);
        g.parked = false;
        drop(g);
        self.cond.notify_one();
    }

    /// Shard side: swap the filled inbox with `spare` (which must be empty), waiting up to
    /// `wait` for work. Returns false on shutdown.
    ///
    /// Heartbeat pushes do not wake the shard (that would cost the network side a futex wake
    /// per heartbeat): it waits out `wait` (the batch interval) and takes what arrived. After
    /// `park_after` consecutive waits that found nothing it **parks** instead: it waits up to
    /// `park_timeout`, and the first push that finds it parked wakes it at once. So a busy
    /// shard batches without any wake-ups, and an idle one sleeps (one wake-up a second for
    /// housekeeping) instead of polling every batch interval. A zero `wait` never waits.
    pub fn take_inbox(&self, spare: &mut Inbox, wait: Duration) -> bool {
        let mut g = self.lock();
        if g.inbox.is_empty() && !g.shutdown && !wait.is_zero() {
            let park = g.idle_polls >= self.park_after;
            g.parked = park;
            let timeout = if park { self.park_timeout } else { wait };
            g = self
                .cond
                .wait_timeout(g, timeout)
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
            g.parked = false;
        }
        if g.shutdown && g.inbox.is_empty() {
            return false;
        }
        g.idle_polls = if g.inbox.is_empty() {
            g.idle_polls.saturating_add(1)
        } else {
            0
        };
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
    use hadoop_wire::pb::hadoop::yarn::{ContainerStatusProto, NodeStatusProto};
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
                    let v = hadoop_wire::view::yarn::ContainerStatusView::new(b);
                    let k = ContainerKey::from_view(v.container_id().unwrap().unwrap())
                        .unwrap()
                        .unwrap();
                    format!("C{}", k.id)
                }
                Op::App(a) => format!("A{}", a.id),
                Op::Reset(k) => format!("R{k:?}"),
                Op::Registered => "G".to_string(),
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

    fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
        let t0 = std::time::Instant::now();
        while !f() {
            assert!(t0.elapsed() < Duration::from_secs(20), "{what}");
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    #[test]
    fn an_idle_shard_parks_and_the_first_push_wakes_it() {
        use std::sync::atomic::AtomicUsize;
        use std::sync::Arc;
        // A park timeout far beyond the test: only a push (or shutdown) can end the park.
        let mb = Arc::new(Mailbox::with_parking(
            usize::MAX,
            3,
            Duration::from_secs(600),
        ));
        let (takes, taken) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicUsize::new(0)));
        let shard = {
            let (mb, takes, taken) = (mb.clone(), takes.clone(), taken.clone());
            std::thread::spawn(move || {
                let mut spare = Inbox::default();
                while mb.take_inbox(&mut spare, Duration::from_millis(1)) {
                    takes.fetch_add(1, Ordering::SeqCst);
                    taken.fetch_add(spare.depth(), Ordering::SeqCst);
                    spare.clear();
                }
            })
        };
        wait_until("parked after 3 empty polls", || mb.is_parked());
        assert!(takes.load(Ordering::SeqCst) >= 3);
        // Parked: no polling. (Without parking this would be ~100 returns.)
        let before = takes.load(Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(100));
        let polls = takes.load(Ordering::SeqCst) - before;
        assert!(polls <= 2, "{polls} returns while parked");
        // The first heartbeat wakes it at once (not after the 600 s park timeout).
        let mut out = Vec::new();
        mb.push_status(4, &hb(vec![]), 1, &mut out);
        wait_until("the parked shard took the heartbeat", || {
            taken.load(Ordering::SeqCst) == 1
        });
        assert_eq!(mb.depth(), 0);
        // It polls again, then parks again; shutdown wakes it too.
        wait_until("parked again", || mb.is_parked());
        mb.shutdown();
        shard.join().unwrap();
    }

    #[test]
    fn depth_is_the_pending_entries_now() {
        let mb = Mailbox::new(usize::MAX);
        let mut out = Vec::new();
        mb.push_status(1, &hb(vec![]), 1, &mut out);
        mb.push_status(2, &hb(vec![]), 2, &mut out);
        mb.push_status(1, &hb(vec![]), 3, &mut out);
        assert_eq!(mb.depth(), 2, "one entry per node");
        let mut spare = Inbox::default();
        assert!(mb.take_inbox(&mut spare, Duration::ZERO));
        assert_eq!(spare.depth(), 2);
        assert_eq!(mb.depth(), 0);
        assert_eq!(mb.counters.max_depth.load(Ordering::Relaxed), 2);
    }
}
