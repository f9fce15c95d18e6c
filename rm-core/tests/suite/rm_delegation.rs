//! RM delegation tokens over the wire, without a KDC: an RM whose client port offers TOKEN
//! (with its RM delegation-token secrets) and SIMPLE, as an insecure Java RM would if it
//! had TOKEN on (Java's `isAllowedDelegationTokenOp` lets any caller get, renew and cancel when
//! security is off). The Kerberos side, with Hadoop's own clients, is
//! `agent/tests/rm_delegation_tokens_kerberos.rs`.
//!
//! Covered: get (the identifier's fields, the empty service), TOKEN authentication as the
//! owner (the application's user), renew by the renewer and refusal for another user with
//! Java's texts, the token surviving an RM restart through the state store (key and
//! password), cancel by the owner and the refusal of the cancelled token, and an expired token
//! refused with Java's text, then removed.

use std::sync::Arc;
use std::time::Duration;

use hadoop_wire::pb::hadoop::yarn::{
    ApplicationSubmissionContextProto, GetApplicationReportRequestProto,
    GetApplicationReportResponseProto, GetNewApplicationResponseProto,
    SubmitApplicationRequestProto,
};
use hadoop_wire::sasl::client::{ClientAuth, TokenCredential};
use hadoop_wire::sasl::message::AuthMethod;
use hadoop_wire::sasl::server::ServerAuth;
use hadoop_wire::sasl::Qop;
use hadoop_wire::token::{DelegationIdentifier as _, Limits, Token, TokenIdentifier};
use hadoop_wire::yarn::{acp, APPLICATION_CLIENT_PROTOCOL, APPLICATION_CLIENT_VERSION};
use ipc::client::{Client, ClientConfig, ClientError};
use ipc::server::ServerConfig;
use prost::Message;
use rm_core::apps::{AppsConfig, Res};
use rm_core::dispatcher::{wall_ms, Placement};
use rm_core::rm_delegation::{
    GetDelegationTokenRequestProto, GetDelegationTokenResponseProto,
    RenewDelegationTokenRequestProto, RenewDelegationTokenResponseProto, RmDelegationConfig,
    RmDelegationSecrets, RmDelegationTokenIdentifier, RmDelegationTokenSecretManager, ShortNames,
    KIND_RM_DELEGATION,
};
use rm_core::service::{AppsSecurity, AppsSetup, RmService};
use rm_core::RmConfig;

fn start(store: &std::path::Path, dt: RmDelegationConfig) -> (RmService, tempfile::TempDir) {
    start_as(store, dt, None)
}

/// [`start`], the RM's own user being `login_user`.
fn start_as(
    store: &std::path::Path,
    dt: RmDelegationConfig,
    login_user: Option<&str>,
) -> (RmService, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = RmConfig {
        completion_log_dir: dir.path().join("log"),
        recovery: true,
        state_store_dir: store.to_path_buf(),
        ..RmConfig::default()
    };
    let secrets = Arc::new(RmDelegationSecrets::new(
        RmDelegationTokenSecretManager::new(dt).unwrap(),
        Box::new(|| wall_ms() as i64),
        ShortNames::new(None),
    ));
    let s: Arc<dyn hadoop_wire::sasl::server::TokenSecrets> = secrets.clone();
    let auth = ServerAuth::new(AuthMethod::Simple, Some(s), vec![Qop::Auth]).unwrap();
    let any = "127.0.0.1:0".parse().unwrap();
    let rm = RmService::start_with_apps(
        cfg,
        any,
        &Placement::Unpinned(1),
        ServerConfig::default(),
        Some(AppsSetup {
            cfg: AppsConfig::default(),
            client: any,
            scheduler: any,
            qops: vec![Qop::Auth],
            security: AppsSecurity {
                client_auth: Some(Arc::new(auth)),
                delegation: Some(secrets),
                login_user: login_user.map(String::from),
                ..AppsSecurity::default()
            },
        }),
    )
    .unwrap();
    (rm, dir)
}

fn client(rm: &RmService, user: &str, auth: ClientAuth) -> Client {
    Client::new(
        rm.client_addr().unwrap(),
        ClientConfig {
            protocol: APPLICATION_CLIENT_PROTOCOL.into(),
            protocol_version: APPLICATION_CLIENT_VERSION,
            user: user.into(),
            call_timeout: Duration::from_secs(10),
            max_connect_attempts: 1,
            auth,
            ..ClientConfig::default()
        },
    )
}

fn simple(rm: &RmService, user: &str) -> Client {
    client(rm, user, ClientAuth::default())
}

fn with_token(rm: &RmService, t: &Token) -> Client {
    client(
        rm,
        "",
        ClientAuth::token(
            TokenCredential {
                identifier: t.identifier.clone(),
                password: t.password.clone(),
            },
            vec![Qop::Auth],
        ),
    )
}

fn err_text(e: ClientError) -> String {
    match &e {
        ClientError::Remote { class, message, .. } => format!("{class}: {message}"),
        other => other.to_string(),
    }
}

fn get_token(c: &Client, renewer: &str) -> Result<Token, String> {
    let req = GetDelegationTokenRequestProto {
        renewer: renewer.into(),
    };
    let resp = c
        .call(acp::GET_DELEGATION_TOKEN, &req.encode_to_vec())
        .map_err(err_text)?;
    let r: GetDelegationTokenResponseProto = resp.decode().map_err(err_text)?;
    Token::from_proto(r.token.expect("a token"), &Limits::DEFAULT).map_err(|e| e.to_string())
}

fn token_call(c: &Client, method: &str, t: &Token) -> Result<Vec<u8>, String> {
    // renew's and cancel's requests are the same message (one `token` field)
    let req = RenewDelegationTokenRequestProto {
        token: t.to_proto(),
    };
    c.call(method, &req.encode_to_vec())
        .map(|r| r.payload().to_vec())
        .map_err(err_text)
}

fn renew(c: &Client, t: &Token) -> Result<i64, String> {
    let b = token_call(c, acp::RENEW_DELEGATION_TOKEN, t)?;
    Ok(RenewDelegationTokenResponseProto::decode(&b[..])
        .unwrap()
        .new_expiry_time as i64)
}

/// A submission by `c`'s caller; the application's user as the RM reports it.
fn submit_user(c: &Client) -> Result<String, String> {
    let resp = c.call(acp::GET_NEW_APPLICATION, &[]).map_err(err_text)?;
    let n: GetNewApplicationResponseProto = resp.decode().map_err(err_text)?;
    let id = n.application_id.unwrap();
    let ctx = ApplicationSubmissionContextProto {
        application_id: Some(id),
        am_container_spec: Some(Default::default()),
        resource: Some(Res::new(1024, 1).to_proto()),
        ..Default::default()
    };
    c.call(
        acp::SUBMIT_APPLICATION,
        &SubmitApplicationRequestProto {
            application_submission_context: Some(ctx),
        }
        .encode_to_vec(),
    )
    .map_err(err_text)?;
    let resp = c
        .call(
            acp::GET_APPLICATION_REPORT,
            &GetApplicationReportRequestProto {
                application_id: Some(id),
            }
            .encode_to_vec(),
        )
        .map_err(err_text)?;
    let r: GetApplicationReportResponseProto = resp.decode().map_err(err_text)?;
    Ok(r.application_report.unwrap().user.unwrap_or_default())
}

#[test]
fn tokens_authenticate_renew_survive_a_restart_and_cancel() {
    let store = tempfile::tempdir().unwrap();
    let (rm, _d) = start(store.path(), RmDelegationConfig::default());
    let alice = simple(&rm, "alice");
    let t0 = wall_ms() as i64;
    let token = get_token(&alice, "alice").unwrap();
    assert_eq!(token.kind, KIND_RM_DELEGATION);
    assert_eq!(token.service, "", "the client sets the service");
    let id = RmDelegationTokenIdentifier::parse(&token.identifier).unwrap();
    assert_eq!(
        (id.owner(), id.renewer(), id.real_user()),
        ("alice", "alice", "")
    );
    assert_eq!((id.sequence_number(), id.master_key_id()), (1, 2));
    assert!(id.issue_date() >= t0 && id.max_date() == id.issue_date() + 7 * 86_400_000);

    // TOKEN: the caller is the owner
    let by_token = with_token(&rm, &token);
    assert_eq!(submit_user(&by_token).unwrap(), "alice");

    // renew by the renewer; another user is refused with Java's text
    let exp = renew(&alice, &token).unwrap();
    assert!(exp >= t0 + 86_400_000 && exp <= id.max_date(), "{exp}");
    let bob = simple(&rm, "bob");
    let e = renew(&bob, &token).unwrap_err();
    assert_eq!(
        e,
        format!(
            "org.apache.hadoop.yarn.exceptions.YarnException: org.apache.hadoop.security.AccessControlException: bob tries to renew a token {} with non-matching renewer alice",
            id.format_token_id()
        )
    );
    let e = token_call(&bob, acp::CANCEL_DELEGATION_TOKEN, &token).unwrap_err();
    assert!(
        e.ends_with(&format!(
            "AccessControlException: bob is not authorized to cancel the token {}",
            id.format_token_id()
        )),
        "{e}"
    );
    // a forged password is not a token
    let mut forged = token.clone();
    forged.password[0] ^= 1;
    let e = submit_user(&with_token(&rm, &forged)).unwrap_err();
    assert!(!e.is_empty());
    drop((alice, bob, by_token));
    rm.shutdown();

    // a restart: the key and the token come back from the state store
    let (rm, _d2) = start(store.path(), RmDelegationConfig::default());
    assert_eq!(submit_user(&with_token(&rm, &token)).unwrap(), "alice");
    let alice = simple(&rm, "alice");
    renew(&alice, &token).unwrap();
    let second = get_token(&alice, "alice").unwrap();
    let id2 = RmDelegationTokenIdentifier::parse(&second.identifier).unwrap();
    assert_eq!(
        id2.sequence_number(),
        2,
        "the sequence continues after a restart"
    );
    assert!(
        id2.master_key_id() > 2,
        "new keys after the stored ones: {id2:?}"
    );

    // cancel by the owner: the token is refused from then on
    token_call(&alice, acp::CANCEL_DELEGATION_TOKEN, &token).unwrap();
    let e = submit_user(&with_token(&rm, &token)).unwrap_err();
    assert!(
        e.contains("Token for real user: , can't be found in cache"),
        "{e}"
    );
    let e = renew(&alice, &token).unwrap_err();
    assert!(
        e.contains("InvalidToken: Renewal request for unknown token"),
        "{e}"
    );
    // ... and after another restart it stays cancelled; the second token still works
    drop(alice);
    rm.shutdown();
    let (rm, _d3) = start(store.path(), RmDelegationConfig::default());
    assert!(submit_user(&with_token(&rm, &token)).is_err());
    assert_eq!(submit_user(&with_token(&rm, &second)).unwrap(), "alice");
    rm.shutdown();
}

#[test]
fn an_expired_token_is_refused_then_removed() {
    let store = tempfile::tempdir().unwrap();
    let dt = RmDelegationConfig {
        renew_interval_ms: 1500,
        remover_scan_interval_ms: 1000,
        ..RmDelegationConfig::default()
    };
    let (rm, _d) = start(store.path(), dt);
    let token = get_token(&simple(&rm, "carol"), "carol").unwrap();
    assert_eq!(submit_user(&with_token(&rm, &token)).unwrap(), "carol");
    std::thread::sleep(Duration::from_millis(1700));
    let e = submit_user(&with_token(&rm, &token)).unwrap_err();
    assert!(
        e.contains("has expired, current time:") || e.contains("can't be found in cache"),
        "{e}"
    );
    // the remover (housekeeping, once a second) drops it
    let t0 = std::time::Instant::now();
    loop {
        let e = submit_user(&with_token(&rm, &token)).unwrap_err();
        if e.contains("can't be found in cache") {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "{e}");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(
        rm.apps()
            .unwrap()
            .delegation()
            .unwrap()
            .read()
            .token_count(),
        0
    );
    rm.shutdown();
}

#[test]
fn the_rms_own_user_renews_as_the_tokens_renewer() {
    let store = tempfile::tempdir().unwrap();
    let (rm, _d) = start_as(store.path(), RmDelegationConfig::default(), Some("yarn"));
    let token = get_token(&simple(&rm, "dave"), "oozie").unwrap();
    // Java's getRenewerForToken: the login user renews any token as its renewer
    let exp = renew(&simple(&rm, "yarn"), &token).unwrap();
    assert!(exp > wall_ms() as i64);
    let e = renew(&simple(&rm, "dave"), &token).unwrap_err();
    assert!(
        e.contains("dave tries to renew a token") && e.ends_with("with non-matching renewer oozie"),
        "{e}"
    );
    renew(&simple(&rm, "oozie"), &token).unwrap();
    rm.shutdown();
}
