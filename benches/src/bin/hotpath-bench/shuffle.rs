//! `hotpath-bench shuffle`: the same map outputs served by three servers, each in a process of
//! its own, fetched by the same client with the 3.5.0 Fetcher's request pattern (a connection
//! per request, `GET /mapOutput?job=…&reduce=…&map=<≤20 attempts>`, `UrlHash`, `name`,
//! `version`, the JDK's headers; the answer read to its `content-length`):
//!
//! - **ours**: our `mapreduce_shuffle` service (`nm_runtime::shuffle::ShuffleServer`, the code
//!   the agent runs) in a child process of this binary (`hotpath-bench shuffle-server ours`);
//! - **raw**: the floor, a raw `sendfile` server in a child process (`shuffle-server raw`): an
//!   in-memory table of segments, one blocking thread per client thread, header `write` +
//!   `sendfile`, no checks;
//! - **java**: Hadoop 3.5.0's own `org.apache.hadoop.mapred.ShuffleHandler`, hosted standalone
//!   by the MapReduce peer (`peers/hadoop-mr`, mode `mr-shuffle`: `init`, `start`,
//!   `initializeApplication` with the job token, local dirs looked up as the NM does), with its
//!   defaults (`2 × cores` Netty workers, `transferTo`, no native libhadoop so no fadvise).
//!
//! ```text
//! target/release/hotpath-bench shuffle [--runs 3] [--large-mib 64] [--large-maps 4] \
//!     [--small-maps 2000] [--small-kib 8] [--fetchers 4] [--seconds 3] [--no-java] \
//!     [--idle-rss] [--json]
//! ```
//!
//! - **large**: `--large-maps` map outputs, each with one `--large-mib` partition for reduce 0;
//!   each request fetches one map (GB/s, server CPU seconds per GB);
//! - **small**: `--small-maps` map outputs of `--small-kib` for reduce 0, fetched 20 maps per
//!   request as the Fetcher batches them (map outputs fetched per second — a "fetch" below is
//!   one map output — and server CPU µs per map output).
//!
//! `--fetchers` client threads fetch back to back for `--seconds` per server and case; within
//! each run the servers take turns on each case, run r starting with the r-th of (ours, raw,
//! java). Server CPU is the whole
//! server process's user + system time from `/proc/<pid>/stat` (the JVM's JIT and GC threads
//! included: they are what serving costs on a Java NodeManager), RSS its `VmRSS` after the run.
//! Every server gets a warm-up of both cases first (`--warmup`, 15 s of small fetches: Java's
//! CPU per fetch falls threefold over its first ten seconds as the JIT compiles). The files stay in the page
//! cache (`mapreduce.shuffle.manage.os.cache=false` for ours, as Java's is without libhadoop).
//! Medians over `--runs`, the spread as [min, max], and the median of the per-run ratios.
//!
//! `--flood N`: then N idle connections (half of them with half a request) held against ours and
//! Java's while the small case runs again: fetches/s and RSS under the flood.
//!
//! `--idle-rss`: also the agent's idle RSS with the aux service on and off (`hotpath agent`
//! beside this binary, registered with a `hotpath rm`; `ours_agent_idle_rss_delta_kib`).

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use peer_harness::{Mode, Peer};
use serde_json::{json, Value};

/// Flags of `hotpath-bench shuffle`.
#[derive(clap::Args, Debug, Clone)]
pub struct ShuffleArgs {
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Size of each large partition (MiB).
    #[arg(long, default_value_t = 64)]
    pub large_mib: u64,
    /// Map outputs of the large case.
    #[arg(long, default_value_t = 4)]
    pub large_maps: usize,
    /// Map outputs of the small case.
    #[arg(long, default_value_t = 2000)]
    pub small_maps: usize,
    /// Size of each small partition (KiB).
    #[arg(long, default_value_t = 8)]
    pub small_kib: u64,
    /// Client threads.
    #[arg(long, default_value_t = 4)]
    pub fetchers: usize,
    /// Our service's event loops (`mapreduce.shuffle.max.threads`; 0 = its default, 2 × cores
    /// as Java's).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Seconds per server, case and run.
    #[arg(long, default_value_t = 3.0)]
    pub seconds: f64,
    /// Warm-up per server before the runs: seconds of the small case (the large case gets a
    /// fifth of it), long enough for the JVM's JIT to settle.
    #[arg(long, default_value_t = 15.0)]
    pub warmup: f64,
    /// Leave Hadoop's ShuffleHandler out (no JVM); its keys are then `null`.
    #[arg(long)]
    pub no_java: bool,
    /// Also measure the agent's idle RSS with the aux service on and off (needs `hotpath`).
    #[arg(long)]
    pub idle_rss: bool,
    /// After the runs: this many idle connections (every other one with half a request
    /// sent) held open against ours and Java's while the small case is fetched again
    /// (`*_flood_small_fetches_per_s`, `*_flood_rss_kib`). 0: no flood.
    #[arg(long, default_value_t = 0)]
    pub flood: usize,
    /// The `hotpath` binary for `--idle-rss` (default: beside this one).
    #[arg(long)]
    pub hotpath: Option<PathBuf>,
    #[arg(long)]
    pub json: bool,
}

/// Flags of the internal `hotpath-bench shuffle-server` (one server of `shuffle`, run as a child
/// process): prints `PORT <n>` and serves until its stdin closes.
#[derive(clap::Args, Debug, Clone)]
pub struct ServerArgs {
    /// `ours` or `raw`.
    pub kind: String,
    #[arg(long)]
    pub local: PathBuf,
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    #[arg(long)]
    pub large_maps: usize,
    #[arg(long)]
    pub large_mib: u64,
    #[arg(long)]
    pub small_maps: usize,
    #[arg(long)]
    pub small_kib: u64,
}

const TS: i64 = 1_700_000_000_000;
const USER: &str = "bench";
const SECRET: [u8; 8] = [1, 2, 3, 4, 5, 6, 7, 8];

fn job(app: i32) -> String {
    format!("job_{TS}_{app:04}")
}
fn attempt(app: i32, task: usize) -> String {
    format!("attempt_{TS}_{app:04}_m_{task:06}_0")
}
fn app_id(app: i32) -> nm_core::ids::AppId {
    nm_core::ids::AppId::new(TS, app)
}

/// `service_data["mapreduce_shuffle"]` of application `app`: the job token Writable whose
/// password is the shuffle secret.
fn service_data(app: i32) -> Vec<u8> {
    let mut id = Vec::new();
    hadoop_wire::token::writable::write_text(&mut id, &job(app));
    hadoop_wire::token::Token::new(id, SECRET.to_vec(), "mapreduce.job", job(app)).to_writable()
}

fn output_dir(local: &Path, app: i32, map: &str) -> PathBuf {
    local
        .join("usercache")
        .join(USER)
        .join("appcache")
        .join(app_id(app).to_string())
        .join("output")
        .join(map)
}

/// One segment as the raw server sends it.
#[derive(Clone)]
struct Segment {
    path: PathBuf,
    header: Vec<u8>,
    len: u64,
}

fn shuffle_header(map: &str, part: u64) -> Vec<u8> {
    let mut header = Vec::new();
    hadoop_wire::token::writable::write_vint(&mut header, map.len() as i32);
    header.extend_from_slice(map.as_bytes());
    hadoop_wire::token::writable::write_vlong(&mut header, part as i64);
    hadoop_wire::token::writable::write_vlong(&mut header, part as i64 - 4);
    hadoop_wire::token::writable::write_vint(&mut header, 0);
    header
}

/// Writes `maps` map outputs of one `part`-byte partition (reduce 0) for application `app`
/// under `local` (an IFile-like segment: bytes, then the CRC32 trailer).
fn write_outputs(local: &Path, app: i32, maps: usize, part: u64) -> Result<()> {
    let chunk: Vec<u8> = (0..1 << 20)
        .map(|i: u32| (i * 31 + i / 977) as u8)
        .collect();
    for m in 0..maps {
        let id = attempt(app, m);
        let d = output_dir(local, app, &id);
        std::fs::create_dir_all(&d)?;
        let mut f = std::io::BufWriter::new(File::create(d.join("file.out"))?);
        let mut crc = crc32fast::Hasher::new();
        let mut left = part - 4;
        while left > 0 {
            let n = left.min(chunk.len() as u64) as usize;
            f.write_all(&chunk[..n])?;
            crc.update(&chunk[..n]);
            left -= n as u64;
        }
        f.write_all(&crc.finalize().to_be_bytes())?;
        f.flush()?;
        let mut idx = Vec::new();
        for v in [0i64, part as i64 - 4, part as i64] {
            idx.extend_from_slice(&v.to_be_bytes());
        }
        let crc = u64::from(crc32fast::hash(&idx));
        idx.extend_from_slice(&crc.to_be_bytes());
        std::fs::write(d.join("file.out.index"), idx)?;
    }
    Ok(())
}

/// The raw server's table of the outputs [`write_outputs`] wrote.
fn raw_table(args: &ServerArgs) -> HashMap<String, Segment> {
    let mut table = HashMap::new();
    for (app, maps, part) in [
        (1, args.large_maps, args.large_mib << 20),
        (2, args.small_maps, args.small_kib << 10),
    ] {
        for m in 0..maps {
            let id = attempt(app, m);
            table.insert(
                id.clone(),
                Segment {
                    path: output_dir(&args.local, app, &id).join("file.out"),
                    header: shuffle_header(&id, part),
                    len: part,
                },
            );
        }
    }
    table
}

/// `hotpath-bench shuffle-server`: one server as a child process (see [`ServerArgs`]).
pub fn run_server(args: ServerArgs) -> Result<()> {
    let mut stdout = std::io::stdout();
    match args.kind.as_str() {
        "ours" => {
            let jobs = nm_runtime::shuffle::Jobs::new(None);
            let server = nm_runtime::shuffle::ShuffleServer::start(
                nm_runtime::shuffle::ShuffleConfig {
                    port: 0,
                    manage_os_cache: false,
                    threads: args.threads,
                    ..Default::default()
                },
                vec![args.local.clone()],
                jobs.clone(),
                Arc::default(),
            )
            .map_err(|e| anyhow!("{e}"))?;
            for app in [1, 2] {
                jobs.register(USER, app_id(app), &service_data(app))
                    .map_err(|e| anyhow!("{e}"))?;
            }
            writeln!(stdout, "PORT {}", server.port())?;
            stdout.flush()?;
            wait_stdin_eof();
            server.shutdown();
        }
        "raw" => {
            let port = raw_server(Arc::new(raw_table(&args)), args.threads.max(1))?;
            writeln!(stdout, "PORT {port}")?;
            stdout.flush()?;
            wait_stdin_eof();
        }
        k => bail!("shuffle-server {k}: expected ours or raw"),
    }
    Ok(())
}

fn wait_stdin_eof() {
    let mut sink = [0u8; 64];
    let mut stdin = std::io::stdin();
    while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
}

/// The raw floor: `threads` blocking threads, each accepting and serving one connection at a
/// time; header `write`, segment `sendfile`.
fn raw_server(table: Arc<HashMap<String, Segment>>, threads: usize) -> Result<u16> {
    let l = TcpListener::bind("127.0.0.1:0")?;
    let port = l.local_addr()?.port();
    for n in 0..threads {
        let (l, t) = (l.try_clone()?, table.clone());
        std::thread::Builder::new()
            .name(format!("raw-shuffle-{n}"))
            .spawn(move || {
                while let Ok((s, _)) = l.accept() {
                    raw_serve(s, &t);
                }
            })?;
    }
    Ok(port)
}

fn raw_serve(mut s: TcpStream, table: &HashMap<String, Segment>) -> Option<()> {
    let _ = s.set_nodelay(true);
    let mut buf = Vec::with_capacity(2048);
    let mut tmp = [0u8; 4096];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = s.read(&mut tmp).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&tmp[..n]);
    }
    let text = std::str::from_utf8(&buf).ok()?;
    let target = text.split(' ').nth(1)?;
    let maps = target.split("map=").nth(1)?.split('&').next()?;
    let segs: Vec<&Segment> = maps.split(',').filter_map(|m| table.get(m)).collect();
    let len: u64 = segs.iter().map(|g| g.header.len() as u64 + g.len).sum();
    let head = format!(
        "HTTP/1.1 200 OK\r\nReplyHash: x\r\nname: mapreduce\r\nversion: 1.0.0\r\nConnection: close\r\ncontent-length: {len}\r\n\r\n"
    );
    s.write_all(head.as_bytes()).ok()?;
    for g in segs {
        s.write_all(&g.header).ok()?;
        let f = File::open(&g.path).ok()?;
        let mut off = 0u64;
        while off < g.len {
            let want = (g.len - off) as usize;
            let n = rustix::fs::sendfile(&s, &f, Some(&mut off), want).ok()?;
            if n == 0 {
                return None;
            }
        }
    }
    Some(())
}

fn url_hash(port: u16, target: &str) -> String {
    let mut m = <Hmac<sha1::Sha1> as KeyInit>::new_from_slice(&SECRET).expect("any key");
    m.update(format!("{port}{target}").as_bytes());
    STANDARD.encode(m.finalize().into_bytes())
}

/// One Fetcher request: connect, GET, read the answer to its length, close. Returns the body's
/// length.
fn fetch(addr: SocketAddr, req: &[u8], buf: &mut [u8]) -> Result<u64> {
    let mut s = TcpStream::connect(addr)?;
    s.write_all(req)?;
    // The head (read buffered, as the JDK does); what follows it is body.
    let mut have = 0;
    let head_end = loop {
        if have == buf.len() {
            bail!("a head larger than {} bytes", buf.len());
        }
        let n = s.read(&mut buf[have..])?;
        if n == 0 {
            bail!("EOF in the head");
        }
        have += n;
        if let Some(p) = buf[..have].windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
    };
    let text = String::from_utf8_lossy(&buf[..head_end]);
    if !text.starts_with("HTTP/1.1 200") {
        bail!("answer: {}", text.lines().next().unwrap_or(""));
    }
    let len: u64 = text
        .lines()
        .find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .ok_or_else(|| anyhow!("no content-length"))?;
    let mut left = len
        .checked_sub((have - head_end) as u64)
        .ok_or_else(|| anyhow!("more than content-length"))?;
    while left > 0 {
        let take = left.min(buf.len() as u64) as usize;
        let n = s.read(&mut buf[..take])?;
        if n == 0 {
            bail!("short body");
        }
        left -= n as u64;
    }
    Ok(len)
}

/// The requests of a case: maps in groups of `per_request`.
fn requests(port: u16, app: i32, maps: usize, per_request: usize) -> Vec<Vec<u8>> {
    (0..maps)
        .collect::<Vec<_>>()
        .chunks(per_request)
        .map(|c| {
            let ids: Vec<String> = c.iter().map(|&m| attempt(app, m)).collect();
            let target = format!("/mapOutput?job={}&reduce=0&map={}", job(app), ids.join(","));
            format!(
                "GET {target} HTTP/1.1\r\nUrlHash: {}\r\nname: mapreduce\r\nversion: 1.0.0\r\n\
                 User-Agent: Java/17.0.15\r\nHost: 127.0.0.1:{port}\r\nAccept: */*\r\n\
                 Connection: keep-alive\r\n\r\n",
                url_hash(port, &target)
            )
            .into_bytes()
        })
        .collect()
}

/// User + system seconds of process `pid` (`/proc/<pid>/stat`).
fn cpu_s(pid: u32) -> f64 {
    crate::rm_apps::proc_cpu_ms(pid).unwrap_or(f64::NAN) / 1000.0
}

/// A `/proc/<pid>/status` field in KiB (`VmRSS`, `VmHWM`).
fn status_kib(pid: u32, key: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// A case's requests for one server and how many maps each carries.
struct Case {
    reqs: Arc<Vec<Vec<u8>>>,
    maps: Arc<Vec<u64>>,
}

fn case(port: u16, app: i32, maps: usize, per_request: usize) -> Case {
    let reqs = requests(port, app, maps, per_request);
    let counts = (0..reqs.len())
        .map(|i| (maps - i * per_request).min(per_request) as u64)
        .collect();
    Case {
        reqs: Arc::new(reqs),
        maps: Arc::new(counts),
    }
}

/// A server under test: where to fetch, and the process whose CPU and RSS count.
struct Server {
    name: &'static str,
    addr: SocketAddr,
    pid: u32,
    large: Case,
    small: Case,
    /// Keeps the child (its stdin: EOF stops it) or the peer JVM alive.
    _child: Option<ServerChild>,
    _peer: Option<Peer>,
}

struct ServerChild(Child);

impl Drop for ServerChild {
    fn drop(&mut self) {
        drop(self.0.stdin.take());
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn_server(kind: &'static str, local: &Path, args: &ShuffleArgs) -> Result<Server> {
    let threads = match kind {
        "raw" => args.fetchers,
        _ => args.threads,
    };
    let mut child = Command::new(std::env::current_exe()?)
        .arg("shuffle-server")
        .arg(kind)
        .arg("--local")
        .arg(local)
        .args(["--threads", &threads.to_string()])
        .args(["--large-maps", &args.large_maps.to_string()])
        .args(["--large-mib", &args.large_mib.to_string()])
        .args(["--small-maps", &args.small_maps.to_string()])
        .args(["--small-kib", &args.small_kib.to_string()])
        .env("HOTPATH_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting shuffle-server {kind}"))?;
    let mut line = String::new();
    BufReader::new(child.stdout.take().context("stdout")?).read_line(&mut line)?;
    let port: u16 = line
        .trim()
        .strip_prefix("PORT ")
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| anyhow!("shuffle-server {kind}: {line:?}"))?;
    let pid = child.id();
    Ok(Server {
        name: kind,
        addr: SocketAddr::from(([127, 0, 0, 1], port)),
        pid,
        large: case(port, 1, args.large_maps, 1),
        small: case(port, 2, args.small_maps, 20),
        _child: Some(ServerChild(child)),
        _peer: None,
    })
}

fn start_java(local: &Path, args: &ShuffleArgs) -> Result<Server> {
    let mut p = Peer::start(
        Mode::MrShuffle,
        &[
            "--local-dirs",
            &local.display().to_string(),
            "--log-level",
            "WARN",
        ],
    )
    .map_err(|e| anyhow!("mr-shuffle peer: {e}"))?;
    let port = p.ready()["port"]
        .as_u64()
        .and_then(|p| u16::try_from(p).ok())
        .ok_or_else(|| anyhow!("no port in the peer's READY {}", p.ready()))?;
    for app in [1, 2] {
        let hex: String = service_data(app)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        p.command(&format!("init-app {USER} {} {hex}", app_id(app)))
            .map_err(|e| anyhow!("init-app: {e}"))?;
    }
    Ok(Server {
        name: "java",
        addr: SocketAddr::from(([127, 0, 0, 1], port)),
        pid: p.pid(),
        large: case(port, 1, args.large_maps, 1),
        small: case(port, 2, args.small_maps, 20),
        _child: None,
        _peer: Some(p),
    })
}

/// What one server did in one case of one run.
struct Measured {
    bytes: u64,
    maps: u64,
    cpu_s: f64,
    wall_s: f64,
}

/// `fetchers` threads cycling through the case's requests for `seconds`.
fn drive(srv: &Server, c: &Case, fetchers: usize, seconds: f64) -> Result<Measured> {
    let bytes = Arc::new(AtomicU64::new(0));
    let maps = Arc::new(AtomicU64::new(0));
    let cpu0 = cpu_s(srv.pid);
    let t0 = Instant::now();
    let until = t0 + Duration::from_secs_f64(seconds);
    let mut hs = Vec::new();
    for f in 0..fetchers {
        let (reqs, mpr, bytes, maps) =
            (c.reqs.clone(), c.maps.clone(), bytes.clone(), maps.clone());
        let addr = srv.addr;
        hs.push(std::thread::spawn(move || -> Result<()> {
            let mut buf = vec![0u8; 1 << 20];
            let mut i = f;
            while Instant::now() < until {
                let k = i % reqs.len();
                bytes.fetch_add(fetch(addr, &reqs[k], &mut buf)?, Relaxed);
                maps.fetch_add(mpr[k], Relaxed);
                i += fetchers;
            }
            Ok(())
        }));
    }
    for h in hs {
        h.join()
            .map_err(|_| anyhow!("a fetcher panicked"))?
            .with_context(|| format!("fetching from {}", srv.name))?;
    }
    let wall_s = t0.elapsed().as_secs_f64();
    Ok(Measured {
        bytes: bytes.load(Relaxed),
        maps: maps.load(Relaxed),
        cpu_s: cpu_s(srv.pid) - cpu0,
        wall_s,
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.retain(|x| !x.is_nan());
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn num(v: f64) -> Value {
    if v.is_finite() {
        json!(v)
    } else {
        Value::Null
    }
}

/// Runs the bench (see the module docs).
pub fn run(args: ShuffleArgs) -> Result<()> {
    let dir = tempfile::tempdir().context("a temp dir for the map outputs")?;
    let local = dir.path().join("local");
    write_outputs(&local, 1, args.large_maps, args.large_mib << 20)?;
    write_outputs(&local, 2, args.small_maps, args.small_kib << 10)?;
    let mut servers = vec![
        spawn_server("ours", &local, &args)?,
        spawn_server("raw", &local, &args)?,
    ];
    if !args.no_java {
        servers.push(start_java(&local, &args)?);
    }
    // Warm the page cache, the servers and the JVM's JIT.
    for s in &servers {
        drive(s, &s.large, args.fetchers, args.warmup / 5.0)?;
        drive(s, &s.small, args.fetchers, args.warmup)?;
    }
    let gb = |b: u64| b as f64 / 1e9;
    let mut rows = Vec::new();
    for run in 0..args.runs.max(1) {
        let mut row = serde_json::Map::new();
        row.insert("run".into(), json!(run));
        // Each run starts with another server: none always follows the JVM's leftover work.
        let order: Vec<&Server> = (0..servers.len())
            .map(|i| &servers[(i + run) % servers.len()])
            .collect();
        for s in &order {
            let l = drive(s, &s.large, args.fetchers, args.seconds)?;
            let n = s.name;
            row.insert(format!("{n}_gbps"), json!(gb(l.bytes) / l.wall_s));
            row.insert(format!("{n}_cpu_s_per_gb"), json!(l.cpu_s / gb(l.bytes)));
        }
        for s in &order {
            let m = drive(s, &s.small, args.fetchers, args.seconds)?;
            let n = s.name;
            row.insert(
                format!("{n}_small_fetches_per_s"),
                json!(m.maps as f64 / m.wall_s),
            );
            row.insert(
                format!("{n}_cpu_us_per_small_fetch"),
                json!(m.cpu_s * 1e6 / m.maps.max(1) as f64),
            );
            row.insert(
                format!("{n}_rss_kib"),
                json!(status_kib(s.pid, "VmRSS").unwrap_or(0)),
            );
        }
        let row = Value::Object(row);
        if !args.json {
            eprintln!("run {run}: {row}");
        }
        rows.push(row);
    }
    let mut flood = serde_json::Map::new();
    if args.flood > 0 {
        for s in servers.iter().filter(|s| s.name != "raw") {
            let mut held = Vec::with_capacity(args.flood);
            for i in 0..args.flood {
                let Ok(mut c) = TcpStream::connect(s.addr) else {
                    break;
                };
                if i % 2 == 0 {
                    let _ = c.write_all(b"GET /mapOutput?job=job_1_0001&reduce=0&map=attempt_1");
                }
                held.push(c);
            }
            let m = drive(s, &s.small, args.fetchers, args.seconds)?;
            let n = s.name;
            flood.insert(format!("{n}_flood_connections"), json!(held.len()));
            flood.insert(
                format!("{n}_flood_small_fetches_per_s"),
                json!(m.maps as f64 / m.wall_s),
            );
            flood.insert(
                format!("{n}_flood_rss_kib"),
                json!(status_kib(s.pid, "VmRSS").unwrap_or(0)),
            );
            drop(held);
        }
    }
    drop(servers);
    let get = |r: &Value, k: &str| r[k].as_f64().unwrap_or(f64::NAN);
    let col = |k: &str| median(rows.iter().map(|r| get(r, k)).collect());
    let spread = |k: &str| {
        let v: Vec<f64> = rows
            .iter()
            .map(|r| get(r, k))
            .filter(|x| !x.is_nan())
            .collect();
        match (
            v.iter().copied().reduce(f64::min),
            v.iter().copied().reduce(f64::max),
        ) {
            (Some(a), Some(b)) => json!([a, b]),
            _ => Value::Null,
        }
    };
    let ratio = |a: &str, b: &str| median(rows.iter().map(|r| get(r, a) / get(r, b)).collect());
    let keys = [
        "ours_gbps",
        "raw_gbps",
        "java_gbps",
        "ours_cpu_s_per_gb",
        "raw_cpu_s_per_gb",
        "java_cpu_s_per_gb",
        "ours_small_fetches_per_s",
        "raw_small_fetches_per_s",
        "java_small_fetches_per_s",
        "ours_cpu_us_per_small_fetch",
        "raw_cpu_us_per_small_fetch",
        "java_cpu_us_per_small_fetch",
        "ours_rss_kib",
        "raw_rss_kib",
        "java_rss_kib",
    ];
    let mut out = serde_json::Map::new();
    for k in keys {
        out.insert(k.into(), num(col(k)));
    }
    let ratios = [
        ("ours_over_raw_gbps", "ours_gbps", "raw_gbps"),
        ("ours_over_java_gbps", "ours_gbps", "java_gbps"),
        (
            "ours_over_java_cpu_per_gb",
            "ours_cpu_s_per_gb",
            "java_cpu_s_per_gb",
        ),
        (
            "ours_over_raw_small_fetches_per_s",
            "ours_small_fetches_per_s",
            "raw_small_fetches_per_s",
        ),
        (
            "ours_over_java_small_fetches_per_s",
            "ours_small_fetches_per_s",
            "java_small_fetches_per_s",
        ),
        (
            "ours_over_java_cpu_per_small_fetch",
            "ours_cpu_us_per_small_fetch",
            "java_cpu_us_per_small_fetch",
        ),
    ];
    for (name, a, b) in ratios {
        out.insert(name.into(), num(ratio(a, b)));
    }
    let mut spreads = serde_json::Map::new();
    for k in keys {
        spreads.insert(k.into(), spread(k));
    }
    out.insert("spread".into(), Value::Object(spreads));
    if args.flood > 0 {
        out.insert("flood".into(), Value::Object(flood));
    }
    if args.idle_rss {
        let (on, off) = agent_idle_rss(&args)?;
        out.insert("ours_agent_idle_rss_kib_on".into(), json!(on));
        out.insert("ours_agent_idle_rss_kib_off".into(), json!(off));
        out.insert(
            "ours_agent_idle_rss_delta_kib".into(),
            num(median(on.iter().zip(&off).map(|(a, b)| *a - *b).collect())),
        );
    }
    out.insert(
        "setup".into(),
        json!({
            "runs": args.runs, "fetchers": args.fetchers, "seconds": args.seconds,
            "large_maps": args.large_maps, "large_mib": args.large_mib,
            "small_maps": args.small_maps, "small_kib": args.small_kib,
        }),
    );
    out.insert("runs".into(), Value::Array(rows));
    let out = Value::Object(out);
    if args.json {
        println!("{out}");
        return Ok(());
    }
    let f = |k: &str| out[k].as_f64().unwrap_or(f64::NAN);
    println!(
        "shuffle, {} run(s), medians ({} fetchers, {} s each; spreads in the JSON):\n  \
         large ({} MiB partitions): ours {:.2} GB/s ({:.3} CPU s/GB), raw sendfile {:.2} GB/s \
         ({:.3}), Java {:.2} GB/s ({:.3}); ours/raw {:.2}, ours/Java CPU per GB {:.2}\n  \
         small ({} maps x {} KiB, 20 per request): ours {:.0} map outputs/s ({:.1} CPU us each), \
         raw {:.0}/s ({:.1}), Java {:.0}/s ({:.1}); ours/Java {:.2}x, ours/Java CPU {:.2}\n  \
         RSS after the runs: ours {:.0} KiB, raw {:.0} KiB, Java {:.0} KiB",
        args.runs,
        args.fetchers,
        args.seconds,
        args.large_mib,
        f("ours_gbps"),
        f("ours_cpu_s_per_gb"),
        f("raw_gbps"),
        f("raw_cpu_s_per_gb"),
        f("java_gbps"),
        f("java_cpu_s_per_gb"),
        f("ours_over_raw_gbps"),
        f("ours_over_java_cpu_per_gb"),
        args.small_maps,
        args.small_kib,
        f("ours_small_fetches_per_s"),
        f("ours_cpu_us_per_small_fetch"),
        f("raw_small_fetches_per_s"),
        f("raw_cpu_us_per_small_fetch"),
        f("java_small_fetches_per_s"),
        f("java_cpu_us_per_small_fetch"),
        f("ours_over_java_small_fetches_per_s"),
        f("ours_over_java_cpu_per_small_fetch"),
        f("ours_rss_kib"),
        f("raw_rss_kib"),
        f("java_rss_kib"),
    );
    if args.flood > 0 {
        println!(
            "  under a flood of {} idle connections: {}",
            args.flood, out["flood"]
        );
    }
    if args.idle_rss {
        println!(
            "  agent idle RSS: aux service on {} KiB, off {} KiB (per run); median delta {:.0} KiB",
            out["ours_agent_idle_rss_kib_on"],
            out["ours_agent_idle_rss_kib_off"],
            f("ours_agent_idle_rss_delta_kib"),
        );
    }
    Ok(())
}

/// A child that printed `READY {json}`; SIGTERM then SIGKILL on drop.
struct Ready {
    child: Child,
    ready: Value,
    _dir: tempfile::TempDir,
}

impl Ready {
    fn spawn(mut cmd: Command, dir: tempfile::TempDir, what: &str) -> Result<Ready> {
        let mut child = cmd
            .env("HOTPATH_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {what}"))?;
        let mut line = String::new();
        BufReader::new(child.stdout.take().context("stdout")?).read_line(&mut line)?;
        let Some(j) = line.trim().strip_prefix("READY ") else {
            let _ = child.kill();
            let _ = child.wait();
            bail!("{what} did not start: {line:?}");
        };
        let ready = serde_json::from_str(j)?;
        Ok(Ready {
            child,
            ready,
            _dir: dir,
        })
    }
}

impl Drop for Ready {
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The agent's `VmRSS` (KiB) once registered and idle, with `mapreduce_shuffle` on and off,
/// alternating, `--runs` times each: (on, off).
fn agent_idle_rss(args: &ShuffleArgs) -> Result<(Vec<f64>, Vec<f64>)> {
    let hotpath = match &args.hotpath {
        Some(p) => p.clone(),
        None => std::env::current_exe()?
            .parent()
            .map(|d| d.join("hotpath"))
            .ok_or_else(|| anyhow!("no directory for the hotpath binary"))?,
    };
    if !hotpath.is_file() {
        bail!(
            "{} is missing: build it (cargo build --release -p agent) or pass --hotpath",
            hotpath.display()
        );
    }
    let rm_dir = tempfile::tempdir()?;
    let mut cmd = Command::new(&hotpath);
    cmd.args(["rm", "--ready-line", "--metrics-port", "0"]);
    for kv in [
        "yarn.resourcemanager.resource-tracker.address=127.0.0.1:0",
        "yarn.resourcemanager.address=127.0.0.1:0",
        "yarn.resourcemanager.scheduler.address=127.0.0.1:0",
        "yarn.resourcemanager.admin.address=127.0.0.1:0",
    ] {
        cmd.args(["--set", kv]);
    }
    cmd.arg("--set").arg(format!(
        "hotpath.rm.completion-log.dir={}",
        rm_dir.path().join("log").display()
    ));
    let rm = Ready::spawn(cmd, rm_dir, "hotpath rm")?;
    let rt = rm.ready["resource_tracker"]
        .as_str()
        .ok_or_else(|| anyhow!("no resource_tracker in {}", rm.ready))?
        .to_string();
    let (mut on, mut off) = (Vec::new(), Vec::new());
    for run in 0..args.runs.max(1) {
        for aux in [true, false] {
            let dir = tempfile::tempdir()?;
            let d = dir.path();
            let ip = format!("127.0.0.{}", 81 + 2 * run + usize::from(aux));
            let mut cmd = Command::new(&hotpath);
            cmd.args(["agent", "--ready-line", "--no-pin"]);
            let mut sets =
                vec![
                format!("yarn.resourcemanager.resource-tracker.address={rt}"),
                format!("yarn.nodemanager.address={ip}:0"),
                format!("yarn.nodemanager.webapp.address={ip}:0"),
                format!("hotpath.agent.ipc.address={ip}:0"),
                format!("yarn.nodemanager.local-dirs={}", d.join("local").display()),
                format!("yarn.nodemanager.log-dirs={}", d.join("logs").display()),
                format!("hotpath.agent.control-socket={}", d.join("agent.sock").display()),
                "yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage=100"
                    .into(),
            ];
            if aux {
                sets.push("yarn.nodemanager.aux-services=mapreduce_shuffle".into());
                sets.push("mapreduce.shuffle.port=0".into());
            }
            for s in &sets {
                cmd.arg("--set").arg(s);
            }
            let agent = Ready::spawn(cmd, dir, "hotpath agent")?;
            // Idle: registered, a few heartbeats, nothing to do.
            std::thread::sleep(Duration::from_secs(3));
            let rss = status_kib(agent.child.id(), "VmRSS")
                .ok_or_else(|| anyhow!("no VmRSS of the agent"))? as f64;
            if aux {
                on.push(rss);
            } else {
                off.push(rss);
            }
        }
    }
    Ok((on, off))
}
