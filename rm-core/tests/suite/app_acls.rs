//! Application ACLs ([`rm_core::app_acls`]) over the client port, called as several SIMPLE
//! users by our own `ipc` client: what `agent/tests/rm_app_acls.rs` (Hadoop's `YarnClient`)
//! does not reach — `getQueueInfo` leaving out what the caller may not view,
//! `getApplications` with scope VIEWABLE, an ACL naming a group, and the application list of a
//! caller beside the whole one.

use crate::support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use hadoop_wire::pb::hadoop::yarn::{
    ApplicationAccessTypeProto, ApplicationAclMapProto, ApplicationReportProto,
    ApplicationSubmissionContextProto, ApplicationsRequestScopeProto, ContainerLaunchContextProto,
    GetApplicationReportRequestProto, GetApplicationReportResponseProto,
    GetApplicationsRequestProto, GetApplicationsResponseProto, GetNewApplicationRequestProto,
    GetNewApplicationResponseProto, GetQueueInfoRequestProto, GetQueueInfoResponseProto,
    KillApplicationRequestProto, SubmitApplicationRequestProto, SubmitApplicationResponseProto,
};
use hadoop_wire::pb::hadoop::yarn::{
    FailApplicationAttemptRequestProto, FailApplicationAttemptResponseProto,
};
use hadoop_wire::yarn::acp;
use hadoop_wire::yarn::ids::{AppId, AttemptId};
use ipc::authorize::GroupsMapping;
use ipc::client::ClientError;
use rm_core::app_acls::AclPolicy;
use rm_core::apps::Res;
use rm_core::service::{AppsSecurity, RmService};
use support::call;

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

/// An RM with `yarn.acl.enable`, admin `admin`, root's ADMINISTER_QUEUE locked, and `extra`.
fn start_with(lookups: Arc<AtomicUsize>, extra: &[(&str, &str)]) -> (RmService, tempfile::TempDir) {
    let mut conf = conf::Configuration::new();
    conf.set("yarn.acl.enable", "true");
    conf.set("yarn.admin.acl", "admin");
    conf.set("yarn.scheduler.capacity.root.acl_administer_queue", " ");
    for (k, v) in extra {
        conf.set(k, v);
    }
    let policy = AclPolicy::from_conf(
        &conf,
        &["default".to_string()],
        Some("yarn".into()),
        Box::new(Groups(lookups)),
    )
    .unwrap()
    .expect("ACLs on");
    support::start_rm(AppsSecurity {
        app_acls: Some(Arc::new(policy)),
        ..AppsSecurity::default()
    })
}

fn start(lookups: Arc<AtomicUsize>) -> (RmService, tempfile::TempDir) {
    start_with(lookups, &[])
}

fn submit(rm: &RmService, user: &str, acls: &[(ApplicationAccessTypeProto, &str)]) -> AppId {
    try_submit(rm, user, acls, Res::new(1024, 1)).unwrap()
}

/// A new application of `user` submitted with `acls` and an AM of `am` to the default queue.
fn try_submit(
    rm: &RmService,
    user: &str,
    acls: &[(ApplicationAccessTypeProto, &str)],
    am: Res,
) -> Result<AppId, ClientError> {
    let n: GetNewApplicationResponseProto = call(
        rm,
        user,
        acp::GET_NEW_APPLICATION,
        &GetNewApplicationRequestProto {},
    )?;
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
        resource: Some(am.to_proto()),
        queue: Some("default".into()),
        ..Default::default()
    };
    let _: SubmitApplicationResponseProto = call(
        rm,
        user,
        acp::SUBMIT_APPLICATION,
        &SubmitApplicationRequestProto {
            application_submission_context: Some(ctx),
        },
    )?;
    Ok(id)
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

#[test]
fn a_submission_needs_the_queues_submit_or_administer_acl() {
    let lookups = Arc::new(AtomicUsize::new(0));
    let (rm, _d) = start_with(
        lookups.clone(),
        &[
            ("yarn.scheduler.capacity.root.acl_submit_applications", " "),
            (
                "yarn.scheduler.capacity.root.default.acl_submit_applications",
                "alice ops",
            ),
            (
                "yarn.scheduler.capacity.root.default.acl_administer_queue",
                "bob",
            ),
        ],
    );
    let a = try_submit(&rm, "alice", &[], Res::new(1024, 1)).expect("alice is listed");
    assert_eq!(lookups.load(Ordering::Relaxed), 0);
    try_submit(&rm, "bob", &[], Res::new(1024, 1)).expect("bob administers the queue");
    try_submit(&rm, "dave", &[], Res::new(1024, 1)).expect("dave is in ops");
    assert_eq!(lookups.load(Ordering::Relaxed), 1, "one lookup, for dave");
    // carol: Java's refusal, and no application (ids are handed out in order)
    let (class, message) = support::remote(try_submit(&rm, "carol", &[], Res::new(1024, 1)));
    assert_eq!(class, "org.apache.hadoop.yarn.exceptions.YarnException");
    assert_eq!(
        message,
        format!(
            "org.apache.hadoop.security.AccessControlException: User carol does not have \
             permission to submit {} to queue default",
            AppId::new(a.cluster_timestamp, a.id + 3)
        )
    );
    // yarn.admin.acl plays no part, as in Java
    assert!(try_submit(&rm, "admin", &[], Res::new(1024, 1)).is_err());
    // the resource check comes first, as in Java's RMAppManager
    let (class, _) = support::remote(try_submit(&rm, "carol", &[], Res::new(1 << 40, 1)));
    assert_eq!(
        class,
        "org.apache.hadoop.yarn.exceptions.InvalidResourceRequestException"
    );
    assert_eq!(
        listed(&rm, "admin", None).len(),
        3,
        "the refused ones are not there"
    );
    rm.shutdown();
}

fn fail_attempt(
    rm: &RmService,
    user: &str,
    attempt: AttemptId,
) -> Result<FailApplicationAttemptResponseProto, ClientError> {
    call(
        rm,
        user,
        acp::FAIL_APPLICATION_ATTEMPT,
        &FailApplicationAttemptRequestProto {
            application_attempt_id: Some(hadoop_wire::token::identifier::attempt_to_proto(
                &attempt,
            )),
        },
    )
}

#[test]
fn fail_application_attempt_checks_modify_app_retries_then_fails_the_application() {
    let (rm, _d) = start(Arc::new(AtomicUsize::new(0)));
    use ApplicationAccessTypeProto::{AppaccessModifyApp as Modify, AppaccessViewApp as View};
    // No node: each attempt waits for its AM container. max-attempts is Hadoop's 2.
    let a = submit(&rm, "alice", &[(View, "bob"), (Modify, "erin")]);
    let first = AttemptId { app: a, attempt: 1 };
    let current = |rm: &RmService| {
        report(rm, "alice", a)
            .current_application_attempt_id
            .and_then(|t| t.attempt_id)
    };
    // VIEW_APP is not MODIFY_APP
    let (class, message) = support::remote(fail_attempt(&rm, "bob", first));
    assert_eq!(class, "org.apache.hadoop.yarn.exceptions.YarnException");
    assert_eq!(
        message,
        format!(
            "org.apache.hadoop.security.AccessControlException: User bob cannot perform \
             operation MODIFY_APP on {a}"
        )
    );
    assert_eq!(current(&rm), Some(1));
    // an attempt the application never had
    let (class, message) =
        support::remote(fail_attempt(&rm, "alice", AttemptId { app: a, attempt: 7 }));
    assert_eq!(
        class,
        "org.apache.hadoop.yarn.exceptions.ApplicationAttemptNotFoundException"
    );
    assert_eq!(
        message,
        format!(
            "ApplicationAttempt with id '{}' doesn't exist in RM.",
            AttemptId { app: a, attempt: 7 }
        )
    );
    // erin may modify: the first attempt fails, a second one starts
    fail_attempt(&rm, "erin", first).expect("erin has MODIFY_APP");
    assert_eq!(current(&rm), Some(2));
    let r = report(&rm, "alice", a);
    assert_eq!(
        r.yarn_application_state(),
        hadoop_wire::pb::hadoop::yarn::YarnApplicationStateProto::Accepted
    );
    // the old attempt again: nothing happens, no error (Java sends FAIL to an ended attempt)
    fail_attempt(&rm, "alice", first).expect("an ended attempt");
    assert_eq!(current(&rm), Some(2));
    // the last attempt: the application FAILS with Java's diagnostics
    fail_attempt(&rm, "admin", AttemptId { app: a, attempt: 2 }).expect("an admin");
    let r = report(&rm, "alice", a);
    assert_eq!(
        r.yarn_application_state(),
        hadoop_wire::pb::hadoop::yarn::YarnApplicationStateProto::Failed
    );
    assert_eq!(
        r.diagnostics.as_deref(),
        Some(
            format!(
                "Application {a} failed 2 times (global limit =2; local limit is =2) due to \
                 Attempt failed by user.. Failing the application."
            )
            .as_str()
        )
    );
    // a finished application: answered, nothing changes
    fail_attempt(&rm, "alice", AttemptId { app: a, attempt: 2 }).expect("finished");
    assert_eq!(current(&rm), Some(2));
    // an unknown application
    let ghost = AppId::new(a.cluster_timestamp, a.id + 100);
    let (class, message) = support::remote(fail_attempt(
        &rm,
        "alice",
        AttemptId {
            app: ghost,
            attempt: 1,
        },
    ));
    assert_eq!(
        class,
        "org.apache.hadoop.yarn.exceptions.ApplicationNotFoundException"
    );
    assert_eq!(
        message,
        format!(
            "Application with id '{ghost}' doesn't exist in RM. Please check that the job \
             submission was successful."
        )
    );
    rm.shutdown();
}
