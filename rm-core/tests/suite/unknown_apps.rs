//! Containers of applications the RM does not know (trap 2), over TCP, on an RM running
//! applications, as Java's `RMNodeImpl` / scheduler treat them: the application goes to
//! `applications_to_cleanup` on every heartbeat that reports it, the first RUNNING container
//! of it in a heartbeat goes to `containers_to_cleanup` once; at registration (recovery off)
//! the re-reported RUNNING containers count as launched and are not cleaned up one by one,
//! with recovery on every non-COMPLETE one is (`killOrphanContainerOnNode`). An application
//! the RM runs is never cleaned up.

use crate::support;

use std::time::Duration;

use hadoop_wire::pb::hadoop::yarn::{
    ContainerStateProto, ExecutionTypeProto, NmContainerStatusProto, NodeActionProto,
    NodeHeartbeatResponseProto, RegisterNodeManagerRequestProto, RegisterNodeManagerResponseProto,
};
use hadoop_wire::token::identifier::container_from_proto;
use ipc::client::Client;
use prost::Message;
use rm_core::apps::{AppsConfig, Res};
use rm_core::ids::{AppKey, ContainerKey, NodeKey};
use rm_core::service::RmService;
use testkit::heartbeat::{
    container_status, containers, heartbeat_request, node_status, register_request,
};

struct Nm {
    client: Client,
    node: NodeKey,
    rid: i32,
}

/// What one response asked the node to clean up.
#[derive(Debug, Default)]
struct Cleanups {
    apps: Vec<AppKey>,
    containers: Vec<ContainerKey>,
}

impl Nm {
    /// Registers with `apps` running and `statuses` re-reported.
    fn register(rm: &RmService, apps: &[AppKey], statuses: Vec<NmContainerStatusProto>) -> Nm {
        let client = support::tracker_client(rm);
        let node = NodeKey::new("127.0.0.1", 45454);
        // 4 GB: an application asking 8 GB for its AM is never placed here.
        let mut req =
            RegisterNodeManagerRequestProto::decode(&register_request(&node, 4096, 4, "3.5.0")[..])
                .unwrap();
        req.running_applications = apps.iter().map(|a| a.to_proto()).collect();
        req.container_statuses = statuses;
        let r: RegisterNodeManagerResponseProto = client
            .call("registerNodeManager", &req.encode_to_vec())
            .unwrap()
            .decode()
            .unwrap();
        assert_eq!(r.node_action(), NodeActionProto::Normal);
        // The shard applies the registration before the first heartbeat (one that came first
        // would stand in for the registration's statuses: see `rm_core::node`).
        std::thread::sleep(Duration::from_millis(50));
        Nm {
            client,
            node,
            rid: 0,
        }
    }

    /// One heartbeat with `running` RUNNING; what the response asks to clean up.
    fn beat(&mut self, running: &[ContainerKey]) -> Cleanups {
        let st = running
            .iter()
            .map(|k| {
                container_status(
                    *k,
                    ContainerStateProto::CRunning,
                    -1000,
                    ExecutionTypeProto::Guaranteed,
                )
            })
            .collect();
        let (req, _) = heartbeat_request(&node_status(&self.node, st, true), self.rid, None);
        let r: NodeHeartbeatResponseProto = self
            .client
            .call("nodeHeartbeat", &req)
            .unwrap()
            .decode()
            .unwrap();
        assert_eq!(r.node_action(), NodeActionProto::Normal);
        self.rid = r.response_id.unwrap();
        // the shard takes the status within its batch interval (1 ms)
        std::thread::sleep(Duration::from_millis(30));
        Cleanups {
            apps: r
                .applications_to_cleanup
                .iter()
                .map(|a| AppKey::new(a.cluster_timestamp(), a.id()))
                .collect(),
            containers: r
                .containers_to_cleanup
                .iter()
                .map(|c| container_from_proto(c).unwrap())
                .collect(),
        }
    }
}

fn nm_status(c: ContainerKey, state: ContainerStateProto) -> NmContainerStatusProto {
    NmContainerStatusProto {
        container_id: Some(c.to_proto()),
        container_state: Some(state as i32),
        resource: Some(Res::new(1024, 1).to_proto()),
        container_exit_status: Some(if state == ContainerStateProto::CComplete {
            0
        } else {
            -1000
        }),
        ..Default::default()
    }
}

/// Runs `beats` heartbeats reporting `running`; every response's cleanups.
fn run(nm: &mut Nm, running: &[ContainerKey], beats: usize) -> Vec<Cleanups> {
    (0..beats).map(|_| nm.beat(running)).collect()
}

fn all_containers(rs: &[Cleanups]) -> Vec<ContainerKey> {
    let mut v: Vec<_> = rs.iter().flat_map(|r| r.containers.clone()).collect();
    v.sort();
    v
}

#[test]
fn recovery_off_unknown_applications_are_cleaned_up_every_heartbeat_known_ones_never() {
    let (rm, _d) = support::start_rm_with(|_| {}, AppsConfig::default(), Default::default());
    // An application the RM runs (its AM waits: no node has 8 GB).
    let known = support::submit_direct(&rm, "alice", Res::new(8192, 1));
    let (u1, u2) = (containers(1, 2), containers(2, 2));
    // Registration: u1 runs there with two RUNNING containers, and so does `known`.
    let mut nm = Nm::register(
        &rm,
        &[u1[0].app, known],
        u1.iter()
            .map(|c| nm_status(*c, ContainerStateProto::CRunning))
            .collect(),
    );
    // Then u2 shows up with two containers too.
    let running: Vec<_> = u1.iter().chain(&u2).copied().collect();
    let rs = run(&mut nm, &running, 8);
    for (i, r) in rs.iter().enumerate() {
        assert!(!r.apps.contains(&known), "beat {i}: {r:?}");
    }
    // u1 from the registration on, u2 from the heartbeat after it first showed up: on every
    // heartbeat from then on.
    assert!(rs[0].apps.contains(&u1[0].app), "{:?}", rs[0]);
    for (i, r) in rs.iter().enumerate().skip(2) {
        assert!(r.apps.contains(&u1[0].app), "beat {i}: {r:?}");
        assert!(r.apps.contains(&u2[0].app), "beat {i}: {r:?}");
    }
    // Containers: u2's first, once. u1's came with the registration (launched there, as in
    // Java with recovery off); u2's second is skipped as Java skips an application's further
    // statuses in a heartbeat once it flagged the application.
    assert_eq!(all_containers(&rs), vec![u2[0]]);
    // The known application is still waiting, untouched.
    let state = rm.apps().unwrap().with(|a| a.app(known).map(|a| a.state));
    assert_eq!(state, Some(rm_core::apps::AppState::Accepted));

    // The node registers again while active (Java's reconnect): its re-reported containers
    // go through the heartbeat rules, so u3's first one is cleaned up.
    let u3 = containers(3, 2);
    let mut nm = Nm::register(
        &rm,
        &[u3[0].app],
        u3.iter()
            .map(|c| nm_status(*c, ContainerStateProto::CRunning))
            .collect(),
    );
    let rs = run(&mut nm, &u3, 4);
    assert_eq!(all_containers(&rs), vec![u3[0]]);
    assert!(
        rs.iter().skip(1).all(|r| r.apps.contains(&u3[0].app)),
        "{rs:?}"
    );
    rm.shutdown();
}

#[test]
fn recovery_on_a_registration_cleans_up_every_unfinished_container_of_an_unknown_application() {
    let (rm, _d) = support::start_rm_with(
        |c| c.recovery = true,
        AppsConfig::default(),
        Default::default(),
    );
    let u1 = containers(1, 3);
    let done = containers(3, 1)[0];
    let mut nm = Nm::register(
        &rm,
        &[u1[0].app],
        vec![
            nm_status(u1[0], ContainerStateProto::CRunning),
            nm_status(u1[1], ContainerStateProto::CRunning),
            nm_status(u1[2], ContainerStateProto::CNew),
            nm_status(done, ContainerStateProto::CComplete),
        ],
    );
    let rs = run(&mut nm, &u1[..2], 6);
    // Each unfinished one once (the completed one is not killed); none again later.
    assert_eq!(all_containers(&rs), u1.to_vec());
    assert!(rs[0].containers.len() == 3, "{:?}", rs[0]);
    for (i, r) in rs.iter().enumerate() {
        assert!(r.apps.contains(&u1[0].app), "beat {i}: {r:?}");
        assert!(!r.apps.contains(&done.app), "beat {i}: {r:?}");
    }
    rm.shutdown();
}
