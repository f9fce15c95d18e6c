//! The heartbeat storm's engine: N simulated NodeManagers on K outbound TCP connections (one per
//! node by default), all driven by one or two epoll event-loop threads.
//!
//! How it fits together:
//!
//! - [`Plan`] is what one load process runs: the ResourceTracker address, the global indices of
//!   its nodes, its connection and thread counts, the pacing, and a [`Timeline`] (ramp start,
//!   measured window, stop) in nanoseconds of the process's clock. [`run_process`] starts the
//!   loop threads (connection `c` belongs to thread `c % threads`, node `i` of the process to
//!   connection `i % connections`), reads the process's own CPU time and open descriptors at
//!   the window's edges, joins the threads and returns one [`ProcFigures`] (serialisable: a
//!   child process of `--processes` prints it as JSON for the parent to merge).
//! - A loop thread ([`Loop`]) owns its connections ([`Conn`]: socket, [`Caller`], [`Responses`],
//!   a [`FrameAccumulator`], one output buffer) and their nodes ([`Node`]: state, last
//!   responseId, master-key ids, schedule, the encoded requests). One min-heap of timers holds a
//!   wake-up per node (its registration slot on the ramp, then its beats) and per connection (its
//!   connect, or reconnect after the retry delay). The loop: fire due timers (append frames to
//!   the connections' output buffers), write each dirty connection once, then `epoll_pwait2`
//!   (nanosecond timeout) until the next timer; edge-triggered readiness, a read into one
//!   per-thread buffer until a short read.
//! - Why not `ipc`'s transport: its public API is a server's — [`ipc::transport::start`] binds a
//!   listener and makes a session per *accepted* connection; there is no way to hand it an
//!   outbound (connecting) socket, no timer callback for pacing, and a session may only write from
//!   inside its own receive/send-progress callbacks. A client with thousands of paced outbound
//!   connections needs all three, so this loop is written on epoll (libc) with the same frame
//!   handling (`hadoop_wire`'s [`Caller`] / [`Responses`] / [`FrameAccumulator`]) the transport
//!   and `ipc::client` use.
//!
//! Behaviour per node, as a Java NodeManager: `registerNodeManager` at its slot on the ramp
//! (`--ramp-per-s`), then `nodeHeartbeat` every interval with jitter, phase-spread across nodes
//! (node `g` of `N` is anchored at `start + g·interval/N`); RESYNC re-registers at once;
//! SHUTDOWN stops the node; a dead connection (read EOF or error, write error, failed connect)
//! is closed and reconnected after the retry delay (as the NM's RM proxy retries), its in-flight
//! calls lost and retried by the next beat. At most one call in flight per node: a beat due while
//! the previous one is unanswered is sent as soon as the answer arrives (`late`); a further one
//! due meanwhile is dropped (`skipped`), as are beats due while the connection is down.
//!
//! Latency: each heartbeat's `sched` latency runs from its *scheduled* time (no coordinated
//! omission: a loop that falls behind, or a deferred beat, counts its lateness), its `rpc`
//! latency from when its frame was written into the output buffer. Both are recorded for beats
//! scheduled inside the measured window; `heartbeats` counts answers received inside it.
//!
//! Allocation-light: each node's requests are encoded once (`benches::rm_heartbeat` fixtures,
//! responseId patched in place), a beat costs a frame header and a memcpy into its connection's
//! output buffer; responses are read into one per-thread buffer and cut in place (only a frame
//! straddling reads is copied, by the accumulator). Heartbeat answers are read with the view.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use benches::rm_heartbeat as fixtures;
use hadoop_wire::encode::{ConnectionContext, RequestHeader};
use hadoop_wire::frame::{FrameAccumulator, FrameDecoder};
use hadoop_wire::pb::hadoop::yarn::{ContainerStateProto, ExecutionTypeProto, NodeActionProto};
use hadoop_wire::rpc::client::{Caller, Responses, StateIdCell};
use hadoop_wire::yarn::{
    HADOOP_VERSION, NODE_HEARTBEAT, REGISTER_NODE_MANAGER, RESOURCE_TRACKER_PROTOCOL,
    RESOURCE_TRACKER_VERSION,
};
use hdrhistogram::Histogram;
use rm_core::ids::NodeKey;
use serde::{Deserialize, Serialize};

use crate::loadgen::{heartbeat_response, register_response, Resp};

/// The largest response frame accepted (a heartbeat answer is tens of bytes; this only stops a
/// corrupt length from allocating).
pub const MAX_RESPONSE: u32 = 64 << 20;
/// Histogram range, µs.
const HIST_MAX_US: u64 = 600_000_000;
/// Bytes per read into the per-thread buffer.
const READ_BUF: usize = 64 * 1024;
/// Timers fired per loop turn before I/O is looked at again.
const TIMER_BATCH: usize = 4096;
/// `IP_BIND_ADDRESS_NO_PORT` (linux/in.h; not in the libc crate): bind a source address without
/// taking a port, so that connect() picks the port per 4-tuple.
const IP_BIND_ADDRESS_NO_PORT: libc::c_int = 24;
const NO_KEYS: u64 = u64::MAX;

/// When things happen, in ns of the process clock (`clock0`).
#[derive(Debug, Clone, Copy)]
pub struct Timeline {
    /// The ramp starts (node `g` registers at `start + g/ramp`); beats are anchored here.
    pub start: u64,
    /// The measured window.
    pub m0: u64,
    pub m1: u64,
    /// The loop threads stop.
    pub stop: u64,
}

/// What one load process runs.
#[derive(Debug, Clone)]
pub struct Plan {
    pub addr: SocketAddr,
    /// Global indices of this process's nodes.
    pub nodes: Vec<usize>,
    /// Nodes across all processes (for the phase spread).
    pub total_nodes: usize,
    /// Connections of this process.
    pub connections: usize,
    pub threads: usize,
    pub containers: usize,
    pub interval_ns: u64,
    /// Relative jitter of each interval (0.05 = ±5 %).
    pub jitter: f64,
    pub ramp_per_s: f64,
    pub retry_ns: u64,
    pub port_base: u16,
    /// Source addresses for the connections (connection `c` binds `source_ips[c % len]`); empty =
    /// the kernel's choice.
    pub source_ips: Vec<Ipv4Addr>,
    /// The peer is the raw reference server: any SUCCESS answer to a registration registers,
    /// and responseIds are not checked (its answer is a fixed template).
    pub raw_peer: bool,
    pub timeline: Timeline,
}

/// Counts of one loop thread, one process or the whole run.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Counters {
    /// Heartbeat answers received inside the measured window.
    pub heartbeats: u64,
    /// Heartbeat answers received at any time.
    pub heartbeats_total: u64,
    /// Successful registrations (re-registrations included).
    pub registrations: u64,
    /// Nodes registered at least once.
    pub registered: u64,
    pub resyncs: u64,
    pub shutdowns: u64,
    /// RPC errors, unreadable answers, answers to no waiting call.
    pub errors: u64,
    /// Beats sent late because the previous one was still unanswered when they came due.
    pub late: u64,
    /// Beats dropped: due while another was already deferred, due while the connection was down
    /// or the node re-registering, or lost in flight with a dead connection.
    pub skipped: u64,
    /// Connections that died after being up.
    pub disconnects: u64,
    /// Connections re-established after a death or failed connect.
    pub reconnects: u64,
    /// Connect attempts that failed.
    pub connect_failures: u64,
    /// NORMAL heartbeat answers whose responseId was not the last one + 1 (not checked against
    /// the raw server).
    pub response_id_errors: u64,
    /// Calls still unanswered when the loop stopped.
    pub unanswered_at_end: u64,
}

impl Counters {
    pub fn add(&mut self, o: &Counters) {
        self.heartbeats += o.heartbeats;
        self.heartbeats_total += o.heartbeats_total;
        self.registrations += o.registrations;
        self.registered += o.registered;
        self.resyncs += o.resyncs;
        self.shutdowns += o.shutdowns;
        self.errors += o.errors;
        self.late += o.late;
        self.skipped += o.skipped;
        self.disconnects += o.disconnects;
        self.reconnects += o.reconnects;
        self.connect_failures += o.connect_failures;
        self.response_id_errors += o.response_id_errors;
        self.unanswered_at_end += o.unanswered_at_end;
    }
}

/// What one load process measured (a child prints it as JSON).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ProcFigures {
    pub counters: Counters,
    /// (value µs, count) of the RPC latency histogram (from the write).
    pub rpc_us: Vec<(u64, u64)>,
    /// (value µs, count) of the latency from the scheduled time.
    pub sched_us: Vec<(u64, u64)>,
    /// This process's CPU time inside the measured window, µs.
    pub cpu_us: u64,
    /// Descriptors open at the window's start (count of /proc/self/fd).
    pub fds: u64,
    /// The soft RLIMIT_NOFILE after raising it.
    pub fd_limit: u64,
    pub connections: usize,
    pub threads: usize,
    /// Last first-registration answer, ns after the ramp start.
    pub last_registration_ns: u64,
    /// Lowest / highest last responseId over the nodes that registered.
    pub min_response_id: Option<i32>,
    pub max_response_id: Option<i32>,
    /// One heartbeat answer seen inside the window: its frame size (length prefix included) and
    /// its message bytes, hex (the raw server's template).
    pub sample_frame_bytes: Option<usize>,
    pub sample_payload_hex: Option<String>,
    pub first_error: Option<String>,
    /// How late the process was ready for the shared start (children), ms.
    pub started_late_ms: f64,
}

pub fn hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIST_MAX_US, 3).expect("static histogram bounds")
}

fn hist_pairs(h: &Histogram<u64>) -> Vec<(u64, u64)> {
    h.iter_recorded()
        .map(|v| (v.value_iterated_to(), v.count_at_value()))
        .collect()
}

pub fn hist_from(pairs: &[(u64, u64)], into: &mut Histogram<u64>) -> Result<()> {
    for &(v, n) in pairs {
        into.record_n(v.clamp(1, HIST_MAX_US), n)
            .context("merging a latency histogram")?;
    }
    Ok(())
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

pub fn unhex(s: &str) -> Result<Vec<u8>> {
    let s = s.trim();
    anyhow::ensure!(s.len() % 2 == 0, "odd-length hex");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).context("bad hex digit"))
        .collect()
}

/// Raises the soft RLIMIT_NOFILE to the hard limit; returns the soft limit now in force.
pub fn raise_nofile() -> u64 {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the live local it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return 0;
    }
    if r.rlim_cur < r.rlim_max {
        let want = libc::rlimit {
            rlim_cur: r.rlim_max,
            rlim_max: r.rlim_max,
        };
        // SAFETY: setrlimit reads one rlimit from the live local it is given.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &want) } == 0 {
            r.rlim_cur = r.rlim_max;
        }
    }
    r.rlim_cur
}

/// Descriptors open in this process.
pub fn open_fds() -> u64 {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count() as u64)
}

fn node_key(i: usize, port_base: u16) -> NodeKey {
    let hi = i / 40_000;
    let port = port_base as i32 + (i % 40_000) as i32;
    NodeKey::new(&format!("127.0.{hi}.1"), port)
}

/// One node's encoded requests.
struct NodeReq {
    key: NodeKey,
    app: i32,
    register: Vec<u8>,
    heartbeat: Vec<u8>,
    rid_at: usize,
    built_keys: u64,
}

impl NodeReq {
    fn new(g: usize, port_base: u16, containers: usize) -> Self {
        let key = node_key(g, port_base);
        let register = fixtures::register_request(&key, 1 << 20, 512, HADOOP_VERSION);
        let mut r = NodeReq {
            key,
            app: g as i32 + 1,
            register,
            heartbeat: Vec::new(),
            rid_at: 0,
            built_keys: NO_KEYS,
        };
        r.build_heartbeat(containers, NO_KEYS);
        r
    }

    /// Encodes the heartbeat (again only when the RM rolled a key).
    fn build_heartbeat(&mut self, containers: usize, keys: u64) {
        let statuses = fixtures::containers(self.app, containers)
            .into_iter()
            .map(|k| {
                fixtures::container_status(
                    k,
                    ContainerStateProto::CRunning,
                    -1000,
                    ExecutionTypeProto::Guaranteed,
                )
            })
            .collect();
        let status = fixtures::node_status(&self.key, statuses, true);
        let k = (keys != NO_KEYS).then_some(((keys >> 32) as u32 as i32, keys as u32 as i32));
        let (buf, at) = fixtures::heartbeat_request(&status, 0, k);
        self.heartbeat = buf;
        self.rid_at = at;
        self.built_keys = keys;
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NState {
    NeedRegister,
    Registering,
    Idle,
    InFlight,
    Stopped,
}

struct Node {
    global: usize,
    conn: u32,
    /// Position on its connection (`call id % nodes on the connection`).
    l: u32,
    state: NState,
    ever_registered: bool,
    /// A wake-up for this node is in the heap.
    armed: bool,
    response_id: i32,
    keys: u64,
    /// The call id of the call in flight.
    call_id: i32,
    sched_ns: u64,
    sent_ns: u64,
    /// The scheduled time of a beat waiting for the one in flight.
    deferred: Option<u64>,
    next_due: u64,
    reg_at: u64,
    rng: u64,
    req: NodeReq,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CState {
    Down,
    Connecting,
    Up,
}

struct Conn {
    sock: Option<TcpStream>,
    state: CState,
    caller: Caller,
    responses: Responses,
    acc: FrameAccumulator,
    out: Vec<u8>,
    /// Bytes of `out` already written.
    off: usize,
    writable: bool,
    dirty: bool,
    /// Thread-local node indices; a call id names its node as `id % nodes.len()`.
    nodes: Vec<u32>,
    seq: usize,
    ever_up: bool,
    src: Option<Ipv4Addr>,
}

/// What a response frame said, decided while the connection's accumulator is borrowed.
enum Outcome {
    Registered(Resp),
    Beat(Resp),
    Remote(String),
    Bad(String),
}

const CONN_TAG: u32 = 1 << 31;

struct Loop {
    plan: Arc<Plan>,
    clock0: Instant,
    ep: OwnedFd,
    conns: Vec<Conn>,
    nodes: Vec<Node>,
    timers: BinaryHeap<Reverse<(u64, u32)>>,
    dirty: Vec<u32>,
    c: Counters,
    rpc: Histogram<u64>,
    sched: Histogram<u64>,
    last_registration_ns: u64,
    sample: Option<(usize, Vec<u8>)>,
    first_error: Option<String>,
    rbuf: Vec<u8>,
    replies: Vec<(u32, i32, Outcome)>,
}

fn ctx() -> ConnectionContext<'static> {
    ConnectionContext {
        effective_user: Some("loadgen"),
        real_user: None,
        protocol: Some(RESOURCE_TRACKER_PROTOCOL),
    }
}

fn client_id(seed: usize) -> [u8; 16] {
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&(std::process::id() as u64).to_le_bytes());
    id[8..].copy_from_slice(&(seed as u64 ^ 0x6c6f_6164_6765_6e00).to_le_bytes());
    id
}

fn xorshift(s: &mut u64) -> f64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    (*s >> 11) as f64 / (1u64 << 53) as f64
}

impl Loop {
    /// `conn_ids`: the process-wide connection numbers this thread owns; `node_sets[i]`: the
    /// process's node positions on `conn_ids[i]`.
    fn new(
        plan: Arc<Plan>,
        clock0: Instant,
        conn_ids: &[usize],
        node_sets: Vec<Vec<usize>>,
    ) -> Result<Self> {
        // SAFETY: epoll_create1 takes no pointers; the result is checked before it is wrapped.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error()).context("epoll_create1");
        }
        // SAFETY: `fd` is a fresh descriptor that nothing else owns.
        let ep = unsafe { OwnedFd::from_raw_fd(fd) };
        let p = &plan;
        let tl = p.timeline;
        let mut conns = Vec::with_capacity(conn_ids.len());
        let mut nodes = Vec::new();
        let mut timers = BinaryHeap::with_capacity(conn_ids.len() + p.nodes.len() / p.threads + 16);
        for (ci, (&cid, set)) in conn_ids.iter().zip(node_sets).enumerate() {
            let state_id = StateIdCell::new();
            let mut first_reg = u64::MAX;
            let mut local = Vec::with_capacity(set.len());
            for pos in set {
                let g = p.nodes[pos];
                let reg_at = tl.start + (g as f64 / p.ramp_per_s.max(1e-3) * 1e9) as u64;
                first_reg = first_reg.min(reg_at);
                local.push(nodes.len() as u32);
                timers.push(Reverse((reg_at, nodes.len() as u32)));
                nodes.push(Node {
                    global: g,
                    conn: ci as u32,
                    l: (local.len() - 1) as u32,
                    state: NState::NeedRegister,
                    ever_registered: false,
                    armed: true,
                    response_id: 0,
                    keys: NO_KEYS,
                    call_id: -1,
                    sched_ns: 0,
                    sent_ns: 0,
                    deferred: None,
                    next_due: 0,
                    reg_at,
                    rng: (g as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1,
                    req: NodeReq::new(g, p.port_base, p.containers),
                });
            }
            timers.push(Reverse((first_reg, ci as u32 | CONN_TAG)));
            let src = (!p.source_ips.is_empty()).then(|| p.source_ips[cid % p.source_ips.len()]);
            conns.push(Conn {
                sock: None,
                state: CState::Down,
                caller: Caller::new(client_id(cid), state_id.clone()),
                responses: Responses::new(MAX_RESPONSE, state_id),
                acc: FrameAccumulator::new(FrameDecoder::new(MAX_RESPONSE)),
                out: Vec::new(),
                off: 0,
                writable: false,
                dirty: false,
                nodes: local,
                seq: 0,
                ever_up: false,
                src,
            });
        }
        Ok(Loop {
            plan,
            clock0,
            ep,
            conns,
            nodes,
            timers,
            dirty: Vec::new(),
            c: Counters::default(),
            rpc: hist(),
            sched: hist(),
            last_registration_ns: 0,
            sample: None,
            first_error: None,
            rbuf: vec![0; READ_BUF],
            replies: Vec::new(),
        })
    }

    fn now(&self) -> u64 {
        self.clock0.elapsed().as_nanos() as u64
    }

    fn fail(&mut self, e: String) {
        if self.first_error.is_none() {
            self.first_error = Some(e);
        }
    }

    fn run(&mut self) -> Result<()> {
        let stop = self.plan.timeline.stop;
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
        loop {
            let mut now = self.now();
            if now >= stop {
                break;
            }
            // Due timers.
            let mut fired = 0;
            while let Some(&Reverse((t, tag))) = self.timers.peek() {
                if t > now || fired == TIMER_BATCH {
                    break;
                }
                self.timers.pop();
                fired += 1;
                if tag & CONN_TAG != 0 {
                    self.conn_timer((tag & !CONN_TAG) as usize, now);
                } else {
                    self.node_timer(tag as usize, t, now);
                }
                if fired % 64 == 0 {
                    now = self.now();
                }
            }
            self.flush_dirty();
            // Sleep until the next timer (or stop), or I/O.
            let now = self.now();
            let next = self.timers.peek().map_or(stop, |r| r.0 .0.min(stop));
            let timeout = if fired == TIMER_BATCH {
                0
            } else {
                next.saturating_sub(now)
            };
            let n = match wait_events(&self.ep, &mut events, timeout) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e).context("epoll_pwait2"),
            };
            for ev in &events[..n] {
                let (bits, c) = (ev.events, ev.u64 as usize);
                self.on_event(c, bits);
            }
            self.flush_dirty();
        }
        self.c.unanswered_at_end = self
            .nodes
            .iter()
            .filter(|n| matches!(n.state, NState::InFlight | NState::Registering))
            .count() as u64;
        Ok(())
    }

    // ---- connections ------------------------------------------------------------------------

    fn conn_timer(&mut self, c: usize, now: u64) {
        if self.conns[c].state != CState::Down {
            return;
        }
        match self.connect(c) {
            Ok(true) => self.on_up(c, now),
            Ok(false) => self.conns[c].state = CState::Connecting,
            Err(e) => {
                self.fail(format!("connecting to {}: {e}", self.plan.addr));
                self.c.connect_failures += 1;
                self.timers
                    .push(Reverse((now + self.plan.retry_ns, c as u32 | CONN_TAG)));
            }
        }
    }

    /// Starts a non-blocking connect; `true` if it completed at once.
    fn connect(&mut self, c: usize) -> io::Result<bool> {
        use socket2::{Domain, SockAddr, Socket, Type};
        let addr = self.plan.addr;
        let s = Socket::new(
            Domain::for_address(addr),
            Type::STREAM.nonblocking().cloexec(),
            None,
        )?;
        s.set_tcp_nodelay(true)?;
        if let Some(ip) = self.conns[c].src {
            let one: libc::c_int = 1;
            // SAFETY: passes a pointer to a live c_int of the size given.
            unsafe {
                libc::setsockopt(
                    s.as_raw_fd(),
                    libc::IPPROTO_IP,
                    IP_BIND_ADDRESS_NO_PORT,
                    (&one as *const libc::c_int).cast(),
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                );
            }
            s.bind(&SockAddr::from(SocketAddrV4::new(ip, 0)))?;
        }
        let done = match s.connect(&addr.into()) {
            Ok(()) => true,
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => false,
            Err(e) => return Err(e),
        };
        let stream: TcpStream = s.into();
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET) as u32,
            u64: c as u64,
        };
        // SAFETY: registers a descriptor we own, with a pointer to a live epoll_event.
        let r = unsafe {
            libc::epoll_ctl(
                self.ep.as_raw_fd(),
                libc::EPOLL_CTL_ADD,
                stream.as_raw_fd(),
                &mut ev,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        let conn = &mut self.conns[c];
        conn.sock = Some(stream);
        conn.writable = true;
        Ok(done)
    }

    fn on_up(&mut self, c: usize, now: u64) {
        let conn = &mut self.conns[c];
        conn.state = CState::Up;
        if conn.ever_up {
            self.c.reconnects += 1;
        }
        conn.ever_up = true;
        if conn.caller.hello(&mut conn.out, &ctx()).is_err() {
            self.fail("encoding the connection preamble".into());
        }
        self.mark_dirty(c);
        for i in 0..self.conns[c].nodes.len() {
            let n = self.conns[c].nodes[i] as usize;
            let node = &self.nodes[n];
            if node.state == NState::NeedRegister && node.reg_at <= now {
                self.send_register(n);
            }
        }
    }

    fn conn_down(&mut self, c: usize, why: String) {
        let now = self.now();
        let conn = &mut self.conns[c];
        if conn.state == CState::Down {
            return;
        }
        if conn.state == CState::Up {
            self.c.disconnects += 1;
        } else {
            self.c.connect_failures += 1;
        }
        // Dropping the stream closes it, which also takes it out of the epoll set.
        conn.sock = None;
        conn.state = CState::Down;
        conn.out.clear();
        conn.off = 0;
        conn.acc = FrameAccumulator::new(FrameDecoder::new(MAX_RESPONSE));
        for i in 0..conn.nodes.len() {
            let node = &mut self.nodes[conn.nodes[i] as usize];
            match node.state {
                NState::InFlight => {
                    node.state = NState::Idle;
                    self.c.skipped += 1 + node.deferred.take().map_or(0, |_| 1);
                }
                NState::Registering => node.state = NState::NeedRegister,
                _ => {}
            }
        }
        self.fail(why);
        self.timers
            .push(Reverse((now + self.plan.retry_ns, c as u32 | CONN_TAG)));
    }

    fn mark_dirty(&mut self, c: usize) {
        let conn = &mut self.conns[c];
        if !conn.dirty {
            conn.dirty = true;
            self.dirty.push(c as u32);
        }
    }

    fn flush_dirty(&mut self) {
        while let Some(c) = self.dirty.pop() {
            let c = c as usize;
            self.conns[c].dirty = false;
            if let Err(e) = self.flush(c) {
                self.conn_down(c, format!("writing to {}: {e}", self.plan.addr));
            }
        }
    }

    /// Writes what the connection has queued, until done or the socket is full.
    fn flush(&mut self, c: usize) -> io::Result<()> {
        let conn = &mut self.conns[c];
        if conn.state != CState::Up || !conn.writable {
            return Ok(());
        }
        let Some(sock) = conn.sock.as_mut() else {
            return Ok(());
        };
        write_queued(sock, &mut conn.out, &mut conn.off, &mut conn.writable)
    }

    fn on_event(&mut self, c: usize, bits: u32) {
        let err = bits & (libc::EPOLLERR | libc::EPOLLHUP) as u32 != 0;
        match self.conns[c].state {
            CState::Down => {}
            CState::Connecting => match connect_outcome(self.conns[c].sock.as_ref(), err) {
                Ok(()) => {
                    let now = self.now();
                    self.on_up(c, now);
                }
                Err(e) => self.conn_down(c, format!("connecting to {}: {e}", self.plan.addr)),
            },
            CState::Up => {
                if bits & libc::EPOLLOUT as u32 != 0 {
                    self.conns[c].writable = true;
                    self.mark_dirty(c);
                }
                if bits & (libc::EPOLLIN | libc::EPOLLRDHUP) as u32 != 0 || err {
                    self.read(c);
                }
            }
        }
    }

    /// Reads until a short read, handling every complete frame.
    fn read(&mut self, c: usize) {
        loop {
            let Some(sock) = self.conns[c].sock.as_mut() else {
                return;
            };
            let n = match sock.read(&mut self.rbuf) {
                Ok(0) => {
                    self.conn_down(c, format!("connection closed by {}", self.plan.addr));
                    return;
                }
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.conn_down(c, format!("reading from {}: {e}", self.plan.addr));
                    return;
                }
            };
            if let Err(e) = self.frames(c, n) {
                self.c.errors += 1;
                self.conn_down(c, e);
                return;
            }
            let mut replies = std::mem::take(&mut self.replies);
            let now = self.now();
            for (node, call_id, outcome) in replies.drain(..) {
                self.on_reply(node as usize, call_id, outcome, now);
            }
            self.replies = replies;
            if n < self.rbuf.len() {
                return;
            }
        }
    }

    /// Cuts the frames out of `rbuf[..n]` and decides what each says (into `self.replies`).
    fn frames(&mut self, c: usize, n: usize) -> Result<(), String> {
        let Loop {
            conns,
            nodes,
            rbuf,
            replies,
            sample,
            plan,
            clock0,
            ..
        } = self;
        let conn = &mut conns[c];
        let m = conn.nodes.len();
        let mut input = &rbuf[..n];
        loop {
            let step = conn
                .acc
                .next_frame(input)
                .map_err(|e| format!("bad response frame: {e}"))?;
            input = &input[step.consumed..];
            let Some(frame) = step.frame else {
                return Ok(());
            };
            let reply = conn
                .responses
                .reply(&frame)
                .map_err(|e| format!("bad response frame: {e}"))?;
            // Negative call ids are Hadoop's own (a FATAL not tied to a call): no node's.
            if reply.call_id < 0 {
                let msg = match &reply.result {
                    Err(e) => format!("{}: {}", e.class, e.message),
                    Ok(_) => "a response with a negative call id".into(),
                };
                return Err(msg);
            }
            let local = conn.nodes[reply.call_id as usize % m];
            let st = nodes[local as usize].state;
            let outcome = match reply.result {
                Err(e) => {
                    let cls = if e.class.is_empty() { "?" } else { &e.class };
                    Outcome::Remote(format!("{cls}: {}", e.message))
                }
                Ok(p) if st == NState::Registering => {
                    if plan.raw_peer {
                        Outcome::Registered(Resp {
                            response_id: None,
                            keys: None,
                            action: NodeActionProto::Normal,
                        })
                    } else {
                        match register_response(p) {
                            Ok(r) => Outcome::Registered(r),
                            Err(e) => Outcome::Bad(format!(
                                "unreadable {REGISTER_NODE_MANAGER} response: {e}"
                            )),
                        }
                    }
                }
                Ok(p) => match heartbeat_response(p) {
                    Ok(r) => {
                        if sample.is_none()
                            && r.action == NodeActionProto::Normal
                            && clock0.elapsed().as_nanos() as u64 >= plan.timeline.m0
                        {
                            *sample = Some((frame.len() + 4, p.to_vec()));
                        }
                        Outcome::Beat(r)
                    }
                    Err(e) => Outcome::Bad(format!("unreadable {NODE_HEARTBEAT} response: {e}")),
                },
            };
            replies.push((local, reply.call_id, outcome));
        }
    }

    // ---- nodes ------------------------------------------------------------------------------

    fn jittered(&mut self, n: usize) -> u64 {
        let (iv, j) = (self.plan.interval_ns as f64, self.plan.jitter);
        let u = xorshift(&mut self.nodes[n].rng);
        (iv * (1.0 + j * (2.0 * u - 1.0))).max(1.0) as u64
    }

    /// Arms the node's next beat after `due` (which was handled).
    fn advance(&mut self, n: usize) {
        let step = self.jittered(n);
        let node = &mut self.nodes[n];
        node.next_due += step;
        node.armed = true;
        self.timers.push(Reverse((node.next_due, n as u32)));
    }

    /// The node's first beat after a first registration: its phase slot at or after `now`.
    fn arm_first_beat(&mut self, n: usize, now: u64) {
        let p = &self.plan;
        let iv = p.interval_ns;
        let phase = p.timeline.start
            + (self.nodes[n].global as u128 * iv as u128 / p.total_nodes as u128) as u64;
        let k = now.saturating_sub(phase).div_ceil(iv);
        let node = &mut self.nodes[n];
        node.next_due = phase + k * iv;
        node.armed = true;
        self.timers.push(Reverse((node.next_due, n as u32)));
    }

    fn node_timer(&mut self, n: usize, due: u64, now: u64) {
        self.nodes[n].armed = false;
        let up = self.conns[self.nodes[n].conn as usize].state == CState::Up;
        let ever = self.nodes[n].ever_registered;
        match self.nodes[n].state {
            NState::NeedRegister => {
                if up {
                    self.send_register(n);
                }
                if ever {
                    self.c.skipped += 1;
                    self.advance(n);
                }
            }
            NState::Registering => {
                if ever {
                    self.c.skipped += 1;
                    self.advance(n);
                }
            }
            NState::Idle => {
                if up {
                    self.send_beat(n, due, now);
                } else {
                    self.c.skipped += 1;
                }
                self.advance(n);
            }
            NState::InFlight => {
                let node = &mut self.nodes[n];
                if node.deferred.is_none() {
                    node.deferred = Some(due);
                    self.c.late += 1;
                } else {
                    self.c.skipped += 1;
                }
                self.advance(n);
            }
            NState::Stopped => {}
        }
    }

    fn next_call_id(&mut self, n: usize) -> i32 {
        let l = self.nodes[n].l as usize;
        let conn = &mut self.conns[self.nodes[n].conn as usize];
        let m = conn.nodes.len();
        let gen_max = (i32::MAX as usize / m).max(1);
        let id = ((conn.seq % gen_max) * m + l) as i32;
        conn.seq += 1;
        id
    }

    fn send_register(&mut self, n: usize) {
        let call_id = self.next_call_id(n);
        let c = self.nodes[n].conn as usize;
        let rh = RequestHeader {
            method_name: REGISTER_NODE_MANAGER,
            declaring_class_protocol_name: RESOURCE_TRACKER_PROTOCOL,
            client_protocol_version: RESOURCE_TRACKER_VERSION,
        };
        let (conns, nodes) = (&mut self.conns, &mut self.nodes);
        let conn = &mut conns[c];
        let node = &mut nodes[n];
        if conn
            .caller
            .call_frame(&mut conn.out, call_id, &rh, &node.req.register[..])
            .is_err()
        {
            self.fail("encoding a registration".into());
            return;
        }
        node.call_id = call_id;
        node.state = NState::Registering;
        node.sent_ns = self.clock0.elapsed().as_nanos() as u64;
        self.mark_dirty(c);
    }

    fn send_beat(&mut self, n: usize, sched: u64, _now: u64) {
        let call_id = self.next_call_id(n);
        let c = self.nodes[n].conn as usize;
        let containers = self.plan.containers;
        let node = &mut self.nodes[n];
        if node.keys != node.req.built_keys {
            node.req.build_heartbeat(containers, node.keys);
        }
        fixtures::set_response_id(&mut node.req.heartbeat, node.req.rid_at, node.response_id);
        let rh = RequestHeader {
            method_name: NODE_HEARTBEAT,
            declaring_class_protocol_name: RESOURCE_TRACKER_PROTOCOL,
            client_protocol_version: RESOURCE_TRACKER_VERSION,
        };
        let conn = &mut self.conns[c];
        if conn
            .caller
            .call_frame(&mut conn.out, call_id, &rh, &node.req.heartbeat[..])
            .is_err()
        {
            self.fail("encoding a heartbeat".into());
            return;
        }
        node.call_id = call_id;
        node.state = NState::InFlight;
        node.sched_ns = sched;
        node.sent_ns = self.clock0.elapsed().as_nanos() as u64;
        self.mark_dirty(c);
    }

    fn on_reply(&mut self, n: usize, call_id: i32, outcome: Outcome, now: u64) {
        let st = self.nodes[n].state;
        if call_id != self.nodes[n].call_id || !matches!(st, NState::Registering | NState::InFlight)
        {
            self.c.errors += 1;
            self.fail(format!(
                "an answer to call {call_id}, which node {} is not waiting for",
                self.nodes[n].global
            ));
            return;
        }
        let tl = self.plan.timeline;
        match (st, outcome) {
            (_, Outcome::Remote(e)) | (_, Outcome::Bad(e)) => {
                self.c.errors += 1;
                self.fail(e);
                if st == NState::Registering {
                    self.nodes[n].state = NState::NeedRegister;
                    if !self.nodes[n].armed {
                        // Not beating yet: retry the registration after the retry delay.
                        self.nodes[n].armed = true;
                        self.timers
                            .push(Reverse((now + self.plan.retry_ns, n as u32)));
                    }
                } else {
                    self.nodes[n].state = NState::Idle;
                    self.send_deferred(n, now);
                }
            }
            (NState::Registering, Outcome::Registered(r)) => {
                if r.action != NodeActionProto::Normal {
                    self.c.shutdowns += 1;
                    self.nodes[n].state = NState::Stopped;
                    return;
                }
                self.c.registrations += 1;
                let node = &mut self.nodes[n];
                if let Some(k) = r.keys {
                    node.keys = k;
                }
                node.response_id = 0;
                node.state = NState::Idle;
                if !node.ever_registered {
                    node.ever_registered = true;
                    self.c.registered += 1;
                    self.last_registration_ns = now.saturating_sub(tl.start);
                }
                if !self.nodes[n].armed {
                    self.arm_first_beat(n, now);
                }
            }
            (NState::InFlight, Outcome::Beat(r)) => {
                let node = &mut self.nodes[n];
                if node.sched_ns >= tl.m0 && node.sched_ns < tl.m1 {
                    let _ = self
                        .rpc
                        .record(((now.saturating_sub(node.sent_ns)) / 1000).clamp(1, HIST_MAX_US));
                    let _ = self
                        .sched
                        .record(((now.saturating_sub(node.sched_ns)) / 1000).clamp(1, HIST_MAX_US));
                }
                if now >= tl.m0 && now < tl.m1 {
                    self.c.heartbeats += 1;
                }
                self.c.heartbeats_total += 1;
                match r.action {
                    NodeActionProto::Normal => {
                        if let Some(rid) = r.response_id {
                            if !self.plan.raw_peer && rid != node.response_id.wrapping_add(1) {
                                self.c.response_id_errors += 1;
                            }
                            node.response_id = rid;
                        }
                        // Keys arrive only when rolled; keep echoing the registered ones.
                        if let Some(k) = r.keys {
                            node.keys = k;
                        }
                        node.state = NState::Idle;
                        self.send_deferred(n, now);
                    }
                    NodeActionProto::Resync => {
                        self.c.resyncs += 1;
                        node.deferred = None;
                        node.state = NState::NeedRegister;
                        if self.conns[node.conn as usize].state == CState::Up {
                            self.send_register(n);
                        }
                    }
                    NodeActionProto::Shutdown => {
                        self.c.shutdowns += 1;
                        node.state = NState::Stopped;
                    }
                }
            }
            // A heartbeat-shaped answer to a registration or the other way round cannot be
            // decided (the state picks the decoder); listed for completeness.
            _ => {
                self.c.errors += 1;
            }
        }
    }

    fn send_deferred(&mut self, n: usize, now: u64) {
        if let Some(d) = self.nodes[n].deferred.take() {
            if self.conns[self.nodes[n].conn as usize].state == CState::Up {
                self.send_beat(n, d, now);
            } else {
                self.c.skipped += 1;
            }
        }
    }

    fn figures(&self) -> (Option<i32>, Option<i32>) {
        let ids = self
            .nodes
            .iter()
            .filter(|n| n.ever_registered)
            .map(|n| n.response_id);
        (ids.clone().min(), ids.max())
    }
}

/// Sleeps until `t` ns of `clock0`.
pub fn sleep_until(clock0: Instant, t: u64) {
    let now = clock0.elapsed().as_nanos() as u64;
    if t > now {
        std::thread::sleep(Duration::from_nanos(t - now));
    }
}

/// Runs this process's share of the load (see the module comment).
pub fn run_process(plan: Plan, clock0: Instant) -> Result<ProcFigures> {
    let fd_limit = raise_nofile();
    let plan = Arc::new(plan);
    let k = plan.connections.clamp(1, plan.nodes.len().max(1));
    let threads = plan.threads.clamp(1, k);
    // Node position i → connection i % k; connection c → thread c % threads.
    let mut per_conn: Vec<Vec<usize>> = vec![Vec::new(); k];
    for i in 0..plan.nodes.len() {
        per_conn[i % k].push(i);
    }
    let mut per_thread: Vec<(Vec<usize>, Vec<Vec<usize>>)> =
        (0..threads).map(|_| (Vec::new(), Vec::new())).collect();
    for (c, set) in per_conn.into_iter().enumerate() {
        let t = &mut per_thread[c % threads];
        t.0.push(c);
        t.1.push(set);
    }
    let mut handles = Vec::new();
    for (t, (ids, sets)) in per_thread.into_iter().enumerate() {
        let plan = plan.clone();
        handles.push(
            std::thread::Builder::new()
                .name(format!("lg-loop-{t}"))
                .spawn(move || -> Result<Loop> {
                    // The default timer slack (50 µs) would make every beat that late.
                    // SAFETY: PR_SET_TIMERSLACK takes an integer argument, no pointers.
                    unsafe {
                        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
                    }
                    let mut l = Loop::new(plan, clock0, &ids, sets)?;
                    l.run()?;
                    Ok(l)
                })
                .context("spawning a loop thread")?,
        );
    }
    let tl = plan.timeline;
    sleep_until(clock0, tl.m0);
    let cpu0 = crate::loadgen::self_cpu_us();
    let fds = open_fds();
    sleep_until(clock0, tl.m1);
    let cpu1 = crate::loadgen::self_cpu_us();

    let mut f = ProcFigures {
        cpu_us: cpu1.saturating_sub(cpu0),
        fds,
        fd_limit,
        connections: k,
        threads,
        ..ProcFigures::default()
    };
    let (mut rpc, mut sched) = (hist(), hist());
    for h in handles {
        let l = h
            .join()
            .map_err(|_| anyhow::anyhow!("a loop thread panicked"))??;
        f.counters.add(&l.c);
        rpc.add(&l.rpc).context("merging histograms")?;
        sched.add(&l.sched).context("merging histograms")?;
        f.last_registration_ns = f.last_registration_ns.max(l.last_registration_ns);
        let (lo, hi) = l.figures();
        f.min_response_id = match (f.min_response_id, lo) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        f.max_response_id = f.max_response_id.max(hi);
        if f.sample_payload_hex.is_none() {
            if let Some((len, p)) = &l.sample {
                f.sample_frame_bytes = Some(*len);
                f.sample_payload_hex = Some(hex(p));
            }
        }
        if f.first_error.is_none() {
            f.first_error = l.first_error.clone();
        }
    }
    f.rpc_us = hist_pairs(&rpc);
    f.sched_us = hist_pairs(&sched);
    Ok(f)
}

/// `epoll_pwait2` on `ep` for at most `timeout_ns`: the number of events written to the
/// front of `events`. Shared by the storm's and storm-apps' event loops.
pub(crate) fn wait_events(
    ep: &OwnedFd,
    events: &mut [libc::epoll_event],
    timeout_ns: u64,
) -> io::Result<usize> {
    let ts = libc::timespec {
        tv_sec: (timeout_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (timeout_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: the event array is live and its length is passed; the timespec is a live
    // local; no signal mask.
    let n = unsafe {
        libc::epoll_pwait2(
            ep.as_raw_fd(),
            events.as_mut_ptr(),
            events.len() as libc::c_int,
            &ts,
            std::ptr::null(),
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// Writes `out[*off..]` to a non-blocking `sock` until all is written or the socket is full
/// (a short write or `WouldBlock` clears `writable`: wait for EPOLLOUT). Once all is written the
/// buffer is emptied, and shrunk if a burst grew it. Shared by the storm's and storm-apps'
/// event loops.
pub(crate) fn write_queued(
    sock: &mut TcpStream,
    out: &mut Vec<u8>,
    off: &mut usize,
    writable: &mut bool,
) -> io::Result<()> {
    while *off < out.len() {
        match sock.write(&out[*off..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                *off += n;
                if *off < out.len() {
                    // A short write: the socket buffer is full.
                    *writable = false;
                    return Ok(());
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                *writable = false;
                return Ok(());
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    out.clear();
    *off = 0;
    if out.capacity() > 256 * 1024 {
        out.shrink_to(64 * 1024);
    }
    Ok(())
}

/// How a non-blocking connect ended, once epoll reported its socket (`err`: EPOLLERR or
/// EPOLLHUP was set).
pub(crate) fn connect_outcome(sock: Option<&TcpStream>, err: bool) -> Result<(), String> {
    match sock.map(|s| s.take_error()) {
        Some(Ok(None)) if !err => Ok(()),
        Some(Ok(Some(e))) | Some(Err(e)) => Err(e.to_string()),
        _ => Err("connection refused or reset".to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_refuses_junk() {
        let b = vec![0u8, 1, 0xab, 0xff];
        assert_eq!(unhex(&hex(&b)).unwrap(), b);
        assert!(unhex("abc").is_err());
        assert!(unhex("zz").is_err());
    }

    #[test]
    fn jitter_stays_in_its_band() {
        let mut s = 12345u64;
        for _ in 0..10_000 {
            let u = xorshift(&mut s);
            assert!((0.0..1.0).contains(&u));
        }
    }

    #[test]
    fn histograms_merge_through_pairs() {
        let mut h = hist();
        for v in [1u64, 5, 5, 900, 70_000] {
            h.record(v).unwrap();
        }
        let mut back = hist();
        hist_from(&hist_pairs(&h), &mut back).unwrap();
        assert_eq!(back.len(), 5);
        assert_eq!(back.max(), h.max());
        assert_eq!(back.value_at_quantile(0.5), h.value_at_quantile(0.5));
    }
}
