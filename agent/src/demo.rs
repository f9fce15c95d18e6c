//! `hotpath demo`: an embedded rm-core and four agents on 127.0.0.2..5 over real sockets (the
//! `ipc` server's io_uring or epoll transport on the RM side, the `ipc` client on the agents'
//! side) and the real state machines on both sides.
//!
//! By default it runs applications, nothing simulated: the RM serves ApplicationClientProtocol
//! and ApplicationMasterProtocol on loopback, the agents launch real processes, and the demo
//! keeps `--concurrent` DistributedShell applications going, each a `hotpath app run` child
//! process (whose ApplicationMaster, `hotpath app am`, the RM launches on an agent) running
//! `--containers` containers of `--command`. With `--simulate` the agents make up containers
//! instead (no applications), as the load and fault tools use it.
//!
//! [`Cluster`] is the library form (the fault tests drive it): start, sample, restart the RM,
//! drain, and [`Cluster::finish`] with the honest accounting: every completion an agent made
//! is journaled by its container table, and after the run the RM's completion log files are
//! read back; `lost_completions` counts journaled container ids missing from the log, and
//! `duplicate_log_records` counts ids the log holds more than once.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use ipc::server::ServerConfig;
use rm_core::dispatcher::Placement;
use rm_core::service::RmService;
use rm_core::RmConfig;
use serde_json::json;

use nm_core::ids::{AppId, ContainerId};
use nm_core::table::Resource;
use nm_runtime::shared::lock;
use nm_runtime::simulate::SimConfig;
use nm_runtime::{Agent, AgentConfig};

/// Demo errors.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error("rm-core: {0}")]
    Rm(#[from] rm_core::Error),
    #[error(transparent)]
    Agent(#[from] nm_runtime::Error),
    #[error("{0}")]
    Io(String),
}

/// Demo settings.
#[derive(Debug, Clone)]
pub struct DemoConfig {
    pub agents: usize,
    /// `yarn.resourcemanager.nodemanagers.heartbeat-interval-ms` of the embedded RM.
    pub heartbeat_ms: u64,
    pub nm_expiry_ms: u64,
    /// Per agent.
    pub sim: SimConfig,
    /// The agents' `connect.retry-interval` (the RM restart test wants it short).
    pub retry_interval: Duration,
    /// Where the RM's completion log and the agents' sockets live (`None`: a fresh temp dir,
    /// removed at the end).
    pub dir: Option<PathBuf>,
    /// RM port (0: ephemeral).
    pub rm_port: u16,
    pub pin: bool,
    /// Real applications (the RM's client and scheduler protocols on ephemeral loopback ports,
    /// agents launching real processes) instead of `sim`.
    pub apps: bool,
}

impl Default for DemoConfig {
    fn default() -> Self {
        Self {
            agents: 4,
            heartbeat_ms: 1000,
            nm_expiry_ms: 10_000,
            sim: SimConfig {
                rate_per_s: 20.0,
                mean_run: Duration::from_millis(2000),
                max_running: 200,
                apps: 4,
                resource: Resource {
                    memory_mb: 1024,
                    vcores: 1,
                },
                seed: 0,
            },
            retry_interval: Duration::from_millis(1000),
            dir: None,
            rm_port: 0,
            pin: false,
            apps: false,
        }
    }
}

/// One sample of the running cluster.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sample {
    pub at: Option<Instant>,
    pub nodes: usize,
    /// Heartbeats answered NORMAL, all agents.
    pub heartbeats: u64,
    pub running: usize,
    pub completed: u64,
    pub acked: u64,
    /// Dispatcher backlog now: pending node entries summed over the RM's shard mailboxes.
    pub backlog: u64,
    pub p99_us: u64,
}

/// The final accounting.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DemoReport {
    pub nodes_registered: usize,
    pub heartbeats: u64,
    pub containers_completed: u64,
    pub completions_acked: u64,
    pub lost_completions: u64,
    pub duplicate_log_records: u64,
    pub completions_in_log: u64,
    pub registrations: u64,
    pub resyncs: u64,
    pub p99_us: u64,
    pub duration_s: f64,
    /// Applications run (`hotpath app run` children that ended), with real containers.
    pub applications: u64,
    /// Of those, the ones that finished SUCCEEDED (client exit code 0).
    pub applications_succeeded: u64,
}

/// An embedded rm-core and its agents (see the module docs).
pub struct Cluster {
    cfg: DemoConfig,
    dir: PathBuf,
    remove_dir: bool,
    rm: Option<RmService>,
    rm_addr: SocketAddr,
    agents: Vec<Agent>,
    journal: Vec<ContainerId>,
    started: Instant,
}

fn rm_config(cfg: &DemoConfig, dir: &Path) -> RmConfig {
    RmConfig {
        heartbeat_interval_ms: cfg.heartbeat_ms,
        nm_expiry_ms: cfg.nm_expiry_ms,
        completion_log_dir: dir.join("completion-log"),
        // key rolling is legal only above 3 × the expiry
        container_key_roll_ms: (cfg.nm_expiry_ms * 4).max(86_400_000),
        nm_key_roll_ms: (cfg.nm_expiry_ms * 4).max(86_400_000),
        ..RmConfig::default()
    }
}

fn start_rm(cfg: &DemoConfig, dir: &Path, addr: SocketAddr) -> Result<RmService, DemoError> {
    let placement = if cfg.pin {
        match hw::Topology::detect() {
            Ok(t) => Placement::Plan(hw::Plan::for_rm(&t)),
            Err(_) => Placement::Unpinned(2),
        }
    } else {
        Placement::Unpinned(2)
    };
    let apps = if cfg.apps {
        let lo = |a: SocketAddr| SocketAddr::new(addr.ip(), a.port());
        Some(rm_core::service::AppsSetup {
            cfg: rm_core::apps::AppsConfig::default(),
            client: lo(SocketAddr::from(([127, 0, 0, 1], 0))),
            scheduler: lo(SocketAddr::from(([127, 0, 0, 1], 0))),
            qops: hadoop_wire::sasl::parse_protection("authentication")
                .map_err(|e| DemoError::Io(format!("hadoop.rpc.protection: {e}")))?,
            security: Default::default(),
        })
    } else {
        None
    };
    Ok(RmService::start_with_apps(
        rm_config(cfg, dir),
        addr,
        &placement,
        ServerConfig::default(),
        apps,
    )?)
}

/// The loopback address of agent `i`: 127.0.0.2, 127.0.0.3, …
pub fn agent_ip(i: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, (2 + i.min(250)) as u8))
}

impl Cluster {
    /// Starts the RM and the agents.
    pub fn start(cfg: DemoConfig) -> Result<Cluster, DemoError> {
        let (dir, remove_dir) = match &cfg.dir {
            Some(d) => (d.clone(), false),
            None => {
                static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
                let d = std::env::temp_dir().join(format!(
                    "hotpath-demo-{}-{}-{}",
                    std::process::id(),
                    nm_runtime::sys::wall_ms(),
                    SEQ.fetch_add(1, Ordering::Relaxed)
                ));
                (d, true)
            }
        };
        std::fs::create_dir_all(&dir)
            .map_err(|e| DemoError::Io(format!("{}: {e}", dir.display())))?;
        let rm = start_rm(&cfg, &dir, SocketAddr::from(([127, 0, 0, 1], cfg.rm_port)))?;
        let rm_addr = rm.local_addr();
        let mut c = Cluster {
            cfg,
            dir,
            remove_dir,
            rm: Some(rm),
            rm_addr,
            agents: Vec::new(),
            journal: Vec::new(),
            started: Instant::now(),
        };
        for i in 0..c.cfg.agents {
            c.add_agent(i)?;
        }
        Ok(c)
    }

    fn add_agent(&mut self, i: usize) -> Result<(), DemoError> {
        let ip = agent_ip(i);
        let adir = self.dir.join(format!("agent-{i}"));
        std::fs::create_dir_all(&adir)
            .map_err(|e| DemoError::Io(format!("{}: {e}", adir.display())))?;
        let mut a = AgentConfig::local(self.rm_addr, ip, &adir).map_err(nm_runtime::Error::from)?;
        a.default_interval_ms = self.cfg.heartbeat_ms;
        a.retry_interval = self.cfg.retry_interval;
        a.connect_max_wait = None;
        a.call_timeout = Duration::from_secs(5);
        a.journal = true;
        a.pin = self.cfg.pin;
        a.ipc_pool_chunks = 4;
        if self.cfg.apps {
            // Real containers: each agent offers 4 GiB and 4 vcores on this one machine.
            a.memory_mb = 4096;
            a.vcores = 4;
            a.simulate = None;
        } else {
            let mut sim = self.cfg.sim.clone();
            sim.seed = if sim.seed == 0 {
                0
            } else {
                sim.seed + i as u64
            };
            a.simulate = Some(sim);
        }
        self.agents.push(Agent::start(a)?);
        Ok(())
    }

    pub fn rm_addr(&self) -> SocketAddr {
        self.rm_addr
    }

    pub fn rm(&self) -> Option<&RmService> {
        self.rm.as_ref()
    }

    pub fn agents(&self) -> &[Agent] {
        &self.agents
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Moves the agents' journals into the cluster's.
    fn collect_journals(&mut self) {
        for a in &self.agents {
            let j = lock(&a.shared().table).take_journal();
            self.journal.extend(j);
        }
    }

    /// Completions journaled so far (all agents).
    pub fn completions_made(&mut self) -> usize {
        self.collect_journals();
        self.journal.len()
    }

    /// Stops the RM (graceful: its shards finish their backlog and commit).
    pub fn stop_rm(&mut self) {
        if let Some(rm) = self.rm.take() {
            rm.shutdown();
        }
    }

    /// Starts the RM again on the same address and completion log.
    pub fn start_rm_again(&mut self) -> Result<(), DemoError> {
        if self.rm.is_none() {
            // The old listener may linger a moment after shutdown.
            let mut last = None;
            for _ in 0..50 {
                match start_rm(&self.cfg, &self.dir, self.rm_addr) {
                    Ok(rm) => {
                        self.rm = Some(rm);
                        return Ok(());
                    }
                    Err(e) => last = Some(e),
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            return Err(last.expect("at least one attempt"));
        }
        Ok(())
    }

    /// A sample of the cluster now.
    pub fn sample(&self) -> Sample {
        let mut s = Sample {
            at: Some(Instant::now()),
            ..Sample::default()
        };
        let mut h: Option<hdrhistogram::Histogram<u64>> = None;
        for a in &self.agents {
            let sh = a.shared();
            s.heartbeats += sh.metrics.heartbeats_ok.load(Relaxed);
            let t = lock(&sh.table);
            s.running += t.counts().running;
            s.completed += t.totals().completed;
            s.acked += t.totals().acked;
            drop(t);
            if let Ok(lh) = sh.metrics.rpc_latency_us.lock() {
                match &mut h {
                    None => h = Some(lh.clone()),
                    Some(h) => {
                        let _ = h.add(&*lh);
                    }
                }
            }
        }
        s.p99_us = h
            .filter(|h| !h.is_empty())
            .map_or(0, |h| h.value_at_quantile(0.99));
        if let Some(rm) = &self.rm {
            s.nodes = lock(rm.tracker()).active_nodes();
            s.backlog = rm.backlog();
        }
        s
    }

    /// The live status line.
    pub fn status_line(prev: &Sample, now: &Sample) -> String {
        let dt = match (prev.at, now.at) {
            (Some(a), Some(b)) => b.duration_since(a).as_secs_f64().max(1e-3),
            _ => 1.0,
        };
        format!(
            "nodes {} | heartbeats/s {:.1} | containers running {} completed {} acked {} | dispatcher backlog {} | p99 heartbeat {} µs",
            now.nodes,
            (now.heartbeats - prev.heartbeats) as f64 / dt,
            now.running,
            now.completed,
            now.acked,
            now.backlog,
            now.p99_us
        )
    }

    /// Stops new containers, finishes the running ones (exit 0), and waits (up to `timeout`)
    /// until every completion has been acknowledged by the RM
    /// (`containers_to_be_removed_from_nm`).
    /// Returns whether everything settled.
    pub fn drain(&mut self, timeout: Duration) -> bool {
        for a in &self.agents {
            a.shared().sim_paused.store(true, Ordering::Relaxed);
            a.shared().sim_finish_now.store(true, Ordering::Relaxed);
        }
        let deadline = Instant::now() + timeout;
        loop {
            let settled = self.agents.iter().all(|a| {
                let t = lock(&a.shared().table);
                let c = t.counts();
                c.new == 0 && c.running == 0 && c.completing == 0 && c.delivered == 0
            });
            if settled {
                return true;
            }
            if Instant::now() >= deadline {
                for a in &self.agents {
                    let t = lock(&a.shared().table);
                    eprintln!(
                        "drain timed out: agent {} has {:?}",
                        a.node_id(),
                        t.counts()
                    );
                }
                return false;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops the agents (they unregister) and the RM, reads the completion log back, and
    /// accounts (see the module docs).
    pub fn finish(mut self) -> Result<DemoReport, DemoError> {
        let end = self.sample();
        self.collect_journals();
        let mut registrations = 0;
        let mut resyncs = 0;
        let mut acked = 0;
        let nodes_registered = self
            .agents
            .iter()
            .filter(|a| a.shared().metrics.registrations.load(Relaxed) > 0)
            .count();
        for a in self.agents.drain(..) {
            registrations += a.shared().metrics.registrations.load(Relaxed);
            resyncs += a.shared().metrics.resyncs.load(Relaxed);
            acked += lock(&a.shared().table).totals().acked;
            a.stop();
            let _ = a.join();
        }
        self.stop_rm();
        let records = rm_core::completion_log::read_dir_records(&self.dir.join("completion-log"))?;
        let mut in_log: HashMap<ContainerId, u64> = HashMap::new();
        for r in &records {
            let c = r.container;
            let id = ContainerId::new(
                AppId::new(c.app.cluster_timestamp, c.app.id),
                c.attempt,
                c.id,
            );
            *in_log.entry(id).or_default() += 1;
        }
        let mut made: Vec<ContainerId> = self.journal.clone();
        made.sort_unstable();
        made.dedup();
        let lost = made.iter().filter(|id| !in_log.contains_key(id)).count() as u64;
        let dups = in_log.values().map(|&n| n.saturating_sub(1)).sum();
        let report = DemoReport {
            nodes_registered,
            heartbeats: end.heartbeats,
            containers_completed: made.len() as u64,
            completions_acked: acked,
            lost_completions: lost,
            duplicate_log_records: dups,
            completions_in_log: in_log.len() as u64,
            registrations,
            resyncs,
            p99_us: end.p99_us,
            duration_s: self.started.elapsed().as_secs_f64(),
            applications: 0,
            applications_succeeded: 0,
        };
        if self.remove_dir {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
        Ok(report)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for a in self.agents.drain(..) {
            a.stop();
            let _ = a.join();
        }
        self.stop_rm();
        if self.remove_dir {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// `hotpath demo` flags.
#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// Stop after this many seconds (default: run until Ctrl-C).
    #[arg(long)]
    pub duration: Option<f64>,
    /// Print one final JSON object instead of the summary.
    #[arg(long)]
    pub json: bool,
    /// Number of agents.
    #[arg(long, default_value_t = 4)]
    pub agents: usize,
    /// Simulated containers started per second per agent.
    #[arg(long, default_value_t = 20.0)]
    pub rate: f64,
    /// Mean run time of a simulated container (ms).
    #[arg(long, default_value_t = 2000)]
    pub mean_ms: u64,
    /// Heartbeat interval the RM hands out (ms).
    #[arg(long, default_value_t = 1000)]
    pub heartbeat_ms: u64,
    /// Pin the RM's and agents' threads by the hw plan.
    #[arg(long)]
    pub pin: bool,
    /// Simulated containers (no applications; `--rate`, `--mean-ms`), as the load tools use.
    #[arg(long)]
    pub simulate: bool,
    /// Applications kept running at once (real mode).
    #[arg(long, default_value_t = 2)]
    pub concurrent: usize,
    /// Containers per application (real mode).
    #[arg(long, default_value_t = 8)]
    pub containers: u32,
    /// What each container runs (bash; real mode).
    #[arg(long, default_value = "sleep 2")]
    pub command: String,
    /// Stop after this many applications (real mode; default: by --duration or Ctrl-C).
    #[arg(long)]
    pub applications: Option<u64>,
}

/// Runs `hotpath demo`.
pub fn run(args: &DemoArgs) -> Result<DemoReport, DemoError> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, stop.clone())
            .map_err(|e| DemoError::Io(format!("installing the signal handler: {e}")))?;
    }
    if args.simulate {
        run_simulated(args, &stop)
    } else {
        run_apps(args, &stop)
    }
}

/// One `hotpath app run` child of the real demo.
struct AppChild {
    child: std::process::Child,
    log: PathBuf,
    started: Instant,
}

impl AppChild {
    /// The client's `… final status X` line and its node table, from its log.
    fn outcome(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let fin = text
            .lines()
            .rev()
            .find(|l| l.contains(" final status "))
            .unwrap_or("(no final status line)");
        format!("{fin} ({:.1} s)", self.started.elapsed().as_secs_f64())
    }
}

/// The real demo: applications with real containers (see the module docs).
fn run_apps(args: &DemoArgs, stop: &AtomicBool) -> Result<DemoReport, DemoError> {
    let cfg = DemoConfig {
        agents: args.agents.clamp(1, 250),
        heartbeat_ms: args.heartbeat_ms.max(10),
        pin: args.pin,
        apps: true,
        ..DemoConfig::default()
    };
    let exe = std::env::current_exe()
        .map_err(|e| DemoError::Io(format!("locating the hotpath binary: {e}")))?;
    let mut c = Cluster::start(cfg)?;
    let rm = c
        .rm()
        .ok_or_else(|| DemoError::Io("the RM did not start".into()))?;
    let (Some(client), Some(scheduler)) = (rm.client_addr(), rm.scheduler_addr()) else {
        return Err(DemoError::Io("the RM serves no applications".into()));
    };
    if !args.json {
        eprintln!(
            "hotpath demo: rm-core on {} (clients {client}, AMs {scheduler}) with {} agents on {}..; \
{} application(s) at a time, {} × [{}] each; Ctrl-C to stop",
            c.rm_addr(),
            c.agents().len(),
            agent_ip(0),
            args.concurrent.max(1),
            args.containers,
            args.command
        );
    }
    let t0 = Instant::now();
    let end = args
        .duration
        .map(|d| t0 + Duration::from_secs_f64(d.max(0.0)));
    let (mut submitted, mut ended, mut succeeded) = (0u64, 0u64, 0u64);
    let mut live: Vec<AppChild> = Vec::new();
    let mut prev = c.sample();
    let mut next_status = Instant::now() + Duration::from_secs(1);
    loop {
        let stopping = stop.load(Ordering::Relaxed)
            || end.is_some_and(|e| Instant::now() >= e)
            || args.applications.is_some_and(|n| ended >= n);
        // Applications that ended.
        let mut i = 0;
        while i < live.len() {
            match live[i].child.try_wait() {
                Ok(Some(status)) => {
                    let a = live.swap_remove(i);
                    ended += 1;
                    if status.code() == Some(0) {
                        succeeded += 1;
                    }
                    if !args.json {
                        eprintln!("{}", a.outcome());
                    }
                }
                Ok(None) => i += 1,
                Err(e) => return Err(DemoError::Io(format!("waiting for app run: {e}"))),
            }
        }
        if stopping && live.is_empty() {
            break;
        }
        // Keep --concurrent applications going.
        while !stopping
            && live.len() < args.concurrent.max(1)
            && args.applications.is_none_or(|n| submitted < n)
        {
            submitted += 1;
            let log = c.dir().join(format!("app-{submitted}.log"));
            let out = std::fs::File::create(&log)
                .map_err(|e| DemoError::Io(format!("{}: {e}", log.display())))?;
            let err = out
                .try_clone()
                .map_err(|e| DemoError::Io(format!("{}: {e}", log.display())))?;
            // Its own process group: Ctrl-C stops the demo from submitting, and the clients
            // already running follow their applications to the end.
            use std::os::unix::process::CommandExt;
            let child = std::process::Command::new(&exe)
                .process_group(0)
                .args(["app", "run", "--rm", &client.to_string()])
                .args(["--scheduler", &scheduler.to_string()])
                .args(["--containers", &args.containers.to_string()])
                .args(["--name", &format!("demo-{submitted}")])
                .args(["--", &args.command])
                .stdin(std::process::Stdio::null())
                .stdout(out)
                .stderr(err)
                .spawn()
                .map_err(|e| DemoError::Io(format!("starting hotpath app run: {e}")))?;
            live.push(AppChild {
                child,
                log,
                started: Instant::now(),
            });
        }
        if Instant::now() >= next_status {
            next_status += Duration::from_secs(1);
            let now = c.sample();
            if !args.json {
                eprintln!(
                    "{} | applications running {} done {} (succeeded {})",
                    Cluster::status_line(&prev, &now),
                    live.len(),
                    ended,
                    succeeded
                );
            }
            prev = now;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    if !args.json {
        eprintln!("waiting for every completion to be acknowledged");
    }
    let settled = c.drain(Duration::from_secs(15));
    let mut report = c.finish()?;
    report.applications = ended;
    report.applications_succeeded = succeeded;
    if args.json {
        println!("{}", serde_json::to_string(&report).unwrap_or_default());
    } else {
        println!("{}", json!({"settled": settled, "report": report}));
    }
    Ok(report)
}

/// The simulated demo (`--simulate`).
fn run_simulated(args: &DemoArgs, stop: &AtomicBool) -> Result<DemoReport, DemoError> {
    let mut cfg = DemoConfig {
        agents: args.agents.clamp(1, 250),
        heartbeat_ms: args.heartbeat_ms.max(10),
        pin: args.pin,
        ..DemoConfig::default()
    };
    cfg.sim.rate_per_s = args.rate.max(0.0);
    cfg.sim.mean_run = Duration::from_millis(args.mean_ms);
    let mut c = Cluster::start(cfg)?;
    if !args.json {
        eprintln!(
            "hotpath demo: rm-core on {} with {} agents on {}..; Ctrl-C to stop",
            c.rm_addr(),
            c.agents().len(),
            agent_ip(0)
        );
    }
    let t0 = Instant::now();
    let end = args
        .duration
        .map(|d| t0 + Duration::from_secs_f64(d.max(0.0)));
    let mut prev = c.sample();
    loop {
        let next = Instant::now() + Duration::from_secs(1);
        while Instant::now() < next && !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let now = c.sample();
        if !args.json {
            eprintln!("{}", Cluster::status_line(&prev, &now));
        }
        prev = now;
        if stop.load(Ordering::Relaxed) || end.is_some_and(|e| Instant::now() >= e) {
            break;
        }
    }
    if !args.json {
        eprintln!("draining: running containers finish now; waiting for every completion to be acknowledged");
    }
    let settled = c.drain(Duration::from_secs(15));
    let report = c.finish()?;
    if args.json {
        println!("{}", serde_json::to_string(&report).unwrap_or_default());
    } else {
        println!("{}", json!({"settled": settled, "report": report}));
    }
    Ok(report)
}
