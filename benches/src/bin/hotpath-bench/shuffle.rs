//! `hotpath-bench shuffle`: map outputs served by our `mapreduce_shuffle` service
//! (`nm_runtime::shuffle`, in this process) and by a raw `sendfile` server (the floor: an
//! in-memory table of segments, one blocking thread per client thread, header `write` +
//! `sendfile`, no checks), fetched by the same client with the 3.5.0 Fetcher's request pattern
//! (a connection per request, `GET /mapOutput?job=…&reduce=…&map=<≤20 attempts>`, `UrlHash`,
//! `name`, `version`, the JDK's headers; the answer read to its `content-length`).
//!
//! ```text
//! target/release/hotpath-bench shuffle [--runs 3] [--large-mib 64] [--large-maps 4] \
//!     [--small-maps 2000] [--small-kib 8] [--fetchers 4] [--seconds 3] [--json]
//! ```
//!
//! - **large**: `--large-maps` map outputs, each with one `--large-mib` partition for reduce 0;
//!   each request fetches one map (GB/s, server CPU seconds per GB);
//! - **small**: `--small-maps` map outputs of `--small-kib` for reduce 0, fetched 20 maps per
//!   request (map outputs per second, server CPU µs per map output).
//!
//! `--fetchers` client threads fetch back to back for `--seconds` per server and case; the two
//! servers alternate within each run. Server CPU is the user + system time of the server's own
//! threads (`hp-shuffle-*`, `raw-shuffle*`) from `/proc/self/task/*/stat` (10 ms ticks). The
//! files stay in the page cache (`mapreduce.shuffle.manage.os.cache=false` for ours, as Java's
//! is without libhadoop). Medians over `--runs`, and the median of the per-run ratios.
//! Hadoop's own ShuffleHandler (Java) is not measured yet: it needs a JVM host for the class
//! in the peer, so `java_*` keys are `null`.

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use serde_json::json;

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
    /// Our service's event loops (`mapreduce.shuffle.max.threads`; 0 = its default).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Seconds per server, case and run.
    #[arg(long, default_value_t = 3.0)]
    pub seconds: f64,
    #[arg(long)]
    pub json: bool,
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

/// One segment as the raw server sends it.
#[derive(Clone)]
struct Segment {
    path: PathBuf,
    header: Vec<u8>,
    len: u64,
}

/// Writes `maps` map outputs of one `part`-byte partition (reduce 0) for application `app`
/// under `local`; returns the raw server's table.
fn write_outputs(
    local: &Path,
    app: i32,
    maps: usize,
    part: u64,
) -> Result<HashMap<String, Segment>> {
    let appdir = local
        .join("usercache")
        .join(USER)
        .join("appcache")
        .join(nm_core::ids::AppId::new(TS, app).to_string())
        .join("output");
    let mut table = HashMap::new();
    let chunk: Vec<u8> = (0..1 << 20)
        .map(|i: u32| (i * 31 + i / 977) as u8)
        .collect();
    for m in 0..maps {
        let id = attempt(app, m);
        let d = appdir.join(&id);
        std::fs::create_dir_all(&d)?;
        let mut f = File::create(d.join("file.out"))?;
        let mut left = part;
        while left > 0 {
            let n = left.min(chunk.len() as u64) as usize;
            f.write_all(&chunk[..n])?;
            left -= n as u64;
        }
        let mut idx = Vec::new();
        for v in [0i64, part as i64 - 4, part as i64] {
            idx.extend_from_slice(&v.to_be_bytes());
        }
        let crc = u64::from(crc32fast::hash(&idx));
        idx.extend_from_slice(&crc.to_be_bytes());
        std::fs::write(d.join("file.out.index"), idx)?;
        let mut header = Vec::new();
        hadoop_wire::token::writable::write_vint(&mut header, id.len() as i32);
        header.extend_from_slice(id.as_bytes());
        hadoop_wire::token::writable::write_vlong(&mut header, part as i64);
        hadoop_wire::token::writable::write_vlong(&mut header, part as i64 - 4);
        hadoop_wire::token::writable::write_vint(&mut header, 0);
        table.insert(
            id,
            Segment {
                path: d.join("file.out"),
                header,
                len: part,
            },
        );
    }
    Ok(table)
}

/// The raw floor: `threads` blocking threads, each accepting and serving one connection at a
/// time (threads that live through the run, so their CPU time can be read); header `write`,
/// segment `sendfile`. They block in `accept` until the process ends.
fn raw_server(table: Arc<HashMap<String, Segment>>, threads: usize) -> Result<SocketAddr> {
    let l = TcpListener::bind("127.0.0.1:0")?;
    let addr = l.local_addr()?;
    for n in 0..threads.max(1) {
        let (l, t) = (l.try_clone()?, table.clone());
        std::thread::Builder::new()
            .name(format!("raw-shuffle-{n}"))
            .spawn(move || {
                while let Ok((s, _)) = l.accept() {
                    raw_serve(s, &t);
                }
            })?;
    }
    Ok(addr)
}

fn raw_serve(mut s: TcpStream, table: &HashMap<String, Segment>) -> Option<()> {
    let _ = s.set_nonblocking(false);
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
    let mut head = Vec::with_capacity(512);
    let mut byte = [0u8; 1];
    // the head byte by byte (the JDK reads it buffered; this keeps the body's bytes exact)
    while !head.ends_with(b"\r\n\r\n") {
        if s.read(&mut byte)? == 0 {
            return Err(anyhow!("EOF in the head"));
        }
        head.push(byte[0]);
    }
    let text = String::from_utf8_lossy(&head);
    if !text.starts_with("HTTP/1.1 200") {
        return Err(anyhow!("answer: {}", text.lines().next().unwrap_or("")));
    }
    let len: u64 = text
        .lines()
        .find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .ok_or_else(|| anyhow!("no content-length"))?;
    let mut left = len;
    while left > 0 {
        let take = left.min(buf.len() as u64) as usize;
        let n = s.read(&mut buf[..take])?;
        if n == 0 {
            return Err(anyhow!("short body"));
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

/// User + system seconds of this process's threads whose name starts with `prefix`.
fn threads_cpu_s(prefix: &str) -> f64 {
    let mut ticks = 0u64;
    for e in std::fs::read_dir("/proc/self/task")
        .into_iter()
        .flatten()
        .flatten()
    {
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        if !stat[open + 1..close].starts_with(prefix) {
            continue;
        }
        let f: Vec<&str> = stat[close + 2..].split(' ').collect();
        ticks += f.get(11).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
            + f.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    }
    ticks as f64 / 100.0
}

/// (bytes, maps, server CPU s, wall s) of `fetchers` threads cycling through `reqs`.
fn drive(
    addr: SocketAddr,
    reqs: &Arc<Vec<Vec<u8>>>,
    maps_per_req: &Arc<Vec<u64>>,
    fetchers: usize,
    seconds: f64,
    cpu_prefix: &str,
) -> Result<(u64, u64, f64, f64)> {
    let bytes = Arc::new(AtomicU64::new(0));
    let maps = Arc::new(AtomicU64::new(0));
    let cpu0 = threads_cpu_s(cpu_prefix);
    let t0 = Instant::now();
    let until = t0 + Duration::from_secs_f64(seconds);
    let mut hs = Vec::new();
    for f in 0..fetchers {
        let (reqs, mpr, bytes, maps) = (
            reqs.clone(),
            maps_per_req.clone(),
            bytes.clone(),
            maps.clone(),
        );
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
        h.join().map_err(|_| anyhow!("a fetcher panicked"))??;
    }
    let wall = t0.elapsed().as_secs_f64();
    Ok((
        bytes.load(Relaxed),
        maps.load(Relaxed),
        threads_cpu_s(cpu_prefix) - cpu0,
        wall,
    ))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Runs the bench (see the module docs).
pub fn run(args: ShuffleArgs) -> Result<()> {
    let dir = tempfile::tempdir().context("a temp dir for the map outputs")?;
    let local = dir.path().join("local");
    let large = write_outputs(&local, 1, args.large_maps, args.large_mib << 20)?;
    let small = write_outputs(&local, 2, args.small_maps, args.small_kib << 10)?;
    let mut table = large;
    table.extend(small);
    let raw = raw_server(Arc::new(table), args.fetchers)?;
    let jobs = nm_runtime::shuffle::Jobs::new(None);
    let server = nm_runtime::shuffle::ShuffleServer::start(
        nm_runtime::shuffle::ShuffleConfig {
            port: 0,
            manage_os_cache: false,
            threads: args.threads,
            ..Default::default()
        },
        vec![local.clone()],
        jobs.clone(),
        Arc::default(),
    )
    .map_err(|e| anyhow!("{e}"))?;
    for app in [1, 2] {
        let mut id = Vec::new();
        hadoop_wire::token::writable::write_text(&mut id, &job(app));
        let sd = hadoop_wire::token::Token::new(id, SECRET.to_vec(), "mapreduce.job", job(app))
            .to_writable();
        jobs.register(USER, nm_core::ids::AppId::new(TS, app), &sd)
            .map_err(|e| anyhow!("{e}"))?;
    }
    let ours = SocketAddr::from(([127, 0, 0, 1], server.port()));
    let cases = |port: u16| {
        let large = requests(port, 1, args.large_maps, 1);
        let small = requests(port, 2, args.small_maps, 20);
        let lm = vec![1u64; large.len()];
        let sm: Vec<u64> = (0..small.len())
            .map(|i| (args.small_maps - i * 20).min(20) as u64)
            .collect();
        (
            (Arc::new(large), Arc::new(lm)),
            (Arc::new(small), Arc::new(sm)),
        )
    };
    let (ours_large, ours_small) = cases(ours.port());
    let (raw_large, raw_small) = cases(raw.port());
    // warm the page cache and both servers
    drive(ours, &ours_large.0, &ours_large.1, 1, 0.3, "hp-shuffle")?;
    drive(raw, &raw_small.0, &raw_small.1, 1, 0.3, "raw-shuffle")?;
    let mut rows = Vec::new();
    for run in 0..args.runs {
        let (ob, _, oc, ow) = drive(
            ours,
            &ours_large.0,
            &ours_large.1,
            args.fetchers,
            args.seconds,
            "hp-shuffle",
        )?;
        let (rb, _, rc, rw) = drive(
            raw,
            &raw_large.0,
            &raw_large.1,
            args.fetchers,
            args.seconds,
            "raw-shuffle",
        )?;
        let (_, om, osc, osw) = drive(
            ours,
            &ours_small.0,
            &ours_small.1,
            args.fetchers,
            args.seconds,
            "hp-shuffle",
        )?;
        let (_, rm, rsc, rsw) = drive(
            raw,
            &raw_small.0,
            &raw_small.1,
            args.fetchers,
            args.seconds,
            "raw-shuffle",
        )?;
        let gb = |b: u64| b as f64 / 1e9;
        let row = json!({
            "run": run,
            "ours_gbps": gb(ob) / ow,
            "raw_gbps": gb(rb) / rw,
            "ours_cpu_s_per_gb": oc / gb(ob),
            "raw_cpu_s_per_gb": rc / gb(rb),
            "ours_small_fetches_per_s": om as f64 / osw,
            "raw_small_fetches_per_s": rm as f64 / rsw,
            "ours_cpu_us_per_small_fetch": osc * 1e6 / om.max(1) as f64,
            "raw_cpu_us_per_small_fetch": rsc * 1e6 / rm.max(1) as f64,
        });
        if !args.json {
            eprintln!("run {run}: {row}");
        }
        rows.push(row);
    }
    server.shutdown();
    let col = |k: &str| {
        median(
            rows.iter()
                .map(|r| r[k].as_f64().unwrap_or(f64::NAN))
                .collect(),
        )
    };
    let ratio = |a: &str, b: &str| {
        median(
            rows.iter()
                .map(|r| r[a].as_f64().unwrap_or(f64::NAN) / r[b].as_f64().unwrap_or(f64::NAN))
                .collect(),
        )
    };
    let out = json!({
        "ours_gbps": col("ours_gbps"),
        "raw_gbps": col("raw_gbps"),
        "java_gbps": null,
        "ours_cpu_s_per_gb": col("ours_cpu_s_per_gb"),
        "raw_cpu_s_per_gb": col("raw_cpu_s_per_gb"),
        "java_cpu_s_per_gb": null,
        "ours_small_fetches_per_s": col("ours_small_fetches_per_s"),
        "raw_small_fetches_per_s": col("raw_small_fetches_per_s"),
        "java_small_fetches_per_s": null,
        "ours_cpu_us_per_small_fetch": col("ours_cpu_us_per_small_fetch"),
        "raw_cpu_us_per_small_fetch": col("raw_cpu_us_per_small_fetch"),
        "java_cpu_us_per_small_fetch": null,
        "ours_over_raw_gbps": ratio("ours_gbps", "raw_gbps"),
        "ours_over_raw_small_fetches_per_s": ratio("ours_small_fetches_per_s", "raw_small_fetches_per_s"),
        "runs": rows,
    });
    if args.json {
        println!("{out}");
    } else {
        println!(
            "shuffle, {} run(s), medians ({} fetchers, {} s each):\n  large ({} MiB partitions): ours {:.2} GB/s ({:.3} CPU s/GB), raw sendfile {:.2} GB/s ({:.3} CPU s/GB), ours/raw {:.2}\n  small ({} maps x {} KiB, 20 per request): ours {:.0} map outputs/s ({:.1} CPU us each), raw {:.0}/s ({:.1} us), ours/raw {:.2}\n  Java's ShuffleHandler: not measured (needs its JVM host in the peer)",
            args.runs,
            args.fetchers,
            args.seconds,
            args.large_mib,
            out["ours_gbps"].as_f64().unwrap_or(0.0),
            out["ours_cpu_s_per_gb"].as_f64().unwrap_or(0.0),
            out["raw_gbps"].as_f64().unwrap_or(0.0),
            out["raw_cpu_s_per_gb"].as_f64().unwrap_or(0.0),
            out["ours_over_raw_gbps"].as_f64().unwrap_or(0.0),
            args.small_maps,
            args.small_kib,
            out["ours_small_fetches_per_s"].as_f64().unwrap_or(0.0),
            out["ours_cpu_us_per_small_fetch"].as_f64().unwrap_or(0.0),
            out["raw_small_fetches_per_s"].as_f64().unwrap_or(0.0),
            out["raw_cpu_us_per_small_fetch"].as_f64().unwrap_or(0.0),
            out["ours_over_raw_small_fetches_per_s"].as_f64().unwrap_or(0.0),
        );
    }
    Ok(())
}
