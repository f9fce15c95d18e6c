//! The applications' token renewer ([`rm_core::token_renewer`]) behind `submitApplication`
//! over TCP: a submission's HDFS token renewed before it is accepted, an unrenewable one
//! failing the application with Java's diagnostics, and the token cancelled after the
//! application ends (not when the submission asked otherwise). The NameNode here is a
//! [`TokenRenewal`] recording its calls; `hotpath rm` plugs in the HDFS client
//! (`agent/src/rm_cmd.rs`).

use crate::support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hadoop_wire::pb::hadoop::yarn::{
    ApplicationSubmissionContextProto, ContainerLaunchContextProto,
    GetApplicationReportRequestProto, GetApplicationReportResponseProto,
    GetNewApplicationRequestProto, GetNewApplicationResponseProto, KillApplicationRequestProto,
    KillApplicationResponseProto, SubmitApplicationRequestProto, SubmitApplicationResponseProto,
    YarnApplicationStateProto,
};
use hadoop_wire::token::credentials::{Credentials, Format};
use hadoop_wire::token::Token;
use hadoop_wire::yarn::acp;
use hadoop_wire::yarn::ids::AppId;
use rm_core::apps::Res;
use rm_core::service::{AppsSecurity, RmService};
use rm_core::token_renewer::{DelegationTokenRenewer, TokenRenewal};
use support::call;

#[derive(Default)]
struct Nn {
    renewed: Mutex<Vec<String>>,
    cancelled: Mutex<Vec<String>>,
}

impl TokenRenewal for Nn {
    fn manages(&self, kind: &str) -> bool {
        kind == "HDFS_DELEGATION_TOKEN"
    }
    fn renew(&self, t: &Token) -> Result<i64, String> {
        if t.service == "127.0.0.9:8020" {
            return Err(
                "org.apache.hadoop.security.AccessControlException: not the renewer".into(),
            );
        }
        self.renewed.lock().unwrap().push(t.service.clone());
        Ok(rm_core::dispatcher::wall_ms() as i64 + 3_600_000)
    }
    fn cancel(&self, t: &Token) -> Result<(), String> {
        self.cancelled.lock().unwrap().push(t.service.clone());
        Ok(())
    }
    fn describe(&self, t: &Token) -> String {
        format!("(token for alice: HDFS_DELEGATION_TOKEN at {})", t.service)
    }
}

fn submit(rm: &RmService, service: &str, cancel: Option<bool>) -> AppId {
    let n: GetNewApplicationResponseProto = call(
        rm,
        "alice",
        acp::GET_NEW_APPLICATION,
        &GetNewApplicationRequestProto {},
    )
    .unwrap();
    let p = n.application_id.unwrap();
    let id = AppId::new(p.cluster_timestamp(), p.id());
    let creds = Credentials {
        tokens: vec![(
            service.to_string(),
            Token {
                identifier: service.as_bytes().to_vec(),
                password: vec![7; 20],
                kind: "HDFS_DELEGATION_TOKEN".into(),
                service: service.into(),
            },
        )],
        secrets: Vec::new(),
    };
    let ctx = ApplicationSubmissionContextProto {
        application_id: Some(id.to_proto()),
        am_container_spec: Some(ContainerLaunchContextProto {
            tokens: Some(creds.write(Format::Writable)),
            ..Default::default()
        }),
        resource: Some(Res::new(1024, 1).to_proto()),
        queue: Some("default".into()),
        cancel_tokens_when_complete: cancel,
        ..Default::default()
    };
    let _: SubmitApplicationResponseProto = call(
        rm,
        "alice",
        acp::SUBMIT_APPLICATION,
        &SubmitApplicationRequestProto {
            application_submission_context: Some(ctx),
        },
    )
    .unwrap();
    id
}

fn report(rm: &RmService, id: AppId) -> hadoop_wire::pb::hadoop::yarn::ApplicationReportProto {
    let r: GetApplicationReportResponseProto = call(
        rm,
        "alice",
        acp::GET_APPLICATION_REPORT,
        &GetApplicationReportRequestProto {
            application_id: Some(id.to_proto()),
        },
    )
    .unwrap();
    r.application_report.unwrap()
}

fn kill(rm: &RmService, id: AppId) {
    let _: KillApplicationResponseProto = call(
        rm,
        "alice",
        acp::FORCE_KILL_APPLICATION,
        &KillApplicationRequestProto {
            application_id: Some(id.to_proto()),
            ..Default::default()
        },
    )
    .unwrap();
}

/// About 1 s (the renewer polls for ended applications once a second).
#[test]
fn submissions_tokens_are_renewed_refused_and_cancelled_at_the_end() {
    let (rm, _g) = support::start_rm(AppsSecurity::default());
    let nn = Arc::new(Nn::default());
    let renewer =
        DelegationTokenRenewer::new(nn.clone(), 0, || rm_core::dispatcher::wall_ms() as i64);
    let rt = rm.apps().unwrap();
    renewer.start(rt.apps.clone()).unwrap();
    rt.set_token_renewer(renewer.clone());

    // Renewed at submission, kept alive; cancelled once the application is killed.
    let a = submit(&rm, "127.0.0.1:8020", None);
    assert_eq!(
        *nn.renewed.lock().unwrap(),
        vec!["127.0.0.1:8020".to_string()]
    );
    assert_eq!(renewer.tracked().len(), 1);
    assert_ne!(
        report(&rm, a).yarn_application_state(),
        YarnApplicationStateProto::Failed
    );
    // Kept by a second application that asked not to cancel it.
    let b = submit(&rm, "127.0.0.2:8020", Some(false));
    kill(&rm, a);
    kill(&rm, b);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !renewer.tracked().is_empty() {
        assert!(Instant::now() < deadline, "tokens still tracked");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        *nn.cancelled.lock().unwrap(),
        vec!["127.0.0.1:8020".to_string()],
        "b's token stays (cancel_tokens_when_complete = false)"
    );

    // A submission without tokens is untouched.
    let n: GetNewApplicationResponseProto = call(
        &rm,
        "alice",
        acp::GET_NEW_APPLICATION,
        &GetNewApplicationRequestProto {},
    )
    .unwrap();
    let p = n.application_id.unwrap();
    let plain = AppId::new(p.cluster_timestamp(), p.id());
    let _: SubmitApplicationResponseProto = call(
        &rm,
        "alice",
        acp::SUBMIT_APPLICATION,
        &SubmitApplicationRequestProto {
            application_submission_context: Some(ApplicationSubmissionContextProto {
                application_id: Some(plain.to_proto()),
                am_container_spec: Some(ContainerLaunchContextProto::default()),
                resource: Some(Res::new(1024, 1).to_proto()),
                queue: Some("default".into()),
                ..Default::default()
            }),
        },
    )
    .unwrap();
    assert_ne!(
        report(&rm, plain).yarn_application_state(),
        YarnApplicationStateProto::Failed,
        "{:?}",
        report(&rm, plain).diagnostics
    );

    // A token the RM may not renew: the application FAILS with Java's diagnostics.
    let c = submit(&rm, "127.0.0.9:8020", None);
    let r = report(&rm, c);
    assert_eq!(
        r.yarn_application_state(),
        YarnApplicationStateProto::Failed
    );
    assert_eq!(
        r.diagnostics(),
        "Failed to renew token: Kind: HDFS_DELEGATION_TOKEN, Service: 127.0.0.9:8020, Ident: \
         (token for alice: HDFS_DELEGATION_TOKEN at 127.0.0.9:8020)"
    );
    renewer.shutdown();
}
