//! Container-token and NM-token master keys: generated, rolled, and handed to NodeManagers.
//!
//! Java's `RMContainerTokenSecretManager` / `NMTokenSecretManagerInRM` keep a current key and,
//! after each roll, a *next* key that becomes current after an activation delay of
//! 1.5 × the NM expiry interval. Registration hands out the current key. While a next key is
//! pending, every heartbeat whose `last_known_*_master_key` differs from it gets the next key
//! (ResourceTrackerService.populateKeys). Java dereferences the last-known key without a null
//! check (trap 3); we treat an absent one as "differs" and send the key.
//!
//! Key bytes come from an [`Entropy`] source: `/dev/urandom` in the server
//! ([`OsEntropy`]), a seeded generator in tests ([`SeededEntropy`]). Java's key length is
//! 64 bits (HmacSHA1 `KeyGenerator.init(64)`); we use the same 8 bytes.

use std::io::Read;

use crate::Error;
use hadoop_wire::entropy::EntropyError;

/// Bytes of a master key secret.
pub const KEY_BYTES: usize = 8;

pub use hadoop_wire::entropy::{Entropy, SeededEntropy};

/// `/dev/urandom`.
#[derive(Debug, Default)]
pub struct OsEntropy;

impl Entropy for OsEntropy {
    fn fill(&mut self, buf: &mut [u8]) -> Result<(), EntropyError> {
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(buf))
            .map_err(EntropyError)
    }
}

/// One master key (`MasterKeyProto`): the hadoop-wire type, so the keys this roller makes
/// are the ones `hadoop_wire::token::secret` mints and verifies with.
pub use hadoop_wire::token::secret::MasterKey;

/// The current key, the pending next key, and the schedule.
#[derive(Debug, Clone)]
pub struct KeyRoller {
    current: MasterKey,
    next: Option<MasterKey>,
    serial: i32,
    roll_interval_ms: u64,
    activation_delay_ms: u64,
    next_roll_at_ms: u64,
    activate_at_ms: Option<u64>,
}

impl KeyRoller {
    /// The first key, created at `now_ms`; the first roll is one interval later.
    pub fn new(
        entropy: &mut dyn Entropy,
        now_ms: u64,
        roll_interval_ms: u64,
        activation_delay_ms: u64,
    ) -> Result<KeyRoller, Error> {
        let mut s = [0u8; 4];
        entropy.fill(&mut s)?;
        let mut serial = i32::from_le_bytes(s) & 0x3fff_ffff;
        let current = new_key(entropy, &mut serial)?;
        Ok(KeyRoller {
            current,
            next: None,
            serial,
            roll_interval_ms,
            activation_delay_ms,
            next_roll_at_ms: now_ms.saturating_add(roll_interval_ms),
            activate_at_ms: None,
        })
    }

    pub fn current(&self) -> &MasterKey {
        &self.current
    }

    /// Takes over the keys of an earlier run (the RM state store): `current` is current
    /// again, a pending `next` is activated one activation delay from `now_ms`, and new keys'
    /// ids continue above both so that no id names two secrets.
    pub fn restore(&mut self, current: MasterKey, next: Option<MasterKey>, now_ms: u64) {
        let top = next
            .as_ref()
            .map_or(current.key_id, |n| n.key_id.max(current.key_id));
        self.serial = top.wrapping_add(1) & 0x7fff_ffff;
        self.activate_at_ms = next
            .as_ref()
            .map(|_| now_ms.saturating_add(self.activation_delay_ms));
        self.current = current;
        self.next = next;
        self.next_roll_at_ms = now_ms.saturating_add(self.roll_interval_ms);
    }

    pub fn next(&self) -> Option<&MasterKey> {
        self.next.as_ref()
    }

    /// Rolls and activates keys that are due. Returns true if anything changed.
    pub fn tick(&mut self, entropy: &mut dyn Entropy, now_ms: u64) -> Result<bool, Error> {
        let mut changed = false;
        if let Some(t) = self.activate_at_ms {
            if now_ms >= t {
                if let Some(k) = self.next.take() {
                    self.current = k;
                }
                self.activate_at_ms = None;
                changed = true;
            }
        }
        if now_ms >= self.next_roll_at_ms && self.next.is_none() {
            self.next = Some(new_key(entropy, &mut self.serial)?);
            self.activate_at_ms = Some(now_ms.saturating_add(self.activation_delay_ms));
            self.next_roll_at_ms = now_ms.saturating_add(self.roll_interval_ms);
            changed = true;
        }
        Ok(changed)
    }

    /// The key a heartbeat response must carry, given the NodeManager's last known key id:
    /// the pending next key if the NodeManager does not have it yet.
    #[inline]
    pub fn key_for_heartbeat(&self, last_known_id: Option<i32>) -> Option<&MasterKey> {
        match &self.next {
            Some(n) if last_known_id != Some(n.key_id) => Some(n),
            _ => None,
        }
    }
}

fn new_key(entropy: &mut dyn Entropy, serial: &mut i32) -> Result<MasterKey, Error> {
    let mut bytes = [0u8; KEY_BYTES];
    entropy.fill(&mut bytes)?;
    let key_id = *serial;
    *serial = serial.wrapping_add(1) & 0x7fff_ffff;
    Ok(MasterKey {
        key_id,
        bytes: bytes.to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn roll_then_activate_after_delay() {
        let mut e = SeededEntropy(7);
        let mut r = KeyRoller::new(&mut e, 0, 10_000, 1_500).unwrap();
        let first = r.current().clone();
        assert!(r.next().is_none());
        assert_eq!(r.key_for_heartbeat(None), None);
        assert!(!r.tick(&mut e, 9_999).unwrap());
        assert!(r.tick(&mut e, 10_000).unwrap());
        let next = r.next().unwrap().clone();
        assert_ne!(next.key_id, first.key_id);
        assert_eq!(r.current(), &first, "not active before the delay");
        assert_eq!(r.key_for_heartbeat(Some(first.key_id)), Some(&next));
        assert_eq!(
            r.key_for_heartbeat(None),
            Some(&next),
            "absent key: send (trap 3)"
        );
        assert_eq!(r.key_for_heartbeat(Some(next.key_id)), None);
        assert!(!r.tick(&mut e, 11_499).unwrap());
        assert!(r.tick(&mut e, 11_500).unwrap());
        assert_eq!(r.current(), &next);
        assert!(r.next().is_none());
        assert!(
            r.tick(&mut e, 20_000).unwrap(),
            "next roll one interval after the last"
        );
    }

    #[test]
    fn restored_keys_are_current_and_new_ids_continue_above_them() {
        let mut e = SeededEntropy(9);
        let mut r = KeyRoller::new(&mut e, 0, 10_000, 1_500).unwrap();
        let old = MasterKey {
            key_id: 0x7fff_fff0,
            bytes: vec![7; KEY_BYTES],
        };
        let pending = MasterKey {
            key_id: 0x7fff_fff1,
            bytes: vec![8; KEY_BYTES],
        };
        r.restore(old.clone(), Some(pending.clone()), 5_000);
        assert_eq!(r.current(), &old);
        assert_eq!(r.next(), Some(&pending));
        assert!(r.tick(&mut e, 6_500).unwrap(), "the pending key activates");
        assert_eq!(r.current(), &pending);
        assert!(
            r.tick(&mut e, 15_000).unwrap(),
            "rolls one interval after the restore"
        );
        let rolled = r.next().unwrap();
        assert_eq!(rolled.key_id, 0x7fff_fff2);
    }

    #[test]
    fn encoding_matches_prost() {
        let k = MasterKey {
            key_id: 123456,
            bytes: vec![1, 2, 3, 4, 5, 6, 7, 8],
        };
        let mut b = Vec::new();
        k.encode(&mut b);
        assert_eq!(b, k.to_proto().encode_to_vec());
        assert_eq!(b.len(), k.encoded_len());
    }
}
