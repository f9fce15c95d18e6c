//! `hotpath-bench storm-apps`: the heartbeat storm with applications running — N simulated
//! NodeManagers whose every container was allocated by the RM to one of A simulated
//! ApplicationMasters, started on the node it was placed on, reported RUNNING by that node, and
//! at the churn rate completed by the node, delivered to its AM through `allocate` and replaced
//! by a new ask (issue 31, part 1).
//!
//! ```text
//! cargo build --release -p agent -p benches
//! target/release/hotpath-bench storm-apps --nodes 200 --apps 20 [--containers-per-node 50] \
//!     [--churn 100] [--duration 10] [--target ours|java|both] [--json]
//! ```
//!
//! Per side (ours: a fresh `hotpath rm` with applications on, the binary beside this one; java:
//! the peer's `yarn-rm --profile agents`, Hadoop 3.5, FIFO): the simulated cluster
//! (`storm_apps_sim.rs`) registers its nodes on a ramp, A applications are submitted with our
//! ApplicationClient, the RM launches their AM containers on the simulated nodes (its
//! AMLauncher → the nodes' ContainerManagementProtocol), the AMs register and ask until
//! `nodes × containers-per-node` task containers run (the fill), then churn starts; after a
//! warm-up the measured window runs `--duration` seconds: heartbeats answered per second, p99
//! from each heartbeat's scheduled send, the RM process's CPU (utime+stime from /proc) per
//! answered heartbeat, and the AMs' `allocate` calls (p99 at the AM; for ours the CPU of the
//! RM's scheduler-protocol thread `hp-rm-sched` per call), and this process's own CPU (the
//! generator shares the machine with the RM: `generator_cpu_*`, `node_loops_cpu_us_per_hb`
//! for the node loops alone). Then churn stops and the run waits
//! until every completion a node sent has reached its AM (or `--drain-timeout`): the ledger
//! counts sent, delivered, duplicated, and delivered-but-never-sent (lost containers).
//!
//! Then, for ours, in the same run: `loadgen heartbeats --target both` at the same node count
//! and containers per heartbeat (the RM with applications off, and the raw reference server),
//! for `rm_cpu_us_per_hb_apps_off` and `raw_cpu_us_per_req` (skip with `--no-baselines`).
//!
//! `--json` prints one line: the figures of ours at the top level (the keys the issue names),
//! and with `--target both` Java's under `"java"`; `--target java` prints Java's at the top.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, OnceLock, RwLock};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use hadoop_wire::pb::hadoop::yarn::{
    ApplicationSubmissionContextProto, ContainerLaunchContextProto, PriorityProto,
};
use hadoop_wire::token::secret::NmTokenSecretManager;
use serde_json::{json, Value};
use testkit::heartbeat::capability;
use yarn_client::application_client::ApplicationClient;
use yarn_client::rpc::Retry;

use crate::storm_apps_sim::{self as sim, Sim, SimConfig};

/// Flags of `hotpath-bench storm-apps`.
#[derive(clap::Args, Debug, Clone)]
pub struct StormAppsArgs {
    /// Simulated NodeManagers (one connection each).
    #[arg(long, default_value_t = 200)]
    pub nodes: usize,
    /// Simulated ApplicationMasters (applications).
    #[arg(long, default_value_t = 20)]
    pub apps: usize,
    /// Task containers per node (the AMs together keep `nodes × this` running).
    #[arg(long, default_value_t = 50)]
    pub containers_per_node: usize,
    /// Container completions per second, cluster-wide (each replaced by a new ask).
    #[arg(long, default_value_t = 100.0)]
    pub churn: f64,
    /// Measured seconds.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// `ours`, `java` or `both`.
    #[arg(long, default_value = "ours")]
    pub target: String,
    /// Each node's heartbeat interval (ms); the RM is told the same.
    #[arg(long, default_value_t = 1000)]
    pub interval_ms: u64,
    /// Each AM's allocate interval (ms).
    #[arg(long, default_value_t = 1000)]
    pub am_interval_ms: u64,
    /// Every container's memory (MB; 1 vcore); also the RM's minimum allocation.
    #[arg(long, default_value_t = 1024)]
    pub container_mb: i64,
    /// Event-loop threads driving the nodes (each owns its share of the nodes' connections,
    /// epoll and a timer heap; default 1 up to 5,000 nodes, else 2).
    #[arg(long)]
    pub node_threads: Option<usize>,
    /// Threads running the AMs (each makes one blocking call at a time; default one per 100
    /// applications, 4 to 16).
    #[arg(long)]
    pub am_threads: Option<usize>,
    /// The most containers an AM has outstanding at once (it asks for the rest as these
    /// arrive). `AMRMClient` asks for all it needs; the cap spreads each AM's fill over a few
    /// allocate calls, as a MapReduce AM's slow start does.
    #[arg(long, default_value_t = 100)]
    pub max_ask: usize,
    /// Node registrations per second.
    #[arg(long, default_value_t = 500.0)]
    pub ramp_per_s: f64,
    /// Longest wait for the fill (every AM registered, every task container running), s.
    #[arg(long, default_value_t = 120.0)]
    pub fill_timeout: f64,
    /// Longest wait after the window for every sent completion to be delivered, s.
    #[arg(long, default_value_t = 30.0)]
    pub drain_timeout: f64,
    /// Skip the applications-off and raw-server runs.
    #[arg(long)]
    pub no_baselines: bool,
    /// Extra `--set KEY=VALUE` for our RM (repeatable).
    #[arg(long = "rm-set", value_name = "KEY=VALUE")]
    pub rm_set: Vec<String>,
    /// The `hotpath` binary (default: beside this one).
    #[arg(long)]
    pub hotpath_bin: Option<PathBuf>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Ours,
    Java,
}

/// The RM under test: its addresses and the process whose CPU counts.
struct Rm {
    tracker: SocketAddr,
    client: SocketAddr,
    scheduler: SocketAddr,
    pid: u32,
    proc: RmProc,
}

enum RmProc {
    Ours(Child, #[allow(dead_code)] tempfile::TempDir),
    Java(Option<Box<peer_harness::Peer>>),
}

impl Drop for Rm {
    fn drop(&mut self) {
        match &mut self.proc {
            RmProc::Ours(c, _) => {
                let _ = c.kill();
                let _ = c.wait();
            }
            RmProc::Java(p) => {
                if let Some(p) = p.take() {
                    p.stop(Duration::from_secs(30));
                }
            }
        }
    }
}

fn resolve(s: &str) -> Result<SocketAddr> {
    s.to_socket_addrs()
        .with_context(|| format!("resolving {s}"))?
        .next()
        .with_context(|| format!("{s} resolves to nothing"))
}

fn start_rm(a: &StormAppsArgs, side: Side) -> Result<Rm> {
    let hb = a.interval_ms.to_string();
    match side {
        Side::Ours => {
            let dir = tempfile::tempdir()?;
            let bin = match &a.hotpath_bin {
                Some(b) => b.clone(),
                None => std::env::current_exe()?.with_file_name("hotpath"),
            };
            let mut cmd = Command::new(&bin);
            cmd.args(["rm", "--ready-line", "--metrics-port", "0"]);
            for (k, v) in [
                (
                    "yarn.resourcemanager.resource-tracker.address",
                    "127.0.0.1:0".to_string(),
                ),
                ("yarn.resourcemanager.address", "127.0.0.1:0".into()),
                (
                    "yarn.resourcemanager.scheduler.address",
                    "127.0.0.1:0".into(),
                ),
                // Else `hotpath rm` binds `yarn rmadmin`'s 8033, which a second RM on the
                // machine (a test in another lane) would also want.
                ("yarn.resourcemanager.admin.address", "127.0.0.1:0".into()),
                (
                    "yarn.resourcemanager.nodemanagers.heartbeat-interval-ms",
                    hb,
                ),
                (
                    "yarn.scheduler.minimum-allocation-mb",
                    a.container_mb.to_string(),
                ),
                (
                    "hotpath.rm.completion-log.dir",
                    dir.path().join("log").display().to_string(),
                ),
            ] {
                cmd.arg("--set").arg(format!("{k}={v}"));
            }
            for kv in &a.rm_set {
                cmd.args(["--set", kv]);
            }
            let mut child = cmd
                .env(
                    "HOTPATH_LOG",
                    std::env::var("HOTPATH_LOG").unwrap_or_else(|_| "warn".into()),
                )
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .with_context(|| format!("starting {} rm", bin.display()))?;
            let mut line = String::new();
            BufReader::new(child.stdout.take().context("rm stdout")?)
                .read_line(&mut line)
                .context("reading hotpath rm's READY line")?;
            let v: Value = serde_json::from_str(
                line.trim()
                    .strip_prefix("READY ")
                    .with_context(|| format!("hotpath rm printed no READY line: {line:?}"))?,
            )?;
            let f = |k: &str| -> Result<SocketAddr> {
                resolve(
                    v[k].as_str()
                        .with_context(|| format!("READY without {k}"))?,
                )
            };
            Ok(Rm {
                tracker: f("resource_tracker")?,
                client: f("client")?,
                scheduler: f("scheduler")?,
                pid: v["pid"].as_u64().context("READY without pid")? as u32,
                proc: RmProc::Ours(child, dir),
            })
        }
        Side::Java => {
            let sets = [
                format!("yarn.resourcemanager.nodemanagers.heartbeat-interval-ms={hb}"),
                format!("yarn.scheduler.minimum-allocation-mb={}", a.container_mb),
                // Nodes are simulated and never expire here; AMs live as long as the run.
                "yarn.resourcemanager.nm.liveness-monitor.expiry-interval-ms=600000".into(),
                "yarn.am.liveness-monitor.expiry-interval-ms=600000".into(),
            ];
            let mut argv: Vec<&str> = vec!["--profile", "agents", "--log-level", "ERROR"];
            for s in &sets {
                argv.extend(["--set", s.as_str()]);
            }
            let p = peer_harness::Peer::start(peer_harness::Mode::YarnRm, &argv)
                .map_err(|e| anyhow::anyhow!("starting the Java RM peer: {e}"))?;
            let r = p.ready();
            let f = |k: &str| -> Result<SocketAddr> {
                resolve(
                    r[k].as_str()
                        .with_context(|| format!("peer READY without {k}"))?,
                )
            };
            Ok(Rm {
                tracker: f("resource_tracker")?,
                client: f("rm_address")?,
                scheduler: f("scheduler_address")?,
                pid: p.pid(),
                proc: RmProc::Java(Some(Box::new(p))),
            })
        }
    }
}

/// utime + stime of `pid` (or of its threads whose name starts with `thread`), in clock ticks.
fn cpu_ticks(pid: u32, thread: Option<&str>) -> u64 {
    let stat = |path: String| -> Option<u64> {
        let text = std::fs::read_to_string(path).ok()?;
        let rest = text.rsplit_once(')')?.1;
        let f: Vec<&str> = rest.split_whitespace().collect();
        Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
    };
    match thread {
        None => stat(format!("/proc/{pid}/stat")).unwrap_or(0),
        Some(name) => std::fs::read_dir(format!("/proc/{pid}/task"))
            .map(|d| {
                d.flatten()
                    .filter(|e| {
                        std::fs::read_to_string(e.path().join("comm"))
                            .is_ok_and(|c| c.trim().starts_with(name))
                    })
                    .filter_map(|e| stat(e.path().join("stat").display().to_string()))
                    .sum()
            })
            .unwrap_or(0),
    }
}

/// /proc times are in USER_HZ, 100 on every architecture this runs on.
const USER_HZ: f64 = 100.0;

/// Polls `done` every 50 ms until it holds or `timeout` passes; whether it held.
fn wait_for(timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
    let t0 = Instant::now();
    loop {
        if done() {
            return true;
        }
        if t0.elapsed() > timeout {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn submit_apps(rm: &Rm, a: &StormAppsArgs) -> Result<()> {
    let client = ApplicationClient::new(rm.client, "storm-apps", &Retry::default());
    for i in 0..a.apps {
        let new = client
            .new_application()
            .map_err(|e| anyhow::anyhow!("getNewApplication: {e}"))?;
        let ctx = ApplicationSubmissionContextProto {
            application_id: Some(new.app.to_proto()),
            application_name: Some(format!("storm-apps-{i}")),
            queue: Some("default".into()),
            priority: Some(PriorityProto { priority: Some(0) }),
            am_container_spec: Some(ContainerLaunchContextProto {
                command: vec!["sleep".into(), "3600".into()],
                ..Default::default()
            }),
            resource: Some(capability(a.container_mb, 1)),
            application_type: Some("STORM_APPS".into()),
            max_app_attempts: Some(1),
            ..Default::default()
        };
        client
            .submit(ctx)
            .map_err(|e| anyhow::anyhow!("submitApplication: {e}"))?;
    }
    Ok(())
}

fn quantile(h: &std::sync::Mutex<hdrhistogram::Histogram<u64>>, q: f64) -> Option<u64> {
    let h = h.lock().unwrap_or_else(|p| p.into_inner());
    (!h.is_empty()).then(|| h.value_at_quantile(q))
}

/// One side's run; its figures.
fn run_side(a: &StormAppsArgs, side: Side) -> Result<Value> {
    let rm = start_rm(a, side)?;
    let cfg = SimConfig {
        tracker: rm.tracker,
        scheduler: rm.scheduler,
        nodes: a.nodes,
        containers_per_node: a.containers_per_node,
        apps: a.apps,
        churn_per_s: a.churn,
        interval_ms: a.interval_ms.max(1),
        am_interval_ms: a.am_interval_ms.max(1),
        container_mb: a.container_mb,
        node_threads: a.node_threads.unwrap_or(if a.nodes > 5000 { 2 } else { 1 }),
        am_threads: a.am_threads.unwrap_or(a.apps.div_ceil(100).clamp(4, 16)),
        max_ask: a.max_ask.max(1),
    };
    let nm_keys = Arc::new(RwLock::new(NmTokenSecretManager::default()));
    let slot: Arc<OnceLock<Arc<Sim>>> = Arc::default();
    let server = sim::start_cmp(slot.clone(), nm_keys.clone())?;
    let s = Arc::new(Sim::new(cfg, server.local_addr().port(), nm_keys));
    let _ = slot.set(s.clone());
    let t_start = Instant::now();
    let threads = sim::spawn(&s, s.now() + 100_000_000, a.ramp_per_s.max(1.0))?;
    let result = measure(a, side, &rm, &s, t_start);
    s.stop.store(true, Relaxed);
    for t in threads {
        let _ = t.join();
    }
    server.shutdown();
    drop(rm);
    result
}

fn measure(a: &StormAppsArgs, side: Side, rm: &Rm, s: &Arc<Sim>, t0: Instant) -> Result<Value> {
    let n = a.nodes as u64;
    let ramp = Duration::from_secs_f64(a.nodes as f64 / a.ramp_per_s.max(1.0) + 30.0);
    if !wait_for(ramp, || s.c.registered.load(Relaxed) >= n) {
        bail!(
            "{} of {n} nodes registered; first errors: {:?}",
            s.c.registered.load(Relaxed),
            s.first_errors()
        );
    }
    let registered_s = t0.elapsed().as_secs_f64();
    submit_apps(rm, a)?;
    let want = (a.nodes * a.containers_per_node) as u64;
    let filled = wait_for(Duration::from_secs_f64(a.fill_timeout), || {
        s.c.ams_registered.load(Relaxed) >= a.apps as u64 && s.live_tasks.load(Relaxed) >= want
    });
    if !filled {
        bail!(
            "fill incomplete after {} s: {} of {} AMs registered, {} of {want} task containers \
             running; first errors: {:?}",
            a.fill_timeout,
            s.c.ams_registered.load(Relaxed),
            a.apps,
            s.live_tasks.load(Relaxed),
            s.first_errors()
        );
    }
    let fill_s = t0.elapsed().as_secs_f64() - registered_s;
    // Churn, then two intervals of warm-up (every node has beaten with churn on, every AM
    // allocated), then the window.
    s.churn.store(true, Relaxed);
    let warm = 2 * a.interval_ms.max(a.am_interval_ms);
    std::thread::sleep(Duration::from_millis(warm));
    let sent0 = s.c.completions_sent.load(Relaxed);
    let m0 = s.now();
    s.m0.store(m0, Relaxed);
    s.m1.store(m0 + (a.duration.max(0.1) * 1e9) as u64, Relaxed);
    let me = std::process::id();
    let (cpu0, sched0, gen0, loops0) = (
        cpu_ticks(rm.pid, None),
        cpu_ticks(rm.pid, Some("hp-rm-sched")),
        cpu_ticks(me, None),
        cpu_ticks(me, Some("sa-nodes")),
    );
    sim::sleep_until(s.clock0, s.m1.load(Relaxed));
    let (cpu1, sched1, gen1, loops1) = (
        cpu_ticks(rm.pid, None),
        cpu_ticks(rm.pid, Some("hp-rm-sched")),
        cpu_ticks(me, None),
        cpu_ticks(me, Some("sa-nodes")),
    );
    let secs = (s.m1.load(Relaxed) - m0) as f64 / 1e9;
    let sent_in_window = s.c.completions_sent.load(Relaxed) - sent0;
    let (live_tasks, live_ams) = s.running();
    // Drain: no new completions; every one sent must reach its AM.
    s.churn.store(false, Relaxed);
    let drained = wait_for(Duration::from_secs_f64(a.drain_timeout), || {
        let pending: usize = s.nodes.iter().map(|n| n.pending_completions()).sum();
        pending == 0 && s.undelivered() == 0
    });
    // After the drain the AMs fill the room the last completions left: the configured load.
    let refilled = wait_for(Duration::from_secs_f64(a.drain_timeout), || {
        s.running().0 >= want
    });
    let (tasks_after, ams_after) = s.running();
    let hbs = s.c.heartbeats_window.load(Relaxed);
    let allocs = s.c.allocates_window.load(Relaxed);
    let cpu_us = (cpu1 - cpu0) as f64 * 1e6 / USER_HZ;
    let sched_us = (sched1 - sched0) as f64 * 1e6 / USER_HZ;
    let gen_us = gen1.saturating_sub(gen0) as f64 * 1e6 / USER_HZ;
    let loops_us = loops1.saturating_sub(loops0) as f64 * 1e6 / USER_HZ;
    let c = &s.c;
    let mut v = json!({
        "target": if side == Side::Ours { "ours" } else { "java" },
        "nodes": a.nodes,
        "connections": a.nodes,
        "apps": c.ams_registered.load(Relaxed),
        "containers_per_node": a.containers_per_node,
        "live_containers": live_tasks + live_ams,
        "live_task_containers": live_tasks,
        "live_am_containers": live_ams,
        "live_task_containers_after_drain": tasks_after,
        "live_am_containers_after_drain": ams_after,
        "refilled": refilled,
        "churn_per_s": sent_in_window as f64 / secs,
        "churn_target_per_s": a.churn,
        "seconds": secs,
        "register_seconds": registered_s,
        "fill_seconds": fill_s,
        "hb_per_s": hbs as f64 / secs,
        "hb_target_per_s": a.nodes as f64 * 1000.0 / a.interval_ms.max(1) as f64,
        "p50_us": quantile(&s.hb_sched, 0.5),
        "p99_us": quantile(&s.hb_sched, 0.99),
        "p999_us": quantile(&s.hb_sched, 0.999),
        "max_us": quantile(&s.hb_sched, 1.0),
        "rm_cpu_us_per_hb": (hbs > 0).then(|| cpu_us / hbs as f64),
        "rm_cpu_us_per_hb_excl_allocate": match side {
            Side::Ours if hbs > 0 => json!((cpu_us - sched_us).max(0.0) / hbs as f64),
            _ => Value::Null,
        },
        "rm_cpu_cores": cpu_us / 1e6 / secs,
        "generator_cpu_us_per_hb": (hbs > 0).then(|| gen_us / hbs as f64),
        "generator_cpu_cores": gen_us / 1e6 / secs,
        "node_loops_cpu_us_per_hb": (hbs > 0).then(|| loops_us / hbs as f64),
        "allocate_per_s": allocs as f64 / secs,
        "allocate_cpu_us_per_call": match side {
            Side::Ours if allocs > 0 => json!(sched_us / allocs as f64),
            _ => Value::Null,
        },
        "allocate_cpu_note": match side {
            Side::Ours => "CPU of the RM's ApplicationMasterProtocol thread (hp-rm-sched) per allocate call",
            Side::Java => "not separable: the Java RM's IPC handler threads serve every protocol",
        },
        "allocate_p50_us": quantile(&s.alloc_rpc, 0.5),
        "allocate_p99_us": quantile(&s.alloc_rpc, 0.99),
    });
    let more = json!({
        "completions_sent": c.completions_sent.load(Relaxed),
        "completions_delivered": c.completions_delivered.load(Relaxed),
        "completions_duplicated": c.completions_duplicated.load(Relaxed),
        "completions_undelivered": s.undelivered(),
        "completions_unsent": c.completions_unsent.load(Relaxed),
        "completions_aborted": c.completions_aborted.load(Relaxed),
        "drained": drained,
        "heartbeats": c.heartbeats.load(Relaxed),
        "hb_errors": c.hb_errors.load(Relaxed),
        "late_beats": c.late_beats.load(Relaxed),
        "deferred_beats": c.deferred_beats.load(Relaxed),
        "skipped_beats": c.skipped_beats.load(Relaxed),
        "connect_failures": c.connect_failures.load(Relaxed),
        "disconnects": c.disconnects.load(Relaxed),
        "resyncs": c.resyncs.load(Relaxed),
        "shutdowns": c.shutdowns.load(Relaxed),
        "containers_to_cleanup": c.containers_to_cleanup.load(Relaxed),
        "apps_to_cleanup": c.apps_to_cleanup.load(Relaxed),
        "am_containers_started": c.am_starts.load(Relaxed),
        "cmp_starts": c.cmp_starts.load(Relaxed),
        "cmp_start_failures": c.cmp_start_failures.load(Relaxed),
        "duplicate_starts": c.duplicate_starts.load(Relaxed),
        "allocates": c.allocates.load(Relaxed),
        "allocated": c.allocated.load(Relaxed),
        "released": c.released.load(Relaxed),
        "releases_acknowledged": c.releases_acknowledged.load(Relaxed),
        "start_call_errors": c.start_call_errors.load(Relaxed),
        "am_errors": c.am_errors.load(Relaxed),
        "node_threads": s.cfg.node_threads,
        "am_threads": s.cfg.am_threads,
        "first_errors": s.first_errors(),
    });
    if let (Some(v), Value::Object(m)) = (v.as_object_mut(), more) {
        v.extend(m);
    }
    Ok(v)
}

/// The applications-off RM and the raw server at the same node count, in one
/// `loadgen heartbeats --target both` child (storm-sweep's machinery).
fn baselines(a: &StormAppsArgs, containers: usize) -> Result<Value> {
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.args(["loadgen", "heartbeats", "--json", "--target", "both"])
        .args(["--nodes", &a.nodes.to_string()])
        .args(["--containers", &containers.to_string()])
        .args(["--interval-ms", &a.interval_ms.to_string()])
        .args(["--duration", &a.duration.to_string()]);
    if let Some(b) = &a.hotpath_bin {
        cmd.arg("--hotpath-bin").arg(b);
    }
    let out = cmd
        .env(
            "HOTPATH_LOG",
            std::env::var("HOTPATH_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .stderr(Stdio::inherit())
        .output()
        .context("running loadgen heartbeats --target both")?;
    if !out.status.success() {
        bail!("loadgen heartbeats --target both failed ({})", out.status);
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .with_context(|| format!("loadgen printed no JSON: {text}"))?;
    Ok(serde_json::from_str(line)?)
}

pub fn run(a: StormAppsArgs) -> Result<()> {
    if a.nodes == 0 || a.apps == 0 {
        bail!("--nodes and --apps must be at least 1");
    }
    if a.nodes > 254 * 256 * 254 {
        bail!("at most {} simulated nodes", 254 * 256 * 254);
    }
    // 10,000 node connections and the AMs' in one process.
    crate::storm::raise_nofile();
    let (ours, java) = match a.target.as_str() {
        "ours" => (true, false),
        "java" => (false, true),
        "both" => (true, true),
        t => bail!("--target: unknown {t:?} (ours, java, both)"),
    };
    let mut out = if ours {
        let mut v = run_side(&a, Side::Ours)?;
        if a.no_baselines {
            v["rm_cpu_us_per_hb_apps_off"] = Value::Null;
            v["raw_cpu_us_per_req"] = Value::Null;
        } else {
            let b = baselines(&a, a.containers_per_node)?;
            v["rm_cpu_us_per_hb_apps_off"] = b["rm"]["rm_cpu_us_per_hb"].clone();
            v["raw_cpu_us_per_req"] = b["raw"]["raw_cpu_us_per_req"].clone();
            v["apps_off_p99_us"] = b["rm"]["sched_p99_us"].clone();
            v["apps_off_hb_per_s"] = b["rm"]["hb_per_s"].clone();
            let ratio = |x: &Value, base: &Value| match (x.as_f64(), base.as_f64()) {
                (Some(x), Some(y)) if y > 0.0 => json!(x / y),
                _ => Value::Null,
            };
            let (all, excl, off, raw) = (
                v["rm_cpu_us_per_hb"].clone(),
                v["rm_cpu_us_per_hb_excl_allocate"].clone(),
                v["rm_cpu_us_per_hb_apps_off"].clone(),
                v["raw_cpu_us_per_req"].clone(),
            );
            v["cpu_ratio_apps_off"] = ratio(&all, &off);
            v["cpu_ratio_raw"] = ratio(&all, &raw);
            v["cpu_ratio_apps_off_excl_allocate"] = ratio(&excl, &off);
        }
        v
    } else {
        Value::Null
    };
    let allocs_note = "not measured in this binary: the RM runs as its own process here; \
rm-core's counting-allocator proof of a heartbeat with live applications is a test of its own";
    if java {
        let j = run_side(&a, Side::Java)?;
        if ours {
            out["java"] = j;
        } else {
            out = j;
        }
    }
    out["allocs_per_unchanged_hb"] = Value::Null;
    out["allocs_per_unchanged_hb_reason"] = json!(allocs_note);
    if a.json {
        println!("{out}");
    } else {
        println!("{}", serde_json::to_string_pretty(&out)?);
    }
    Ok(())
}
