//! Application ACLs ([`rm_core::app_acls`]) over the client port, called as several SIMPLE
//! users by our own `ipc` client: what `agent/tests/rm_app_acls.rs` (Hadoop's `YarnClient`)
//! does not reach — `getQueueInfo` leaving out what the caller may not view,
//! `getApplications` with scope VIEWABLE, an ACL naming a group, and the application list of a
//! caller beside the whole one.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hadoop_wire::pb::hadoop::yarn::{
    ApplicationAccessTypeProto, ApplicationAclMapProto, ApplicationReportProto,
    ApplicationSubmissionContextProto, ApplicationsRequestScopeProto, ContainerLaunchContextProto,
    GetApplicationReportRequestProto, GetApplicationReportResponseProto,
    GetApplicationsRequestProto, GetApplicationsResponseProto, GetNewApplicationRequestProto,
    GetNewApplicationResponseProto, GetQueueInfoRequestProto, GetQueueInfoResponseProto,
    KillApplicationRequestProto, SubmitApplicationRequestProto,
};
use hadoop_wire::sasl::Qop;
use hadoop_wire::yarn::ids::AppId;
use hadoop_wire::yarn::{acp, APPLICATION_CLIENT_PROTOCOL, APPLICATION_CLIENT_VERSION};
use ipc::authorize::GroupsMapping;
use ipc::client::{Client, ClientConfig, ClientError};
use ipc::server::ServerConfig;
use prost::Message;
use rm_core::app_acls::AclPolicy;
use rm_core::apps::{AppsConfig, Res};
use rm_core::dispatcher::Placement;
use rm_core::service::{AppsSecurity, AppsSetup, RmService};
use rm_core::RmConfig;

/// dave is in `ops`; every lookup is counted.
struct Groups(Arc<AtomicUsize>);
impl GroupsMapping for Groups {
    fn groups(&self, user: &str) -> Vec<String> {
        self.0.fetch_add(1, Ordering::Relaxed);
        match user {
            "dave" => vec!["dave".into(), "ops".into()],
            u => vec![u.to_string()],
        }
    }
}

fn start(lookups: Arc<AtomicUsize>) -> (RmService, tempfile::TempDir) {
    let mut conf = conf::Configuration::new();
    conf.set("yarn.acl.enable", "true");
    conf.set("yarn.admin.acl", "admin");
    conf.set("yarn.scheduler.capacity.root.acl_administer_queue", " ");
    let policy = AclPolicy::from_conf(
        &conf,
        &["default".to_string()],
        Some("yarn".into()),
        Box::new(Groups(lookups)),
    )
    .unwrap()
    .expect("ACLs on");
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
            security: AppsSecurity {
                app_acls: Some(Arc::new(policy)),
                ..AppsSecurity::default()
            },
        }),
    )
    .unwrap();
    (rm, dir)
}

fn call<Req: Message, Resp: Message + Default>(
    rm: &RmService,
    user: &str,
    method: &str,
    req: &Req,
) -> Result<Resp, ClientError> {
    let c = Client::new(
        rm.client_addr().unwrap(),
        ClientConfig {
            protocol: APPLICATION_CLIENT_PROTOCOL.into(),
            protocol_version: APPLICATION_CLIENT_VERSION,
            user: user.into(),
            call_timeout: Duration::from_secs(10),
            max_connect_attempts: 1,
            ..ClientConfig::default()
        },
    );
    let r = c.call(method, &req.encode_to_vec())?;
    Ok(r.decode().expect("response decodes"))
}

fn submit(rm: &RmService, user: &str, acls: &[(ApplicationAccessTypeProto, &str)]) -> AppId {
    let n: GetNewApplicationResponseProto = call(
        rm,
        user,
        acp::GET_NEW_APPLICATION,
        &GetNewApplicationRequestProto {},
    )
    .unwrap();
    let p = n.application_id.unwrap();
    let id = AppId::new(p.cluster_timestamp(), p.id());
    let ctx = ApplicationSubmissionContextProto {
        application_id: Some(id.to_proto()),
        am_container_spec: Some(ContainerLaunchContextProto {
            application_ac_ls: acls
                .iter()
                .map(|(t, a)| ApplicationAclMapProto {
                    access_type: Some(*t as i32),
                    acl: Some(a.to_string()),
                })
                .collect(),
            ..Default::default()
        }),
        resource: Some(Res::new(1024, 1).to_proto()),
        ..Default::default()
    };
    let _: hadoop_wire::pb::hadoop::yarn::SubmitApplicationResponseProto = call(
        rm,
        user,
        acp::SUBMIT_APPLICATION,
        &SubmitApplicationRequestProto {
            application_submission_context: Some(ctx),
        },
    )
    .unwrap();
    id
}

fn is_full(r: &ApplicationReportProto) -> bool {
    r.current_application_attempt_id
        .as_ref()
        .and_then(|a| a.attempt_id)
        == Some(1)
}

fn report(rm: &RmService, user: &str, id: AppId) -> ApplicationReportProto {
    let r: GetApplicationReportResponseProto = call(
        rm,
        user,
        acp::GET_APPLICATION_REPORT,
        &GetApplicationReportRequestProto {
            application_id: Some(id.to_proto()),
        },
    )
    .unwrap();
    r.application_report.unwrap()
}

fn listed(rm: &RmService, user: &str, scope: Option<ApplicationsRequestScopeProto>) -> Vec<bool> {
    let r: GetApplicationsResponseProto = call(
        rm,
        user,
        acp::GET_APPLICATIONS,
        &GetApplicationsRequestProto {
            scope: scope.map(|s| s as i32),
            ..Default::default()
        },
    )
    .unwrap();
    r.applications.iter().map(is_full).collect()
}

fn queue_apps(rm: &RmService, user: &str) -> usize {
    let r: GetQueueInfoResponseProto = call(
        rm,
        user,
        acp::GET_QUEUE_INFO,
        &GetQueueInfoRequestProto {
            queue_name: Some("default".into()),
            include_applications: Some(true),
            ..Default::default()
        },
    )
    .unwrap();
    r.queue_info.unwrap().applications.len()
}

#[test]
fn views_lists_queue_info_and_kills_follow_the_acls_groups_included() {
    let lookups = Arc::new(AtomicUsize::new(0));
    let (rm, _d) = start(lookups.clone());
    use ApplicationAccessTypeProto::{AppaccessModifyApp as Modify, AppaccessViewApp as View};
    // alice's: viewable by the group ops, modifiable by nobody else; erin's: no ACLs
    let a = submit(&rm, "alice", &[(View, "bob ops"), (Modify, " ")]);
    let e = submit(&rm, "erin", &[]);

    assert!(is_full(&report(&rm, "alice", a)));
    assert!(is_full(&report(&rm, "bob", a)));
    assert_eq!(
        lookups.load(Ordering::Relaxed),
        0,
        "alice owns it, bob is named"
    );
    assert!(is_full(&report(&rm, "dave", a)), "dave is in ops");
    assert_eq!(
        lookups.load(Ordering::Relaxed),
        1,
        "one lookup for dave's call"
    );
    let carol = report(&rm, "carol", a);
    assert!(!is_full(&carol));
    assert_eq!(carol.diagnostics.as_deref(), Some("N/A"));
    assert_eq!(carol.user.as_deref(), Some("alice"));
    assert!(is_full(&report(&rm, "admin", e)));

    // getApplications: ALL lists both (reduced where not viewable), VIEWABLE leaves them out
    assert_eq!(listed(&rm, "dave", None), vec![true, false]);
    assert_eq!(
        listed(&rm, "dave", Some(ApplicationsRequestScopeProto::Viewable)),
        vec![true]
    );
    assert_eq!(
        listed(&rm, "carol", Some(ApplicationsRequestScopeProto::Viewable)),
        Vec::<bool>::new()
    );
    assert_eq!(listed(&rm, "admin", None), vec![true, true]);
    // getQueueInfo: only what the caller may view
    assert_eq!(queue_apps(&rm, "carol"), 0);
    assert_eq!(queue_apps(&rm, "dave"), 1);
    assert_eq!(queue_apps(&rm, "erin"), 1);
    assert_eq!(queue_apps(&rm, "admin"), 2);

    // kill: VIEW is not MODIFY; the owner and admins may
    let kill = |user: &str, id: AppId| {
        call::<_, hadoop_wire::pb::hadoop::yarn::KillApplicationResponseProto>(
            &rm,
            user,
            acp::FORCE_KILL_APPLICATION,
            &KillApplicationRequestProto {
                application_id: Some(id.to_proto()),
                diagnostics: None,
            },
        )
    };
    match kill("dave", a) {
        Err(ClientError::Remote { class, message, .. }) => {
            assert_eq!(class, "org.apache.hadoop.yarn.exceptions.YarnException");
            assert_eq!(
                message,
                format!(
                    "org.apache.hadoop.security.AccessControlException: User dave cannot \
                     perform operation MODIFY_APP on {a}"
                )
            );
        }
        other => panic!("dave killed alice's application: {other:?}"),
    }
    kill("alice", a).expect("the owner kills");
    kill("admin", e).expect("an admin kills");
    // a finished application keeps its ACLs
    assert!(!is_full(&report(&rm, "carol", a)));
    assert!(kill("carol", a).is_err());
    rm.shutdown();
}
