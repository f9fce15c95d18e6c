//! The application ports' security settings ([`AppsSecurity`]) without a KDC: every RM's
//! scheduler port offers TOKEN only (Java's `ApplicationMasterService`), so a SIMPLE caller is
//! refused at connection time with Java's text; `hadoop.security.authorization` puts
//! `security.applicationclient.protocol.acl` on the client port and
//! `security.applicationmaster.protocol.acl` on the scheduler port (under TOKEN the caller is
//! the AMRMToken's user, the attempt id, as in Java). The KERBEROS side is
//! `agent/tests/rm_apps_kerberos.rs`.

use crate::support;

use std::sync::Arc;

use hadoop_wire::pb::hadoop::yarn::AllocateRequestProto;
use hadoop_wire::sasl::client::ClientAuth;
use hadoop_wire::token::Token;
use hadoop_wire::yarn::ids::AttemptId;
use hadoop_wire::yarn::{acp, amp, APPLICATION_CLIENT_PROTOCOL, APPLICATION_MASTER_PROTOCOL};
use ipc::authorize::{GroupsMapping, ServiceAuthorization};
use ipc::client::{Client, ClientError};
use prost::Message;
use rm_core::apps::Res;
use rm_core::service::{AppsSecurity, RmService, APPS_SERVICE_ACLS};
use support::{client, start_rm as start, token_auth};

struct NoGroups;
impl GroupsMapping for NoGroups {
    fn groups(&self, _user: &str) -> Vec<String> {
        Vec::new()
    }
}

/// The error text of a refused call.
fn refusal(c: &Client, method: &str) -> String {
    let req = AllocateRequestProto::default().encode_to_vec();
    let e = c.call(method, &req).expect_err("refused");
    match &e {
        ClientError::Remote { class, message, .. } => format!("{class}: {message}"),
        other => other.to_string(),
    }
}

/// An attempt waiting for its AM container, and an AMRMToken for it.
fn attempt_token(rm: &RmService) -> Token {
    let rt = rm.apps().unwrap().clone();
    let app = support::submit_direct(rm, "alice", Res::new(1024, 1));
    let t = rt
        .amrm
        .write()
        .create_and_get_amrm_token(AttemptId { app, attempt: 1 })
        .unwrap();
    t
}

fn acls(client_acl: &str, master_acl: &str) -> Arc<ServiceAuthorization> {
    let mut conf = conf::Configuration::new();
    conf.set("hadoop.security.authorization", "true");
    conf.set("security.applicationclient.protocol.acl", client_acl);
    conf.set("security.applicationmaster.protocol.acl", master_acl);
    Arc::new(
        ServiceAuthorization::from_conf(&conf, APPS_SERVICE_ACLS, Box::new(NoGroups))
            .unwrap()
            .expect("authorization on"),
    )
}

#[test]
fn a_secure_scheduler_port_takes_tokens_only_and_both_ports_check_their_acls() {
    let (rm, _d) = start(AppsSecurity {
        client_auth: None,
        authorization: Some(acls("alice", "*")),
        app_acls: None,
        ..AppsSecurity::default()
    });
    let sched = rm.scheduler_addr().unwrap();
    let text = refusal(
        &client(
            sched,
            APPLICATION_MASTER_PROTOCOL,
            "alice",
            ClientAuth::default(),
        ),
        amp::ALLOCATE,
    );
    assert!(
        text.contains("SIMPLE authentication is not enabled.  Available:[TOKEN]"),
        "{text}"
    );
    // the AMRMToken gets in (its attempt has no AM container yet: Java's not-found text)
    let token = attempt_token(&rm);
    let text = refusal(
        &client(sched, APPLICATION_MASTER_PROTOCOL, "", token_auth(&token)),
        amp::ALLOCATE,
    );
    assert!(
        text.contains("ApplicationAttemptNotFoundException"),
        "{text}"
    );
    // the client port: the ACL lists alice only
    let cl = rm.client_addr().unwrap();
    let ok = client(
        cl,
        APPLICATION_CLIENT_PROTOCOL,
        "alice",
        ClientAuth::default(),
    );
    ok.call(acp::GET_CLUSTER_METRICS, &[])
        .expect("alice is on the ACL");
    let text = refusal(
        &client(
            cl,
            APPLICATION_CLIENT_PROTOCOL,
            "bob",
            ClientAuth::default(),
        ),
        acp::GET_CLUSTER_METRICS,
    );
    assert!(
        text.contains("org.apache.hadoop.security.authorize.AuthorizationException")
            && text.contains(
                "User bob (auth:SIMPLE) is not authorized for protocol interface \
                 org.apache.hadoop.yarn.api.ApplicationClientProtocolPB: denied by configured ACL"
            ),
        "{text}"
    );
    rm.shutdown();

    // an ApplicationMasterProtocol ACL that lists no attempt refuses the AM's token user
    let (rm, _d) = start(AppsSecurity {
        client_auth: None,
        authorization: Some(acls("*", "yarn")),
        app_acls: None,
        ..AppsSecurity::default()
    });
    let token = attempt_token(&rm);
    let text = refusal(
        &client(
            rm.scheduler_addr().unwrap(),
            APPLICATION_MASTER_PROTOCOL,
            "",
            token_auth(&token),
        ),
        amp::ALLOCATE,
    );
    assert!(
        text.contains(
            "(auth:TOKEN) is not authorized for protocol interface \
             org.apache.hadoop.yarn.api.ApplicationMasterProtocolPB: denied by configured ACL"
        ),
        "{text}"
    );
    rm.shutdown();
}

#[test]
fn an_insecure_rm_keeps_simple_on_the_client_port_and_token_only_on_the_scheduler_port() {
    let (rm, _d) = start(AppsSecurity::default());
    let text = refusal(
        &client(
            rm.scheduler_addr().unwrap(),
            APPLICATION_MASTER_PROTOCOL,
            "mallory",
            ClientAuth::default(),
        ),
        amp::ALLOCATE,
    );
    assert!(
        text.contains("SIMPLE authentication is not enabled.  Available:[TOKEN]"),
        "{text}"
    );
    client(
        rm.client_addr().unwrap(),
        APPLICATION_CLIENT_PROTOCOL,
        "anyone",
        ClientAuth::default(),
    )
    .call(acp::GET_CLUSTER_METRICS, &[])
    .expect("SIMPLE, no ACL");
    rm.shutdown();
}
