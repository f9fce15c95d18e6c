//! The ApplicationClientProtocol methods beyond submitting and reporting, over the client port
//! as a SIMPLE user: every one of the 35 answers (never "Unknown method"); the queues as Java's
//! Capacity scheduler presents `root` and `default`; resource types; the ACLs a caller has on the
//! queues; moving an application and updating its priority and timeouts with Java's answers;
//! the features this RM does not have refused as Java refuses them; and the AM environment
//! Java's AMLauncher sets.

use crate::support;

use std::sync::Arc;

use hadoop_wire::pb::hadoop::yarn::{
    ApplicationIdProto, ApplicationSubmissionContextProto, ApplicationTimeoutTypeProto,
    ApplicationUpdateTimeoutMapProto, ContainerLaunchContextProto,
    GetAllResourceTypeInfoResponseProto, GetApplicationReportRequestProto,
    GetApplicationReportResponseProto, GetClusterNodeLabelsResponseProto,
    GetNewApplicationRequestProto, GetNewApplicationResponseProto, GetQueueInfoRequestProto,
    GetQueueInfoResponseProto, GetQueueUserAclsInfoResponseProto, KillApplicationRequestProto,
    KillApplicationResponseProto, MoveApplicationAcrossQueuesRequestProto,
    MoveApplicationAcrossQueuesResponseProto, PriorityProto, QueueAclProto,
    SubmitApplicationRequestProto, SubmitApplicationResponseProto,
    UpdateApplicationPriorityRequestProto, UpdateApplicationPriorityResponseProto,
    UpdateApplicationTimeoutsRequestProto, UpdateApplicationTimeoutsResponseProto,
};
use hadoop_wire::pb::hadoop::yarn::{
    FailApplicationAttemptRequestProto, FailApplicationAttemptResponseProto,
    GetClusterMetricsRequestProto,
};
use hadoop_wire::yarn::acp;
use hadoop_wire::yarn::ids::AppId;
use ipc::client::ClientError;
use rm_core::app_acls::AclPolicy;
use rm_core::apps::{AppsConfig, Res};
use rm_core::service::{AppsSecurity, RmService};
use support::{call, remote};

fn start() -> (RmService, tempfile::TempDir) {
    support::start_rm(AppsSecurity::default())
}

fn submit(rm: &RmService, user: &str, priority: Option<i32>) -> AppId {
    submit_with(rm, user, priority, None)
}

fn submit_with(
    rm: &RmService,
    user: &str,
    priority: Option<i32>,
    validity_ms: Option<i64>,
) -> AppId {
    let n: GetNewApplicationResponseProto = call(
        rm,
        user,
        acp::GET_NEW_APPLICATION,
        &GetNewApplicationRequestProto {},
    )
    .unwrap();
    let p = n.application_id.unwrap();
    let id = AppId::new(p.cluster_timestamp(), p.id());
    let _: SubmitApplicationResponseProto = call(
        rm,
        user,
        acp::SUBMIT_APPLICATION,
        &SubmitApplicationRequestProto {
            application_submission_context: Some(ApplicationSubmissionContextProto {
                application_id: Some(id.to_proto()),
                am_container_spec: Some(ContainerLaunchContextProto::default()),
                resource: Some(Res::new(1024, 1).to_proto()),
                priority: priority.map(|p| PriorityProto { priority: Some(p) }),
                attempt_failures_validity_interval: validity_ms,
                ..Default::default()
            }),
        },
    )
    .unwrap();
    id
}

fn priority(rm: &RmService, id: AppId) -> i32 {
    let r: GetApplicationReportResponseProto = call(
        rm,
        "alice",
        acp::GET_APPLICATION_REPORT,
        &GetApplicationReportRequestProto {
            application_id: Some(id.to_proto()),
        },
    )
    .unwrap();
    r.application_report.unwrap().priority.unwrap().priority()
}

fn queue_info(rm: &RmService, name: &str, children: bool) -> GetQueueInfoResponseProto {
    call(
        rm,
        "alice",
        acp::GET_QUEUE_INFO,
        &GetQueueInfoRequestProto {
            queue_name: Some(name.into()),
            include_child_queues: Some(children),
            recursive: Some(children),
            include_applications: Some(true),
            ..Default::default()
        },
    )
    .unwrap()
}

#[test]
fn every_client_protocol_method_answers() {
    let (rm, _d) = start();
    for m in acp::ALL {
        // An empty request: each method answers it (with its answer or a Java exception),
        // never with the server's unknown-method refusal.
        let r: Result<GetClusterMetricsRequestProto, ClientError> =
            call(&rm, "alice", m, &GetClusterMetricsRequestProto {});
        if let Err(ClientError::Remote { class, message, .. }) = &r {
            assert!(
                !class.contains("RpcNoSuchMethodException") && !message.contains("Unknown method"),
                "{m}: {class}: {message}"
            );
        }
    }
}

#[test]
fn queues_are_the_capacity_schedulers_root_and_default() {
    let (rm, _d) = start();
    let a = submit(&rm, "alice", None);
    let root = queue_info(&rm, "root", true).queue_info.unwrap();
    assert_eq!(root.queue_name(), "root");
    assert_eq!(root.queue_path(), "root");
    assert_eq!(root.scheduler_type(), "CapacityScheduler");
    assert_eq!((root.capacity(), root.maximum_capacity()), (1.0, 1.0));
    assert_eq!(root.accessible_node_labels, ["*"]);
    assert_eq!(root.child_queues.len(), 1);
    let d = &root.child_queues[0];
    assert_eq!(
        (d.queue_name(), d.queue_path()),
        ("default", "root.default")
    );
    assert_eq!(d.max_parallel_apps(), i32::MAX);
    // root holds its leaves' applications
    assert_eq!(root.applications.len(), 1);
    assert_eq!(d.applications.len(), 1);
    assert_eq!(
        root.queue_statistics.unwrap().num_apps_pending(),
        1,
        "accepted, no node to run on"
    );
    // by full path too
    let d = queue_info(&rm, "root.default", false).queue_info.unwrap();
    assert_eq!(d.queue_name(), "default");
    assert!(d.child_queues.is_empty());
    // Java answers an unknown queue without queue info
    assert!(queue_info(&rm, "nosuch", false).queue_info.is_none());
    // a killed application leaves the scheduler's queue
    let _: KillApplicationResponseProto = call(
        &rm,
        "alice",
        acp::FORCE_KILL_APPLICATION,
        &KillApplicationRequestProto {
            application_id: Some(a.to_proto()),
            diagnostics: None,
        },
    )
    .unwrap();
    assert!(queue_info(&rm, "default", false)
        .queue_info
        .unwrap()
        .applications
        .is_empty());
}

#[test]
fn resource_types_and_queue_acls_and_labels() {
    let (rm, _d) = start();
    let t: GetAllResourceTypeInfoResponseProto = call(
        &rm,
        "alice",
        acp::GET_RESOURCE_TYPE_INFO,
        &GetClusterMetricsRequestProto {},
    )
    .unwrap();
    let types: Vec<(&str, &str)> = t
        .resource_type_info
        .iter()
        .map(|r| (r.name.as_str(), r.units()))
        .collect();
    assert_eq!(types, [("memory-mb", "Mi"), ("vcores", "")]);
    // Without yarn.acl.enable every caller may submit to and administer every queue.
    let acls: GetQueueUserAclsInfoResponseProto = call(
        &rm,
        "alice",
        acp::GET_QUEUE_USER_ACLS,
        &GetClusterMetricsRequestProto {},
    )
    .unwrap();
    let both = vec![
        QueueAclProto::QaclSubmitApplications as i32,
        QueueAclProto::QaclAdministerQueue as i32,
    ];
    let got: Vec<(&str, &Vec<i32>)> = acls
        .queue_user_acls
        .iter()
        .map(|q| (q.queue_name(), &q.user_acls))
        .collect();
    assert_eq!(got, [("root", &both), ("default", &both)]);
    let labels: GetClusterNodeLabelsResponseProto = call(
        &rm,
        "alice",
        acp::GET_CLUSTER_NODE_LABELS,
        &GetClusterMetricsRequestProto {},
    )
    .unwrap();
    assert_eq!(labels, GetClusterNodeLabelsResponseProto::default());
    // Features that are off: Java's refusals.
    let (class, message) = remote::<GetClusterMetricsRequestProto>(call(
        &rm,
        "alice",
        acp::GET_RESOURCE_PROFILES,
        &GetClusterMetricsRequestProto {},
    ));
    assert_eq!(
        class,
        "org.apache.hadoop.yarn.exceptions.YARNFeatureNotEnabledException"
    );
    assert!(
        message.starts_with("Resource profile is not enabled"),
        "{message}"
    );
    let (class, message) = remote::<GetClusterMetricsRequestProto>(call(
        &rm,
        "alice",
        acp::GET_NEW_RESERVATION,
        &GetClusterMetricsRequestProto {},
    ));
    assert_eq!(class, "org.apache.hadoop.yarn.exceptions.YarnException");
    assert_eq!(
        message,
        "Reservation is not enabled. Please enable & try again"
    );
}

#[test]
fn queue_acls_follow_the_policy() {
    let mut conf = conf::Configuration::new();
    conf.set("yarn.acl.enable", "true");
    conf.set("yarn.scheduler.capacity.root.acl_administer_queue", "admin");
    conf.set("yarn.scheduler.capacity.root.acl_submit_applications", " ");
    conf.set(
        "yarn.scheduler.capacity.root.default.acl_submit_applications",
        "alice",
    );
    let policy = AclPolicy::from_conf(&conf, &["default".to_string()], None, Box::new(NoGroups))
        .unwrap()
        .unwrap();
    let (rm, _d) = support::start_rm(AppsSecurity {
        app_acls: Some(Arc::new(policy)),
        ..AppsSecurity::default()
    });
    let acls = |user: &str| {
        let r: GetQueueUserAclsInfoResponseProto = call(
            &rm,
            user,
            acp::GET_QUEUE_USER_ACLS,
            &GetClusterMetricsRequestProto {},
        )
        .unwrap();
        r.queue_user_acls
            .iter()
            .map(|q| (q.queue_name().to_string(), q.user_acls.len()))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        acls("alice"),
        [("root".to_string(), 0), ("default".to_string(), 1)]
    );
    assert_eq!(
        acls("bob"),
        [("root".to_string(), 0), ("default".to_string(), 0)]
    );
    assert_eq!(
        acls("admin"),
        [("root".to_string(), 2), ("default".to_string(), 2)]
    );
}

struct NoGroups;
impl ipc::authorize::GroupsMapping for NoGroups {
    fn groups(&self, user: &str) -> Vec<String> {
        vec![user.to_string()]
    }
}

fn update_priority(rm: &RmService, id: AppId, p: i32) -> Result<i32, ClientError> {
    let r: UpdateApplicationPriorityResponseProto = call(
        rm,
        "alice",
        acp::UPDATE_APPLICATION_PRIORITY,
        &UpdateApplicationPriorityRequestProto {
            application_id: id.to_proto(),
            application_priority: PriorityProto { priority: Some(p) },
        },
    )?;
    Ok(r.application_priority.unwrap().priority())
}

fn move_to(rm: &RmService, id: AppId, q: &str) -> Result<(), ClientError> {
    let _: MoveApplicationAcrossQueuesResponseProto = call(
        rm,
        "alice",
        acp::MOVE_APPLICATION_ACROSS_QUEUES,
        &MoveApplicationAcrossQueuesRequestProto {
            application_id: id.to_proto(),
            target_queue: q.into(),
        },
    )?;
    Ok(())
}

#[test]
fn priority_is_capped_at_the_cluster_maximum() {
    // Java's default yarn.cluster.max-application-priority, 0: every priority becomes 0.
    let (rm, _d) = start();
    let a = submit(&rm, "alice", Some(7));
    assert_eq!(priority(&rm, a), 0);
    assert_eq!(update_priority(&rm, a, 5).unwrap(), 0);
    let unknown = AppId::new(a.cluster_timestamp, 99);
    let (class, _) = remote(update_priority(&rm, unknown, 1));
    assert_eq!(
        class,
        "org.apache.hadoop.yarn.exceptions.ApplicationNotFoundException"
    );
    drop(rm);
    // With a maximum of 10: asked priorities up to it are kept.
    let (rm, _d) = support::start_rm_with(
        |_| {},
        AppsConfig {
            max_app_priority: 10,
            ..AppsConfig::default()
        },
        AppsSecurity::default(),
    );
    let a = submit(&rm, "alice", Some(7));
    assert_eq!(priority(&rm, a), 7);
    assert_eq!(update_priority(&rm, a, 12).unwrap(), 10);
    assert_eq!(priority(&rm, a), 10);
    assert_eq!(update_priority(&rm, a, 3).unwrap(), 3);
    // a finished application keeps its priority
    let _: KillApplicationResponseProto = call(
        &rm,
        "alice",
        acp::FORCE_KILL_APPLICATION,
        &KillApplicationRequestProto {
            application_id: Some(a.to_proto()),
            diagnostics: None,
        },
    )
    .unwrap();
    assert_eq!(update_priority(&rm, a, 9).unwrap(), 3);
}

#[test]
fn moves_and_timeouts_answer_as_java() {
    let (rm, _d) = start();
    let a = submit(&rm, "alice", None);
    move_to(&rm, a, "default").unwrap();
    move_to(&rm, a, "root.default").unwrap();
    let (class, message) = remote(move_to(&rm, a, "nosuch"));
    assert_eq!(class, "org.apache.hadoop.yarn.exceptions.YarnException");
    assert_eq!(message, "The specified Queue: nosuch doesn't exist");
    let (_, message) = remote(move_to(&rm, a, "root"));
    assert_eq!(message, "The specified Queue: root is not a Leaf Queue.");
    let timeouts = |list: Vec<ApplicationUpdateTimeoutMapProto>| {
        call::<_, UpdateApplicationTimeoutsResponseProto>(
            &rm,
            "alice",
            acp::UPDATE_APPLICATION_TIMEOUTS,
            &UpdateApplicationTimeoutsRequestProto {
                application_id: a.to_proto(),
                application_timeouts: list,
            },
        )
    };
    let (_, message) = remote(timeouts(Vec::new()));
    assert_eq!(
        message,
        "At least one ApplicationTimeoutType should be configured for updating timeouts."
    );
    let lifetime = vec![ApplicationUpdateTimeoutMapProto {
        application_timeout_type: Some(ApplicationTimeoutTypeProto::AppTimeoutLifetime as i32),
        expire_time: Some("2030-01-01T00:00:00.000+0000".into()),
    }];
    let (class, _) = remote(timeouts(lifetime.clone()));
    assert_eq!(class, "org.apache.hadoop.yarn.exceptions.YarnException");
    let _: KillApplicationResponseProto = call(
        &rm,
        "alice",
        acp::FORCE_KILL_APPLICATION,
        &KillApplicationRequestProto {
            application_id: Some(a.to_proto()),
            diagnostics: None,
        },
    )
    .unwrap();
    // finished: timeouts answered back unchanged, moves refused
    assert_eq!(
        timeouts(lifetime.clone()).unwrap().application_timeouts,
        lifetime
    );
    let (_, message) = remote(move_to(&rm, a, "default"));
    assert_eq!(message, "App in KILLED state cannot be moved.");
    let unknown = ApplicationIdProto {
        id: Some(99),
        cluster_timestamp: Some(a.cluster_timestamp),
    };
    let (class, _) = remote(call::<_, MoveApplicationAcrossQueuesResponseProto>(
        &rm,
        "alice",
        acp::MOVE_APPLICATION_ACROSS_QUEUES,
        &MoveApplicationAcrossQueuesRequestProto {
            application_id: unknown,
            target_queue: "default".into(),
        },
    ));
    assert_eq!(
        class,
        "org.apache.hadoop.yarn.exceptions.ApplicationNotFoundException"
    );
}

fn fail_current(rm: &RmService, id: AppId) -> (i32, String) {
    let r: GetApplicationReportResponseProto = call(
        rm,
        "alice",
        acp::GET_APPLICATION_REPORT,
        &GetApplicationReportRequestProto {
            application_id: Some(id.to_proto()),
        },
    )
    .unwrap();
    let rep = r.application_report.unwrap();
    let attempt = rep.current_application_attempt_id.unwrap();
    let _: FailApplicationAttemptResponseProto = call(
        rm,
        "alice",
        acp::FAIL_APPLICATION_ATTEMPT,
        &FailApplicationAttemptRequestProto {
            application_attempt_id: Some(attempt),
        },
    )
    .unwrap();
    let r: GetApplicationReportResponseProto = call(
        rm,
        "alice",
        acp::GET_APPLICATION_REPORT,
        &GetApplicationReportRequestProto {
            application_id: Some(id.to_proto()),
        },
    )
    .unwrap();
    let rep = r.application_report.unwrap();
    (
        rep.current_application_attempt_id.unwrap().attempt_id(),
        format!("{:?}", rep.yarn_application_state()),
    )
}

#[test]
fn failures_outside_the_validity_interval_do_not_count() {
    // yarn.resourcemanager.am.max-attempts 2 (the default).
    let (rm, _d) = start();
    let a = submit_with(&rm, "alice", None, None);
    assert_eq!(fail_current(&rm, a), (2, "Accepted".into()));
    assert_eq!(fail_current(&rm, a).1, "Failed", "two failures: the limit");
    // With a 1 s window, failures 1.2 s apart never add up to two.
    let b = submit_with(&rm, "alice", None, Some(1000));
    for n in 2..=3 {
        assert_eq!(fail_current(&rm, b), (n, "Accepted".into()));
        std::thread::sleep(std::time::Duration::from_millis(1200));
    }
    // Two within the window fail it.
    let (_, state) = fail_current(&rm, b);
    assert_eq!(state, "Accepted");
    let (_, state) = fail_current(&rm, b);
    assert_eq!(state, "Failed");
}

#[test]
fn signals_for_absent_containers_are_javas_refusal() {
    use hadoop_wire::pb::hadoop::yarn::{
        SignalContainerCommandProto, SignalContainerRequestProto, SignalContainerResponseProto,
    };
    use hadoop_wire::yarn::ids::ContainerId;
    let (rm, _d) = start();
    let a = submit(&rm, "alice", None);
    for app in [a, AppId::new(a.cluster_timestamp, 99)] {
        let c = ContainerId {
            app,
            attempt: 1,
            id: 5,
        };
        let (class, message) = remote(call::<_, SignalContainerResponseProto>(
            &rm,
            "alice",
            acp::SIGNAL_TO_CONTAINER,
            &SignalContainerRequestProto {
                container_id: c.to_proto(),
                command: SignalContainerCommandProto::GracefulShutdown as i32,
            },
        ));
        assert_eq!(class, "org.apache.hadoop.yarn.exceptions.YarnException");
        assert_eq!(message, format!("Trying to signal an absent container {c}"));
    }
}
