//! `hotpath rm …`: thin wiring of `rm-core` to the command line.
//!
//! `hotpath rm` runs the ResourceTracker service from `yarn-site.xml` (resource-tracker address,
//! heartbeat interval, NM expiry, opportunistic flag, include/exclude lists), pins its threads by
//! `hw::Plan::for_rm`, serves Prometheus text at `/metrics` from the main (housekeeping) thread,
//! re-reads the host lists on SIGHUP and stops on SIGINT/SIGTERM. `finish-app` and
//! `kill-container` talk to a running RM over our admin protocol on the same port;
//! `refresh-nodes` is Hadoop's `yarn rmadmin -refreshNodes` on the admin port.
//!
//! `yarn rmadmin` (Hadoop's `ResourceManagerAdministrationProtocol`, [`rm_core::admin`]) is
//! served on `yarn.resourcemanager.admin.address` (8033), authenticated as the client port and
//! checked against `yarn.admin.acl`. The configuration is the site files plus
//! `capacity-scheduler.xml` and `hadoop-policy.xml` from the same directory (where a Java RM
//! reads queue and service ACLs), then `--set`.
//!
//! Applications (unless `hotpath.rm.applications.enabled=false`): ApplicationClientProtocol on
//! `yarn.resourcemanager.address` (8032) and ApplicationMasterProtocol on
//! `yarn.resourcemanager.scheduler.address` (8030), both overridable with `--set`; the READY
//! line names them as `client` and `scheduler`. With `hadoop.security.authentication=kerberos`
//! the client port takes KERBEROS and the scheduler port TOKEN only, as a Kerberized Java RM's
//! do ([`apps_security`]). `yarn.acl.enable=true` turns on the application ACLs ([`app_acls`]).

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use ipc::client::{Client, ClientConfig};
use rm_core::dispatcher::Placement;
use rm_core::service::{admin, RmService, ADMIN_PROTOCOL};
use rm_core::RmConfig;

#[derive(Args)]
pub struct RmArgs {
    /// Directory with yarn-site.xml (default: $HADOOP_CONF_DIR).
    #[arg(long, global = true)]
    conf_dir: Option<PathBuf>,
    /// Override a configuration key (`key=value`, repeatable).
    #[arg(long = "set", global = true, value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// The RM to talk to (admin subcommands) or to listen on (server), overriding
    /// `yarn.resourcemanager.resource-tracker.address`.
    #[arg(long, global = true)]
    address: Option<String>,
    /// Prometheus `/metrics` port (overrides `hotpath.rm.metrics.port`; 0 = any free port).
    #[arg(long)]
    metrics_port: Option<u16>,
    /// Print one `READY {json}` line on stdout once serving (for scripts and tests).
    #[arg(long)]
    ready_line: bool,
    #[command(subcommand)]
    cmd: Option<RmCmd>,
}

#[derive(Subcommand)]
enum RmCmd {
    /// Mark an application finished: it goes to applications_to_cleanup once on each node.
    FinishApp { app_id: String },
    /// Kill a container: it goes to containers_to_cleanup on its node.
    KillContainer { container_id: String },
    /// Re-read the include/exclude host lists (as SIGHUP does): `yarn rmadmin -refreshNodes`
    /// on the admin port (`yarn.resourcemanager.admin.address`, or `--admin-address`).
    RefreshNodes {
        /// Decommission newly excluded nodes gracefully, waiting up to this many seconds for
        /// their containers (negative: `yarn.resourcemanager.nodemanager-graceful-decommission-timeout-secs`).
        #[arg(
            short = 'g',
            long = "graceful",
            value_name = "SECS",
            allow_hyphen_values = true
        )]
        graceful: Option<i32>,
        /// The admin address to call.
        #[arg(long)]
        admin_address: Option<String>,
    },
}

fn tracker_address(conf: &conf::Configuration, flag: &Option<String>) -> Result<SocketAddr> {
    let text = match flag {
        Some(a) => a.clone(),
        None => {
            let hp = conf
                .get_address("yarn.resourcemanager.resource-tracker.address")
                .context("yarn.resourcemanager.resource-tracker.address")?;
            format!("{}:{}", hp.host, hp.port)
        }
    };
    text.to_socket_addrs()
        .with_context(|| format!("resolving {text}"))?
        .next()
        .with_context(|| format!("{text} resolves to nothing"))
}

/// An RM address key (`yarn.resourcemanager.address`, `….scheduler.address`), defaulting to
/// `${yarn.resourcemanager.hostname}:port` as yarn-default.xml does.
fn rm_address(conf: &conf::Configuration, key: &str, port: u16) -> Result<SocketAddr> {
    let text = match conf.get(key) {
        Some(_) => {
            let hp = conf.get_socket_addr(key, port).context(key.to_string())?;
            format!("{}:{}", hp.host, hp.port)
        }
        None => format!(
            "{}:{port}",
            conf.get("yarn.resourcemanager.hostname")
                .unwrap_or("0.0.0.0")
        ),
    };
    text.to_socket_addrs()
        .with_context(|| format!("{key}: resolving {text}"))?
        .next()
        .with_context(|| format!("{key}: {text} resolves to nothing"))
}

/// Whether `hotpath rm` runs applications (`hotpath.rm.applications.enabled`, default true),
/// and with which addresses and settings.
fn apps_setup(conf: &conf::Configuration) -> Result<Option<rm_core::service::AppsSetup>> {
    let on = match conf.get("hotpath.rm.applications.enabled") {
        None => true,
        Some(v) => v
            .trim()
            .parse::<bool>()
            .context("hotpath.rm.applications.enabled: not a boolean")?,
    };
    if !on {
        return Ok(None);
    }
    let client = rm_address(conf, "yarn.resourcemanager.address", 8032)?;
    let cfg = rm_core::apps::AppsConfig::from_conf(conf)?;
    let mut security = apps_security(conf, client)?;
    security.app_acls = app_acls(conf, &cfg.queues, security.client_auth.is_some(), client)?;
    Ok(Some(rm_core::service::AppsSetup {
        cfg,
        client,
        scheduler: rm_address(conf, "yarn.resourcemanager.scheduler.address", 8030)?,
        qops: ipc::sasl::protection(conf).context("hadoop.rpc.protection")?,
        security,
    }))
}

/// The RM's own short name: of `yarn.resourcemanager.principal` (`_HOST` = `bind`'s host,
/// by `auth_to_local`) when Kerberized, else `HADOOP_USER_NAME` / the process's user.
fn daemon_user(conf: &conf::Configuration, kerberos: bool, bind: SocketAddr) -> Option<String> {
    if kerberos {
        conf.get("yarn.resourcemanager.principal").and_then(|p| {
            let host = ipc::kerberos::server_host_name(bind.ip());
            let p = hadoop_wire::sasl::gssapi::replace_host(p.trim(), &host);
            let realm = p.rsplit_once('@').map(|(_, r)| r).unwrap_or("");
            let rules = conf
                .get("hadoop.security.auth_to_local")
                .unwrap_or("DEFAULT");
            hadoop_wire::sasl::kerberos_name::AuthToLocal::new(rules, realm)
                .and_then(|m| m.short_name(&p))
                .ok()
        })
    } else {
        Some(yarn_client::application_client::current_user())
    }
}

/// `yarn.acl.enable`: the application ACLs ([`rm_core::app_acls`]), with `yarn.admin.acl`, the
/// queues' `acl_administer_queue` keys and groups from the name service. The RM's own user is
/// an admin, as Java's `AdminACLsManager` adds its login user: the short name of
/// `yarn.resourcemanager.principal` (by `auth_to_local`) when Kerberized, else
/// `HADOOP_USER_NAME` / the process's user.
fn app_acls(
    conf: &conf::Configuration,
    queues: &[String],
    kerberos: bool,
    client: SocketAddr,
) -> Result<Option<Arc<rm_core::app_acls::AclPolicy>>> {
    let daemon_user = daemon_user(conf, kerberos, client);
    let policy = rm_core::app_acls::AclPolicy::from_conf(
        conf,
        queues,
        daemon_user.clone(),
        Box::new(ipc::authorize::UnixGroups),
    )?;
    if policy.is_some() {
        tracing::info!(
            "application ACLs on (yarn.acl.enable): admins {:?} and the RM's user {:?}",
            conf.get(rm_core::app_acls::ADMIN_ACL)
                .unwrap_or(rm_core::app_acls::DEFAULT_ADMIN_ACL),
            daemon_user.unwrap_or_default()
        );
    }
    Ok(policy.map(Arc::new))
}

/// The application ports' security, as a Kerberized Java RM has it: with
/// `hadoop.security.authentication=kerberos` ApplicationClientProtocol takes TOKEN (an
/// `RM_DELEGATION_TOKEN`, [`rm_core::rm_delegation`]) and KERBEROS
/// (`yarn.resourcemanager.principal`, `_HOST` = the client port's bind host, keys from
/// `yarn.resourcemanager.keytab`, callers named by `hadoop.security.auth_to_local`) at
/// `hadoop.rpc.protection`, and ApplicationMasterProtocol TOKEN only (the AMRMToken); with
/// `hadoop.security.authorization` the ACLs `security.applicationclient.protocol.acl` and
/// `security.applicationmaster.protocol.acl` (groups from the name service).
fn apps_security(
    conf: &conf::Configuration,
    client: SocketAddr,
) -> Result<rm_core::service::AppsSecurity> {
    use rm_core::rm_delegation::{
        config_from_conf, RmDelegationSecrets, RmDelegationTokenSecretManager, ShortNames,
    };
    let kerberized = conf
        .get("hadoop.security.authentication")
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("kerberos"));
    // The RM's login user (its principal, _HOST = the client port's host) and the
    // auth_to_local rules that name token owners and renewers by their short names.
    let login_user = kerberized
        .then(|| conf.get("yarn.resourcemanager.principal"))
        .flatten()
        .map(|p| {
            let host = ipc::kerberos::server_host_name(client.ip());
            hadoop_wire::sasl::gssapi::replace_host(p.trim(), &host)
        });
    let names = match &login_user {
        Some(p) => {
            let realm = p.rsplit_once('@').map(|(_, r)| r).unwrap_or("");
            let rules = conf
                .get("hadoop.security.auth_to_local")
                .unwrap_or("DEFAULT");
            Some(
                hadoop_wire::sasl::kerberos_name::AuthToLocal::new(rules, realm)
                    .map_err(|e| anyhow::anyhow!("hadoop.security.auth_to_local: {e}"))?,
            )
        }
        None => None,
    };
    let dt_cfg = config_from_conf(conf)?;
    let delegation = Arc::new(RmDelegationSecrets::new(
        RmDelegationTokenSecretManager::new(dt_cfg)?,
        Box::new(|| rm_core::dispatcher::wall_ms() as i64),
        ShortNames::new(names),
    ));
    let secrets: Arc<dyn hadoop_wire::sasl::server::TokenSecrets> = delegation.clone();
    let auth = ipc::sasl::daemon_server_auth(
        conf,
        kerberized.then_some(secrets),
        "yarn.resourcemanager.principal",
        "yarn.resourcemanager.keytab",
        || ipc::kerberos::server_host_name(client.ip()),
    )
    .context("ApplicationClientProtocol authentication")?;
    let kerberos = auth
        .methods()
        .contains(&hadoop_wire::sasl::message::AuthMethod::Kerberos);
    if kerberos {
        tracing::info!(
            "ApplicationClientProtocol: KERBEROS as {} ({}); ApplicationMasterProtocol: TOKEN",
            conf.get("yarn.resourcemanager.principal").unwrap_or(""),
            auth.methods_text()
        );
    }
    let authorization = ipc::authorize::ServiceAuthorization::from_conf(
        conf,
        rm_core::service::APPS_SERVICE_ACLS,
        Box::new(ipc::authorize::UnixGroups),
    )
    .map_err(anyhow::Error::msg)?
    .map(Arc::new);
    Ok(rm_core::service::AppsSecurity {
        client_auth: kerberos.then(|| Arc::new(auth)),
        authorization,
        app_acls: None,
        delegation: Some(delegation),
        login_user,
        proxy_users: Some(proxy_users(conf)),
    })
}

pub fn run(args: RmArgs) -> Result<()> {
    let conf = rm_core::config::rm_configuration(args.conf_dir.as_deref(), &args.set)
        .context("reading the Hadoop configuration")?;
    let addr = tracker_address(&conf, &args.address)?;
    match args.cmd {
        None => serve(
            &conf,
            addr,
            args.metrics_port,
            args.ready_line,
            (args.conf_dir.clone(), args.set.clone()),
        ),
        Some(RmCmd::FinishApp { app_id }) => {
            admin_call(&conf, addr, admin::FINISH_APPLICATION, Some(app_id))
        }
        Some(RmCmd::KillContainer { container_id }) => {
            admin_call(&conf, addr, admin::KILL_CONTAINER, Some(container_id))
        }
        Some(RmCmd::RefreshNodes {
            graceful,
            admin_address,
        }) => {
            let addr = match admin_address {
                Some(a) => a
                    .to_socket_addrs()
                    .with_context(|| format!("resolving {a}"))?
                    .next()
                    .with_context(|| format!("{a} resolves to nothing"))?,
                None => rm_address(
                    &conf,
                    rm_core::admin::ADDRESS_KEY,
                    rm_core::admin::DEFAULT_PORT,
                )?,
            };
            rmadmin_refresh_nodes(&conf, addr, graceful)
        }
    }
}

/// The ResourceTracker port's security: `hadoop.rpc.protection`, and with
/// `hadoop.security.authentication=kerberos` KERBEROS as `yarn.resourcemanager.principal`
/// (`_HOST` = the bind host's canonical name, or the local host's for a wildcard bind) with its
/// keys from `yarn.resourcemanager.keytab` — a keytab without the principal stops the start
/// here; `hadoop.security.authorization` with the protocols' ACLs
/// (`security.resourcetracker.protocol.acl`, ...), groups from the name service.
fn secure(
    conf: &conf::Configuration,
    addr: SocketAddr,
    server_cfg: &mut ipc::server::ServerConfig,
) -> Result<()> {
    let auth = ipc::sasl::daemon_server_auth(
        conf,
        None,
        "yarn.resourcemanager.principal",
        "yarn.resourcemanager.keytab",
        || ipc::kerberos::server_host_name(addr.ip()),
    )
    .context("ResourceTracker authentication")?;
    if auth
        .methods()
        .contains(&hadoop_wire::sasl::message::AuthMethod::Kerberos)
    {
        tracing::info!(
            "ResourceTracker: KERBEROS as {} ({})",
            conf.get("yarn.resourcemanager.principal").unwrap_or(""),
            auth.methods_text()
        );
    }
    server_cfg.auth = Arc::new(auth);
    server_cfg.authorization = ipc::authorize::ServiceAuthorization::from_conf(
        conf,
        rm_core::service::TRACKER_SERVICE_ACLS,
        Box::new(ipc::authorize::UnixGroups),
    )
    .map_err(anyhow::Error::msg)?
    .map(Arc::new);
    Ok(())
}

fn admin_call(
    conf: &conf::Configuration,
    addr: SocketAddr,
    method: &str,
    id: Option<String>,
) -> Result<()> {
    use prost::Message;
    // A Kerberized RM wants KERBEROS from its admin client too: the ticket cache's principal
    // (kinit), the RM's principal from yarn.resourcemanager.principal.
    let mut auth = ipc::sasl::client_auth(conf, None).context("client authentication")?;
    if auth.security_enabled {
        let host = ipc::kerberos::canonical_host_name(addr.ip());
        auth.kerberos = Some(
            ipc::kerberos::kerberos_client(conf, "yarn.resourcemanager.principal", &host, None)
                .context("RM Kerberos principal")?,
        );
    }
    let client = Client::new(
        addr,
        ClientConfig {
            protocol: ADMIN_PROTOCOL.into(),
            call_timeout: Duration::from_secs(10),
            auth,
            ..ClientConfig::default()
        },
    );
    let req = admin::AdminRequestProto { id }.encode_to_vec();
    let resp = client
        .call(method, &req)
        .with_context(|| format!("{method} on {addr}"))?;
    let resp: admin::AdminResponseProto = resp.decode().context("admin response")?;
    println!("{}", resp.message.unwrap_or_default());
    Ok(())
}

/// The RM's HDFS client for [`rm_core::token_renewer`]: renews and cancels
/// `HDFS_DELEGATION_TOKEN`s at the NameNode their service names (`host:port`, or
/// `ha-hdfs:<nameservice>` through the HA keys), logged in from `yarn.resourcemanager.keytab` as
/// `yarn.resourcemanager.principal` (Java's RM renews with its own login). One client per
/// service, kept.
struct HdfsRenewal {
    conf: conf::Configuration,
    principal: String,
    keytab: Option<PathBuf>,
    clients:
        std::sync::Mutex<std::collections::HashMap<String, Arc<hdfs_io::namenode::NameNodeClient>>>,
}

impl HdfsRenewal {
    fn client(&self, service: &str) -> Result<Arc<hdfs_io::namenode::NameNodeClient>, String> {
        let mut g = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = g.get(service) {
            return Ok(c.clone());
        }
        let mut conf = self.conf.clone();
        let authority = service.strip_prefix("ha-hdfs:").unwrap_or(service);
        conf.set("fs.defaultFS", &format!("hdfs://{authority}"));
        let base = hdfs_io::namenode::NameNodeConfig {
            kerberos: Some(hdfs_io::namenode::NameNodeKerberos {
                server_principal: String::new(),
                client_principal: Some(self.principal.clone()),
                keytab: self.keytab.clone(),
            }),
            credentials: Some(Arc::new(hadoop_wire::token::Credentials::default())),
            ..Default::default()
        };
        let c = Arc::new(
            hdfs_io::namenode::NameNodeClient::from_conf_with(&conf, base)
                .map_err(|e| format!("NameNode client for {service}: {e}"))?,
        );
        g.insert(service.to_string(), c.clone());
        Ok(c)
    }
}

impl rm_core::token_renewer::TokenRenewal for HdfsRenewal {
    fn manages(&self, kind: &str) -> bool {
        kind == hadoop_wire::token::KIND_HDFS_DELEGATION
    }

    fn renew(&self, token: &hadoop_wire::token::Token) -> Result<i64, String> {
        self.client(&token.service)?
            .renew_delegation_token(token)
            .map_err(|e| e.to_string())
    }

    fn cancel(&self, token: &hadoop_wire::token::Token) -> Result<(), String> {
        self.client(&token.service)?
            .cancel_delegation_token(token)
            .map_err(|e| e.to_string())
    }

    fn describe(&self, token: &hadoop_wire::token::Token) -> String {
        hdfs_io::tokens::describe(token)
    }
}

/// On a Kerberized RM, the applications' token renewer ([`rm_core::token_renewer`]), renewing
/// as the RM's principal (`login_user`, `_HOST` replaced) from `yarn.resourcemanager.keytab`.
fn token_renewer(
    conf: &conf::Configuration,
    login_user: Option<&str>,
) -> Result<Option<Arc<rm_core::token_renewer::DelegationTokenRenewer>>> {
    let Some(principal) = login_user else {
        return Ok(None);
    };
    let key = rm_core::token_renewer::REMOVAL_DELAY_KEY;
    let delay = match conf.get(key) {
        Some(_) => conf.get_u64(key).with_context(|| key.to_string())?,
        None => rm_core::token_renewer::DEFAULT_REMOVAL_DELAY_MS,
    };
    let renewal = HdfsRenewal {
        conf: conf.clone(),
        principal: principal.to_string(),
        keytab: conf
            .get("yarn.resourcemanager.keytab")
            .map(|k| PathBuf::from(k.trim())),
        clients: Default::default(),
    };
    tracing::info!("applications' HDFS delegation tokens renewed as {principal}");
    Ok(Some(rm_core::token_renewer::DelegationTokenRenewer::new(
        Arc::new(renewal),
        delay,
        || rm_core::dispatcher::wall_ms() as i64,
    )))
}

/// `yarn rmadmin -refreshNodes [-g SECS]` against `addr`.
fn rmadmin_refresh_nodes(
    conf: &conf::Configuration,
    addr: SocketAddr,
    graceful: Option<i32>,
) -> Result<()> {
    use prost::Message;
    let mut auth = ipc::sasl::client_auth(conf, None).context("client authentication")?;
    if auth.security_enabled {
        let host = ipc::kerberos::canonical_host_name(addr.ip());
        auth.kerberos = Some(
            ipc::kerberos::kerberos_client(conf, "yarn.resourcemanager.principal", &host, None)
                .context("RM Kerberos principal")?,
        );
    }
    let client = Client::new(
        addr,
        ClientConfig {
            protocol: rm_core::admin::PROTOCOL.into(),
            call_timeout: Duration::from_secs(30),
            auth,
            ..ClientConfig::default()
        },
    );
    let req = rm_core::admin::RefreshNodesRequestProto {
        decommission_type: Some(if graceful.is_some() {
            rm_core::admin::DecommissionType::Graceful as i32
        } else {
            rm_core::admin::DecommissionType::Normal as i32
        }),
        decommission_timeout: graceful,
        sub_cluster_id: None,
    };
    client
        .call(rm_core::admin::method::REFRESH_NODES, &req.encode_to_vec())
        .with_context(|| format!("refreshNodes on {addr}"))?;
    println!("refreshNodes: done");
    Ok(())
}

/// `hadoop.proxyuser.*` (and the RM's `yarn.resourcemanager.proxyuser.*`), groups from the
/// name service: who may act for others on the client and admin ports (KERBEROS callers).
fn proxy_users(conf: &conf::Configuration) -> Arc<ipc::authorize::ProxyUsers> {
    Arc::new(ipc::authorize::ProxyUsers::from_conf(
        &rm_core::config::with_rm_proxy_users(conf.clone()),
        Box::new(ipc::authorize::UnixGroups),
    ))
}

/// The admin service's setup: its address, the client port's authentication, the service
/// ACLs of every RM server (refreshed together), the RM's own user as an admin.
#[allow(clippy::too_many_arguments)]
fn admin_setup(
    conf: &conf::Configuration,
    reload: (Option<PathBuf>, Vec<String>),
    mut service_acls: Vec<Arc<ipc::authorize::ServiceAuthorization>>,
    app_acls: Option<Arc<rm_core::app_acls::AclPolicy>>,
    queues: Vec<String>,
    proxy_users: Option<Arc<ipc::authorize::ProxyUsers>>,
) -> Result<rm_core::admin::AdminSetup> {
    let address = rm_address(
        conf,
        rm_core::admin::ADDRESS_KEY,
        rm_core::admin::DEFAULT_PORT,
    )?;
    let auth = ipc::sasl::daemon_server_auth(
        conf,
        None,
        "yarn.resourcemanager.principal",
        "yarn.resourcemanager.keytab",
        || ipc::kerberos::server_host_name(address.ip()),
    )
    .context("ResourceManagerAdministrationProtocol authentication")?;
    let kerberos = auth
        .methods()
        .contains(&hadoop_wire::sasl::message::AuthMethod::Kerberos);
    let authorization = ipc::authorize::ServiceAuthorization::from_conf(
        conf,
        rm_core::admin::SERVICE_ACLS,
        Box::new(ipc::authorize::UnixGroups),
    )
    .map_err(anyhow::Error::msg)?
    .map(Arc::new);
    if let Some(a) = &authorization {
        service_acls.push(a.clone());
    }
    let daemon_user = daemon_user(conf, kerberos, address);
    let (dir, set) = reload;
    Ok(rm_core::admin::AdminSetup {
        address,
        server: ipc::server::ServerConfig {
            auth: Arc::new(auth),
            authorization,
            proxy_users: proxy_users.clone(),
            ..ipc::server::ServerConfig::default()
        },
        reload: Box::new(move || rm_core::config::rm_configuration(dir.as_deref(), &set)),
        daemon_user,
        groups: Arc::new(ipc::authorize::UnixGroups),
        service_acls,
        app_acls,
        queues,
        proxy_users,
    })
}

fn serve(
    conf: &conf::Configuration,
    addr: SocketAddr,
    metrics_port: Option<u16>,
    ready_line: bool,
    reload: (Option<PathBuf>, Vec<String>),
) -> Result<()> {
    let cfg = RmConfig::from_conf(conf)?;
    let plan = hw::Topology::detect().map(|t| hw::Plan::for_rm(&t));
    let placement = match &plan {
        Ok(p) => Placement::Plan(p.clone()),
        Err(e) => {
            tracing::warn!("no CPU topology ({e}); running 2 unpinned shards");
            Placement::Unpinned(2)
        }
    };
    let housekeeping_cpu = plan
        .as_ref()
        .ok()
        .and_then(|p| p.cpu_of(&hw::Role::Housekeeping));
    let metrics_port = match metrics_port {
        Some(p) => p,
        None => match conf.get(rm_core::config::METRICS_PORT) {
            Some(_) => u16::try_from(conf.get_u64(rm_core::config::METRICS_PORT)?)
                .context("hotpath.rm.metrics.port")?,
            None => 0,
        },
    };
    // SIGTERM/SIGINT stop, SIGHUP re-reads the host lists. The main thread blocks on them
    // (signal-hook's iterator), so an idle RM wakes for nothing.
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT, SIGHUP])
        .context("installing signal handlers")?;

    // The network rings go where the plan puts `ring-i` (one io_uring instance each).
    let mut server_cfg = ipc::server::ServerConfig::default();
    if let Ok(p) = &plan {
        let rings: Vec<u32> = p
            .assignments()
            .iter()
            .filter(|a| matches!(a.role, hw::Role::NetRing(_)))
            .map(|a| a.cpu)
            .collect();
        if !rings.is_empty() {
            server_cfg.transport.threads = rings.len();
            server_cfg.transport.cpus = rings;
        }
    }
    secure(conf, addr, &mut server_cfg)?;
    let apps = apps_setup(conf)?;
    // refreshServiceAcls reloads every server's ACLs; refreshQueues the queue ACLs.
    let service_acls: Vec<_> = server_cfg
        .authorization
        .iter()
        .chain(
            apps.iter()
                .filter_map(|a| a.security.authorization.as_ref()),
        )
        .cloned()
        .collect();
    let app_acls = apps.as_ref().and_then(|a| a.security.app_acls.clone());
    let queues = apps
        .as_ref()
        .map(|a| a.cfg.queues.clone())
        .unwrap_or_default();
    let proxy = apps
        .as_ref()
        .and_then(|a| a.security.proxy_users.clone())
        .unwrap_or_else(|| proxy_users(conf));
    let admin = admin_setup(conf, reload, service_acls, app_acls, queues, Some(proxy))?;
    let renewer = token_renewer(
        conf,
        apps.as_ref().and_then(|a| a.security.login_user.as_deref()),
    )?;
    let rm = RmService::start_with_apps(cfg, addr, &placement, server_cfg, apps)?;
    let admin = rm_core::admin::AdminService::start(&rm, admin)?;
    if let (Some(r), Some(rt)) = (&renewer, rm.apps()) {
        r.start(rt.apps.clone())
            .context("starting the delegation token renewer")?;
        rt.set_token_renewer(r.clone());
    }
    // This thread is the housekeeping role (/metrics, SIGHUP). It is pinned only now, after
    // the service started its threads, so that none of them inherits this one-CPU mask.
    if let Some(cpu) = housekeeping_cpu {
        hw::PinPolicy::Required
            .pin_current_thread(cpu)
            .with_context(|| format!("pinning the housekeeping thread to CPU {cpu}"))?;
    }
    let metrics_addr = SocketAddr::new(rm.local_addr().ip(), metrics_port);
    let http = ipc::metrics::MetricsHttp::bind(metrics_addr)
        .with_context(|| format!("binding /metrics on {metrics_addr}"))?;
    let metrics_addr = http.local_addr()?;
    tracing::info!(
        "hotpath rm serving ResourceTrackerPB on {}, /metrics on http://{metrics_addr}/metrics",
        rm.local_addr()
    );
    if ready_line {
        println!(
            "READY {}",
            serde_json::json!({
                "resource_tracker": rm.local_addr().to_string(),
                "client": rm.client_addr().map(|a| a.to_string()),
                "scheduler": rm.scheduler_addr().map(|a| a.to_string()),
                "admin": admin.local_addr().to_string(),
                "metrics": metrics_addr.to_string(),
                "pid": std::process::id(),
            })
        );
    }
    // Shared with the /metrics thread; taken out of the slot for the shutdown.
    let rm = Arc::new(std::sync::Mutex::new(Some(rm)));
    {
        // /metrics on a thread of its own, blocking in accept; it inherits the housekeeping
        // CPU mask and ends with the process.
        let rm = rm.clone();
        std::thread::Builder::new()
            .name(match housekeeping_cpu {
                Some(c) => format!("hp-hk-http-{c}"),
                None => "hp-hk-http".into(),
            })
            .spawn(move || {
                http.serve_blocking(|| {
                    let g = rm.lock().unwrap_or_else(|p| p.into_inner());
                    g.as_ref().map(|rm| rm.metrics_text()).unwrap_or_default()
                })
            })
            .context("spawning the /metrics thread")?;
    }
    for sig in signals.forever() {
        if sig != SIGHUP {
            break;
        }
        // As `yarn rmadmin -refreshNodes` (NORMAL), through the admin service that keeps the
        // lists and the DECOMMISSIONING hosts.
        match admin.refresh_nodes() {
            Ok(()) => tracing::info!("SIGHUP: host lists re-read"),
            Err(e) => tracing::error!("SIGHUP: re-reading the host lists failed: {e}"),
        }
    }
    admin.shutdown();
    if let Some(r) = &renewer {
        r.shutdown();
    }
    tracing::info!("stopping: finishing the dispatcher backlog and committing the completion log");
    let rm = rm.lock().unwrap_or_else(|p| p.into_inner()).take();
    if let Some(rm) = rm {
        rm.shutdown();
    }
    Ok(())
}
