//! ClientToAM master keys through an RM restart (recovery on, security on as a Kerberized RM
//! has it): the key the AM got when it registered is in the state store, so after the restart
//! the AM's re-registration gets the same key back and clients get tokens under it, as Java's
//! RM (`RMStateStore` keeps the key with the attempt). Without it the AM would keep verifying
//! with a key the new RM no longer has.
//!
//! No NodeManager: the AM container is placed on a node that accepts the launch connection and
//! never answers, so the first RM's launch stays in flight (the attempt ALLOCATED, then
//! registered by the test as its AM) until the second RM has recovered.

use std::net::TcpListener;
use std::sync::mpsc;

use crate::support;

use hadoop_wire::pb::hadoop::yarn::{
    GetApplicationReportRequestProto, GetApplicationReportResponseProto,
    RegisterApplicationMasterRequestProto, RegisterApplicationMasterResponseProto,
    YarnApplicationStateProto,
};
use hadoop_wire::yarn::ids::AttemptId;
use hadoop_wire::yarn::{acp, amp, APPLICATION_MASTER_PROTOCOL};
use prost::Message;
use rm_core::apps::{AppsConfig, Res};
use rm_core::ids::NodeKey;
use rm_core::service::AppsSecurity;

fn register(
    rm: &rm_core::service::RmService,
    t: &hadoop_wire::token::Token,
) -> RegisterApplicationMasterResponseProto {
    let c = support::client(
        rm.scheduler_addr().unwrap(),
        APPLICATION_MASTER_PROTOCOL,
        "alice",
        support::token_auth(t),
    );
    let req = RegisterApplicationMasterRequestProto {
        host: Some("127.0.0.1".into()),
        rpc_port: Some(1),
        ..Default::default()
    };
    c.call(amp::REGISTER_APPLICATION_MASTER, &req.encode_to_vec())
        .expect("registerApplicationMaster")
        .decode()
        .expect("its response")
}

#[test]
fn an_attempts_client_to_am_key_survives_a_restart() {
    let store = tempfile::tempdir().unwrap();
    let sp = store.path().to_path_buf();
    let recovering = |c: &mut rm_core::RmConfig| {
        c.recovery = true;
        c.state_store_dir = sp.clone();
    };
    // The node: accepts the AM launch's connection and holds it until told.
    let nm = TcpListener::bind("127.0.0.1:0").unwrap();
    let nm_port = nm.local_addr().unwrap().port() as i32;
    let (release, held) = mpsc::channel::<()>();
    let holder = std::thread::spawn(move || {
        let conn = nm.accept().map(|(s, _)| s);
        let _ = held.recv();
        drop(conn);
    });

    let (rm1, _d1) =
        support::start_rm_with(recovering, AppsConfig::default(), AppsSecurity::default());
    let rt1 = rm1.apps().unwrap().clone();
    rt1.set_secure();
    rt1.with(|a| {
        a.node_added(
            &NodeKey::new("127.0.0.1", nm_port),
            "127.0.0.1:1".into(),
            Res::new(4096, 4),
        )
    });
    let app = support::submit_direct(&rm1, "alice", Res::new(1024, 1));
    let at = AttemptId { app, attempt: 1 };
    let token = rt1.amrm.write().create_and_get_amrm_token(at).unwrap();
    let first = register(&rm1, &token);
    let key = first
        .client_to_am_token_master_key
        .clone()
        .expect("a secure RM hands the AM its ClientToAM master key");

    // A new RM on the same store, the first one's launch still in flight.
    let (rm2, _d2) =
        support::start_rm_with(recovering, AppsConfig::default(), AppsSecurity::default());
    let rt2 = rm2.apps().unwrap().clone();
    rt2.set_secure();
    release.send(()).unwrap();
    holder.join().unwrap();
    rm1.shutdown();
    // The AM re-registers (AMRMClient does on ApplicationMasterNotRegisteredException): the
    // same key.
    let again = register(&rm2, &token);
    assert_eq!(again.client_to_am_token_master_key, Some(key.clone()));
    // A client's report of the RUNNING application: a token under that key.
    let rep: GetApplicationReportResponseProto = support::call(
        &rm2,
        "bob",
        acp::GET_APPLICATION_REPORT,
        &GetApplicationReportRequestProto {
            application_id: Some(app.to_proto()),
        },
    )
    .unwrap();
    let rep = rep.application_report.unwrap();
    assert_eq!(
        rep.yarn_application_state,
        Some(YarnApplicationStateProto::Running as i32)
    );
    assert_eq!(
        rep.client_to_am_token,
        Some(rm_core::client_to_am::token_with(&key, at, "bob"))
    );
    rm2.shutdown();
}
