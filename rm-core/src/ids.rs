//! Identifiers: NodeManager, application and container ids as small owned keys.
//!
//! [`ContainerKey`] and [`AppKey`] are `Copy` values read straight from the views
//! ([`ContainerKey::from_view`]); they are what the node state machine stores and what the
//! completion log records. [`NodeKey`] (host and port) is the one owned-string key; it is
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
use hadoop_wire::view::yarn::{ApplicationIdView, ContainerIdView, NodeIdView};
use prost::encoding::{encode_varint, encoded_len_varint};

/// `ContainerId.CONTAINER_ID_BITMASK`: the sequence number's bits; the epoch sits above.
pub const CONTAINER_ID_BITMASK: i64 = 0xff_ffff_ffff;

/// An application id: cluster timestamp and sequence number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AppKey {
    pub cluster_timestamp: i64,
    pub id: i32,
}

/// A container id: application, attempt and the 64-bit id (epoch in the high bits), which is
/// what Java's `ContainerId.equals` compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContainerKey {
    pub app: AppKey,
    pub attempt: i32,
    pub id: i64,
}

impl AppKey {
    /// Reads an `ApplicationIdProto`; `None` if the id is absent (the timestamp defaults to 0).
    #[inline]
    pub fn from_view(v: ApplicationIdView<'_>) -> Result<Option<AppKey>, DecodeError> {
        let (id, ts) = v.parts()?;
        Ok(id.map(|id| AppKey {
            cluster_timestamp: ts.unwrap_or(0),
            id,
        }))
    }

    /// The encoded length of this id as an `ApplicationIdProto` body.
    pub fn encoded_len(&self) -> usize {
        1 + encoded_len_varint(self.id as i64 as u64)
            + 1
            + encoded_len_varint(self.cluster_timestamp as u64)
    }

    /// Appends the `ApplicationIdProto` body (fields 1, 2), as protobuf-java writes it.
    pub fn encode(&self, buf: &mut Vec<u8>) {
        buf.push(0x08);
        encode_varint(self.id as i64 as u64, buf);
        buf.push(0x10);
        encode_varint(self.cluster_timestamp as u64, buf);
    }

    /// The prost form.
    pub fn to_proto(&self) -> hadoop_wire::pb::hadoop::yarn::ApplicationIdProto {
        hadoop_wire::pb::hadoop::yarn::ApplicationIdProto {
            id: Some(self.id),
            cluster_timestamp: Some(self.cluster_timestamp),
        }
    }

    /// Parses Java's form `application_<timestamp>_<id>`.
    pub fn parse(s: &str) -> Option<AppKey> {
        let rest = s.strip_prefix("application_")?;
        let (ts, id) = rest.split_once('_')?;
        Some(AppKey {
            cluster_timestamp: ts.parse().ok()?,
            id: id.parse().ok()?,
        })
    }
}

impl fmt::Display for AppKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "application_{}_{:04}", self.cluster_timestamp, self.id)
    }
}

impl ContainerKey {
    /// Reads a `ContainerIdProto`. Java builds the id from `app_attempt_id` and `id`; we do the
    /// same and fall back to the deprecated `app_id` field when the attempt carries no
    /// application. `None` if the id, the attempt or the application id is absent (Java would
    /// fail with a NullPointerException on such a status).
    #[inline]
    pub fn from_view(v: ContainerIdView<'_>) -> Result<Option<ContainerKey>, DecodeError> {
        let p = v.parts()?;
        let (Some(id), Some(attempt)) = (p.id, p.app_attempt_id) else {
            return Ok(None);
        };
        let (app_view, attempt_id) = attempt.parts()?;
        let app_view = match app_view.or(p.app_id) {
            Some(a) => a,
            None => return Ok(None),
        };
        let Some(app) = AppKey::from_view(app_view)? else {
            return Ok(None);
        };
        Ok(Some(ContainerKey {
            app,
            attempt: attempt_id.unwrap_or(0),
            id,
        }))
    }

    fn attempt_len(&self) -> usize {
        let app = self.app.encoded_len();
        1 + encoded_len_varint(app as u64)
            + app
            + 1
            + encoded_len_varint(self.attempt as i64 as u64)
    }

    /// The encoded length of this id as a `ContainerIdProto` body.
    pub fn encoded_len(&self) -> usize {
        let att = self.attempt_len();
        1 + encoded_len_varint(att as u64) + att + 1 + encoded_len_varint(self.id as u64)
    }

    /// Appends the `ContainerIdProto` body as Java's `ContainerIdPBImpl` writes it:
    /// `app_attempt_id` (2) and `id` (3); the deprecated `app_id` (1) is not set.
    pub fn encode(&self, buf: &mut Vec<u8>) {
        buf.push(0x12);
        encode_varint(self.attempt_len() as u64, buf);
        buf.push(0x0a);
        encode_varint(self.app.encoded_len() as u64, buf);
        self.app.encode(buf);
        buf.push(0x10);
        encode_varint(self.attempt as i64 as u64, buf);
        buf.push(0x18);
        encode_varint(self.id as u64, buf);
    }

    /// The prost form (as Java sets it: attempt and id).
    pub fn to_proto(&self) -> hadoop_wire::pb::hadoop::yarn::ContainerIdProto {
        use hadoop_wire::pb::hadoop::yarn::{ApplicationAttemptIdProto, ContainerIdProto};
        ContainerIdProto {
            app_id: None,
            app_attempt_id: Some(ApplicationAttemptIdProto {
                application_id: Some(self.app.to_proto()),
                attempt_id: Some(self.attempt),
            }),
            id: Some(self.id),
        }
    }

    /// The epoch (bits above [`CONTAINER_ID_BITMASK`]).
    pub fn epoch(&self) -> i64 {
        self.id >> 40
    }

    /// Parses Java's form `container_[e<epoch>_]<timestamp>_<app>_<attempt>_<id>`.
    pub fn parse(s: &str) -> Option<ContainerKey> {
        let rest = s.strip_prefix("container_")?;
        let mut parts = rest.split('_');
        let mut first = parts.next()?;
        let mut epoch = 0i64;
        if let Some(e) = first.strip_prefix('e') {
            epoch = e.parse().ok()?;
            first = parts.next()?;
        }
        let ts: i64 = first.parse().ok()?;
        let app: i32 = parts.next()?.parse().ok()?;
        let attempt: i32 = parts.next()?.parse().ok()?;
        let seq: i64 = parts.next()?.parse().ok()?;
        if parts.next().is_some() || !(0..=CONTAINER_ID_BITMASK).contains(&seq) {
            return None;
        }
        Some(ContainerKey {
            app: AppKey {
                cluster_timestamp: ts,
                id: app,
            },
            attempt,
            id: (epoch << 40) | seq,
        })
    }
}

impl fmt::Display for ContainerKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("container_")?;
        let epoch = self.epoch();
        if epoch > 0 {
            write!(f, "e{epoch:02}_")?;
        }
        write!(
            f,
            "{}_{:04}_{:02}_{:06}",
            self.app.cluster_timestamp,
            self.app.id,
            self.attempt,
            self.id & CONTAINER_ID_BITMASK
        )
    }
}

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

    /// Appends the `NodeIdProto` body.
    pub fn encode(&self, buf: &mut Vec<u8>) {
        buf.push(0x0a);
        encode_varint(self.host.len() as u64, buf);
        buf.extend_from_slice(self.host.as_bytes());
        buf.push(0x10);
        encode_varint(self.port as i64 as u64, buf);
    }

    pub fn to_proto(&self) -> hadoop_wire::pb::hadoop::yarn::NodeIdProto {
        hadoop_wire::pb::hadoop::yarn::NodeIdProto {
            host: Some(self.host.to_string()),
            port: Some(self.port),
        }
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
    fn container_id_encoding_matches_prost() {
        let k = ContainerKey {
            app: AppKey {
                cluster_timestamp: 1_700_000_000_123,
                id: 42,
            },
            attempt: 1,
            id: (3i64 << 40) | 17,
        };
        let mut ours = Vec::new();
        k.encode(&mut ours);
        assert_eq!(ours, k.to_proto().encode_to_vec());
        assert_eq!(ours.len(), k.encoded_len());
        let back = ContainerKey::from_view(ContainerIdView::new(&ours)).unwrap();
        assert_eq!(back, Some(k));
        let mut a = Vec::new();
        k.app.encode(&mut a);
        assert_eq!(a, k.app.to_proto().encode_to_vec());
        let mut n = Vec::new();
        let node = NodeKey::new("127.0.0.1", 45454);
        node.encode(&mut n);
        assert_eq!(n, node.to_proto().encode_to_vec());
    }

    #[test]
    fn display_and_parse_round_trip() {
        let k = ContainerKey {
            app: AppKey {
                cluster_timestamp: 1_700_000_000_123,
                id: 7,
            },
            attempt: 2,
            id: 5,
        };
        assert_eq!(k.to_string(), "container_1700000000123_0007_02_000005");
        assert_eq!(ContainerKey::parse(&k.to_string()), Some(k));
        let e = ContainerKey {
            id: (1 << 40) | 5,
            ..k
        };
        assert_eq!(e.to_string(), "container_e01_1700000000123_0007_02_000005");
        assert_eq!(ContainerKey::parse(&e.to_string()), Some(e));
        assert_eq!(k.app.to_string(), "application_1700000000123_0007");
        assert_eq!(AppKey::parse("application_1700000000123_0007"), Some(k.app));
        assert_eq!(ContainerKey::parse("container_x"), None);
        assert_eq!(AppKey::parse("app_1_2"), None);
    }

    #[test]
    fn missing_parts_are_none_not_errors() {
        use hadoop_wire::pb::hadoop::yarn::{ApplicationAttemptIdProto, ContainerIdProto};
        let no_attempt = ContainerIdProto {
            app_id: None,
            app_attempt_id: None,
            id: Some(1),
        }
        .encode_to_vec();
        assert_eq!(
            ContainerKey::from_view(ContainerIdView::new(&no_attempt)).unwrap(),
            None
        );
        let app_in_field_1 = ContainerIdProto {
            app_id: Some(
                AppKey {
                    cluster_timestamp: 9,
                    id: 3,
                }
                .to_proto(),
            ),
            app_attempt_id: Some(ApplicationAttemptIdProto {
                application_id: None,
                attempt_id: Some(1),
            }),
            id: Some(1),
        }
        .encode_to_vec();
        let k = ContainerKey::from_view(ContainerIdView::new(&app_in_field_1))
            .unwrap()
            .unwrap();
        assert_eq!(
            k.app,
            AppKey {
                cluster_timestamp: 9,
                id: 3
            }
        );
        // Garbage is a typed error.
        assert!(ContainerKey::from_view(ContainerIdView::new(&[0x12, 0x05, 0x01])).is_err());
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
