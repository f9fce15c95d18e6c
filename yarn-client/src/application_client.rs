//! ApplicationClientProtocol (client → RM, `yarn.resourcemanager.address`), SIMPLE auth with
//! the user name, as `YarnClient` speaks it on an insecure cluster, or (with
//! [`ApplicationClient::from_conf`] and `hadoop.security.authentication=kerberos`) KERBEROS from
//! the ticket cache, the RM named by `yarn.resourcemanager.principal` (`ClientRMSecurityInfo`).
//!
//! [`ApplicationClient`] wraps one IPC connection and types the calls a submitting client
//! needs: `getNewApplication`, `submitApplication`, `getApplicationReport`,
//! `forceKillApplication` and `getClusterNodes`. [`AppReport`] is the part of
//! `ApplicationReportProto` a client watches, with the states as Rust enums.

use std::net::SocketAddr;

use conf::Configuration;
use hadoop_wire::pb::hadoop::yarn::{
    ApplicationReportProto, ApplicationSubmissionContextProto, GetApplicationReportRequestProto,
    GetApplicationReportResponseProto, GetClusterNodesRequestProto, GetClusterNodesResponseProto,
    GetNewApplicationRequestProto, GetNewApplicationResponseProto, KillApplicationRequestProto,
    KillApplicationResponseProto, NodeReportProto, ResourceProto, SubmitApplicationRequestProto,
    SubmitApplicationResponseProto,
};
use hadoop_wire::yarn::ids::AppId;
use hadoop_wire::yarn::{acp, APPLICATION_CLIENT_PROTOCOL};

use crate::error::YarnError;
use crate::rpc::{resolve, Retry, Rpc};

/// `yarn.resourcemanager.address`.
pub const RM_ADDRESS_KEY: &str = "yarn.resourcemanager.address";

const SERVICE: &str = "ResourceManager (ApplicationClientProtocol)";

/// The submitting user on an insecure cluster: `HADOOP_USER_NAME`, else `USER`, else the
/// name Java would fall back to for an unknown uid is not knowable here: `"hotpath"`.
pub fn current_user() -> String {
    ["HADOOP_USER_NAME", "USER", "LOGNAME"]
        .iter()
        .find_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty()))
        .unwrap_or_else(|| "hotpath".to_string())
}

/// `YarnApplicationStateProto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppState {
    New,
    NewSaving,
    Submitted,
    Accepted,
    Running,
    Finished,
    Failed,
    Killed,
}

impl AppState {
    fn from_i32(v: i32) -> Option<AppState> {
        Some(match v {
            1 => AppState::New,
            2 => AppState::NewSaving,
            3 => AppState::Submitted,
            4 => AppState::Accepted,
            5 => AppState::Running,
            6 => AppState::Finished,
            7 => AppState::Failed,
            8 => AppState::Killed,
            _ => return None,
        })
    }

    /// FINISHED, FAILED or KILLED.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            AppState::Finished | AppState::Failed | AppState::Killed
        )
    }

    /// Java's enum name.
    pub fn as_str(self) -> &'static str {
        match self {
            AppState::New => "NEW",
            AppState::NewSaving => "NEW_SAVING",
            AppState::Submitted => "SUBMITTED",
            AppState::Accepted => "ACCEPTED",
            AppState::Running => "RUNNING",
            AppState::Finished => "FINISHED",
            AppState::Failed => "FAILED",
            AppState::Killed => "KILLED",
        }
    }
}

/// `FinalApplicationStatusProto`: what the AM said when it unregistered (or what the RM decided).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinalStatus {
    Undefined,
    Succeeded,
    Failed,
    Killed,
    Ended,
}

impl FinalStatus {
    /// From the proto value; an unknown value is `Undefined`.
    pub fn from_i32(v: i32) -> FinalStatus {
        match v {
            1 => FinalStatus::Succeeded,
            2 => FinalStatus::Failed,
            3 => FinalStatus::Killed,
            4 => FinalStatus::Ended,
            _ => FinalStatus::Undefined,
        }
    }

    /// The proto value.
    pub fn to_i32(self) -> i32 {
        match self {
            FinalStatus::Undefined => 0,
            FinalStatus::Succeeded => 1,
            FinalStatus::Failed => 2,
            FinalStatus::Killed => 3,
            FinalStatus::Ended => 4,
        }
    }

    /// Java's enum name.
    pub fn as_str(self) -> &'static str {
        match self {
            FinalStatus::Undefined => "UNDEFINED",
            FinalStatus::Succeeded => "SUCCEEDED",
            FinalStatus::Failed => "FAILED",
            FinalStatus::Killed => "KILLED",
            FinalStatus::Ended => "ENDED",
        }
    }
}

/// What a client watches of an `ApplicationReportProto`.
#[derive(Debug, Clone, PartialEq)]
pub struct AppReport {
    pub app: AppId,
    pub state: AppState,
    pub final_status: FinalStatus,
    pub diagnostics: String,
    /// What the AM registered (`original_tracking_url`), not the RM's proxy URL; `None` until
    /// it registered ("N/A" is how Java says so).
    pub original_tracking_url: Option<String>,
    /// The AM's host as registered (`"N/A"` before).
    pub host: String,
    pub rpc_port: i32,
    pub progress: f32,
    pub current_attempt: Option<i32>,
}

impl AppReport {
    fn from_proto(p: ApplicationReportProto) -> Result<AppReport, YarnError> {
        let malformed = |detail: &str| YarnError::Malformed {
            method: acp::GET_APPLICATION_REPORT,
            detail: detail.to_string(),
        };
        let app = p
            .application_id
            .as_ref()
            .map(|a| AppId::new(a.cluster_timestamp(), a.id()))
            .ok_or_else(|| malformed("no application_id"))?;
        let state = p
            .yarn_application_state
            .and_then(AppState::from_i32)
            .ok_or_else(|| malformed("no or unknown yarn_application_state"))?;
        let url = p
            .original_tracking_url
            .clone()
            .filter(|u| !u.trim().is_empty() && u.trim() != "N/A");
        Ok(AppReport {
            app,
            state,
            final_status: FinalStatus::from_i32(p.final_application_status.unwrap_or(0)),
            diagnostics: p.diagnostics.clone().unwrap_or_default(),
            original_tracking_url: url,
            host: p.host.clone().unwrap_or_default(),
            rpc_port: p.rpc_port.unwrap_or(-1),
            progress: p.progress.unwrap_or(0.0),
            current_attempt: p
                .current_application_attempt_id
                .as_ref()
                .and_then(|a| a.attempt_id),
        })
    }
}

/// A new application id and the largest container the cluster grants.
#[derive(Debug, Clone, PartialEq)]
pub struct NewApplication {
    pub app: AppId,
    pub maximum_capability: Option<ResourceProto>,
}

/// A client of the RM's ApplicationClientProtocol.
pub struct ApplicationClient {
    rpc: Rpc,
}

impl ApplicationClient {
    /// A client for the RM at `addr` as `user` (SIMPLE auth; idle connections closed after
    /// Hadoop's default `ipc.client.connection.maxidletime`).
    pub fn new(addr: SocketAddr, user: &str, retry: &Retry) -> ApplicationClient {
        ApplicationClient {
            rpc: Rpc::new(
                SERVICE,
                addr,
                APPLICATION_CLIENT_PROTOCOL,
                user,
                Default::default(),
                retry,
                crate::rpc::default_max_idle(),
            ),
        }
    }

    /// A client for the RM at `addr` with `conf`'s security: SIMPLE as `user` on an insecure
    /// cluster; with `hadoop.security.authentication=kerberos`, KERBEROS as the ticket cache's
    /// principal (`KRB5CCNAME`, after `kinit`) at `hadoop.rpc.protection`, accepting the RM
    /// only as `yarn.resourcemanager.principal` (`_HOST` = the canonical name of `addr`). An
    /// idle connection is closed after `ipc.client.connection.maxidletime`.
    pub fn from_conf(
        addr: SocketAddr,
        conf: &Configuration,
        user: &str,
        retry: &Retry,
    ) -> Result<ApplicationClient, YarnError> {
        // An insecure client speaks SIMPLE and reads no SASL settings (as Java's, which builds
        // no SASL client then).
        let simple = conf
            .get("hadoop.security.authentication")
            .is_none_or(|v| v.trim().eq_ignore_ascii_case("simple"));
        let mut auth = if simple {
            Default::default()
        } else {
            ipc::sasl::client_auth(conf, None)?
        };
        if auth.security_enabled {
            let host = ipc::kerberos::canonical_host_name(addr.ip());
            auth.kerberos = Some(ipc::kerberos::kerberos_client(
                conf,
                "yarn.resourcemanager.principal",
                &host,
                None,
            )?);
        }
        Ok(ApplicationClient {
            rpc: Rpc::new(
                SERVICE,
                addr,
                APPLICATION_CLIENT_PROTOCOL,
                user,
                auth,
                retry,
                crate::rpc::max_idle(conf)?,
            ),
        })
    }

    /// The RM address of `conf` (`yarn.resourcemanager.address`, default port 8032), resolved.
    pub fn address_from_conf(conf: &Configuration) -> Result<SocketAddr, YarnError> {
        let hp = conf.get_address(RM_ADDRESS_KEY)?;
        resolve("yarn.resourcemanager.address", &hp.to_string())
    }

    /// The RM this client talks to.
    pub fn addr(&self) -> SocketAddr {
        self.rpc.addr
    }

    /// `getNewApplication`.
    pub fn new_application(&self) -> Result<NewApplication, YarnError> {
        let r: GetNewApplicationResponseProto = self
            .rpc
            .call(acp::GET_NEW_APPLICATION, &GetNewApplicationRequestProto {})?;
        let a = r.application_id.ok_or_else(|| YarnError::Malformed {
            method: acp::GET_NEW_APPLICATION,
            detail: "no application_id".into(),
        })?;
        Ok(NewApplication {
            app: AppId::new(a.cluster_timestamp(), a.id()),
            maximum_capability: r.maximum_capability,
        })
    }

    /// `submitApplication`.
    pub fn submit(&self, ctx: ApplicationSubmissionContextProto) -> Result<(), YarnError> {
        let _: SubmitApplicationResponseProto = self.rpc.call(
            acp::SUBMIT_APPLICATION,
            &SubmitApplicationRequestProto {
                application_submission_context: Some(ctx),
            },
        )?;
        Ok(())
    }

    /// `getApplicationReport`.
    pub fn report(&self, app: AppId) -> Result<AppReport, YarnError> {
        let r: GetApplicationReportResponseProto = self.rpc.call(
            acp::GET_APPLICATION_REPORT,
            &GetApplicationReportRequestProto {
                application_id: Some(app.to_proto()),
            },
        )?;
        let p = r.application_report.ok_or_else(|| YarnError::Malformed {
            method: acp::GET_APPLICATION_REPORT,
            detail: "no application_report".into(),
        })?;
        AppReport::from_proto(p)
    }

    /// `forceKillApplication` (what `YarnClient.killApplication` sends); `true` once the RM
    /// says the kill is complete (call again until it is, as Java does).
    pub fn kill(&self, app: AppId, diagnostics: &str) -> Result<bool, YarnError> {
        let r: KillApplicationResponseProto = self.rpc.call(
            acp::FORCE_KILL_APPLICATION,
            &KillApplicationRequestProto {
                application_id: Some(app.to_proto()),
                diagnostics: Some(diagnostics.to_string()),
            },
        )?;
        Ok(r.is_kill_completed.unwrap_or(false))
    }

    /// `getClusterNodes` for the given `NodeStateProto` values (empty: the RM's default, RUNNING).
    pub fn cluster_nodes(&self, states: &[i32]) -> Result<Vec<NodeReportProto>, YarnError> {
        let r: GetClusterNodesResponseProto = self.rpc.call(
            acp::GET_CLUSTER_NODES,
            &GetClusterNodesRequestProto {
                node_states: states.to_vec(),
            },
        )?;
        Ok(r.node_reports)
    }
}
