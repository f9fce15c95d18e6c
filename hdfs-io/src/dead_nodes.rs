//! The dead-node memory: DataNodes that failed recently, shared by every read of a client.
//!
//! Java keeps a `deadNodes` map per open stream (and forgets it when the stream closes or
//! after it refetches locations), so every new stream tries the same dead node first and waits
//! for its connect timeout again. Here one [`DeadNodes`] is shared (behind an `Arc`) by all
//! reads of a client. Each entry has the time of the failure and expires after a configurable
//! time, after which the node is tried again (it may have been restarted).
//!
//! The hot path ([`DeadNodes::is_dead`]) costs one atomic load while nothing is dead; with
//! entries it takes an uncontended lock and scans a short vector.

use crate::hash::hash_key;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Why a node was marked dead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// TCP connect failed or timed out.
    Connect,
    /// The connection broke or timed out during a read, or the DataNode answered with an error.
    Io,
    /// A checksum did not match: the replica on that node is corrupt (reported to the NameNode).
    Checksum,
}

#[derive(Debug, Clone)]
struct Entry {
    hash: u64,
    uuid: Box<[u8]>,
    at: Instant,
    failure: Failure,
    count: u32,
}

/// A snapshot of one dead-node entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadNode {
    /// The DataNode's `datanodeUuid`.
    pub uuid: Vec<u8>,
    /// When it last failed.
    pub at: Instant,
    /// How it last failed.
    pub failure: Failure,
    /// Failures recorded since it entered the memory.
    pub count: u32,
}

/// DataNodes that failed recently, keyed by `datanodeUuid` (stable across restarts and address
/// changes; Java's `DatanodeID.equals` also compares the UUID).
#[derive(Debug)]
pub struct DeadNodes {
    ttl: Duration,
    /// Number of entries, read without the lock.
    len: AtomicUsize,
    entries: Mutex<Vec<Entry>>,
}

impl DeadNodes {
    /// Default time a failure is remembered.
    pub const DEFAULT_TTL: Duration = Duration::from_secs(60);

    /// An empty memory whose entries expire `ttl` after the last failure.
    pub fn new(ttl: Duration) -> DeadNodes {
        DeadNodes {
            ttl,
            len: AtomicUsize::new(0),
            entries: Mutex::new(Vec::new()),
        }
    }

    /// How long a failure is remembered.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Entry>> {
        // a panic while holding the lock leaves the vector consistent: keep using it
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records a failure of the node with this UUID at `now`. Expired entries are dropped.
    pub fn mark(&self, uuid: &[u8], failure: Failure, now: Instant) {
        let h = hash_key(uuid, 0);
        let mut v = self.lock();
        let ttl = self.ttl;
        v.retain(|e| now.saturating_duration_since(e.at) < ttl);
        match v.iter_mut().find(|e| e.hash == h && &*e.uuid == uuid) {
            Some(e) => {
                e.at = now;
                e.failure = failure;
                e.count += 1;
            }
            None => v.push(Entry {
                hash: h,
                uuid: uuid.into(),
                at: now,
                failure,
                count: 1,
            }),
        }
        self.len.store(v.len(), Ordering::Release);
    }

    /// Forgets a node (e.g. after a successful read from it).
    pub fn clear(&self, uuid: &[u8]) {
        if self.len.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut v = self.lock();
        v.retain(|e| &*e.uuid != uuid);
        self.len.store(v.len(), Ordering::Release);
    }

    /// Forgets every node.
    pub fn clear_all(&self) {
        let mut v = self.lock();
        v.clear();
        self.len.store(0, Ordering::Release);
    }

    /// Is the node with this UUID dead at `now`? `now` is asked for only when some entry
    /// exists (a clock read costs more than the rest of the check).
    #[inline]
    pub fn is_dead(&self, uuid: &[u8], now: impl FnOnce() -> Instant) -> bool {
        if self.len.load(Ordering::Acquire) == 0 {
            return false;
        }
        self.is_dead_slow(uuid, now())
    }

    #[cold]
    fn is_dead_slow(&self, uuid: &[u8], now: Instant) -> bool {
        let h = hash_key(uuid, 0);
        let v = self.lock();
        v.iter().any(|e| {
            e.hash == h && &*e.uuid == uuid && now.saturating_duration_since(e.at) < self.ttl
        })
    }

    /// Any entry at all (expired or not)?
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len.load(Ordering::Acquire) == 0
    }

    /// The live entries at `now`.
    pub fn snapshot(&self, now: Instant) -> Vec<DeadNode> {
        self.lock()
            .iter()
            .filter(|e| now.saturating_duration_since(e.at) < self.ttl)
            .map(|e| DeadNode {
                uuid: e.uuid.to_vec(),
                at: e.at,
                failure: e.failure,
                count: e.count,
            })
            .collect()
    }
}

impl Default for DeadNodes {
    fn default() -> Self {
        DeadNodes::new(Self::DEFAULT_TTL)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn marks_expire_and_clear() {
        let d = DeadNodes::new(Duration::from_secs(10));
        let t0 = Instant::now();
        assert!(!d.is_dead(b"u1", || panic!("no clock needed while empty")));
        d.mark(b"u1", Failure::Connect, t0);
        assert!(d.is_dead(b"u1", || t0 + Duration::from_secs(9)));
        assert!(!d.is_dead(b"u2", || t0));
        assert!(
            !d.is_dead(b"u1", || t0 + Duration::from_secs(10)),
            "expired"
        );
        d.mark(b"u1", Failure::Checksum, t0 + Duration::from_secs(5));
        let s = d.snapshot(t0 + Duration::from_secs(6));
        assert_eq!(s.len(), 1);
        assert_eq!((s[0].failure, s[0].count), (Failure::Checksum, 2));
        // a later mark of another node drops the expired entry
        d.mark(b"u2", Failure::Io, t0 + Duration::from_secs(100));
        assert_eq!(d.snapshot(t0 + Duration::from_secs(100)).len(), 1);
        d.clear(b"u2");
        assert!(d.is_empty());
        d.mark(b"u3", Failure::Io, t0);
        d.clear_all();
        assert!(!d.is_dead(b"u3", || t0));
    }

    #[test]
    fn shared_across_threads() {
        let d = Arc::new(DeadNodes::default());
        let t0 = Instant::now();
        let hs: Vec<_> = (0..4)
            .map(|i| {
                let d = d.clone();
                std::thread::spawn(move || d.mark(format!("u{i}").as_bytes(), Failure::Io, t0))
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        for i in 0..4 {
            assert!(d.is_dead(format!("u{i}").as_bytes(), || t0));
        }
    }
}
