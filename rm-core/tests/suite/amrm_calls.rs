//! ApplicationMasterProtocol over TCP: each connection's calls act as the attempt of the
//! AMRMToken it authenticated with (kept from authentication, not parsed per call), a
//! connection without one is refused with Java's text, and a token whose attempt has finished
//! no longer authenticates a new connection.

use crate::support;

use hadoop_wire::pb::hadoop::yarn::AllocateRequestProto;
use hadoop_wire::token::Token;
use hadoop_wire::yarn::ids::AttemptId;
use hadoop_wire::yarn::{amp, APPLICATION_MASTER_PROTOCOL};
use ipc::client::{Client, ClientError};
use prost::Message;
use rm_core::apps::Res;

fn am_client(addr: std::net::SocketAddr, token: Option<&Token>) -> Client {
    let auth = token.map(support::token_auth).unwrap_or_default();
    support::client(addr, APPLICATION_MASTER_PROTOCOL, "mallory", auth)
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
    let (rm, _dir) = support::start_rm(Default::default());
    let rt = rm.apps().unwrap().clone();
    // An application without nodes: its first attempt waits for its AM container.
    let app = support::submit_direct(&rm, "alice", Res::new(1024, 1));
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
