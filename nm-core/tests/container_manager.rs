//! The container manager's checks in Java's order, with tokens minted under real master keys,
//! and the container lifecycle it drives in the table (RUNNING at the accepted start, the kill
//! reason's status at the exit, the recently-stopped cache).

use std::sync::{Arc, RwLock};

use hadoop_wire::pb::hadoop::yarn::{
    ContainerLaunchContextProto, ContainerTokenIdentifierProto, GetContainerStatusesRequestProto,
    PriorityProto, ResourceProto, SignalContainerCommandProto, SignalContainerRequestProto,
    StartContainerRequestProto, StartContainersRequestProto, StopContainersRequestProto,
    StringBytesMapProto,
};
use hadoop_wire::token::identifier::{ContainerTokenIdentifier, NmTokenIdentifier, NodeId};
use hadoop_wire::token::secret::{MasterKey, MasterKeys, NmTokenSecretManager};
use hadoop_wire::token::TokenIdentifier;
use hadoop_wire::yarn::{exception, exit_status};
use nm_core::container_manager::{CallFailure, ContainerManager, KillReason, ManagerConfig, Stage};
use nm_core::ids::{AppId, AttemptId, ContainerId};
use nm_core::table::{ContainerState, ContainerTable};
use nm_core::wire::container_id_proto;

const NOW: i64 = 1_700_000_000_000;
const RM_ID: i64 = 1_699_999_000_000;
const HOST: &str = "127.0.0.1";
const PORT: i32 = 45454;

struct World {
    cm: ContainerManager,
    table: ContainerTable,
    container_keys: MasterKeys,
    nm_keys: MasterKeys,
}

fn app(n: i32) -> AppId {
    AppId {
        cluster_timestamp: RM_ID,
        id: n,
    }
}

fn attempt(n: i32) -> AttemptId {
    AttemptId {
        app: app(n),
        attempt: 1,
    }
}

fn cid(appn: i32, n: i64) -> ContainerId {
    ContainerId {
        app: app(appn),
        attempt: 1,
        id: n,
    }
}

fn world() -> World {
    let node = NodeId::new(HOST, PORT);
    let nm_tokens = Arc::new(RwLock::new(NmTokenSecretManager::default()));
    let mut cm = ContainerManager::new(
        ManagerConfig {
            node,
            aux_services: vec![],
            track_stopped_ms: 600_000,
        },
        nm_tokens,
    );
    let ck = MasterKey::new(7, vec![1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
    let nk = MasterKey::new(9, vec![8, 7, 6, 5, 4, 3, 2, 1]).unwrap();
    cm.set_keys(
        Some((ck.key_id, &ck.bytes)),
        Some((nk.key_id, &nk.bytes)),
        Some(RM_ID),
    );
    let mut container_keys = MasterKeys::new();
    container_keys.set_master_key(ck);
    let mut nm_keys = MasterKeys::new();
    nm_keys.set_master_key(nk);
    World {
        cm,
        table: ContainerTable::new(100),
        container_keys,
        nm_keys,
    }
}

fn nm_token(w: &World, a: AttemptId) -> Vec<u8> {
    let id = NmTokenIdentifier::new(
        Some(a),
        Some(&NodeId::new(HOST, PORT)),
        "alice",
        w.nm_keys.current().unwrap().key_id,
    );
    id.bytes().to_vec()
}

struct Ct {
    id: ContainerId,
    host: String,
    expiry: i64,
    key: i32,
    rm: i64,
    forge: bool,
}

fn ct(id: ContainerId) -> Ct {
    Ct {
        id,
        host: format!("{HOST}:{PORT}"),
        expiry: NOW + 600_000,
        key: 7,
        rm: RM_ID,
        forge: false,
    }
}

fn start_req(w: &World, c: &Ct, clc: ContainerLaunchContextProto) -> StartContainerRequestProto {
    let ident = ContainerTokenIdentifier::from_proto(ContainerTokenIdentifierProto {
        container_id: Some(container_id_proto(&c.id)),
        nm_host_addr: Some(c.host.clone()),
        app_submitter: Some("alice".into()),
        resource: Some(ResourceProto {
            memory: Some(1024),
            virtual_cores: Some(1),
            resource_value_map: vec![],
        }),
        expiry_time_stamp: Some(c.expiry),
        master_key_id: Some(c.key),
        rm_identifier: Some(c.rm),
        priority: Some(PriorityProto { priority: Some(0) }),
        creation_time: Some(NOW),
        ..Default::default()
    });
    let mut token = match w.container_keys.get(c.key) {
        Some(_) => w.container_keys.token(&ident, "127.0.0.1:45454").unwrap(),
        // An unknown key: sign with some other key.
        None => {
            let k = MasterKey::new(c.key, vec![9; 8]).unwrap();
            let pw = k.password(ident.bytes());
            hadoop_wire::token::Token::for_identifier(&ident, &pw, "127.0.0.1:45454")
        }
    };
    if c.forge {
        token.password[0] ^= 1;
    }
    StartContainerRequestProto {
        container_launch_context: Some(clc),
        container_token: Some(token.to_proto()),
    }
}

fn start(
    w: &mut World,
    nm: &[u8],
    user: &str,
    reqs: Vec<StartContainerRequestProto>,
) -> Result<nm_core::container_manager::StartOutcome, CallFailure> {
    w.cm.start_containers(
        Some(nm),
        Some(user),
        StartContainersRequestProto {
            start_container_request: reqs,
        },
        NOW,
        &mut w.table,
    )
}

fn failure_of(o: &nm_core::container_manager::StartOutcome) -> (String, String) {
    let e = o.response.failed_requests[0].exception.as_ref().unwrap();
    (e.class_name.clone().unwrap(), e.message.clone().unwrap())
}

#[test]
fn an_accepted_start_is_running_at_once_and_orders_a_launch() {
    let mut w = world();
    let nm = nm_token(&w, attempt(1));
    let c = cid(1, 1);
    let r = start_req(
        &w,
        &ct(c),
        ContainerLaunchContextProto {
            command: vec!["true".into()],
            ..Default::default()
        },
    );
    let o = start(&mut w, &nm, &attempt(1).to_string(), vec![r]).unwrap();
    assert_eq!(o.response.succeeded_requests.len(), 1);
    assert!(o.response.failed_requests.is_empty());
    assert_eq!(o.launches.len(), 1);
    let l = &o.launches[0];
    assert_eq!(
        (l.id, l.user.as_str(), l.resource.memory_mb),
        (c, "alice", 1024)
    );
    assert_eq!(l.context.command, vec!["true".to_string()]);
    assert_eq!(w.table.get(&c).unwrap().state, ContainerState::Running);
    assert_eq!(w.cm.stage(&c), Some(Stage::Starting));
    // what a re-registration after RESYNC reports from the token (here: its proto defaults)
    let f = w.cm.token_fields(&c).expect("token fields kept");
    assert_eq!(
        (
            f.version,
            f.execution_type,
            f.allocation_request_id,
            f.allocation_tags.len(),
            f.node_label_expression.as_str()
        ),
        (0, None, -1, 0, "")
    );
}

#[test]
fn whole_call_failures_name_java_classes() {
    let mut w = world();
    let nm = nm_token(&w, attempt(1));
    let good = start_req(&w, &ct(cid(1, 1)), Default::default());
    // No NMToken on the connection.
    let e =
        w.cm.start_containers(
            None,
            Some("x"),
            StartContainersRequestProto::default(),
            NOW,
            &mut w.table,
        )
        .unwrap_err();
    assert_eq!(
        (e.class, e.message.as_str()),
        (exception::YARN, "Invalid NMToken")
    );
    // The connection's user is not the NMToken's attempt.
    let e = start(&mut w, &nm, "appattempt_1_0001_000009", vec![good.clone()]).unwrap_err();
    assert_eq!(e.class, exception::YARN);
    assert!(
        e.message
            .starts_with("Expected applicationAttemptId: appattempt_1_0001_000009Found: "),
        "{}",
        e.message
    );
    // No container token.
    let e = start(
        &mut w,
        &nm,
        &attempt(1).to_string(),
        vec![StartContainerRequestProto::default()],
    )
    .unwrap_err();
    assert_eq!(e.message, "Invalid ContainerToken");
    // A container token for another node.
    let mut other = ct(cid(1, 2));
    other.host = "10.0.0.9:45454".into();
    let r = start_req(&w, &other, Default::default());
    let e = start(&mut w, &nm, &attempt(1).to_string(), vec![r]).unwrap_err();
    assert_eq!(e.class, exception::INVALID_TOKEN);
    assert!(e.message.contains("is not valid for current Node manager. Expected : 127.0.0.1:45454 Found : 10.0.0.9:45454"), "{}", e.message);
    // A key the RM never gave us.
    let mut unknown = ct(cid(1, 3));
    unknown.key = 99;
    let r = start_req(&w, &unknown, Default::default());
    let e = start(&mut w, &nm, &attempt(1).to_string(), vec![r]).unwrap_err();
    assert!(
        e.message
            .ends_with("seems to have an illegally generated token."),
        "{}",
        e.message
    );
    // A forged password.
    let mut forged = ct(cid(1, 4));
    forged.forge = true;
    let r = start_req(&w, &forged, Default::default());
    let e = start(&mut w, &nm, &attempt(1).to_string(), vec![r]).unwrap_err();
    assert_eq!(
        e.message,
        "Invalid container token used for starting container on : 127.0.0.1:45454"
    );
    assert!(w.table.is_empty(), "nothing was started");
}

#[test]
fn per_container_failures_go_to_failed_requests() {
    let mut w = world();
    let nm = nm_token(&w, attempt(1));
    let user = attempt(1).to_string();
    // Another application's container.
    let r = start_req(&w, &ct(cid(2, 1)), Default::default());
    let o = start(&mut w, &nm, &user, vec![r]).unwrap();
    let (class, msg) = failure_of(&o);
    assert_eq!(class, exception::YARN);
    assert!(
        msg.contains("NMToken for application attempt : appattempt_"),
        "{msg}"
    );
    // Expired.
    let mut old = ct(cid(1, 2));
    old.expiry = NOW - 1;
    let r = start_req(&w, &old, Default::default());
    let o = start(&mut w, &nm, &user, vec![r]).unwrap();
    assert!(failure_of(&o)
        .1
        .contains("This token is expired. current time is"));
    // From a previous RM.
    let mut prev = ct(cid(1, 3));
    prev.rm = RM_ID - 5;
    let r = start_req(&w, &prev, Default::default());
    let o = start(&mut w, &nm, &user, vec![r]).unwrap();
    let (class, msg) = failure_of(&o);
    assert_eq!(class, exception::INVALID_CONTAINER);
    assert!(
        msg.ends_with("rejected as it is allocated by a previous RM"),
        "{msg}"
    );
    // An aux service the node does not run.
    let r = start_req(
        &w,
        &ct(cid(1, 4)),
        ContainerLaunchContextProto {
            service_data: vec![StringBytesMapProto {
                key: Some("mapreduce_shuffle".into()),
                value: Some(vec![]),
            }],
            ..Default::default()
        },
    );
    let o = start(&mut w, &nm, &user, vec![r]).unwrap();
    let (class, msg) = failure_of(&o);
    assert_eq!(class, exception::INVALID_AUX_SERVICE);
    assert_eq!(msg, "The auxService:mapreduce_shuffle does not exist");
    // One good and one bad in the same call: the good one starts.
    let good = start_req(&w, &ct(cid(1, 5)), Default::default());
    let bad = start_req(&w, &ct(cid(2, 5)), Default::default());
    let o = start(&mut w, &nm, &user, vec![bad, good]).unwrap();
    assert_eq!(
        (
            o.response.succeeded_requests.len(),
            o.response.failed_requests.len()
        ),
        (1, 1)
    );
    assert_eq!(w.table.len(), 1);
}

#[test]
fn a_replayed_start_is_refused() {
    let mut w = world();
    let nm = nm_token(&w, attempt(1));
    let user = attempt(1).to_string();
    let r = start_req(&w, &ct(cid(1, 1)), Default::default());
    let o = start(&mut w, &nm, &user, vec![r.clone()]).unwrap();
    assert_eq!(o.launches.len(), 1);
    let o = start(&mut w, &nm, &user, vec![r]).unwrap();
    assert!(o.launches.is_empty());
    assert!(
        failure_of(&o)
            .1
            .contains("Attempt to relaunch the same container with id"),
        "{:?}",
        failure_of(&o)
    );
}

#[test]
fn stop_kills_with_minus_105_and_finished_containers_stop_quietly() {
    let mut w = world();
    let nm = nm_token(&w, attempt(1));
    let user = attempt(1).to_string();
    let c = cid(1, 1);
    let r = start_req(&w, &ct(c), Default::default());
    start(&mut w, &nm, &user, vec![r]).unwrap();
    w.cm.launched(&c);
    let stop = StopContainersRequestProto {
        container_id: vec![container_id_proto(&c)],
    };
    let o =
        w.cm.stop_containers(Some(&nm), &stop, NOW, &mut w.table)
            .unwrap();
    assert_eq!(o.kills, vec![(c, KillReason::ByAppMaster)]);
    assert_eq!(o.response.succeeded_requests.len(), 1);
    // The process dies of SIGTERM (143); the kill reason's status wins.
    let kill = w.cm.kill_reason(&c);
    let class = nm_core::launch::classify_exit(exit_status::TERMINATED, kill.as_ref());
    assert!(w.cm.exited(
        &c,
        class.exit_status,
        &class.diagnostics_at(0),
        &mut w.table
    ));
    let t = w.table.get(&c).unwrap();
    assert_eq!(
        (t.state, t.exit_status),
        (ContainerState::Complete, exit_status::KILLED_BY_APPMASTER)
    );
    assert!(t
        .diagnostics
        .starts_with("[1970-01-01 00:00:00.000]Container killed by the ApplicationMaster.\n"));
    // Stopping it again succeeds with nothing to kill.
    let o =
        w.cm.stop_containers(Some(&nm), &stop, NOW, &mut w.table)
            .unwrap();
    assert!(o.kills.is_empty());
    assert_eq!(o.response.succeeded_requests.len(), 1);
    // Status of the completed container.
    let s =
        w.cm.get_statuses(
            Some(&nm),
            &GetContainerStatusesRequestProto {
                container_id: vec![container_id_proto(&c)],
            },
            NOW,
            &w.table,
        )
        .unwrap();
    assert_eq!(
        s.status[0].exit_status,
        Some(exit_status::KILLED_BY_APPMASTER)
    );
    // Once the RM lets it go, it is "recently stopped": stop succeeds, status fails. Even
    // before the manager's next sync with the table, the status query says so.
    let mut gone = ContainerTable::new(100);
    let s =
        w.cm.get_statuses(
            Some(&nm),
            &GetContainerStatusesRequestProto {
                container_id: vec![container_id_proto(&c)],
            },
            NOW,
            &gone,
        )
        .unwrap();
    assert!(s.failed_requests[0]
        .exception
        .as_ref()
        .unwrap()
        .message
        .as_deref()
        .unwrap()
        .ends_with("was recently stopped on node manager."));
    w.cm.sync_with_table(&gone, NOW);
    assert_eq!(w.cm.stage(&c), None);
    let o =
        w.cm.stop_containers(Some(&nm), &stop, NOW + 1, &mut gone)
            .unwrap();
    assert_eq!(o.response.succeeded_requests.len(), 1);
    let s =
        w.cm.get_statuses(
            Some(&nm),
            &GetContainerStatusesRequestProto {
                container_id: vec![container_id_proto(&c)],
            },
            NOW + 1,
            &gone,
        )
        .unwrap();
    assert!(s.failed_requests[0]
        .exception
        .as_ref()
        .unwrap()
        .message
        .as_deref()
        .unwrap()
        .ends_with("was recently stopped on node manager."));
    // After the tracking time it is unknown.
    w.cm.sync_with_table(&gone, NOW + 600_001);
    let o =
        w.cm.stop_containers(Some(&nm), &stop, NOW + 600_001, &mut gone)
            .unwrap();
    assert!(o.response.failed_requests[0]
        .exception
        .as_ref()
        .unwrap()
        .message
        .as_deref()
        .unwrap()
        .ends_with("is not handled by this NodeManager"));
}

#[test]
fn another_applications_token_cannot_stop_or_read_a_container() {
    let mut w = world();
    let user = attempt(1).to_string();
    let nm1 = nm_token(&w, attempt(1));
    let c = cid(1, 1);
    let r = start_req(&w, &ct(c), Default::default());
    start(&mut w, &nm1, &user, vec![r]).unwrap();
    let nm2 = nm_token(&w, attempt(2));
    let stop = StopContainersRequestProto {
        container_id: vec![container_id_proto(&c)],
    };
    let o =
        w.cm.stop_containers(Some(&nm2), &stop, NOW, &mut w.table)
            .unwrap();
    assert!(o.kills.is_empty());
    let m = o.response.failed_requests[0]
        .exception
        .as_ref()
        .unwrap()
        .message
        .clone()
        .unwrap();
    assert!(
        m.ends_with(&format!(
            "attempted to stop non-application container : {c}"
        )),
        "{m}"
    );
    let s =
        w.cm.get_statuses(
            Some(&nm2),
            &GetContainerStatusesRequestProto {
                container_id: vec![container_id_proto(&c)],
            },
            NOW,
            &w.table,
        )
        .unwrap();
    assert!(s.status.is_empty());
    assert_eq!(s.failed_requests.len(), 1);
}

/// The existence oracle of issue 35 is closed: another application's caller gets the same
/// authorization error (Java's text) for a container that runs here and for a made-up id,
/// for stop, status and signal (signal is checked at all only here: Java lets any NMToken
/// holder signal any container).
#[test]
fn another_applications_caller_cannot_tell_real_from_made_up_containers() {
    let mut w = world();
    let user = attempt(1).to_string();
    let nm1 = nm_token(&w, attempt(1));
    let real = cid(1, 1);
    let r = start_req(&w, &ct(real), Default::default());
    start(&mut w, &nm1, &user, vec![r]).unwrap();
    let made_up = cid(1, 77);
    let nm2 = nm_token(&w, attempt(2));
    let message = |e: &hadoop_wire::pb::hadoop::yarn::ContainerExceptionMapProto| {
        e.exception.as_ref().unwrap().message.clone().unwrap()
    };
    for c in [real, made_up] {
        let stop = StopContainersRequestProto {
            container_id: vec![container_id_proto(&c)],
        };
        let o =
            w.cm.stop_containers(Some(&nm2), &stop, NOW, &mut w.table)
                .unwrap();
        assert!(o.kills.is_empty());
        assert_eq!(
            message(&o.response.failed_requests[0]),
            format!(
                "{} attempted to stop non-application container : {c}",
                attempt(2)
            )
        );
        let s =
            w.cm.get_statuses(
                Some(&nm2),
                &GetContainerStatusesRequestProto {
                    container_id: vec![container_id_proto(&c)],
                },
                NOW,
                &w.table,
            )
            .unwrap();
        assert_eq!(
            message(&s.failed_requests[0]),
            format!(
                "{} attempted to get status for non-application container : {c}",
                attempt(2)
            )
        );
        let sig = SignalContainerRequestProto {
            container_id: container_id_proto(&c),
            command: SignalContainerCommandProto::GracefulShutdown as i32,
        };
        let e = ContainerManager::authorize_signal(Some(&nm2), &sig).unwrap_err();
        assert_eq!(e.class, exception::YARN);
        assert_eq!(
            e.message,
            format!(
                "{} attempted to signal non-application container : {c}",
                attempt(2)
            )
        );
        // The owner may signal (and is told nothing new about a made-up id either).
        ContainerManager::authorize_signal(Some(&nm1), &sig).unwrap();
    }
    // The owner still gets Java's "not handled" for its own made-up id.
    let o =
        w.cm.stop_containers(
            Some(&nm1),
            &StopContainersRequestProto {
                container_id: vec![container_id_proto(&made_up)],
            },
            NOW,
            &mut w.table,
        )
        .unwrap();
    assert!(message(&o.response.failed_requests[0]).ends_with("is not handled by this NodeManager"));
}

#[test]
fn a_kill_before_launch_completes_with_the_reason() {
    let mut w = world();
    let nm = nm_token(&w, attempt(1));
    let c = cid(1, 1);
    let r = start_req(&w, &ct(c), Default::default());
    start(&mut w, &nm, &attempt(1).to_string(), vec![r]).unwrap();
    assert_eq!(
        w.cm.cleanup(&c, KillReason::AfterAppCompletion),
        Some(KillReason::AfterAppCompletion)
    );
    // A second reason does not replace the first.
    assert_eq!(
        w.cm.request_kill(&c, KillReason::ByAppMaster),
        Some(KillReason::AfterAppCompletion)
    );
    let k = w.cm.kill_reason(&c).unwrap();
    w.cm.exited(&c, k.exit_status(), k.diagnostics(), &mut w.table);
    assert_eq!(
        w.table.get(&c).unwrap().exit_status,
        exit_status::KILLED_AFTER_APP_COMPLETION
    );
    assert_eq!(w.cm.request_kill(&c, KillReason::ByAppMaster), None);
}

#[global_allocator]
static GLOBAL: alloc_counter::Counting = alloc_counter::Counting;

#[test]
fn the_key_feed_after_every_heartbeat_allocates_nothing_while_keys_stay() {
    let mut w = world();
    let ck = w.container_keys.current().unwrap().clone();
    let nk = w.nm_keys.current().unwrap().clone();
    let (_, c) = alloc_counter::thread(|| {
        for _ in 0..100 {
            w.cm.set_keys(
                Some((ck.key_id, &ck.bytes)),
                Some((nk.key_id, &nk.bytes)),
                Some(RM_ID),
            );
        }
    });
    assert_eq!(c.allocs, 0, "{c:?}");
    // A new key is taken (and the old one kept as previous).
    w.cm.set_keys(Some((8, &[3; 8])), None, Some(RM_ID));
    let (keys, _) = w.cm.master_keys();
    assert_eq!(keys.current().map(|k| k.key_id), Some(8));
    assert_eq!(keys.previous().map(|k| k.key_id), Some(7));
}

#[test]
fn rm_signals_map_to_javas_signals_and_only_a_launched_container_gets_one() {
    use hadoop_wire::pb::hadoop::yarn::SignalContainerCommandProto as Cmd;
    use nm_core::container_manager::{Signal, SignalTarget};
    for (cmd, sig, num, name, cname) in [
        (
            Cmd::OutputThreadDump,
            Signal::Quit,
            3,
            "SIGQUIT",
            "OUTPUT_THREAD_DUMP",
        ),
        (
            Cmd::GracefulShutdown,
            Signal::Term,
            15,
            "SIGTERM",
            "GRACEFUL_SHUTDOWN",
        ),
        (
            Cmd::ForcefulShutdown,
            Signal::Kill,
            9,
            "SIGKILL",
            "FORCEFUL_SHUTDOWN",
        ),
    ] {
        assert_eq!(Signal::from_command(cmd as i32), Some(sig));
        assert_eq!(
            (sig.number(), sig.name(), sig.command_name()),
            (num, name, cname)
        );
    }
    assert_eq!(Signal::from_command(0), None);
    assert_eq!(Signal::from_command(4), None);

    let mut w = world();
    let nm = nm_token(&w, attempt(1));
    let user = attempt(1).to_string();
    let c = cid(1, 1);
    let term = Cmd::GracefulShutdown as i32;
    // never heard of: "no longer exists"
    assert_eq!(w.cm.signal_target(c, term), SignalTarget::Unknown(c));
    let r = start_req(&w, &ct(c), Default::default());
    start(&mut w, &nm, &user, vec![r]).unwrap();
    // accepted, no process yet: "not running, nothing to signal"
    assert_eq!(
        w.cm.signal_target(c, term),
        SignalTarget::NotRunning(c, Signal::Term)
    );
    w.cm.launched(&c);
    assert_eq!(
        w.cm.signal_target(c, term),
        SignalTarget::Send(c, Signal::Term)
    );
    assert_eq!(w.cm.signal_target(c, 7), SignalTarget::BadCommand(c, 7));
    // exited: not running any more; the exit code is its own (143), not a kill's status
    assert!(w.cm.exited(&c, 143, "", &mut w.table));
    assert_eq!(
        w.cm.signal_target(c, Cmd::ForcefulShutdown as i32),
        SignalTarget::NotRunning(c, Signal::Kill)
    );
    assert_eq!(w.table.get(&c).unwrap().exit_status, 143);
}
