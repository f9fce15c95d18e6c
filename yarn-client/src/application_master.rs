//! ApplicationMasterProtocol (AM → RM, `yarn.resourcemanager.scheduler.address`), TOKEN auth
//! with the attempt's AMRMToken.
//!
//! The token reaches the AM in the Credentials file its NodeManager writes
//! (`HADOOP_TOKEN_FILE_LOCATION`, "HDTS"): [`amrm_token_from_env`] picks it by kind
//! `YARN_AM_RM_TOKEN`. Its service is not compared: Java's `ClientRMProxy.setAMRMTokenService`
//! overwrites the service of every AMRMToken with the scheduler address before the selector
//! looks, so a kind match is what Java ends up with too.
//!
//! [`ApplicationMaster`] types `registerApplicationMaster`, `allocate` and
//! `finishApplicationMaster`. When the RM rolls its AMRM master key, an allocate response
//! carries a new token (`am_rm_token`); [`ApplicationMaster::update_token`] takes it, and the
//! next call goes out on a new connection authenticated with it (Java swaps the token in the
//! UGI and uses it on its next connection; the RM accepts the old key until the roll is
//! activated, so the switch may happen at once).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

use conf::Configuration;
use hadoop_wire::pb::hadoop::yarn::{
    AllocateRequestProto, AllocateResponseProto, FinishApplicationMasterRequestProto,
    FinishApplicationMasterResponseProto, RegisterApplicationMasterRequestProto,
    RegisterApplicationMasterResponseProto,
};
use hadoop_wire::sasl::client::TokenCredential;
use hadoop_wire::token::{Credentials, Token, KIND_AMRM};
use hadoop_wire::yarn::{amp, APPLICATION_MASTER_PROTOCOL};

use crate::error::YarnError;
use crate::rpc::{resolve, Retry, Rpc};

/// `yarn.resourcemanager.scheduler.address`.
pub const SCHEDULER_ADDRESS_KEY: &str = "yarn.resourcemanager.scheduler.address";
/// The environment variable naming the container's Credentials file.
pub const TOKEN_FILE_ENV: &str = "HADOOP_TOKEN_FILE_LOCATION";
/// Largest Credentials file read (a container's holds a few tokens).
const MAX_TOKEN_FILE: u64 = 16 << 20;

const SERVICE: &str = "ResourceManager (ApplicationMasterProtocol)";

/// The AMRMToken of the Credentials file at `$HADOOP_TOKEN_FILE_LOCATION`.
pub fn amrm_token_from_env() -> Result<Token, YarnError> {
    let path = std::env::var(TOKEN_FILE_ENV).map_err(|_| {
        YarnError::Config(format!(
            "{TOKEN_FILE_ENV} is not set: `app am` runs inside the AM container a NodeManager \
             started, which points it at the container's Credentials file"
        ))
    })?;
    amrm_token_from_file(std::path::Path::new(&path))
}

/// The AMRMToken (kind `YARN_AM_RM_TOKEN`) of the Credentials file at `path`.
pub fn amrm_token_from_file(path: &std::path::Path) -> Result<Token, YarnError> {
    let err = |detail: String| YarnError::Credentials {
        path: path.display().to_string(),
        detail,
    };
    let len = std::fs::metadata(path)
        .map_err(|e| err(e.to_string()))?
        .len();
    if len > MAX_TOKEN_FILE {
        return Err(err(format!("{len} bytes, more than {MAX_TOKEN_FILE}")));
    }
    let bytes = std::fs::read(path).map_err(|e| err(e.to_string()))?;
    let creds = Credentials::read(&bytes).map_err(|e| err(e.to_string()))?;
    select_amrm_token(&creds).ok_or_else(|| err(format!("no {KIND_AMRM} token in it")))
}

/// The first token of kind `YARN_AM_RM_TOKEN` (service not compared; see the module docs).
pub fn select_amrm_token(creds: &Credentials) -> Option<Token> {
    creds.tokens_of_kind(KIND_AMRM).next().cloned()
}

/// A client of the RM's ApplicationMasterProtocol, authenticated with the AMRMToken.
pub struct ApplicationMaster {
    addr: SocketAddr,
    conf: Configuration,
    retry: Retry,
    rpc: Mutex<Rpc>,
    token: Mutex<Token>,
    rolls: AtomicU32,
}

impl ApplicationMaster {
    /// A client for the scheduler at `addr` with `token`; `conf` gives the SASL settings
    /// (`hadoop.rpc.protection`, ...) and `ipc.client.connection.maxidletime`.
    pub fn new(
        addr: SocketAddr,
        token: Token,
        conf: &Configuration,
        retry: &Retry,
    ) -> Result<ApplicationMaster, YarnError> {
        let rpc = Self::rpc(addr, &token, conf, retry)?;
        Ok(ApplicationMaster {
            addr,
            conf: conf.clone(),
            retry: retry.clone(),
            rpc: Mutex::new(rpc),
            token: Mutex::new(token),
            rolls: AtomicU32::new(0),
        })
    }

    /// The scheduler address of `conf` (`yarn.resourcemanager.scheduler.address`, default
    /// port 8030), resolved.
    pub fn address_from_conf(conf: &Configuration) -> Result<SocketAddr, YarnError> {
        let hp = conf.get_address(SCHEDULER_ADDRESS_KEY)?;
        resolve("yarn.resourcemanager.scheduler.address", &hp.to_string())
    }

    fn rpc(
        addr: SocketAddr,
        token: &Token,
        conf: &Configuration,
        retry: &Retry,
    ) -> Result<Rpc, YarnError> {
        let auth = ipc::sasl::client_auth(
            conf,
            Some(TokenCredential {
                identifier: token.identifier.clone(),
                password: token.password.clone(),
            }),
        )?;
        // The TOKEN connection context names no user; the token says who we are.
        Ok(Rpc::new(
            SERVICE,
            addr,
            APPLICATION_MASTER_PROTOCOL,
            "",
            auth,
            retry,
            crate::rpc::max_idle(conf)?,
        ))
    }

    /// How many rolled tokens were taken.
    pub fn token_rolls(&self) -> u32 {
        self.rolls.load(Ordering::Relaxed)
    }

    /// The token in use.
    pub fn token(&self) -> Token {
        self.token.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Takes a rolled AMRMToken (allocate's `am_rm_token`): later calls authenticate with it
    /// on a new connection. The same token again changes nothing.
    pub fn update_token(&self, mut token: Token) -> Result<bool, YarnError> {
        let mut cur = self.token.lock().unwrap_or_else(|p| p.into_inner());
        if token.identifier == cur.identifier && token.password == cur.password {
            return Ok(false);
        }
        if token.kind.is_empty() {
            token.kind = KIND_AMRM.to_string();
        }
        let rpc = Self::rpc(self.addr, &token, &self.conf, &self.retry)?;
        let old = std::mem::replace(
            &mut *self.rpc.lock().unwrap_or_else(|p| p.into_inner()),
            rpc,
        );
        old.client.disconnect();
        *cur = token;
        self.rolls.fetch_add(1, Ordering::Relaxed);
        tracing::info!("AMRMToken rolled; reconnecting with the new one");
        Ok(true)
    }

    fn call<R: prost::Message + Default>(
        &self,
        method: &'static str,
        req: &impl prost::Message,
    ) -> Result<R, YarnError> {
        self.rpc
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .call(method, req)
    }

    /// `registerApplicationMaster`.
    pub fn register(
        &self,
        host: &str,
        rpc_port: i32,
        tracking_url: &str,
    ) -> Result<RegisterApplicationMasterResponseProto, YarnError> {
        self.call(
            amp::REGISTER_APPLICATION_MASTER,
            &RegisterApplicationMasterRequestProto {
                host: Some(host.to_string()),
                rpc_port: Some(rpc_port),
                tracking_url: Some(tracking_url.to_string()),
                placement_constraints: vec![],
            },
        )
    }

    /// `allocate`: the AM's heartbeat. A rolled AMRMToken in the response is taken at once.
    pub fn allocate(&self, req: &AllocateRequestProto) -> Result<AllocateResponseProto, YarnError> {
        let resp: AllocateResponseProto = self.call(amp::ALLOCATE, req)?;
        if let Some(t) = &resp.am_rm_token {
            self.update_token(Token::new(
                t.identifier.clone(),
                t.password.clone(),
                t.kind.clone(),
                t.service.clone(),
            ))?;
        }
        Ok(resp)
    }

    /// `finishApplicationMaster`; `true` once the RM says the AM is unregistered (Java calls
    /// again, 100 ms apart, until it is).
    pub fn finish(&self, req: &FinishApplicationMasterRequestProto) -> Result<bool, YarnError> {
        let r: FinishApplicationMasterResponseProto =
            self.call(amp::FINISH_APPLICATION_MASTER, req)?;
        Ok(r.is_unregistered.unwrap_or(false))
    }
}
