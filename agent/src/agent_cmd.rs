//! `hotpath agent` and `hotpath container …`: their flags, and the calls into `nm-runtime`
//! ([`nm_runtime::Agent`], [`nm_runtime::control::ControlClient`], [`nm_runtime::client`]).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Result};
use clap::{Args, Subcommand};
use conf::Configuration;
use serde_json::json;

use nm_core::table::Resource;
use nm_runtime::client::{fetch_node_report, print_container_logs, report_json, webapp_addr};
use nm_runtime::control::ControlClient;
use nm_runtime::simulate::SimConfig;
use nm_runtime::{Agent, AgentConfig, ExitReason};

/// `hotpath agent` flags. Configuration comes from `--conf-dir` (else `$HADOOP_CONF_DIR`);
/// `--set` and the named flags override it.
#[derive(Debug, Clone, Args)]
pub struct AgentArgs {
    /// Directory with core-site.xml / yarn-site.xml (default: $HADOOP_CONF_DIR).
    #[arg(long)]
    pub conf_dir: Option<PathBuf>,
    /// Any configuration key, `key=value` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// RM resource-tracker address (`yarn.resourcemanager.resource-tracker.address`).
    #[arg(long)]
    pub rm: Option<String>,
    /// Node address, host:port (`yarn.nodemanager.address`; port 0 = ephemeral).
    #[arg(long)]
    pub node: Option<String>,
    /// Metrics HTTP address (`yarn.nodemanager.webapp.address`).
    #[arg(long)]
    pub http: Option<String>,
    /// `yarn.nodemanager.resource.memory-mb`.
    #[arg(long)]
    pub memory_mb: Option<i64>,
    /// `yarn.nodemanager.resource.cpu-vcores`.
    #[arg(long)]
    pub vcores: Option<i32>,
    /// Control socket path (`hotpath.agent.control-socket`).
    #[arg(long)]
    pub control_socket: Option<PathBuf>,
    /// Run a synthetic container workload.
    #[arg(long)]
    pub simulate: bool,
    /// Simulated containers started per second.
    #[arg(long, default_value_t = 10.0)]
    pub sim_rate: f64,
    /// Mean run time of a simulated container (ms).
    #[arg(long, default_value_t = 5000)]
    pub sim_mean_ms: u64,
    /// Most simulated containers running at once.
    #[arg(long, default_value_t = 200)]
    pub sim_max_running: usize,
    /// Distinct simulated applications.
    #[arg(long, default_value_t = 4)]
    pub sim_apps: u32,
    /// Do not pin threads.
    #[arg(long)]
    pub no_pin: bool,
    /// Print one `READY {json}` line (node id, addresses) on stdout once started.
    #[arg(long)]
    pub ready_line: bool,
}

impl AgentArgs {
    /// The configuration these flags describe.
    pub fn configuration(&self) -> Result<Configuration> {
        let mut conf = Configuration::from_flags(self.conf_dir.as_deref(), &self.set)?;
        let mut set = |k: &str, v: Option<String>| {
            if let Some(v) = v {
                conf.set(k, &v);
            }
        };
        set(
            "yarn.resourcemanager.resource-tracker.address",
            self.rm.clone(),
        );
        set("yarn.nodemanager.address", self.node.clone());
        set("yarn.nodemanager.webapp.address", self.http.clone());
        set(
            "yarn.nodemanager.resource.memory-mb",
            self.memory_mb.map(|v| v.to_string()),
        );
        set(
            "yarn.nodemanager.resource.cpu-vcores",
            self.vcores.map(|v| v.to_string()),
        );
        set(
            "hotpath.agent.control-socket",
            self.control_socket
                .as_ref()
                .map(|p| p.display().to_string()),
        );
        Ok(conf)
    }

    /// The agent settings these flags describe.
    pub fn agent_config(&self) -> Result<AgentConfig> {
        let mut cfg = AgentConfig::from_conf(&self.configuration()?)?;
        cfg.pin = !self.no_pin;
        if self.simulate {
            cfg.simulate = Some(SimConfig {
                rate_per_s: self.sim_rate.max(0.0),
                mean_run: Duration::from_millis(self.sim_mean_ms),
                max_running: self.sim_max_running,
                apps: self.sim_apps.max(1),
                resource: Resource {
                    memory_mb: 1024,
                    vcores: 1,
                },
                seed: 0,
            });
        }
        Ok(cfg)
    }
}

/// Runs `hotpath agent` until SIGTERM/SIGINT, SHUTDOWN from the RM, or giving up.
pub fn run_agent(args: &AgentArgs) -> Result<()> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, stop.clone())
            .map_err(|e| anyhow!("installing the signal handler: {e}"))?;
    }
    let cfg = args.agent_config()?;
    let agent = Agent::start(cfg)?;
    tracing::info!(
        "agent {} up: control socket {:?}, metrics {:?}, IPC {:?}",
        agent.node_id(),
        agent.control_path(),
        agent.metrics_addr(),
        agent.ipc_addr()
    );
    if args.ready_line {
        println!(
            "READY {}",
            json!({
                "node_id": agent.node_id(),
                "control_socket": agent.control_path().map(|p| p.display().to_string()),
                "metrics": agent.metrics_addr().map(|a| a.to_string()),
                "ipc": agent.ipc_addr().map(|a| a.to_string()),
                "pid": std::process::id(),
            })
        );
    }
    while !stop.load(Ordering::Relaxed) && !agent.is_finished() {
        std::thread::sleep(Duration::from_millis(50));
    }
    if stop.load(Ordering::Relaxed) {
        tracing::info!("stopping (signal)");
    }
    agent.stop();
    match agent.join() {
        ExitReason::Stopped => Ok(()),
        ExitReason::Shutdown(d) => Err(anyhow!("the agent stopped: SHUTDOWN from the RM: {d}")),
        ExitReason::GaveUp(d) | ExitReason::AuthFailed(d) => Err(anyhow!("the agent stopped: {d}")),
    }
}

/// `hotpath container …`.
#[derive(Debug, Clone, Args)]
pub struct ContainerArgs {
    /// The agent's control socket.
    #[arg(long, default_value = "/tmp/hotpath-agent.sock")]
    pub socket: PathBuf,
    #[command(subcommand)]
    pub cmd: ContainerCmd,
}

#[derive(Debug, Clone, Subcommand)]
pub enum ContainerCmd {
    /// Report a new container (NEW, or RUNNING with --running).
    Launch {
        container: String,
        #[arg(long, default_value_t = 1024)]
        memory_mb: i64,
        #[arg(long, default_value_t = 1)]
        vcores: i32,
        #[arg(long, default_value_t = 0)]
        priority: i32,
        #[arg(long)]
        running: bool,
    },
    /// NEW → RUNNING.
    Running { container: String },
    /// → COMPLETE.
    Complete {
        container: String,
        #[arg(long, default_value_t = 0)]
        exit_status: i32,
        #[arg(long, default_value = "")]
        diagnostics: String,
    },
    /// Every container in the table.
    List,
    /// The node's status.
    Status,
    /// Print cleanup orders as they arrive (one JSON line each) until interrupted.
    Watch,
    /// Copy an HDFS file to a local path for a container (resource localization), through the
    /// agent's HDFS reader. The file appears whole or not at all: it is read into a temp file
    /// beside DEST (checksums verified), fsynced and renamed. DEST must lie inside the node's
    /// `yarn.nodemanager.local-dirs`. Prints the agent's JSON answer (`bytes`, `elapsed_ms`;
    /// on failure `error` and `kind`, and the command exits 1).
    Localize {
        /// The container the file is for.
        #[arg(long)]
        container: String,
        /// `hdfs:///PATH`, `hdfs://NAMENODE:PORT/PATH` (on fs.defaultFS) or `/PATH`.
        source: String,
        /// Local destination file (relative paths are taken from this directory).
        dest: PathBuf,
        /// Replace DEST if it exists (by default an existing DEST is an error).
        #[arg(long)]
        overwrite: bool,
    },
    /// A container's log files from the agent's webapp (`/ws/v1/node/containers/CID/logs`),
    /// framed as `yarn logs` prints them: with --file that file, else every listed file.
    Logs {
        container: String,
        /// One log file (e.g. `stderr`); without it, all of the container's files.
        #[arg(long)]
        file: Option<String>,
        /// Bytes of each file: N > 0 the first N, N < 0 the last |N| (default: all).
        #[arg(long, allow_negative_numbers = true)]
        size: Option<i64>,
        /// The agent's webapp address, HOST:PORT (default: `yarn.nodemanager.webapp.address`
        /// from $HADOOP_CONF_DIR, 0.0.0.0 read as 127.0.0.1; else 127.0.0.1:8042).
        #[arg(long)]
        addr: Option<String>,
    },
    /// `getNodeReport` over the agent's IPC server.
    Report {
        /// The agent's IPC address (its node address).
        #[arg(long)]
        ipc: String,
    },
}

/// Runs `hotpath container …`, printing the agent's JSON reply.
pub fn run_container(args: &ContainerArgs) -> Result<()> {
    let req = match &args.cmd {
        ContainerCmd::Launch {
            container,
            memory_mb,
            vcores,
            priority,
            running,
        } => json!({"op":"launch","container":container,"memory_mb":memory_mb,
                    "vcores":vcores,"priority":priority,"running":running}),
        ContainerCmd::Running { container } => json!({"op":"running","container":container}),
        ContainerCmd::Complete {
            container,
            exit_status,
            diagnostics,
        } => json!({"op":"complete","container":container,"exit_status":exit_status,
                    "diagnostics":diagnostics}),
        ContainerCmd::Localize {
            container,
            source,
            dest,
            overwrite,
        } => {
            let dest = std::path::absolute(dest)
                .map_err(|e| anyhow!("configuration: destination {}: {e}", dest.display()))?;
            let dest = dest.to_str().ok_or_else(|| {
                anyhow!("configuration: destination {}: not UTF-8", dest.display())
            })?;
            let mut c = ControlClient::connect(&args.socket)?;
            let reply = c.request_raw(&json!({"op":"localize","container":container,
                "source":source,"dest":dest,"overwrite":overwrite}))?;
            println!(
                "{}",
                serde_json::to_string_pretty(&reply).unwrap_or_default()
            );
            if reply["ok"].as_bool() == Some(true) {
                return Ok(());
            }
            return Err(anyhow!(
                "localize failed ({}): {}",
                reply["kind"].as_str().unwrap_or("unknown"),
                reply["error"].as_str().unwrap_or("(no error text)")
            ));
        }
        ContainerCmd::List => json!({"op":"list"}),
        ContainerCmd::Status => json!({"op":"status"}),
        ContainerCmd::Watch => {
            let mut c = ControlClient::connect(&args.socket)?;
            c.request(&json!({"op":"watch"}))?;
            loop {
                if let Some(v) = c.read_line(None)? {
                    println!("{v}");
                }
            }
        }
        ContainerCmd::Logs {
            container,
            file,
            size,
            addr,
        } => {
            let addr = webapp_addr(addr.as_deref())?;
            let mut out = std::io::stdout().lock();
            return Ok(print_container_logs(
                addr,
                container,
                file.as_deref(),
                *size,
                &mut out,
            )?);
        }
        ContainerCmd::Report { ipc } => {
            let addr = std::net::ToSocketAddrs::to_socket_addrs(ipc.as_str())
                .map_err(|e| anyhow!("configuration: --ipc {ipc}: {e}"))?
                .next()
                .ok_or_else(|| anyhow!("configuration: --ipc {ipc}: no address"))?;
            let r = fetch_node_report(addr)?;
            println!("{}", report_json(&r));
            return Ok(());
        }
    };
    let mut c = ControlClient::connect(&args.socket)?;
    let reply = c.request(&req)?;
    println!(
        "{}",
        serde_json::to_string_pretty(&reply).unwrap_or_default()
    );
    Ok(())
}
