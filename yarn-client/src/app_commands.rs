//! `hotpath app run|am|kill|status`: the commands of a Rust DistributedShell, over this
//! crate's clients. The `hotpath` binary only parses the flags into [`RunOptions`],
//! [`AmOptions`] or a [`Target`] and calls [`run`], [`am`], [`kill`] or [`status`]; a returned
//! error is its exit code [`EXIT_CLIENT_ERROR`].
//!
//! `app run [--containers N] [--memory MB] [--vcores V] [--rm HOST:PORT] -- COMMAND…` submits an
//! application whose ApplicationMaster is this same binary (`hotpath app am …`), shows its
//! progress (allocated / running / done: a bar on a terminal, plain lines otherwise), then a
//! table per node and the application's final status. Exit code: 0 SUCCEEDED, 1 FAILED,
//! 3 KILLED, 4 any other final status, 2 when the client itself failed (RM unreachable, bad
//! arguments).
//!
//! `app kill APP_ID` kills an application (as `yarn application -kill`, calling again until the
//! RM says the kill is complete) and `app status APP_ID` prints its report, both as the current
//! user. An RM with application ACLs (`yarn.acl.enable`) may refuse the caller: the refusal is
//! printed as such (who, which operation, which application) and the exit code is 5; `status`
//! then shows the reduced report the RM gives (its fields "N/A").
//!
//! The AM container runs the binary by its absolute path (`std::env::current_exe()`): every node
//! must have it at the same path (in the tests every node is on this machine). With
//! `--ship-binary` the binary is instead shipped as a `file:` LocalResource (size and
//! modification time, as DistributedShell ships its jar) and run as `./hotpath`; the path must
//! then be readable by every NodeManager (a local path on a one-machine cluster, else a shared
//! mount).
//!
//! On a Kerberized cluster (`hadoop.security.authentication=kerberos`,
//! `yarn.resourcemanager.principal`) `app run` authenticates to the RM by KERBEROS as the
//! principal of its ticket cache (`kinit`; `KRB5CCNAME`), and the application's user is that
//! principal's short name; the AM needs no Kerberos credentials, only its AMRMToken.
//!
//! `app am` runs inside the AM container: it reads the AMRMToken from
//! `HADOOP_TOKEN_FILE_LOCATION`, serves `GET /status` (JSON: counts and per-container node, state,
//! exit status) on an ephemeral port of this host, registers `http://$NM_HOST:PORT/` as its
//! tracking URL, runs the containers and unregisters with SUCCEEDED iff all exited 0.

use std::io::{IsTerminal, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::application_client::{
    current_user, AppReport, AppState, ApplicationClient, FinalStatus, RM_ADDRESS_KEY,
};
use crate::application_master::{amrm_token_from_env, ApplicationMaster, SCHEDULER_ADDRESS_KEY};
use crate::container_manager::ContainerManager;
use crate::distributed_shell::{
    am_launch_context, hex_decode, hex_encode, shell_command, ShellSpec, ShippedFile, Snapshot,
};
use crate::rpc::Retry;
use crate::shell_am::{self, AmSettings, StatusBoard};
use crate::YarnError;
use conf::Configuration;
use hadoop_wire::pb::hadoop::yarn::{
    ApplicationSubmissionContextProto, PriorityProto, ResourceProto,
};
use serde_json::{json, Value};

/// Exit code when the client itself failed.
pub const EXIT_CLIENT_ERROR: i32 = 2;
/// Exit code when the RM refused the caller (`AccessControlException`: an application ACL).
pub const EXIT_REFUSED: i32 = 5;

/// Where the Hadoop configuration comes from: the site files of `conf_dir` (else
/// `$HADOOP_CONF_DIR`), then `set`'s `key=value` overrides.
#[derive(Debug, Clone, Default)]
pub struct ConfSource {
    pub conf_dir: Option<PathBuf>,
    pub set: Vec<String>,
}

/// `app kill` / `app status`: one application on one RM.
#[derive(Debug, Clone)]
pub struct Target {
    pub conf: ConfSource,
    /// The RM's client address (overrides `yarn.resourcemanager.address`).
    pub rm: Option<String>,
    /// Connect attempts to the RM before giving up.
    pub connect_attempts: u32,
    /// `application_<cluster timestamp>_<sequence>`.
    pub app_id: String,
}

/// `app run`: what to submit and how to follow it (the flags' meanings are the binary's
/// `--help`).
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub conf: ConfSource,
    /// The RM's client address (overrides `yarn.resourcemanager.address`).
    pub rm: Option<String>,
    /// The scheduler address the AM dials (overrides `yarn.resourcemanager.scheduler.address`;
    /// a wildcard host is replaced by the RM's host).
    pub scheduler: Option<String>,
    /// `NAME=VALUE` service data sent with every shell container's start.
    pub service_data: Vec<String>,
    pub containers: u32,
    /// Memory per container (MB).
    pub memory: i64,
    pub vcores: i32,
    pub priority: i32,
    /// Memory of the AM container (MB).
    pub am_memory: i64,
    pub name: String,
    pub queue: String,
    /// Seconds until the application is killed.
    pub timeout: u64,
    /// Ship this binary as a `file:` LocalResource instead of running it from its path.
    pub ship_binary: bool,
    pub connect_attempts: u32,
    /// The AM's allocate interval (ms).
    pub heartbeat_ms: u64,
    /// How often the client polls the RM and the AM (ms).
    pub poll_ms: u64,
    /// The command (bash); one word is a whole command line.
    pub command: Vec<String>,
}

/// `app am`: what `app run` passed to the ApplicationMaster on its command line.
#[derive(Debug, Clone)]
pub struct AmOptions {
    pub conf: ConfSource,
    pub containers: u32,
    pub memory: i64,
    pub vcores: i32,
    pub priority: i32,
    /// The RM's scheduler address (overrides `yarn.resourcemanager.scheduler.address`).
    pub scheduler: Option<String>,
    /// The command, hex-encoded UTF-8.
    pub command_hex: String,
    /// `NAME=VALUE` service data, each hex-encoded.
    pub service_data_hex: Vec<String>,
    pub heartbeat_ms: u64,
    /// Seconds until the AM gives up (FAILED).
    pub timeout_s: u64,
    /// Longest wait (ms) for the client to fetch the final status before unregistering.
    pub linger_ms: u64,
}

/// The `AccessControlException` text of an RM's refusal, if `e` is one (the RM wraps it in a
/// `YarnException` whose message starts with the class, as Java's `RPCUtil` does).
pub fn refusal(e: &YarnError) -> Option<&str> {
    const ACE: &str = "org.apache.hadoop.security.AccessControlException";
    let mut src: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = src {
        if let Some(ipc::client::ClientError::Remote { class, message, .. }) =
            s.downcast_ref::<ipc::client::ClientError>()
        {
            return if class == ACE {
                Some(message.as_str())
            } else {
                message.strip_prefix(ACE).and_then(|m| m.strip_prefix(": "))
            };
        }
        src = s.source();
    }
    None
}

/// `app kill APP_ID`: kills the application (calling again until the RM says the kill is
/// complete); 0, or [`EXIT_REFUSED`] when the RM refused the caller.
pub fn kill(target: &Target) -> Result<i32, YarnError> {
    kill_or_status(target, true)
}

/// `app status APP_ID`: prints the application's report; 0, or [`EXIT_REFUSED`].
pub fn status(target: &Target) -> Result<i32, YarnError> {
    kill_or_status(target, false)
}

fn kill_or_status(a: &Target, kill: bool) -> Result<i32, YarnError> {
    let app = hadoop_wire::yarn::ids::AppId::parse(a.app_id.trim())
        .ok_or_else(|| YarnError::Usage(format!("{:?} is not an application id", a.app_id)))?;
    let mut conf = load_conf(&a.conf)?;
    if let Some(rm) = &a.rm {
        conf.set(RM_ADDRESS_KEY, rm);
    }
    let rm_addr = ApplicationClient::address_from_conf(&conf)?;
    let retry = Retry {
        connect_attempts: a.connect_attempts.max(1),
        ..Retry::default()
    };
    let user = current_user();
    let client = ApplicationClient::from_conf(rm_addr, &conf, &user, &retry)
        .map_err(step("the ResourceManager client's security settings"))?;
    let what = if kill { "kill" } else { "status" };
    let refused = |e: &YarnError| {
        refusal(e).map(|text| {
            eprintln!(
                "hotpath app {what}: the RM at {rm_addr} refused {user}: {text} \
                 (application ACLs, yarn.acl.enable)"
            );
            EXIT_REFUSED
        })
    };
    if !kill {
        let r = match client.report(app) {
            Ok(r) => r,
            Err(e) => return refused(&e).ok_or(e),
        };
        println!("application      {}", r.app);
        println!("state            {}", r.state.as_str());
        println!("final status     {}", r.final_status.as_str());
        println!("progress         {:.0}%", r.progress * 100.0);
        println!(
            "current attempt  {}",
            r.current_attempt.map_or("-".into(), |n| n.to_string())
        );
        println!("AM host:port     {}:{}", r.host, r.rpc_port);
        println!(
            "tracking URL     {}",
            r.original_tracking_url.as_deref().unwrap_or("N/A")
        );
        println!("diagnostics      {}", r.diagnostics);
        return Ok(0);
    }
    let t0 = Instant::now();
    loop {
        match client.kill(
            app,
            &format!("Application killed by user {user} (hotpath app kill)"),
        ) {
            Ok(true) => break,
            Ok(false) if t0.elapsed() < Duration::from_secs(30) => {
                std::thread::sleep(Duration::from_millis(200))
            }
            Ok(false) => {
                return Err(YarnError::Rm(format!(
                    "{app}: the kill did not complete within 30 s"
                )))
            }
            Err(e) => return refused(&e).ok_or(e),
        }
    }
    println!("Killed application {app}");
    Ok(0)
}

fn load_conf(c: &ConfSource) -> Result<Configuration, YarnError> {
    Configuration::from_flags(c.conf_dir.as_deref(), &c.set)
        .map_err(|e| step("reading the Hadoop configuration")(e.into()))
}

/// A step of a command failed: `what` it was, with the cause as the source.
fn step(what: impl Into<String>) -> impl FnOnce(YarnError) -> YarnError {
    let what = what.into();
    move |source| YarnError::Step {
        what,
        source: Box::new(source),
    }
}

/// A local I/O failure while doing `what`.
fn io(what: &'static str) -> impl FnOnce(std::io::Error) -> YarnError {
    move |source| YarnError::Io {
        what: what.into(),
        source,
    }
}

// ------------------------------------------------------------------------------------------
// The client

/// `app run`: submits a DistributedShell application whose AM is this binary (`app am`),
/// follows it (progress on stdout) and prints a table per node and its final status. The exit
/// code: 0 SUCCEEDED, 1 FAILED, 3 KILLED, 4 any other final status.
pub fn run(a: &RunOptions) -> Result<i32, YarnError> {
    if a.containers == 0 {
        return Err(YarnError::Usage("--containers must be at least 1".into()));
    }
    if a.memory <= 0 || a.vcores <= 0 || a.am_memory <= 0 {
        return Err(YarnError::Usage(
            "--memory, --vcores and --am-memory must be positive".into(),
        ));
    }
    let command = shell_command(&a.command)?;
    let mut conf = load_conf(&a.conf)?;
    if let Some(rm) = &a.rm {
        conf.set(RM_ADDRESS_KEY, rm);
    }
    if let Some(s) = &a.scheduler {
        conf.set(SCHEDULER_ADDRESS_KEY, s);
    }
    let mut scheduler = conf
        .get_address(SCHEDULER_ADDRESS_KEY)
        .map_err(|e| step(format!("{SCHEDULER_ADDRESS_KEY} (the AM's RM address)"))(e.into()))?;
    let rm_host = conf.get_address(RM_ADDRESS_KEY)?.host;
    if scheduler.host == "0.0.0.0" || scheduler.host == "::" {
        scheduler.host = rm_host;
    }
    let scheduler = scheduler.to_string();
    for kv in &a.service_data {
        if kv.split_once('=').is_none_or(|(k, _)| k.trim().is_empty()) {
            return Err(YarnError::Usage(format!(
                "--service-data {kv:?}: expected NAME=VALUE"
            )));
        }
    }
    let rm_addr = ApplicationClient::address_from_conf(&conf)?;
    let retry = Retry {
        connect_attempts: a.connect_attempts.max(1),
        ..Retry::default()
    };
    // A Kerberized cluster: KERBEROS from the ticket cache (kinit), the RM by its principal.
    let client = ApplicationClient::from_conf(rm_addr, &conf, &current_user(), &retry)
        .map_err(step("the ResourceManager client's security settings"))?;
    let new = client.new_application()?;
    if let Some(max) = &new.maximum_capability {
        let (m, v) = (
            max.memory.unwrap_or(i64::MAX),
            max.virtual_cores.unwrap_or(i32::MAX),
        );
        if a.memory > m || a.am_memory > m || a.vcores > v {
            return Err(YarnError::Usage(format!(
                "the cluster grants at most {m} MB / {v} vcores per container; asked for {} MB / {} vcores (AM {} MB)",
                a.memory,
                a.vcores,
                a.am_memory
            )));
        }
    }
    let app = new.app;

    let exe = std::env::current_exe().map_err(io("locating this binary"))?;
    let exe = exe.canonicalize().unwrap_or(exe);
    let mut ship = Vec::new();
    let program = if a.ship_binary {
        ship.push(ShippedFile::from_path("hotpath", &exe)?);
        "./hotpath".to_string()
    } else {
        exe.to_str()
            .ok_or_else(|| YarnError::Usage("the binary's path is not UTF-8".into()))?
            .to_string()
    };
    let mut am_args: Vec<String> = [
        "app",
        "am",
        "--containers",
        &a.containers.to_string(),
        "--memory",
        &a.memory.to_string(),
        "--vcores",
        &a.vcores.to_string(),
        "--priority",
        &a.priority.to_string(),
        "--scheduler",
        &scheduler,
        "--command-hex",
        &hex_encode(command.as_bytes()),
        "--heartbeat-ms",
        &a.heartbeat_ms.to_string(),
        "--timeout-s",
        &a.timeout.to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for kv in &a.conf.set {
        am_args.push("--set".into());
        am_args.push(kv.clone());
    }
    for kv in &a.service_data {
        am_args.push("--service-data-hex".into());
        am_args.push(hex_encode(kv.as_bytes()));
    }
    let log = std::env::var("HOTPATH_LOG").unwrap_or_else(|_| "info".into());
    let env = vec![("HOTPATH_LOG".to_string(), log)];
    let clc = am_launch_context(&program, &am_args, &env, &ship)?;
    client.submit(ApplicationSubmissionContextProto {
        application_id: Some(app.to_proto()),
        application_name: Some(a.name.clone()),
        queue: Some(a.queue.clone()),
        priority: Some(PriorityProto { priority: Some(0) }),
        am_container_spec: Some(clc),
        resource: Some(ResourceProto {
            memory: Some(a.am_memory),
            virtual_cores: Some(1),
            resource_value_map: vec![],
        }),
        application_type: Some("HOTPATH_SHELL".into()),
        max_app_attempts: Some(1),
        ..Default::default()
    })?;
    println!(
        "submitted {app} to {rm_addr}: {} × [{command}]",
        a.containers
    );

    let progress = Progress::new(a.containers);
    let t0 = Instant::now();
    let poll = Duration::from_millis(a.poll_ms.max(50));
    let mut last_state = None;
    let mut snapshot: Option<Snapshot> = None;
    let mut report_failures = 0;
    let mut killed_by_us = false;
    let report = loop {
        let r = match client.report(app) {
            Ok(r) => {
                report_failures = 0;
                r
            }
            Err(e) => {
                report_failures += 1;
                if report_failures > 5 {
                    return Err(step(format!("following {app}"))(e));
                }
                std::thread::sleep(poll);
                continue;
            }
        };
        if last_state != Some(r.state) {
            progress.line(&format!("{app} is {}", r.state.as_str()));
            last_state = Some(r.state);
        }
        if r.state == AppState::Running || (r.state.is_final() && snapshot.is_none()) {
            if let Some(s) = status_addr(&r).and_then(|addr| fetch_status(&addr).ok()) {
                progress.show(&s);
                snapshot = Some(s);
            }
        }
        if r.state.is_final() {
            break r;
        }
        if !killed_by_us && t0.elapsed() > Duration::from_secs(a.timeout) {
            progress.line(&format!("timeout after {} s: killing {app}", a.timeout));
            killed_by_us = true;
            let _ = client.kill(
                app,
                &format!("hotpath app run: timeout after {} s", a.timeout),
            );
        }
        std::thread::sleep(poll);
    };
    progress.finish();
    match &snapshot {
        Some(s) => {
            print!("{}", node_table(s));
            if s.amrm_token_rolls > 0 {
                println!(
                    "the ApplicationMaster switched to a rolled AMRMToken {} time(s)",
                    s.amrm_token_rolls
                );
            }
        }
        None => println!(
            "(no per-container results: the ApplicationMaster's status page was never reached)"
        ),
    }
    println!(
        "{app} {} final status {}",
        report.state.as_str(),
        report.final_status.as_str()
    );
    if !report.diagnostics.trim().is_empty() {
        println!("diagnostics: {}", report.diagnostics.trim());
    }
    Ok(exit_code(&report))
}

fn exit_code(r: &AppReport) -> i32 {
    match (r.state, r.final_status) {
        (AppState::Finished, FinalStatus::Succeeded) => 0,
        (AppState::Killed, _) | (_, FinalStatus::Killed) => 3,
        (AppState::Failed, _) | (_, FinalStatus::Failed) => 1,
        _ => 4,
    }
}

/// The AM's status page address: the registered tracking URL's authority.
fn status_addr(r: &AppReport) -> Option<SocketAddr> {
    let url = r.original_tracking_url.as_deref()?;
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split('/').next()?;
    authority.to_socket_addrs().ok()?.next()
}

/// Largest status page read.
const MAX_STATUS_BYTES: usize = 4 << 20;

fn fetch_status(addr: &SocketAddr) -> Result<Snapshot, YarnError> {
    fetch_status_io(addr)
        .map_err(io("reading the ApplicationMaster's status page"))
        .and_then(|page| parse_status_page(&page))
}

/// The raw `GET /status` answer.
fn fetch_status_io(addr: &SocketAddr) -> std::io::Result<Vec<u8>> {
    let mut s = TcpStream::connect_timeout(addr, Duration::from_secs(2))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        s,
        "GET /status HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut buf = Vec::new();
    s.take(MAX_STATUS_BYTES as u64 + 1).read_to_end(&mut buf)?;
    Ok(buf)
}

/// A status page answer (head and JSON body) as a [`Snapshot`].
fn parse_status_page(buf: &[u8]) -> Result<Snapshot, YarnError> {
    let bad = |detail: String| YarnError::Malformed {
        method: "GET /status",
        detail,
    };
    if buf.len() > MAX_STATUS_BYTES {
        return Err(bad(format!(
            "status page larger than {MAX_STATUS_BYTES} bytes"
        )));
    }
    let text = String::from_utf8_lossy(buf);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| bad("no HTTP header end".into()))?;
    if !head.starts_with("HTTP/1.1 200") {
        return Err(bad(format!(
            "status page: {}",
            head.lines().next().unwrap_or("")
        )));
    }
    let v = serde_json::from_str(body).map_err(|e| bad(e.to_string()))?;
    snapshot_from_json(&v)
}

fn snapshot_to_json(s: &Snapshot) -> Value {
    let containers: Vec<Value> = s
        .containers
        .iter()
        .map(|c| {
            let (exit, diag) = match &c.state {
                crate::distributed_shell::ContainerState::Completed {
                    exit_status,
                    diagnostics,
                } => (Some(*exit_status), diagnostics.clone()),
                crate::distributed_shell::ContainerState::StartFailed { message } => {
                    (None, message.clone())
                }
                _ => (None, String::new()),
            };
            json!({
                "id": c.id.to_string(),
                "node": c.node,
                "state": c.state.name(),
                "exit_status": exit,
                "diagnostics": diag,
            })
        })
        .collect();
    json!({
        "requested": s.requested,
        "allocated": s.allocated,
        "running": s.running,
        "done": s.done,
        "failed": s.failed,
        "released": s.released,
        "final_status": s.final_status.map(|f| f.as_str()),
        "diagnostics": s.diagnostics,
        "containers": containers,
        "amrm_token_rolls": s.amrm_token_rolls,
    })
}

/// The status page's JSON (as [`snapshot_to_json`] writes it) as a [`Snapshot`].
fn snapshot_from_json(v: &Value) -> Result<Snapshot, YarnError> {
    let bad = |detail: &str| YarnError::Malformed {
        method: "GET /status",
        detail: detail.to_string(),
    };
    use crate::distributed_shell::{ContainerInfo, ContainerState};
    let n = |k: &str| {
        v[k].as_u64()
            .map(|x| x as u32)
            .ok_or_else(|| bad(&format!("status: no {k}")))
    };
    let mut containers = Vec::new();
    for c in v["containers"]
        .as_array()
        .ok_or_else(|| bad("status: no containers"))?
    {
        let id = c["id"]
            .as_str()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| bad("status: a container without an id"))?;
        let diag = c["diagnostics"].as_str().unwrap_or("").to_string();
        let state = match c["state"].as_str().unwrap_or("") {
            "RUNNING" => ContainerState::Running,
            "COMPLETED" => ContainerState::Completed {
                exit_status: c["exit_status"]
                    .as_i64()
                    .and_then(|x| i32::try_from(x).ok())
                    .ok_or_else(|| bad("status: a completed container without an exit status"))?,
                diagnostics: diag,
            },
            "START_FAILED" => ContainerState::StartFailed { message: diag },
            _ => ContainerState::Allocated,
        };
        containers.push(ContainerInfo {
            id,
            node: c["node"].as_str().unwrap_or("").to_string(),
            state,
        });
    }
    let final_status = match v["final_status"].as_str() {
        Some("SUCCEEDED") => Some(FinalStatus::Succeeded),
        Some("FAILED") => Some(FinalStatus::Failed),
        Some("KILLED") => Some(FinalStatus::Killed),
        Some(_) => Some(FinalStatus::Undefined),
        None => None,
    };
    Ok(Snapshot {
        requested: n("requested")?,
        allocated: n("allocated")?,
        running: n("running")?,
        done: n("done")?,
        failed: n("failed")?,
        released: n("released")?,
        final_status,
        diagnostics: v["diagnostics"].as_str().unwrap_or("").to_string(),
        containers,
        amrm_token_rolls: v["amrm_token_rolls"].as_u64().unwrap_or(0) as u32,
    })
}

/// One line per node: its containers and their exit statuses (`start-failed` for a container
/// whose start the NodeManager refused, `-` for one not finished).
fn node_table(s: &Snapshot) -> String {
    use crate::distributed_shell::ContainerState;
    let mut nodes: std::collections::BTreeMap<&str, Vec<String>> = Default::default();
    for c in &s.containers {
        let e = match &c.state {
            ContainerState::Completed { exit_status, .. } => exit_status.to_string(),
            ContainerState::StartFailed { .. } => "start-failed".into(),
            _ => "-".into(),
        };
        nodes.entry(c.node.as_str()).or_default().push(e);
    }
    let w = nodes.keys().map(|k| k.len()).max().unwrap_or(4).max(4);
    let mut out = format!("{:<w$}  {:>10}  exit statuses\n", "node", "containers");
    for (node, exits) in &nodes {
        out.push_str(&format!(
            "{node:<w$}  {:>10}  {}\n",
            exits.len(),
            exits.join(" ")
        ));
    }
    for c in &s.containers {
        match &c.state {
            ContainerState::Completed {
                exit_status,
                diagnostics,
            } if *exit_status != 0 => out.push_str(&format!(
                "  {} on {}: exit status {exit_status}{}\n",
                c.id,
                c.node,
                Some(crate::distributed_shell::diagnostics_summary(diagnostics))
                    .filter(|d| !d.is_empty())
                    .map(|d| format!(" ({d})"))
                    .unwrap_or_default()
            )),
            ContainerState::StartFailed { message } => out.push_str(&format!(
                "  {} on {}: start failed: {}\n",
                c.id,
                c.node,
                message.lines().next().unwrap_or("")
            )),
            _ => {}
        }
    }
    out
}

/// Live progress on stdout: a bar redrawn with `\r` on a terminal, a plain line per change
/// otherwise.
struct Progress {
    tty: bool,
    wanted: u32,
    last: std::cell::RefCell<Option<(u32, u32, u32, u32)>>,
}

impl Progress {
    fn new(wanted: u32) -> Progress {
        Progress {
            tty: std::io::stdout().is_terminal(),
            wanted,
            last: Default::default(),
        }
    }

    fn line(&self, text: &str) {
        if self.tty && self.last.borrow().is_some() {
            println!();
        }
        println!("{text}");
        if self.tty {
            *self.last.borrow_mut() = None;
        }
    }

    fn show(&self, s: &Snapshot) {
        let key = (s.allocated, s.running, s.done, s.failed);
        if *self.last.borrow() == Some(key) {
            return;
        }
        let n = self.wanted.max(1);
        if self.tty {
            const W: u32 = 30;
            let filled = (s.done.min(n) * W / n) as usize;
            let running = ((s.done + s.running).min(n) * W / n) as usize - filled;
            print!(
                "\r[{}{}{}] allocated {}/{n}  running {}  done {}  failed {}   ",
                "#".repeat(filled),
                ">".repeat(running),
                ".".repeat(W as usize - filled - running),
                s.allocated,
                s.running,
                s.done,
                s.failed
            );
            let _ = std::io::stdout().flush();
        } else {
            println!(
                "progress: allocated {}/{n} running {} done {} failed {}",
                s.allocated, s.running, s.done, s.failed
            );
        }
        *self.last.borrow_mut() = Some(key);
    }

    fn finish(&self) {
        if self.tty && self.last.borrow().is_some() {
            println!();
        }
    }
}

// ------------------------------------------------------------------------------------------
// The ApplicationMaster

/// `app am`, inside the AM container: reads the AMRMToken from `HADOOP_TOKEN_FILE_LOCATION`,
/// serves `GET /status` on an ephemeral port, runs the containers ([`shell_am::run`]) and
/// unregisters; 0 (the RM takes the final status from the unregistration).
pub fn am(a: &AmOptions) -> Result<i32, YarnError> {
    let mut conf = load_conf(&a.conf)?;
    if let Some(s) = &a.scheduler {
        conf.set(SCHEDULER_ADDRESS_KEY, s);
    }
    let command = String::from_utf8(hex_decode(&a.command_hex)?)
        .map_err(|e| YarnError::Usage(format!("--command-hex: {e}")))?;
    let mut service_data = Vec::new();
    for h in &a.service_data_hex {
        let kv = String::from_utf8(hex_decode(h)?)
            .map_err(|e| YarnError::Usage(format!("--service-data-hex: {e}")))?;
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| YarnError::Usage("--service-data-hex: expected NAME=VALUE".into()))?;
        service_data.push((k.trim().to_string(), v.as_bytes().to_vec()));
    }
    let token = amrm_token_from_env()?;
    let sched = ApplicationMaster::address_from_conf(&conf)?;
    let retry = Retry::default();
    let am = ApplicationMaster::new(sched, token, &conf, &retry)?;
    let cm = ContainerManager::new(
        &conf,
        &Retry {
            connect_attempts: 3,
            ..Retry::default()
        },
    );
    let board = Arc::new(StatusBoard::default());
    let listener = TcpListener::bind("0.0.0.0:0").map_err(io("binding the status page"))?;
    let port = listener
        .local_addr()
        .map_err(io("binding the status page"))?
        .port();
    {
        let board = board.clone();
        std::thread::Builder::new()
            .name("hp-am-status".into())
            .spawn(move || serve_status(listener, &board))
            .map_err(io("starting the status page's thread"))?;
    }
    let host = std::env::var("NM_HOST")
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "127.0.0.1".into());
    let settings = AmSettings {
        spec: ShellSpec {
            containers: a.containers,
            memory_mb: a.memory,
            vcores: a.vcores,
            priority: a.priority,
            command,
            service_data,
        },
        tracking_url: format!("http://{host}:{port}/"),
        host,
        rpc_port: -1,
        heartbeat: Duration::from_millis(a.heartbeat_ms.max(10)),
        timeout: Duration::from_secs(a.timeout_s),
        linger: Duration::from_millis(a.linger_ms),
        max_allocate_failures: 20,
    };
    tracing::info!(scheduler = %sched, url = %settings.tracking_url, "ApplicationMaster starting");
    let (status, diagnostics) = shell_am::run(&am, &cm, &settings, &board)?;
    println!("final status {}: {diagnostics}", status.as_str());
    // Unregistered: the RM takes the final status from the unregistration, not from this
    // process's exit code.
    Ok(0)
}

fn serve_status(listener: TcpListener, board: &StatusBoard) {
    for conn in listener.incoming() {
        let Ok(mut s) = conn else { continue };
        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
        let _ = s.set_write_timeout(Some(Duration::from_secs(2)));
        let mut req = Vec::with_capacity(512);
        let mut buf = [0u8; 1024];
        while !req.windows(4).any(|w| w == b"\r\n\r\n") && req.len() < 8192 {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => req.extend_from_slice(&buf[..n]),
            }
        }
        let line = String::from_utf8_lossy(&req);
        let path = line
            .lines()
            .next()
            .and_then(|l| l.split_whitespace().nth(1))
            .unwrap_or("");
        let (code, body) = match path {
            "/" | "/status" => ("200 OK", snapshot_to_json(&board.get(true)).to_string()),
            _ => ("404 Not Found", json!({"error": "not found"}).to_string()),
        };
        let _ = write!(
            s,
            "HTTP/1.1 {code}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distributed_shell::{ContainerInfo, ContainerState};

    #[test]
    fn the_status_json_round_trips_and_the_table_lists_nodes() {
        let app = hadoop_wire::yarn::ids::AppId::new(1, 2);
        let c = |n, node: &str, state| ContainerInfo {
            id: hadoop_wire::yarn::ids::ContainerId::new(app, 1, n),
            node: node.into(),
            state,
        };
        let s = Snapshot {
            requested: 3,
            allocated: 3,
            running: 0,
            done: 3,
            failed: 2,
            released: 1,
            final_status: Some(FinalStatus::Failed),
            diagnostics: "x".into(),
            amrm_token_rolls: 2,
            containers: vec![
                c(
                    2,
                    "h1:1",
                    ContainerState::Completed {
                        exit_status: 0,
                        diagnostics: String::new(),
                    },
                ),
                c(
                    3,
                    "h2:1",
                    ContainerState::Completed {
                        exit_status: 3,
                        diagnostics: "bad\nmore".into(),
                    },
                ),
                c(
                    4,
                    "h1:1",
                    ContainerState::StartFailed {
                        message: "refused".into(),
                    },
                ),
            ],
        };
        let back = snapshot_from_json(&snapshot_to_json(&s)).unwrap();
        assert_eq!(back, s);
        let t = node_table(&s);
        assert!(t.contains("h1:1           2  0 start-failed"), "{t}");
        assert!(t.contains("h2:1           1  3"), "{t}");
        assert!(t.contains("exit status 3 (bad)"), "{t}");
        assert!(t.contains("start failed: refused"), "{t}");
        assert!(snapshot_from_json(&json!({})).is_err());
    }

    fn report(state: AppState, final_status: FinalStatus, url: Option<&str>) -> AppReport {
        AppReport {
            app: hadoop_wire::yarn::ids::AppId::new(1, 2),
            state,
            final_status,
            diagnostics: String::new(),
            original_tracking_url: url.map(String::from),
            host: "N/A".into(),
            rpc_port: -1,
            progress: 0.0,
            current_attempt: None,
        }
    }

    #[test]
    fn the_exit_code_follows_state_and_final_status() {
        use AppState as S;
        use FinalStatus as F;
        assert_eq!(exit_code(&report(S::Finished, F::Succeeded, None)), 0);
        assert_eq!(exit_code(&report(S::Finished, F::Failed, None)), 1);
        assert_eq!(exit_code(&report(S::Failed, F::Undefined, None)), 1);
        assert_eq!(exit_code(&report(S::Killed, F::Undefined, None)), 3);
        assert_eq!(exit_code(&report(S::Finished, F::Killed, None)), 3);
        assert_eq!(exit_code(&report(S::Finished, F::Undefined, None)), 4);
    }

    #[test]
    fn the_status_page_is_the_tracking_urls_authority() {
        let r = report(
            AppState::Running,
            FinalStatus::Undefined,
            Some("http://127.0.0.1:4567/"),
        );
        assert_eq!(status_addr(&r), Some("127.0.0.1:4567".parse().unwrap()));
        let r = report(
            AppState::Running,
            FinalStatus::Undefined,
            Some("127.0.0.1:80"),
        );
        assert_eq!(status_addr(&r), Some("127.0.0.1:80".parse().unwrap()));
        assert_eq!(
            status_addr(&report(AppState::Accepted, FinalStatus::Undefined, None)),
            None
        );
    }

    #[test]
    fn a_status_page_answer_is_read_or_refused() {
        let s = Snapshot {
            requested: 1,
            allocated: 1,
            running: 1,
            done: 0,
            failed: 0,
            released: 0,
            final_status: None,
            diagnostics: String::new(),
            containers: vec![],
            amrm_token_rolls: 0,
        };
        let body = snapshot_to_json(&s).to_string();
        let ok = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        assert_eq!(parse_status_page(ok.as_bytes()).unwrap(), s);
        let e = parse_status_page(b"HTTP/1.1 404 Not Found\r\n\r\n{}").unwrap_err();
        assert!(e.to_string().contains("404 Not Found"), "{e}");
        assert!(parse_status_page(b"HTTP/1.1 200 OK\r\n").is_err());
        assert!(parse_status_page(b"HTTP/1.1 200 OK\r\n\r\nnot json").is_err());
    }

    #[test]
    fn an_rms_access_control_refusal_is_recognised() {
        use hadoop_wire::pb::hadoop::common::rpc_response_header_proto::RpcStatusProto;
        let call = |class: &str, message: &str| YarnError::Call {
            service: "ResourceManager",
            method: "forceKillApplication",
            addr: "rm:8032".into(),
            source: ipc::client::ClientError::Remote {
                status: RpcStatusProto::Error,
                class: class.into(),
                message: message.into(),
                detail: None,
            },
        };
        let ace = "org.apache.hadoop.security.AccessControlException";
        assert_eq!(refusal(&call(ace, "carol cannot")), Some("carol cannot"));
        let wrapped = call(
            "org.apache.hadoop.yarn.exceptions.YarnException",
            &format!("{ace}: User carol cannot perform operation MODIFY_APP"),
        );
        assert_eq!(
            refusal(&wrapped),
            Some("User carol cannot perform operation MODIFY_APP")
        );
        let step = YarnError::Step {
            what: "killing".into(),
            source: Box::new(wrapped),
        };
        assert!(refusal(&step).is_some());
        assert_eq!(refusal(&call("java.io.IOException", "disk full")), None);
    }

    #[test]
    fn bad_arguments_fail_before_any_call() {
        let target = Target {
            conf: ConfSource::default(),
            rm: Some("127.0.0.1:1".into()),
            connect_attempts: 1,
            app_id: "app_1".into(),
        };
        let e = kill(&target).unwrap_err();
        assert!(
            matches!(&e, YarnError::Usage(m) if m == "\"app_1\" is not an application id"),
            "{e:?}"
        );
        let run_opts = RunOptions {
            conf: ConfSource::default(),
            rm: Some("127.0.0.1:1".into()),
            scheduler: None,
            service_data: vec![],
            containers: 0,
            memory: 128,
            vcores: 1,
            priority: 0,
            am_memory: 256,
            name: "t".into(),
            queue: "default".into(),
            timeout: 1,
            ship_binary: false,
            connect_attempts: 1,
            heartbeat_ms: 250,
            poll_ms: 500,
            command: vec!["true".into()],
        };
        let e = run(&run_opts).unwrap_err();
        assert_eq!(e.to_string(), "--containers must be at least 1");
        let e = run(&RunOptions {
            containers: 1,
            service_data: vec!["=x".into()],
            ..run_opts
        })
        .unwrap_err();
        assert!(matches!(e, YarnError::Usage(_)), "{e:?}");
    }
}
