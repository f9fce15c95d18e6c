//! Container logs over HTTP: the part of a NodeManager's REST API (`/ws/v1/node`) that
//! `yarn logs` and the RM's log links read, served on the agent's webapp address by the same
//! [`MetricsHttp`] that serves `/metrics`.
//!
//! How it connects: a container's log directory is `<log-dir>/<appId>/<containerId>` on each
//! of `yarn.nodemanager.log-dirs` ([`ContainerLogs::log_dirs`], read by [`log_dirs_from_conf`]).
//! [`ContainerLogs::route`] maps a `GET` to a [`HttpResponse`]; it asks the caller what state
//! a container is in (a `lookup` closure over the container table, giving a
//! [`ContainerRunState`]) and how the node is (a `health` closure). [`poll_webapp`] is the
//! housekeeping loop's one call: `/metrics` first, then these routes, else 404.
//!
//! | route | answer |
//! |---|---|
//! | `/ws/v1/node`, `/ws/v1/node/info` | `{"nodeInfo":{…}}` (the fields the agent knows) |
//! | `/ws/v1/node/containers/{cid}/logs` | `{"containerLogsInfo":[{"containerLogInfo":[{fileName, fileSize, lastModifiedTime}…], "logAggregationType":"LOCAL", containerId, nodeId}]}` |
//! | `/ws/v1/node/containers/{cid}/logs/{file}` | the file framed as Java frames it (below); `size`, `format` queries |
//! | `/ws/v1/node/containerlogs/{cid}/{file}` | the same (Java serves both paths with one method) |
//!
//! The framing of a file (Java's `LogToolUtils`/`NMWebServices.getLogs`): when at least one
//! byte is sent, a header `Container: <cid> on <nodeId>`, `LogAggregationType: LOCAL`, a line
//! of `=` as long as the first, `LogType:<file>`, `LogLastModifiedTime:<date>`,
//! `LogLength:<file length>`, `LogContents:`; then the bytes (`size` > 0: the first `size`,
//! < 0: the last `|size|`, absent: all); then always `End of LogType:<file>.`, followed by
//! `This log file belongs to a running container (<cid>) and so may not be complete.` when it
//! runs, a newline, a line of `*` 50 longer than `End of LogType:<file>` and a blank line.
//! Dates are Java's `EEE MMM dd HH:mm:ss Z yyyy`, written in UTC (`+0000`).
//!
//! Both JSON levels are arrays; `yarn logs` (LogsCLI) accepts an object or an array at each.
//! Errors on the JSON routes are Java's `{"RemoteException":{exception, message,
//! javaClassName}}`; on the file routes a text message. A file name is one path segment: `.`,
//! `..`, `/` (also as `%2F`) and NUL are refused (400), and a name that resolves (through
//! symlinks) outside the container's log directory is refused (400), checked again on the
//! opened file so a swap after the check does not help. File bodies are streamed in 64 KiB
//! pieces ([`ipc::metrics::BodyPart::File`]), so a response holds no file in memory and has no
//! size cap beyond the file.

use std::fs::File;
use std::io::{Seek, SeekFrom};
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use ipc::metrics::{metrics_response, percent_decode, query_param, HttpResponse, MetricsHttp};
use nm_core::ids::ContainerId;
use nm_core::table::ContainerState;
use nm_core::wire::NodeHealth;
use serde_json::{json, Value};

use crate::shared::{lock, Shared};

/// Where a container stands, as far as its logs are concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContainerRunState {
    /// Known but not launched yet (Java: NEW / LOCALIZING / SCHEDULED): its logs are refused
    /// with "Container is not yet running".
    NotStarted,
    /// Running: a file's footer says it may not be complete.
    Running,
    /// Finished (its logs stay until retention removes them).
    Complete,
    /// Known, state not told: served as a finished one.
    Unknown,
}

impl From<ContainerState> for ContainerRunState {
    fn from(s: ContainerState) -> Self {
        match s {
            ContainerState::New => ContainerRunState::NotStarted,
            ContainerState::Running => ContainerRunState::Running,
            ContainerState::Complete => ContainerRunState::Complete,
        }
    }
}

/// One log file of a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogFile {
    pub name: String,
    pub size: u64,
    /// Last modification, ms since the epoch (0 if unknown).
    pub modified_ms: i64,
    pub path: PathBuf,
}

/// The REST routes over the node's container log directories (see the module docs).
#[derive(Debug, Clone)]
pub struct ContainerLogs {
    /// `yarn.nodemanager.log-dirs`.
    pub log_dirs: Vec<PathBuf>,
    /// `host:port` as registered (the `nodeId` in listings and headers).
    pub node_id: String,
    /// `nodeHostName` of `/ws/v1/node/info` (default: the host part of `node_id`).
    pub node_host: String,
    /// `nmStartupTime` of `/ws/v1/node/info`, ms since the epoch.
    pub started_ms: i64,
}

/// `yarn.nodemanager.log-dirs` when the configuration does not set it (Java's code default;
/// yarn-default.xml's `${yarn.log.dir}/userlogs` needs the daemon scripts' `yarn.log.dir`).
pub const DEFAULT_LOG_DIR: &str = "/tmp/logs";

/// `yarn.nodemanager.log-dirs` (comma list, `file://` prefixes dropped), else
/// [`DEFAULT_LOG_DIR`].
pub fn log_dirs_from_conf(conf: &conf::Configuration) -> Result<Vec<PathBuf>, conf::Error> {
    let dirs: Vec<PathBuf> = conf
        .get_trimmed_strings("yarn.nodemanager.log-dirs")?
        .into_iter()
        .map(|d| PathBuf::from(d.strip_prefix("file://").unwrap_or(&d)))
        .collect();
    Ok(if dirs.is_empty() {
        vec![PathBuf::from(DEFAULT_LOG_DIR)]
    } else {
        dirs
    })
}

/// The housekeeping loop's call: answers what is ready on the webapp address without
/// blocking: `/metrics` (rendered as before), the routes of [`ContainerLogs::route`] with
/// container states from the table and health from the node's last check, 404 for the rest.
/// Returns whether it did anything.
pub fn poll_webapp(http: &mut MetricsHttp, logs: &ContainerLogs, shared: &Shared) -> bool {
    http.poll_with(|req| {
        let metrics = || {
            let (c, t) = {
                let t = lock(&shared.table);
                (t.counts(), t.totals())
            };
            let reg = lock(&shared.status).phase == "registered";
            let healthy = lock(&shared.health).healthy;
            let dirs = shared.dirs.get().map(|d| {
                let v = d.view();
                crate::metrics::DirGauges {
                    bad_local: v.bad_local,
                    bad_log: v.bad_log,
                    good_local_utilization: v.good_local_utilization,
                    good_log_utilization: v.good_log_utilization,
                }
            });
            let mut text = shared.metrics.render(c, t, reg);
            text.push_str(&crate::metrics::render_health(healthy, dirs));
            text
        };
        metrics_response(req, metrics)
            .or_else(|| {
                logs.route(
                    req.path,
                    req.query,
                    &|id| lock(&shared.table).get(id).map(|c| c.state.into()),
                    &|| lock(&shared.health).clone(),
                )
            })
            .unwrap_or_else(HttpResponse::not_found)
    })
}

/// Java's message for a container this node knows nothing of.
pub const UNKNOWN_CONTAINER: &str = "Unknown container. Container either has not started or \
     has already completed or doesn't belong to this node at all.";
/// Java's message for a file that is in none of the container's log directories.
pub const NO_SUCH_LOG: &str = "Cannot find this log on the local disk.";

/// Longest file name accepted (NAME_MAX).
const MAX_NAME: usize = 255;

/// Why a request was refused: status and message.
struct Refusal {
    status: u16,
    /// Java's exception class (simple name) on the JSON routes.
    exception: &'static str,
    message: String,
}

fn refuse(status: u16, message: impl Into<String>) -> Refusal {
    let exception = match status {
        400 => "BadRequestException",
        404 => "NotFoundException",
        _ => "WebApplicationException",
    };
    Refusal {
        status,
        exception,
        message: message.into(),
    }
}

impl Refusal {
    fn json(self) -> HttpResponse {
        let pkg = if self.exception == "WebApplicationException" {
            "javax.ws.rs"
        } else {
            "org.apache.hadoop.yarn.webapp"
        };
        let body = json!({"RemoteException": {
            "exception": self.exception,
            "message": self.message,
            "javaClassName": format!("{pkg}.{}", self.exception),
        }});
        json_response(self.status, &body)
    }

    fn text(self) -> HttpResponse {
        HttpResponse::text(self.status, format!("{}\n", self.message))
            .header("X-Content-Type-Options", "nosniff")
    }
}

fn json_response(status: u16, v: &Value) -> HttpResponse {
    HttpResponse::new(status, "application/json; charset=utf-8", v.to_string())
        .header("X-Content-Type-Options", "nosniff")
}

/// Java's `ContainerId.fromString` refusal, as the routes word it.
fn parse_container(s: &str) -> Result<ContainerId, Refusal> {
    ContainerId::parse(s).ok_or_else(|| refuse(400, format!("invalid container id, {s}")))
}

/// A file name that is exactly one entry of a directory.
fn check_name(name: &str) -> Result<(), Refusal> {
    if name.is_empty() || name == "." || name == ".." {
        return Err(refuse(400, format!("invalid log file name {name:?}")));
    }
    if name.contains('/') || name.contains('\0') {
        return Err(refuse(
            400,
            format!("invalid log file name {name:?}: it must not contain '/' or NUL"),
        ));
    }
    if name.len() > MAX_NAME {
        return Err(refuse(400, "invalid log file name: longer than 255 bytes"));
    }
    Ok(())
}

fn modified_ms(m: &std::fs::Metadata) -> i64 {
    m.modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis().min(i64::MAX as u128) as i64)
}

/// Wall-clock ms since the epoch.
fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Java's `Times.format`: `EEE MMM dd HH:mm:ss Z yyyy`, here in UTC; `N/A` for ms ≤ 0.
pub fn java_date(ms: i64) -> String {
    if ms <= 0 {
        return "N/A".into();
    }
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let secs = ms / 1000;
    let (days, sod) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (year, month, day) = hadoop_wire::time::civil_from_days(days);
    format!(
        "{} {} {:02} {:02}:{:02}:{:02} +0000 {}",
        DAYS[days.rem_euclid(7) as usize],
        MONTHS[(month - 1) as usize],
        day,
        sod / 3600,
        sod % 3600 / 60,
        sod % 60,
        year
    )
}

/// The real path of an open file (`/proc/self/fd`), `None` where that cannot be told.
fn opened_path(f: &File) -> Option<PathBuf> {
    use std::os::fd::AsRawFd;
    std::fs::read_link(format!("/proc/self/fd/{}", f.as_raw_fd())).ok()
}

impl ContainerLogs {
    /// Routes over `log_dirs` for the node `node_id` (`host:port`), started now.
    pub fn new(log_dirs: Vec<PathBuf>, node_id: impl Into<String>) -> Self {
        let node_id = node_id.into();
        let node_host = match node_id.rsplit_once(':') {
            Some((h, _)) => h.to_string(),
            None => node_id.clone(),
        };
        ContainerLogs {
            log_dirs,
            node_id,
            node_host,
            started_ms: now_ms(),
        }
    }

    /// `<log-dir>/<appId>/<containerId>` on every log dir (existing or not).
    pub fn container_dirs(&self, id: &ContainerId) -> Vec<PathBuf> {
        let (app, cid) = (id.app.to_string(), id.to_string());
        self.log_dirs
            .iter()
            .map(|d| d.join(&app).join(&cid))
            .collect()
    }

    /// The regular files of the container's log directories (dirs in configured order, names
    /// sorted within each), without those that resolve outside their directory.
    pub fn list(&self, id: &ContainerId) -> Vec<LogFile> {
        let mut out = Vec::new();
        for dir in self.container_dirs(id) {
            let Ok(canon_dir) = dir.canonicalize() else {
                continue;
            };
            let Ok(rd) = std::fs::read_dir(&canon_dir) else {
                continue;
            };
            let mut files: Vec<LogFile> = rd
                .filter_map(Result::ok)
                .filter_map(|e| {
                    let name = e.file_name().into_string().ok()?;
                    let real = e.path().canonicalize().ok()?;
                    if !real.starts_with(&canon_dir) || real == canon_dir {
                        return None;
                    }
                    let m = std::fs::metadata(&real).ok()?;
                    m.is_file().then(|| LogFile {
                        name,
                        size: m.len(),
                        modified_ms: modified_ms(&m),
                        path: e.path(),
                    })
                })
                .collect();
            files.sort_by(|a, b| a.name.cmp(&b.name));
            out.extend(files);
        }
        out
    }

    /// The answer to `GET path?query` when `path` is one of the routes of the module docs;
    /// `None` for any other path. `lookup` tells a container's state (`None`: not in the
    /// table), `health` the node's (called only for `/ws/v1/node[/info]`).
    pub fn route(
        &self,
        path: &str,
        query: &str,
        lookup: &dyn Fn(&ContainerId) -> Option<ContainerRunState>,
        health: &dyn Fn() -> NodeHealth,
    ) -> Option<HttpResponse> {
        let rest = path.strip_prefix("/ws/v1/node")?;
        if !(rest.is_empty() || rest.starts_with('/')) {
            return None;
        }
        let rest = rest.trim_start_matches('/');
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        let raw: Vec<&str> = if rest.is_empty() {
            Vec::new()
        } else {
            rest.split('/').collect()
        };
        let mut seg = Vec::with_capacity(raw.len());
        for r in &raw {
            match percent_decode(r) {
                Some(s) => seg.push(s),
                None => return Some(refuse(400, format!("bad percent-encoding in {r:?}")).text()),
            }
        }
        let seg: Vec<&str> = seg.iter().map(String::as_str).collect();
        Some(match seg.as_slice() {
            [] | ["info"] => self.node_info(&health()),
            ["containers", cid, "logs"] => match parse_container(cid) {
                Ok(id) => self.listing(&id, lookup(&id)).unwrap_or_else(Refusal::json),
                Err(r) => r.json(),
            },
            ["containers", cid, "logs", file] | ["containerlogs", cid, file] => self
                .file(cid, file, query, lookup)
                .unwrap_or_else(Refusal::text),
            ["containers", _, "logs", _, ..] | ["containerlogs", _, _, ..] => refuse(
                400,
                "invalid log file name: it must be one path segment (no '/' or '..')",
            )
            .text(),
            _ => return None,
        })
    }

    /// `{"nodeInfo":{…}}` with what the agent knows truthfully.
    fn node_info(&self, h: &NodeHealth) -> HttpResponse {
        let v = json!({"nodeInfo": {
            "healthReport": h.report,
            "lastNodeUpdateTime": h.last_report_wall_ms,
            "nodeHealthy": h.healthy,
            "nodeManagerVersion": nm_core::status_updater::NM_VERSION,
            "hadoopVersion": hadoop_wire::yarn::HADOOP_VERSION,
            "id": self.node_id,
            "nodeHostName": self.node_host,
            "nmStartupTime": self.started_ms,
        }});
        json_response(200, &v)
    }

    /// The refusals common to listing and files: a container not launched yet, or one the
    /// node does not know and has no log directory of. Returns the existing log directories.
    fn known_dirs(
        &self,
        id: &ContainerId,
        state: Option<ContainerRunState>,
    ) -> Result<Vec<PathBuf>, Refusal> {
        if state == Some(ContainerRunState::NotStarted) {
            return Err(refuse(
                404,
                "Container is not yet running. Current state is NEW",
            ));
        }
        let dirs: Vec<PathBuf> = self
            .container_dirs(id)
            .into_iter()
            .filter(|d| d.is_dir())
            .collect();
        if dirs.is_empty() && state.is_none() {
            return Err(refuse(404, UNKNOWN_CONTAINER));
        }
        Ok(dirs)
    }

    fn listing(
        &self,
        id: &ContainerId,
        state: Option<ContainerRunState>,
    ) -> Result<HttpResponse, Refusal> {
        self.known_dirs(id, state)?;
        let files: Vec<Value> = self
            .list(id)
            .iter()
            .map(|f| {
                json!({
                    "fileName": f.name,
                    "fileSize": f.size.to_string(),
                    "lastModifiedTime": java_date(f.modified_ms),
                })
            })
            .collect();
        let v = json!({"containerLogsInfo": [{
            "containerLogInfo": files,
            "logAggregationType": "LOCAL",
            "containerId": id.to_string(),
            "nodeId": self.node_id,
        }]});
        Ok(json_response(200, &v))
    }

    /// Opens `name` in the first of the container's log directories that has it, refusing
    /// anything that resolves outside that directory.
    fn open(&self, dirs: &[PathBuf], name: &str) -> Result<(File, std::fs::Metadata), Refusal> {
        let Some(dir) = dirs
            .iter()
            .find(|d| d.join(name).symlink_metadata().is_ok())
        else {
            return Err(refuse(404, NO_SUCH_LOG));
        };
        let outside = || {
            refuse(
                400,
                format!("log file {name:?} resolves outside the container's log directory"),
            )
        };
        let canon_dir = dir.canonicalize().map_err(|_| refuse(404, NO_SUCH_LOG))?;
        let real = dir
            .join(name)
            .canonicalize()
            .map_err(|_| refuse(404, NO_SUCH_LOG))?;
        if !real.starts_with(&canon_dir) || real == canon_dir {
            return Err(outside());
        }
        let file = File::open(&real).map_err(|e| {
            refuse(
                if e.kind() == std::io::ErrorKind::NotFound {
                    404
                } else {
                    500
                },
                format!("Exception reading log file {name}: {e}"),
            )
        })?;
        // The path may have changed between the check and the open: check what was opened.
        if let Some(p) = opened_path(&file) {
            if !p.starts_with(&canon_dir) {
                return Err(outside());
            }
        }
        let meta = file
            .metadata()
            .map_err(|e| refuse(500, format!("Exception reading log file {name}: {e}")))?;
        if !meta.is_file() {
            return Err(refuse(404, format!("{name} is not a regular file")));
        }
        Ok((file, meta))
    }

    fn file(
        &self,
        cid: &str,
        name: &str,
        query: &str,
        lookup: &dyn Fn(&ContainerId) -> Option<ContainerRunState>,
    ) -> Result<HttpResponse, Refusal> {
        let id = parse_container(cid)?;
        check_name(name)?;
        let content_type = match query_param(query, "format").as_deref() {
            None | Some("") => "text/plain; charset=utf-8",
            Some(f) if f.eq_ignore_ascii_case("text") => "text/plain; charset=utf-8",
            Some(f) if f.eq_ignore_ascii_case("octet-stream") => {
                "application/octet-stream; charset=utf-8"
            }
            Some(_) => {
                return Err(refuse(
                    400,
                    "The valid values for the parameter : format are [text, octet-stream]",
                ))
            }
        };
        let size =
            match query_param(query, "size") {
                None => None,
                Some(s) if s.is_empty() => None,
                Some(s) => Some(s.trim().parse::<i64>().map_err(|_| {
                    refuse(400, format!("size must be an integer (bytes), got {s:?}"))
                })?),
            };
        let state = lookup(&id);
        let dirs = self.known_dirs(&id, state)?;
        let (mut file, meta) = self.open(&dirs, name)?;
        let len = meta.len();
        // Java's window: size < 0 the last |size| bytes, size ≥ 0 the first size bytes.
        let (skip, count) = match size {
            None => (0, len),
            Some(n) if n < 0 => {
                let abs = n.unsigned_abs();
                if abs < len {
                    (len - abs, abs)
                } else {
                    (0, len)
                }
            }
            Some(n) => (0, (n as u64).min(len)),
        };
        let cid_s = id.to_string();
        let mut resp = HttpResponse::new(200, content_type, Vec::new())
            .header("X-Content-Type-Options", "nosniff");
        if count > 0 {
            let first = format!("Container: {cid_s} on {}", self.node_id);
            let head = format!(
                "{first}\nLogAggregationType: LOCAL\n{}\nLogType:{name}\nLogLastModifiedTime:{}\nLogLength:{len}\nLogContents:\n",
                "=".repeat(first.len()),
                java_date(modified_ms(&meta)),
            );
            file.seek(SeekFrom::Start(skip))
                .map_err(|e| refuse(500, format!("Exception reading log file {name}: {e}")))?;
            resp.push_bytes(head).push_file(file, count);
        }
        let end = format!("End of LogType:{name}");
        let mut foot = format!("{end}.");
        if state == Some(ContainerRunState::Running) {
            foot.push_str(&format!(
                "This log file belongs to a running container ({cid}) and so may not be complete."
            ));
        }
        foot.push('\n');
        foot.push_str(&"*".repeat(end.len() + 50));
        foot.push_str("\n\n");
        resp.push_bytes(foot);
        Ok(resp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_dates_in_utc() {
        assert_eq!(java_date(0), "N/A");
        assert_eq!(java_date(-5), "N/A");
        assert_eq!(java_date(1), "Thu Jan 01 00:00:00 +0000 1970");
        // 2024-02-29T13:05:09Z, a leap day, a Thursday
        assert_eq!(
            java_date(1_709_211_909_000),
            "Thu Feb 29 13:05:09 +0000 2024"
        );
        // 2000-12-31T23:59:59.999Z, a Sunday
        assert_eq!(java_date(978_307_199_999), "Sun Dec 31 23:59:59 +0000 2000");
    }

    #[test]
    fn names_are_one_segment() {
        for bad in ["", ".", "..", "a/b", "/etc", "a\0b"] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        assert!(check_name(&"x".repeat(256)).is_err());
        for ok in ["stdout", "..x", "a.b", "syslog.1", "x y"] {
            assert!(check_name(ok).is_ok(), "{ok:?}");
        }
    }

    #[test]
    fn node_host_is_the_host_part() {
        let l = ContainerLogs::new(vec![], "nm1.example:45454");
        assert_eq!(l.node_host, "nm1.example");
        assert!(l.started_ms > 0);
    }
}
