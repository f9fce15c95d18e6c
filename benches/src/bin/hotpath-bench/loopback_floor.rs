//! `hotpath-bench loopback-floor`: what one RPC-shaped exchange on loopback TCP costs the
//! server's kernel with nothing else in the way — the floor under `rm-apps`' allocate figure.
//!
//! ```text
//! target/release/hotpath-bench loopback-floor [--seconds 3] [--rounds 2] [--gap-us 10] \
//!     [--req-bytes 150] [--resp-bytes 120] [--json]
//! ```
//!
//! A server thread answers each `--req-bytes` request with `--resp-bytes` by a blocking
//! `read` and `write` on one connection (TCP_NODELAY), sleeping in `read` between calls as an
//! RPC server does; a client thread of the same process calls back to back, spinning
//! `--gap-us` between calls in place of an AM's own work. The server thread's user and system
//! CPU (`/proc/thread-self/stat`) per call is reported for three placements, alternated over
//! `--rounds`: unpinned, both threads on CPU 0, and server on CPU 0 with the client on CPU 1
//! (the last needs two CPUs). On a VM the third shows what a wake-up across vCPUs costs.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};

/// Flags of `hotpath-bench loopback-floor`.
#[derive(clap::Args, Debug, Clone)]
pub struct FloorArgs {
    /// Seconds per placement and round.
    #[arg(long, default_value_t = 3.0)]
    pub seconds: f64,
    /// Rounds of the three placements.
    #[arg(long, default_value_t = 2)]
    pub rounds: usize,
    /// Client think time between calls (µs, spun).
    #[arg(long, default_value_t = 10)]
    pub gap_us: u64,
    /// Request size (bytes).
    #[arg(long, default_value_t = 150)]
    pub req_bytes: usize,
    /// Response size (bytes).
    #[arg(long, default_value_t = 120)]
    pub resp_bytes: usize,
    /// Print the rounds as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Clone, Copy, Debug)]
enum Placement {
    Free,
    SameCpu,
    TwoCpus,
}

impl Placement {
    fn name(self) -> &'static str {
        match self {
            Placement::Free => "unpinned",
            Placement::SameCpu => "same CPU",
            Placement::TwoCpus => "two CPUs",
        }
    }
    fn cpus(self) -> (Option<u32>, Option<u32>) {
        match self {
            Placement::Free => (None, None),
            Placement::SameCpu => (Some(0), Some(0)),
            Placement::TwoCpus => (Some(0), Some(1)),
        }
    }
}

/// This thread's user and system CPU in clock ticks (fields 14 and 15 of
/// `/proc/thread-self/stat`, after the parenthesised name, which may hold spaces).
fn thread_ticks() -> Result<(u64, u64)> {
    let s = std::fs::read_to_string("/proc/thread-self/stat")?;
    let rest = s
        .rsplit_once(')')
        .map(|(_, r)| r)
        .ok_or_else(|| anyhow!("unreadable /proc/thread-self/stat"))?;
    // After ")": state is field 3, so utime (14) and stime (15) are the 12th and 13th.
    let mut f = rest.split_whitespace().skip(11);
    let mut next = || -> Result<u64> {
        f.next()
            .ok_or_else(|| anyhow!("short /proc/thread-self/stat"))?
            .parse()
            .context("/proc/thread-self/stat")
    };
    Ok((next()?, next()?))
}

fn ticks_per_s() -> f64 {
    // The kernel's USER_HZ, which /proc reports in; 100 on every Linux architecture we build.
    100.0
}

struct Served {
    calls: u64,
    user_s: f64,
    sys_s: f64,
}

fn serve(l: TcpListener, cpu: Option<u32>, req: usize, resp: usize) -> Result<Served> {
    if let Some(c) = cpu {
        hw::pin::pin_current_thread(c).with_context(|| format!("pinning the server to CPU {c}"))?;
    }
    let (mut s, _) = l.accept()?;
    s.set_nodelay(true)?;
    let mut rbuf = vec![0u8; req];
    let wbuf = vec![b'x'; resp];
    // The clock starts at the first request (after the connection's setup).
    s.read_exact(&mut rbuf)?;
    let t0 = thread_ticks()?;
    s.write_all(&wbuf)?;
    let mut calls = 0u64;
    loop {
        match s.read_exact(&mut rbuf) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(e.into()),
        }
        s.write_all(&wbuf)?;
        calls += 1;
    }
    let t1 = thread_ticks()?;
    Ok(Served {
        calls,
        user_s: (t1.0 - t0.0) as f64 / ticks_per_s(),
        sys_s: (t1.1 - t0.1) as f64 / ticks_per_s(),
    })
}

fn call(addr: std::net::SocketAddr, cpu: Option<u32>, a: &FloorArgs) -> Result<(u64, Duration)> {
    let mut s = TcpStream::connect(addr)?;
    s.set_nodelay(true)?;
    // Pinned once connected: a failure drops the connection, which ends the server too.
    if let Some(c) = cpu {
        hw::pin::pin_current_thread(c).with_context(|| format!("pinning the client to CPU {c}"))?;
    }
    let wbuf = vec![b'q'; a.req_bytes];
    let mut rbuf = vec![0u8; a.resp_bytes];
    let gap = Duration::from_micros(a.gap_us);
    let end = Duration::from_secs_f64(a.seconds);
    let t = Instant::now();
    let mut n = 0u64;
    while t.elapsed() < end {
        s.write_all(&wbuf)?;
        s.read_exact(&mut rbuf)?;
        n += 1;
        let g = Instant::now();
        while g.elapsed() < gap {
            std::hint::spin_loop();
        }
    }
    Ok((n, t.elapsed()))
}

fn one(p: Placement, a: &FloorArgs) -> Result<Value> {
    let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    let addr = l.local_addr()?;
    let (scpu, ccpu) = p.cpus();
    let (req, resp) = (a.req_bytes, a.resp_bytes);
    let server = std::thread::Builder::new()
        .name("floor-server".into())
        .spawn(move || serve(l, scpu, req, resp))?;
    let client = call(addr, ccpu, a);
    let served = server
        .join()
        .map_err(|_| anyhow!("the server thread panicked"))??;
    let (n, wall) = client?;
    if served.calls == 0 {
        bail!("no calls were served");
    }
    let per = |s: f64| s * 1e6 / served.calls as f64;
    Ok(json!({
        "placement": p.name(),
        "calls": served.calls,
        "calls_per_s": n as f64 / wall.as_secs_f64(),
        "server_user_us_per_call": per(served.user_s),
        "server_sys_us_per_call": per(served.sys_s),
        "server_cpu_us_per_call": per(served.user_s + served.sys_s),
    }))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

pub fn run(a: FloorArgs) -> Result<()> {
    if !(0.5..=60.0).contains(&a.seconds) {
        bail!("--seconds must be within 0.5..=60 (the CPU clock counts 10 ms ticks)");
    }
    if a.rounds == 0 || a.req_bytes == 0 || a.resp_bytes == 0 {
        bail!("--rounds, --req-bytes and --resp-bytes must be at least 1");
    }
    if a.req_bytes > 1 << 20 || a.resp_bytes > 1 << 20 {
        bail!("--req-bytes and --resp-bytes are at most 1 MiB");
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut placements = vec![Placement::Free, Placement::SameCpu];
    if cpus >= 2 {
        placements.push(Placement::TwoCpus);
    }
    let mut runs = Vec::new();
    for r in 0..a.rounds {
        // Alternate the order so that no placement always runs first.
        let order: Vec<Placement> = if r % 2 == 0 {
            placements.clone()
        } else {
            placements.iter().rev().copied().collect()
        };
        for p in order {
            let v = one(p, &a)?;
            eprintln!("round {r}: {v}");
            runs.push(v);
        }
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "loopback floor: {} B request, {} B response, {} µs client gap, {} s × {} rounds; load average {}",
        a.req_bytes,
        a.resp_bytes,
        a.gap_us,
        a.seconds,
        a.rounds,
        load.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
    );
    println!(
        "{:<10} {:>22} {:>22} {:>22} {:>10}",
        "placement", "server CPU/call (µs)", "of which user", "of which kernel", "calls/s"
    );
    for p in &placements {
        let mine: Vec<&Value> = runs.iter().filter(|v| v["placement"] == p.name()).collect();
        let col = |k: &str| {
            let v: Vec<f64> = mine.iter().filter_map(|x| x[k].as_f64()).collect();
            let (lo, hi) = v
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &x| {
                    (l.min(x), h.max(x))
                });
            format!("{:.1} ({:.1}–{:.1})", median(v), lo, hi)
        };
        println!(
            "{:<10} {:>22} {:>22} {:>22} {:>10}",
            p.name(),
            col("server_cpu_us_per_call"),
            col("server_user_us_per_call"),
            col("server_sys_us_per_call"),
            col("calls_per_s")
                .split_whitespace()
                .next()
                .unwrap_or_default()
        );
    }
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({ "runs": runs }))?
        );
    }
    Ok(())
}
