//! SASL settings from Hadoop's configuration, the way Java reads them.
//!
//! - `hadoop.security.authentication` (`simple` | `kerberos` | `token`): a client is secure
//!   unless it is `simple`; a server offers this method, after TOKEN when it has token secrets.
//! - `hadoop.rpc.protection` (`authentication`, `integrity`, `privacy`, a comma list): what a
//!   server accepts; a client's preference order.
//! - `hadoop.security.sasl.mechanism` (`DIGEST-MD5`) and
//!   `ipc.client.fallback-to-simple-auth-allowed` (false).
//!
//! The negotiation itself is `hadoop_wire::sasl`; this module only turns keys into its types,
//! and picks a client's token out of a Credentials file the way Java's token selectors do
//! (kind, and service `ip:port` of the server).

use std::net::SocketAddr;
use std::sync::Arc;

use conf::Configuration;
use hadoop_wire::sasl::client::{ClientAuth, TokenCredential};
use hadoop_wire::sasl::message::{AuthMethod, DEFAULT_TOKEN_MECHANISM};
use hadoop_wire::sasl::server::{ServerAuth, TokenSecrets};
use hadoop_wire::sasl::{parse_protection, Qop, SaslError};
use hadoop_wire::token::credentials::Credentials;

fn get<'a>(conf: &'a Configuration, key: &str, default: &'a str) -> &'a str {
    conf.get(key).unwrap_or(default)
}

fn method(conf: &Configuration) -> Result<AuthMethod, SaslError> {
    let v = get(conf, "hadoop.security.authentication", "simple");
    AuthMethod::from_conf(v).ok_or_else(|| {
        SaslError::Config(format!(
            "hadoop.security.authentication: unknown method {v:?} (simple, kerberos, token)"
        ))
    })
}

/// `hadoop.rpc.protection`.
pub fn protection(conf: &Configuration) -> Result<Vec<Qop>, SaslError> {
    parse_protection(get(conf, "hadoop.rpc.protection", "authentication"))
}

/// A server's auth: the configured method, TOKEN first when `secrets` are given.
pub fn server_auth(
    conf: &Configuration,
    secrets: Option<Arc<dyn TokenSecrets>>,
) -> Result<ServerAuth, SaslError> {
    ServerAuth::new(method(conf)?, secrets, protection(conf)?)?.with_token_mechanism(get(
        conf,
        "hadoop.security.sasl.mechanism",
        DEFAULT_TOKEN_MECHANISM,
    ))
}

/// A daemon's server auth: as [`server_auth`], and when `hadoop.security.authentication` is
/// `kerberos`, KERBEROS with the daemon's identity (`principal_key`, e.g.
/// `yarn.resourcemanager.principal`, `_HOST` replaced by `host`; `keytab_key`, e.g.
/// `yarn.resourcemanager.keytab`) offered after TOKEN (when `secrets` are given). `host` is
/// asked only then (it may do a reverse lookup). A keytab without the principal fails here, so
/// the daemon does not start.
pub fn daemon_server_auth(
    conf: &Configuration,
    secrets: Option<Arc<dyn TokenSecrets>>,
    principal_key: &str,
    keytab_key: &str,
    host: impl FnOnce() -> String,
) -> Result<ServerAuth, SaslError> {
    if method(conf)? != AuthMethod::Kerberos {
        return server_auth(conf, secrets);
    }
    let k = crate::kerberos::kerberos_server(conf, principal_key, keytab_key, &host())?;
    ServerAuth::with_kerberos(k, secrets, protection(conf)?)?.with_token_mechanism(get(
        conf,
        "hadoop.security.sasl.mechanism",
        DEFAULT_TOKEN_MECHANISM,
    ))
}

/// A client's auth, holding `token` (if any) for the server it connects to.
pub fn client_auth(
    conf: &Configuration,
    token: Option<TokenCredential>,
) -> Result<ClientAuth, SaslError> {
    let fallback = match conf.get("ipc.client.fallback-to-simple-auth-allowed") {
        None => false,
        Some(v) => v.trim().parse::<bool>().map_err(|_| {
            SaslError::Config(format!(
                "ipc.client.fallback-to-simple-auth-allowed: not a boolean: {v:?}"
            ))
        })?,
    };
    Ok(ClientAuth {
        token,
        qops: protection(conf)?,
        token_mechanism: get(
            conf,
            "hadoop.security.sasl.mechanism",
            DEFAULT_TOKEN_MECHANISM,
        )
        .to_string(),
        security_enabled: method(conf)? != AuthMethod::Simple,
        fallback_to_simple_allowed: fallback,
        ..ClientAuth::default()
    })
}

/// The token of `kind` for the server at `addr` (service `ip:port`, Java's
/// `SecurityUtil.buildTokenService` with `hadoop.security.token.service.use_ip` true).
pub fn select_token(creds: &Credentials, kind: &str, addr: SocketAddr) -> Option<TokenCredential> {
    creds
        .find(kind, &addr.to_string())
        .map(|t| TokenCredential {
            identifier: t.identifier.clone(),
            password: t.password.clone(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use hadoop_wire::token::Token;

    #[test]
    fn keys_and_defaults() {
        let mut c = Configuration::new();
        let a = client_auth(&c, None).unwrap();
        assert_eq!(a.qops, [Qop::Auth]);
        assert!(!a.security_enabled && !a.fallback_to_simple_allowed && !a.uses_sasl());
        c.set("hadoop.rpc.protection", "privacy, integrity");
        c.set("hadoop.security.authentication", "Kerberos");
        c.set("ipc.client.fallback-to-simple-auth-allowed", "true");
        let a = client_auth(&c, None).unwrap();
        assert_eq!(a.qops, [Qop::AuthConf, Qop::AuthInt]);
        assert!(a.security_enabled && a.fallback_to_simple_allowed && a.uses_sasl());
        c.set("hadoop.rpc.protection", "secret");
        assert!(client_auth(&c, None).is_err());
        c.set("hadoop.rpc.protection", "integrity");
        c.set("hadoop.security.authentication", "token");
        assert!(server_auth(&c, None).is_err(), "TOKEN needs secrets");
        c.set("hadoop.security.authentication", "simple");
        let s = server_auth(&c, None).unwrap();
        assert_eq!(
            (s.methods(), s.qops()),
            (&[AuthMethod::Simple][..], &[Qop::AuthInt][..])
        );
        c.set("hadoop.security.sasl.mechanism", "SCRAM");
        assert!(server_auth(&c, None).is_err());
    }

    #[test]
    fn a_kerberos_daemon_needs_its_principal_and_keytab() {
        let mut c = Configuration::new();
        let (p, k) = (
            "yarn.resourcemanager.principal",
            "yarn.resourcemanager.keytab",
        );
        let s = daemon_server_auth(&c, None, p, k, || "localhost".into()).unwrap();
        assert_eq!(s.methods(), [AuthMethod::Simple], "simple unless kerberos");
        c.set("hadoop.security.authentication", "kerberos");
        let e = daemon_server_auth(&c, None, p, k, || "localhost".into()).unwrap_err();
        assert!(e.to_string().contains(p), "{e}");
        c.set(p, "rm@EXAMPLE.COM");
        c.set(k, "/nonexistent/rm.keytab");
        let e = daemon_server_auth(&c, None, p, k, || "localhost".into()).unwrap_err();
        assert!(e.to_string().contains("hostname part"), "{e}");
        c.set(p, "rm/_HOST@EXAMPLE.COM");
        let e = daemon_server_auth(&c, None, p, k, || "RM1".into()).unwrap_err();
        assert!(
            e.to_string().starts_with(
                "Kerberos login as rm/rm1@EXAMPLE.COM from keytab /nonexistent/rm.keytab failed"
            ),
            "{e}"
        );
        c.set("hadoop.security.auth_to_local", "RULE:[1:$1");
        let e = daemon_server_auth(&c, None, p, k, || "rm1".into()).unwrap_err();
        assert!(e.to_string().contains("auth_to_local"), "{e}");
    }

    #[test]
    fn the_token_for_a_server_is_chosen_by_kind_and_service() {
        let mut creds = Credentials::default();
        let t = |svc: &str, kind: &str, pw: u8| Token {
            identifier: vec![1, 2],
            password: vec![pw],
            kind: kind.into(),
            service: svc.into(),
        };
        creds.add_token("a", t("127.0.0.1:8041", "NMToken", 1));
        creds.add_token("b", t("127.0.0.1:8042", "NMToken", 2));
        creds.add_token("c", t("127.0.0.1:8042", "HDFS_DELEGATION_TOKEN", 3));
        let addr: SocketAddr = "127.0.0.1:8042".parse().unwrap();
        assert_eq!(select_token(&creds, "NMToken", addr).unwrap().password, [2]);
        assert!(select_token(&creds, "NMToken", "127.0.0.1:1".parse().unwrap()).is_none());
    }
}
