//! Container signals on their way to the nodes (`signalToContainer`): Java's `ClientRMService`
//! hands a signal for a live container to its node (`RMNodeSignalContainerEvent`); `RMNodeImpl`
//! appends it to the node's list, copies the whole list into the node's next heartbeat response
//! (`containers_to_signal`, field 13) and clears it: delivered once, in call order, with no
//! retry and no acknowledgement. The NodeManager then signals the container's process group
//! (OUTPUT_THREAD_DUMP: SIGQUIT, GRACEFUL_SHUTDOWN: SIGTERM, FORCEFUL_SHUTDOWN: SIGKILL).
//!
//! Here each tracked node keeps its [`NodeSignals`] next to its other queued items
//! (`crate::tracker`), so an unchanged heartbeat with none pending pays for an empty slice in
//! the response writer and nothing else: no lock beyond the tracker's, no allocation. At most
//! [`MAX_PER_NODE`] wait per node; beyond, the oldest is dropped (a client calling in a loop
//! cannot grow the RM's memory). A signal for a container that completes before delivery is
//! still sent, as Java sends it (the NodeManager ignores ids it no longer runs).

use hadoop_wire::pb::hadoop::yarn::SignalContainerCommandProto;
use hadoop_wire::writer::{Encode, Sink};

use crate::ids::ContainerKey;

/// Most signals waiting for one node's heartbeat.
pub const MAX_PER_NODE: usize = 1024;

/// One `SignalContainerRequestProto` for a heartbeat response: `container_id` (1), `command` (2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueuedSignal {
    pub container: ContainerKey,
    /// A `SignalContainerCommandProto` number.
    pub command: i32,
}

impl QueuedSignal {
    pub fn new(container: ContainerKey, command: SignalContainerCommandProto) -> QueuedSignal {
        QueuedSignal {
            container,
            command: command as i32,
        }
    }
}

impl Encode for QueuedSignal {
    #[inline]
    fn encode<S: Sink>(&self, s: &mut S) {
        s.message(1, &self.container);
        s.int32(2, self.command);
    }
}

/// The signals waiting for one node's next heartbeat response, in call order.
#[derive(Debug, Default)]
pub struct NodeSignals {
    q: Vec<QueuedSignal>,
    dropped: u64,
}

impl NodeSignals {
    /// Queues `s`; at [`MAX_PER_NODE`] the oldest goes. False if one was dropped.
    pub fn push(&mut self, s: QueuedSignal) -> bool {
        let full = self.q.len() >= MAX_PER_NODE;
        if full {
            self.q.remove(0);
            self.dropped += 1;
        }
        self.q.push(s);
        !full
    }

    /// What the next response carries.
    #[inline]
    pub fn pending(&self) -> &[QueuedSignal] {
        &self.q
    }

    /// After the response was built: delivered once (its buffer is kept).
    #[inline]
    pub fn delivered(&mut self) {
        self.q.clear();
    }

    /// Signals dropped at the cap since the node was tracked.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hadoop_wire::pb::hadoop::yarn::SignalContainerRequestProto;
    use prost::Message;

    fn cid(id: i64) -> ContainerKey {
        ContainerKey {
            app: crate::ids::AppKey {
                cluster_timestamp: 1_700_000_000_000,
                id: 3,
            },
            attempt: 1,
            id,
        }
    }

    #[test]
    fn encodes_as_prost_does() {
        let s = QueuedSignal::new(cid(7), SignalContainerCommandProto::GracefulShutdown);
        let mut buf = Vec::new();
        hadoop_wire::writer::write(&mut buf, &s);
        let want = SignalContainerRequestProto {
            container_id: cid(7).to_proto(),
            command: SignalContainerCommandProto::GracefulShutdown as i32,
        };
        assert_eq!(buf, want.encode_to_vec());
    }

    #[test]
    fn call_order_kept_and_capped_oldest_first() {
        let mut n = NodeSignals::default();
        assert!(n.pending().is_empty());
        for i in 0..MAX_PER_NODE as i64 {
            assert!(n.push(QueuedSignal::new(
                cid(i),
                SignalContainerCommandProto::OutputThreadDump
            )));
        }
        assert!(!n.push(QueuedSignal::new(
            cid(-1),
            SignalContainerCommandProto::ForcefulShutdown
        )));
        assert_eq!(n.pending().len(), MAX_PER_NODE);
        assert_eq!(n.pending()[0].container, cid(1));
        assert_eq!(n.pending().last().unwrap().container, cid(-1));
        assert_eq!(n.dropped(), 1);
        n.delivered();
        assert!(n.pending().is_empty());
    }
}
