//! `signalToContainer` through the RM, end to end with no JVM: rm-core's client protocol queues
//! the signal, the node's next heartbeat response carries it (`containers_to_signal`), and the
//! agent's real heartbeat handling signals the container's **process group**: the AM
//! container's shell and a child of it both see SIGQUIT (OUTPUT_THREAD_DUMP, the container
//! keeps running) and then SIGTERM (GRACEFUL_SHUTDOWN), of which the container dies with its
//! real exit code, 143 (not a kill status), Java's diagnostics lines in its status.

use std::fs;
use std::time::Duration;

use agent::demo::{Cluster, DemoConfig};
use hadoop_wire::pb::hadoop::yarn::{
    ApplicationSubmissionContextProto, ContainerLaunchContextProto, GetNewApplicationRequestProto,
    GetNewApplicationResponseProto, ResourceProto, SignalContainerCommandProto as Cmd,
    SignalContainerRequestProto, SignalContainerResponseProto, SubmitApplicationRequestProto,
    SubmitApplicationResponseProto,
};
use hadoop_wire::yarn::acp;
use hadoop_wire::yarn::ids::{AppId, ContainerId};
use hadoop_wire::yarn::{APPLICATION_CLIENT_PROTOCOL, APPLICATION_CLIENT_VERSION};
use ipc::client::{Client, ClientConfig};
use nm_core::table::ContainerState;

use crate::cmp::{call, remote, wait_for};

fn whoami() -> String {
    std::env::var("USER").unwrap_or_else(|_| "root".into())
}

fn signal(client: &Client, c: ContainerId, cmd: Cmd) -> Result<(), (String, String)> {
    call::<SignalContainerResponseProto>(
        client,
        acp::SIGNAL_TO_CONTAINER,
        &SignalContainerRequestProto {
            container_id: c.to_proto(),
            command: cmd as i32,
        },
    )
    .map(|_| ())
    .map_err(remote)
}

#[test]
fn rm_signals_reach_the_process_group_and_sigterm_exits_143() {
    let cluster = Cluster::start(DemoConfig {
        agents: 1,
        apps: true,
        heartbeat_ms: 200,
        ..DemoConfig::default()
    })
    .unwrap();
    let rm = cluster.rm().unwrap();
    let user = whoami();
    let client = Client::new(
        rm.client_addr().unwrap(),
        ClientConfig {
            protocol: APPLICATION_CLIENT_PROTOCOL.into(),
            protocol_version: APPLICATION_CLIENT_VERSION,
            user: user.clone(),
            call_timeout: Duration::from_secs(10),
            max_connect_attempts: 1,
            ..ClientConfig::default()
        },
    );
    let probe = tempfile::tempdir().unwrap();
    let p = probe.path().display();
    // The AM container: its shell and a child in its process group note what they receive.
    // (The command lands in `exec /bin/bash -c "..."`: no double quotes.) SIGTERM is noted,
    // then taken as the default would: the shell dies of it.
    let command = format!(
        "(trap 'echo CHILD-QUIT >> {p}/signals' QUIT; trap 'echo CHILD-TERM >> {p}/signals; exit 0' TERM; \
           while true; do sleep 0.1; done) & \
         trap 'echo QUIT >> {p}/signals' QUIT; \
         trap 'echo TERM >> {p}/signals; trap - TERM; kill -TERM $$' TERM; \
         touch {p}/ready; while true; do sleep 0.1; done"
    );
    let n: GetNewApplicationResponseProto = call(
        &client,
        acp::GET_NEW_APPLICATION,
        &GetNewApplicationRequestProto {},
    )
    .unwrap();
    let a = n.application_id.unwrap();
    let app = AppId::new(a.cluster_timestamp(), a.id());
    let _: SubmitApplicationResponseProto = call(
        &client,
        acp::SUBMIT_APPLICATION,
        &SubmitApplicationRequestProto {
            application_submission_context: Some(ApplicationSubmissionContextProto {
                application_id: Some(app.to_proto()),
                application_name: Some("signals".into()),
                am_container_spec: Some(ContainerLaunchContextProto {
                    command: vec![command],
                    ..Default::default()
                }),
                resource: Some(ResourceProto {
                    memory: Some(256),
                    virtual_cores: Some(1),
                    resource_value_map: Vec::new(),
                }),
                max_app_attempts: Some(1),
                ..Default::default()
            }),
        },
    )
    .unwrap();
    let am = ContainerId {
        app,
        attempt: 1,
        id: 1,
    };
    wait_for("the AM container runs", Duration::from_secs(30), || {
        probe.path().join("ready").exists()
    });
    let agent = &cluster.agents()[0];
    // A line of the probe file, whole.
    let seen = |what: &str| {
        fs::read_to_string(probe.path().join("signals")).is_ok_and(|s| s.lines().any(|l| l == what))
    };
    let diagnostics = || {
        agent
            .shared()
            .table
            .lock()
            .unwrap()
            .get(&am)
            .map(|c| (c.state, c.exit_status, c.diagnostics.clone()))
    };

    // A container the RM does not have: Java's refusal, nothing sent.
    let absent = ContainerId { id: 99, ..am };
    assert_eq!(
        signal(&client, absent, Cmd::GracefulShutdown).unwrap_err(),
        (
            "org.apache.hadoop.yarn.exceptions.YarnException".to_string(),
            format!("Trying to signal an absent container {absent}")
        )
    );

    // OUTPUT_THREAD_DUMP: SIGQUIT to the whole group; the container keeps running.
    signal(&client, am, Cmd::OutputThreadDump).unwrap();
    wait_for("SIGQUIT in the group", Duration::from_secs(20), || {
        seen("QUIT") && seen("CHILD-QUIT")
    });
    let (state, _, d) = diagnostics().unwrap();
    assert_eq!(state, ContainerState::Running);
    assert!(
        d.starts_with("Sent signal OUTPUT_THREAD_DUMP (SIGQUIT) to pid ")
            && d.contains(&format!(
                " as user {user} for container {am}, result=success\n"
            )),
        "{d}"
    );

    // GRACEFUL_SHUTDOWN: SIGTERM to the group; the shell dies of it: exit code 143, the
    // diagnostics lines first, no kill reason.
    signal(&client, am, Cmd::GracefulShutdown).unwrap();
    wait_for("the container exits", Duration::from_secs(30), || {
        diagnostics().is_some_and(|(s, _, _)| s == ContainerState::Complete)
    });
    assert!(seen("TERM") && seen("CHILD-TERM"));
    let (_, exit, d) = diagnostics().unwrap();
    assert_eq!(exit, 143, "{d}");
    assert!(
        d.starts_with("Sent signal OUTPUT_THREAD_DUMP (SIGQUIT) to pid "),
        "{d}"
    );
    assert!(
        d.contains("\nSent signal GRACEFUL_SHUTDOWN (SIGTERM) to pid "),
        "{d}"
    );
    // Java's text for a process that died of a signal (exit code 143), not a kill's status.
    assert!(d.contains("Exit code is 143"), "{d}");
    let lower = d.to_lowercase();
    assert!(
        !lower.contains("by the applicationmaster") && !lower.contains("by resourcemanager"),
        "{d}"
    );
    assert_eq!(
        agent
            .shared()
            .metrics
            .containers_to_signal
            .load(std::sync::atomic::Ordering::Relaxed),
        2
    );
    drop(cluster);
}
