//! What the three protocol clients share: resolving an address, the connect/retry settings, the
//! idle close, and one typed call (encode with prost, call, decode).
//!
//! **Idle close**: every connection is closed once idle for `ipc.client.connection.maxidletime`
//! (10 s by default: no call in flight, nothing received, no call or ping sent), as Java's
//! `Client.Connection` closes its connections to the RM and to NodeManagers
//! (`ipc::client::ClientConfig::max_idle`); the next call opens a new one and authenticates
//! again. The clients built from a configuration read the key from it; [`ApplicationClient::new`]
//! (no configuration) takes Hadoop's default.
//!
//! [`ApplicationClient::new`]: crate::application_client::ApplicationClient::new

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use conf::Configuration;
use hadoop_wire::sasl::client::ClientAuth;
use ipc::client::{Client, ClientConfig};
use prost::Message;

use crate::error::{call_error, YarnError};

/// How hard a client tries to reach its server. A refused or timed-out connect is retried
/// `connect_attempts` times in all, waiting `backoff_initial × 2^(n−1)` (at most
/// `backoff_max`) between attempts; then the call fails with [`YarnError::Unreachable`].
#[derive(Debug, Clone)]
pub struct Retry {
    pub connect_attempts: u32,
    pub backoff_initial: Duration,
    pub backoff_max: Duration,
    pub connect_timeout: Duration,
    pub call_timeout: Duration,
}

impl Default for Retry {
    fn default() -> Self {
        Retry {
            connect_attempts: 6,
            backoff_initial: Duration::from_millis(200),
            backoff_max: Duration::from_secs(3),
            connect_timeout: Duration::from_secs(10),
            call_timeout: Duration::from_secs(60),
        }
    }
}

/// Resolves `host:port` (the first address the resolver gives, IPv4 preferred as Java does by
/// default).
pub fn resolve(what: &'static str, addr: &str) -> Result<SocketAddr, YarnError> {
    let err = |detail: String| YarnError::Resolve {
        what,
        addr: addr.to_string(),
        detail,
    };
    let all: Vec<SocketAddr> = addr
        .to_socket_addrs()
        .map_err(|e| err(e.to_string()))?
        .collect();
    all.iter()
        .find(|a| a.is_ipv4())
        .or(all.first())
        .copied()
        .ok_or_else(|| err("no address".into()))
}

/// `ipc.client.connection.maxidletime` of `conf` (Hadoop's default 10 s when unset; 0 or less:
/// never closed).
pub fn max_idle(conf: &Configuration) -> Result<Option<Duration>, YarnError> {
    Ok(ipc::client::max_idle_from_conf(conf)?)
}

/// Hadoop's default `ipc.client.connection.maxidletime`, for clients built without a
/// configuration.
pub fn default_max_idle() -> Option<Duration> {
    max_idle(&Configuration::new()).unwrap_or(Some(Duration::from_secs(10)))
}

/// An IPC client of one protocol at one server, and the names its errors carry.
pub(crate) struct Rpc {
    pub client: Client,
    pub addr: SocketAddr,
    pub service: &'static str,
}

impl Rpc {
    /// A client of `protocol` at `addr` (connects lazily, on the first call), its connection
    /// closed after `max_idle` idle ([`max_idle`]; `None`: kept open).
    pub fn new(
        service: &'static str,
        addr: SocketAddr,
        protocol: &str,
        user: &str,
        auth: ClientAuth,
        retry: &Retry,
        max_idle: Option<Duration>,
    ) -> Rpc {
        let client = Client::new(
            addr,
            ClientConfig {
                protocol: protocol.to_string(),
                protocol_version: 1,
                user: user.to_string(),
                connect_timeout: retry.connect_timeout,
                call_timeout: retry.call_timeout,
                backoff_initial: retry.backoff_initial,
                backoff_max: retry.backoff_max,
                max_connect_attempts: retry.connect_attempts.max(1),
                reader_thread_name: "hp-yarn-client".to_string(),
                call_slots: 4,
                auth,
                max_idle,
                ..ClientConfig::default()
            },
        );
        Rpc {
            client,
            addr,
            service,
        }
    }

    /// One call: `req` encoded, `method` called, the response decoded as `R`.
    pub fn call<R: Message + Default>(
        &self,
        method: &'static str,
        req: &impl Message,
    ) -> Result<R, YarnError> {
        let resp = self
            .client
            .call(method, &req.encode_to_vec())
            .map_err(call_error(self.service, method, self.addr))?;
        R::decode(resp.payload()).map_err(|e| YarnError::Malformed {
            method,
            detail: e.to_string(),
        })
    }
}
