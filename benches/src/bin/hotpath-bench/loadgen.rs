//! `hotpath-bench loadgen heartbeats`: N simulated NodeManagers over real TCP against any
//! ResourceTracker (ours or Java's).
//!
//! How it fits together: the nodes are dealt round-robin onto K connections. Each connection has
//! a **writer** thread that owns its nodes' request buffers and paces them (node `g` of `N` sends
//! at `t0 + k·interval + g·interval/N`, so the load is spread evenly), and a **reader** thread
//! that matches responses to nodes by callId (`callId mod nodes_on_connection`) and records the
//! RPC latency. The two share one [`Slot`] of atomics per node: its state, the last responseId
//! received, the master-key ids to echo (trap 3), and the send time.
//!
//! Per node, as a NodeManager does: `registerNodeManager` first, then `nodeHeartbeat` with the
//! last responseId received; RESYNC re-registers; SHUTDOWN stops the node. A node has at most
//! one call in flight: if its previous heartbeat is still unanswered when its next one is due,
//! that beat is counted as `late` and skipped (a real NM would send it late).
//!
//! The wire is `hadoop_wire`'s, as every client in the workspace speaks it: the writer frames
//! with the connection's [`Caller`] (preamble and connection context, then one call frame per
//! request), the reader takes each frame through the connection's [`Responses`] (length cap,
//! RpcResponseHeader, SUCCESS payload or RemoteError). The two share the connection's
//! [`StateIdCell`], as `ipc::client`'s writers and reader thread do. Call ids are the loadgen's
//! own, not [`Caller::next_call_id`]: `seq·m + l` makes the id name its node, so the reader
//! finds the node with one `%` and no table.
//!
//! Allocation-light: each node's heartbeat is encoded once (the heartbeat fixture of
//! `benches::rm_heartbeat`: 50 RUNNING GUARANTEED statuses, IP-literal host, distinct port)
//! with the responseId as a fixed 5-byte varint that is patched in place
//! ([`fixtures::set_response_id`]), so a beat costs a memcpy into the frame rather than an
//! encode of 50 statuses; frames are built into one reused buffer per connection and responses
//! read into one reused buffer. Re-encoding happens only when the RM rolls a key. A heartbeat
//! response is read in place with [`NodeHeartbeatResponseView`]; a registration response
//! (once per node) is decoded with prost.

use std::io::{BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicU8, Ordering::*};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use benches::rm_heartbeat as fixtures;
use clap::{Args, Subcommand};
use hadoop_wire::encode::{ConnectionContext, RequestHeader};
use hadoop_wire::pb::hadoop::yarn::{
    ContainerStateProto, ExecutionTypeProto, MasterKeyProto, NodeActionProto,
    RegisterNodeManagerResponseProto,
};
use hadoop_wire::rpc::client::{Caller, Responses, StateIdCell};
use hadoop_wire::view::yarn::{MasterKeyView, NodeHeartbeatResponseView};
use hadoop_wire::yarn::{
    HADOOP_VERSION, NODE_HEARTBEAT, REGISTER_NODE_MANAGER, RESOURCE_TRACKER_PROTOCOL,
    RESOURCE_TRACKER_VERSION,
};
use hdrhistogram::Histogram;
use prost::Message;
use rm_core::ids::NodeKey;

/// The largest response frame accepted (a heartbeat answer is tens of bytes; this only stops a
/// corrupt length from allocating).
const MAX_RESPONSE: u32 = 64 << 20;

#[derive(Args)]
pub struct LoadgenArgs {
    #[command(subcommand)]
    cmd: LoadgenCmd,
}

#[derive(Subcommand)]
enum LoadgenCmd {
    /// Simulated NodeManagers heartbeating a ResourceTracker (register, then paced heartbeats).
    Heartbeats(HeartbeatArgs),
}

#[derive(Args, Clone)]
pub struct HeartbeatArgs {
    /// The ResourceTracker address (HOST:PORT).
    #[arg(long)]
    rm: String,
    /// Simulated NodeManagers.
    #[arg(long, default_value_t = 1000)]
    nodes: usize,
    /// RUNNING container statuses per heartbeat.
    #[arg(long, default_value_t = 50)]
    containers: usize,
    /// Each node's heartbeat period.
    #[arg(long, default_value_t = 1000)]
    interval_ms: u64,
    /// Measured seconds (after registration and one warm-up interval).
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// TCP connections (nodes are dealt round-robin onto them); default max(1, min(8, N/250)).
    #[arg(long)]
    connections: Option<usize>,
    /// The RM's Prometheus endpoint (`http://host:port/metrics` or `host:port`), scraped for the
    /// dispatcher backlog.
    #[arg(long)]
    metrics: Option<String>,
    /// A process whose CPU time (utime+stime from /proc/PID/stat) is reported per heartbeat.
    #[arg(long)]
    pid: Option<u32>,
    /// First node port; node i is 127.0.0.1:(port_base + i) (127.0.k.1 beyond 40,000 nodes).
    #[arg(long, default_value_t = 20000)]
    port_base: u16,
    #[arg(long)]
    json: bool,
}

// Node states.
const NEED_REGISTER: u8 = 0;
const REGISTERING: u8 = 1;
const IDLE: u8 = 2;
const IN_FLIGHT: u8 = 3;
const STOPPED: u8 = 4;
const NO_KEYS: u64 = u64::MAX;

/// What the writer and the reader of one connection share about one node.
struct Slot {
    state: AtomicU8,
    response_id: AtomicI32,
    /// (container key id << 32) | nm key id, or [`NO_KEYS`].
    keys: AtomicU64,
    sent_ns: AtomicU64,
}

#[derive(Default)]
struct Counters {
    heartbeats: AtomicU64,
    registrations: AtomicU64,
    resyncs: AtomicU64,
    shutdowns: AtomicU64,
    errors: AtomicU64,
    late: AtomicU64,
}

struct Shared {
    slots: Vec<Slot>,
    counters: Counters,
    stop: AtomicBool,
    measuring: AtomicBool,
    first_error: Mutex<Option<String>>,
    hist: Mutex<Histogram<u64>>,
}

/// One node's encoded requests (owned by its connection's writer).
struct NodeReq {
    key: NodeKey,
    app: i32,
    register: Vec<u8>,
    heartbeat: Vec<u8>,
    rid_at: usize,
    built_keys: u64,
}

impl NodeReq {
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

/// The figures of one run (`--json` keys).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Figures {
    pub nodes: usize,
    pub containers: usize,
    pub connections: usize,
    pub seconds: f64,
    pub hb_per_s: f64,
    pub target_hb_per_s: f64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
    pub max_backlog: Option<u64>,
    pub max_backlog_sampled: Option<u64>,
    pub late: u64,
    pub resyncs: u64,
    pub shutdowns: u64,
    pub errors: u64,
    pub register_seconds: f64,
    pub rm_cpu_us_per_hb: Option<f64>,
    pub loadgen_cpu_us_per_hb: f64,
}

pub fn run(args: LoadgenArgs) -> Result<()> {
    match args.cmd {
        LoadgenCmd::Heartbeats(a) => {
            let f = heartbeats(&a)?;
            if a.json {
                println!("{}", serde_json::to_string(&f)?);
            } else {
                print_text(&f);
            }
            Ok(())
        }
    }
}

fn print_text(f: &Figures) {
    println!(
        "{} nodes × {} containers on {} connections, {:.1} s measured (registration {:.1} s)",
        f.nodes, f.containers, f.connections, f.seconds, f.register_seconds
    );
    println!(
        "  heartbeats/s   {:>10.0}  (target {:.0})",
        f.hb_per_s, f.target_hb_per_s
    );
    println!(
        "  RPC latency µs p50 {}  p99 {}  p999 {}  max {}",
        f.p50_us, f.p99_us, f.p999_us, f.max_us
    );
    let b = |v: Option<u64>| v.map_or("n/a".to_string(), |v| v.to_string());
    println!(
        "  max dispatcher backlog {} (sampled in window: {})",
        b(f.max_backlog),
        b(f.max_backlog_sampled)
    );
    println!(
        "  late {}  resyncs {}  shutdowns {}  errors {}",
        f.late, f.resyncs, f.shutdowns, f.errors
    );
    if let Some(c) = f.rm_cpu_us_per_hb {
        println!("  RM process CPU per heartbeat {c:.1} µs");
    }
    println!(
        "  loadgen CPU per heartbeat {:.1} µs",
        f.loadgen_cpu_us_per_hb
    );
}

fn node_key(i: usize, port_base: u16) -> NodeKey {
    let hi = i / 40_000;
    let port = port_base as i32 + (i % 40_000) as i32;
    NodeKey::new(&format!("127.0.{hi}.1"), port)
}

/// Runs the load and returns the figures.
pub fn heartbeats(a: &HeartbeatArgs) -> Result<Figures> {
    if a.nodes == 0 {
        bail!("--nodes must be at least 1");
    }
    if a.port_base as usize + a.nodes.min(40_000) > 65_536 {
        bail!(
            "--port-base {} leaves no room for the node ports",
            a.port_base
        );
    }
    let addr: SocketAddr =
        a.rm.to_socket_addrs()
            .with_context(|| format!("resolving {}", a.rm))?
            .next()
            .with_context(|| format!("{} resolves to nothing", a.rm))?;
    let k = a
        .connections
        .unwrap_or((a.nodes / 250).clamp(1, 8))
        .clamp(1, a.nodes);
    let interval = Duration::from_millis(a.interval_ms.max(1));
    let interval_ns = interval.as_nanos() as u64;

    let barrier = Arc::new(Barrier::new(k + 1));
    let registered = Arc::new(Barrier::new(k + 1));
    let mut shareds = Vec::new();
    let mut threads = Vec::new();
    let clock0 = Instant::now();
    for c in 0..k {
        let globals: Vec<usize> = (c..a.nodes).step_by(k).collect();
        let mut reqs = Vec::with_capacity(globals.len());
        for &g in &globals {
            let key = node_key(g, a.port_base);
            let register = fixtures::register_request(&key, 1 << 20, 512, HADOOP_VERSION);
            let mut r = NodeReq {
                key,
                app: g as i32 + 1,
                register,
                heartbeat: Vec::new(),
                rid_at: 0,
                built_keys: NO_KEYS,
            };
            r.build_heartbeat(a.containers, NO_KEYS);
            reqs.push(r);
        }
        let shared = Arc::new(Shared {
            slots: (0..globals.len())
                .map(|_| Slot {
                    state: AtomicU8::new(NEED_REGISTER),
                    response_id: AtomicI32::new(0),
                    keys: AtomicU64::new(NO_KEYS),
                    sent_ns: AtomicU64::new(0),
                })
                .collect(),
            counters: Counters::default(),
            stop: AtomicBool::new(false),
            measuring: AtomicBool::new(false),
            first_error: Mutex::new(None),
            hist: Mutex::new(Histogram::new_with_bounds(1, 60_000_000, 3)?),
        });
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(10))
            .with_context(|| format!("connecting to {addr}"))?;
        stream.set_nodelay(true)?;
        let reader = stream.try_clone()?;
        // One client per connection: its writer sends with the Caller, its reader receives
        // with the Responses; both see the same stateId cell.
        let state_id = StateIdCell::new();
        let caller = Caller::new(client_id(globals[0]), state_id.clone());
        let responses = Responses::new(MAX_RESPONSE, state_id);
        let sh = shared.clone();
        threads.push(
            std::thread::Builder::new()
                .name(format!("lg-read-{c}"))
                .spawn(move || read_loop(reader, responses, sh, clock0))?,
        );
        let sh = shared.clone();
        let (b1, b2) = (registered.clone(), barrier.clone());
        let containers = a.containers;
        let n = a.nodes as u64;
        threads.push(
            std::thread::Builder::new()
                .name(format!("lg-write-{c}"))
                .spawn(move || {
                    write_loop(
                        stream,
                        caller,
                        sh,
                        reqs,
                        globals,
                        containers,
                        n,
                        interval_ns,
                        clock0,
                        b1,
                        b2,
                    )
                })?,
        );
        shareds.push(shared);
    }

    // Registration, then the paced phase; one interval of warm-up before measuring.
    let reg_start = Instant::now();
    registered.wait();
    let register_seconds = reg_start.elapsed().as_secs_f64();
    barrier.wait();
    std::thread::sleep(interval);

    let scraper = a.metrics.as_ref().map(|m| Scraper::start(m));
    let cpu0 = a.pid.map(proc_cpu_ticks).transpose()?;
    let self0 = self_cpu_us();
    let hb0: u64 = shareds
        .iter()
        .map(|s| s.counters.heartbeats.load(Relaxed))
        .sum();
    for s in &shareds {
        s.measuring.store(true, Release);
    }
    let t = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(a.duration.max(0.1)));
    for s in &shareds {
        s.measuring.store(false, Release);
    }
    let seconds = t.elapsed().as_secs_f64();
    let hb1: u64 = shareds
        .iter()
        .map(|s| s.counters.heartbeats.load(Relaxed))
        .sum();
    let cpu1 = a.pid.map(proc_cpu_ticks).transpose()?;
    let self1 = self_cpu_us();
    let sampled = scraper.map(|s| s.finish());
    let high_water = match &a.metrics {
        Some(m) => Some(scrape(m).context("scraping the RM's /metrics")?.1),
        None => None,
    };

    for s in &shareds {
        s.stop.store(true, Release);
    }
    for t in threads {
        let _ = t.join();
    }
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
    let sum = |f: fn(&Counters) -> &AtomicU64| -> u64 {
        shareds.iter().map(|s| f(&s.counters).load(Relaxed)).sum()
    };
    for s in &shareds {
        hist.add(&*s.hist.lock().unwrap_or_else(|p| p.into_inner()))?;
    }
    if let Some(e) = shareds
        .iter()
        .find_map(|s| s.first_error.lock().ok().and_then(|g| g.clone()))
    {
        tracing::warn!("first error from the RM: {e}");
    }
    let hbs = hb1 - hb0;
    let ticks = user_hz();
    Ok(Figures {
        nodes: a.nodes,
        containers: a.containers,
        connections: k,
        seconds,
        hb_per_s: hbs as f64 / seconds,
        target_hb_per_s: a.nodes as f64 * 1000.0 / a.interval_ms.max(1) as f64,
        p50_us: hist.value_at_quantile(0.5),
        p99_us: hist.value_at_quantile(0.99),
        p999_us: hist.value_at_quantile(0.999),
        max_us: hist.max(),
        max_backlog: high_water,
        max_backlog_sampled: sampled,
        late: sum(|c| &c.late),
        resyncs: sum(|c| &c.resyncs),
        shutdowns: sum(|c| &c.shutdowns),
        errors: sum(|c| &c.errors),
        register_seconds,
        rm_cpu_us_per_hb: match (cpu0, cpu1) {
            (Some(a), Some(b)) if hbs > 0 => Some((b - a) as f64 * 1e6 / ticks as f64 / hbs as f64),
            _ => None,
        },
        loadgen_cpu_us_per_hb: (self1 - self0) as f64 / hbs.max(1) as f64,
    })
}

#[allow(clippy::too_many_arguments)]
fn write_loop(
    mut s: TcpStream,
    caller: Caller,
    sh: Arc<Shared>,
    mut reqs: Vec<NodeReq>,
    globals: Vec<usize>,
    containers: usize,
    n: u64,
    interval_ns: u64,
    clock0: Instant,
    registered: Arc<Barrier>,
    go: Arc<Barrier>,
) {
    let m = reqs.len();
    let gen_max = (i32::MAX as usize / m).max(1);
    let mut seq: usize = 0;
    let mut out: Vec<u8> = Vec::with_capacity(256 * 1024);
    let now_ns = || clock0.elapsed().as_nanos() as u64;
    let mut alive = true;

    let ctx = ConnectionContext {
        effective_user: Some("loadgen"),
        real_user: None,
        protocol: Some(RESOURCE_TRACKER_PROTOCOL),
    };
    if caller.hello(&mut out, &ctx).is_err() {
        alive = false;
    }

    // Sends node l's next call (register or heartbeat) into `out`. False if nothing was due.
    let send = |l: usize, out: &mut Vec<u8>, seq: &mut usize, reqs: &mut Vec<NodeReq>| {
        let slot = &sh.slots[l];
        let st = slot.state.load(Acquire);
        let (method, body): (&str, &[u8]) = match st {
            NEED_REGISTER => (REGISTER_NODE_MANAGER, &reqs[l].register),
            IDLE => {
                let keys = slot.keys.load(Acquire);
                if keys != reqs[l].built_keys {
                    reqs[l].build_heartbeat(containers, keys);
                }
                let r = &mut reqs[l];
                fixtures::set_response_id(
                    &mut r.heartbeat,
                    r.rid_at,
                    slot.response_id.load(Acquire),
                );
                (NODE_HEARTBEAT, &reqs[l].heartbeat)
            }
            IN_FLIGHT | REGISTERING => {
                sh.counters.late.fetch_add(1, Relaxed);
                return false;
            }
            _ => return false,
        };
        // Non-negative, and `call_id % m == l` (see the module comment).
        let call_id = ((*seq % gen_max) * m + l) as i32;
        *seq += 1;
        let rh = RequestHeader {
            method_name: method,
            declaring_class_protocol_name: RESOURCE_TRACKER_PROTOCOL,
            client_protocol_version: RESOURCE_TRACKER_VERSION,
        };
        if caller.call_frame(out, call_id, &rh, body).is_err() {
            return false;
        }
        slot.sent_ns.store(now_ns(), Release);
        slot.state.store(
            if st == NEED_REGISTER {
                REGISTERING
            } else {
                IN_FLIGHT
            },
            Release,
        );
        true
    };

    // Registration: all nodes, at most 256 unanswered at a time.
    let mut next = 0;
    let reg_deadline = Instant::now() + Duration::from_secs(300);
    while alive && Instant::now() < reg_deadline {
        let pending = sh
            .slots
            .iter()
            .filter(|s| matches!(s.state.load(Acquire), REGISTERING | NEED_REGISTER))
            .count();
        if pending == 0 {
            break;
        }
        let in_flight = sh
            .slots
            .iter()
            .filter(|s| s.state.load(Acquire) == REGISTERING)
            .count();
        let mut budget = 256usize.saturating_sub(in_flight);
        let mut scanned = 0;
        while budget > 0 && scanned < m {
            let l = next % m;
            next += 1;
            scanned += 1;
            if sh.slots[l].state.load(Acquire) == NEED_REGISTER {
                send(l, &mut out, &mut seq, &mut reqs);
                budget -= 1;
            }
        }
        if !out.is_empty() {
            alive = s.write_all(&out).is_ok();
            out.clear();
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    registered.wait();
    go.wait();

    // Paced heartbeats: node g of n is due at t0 + k·interval + g·interval/n.
    let t0 = now_ns();
    let offset = |l: usize| globals[l] as u64 * interval_ns / n;
    let mut round: u64 = 0;
    let mut l = 0;
    while alive && !sh.stop.load(Acquire) {
        let now = now_ns();
        loop {
            let due = t0 + round * interval_ns + offset(l);
            if due > now {
                break;
            }
            send(l, &mut out, &mut seq, &mut reqs);
            l += 1;
            if l == m {
                l = 0;
                round += 1;
            }
            if out.len() > 192 * 1024 {
                break;
            }
        }
        if !out.is_empty() {
            alive = s.write_all(&out).is_ok();
            out.clear();
        }
        let due = t0 + round * interval_ns + offset(l);
        let now = now_ns();
        if due > now {
            std::thread::sleep(Duration::from_nanos((due - now).min(5_000_000)));
        }
    }
    let _ = s.shutdown(std::net::Shutdown::Both);
}

fn read_loop(s: TcpStream, responses: Responses, sh: Arc<Shared>, clock0: Instant) {
    let m = sh.slots.len();
    let mut r = BufReader::with_capacity(256 * 1024, s);
    let mut buf = vec![0u8; 64 * 1024];
    let fail = |sh: &Shared, e: String| {
        let mut g = sh.first_error.lock().unwrap_or_else(|p| p.into_inner());
        if g.is_none() {
            *g = Some(e);
        }
    };
    // A call that got no usable answer: counted, its node sends again (registration again if
    // it was registering).
    let reject = |sh: &Shared, slot: &Slot, st: u8, e: String| {
        sh.counters.errors.fetch_add(1, Relaxed);
        fail(sh, e);
        slot.state.store(
            if st == REGISTERING {
                NEED_REGISTER
            } else {
                IDLE
            },
            Release,
        );
    };
    loop {
        let mut len = [0u8; 4];
        if r.read_exact(&mut len).is_err() {
            if !sh.stop.load(Acquire) {
                fail(&sh, "connection closed by the RM".into());
            }
            return;
        }
        let n = match responses.frame_len(len) {
            Ok(n) => n,
            Err(e) => {
                fail(&sh, e.to_string());
                return;
            }
        };
        if buf.len() < n {
            buf.resize(n, 0);
        }
        if r.read_exact(&mut buf[..n]).is_err() {
            return;
        }
        let now = clock0.elapsed().as_nanos() as u64;
        let reply = match responses.reply(&buf[..n]) {
            Ok(x) => x,
            Err(e) => {
                fail(&sh, format!("bad response frame: {e}"));
                return;
            }
        };
        // Negative call ids are Hadoop's own (a FATAL not tied to a call): no node's.
        if reply.call_id < 0 {
            continue;
        }
        let l = reply.call_id as usize % m;
        let slot = &sh.slots[l];
        let st = slot.state.load(Acquire);
        let payload = match reply.result {
            Ok(p) => p,
            Err(e) => {
                let cls = if e.class.is_empty() { "?" } else { &e.class };
                reject(&sh, slot, st, format!("{cls}: {}", e.message));
                continue;
            }
        };
        if st == REGISTERING {
            let resp = match register_response(payload) {
                Ok(r) => r,
                Err(e) => {
                    reject(
                        &sh,
                        slot,
                        st,
                        format!("unreadable {REGISTER_NODE_MANAGER} response: {e}"),
                    );
                    continue;
                }
            };
            match resp.action {
                NodeActionProto::Normal => {
                    if let Some(k) = resp.keys {
                        slot.keys.store(k, Release);
                    }
                    slot.response_id.store(0, Release);
                    sh.counters.registrations.fetch_add(1, Relaxed);
                    slot.state.store(IDLE, Release);
                }
                _ => {
                    sh.counters.shutdowns.fetch_add(1, Relaxed);
                    slot.state.store(STOPPED, Release);
                }
            }
        } else if st == IN_FLIGHT {
            if sh.measuring.load(Acquire) {
                let us = now.saturating_sub(slot.sent_ns.load(Acquire)) / 1000;
                let _ = sh
                    .hist
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .record(us.max(1));
            }
            let resp = match heartbeat_response(payload) {
                Ok(r) => r,
                Err(e) => {
                    reject(
                        &sh,
                        slot,
                        st,
                        format!("unreadable {NODE_HEARTBEAT} response: {e}"),
                    );
                    continue;
                }
            };
            match resp.action {
                NodeActionProto::Normal => {
                    if let Some(rid) = resp.response_id {
                        slot.response_id.store(rid, Release);
                    }
                    // Keys arrive in a heartbeat response only when rolled; keep echoing the
                    // registered ones otherwise.
                    if let Some(k) = resp.keys {
                        slot.keys.store(k, Release);
                    }
                    sh.counters.heartbeats.fetch_add(1, Relaxed);
                    slot.state.store(IDLE, Release);
                }
                NodeActionProto::Resync => {
                    sh.counters.resyncs.fetch_add(1, Relaxed);
                    slot.state.store(NEED_REGISTER, Release);
                }
                NodeActionProto::Shutdown => {
                    sh.counters.shutdowns.fetch_add(1, Relaxed);
                    slot.state.store(STOPPED, Release);
                }
            }
        }
    }
}

/// What the loadgen acts on in a response.
#[derive(Debug, PartialEq, Eq)]
struct Resp {
    /// `NodeHeartbeatResponseProto.response_id` (a registration response has none).
    response_id: Option<i32>,
    /// The container-token and NM-token master-key ids packed as in [`Slot::keys`], when the
    /// response carries both.
    keys: Option<u64>,
    /// `nodeAction`; absent (or unknown) is `NORMAL`, as in Java.
    action: NodeActionProto,
}

fn pack_keys(container: Option<i32>, nm: Option<i32>) -> Option<u64> {
    Some(((container? as u32 as u64) << 32) | nm? as u32 as u64)
}

/// A `RegisterNodeManagerResponseProto`, decoded with prost: once per node (and after a
/// RESYNC), so the allocation of its key bytes does not matter.
fn register_response(b: &[u8]) -> Result<Resp, prost::DecodeError> {
    let r = RegisterNodeManagerResponseProto::decode(b)?;
    let id = |k: &Option<MasterKeyProto>| k.as_ref().and_then(|k| k.key_id);
    Ok(Resp {
        response_id: None,
        keys: pack_keys(
            id(&r.container_token_master_key),
            id(&r.nm_token_master_key),
        ),
        action: r.node_action(),
    })
}

/// A `NodeHeartbeatResponseProto`, every heartbeat: read in place with the view, no allocation.
fn heartbeat_response(b: &[u8]) -> Result<Resp, hadoop_wire::reader::DecodeError> {
    let v = NodeHeartbeatResponseView::new(b);
    let id = |k: Option<MasterKeyView<'_>>| k.map(|k| k.key_id()).transpose().map(Option::flatten);
    Ok(Resp {
        response_id: v.response_id()?,
        keys: pack_keys(
            id(v.container_token_master_key()?)?,
            id(v.nm_token_master_key()?)?,
        ),
        action: v.node_action()?.unwrap_or(NodeActionProto::Normal),
    })
}

fn client_id(seed: usize) -> [u8; 16] {
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&(std::process::id() as u64).to_le_bytes());
    id[8..].copy_from_slice(&(seed as u64 ^ 0x6c6f_6164_6765_6e00).to_le_bytes());
    id
}

/// utime + stime of `pid`, in clock ticks.
fn proc_cpu_ticks(pid: u32) -> Result<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat"))?;
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = text
        .rsplit_once(')')
        .map(|(_, r)| r)
        .context("/proc/PID/stat without a command name")?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let get = |i: usize| -> Result<u64> {
        f.get(i)
            .context("short /proc/PID/stat")?
            .parse::<u64>()
            .context("/proc/PID/stat field")
    };
    Ok(get(11)? + get(12)?)
}

/// Linux reports /proc times in USER_HZ, which the kernel ABI fixes at 100 on every
/// architecture this runs on (it is what `sysconf(_SC_CLK_TCK)` returns).
fn user_hz() -> u64 {
    100
}

/// This process's user + system CPU time, µs.
fn self_cpu_us() -> u64 {
    proc_cpu_ticks(std::process::id()).unwrap_or(0) * 1_000_000 / user_hz()
}

/// (sampled sum of per-shard queue depth, high-water max over shards) from one GET /metrics.
fn scrape(target: &str) -> Result<(u64, u64)> {
    let hostport = target
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap_or(target);
    let addr = hostport
        .to_socket_addrs()?
        .next()
        .with_context(|| format!("{hostport} resolves to nothing"))?;
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        s,
        "GET /metrics HTTP/1.0\r\nHost: {hostport}\r\nConnection: close\r\n\r\n"
    )?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    let (mut depth, mut high) = (0u64, 0u64);
    for line in text.lines() {
        let value = |l: &str| {
            l.rsplit(' ')
                .next()
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0) as u64
        };
        if line.starts_with("hotpath_rm_shard_queue_depth_max") {
            high = high.max(value(line));
        } else if line.starts_with("hotpath_rm_shard_queue_depth") {
            depth += value(line);
        }
    }
    if !text.contains("hotpath_rm_shard_queue_depth") {
        bail!("no hotpath_rm_shard_queue_depth in {target}");
    }
    Ok((depth, high))
}

/// Samples the total queue depth every 100 ms during the measured window.
struct Scraper {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<Option<u64>>,
}

impl Scraper {
    fn start(target: &str) -> Scraper {
        let stop = Arc::new(AtomicBool::new(false));
        let (st, target) = (stop.clone(), target.to_string());
        let handle = std::thread::spawn(move || {
            let mut max = None::<u64>;
            while !st.load(Acquire) {
                if let Ok((d, _)) = scrape(&target) {
                    max = Some(max.map_or(d, |m| m.max(d)));
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            max
        });
        Scraper { stop, handle }
    }

    fn finish(self) -> u64 {
        self.stop.store(true, Release);
        self.handle.join().ok().flatten().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_heartbeat_and_register_responses() {
        use hadoop_wire::pb::hadoop::yarn::NodeHeartbeatResponseProto;
        let mk = |id| MasterKeyProto {
            key_id: Some(id),
            bytes: Some(vec![1, 2, 3]),
        };
        let hb = NodeHeartbeatResponseProto {
            response_id: Some(41),
            container_token_master_key: Some(mk(7)),
            nm_token_master_key: Some(mk(-3)),
            node_action: Some(NodeActionProto::Resync as i32),
            ..Default::default()
        }
        .encode_to_vec();
        assert_eq!(
            heartbeat_response(&hb).unwrap(),
            Resp {
                response_id: Some(41),
                keys: Some((7u64 << 32) | (-3i32) as u32 as u64),
                action: NodeActionProto::Resync,
            }
        );
        // Keys only when both are there; no action is NORMAL.
        let hb1 = NodeHeartbeatResponseProto {
            response_id: Some(2),
            container_token_master_key: Some(mk(7)),
            ..Default::default()
        }
        .encode_to_vec();
        assert_eq!(
            heartbeat_response(&hb1).unwrap(),
            Resp {
                response_id: Some(2),
                keys: None,
                action: NodeActionProto::Normal,
            }
        );
        let reg = RegisterNodeManagerResponseProto {
            container_token_master_key: Some(mk(5)),
            nm_token_master_key: Some(mk(6)),
            node_action: Some(NodeActionProto::Shutdown as i32),
            ..Default::default()
        }
        .encode_to_vec();
        assert_eq!(
            register_response(&reg).unwrap(),
            Resp {
                response_id: None,
                keys: Some((5u64 << 32) | 6),
                action: NodeActionProto::Shutdown,
            }
        );
        // Truncated input: an error, no panic.
        assert!(heartbeat_response(&hb[..hb.len() - 3]).is_err());
        assert!(register_response(&reg[..reg.len() - 3]).is_err());
    }
}
