//! The container executor: the I/O half of `nm_core::launch`, as Java's
//! `DefaultContainerExecutor` runs a container, plus CPU placement and memory enforcement.
//!
//! How the pieces connect:
//!
//! ```text
//!  Executor::new(ExecutorConfig) ── probes cgroups once (cgroups::Cgroups), logs one line
//!     │ prepare(paths, PrepareInput)   dirs with Java's modes, launch_container.sh (nmPrivate
//!     │                                and work dir), <cid>.tokens + container_tokens, and for
//!     │                                the wrapped chain the two wrapper scripts (0700)
//!     │ spawn(paths, env, Limits) ──> RunningContainer (our child: the wrapper, or the container)
//!     │ recover(paths) ──> Recovered::{Running{pid}, Exited{code}, Lost}
//!     │ watch(paths, pid) ──> RunningContainer (not our child: /proc and the exit-code file)
//!     v
//!  RunningContainer: poll() (never blocks) ─> Option<ExitInfo>; kill(reason); signal(sig)
//! ```
//!
//! Two process chains ([`Chain`]):
//! - **Wrapped**, Java's, used when containers must outlive the agent
//!   (`yarn.nodemanager.recovery.enabled`): `bash default_container_executor.sh` (our child, the
//!   *wrapper*; it records the exit code) runs `default_container_executor_session.sh`, which
//!   writes its pid into `<cid>.pid` and execs `setsid bash launch_container.sh`: the pid in
//!   the file leads the container's session and process group, and kills go to that group
//!   (`kill(-pgid)`). Between fork and exec the wrapper starts its own session too (so the
//!   agent's terminal or process group signals do not reach it and a restarted agent finds it
//!   still writing the exit code), joins the container's cgroups, and is pinned to the work
//!   CPUs.
//! - **Direct**, without recovery (Hadoop's default): nothing has to write the exit code for a
//!   later agent, so the wrapper, the session script, its `mv` and `setsid` (four of the nine
//!   processes a container of `true` costs) go. Our child starts its session, joins the cgroups
//!   and is pinned between fork and exec, then execs `bash launch_container.sh`; the agent
//!   writes `<cid>.pid` (the child's pid, leader of the session and group) and, when it reaps
//!   the child, `<cid>.exitcode`. Kills, exit codes (128 + signal) and files are the same.
//!
//! The wrapper's (or, direct, the launch script's) own stdout and stderr (bash errors before the launch script redirects to
//! `prelaunch.out`/`prelaunch.err`) go to `<nmPrivate>/<app>/<cid>/executor.out`; a failure's
//! diagnostics quote its tail, as Java quotes the shell output.
//!
//! Memory: with a memory cgroup the kernel enforces the limit and its OOM killer acts; the
//! executor sees the cgroup's `oom_kill` count rise, kills the whole container and reports
//! KILLED_EXCEEDED_PMEM (−104). Without one, `RLIMIT_DATA` bounds each process's data (its
//! allocations fail; there is no −104 then). CPUs: the cpuset cgroup, and in every mode
//! `sched_setaffinity` in the child, which also resets an affinity inherited from a pinned
//! agent thread.
//!
//! Dropping a [`RunningContainer`] does not kill the container (a restarted agent recovers
//! it); call [`RunningContainer::kill`] and poll until it reports the exit.

use std::ffi::CString;
use std::fs;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use nm_core::ids::ContainerId;
use nm_core::launch::{
    self, classify_exit, error_file_diagnostics, is_stderr_name, pmem_diagnostics,
    stderr_diagnostics, ContainerPaths, EnvEntry, EnvKind, ExitClass, ExitKind, KillReason, NmDirs,
    DEFAULT_TAIL_BYTES, PRELAUNCH_ERR,
};

pub use crate::cgroups::CgroupMode;
use crate::cgroups::{CgroupError, Cgroups, ContainerCgroup};
use crate::sys::{child_setup, cpu_list, cpu_set, wall_ms, CpuSetError};
use crate::zygote::{Reaper, Run, Zygote, ZygotePool, ZygoteSpec};

/// `yarn.nodemanager.sleep-delay-before-sigkill.ms` default.
pub const DEFAULT_SIGKILL_DELAY: Duration = Duration::from_millis(250);
/// `yarn.nodemanager.process-kill-wait.ms` default.
pub const DEFAULT_PROCESS_KILL_WAIT: Duration = Duration::from_millis(5000);
/// `yarn.nodemanager.container-executor.exit-code-file.timeout-ms` default.
pub const EXIT_CODE_FILE_TIMEOUT: Duration = Duration::from_millis(2000);
/// Java's `ExitCode.LOST`: a recovered container whose exit code cannot be found.
pub const LOST: i32 = 154;
/// The wrapper's own output, in the container's nmPrivate dir.
pub const EXECUTOR_OUT: &str = "executor.out";

/// How a container's processes are started (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chain {
    /// Java's wrapper scripts: the exit code is written by a process that outlives the agent.
    Wrapped,
    /// The launch script is our child; the agent writes the pid and exit-code files.
    Direct,
}

/// What the executor needs.
#[derive(Debug, Clone)]
pub struct ExecutorConfig {
    /// The process chain.
    pub chain: Chain,
    /// The good local and log dirs.
    pub dirs: NmDirs,
    /// The CPUs containers run on ([`work_cpus`]).
    pub cpus: Vec<u32>,
    pub cgroups: CgroupMode,
    /// `yarn.nodemanager.sleep-delay-before-sigkill.ms`.
    pub sigkill_delay: Duration,
    /// `yarn.nodemanager.process-kill-wait.ms`.
    pub process_kill_wait: Duration,
    /// The cgroup hierarchy name under the agent's own cgroup.
    pub hierarchy: String,
    /// Container processes kept ready (forked, in their cgroups; see `zygote`); 0: every
    /// launch forks.
    pub zygotes: usize,
    /// Where the zygote pool's thread runs (the housekeeping CPU).
    pub helper_cpu: Option<u32>,
    /// The dirs as the disk checks leave them: a new container's paths use the good ones
    /// (`None`: always `dirs`).
    pub live_dirs: Option<std::sync::Arc<crate::disks::LiveDirs>>,
}

impl ExecutorConfig {
    /// Defaults for everything but the dirs and CPUs.
    pub fn new(dirs: NmDirs, cpus: Vec<u32>) -> ExecutorConfig {
        ExecutorConfig {
            chain: Chain::Wrapped,
            dirs,
            cpus,
            cgroups: CgroupMode::Auto,
            sigkill_delay: DEFAULT_SIGKILL_DELAY,
            process_kill_wait: DEFAULT_PROCESS_KILL_WAIT,
            hierarchy: "hotpath".to_string(),
            zygotes: 0,
            helper_cpu: None,
            live_dirs: None,
        }
    }
}

/// What the executor refuses or fails at.
#[derive(Debug, thiserror::Error)]
pub enum ExecutorError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(transparent)]
    Cgroup(#[from] CgroupError),
    #[error(transparent)]
    Launch(#[from] launch::LaunchError),
    #[error("spawning the container: {0}")]
    Spawn(#[source] io::Error),
    #[error(transparent)]
    CpuSet(#[from] CpuSetError),
}

fn io_at(path: &Path) -> impl FnOnce(io::Error) -> ExecutorError + '_ {
    move |source| ExecutorError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The CPUs containers run on for `plan`: its free CPUs, or (logged) the housekeeping CPU when
/// it leaves none; never a ring's CPU unless the machine has a single CPU.
pub fn work_cpus(plan: &hw::Plan) -> Vec<u32> {
    let (cpus, fallback) = plan.work_cpus();
    if fallback {
        tracing::info!(
            "no CPU is free of agent threads; containers share the housekeeping CPU(s) {}",
            cpu_list(&cpus)
        );
    }
    cpus
}

/// Resource limits of one container.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Limits {
    /// Physical memory limit; `None`: unlimited.
    pub memory_bytes: Option<u64>,
    /// CPUs (a subset of the work CPUs); empty: all work CPUs.
    pub cpus: Vec<u32>,
}

/// The files [`Executor::prepare`] writes.
#[derive(Debug, Clone, Copy)]
pub struct PrepareInput<'a> {
    /// `launch_container.sh` ([`launch::launch_script`]).
    pub launch_script: &'a str,
    /// The container's credentials, Hadoop's token storage format (`HDTS`, possibly empty of
    /// tokens but never zero bytes; trap 12).
    pub tokens: &'a [u8],
}

/// What a restarted agent finds of a container (from its pid and exit-code files).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recovered {
    /// The process recorded in the pid file still runs.
    Running { pid: i32 },
    /// The exit-code file holds its code.
    Exited { code: i32 },
    /// Neither: no pid file, or a dead process without an exit code.
    Lost,
}

/// How a container ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExitInfo {
    /// The process's exit code (128 + signal when signalled; [`LOST`] when unknown).
    pub exit_code: i32,
    /// Exit status and diagnostics ([`classify_exit`] plus the error-file tails).
    pub class: ExitClass,
    /// The kill the executor carried out, if any.
    pub kill_reason: Option<KillReason>,
}

impl ExitInfo {
    /// What to report as `exit_status`.
    pub fn exit_status(&self) -> i32 {
        self.class.exit_status
    }

    /// What to report as diagnostics, stamped now as Java 3.5 stamps each event.
    pub fn diagnostics(&self) -> String {
        self.class.diagnostics_at(wall_ms())
    }
}

/// A signal for `signalToContainer` (the container manager's translation of the command).
pub use nm_core::container_manager::Signal;

/// Runs containers: see the module docs.
#[derive(Debug)]
pub struct Executor {
    cfg: ExecutorConfig,
    cgroups: Option<Cgroups>,
    setsid: bool,
    pool: Option<ZygotePool>,
}

fn setsid_available() -> bool {
    ["/usr/bin/setsid", "/bin/setsid", "/usr/sbin/setsid"]
        .iter()
        .any(|p| Path::new(p).exists())
}

impl Executor {
    /// An executor for `cfg`; probes cgroups (in [`CgroupMode::Auto`]) and logs one line saying
    /// how containers are confined.
    pub fn new(cfg: ExecutorConfig) -> Executor {
        let cgroups = match cfg.cgroups {
            CgroupMode::Off => {
                tracing::info!(
                    "containers: cgroups off; CPUs {} by sched_setaffinity, memory by RLIMIT_DATA",
                    cpu_list(&cfg.cpus)
                );
                None
            }
            CgroupMode::Auto => match Cgroups::probe(&cfg.hierarchy) {
                Ok(c) => {
                    tracing::info!(
                        "containers: {}; CPUs {}{}{}",
                        c.describe(),
                        cpu_list(&cfg.cpus),
                        if c.has_cpuset() {
                            ""
                        } else {
                            " by sched_setaffinity"
                        },
                        if c.has_memory() {
                            ""
                        } else {
                            ", memory by RLIMIT_DATA"
                        }
                    );
                    Some(c)
                }
                Err(why) => {
                    tracing::info!(
                        "containers: no writable cgroup ({why}); CPUs {} by sched_setaffinity, \
memory by RLIMIT_DATA",
                        cpu_list(&cfg.cpus)
                    );
                    None
                }
            },
        };
        // Not on v2: its cgroups cannot be renamed after their container (a restarted agent
        // finds a container's cgroup by its name), and v2's answer to the attach cost is
        // `clone3(CLONE_INTO_CGROUP)` instead.
        let pool = (cfg.zygotes > 0
            && !cfg.cpus.is_empty()
            && cgroups.as_ref().is_none_or(Cgroups::is_v1))
        .then(|| {
            ZygotePool::start(
                ZygoteSpec {
                    cgroups: cgroups.clone(),
                    cpus: cfg.cpus.clone(),
                    ready: cfg.zygotes,
                },
                cfg.helper_cpu,
            )
            .map_err(|e| tracing::warn!("no zygote pool thread ({e}); every launch forks"))
            .ok()
        })
        .flatten();
        Executor {
            cfg,
            cgroups,
            setsid: setsid_available(),
            pool,
        }
    }

    /// Zygotes ready now (0 without a pool).
    pub fn zygotes_ready(&self) -> usize {
        self.pool.as_ref().map_or(0, ZygotePool::ready)
    }

    /// Whether every finished container's cgroup has been removed (always, without a pool;
    /// with one, its thread removes them shortly after the exit).
    pub fn cgroups_removed(&self) -> bool {
        self.pool.as_ref().is_none_or(ZygotePool::idle)
    }

    /// The configuration.
    pub fn config(&self) -> &ExecutorConfig {
        &self.cfg
    }

    /// Whether containers get a memory cgroup (the OOM kill is then detected as −104).
    pub fn has_memory_cgroup(&self) -> bool {
        self.cgroups.as_ref().is_some_and(Cgroups::has_memory)
    }

    /// Whether containers get a cpuset cgroup.
    pub fn has_cpuset_cgroup(&self) -> bool {
        self.cgroups.as_ref().is_some_and(Cgroups::has_cpuset)
    }

    /// Whether `setsid` exists (the session script uses it).
    pub fn setsid(&self) -> bool {
        self.setsid
    }

    /// Paths for a new container over the good dirs (every configured dir without disk
    /// checks): its `LOCAL_DIRS`, `LOG_DIRS`, work dir and private files.
    pub fn paths(&self, user: &str, id: ContainerId) -> Result<ContainerPaths, ExecutorError> {
        match &self.cfg.live_dirs {
            Some(l) => Ok(ContainerPaths::new(&l.good(), user, id)?),
            None => Ok(ContainerPaths::new(&self.cfg.dirs, user, id)?),
        }
    }

    /// Paths of a container written over the configured dirs with its work dir on local dir
    /// `chosen` (a previous run's container: the good dirs of its launch are not known, the
    /// configured ones cover them).
    pub fn paths_on(
        &self,
        user: &str,
        id: ContainerId,
        chosen: usize,
    ) -> Result<ContainerPaths, ExecutorError> {
        Ok(ContainerPaths::with_chosen(
            &self.cfg.dirs,
            user,
            id,
            chosen,
        )?)
    }

    /// Creates the container's dirs with Java's modes (notes 4.1) and writes its files (4.2
    /// steps 4–7): for the wrapped chain also the wrapper scripts ([`launch::executor_scripts`],
    /// with or without `setsid` as this host has it).
    pub fn prepare(
        &self,
        paths: &ContainerPaths,
        input: &PrepareInput<'_>,
    ) -> Result<(), ExecutorError> {
        for d in &paths.user_dirs {
            make_dir(d, 0o750)?;
        }
        for d in paths.appcache_dirs.iter().chain(&paths.filecache_dirs) {
            make_dir(d, 0o710)?;
        }
        for d in paths.app_dirs.iter().chain(&paths.container_dirs) {
            make_dir(d, 0o710)?;
        }
        make_dir(&paths.tmp_dir, 0o710)?;
        for d in paths.app_log_dirs.iter().chain(&paths.log_dirs) {
            make_dir(d, 0o710)?;
        }
        make_dir(&paths.nm_private_root, 0o700)?;
        let app_private = paths
            .private_dir
            .parent()
            .unwrap_or(&paths.private_dir)
            .to_path_buf();
        make_dir(&app_private, 0o700)?;
        make_dir(&paths.private_dir, 0o700)?;
        write_file(
            &paths.private_launch_script,
            input.launch_script.as_bytes(),
            0o640,
        )?;
        write_file(&paths.private_tokens, input.tokens, 0o600)?;
        write_file(&paths.tokens, input.tokens, 0o600)?;
        write_file(&paths.launch_script, input.launch_script.as_bytes(), 0o640)?;
        if self.cfg.chain == Chain::Wrapped {
            let (session, wrapper) = launch::executor_scripts(paths, self.setsid);
            write_file(&paths.session_script, session.as_bytes(), 0o700)?;
            write_file(&paths.executor_script, wrapper.as_bytes(), 0o700)?;
        }
        Ok(())
    }

    /// Starts the container prepared at `paths`: `bash <workdir>/default_container_executor.sh`
    /// (wrapped) or `bash <workdir>/launch_container.sh` (direct) with cwd = the work dir and env = the agent's env plus the container's (its NM and
    /// launch-context variables; whitelisted ones are in the agent's env already), in its
    /// cgroups and on its CPUs before the first instruction of bash.
    pub fn spawn(
        &self,
        paths: &ContainerPaths,
        env: &[EnvEntry],
        limits: &Limits,
    ) -> Result<RunningContainer, ExecutorError> {
        if limits.cpus.is_empty() {
            if let Some(z) = self.pool.as_ref().and_then(ZygotePool::take) {
                match self.start_zygote(z, paths, limits) {
                    Ok(rc) => return Ok(rc),
                    Err(e) => tracing::debug!(
                        "{}: the ready process failed ({e}); spawning afresh",
                        paths.container
                    ),
                }
            }
        }
        let cpus = if limits.cpus.is_empty() {
            self.cfg.cpus.clone()
        } else {
            limits.cpus.clone()
        };
        let set = cpu_set(&cpus)?;
        let name = paths.container.to_string();
        let cgroup = match &self.cgroups {
            Some(cg) => Some(cg.create(&name, limits.memory_bytes, &cpu_list(&cpus))?),
            None => None,
        };
        let procs: Vec<CString> = match &cgroup {
            Some(c) => c.procs_files()?,
            None => Vec::new(),
        };
        let rlimit_data = match &cgroup {
            Some(c) if c.has_memory() => None,
            _ => limits.memory_bytes,
        };

        let out_path = paths.private_dir.join(EXECUTOR_OUT);
        let out = fs::File::create(&out_path).map_err(io_at(&out_path))?;
        let err = out.try_clone().map_err(io_at(&out_path))?;
        let direct = self.cfg.chain == Chain::Direct;
        let mut cmd = Command::new("/bin/bash");
        cmd.arg(if direct {
            &paths.launch_script
        } else {
            &paths.executor_script
        })
        .current_dir(&paths.work_dir)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err);
        for e in env.iter().filter(|e| e.kind != EnvKind::Whitelisted) {
            cmd.env(&e.name, &e.value);
        }
        // The closure runs in the forked child before exec (see `child_setup`).
        // SAFETY: only async-signal-safe calls on data made before the fork; no allocation.
        unsafe {
            cmd.pre_exec(move || child_setup(&procs, &set, rlimit_data));
        }
        let cgroup_ready = Instant::now();
        let child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                if let Some(c) = &cgroup {
                    c.remove();
                }
                return Err(ExecutorError::Spawn(e));
            }
        };
        let timing = SpawnTiming {
            cgroup_ready,
            exec_done: Instant::now(),
        };
        Ok(self.started(paths, child, cgroup, limits, timing))
    }

    /// A zygote becomes the container prepared at `paths` (see `zygote`). On an error the
    /// zygote is gone (killed, its cgroup removed) and the caller spawns afresh.
    fn start_zygote(
        &self,
        mut z: Zygote,
        paths: &ContainerPaths,
        limits: &Limits,
    ) -> Result<RunningContainer, ExecutorError> {
        let fail = |mut z: Zygote, e: ExecutorError| {
            let _ = z.child.kill();
            let _ = z.child.wait();
            if let Some(c) = &z.cgroup {
                c.remove();
            }
            e
        };
        let memory_cgroup = z.cgroup.as_ref().is_some_and(ContainerCgroup::has_memory);
        if let Some(cg) = z.cgroup.as_mut() {
            if let Err(e) = cg.set_memory_limit(limits.memory_bytes) {
                return Err(fail(z, e.into()));
            }
        }
        if let (false, Some(bytes)) = (memory_cgroup, limits.memory_bytes) {
            let lim = libc::rlimit {
                rlim_cur: bytes as libc::rlim_t,
                rlim_max: bytes as libc::rlim_t,
            };
            // SAFETY: prlimit on our own child's pid with a valid rlimit; no old value read.
            let r = unsafe {
                libc::prlimit(
                    z.child.id() as libc::pid_t,
                    libc::RLIMIT_DATA,
                    &lim,
                    std::ptr::null_mut(),
                )
            };
            if r < 0 {
                return Err(fail(z, ExecutorError::Spawn(io::Error::last_os_error())));
            }
        }
        let cgroup_ready = Instant::now();
        let (script, run) = if self.cfg.chain == Chain::Direct {
            (&paths.launch_script, Run::Source)
        } else {
            (&paths.executor_script, Run::Exec)
        };
        let out = paths.private_dir.join(EXECUTOR_OUT);
        let (Some(w), Some(s), Some(o)) = (paths.work_dir.to_str(), script.to_str(), out.to_str())
        else {
            return Err(fail(
                z,
                ExecutorError::Spawn(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "a path that is not UTF-8",
                )),
            ));
        };
        if let Err(e) = z.go(w, s, o, run) {
            return Err(fail(z, ExecutorError::Spawn(e)));
        }
        let exec_done = Instant::now();
        let Zygote { child, cgroup, .. } = z;
        // Named after the container as a fresh spawn's, so a restarted agent finds it.
        let cgroup = cgroup.map(|mut c| {
            if let Err(e) = c.rename(&paths.container.to_string()) {
                tracing::warn!(
                    "{}: {e}; its cgroup keeps the pool's name {:?}",
                    paths.container,
                    c.dirs()
                );
            }
            c
        });
        let mut rc = self.started(
            paths,
            child,
            cgroup,
            limits,
            SpawnTiming {
                cgroup_ready,
                exec_done,
            },
        );
        rc.from_zygote = true;
        Ok(rc)
    }

    /// The running container of a started child (fresh or a zygote).
    fn started(
        &self,
        paths: &ContainerPaths,
        child: Child,
        cgroup: Option<ContainerCgroup>,
        limits: &Limits,
        timing: SpawnTiming,
    ) -> RunningContainer {
        let reaper = self.pool.as_ref().map(ZygotePool::reaper);
        if self.cfg.chain != Chain::Direct {
            let mut rc = RunningContainer::new(
                paths,
                Wrapper::Child(child),
                cgroup,
                limits.memory_bytes,
                &self.cfg,
            );
            rc.spawn_timing = timing;
            rc.reaper = reaper;
            return rc;
        }
        // Direct: the child leads the container's session and group; its pid file is ours to
        // write (atomically, as the session script does with `mv`).
        let pid = child.id() as i32;
        let mut rc = RunningContainer::new(
            paths,
            Wrapper::Direct(child),
            cgroup,
            limits.memory_bytes,
            &self.cfg,
        );
        rc.pgid = Some(pid);
        rc.spawn_timing = timing;
        rc.reaper = reaper;
        if let Err(e) = write_atomic(&paths.pid_file, pid) {
            // Without the pid file a restarted agent could not find the container: do not run
            // one it cannot account for.
            rc.kill(KillReason::Aborted {
                diagnostics: format!("cannot write the pid file: {e}"),
            });
        }
        rc
    }

    /// What the pid and exit-code files say about a container after an agent restart.
    pub fn recover(&self, paths: &ContainerPaths) -> Recovered {
        if let Some(code) = read_int(&paths.exit_code_file) {
            return Recovered::Exited { code };
        }
        match read_int(&paths.pid_file) {
            Some(pid) if pid > 0 && alive_since(pid, &paths.pid_file) => Recovered::Running { pid },
            _ => Recovered::Lost,
        }
    }

    /// Keeps watching a recovered running container (`pid` from [`Recovered::Running`]): not our
    /// child, so its end is seen in `/proc` and its exit code in the exit-code file.
    pub fn watch(&self, paths: &ContainerPaths, pid: i32) -> RunningContainer {
        let cgroup = self
            .cgroups
            .as_ref()
            .map(|c| c.open(&paths.container.to_string()));
        let mut rc = RunningContainer::new(
            paths,
            Wrapper::Recovered {
                dead_since: None,
                wrapper: parent_wrapper(pid),
            },
            cgroup,
            None,
            &self.cfg,
        );
        rc.pgid = Some(pid);
        rc
    }

    /// Removes the cgroup of a container found ended at an agent restart: its leftover
    /// processes are killed (as after any container's exit) and the removal retried for up to
    /// 2 s while they go.
    pub fn remove_cgroup(&self, paths: &ContainerPaths) {
        let Some(c) = &self.cgroups else {
            return;
        };
        let cg = c.open(&paths.container.to_string());
        let t = Instant::now();
        loop {
            if cg.remove() {
                return;
            }
            if t.elapsed() > Duration::from_secs(2) {
                tracing::warn!(
                    "the cgroup of {} keeps processes ({:?}); left in place",
                    paths.container,
                    cg.pids()
                );
                return;
            }
            cg.kill_all();
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// After recovery: removes the empty cgroups of containers this agent does not track
    /// (`keep`, the recovered running ones), created over a minute ago, and those of the
    /// zygote pools of agents that are gone, in one walk. See
    /// [`Cgroups::remove_stale_containers`].
    pub fn remove_stale_cgroups(&self, keep: &std::collections::HashSet<String>) {
        if let Some(c) = &self.cgroups {
            let n = c.remove_stale_containers(keep, Duration::from_secs(60));
            if n > 0 {
                tracing::info!(
                    "removed {n} empty cgroup(s) of containers or zygote pools no agent tracks"
                );
            }
        }
    }

    /// Deletes the pid and exit-code files (Java does after the cleanup of a container).
    pub fn remove_pid_files(&self, paths: &ContainerPaths) {
        let _ = fs::remove_file(&paths.pid_file);
        let _ = fs::remove_file(&paths.exit_code_file);
    }
}

fn make_dir(path: &Path, mode: u32) -> Result<(), ExecutorError> {
    match fs::DirBuilder::new()
        .recursive(true)
        .mode(mode)
        .create(path)
    {
        Ok(()) => {}
        Err(e) => return Err(io_at(path)(e)),
    }
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).map_err(io_at(path))
}

fn write_file(path: &Path, data: &[u8], mode: u32) -> Result<(), ExecutorError> {
    fs::write(path, data).map_err(io_at(path))?;
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).map_err(io_at(path))
}

/// A small integer file (pid, exit code); `None` if missing, too long or not a number.
/// Writes `value` and a newline to `path` through `<path>.tmp` and a rename (as the wrapper
/// scripts do with `mv`), so a reader never sees a partial number.
fn write_atomic(path: &Path, value: i32) -> io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    fs::write(&tmp, format!("{value}\n"))?;
    fs::rename(&tmp, path)
}

fn read_int(path: &Path) -> Option<i32> {
    let mut f = fs::File::open(path).ok()?;
    let mut buf = [0u8; 32];
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(_) => return None,
        }
    }
    std::str::from_utf8(&buf[..n]).ok()?.trim().parse().ok()
}

/// The last `n` bytes of a file (missing → `None`).
fn read_tail(path: &Path, n: usize) -> Option<Vec<u8>> {
    let mut f = fs::File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    let start = len.saturating_sub(n as u64);
    f.seek(SeekFrom::Start(start)).ok()?;
    let mut v = Vec::with_capacity((len - start) as usize);
    f.take(n as u64).read_to_end(&mut v).ok()?;
    Some(v)
}

fn pid_alive(pid: i32) -> bool {
    // SAFETY: kill with signal 0 only checks for existence and permission.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Whether `pid` exists and is not a zombie (`/proc/<pid>/stat` state).
fn running_not_zombie(pid: i32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X']))
    })
}

/// The parent of a recovered container's process when it is its executor wrapper
/// (`bash …/default_container_executor.sh`, which writes the exit-code file), else `None`.
fn parent_wrapper(pid: i32) -> Option<i32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    let ppid: i32 = rest.split_whitespace().nth(1)?.parse().ok()?;
    let cmdline = fs::read(format!("/proc/{ppid}/cmdline")).ok()?;
    let text = String::from_utf8_lossy(&cmdline);
    (ppid > 1 && text.contains(nm_core::launch::EXECUTOR_SCRIPT)).then_some(ppid)
}

fn group_alive(pgid: i32) -> bool {
    pgid > 0 && pid_alive(-pgid)
}

fn signal_group(pgid: i32, sig: i32) -> bool {
    // SAFETY: kill(2) with a negative pid signals a process group; no memory effects.
    pgid > 0 && unsafe { libc::kill(-pgid, sig) } == 0
}

/// Whether `pid` runs and started no later than the pid file was written (a pid reused by a
/// later process fails this). A zombie counts as dead.
fn alive_since(pid: i32, pid_file: &Path) -> bool {
    if !pid_alive(pid) {
        return false;
    }
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return false;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    if fields.first() == Some(&"Z") {
        return false;
    }
    let (Some(start_ticks), Some(btime), Ok(mtime)) = (
        fields.get(19).and_then(|s| s.parse::<u64>().ok()),
        fs::read_to_string("/proc/stat").ok().and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("btime ")?.trim().parse::<u64>().ok())
        }),
        fs::metadata(pid_file).and_then(|m| m.modified()),
    ) else {
        return true;
    };
    // SAFETY: sysconf has no memory effects.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    let started = btime + start_ticks / hz;
    let written = mtime
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    started <= written + 2
}

#[derive(Debug)]
enum Wrapper {
    /// Our child: the wrapper bash.
    Child(Child),
    /// Our child: the container's launch script itself ([`Chain::Direct`]).
    Direct(Child),
    /// A recovered container; `dead_since` is when its process group was first seen gone.
    Recovered {
        dead_since: Option<Instant>,
        /// The wrapper script that will write the exit-code file (the container's parent),
        /// while it is alive: the wait for the file starts only once it is gone.
        wrapper: Option<i32>,
    },
}

#[derive(Debug)]
struct Killing {
    reason: KillReason,
    /// SIGTERM (or SIGKILL with no delay) went to the group.
    sent: bool,
    /// When to send SIGKILL.
    kill_at: Option<Instant>,
    /// Give up waiting for the pid file at this time.
    pid_deadline: Instant,
    /// No pid file appeared in time; the wrapper's group was killed instead.
    no_pid_file: bool,
}

/// When [`Executor::spawn`] passed its stages (for the launch timings).
#[derive(Debug, Clone, Copy)]
pub struct SpawnTiming {
    /// The container's cgroups existed with their limits (or there were none to make).
    pub cgroup_ready: Instant,
    /// `exec` of the container's first process had succeeded (std reports it through its
    /// close-on-exec pipe).
    pub exec_done: Instant,
}

/// A started (or recovered) container. See the module docs.
#[derive(Debug)]
pub struct RunningContainer {
    id: ContainerId,
    pid_file: PathBuf,
    exit_code_file: PathBuf,
    log_dir: PathBuf,
    executor_out: PathBuf,
    wrapper: Wrapper,
    /// The container's process group (the pid in the pid file).
    pgid: Option<i32>,
    cgroup: Option<ContainerCgroup>,
    memory_limit: Option<u64>,
    sigkill_delay: Duration,
    process_kill_wait: Duration,
    killing: Option<Killing>,
    exit: Option<ExitInfo>,
    /// After the exit: SIGKILL leftovers of the group at this time.
    cleanup_at: Option<Instant>,
    cleaned: bool,
    spawn_timing: SpawnTiming,
    /// Removes the cgroup off this thread (the zygote pool's thread), if there is one.
    reaper: Option<Reaper>,
    /// Started from a ready process of the pool.
    from_zygote: bool,
}

impl RunningContainer {
    fn new(
        paths: &ContainerPaths,
        wrapper: Wrapper,
        cgroup: Option<ContainerCgroup>,
        memory_limit: Option<u64>,
        cfg: &ExecutorConfig,
    ) -> RunningContainer {
        RunningContainer {
            id: paths.container,
            pid_file: paths.pid_file.clone(),
            exit_code_file: paths.exit_code_file.clone(),
            log_dir: paths.log_dir().to_path_buf(),
            executor_out: paths.private_dir.join(EXECUTOR_OUT),
            wrapper,
            pgid: None,
            cgroup,
            memory_limit,
            sigkill_delay: cfg.sigkill_delay,
            process_kill_wait: cfg.process_kill_wait,
            killing: None,
            exit: None,
            cleanup_at: None,
            cleaned: false,
            spawn_timing: SpawnTiming {
                cgroup_ready: Instant::now(),
                exec_done: Instant::now(),
            },
            reaper: None,
            from_zygote: false,
        }
    }

    /// Whether a ready process of the zygote pool became this container (else it was forked
    /// at its launch, or recovered).
    pub fn from_zygote(&self) -> bool {
        self.from_zygote
    }

    /// When its spawn passed its stages (a recovered container: when it was found).
    pub fn spawn_timing(&self) -> SpawnTiming {
        self.spawn_timing
    }

    /// The container id.
    pub fn id(&self) -> ContainerId {
        self.id
    }

    /// The wrapper's pid (our child), if this is not a recovered container.
    pub fn wrapper_pid(&self) -> Option<u32> {
        match &self.wrapper {
            Wrapper::Child(c) => Some(c.id()),
            Wrapper::Direct(_) | Wrapper::Recovered { .. } => None,
        }
    }

    /// The container's process group leader (the pid file's content), once written.
    pub fn pid(&mut self) -> Option<i32> {
        if self.pgid.is_none() {
            self.pgid = read_int(&self.pid_file).filter(|&p| p > 0);
        }
        self.pgid
    }

    /// The container's cgroup, if it has one.
    pub fn cgroup(&self) -> Option<&ContainerCgroup> {
        self.cgroup.as_ref()
    }

    /// The exit, once seen.
    pub fn exit(&self) -> Option<&ExitInfo> {
        self.exit.as_ref()
    }

    /// Whether the container exited and its leftovers are gone (processes, cgroup).
    pub fn finished(&self) -> bool {
        self.exit.is_some() && self.cleaned
    }

    /// Kills the container (notes 4.6): SIGTERM to its process group, SIGKILL after the delay
    /// (sent by a later [`poll`](Self::poll)); waits for the pid file up to the process-kill
    /// wait (also in `poll`). The first reason wins. Never blocks.
    pub fn kill(&mut self, reason: KillReason) {
        if self.exit.is_some() || self.killing.is_some() {
            return;
        }
        self.killing = Some(Killing {
            reason,
            sent: false,
            kill_at: None,
            pid_deadline: Instant::now() + self.process_kill_wait,
            no_pid_file: false,
        });
        self.drive(Instant::now());
    }

    /// `signalToContainer`: `sig` to the process group. False if it has no pid yet or has
    /// exited (Java ignores the signal then).
    pub fn signal(&mut self, sig: Signal) -> bool {
        if self.exit.is_some() {
            return false;
        }
        match self.pid() {
            Some(p) => signal_group(p, sig.number()),
            None => false,
        }
    }

    /// Drives kills and cleanup, reaps the wrapper; `Some` once the container has exited (and
    /// on every later call). Never blocks.
    pub fn poll(&mut self) -> Option<ExitInfo> {
        let now = Instant::now();
        if self.exit.is_none() {
            self.check_oom();
            self.drive(now);
            if let Some(code) = self.try_exit(now) {
                self.check_oom();
                self.finish(code, now);
            }
        }
        if self.exit.is_some() && !self.cleaned {
            self.cleanup(now);
        }
        self.exit.clone()
    }

    fn check_oom(&mut self) {
        let Some(cg) = &self.cgroup else { return };
        if cg.oom_kills() == 0
            || self
                .killing
                .as_ref()
                .is_some_and(|k| matches!(k.reason, KillReason::ExceededPmem { .. }))
        {
            return;
        }
        let (limit, peak) = (cg.limit_bytes(), cg.peak_bytes());
        let limit = self.memory_limit.or(limit).unwrap_or(0);
        let usage = peak.unwrap_or(limit);
        let pid = self
            .pid()
            .or_else(|| self.wrapper_pid().map(|p| p as i32))
            .unwrap_or(0);
        let reason = KillReason::ExceededPmem {
            diagnostics: pmem_diagnostics(pid, &self.id, usage, limit),
        };
        match &mut self.killing {
            // The memory kill is what the container died of: it wins over a pending kill.
            Some(k) => k.reason = reason,
            None => self.kill(reason),
        }
    }

    fn drive(&mut self, now: Instant) {
        let pgid = self.pid();
        let wrapper = self.wrapper_pid().map(|p| p as i32);
        let delay = self.sigkill_delay;
        let cgroup = self.cgroup.clone();
        let Some(k) = &mut self.killing else { return };
        match pgid {
            Some(p) if !k.sent => {
                if delay.is_zero() {
                    signal_group(p, libc::SIGKILL);
                } else {
                    signal_group(p, libc::SIGTERM);
                    k.kill_at = Some(now + delay);
                }
                k.sent = true;
            }
            None if !k.sent && now >= k.pid_deadline => {
                // No pid file: the session script never ran; kill the wrapper's group.
                if let Some(w) = wrapper {
                    signal_group(w, libc::SIGKILL);
                }
                if let Some(c) = &cgroup {
                    c.kill_all();
                }
                k.sent = true;
                k.no_pid_file = true;
            }
            _ => {}
        }
        if let (Some(at), Some(p)) = (k.kill_at, pgid) {
            if now >= at {
                if group_alive(p) {
                    signal_group(p, libc::SIGKILL);
                }
                if let Some(c) = &cgroup {
                    c.kill_all();
                }
                k.kill_at = None;
            }
        }
    }

    /// The exit code if the container has ended.
    fn try_exit(&mut self, now: Instant) -> Option<i32> {
        match &mut self.wrapper {
            Wrapper::Child(c) => match c.try_wait() {
                Ok(Some(st)) => Some(st.code().unwrap_or_else(|| 128 + st.signal().unwrap_or(0))),
                Ok(None) => None,
                Err(_) => read_int(&self.exit_code_file).or(Some(LOST)),
            },
            Wrapper::Direct(c) => match c.try_wait() {
                Ok(Some(st)) => {
                    // What the wrapper's `rc=$?` would have recorded.
                    let code = st.code().unwrap_or_else(|| 128 + st.signal().unwrap_or(0));
                    if let Err(e) = write_atomic(&self.exit_code_file, code) {
                        tracing::warn!("{}: {e}", self.exit_code_file.display());
                    }
                    Some(code)
                }
                Ok(None) => None,
                Err(_) => Some(LOST),
            },
            Wrapper::Recovered {
                dead_since,
                wrapper,
            } => {
                if let Some(code) = read_int(&self.exit_code_file) {
                    return Some(code);
                }
                let alive = self.pgid.is_some_and(|p| pid_alive(p) || group_alive(p))
                    || wrapper.is_some_and(running_not_zombie);
                if alive {
                    *dead_since = None;
                    return None;
                }
                let since = *dead_since.get_or_insert(now);
                (now.duration_since(since) >= EXIT_CODE_FILE_TIMEOUT).then_some(LOST)
            }
        }
    }

    fn finish(&mut self, code: i32, now: Instant) {
        let reason = self.killing.as_ref().map(|k| k.reason.clone());
        let mut class = classify_exit(code, reason.as_ref());
        if self.killing.as_ref().is_some_and(|k| k.no_pid_file) {
            // Java's ContainerCleanup sends this as the container's only exit event.
            class.process_lines = "Container terminated before pid file created.".into();
        }
        if class.kind == ExitKind::Failed {
            if code == LOST && matches!(self.wrapper, Wrapper::Recovered { .. }) {
                class
                    .process_lines
                    .push_str("The container's process ended without an exit code file. ");
            }
            self.append_error_files(&mut class);
        }
        self.exit = Some(ExitInfo {
            exit_code: code,
            class,
            kill_reason: reason,
        });
        // Java's cleanup after any exit: whatever is left of the group gets SIGTERM, then
        // SIGKILL after the delay.
        match self.pgid {
            Some(p) if group_alive(p) => {
                signal_group(p, libc::SIGTERM);
                self.cleanup_at = Some(now + self.sigkill_delay);
            }
            _ => self.cleanup_at = Some(now),
        }
    }

    fn append_error_files(&self, class: &mut ExitClass) {
        let n = DEFAULT_TAIL_BYTES;
        if let Some(t) = read_tail(&self.log_dir.join(PRELAUNCH_ERR), n) {
            class
                .process_lines
                .push_str(&error_file_diagnostics(PRELAUNCH_ERR, &t, n));
        }
        // The newest log file matching the stderr pattern.
        let newest = fs::read_dir(&self.log_dir).ok().and_then(|rd| {
            rd.filter_map(Result::ok)
                .filter(|e| is_stderr_name(&e.file_name().to_string_lossy()))
                .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
                .max()
        });
        if let Some((_, p)) = newest {
            if let Some(t) = read_tail(&p, n) {
                let name = p.file_name().map(|f| f.to_string_lossy().into_owned());
                class.process_lines.push_str(&stderr_diagnostics(
                    name.as_deref().unwrap_or("stderr"),
                    &t,
                    n,
                ));
            }
        }
        if let Some(t) = read_tail(&self.executor_out, n) {
            if !t.is_empty() {
                class.process_lines.push_str("Shell output: ");
                class.process_lines.push_str(&String::from_utf8_lossy(&t));
            }
        }
    }

    fn cleanup(&mut self, now: Instant) {
        let Some(at) = self.cleanup_at else { return };
        if now < at {
            return;
        }
        if let Some(p) = self.pgid {
            if group_alive(p) {
                signal_group(p, libc::SIGKILL);
            }
        }
        match &self.cgroup {
            Some(c) => {
                if !c.pids().is_empty() {
                    c.kill_all();
                }
                self.cleaned = match &self.reaper {
                    Some(r) => {
                        r.discard(c.clone());
                        true
                    }
                    None => c.remove(),
                };
            }
            None => self.cleaned = true,
        }
    }
}

impl Drop for RunningContainer {
    /// An exited container's leftovers are killed and its cgroup removed (best effort); a
    /// running one is left running (see the module docs).
    fn drop(&mut self) {
        if self.exit.is_some() && !self.cleaned {
            self.cleanup_at = Some(Instant::now());
            self.cleanup(Instant::now());
        }
    }
}
