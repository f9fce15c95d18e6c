//! GSSAPI (RFC 4752), the mechanism of the KERBEROS auth method — client side, sans-IO.
//!
//! The Kerberos work itself (tickets, AP-REQ/AP-REP, per-message tokens) is a GSS-API security
//! context behind the small [`GssContext`] trait: `ipc` implements it on MIT krb5, and the unit
//! tests below on a fake that checks every call. This module is what SASL adds on top:
//!
//! ```text
//!   evaluate_challenge([])          -> init_sec_context()        (INITIATE token, the AP-REQ)
//!   evaluate_challenge(AP-REP)      -> init_sec_context(AP-REP)  (established; empty RESPONSE)
//!   evaluate_challenge(wrapped [mask, maxbuf24])                 (RFC 4752 §3.1 security layer)
//!                                   -> wrap(conf=false, [chosen bit, our maxbuf24])
//! ```
//!
//! The server offers a bit mask of layers (1 none, 2 integrity, 4 privacy) and its receive
//! buffer; the client takes the first of its own `hadoop.rpc.protection` list that the server
//! offers, as the JDK does (security.md §3.1, §3.4), and announces its own receive buffer only
//! when a layer wraps (the JDK sends 0 for `auth`). No authorization id is sent, so the server
//! authorizes the authenticated principal itself.
//!
//! The server's principal is checked before any ticket is asked for: Hadoop's server advertises
//! `protocol` and `serverId` (its principal `protocol/serverId@REALM` split on `/` and `@`), and
//! the client accepts only the principal it is configured to expect (Java's
//! `SaslRpcClient.getServerPrincipal`: `dfs.namenode.kerberos.principal` with `_HOST` replaced).

use std::sync::Arc;

use super::gss_context::{layer_message, read_layer_message, Negotiated};
use super::{ClientMechanism, Qop, SaslError, SecurityLayer};

/// The SASL mechanism name of the KERBEROS auth method.
pub const MECHANISM: &str = "GSSAPI";

pub use super::gss_context::{EstablishedContext, CLIENT_MAX_RECEIVE, WRAP_OVERHEAD};

/// A GSS-API security context on the initiating side (`gss_init_sec_context`, then the
/// [`EstablishedContext`] calls both sides share), for one connection.
pub trait GssContext: EstablishedContext {
    /// One `gss_init_sec_context` step: `input` is empty on the first call, then the acceptor's
    /// token. Returns the token to send (empty when there is none).
    fn init_step(&mut self, input: &[u8]) -> Result<Vec<u8>, SaslError>;
}

/// Makes the initiating context for one connection, given the target service principal.
pub trait GssContextFactory: Send + Sync {
    /// A fresh context aimed at `target` (`protocol/host@REALM`), with the client's credentials
    /// (which are looked up here: a missing ticket or keytab entry fails now, naming the cause).
    fn client_context(&self, target: &str) -> Result<Box<dyn GssContext>, SaslError>;
}

/// A client's Kerberos settings for one server.
#[derive(Clone)]
pub struct KerberosClient {
    /// The server principal expected, `_HOST` already replaced (see [`replace_host`]), with its
    /// realm: `hdfs/nn.example.com@EXAMPLE.COM`.
    pub server_principal: String,
    /// Where the security contexts come from.
    pub contexts: Arc<dyn GssContextFactory>,
}

impl std::fmt::Debug for KerberosClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KerberosClient")
            .field("server_principal", &self.server_principal)
            .finish_non_exhaustive()
    }
}

/// Java's `SecurityUtil.getServerPrincipal`: in `svc/_HOST@REALM` (exactly three components,
/// the middle one `_HOST`) the host is replaced by `host` in lower case; any other principal is
/// returned as it is.
pub fn replace_host(principal: &str, host: &str) -> String {
    let parts: Vec<&str> = principal.split(['/', '@']).collect();
    match parts.as_slice() {
        [svc, "_HOST", realm] if principal.contains('/') => {
            format!("{svc}/{}@{realm}", host.to_ascii_lowercase())
        }
        _ => principal.to_string(),
    }
}

/// Checks the principal a server advertised in its NEGOTIATE (`protocol`, `serverId`) against the
/// one expected, and returns it (`protocol/serverId@REALM`, the realm being the expected one's).
pub fn check_server_principal(
    expected: &str,
    protocol: Option<&str>,
    server_id: Option<&str>,
) -> Result<String, SaslError> {
    let Some((service, realm)) = expected.rsplit_once('@') else {
        return Err(SaslError::Config(format!(
            "server Kerberos principal {expected:?} names no realm (svc/host@REALM expected)"
        )));
    };
    if !service.contains('/') || realm.is_empty() {
        return Err(SaslError::Config(format!(
            "server Kerberos principal {expected:?} has no host part (svc/host@REALM expected)"
        )));
    }
    let (protocol, server_id) = match (protocol, server_id) {
        (Some(p), Some(s)) if !p.is_empty() && !s.is_empty() => (p, s),
        _ => {
            return Err(SaslError::Sasl(format!(
                "Server offered KERBEROS without a principal (protocol {protocol:?}, \
                 serverId {server_id:?}); expecting {expected}"
            )))
        }
    };
    let advertised = format!("{protocol}/{server_id}@{realm}");
    if advertised != expected {
        return Err(SaslError::Sasl(format!(
            "Server has invalid Kerberos principal: {advertised}, expecting: {expected}"
        )));
    }
    Ok(advertised)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// `init_sec_context` until established.
    Context,
    /// Waiting for the server's wrapped security-layer offer.
    Layer,
    Complete,
}

/// The GSSAPI client mechanism over one [`GssContext`].
pub struct GssapiClient {
    neg: Negotiated<dyn GssContext>,
    qops: Vec<Qop>,
    stage: Stage,
}

impl std::fmt::Debug for GssapiClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GssapiClient")
            .field("stage", &self.stage)
            .field("negotiated", &self.neg)
            .finish_non_exhaustive()
    }
}

impl GssapiClient {
    /// `qops`: `hadoop.rpc.protection` in preference order (not empty).
    pub fn new(ctx: Box<dyn GssContext>, qops: Vec<Qop>) -> Result<Self, SaslError> {
        if qops.is_empty() {
            return Err(SaslError::Config(
                "GSSAPI: no protection level to offer".into(),
            ));
        }
        Ok(Self {
            neg: Negotiated::new(ctx),
            qops,
            stage: Stage::Context,
        })
    }

    /// The authenticated client principal (`user@REALM`), once complete: Java's
    /// `ugi.getUserName()`, which the connection context carries as effectiveUser.
    pub fn initiator(&self) -> Option<&str> {
        self.neg.client.as_deref()
    }

    /// RFC 4752 §3.1: the server's `[mask, maxbuf24]`, wrapped without confidentiality.
    fn security_layer(&mut self, challenge: &[u8]) -> Result<Vec<u8>, SaslError> {
        let mut plain = Vec::with_capacity(4);
        self.neg.ctx()?.unwrap(challenge, &mut plain)?;
        let Ok(offer) = <&[u8; 4]>::try_from(plain.as_slice()) else {
            return Err(SaslError::Sasl(format!(
                "GSSAPI: the server's security layer offer is {} bytes, not 4",
                plain.len()
            )));
        };
        let (mask, peer_max) = read_layer_message(offer);
        let Some(&qop) = self.qops.iter().find(|q| mask & q.mask() != 0) else {
            return Err(SaslError::Sasl(format!(
                "No common protection layer between client and server (server offers mask \
                 {mask:#04x}, client wants {})",
                self.qops
                    .iter()
                    .map(|q| q.sasl_name())
                    .collect::<Vec<_>>()
                    .join(",")
            )));
        };
        let max = if qop.wraps() { CLIENT_MAX_RECEIVE } else { 0 };
        let reply = layer_message(qop.mask(), max);
        let mut out = Vec::new();
        self.neg.ctx()?.wrap(false, &reply, &mut out)?;
        let initiator = self.neg.ctx()?.initiator()?;
        self.neg.complete(qop, peer_max, initiator);
        self.stage = Stage::Complete;
        Ok(out)
    }
}

impl ClientMechanism for GssapiClient {
    fn mechanism(&self) -> &str {
        MECHANISM
    }

    fn has_initial_response(&self) -> bool {
        true
    }

    fn evaluate_challenge(&mut self, challenge: &[u8]) -> Result<Vec<u8>, SaslError> {
        match self.stage {
            Stage::Context => {
                let ctx = self.neg.ctx()?;
                let out = ctx.init_step(challenge)?;
                if ctx.is_established() {
                    self.stage = Stage::Layer;
                }
                Ok(out)
            }
            Stage::Layer => self.security_layer(challenge),
            Stage::Complete => Err(SaslError::Sasl(
                "GSSAPI authentication already complete".into(),
            )),
        }
    }

    fn is_complete(&self) -> bool {
        self.stage == Stage::Complete
    }

    fn negotiated_qop(&self) -> Option<Qop> {
        self.neg.qop
    }

    fn authenticated_user(&self) -> Option<String> {
        self.neg.client.clone()
    }

    fn take_layer(&mut self) -> Option<Box<dyn SecurityLayer>> {
        self.neg.take_layer()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entropy::SeededEntropy;
    use crate::pb::hadoop::common::rpc_sasl_proto::{SaslAuth, SaslState};
    use crate::rpc::SASL_CALL_ID;
    use crate::sasl::client::{ClientAuth, ClientNegotiation, ClientStep};
    use crate::sasl::message::AuthMethod;

    /// A context that plays a scripted acceptor: it checks each input token, and "wraps" as
    /// `[conf flag] ‖ plaintext xor 0x5a` so that both directions are visible to the test.
    struct Fake {
        steps: Vec<(Vec<u8>, Vec<u8>)>,
        done: usize,
        wrapped: Vec<(bool, Vec<u8>)>,
    }

    fn wrap_fake(conf: bool, plain: &[u8]) -> Vec<u8> {
        let mut t = vec![conf as u8];
        t.extend(plain.iter().map(|b| b ^ 0x5a));
        t
    }

    impl GssContext for Fake {
        fn init_step(&mut self, input: &[u8]) -> Result<Vec<u8>, SaslError> {
            let Some((want, out)) = self.steps.get(self.done) else {
                return Err(SaslError::Sasl("init after established".into()));
            };
            if want.as_slice() != input {
                return Err(SaslError::Sasl(format!("unexpected input {input:?}")));
            }
            self.done += 1;
            Ok(out.clone())
        }
    }

    impl EstablishedContext for Fake {
        fn is_established(&self) -> bool {
            self.done == self.steps.len()
        }
        fn initiator(&self) -> Result<String, SaslError> {
            Ok("client@EXAMPLE.COM".into())
        }
        fn wrap(&mut self, conf: bool, plain: &[u8], out: &mut Vec<u8>) -> Result<(), SaslError> {
            self.wrapped.push((conf, plain.to_vec()));
            out.extend(wrap_fake(conf, plain));
            Ok(())
        }
        fn unwrap(&mut self, token: &[u8], out: &mut Vec<u8>) -> Result<bool, SaslError> {
            match token.split_first() {
                Some((&conf, rest)) if conf <= 1 => {
                    out.extend(rest.iter().map(|b| b ^ 0x5a));
                    Ok(conf == 1)
                }
                _ => Err(SaslError::Integrity("bad token".into())),
            }
        }
    }

    fn fake() -> Box<Fake> {
        Box::new(Fake {
            steps: vec![(vec![], b"AP-REQ".to_vec()), (b"AP-REP".to_vec(), vec![])],
            done: 0,
            wrapped: Vec::new(),
        })
    }

    fn run(qops: Vec<Qop>, offer: [u8; 4]) -> Result<(GssapiClient, Vec<u8>), SaslError> {
        let mut c = GssapiClient::new(fake(), qops)?;
        assert!(c.has_initial_response());
        assert_eq!(c.evaluate_challenge(&[])?, b"AP-REQ");
        assert!(!c.is_complete());
        assert_eq!(c.evaluate_challenge(b"AP-REP")?, b"", "empty RESPONSE");
        assert!(!c.is_complete());
        let reply = c.evaluate_challenge(&wrap_fake(false, &offer))?;
        Ok((c, reply))
    }

    #[test]
    fn the_first_qop_of_the_client_list_the_server_offers_wins() {
        // server offers auth + auth-int + auth-conf, 64 KiB
        let (mut c, reply) = run(vec![Qop::AuthInt, Qop::AuthConf], [7, 1, 0, 0]).unwrap();
        assert!(c.is_complete());
        assert_eq!(
            reply,
            wrap_fake(false, &[2, 1, 0, 0]),
            "integrity, maxbuf 65536"
        );
        assert_eq!(c.negotiated_qop(), Some(Qop::AuthInt));
        assert_eq!(
            c.authenticated_user().as_deref(),
            Some("client@EXAMPLE.COM")
        );
        let mut layer = c.take_layer().expect("auth-int wraps");
        assert_eq!(layer.max_wrap_input(), 65536 - WRAP_OVERHEAD);
        let mut out = Vec::new();
        layer.wrap(b"call", &mut out).unwrap();
        assert_eq!(out, wrap_fake(false, b"call"), "integrity: conf_req false");
        // only the offer was unwrapped and only the reply wrapped before; now a server message
        let mut plain = Vec::new();
        layer
            .unwrap(&wrap_fake(false, b"resp"), &mut plain)
            .unwrap();
        assert_eq!(plain, b"resp");
        assert!(layer.unwrap(&[9], &mut plain).is_err(), "bad token refused");
        assert!(c.evaluate_challenge(b"more").is_err(), "complete");
    }

    #[test]
    fn privacy_encrypts_and_auth_announces_no_buffer() {
        let (mut c, _) = run(vec![Qop::AuthConf], [4, 0, 0x80, 0]).unwrap();
        let mut layer = c.take_layer().unwrap();
        assert_eq!(layer.max_wrap_input(), 0x8000 - WRAP_OVERHEAD);
        let mut out = Vec::new();
        layer.wrap(b"x", &mut out).unwrap();
        assert_eq!(out[0], 1, "privacy: conf_req true");
        out.clear();
        layer.wrap(b"", &mut out).unwrap();
        assert!(out.is_empty(), "nothing wrapped for nothing");
        let mut plain = Vec::new();
        layer.unwrap(&wrap_fake(true, b"resp"), &mut plain).unwrap();
        assert_eq!(plain, b"resp");
        let e = layer
            .unwrap(&wrap_fake(false, b"clear"), &mut plain)
            .unwrap_err();
        assert!(
            matches!(&e, SaslError::Integrity(m) if m.contains("without confidentiality")),
            "an integrity-only token at privacy is refused: {e}"
        );
        assert_eq!(plain, b"resp", "nothing of it delivered");

        let (mut c, reply) = run(vec![Qop::Auth], [1, 1, 0, 0]).unwrap();
        assert_eq!(
            reply,
            wrap_fake(false, &[1, 0, 0, 0]),
            "auth: maxbuf 0 like the JDK"
        );
        assert_eq!(c.negotiated_qop(), Some(Qop::Auth));
        assert!(c.take_layer().is_none());
    }

    #[test]
    fn no_common_layer_and_bad_offers_are_refused() {
        let e = run(vec![Qop::AuthConf], [3, 1, 0, 0]).unwrap_err();
        assert!(
            e.to_string().starts_with("No common protection layer"),
            "{e}"
        );
        let mut c = GssapiClient::new(fake(), vec![Qop::Auth]).unwrap();
        c.evaluate_challenge(&[]).unwrap();
        c.evaluate_challenge(b"AP-REP").unwrap();
        let e = c
            .evaluate_challenge(&wrap_fake(false, &[1, 0, 0]))
            .unwrap_err();
        assert!(e.to_string().contains("3 bytes, not 4"), "{e}");
        let mut c = GssapiClient::new(fake(), vec![Qop::Auth]).unwrap();
        c.evaluate_challenge(&[]).unwrap();
        assert!(c.evaluate_challenge(b"not the AP-REP").is_err());
        assert!(GssapiClient::new(fake(), vec![]).is_err());
    }

    struct FakeFactory(std::sync::Mutex<Vec<String>>);

    impl GssContextFactory for FakeFactory {
        fn client_context(&self, target: &str) -> Result<Box<dyn GssContext>, SaslError> {
            self.0.lock().unwrap().push(target.to_string());
            Ok(fake())
        }
    }

    fn sasl(state: SaslState, token: Option<&[u8]>, auths: Vec<SaslAuth>) -> Vec<u8> {
        let mut m = crate::sasl::message::message(state);
        m.token = token.map(<[u8]>::to_vec);
        m.auths = auths;
        prost::Message::encode_to_vec(&m)
    }

    fn auth(method: &str, mech: &str, protocol: &str, server_id: &str) -> SaslAuth {
        SaslAuth {
            method: method.into(),
            mechanism: mech.into(),
            protocol: Some(protocol.into()),
            server_id: Some(server_id.into()),
            challenge: None,
        }
    }

    /// The whole KERBEROS exchange as a Java NameNode runs it (security.md §1.7), through
    /// `ClientNegotiation`: TOKEN (no token held) is skipped, KERBEROS taken.
    #[test]
    fn negotiation_runs_the_four_round_trips_of_a_java_server() {
        let factory = Arc::new(FakeFactory(Default::default()));
        let mut neg = ClientNegotiation::new(ClientAuth {
            security_enabled: true,
            qops: vec![Qop::AuthConf],
            kerberos: Some(KerberosClient {
                server_principal: "hdfs/localhost@EXAMPLE.COM".into(),
                contexts: factory.clone(),
            }),
            ..ClientAuth::default()
        });
        let mut e = SeededEntropy(1);
        let mut token = auth("TOKEN", "DIGEST-MD5", "", "default");
        token.challenge = Some(b"realm=\"default\"".to_vec());
        let krb = auth("KERBEROS", "GSSAPI", "hdfs", "localhost");
        let offer = sasl(SaslState::Negotiate, None, vec![token, krb.clone()]);
        let ClientStep::Send(init) = neg.on_reply(SASL_CALL_ID, &offer, &mut e).unwrap() else {
            panic!("INITIATE expected");
        };
        assert_eq!(init.state, SaslState::Initiate as i32);
        assert_eq!(init.token.as_deref(), Some(&b"AP-REQ"[..]));
        assert_eq!(init.auths, [krb], "the auth echoed exactly");
        assert_eq!(*factory.0.lock().unwrap(), ["hdfs/localhost@EXAMPLE.COM"]);
        let ap_rep = sasl(SaslState::Challenge, Some(b"AP-REP"), vec![]);
        let ClientStep::Send(r) = neg.on_reply(SASL_CALL_ID, &ap_rep, &mut e).unwrap() else {
            panic!("RESPONSE expected");
        };
        assert_eq!(r.state, SaslState::Response as i32);
        assert_eq!(
            r.token.as_deref(),
            Some(&b""[..]),
            "empty but present (trap 3)"
        );
        let layer = sasl(
            SaslState::Challenge,
            Some(&wrap_fake(false, &[7, 1, 0, 0])),
            vec![],
        );
        let ClientStep::Send(r) = neg.on_reply(SASL_CALL_ID, &layer, &mut e).unwrap() else {
            panic!("RESPONSE expected");
        };
        assert_eq!(r.token, Some(wrap_fake(false, &[4, 1, 0, 0])));
        let success = sasl(SaslState::Success, None, vec![]);
        let ClientStep::Done(o) = neg.on_reply(SASL_CALL_ID, &success, &mut e).unwrap() else {
            panic!("Done expected");
        };
        assert_eq!(
            (o.method, o.qop, o.user.as_deref()),
            (
                AuthMethod::Kerberos,
                Qop::AuthConf,
                Some("client@EXAMPLE.COM")
            )
        );
        assert!(o.layer.is_some());
    }

    #[test]
    fn negotiation_without_kerberos_or_with_another_principal_is_refused() {
        let krb = auth("KERBEROS", "GSSAPI", "nn", "localhost");
        let offer = sasl(SaslState::Negotiate, None, vec![krb]);
        let mut e = SeededEntropy(1);
        let mut neg = ClientNegotiation::new(ClientAuth {
            security_enabled: true,
            ..ClientAuth::default()
        });
        let err = neg.on_reply(SASL_CALL_ID, &offer, &mut e).unwrap_err();
        assert_eq!(err.to_string(), "Client cannot authenticate via:[KERBEROS]");
        let factory = Arc::new(FakeFactory(Default::default()));
        let mut neg = ClientNegotiation::new(ClientAuth {
            security_enabled: true,
            kerberos: Some(KerberosClient {
                server_principal: "hdfs/localhost@EXAMPLE.COM".into(),
                contexts: factory.clone(),
            }),
            ..ClientAuth::default()
        });
        let err = neg.on_reply(SASL_CALL_ID, &offer, &mut e).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("Server has invalid Kerberos principal"),
            "{err}"
        );
        assert!(factory.0.lock().unwrap().is_empty(), "no context made");
    }

    #[test]
    fn server_principal_checks() {
        assert_eq!(
            replace_host("hdfs/_HOST@EXAMPLE.COM", "NN.Example.com"),
            "hdfs/nn.example.com@EXAMPLE.COM"
        );
        assert_eq!(
            replace_host("hdfs/nn1@EXAMPLE.COM", "x"),
            "hdfs/nn1@EXAMPLE.COM"
        );
        assert_eq!(replace_host("_HOST@EXAMPLE.COM", "x"), "_HOST@EXAMPLE.COM");
        let want = "hdfs/localhost@EXAMPLE.COM";
        assert_eq!(
            check_server_principal(want, Some("hdfs"), Some("localhost")).unwrap(),
            want
        );
        let e = check_server_principal(want, Some("nn"), Some("localhost")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "Server has invalid Kerberos principal: nn/localhost@EXAMPLE.COM, expecting: \
             hdfs/localhost@EXAMPLE.COM"
        );
        assert!(check_server_principal(want, Some("hdfs"), None).is_err());
        assert!(check_server_principal("hdfs/localhost", Some("hdfs"), Some("localhost")).is_err());
        assert!(check_server_principal("hdfs@EXAMPLE.COM", Some("hdfs"), Some("x")).is_err());
    }
}
