//! The launcher: the thread that turns accepted starts into processes and processes into exit
//! statuses (see `run`). Commands arrive over a channel from the ContainerManagementProtocol
//! handlers and from housekeeping (cleanup orders), so no IPC handler ever waits.

use std::sync::mpsc;

use nm_core::container_manager::{KillReason, LaunchOrder, Signal};
use nm_core::ids::{AppId, ContainerId};

/// Work for the launcher.
#[derive(Debug)]
pub enum LaunchCommand {
    /// Localize, prepare and start an accepted container; the stamps time its stages.
    Launch(Box<LaunchOrder>, LaunchStamps),
    /// Kill a container's process group (SIGTERM, then SIGKILL after the delay).
    Kill(ContainerId, KillReason),
    /// `signalToContainer`.
    Signal(ContainerId, Signal),
    /// The application finished on this node: clean up its directories and caches.
    AppFinished(AppId),
}

/// When a start reached the agent, for the per-stage launch timings logged at debug level.
#[derive(Debug, Clone, Copy)]
pub struct LaunchStamps {
    /// The startContainers handler began (before decoding the request).
    pub received: Instant,
    /// The same moment in wall-clock nanoseconds since the epoch (to join with a container's
    /// own clock, e.g. the bench's `date +%s%N`).
    pub received_epoch_ns: u128,
    /// The token checks passed and the start was accepted.
    pub accepted: Instant,
}

impl LaunchStamps {
    /// Stamps taken at the start of the handler; `accepted` is set by [`Self::accept`].
    pub fn now() -> LaunchStamps {
        let now = Instant::now();
        LaunchStamps {
            received: now,
            received_epoch_ns: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
            accepted: now,
        }
    }

    /// Marks the start accepted now.
    pub fn accept(mut self) -> LaunchStamps {
        self.accepted = Instant::now();
        self
    }
}

/// The sending end of the launcher's channel.
#[derive(Debug, Clone)]
pub struct LauncherHandle {
    tx: mpsc::Sender<LaunchCommand>,
}

impl LauncherHandle {
    /// A handle and the receiving end for the launcher thread.
    pub fn channel() -> (LauncherHandle, mpsc::Receiver<LaunchCommand>) {
        let (tx, rx) = mpsc::channel();
        (LauncherHandle { tx }, rx)
    }

    /// Queues a command; if the launcher has ended (the agent is stopping) it is dropped with
    /// a warning.
    pub fn send(&self, c: LaunchCommand) {
        if let Err(e) = self.tx.send(c) {
            tracing::warn!("the launcher has stopped; dropped {:?}", e.0);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The launcher thread

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hadoop_wire::token::credentials::{Credentials, Format};
use hadoop_wire::yarn::exit_status;
use nm_core::launch::{
    self, container_env, expand, launch_script, resolve_links, ContainerPaths, LaunchEnvInput,
    NmDirs, ScriptInput,
};
use nm_core::localization::{diagnostics_entry, ResourceRequest};
use nm_core::recovery::{ContainerRecord, RECORD_FILE};
use std::os::unix::fs::DirBuilderExt;

use crate::config::NmSettings;
use crate::executor::{Executor, Limits, PrepareInput, RunningContainer};
use crate::localizer::ResourceLocalizer;
use crate::setup;
use crate::shared::{lock, Shared};
use crate::sys::wall_ms;

/// What the launcher needs besides the shared state.
#[derive(Debug, Clone)]
pub struct LauncherConfig {
    pub dirs: NmDirs,
    pub nm: NmSettings,
    /// The NodeId and the webapp port (`NM_HOST`, `NM_PORT`, `NM_HTTP_PORT`).
    pub node_host: String,
    pub node_port: u16,
    pub http_port: u16,
    /// The agent's own environment, `JAVA_HOME` included (found from `java` on `PATH` when the
    /// agent was started without it).
    pub agent_env: Vec<(String, String)>,
    /// Whether the JDK under `JAVA_HOME` is 17 or newer (`<ADD_OPENS>`).
    pub java17: bool,
    /// Where launch workers run (the housekeeping CPU).
    pub worker_cpu: Option<u32>,
    /// Running aux services' metadata (`NM_AUX_SERVICE_<name>` in every container).
    pub aux_services: Vec<(String, Vec<u8>)>,
    /// `mapreduce_shuffle`'s jobs: an application's goes at its cleanup on this node.
    pub shuffle_jobs: Option<crate::shuffle::Jobs>,
}

impl LauncherConfig {
    /// The agent's environment with `JAVA_HOME` filled in, and whether that JDK is ≥ 17.
    pub fn agent_env() -> (Vec<(String, String)>, bool) {
        let mut env: Vec<(String, String)> = std::env::vars().collect();
        let java_home = match env.iter().find(|(k, _)| k == "JAVA_HOME") {
            Some((_, v)) => Some(PathBuf::from(v)),
            None => {
                let found = find_java_home();
                if let Some(h) = &found {
                    tracing::info!(
                        "JAVA_HOME is not set; containers get {} (from java on PATH)",
                        h.display()
                    );
                    env.push(("JAVA_HOME".into(), h.display().to_string()));
                } else {
                    tracing::warn!(
                        "JAVA_HOME is not set and no java is on PATH: Java containers will not start"
                    );
                }
                found
            }
        };
        let java17 = java_home.as_deref().is_some_and(jdk_is_17_or_newer);
        (env, java17)
    }
}

fn find_java_home() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    for dir in std::env::split_paths(&path) {
        let java = dir.join("java");
        if java.is_file() {
            let real = std::fs::canonicalize(&java).ok()?;
            // <home>/bin/java
            return real.parent()?.parent().map(Path::to_path_buf);
        }
    }
    None
}

/// The `release` file of the JDK says its version (`JAVA_VERSION="17.0.15"`).
fn jdk_is_17_or_newer(home: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(home.join("release")) else {
        return true;
    };
    text.lines()
        .find_map(|l| l.strip_prefix("JAVA_VERSION="))
        .map(|v| v.trim_matches('"'))
        .and_then(|v| {
            let major = v.split('.').next()?;
            let major: u32 = major.parse().ok()?;
            // 1.8 style
            Some(if major == 1 { 8 } else { major })
        })
        .is_none_or(|m| m >= 17)
}

/// What a launch worker reports.
enum Worker {
    Spawned(ContainerId, Box<(RunningContainer, ContainerPaths)>),
    /// It never ran: localization failed (−1000), the launch failed (−1), or it was killed
    /// before its process started (the kill's status).
    Failed(ContainerId, i32, String),
}

struct Live {
    rc: RunningContainer,
    paths: ContainerPaths,
}

/// Starts the launcher thread.
pub fn spawn(
    rx: mpsc::Receiver<LaunchCommand>,
    shared: Arc<Shared>,
    cfg: LauncherConfig,
    executor: Arc<Executor>,
    localizer: Arc<ResourceLocalizer>,
    recovered: Vec<(ContainerId, ContainerPaths, RunningContainer)>,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("hp-launcher".into())
        .spawn(move || run(rx, &shared, &cfg, executor, localizer, recovered))
}

fn run(
    rx: mpsc::Receiver<LaunchCommand>,
    shared: &Arc<Shared>,
    cfg: &LauncherConfig,
    executor: Arc<Executor>,
    localizer: Arc<ResourceLocalizer>,
    recovered: Vec<(ContainerId, ContainerPaths, RunningContainer)>,
) {
    let (done_tx, done_rx) = mpsc::channel::<Worker>();
    let mut live: HashMap<ContainerId, Live> = recovered
        .into_iter()
        .map(|(id, paths, rc)| (id, Live { rc, paths }))
        .collect();
    let mut users: HashMap<AppId, String> = HashMap::new();
    let mut finished_apps: Vec<AppId> = Vec::new();
    let mut workers = 0u64;
    loop {
        let stopping = shared.stop.is_stopped();
        match rx.recv_timeout(Duration::from_millis(10)) {
            Ok(LaunchCommand::Launch(order, stamps)) => {
                let dequeued = Instant::now();
                users.insert(order.id.app, order.user.clone());
                workers += 1;
                let (sh, cfg, ex, loc, tx) = (
                    shared.clone(),
                    cfg.clone(),
                    executor.clone(),
                    localizer.clone(),
                    done_tx.clone(),
                );
                let cpu = cfg.worker_cpu;
                let failed_id = order.id;
                let r = std::thread::Builder::new()
                    .name(format!("hp-launch-{workers}"))
                    .spawn(move || {
                        if let Some(c) = cpu {
                            let _ = hw::PinPolicy::BestEffort.pin_current_thread(c);
                        }
                        let id = order.id;
                        let stamps = Stages {
                            stamps,
                            dequeued,
                            worker: Instant::now(),
                        };
                        let out = match launch_one(&order, &stamps, &sh, &cfg, &ex, &loc) {
                            Ok(pair) => Worker::Spawned(id, Box::new(pair)),
                            Err((status, diag)) => {
                                // It never ran and is reported now: a restart must not
                                // report it again.
                                if let Ok(p) = ex.paths(&order.user, id) {
                                    let _ = std::fs::remove_file(p.private_dir.join(RECORD_FILE));
                                }
                                Worker::Failed(id, status, diag)
                            }
                        };
                        let _ = tx.send(out);
                    });
                if let Err(e) = r {
                    let class = launch::ExitClass::launch_failed(&format!("no launch thread: {e}"));
                    complete(
                        shared,
                        &failed_id,
                        class.exit_status,
                        &class.diagnostics_at(wall_ms()),
                    );
                }
            }
            Ok(LaunchCommand::Kill(id, reason)) => {
                if let Some(l) = live.get_mut(&id) {
                    l.rc.kill(reason);
                }
                // Not live yet: the worker sees the kill before it spawns.
            }
            Ok(LaunchCommand::Signal(id, sig)) => match live.get_mut(&id) {
                Some(l) => signal_live(shared, &id, &mut l.rc, sig),
                // Java's ContainersLauncher: no ContainerLaunch running.
                None => tracing::info!("Container {id} not running, nothing to signal."),
            },
            Ok(LaunchCommand::AppFinished(app)) => finished_apps.push(app),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            // Every handle is gone (the agent is shutting down): keep watching the live
            // containers at the same pace until the stop flag ends the loop.
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        while let Ok(w) = done_rx.try_recv() {
            match w {
                Worker::Spawned(id, pair) => {
                    let (mut rc, paths) = *pair;
                    let kill = {
                        let mut cm = lock(&shared.cm);
                        cm.launched(&id);
                        cm.kill_reason(&id)
                    };
                    if let Some(k) = kill {
                        rc.kill(k);
                    }
                    live.insert(id, Live { rc, paths });
                }
                Worker::Failed(id, status, diag) => complete(shared, &id, status, &diag),
            }
        }
        let mut ended = Vec::new();
        for (id, l) in live.iter_mut() {
            if let Some(exit) = l.rc.poll() {
                ended.push((*id, exit));
            }
        }
        for (id, exit) in ended {
            let Some(l) = live.remove(&id) else { continue };
            // The executor classified the exit with the kill it carried out (the reason's
            // status wins over 143/137) and the prelaunch.err / stderr tails.
            complete(shared, &id, exit.exit_status(), &exit.diagnostics());
            // Java deletes the container's work dirs at completion; its logs stay.
            for d in &l.paths.container_dirs {
                let _ = std::fs::remove_dir_all(d);
            }
        }
        // Applications whose containers are all done: their dirs and caches go.
        finished_apps.retain(|app| {
            let busy = live.keys().any(|c| c.app == *app)
                || lock(&shared.cm)
                    .managed()
                    .any(|(c, st)| c.app == *app && st != nm_core::container_manager::Stage::Done);
            if busy {
                return true;
            }
            // Java's APPLICATION_STOP to the aux services, in the same step as the
            // application's resources: the shuffle stops serving its map outputs.
            if let Some(jobs) = &cfg.shuffle_jobs {
                jobs.stop_application(*app);
            }
            if let Some(user) = users.remove(app) {
                if let Err(e) = localizer.app_finished(&user, app) {
                    tracing::warn!("cleaning up {app}: {e}");
                }
                clean_app(&cfg.dirs, &user, *app);
            }
            false
        });
        if stopping {
            // Java's NodeManager kills its containers when it stops, unless they are to be
            // recovered by the next start.
            if !cfg.nm.recovery {
                let reason = KillReason::Aborted {
                    diagnostics: "Container killed as the NodeManager is shutting down".into(),
                };
                for l in live.values_mut() {
                    l.rc.kill(reason.clone());
                }
                let t0 = Instant::now();
                while !live.is_empty()
                    && t0.elapsed() < cfg.nm.sigkill_delay + Duration::from_secs(2)
                {
                    live.retain(|id, l| match l.rc.poll() {
                        Some(exit) => {
                            complete(shared, id, exit.exit_status(), &exit.diagnostics());
                            false
                        }
                        None => true,
                    });
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            break;
        }
    }
}

fn complete(shared: &Shared, id: &ContainerId, status: i32, diag: &str) {
    let fresh = {
        let mut cm = lock(&shared.cm);
        let mut t = lock(&shared.table);
        cm.exited(id, status, diag, &mut t)
    };
    if fresh {
        // Java's out-of-band heartbeat: the RM hears of the completion now.
        shared.heartbeat_now.request();
    }
}

/// `signalToContainer` for a running container (from the RM's heartbeat or an
/// ApplicationMaster), after Java's `ContainerLaunch.signalContainer`: the signal goes to the
/// process group from the pid file, and the outcome is logged and appended to the container's
/// diagnostics. Nothing is recorded as a kill: the process's exit code is reported as is.
fn signal_live(shared: &Shared, id: &ContainerId, rc: &mut RunningContainer, sig: Signal) {
    tracing::info!("Sending signal {} to container {id}", sig.command_name());
    // Java waits up to the process-kill wait for the pid file; a signal that races the
    // container's first instants is not sent here rather than stall the launcher.
    let Some(pid) = rc.pid() else {
        tracing::info!("Could not get pid for {id}; the signal is not sent");
        return;
    };
    let user = lock(&shared.cm).user(id).unwrap_or("").to_string();
    tracing::info!("Sending signal to pid {pid} as user {user} for container {id}");
    let ok = rc.signal(sig);
    let diag = format!(
        "Sent signal {} ({}) to pid {pid} as user {user} for container {id}, result={}",
        sig.command_name(),
        sig.name(),
        if ok { "success" } else { "failed" }
    );
    tracing::info!("{diag}");
    let _ = lock(&shared.table).add_diagnostics(id, &diag);
}

/// Deletes an application's directories on every local dir (`usercache/<user>/appcache/<app>`,
/// `nmPrivate/<app>`), as Java does when the application finishes on the node.
fn clean_app(dirs: &NmDirs, user: &str, app: AppId) {
    for l in &dirs.local_dirs {
        let _ = std::fs::remove_dir_all(
            l.join("usercache")
                .join(user)
                .join("appcache")
                .join(app.to_string()),
        );
        let _ = std::fs::remove_dir_all(l.join("nmPrivate").join(app.to_string()));
    }
}

/// The diagnostics of a container killed before its process ran: `KillTransition`'s event.
fn killed_entry(k: &KillReason) -> String {
    diagnostics_entry(wall_ms(), &format!("{}\n", k.diagnostics()))
}

/// The stamps of one launch up to its worker thread.
struct Stages {
    stamps: LaunchStamps,
    /// The launcher thread took the start off its channel.
    dequeued: Instant,
    /// The launch worker began.
    worker: Instant,
}

/// One container from accepted start to running process (on a worker thread).
fn launch_one(
    order: &LaunchOrder,
    stages: &Stages,
    shared: &Shared,
    cfg: &LauncherConfig,
    executor: &Executor,
    localizer: &ResourceLocalizer,
) -> Result<(RunningContainer, ContainerPaths), (i32, String)> {
    let id = order.id;
    let killed = || lock(&shared.cm).kill_reason(&id);
    let failed = |e: &dyn std::fmt::Display| {
        let class = launch::ExitClass::launch_failed(&e.to_string());
        (class.exit_status, class.diagnostics_at(wall_ms()))
    };
    // Java's ContainerLaunch refuses when too few dirs are good (DISKS_FAILED, −101).
    if let Some(live) = shared.dirs.get() {
        let v = live.view();
        if !v.healthy {
            return Err((
                exit_status::DISKS_FAILED,
                diagnostics_entry(
                    wall_ms(),
                    &format!("Most of the disks failed. {}\n", v.report),
                ),
            ));
        }
    }
    let paths = executor.paths(&order.user, id).map_err(|e| failed(&e))?;
    let record = ContainerRecord {
        id,
        user: order.user.clone(),
        resource: order.resource,
        priority: order.priority,
        is_am: order.is_am,
        created_ms: wall_ms(),
        token_expiry_ms: order.token_expiry_ms,
    };
    // The record goes to disk before localization (Java stores the container in its state
    // store at the start): an agent killed while this container localizes finds it at its
    // next start and reports it, instead of forgetting an accepted container.
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&paths.private_dir)
        .and_then(|()| std::fs::write(paths.private_dir.join(RECORD_FILE), record.encode()))
        .map_err(|e| failed(&e))?;
    let ctx = &order.context;
    // Localization: a failure leaves the exit status at −1000 with the message as Java's
    // LOCALIZATION_FAILED adds it: `[<time>]<message>\n`.
    let localization_failed = |m: String| {
        (
            exit_status::INVALID,
            diagnostics_entry(wall_ms(), &format!("{m}\n")),
        )
    };
    let t0 = Instant::now();
    let since = |t: Instant| {
        t.saturating_duration_since(stages.stamps.received)
            .as_micros()
    };
    let requests = ResourceRequest::parse_all(&ctx.local_resources)
        .map_err(|e| localization_failed(e.to_string()))?;
    let before = localizer.downloads();
    let resources = localizer
        .localize_with_tokens(&order.user, &id.app, &id, &requests, ctx.tokens.as_deref())
        .map_err(|e| localization_failed(e.diagnostics()))?;
    if let Some(k) = killed() {
        return Err((k.exit_status(), killed_entry(&k)));
    }
    let t_localized = Instant::now();
    let missed = localizer.downloads().saturating_sub(before);
    let files = resources.len() as u64;
    let counters = [
        0,
        0,
        missed,
        files.saturating_sub(missed),
        t0.elapsed().as_millis() as u64,
    ];
    let env = container_env(
        &LaunchEnvInput {
            container_env: ctx
                .environment
                .iter()
                .map(|e| {
                    (
                        e.key.clone().unwrap_or_default(),
                        e.value.clone().unwrap_or_default(),
                    )
                })
                .collect(),
            agent_env: cfg.agent_env.clone(),
            whitelist: cfg.nm.env_whitelist.join(","),
            admin_env: cfg.nm.admin_env.clone(),
            force_path: cfg.nm.force_path.clone().unwrap_or_default(),
            node_host: cfg.node_host.clone(),
            node_port: cfg.node_port,
            http_port: cfg.http_port,
            user: order.user.clone(),
            user_home_dir: cfg.nm.user_home_dir.clone(),
            aux_services: cfg.aux_services.clone(),
            localization_counters: counters,
            java17: cfg.java17,
        },
        &paths,
    );
    let sources: Vec<(PathBuf, Vec<String>)> = resources
        .iter()
        .map(|r| (r.path.clone(), vec![r.link.clone()]))
        .collect();
    let links = resolve_links(&sources, &mut |dir: &Path| {
        std::fs::read_dir(dir)
            .and_then(|rd| {
                rd.map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
                    .collect()
            })
            .map_err(|e| e.to_string())
    })
    .map_err(|e| failed(&e))?;
    let log_dir = paths.log_dir().display().to_string();
    let commands: Vec<String> = ctx
        .command
        .iter()
        .map(|c| expand(c, &log_dir, cfg.java17))
        .collect();
    let script = launch_script(&ScriptInput {
        log_dir: paths.log_dir(),
        env: &env,
        links: &links,
        commands: &commands,
        debug_info: cfg.nm.debug_info,
        setup_by_node: cfg.nm.setup_in_agent,
    });
    // container_tokens is always written (an empty Credentials when the context has none).
    let tokens = match &ctx.tokens {
        Some(t) if !t.is_empty() => t.clone(),
        _ => Credentials::new().write(Format::Writable),
    };
    executor
        .prepare(
            &paths,
            &PrepareInput {
                launch_script: &script,
                tokens: &tokens,
            },
        )
        .map_err(|e| failed(&e))?;
    let t_written = Instant::now();
    if cfg.nm.setup_in_agent {
        // What the script's `ln`, `cp`, `chmod`, `ls` and `find` lines do, after every file
        // of the work dir is written (so the listing shows what Java's would).
        setup::make_links(&paths.work_dir, &links).map_err(|e| failed(&e))?;
        if cfg.nm.debug_info {
            setup::write_debug_info(&paths.work_dir, paths.log_dir(), script.as_bytes())
                .map_err(|e| failed(&e))?;
        }
    }
    let t_set_up = Instant::now();
    if let Some(k) = killed() {
        return Err((k.exit_status(), killed_entry(&k)));
    }
    let limits = Limits {
        memory_bytes: (cfg.nm.pmem_check && order.resource.memory_mb > 0)
            .then(|| order.resource.memory_mb as u64 * 1024 * 1024),
        cpus: Vec::new(),
    };
    let t_prepared = Instant::now();
    let rc = executor
        .spawn(&paths, &env, &limits)
        .map_err(|e| failed(&e))?;
    let t = rc.spawn_timing();
    // One line per launch, each stage in µs since the startContainers call reached the agent
    // (`received_epoch_ns` joins it with the container's own clock).
    tracing::debug!(
        "launch stages {id}: received_epoch_ns={} accepted={} dequeued={} worker={} \
localized={} written={} set_up={} prepared={} cgroup={} spawned={} zygote={}",
        stages.stamps.received_epoch_ns,
        since(stages.stamps.accepted),
        since(stages.dequeued),
        since(stages.worker),
        since(t_localized),
        since(t_written),
        since(t_set_up),
        since(t_prepared),
        since(t.cgroup_ready),
        since(t.exec_done),
        u8::from(rc.from_zygote()),
    );
    Ok((rc, paths))
}

/// The containers a previous run of the agent left on this node (their records under
/// `<local-dir>/nmPrivate/<app>/<container>/`), found before the first registration so that
/// it reports them.
///
/// - `yarn.nodemanager.recovery.enabled`: each is **recovered**: a live process is managed
///   again (RUNNING, watched through `/proc` and its exit-code file, killable and stoppable),
///   an exited one is reported COMPLETE with its exit code.
/// - Otherwise each live one is **reported lost**: its process group is killed, and the
///   container is reported COMPLETE with ABORTED (−100) in the registration, so the RM does not
///   wait for the liveness expiry; one that exited meanwhile reports its exit code (Java's NodeManager without recovery kills its containers when it
///   stops; one killed −9 cannot, so its successor does).
///
/// Records that cannot be read are logged and skipped.
pub fn recover(
    shared: &Shared,
    executor: &Executor,
    dirs: &NmDirs,
    enabled: bool,
) -> Vec<(ContainerId, ContainerPaths, RunningContainer)> {
    let mut out = Vec::new();
    for (chosen, local) in dirs.local_dirs.iter().enumerate() {
        let Ok(apps) = std::fs::read_dir(local.join("nmPrivate")) else {
            continue;
        };
        for app in apps.flatten() {
            let Ok(containers) = std::fs::read_dir(app.path()) else {
                continue;
            };
            for c in containers.flatten() {
                let file = c.path().join(RECORD_FILE);
                let Ok(bytes) = std::fs::read(&file) else {
                    continue;
                };
                let rec = match ContainerRecord::decode(&bytes) {
                    Ok(r) => r,
                    Err(e) => {
                        tracing::warn!("{}: {e}; not recovered", file.display());
                        continue;
                    }
                };
                // the dir it was found on: its launch may have seen fewer good dirs
                let Ok(paths) = executor.paths_on(&rec.user, rec.id, chosen) else {
                    continue;
                };
                if paths.private_dir != c.path() {
                    // Another local-dir layout than the one that wrote it.
                    continue;
                }
                if let Some(rc) = recover_one(shared, executor, &rec, &paths, enabled) {
                    out.push((rec.id, paths, rc));
                }
            }
        }
    }
    let keep = out.iter().map(|(id, _, _)| id.to_string()).collect();
    executor.remove_stale_cgroups(&keep);
    if !out.is_empty() || enabled {
        tracing::info!(
            "recovery ({}): {} container(s) still running",
            if enabled { "enabled" } else { "disabled" },
            out.len()
        );
    }
    out
}

fn recover_one(
    shared: &Shared,
    executor: &Executor,
    rec: &ContainerRecord,
    paths: &ContainerPaths,
    enabled: bool,
) -> Option<RunningContainer> {
    use crate::executor::Recovered;
    let found = executor.recover(paths);
    let mut cm = lock(&shared.cm);
    let mut t = lock(&shared.table);
    if t.launch(rec.id, rec.resource, rec.priority, rec.created_ms, true)
        .is_err()
    {
        return None;
    }
    match (found, enabled) {
        (Recovered::Running { pid }, true) => {
            cm.recover(rec.id, &rec.user, true);
            tracing::info!("recovered {} (pid {pid}, still running)", rec.id);
            Some(executor.watch(paths, pid))
        }
        (Recovered::Exited { code }, _) => {
            // It ended while the agent was away: its exit code is known either way.
            cm.recover(rec.id, &rec.user, false);
            let class = launch::classify_exit(code, None);
            let _ = t.complete(&rec.id, class.exit_status, &class.diagnostics_at(wall_ms()));
            executor.remove_cgroup(paths);
            None
        }
        (found, _) => {
            cm.recover(rec.id, &rec.user, false);
            if let Recovered::Running { pid } = found {
                // Not recovered: the orphaned process group goes.
                let mut rc = executor.watch(paths, pid);
                rc.kill(KillReason::Aborted {
                    diagnostics: String::new(),
                });
                let t0 = Instant::now();
                while rc.poll().is_none() && t0.elapsed() < Duration::from_secs(3) {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            let diagnostics = if enabled {
                // Accepted, but its process never started (the agent stopped while it
                // localized): reported to its AM through the RM as aborted, not forgotten.
                format!(
                    "Container {} did not survive the NodeManager's restart: it had not started (it was localizing), or it ended without an exit code",
                    rec.id
                )
            } else {
                format!(
                    "Container {} was lost when the NodeManager restarted (yarn.nodemanager.recovery.enabled is false)",
                    rec.id
                )
            };
            let _ = t.complete(&rec.id, exit_status::ABORTED, &diagnostics);
            executor.remove_pid_files(paths);
            executor.remove_cgroup(paths);
            None
        }
    }
}
