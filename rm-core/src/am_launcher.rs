//! The AM launcher (Java's `AMLauncher`): starts an attempt's AM container on its node.
//!
//! For each [`AmLaunch`] the scheduler produced: a container token for the AM container
//! (type APPLICATION_MASTER) and an NMToken for the node, both under the tracker's current
//! rolling master keys; the application's launch context with the AMRMToken added to its
//! Credentials (`tokens`, Hadoop's token storage format, alias = the token's service as Java
//! writes it) and `MAX_APP_ATTEMPTS` in its environment (with `APPLICATION_WEB_PROXY_BASE` and
//! `APP_SUBMIT_TIME_ENV`, which [`set_am_environment`] puts in the application's AM launch
//! context when it is submitted or recovered, as Java's `setupTokens` does); then `startContainers` on the node's
//! ContainerManagementProtocol (its NodeId `host:port`), authenticated with TOKEN (DIGEST-MD5)
//! and the NMToken, as the attempt's user. The result goes back to the applications
//! ([`crate::apps::Apps::am_launched`] / [`crate::apps::Apps::am_launch_failed`]) through
//! the caller's callback.
//!
//! [`start_request`] is the pure part; [`AmLauncher`] is a thread with a queue that makes the
//! calls with `ipc::client`, so no RPC to a NodeManager runs on a ring or heartbeat thread.

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

use hadoop_wire::pb::hadoop::yarn::{
    ContainerTypeProto, StartContainerRequestProto, StartContainersRequestProto,
    StartContainersResponseProto, StringStringMapProto,
};
use hadoop_wire::sasl::client::{ClientAuth, TokenCredential};
use hadoop_wire::sasl::Qop;
use hadoop_wire::token::credentials::{Credentials, Format};
use hadoop_wire::token::{Limits, TokenError};
use hadoop_wire::yarn::ids::AttemptId;
use hadoop_wire::yarn::{cmp, CONTAINER_MANAGEMENT_PROTOCOL, CONTAINER_MANAGEMENT_VERSION};
use ipc::client::{Client, ClientConfig};
use prost::Message;

use crate::apps::{container_token, nm_token, AmLaunch, TokenKeys};

/// `ApplicationConstants.MAX_APP_ATTEMPTS_ENV`.
pub const MAX_APP_ATTEMPTS_ENV: &str = "MAX_APP_ATTEMPTS";

/// `ApplicationConstants.APPLICATION_WEB_PROXY_BASE_ENV`: the web proxy's path of the
/// application (`ProxyUriUtils.getPath`), which AMs (MapReduce's, Tez's) serve their UI under.
pub const APPLICATION_WEB_PROXY_BASE_ENV: &str = "APPLICATION_WEB_PROXY_BASE";

/// `ApplicationConstants.APP_SUBMIT_TIME_ENV`: the application's submit time (ms since the
/// epoch); MapReduce's AM refuses to start without it ("APP_SUBMIT_TIME_ENV is null").
pub const APP_SUBMIT_TIME_ENV: &str = "APP_SUBMIT_TIME_ENV";

/// Puts in `ctx`'s environment what Java's `AMLauncher.setupTokens` puts there besides the
/// tokens: `APPLICATION_WEB_PROXY_BASE` (`/proxy/<application id>`) and `APP_SUBMIT_TIME_ENV`,
/// replacing what the submitter set under those names (Java's `environment.put`). (Java's
/// timeline-v2 flow tags are left out: this RM has no timeline service.)
pub fn set_am_environment(
    ctx: &mut hadoop_wire::pb::hadoop::yarn::ContainerLaunchContextProto,
    app: hadoop_wire::yarn::ids::AppId,
    submit_ms: u64,
) {
    put_env(ctx, APPLICATION_WEB_PROXY_BASE_ENV, format!("/proxy/{app}"));
    put_env(ctx, APP_SUBMIT_TIME_ENV, submit_ms.to_string());
}

fn put_env(
    ctx: &mut hadoop_wire::pb::hadoop::yarn::ContainerLaunchContextProto,
    key: &str,
    value: String,
) {
    match ctx
        .environment
        .iter_mut()
        .find(|e| e.key.as_deref() == Some(key))
    {
        Some(e) => e.value = Some(value),
        None => ctx.environment.push(StringStringMapProto {
            key: Some(key.into()),
            value: Some(value),
        }),
    }
}

/// The launch context's Credentials with the AMRMToken added (`AMLauncher.setupTokens`).
pub fn am_credentials(
    existing: Option<&[u8]>,
    amrm: &hadoop_wire::token::Token,
) -> Result<Vec<u8>, TokenError> {
    let mut creds = match existing {
        Some(b) if !b.is_empty() => Credentials::read_with(b, &Limits::default())?,
        _ => Credentials::new(),
    };
    creds.add_token(amrm.service.clone(), amrm.clone());
    Ok(creds.write(Format::Writable))
}

/// The `startContainers` request for an AM launch, and the NMToken to authenticate with.
pub fn start_request(
    l: &AmLaunch,
    keys: &TokenKeys,
    now_ms: u64,
    token_expiry_ms: u64,
) -> Result<(StartContainersRequestProto, hadoop_wire::token::Token), TokenError> {
    let ct = container_token(
        keys,
        l.container,
        &l.node,
        &l.user,
        l.res,
        l.priority,
        now_ms,
        token_expiry_ms,
        ContainerTypeProto::ApplicationMaster,
    );
    let nm = nm_token(keys, l.attempt, &l.node, &l.user);
    let mut ctx = l.launch.clone();
    ctx.tokens = Some(am_credentials(ctx.tokens.as_deref(), &l.amrm_token)?);
    ctx.environment
        .retain(|e| e.key.as_deref() != Some(MAX_APP_ATTEMPTS_ENV));
    ctx.environment.push(StringStringMapProto {
        key: Some(MAX_APP_ATTEMPTS_ENV.into()),
        value: Some(l.max_app_attempts.to_string()),
    });
    Ok((
        StartContainersRequestProto {
            start_container_request: vec![StartContainerRequestProto {
                container_launch_context: Some(ctx),
                container_token: Some(ct.to_proto()),
            }],
        },
        nm,
    ))
}

/// Reads a `startContainers` answer for one container: `Ok` if it succeeded, else the
/// NodeManager's exception text.
pub fn start_outcome(resp: &StartContainersResponseProto) -> Result<(), String> {
    if let Some(f) = resp.failed_requests.first() {
        let e = f.exception.as_ref();
        return Err(format!(
            "{}: {}",
            e.and_then(|e| e.class_name.as_deref())
                .unwrap_or("org.apache.hadoop.yarn.exceptions.YarnException"),
            e.and_then(|e| e.message.as_deref()).unwrap_or("")
        ));
    }
    if resp.succeeded_requests.is_empty() {
        return Err("the NodeManager reported the container neither started nor failed".into());
    }
    Ok(())
}

/// What the launcher thread needs from the RM: the current keys, the clock, and where results
/// go.
pub trait LaunchHost: Send + 'static {
    fn keys(&self) -> TokenKeys;
    fn now_ms(&self) -> u64;
    fn token_expiry_ms(&self) -> u64;
    fn done(&self, attempt: AttemptId, result: Result<(), String>);
}

/// A thread that starts AM containers one at a time.
pub struct AmLauncher {
    tx: Option<Sender<AmLaunch>>,
    thread: Option<JoinHandle<()>>,
}

fn resolve(host: &str, port: i32) -> Result<SocketAddr, String> {
    let port = u16::try_from(port).map_err(|_| format!("bad NodeManager port {port}"))?;
    (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("java.net.UnknownHostException: {host}: {e}"))?
        .next()
        .ok_or_else(|| format!("java.net.UnknownHostException: {host}"))
}

fn launch_one(l: &AmLaunch, host: &dyn LaunchHost) -> Result<(), String> {
    let (req, nm) = start_request(l, &host.keys(), host.now_ms(), host.token_expiry_ms())
        .map_err(|e| e.to_string())?;
    let addr = resolve(&l.node.host, l.node.port)?;
    let client = Client::new(
        addr,
        ClientConfig {
            protocol: CONTAINER_MANAGEMENT_PROTOCOL.into(),
            protocol_version: CONTAINER_MANAGEMENT_VERSION,
            user: l.attempt.to_string(),
            auth: ClientAuth::token(
                TokenCredential {
                    identifier: nm.identifier.clone(),
                    password: nm.password.clone(),
                },
                vec![Qop::Auth, Qop::AuthInt, Qop::AuthConf],
            ),
            max_connect_attempts: 3,
            call_timeout: Duration::from_secs(60),
            reader_thread_name: "hp-rm-amlaunch".into(),
            ..ClientConfig::default()
        },
    );
    let resp = client
        .call(cmp::START_CONTAINERS, &req.encode_to_vec())
        .map_err(|e| e.to_string())?;
    let resp: StartContainersResponseProto = resp.decode().map_err(|e| e.to_string())?;
    start_outcome(&resp)
}

fn run(rx: Receiver<AmLaunch>, host: Box<dyn LaunchHost>) {
    while let Ok(l) = rx.recv() {
        let r = launch_one(&l, &*host);
        match &r {
            Ok(()) => tracing::info!("launched {} for {} on {}", l.container, l.attempt, l.node),
            Err(e) => tracing::warn!("launching {} on {} failed: {e}", l.attempt, l.node),
        }
        host.done(l.attempt, r);
    }
}

impl AmLauncher {
    pub fn start(host: Box<dyn LaunchHost>) -> std::io::Result<AmLauncher> {
        let (tx, rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("hp-rm-amlauncher".into())
            .spawn(move || run(rx, host))?;
        Ok(AmLauncher {
            tx: Some(tx),
            thread: Some(thread),
        })
    }

    /// Queues launches (never blocks).
    pub fn launch(&self, ls: Vec<AmLaunch>) {
        if let Some(tx) = &self.tx {
            for l in ls {
                let _ = tx.send(l);
            }
        }
    }

    /// Stops after the launch in progress.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        self.tx.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for AmLauncher {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apps::Res;
    use crate::ids::NodeKey;
    use hadoop_wire::pb::hadoop::yarn::ContainerLaunchContextProto;
    use hadoop_wire::token::secret::MasterKey;
    use hadoop_wire::token::{
        AmrmTokenIdentifier, ContainerTokenIdentifier, NmTokenIdentifier, Token, TokenIdentifier,
    };
    use hadoop_wire::yarn::ids::{AppId, ContainerId};

    fn keys() -> TokenKeys {
        TokenKeys {
            container: MasterKey::new(11, vec![1; 8]).unwrap(),
            nm: MasterKey::new(22, vec![2; 8]).unwrap(),
            rm_identifier: 1_700_000_000_000,
        }
    }

    #[test]
    fn the_start_request_carries_verifiable_tokens_and_the_amrm_token() {
        let app = AppId::new(1_700_000_000_000, 3);
        let attempt = AttemptId { app, attempt: 2 };
        let c = ContainerId {
            app,
            attempt: 2,
            id: 1,
        };
        let amrm = Token::for_identifier(&AmrmTokenIdentifier::new(Some(attempt), 5), &[9; 20], "");
        let mut existing = Credentials::new();
        existing.add_token(
            "hdfs",
            Token::new(vec![1], vec![2], "HDFS_DELEGATION_TOKEN", "nn:8020"),
        );
        let l = AmLaunch {
            attempt,
            container: c,
            node: NodeKey::new("127.0.0.5", 4545),
            user: "alice".into(),
            res: Res::new(1024, 1),
            priority: 0,
            launch: ContainerLaunchContextProto {
                tokens: Some(existing.write(Format::Writable)),
                command: vec!["run".into()],
                ..Default::default()
            },
            amrm_token: amrm.clone(),
            max_app_attempts: 2,
        };
        let k = keys();
        let (req, nm) = start_request(&l, &k, 1000, 600_000).unwrap();
        let r = &req.start_container_request[0];
        let ctx = r.container_launch_context.as_ref().unwrap();
        let creds = Credentials::read(ctx.tokens.as_ref().unwrap()).unwrap();
        assert_eq!(creds.tokens_of_kind("YARN_AM_RM_TOKEN").next(), Some(&amrm));
        assert!(creds.token("hdfs").is_some(), "existing tokens are kept");
        assert!(ctx.environment.iter().any(
            |e| e.key.as_deref() == Some("MAX_APP_ATTEMPTS") && e.value.as_deref() == Some("2")
        ));
        // The container token verifies under the container key, for this node.
        let ct = Token::from_proto(r.container_token.clone().unwrap(), &Limits::default()).unwrap();
        let id = ContainerTokenIdentifier::parse(&ct.identifier).unwrap();
        assert_eq!(id.container_id(), Some(c));
        assert_eq!(id.nm_host_addr(), "127.0.0.5:4545");
        assert_eq!(id.master_key_id(), 11);
        assert_eq!(id.expiry_time_stamp(), 601_000);
        assert_eq!(
            id.container_type(),
            Some(ContainerTypeProto::ApplicationMaster)
        );
        assert_eq!(ct.password, k.container.password(id.bytes()).to_vec());
        // The NMToken names the attempt and node and verifies under the NM key.
        let nid = NmTokenIdentifier::parse(&nm.identifier).unwrap();
        assert_eq!(nid.attempt_id(), Some(attempt));
        assert_eq!(nid.key_id(), 22);
        assert_eq!(nm.password, k.nm.password(nid.bytes()).to_vec());
        assert_eq!(nm.kind, "NMToken");
    }

    #[test]
    fn the_am_environment_is_javas() {
        let app = AppId::new(1_700_000_000_000, 7);
        let mut ctx = ContainerLaunchContextProto {
            environment: vec![
                StringStringMapProto {
                    key: Some("APP_SUBMIT_TIME_ENV".into()),
                    value: Some("1".into()),
                },
                StringStringMapProto {
                    key: Some("CLASSPATH".into()),
                    value: Some("x".into()),
                },
            ],
            ..Default::default()
        };
        set_am_environment(&mut ctx, app, 1_700_000_000_123);
        let get = |k: &str| {
            let v: Vec<_> = ctx
                .environment
                .iter()
                .filter(|e| e.key.as_deref() == Some(k))
                .filter_map(|e| e.value.clone())
                .collect();
            v
        };
        assert_eq!(get("APP_SUBMIT_TIME_ENV"), ["1700000000123"]);
        assert_eq!(
            get("APPLICATION_WEB_PROXY_BASE"),
            ["/proxy/application_1700000000000_0007"]
        );
        assert_eq!(get("CLASSPATH"), ["x"]);
    }

    #[test]
    fn start_outcomes() {
        use hadoop_wire::pb::hadoop::yarn::{ContainerExceptionMapProto, SerializedExceptionProto};
        let ok = StartContainersResponseProto {
            succeeded_requests: vec![ContainerId {
                app: AppId::new(1, 1),
                attempt: 1,
                id: 1,
            }
            .to_proto()],
            ..Default::default()
        };
        assert_eq!(start_outcome(&ok), Ok(()));
        let bad = StartContainersResponseProto {
            failed_requests: vec![ContainerExceptionMapProto {
                container_id: None,
                exception: Some(SerializedExceptionProto {
                    message: Some("no".into()),
                    class_name: Some("org.apache.hadoop.yarn.exceptions.YarnException".into()),
                    ..Default::default()
                }),
            }],
            ..Default::default()
        };
        assert_eq!(
            start_outcome(&bad),
            Err("org.apache.hadoop.yarn.exceptions.YarnException: no".into())
        );
        assert!(start_outcome(&StartContainersResponseProto::default()).is_err());
    }
}
