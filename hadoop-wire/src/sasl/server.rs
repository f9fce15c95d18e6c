//! The server side of SASL negotiation (Hadoop's `Server.Connection.processSaslMessage`), sans-IO.
//!
//! ```text
//!   ServerAuth (one per server: enabled methods, QOPs, mechanism name, token secrets,
//!               KERBEROS: the acceptor factory and auth_to_local)
//!     │ Arc
//!   ServerNegotiation (one per connection)
//!     on_message(RpcSaslProto bytes) ──> ServerStep::Reply(msg)           send it, keep going
//!                                    ──> ServerStep::Simple { reply }     the client chose SIMPLE
//!                                    ──> ServerStep::Success { reply, Authenticated }
//!                                    ──> Err(ServerFailure)               FATAL, close
//! ```
//!
//! The driver (`ipc::server`) frames the replies with [`super::message::server_frame`], sends
//! SUCCESS *before* switching on the security layer, and from then on unwraps every WRAP packet
//! and wraps every response.
//!
//! TOKEN passwords come from a [`TokenSecrets`]: the DIGEST-MD5 username is the base64 of the
//! token identifier as the client holds it; the secrets verify that identifier (as received, so
//! the HMAC covers the client's bytes) and give its password and its user.
//!
//! KERBEROS runs [`super::gssapi_server::GssapiServer`] over a fresh accepting context per
//! connection; the authenticated principal is mapped to the connection's user by
//! `hadoop.security.auth_to_local` ([`super::kerberos_name::AuthToLocal`]), and SUCCESS carries no
//! token (Java's GSSAPI client refuses one once it is complete).

use std::sync::{Arc, Mutex};

use base64::Engine as _;

use crate::entropy::Entropy;
use crate::pb::hadoop::common::rpc_response_header_proto::RpcErrorCodeProto;
use crate::pb::hadoop::common::rpc_sasl_proto::{SaslAuth, SaslState};
use crate::pb::hadoop::common::RpcSaslProto;

use super::digest::{DigestServer, DigestServerConfig};
use super::gssapi::MECHANISM as GSSAPI_MECHANISM;
use super::gssapi_server::{GssapiServer, KerberosServer};
use super::message::{
    self, method_list, AuthMethod, DEFAULT_MAX_NEGOTIATION_MESSAGE, DEFAULT_TOKEN_MECHANISM,
    SASL_DEFAULT_REALM,
};
use super::{Qop, SaslError, SecurityLayer, ServerMechanism};

/// A verified token: its password and the user it stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenPassword {
    /// The token's password (raw bytes; base64 is the SASL layer's business).
    pub password: Vec<u8>,
    /// Java's `TokenIdentifier.getUser()`: the remote user of the connection.
    pub user: String,
}

/// What the secrets keep for an authenticated connection's calls, made once when it
/// authenticates (Java: the token identifier in the connection's UGI, parsed once; the
/// protocol's handlers read it on every call, e.g. the AMRMToken's attempt). The handler
/// downcasts it to the type its secrets made.
pub type TokenContext = Arc<dyn std::any::Any + Send + Sync>;

/// Where a server finds token passwords (Hadoop's `SecretManager.retrievePassword`).
pub trait TokenSecrets: Send + Sync {
    /// Verifies `identifier` (the bytes as the client sent them) and returns its password and
    /// user. Unknown key, expired, wrong node, undecodable: `SaslError::InvalidToken` with
    /// Java's text.
    fn retrieve(&self, identifier: &[u8]) -> Result<TokenPassword, SaslError>;

    /// As [`retrieve`](Self::retrieve), plus the [`TokenContext`] the connection keeps once it
    /// authenticates with this identifier ([`Authenticated::token_context`]). By default none.
    fn retrieve_with_context(
        &self,
        identifier: &[u8],
    ) -> Result<(TokenPassword, Option<TokenContext>), SaslError> {
        self.retrieve(identifier).map(|p| (p, None))
    }
}

/// What a server accepts: Hadoop's `getAuthMethods` and `hadoop.rpc.protection`.
pub struct ServerAuth {
    methods: Vec<AuthMethod>,
    qops: Vec<Qop>,
    token_mechanism: String,
    secrets: Option<Arc<dyn TokenSecrets>>,
    kerberos: Option<KerberosServer>,
    max_message: usize,
    /// The NEGOTIATE reply without challenges (what INITIATE's auth is compared with).
    negotiate: RpcSaslProto,
}

impl std::fmt::Debug for ServerAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerAuth")
            .field("methods", &self.methods)
            .field("qops", &self.qops)
            .field("token_mechanism", &self.token_mechanism)
            .finish_non_exhaustive()
    }
}

impl ServerAuth {
    /// Hadoop's rule: `configured` is `hadoop.security.authentication`; with token secrets TOKEN
    /// goes first ("most preferred"); TOKEN configured requires secrets. KERBEROS needs the
    /// server's Kerberos identity: see [`ServerAuth::with_kerberos`].
    pub fn new(
        configured: AuthMethod,
        secrets: Option<Arc<dyn TokenSecrets>>,
        qops: Vec<Qop>,
    ) -> Result<ServerAuth, SaslError> {
        Self::build(configured, secrets, None, qops)
    }

    /// A KERBEROS server (`hadoop.security.authentication = kerberos`): offers `[TOKEN, KERBEROS]`
    /// with token secrets, else `[KERBEROS]`; KERBEROS advertises `protocol`/`serverId` of the
    /// server's principal, and maps each authenticated principal to its user by
    /// `hadoop.security.auth_to_local`.
    pub fn with_kerberos(
        kerberos: KerberosServer,
        secrets: Option<Arc<dyn TokenSecrets>>,
        qops: Vec<Qop>,
    ) -> Result<ServerAuth, SaslError> {
        Self::build(AuthMethod::Kerberos, secrets, Some(kerberos), qops)
    }

    fn build(
        configured: AuthMethod,
        secrets: Option<Arc<dyn TokenSecrets>>,
        kerberos: Option<KerberosServer>,
        qops: Vec<Qop>,
    ) -> Result<ServerAuth, SaslError> {
        let mut methods = Vec::new();
        match (configured, &secrets) {
            (AuthMethod::Token, None) => {
                return Err(SaslError::Config(
                    "Server is not configured to do TOKEN authentication.".into(),
                ))
            }
            (_, Some(_)) => methods.push(AuthMethod::Token),
            _ => {}
        }
        if configured == AuthMethod::Kerberos && kerberos.is_none() {
            return Err(SaslError::Config(
                "KERBEROS authentication needs the server's Kerberos principal and keytab".into(),
            ));
        }
        if !methods.contains(&configured) {
            methods.push(configured);
        }
        let qops = if qops.is_empty() {
            vec![Qop::Auth]
        } else {
            qops
        };
        let mut auth = ServerAuth {
            methods,
            qops,
            token_mechanism: DEFAULT_TOKEN_MECHANISM.into(),
            secrets,
            kerberos,
            max_message: DEFAULT_MAX_NEGOTIATION_MESSAGE,
            negotiate: message::message(SaslState::Negotiate),
        };
        auth.negotiate = auth.build_negotiate();
        Ok(auth)
    }

    /// A server that speaks SIMPLE only (a SASL client is told to switch to SIMPLE).
    pub fn simple() -> ServerAuth {
        let mut auth = ServerAuth {
            methods: vec![AuthMethod::Simple],
            qops: vec![Qop::Auth],
            token_mechanism: DEFAULT_TOKEN_MECHANISM.into(),
            secrets: None,
            kerberos: None,
            max_message: DEFAULT_MAX_NEGOTIATION_MESSAGE,
            negotiate: message::message(SaslState::Negotiate),
        };
        auth.negotiate = auth.build_negotiate();
        auth
    }

    /// Sets the TOKEN mechanism name (`hadoop.security.sasl.mechanism`). Only DIGEST-MD5 is
    /// implemented; a client compares the name with its own.
    pub fn with_token_mechanism(mut self, name: &str) -> Result<ServerAuth, SaslError> {
        if name != DEFAULT_TOKEN_MECHANISM {
            return Err(SaslError::Config(format!(
                "hadoop.security.sasl.mechanism {name:?}: only {DEFAULT_TOKEN_MECHANISM} is implemented"
            )));
        }
        self.token_mechanism = name.into();
        self.negotiate = self.build_negotiate();
        Ok(self)
    }

    /// Caps negotiation messages (default [`DEFAULT_MAX_NEGOTIATION_MESSAGE`]).
    pub fn with_max_message(mut self, max: usize) -> ServerAuth {
        self.max_message = max;
        self
    }

    /// The enabled methods, in the order offered.
    pub fn methods(&self) -> &[AuthMethod] {
        &self.methods
    }

    pub fn qops(&self) -> &[Qop] {
        &self.qops
    }

    /// Whether a client may skip SASL (preamble auth NONE).
    pub fn simple_enabled(&self) -> bool {
        self.methods.contains(&AuthMethod::Simple)
    }

    pub fn max_message(&self) -> usize {
        self.max_message
    }

    /// Java's `enabledAuthMethods.toString()`, as quoted in refusals.
    pub fn methods_text(&self) -> String {
        method_list(self.methods.iter())
    }

    /// `buildNegotiateResponse`: SIMPLE alone is a bare SUCCESS; otherwise every method with
    /// its mechanism, protocol and server id (TOKEN: `""` and `default`).
    fn build_negotiate(&self) -> RpcSaslProto {
        if self.methods == [AuthMethod::Simple] {
            return message::message(SaslState::Success);
        }
        let mut m = message::message(SaslState::Negotiate);
        for &method in &self.methods {
            m.auths.push(match method {
                AuthMethod::Simple => SaslAuth {
                    method: method.name().into(),
                    mechanism: String::new(),
                    protocol: None,
                    server_id: None,
                    challenge: None,
                },
                AuthMethod::Token => SaslAuth {
                    method: method.name().into(),
                    mechanism: self.token_mechanism.clone(),
                    protocol: Some(String::new()),
                    server_id: Some(SASL_DEFAULT_REALM.into()),
                    challenge: None,
                },
                AuthMethod::Kerberos => {
                    let (protocol, server_id) = self
                        .kerberos
                        .as_ref()
                        .map(|k| (k.protocol.clone(), k.server_id.clone()))
                        .unwrap_or_default();
                    SaslAuth {
                        method: method.name().into(),
                        mechanism: GSSAPI_MECHANISM.into(),
                        protocol: Some(protocol),
                        server_id: Some(server_id),
                        challenge: None,
                    }
                }
            });
        }
        m
    }
}

/// An authenticated connection.
pub struct Authenticated {
    pub method: AuthMethod,
    /// The remote user: the token's user (TOKEN); the principal's short name by
    /// `hadoop.security.auth_to_local` (KERBEROS).
    pub user: String,
    /// KERBEROS: the authenticated principal (`nm/host@REALM`), Java's `ugi.getUserName()`,
    /// which the client's connection context names as its effectiveUser.
    pub principal: Option<String>,
    /// TOKEN: the token identifier as the client sent it (the NodeManager reads its
    /// NMTokenIdentifier from here).
    pub token_identifier: Option<Vec<u8>>,
    /// TOKEN: what the secrets made of the identifier for the connection's calls
    /// ([`TokenSecrets::retrieve_with_context`]).
    pub token_context: Option<TokenContext>,
    pub qop: Qop,
    /// The security layer for `auth-int` / `auth-conf`.
    pub layer: Option<Box<dyn SecurityLayer>>,
}

impl std::fmt::Debug for Authenticated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticated")
            .field("method", &self.method)
            .field("user", &self.user)
            .field("principal", &self.principal)
            .field("token_context", &self.token_context.is_some())
            .field("qop", &self.qop)
            .field("layer", &self.layer.is_some())
            .finish()
    }
}

/// What to do after a client message.
#[derive(Debug)]
pub enum ServerStep {
    /// Send this reply and wait for the next message.
    Reply(RpcSaslProto),
    /// The connection continues as SIMPLE (the client chose it: no reply; or the server offers
    /// SIMPLE only: a bare SUCCESS reply).
    Simple { reply: Option<RpcSaslProto> },
    /// Send the SUCCESS reply, then the connection is authenticated.
    Success {
        reply: RpcSaslProto,
        auth: Authenticated,
    },
}

/// A refusal: answered with a FATAL for callId −33 (`exceptionClassName` = the error's Java
/// class, `errorMsg` = its text, `errorDetail` = `code`), then the connection closes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerFailure {
    pub error: SaslError,
    pub code: RpcErrorCodeProto,
}

impl ServerFailure {
    fn unauthorized(error: SaslError) -> Self {
        Self {
            error,
            code: RpcErrorCodeProto::FatalUnauthorized,
        }
    }

    fn invalid_header(error: SaslError) -> Self {
        Self {
            error,
            code: RpcErrorCodeProto::FatalInvalidRpcHeader,
        }
    }
}

/// Who the password callback found: (DIGEST username, token user, identifier, its context).
type Found = Arc<Mutex<Option<(String, String, Vec<u8>, Option<TokenContext>)>>>;

/// One connection's negotiation.
pub struct ServerNegotiation {
    auth: Arc<ServerAuth>,
    sent_negotiate: bool,
    method: Option<AuthMethod>,
    mech: Option<Box<dyn ServerMechanism>>,
    found: Found,
    complete: bool,
}

impl std::fmt::Debug for ServerNegotiation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerNegotiation")
            .field("sent_negotiate", &self.sent_negotiate)
            .field("method", &self.method)
            .field("complete", &self.complete)
            .finish_non_exhaustive()
    }
}

impl ServerNegotiation {
    pub fn new(auth: Arc<ServerAuth>) -> Self {
        Self {
            auth,
            sent_negotiate: false,
            method: None,
            mech: None,
            found: Arc::new(Mutex::new(None)),
            complete: false,
        }
    }

    /// Whether negotiation finished (SUCCESS sent or SIMPLE chosen).
    pub fn is_complete(&self) -> bool {
        self.complete
    }

    /// Handles one client message (the RpcSaslProto bytes of a callId −33 frame that is not a
    /// WRAP packet).
    pub fn on_message(
        &mut self,
        msg: &[u8],
        entropy: &mut dyn Entropy,
    ) -> Result<ServerStep, ServerFailure> {
        if self.complete {
            return Err(ServerFailure::invalid_header(SaslError::Sasl(
                "Negotiation is already complete".into(),
            )));
        }
        let m = message::decode(msg, self.auth.max_message).map_err(ServerFailure::unauthorized)?;
        self.process(m, entropy)
            .map_err(ServerFailure::unauthorized)
    }

    fn process(
        &mut self,
        m: RpcSaslProto,
        entropy: &mut dyn Entropy,
    ) -> Result<ServerStep, SaslError> {
        match message::state_of(&m) {
            Some(SaslState::Negotiate) => {
                if self.sent_negotiate {
                    return Err(SaslError::AccessControl(
                        "Client already attempted negotiation".into(),
                    ));
                }
                self.negotiate_reply(entropy)
            }
            Some(SaslState::Initiate) => {
                if m.auths.len() != 1 {
                    return Err(SaslError::Sasl("Client mechanism is malformed".into()));
                }
                let chosen = &m.auths[0];
                if !self.auth.negotiate.auths.contains(chosen) {
                    if self.sent_negotiate {
                        return Err(SaslError::AccessControl(format!(
                            "{} authentication is not enabled.  Available:{}",
                            chosen.method,
                            self.auth.methods_text()
                        )));
                    }
                    return self.negotiate_reply(entropy);
                }
                let method = AuthMethod::from_name(&chosen.method)
                    .ok_or_else(|| SaslError::Sasl("Client mechanism is malformed".into()))?;
                self.method = Some(method);
                if method == AuthMethod::Simple {
                    self.complete = true;
                    return Ok(ServerStep::Simple { reply: None });
                }
                // TOKEN reuses the mechanism whose challenge NEGOTIATE carried.
                if method == AuthMethod::Kerberos {
                    self.mech = Some(self.kerberos_mechanism()?);
                } else if self.mech.is_none() {
                    self.mech = Some(self.token_mechanism(entropy)?);
                }
                self.process_token(&m)
            }
            Some(SaslState::Response) => {
                if self.mech.is_none() {
                    return Err(SaslError::Sasl(
                        "Client sent RESPONSE before INITIATE".into(),
                    ));
                }
                self.process_token(&m)
            }
            _ => Err(SaslError::Sasl(format!(
                "Client sent unsupported state {}",
                message::state_name(m.state)
            ))),
        }
    }

    /// `buildSaslNegotiateResponse`: the cached reply, with TOKEN's DIGEST-MD5 challenge (TOKEN is
    /// always first) from a server mechanism that INITIATE then reuses.
    fn negotiate_reply(&mut self, entropy: &mut dyn Entropy) -> Result<ServerStep, SaslError> {
        let mut reply = self.auth.negotiate.clone();
        self.sent_negotiate = true;
        if message::state_of(&reply) == Some(SaslState::Success) {
            self.complete = true;
            self.method = Some(AuthMethod::Simple);
            return Ok(ServerStep::Simple { reply: Some(reply) });
        }
        if self.auth.methods.first() == Some(&AuthMethod::Token) {
            let mut mech = self.token_mechanism(entropy)?;
            let challenge = mech.evaluate_response(&[])?;
            reply.auths[0].challenge = Some(challenge);
            self.mech = Some(mech);
        }
        Ok(ServerStep::Reply(reply))
    }

    /// A DIGEST-MD5 server whose password callback asks the token secrets.
    fn token_mechanism(
        &mut self,
        entropy: &mut dyn Entropy,
    ) -> Result<Box<dyn ServerMechanism>, SaslError> {
        let secrets = self.auth.secrets.clone().ok_or_else(|| {
            SaslError::Config("Server is not configured to do TOKEN authentication.".into())
        })?;
        let found = self.found.clone();
        let lookup = move |username: &str, _realm: &str| -> Result<String, SaslError> {
            let identifier = base64::engine::general_purpose::STANDARD
                .decode(username)
                .map_err(|_| {
                    SaslError::InvalidToken("Can't de-serialize tokenIdentifier".into())
                })?;
            let (p, context) = secrets.retrieve_with_context(&identifier)?;
            *found.lock().unwrap_or_else(|e| e.into_inner()) =
                Some((username.to_string(), p.user, identifier, context));
            Ok(base64::engine::general_purpose::STANDARD.encode(&p.password))
        };
        let cfg = DigestServerConfig::ipc(self.auth.qops.clone());
        Ok(Box::new(DigestServer::new(cfg, entropy, Box::new(lookup))?))
    }

    /// A GSSAPI server over a fresh accepting context.
    fn kerberos_mechanism(&self) -> Result<Box<dyn ServerMechanism>, SaslError> {
        let k = self.auth.kerberos.as_ref().ok_or_else(|| {
            SaslError::Config("Server is not configured to do KERBEROS authentication.".into())
        })?;
        Ok(Box::new(GssapiServer::new(
            k.acceptors.acceptor()?,
            &self.auth.qops,
        )?))
    }

    /// `processSaslToken`: the message must carry a token (even an empty one).
    fn process_token(&mut self, m: &RpcSaslProto) -> Result<ServerStep, SaslError> {
        let Some(token) = m.token.as_deref() else {
            return Err(SaslError::Sasl("Client did not send a token".into()));
        };
        let mech = self
            .mech
            .as_mut()
            .expect("mechanism created before its tokens");
        let out = mech.evaluate_response(token)?;
        if !mech.is_complete() {
            let mut reply = message::message(SaslState::Challenge);
            reply.token = Some(out);
            return Ok(ServerStep::Reply(reply));
        }
        // SUCCESS carries a token only when the mechanism made one (DIGEST-MD5's rspauth);
        // Java's GSSAPI client refuses any token once it is complete.
        let mut reply = message::message(SaslState::Success);
        reply.token = (!out.is_empty()).then_some(out);
        let name = mech.mechanism().to_string();
        let (qop, layer) = super::negotiated(&name, mech.negotiated_qop(), || mech.take_layer())?;
        if self.method == Some(AuthMethod::Kerberos) {
            let principal = mech
                .authorization_id()
                .ok_or_else(|| SaslError::Sasl("GSSAPI completed without a principal".into()))?
                .to_string();
            let names = &self
                .auth
                .kerberos
                .as_ref()
                .ok_or_else(|| SaslError::Sasl("KERBEROS without its settings".into()))?
                .names;
            let user = names.short_name(&principal).map_err(|e| {
                SaslError::AccessControl(format!("Illegal principal name {principal}: {e}"))
            })?;
            self.complete = true;
            self.mech = None;
            return Ok(ServerStep::Success {
                reply,
                auth: Authenticated {
                    method: AuthMethod::Kerberos,
                    user,
                    principal: Some(principal),
                    token_identifier: None,
                    token_context: None,
                    qop,
                    layer,
                },
            });
        }
        // The mechanism authorized the authzid (Hadoop: only as the token's own user).
        let (_username, user, identifier, token_context) = self
            .found
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .ok_or_else(|| SaslError::Sasl("authenticated without a password lookup".into()))?;
        self.complete = true;
        self.mech = None;
        Ok(ServerStep::Success {
            reply,
            auth: Authenticated {
                method: self.method.unwrap_or(AuthMethod::Token),
                user,
                principal: None,
                token_identifier: Some(identifier),
                token_context,
                qop,
                layer,
            },
        })
    }
}
