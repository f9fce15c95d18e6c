//! Token passwords and the keys behind them: Java's `SecretManager` arithmetic, the
//! [`MasterKey`]s the RM rolls and hands to NodeManagers, and the NodeManager's two
//! verifiers.
//!
//! - A password is `HMAC(key, identifier.bytes())` ([`create_password`]), HmacSHA1 by default
//!   (`hadoop.security.secret-manager.key-generator.algorithm`), so 20 bytes; keys are 64-bit
//!   (`hadoop.security.secret-manager.key-length`), 8 bytes. Only HmacSHA1 is implemented;
//!   [`Algorithm::from_config`] refuses the rest. Passwords are compared in constant time
//!   ([`passwords_match`]).
//! - [`MasterKey`] is `MasterKeyProto { key_id, bytes }`: `rm-core`'s key roller makes them,
//!   registration and heartbeat responses carry them, and [`MasterKeys`] holds the current and
//!   the previous one as the NodeManager does (`setMasterKey` changes keys only when the id
//!   changes; the old current becomes the previous).
//! - [`NmTokenSecretManager`] is `NMTokenSecretManagerInNM`: the password of an NMToken for the
//!   SASL (DIGEST-MD5) server of ContainerManagementProtocol, with the attempt's remembered key.
//! - [`ContainerTokenSecretManager`] is `NMContainerTokenSecretManager` plus the start checks of
//!   `ContainerManagerImpl`: key and `nmHostAddr`, the password, then application, relaunch
//!   (a bounded replay guard keyed by token expiry and container id, as Java's
//!   `recentlyStartedContainerTracker`) and expiry. Time is passed in (`now_ms`); there is no
//!   clock here.
//!
//! Every refusal carries Java's text: [`TokenError::InvalidToken`] for `SecretManager.InvalidToken`
//! and [`TokenError::Unauthorized`] for the `YarnException`s of the start checks.

use std::collections::{BTreeSet, HashMap};
use std::fmt;

use hmac::{KeyInit, Mac};
use subtle::ConstantTimeEq;

use super::identifier::{ContainerTokenIdentifier, NmTokenIdentifier, NodeId};
use super::{Token, TokenError, TokenIdentifier};
use crate::pb::hadoop::yarn::MasterKeyProto;
use crate::writer::{Encode, Sink};
use crate::yarn::ids::{AppId, AttemptId, ContainerId};

/// `hadoop.security.secret-manager.key-generator.algorithm`.
pub const ALGORITHM_KEY: &str = "hadoop.security.secret-manager.key-generator.algorithm";
/// `hadoop.security.secret-manager.key-length` (bits).
pub const KEY_LENGTH_KEY: &str = "hadoop.security.secret-manager.key-length";
/// The default algorithm.
pub const HMAC_SHA1: &str = "HmacSHA1";
/// The default key length in bytes (64 bits).
pub const DEFAULT_KEY_BYTES: usize = 8;
/// Largest master key accepted from the wire.
pub const MAX_KEY_BYTES: usize = 1024;
/// Length of an HmacSHA1 password.
pub const PASSWORD_BYTES: usize = 20;

/// An HmacSHA1 token password.
pub type Password = [u8; PASSWORD_BYTES];

type HmacSha1 = hmac::Hmac<sha1::Sha1>;

/// The secret manager's MAC algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    HmacSha1,
}

impl Algorithm {
    /// The value of `hadoop.security.secret-manager.key-generator.algorithm` (JCA names are
    /// case-insensitive). Anything but HmacSHA1 is refused.
    pub fn from_config(name: &str) -> Result<Algorithm, TokenError> {
        if name.trim().eq_ignore_ascii_case(HMAC_SHA1) {
            Ok(Algorithm::HmacSha1)
        } else {
            Err(TokenError::UnsupportedAlgorithm(name.to_string()))
        }
    }

    /// The JCA name.
    pub fn java_name(self) -> &'static str {
        match self {
            Algorithm::HmacSha1 => HMAC_SHA1,
        }
    }
}

/// Key bytes for `hadoop.security.secret-manager.key-length` bits (a positive multiple of 8, at
/// most [`MAX_KEY_BYTES`] bytes).
pub fn key_bytes_for_bits(bits: i64) -> Result<usize, TokenError> {
    if bits <= 0 || bits % 8 != 0 || bits / 8 > MAX_KEY_BYTES as i64 {
        return Err(TokenError::BadKey {
            key_id: 0,
            len: (bits.max(0) / 8) as usize,
            max: MAX_KEY_BYTES,
        });
    }
    Ok((bits / 8) as usize)
}

/// `SecretManager.createPassword(identifier, key)`: HmacSHA1 of the identifier bytes.
pub fn create_password(key: &[u8], identifier: &[u8]) -> Password {
    // RFC 2104: HMAC takes keys of any length, so this cannot fail.
    let mut mac = <HmacSha1 as KeyInit>::new_from_slice(key).expect("HMAC accepts any key length");
    mac.update(identifier);
    let out = mac.finalize().into_bytes();
    let mut pw = [0u8; PASSWORD_BYTES];
    pw.copy_from_slice(&out);
    pw
}

/// Constant-time comparison (`MessageDigest.isEqual`); different lengths never match.
pub fn passwords_match(expected: &[u8], given: &[u8]) -> bool {
    expected.ct_eq(given).into()
}

/// One master key (`MasterKeyProto { key_id = 1, bytes = 2 }`): the raw HMAC key and its id.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct MasterKey {
    pub key_id: i32,
    pub bytes: Vec<u8>,
}

/// Prints the id and the key length, never the key.
impl fmt::Debug for MasterKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MasterKey")
            .field("key_id", &self.key_id)
            .field("bytes", &format_args!("{} bytes", self.bytes.len()))
            .finish()
    }
}

impl MasterKey {
    /// A key of 1 ..= [`MAX_KEY_BYTES`] bytes.
    pub fn new(key_id: i32, bytes: impl Into<Vec<u8>>) -> Result<MasterKey, TokenError> {
        let bytes = bytes.into();
        if bytes.is_empty() || bytes.len() > MAX_KEY_BYTES {
            return Err(TokenError::BadKey {
                key_id,
                len: bytes.len(),
                max: MAX_KEY_BYTES,
            });
        }
        Ok(MasterKey { key_id, bytes })
    }

    /// From a received `MasterKeyProto`; both fields must be present (Java would fail on a
    /// missing one).
    pub fn from_proto(p: &MasterKeyProto) -> Result<MasterKey, TokenError> {
        let key_id = p.key_id.ok_or(TokenError::Malformed {
            what: "MasterKeyProto",
            reason: "no key_id".into(),
        })?;
        let bytes = p.bytes.as_deref().ok_or(TokenError::Malformed {
            what: "MasterKeyProto",
            reason: "no bytes".into(),
        })?;
        if bytes.is_empty() || bytes.len() > MAX_KEY_BYTES {
            return Err(TokenError::BadKey {
                key_id,
                len: bytes.len(),
                max: MAX_KEY_BYTES,
            });
        }
        Ok(MasterKey {
            key_id,
            bytes: bytes.to_vec(),
        })
    }

    /// The prost form.
    pub fn to_proto(&self) -> MasterKeyProto {
        MasterKeyProto {
            key_id: Some(self.key_id),
            bytes: Some(self.bytes.clone()),
        }
    }

    /// The `MasterKeyProto` body length.
    pub fn encoded_len(&self) -> usize {
        Encode::encoded_len(self)
    }

    /// Appends the `MasterKeyProto` body (fields 1, 2).
    pub fn encode(&self, buf: &mut Vec<u8>) {
        crate::writer::write(buf, self);
    }

    /// The password of identifier bytes under this key.
    pub fn password(&self, identifier: &[u8]) -> Password {
        create_password(&self.bytes, identifier)
    }
}

/// `MasterKeyProto { key_id, bytes }`.
impl Encode for MasterKey {
    fn encode<S: Sink>(&self, s: &mut S) {
        s.int32(1, self.key_id);
        s.bytes(2, &self.bytes);
    }
}

/// The current and the previous master key of one kind, as a NodeManager keeps them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MasterKeys {
    current: Option<MasterKey>,
    previous: Option<MasterKey>,
}

impl MasterKeys {
    pub fn new() -> MasterKeys {
        MasterKeys::default()
    }

    /// `setMasterKey`: takes `key` only if its id differs from the current key's; the old
    /// current key becomes the previous one. Returns whether anything changed.
    pub fn set_master_key(&mut self, key: MasterKey) -> bool {
        if self.current.as_ref().map(|k| k.key_id) == Some(key.key_id) {
            return false;
        }
        self.previous = self.current.replace(key);
        true
    }

    pub fn current(&self) -> Option<&MasterKey> {
        self.current.as_ref()
    }

    pub fn previous(&self) -> Option<&MasterKey> {
        self.previous.as_ref()
    }

    /// The key with this id, the previous key first (Java's order).
    pub fn get(&self, key_id: i32) -> Option<&MasterKey> {
        self.previous
            .iter()
            .chain(self.current.iter())
            .find(|k| k.key_id == key_id)
    }

    /// The password of identifier bytes made with key `key_id` (current or previous).
    pub fn retrieve_password(
        &self,
        key_id: i32,
        identifier: &[u8],
    ) -> Result<Password, TokenError> {
        match self.get(key_id) {
            Some(k) => Ok(k.password(identifier)),
            None if self.current.is_none() => Err(TokenError::NoCurrentKey),
            None => Err(TokenError::UnknownKey(key_id)),
        }
    }

    /// Mints the password of an identifier: with the key its `key_id()` names.
    pub fn mint<I: TokenIdentifier>(&self, id: &I) -> Result<Password, TokenError> {
        self.retrieve_password(id.key_id(), id.bytes())
    }

    /// Mints a whole token: `id.bytes()`, the password, the identifier's kind and `service`.
    pub fn token<I: TokenIdentifier>(&self, id: &I, service: &str) -> Result<Token, TokenError> {
        let pw = self.mint(id)?;
        Ok(Token::for_identifier(id, &pw, service))
    }
}

fn or_null<T: fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "null".to_string(), |v| v.to_string())
}

/// Default cap on remembered per-attempt NMToken keys and on remembered container starts.
pub const DEFAULT_MAX_TRACKED: usize = 100_000;

/// `NMTokenSecretManagerInNM`: NMToken passwords on a NodeManager.
#[derive(Debug, Clone)]
pub struct NmTokenSecretManager {
    keys: MasterKeys,
    node_id: Option<NodeId>,
    /// `oldMasterKeys`: the key each attempt started its first container with.
    attempt_keys: HashMap<AttemptId, MasterKey>,
    max_attempts: usize,
}

impl Default for NmTokenSecretManager {
    fn default() -> Self {
        NmTokenSecretManager::new(DEFAULT_MAX_TRACKED)
    }
}

impl NmTokenSecretManager {
    /// Remembers keys of at most `max_attempts` attempts.
    pub fn new(max_attempts: usize) -> NmTokenSecretManager {
        NmTokenSecretManager {
            keys: MasterKeys::new(),
            node_id: None,
            attempt_keys: HashMap::new(),
            max_attempts,
        }
    }

    /// `setNodeId`: the NodeId registered with the RM; NMTokens must name exactly it.
    pub fn set_node_id(&mut self, node: NodeId) {
        self.node_id = Some(node);
    }

    /// `setMasterKey` (see [`MasterKeys::set_master_key`]).
    pub fn set_master_key(&mut self, key: MasterKey) -> bool {
        self.keys.set_master_key(key)
    }

    pub fn keys(&self) -> &MasterKeys {
        &self.keys
    }

    /// `retrievePassword`: the key is the attempt's remembered key, unless the identifier's key
    /// id is the previous or the current key's; the identifier's NodeId must be this NM's.
    pub fn retrieve_password(&self, id: &NmTokenIdentifier) -> Result<Password, TokenError> {
        let key_id = id.key_id();
        let attempt = id.attempt_id();
        let mut key = attempt.and_then(|a| self.attempt_keys.get(&a));
        if let Some(k) = self.keys.previous().filter(|k| k.key_id == key_id) {
            key = Some(k);
        } else if let Some(k) = self.keys.current().filter(|k| k.key_id == key_id) {
            key = Some(k);
        }
        if let Some(node) = &self.node_id {
            let found = id.node_id();
            if found.as_ref() != Some(node) {
                return Err(TokenError::InvalidToken(format!(
                    "Given NMToken for application : {} is not valid for current node manager.expected : {} found : {}",
                    or_null(attempt),
                    node,
                    or_null(found)
                )));
            }
        }
        match key {
            Some(k) => Ok(k.password(id.bytes())),
            None => Err(TokenError::InvalidToken(format!(
                "Given NMToken for application : {} seems to have been generated illegally.",
                or_null(attempt)
            ))),
        }
    }

    /// `appAttemptStartContainer`: remembers the attempt's NMToken key (current or previous)
    /// at its container starts, so the attempt's later calls verify after keys roll on.
    pub fn app_attempt_start_container(
        &mut self,
        id: &NmTokenIdentifier,
    ) -> Result<(), TokenError> {
        let Some(attempt) = id.attempt_id() else {
            return Err(TokenError::InvalidToken("Invalid NMToken".into()));
        };
        let key_id = id.key_id();
        if self.attempt_keys.get(&attempt).map(|k| k.key_id) == Some(key_id) {
            return Ok(());
        }
        let key = match (self.keys.current(), self.keys.previous()) {
            (Some(c), _) if c.key_id == key_id => c.clone(),
            (_, Some(p)) if p.key_id == key_id => p.clone(),
            _ => {
                return Err(TokenError::InvalidToken(
                    "Older NMToken should not be used while starting the container.".into(),
                ))
            }
        };
        if !self.attempt_keys.contains_key(&attempt) && self.attempt_keys.len() >= self.max_attempts
        {
            return Err(TokenError::Full {
                what: "NMToken keys of application attempts",
                max: self.max_attempts,
            });
        }
        self.attempt_keys.insert(attempt, key);
        Ok(())
    }

    /// `appFinished`: forgets the keys of the application's attempts.
    pub fn app_finished(&mut self, app: AppId) {
        self.attempt_keys.retain(|a, _| a.app != app);
    }

    /// Whether an attempt's key is remembered (`isAppAttemptNMTokenKeyPresent`).
    pub fn has_attempt_key(&self, attempt: &AttemptId) -> bool {
        self.attempt_keys.contains_key(attempt)
    }
}

/// Java's `INVALID_CONTAINERTOKEN_MSG`.
pub const INVALID_CONTAINER_TOKEN: &str = "Invalid ContainerToken";

/// `NMContainerTokenSecretManager` and the container-token checks of `ContainerManagerImpl`.
#[derive(Debug, Clone)]
pub struct ContainerTokenSecretManager {
    keys: MasterKeys,
    node_host_addr: Option<String>,
    /// `recentlyStartedContainerTracker`: (token expiry, container) of successful starts.
    started: BTreeSet<(i64, ContainerId)>,
    max_started: usize,
}

impl Default for ContainerTokenSecretManager {
    fn default() -> Self {
        ContainerTokenSecretManager::new(DEFAULT_MAX_TRACKED)
    }
}

impl ContainerTokenSecretManager {
    /// Remembers at most `max_started` container starts whose tokens have not expired.
    pub fn new(max_started: usize) -> ContainerTokenSecretManager {
        ContainerTokenSecretManager {
            keys: MasterKeys::new(),
            node_host_addr: None,
            started: BTreeSet::new(),
            max_started,
        }
    }

    /// `setNodeId`: container tokens must name `node.to_string()` as `nmHostAddr`.
    pub fn set_node_id(&mut self, node: &NodeId) {
        self.node_host_addr = Some(node.to_string());
    }

    /// `setMasterKey` (see [`MasterKeys::set_master_key`]).
    pub fn set_master_key(&mut self, key: MasterKey) -> bool {
        self.keys.set_master_key(key)
    }

    pub fn keys(&self) -> &MasterKeys {
        &self.keys
    }

    /// `retrievePassword`: the key by `masterKeyId` (previous or current), and `nmHostAddr`
    /// must be this NM's address.
    pub fn retrieve_password(&self, id: &ContainerTokenIdentifier) -> Result<Password, TokenError> {
        let key_id = id.master_key_id();
        let key = self
            .keys
            .previous()
            .filter(|k| k.key_id == key_id)
            .or_else(|| self.keys.current().filter(|k| k.key_id == key_id));
        let container = or_null(id.container_id());
        if let Some(addr) = &self.node_host_addr {
            if id.nm_host_addr() != addr {
                return Err(TokenError::InvalidToken(format!(
                    "Given Container {container} identifier is not valid for current Node manager. Expected : {addr} Found : {}",
                    id.nm_host_addr()
                )));
            }
        }
        match key {
            Some(k) => Ok(k.password(id.bytes())),
            None => Err(TokenError::InvalidToken(format!(
                "Given Container {container} seems to have an illegally generated token."
            ))),
        }
    }

    /// `verifyAndGetContainerTokenIdentifier`: parses the token's identifier, retrieves its
    /// password and compares it with the token's in constant time.
    pub fn verify(&self, token: &Token) -> Result<ContainerTokenIdentifier, TokenError> {
        if token.identifier.is_empty() {
            return Err(TokenError::InvalidToken(INVALID_CONTAINER_TOKEN.into()));
        }
        let id = ContainerTokenIdentifier::parse(&token.identifier)?;
        let pw = self.retrieve_password(&id)?;
        if !passwords_match(&pw, &token.password) {
            return Err(TokenError::InvalidToken(format!(
                "Invalid container token used for starting container on : {}",
                or_null(self.node_host_addr.as_deref())
            )));
        }
        Ok(id)
    }

    fn prune(&mut self, now_ms: i64) {
        while let Some(&(exp, _)) = self.started.first() {
            if exp >= now_ms {
                break;
            }
            self.started.pop_first();
        }
    }

    /// `isValidStartContainerRequest`: false if this container already started with a token
    /// of this expiry that has not expired yet.
    pub fn is_valid_start_container_request(
        &mut self,
        id: &ContainerTokenIdentifier,
        now_ms: i64,
    ) -> bool {
        self.prune(now_ms);
        match id.container_id() {
            Some(c) => !self.started.contains(&(id.expiry_time_stamp(), c)),
            None => true,
        }
    }

    /// `startContainerSuccessful`: remembers the start until the token expires. Refuses (and
    /// remembers nothing) when the guard is full of unexpired starts.
    pub fn start_container_successful(
        &mut self,
        id: &ContainerTokenIdentifier,
        now_ms: i64,
    ) -> Result<(), TokenError> {
        self.prune(now_ms);
        let Some(c) = id.container_id() else {
            return Ok(());
        };
        if self.started.len() >= self.max_started {
            return Err(TokenError::Full {
                what: "container starts with unexpired tokens",
                max: self.max_started,
            });
        }
        self.started.insert((id.expiry_time_stamp(), c));
        Ok(())
    }

    /// Container starts remembered now.
    pub fn remembered_starts(&self) -> usize {
        self.started.len()
    }

    /// Brings back a start remembered by a previous run (NM recovery: Java's
    /// `NMContainerTokenSecretManager.recover` from its state store's container tokens);
    /// an expired one is dropped, and nothing is added when the guard is full.
    pub fn restore_start(&mut self, expiry_ms: i64, container: ContainerId, now_ms: i64) {
        if expiry_ms < now_ms || self.started.len() >= self.max_started {
            return;
        }
        self.started.insert((expiry_ms, container));
    }

    /// `authorizeStartAndResourceIncreaseRequest` for a start: the container must belong to
    /// the NMToken's application, must not be a relaunch, and its token must not have expired.
    pub fn authorize_start(
        &mut self,
        nm: &NmTokenIdentifier,
        id: &ContainerTokenIdentifier,
        now_ms: i64,
    ) -> Result<(), TokenError> {
        let Some(container) = id.container_id() else {
            return Err(TokenError::Unauthorized(INVALID_CONTAINER_TOKEN.into()));
        };
        let mut msg = String::from("Unauthorized request to start container.");
        let nm_attempt = nm.attempt_id();
        if nm_attempt.map(|a| a.app) != Some(container.app) {
            msg.push_str(&format!(
                "\nNMToken for application attempt : {} was used for starting container with container token issued for application attempt : {}",
                or_null(nm_attempt),
                container.attempt_id()
            ));
        } else if !self.is_valid_start_container_request(id, now_ms) {
            msg.push_str(&format!(
                "\n Attempt to relaunch the same container with id {container}."
            ));
        } else if id.expiry_time_stamp() < now_ms {
            msg.push_str(&format!(
                "\nThis token is expired. current time is {now_ms} found {}\nNote: System times on machines may be out of sync. Check system time and time zones.",
                id.expiry_time_stamp()
            ));
        } else {
            return Ok(());
        }
        Err(TokenError::Unauthorized(msg))
    }
}

/// TOKEN authentication on a NodeManager's ContainerManagementProtocol server: NMTokens are
/// verified by the node's secret manager, behind a lock because the status updater sets new
/// master keys on it as the RM rolls them (and container starts remember attempt keys).
impl crate::sasl::server::TokenSecrets for std::sync::RwLock<NmTokenSecretManager> {
    fn retrieve(
        &self,
        identifier: &[u8],
    ) -> Result<crate::sasl::server::TokenPassword, crate::sasl::SaslError> {
        // Java: SaslDigestCallbackHandler.getIdentifier.
        let id = NmTokenIdentifier::parse(identifier).map_err(|_| {
            crate::sasl::SaslError::InvalidToken("Can't de-serialize tokenIdentifier".into())
        })?;
        let password = self
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .retrieve_password(&id)?;
        Ok(crate::sasl::server::TokenPassword {
            password: password.to_vec(),
            user: id.user().unwrap_or_default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn algorithm_config() {
        assert_eq!(Algorithm::from_config("HmacSHA1"), Ok(Algorithm::HmacSha1));
        assert_eq!(Algorithm::from_config("hmacsha1"), Ok(Algorithm::HmacSha1));
        let e = Algorithm::from_config("HmacSHA256").unwrap_err();
        assert!(e.to_string().contains("HmacSHA256"), "{e}");
        assert_eq!(key_bytes_for_bits(64), Ok(8));
        assert!(key_bytes_for_bits(0).is_err());
        assert!(key_bytes_for_bits(12).is_err());
    }

    #[test]
    fn set_master_key_only_on_new_id() {
        let mut k = MasterKeys::new();
        assert!(k.set_master_key(MasterKey::new(1, [1; 8]).unwrap()));
        assert!(!k.set_master_key(MasterKey::new(1, [9; 8]).unwrap()));
        assert_eq!(k.current().unwrap().bytes, [1; 8]);
        assert!(k.previous().is_none());
        assert!(k.set_master_key(MasterKey::new(2, [2; 8]).unwrap()));
        assert_eq!(k.previous().unwrap().key_id, 1);
        assert_eq!(k.current().unwrap().key_id, 2);
        assert!(k.set_master_key(MasterKey::new(3, [3; 8]).unwrap()));
        assert_eq!(k.previous().unwrap().key_id, 2);
        assert!(k.get(1).is_none());
    }

    #[test]
    fn master_key_encoding_and_debug() {
        let k = MasterKey::new(-7, [5; 8]).unwrap();
        let mut b = Vec::new();
        k.encode(&mut b);
        assert_eq!(b, prost::Message::encode_to_vec(&k.to_proto()));
        assert_eq!(b.len(), k.encoded_len());
        assert_eq!(MasterKey::from_proto(&k.to_proto()).unwrap(), k);
        assert!(!format!("{k:?}").contains('5'));
        assert!(MasterKey::new(1, Vec::new()).is_err());
        assert!(MasterKey::from_proto(&MasterKeyProto {
            key_id: Some(1),
            bytes: None
        })
        .is_err());
    }
}
