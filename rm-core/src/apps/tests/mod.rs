//! Unit tests of [`Apps`], a file per concern of the module, and the set-up they share.

use super::*;
use crate::amrm_token::AmrmTokenSecretManager;
use hadoop_wire::entropy::SeededEntropy;
use hadoop_wire::pb::hadoop::yarn::{
    AllocateRequestProto, ApplicationSubmissionContextProto, FinishApplicationMasterRequestProto,
    NodeStatusProto, PriorityProto, RegisterApplicationMasterRequestProto, ResourceRequestProto,
};
use hadoop_wire::token::identifier::{attempt_to_proto, container_from_proto};
use hadoop_wire::token::{ContainerTokenIdentifier, TokenIdentifier};
use hadoop_wire::view::yarn::NodeStatusView;
use hadoop_wire::yarn::exit_status;
use ipc::transport::BackendChoice;
use prost::Message;

mod am_protocol;
mod client_protocol;
mod config;
mod lifecycle;
mod nodes;
mod recovery;
mod scheduler;

const TS: i64 = 1_700_000_000_000;

/// Heartbeat-only placement: these tests drive allocation by node updates (the
/// immediate mode has its own tests, with [`apps_placing_now`]).
fn apps(cfg: AppsConfig) -> Apps {
    apps_placing_now(AppsConfig {
        immediate_placement: false,
        ..cfg
    })
}

fn apps_placing_now(cfg: AppsConfig) -> Apps {
    let m = AmrmTokenSecretManager::new(&mut SeededEntropy(7), 0, 86_400_000, 1000, 100).unwrap();
    let mut a = Apps::new(cfg, TS, Arc::new(AmrmTokenSecrets::new(m)));
    a.node_added(&NodeKey::new("h1", 1), "h1:8042".into(), Res::new(4096, 4));
    a.node_added(&NodeKey::new("h2", 2), "h2:8042".into(), Res::new(4096, 4));
    a
}

fn keys() -> TokenKeys {
    TokenKeys {
        container: MasterKey::new(1, vec![1; 8]).unwrap(),
        nm: MasterKey::new(2, vec![2; 8]).unwrap(),
        rm_identifier: TS,
    }
}

fn ctx(id: AppId, mb: i64, queue: &str) -> ApplicationSubmissionContextProto {
    ApplicationSubmissionContextProto {
        application_id: Some(id.to_proto()),
        queue: Some(queue.into()),
        am_container_spec: Some(ContainerLaunchContextProto::default()),
        resource: Some(Res::new(mb, 1).to_proto()),
        ..Default::default()
    }
}

fn status_bytes(node: &NodeKey, done: &[(ContainerId, i32)]) -> Vec<u8> {
    NodeStatusProto {
        node_id: Some(node.to_proto()),
        response_id: Some(1),
        containers_statuses: done.iter().map(|&(c, e)| status(c, e, "done")).collect(),
        ..Default::default()
    }
    .encode_to_vec()
}

fn update(a: &mut Apps, node: &NodeKey, done: &[(ContainerId, i32)], now: u64) {
    let b = status_bytes(node, done);
    a.node_update(&node.host, node.port, NodeStatusView::new(&b), now);
}

fn ask(prio: i32, name: &str, n: i32, mb: i64, relax: bool) -> ResourceRequestProto {
    ResourceRequestProto {
        priority: Some(PriorityProto {
            priority: Some(prio),
        }),
        resource_name: Some(name.into()),
        capability: Some(Res::new(mb, 1).to_proto()),
        num_containers: Some(n),
        relax_locality: Some(relax),
        ..Default::default()
    }
}

/// Submits, allocates the AM container on h1, launches and registers it.
fn running(a: &mut Apps) -> (AppId, AttemptId) {
    let (id, _) = a.new_application().unwrap();
    a.submit(ctx(id, 512, "default"), "alice", 10).unwrap();
    assert!(a.gate().load(Ordering::Relaxed));
    let h1 = NodeKey::new("h1", 1);
    update(a, &h1, &[], 20);
    let l = a.take_launches();
    assert_eq!(l.len(), 1);
    let at = l[0].attempt;
    assert_eq!(
        l[0].container.to_string(),
        format!("container_{TS}_0001_01_000001")
    );
    assert_eq!(
        l[0].res,
        Res::new(1024, 1),
        "normalized to the minimum allocation"
    );
    assert!(a.amrm.read().is_registered(&at));
    a.am_launched(at, 30);
    a.register_am(at, &RegisterApplicationMasterRequestProto::default(), 40)
        .unwrap();
    assert_eq!(a.app(id).unwrap().state, AppState::Running);
    (id, at)
}
