//! RM delegation tokens (`RM_DELEGATION_TOKEN`): the RM's wiring of hadoop-wire's
//! delegation-token secret manager, as a Kerberized Java RM's `RMDelegationTokenSecretManager`
//! and `ClientRMService`'s `getDelegationToken` / `renewDelegationToken` /
//! `cancelDelegationToken` use it, checked against the Hadoop 3.5.0 jars.
//!
//! - **Identifier and secret manager** are hadoop-wire's:
//!   [`RmDelegationTokenIdentifier`] (`YARNDelegationTokenIdentifierProto`) and
//!   [`DelegationSecretManager`] (`AbstractDelegationTokenSecretManager`: key roll, expiry,
//!   get/renew/cancel with Java's rules and texts), the one the NameNode's HDFS tokens use.
//! - **Settings** ([`config_from_conf`]): keys rolled every
//!   `yarn.resourcemanager.delegation.key.update-interval` (1 day), tokens valid for
//!   `…token.max-lifetime` (7 days) and to be renewed within `…token.renew-interval` (1 day),
//!   expired tokens dropped every `…token.remove-scan-interval` (1 h).
//! - **State store** ([`StateStoreSink`]): every change to keys and tokens becomes a record of
//!   the RM's state store (Java's `storeNewMasterKey` / `storeNewToken` / `updateStoredToken` /
//!   `removeStoredToken`), written by `AppsRt::with_delegation` before the call is answered;
//!   [`recover_from`] rebuilds the manager from what was stored (a token's password recomputed
//!   from its key, as Java's `addPersistedDelegationToken`).
//! - **Service**: the RM answers with an empty service; Java's client sets
//!   `ClientRMProxy.getRMDelegationTokenService` (`ip:port` of `yarn.resourcemanager.address`).
//! - **SASL** ([`RmDelegationSecrets`]): TOKEN (DIGEST-MD5) on the client port; the caller is the
//!   token's owner (its short name, by `hadoop.security.auth_to_local`), so the application and
//!   service ACLs then apply as for a Kerberos caller. An unknown (cancelled) or expired token
//!   is refused with Java's `InvalidToken` text.
//! - **RPC** ([`register`]): the three calls, with `ClientRMService`'s Kerberos-only rule and
//!   its wrapping of the manager's refusals.
//!
//! Not here: the RM's `DelegationTokenRenewer` (renewing applications' HDFS tokens).

use std::fmt;

use hadoop_wire::sasl::kerberos_name::AuthToLocal;
use hadoop_wire::sasl::message::AuthMethod;
use hadoop_wire::sasl::server::{TokenPassword, TokenSecrets};
use hadoop_wire::sasl::SaslError;
use hadoop_wire::token::delegation::{
    short_name, DelegationError, DelegationIdentifier as _, DelegationKey, DelegationStore,
    DelegationTokenSecrets, Setting,
};
use hadoop_wire::token::Limits;
use hadoop_wire::token::{Token, TokenError, TokenIdentifier};
use hadoop_wire::yarn::{acp, APPLICATION_CLIENT_PROTOCOL, APPLICATION_CLIENT_VERSION};
use ipc::server::{Call, CallError, Registry, Reply};
use prost::Message;

pub use hadoop_wire::pb::hadoop::common::{
    CancelDelegationTokenRequestProto, CancelDelegationTokenResponseProto,
    GetDelegationTokenRequestProto, GetDelegationTokenResponseProto,
    RenewDelegationTokenRequestProto, RenewDelegationTokenResponseProto,
};
pub use hadoop_wire::token::delegation::{DelegationConfig, DelegationSecretManager};
pub use hadoop_wire::token::rm_delegation::{
    RmDelegationTokenIdentifier, KIND_RM_DELEGATION, MAX_IDENTIFIER_BYTES,
};

use crate::app_service::AppsRt;
use crate::apps::exc;
use crate::dispatcher::wall_ms;
use crate::state_store::{
    DtKeyRec, DtKeyRemovedRec, DtTokenRec, DtTokenRemovedRec, Rec, Recovered,
};

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

/// `ClientRMService`'s refusal of get/renew/cancel over a connection that is not Kerberos
/// (security on).
pub const NOT_KERBEROS_GET: &str =
    "Delegation Token can be issued only with kerberos authentication";
pub const NOT_KERBEROS_RENEW: &str =
    "Delegation Token can be renewed only with kerberos authentication";
pub const NOT_KERBEROS_CANCEL: &str =
    "Delegation Token can be cancelled only with kerberos authentication";

/// The RM's settings (Hadoop 3.5.0's yarn-default.xml by default).
pub type RmDelegationConfig = DelegationConfig;

/// `RMDelegationTokenSecretManager`: RM identifiers, persisted to the state store.
pub type RmDelegationTokenSecretManager =
    DelegationSecretManager<RmDelegationTokenIdentifier, StateStoreSink>;

/// Why the configuration or the manager could not be made.
#[derive(Debug, thiserror::Error)]
pub enum DtError {
    #[error("{key}: {reason}")]
    Config { key: &'static str, reason: String },
    #[error(transparent)]
    Manager(#[from] DelegationError),
}

/// The RM's configuration key of a setting.
fn key_of(setting: Setting) -> &'static str {
    match setting {
        Setting::KeyUpdateInterval => KEY_UPDATE_INTERVAL_KEY,
        Setting::MaxLifetime => MAX_LIFETIME_KEY,
        Setting::RenewInterval => RENEW_INTERVAL_KEY,
        Setting::RemoverScanInterval => REMOVE_SCAN_INTERVAL_KEY,
        Setting::UtcOffset => "user.timezone",
    }
}

/// The RM's settings from `conf` (defaults where unset), checked.
pub fn config_from_conf(conf: &conf::Configuration) -> Result<DelegationConfig, DtError> {
    let d = DelegationConfig::default();
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
    let cfg = DelegationConfig {
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
    cfg.check().map_err(|e| DtError::Config {
        key: key_of(e.setting),
        reason: e.reason.into(),
    })?;
    Ok(cfg)
}

/// The RM's [`DelegationStore`]: each change to keys and tokens becomes a state-store record,
/// queued here until `AppsRt::with_delegation` writes it.
#[derive(Debug, Default)]
pub struct StateStoreSink {
    recs: Vec<Rec>,
}

impl StateStoreSink {
    /// The records queued since the last call, oldest first.
    pub fn take(&mut self) -> Vec<Rec> {
        std::mem::take(&mut self.recs)
    }
}

impl DelegationStore for StateStoreSink {
    fn store_key(&mut self, k: &DelegationKey) {
        self.recs.push(Rec::DtKey(DtKeyRec {
            key_id: k.key_id,
            expiry_date: k.expiry_date,
            bytes: k.bytes.clone(),
        }));
    }
    fn remove_key(&mut self, key_id: i32) {
        self.recs
            .push(Rec::DtKeyRemoved(DtKeyRemovedRec { key_id }));
    }
    fn store_token(&mut self, identifier: &[u8], renew_date: i64, sequence: i32) {
        self.recs.push(Rec::DtToken(DtTokenRec {
            identifier: identifier.to_vec(),
            renew_date,
            sequence,
        }));
    }
    fn remove_token(&mut self, identifier: &[u8]) {
        self.recs.push(Rec::DtTokenRemoved(DtTokenRemovedRec {
            identifier: identifier.to_vec(),
        }));
    }
}

/// Everything the store must hold for `m` now (keys, tokens with the sequence counter), for a
/// compaction.
pub fn snapshot(m: &RmDelegationTokenSecretManager) -> Vec<Rec> {
    let mut sink = StateStoreSink::default();
    m.persist_all(&mut sink);
    sink.take()
}

/// Rebuilds `m` from what the state store replayed ([`DelegationSecretManager::recover`]);
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

/// The RM's manager behind a lock, with the clock the SASL path reads and the short-name
/// mapping of token owners; the TOKEN secrets of the client port.
pub struct RmDelegationSecrets {
    secrets: DelegationTokenSecrets<
        Box<dyn Fn() -> i64 + Send + Sync>,
        RmDelegationTokenIdentifier,
        StateStoreSink,
    >,
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
            secrets: DelegationTokenSecrets::new(manager, clock),
            names,
        }
    }

    pub fn read(&self) -> std::sync::RwLockReadGuard<'_, RmDelegationTokenSecretManager> {
        self.secrets.read()
    }

    pub fn write(&self) -> std::sync::RwLockWriteGuard<'_, RmDelegationTokenSecretManager> {
        self.secrets.write()
    }

    pub fn now(&self) -> i64 {
        self.secrets.now()
    }

    /// The short name of `name`.
    pub fn short(&self, name: &str) -> String {
        self.names.short(name)
    }
}

/// The user is the owner's short name (the RM authorizes by it).
impl TokenSecrets for RmDelegationSecrets {
    fn retrieve(&self, identifier: &[u8]) -> Result<TokenPassword, SaslError> {
        let (password, id) = self.secrets.retrieve_token(identifier)?;
        Ok(TokenPassword {
            password: password.to_vec(),
            user: self.short(id.owner()),
        })
    }
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

fn decode_token<R: Message + Default>(
    c: &Call<'_>,
    token: impl FnOnce(R) -> hadoop_wire::pb::hadoop::common::TokenProto,
) -> Result<Token, CallError> {
    let req = R::decode(c.request).map_err(CallError::invalid_request)?;
    Token::from_proto(token(req), &Limits::DEFAULT).map_err(token_error)
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
            let token = decode_token(c, |r: RenewDelegationTokenRequestProto| r.token)?;
            let d = r.delegation().ok_or_else(no_secrets)?.clone();
            let name = user_name(c);
            let renewer = if login_user.as_deref() == Some(name) {
                // "we can always renew our own tokens"
                RmDelegationTokenIdentifier::parse(&token.identifier)
                    .map_err(token_error)?
                    .renewer()
                    .to_string()
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
            let token = decode_token(c, |r: CancelDelegationTokenRequestProto| r.token)?;
            let d = r.delegation().ok_or_else(no_secrets)?.clone();
            let name = user_name(c);
            let short = d.short(name);
            let id = r
                .with_delegation(|m| m.cancel_token_as(&token, name, &short))
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

#[cfg(test)]
mod tests {
    use super::*;
    use hadoop_wire::entropy::SeededEntropy;
    use hadoop_wire::token::secret::create_password;
    use std::collections::BTreeMap;

    /// The records `m` queued since the last call (the state store's view of its changes).
    fn take_recs(m: &mut RmDelegationTokenSecretManager) -> Vec<Rec> {
        m.store_mut().take()
    }

    const T0: i64 = 1_711_242_400_403;
    const DAY: i64 = 86_400_000;

    fn manager() -> (RmDelegationTokenSecretManager, SeededEntropy) {
        let mut e = SeededEntropy(5);
        let mut m = RmDelegationTokenSecretManager::new(RmDelegationConfig::default()).unwrap();
        m.start(&mut e, T0).unwrap();
        (m, e)
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
            m.cancel_token_as(&t, "bob@EXAMPLE.COM", "bob")
                .unwrap_err()
                .to_string(),
            format!("bob@EXAMPLE.COM is not authorized to cancel the token {f}")
        );
        // The owner by its full name, the renewer by its short name.
        m.cancel_token_as(&t, "yarn/rm@EXAMPLE.COM", "yarn")
            .unwrap();
        assert_eq!(
            m.cancel_token_as(&t, "alice@EXAMPLE.COM", "alice")
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
        m.cancel_token_as(&t2, "alice@EXAMPLE.COM", "alice")
            .unwrap();
    }

    #[test]
    fn expired_tokens_and_keys_go_and_are_recorded() {
        let (mut m, mut e) = manager();
        let ops = take_recs(&mut m);
        assert_eq!(
            ops.iter().filter(|o| matches!(o, Rec::DtKey(_))).count(),
            3,
            "key 1, key 1 re-expired at the roll, key 2: {ops:?}"
        );
        let (a, _) = m.create_token("a", "yarn", "", T0).unwrap();
        let (_, tb) = m.create_token("b", "yarn", "", T0).unwrap();
        m.renew_token(&tb, "yarn", T0 + DAY - 1).unwrap();
        take_recs(&mut m);
        assert!(m.tick(&mut e, T0 + 1000).unwrap().is_empty());
        assert_eq!(
            m.tick(&mut e, T0 + DAY + 1).unwrap(),
            vec![a.sequence_number()]
        );
        let ops = take_recs(&mut m);
        assert!(
            ops.contains(&Rec::DtTokenRemoved(DtTokenRemovedRec {
                identifier: a.bytes().to_vec()
            })),
            "{ops:?}"
        );
        let mut now = T0 + DAY + 1;
        for _ in 0..9 {
            now += DAY + 1;
            m.tick(&mut e, now).unwrap();
        }
        let ops = take_recs(&mut m);
        assert!(
            ops.contains(&Rec::DtKeyRemoved(DtKeyRemovedRec { key_id: 1 }))
                && ops.contains(&Rec::DtKeyRemoved(DtKeyRemovedRec { key_id: 2 }))
        );
        assert!(m.all_keys().all(|k| k.expiry_date >= now));
    }

    #[test]
    fn recovery_rebuilds_passwords_and_continues_counters() {
        let (mut m, _) = manager();
        let (id, t) = m.create_token("alice", "yarn", "", T0).unwrap();
        let (gone, tg) = m.create_token("alice", "yarn", "", T0).unwrap();
        m.cancel_token_as(&tg, "alice", "alice").unwrap();
        // Replay the ops as the store would (later ops win).
        let mut keys = BTreeMap::new();
        let mut tokens = BTreeMap::new();
        let mut seq = 0;
        for op in take_recs(&mut m) {
            match op {
                Rec::DtKey(k) => {
                    keys.insert(
                        k.key_id,
                        DelegationKey {
                            key_id: k.key_id,
                            expiry_date: k.expiry_date,
                            bytes: k.bytes,
                        },
                    );
                }
                Rec::DtKeyRemoved(k) => {
                    keys.remove(&k.key_id);
                }
                Rec::DtToken(DtTokenRec {
                    identifier,
                    renew_date,
                    sequence,
                }) => {
                    seq = seq.max(sequence);
                    tokens.insert(identifier, renew_date);
                }
                Rec::DtTokenRemoved(i) => {
                    tokens.remove(&i.identifier);
                }
                other => panic!("not a delegation record: {other:?}"),
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
    fn settings_from_conf() {
        let mut c = conf::Configuration::new();
        assert_eq!(config_from_conf(&c).unwrap(), RmDelegationConfig::default());
        c.set(RENEW_INTERVAL_KEY, "2000");
        c.set(REMOVE_SCAN_INTERVAL_KEY, "1s");
        let d = config_from_conf(&c).unwrap();
        assert_eq!(
            (d.renew_interval_ms, d.remover_scan_interval_ms),
            (2000, 1000)
        );
        c.set(MAX_LIFETIME_KEY, "0");
        assert!(config_from_conf(&c).is_err());
    }
}
