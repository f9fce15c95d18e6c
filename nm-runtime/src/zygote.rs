//! Ready container processes ("zygotes"): the fork, the cgroup `mkdir`s and the join of the
//! cgroups done before a container is asked for, so a launch only hands a process its work.
//!
//! Why: on cgroup v1 a write into `cgroup.procs` takes the kernel's cgroup threadgroup lock for
//! writing, which waits for an RCU grace period whenever no other attach happened in the last
//! one (0.3–20 ms on a loaded VM, measured), and holds `cgroup_mutex` meanwhile, so every
//! `mkdir`/`rmdir` of a cgroup queues behind it. A container must be in its cgroups before its
//! first instruction, so that wait sat between `fork` and `exec` of every launch.
//!
//! A zygote is made by the pool's thread exactly as [`crate::executor::Executor::spawn`] makes
//! a container: a new cgroup per controller (no memory limit yet), a fork that starts its own
//! session, joins those cgroups, takes the work CPUs' affinity and execs `/bin/bash -c`
//! [`SCRIPT`], which waits on its stdin. A launch takes one, sets the container's memory limit
//! on its cgroup (or `RLIMIT_DATA` with `prlimit` when there is no memory cgroup), writes three
//! lines (work dir, script, output file, how to run it) into the pipe, and the zygote redirects
//! its output, changes to the work dir and runs the script (`exec /bin/bash <script>`, or `.`
//! for the launch script, see [`SCRIPT`]): the same process, session, cgroups
//! and limits a fresh spawn gives, minus the wait. The cgroup dirs are then renamed after the
//! container, so they look (and are recovered) as a fresh spawn's. cgroup v1 only (and without
//! cgroups): v2 cannot rename a cgroup, and has `clone3(CLONE_INTO_CGROUP)` for the attach.
//!
//! The container's environment is the agent's plus what the launch script exports (every NM
//! and launch-context variable; whitelisted ones keep the agent's value), which is what the
//! launch script's shell has on a fresh spawn too once its exports ran.
//!
//! The same thread removes finished containers' cgroups ([`Reaper::discard`]), so no
//! launch or completion waits behind an `rmdir` either. Zygotes left by an agent killed −9 see
//! their pipe close and exit; their empty cgroups are removed when the next agent starts, in the
//! same walk as containers' stale cgroups ([`Cgroups::remove_stale_containers`]).

use std::collections::VecDeque;
use std::ffi::CString;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::cgroups::{Cgroups, ContainerCgroup, ZYGOTE_PREFIX};

/// What a zygote runs: wait for the four lines, then become the container's first process.
/// The go pipe is closed by the redirection of stdin; EOF (the agent went away) exits 0.
///
/// [`Run::Source`] runs the script in the zygote's own shell (`. script`) instead of a new
/// `bash`: the launch script ends in `exec /bin/bash -c <command>`, so the process, its pid
/// file and its exit are the same, minus one `execve` of bash and its start-up (25 ms against
/// 30–35 ms for a minimal launch script with its command under load, 100 runs each). The
/// wrapped chain keeps `exec /bin/bash <default_container_executor.sh>`: a restarted agent
/// finds the wrapper by that script's name in its command line.
pub const SCRIPT: &str =
    "IFS= read -r w && IFS= read -r s && IFS= read -r o && IFS= read -r m || exit 0\n\
exec 0</dev/null 1>\"$o\" 2>&1\n\
cd -- \"$w\" || exit 1\n\
if [ \"$m\" = source ]; then . \"$s\"; exit $?; fi\n\
exec /bin/bash \"$s\"\n";

/// How a zygote runs its script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Run {
    /// `exec /bin/bash <script>`.
    Exec,
    /// `. <script>` in the zygote's shell (for a script that ends in `exec`).
    Source,
}

/// One ready process.
#[derive(Debug)]
pub struct Zygote {
    pub child: Child,
    go: ChildStdin,
    pub cgroup: Option<ContainerCgroup>,
}

impl Zygote {
    /// Sends the process its work: it runs `script` as `run` says in `work_dir` with stdout and
    /// stderr on `out`. Paths with a newline cannot be sent (the caller spawns afresh).
    pub fn go(&mut self, work_dir: &str, script: &str, out: &str, run: Run) -> std::io::Result<()> {
        if [work_dir, script, out].iter().any(|s| s.contains('\n')) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "a path with a newline",
            ));
        }
        let how = match run {
            Run::Exec => "exec",
            Run::Source => "source",
        };
        let msg = format!("{work_dir}\n{script}\n{out}\n{how}\n");
        self.go.write_all(msg.as_bytes())
    }

    /// Kills an unused zygote and reaps it; its cgroup is returned for removal.
    fn end(mut self) -> Option<ContainerCgroup> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.cgroup
    }
}

/// How zygotes are made (the executor's settings).
#[derive(Debug, Clone)]
pub struct ZygoteSpec {
    pub cgroups: Option<Cgroups>,
    /// The work CPUs (`cpuset.cpus` and the affinity).
    pub cpus: Vec<u32>,
    /// How many to keep ready.
    pub ready: usize,
}

#[derive(Debug, Default)]
struct State {
    ready: VecDeque<Zygote>,
    /// Cgroups to remove, with the first time each was tried.
    doomed: Vec<(ContainerCgroup, Option<Instant>)>,
    stop: bool,
    /// Cgroups taken off `doomed` and being removed now.
    removing: usize,
}

#[derive(Debug)]
struct Inner {
    state: Mutex<State>,
    cv: Condvar,
    spec: ZygoteSpec,
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The pool and its thread. Dropping it kills the unused zygotes and removes their cgroups.
#[derive(Debug)]
pub struct ZygotePool {
    inner: Arc<Inner>,
    thread: Option<JoinHandle<()>>,
}

/// How long a finished container's cgroup removal is retried (its processes may take a moment
/// to exit after the SIGKILL).
const REMOVE_RETRY_FOR: Duration = Duration::from_secs(30);

impl ZygotePool {
    /// Starts the pool's thread (pinned like the launch workers, to `worker_cpu` if given).
    /// The empty pool cgroups of agents that are gone are removed by the agent's start-up
    /// sweep of stale cgroups ([`Cgroups::remove_stale_containers`]), not here.
    pub fn start(spec: ZygoteSpec, worker_cpu: Option<u32>) -> std::io::Result<ZygotePool> {
        let inner = Arc::new(Inner {
            state: Mutex::new(State::default()),
            cv: Condvar::new(),
            spec,
        });
        let i = inner.clone();
        let thread = std::thread::Builder::new()
            .name("hp-zygotes".into())
            .spawn(move || {
                if let Some(c) = worker_cpu {
                    let _ = hw::PinPolicy::BestEffort.pin_current_thread(c);
                }
                run(&i)
            })?;
        Ok(ZygotePool {
            inner,
            thread: Some(thread),
        })
    }

    /// A ready zygote, if there is one (the thread makes the next).
    pub fn take(&self) -> Option<Zygote> {
        let z = lock(&self.inner.state).ready.pop_front();
        self.inner.cv.notify_one();
        z
    }

    /// A handle that hands finished containers' cgroups to the pool's thread.
    pub fn reaper(&self) -> Reaper {
        Reaper {
            inner: self.inner.clone(),
        }
    }

    /// Zygotes ready now.
    pub fn ready(&self) -> usize {
        lock(&self.inner.state).ready.len()
    }

    /// Whether every discarded cgroup has been removed (or given up on).
    pub fn idle(&self) -> bool {
        let st = lock(&self.inner.state);
        st.doomed.is_empty() && st.removing == 0
    }
}

/// Hands finished containers' cgroups to the pool's thread for removal.
#[derive(Debug, Clone)]
pub struct Reaper {
    inner: Arc<Inner>,
}

impl Reaper {
    /// Removes `cg` on the pool's thread (here if the pool has stopped).
    pub fn discard(&self, cg: ContainerCgroup) {
        let mut st = lock(&self.inner.state);
        if st.stop {
            drop(st);
            cg.remove();
            return;
        }
        st.doomed.push((cg, None));
        drop(st);
        self.inner.cv.notify_one();
    }
}

impl Drop for ZygotePool {
    fn drop(&mut self) {
        lock(&self.inner.state).stop = true;
        self.inner.cv.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let mut st = lock(&self.inner.state);
        let zs: Vec<Zygote> = st.ready.drain(..).collect();
        let doomed: Vec<ContainerCgroup> = st.doomed.drain(..).map(|(c, _)| c).collect();
        drop(st);
        for z in zs {
            if let Some(cg) = z.end() {
                cg.remove();
            }
        }
        for cg in doomed {
            cg.remove();
        }
    }
}

/// Numbers the pool cgroups of every pool in this process (tests run several at once).
static MADE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn run(inner: &Inner) {
    // `zygote-<pid>-<nonce>-<n>`: the nonce keeps a later process with a reused pid off the
    // names an earlier one may have left.
    let pid = std::process::id();
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let mut failures = 0u32;
    loop {
        let (doomed, want) = {
            let mut st = lock(&inner.state);
            loop {
                if st.stop {
                    return;
                }
                let due = st
                    .doomed
                    .iter()
                    .any(|(_, t)| t.is_none_or(|t| t.elapsed() >= Duration::from_millis(100)));
                if due || st.ready.len() < inner.spec.ready {
                    break;
                }
                let wait = if st.doomed.is_empty() {
                    Duration::from_secs(3600)
                } else {
                    Duration::from_millis(100)
                };
                st = inner
                    .cv
                    .wait_timeout(st, wait)
                    .map(|(g, _)| g)
                    .unwrap_or_else(|p| p.into_inner().0);
            }
            let doomed = std::mem::take(&mut st.doomed);
            st.removing = doomed.len();
            let want = st.ready.len() < inner.spec.ready;
            (
                doomed,
                want.then(|| MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed)),
            )
        };
        // Removals first: they are what other cgroup operations queue behind.
        let mut again = Vec::new();
        for (cg, first) in doomed {
            if !cg.remove() {
                let first = first.unwrap_or_else(Instant::now);
                if first.elapsed() < REMOVE_RETRY_FOR {
                    again.push((cg, Some(first)));
                } else {
                    tracing::warn!("cgroup {:?} still has processes; left in place", cg.dirs());
                }
            }
        }
        {
            let mut st = lock(&inner.state);
            st.doomed.extend(again);
            st.removing = 0;
        }
        let Some(n) = want else { continue };
        match make(&inner.spec, &format!("{ZYGOTE_PREFIX}{pid}-{nonce}-{n}")) {
            Ok(z) => {
                failures = 0;
                let mut st = lock(&inner.state);
                if st.stop {
                    drop(st);
                    if let Some(cg) = z.end() {
                        cg.remove();
                    }
                    return;
                }
                st.ready.push_back(z);
            }
            Err(e) => {
                failures += 1;
                if failures == 1 {
                    tracing::warn!("making a ready container process: {e}");
                }
                // Launches spawn afresh meanwhile.
                let st = lock(&inner.state);
                let _ = inner
                    .cv
                    .wait_timeout(st, Duration::from_millis(200 * u64::from(failures.min(25))));
            }
        }
    }
}

/// One zygote: its cgroup (no memory limit), then the process in it.
fn make(spec: &ZygoteSpec, name: &str) -> Result<Zygote, String> {
    let cpus = crate::sys::cpu_list(&spec.cpus);
    let set = crate::sys::cpu_set(&spec.cpus).map_err(|e| e.to_string())?;
    let cgroup = match &spec.cgroups {
        Some(cg) => Some(cg.create(name, None, &cpus).map_err(|e| e.to_string())?),
        None => None,
    };
    let procs: Vec<CString> = match &cgroup {
        Some(c) => c.procs_files().map_err(|e| e.to_string())?,
        None => Vec::new(),
    };
    let mut cmd = Command::new("/bin/bash");
    cmd.arg("-c")
        .arg(SCRIPT)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: only async-signal-safe calls on data made before the fork; no allocation (see
    // `child_setup`).
    unsafe {
        cmd.pre_exec(move || crate::sys::child_setup(&procs, &set, None));
    }
    match cmd.spawn() {
        Ok(mut child) => {
            let go = child.stdin.take().ok_or("no stdin pipe")?;
            Ok(Zygote { child, go, cgroup })
        }
        Err(e) => {
            if let Some(c) = &cgroup {
                c.remove();
            }
            Err(format!("spawning: {e}"))
        }
    }
}
