//! The DIGEST-MD5 server (the JDK's `DigestMD5Server` with Hadoop's callback handlers).

use subtle::ConstantTimeEq;

use super::directives::parse_table;
use super::layer::{DigestLayer, SessionKeys};
use super::{
    h_a1, java_eq_ignore_case, java_parse_int, java_string, lossy, response_value, write_quoted,
    DigestCipher, ResponseKind, DEFAULT_MAXBUF, MAX_RESPONSE_LENGTH, MECHANISM,
};
use crate::entropy::Entropy;
use crate::sasl::{Qop, SaslError, SecurityLayer, ServerMechanism};

/// Looks up the password of `(username, realm)`: for TOKEN auth, decode the base64 username into
/// a token identifier and answer base64 of its password. An error is passed through unchanged
/// (Hadoop reports the callback's own exception, e.g. `SecretManager$InvalidToken`).
pub type PasswordCallback = Box<dyn FnMut(&str, &str) -> Result<String, SaslError> + Send>;

/// Who may act as whom (Hadoop's `AuthorizeCallback` handling).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthzPolicy {
    /// The authzid must equal the username (IPC's `SaslDigestCallbackHandler`).
    SameAsUser,
    /// Any authzid is authorized (DataTransfer's `SaslServerCallbackHandler`).
    Any,
}

/// How a [`DigestServer`] is set up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DigestServerConfig {
    /// `""` for IPC, `"hdfs"` for DataTransfer; the digest-uri is `protocol/server_name`.
    pub protocol: String,
    /// `"default"` for IPC, `"0"` for DataTransfer; also the one realm offered.
    pub server_name: String,
    /// The QOPs offered, in configured order (written into the challenge as given).
    pub qops: Vec<Qop>,
    /// This side's receive buffer, announced as `maxbuf` when it is not 65536.
    pub max_buf: u32,
    /// The ciphers offered when `auth-conf` is; always listed in `CIPHER_TOKENS` order.
    pub ciphers: Vec<DigestCipher>,
    /// Whether a client may send an authzid other than its username.
    pub authz: AuthzPolicy,
}

impl DigestServerConfig {
    /// Hadoop IPC's TOKEN auth: protocol `""`, server name and realm `"default"`, all ciphers.
    pub fn ipc(qops: Vec<Qop>) -> DigestServerConfig {
        DigestServerConfig {
            protocol: String::new(),
            server_name: super::IPC_SERVER_NAME.into(),
            qops,
            max_buf: DEFAULT_MAXBUF,
            ciphers: DigestCipher::ALL.to_vec(),
            authz: AuthzPolicy::SameAsUser,
        }
    }

    /// The DataTransfer handshake: protocol `"hdfs"`, server name and realm `"0"`, any authzid.
    pub fn data_transfer(qops: Vec<Qop>) -> DigestServerConfig {
        DigestServerConfig {
            protocol: super::DATA_TRANSFER_PROTOCOL.into(),
            server_name: super::DATA_TRANSFER_SERVER_NAME.into(),
            authz: AuthzPolicy::Any,
            ..DigestServerConfig::ipc(qops)
        }
    }

    fn check(&self) -> Result<(), SaslError> {
        if self.qops.is_empty() {
            return Err(SaslError::Config(
                "DIGEST-MD5 server: no QOP offered".into(),
            ));
        }
        if self.qops.contains(&Qop::AuthConf) && self.ciphers.is_empty() {
            return Err(SaslError::Config(
                "DIGEST-MD5 server: auth-conf offered without a cipher".into(),
            ));
        }
        if i32::try_from(self.max_buf).is_err() {
            return Err(SaslError::Config(format!(
                "DIGEST-MD5 server: max_buf {} is not a Java int",
                self.max_buf
            )));
        }
        Ok(())
    }
}

enum State {
    /// Waiting for the (ignored) initial response; the challenge comes next.
    Initial,
    /// Challenge sent; waiting for the digest-response.
    Challenged,
    Complete,
    Failed,
}

/// What a successful exchange settled.
struct Outcome {
    authzid: String,
    qop: Qop,
    keys: Option<SessionKeys>,
    layer: Option<DigestLayer>,
}

/// The DIGEST-MD5 server. See the [module docs](super).
pub struct DigestServer {
    config: DigestServerConfig,
    digest_uri: String,
    nonce: String,
    password: PasswordCallback,
    state: State,
    outcome: Option<Outcome>,
}

impl std::fmt::Debug for DigestServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DigestServer")
            .field("config", &self.config)
            .field("nonce", &self.nonce)
            .field("complete", &self.outcome.is_some())
            .finish_non_exhaustive()
    }
}

/// Directives of a digest-response the JDK server knows (its `DIRECTIVE_KEY`). The count is
/// `nonce-count`: the `nc` that clients send is not in the table, so the JDK ignores it.
const KEYS: [&str; 13] = [
    "username",
    "realm",
    "nonce",
    "cnonce",
    "nonce-count",
    "qop",
    "digest-uri",
    "response",
    "maxbuf",
    "charset",
    "cipher",
    "authzid",
    "auth-param",
];
const USERNAME: usize = 0;
const REALM: usize = 1;
const NONCE: usize = 2;
const CNONCE: usize = 3;
const NONCE_COUNT: usize = 4;
const QOP: usize = 5;
const DIGEST_URI: usize = 6;
const RESPONSE: usize = 7;
const MAXBUF: usize = 8;
const CHARSET: usize = 9;
const CIPHER: usize = 10;
const AUTHZID: usize = 11;

fn violation(what: &str) -> SaslError {
    SaslError::Sasl(format!(
        "DIGEST-MD5: digest response format violation. {what}"
    ))
}

impl DigestServer {
    /// A server with a fresh nonce (30 random bytes, base64).
    pub fn new(
        config: DigestServerConfig,
        entropy: &mut dyn Entropy,
        password: PasswordCallback,
    ) -> Result<DigestServer, SaslError> {
        let nonce = super::generate_nonce(entropy)?;
        DigestServer::with_nonce(config, nonce, password)
    }

    /// A server with a fixed nonce (tests, vectors).
    pub fn with_nonce(
        config: DigestServerConfig,
        nonce: impl Into<String>,
        password: PasswordCallback,
    ) -> Result<DigestServer, SaslError> {
        config.check()?;
        Ok(DigestServer {
            digest_uri: format!("{}/{}", config.protocol, config.server_name),
            config,
            nonce: nonce.into(),
            password,
            state: State::Initial,
            outcome: None,
        })
    }

    pub fn nonce(&self) -> &str {
        &self.nonce
    }

    pub fn config(&self) -> &DigestServerConfig {
        &self.config
    }

    /// The keys of the security layer, once complete with `auth-int` / `auth-conf`.
    pub fn session_keys(&self) -> Option<&SessionKeys> {
        self.outcome.as_ref().and_then(|o| o.keys.as_ref())
    }

    /// The negotiated cipher, once complete with `auth-conf`.
    pub fn negotiated_cipher(&self) -> Option<DigestCipher> {
        self.session_keys().and_then(SessionKeys::cipher)
    }

    /// The security layer as its concrete type (once complete with `auth-int` / `auth-conf`;
    /// taken once, shared with [`ServerMechanism::take_layer`]).
    pub fn take_digest_layer(&mut self) -> Option<DigestLayer> {
        self.outcome.as_mut()?.layer.take()
    }

    /// The challenge, in the JDK's order and quoting:
    /// `realm="…",nonce="…",qop="…",[maxbuf="N",]charset=utf-8,[cipher="…",]algorithm=md5-sess`.
    fn challenge(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(160);
        out.extend_from_slice(b"realm=\"");
        write_quoted(&mut out, self.config.server_name.as_bytes());
        out.extend_from_slice(b"\",nonce=\"");
        write_quoted(&mut out, self.nonce.as_bytes());
        out.extend_from_slice(b"\",qop=\"");
        for (i, q) in self.config.qops.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(q.sasl_name().as_bytes());
        }
        out.extend_from_slice(b"\",");
        if self.config.max_buf != DEFAULT_MAXBUF {
            out.extend_from_slice(format!("maxbuf=\"{}\",", self.config.max_buf).as_bytes());
        }
        out.extend_from_slice(b"charset=utf-8,");
        if self.config.qops.contains(&Qop::AuthConf) {
            out.extend_from_slice(b"cipher=\"");
            let mut first = true;
            for c in DigestCipher::ALL {
                if self.config.ciphers.contains(&c) {
                    if !first {
                        out.push(b',');
                    }
                    first = false;
                    out.extend_from_slice(c.token().as_bytes());
                }
            }
            out.extend_from_slice(b"\",");
        }
        out.extend_from_slice(b"algorithm=md5-sess");
        out
    }

    /// The JDK's `validateClientResponse`, check by check in its order.
    fn validate(&mut self, response: &[u8]) -> Result<(Vec<u8>, Outcome), SaslError> {
        let t = parse_table(response, &KEYS, None)?;
        // The server always offers UTF-8, so every value is decoded as UTF-8.
        let utf8 = true;

        if let Some(cs) = t.get(CHARSET) {
            if java_string(cs, utf8) != "utf-8" {
                return Err(violation(&format!(
                    "Incompatible charset value: {}",
                    lossy(cs)
                )));
            }
        }

        let client_max_buf = match t.get(MAXBUF) {
            None => DEFAULT_MAXBUF,
            Some(v) => {
                let s = java_string(v, utf8);
                // The JDK throws NumberFormatException here; a negative value breaks its layer.
                match java_parse_int(&s, 10).map(u32::try_from) {
                    Some(Ok(n)) => n,
                    _ => return Err(violation(&format!("Invalid maxbuf value: {s}"))),
                }
            }
        };

        let Some(username) = t.get(USERNAME) else {
            return Err(violation("Missing username."));
        };
        let username = java_string(username, utf8).into_owned();

        let realm = t
            .get(REALM)
            .map(|r| java_string(r, utf8).into_owned())
            .unwrap_or_default();
        if realm != self.config.server_name {
            return Err(violation(&format!("Nonexistent realm: {realm}")));
        }

        let Some(nonce) = t.get(NONCE) else {
            return Err(violation("Missing nonce."));
        };
        if nonce != self.nonce.as_bytes() {
            return Err(violation("Mismatched nonce."));
        }

        let Some(cnonce) = t.get(CNONCE) else {
            return Err(violation("Missing cnonce."));
        };

        if let Some(nc) = t.get(NONCE_COUNT) {
            // An unparsable count is a NumberFormatException in the JDK.
            if java_parse_int(&java_string(nc, utf8), 16) != Some(1) {
                return Err(violation(&format!(
                    "Nonce count does not match: {}",
                    lossy(nc)
                )));
            }
        }

        let qop_text = t
            .get(QOP)
            .map(|q| java_string(q, utf8).into_owned())
            .unwrap_or_else(|| "auth".into());
        // Exact names: the JDK switches on the string.
        let qop = match qop_text.as_str() {
            "auth" => Qop::Auth,
            "auth-int" => Qop::AuthInt,
            "auth-conf" => Qop::AuthConf,
            _ => return Err(violation(&format!("Invalid QOP: {qop_text}"))),
        };
        if !self.config.qops.contains(&qop) {
            return Err(SaslError::Sasl(format!(
                "DIGEST-MD5: server does not support  qop: {qop_text}"
            )));
        }

        let mut cipher = None;
        if qop == Qop::AuthConf {
            let Some(c) = t.get(CIPHER) else {
                return Err(violation("No cipher specified."));
            };
            let c = java_string(c, utf8);
            match DigestCipher::from_token(&c) {
                Some(found) if self.config.ciphers.contains(&found) => cipher = Some(found),
                _ => {
                    return Err(SaslError::Sasl(format!(
                        "DIGEST-MD5: server does not support cipher: {c}"
                    )))
                }
            }
        }

        let uri = t.get(DIGEST_URI).map(|u| java_string(u, utf8));
        let digest_uri = match uri {
            Some(u) if java_eq_ignore_case(&self.digest_uri, &u) => u.into_owned(),
            other => {
                return Err(violation(&format!(
                    "Mismatched URI: {}; expecting: {}",
                    other.as_deref().unwrap_or("null"),
                    self.digest_uri
                )))
            }
        };

        let Some(client_response) = t.get(RESPONSE) else {
            // Two spaces, as in the JDK.
            return Err(SaslError::Sasl(
                "DIGEST-MD5: digest response format  violation. Missing response.".into(),
            ));
        };

        let authzid_bytes = t.get(AUTHZID);
        let authzid = match authzid_bytes {
            Some(a) => java_string(a, utf8).into_owned(),
            None => username.clone(),
        };

        let password = (self.password)(&username, &realm)?;

        let h = h_a1(
            &username,
            &realm,
            &password,
            self.nonce.as_bytes(),
            cnonce,
            authzid_bytes,
            utf8,
        );
        let nonce = self.nonce.as_bytes();
        let expected = response_value(
            &h,
            nonce,
            cnonce,
            qop,
            &digest_uri,
            utf8,
            ResponseKind::Client,
        );
        if !bool::from(expected.ct_eq(client_response)) {
            return Err(violation("Mismatched response."));
        }

        if self.config.authz == AuthzPolicy::SameAsUser && username != authzid {
            return Err(SaslError::Sasl(format!(
                "DIGEST-MD5: {username} is not authorized to act as {authzid}"
            )));
        }

        let rspauth = response_value(
            &h,
            nonce,
            cnonce,
            qop,
            &digest_uri,
            utf8,
            ResponseKind::Server,
        );
        let mut reply = Vec::with_capacity(8 + 32);
        reply.extend_from_slice(b"rspauth=");
        reply.extend_from_slice(&rspauth);

        let keys = match qop {
            Qop::Auth => None,
            _ => Some(SessionKeys::new(h, qop, cipher)?),
        };
        let layer = keys.as_ref().map(|k| k.server_layer(client_max_buf));
        Ok((
            reply,
            Outcome {
                authzid,
                qop,
                keys,
                layer,
            },
        ))
    }
}

impl ServerMechanism for DigestServer {
    fn mechanism(&self) -> &str {
        MECHANISM
    }

    /// First call: the challenge (a non-empty initial response is ignored, as the JDK does: no
    /// subsequent authentication). Second call: checks the digest-response and answers
    /// `rspauth=<32 hex>`; the server is then complete. Any further call fails.
    fn evaluate_response(&mut self, response: &[u8]) -> Result<Vec<u8>, SaslError> {
        if response.len() > MAX_RESPONSE_LENGTH {
            return Err(SaslError::Sasl(format!(
                "DIGEST-MD5: Invalid digest response length. Got:  {} Expected < {MAX_RESPONSE_LENGTH}",
                response.len()
            )));
        }
        match self.state {
            State::Initial => {
                self.state = State::Challenged;
                Ok(self.challenge())
            }
            State::Challenged => {
                self.state = State::Failed;
                let (reply, outcome) = self.validate(response)?;
                self.outcome = Some(outcome);
                self.state = State::Complete;
                Ok(reply)
            }
            State::Complete | State::Failed => Err(SaslError::Sasl(
                "DIGEST-MD5: Server at illegal state".into(),
            )),
        }
    }

    fn is_complete(&self) -> bool {
        matches!(self.state, State::Complete)
    }

    /// The authzid if the client sent one, else its username.
    fn authorization_id(&self) -> Option<&str> {
        self.outcome.as_ref().map(|o| o.authzid.as_str())
    }

    fn negotiated_qop(&self) -> Option<Qop> {
        self.outcome.as_ref().map(|o| o.qop)
    }

    fn take_layer(&mut self) -> Option<Box<dyn SecurityLayer>> {
        let layer = self.take_digest_layer()?;
        Some(Box::new(layer))
    }
}
