//! Resource localization rules, without I/O: what a container's `LocalResourceProto`s ask for,
//! where each download goes, how it is unpacked and with which permissions, and the messages
//! a failure carries (Java's `ResourceLocalizationService`, `LocalResourcesTrackerImpl`,
//! `LocalCacheDirectoryManager` and `FSDownload` decide the same things). `nm-runtime`'s
//! `localizer` does the file system work with these answers.
//!
//! How the types connect:
//!
//! ```text
//!  ContainerLaunchContextProto.localResources: [StringLocalResourceMapProto]
//!        │ ResourceRequest::parse_all  (Java's "Null resource URL|type|visibility …" checks,
//!        v                              URL rules, link names)
//!  ResourceRequest { link, url: ResourceUrl, size, timestamp, kind, visibility, pattern }
//!        │ .key() → CacheKey (path, timestamp, type, pattern): one download per key and scope
//!        │ cache_root(local dir, visibility, user, app)  <L>/filecache | <L>/usercache/<u>/…
//!        │ DirAllocator::next() → "<root>/<N>" (N from 10, sub-directories when full)
//!        │ Unpack::plan(kind, basename)  copy | unjar(pattern) | unzip | untar(gz)
//!        │ Perms::of(visibility)         0555/0755 public, 0500/0700 private + application
//!        v
//!  on failure: LocalizationError (its Display is the container's diagnostics)
//! ```
//!
//! Time stamps in messages are formatted as Java's `Times.formatISO8601`
//! (`yyyy-MM-dd'T'HH:mm:ss.SSSZ`), always in UTC (`+0000`): Java uses the JVM's default time
//! zone, which is UTC on the nodes this agent is deployed to.

use std::fmt::{self, Write as _};
use std::path::{Component, Path, PathBuf};

use hadoop_wire::pb::hadoop::yarn::{
    LocalResourceProto, LocalResourceTypeProto, LocalResourceVisibilityProto,
    StringLocalResourceMapProto, UrlProto,
};

use crate::ids::AppId;

/// `yarn.nodemanager.local-cache.max-files-per-directory` when not configured.
pub const DEFAULT_MAX_FILES_PER_DIRECTORY: usize = 8192;
/// Sub-directories a cache directory may hold (`0`-`9`, `a`-`z`), kept free of the limit.
pub const SUB_DIRS: usize = 36;
/// The first resource number of every cache root (Java's counter starts at 9 and increments
/// before use).
pub const FIRST_RESOURCE_NUMBER: u64 = 10;
/// Mode of each numbered resource directory `<root>/<N>` (Java's `cachePerms`).
pub const RESOURCE_DIR_MODE: u32 = 0o755;
/// Archives need room for the unpacked tree: Java reserves five times the size.
pub const ARCHIVE_SPACE_FACTOR: u64 = 5;
/// The longest link name / URL path accepted (a path, not a document).
pub const MAX_PATH_LEN: usize = 4096;

/// Why a resource cannot be localized. The Display text is what the container's diagnostics
/// say; the Java-defined ones are worded as Java words them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LocalizationError {
    /// No `resource` URL (`value` is the resource in protobuf short text form, or `null`).
    #[error("Null resource URL for local resource {key} : {value}")]
    NullUrl { key: String, value: String },
    #[error("Null resource type for local resource {key} : {value}")]
    NullType { key: String, value: String },
    #[error("Null resource visibility for local resource {key} : {value}")]
    NullVisibility { key: String, value: String },
    /// A URL this node cannot turn into a source path.
    #[error("Invalid resource URL {url} for local resource {key}: {reason}")]
    BadUrl {
        key: String,
        url: String,
        reason: String,
    },
    /// A link name that would not stay inside the container's work directory.
    #[error("Invalid link name {key:?} for a local resource: {reason}")]
    BadLinkName { key: String, reason: &'static str },
    /// The source's modification time is not the resource's timestamp.
    #[error(
        "Resource {path} changed on src filesystem - expected: \"{}\", was: \"{}\", current time: \"{}\"",
        format_iso8601(*expected_ms), format_iso8601(*was_ms), format_iso8601(*now_ms)
    )]
    ChangedOnSrc {
        path: String,
        expected_ms: i64,
        was_ms: i64,
        now_ms: i64,
    },
    /// A PUBLIC resource that not everyone may read.
    #[error("Resource {path} is not publicly accessible and as such cannot be part of the public cache.")]
    NotPublic { path: String },
    /// An archive entry that would land outside the destination.
    #[error("Refusing to unpack {archive}: entry {entry:?} {reason}")]
    UnsafeEntry {
        archive: String,
        entry: String,
        reason: &'static str,
    },
    /// A PATTERN resource whose pattern is not a regular expression.
    #[error("Invalid pattern {pattern:?} for local resource {key}: {reason}")]
    BadPattern {
        key: String,
        pattern: String,
        reason: String,
    },
    /// A user name that cannot be a directory name.
    #[error("Invalid user name {0:?} for the user cache")]
    BadUser(String),
    /// `yarn.nodemanager.local-cache.max-files-per-directory` too small.
    #[error("yarn.nodemanager.local-cache.max-files-per-directory = {0}: must be larger than {SUB_DIRS}")]
    MaxFilesTooSmall(usize),
}

/// `LocalResourceTypeProto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResourceType {
    Archive,
    File,
    Pattern,
}

impl ResourceType {
    /// `None` for an absent or unknown value (Java: `getType() == null`).
    pub fn from_proto(v: Option<i32>) -> Option<ResourceType> {
        match LocalResourceTypeProto::try_from(v?).ok()? {
            LocalResourceTypeProto::Archive => Some(ResourceType::Archive),
            LocalResourceTypeProto::File => Some(ResourceType::File),
            LocalResourceTypeProto::Pattern => Some(ResourceType::Pattern),
        }
    }

    pub fn java_name(self) -> &'static str {
        match self {
            ResourceType::Archive => "ARCHIVE",
            ResourceType::File => "FILE",
            ResourceType::Pattern => "PATTERN",
        }
    }
}

/// `LocalResourceVisibilityProto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Visibility {
    Public,
    Private,
    Application,
}

impl Visibility {
    /// `None` for an absent or unknown value (Java: `getVisibility() == null`).
    pub fn from_proto(v: Option<i32>) -> Option<Visibility> {
        match LocalResourceVisibilityProto::try_from(v?).ok()? {
            LocalResourceVisibilityProto::Public => Some(Visibility::Public),
            LocalResourceVisibilityProto::Private => Some(Visibility::Private),
            LocalResourceVisibilityProto::Application => Some(Visibility::Application),
        }
    }

    pub fn java_name(self) -> &'static str {
        match self {
            Visibility::Public => "PUBLIC",
            Visibility::Private => "PRIVATE",
            Visibility::Application => "APPLICATION",
        }
    }
}

/// A resource's `URLProto` as a source path, following Java's `URL.toPath`
/// (`new URI(scheme, userInfo, host, port, file)`): a port below 0 (Java's −1) or absent means
/// none, a URL without host has no authority (`file:/p`, and the port is then ignored).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ResourceUrl {
    /// Lower-cased; `None` means the node's default file system.
    pub scheme: Option<String>,
    pub user_info: Option<String>,
    pub host: Option<String>,
    pub port: Option<u16>,
    /// The absolute path, with repeated and trailing `/` removed (as Java's `Path` does).
    pub path: String,
}

impl ResourceUrl {
    /// Checks and normalizes `u` (`key` names the resource in errors).
    pub fn from_proto(key: &str, u: &UrlProto) -> Result<ResourceUrl, LocalizationError> {
        let scheme = u
            .scheme
            .as_deref()
            .filter(|s| !s.is_empty())
            .map(str::to_ascii_lowercase);
        let host = u.host.clone().filter(|h| !h.is_empty());
        let user_info = u.user_info.clone().filter(|s| !s.is_empty());
        let raw = u.file.as_deref().unwrap_or("");
        let shown = java_path_string(
            scheme.as_deref(),
            user_info.as_deref(),
            host.as_deref(),
            u.port.filter(|p| *p >= 0),
            raw,
        );
        let bad = |reason: String| LocalizationError::BadUrl {
            key: key.to_string(),
            url: shown.clone(),
            reason,
        };
        if let Some(s) = &scheme {
            let ok = s.starts_with(|c: char| c.is_ascii_alphabetic())
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
            if !ok {
                return Err(bad(format!("bad scheme {s:?}")));
            }
        }
        let port = match (host.is_some(), u.port) {
            (true, Some(p)) if p >= 0 => {
                Some(u16::try_from(p).map_err(|_| bad(format!("port {p} is out of range")))?)
            }
            _ => None,
        };
        if let Some(h) = &host {
            if h.contains(['/', '?', '#', '@', ' ', '\0']) {
                return Err(bad(format!("bad host {h:?}")));
            }
        }
        if raw.is_empty() {
            return Err(bad("no path".into()));
        }
        if raw.len() > MAX_PATH_LEN {
            return Err(bad(format!("path longer than {MAX_PATH_LEN} bytes")));
        }
        if !raw.starts_with('/') {
            return Err(bad("the path is not absolute".into()));
        }
        if raw.contains('\0') {
            return Err(bad("NUL in the path".into()));
        }
        let comps: Vec<&str> = raw.split('/').filter(|c| !c.is_empty()).collect();
        if comps.iter().any(|c| *c == "." || *c == "..") {
            return Err(bad("'.' and '..' are not allowed in the path".into()));
        }
        if comps.is_empty() {
            return Err(bad("the path names no file".into()));
        }
        Ok(ResourceUrl {
            scheme,
            user_info,
            host,
            port,
            path: format!("/{}", comps.join("/")),
        })
    }

    /// `host[:port]` with `user@` in front when given; `None` without host.
    pub fn authority(&self) -> Option<String> {
        let h = self.host.as_deref()?;
        let mut a = String::new();
        if let Some(u) = &self.user_info {
            a.push_str(u);
            a.push('@');
        }
        a.push_str(h);
        if let Some(p) = self.port {
            let _ = write!(a, ":{p}");
        }
        Some(a)
    }

    /// The last path component (Java's `Path.getName()`): the downloaded file's name.
    pub fn basename(&self) -> &str {
        self.path.rsplit('/').next().unwrap_or("")
    }

    /// The path's parent directories, nearest first, ending with `/`.
    pub fn ancestors(&self) -> Vec<&str> {
        let mut out = Vec::new();
        let mut p = self.path.as_str();
        while let Some(i) = p.rfind('/') {
            let parent = if i == 0 { "/" } else { &p[..i] };
            out.push(parent);
            if i == 0 {
                break;
            }
            p = parent;
        }
        out
    }
}

/// As Java's `Path.toString()` prints it: `scheme:` then `//authority` when there is a host.
impl fmt::Display for ResourceUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(s) = &self.scheme {
            write!(f, "{s}:")?;
        }
        if let Some(a) = self.authority() {
            write!(f, "//{a}")?;
        }
        f.write_str(&self.path)
    }
}

fn java_path_string(
    scheme: Option<&str>,
    user: Option<&str>,
    host: Option<&str>,
    port: Option<i32>,
    path: &str,
) -> String {
    let mut s = String::new();
    if let Some(sc) = scheme {
        s.push_str(sc);
        s.push(':');
    }
    if let Some(h) = host {
        s.push_str("//");
        if let Some(u) = user {
            s.push_str(u);
            s.push('@');
        }
        s.push_str(h);
        if let Some(p) = port {
            let _ = write!(s, ":{p}");
        }
    }
    s.push_str(path);
    s
}

/// What makes two requests the same download (Java's `LocalResourceRequest.equals`): the
/// source path, its timestamp, the type and the pattern.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CacheKey {
    pub path: String,
    pub timestamp: i64,
    pub kind: ResourceType,
    pub pattern: Option<String>,
}

/// One local resource of a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceRequest {
    /// The map key: the link name in the container's work directory.
    pub link: String,
    pub url: ResourceUrl,
    /// Only an estimate for space (never checked against the source).
    pub size: i64,
    /// The source's modification time in ms; must match exactly.
    pub timestamp: i64,
    pub kind: ResourceType,
    pub visibility: Visibility,
    pub pattern: Option<String>,
}

impl ResourceRequest {
    /// One map entry, checked in Java's order (URL, type, visibility), then the URL and the
    /// link name.
    pub fn from_proto(
        e: &StringLocalResourceMapProto,
    ) -> Result<ResourceRequest, LocalizationError> {
        let key = e.key.clone().unwrap_or_default();
        let value = || {
            e.value
                .as_ref()
                .map_or_else(|| "null".to_string(), short_debug_string)
        };
        let Some(r) = e.value.as_ref() else {
            return Err(LocalizationError::NullUrl {
                key,
                value: value(),
            });
        };
        let Some(url) = r.resource.as_ref() else {
            return Err(LocalizationError::NullUrl {
                key,
                value: value(),
            });
        };
        let Some(kind) = ResourceType::from_proto(r.r#type) else {
            return Err(LocalizationError::NullType {
                key,
                value: value(),
            });
        };
        let Some(visibility) = Visibility::from_proto(r.visibility) else {
            return Err(LocalizationError::NullVisibility {
                key,
                value: value(),
            });
        };
        let url = ResourceUrl::from_proto(&key, url)?;
        check_link_name(&key)?;
        Ok(ResourceRequest {
            link: key,
            url,
            size: r.size.unwrap_or(0),
            timestamp: r.timestamp.unwrap_or(0),
            kind,
            visibility,
            pattern: r.pattern.clone(),
        })
    }

    /// Every entry of a launch context; the first bad one fails the container.
    pub fn parse_all(
        entries: &[StringLocalResourceMapProto],
    ) -> Result<Vec<ResourceRequest>, LocalizationError> {
        entries.iter().map(ResourceRequest::from_proto).collect()
    }

    pub fn key(&self) -> CacheKey {
        CacheKey {
            path: self.url.to_string(),
            timestamp: self.timestamp,
            kind: self.kind,
            pattern: self.pattern.clone(),
        }
    }

    /// Bytes to look for when choosing a local dir: the size, five times for archives.
    pub fn space_estimate(&self) -> u64 {
        let size = u64::try_from(self.size).unwrap_or(0);
        match self.kind {
            ResourceType::File => size,
            ResourceType::Archive | ResourceType::Pattern => {
                size.saturating_mul(ARCHIVE_SPACE_FACTOR)
            }
        }
    }
}

/// A link name must be a relative path inside the work directory (the launch script links
/// it there): not empty, not absolute, no `.`/`..` component, no NUL or newline.
pub fn check_link_name(key: &str) -> Result<(), LocalizationError> {
    let bad = |reason| {
        Err(LocalizationError::BadLinkName {
            key: key.to_string(),
            reason,
        })
    };
    if key.is_empty() {
        return bad("empty");
    }
    if key.len() > MAX_PATH_LEN {
        return bad("too long");
    }
    if key.starts_with('/') {
        return bad("absolute");
    }
    if key.contains(['\0', '\n', '\r']) {
        return bad("contains NUL or a line break");
    }
    if key.split('/').any(|c| c == "." || c == "..") {
        return bad("has a '.' or '..' component");
    }
    Ok(())
}

/// A user name usable as `usercache/<user>`.
pub fn check_user(user: &str) -> Result<(), LocalizationError> {
    let ok = !user.is_empty()
        && user.len() <= 255
        && user != "."
        && user != ".."
        && !user.contains(['/', '\0', '\n']);
    if ok {
        Ok(())
    } else {
        Err(LocalizationError::BadUser(user.to_string()))
    }
}

/// Where a visibility's downloads live under one local dir:
/// PUBLIC `<L>/filecache`, PRIVATE `<L>/usercache/<user>/filecache`,
/// APPLICATION `<L>/usercache/<user>/appcache/<appId>/filecache`.
pub fn cache_root(local_dir: &Path, vis: Visibility, user: &str, app: &AppId) -> PathBuf {
    match vis {
        Visibility::Public => local_dir.join("filecache"),
        Visibility::Private => user_dir(local_dir, user).join("filecache"),
        Visibility::Application => app_dir(local_dir, user, app).join("filecache"),
    }
}

/// `<L>/usercache/<user>`.
pub fn user_dir(local_dir: &Path, user: &str) -> PathBuf {
    local_dir.join("usercache").join(user)
}

/// `<L>/usercache/<user>/appcache/<appId>`.
pub fn app_dir(local_dir: &Path, user: &str, app: &AppId) -> PathBuf {
    user_dir(local_dir, user)
        .join("appcache")
        .join(app.to_string())
}

/// Numbered resource directories under one cache root.
///
/// Resource numbers count up from [`FIRST_RESOURCE_NUMBER`]. A directory holds at most
/// `max_files - 36` numbered entries, so that together with up to 36 one-character
/// sub-directories (`0`-`9`, `a`-`z`) it stays within `max_files` entries. The numbers fill
/// the root first; then bucket `b` (b ≥ 1) is the directory whose path is `b` written in base
/// 36, one digit per level: bucket 1 → `1/`, 35 → `z/`, 36 → `1/0/`, 37 → `1/1/`, …
/// Every directory therefore has at most 36 sub-directories (bucket `b`'s children are
/// buckets `36b … 36b+35`) and the tree grows one level per factor of 36.
#[derive(Debug, Clone)]
pub struct DirAllocator {
    next: u64,
    per_dir: u64,
}

impl DirAllocator {
    /// `max_files` is `yarn.nodemanager.local-cache.max-files-per-directory`.
    pub fn new(max_files: usize) -> Result<DirAllocator, LocalizationError> {
        if max_files <= SUB_DIRS {
            return Err(LocalizationError::MaxFilesTooSmall(max_files));
        }
        Ok(DirAllocator {
            next: FIRST_RESOURCE_NUMBER,
            per_dir: (max_files - SUB_DIRS) as u64,
        })
    }

    /// The next resource directory, relative to the cache root (e.g. `10`, `1/8166`).
    pub fn next_relative(&mut self) -> PathBuf {
        let n = self.next;
        self.next += 1;
        Self::relative(n, self.per_dir)
    }

    /// Where resource number `n` goes with `per_dir` entries per directory.
    pub fn relative(n: u64, per_dir: u64) -> PathBuf {
        let bucket = (n - FIRST_RESOURCE_NUMBER.min(n)) / per_dir.max(1);
        let mut p = PathBuf::new();
        if bucket > 0 {
            let mut digits = Vec::new();
            let mut b = bucket;
            while b > 0 {
                digits.push(std::char::from_digit((b % 36) as u32, 36).unwrap_or('0'));
                b /= 36;
            }
            for d in digits.iter().rev() {
                p.push(d.to_string());
            }
        }
        p.push(n.to_string());
        p
    }
}

/// File modes after download (Java's `FSDownload.changePermissions`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Perms {
    pub file: u32,
    pub dir: u32,
}

impl Perms {
    /// PUBLIC: files 0555, directories 0755; PRIVATE and APPLICATION: 0500 and 0700.
    pub fn of(vis: Visibility) -> Perms {
        match vis {
            Visibility::Public => Perms {
                file: 0o555,
                dir: 0o755,
            },
            Visibility::Private | Visibility::Application => Perms {
                file: 0o500,
                dir: 0o700,
            },
        }
    }
}

/// An archive format, by file name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArchiveKind {
    Jar,
    Zip,
    /// `.tar.gz` / `.tgz` (`gzip: true`) or `.tar`.
    Tar {
        gzip: bool,
    },
}

impl ArchiveKind {
    /// By the (case-insensitive) name, in Java's order: `.jar`, `.zip`, `.tar.gz`, `.tgz`, `.tar`.
    pub fn from_name(name: &str) -> Option<ArchiveKind> {
        let n = name.to_ascii_lowercase();
        if n.ends_with(".jar") {
            Some(ArchiveKind::Jar)
        } else if n.ends_with(".zip") {
            Some(ArchiveKind::Zip)
        } else if n.ends_with(".tar.gz") || n.ends_with(".tgz") {
            Some(ArchiveKind::Tar { gzip: true })
        } else if n.ends_with(".tar") {
            Some(ArchiveKind::Tar { gzip: false })
        } else {
            None
        }
    }
}

/// What to do with a downloaded source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unpack {
    /// FILE: copy as is.
    Copy,
    /// ARCHIVE/PATTERN whose name is no archive: copy, and log a warning.
    CopyNotAnArchive,
    /// Unpack into a directory named after the source.
    Archive(ArchiveKind),
    /// PATTERN `.jar`: unpack the entries whose names match the pattern (all when `None`) and
    /// keep the jar itself inside that directory.
    JarPattern(Option<String>),
}

impl Unpack {
    /// The plan for a resource of `kind` whose source is named `name`.
    pub fn plan(kind: ResourceType, name: &str, pattern: Option<&str>) -> Unpack {
        match (kind, ArchiveKind::from_name(name)) {
            (ResourceType::File, _) => Unpack::Copy,
            (_, None) => Unpack::CopyNotAnArchive,
            (ResourceType::Pattern, Some(ArchiveKind::Jar)) => {
                Unpack::JarPattern(pattern.map(str::to_string))
            }
            (_, Some(a)) => Unpack::Archive(a),
        }
    }
}

/// An archive entry's name as a relative path under the destination: only normal components
/// (a leading `./` is dropped). `..`, an absolute path, or a prefix is refused.
pub fn entry_path(archive: &str, name: &str) -> Result<PathBuf, LocalizationError> {
    let refuse = |reason| LocalizationError::UnsafeEntry {
        archive: archive.to_string(),
        entry: name.to_string(),
        reason,
    };
    if name.contains('\0') {
        return Err(refuse("contains NUL"));
    }
    let mut p = PathBuf::new();
    for c in Path::new(name).components() {
        match c {
            Component::Normal(s) => p.push(s),
            Component::CurDir => {}
            Component::ParentDir => return Err(refuse("climbs out with '..'")),
            Component::RootDir | Component::Prefix(_) => return Err(refuse("is an absolute path")),
        }
    }
    Ok(p)
}

/// Whether a symlink at relative path `link` (under the destination) with target `target`
/// stays inside the destination, judged on the names alone: absolute targets never do.
pub fn link_stays_inside(link: &Path, target: &Path) -> bool {
    if target.is_absolute() {
        return false;
    }
    let mut depth: usize = link.parent().map_or(0, |p| {
        p.components()
            .filter(|c| matches!(c, Component::Normal(_)))
            .count()
    });
    for c in target.components() {
        match c {
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::ParentDir => {
                if depth == 0 {
                    return false;
                }
                depth -= 1;
            }
            Component::RootDir | Component::Prefix(_) => return false,
        }
    }
    true
}

/// Java's `Times.formatISO8601` in UTC: `2024-01-02T03:04:05.678+0000`.
pub fn format_iso8601(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let milli = ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let (y, m, d) = hadoop_wire::time::civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{milli:03}+0000",
        sod / 3600,
        (sod / 60) % 60,
        sod % 60
    )
}

/// A container's diagnostics entry as Java 3.5's `ContainerImpl.addDiagnostics` appends it:
/// `[yyyy-MM-dd HH:mm:ss.SSS]` (here in UTC) before the text. A failed localization adds the
/// failure's message and a newline (`ResourceFailedTransition`), so such a container reports
/// `[<time>]<message>\n` with exit status −1000.
pub fn diagnostics_entry(now_ms: i64, text: &str) -> String {
    let iso = format_iso8601(now_ms);
    // `2024-01-02T03:04:05.678+0000` → `2024-01-02 03:04:05.678`
    format!("[{} {}]{text}", &iso[..10], &iso[11..23])
}

/// The timestamp check: `Ok` when the source's modification time equals the resource's.
pub fn check_timestamp(
    url: &ResourceUrl,
    expected_ms: i64,
    was_ms: i64,
    now_ms: i64,
) -> Result<(), LocalizationError> {
    if expected_ms == was_ms {
        Ok(())
    } else {
        Err(LocalizationError::ChangedOnSrc {
            path: url.to_string(),
            expected_ms,
            was_ms,
            now_ms,
        })
    }
}

/// Protobuf's short text form of a message, as Java's `TextFormat.shortDebugString` prints a
/// `LocalResourceProto` (fields in number order, strings quoted with C escapes, non-ASCII
/// bytes as octal escapes).
pub fn short_debug_string(r: &LocalResourceProto) -> String {
    let mut parts: Vec<String> = Vec::new();
    if let Some(u) = &r.resource {
        let mut f: Vec<String> = Vec::new();
        if let Some(s) = &u.scheme {
            f.push(format!("scheme: {}", quote(s)));
        }
        if let Some(s) = &u.host {
            f.push(format!("host: {}", quote(s)));
        }
        if let Some(p) = u.port {
            f.push(format!("port: {p}"));
        }
        if let Some(s) = &u.file {
            f.push(format!("file: {}", quote(s)));
        }
        if let Some(s) = &u.user_info {
            f.push(format!("userInfo: {}", quote(s)));
        }
        parts.push(if f.is_empty() {
            "resource { }".to_string()
        } else {
            format!("resource {{ {} }}", f.join(" "))
        });
    }
    if let Some(s) = r.size {
        parts.push(format!("size: {s}"));
    }
    if let Some(t) = r.timestamp {
        parts.push(format!("timestamp: {t}"));
    }
    if let Some(t) = r.r#type {
        parts.push(format!(
            "type: {}",
            ResourceType::from_proto(Some(t))
                .map_or_else(|| t.to_string(), |k| k.java_name().into())
        ));
    }
    if let Some(v) = r.visibility {
        parts.push(format!(
            "visibility: {}",
            Visibility::from_proto(Some(v)).map_or_else(|| v.to_string(), |k| k.java_name().into())
        ));
    }
    if let Some(p) = &r.pattern {
        parts.push(format!("pattern: {}", quote(p)));
    }
    if let Some(b) = r.should_be_uploaded_to_shared_cache {
        parts.push(format!("should_be_uploaded_to_shared_cache: {b}"));
    }
    parts.join(" ")
}

fn quote(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for &b in s.as_bytes() {
        match b {
            b'"' => o.push_str("\\\""),
            b'\'' => o.push_str("\\'"),
            b'\\' => o.push_str("\\\\"),
            b'\n' => o.push_str("\\n"),
            b'\r' => o.push_str("\\r"),
            b'\t' => o.push_str("\\t"),
            0x20..=0x7e => o.push(b as char),
            _ => {
                let _ = write!(o, "\\{b:03o}");
            }
        }
    }
    o.push('"');
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(scheme: &str, host: Option<&str>, port: Option<i32>, file: &str) -> UrlProto {
        UrlProto {
            scheme: Some(scheme.into()),
            host: host.map(Into::into),
            port,
            file: Some(file.into()),
            user_info: None,
        }
    }

    fn entry(key: &str, r: Option<LocalResourceProto>) -> StringLocalResourceMapProto {
        StringLocalResourceMapProto {
            key: Some(key.into()),
            value: r,
        }
    }

    fn resource(u: Option<UrlProto>, t: Option<i32>, v: Option<i32>) -> LocalResourceProto {
        LocalResourceProto {
            resource: u,
            size: Some(12),
            timestamp: Some(1_700_000_000_123),
            r#type: t,
            visibility: v,
            pattern: None,
            should_be_uploaded_to_shared_cache: None,
        }
    }

    const FILE: i32 = LocalResourceTypeProto::File as i32;
    const APP: i32 = LocalResourceVisibilityProto::Application as i32;

    #[test]
    fn urls_follow_javas_rules() {
        let u =
            ResourceUrl::from_proto("k", &url("HDFS", Some("nn"), Some(8020), "/a//b/")).unwrap();
        assert_eq!(u.to_string(), "hdfs://nn:8020/a/b");
        assert_eq!(u.basename(), "b");
        assert_eq!(u.ancestors(), vec!["/a", "/"]);
        // -1 and absent both mean no port
        let u = ResourceUrl::from_proto("k", &url("hdfs", Some("nn"), Some(-1), "/x")).unwrap();
        assert_eq!((u.port, u.to_string().as_str()), (None, "hdfs://nn/x"));
        let u = ResourceUrl::from_proto("k", &url("hdfs", Some("nn"), None, "/x")).unwrap();
        assert_eq!(u.to_string(), "hdfs://nn/x");
        // no host: no authority, and the port is ignored
        let u = ResourceUrl::from_proto("k", &url("file", None, Some(-1), "/tmp/f")).unwrap();
        assert_eq!(u.to_string(), "file:/tmp/f");
        let u = ResourceUrl::from_proto("k", &url("file", Some(""), Some(99), "/tmp/f")).unwrap();
        assert_eq!(u.to_string(), "file:/tmp/f");
        let mut p = url("hdfs", Some("nn"), Some(9000), "/f");
        p.user_info = Some("bob".into());
        assert_eq!(
            ResourceUrl::from_proto("k", &p).unwrap().to_string(),
            "hdfs://bob@nn:9000/f"
        );
        let mut p = url("x", None, None, "/f");
        p.scheme = None;
        let u = ResourceUrl::from_proto("k", &p).unwrap();
        assert_eq!((u.scheme.as_deref(), u.to_string().as_str()), (None, "/f"));
        for (bad, why) in [
            (url("hdfs", Some("nn"), Some(70000), "/x"), "out of range"),
            (url("file", None, None, "rel/x"), "not absolute"),
            (url("file", None, None, ""), "no path"),
            (url("file", None, None, "/"), "names no file"),
            (url("file", None, None, "/a/../b"), "'..'"),
            (url("fi le", None, None, "/a"), "bad scheme"),
            (url("hdfs", Some("n/n"), None, "/a"), "bad host"),
        ] {
            let e = ResourceUrl::from_proto("res", &bad).unwrap_err();
            let s = e.to_string();
            assert!(s.contains(why) && s.contains("local resource res"), "{s}");
        }
    }

    #[test]
    fn missing_fields_fail_in_javas_order_with_javas_words() {
        let u = Some(url("file", None, Some(-1), "/tmp/x"));
        let e = ResourceRequest::from_proto(&entry("a", None)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "Null resource URL for local resource a : null"
        );
        let e =
            ResourceRequest::from_proto(&entry("a", Some(resource(None, None, None)))).unwrap_err();
        assert_eq!(
            e.to_string(),
            "Null resource URL for local resource a : size: 12 timestamp: 1700000000123"
        );
        let e =
            ResourceRequest::from_proto(&entry("b", Some(resource(u.clone(), None, Some(APP)))))
                .unwrap_err();
        assert_eq!(
            e.to_string(),
            "Null resource type for local resource b : resource { scheme: \"file\" port: -1 file: \"/tmp/x\" } size: 12 timestamp: 1700000000123 visibility: APPLICATION"
        );
        // an unknown enum number counts as absent
        let e = ResourceRequest::from_proto(&entry(
            "c",
            Some(resource(u.clone(), Some(FILE), Some(9))),
        ))
        .unwrap_err();
        assert!(matches!(e, LocalizationError::NullVisibility { .. }), "{e}");
        assert!(e
            .to_string()
            .starts_with("Null resource visibility for local resource c : "));
        assert!(e.to_string().ends_with("type: FILE visibility: 9"), "{e}");
        let r = ResourceRequest::from_proto(&entry(
            "lib/x.jar",
            Some(resource(u, Some(FILE), Some(APP))),
        ))
        .unwrap();
        assert_eq!(r.link, "lib/x.jar");
        assert_eq!(
            (r.kind, r.visibility, r.timestamp, r.size),
            (
                ResourceType::File,
                Visibility::Application,
                1_700_000_000_123,
                12
            )
        );
        assert_eq!(
            r.key(),
            CacheKey {
                path: "file:/tmp/x".into(),
                timestamp: 1_700_000_000_123,
                kind: ResourceType::File,
                pattern: None
            }
        );
    }

    #[test]
    fn text_form_escapes_like_protobuf() {
        let mut r = resource(Some(url("file", None, None, "/t/\"q\"\né")), None, None);
        r.pattern = Some("a\\b".into());
        r.should_be_uploaded_to_shared_cache = Some(false);
        assert_eq!(
            short_debug_string(&r),
            "resource { scheme: \"file\" file: \"/t/\\\"q\\\"\\n\\303\\251\" } size: 12 timestamp: 1700000000123 pattern: \"a\\\\b\" should_be_uploaded_to_shared_cache: false"
        );
    }

    #[test]
    fn link_names_stay_in_the_work_dir() {
        for ok in ["a", "lib/a.jar", "x..y", ".hidden"] {
            check_link_name(ok).unwrap();
        }
        for bad in ["", "/abs", "../up", "a/../b", "a/./b", "a\nb"] {
            assert!(check_link_name(bad).is_err(), "{bad:?}");
        }
        check_user("alice").unwrap();
        for bad in ["", "..", "a/b"] {
            assert!(check_user(bad).is_err());
        }
    }

    #[test]
    fn cache_roots_per_visibility() {
        let l = Path::new("/data/nm");
        let app = AppId {
            cluster_timestamp: 1_700_000_000_000,
            id: 7,
        };
        assert_eq!(
            cache_root(l, Visibility::Public, "u", &app),
            Path::new("/data/nm/filecache")
        );
        assert_eq!(
            cache_root(l, Visibility::Private, "u", &app),
            Path::new("/data/nm/usercache/u/filecache")
        );
        assert_eq!(
            cache_root(l, Visibility::Application, "u", &app),
            Path::new("/data/nm/usercache/u/appcache/application_1700000000000_0007/filecache")
        );
    }

    #[test]
    fn numbered_dirs_start_at_10_and_branch_when_full() {
        let mut a = DirAllocator::new(DEFAULT_MAX_FILES_PER_DIRECTORY).unwrap();
        assert_eq!(a.next_relative(), Path::new("10"));
        assert_eq!(a.next_relative(), Path::new("11"));
        let per = (DEFAULT_MAX_FILES_PER_DIRECTORY - SUB_DIRS) as u64;
        assert_eq!(
            DirAllocator::relative(10 + per - 1, per),
            Path::new(&(9 + per).to_string())
        );
        assert_eq!(
            DirAllocator::relative(10 + per, per),
            Path::new("1").join((10 + per).to_string())
        );
        assert_eq!(
            DirAllocator::relative(10 + 35 * per, per),
            Path::new("z").join((10 + 35 * per).to_string())
        );
        assert_eq!(
            DirAllocator::relative(10 + 36 * per, per),
            Path::new("1/0").join((10 + 36 * per).to_string())
        );
        assert_eq!(
            DirAllocator::relative(10 + 37 * per, per),
            Path::new("1/1").join((10 + 37 * per).to_string())
        );
        // a small limit: 37 → one entry per directory
        let mut s = DirAllocator::new(37).unwrap();
        let got: Vec<PathBuf> = (0..3).map(|_| s.next_relative()).collect();
        assert_eq!(
            got,
            vec![
                PathBuf::from("10"),
                PathBuf::from("1/11"),
                PathBuf::from("2/12")
            ]
        );
        assert_eq!(
            DirAllocator::new(36).unwrap_err(),
            LocalizationError::MaxFilesTooSmall(36)
        );
    }

    #[test]
    fn archive_kind_by_name_and_plans() {
        assert_eq!(ArchiveKind::from_name("a.JAR"), Some(ArchiveKind::Jar));
        assert_eq!(ArchiveKind::from_name("a.zip"), Some(ArchiveKind::Zip));
        assert_eq!(
            ArchiveKind::from_name("a.tar.gz"),
            Some(ArchiveKind::Tar { gzip: true })
        );
        assert_eq!(
            ArchiveKind::from_name("a.tgz"),
            Some(ArchiveKind::Tar { gzip: true })
        );
        assert_eq!(
            ArchiveKind::from_name("a.tar"),
            Some(ArchiveKind::Tar { gzip: false })
        );
        assert_eq!(ArchiveKind::from_name("a.gz"), None);
        assert_eq!(
            Unpack::plan(ResourceType::File, "a.zip", None),
            Unpack::Copy
        );
        assert_eq!(
            Unpack::plan(ResourceType::Archive, "a.txt", None),
            Unpack::CopyNotAnArchive
        );
        assert_eq!(
            Unpack::plan(ResourceType::Archive, "a.jar", Some("x")),
            Unpack::Archive(ArchiveKind::Jar)
        );
        assert_eq!(
            Unpack::plan(ResourceType::Pattern, "a.jar", Some("lib/.*")),
            Unpack::JarPattern(Some("lib/.*".into()))
        );
        assert_eq!(
            Unpack::plan(ResourceType::Pattern, "a.tgz", None),
            Unpack::Archive(ArchiveKind::Tar { gzip: true })
        );
        let r = |kind| ResourceRequest {
            link: "l".into(),
            url: ResourceUrl::from_proto("l", &url("file", None, None, "/a")).unwrap(),
            size: 100,
            timestamp: 0,
            kind,
            visibility: Visibility::Public,
            pattern: None,
        };
        assert_eq!(r(ResourceType::File).space_estimate(), 100);
        assert_eq!(r(ResourceType::Archive).space_estimate(), 500);
    }

    #[test]
    fn permissions_per_visibility() {
        assert_eq!(
            Perms::of(Visibility::Public),
            Perms {
                file: 0o555,
                dir: 0o755
            }
        );
        assert_eq!(
            Perms::of(Visibility::Private),
            Perms {
                file: 0o500,
                dir: 0o700
            }
        );
        assert_eq!(
            Perms::of(Visibility::Application),
            Perms::of(Visibility::Private)
        );
    }

    #[test]
    fn archive_entries_and_links_must_stay_inside() {
        assert_eq!(entry_path("a.tar", "./d/f").unwrap(), Path::new("d/f"));
        for bad in ["../x", "d/../../x", "/etc/passwd"] {
            let e = entry_path("a.tar", bad).unwrap_err();
            assert!(
                e.to_string().starts_with("Refusing to unpack a.tar: entry"),
                "{e}"
            );
        }
        assert!(link_stays_inside(Path::new("d/l"), Path::new("../f")));
        assert!(link_stays_inside(Path::new("d/l"), Path::new("x/../../f")));
        assert!(!link_stays_inside(Path::new("d/l"), Path::new("../../f")));
        assert!(!link_stays_inside(Path::new("l"), Path::new("../f")));
        assert!(!link_stays_inside(Path::new("l"), Path::new("/etc")));
    }

    #[test]
    fn iso8601_and_the_changed_message() {
        assert_eq!(format_iso8601(0), "1970-01-01T00:00:00.000+0000");
        assert_eq!(
            format_iso8601(1_700_000_000_123),
            "2023-11-14T22:13:20.123+0000"
        );
        assert_eq!(
            format_iso8601(951_782_400_000),
            "2000-02-29T00:00:00.000+0000"
        );
        assert_eq!(format_iso8601(-1), "1969-12-31T23:59:59.999+0000");
        let u = ResourceUrl::from_proto("k", &url("file", None, None, "/tmp/f")).unwrap();
        check_timestamp(&u, 5, 5, 9).unwrap();
        let e = check_timestamp(&u, 1_700_000_000_123, 1_700_000_000_124, 0).unwrap_err();
        assert_eq!(
            e.to_string(),
            "Resource file:/tmp/f changed on src filesystem - expected: \"2023-11-14T22:13:20.123+0000\", was: \"2023-11-14T22:13:20.124+0000\", current time: \"1970-01-01T00:00:00.000+0000\""
        );
        assert_eq!(
            diagnostics_entry(1_700_000_000_123, "File file:/x does not exist\n"),
            "[2023-11-14 22:13:20.123]File file:/x does not exist\n"
        );
        let e = LocalizationError::NotPublic {
            path: u.to_string(),
        };
        assert_eq!(
            e.to_string(),
            "Resource file:/tmp/f is not publicly accessible and as such cannot be part of the public cache."
        );
    }
}
