//! Network topology as the client sees it: which host this agent is ([`LocalNode`]) and which
//! rack a host is in ([`RackMap`], Hadoop's `TableMapping` format).
//!
//! The NameNode already orders replicas by distance to the client when it knows the client's
//! rack; the client-side ordering in [`crate::selection`] re-applies "same host, then same rack"
//! with what the client knows locally, so that it also holds when the NameNode does not know
//! where this client is (e.g. a client host that is not a DataNode and has no rack mapping on
//! the NameNode).

use crate::hash::hash_key;
use std::net::IpAddr;
use std::path::Path;

/// Hadoop's rack for hosts a mapping does not know (`NetworkTopology.DEFAULT_RACK`).
pub const DEFAULT_RACK: &str = "/default-rack";

/// (hash, host, rack).
type RackSlot = Option<(u64, Box<[u8]>, Box<[u8]>)>;

/// Host → rack table, as Hadoop's `TableMapping` reads it from `net.topology.table.file.name`:
/// one `host rack` pair per line, separated by whitespace; blank lines and lines starting with
/// `#` are skipped, and lines without exactly two columns are ignored (Java logs a warning).
/// Hosts the table does not list are in [`DEFAULT_RACK`] for `TableMapping`; here
/// [`rack_of`](Self::rack_of) says `None`, so that the caller can fall back to the rack the
/// NameNode reports (`DatanodeInfo.location`).
#[derive(Debug, Clone, Default)]
pub struct RackMap {
    /// Open addressing, power-of-two size, at most half full.
    slots: Vec<RackSlot>,
    len: usize,
    /// Lines ignored while parsing (not two columns).
    pub ignored_lines: usize,
}

impl RackMap {
    /// Parses the text of a table file.
    pub fn parse_table(text: &str) -> RackMap {
        let mut m = RackMap::default();
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut cols = line.split_whitespace();
            match (cols.next(), cols.next(), cols.next()) {
                (Some(host), Some(rack), None) => m.insert(host.as_bytes(), rack.as_bytes()),
                _ => m.ignored_lines += 1,
            }
        }
        m
    }

    /// Reads and parses a table file.
    pub fn load_table(path: &Path) -> std::io::Result<RackMap> {
        Ok(Self::parse_table(&std::fs::read_to_string(path)?))
    }

    /// Adds or replaces one host's rack.
    pub fn insert(&mut self, host: &[u8], rack: &[u8]) {
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let h = hash_key(host, 0);
        let mask = self.slots.len() - 1;
        let mut i = (h >> 32) as usize & mask;
        loop {
            match &mut self.slots[i] {
                Some((sh, k, r)) if *sh == h && &**k == host => {
                    *r = rack.into();
                    return;
                }
                Some(_) => i = (i + 1) & mask,
                slot @ None => {
                    *slot = Some((h, host.into(), rack.into()));
                    self.len += 1;
                    return;
                }
            }
        }
    }

    fn grow(&mut self) {
        let new_len = (self.slots.len() * 2).max(16);
        let old = std::mem::replace(&mut self.slots, vec![None; new_len]);
        self.len = 0;
        for (_, k, r) in old.into_iter().flatten() {
            self.insert(&k, &r);
        }
    }

    /// The rack of `host` (a name or IP literal exactly as written in the table), if listed.
    #[inline]
    pub fn rack_of(&self, host: &[u8]) -> Option<&[u8]> {
        if self.len == 0 {
            return None;
        }
        let h = hash_key(host, 0);
        let mask = self.slots.len() - 1;
        let mut i = (h >> 32) as usize & mask;
        loop {
            match &self.slots[i] {
                Some((sh, k, r)) if *sh == h && &**k == host => return Some(r),
                Some(_) => i = (i + 1) & mask,
                None => return None,
            }
        }
    }

    /// Number of hosts listed.
    pub fn len(&self) -> usize {
        self.len
    }

    /// No host listed.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// The names this host answers to: its IP addresses (text form, as the NameNode reports a
/// DataNode's `ipAddr`) and host names. A replica whose `ipAddr` or `hostName` is one of them is
/// on the same host as this agent.
#[derive(Debug, Clone, Default)]
pub struct LocalNode {
    names: Vec<Box<[u8]>>,
}

impl LocalNode {
    /// A local node known by exactly these names (tests, or an explicit configuration).
    pub fn with_names<I, S>(names: I) -> LocalNode
    where
        I: IntoIterator<Item = S>,
        S: AsRef<[u8]>,
    {
        let mut n = LocalNode::default();
        for s in names {
            n.add(s.as_ref());
        }
        n
    }

    /// Adds one name (duplicates are ignored).
    pub fn add(&mut self, name: &[u8]) {
        if !name.is_empty() && !self.names.iter().any(|n| &**n == name) {
            self.names.push(name.into());
        }
    }

    /// Detects this host's names on Linux without a syscall wrapper: the host name from
    /// `/proc/sys/kernel/hostname`, and every address the kernel treats as a local host
    /// address (`/32 host LOCAL` entries of `/proc/net/fib_trie`, plus `/proc/net/if_inet6`).
    /// Files that cannot be read are skipped; the result may be empty.
    pub fn detect() -> LocalNode {
        let mut n = LocalNode::default();
        if let Ok(h) = std::fs::read_to_string("/proc/sys/kernel/hostname") {
            let h = h.trim();
            n.add(h.as_bytes());
        }
        if let Ok(t) = std::fs::read_to_string("/proc/net/fib_trie") {
            for ip in parse_fib_trie_local(&t) {
                n.add(ip.to_string().as_bytes());
            }
        }
        if let Ok(t) = std::fs::read_to_string("/proc/net/if_inet6") {
            for ip in parse_if_inet6(&t) {
                n.add(ip.to_string().as_bytes());
            }
        }
        n
    }

    /// Is `name` (an `ipAddr` or `hostName` from the NameNode) one of this host's names?
    #[inline]
    pub fn is_local(&self, name: &[u8]) -> bool {
        self.names
            .iter()
            .any(|n| crate::selection::bytes_eq(n, name))
    }

    /// The names, in the order added.
    pub fn names(&self) -> impl Iterator<Item = &[u8]> {
        self.names.iter().map(|n| &**n)
    }
}

/// Local host addresses from the text of `/proc/net/fib_trie`: an address line `|-- a.b.c.d`
/// followed by a `/32 host LOCAL` line.
pub fn parse_fib_trie_local(text: &str) -> Vec<IpAddr> {
    let mut out: Vec<IpAddr> = Vec::new();
    let mut last: Option<IpAddr> = None;
    for line in text.lines() {
        let t = line.trim_start_matches([' ', '|', '+', '-', '`']).trim();
        if let Ok(ip) = t.parse::<IpAddr>() {
            last = Some(ip);
            continue;
        }
        if t.starts_with("/32 host LOCAL") {
            if let Some(ip) = last {
                if !out.contains(&ip) {
                    out.push(ip);
                }
            }
        }
    }
    out
}

/// Addresses from the text of `/proc/net/if_inet6` (32 hex digits per line).
pub fn parse_if_inet6(text: &str) -> Vec<IpAddr> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Some(hex) = line.split_whitespace().next() else {
            continue;
        };
        if hex.len() != 32 {
            continue;
        }
        let Ok(v) = u128::from_str_radix(hex, 16) else {
            continue;
        };
        let ip = IpAddr::V6(std::net::Ipv6Addr::from(v));
        if !out.contains(&ip) {
            out.push(ip);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_mapping_format() {
        let m = RackMap::parse_table(
            "# racks\n127.0.0.2 /r1\n\n  dn3.example   /r2  \nbad line here\nlonely\n127.0.0.2 /r9\n",
        );
        assert_eq!(m.len(), 2);
        assert_eq!(m.ignored_lines, 2);
        assert_eq!(m.rack_of(b"127.0.0.2"), Some(&b"/r9"[..]));
        assert_eq!(m.rack_of(b"dn3.example"), Some(&b"/r2"[..]));
        assert_eq!(m.rack_of(b"127.0.0.3"), None);
        assert_eq!(RackMap::default().rack_of(b"x"), None);
    }

    #[test]
    fn table_grows() {
        let mut m = RackMap::default();
        for i in 0..1000 {
            m.insert(
                format!("h{i}").as_bytes(),
                format!("/r{}", i % 7).as_bytes(),
            );
        }
        assert_eq!(m.len(), 1000);
        for i in 0..1000 {
            let r = format!("/r{}", i % 7);
            assert_eq!(m.rack_of(format!("h{i}").as_bytes()), Some(r.as_bytes()));
        }
    }

    #[test]
    fn fib_trie_local_entries() {
        let t = "Main:\n  +-- 0.0.0.0/0 3 0 5\n     |-- 0.0.0.0\n        /0 universe UNICAST\n     \
                 +-- 127.0.0.0/8 2 0 2\n        +-- 127.0.0.0/31 1 0 0\n           |-- 127.0.0.0\n              \
                 /8 host LOCAL\n           |-- 127.0.0.1\n              /32 host LOCAL\n        \
                 |-- 127.255.255.255\n           /32 link BROADCAST\n     |-- 10.1.2.3\n        \
                 /32 host LOCAL\nLocal:\n     |-- 10.1.2.3\n        /32 host LOCAL\n";
        let ips = parse_fib_trie_local(t);
        assert_eq!(
            ips,
            vec![
                "127.0.0.1".parse::<IpAddr>().unwrap(),
                "10.1.2.3".parse().unwrap()
            ]
        );
    }

    #[test]
    fn if_inet6_entries() {
        let t = "00000000000000000000000000000001 01 80 10 80       lo\n\
                 fe800000000000000000000000000001 02 40 20 80     eth0\nshort\n";
        let ips = parse_if_inet6(t);
        assert_eq!(
            ips,
            vec!["::1".parse::<IpAddr>().unwrap(), "fe80::1".parse().unwrap()]
        );
    }

    #[test]
    fn local_names() {
        let n = LocalNode::with_names(["127.0.0.1", "myhost", "127.0.0.1", ""]);
        assert_eq!(n.names().count(), 2);
        assert!(n.is_local(b"myhost"));
        assert!(!n.is_local(b"myhost2"));
        let d = LocalNode::detect();
        // every Linux box has a host name and a loopback address
        assert!(d.names().count() >= 1);
    }
}
