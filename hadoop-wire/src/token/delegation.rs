//! Delegation-token secret managers, sans-IO: Java's
//! `org.apache.hadoop.security.token.delegation.AbstractDelegationTokenSecretManager` once, for
//! every identifier encoding that uses it (checked against the Hadoop 3.5.0 bytecode): the
//! NameNode's HDFS tokens (Writable identifiers) and the RM's `RM_DELEGATION_TOKEN`s
//! (`YARNDelegationTokenIdentifierProto`).
//!
//! How the types connect:
//!
//! - [`DelegationIdentifier`] is what the manager needs of an identifier: Java's
//!   `AbstractDelegationTokenIdentifier` fields ([`DelegationFields`]), a constructor that
//!   encodes them as Java writes them, and `toString()`. [`DelegationTokenIdentifier`] (HDFS, Writable) and
//!   [`RmDelegationTokenIdentifier`](super::rm_delegation::RmDelegationTokenIdentifier) (YARN,
//!   protobuf) implement it.
//! - [`DelegationConfig`] holds the three intervals (`dfs.namenode.delegation.*`,
//!   `yarn.resourcemanager.delegation.*`; the same defaults), the token remover's scan interval
//!   (one hour), the cap on stored tokens, and the UTC offset Java's `Time.formatTime` prints
//!   with (the JVM's default time zone).
//! - [`DelegationKey`] is Java's `DelegationKey`: id, expiry date and the raw HMAC key bytes
//!   (8 bytes, `KeyGenerator(HmacSHA1).init(64)`), drawn from an [`Entropy`].
//! - [`DelegationSecretManager`] keeps every key that has not expired (`allKeys`), the
//!   current key, the key and sequence counters, and the stored tokens (`currentTokens`:
//!   identifier → renew date and password). [`new`](DelegationSecretManager::new) is the
//!   constructor; [`recover`](DelegationSecretManager::recover) takes back what a store kept;
//!   [`start`](DelegationSecretManager::start) is `startThreads` followed by the remover
//!   thread's first pass, which rolls at once (so a fresh manager's first token carries key
//!   id 2, as on a real NameNode or RM); [`tick`](DelegationSecretManager::tick) is one pass of
//!   `ExpiredTokenRemover`: roll the key when `key-update-interval` has passed (dropping
//!   expired keys), drop expired tokens once per scan interval.
//! - Tokens carry `HMAC-SHA1(current key, identifier bytes)` passwords. `create_token`
//!   (`createPassword`), `retrieve_password` (`checkToken`: known and not past its renew date),
//!   `verify_token`, `renew_token` (the password is recomputed over the token's identifier
//!   bytes *as received*, as Java does), `cancel_token`.
//! - [`DelegationStore`] is where a manager persists its keys and tokens (Java's
//!   `storeNewMasterKey`, `storeNewToken`, `updateStoredToken` and their removals): every
//!   change goes through it as it is made. The NameNode's is [`Unpersisted`]; the RM's writes
//!   its state store.
//! - [`DelegationTokenSecrets`] puts a manager behind a lock with a clock the caller supplies
//!   and implements [`TokenSecrets`] for `ipc`'s SASL server.
//!
//! Every refusal carries Java's text and class: [`TokenError::InvalidToken`]
//! (`SecretManager$InvalidToken`) or [`TokenError::AccessControl`]. Identifiers in the texts
//! are printed by [`format_token_id`] (`"(" + identifier.toString() + ")"`), dates by
//! [`format_time`] (`yyyy-MM-dd HH:mm:ss,SSSZ`).
//!
//! Time is passed in (`now_ms`, milliseconds since the epoch); there is no clock here.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::marker::PhantomData;
use std::sync::RwLock;

use super::identifier::DelegationTokenIdentifier;
use super::secret::{create_password, passwords_match, Password, DEFAULT_KEY_BYTES};
use super::{Token, TokenError, TokenIdentifier};
use crate::entropy::{Entropy, EntropyError};
use crate::sasl::server::{TokenPassword, TokenSecrets};
use crate::sasl::SaslError;

/// `dfs.namenode.delegation.key.update-interval` (ms).
pub const KEY_UPDATE_INTERVAL_KEY: &str = "dfs.namenode.delegation.key.update-interval";
/// `dfs.namenode.delegation.token.max-lifetime` (ms).
pub const MAX_LIFETIME_KEY: &str = "dfs.namenode.delegation.token.max-lifetime";
/// `dfs.namenode.delegation.token.renew-interval` (ms).
pub const RENEW_INTERVAL_KEY: &str = "dfs.namenode.delegation.token.renew-interval";
/// Default key update interval: one day.
pub const DEFAULT_KEY_UPDATE_INTERVAL_MS: i64 = 86_400_000;
/// Default maximum token lifetime: seven days.
pub const DEFAULT_MAX_LIFETIME_MS: i64 = 604_800_000;
/// Default renew interval: one day.
pub const DEFAULT_RENEW_INTERVAL_MS: i64 = 86_400_000;
/// `FSNamesystem.DELEGATION_TOKEN_REMOVER_SCAN_INTERVAL` and the RM's
/// `yarn.resourcemanager.delegation.token.remove-scan-interval` default: one hour.
pub const DEFAULT_REMOVER_SCAN_INTERVAL_MS: i64 = 3_600_000;
/// Default cap on stored tokens.
pub const DEFAULT_MAX_TOKENS: usize = 1_000_000;
/// Most delegation keys kept at once (with the defaults there are about nine).
pub const MAX_KEYS: usize = 10_000;

/// The manager's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DelegationConfig {
    pub key_update_interval_ms: i64,
    pub max_lifetime_ms: i64,
    pub renew_interval_ms: i64,
    pub remover_scan_interval_ms: i64,
    /// Most stored tokens; creating one more is [`TokenError::Full`].
    pub max_tokens: usize,
    /// The UTC offset of the time zone Java's `Time.formatTime` would use (the JVM default
    /// zone), in minutes east of UTC.
    pub utc_offset_minutes: i32,
}

impl Default for DelegationConfig {
    /// Hadoop 3.5.0's defaults (hdfs-default.xml and yarn-default.xml agree), times printed
    /// in UTC.
    fn default() -> Self {
        DelegationConfig {
            key_update_interval_ms: DEFAULT_KEY_UPDATE_INTERVAL_MS,
            max_lifetime_ms: DEFAULT_MAX_LIFETIME_MS,
            renew_interval_ms: DEFAULT_RENEW_INTERVAL_MS,
            remover_scan_interval_ms: DEFAULT_REMOVER_SCAN_INTERVAL_MS,
            max_tokens: DEFAULT_MAX_TOKENS,
            utc_offset_minutes: 0,
        }
    }
}

/// A setting of [`DelegationConfig`], as named in a [`ConfigError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    KeyUpdateInterval,
    MaxLifetime,
    RenewInterval,
    RemoverScanInterval,
    UtcOffset,
}

/// A [`DelegationConfig`] the manager refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("delegation token configuration: {setting:?} {reason}")]
pub struct ConfigError {
    /// The setting at fault (for two that do not fit together, the key update interval).
    pub setting: Setting,
    pub reason: &'static str,
}

impl DelegationConfig {
    /// Positive intervals, and few enough keys alive at once (a key lives for
    /// `key_update_interval + max_lifetime` and one is made per interval).
    pub fn check(&self) -> Result<(), ConfigError> {
        let bad = |setting, reason| Err(ConfigError { setting, reason });
        for (setting, v) in [
            (Setting::KeyUpdateInterval, self.key_update_interval_ms),
            (Setting::MaxLifetime, self.max_lifetime_ms),
            (Setting::RenewInterval, self.renew_interval_ms),
            (Setting::RemoverScanInterval, self.remover_scan_interval_ms),
        ] {
            if v <= 0 {
                return bad(setting, "must be > 0");
            }
        }
        if self.max_lifetime_ms / self.key_update_interval_ms > (MAX_KEYS as i64 - 3) {
            return bad(
                Setting::KeyUpdateInterval,
                "max-lifetime / key.update-interval keeps too many keys alive",
            );
        }
        if self.utc_offset_minutes.abs() > 18 * 60 {
            return bad(Setting::UtcOffset, "UTC offset beyond 18 hours");
        }
        Ok(())
    }
}

/// Java's `DelegationKey`: a key id, its expiry date and the raw HMAC key.
#[derive(Clone, PartialEq, Eq)]
pub struct DelegationKey {
    pub key_id: i32,
    pub expiry_date: i64,
    pub bytes: Vec<u8>,
}

/// Prints the id and expiry, never the key.
impl fmt::Debug for DelegationKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DelegationKey")
            .field("key_id", &self.key_id)
            .field("expiry_date", &self.expiry_date)
            .field("bytes", &format_args!("{} bytes", self.bytes.len()))
            .finish()
    }
}

/// `DelegationTokenInformation`: when the token must be renewed by, and its password.
#[derive(Clone, PartialEq, Eq)]
struct TokenInfo {
    renew_date: i64,
    password: Password,
}

/// Why [`DelegationSecretManager::new`], [`start`](DelegationSecretManager::start) or
/// [`tick`](DelegationSecretManager::tick) failed.
#[derive(Debug, thiserror::Error)]
pub enum DelegationError {
    #[error(transparent)]
    Entropy(#[from] EntropyError),
    #[error(transparent)]
    Config(#[from] ConfigError),
}

/// Java's `Time.formatTime(ms)`: `SimpleDateFormat("yyyy-MM-dd HH:mm:ss,SSSZ")` in a zone at
/// `utc_offset_minutes` east of UTC, e.g. `2024-03-24 01:06:40,403+0000`. Proleptic
/// Gregorian: Java's calendar differs before 1582-10-15 and for years before 1.
pub fn format_time(ms: i64, utc_offset_minutes: i32) -> String {
    let local = ms as i128 + utc_offset_minutes as i128 * 60_000;
    let days = local.div_euclid(86_400_000);
    let in_day = local.rem_euclid(86_400_000);
    // |ms| < 2^63 and the offset is at most 18 h, so the day count fits an i64.
    let (year, month, day) = crate::time::civil_from_days(days as i64);
    let (h, m, s, milli) = (
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1000 % 60,
        in_day % 1000,
    );
    let sign = if utc_offset_minutes < 0 { '-' } else { '+' };
    let off = utc_offset_minutes.unsigned_abs();
    format!(
        "{year:04}-{month:02}-{day:02} {h:02}:{m:02}:{s:02},{milli:03}{sign}{:02}{:02}",
        off / 60,
        off % 60
    )
}

/// The short name of a user (`KerberosName.getShortName` under the `DEFAULT` rule, for a
/// principal of the default realm): the part before the first `/` or `@`; a plain user name
/// is itself. Custom `auth_to_local` rules are not applied.
pub fn short_name(user: &str) -> &str {
    user.split(['/', '@']).next().unwrap_or(user)
}

/// The fields of Java's `AbstractDelegationTokenIdentifier`, whatever their encoding.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DelegationFields {
    pub owner: String,
    /// A short name (Java's `setRenewer` shortens a Kerberos principal first).
    pub renewer: String,
    pub real_user: String,
    pub issue_date: i64,
    pub max_date: i64,
    pub sequence_number: i32,
    pub master_key_id: i32,
}

impl DelegationFields {
    /// `AbstractDelegationTokenIdentifier.toString()` under `kind`: `<kind> owner=…,
    /// renewer=…, realUser=…, issueDate=…, maxDate=…, sequenceNumber=…, masterKeyId=…`.
    pub fn java_string(&self, kind: &str) -> String {
        format!(
            "{kind} owner={}, renewer={}, realUser={}, issueDate={}, maxDate={}, sequenceNumber={}, masterKeyId={}",
            self.owner,
            self.renewer,
            self.real_user,
            self.issue_date,
            self.max_date,
            self.sequence_number,
            self.master_key_id
        )
    }
}

/// What a delegation-token secret manager needs of its identifier: the
/// [`DelegationFields`] and their encoding ([`TokenIdentifier::bytes`], which the password
/// covers and the stored tokens are keyed by).
pub trait DelegationIdentifier: TokenIdentifier {
    /// What the stored tokens are called in [`TokenError::Full`].
    const STORED: &'static str;
    /// An identifier with these fields, encoded as Java writes them.
    fn from_fields(fields: DelegationFields) -> Self;
    fn fields(&self) -> &DelegationFields;
    /// The identifier's `toString()`; `None` where Java throws.
    fn to_java_string(&self) -> Option<String>;

    fn owner(&self) -> &str {
        &self.fields().owner
    }
    fn renewer(&self) -> &str {
        &self.fields().renewer
    }
    fn real_user(&self) -> &str {
        &self.fields().real_user
    }
    fn issue_date(&self) -> i64 {
        self.fields().issue_date
    }
    fn max_date(&self) -> i64 {
        self.fields().max_date
    }
    fn sequence_number(&self) -> i32 {
        self.fields().sequence_number
    }
    fn master_key_id(&self) -> i32 {
        self.fields().master_key_id
    }
}

/// The identifier's `toString()` (see [`DelegationIdentifier::to_java_string`]); for HDFS
/// `token for <short owner>: ` followed by `AbstractDelegationTokenIdentifier.toString()`,
/// `None` for an empty owner (Java has no user).
pub fn identifier_to_string<I: DelegationIdentifier>(id: &I) -> Option<String> {
    id.to_java_string()
}

/// `formatTokenId`: `(<identifier.toString()>)`, or `( SequenceNumber=<n> )` when `toString`
/// throws.
pub fn format_token_id<I: DelegationIdentifier>(id: &I) -> String {
    match id.to_java_string() {
        Some(s) => format!("({s})"),
        None => format!("( SequenceNumber={} )", id.sequence_number()),
    }
}

/// Where a secret manager persists its keys and tokens, told of every change as it is made
/// (Java's `storeNewMasterKey` / `updateDelegationKey`, `removeStoredMasterKey`,
/// `storeNewToken` / `updateStoredToken`, `removeStoredToken`).
pub trait DelegationStore {
    /// A key made, or updated (its expiry moved at a roll).
    fn store_key(&mut self, key: &DelegationKey);
    /// An expired key dropped.
    fn remove_key(&mut self, key_id: i32);
    /// A token stored or renewed: its identifier's canonical bytes, its renew date and the
    /// sequence-number counter after it.
    fn store_token(&mut self, identifier: &[u8], renew_date: i64, sequence: i32);
    /// A token cancelled or expired.
    fn remove_token(&mut self, identifier: &[u8]);
}

/// A manager that keeps its keys and tokens in memory only (the NameNode's edit log is not
/// ours).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Unpersisted;

impl DelegationStore for Unpersisted {
    fn store_key(&mut self, _: &DelegationKey) {}
    fn remove_key(&mut self, _: i32) {}
    fn store_token(&mut self, _: &[u8], _: i64, _: i32) {}
    fn remove_token(&mut self, _: &[u8]) {}
}

/// The NameNode's secret manager: HDFS identifiers, nothing persisted.
pub type DelegationTokenSecretManager = DelegationSecretManager<DelegationTokenIdentifier>;

/// `AbstractDelegationTokenSecretManager` over identifiers `I`, persisting through `S`.
pub struct DelegationSecretManager<I, S = Unpersisted> {
    cfg: DelegationConfig,
    /// `allKeys`, by id (the current key among them).
    keys: BTreeMap<i32, DelegationKey>,
    /// `currentKey` (none before [`start`](Self::start)).
    current: Option<DelegationKey>,
    /// `currentId`: the id of the last key made.
    key_serial: i32,
    /// `delegationTokenSequenceNumber`.
    sequence: i32,
    /// `currentTokens`, keyed by the identifier's canonical bytes (the fields Java's
    /// `equals` compares).
    tokens: HashMap<Vec<u8>, TokenInfo>,
    last_key_update: i64,
    last_cleanup: i64,
    store: S,
    identifier: PhantomData<fn() -> I>,
}

impl<I, S: Clone> Clone for DelegationSecretManager<I, S> {
    fn clone(&self) -> Self {
        DelegationSecretManager {
            cfg: self.cfg,
            keys: self.keys.clone(),
            current: self.current.clone(),
            key_serial: self.key_serial,
            sequence: self.sequence,
            tokens: self.tokens.clone(),
            last_key_update: self.last_key_update,
            last_cleanup: self.last_cleanup,
            store: self.store.clone(),
            identifier: PhantomData,
        }
    }
}

/// Prints the settings, key ids and counters, never keys or passwords.
impl<I, S> fmt::Debug for DelegationSecretManager<I, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DelegationSecretManager")
            .field("cfg", &self.cfg)
            .field("keys", &self.keys.keys().collect::<Vec<_>>())
            .field("current", &self.current.as_ref().map(|k| k.key_id))
            .field("sequence", &self.sequence)
            .field("tokens", &self.tokens.len())
            .finish_non_exhaustive()
    }
}

impl<I: DelegationIdentifier, S: DelegationStore + Default> DelegationSecretManager<I, S> {
    /// A manager with no keys and no tokens yet: [`recover`](Self::recover) what a store kept,
    /// then [`start`](Self::start).
    pub fn new(cfg: DelegationConfig) -> Result<Self, DelegationError> {
        Self::with_store(cfg, S::default())
    }

    /// [`new`](Self::new), then [`start`](Self::start) at `now_ms`.
    pub fn started(
        cfg: DelegationConfig,
        entropy: &mut dyn Entropy,
        now_ms: i64,
    ) -> Result<Self, DelegationError> {
        let mut m = Self::new(cfg)?;
        m.start(entropy, now_ms)?;
        Ok(m)
    }
}

impl<I: DelegationIdentifier, S: DelegationStore> DelegationSecretManager<I, S> {
    /// A manager with no keys and no tokens yet, persisting through `store`.
    pub fn with_store(cfg: DelegationConfig, store: S) -> Result<Self, DelegationError> {
        cfg.check()?;
        Ok(DelegationSecretManager {
            cfg,
            keys: BTreeMap::new(),
            current: None,
            key_serial: 0,
            sequence: 0,
            tokens: HashMap::new(),
            last_key_update: 0,
            last_cleanup: 0,
            store,
            identifier: PhantomData,
        })
    }

    pub fn config(&self) -> &DelegationConfig {
        &self.cfg
    }

    /// The store the manager persists through.
    pub fn store(&self) -> &S {
        &self.store
    }

    pub fn store_mut(&mut self) -> &mut S {
        &mut self.store
    }

    /// `formatTime` in this manager's zone.
    pub fn format_time(&self, ms: i64) -> String {
        format_time(ms, self.cfg.utc_offset_minutes)
    }

    /// Rebuilds from a store: keys (the key counter follows the largest id), tokens (their
    /// passwords recomputed from their keys; one whose key is gone, or whose identifier does
    /// not parse, is dropped, as Java's `addPersistedDelegationToken` refuses it) and the
    /// sequence counter. Returns how many tokens were dropped. Nothing is written to the store.
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
        for (bytes, renew_date) in tokens {
            let Ok(id) = I::parse(&bytes) else {
                dropped += 1;
                continue;
            };
            let Some(key) = self.keys.get(&id.master_key_id()) else {
                dropped += 1;
                continue;
            };
            let password = create_password(&key.bytes, id.bytes());
            self.sequence = self.sequence.max(id.sequence_number());
            self.tokens.insert(
                id.bytes().to_vec(),
                TokenInfo {
                    renew_date,
                    password,
                },
            );
        }
        self.sequence = self.sequence.max(sequence);
        dropped
    }

    /// `startThreads`: a new current key, then the remover's first pass, which rolls again
    /// and sets the first token scan (so a fresh manager's first token carries key 2).
    pub fn start(&mut self, entropy: &mut dyn Entropy, now_ms: i64) -> Result<(), DelegationError> {
        self.update_current_key(entropy, now_ms)?;
        self.tick(entropy, now_ms)?;
        Ok(())
    }

    /// Writes everything the manager holds now into `store` (keys, then tokens in identifier
    /// order, each with the current sequence counter): what a store rewritten from scratch
    /// must hold.
    pub fn persist_all(&self, store: &mut impl DelegationStore) {
        for k in self.keys.values() {
            store.store_key(k);
        }
        let mut toks: Vec<_> = self.tokens.iter().collect();
        toks.sort_by(|a, b| a.0.cmp(b.0));
        for (bytes, info) in toks {
            store.store_token(bytes, info.renew_date, self.sequence);
        }
    }

    /// One pass of `ExpiredTokenRemover`: rolls the key once `key_update_interval` has passed
    /// since the last roll, and removes expired tokens once per scan interval. Returns the
    /// identifiers' sequence numbers of the tokens it removed, in order.
    pub fn tick(
        &mut self,
        entropy: &mut dyn Entropy,
        now_ms: i64,
    ) -> Result<Vec<i32>, DelegationError> {
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

    /// `updateCurrentKey`: a new key `++currentId`, expiring `key_update_interval +
    /// max_lifetime` from now, becomes current.
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
        self.store.store_key(&key);
        self.current = Some(key);
        // Bounded by DelegationConfig::check; this only guards against a clock that keeps
        // jumping backwards (keys never expire then).
        while self.keys.len() > MAX_KEYS {
            let current = self.key_serial;
            let Some((&oldest, _)) = self.keys.iter().find(|(&id, _)| id != current) else {
                break;
            };
            self.keys.remove(&oldest);
            self.store.remove_key(oldest);
        }
        Ok(())
    }

    /// `rollMasterKey`: removes expired keys, lets the current key expire `max_lifetime` from
    /// now (tokens it signed can still be renewed until then), and makes a new current key.
    pub fn roll_master_key(
        &mut self,
        entropy: &mut dyn Entropy,
        now_ms: i64,
    ) -> Result<(), EntropyError> {
        self.remove_expired_keys(now_ms);
        // Java: currentKey.setExpiryDate(now + maxLifetime); updateDelegationKey(currentKey),
        // which puts it back into allKeys.
        if let Some(cur) = self.current.as_mut() {
            cur.expiry_date = now_ms.saturating_add(self.cfg.max_lifetime_ms);
            self.keys.insert(cur.key_id, cur.clone());
            self.store.store_key(cur);
        }
        self.update_current_key(entropy, now_ms)
    }

    /// `removeExpiredKeys`: drops every key whose expiry date is before now.
    fn remove_expired_keys(&mut self, now_ms: i64) {
        let store = &mut self.store;
        self.keys.retain(|&id, k| {
            let keep = k.expiry_date >= now_ms;
            if !keep {
                store.remove_key(id);
            }
            keep
        });
    }

    /// `removeExpiredToken`: drops every token whose renew date is before now; returns their
    /// sequence numbers, in order.
    pub fn remove_expired_tokens(&mut self, now_ms: i64) -> Vec<i32> {
        let mut removed = Vec::new();
        let store = &mut self.store;
        self.tokens.retain(|bytes, info| {
            if info.renew_date < now_ms {
                if let Ok(id) = I::parse(bytes) {
                    removed.push(id.sequence_number());
                }
                store.remove_token(bytes);
                false
            } else {
                true
            }
        });
        removed.sort_unstable();
        removed
    }

    /// The key new tokens are signed with (none before [`start`](Self::start)).
    pub fn current_key(&self) -> Option<&DelegationKey> {
        self.current.as_ref()
    }

    /// `getDelegationKey`.
    pub fn key(&self, key_id: i32) -> Option<&DelegationKey> {
        self.keys.get(&key_id)
    }

    /// `getAllKeys`.
    pub fn all_keys(&self) -> impl Iterator<Item = &DelegationKey> {
        self.keys.values()
    }

    /// Tokens stored now.
    pub fn token_count(&self) -> usize {
        self.tokens.len()
    }

    /// The renew date of a stored token.
    pub fn renew_date(&self, id: &I) -> Option<i64> {
        self.tokens.get(id.bytes()).map(|i| i.renew_date)
    }

    /// `getDelegationToken` + `createPassword`: a token for `owner` (renewable by `renewer`, a
    /// short name; `real_user` empty unless a proxy asked), issued now, valid for
    /// `max_lifetime`, to be renewed within `renew_interval`. Kind `I::KIND`, empty service
    /// (the client sets it).
    pub fn create_token(
        &mut self,
        owner: &str,
        renewer: &str,
        real_user: &str,
        now_ms: i64,
    ) -> Result<(I, Token), TokenError> {
        if self.tokens.len() >= self.cfg.max_tokens {
            return Err(TokenError::Full {
                what: I::STORED,
                max: self.cfg.max_tokens,
            });
        }
        let Some(key) = self.current.as_ref() else {
            return Err(TokenError::NoCurrentKey);
        };
        self.sequence = self.sequence.wrapping_add(1);
        let id = I::from_fields(DelegationFields {
            owner: owner.into(),
            renewer: renewer.into(),
            real_user: real_user.into(),
            issue_date: now_ms,
            max_date: now_ms.saturating_add(self.cfg.max_lifetime_ms),
            sequence_number: self.sequence,
            master_key_id: key.key_id,
        });
        let password = create_password(&key.bytes, id.bytes());
        let renew_date = now_ms.saturating_add(self.cfg.renew_interval_ms);
        self.tokens.insert(
            id.bytes().to_vec(),
            TokenInfo {
                renew_date,
                password,
            },
        );
        self.store
            .store_token(id.bytes(), renew_date, self.sequence);
        let token = Token::for_identifier(&id, &password, "");
        Ok((id, token))
    }

    /// `checkToken`.
    fn check_token(&self, id: &I, now_ms: i64) -> Result<&TokenInfo, TokenError> {
        let Some(info) = self.tokens.get(id.bytes()) else {
            return Err(TokenError::InvalidToken(format!(
                "Token for real user: {}, can't be found in cache",
                id.real_user()
            )));
        };
        if info.renew_date < now_ms {
            return Err(TokenError::InvalidToken(format!(
                "Token {} has expired, current time: {} expected renewal time: {}",
                id.real_user(),
                self.format_time(now_ms),
                self.format_time(info.renew_date)
            )));
        }
        Ok(info)
    }

    /// `retrievePassword`: the stored password of a known token not past its renew date.
    pub fn retrieve_password(&self, id: &I, now_ms: i64) -> Result<Password, TokenError> {
        self.check_token(id, now_ms).map(|i| i.password)
    }

    /// `verifyToken`: [`retrieve_password`](Self::retrieve_password), then a constant-time
    /// comparison with `password`.
    pub fn verify_token(&self, id: &I, password: &[u8], now_ms: i64) -> Result<(), TokenError> {
        let stored = self.retrieve_password(id, now_ms)?;
        if !passwords_match(&stored, password) {
            return Err(TokenError::InvalidToken(format!(
                "token {} is invalid, password doesn't match",
                format_token_id(id)
            )));
        }
        Ok(())
    }

    /// `renewToken`: `renewer` (the caller's short name) must be the token's renewer, the
    /// token must be within its max date, signed by a key still held, with a password that
    /// matches the identifier bytes as received, and stored. Returns the new renew date,
    /// `min(maxDate, now + renew_interval)`.
    pub fn renew_token(
        &mut self,
        token: &Token,
        renewer: &str,
        now_ms: i64,
    ) -> Result<i64, TokenError> {
        let id = I::parse(&token.identifier)?;
        let fmt_id = format_token_id(&id);
        if id.max_date() < now_ms {
            return Err(TokenError::InvalidToken(format!(
                "{renewer} tried to renew an expired token {fmt_id} max expiration date: {} currentTime: {}",
                self.format_time(id.max_date()),
                self.format_time(now_ms)
            )));
        }
        if id.renewer().is_empty() {
            return Err(TokenError::AccessControl(format!(
                "{renewer} tried to renew a token {fmt_id} without a renewer"
            )));
        }
        if id.renewer() != renewer {
            return Err(TokenError::AccessControl(format!(
                "{renewer} tries to renew a token {fmt_id} with non-matching renewer {}",
                id.renewer()
            )));
        }
        let Some(key) = self.keys.get(&id.master_key_id()) else {
            return Err(TokenError::InvalidToken(format!(
                "Unable to find master key for keyId={} from cache. Failed to renew an unexpired token {fmt_id} with sequenceNumber={}",
                id.master_key_id(),
                id.sequence_number()
            )));
        };
        let password = create_password(&key.bytes, &token.identifier);
        if !passwords_match(&password, &token.password) {
            return Err(TokenError::AccessControl(format!(
                "{renewer} is trying to renew a token {fmt_id} with wrong password"
            )));
        }
        let renew_date = id
            .max_date()
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
        self.store
            .store_token(id.bytes(), renew_date, self.sequence);
        Ok(renew_date)
    }

    /// `cancelToken(token, canceller)`: the owner (`canceller`, the caller's full user name)
    /// or the renewer (by the canceller's [`short_name`], the `DEFAULT` rule) may cancel; the
    /// token is forgotten. Returns its identifier.
    pub fn cancel_token(&mut self, token: &Token, canceller: &str) -> Result<I, TokenError> {
        self.cancel_token_as(token, canceller, short_name(canceller))
    }

    /// [`cancel_token`](Self::cancel_token) with the canceller's short name given
    /// (`canceller_short`, under the caller's `hadoop.security.auth_to_local` rules).
    pub fn cancel_token_as(
        &mut self,
        token: &Token,
        canceller: &str,
        canceller_short: &str,
    ) -> Result<I, TokenError> {
        let id = I::parse(&token.identifier)?;
        if id.owner().is_empty() {
            return Err(TokenError::InvalidToken(format!(
                "Token with no owner {}",
                format_token_id(&id)
            )));
        }
        let renewer = id.renewer();
        if canceller != id.owner() && (renewer.is_empty() || canceller_short != renewer) {
            return Err(TokenError::AccessControl(format!(
                "{canceller} is not authorized to cancel the token {}",
                format_token_id(&id)
            )));
        }
        if self.tokens.remove(id.bytes()).is_none() {
            return Err(TokenError::InvalidToken(format!(
                "Token not found {}",
                format_token_id(&id)
            )));
        }
        self.store.remove_token(id.bytes());
        Ok(id)
    }
}

/// A manager behind a lock, with the clock the SASL path reads `now` from (the manager
/// itself never reads a clock).
pub struct DelegationTokenSecrets<C, I = DelegationTokenIdentifier, S = Unpersisted> {
    manager: RwLock<DelegationSecretManager<I, S>>,
    clock: C,
}

impl<C, I, S> fmt::Debug for DelegationTokenSecrets<C, I, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DelegationTokenSecrets")
            .finish_non_exhaustive()
    }
}

impl<C: Fn() -> i64 + Send + Sync, I, S> DelegationTokenSecrets<C, I, S> {
    /// `clock` returns milliseconds since the epoch.
    pub fn new(
        manager: DelegationSecretManager<I, S>,
        clock: C,
    ) -> DelegationTokenSecrets<C, I, S> {
        DelegationTokenSecrets {
            manager: RwLock::new(manager),
            clock,
        }
    }

    pub fn read(&self) -> std::sync::RwLockReadGuard<'_, DelegationSecretManager<I, S>> {
        self.manager.read().unwrap_or_else(|e| e.into_inner())
    }

    pub fn write(&self) -> std::sync::RwLockWriteGuard<'_, DelegationSecretManager<I, S>> {
        self.manager.write().unwrap_or_else(|e| e.into_inner())
    }

    /// The clock's now.
    pub fn now(&self) -> i64 {
        (self.clock)()
    }
}

impl<C, I, S> DelegationTokenSecrets<C, I, S>
where
    C: Fn() -> i64 + Send + Sync,
    I: DelegationIdentifier,
    S: DelegationStore,
{
    /// TOKEN authentication (Java's `SaslDigestCallbackHandler`): the identifier is decoded and
    /// checked against the stored tokens at the clock's now; returns its password and the
    /// identifier (whose owner is the caller).
    pub fn retrieve_token(&self, identifier: &[u8]) -> Result<(Password, I), SaslError> {
        // Java: SaslDigestCallbackHandler.getIdentifier.
        let id = I::parse(identifier)
            .map_err(|_| SaslError::InvalidToken("Can't de-serialize tokenIdentifier".into()))?;
        let password = self.read().retrieve_password(&id, self.now())?;
        Ok((password, id))
    }
}

/// TOKEN authentication with delegation tokens: the user is the identifier's
/// [`user`](TokenIdentifier::user) (the owner, whole).
impl<C, I, S> TokenSecrets for DelegationTokenSecrets<C, I, S>
where
    C: Fn() -> i64 + Send + Sync,
    I: DelegationIdentifier,
    S: DelegationStore + Send + Sync,
{
    fn retrieve(&self, identifier: &[u8]) -> Result<TokenPassword, SaslError> {
        let (password, id) = self.retrieve_token(identifier)?;
        Ok(TokenPassword {
            password: password.to_vec(),
            user: id.user().unwrap_or_default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entropy::SeededEntropy;

    const T0: i64 = 1_711_242_400_403;
    const DAY: i64 = 86_400_000;

    fn manager(cfg: DelegationConfig) -> (DelegationTokenSecretManager, SeededEntropy) {
        let mut e = SeededEntropy(9);
        let m = DelegationTokenSecretManager::started(cfg, &mut e, T0).unwrap();
        (m, e)
    }

    #[test]
    fn formats_time_like_simpledateformat() {
        assert_eq!(format_time(0, 0), "1970-01-01 00:00:00,000+0000");
        assert_eq!(format_time(T0, 0), "2024-03-24 01:06:40,403+0000");
        assert_eq!(format_time(T0, 330), "2024-03-24 06:36:40,403+0530");
        assert_eq!(format_time(T0, -420), "2024-03-23 18:06:40,403-0700");
        assert_eq!(format_time(-1, 0), "1969-12-31 23:59:59,999+0000");
        assert_eq!(
            format_time(951_782_400_000, 0),
            "2000-02-29 00:00:00,000+0000"
        );
        // Never panics at the extremes.
        format_time(i64::MAX, 18 * 60);
        format_time(i64::MIN, -18 * 60);
    }

    #[test]
    fn formats_token_ids() {
        let id = DelegationTokenIdentifier::new(
            "hdfs/localhost@EXAMPLE.COM",
            "yarn",
            "",
            T0,
            T0 + 7 * DAY,
            1,
            2,
        );
        assert_eq!(
            format_token_id(&id),
            "(token for hdfs: HDFS_DELEGATION_TOKEN owner=hdfs/localhost@EXAMPLE.COM, renewer=yarn, realUser=, issueDate=1711242400403, maxDate=1711847200403, sequenceNumber=1, masterKeyId=2)"
        );
        let anon = DelegationTokenIdentifier::new("", "yarn", "", 0, 0, 17, 2);
        assert_eq!(format_token_id(&anon), "( SequenceNumber=17 )");
        assert_eq!(short_name("alice"), "alice");
        assert_eq!(short_name("nn/host@REALM"), "nn");
        assert_eq!(short_name("bob@REALM"), "bob");
    }

    #[test]
    fn start_rolls_once_and_first_token_carries_key_two() {
        let (mut m, _) = manager(DelegationConfig::default());
        let keys: Vec<_> = m.all_keys().map(|k| (k.key_id, k.expiry_date)).collect();
        // Key 1 lives max-lifetime from the roll; key 2 an interval longer.
        assert_eq!(keys, vec![(1, T0 + 7 * DAY), (2, T0 + 8 * DAY)]);
        let (id, token) = m.create_token("alice", "yarn", "", T0).unwrap();
        assert_eq!((id.sequence_number(), id.master_key_id()), (1, 2));
        assert_eq!((id.issue_date(), id.max_date()), (T0, T0 + 7 * DAY));
        assert_eq!(token.kind, "HDFS_DELEGATION_TOKEN");
        assert_eq!(token.identifier, id.bytes());
        assert_eq!(
            token.password,
            create_password(&m.current_key().unwrap().bytes, &token.identifier).to_vec()
        );
        assert_eq!(m.renew_date(&id), Some(T0 + DAY));
        m.verify_token(&id, &token.password, T0 + 1).unwrap();
        let (id2, _) = m.create_token("alice", "yarn", "", T0).unwrap();
        assert_eq!(id2.sequence_number(), 2);
    }

    #[test]
    fn unknown_expired_and_wrong_password() {
        let (mut m, _) = manager(DelegationConfig::default());
        let (id, token) = m.create_token("alice", "yarn", "oozie", T0).unwrap();
        let stranger = DelegationTokenIdentifier::new("bob", "yarn", "", T0, T0, 99, 2);
        let e = m.retrieve_password(&stranger, T0).unwrap_err();
        assert_eq!(
            e.to_string(),
            "Token for real user: , can't be found in cache"
        );
        assert_eq!(
            e.java_class(),
            "org.apache.hadoop.security.token.SecretManager$InvalidToken"
        );
        // At the renew date it still verifies; one ms later it has expired.
        m.retrieve_password(&id, T0 + DAY).unwrap();
        assert_eq!(
            m.retrieve_password(&id, T0 + DAY + 1).unwrap_err().to_string(),
            "Token oozie has expired, current time: 2024-03-25 01:06:40,404+0000 expected renewal time: 2024-03-25 01:06:40,403+0000"
        );
        let mut bad = token.password.clone();
        bad[0] ^= 1;
        assert_eq!(
            m.verify_token(&id, &bad, T0).unwrap_err().to_string(),
            format!(
                "token {} is invalid, password doesn't match",
                format_token_id(&id)
            )
        );
    }

    #[test]
    fn renew_extends_until_max_date() {
        let (mut m, mut e) = manager(DelegationConfig::default());
        let (id, token) = m.create_token("alice", "yarn", "", T0).unwrap();
        assert_eq!(
            m.renew_token(&token, "yarn", T0 + DAY / 2).unwrap(),
            T0 + DAY + DAY / 2
        );
        m.retrieve_password(&id, T0 + DAY + 1).unwrap();
        // Renewal survives key rolls: the signing key is kept until it expires.
        m.tick(&mut e, T0 + DAY + 1).unwrap();
        assert_eq!(m.current_key().unwrap().key_id, 3);
        assert_eq!(
            m.renew_token(&token, "yarn", T0 + 6 * DAY + DAY / 2)
                .unwrap(),
            T0 + 7 * DAY,
            "capped at maxDate"
        );
        let e1 = m.renew_token(&token, "yarn", T0 + 7 * DAY + 1).unwrap_err();
        assert_eq!(
            e1.to_string(),
            format!(
                "yarn tried to renew an expired token {} max expiration date: 2024-03-31 01:06:40,403+0000 currentTime: 2024-03-31 01:06:40,404+0000",
                format_token_id(&id)
            )
        );
        assert_eq!(
            e1.java_class(),
            "org.apache.hadoop.security.token.SecretManager$InvalidToken"
        );
    }

    #[test]
    fn renew_refusals() {
        let (mut m, _) = manager(DelegationConfig::default());
        let (id, token) = m.create_token("alice", "yarn", "", T0).unwrap();
        let fid = format_token_id(&id);
        let e = m.renew_token(&token, "mallory", T0).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("mallory tries to renew a token {fid} with non-matching renewer yarn")
        );
        assert_eq!(
            e.java_class(),
            "org.apache.hadoop.security.AccessControlException"
        );

        let mut forged = token.clone();
        forged.password[3] ^= 0x40;
        assert_eq!(
            m.renew_token(&forged, "yarn", T0).unwrap_err(),
            TokenError::AccessControl(format!(
                "yarn is trying to renew a token {fid} with wrong password"
            ))
        );

        let (nid, no_renewer) = m.create_token("alice", "", "", T0).unwrap();
        assert_eq!(
            m.renew_token(&no_renewer, "", T0).unwrap_err(),
            TokenError::AccessControl(format!(
                " tried to renew a token {} without a renewer",
                format_token_id(&nid)
            ))
        );

        // A token signed with a key we never had.
        let alien = DelegationTokenIdentifier::new("alice", "yarn", "", T0, T0 + DAY, 5, 77);
        let alien_token = Token::for_identifier(&alien, &[0u8; 20], "");
        assert_eq!(
            m.renew_token(&alien_token, "yarn", T0).unwrap_err().to_string(),
            format!(
                "Unable to find master key for keyId=77 from cache. Failed to renew an unexpired token {} with sequenceNumber=5",
                format_token_id(&alien)
            )
        );

        // Right key and password, but cancelled: unknown.
        m.cancel_token(&token, "alice").unwrap();
        assert_eq!(
            m.renew_token(&token, "yarn", T0).unwrap_err().to_string(),
            format!("Renewal request for unknown token {fid}")
        );
    }

    #[test]
    fn renew_checks_the_bytes_as_received() {
        let (mut m, _) = manager(DelegationConfig::default());
        let (_, token) = m.create_token("alice", "yarn", "", T0).unwrap();
        // The same identifier with a trailing byte: Java parses it equal, but the HMAC over
        // the received bytes differs, so the password is wrong.
        let mut padded = token.clone();
        padded.identifier.push(0);
        assert!(matches!(
            m.renew_token(&padded, "yarn", T0),
            Err(TokenError::AccessControl(m)) if m.ends_with("with wrong password")
        ));
        m.renew_token(&token, "yarn", T0).unwrap();
    }

    #[test]
    fn cancel_rules() {
        let (mut m, _) = manager(DelegationConfig::default());
        let (id, token) = m.create_token("alice", "yarn", "", T0).unwrap();
        let e = m.cancel_token(&token, "mallory").unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "mallory is not authorized to cancel the token {}",
                format_token_id(&id)
            )
        );
        assert_eq!(
            e.java_class(),
            "org.apache.hadoop.security.AccessControlException"
        );
        // The renewer may cancel, also as a principal whose short name is the renewer.
        assert_eq!(m.cancel_token(&token, "yarn/rm@EXAMPLE.COM").unwrap(), id);
        assert_eq!(m.token_count(), 0);
        assert_eq!(
            m.cancel_token(&token, "alice").unwrap_err().to_string(),
            format!("Token not found {}", format_token_id(&id))
        );
        assert!(
            m.retrieve_password(&id, T0).is_err(),
            "a cancelled token is gone"
        );

        let ownerless = DelegationTokenIdentifier::new("", "yarn", "", T0, T0, 8, 2);
        let t = Token::for_identifier(&ownerless, &[0; 20], "");
        assert_eq!(
            m.cancel_token(&t, "yarn").unwrap_err().to_string(),
            "Token with no owner ( SequenceNumber=8 )"
        );
    }

    #[test]
    fn expired_tokens_and_keys_are_removed() {
        let (mut m, mut e) = manager(DelegationConfig::default());
        let (a, _) = m.create_token("alice", "yarn", "", T0).unwrap();
        let (b, tb) = m.create_token("bob", "yarn", "", T0).unwrap();
        m.renew_token(&tb, "yarn", T0 + DAY - 1).unwrap();
        // The scan runs once per hour: the first tick after the start scan is an hour later.
        assert_eq!(m.tick(&mut e, T0 + 1000).unwrap(), Vec::<i32>::new());
        assert_eq!(
            m.tick(&mut e, T0 + DAY + 1).unwrap(),
            vec![a.sequence_number()]
        );
        assert_eq!(m.token_count(), 1);
        assert!(m.renew_date(&b).is_some());

        // Keys: roll daily; a key expires max-lifetime after it stopped being current.
        let mut now = T0 + DAY + 1;
        for _ in 0..9 {
            now += DAY + 1;
            m.tick(&mut e, now).unwrap();
        }
        let ids: Vec<i32> = m.all_keys().map(|k| k.key_id).collect();
        assert!(!ids.contains(&1) && !ids.contains(&2), "{ids:?}");
        assert!(ids.len() <= 9, "{ids:?}");
        assert!(m.all_keys().all(|k| k.expiry_date >= now));
        assert_eq!(m.current_key().unwrap().key_id, *ids.last().unwrap());
    }

    #[test]
    fn token_cap() {
        let cfg = DelegationConfig {
            max_tokens: 2,
            ..DelegationConfig::default()
        };
        let (mut m, _) = manager(cfg);
        m.create_token("a", "yarn", "", T0).unwrap();
        let (_, t) = m.create_token("b", "yarn", "", T0).unwrap();
        assert!(matches!(
            m.create_token("c", "yarn", "", T0),
            Err(TokenError::Full { max: 2, .. })
        ));
        m.cancel_token(&t, "b").unwrap();
        let (c, _) = m.create_token("c", "yarn", "", T0).unwrap();
        assert_eq!(
            c.sequence_number(),
            3,
            "a refused create uses no sequence number"
        );
    }

    #[test]
    fn config_checks() {
        assert!(DelegationConfig::default().check().is_ok());
        let c = DelegationConfig {
            renew_interval_ms: 0,
            ..DelegationConfig::default()
        };
        assert!(c.check().is_err());
        let c = DelegationConfig {
            key_update_interval_ms: 1,
            ..DelegationConfig::default()
        };
        assert!(c.check().is_err(), "too many live keys");
        assert!(DelegationTokenSecretManager::started(c, &mut SeededEntropy(1), T0).is_err());
    }

    #[test]
    fn sasl_secrets_use_the_clock() {
        let (mut m, _) = manager(DelegationConfig::default());
        let (_, token) = m.create_token("alice", "yarn", "", T0).unwrap();
        let now = std::sync::atomic::AtomicI64::new(T0);
        let s = DelegationTokenSecrets::new(m, || now.load(std::sync::atomic::Ordering::SeqCst));
        let got = s.retrieve(&token.identifier).unwrap();
        assert_eq!(got.password, token.password);
        assert_eq!(got.user, "alice");
        now.store(T0 + DAY + 1, std::sync::atomic::Ordering::SeqCst);
        assert_eq!(
            s.retrieve(&token.identifier).unwrap_err(),
            SaslError::InvalidToken(
                "Token  has expired, current time: 2024-03-25 01:06:40,404+0000 expected renewal time: 2024-03-25 01:06:40,403+0000".into()
            )
        );
        assert_eq!(
            s.retrieve(&[1, 2, 3]).unwrap_err(),
            SaslError::InvalidToken("Can't de-serialize tokenIdentifier".into())
        );
    }
}
