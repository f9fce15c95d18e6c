//! RM delegation tokens (`RM_DELEGATION_TOKEN`): what a Kerberized Java RM's
//! `RMDelegationTokenSecretManager` (an `AbstractDelegationTokenSecretManager`) and
//! `ClientRMService`'s `getDelegationToken` / `renewDelegationToken` / `cancelDelegationToken`
//! do, checked against the Hadoop 3.5.0 jars.
//!
//! - **Identifier**: `RMDelegationTokenIdentifier` (kind `RM_DELEGATION_TOKEN`) extends
//!   `YARNDelegationTokenIdentifier`, whose `write` is `YARNDelegationTokenIdentifierProto`
//!   (`hadoop.yarn`: 1 owner, 2 renewer, 3 realUser strings, 4 issueDate, 5 maxDate int64,
//!   6 sequenceNumber, 7 masterKeyId int32) and whose `readFields` merges that protobuf from the
//!   stream (not the Writable layout of HDFS tokens). Java's builder only sets a field that
//!   differs from the builder's default, so empty strings and zeros are not written
//!   ([`RmDelegationTokenIdentifier::bytes`]). The renewer is stored as a short name.
//! - **Secret manager** ([`RmDelegationTokenSecretManager`]): keys rolled every
//!   `yarn.resourcemanager.delegation.key.update-interval` (1 day), tokens valid for
//!   `…token.max-lifetime` (7 days) and to be renewed within `…token.renew-interval` (1 day),
//!   expired tokens dropped every `…token.remove-scan-interval` (1 h); the refusals carry
//!   `AbstractDelegationTokenSecretManager`'s texts (`InvalidToken`, `AccessControlException`).
//!   Every change to keys and tokens is also queued as a [`DtOp`] for the state store (Java's
//!   `storeNewMasterKey` / `storeNewToken` / `updateStoredToken` / `removeStoredToken`), and
//!   [`RmDelegationTokenSecretManager::recover`] rebuilds the manager from what was stored (a
//!   token's password recomputed from its key, as Java's `addPersistedDelegationToken`).
//! - **Service**: the RM answers with an empty service; Java's client sets
//!   `ClientRMProxy.getRMDelegationTokenService` (`ip:port` of `yarn.resourcemanager.address`).
//! - **SASL** ([`RmDelegationSecrets`]): TOKEN (DIGEST-MD5) on the client port; the caller is the
//!   token's owner (its short name, by `hadoop.security.auth_to_local`), so the application and
//!   service ACLs then apply as for a Kerberos caller. An unknown (cancelled) or expired token
//!   is refused with Java's `InvalidToken` text.
//!
//! Not here: the RM's `DelegationTokenRenewer` (renewing applications' HDFS tokens).

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::RwLock;

use hadoop_wire::entropy::{Entropy, EntropyError};
use hadoop_wire::pb::hadoop::common::TokenProto;
use hadoop_wire::sasl::kerberos_name::AuthToLocal;
use hadoop_wire::sasl::message::AuthMethod;
use hadoop_wire::sasl::server::{TokenPassword, TokenSecrets};
use hadoop_wire::sasl::SaslError;
use hadoop_wire::token::delegation::{format_time, short_name, DelegationKey, MAX_KEYS};
use hadoop_wire::token::secret::{create_password, passwords_match, DEFAULT_KEY_BYTES};
use hadoop_wire::token::Limits;
use hadoop_wire::token::{Password, Token, TokenError, TokenIdentifier};
use hadoop_wire::yarn::{acp, APPLICATION_CLIENT_PROTOCOL, APPLICATION_CLIENT_VERSION};
use ipc::server::{Call, CallError, Registry, Reply};
use prost::Message;

use crate::app_service::AppsRt;
use crate::apps::exc;
use crate::dispatcher::wall_ms;
use crate::state_store::{
    DtKeyRec, DtKeyRemovedRec, DtTokenRec, DtTokenRemovedRec, Rec, Recovered,
};

/// `RMDelegationTokenIdentifier.KIND_NAME`.
pub const KIND_RM_DELEGATION: &str = "RM_DELEGATION_TOKEN";
/// `yarn.resourcemanager.delegation.key.update-interval` (ms).
pub const KEY_UPDATE_INTERVAL_KEY: &str = "yarn.resourcemanager.delegation.key.update-interval";
/// `yarn.resourcemanager.delegation.token.max-lifetime` (ms).
pub const MAX_LIFETIME_KEY: &str = "yarn.resourcemanager.delegation.token.max-lifetime";
/// `yarn.resourcemanager.delegation.token.renew-interval` (ms).
pub const RENEW_INTERVAL_KEY: &str = "yarn.resourcemanager.delegation.token.renew-interval";
/// `yarn.resourcemanager.delegation.token.remove-scan-interval` (a duration, `1h`).
pub const REMOVE_SCAN_INTERVAL_KEY: &str =
    "yarn.resourcemanager.delegation.token.remove-scan-interval";
/// `hotpath.rm.delegation.max-tokens`: most stored tokens (ours; Java has no cap).
pub const MAX_TOKENS_KEY: &str = "hotpath.rm.delegation.max-tokens";
/// Largest identifier we parse (a Java one is well under 1 KiB).
pub const MAX_IDENTIFIER_BYTES: usize = 64 << 10;

/// `ClientRMService`'s refusal of get/renew/cancel over a connection that is not Kerberos
/// (security on).
pub const NOT_KERBEROS_GET: &str =
    "Delegation Token can be issued only with kerberos authentication";
pub const NOT_KERBEROS_RENEW: &str =
    "Delegation Token can be renewed only with kerberos authentication";
pub const NOT_KERBEROS_CANCEL: &str =
    "Delegation Token can be cancelled only with kerberos authentication";

/// The manager's settings (Hadoop 3.5.0's yarn-default.xml by default).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RmDelegationConfig {
    pub key_update_interval_ms: i64,
    pub max_lifetime_ms: i64,
    pub renew_interval_ms: i64,
    pub remover_scan_interval_ms: i64,
    pub max_tokens: usize,
    /// Minutes east of UTC that Java's `Time.formatTime` prints in (the JVM's zone).
    pub utc_offset_minutes: i32,
}

impl Default for RmDelegationConfig {
    fn default() -> Self {
        RmDelegationConfig {
            key_update_interval_ms: 86_400_000,
            max_lifetime_ms: 604_800_000,
            renew_interval_ms: 86_400_000,
            remover_scan_interval_ms: 3_600_000,
            max_tokens: 1_000_000,
            utc_offset_minutes: 0,
        }
    }
}

/// Why the configuration or the manager could not be made.
#[derive(Debug, thiserror::Error)]
pub enum DtError {
    #[error("{key}: {reason}")]
    Config { key: &'static str, reason: String },
    #[error(transparent)]
    Entropy(#[from] EntropyError),
}

impl RmDelegationConfig {
    /// The settings from `conf` (defaults where unset).
    pub fn from_conf(conf: &conf::Configuration) -> Result<RmDelegationConfig, DtError> {
        let d = RmDelegationConfig::default();
        let ms = |key: &'static str, default: i64| -> Result<i64, DtError> {
            match conf.try_get(key) {
                Ok(None) => Ok(default),
                Ok(Some(_)) => conf
                    .get_duration_ms(key)
                    .map_err(|e| DtError::Config {
                        key,
                        reason: e.to_string(),
                    })
                    .and_then(|v| {
                        i64::try_from(v).map_err(|_| DtError::Config {
                            key,
                            reason: "too large".into(),
                        })
                    }),
                Err(e) => Err(DtError::Config {
                    key,
                    reason: e.to_string(),
                }),
            }
        };
        let cfg = RmDelegationConfig {
            key_update_interval_ms: ms(KEY_UPDATE_INTERVAL_KEY, d.key_update_interval_ms)?,
            max_lifetime_ms: ms(MAX_LIFETIME_KEY, d.max_lifetime_ms)?,
            renew_interval_ms: ms(RENEW_INTERVAL_KEY, d.renew_interval_ms)?,
            remover_scan_interval_ms: ms(REMOVE_SCAN_INTERVAL_KEY, d.remover_scan_interval_ms)?,
            max_tokens: match conf.try_get(MAX_TOKENS_KEY) {
                Ok(None) => d.max_tokens,
                _ => conf.get_u64(MAX_TOKENS_KEY).map_err(|e| DtError::Config {
                    key: MAX_TOKENS_KEY,
                    reason: e.to_string(),
                })? as usize,
            },
            utc_offset_minutes: 0,
        };
        cfg.check()?;
        Ok(cfg)
    }

    /// Positive intervals, and few enough keys alive at once.
    pub fn check(&self) -> Result<(), DtError> {
        let bad = |key: &'static str, reason: &str| {
            Err(DtError::Config {
                key,
                reason: reason.into(),
            })
        };
        for (key, v) in [
            (KEY_UPDATE_INTERVAL_KEY, self.key_update_interval_ms),
            (MAX_LIFETIME_KEY, self.max_lifetime_ms),
            (RENEW_INTERVAL_KEY, self.renew_interval_ms),
            (REMOVE_SCAN_INTERVAL_KEY, self.remover_scan_interval_ms),
        ] {
            if v <= 0 {
                return bad(key, "must be > 0");
            }
        }
        if self.max_lifetime_ms / self.key_update_interval_ms > (MAX_KEYS as i64 - 3) {
            return bad(
                KEY_UPDATE_INTERVAL_KEY,
                "max-lifetime / key.update-interval keeps too many keys alive",
            );
        }
        Ok(())
    }
}

/// `YARNDelegationTokenIdentifierProto` (hadoop.yarn).
#[derive(Clone, PartialEq, Message)]
pub struct YarnDelegationTokenIdentifierProto {
    #[prost(string, optional, tag = "1")]
    pub owner: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub renewer: Option<String>,
    #[prost(string, optional, tag = "3")]
    pub real_user: Option<String>,
    #[prost(int64, optional, tag = "4")]
    pub issue_date: Option<i64>,
    #[prost(int64, optional, tag = "5")]
    pub max_date: Option<i64>,
    #[prost(int32, optional, tag = "6")]
    pub sequence_number: Option<i32>,
    #[prost(int32, optional, tag = "7")]
    pub master_key_id: Option<i32>,
}

/// An `RMDelegationTokenIdentifier`: the fields, the bytes as received and the bytes Java's
/// `getBytes()` gives for them.
#[derive(Clone, PartialEq, Eq)]
pub struct RmDelegationTokenIdentifier {
    owner: String,
    renewer: String,
    real_user: String,
    issue_date: i64,
    max_date: i64,
    sequence_number: i32,
    master_key_id: i32,
    raw: Vec<u8>,
    bytes: Vec<u8>,
}

impl fmt::Debug for RmDelegationTokenIdentifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_java_string())
    }
}

fn nonempty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

fn nonzero<T: Default + PartialEq>(v: T) -> Option<T> {
    (v != T::default()).then_some(v)
}

impl RmDelegationTokenIdentifier {
    /// An identifier with these fields (its bytes as Java writes them).
    pub fn new(
        owner: &str,
        renewer: &str,
        real_user: &str,
        issue_date: i64,
        max_date: i64,
        sequence_number: i32,
        master_key_id: i32,
    ) -> RmDelegationTokenIdentifier {
        let mut id = RmDelegationTokenIdentifier {
            owner: owner.into(),
            renewer: renewer.into(),
            real_user: real_user.into(),
            issue_date,
            max_date,
            sequence_number,
            master_key_id,
            raw: Vec::new(),
            bytes: Vec::new(),
        };
        id.bytes = id.canonical();
        id.raw = id.bytes.clone();
        id
    }

    /// `setBuilderFields` + `build().writeTo`: only fields that differ from the defaults.
    fn canonical(&self) -> Vec<u8> {
        YarnDelegationTokenIdentifierProto {
            owner: nonempty(&self.owner),
            renewer: nonempty(&self.renewer),
            real_user: nonempty(&self.real_user),
            issue_date: nonzero(self.issue_date),
            max_date: nonzero(self.max_date),
            sequence_number: nonzero(self.sequence_number),
            master_key_id: nonzero(self.master_key_id),
        }
        .encode_to_vec()
    }

    pub fn owner(&self) -> &str {
        &self.owner
    }
    pub fn renewer(&self) -> &str {
        &self.renewer
    }
    pub fn real_user(&self) -> &str {
        &self.real_user
    }
    pub fn issue_date(&self) -> i64 {
        self.issue_date
    }
    pub fn max_date(&self) -> i64 {
        self.max_date
    }
    pub fn sequence_number(&self) -> i32 {
        self.sequence_number
    }
    pub fn master_key_id(&self) -> i32 {
        self.master_key_id
    }

    /// `AbstractDelegationTokenIdentifier.toString()`.
    pub fn to_java_string(&self) -> String {
        format!(
            "{KIND_RM_DELEGATION} owner={}, renewer={}, realUser={}, issueDate={}, maxDate={}, sequenceNumber={}, masterKeyId={}",
            self.owner,
            self.renewer,
            self.real_user,
            self.issue_date,
            self.max_date,
            self.sequence_number,
            self.master_key_id
        )
    }

    /// `formatTokenId`: `(` + `toString()` + `)`.
    pub fn format_token_id(&self) -> String {
        format!("({})", self.to_java_string())
    }
}

impl TokenIdentifier for RmDelegationTokenIdentifier {
    const KIND: &'static str = KIND_RM_DELEGATION;

    /// `readFields`: the protobuf merged from the whole stream.
    fn parse(raw: &[u8]) -> Result<Self, TokenError> {
        if raw.len() > MAX_IDENTIFIER_BYTES {
            return Err(TokenError::TooLong {
                what: "RMDelegationTokenIdentifier",
                len: raw.len() as u64,
                max: MAX_IDENTIFIER_BYTES,
            });
        }
        let p = YarnDelegationTokenIdentifierProto::decode(raw).map_err(|e| TokenError::Prost {
            what: "YARNDelegationTokenIdentifierProto",
            message: e.to_string(),
        })?;
        let mut id = RmDelegationTokenIdentifier::new(
            p.owner.as_deref().unwrap_or(""),
            p.renewer.as_deref().unwrap_or(""),
            p.real_user.as_deref().unwrap_or(""),
            p.issue_date.unwrap_or(0),
            p.max_date.unwrap_or(0),
            p.sequence_number.unwrap_or(0),
            p.master_key_id.unwrap_or(0),
        );
        id.raw = raw.to_vec();
        Ok(id)
    }
    fn raw(&self) -> &[u8] {
        &self.raw
    }
    fn bytes(&self) -> &[u8] {
        &self.bytes
    }
    /// The owner (`getUser()`'s user name; a proxied token's effective user).
    fn user(&self) -> Option<String> {
        nonempty(&self.owner)
    }
    fn key_id(&self) -> i32 {
        self.master_key_id
    }
}

/// A change to keys or tokens, for the state store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DtOp {
    /// A key made or updated (its expiry moved at a roll).
    Key(DelegationKey),
    /// An expired key dropped.
    KeyRemoved(i32),
    /// A token stored or renewed: its canonical identifier bytes, renew date, and the
    /// sequence number counter after it.
    Token {
        identifier: Vec<u8>,
        renew_date: i64,
        sequence: i32,
    },
    /// A token cancelled or expired.
    TokenRemoved(Vec<u8>),
}

#[derive(Clone, PartialEq, Eq)]
struct TokenInfo {
    renew_date: i64,
    password: Password,
}

/// `RMDelegationTokenSecretManager` (see the module docs). No clock: `now_ms` is passed in.
pub struct RmDelegationTokenSecretManager {
    cfg: RmDelegationConfig,
    keys: BTreeMap<i32, DelegationKey>,
    current: Option<DelegationKey>,
    key_serial: i32,
    sequence: i32,
    /// By canonical identifier bytes (the fields Java's `equals` compares).
    tokens: HashMap<Vec<u8>, TokenInfo>,
    last_key_update: i64,
    last_cleanup: i64,
    ops: Vec<DtOp>,
}

impl fmt::Debug for RmDelegationTokenSecretManager {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RmDelegationTokenSecretManager")
            .field("cfg", &self.cfg)
            .field("keys", &self.keys.keys().collect::<Vec<_>>())
            .field("sequence", &self.sequence)
            .field("tokens", &self.tokens.len())
            .finish_non_exhaustive()
    }
}

impl RmDelegationTokenSecretManager {
    /// A manager with nothing yet: [`recover`](Self::recover) what was stored, then
    /// [`start`](Self::start).
    pub fn new(cfg: RmDelegationConfig) -> Result<RmDelegationTokenSecretManager, DtError> {
        cfg.check()?;
        Ok(RmDelegationTokenSecretManager {
            cfg,
            keys: BTreeMap::new(),
            current: None,
            key_serial: 0,
            sequence: 0,
            tokens: HashMap::new(),
            last_key_update: 0,
            last_cleanup: 0,
            ops: Vec::new(),
        })
    }

    pub fn config(&self) -> &RmDelegationConfig {
        &self.cfg
    }

    /// Rebuilds from the store: keys (the key counter follows the largest id), tokens (their
    /// passwords recomputed from their keys; one whose key is gone is dropped, as Java's
    /// `addPersistedDelegationToken` refuses it) and the sequence counter.
    pub fn recover(
        &mut self,
        keys: impl IntoIterator<Item = DelegationKey>,
        tokens: impl IntoIterator<Item = (Vec<u8>, i64)>,
        sequence: i32,
    ) -> usize {
        for k in keys {
            self.key_serial = self.key_serial.max(k.key_id);
            self.keys.insert(k.key_id, k);
        }
        let mut dropped = 0;
        for (raw, renew_date) in tokens {
            let Ok(id) = RmDelegationTokenIdentifier::parse(&raw) else {
                dropped += 1;
                continue;
            };
            let Some(key) = self.keys.get(&id.master_key_id) else {
                dropped += 1;
                continue;
            };
            let password = create_password(&key.bytes, id.bytes());
            self.sequence = self.sequence.max(id.sequence_number);
            self.tokens.insert(
                id.bytes.clone(),
                TokenInfo {
                    renew_date,
                    password,
                },
            );
        }
        self.sequence = self.sequence.max(sequence);
        dropped
    }

    /// `startThreads`: a new current key, then the remover's first pass (which rolls again,
    /// so a fresh RM's first token carries key 2, as Java's).
    pub fn start(&mut self, entropy: &mut dyn Entropy, now_ms: i64) -> Result<(), DtError> {
        self.update_current_key(entropy, now_ms)?;
        self.tick(entropy, now_ms)?;
        Ok(())
    }

    /// The changes since the last call, for the state store.
    pub fn take_ops(&mut self) -> Vec<DtOp> {
        std::mem::take(&mut self.ops)
    }

    /// Everything the store must hold now: keys, tokens (with the sequence counter).
    pub fn snapshot(&self) -> Vec<DtOp> {
        let mut out: Vec<DtOp> = self.keys.values().cloned().map(DtOp::Key).collect();
        let mut toks: Vec<_> = self.tokens.iter().collect();
        toks.sort_by(|a, b| a.0.cmp(b.0));
        out.extend(toks.into_iter().map(|(b, i)| DtOp::Token {
            identifier: b.clone(),
            renew_date: i.renew_date,
            sequence: self.sequence,
        }));
        out
    }

    /// One pass of `ExpiredTokenRemover`: roll the key once `key_update_interval` has passed,
    /// drop expired tokens once per scan interval. Returns the sequence numbers dropped.
    pub fn tick(&mut self, entropy: &mut dyn Entropy, now_ms: i64) -> Result<Vec<i32>, DtError> {
        if self
            .last_key_update
            .saturating_add(self.cfg.key_update_interval_ms)
            < now_ms
        {
            self.roll_master_key(entropy, now_ms)?;
            self.last_key_update = now_ms;
        }
        let mut removed = Vec::new();
        if self
            .last_cleanup
            .saturating_add(self.cfg.remover_scan_interval_ms)
            < now_ms
        {
            removed = self.remove_expired_tokens(now_ms);
            self.last_cleanup = now_ms;
        }
        Ok(removed)
    }

    fn update_current_key(
        &mut self,
        entropy: &mut dyn Entropy,
        now_ms: i64,
    ) -> Result<(), EntropyError> {
        let mut bytes = vec![0u8; DEFAULT_KEY_BYTES];
        entropy.fill(&mut bytes)?;
        self.key_serial = self.key_serial.wrapping_add(1);
        let key = DelegationKey {
            key_id: self.key_serial,
            expiry_date: now_ms
                .saturating_add(self.cfg.key_update_interval_ms)
                .saturating_add(self.cfg.max_lifetime_ms),
            bytes,
        };
        self.keys.insert(key.key_id, key.clone());
        self.ops.push(DtOp::Key(key.clone()));
        self.current = Some(key);
        while self.keys.len() > MAX_KEYS {
            let current = self.key_serial;
            let Some((&oldest, _)) = self.keys.iter().find(|(&id, _)| id != current) else {
                break;
            };
            self.keys.remove(&oldest);
            self.ops.push(DtOp::KeyRemoved(oldest));
        }
        Ok(())
    }

    /// `rollMasterKey`: drop expired keys, let the current one expire `max_lifetime` from now,
    /// make a new current key.
    pub fn roll_master_key(
        &mut self,
        entropy: &mut dyn Entropy,
        now_ms: i64,
    ) -> Result<(), EntropyError> {
        let expired: Vec<i32> = self
            .keys
            .iter()
            .filter(|(_, k)| k.expiry_date < now_ms)
            .map(|(&id, _)| id)
            .collect();
        for id in expired {
            self.keys.remove(&id);
            self.ops.push(DtOp::KeyRemoved(id));
        }
        if let Some(cur) = self.current.as_mut() {
            cur.expiry_date = now_ms.saturating_add(self.cfg.max_lifetime_ms);
            self.keys.insert(cur.key_id, cur.clone());
            self.ops.push(DtOp::Key(cur.clone()));
        }
        self.update_current_key(entropy, now_ms)
    }

    /// `removeExpiredToken`.
    pub fn remove_expired_tokens(&mut self, now_ms: i64) -> Vec<i32> {
        let mut removed = Vec::new();
        let ops = &mut self.ops;
        self.tokens.retain(|bytes, info| {
            if info.renew_date < now_ms {
                if let Ok(id) = RmDelegationTokenIdentifier::parse(bytes) {
                    removed.push(id.sequence_number);
                }
                ops.push(DtOp::TokenRemoved(bytes.clone()));
                false
            } else {
                true
            }
        });
        removed.sort_unstable();
        removed
    }

    pub fn current_key(&self) -> Option<&DelegationKey> {
        self.current.as_ref()
    }

    pub fn all_keys(&self) -> impl Iterator<Item = &DelegationKey> {
        self.keys.values()
    }

    pub fn token_count(&self) -> usize {
        self.tokens.len()
    }

    /// The renew date of a stored token.
    pub fn renew_date(&self, id: &RmDelegationTokenIdentifier) -> Option<i64> {
        self.tokens.get(id.bytes()).map(|i| i.renew_date)
    }

    pub fn format_time(&self, ms: i64) -> String {
        format_time(ms, self.cfg.utc_offset_minutes)
    }

    /// `getDelegationToken`: a token for `owner` (the caller's user name) renewable by
    /// `renewer` (a short name), issued now; empty service.
    pub fn create_token(
        &mut self,
        owner: &str,
        renewer: &str,
        real_user: &str,
        now_ms: i64,
    ) -> Result<(RmDelegationTokenIdentifier, Token), TokenError> {
        if self.tokens.len() >= self.cfg.max_tokens {
            return Err(TokenError::Full {
                what: "stored RM delegation tokens",
                max: self.cfg.max_tokens,
            });
        }
        let Some(key) = self.current.as_ref() else {
            return Err(TokenError::NoCurrentKey);
        };
        self.sequence = self.sequence.wrapping_add(1);
        let id = RmDelegationTokenIdentifier::new(
            owner,
            renewer,
            real_user,
            now_ms,
            now_ms.saturating_add(self.cfg.max_lifetime_ms),
            self.sequence,
            key.key_id,
        );
        let password = create_password(&key.bytes, id.bytes());
        let renew_date = now_ms.saturating_add(self.cfg.renew_interval_ms);
        self.tokens.insert(
            id.bytes.clone(),
            TokenInfo {
                renew_date,
                password,
            },
        );
        self.ops.push(DtOp::Token {
            identifier: id.bytes.clone(),
            renew_date,
            sequence: self.sequence,
        });
        let token = Token::for_identifier(&id, &password, "");
        Ok((id, token))
    }

    /// `checkToken` + `retrievePassword`.
    pub fn retrieve_password(
        &self,
        id: &RmDelegationTokenIdentifier,
        now_ms: i64,
    ) -> Result<Password, TokenError> {
        let Some(info) = self.tokens.get(id.bytes()) else {
            return Err(TokenError::InvalidToken(format!(
                "Token for real user: {}, can't be found in cache",
                id.real_user
            )));
        };
        if info.renew_date < now_ms {
            return Err(TokenError::InvalidToken(format!(
                "Token {} has expired, current time: {} expected renewal time: {}",
                id.real_user,
                self.format_time(now_ms),
                self.format_time(info.renew_date)
            )));
        }
        Ok(info.password)
    }

    /// `renewToken(token, renewer)`: Java's checks in its order; the new renew date,
    /// `min(maxDate, now + renew_interval)`.
    pub fn renew_token(
        &mut self,
        token: &Token,
        renewer: &str,
        now_ms: i64,
    ) -> Result<i64, TokenError> {
        let id = RmDelegationTokenIdentifier::parse(&token.identifier)?;
        let fmt_id = id.format_token_id();
        if id.max_date < now_ms {
            return Err(TokenError::InvalidToken(format!(
                "{renewer} tried to renew an expired token {fmt_id} max expiration date: {} currentTime: {}",
                self.format_time(id.max_date),
                self.format_time(now_ms)
            )));
        }
        if id.renewer.is_empty() {
            return Err(TokenError::AccessControl(format!(
                "{renewer} tried to renew a token {fmt_id} without a renewer"
            )));
        }
        if id.renewer != renewer {
            return Err(TokenError::AccessControl(format!(
                "{renewer} tries to renew a token {fmt_id} with non-matching renewer {}",
                id.renewer
            )));
        }
        let Some(key) = self.keys.get(&id.master_key_id) else {
            return Err(TokenError::InvalidToken(format!(
                "Unable to find master key for keyId={} from cache. Failed to renew an unexpired token {fmt_id} with sequenceNumber={}",
                id.master_key_id, id.sequence_number
            )));
        };
        let password = create_password(&key.bytes, &token.identifier);
        if !passwords_match(&password, &token.password) {
            return Err(TokenError::AccessControl(format!(
                "{renewer} is trying to renew a token {fmt_id} with wrong password"
            )));
        }
        let renew_date = id
            .max_date
            .min(now_ms.saturating_add(self.cfg.renew_interval_ms));
        let Some(info) = self.tokens.get_mut(id.bytes()) else {
            return Err(TokenError::InvalidToken(format!(
                "Renewal request for unknown token {fmt_id}"
            )));
        };
        *info = TokenInfo {
            renew_date,
            password,
        };
        self.ops.push(DtOp::Token {
            identifier: id.bytes.clone(),
            renew_date,
            sequence: self.sequence,
        });
        Ok(renew_date)
    }

    /// `cancelToken(token, canceller)`: the owner (`canceller`, the caller's full user name)
    /// or the renewer (by `canceller_short`, its short name) may cancel.
    pub fn cancel_token(
        &mut self,
        token: &Token,
        canceller: &str,
        canceller_short: &str,
    ) -> Result<RmDelegationTokenIdentifier, TokenError> {
        let id = RmDelegationTokenIdentifier::parse(&token.identifier)?;
        if id.owner.is_empty() {
            return Err(TokenError::InvalidToken(format!(
                "Token with no owner {}",
                id.format_token_id()
            )));
        }
        if canceller != id.owner && (id.renewer.is_empty() || canceller_short != id.renewer) {
            return Err(TokenError::AccessControl(format!(
                "{canceller} is not authorized to cancel the token {}",
                id.format_token_id()
            )));
        }
        if self.tokens.remove(id.bytes()).is_none() {
            return Err(TokenError::InvalidToken(format!(
                "Token not found {}",
                id.format_token_id()
            )));
        }
        self.ops.push(DtOp::TokenRemoved(id.bytes.clone()));
        Ok(id)
    }
}

/// Maps a user name to its short name: `hadoop.security.auth_to_local` when Kerberized, else
/// the part before the first `/` or `@`.
pub struct ShortNames(Option<AuthToLocal>);

impl ShortNames {
    pub fn new(rules: Option<AuthToLocal>) -> ShortNames {
        ShortNames(rules)
    }

    /// `HadoopKerberosName.getShortName` (a name the rules do not map stays whole).
    pub fn short(&self, name: &str) -> String {
        match &self.0 {
            Some(r) if name.contains('@') || name.contains('/') => r
                .short_name(name)
                .unwrap_or_else(|_| short_name(name).to_string()),
            _ => short_name(name).to_string(),
        }
    }
}

/// The manager behind a lock, with the clock the SASL path reads and the short-name mapping
/// of token owners; the TOKEN secrets of the client port.
pub struct RmDelegationSecrets {
    manager: RwLock<RmDelegationTokenSecretManager>,
    clock: Box<dyn Fn() -> i64 + Send + Sync>,
    names: ShortNames,
}

impl fmt::Debug for RmDelegationSecrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RmDelegationSecrets")
            .finish_non_exhaustive()
    }
}

impl RmDelegationSecrets {
    pub fn new(
        manager: RmDelegationTokenSecretManager,
        clock: Box<dyn Fn() -> i64 + Send + Sync>,
        names: ShortNames,
    ) -> RmDelegationSecrets {
        RmDelegationSecrets {
            manager: RwLock::new(manager),
            clock,
            names,
        }
    }

    pub fn read(&self) -> std::sync::RwLockReadGuard<'_, RmDelegationTokenSecretManager> {
        self.manager.read().unwrap_or_else(|e| e.into_inner())
    }

    pub fn write(&self) -> std::sync::RwLockWriteGuard<'_, RmDelegationTokenSecretManager> {
        self.manager.write().unwrap_or_else(|e| e.into_inner())
    }

    pub fn now(&self) -> i64 {
        (self.clock)()
    }

    /// The short name of `name`.
    pub fn short(&self, name: &str) -> String {
        self.names.short(name)
    }
}

impl TokenSecrets for RmDelegationSecrets {
    fn retrieve(&self, identifier: &[u8]) -> Result<TokenPassword, SaslError> {
        let id = RmDelegationTokenIdentifier::parse(identifier)
            .map_err(|_| SaslError::InvalidToken("Can't de-serialize tokenIdentifier".into()))?;
        let password = self.read().retrieve_password(&id, self.now())?;
        Ok(TokenPassword {
            password: password.to_vec(),
            user: self.short(id.owner()),
        })
    }
}

/// A [`DtOp`] as its state-store record.
pub fn to_rec(op: DtOp) -> Rec {
    match op {
        DtOp::Key(k) => Rec::DtKey(DtKeyRec {
            key_id: k.key_id,
            expiry_date: k.expiry_date,
            bytes: k.bytes,
        }),
        DtOp::KeyRemoved(key_id) => Rec::DtKeyRemoved(DtKeyRemovedRec { key_id }),
        DtOp::Token {
            identifier,
            renew_date,
            sequence,
        } => Rec::DtToken(DtTokenRec {
            identifier,
            renew_date,
            sequence,
        }),
        DtOp::TokenRemoved(identifier) => Rec::DtTokenRemoved(DtTokenRemovedRec { identifier }),
    }
}

/// Rebuilds `m` from what the state store replayed ([`RmDelegationTokenSecretManager::recover`]);
/// returns the tokens dropped (no key left for them, or undecodable).
pub fn recover_from(m: &mut RmDelegationTokenSecretManager, rec: &Recovered) -> usize {
    let keys = rec.dt_keys.values().map(|k| DelegationKey {
        key_id: k.key_id,
        expiry_date: k.expiry_date,
        bytes: k.bytes.clone(),
    });
    let tokens = rec.dt_tokens.iter().map(|(i, r)| (i.clone(), *r));
    m.recover(keys, tokens, rec.dt_sequence)
}

/// `hadoop.common.GetDelegationTokenRequestProto`.
#[derive(Clone, PartialEq, Message)]
pub struct GetDelegationTokenRequestProto {
    #[prost(string, required, tag = "1")]
    pub renewer: String,
}

/// `hadoop.common.GetDelegationTokenResponseProto`.
#[derive(Clone, PartialEq, Message)]
pub struct GetDelegationTokenResponseProto {
    #[prost(message, optional, tag = "1")]
    pub token: Option<TokenProto>,
}

/// `hadoop.common.RenewDelegationTokenRequestProto` and `CancelDelegationTokenRequestProto`.
#[derive(Clone, PartialEq, Message)]
pub struct TokenRequestProto {
    #[prost(message, required, tag = "1")]
    pub token: TokenProto,
}

/// `hadoop.common.RenewDelegationTokenResponseProto`.
#[derive(Clone, PartialEq, Message)]
pub struct RenewDelegationTokenResponseProto {
    #[prost(uint64, required, tag = "1")]
    pub new_expiry_time: u64,
}

/// `ClientRMService`'s errors reach the client as a `YarnException` wrapping the
/// `IOException` (`RPCUtil.getRemoteException`): its message starts with the cause's class.
fn wrapped(class: &str, message: impl fmt::Display) -> CallError {
    CallError::application(exc::YARN, format!("{class}: {message}"))
}

fn token_error(e: TokenError) -> CallError {
    wrapped(e.java_class(), &e)
}

/// `isAllowedDelegationTokenOp`: with security on, only a Kerberos-authenticated caller.
fn allowed(secure: bool, c: &Call<'_>, text: &str) -> Result<(), CallError> {
    if secure && c.auth_method != AuthMethod::Kerberos {
        return Err(wrapped("java.io.IOException", text));
    }
    Ok(())
}

/// The caller's user name as Java's `ugi.getUserName()`: the principal for KERBEROS, else the
/// connection's user.
fn user_name<'a>(c: &Call<'a>) -> &'a str {
    c.principal.or(c.user).unwrap_or("dr.who")
}

fn decode_token(c: &Call<'_>) -> Result<Token, CallError> {
    let req = TokenRequestProto::decode(c.request).map_err(CallError::invalid_request)?;
    Token::from_proto(req.token, &Limits::DEFAULT).map_err(token_error)
}

fn no_secrets() -> CallError {
    wrapped(
        "java.io.IOException",
        "no RM delegation token secret manager",
    )
}

/// `getDelegationToken`, `renewDelegationToken`, `cancelDelegationToken` on
/// ApplicationClientProtocolPB, as `ClientRMService` answers them. `secure`: the client port
/// is Kerberized (Java's `UserGroupInformation.isSecurityEnabled()`). `login_user`: the RM's
/// own principal (a caller with that name renews as the token's renewer, Java's
/// `getRenewerForToken`).
pub fn register(reg: &mut Registry, rt: &AppsRt, secure: bool, login_user: Option<String>) {
    let (p, v) = (APPLICATION_CLIENT_PROTOCOL, APPLICATION_CLIENT_VERSION);
    let r = rt.clone();
    reg.register(
        p,
        v,
        acp::GET_DELEGATION_TOKEN,
        move |c: &Call<'_>, reply: &mut Reply<'_, '_>| {
            allowed(secure, c, NOT_KERBEROS_GET)?;
            let req: GetDelegationTokenRequestProto =
                Message::decode(c.request).map_err(CallError::invalid_request)?;
            let d = r.delegation().ok_or_else(no_secrets)?.clone();
            let owner = user_name(c);
            // The identifier keeps the renewer's short name (HadoopKerberosName).
            let renewer = d.short(&req.renewer);
            let now = wall_ms() as i64;
            let (id, token) = r
                .with_delegation(|m| m.create_token(owner, &renewer, "", now))
                .ok_or_else(no_secrets)?
                .map_err(token_error)?;
            tracing::info!(
                "Created RM delegation token {} for {owner}",
                id.format_token_id()
            );
            reply
                .message(&GetDelegationTokenResponseProto {
                    token: Some(token.to_proto()),
                })
                .map_err(CallError::from)
        },
    );
    let r = rt.clone();
    reg.register(
        p,
        v,
        acp::RENEW_DELEGATION_TOKEN,
        move |c: &Call<'_>, reply: &mut Reply<'_, '_>| {
            allowed(secure, c, NOT_KERBEROS_RENEW)?;
            let token = decode_token(c)?;
            let d = r.delegation().ok_or_else(no_secrets)?.clone();
            let name = user_name(c);
            let renewer = if login_user.as_deref() == Some(name) {
                // "we can always renew our own tokens"
                RmDelegationTokenIdentifier::parse(&token.identifier)
                    .map_err(token_error)?
                    .renewer
            } else {
                d.short(name)
            };
            let now = wall_ms() as i64;
            let next = r
                .with_delegation(|m| m.renew_token(&token, &renewer, now))
                .ok_or_else(no_secrets)?
                .map_err(token_error)?;
            reply
                .message(&RenewDelegationTokenResponseProto {
                    new_expiry_time: next.max(0) as u64,
                })
                .map_err(CallError::from)
        },
    );
    let r = rt.clone();
    reg.register(
        p,
        v,
        acp::CANCEL_DELEGATION_TOKEN,
        move |c: &Call<'_>, reply: &mut Reply<'_, '_>| {
            allowed(secure, c, NOT_KERBEROS_CANCEL)?;
            let token = decode_token(c)?;
            let d = r.delegation().ok_or_else(no_secrets)?.clone();
            let name = user_name(c);
            let short = d.short(name);
            let id = r
                .with_delegation(|m| m.cancel_token(&token, name, &short))
                .ok_or_else(no_secrets)?
                .map_err(token_error)?;
            tracing::info!(
                "RM delegation token {} cancelled by {name}",
                id.format_token_id()
            );
            reply
                .message(&CancelDelegationTokenResponseProto {})
                .map_err(CallError::from)
        },
    );
}

/// `hadoop.common.CancelDelegationTokenResponseProto`.
#[derive(Clone, PartialEq, Message)]
pub struct CancelDelegationTokenResponseProto {}

#[cfg(test)]
mod tests {
    use super::*;
    use hadoop_wire::entropy::SeededEntropy;

    const T0: i64 = 1_711_242_400_403;
    const DAY: i64 = 86_400_000;

    fn manager() -> (RmDelegationTokenSecretManager, SeededEntropy) {
        let mut e = SeededEntropy(5);
        let mut m = RmDelegationTokenSecretManager::new(RmDelegationConfig::default()).unwrap();
        m.start(&mut e, T0).unwrap();
        (m, e)
    }

    #[test]
    fn identifier_is_the_yarn_protobuf_with_defaults_left_out() {
        let id =
            RmDelegationTokenIdentifier::new("alice@EXAMPLE.COM", "yarn", "", T0, T0 + 1, 1, 2);
        // owner(1), renewer(2), no realUser, issueDate(4), maxDate(5), seq(6), key(7).
        let b = id.bytes();
        assert_eq!(b[0], 0x0a);
        assert_eq!(&b[2..19], b"alice@EXAMPLE.COM");
        assert_eq!(&b[19..25], b"\x12\x04yarn");
        assert_eq!(b[25], 0x20, "realUser is not written when empty");
        let back = RmDelegationTokenIdentifier::parse(b).unwrap();
        assert_eq!(back, id);
        assert_eq!(back.user().as_deref(), Some("alice@EXAMPLE.COM"));
        assert_eq!(
            id.format_token_id(),
            "(RM_DELEGATION_TOKEN owner=alice@EXAMPLE.COM, renewer=yarn, realUser=, issueDate=1711242400403, maxDate=1711242400404, sequenceNumber=1, masterKeyId=2)"
        );
        // Explicit defaults on the wire parse to the same fields; bytes() drops them again.
        let mut padded = b.to_vec();
        padded.extend_from_slice(&[0x1a, 0x00]);
        let p = RmDelegationTokenIdentifier::parse(&padded).unwrap();
        assert_eq!(p.bytes(), b);
        assert_eq!(p.raw(), &padded[..]);
        assert!(RmDelegationTokenIdentifier::parse(&[0x0a, 0x05, 1]).is_err());
        assert!(RmDelegationTokenIdentifier::parse(&vec![0u8; MAX_IDENTIFIER_BYTES + 1]).is_err());
    }

    #[test]
    fn first_token_carries_key_two_and_verifies() {
        let (mut m, _) = manager();
        let (id, t) = m.create_token("alice@EXAMPLE.COM", "yarn", "", T0).unwrap();
        assert_eq!((id.sequence_number(), id.master_key_id()), (1, 2));
        assert_eq!((id.issue_date(), id.max_date()), (T0, T0 + 7 * DAY));
        assert_eq!(t.kind, KIND_RM_DELEGATION);
        assert_eq!(t.service, "");
        assert_eq!(
            t.password,
            create_password(&m.current_key().unwrap().bytes, &t.identifier).to_vec()
        );
        assert_eq!(
            m.retrieve_password(&id, T0 + DAY).unwrap().to_vec(),
            t.password
        );
        assert_eq!(
            m.retrieve_password(&id, T0 + DAY + 1).unwrap_err().to_string(),
            "Token  has expired, current time: 2024-03-25 01:06:40,404+0000 expected renewal time: 2024-03-25 01:06:40,403+0000"
        );
    }

    #[test]
    fn renew_and_cancel_rules() {
        let (mut m, mut e) = manager();
        let (id, t) = m.create_token("alice@EXAMPLE.COM", "yarn", "", T0).unwrap();
        let f = id.format_token_id();
        assert_eq!(
            m.renew_token(&t, "bob", T0).unwrap_err(),
            TokenError::AccessControl(format!(
                "bob tries to renew a token {f} with non-matching renewer yarn"
            ))
        );
        assert_eq!(
            m.renew_token(&t, "yarn", T0 + DAY / 2).unwrap(),
            T0 + DAY + DAY / 2
        );
        m.tick(&mut e, T0 + DAY + 1).unwrap();
        assert_eq!(m.current_key().unwrap().key_id, 3);
        assert_eq!(
            m.renew_token(&t, "yarn", T0 + 6 * DAY + 5).unwrap(),
            T0 + 7 * DAY
        );
        let mut forged = t.clone();
        forged.password[0] ^= 1;
        assert_eq!(
            m.renew_token(&forged, "yarn", T0 + 6 * DAY).unwrap_err(),
            TokenError::AccessControl(format!(
                "yarn is trying to renew a token {f} with wrong password"
            ))
        );
        assert!(matches!(
            m.renew_token(&t, "yarn", T0 + 7 * DAY + 1),
            Err(TokenError::InvalidToken(s)) if s.starts_with("yarn tried to renew an expired token")
        ));
        assert_eq!(
            m.cancel_token(&t, "bob@EXAMPLE.COM", "bob")
                .unwrap_err()
                .to_string(),
            format!("bob@EXAMPLE.COM is not authorized to cancel the token {f}")
        );
        // The owner by its full name, the renewer by its short name.
        m.cancel_token(&t, "yarn/rm@EXAMPLE.COM", "yarn").unwrap();
        assert_eq!(
            m.cancel_token(&t, "alice@EXAMPLE.COM", "alice")
                .unwrap_err()
                .to_string(),
            format!("Token not found {f}")
        );
        assert_eq!(
            m.retrieve_password(&id, T0).unwrap_err().to_string(),
            "Token for real user: , can't be found in cache"
        );
        let (_, t2) = m.create_token("alice@EXAMPLE.COM", "", "", T0).unwrap();
        assert!(matches!(
            m.renew_token(&t2, "", T0),
            Err(TokenError::AccessControl(s)) if s.ends_with("without a renewer")
        ));
        m.cancel_token(&t2, "alice@EXAMPLE.COM", "alice").unwrap();
    }

    #[test]
    fn expired_tokens_and_keys_go_and_are_recorded() {
        let (mut m, mut e) = manager();
        let ops = m.take_ops();
        assert_eq!(
            ops.iter().filter(|o| matches!(o, DtOp::Key(_))).count(),
            3,
            "key 1, key 1 re-expired at the roll, key 2: {ops:?}"
        );
        let (a, _) = m.create_token("a", "yarn", "", T0).unwrap();
        let (_, tb) = m.create_token("b", "yarn", "", T0).unwrap();
        m.renew_token(&tb, "yarn", T0 + DAY - 1).unwrap();
        m.take_ops();
        assert!(m.tick(&mut e, T0 + 1000).unwrap().is_empty());
        assert_eq!(
            m.tick(&mut e, T0 + DAY + 1).unwrap(),
            vec![a.sequence_number()]
        );
        let ops = m.take_ops();
        assert!(
            ops.contains(&DtOp::TokenRemoved(a.bytes().to_vec())),
            "{ops:?}"
        );
        let mut now = T0 + DAY + 1;
        for _ in 0..9 {
            now += DAY + 1;
            m.tick(&mut e, now).unwrap();
        }
        let ops = m.take_ops();
        assert!(ops.contains(&DtOp::KeyRemoved(1)) && ops.contains(&DtOp::KeyRemoved(2)));
        assert!(m.all_keys().all(|k| k.expiry_date >= now));
    }

    #[test]
    fn recovery_rebuilds_passwords_and_continues_counters() {
        let (mut m, _) = manager();
        let (id, t) = m.create_token("alice", "yarn", "", T0).unwrap();
        let (gone, tg) = m.create_token("alice", "yarn", "", T0).unwrap();
        m.cancel_token(&tg, "alice", "alice").unwrap();
        // Replay the ops as the store would (later ops win).
        let mut keys = BTreeMap::new();
        let mut tokens = BTreeMap::new();
        let mut seq = 0;
        for op in m.take_ops() {
            match op {
                DtOp::Key(k) => {
                    keys.insert(k.key_id, k);
                }
                DtOp::KeyRemoved(k) => {
                    keys.remove(&k);
                }
                DtOp::Token {
                    identifier,
                    renew_date,
                    sequence,
                } => {
                    seq = seq.max(sequence);
                    tokens.insert(identifier, renew_date);
                }
                DtOp::TokenRemoved(i) => {
                    tokens.remove(&i);
                }
            }
        }
        let mut r = RmDelegationTokenSecretManager::new(RmDelegationConfig::default()).unwrap();
        assert_eq!(r.recover(keys.into_values(), tokens, seq), 0);
        let mut e = SeededEntropy(77);
        r.start(&mut e, T0 + 10).unwrap();
        assert_eq!(
            r.retrieve_password(&id, T0 + 10).unwrap().to_vec(),
            t.password
        );
        assert!(r.retrieve_password(&gone, T0 + 10).is_err());
        assert!(
            r.current_key().unwrap().key_id > 2,
            "new keys continue after the stored ones"
        );
        let (n, _) = r.create_token("bob", "yarn", "", T0 + 10).unwrap();
        assert_eq!(n.sequence_number(), 3);
        // A token whose key is gone is dropped.
        let mut x = RmDelegationTokenSecretManager::new(RmDelegationConfig::default()).unwrap();
        assert_eq!(
            x.recover(Vec::new(), vec![(id.bytes().to_vec(), T0 + DAY)], 1),
            1
        );
    }

    #[test]
    fn sasl_secrets_name_the_owner_by_its_short_name() {
        let (mut m, _) = manager();
        let (_, t) = m.create_token("alice@EXAMPLE.COM", "yarn", "", T0).unwrap();
        let now = std::sync::Arc::new(std::sync::atomic::AtomicI64::new(T0));
        let n2 = now.clone();
        let s = RmDelegationSecrets::new(
            m,
            Box::new(move || n2.load(std::sync::atomic::Ordering::SeqCst)),
            ShortNames::new(Some(AuthToLocal::default_rules("EXAMPLE.COM"))),
        );
        let got = s.retrieve(&t.identifier).unwrap();
        assert_eq!(got.user, "alice");
        assert_eq!(got.password, t.password);
        now.store(T0 + DAY + 1, std::sync::atomic::Ordering::SeqCst);
        assert!(matches!(
            s.retrieve(&t.identifier),
            Err(SaslError::InvalidToken(m)) if m.contains("has expired")
        ));
        assert_eq!(
            s.retrieve(&[0xff]).unwrap_err(),
            SaslError::InvalidToken("Can't de-serialize tokenIdentifier".into())
        );
    }

    #[test]
    fn config_from_conf() {
        let mut c = conf::Configuration::new();
        assert_eq!(
            RmDelegationConfig::from_conf(&c).unwrap(),
            RmDelegationConfig::default()
        );
        c.set(RENEW_INTERVAL_KEY, "2000");
        c.set(REMOVE_SCAN_INTERVAL_KEY, "1s");
        let d = RmDelegationConfig::from_conf(&c).unwrap();
        assert_eq!(
            (d.renew_interval_ms, d.remover_scan_interval_ms),
            (2000, 1000)
        );
        c.set(MAX_LIFETIME_KEY, "0");
        assert!(RmDelegationConfig::from_conf(&c).is_err());
    }
}
