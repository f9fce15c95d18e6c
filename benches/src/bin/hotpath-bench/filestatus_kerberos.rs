//! `hotpath-bench filestatus-kerberos`: HDFS-14277's fileStatus measurement on one Kerberized
//! NameNode (peer `hdfs --kerberos true`: Hadoop 3.5's MiniDFSCluster and a MiniKdc), at
//! `hadoop.rpc.protection` = `authentication`, `integrity` and `privacy`.
//!
//! One NameNode serves all three levels (it offers `authentication,integrity,privacy`; each
//! client asks for one level and SASL GSSAPI settles on it), so every figure of a run is taken
//! against the same server. For each level, one after the other, each client in a process of
//! its own, all logged in from the MiniKdc's client keytab (`client@EXAMPLE.COM`):
//!
//! 1. Hadoop's `NNThroughputBenchmark -fs hdfs://… -op fileStatus -threads T -files N
//!    -filesPerDir N -keepResults` (the minicluster jar's class, unchanged, run by the peer's
//!    `NnBenchDriver` after `UGI.loginUserFromKeytab`). Its first run creates the N files with
//!    its own create/complete calls (then renamed to `/nnThroughputBenchmark/fileStatus`); the
//!    later runs pass `-useExisting`. It stats each file once, so N sets its run length. Ops/s
//!    is its own figure (operations / elapsed ms of the fileStatus phase). CPU is read here from
//!    `/proc/<pid>` when it logs `Starting N fileStatus(s).` and `--- fileStatus inputs ---`:
//!    the whole process, and without its main thread, which busy-waits for the worker threads
//!    (`while (isInProgress()) {}` in `OperationStatsBase.benchmark`, one CPU spinning).
//! 2. Ours: `hotpath-bench filestatus` over the same N files, T threads, 1 s warm-up (the
//!    connections and their Kerberos handshakes) then `--seconds`; MIT krb5 logs in from the
//!    keytab (`KRB5_CLIENT_KTNAME`, a ticket cache of its own). CPU from `/proc/self/stat`.
//! 3. Java's `FileStatusDriver` (`FileSystem.getFileStatus`, T threads, 2 s warm-up, then
//!    `--seconds`; process CPU over the measured window): a second Java figure without the
//!    busy-waiting thread.
//! 4. After `privacy`: ours and FileStatusDriver again at `authentication`, each offered its own
//!    privacy ops/s (`--rate`): privacy's extra CPU per call at the same call rate, apart from
//!    what a lower rate costs by itself (fewer responses per wake-up of the waiting threads).
//!
//! With SASL our getFileInfo calls go, as without, over hdfs-io's direct-call pool (each
//! calling thread writes its call and reads its response on a connection of its own, which
//! negotiated Kerberos and wraps at its level by itself). `--ab-shared` also runs ours with
//! `hotpath.hdfs.client.direct-calls=false` at each level (every call over the shared
//! `ipc::client` connection, whose reader thread hands each response to the caller, as Java's
//! client does), the two in alternating order per round: the A/B of the direct calls.
//! `--ab-mit-wrap` also runs ours (direct calls) with `HOTPATH_GSS_OWN_WRAP=0`, MIT krb5's
//! `gss_wrap` / `gss_unwrap` instead of our RFC 4121 layer, alternating which runs first: the
//! A/B of the per-message layer.
//!
//! The NameNode runs with `dfs.permissions.enabled=false` (NNThroughputBenchmark calls
//! `setSafeMode`, which otherwise needs a superuser, and creates its files under `/`) and
//! `dfs.namenode.fs-limits.min-block-size=16` (its files' block size), as its usage text asks
//! for a remote NameNode.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use peer_harness::build::{ensure_built, Build};
use peer_harness::{driver, Driver, Kerberos, Mode, Peer};
use serde_json::Value;

/// The levels, in the order they run.
const QOPS: [&str; 3] = ["authentication", "integrity", "privacy"];

/// Where NNThroughputBenchmark leaves its fileStatus files with `-filesPerDir N`.
const NNTB_DIR: &str = "/nnThroughputBenchmark/fileStatus/ThroughputBenchDir0";
const NNTB_PREFIX: &str = "ThroughputBench";

/// No NNThroughputBenchmark run (file creation included) may take longer.
const NNTB_TIMEOUT: Duration = Duration::from_secs(1200);

#[derive(clap::Args)]
pub struct Args {
    /// Client threads, for every client.
    #[arg(long, default_value_t = 16)]
    threads: usize,
    /// Seconds measured for ours and FileStatusDriver (after their warm-ups).
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Files NNThroughputBenchmark creates and then stats once each per run (its run length);
    /// ours and FileStatusDriver stat the same files.
    #[arg(long, default_value_t = 50_000)]
    files: usize,
    /// Rounds over the levels, all against the one NameNode; the table gives the medians.
    #[arg(long, default_value_t = 1)]
    rounds: usize,
    /// Levels to run, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = QOPS.map(String::from))]
    qops: Vec<String>,
    /// Leave out Java's FileStatusDriver.
    #[arg(long)]
    no_driver: bool,
    /// Also run ours with direct calls off (`hotpath.hdfs.client.direct-calls=false`) at each
    /// level, alternating which of the two runs first.
    #[arg(long)]
    ab_shared: bool,
    /// Also run ours (direct calls) with MIT's `gss_wrap` / `gss_unwrap`
    /// (`HOTPATH_GSS_OWN_WRAP=0`) at each level, alternating which of the two runs first.
    #[arg(long)]
    ab_mit_wrap: bool,
    /// One JSON object (every run and the medians) instead of the table.
    #[arg(long)]
    json: bool,
}

/// One client's run at one level.
#[derive(Debug, Clone, Copy, Default)]
struct Figure {
    ops_per_sec: f64,
    /// Client process CPU (user + system) per call, µs.
    cpu_us: f64,
}

/// One level in one round.
#[derive(Debug, Clone, Default)]
struct Row {
    qop: String,
    ours: Figure,
    /// `--ab-shared`: ours with direct calls off.
    ours_shared: Option<Figure>,
    /// `--ab-mit-wrap`: ours with MIT's per-message layer.
    ours_mit_wrap: Option<Figure>,
    /// NNThroughputBenchmark without its busy-waiting main thread.
    nntb: Figure,
    /// NNThroughputBenchmark's whole process CPU per call, µs.
    nntb_cpu_all_us: f64,
    nntb_ops: u64,
    driver: Option<Figure>,
    /// `privacy` rows: ours (and FileStatusDriver) at `authentication`, offered this row's
    /// ops/s of each (the CPU of the same call rate without the wrapping).
    auth_same_rate: Option<(Figure, Option<Figure>)>,
}

impl Row {
    fn to_json(&self) -> String {
        let d = self.driver.map_or("null".into(), |d| {
            format!(
                "{{\"ops_per_sec\":{:.1},\"cpu_us_per_op\":{:.2}}}",
                d.ops_per_sec, d.cpu_us
            )
        });
        let fig = |f: Option<Figure>| {
            f.map_or("null".into(), |f| {
                format!(
                    "{{\"ops_per_sec\":{:.1},\"cpu_us_per_op\":{:.2}}}",
                    f.ops_per_sec, f.cpu_us
                )
            })
        };
        let shared = fig(self.ours_shared);
        let mit_wrap = fig(self.ours_mit_wrap);
        let same = self.auth_same_rate.map_or("null".into(), |(o, d)| {
            format!(
                "{{\"ours\":{},\"filestatus_driver\":{}}}",
                fig(Some(o)),
                fig(d)
            )
        });
        format!(
            "{{\"qop\":\"{}\",\"ours\":{{\"ops_per_sec\":{:.1},\"cpu_us_per_op\":{:.2}}},\"ours_shared\":{shared},\"ours_mit_wrap\":{mit_wrap},\"nntb\":{{\"ops\":{},\"ops_per_sec\":{:.1},\"cpu_us_per_op\":{:.2},\"cpu_us_per_op_with_main_thread\":{:.2}}},\"filestatus_driver\":{d},\"ops_ratio\":{:.2},\"cpu_ratio\":{:.2},\"authentication_at_this_rate\":{same}}}",
            self.qop,
            self.ours.ops_per_sec,
            self.ours.cpu_us,
            self.nntb_ops,
            self.nntb.ops_per_sec,
            self.nntb.cpu_us,
            self.nntb_cpu_all_us,
            self.ours.ops_per_sec / self.nntb.ops_per_sec,
            self.nntb.cpu_us / self.ours.cpu_us,
        )
    }
}

pub fn run(args: Args) -> Result<()> {
    for q in &args.qops {
        if !QOPS.contains(&q.as_str()) {
            bail!("unknown level {q:?}: authentication, integrity or privacy");
        }
    }
    if args.files == 0 || args.threads == 0 || args.rounds == 0 {
        bail!("--files, --threads and --rounds must be positive");
    }
    let load_before = loadavg();
    let build = ensure_built().context("building the Java peer")?;
    let peer = Peer::start(
        Mode::Hdfs,
        &[
            "--datanodes",
            "1",
            "--shared-ip",
            "true",
            "--kerberos",
            "true",
            "--set",
            "dfs.permissions.enabled=false",
            "--set",
            "dfs.namenode.fs-limits.min-block-size=16",
        ],
    )
    .context("starting the Kerberized HDFS peer")?;
    let k = peer.kerberos()?;
    let fs = peer.field_str("fs_default_fs")?.to_string();
    let tmp = tempfile::tempdir().context("a temp dir for ticket caches")?;
    eprintln!(
        "Kerberized NameNode {fs} up in {:.0?}; {} files, {} threads",
        peer.startup_time(),
        args.files,
        args.threads
    );
    let mut rows: Vec<Row> = Vec::new();
    let mut created = false;
    for round in 0..args.rounds {
        for qop in &args.qops {
            let (nntb, nntb_cpu_all_us, nntb_ops) = nntb(
                &build,
                peer.conf_dir(),
                &k,
                &fs,
                qop,
                &args,
                created,
                tmp.path(),
            )
            .with_context(|| format!("NNThroughputBenchmark at {qop}"))?;
            created = true;
            let run_with = |direct: bool, own_wrap: bool| {
                run_ours(
                    peer.conf_dir(),
                    &k,
                    qop,
                    &args,
                    tmp.path(),
                    None,
                    (direct, own_wrap),
                )
                .with_context(|| {
                    format!("ours at {qop} (direct calls {direct}, own wrap {own_wrap})")
                })
            };
            let run = |direct: bool| run_with(direct, true);
            let ours_mit_wrap_first = if args.ab_mit_wrap && round % 2 == 1 {
                Some(run_with(true, false)?)
            } else {
                None
            };
            let (ours, ours_shared) = match (args.ab_shared, round % 2) {
                (false, _) => (run(true)?, None),
                (true, 0) => {
                    let d = run(true)?;
                    (d, Some(run(false)?))
                }
                (true, _) => {
                    let s = run(false)?;
                    (run(true)?, Some(s))
                }
            };
            let ours_mit_wrap = match ours_mit_wrap_first {
                Some(f) => Some(f),
                None if args.ab_mit_wrap => Some(run_with(true, false)?),
                None => None,
            };
            let driver = if args.no_driver {
                None
            } else {
                Some(
                    file_status_driver(&build, peer.conf_dir(), &k, qop, &args, None)
                        .with_context(|| format!("FileStatusDriver at {qop}"))?,
                )
            };
            // privacy's call rate at authentication: how much of privacy's CPU per call is the
            // wrapping, and how much the lower rate (fewer calls share each wake-up)
            let auth_same_rate = if qop == "privacy" {
                let auth = "authentication";
                let o = run_ours(
                    peer.conf_dir(),
                    &k,
                    auth,
                    &args,
                    tmp.path(),
                    Some(ours.ops_per_sec),
                    (true, true),
                )
                .context("ours at authentication, paced")?;
                let d = match driver {
                    Some(d) => Some(
                        file_status_driver(
                            &build,
                            peer.conf_dir(),
                            &k,
                            auth,
                            &args,
                            Some(d.ops_per_sec),
                        )
                        .context("FileStatusDriver at authentication, paced")?,
                    ),
                    None => None,
                };
                Some((o, d))
            } else {
                None
            };
            let row = Row {
                qop: qop.clone(),
                ours,
                ours_shared,
                ours_mit_wrap,
                nntb,
                nntb_cpu_all_us,
                nntb_ops,
                driver,
                auth_same_rate,
            };
            eprintln!("round {round}: {}", row.to_json());
            rows.push(row);
        }
    }
    let load_after = loadavg();
    let medians: Vec<Row> = args
        .qops
        .iter()
        .map(|q| median_row(q, rows.iter().filter(|r| &r.qop == q)))
        .collect();
    if args.json {
        let all: Vec<String> = rows.iter().map(Row::to_json).collect();
        let med: Vec<String> = medians.iter().map(Row::to_json).collect();
        println!(
            "{{\"threads\":{},\"files\":{},\"seconds\":{},\"rounds\":{},\"load_before\":\"{load_before}\",\"load_after\":\"{load_after}\",\"runs\":[{}],\"medians\":[{}]}}",
            args.threads,
            args.files,
            args.seconds,
            args.rounds,
            all.join(","),
            med.join(",")
        );
    } else {
        print_table(&args, &rows, &medians, &load_before, &load_after);
    }
    Ok(())
}

/// The median; of an even count, the mean of the middle two.
fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 0 {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    } else {
        v[n / 2]
    }
}

fn median_row<'a>(qop: &str, rows: impl Iterator<Item = &'a Row> + Clone) -> Row {
    let m = |f: &dyn Fn(&Row) -> f64| median(rows.clone().map(f).collect());
    let with_driver = rows.clone().all(|r| r.driver.is_some());
    Row {
        qop: qop.to_string(),
        ours: Figure {
            ops_per_sec: m(&|r| r.ours.ops_per_sec),
            cpu_us: m(&|r| r.ours.cpu_us),
        },
        ours_shared: rows
            .clone()
            .all(|r| r.ours_shared.is_some())
            .then(|| Figure {
                ops_per_sec: m(&|r| r.ours_shared.map_or(f64::NAN, |f| f.ops_per_sec)),
                cpu_us: m(&|r| r.ours_shared.map_or(f64::NAN, |f| f.cpu_us)),
            }),
        ours_mit_wrap: rows
            .clone()
            .all(|r| r.ours_mit_wrap.is_some())
            .then(|| Figure {
                ops_per_sec: m(&|r| r.ours_mit_wrap.map_or(f64::NAN, |f| f.ops_per_sec)),
                cpu_us: m(&|r| r.ours_mit_wrap.map_or(f64::NAN, |f| f.cpu_us)),
            }),
        nntb: Figure {
            ops_per_sec: m(&|r| r.nntb.ops_per_sec),
            cpu_us: m(&|r| r.nntb.cpu_us),
        },
        nntb_cpu_all_us: m(&|r| r.nntb_cpu_all_us),
        nntb_ops: rows.clone().map(|r| r.nntb_ops).max().unwrap_or(0),
        driver: with_driver.then(|| Figure {
            ops_per_sec: m(&|r| r.driver.map_or(f64::NAN, |d| d.ops_per_sec)),
            cpu_us: m(&|r| r.driver.map_or(f64::NAN, |d| d.cpu_us)),
        }),
        auth_same_rate: rows.clone().all(|r| r.auth_same_rate.is_some()).then(|| {
            let o = |r: &Row| r.auth_same_rate.map(|(o, _)| o);
            let d = |r: &Row| r.auth_same_rate.and_then(|(_, d)| d);
            let ours = Figure {
                ops_per_sec: m(&|r| o(r).map_or(f64::NAN, |f| f.ops_per_sec)),
                cpu_us: m(&|r| o(r).map_or(f64::NAN, |f| f.cpu_us)),
            };
            let driver = rows.clone().all(|r| d(r).is_some()).then(|| Figure {
                ops_per_sec: m(&|r| d(r).map_or(f64::NAN, |f| f.ops_per_sec)),
                cpu_us: m(&|r| d(r).map_or(f64::NAN, |f| f.cpu_us)),
            });
            (ours, driver)
        }),
    }
}

fn print_table(args: &Args, rows: &[Row], medians: &[Row], before: &str, after: &str) {
    println!(
        "fileStatus on one Kerberized Hadoop 3.5 NameNode, {} threads, {} files, {} round(s){}; load average before {before}, after {after}",
        args.threads,
        args.files,
        args.rounds,
        if args.rounds > 1 { " (medians; min–max below)" } else { "" },
    );
    println!(
        "| level | ours ops/s | NNTB ops/s | ratio | ours CPU µs/op | NNTB CPU µs/op (whole process) | NNTB / ours CPU | FileStatusDriver ops/s, CPU µs/op |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for r in medians {
        let d = r.driver.map_or("–".into(), |d| {
            format!("{:.0}, {:.1}", d.ops_per_sec, d.cpu_us)
        });
        println!(
            "| {} | {:.0} | {:.0} | {:.2}× | {:.1} | {:.1} ({:.1}) | {:.2}× | {d} |",
            r.qop,
            r.ours.ops_per_sec,
            r.nntb.ops_per_sec,
            r.ours.ops_per_sec / r.nntb.ops_per_sec,
            r.ours.cpu_us,
            r.nntb.cpu_us,
            r.nntb_cpu_all_us,
            r.nntb.cpu_us / r.ours.cpu_us,
        );
    }
    let find = |q: &str| medians.iter().find(|r| r.qop == q);
    if let (Some(a), Some(p)) = (find("authentication"), find("privacy")) {
        let d = match (a.driver, p.driver) {
            (Some(a), Some(p)) => format!(
                ", FileStatusDriver {:.2}× (ops/s {:.2}×)",
                p.cpu_us / a.cpu_us,
                p.ops_per_sec / a.ops_per_sec
            ),
            _ => String::new(),
        };
        println!(
            "privacy / authentication client CPU per op: ours {:.2}× (ops/s {:.2}×), NNThroughputBenchmark {:.2}× (ops/s {:.2}×){d}",
            p.ours.cpu_us / a.ours.cpu_us,
            p.ours.ops_per_sec / a.ours.ops_per_sec,
            p.nntb.cpu_us / a.nntb.cpu_us,
            p.nntb.ops_per_sec / a.nntb.ops_per_sec,
        );
    }
    for r in medians {
        if let Some(s) = r.ours_shared {
            println!(
                "{}: ours with direct calls off: {:.0} ops/s, {:.1} µs/op; direct / shared: ops/s {:.2}×, CPU per op {:.2}×",
                r.qop,
                s.ops_per_sec,
                s.cpu_us,
                r.ours.ops_per_sec / s.ops_per_sec,
                r.ours.cpu_us / s.cpu_us,
            );
        }
    }
    if let (Some(a), Some(p)) = (find("authentication"), find("privacy")) {
        if let (Some(a), Some(p)) = (a.ours_shared, p.ours_shared) {
            println!(
                "privacy / authentication client CPU per op, ours with direct calls off: {:.2}× (ops/s {:.2}×)",
                p.cpu_us / a.cpu_us,
                p.ops_per_sec / a.ops_per_sec
            );
        }
    }
    for r in medians {
        if let Some(m) = r.ours_mit_wrap {
            println!(
                "{}: ours with MIT's gss_wrap/gss_unwrap (HOTPATH_GSS_OWN_WRAP=0): {:.0} ops/s, {:.1} µs/op; own layer / MIT's: ops/s {:.2}×, CPU per op {:.2}×",
                r.qop,
                m.ops_per_sec,
                m.cpu_us,
                r.ours.ops_per_sec / m.ops_per_sec,
                r.ours.cpu_us / m.cpu_us,
            );
        }
    }
    if let (Some(a), Some(p)) = (find("authentication"), find("privacy")) {
        if let (Some(am), Some(pm)) = (a.ours_mit_wrap, p.ours_mit_wrap) {
            println!(
                "privacy / authentication client CPU per op, ours with MIT's layer: {:.2}× (ops/s {:.2}×); with our own layer: {:.2}×",
                pm.cpu_us / am.cpu_us,
                pm.ops_per_sec / am.ops_per_sec,
                p.ours.cpu_us / a.ours.cpu_us,
            );
        }
    }
    if let Some(p) = find("privacy") {
        if let Some((o, d)) = p.auth_same_rate {
            let d = match (p.driver, d) {
                (Some(p), Some(a)) => format!(
                    ", FileStatusDriver {:.2}× ({:.1} µs at {:.0} ops/s)",
                    p.cpu_us / a.cpu_us,
                    a.cpu_us,
                    a.ops_per_sec
                ),
                _ => String::new(),
            };
            println!(
                "privacy / authentication client CPU per op at the same call rate (authentication offered privacy's ops/s): ours {:.2}× ({:.1} µs at {:.0} ops/s){d}",
                p.ours.cpu_us / o.cpu_us,
                o.cpu_us,
                o.ops_per_sec
            );
        }
    }
    if args.rounds > 1 {
        for q in &args.qops {
            let rs: Vec<&Row> = rows.iter().filter(|r| &r.qop == q).collect();
            let span = |f: &dyn Fn(&Row) -> f64| {
                let v: Vec<f64> = rs.iter().map(|r| f(r)).collect();
                let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                format!("{lo:.1}–{hi:.1}")
            };
            println!(
                "{q}: ours ops/s {}, CPU µs/op {}; NNTB ops/s {}, CPU µs/op {}",
                span(&|r| r.ours.ops_per_sec),
                span(&|r| r.ours.cpu_us),
                span(&|r| r.nntb.ops_per_sec),
                span(&|r| r.nntb.cpu_us),
            );
        }
    }
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// (utime + stime) in ns from a `/proc/…/stat` text.
fn stat_cpu_ns(stat: &str) -> Option<u64> {
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    Some((utime + stime) * 10_000_000)
}

/// A JVM's CPU: the whole process (exited threads included) and its Java main thread (the
/// thread named `java` that is not the process's first thread, which only waits for it).
#[derive(Debug, Clone, Copy)]
struct JvmCpu {
    total_ns: u64,
    main_ns: u64,
}

fn jvm_cpu(pid: u32) -> Option<JvmCpu> {
    let total_ns = stat_cpu_ns(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)?;
    let mut main_ns = 0;
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let t = t.ok()?;
        if t.file_name().to_str() == Some(&pid.to_string()) {
            continue;
        }
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if comm.trim_end() == "java" {
            let s = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
            main_ns += stat_cpu_ns(&s).unwrap_or(0);
        }
    }
    Some(JvmCpu { total_ns, main_ns })
}

fn kerberos_args(k: &Kerberos) -> Vec<String> {
    vec![
        "--principal".into(),
        k.client_principal.clone(),
        "--keytab".into(),
        k.client_keytab.display().to_string(),
        "--krb5-conf".into(),
        k.krb5_conf.display().to_string(),
    ]
}

/// Hadoop's NNThroughputBenchmark at `qop`: (figure without the main thread, whole-process CPU
/// µs per op, operations).
#[allow(clippy::too_many_arguments)]
fn nntb(
    build: &Build,
    conf_dir: &Path,
    k: &Kerberos,
    fs: &str,
    qop: &str,
    args: &Args,
    use_existing: bool,
    tmp: &Path,
) -> Result<(Figure, f64, u64)> {
    let files = args.files.to_string();
    let threads = args.threads.to_string();
    let mut cmd = build.java_command("hotpath.peer.NnBenchDriver");
    cmd.arg("--conf-dir")
        .arg(conf_dir)
        .args(["--set", &format!("hadoop.rpc.protection={qop}")])
        .arg("--set")
        .arg(format!("hadoop.tmp.dir={}", tmp.join("nntb").display()))
        .args(kerberos_args(k))
        .args(["--", "-fs", fs, "-op", "fileStatus", "-threads", &threads])
        .args(["-files", &files, "-filesPerDir", &files, "-keepResults"]);
    if use_existing {
        cmd.arg("-useExisting");
    }
    let mut child = cmd
        .env("HADOOP_CONF_DIR", conf_dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting NnBenchDriver")?;
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    let err = child.stderr.take().context("NnBenchDriver stderr")?;
    thread::spawn(move || {
        for l in BufReader::new(err).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    let start_line = format!("Starting {files} fileStatus(s).");
    let (mut at_start, mut at_end) = (None, None);
    let (mut ops, mut elapsed_ms, mut ops_per_sec) = (None, None, None);
    let mut tail: VecDeque<String> = VecDeque::new();
    let mut done = false;
    let deadline = Instant::now() + NNTB_TIMEOUT;
    let result = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(l) => {
                if l.trim_end() == "NNBENCH-DONE" {
                    done = true;
                    break Ok(());
                }
                if l.contains(&start_line) {
                    at_start = jvm_cpu(pid);
                } else if l.contains("--- fileStatus inputs ---") {
                    at_end = jvm_cpu(pid);
                }
                let after = |key: &str| l.split_once(key).map(|(_, v)| v.trim().to_string());
                if at_start.is_some() {
                    if let Some(v) = after("# operations:") {
                        ops = v.parse::<u64>().ok();
                    } else if let Some(v) = after("Elapsed Time:") {
                        elapsed_ms = v.parse::<u64>().ok();
                    } else if let Some(v) = after("Ops per sec:") {
                        ops_per_sec = v.parse::<f64>().ok();
                    }
                }
                tail.push_back(l);
                if tail.len() > 40 {
                    tail.pop_front();
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                break Err(format!("no end in {NNTB_TIMEOUT:?}"))
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break Err("it exited".into()),
        }
    };
    // stdin closes: the driver exits
    drop(child.stdin.take());
    let t0 = Instant::now();
    while matches!(child.try_wait(), Ok(None)) && t0.elapsed() < Duration::from_secs(20) {
        thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let status = child.wait().ok();
    let tail: Vec<String> = tail.into_iter().collect();
    let tail = tail.join("\n");
    if let Err(why) = result {
        bail!("NnBenchDriver: {why} ({status:?}); its log ends:\n{tail}");
    }
    let (Some(a), Some(b), Some(ops), Some(elapsed_ms), Some(ops_per_sec), true) =
        (at_start, at_end, ops, elapsed_ms, ops_per_sec, done)
    else {
        bail!("NnBenchDriver ended without its fileStatus figures; its log ends:\n{tail}");
    };
    if ops == 0 || elapsed_ms == 0 {
        bail!("NNThroughputBenchmark ran no fileStatus calls; its log ends:\n{tail}");
    }
    if tail.contains("StatsDaemon") && tail.contains("failed") {
        bail!("an NNThroughputBenchmark thread failed; its log ends:\n{tail}");
    }
    let total = b.total_ns.saturating_sub(a.total_ns) as f64;
    let main = b.main_ns.saturating_sub(a.main_ns) as f64;
    let per_op = |ns: f64| ns / 1e3 / ops as f64;
    Ok((
        Figure {
            ops_per_sec,
            cpu_us: per_op(total - main),
        },
        per_op(total),
        ops,
    ))
}

/// Ours: `hotpath-bench filestatus` as a child process at `qop`, with direct calls on or off,
/// and our RFC 4121 layer or MIT's `gss_wrap` / `gss_unwrap` (`own_wrap`).
fn run_ours(
    conf_dir: &Path,
    k: &Kerberos,
    qop: &str,
    args: &Args,
    tmp: &Path,
    rate: Option<f64>,
    (direct, own_wrap): (bool, bool),
) -> Result<Figure> {
    let exe = std::env::current_exe().context("locating hotpath-bench")?;
    let mut cmd = Command::new(exe);
    cmd.arg("filestatus");
    if let Some(r) = rate {
        cmd.args(["--rate", &format!("{r:.0}")]);
    }
    if !direct {
        cmd.args(["--set", "hotpath.hdfs.client.direct-calls=false"]);
    }
    let out = cmd
        .arg("--conf-dir")
        .arg(conf_dir)
        .args(["--set", &format!("hadoop.rpc.protection={qop}")])
        .args(["--threads", &args.threads.to_string()])
        .args(["--files", &args.files.to_string()])
        .args(["--dir", NNTB_DIR, "--prefix", NNTB_PREFIX])
        .args(["--warmup", "1", "--duration", &args.seconds.to_string()])
        .arg("--json")
        .env("KRB5_CONFIG", &k.krb5_conf)
        .env("KRB5_CLIENT_KTNAME", &k.client_keytab)
        .env(
            "KRB5CCNAME",
            format!("FILE:{}", tmp.join(format!("ccache-ours-{qop}")).display()),
        )
        .env("HOTPATH_LOG", "warn")
        .env(
            ipc::kerberos::OWN_WRAP_ENV,
            if own_wrap { "1" } else { "0" },
        )
        .stdin(Stdio::null())
        .output()
        .context("running hotpath-bench filestatus")?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().rev().find(|l| !l.trim().is_empty());
    let v: Value = match (
        out.status.success(),
        last.map(serde_json::from_str::<Value>),
    ) {
        (true, Some(Ok(v))) => v,
        _ => bail!(
            "hotpath-bench filestatus failed ({}): {stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ),
    };
    let num = |key: &str| v.get(key).and_then(Value::as_f64);
    if num("errors") != Some(0.0) || num("missing") != Some(0.0) {
        bail!("calls failed or found no file: {v}");
    }
    match (num("ops_per_sec"), num("cpu_ns_per_op")) {
        (Some(ops_per_sec), Some(ns)) if ops_per_sec > 0.0 => Ok(Figure {
            ops_per_sec,
            cpu_us: ns / 1e3,
        }),
        _ => bail!("no figures in {v}"),
    }
}

/// Java's FileStatusDriver at `qop` (offered `rate` calls/s, if any).
fn file_status_driver(
    build: &Build,
    conf_dir: &Path,
    k: &Kerberos,
    qop: &str,
    args: &Args,
    rate: Option<f64>,
) -> Result<Figure> {
    let mut a: Vec<String> = [
        "--threads",
        &args.threads.to_string(),
        "--files",
        &args.files.to_string(),
        "--dir",
        NNTB_DIR,
        "--prefix",
        NNTB_PREFIX,
        "--duration",
        &args.seconds.to_string(),
        "--warmup",
        "2",
        "--set",
        &format!("hadoop.rpc.protection={qop}"),
    ]
    .map(String::from)
    .to_vec();
    a.extend(kerberos_args(k));
    if let Some(r) = rate {
        a.extend(["--rate".to_string(), format!("{r:.0}")]);
    }
    let refs: Vec<&str> = a.iter().map(String::as_str).collect();
    let v = driver::run(build, conf_dir, Driver::FileStatus, &refs)?;
    let num = |key: &str| v.get(key).and_then(Value::as_f64);
    if num("errors") != Some(0.0) {
        bail!("FileStatusDriver calls failed: {v}");
    }
    match (num("ops_per_s"), num("cpu_us_per_call")) {
        (Some(ops_per_sec), Some(cpu_us)) if ops_per_sec > 0.0 => Ok(Figure {
            ops_per_sec,
            cpu_us,
        }),
        _ => bail!("no figures in {v}"),
    }
}
