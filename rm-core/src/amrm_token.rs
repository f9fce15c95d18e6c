//! AMRMTokens: the RM's grant to an ApplicationMaster to call ApplicationMasterProtocol.
//! Mirrors Java's `org.apache.hadoop.yarn.server.resourcemanager.security.AMRMTokenSecretManager`
//! (checked against the Hadoop 3.5.0 bytecode).
//!
//! How the types connect:
//!
//! - [`AmrmTokenSecretManager`] holds a [`KeyRoller`] (the same current + next key schedule as
//!   the container and NM keys; see [`crate::master_key`]) and the set of registered attempts.
//!   Rolling interval `yarn.resourcemanager.am-rm-tokens.master-key-rolling-interval-secs`,
//!   activation delay 1.5 × `yarn.am.liveness-monitor.expiry-interval-ms`
//!   ([`RmConfig::amrm_key_activation_delay_ms`]); [`RmConfig::check`] refuses a rolling interval
//!   that is not more than twice the delay, with Java's text.
//! - [`AmrmTokenSecretManager::create_and_get_amrm_token`] (`createAndGetAMRMToken`) registers
//!   the attempt and mints a [`Token`] of kind `YARN_AM_RM_TOKEN` with an empty service: the
//!   identifier (`hadoop_wire::token::AmrmTokenIdentifier`) names the attempt and the key
//!   Java's `getMasterKey()` returns, which is the pending *next* key while one exists, else the
//!   current one; the password is `HMAC-SHA1(key, identifier bytes)`.
//! - [`AmrmTokenSecretManager::retrieve_password`] (`retrievePassword`): the attempt must be
//!   registered, the key id must be the current or the pending next key's; anything else is
//!   `InvalidToken` with Java's text. After the next key is activated, the old current key is
//!   gone (Java keeps no previous AMRM key): ApplicationMasters get a fresh token from
//!   `allocate` while the next key is pending ([`AmrmTokenSecretManager::token_for_allocate`]).
//! - [`AmrmTokenSecrets`] puts the manager behind a lock and implements
//!   `hadoop_wire::sasl::server::TokenSecrets`, so `ipc`'s SASL server authenticates
//!   ApplicationMasterProtocol (DIGEST-MD5) with it.
//!
//! The password is computed over Java's `getBytes()` of the parsed identifier (the protobuf
//! re-serialization, `AmrmTokenIdentifier::bytes`), as `retrievePassword` does; for the
//! canonical bytes every protobuf writer produces these are the bytes as received.
//!
//! Time is passed in (`now_ms`); there is no clock here. The attempt set is bounded
//! ([`AmrmTokenSecretManager::new`]'s `max_attempts`): a full set refuses new attempts with
//! [`TokenError::Full`] rather than growing.

use std::collections::HashSet;
use std::sync::{Arc, RwLock};

use hadoop_wire::entropy::Entropy;
use hadoop_wire::sasl::server::{TokenContext, TokenPassword, TokenSecrets};
use hadoop_wire::sasl::SaslError;
use hadoop_wire::token::secret::Password;
use hadoop_wire::token::{AmrmTokenIdentifier, Token, TokenError, TokenIdentifier};
use hadoop_wire::yarn::ids::AttemptId;

use crate::config::RmConfig;
use crate::master_key::{KeyRoller, MasterKey};
use crate::Error;

/// Default cap on registered application attempts.
pub const DEFAULT_MAX_ATTEMPTS: usize = 100_000;

/// `AMRMTokenSecretManager`: mints and verifies AMRMTokens.
#[derive(Debug, Clone)]
pub struct AmrmTokenSecretManager {
    keys: KeyRoller,
    attempts: HashSet<AttemptId>,
    max_attempts: usize,
}

fn or_null(a: Option<AttemptId>) -> String {
    a.map_or_else(|| "null".to_string(), |a| a.to_string())
}

impl AmrmTokenSecretManager {
    /// The first key is made at `now_ms` (Java's `start()`); the first roll is one interval
    /// later, and each rolled key becomes current `activation_delay_ms` after it was made.
    pub fn new(
        entropy: &mut dyn Entropy,
        now_ms: u64,
        roll_interval_ms: u64,
        activation_delay_ms: u64,
        max_attempts: usize,
    ) -> Result<AmrmTokenSecretManager, Error> {
        Ok(AmrmTokenSecretManager {
            keys: KeyRoller::new(entropy, now_ms, roll_interval_ms, activation_delay_ms)?,
            attempts: HashSet::new(),
            max_attempts,
        })
    }

    /// With the intervals of `cfg` (already checked by [`RmConfig::check`]).
    pub fn from_config(
        cfg: &RmConfig,
        entropy: &mut dyn Entropy,
        now_ms: u64,
    ) -> Result<AmrmTokenSecretManager, Error> {
        AmrmTokenSecretManager::new(
            entropy,
            now_ms,
            cfg.amrm_key_roll_ms,
            cfg.amrm_key_activation_delay_ms(),
            DEFAULT_MAX_ATTEMPTS,
        )
    }

    /// Java's `MasterKeyRoller` and `NextKeyActivator` timers: rolls a next key when the
    /// interval is up and activates it after the delay. Returns whether a key changed.
    pub fn tick(&mut self, entropy: &mut dyn Entropy, now_ms: u64) -> Result<bool, Error> {
        self.keys.tick(entropy, now_ms)
    }

    /// `getCurrnetMasterKeyData` (sic).
    pub fn current_key(&self) -> &MasterKey {
        self.keys.current()
    }

    /// `getNextMasterKeyData`: the rolled key waiting for activation.
    pub fn next_key(&self) -> Option<&MasterKey> {
        self.keys.next()
    }

    /// `getMasterKey`: the key new tokens are minted with, the next key while one is pending.
    pub fn minting_key(&self) -> &MasterKey {
        self.keys.next().unwrap_or(self.keys.current())
    }

    /// Attempts registered now.
    pub fn registered_attempts(&self) -> usize {
        self.attempts.len()
    }

    /// Whether `attempt` may use its AMRMToken.
    pub fn is_registered(&self, attempt: &AttemptId) -> bool {
        self.attempts.contains(attempt)
    }

    fn register(&mut self, attempt: AttemptId) -> Result<(), TokenError> {
        if !self.attempts.contains(&attempt) && self.attempts.len() >= self.max_attempts {
            return Err(TokenError::Full {
                what: "application attempts with AMRMTokens",
                max: self.max_attempts,
            });
        }
        self.attempts.insert(attempt);
        Ok(())
    }

    /// `createAndGetAMRMToken`: registers the attempt and mints its token with
    /// [`minting_key`](Self::minting_key); kind `YARN_AM_RM_TOKEN`, empty service.
    pub fn create_and_get_amrm_token(&mut self, attempt: AttemptId) -> Result<Token, TokenError> {
        let key = self.minting_key();
        let id = AmrmTokenIdentifier::new(Some(attempt), key.key_id);
        let password = key.password(id.bytes());
        self.register(attempt)?;
        Ok(Token::for_identifier(&id, &password, ""))
    }

    /// `addPersistedPassword`: registers the attempt of a token recovered from the state
    /// store (the password is not checked, as in Java).
    pub fn add_persisted_password(&mut self, token: &Token) -> Result<(), TokenError> {
        let id = AmrmTokenIdentifier::parse(&token.identifier)?;
        match id.attempt_id() {
            Some(a) => self.register(a),
            None => Err(TokenError::Malformed {
                what: "AMRMTokenIdentifier",
                reason: "no application attempt".into(),
            }),
        }
    }

    /// An attempt recovered from the RM state store: its AM's token (made with a restored
    /// key) verifies again.
    pub fn recover_attempt(&mut self, attempt: AttemptId) -> Result<(), TokenError> {
        self.register(attempt)
    }

    /// The keys as the state store keeps them: current, and the pending next one.
    pub fn keys(&self) -> (&MasterKey, Option<&MasterKey>) {
        (self.keys.current(), self.keys.next())
    }

    /// Restores the keys of an earlier run (see [`KeyRoller::restore`]).
    pub fn restore_keys(&mut self, current: MasterKey, next: Option<MasterKey>, now_ms: u64) {
        self.keys.restore(current, next, now_ms);
    }

    /// `applicationMasterFinished`: the attempt's tokens stop verifying.
    pub fn application_master_finished(&mut self, attempt: &AttemptId) {
        self.attempts.remove(attempt);
    }

    /// `retrievePassword`: the attempt must be registered and the key id must be the current
    /// or the pending next key's.
    pub fn retrieve_password(&self, id: &AmrmTokenIdentifier) -> Result<Password, TokenError> {
        let attempt = id.attempt_id();
        if !attempt.is_some_and(|a| self.attempts.contains(&a)) {
            return Err(TokenError::InvalidToken(format!(
                "{} not found in AMRMTokenSecretManager.",
                or_null(attempt)
            )));
        }
        let key_id = id.key_id();
        let current = self.keys.current();
        if key_id == current.key_id {
            return Ok(current.password(id.bytes()));
        }
        if let Some(next) = self.keys.next().filter(|k| k.key_id == key_id) {
            return Ok(next.password(id.bytes()));
        }
        Err(TokenError::InvalidToken(format!(
            "Invalid AMRMToken from {}",
            or_null(attempt)
        )))
    }

    /// What `ApplicationMasterService.allocate` hands back while a next key is pending and the
    /// caller's token was made with another key: a token for the attempt with the next key
    /// (the AM swaps it in before the key is activated). `None` otherwise.
    pub fn token_for_allocate(
        &mut self,
        id: &AmrmTokenIdentifier,
    ) -> Result<Option<Token>, TokenError> {
        let (Some(next), Some(attempt)) = (self.keys.next(), id.attempt_id()) else {
            return Ok(None);
        };
        if next.key_id == id.key_id() {
            return Ok(None);
        }
        self.create_and_get_amrm_token(attempt).map(Some)
    }
}

/// The manager behind a lock, shared by the SASL server (reads) and the RM's attempt
/// lifecycle and key timer (writes).
#[derive(Debug)]
pub struct AmrmTokenSecrets(RwLock<AmrmTokenSecretManager>);

impl AmrmTokenSecrets {
    pub fn new(manager: AmrmTokenSecretManager) -> AmrmTokenSecrets {
        AmrmTokenSecrets(RwLock::new(manager))
    }

    /// Read access (a poisoned lock is recovered: the manager has no invariants a panic
    /// mid-update could break beyond one attempt's registration).
    pub fn read(&self) -> std::sync::RwLockReadGuard<'_, AmrmTokenSecretManager> {
        self.0.read().unwrap_or_else(|e| e.into_inner())
    }

    pub fn write(&self) -> std::sync::RwLockWriteGuard<'_, AmrmTokenSecretManager> {
        self.0.write().unwrap_or_else(|e| e.into_inner())
    }
}

/// The AMRMToken a connection authenticated with, as its calls read it: made once, when the
/// connection authenticates ([`TokenSecrets::retrieve_with_context`]), and handed to every
/// call as `Call::token_context` (Java's `authorizeRequest` reads the AMRMTokenIdentifier of
/// the connection's UGI the same way, without parsing the token again).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AmrmCaller {
    /// The token's attempt (`None`: an identifier without one, refused by the calls).
    pub attempt: Option<AttemptId>,
    /// The master key the token was made with.
    pub key_id: i32,
}

impl AmrmTokenSecrets {
    fn verify(&self, identifier: &[u8]) -> Result<(TokenPassword, AmrmCaller), SaslError> {
        // Java: SaslDigestCallbackHandler.getIdentifier.
        let id = AmrmTokenIdentifier::parse(identifier)
            .map_err(|_| SaslError::InvalidToken("Can't de-serialize tokenIdentifier".into()))?;
        let password = self.read().retrieve_password(&id)?;
        let caller = AmrmCaller {
            attempt: id.attempt_id(),
            key_id: id.key_id(),
        };
        let p = TokenPassword {
            password: password.to_vec(),
            user: id.user().unwrap_or_default(),
        };
        Ok((p, caller))
    }
}

/// TOKEN authentication on ApplicationMasterProtocol: the DIGEST-MD5 username is the
/// AMRMTokenIdentifier; its password comes from `retrievePassword`, its user is the attempt;
/// the connection keeps an [`AmrmCaller`].
impl TokenSecrets for AmrmTokenSecrets {
    fn retrieve(&self, identifier: &[u8]) -> Result<TokenPassword, SaslError> {
        self.verify(identifier).map(|(p, _)| p)
    }

    fn retrieve_with_context(
        &self,
        identifier: &[u8],
    ) -> Result<(TokenPassword, Option<TokenContext>), SaslError> {
        let (p, caller) = self.verify(identifier)?;
        Ok((p, Some(Arc::new(caller))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hadoop_wire::entropy::SeededEntropy;
    use hadoop_wire::token::secret::{create_password, passwords_match};
    use hadoop_wire::yarn::ids::AppId;

    const ROLL: u64 = 10_000;
    const DELAY: u64 = 3_000;

    fn attempt(id: i32, n: i32) -> AttemptId {
        AttemptId {
            app: AppId {
                cluster_timestamp: 1_700_000_000_000,
                id,
            },
            attempt: n,
        }
    }

    fn manager(max: usize) -> (AmrmTokenSecretManager, SeededEntropy) {
        let mut e = SeededEntropy(42);
        let m = AmrmTokenSecretManager::new(&mut e, 0, ROLL, DELAY, max).unwrap();
        (m, e)
    }

    fn check(m: &AmrmTokenSecretManager, t: &Token) -> Result<(), TokenError> {
        let id = AmrmTokenIdentifier::parse(&t.identifier)?;
        let pw = m.retrieve_password(&id)?;
        assert!(passwords_match(&pw, &t.password), "password mismatch");
        Ok(())
    }

    #[test]
    fn mint_and_verify_with_the_current_key() {
        let (mut m, _) = manager(10);
        let a = attempt(1, 1);
        let t = m.create_and_get_amrm_token(a).unwrap();
        assert_eq!(t.kind, "YARN_AM_RM_TOKEN");
        assert_eq!(t.service, "");
        let id = AmrmTokenIdentifier::parse(&t.identifier).unwrap();
        assert_eq!(id.attempt_id(), Some(a));
        assert_eq!(id.key_id(), m.current_key().key_id);
        // HMAC-SHA1 over the identifier bytes with the current key's raw bytes.
        assert_eq!(
            t.password,
            create_password(&m.current_key().bytes, &t.identifier).to_vec()
        );
        check(&m, &t).unwrap();
        assert!(m.is_registered(&a));
        // A forged password does not match what the manager retrieves.
        let pw = m.retrieve_password(&id).unwrap();
        assert!(!passwords_match(&pw, &[0u8; 20]));
    }

    #[test]
    fn roll_next_key_previous_key_and_activation() {
        let (mut m, mut e) = manager(10);
        let a = attempt(1, 1);
        let old = m.create_and_get_amrm_token(a).unwrap();
        let first = m.current_key().clone();
        assert!(m.next_key().is_none());
        assert_eq!(m.minting_key(), &first);

        // Roll: a next key is pending; tokens are now minted with it (Java's getMasterKey).
        assert!(m.tick(&mut e, ROLL).unwrap());
        let next = m.next_key().unwrap().clone();
        assert_ne!(next.key_id, first.key_id);
        assert_eq!(m.current_key(), &first);
        let new = m.create_and_get_amrm_token(a).unwrap();
        let new_id = AmrmTokenIdentifier::parse(&new.identifier).unwrap();
        assert_eq!(new_id.key_id(), next.key_id);
        // Both the old (current key) and the new (next key) token verify.
        check(&m, &old).unwrap();
        check(&m, &new).unwrap();

        // allocate hands the AM a next-key token once, not again when it already has one.
        let old_id = AmrmTokenIdentifier::parse(&old.identifier).unwrap();
        let upd = m.token_for_allocate(&old_id).unwrap().unwrap();
        assert_eq!(upd, new);
        assert_eq!(m.token_for_allocate(&new_id).unwrap(), None);

        // Activation: the next key becomes current; the old key is gone.
        assert!(m.tick(&mut e, ROLL + DELAY).unwrap());
        assert_eq!(m.current_key(), &next);
        assert!(m.next_key().is_none());
        check(&m, &new).unwrap();
        assert_eq!(
            check(&m, &old),
            Err(TokenError::InvalidToken(format!(
                "Invalid AMRMToken from {a}"
            )))
        );
        assert_eq!(
            m.token_for_allocate(&new_id).unwrap(),
            None,
            "no pending key"
        );
    }

    #[test]
    fn unknown_key_and_unregistered_attempts() {
        let (mut m, _) = manager(10);
        let a = attempt(7, 2);
        m.create_and_get_amrm_token(a).unwrap();
        let forged = AmrmTokenIdentifier::new(Some(a), m.current_key().key_id.wrapping_add(99));
        let e = m.retrieve_password(&forged).unwrap_err();
        assert_eq!(
            e.to_string(),
            "Invalid AMRMToken from appattempt_1700000000000_0007_000002"
        );
        assert_eq!(
            e.java_class(),
            "org.apache.hadoop.security.token.SecretManager$InvalidToken"
        );

        let stranger = AmrmTokenIdentifier::new(Some(attempt(8, 1)), m.current_key().key_id);
        assert_eq!(
            m.retrieve_password(&stranger).unwrap_err().to_string(),
            "appattempt_1700000000000_0008_000001 not found in AMRMTokenSecretManager."
        );
        let none = AmrmTokenIdentifier::new(None, m.current_key().key_id);
        assert_eq!(
            m.retrieve_password(&none).unwrap_err().to_string(),
            "null not found in AMRMTokenSecretManager."
        );
    }

    #[test]
    fn finished_attempt_is_refused_and_recovery_registers() {
        let (mut m, _) = manager(10);
        let a = attempt(3, 1);
        let t = m.create_and_get_amrm_token(a).unwrap();
        check(&m, &t).unwrap();
        m.application_master_finished(&a);
        assert!(!m.is_registered(&a));
        assert_eq!(
            check(&m, &t).unwrap_err().to_string(),
            format!("{a} not found in AMRMTokenSecretManager.")
        );
        // A recovered token registers its attempt again.
        m.add_persisted_password(&t).unwrap();
        check(&m, &t).unwrap();
    }

    #[test]
    fn attempt_cap() {
        let (mut m, _) = manager(2);
        m.create_and_get_amrm_token(attempt(1, 1)).unwrap();
        m.create_and_get_amrm_token(attempt(2, 1)).unwrap();
        // Re-minting for a registered attempt is fine at the cap.
        m.create_and_get_amrm_token(attempt(2, 1)).unwrap();
        assert!(matches!(
            m.create_and_get_amrm_token(attempt(3, 1)),
            Err(TokenError::Full { max: 2, .. })
        ));
        assert!(!m.is_registered(&attempt(3, 1)));
        m.application_master_finished(&attempt(1, 1));
        m.create_and_get_amrm_token(attempt(3, 1)).unwrap();
        assert_eq!(m.registered_attempts(), 2);
    }

    #[test]
    fn sasl_secrets_give_password_and_user() {
        let (mut m, _) = manager(10);
        let a = attempt(5, 1);
        let t = m.create_and_get_amrm_token(a).unwrap();
        let s = AmrmTokenSecrets::new(m);
        let got = s.retrieve(&t.identifier).unwrap();
        assert_eq!(got.password, t.password);
        assert_eq!(got.user, "appattempt_1700000000000_0005_000001");
        // The connection's context: the attempt and key, made once at authentication.
        let (p, ctx) = s.retrieve_with_context(&t.identifier).unwrap();
        assert_eq!(p, got);
        let caller = ctx.unwrap();
        assert_eq!(
            caller.downcast_ref::<AmrmCaller>(),
            Some(&AmrmCaller {
                attempt: Some(a),
                key_id: s.read().current_key().key_id
            })
        );
        assert_eq!(
            s.retrieve(&[0xff, 0xff]).unwrap_err(),
            SaslError::InvalidToken("Can't de-serialize tokenIdentifier".into())
        );
        s.write().application_master_finished(&a);
        assert_eq!(
            s.retrieve(&t.identifier).unwrap_err(),
            SaslError::InvalidToken(format!("{a} not found in AMRMTokenSecretManager."))
        );
    }

    #[test]
    fn from_config_uses_the_amrm_schedule() {
        let cfg = RmConfig::default();
        let mut e = SeededEntropy(1);
        let mut m = AmrmTokenSecretManager::from_config(&cfg, &mut e, 0).unwrap();
        assert!(!m.tick(&mut e, 86_400_000 - 1).unwrap());
        assert!(m.tick(&mut e, 86_400_000).unwrap());
        assert!(m.next_key().is_some());
        assert!(!m.tick(&mut e, 86_400_000 + 1_350_000 - 1).unwrap());
        assert!(m.tick(&mut e, 86_400_000 + 1_350_000).unwrap());
        assert!(m.next_key().is_none());
    }
}
