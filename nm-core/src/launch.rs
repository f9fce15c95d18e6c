//! Container launch as Java's `DefaultContainerExecutor` does it on Linux, without the I/O:
//! where a container's files go, the environment and `launch_container.sh` it runs with, the two
//! wrapper scripts that record its pid and exit code, and how an exit code and a kill reason
//! become the exit status and diagnostics the RM sees. Everything is passed in (no clock, no
//! environment reads, no files); `nm-runtime`'s `executor` writes the files, spawns the
//! process and reports back through [`classify_exit`].
//!
//! How the types connect:
//!
//! ```text
//!  NmDirs (good local-dirs / log-dirs) + user + ContainerId
//!        │ ContainerPaths::new
//!        v
//!  ContainerPaths ──────────────┬─────────────────────────────┐
//!        │ log_dir (first)      │ work_dir, private files      │ pid / exitcode files
//!        v                      v                              v
//!  expand(cmd, log_dir, java17) container_env(LaunchEnvInput)  executor_scripts(paths, setsid)
//!        │                      │ Vec<EnvEntry> (Java's order)  │ (session.sh, executor.sh)
//!        │   resolve_links ─────┤                              │
//!        v                      v                              v
//!             launch_script(ScriptInput) ──> the agent writes and runs them
//!                                                     │ exit code, kill reason
//!                                                     v
//!                                    classify_exit ──> ExitClass { exit_status, diagnostics_at }
//! ```
//!
//! Facts come from the NodeManager notes, section 4; the order of the environment follows
//! Java's `writeLaunchEnv` (whitelisted, NM variables, the rest by dependencies).

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::path::{Component, Path, PathBuf};

use hadoop_wire::yarn::exit_status;

use crate::ids::{AppId, ContainerId};
use crate::localization::diagnostics_entry;

/// `yarn.nodemanager.env-whitelist` as `yarn-default.xml` sets it.
pub const DEFAULT_ENV_WHITELIST: &str = "JAVA_HOME,HADOOP_COMMON_HOME,HADOOP_HDFS_HOME,\
HADOOP_CONF_DIR,CLASSPATH_PREPEND_DISTCACHE,HADOOP_YARN_HOME,HADOOP_HOME,PATH,LANG,TZ";
/// `yarn.nodemanager.admin-env` default.
pub const DEFAULT_ADMIN_ENV: &str = "MALLOC_ARENA_MAX=$MALLOC_ARENA_MAX";
/// `yarn.nodemanager.user-home-dir` default (literally, not per user).
pub const DEFAULT_USER_HOME_DIR: &str = "/home/";
/// What `<ADD_OPENS>` becomes for a JDK 17 NodeManager.
pub const JDK17_ADD_OPENS: &str = "--add-opens=java.base/java.lang=ALL-UNNAMED \
--add-exports=java.base/sun.net.dns=ALL-UNNAMED --add-exports=java.base/sun.net.util=ALL-UNNAMED";
/// `yarn.nodemanager.container.stderr.tail.bytes` default.
pub const DEFAULT_TAIL_BYTES: usize = 4096;
/// The launch script's own stdout and stderr, in the container log dir.
pub const PRELAUNCH_OUT: &str = "prelaunch.out";
pub const PRELAUNCH_ERR: &str = "prelaunch.err";
/// File names of section 4.1 / 4.2.
pub const LAUNCH_SCRIPT: &str = "launch_container.sh";
pub const CONTAINER_TOKENS: &str = "container_tokens";
pub const SESSION_SCRIPT: &str = "default_container_executor_session.sh";
pub const EXECUTOR_SCRIPT: &str = "default_container_executor.sh";
pub const DIRECTORY_INFO: &str = "directory.info";
/// Java's `ContainerExitStatus.KILLED_BY_CONTAINER_SCHEDULER`.
pub const KILLED_BY_CONTAINER_SCHEDULER: i32 = -108;
/// Java's `ContainerExitStatus.KILLED_FOR_EXCESS_LOGS`.
pub const KILLED_FOR_EXCESS_LOGS: i32 = -109;
/// The exit code Java reports for a launch that failed before the process ran.
pub const LAUNCH_FAILED_CODE: i32 = -1;

/// What the launch refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LaunchError {
    #[error("no good local dir")]
    NoLocalDir,
    #[error("no good log dir")]
    NoLogDir,
    #[error("invalid user name {0:?}")]
    BadUser(String),
    /// A link whose source is not an absolute path (Java's message).
    #[error("Source must be absolute")]
    SourceNotAbsolute(PathBuf),
    /// A link name that is an absolute path (Java's message).
    #[error("Destination must be relative")]
    DestinationNotRelative(String),
    /// A link name that leaves the work dir (`..`) or is empty; Java does not check this.
    #[error("link name {0:?} leaves the container's work dir")]
    LinkEscapes(String),
    /// The directory of a wildcard (`*`) resource could not be listed.
    #[error("cannot list {path}: {error}")]
    ListDir { path: PathBuf, error: String },
}

/// The good dirs of `yarn.nodemanager.local-dirs` and `yarn.nodemanager.log-dirs`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NmDirs {
    pub local_dirs: Vec<PathBuf>,
    pub log_dirs: Vec<PathBuf>,
}

/// Every path of one container (notes 4.1). The work dir and the nmPrivate files live on one
/// local dir, chosen by [`ContainerPaths::pick`] from the container id (FNV-1a of its string
/// form modulo the number of local dirs): deterministic, so a restarted agent with the same
/// dirs finds the same files, and containers spread over the disks. Java picks by free space
/// with a round-robin allocator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerPaths {
    pub user: String,
    pub app: AppId,
    pub container: ContainerId,
    /// `<L>/usercache/<user>` on every local dir (0750).
    pub user_dirs: Vec<PathBuf>,
    /// `<L>/usercache/<user>/appcache` on every local dir (0710).
    pub appcache_dirs: Vec<PathBuf>,
    /// `<L>/usercache/<user>/filecache` on every local dir (0710).
    pub filecache_dirs: Vec<PathBuf>,
    /// `<L>/usercache/<user>/appcache/<app>` on every local dir (0710): `LOCAL_DIRS`.
    pub app_dirs: Vec<PathBuf>,
    /// `<app dir>/<container>` on every local dir (0710).
    pub container_dirs: Vec<PathBuf>,
    /// Index into the local dirs of the work dir and the nmPrivate dir.
    pub chosen: usize,
    /// The container's work dir (`PWD`): `container_dirs[chosen]`.
    pub work_dir: PathBuf,
    /// `<workdir>/tmp` (0710).
    pub tmp_dir: PathBuf,
    /// `<Log>/<app>` on every log dir (0710).
    pub app_log_dirs: Vec<PathBuf>,
    /// `<Log>/<app>/<container>` on every log dir (0710); the first is `<LOG_DIR>`.
    pub log_dirs: Vec<PathBuf>,
    /// `<L>/nmPrivate` (0700).
    pub nm_private_root: PathBuf,
    /// `<L>/nmPrivate/<app>/<container>` (0700).
    pub private_dir: PathBuf,
    /// `<private>/launch_container.sh`.
    pub private_launch_script: PathBuf,
    /// `<private>/<container>.tokens`.
    pub private_tokens: PathBuf,
    /// `<private>/<container>.pid`.
    pub pid_file: PathBuf,
    /// `<private>/<container>.pid.exitcode`.
    pub exit_code_file: PathBuf,
    /// `<workdir>/launch_container.sh`.
    pub launch_script: PathBuf,
    /// `<workdir>/container_tokens` (`HADOOP_TOKEN_FILE_LOCATION`).
    pub tokens: PathBuf,
    /// `<workdir>/default_container_executor_session.sh`.
    pub session_script: PathBuf,
    /// `<workdir>/default_container_executor.sh`.
    pub executor_script: PathBuf,
}

fn valid_user(user: &str) -> bool {
    !user.is_empty()
        && user.len() <= 255
        && user != "."
        && user != ".."
        && !user.contains(['/', '\0', '\n'])
}

impl ContainerPaths {
    /// The paths of `container` run by `user` over `dirs`.
    pub fn new(dirs: &NmDirs, user: &str, container: ContainerId) -> Result<Self, LaunchError> {
        let chosen = Self::pick(&container, dirs.local_dirs.len());
        Self::with_chosen(dirs, user, container, chosen)
    }

    /// As [`ContainerPaths::new`] with the work dir on local dir `chosen` (clamped to the
    /// dirs there are).
    pub fn with_chosen(
        dirs: &NmDirs,
        user: &str,
        container: ContainerId,
        chosen: usize,
    ) -> Result<Self, LaunchError> {
        if dirs.local_dirs.is_empty() {
            return Err(LaunchError::NoLocalDir);
        }
        if dirs.log_dirs.is_empty() {
            return Err(LaunchError::NoLogDir);
        }
        if !valid_user(user) {
            return Err(LaunchError::BadUser(user.chars().take(64).collect()));
        }
        let app = container.app;
        let (app_s, cid_s) = (app.to_string(), container.to_string());
        let user_dirs: Vec<PathBuf> = dirs
            .local_dirs
            .iter()
            .map(|l| l.join("usercache").join(user))
            .collect();
        let appcache_dirs: Vec<PathBuf> = user_dirs.iter().map(|u| u.join("appcache")).collect();
        let filecache_dirs = user_dirs.iter().map(|u| u.join("filecache")).collect();
        let app_dirs: Vec<PathBuf> = appcache_dirs.iter().map(|a| a.join(&app_s)).collect();
        let container_dirs: Vec<PathBuf> = app_dirs.iter().map(|a| a.join(&cid_s)).collect();
        let chosen = chosen.min(dirs.local_dirs.len() - 1);
        let work_dir = container_dirs[chosen].clone();
        let app_log_dirs: Vec<PathBuf> = dirs.log_dirs.iter().map(|l| l.join(&app_s)).collect();
        let log_dirs = app_log_dirs.iter().map(|a| a.join(&cid_s)).collect();
        let nm_private_root = dirs.local_dirs[chosen].join("nmPrivate");
        let private_dir = nm_private_root.join(&app_s).join(&cid_s);
        Ok(ContainerPaths {
            user: user.to_string(),
            app,
            container,
            private_launch_script: private_dir.join(LAUNCH_SCRIPT),
            private_tokens: private_dir.join(format!("{cid_s}.tokens")),
            pid_file: private_dir.join(format!("{cid_s}.pid")),
            exit_code_file: private_dir.join(format!("{cid_s}.pid.exitcode")),
            tmp_dir: work_dir.join("tmp"),
            launch_script: work_dir.join(LAUNCH_SCRIPT),
            tokens: work_dir.join(CONTAINER_TOKENS),
            session_script: work_dir.join(SESSION_SCRIPT),
            executor_script: work_dir.join(EXECUTOR_SCRIPT),
            user_dirs,
            appcache_dirs,
            filecache_dirs,
            app_dirs,
            container_dirs,
            chosen,
            work_dir,
            app_log_dirs,
            log_dirs,
            nm_private_root,
            private_dir,
        })
    }

    /// The local dir index for `container` among `n` dirs: FNV-1a (64 bit) of its string form,
    /// modulo `n`.
    pub fn pick(container: &ContainerId, n: usize) -> usize {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in container.to_string().bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        (h % n.max(1) as u64) as usize
    }

    /// `<LOG_DIR>`: the container's log dir on the first log dir.
    pub fn log_dir(&self) -> &Path {
        &self.log_dirs[0]
    }
}

/// Expands the markers of notes 4.3 in a command or env value: `<LOG_DIR>` → `log_dir`,
/// `<ADD_OPENS>` → [`JDK17_ADD_OPENS`] when `java17` else nothing, `<CPS>` → `:`,
/// `{{` → `$`, `}}` → nothing.
pub fn expand(s: &str, log_dir: &str, java17: bool) -> String {
    s.replace("<LOG_DIR>", log_dir)
        .replace("<ADD_OPENS>", if java17 { JDK17_ADD_OPENS } else { "" })
        .replace("<CPS>", ":")
        .replace("{{", "$")
        .replace("}}", "")
}

/// How a variable is written in the script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnvKind {
    /// From the agent's environment through the whitelist: `export K=${K:-"v"}`.
    Whitelisted,
    /// Set by the NodeManager (overrides the container's value): `export K="v"`.
    Nm,
    /// From the launch context (after the admin env): `export K="v"`.
    Container,
}

/// One exported variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvEntry {
    pub name: String,
    pub value: String,
    pub kind: EnvKind,
}

/// What [`container_env`] needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchEnvInput {
    /// The launch context's environment, in its order.
    pub container_env: Vec<(String, String)>,
    /// The agent's own process environment (for the whitelist and `$VAR` in the admin env).
    pub agent_env: Vec<(String, String)>,
    /// `yarn.nodemanager.env-whitelist` (comma-separated names).
    pub whitelist: String,
    /// `yarn.nodemanager.admin-env` (comma-separated `K=V`).
    pub admin_env: String,
    /// `yarn.nodemanager.force.path` (prepended to `PATH`; empty: none).
    pub force_path: String,
    /// The NodeId (the ContainerManagementProtocol address).
    pub node_host: String,
    pub node_port: u16,
    pub http_port: u16,
    /// The application submitter.
    pub user: String,
    /// `yarn.nodemanager.user-home-dir`.
    pub user_home_dir: String,
    /// Aux service metadata by service name (`NM_AUX_SERVICE_<name>` = base64).
    pub aux_services: Vec<(String, Vec<u8>)>,
    /// `LOCALIZATION_COUNTERS`: bytes missed, bytes cached, files missed, files cached, ms.
    pub localization_counters: [u64; 5],
    /// Whether `<ADD_OPENS>` expands to the JDK 17 flags.
    pub java17: bool,
}

impl Default for LaunchEnvInput {
    fn default() -> Self {
        LaunchEnvInput {
            container_env: Vec::new(),
            agent_env: Vec::new(),
            whitelist: DEFAULT_ENV_WHITELIST.to_string(),
            admin_env: DEFAULT_ADMIN_ENV.to_string(),
            force_path: String::new(),
            node_host: String::new(),
            node_port: 0,
            http_port: 0,
            user: String::new(),
            user_home_dir: DEFAULT_USER_HOME_DIR.to_string(),
            aux_services: Vec::new(),
            localization_counters: [0; 5],
            java17: true,
        }
    }
}

/// An insertion-ordered map (the environment is small; order matters).
#[derive(Default)]
struct OrderedEnv {
    entries: Vec<(String, String)>,
    index: HashMap<String, usize>,
}

impl OrderedEnv {
    fn get(&self, k: &str) -> Option<&str> {
        self.index.get(k).map(|&i| self.entries[i].1.as_str())
    }
    fn put(&mut self, k: &str, v: String) {
        match self.index.get(k) {
            Some(&i) => self.entries[i].1 = v,
            None => {
                self.index.insert(k.to_string(), self.entries.len());
                self.entries.push((k.to_string(), v));
            }
        }
    }
    fn remove(&mut self, k: &str) -> Option<String> {
        let i = self.index.remove(k)?;
        let (_, v) = self.entries.remove(i);
        for j in self.index.values_mut() {
            if *j > i {
                *j -= 1;
            }
        }
        Some(v)
    }
    /// Java's `Apps.addToEnvironment`: appends with `:` when the variable is already set.
    fn append(&mut self, k: &str, v: &str) {
        let new = match self.get(k) {
            Some(old) => format!("{old}:{v}"),
            None => v.to_string(),
        };
        self.put(k, new);
    }
}

fn is_name_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}
fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Replaces `$NAME` in an admin-env value with the value in `env`, else in `agent`, else
/// nothing (Java's `Apps.setEnvFromInputString`).
fn substitute(v: &str, env: &OrderedEnv, agent: &HashMap<&str, &str>) -> String {
    let mut out = String::with_capacity(v.len());
    let mut chars = v.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c == '$' {
            if let Some(&(j, n)) = chars.peek() {
                if is_name_start(n) {
                    let mut end = j;
                    while let Some(&(k, n)) = chars.peek() {
                        if !is_name_char(n) {
                            break;
                        }
                        end = k + n.len_utf8();
                        chars.next();
                    }
                    let name = &v[j..end];
                    out.push_str(env.get(name).or(agent.get(name).copied()).unwrap_or(""));
                    continue;
                }
            }
        }
        out.push_str(&v[i..i + c.len_utf8()]);
    }
    out
}

/// The names a value refers to with `$NAME` or `${NAME…}`, outside single quotes and not
/// escaped (Java's `getEnvDependencies` for bash).
pub fn env_dependencies(v: &str) -> Vec<&str> {
    let b = v.as_bytes();
    let mut deps = Vec::new();
    let (mut i, mut single, mut double) = (0, false, false);
    while i < b.len() {
        match b[i] {
            b'\\' if !single => i += 1,
            b'\'' if !double => single = !single,
            b'"' if !single => double = !double,
            b'$' if !single && i + 1 < b.len() => {
                let brace = b[i + 1] == b'{';
                let start = i + 1 + usize::from(brace);
                let mut end = start;
                if end < b.len() && is_name_start(b[end] as char) {
                    while end < b.len() && is_name_char(b[end] as char) {
                        end += 1;
                    }
                    deps.push(&v[start..end]);
                    i = end;
                    continue;
                }
            }
            _ => {}
        }
        i += 1;
    }
    deps
}

/// Orders `entries` so that a variable comes after the variables it refers to (Java's
/// `orderEnvByDependencies`: depth first, a variable counts as placed when its visit begins,
/// so cycles end). Iterative: no recursion depth from a long chain.
fn order_by_dependencies(entries: Vec<(String, String)>) -> Vec<(String, String)> {
    let index: HashMap<&str, usize> = entries
        .iter()
        .enumerate()
        .map(|(i, (k, _))| (k.as_str(), i))
        .collect();
    let deps: Vec<Vec<usize>> = entries
        .iter()
        .map(|(_, v)| {
            env_dependencies(v)
                .into_iter()
                .filter_map(|d| index.get(d).copied())
                .collect()
        })
        .collect();
    let mut visited = vec![false; entries.len()];
    let mut order = Vec::with_capacity(entries.len());
    for root in 0..entries.len() {
        if visited[root] {
            continue;
        }
        visited[root] = true;
        // (node, next dependency to look at)
        let mut stack = vec![(root, 0usize)];
        while let Some(top) = stack.last_mut() {
            let (n, next) = *top;
            if next < deps[n].len() {
                top.1 += 1;
                let d = deps[n][next];
                if !visited[d] {
                    visited[d] = true;
                    stack.push((d, 0));
                }
            } else {
                order.push(n);
                stack.pop();
            }
        }
    }
    let mut slots: Vec<Option<(String, String)>> = entries.into_iter().map(Some).collect();
    order.into_iter().filter_map(|i| slots[i].take()).collect()
}

/// Standard base64 with padding (Java's `Base64.getEncoder`).
fn base64(data: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(data)
}

fn join_paths(ps: &[PathBuf], trailing_slash: bool) -> String {
    ps.iter()
        .map(|p| {
            let mut s = p.display().to_string();
            if trailing_slash && !s.ends_with('/') {
                s.push('/');
            }
            s
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The container's environment in the order `launch_container.sh` exports it (notes 4.2
/// step 2 and 4.4): whitelisted variables the container does not set and the agent has, then
/// the NodeManager's variables in their order (overriding the container's), then the rest of
/// the launch context's variables (after the admin env and `force.path`, every value
/// expanded) ordered by their `$VAR` references.
pub fn container_env(input: &LaunchEnvInput, paths: &ContainerPaths) -> Vec<EnvEntry> {
    let log_dir = paths.log_dir().display().to_string();
    let agent: HashMap<&str, &str> = input
        .agent_env
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let mut env = OrderedEnv::default();
    for (k, v) in &input.container_env {
        env.put(k, v.clone());
    }
    let mut nm_vars: Vec<&str> = Vec::new();
    // Step 2: the token file first, tracked as an NM variable.
    env.put(
        "HADOOP_TOKEN_FILE_LOCATION",
        paths.tokens.display().to_string(),
    );
    nm_vars.push("HADOOP_TOKEN_FILE_LOCATION");
    // addConfigsToEnv: the admin env (forced), then force.path.
    for pair in input.admin_env.split(',') {
        let Some((k, v)) = pair.split_once('=') else {
            continue;
        };
        let k = k.trim();
        if k.is_empty() || !k.starts_with(is_name_start) || !k.chars().all(is_name_char) {
            continue;
        }
        let v = substitute(v, &env, &agent);
        env.append(k, &v);
    }
    if !input.force_path.is_empty() {
        let user_path = env.remove("PATH").filter(|p| !p.is_empty());
        env.append("PATH", &input.force_path);
        env.append("PATH", user_path.as_deref().unwrap_or("$PATH"));
    }
    // Every value expanded.
    for (_, v) in env.entries.iter_mut() {
        *v = expand(v, &log_dir, input.java17);
    }
    // sanitizeEnv: the NodeManager's variables, overriding the container's.
    let aux: Vec<(String, String)> = input
        .aux_services
        .iter()
        .map(|(n, d)| (format!("NM_AUX_SERVICE_{n}"), base64(d)))
        .collect();
    let c = &input.localization_counters;
    let nm: Vec<(&str, String)> = vec![
        ("CONTAINER_ID", paths.container.to_string()),
        ("NM_PORT", input.node_port.to_string()),
        ("NM_HOST", input.node_host.clone()),
        ("NM_HTTP_PORT", input.http_port.to_string()),
        ("LOCAL_DIRS", join_paths(&paths.app_dirs, false)),
        ("LOCAL_USER_DIRS", join_paths(&paths.user_dirs, true)),
        ("LOG_DIRS", join_paths(&paths.log_dirs, false)),
        ("USER", input.user.clone()),
        ("LOGNAME", input.user.clone()),
        ("HOME", input.user_home_dir.clone()),
        ("PWD", paths.work_dir.display().to_string()),
        (
            "LOCALIZATION_COUNTERS",
            format!("{},{},{},{},{}", c[0], c[1], c[2], c[3], c[4]),
        ),
        ("JVM_PID", "$$".to_string()),
    ];
    for (k, v) in nm {
        env.put(k, v);
        nm_vars.push(k);
    }
    for (k, v) in &aux {
        env.put(k, v.clone());
        nm_vars.push(k);
    }

    let mut out = Vec::with_capacity(env.entries.len() + 8);
    let mut seen = HashSet::new();
    for name in input.whitelist.split(',').map(str::trim) {
        if name.is_empty() || env.get(name).is_some() || !seen.insert(name) {
            continue;
        }
        if let Some(v) = agent.get(name) {
            out.push(EnvEntry {
                name: name.to_string(),
                value: (*v).to_string(),
                kind: EnvKind::Whitelisted,
            });
        }
    }
    let nm_set: HashSet<&str> = nm_vars.iter().copied().collect();
    for k in &nm_vars {
        out.push(EnvEntry {
            name: (*k).to_string(),
            value: env.get(k).unwrap_or("").to_string(),
            kind: EnvKind::Nm,
        });
    }
    let rest: Vec<(String, String)> = env
        .entries
        .iter()
        .filter(|(k, _)| !nm_set.contains(k.as_str()))
        .cloned()
        .collect();
    out.extend(
        order_by_dependencies(rest)
            .into_iter()
            .map(|(name, value)| EnvEntry {
                name,
                value,
                kind: EnvKind::Container,
            }),
    );
    out
}

/// One `ln -sf` of the script: an absolute localized path and a link name relative to the
/// work dir.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub source: PathBuf,
    pub name: String,
}

/// The links for localized resources `(absolute path, link names)`: a link name whose last
/// component is `*` links every entry of that directory by its own name into the work dir
/// (`list_dir` names the entries; the caller does the I/O). Refuses relative sources and
/// absolute link names with Java's messages, and link names that leave the work dir.
pub fn resolve_links(
    resources: &[(PathBuf, Vec<String>)],
    list_dir: &mut dyn FnMut(&Path) -> Result<Vec<String>, String>,
) -> Result<Vec<Link>, LaunchError> {
    let mut out = Vec::new();
    for (source, names) in resources {
        for name in names {
            let wildcard = Path::new(name).file_name().is_some_and(|n| n == "*");
            if wildcard {
                if !source.is_absolute() {
                    return Err(LaunchError::SourceNotAbsolute(source.clone()));
                }
                let mut entries = list_dir(source).map_err(|error| LaunchError::ListDir {
                    path: source.clone(),
                    error,
                })?;
                entries.sort();
                for e in entries {
                    out.push(check_link(source.join(&e), e)?);
                }
            } else {
                out.push(check_link(source.clone(), name.clone())?);
            }
        }
    }
    Ok(out)
}

fn check_link(source: PathBuf, name: String) -> Result<Link, LaunchError> {
    if !source.is_absolute() {
        return Err(LaunchError::SourceNotAbsolute(source));
    }
    let p = Path::new(&name);
    if p.is_absolute() {
        return Err(LaunchError::DestinationNotRelative(name));
    }
    if name.is_empty() || p.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(LaunchError::LinkEscapes(name));
    }
    Ok(Link { source, name })
}

/// What [`launch_script`] writes.
#[derive(Debug, Clone, Copy)]
pub struct ScriptInput<'a> {
    /// `<LOG_DIR>` (the first container log dir).
    pub log_dir: &'a Path,
    /// The environment from [`container_env`].
    pub env: &'a [EnvEntry],
    /// The links from [`resolve_links`].
    pub links: &'a [Link],
    /// The launch context's commands, already [`expand`]ed.
    pub commands: &'a [String],
    /// `yarn.nodemanager.log-container-debug-info.enabled` (default true).
    pub debug_info: bool,
    /// The node makes the links and writes the debugging information itself before the
    /// script runs (the agent's `hotpath.agent.launch.setup-in-agent`): the script then only
    /// says so in comments instead of running `ln`, `cp`, `chmod`, `ls` and `find`.
    pub setup_by_node: bool,
}

/// `launch_container.sh` (notes 4.5). Values are written inside double quotes without
/// escaping, as Java does, so `$VAR` in them expands when the script runs.
pub fn launch_script(input: &ScriptInput<'_>) -> String {
    let log = input.log_dir.display();
    let mut s = String::with_capacity(4096);
    // Writing to a String cannot fail.
    let _ = writeln!(s, "#!/bin/bash\n");
    let _ = writeln!(s, "set -o pipefail -e");
    let _ = writeln!(s, "export PRELAUNCH_OUT=\"{log}/{PRELAUNCH_OUT}\"");
    let _ = writeln!(s, "exec >\"${{PRELAUNCH_OUT}}\"");
    let _ = writeln!(s, "export PRELAUNCH_ERR=\"{log}/{PRELAUNCH_ERR}\"");
    let _ = writeln!(s, "exec 2>\"${{PRELAUNCH_ERR}}\"");
    let _ = writeln!(s, "echo \"Setting up env variables\"");
    for e in input.env {
        match e.kind {
            EnvKind::Whitelisted => {
                let _ = writeln!(s, "export {0}=${{{0}:-\"{1}\"}}", e.name, e.value);
            }
            EnvKind::Nm | EnvKind::Container => {
                let _ = writeln!(s, "export {}=\"{}\"", e.name, e.value);
            }
        }
    }
    let _ = writeln!(s, "echo \"Setting up job resources\"");
    if input.setup_by_node && !input.links.is_empty() {
        let _ = writeln!(s, "# Linked by the NodeManager before launch:");
    }
    for l in input.links {
        if input.setup_by_node {
            let _ = writeln!(s, "#   {} -> {}", l.name, l.source.display());
            continue;
        }
        if let Some(parent) = Path::new(&l.name).parent() {
            if !parent.as_os_str().is_empty() {
                let _ = writeln!(s, "mkdir -p \"{}\"", parent.display());
            }
        }
        let _ = writeln!(s, "ln -sf -- \"{}\" \"{}\"", l.source.display(), l.name);
    }
    if input.debug_info && input.setup_by_node {
        let _ = writeln!(s, "echo \"Copying debugging information\"");
        let _ = writeln!(
            s,
            "# {log}/{LAUNCH_SCRIPT} and {log}/{DIRECTORY_INFO} (ls -l, find -L . -maxdepth 5 -ls,"
        );
        let _ = writeln!(
            s,
            "# broken symlinks) written by the NodeManager before launch"
        );
    } else if input.debug_info {
        let info = format!("\"{log}/{DIRECTORY_INFO}\"");
        let _ = writeln!(s, "echo \"Copying debugging information\"");
        let _ = writeln!(s, "# Creating copy of launch script");
        let _ = writeln!(s, "cp \"{LAUNCH_SCRIPT}\" \"{log}/{LAUNCH_SCRIPT}\"");
        let _ = writeln!(s, "chmod 640 \"{log}/{LAUNCH_SCRIPT}\"");
        let _ = writeln!(s, "# Determining directory contents");
        let _ = writeln!(s, "echo \"ls -l:\" 1>{info}");
        let _ = writeln!(s, "ls -l 1>>{info}");
        let _ = writeln!(s, "echo \"find -L . -maxdepth 5 -ls:\" 1>>{info}");
        let _ = writeln!(s, "find -L . -maxdepth 5 -ls 1>>{info}");
        let _ = writeln!(
            s,
            "echo \"broken symlinks(find -L . -maxdepth 5 -type l -ls):\" 1>>{info}"
        );
        let _ = writeln!(s, "find -L . -maxdepth 5 -type l -ls 1>>{info}");
    }
    let _ = writeln!(s, "echo \"Launching container\"");
    let _ = writeln!(s, "exec /bin/bash -c \"{}\"", input.commands.join(" "));
    s
}

/// `default_container_executor_session.sh` and `default_container_executor.sh` (notes 4.2
/// step 7): the session script records its pid and becomes the launch script in a new
/// session (`setsid`, plain `exec` when the host has none); the executor script runs it and
/// records its exit code. Both are written with mode 0700.
pub fn executor_scripts(paths: &ContainerPaths, setsid: bool) -> (String, String) {
    let pid = paths.pid_file.display();
    let exitcode = paths.exit_code_file.display();
    let session = format!(
        "#!/bin/bash\n\necho $$ > {pid}.tmp\n/bin/mv -f {pid}.tmp {pid}\nexec {}/bin/bash \"{}\"\n",
        if setsid { "setsid " } else { "" },
        paths.launch_script.display()
    );
    let executor = format!(
        "#!/bin/bash\n/bin/bash \"{}\"\nrc=$?\necho $rc > \"{exitcode}.tmp\"\n\
/bin/mv -f \"{exitcode}.tmp\" \"{exitcode}\"\nexit $rc\n",
        paths.session_script.display()
    );
    (session, executor)
}

/// Why the NodeManager killed a container; its status wins over the process's 143/137.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KillReason {
    /// `stopContainers` from the ApplicationMaster: −105.
    ByAppMaster,
    /// `containers_to_cleanup`: −106.
    ByResourceManager,
    /// `applications_to_cleanup`: −107.
    AfterAppCompletion,
    /// Over its physical-memory limit: −104, with the monitor's diagnostics.
    ExceededPmem { diagnostics: String },
    /// Over its virtual-memory limit: −103.
    ExceededVmem { diagnostics: String },
    /// Killed during recovery or as the node stops, or lost: −100.
    Aborted { diagnostics: String },
    /// Preempted: −102.
    Preempted { diagnostics: String },
    /// The container scheduler (opportunistic containers): −108.
    ByContainerScheduler { diagnostics: String },
    /// Too many logs: −109.
    ExcessLogs { diagnostics: String },
}

impl KillReason {
    /// The exit status reported for a container killed for this reason.
    pub fn exit_status(&self) -> i32 {
        match self {
            KillReason::ByAppMaster => exit_status::KILLED_BY_APPMASTER,
            KillReason::ByResourceManager => exit_status::KILLED_BY_RESOURCEMANAGER,
            KillReason::AfterAppCompletion => exit_status::KILLED_AFTER_APP_COMPLETION,
            KillReason::ExceededPmem { .. } => exit_status::KILLED_EXCEEDED_PMEM,
            KillReason::ExceededVmem { .. } => exit_status::KILLED_EXCEEDED_VMEM,
            KillReason::Aborted { .. } => exit_status::ABORTED,
            KillReason::Preempted { .. } => exit_status::PREEMPTED,
            KillReason::ByContainerScheduler { .. } => KILLED_BY_CONTAINER_SCHEDULER,
            KillReason::ExcessLogs { .. } => KILLED_FOR_EXCESS_LOGS,
        }
    }

    /// The first diagnostics line.
    pub fn diagnostics(&self) -> &str {
        match self {
            KillReason::ByAppMaster => "Container killed by the ApplicationMaster.",
            KillReason::ByResourceManager => "Container Killed by ResourceManager",
            KillReason::AfterAppCompletion => {
                "Container killed on application-finish event: Application killed by ResourceManager"
            }
            KillReason::ExceededPmem { diagnostics }
            | KillReason::ExceededVmem { diagnostics }
            | KillReason::Aborted { diagnostics }
            | KillReason::Preempted { diagnostics }
            | KillReason::ByContainerScheduler { diagnostics }
            | KillReason::ExcessLogs { diagnostics } => diagnostics,
        }
    }
}

/// How a container ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitKind {
    /// Exit code 0 and no kill.
    Success,
    /// The NodeManager killed it (a [`KillReason`]).
    Killed,
    /// A signal from outside the NodeManager (137 or 143 without a kill).
    KilledExternally,
    /// Any other non-zero exit.
    Failed,
}

/// The exit status and diagnostics of an ended container.
///
/// Java 3.5's `ContainerImpl.addDiagnostics` stamps every event's text with
/// `[yyyy-MM-dd HH:mm:ss.SSS]` and the transitions end each with `\n`; so the parts are kept
/// apart here (one per event) and [`ExitClass::diagnostics_at`] stamps them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExitClass {
    pub kind: ExitKind,
    /// What goes into `ContainerStatusProto.exit_status`.
    pub exit_status: i32,
    /// The kill reason's text, if killed by the NodeManager (`KillTransition`'s event).
    pub reason_line: String,
    /// The text of the process's exit event (`ContainerLaunch`'s diagnostic info: the exit
    /// lines, the error-file and stderr tails); empty for a clean exit.
    pub process_lines: String,
    /// A signal from outside the NodeManager: `KilledExternallyTransition` adds its own event.
    pub external_signal: bool,
}

/// `KilledExternallyTransition`'s text.
pub const KILLED_BY_EXTERNAL_SIGNAL: &str = "Killed by external signal";

impl ExitClass {
    /// All diagnostics as Java 3.5 reports them at `now_ms` (wall clock, ms): each event
    /// `[<time>]<text>\n`, in Java's order (the kill reason, the process's exit, the external
    /// signal).
    pub fn diagnostics_at(&self, now_ms: i64) -> String {
        let mut out = String::new();
        for part in [&self.reason_line, &self.process_lines] {
            if !part.is_empty() {
                out.push_str(&diagnostics_entry(now_ms, part));
                out.push('\n');
            }
        }
        if self.external_signal {
            out.push_str(&diagnostics_entry(now_ms, KILLED_BY_EXTERNAL_SIGNAL));
            out.push('\n');
        }
        out
    }

    /// A launch that failed before the process ran: code −1 and the error (notes 4.2 step 9).
    pub fn launch_failed(message: &str) -> ExitClass {
        ExitClass {
            kind: ExitKind::Failed,
            exit_status: LAUNCH_FAILED_CODE,
            reason_line: String::new(),
            process_lines: message.to_string(),
            external_signal: false,
        }
    }
}

/// Exit status and diagnostics for process exit `code` (128 + signal for a signalled
/// process) and the kill the NodeManager asked for, if any (notes 4.2 step 9, 4.7, trap 9).
/// For a failure, the caller appends [`error_file_diagnostics`] / [`stderr_diagnostics`].
pub fn classify_exit(code: i32, kill: Option<&KillReason>) -> ExitClass {
    let signalled = code == exit_status::TERMINATED || code == exit_status::FORCE_KILLED;
    let mut process_lines = String::new();
    if signalled {
        let _ = writeln!(
            process_lines,
            "Container killed on request. Exit code is {code}"
        );
    }
    if code != 0 {
        let _ = write!(
            process_lines,
            "Container exited with a non-zero exit code {code}. "
        );
    }
    let (kind, exit_status, reason_line) = match kill {
        Some(k) => (
            ExitKind::Killed,
            k.exit_status(),
            k.diagnostics().to_string(),
        ),
        None if code == 0 => (ExitKind::Success, exit_status::SUCCESS, String::new()),
        None if signalled => (ExitKind::KilledExternally, code, String::new()),
        None => (ExitKind::Failed, code, String::new()),
    };
    ExitClass {
        kind,
        exit_status,
        reason_line,
        process_lines,
        external_signal: kind == ExitKind::KilledExternally,
    }
}

/// The last `n` bytes of `content`, as text (invalid UTF-8 replaced).
pub fn tail(content: &[u8], n: usize) -> String {
    String::from_utf8_lossy(&content[content.len().saturating_sub(n)..]).into_owned()
}

/// `Error file: <name>.\nLast <n> bytes of <name> :\n<tail>` (the prelaunch.err part of a
/// failure's diagnostics).
pub fn error_file_diagnostics(name: &str, content: &[u8], n: usize) -> String {
    format!(
        "Error file: {name}.\nLast {n} bytes of {name} :\n{}",
        tail(content, n)
    )
}

/// `Last <n> bytes of <name> :\n<tail>\n` (the stderr part of a failure's diagnostics).
pub fn stderr_diagnostics(name: &str, content: &[u8], n: usize) -> String {
    format!("Last {n} bytes of {name} :\n{}\n", tail(content, n))
}

/// Whether a log file name matches `yarn.nodemanager.container.stderr.pattern`'s default
/// `{*stderr*,*STDERR*}`.
pub fn is_stderr_name(name: &str) -> bool {
    name.contains("stderr") || name.contains("STDERR")
}

/// Bytes as Java's `TraditionalBinaryPrefix.long2String(n, "B", 1)` writes them: `64 MB`,
/// `1.5 GB`.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 7] = ["B", "KB", "MB", "GB", "TB", "PB", "EB"];
    let mut u = 0;
    while u + 1 < UNITS.len() && n >= 1u64 << (10 * (u + 1)) {
        u += 1;
    }
    if u == 0 {
        return format!("{n} B");
    }
    let unit = 1u64 << (10 * u);
    if n % unit == 0 {
        format!("{} {}", n / unit, UNITS[u])
    } else {
        format!("{:.1} {}", n as f64 / unit as f64, UNITS[u])
    }
}

/// The diagnostics of a container killed over its physical-memory limit.
pub fn pmem_diagnostics(pid: i32, container: &ContainerId, usage: u64, limit: u64) -> String {
    format!(
        "Container [pid={pid},containerID={container}] is running beyond physical memory \
limits. Current usage: {} of {} physical memory used; Killing container.",
        human_bytes(usage),
        human_bytes(limit)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cid() -> ContainerId {
        ContainerId::new(AppId::new(1410901177871, 1), 1, 5)
    }

    fn dirs() -> NmDirs {
        NmDirs {
            local_dirs: vec!["/l0".into(), "/l1".into()],
            log_dirs: vec!["/g0".into(), "/g1".into()],
        }
    }

    fn paths() -> ContainerPaths {
        ContainerPaths::new(&dirs(), "alice", cid()).unwrap()
    }

    #[test]
    fn paths_follow_the_layout() {
        let p = paths();
        let (a, c) = (
            "application_1410901177871_0001",
            "container_1410901177871_0001_01_000005",
        );
        assert_eq!(
            p.user_dirs,
            vec![
                PathBuf::from("/l0/usercache/alice"),
                "/l1/usercache/alice".into()
            ]
        );
        assert_eq!(
            p.app_dirs[1],
            PathBuf::from(format!("/l1/usercache/alice/appcache/{a}"))
        );
        assert_eq!(
            p.filecache_dirs[0],
            PathBuf::from("/l0/usercache/alice/filecache")
        );
        assert_eq!(
            p.container_dirs[0],
            PathBuf::from(format!("/l0/usercache/alice/appcache/{a}/{c}"))
        );
        assert_eq!(p.work_dir, p.container_dirs[p.chosen]);
        assert_eq!(p.tmp_dir, p.work_dir.join("tmp"));
        assert_eq!(
            p.log_dirs,
            vec![
                PathBuf::from(format!("/g0/{a}/{c}")),
                format!("/g1/{a}/{c}").into()
            ]
        );
        assert_eq!(p.log_dir(), Path::new(&format!("/g0/{a}/{c}")));
        let l = if p.chosen == 0 { "/l0" } else { "/l1" };
        let private = PathBuf::from(format!("{l}/nmPrivate/{a}/{c}"));
        assert_eq!(p.private_dir, private);
        assert_eq!(p.pid_file, private.join(format!("{c}.pid")));
        assert_eq!(p.exit_code_file, private.join(format!("{c}.pid.exitcode")));
        assert_eq!(p.private_tokens, private.join(format!("{c}.tokens")));
        assert_eq!(p.private_launch_script, private.join("launch_container.sh"));
        assert_eq!(p.tokens, p.work_dir.join("container_tokens"));
        assert_eq!(
            p.session_script,
            p.work_dir.join("default_container_executor_session.sh")
        );
        assert_eq!(
            p.executor_script,
            p.work_dir.join("default_container_executor.sh")
        );
        // Deterministic, and spread over the dirs.
        assert_eq!(paths(), p);
        let picks: HashSet<usize> = (1..40)
            .map(|i| ContainerPaths::pick(&ContainerId::new(cid().app, 1, i), 2))
            .collect();
        assert_eq!(picks.len(), 2);
    }

    #[test]
    fn paths_refuse_bad_input() {
        let none = NmDirs {
            local_dirs: vec![],
            log_dirs: vec!["/g".into()],
        };
        assert_eq!(
            ContainerPaths::new(&none, "u", cid()),
            Err(LaunchError::NoLocalDir)
        );
        let none = NmDirs {
            local_dirs: vec!["/l".into()],
            log_dirs: vec![],
        };
        assert_eq!(
            ContainerPaths::new(&none, "u", cid()),
            Err(LaunchError::NoLogDir)
        );
        for u in ["", "..", "a/b", "x\ny"] {
            assert!(matches!(
                ContainerPaths::new(&dirs(), u, cid()),
                Err(LaunchError::BadUser(_))
            ));
        }
    }

    #[test]
    fn expansion_markers() {
        let s = "{{JAVA_HOME}}/bin/java <ADD_OPENS> -cp a<CPS>b 1><LOG_DIR>/stdout";
        assert_eq!(
            expand(s, "/logs/c1", true),
            format!("$JAVA_HOME/bin/java {JDK17_ADD_OPENS} -cp a:b 1>/logs/c1/stdout")
        );
        assert_eq!(
            expand(s, "/x", false),
            "$JAVA_HOME/bin/java  -cp a:b 1>/x/stdout"
        );
        assert_eq!(expand("plain", "/x", true), "plain");
    }

    fn env_input() -> LaunchEnvInput {
        LaunchEnvInput {
            container_env: vec![
                (
                    "CLASSPATH".into(),
                    "$PWD:{{HADOOP_HOME}}/lib<CPS>$EXTRA".into(),
                ),
                ("EXTRA".into(), "${BASE}/x".into()),
                ("BASE".into(), "/base".into()),
                ("HOME".into(), "/user-wants-this".into()),
                ("LANG".into(), "C".into()),
            ],
            agent_env: vec![
                ("JAVA_HOME".into(), "/jdk".into()),
                ("LANG".into(), "en_US.UTF-8".into()),
                ("PATH".into(), "/usr/bin".into()),
                ("MALLOC_ARENA_MAX".into(), "4".into()),
                ("SECRET".into(), "no".into()),
            ],
            node_host: "n1".into(),
            node_port: 8041,
            http_port: 8042,
            user: "alice".into(),
            aux_services: vec![("mapreduce_shuffle".into(), vec![0, 0, 0x33, 0x8b])],
            localization_counters: [1, 2, 3, 4, 5],
            ..LaunchEnvInput::default()
        }
    }

    #[test]
    fn env_order_whitelist_nm_and_dependencies() {
        let p = paths();
        let env = container_env(&env_input(), &p);
        let names: Vec<&str> = env.iter().map(|e| e.name.as_str()).collect();
        // Whitelisted: in whitelist order, only what the agent has and the container lacks
        // (LANG is set by the container, so it is not whitelisted).
        assert_eq!(&names[..2], ["JAVA_HOME", "PATH"]);
        assert!(env[..2].iter().all(|e| e.kind == EnvKind::Whitelisted));
        assert_eq!(env[0].value, "/jdk");
        // NM variables, in Java's order, overriding the container's HOME.
        let nm: Vec<&str> = env
            .iter()
            .filter(|e| e.kind == EnvKind::Nm)
            .map(|e| e.name.as_str())
            .collect();
        assert_eq!(
            nm,
            [
                "HADOOP_TOKEN_FILE_LOCATION",
                "CONTAINER_ID",
                "NM_PORT",
                "NM_HOST",
                "NM_HTTP_PORT",
                "LOCAL_DIRS",
                "LOCAL_USER_DIRS",
                "LOG_DIRS",
                "USER",
                "LOGNAME",
                "HOME",
                "PWD",
                "LOCALIZATION_COUNTERS",
                "JVM_PID",
                "NM_AUX_SERVICE_mapreduce_shuffle"
            ]
        );
        let get = |k: &str| {
            env.iter()
                .find(|e| e.name == k)
                .map(|e| e.value.as_str())
                .unwrap()
        };
        assert_eq!(get("HOME"), "/home/");
        assert_eq!(
            get("HADOOP_TOKEN_FILE_LOCATION"),
            p.tokens.display().to_string()
        );
        assert_eq!(
            get("CONTAINER_ID"),
            "container_1410901177871_0001_01_000005"
        );
        assert_eq!(get("NM_PORT"), "8041");
        assert_eq!(
            get("LOCAL_DIRS"),
            format!("{},{}", p.app_dirs[0].display(), p.app_dirs[1].display())
        );
        assert_eq!(
            get("LOCAL_USER_DIRS"),
            "/l0/usercache/alice/,/l1/usercache/alice/"
        );
        assert_eq!(get("PWD"), p.work_dir.display().to_string());
        assert_eq!(get("JVM_PID"), "$$");
        assert_eq!(get("LOCALIZATION_COUNTERS"), "1,2,3,4,5");
        assert_eq!(get("NM_AUX_SERVICE_mapreduce_shuffle"), "AAAziw==");
        // Expanded, and the admin env substituted from the agent's env.
        assert_eq!(get("CLASSPATH"), "$PWD:$HADOOP_HOME/lib:$EXTRA");
        assert_eq!(get("MALLOC_ARENA_MAX"), "4");
        assert!(!names.contains(&"SECRET"));
        // The rest: BASE before EXTRA before CLASSPATH.
        let pos = |k: &str| names.iter().position(|n| *n == k).unwrap();
        assert!(pos("BASE") < pos("EXTRA") && pos("EXTRA") < pos("CLASSPATH"));
        assert!(pos("JVM_PID") < pos("BASE"));
        // Nothing twice.
        assert_eq!(names.iter().collect::<HashSet<_>>().len(), names.len());
    }

    #[test]
    fn admin_env_appends_and_force_path() {
        let mut i = env_input();
        i.container_env
            .push(("MALLOC_ARENA_MAX".into(), "2".into()));
        i.force_path = "/force/bin".into();
        let env = container_env(&i, &paths());
        let get = |k: &str| {
            env.iter()
                .find(|e| e.name == k)
                .map(|e| (e.value.as_str(), e.kind))
                .unwrap()
        };
        assert_eq!(get("MALLOC_ARENA_MAX"), ("2:2", EnvKind::Container));
        // PATH is now set, so it is not whitelisted.
        assert_eq!(get("PATH"), ("/force/bin:$PATH", EnvKind::Container));
        i.container_env.push(("PATH".into(), "/mine".into()));
        let env = container_env(&i, &paths());
        assert_eq!(
            env.iter().find(|e| e.name == "PATH").unwrap().value,
            "/force/bin:/mine"
        );
    }

    #[test]
    fn dependency_cycles_end() {
        let rest = vec![
            ("A".to_string(), "$B".to_string()),
            ("B".to_string(), "${C}x".to_string()),
            ("C".to_string(), "$A '$D' \\$D".to_string()),
            ("D".to_string(), "d".to_string()),
        ];
        let o: Vec<String> = order_by_dependencies(rest)
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(o, ["C", "B", "A", "D"]);
        // A long chain: no recursion.
        let n = 100_000;
        let chain: Vec<(String, String)> = (0..n)
            .map(|i| (format!("V{i}"), format!("$V{}", i + 1)))
            .collect();
        let o = order_by_dependencies(chain);
        assert_eq!(o.len(), n);
        assert_eq!(o[0].0, format!("V{}", n - 1));
        assert_eq!(
            env_dependencies("$A${B:-x}\"$C\"'$D'\\$E $1 $"),
            ["A", "B", "C"]
        );
    }

    #[test]
    fn script_text() {
        let p = paths();
        let env = vec![
            EnvEntry {
                name: "JAVA_HOME".into(),
                value: "/jdk".into(),
                kind: EnvKind::Whitelisted,
            },
            EnvEntry {
                name: "CONTAINER_ID".into(),
                value: "c1".into(),
                kind: EnvKind::Nm,
            },
            EnvEntry {
                name: "X".into(),
                value: "$PWD/y".into(),
                kind: EnvKind::Container,
            },
        ];
        let links = vec![
            Link {
                source: "/l0/filecache/10/job.jar".into(),
                name: "job.jar".into(),
            },
            Link {
                source: "/l0/filecache/11/conf".into(),
                name: "a/b/conf".into(),
            },
        ];
        let cmds = vec!["echo hi".to_string(), "1>/g/stdout".to_string()];
        let input = ScriptInput {
            log_dir: Path::new("/g"),
            env: &env,
            links: &links,
            commands: &cmds,
            debug_info: true,
            setup_by_node: false,
        };
        let s = launch_script(&input);
        let want = "#!/bin/bash\n\nset -o pipefail -e\n\
export PRELAUNCH_OUT=\"/g/prelaunch.out\"\nexec >\"${PRELAUNCH_OUT}\"\n\
export PRELAUNCH_ERR=\"/g/prelaunch.err\"\nexec 2>\"${PRELAUNCH_ERR}\"\n\
echo \"Setting up env variables\"\n\
export JAVA_HOME=${JAVA_HOME:-\"/jdk\"}\nexport CONTAINER_ID=\"c1\"\nexport X=\"$PWD/y\"\n\
echo \"Setting up job resources\"\n\
ln -sf -- \"/l0/filecache/10/job.jar\" \"job.jar\"\n\
mkdir -p \"a/b\"\nln -sf -- \"/l0/filecache/11/conf\" \"a/b/conf\"\n\
echo \"Copying debugging information\"\n# Creating copy of launch script\n\
cp \"launch_container.sh\" \"/g/launch_container.sh\"\nchmod 640 \"/g/launch_container.sh\"\n\
# Determining directory contents\n\
echo \"ls -l:\" 1>\"/g/directory.info\"\nls -l 1>>\"/g/directory.info\"\n\
echo \"find -L . -maxdepth 5 -ls:\" 1>>\"/g/directory.info\"\n\
find -L . -maxdepth 5 -ls 1>>\"/g/directory.info\"\n\
echo \"broken symlinks(find -L . -maxdepth 5 -type l -ls):\" 1>>\"/g/directory.info\"\n\
find -L . -maxdepth 5 -type l -ls 1>>\"/g/directory.info\"\n\
echo \"Launching container\"\nexec /bin/bash -c \"echo hi 1>/g/stdout\"\n";
        assert_eq!(s, want);
        let quiet = launch_script(&ScriptInput {
            debug_info: false,
            ..input
        });
        assert!(!quiet.contains("directory.info"));
        assert!(quiet.ends_with(
            "echo \"Launching container\"\nexec /bin/bash -c \"echo hi 1>/g/stdout\"\n"
        ));
        // Links and debugging information made by the node: no process of the script's
        // own before the command, and comments where the commands were.
        let by_node = launch_script(&ScriptInput {
            setup_by_node: true,
            ..input
        });
        for cmd in ["ln ", "mkdir ", "cp ", "chmod ", "ls ", "find "] {
            assert!(
                !by_node.lines().any(|l| l.starts_with(cmd)),
                "{cmd} in {by_node}"
            );
        }
        assert!(by_node.contains("echo \"Setting up job resources\"\n# Linked by the NodeManager before launch:\n#   job.jar -> /l0/filecache/10/job.jar\n#   a/b/conf -> /l0/filecache/11/conf\n"), "{by_node}");
        assert!(by_node.contains("echo \"Copying debugging information\"\n# /g/launch_container.sh and /g/directory.info"), "{by_node}");
        assert!(by_node.ends_with(
            "echo \"Launching container\"\nexec /bin/bash -c \"echo hi 1>/g/stdout\"\n"
        ));

        let (session, executor) = executor_scripts(&p, true);
        let pid = p.pid_file.display();
        assert_eq!(
            session,
            format!("#!/bin/bash\n\necho $$ > {pid}.tmp\n/bin/mv -f {pid}.tmp {pid}\nexec setsid /bin/bash \"{}\"\n", p.launch_script.display())
        );
        let ec = p.exit_code_file.display();
        assert_eq!(
            executor,
            format!("#!/bin/bash\n/bin/bash \"{}\"\nrc=$?\necho $rc > \"{ec}.tmp\"\n/bin/mv -f \"{ec}.tmp\" \"{ec}\"\nexit $rc\n", p.session_script.display())
        );
        assert!(executor_scripts(&p, false)
            .0
            .contains("\nexec /bin/bash \""));
    }

    #[test]
    fn links_checked_and_wildcards() {
        let mut lister = |p: &Path| -> Result<Vec<String>, String> {
            if p == Path::new("/r/dir") {
                Ok(vec!["b.jar".into(), "a.jar".into()])
            } else {
                Err("nope".into())
            }
        };
        let res = vec![
            (
                PathBuf::from("/r/f"),
                vec!["f".to_string(), "sub/f2".to_string()],
            ),
            (PathBuf::from("/r/dir"), vec!["lib/*".to_string()]),
        ];
        let links = resolve_links(&res, &mut lister).unwrap();
        let got: Vec<(String, &str)> = links
            .iter()
            .map(|l| (l.source.display().to_string(), l.name.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("/r/f".into(), "f"),
                ("/r/f".into(), "sub/f2"),
                ("/r/dir/a.jar".into(), "a.jar"),
                ("/r/dir/b.jar".into(), "b.jar")
            ]
        );
        let e = resolve_links(&[("rel".into(), vec!["x".into()])], &mut lister).unwrap_err();
        assert_eq!(e.to_string(), "Source must be absolute");
        let e = resolve_links(&[("/a".into(), vec!["/x".into()])], &mut lister).unwrap_err();
        assert_eq!(e.to_string(), "Destination must be relative");
        assert!(matches!(
            resolve_links(&[("/a".into(), vec!["../x".into()])], &mut lister),
            Err(LaunchError::LinkEscapes(_))
        ));
        assert!(matches!(
            resolve_links(&[("/nodir".into(), vec!["*".into()])], &mut lister),
            Err(LaunchError::ListDir { .. })
        ));
    }

    #[test]
    fn exit_classification() {
        // Each event stamped as Java 3.5's ContainerImpl.addDiagnostics stamps it.
        const T: i64 = 1_700_000_000_123;
        const S: &str = "[2023-11-14 22:13:20.123]";
        let ok = classify_exit(0, None);
        assert_eq!(
            (ok.kind, ok.exit_status, ok.diagnostics_at(T)),
            (ExitKind::Success, 0, String::new())
        );
        let f = classify_exit(3, None);
        assert_eq!((f.kind, f.exit_status), (ExitKind::Failed, 3));
        assert_eq!(
            f.diagnostics_at(T),
            format!("{S}Container exited with a non-zero exit code 3. \n")
        );
        let k = classify_exit(143, Some(&KillReason::ByAppMaster));
        assert_eq!((k.kind, k.exit_status), (ExitKind::Killed, -105));
        assert_eq!(
            k.diagnostics_at(T),
            format!("{S}Container killed by the ApplicationMaster.\n{S}Container killed on request. Exit code is 143\nContainer exited with a non-zero exit code 143. \n")
        );
        assert_eq!(
            classify_exit(137, Some(&KillReason::ByResourceManager)).exit_status,
            -106
        );
        let a = classify_exit(0, Some(&KillReason::AfterAppCompletion));
        assert_eq!(a.exit_status, -107);
        assert_eq!(
            a.diagnostics_at(T),
            format!("{S}Container killed on application-finish event: Application killed by ResourceManager\n")
        );
        let pm = KillReason::ExceededPmem {
            diagnostics: pmem_diagnostics(42, &cid(), 70 << 20, 64 << 20),
        };
        let p = classify_exit(137, Some(&pm));
        assert_eq!(p.exit_status, -104);
        assert!(p.diagnostics_at(T).starts_with(&format!(
            "{S}Container [pid=42,containerID=container_1410901177871_0001_01_000005] is running beyond physical memory limits. Current usage: 70 MB of 64 MB physical memory used; Killing container.\n{S}"
        )));
        assert_eq!(
            classify_exit(
                1,
                Some(&KillReason::Aborted {
                    diagnostics: "x".into()
                })
            )
            .exit_status,
            -100
        );
        let ext = classify_exit(137, None);
        assert_eq!(
            (ext.kind, ext.exit_status),
            (ExitKind::KilledExternally, 137)
        );
        assert_eq!(
            ext.diagnostics_at(T),
            format!("{S}Container killed on request. Exit code is 137\nContainer exited with a non-zero exit code 137. \n{S}Killed by external signal\n")
        );
        let lf = ExitClass::launch_failed("boom");
        assert_eq!(
            (lf.exit_status, lf.diagnostics_at(T)),
            (-1, format!("{S}boom\n"))
        );
    }

    #[test]
    fn tails_and_sizes() {
        assert_eq!(
            error_file_diagnostics("prelaunch.err", b"0123456789", 4),
            "Error file: prelaunch.err.\nLast 4 bytes of prelaunch.err :\n6789"
        );
        assert_eq!(
            stderr_diagnostics("stderr", b"ab", 4096),
            "Last 4096 bytes of stderr :\nab\n"
        );
        assert!(
            is_stderr_name("stderr") && is_stderr_name("x.STDERR.1") && !is_stderr_name("stdout")
        );
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(64 << 20), "64 MB");
        assert_eq!(human_bytes(3 << 29), "1.5 GB");
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
    }
}
