//! GSSAPI (RFC 4752), the mechanism of the KERBEROS auth method — server side, sans-IO.
//!
//! The Kerberos work (keytab, AP-REQ/AP-REP, per-message tokens) is a GSS-API accepting context
//! behind the small [`GssAcceptor`] trait: `ipc` implements it on MIT krb5, the unit tests below
//! on a fake. This is the JDK's `GssKrb5Server` as Hadoop's server runs it (security.md §1.7,
//! §3.4):
//!
//! ```text
//!   INITIATE  AP-REQ   -> accept_sec_context        CHALLENGE AP-REP      (established)
//!   RESPONSE  (empty)  ->                           CHALLENGE wrap(conf=false, [mask, maxbuf24])
//!   RESPONSE  wrap([chosen, client maxbuf24][, authzid])
//!                      -> unwrap, check             SUCCESS (no token)
//! ```
//!
//! When accepting yields no token, the offer goes out at once. The offered mask is the OR of the
//! server's `hadoop.rpc.protection` levels (1 none, 2 integrity, 4 privacy); a client choosing
//! anything else, or more than one bit, is refused. An authorization id, if the client sends one,
//! must equal the authenticated principal (Hadoop's `SaslGssCallbackHandler`): no impersonation
//! through SASL.

use std::sync::Arc;

pub use super::gss_context::EstablishedContext;
use super::gss_context::{layer_message, read_layer_message, Negotiated};
use super::gssapi::MECHANISM;
use super::{Qop, SaslError, SecurityLayer, ServerMechanism};

/// The receive buffer the server announces (the JDK's default `javax.security.sasl.maxbuffer`).
pub const SERVER_MAX_RECEIVE: u32 = 65536;

/// A GSS-API security context on the accepting side (`gss_accept_sec_context`, then the
/// [`EstablishedContext`] calls both sides share), for one connection.
pub trait GssAcceptor: EstablishedContext {
    /// One `gss_accept_sec_context` step with the initiator's token. Returns the token to send
    /// back (empty when there is none).
    fn accept_step(&mut self, input: &[u8]) -> Result<Vec<u8>, SaslError>;
}

/// The server's Kerberos identity: its principal and accepting contexts made with its keytab.
pub trait GssAcceptorFactory: Send + Sync {
    /// The server principal, `svc/host@REALM` (what NEGOTIATE advertises, split on `/` and `@`).
    fn principal(&self) -> &str;
    /// A fresh accepting context for one connection.
    fn acceptor(&self) -> Result<Box<dyn GssAcceptor>, SaslError>;
}

/// Hadoop's `SaslRpcServer` for KERBEROS: `protocol` and `serverId` of the server's principal
/// (`rm/host@REALM` → `("rm", "host")`). A principal without a host part cannot serve.
pub fn protocol_and_server_id(principal: &str) -> Result<(String, String), SaslError> {
    let mut parts = principal.splitn(3, ['/', '@']);
    let protocol = parts.next().unwrap_or_default();
    match (parts.next(), principal.split_once('@')) {
        (Some(host), Some((svc, realm)))
            if !protocol.is_empty()
                && !host.is_empty()
                && svc.contains('/')
                && !realm.is_empty() =>
        {
            Ok((protocol.to_string(), host.to_string()))
        }
        _ => Err(SaslError::Config(format!(
            "Kerberos principal name does NOT have the expected hostname part: {principal} \
             (svc/host@REALM expected)"
        ))),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// `accept_sec_context` until established.
    Context,
    /// AP-REP sent; the client's empty RESPONSE is due.
    AwaitEmpty,
    /// The wrapped offer was sent; the client's choice is due.
    AwaitChoice,
    Complete,
}

/// The GSSAPI server mechanism over one [`GssAcceptor`].
pub struct GssapiServer {
    neg: Negotiated<dyn GssAcceptor>,
    offered: u8,
    stage: Stage,
}

impl std::fmt::Debug for GssapiServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GssapiServer")
            .field("stage", &self.stage)
            .field("offered", &self.offered)
            .field("negotiated", &self.neg)
            .finish_non_exhaustive()
    }
}

impl GssapiServer {
    /// `qops`: the server's `hadoop.rpc.protection` levels (not empty).
    pub fn new(ctx: Box<dyn GssAcceptor>, qops: &[Qop]) -> Result<Self, SaslError> {
        let offered = qops.iter().fold(0, |m, q| m | q.mask());
        if offered == 0 {
            return Err(SaslError::Config(
                "GSSAPI: no protection level to offer".into(),
            ));
        }
        Ok(Self {
            neg: Negotiated::new(ctx),
            offered,
            stage: Stage::Context,
        })
    }

    /// The authenticated client principal, once complete.
    pub fn principal(&self) -> Option<&str> {
        self.neg.client.as_deref()
    }

    /// RFC 4752 §3.1, server to client: `wrap(conf=false, [offered mask, our maxbuf24])`.
    fn offer(&mut self) -> Result<Vec<u8>, SaslError> {
        let offer = layer_message(self.offered, SERVER_MAX_RECEIVE);
        let mut out = Vec::new();
        self.neg.ctx()?.wrap(false, &offer, &mut out)?;
        self.stage = Stage::AwaitChoice;
        Ok(out)
    }

    /// The client's `[chosen, maxbuf24][, authzid]`.
    fn choice(&mut self, response: &[u8]) -> Result<Vec<u8>, SaslError> {
        let mut plain = Vec::with_capacity(8);
        self.neg.ctx()?.unwrap(response, &mut plain)?;
        if plain.len() < 4 {
            return Err(SaslError::Sasl(format!(
                "GSSAPI: the client's security layer choice is {} bytes, not at least 4",
                plain.len()
            )));
        }
        let (chosen, peer_max) = read_layer_message(plain[..4].try_into().expect("4 bytes"));
        let qop = match chosen {
            1 => Qop::Auth,
            2 => Qop::AuthInt,
            4 => Qop::AuthConf,
            _ => {
                return Err(SaslError::Sasl(format!(
                    "Client selected unsupported protection: {chosen} (not exactly one layer)"
                )))
            }
        };
        if chosen & self.offered == 0 {
            return Err(SaslError::Sasl(format!(
                "Client selected unsupported protection: {chosen} (offered mask {})",
                self.offered
            )));
        }
        let peer = self.neg.ctx()?.initiator()?;
        if plain.len() > 4 {
            let authzid = std::str::from_utf8(&plain[4..])
                .map_err(|_| SaslError::Sasl("GSSAPI: authorization id is not UTF-8".into()))?;
            if authzid != peer {
                return Err(SaslError::AccessControl(format!(
                    "{peer} is not authorized to connect as {authzid}"
                )));
            }
        }
        self.neg.complete(qop, peer_max, peer);
        self.stage = Stage::Complete;
        Ok(Vec::new())
    }
}

impl ServerMechanism for GssapiServer {
    fn mechanism(&self) -> &str {
        MECHANISM
    }

    fn evaluate_response(&mut self, response: &[u8]) -> Result<Vec<u8>, SaslError> {
        match self.stage {
            Stage::Context => {
                let ctx = self.neg.ctx()?;
                let out = ctx.accept_step(response)?;
                if !ctx.is_established() {
                    return Ok(out);
                }
                if out.is_empty() {
                    return self.offer();
                }
                self.stage = Stage::AwaitEmpty;
                Ok(out)
            }
            Stage::AwaitEmpty => {
                if !response.is_empty() {
                    return Err(SaslError::Sasl(
                        "Handshake expecting no response data from client".into(),
                    ));
                }
                self.offer()
            }
            Stage::AwaitChoice => self.choice(response),
            Stage::Complete => Err(SaslError::Sasl(
                "GSSAPI authentication already complete".into(),
            )),
        }
    }

    fn is_complete(&self) -> bool {
        self.stage == Stage::Complete
    }

    fn authorization_id(&self) -> Option<&str> {
        self.neg.client.as_deref()
    }

    fn negotiated_qop(&self) -> Option<Qop> {
        self.neg.qop
    }

    fn take_layer(&mut self) -> Option<Box<dyn SecurityLayer>> {
        self.neg.take_layer()
    }
}

/// The server's Kerberos settings: its acceptor factory, the `protocol`/`serverId` it
/// advertises, and the principal → user mapping.
#[derive(Clone)]
pub struct KerberosServer {
    pub acceptors: Arc<dyn GssAcceptorFactory>,
    pub protocol: String,
    pub server_id: String,
    pub names: super::kerberos_name::AuthToLocal,
}

impl std::fmt::Debug for KerberosServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KerberosServer")
            .field("protocol", &self.protocol)
            .field("server_id", &self.server_id)
            .finish_non_exhaustive()
    }
}

impl KerberosServer {
    /// Checks the principal's form (a host part is required) and keeps the mapping rules.
    pub fn new(
        acceptors: Arc<dyn GssAcceptorFactory>,
        names: super::kerberos_name::AuthToLocal,
    ) -> Result<Self, SaslError> {
        let (protocol, server_id) = protocol_and_server_id(acceptors.principal())?;
        Ok(Self {
            acceptors,
            protocol,
            server_id,
            names,
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::sasl::gss_context::WRAP_OVERHEAD;

    /// A scripted acceptor: expects `AP-REQ`, answers `reply`, and "wraps" as
    /// `[conf flag] ‖ plaintext xor 0x5a` (the client tests' fake uses the same form).
    pub(crate) struct FakeAcceptor {
        pub reply: Vec<u8>,
        pub established: bool,
        pub peer: String,
    }

    pub(crate) fn wrap_fake(conf: bool, plain: &[u8]) -> Vec<u8> {
        let mut t = vec![conf as u8];
        t.extend(plain.iter().map(|b| b ^ 0x5a));
        t
    }

    impl GssAcceptor for FakeAcceptor {
        fn accept_step(&mut self, input: &[u8]) -> Result<Vec<u8>, SaslError> {
            if self.established || input != b"AP-REQ" {
                return Err(SaslError::Sasl(format!(
                    "GSSAPI accept_sec_context: bad token {input:?}"
                )));
            }
            self.established = true;
            Ok(self.reply.clone())
        }
    }

    impl EstablishedContext for FakeAcceptor {
        fn is_established(&self) -> bool {
            self.established
        }
        fn initiator(&self) -> Result<String, SaslError> {
            Ok(self.peer.clone())
        }
        fn wrap(&mut self, conf: bool, plain: &[u8], out: &mut Vec<u8>) -> Result<(), SaslError> {
            out.extend(wrap_fake(conf, plain));
            Ok(())
        }
        fn unwrap(&mut self, token: &[u8], out: &mut Vec<u8>) -> Result<bool, SaslError> {
            match token.split_first() {
                Some((&conf, rest)) if conf <= 1 => {
                    out.extend(rest.iter().map(|b| b ^ 0x5a));
                    Ok(conf == 1)
                }
                _ => Err(SaslError::Integrity("GSSAPI unwrap: bad token".into())),
            }
        }
    }

    pub(crate) fn fake(reply: &[u8]) -> Box<FakeAcceptor> {
        Box::new(FakeAcceptor {
            reply: reply.to_vec(),
            established: false,
            peer: "nm/localhost@EXAMPLE.COM".into(),
        })
    }

    fn to_choice(s: &mut GssapiServer, qops: u8) -> Vec<u8> {
        assert_eq!(s.evaluate_response(b"AP-REQ").unwrap(), b"AP-REP");
        assert!(!s.is_complete());
        let offer = s.evaluate_response(&[]).unwrap();
        assert_eq!(offer, wrap_fake(false, &[qops, 1, 0, 0]), "mask, 65536");
        offer
    }

    #[test]
    fn every_offered_level_can_be_chosen() {
        for (qop, bit) in [(Qop::Auth, 1), (Qop::AuthInt, 2), (Qop::AuthConf, 4)] {
            let mut s =
                GssapiServer::new(fake(b"AP-REP"), &[Qop::AuthConf, Qop::AuthInt, Qop::Auth])
                    .unwrap();
            to_choice(&mut s, 7);
            let out = s
                .evaluate_response(&wrap_fake(false, &[bit, 0, 0x40, 0]))
                .unwrap();
            assert!(out.is_empty(), "SUCCESS carries no token");
            assert!(s.is_complete());
            assert_eq!(s.negotiated_qop(), Some(qop));
            assert_eq!(s.authorization_id(), Some("nm/localhost@EXAMPLE.COM"));
            match s.take_layer() {
                None => assert_eq!(qop, Qop::Auth),
                Some(mut l) => {
                    assert_eq!(
                        l.max_wrap_input(),
                        0x4000 - WRAP_OVERHEAD,
                        "client's buffer"
                    );
                    let mut out = Vec::new();
                    l.wrap(b"resp", &mut out).unwrap();
                    assert_eq!(out, wrap_fake(qop == Qop::AuthConf, b"resp"));
                    let mut plain = Vec::new();
                    l.unwrap(&wrap_fake(true, b"call"), &mut plain).unwrap();
                    assert_eq!(plain, b"call");
                    assert!(l.unwrap(&[7, 7], &mut plain).is_err());
                    // integrity-only: accepted at auth-int, refused at auth-conf
                    let clear = l.unwrap(&wrap_fake(false, b"more"), &mut plain);
                    assert_eq!(clear.is_ok(), qop == Qop::AuthInt, "{clear:?}");
                }
            }
            assert!(s.evaluate_response(b"again").is_err());
        }
    }

    #[test]
    fn a_layer_not_offered_or_several_bits_are_refused() {
        let mut s = GssapiServer::new(fake(b"AP-REP"), &[Qop::AuthConf]).unwrap();
        to_choice(&mut s, 4);
        let e = s
            .evaluate_response(&wrap_fake(false, &[1, 0, 0, 0]))
            .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("Client selected unsupported protection: 1"),
            "{e}"
        );
        let mut s = GssapiServer::new(fake(b"AP-REP"), &[Qop::AuthConf, Qop::Auth]).unwrap();
        to_choice(&mut s, 5);
        assert!(s
            .evaluate_response(&wrap_fake(false, &[5, 1, 0, 0]))
            .is_err());
        assert!(!s.is_complete());
    }

    #[test]
    fn authorization_id_must_be_the_principal() {
        let mut s = GssapiServer::new(fake(b"AP-REP"), &[Qop::Auth]).unwrap();
        to_choice(&mut s, 1);
        let mut choice = vec![1, 0, 0, 0];
        choice.extend_from_slice(b"nm/localhost@EXAMPLE.COM");
        s.evaluate_response(&wrap_fake(false, &choice)).unwrap();
        assert!(s.is_complete());

        let mut s = GssapiServer::new(fake(b"AP-REP"), &[Qop::Auth]).unwrap();
        to_choice(&mut s, 1);
        let mut choice = vec![1, 0, 0, 0];
        choice.extend_from_slice(b"root@EXAMPLE.COM");
        let e = s.evaluate_response(&wrap_fake(false, &choice)).unwrap_err();
        assert_eq!(
            e,
            SaslError::AccessControl(
                "nm/localhost@EXAMPLE.COM is not authorized to connect as root@EXAMPLE.COM".into()
            )
        );
        let mut s = GssapiServer::new(fake(b"AP-REP"), &[Qop::Auth]).unwrap();
        to_choice(&mut s, 1);
        assert!(s
            .evaluate_response(&wrap_fake(false, &[1, 0xff, 0xfe]))
            .is_err());
    }

    #[test]
    fn bad_input_is_an_error() {
        let mut s = GssapiServer::new(fake(b"AP-REP"), &[Qop::Auth]).unwrap();
        assert!(s.evaluate_response(b"garbage").is_err());
        let mut s = GssapiServer::new(fake(b"AP-REP"), &[Qop::Auth]).unwrap();
        s.evaluate_response(b"AP-REQ").unwrap();
        let e = s.evaluate_response(b"x").unwrap_err();
        assert!(e.to_string().contains("expecting no response data"), "{e}");
        let mut s = GssapiServer::new(fake(b"AP-REP"), &[Qop::Auth]).unwrap();
        to_choice(&mut s, 1);
        assert!(s.evaluate_response(&[9, 9, 9]).is_err(), "unwrap fails");
        let mut s = GssapiServer::new(fake(b"AP-REP"), &[Qop::Auth]).unwrap();
        to_choice(&mut s, 1);
        assert!(s.evaluate_response(&wrap_fake(false, &[1])).is_err());
        assert!(GssapiServer::new(fake(b""), &[]).is_err());
    }

    #[test]
    fn no_reply_token_sends_the_offer_at_once() {
        let mut s = GssapiServer::new(fake(b""), &[Qop::AuthInt]).unwrap();
        let offer = s.evaluate_response(b"AP-REQ").unwrap();
        assert_eq!(offer, wrap_fake(false, &[2, 1, 0, 0]));
    }

    #[test]
    fn protocol_and_server_id_come_from_the_principal() {
        assert_eq!(
            protocol_and_server_id("rm/host.example.com@EXAMPLE.COM").unwrap(),
            ("rm".into(), "host.example.com".into())
        );
        for bad in ["rm@EXAMPLE.COM", "rm/host", "/host@R", "rm/@R", "rm/host@"] {
            assert!(protocol_and_server_id(bad).is_err(), "{bad}");
        }
    }

    // ---- the whole negotiation, server side, and against our own client ----

    use crate::entropy::SeededEntropy;
    use crate::pb::hadoop::common::rpc_sasl_proto::{SaslAuth, SaslState};
    use crate::rpc::SASL_CALL_ID;
    use crate::sasl::client::{ClientAuth, ClientNegotiation, ClientStep};
    use crate::sasl::gssapi::{GssContext, GssContextFactory, KerberosClient};
    use crate::sasl::kerberos_name::AuthToLocal;
    use crate::sasl::message::{self, AuthMethod};
    use crate::sasl::server::{ServerAuth, ServerNegotiation, ServerStep};

    struct Acceptors(&'static str);
    impl GssAcceptorFactory for Acceptors {
        fn principal(&self) -> &str {
            self.0
        }
        fn acceptor(&self) -> Result<Box<dyn GssAcceptor>, SaslError> {
            Ok(fake(b"AP-REP"))
        }
    }

    /// The initiator half of the fake (AP-REQ out, AP-REP in).
    struct FakeInit(u8);
    impl GssContext for FakeInit {
        fn init_step(&mut self, input: &[u8]) -> Result<Vec<u8>, SaslError> {
            self.0 += 1;
            match (self.0, input) {
                (1, b"") => Ok(b"AP-REQ".to_vec()),
                (2, b"AP-REP") => Ok(Vec::new()),
                _ => Err(SaslError::Sasl("init out of order".into())),
            }
        }
    }
    impl EstablishedContext for FakeInit {
        fn is_established(&self) -> bool {
            self.0 >= 2
        }
        fn initiator(&self) -> Result<String, SaslError> {
            Ok("nm/localhost@EXAMPLE.COM".into())
        }
        fn wrap(&mut self, c: bool, p: &[u8], out: &mut Vec<u8>) -> Result<(), SaslError> {
            out.extend(wrap_fake(c, p));
            Ok(())
        }
        fn unwrap(&mut self, t: &[u8], out: &mut Vec<u8>) -> Result<bool, SaslError> {
            match t.split_first() {
                Some((&conf, rest)) if conf <= 1 => {
                    out.extend(rest.iter().map(|b| b ^ 0x5a));
                    Ok(conf == 1)
                }
                _ => Err(SaslError::Integrity("bad".into())),
            }
        }
    }
    struct Inits;
    impl GssContextFactory for Inits {
        fn client_context(&self, _t: &str) -> Result<Box<dyn GssContext>, SaslError> {
            Ok(Box::new(FakeInit(0)))
        }
    }

    fn kerberos_auth(qops: Vec<Qop>, rules: &str) -> Arc<ServerAuth> {
        let k = KerberosServer::new(
            Arc::new(Acceptors("rm/localhost@EXAMPLE.COM")),
            AuthToLocal::new(rules, "EXAMPLE.COM").unwrap(),
        )
        .unwrap();
        Arc::new(ServerAuth::with_kerberos(k, None, qops).unwrap())
    }

    fn msg(state: SaslState, token: Option<&[u8]>, auths: Vec<SaslAuth>) -> Vec<u8> {
        let mut m = message::message(state);
        m.token = token.map(<[u8]>::to_vec);
        m.auths = auths;
        prost::Message::encode_to_vec(&m)
    }

    fn reply(step: ServerStep) -> crate::pb::hadoop::common::RpcSaslProto {
        match step {
            ServerStep::Reply(m) => m,
            other => panic!("a reply expected, got {other:?}"),
        }
    }

    #[test]
    fn server_negotiation_runs_the_java_sequence() {
        let auth = kerberos_auth(vec![Qop::AuthInt], "DEFAULT");
        assert_eq!(auth.methods(), [AuthMethod::Kerberos]);
        let mut n = ServerNegotiation::new(auth);
        let mut e = SeededEntropy(3);
        let offer = reply(
            n.on_message(&msg(SaslState::Negotiate, None, vec![]), &mut e)
                .unwrap(),
        );
        let krb = SaslAuth {
            method: "KERBEROS".into(),
            mechanism: "GSSAPI".into(),
            protocol: Some("rm".into()),
            server_id: Some("localhost".into()),
            challenge: None,
        };
        assert_eq!(offer.auths, std::slice::from_ref(&krb));
        let init = msg(SaslState::Initiate, Some(b"AP-REQ"), vec![krb]);
        let c = reply(n.on_message(&init, &mut e).unwrap());
        assert_eq!(
            (c.state, c.token.as_deref()),
            (SaslState::Challenge as i32, Some(&b"AP-REP"[..]))
        );
        // the empty RESPONSE must carry its (empty) token
        let no_token = msg(SaslState::Response, None, vec![]);
        let mut n2 = ServerNegotiation::new(kerberos_auth(vec![Qop::Auth], "DEFAULT"));
        n2.on_message(&init, &mut e).unwrap();
        assert!(n2.on_message(&no_token, &mut e).is_err());
        let c = reply(
            n.on_message(&msg(SaslState::Response, Some(b""), vec![]), &mut e)
                .unwrap(),
        );
        assert_eq!(c.token, Some(wrap_fake(false, &[2, 1, 0, 0])));
        let choice = msg(
            SaslState::Response,
            Some(&wrap_fake(false, &[2, 1, 0, 0])),
            vec![],
        );
        let ServerStep::Success { reply, auth } = n.on_message(&choice, &mut e).unwrap() else {
            panic!("SUCCESS expected");
        };
        assert_eq!(reply.token, None, "no token on a GSSAPI SUCCESS");
        assert_eq!(auth.method, AuthMethod::Kerberos);
        assert_eq!(
            auth.user, "nm",
            "DEFAULT maps the principal to its first component"
        );
        assert_eq!(auth.principal.as_deref(), Some("nm/localhost@EXAMPLE.COM"));
        assert_eq!(auth.qop, Qop::AuthInt);
        assert!(auth.layer.is_some());
    }

    #[test]
    fn an_unmappable_principal_is_refused() {
        let auth = kerberos_auth(vec![Qop::Auth], "RULE:[1:$1]");
        let mut n = ServerNegotiation::new(auth.clone());
        let mut e = SeededEntropy(3);
        let init = msg(SaslState::Initiate, Some(b"AP-REQ"), vec![auth_of(&auth)]);
        n.on_message(&init, &mut e).unwrap();
        n.on_message(&msg(SaslState::Response, Some(b""), vec![]), &mut e)
            .unwrap();
        let f = n
            .on_message(
                &msg(
                    SaslState::Response,
                    Some(&wrap_fake(false, &[1, 0, 0, 0])),
                    vec![],
                ),
                &mut e,
            )
            .unwrap_err();
        assert_eq!(
            f.error.to_string(),
            "Illegal principal name nm/localhost@EXAMPLE.COM: No rules applied to \
             nm/localhost@EXAMPLE.COM"
        );
    }

    fn auth_of(a: &ServerAuth) -> SaslAuth {
        assert!(a.methods().contains(&AuthMethod::Kerberos));
        SaslAuth {
            method: "KERBEROS".into(),
            mechanism: "GSSAPI".into(),
            protocol: Some("rm".into()),
            server_id: Some("localhost".into()),
            challenge: None,
        }
    }

    #[test]
    fn our_client_and_server_agree_at_every_level() {
        for (qop, mask) in [(Qop::Auth, 7), (Qop::AuthInt, 7), (Qop::AuthConf, 4)] {
            let server_qops = if mask == 7 {
                vec![Qop::Auth, Qop::AuthInt, Qop::AuthConf]
            } else {
                vec![Qop::AuthConf]
            };
            let mut s = ServerNegotiation::new(kerberos_auth(server_qops, "DEFAULT"));
            let mut c = ClientNegotiation::new(ClientAuth {
                security_enabled: true,
                qops: vec![qop],
                kerberos: Some(KerberosClient {
                    server_principal: "rm/localhost@EXAMPLE.COM".into(),
                    contexts: Arc::new(Inits),
                }),
                ..ClientAuth::default()
            });
            let mut e = SeededEntropy(5);
            let mut to_server = prost::Message::encode_to_vec(&c.start());
            let (server_auth, client_out) = loop {
                match s.on_message(&to_server, &mut e).unwrap() {
                    ServerStep::Reply(m) => {
                        let bytes = prost::Message::encode_to_vec(&m);
                        match c.on_reply(SASL_CALL_ID, &bytes, &mut e).unwrap() {
                            ClientStep::Send(m) => to_server = prost::Message::encode_to_vec(&m),
                            other => panic!("{other:?}"),
                        }
                    }
                    ServerStep::Success { reply, auth } => {
                        let bytes = prost::Message::encode_to_vec(&reply);
                        let ClientStep::Done(o) = c.on_reply(SASL_CALL_ID, &bytes, &mut e).unwrap()
                        else {
                            panic!("client not done");
                        };
                        break (auth, o);
                    }
                    other => panic!("{other:?}"),
                }
            };
            assert_eq!((server_auth.qop, client_out.qop), (qop, qop));
            assert_eq!(server_auth.user, "nm");
            let (Some(mut sl), Some(mut cl)) = (server_auth.layer, client_out.layer) else {
                assert_eq!(qop, Qop::Auth);
                continue;
            };
            let (mut t, mut p) = (Vec::new(), Vec::new());
            cl.wrap(b"context+call", &mut t).unwrap();
            sl.unwrap(&t, &mut p).unwrap();
            assert_eq!(p, b"context+call");
        }
    }

    struct NoTokens;
    impl crate::sasl::server::TokenSecrets for NoTokens {
        fn retrieve(&self, _id: &[u8]) -> Result<crate::sasl::server::TokenPassword, SaslError> {
            Err(SaslError::InvalidToken("no tokens here".into()))
        }
    }

    /// [TOKEN, KERBEROS] as a secure Java server offers them: TOKEN first with its challenge
    /// made at NEGOTIATE; a client choosing KERBEROS afterwards gets a GSSAPI mechanism.
    #[test]
    fn token_first_then_kerberos_chosen() {
        let k = KerberosServer::new(
            Arc::new(Acceptors("rm/localhost@EXAMPLE.COM")),
            AuthToLocal::default_rules("EXAMPLE.COM"),
        )
        .unwrap();
        let auth = Arc::new(
            ServerAuth::with_kerberos(k, Some(Arc::new(NoTokens)), vec![Qop::Auth]).unwrap(),
        );
        assert_eq!(auth.methods(), [AuthMethod::Token, AuthMethod::Kerberos]);
        assert_eq!(auth.methods_text(), "[TOKEN, KERBEROS]");
        let mut n = ServerNegotiation::new(auth.clone());
        let mut e = SeededEntropy(9);
        let offer = reply(
            n.on_message(&msg(SaslState::Negotiate, None, vec![]), &mut e)
                .unwrap(),
        );
        assert_eq!(offer.auths.len(), 2);
        assert_eq!(offer.auths[0].method, "TOKEN");
        assert!(offer.auths[0].challenge.is_some(), "TOKEN's challenge");
        assert_eq!(offer.auths[1], auth_of(&auth));
        let init = msg(SaslState::Initiate, Some(b"AP-REQ"), vec![auth_of(&auth)]);
        let c = reply(n.on_message(&init, &mut e).unwrap());
        assert_eq!(c.token.as_deref(), Some(&b"AP-REP"[..]));
        // SIMPLE is not among them
        let mut n = ServerNegotiation::new(auth);
        n.on_message(&msg(SaslState::Negotiate, None, vec![]), &mut e)
            .unwrap();
        let simple = SaslAuth {
            method: "SIMPLE".into(),
            mechanism: String::new(),
            protocol: None,
            server_id: None,
            challenge: None,
        };
        let f = n
            .on_message(&msg(SaslState::Initiate, None, vec![simple]), &mut e)
            .unwrap_err();
        assert_eq!(
            f.error.to_string(),
            "SIMPLE authentication is not enabled.  Available:[TOKEN, KERBEROS]"
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 4096, failure_persistence: None, ..Default::default() })]
        /// Whatever the client sends at whichever step: a reply or a SaslError, never a panic.
        #[test]
        fn arbitrary_client_bytes_never_panic(
            steps in proptest::collection::vec(proptest::collection::vec(proptest::num::u8::ANY, 0..40), 1..5),
            script in proptest::bool::ANY,
        ) {
            let mut s = GssapiServer::new(fake(b"AP-REP"), &[Qop::Auth, Qop::AuthConf]).unwrap();
            if script {
                let _ = s.evaluate_response(b"AP-REQ");
                let _ = s.evaluate_response(b"");
            }
            for st in &steps {
                let _ = s.evaluate_response(st);
            }
            if s.is_complete() {
                proptest::prop_assert!(s.negotiated_qop().is_some());
            }
        }
    }
}
