//! The container localizer: every `LocalResource` of a container downloaded (and unpacked)
//! into the node's cache before launch, as Java's `ResourceLocalizationService` with
//! `FSDownload` does it. Its `hdfs:` sources are read by the HDFS-reader thread
//! ([`crate::hdfs_reader`]); the ContainerManagementProtocol server ([`crate::cmp_server`])
//! only accepts the start that leads here. The rules (paths, modes, unpack plans, messages) are `nm_core::localization`; this
//! module does the I/O.
//!
//! How the pieces connect:
//!
//! ```text
//!  launch worker thread (one per container)
//!    │ ResourceLocalizer::localize(user, app, container, &[ResourceRequest])
//!    v
//!  cache map (Mutex + Condvar): (scope, CacheKey) → Busy | Ready(path)
//!    │ miss: this caller downloads; a hit on Busy waits for that download
//!    v
//!  download: local dir (round robin, room for the size estimate) → <root>/<N> from the
//!  root's DirAllocator → <dest>_tmp/<basename>:
//!      file: URLs  std::fs (stat, timestamp, public check, copy or unpack)
//!      hdfs: URLs  hdfs_reader::HdfsFetcher → the HDFS-reader thread (stat as the submitter,
//!                  timestamp, public check, CRC-checked read), then unpack here
//!    → modes per visibility → rename <dest>_tmp → <dest> → Ready(<dest>/<basename>)
//!    v
//!  Vec<LocalizedResource { path, link }> for the launch script, or ResourceError (its text
//!  is the container's diagnostics; the container completes with −1000)
//! ```
//!
//! Scopes: PUBLIC downloads are shared by every user (the agent reads them as itself), PRIVATE
//! ones by the containers of one user, APPLICATION ones by the containers of one application;
//! [`ResourceLocalizer::app_finished`] forgets an application's downloads and removes
//! `usercache/<user>/appcache/<appId>` in every local dir (Java's localization service removes
//! the same directory when an application finishes).
//!
//! Threads: a `ResourceLocalizer` is `Send + Sync`; share it with `Arc` and call it from any
//! number of launch workers at once. Its lock is held only for cache-map and counter updates,
//! never during I/O. `localize` blocks (file copies, HDFS reads through the reader thread), so
//! never call it on the ring thread or on the HDFS-reader thread itself. A failed download is
//! not remembered: every container waiting for it then tries again itself.

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{self, Read};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use nm_core::ids::{AppId, ContainerId};
use nm_core::localization::{
    self as rules, ArchiveKind, CacheKey, DirAllocator, LocalizationError, Perms, ResourceRequest,
    Unpack, Visibility,
};

use crate::hdfs_reader::{FetchRequest, HdfsFetcher, LocalizeError};
use crate::shared::lock;

/// The longest symlink target read from a zip entry.
const MAX_LINK_TARGET: u64 = 4096;
/// Numbered directories tried when earlier ones exist (left by an earlier agent run).
const MAX_DIR_ATTEMPTS: u32 = 10_000;

/// Why a container's resources could not be localized. The text is the container's
/// diagnostics.
#[derive(Debug, thiserror::Error)]
pub enum ResourceError {
    /// A rule refused it (bad request, changed timestamp, not public, unsafe archive entry).
    #[error(transparent)]
    Rule(#[from] LocalizationError),
    /// The HDFS side (reader, NameNode, DataNodes, not configured).
    #[error(transparent)]
    Hdfs(#[from] LocalizeError),
    #[error("File {url} does not exist")]
    NotFound { url: String },
    #[error("Resource {url}: {what}")]
    Unsupported { url: String, what: String },
    #[error("Resource {url}: no local dir has {need} bytes free ({dirs})")]
    NoSpace {
        url: String,
        need: u64,
        dirs: String,
    },
    #[error("Resource {url}: cannot unpack {archive}: {source}")]
    BadArchive {
        url: String,
        archive: String,
        #[source]
        source: io::Error,
    },
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },
    #[error("the local dir {0} is not an absolute path")]
    BadLocalDir(PathBuf),
}

impl ResourceError {
    fn io(context: impl Into<String>, source: io::Error) -> Self {
        ResourceError::Io {
            context: context.into(),
            source,
        }
    }

    /// What the container's diagnostics say.
    pub fn diagnostics(&self) -> String {
        self.to_string()
    }
}

/// One localized resource, for the launch script: link `link` in the work dir to `path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalizedResource {
    /// `<dest>/<source basename>` (a file, or the directory an archive was unpacked into).
    pub path: PathBuf,
    pub link: String,
}

/// Who shares a download.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Scope {
    Public,
    Private(String),
    App(String, AppId),
}

#[derive(Debug)]
enum Slot {
    Busy,
    Ready(PathBuf),
}

#[derive(Debug, Default)]
struct State {
    entries: HashMap<(Scope, CacheKey), Slot>,
    allocators: HashMap<PathBuf, DirAllocator>,
    next_dir: usize,
}

/// The node's resource cache and its downloader (see the module docs).
#[derive(Debug)]
pub struct ResourceLocalizer {
    local_dirs: Vec<PathBuf>,
    /// The disk checks' verdict: downloads go to good dirs; a cached file under an errored
    /// dir is downloaded again (`None`: every local dir is good).
    live: Option<Arc<crate::disks::LiveDirs>>,
    default_fs: String,
    hdfs: Option<HdfsFetcher>,
    /// A fresh allocator (the configured limit) for each new cache root.
    allocator: DirAllocator,
    state: Mutex<State>,
    changed: Condvar,
    downloads: AtomicU64,
}

/// `fs.defaultFS` is a local file system (`file:` or unset).
fn is_local_fs(fs: &str) -> bool {
    let f = fs.trim().to_ascii_lowercase();
    f.is_empty() || f.starts_with("file:")
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// A file's modification time in ms, as Java's `File.lastModified` gives it.
fn mtime_ms(md: &fs::Metadata) -> i64 {
    md.mtime()
        .saturating_mul(1000)
        .saturating_add(md.mtime_nsec() / 1_000_000)
}

impl ResourceLocalizer {
    /// A localizer over the node's `yarn.nodemanager.local-dirs`. `default_fs` is
    /// `fs.defaultFS` (URLs without a scheme are on it); `hdfs` is the reader's handle when
    /// `fs.defaultFS` is HDFS (from `hdfs_reader::Queue::fetcher`). `max_files` is
    /// `yarn.nodemanager.local-cache.max-files-per-directory`
    /// ([`rules::DEFAULT_MAX_FILES_PER_DIRECTORY`]).
    pub fn new(
        local_dirs: Vec<PathBuf>,
        default_fs: &str,
        hdfs: Option<HdfsFetcher>,
        max_files: usize,
    ) -> Result<ResourceLocalizer, ResourceError> {
        let allocator = DirAllocator::new(max_files)?;
        if let Some(d) = local_dirs.iter().find(|d| !d.is_absolute()) {
            return Err(ResourceError::BadLocalDir(d.clone()));
        }
        Ok(ResourceLocalizer {
            local_dirs,
            live: None,
            default_fs: default_fs.trim().to_string(),
            hdfs,
            allocator,
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            downloads: AtomicU64::new(0),
        })
    }

    /// As [`ResourceLocalizer::new`], with `fs.defaultFS` and
    /// `yarn.nodemanager.local-cache.max-files-per-directory` read from `conf`.
    pub fn from_conf(
        conf: &conf::Configuration,
        local_dirs: Vec<PathBuf>,
        hdfs: Option<HdfsFetcher>,
    ) -> Result<ResourceLocalizer, ResourceError> {
        const KEY: &str = "yarn.nodemanager.local-cache.max-files-per-directory";
        let max = match conf.try_get(KEY) {
            Ok(Some(_)) => conf
                .get_i64(KEY)
                .ok()
                .and_then(|v| usize::try_from(v).ok())
                .unwrap_or(0),
            _ => rules::DEFAULT_MAX_FILES_PER_DIRECTORY,
        };
        Self::new(local_dirs, &crate::config::default_fs(conf), hdfs, max)
    }

    /// Follows the disk checks: new downloads only on good local dirs, cached files only
    /// from good or full ones.
    pub fn with_live_dirs(mut self, live: Arc<crate::disks::LiveDirs>) -> Self {
        self.live = Some(live);
        self
    }

    /// Downloads served so far (a cache hit is not one).
    pub fn downloads(&self) -> u64 {
        self.downloads.load(Relaxed)
    }

    /// Localizes every request of `container` (run by `user`, of application `app`), in
    /// order; the first failure fails the container. The application's credentials are not
    /// given: on a Kerberized cluster its non-PUBLIC `hdfs:` resources fail
    /// ([`ResourceLocalizer::localize_with_tokens`] gives them).
    pub fn localize(
        &self,
        user: &str,
        app: &AppId,
        container: &ContainerId,
        requests: &[ResourceRequest],
    ) -> Result<Vec<LocalizedResource>, ResourceError> {
        self.localize_with_tokens(user, app, container, requests, None)
    }

    /// As [`ResourceLocalizer::localize`], with the application's credentials (the launch
    /// context's `tokens`, a Credentials file's bytes): on a Kerberized cluster APPLICATION and
    /// PRIVATE `hdfs:` resources are read with its HDFS delegation token, as Java's
    /// localizer reads them (see `localize`'s module docs).
    pub fn localize_with_tokens(
        &self,
        user: &str,
        app: &AppId,
        container: &ContainerId,
        requests: &[ResourceRequest],
        tokens: Option<&[u8]>,
    ) -> Result<Vec<LocalizedResource>, ResourceError> {
        rules::check_user(user)?;
        let mut out = Vec::with_capacity(requests.len());
        // shared by this container's fetches (copied once, when some resource is not PUBLIC)
        let tokens: Option<Arc<[u8]>> = tokens
            .filter(|t| {
                !t.is_empty() && requests.iter().any(|r| r.visibility != Visibility::Public)
            })
            .map(Arc::from);
        for req in requests {
            let path = self.one(user, app, req, tokens.as_ref()).inspect_err(|e| {
                tracing::warn!(
                    "localizing {} ({}) for {container} failed: {e}",
                    req.url,
                    req.link
                )
            })?;
            out.push(LocalizedResource {
                path,
                link: req.link.clone(),
            });
        }
        Ok(out)
    }

    /// Forgets `app`'s APPLICATION downloads and removes `usercache/<user>/appcache/<app>` in
    /// every local dir. Every local dir is tried; the first error is returned.
    pub fn app_finished(&self, user: &str, app: &AppId) -> Result<(), ResourceError> {
        rules::check_user(user)?;
        {
            let mut st = lock(&self.state);
            st.entries.retain(|(scope, _), _| match scope {
                Scope::App(u, a) => !(u == user && a == app),
                _ => true,
            });
            let roots: Vec<PathBuf> = self
                .local_dirs
                .iter()
                .map(|l| rules::cache_root(l, Visibility::Application, user, app))
                .collect();
            st.allocators.retain(|root, _| !roots.contains(root));
        }
        let mut first = None;
        for l in &self.local_dirs {
            let dir = rules::app_dir(l, user, app);
            match fs::remove_dir_all(&dir) {
                Ok(()) => tracing::info!("removed {}", dir.display()),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => {
                    tracing::warn!("removing {}: {e}", dir.display());
                    first
                        .get_or_insert(ResourceError::io(format!("removing {}", dir.display()), e));
                }
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// One request: from the cache, after another caller's download, or downloaded here.
    fn one(
        &self,
        user: &str,
        app: &AppId,
        req: &ResourceRequest,
        tokens: Option<&Arc<[u8]>>,
    ) -> Result<PathBuf, ResourceError> {
        let scope = match req.visibility {
            Visibility::Public => Scope::Public,
            Visibility::Private => Scope::Private(user.to_string()),
            Visibility::Application => Scope::App(user.to_string(), *app),
        };
        let key = (scope, req.key());
        {
            let mut st = lock(&self.state);
            loop {
                match st.entries.get(&key) {
                    Some(Slot::Ready(p)) => {
                        let readable = self.live.as_ref().is_none_or(|l| l.readable_local(p));
                        if readable && fs::symlink_metadata(p).is_ok() {
                            return Ok(p.clone());
                        }
                        tracing::warn!(
                            "{} vanished from the cache; downloading again",
                            p.display()
                        );
                        st.entries.insert(key.clone(), Slot::Busy);
                        break;
                    }
                    Some(Slot::Busy) => {
                        st = self.changed.wait(st).unwrap_or_else(|p| p.into_inner());
                    }
                    None => {
                        st.entries.insert(key.clone(), Slot::Busy);
                        break;
                    }
                }
            }
        }
        // the Busy slot goes even if the download panics, so that waiters never hang
        let mut guard = BusyGuard {
            loc: self,
            key: Some(key),
        };
        let result = self.download(user, app, req, tokens);
        // (the key is taken only on success: a failed download's Busy slot must go)
        if let Ok(p) = &result {
            if let Some(key) = guard.key.take() {
                lock(&self.state)
                    .entries
                    .insert(key, Slot::Ready(p.clone()));
                self.changed.notify_all();
            }
        }
        drop(guard);
        result
    }

    /// Picks a local dir with room, round robin.
    fn pick_local_dir(&self, req: &ResourceRequest) -> Result<PathBuf, ResourceError> {
        let need = req.space_estimate();
        let good;
        let dirs: &[PathBuf] = match &self.live {
            Some(l) => {
                good = l.good().local_dirs;
                &good
            }
            None => &self.local_dirs,
        };
        let n = dirs.len();
        let start = {
            let mut st = lock(&self.state);
            let s = st.next_dir;
            st.next_dir = st.next_dir.wrapping_add(1);
            s
        };
        for i in 0..n {
            let d = &dirs[(start + i) % n];
            match fs4::available_space(d) {
                Ok(free) if free >= need => return Ok(d.clone()),
                Ok(_) => {}
                Err(e) => tracing::debug!("local dir {}: {e}", d.display()),
            }
        }
        Err(ResourceError::NoSpace {
            url: req.url.to_string(),
            need,
            dirs: dirs
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(","),
        })
    }

    /// Creates the cache root's directory chain (modes as Java's executor gives them).
    fn make_root(
        &self,
        local: &Path,
        vis: Visibility,
        user: &str,
        app: &AppId,
    ) -> Result<PathBuf, ResourceError> {
        let mut chain: Vec<(PathBuf, u32)> = Vec::new();
        match vis {
            Visibility::Public => chain.push((local.join("filecache"), 0o755)),
            Visibility::Private | Visibility::Application => {
                let u = rules::user_dir(local, user);
                chain.push((local.join("usercache"), 0o755));
                chain.push((u.clone(), 0o750));
                if vis == Visibility::Private {
                    chain.push((u.join("filecache"), 0o710));
                } else {
                    chain.push((u.join("appcache"), 0o710));
                    let a = rules::app_dir(local, user, app);
                    chain.push((a.clone(), 0o710));
                    chain.push((a.join("filecache"), 0o710));
                }
            }
        }
        for (d, mode) in &chain {
            make_dir(d, *mode)?;
        }
        Ok(rules::cache_root(local, vis, user, app))
    }

    /// A fresh `<root>/<N>` (neither it nor `<N>_tmp` exists; parents created).
    fn fresh_dest(&self, root: &Path) -> Result<PathBuf, ResourceError> {
        for _ in 0..MAX_DIR_ATTEMPTS {
            let rel = {
                let mut st = lock(&self.state);
                st.allocators
                    .entry(root.to_path_buf())
                    .or_insert_with(|| self.allocator.clone())
                    .next_relative()
            };
            let dest = root.join(&rel);
            let mut p = root.to_path_buf();
            if let Some(parent) = rel.parent() {
                for c in parent.components() {
                    p.push(c);
                    make_dir(&p, rules::RESOURCE_DIR_MODE)?;
                }
            }
            let tmp = tmp_of(&dest);
            if fs::symlink_metadata(&dest).is_err() && fs::symlink_metadata(&tmp).is_err() {
                return Ok(dest);
            }
        }
        Err(ResourceError::io(
            format!("no free resource directory under {}", root.display()),
            io::Error::from(io::ErrorKind::AlreadyExists),
        ))
    }

    fn download(
        &self,
        user: &str,
        app: &AppId,
        req: &ResourceRequest,
        tokens: Option<&Arc<[u8]>>,
    ) -> Result<PathBuf, ResourceError> {
        let src = self.source(req, user, tokens)?;
        let local = self.pick_local_dir(req)?;
        let root = self.make_root(&local, req.visibility, user, app)?;
        let dest = self.fresh_dest(&root)?;
        let tmp = tmp_of(&dest);
        make_dir(&tmp, rules::RESOURCE_DIR_MODE)?;
        let name = req.url.basename().to_string();
        let target = tmp.join(&name);
        let r = self
            .fetch_into(&src, req, &tmp, &target)
            .and_then(|()| set_modes(&target, Perms::of(req.visibility)))
            .and_then(|()| {
                fs::rename(&tmp, &dest).map_err(|e| {
                    ResourceError::io(
                        format!("renaming {} to {}", tmp.display(), dest.display()),
                        e,
                    )
                })
            });
        if let Err(e) = r {
            if let Err(re) = fs::remove_dir_all(&tmp) {
                if re.kind() != io::ErrorKind::NotFound {
                    tracing::warn!("removing {}: {re}", tmp.display());
                }
            }
            return Err(e);
        }
        self.downloads.fetch_add(1, Relaxed);
        let path = dest.join(&name);
        tracing::info!("localized {} to {}", req.url, path.display());
        Ok(path)
    }

    /// Where the bytes come from.
    fn source(
        &self,
        req: &ResourceRequest,
        user: &str,
        tokens: Option<&Arc<[u8]>>,
    ) -> Result<Source, ResourceError> {
        let u = &req.url;
        let default_scheme = if is_local_fs(&self.default_fs) {
            "file".to_string()
        } else {
            self.default_fs
                .split(':')
                .next()
                .unwrap_or("")
                .to_ascii_lowercase()
        };
        let scheme = u.scheme.clone().unwrap_or(default_scheme);
        match scheme.as_str() {
            "file" => {
                if let Some(h) = u.host.as_deref().filter(|h| *h != "localhost") {
                    return Err(ResourceError::Unsupported {
                        url: u.to_string(),
                        what: format!("Wrong FS: host {h} on a local file URL, expected: file:///"),
                    });
                }
                Ok(Source::Local(PathBuf::from(&u.path)))
            }
            "hdfs" => {
                let fetcher = self.hdfs.as_ref().ok_or_else(|| LocalizeError::NotConfigured {
                    default_fs: if self.default_fs.is_empty() {
                        "file:///".into()
                    } else {
                        self.default_fs.clone()
                    },
                })?;
                let full = format!("hdfs://{}{}", u.authority().unwrap_or_default(), u.path);
                let path = crate::hdfs_reader::hdfs_path(&full, fetcher.default_fs())?;
                Ok(Source::Hdfs {
                    fetcher: fetcher.clone(),
                    path,
                    user: match req.visibility {
                        Visibility::Public => None,
                        _ => Some(user.to_string()),
                    },
                    // PUBLIC resources are read with the agent's own login
                    tokens: match req.visibility {
                        Visibility::Public => None,
                        _ => tokens.cloned(),
                    },
                })
            }
            other => Err(ResourceError::Unsupported {
                url: u.to_string(),
                what: format!("no file system for scheme {other:?} on this node (file: and hdfs: are supported)"),
            }),
        }
    }

    /// Puts the source at `target` (copied, or unpacked into a directory of that name).
    fn fetch_into(
        &self,
        src: &Source,
        req: &ResourceRequest,
        tmp: &Path,
        target: &Path,
    ) -> Result<(), ResourceError> {
        let url = req.url.to_string();
        let plan = Unpack::plan(req.kind, req.url.basename(), req.pattern.as_deref());
        if plan == Unpack::CopyNotAnArchive {
            tracing::warn!(
                "Cannot unpack {url}: not a .jar, .zip, .tar.gz, .tgz or .tar; copied as is"
            );
        }
        match src {
            Source::Local(path) => {
                let md = fs::metadata(path).map_err(|e| local_err(&url, path, e))?;
                rules::check_timestamp(&req.url, req.timestamp, mtime_ms(&md), now_ms())?;
                if req.visibility == Visibility::Public && !local_is_public(path, &md)? {
                    return Err(LocalizationError::NotPublic { path: url }.into());
                }
                match &plan {
                    Unpack::Copy | Unpack::CopyNotAnArchive => copy_local(path, &md, target, &url),
                    _ if md.is_dir() => Err(ResourceError::Unsupported {
                        url,
                        what: "is a directory, not an archive".into(),
                    }),
                    _ => unpack(&plan, path, target, req),
                }
            }
            Source::Hdfs {
                fetcher,
                path,
                user,
                tokens,
            } => {
                let copy = matches!(plan, Unpack::Copy | Unpack::CopyNotAnArchive);
                let file = if copy {
                    target.to_path_buf()
                } else {
                    tmp.join(format!(".{}.download", req.url.basename()))
                };
                fetcher.fetch(FetchRequest {
                    url: req.url.clone(),
                    path: path.clone(),
                    user: user.clone(),
                    timestamp: req.timestamp,
                    public: req.visibility == Visibility::Public,
                    dest: file.clone(),
                    tokens: tokens.clone(),
                })?;
                if copy {
                    return Ok(());
                }
                let r = unpack(&plan, &file, target, req);
                if let Err(e) = fs::remove_file(&file) {
                    tracing::warn!("removing {}: {e}", file.display());
                }
                r
            }
        }
    }
}

/// Removes a download's Busy slot (unless taken: the download succeeded) and wakes waiters.
struct BusyGuard<'a> {
    loc: &'a ResourceLocalizer,
    key: Option<(Scope, CacheKey)>,
}

impl Drop for BusyGuard<'_> {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            lock(&self.loc.state).entries.remove(&key);
            self.loc.changed.notify_all();
        }
    }
}

enum Source {
    Local(PathBuf),
    Hdfs {
        fetcher: HdfsFetcher,
        path: String,
        user: Option<String>,
        tokens: Option<Arc<[u8]>>,
    },
}

fn tmp_of(dest: &Path) -> PathBuf {
    let mut s = dest.as_os_str().to_owned();
    s.push("_tmp");
    PathBuf::from(s)
}

fn local_err(url: &str, path: &Path, e: io::Error) -> ResourceError {
    if e.kind() == io::ErrorKind::NotFound {
        ResourceError::NotFound {
            url: url.to_string(),
        }
    } else {
        ResourceError::io(format!("{}", path.display()), e)
    }
}

/// Creates `d` with `mode` if it does not exist (the mode is then set exactly, past the umask).
fn make_dir(d: &Path, mode: u32) -> Result<(), ResourceError> {
    match fs::DirBuilder::new().mode(mode).create(d) {
        Ok(()) => fs::set_permissions(d, fs::Permissions::from_mode(mode))
            .map_err(|e| ResourceError::io(format!("chmod {}", d.display()), e)),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && d.is_dir() => Ok(()),
        Err(e) => Err(ResourceError::io(format!("creating {}", d.display()), e)),
    }
}

/// Java's `isPublic` on the local file system: the file (every file and directory below it,
/// for a directory) readable by others, directories also executable, and every directory
/// above it executable by others.
fn local_is_public(path: &Path, md: &fs::Metadata) -> Result<bool, ResourceError> {
    fn tree(path: &Path, md: &fs::Metadata) -> Result<bool, ResourceError> {
        let mode = md.mode();
        if md.is_dir() {
            if mode & 0o005 != 0o005 {
                return Ok(false);
            }
            let rd = fs::read_dir(path)
                .map_err(|e| ResourceError::io(format!("listing {}", path.display()), e))?;
            for e in rd {
                let e =
                    e.map_err(|e| ResourceError::io(format!("listing {}", path.display()), e))?;
                let p = e.path();
                let m = fs::metadata(&p)
                    .map_err(|e| ResourceError::io(format!("{}", p.display()), e))?;
                let link = fs::symlink_metadata(&p).is_ok_and(|l| l.file_type().is_symlink());
                let ok = if link {
                    // a symlink's target is judged by its own mode, not walked (no cycles)
                    let need = if m.is_dir() { 0o005 } else { 0o004 };
                    m.mode() & need == need
                } else {
                    tree(&p, &m)?
                };
                if !ok {
                    return Ok(false);
                }
            }
            Ok(true)
        } else {
            Ok(mode & 0o004 != 0)
        }
    }
    if !tree(path, md)? {
        return Ok(false);
    }
    for dir in path.ancestors().skip(1) {
        let m =
            fs::metadata(dir).map_err(|e| ResourceError::io(format!("{}", dir.display()), e))?;
        if m.mode() & 0o001 == 0 {
            return Ok(false);
        }
    }
    Ok(true)
}

/// FILE: a file copied; a directory copied recursively (symlinks kept when they stay inside).
fn copy_local(src: &Path, md: &fs::Metadata, dst: &Path, url: &str) -> Result<(), ResourceError> {
    if md.is_file() {
        fs::copy(src, dst).map_err(|e| {
            ResourceError::io(format!("copying {} to {}", src.display(), dst.display()), e)
        })?;
        return Ok(());
    }
    if !md.is_dir() {
        return Err(ResourceError::Unsupported {
            url: url.to_string(),
            what: "is neither a file nor a directory".into(),
        });
    }
    fn walk(src: &Path, dst: &Path, rel: &Path, url: &str) -> Result<(), ResourceError> {
        make_dir(dst, 0o700)?;
        let rd = fs::read_dir(src)
            .map_err(|e| ResourceError::io(format!("listing {}", src.display()), e))?;
        for e in rd {
            let e = e.map_err(|e| ResourceError::io(format!("listing {}", src.display()), e))?;
            let (s, d, r) = (e.path(), dst.join(e.file_name()), rel.join(e.file_name()));
            let m = fs::symlink_metadata(&s)
                .map_err(|e| ResourceError::io(format!("{}", s.display()), e))?;
            if m.file_type().is_symlink() {
                let t = fs::read_link(&s)
                    .map_err(|e| ResourceError::io(format!("{}", s.display()), e))?;
                if !rules::link_stays_inside(&r, &t) {
                    return Err(ResourceError::Unsupported {
                        url: url.to_string(),
                        what: format!(
                            "symlink {} points outside the resource ({})",
                            r.display(),
                            t.display()
                        ),
                    });
                }
                std::os::unix::fs::symlink(&t, &d)
                    .map_err(|e| ResourceError::io(format!("symlink {}", d.display()), e))?;
            } else if m.is_dir() {
                walk(&s, &d, &r, url)?;
            } else if m.is_file() {
                fs::copy(&s, &d).map_err(|e| {
                    ResourceError::io(format!("copying {} to {}", s.display(), d.display()), e)
                })?;
            }
        }
        Ok(())
    }
    walk(src, dst, Path::new(""), url)
}

/// Modes per visibility on everything at and below `p` (symlinks untouched).
fn set_modes(p: &Path, perms: Perms) -> Result<(), ResourceError> {
    let m =
        fs::symlink_metadata(p).map_err(|e| ResourceError::io(format!("{}", p.display()), e))?;
    if m.file_type().is_symlink() {
        return Ok(());
    }
    let chmod = |mode| {
        fs::set_permissions(p, fs::Permissions::from_mode(mode))
            .map_err(|e| ResourceError::io(format!("chmod {}", p.display()), e))
    };
    if m.is_dir() {
        // writable while its entries change, then the final mode
        chmod(0o700)?;
        let rd = fs::read_dir(p)
            .map_err(|e| ResourceError::io(format!("listing {}", p.display()), e))?;
        for e in rd {
            let e = e.map_err(|e| ResourceError::io(format!("listing {}", p.display()), e))?;
            set_modes(&e.path(), perms)?;
        }
        chmod(perms.dir)
    } else {
        chmod(perms.file)
    }
}

/// Unpacks the archive file `archive` into the new directory `target`.
fn unpack(
    plan: &Unpack,
    archive: &Path,
    target: &Path,
    req: &ResourceRequest,
) -> Result<(), ResourceError> {
    let url = req.url.to_string();
    let name = req.url.basename().to_string();
    let open = || File::open(archive).map_err(|e| local_err(&url, archive, e));
    let bad = |e: io::Error| ResourceError::BadArchive {
        url: url.clone(),
        archive: name.clone(),
        source: e,
    };
    make_dir(target, 0o700)?;
    match plan {
        Unpack::Copy | Unpack::CopyNotAnArchive => unreachable_plan(),
        Unpack::Archive(ArchiveKind::Tar { gzip }) => {
            let f = open()?;
            if *gzip {
                untar(
                    flate2::read::MultiGzDecoder::new(io::BufReader::new(f)),
                    target,
                    &name,
                    bad,
                )
            } else {
                untar(io::BufReader::new(f), target, &name, bad)
            }
        }
        Unpack::Archive(ArchiveKind::Zip | ArchiveKind::Jar) => {
            unzip(open()?, target, &name, None, bad)
        }
        Unpack::JarPattern(pattern) => {
            let re = match pattern {
                Some(p) => Some(regex::Regex::new(&format!("^(?:{p})$")).map_err(|e| {
                    LocalizationError::BadPattern {
                        key: req.link.clone(),
                        pattern: p.clone(),
                        reason: e.to_string(),
                    }
                })?),
                None => None,
            };
            unzip(open()?, target, &name, re.as_ref(), bad)?;
            // the jar itself is kept beside the entries
            let keep = target.join(&name);
            if fs::symlink_metadata(&keep).is_ok() {
                return Err(LocalizationError::UnsafeEntry {
                    archive: name.clone(),
                    entry: name.clone(),
                    reason: "has the jar's own name (the jar is kept there)",
                }
                .into());
            }
            fs::copy(archive, &keep).map_err(|e| {
                ResourceError::io(
                    format!("copying {} to {}", archive.display(), keep.display()),
                    e,
                )
            })?;
            Ok(())
        }
    }
}

fn unreachable_plan() -> Result<(), ResourceError> {
    Err(ResourceError::io(
        "internal: a copy plan reached the unpacker",
        io::Error::from(io::ErrorKind::InvalidInput),
    ))
}

/// Refuses to write below a symlink that an earlier entry made: the names alone can no
/// longer tell where the bytes would land.
fn no_symlink_on_the_way(
    target: &Path,
    rel: &Path,
    archive: &str,
    entry: &str,
) -> Result<(), ResourceError> {
    let mut p = target.to_path_buf();
    if let Some(parent) = rel.parent() {
        for c in parent.components() {
            p.push(c);
            if fs::symlink_metadata(&p).is_ok_and(|m| m.file_type().is_symlink()) {
                return Err(LocalizationError::UnsafeEntry {
                    archive: archive.to_string(),
                    entry: entry.to_string(),
                    reason: "lies below a symlink of the archive",
                }
                .into());
            }
        }
    }
    Ok(())
}

fn untar<R: Read>(
    r: R,
    target: &Path,
    name: &str,
    bad: impl Fn(io::Error) -> ResourceError,
) -> Result<(), ResourceError> {
    use tar::EntryType as T;
    let mut a = tar::Archive::new(r);
    a.set_preserve_permissions(false);
    a.set_unpack_xattrs(false);
    for e in a.entries().map_err(&bad)? {
        let mut e = e.map_err(&bad)?;
        let raw = e.path().map_err(&bad)?.to_string_lossy().into_owned();
        let kind = e.header().entry_type();
        if matches!(
            kind,
            T::XGlobalHeader | T::XHeader | T::GNULongName | T::GNULongLink
        ) {
            continue;
        }
        let rel = rules::entry_path(name, &raw)?;
        if rel.as_os_str().is_empty() {
            continue; // "./"
        }
        no_symlink_on_the_way(target, &rel, name, &raw)?;
        match kind {
            T::Directory => {
                create_dirs(target, &rel)?;
                continue;
            }
            T::Regular | T::Continuous | T::GNUSparse => {}
            T::Symlink => {
                let t = e
                    .link_name()
                    .map_err(&bad)?
                    .unwrap_or_default()
                    .into_owned();
                if !rules::link_stays_inside(&rel, &t) {
                    return Err(LocalizationError::UnsafeEntry {
                        archive: name.to_string(),
                        entry: raw,
                        reason: "is a symlink pointing outside the destination",
                    }
                    .into());
                }
            }
            T::Link => {
                let t = e
                    .link_name()
                    .map_err(&bad)?
                    .unwrap_or_default()
                    .into_owned();
                let t = t.to_string_lossy().into_owned();
                rules::entry_path(name, &t).map_err(|_| LocalizationError::UnsafeEntry {
                    archive: name.to_string(),
                    entry: raw.clone(),
                    reason: "is a hard link to a file outside the destination",
                })?;
            }
            _ => {
                return Err(LocalizationError::UnsafeEntry {
                    archive: name.to_string(),
                    entry: raw,
                    reason: "is a device, fifo or other special file",
                }
                .into())
            }
        }
        if let Some(parent) = rel.parent() {
            create_dirs(target, parent)?;
        }
        if !e.unpack_in(target).map_err(&bad)? {
            return Err(LocalizationError::UnsafeEntry {
                archive: name.to_string(),
                entry: raw,
                reason: "would land outside the destination",
            }
            .into());
        }
    }
    Ok(())
}

/// Directories `rel` under `target`, each 0700 while unpacking (the final modes come later).
fn create_dirs(target: &Path, rel: &Path) -> Result<(), ResourceError> {
    let mut p = target.to_path_buf();
    for c in rel.components() {
        p.push(c);
        match fs::symlink_metadata(&p) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(ResourceError::io(
                    format!("unpacking: {} exists and is not a directory", p.display()),
                    io::Error::from(io::ErrorKind::AlreadyExists),
                ))
            }
            Err(_) => make_dir(&p, 0o700)?,
        }
    }
    Ok(())
}

fn unzip(
    f: File,
    target: &Path,
    name: &str,
    only: Option<&regex::Regex>,
    bad: impl Fn(io::Error) -> ResourceError,
) -> Result<(), ResourceError> {
    let zerr = |e: zip::result::ZipError| match e {
        zip::result::ZipError::Io(e) => e,
        other => io::Error::new(io::ErrorKind::InvalidData, other.to_string()),
    };
    let mut z = zip::ZipArchive::new(io::BufReader::new(f)).map_err(|e| bad(zerr(e)))?;
    for i in 0..z.len() {
        let mut e = z.by_index(i).map_err(|e| bad(zerr(e)))?;
        let raw = e.name().to_string();
        if only.is_some_and(|re| !re.is_match(&raw)) {
            continue;
        }
        let rel = rules::entry_path(name, &raw)?;
        if rel.as_os_str().is_empty() {
            continue;
        }
        no_symlink_on_the_way(target, &rel, name, &raw)?;
        if e.is_dir() {
            create_dirs(target, &rel)?;
            continue;
        }
        if let Some(parent) = rel.parent() {
            create_dirs(target, parent)?;
        }
        let out = target.join(&rel);
        if e.is_symlink() {
            let mut t = String::new();
            (&mut e)
                .take(MAX_LINK_TARGET)
                .read_to_string(&mut t)
                .map_err(&bad)?;
            if !rules::link_stays_inside(&rel, Path::new(&t)) {
                return Err(LocalizationError::UnsafeEntry {
                    archive: name.to_string(),
                    entry: raw,
                    reason: "is a symlink pointing outside the destination",
                }
                .into());
            }
            std::os::unix::fs::symlink(&t, &out)
                .map_err(|e| ResourceError::io(format!("symlink {}", out.display()), e))?;
            continue;
        }
        if fs::symlink_metadata(&out).is_ok_and(|m| m.file_type().is_symlink() || m.is_dir()) {
            return Err(LocalizationError::UnsafeEntry {
                archive: name.to_string(),
                entry: raw,
                reason: "would replace a symlink or directory of the archive",
            }
            .into());
        }
        let mut w = File::create(&out)
            .map_err(|e| ResourceError::io(format!("creating {}", out.display()), e))?;
        io::copy(&mut e, &mut w).map_err(&bad)?;
    }
    Ok(())
}
