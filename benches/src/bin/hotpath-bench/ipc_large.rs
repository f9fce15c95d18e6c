//! `hotpath-bench ipc-large`: large IPC responses (HADOOP-4797), three servers compared.
//!
//! C client threads (in this process) each fetch R responses of `--size` bytes over loopback
//! from a server running in a **child process** (this binary re-executed with the hidden
//! `bench-ipc-server` subcommand), one child per variant, so that the figures do not mix:
//!
//! - **ours**: `ipc::server::Server` with the benchmark `BufferProtocol`; `getBuffer(size)` is
//!   streamed into pool chunks (io_uring or epoll backend), one ring thread per CPU by default
//!   (`--threads`), each with its own pool and its own `SO_REUSEPORT` listener.
//! - **baseline**: the same protocol, served the way Hadoop's Java server does it: a thread per
//!   connection on blocking `std::net` sockets, an exactly sized response `Vec` allocated (zeroed,
//!   like a Java `byte[]`) per call, filled, and written in 8 KiB slices (`NIO_BUFFER_LIMIT`).
//! - **raw**: no protocol: the client writes an 8-byte size, the server writes that many bytes
//!   from one pre-filled buffer with `write_all`. The physical reference for loopback.
//!
//! Measured per variant: throughput (bytes / wall time of the timed phase; GB = 10^9 bytes),
//! server CPU per response (user + system from `wait4`'s rusage of the child, which includes
//! io_uring worker threads, minus the CPU the child had used when it reported ready, divided by
//! the responses served including one warm-up per client), and the server's peak RSS growth
//! (VmHWM read from `/proc/<pid>/status` just before the child is told to exit, minus VmRSS the
//! child measured before it built its server; MiB). `--size` is in bytes; the default is
//! 10 MB = 10,000,000 bytes.
//!
//! On a shared machine the raw floor itself moves by up to 5× from one phase to the next
//! (other processes and the hypervisor take the CPUs: 2.2–11.7 GB/s within one run, see
//! docs/performance.md), so ours against raw is judged **per round**: in each round ours and
//! raw run back to back (ours, raw, baseline; reversed in odd rounds), the ratio of that pair
//! is reported, and the goal is read on the median of the per-round ratios. Each phase also
//! reports the CPU that others took while it ran (`/proc/stat` busy and steal time of the
//! whole machine less the CPU of this process and its server child), so that a lucky or
//! starved phase shows as such.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use hadoop_wire::encode::{Body, RpcResponseHeader};
use hadoop_wire::frame::{RequestFrame, DEFAULT_MAX_DATA_LENGTH};
use hadoop_wire::rpc;
use hadoop_wire::view::rpc::{RequestHeaderView, RpcRequestHeaderView};
use ipc::buffer_protocol as bench;
use ipc::client::{Client, ClientConfig};
use ipc::server::{Registry, Server, ServerConfig};
use ipc::transport::{BackendChoice, PoolConfig};

/// Flags of `hotpath-bench ipc-large`.
#[derive(clap::Args, Debug, Clone)]
pub struct IpcLargeArgs {
    /// Concurrent clients (one connection and thread each).
    #[arg(long, default_value_t = 64)]
    pub clients: usize,
    /// Timed requests per client (each client also makes one warm-up request).
    #[arg(long, default_value_t = 5)]
    pub requests: usize,
    /// Rounds; each round runs every variant once (interleaved), and the median of each figure
    /// is reported. Loopback figures on a shared machine vary by tens of percent from run to
    /// run; interleaving keeps the variants comparable.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Response size in bytes (default 10 MB = 10,000,000 bytes).
    #[arg(long, default_value_t = 10_000_000)]
    pub size: u64,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Backend of our server: auto (probe io_uring, fall back to epoll), uring or epoll.
    #[arg(long, value_enum, default_value = "auto")]
    pub backend: BackendArg,
    /// Ring threads of our server (one ring per core). Default: the CPUs this process may use,
    /// since the raw and baseline servers run a thread per connection on every core too.
    /// `--threads 1` measures a single ring.
    #[arg(long)]
    pub threads: Option<usize>,
    /// Pool chunks per ring thread (default: the library default).
    #[arg(long)]
    pub pool_chunks: Option<usize>,
    /// Pool chunk size in KiB (default: the library default).
    #[arg(long)]
    pub chunk_kib: Option<usize>,
    /// Most pool chunks one connection may hold (default: the library default).
    #[arg(long)]
    pub per_conn_chunks: Option<usize>,
    /// Use SEND_ZC for large segments even on loopback (to measure it; the default policy keeps
    /// it off for loopback peers).
    #[arg(long)]
    pub send_zc: bool,
    /// Variants to run, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "ours,baseline,raw")]
    pub variants: Vec<Variant>,
}

/// Backend flag values.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendArg {
    Auto,
    Uring,
    Epoll,
}

impl BackendArg {
    pub(crate) fn choice(self) -> BackendChoice {
        match self {
            BackendArg::Auto => BackendChoice::Auto,
            BackendArg::Uring => BackendChoice::Uring,
            BackendArg::Epoll => BackendChoice::Epoll,
        }
    }
}

/// The three servers.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    Ours,
    Baseline,
    Raw,
}

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Variant::Ours => "ours",
            Variant::Baseline => "baseline",
            Variant::Raw => "raw",
        }
    }
}

/// Flags of the hidden `bench-ipc-server` subcommand (the child process).
#[derive(clap::Args, Debug, Clone)]
pub struct ServerChildArgs {
    #[arg(long, value_enum)]
    pub variant: Variant,
    #[arg(long, value_enum, default_value = "auto")]
    pub backend: BackendArg,
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    #[arg(long)]
    pub pool_chunks: Option<usize>,
    #[arg(long)]
    pub chunk_kib: Option<usize>,
    #[arg(long)]
    pub per_conn_chunks: Option<usize>,
    #[arg(long)]
    pub send_zc: bool,
    /// Largest response size served.
    #[arg(long, default_value_t = 1 << 30)]
    pub max_size: u64,
}

/// What one variant measured.
#[derive(Debug, Clone, Copy, Default)]
struct Figures {
    gbps: f64,
    cpu_ms_per_resp: f64,
    rss_growth_mib: f64,
    pool_mib: f64,
    wall: Duration,
    /// CPUs' worth of time that other processes and the hypervisor (steal) took while the
    /// variant ran (whole machine busy + steal, less this process and the server child).
    others_cpus: f64,
}

/// The machine's busy (user, nice, system, irq, softirq, steal) and total time from the `cpu`
/// line of `/proc/stat`, in µs (the file counts USER_HZ = 100 ticks per second).
fn machine_cpu_us() -> Option<(u64, u64)> {
    let s = std::fs::read_to_string("/proc/stat").ok()?;
    let line = s.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    if v.len() < 8 {
        return None;
    }
    // user nice system idle iowait irq softirq steal (guest time is inside user)
    let busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
    let total = busy + v[3] + v[4];
    Some((busy * 10_000, total * 10_000))
}

fn status_kb(pid: u32, key: &str) -> Result<u64> {
    let path = format!("/proc/{pid}/status");
    let s = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    s.lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| anyhow!("{key} missing in {path}"))
}

/// User + system CPU of this process (every thread), µs.
pub(crate) fn self_cpu_us() -> u64 {
    // SAFETY: getrusage writes into a live, zero-initialised local struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: see above.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    tv_us(ru.ru_utime) + tv_us(ru.ru_stime)
}

fn tv_us(t: libc::timeval) -> u64 {
    t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64
}

// ---------------------------------------------------------------------------------------------
// Child side

/// Runs one benchmark server (the child process): prints
/// `READY <port> <rss_kb_before> <cpu_us_at_ready> <pool_bytes> <backend>` on stdout, serves
/// until stdin closes, then exits.
pub fn run_server_child(args: ServerChildArgs) -> Result<()> {
    let rss_before = status_kb(std::process::id(), "VmRSS:")?;
    let addr: SocketAddr = "127.0.0.1:0".parse()?;
    let mut keep_alive: Option<Server> = None;
    let (port, pool_bytes, backend) = match args.variant {
        Variant::Ours => {
            let mut reg = Registry::new();
            bench::register(&mut reg, args.max_size);
            let mut cfg = ServerConfig::default();
            cfg.transport.backend = args.backend.choice();
            cfg.transport.threads = args.threads.max(1);
            let mut pool = PoolConfig::default();
            if let Some(n) = args.pool_chunks {
                pool.chunks = n;
            }
            if let Some(k) = args.chunk_kib {
                pool.chunk_size = k * 1024;
            }
            if let Some(n) = args.per_conn_chunks {
                pool.per_conn_chunks = n;
            }
            cfg.transport.pool = pool;
            if args.send_zc {
                cfg.transport.send_zc = ipc::transport::SendZc::On;
            }
            let srv = Server::start(addr, cfg, reg).context("starting our server")?;
            let r = (
                srv.local_addr().port(),
                srv.pool_bytes(),
                srv.backend().name().to_string(),
            );
            keep_alive = Some(srv);
            r
        }
        Variant::Baseline => {
            let l = TcpListener::bind(addr)?;
            let port = l.local_addr()?.port();
            let max = args.max_size;
            std::thread::spawn(move || baseline_accept(l, max));
            (port, 0, "std::net threads".to_string())
        }
        Variant::Raw => {
            let l = TcpListener::bind(addr)?;
            let port = l.local_addr()?.port();
            let max = args.max_size;
            std::thread::spawn(move || raw_accept(l, max));
            (port, 0, "std::net threads".to_string())
        }
    };
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "READY {port} {rss_before} {} {pool_bytes} {backend}",
        self_cpu_us()
    )?;
    out.flush()?;
    drop(out);
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
    if let Some(s) = keep_alive.take() {
        let m = s.metrics();
        tracing::info!(
            "ours: {} calls, pool exhausted {} times, peak {} chunks, {} sends ({} SEND_ZC, {} copied)",
            m.calls,
            m.transport.pool_exhausted,
            m.transport.pool_peak_chunks,
            m.transport.sends,
            m.transport.zc_sends,
            m.transport.zc_copied
        );
        s.shutdown();
    }
    Ok(())
}

fn raw_accept(l: TcpListener, max: u64) {
    let data: Arc<Vec<u8>> = Arc::new({
        let mut v = vec![0u8; 16 << 20];
        bench::fill_pattern(0, &mut v);
        v
    });
    for s in l.incoming().flatten() {
        let data = data.clone();
        std::thread::spawn(move || {
            let _ = raw_conn(s, &data, max);
        });
    }
}

fn raw_conn(mut s: TcpStream, data: &[u8], max: u64) -> std::io::Result<()> {
    s.set_nodelay(true)?;
    let mut req = [0u8; 8];
    loop {
        s.read_exact(&mut req)?;
        let mut left = u64::from_be_bytes(req).min(max);
        while left > 0 {
            let n = (left as usize).min(data.len());
            s.write_all(&data[..n])?;
            left -= n as u64;
        }
    }
}

fn baseline_accept(l: TcpListener, max: u64) {
    for s in l.incoming().flatten() {
        std::thread::spawn(move || {
            let _ = baseline_conn(s, max);
        });
    }
}

/// Bytes of `v` as a protobuf varint.
fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

/// Writes `v` as a protobuf varint at the front of `w` and advances it.
fn put_varint(mut v: u64, w: &mut &mut [u8]) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        let (first, rest) = std::mem::take(w)
            .split_first_mut()
            .expect("room for the varint");
        *first = if v == 0 { b } else { b | 0x80 };
        *w = rest;
        if v == 0 {
            return;
        }
    }
}

/// Java's `NIO_BUFFER_LIMIT`: responses are written in slices of at most 8 KiB.
const NIO_BUFFER_LIMIT: usize = 8 * 1024;

/// One connection of the Java-style baseline: blocking reads, an exactly sized request buffer
/// and response buffer per call, 8 KiB write slices.
fn baseline_conn(mut s: TcpStream, max: u64) -> std::io::Result<()> {
    use std::io::{Error, ErrorKind};
    s.set_nodelay(true)?;
    let mut preamble = [0u8; 7];
    s.read_exact(&mut preamble)?;
    if preamble[..4] != rpc::MAGIC || preamble[4] != rpc::IPC_VERSION {
        return Err(Error::new(ErrorKind::InvalidData, "bad preamble"));
    }
    let bad = |e: &dyn std::fmt::Display| Error::new(ErrorKind::InvalidData, e.to_string());
    loop {
        let mut len = [0u8; 4];
        s.read_exact(&mut len)?;
        let len = u32::from_be_bytes(len);
        if len > DEFAULT_MAX_DATA_LENGTH {
            return Err(Error::new(ErrorKind::InvalidData, "frame too long"));
        }
        let mut req = vec![0u8; len as usize];
        s.read_exact(&mut req)?;
        let f = RequestFrame::split(&req).map_err(|e| bad(&e))?;
        let h = RpcRequestHeaderView::new(f.rpc_header);
        let call_id = h.call_id().map_err(|e| bad(&e))?;
        if call_id < 0 {
            continue; // connection context, ping
        }
        let client_id = h.client_id().map_err(|e| bad(&e))?;
        let retry = h.retry_count().map_err(|e| bad(&e))?;
        let rh = RequestHeaderView::new(f.request_header.unwrap_or(&[]));
        let method = rh.method_name().map_err(|e| bad(&e))?;
        let payload = f.payload.unwrap_or(&[]);
        // The response message: getBuffer's data, or echo's request.
        let (size, echo) = if method == bench::GET_BUFFER {
            let size = bench::decode_request(payload).map_err(|e| bad(&e))?;
            if size > max {
                return Err(Error::new(ErrorKind::InvalidData, "size over the limit"));
            }
            (size, None)
        } else {
            (0, Some(payload))
        };
        let msg_len = match echo {
            Some(p) => p.len() as u64,
            None => 1 + varint_len(size) as u64 + size,
        };
        let header = RpcResponseHeader::success(call_id, client_id, retry);
        let hlen = header.encoded_len();
        let body_len = varint_len(hlen as u64) + hlen + varint_len(msg_len) + msg_len as usize;
        // setupResponseForProtobuf: a fresh, exactly sized, zeroed buffer per call.
        let mut resp = vec![0u8; 4 + body_len];
        {
            let mut w: &mut [u8] = &mut resp;
            w[..4].copy_from_slice(&(body_len as u32).to_be_bytes());
            w = &mut w[4..];
            put_varint(hlen as u64, &mut w);
            header.encode_body(&mut w);
            put_varint(msg_len, &mut w);
            match echo {
                Some(p) => w[..p.len()].copy_from_slice(p),
                None => {
                    w[0] = 0x0a;
                    let mut v = &mut w[1..];
                    put_varint(size, &mut v);
                    bench::fill_pattern(0, v);
                }
            }
        }
        // channelWrite: slices of at most NIO_BUFFER_LIMIT bytes.
        for slice in resp.chunks(NIO_BUFFER_LIMIT) {
            s.write_all(slice)?;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Parent side

struct ChildServer {
    pid: u32,
    child: std::process::Child,
    port: u16,
    rss_before_kb: u64,
    cpu_ready_us: u64,
    pool_bytes: u64,
    backend: String,
}

fn spawn_server(variant: Variant, args: &IpcLargeArgs) -> Result<ChildServer> {
    let exe = std::env::current_exe().context("locating the hotpath-bench binary")?;
    let mut cmd = Command::new(exe);
    cmd.arg("bench-ipc-server")
        .arg("--variant")
        .arg(variant.name())
        .arg("--backend")
        .arg(match args.backend {
            BackendArg::Auto => "auto",
            BackendArg::Uring => "uring",
            BackendArg::Epoll => "epoll",
        })
        .arg("--threads")
        .arg(ring_threads(args).to_string())
        .arg("--max-size")
        .arg(args.size.to_string());
    if let Some(n) = args.pool_chunks {
        cmd.arg("--pool-chunks").arg(n.to_string());
    }
    if let Some(k) = args.chunk_kib {
        cmd.arg("--chunk-kib").arg(k.to_string());
    }
    if let Some(n) = args.per_conn_chunks {
        cmd.arg("--per-conn-chunks").arg(n.to_string());
    }
    if args.send_zc {
        cmd.arg("--send-zc");
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("spawning the server child")?;
    let pid = child.id();
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| anyhow!("no child stdout"))?;
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line)?;
    let f: Vec<&str> = line.split_whitespace().collect();
    if f.len() < 6 || f[0] != "READY" {
        let _ = child.kill();
        bail!(
            "the {} server child did not start: {line:?}",
            variant.name()
        );
    }
    Ok(ChildServer {
        pid,
        port: f[1].parse()?,
        rss_before_kb: f[2].parse()?,
        cpu_ready_us: f[3].parse()?,
        pool_bytes: f[4].parse()?,
        backend: f[5..].join(" "),
        child,
    })
}

/// Closes the child's stdin (it exits), reaps it with wait4 and returns its CPU in µs.
fn stop_server(mut s: ChildServer) -> Result<u64> {
    drop(s.child.stdin.take());
    let mut status = 0;
    // SAFETY: zero-initialised rusage written by wait4.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child; pointers are to live locals.
    let r = unsafe { libc::wait4(s.pid as libc::pid_t, &mut status, 0, &mut ru) };
    if r < 0 {
        bail!("wait4: {}", std::io::Error::last_os_error());
    }
    Ok(tv_us(ru.ru_utime) + tv_us(ru.ru_stime))
}

/// Runs C clients × (1 warm-up + R timed) requests against one variant.
fn drive(variant: Variant, addr: SocketAddr, args: &IpcLargeArgs) -> Result<Duration> {
    let (clients, requests, size) = (args.clients, args.requests, args.size);
    let start = Arc::new(Barrier::new(clients + 1));
    let mut handles = Vec::with_capacity(clients);
    for _ in 0..clients {
        let start = start.clone();
        handles.push(std::thread::spawn(move || -> Result<()> {
            match variant {
                Variant::Raw => {
                    let mut s = TcpStream::connect(addr)?;
                    s.set_nodelay(true)?;
                    let mut buf = vec![0u8; size as usize];
                    let mut one = |check: bool| -> Result<()> {
                        s.write_all(&size.to_be_bytes())?;
                        s.read_exact(&mut buf)?;
                        if check && !bench::is_pattern(&buf) {
                            bail!("raw: wrong bytes");
                        }
                        Ok(())
                    };
                    one(true)?;
                    start.wait();
                    for _ in 0..requests {
                        one(false)?;
                    }
                }
                Variant::Ours | Variant::Baseline => {
                    let c = Client::new(
                        addr,
                        ClientConfig {
                            protocol: bench::PROTOCOL.into(),
                            protocol_version: bench::VERSION,
                            max_response_length: (size + 1024).min(i32::MAX as u64) as u32,
                            call_timeout: Duration::from_secs(120),
                            ..ClientConfig::default()
                        },
                    );
                    let mut req = Vec::new();
                    bench::encode_request(size, &mut req);
                    let one = |check: bool| -> Result<()> {
                        let r = c.call(bench::GET_BUFFER, &req)?;
                        let data = bench::response_data(r.payload())?;
                        if data.len() as u64 != size || (check && !bench::is_pattern(data)) {
                            bail!("{}: wrong response", variant.name());
                        }
                        Ok(())
                    };
                    one(true)?;
                    start.wait();
                    for _ in 0..requests {
                        one(false)?;
                    }
                }
            }
            Ok(())
        }));
    }
    start.wait();
    let t0 = Instant::now();
    let mut first_err = None;
    for h in handles {
        match h.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                first_err.get_or_insert(e);
            }
            Err(_) => {
                first_err.get_or_insert(anyhow!("a client thread panicked"));
            }
        }
    }
    let wall = t0.elapsed();
    match first_err {
        Some(e) => Err(e),
        None => Ok(wall),
    }
}

fn measure(variant: Variant, args: &IpcLargeArgs) -> Result<(Figures, String)> {
    let srv = spawn_server(variant, args)?;
    let addr: SocketAddr = format!("127.0.0.1:{}", srv.port).parse()?;
    let (m0, self0, t0) = (machine_cpu_us(), self_cpu_us(), Instant::now());
    let run = drive(variant, addr, args);
    let (m1, self1, elapsed) = (machine_cpu_us(), self_cpu_us(), t0.elapsed());
    let hwm_kb = status_kb(srv.pid, "VmHWM:").unwrap_or(0);
    let (rss_before, cpu_ready, pool, backend) = (
        srv.rss_before_kb,
        srv.cpu_ready_us,
        srv.pool_bytes,
        srv.backend.clone(),
    );
    // the child's CPU while the clients ran: all of it but its setup (its exit is after m1)
    let child_cpu_at_m1 = srv_cpu_now(srv.pid).unwrap_or(0);
    let cpu_total = stop_server(srv)?;
    let wall = run?;
    let others_cpus = match (m0, m1) {
        (Some((b0, _)), Some((b1, _))) => {
            let ours = (self1 - self0) + child_cpu_at_m1.saturating_sub(cpu_ready);
            (b1 - b0).saturating_sub(ours) as f64 / elapsed.as_micros().max(1) as f64
        }
        _ => f64::NAN,
    };
    let timed = (args.clients * args.requests) as f64;
    let served = (args.clients * (args.requests + 1)) as f64;
    let bytes = timed * args.size as f64;
    Ok((
        Figures {
            gbps: bytes / wall.as_secs_f64() / 1e9,
            cpu_ms_per_resp: cpu_total.saturating_sub(cpu_ready) as f64 / 1000.0 / served,
            rss_growth_mib: hwm_kb.saturating_sub(rss_before) as f64 / 1024.0,
            pool_mib: pool as f64 / (1024.0 * 1024.0),
            wall,
            others_cpus,
        },
        backend,
    ))
}

/// User + system CPU of a live process so far (`/proc/<pid>/stat` fields 14 and 15, every
/// thread), µs.
fn srv_cpu_now(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = s.rsplit_once(')')?.1;
    let mut f = rest.split_whitespace().skip(11);
    let ut: u64 = f.next()?.parse().ok()?;
    let st: u64 = f.next()?.parse().ok()?;
    Some((ut + st) * 10_000)
}

/// The median of each figure separately; the RSS growth is the maximum (the bound must hold
/// in every round).
fn median(figs: &[Figures]) -> Figures {
    let med = |g: fn(&Figures) -> f64| {
        let mut v: Vec<f64> = figs.iter().map(g).collect();
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    Figures {
        gbps: med(|f| f.gbps),
        cpu_ms_per_resp: med(|f| f.cpu_ms_per_resp),
        rss_growth_mib: figs.iter().map(|f| f.rss_growth_mib).fold(0.0, f64::max),
        pool_mib: med(|f| f.pool_mib),
        wall: Duration::from_secs_f64(med(|f| f.wall.as_secs_f64())),
        others_cpus: med(|f| f.others_cpus),
    }
}

/// The variants in the order round `round` runs them: ours and raw back to back (their ratio
/// is read per round), the baseline after them; reversed in odd rounds so that neither of the
/// pair always runs first.
fn round_order(selected: &[Variant], round: usize) -> Vec<Variant> {
    let mut order: Vec<Variant> = [Variant::Ours, Variant::Raw, Variant::Baseline]
        .into_iter()
        .filter(|v| selected.contains(v))
        .collect();
    if round % 2 == 1 {
        order.reverse();
    }
    order
}

fn median_of(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[v.len() / 2])
}

/// Ring threads our server runs: `--threads`, else one per CPU this process may use.
fn ring_threads(args: &IpcLargeArgs) -> usize {
    args.threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1)
}

/// `hotpath-bench ipc-large`.
pub fn run(args: IpcLargeArgs) -> Result<()> {
    if args.clients == 0 || args.size == 0 {
        bail!("--clients and --size must be positive");
    }
    if args.size > i32::MAX as u64 - 1024 {
        bail!("--size must fit a Java int frame");
    }
    let mut all: Vec<(Variant, Vec<Figures>)> =
        args.variants.iter().map(|&v| (v, Vec::new())).collect();
    let mut backend = String::from("-");
    // ours / raw of each round (both ran back to back)
    let mut pairs: Vec<f64> = Vec::new();
    for round in 0..args.rounds.max(1) {
        let mut this_round: Vec<(Variant, Figures)> = Vec::new();
        for v in round_order(&args.variants, round) {
            if !args.json {
                eprintln!("round {}: running {} ...", round + 1, v.name());
            }
            let (f, b) = measure(v, &args).with_context(|| format!("variant {}", v.name()))?;
            if !args.json {
                eprintln!(
                    "  {}: {:.2} GB/s, {:.3} ms CPU/response, {:.1} MiB RSS growth, others took {:.2} CPUs",
                    v.name(),
                    f.gbps,
                    f.cpu_ms_per_resp,
                    f.rss_growth_mib,
                    f.others_cpus
                );
            }
            if v == Variant::Ours {
                backend = b;
            }
            if let Some((_, figs)) = all.iter_mut().find(|(x, _)| *x == v) {
                figs.push(f);
            }
            this_round.push((v, f));
        }
        let get = |w: Variant| this_round.iter().find(|(v, _)| *v == w).map(|(_, f)| *f);
        if let (Some(o), Some(r)) = (get(Variant::Ours), get(Variant::Raw)) {
            let q = o.gbps / r.gbps;
            if !args.json {
                eprintln!("  round {}: ours / raw = {q:.2}", round + 1);
            }
            pairs.push(q);
        }
    }
    let pair_median = median_of(pairs.clone());
    let pick = |want: Variant| {
        all.iter()
            .find(|(v, f)| *v == want && !f.is_empty())
            .map(|(_, f)| median(f))
    };
    let (ours, baseline, raw) = (
        pick(Variant::Ours),
        pick(Variant::Baseline),
        pick(Variant::Raw),
    );
    let num = |f: Option<Figures>, g: fn(&Figures) -> f64| f.map(|f| g(&f));
    if args.json {
        let v = serde_json::json!({
            "ours_gbps": num(ours, |f| f.gbps),
            "baseline_gbps": num(baseline, |f| f.gbps),
            "raw_gbps": num(raw, |f| f.gbps),
            "ours_cpu_ms_per_resp": num(ours, |f| f.cpu_ms_per_resp),
            "baseline_cpu_ms_per_resp": num(baseline, |f| f.cpu_ms_per_resp),
            "ours_rss_growth_mb": num(ours, |f| f.rss_growth_mib),
            "pool_mb": num(ours, |f| f.pool_mib),
            "backend": backend,
            "threads": ring_threads(&args),
            "baseline_rss_growth_mb": num(baseline, |f| f.rss_growth_mib),
            "raw_cpu_ms_per_resp": num(raw, |f| f.cpu_ms_per_resp),
            "ours_over_raw_per_round": pairs,
            "ours_over_raw_median": pair_median,
            "others_cpus_ours": num(ours, |f| f.others_cpus),
            "others_cpus_raw": num(raw, |f| f.others_cpus),
            "clients": args.clients,
            "requests": args.requests,
            "rounds": args.rounds.max(1),
            "size": args.size,
        });
        println!("{v}");
        return Ok(());
    }
    println!(
        "ipc-large: {} clients x {} requests x {} bytes over loopback, median of {} rounds; our backend: {backend}, {} ring thread(s)",
        args.clients,
        args.requests,
        args.size,
        args.rounds.max(1),
        ring_threads(&args)
    );
    println!(
        "{:<9} {:>8} {:>20} {:>28} {:>8} {:>12}",
        "variant",
        "GB/s",
        "server CPU ms/resp",
        "server peak RSS growth MiB",
        "wall s",
        "others CPUs"
    );
    for (v, figs) in &all {
        let f = median(figs);
        let (lo, hi) = figs.iter().fold((f64::INFINITY, 0.0f64), |(l, h), x| {
            (l.min(x.gbps), h.max(x.gbps))
        });
        println!(
            "{:<9} {:>8.2} {:>20.3} {:>28.1} {:>8.2} {:>12.2}   (GB/s {lo:.2}–{hi:.2} over the rounds)",
            v.name(),
            f.gbps,
            f.cpu_ms_per_resp,
            f.rss_growth_mib,
            f.wall.as_secs_f64(),
            f.others_cpus
        );
    }
    if let Some(o) = ours {
        println!(
            "ours: peak RSS growth {:.1} MiB with a pool of {:.1} MiB (the rest: receive buffer ring, thread stack, code pages)",
            o.rss_growth_mib, o.pool_mib
        );
        if let Some(q) = pair_median {
            let list: Vec<String> = pairs.iter().map(|q| format!("{q:.2}")).collect();
            println!(
                "goal ours >= 80% of raw throughput (median of the per-round pairs {}): {:.0}% ({})",
                list.join(", "),
                q * 100.0,
                if q >= 0.8 { "met" } else { "NOT met" }
            );
        }
        if let Some(b) = baseline {
            let q = o.cpu_ms_per_resp / b.cpu_ms_per_resp;
            println!(
                "goal ours CPU/response <= 1/3 of baseline: {:.2} ({})",
                q,
                if q <= 1.0 / 3.0 { "met" } else { "NOT met" }
            );
        }
    }
    Ok(())
}
