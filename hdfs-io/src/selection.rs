//! DataNode choice for a block read: pure ordering over the block's [`Replica`]s plus a
//! lookup in the [`AddrCache`].
//!
//! Order (stable: ties keep the NameNode's order, which already sorts by distance to the
//! client and shuffles equal distances):
//!
//! 1. **Health** first: in service → stale (no heartbeat for the stale interval) → entering
//!    maintenance → decommissioning → decommissioned / in maintenance. ("Stale or
//!    decommissioning nodes last"; the NameNode does this only with
//!    `dfs.namenode.avoid.read.stale.datanode`.)
//! 2. Then **locality**: this host ([`LocalNode`]) → this host's rack → the rest. The local
//!    rack is the configured one, else the table mapping's rack for one of this host's names,
//!    else the `location` of a replica that is on this host.
//!    A replica's rack is the table mapping's (looked up by `ipAddr`, then `hostName`) when the
//!    table lists it, else the NameNode's `DatanodeInfo.location`.
//!
//! Skipped: nodes in the shared [`DeadNodes`] memory and the caller's ignored nodes (UUIDs;
//! e.g. replicas already tried for this read).
//!
//! [`Selector::choose`] ranks on the stack (up to [`STACK_REPLICAS`] replicas) and allocates
//! nothing; nothing reads a clock unless an entry needs it (see [`LazyNow`]).

use crate::addr_cache::AddrCache;
use crate::dead_nodes::DeadNodes;
use crate::hash::short_words;
use crate::replica::Replica;
use crate::topology::{LocalNode, RackMap};
use std::net::SocketAddr;
use std::time::Instant;

/// A monotonic "now" read at most once, on first use.
#[derive(Debug, Default, Clone, Copy)]
pub struct LazyNow(Option<Instant>);

impl LazyNow {
    /// Not read yet.
    pub const fn new() -> Self {
        LazyNow(None)
    }
    /// Already known.
    pub const fn at(t: Instant) -> Self {
        LazyNow(Some(t))
    }
    /// Reads the clock on the first call.
    #[inline]
    pub fn get(&mut self) -> Instant {
        *self.0.get_or_insert_with(Instant::now)
    }
}

/// Health rank of a replica (lower is better).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Health {
    InService = 0,
    Stale = 1,
    EnteringMaintenance = 2,
    Decommissioning = 3,
    Retired = 4,
}

/// Locality rank of a replica (lower is better).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Locality {
    LocalNode = 0,
    LocalRack = 1,
    Remote = 2,
}

/// One usable replica in choice order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ranked {
    /// Index into the replica slice given to [`Selector::order`].
    pub index: u16,
    pub health: Health,
    pub locality: Locality,
}

/// The chosen replica with its address, when the cache has it.
///
/// The address is borrowed from the cache: a `Choice` is two words, returned in registers.
/// (With an owned 32-byte `SocketAddr` the compiler copied the address twice through
/// overlapping unaligned stores, and each reload of such a copy waited for the stores to
/// retire, a store-forwarding stall that cost a third of the choice's time: see
/// docs/performance.md, "DataNode choice".)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Choice<'c> {
    /// `Some` on a cache hit; `None`: resolve with [`AddrCache::resolve`] (I/O for host names).
    pub addr: Option<&'c SocketAddr>,
    /// Index into the replica slice.
    pub index: u16,
}

/// Health by `AdminState` value (NORMAL, DECOMMISSION_INPROGRESS, DECOMMISSIONED,
/// ENTERING_MAINTENANCE, IN_MAINTENANCE) and staleness: 3 bits at `(admin << 1 | stale) * 3`.
/// Staleness only demotes an in-service node. A shift of a constant rather than a table, so
/// that no load stands between a replica and its rank.
const HEALTH_BITS: u32 = {
    let by_index = [
        Health::InService,
        Health::Stale,
        Health::Decommissioning,
        Health::Decommissioning,
        Health::Retired,
        Health::Retired,
        Health::EnteringMaintenance,
        Health::EnteringMaintenance,
        Health::Retired,
        Health::Retired,
    ];
    let mut bits = 0;
    let mut i = 0;
    while i < by_index.len() {
        bits |= (by_index[i] as u32) << (3 * i);
        i += 1;
    }
    bits
};

/// [`Health`] as its rank number (see [`HEALTH_BITS`]).
#[inline(always)]
fn health_rank(r: &Replica<'_>) -> u32 {
    let i = (r.admin_state as u32) << 1 | u32::from(r.stale);
    (HEALTH_BITS >> (3 * i)) & 7
}

/// Health from the admin state and staleness.
#[inline]
pub fn health(r: &Replica<'_>) -> Health {
    match health_rank(r) {
        0 => Health::InService,
        1 => Health::Stale,
        2 => Health::EnteringMaintenance,
        3 => Health::Decommissioning,
        _ => Health::Retired,
    }
}

/// What the choice knows about this client. Immutable once built: share it across threads.
#[derive(Debug, Clone, Default)]
pub struct Selector {
    local: LocalNode,
    /// Lengths of the local names modulo 64, as a bit set: a filter before the byte compares
    /// (a name of 70 bytes passes it for lengths 6 and 70, and the compare decides).
    local_lens: u64,
    racks: RackMap,
    local_rack: Option<Box<[u8]>>,
    /// `local_rack` prepared for the ranking loop.
    rack_key: RackKey,
    use_hostname: bool,
}

/// A rack path prepared for many compares: its length and, up to 16 bytes, its
/// [`short_words`], so that a compare is a length test and two word compares. The default
/// (no local rack) matches nothing.
#[derive(Debug, Clone)]
struct RackKey {
    len: usize,
    words: (u64, u64),
    bytes: Box<[u8]>,
}

impl Default for RackKey {
    fn default() -> Self {
        RackKey {
            len: usize::MAX,
            words: (0, 0),
            bytes: Box::default(),
        }
    }
}

impl RackKey {
    fn new(rack: Option<&[u8]>) -> RackKey {
        match rack {
            Some(r) => RackKey {
                len: r.len(),
                words: if r.len() <= 16 {
                    short_words(r)
                } else {
                    (0, 0)
                },
                bytes: r.into(),
            },
            None => RackKey::default(),
        }
    }

    #[inline(always)]
    fn matches(&self, rack: &[u8]) -> bool {
        rack.len() == self.len
            && if rack.len() <= 16 {
                short_words(rack) == self.words
            } else {
                *rack == *self.bytes
            }
    }
}

/// Replica counts up to this are ranked on the stack by [`Selector::choose`].
pub const STACK_REPLICAS: usize = 16;

#[inline(always)]
fn key(h: u32, l: Locality, pos: usize) -> u32 {
    (h << 2 | l as u32) << 16 | pos as u32
}

fn unpack(k: u32) -> Ranked {
    let key = k >> 16;
    Ranked {
        index: k as u16,
        health: match key >> 2 {
            0 => Health::InService,
            1 => Health::Stale,
            2 => Health::EnteringMaintenance,
            3 => Health::Decommissioning,
            _ => Health::Retired,
        },
        locality: match key & 3 {
            0 => Locality::LocalNode,
            1 => Locality::LocalRack,
            _ => Locality::Remote,
        },
    }
}

/// Insertion sort of packed keys (replica counts are small; 3 typically).
#[inline(always)]
fn sort_small(v: &mut [u32]) {
    for i in 1..v.len() {
        let x = v[i];
        let mut j = i;
        while j > 0 && v[j - 1] > x {
            v[j] = v[j - 1];
            j -= 1;
        }
        v[j] = x;
    }
}

/// Byte-slice equality without a libc call for the short strings compared here (racks, host
/// names, IP literals): overlapping word loads for 4..=16 bytes.
#[inline(always)]
pub(crate) fn bytes_eq(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    fn w8(s: &[u8], i: usize) -> u64 {
        let mut w = [0u8; 8];
        w.copy_from_slice(&s[i..i + 8]);
        u64::from_ne_bytes(w)
    }
    fn w4(s: &[u8], i: usize) -> u32 {
        let mut w = [0u8; 4];
        w.copy_from_slice(&s[i..i + 4]);
        u32::from_ne_bytes(w)
    }
    match n {
        0 => true,
        // positions 0, n/2 and n-1 cover every byte of 1..=3
        1..=3 => a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1],
        4..=7 => w4(a, 0) == w4(b, 0) && w4(a, n - 4) == w4(b, n - 4),
        8..=16 => w8(a, 0) == w8(b, 0) && w8(a, n - 8) == w8(b, n - 8),
        _ => a == b,
    }
}

/// A name's bit in [`Selector`]'s `local_lens`.
#[inline(always)]
fn len_bit(n: usize) -> u64 {
    1u64 << (n % 64)
}

impl Selector {
    /// A selector for a client on `local` with an optional rack table. `local_rack`, when
    /// given, wins; otherwise the table's rack of one of the local names is used.
    pub fn new(
        local: LocalNode,
        racks: RackMap,
        local_rack: Option<&[u8]>,
        use_hostname: bool,
    ) -> Selector {
        let mut local_lens = 0;
        for n in local.names() {
            local_lens |= len_bit(n.len());
        }
        let local_rack = local_rack
            .map(Box::from)
            .or_else(|| local.names().find_map(|n| racks.rack_of(n)).map(Box::from));
        let rack_key = RackKey::new(local_rack.as_deref());
        Selector {
            local,
            local_lens,
            racks,
            local_rack,
            rack_key,
            use_hostname,
        }
    }

    /// `dfs.client.use.datanode.hostname`.
    pub fn use_hostname(&self) -> bool {
        self.use_hostname
    }

    /// The configured or table-derived rack of this host.
    pub fn local_rack(&self) -> Option<&[u8]> {
        self.local_rack.as_deref()
    }

    /// Whether the replica is on this host. The length filter rejects most replicas of a
    /// client that is not a DataNode; the byte compares are out of line, so that the ranking
    /// loop does not keep the local names in registers.
    #[inline(always)]
    fn is_local(&self, r: &Replica<'_>) -> bool {
        let lens = self.local_lens;
        // shifts by the lengths modulo 64, as len_bit sets them
        let maybe =
            lens.wrapping_shr(r.ip_addr.len() as u32) | lens.wrapping_shr(r.host_name.len() as u32);
        maybe & 1 != 0 && self.is_local_by_name(r)
    }

    #[inline(never)]
    fn is_local_by_name(&self, r: &Replica<'_>) -> bool {
        self.local.is_local(r.ip_addr) || self.local.is_local(r.host_name)
    }

    /// Whether a replica that is not on this host is in this host's (configured or
    /// table-derived) rack.
    #[inline(always)]
    fn in_local_rack(&self, r: &Replica<'_>) -> bool {
        if self.racks.is_empty() {
            self.rack_key.matches(r.location)
        } else {
            self.local_rack.is_some() && self.rack_key.matches(self.table_rack_of(r))
        }
    }

    /// A replica's rack: the table's when it lists the replica (by `ipAddr`, then
    /// `hostName`), else the NameNode's `location`.
    #[inline(always)]
    fn rack_of<'a>(&'a self, r: &Replica<'a>) -> &'a [u8] {
        if self.racks.is_empty() {
            r.location
        } else {
            self.table_rack_of(r)
        }
    }

    /// [`rack_of`](Self::rack_of) with a table: two hash probes, kept out of the ranking loop
    /// so that the loop without a table stays in registers.
    #[inline(never)]
    fn table_rack_of<'a>(&'a self, r: &Replica<'a>) -> &'a [u8] {
        self.racks
            .rack_of(r.ip_addr)
            .or_else(|| self.racks.rack_of(r.host_name))
            .unwrap_or(r.location)
    }

    /// Whether a replica is left out: dead in the shared memory, or ignored by the caller.
    /// Out of line: both lists are empty on almost every choice, and the ranking loop tests
    /// that once.
    #[inline(never)]
    fn excluded(r: &Replica<'_>, dead: &DeadNodes, ignored: &[&[u8]], now: &mut LazyNow) -> bool {
        dead.is_dead(r.uuid, || now.get()) || ignored.contains(&r.uuid)
    }

    /// Ranks the usable replicas in position order, handing each one's packed key
    /// `(health << 2 | locality) << 16 | position` to `emit`. Without a configured rack it
    /// returns the rack of the first replica on this host that has one: replicas in that rack
    /// were emitted as [`Locality::Remote`], and [`upgrade_derived_rack`](Self::upgrade_derived_rack)
    /// moves them up. Comparing the packed keys orders by health, then locality, then
    /// position (NameNode order), i.e. it is the stable order.
    #[inline(always)]
    fn rank_each<'r>(
        &'r self,
        replicas: &[Replica<'r>],
        dead: &DeadNodes,
        ignored: &[&[u8]],
        now: &mut LazyNow,
        emit: impl FnMut(u32),
    ) -> Option<&'r [u8]> {
        // The dead-node memory and the ignored list are empty on almost every choice: test
        // that once, and run a loop without the checks.
        if dead.is_empty() && ignored.is_empty() {
            self.scan::<false>(replicas, dead, ignored, now, emit)
        } else {
            self.scan::<true>(replicas, dead, ignored, now, emit)
        }
    }

    /// [`rank_each`](Self::rank_each)'s loop, with or without the exclusion checks.
    #[inline(always)]
    fn scan<'r, const FILTER: bool>(
        &'r self,
        replicas: &[Replica<'r>],
        dead: &DeadNodes,
        ignored: &[&[u8]],
        now: &mut LazyNow,
        mut emit: impl FnMut(u32),
    ) -> Option<&'r [u8]> {
        let my_rack = self.local_rack.as_deref();
        let mut derived_rack: Option<&[u8]> = None;
        for (pos, r) in replicas.iter().enumerate() {
            if FILTER && Self::excluded(r, dead, ignored, now) {
                continue;
            }
            let loc = if self.is_local(r) {
                if my_rack.is_none() && derived_rack.is_none() {
                    let x = self.rack_of(r);
                    if !x.is_empty() {
                        derived_rack = Some(x);
                    }
                }
                Locality::LocalNode
            } else if self.in_local_rack(r) {
                Locality::LocalRack
            } else {
                Locality::Remote
            };
            emit(key(health_rank(r), loc, pos));
        }
        derived_rack
    }

    /// Without a configured rack, replicas in the rack of a replica on this host are
    /// [`Locality::LocalRack`]: moves their keys up from [`Locality::Remote`].
    fn upgrade_derived_rack(&self, replicas: &[Replica<'_>], rack: &[u8], keys: &mut [u32]) {
        for k in keys.iter_mut() {
            let pos = (*k & 0xffff) as usize;
            if (*k >> 16) & 3 == Locality::Remote as u32
                && bytes_eq(self.rack_of(&replicas[pos]), rack)
            {
                *k = (*k & !(3 << 16)) | (Locality::LocalRack as u32) << 16;
            }
        }
    }

    /// The usable replicas, best first (see the module docs), into `out` (cleared first; its
    /// capacity is reused). Dead and ignored nodes are left out; an empty result means every
    /// replica is excluded (refetch the locations).
    pub fn order(
        &self,
        replicas: &[Replica<'_>],
        dead: &DeadNodes,
        ignored: &[&[u8]],
        now: &mut LazyNow,
        out: &mut Vec<Ranked>,
    ) {
        out.clear();
        let n = replicas.len().min(u16::MAX as usize);
        let mut heap;
        let mut stack = [0u32; STACK_REPLICAS];
        let keys: &mut [u32] = if n <= STACK_REPLICAS {
            &mut stack[..n]
        } else {
            heap = vec![0u32; n];
            &mut heap
        };
        let m = self.rank_into(&replicas[..n], dead, ignored, now, keys);
        let keys = &keys[..m];
        out.extend(keys.iter().map(|&k| unpack(k)));
    }

    /// The sorted keys of the usable replicas into `keys` (as long as `replicas`); returns
    /// how many there are.
    #[inline(always)]
    fn rank_into(
        &self,
        replicas: &[Replica<'_>],
        dead: &DeadNodes,
        ignored: &[&[u8]],
        now: &mut LazyNow,
        keys: &mut [u32],
    ) -> usize {
        let mut m = 0;
        let derived = self.rank_each(replicas, dead, ignored, now, |k| {
            keys[m] = k;
            m += 1;
        });
        let keys = &mut keys[..m];
        if let Some(d) = derived {
            self.upgrade_derived_rack(replicas, d, keys);
        }
        sort_small(keys);
        m
    }

    /// The best usable replica and, on a cache hit, its address. `None` when every replica is
    /// dead or ignored. Only the first is needed, so the ranking keeps the smallest key and
    /// sorts nothing; only when the local rack is derived from a replica on this host and the
    /// best is remote are the keys ranked again in full (on the stack for up to
    /// [`STACK_REPLICAS`] replicas; more allocate). Use [`order`](Self::order) for the
    /// fallbacks.
    #[inline]
    pub fn choose<'c>(
        &self,
        replicas: &[Replica<'_>],
        dead: &DeadNodes,
        ignored: &[&[u8]],
        cache: &'c AddrCache,
        now: &mut LazyNow,
    ) -> Option<Choice<'c>> {
        let replicas = &replicas[..replicas.len().min(u16::MAX as usize)];
        let mut best = u32::MAX;
        let derived = self.rank_each(replicas, dead, ignored, now, |k| best = best.min(k));
        // A derived rack moves keys from Remote to LocalRack within their health. That can
        // only beat a Remote best: a LocalNode best of health h is ahead of every replica of
        // health >= h, and a replica of better health would have been the best already.
        if derived.is_some() && (best >> 16) & 3 == Locality::Remote as u32 {
            best = self.best_with_derived_rack(replicas, dead, ignored, now)?;
        } else if best == u32::MAX {
            return None;
        }
        let index = best as u16;
        let r = &replicas[index as usize];
        let addr = cache.lookup(&r.xfer_key(self.use_hostname), || now.get());
        Some(Choice { index, addr })
    }

    /// [`choose`](Self::choose)'s ranking in full, for a rack derived from a replica on this
    /// host (its keys move after the scan).
    #[cold]
    #[inline(never)]
    fn best_with_derived_rack(
        &self,
        replicas: &[Replica<'_>],
        dead: &DeadNodes,
        ignored: &[&[u8]],
        now: &mut LazyNow,
    ) -> Option<u32> {
        let n = replicas.len();
        let mut stack = [0u32; STACK_REPLICAS];
        let mut heap;
        let keys: &mut [u32] = if n <= STACK_REPLICAS {
            &mut stack[..n]
        } else {
            heap = vec![0u32; n];
            &mut heap
        };
        let m = self.rank_into(replicas, dead, ignored, now, keys);
        (m > 0).then(|| keys[0])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dead_nodes::Failure;
    use crate::fixtures::{located_block, Dn};
    use crate::replica::decode_replicas;
    use hadoop_wire::pb::hadoop::hdfs::datanode_info_proto::AdminState;
    use hadoop_wire::view::hdfs::LocatedBlockView;
    use std::time::Duration;

    fn order_of(
        sel: &Selector,
        dns: &[Dn],
        dead: &DeadNodes,
        ignored: &[&[u8]],
        stale_before: u64,
    ) -> Vec<(u16, Health, Locality)> {
        let bytes = located_block(dns);
        let view = LocatedBlockView::new(&bytes);
        let mut reps = Vec::new();
        decode_replicas(&view, stale_before, &mut reps).unwrap();
        let mut now = LazyNow::new();
        let mut out = Vec::new();
        sel.order(&reps, dead, ignored, &mut now, &mut out);
        out.iter()
            .map(|r| (r.index, r.health, r.locality))
            .collect()
    }

    fn idx(v: &[(u16, Health, Locality)]) -> Vec<u16> {
        v.iter().map(|x| x.0).collect()
    }

    #[test]
    fn health_table_follows_the_admin_states() {
        let mut dns = [Dn::new(0, "/r1")];
        for (admin, want) in [
            (AdminState::Normal, Health::InService),
            (AdminState::DecommissionInprogress, Health::Decommissioning),
            (AdminState::Decommissioned, Health::Retired),
            (AdminState::EnteringMaintenance, Health::EnteringMaintenance),
            (AdminState::InMaintenance, Health::Retired),
        ] {
            dns[0].admin = admin;
            dns[0].last_update_ms = 1000;
            let bytes = located_block(&dns);
            let mut reps = Vec::new();
            decode_replicas(&LocatedBlockView::new(&bytes), 0, &mut reps).unwrap();
            assert_eq!(health(&reps[0]), want, "{admin:?}");
            // stale (last heartbeat before 5000): only an in-service node is demoted
            decode_replicas(&LocatedBlockView::new(&bytes), 5000, &mut reps).unwrap();
            let stale_want = if want == Health::InService {
                Health::Stale
            } else {
                want
            };
            assert_eq!(health(&reps[0]), stale_want, "{admin:?}, stale");
        }
    }

    #[test]
    fn short_byte_compare() {
        let words = [
            "",
            "a",
            "ab",
            "abc",
            "abcd",
            "abcde",
            "abcdefg",
            "abcdefgh",
            "abcdefghi",
            "/default-rack",
            "abcdefghijklmnop",
            "abcdefghijklmnopq",
        ];
        for x in words {
            for y in words {
                assert_eq!(bytes_eq(x.as_bytes(), y.as_bytes()), x == y, "{x} {y}");
            }
            for i in 0..x.len() {
                let mut z = x.as_bytes().to_vec();
                z[i] ^= 1;
                assert!(!bytes_eq(x.as_bytes(), &z), "{x} {i}");
            }
        }
    }

    #[test]
    fn keeps_namenode_order_when_nothing_is_known() {
        let sel = Selector::default();
        let dns = [Dn::new(0, "/r1"), Dn::new(1, "/r2"), Dn::new(2, "/r1")];
        let o = order_of(&sel, &dns, &DeadNodes::default(), &[], 0);
        assert_eq!(idx(&o), [0, 1, 2]);
        assert!(o
            .iter()
            .all(|x| x.1 == Health::InService && x.2 == Locality::Remote));
    }

    #[test]
    fn local_node_then_its_rack() {
        // this host is DataNode 2's address: it goes first, and its rack (/r2, from the
        // NameNode's location) comes next
        let sel = Selector::new(
            LocalNode::with_names(["127.0.0.4"]),
            RackMap::default(),
            None,
            false,
        );
        let dns = [
            Dn::new(0, "/r1"),
            Dn::new(1, "/r2"),
            Dn::new(2, "/r2"),
            Dn::new(3, "/r1"),
        ];
        let o = order_of(&sel, &dns, &DeadNodes::default(), &[], 0);
        assert_eq!(idx(&o), [2, 1, 0, 3]);
        assert_eq!(o[0].2, Locality::LocalNode);
        assert_eq!(o[1].2, Locality::LocalRack);
        // by host name as well
        let sel = Selector::new(
            LocalNode::with_names(["dn3.example"]),
            RackMap::default(),
            None,
            false,
        );
        assert_eq!(
            idx(&order_of(&sel, &dns, &DeadNodes::default(), &[], 0)),
            [3, 0, 1, 2]
        );
    }

    #[test]
    fn local_rack_from_config_or_table() {
        let dns = [
            Dn::new(0, "/r1"),
            Dn::new(1, "/r2"),
            Dn::new(2, "/r1"),
            Dn::new(3, "/r2"),
        ];
        let sel = Selector::new(
            LocalNode::with_names(["client"]),
            RackMap::default(),
            Some(b"/r2"),
            false,
        );
        assert_eq!(
            idx(&order_of(&sel, &dns, &DeadNodes::default(), &[], 0)),
            [1, 3, 0, 2]
        );
        // the table gives this client's rack and overrides the NameNode's location of DataNode 0
        let table = RackMap::parse_table("client /r9\n127.0.0.2 /r9\ndn2.example /r9\n");
        let sel = Selector::new(LocalNode::with_names(["client"]), table, None, false);
        assert_eq!(sel.local_rack(), Some(&b"/r9"[..]));
        let o = order_of(&sel, &dns, &DeadNodes::default(), &[], 0);
        assert_eq!(idx(&o), [0, 2, 1, 3]);
        assert_eq!(
            o[1].2,
            Locality::LocalRack,
            "DataNode 2 matched by host name"
        );
    }

    #[test]
    fn dead_and_ignored_are_skipped_until_expiry() {
        let dns = [Dn::new(0, "/r1"), Dn::new(1, "/r2"), Dn::new(2, "/r1")];
        let dead = DeadNodes::new(Duration::from_millis(50));
        dead.mark(dns[0].uuid.as_bytes(), Failure::Connect, Instant::now());
        let sel = Selector::default();
        assert_eq!(idx(&order_of(&sel, &dns, &dead, &[], 0)), [1, 2]);
        assert_eq!(
            idx(&order_of(&sel, &dns, &dead, &[dns[2].uuid.as_bytes()], 0)),
            [1]
        );
        let all: Vec<&[u8]> = dns.iter().map(|d| d.uuid.as_bytes()).collect();
        assert!(order_of(&sel, &dns, &dead, &all, 0).is_empty());
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(idx(&order_of(&sel, &dns, &dead, &[], 0)), [0, 1, 2]);
    }

    #[test]
    fn stale_and_decommissioning_last_even_when_local() {
        let mut dns: Vec<Dn> = (0..6).map(|i| Dn::new(i, "/r1")).collect();
        dns[0].admin = AdminState::DecommissionInprogress;
        dns[1].last_update_ms = 1000; // stale
        dns[2].admin = AdminState::EnteringMaintenance;
        dns[3].admin = AdminState::Decommissioned;
        // 4 and 5 in service
        let sel = Selector::new(
            LocalNode::with_names(["127.0.0.2"]),
            RackMap::default(),
            None,
            false,
        );
        let o = order_of(&sel, &dns, &DeadNodes::default(), &[], 5000);
        assert_eq!(idx(&o), [4, 5, 1, 2, 0, 3]);
        assert_eq!(o[4], (0, Health::Decommissioning, Locality::LocalNode));
        assert_eq!(o[2].1, Health::Stale);
        assert_eq!(o[5].1, Health::Retired);
        // stale detection off: 1 is in service again
        let o = order_of(&sel, &dns, &DeadNodes::default(), &[], 0);
        assert_eq!(idx(&o), [1, 4, 5, 2, 0, 3]);
    }

    /// `choose` keeps only the smallest key (and re-ranks only for a derived rack); `order`
    /// sorts them all. Over many blocks and clients the choice is `order`'s first replica.
    #[test]
    fn choose_is_the_first_of_order() {
        let admins = [
            AdminState::Normal,
            AdminState::DecommissionInprogress,
            AdminState::Decommissioned,
            AdminState::EnteringMaintenance,
            AdminState::InMaintenance,
        ];
        let racks = ["/r1", "/r2", "", "/dc1/rack-10"];
        let selectors = [
            Selector::default(),
            // on DataNode 1 without a configured rack: its rack is derived
            Selector::new(
                LocalNode::with_names(["127.0.0.3"]),
                RackMap::default(),
                None,
                false,
            ),
            Selector::new(
                LocalNode::with_names(["dn2.example"]),
                RackMap::default(),
                None,
                true,
            ),
            Selector::new(
                LocalNode::with_names(["client"]),
                RackMap::default(),
                Some(b"/r2"),
                false,
            ),
            Selector::new(
                LocalNode::with_names(["127.0.0.4", "client"]),
                RackMap::parse_table("client /r9\n127.0.0.2 /r9\ndn3.example /r9\n"),
                None,
                false,
            ),
        ];
        let cache = AddrCache::default();
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |m: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % m
        };
        let mut checked = 0;
        for round in 0..400 {
            // mostly 1..=6 replicas; some rounds past the stack's 16
            let n = if round % 50 == 0 {
                20
            } else {
                1 + next(6) as u32
            };
            let mut dns: Vec<Dn> = (0..n)
                .map(|i| Dn::new(i, racks[next(racks.len() as u64) as usize]))
                .collect();
            for d in &mut dns {
                if next(3) == 0 {
                    d.admin = admins[next(5) as usize];
                }
                if next(4) == 0 {
                    d.last_update_ms = 1000;
                }
            }
            let bytes = located_block(&dns);
            let mut reps = Vec::new();
            decode_replicas(&LocatedBlockView::new(&bytes), 5000, &mut reps).unwrap();
            let dead = DeadNodes::default();
            if next(3) == 0 {
                dead.mark(
                    reps[next(u64::from(n)) as usize].uuid,
                    Failure::Io,
                    Instant::now(),
                );
            }
            let ignored: Vec<&[u8]> = if next(3) == 0 {
                vec![reps[next(u64::from(n)) as usize].uuid]
            } else {
                Vec::new()
            };
            for sel in &selectors {
                let mut now = LazyNow::new();
                let mut out = Vec::new();
                sel.order(&reps, &dead, &ignored, &mut now, &mut out);
                let c = sel.choose(&reps, &dead, &ignored, &cache, &mut now);
                assert_eq!(c.map(|c| c.index), out.first().map(|r| r.index), "{dns:?}");
                checked += 1;
            }
        }
        assert_eq!(checked, 2000);
    }

    #[test]
    fn choose_with_cache_hit_and_miss() {
        let dns = [Dn::new(0, "/r1"), Dn::new(1, "/r2"), Dn::new(2, "/r1")];
        let bytes = located_block(&dns);
        let view = LocatedBlockView::new(&bytes);
        let mut reps = Vec::new();
        decode_replicas(&view, 0, &mut reps).unwrap();
        let mut cache = AddrCache::default();
        let dead = DeadNodes::default();
        let sel = Selector::default();
        let mut now = LazyNow::new();
        let c = sel.choose(&reps, &dead, &[], &cache, &mut now).unwrap();
        assert_eq!(
            c,
            Choice {
                index: 0,
                addr: None
            }
        );
        let t = Instant::now();
        cache
            .resolve(reps[0].ip_addr, reps[0].xfer_port, t, |_, _| unreachable!())
            .unwrap();
        let c = sel.choose(&reps, &dead, &[], &cache, &mut now).unwrap();
        assert_eq!(c.addr.copied(), Some("127.0.0.2:9866".parse().unwrap()));
        // host names when configured
        let sel = Selector::new(LocalNode::default(), RackMap::default(), None, true);
        assert_eq!(
            sel.choose(&reps, &dead, &[], &cache, &mut now)
                .unwrap()
                .addr,
            None
        );
        cache
            .resolve(b"dn0.example", 9866, t, |_, p| {
                Ok(SocketAddr::new([10, 1, 1, 1].into(), p))
            })
            .unwrap();
        assert_eq!(
            sel.choose(&reps, &dead, &[], &cache, &mut now)
                .unwrap()
                .addr
                .copied(),
            Some("10.1.1.1:9866".parse().unwrap())
        );
        let all: Vec<&[u8]> = reps.iter().map(|r| r.uuid).collect();
        assert_eq!(sel.choose(&reps, &dead, &all, &cache, &mut now), None);
    }
}
