//! Connection scheduling shared by both event loops, sans-IO: which connections continue after
//! a send completes or a pool chunk frees, which ones park on an empty pool, and which ones the
//! periodic sweep closes (idle, or lingering after a FATAL past the linger).
//!
//! How it connects: each backend's connection implements [`SchedConn`] (its phase, whether it
//! is quiet, its [`Marks`]), and each backend's loop implements [`EventLoop`] (its slab, pool
//! and [`Queues`], plus its own `after` step and close). [`run_dirty`], [`sweep`] and
//! [`apply_flow`] hold the decisions; the backends keep only their I/O (io_uring submissions,
//! epoll reads and writes). Nothing here touches a socket.

use std::collections::VecDeque;
use std::time::Instant;

use super::pool::{BufferPool, PoolStats};
use super::slab::Slab;
use super::tx::{Outbox, Starved, TxQueue};
use super::{Flow, Session, Shared};

/// Where a connection is in its life, as far as scheduling cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    Open,
    /// Flushing before a half-close, or draining after it, since the instant: closed once the
    /// linger has passed.
    Lingering(Instant),
    /// Being torn down (io_uring waits for outstanding operations); left alone.
    Closing,
}

/// What a connection holds of the server's connection limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slot {
    /// A place in the handshake budget, since accept at the instant.
    Handshake(Instant),
    /// A `max_connections` slot.
    Counted,
    /// Given back (the connection is closing).
    Released,
}

/// A loop's share of the handshake budget: its unfinished handshakes, oldest first.
#[derive(Debug, Default)]
pub(crate) struct Handshakes {
    /// Connections accepted into the budget, oldest first; entries of connections that have
    /// since finished their handshake or closed are skipped (and pruned).
    fifo: VecDeque<(u32, u16)>,
    /// Connections of this loop holding a place.
    pub(crate) open: usize,
}

/// Per-connection scheduling marks.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Marks {
    /// Waiting in [`Queues`] for a pool chunk.
    pub parked: bool,
    /// Queued to continue in the next [`run_dirty`].
    pub dirty: bool,
}

/// A backend's connection, seen by the scheduler.
pub(crate) trait SchedConn {
    type Session: Session;
    fn gen(&self) -> u16;
    fn phase(&self) -> Phase;
    /// An open connection starts flushing (then half-closes) at `now`; others are unchanged.
    fn begin_flush(&mut self, now: Instant);
    /// Nothing of its own in flight: the session idle, nothing queued, no send outstanding.
    fn quiet(&self) -> bool;
    fn last_active(&self) -> Instant;
    fn marks(&mut self) -> &mut Marks;
    fn slot(&mut self) -> &mut Slot;
    fn session_and_tx(&mut self) -> (&mut Self::Session, &mut TxQueue);
}

/// A loop's scheduling queues.
#[derive(Debug, Default)]
pub(crate) struct Queues {
    /// Connections parked on an empty pool, woken in order as chunks free.
    waiters: VecDeque<(u32, u16)>,
    /// Connections to let continue.
    dirty: Vec<(u32, u16)>,
    /// Unfinished handshakes (handshake budget on).
    pub(crate) handshakes: Handshakes,
}

impl Queues {
    /// Queues the connection to continue (once, however often it is marked).
    pub(crate) fn mark_dirty<C: SchedConn>(&mut self, conns: &mut Slab<C>, idx: u32, gen: u16) {
        if let Some(c) = conns.get_mut(idx, gen) {
            let m = c.marks();
            if !m.dirty {
                m.dirty = true;
                self.dirty.push((idx, gen));
            }
        }
    }

    /// Parks the connection until a pool chunk frees (once).
    pub(crate) fn park<C: SchedConn>(&mut self, conns: &mut Slab<C>, idx: u32, gen: u16) {
        if let Some(c) = conns.get_mut(idx, gen) {
            let m = c.marks();
            if !m.parked {
                m.parked = true;
                self.waiters.push_back((idx, gen));
            }
        }
    }

    /// Whether a connection waits to continue.
    pub(crate) fn has_dirty(&self) -> bool {
        !self.dirty.is_empty()
    }
}

/// A backend's event loop, seen by the scheduler.
pub(crate) trait EventLoop {
    type Conn: SchedConn;
    /// The connections, the send pool and the queues, borrowed together.
    fn parts(&mut self) -> (&mut Slab<Self::Conn>, &mut BufferPool, &mut Queues);
    fn shared(&self) -> &Shared;
    /// The backend's step after a session callback (it starts with [`apply_flow`]).
    fn continue_after(&mut self, idx: u32, gen: u16, flow: Flow, starved: Option<Starved>);
    /// Closes the connection now.
    fn close(&mut self, idx: u32, gen: u16);
}

/// The slot a newly accepted connection gets, or `None` if it must be closed at once (the
/// connection limit, without a handshake budget). With a budget, the loop's oldest unfinished
/// handshake is closed when its share is full: a new peer is never refused because of idle
/// or slow ones.
pub(crate) fn admit<L: EventLoop>(l: &mut L, now: Instant) -> Option<Slot> {
    let shared = l.shared();
    if !shared.handshake_budget() {
        return shared.try_open().then_some(Slot::Counted);
    }
    let threads = shared.config.threads.max(1);
    let share = shared.config.max_handshaking.div_ceil(threads).max(1);
    loop {
        let (conns, _, queues) = l.parts();
        let hs = &mut queues.handshakes;
        if hs.open < share {
            break;
        }
        let Some((idx, gen)) = hs.fifo.pop_front() else {
            break;
        };
        let victim = conns
            .get_mut(idx, gen)
            .is_some_and(|c| matches!(c.slot(), Slot::Handshake(_)) && c.phase() == Phase::Open);
        if victim {
            let s = l.shared();
            s.add(&s.metrics.handshake_evicted, 1);
            l.close(idx, gen);
        }
    }
    let (conns, _, queues) = l.parts();
    let hs = &mut queues.handshakes;
    // Stale entries (finished or closed handshakes) are dropped once they outnumber the share.
    if hs.fifo.len() >= 2 * share + 64 {
        hs.fifo.retain(|&(i, g)| {
            conns
                .get_mut(i, g)
                .is_some_and(|c| matches!(c.slot(), Slot::Handshake(_)))
        });
    }
    hs.open += 1;
    l.shared()
        .handshaking
        .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    Some(Slot::Handshake(now))
}

/// Records a connection admitted with [`admit`] under its slab key (after insertion).
pub(crate) fn admitted(queues: &mut Queues, slot: Slot, idx: u32, gen: u16) {
    if matches!(slot, Slot::Handshake(_)) {
        queues.handshakes.fifo.push_back((idx, gen));
    }
}

/// A connection whose session just finished its handshake moves from the handshake budget to
/// a `max_connections` slot, or is closed if none is free. `false` if it was closed.
fn settle_handshake<L: EventLoop>(l: &mut L, idx: u32, gen: u16) -> bool {
    {
        let (conns, _, _) = l.parts();
        let Some(c) = conns.get_mut(idx, gen) else {
            return true;
        };
        if !matches!(c.slot(), Slot::Handshake(_)) || !c.session_and_tx().0.established() {
            return true;
        }
    }
    let opened = l.shared().try_open();
    let (conns, _, queues) = l.parts();
    if let Some(c) = conns.get_mut(idx, gen) {
        *c.slot() = if opened {
            Slot::Counted
        } else {
            Slot::Released
        };
    }
    queues.handshakes.open -= 1;
    let s = l.shared();
    s.handshaking
        .fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    if !opened {
        s.add(&s.metrics.refused, 1);
        l.close(idx, gen);
        return false;
    }
    true
}

/// The first part of a backend's `after` step: settles a finished handshake, acts on the
/// session's flow and parks the connection if the pool ran dry. `false` if the connection
/// was closed.
pub(crate) fn apply_flow<L: EventLoop>(
    l: &mut L,
    idx: u32,
    gen: u16,
    flow: Flow,
    starved: Option<Starved>,
    now: Instant,
) -> bool {
    if !settle_handshake(l, idx, gen) {
        return false;
    }
    match flow {
        Flow::CloseNow => {
            l.close(idx, gen);
            return false;
        }
        Flow::CloseAfterFlush => {
            if let Some(c) = l.parts().0.get_mut(idx, gen) {
                c.begin_flush(now);
            }
        }
        Flow::Continue => {}
    }
    if starved == Some(Starved::Pool) {
        let (conns, _, queues) = l.parts();
        queues.park(conns, idx, gen);
    }
    true
}

/// Wakes parked connections while chunks are free, then lets every dirty connection continue.
pub(crate) fn run_dirty<L: EventLoop>(l: &mut L) {
    let (conns, pool, queues) = l.parts();
    while pool.available() > 0 {
        let Some((idx, gen)) = queues.waiters.pop_front() else {
            break;
        };
        if let Some(c) = conns.get_mut(idx, gen) {
            c.marks().parked = false;
            queues.mark_dirty(conns, idx, gen);
        }
    }
    loop {
        let (conns, pool, queues) = l.parts();
        let Some((idx, gen)) = queues.dirty.pop() else {
            break;
        };
        let Some(c) = conns.get_mut(idx, gen) else {
            continue;
        };
        c.marks().dirty = false;
        // A connection parked on an empty pool is woken through `waiters` when a chunk
        // frees; asking it to continue before that would only fail again.
        let parked_on_empty = c.marks().parked && pool.available() == 0;
        if c.phase() == Phase::Open && !parked_on_empty {
            let (session, tx) = c.session_and_tx();
            let mut ob = Outbox::new(pool, tx);
            let flow = session.on_send_progress(&mut ob);
            let starved = ob.starved();
            l.continue_after(idx, gen, flow, starved);
        } else {
            l.continue_after(idx, gen, Flow::Continue, None);
        }
    }
}

/// Connection slots one [`Sweep::step`] visits on a busy turn: a pass over 10,000
/// connections in one go held the loop for about a millisecond twice a second, and every
/// request that arrived meanwhile waited for it.
pub(crate) const SWEEP_SLICE: u32 = 512;

/// The periodic idle/linger sweep, spread over the loop's turns: a pass starts every `tick`
/// and visits [`SWEEP_SLICE`] slots per turn, or all that are left when the turn found the
/// loop quiet (its wait timed out), so that an idle loop still finishes a pass at once.
#[derive(Debug)]
pub(crate) struct Sweep {
    last_start: Instant,
    /// The next slot of the pass under way.
    next: Option<u32>,
}

impl Sweep {
    pub(crate) fn new(now: Instant) -> Self {
        Self {
            last_start: now,
            next: None,
        }
    }

    /// Starts a pass when `tick` has passed since the last one began, and continues the pass
    /// under way. `quiet`: the turn had nothing else to do. Returns whether a pass started.
    pub(crate) fn step<L: EventLoop>(
        &mut self,
        l: &mut L,
        now: Instant,
        tick: std::time::Duration,
        quiet: bool,
    ) -> bool {
        let started = self.next.is_none() && now.duration_since(self.last_start) >= tick;
        if started {
            self.last_start = now;
            self.next = Some(0);
        }
        if let Some(from) = self.next {
            let max = if quiet { u32::MAX } else { SWEEP_SLICE };
            self.next = sweep(l, now, from, max);
        }
        started
    }
}

/// Closes connections idle past `idle_timeout` (and quiet) and those lingering past `linger`,
/// among at most `max` slots from `from`. Returns the next slot to visit, `None` when the end
/// of the table was reached.
pub(crate) fn sweep<L: EventLoop>(l: &mut L, now: Instant, from: u32, max: u32) -> Option<u32> {
    let idle = l.shared().config.idle_timeout;
    let linger = l.shared().config.linger;
    let handshake = l.shared().config.handshake_timeout;
    let slots = l.parts().0.slot_count();
    let end = from.saturating_add(max).min(slots);
    for idx in from..end {
        let Some(c) = l.parts().0.get_mut_any(idx) else {
            continue;
        };
        let gen = c.gen();
        let phase = c.phase();
        if let (Phase::Open, Slot::Handshake(since), Some(t)) = (phase, *c.slot(), handshake) {
            if now.duration_since(since) >= t {
                let s = l.shared();
                s.add(&s.metrics.handshake_expired, 1);
                l.close(idx, gen);
                continue;
            }
        }
        let expired = match phase {
            Phase::Open => {
                idle.is_some_and(|t| now.duration_since(c.last_active()) >= t) && c.quiet()
            }
            Phase::Lingering(since) => now.duration_since(since) >= linger,
            Phase::Closing => false,
        };
        if expired {
            if phase == Phase::Open {
                let s = l.shared();
                s.add(&s.metrics.idle_closed, 1);
            }
            l.close(idx, gen);
        }
    }
    (end < slots).then_some(end)
}

/// Publishes the pool's exhaustion count and peak use into the shared metrics.
pub(crate) fn sync_stats(pool: &BufferPool, shared: &Shared, synced: &mut PoolStats) {
    let s = pool.stats();
    if s.exhausted != synced.exhausted {
        shared.add(
            &shared.metrics.pool_exhausted,
            s.exhausted - synced.exhausted,
        );
    }
    if s.peak_in_use != synced.peak_in_use {
        shared.peak(s.peak_in_use);
    }
    *synced = s;
}
