//! `ipc.client.connection.maxidletime` on every yarn-client connection, as Java's
//! `Client.Connection` applies it: the RM client (`hotpath app run`), the AM's scheduler client
//! and the AM's NodeManager connections each close once idle that long, with no further call,
//! and the next call opens a new connection. Shown from the server's side (our `ipc::server`
//! standing in for the RM and a NodeManager): its count of open connections.

use std::time::{Duration, Instant};

use conf::Configuration;
use hadoop_wire::pb::hadoop::yarn::{
    GetClusterNodesResponseProto, GetContainerStatusesResponseProto,
    RegisterApplicationMasterResponseProto,
};
use hadoop_wire::sasl::server::ServerAuth;
use hadoop_wire::sasl::Qop;
use hadoop_wire::token::Token;
use hadoop_wire::yarn::{
    acp, amp, cmp, APPLICATION_CLIENT_PROTOCOL, APPLICATION_MASTER_PROTOCOL,
    CONTAINER_MANAGEMENT_PROTOCOL,
};
use ipc::server::{Call, CallError, Registry, Reply, Server};
use testkit::loopback::{start_local, wait_idle_closed, OneToken};
use yarn_client::application_client::ApplicationClient;
use yarn_client::application_master::ApplicationMaster;
use yarn_client::container_manager::ContainerManager;
use yarn_client::rpc::Retry;

const TOKEN: OneToken = OneToken {
    id: b"idle-close-token",
    password: b"0123456789abcdef",
    user: "appattempt_1_0001_000001",
};

/// A server answering one method of each protocol with an empty response; TOKEN auth when
/// `token`, else SIMPLE.
fn server(token: bool) -> Server {
    let mut reg = Registry::new();
    reg.register(
        APPLICATION_CLIENT_PROTOCOL,
        1,
        acp::GET_CLUSTER_NODES,
        |_: &Call<'_>, reply: &mut Reply<'_, '_>| -> Result<(), CallError> {
            reply.message(&GetClusterNodesResponseProto::default())?;
            Ok(())
        },
    );
    reg.register(
        APPLICATION_MASTER_PROTOCOL,
        1,
        amp::REGISTER_APPLICATION_MASTER,
        |_: &Call<'_>, reply: &mut Reply<'_, '_>| -> Result<(), CallError> {
            reply.message(&RegisterApplicationMasterResponseProto::default())?;
            Ok(())
        },
    );
    reg.register(
        CONTAINER_MANAGEMENT_PROTOCOL,
        1,
        cmp::GET_CONTAINER_STATUSES,
        |_: &Call<'_>, reply: &mut Reply<'_, '_>| -> Result<(), CallError> {
            reply.message(&GetContainerStatusesResponseProto::default())?;
            Ok(())
        },
    );
    let auth = if token {
        TOKEN.server_auth(Qop::Auth)
    } else {
        ServerAuth::simple()
    };
    start_local(reg, auth)
}

fn conf(max_idle_ms: &str) -> Configuration {
    let mut c = Configuration::new();
    c.set("ipc.client.connection.maxidletime", max_idle_ms);
    c
}

fn token() -> Token {
    Token::new(TOKEN.id, TOKEN.password, "NMToken", "")
}

/// Calls `call` once, then checks the server's connection closes `idle` later with no
/// further call, and that the next call opens a new one.
fn closes_when_idle(what: &str, s: &Server, idle: Duration, call: &dyn Fn()) {
    let open = || s.metrics().transport.open_connections;
    let accepted = || s.metrics().transport.accepted;
    call();
    let done = Instant::now();
    assert_eq!((open(), accepted()), (1, 1), "{what}");
    let window = idle - Duration::from_millis(50)..idle + Duration::from_secs(3);
    wait_idle_closed(what, done, window, open);
    call();
    assert_eq!((open(), accepted()), (1, 2), "{what}: a new connection");
}

#[test]
fn every_client_closes_its_idle_connection() {
    let idle = Duration::from_millis(400);
    let retry = Retry::default();

    let rm = server(false);
    let client = ApplicationClient::from_conf(rm.local_addr(), &conf("400"), "alice", &retry)
        .expect("client");
    closes_when_idle("the RM client", &rm, idle, &|| {
        client.cluster_nodes(&[]).expect("getClusterNodes");
    });
    rm.shutdown();

    let sched = server(true);
    let am = ApplicationMaster::new(sched.local_addr(), token(), &conf("400"), &retry)
        .expect("am client");
    closes_when_idle("the AM's scheduler client", &sched, idle, &|| {
        am.register("localhost", 0, "").expect("register");
    });
    sched.shutdown();

    let nm = server(true);
    let node = nm.local_addr().to_string();
    let cm = ContainerManager::new(&conf("400"), &retry);
    closes_when_idle("the AM's NodeManager client", &nm, idle, &|| {
        cm.statuses(&node, &token(), &[])
            .expect("getContainerStatuses");
    });
    nm.shutdown();
}

#[test]
fn a_maxidletime_of_zero_keeps_the_connection() {
    // (as `ipc::client::max_idle_from_conf` reads it: 0 or less is "never close")
    let rm = server(false);
    let client =
        ApplicationClient::from_conf(rm.local_addr(), &conf("0"), "alice", &Retry::default())
            .expect("client");
    client.cluster_nodes(&[]).expect("getClusterNodes");
    std::thread::sleep(Duration::from_millis(600));
    client.cluster_nodes(&[]).expect("getClusterNodes");
    let t = rm.metrics().transport;
    assert_eq!((t.open_connections, t.accepted), (1, 1));
    rm.shutdown();
}
