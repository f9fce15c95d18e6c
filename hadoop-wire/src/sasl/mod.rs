//! SASL on Hadoop IPC, sans-IO: the mechanisms, the protection layer, and the negotiation that
//! runs them on callId −33.
//!
//! How the types connect:
//!
//! - A mechanism is a [`ClientMechanism`] or a [`ServerMechanism`]: it turns challenges into
//!   responses until it is complete. [`digest`] is DIGEST-MD5 (RFC 2831 as the JDK runs it), the
//!   mechanism of the TOKEN auth method; [`gssapi`] (client) and [`gssapi_server`] are GSSAPI
//!   (RFC 4752), the mechanism of KERBEROS, over a GSS-API context the caller supplies
//!   ([`gss_context`]: what both sides share once the context is established);
//!   [`kerberos_name`] maps a server's authenticated principals to users
//!   (`hadoop.security.auth_to_local`).
//! - A complete mechanism hands over a [`SecurityLayer`] when the negotiated [`Qop`] is
//!   `auth-int` or `auth-conf`; the connection then wraps every byte it sends and unwraps every
//!   byte it receives through it.
//! - Errors are [`SaslError`]s, each naming the Java exception class Hadoop answers with.

pub mod client;
pub mod digest;
pub mod gss_context;
pub mod gssapi;
pub mod gssapi_server;
pub mod kerberos_name;
pub mod krb5_cfx;
pub mod message;
pub mod server;

/// A quality of protection (`hadoop.rpc.protection` / `javax.security.sasl.qop`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Qop {
    /// `authentication` / `auth`: no security layer.
    Auth,
    /// `integrity` / `auth-int`: every message carries a MAC.
    AuthInt,
    /// `privacy` / `auth-conf`: every message is encrypted and carries a MAC.
    AuthConf,
}

impl Qop {
    /// The SASL token: `auth`, `auth-int`, `auth-conf`.
    pub fn sasl_name(self) -> &'static str {
        match self {
            Qop::Auth => "auth",
            Qop::AuthInt => "auth-int",
            Qop::AuthConf => "auth-conf",
        }
    }

    /// Parses a SASL token (`auth`, `auth-int`, `auth-conf`; ASCII case-insensitive).
    pub fn from_sasl_name(s: &str) -> Option<Qop> {
        [Qop::Auth, Qop::AuthInt, Qop::AuthConf]
            .into_iter()
            .find(|q| q.sasl_name().eq_ignore_ascii_case(s))
    }

    /// The `hadoop.rpc.protection` word: `authentication`, `integrity`, `privacy`.
    pub fn protection_name(self) -> &'static str {
        match self {
            Qop::Auth => "authentication",
            Qop::AuthInt => "integrity",
            Qop::AuthConf => "privacy",
        }
    }

    /// Parses a `hadoop.rpc.protection` word (Java upper-cases it and takes the enum constant).
    pub fn from_protection_name(s: &str) -> Option<Qop> {
        [Qop::Auth, Qop::AuthInt, Qop::AuthConf]
            .into_iter()
            .find(|q| q.protection_name().eq_ignore_ascii_case(s.trim()))
    }

    /// The RFC 4752 security-layer bit: 1, 2, 4.
    pub fn mask(self) -> u8 {
        match self {
            Qop::Auth => 1,
            Qop::AuthInt => 2,
            Qop::AuthConf => 4,
        }
    }

    /// Whether messages go through a security layer after SUCCESS.
    pub fn wraps(self) -> bool {
        self != Qop::Auth
    }
}

/// Parses `hadoop.rpc.protection` (a comma list, in preference order; empty entries skipped).
pub fn parse_protection(list: &str) -> Result<Vec<Qop>, SaslError> {
    let mut out = Vec::new();
    for w in list.split(',').map(str::trim).filter(|w| !w.is_empty()) {
        let q = Qop::from_protection_name(w).ok_or_else(|| {
            SaslError::Config(format!(
                "hadoop.rpc.protection: unknown value {w:?} (authentication, integrity, privacy)"
            ))
        })?;
        if !out.contains(&q) {
            out.push(q);
        }
    }
    if out.is_empty() {
        out.push(Qop::Auth);
    }
    Ok(out)
}

/// Why SASL failed. Each variant names the Java exception class Hadoop sends for it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SaslError {
    /// `javax.security.sasl.SaslException`: the mechanism refused (bad response, bad
    /// challenge, out-of-order sequence number, no common protection, ...).
    #[error("{0}")]
    Sasl(String),
    /// `org.apache.hadoop.security.token.SecretManager$InvalidToken`: the token is unknown,
    /// forged, expired, or made with a key this side does not hold.
    #[error("{0}")]
    InvalidToken(String),
    /// `org.apache.hadoop.security.AccessControlException`: the negotiation itself was refused
    /// (method not enabled, no usable method, fallback to SIMPLE not allowed, ...).
    #[error("{0}")]
    AccessControl(String),
    /// A wrapped message failed its MAC or padding check. The JDK drops such a message silently
    /// (the peer then waits forever); we refuse it and close.
    #[error("{0}")]
    Integrity(String),
    /// Local configuration is unusable.
    #[error("{0}")]
    Config(String),
    /// The random source failed.
    #[error("entropy: {0}")]
    Entropy(String),
}

impl SaslError {
    /// The Java exception class Hadoop reports for this error.
    pub fn java_class(&self) -> &'static str {
        match self {
            SaslError::Sasl(_) | SaslError::Integrity(_) | SaslError::Entropy(_) => {
                "javax.security.sasl.SaslException"
            }
            SaslError::InvalidToken(_) => {
                "org.apache.hadoop.security.token.SecretManager$InvalidToken"
            }
            SaslError::AccessControl(_) => "org.apache.hadoop.security.AccessControlException",
            SaslError::Config(_) => "java.io.IOException",
        }
    }
}

impl From<crate::entropy::EntropyError> for SaslError {
    fn from(e: crate::entropy::EntropyError) -> Self {
        SaslError::Entropy(e.0.to_string())
    }
}

/// The client half of a mechanism.
pub trait ClientMechanism: Send {
    /// The SASL mechanism name (`DIGEST-MD5`, `GSSAPI`).
    fn mechanism(&self) -> &str;
    /// Whether the first message carries data before any challenge (GSSAPI yes, DIGEST-MD5 no).
    fn has_initial_response(&self) -> bool;
    /// Answers the server's challenge (empty for an initial response).
    fn evaluate_challenge(&mut self, challenge: &[u8]) -> Result<Vec<u8>, SaslError>;
    fn is_complete(&self) -> bool;
    /// The negotiated protection, once complete.
    fn negotiated_qop(&self) -> Option<Qop>;
    /// Once complete and only for `auth-int` / `auth-conf`: the security layer (taken once).
    fn take_layer(&mut self) -> Option<Box<dyn SecurityLayer>>;
    /// Once complete, who the mechanism authenticated this client as, when it tells (GSSAPI:
    /// the Kerberos principal). DIGEST-MD5 does not: the token says who the client is.
    fn authenticated_user(&self) -> Option<String> {
        None
    }
}

/// The server half of a mechanism.
pub trait ServerMechanism: Send {
    fn mechanism(&self) -> &str;
    /// Answers the client's response (the first call, with an empty response, makes the
    /// initial challenge for mechanisms that start with one).
    fn evaluate_response(&mut self, response: &[u8]) -> Result<Vec<u8>, SaslError>;
    fn is_complete(&self) -> bool;
    /// The authorized identity, once complete.
    fn authorization_id(&self) -> Option<&str>;
    fn negotiated_qop(&self) -> Option<Qop>;
    fn take_layer(&mut self) -> Option<Box<dyn SecurityLayer>>;
}

/// The negotiated security layer of one connection (both directions).
pub trait SecurityLayer: Send {
    fn qop(&self) -> Qop;
    /// The largest plaintext one `wrap` may carry so that the peer accepts it (its maxbuf minus
    /// this layer's overhead).
    fn max_wrap_input(&self) -> usize;
    /// Appends the wrapped form of `plain` to `out`. An empty `plain` appends nothing and uses
    /// no sequence number.
    fn wrap(&mut self, plain: &[u8], out: &mut Vec<u8>) -> Result<(), SaslError>;
    /// Appends the plaintext of `token` to `out`.
    fn unwrap(&mut self, token: &[u8], out: &mut Vec<u8>) -> Result<(), SaslError>;
}

/// What a complete mechanism negotiated: its protection and, when that wraps, the layer it must
/// hand over (a mechanism that negotiated `auth-int`/`auth-conf` without one is refused).
pub(crate) fn negotiated(
    mechanism: &str,
    qop: Option<Qop>,
    take_layer: impl FnOnce() -> Option<Box<dyn SecurityLayer>>,
) -> Result<(Qop, Option<Box<dyn SecurityLayer>>), SaslError> {
    let qop = qop.unwrap_or(Qop::Auth);
    if !qop.wraps() {
        return Ok((qop, None));
    }
    match take_layer() {
        Some(layer) => Ok((qop, Some(layer))),
        None => Err(SaslError::Sasl(format!(
            "{mechanism} negotiated {} without a security layer",
            qop.sasl_name()
        ))),
    }
}
