//! The scheduler's view of the NodeManagers: a [`SchedNode`] per node (capacity, use,
//! containers) in [`ClusterNodes`], which keeps running totals over the active nodes and
//! orders the nodes with room by how much they have.

use std::cmp::Reverse;
use std::collections::BTreeSet;

use crate::ids::{FastMap, NodeKey};

use super::Res;

/// `SchedulerNode`: a NodeManager's capacity and what is allocated on it.
#[derive(Debug, Clone)]
pub struct SchedNode {
    pub key: NodeKey,
    pub http_address: String,
    pub total: Res,
    pub used: Res,
    pub containers: usize,
    pub active: bool,
    /// Reported unhealthy: out of the scheduler (not active) until healthy again, and
    /// reported UNHEALTHY with its health report.
    pub unhealthy: bool,
    pub health_report: String,
    /// DECOMMISSIONING (`yarn rmadmin -refreshNodes -g`): keeps its containers, gets no new
    /// ones (`Apps::set_decommissioning`).
    pub decommissioning: bool,
    /// Its number in [`ClusterNodes`]'s room index (registration order; never reused).
    slot: u32,
}

/// A sum of [`Res`] wide enough never to overflow (i64 per node, far fewer than 2^64 nodes).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct ResSum {
    mem: i128,
    vcores: i128,
}

impl ResSum {
    fn add(&mut self, r: Res) {
        self.mem += i128::from(r.mem);
        self.vcores += i128::from(r.vcores);
    }

    fn sub(&mut self, r: Res) {
        self.mem -= i128::from(r.mem);
        self.vcores -= i128::from(r.vcores);
    }

    /// Clamped to `Res`'s range (as a saturating sum of non-negative values would be).
    fn res(self) -> Res {
        let clamp = |v: i128| v.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64;
        Res::new(clamp(self.mem), clamp(self.vcores))
    }
}

/// The scheduler's nodes, with running totals over the active ones (Java's
/// `ClusterNodeTracker`): `allocate` reads the cluster's size, capacity and use in O(1)
/// instead of walking every node. The map is never lent out mutably: every change to a node
/// (registration, re-registration with another capability, removal as lost, unhealthy,
/// decommissioned or shut down, and each container placed or completed) goes through
/// [`update`](Self::update), which takes the node's old contribution out of the totals and
/// puts its new one in, and moves the node in the room index.
///
/// The room index orders the active nodes with room by free memory, then free vcores, most
/// first (ties in registration order), so that immediate placement finds the roomiest node
/// that fits in O(log n) instead of sorting every node on each call (at 10,000 nodes that
/// sort was most of an `allocate` bringing new asks: `benches/examples/place_profile.rs`).
/// It changes only when a node's room does, so an unchanged heartbeat never touches it.
#[derive(Debug, Default)]
pub(super) struct ClusterNodes {
    map: FastMap<NodeKey, SchedNode>,
    pub(super) totals: Totals,
    by_room: BTreeSet<RoomKey>,
    /// Slot → key.
    keys: Vec<NodeKey>,
}

/// (free memory, free vcores, slot), most room first.
type RoomKey = (Reverse<i64>, Reverse<i64>, u32);

/// Where `n` stands in the room index: nowhere unless it is active and has room.
fn room_key(n: &SchedNode) -> Option<RoomKey> {
    let room = n.total.minus(n.used);
    (n.active && !n.decommissioning && room.mem > 0 && room.vcores > 0).then_some((
        Reverse(room.mem),
        Reverse(room.vcores),
        n.slot,
    ))
}

/// Moves a node in the room index from `before` to `after`.
fn reindex(by_room: &mut BTreeSet<RoomKey>, before: Option<RoomKey>, after: Option<RoomKey>) {
    if before != after {
        if let Some(b) = before {
            by_room.remove(&b);
        }
        if let Some(a) = after {
            by_room.insert(a);
        }
    }
}

/// Running totals over the active nodes.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Totals {
    active: usize,
    /// Nodes out of the scheduler because they reported themselves unhealthy.
    unhealthy: usize,
    total: ResSum,
    used: ResSum,
}

impl Totals {
    /// Changes `n` with `f`, moving its contribution out and back in.
    fn apply<R>(&mut self, n: &mut SchedNode, f: impl FnOnce(&mut SchedNode) -> R) -> R {
        if n.active {
            self.active -= 1;
            self.total.sub(n.total);
            self.used.sub(n.used);
        }
        if n.unhealthy {
            self.unhealthy -= 1;
        }
        let r = f(n);
        if n.unhealthy {
            self.unhealthy += 1;
        }
        if n.active {
            self.active += 1;
            self.total.add(n.total);
            self.used.add(n.used);
        }
        r
    }
}

impl ClusterNodes {
    pub(super) fn get<Q>(&self, key: &Q) -> Option<&SchedNode>
    where
        NodeKey: std::borrow::Borrow<Q>,
        Q: std::hash::Hash + Eq + ?Sized,
    {
        self.map.get(key)
    }

    pub(super) fn contains_key(&self, key: &NodeKey) -> bool {
        self.map.contains_key(key)
    }

    #[cfg(test)]
    pub(super) fn values(&self) -> impl Iterator<Item = &SchedNode> {
        self.map.values()
    }

    /// Changes one node with `f`, keeping the totals; `None` for an unknown node.
    pub(super) fn update<R>(
        &mut self,
        key: &NodeKey,
        f: impl FnOnce(&mut SchedNode) -> R,
    ) -> Option<R> {
        let n = self.map.get_mut(key)?;
        let before = room_key(n);
        let r = self.totals.apply(n, f);
        reindex(&mut self.by_room, before, room_key(n));
        self.check();
        Some(r)
    }

    /// Like [`update`](Self::update), first adding the node (inactive and empty: it counts
    /// for nothing until `f` makes it active) if it is new.
    pub(super) fn upsert<R>(&mut self, key: &NodeKey, f: impl FnOnce(&mut SchedNode) -> R) -> R {
        let keys = &mut self.keys;
        let n = self.map.entry(key.clone()).or_insert_with(|| {
            let slot = u32::try_from(keys.len()).expect("fewer than 2^32 nodes");
            keys.push(key.clone());
            SchedNode {
                key: key.clone(),
                http_address: String::new(),
                total: Res::default(),
                used: Res::default(),
                containers: 0,
                active: false,
                unhealthy: false,
                health_report: String::new(),
                decommissioning: false,
                slot,
            }
        });
        let before = room_key(n);
        let r = self.totals.apply(n, f);
        reindex(&mut self.by_room, before, room_key(n));
        self.check();
        r
    }

    /// The active node with the most free memory (then vcores) that `need` fits in, other
    /// than the slots in `skip`: its slot and key.
    pub(super) fn roomiest(&self, need: Res, skip: &[u32]) -> Option<(u32, &NodeKey)> {
        self.by_room
            .iter()
            .take_while(|(mem, ..)| mem.0 >= need.mem)
            .find(|(_, vcores, slot)| vcores.0 >= need.vcores && !skip.contains(slot))
            .map(|&(.., slot)| (slot, &self.keys[slot as usize]))
    }

    /// Nodes out of the scheduler as unhealthy.
    pub(super) fn unhealthy(&self) -> usize {
        self.totals.unhealthy
    }

    /// Active nodes, their total and their used resources.
    pub(super) fn totals(&self) -> (usize, Res, Res) {
        let t = &self.totals;
        (t.active, t.total.res(), t.used.res())
    }

    /// The totals from a full walk over the nodes (what [`Totals::apply`] keeps running).
    #[cfg(test)]
    pub(super) fn recount(&self) -> Totals {
        let mut t = Totals {
            unhealthy: self.map.values().filter(|n| n.unhealthy).count(),
            ..Totals::default()
        };
        for n in self.map.values().filter(|n| n.active) {
            t.active += 1;
            t.total.add(n.total);
            t.used.add(n.used);
        }
        t
    }

    /// Unit tests compare the running totals and the room index with a full recount after
    /// every change.
    fn check(&self) {
        #[cfg(test)]
        {
            assert_eq!(self.totals, self.recount(), "running totals drifted");
            let index: BTreeSet<RoomKey> = self.map.values().filter_map(room_key).collect();
            assert_eq!(self.by_room, index, "room index drifted");
        }
    }
}
