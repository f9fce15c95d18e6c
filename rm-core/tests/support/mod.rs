//! Shared by rm-core's integration tests (`mod support;`): an `RmService` running applications
//! on loopback, clients of its ports, and an application submitted straight to its scheduler.
#![allow(dead_code)]

pub mod apps_rig;

use std::net::SocketAddr;
use std::time::Duration;

use hadoop_wire::pb::hadoop::yarn::ApplicationSubmissionContextProto;
use hadoop_wire::sasl::client::{ClientAuth, TokenCredential};
use hadoop_wire::sasl::Qop;
use hadoop_wire::token::Token;
use hadoop_wire::yarn::ids::AppId;
use hadoop_wire::yarn::{
    APPLICATION_CLIENT_PROTOCOL, APPLICATION_CLIENT_VERSION, APPLICATION_MASTER_PROTOCOL,
    APPLICATION_MASTER_VERSION,
};
use ipc::client::{Client, ClientConfig, ClientError};
use ipc::server::ServerConfig;
use prost::Message;
use rm_core::apps::{AppsConfig, Res};
use rm_core::dispatcher::Placement;
use rm_core::service::{AppsSecurity, AppsSetup, RmService};
use rm_core::RmConfig;

/// An RM with `security` on its application ports and Hadoop's other defaults, its completion
/// log in a fresh temp dir (kept alive by the returned guard).
pub fn start_rm(security: AppsSecurity) -> (RmService, tempfile::TempDir) {
    start_rm_with(|_| {}, AppsConfig::default(), security)
}

/// [`start_rm`] with the RM's settings changed by `tune` (the completion log and state store
/// dirs are set to the temp dir first) and the scheduler's `apps`.
pub fn start_rm_with(
    tune: impl FnOnce(&mut RmConfig),
    apps: AppsConfig,
    security: AppsSecurity,
) -> (RmService, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = RmConfig {
        completion_log_dir: dir.path().join("log"),
        state_store_dir: dir.path().join("rmstore"),
        ..RmConfig::default()
    };
    tune(&mut cfg);
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let rm = RmService::start_with_apps(
        cfg,
        any,
        &Placement::Unpinned(1),
        ServerConfig::default(),
        Some(AppsSetup {
            cfg: apps,
            client: any,
            scheduler: any,
            qops: vec![Qop::Auth],
            security,
        }),
    )
    .unwrap();
    (rm, dir)
}

/// A client of `protocol` (the client or the scheduler port's) at `addr` as `user`.
pub fn client(addr: SocketAddr, protocol: &str, user: &str, auth: ClientAuth) -> Client {
    Client::new(
        addr,
        ClientConfig {
            protocol: protocol.into(),
            protocol_version: if protocol == APPLICATION_MASTER_PROTOCOL {
                APPLICATION_MASTER_VERSION
            } else {
                APPLICATION_CLIENT_VERSION
            },
            user: user.into(),
            call_timeout: Duration::from_secs(10),
            max_connect_attempts: 1,
            auth,
            ..ClientConfig::default()
        },
    )
}

/// A ResourceTracker client (what a NodeManager speaks) of `rm`.
pub fn tracker_client(rm: &RmService) -> Client {
    Client::new(
        rm.local_addr(),
        ClientConfig {
            protocol: rm_core::service::RESOURCE_TRACKER_PROTOCOL.into(),
            call_timeout: Duration::from_secs(10),
            ..ClientConfig::default()
        },
    )
}

/// TOKEN authentication with `t` (an AMRMToken), at `auth`.
pub fn token_auth(t: &Token) -> ClientAuth {
    ClientAuth::token(
        TokenCredential {
            identifier: t.identifier.clone(),
            password: t.password.clone(),
        },
        vec![Qop::Auth],
    )
}

/// One ApplicationClientProtocol call as the SIMPLE user `user`.
pub fn call<Req: Message, Resp: Message + Default>(
    rm: &RmService,
    user: &str,
    method: &str,
    req: &Req,
) -> Result<Resp, ClientError> {
    let c = client(
        rm.client_addr().unwrap(),
        APPLICATION_CLIENT_PROTOCOL,
        user,
        ClientAuth::default(),
    );
    let r = c.call(method, &req.encode_to_vec())?;
    Ok(r.decode().expect("response decodes"))
}

/// The class and message of a refused call.
pub fn remote<T: std::fmt::Debug>(r: Result<T, ClientError>) -> (String, String) {
    match r {
        Err(ClientError::Remote { class, message, .. }) => (class, message),
        other => panic!("not a remote error: {other:?}"),
    }
}

/// An application of `user` asking `am` for its AM container, submitted straight to the
/// scheduler (no RPC).
pub fn submit_direct(rm: &RmService, user: &str, am: Res) -> AppId {
    rm.apps().unwrap().with(|a| {
        let (id, _) = a.new_application().unwrap();
        let ctx = ApplicationSubmissionContextProto {
            application_id: Some(id.to_proto()),
            am_container_spec: Some(Default::default()),
            resource: Some(am.to_proto()),
            ..Default::default()
        };
        a.submit(ctx, user, 1).unwrap()
    })
}
