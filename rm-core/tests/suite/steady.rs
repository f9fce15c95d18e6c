//! The steady-state fast path of status updates (`rm_core::node`, "Repeated heartbeats")
//! changes nothing but the cost: random heartbeat sequences in which most heartbeats repeat
//! the previous one byte for byte (with RUNNING containers that start, finish, vanish and come
//! back, health that flips, opportunistic containers, re-registrations, admin kills) are
//! applied by a shard with the fast path and by one without it, and after every step both hold
//! the same node state, counters, events, completion log, acknowledgements and cleanups.

use std::time::Duration;

use hadoop_wire::pb::hadoop::yarn::{
    ContainerStateProto, ContainerStatusProto, ExecutionTypeProto, NodeHealthStatusProto,
    NodeStatusProto, ResourceUtilizationProto,
};
use proptest::prelude::*;
use prost::Message;
use rm_core::completion_log::read_dir_records;
use rm_core::ids::{AppKey, ContainerKey, NodeKey};
use rm_core::mailbox::{Global, Mailbox};
use rm_core::node::{NodeEvent, ResetKind};
use rm_core::shard::Shard;

const CONTAINERS: i64 = 6;

#[derive(Debug, Clone, Copy)]
enum Report {
    Absent,
    Running(bool),
    Complete(i32),
    New,
}

#[derive(Debug, Clone)]
enum Step {
    /// The previous heartbeat again (new responseId and utilization: only the statuses repeat).
    Repeat,
    Heartbeat {
        healthy: bool,
        statuses: Vec<(i64, Report)>,
    },
    Reregister,
    Kill(i64),
}

fn key(id: i64) -> ContainerKey {
    ContainerKey {
        app: AppKey {
            cluster_timestamp: 77,
            id: (id % 2) as i32 + 1,
        },
        attempt: 1,
        id,
    }
}

fn report() -> impl Strategy<Value = Report> {
    prop_oneof![
        2 => Just(Report::Absent),
        8 => prop::bool::weighted(0.8).prop_map(Report::Running),
        1 => Just(Report::Complete(0)),
        1 => Just(Report::New),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        12 => Just(Step::Repeat),
        5 => (
            prop::bool::weighted(0.85),
            prop::collection::vec(report(), CONTAINERS as usize),
        )
            .prop_map(|(healthy, reports)| Step::Heartbeat {
                healthy,
                statuses: reports
                    .into_iter()
                    .enumerate()
                    .map(|(i, r)| (i as i64 + 1, r))
                    .filter(|(_, r)| !matches!(r, Report::Absent))
                    .collect(),
            }),
        1 => Just(Step::Reregister),
        1 => (1..=CONTAINERS).prop_map(Step::Kill),
    ]
}

fn encode(rid: i32, healthy: bool, statuses: &[(i64, Report)]) -> Vec<u8> {
    NodeStatusProto {
        node_id: Some(NodeKey::new("10.0.0.1", 8041).to_proto()),
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
                    container_id: Some(key(id).to_proto()),
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
        node_utilization: Some(ResourceUtilizationProto {
            pmem: Some(rid),
            vmem: Some(2 * rid),
            cpu: Some(0.5),
            ..Default::default()
        }),
        ..Default::default()
    }
    .encode_to_vec()
}

struct Run {
    shard: Shard,
    mailbox: Mailbox,
    dir: tempfile::TempDir,
    out: Vec<String>,
    events: Vec<NodeEvent>,
}

impl Run {
    fn new(fast: bool) -> Run {
        let dir = tempfile::tempdir().unwrap();
        let (mut shard, _) = Shard::open(dir.path(), 0, 1, false).unwrap();
        shard.set_steady_fast_path(fast);
        let r = Run {
            shard,
            mailbox: Mailbox::new(usize::MAX),
            dir,
            out: Vec::new(),
            events: Vec::new(),
        };
        r.mailbox.push_reset(
            0,
            Some(NodeKey::new("10.0.0.1", 8041)),
            ResetKind::Registered,
            0,
        );
        r
    }

    fn drain(&mut self) {
        let clock = || (1_000u64, 0u64);
        self.shard
            .run_once(&self.mailbox, Duration::ZERO, &clock)
            .unwrap();
        let mut out = Vec::new();
        self.mailbox.take_outbox(&mut out);
        self.out.extend(out.iter().map(|o| format!("{o:?}")));
        self.events.extend(self.shard.drain_events());
    }

    fn push(&mut self, status: &[u8], step: &Step) {
        let mut scratch = Vec::new();
        match step {
            Step::Reregister => self.mailbox.push_reset(0, None, ResetKind::Registered, 0),
            Step::Kill(id) => self.mailbox.push_global(Global::KillContainer(key(*id))),
            Step::Repeat | Step::Heartbeat { .. } => {
                self.mailbox.push_status(0, status, 0, &mut scratch)
            }
        }
        self.drain();
    }
}

fn check(steps: &[Step]) -> Result<(), TestCaseError> {
    let (mut fast, mut full) = (Run::new(true), Run::new(false));
    fast.drain();
    full.drain();
    let (mut healthy, mut statuses) = (true, Vec::new());
    for (i, step) in steps.iter().enumerate() {
        if let Step::Heartbeat {
            healthy: h,
            statuses: s,
        } = step
        {
            healthy = *h;
            statuses = s.clone();
        }
        let status = encode(i as i32 + 1, healthy, &statuses);
        fast.push(&status, step);
        full.push(&status, step);
        prop_assert_eq!(
            fast.shard.node_snapshot(0),
            full.shard.node_snapshot(0),
            "step {}: {:?}",
            i,
            step
        );
        prop_assert_eq!(fast.shard.stats(), full.shard.stats(), "step {}", i);
        prop_assert_eq!(&fast.events, &full.events, "step {}", i);
        prop_assert_eq!(&fast.out, &full.out, "step {}", i);
    }
    let records = |r: &Run| {
        let mut v: Vec<String> = read_dir_records(r.dir.path())
            .unwrap()
            .iter()
            .map(|x| format!("{x:?}"))
            .collect();
        v.sort();
        v
    };
    prop_assert_eq!(records(&fast), records(&full));
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn the_fast_path_ends_where_the_full_path_does(steps in prop::collection::vec(step(), 1..40)) {
        check(&steps)?;
    }
}

/// Repeated 50-container heartbeats (the fast path after the first): the node keeps its
/// containers, takes each heartbeat's responseId, and every status is still counted.
#[test]
fn repeated_heartbeats_keep_the_node_and_count_every_status() {
    let statuses: Vec<(i64, Report)> = (1..=50).map(|i| (i, Report::Running(true))).collect();
    let mut fast = Run::new(true);
    fast.drain();
    for i in 0..10 {
        fast.push(&encode(i + 1, true, &statuses), &Step::Repeat);
    }
    let n = fast.shard.node_snapshot(0).unwrap();
    assert_eq!(n.launched.len(), 50);
    assert_eq!(n.last_response_id, 10);
    assert_eq!(fast.shard.stats().statuses, 500);
    assert_eq!(fast.shard.stats().status_updates, 10);
}
