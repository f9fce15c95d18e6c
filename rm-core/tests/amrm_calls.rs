//! ApplicationMasterProtocol over TCP: each connection's calls act as the attempt of the
//! AMRMToken it authenticated with (kept from authentication, not parsed per call), a
//! connection without one is refused with Java's text, and a token whose attempt has finished
//! no longer authenticates a new connection.

use std::time::Duration;

use hadoop_wire::pb::hadoop::yarn::{AllocateRequestProto, ApplicationSubmissionContextProto};
use hadoop_wire::sasl::client::{ClientAuth, TokenCredential};
use hadoop_wire::sasl::Qop;
use hadoop_wire::token::Token;
use hadoop_wire::yarn::ids::AttemptId;
use hadoop_wire::yarn::{amp, APPLICATION_MASTER_PROTOCOL, APPLICATION_MASTER_VERSION};
use ipc::client::{Client, ClientConfig, ClientError};
use ipc::server::ServerConfig;
use prost::Message;
use rm_core::apps::{AppsConfig, Res};
use rm_core::dispatcher::Placement;
use rm_core::service::{AppsSetup, RmService};
use rm_core::RmConfig;

fn am_client(addr: std::net::SocketAddr, token: Option<&Token>) -> Client {
    let auth = match token {
        Some(t) => ClientAuth::token(
            TokenCredential {
                identifier: t.identifier.clone(),
                password: t.password.clone(),
            },
            vec![Qop::Auth],
        ),
        None => ClientAuth::default(),
    };
    Client::new(
        addr,
        ClientConfig {
            protocol: APPLICATION_MASTER_PROTOCOL.into(),
            protocol_version: APPLICATION_MASTER_VERSION,
            user: "mallory".into(),
            call_timeout: Duration::from_secs(10),
            max_connect_attempts: 1,
            auth,
            ..ClientConfig::default()
        },
    )
}

fn allocate_error(c: &Client) -> (String, String) {
    let req = AllocateRequestProto::default().encode_to_vec();
    match c.call(amp::ALLOCATE, &req).expect_err("refused") {
        ClientError::Remote { class, message, .. } => (class, message),
        other => panic!("{other:?}"),
    }
}

#[test]
fn each_connection_calls_as_the_attempt_it_authenticated_with() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = RmConfig {
        completion_log_dir: dir.path().join("log"),
        ..RmConfig::default()
    };
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
            security: Default::default(),
        }),
    )
    .unwrap();
    let rt = rm.apps().unwrap().clone();
    // An application without nodes: its first attempt waits for its AM container.
    let app = rt.with(|a| {
        let (id, _) = a.new_application().unwrap();
        let ctx = ApplicationSubmissionContextProto {
            application_id: Some(id.to_proto()),
            am_container_spec: Some(Default::default()),
            resource: Some(Res::new(1024, 1).to_proto()),
            ..Default::default()
        };
        a.submit(ctx, "alice", 1).unwrap()
    });
    let first = AttemptId { app, attempt: 1 };
    let other = AttemptId { app, attempt: 2 };
    let (t1, t2) = {
        let mut m = rt.amrm.write();
        (
            m.create_and_get_amrm_token(first).unwrap(),
            m.create_and_get_amrm_token(other).unwrap(),
        )
    };
    let addr = rm.scheduler_addr().unwrap();
    let (c1, c2) = (am_client(addr, Some(&t1)), am_client(addr, Some(&t2)));
    let not_found = |a: AttemptId| {
        (
            "org.apache.hadoop.yarn.exceptions.ApplicationAttemptNotFoundException".to_string(),
            format!("Application attempt {a} doesn't exist in ApplicationMasterService cache."),
        )
    };
    // Interleaved calls on the two connections: each is its own token's attempt, every time.
    for _ in 0..3 {
        assert_eq!(allocate_error(&c1), not_found(first));
        assert_eq!(allocate_error(&c2), not_found(other));
    }
    // Without a token: refused at connection time, as Java's TOKEN-only scheduler port does.
    let none = am_client(addr, None);
    let e = none
        .call(
            amp::ALLOCATE,
            &AllocateRequestProto::default().encode_to_vec(),
        )
        .expect_err("refused");
    let text = match &e {
        ClientError::Remote { class, message, .. } => format!("{class}: {message}"),
        other => other.to_string(),
    };
    assert!(
        text.contains("SIMPLE authentication is not enabled.  Available:[TOKEN]"),
        "{text}"
    );
    // A finished attempt's token no longer authenticates a connection.
    rt.amrm.write().application_master_finished(&other);
    match am_client(addr, Some(&t2))
        .call(amp::ALLOCATE, &[])
        .expect_err("refused")
    {
        ClientError::Remote { class, message, .. } => {
            assert_eq!(
                class,
                "org.apache.hadoop.security.token.SecretManager$InvalidToken"
            );
            assert_eq!(
                message,
                format!("{other} not found in AMRMTokenSecretManager.")
            );
        }
        e => panic!("{e:?}"),
    }
    rm.shutdown();
}
