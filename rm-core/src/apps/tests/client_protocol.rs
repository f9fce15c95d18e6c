//! ApplicationClientProtocol: submission, kill, fail-attempt and the reports.

use super::*;

#[test]
fn a_user_failed_running_attempt_releases_its_am_container_and_is_retried() {
    let mut a = apps(AppsConfig::default());
    let (id, at) = running(&mut a);
    a.take_cleanups();
    a.fail_attempt(at, 50).unwrap();
    let app = a.app(id).unwrap();
    assert_eq!(app.attempts[0].state, AttemptState::Failed);
    assert_eq!(app.attempts[0].diagnostics, "Attempt failed by user.");
    assert_eq!(app.failures, 1);
    assert_eq!(app.state, AppState::Accepted);
    assert_eq!(app.attempts[1].state, AttemptState::Scheduled);
    let am = ContainerId {
        app: id,
        attempt: 1,
        id: 1,
    };
    assert!(a.take_cleanups().contains(&Cleanup::Container(am)));
    assert!(
        !a.amrm.read().is_registered(&at),
        "its AMRMToken stops verifying"
    );
    // Java: FAIL to an ended attempt changes nothing
    a.fail_attempt(at, 60).unwrap();
    assert_eq!(a.app(id).unwrap().failures, 1);
    // one attempt allowed: the application fails
    let mut b = apps(AppsConfig {
        max_attempts: 1,
        ..Default::default()
    });
    let (id, at) = running(&mut b);
    b.fail_attempt(at, 50).unwrap();
    let app = b.app(id).unwrap();
    assert_eq!(app.state, AppState::Failed);
    assert_eq!(
        app.diagnostics,
        format!(
            "Application {id} failed 1 times (global limit =1; local limit is =1) due to \
             Attempt failed by user.. Failing the application."
        )
    );
}

#[test]
fn attempt_and_container_reports_follow_the_attempts() {
    use crate::reports;
    use hadoop_wire::pb::hadoop::yarn::YarnApplicationAttemptStateProto as Y;
    let mut a = apps(AppsConfig::default());
    let (id, at) = running(&mut a);
    let app = a.app(id).unwrap();
    let r = reports::attempt_report(&app.attempts[0]);
    assert_eq!(
        r.yarn_application_attempt_state,
        Some(Y::AppAttemptRunning as i32)
    );
    assert_eq!((r.start_time, r.finish_time), (Some(10), Some(0)));
    let am = app.attempts[0].am_container.unwrap();
    assert_eq!(r.am_container_id, Some(am.to_proto()));
    let live = reports::containers(&a, app, &app.attempts[0]);
    assert_eq!(live.len(), 1);
    let c = &live[0];
    assert_eq!(
        c.container_state,
        Some(ContainerStateProto::CRunning as i32)
    );
    assert_eq!(c.node_http_address.as_deref(), Some("http://h1:8042"));
    assert_eq!(
        c.log_url.as_deref(),
        Some(format!("http://h1:8042/node/containerlogs/{am}/alice").as_str())
    );
    assert_eq!((c.creation_time, c.finish_time), (Some(20), Some(0)));
    assert!(reports::container(&a, app, &app.attempts[0], am).is_ok());
    // The AM exits: its attempt FAILED at that time, without live containers (a completed
    // container is "not found", as the scheduler forgets it); the retry started then.
    update(&mut a, &NodeKey::new("h1", 1), &[(am, 3)], 100);
    let app = a.app(id).unwrap();
    let r = reports::attempt_report(&app.attempts[0]);
    assert_eq!(
        r.yarn_application_attempt_state,
        Some(Y::AppAttemptFailed as i32)
    );
    assert_eq!(r.finish_time, Some(100));
    assert!(reports::containers(&a, app, &app.attempts[0]).is_empty());
    let e = reports::container(&a, app, &app.attempts[0], am).unwrap_err();
    assert_eq!(e.class, reports::CONTAINER_NOT_FOUND);
    assert_eq!(
        e.message,
        format!("Container with id '{am}' doesn't exist in RM.")
    );
    assert_eq!(app.attempts[1].start_ms, 100);
    let second = AttemptId { attempt: 2, ..at };
    assert!(reports::attempt(app, second).is_ok());
    let third = AttemptId { attempt: 3, ..at };
    let e = reports::attempt(app, third).unwrap_err();
    assert_eq!(e.class, exc::ATTEMPT_NOT_FOUND);
    assert_eq!(
        e.message,
        format!("ApplicationAttempt with id '{third}' doesn't exist in RM.")
    );
}

#[test]
fn bad_submissions_and_calls_get_javas_exceptions() {
    let mut a = apps(AppsConfig::default());
    let (id, _) = a.new_application().unwrap();
    let e = a.submit(ctx(id, 9000, "default"), "bob", 1).unwrap_err();
    assert_eq!(e.class, exc::INVALID_RESOURCE_REQUEST);
    assert_eq!(e.message, "Invalid resource request! Cannot allocate containers as requested resource is greater than maximum allowed allocation. Requested resource type=[memory-mb], Requested resource=<memory:9000, vCores:1>, maximum allowed allocation=<memory:8192, vCores:4>, please note that maximum allowed allocation is calculated by scheduler based on maximum resource of registered NodeManagers, which might be less than configured maximum allocation=<memory:8192, vCores:4>");
    let mut big = ctx(id, 512, "default");
    big.am_container_spec = Some(ContainerLaunchContextProto {
        command: vec!["x".repeat(5 << 20)],
        ..Default::default()
    });
    let e = a.submit(big, "bob", 1).unwrap_err();
    assert_eq!(e.class, exc::YARN);
    assert!(
        e.message.contains("over the limit of 4194304"),
        "{}",
        e.message
    );
    a.submit(ctx(id, 512, "nope"), "bob", 1).unwrap();
    let app = a.app(id).unwrap();
    assert_eq!(app.state, AppState::Failed);
    assert_eq!(
        app.diagnostics,
        format!("Application {id} submitted by user bob to unknown queue: nope")
    );
    let ghost = AppId::new(TS, 99);
    assert_eq!(a.report(ghost).unwrap_err().class, exc::APP_NOT_FOUND);
    let e = a
        .allocate(
            AttemptId {
                app: ghost,
                attempt: 1,
            },
            1,
            &AllocateRequestProto::default(),
            &keys(),
            1,
        )
        .unwrap_err();
    assert_eq!(e.class, exc::ATTEMPT_NOT_FOUND);
    // Allocate before registering.
    let (id2, _) = a.new_application().unwrap();
    a.submit(ctx(id2, 512, "default"), "bob", 1).unwrap();
    update(&mut a, &NodeKey::new("h2", 2), &[], 2);
    let at = a.take_launches()[0].attempt;
    let e = a
        .allocate(at, 1, &AllocateRequestProto::default(), &keys(), 3)
        .unwrap_err();
    assert_eq!(e.class, exc::AM_NOT_REGISTERED);
    // Kill.
    assert!(a.kill(id2, None, 4).unwrap());
    let app = a.app(id2).unwrap();
    assert_eq!(app.state, AppState::Killed);
    assert_eq!(app.diagnostics, "Application killed by user.");
    let cl = a.take_cleanups();
    assert!(cl.contains(&Cleanup::App(id2)));
    assert!(!a.amrm.read().is_registered(&at));
}
