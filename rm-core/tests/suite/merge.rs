//! The bounded-backlog merge changes nothing: random heartbeat sequences (containers that
//! start, finish, vanish and re-appear, in any order, GUARANTEED or OPPORTUNISTIC, healthy or
//! not, with re-registrations in between) applied one by one and applied with random merging
//! end in the same node state, the same completion log, and the same acknowledgements and
//! cleanups (per node, in order). Also: a shard's inbox never holds more than one entry per node.
//! With applications on (the RM's scheduler fed from the shard), the same completions reach
//! the scheduler, each once, however the heartbeats merged, registrations included.

use std::time::Duration;

use hadoop_wire::pb::hadoop::yarn::{
    ContainerStateProto, ContainerStatusProto, ExecutionTypeProto, NodeHealthStatusProto,
    NodeStatusProto,
};
use proptest::prelude::*;
use prost::Message;
use rm_core::completion_log::read_dir_records;
use rm_core::ids::{AppKey, ContainerKey, NodeKey};
use rm_core::mailbox::{Global, Mailbox};
use rm_core::node::{OutItem, ResetKind, SchedChange};
use rm_core::shard::Shard;

const NODES: u32 = 2;
const CONTAINERS: i64 = 10;
const FINISHED_APP: i32 = 2;

#[derive(Debug, Clone, Copy)]
enum Report {
    Absent,
    Running(bool),
    Complete(i32),
    New,
}

#[derive(Debug, Clone)]
enum Step {
    Heartbeat {
        node: u32,
        healthy: bool,
        statuses: Vec<(i64, Report)>,
    },
    Reregister(u32),
}

fn key(id: i64) -> ContainerKey {
    ContainerKey {
        app: AppKey {
            cluster_timestamp: 77,
            id: (id % 3) as i32 + 1,
        },
        attempt: 1,
        id,
    }
}

/// A container id belongs to one node (ids are unique in a cluster).
fn node_container(node: u32, id: i64) -> i64 {
    node as i64 * 1000 + id
}

fn report() -> impl Strategy<Value = Report> {
    prop_oneof![
        4 => Just(Report::Absent),
        5 => any::<bool>().prop_map(Report::Running),
        2 => prop_oneof![Just(0), Just(1), Just(-100)].prop_map(Report::Complete),
        1 => Just(Report::New),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        20 => (
            0..NODES,
            prop::bool::weighted(0.85),
            prop::collection::vec(report(), CONTAINERS as usize),
            any::<u64>(),
        )
            .prop_map(|(node, healthy, reports, seed)| {
                let mut statuses: Vec<(i64, Report)> = reports
                    .into_iter()
                    .enumerate()
                    .map(|(i, r)| (i as i64 + 1, r))
                    .filter(|(_, r)| !matches!(r, Report::Absent))
                    .collect();
                // A different order each time (a NodeManager's map order may change).
                let n = statuses.len();
                if n > 1 {
                    let mut s = seed;
                    for i in (1..n).rev() {
                        s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                        statuses.swap(i, (s >> 33) as usize % (i + 1));
                    }
                }
                Step::Heartbeat { node, healthy, statuses }
            }),
        1 => (0..NODES).prop_map(Step::Reregister),
    ]
}

fn encode(node: u32, rid: i32, healthy: bool, statuses: &[(i64, Report)]) -> Vec<u8> {
    NodeStatusProto {
        node_id: Some(NodeKey::new(&format!("10.0.0.{node}"), 8041).to_proto()),
        response_id: Some(rid),
        containers_statuses: statuses
            .iter()
            .map(|&(id, r)| {
                let (state, exit, exec) = match r {
                    Report::Running(g) => (
                        ContainerStateProto::CRunning,
                        -1000,
                        if g {
                            ExecutionTypeProto::Guaranteed
                        } else {
                            ExecutionTypeProto::Opportunistic
                        },
                    ),
                    Report::Complete(e) => (
                        ContainerStateProto::CComplete,
                        e,
                        ExecutionTypeProto::Guaranteed,
                    ),
                    Report::New | Report::Absent => (
                        ContainerStateProto::CNew,
                        -1000,
                        ExecutionTypeProto::Guaranteed,
                    ),
                };
                ContainerStatusProto {
                    container_id: Some(key(node_container(node, id)).to_proto()),
                    state: Some(state as i32),
                    diagnostics: Some(format!("exit {exit}")),
                    exit_status: Some(exit),
                    execution_type: Some(exec as i32),
                    ..Default::default()
                }
            })
            .collect(),
        node_health_status: Some(NodeHealthStatusProto {
            is_node_healthy: Some(healthy),
            health_report: Some(if healthy {
                String::new()
            } else {
                "disk full".into()
            }),
            last_health_report_time: Some(rid as i64),
        }),
        ..Default::default()
    }
    .encode_to_vec()
}

struct Run {
    shard: Shard,
    mailbox: Mailbox,
    dir: tempfile::TempDir,
    acks: Vec<(u32, ContainerKey)>,
    cleanups: Vec<(u32, OutItem)>,
    max_depth: usize,
}

impl Run {
    /// `apps`: the shard runs as with applications on: apps 1 and 3 are the RM's, unknown
    /// ones are cleaned up, and completions go to the scheduler.
    fn new(apps: bool) -> Run {
        let dir = tempfile::tempdir().unwrap();
        let (shard, _) = Shard::open(dir.path(), 0, 1, false).unwrap();
        let mut r = Run {
            shard,
            mailbox: Mailbox::new(usize::MAX),
            dir,
            acks: Vec::new(),
            cleanups: Vec::new(),
            max_depth: 0,
        };
        if apps {
            r.mailbox
                .push_global(Global::CleanUnknownApps { recovery: false });
            for id in [1, 3] {
                r.mailbox.push_global(Global::LiveApp(AppKey {
                    cluster_timestamp: 77,
                    id,
                }));
            }
        }
        for n in 0..NODES {
            let id = NodeKey::new(&format!("10.0.0.{n}"), 8041);
            r.register(n, Some(id));
        }
        r.mailbox.push_global(Global::FinishApp(AppKey {
            cluster_timestamp: 77,
            id: FINISHED_APP,
        }));
        r.drain();
        r
    }

    /// A registration as the tracker hands it over: the reset, then the registration's
    /// statuses (none here), which end it.
    fn register(&mut self, n: u32, id: Option<NodeKey>) {
        self.mailbox.push_reset(n, id, ResetKind::Registered, 0);
        let mut scratch = Vec::new();
        self.mailbox
            .push_registration_status(n, &encode(n, 0, true, &[]), 0, &mut scratch);
    }

    /// The completions handed to the scheduler so far, sorted (merging may change the order
    /// across nodes).
    fn completed_for_scheduler(&mut self) -> Vec<(ContainerKey, i32)> {
        let mut v = Vec::new();
        self.shard.take_sched(&mut v);
        let mut c: Vec<_> = v
            .into_iter()
            .filter_map(|ch| match ch {
                SchedChange::Completed {
                    container,
                    exit_status,
                    ..
                } => Some((container, exit_status)),
                _ => None,
            })
            .collect();
        c.sort();
        c
    }

    fn drain(&mut self) {
        let clock = || (1_000u64, 0u64);
        self.shard
            .run_once(&self.mailbox, Duration::ZERO, &clock)
            .unwrap();
        let mut out = Vec::new();
        self.mailbox.take_outbox(&mut out);
        for (n, item) in out {
            match item {
                OutItem::Ack(c) => self.acks.push((n, c)),
                other => self.cleanups.push((n, other)),
            }
        }
    }

    fn push(&mut self, step: &Step, rid: i32) {
        let mut scratch = Vec::new();
        match step {
            Step::Heartbeat {
                node,
                healthy,
                statuses,
            } => {
                self.mailbox.push_status(
                    *node,
                    &encode(*node, rid, *healthy, statuses),
                    0,
                    &mut scratch,
                );
            }
            Step::Reregister(n) => self.register(*n, None),
        }
        assert!(scratch.is_empty(), "nothing is published between drains");
        let depth = self
            .mailbox
            .counters
            .depth
            .load(std::sync::atomic::Ordering::Relaxed) as usize;
        self.max_depth = self.max_depth.max(depth);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn merged_equals_unmerged(
        steps in prop::collection::vec(step(), 1..24),
        drains in prop::collection::vec(prop::bool::weighted(0.3), 24),
        apps in prop::bool::ANY,
    ) {
        let mut one_by_one = Run::new(apps);
        let mut merged = Run::new(apps);
        for (i, s) in steps.iter().enumerate() {
            one_by_one.push(s, i as i32);
            one_by_one.drain();
            merged.push(s, i as i32);
            if drains[i] {
                merged.drain();
            }
        }
        merged.drain();
        // The scheduler hears of the same completions, each once.
        let sched = one_by_one.completed_for_scheduler();
        prop_assert_eq!(&sched, &merged.completed_for_scheduler());
        let mut ids: Vec<_> = sched.iter().map(|c| c.0).collect();
        ids.dedup();
        prop_assert_eq!(ids.len(), sched.len());
        prop_assert!(apps || sched.is_empty());
        prop_assert!(merged.max_depth <= NODES as usize, "backlog {} > nodes", merged.max_depth);
        for n in 0..NODES {
            prop_assert_eq!(one_by_one.shard.node_snapshot(n), merged.shard.node_snapshot(n));
        }
        let log_a = read_dir_records(one_by_one.dir.path()).unwrap();
        let log_b = read_dir_records(merged.dir.path()).unwrap();
        // The log keeps each node's completions in report order; across nodes it is the order
        // the shard handled them, which merging may change.
        prop_assert_eq!(log_a.len(), log_b.len());
        for n in 0..NODES {
            let host = format!("10.0.0.{n}");
            let per = |v: &Vec<rm_core::completion_log::CompletionRecord>| {
                v.iter().filter(|r| *r.node.host == *host).cloned().collect::<Vec<_>>()
            };
            prop_assert_eq!(per(&log_a), per(&log_b));
        }
        // Per node, in order (entries of different nodes may be processed in another order).
        for n in 0..NODES {
            let per = |v: &Vec<(u32, ContainerKey)>| v.iter().filter(|x| x.0 == n).copied().collect::<Vec<_>>();
            prop_assert_eq!(per(&one_by_one.acks), per(&merged.acks));
            let per = |v: &Vec<(u32, OutItem)>| v.iter().filter(|x| x.0 == n).copied().collect::<Vec<_>>();
            prop_assert_eq!(per(&one_by_one.cleanups), per(&merged.cleanups));
        }
        // Every COMPLETE ever sent is in the log exactly once.
        let mut ids: Vec<_> = log_a.iter().map(|r| r.container).collect();
        let before = ids.len();
        ids.sort();
        ids.dedup();
        prop_assert_eq!(before, ids.len());
        for s in &steps {
            if let Step::Heartbeat { statuses, node, .. } = s {
                for (id, r) in statuses {
                    if matches!(r, Report::Complete(_)) {
                        prop_assert!(ids.binary_search(&key(node_container(*node, *id))).is_ok());
                    }
                }
            }
        }
    }
}
