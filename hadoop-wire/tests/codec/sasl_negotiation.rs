//! The SASL negotiation state machines as an in-memory pair (no sockets, quinn-proto style):
//! the client's messages go to the server's `on_message` as bytes, the replies back to the
//! client's `on_reply`, exactly the exchange of security.md §1.7; then the two security layers
//! talk through WRAP-sized pieces.

use std::sync::Arc;

use hadoop_wire::entropy::SeededEntropy;
use hadoop_wire::pb::hadoop::common::rpc_response_header_proto::RpcErrorCodeProto;
use hadoop_wire::pb::hadoop::common::rpc_sasl_proto::SaslState;
use hadoop_wire::pb::hadoop::common::RpcSaslProto;
use hadoop_wire::rpc::SASL_CALL_ID;
use hadoop_wire::sasl::client::{
    ClientAuth, ClientNegotiation, ClientOutcome, ClientStep, TokenCredential,
};
use hadoop_wire::sasl::message::{self, AuthMethod};
use hadoop_wire::sasl::server::{
    Authenticated, ServerAuth, ServerFailure, ServerNegotiation, ServerStep, TokenPassword,
    TokenSecrets,
};
use hadoop_wire::sasl::{Qop, SaslError};
use prost::Message as _;

struct Secrets;

const PASSWORD: &[u8] = b"0123456789abcdefghij";

impl TokenSecrets for Secrets {
    fn retrieve(&self, identifier: &[u8]) -> Result<TokenPassword, SaslError> {
        match identifier {
            b"id-of-alice" => Ok(TokenPassword {
                password: PASSWORD.to_vec(),
                user: "alice".into(),
            }),
            _ => Err(SaslError::InvalidToken("unknown token".into())),
        }
    }
}

fn server_auth(configured: AuthMethod, qops: Vec<Qop>) -> Arc<ServerAuth> {
    Arc::new(ServerAuth::new(configured, Some(Arc::new(Secrets)), qops).unwrap())
}

fn alice(password: &[u8]) -> TokenCredential {
    TokenCredential {
        identifier: b"id-of-alice".to_vec(),
        password: password.to_vec(),
    }
}

fn bytes(m: &RpcSaslProto) -> Vec<u8> {
    m.encode_to_vec()
}

/// Every message exchanged, in order, as (from client?, message).
type Transcript = Vec<(bool, RpcSaslProto)>;

/// Runs a whole negotiation in memory.
fn run(
    client: ClientAuth,
    server: Arc<ServerAuth>,
) -> (
    Result<(ClientOutcome, Option<Authenticated>), String>,
    Transcript,
) {
    let mut rng = SeededEntropy(11);
    let mut c = ClientNegotiation::new(client);
    let mut s = ServerNegotiation::new(server);
    let mut t = Vec::new();
    let mut to_server = c.start();
    loop {
        t.push((true, to_server.clone()));
        let reply = match s.on_message(&bytes(&to_server), &mut rng) {
            Ok(ServerStep::Reply(m)) => m,
            Ok(ServerStep::Simple { reply: Some(m) }) => m,
            Ok(ServerStep::Simple { reply: None }) => {
                return (Err("server switched to SIMPLE without a reply".into()), t)
            }
            Ok(ServerStep::Success { reply, auth }) => {
                t.push((false, reply.clone()));
                return match c.on_reply(SASL_CALL_ID, &bytes(&reply), &mut rng) {
                    Ok(ClientStep::Done(o)) => (Ok((o, Some(auth))), t),
                    Ok(other) => (Err(format!("client not done after SUCCESS: {other:?}")), t),
                    Err(e) => (Err(format!("client: {} {e}", e.java_class())), t),
                };
            }
            Err(ServerFailure { error, code }) => {
                return (
                    Err(format!("server {code:?}: {} {error}", error.java_class())),
                    t,
                )
            }
        };
        t.push((false, reply.clone()));
        match c.on_reply(SASL_CALL_ID, &bytes(&reply), &mut rng) {
            Ok(ClientStep::Send(m)) => to_server = m,
            Ok(ClientStep::SendThenDone(m, o)) => {
                t.push((true, m.clone()));
                return match s.on_message(&bytes(&m), &mut rng) {
                    Ok(ServerStep::Simple { reply: None }) => (Ok((o, None)), t),
                    other => (Err(format!("server after SIMPLE INITIATE: {other:?}")), t),
                };
            }
            Ok(ClientStep::Done(o)) => return (Ok((o, None)), t),
            Err(e) => return (Err(format!("client: {} {e}", e.java_class())), t),
        }
    }
}

fn states(t: &Transcript) -> Vec<(bool, SaslState)> {
    t.iter()
        .map(|(c, m)| (*c, SaslState::try_from(m.state).unwrap()))
        .collect()
}

#[test]
fn token_negotiation_is_javas_two_round_trips_at_every_level() {
    for qop in [Qop::Auth, Qop::AuthInt, Qop::AuthConf] {
        let (r, t) = run(
            ClientAuth::token(alice(PASSWORD), vec![qop]),
            server_auth(AuthMethod::Token, vec![qop]),
        );
        let (client, server) = r.unwrap();
        let server = server.unwrap();
        use SaslState::*;
        assert_eq!(
            states(&t),
            [
                (true, Negotiate),
                (false, Negotiate),
                (true, Initiate),
                (false, Success)
            ]
        );
        // the server's offer: TOKEN, DIGEST-MD5, protocol "" (present), serverId "default",
        // with the challenge
        let offer = &t[1].1.auths;
        assert_eq!(offer.len(), 1);
        assert_eq!(offer[0].method, "TOKEN");
        assert_eq!(offer[0].mechanism, "DIGEST-MD5");
        assert_eq!(offer[0].protocol.as_deref(), Some(""));
        assert_eq!(offer[0].server_id.as_deref(), Some("default"));
        let challenge = String::from_utf8(offer[0].challenge.clone().unwrap()).unwrap();
        assert!(
            challenge.starts_with("realm=\"default\",nonce=\""),
            "{challenge}"
        );
        assert!(challenge.ends_with("algorithm=md5-sess"), "{challenge}");
        // INITIATE echoes the auth without the challenge, and carries the DIGEST response
        let init = &t[2].1;
        assert_eq!(init.auths, vec![message::without_challenge(&offer[0])]);
        let response = String::from_utf8(init.token.clone().unwrap()).unwrap();
        assert!(
            response.contains("username=\"aWQtb2YtYWxpY2U=\""),
            "{response}"
        );
        assert!(response.contains("digest-uri=\"/default\""), "{response}");
        assert!(
            response.contains(&format!("qop={}", qop.sasl_name())),
            "{response}"
        );
        // SUCCESS carries rspauth
        let rsp = String::from_utf8(t[3].1.token.clone().unwrap()).unwrap();
        assert!(rsp.starts_with("rspauth=") && rsp.len() == 8 + 32, "{rsp}");

        assert_eq!((client.method, client.qop), (AuthMethod::Token, qop));
        assert_eq!((server.method, server.qop), (AuthMethod::Token, qop));
        assert_eq!(server.user, "alice");
        assert_eq!(
            server.token_identifier.as_deref(),
            Some(&b"id-of-alice"[..])
        );
        assert_eq!(client.layer.is_some(), qop.wraps());
        assert_eq!(server.layer.is_some(), qop.wraps());
        if let (Some(mut cl), Some(mut sl)) = (client.layer, server.layer) {
            // many messages of many sizes, each direction, sequence numbers carried on
            for len in [0usize, 1, 7, 8, 9, 100, 4096, 65_000] {
                let m: Vec<u8> = (0..len).map(|i| (i * 31) as u8).collect();
                let (mut w, mut p) = (Vec::new(), Vec::new());
                cl.wrap(&m, &mut w).unwrap();
                sl.unwrap(&w, &mut p).unwrap();
                assert_eq!(p, m, "client→server {len}");
                let (mut w, mut p) = (Vec::new(), Vec::new());
                sl.wrap(&m, &mut w).unwrap();
                cl.unwrap(&w, &mut p).unwrap();
                assert_eq!(p, m, "server→client {len}");
            }
            assert_eq!(cl.max_wrap_input(), sl.max_wrap_input());
        }
    }
}

#[test]
fn the_server_offers_token_first_and_the_client_picks_in_server_order() {
    let auth = server_auth(AuthMethod::Simple, vec![Qop::Auth]);
    assert_eq!(auth.methods(), [AuthMethod::Token, AuthMethod::Simple]);
    // a token holder takes TOKEN (first usable)
    let (r, _) = run(
        ClientAuth::token(alice(PASSWORD), vec![Qop::Auth]),
        auth.clone(),
    );
    assert_eq!(r.unwrap().0.method, AuthMethod::Token);
    // a SASL client without a token takes SIMPLE: INITIATE{SIMPLE}, no reply
    let (r, t) = run(
        ClientAuth {
            security_enabled: true,
            fallback_to_simple_allowed: true,
            ..ClientAuth::default()
        },
        auth,
    );
    assert_eq!(r.unwrap().0.method, AuthMethod::Simple);
    let init = &t.last().unwrap().1;
    assert_eq!(init.auths[0].method, "SIMPLE");
    assert_eq!(init.auths[0].mechanism, "");
}

#[test]
fn refusals_carry_javas_class_and_text() {
    let only_token = || server_auth(AuthMethod::Token, vec![Qop::Auth]);
    // wrong password: the DIGEST response does not match
    let (r, _) = run(
        ClientAuth::token(alice(b"not the password"), vec![Qop::Auth]),
        only_token(),
    );
    let e = r.unwrap_err();
    assert!(
        e.starts_with("server FatalUnauthorized: javax.security.sasl.SaslException"),
        "{e}"
    );
    assert!(e.contains("Mismatched response"), "{e}");
    // unknown token: the secrets' InvalidToken
    let stranger = TokenCredential {
        identifier: b"id-of-mallory".to_vec(),
        password: PASSWORD.to_vec(),
    };
    let (r, _) = run(ClientAuth::token(stranger, vec![Qop::Auth]), only_token());
    let e = r.unwrap_err();
    assert!(
        e.contains("org.apache.hadoop.security.token.SecretManager$InvalidToken unknown token"),
        "{e}"
    );
    // no token: nothing usable among the offer
    let (r, _) = run(
        ClientAuth {
            security_enabled: true,
            ..ClientAuth::default()
        },
        only_token(),
    );
    assert_eq!(
        r.unwrap_err(),
        "client: org.apache.hadoop.security.AccessControlException Client cannot authenticate via:[TOKEN]"
    );
    // no common protection
    let (r, _) = run(
        ClientAuth::token(alice(PASSWORD), vec![Qop::AuthConf]),
        only_token(),
    );
    let e = r.unwrap_err();
    assert!(
        e.contains("No common protection layer between client and server"),
        "{e}"
    );
    // a secure client told to fall back by a SIMPLE-only server
    let simple = Arc::new(ServerAuth::simple());
    let (r, _) = run(
        ClientAuth {
            security_enabled: true,
            ..ClientAuth::token(alice(PASSWORD), vec![Qop::Auth])
        },
        simple.clone(),
    );
    assert!(r
        .unwrap_err()
        .contains("Server asks us to fall back to SIMPLE auth"));
    // an insecure token client may
    let (r, _) = run(ClientAuth::token(alice(PASSWORD), vec![Qop::Auth]), simple);
    assert_eq!(r.unwrap().0.method, AuthMethod::Simple);
}

#[test]
fn out_of_order_and_malformed_messages_are_refused() {
    let mut rng = SeededEntropy(3);
    let auth = server_auth(AuthMethod::Token, vec![Qop::Auth]);
    let fail = |msgs: &[RpcSaslProto]| -> ServerFailure {
        let mut s = ServerNegotiation::new(auth.clone());
        let mut rng = SeededEntropy(4);
        for m in msgs {
            if let Err(f) = s.on_message(&bytes(m), &mut rng) {
                return f;
            }
        }
        panic!("no refusal for {msgs:?}");
    };
    let neg = message::message(SaslState::Negotiate);
    let f = fail(&[neg.clone(), neg.clone()]);
    assert_eq!(
        f.error,
        SaslError::AccessControl("Client already attempted negotiation".into())
    );
    assert_eq!(f.code, RpcErrorCodeProto::FatalUnauthorized);
    let f = fail(&[message::message(SaslState::Wrap)]);
    assert_eq!(
        f.error,
        SaslError::Sasl("Client sent unsupported state WRAP".into())
    );
    let mut init = message::message(SaslState::Initiate);
    let f = fail(&[neg.clone(), init.clone()]);
    assert_eq!(
        f.error,
        SaslError::Sasl("Client mechanism is malformed".into())
    );
    // an INITIATE without a token
    let mut s = ServerNegotiation::new(auth.clone());
    let ServerStep::Reply(offer) = s.on_message(&bytes(&neg), &mut rng).unwrap() else {
        panic!()
    };
    init.auths.push(message::without_challenge(&offer.auths[0]));
    let f = s.on_message(&bytes(&init), &mut rng).unwrap_err();
    assert_eq!(
        f.error,
        SaslError::Sasl("Client did not send a token".into())
    );
    // garbage and oversized messages
    let mut s = ServerNegotiation::new(auth.clone());
    assert!(s.on_message(&[0xff, 0xff, 0xff], &mut rng).is_err());
    let mut s = ServerNegotiation::new(auth);
    let f = s.on_message(&vec![0u8; 70_000], &mut rng).unwrap_err();
    assert!(f.error.to_string().contains("exceeds the limit"));
    // the client: a reply for another call id, an unsolicited challenge
    let mut c = ClientNegotiation::new(ClientAuth::token(alice(PASSWORD), vec![Qop::Auth]));
    let e = c.on_reply(5, &bytes(&neg), &mut rng).unwrap_err();
    assert_eq!(
        e,
        SaslError::Sasl("Non-SASL response during negotiation".into())
    );
    let mut ch = message::message(SaslState::Challenge);
    ch.token = Some(b"x".to_vec());
    let e = c.on_reply(SASL_CALL_ID, &bytes(&ch), &mut rng).unwrap_err();
    assert_eq!(
        e,
        SaslError::Sasl("Server sent unsolicited challenge".into())
    );
}
