//! `signalToContainer` over the client port reaches the container's node in its next heartbeat
//! response (`containers_to_signal`, field 13): in call order, once (Java's RMNodeImpl), and
//! even when the container completes before that heartbeat; a duplicate heartbeat gets the
//! cached response, signals included; the signals of other nodes wait for them.

use crate::support::apps_rig::Rig;
use crate::support::{call, remote};

use hadoop_wire::pb::hadoop::yarn::{
    SignalContainerCommandProto as Cmd, SignalContainerRequestProto, SignalContainerResponseProto,
};
use hadoop_wire::token::identifier::container_from_proto;
use hadoop_wire::yarn::acp;
use hadoop_wire::yarn::ids::ContainerId;
use hadoop_wire::yarn::NODE_HEARTBEAT;

fn signal(rig: &Rig, user: &str, c: ContainerId, cmd: Cmd) -> Result<(), (String, String)> {
    call::<_, SignalContainerResponseProto>(
        &rig.rm,
        user,
        acp::SIGNAL_TO_CONTAINER,
        &SignalContainerRequestProto {
            container_id: c.to_proto(),
            command: cmd as i32,
        },
    )
    .map(|_| ())
    .map_err(|e| remote::<()>(Err(e)))
}

fn signals_in(
    resp: &hadoop_wire::pb::hadoop::yarn::NodeHeartbeatResponseProto,
) -> Vec<(ContainerId, Cmd)> {
    resp.containers_to_signal
        .iter()
        .map(|s| {
            (
                container_from_proto(&s.container_id).unwrap(),
                Cmd::try_from(s.command).unwrap(),
            )
        })
        .collect()
}

#[test]
fn signals_ride_the_next_heartbeat_once_in_call_order() {
    let mut rig = Rig::start(2, 8192, 8);
    rig.heartbeat_all();
    let am = rig.running_app("alice", 1024);
    let (&c, &node) = rig.running().iter().next().unwrap();
    assert_eq!(c.app, am.attempt.app);
    let other = 1 - node;

    for cmd in [
        Cmd::OutputThreadDump,
        Cmd::GracefulShutdown,
        Cmd::ForcefulShutdown,
    ] {
        signal(&rig, "alice", c, cmd).unwrap();
    }
    {
        let t = rig.rm.tracker().lock().unwrap();
        let n = &rig.nodes[node].key;
        assert_eq!(t.node(&n.host, n.port).unwrap().queued_signals().len(), 3);
    }
    // The other node hears nothing of them.
    assert!(rig.heartbeat(other).containers_to_signal.is_empty());
    // The node's next response carries all three, in call order.
    let req = rig.nodes[node].request(rig.keys());
    let r = rig.heartbeat(node);
    assert_eq!(
        signals_in(&r),
        vec![
            (c, Cmd::OutputThreadDump),
            (c, Cmd::GracefulShutdown),
            (c, Cmd::ForcefulShutdown)
        ]
    );
    // A duplicate of that heartbeat (its answer lost) gets the cached bytes: the same signals,
    // as Java answers a duplicate with its last response.
    let dup: hadoop_wire::pb::hadoop::yarn::NodeHeartbeatResponseProto =
        rig.nm.call(NODE_HEARTBEAT, &req).unwrap().decode().unwrap();
    assert_eq!(dup, r);
    // Delivered once: the next fresh heartbeat has none.
    assert!(rig.heartbeat(node).containers_to_signal.is_empty());
    assert!(rig.heartbeat(node).containers_to_signal.is_empty());

    // A signal for a container that completes before the heartbeat is still sent (Java: the
    // NodeManager ignores ids it no longer runs); the heartbeat reporting the completion
    // carries it.
    signal(&rig, "alice", c, Cmd::GracefulShutdown).unwrap();
    rig.complete(c, 143);
    let r = rig.heartbeat(node);
    assert_eq!(signals_in(&r), vec![(c, Cmd::GracefulShutdown)]);
    // Once the scheduler has the completion, the container is absent: Java's refusal (the
    // probes accepted before that are drained by a heartbeat), and nothing is queued.
    crate::support::apps_rig::wait_until("the completion reaches the scheduler", 10, || {
        signal(&rig, "alice", c, Cmd::OutputThreadDump).is_err()
    });
    rig.heartbeat(node);
    let (class, message) = signal(&rig, "alice", c, Cmd::OutputThreadDump).unwrap_err();
    assert_eq!(class, "org.apache.hadoop.yarn.exceptions.YarnException");
    assert_eq!(message, format!("Trying to signal an absent container {c}"));
    assert!(rig.heartbeat(node).containers_to_signal.is_empty());
}

#[test]
fn a_lost_node_drops_its_signals() {
    let mut rig = Rig::start(1, 8192, 8);
    rig.heartbeat_all();
    let _am = rig.running_app("alice", 1024);
    let (&c, _) = rig.running().iter().next().unwrap();
    signal(&rig, "alice", c, Cmd::GracefulShutdown).unwrap();
    // The node falls too far behind (a reboot): RESYNC, its containers released, its
    // signals with them (Java's RMNodeImpl takes signals only while RUNNING or UNHEALTHY).
    rig.nodes[0].rid += 5;
    let r = rig.heartbeat(0);
    assert_eq!(
        r.node_action(),
        hadoop_wire::pb::hadoop::yarn::NodeActionProto::Resync
    );
    assert!(r.containers_to_signal.is_empty());
    let t = rig.rm.tracker().lock().unwrap();
    let n = &rig.nodes[0].key;
    assert!(t.node(&n.host, n.port).unwrap().queued_signals().is_empty());
}
