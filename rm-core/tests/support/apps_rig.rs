//! A running `RmService` with applications, driven in-process: simulated NodeManagers that
//! heartbeat over TCP (the real ring thread, shard and completion log), and ApplicationMasters
//! that call [`Apps`](rm_core::apps::Apps) through the RM's own handle. AM containers are
//! taken from the scheduler's launch queue inside the submitting call and marked launched
//! there (nothing here answers ContainerManagementProtocol); every other container is
//! allocated by the RM and reported RUNNING, then COMPLETE, by the node it was placed on.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use hadoop_wire::pb::hadoop::yarn::{
    AllocateRequestProto, AllocateResponseProto, ApplicationSubmissionContextProto,
    ContainerStateProto, ExecutionTypeProto, NodeHeartbeatResponseProto, PriorityProto,
    RegisterApplicationMasterRequestProto, ResourceRequestProto,
};
use hadoop_wire::token::identifier::container_from_proto;
use hadoop_wire::token::{AmrmTokenIdentifier, TokenIdentifier};
use hadoop_wire::yarn::ids::{AttemptId, ContainerId};
use hadoop_wire::yarn::NODE_HEARTBEAT;
use ipc::client::Client;
use rm_core::app_service::AppsRt;
use rm_core::apps::{AppsConfig, Res};
use rm_core::ids::{AppKey, ContainerKey, NodeKey};
use rm_core::service::{AppsSecurity, RmService};
use testkit::heartbeat::{container_status, heartbeat_request, node_status, register_request};

/// The shard's key of a scheduler container id.
pub fn key_of(c: ContainerId) -> ContainerKey {
    ContainerKey {
        app: AppKey {
            cluster_timestamp: c.app.cluster_timestamp,
            id: c.app.id,
        },
        attempt: c.attempt,
        id: c.id,
    }
}

/// A simulated NodeManager.
pub struct SimNode {
    pub key: NodeKey,
    /// The last responseId the RM sent.
    pub rid: i32,
    /// Containers RUNNING here, in the order they are reported.
    pub running: Vec<ContainerId>,
    /// Completed containers (with their exit status), reported until the RM acknowledges.
    pub done: Vec<(ContainerId, i32)>,
    pub healthy: bool,
}

impl SimNode {
    /// This node's next heartbeat request.
    pub fn request(&self, keys: (i32, i32)) -> Vec<u8> {
        let mut statuses: Vec<_> = self
            .running
            .iter()
            .map(|&c| {
                container_status(
                    key_of(c),
                    ContainerStateProto::CRunning,
                    -1000,
                    ExecutionTypeProto::Guaranteed,
                )
            })
            .collect();
        statuses.extend(self.done.iter().map(|&(c, exit)| {
            container_status(
                key_of(c),
                ContainerStateProto::CComplete,
                exit,
                ExecutionTypeProto::Guaranteed,
            )
        }));
        heartbeat_request(
            &node_status(&self.key, statuses, self.healthy),
            self.rid,
            Some(keys),
        )
        .0
    }
}

/// A simulated ApplicationMaster: its attempt, its key id, its last allocate responseId.
pub struct SimAm {
    pub attempt: AttemptId,
    pub key_id: i32,
    pub rid: i32,
}

/// The RM and its simulated nodes.
pub struct Rig {
    pub rm: RmService,
    pub rt: AppsRt,
    pub nm: Client,
    pub nodes: Vec<SimNode>,
    _dir: tempfile::TempDir,
}

impl Rig {
    /// An RM with `n` nodes of `mem` MB and `vcores` each, registered.
    pub fn start(n: usize, mem: i64, vcores: i32) -> Rig {
        let (rm, dir) =
            super::start_rm_with(|_| {}, AppsConfig::default(), AppsSecurity::default());
        let rt = rm.apps().unwrap().clone();
        let nm = super::tracker_client(&rm);
        let mut rig = Rig {
            rm,
            rt,
            nm,
            nodes: Vec::new(),
            _dir: dir,
        };
        for i in 0..n {
            let key = NodeKey::new("127.0.0.1", 41_000 + i as i32);
            rig.nm
                .call(
                    hadoop_wire::yarn::REGISTER_NODE_MANAGER,
                    &register_request(&key, mem, vcores, "3.5.0"),
                )
                .expect("register");
            rig.nodes.push(SimNode {
                key,
                rid: 0,
                running: Vec::new(),
                done: Vec::new(),
                healthy: true,
            });
        }
        rig
    }

    /// The tracker's current container and NM key ids (what a NodeManager last heard).
    pub fn keys(&self) -> (i32, i32) {
        let t = self.rm.tracker().lock().unwrap();
        (
            t.container_keys().current().key_id,
            t.nm_keys().current().key_id,
        )
    }

    fn node_index(&self, host: &str, port: i32) -> usize {
        self.nodes
            .iter()
            .position(|n| &*n.key.host == host && n.key.port == port)
            .expect("a simulated node")
    }

    /// Sends node `i`'s heartbeat; applies the acknowledgements. Returns the response.
    pub fn heartbeat(&mut self, i: usize) -> NodeHeartbeatResponseProto {
        let req = self.nodes[i].request(self.keys());
        let resp: NodeHeartbeatResponseProto = self
            .nm
            .call(NODE_HEARTBEAT, &req)
            .expect("heartbeat")
            .decode()
            .expect("decodes");
        let n = &mut self.nodes[i];
        n.rid = resp.response_id.unwrap_or(n.rid);
        let acked: Vec<ContainerId> = resp
            .containers_to_be_removed_from_nm
            .iter()
            .filter_map(container_from_proto)
            .collect();
        n.done.retain(|(c, _)| !acked.contains(c));
        resp
    }

    /// Heartbeats every node once.
    pub fn heartbeat_all(&mut self) {
        for i in 0..self.nodes.len() {
            self.heartbeat(i);
        }
    }

    /// Submits an application whose AM container (`am_mb`) is placed at once, launched and
    /// registered; the AM container runs on its node.
    pub fn running_app(&mut self, user: &str, am_mb: i64) -> SimAm {
        let (launch, key_id) = self.rt.with(|a| {
            let (id, _) = a.new_application().unwrap();
            let ctx = ApplicationSubmissionContextProto {
                application_id: Some(id.to_proto()),
                am_container_spec: Some(Default::default()),
                resource: Some(Res::new(am_mb, 1).to_proto()),
                ..Default::default()
            };
            a.submit(ctx, user, 1).unwrap();
            let mut l = a.take_launches();
            assert_eq!(l.len(), 1, "the AM container is placed at submission");
            let l = l.remove(0);
            a.am_launched(l.attempt, 1);
            a.register_am(
                l.attempt,
                &RegisterApplicationMasterRequestProto::default(),
                1,
            )
            .unwrap();
            let key_id = AmrmTokenIdentifier::parse(&l.amrm_token.identifier)
                .unwrap()
                .key_id();
            (l, key_id)
        });
        let i = self.node_index(&launch.node.host, launch.node.port);
        self.nodes[i].running.push(launch.container);
        SimAm {
            attempt: launch.attempt,
            key_id,
            rid: 0,
        }
    }

    /// One `allocate` of `am` asking for `ask` more containers of `mb` at priority 1 (0: no
    /// asks), releasing none. New containers start RUNNING on their nodes.
    pub fn allocate(&mut self, am: &mut SimAm, ask: i32, mb: i64) -> AllocateResponseProto {
        let req = AllocateRequestProto {
            ask: if ask > 0 {
                vec![ResourceRequestProto {
                    priority: Some(PriorityProto { priority: Some(1) }),
                    resource_name: Some("*".into()),
                    capability: Some(Res::new(mb, 1).to_proto()),
                    num_containers: Some(ask),
                    relax_locality: Some(true),
                    ..Default::default()
                }]
            } else {
                Vec::new()
            },
            response_id: Some(am.rid),
            ..Default::default()
        };
        let tracker = self.rm.tracker().clone();
        let (a, k) = (am.attempt, am.key_id);
        let resp = self
            .rt
            .with(|x| {
                x.allocate_with(
                    a,
                    k,
                    &req,
                    || rm_core::app_service::keys(&tracker),
                    rm_core::dispatcher::wall_ms(),
                )
            })
            .expect("allocate");
        am.rid = resp.response_id.unwrap_or(am.rid);
        for c in &resp.allocated_containers {
            let id = c.id.as_ref().and_then(container_from_proto).unwrap();
            let nid = c.node_id.as_ref().unwrap();
            let i = self.node_index(nid.host.as_deref().unwrap(), nid.port.unwrap());
            self.nodes[i].running.push(id);
        }
        (*resp).clone()
    }

    /// Completes `c` on its node with `exit` (reported from the next heartbeat on).
    pub fn complete(&mut self, c: ContainerId, exit: i32) {
        for n in &mut self.nodes {
            if let Some(p) = n.running.iter().position(|&x| x == c) {
                n.running.remove(p);
                n.done.push((c, exit));
                return;
            }
        }
        panic!("{c} runs nowhere");
    }

    /// Containers running on the nodes (AM containers included).
    pub fn running(&self) -> HashMap<ContainerId, usize> {
        let mut m = HashMap::new();
        for (i, n) in self.nodes.iter().enumerate() {
            for &c in &n.running {
                m.insert(c, i);
            }
        }
        m
    }
}

/// Polls `f` until it returns true, for at most `secs` seconds.
pub fn wait_until(what: &str, secs: u64, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}
