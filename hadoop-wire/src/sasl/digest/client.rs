//! The DIGEST-MD5 client (the JDK's `DigestMD5Client` with Hadoop's callback handler).

use subtle::ConstantTimeEq;

use super::directives::parse_table;
use super::layer::{DigestLayer, SessionKeys};
use super::{
    h_a1, java_bytes, java_parse_int, java_string, lossy, qop_mask, response_value, tokens,
    write_quoted, DigestCipher, ResponseKind, DEFAULT_MAXBUF, MAX_CHALLENGE_LENGTH,
    MAX_RESPONSE_LENGTH, MECHANISM,
};
use crate::entropy::Entropy;
use crate::sasl::{ClientMechanism, Qop, SaslError, SecurityLayer};

/// How a [`DigestClient`] is set up.
#[derive(Clone, PartialEq, Eq)]
pub struct DigestClientConfig {
    /// For TOKEN auth: standard base64 of the token identifier.
    pub username: String,
    /// For TOKEN auth: standard base64 of the token password.
    pub password: String,
    /// Sent as `authzid` and included in A1 when set (DataTransfer sends the username; IPC none).
    pub authzid: Option<String>,
    /// From the server's NEGOTIATE auth: `""` for IPC TOKEN, `"hdfs"` for DataTransfer.
    pub protocol: String,
    /// From the server's NEGOTIATE auth: `"default"` for IPC TOKEN, `"0"` for DataTransfer.
    pub server_name: String,
    /// QOPs in preference order: the first of these that the server offers wins.
    pub qops: Vec<Qop>,
    /// Use only this cipher (`com.sun.security.sasl.digest.cipher`). `None`: the JDK's choice,
    /// the first offered cipher in `CIPHER_TOKENS` order at the highest strength (`3des`).
    pub cipher: Option<DigestCipher>,
    /// This side's receive buffer, sent as `maxbuf`.
    pub max_buf: u32,
}

impl std::fmt::Debug for DigestClientConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DigestClientConfig")
            .field("username", &self.username)
            .field("authzid", &self.authzid)
            .field("protocol", &self.protocol)
            .field("server_name", &self.server_name)
            .field("qops", &self.qops)
            .field("cipher", &self.cipher)
            .field("max_buf", &self.max_buf)
            .finish_non_exhaustive()
    }
}

impl DigestClientConfig {
    /// Hadoop IPC's TOKEN auth: protocol `""`, server name `"default"`, no authzid.
    pub fn ipc(username: String, password: String, qops: Vec<Qop>) -> DigestClientConfig {
        DigestClientConfig {
            username,
            password,
            authzid: None,
            protocol: String::new(),
            server_name: super::IPC_SERVER_NAME.into(),
            qops,
            cipher: None,
            max_buf: DEFAULT_MAXBUF,
        }
    }

    /// The DataTransfer handshake: protocol `"hdfs"`, server name `"0"`, authzid = username.
    pub fn data_transfer(username: String, password: String, qops: Vec<Qop>) -> DigestClientConfig {
        DigestClientConfig {
            authzid: Some(username.clone()),
            protocol: super::DATA_TRANSFER_PROTOCOL.into(),
            server_name: super::DATA_TRANSFER_SERVER_NAME.into(),
            ..DigestClientConfig::ipc(username, password, qops)
        }
    }

    fn check(&self) -> Result<(), SaslError> {
        if self.qops.is_empty() {
            return Err(SaslError::Config(
                "DIGEST-MD5 client: no QOP requested".into(),
            ));
        }
        if i32::try_from(self.max_buf).is_err() {
            return Err(SaslError::Config(format!(
                "DIGEST-MD5 client: max_buf {} is not a Java int",
                self.max_buf
            )));
        }
        Ok(())
    }
}

enum State {
    /// Waiting for the server's digest-challenge.
    Initial,
    /// Response sent; waiting for `rspauth`.
    Responded,
    Complete,
    Failed,
}

/// What the response committed to; `rspauth` is checked against `expected_rspauth`.
struct Negotiated {
    qop: Qop,
    expected_rspauth: [u8; 32],
    keys: Option<SessionKeys>,
    server_max_buf: u32,
}

/// The DIGEST-MD5 client. See the [module docs](super).
///
/// The password is dropped once the response is computed (the client keeps H(A1) and the
/// expected `rspauth`, not the password).
pub struct DigestClient {
    config: DigestClientConfig,
    digest_uri: String,
    cnonce: String,
    state: State,
    negotiated: Option<Negotiated>,
    layer: Option<DigestLayer>,
}

impl std::fmt::Debug for DigestClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DigestClient")
            .field("config", &self.config)
            .field("cnonce", &self.cnonce)
            .finish_non_exhaustive()
    }
}

/// Directives of a digest-challenge the JDK client knows (its `DIRECTIVE_KEY`).
const KEYS: [&str; 9] = [
    "realm",
    "qop",
    "algorithm",
    "nonce",
    "maxbuf",
    "charset",
    "cipher",
    "rspauth",
    "stale",
];
const REALM: usize = 0;
const QOP: usize = 1;
const ALGORITHM: usize = 2;
const NONCE: usize = 3;
const MAXBUF: usize = 4;
const CHARSET: usize = 5;
const CIPHER: usize = 6;
const RESPONSE_AUTH: usize = 7;

fn sasl(msg: impl Into<String>) -> SaslError {
    SaslError::Sasl(msg.into())
}

impl DigestClient {
    /// A client with a fresh cnonce (30 random bytes, base64).
    pub fn new(
        config: DigestClientConfig,
        entropy: &mut dyn Entropy,
    ) -> Result<DigestClient, SaslError> {
        let cnonce = super::generate_nonce(entropy)?;
        DigestClient::with_cnonce(config, cnonce)
    }

    /// A client with a fixed cnonce (tests, vectors).
    pub fn with_cnonce(
        config: DigestClientConfig,
        cnonce: impl Into<String>,
    ) -> Result<DigestClient, SaslError> {
        config.check()?;
        Ok(DigestClient {
            digest_uri: format!("{}/{}", config.protocol, config.server_name),
            config,
            cnonce: cnonce.into(),
            state: State::Initial,
            negotiated: None,
            layer: None,
        })
    }

    pub fn cnonce(&self) -> &str {
        &self.cnonce
    }

    /// The keys of the security layer, once the response is sent with `auth-int` / `auth-conf`
    /// (they are fixed by then; `rspauth` only confirms them).
    pub fn session_keys(&self) -> Option<&SessionKeys> {
        self.negotiated.as_ref().and_then(|n| n.keys.as_ref())
    }

    /// The negotiated cipher, once the response is sent with `auth-conf`.
    pub fn negotiated_cipher(&self) -> Option<DigestCipher> {
        self.session_keys().and_then(SessionKeys::cipher)
    }

    /// The security layer as its concrete type (once complete with `auth-int` / `auth-conf`;
    /// taken once, shared with [`ClientMechanism::take_layer`]).
    pub fn take_digest_layer(&mut self) -> Option<DigestLayer> {
        self.layer.take()
    }

    /// Step 2: the JDK's `processChallenge`, `checkQopSupport` and `generateClientResponse`.
    fn respond(&mut self, challenge: &[u8]) -> Result<Vec<u8>, SaslError> {
        let t = parse_table(challenge, &KEYS, Some(REALM))?;

        // Latin-1 until the server says otherwise.
        let mut utf8 = false;
        if let Some(cs) = t.get(CHARSET) {
            if java_string(cs, utf8) != "utf-8" {
                return Err(sasl(format!(
                    "DIGEST-MD5: digest-challenge format violation. Unrecognised charset value: {}",
                    lossy(cs)
                )));
            }
            utf8 = true;
        }

        match t.get(ALGORITHM) {
            None => {
                return Err(sasl(
                    "DIGEST-MD5: Digest-challenge format violation: algorithm directive missing",
                ))
            }
            // The JDK prints the byte array's identity here; we print its text.
            Some(a) if java_string(a, utf8) != "md5-sess" => {
                return Err(sasl(format!(
                    "DIGEST-MD5: Digest-challenge format violation. Invalid value for 'algorithm' directive: {}",
                    lossy(a)
                )))
            }
            Some(_) => {}
        }

        let Some(nonce) = t.get(NONCE) else {
            return Err(sasl(
                "DIGEST-MD5: Digest-challenge format violation: nonce directive missing",
            ));
        };

        // Hadoop's callback answers a single realm with it (RealmCallback's default) and leaves
        // a choice among several unanswered, which the JDK rejects.
        let realm = if t.realm_choices.len() > 1 {
            return Err(sasl("DIGEST-MD5: Invalid realm chosen"));
        } else {
            t.get(REALM)
                .map(|r| java_string(r, utf8).into_owned())
                .unwrap_or_default()
        };

        let server_max_buf = match t.get(MAXBUF) {
            None => DEFAULT_MAXBUF,
            Some(v) => {
                let s = java_string(v, utf8);
                // The JDK throws NumberFormatException here; a negative value breaks its layer.
                match java_parse_int(&s, 10).map(u32::try_from) {
                    Some(Ok(n)) => n,
                    _ => {
                        return Err(sasl(format!(
                        "DIGEST-MD5: digest-challenge format violation. Invalid maxbuf value: {s}"
                    )))
                    }
                }
            }
        };

        // checkQopSupport: the first of our QOPs that the server offers.
        let offered = t
            .get(QOP)
            .map(|q| qop_mask(&java_string(q, utf8)))
            .unwrap_or(Qop::Auth.mask());
        let Some(qop) = self
            .config
            .qops
            .iter()
            .copied()
            .find(|q| q.mask() & offered != 0)
        else {
            return Err(sasl(
                "DIGEST-MD5: No common protection layer between client and server",
            ));
        };
        let cipher = if qop == Qop::AuthConf {
            Some(self.choose_cipher(t.get(CIPHER), utf8)?)
        } else {
            None
        };

        // generateClientResponse.
        let c = &self.config;
        let mut out = Vec::with_capacity(256 + c.username.len());
        if utf8 {
            out.extend_from_slice(b"charset=");
            out.extend_from_slice(t.get(CHARSET).unwrap_or_default());
            out.push(b',');
        }
        out.extend_from_slice(b"username=\"");
        write_quoted(&mut out, &java_bytes(&c.username, utf8));
        out.extend_from_slice(b"\",");
        if !realm.is_empty() {
            out.extend_from_slice(b"realm=\"");
            write_quoted(&mut out, &java_bytes(&realm, utf8));
            out.extend_from_slice(b"\",");
        }
        out.extend_from_slice(b"nonce=\"");
        write_quoted(&mut out, nonce);
        out.extend_from_slice(b"\",nc=00000001,cnonce=\"");
        write_quoted(&mut out, self.cnonce.as_bytes());
        out.extend_from_slice(b"\",digest-uri=\"");
        out.extend_from_slice(&java_bytes(&self.digest_uri, utf8));
        out.extend_from_slice(b"\",maxbuf=");
        out.extend_from_slice(c.max_buf.to_string().as_bytes());
        out.extend_from_slice(b",response=");
        // The JDK encodes authzid as UTF-8 always.
        let authzid = c.authzid.as_deref().map(str::as_bytes);
        let cnonce = self.cnonce.as_bytes();
        let h = h_a1(
            &c.username,
            &realm,
            &c.password,
            nonce,
            cnonce,
            authzid,
            utf8,
        );
        out.extend_from_slice(&response_value(
            &h,
            nonce,
            cnonce,
            qop,
            &self.digest_uri,
            utf8,
            ResponseKind::Client,
        ));
        out.extend_from_slice(b",qop=");
        out.extend_from_slice(qop.sasl_name().as_bytes());
        if let Some(cipher) = cipher {
            out.extend_from_slice(b",cipher=\"");
            out.extend_from_slice(cipher.token().as_bytes());
            out.push(b'"');
        }
        if let Some(a) = authzid {
            out.extend_from_slice(b",authzid=\"");
            write_quoted(&mut out, a);
            out.push(b'"');
        }
        if out.len() > MAX_RESPONSE_LENGTH {
            return Err(sasl(format!(
                "DIGEST-MD5: digest-response size too large. Length: {}",
                out.len()
            )));
        }

        let expected_rspauth = response_value(
            &h,
            nonce,
            cnonce,
            qop,
            &self.digest_uri,
            utf8,
            ResponseKind::Server,
        );
        let keys = match qop {
            Qop::Auth => None,
            _ => Some(SessionKeys::new(h, qop, cipher)?),
        };
        self.negotiated = Some(Negotiated {
            qop,
            expected_rspauth,
            keys,
            server_max_buf,
        });
        self.config.password = String::new();
        Ok(out)
    }

    /// The JDK's `checkStrengthSupport` + `findCipherAndStrength` (default strengths high,
    /// medium, low; every cipher available on this side).
    fn choose_cipher(&self, offered: Option<&[u8]>, utf8: bool) -> Result<DigestCipher, SaslError> {
        let Some(offered) = offered else {
            return Err(sasl(
                "DIGEST-MD5: server did not specify cipher to use for 'auth-conf'",
            ));
        };
        let options = java_string(offered, utf8);
        let server = tokens(&options)
            .filter_map(DigestCipher::from_token)
            .fold(0u8, |m, c| m | c.bit());
        if server == 0 {
            return Err(sasl(format!(
                "DIGEST-MD5: Client supports none of these cipher suites: {options}"
            )));
        }
        for strength in [4, 2, 1] {
            if let Some(c) = DigestCipher::ALL.into_iter().find(|&c| {
                server & c.bit() != 0
                    && c.strength() == strength
                    && self.config.cipher.is_none_or(|want| want == c)
            }) {
                return Ok(c);
            }
        }
        Err(sasl(
            "DIGEST-MD5: Unable to negotiate a strength level for 'auth-conf'",
        ))
    }

    /// Step 3: the JDK's `validateResponseValue`.
    fn check_rspauth(&mut self, challenge: &[u8]) -> Result<(), SaslError> {
        let t = parse_table(challenge, &KEYS, None)?;
        let Some(rspauth) = t.get(RESPONSE_AUTH) else {
            // "Authenication" is the JDK's spelling.
            return Err(sasl(
                "DIGEST-MD5: Authenication failed. Expecting 'rspauth' authentication success message",
            ));
        };
        let Some(n) = self.negotiated.as_ref() else {
            return Err(sasl("DIGEST-MD5: Client at illegal state"));
        };
        if !bool::from(n.expected_rspauth.ct_eq(rspauth)) {
            return Err(sasl(
                "Server's rspauth value does not match what client expects",
            ));
        }
        self.layer = n.keys.as_ref().map(|k| k.client_layer(n.server_max_buf));
        Ok(())
    }
}

impl ClientMechanism for DigestClient {
    fn mechanism(&self) -> &str {
        MECHANISM
    }

    fn has_initial_response(&self) -> bool {
        false
    }

    /// First call: the server's digest-challenge → the digest-response. Second call:
    /// `rspauth=…` → an empty reply (the JDK returns `null`: no token to send); the client is
    /// then complete. Any further call fails.
    fn evaluate_challenge(&mut self, challenge: &[u8]) -> Result<Vec<u8>, SaslError> {
        if challenge.len() > MAX_CHALLENGE_LENGTH {
            return Err(sasl(format!(
                "DIGEST-MD5: Invalid digest-challenge length. Got:  {} Expected < {MAX_CHALLENGE_LENGTH}",
                challenge.len()
            )));
        }
        match self.state {
            State::Initial => {
                self.state = State::Failed;
                let out = self.respond(challenge)?;
                self.state = State::Responded;
                Ok(out)
            }
            State::Responded => {
                self.state = State::Failed;
                self.check_rspauth(challenge)?;
                self.state = State::Complete;
                Ok(Vec::new())
            }
            State::Complete | State::Failed => Err(sasl("DIGEST-MD5: Client at illegal state")),
        }
    }

    fn is_complete(&self) -> bool {
        matches!(self.state, State::Complete)
    }

    fn negotiated_qop(&self) -> Option<Qop> {
        match self.state {
            State::Complete => self.negotiated.as_ref().map(|n| n.qop),
            _ => None,
        }
    }

    fn take_layer(&mut self) -> Option<Box<dyn SecurityLayer>> {
        let layer = self.take_digest_layer()?;
        Some(Box::new(layer))
    }
}
