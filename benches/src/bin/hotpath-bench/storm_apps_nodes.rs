//! The simulated NodeManagers of `storm-apps`, event-driven: a few threads, each owning many
//! nodes on one nonblocking TCP connection per node, driven by one epoll loop per thread with
//! the nodes' wake-ups (registration slot on the ramp, then every beat) on a timer heap. This
//! is [`crate::storm`]'s engine made for nodes whose state changes: `storm` sends fixed,
//! pre-encoded heartbeats; here a heartbeat carries what the node runs now (the containers the
//! AMs started on it through ContainerManagementProtocol, and the COMPLETE statuses of those
//! that ended), so each node keeps its encoded request and encodes it again only when its
//! containers or the RM's master keys changed since (a generation counter in its state); an
//! unchanged beat costs a responseId patch, a frame header and a memcpy.
//!
//! Behaviour per node, as Hadoop 3.5's NodeManager (the RM's work-preserving recovery on):
//! `registerNodeManager` at its slot on the ramp with an `NMContainerStatus` for every
//! container it holds (RUNNING, and COMPLETE for those not yet reported) and its running
//! applications, then `nodeHeartbeat` every interval, phase-spread (node `g` of `N` at
//! `start + g·interval/N`). COMPLETE statuses are repeated until a heartbeat (or registration)
//! carrying them succeeds (wire doc trap 1), then forgotten. RESYNC re-registers at once,
//! re-reporting the node's containers (production.md §1.6); SHUTDOWN stops the node; a broken
//! connection is reconnected after a second, its unanswered call lost and its statuses sent
//! again by the next beat. At most one call in flight per node: a beat due while the previous
//! is unanswered goes out when the answer comes (`late_beats`), a further one is dropped
//! (`skipped_beats`). Latency runs from each beat's scheduled time.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{self, Read};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use anyhow::{Context, Result};
use hadoop_wire::encode::{ConnectionContext, RequestHeader};
use hadoop_wire::frame::{FrameAccumulator, FrameDecoder};
use hadoop_wire::pb::hadoop::yarn::{
    ApplicationIdProto, ContainerStateProto, MasterKeyProto, NmContainerStatusProto,
    NodeActionProto, NodeHeartbeatRequestProto, NodeHeartbeatResponseProto, NodeIdProto,
    PriorityProto, RegisterNodeManagerRequestProto, RegisterNodeManagerResponseProto,
};
use hadoop_wire::rpc::client::{Caller, Responses, StateIdCell};
use hadoop_wire::token::identifier::container_from_proto;
use hadoop_wire::yarn::ids::{AppId, ContainerId};
use hadoop_wire::yarn::{
    HADOOP_VERSION, NODE_HEARTBEAT, REGISTER_NODE_MANAGER, RESOURCE_TRACKER_PROTOCOL,
    RESOURCE_TRACKER_VERSION,
};
use prost::Message;
use testkit::heartbeat::capability;

use crate::storm_apps_sim::{status, NodeState, Sim, CARRIED, EXIT_KILLED_BY_RM, SENT};

/// The largest answer accepted (a heartbeat answer is small; this stops a corrupt length).
const MAX_RESPONSE: u32 = 64 << 20;
const READ_BUF: usize = 64 * 1024;
/// Timers fired per loop turn before I/O is looked at again.
const TIMER_BATCH: usize = 2048;
/// A broken connection is tried again after this long (ns).
const RETRY_NS: u64 = 1_000_000_000;
/// The loop looks at `stop` at least this often (ns).
const STOP_POLL_NS: u64 = 100_000_000;
const CONN_TAG: u32 = 1 << 31;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NState {
    NeedRegister,
    Registering,
    Idle,
    InFlight,
    Stopped,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CState {
    Down,
    Connecting,
    Up,
}

/// One simulated node and its connection.
struct Node {
    g: usize,
    sock: Option<TcpStream>,
    cstate: CState,
    caller: Caller,
    responses: Responses,
    acc: FrameAccumulator,
    out: Vec<u8>,
    off: usize,
    writable: bool,
    dirty: bool,
    state: NState,
    registered: bool,
    armed: bool,
    call_id: i32,
    next_call: i32,
    response_id: i32,
    /// The master keys last heard (echoed in every heartbeat, as the NM does).
    keys: Option<(MasterKeyProto, MasterKeyProto)>,
    keys_gen: u64,
    /// The encoded heartbeat, its responseId's offset, and what it was built from.
    hb: Vec<u8>,
    rid_at: usize,
    built: Option<(u64, u64)>,
    /// COMPLETE statuses the request in flight (or the encoded heartbeat) carries.
    carried: Vec<ContainerId>,
    /// COMPLETE statuses the call in flight carries.
    in_flight_carried: Vec<ContainerId>,
    sched_ns: u64,
    deferred: Option<u64>,
    next_due: u64,
    reg_at: u64,
}

fn ctx() -> ConnectionContext<'static> {
    ConnectionContext {
        effective_user: Some("yarn"),
        real_user: None,
        protocol: Some(RESOURCE_TRACKER_PROTOCOL),
    }
}

fn client_id(g: usize) -> [u8; 16] {
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&(std::process::id() as u64).to_le_bytes());
    id[8..].copy_from_slice(&(g as u64 ^ 0x7374_6f72_6d61_7070).to_le_bytes());
    id
}

fn node_id(sim: &Sim, g: usize) -> NodeIdProto {
    let n = &sim.nodes[g];
    NodeIdProto {
        host: Some(n.host.clone()),
        port: Some(n.port),
    }
}

/// A heartbeat request whose responseId is a 5-byte varint at a known offset (patched per
/// beat): the node status with field 2 appended (the last occurrence wins), then the keys.
fn encode_heartbeat(
    sim: &Sim,
    g: usize,
    s: &NodeState,
    keys: Option<&(MasterKeyProto, MasterKeyProto)>,
    out: &mut Vec<u8>,
) -> usize {
    let mb = sim.cfg.container_mb;
    let mut statuses = Vec::with_capacity(s.running.len() + s.completing.len());
    for l in &s.running {
        statuses.push(status(l.id, ContainerStateProto::CRunning, -1000, mb));
    }
    for &(id, exit) in &s.completing {
        statuses.push(status(id, ContainerStateProto::CComplete, exit, mb));
    }
    let ns = hadoop_wire::pb::hadoop::yarn::NodeStatusProto {
        node_id: Some(node_id(sim, g)),
        containers_statuses: statuses,
        node_health_status: Some(hadoop_wire::pb::hadoop::yarn::NodeHealthStatusProto {
            is_node_healthy: Some(true),
            health_report: Some(String::new()),
            last_health_report_time: Some(0),
        }),
        ..Default::default()
    };
    let mut body = ns.encode_to_vec();
    body.push(0x10);
    let rid_in_ns = body.len();
    body.extend_from_slice(&[0x80, 0x80, 0x80, 0x80, 0x00]);
    out.clear();
    out.push(0x0a);
    prost::encoding::encode_varint(body.len() as u64, out);
    let at = out.len() + rid_in_ns;
    out.extend_from_slice(&body);
    if let Some((ck, nk)) = keys {
        let rest = NodeHeartbeatRequestProto {
            last_known_container_token_master_key: Some(ck.clone()),
            last_known_nm_token_master_key: Some(nk.clone()),
            ..Default::default()
        };
        rest.encode(out).unwrap_or_default();
    }
    at
}

fn set_response_id(buf: &mut [u8], at: usize, id: i32) {
    let v = id as u32;
    for (k, b) in buf[at..at + 5].iter_mut().enumerate() {
        let part = ((v >> (7 * k)) & 0x7f) as u8;
        *b = if k < 4 { part | 0x80 } else { part };
    }
}

/// The registration: the node's capacity, and every container it holds (as `NMContainerStatus`,
/// RUNNING or COMPLETE) with the applications they belong to. Returns the COMPLETE ones carried.
fn register_request(sim: &Sim, g: usize, s: &NodeState) -> (Vec<u8>, Vec<ContainerId>) {
    let mb = sim.cfg.container_mb;
    let slots = sim.cfg.node_slots() as i64;
    let nm = |id: ContainerId, state: ContainerStateProto, exit: i32| NmContainerStatusProto {
        container_id: Some(id.to_proto()),
        container_state: Some(state as i32),
        resource: Some(capability(mb, 1)),
        priority: Some(PriorityProto { priority: Some(1) }),
        diagnostics: Some(String::new()),
        container_exit_status: Some(exit),
        creation_time: Some(0),
        ..Default::default()
    };
    let mut statuses = Vec::with_capacity(s.running.len() + s.completing.len());
    let mut apps: Vec<AppId> = Vec::new();
    for l in &s.running {
        statuses.push(nm(l.id, ContainerStateProto::CRunning, -1000));
        if !apps.contains(&l.id.app) {
            apps.push(l.id.app);
        }
    }
    for &(id, exit) in &s.completing {
        statuses.push(nm(id, ContainerStateProto::CComplete, exit));
    }
    let req = RegisterNodeManagerRequestProto {
        node_id: Some(node_id(sim, g)),
        http_port: Some(8042),
        resource: Some(capability(slots * mb, slots as i32)),
        nm_version: Some(HADOOP_VERSION.into()),
        container_statuses: statuses,
        running_applications: apps
            .iter()
            .map(|a| ApplicationIdProto {
                id: Some(a.id),
                cluster_timestamp: Some(a.cluster_timestamp),
            })
            .collect(),
        ..Default::default()
    };
    (
        req.encode_to_vec(),
        s.completing.iter().map(|c| c.0).collect(),
    )
}

struct Loop {
    sim: Arc<Sim>,
    ep: OwnedFd,
    nodes: Vec<Node>,
    timers: BinaryHeap<Reverse<(u64, u32)>>,
    dirty: Vec<u32>,
    rbuf: Vec<u8>,
    iv: u64,
    /// The ramp's start: beats are phase-spread from here.
    start: u64,
}

impl Loop {
    fn new(sim: Arc<Sim>, gs: Vec<usize>, start: u64, ramp_per_s: f64) -> Result<Loop> {
        // SAFETY: epoll_create1 takes no pointers; the result is checked before it is wrapped.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error()).context("epoll_create1");
        }
        // SAFETY: `fd` is a fresh descriptor that nothing else owns.
        let ep = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut timers = BinaryHeap::with_capacity(gs.len() * 2 + 16);
        let nodes = gs
            .into_iter()
            .enumerate()
            .map(|(i, g)| {
                let reg_at = start + (g as f64 / ramp_per_s.max(1e-3) * 1e9) as u64;
                timers.push(Reverse((reg_at, i as u32)));
                let state_id = StateIdCell::new();
                Node {
                    g,
                    sock: None,
                    cstate: CState::Down,
                    caller: Caller::new(client_id(g), state_id.clone()),
                    responses: Responses::new(MAX_RESPONSE, state_id),
                    acc: FrameAccumulator::new(FrameDecoder::new(MAX_RESPONSE)),
                    out: Vec::new(),
                    off: 0,
                    writable: false,
                    dirty: false,
                    state: NState::NeedRegister,
                    registered: false,
                    armed: true,
                    call_id: -1,
                    next_call: 0,
                    response_id: 0,
                    keys: None,
                    keys_gen: 0,
                    hb: Vec::new(),
                    rid_at: 0,
                    built: None,
                    carried: Vec::new(),
                    in_flight_carried: Vec::new(),
                    sched_ns: 0,
                    deferred: None,
                    next_due: 0,
                    reg_at,
                }
            })
            .collect();
        let iv = sim.cfg.interval_ms * 1_000_000;
        Ok(Loop {
            sim,
            ep,
            nodes,
            timers,
            dirty: Vec::new(),
            rbuf: vec![0; READ_BUF],
            iv,
            start,
        })
    }

    fn now(&self) -> u64 {
        self.sim.now()
    }

    fn fail(&self, e: String) {
        self.sim.push_error(e);
    }

    fn run(&mut self) -> Result<()> {
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
        while !self.sim.stop.load(Relaxed) {
            let mut now = self.now();
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
            let now = self.now();
            let next = self
                .timers
                .peek()
                .map_or(now + STOP_POLL_NS, |r| r.0 .0)
                .min(now + STOP_POLL_NS);
            let timeout = if fired == TIMER_BATCH {
                0
            } else {
                next.saturating_sub(now)
            };
            let n = match crate::storm::wait_events(&self.ep, &mut events, timeout) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e).context("epoll_pwait2"),
            };
            for ev in &events[..n] {
                let (bits, i) = (ev.events, ev.u64 as usize);
                self.on_event(i, bits);
            }
            self.flush_dirty();
        }
        Ok(())
    }

    // ---- connections ------------------------------------------------------------------------

    fn conn_timer(&mut self, i: usize, now: u64) {
        if self.nodes[i].cstate != CState::Down || self.nodes[i].state == NState::Stopped {
            return;
        }
        match self.connect(i) {
            Ok(true) => self.on_up(i, now),
            Ok(false) => self.nodes[i].cstate = CState::Connecting,
            Err(e) => {
                self.fail(format!("connecting to {}: {e}", self.sim.cfg.tracker));
                self.sim.c.connect_failures.fetch_add(1, Relaxed);
                self.timers
                    .push(Reverse((now + RETRY_NS, i as u32 | CONN_TAG)));
            }
        }
    }

    fn connect(&mut self, i: usize) -> io::Result<bool> {
        use socket2::{Domain, Socket, Type};
        let addr = self.sim.cfg.tracker;
        let s = Socket::new(
            Domain::for_address(addr),
            Type::STREAM.nonblocking().cloexec(),
            None,
        )?;
        s.set_tcp_nodelay(true)?;
        let done = match s.connect(&addr.into()) {
            Ok(()) => true,
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => false,
            Err(e) => return Err(e),
        };
        let stream: TcpStream = s.into();
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET) as u32,
            u64: i as u64,
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
        let n = &mut self.nodes[i];
        n.sock = Some(stream);
        n.writable = true;
        Ok(done)
    }

    fn on_up(&mut self, i: usize, now: u64) {
        let n = &mut self.nodes[i];
        n.cstate = CState::Up;
        if n.caller.hello(&mut n.out, &ctx()).is_err() {
            self.fail("encoding the connection preamble".into());
        }
        self.mark_dirty(i);
        if self.nodes[i].state == NState::NeedRegister && self.nodes[i].reg_at <= now {
            self.send_register(i);
        }
    }

    fn conn_down(&mut self, i: usize, why: String) {
        let now = self.now();
        let n = &mut self.nodes[i];
        if n.cstate == CState::Down {
            return;
        }
        self.sim.c.disconnects.fetch_add(1, Relaxed);
        n.sock = None;
        n.cstate = CState::Down;
        n.out.clear();
        n.off = 0;
        n.acc = FrameAccumulator::new(FrameDecoder::new(MAX_RESPONSE));
        match n.state {
            NState::InFlight => {
                n.state = NState::Idle;
                n.deferred = None;
            }
            NState::Registering => n.state = NState::NeedRegister,
            _ => {}
        }
        self.fail(why);
        self.timers
            .push(Reverse((now + RETRY_NS, i as u32 | CONN_TAG)));
    }

    fn mark_dirty(&mut self, i: usize) {
        let n = &mut self.nodes[i];
        if !n.dirty {
            n.dirty = true;
            self.dirty.push(i as u32);
        }
    }

    fn flush_dirty(&mut self) {
        while let Some(i) = self.dirty.pop() {
            let i = i as usize;
            self.nodes[i].dirty = false;
            if let Err(e) = self.flush(i) {
                self.conn_down(i, format!("writing to {}: {e}", self.sim.cfg.tracker));
            }
        }
    }

    fn flush(&mut self, i: usize) -> io::Result<()> {
        let n = &mut self.nodes[i];
        if n.cstate != CState::Up || !n.writable {
            return Ok(());
        }
        let Some(sock) = n.sock.as_mut() else {
            return Ok(());
        };
        crate::storm::write_queued(sock, &mut n.out, &mut n.off, &mut n.writable)
    }

    fn on_event(&mut self, i: usize, bits: u32) {
        let err = bits & (libc::EPOLLERR | libc::EPOLLHUP) as u32 != 0;
        match self.nodes[i].cstate {
            CState::Down => {}
            CState::Connecting => {
                match crate::storm::connect_outcome(self.nodes[i].sock.as_ref(), err) {
                    Ok(()) => {
                        let now = self.now();
                        self.on_up(i, now);
                    }
                    Err(e) => {
                        self.sim.c.connect_failures.fetch_add(1, Relaxed);
                        self.conn_down(i, format!("connecting to {}: {e}", self.sim.cfg.tracker))
                    }
                }
            }
            CState::Up => {
                if bits & libc::EPOLLOUT as u32 != 0 {
                    self.nodes[i].writable = true;
                    self.mark_dirty(i);
                }
                if bits & (libc::EPOLLIN | libc::EPOLLRDHUP) as u32 != 0 || err {
                    self.read(i);
                }
            }
        }
    }

    /// Reads until a short read, handling every complete frame.
    fn read(&mut self, i: usize) {
        loop {
            let Some(sock) = self.nodes[i].sock.as_mut() else {
                return;
            };
            let k = match sock.read(&mut self.rbuf) {
                Ok(0) => {
                    self.conn_down(i, format!("connection closed by {}", self.sim.cfg.tracker));
                    return;
                }
                Ok(k) => k,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.conn_down(i, format!("reading from {}: {e}", self.sim.cfg.tracker));
                    return;
                }
            };
            // Cut the frames; each answer is handled after the cut (it needs `&mut self`).
            let mut input = &self.rbuf[..k];
            let mut answers: Vec<(i32, Result<Vec<u8>, String>)> = Vec::new();
            let mut bad = None;
            let n = &mut self.nodes[i];
            loop {
                let step = match n.acc.next_frame(input) {
                    Ok(s) => s,
                    Err(e) => {
                        bad = Some(format!("bad response frame: {e}"));
                        break;
                    }
                };
                input = &input[step.consumed..];
                let Some(frame) = step.frame else {
                    break;
                };
                match n.responses.reply(&frame) {
                    Ok(r) if r.call_id < 0 => {
                        bad = Some(match r.result {
                            Err(e) => format!("{}: {}", e.class, e.message),
                            Ok(_) => "a response with a negative call id".into(),
                        });
                        break;
                    }
                    Ok(r) => answers.push((
                        r.call_id,
                        r.result
                            .map(|p| p.to_vec())
                            .map_err(|e| format!("{}: {}", e.class, e.message)),
                    )),
                    Err(e) => {
                        bad = Some(format!("bad response frame: {e}"));
                        break;
                    }
                }
            }
            let now = self.now();
            for (call_id, r) in answers {
                self.on_reply(i, call_id, r, now);
            }
            if let Some(e) = bad {
                self.sim.c.hb_errors.fetch_add(1, Relaxed);
                self.conn_down(i, e);
                return;
            }
            if k < self.rbuf.len() {
                return;
            }
        }
    }

    // ---- nodes ------------------------------------------------------------------------------

    fn arm(&mut self, i: usize, at: u64) {
        let n = &mut self.nodes[i];
        n.next_due = at;
        n.armed = true;
        self.timers.push(Reverse((at, i as u32)));
    }

    /// The next beat after the one due at `next_due`; beats this thread could not send in
    /// time are counted (`late_beats`) and skipped.
    fn advance(&mut self, i: usize, now: u64) {
        let mut next = self.nodes[i].next_due + self.iv;
        while next + self.iv / 2 < now {
            self.sim.c.late_beats.fetch_add(1, Relaxed);
            next += self.iv;
        }
        self.arm(i, next);
    }

    fn arm_first_beat(&mut self, i: usize, now: u64) {
        let iv = self.iv;
        let total = self.sim.cfg.nodes.max(1) as u128;
        let phase = self.start + (self.nodes[i].g as u128 * iv as u128 / total) as u64;
        let k = now.saturating_sub(phase).div_ceil(iv);
        self.arm(i, phase + k * iv);
    }

    fn node_timer(&mut self, i: usize, due: u64, now: u64) {
        self.nodes[i].armed = false;
        let up = self.nodes[i].cstate == CState::Up;
        match self.nodes[i].state {
            NState::NeedRegister => {
                if up {
                    self.send_register(i);
                } else if self.nodes[i].cstate == CState::Down {
                    self.conn_timer(i, now);
                }
                if self.nodes[i].registered {
                    self.advance(i, now);
                }
            }
            NState::Registering => {
                if self.nodes[i].registered {
                    self.advance(i, now);
                }
            }
            NState::Idle => {
                if up {
                    self.send_beat(i, due);
                } else {
                    self.sim.c.skipped_beats.fetch_add(1, Relaxed);
                }
                self.advance(i, now);
            }
            NState::InFlight => {
                let n = &mut self.nodes[i];
                if n.deferred.is_none() {
                    n.deferred = Some(due);
                    self.sim.c.deferred_beats.fetch_add(1, Relaxed);
                } else {
                    self.sim.c.skipped_beats.fetch_add(1, Relaxed);
                }
                self.advance(i, now);
            }
            NState::Stopped => {}
        }
    }

    fn next_call_id(&mut self, i: usize) -> i32 {
        let n = &mut self.nodes[i];
        let id = n.next_call;
        n.next_call = n.next_call.wrapping_add(1) & i32::MAX;
        id
    }

    fn send_register(&mut self, i: usize) {
        let call_id = self.next_call_id(i);
        let g = self.nodes[i].g;
        let (req, carried) = {
            let s = self.sim.nodes[g].lock();
            register_request(&self.sim, g, &s)
        };
        self.sim.mark_carried(&carried);
        let rh = RequestHeader {
            method_name: REGISTER_NODE_MANAGER,
            declaring_class_protocol_name: RESOURCE_TRACKER_PROTOCOL,
            client_protocol_version: RESOURCE_TRACKER_VERSION,
        };
        let n = &mut self.nodes[i];
        if n.caller
            .call_frame(&mut n.out, call_id, &rh, &req[..])
            .is_err()
        {
            self.fail("encoding a registration".into());
            return;
        }
        n.call_id = call_id;
        n.state = NState::Registering;
        n.in_flight_carried = carried;
        self.mark_dirty(i);
    }

    fn send_beat(&mut self, i: usize, sched: u64) {
        let call_id = self.next_call_id(i);
        let sim = self.sim.clone();
        let n = &mut self.nodes[i];
        {
            let mut s = sim.nodes[n.g].lock();
            if sim.churn.load(Relaxed) {
                sim.churn_step(&mut s);
            }
            let want = (s.gen, n.keys_gen);
            if n.built != Some(want) {
                n.rid_at = encode_heartbeat(&sim, n.g, &s, n.keys.as_ref(), &mut n.hb);
                n.carried.clear();
                n.carried.extend(s.completing.iter().map(|c| c.0));
                n.built = Some(want);
                sim.mark_carried(&n.carried);
            }
        }
        set_response_id(&mut n.hb, n.rid_at, n.response_id);
        let rh = RequestHeader {
            method_name: NODE_HEARTBEAT,
            declaring_class_protocol_name: RESOURCE_TRACKER_PROTOCOL,
            client_protocol_version: RESOURCE_TRACKER_VERSION,
        };
        if n.caller
            .call_frame(&mut n.out, call_id, &rh, &n.hb[..])
            .is_err()
        {
            self.fail("encoding a heartbeat".into());
            return;
        }
        n.call_id = call_id;
        n.state = NState::InFlight;
        n.sched_ns = sched;
        n.in_flight_carried.clone_from(&n.carried);
        self.mark_dirty(i);
    }

    fn send_deferred(&mut self, i: usize) {
        if let Some(d) = self.nodes[i].deferred.take() {
            if self.nodes[i].cstate == CState::Up && self.nodes[i].state == NState::Idle {
                self.send_beat(i, d);
            } else {
                self.sim.c.skipped_beats.fetch_add(1, Relaxed);
            }
        }
    }

    fn take_keys(&mut self, i: usize, ck: Option<&MasterKeyProto>, nk: Option<&MasterKeyProto>) {
        self.sim.take_keys(ck, nk);
        let n = &mut self.nodes[i];
        match (&mut n.keys, ck, nk) {
            (None, Some(a), Some(b)) => {
                n.keys = Some((a.clone(), b.clone()));
                n.keys_gen += 1;
            }
            (Some(k), a, b) => {
                if let Some(a) = a.filter(|a| a.key_id != k.0.key_id) {
                    k.0 = a.clone();
                    n.keys_gen += 1;
                }
                if let Some(b) = b.filter(|b| b.key_id != k.1.key_id) {
                    k.1 = b.clone();
                    n.keys_gen += 1;
                }
            }
            _ => {}
        }
    }

    fn on_reply(&mut self, i: usize, call_id: i32, r: Result<Vec<u8>, String>, now: u64) {
        let st = self.nodes[i].state;
        if call_id != self.nodes[i].call_id || !matches!(st, NState::Registering | NState::InFlight)
        {
            self.sim.c.hb_errors.fetch_add(1, Relaxed);
            self.fail(format!(
                "an answer to call {call_id}, which node {} is not waiting for",
                self.nodes[i].g
            ));
            return;
        }
        let host = &self.sim.nodes[self.nodes[i].g].host;
        let payload = match r {
            Ok(p) => p,
            Err(e) => {
                self.sim.c.hb_errors.fetch_add(1, Relaxed);
                self.fail(format!("{} of {host}: {e}", call_name(st)));
                self.after_failure(i, now);
                return;
            }
        };
        if st == NState::Registering {
            self.on_registered(i, &payload, now);
        } else {
            self.on_beat(i, &payload, now);
        }
    }

    fn after_failure(&mut self, i: usize, now: u64) {
        let n = &mut self.nodes[i];
        if n.state == NState::Registering {
            n.state = NState::NeedRegister;
            if !n.armed {
                self.arm(i, now + RETRY_NS);
            }
        } else {
            n.state = NState::Idle;
            self.send_deferred(i);
        }
    }

    fn on_registered(&mut self, i: usize, payload: &[u8], now: u64) {
        let g = self.nodes[i].g;
        let r = match RegisterNodeManagerResponseProto::decode(payload) {
            Ok(r) => r,
            Err(e) => {
                self.sim.c.hb_errors.fetch_add(1, Relaxed);
                self.fail(format!("unreadable registration answer: {e}"));
                self.after_failure(i, now);
                return;
            }
        };
        if r.node_action() != NodeActionProto::Normal {
            self.nodes[i].state = NState::Stopped;
            self.sim.c.shutdowns.fetch_add(1, Relaxed);
            self.fail(format!(
                "registration of {} refused: {}",
                self.sim.nodes[g].host,
                r.diagnostics_message.unwrap_or_default()
            ));
            return;
        }
        self.take_keys(
            i,
            r.container_token_master_key.as_ref(),
            r.nm_token_master_key.as_ref(),
        );
        // The COMPLETE statuses the registration re-reported are sent.
        let carried = std::mem::take(&mut self.nodes[i].in_flight_carried);
        self.sim.completions_sent(g, &carried);
        self.sim.c.registrations.fetch_add(1, Relaxed);
        let n = &mut self.nodes[i];
        n.response_id = 0;
        n.state = NState::Idle;
        if !n.registered {
            n.registered = true;
            self.sim.c.registered.fetch_add(1, Relaxed);
        }
        if !self.nodes[i].armed {
            self.arm_first_beat(i, now);
        }
    }

    fn on_beat(&mut self, i: usize, payload: &[u8], now: u64) {
        let g = self.nodes[i].g;
        let resp = match NodeHeartbeatResponseProto::decode(payload) {
            Ok(r) => r,
            Err(e) => {
                self.sim.c.hb_errors.fetch_add(1, Relaxed);
                self.fail(format!("unreadable heartbeat answer: {e}"));
                self.after_failure(i, now);
                return;
            }
        };
        let sim = self.sim.clone();
        sim.c.heartbeats.fetch_add(1, Relaxed);
        if sim.in_window(self.nodes[i].sched_ns) {
            sim.record_beat((now.saturating_sub(self.nodes[i].sched_ns)) / 1000);
        }
        if sim.in_window(now) {
            sim.c.heartbeats_window.fetch_add(1, Relaxed);
        }
        match resp.node_action() {
            NodeActionProto::Normal => {}
            NodeActionProto::Resync => {
                // Not taken: the node re-registers at once, re-reporting what it holds
                // (its COMPLETE statuses included).
                sim.c.resyncs.fetch_add(1, Relaxed);
                self.take_keys(
                    i,
                    resp.container_token_master_key.as_ref(),
                    resp.nm_token_master_key.as_ref(),
                );
                let n = &mut self.nodes[i];
                n.deferred = None;
                n.in_flight_carried.clear();
                n.state = NState::NeedRegister;
                if n.cstate == CState::Up {
                    self.send_register(i);
                }
                return;
            }
            NodeActionProto::Shutdown => {
                sim.c.shutdowns.fetch_add(1, Relaxed);
                self.fail(format!("{} told to shut down", sim.nodes[g].host));
                self.nodes[i].state = NState::Stopped;
                return;
            }
        }
        self.take_keys(
            i,
            resp.container_token_master_key.as_ref(),
            resp.nm_token_master_key.as_ref(),
        );
        let mut carried = std::mem::take(&mut self.nodes[i].in_flight_carried);
        sim.completions_sent(g, &carried);
        carried.clear();
        let n = &mut self.nodes[i];
        n.in_flight_carried = carried;
        n.response_id = resp.response_id.unwrap_or(n.response_id);
        n.state = NState::Idle;
        if !resp.containers_to_cleanup.is_empty() || !resp.applications_to_cleanup.is_empty() {
            let mut s = sim.nodes[g].lock();
            for c in &resp.containers_to_cleanup {
                let Some(id) = container_from_proto(c) else {
                    continue;
                };
                sim.c.containers_to_cleanup.fetch_add(1, Relaxed);
                if let Some(k) = s.running.iter().position(|l| l.id == id) {
                    let l = s.running.swap_remove(k);
                    if !l.am {
                        s.completing.push((id, EXIT_KILLED_BY_RM));
                    }
                    s.gen += 1;
                }
            }
            for a in &resp.applications_to_cleanup {
                let app = AppId::new(a.cluster_timestamp.unwrap_or(0), a.id.unwrap_or(0));
                sim.c.apps_to_cleanup.fetch_add(1, Relaxed);
                let before = s.running.len();
                s.running.retain(|l| l.id.app != app);
                if s.running.len() != before {
                    s.gen += 1;
                }
            }
        }
        self.send_deferred(i);
    }
}

fn call_name(st: NState) -> &'static str {
    if st == NState::Registering {
        REGISTER_NODE_MANAGER
    } else {
        NODE_HEARTBEAT
    }
}

impl Sim {
    /// Flags the COMPLETE statuses a request is about to carry: the RM may hand them to the AM
    /// before the node reads the answer.
    fn mark_carried(&self, ids: &[ContainerId]) {
        if ids.is_empty() {
            return;
        }
        let mut l = self.ledger();
        for id in ids {
            *l.entry(*id).or_default() |= CARRIED;
        }
    }

    /// A call carrying the COMPLETE statuses `ids` of node `g` succeeded: the node forgets
    /// them, the ledger counts them sent (once).
    fn completions_sent(&self, g: usize, ids: &[ContainerId]) {
        if ids.is_empty() {
            return;
        }
        {
            let mut s = self.nodes[g].lock();
            let before = s.completing.len();
            s.completing.retain(|(id, _)| !ids.contains(id));
            if s.completing.len() != before {
                s.gen += 1;
            }
        }
        let mut l = self.ledger();
        for id in ids {
            let f = l.entry(*id).or_default();
            if *f & SENT == 0 {
                *f |= SENT;
                self.c.completions_sent.fetch_add(1, Relaxed);
            }
        }
    }
}

/// Starts `threads` node loops; node `g` belongs to loop `g % threads`. Registration of node
/// `g` at `start + g/ramp`.
pub fn spawn(
    sim: &Arc<Sim>,
    threads: usize,
    start: u64,
    ramp_per_s: f64,
) -> Result<Vec<std::thread::JoinHandle<()>>> {
    let t = threads.clamp(1, sim.cfg.nodes.max(1));
    let mut hs = Vec::with_capacity(t);
    for k in 0..t {
        let gs: Vec<usize> = (k..sim.cfg.nodes).step_by(t).collect();
        let s = sim.clone();
        let mut l = Loop::new(s.clone(), gs, start, ramp_per_s)?;
        hs.push(
            std::thread::Builder::new()
                .name(format!("sa-nodes-{k}"))
                .spawn(move || {
                    // The default timer slack (50 µs) would make every beat that late.
                    // SAFETY: PR_SET_TIMERSLACK takes an integer argument, no pointers.
                    unsafe {
                        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
                    }
                    if let Err(e) = l.run() {
                        s.push_error(format!("node loop: {e:#}"));
                    }
                })
                .context("spawning a node loop")?,
        );
    }
    Ok(hs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storm_apps_sim::{Live, SimConfig};
    use hadoop_wire::token::secret::NmTokenSecretManager;
    use std::sync::RwLock;

    fn sim() -> Sim {
        let addr = "127.0.0.1:1".parse().unwrap();
        let cfg = SimConfig {
            tracker: addr,
            scheduler: addr,
            nodes: 3,
            containers_per_node: 2,
            apps: 1,
            churn_per_s: 0.0,
            interval_ms: 1000,
            am_interval_ms: 1000,
            container_mb: 1024,
            node_threads: 1,
            am_threads: 1,
            max_ask: 10,
        };
        Sim::new(
            cfg,
            4242,
            Arc::new(RwLock::new(NmTokenSecretManager::default())),
        )
    }

    fn state() -> NodeState {
        let app = AppId::new(1_700_000_000_000, 7);
        let mut s = NodeState::default();
        s.running.push(Live {
            id: ContainerId::new(app, 1, 1),
            am: true,
        });
        s.running.push(Live {
            id: ContainerId::new(app, 1, 2),
            am: false,
        });
        s.completing.push((ContainerId::new(app, 1, 3), 0));
        s
    }

    #[test]
    fn the_heartbeat_carries_every_container_and_its_patched_response_id() {
        let sim = sim();
        let s = state();
        let mk = |id| MasterKeyProto {
            key_id: Some(id),
            bytes: Some(vec![9; 8]),
        };
        let keys = (mk(5), mk(-6));
        let mut buf = Vec::new();
        let at = encode_heartbeat(&sim, 1, &s, Some(&keys), &mut buf);
        for rid in [0, 1, 300, i32::MAX] {
            set_response_id(&mut buf, at, rid);
            let r = NodeHeartbeatRequestProto::decode(&buf[..]).unwrap();
            let ns = r.node_status.unwrap();
            assert_eq!(ns.response_id, Some(rid));
            assert_eq!(ns.node_id.unwrap().port, Some(4242));
            let st: Vec<(i32, Option<i32>)> = ns
                .containers_statuses
                .iter()
                .map(|c| (c.container_id.as_ref().unwrap().id.unwrap() as i32, c.state))
                .collect();
            assert_eq!(
                st,
                vec![
                    (1, Some(ContainerStateProto::CRunning as i32)),
                    (2, Some(ContainerStateProto::CRunning as i32)),
                    (3, Some(ContainerStateProto::CComplete as i32)),
                ]
            );
            assert_eq!(
                r.last_known_nm_token_master_key.and_then(|k| k.key_id),
                Some(-6)
            );
        }
    }

    #[test]
    fn a_registration_re_reports_what_the_node_holds() {
        let sim = sim();
        let s = state();
        let (buf, carried) = register_request(&sim, 2, &s);
        let r = RegisterNodeManagerRequestProto::decode(&buf[..]).unwrap();
        assert_eq!(r.container_statuses.len(), 3);
        assert_eq!(
            r.container_statuses[2].container_state,
            Some(ContainerStateProto::CComplete as i32)
        );
        assert_eq!(r.container_statuses[2].container_exit_status, Some(0));
        assert_eq!(r.running_applications.len(), 1);
        assert_eq!(r.running_applications[0].id, Some(7));
        assert_eq!(carried, vec![s.completing[0].0]);
    }
}
