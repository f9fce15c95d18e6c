//! `hotpath-bench loadgen heartbeats`: N simulated NodeManagers over real TCP against any
//! ResourceTracker (ours, Java's, or the raw reference server), one connection per node by
//! default, as a real cluster makes them.
//!
//! How it fits together:
//!
//! - The engine is [`crate::storm`]: one or two epoll event-loop threads per load process drive
//!   every connection (nonblocking connects on a registration ramp, paced heartbeats with jitter,
//!   the NodeManager's RESYNC / SHUTDOWN / reconnect behaviour, latency from each beat's
//!   scheduled time). Its module comment says why it is not `ipc`'s transport.
//! - This module is the driver: it parses the flags, starts the server under test when asked
//!   (`--target rm`: a fresh `hotpath rm`; `raw`: a fresh `hotpath-bench storm-raw`; `both`: one
//!   after the other in one sitting, the raw server answering with the heartbeat response the
//!   RM sent; `external`: `--rm HOST:PORT`), runs the load, reads the server's CPU time from
//!   `/proc/<pid>/stat` at the measured window's edges, scrapes `/metrics` for the RM's
//!   dispatcher backlog, and prints the figures ([`Figures`], `--json`).
//! - More connections than one process may hold (RLIMIT_NOFILE, raised to its hard limit at
//!   start) take `--processes P` load processes: children of this binary, each with the nodes
//!   `g ≡ p (mod P)` and its share of the connections. They are coordinated by a shared start
//!   time on their command line (`--start-unix-ns`, wall clock): every process derives the same
//!   timeline from it (ramp slot of node `g` = start + g/ramp, measured window = after the ramp
//!   and one interval of warm-up), so no further messages are needed. Each child prints its
//!   [`storm::ProcFigures`] (counters, both latency histograms as (value, count) pairs, its own
//!   CPU time and descriptors) as one JSON line on stdout; the parent merges them.
//!
//! `--json` keys: those of [`Figures`]. `p50_us`…`max_us` keep their old meaning (RPC latency,
//! from the frame's write to its answer); `sched_p50_us`…`sched_max_us` run from the scheduled
//! time. `--target both` prints `{"rm": {…}, "raw": {…}, "cpu_ratio_rm_over_raw": x}`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering::*};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use hadoop_wire::pb::hadoop::yarn::{
    MasterKeyProto, NodeActionProto, NodeHeartbeatResponseProto, RegisterNodeManagerResponseProto,
};
use hadoop_wire::view::yarn::{MasterKeyView, NodeHeartbeatResponseView};
use prost::Message;

use crate::storm::{self, Plan, ProcFigures, Timeline};

#[derive(Args)]
pub struct LoadgenArgs {
    #[command(subcommand)]
    cmd: LoadgenCmd,
}

#[derive(Subcommand)]
enum LoadgenCmd {
    /// Simulated NodeManagers heartbeating a ResourceTracker (register, then paced heartbeats).
    Heartbeats(HeartbeatArgs),
}

/// What the load runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Target {
    /// The ResourceTracker at `--rm` (optionally `--pid`, `--metrics`).
    External,
    /// A fresh `hotpath rm` started for the run.
    Rm,
    /// A fresh raw reference server (`hotpath-bench storm-raw`).
    Raw,
    /// `rm`, then `raw` answering with the RM's heartbeat response.
    Both,
    /// A fresh Java ResourceManager: the peer's `yarn-rm` (a MiniYARNCluster without
    /// NodeManagers, Hadoop 3.5, log level ERROR); its JVM's CPU is the RM CPU.
    Java,
}

#[derive(Args, Clone)]
pub struct HeartbeatArgs {
    /// The ResourceTracker address (HOST:PORT), for `--target external` (the default when given).
    #[arg(long)]
    rm: Option<String>,
    /// What to run against (default: external with --rm, else both).
    #[arg(long, value_enum)]
    target: Option<Target>,
    /// Simulated NodeManagers.
    #[arg(long, default_value_t = 1000)]
    nodes: usize,
    /// RUNNING container statuses per heartbeat.
    #[arg(long, default_value_t = 50)]
    containers: usize,
    /// Each node's heartbeat period.
    #[arg(long, default_value_t = 1000)]
    interval_ms: u64,
    /// Relative jitter of each interval (0.05 = ±5 %).
    #[arg(long, default_value_t = 0.05)]
    jitter: f64,
    /// Measured seconds (after the registration ramp and one interval of warm-up).
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// TCP connections (nodes are dealt round-robin onto them); default one per node.
    #[arg(long)]
    connections: Option<usize>,
    /// Event-loop threads per load process.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Load processes (default: as few as the file limit allows).
    #[arg(long)]
    processes: Option<usize>,
    /// Registrations per second on the ramp (node g registers at start + g/ramp).
    #[arg(long, default_value_t = 2000.0)]
    ramp_per_s: f64,
    /// Delay before a dead or refused connection is retried (Java's
    /// yarn.resourcemanager.connect.retry-interval.ms is 30 s; shorter here).
    #[arg(long, default_value_t = 1000)]
    retry_ms: u64,
    /// Loopback source addresses 127.0.0.1..=127.0.0.K for the connections (when the
    /// ephemeral port range of one source address is the limit).
    #[arg(long, default_value_t = 1)]
    source_ips: u8,
    /// The RM's Prometheus endpoint (`http://host:port/metrics` or `host:port`), scraped for the
    /// dispatcher backlog (set automatically with --target rm).
    #[arg(long)]
    metrics: Option<String>,
    /// The server process whose CPU time (utime+stime from /proc/PID/stat) is reported per
    /// heartbeat (set automatically with --target rm|raw).
    #[arg(long)]
    pid: Option<u32>,
    /// First node port; node i is 127.0.0.1:(port_base + i) (127.0.k.1 beyond 40,000 nodes).
    #[arg(long, default_value_t = 20000)]
    port_base: u16,
    /// The `hotpath` binary for --target rm (default: beside this one).
    #[arg(long)]
    hotpath_bin: Option<PathBuf>,
    /// A configuration key for the server under test (`KEY=VALUE`, repeatable): passed as
    /// `--set` to `hotpath rm` and to the raw server (which reads the transport's keys), e.g.
    /// `hotpath.ipc.server.batch-wait-us=200`.
    #[arg(long, value_name = "KEY=VALUE")]
    server_set: Vec<String>,
    #[arg(long)]
    json: bool,
    /// Internal: this is load process N of --processes (prints its ProcFigures as JSON).
    #[arg(long, hide = true)]
    child_index: Option<usize>,
    /// Internal: the shared start, ns since the Unix epoch.
    #[arg(long, hide = true)]
    start_unix_ns: Option<u64>,
    /// Internal: the peer is the raw server.
    #[arg(long, hide = true)]
    raw_peer: bool,
}

/// The figures of one run (`--json` keys).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Figures {
    /// `rm`, `raw`, `java` or `external`.
    pub target: String,
    pub nodes: usize,
    pub containers: usize,
    pub connections: usize,
    /// Event-loop threads per load process.
    pub threads: usize,
    pub processes: usize,
    pub interval_ms: u64,
    pub jitter: f64,
    pub ramp_per_s: f64,
    pub seconds: f64,
    pub hb_per_s: f64,
    pub target_hb_per_s: f64,
    /// RPC latency (frame written → answer read), µs.
    pub p50_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
    /// Latency from each heartbeat's scheduled time, µs (no coordinated omission).
    pub sched_p50_us: u64,
    pub sched_p99_us: u64,
    pub sched_p999_us: u64,
    pub sched_max_us: u64,
    pub max_backlog: Option<u64>,
    pub max_backlog_sampled: Option<u64>,
    pub late: u64,
    pub skipped: u64,
    pub resyncs: u64,
    pub shutdowns: u64,
    pub errors: u64,
    /// Heartbeat answers inside the measured window.
    pub heartbeats: u64,
    pub registered: u64,
    pub registrations: u64,
    pub response_id_errors: u64,
    pub min_response_id: Option<i32>,
    pub max_response_id: Option<i32>,
    pub disconnects: u64,
    pub reconnects: u64,
    pub connect_failures: u64,
    pub unanswered_at_end: u64,
    /// Ramp start → last first registration answered.
    pub register_seconds: f64,
    /// CPU of the server process (`--pid`) per answered heartbeat, µs.
    pub server_cpu_us_per_hb: Option<f64>,
    /// The same, when the server is an RM (target rm or external).
    pub rm_cpu_us_per_hb: Option<f64>,
    /// The same, when the server is the raw reference server.
    pub raw_cpu_us_per_req: Option<f64>,
    /// The load processes' CPU per answered heartbeat, µs, and as a share of one CPU (%).
    pub loadgen_cpu_us_per_hb: f64,
    pub loadgen_cpu_pct: f64,
    /// Descriptors open in the load processes (summed) and the per-process limit.
    pub fds: u64,
    pub fd_limit: u64,
    /// A heartbeat answer's frame size, length prefix included.
    pub response_frame_bytes: Option<usize>,
    /// For the raw server: where its answer came from (`rm`: captured in this sitting;
    /// `fixture`: a hand-built steady-state answer).
    pub response_source: Option<String>,
    pub first_error: Option<String>,
    /// The heartbeat answer's message bytes (hex), for the raw server's template.
    #[serde(skip)]
    pub sample_payload_hex: Option<String>,
}

pub fn run(args: LoadgenArgs) -> Result<()> {
    match args.cmd {
        LoadgenCmd::Heartbeats(a) => heartbeats_cmd(&a),
    }
}

fn heartbeats_cmd(a: &HeartbeatArgs) -> Result<()> {
    if a.child_index.is_some() {
        let f = child(a)?;
        println!("{}", serde_json::to_string(&f)?);
        return Ok(());
    }
    let target = match (a.target, &a.rm) {
        (Some(t), _) => t,
        (None, Some(_)) => Target::External,
        (None, None) => Target::Both,
    };
    match target {
        Target::External => {
            let rm =
                a.rm.as_deref()
                    .context("--target external needs --rm HOST:PORT")?;
            let addr = resolve(rm)?;
            let f = drive(a, addr, a.raw_peer, a.pid, a.metrics.as_deref(), "external")?;
            emit(a, &f)
        }
        Target::Rm => {
            let f = against_rm(a)?;
            emit(a, &f)
        }
        Target::Raw => {
            let f = against_raw(a, None)?;
            emit(a, &f)
        }
        Target::Java => {
            let f = against_java(a)?;
            emit(a, &f)
        }
        Target::Both => {
            let rm = against_rm(a)?;
            std::thread::sleep(Duration::from_millis(500));
            let raw = against_raw(a, rm.sample_payload_hex.as_deref())?;
            let ratio = match (rm.rm_cpu_us_per_hb, raw.raw_cpu_us_per_req) {
                (Some(r), Some(w)) if w > 0.0 => Some(r / w),
                _ => None,
            };
            if a.json {
                println!(
                    "{}",
                    serde_json::json!({ "rm": rm, "raw": raw, "cpu_ratio_rm_over_raw": ratio })
                );
            } else {
                print_text(&rm);
                print_text(&raw);
                if let Some(r) = ratio {
                    println!("RM CPU per heartbeat / raw CPU per request: {r:.2}");
                }
            }
            Ok(())
        }
    }
}

fn emit(a: &HeartbeatArgs, f: &Figures) -> Result<()> {
    if a.json {
        println!("{}", serde_json::to_string(f)?);
    } else {
        print_text(f);
    }
    Ok(())
}

fn resolve(s: &str) -> Result<SocketAddr> {
    s.to_socket_addrs()
        .with_context(|| format!("resolving {s}"))?
        .next()
        .with_context(|| format!("{s} resolves to nothing"))
}

/// A server under test, killed (if still running) when dropped.
struct ServerChild {
    child: Child,
    pid: u32,
    addr: SocketAddr,
    metrics: Option<String>,
}

impl Drop for ServerChild {
    fn drop(&mut self) {
        // Closing stdin stops the raw server; SIGTERM stops the RM (it drains and exits).
        drop(self.child.stdin.take());
        // SAFETY: kill takes no pointers; the pid is our own child's, not yet reaped.
        unsafe {
            libc::kill(self.pid as libc::pid_t, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads the child's `READY {json}` line.
fn ready(child: &mut Child, what: &str) -> Result<serde_json::Value> {
    let out = child.stdout.take().context("child stdout")?;
    let mut line = String::new();
    BufReader::new(out)
        .read_line(&mut line)
        .with_context(|| format!("reading {what}'s READY line"))?;
    let json = line
        .trim()
        .strip_prefix("READY ")
        .with_context(|| format!("{what} printed no READY line: {line:?}"))?;
    serde_json::from_str(json).with_context(|| format!("{what}'s READY line"))
}

fn sibling(name: &str) -> Result<PathBuf> {
    let me = std::env::current_exe().context("locating hotpath-bench")?;
    Ok(me.with_file_name(name))
}

fn start_rm(a: &HeartbeatArgs, dir: &std::path::Path) -> Result<ServerChild> {
    let bin = match &a.hotpath_bin {
        Some(b) => b.clone(),
        None => sibling("hotpath")?,
    };
    let mut child = Command::new(&bin)
        .args(["rm", "--address", "127.0.0.1:0", "--metrics-port", "0"])
        .arg("--ready-line")
        // The simulated containers belong to no application this RM runs. With applications on,
        // the RM would order every one of them cleaned up on every heartbeat, as Java's does
        // (wire doc trap 2), which is not the steady state of a real cluster, whose containers
        // the RM allocated. With applications off it takes the nodes' applications as they
        // report them, so the heartbeats are those of known, running containers.
        // `--server-set hotpath.rm.applications.enabled=true` measures the cleanup path instead.
        .args(["--set", "hotpath.rm.applications.enabled=false"])
        // (Should applications be turned on, their two servers take free loopback ports, so
        // that runs side by side never share 8032/8030.)
        .args(["--set", "yarn.resourcemanager.address=127.0.0.1:0"])
        .args([
            "--set",
            "yarn.resourcemanager.scheduler.address=127.0.0.1:0",
        ])
        .args(["--set", "yarn.resourcemanager.admin.address=127.0.0.1:0"])
        .arg("--set")
        .arg(format!(
            "hotpath.rm.completion-log.dir={}",
            dir.join("completion-log").display()
        ))
        .args(a.server_set.iter().flat_map(|kv| ["--set", kv.as_str()]))
        .env(
            "HOTPATH_LOG",
            std::env::var("HOTPATH_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| {
            format!(
                "starting {} rm (build it: cargo build --release -p agent)",
                bin.display()
            )
        })?;
    let v = ready(&mut child, "hotpath rm")?;
    let pid = v["pid"].as_u64().context("READY without pid")? as u32;
    let addr = resolve(
        v["resource_tracker"]
            .as_str()
            .context("READY without resource_tracker")?,
    )?;
    Ok(ServerChild {
        child,
        pid,
        addr,
        metrics: v["metrics"].as_str().map(str::to_string),
    })
}

fn against_rm(a: &HeartbeatArgs) -> Result<Figures> {
    let dir = tempfile::tempdir().context("a temp dir for the RM's completion log")?;
    let rm = start_rm(a, dir.path())?;
    drive(a, rm.addr, false, Some(rm.pid), rm.metrics.as_deref(), "rm")
}

/// The same load against a fresh Java ResourceManager (peer `yarn-rm`). Its JVM holds one
/// descriptor per node connection, within the machine's per-process limit up to ~19,000 nodes.
fn against_java(a: &HeartbeatArgs) -> Result<Figures> {
    let peer = peer_harness::Peer::start(
        peer_harness::Mode::YarnRm,
        &["--nms", "0", "--log-level", "ERROR"],
    )
    .context("starting the Java RM peer (peers/hadoop; built by scripts/test)")?;
    let addr = peer
        .resource_tracker_addr()
        .context("the Java RM's resource-tracker address")?;
    let f = drive(a, addr, false, Some(peer.pid()), None, "java");
    peer.stop(Duration::from_secs(30));
    f
}

/// A steady-state heartbeat answer as our RM writes it (responseId, NORMAL, the interval), for
/// the raw server when no RM answer was captured in this sitting.
fn fixture_payload(interval_ms: u64) -> Vec<u8> {
    NodeHeartbeatResponseProto {
        response_id: Some(1000),
        node_action: Some(NodeActionProto::Normal as i32),
        next_heart_beat_interval: Some(interval_ms as i64),
        ..Default::default()
    }
    .encode_to_vec()
}

fn against_raw(a: &HeartbeatArgs, captured_hex: Option<&str>) -> Result<Figures> {
    let (hex, source) = match captured_hex {
        Some(h) => (h.to_string(), "rm"),
        None => (storm::hex(&fixture_payload(a.interval_ms)), "fixture"),
    };
    let mut child = Command::new(std::env::current_exe()?)
        .args(["storm-raw", "--ready-line", "--payload-hex", &hex])
        .args(a.server_set.iter().flat_map(|kv| ["--set", kv.as_str()]))
        .env(
            "HOTPATH_LOG",
            std::env::var("HOTPATH_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("starting hotpath-bench storm-raw")?;
    let v = ready(&mut child, "storm-raw")?;
    let pid = v["pid"].as_u64().context("READY without pid")? as u32;
    let addr = resolve(v["address"].as_str().context("READY without address")?)?;
    let raw = ServerChild {
        child,
        pid,
        addr,
        metrics: None,
    };
    let mut f = drive(a, raw.addr, true, Some(raw.pid), None, "raw")?;
    f.response_source = Some(source.into());
    drop(raw);
    Ok(f)
}

fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// The timeline every load process derives from the shared start (see the module comment).
fn timeline(a: &HeartbeatArgs, start: u64) -> Timeline {
    let s = |x: f64| (x * 1e9) as u64;
    let interval = a.interval_ms.max(1) as f64 / 1000.0;
    let ramp_end = start + s(a.nodes as f64 / a.ramp_per_s.max(1e-3));
    let m0 = ramp_end + s(interval + 1.0);
    let m1 = m0 + s(a.duration.max(0.1));
    Timeline {
        start,
        m0,
        m1,
        stop: m1 + s(interval.clamp(0.2, 2.0)),
    }
}

fn source_ips(a: &HeartbeatArgs, addr: SocketAddr) -> Vec<Ipv4Addr> {
    match addr.ip() {
        IpAddr::V4(ip) if ip.is_loopback() && a.source_ips > 1 => (1..=a.source_ips)
            .map(|i| Ipv4Addr::new(127, 0, 0, i))
            .collect(),
        _ => Vec::new(),
    }
}

fn plan(
    a: &HeartbeatArgs,
    addr: SocketAddr,
    raw_peer: bool,
    nodes: Vec<usize>,
    connections: usize,
    tl: Timeline,
) -> Plan {
    Plan {
        addr,
        nodes,
        total_nodes: a.nodes,
        connections,
        threads: a.threads.clamp(1, 64),
        containers: a.containers,
        interval_ns: a.interval_ms.max(1) * 1_000_000,
        jitter: a.jitter.clamp(0.0, 0.9),
        ramp_per_s: a.ramp_per_s,
        retry_ns: a.retry_ms.max(1) * 1_000_000,
        port_base: a.port_base,
        source_ips: source_ips(a, addr),
        raw_peer,
        timeline: tl,
    }
}

/// Connections of load process `p` of `procs` (their sum is `k`).
fn share(k: usize, procs: usize, p: usize) -> usize {
    k / procs + usize::from(p < k % procs)
}

/// A child load process: its nodes, the shared timeline; prints ProcFigures.
fn child(a: &HeartbeatArgs) -> Result<ProcFigures> {
    let p = a.child_index.context("child index")?;
    let procs = a.processes.unwrap_or(1).max(1);
    let addr = resolve(a.rm.as_deref().context("a child needs --rm")?)?;
    let clock0 = Instant::now();
    let now = unix_ns();
    let start_unix = a.start_unix_ns.context("a child needs --start-unix-ns")?;
    let start = start_unix.saturating_sub(now);
    let k = a.connections.unwrap_or(a.nodes).clamp(1, a.nodes);
    let nodes: Vec<usize> = (p..a.nodes).step_by(procs).collect();
    let conns = share(k, procs, p).clamp(1, nodes.len().max(1));
    let mut f = storm::run_process(
        plan(a, addr, a.raw_peer, nodes, conns, timeline(a, start)),
        clock0,
    )?;
    f.started_late_ms = now.saturating_sub(start_unix) as f64 / 1e6;
    Ok(f)
}

/// Runs the load against `addr` and returns the merged figures.
fn drive(
    a: &HeartbeatArgs,
    addr: SocketAddr,
    raw_peer: bool,
    pid: Option<u32>,
    metrics: Option<&str>,
    target: &str,
) -> Result<Figures> {
    if a.nodes == 0 {
        bail!("--nodes must be at least 1");
    }
    if a.port_base as usize + a.nodes.min(40_000) > 65_536 {
        bail!(
            "--port-base {} leaves no room for the node ports",
            a.port_base
        );
    }
    let fd_limit = storm::raise_nofile();
    let k = a.connections.unwrap_or(a.nodes).clamp(1, a.nodes);
    // Each process keeps some descriptors for itself (std streams, epoll, /proc reads).
    let per_proc = (fd_limit as usize).saturating_sub(256).max(64);
    let procs = a.processes.unwrap_or(k.div_ceil(per_proc)).clamp(1, k);
    if share(k, procs, 0) > per_proc {
        bail!(
            "{} connections in {procs} processes exceed the file limit ({fd_limit}); raise --processes",
            k
        );
    }
    let clock0 = Instant::now();
    // Room to build the encoded requests before the ramp starts.
    let setup = Duration::from_millis(300)
        + Duration::from_micros(40 * (a.nodes / procs) as u64)
        + if procs > 1 {
            Duration::from_millis(500)
        } else {
            Duration::ZERO
        };
    let start_unix = unix_ns() + setup.as_nanos() as u64;
    let tl = timeline(a, setup.as_nanos() as u64);

    let local = if procs == 1 {
        let pl = plan(a, addr, raw_peer, (0..a.nodes).collect(), k, tl);
        Some(
            std::thread::Builder::new()
                .name("lg-proc".into())
                .spawn(move || storm::run_process(pl, clock0))?,
        )
    } else {
        None
    };
    let mut children = Vec::new();
    if procs > 1 {
        let me = std::env::current_exe()?;
        for p in 0..procs {
            let mut cmd = Command::new(&me);
            cmd.args(["loadgen", "heartbeats", "--rm", &addr.to_string()])
                .args(["--nodes", &a.nodes.to_string()])
                .args(["--containers", &a.containers.to_string()])
                .args(["--interval-ms", &a.interval_ms.to_string()])
                .args(["--jitter", &a.jitter.to_string()])
                .args(["--duration", &a.duration.to_string()])
                .args(["--connections", &k.to_string()])
                .args(["--threads", &a.threads.to_string()])
                .args(["--processes", &procs.to_string()])
                .args(["--ramp-per-s", &a.ramp_per_s.to_string()])
                .args(["--retry-ms", &a.retry_ms.to_string()])
                .args(["--source-ips", &a.source_ips.to_string()])
                .args(["--port-base", &a.port_base.to_string()])
                .args(["--child-index", &p.to_string()])
                .args(["--start-unix-ns", &start_unix.to_string()])
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit());
            if raw_peer {
                cmd.arg("--raw-peer");
            }
            children.push(cmd.spawn().context("starting a load process")?);
        }
    }

    storm::sleep_until(clock0, tl.m0);
    let scraper = metrics.map(Scraper::start);
    let cpu0 = pid.map(proc_cpu_ticks).transpose()?;
    storm::sleep_until(clock0, tl.m1);
    let cpu1 = pid.map(proc_cpu_ticks).transpose()?;
    let sampled = scraper.map(|s| s.finish());
    let high_water = match metrics {
        Some(m) => Some(scrape(m).context("scraping the RM's /metrics")?.1),
        None => None,
    };

    let mut parts = Vec::new();
    if let Some(h) = local {
        parts.push(
            h.join()
                .map_err(|_| anyhow::anyhow!("the load thread panicked"))??,
        );
    }
    for mut c in children {
        let mut out = String::new();
        c.stdout
            .take()
            .context("child stdout")?
            .read_to_string(&mut out)?;
        let st = c.wait()?;
        if !st.success() {
            bail!("a load process failed ({st})");
        }
        let line = out
            .lines()
            .last()
            .context("a load process printed nothing")?;
        parts.push(serde_json::from_str(line).context("a load process's figures")?);
    }
    merge(
        a, target, k, procs, &parts, tl, cpu0, cpu1, sampled, high_water, fd_limit,
    )
}

#[allow(clippy::too_many_arguments)]
fn merge(
    a: &HeartbeatArgs,
    target: &str,
    k: usize,
    procs: usize,
    parts: &[ProcFigures],
    tl: Timeline,
    cpu0: Option<u64>,
    cpu1: Option<u64>,
    sampled: Option<u64>,
    high_water: Option<u64>,
    fd_limit: u64,
) -> Result<Figures> {
    let mut c = storm::Counters::default();
    let (mut rpc, mut sched) = (storm::hist(), storm::hist());
    let mut cpu_us = 0;
    let mut fds = 0;
    let mut last_reg = 0;
    let (mut lo, mut hi) = (None::<i32>, None::<i32>);
    let mut sample = None;
    let mut first_error = None;
    for p in parts {
        c.add(&p.counters);
        storm::hist_from(&p.rpc_us, &mut rpc)?;
        storm::hist_from(&p.sched_us, &mut sched)?;
        cpu_us += p.cpu_us;
        fds += p.fds;
        last_reg = last_reg.max(p.last_registration_ns);
        lo = match (lo, p.min_response_id) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        };
        hi = hi.max(p.max_response_id);
        if sample.is_none() && p.sample_payload_hex.is_some() {
            sample = Some((p.sample_frame_bytes, p.sample_payload_hex.clone()));
        }
        if first_error.is_none() {
            first_error = p.first_error.clone();
        }
    }
    if let Some(e) = &first_error {
        tracing::warn!("first error: {e}");
    }
    let seconds = (tl.m1 - tl.m0) as f64 / 1e9;
    let hbs = c.heartbeats;
    let server = match (cpu0, cpu1) {
        (Some(x), Some(y)) if hbs > 0 => Some((y - x) as f64 * 1e6 / user_hz() as f64 / hbs as f64),
        _ => None,
    };
    let (frame_bytes, payload) = sample.unwrap_or((None, None));
    Ok(Figures {
        target: target.into(),
        nodes: a.nodes,
        containers: a.containers,
        connections: k,
        threads: parts.first().map_or(a.threads, |p| p.threads),
        processes: procs,
        interval_ms: a.interval_ms,
        jitter: a.jitter,
        ramp_per_s: a.ramp_per_s,
        seconds,
        hb_per_s: hbs as f64 / seconds,
        target_hb_per_s: a.nodes as f64 * 1000.0 / a.interval_ms.max(1) as f64,
        p50_us: rpc.value_at_quantile(0.5),
        p99_us: rpc.value_at_quantile(0.99),
        p999_us: rpc.value_at_quantile(0.999),
        max_us: rpc.max(),
        sched_p50_us: sched.value_at_quantile(0.5),
        sched_p99_us: sched.value_at_quantile(0.99),
        sched_p999_us: sched.value_at_quantile(0.999),
        sched_max_us: sched.max(),
        max_backlog: high_water,
        max_backlog_sampled: sampled,
        late: c.late,
        skipped: c.skipped,
        resyncs: c.resyncs,
        shutdowns: c.shutdowns,
        errors: c.errors,
        heartbeats: hbs,
        registered: c.registered,
        registrations: c.registrations,
        response_id_errors: c.response_id_errors,
        min_response_id: lo,
        max_response_id: hi,
        disconnects: c.disconnects,
        reconnects: c.reconnects,
        connect_failures: c.connect_failures,
        unanswered_at_end: c.unanswered_at_end,
        register_seconds: last_reg as f64 / 1e9,
        server_cpu_us_per_hb: server,
        rm_cpu_us_per_hb: if target == "raw" { None } else { server },
        raw_cpu_us_per_req: if target == "raw" { server } else { None },
        loadgen_cpu_us_per_hb: cpu_us as f64 / hbs.max(1) as f64,
        loadgen_cpu_pct: cpu_us as f64 / seconds / 1e4,
        fds,
        fd_limit,
        response_frame_bytes: frame_bytes,
        response_source: None,
        first_error,
        sample_payload_hex: payload,
    })
}

fn print_text(f: &Figures) {
    println!(
        "[{}] {} nodes × {} containers on {} connections ({} processes × {} loop threads), {:.1} s measured (registration {:.1} s)",
        f.target, f.nodes, f.containers, f.connections, f.processes, f.threads, f.seconds, f.register_seconds
    );
    println!(
        "  heartbeats/s   {:>10.0}  (target {:.0}); registered {}",
        f.hb_per_s, f.target_hb_per_s, f.registered
    );
    println!(
        "  latency from schedule µs p50 {}  p99 {}  p999 {}  max {}",
        f.sched_p50_us, f.sched_p99_us, f.sched_p999_us, f.sched_max_us
    );
    println!(
        "  RPC latency µs           p50 {}  p99 {}  p999 {}  max {}",
        f.p50_us, f.p99_us, f.p999_us, f.max_us
    );
    let b = |v: Option<u64>| v.map_or("n/a".to_string(), |v| v.to_string());
    println!(
        "  max dispatcher backlog {} (sampled in window: {})",
        b(f.max_backlog),
        b(f.max_backlog_sampled)
    );
    println!(
        "  late {}  skipped {}  resyncs {}  shutdowns {}  errors {}  disconnects {}  reconnects {}",
        f.late, f.skipped, f.resyncs, f.shutdowns, f.errors, f.disconnects, f.reconnects
    );
    if let Some(c) = f.server_cpu_us_per_hb {
        println!("  server process CPU per heartbeat {c:.2} µs");
    }
    println!(
        "  loadgen CPU per heartbeat {:.2} µs ({:.1} % of a CPU); {} descriptors open (limit {} per process)",
        f.loadgen_cpu_us_per_hb, f.loadgen_cpu_pct, f.fds, f.fd_limit
    );
}

/// What the loadgen acts on in a response.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Resp {
    /// `NodeHeartbeatResponseProto.response_id` (a registration response has none).
    pub(crate) response_id: Option<i32>,
    /// The container-token and NM-token master-key ids packed as `(container << 32) | nm`, when the
    /// response carries both.
    pub(crate) keys: Option<u64>,
    /// `nodeAction`; absent (or unknown) is `NORMAL`, as in Java.
    pub(crate) action: NodeActionProto,
}

fn pack_keys(container: Option<i32>, nm: Option<i32>) -> Option<u64> {
    Some(((container? as u32 as u64) << 32) | nm? as u32 as u64)
}

/// A `RegisterNodeManagerResponseProto`, decoded with prost: once per node (and after a
/// RESYNC), so the allocation of its key bytes does not matter.
pub(crate) fn register_response(b: &[u8]) -> Result<Resp, prost::DecodeError> {
    let r = RegisterNodeManagerResponseProto::decode(b)?;
    let id = |k: &Option<MasterKeyProto>| k.as_ref().and_then(|k| k.key_id);
    Ok(Resp {
        response_id: None,
        keys: pack_keys(
            id(&r.container_token_master_key),
            id(&r.nm_token_master_key),
        ),
        action: r.node_action(),
    })
}

/// A `NodeHeartbeatResponseProto`, every heartbeat: read in place with the view, no allocation.
pub(crate) fn heartbeat_response(b: &[u8]) -> Result<Resp, hadoop_wire::reader::DecodeError> {
    let v = NodeHeartbeatResponseView::new(b);
    let id = |k: Option<MasterKeyView<'_>>| k.map(|k| k.key_id()).transpose().map(Option::flatten);
    Ok(Resp {
        response_id: v.response_id()?,
        keys: pack_keys(
            id(v.container_token_master_key()?)?,
            id(v.nm_token_master_key()?)?,
        ),
        action: v.node_action()?.unwrap_or(NodeActionProto::Normal),
    })
}

/// utime + stime of `pid`, in clock ticks.
fn proc_cpu_ticks(pid: u32) -> Result<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat"))?;
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = text
        .rsplit_once(')')
        .map(|(_, r)| r)
        .context("/proc/PID/stat without a command name")?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let get = |i: usize| -> Result<u64> {
        f.get(i)
            .context("short /proc/PID/stat")?
            .parse::<u64>()
            .context("/proc/PID/stat field")
    };
    Ok(get(11)? + get(12)?)
}

/// Linux reports /proc times in USER_HZ, which the kernel ABI fixes at 100 on every
/// architecture this runs on (it is what `sysconf(_SC_CLK_TCK)` returns).
fn user_hz() -> u64 {
    100
}

/// This process's user + system CPU time, µs.
pub(crate) fn self_cpu_us() -> u64 {
    proc_cpu_ticks(std::process::id()).unwrap_or(0) * 1_000_000 / user_hz()
}

/// (sampled sum of per-shard queue depth, high-water max over shards) from one GET /metrics.
fn scrape(target: &str) -> Result<(u64, u64)> {
    let hostport = target
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap_or(target);
    let addr = hostport
        .to_socket_addrs()?
        .next()
        .with_context(|| format!("{hostport} resolves to nothing"))?;
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        s,
        "GET /metrics HTTP/1.0\r\nHost: {hostport}\r\nConnection: close\r\n\r\n"
    )?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    let (mut depth, mut high) = (0u64, 0u64);
    for line in text.lines() {
        let value = |l: &str| {
            l.rsplit(' ')
                .next()
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0) as u64
        };
        if line.starts_with("hotpath_rm_shard_queue_depth_max") {
            high = high.max(value(line));
        } else if line.starts_with("hotpath_rm_shard_queue_depth") {
            depth += value(line);
        }
    }
    if !text.contains("hotpath_rm_shard_queue_depth") {
        bail!("no hotpath_rm_shard_queue_depth in {target}");
    }
    Ok((depth, high))
}

/// Samples the total queue depth every 100 ms during the measured window.
struct Scraper {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<Option<u64>>,
}

impl Scraper {
    fn start(target: &str) -> Scraper {
        let stop = Arc::new(AtomicBool::new(false));
        let (st, target) = (stop.clone(), target.to_string());
        let handle = std::thread::spawn(move || {
            let mut max = None::<u64>;
            while !st.load(Acquire) {
                if let Ok((d, _)) = scrape(&target) {
                    max = Some(max.map_or(d, |m| m.max(d)));
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            max
        });
        Scraper { stop, handle }
    }

    fn finish(self) -> u64 {
        self.stop.store(true, Release);
        self.handle.join().ok().flatten().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_heartbeat_and_register_responses() {
        use hadoop_wire::pb::hadoop::yarn::NodeHeartbeatResponseProto;
        let mk = |id| MasterKeyProto {
            key_id: Some(id),
            bytes: Some(vec![1, 2, 3]),
        };
        let hb = NodeHeartbeatResponseProto {
            response_id: Some(41),
            container_token_master_key: Some(mk(7)),
            nm_token_master_key: Some(mk(-3)),
            node_action: Some(NodeActionProto::Resync as i32),
            ..Default::default()
        }
        .encode_to_vec();
        assert_eq!(
            heartbeat_response(&hb).unwrap(),
            Resp {
                response_id: Some(41),
                keys: Some((7u64 << 32) | (-3i32) as u32 as u64),
                action: NodeActionProto::Resync,
            }
        );
        // Keys only when both are there; no action is NORMAL.
        let hb1 = NodeHeartbeatResponseProto {
            response_id: Some(2),
            container_token_master_key: Some(mk(7)),
            ..Default::default()
        }
        .encode_to_vec();
        assert_eq!(
            heartbeat_response(&hb1).unwrap(),
            Resp {
                response_id: Some(2),
                keys: None,
                action: NodeActionProto::Normal,
            }
        );
        let reg = RegisterNodeManagerResponseProto {
            container_token_master_key: Some(mk(5)),
            nm_token_master_key: Some(mk(6)),
            node_action: Some(NodeActionProto::Shutdown as i32),
            ..Default::default()
        }
        .encode_to_vec();
        assert_eq!(
            register_response(&reg).unwrap(),
            Resp {
                response_id: None,
                keys: Some((5u64 << 32) | 6),
                action: NodeActionProto::Shutdown,
            }
        );
        // Truncated input: an error, no panic.
        assert!(heartbeat_response(&hb[..hb.len() - 3]).is_err());
        assert!(register_response(&reg[..reg.len() - 3]).is_err());
    }
}
