//! The jobs this node serves: `job_<clusterTs>_<id>` → (the container's user, the shuffle
//! secret), registered from a task container's `service_data["mapreduce_shuffle"]` (Java's
//! `ShuffleHandler.initializeApplication`: once per task container, later calls overwrite) and
//! dropped when the application is cleaned up on this node (`stopApplication`).
//!
//! With NM recovery (`yarn.nodemanager.recovery.enabled`) each job is also written to
//! `<first local dir>/nmPrivate/<appId>/mapreduce_shuffle.state` (mode 0600: it holds the
//! secret), beside the application's container records, and read back when the agent starts,
//! so reducers keep fetching from a restarted agent. The file goes with the application's
//! `nmPrivate` directory at its cleanup. It is text: `user=<user>` and `secret=<base64>`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hadoop_wire::token::{Limits, Token};
use nm_core::ids::AppId;

use super::ShuffleError;

/// The recovery file's name in an application's `nmPrivate` directory.
pub const STATE_FILE: &str = "mapreduce_shuffle.state";
/// Largest recovery file read back.
const MAX_STATE_BYTES: u64 = 64 << 10;

/// Caps on the service data's token: the secret is 8 bytes by default; nothing legitimate
/// comes near these.
const SERVICE_DATA_LIMITS: Limits = Limits {
    max_bytes: 64 << 10,
    max_text: 4 << 10,
    max_tokens: 1,
    max_secrets: 0,
    max_file: 1 << 20,
};

/// A registered job.
#[derive(Clone, PartialEq, Eq)]
pub struct Job {
    /// The container user (the map outputs are under `usercache/<user>`).
    pub user: String,
    pub app: AppId,
    /// The shuffle secret (the token's password): the HMAC key.
    pub secret: Vec<u8>,
}

/// Never prints the secret.
impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job")
            .field("user", &self.user)
            .field("app", &self.app)
            .field("secret", &format_args!("{} bytes", self.secret.len()))
            .finish()
    }
}

/// `JobID(Long.toString(clusterTimestamp), id).toString()`: `job_<ts>_<id, ≥ 4 digits>`.
pub fn job_id(app: AppId) -> String {
    format!("job_{}_{:04}", app.cluster_timestamp, app.id)
}

/// The registered jobs, shared by the ContainerManagementProtocol handlers (register), the
/// launcher (application cleanup) and the service's loops (lookups).
#[derive(Debug, Clone, Default)]
pub struct Jobs {
    inner: Arc<RwLock<HashMap<String, Arc<Job>>>>,
    /// Where recovery files go (`None`: recovery off).
    state_dirs: Option<Arc<Vec<PathBuf>>>,
    /// The running service's index cache: a stopped job's entries leave it.
    cache: Arc<std::sync::OnceLock<Arc<super::index::IndexCache>>>,
}

impl Jobs {
    /// An empty registry; with `recovery_dirs` (the local dirs, recovery on) jobs are
    /// recorded under the first one.
    pub fn new(recovery_dirs: Option<Vec<PathBuf>>) -> Jobs {
        Jobs {
            inner: Arc::default(),
            state_dirs: recovery_dirs.filter(|d| !d.is_empty()).map(Arc::new),
            cache: Arc::default(),
        }
    }

    /// The service's index cache, emptied of a job at its stop.
    pub(crate) fn attach_cache(&self, cache: Arc<super::index::IndexCache>) {
        let _ = self.cache.set(cache);
    }

    /// The job registered under `job_id`.
    pub fn get(&self, job_id: &str) -> Option<Arc<Job>> {
        self.inner
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(job_id)
            .cloned()
    }

    /// How many jobs are registered.
    pub fn len(&self) -> usize {
        self.inner.read().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Whether no job is registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn state_path(&self, app: AppId) -> Option<PathBuf> {
        let dirs = self.state_dirs.as_ref()?;
        Some(
            dirs[0]
                .join("nmPrivate")
                .join(app.to_string())
                .join(STATE_FILE),
        )
    }

    /// A task container's `service_data["mapreduce_shuffle"]` for an application of `user`:
    /// the job `job_<ts>_<id>` of `app` (derived from the application, not from the token)
    /// gets the token's password as its secret. A repeated registration overwrites.
    pub fn register(
        &self,
        user: &str,
        app: AppId,
        service_data: &[u8],
    ) -> Result<(), ShuffleError> {
        let token = Token::from_writable(service_data, &SERVICE_DATA_LIMITS).map_err(|e| {
            ShuffleError::ServiceData {
                app: app.to_string(),
                reason: e.to_string(),
            }
        })?;
        let job = Job {
            user: user.to_string(),
            app,
            secret: token.password,
        };
        let id = job_id(app);
        let unchanged = self.get(&id).is_some_and(|j| *j == job);
        if !unchanged {
            if let Some(path) = self.state_path(app) {
                write_state(&path, &job)?;
            }
            tracing::info!("mapreduce_shuffle: serving {id} for {user}");
            self.inner
                .write()
                .unwrap_or_else(|p| p.into_inner())
                .insert(id, Arc::new(job));
        }
        Ok(())
    }

    /// The application was cleaned up on this node: its job is no longer served.
    pub fn stop_application(&self, app: AppId) {
        let gone = self
            .inner
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&job_id(app));
        if gone.is_some() {
            tracing::info!("mapreduce_shuffle: {} stopped", job_id(app));
        }
        if let Some(cache) = self.cache.get() {
            cache.remove_job(&job_id(app));
        }
        if let Some(path) = self.state_path(app) {
            let _ = std::fs::remove_file(path);
        }
    }

    /// Reads back the jobs a previous run recorded (recovery on), from every local dir's
    /// `nmPrivate/<appId>/mapreduce_shuffle.state`. Returns how many were recovered; an
    /// unreadable file is skipped with a warning.
    pub fn recover(&self, local_dirs: &[PathBuf]) -> usize {
        if self.state_dirs.is_none() {
            return 0;
        }
        let mut n = 0;
        for dir in local_dirs {
            let Ok(apps) = std::fs::read_dir(dir.join("nmPrivate")) else {
                continue;
            };
            for entry in apps.flatten() {
                let Some(app) = entry.file_name().to_str().and_then(AppId::parse) else {
                    continue;
                };
                let path = entry.path().join(STATE_FILE);
                match read_state(&path, app) {
                    Ok(Some(job)) => {
                        self.inner
                            .write()
                            .unwrap_or_else(|p| p.into_inner())
                            .insert(job_id(app), Arc::new(job));
                        n += 1;
                    }
                    Ok(None) => {}
                    Err(e) => tracing::warn!("{}: {e}; not recovered", path.display()),
                }
            }
        }
        if n > 0 {
            tracing::info!("mapreduce_shuffle: recovered {n} job(s)");
        }
        n
    }
}

fn write_state(path: &std::path::Path, job: &Job) -> Result<(), ShuffleError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let err = |source| ShuffleError::State {
        path: path.display().to_string(),
        source,
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(err)?;
    }
    let tmp = path.with_extension("tmp");
    let text = format!(
        "user={}\nsecret={}\n",
        job.user,
        STANDARD.encode(&job.secret)
    );
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(err)?;
    f.write_all(text.as_bytes()).map_err(err)?;
    f.sync_data().map_err(err)?;
    std::fs::rename(&tmp, path).map_err(err)
}

fn read_state(path: &std::path::Path, app: AppId) -> Result<Option<Job>, String> {
    use std::io::Read;
    let f = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let mut text = String::new();
    f.take(MAX_STATE_BYTES)
        .read_to_string(&mut text)
        .map_err(|e| e.to_string())?;
    let mut user = None;
    let mut secret = None;
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("user=") {
            user = Some(v.to_string());
        } else if let Some(v) = line.strip_prefix("secret=") {
            secret = Some(STANDARD.decode(v).map_err(|e| format!("bad secret: {e}"))?);
        }
    }
    match (user, secret) {
        (Some(user), Some(secret)) if !user.is_empty() => Ok(Some(Job { user, app, secret })),
        _ => Err("missing user or secret".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// shuffle.md §1.3's worked example.
    const SERVICE_DATA: &str = "17166a6f625f313730303030303030303030305f30303031\
        080102030405060708\
        0d6d61707265647563652e6a6f62\
        166a6f625f313730303030303030303030305f30303031";

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn service_data_registers_the_job_of_the_application() {
        let jobs = Jobs::new(None);
        let app = AppId::new(1_700_000_000_000, 1);
        jobs.register("alice", app, &hex(SERVICE_DATA)).unwrap();
        let j = jobs.get("job_1700000000000_0001").unwrap();
        assert_eq!(j.user, "alice");
        assert_eq!(j.secret, [1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(job_id(AppId::new(5, 12345)), "job_5_12345");
        jobs.stop_application(app);
        assert!(jobs.get("job_1700000000000_0001").is_none());
        // truncated data is refused, nothing registered
        assert!(jobs
            .register("alice", app, &hex(SERVICE_DATA)[..10])
            .is_err());
        assert!(jobs.is_empty());
    }

    #[test]
    fn recovery_files_bring_jobs_back_and_go_at_stop() {
        let dir = tempfile::tempdir().unwrap();
        let dirs = vec![dir.path().join("l1"), dir.path().join("l2")];
        let app = AppId::new(1_700_000_000_000, 7);
        let jobs = Jobs::new(Some(dirs.clone()));
        jobs.register("bob", app, &hex(SERVICE_DATA)).unwrap();
        let path = dirs[0]
            .join("nmPrivate")
            .join(app.to_string())
            .join(STATE_FILE);
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let again = Jobs::new(Some(dirs.clone()));
        assert_eq!(again.recover(&dirs), 1);
        let j = again.get("job_1700000000000_0007").unwrap();
        assert_eq!((j.user.as_str(), j.secret.len()), ("bob", 8));
        again.stop_application(app);
        assert!(!path.exists());
        assert_eq!(Jobs::new(Some(dirs.clone())).recover(&dirs), 0);
    }
}
