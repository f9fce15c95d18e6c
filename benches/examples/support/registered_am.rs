//! Shared by the sans-IO RM examples (`alloc_profile`, `place_profile`): a cluster of `nodes`
//! registered nodes of 8 GB / 8 vcores and one application whose AM (1 GB) is placed, launched
//! and registered. With immediate placement the AM is placed at submission, else on the first
//! node's update, as `hotpath rm` does in each mode.

use std::sync::Arc;

use hadoop_wire::pb::hadoop::yarn::{
    ApplicationSubmissionContextProto, ContainerLaunchContextProto, NodeStatusProto,
    RegisterApplicationMasterRequestProto,
};
use hadoop_wire::view::yarn::NodeStatusView;
use hadoop_wire::yarn::ids::AttemptId;
use prost::Message;
use rm_core::amrm_token::{AmrmTokenSecretManager, AmrmTokenSecrets};
use rm_core::apps::{Apps, AppsConfig, Res, TokenKeys};
use rm_core::ids::NodeKey;
use rm_core::master_key::{MasterKey, SeededEntropy};

pub const TS: i64 = 1_700_000_000_000;

/// The first AMRM master key's id (no rolling pending, so any id is answered alike).
pub const KEY_ID: i32 = 1;

/// The applications, the AM's attempt, and the token keys `allocate` mints with.
pub fn registered_am(nodes: i32, immediate_placement: bool) -> (Apps, AttemptId, TokenKeys) {
    let m = AmrmTokenSecretManager::new(&mut SeededEntropy(7), 0, 86_400_000, 1000, 100)
        .expect("amrm keys");
    let cfg = AppsConfig {
        immediate_placement,
        ..AppsConfig::default()
    };
    let mut a = Apps::new(cfg, TS, Arc::new(AmrmTokenSecrets::new(m)));
    for i in 0..nodes {
        let host = format!("host{i:05}");
        let key = NodeKey::new(&host, 8041);
        a.node_registered(&key, format!("{host}:8042"), Res::new(8192, 8), &[], 1);
    }
    let (id, _) = a.new_application().expect("new application");
    let ctx = ApplicationSubmissionContextProto {
        application_id: Some(id.to_proto()),
        queue: Some("default".into()),
        am_container_spec: Some(ContainerLaunchContextProto::default()),
        resource: Some(Res::new(1024, 1).to_proto()),
        ..Default::default()
    };
    a.submit(ctx, "bench", 10).expect("submit");
    if immediate_placement {
        a.place_unplaced(11);
    } else {
        let first = NodeKey::new("host00000", 8041);
        let status = NodeStatusProto {
            node_id: Some(first.to_proto()),
            response_id: Some(1),
            ..Default::default()
        }
        .encode_to_vec();
        a.node_update(&first.host, first.port, NodeStatusView::new(&status), 20);
    }
    let launch = a.take_launches().pop().expect("an AM container");
    let at = launch.attempt;
    a.am_launched(at, 30);
    a.register_am(at, &RegisterApplicationMasterRequestProto::default(), 40)
        .expect("register");
    let keys = TokenKeys {
        container: MasterKey::new(1, vec![1; 8]).expect("key"),
        nm: MasterKey::new(2, vec![2; 8]).expect("key"),
        rm_identifier: TS,
    };
    (a, at, keys)
}
