//! `hotpath agent` and `hotpath container …`: flags, and the loops behind them.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Subcommand};
use conf::Configuration;
use serde_json::json;

use super::control::ControlClient;
use super::report::GetNodeReportResponseProto;
use super::simulate::SimConfig;
use super::{Agent, AgentConfig, AgentError, ExitReason};
use nm_core::table::Resource;

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
    pub fn configuration(&self) -> Result<Configuration, AgentError> {
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
    pub fn agent_config(&self) -> Result<AgentConfig, AgentError> {
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
pub fn run_agent(args: &AgentArgs) -> Result<(), AgentError> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, stop.clone())
            .map_err(|e| AgentError::Io(format!("installing the signal handler: {e}")))?;
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
        ExitReason::Shutdown(d) => Err(AgentError::Exited(format!("SHUTDOWN from the RM: {d}"))),
        ExitReason::GaveUp(d) | ExitReason::AuthFailed(d) => Err(AgentError::Exited(d)),
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
pub fn run_container(args: &ContainerArgs) -> Result<(), AgentError> {
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
                .map_err(|e| AgentError::Config(format!("destination {}: {e}", dest.display())))?;
            let dest = dest.to_str().ok_or_else(|| {
                AgentError::Config(format!("destination {}: not UTF-8", dest.display()))
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
            return Err(AgentError::Localize {
                kind: reply["kind"].as_str().unwrap_or("unknown").to_string(),
                error: reply["error"]
                    .as_str()
                    .unwrap_or("(no error text)")
                    .to_string(),
            });
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
            return print_container_logs(addr, container, file.as_deref(), *size, &mut out);
        }
        ContainerCmd::Report { ipc } => {
            let addr = std::net::ToSocketAddrs::to_socket_addrs(ipc.as_str())
                .map_err(|e| AgentError::Config(format!("--ipc {ipc}: {e}")))?
                .next()
                .ok_or_else(|| AgentError::Config(format!("--ipc {ipc}: no address")))?;
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

/// The agent's webapp address: `addr` when given, else `yarn.nodemanager.webapp.address` of
/// the environment's configuration (`0.0.0.0` as `127.0.0.1`), else `127.0.0.1:8042`.
pub fn webapp_addr(addr: Option<&str>) -> Result<std::net::SocketAddr, AgentError> {
    const KEY: &str = "yarn.nodemanager.webapp.address";
    let text = match addr {
        Some(a) => a.to_string(),
        None => {
            let conf = Configuration::from_env()?;
            match conf.try_get(KEY)? {
                Some(_) => {
                    let hp = conf.get_socket_addr(KEY, 8042)?;
                    let host = if hp.host == "0.0.0.0" || hp.host.is_empty() {
                        "127.0.0.1".to_string()
                    } else {
                        hp.host
                    };
                    format!("{host}:{}", hp.port)
                }
                None => "127.0.0.1:8042".into(),
            }
        }
    };
    std::net::ToSocketAddrs::to_socket_addrs(text.as_str())
        .map_err(|e| AgentError::Config(format!("webapp address {text}: {e}")))?
        .next()
        .ok_or_else(|| AgentError::Config(format!("webapp address {text}: no address")))
}

/// `s` with everything but RFC 3986 unreserved characters percent-encoded (one path segment).
fn encode_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Longest response head read by [`http_get`].
const MAX_RESPONSE_HEAD: usize = 64 * 1024;
/// Longest JSON listing or error body read into memory.
const MAX_SMALL_BODY: u64 = 16 * 1024 * 1024;

/// `GET target` (HTTP/1.1, `Connection: close`) on `addr`: the status and a reader of the
/// body (to the end of the connection).
pub fn http_get(
    addr: std::net::SocketAddr,
    target: &str,
    accept: &str,
) -> Result<(u16, Box<dyn std::io::Read>), AgentError> {
    use std::io::{Read, Write};
    let io = |e: std::io::Error| AgentError::Io(format!("GET http://{addr}{target}: {e}"));
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(10)).map_err(io)?;
    s.set_read_timeout(Some(Duration::from_secs(60)))
        .map_err(io)?;
    s.set_write_timeout(Some(Duration::from_secs(10)))
        .map_err(io)?;
    write!(
        s,
        "GET {target} HTTP/1.1\r\nHost: {addr}\r\nAccept: {accept}\r\nConnection: close\r\n\r\n"
    )
    .map_err(io)?;
    let mut head = Vec::new();
    let mut chunk = [0u8; 4096];
    let end = loop {
        if let Some(i) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if head.len() > MAX_RESPONSE_HEAD {
            return Err(AgentError::Io(format!(
                "GET http://{addr}{target}: response head longer than {MAX_RESPONSE_HEAD} bytes"
            )));
        }
        let n = s.read(&mut chunk).map_err(io)?;
        if n == 0 {
            return Err(AgentError::Io(format!(
                "GET http://{addr}{target}: connection closed before the response head ended"
            )));
        }
        head.extend_from_slice(&chunk[..n]);
    };
    let status_line = String::from_utf8_lossy(head.split(|&b| b == b'\n').next().unwrap_or(&[]))
        .trim_end()
        .to_string();
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse::<u16>().ok())
        .filter(|_| status_line.starts_with("HTTP/"))
        .ok_or_else(|| {
            AgentError::Io(format!(
                "GET http://{addr}{target}: not an HTTP status line: {status_line:?}"
            ))
        })?;
    let rest = head[end..].to_vec();
    Ok((status, Box::new(std::io::Cursor::new(rest).chain(s))))
}

/// Reads at most [`MAX_SMALL_BODY`] bytes of `r`.
fn read_small(r: Box<dyn std::io::Read>) -> Result<Vec<u8>, AgentError> {
    use std::io::Read;
    let mut v = Vec::new();
    r.take(MAX_SMALL_BODY)
        .read_to_end(&mut v)
        .map_err(|e| AgentError::Io(format!("reading the response: {e}")))?;
    Ok(v)
}

/// The refusal of a non-200 answer: its `RemoteException.message` or its text.
fn http_refusal(target: &str, status: u16, body: &[u8]) -> AgentError {
    let msg = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v["RemoteException"]["message"].as_str().map(String::from))
        .unwrap_or_else(|| String::from_utf8_lossy(body).trim().to_string());
    AgentError::Io(format!("GET {target}: HTTP {status}: {msg}"))
}

/// The `fileName`s of a `/containers/{cid}/logs` listing, both levels object or array (as
/// LogsCLI reads them), in order, each once.
pub fn listed_file_names(v: &serde_json::Value) -> Vec<String> {
    fn items(v: &serde_json::Value) -> Vec<&serde_json::Value> {
        match v {
            serde_json::Value::Array(a) => a.iter().collect(),
            serde_json::Value::Object(_) => vec![v],
            _ => Vec::new(),
        }
    }
    let mut names: Vec<String> = Vec::new();
    for info in items(&v["containerLogsInfo"]) {
        for f in items(&info["containerLogInfo"]) {
            if let Some(n) = f["fileName"].as_str() {
                if !names.iter().any(|x| x == n) {
                    names.push(n.to_string());
                }
            }
        }
    }
    names
}

/// `hotpath container logs`: fetches the listing (unless `file` is given) and writes each
/// file's framed text to `out`.
pub fn print_container_logs(
    addr: std::net::SocketAddr,
    container: &str,
    file: Option<&str>,
    size: Option<i64>,
    out: &mut dyn std::io::Write,
) -> Result<(), AgentError> {
    let base = format!("/ws/v1/node/containers/{}/logs", encode_segment(container));
    let names = match file {
        Some(f) => vec![f.to_string()],
        None => {
            let (status, body) = http_get(addr, &base, "application/json")?;
            let body = read_small(body)?;
            if status != 200 {
                return Err(http_refusal(&base, status, &body));
            }
            let v: serde_json::Value = serde_json::from_slice(&body)
                .map_err(|e| AgentError::Io(format!("GET {base}: the listing is not JSON: {e}")))?;
            listed_file_names(&v)
        }
    };
    if names.is_empty() {
        eprintln!("container {container}: no log files on this node");
    }
    for name in names {
        let mut target = format!("{base}/{}", encode_segment(&name));
        if let Some(n) = size {
            target.push_str(&format!("?size={n}"));
        }
        let (status, mut body) = http_get(addr, &target, "text/plain")?;
        if status != 200 {
            let body = read_small(body)?;
            return Err(http_refusal(&target, status, &body));
        }
        std::io::copy(&mut body, out).map_err(|e| AgentError::Io(format!("GET {target}: {e}")))?;
    }
    out.flush()
        .map_err(|e| AgentError::Io(format!("writing the logs: {e}")))?;
    Ok(())
}

/// Calls `getNodeReport` on an agent's IPC server.
pub fn fetch_node_report(
    addr: std::net::SocketAddr,
) -> Result<GetNodeReportResponseProto, AgentError> {
    let client = ipc::client::Client::new(
        addr,
        ipc::client::ClientConfig {
            protocol: super::report::PROTOCOL.into(),
            protocol_version: super::report::VERSION,
            max_connect_attempts: 1,
            call_timeout: Duration::from_secs(10),
            ..Default::default()
        },
    );
    let resp = client.call(super::report::GET_NODE_REPORT, &[])?;
    Ok(resp.decode::<GetNodeReportResponseProto>()?)
}

/// A report as JSON.
pub fn report_json(r: &GetNodeReportResponseProto) -> serde_json::Value {
    let containers: Vec<_> = r
        .containers
        .iter()
        .map(|c| {
            let id = c.container_id.unwrap_or_default();
            let a = id.app_attempt_id.unwrap_or_default();
            let app = a.application_id.unwrap_or_default();
            let cid = nm_core::ids::ContainerId::new(
                nm_core::ids::AppId::new(app.cluster_timestamp.unwrap_or(0), app.id.unwrap_or(0)),
                a.attempt_id.unwrap_or(0),
                id.id.unwrap_or(0),
            );
            json!({"container": cid.to_string(), "state": c.state, "exit_status": c.exit_status})
        })
        .collect();
    let node = r.node_id.clone().unwrap_or_default();
    let total = r.total.clone().unwrap_or_default();
    let h = r.health.clone().unwrap_or_default();
    json!({
        "node_id": format!("{}:{}", node.host.unwrap_or_default(), node.port.unwrap_or(0)),
        "http_port": r.http_port,
        "memory_mb": total.memory,
        "vcores": total.virtual_cores,
        "healthy": h.is_node_healthy,
        "health_report": h.health_report,
        "phase": r.phase,
        "last_response_id": r.last_response_id,
        "last_heartbeat_ms": r.last_heartbeat_ms,
        "heartbeats": r.heartbeats,
        "containers": containers,
    })
}
