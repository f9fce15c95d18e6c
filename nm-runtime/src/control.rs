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
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let listener = UnixListener::bind(path).map_err(io)?;
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
        })
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
