//! `keepContainersAcrossApplicationAttempts` on `hotpath rm` with a `hotpath agent`: an
//! application's worker container outlives its failed attempt, and the next attempt gets it.
//!
//! The AM container runs a shell that hands its Credentials file (the attempt's AMRMToken) to
//! this test and sleeps; the test is the AM of each attempt: it registers, allocates a worker
//! (`sleep` in a container of its own) and starts it on the agent with the NMToken. Then the
//! attempt is failed with `failApplicationAttempt` (the client protocol, as `yarn
//! applicationattempt -fail`): the RM kills the AM container but not the worker, launches the
//! second attempt, whose registration lists the worker in `containers_from_previous_attempts`
//! with an NMToken for its node, and that token works on the agent (the worker's status, then
//! its stop); the worker's completion reaches the second attempt's `allocate`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use hadoop_wire::pb::hadoop::yarn::{
    AllocateRequestProto, ApplicationSubmissionContextProto, ContainerLaunchContextProto,
    ContainerStateProto, FailApplicationAttemptRequestProto, FailApplicationAttemptResponseProto,
    FinalApplicationStatusProto, FinishApplicationMasterRequestProto, PriorityProto, ResourceProto,
    ResourceRequestProto, StartContainerRequestProto,
};
use hadoop_wire::token::identifier::container_from_proto;
use hadoop_wire::token::Token;
use hadoop_wire::yarn::ids::{AppId, AttemptId, ContainerId};
use hadoop_wire::yarn::{acp, APPLICATION_CLIENT_PROTOCOL};
use yarn_client::application_client::{current_user, ApplicationClient};
use yarn_client::application_master::{amrm_token_from_file, ApplicationMaster};
use yarn_client::container_manager::ContainerManager;
use yarn_client::rpc::Retry;

use crate::daemon::{start_agent, start_rm_daemon};

fn wait_for<T>(what: &str, secs: u64, mut f: impl FnMut() -> Option<T>) -> T {
    let t0 = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(secs),
            "{what}: not within {secs} s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The process is there and not a zombie.
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| !rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

fn pid_in(p: &Path) -> Option<u32> {
    std::fs::read_to_string(p).ok()?.trim().parse().ok()
}

/// A shell that writes `$$` to `<dir>/<name>.pid` (atomically) before `tail`.
fn pid_then(dir: &Path, name: &str, tail: &str) -> String {
    let d = dir.display();
    format!("echo $$ > {d}/{name}.tmp && mv {d}/{name}.tmp {d}/{name}.pid && {tail}")
}

fn bytes(t: &hadoop_wire::pb::hadoop::common::TokenProto) -> Token {
    Token::new(
        t.identifier.clone(),
        t.password.clone(),
        t.kind.clone(),
        t.service.clone(),
    )
}

/// The test as the AM of `attempt`: its AMRMToken from the file its AM container left.
fn am_of(dir: &Path, attempt: AttemptId, sched: SocketAddr) -> ApplicationMaster {
    let am = ContainerId {
        app: attempt.app,
        attempt: attempt.attempt,
        id: 1,
    };
    let file: PathBuf = dir.join(format!("{am}.tokens"));
    wait_for(&format!("{am} started"), 60, || {
        file.is_file().then_some(())
    });
    let token = amrm_token_from_file(&file).unwrap();
    ApplicationMaster::new(sched, token, &conf::Configuration::new(), &Retry::default()).unwrap()
}

#[test]
fn a_failed_attempts_running_worker_is_kept_and_handed_to_the_next_attempt() {
    let rm = start_rm_daemon(
        "127.0.0.1:0",
        "127.0.0.1:0",
        "127.0.0.1:0",
        &[("yarn.scheduler.minimum-allocation-mb", "128".into())],
    );
    let _agent = start_agent(&rm.field("resource_tracker"), "127.0.0.91");
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    let client_addr: SocketAddr = rm.field("client").parse().unwrap();
    let sched: SocketAddr = rm.field("scheduler").parse().unwrap();
    let metrics = rm.field("metrics");
    let user = current_user();
    let retry = Retry::default();
    let client = ApplicationClient::new(client_addr, &user, &retry);
    wait_for("the agent RUNNING at the RM", 30, || {
        (client.cluster_nodes(&[]).ok()?.len() == 1).then_some(())
    });

    let app: AppId = client.new_application().unwrap().app;
    let d = dir.display();
    // The AM container: its Credentials file to the test, then it waits to be killed.
    let am_command = pid_then(
        dir,
        "am.$CONTAINER_ID",
        &format!(
            "cp \"$HADOOP_TOKEN_FILE_LOCATION\" {d}/$CONTAINER_ID.tmp && \
             mv {d}/$CONTAINER_ID.tmp {d}/$CONTAINER_ID.tokens && exec sleep 600"
        ),
    );
    client
        .submit(ApplicationSubmissionContextProto {
            application_id: Some(app.to_proto()),
            application_name: Some("keep-containers".into()),
            queue: Some("default".into()),
            am_container_spec: Some(ContainerLaunchContextProto {
                command: vec![am_command],
                ..Default::default()
            }),
            resource: Some(ResourceProto {
                memory: Some(256),
                virtual_cores: Some(1),
                ..Default::default()
            }),
            max_app_attempts: Some(2),
            keep_containers_across_application_attempts: Some(true),
            ..Default::default()
        })
        .unwrap();

    // Attempt 1 allocates and starts the worker.
    let at1 = AttemptId { app, attempt: 1 };
    let am1 = am_of(dir, at1, sched);
    am1.register("127.0.0.1", 0, "").unwrap();
    let mut rid = 0;
    let mut nm_tokens = Vec::new();
    let mut ask = vec![ResourceRequestProto {
        priority: Some(PriorityProto { priority: Some(1) }),
        resource_name: Some("*".into()),
        capability: Some(ResourceProto {
            memory: Some(256),
            virtual_cores: Some(1),
            ..Default::default()
        }),
        num_containers: Some(1),
        relax_locality: Some(true),
        ..Default::default()
    }];
    let worker = wait_for("the worker allocated", 30, || {
        let r = am1
            .allocate(&AllocateRequestProto {
                ask: std::mem::take(&mut ask),
                response_id: Some(rid),
                ..Default::default()
            })
            .unwrap();
        rid = r.response_id.unwrap_or(0);
        nm_tokens.extend(r.nm_tokens);
        r.allocated_containers.into_iter().next()
    });
    let worker_id = container_from_proto(worker.id.as_ref().unwrap()).unwrap();
    let node = worker.node_id.as_ref().unwrap();
    let node_addr = format!("{}:{}", node.host(), node.port());
    let nm_token = bytes(nm_tokens[0].token.as_ref().unwrap());
    let cm = ContainerManager::new(&conf::Configuration::new(), &retry);
    let started = cm
        .start(
            &node_addr,
            &nm_token,
            vec![StartContainerRequestProto {
                container_launch_context: Some(ContainerLaunchContextProto {
                    command: vec![pid_then(dir, "worker", "exec sleep 600")],
                    ..Default::default()
                }),
                container_token: worker.container_token.clone(),
            }],
        )
        .unwrap();
    assert_eq!(started.succeeded, vec![worker_id], "{:?}", started.failed);
    let worker_pid = wait_for("the worker's pid", 30, || pid_in(&dir.join("worker.pid")));
    let am1_pid = pid_in(&dir.join(format!(
        "am.{}.pid",
        ContainerId {
            app,
            attempt: 1,
            id: 1
        }
    )))
    .expect("the AM container wrote its pid before its tokens");
    // The RM keeps only containers it has seen RUNNING: the agent says so, then two more of
    // its heartbeats (each carries the running containers) reach the RM.
    wait_for("the worker RUNNING on the agent", 30, || {
        let s = cm.statuses(&node_addr, &nm_token, &[worker_id]).ok()?;
        s.statuses
            .iter()
            .any(|c| c.state == Some(ContainerStateProto::CRunning as i32))
            .then_some(())
    });
    let beats = testkit::hotpath::metric(&metrics, "hotpath_rm_heartbeats_total");
    wait_for("two more heartbeats", 30, || {
        (testkit::hotpath::metric(&metrics, "hotpath_rm_heartbeats_total") >= beats + 2.0)
            .then_some(())
    });

    // `yarn applicationattempt -fail`.
    let acp_client = ipc::client::Client::new(
        client_addr,
        ipc::client::ClientConfig {
            protocol: APPLICATION_CLIENT_PROTOCOL.to_string(),
            protocol_version: 1,
            user: user.clone(),
            ..Default::default()
        },
    );
    let req = FailApplicationAttemptRequestProto {
        application_attempt_id: Some(hadoop_wire::token::identifier::attempt_to_proto(&at1)),
    };
    let resp = acp_client
        .call(
            acp::FAIL_APPLICATION_ATTEMPT,
            &prost::Message::encode_to_vec(&req),
        )
        .expect("failApplicationAttempt");
    let _: FailApplicationAttemptResponseProto =
        prost::Message::decode(resp.payload()).expect("its response");

    // The second attempt: the AM container of the first is killed, the worker is not, and
    // the registration hands it over.
    let at2 = AttemptId { app, attempt: 2 };
    let am2 = am_of(dir, at2, sched);
    wait_for("the first AM container killed", 30, || {
        (!alive(am1_pid)).then_some(())
    });
    assert!(alive(worker_pid), "the worker was killed with its attempt");
    let reg = am2.register("127.0.0.1", 0, "").unwrap();
    let prev: Vec<ContainerId> = reg
        .containers_from_previous_attempts
        .iter()
        .filter_map(|c| c.id.as_ref().and_then(container_from_proto))
        .collect();
    assert_eq!(prev, vec![worker_id], "{reg:?}");
    assert_eq!(reg.nm_tokens_from_previous_attempts.len(), 1, "{reg:?}");
    let t2 = bytes(
        reg.nm_tokens_from_previous_attempts[0]
            .token
            .as_ref()
            .unwrap(),
    );
    assert_ne!(t2.identifier, nm_token.identifier, "a token of attempt 2");
    // The new NMToken works on the agent: the worker's status, then its stop.
    let cm2 = ContainerManager::new(&conf::Configuration::new(), &retry);
    let s = cm2.statuses(&node_addr, &t2, &[worker_id]).unwrap();
    assert_eq!(
        s.statuses.first().and_then(|c| c.state),
        Some(ContainerStateProto::CRunning as i32),
        "{:?}",
        s.failed
    );
    let stopped = cm2.stop(&node_addr, &t2, &[worker_id]).unwrap();
    assert_eq!(stopped.succeeded, vec![worker_id], "{:?}", stopped.failed);
    wait_for("the worker gone", 30, || (!alive(worker_pid)).then_some(()));
    // Its completion goes to the second attempt.
    let mut rid = 0;
    wait_for("the worker's completion at attempt 2", 30, || {
        let r = am2
            .allocate(&AllocateRequestProto {
                response_id: Some(rid),
                ..Default::default()
            })
            .unwrap();
        rid = r.response_id.unwrap_or(0);
        r.completed_container_statuses
            .iter()
            .any(|s| s.container_id.as_ref().and_then(container_from_proto) == Some(worker_id))
            .then_some(())
    });
    assert!(am2
        .finish(&FinishApplicationMasterRequestProto {
            final_application_status: Some(FinalApplicationStatusProto::AppSucceeded as i32),
            ..Default::default()
        })
        .unwrap());
    wait_for("the application finished", 30, || {
        client
            .report(app)
            .ok()
            .filter(|r| r.state.is_final())
            .map(|_| ())
    });
}
