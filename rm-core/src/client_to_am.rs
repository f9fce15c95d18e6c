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
//! their application is not finished; they are not in the state store, so an AM that outlives
//! an RM restart keeps its key but clients get no new tokens for it (Java recovers them).

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
}
