//! Container cgroups: a cpuset and a memory limit per container, under the agent's own cgroup.
//!
//! [`Cgroups::probe`] looks once at what the kernel offers and what we may write:
//! - **v1** (separate `cpuset` and `memory` hierarchies): for each controller, the agent's own
//!   cgroup (from `/proc/self/cgroup`, under its mount from `/proc/self/mountinfo`) gets a
//!   child `<name>` (the hierarchy name, `hotpath`), and every container a child of that:
//!   `<mount>/<own>/<name>/<container id>`. Memory: `memory.limit_in_bytes`, and
//!   `memory.memsw.limit_in_bytes` at the same value when swap accounting exists (swap does not
//!   extend the limit), swappiness 0; the kernel's OOM killer acts inside the cgroup and
//!   `memory.oom_control`'s `oom_kill` counts it.
//! - **v2** (unified): `<own>/<name>` with `+memory +cpuset` in its `cgroup.subtree_control`,
//!   containers below it with `memory.max`, `memory.swap.max = 0`, `memory.oom.group = 1`;
//!   `memory.events`' `oom_kill` counts kills. Needs the agent's own cgroup to delegate the
//!   controllers (a cgroup with processes cannot enable them for its children).
//!
//! Nesting under the agent's own cgroup keeps whatever limits the agent itself runs under
//! (a systemd unit, a container) in force for its containers. Each controller is optional: the
//! executor falls back to `sched_setaffinity` / `setrlimit` for one it does not get.
//!
//! The child joins its cgroups itself, between fork and exec ([`ContainerCgroup::procs_files`]
//! are written by the executor's `pre_exec`), so nothing the container runs escapes them.

use std::ffi::CString;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Whether containers get cgroups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupMode {
    /// Use cgroups when the probe finds a writable hierarchy (v1 first, then v2).
    Auto,
    /// Never: affinity and rlimits only.
    Off,
}

/// Name prefix of a zygote pool's cgroups (`zygote-<agent pid>-<nonce>-<n>`, see
/// [`crate::zygote`]); the start-up sweep knows a stale one by it.
pub const ZYGOTE_PREFIX: &str = "zygote-";

/// A cgroup operation that failed.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error("cgroup {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cgroup path {0} contains a NUL byte")]
    Nul(PathBuf),
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> CgroupError + '_ {
    move |source| CgroupError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn write(path: &Path, value: &str) -> Result<(), CgroupError> {
    fs::write(path, value).map_err(io_err(path))
}

fn read(path: &Path) -> Option<String> {
    fs::read_to_string(path).ok()
}

fn mkdir(path: &Path) -> Result<(), CgroupError> {
    match fs::create_dir(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(io_err(path)(e)),
    }
}

/// The cgroup version and the controller dirs in use (each `<own>/<name>`).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Layout {
    V1 {
        memory: Option<PathBuf>,
        cpuset: Option<PathBuf>,
    },
    V2 {
        base: PathBuf,
        memory: bool,
        cpuset: bool,
    },
}

/// The cgroups containers get (the result of one probe).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cgroups {
    layout: Layout,
}

/// One mount from `/proc/self/mountinfo`.
struct Mount {
    root: String,
    point: PathBuf,
    fstype: String,
    superopts: String,
}

fn mounts() -> Vec<Mount> {
    let Some(text) = read(Path::new("/proc/self/mountinfo")) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            let pre: Vec<&str> = pre.split(' ').collect();
            let post: Vec<&str> = post.split(' ').collect();
            Some(Mount {
                root: pre.get(3)?.to_string(),
                point: PathBuf::from(unescape(pre.get(4)?)),
                fstype: post.first()?.to_string(),
                superopts: post.get(2).unwrap_or(&"").to_string(),
            })
        })
        .collect()
}

/// mountinfo escapes spaces and friends as `\ooo`.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(u8::is_ascii_digit) {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `/proc/self/cgroup`: (controllers, path) per hierarchy.
fn own_cgroups() -> Vec<(String, String)> {
    let Some(text) = read(Path::new("/proc/self/cgroup")) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|l| {
            let mut it = l.splitn(3, ':');
            let _id = it.next()?;
            Some((it.next()?.to_string(), it.next()?.to_string()))
        })
        .collect()
}

/// The agent's own cgroup dir in a hierarchy mounted at `m`.
fn own_dir(m: &Mount, path: &str) -> PathBuf {
    let rel = if m.root != "/" {
        path.strip_prefix(m.root.as_str()).unwrap_or(path)
    } else {
        path
    };
    m.point.join(rel.trim_start_matches('/'))
}

fn v1_dir(controller: &str) -> Option<PathBuf> {
    let own = own_cgroups();
    let path = own
        .iter()
        .find(|(c, _)| c.split(',').any(|c| c == controller))?
        .1
        .clone();
    let m = mounts()
        .into_iter()
        .find(|m| m.fstype == "cgroup" && m.superopts.split(',').any(|o| o == controller))?;
    Some(own_dir(&m, &path))
}

/// Creates `<own>/<name>` in a v1 hierarchy and checks that a child can be made below it.
fn probe_v1(controller: &str, name: &str) -> Result<PathBuf, String> {
    let own = v1_dir(controller).ok_or_else(|| format!("no v1 {controller} hierarchy"))?;
    let base = own.join(name);
    mkdir(&base).map_err(|e| e.to_string())?;
    if controller == "cpuset" {
        // A new cpuset starts empty: give the base its parent's CPUs and memory nodes.
        for f in ["cpuset.cpus", "cpuset.mems"] {
            let parent = read(&own.join(f)).unwrap_or_default();
            let current = read(&base.join(f)).unwrap_or_default();
            if current.trim().is_empty() {
                write(&base.join(f), parent.trim()).map_err(|e| e.to_string())?;
            }
        }
    }
    let probe = base.join(format!(".probe-{}", std::process::id()));
    mkdir(&probe).map_err(|e| e.to_string())?;
    fs::remove_dir(&probe).map_err(|e| format!("{}: {e}", probe.display()))?;
    Ok(base)
}

fn probe_v2(name: &str) -> Result<Layout, String> {
    let (_, path) = own_cgroups()
        .into_iter()
        .find(|(c, _)| c.is_empty())
        .ok_or("no v2 hierarchy")?;
    let m = mounts()
        .into_iter()
        .find(|m| m.fstype == "cgroup2")
        .ok_or("no cgroup2 mount")?;
    let own = own_dir(&m, &path);
    let available = read(&own.join("cgroup.controllers")).unwrap_or_default();
    let has = |c: &str| available.split_whitespace().any(|x| x == c);
    if !has("memory") && !has("cpuset") {
        return Err(format!("{}: no memory or cpuset controller", own.display()));
    }
    let mut wanted = Vec::new();
    for c in ["memory", "cpuset"] {
        if has(c) {
            wanted.push(c);
        }
    }
    let enabled = read(&own.join("cgroup.subtree_control")).unwrap_or_default();
    for c in &wanted {
        if !enabled.split_whitespace().any(|x| x == *c) {
            write(&own.join("cgroup.subtree_control"), &format!("+{c}"))
                .map_err(|e| e.to_string())?;
        }
    }
    let base = own.join(name);
    mkdir(&base).map_err(|e| e.to_string())?;
    let line: Vec<String> = wanted.iter().map(|c| format!("+{c}")).collect();
    write(&base.join("cgroup.subtree_control"), &line.join(" ")).map_err(|e| e.to_string())?;
    Ok(Layout::V2 {
        base,
        memory: wanted.contains(&"memory"),
        cpuset: wanted.contains(&"cpuset"),
    })
}

impl Cgroups {
    /// Looks for writable cgroups named `name` under the agent's own: v1 first (memory and
    /// cpuset, each optional), then v2. `Err` says why none can be used.
    pub fn probe(name: &str) -> Result<Cgroups, String> {
        let memory = probe_v1("memory", name);
        let cpuset = probe_v1("cpuset", name);
        if memory.is_ok() || cpuset.is_ok() {
            return Ok(Cgroups {
                layout: Layout::V1 {
                    memory: memory.ok(),
                    cpuset: cpuset.ok(),
                },
            });
        }
        let v1_why = format!(
            "v1: {}; {}",
            memory.err().unwrap_or_default(),
            cpuset.err().unwrap_or_default()
        );
        probe_v2(name)
            .map(|layout| Cgroups { layout })
            .map_err(|v2| format!("{v1_why}; v2: {v2}"))
    }

    /// Whether containers get a memory cgroup (else the executor uses an rlimit).
    pub fn has_memory(&self) -> bool {
        match &self.layout {
            Layout::V1 { memory, .. } => memory.is_some(),
            Layout::V2 { memory, .. } => *memory,
        }
    }

    /// Whether containers get a cpuset (else the executor sets the affinity).
    pub fn has_cpuset(&self) -> bool {
        match &self.layout {
            Layout::V1 { cpuset, .. } => cpuset.is_some(),
            Layout::V2 { cpuset, .. } => *cpuset,
        }
    }

    /// One line for the log: version and dirs.
    pub fn describe(&self) -> String {
        let show = |p: &Option<PathBuf>| {
            p.as_ref()
                .map_or("none".to_string(), |p| p.display().to_string())
        };
        match &self.layout {
            Layout::V1 { memory, cpuset } => format!(
                "cgroup v1 (memory {}, cpuset {})",
                show(memory),
                show(cpuset)
            ),
            Layout::V2 {
                base,
                memory,
                cpuset,
            } => format!(
                "cgroup v2 ({}: memory {memory}, cpuset {cpuset})",
                base.display()
            ),
        }
    }

    /// Whether these are cgroup v1 hierarchies (a v1 cgroup can be renamed).
    pub fn is_v1(&self) -> bool {
        matches!(self.layout, Layout::V1 { .. })
    }

    /// The dirs containers' cgroups are made in (one per v1 hierarchy, one in v2).
    pub fn base_dirs(&self) -> Vec<PathBuf> {
        match &self.layout {
            Layout::V1 { memory, cpuset } => {
                [memory, cpuset].into_iter().flatten().cloned().collect()
            }
            Layout::V2 { base, .. } => vec![base.clone()],
        }
    }

    /// Removes the stale empty cgroups agents left, in one walk of [`Cgroups::base_dirs`]:
    ///
    /// - of containers (`container_…` dirs) that are not in `keep` and were created more than
    ///   `min_age` ago: those of containers that ended while no agent watched them (an agent
    ///   killed −9 whose successor has no record of them); the age guard leaves alone a cgroup
    ///   another agent on this host has just created and not yet filled;
    /// - of zygote pools (`zygote-<pid>-…`, see [`crate::zygote`]) whose agent is no longer
    ///   running.
    ///
    /// A cgroup with processes is refused by the kernel and stays. Returns how many went.
    pub fn remove_stale_containers(
        &self,
        keep: &std::collections::HashSet<String>,
        min_age: std::time::Duration,
    ) -> usize {
        let now = std::time::SystemTime::now();
        let mut removed = 0;
        for base in self.base_dirs() {
            let Ok(rd) = fs::read_dir(&base) else {
                continue;
            };
            for e in rd.flatten() {
                let name = e.file_name();
                let Some(name) = name.to_str() else {
                    continue;
                };
                let stale = if name.starts_with("container_") {
                    !keep.contains(name)
                        && e.metadata()
                            .and_then(|m| m.modified())
                            .is_ok_and(|t| now.duration_since(t).is_ok_and(|a| a >= min_age))
                } else {
                    is_stale_zygote_cgroup(name)
                };
                if stale && fs::remove_dir(e.path()).is_ok() {
                    removed += 1;
                }
            }
        }
        removed
    }

    /// The cgroup of container `name`, without creating it (for a recovered container).
    pub fn open(&self, name: &str) -> ContainerCgroup {
        match &self.layout {
            Layout::V1 { memory, cpuset } => ContainerCgroup {
                memory: memory.as_ref().map(|m| Memory::V1(m.join(name))),
                dirs: [memory, cpuset]
                    .into_iter()
                    .flatten()
                    .map(|b| b.join(name))
                    .collect(),
                v2: false,
                oom_base: 0,
            },
            Layout::V2 { base, memory, .. } => {
                let dir = base.join(name);
                ContainerCgroup {
                    memory: memory.then(|| Memory::V2(dir.clone())),
                    dirs: vec![dir],
                    v2: true,
                    oom_base: 0,
                }
            }
        }
    }

    /// Creates the cgroup of container `name` with a memory limit and CPUs.
    pub fn create(
        &self,
        name: &str,
        memory_bytes: Option<u64>,
        cpus: &str,
    ) -> Result<ContainerCgroup, CgroupError> {
        let mut cg = self.open(name);
        match &self.layout {
            Layout::V1 { memory, cpuset } => {
                if let Some(base) = cpuset {
                    let dir = base.join(name);
                    mkdir(&dir)?;
                    let mems = read(&base.join("cpuset.mems")).unwrap_or_default();
                    write(&dir.join("cpuset.mems"), mems.trim())?;
                    write(&dir.join("cpuset.cpus"), cpus)?;
                }
                if let Some(base) = memory {
                    let dir = base.join(name);
                    mkdir(&dir)?;
                    v1_memory_limit(&dir, memory_bytes)?;
                    // Not every kernel lets a child change it; the memsw limit is what counts.
                    let _ = write(&dir.join("memory.swappiness"), "0");
                }
            }
            Layout::V2 {
                base,
                memory,
                cpuset,
            } => {
                let dir = base.join(name);
                mkdir(&dir)?;
                if *cpuset {
                    write(&dir.join("cpuset.cpus"), cpus)?;
                }
                if *memory {
                    v2_memory_limit(&dir, memory_bytes)?;
                    let swap = dir.join("memory.swap.max");
                    if swap.exists() {
                        write(&swap, "0")?;
                    }
                    write(&dir.join("memory.oom.group"), "1")?;
                }
            }
        }
        cg.oom_base = cg.oom_kills();
        Ok(cg)
    }
}

/// v1: `memory.limit_in_bytes` (and the memsw limit at the same value when swap accounting
/// exists); `None` lifts the limit.
fn v1_memory_limit(dir: &Path, memory_bytes: Option<u64>) -> Result<(), CgroupError> {
    let limit = memory_bytes.map_or("-1".to_string(), |b| b.to_string());
    let memsw = dir.join("memory.memsw.limit_in_bytes");
    let has_memsw = memsw.exists();
    // memsw must stay >= the memory limit: lower it last, raise it first.
    if has_memsw && memory_bytes.is_none() {
        write(&memsw, "-1")?;
    }
    write(&dir.join("memory.limit_in_bytes"), &limit)?;
    if has_memsw && memory_bytes.is_some() {
        write(&memsw, &limit)?;
    }
    Ok(())
}

/// v2: `memory.max`; `None` lifts the limit.
fn v2_memory_limit(dir: &Path, memory_bytes: Option<u64>) -> Result<(), CgroupError> {
    let limit = memory_bytes.map_or("max".to_string(), |b| b.to_string());
    write(&dir.join("memory.max"), &limit)
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Memory {
    V1(PathBuf),
    V2(PathBuf),
}

/// One container's cgroup dirs (one per v1 hierarchy, one in v2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerCgroup {
    dirs: Vec<PathBuf>,
    memory: Option<Memory>,
    v2: bool,
    /// OOM kills counted before the container started (a reused cgroup).
    oom_base: u64,
}

fn field(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok())?
    })
}

impl ContainerCgroup {
    /// The `cgroup.procs` files the child writes its pid into before exec.
    pub fn procs_files(&self) -> Result<Vec<CString>, CgroupError> {
        self.dirs
            .iter()
            .map(|d| {
                let p = d.join("cgroup.procs");
                CString::new(p.as_os_str().as_bytes()).map_err(|_| CgroupError::Nul(p))
            })
            .collect()
    }

    /// The cgroup dirs.
    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }

    /// Whether memory is limited by this cgroup.
    pub fn has_memory(&self) -> bool {
        self.memory.is_some()
    }

    /// Sets the memory limit of a cgroup made ahead of its container (with no limit), and
    /// starts its OOM-kill count and (v1) its peak from now.
    pub fn set_memory_limit(&mut self, memory_bytes: Option<u64>) -> Result<(), CgroupError> {
        match &self.memory {
            Some(Memory::V1(d)) => {
                v1_memory_limit(d, memory_bytes)?;
                let _ = write(&d.join("memory.max_usage_in_bytes"), "0");
            }
            Some(Memory::V2(d)) => v2_memory_limit(d, memory_bytes)?,
            None => {}
        }
        self.oom_base = 0;
        self.oom_base = self.oom_kills();
        Ok(())
    }

    /// Renames every dir of this cgroup to `name` (same parent); v1 allows it, v2 does not.
    /// On an error the dirs renamed so far are renamed back, and the names stay as they were.
    pub fn rename(&mut self, name: &str) -> Result<(), CgroupError> {
        let mut done: Vec<(PathBuf, PathBuf)> = Vec::new();
        for d in &self.dirs {
            let to = d.with_file_name(name);
            if let Err(e) = fs::rename(d, &to) {
                for (from, to) in done.iter().rev() {
                    let _ = fs::rename(to, from);
                }
                return Err(io_err(d)(e));
            }
            done.push((d.clone(), to));
        }
        self.dirs = done.into_iter().map(|(_, to)| to).collect();
        self.memory = match self.memory.take() {
            Some(Memory::V1(d)) => Some(Memory::V1(d.with_file_name(name))),
            Some(Memory::V2(d)) => Some(Memory::V2(d.with_file_name(name))),
            None => None,
        };
        Ok(())
    }

    /// OOM kills inside the cgroup since the container started.
    pub fn oom_kills(&self) -> u64 {
        let n = match &self.memory {
            Some(Memory::V1(d)) => {
                read(&d.join("memory.oom_control")).and_then(|t| field(&t, "oom_kill"))
            }
            Some(Memory::V2(d)) => {
                read(&d.join("memory.events")).and_then(|t| field(&t, "oom_kill"))
            }
            None => None,
        };
        n.unwrap_or(0).saturating_sub(self.oom_base)
    }

    /// Peak memory use (v1 `memory.max_usage_in_bytes`, v2 `memory.peak`).
    pub fn peak_bytes(&self) -> Option<u64> {
        let p = match &self.memory {
            Some(Memory::V1(d)) => d.join("memory.max_usage_in_bytes"),
            Some(Memory::V2(d)) => d.join("memory.peak"),
            None => return None,
        };
        read(&p)?.trim().parse().ok()
    }

    /// The memory limit in force, if any.
    pub fn limit_bytes(&self) -> Option<u64> {
        let p = match &self.memory {
            Some(Memory::V1(d)) => d.join("memory.limit_in_bytes"),
            Some(Memory::V2(d)) => d.join("memory.max"),
            None => return None,
        };
        read(&p)?.trim().parse().ok()
    }

    /// The processes in the cgroup (the first dir's `cgroup.procs`).
    pub fn pids(&self) -> Vec<i32> {
        self.dirs
            .iter()
            .filter_map(|d| read(&d.join("cgroup.procs")))
            .flat_map(|t| {
                t.lines()
                    .filter_map(|l| l.trim().parse().ok())
                    .collect::<Vec<i32>>()
            })
            .collect()
    }

    /// SIGKILL to every process in the cgroup (v2: `cgroup.kill` when the kernel has it).
    pub fn kill_all(&self) {
        if self.v2 {
            if let Some(d) = self.dirs.first() {
                if write(&d.join("cgroup.kill"), "1").is_ok() {
                    return;
                }
            }
        }
        for pid in self.pids() {
            if pid > 0 {
                // SAFETY: kill(2) with a positive pid and a valid signal has no memory effects.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                }
            }
        }
    }

    /// Removes the cgroup dirs; true when none is left (a dir with processes stays).
    pub fn remove(&self) -> bool {
        let mut all = true;
        for d in &self.dirs {
            match fs::remove_dir(d) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(_) => all = false,
            }
        }
        all
    }
}

/// Whether `name` is a pool cgroup (`zygote-<pid>-…`) whose agent is no longer running; the
/// start-up sweep removes it when empty ([`Cgroups::remove_stale_containers`]).
fn is_stale_zygote_cgroup(name: &str) -> bool {
    let Some(rest) = name.strip_prefix(ZYGOTE_PREFIX) else {
        return false;
    };
    let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<i32>().ok()) else {
        return false;
    };
    // SAFETY: kill with signal 0 only checks for existence.
    let alive = pid > 0
        && (unsafe { libc::kill(pid, 0) } == 0
            || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM));
    !alive
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_escapes_and_fields() {
        assert_eq!(unescape("/a\\040b"), "/a b");
        assert_eq!(unescape("/plain"), "/plain");
        assert_eq!(
            field("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n", "oom_kill"),
            Some(3)
        );
        assert_eq!(field("low 0\nhigh 0\n", "oom_kill"), None);
        let m = Mount {
            root: "/sub".into(),
            point: "/sys/fs/cgroup/memory".into(),
            fstype: "cgroup".into(),
            superopts: "rw,memory".into(),
        };
        assert_eq!(
            own_dir(&m, "/sub/x/y"),
            PathBuf::from("/sys/fs/cgroup/memory/x/y")
        );
    }
}
