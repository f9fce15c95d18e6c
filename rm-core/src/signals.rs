//! Container signals on their way to the nodes (`signalToContainer`): Java's `ClientRMService`
//! hands a signal for a live container to its node (`RMNodeSignalContainerEvent`), and the
//! node's next heartbeat response carries it in `containers_to_signal`; the NodeManager then
//! signals the container (OUTPUT_THREAD_DUMP: SIGQUIT, GRACEFUL_SHUTDOWN: SIGTERM,
//! FORCEFUL_SHUTDOWN: SIGKILL).
//!
//! [`PendingSignals`] is that hand-over: the client protocol [`push`](PendingSignals::push)es
//! a signal for a node, and the heartbeat path [`take`](PendingSignals::take)s a node's signals
//! for the response it is building (one relaxed load when none are pending, so the heartbeat's
//! hot path stays as it is). At most [`MAX_PER_NODE`] wait per node; beyond, the oldest is
//! dropped (a client calling in a loop cannot grow the RM's memory).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use hadoop_wire::pb::hadoop::yarn::SignalContainerRequestProto;

use crate::ids::NodeKey;

/// Most signals waiting for one node's heartbeat.
pub const MAX_PER_NODE: usize = 1024;

/// Signals waiting for their node's next heartbeat (see the module docs).
#[derive(Debug, Default)]
pub struct PendingSignals {
    any: AtomicBool,
    by_node: Mutex<HashMap<NodeKey, Vec<SignalContainerRequestProto>>>,
}

impl PendingSignals {
    pub fn new() -> PendingSignals {
        PendingSignals::default()
    }

    /// Queues `signal` for `node`'s next heartbeat response.
    pub fn push(&self, node: NodeKey, signal: SignalContainerRequestProto) {
        let mut m = self.by_node.lock().unwrap_or_else(|p| p.into_inner());
        let q = m.entry(node).or_default();
        if q.len() >= MAX_PER_NODE {
            q.remove(0);
        }
        q.push(signal);
        self.any.store(true, Ordering::Release);
    }

    /// The signals waiting for `node` (its heartbeat response's `containers_to_signal`).
    #[inline]
    pub fn take(&self, node: &NodeKey) -> Vec<SignalContainerRequestProto> {
        if !self.any.load(Ordering::Acquire) {
            return Vec::new();
        }
        let mut m = self.by_node.lock().unwrap_or_else(|p| p.into_inner());
        let out = m.remove(node).unwrap_or_default();
        if m.is_empty() {
            self.any.store(false, Ordering::Release);
        }
        out
    }

    /// Forgets a node's signals (it left the cluster).
    pub fn forget(&self, node: &NodeKey) {
        let _ = self.take(node);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hadoop_wire::pb::hadoop::yarn::SignalContainerCommandProto;

    fn sig(cmd: SignalContainerCommandProto) -> SignalContainerRequestProto {
        SignalContainerRequestProto {
            container_id: Default::default(),
            command: cmd as i32,
        }
    }

    #[test]
    fn signals_wait_for_their_node_and_are_taken_once() {
        let p = PendingSignals::new();
        let (a, b) = (NodeKey::new("h1", 1), NodeKey::new("h2", 2));
        assert!(p.take(&a).is_empty());
        p.push(
            a.clone(),
            sig(SignalContainerCommandProto::OutputThreadDump),
        );
        p.push(
            a.clone(),
            sig(SignalContainerCommandProto::GracefulShutdown),
        );
        assert!(p.take(&b).is_empty());
        assert_eq!(p.take(&a).len(), 2);
        assert!(p.take(&a).is_empty());
        for _ in 0..MAX_PER_NODE + 5 {
            p.push(
                b.clone(),
                sig(SignalContainerCommandProto::ForcefulShutdown),
            );
        }
        assert_eq!(p.take(&b).len(), MAX_PER_NODE);
    }
}
