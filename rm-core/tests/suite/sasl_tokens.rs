//! The token secret managers behind `ipc`'s SASL server, over a socket: a DIGEST-MD5 client
//! with an AMRMToken from [`AmrmTokenSecretManager`] is authenticated as its attempt and
//! refused once the attempt has finished; a client with an HDFS delegation token from
//! [`DelegationTokenSecretManager`] is authenticated as the owner and refused, with Java's
//! class and text, once the token is past its renew date.
//!
//! (This lives in rm-core because the AMRM manager does; rm-core already depends on ipc.)

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hadoop_wire::entropy::SeededEntropy;
use hadoop_wire::sasl::client::{ClientAuth, TokenCredential};
use hadoop_wire::sasl::message::AuthMethod;
use hadoop_wire::sasl::server::{ServerAuth, TokenSecrets};
use hadoop_wire::sasl::Qop;
use hadoop_wire::token::delegation::{
    DelegationConfig, DelegationTokenSecretManager, DelegationTokenSecrets,
};
use hadoop_wire::token::Token;
use hadoop_wire::yarn::ids::{AppId, AttemptId};
use ipc::buffer_protocol as bench;
use ipc::client::{Client, ClientConfig, ClientError};
use ipc::server::{Registry, Server, ServerConfig};
use rm_core::amrm_token::{AmrmTokenSecretManager, AmrmTokenSecrets};

const INVALID_TOKEN: &str = "org.apache.hadoop.security.token.SecretManager$InvalidToken";

fn server(secrets: Arc<dyn TokenSecrets>) -> Server {
    let mut r = Registry::new();
    bench::register(&mut r, 1 << 20);
    r.register(
        bench::PROTOCOL,
        bench::VERSION,
        "whoami",
        |call: &ipc::server::Call<'_>, reply: &mut ipc::server::Reply<'_, '_>| {
            let s = format!("{} {}", call.user.unwrap_or("-"), call.auth_method);
            reply.bytes(s.as_bytes())?;
            Ok(())
        },
    );
    let auth = ServerAuth::new(AuthMethod::Token, Some(secrets), vec![Qop::AuthConf]).unwrap();
    let cfg = ServerConfig {
        auth: Arc::new(auth),
        ..ServerConfig::default()
    };
    Server::start("127.0.0.1:0".parse().unwrap(), cfg, r).unwrap()
}

fn whoami(s: &Server, t: &Token) -> Result<String, ClientError> {
    let cfg = ClientConfig {
        protocol: bench::PROTOCOL.into(),
        protocol_version: bench::VERSION,
        user: "whoever".into(),
        call_timeout: Duration::from_secs(30),
        max_connect_attempts: 1,
        auth: ClientAuth::token(
            TokenCredential {
                identifier: t.identifier.clone(),
                password: t.password.clone(),
            },
            vec![Qop::AuthConf],
        ),
        ..ClientConfig::default()
    };
    let c = Client::new(s.local_addr(), cfg);
    let r = c.call("whoami", &[])?;
    Ok(String::from_utf8(r.payload().to_vec()).unwrap())
}

fn refused(r: Result<String, ClientError>) -> (String, String) {
    match r.expect_err("refused") {
        ClientError::Remote { class, message, .. } => (class, message),
        other => panic!("{other:?}"),
    }
}

#[test]
fn amrm_tokens_authenticate_until_the_attempt_finishes() {
    let mut e = SeededEntropy(11);
    let mut m = AmrmTokenSecretManager::new(&mut e, 0, 10_000, 3_000, 64).unwrap();
    let attempt = AttemptId {
        app: AppId {
            cluster_timestamp: 1_700_000_000_000,
            id: 12,
        },
        attempt: 3,
    };
    let token = m.create_and_get_amrm_token(attempt).unwrap();
    let secrets = Arc::new(AmrmTokenSecrets::new(m));
    let s = server(secrets.clone());

    assert_eq!(
        whoami(&s, &token).unwrap(),
        "appattempt_1700000000000_0012_000003 TOKEN"
    );
    // A forged password fails DIGEST-MD5 itself.
    let mut forged = token.clone();
    forged.password[0] ^= 1;
    let (class, _) = refused(whoami(&s, &forged));
    assert_eq!(class, "javax.security.sasl.SaslException");

    secrets.write().application_master_finished(&attempt);
    let (class, message) = refused(whoami(&s, &token));
    assert_eq!(class, INVALID_TOKEN);
    assert_eq!(
        message,
        "appattempt_1700000000000_0012_000003 not found in AMRMTokenSecretManager."
    );
    s.shutdown();
}

#[test]
fn an_expired_delegation_token_is_refused_with_javas_text() {
    const T0: i64 = 1_711_242_400_403;
    let mut m = DelegationTokenSecretManager::started(
        DelegationConfig::default(),
        &mut SeededEntropy(5),
        T0,
    )
    .unwrap();
    let (_, token) = m.create_token("alice", "yarn", "oozie", T0).unwrap();
    let now = Arc::new(AtomicI64::new(T0 + 1000));
    let clock = now.clone();
    let secrets = Arc::new(DelegationTokenSecrets::new(m, move || {
        clock.load(Ordering::SeqCst)
    }));
    let s = server(secrets);

    assert_eq!(whoami(&s, &token).unwrap(), "alice TOKEN");
    now.store(T0 + 86_400_000 + 1, Ordering::SeqCst);
    let (class, message) = refused(whoami(&s, &token));
    assert_eq!(class, INVALID_TOKEN);
    assert_eq!(
        message,
        "Token oozie has expired, current time: 2024-03-25 01:06:40,404+0000 expected renewal time: 2024-03-25 01:06:40,403+0000"
    );
    s.shutdown();
}
