//! The ApplicationMaster of `hotpath-bench rm-apps` (hidden subcommand `rm-apps-am`): a real AM,
//! started by the RM under test in a container on a hotpath agent, holding the AMRMToken the
//! agent wrote to `HADOOP_TOKEN_FILE_LOCATION`. It writes its figures as one JSON object to
//! `--out` (the bench runs on one machine, so the orchestrator reads the file directly) and
//! unregisters SUCCEEDED only when the measurement held; anything else fails the application
//! with the cause in the diagnostics and in `--out`.
//!
//! Modes:
//!
//! - `noop`: registers and unregisters. `started_ns` is the wall clock read first thing in
//!   `main` (before argument parsing and logging setup), `registered_ns` after
//!   `registerApplicationMaster` returned: submit → AM running.
//! - `alloc`: registers; one allocate blacklists every node (`--blacklist`, host and host:port
//!   for each, as Java compares the scheduler node name which is either, and rm-core the host)
//!   and asks `--asks` containers of 128 MB at `*`; the RM keeps them outstanding, since no
//!   node may take them. Then `--seconds` of back-to-back calls as a warm-up (Java's JIT), an
//!   idle window of `--seconds` with no calls, then `--seconds` of back-to-back allocate calls (empty asks, as AMRMClient sends when nothing changed, or the
//!   whole ask again with `--resend-asks`). The RM process's CPU (`utime + stime` of
//!   `/proc/<--rm-pid>/stat`: one machine) is read at both ends of each window. A container
//!   allocated in spite of the blacklist fails the run: the asks were not outstanding.
//! - `containers`: asks `--containers` containers of `--command` (128 MB, 1 vcore) and starts
//!   each as it is allocated from `--start-threads` threads (DistributedShell's state machine
//!   keeps the books: response ids, surplus release, completions), allocating every
//!   `--heartbeat-ms`. Reports when the last container was allocated and the last completed,
//!   counted from the first allocate.

use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{anyhow, bail, Context, Result};
use hadoop_wire::pb::hadoop::yarn::{
    AllocateRequestProto, PriorityProto, ResourceBlacklistRequestProto, ResourceProto,
    ResourceRequestProto,
};
use hdrhistogram::Histogram;
use serde_json::{json, Value};
use yarn_client::application_client::FinalStatus;
use yarn_client::application_master::{amrm_token_from_env, ApplicationMaster};
use yarn_client::container_manager::ContainerManager;
use yarn_client::distributed_shell::{DistributedShell, ShellSpec, Start};
use yarn_client::rpc::Retry;

use crate::rm_apps::{proc_cpu_ms, proc_cpu_split_ms, unix_ns};

#[derive(clap::Args, Debug, Clone)]
pub struct AmArgs {
    /// `noop`, `alloc` or `containers`.
    #[arg(long)]
    pub mode: String,
    /// The RM's ApplicationMasterProtocol address.
    #[arg(long)]
    pub scheduler: String,
    /// Where to write the figures (JSON).
    #[arg(long)]
    pub out: PathBuf,
    /// `alloc`: the RM process whose CPU is read.
    #[arg(long, default_value_t = 0)]
    pub rm_pid: u32,
    /// `alloc`: length of the idle window and of the busy window (s).
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    /// `alloc`: containers asked for and kept outstanding.
    #[arg(long, default_value_t = 50)]
    pub asks: i32,
    /// `alloc`: send the whole ask with every call.
    #[arg(long)]
    pub resend_asks: bool,
    /// `alloc`: comma-separated nodes (`host:port`) to blacklist.
    #[arg(long, default_value = "")]
    pub blacklist: String,
    /// `containers`: how many.
    #[arg(long, default_value_t = 1000)]
    pub containers: u32,
    /// `containers`: the command (bash).
    #[arg(long, default_value = "true")]
    pub command: String,
    /// `containers`: threads starting containers.
    #[arg(long, default_value_t = 8)]
    pub start_threads: usize,
    /// `containers`: time between allocate calls (ms).
    #[arg(long, default_value_t = 100)]
    pub heartbeat_ms: u64,
    /// `containers`: give up after this many seconds.
    #[arg(long, default_value_t = 600)]
    pub timeout_s: u64,
}

/// Runs the AM; `started` is the wall clock read first thing in `main`.
pub fn run(a: AmArgs, started: SystemTime) -> Result<()> {
    let started_ns = unix_ns(started);
    let conf = conf::Configuration::new();
    let token = amrm_token_from_env()?;
    let sched = yarn_client::rpc::resolve("--scheduler", &a.scheduler)?;
    let am = ApplicationMaster::new(sched, token, &conf, &Retry::default())?;
    let host = std::env::var("NM_HOST").unwrap_or_else(|_| "127.0.0.1".into());
    am.register(&host, -1, "")
        .context("registerApplicationMaster")?;
    let registered_ns = unix_ns(SystemTime::now());
    let r = match a.mode.as_str() {
        "noop" => Ok(json!({})),
        "alloc" => alloc(&a, &am),
        "containers" => containers(&a, &am, &conf),
        m => Err(anyhow!("unknown --mode {m} (noop, alloc, containers)")),
    };
    let (status, diag, mut out) = match r {
        Ok(v) => (FinalStatus::Succeeded, String::new(), v),
        Err(e) => (
            FinalStatus::Failed,
            format!("{e:#}"),
            json!({ "error": format!("{e:#}") }),
        ),
    };
    out["mode"] = json!(a.mode);
    out["started_ns"] = json!(started_ns);
    out["registered_ns"] = json!(registered_ns);
    let tmp = a.out.with_extension("tmp");
    std::fs::write(&tmp, out.to_string()).with_context(|| format!("writing {tmp:?}"))?;
    std::fs::rename(&tmp, &a.out)?;
    let req = DistributedShell::finish_request(status, &diag, "");
    for _ in 0..100 {
        if am.finish(&req)? {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    bail!("finishApplicationMaster: not unregistered after 100 calls")
}

fn ask(n: i32) -> ResourceRequestProto {
    ResourceRequestProto {
        priority: Some(PriorityProto { priority: Some(1) }),
        resource_name: Some("*".into()),
        capability: Some(ResourceProto {
            memory: Some(128),
            virtual_cores: Some(1),
            resource_value_map: vec![],
        }),
        num_containers: Some(n),
        relax_locality: Some(true),
        ..Default::default()
    }
}

fn self_cpu_ms() -> Result<f64> {
    proc_cpu_ms(std::process::id())
}

fn alloc(a: &AmArgs, am: &ApplicationMaster) -> Result<Value> {
    if a.rm_pid == 0 {
        bail!("--rm-pid is required in alloc mode");
    }
    let window = Duration::from_secs_f64(a.seconds);
    let mut blacklist = Vec::new();
    for n in a.blacklist.split(',').filter(|s| !s.is_empty()) {
        blacklist.push(n.to_string());
        if let Some((h, _)) = n.rsplit_once(':') {
            blacklist.push(h.to_string());
        }
    }
    if blacklist.is_empty() {
        bail!("--blacklist names no node: the asks would be satisfied");
    }
    let mut rid = 0;
    let mut allocated = 0usize;
    let first = am.allocate(&AllocateRequestProto {
        ask: vec![ask(a.asks)],
        blacklist_request: Some(ResourceBlacklistRequestProto {
            blacklist_additions: blacklist.clone(),
            blacklist_removals: vec![],
        }),
        response_id: Some(rid),
        progress: Some(0.0),
        ..Default::default()
    })?;
    rid = first.response_id.context("allocate: no response_id")?;
    allocated += first.allocated_containers.len();

    // Warm-up (not measured): the same calls for the same time, so that the JVM's JIT has
    // compiled the allocate path before either window.
    let t0 = Instant::now();
    while t0.elapsed() < window {
        let resp = am.allocate(&AllocateRequestProto {
            response_id: Some(rid),
            progress: Some(0.0),
            ..Default::default()
        })?;
        rid = resp.response_id.context("allocate: no response_id")?;
        allocated += resp.allocated_containers.len();
    }

    // Idle window: the asks outstanding, nodes heartbeating, no AM calls.
    let rm0 = proc_cpu_ms(a.rm_pid)?;
    let t0 = Instant::now();
    std::thread::sleep(window);
    let idle_wall = t0.elapsed().as_secs_f64();
    let idle_cpu = proc_cpu_ms(a.rm_pid)? - rm0;

    // Busy window: back to back.
    let req_for = |rid: i32| AllocateRequestProto {
        ask: if a.resend_asks {
            vec![ask(a.asks)]
        } else {
            vec![]
        },
        response_id: Some(rid),
        progress: Some(0.0),
        ..Default::default()
    };
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
    let mut calls = 0u64;
    let am0 = self_cpu_ms()?;
    let (rm0_user, rm0_sys) = proc_cpu_split_ms(a.rm_pid)?;
    let rm0 = rm0_user + rm0_sys;
    let t0 = Instant::now();
    while t0.elapsed() < window {
        let req = req_for(rid);
        let c0 = Instant::now();
        let resp = am.allocate(&req)?;
        hist.saturating_record(c0.elapsed().as_micros().max(1) as u64);
        calls += 1;
        rid = resp.response_id.context("allocate: no response_id")?;
        allocated += resp.allocated_containers.len();
    }
    let busy_wall = t0.elapsed().as_secs_f64();
    let (rm1_user, rm1_sys) = proc_cpu_split_ms(a.rm_pid)?;
    let busy_cpu = rm1_user + rm1_sys - rm0;
    let am_cpu = self_cpu_ms()? - am0;
    if allocated > 0 {
        bail!(
            "{allocated} container(s) allocated on blacklisted nodes: the {} asks were not kept outstanding",
            a.asks
        );
    }
    if calls == 0 {
        bail!("no allocate call completed in {:?}", window);
    }
    let idle_rate = idle_cpu / idle_wall; // ms of CPU per s
    let net = busy_cpu - idle_rate * busy_wall;
    Ok(json!({
        "asks": a.asks,
        "resend_asks": a.resend_asks,
        "blacklisted": blacklist,
        "calls": calls,
        "busy_s": busy_wall,
        "calls_per_s": calls as f64 / busy_wall,
        "rm_cpu_ms_busy": busy_cpu,
        "rm_cpu_ms_idle": idle_cpu,
        "idle_s": idle_wall,
        "rm_idle_cpu_ms_per_s": idle_rate,
        "rm_cpu_us_per_call_gross": busy_cpu * 1000.0 / calls as f64,
        "rm_cpu_us_per_call_net": net * 1000.0 / calls as f64,
        "rm_user_us_per_call_gross": (rm1_user - rm0_user) * 1000.0 / calls as f64,
        "rm_sys_us_per_call_gross": (rm1_sys - rm0_sys) * 1000.0 / calls as f64,
        "am_cpu_us_per_call": am_cpu * 1000.0 / calls as f64,
        "latency_us_p50": hist.value_at_quantile(0.5),
        "latency_us_p99": hist.value_at_quantile(0.99),
        "latency_us_max": hist.max(),
    }))
}

/// A start's answer, from a start thread.
struct Started {
    container: hadoop_wire::yarn::ids::ContainerId,
    result: std::result::Result<(), String>,
    rpc_us: u64,
}

fn containers(a: &AmArgs, am: &ApplicationMaster, conf: &conf::Configuration) -> Result<Value> {
    let n = a.containers;
    if n == 0 {
        bail!("--containers must be at least 1");
    }
    let cm = Arc::new(ContainerManager::new(
        conf,
        &Retry {
            connect_attempts: 3,
            ..Retry::default()
        },
    ));
    let mut ds = DistributedShell::new(ShellSpec {
        containers: n,
        memory_mb: 128,
        vcores: 1,
        priority: 0,
        command: a.command.clone(),
        service_data: vec![],
    });
    let (job_tx, job_rx) = mpsc::channel::<Start>();
    let job_rx = Arc::new(Mutex::new(job_rx));
    let (done_tx, done_rx) = mpsc::channel::<Started>();
    let mut workers = Vec::new();
    for i in 0..a.start_threads.max(1) {
        let (rx, tx, cm) = (job_rx.clone(), done_tx.clone(), cm.clone());
        workers.push(
            std::thread::Builder::new()
                .name(format!("am-start-{i}"))
                .spawn(move || loop {
                    let job = match rx.lock().unwrap_or_else(|p| p.into_inner()).recv() {
                        Ok(j) => j,
                        Err(_) => return,
                    };
                    let t = Instant::now();
                    let result = match cm.start(&job.node, &job.nm_token, vec![job.request]) {
                        Ok(o) if o.succeeded.contains(&job.container) => Ok(()),
                        Ok(o) => Err(o
                            .failed
                            .first()
                            .map_or("the node did not report the start".into(), |f| {
                                f.to_string()
                            })),
                        Err(e) => Err(format!("{e:#}")),
                    };
                    let _ = tx.send(Started {
                        container: job.container,
                        result,
                        rpc_us: t.elapsed().as_micros() as u64,
                    });
                })?,
        );
    }
    drop(done_tx);
    let mut start_rpc = Histogram::<u64>::new_with_bounds(1, 600_000_000, 3)?;
    let heartbeat = Duration::from_millis(a.heartbeat_ms.max(1));
    let t0 = Instant::now();
    let mut allocated = 0u32;
    let mut all_allocated_s = None;
    let mut first_allocated_s = None;
    let mut calls = 0u64;
    let mut failures = 0u32;
    let mut abort = None;
    while !ds.is_done() {
        if t0.elapsed() > Duration::from_secs(a.timeout_s) {
            abort = Some(format!("not done within {} s", a.timeout_s));
            break;
        }
        let beat = Instant::now();
        match am.allocate(&ds.allocate_request()) {
            Ok(resp) => {
                calls += 1;
                failures = 0;
                for s in ds.on_allocate(resp)? {
                    allocated += 1;
                    job_tx
                        .send(s)
                        .map_err(|_| anyhow!("the start threads are gone"))?;
                }
            }
            Err(e) => {
                failures += 1;
                if failures > 20 {
                    abort = Some(format!("allocate failed {failures} times: {e:#}"));
                    break;
                }
            }
        }
        if allocated > 0 && first_allocated_s.is_none() {
            first_allocated_s = Some(t0.elapsed().as_secs_f64());
        }
        if allocated >= n && all_allocated_s.is_none() {
            all_allocated_s = Some(t0.elapsed().as_secs_f64());
        }
        while let Ok(s) = done_rx.try_recv() {
            start_rpc.saturating_record(s.rpc_us.max(1));
            match s.result {
                Ok(()) => ds.started(s.container),
                Err(why) => ds.start_failed(s.container, &why),
            }
        }
        if !ds.is_done() {
            std::thread::sleep(heartbeat.saturating_sub(beat.elapsed()));
        }
    }
    let done_s = t0.elapsed().as_secs_f64();
    drop(job_tx);
    for w in workers {
        let _ = w.join();
    }
    let snap = ds.snapshot();
    let (status, diagnostics) = ds.finish(abort.as_deref());
    if status != FinalStatus::Succeeded {
        bail!("{diagnostics}");
    }
    let all_allocated_s = all_allocated_s.context("not every container was allocated")?;
    Ok(json!({
        "containers": n,
        "command": a.command,
        "start_threads": a.start_threads,
        "heartbeat_ms": a.heartbeat_ms,
        "allocate_calls": calls,
        "first_allocated_s": first_allocated_s,
        "all_allocated_s": all_allocated_s,
        "all_done_s": done_s,
        "allocated_per_s": n as f64 / all_allocated_s,
        "launched_per_s": (snap.done - snap.failed) as f64 / done_s,
        "exited_0": snap.done - snap.failed,
        "failed": snap.failed,
        "start_rpc_ms_p50": start_rpc.value_at_quantile(0.5) as f64 / 1000.0,
        "start_rpc_ms_p99": start_rpc.value_at_quantile(0.99) as f64 / 1000.0,
    }))
}
