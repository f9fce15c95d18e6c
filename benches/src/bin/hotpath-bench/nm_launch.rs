//! `hotpath-bench nm-launch`: container launch on two hotpath agents beside two real Java
//! NodeManagers, with the same ResourceManager and the same ApplicationMaster.
//!
//! Each side gets a fresh real RM (`yarn-rm --profile agents`, a MiniYARNCluster without
//! NodeManagers of its own) and two node processes registered with it: `yarn-nm` peers (one
//! Java NodeManager per JVM) or `hotpath agent` processes (the `hotpath` binary beside this
//! one). The peer's ShellAm in bench mode then starts `--containers` containers of `true`, at
//! most `--per-node` at a time per node, with Hadoop's synchronous `NMClient.startContainer`,
//! and reports per container the startContainers RPC time and the time from the call to the
//! process running (the container writes `date +%s%N` first), and the wall time of the whole
//! run. Beside that this bench reads each node process's CPU time (`utime + stime` from
//! `/proc/<pid>/stat`, the node's own work; the containers are children and not counted on
//! either side) before and after the application, and its RSS (`VmRSS`, `VmHWM`) after it.
//!
//! The sides run one after the other on the same machine; with `--rounds N` they alternate
//! (Java, hotpath, Java, …) and every figure is reported per round and as the median.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use peer_harness::{Mode, Peer};
use serde_json::{json, Value};

/// Flags of `hotpath-bench nm-launch`.
#[derive(clap::Args, Debug, Clone)]
pub struct NmLaunchArgs {
    /// Containers of `true` per application.
    #[arg(long, default_value_t = 200)]
    pub containers: usize,
    /// Containers running at once per node.
    #[arg(long, default_value_t = 4)]
    pub per_node: usize,
    /// Rounds (each runs both sides, alternating which goes first).
    #[arg(long, default_value_t = 1)]
    pub rounds: usize,
    /// Only one side: `java` or `hotpath`.
    #[arg(long)]
    pub only: Option<String>,
    /// The `hotpath` binary (default: beside this one).
    #[arg(long)]
    pub hotpath: Option<PathBuf>,
    /// The AM's `yarn.client.max-cached-nodemanagers-proxies`: Hadoop's default 0 makes every
    /// startContainers call open a new connection with its own SASL handshake; N > 0 reuses
    /// up to N nodes' connections, which leaves the node's own launch time in the figures.
    #[arg(long, default_value_t = 0)]
    pub am_nm_proxies: u32,
    /// Extra `--set KEY=VALUE` for the hotpath agents (repeatable), e.g.
    /// `hotpath.agent.cgroups=off` to launch as Java's DefaultContainerExecutor does, without
    /// a cgroup per container.
    #[arg(long = "agent-set", value_name = "KEY=VALUE")]
    pub agent_set: Vec<String>,
    /// Start the agents with `--no-pin`: no core plan, so containers may use every CPU, as
    /// the Java NodeManager's do (on a machine this small the plan leaves containers one CPU).
    #[arg(long)]
    pub agent_no_pin: bool,
    /// Keep each hotpath agent's log (`HOTPATH_LOG=debug`, with the launch stage timings) in
    /// this directory as `agent-<ip>.log`.
    #[arg(long)]
    pub agent_logs: Option<PathBuf>,
    /// Keep the containers' timestamp files (`<container id>.ts`: `date +%s%N` as each one
    /// ran) in `DIR/<side>-<round>/`; with `--agent-logs` each hotpath run then reports
    /// `launch_stages`: p50/p99 of every launch stage, from the call reaching the agent to the
    /// container's timestamp.
    #[arg(long, value_name = "DIR")]
    pub timestamps: Option<PathBuf>,
    /// Put both sides' `yarn.nodemanager.local-dirs` and `log-dirs` under DIR (default: the
    /// system temp dir), e.g. a tmpfs such as `/dev/shm` to leave the disk's file system out of
    /// the figures (on this machine the root ext4 has no journal, so every inode allocation
    /// scans past recently deleted inodes).
    #[arg(long, value_name = "DIR")]
    pub node_dirs: Option<PathBuf>,
    /// Print the figures as one JSON object.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Java,
    Hotpath,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::Java => "java",
            Side::Hotpath => "hotpath",
        }
    }
}

/// CPU (ms) and memory (KiB) of one process, from /proc.
fn proc_cpu_ms(pid: u32) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat"))?;
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .ok_or_else(|| anyhow!("odd /proc/{pid}/stat"))?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After the command: state(0) ppid(1) ... utime(11) stime(12).
    let ticks: f64 = f[11].parse::<f64>()? + f[12].parse::<f64>()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Ok(ticks * 1000.0 / hz)
}

fn proc_status_kib(pid: u32, key: &str) -> Result<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    s.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| anyhow!("no {key} in /proc/{pid}/status"))
}

/// A node process of either kind.
enum Node {
    Java {
        peer: Box<Peer>,
        _dir: Option<tempfile::TempDir>,
    },
    Agent {
        child: Child,
        _dir: tempfile::TempDir,
    },
}

impl Node {
    fn pid(&self) -> u32 {
        match self {
            Node::Java { peer, .. } => peer.pid(),
            Node::Agent { child, .. } => child.id(),
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Node::Agent { child: c, .. } = self {
            // SAFETY: kill(2) on our own child's pid.
            unsafe {
                libc::kill(c.id() as i32, libc::SIGTERM);
            }
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_secs(5) {
                if let Ok(Some(_)) = c.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

const NODE_MB: &str = "4096";
const NODE_VCORES: &str = "8";

fn start_agent(bin: &Path, rt: &str, ip: &str, args: &NmLaunchArgs) -> Result<Node> {
    let logs = args.agent_logs.as_deref();
    let dir = node_dir(args)?;
    let d = dir.path();
    let sets = [
        format!("yarn.resourcemanager.resource-tracker.address={rt}"),
        format!("yarn.nodemanager.address={ip}:0"),
        format!("yarn.nodemanager.webapp.address={ip}:0"),
        format!("hotpath.agent.ipc.address={ip}:0"),
        format!("yarn.nodemanager.local-dirs={}", d.join("local").display()),
        format!("yarn.nodemanager.log-dirs={}", d.join("logs").display()),
        format!("yarn.nodemanager.resource.memory-mb={NODE_MB}"),
        format!("yarn.nodemanager.resource.cpu-vcores={NODE_VCORES}"),
        format!(
            "hotpath.agent.control-socket={}",
            d.join("agent.sock").display()
        ),
        "yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage=100".into(),
    ];
    let mut cmd = Command::new(bin);
    cmd.arg("agent").arg("--ready-line");
    if args.agent_no_pin {
        cmd.arg("--no-pin");
    }
    for s in sets.iter().chain(&args.agent_set) {
        cmd.arg("--set").arg(s);
    }
    let stderr = match logs {
        Some(dir) => {
            std::fs::create_dir_all(dir)?;
            cmd.env("HOTPATH_LOG", "debug");
            Stdio::from(std::fs::File::create(dir.join(format!("agent-{ip}.log")))?)
        }
        None => Stdio::null(),
    };
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))?;
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line)?;
    if !line.starts_with("READY ") {
        bail!("the agent did not start: {line:?}");
    }
    Ok(Node::Agent { child, _dir: dir })
}

/// A fresh directory for one node's local and log dirs (under `--node-dirs`, if given).
fn node_dir(args: &NmLaunchArgs) -> Result<tempfile::TempDir> {
    Ok(match &args.node_dirs {
        Some(root) => tempfile::tempdir_in(root)
            .with_context(|| format!("a node dir in {}", root.display()))?,
        None => tempfile::tempdir()?,
    })
}

fn start_java_nm(rt: &str, args: &NmLaunchArgs) -> Result<Node> {
    let dir = match &args.node_dirs {
        Some(_) => Some(node_dir(args)?),
        None => None,
    };
    let dirs: Vec<String> = dir.as_ref().map_or(Vec::new(), |d| {
        vec![
            format!(
                "yarn.nodemanager.local-dirs={}",
                d.path().join("local").display()
            ),
            format!(
                "yarn.nodemanager.log-dirs={}",
                d.path().join("logs").display()
            ),
        ]
    });
    let sets = [
        format!("yarn.nodemanager.resource.memory-mb={NODE_MB}"),
        format!("yarn.nodemanager.resource.cpu-vcores={NODE_VCORES}"),
        // Java's virtual-memory check kills JVMs in small containers (2.1 × 256 MB); the
        // agent has no such check either.
        "yarn.nodemanager.vmem-check-enabled=false".to_string(),
        "yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage=100".into(),
    ];
    let mut args: Vec<&str> = vec!["--rm", rt];
    for s in sets.iter().chain(&dirs) {
        args.push("--set");
        args.push(s);
    }
    let p = Peer::start(Mode::YarnNm, &args).map_err(|e| anyhow!("yarn-nm: {e}"))?;
    Ok(Node::Java {
        peer: Box::new(p),
        _dir: dir,
    })
}

fn registered(rm: &mut Peer, n: usize) -> Result<bool> {
    let v = rm.command("nodes").map_err(|e| anyhow!("nodes: {e}"))?;
    Ok(v["nodes"]
        .as_array()
        .map_or(0, |a| a.iter().filter(|n| n["state"] == "RUNNING").count())
        >= n)
}

fn run_side(side: Side, round: usize, args: &NmLaunchArgs, hotpath: &Path) -> Result<Value> {
    let mut rm =
        Peer::start(Mode::YarnRm, &["--profile", "agents"]).map_err(|e| anyhow!("yarn-rm: {e}"))?;
    let rt = rm.ready()["resource_tracker"]
        .as_str()
        .ok_or_else(|| anyhow!("no resource_tracker in READY"))?
        .to_string();
    let nodes = match side {
        Side::Java => vec![start_java_nm(&rt, args)?, start_java_nm(&rt, args)?],
        Side::Hotpath => vec![
            start_agent(hotpath, &rt, "127.0.0.61", args)?,
            start_agent(hotpath, &rt, "127.0.0.62", args)?,
        ],
    };
    let t0 = Instant::now();
    while !registered(&mut rm, 2)? {
        if t0.elapsed() > Duration::from_secs(60) {
            bail!("{} nodes did not register", side.name());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let cpu0: Vec<f64> = nodes
        .iter()
        .map(|n| proc_cpu_ms(n.pid()))
        .collect::<Result<_>>()?;
    let dir = tempfile::tempdir()?;
    let result = dir.path().join("bench.json");
    let ts_dir = match &args.timestamps {
        Some(d) => {
            let d = d.join(format!("{}-{round}", side.name()));
            std::fs::create_dir_all(&d)?;
            Some(d.canonicalize()?)
        }
        None => None,
    };
    let shared = ts_dir
        .as_ref()
        .map_or(String::new(), |d| format!(" shared={}", d.display()));
    let submitted = rm
        .command(&format!(
            "app-submit mode=bench containers={} per_node={} nm_proxies={} result={}{shared}",
            args.containers,
            args.per_node,
            args.am_nm_proxies,
            result.display()
        ))
        .map_err(|e| anyhow!("app-submit: {e}"))?;
    let id = submitted["app_id"].as_str().unwrap_or_default().to_string();
    let done = rm
        .command(&format!("app-wait {id} 900"))
        .map_err(|e| anyhow!("app-wait: {e}"))?;
    if done["final_status"] != "SUCCEEDED" {
        bail!("{} run did not succeed: {done}", side.name());
    }
    let cpu1: Vec<f64> = nodes
        .iter()
        .map(|n| proc_cpu_ms(n.pid()))
        .collect::<Result<_>>()?;
    let rss: Vec<u64> = nodes
        .iter()
        .map(|n| proc_status_kib(n.pid(), "VmRSS:"))
        .collect::<Result<_>>()?;
    let hwm: Vec<u64> = nodes
        .iter()
        .map(|n| proc_status_kib(n.pid(), "VmHWM:"))
        .collect::<Result<_>>()?;
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&result)?)?;
    let launched = args.containers as f64 + 1.0; // the AM too
    let node_cpu: f64 = cpu1.iter().zip(&cpu0).map(|(a, b)| a - b).sum();
    let stages = match (side, &args.agent_logs, &ts_dir) {
        (Side::Hotpath, Some(logs), Some(ts)) => launch_stages(logs, ts)?,
        _ => Value::Null,
    };
    Ok(json!({
        "launch_stages": stages,
        "side": side.name(),
        "start_rpc_ms": r["start_rpc_ms"],
        "start_to_running_ms": r["start_to_running_ms"],
        "wall_ms": r["wall_ms"],
        "exit_statuses": r["exit_statuses"],
        "node_cpu_ms_total": node_cpu,
        "node_cpu_ms_per_launch": node_cpu / launched,
        "rss_kib": rss,
        "hwm_kib": hwm,
    }))
}

/// The agents' stages in order, as their `launch stages` lines name them, then `running`
/// (the container's own timestamp).
const STAGES: [&str; 10] = [
    "accepted",
    "dequeued",
    "worker",
    "localized",
    "written",
    "set_up",
    "prepared",
    "cgroup",
    "spawned",
    "running",
];

/// Per-stage launch timings: the agents' `launch stages` lines (µs since the start reached
/// the agent; `--agent-logs`) joined with the containers' timestamps (`--timestamps`), as
/// p50 / p99 / max of each stage's own time and of the time since the call reached the agent.
fn launch_stages(logs: &Path, ts_dir: &Path) -> Result<Value> {
    let mut rows: Vec<std::collections::HashMap<String, i128>> = Vec::new();
    for e in std::fs::read_dir(logs)? {
        let p = e?.path();
        if p.extension().is_none_or(|x| x != "log") {
            continue;
        }
        for line in std::fs::read_to_string(&p)?.lines() {
            let Some((_, rest)) = line.split_once("launch stages ") else {
                continue;
            };
            let Some((cid, kvs)) = rest.split_once(": ") else {
                continue;
            };
            let mut row: std::collections::HashMap<String, i128> = kvs
                .split_whitespace()
                .filter_map(|kv| {
                    let (k, v) = kv.split_once('=')?;
                    // ANSI colour codes may trail the last value.
                    let v: String = v.chars().take_while(char::is_ascii_digit).collect();
                    Some((k.to_string(), v.parse().ok()?))
                })
                .collect();
            let ts = std::fs::read_to_string(ts_dir.join(format!("{cid}.ts")))
                .ok()
                .and_then(|t| t.trim().parse::<i128>().ok());
            if let (Some(ts), Some(&rx)) = (ts, row.get("received_epoch_ns")) {
                row.insert("running".into(), (ts - rx) / 1000);
            }
            rows.push(row);
        }
    }
    let pct = |mut v: Vec<i128>, q: f64| -> Value {
        if v.is_empty() {
            return Value::Null;
        }
        v.sort_unstable();
        let r = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
        json!(v[r - 1] as f64 / 1000.0)
    };
    let mut out = serde_json::Map::new();
    out.insert("launches".into(), json!(rows.len()));
    out.insert(
        "from_zygote".into(),
        json!(rows.iter().filter(|r| r.get("zygote") == Some(&1)).count()),
    );
    let mut prev: Option<&str> = None;
    for k in STAGES.iter() {
        let cum: Vec<i128> = rows.iter().filter_map(|r| r.get(*k).copied()).collect();
        let own: Vec<i128> = rows
            .iter()
            .filter_map(|r| Some(r.get(*k)? - prev.map_or(Some(0), |p| r.get(p).copied())?))
            .collect();
        let max = own.iter().max().map(|&m| m as f64 / 1000.0);
        out.insert(
            (*k).into(),
            json!({
                "stage_p50_ms": pct(own.clone(), 0.5),
                "stage_p99_ms": pct(own, 0.99),
                "stage_max_ms": max,
                "since_received_p50_ms": pct(cum.clone(), 0.5),
                "since_received_p99_ms": pct(cum, 0.99),
            }),
        );
        prev = Some(k);
    }
    Ok(Value::Object(out))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        f64::NAN
    } else {
        v[v.len() / 2]
    }
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

pub fn run(args: NmLaunchArgs) -> Result<()> {
    let hotpath = match &args.hotpath {
        Some(p) => p.clone(),
        None => std::env::current_exe()?
            .parent()
            .map(|d| d.join("hotpath"))
            .ok_or_else(|| anyhow!("no directory for the hotpath binary"))?,
    };
    if args.only.as_deref() != Some("java") && !hotpath.is_file() {
        bail!(
            "{} is missing: build it (cargo build --release -p agent) or pass --hotpath",
            hotpath.display()
        );
    }
    let mut runs: Vec<Value> = Vec::new();
    for round in 0..args.rounds.max(1) {
        let order = if round % 2 == 0 {
            [Side::Java, Side::Hotpath]
        } else {
            [Side::Hotpath, Side::Java]
        };
        for side in order {
            if args.only.as_deref().is_some_and(|o| o != side.name()) {
                continue;
            }
            let r = run_side(side, round, &args, &hotpath)?;
            if !args.json {
                eprintln!("round {round} {}: {r}", side.name());
            }
            runs.push(r);
        }
    }
    let pick = |side: &str, get: &dyn Fn(&Value) -> f64| -> f64 {
        median(runs.iter().filter(|r| r["side"] == side).map(get).collect())
    };
    let mut summary = serde_json::Map::new();
    for side in ["java", "hotpath"] {
        if !runs.iter().any(|r| r["side"] == side) {
            continue;
        }
        summary.insert(
            side.into(),
            json!({
                "start_rpc_p50_ms": pick(side, &|r| f(&r["start_rpc_ms"]["p50"])),
                "start_rpc_p99_ms": pick(side, &|r| f(&r["start_rpc_ms"]["p99"])),
                "start_to_running_p50_ms": pick(side, &|r| f(&r["start_to_running_ms"]["p50"])),
                "start_to_running_p99_ms": pick(side, &|r| f(&r["start_to_running_ms"]["p99"])),
                "wall_ms": pick(side, &|r| f(&r["wall_ms"])),
                "node_cpu_ms_per_launch": pick(side, &|r| f(&r["node_cpu_ms_per_launch"])),
                "rss_mib_per_node": pick(side, &|r| {
                    let v = r["rss_kib"].as_array().map_or(0.0, |a| a.iter().map(f).sum::<f64>() / a.len().max(1) as f64);
                    v / 1024.0
                }),
                "hwm_mib_per_node": pick(side, &|r| {
                    let v = r["hwm_kib"].as_array().map_or(0.0, |a| a.iter().map(f).sum::<f64>() / a.len().max(1) as f64);
                    v / 1024.0
                }),
            }),
        );
    }
    let (j, h) = (
        summary.get("java").cloned(),
        summary.get("hotpath").cloned(),
    );
    if let (Some(j), Some(h)) = (&j, &h) {
        let ratio = |k: &str| f(&j[k]) / f(&h[k]);
        summary.insert(
            "java_over_hotpath".into(),
            json!({
                "start_rpc_p50": ratio("start_rpc_p50_ms"),
                "start_rpc_p99": ratio("start_rpc_p99_ms"),
                "start_to_running_p50": ratio("start_to_running_p50_ms"),
                "start_to_running_p99": ratio("start_to_running_p99_ms"),
                "wall": ratio("wall_ms"),
                "node_cpu_per_launch": ratio("node_cpu_ms_per_launch"),
                "rss": ratio("rss_mib_per_node"),
            }),
        );
    }
    let out = json!({
        "containers": args.containers,
        "per_node": args.per_node,
        "am_nm_proxies": args.am_nm_proxies,
        "agent_no_pin": args.agent_no_pin,
        "rounds": args.rounds,
        "summary": summary,
        "runs": runs,
    });
    if args.json {
        println!("{out}");
    } else {
        println!("{}", serde_json::to_string_pretty(&out["summary"])?);
    }
    Ok(())
}
