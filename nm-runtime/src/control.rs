//! The local control interface: a Unix socket speaking JSON lines, through which container
//! executors and scripts report container events and receive cleanup orders.
//!
//! One JSON object per line each way. Requests, each answered by one line
//! `{"ok":true,...}` or `{"ok":false,"error":"..."}`:
//!
//! | request | effect |
//! |---|---|
//! | `{"op":"launch","container":ID,"memory_mb":1024,"vcores":1,"priority":0,"running":false}` | new container (NEW; RUNNING with `"running":true`); the connection becomes its owner |
//! | `{"op":"running","container":ID}` | NEW → RUNNING |
//! | `{"op":"complete","container":ID,"exit_status":0,"diagnostics":"..."}` | → COMPLETE (first report wins) |
//! | `{"op":"list"}` | `containers`: id, state, exit_status, diagnostics, delivery |
//! | `{"op":"status"}` | the node: phase, response id, counts, totals |
//! | `{"op":"watch"}` | from now on this connection also receives every cleanup order |
//! | `{"op":"localize","container":ID,"source":"hdfs:///p","dest":"/abs/path","overwrite":false}` | the HDFS reader copies the file (see [`crate::hdfs_reader`]); answered when done with `bytes`, `elapsed_ms`, ...; errors carry a `kind` |
//!
//! A connection waiting for a localize reply is not read further until the reply is sent, so
//! replies come in request order.
//!
//! Cleanup orders are pushed as `{"event":"cleanup","container":ID,"reason":"containers_to_cleanup"}`
//! (or `"applications_to_cleanup"`) to the container's owner and to every watcher. The
//! executor stops the container and reports `complete`; if nobody does within the grace time,
//! the agent completes it itself (see [`nm_core::table`]).
//!
//! Limits: lines over [`MAX_LINE`] bytes and more than [`MAX_CONNS`] connections are refused;
//! a connection whose unsent output passes [`MAX_OUTPUT`] (a watcher not reading) is closed.
//!
//! Who may connect: the socket file is mode 0600 (its directory, when the agent makes it,
//! 0700), and every peer's credentials (`SO_PEERCRED`) are checked at accept
//! ([`refuse_peer`]): another uid than the agent's (or root) is refused, and so is any process
//! of a container: the peer or one of its ancestors up to the agent carries a container's
//! launch environment (`CONTAINER_ID`) or sits in a container's cgroup. A refused peer gets
//! one line, `{"ok":false,"error":"..."}`, and is closed. The `localize` request reads HDFS
//! with the agent's own login, and `complete` ends containers: neither is for containers.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use crate::hdfs_reader::{self, Job, LocalizeError, Queue};
use crate::shared::{lock, Shared};
use hadoop_wire::yarn::exit_status;
use nm_core::ids::ContainerId;
use nm_core::table::{CleanupOrder, Delivery, Resource};

pub const MAX_LINE: usize = 64 * 1024;
pub const MAX_CONNS: usize = 64;
pub const MAX_OUTPUT: usize = 1 << 20;

/// Control-socket errors (client side, and binding).
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("control socket {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("control socket {0} is in use by a running agent")]
    InUse(PathBuf),
    #[error("malformed reply from the agent: {0}")]
    BadReply(String),
    #[error("the agent refused: {0}")]
    Refused(String),
    #[error("the agent closed the connection")]
    Closed,
}

struct Conn {
    id: u64,
    stream: UnixStream,
    input: Vec<u8>,
    output: Vec<u8>,
    watch: bool,
    dead: bool,
    /// Waiting for a localize reply: no further line is handled meanwhile.
    pending: bool,
}

/// Where localize requests go.
#[derive(Debug)]
pub enum Localizer {
    /// No HDFS reader: `fs.defaultFS` (as configured) is not `hdfs://…`.
    Off { default_fs: String },
    /// The HDFS reader's queue; sources must be on `default_fs`.
    On { queue: Queue, default_fs: String },
}

/// A request's answer: now, or later (a localize job in the reader's queue).
enum Reply {
    Now(Value),
    Later,
}

/// The server side, polled by the housekeeping thread.
pub struct ControlServer {
    path: PathBuf,
    listener: UnixListener,
    conns: Vec<Conn>,
    next_id: u64,
    owners: HashMap<ContainerId, u64>,
    default_resource: Resource,
    localizer: Localizer,
    own_pid: i32,
    own_uid: u32,
    /// Peers refused by [`refuse_peer`].
    refused: u64,
}

/// Ancestors looked at above a control-socket peer (a deeper chain is refused).
const MAX_ANCESTRY: usize = 64;

/// Why a peer (`pid`, `uid` from `SO_PEERCRED`) may not use the control socket of an agent
/// running as `own_pid`/`own_uid`, or `None` if it may: its uid must be the agent's or root's,
/// and neither it nor an ancestor below the agent (or below init) may be a container's
/// process: one started with a container's environment (`CONTAINER_ID=` in
/// `/proc/<pid>/environ`, the environment it was started with, which it cannot rewrite for
/// its ancestors) or placed in a container's cgroup (a path segment that is a container id).
/// A process whose `/proc` entries cannot be read is refused.
///
/// What this does not stop, said plainly: a container of the agent's own uid (the default
/// executor) that double-forks a child with an emptied environment, where cgroups are off,
/// leaves no trace to see; the agent's uid can also read the agent's memory. Multi-tenant
/// nodes run containers as their users (another uid: refused) or with cgroups (seen).
pub fn refuse_peer(pid: i32, uid: u32, own_pid: i32, own_uid: u32) -> Option<String> {
    if uid != own_uid && uid != 0 {
        return Some(format!(
            "uid {uid} may not use the control socket (the agent runs as uid {own_uid})"
        ));
    }
    let mut p = pid;
    for _ in 0..MAX_ANCESTRY {
        if p <= 1 || p == own_pid {
            return None;
        }
        let proc = PathBuf::from(format!("/proc/{p}"));
        let Ok(env) = std::fs::read(proc.join("environ")) else {
            return Some(format!("process {p} cannot be checked"));
        };
        if env
            .split(|&b| b == 0)
            .any(|kv| kv.starts_with(b"CONTAINER_ID="))
        {
            return Some(format!(
                "process {pid} is a container's (process {p} has a container's environment)"
            ));
        }
        let cgroups = std::fs::read_to_string(proc.join("cgroup")).unwrap_or_default();
        if let Some(c) = cgroups
            .lines()
            .filter_map(|l| l.splitn(3, ':').nth(2))
            .flat_map(|path| path.split('/'))
            .find(|seg| seg.parse::<ContainerId>().is_ok())
        {
            return Some(format!(
                "process {pid} is a container's (process {p} is in {c}'s cgroup)"
            ));
        }
        let Some(ppid) = std::fs::read_to_string(proc.join("stat"))
            .ok()
            .and_then(|st| {
                // pid (comm) state ppid ...: comm may hold spaces and parentheses.
                let rest = &st[st.rfind(')')? + 1..];
                rest.split_whitespace().nth(1)?.parse::<i32>().ok()
            })
        else {
            return Some(format!("process {p} cannot be checked"));
        };
        p = ppid;
    }
    Some(format!(
        "process {pid}: ancestry deeper than {MAX_ANCESTRY}"
    ))
}

fn err(e: impl std::fmt::Display) -> Value {
    json!({"ok": false, "error": e.to_string()})
}

impl ControlServer {
    /// Binds `path`. A stale socket file (nobody accepting) is replaced; a live one is an
    /// error.
    pub fn bind(path: &Path, default_resource: Resource) -> Result<Self, ControlError> {
        let io = |source| ControlError::Io {
            path: path.to_owned(),
            source,
        };
        if path.exists() {
            if UnixStream::connect(path).is_ok() {
                return Err(ControlError::InUse(path.to_owned()));
            }
            std::fs::remove_file(path).map_err(io)?;
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            if !dir.exists() {
                use std::os::unix::fs::DirBuilderExt;
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(dir)
                    .map_err(io)?;
            }
        }
        let listener = UnixListener::bind(path).map_err(io)?;
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(io)?;
        }
        listener.set_nonblocking(true).map_err(io)?;
        Ok(Self {
            path: path.to_owned(),
            listener,
            conns: Vec::new(),
            next_id: 1,
            owners: HashMap::new(),
            default_resource,
            localizer: Localizer::Off {
                default_fs: "file:///".into(),
            },
            own_pid: std::process::id() as i32,
            own_uid: rustix::process::geteuid().as_raw(),
            refused: 0,
        })
    }

    /// Peers refused at accept (see [`refuse_peer`]).
    pub fn refused(&self) -> u64 {
        self.refused
    }

    /// Routes localize requests (the agent sets this once its HDFS reader runs, or to `Off`
    /// with the configured `fs.defaultFS`).
    pub fn set_localizer(&mut self, l: Localizer) {
        self.localizer = l;
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Accepts, reads and answers what is ready. Returns whether it did anything.
    pub fn poll(&mut self, shared: &Shared, wall_ms: i64) -> bool {
        let mut busy = false;
        while let Ok((s, _)) = self.listener.accept() {
            busy = true;
            let verdict = match rustix::net::sockopt::socket_peercred(&s) {
                Ok(cred) => refuse_peer(
                    cred.pid.as_raw_nonzero().get(),
                    cred.uid.as_raw(),
                    self.own_pid,
                    self.own_uid,
                ),
                Err(e) => Some(format!("no peer credentials: {e}")),
            };
            if let Some(why) = verdict {
                self.refused += 1;
                tracing::warn!("control socket: refused a peer: {why}");
                let mut s = s;
                let _ = s.set_nonblocking(true);
                let _ = s.write_all(format!("{}\n", err(why)).as_bytes());
                continue;
            }
            if self.conns.len() >= MAX_CONNS || s.set_nonblocking(true).is_err() {
                let mut s = s;
                let _ = s.write_all(b"{\"ok\":false,\"error\":\"too many connections\"}\n");
                continue;
            }
            self.conns.push(Conn {
                id: self.next_id,
                stream: s,
                input: Vec::new(),
                output: Vec::new(),
                watch: false,
                dead: false,
                pending: false,
            });
            self.next_id += 1;
        }
        // finished localizations: answer, then handle what the connection sent meanwhile
        if let Localizer::On { queue: q, .. } = &self.localizer {
            let mut done = Vec::new();
            while let Some(d) = q.try_done() {
                done.push(d);
            }
            for d in done {
                busy = true;
                if let Some(i) = self.conns.iter().position(|c| c.id == d.conn) {
                    let c = &mut self.conns[i];
                    let _ = serde_json::to_writer(&mut c.output, &d.reply);
                    c.output.push(b'\n');
                    c.pending = false;
                    self.handle_lines(i, shared, wall_ms);
                }
            }
        }
        for i in 0..self.conns.len() {
            let mut chunk = [0u8; 4096];
            loop {
                let c = &mut self.conns[i];
                if c.pending || c.dead {
                    break;
                }
                match c.stream.read(&mut chunk) {
                    Ok(0) => {
                        c.dead = true;
                        break;
                    }
                    Ok(n) => {
                        busy = true;
                        c.input.extend_from_slice(&chunk[..n]);
                        self.handle_lines(i, shared, wall_ms);
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(_) => {
                        c.dead = true;
                        break;
                    }
                }
            }
        }
        busy |= self.flush();
        let before = self.conns.len();
        self.conns
            .retain(|c| !c.dead || !c.output.is_empty() && c.output.len() < MAX_OUTPUT);
        if self.conns.len() != before {
            let live: Vec<u64> = self.conns.iter().map(|c| c.id).collect();
            self.owners.retain(|_, o| live.contains(o));
        }
        busy
    }

    /// Handles the complete lines in connection `i`'s input, up to a localize request that
    /// waits for the reader.
    fn handle_lines(&mut self, i: usize, shared: &Shared, wall_ms: i64) {
        loop {
            let c = &mut self.conns[i];
            if c.pending {
                return;
            }
            let Some(pos) = c.input.iter().position(|&b| b == b'\n') else {
                break;
            };
            let line: Vec<u8> = c.input.drain(..=pos).collect();
            let id = c.id;
            let reply = self.handle(id, &line[..line.len() - 1], shared, wall_ms);
            let c = &mut self.conns[i];
            match reply {
                Reply::Now(v) => {
                    let _ = serde_json::to_writer(&mut c.output, &v);
                    c.output.push(b'\n');
                }
                Reply::Later => c.pending = true,
            }
        }
        let c = &mut self.conns[i];
        if c.input.len() > MAX_LINE {
            let _ = serde_json::to_writer(
                &mut c.output,
                &err(format!("line longer than {MAX_LINE} bytes")),
            );
            c.output.push(b'\n');
            c.input.clear();
            c.dead = true;
        }
    }

    /// A localize request: parsed here, read by the HDFS reader.
    fn localize(&mut self, conn: u64, v: &Value, shared: &Shared) -> Reply {
        let m = &shared.metrics.localize;
        let fail = |e: LocalizeError| {
            m.failed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if matches!(e, LocalizeError::Busy { .. }) {
                m.busy.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            tracing::debug!("localize refused: {e}");
            Reply::Now(e.to_reply())
        };
        let (q, default_fs) = match &self.localizer {
            Localizer::Off { default_fs } => {
                return fail(LocalizeError::NotConfigured {
                    default_fs: default_fs.clone(),
                })
            }
            Localizer::On { queue, default_fs } => (queue, default_fs),
        };
        let req = match hdfs_reader::Request::from_json(v, default_fs) {
            Ok(r) => r,
            Err(e) => return fail(e),
        };
        match q.submit(
            Job {
                conn,
                req,
                queued: std::time::Instant::now(),
            },
            m,
        ) {
            Ok(()) => Reply::Later,
            Err(e) => fail(e),
        }
    }

    fn flush(&mut self) -> bool {
        let mut busy = false;
        for c in &mut self.conns {
            while !c.output.is_empty() {
                match c.stream.write(&c.output) {
                    Ok(0) => {
                        c.dead = true;
                        c.output.clear();
                    }
                    Ok(n) => {
                        busy = true;
                        c.output.drain(..n);
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(_) => {
                        c.dead = true;
                        c.output.clear();
                    }
                }
            }
            if c.output.len() > MAX_OUTPUT {
                c.dead = true;
                c.output.clear();
            }
        }
        busy
    }

    /// Pushes cleanup orders to each container's owner and to every watcher. Returns how many
    /// orders reached at least one connection.
    pub fn dispatch(&mut self, orders: &[CleanupOrder]) -> usize {
        let mut reached = 0;
        for o in orders {
            let owner = self.owners.get(&o.container).copied();
            let line = json!({
                "event": "cleanup",
                "container": o.container.to_string(),
                "reason": o.reason.name(),
            });
            let mut hit = false;
            for c in &mut self.conns {
                if !c.dead && (c.watch || Some(c.id) == owner) {
                    let _ = serde_json::to_writer(&mut c.output, &line);
                    c.output.push(b'\n');
                    hit = true;
                }
            }
            reached += hit as usize;
        }
        self.flush();
        reached
    }

    fn handle(&mut self, conn: u64, line: &[u8], shared: &Shared, wall_ms: i64) -> Reply {
        let v: Value = match serde_json::from_slice(line) {
            Ok(v @ Value::Object(_)) => v,
            Ok(_) => return Reply::Now(err("expected a JSON object")),
            Err(e) => return Reply::Now(err(format!("bad JSON: {e}"))),
        };
        let op = v["op"].as_str().unwrap_or("");
        if op == "localize" {
            return self.localize(conn, &v, shared);
        }
        let container = || -> Result<ContainerId, Value> {
            v["container"]
                .as_str()
                .ok_or_else(|| err("missing \"container\""))?
                .parse()
                .map_err(err)
        };
        let int = |k: &str, d: i64| -> Result<i64, Value> {
            match &v[k] {
                Value::Null => Ok(d),
                x => x
                    .as_i64()
                    .ok_or_else(|| err(format!("\"{k}\" must be an integer"))),
            }
        };
        let r: Result<Value, Value> = (|| match op {
            "launch" => {
                let id = container()?;
                let res = Resource {
                    memory_mb: int("memory_mb", self.default_resource.memory_mb)?,
                    vcores: int("vcores", self.default_resource.vcores as i64)?
                        .clamp(0, i32::MAX as i64) as i32,
                };
                let prio = int("priority", 0)?.clamp(i32::MIN as i64, i32::MAX as i64) as i32;
                let running = v["running"].as_bool().unwrap_or(false);
                lock(&shared.table)
                    .launch(id, res, prio, wall_ms, running)
                    .map_err(err)?;
                self.owners.insert(id, conn);
                Ok(json!({"ok": true}))
            }
            "running" => {
                lock(&shared.table).running(&container()?).map_err(err)?;
                Ok(json!({"ok": true}))
            }
            "complete" => {
                let id = container()?;
                let exit = int("exit_status", 0)?.clamp(i32::MIN as i64, i32::MAX as i64) as i32;
                let diag = v["diagnostics"].as_str().unwrap_or("");
                let changed = lock(&shared.table).complete(&id, exit, diag).map_err(err)?;
                Ok(json!({"ok": true, "changed": changed}))
            }
            "list" => {
                let t = lock(&shared.table);
                let list: Vec<Value> = t
                    .iter()
                    .map(|c| {
                        json!({
                            "container": c.id.to_string(),
                            "state": c.state.name(),
                            "exit_status": (c.exit_status != exit_status::INVALID).then_some(c.exit_status),
                            "diagnostics": c.diagnostics,
                            "delivery": match c.delivery {
                                Delivery::NotDue => "live",
                                Delivery::Pending => "pending",
                                Delivery::InFlight => "in_flight",
                                Delivery::Delivered { .. } => "delivered",
                            },
                            "cleanup": c.cleanup.map(|(_, r)| r.name()),
                        })
                    })
                    .collect();
                Ok(json!({"ok": true, "containers": list}))
            }
            "status" => Ok(status_json(shared)),
            "watch" => {
                if let Some(c) = self.conns.iter_mut().find(|c| c.id == conn) {
                    c.watch = true;
                }
                Ok(json!({"ok": true}))
            }
            other => Err(err(format!("unknown op {other:?}"))),
        })();
        Reply::Now(r.unwrap_or_else(|e| e))
    }
}

/// The node's status as JSON (`status` op, `hotpath container status`).
pub fn status_json(shared: &Shared) -> Value {
    let st = lock(&shared.status).clone();
    let (counts, totals) = {
        let t = lock(&shared.table);
        (t.counts(), t.totals())
    };
    let m = &shared.metrics;
    let l = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
    let health = lock(&shared.health).clone();
    let dirs = shared.dirs.get().map(|d| d.view());
    json!({
        "ok": true,
        "node_id": format!("{}:{}", shared.identity.host, shared.identity.port),
        "healthy": health.healthy,
        "health_report": health.report,
        "last_health_report_time": health.last_report_wall_ms,
        "dirs": dirs.map(|d| json!({
            "good_local_dirs": d.good.local_dirs,
            "good_log_dirs": d.good.log_dirs,
            "local_dirs_for_read": d.local_for_read,
            "log_dirs_for_read": d.log_for_read,
            "bad_local_dirs": d.bad_local,
            "bad_log_dirs": d.bad_log,
        })),
        "phase": st.phase,
        "stopped_reason": st.stopped_reason,
        "response_id": st.response_id,
        "next_interval_ms": st.next_interval_ms,
        "registered_after_ms": st.registered_after_ms,
        "rm_unreachable": st.rm_unreachable,
        "container_key_id": st.container_key_id,
        "nm_key_id": st.nm_key_id,
        "containers": {"new": counts.new, "running": counts.running,
                       "completing": counts.completing, "delivered": counts.delivered},
        "totals": {"launched": totals.launched, "completed": totals.completed,
                   "acked": totals.acked, "forgotten_with_app": totals.forgotten_with_app,
                   "expired": totals.expired, "cleanup_orders": totals.cleanup_orders,
                   "cleanup_forced": totals.cleanup_forced},
        "heartbeats_ok": l(&m.heartbeats_ok),
        "heartbeat_failures": l(&m.heartbeat_failures),
        "rpc_errors": l(&m.rpc_errors),
        "registrations": l(&m.registrations),
        "resyncs": l(&m.resyncs),
        "reconnects": l(&m.reconnects),
        "rm_failovers": l(&m.rm_failovers),
        "rm_id": st.rm_id,
        "rm_identifier": st.rm_identifier,
        "containers_to_cleanup": l(&m.containers_to_cleanup),
        "applications_to_cleanup": l(&m.applications_to_cleanup),
        "localize": {"hdfs_reader": l(&m.localize.reader_running) == 1,
                     "ok": l(&m.localize.ok), "failed": l(&m.localize.failed),
                     "busy": l(&m.localize.busy), "bytes": l(&m.localize.bytes),
                     "pending": l(&m.localize.pending), "active": l(&m.localize.active)},
    })
}

/// The client side (`hotpath container …`, tests, executors written in Rust).
pub struct ControlClient {
    path: PathBuf,
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl ControlClient {
    pub fn connect(path: &Path) -> Result<Self, ControlError> {
        let io = |source| ControlError::Io {
            path: path.to_owned(),
            source,
        };
        let s = UnixStream::connect(path).map_err(io)?;
        let w = s.try_clone().map_err(io)?;
        Ok(Self {
            path: path.to_owned(),
            reader: BufReader::new(s),
            writer: w,
        })
    }

    fn io(&self, source: std::io::Error) -> ControlError {
        ControlError::Io {
            path: self.path.clone(),
            source,
        }
    }

    /// Sends one request and returns the reply as it is, `"ok":false` included (events
    /// arriving first are skipped).
    pub fn request_raw(&mut self, req: &Value) -> Result<Value, ControlError> {
        let mut line =
            serde_json::to_vec(req).map_err(|e| ControlError::BadReply(e.to_string()))?;
        line.push(b'\n');
        self.writer.write_all(&line).map_err(|e| self.io(e))?;
        loop {
            let v = self.read_line(None)?.ok_or(ControlError::Closed)?;
            if v.get("event").is_none() {
                return Ok(v);
            }
        }
    }

    /// Sends one request and returns the reply (events arriving first are skipped). An
    /// `"ok":false` reply is [`ControlError::Refused`].
    pub fn request(&mut self, req: &Value) -> Result<Value, ControlError> {
        let mut line =
            serde_json::to_vec(req).map_err(|e| ControlError::BadReply(e.to_string()))?;
        line.push(b'\n');
        self.writer.write_all(&line).map_err(|e| self.io(e))?;
        loop {
            let v = self.read_line(None)?.ok_or(ControlError::Closed)?;
            if v.get("event").is_some() {
                continue;
            }
            if v["ok"].as_bool() == Some(true) {
                return Ok(v);
            }
            return Err(ControlError::Refused(
                v["error"].as_str().unwrap_or("(no error text)").to_string(),
            ));
        }
    }

    /// The next line (an event after `watch`), waiting at most `timeout` (`None`: forever).
    /// `Ok(None)` on timeout.
    pub fn read_line(&mut self, timeout: Option<Duration>) -> Result<Option<Value>, ControlError> {
        self.reader
            .get_ref()
            .set_read_timeout(timeout)
            .map_err(|e| self.io(e))?;
        let mut buf = String::new();
        match self.reader.read_line(&mut buf) {
            Ok(0) => Err(ControlError::Closed),
            Ok(_) => serde_json::from_str(&buf)
                .map(Some)
                .map_err(|e| ControlError::BadReply(format!("{e}: {buf:?}"))),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => Ok(None),
            Err(e) => Err(self.io(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufRead;
    use std::process::{Command, Stdio};

    const CID: &str = "container_1700000000000_0001_01_000002";

    /// Waits until `pid` has finished exec'ing `sleep` (a spawn returns when the new image
    /// is mapped, possibly before its environment is laid out).
    fn exec_done(pid: i32, with_env: bool) {
        let t0 = std::time::Instant::now();
        while std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default() != "sleep\n"
            || with_env
                && std::fs::read(format!("/proc/{pid}/environ")).map_or(true, |e| e.is_empty())
        {
            assert!(t0.elapsed() < Duration::from_secs(10), "{pid} did not exec");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn me() -> (i32, u32) {
        (
            std::process::id() as i32,
            rustix::process::geteuid().as_raw(),
        )
    }

    /// A process with a container's environment is refused, and so is its child that
    /// dropped that environment (its parent still has it); a plain child of the agent's
    /// (a tool it runs, a test's CLI) and another uid are judged as they should be.
    #[test]
    fn container_processes_and_other_uids_are_refused() {
        let (pid, uid) = me();
        // A container's process (its environment names the container).
        let mut c = Command::new("sleep")
            .arg("30")
            .env("CONTAINER_ID", CID)
            .spawn()
            .unwrap();
        exec_done(c.id() as i32, true);
        let why = refuse_peer(c.id() as i32, uid, pid, uid).expect("refused");
        assert!(why.contains("container's environment"), "{why}");
        // Its child with an emptied environment: the ancestor gives it away.
        let mut parent = Command::new("sh")
            .args(["-c", "env -i sleep 30 & echo $!; wait"])
            .env("CONTAINER_ID", CID)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(parent.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let grandchild: i32 = line.trim().parse().unwrap();
        // `$!` is known before the fork has exec'd `env -i sleep`: wait for the sleep.
        exec_done(grandchild, false);
        let env = std::fs::read(format!("/proc/{grandchild}/environ")).unwrap();
        assert!(!env.windows(13).any(|w| w == b"CONTAINER_ID="));
        let why = refuse_peer(grandchild, uid, pid, uid).expect("refused");
        assert!(why.contains("container's environment"), "{why}");
        // A child without a container's environment may use the socket.
        let mut tool = Command::new("sleep")
            .arg("30")
            .env_remove("CONTAINER_ID")
            .spawn()
            .unwrap();
        exec_done(tool.id() as i32, true);
        assert_eq!(refuse_peer(tool.id() as i32, uid, pid, uid), None);
        // The agent itself, and root's tools.
        assert_eq!(refuse_peer(pid, uid, pid, uid), None);
        assert_eq!(refuse_peer(tool.id() as i32, 0, pid, uid), None);
        // Another uid (a container run as its user).
        let other = if uid == 4242 { 4243 } else { 4242 };
        let why = refuse_peer(tool.id() as i32, other, pid, uid).expect("refused");
        assert!(why.contains(&format!("uid {other}")), "{why}");
        if let Some(g) = rustix::process::Pid::from_raw(grandchild) {
            let _ = rustix::process::kill_process(g, rustix::process::Signal::KILL);
        }
        for p in [&mut c, &mut parent, &mut tool] {
            let _ = p.kill();
            let _ = p.wait();
        }
    }

    /// The socket file is the agent's alone.
    #[test]
    fn the_socket_is_mode_0600() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("hp-ctl-{}", std::process::id()));
        let path = dir.join("sub").join("a.sock");
        let s = ControlServer::bind(
            &path,
            Resource {
                memory_mb: 1,
                vcores: 1,
            },
        )
        .unwrap();
        let mode = std::fs::metadata(s.path()).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let dmode = std::fs::metadata(dir.join("sub"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(dmode, 0o700);
        drop(s);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
