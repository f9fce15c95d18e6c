//! ClientToAM tokens on a secure RM (Java's `ClientToAMTokenSecretManagerInRM`): each attempt
//! gets a master key, handed to its AM in the `registerApplicationMaster` response
//! (`client_to_am_token_master_key`); a client whose application report shows a RUNNING
//! attempt gets a token for it (`client_to_am_token`: kind `YARN_CLIENT_TOKEN`, identifier
//! `ClientToAMTokenIdentifierProto { attempt, client name }`, password the HMAC-SHA1 of the
//! identifier under the attempt's key, service empty for the client to set), which the AM
//! verifies with the key it was given. MapReduce's AM and client (`mapred job -status`, the job
//! client's progress calls) need both on a Kerberized cluster.
//!
//! Java makes 8-byte keys (`KeyGenerator.init(64)`, bits); the AM takes the key bytes as they
//! come, so these are 32 bytes (an HMAC-SHA1 key of its block's half). Keys live as long as
//! their application is not finished. With recovery they are in the state store
//! ([`crate::state_store::Rec::ClientToAmKey`], as Java's `RMStateStore` keeps them with the
//! attempt): after a restart, clients of an AM that outlived it get tokens it verifies.

use std::collections::HashMap;
use std::sync::Mutex;

use hadoop_wire::pb::hadoop::common::TokenProto;
use hadoop_wire::pb::hadoop::yarn::ClientToAmTokenIdentifierProto;
use hadoop_wire::token::identifier::attempt_to_proto;
use hadoop_wire::token::secret::create_password;
use hadoop_wire::yarn::ids::{AppId, AttemptId};
use prost::Message;

use crate::master_key::{Entropy, OsEntropy};

/// The token kind (`ClientToAMTokenIdentifier.KIND_NAME`).
pub const KIND: &str = "YARN_CLIENT_TOKEN";

/// Bytes of an attempt's master key.
pub const KEY_BYTES: usize = 32;

/// The attempts' master keys (see the module docs).
#[derive(Debug, Default)]
pub struct ClientToAmKeys {
    keys: Mutex<HashMap<AttemptId, Vec<u8>>>,
}

impl ClientToAmKeys {
    pub fn new() -> ClientToAmKeys {
        ClientToAmKeys::default()
    }

    /// The master key of `attempt`, made now if it has none; `None` if no random bytes could
    /// be read. Keys of applications for which `live` says false are forgotten first.
    pub fn key_for(&self, attempt: AttemptId, live: impl Fn(AppId) -> bool) -> Option<Vec<u8>> {
        let mut m = self.keys.lock().unwrap_or_else(|p| p.into_inner());
        m.retain(|a, _| live(a.app));
        if let Some(k) = m.get(&attempt) {
            return Some(k.clone());
        }
        let mut k = vec![0u8; KEY_BYTES];
        OsEntropy.fill(&mut k).ok()?;
        m.insert(attempt, k.clone());
        Some(k)
    }

    /// [`key_for`](Self::key_for), and whether the key was made by this call (then it is to be
    /// stored).
    pub fn key_for_fresh(
        &self,
        attempt: AttemptId,
        live: impl Fn(AppId) -> bool,
    ) -> Option<(Vec<u8>, bool)> {
        let had = self
            .keys
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(&attempt);
        self.key_for(attempt, live).map(|k| (k, !had))
    }

    /// Puts back a key the state store kept (recovery).
    pub fn restore(&self, attempt: AttemptId, key: Vec<u8>) {
        self.keys
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(attempt, key);
    }

    /// The keys of applications `live` says are not finished, in attempt order (for the
    /// state store's compaction).
    pub fn snapshot(&self, live: impl Fn(AppId) -> bool) -> Vec<(AttemptId, Vec<u8>)> {
        let m = self.keys.lock().unwrap_or_else(|p| p.into_inner());
        let mut v: Vec<(AttemptId, Vec<u8>)> = m
            .iter()
            .filter(|(a, _)| live(a.app))
            .map(|(a, k)| (*a, k.clone()))
            .collect();
        v.sort_by_key(|(a, _)| (a.app.cluster_timestamp, a.app.id, a.attempt));
        v
    }

    /// A token of `attempt` for `client`, if the attempt has a key.
    pub fn token(&self, attempt: AttemptId, client: &str) -> Option<TokenProto> {
        let m = self.keys.lock().unwrap_or_else(|p| p.into_inner());
        let key = m.get(&attempt)?;
        Some(token_with(key, attempt, client))
    }
}

/// The ClientToAM token of `attempt` for `client` under `key`.
pub fn token_with(key: &[u8], attempt: AttemptId, client: &str) -> TokenProto {
    let identifier = ClientToAmTokenIdentifierProto {
        app_attempt_id: Some(attempt_to_proto(&attempt)),
        client_name: Some(client.to_string()),
    }
    .encode_to_vec();
    let password = create_password(key, &identifier).to_vec();
    TokenProto {
        identifier,
        password,
        kind: KIND.into(),
        service: String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_verify_under_their_attempts_key() {
        let k = ClientToAmKeys::new();
        let a = AttemptId {
            app: AppId::new(1_700_000_000_000, 4),
            attempt: 1,
        };
        assert!(
            k.token(a, "alice").is_none(),
            "no key before the AM registered"
        );
        let key = k.key_for(a, |_| true).unwrap();
        assert_eq!(key.len(), KEY_BYTES);
        assert_eq!(k.key_for(a, |_| true).unwrap(), key, "one key per attempt");
        let t = k.token(a, "alice").unwrap();
        assert_eq!(t.kind, "YARN_CLIENT_TOKEN");
        let id = ClientToAmTokenIdentifierProto::decode(&t.identifier[..]).unwrap();
        assert_eq!(id.client_name.as_deref(), Some("alice"));
        assert_eq!(id.app_attempt_id, Some(attempt_to_proto(&a)));
        assert_eq!(t.password, create_password(&key, &t.identifier).to_vec());
        // a finished application's key is forgotten
        let b = AttemptId {
            app: AppId::new(1_700_000_000_000, 5),
            attempt: 1,
        };
        k.key_for(b, |app| app != a.app).unwrap();
        assert!(k.token(a, "alice").is_none());
    }

    #[test]
    fn fresh_keys_are_told_apart_and_restored_keys_make_the_same_tokens() {
        let k = ClientToAmKeys::new();
        let a = AttemptId {
            app: AppId::new(1_700_000_000_000, 4),
            attempt: 2,
        };
        let (key, fresh) = k.key_for_fresh(a, |_| true).unwrap();
        assert!(fresh);
        assert_eq!(k.key_for_fresh(a, |_| true).unwrap(), (key.clone(), false));
        let before = k.token(a, "bob").unwrap();
        // What the state store keeps, put back into a new RM's keys.
        let snap = k.snapshot(|_| true);
        assert_eq!(snap, vec![(a, key.clone())]);
        assert!(k.snapshot(|app| app != a.app).is_empty());
        let after = ClientToAmKeys::new();
        for (at, key) in snap {
            after.restore(at, key);
        }
        assert_eq!(after.token(a, "bob").unwrap(), before);
        assert_eq!(after.key_for_fresh(a, |_| true).unwrap(), (key, false));
    }
}
