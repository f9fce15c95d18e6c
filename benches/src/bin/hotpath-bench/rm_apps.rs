//! `hotpath-bench rm-apps`: `hotpath rm` running applications beside the Java RM (issue 13).
//!
//! ```text
//! cargo build --release -p agent -p benches
//! target/release/hotpath-bench rm-apps [--rounds 3] [--only ours|java] [--json] \
//!     [--agents 4] [--alloc-seconds 5] [--asks 50] [--submits 10] [--containers 1000] \
//!     [--start-threads 8] [--am-heartbeat-ms 100] [--nm-heartbeat-ms 1000]
//! ```
//!
//! Each side gets a fresh RM — ours (`hotpath rm`, the binary beside this one) or Java's (the
//! peer's `yarn-rm --profile agents`: MiniYARNCluster, FIFO scheduler, no NodeManagers of its
//! own) — and the same `--agents` hotpath agents (127.0.0.81…, 4 GB and 32 vcores each, so
//! memory binds on both schedulers) as its nodes, started `interval / agents` apart so that
//! their heartbeats are spread over the interval. Both RMs get the same NodeManager heartbeat
//! interval and a 128 MB minimum allocation. Applications are submitted with our
//! ApplicationClient to either RM; their AM is this binary (`rm-apps-am`, see `rm_apps_am.rs`),
//! launched by the RM on an agent with its AMRMToken, exactly alike on both sides.
//!
//! 1. **allocate CPU per call**: the AM blacklists every node and asks for `--asks` containers,
//!    which both RMs keep outstanding; after a warm-up and an idle window (no AM calls) of
//!    `--alloc-seconds` each it calls allocate back to back for `--alloc-seconds`. Why a
//!    blacklist: an ask larger than any node is refused by the Java RM once its nodes have
//!    registered (its maximum allowed allocation becomes the largest node's after
//!    `…scheduling-wait-ms`), and FIFO's handling of `relaxLocality=false` differs between the
//!    two; both honour the AM's blacklist on every node update, and so keep the asks pending. RM CPU per call = `utime + stime` of the RM process over
//!    the busy window / calls, gross and net of the idle rate; AM-side latency p50/p99.
//! 2. **submit → AM running**: `--submits` applications one after another, each submitted at a
//!    random phase of the node heartbeat (a submit right after the previous application ended
//!    would be phase-locked to the heartbeat that reported its end); the time from
//!    `submitApplication` *returning* to the AM process running (its first wall-clock read in
//!    `main`) and to it being registered; p50/p99. (From the call being *sent* is in the JSON.)
//! 3. **containers**: one application of `--containers` containers of `true`, started from
//!    `--start-threads` threads as allocated: containers allocated per second (the last
//!    allocated / time since the first allocate) and launched per second (exited 0, the last
//!    completion as the AM saw it in allocate / the same origin).
//!
//! With `--rounds N` the sides alternate (ours, java, java, ours, …); per figure the table shows
//! the median and the spread (min–max) over rounds. Java's RM is the whole peer JVM (its idle
//! YarnClient included). A bench that cannot measure fails with the cause (and the AM's stderr).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{anyhow, bail, Context, Result};
use hadoop_wire::pb::hadoop::yarn::{
    ApplicationSubmissionContextProto, PriorityProto, ResourceProto,
};
use hadoop_wire::yarn::ids::AppId;
use peer_harness::{Mode, Peer};
use serde_json::{json, Value};
use yarn_client::application_client::{AppReport, ApplicationClient, FinalStatus};
use yarn_client::distributed_shell::am_launch_context;
use yarn_client::rpc::Retry;

/// Flags of `hotpath-bench rm-apps`.
#[derive(clap::Args, Debug, Clone)]
pub struct RmAppsArgs {
    /// Rounds (each runs both sides, alternating which goes first).
    #[arg(long, default_value_t = 1)]
    pub rounds: usize,
    /// Only one side: `ours` or `java`.
    #[arg(long)]
    pub only: Option<String>,
    /// hotpath agents (the RM's nodes).
    #[arg(long, default_value_t = 4)]
    pub agents: usize,
    /// allocate: length of the idle and of the busy window (s; at most 20, within Java's 30 s
    /// AM expiry of the agents profile).
    #[arg(long, default_value_t = 5.0)]
    pub alloc_seconds: f64,
    /// allocate: containers kept outstanding.
    #[arg(long, default_value_t = 50)]
    pub asks: i32,
    /// allocate: send the whole ask with every call (default: once, as AMRMClient does).
    #[arg(long)]
    pub resend_asks: bool,
    /// submit → AM running: applications (one after another).
    #[arg(long, default_value_t = 10)]
    pub submits: usize,
    /// containers: containers of `true` in the one application (0: skip).
    #[arg(long, default_value_t = 1000)]
    pub containers: u32,
    /// containers: the AM's start threads.
    #[arg(long, default_value_t = 8)]
    pub start_threads: usize,
    /// containers: the AM's allocate interval (ms).
    #[arg(long, default_value_t = 100)]
    pub am_heartbeat_ms: u64,
    /// `yarn.resourcemanager.nodemanagers.heartbeat-interval-ms` of both RMs (Hadoop's default
    /// 1000).
    #[arg(long, default_value_t = 1000)]
    pub nm_heartbeat_ms: u64,
    /// Extra `--set KEY=VALUE` for our RM (repeatable), e.g.
    /// `hotpath.rm.scheduler.io-backend=uring` or
    /// `hotpath.rm.scheduler.immediate-placement=false`.
    #[arg(long = "rm-set", value_name = "KEY=VALUE")]
    pub rm_set: Vec<String>,
    /// The `hotpath` binary (default: beside this one).
    #[arg(long)]
    pub hotpath: Option<PathBuf>,
    /// Print the figures as one JSON object.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Ours,
    Java,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::Ours => "ours",
            Side::Java => "java",
        }
    }
}

/// Nanoseconds since the epoch.
pub fn unix_ns(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// CPU time (ms) of a process: `utime + stime` from `/proc/<pid>/stat`.
pub fn proc_cpu_ms(pid: u32) -> Result<f64> {
    let (user, sys) = proc_cpu_split_ms(pid)?;
    Ok(user + sys)
}

/// User and system CPU time (ms) of a process: `utime`, `stime` from `/proc/<pid>/stat`.
pub fn proc_cpu_split_ms(pid: u32) -> Result<(f64, f64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat"))?;
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .ok_or_else(|| anyhow!("odd /proc/{pid}/stat"))?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    if f.len() < 13 {
        bail!("short /proc/{pid}/stat");
    }
    // After the command: state(0) ppid(1) ... utime(11) stime(12).
    let (user, sys): (f64, f64) = (f[11].parse()?, f[12].parse()?);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Ok((user * 1000.0 / hz, sys * 1000.0 / hz))
}

/// A child that printed `READY {json}`; SIGTERM on drop, then SIGKILL.
struct ReadyChild {
    child: Child,
    ready: Value,
    dir: tempfile::TempDir,
}

impl ReadyChild {
    fn spawn(mut cmd: Command, dir: tempfile::TempDir, what: &str) -> Result<ReadyChild> {
        let log = std::fs::File::create(dir.path().join("stderr.log"))?;
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .spawn()
            .with_context(|| format!("starting {what}"))?;
        let mut line = String::new();
        BufReader::new(child.stdout.take().context("no stdout")?).read_line(&mut line)?;
        let Some(json) = line.trim().strip_prefix("READY ") else {
            let _ = child.kill();
            let _ = child.wait();
            let err = std::fs::read_to_string(dir.path().join("stderr.log")).unwrap_or_default();
            bail!("{what} did not start: {line:?}\n{}", tail(&err, 20));
        };
        let ready = serde_json::from_str(json)?;
        Ok(ReadyChild { child, ready, dir })
    }

    fn field(&self, k: &str) -> Result<String> {
        self.ready[k]
            .as_str()
            .map(String::from)
            .ok_or_else(|| anyhow!("no {k} in READY {}", self.ready))
    }
}

impl Drop for ReadyChild {
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

fn sets(kvs: &[(&str, String)]) -> Vec<String> {
    kvs.iter()
        .flat_map(|(k, v)| ["--set".to_string(), format!("{k}={v}")])
        .collect()
}

/// Either RM: where to submit, where AMs call, and the process whose CPU counts.
enum Rm {
    Ours(ReadyChild),
    Java(Box<Peer>),
}

impl Rm {
    fn start(side: Side, hotpath: &Path, args: &RmAppsArgs) -> Result<Rm> {
        let hb = args.nm_heartbeat_ms.to_string();
        match side {
            Side::Ours => {
                let dir = tempfile::tempdir()?;
                let mut cmd = Command::new(hotpath);
                cmd.args(["rm", "--ready-line", "--metrics-port", "0"]);
                cmd.args(sets(&[
                    (
                        "yarn.resourcemanager.resource-tracker.address",
                        "127.0.0.1:0".into(),
                    ),
                    ("yarn.resourcemanager.address", "127.0.0.1:0".into()),
                    (
                        "yarn.resourcemanager.scheduler.address",
                        "127.0.0.1:0".into(),
                    ),
                    ("yarn.resourcemanager.admin.address", "127.0.0.1:0".into()),
                    (
                        "yarn.resourcemanager.nodemanagers.heartbeat-interval-ms",
                        hb,
                    ),
                    // As the Java side's agents profile.
                    ("yarn.scheduler.minimum-allocation-mb", "128".into()),
                    (
                        "hotpath.rm.completion-log.dir",
                        dir.path().join("log").display().to_string(),
                    ),
                ]));
                for kv in &args.rm_set {
                    cmd.args(["--set", kv]);
                }
                Ok(Rm::Ours(ReadyChild::spawn(cmd, dir, "hotpath rm")?))
            }
            Side::Java => {
                let set = format!("yarn.resourcemanager.nodemanagers.heartbeat-interval-ms={hb}");
                let p = Peer::start(Mode::YarnRm, &["--profile", "agents", "--set", &set])
                    .map_err(|e| anyhow!("yarn-rm: {e}"))?;
                Ok(Rm::Java(Box::new(p)))
            }
        }
    }

    fn field(&self, ours: &str, java: &str) -> Result<String> {
        match self {
            Rm::Ours(c) => c.field(ours),
            Rm::Java(p) => p.ready()[java]
                .as_str()
                .map(String::from)
                .ok_or_else(|| anyhow!("no {java} in the peer's READY")),
        }
    }

    fn resource_tracker(&self) -> Result<String> {
        self.field("resource_tracker", "resource_tracker")
    }

    fn client(&self) -> Result<String> {
        self.field("client", "rm_address")
    }

    fn scheduler(&self) -> Result<String> {
        self.field("scheduler", "scheduler_address")
    }

    fn pid(&self) -> u32 {
        match self {
            Rm::Ours(c) => c.child.id(),
            Rm::Java(p) => p.pid(),
        }
    }

    fn log_tail(&self) -> String {
        match self {
            Rm::Ours(c) => tail(
                &std::fs::read_to_string(c.dir.path().join("stderr.log")).unwrap_or_default(),
                30,
            ),
            Rm::Java(p) => p.log_tail(30),
        }
    }
}

const NODE_MB: i64 = 4096;
const NODE_VCORES: i64 = 32;

fn start_agent(bin: &Path, rt: &str, ip: &str) -> Result<ReadyChild> {
    let dir = tempfile::tempdir()?;
    let d = dir.path();
    let mut cmd = Command::new(bin);
    // No core plan: on a small machine it would leave the containers one CPU.
    cmd.args(["agent", "--ready-line", "--no-pin"]);
    cmd.env("HOTPATH_LOG", "warn");
    cmd.args(sets(&[
        ("yarn.resourcemanager.resource-tracker.address", rt.into()),
        ("yarn.nodemanager.address", format!("{ip}:0")),
        ("yarn.nodemanager.webapp.address", format!("{ip}:0")),
        ("hotpath.agent.ipc.address", format!("{ip}:0")),
        (
            "yarn.nodemanager.local-dirs",
            d.join("local").display().to_string(),
        ),
        (
            "yarn.nodemanager.log-dirs",
            d.join("logs").display().to_string(),
        ),
        ("yarn.nodemanager.resource.memory-mb", NODE_MB.to_string()),
        (
            "yarn.nodemanager.resource.cpu-vcores",
            NODE_VCORES.to_string(),
        ),
        (
            "hotpath.agent.control-socket",
            d.join("agent.sock").display().to_string(),
        ),
        (
            "yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage",
            "100".into(),
        ),
    ]));
    ReadyChild::spawn(cmd, dir, &format!("hotpath agent on {ip}"))
}

/// The AM's stderr for `app`, from the agents' log dirs (for an error message).
fn am_stderr(agents: &[ReadyChild], app: AppId) -> String {
    fn walk(dir: &Path, app: &str, out: &mut String) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, app, out);
            } else if p.file_name().is_some_and(|n| n == "AppMaster.stderr")
                && p.display().to_string().contains(app)
            {
                let s = std::fs::read_to_string(&p).unwrap_or_default();
                out.push_str(&format!("{}:\n{}\n", p.display(), tail(&s, 20)));
            }
        }
    }
    let id = app.to_string();
    let suffix = id.trim_start_matches("application_");
    let mut out = String::new();
    for a in agents {
        walk(&a.dir.path().join("logs"), suffix, &mut out);
    }
    if out.is_empty() {
        "(no AppMaster.stderr found)".into()
    } else {
        out
    }
}

struct Cluster {
    side: Side,
    rm: Rm,
    agents: Vec<ReadyChild>,
    nodes: Vec<String>,
    client: ApplicationClient,
    scheduler: String,
    bench: PathBuf,
    dir: tempfile::TempDir,
}

impl Cluster {
    fn start(side: Side, hotpath: &Path, args: &RmAppsArgs) -> Result<Cluster> {
        let rm = Rm::start(side, hotpath, args)?;
        let rt = rm.resource_tracker()?;
        let mut agents = Vec::new();
        for i in 0..args.agents {
            if i > 0 {
                // Spread the agents' heartbeat phases evenly over the interval, as on a real
                // cluster: agents started together heartbeat together, and every wait for
                // "the next heartbeat of any node" would be the wait for one node's.
                std::thread::sleep(Duration::from_millis(
                    args.nm_heartbeat_ms / args.agents as u64,
                ));
            }
            agents.push(start_agent(hotpath, &rt, &format!("127.0.0.{}", 81 + i))?);
        }
        let mut nodes: Vec<String> = agents
            .iter()
            .map(|a| a.field("node_id"))
            .collect::<Result<_>>()?;
        nodes.sort();
        let addr = yarn_client::rpc::resolve("the RM's client address", &rm.client()?)?;
        let client = ApplicationClient::new(addr, "hotpath-bench", &Retry::default());
        let t0 = Instant::now();
        loop {
            let mut running: Vec<String> = client
                .cluster_nodes(&[])?
                .iter()
                .filter_map(|n| {
                    let id = n.node_id.as_ref()?;
                    Some(format!("{}:{}", id.host.as_deref()?, id.port?))
                })
                .collect();
            running.sort();
            if running == nodes {
                break;
            }
            if t0.elapsed() > Duration::from_secs(60) {
                bail!(
                    "{} RM: agents {nodes:?} not all RUNNING after 60 s (RM lists {running:?})\n{}",
                    side.name(),
                    rm.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let scheduler = rm.scheduler()?;
        let bench = std::env::current_exe()?;
        Ok(Cluster {
            side,
            rm,
            agents,
            nodes,
            client,
            scheduler,
            bench,
            dir: tempfile::tempdir()?,
        })
    }

    /// Submits one bench AM application; the figures file, the wall clock just before the
    /// submit call and just after it returned.
    fn submit(&self, name: &str, am_args: &[String]) -> Result<(AppId, PathBuf, u64, u64)> {
        let new = self.client.new_application()?;
        let out = self.dir.path().join(format!("{name}-{}.json", new.app));
        let mut args: Vec<String> = vec![
            "rm-apps-am".into(),
            "--scheduler".into(),
            self.scheduler.clone(),
            "--out".into(),
            out.display().to_string(),
        ];
        args.extend_from_slice(am_args);
        let program = self
            .bench
            .to_str()
            .context("the bench binary's path is not UTF-8")?;
        let env = vec![("HOTPATH_LOG".to_string(), "warn".to_string())];
        let clc = am_launch_context(program, &args, &env, &[])?;
        let ctx = ApplicationSubmissionContextProto {
            application_id: Some(new.app.to_proto()),
            application_name: Some(format!("rm-apps-{name}")),
            queue: Some("default".into()),
            priority: Some(PriorityProto { priority: Some(0) }),
            am_container_spec: Some(clc),
            resource: Some(ResourceProto {
                memory: Some(256),
                virtual_cores: Some(1),
                resource_value_map: vec![],
            }),
            application_type: Some("HOTPATH_BENCH".into()),
            max_app_attempts: Some(1),
            ..Default::default()
        };
        let sent = unix_ns(SystemTime::now());
        self.client.submit(ctx)?;
        let returned = unix_ns(SystemTime::now());
        Ok((new.app, out, sent, returned))
    }

    /// Waits for `app` to end; its figures, or the cause it failed.
    fn finish(&self, app: AppId, out: &Path, timeout: Duration) -> Result<Value> {
        let t0 = Instant::now();
        let report: AppReport = loop {
            let r = self.client.report(app)?;
            if r.state.is_final() {
                break r;
            }
            if t0.elapsed() > timeout {
                let _ = self.client.kill(app, "hotpath-bench: timeout");
                bail!(
                    "{} RM: {app} not done within {timeout:?} (state {})\nAM: {}\nRM: {}",
                    self.side.name(),
                    r.state.as_str(),
                    am_stderr(&self.agents, app),
                    self.rm.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let figures: Option<Value> = std::fs::read_to_string(out)
            .ok()
            .and_then(|s| serde_json::from_str(&s).ok());
        if let Some(e) = figures.as_ref().and_then(|f| f["error"].as_str()) {
            bail!("{} RM: the AM of {app} failed: {e}", self.side.name());
        }
        if report.final_status != FinalStatus::Succeeded {
            bail!(
                "{} RM: {app} ended {} / {}: {}\nAM: {}",
                self.side.name(),
                report.state.as_str(),
                report.final_status.as_str(),
                report.diagnostics.trim(),
                am_stderr(&self.agents, app)
            );
        }
        figures.ok_or_else(|| anyhow!("{app} succeeded but its AM wrote no figures to {out:?}"))
    }
}

/// A pseudo-random delay in `[0, interval_ms)` (SipHash of the clock and `salt`).
fn jitter(interval_ms: u64, salt: u64) -> Duration {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(unix_ns(SystemTime::now()) ^ salt);
    Duration::from_millis(h.finish() % interval_ms.max(1))
}

fn percentile(v: &[f64], q: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    if s.is_empty() {
        return f64::NAN;
    }
    s[((s.len() - 1) as f64 * q).round() as usize]
}

fn run_side(side: Side, hotpath: &Path, args: &RmAppsArgs) -> Result<Value> {
    let c = Cluster::start(side, hotpath, args)?;
    let mut r = serde_json::Map::new();
    r.insert("side".into(), json!(side.name()));

    // 1. allocate with outstanding asks.
    if args.alloc_seconds > 0.0 {
        let mut am = vec![
            "--mode".to_string(),
            "alloc".into(),
            "--rm-pid".into(),
            c.rm.pid().to_string(),
            "--seconds".into(),
            args.alloc_seconds.to_string(),
            "--asks".into(),
            args.asks.to_string(),
            "--blacklist".into(),
            c.nodes.join(","),
        ];
        if args.resend_asks {
            am.push("--resend-asks".into());
        }
        let (app, out, _, _) = c.submit("alloc", &am)?;
        let f = c.finish(
            app,
            &out,
            Duration::from_secs_f64(3.0 * args.alloc_seconds + 120.0),
        )?;
        r.insert("alloc".into(), f);
    }

    // 2. submit → AM running.
    if args.submits > 0 {
        let mut to_running = Vec::new();
        let mut to_running_from_sent = Vec::new();
        let mut to_registered = Vec::new();
        let mut submit_rpc = Vec::new();
        for i in 0..args.submits {
            // The previous application ended on a node heartbeat (its AM container's
            // completion), so a submit right away would always land just after one and wait
            // the whole interval for the next: start at a random phase instead.
            std::thread::sleep(jitter(args.nm_heartbeat_ms, i as u64));
            let (app, out, sent, returned) =
                c.submit("submit", &["--mode".into(), "noop".into()])?;
            let f = c.finish(app, &out, Duration::from_secs(120))?;
            let started = f["started_ns"].as_u64().context("no started_ns")?;
            let registered = f["registered_ns"].as_u64().context("no registered_ns")?;
            let ms = |a: u64, b: u64| (a as f64 - b as f64) / 1e6;
            to_running.push(ms(started, returned));
            to_running_from_sent.push(ms(started, sent));
            to_registered.push(ms(registered, returned));
            submit_rpc.push(ms(returned, sent));
        }
        let stats = |v: &[f64]| json!({"min": percentile(v, 0.0), "p50": percentile(v, 0.5), "p99": percentile(v, 0.99), "max": percentile(v, 1.0)});
        r.insert(
            "submit".into(),
            json!({
                "apps": args.submits,
                "to_am_running_ms": stats(&to_running),
                "sent_to_am_running_ms": stats(&to_running_from_sent),
                "to_am_registered_ms": stats(&to_registered),
                "submit_rpc_ms": stats(&submit_rpc),
                "samples_to_am_running_ms": to_running,
            }),
        );
    }

    // 3. containers of `true`.
    if args.containers > 0 {
        let am = vec![
            "--mode".to_string(),
            "containers".into(),
            "--containers".into(),
            args.containers.to_string(),
            "--start-threads".into(),
            args.start_threads.to_string(),
            "--heartbeat-ms".into(),
            args.am_heartbeat_ms.to_string(),
        ];
        let cpu0 = proc_cpu_ms(c.rm.pid())?;
        let (app, out, _, _) = c.submit("containers", &am)?;
        let mut f = c.finish(app, &out, Duration::from_secs(900))?;
        let cpu = proc_cpu_ms(c.rm.pid())? - cpu0;
        f["rm_cpu_ms_per_container"] = json!(cpu / args.containers as f64);
        r.insert("containers".into(), f);
    }
    Ok(Value::Object(r))
}

/// The figures of the table: (label, JSON pointer into a run, higher is better).
const FIGURES: &[(&str, &str, bool)] = &[
    (
        "allocate RM CPU/call net of idle (µs)",
        "/alloc/rm_cpu_us_per_call_net",
        false,
    ),
    (
        "allocate RM CPU/call gross (µs)",
        "/alloc/rm_cpu_us_per_call_gross",
        false,
    ),
    (
        "  of which kernel (stime, µs)",
        "/alloc/rm_sys_us_per_call_gross",
        false,
    ),
    (
        "RM idle CPU (ms per s)",
        "/alloc/rm_idle_cpu_ms_per_s",
        false,
    ),
    ("allocate calls/s (1 AM)", "/alloc/calls_per_s", true),
    (
        "allocate p50 at the AM (µs)",
        "/alloc/latency_us_p50",
        false,
    ),
    (
        "allocate p99 at the AM (µs)",
        "/alloc/latency_us_p99",
        false,
    ),
    (
        "submit→AM running p50 (ms)",
        "/submit/to_am_running_ms/p50",
        false,
    ),
    (
        "submit→AM running p99 (ms)",
        "/submit/to_am_running_ms/p99",
        false,
    ),
    (
        "submit→AM registered p50 (ms)",
        "/submit/to_am_registered_ms/p50",
        false,
    ),
    (
        "containers allocated/s",
        "/containers/allocated_per_s",
        true,
    ),
    (
        "containers launched (exit 0)/s",
        "/containers/launched_per_s",
        true,
    ),
    (
        "RM CPU per container (ms)",
        "/containers/rm_cpu_ms_per_container",
        false,
    ),
];

/// The median (the mean of the middle two for an even count: two rounds give their mean).
fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

pub fn run(args: RmAppsArgs) -> Result<()> {
    if !(0.0..=20.0).contains(&args.alloc_seconds) {
        bail!("--alloc-seconds must be within 0..=20 (Java's AM expiry is 30 s in the agents profile, and the idle window makes no call)");
    }
    if args.agents == 0 || args.agents > 100 {
        bail!("--agents must be 1..=100");
    }
    let sides: Vec<Side> = match args.only.as_deref() {
        None => vec![Side::Ours, Side::Java],
        Some("ours") => vec![Side::Ours],
        Some("java") => vec![Side::Java],
        Some(o) => bail!("--only {o}: expected ours or java"),
    };
    let hotpath = match &args.hotpath {
        Some(p) => p.clone(),
        None => std::env::current_exe()?
            .parent()
            .map(|d| d.join("hotpath"))
            .ok_or_else(|| anyhow!("no directory for the hotpath binary"))?,
    };
    if !hotpath.is_file() {
        bail!(
            "{} is missing: build it (cargo build --release -p agent) or pass --hotpath",
            hotpath.display()
        );
    }
    let mut runs: Vec<Value> = Vec::new();
    for round in 0..args.rounds.max(1) {
        let mut order = sides.clone();
        if round % 2 == 1 {
            order.reverse();
        }
        for side in order {
            let r = run_side(side, &hotpath, &args)
                .with_context(|| format!("round {round}, {}", side.name()))?;
            if !args.json {
                eprintln!("round {round} {}: {r}", side.name());
            }
            runs.push(r);
        }
    }
    let mut summary = serde_json::Map::new();
    let mut table = format!(
        "{:<40} {:>22} {:>22} {:>8}\n",
        "figure (median, min–max over rounds)", "ours", "java", "ratio"
    );
    for (label, ptr, higher_better) in FIGURES {
        let vals = |side: &str| -> Vec<f64> {
            runs.iter()
                .filter(|r| r["side"] == side)
                .filter_map(|r| r.pointer(ptr).and_then(Value::as_f64))
                .collect()
        };
        let (o, j) = (vals("ours"), vals("java"));
        if o.is_empty() && j.is_empty() {
            continue;
        }
        let cell = |v: &[f64]| {
            if v.is_empty() {
                "-".to_string()
            } else if v.len() == 1 {
                format!("{:.1}", v[0])
            } else {
                format!(
                    "{:.1} ({:.1}–{:.1})",
                    median(v),
                    percentile(v, 0.0),
                    percentile(v, 1.0)
                )
            }
        };
        // How many times better ours is.
        let ratio = if o.is_empty() || j.is_empty() {
            f64::NAN
        } else if *higher_better {
            median(&o) / median(&j)
        } else {
            median(&j) / median(&o)
        };
        table.push_str(&format!(
            "{label:<40} {:>22} {:>22} {:>7.1}x\n",
            cell(&o),
            cell(&j),
            ratio
        ));
        summary.insert(
            ptr.trim_start_matches('/').replace('/', "."),
            json!({
                "ours": if o.is_empty() { Value::Null } else { json!(median(&o)) },
                "java": if j.is_empty() { Value::Null } else { json!(median(&j)) },
                "ours_runs": o,
                "java_runs": j,
                "ours_better_by": if ratio.is_finite() { json!(ratio) } else { Value::Null },
            }),
        );
    }
    let out = json!({
        "agents": args.agents,
        "asks": args.asks,
        "resend_asks": args.resend_asks,
        "alloc_seconds": args.alloc_seconds,
        "submits": args.submits,
        "containers": args.containers,
        "start_threads": args.start_threads,
        "am_heartbeat_ms": args.am_heartbeat_ms,
        "nm_heartbeat_ms": args.nm_heartbeat_ms,
        "rm_set": args.rm_set,
        "rounds": args.rounds,
        "cpus": std::thread::available_parallelism().map_or(0, |n| n.get()),
        "summary": summary,
        "runs": runs,
    });
    if args.json {
        println!("{out}");
    } else {
        print!("{table}");
        println!("(ratio: how many times better ours is; ours and java ran on the same machine, one after the other)");
    }
    Ok(())
}
