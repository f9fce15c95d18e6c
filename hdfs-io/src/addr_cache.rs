//! The DataNode address cache: `host:xferPort` as the NameNode reports it → a ready
//! [`SocketAddr`].
//!
//! Java builds the address on every block read: `NetUtils.createSocketAddr` parses
//! `ipAddr:xferPort` as a URI and then resolves the host (an IP-literal parse, or DNS). Here a
//! hit is a hash of the borrowed host bytes, one probe of an open-addressing table and a byte
//! compare: no parsing, no allocation.
//!
//! - **Key**: the host bytes exactly as the NameNode sent them (`ipAddr`, or `hostName` with
//!   `dfs.client.use.datanode.hostname`) and the port. Hosts up to [`INLINE_HOST`] bytes are
//!   stored inline in the slot; longer ones in a box allocated on insert.
//! - **IP literals** are parsed once on the miss and never expire.
//! - **Host names** are resolved by the caller's resolver (I/O stays outside: the cache is
//!   sans-IO) and expire after a TTL, so a DNS change is picked up.
//! - [`AddrCache::invalidate`] drops an entry after a connect failure, so the next use resolves
//!   the name again.
//! - The table is bounded ([`AddrCache::with_capacity`]): at the cap, expired entries are
//!   dropped first, then the whole table is cleared (entries are cheap to rebuild).

use crate::hash::hash_key;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

/// Host bytes kept inline in a slot (an IPv6 literal is at most 45 bytes).
pub const INLINE_HOST: usize = 46;

#[derive(Clone, Debug)]
enum HostBytes {
    Inline { len: u8, buf: [u8; INLINE_HOST] },
    Heap(Box<[u8]>),
}

impl HostBytes {
    fn new(b: &[u8]) -> HostBytes {
        if b.len() <= INLINE_HOST {
            let mut buf = [0u8; INLINE_HOST];
            buf[..b.len()].copy_from_slice(b);
            HostBytes::Inline {
                len: b.len() as u8,
                buf,
            }
        } else {
            HostBytes::Heap(b.into())
        }
    }

    #[inline(always)]
    fn as_bytes(&self) -> &[u8] {
        match self {
            HostBytes::Inline { len, buf } => &buf[..*len as usize],
            HostBytes::Heap(b) => b,
        }
    }
}

#[derive(Clone, Debug)]
struct Slot {
    /// 0 = empty (hashes are never 0).
    hash: u64,
    port: u16,
    host: HostBytes,
    addr: SocketAddr,
    /// `None` for IP literals.
    expires: Option<Instant>,
}

const EMPTY: Slot = Slot {
    hash: 0,
    port: 0,
    host: HostBytes::Inline {
        len: 0,
        buf: [0; INLINE_HOST],
    },
    addr: SocketAddr::V4(std::net::SocketAddrV4::new(
        std::net::Ipv4Addr::UNSPECIFIED,
        0,
    )),
    expires: None,
};

/// A DataNode address as the cache files it: the host bytes, the port and their hash.
/// Building one hashes the host; a [`Replica`](crate::replica::Replica) builds its keys once,
/// when the NameNode's response is decoded (as Java's `DatanodeID` keeps its `xferAddr`
/// string), so that a lookup on every choice ([`AddrCache::lookup`]) does not hash again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostPort<'a> {
    host: &'a [u8],
    port: u16,
    hash: u64,
}

impl<'a> HostPort<'a> {
    /// `host:port`, hashed.
    #[inline]
    pub fn new(host: &'a [u8], port: u16) -> HostPort<'a> {
        HostPort {
            host,
            port,
            hash: hash_key(host, u64::from(port)),
        }
    }

    /// The host bytes.
    pub fn host(&self) -> &'a [u8] {
        self.host
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }
}

/// How an address was found by [`AddrCache::resolve`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    /// Cache hit.
    Hit,
    /// IP literal parsed and cached.
    Literal,
    /// Host name resolved through the resolver and cached.
    Resolved,
}

/// Counters (cheap, for reports and tests).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub hits: u64,
    pub literal_misses: u64,
    pub resolved_misses: u64,
    pub expired: u64,
    pub invalidated: u64,
    pub resolve_failures: u64,
    pub clears: u64,
}

/// The address cache (see the module docs). Single owner: one per reader thread, or behind a
/// lock.
#[derive(Debug, Clone)]
pub struct AddrCache {
    slots: Vec<Slot>,
    /// 64 − log2(slots.len()).
    shift: u32,
    len: usize,
    max_len: usize,
    ttl: Duration,
    stats: CacheStats,
}

impl Default for AddrCache {
    fn default() -> Self {
        AddrCache::new(Self::DEFAULT_TTL)
    }
}

impl AddrCache {
    /// Default TTL of resolved host names (the JVM's default `networkaddress.cache.ttl`).
    pub const DEFAULT_TTL: Duration = Duration::from_secs(30);
    /// Default cap on entries.
    pub const DEFAULT_MAX: usize = 4096;

    /// A cache whose resolved host names live `ttl`, with the default cap.
    pub fn new(ttl: Duration) -> AddrCache {
        Self::with_capacity(ttl, Self::DEFAULT_MAX)
    }

    /// A cache holding at most `max_len` entries (at least 1).
    pub fn with_capacity(ttl: Duration, max_len: usize) -> AddrCache {
        let mut c = AddrCache {
            slots: Vec::new(),
            shift: 64,
            len: 0,
            max_len: max_len.max(1),
            ttl,
            stats: CacheStats::default(),
        };
        c.rebuild(16);
        c
    }

    fn rebuild(&mut self, size: usize) {
        debug_assert!(size.is_power_of_two());
        let old = std::mem::replace(&mut self.slots, vec![EMPTY; size]);
        self.shift = 64 - size.trailing_zeros();
        self.len = 0;
        for s in old.into_iter().filter(|s| s.hash != 0) {
            self.place(s);
        }
    }

    #[inline(always)]
    fn home(&self, hash: u64) -> usize {
        (hash >> self.shift) as usize
    }

    fn place(&mut self, s: Slot) {
        let mask = self.slots.len() - 1;
        let mut i = self.home(s.hash);
        while self.slots[i].hash != 0 {
            i = (i + 1) & mask;
        }
        self.slots[i] = s;
        self.len += 1;
    }

    /// Index of the slot holding (host, port).
    #[inline(always)]
    fn find(&self, host: &[u8], port: u16, hash: u64) -> Option<usize> {
        let mask = self.slots.len() - 1;
        let mut i = self.home(hash);
        loop {
            let s = &self.slots[i];
            if s.hash == hash
                && s.port == port
                && crate::selection::bytes_eq(s.host.as_bytes(), host)
            {
                return Some(i);
            }
            if s.hash == 0 {
                return None;
            }
            i = (i + 1) & mask;
        }
    }

    /// The cached address of `host:port`, if present and not expired. `now` is called only for
    /// an entry with a TTL (resolved host names). No allocation, no parsing.
    #[inline]
    pub fn get(&self, host: &[u8], port: u16, now: impl FnOnce() -> Instant) -> Option<SocketAddr> {
        self.lookup(&HostPort::new(host, port), now).copied()
    }

    /// [`get`](Self::get) by a key hashed beforehand, borrowing the address from the cache.
    #[inline]
    pub fn lookup(&self, key: &HostPort<'_>, now: impl FnOnce() -> Instant) -> Option<&SocketAddr> {
        let s = &self.slots[self.find(key.host, key.port, key.hash)?];
        match s.expires {
            None => Some(&s.addr),
            Some(t) if now() < t => Some(&s.addr),
            Some(_) => None,
        }
    }

    /// The address of `host:port`: from the cache, else parsed (IP literal, cached for good),
    /// else `resolver(host, port)` (cached for the TTL). A host that is not UTF-8 is an error.
    pub fn resolve<R>(
        &mut self,
        host: &[u8],
        port: u16,
        now: Instant,
        resolver: R,
    ) -> io::Result<(SocketAddr, Lookup)>
    where
        R: FnOnce(&str, u16) -> io::Result<SocketAddr>,
    {
        let hash = hash_key(host, u64::from(port));
        if let Some(i) = self.find(host, port, hash) {
            match self.slots[i].expires {
                Some(t) if now >= t => {
                    self.stats.expired += 1;
                    self.remove_at(i);
                }
                _ => {
                    self.stats.hits += 1;
                    return Ok((self.slots[i].addr, Lookup::Hit));
                }
            }
        }
        let text = std::str::from_utf8(host).map_err(|_| {
            io::Error::new(io::ErrorKind::InvalidInput, "DataNode host is not UTF-8")
        })?;
        let (addr, expires, how) = match parse_ip_literal(text) {
            Some(ip) => {
                self.stats.literal_misses += 1;
                (SocketAddr::new(ip, port), None, Lookup::Literal)
            }
            None => match resolver(text, port) {
                Ok(a) => {
                    self.stats.resolved_misses += 1;
                    (a, Some(now + self.ttl), Lookup::Resolved)
                }
                Err(e) => {
                    self.stats.resolve_failures += 1;
                    return Err(e);
                }
            },
        };
        self.insert_new(
            Slot {
                hash,
                port,
                host: HostBytes::new(host),
                addr,
                expires,
            },
            now,
        );
        Ok((addr, how))
    }

    fn insert_new(&mut self, s: Slot, now: Instant) {
        if self.len >= self.max_len {
            let before = self.len;
            let live: Vec<Slot> = std::mem::take(&mut self.slots)
                .into_iter()
                .filter(|s| s.hash != 0 && s.expires.is_none_or(|t| now < t))
                .collect();
            self.slots = vec![EMPTY; 16];
            self.shift = 60;
            self.len = 0;
            if live.len() < self.max_len {
                for s in live {
                    self.grow_if_needed();
                    self.place(s);
                }
            } else {
                self.stats.clears += 1;
            }
            debug_assert!(self.len < before || before == 0 || self.len == 0);
        }
        self.grow_if_needed();
        self.place(s);
    }

    fn grow_if_needed(&mut self) {
        // keep the load factor at or under 1/2
        if (self.len + 1) * 2 > self.slots.len() {
            let n = self.slots.len() * 2;
            self.rebuild(n);
        }
    }

    /// Drops `host:port` (after a connect failure): the next use parses or resolves again.
    pub fn invalidate(&mut self, host: &[u8], port: u16) -> bool {
        let hash = hash_key(host, u64::from(port));
        match self.find(host, port, hash) {
            Some(i) => {
                self.stats.invalidated += 1;
                self.remove_at(i);
                true
            }
            None => false,
        }
    }

    /// Backward-shift deletion (linear probing stays tombstone-free).
    fn remove_at(&mut self, mut i: usize) {
        let mask = self.slots.len() - 1;
        self.slots[i] = EMPTY;
        self.len -= 1;
        let mut j = (i + 1) & mask;
        while self.slots[j].hash != 0 {
            let home = self.home(self.slots[j].hash);
            // move j back to i if its home is not in (i, j] cyclically
            let between = if i <= j {
                home > i && home <= j
            } else {
                home > i || home <= j
            };
            if !between {
                self.slots[i] = std::mem::replace(&mut self.slots[j], EMPTY);
                i = j;
            }
            j = (j + 1) & mask;
        }
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Nothing held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The counters.
    pub fn stats(&self) -> CacheStats {
        self.stats
    }
}

/// An IP literal as a DataNode host: IPv4 dotted quad or IPv6 (optionally in brackets).
pub fn parse_ip_literal(host: &str) -> Option<IpAddr> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Some(ip);
    }
    host.strip_prefix('[')?
        .strip_suffix(']')?
        .parse::<std::net::Ipv6Addr>()
        .ok()
        .map(IpAddr::V6)
}

/// The system resolver (`getaddrinfo` through std), first address.
pub fn system_resolver(host: &str, port: u16) -> io::Result<SocketAddr> {
    std::net::ToSocketAddrs::to_socket_addrs(&(host, port))?
        .next()
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("{host}: no address")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_dns(h: &str, _: u16) -> io::Result<SocketAddr> {
        panic!("resolver called for {h}")
    }

    #[test]
    fn literal_miss_then_hit() {
        let mut c = AddrCache::default();
        let t = Instant::now();
        assert_eq!(c.get(b"127.0.0.2", 9866, || t), None);
        let (a, how) = c.resolve(b"127.0.0.2", 9866, t, no_dns).unwrap();
        assert_eq!(
            (a, how),
            ("127.0.0.2:9866".parse().unwrap(), Lookup::Literal)
        );
        let (_, how) = c.resolve(b"127.0.0.2", 9866, t, no_dns).unwrap();
        assert_eq!(how, Lookup::Hit);
        // literals never expire: no clock asked
        assert_eq!(c.get(b"127.0.0.2", 9866, || panic!("clock")), Some(a));
        assert_eq!(c.get(b"127.0.0.2", 9867, || t), None);
        let (v6, _) = c.resolve(b"::1", 1, t, no_dns).unwrap();
        assert_eq!(v6, "[::1]:1".parse().unwrap());
        let (v6b, _) = c.resolve(b"[::1]", 2, t, no_dns).unwrap();
        assert_eq!(v6b, "[::1]:2".parse().unwrap());
    }

    #[test]
    fn hostnames_expire_and_invalidate() {
        let mut c = AddrCache::new(Duration::from_secs(30));
        let t = Instant::now();
        let mut calls = 0;
        let mut res = |ip: &'static str| {
            calls += 1;
            move |_: &str, p: u16| Ok(SocketAddr::new(ip.parse().unwrap(), p))
        };
        let (a, how) = c.resolve(b"dn1.example", 9866, t, res("10.0.0.1")).unwrap();
        assert_eq!(
            (a.to_string().as_str(), how),
            ("10.0.0.1:9866", Lookup::Resolved)
        );
        assert_eq!(
            c.get(b"dn1.example", 9866, || t + Duration::from_secs(29)),
            Some(a)
        );
        assert_eq!(
            c.get(b"dn1.example", 9866, || t + Duration::from_secs(30)),
            None
        );
        // DNS changed: after expiry the new address is used
        let (b, how) = c
            .resolve(
                b"dn1.example",
                9866,
                t + Duration::from_secs(31),
                res("10.0.0.9"),
            )
            .unwrap();
        assert_eq!(
            (b.to_string().as_str(), how),
            ("10.0.0.9:9866", Lookup::Resolved)
        );
        // connect failure: invalidate, next resolve asks the resolver again
        assert!(c.invalidate(b"dn1.example", 9866));
        assert!(!c.invalidate(b"dn1.example", 9866));
        let (d, _) = c
            .resolve(
                b"dn1.example",
                9866,
                t + Duration::from_secs(32),
                res("10.0.0.7"),
            )
            .unwrap();
        assert_eq!(d.to_string(), "10.0.0.7:9866");
        assert_eq!(calls, 3);
        let s = c.stats();
        assert_eq!((s.resolved_misses, s.expired, s.invalidated), (3, 1, 1));
        let e = c.resolve(b"nx.example", 1, t, |_, _| {
            Err(io::Error::other("nxdomain"))
        });
        assert!(e.is_err());
        assert_eq!(c.stats().resolve_failures, 1);
        assert!(c.resolve(&[0xff, 0xfe], 1, t, no_dns).is_err());
    }

    #[test]
    fn long_hosts_and_many_entries_with_removals() {
        let mut c = AddrCache::with_capacity(Duration::from_secs(30), 100_000);
        let t = Instant::now();
        let long = "a".repeat(200);
        c.resolve(long.as_bytes(), 7, t, |_, p| {
            Ok(SocketAddr::new([10, 0, 0, 1].into(), p))
        })
        .unwrap();
        for i in 0..2000u32 {
            let h = format!("10.{}.{}.{}", i >> 16, (i >> 8) & 255, i & 255);
            c.resolve(h.as_bytes(), 9866, t, no_dns).unwrap();
        }
        // remove every third, then check all others are still found (backward shift is right)
        for i in (0..2000u32).step_by(3) {
            let h = format!("10.{}.{}.{}", i >> 16, (i >> 8) & 255, i & 255);
            assert!(c.invalidate(h.as_bytes(), 9866));
        }
        for i in 0..2000u32 {
            let h = format!("10.{}.{}.{}", i >> 16, (i >> 8) & 255, i & 255);
            let want = if i % 3 == 0 {
                None
            } else {
                Some(SocketAddr::new(h.parse().unwrap(), 9866))
            };
            assert_eq!(c.get(h.as_bytes(), 9866, || t), want, "{h}");
        }
        assert!(c.get(long.as_bytes(), 7, || t).is_some());
        assert_eq!(c.len(), 1 + 2000 - 667);
    }

    #[test]
    fn bounded() {
        let mut c = AddrCache::with_capacity(Duration::from_secs(1), 8);
        let t = Instant::now();
        for i in 0..8u8 {
            c.resolve(format!("h{i}").as_bytes(), 1, t, |_, p| {
                Ok(SocketAddr::new([10, 0, 0, i].into(), p))
            })
            .unwrap();
        }
        assert_eq!(c.len(), 8);
        // all eight expired by now: they are dropped to make room
        let later = t + Duration::from_secs(2);
        c.resolve(b"10.9.9.9", 1, later, no_dns).unwrap();
        assert_eq!(c.len(), 1);
        for i in 0..7u8 {
            c.resolve(format!("10.0.1.{i}").as_bytes(), 1, later, no_dns)
                .unwrap();
        }
        assert_eq!(c.len(), 8);
        // full of live literals: cleared, then the new one inserted
        c.resolve(b"10.0.2.1", 1, later, no_dns).unwrap();
        assert_eq!(c.len(), 1);
        assert_eq!(c.stats().clears, 1);
    }
}
