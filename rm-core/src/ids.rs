//! Identifiers: NodeManager, application and container ids as small owned keys.
//!
//! [`ContainerKey`] and [`AppKey`] are YARN's ids from `hadoop_wire::yarn::ids` (one
//! implementation, shared with the NodeManager side in `nm-core`): `Copy` values read straight
//! from the views ([`ContainerKey::from_view`]); they are what the node state machine stores and
//! what the completion log records. [`NodeKey`] (host and port) is the one owned-string key; it is
//! created at registration (cold) and looked up on every heartbeat without allocating
//! ([`NodeKeyRef`]).
//!
//! Hashing: [`FastHasher`] (a multiply-rotate hash, seeded per process) for the per-node
//! container maps, where SipHash would cost more than the rest of a status update; and
//! [`stable_node_hash`] (FNV-1a, fixed) for routing a node to its shard, which must not change
//! across restarts because the completion log is routed with it.

use std::borrow::Borrow;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::OnceLock;

use hadoop_wire::reader::DecodeError;
use hadoop_wire::view::yarn::NodeIdView;
use hadoop_wire::writer::{Encode, Sink};
use hadoop_wire::yarn::ids::{AppId, ContainerId};

/// An application id: the shared YARN id ([`hadoop_wire::yarn::ids::AppId`]) under the name
/// the RM's code uses for its map keys.
pub type AppKey = AppId;
/// A container id: the shared YARN id ([`hadoop_wire::yarn::ids::ContainerId`]); the 64-bit id
/// (epoch in the high bits) is what Java's `ContainerId.equals` compares.
pub type ContainerKey = ContainerId;

// ---------------------------------------------------------------------------------------

/// A NodeManager's id: host and port, as it registers (no DNS, see trap 9).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeKey {
    pub host: Box<str>,
    pub port: i32,
}

impl NodeKey {
    pub fn new(host: &str, port: i32) -> NodeKey {
        NodeKey {
            host: host.into(),
            port,
        }
    }

    /// Reads a `NodeIdProto`; a missing host is an empty host, a missing port 0 (Java's
    /// getters).
    pub fn read(v: NodeIdView<'_>) -> Result<(&str, i32), DecodeError> {
        Ok((v.host()?.unwrap_or(""), v.port()?.unwrap_or(0)))
    }

    pub fn to_proto(&self) -> hadoop_wire::pb::hadoop::yarn::NodeIdProto {
        hadoop_wire::pb::hadoop::yarn::NodeIdProto {
            host: Some(self.host.to_string()),
            port: Some(self.port),
        }
    }
}

/// The `NodeIdProto` body: host (1), port (2).
impl Encode for NodeKey {
    fn encode<S: Sink>(&self, s: &mut S) {
        s.string(1, &self.host);
        s.int32(2, self.port);
    }
}

impl fmt::Display for NodeKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

/// Borrowed form of a [`NodeKey`] for allocation-free map lookups.
pub trait NodeKeyRef {
    fn host(&self) -> &str;
    fn port(&self) -> i32;
}

impl NodeKeyRef for NodeKey {
    fn host(&self) -> &str {
        &self.host
    }
    fn port(&self) -> i32 {
        self.port
    }
}

impl NodeKeyRef for (&str, i32) {
    fn host(&self) -> &str {
        self.0
    }
    fn port(&self) -> i32 {
        self.1
    }
}

impl<'a> Borrow<dyn NodeKeyRef + 'a> for NodeKey {
    fn borrow(&self) -> &(dyn NodeKeyRef + 'a) {
        self
    }
}

impl Hash for dyn NodeKeyRef + '_ {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // Must match the derived Hash of NodeKey: Box<str> hashes as str, then the i32.
        self.host().hash(state);
        self.port().hash(state);
    }
}

impl PartialEq for dyn NodeKeyRef + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.host() == other.host() && self.port() == other.port()
    }
}

impl Eq for dyn NodeKeyRef + '_ {}

/// FNV-1a over the host bytes and the port (little endian): the node → shard routing hash.
/// Fixed (no seed) so that a restarted RM routes the completion log the same way.
pub fn stable_node_hash(host: &str, port: i32) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in host.bytes().chain(port.to_le_bytes()) {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The shard of a node among `shards`.
pub fn shard_of(host: &str, port: i32, shards: usize) -> usize {
    (stable_node_hash(host, port) % shards.max(1) as u64) as usize
}

// ---------------------------------------------------------------------------------------

/// A multiply-rotate hasher (the FxHash recipe) for small fixed-size keys, seeded once per
/// process so that peers cannot precompute collisions. Not for strings from the network in
/// bulk: it is used for container and application keys of one node, and node keys.
#[derive(Clone, Copy, Debug)]
pub struct FastHasher {
    hash: u64,
}

const K: u64 = 0xf135_7aea_2e62_a9c5;

impl FastHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(26) ^ word).wrapping_mul(K);
    }
}

impl Hasher for FastHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.hash.rotate_left(26)
    }
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w) ^ ((rest.len() as u64) << 59));
        }
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(i as u64)
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(i as u64)
    }
    #[inline]
    fn write_i32(&mut self, i: i32) {
        self.add(i as u32 as u64)
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i)
    }
    #[inline]
    fn write_i64(&mut self, i: i64) {
        self.add(i as u64)
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64)
    }
}

/// Builds [`FastHasher`]s from the process seed.
#[derive(Clone, Copy, Debug)]
pub struct FastBuild {
    seed: u64,
}

impl Default for FastBuild {
    fn default() -> Self {
        static SEED: OnceLock<u64> = OnceLock::new();
        let seed = *SEED.get_or_init(|| {
            // RandomState is seeded from the OS; hashing a constant with it yields a random word.
            let s = std::collections::hash_map::RandomState::new();
            s.hash_one(0x5eed_u64)
        });
        FastBuild { seed }
    }
}

impl BuildHasher for FastBuild {
    type Hasher = FastHasher;
    #[inline]
    fn build_hasher(&self) -> FastHasher {
        FastHasher { hash: self.seed }
    }
}

/// A `HashMap` with [`FastHasher`].
pub type FastMap<K, V> = HashMap<K, V, FastBuild>;
/// A `HashSet` with [`FastHasher`].
pub type FastSet<K> = HashSet<K, FastBuild>;

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn node_id_encoding_matches_prost() {
        let mut n = Vec::new();
        let node = NodeKey::new("127.0.0.1", 45454);
        hadoop_wire::writer::write(&mut n, &node);
        assert_eq!(n, node.to_proto().encode_to_vec());
    }

    #[test]
    fn node_key_lookup_without_allocation() {
        let mut m: FastMap<NodeKey, u32> = FastMap::default();
        m.insert(NodeKey::new("h1", 1), 7);
        let probe: &dyn NodeKeyRef = &("h1", 1);
        assert_eq!(m.get(probe), Some(&7));
        let miss: &dyn NodeKeyRef = &("h1", 2);
        assert_eq!(m.get(miss), None);
    }

    #[test]
    fn shard_routing_is_stable() {
        // Fixed values: changing the hash would misroute a completion log written before.
        const HASH: u64 = 0x5a63_e593_6602_ced1;
        assert_eq!(stable_node_hash("10.0.0.1", 8041), HASH);
        let a = shard_of("10.0.0.1", 8041, 4);
        assert_eq!(a as u64, HASH % 4);
        assert!(a < 4);
    }
}
