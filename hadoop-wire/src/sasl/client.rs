//! The client side of SASL negotiation (Hadoop's `SaslRpcClient.saslConnect`), sans-IO.
//!
//! ```text
//!   ClientAuth (what this client can do: a token for this server, QOPs, fallback rule)
//!   ClientNegotiation
//!     start()                   ──> NEGOTIATE to send (after the 0xDF preamble)
//!     on_reply(call id, msg)    ──> ClientStep::Send(msg)            send, read the next reply
//!                               ──> ClientStep::SendThenDone(msg, o) SIMPLE chosen: send, no reply comes
//!                               ──> ClientStep::Done(o)              authenticated
//! ```
//!
//! The driver reads each reply frame with [`crate::rpc::client::Responses::reply`] (ERROR and
//! FATAL become the server's exception), passes the call id and message here, and after `Done`
//! sends the connection context and its calls: through the outcome's security layer when it has
//! one (WRAP packets of at most [`super::SecurityLayer::max_wrap_input`] plaintext bytes each).

use base64::Engine as _;

use crate::entropy::Entropy;
use crate::pb::hadoop::common::rpc_sasl_proto::{SaslAuth, SaslState};
use crate::pb::hadoop::common::RpcSaslProto;
use crate::rpc::SASL_CALL_ID;

use super::digest::{DigestClient, DigestClientConfig};
use super::gssapi::{self, GssapiClient, KerberosClient};
use super::message::{
    self, method_list, AuthMethod, DEFAULT_MAX_NEGOTIATION_MESSAGE, DEFAULT_TOKEN_MECHANISM,
};
use super::{ClientMechanism, Qop, SaslError, SecurityLayer};

/// A token's secret parts, as the client presents them (username = base64(identifier),
/// password = base64(password)).
#[derive(Clone, PartialEq, Eq)]
pub struct TokenCredential {
    pub identifier: Vec<u8>,
    pub password: Vec<u8>,
}

impl std::fmt::Debug for TokenCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenCredential")
            .field("identifier_len", &self.identifier.len())
            .finish_non_exhaustive()
    }
}

/// What a client can authenticate with.
#[derive(Debug, Clone)]
pub struct ClientAuth {
    /// The token selected for this server (Java: the protocol's TokenInfo selector, kind and
    /// service `ip:port`). Holding one makes a client use SASL even with security off.
    pub token: Option<TokenCredential>,
    /// `hadoop.rpc.protection`, in preference order: the first one the server offers is taken.
    pub qops: Vec<Qop>,
    /// `hadoop.security.sasl.mechanism`.
    pub token_mechanism: String,
    /// `hadoop.security.authentication` is not `simple`.
    pub security_enabled: bool,
    /// `ipc.client.fallback-to-simple-auth-allowed` (default false).
    pub fallback_to_simple_allowed: bool,
    /// KERBEROS (GSSAPI): the server principal expected and the GSS contexts. Without it a
    /// server's KERBEROS offer is skipped.
    pub kerberos: Option<KerberosClient>,
    /// Largest reply accepted during negotiation.
    pub max_message: usize,
}

impl Default for ClientAuth {
    fn default() -> Self {
        Self {
            token: None,
            qops: vec![Qop::Auth],
            token_mechanism: DEFAULT_TOKEN_MECHANISM.into(),
            security_enabled: false,
            fallback_to_simple_allowed: false,
            kerberos: None,
            max_message: DEFAULT_MAX_NEGOTIATION_MESSAGE,
        }
    }
}

impl ClientAuth {
    /// A client authenticating with `token` at the given protections.
    pub fn token(token: TokenCredential, qops: Vec<Qop>) -> Self {
        Self {
            token: Some(token),
            qops,
            ..Self::default()
        }
    }

    /// Java's `trySasl`: security on, or a token held (or Kerberos set up).
    pub fn uses_sasl(&self) -> bool {
        self.security_enabled || self.token.is_some() || self.kerberos.is_some()
    }
}

/// How the connection ended up authenticated.
pub struct ClientOutcome {
    pub method: AuthMethod,
    pub qop: Qop,
    /// The security layer for `auth-int` / `auth-conf`.
    pub layer: Option<Box<dyn SecurityLayer>>,
    /// KERBEROS: the client principal authenticated (`user@REALM`), which Java's client sends
    /// as the connection context's effectiveUser (`ugi.getUserName()`).
    pub user: Option<String>,
}

impl std::fmt::Debug for ClientOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientOutcome")
            .field("method", &self.method)
            .field("qop", &self.qop)
            .field("layer", &self.layer.is_some())
            .field("user", &self.user)
            .finish()
    }
}

/// What to do after a server reply.
#[derive(Debug)]
pub enum ClientStep {
    /// Send this message and read the next reply.
    Send(RpcSaslProto),
    /// Send this message; the server will not answer it (SIMPLE chosen). Then go on.
    SendThenDone(RpcSaslProto, ClientOutcome),
    /// Negotiation is over.
    Done(ClientOutcome),
}

/// One connection's negotiation.
pub struct ClientNegotiation {
    auth: ClientAuth,
    mech: Option<Box<dyn ClientMechanism>>,
    method: Option<AuthMethod>,
    done: bool,
}

impl std::fmt::Debug for ClientNegotiation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientNegotiation")
            .field("method", &self.method)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

impl ClientNegotiation {
    pub fn new(auth: ClientAuth) -> Self {
        Self {
            auth,
            mech: None,
            method: None,
            done: false,
        }
    }

    /// The first message: NEGOTIATE (sent right after the SASL preamble, in the same write).
    pub fn start(&self) -> RpcSaslProto {
        message::message(SaslState::Negotiate)
    }

    /// Handles one reply: `call_id` from its header (status already checked to be SUCCESS),
    /// `msg` its RpcSaslProto bytes.
    pub fn on_reply(
        &mut self,
        call_id: i32,
        msg: &[u8],
        entropy: &mut dyn Entropy,
    ) -> Result<ClientStep, SaslError> {
        if self.done {
            return Err(SaslError::Sasl(
                "SASL negotiation is already complete".into(),
            ));
        }
        if call_id != SASL_CALL_ID {
            return Err(SaslError::Sasl(
                "Non-SASL response during negotiation".into(),
            ));
        }
        let m = message::decode(msg, self.auth.max_message)?;
        match message::state_of(&m) {
            Some(SaslState::Negotiate) => self.choose(&m, entropy),
            Some(SaslState::Challenge) => {
                let Some(mech) = self.mech.as_mut() else {
                    return Err(SaslError::Sasl("Server sent unsolicited challenge".into()));
                };
                let Some(challenge) = m.token.as_deref() else {
                    return Err(SaslError::Sasl("Server challenge contains no token".into()));
                };
                let token = mech.evaluate_challenge(challenge)?;
                let mut reply = message::message(SaslState::Response);
                reply.token = Some(token);
                Ok(ClientStep::Send(reply))
            }
            Some(SaslState::Success) => {
                self.done = true;
                let Some(mut mech) = self.mech.take() else {
                    // A SIMPLE-only server answers NEGOTIATE with a bare SUCCESS.
                    return self.simple().map(ClientStep::Done);
                };
                if let Some(t) = m.token.as_deref() {
                    let out = mech.evaluate_challenge(t)?;
                    if !out.is_empty() {
                        return Err(SaslError::Sasl("Client generated spurious response".into()));
                    }
                }
                if !mech.is_complete() {
                    return Err(SaslError::Sasl("Client is out of sync with server".into()));
                }
                let name = mech.mechanism().to_string();
                let user = mech.authenticated_user();
                let (qop, layer) =
                    super::negotiated(&name, mech.negotiated_qop(), || mech.take_layer())?;
                Ok(ClientStep::Done(ClientOutcome {
                    method: self.method.unwrap_or(AuthMethod::Token),
                    qop,
                    layer,
                    user,
                }))
            }
            _ => Err(SaslError::Sasl(format!(
                "RPC client doesn't support SASL {}",
                message::state_name(m.state)
            ))),
        }
    }

    /// `setFallBackToSimpleAuth`: a secure client falls back only if allowed.
    fn simple(&mut self) -> Result<ClientOutcome, SaslError> {
        if self.auth.security_enabled && !self.auth.fallback_to_simple_allowed {
            return Err(SaslError::AccessControl(
                "Server asks us to fall back to SIMPLE auth, but this client is configured to \
                 only allow secure connections."
                    .into(),
            ));
        }
        self.method = Some(AuthMethod::Simple);
        Ok(ClientOutcome {
            method: AuthMethod::Simple,
            qop: Qop::Auth,
            layer: None,
            user: None,
        })
    }

    /// The server's NEGOTIATE: the first usable auth in the server's order.
    fn choose(
        &mut self,
        m: &RpcSaslProto,
        entropy: &mut dyn Entropy,
    ) -> Result<ClientStep, SaslError> {
        for a in &m.auths {
            let Some(method) = AuthMethod::from_name(&a.method) else {
                continue;
            };
            match method {
                AuthMethod::Simple if a.mechanism.is_empty() => {
                    self.done = true;
                    let outcome = self.simple()?;
                    let mut init = message::message(SaslState::Initiate);
                    init.auths.push(message::without_challenge(a));
                    return Ok(ClientStep::SendThenDone(init, outcome));
                }
                AuthMethod::Token if a.mechanism == self.auth.token_mechanism => {
                    let Some(token) = self.auth.token.as_ref() else {
                        continue;
                    };
                    return self.initiate_token(a, token.clone(), entropy);
                }
                AuthMethod::Kerberos if a.mechanism == gssapi::MECHANISM => {
                    let Some(krb) = self.auth.kerberos.clone() else {
                        continue;
                    };
                    return self.initiate_kerberos(a, &krb);
                }
                _ => continue,
            }
        }
        Err(SaslError::AccessControl(format!(
            "Client cannot authenticate via:{}",
            method_list(m.auths.iter().map(|a| a.method.as_str()))
        )))
    }

    /// KERBEROS: the advertised principal must be the expected one (Java throws rather than
    /// trying the next auth), then the GSS context's first token goes in the INITIATE.
    fn initiate_kerberos(
        &mut self,
        a: &SaslAuth,
        krb: &KerberosClient,
    ) -> Result<ClientStep, SaslError> {
        let target = gssapi::check_server_principal(
            &krb.server_principal,
            a.protocol.as_deref(),
            a.server_id.as_deref(),
        )?;
        let ctx = krb.contexts.client_context(&target)?;
        let mut mech: Box<dyn ClientMechanism> =
            Box::new(GssapiClient::new(ctx, self.auth.qops.clone())?);
        let token = mech.evaluate_challenge(a.challenge.as_deref().unwrap_or_default())?;
        let mut init = message::message(SaslState::Initiate);
        init.token = Some(token);
        init.auths.push(message::without_challenge(a));
        self.mech = Some(mech);
        self.method = Some(AuthMethod::Kerberos);
        Ok(ClientStep::Send(init))
    }

    fn initiate_token(
        &mut self,
        a: &SaslAuth,
        token: TokenCredential,
        entropy: &mut dyn Entropy,
    ) -> Result<ClientStep, SaslError> {
        let b64 = base64::engine::general_purpose::STANDARD;
        let mut cfg = DigestClientConfig::ipc(
            b64.encode(&token.identifier),
            b64.encode(&token.password),
            self.auth.qops.clone(),
        );
        cfg.protocol = a.protocol.clone().unwrap_or_default();
        cfg.server_name = a.server_id.clone().unwrap_or_default();
        let mut mech: Box<dyn ClientMechanism> = Box::new(DigestClient::new(cfg, entropy)?);
        let token = match a.challenge.as_deref() {
            Some(c) => mech.evaluate_challenge(c)?,
            None if mech.has_initial_response() => mech.evaluate_challenge(&[])?,
            None => Vec::new(),
        };
        let mut init = message::message(SaslState::Initiate);
        init.token = Some(token);
        init.auths.push(message::without_challenge(a));
        self.mech = Some(mech);
        self.method = Some(AuthMethod::Token);
        Ok(ClientStep::Send(init))
    }
}
