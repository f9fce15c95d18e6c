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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use hadoop_wire::entropy::SeededEntropy;
    use hadoop_wire::pb::hadoop::yarn::{
        ApplicationSubmissionContextProto, ContainerLaunchContextProto, NodeStatusProto,
    };
    use hadoop_wire::view::yarn::NodeStatusView;
    use prost::Message;

    use super::*;
    use crate::amrm_token::{AmrmTokenSecretManager, AmrmTokenSecrets};
    use crate::apps::{AppsConfig, Res};

    fn apps(immediate_placement: bool) -> Apps {
        let m =
            AmrmTokenSecretManager::new(&mut SeededEntropy(7), 0, 86_400_000, 1000, 100).unwrap();
        let mut a = Apps::new(
            AppsConfig {
                immediate_placement,
                ..AppsConfig::default()
            },
            1_700_000_000_000,
            Arc::new(AmrmTokenSecrets::new(m)),
        );
        for (h, p) in [("h1", 1), ("h2", 2)] {
            a.node_added(&NodeKey::new(h, p), format!("{h}:8042"), Res::new(4096, 4));
        }
        a
    }

    fn submit(a: &mut Apps) {
        let (id, _) = a.new_application().unwrap();
        let ctx = ApplicationSubmissionContextProto {
            application_id: Some(id.to_proto()),
            queue: Some("default".into()),
            am_container_spec: Some(ContainerLaunchContextProto::default()),
            resource: Some(Res::new(512, 1).to_proto()),
            ..Default::default()
        };
        a.submit(ctx, "alice", 10).unwrap();
    }

    fn heartbeat(a: &mut Apps, node: &NodeKey) {
        let b = NodeStatusProto {
            node_id: Some(node.to_proto()),
            response_id: Some(1),
            ..Default::default()
        }
        .encode_to_vec();
        a.node_update(&node.host, node.port, NodeStatusView::new(&b), 20);
    }

    #[test]
    fn a_decommissioning_node_gets_no_new_containers_until_recommissioned() {
        let (h1, h2) = (NodeKey::new("h1", 1), NodeKey::new("h2", 2));
        let mut a = apps(false);
        assert!(a.set_decommissioning(&h1, true));
        assert!(
            !a.set_decommissioning(&NodeKey::new("h9", 9), true),
            "unknown"
        );
        submit(&mut a);
        heartbeat(&mut a, &h1);
        assert!(a.take_launches().is_empty(), "h1 is DECOMMISSIONING");
        assert_eq!(a.containers_on(&h1), Some(0));
        a.set_decommissioning(&h1, false);
        heartbeat(&mut a, &h1);
        assert_eq!(a.take_launches().len(), 1, "back in service");
        assert_eq!(a.containers_on(&h1), Some(1));
        assert_eq!(a.containers_on(&h2), Some(0));

        // Immediate placement (the roomiest node at submission) passes it over too.
        let mut a = apps(true);
        a.set_decommissioning(&h1, true);
        for _ in 0..2 {
            submit(&mut a);
        }
        let l = a.take_launches();
        assert_eq!(l.len(), 2);
        assert!(l.iter().all(|l| l.node == h2), "{l:?}");
        assert_eq!(a.containers_on(&h1), Some(0));
    }
}
