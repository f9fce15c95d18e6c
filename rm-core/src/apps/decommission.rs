//! Graceful decommissioning, the scheduler's side: a DECOMMISSIONING node keeps running what it
//! has and is offered nothing new (Java shrinks such a node's total to what it uses on each
//! heartbeat, so its scheduler finds no room there; ours skips the node). The admin service
//! ([`crate::admin`]) marks and unmarks nodes and watches them drain.

use crate::ids::NodeKey;

use super::Apps;

impl Apps {
    /// Marks `key` DECOMMISSIONING (`true`) or back in service (`false`); `false` when the
    /// scheduler does not know the node.
    pub fn set_decommissioning(&mut self, key: &NodeKey, on: bool) -> bool {
        self.nodes.update(key, |n| n.decommissioning = on).is_some()
    }

    /// Containers the scheduler has on `key` (`None`: an unknown node).
    pub fn containers_on(&self, key: &NodeKey) -> Option<usize> {
        self.nodes.get(key).map(|n| n.containers)
    }
}
