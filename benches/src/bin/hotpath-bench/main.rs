//! `hotpath-bench`: every measurement, as a binary of its own so that the installed `hotpath`
//! carries no benchmark code and no counting allocator. The subcommands, flags and `--json`
//! keys are the ones `hotpath bench …`, `hotpath hdfs bench filestatus` and `hotpath loadgen …`
//! had.

mod filestatus_kerberos;
mod ipc_large;
mod loadgen;
mod loopback_floor;
mod nm_launch;
mod rm_apps;
mod rm_apps_am;
mod rm_failover;
mod sasl;
mod shuffle;
mod storm;
mod storm_apps;
mod storm_apps_nodes;
mod storm_apps_sim;
mod storm_raw;
mod storm_sweep;

/// Counts allocations for the benches' allocation figures. It stays off until a bench
/// switches it on ([`alloc_counter::enable_process`]), after its timings: until then each
/// allocation pays one well-predicted relaxed load, so the timed paths (and the eager
/// baselines' many allocations) are not taxed. Process-wide: each bench counts on its only
/// running thread.
#[global_allocator]
static GLOBAL: alloc_counter::Counting = alloc_counter::Counting;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use hdfs_io::namenode::NameNodeClient;

#[derive(Parser)]
#[command(
    name = "hotpath-bench",
    version,
    about = "hotpath's measurements, each beside its baseline (not installed with hotpath)"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Large IPC responses (HADOOP-4797): our server vs a Java-style baseline vs a raw loopback
    /// copy, each in its own child process.
    IpcLarge(ipc_large::IpcLargeArgs),
    /// DataNode choice with the address cache (HADOOP-17222) vs a per-call URI parse.
    DnSelect(DnSelectArgs),
    /// NodeHeartbeatRequest handling (YARN-11878): ours vs an eager, Java-shaped baseline.
    Heartbeat(HeartbeatBenchArgs),
    /// NNThroughputBenchmark-style fileStatus: T threads call getFileInfo over N existing files
    /// DIR/f0 .. DIR/f{N-1} (the peer's `mkfiles DIR N` creates them); fs.defaultFS from
    /// core-site.xml.
    Filestatus(FilestatusArgs),
    /// HDFS-14277 on a Kerberized NameNode: fileStatus ops/s and client CPU per call of Hadoop's
    /// NNThroughputBenchmark, of Java's FileStatusDriver and of ours (`filestatus`), each in its
    /// own process, at hadoop.rpc.protection = authentication, integrity and privacy.
    FilestatusKerberos(filestatus_kerberos::Args),
    /// Load generators: `loadgen heartbeats` simulates N NodeManagers against a ResourceTracker.
    Loadgen(loadgen::LoadgenArgs),
    /// SASL (TOKEN, DIGEST-MD5) at authentication / integrity / privacy: connection setup ours vs
    /// Hadoop's Java client against the Java server, the security layer ours vs the JDK's, and
    /// calls over one connection to our server vs SIMPLE.
    Sasl(sasl::SaslArgs),
    /// Container launch (ContainerManagementProtocol to process running) on two hotpath agents
    /// beside two Java NodeManagers, same RM and AM: start RPC and start-to-running p50/p99,
    /// wall time for N containers, node CPU per launch, node RSS.
    NmLaunch(nm_launch::NmLaunchArgs),
    /// The heartbeat storm's raw reference server: answers every call with one fixed frame (the
    /// RM's heartbeat response) on the RM's transport; `loadgen heartbeats --target raw|both`
    /// starts it.
    StormRaw(storm_raw::RawArgs),
    /// The heartbeat storm at several node counts (one connection per node) against our RM,
    /// the raw reference server and the Java RM, repeated: a table with the spread, the runs as
    /// JSON, and an SVG chart of p99 and server CPU per heartbeat against node count.
    StormSweep(storm_sweep::SweepArgs),
    /// The heartbeat storm with applications running: N simulated NodeManagers whose every
    /// container the RM allocated to one of A simulated ApplicationMasters, with churn; ours
    /// beside the same RM with applications off and the raw server, and the Java RM.
    StormApps(storm_apps::StormAppsArgs),
    /// The kernel's floor under `rm-apps`' allocate figure: one request and response on loopback
    /// TCP by a blocking server thread, its CPU per call unpinned, on one CPU and across two.
    LoopbackFloor(loopback_floor::FloorArgs),
    /// `hotpath rm` running applications beside the Java RM, both on hotpath agents (issue 13):
    /// allocate CPU per call with outstanding asks, submit → AM running, containers of `true`
    /// allocated and launched per second.
    RmApps(rm_apps::RmAppsArgs),
    /// mapreduce_shuffle (issue 32): map outputs served by our service, by a raw sendfile
    /// server and by Hadoop's own ShuffleHandler (in a JVM), fetched with the Fetcher's request
    /// pattern: large partitions (GB/s, CPU per GB) and many small ones (map outputs/s, CPU per
    /// map output).
    Shuffle(shuffle::ShuffleArgs),
    /// RM HA (issue 34): time from the active RM's failover to the first heartbeat the new
    /// active answers, a hotpath agent beside a Java NodeManager, and their connection attempts
    /// per second meanwhile.
    RmFailover(rm_failover::RmFailoverArgs),
    /// Internal: one server of `shuffle` (ours or raw), run as a child process.
    #[command(name = "shuffle-server", hide = true)]
    ShuffleServer(shuffle::ServerArgs),
    /// Internal: the ApplicationMaster of `rm-apps`, launched by the RM in a container.
    #[command(name = "rm-apps-am", hide = true)]
    RmAppsAm(rm_apps_am::AmArgs),
    /// Internal: one server of `ipc-large`, run as a child process.
    #[command(name = "bench-ipc-server", hide = true)]
    BenchIpcServer(ipc_large::ServerChildArgs),
}

fn main() -> Result<()> {
    // First: `rm-apps-am` reports this as the moment its process ran.
    let started = std::time::SystemTime::now();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("HOTPATH_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    match Cli::parse().cmd {
        Cmd::IpcLarge(args) => ipc_large::run(args),
        Cmd::DnSelect(args) => dn_select(args),
        Cmd::Heartbeat(args) => heartbeat(args),
        Cmd::Filestatus(args) => filestatus(args),
        Cmd::FilestatusKerberos(args) => filestatus_kerberos::run(args),
        Cmd::Loadgen(args) => loadgen::run(args),
        Cmd::Sasl(args) => sasl::run(args),
        Cmd::NmLaunch(args) => nm_launch::run(args),
        Cmd::StormRaw(args) => storm_raw::run(args),
        Cmd::StormSweep(args) => storm_sweep::run(args),
        Cmd::StormApps(args) => storm_apps::run(args),
        Cmd::LoopbackFloor(args) => loopback_floor::run(args),
        Cmd::RmApps(args) => rm_apps::run(args),
        Cmd::Shuffle(args) => shuffle::run(args),
        Cmd::RmFailover(args) => rm_failover::run(args),
        Cmd::ShuffleServer(args) => shuffle::run_server(args),
        Cmd::RmAppsAm(args) => rm_apps_am::run(args, started),
        Cmd::BenchIpcServer(args) => ipc_large::run_server_child(args),
    }
}

/// Switches the counting allocator on and reads its process-wide total.
fn count_allocs() -> u64 {
    alloc_counter::enable_process();
    alloc_counter::process_allocs()
}

#[derive(Args)]
struct HeartbeatBenchArgs {
    /// Milliseconds per timed round (5 rounds per path, interleaved; the median is reported).
    #[arg(long, default_value_t = 300)]
    round_ms: u64,
    #[arg(long)]
    json: bool,
}

/// `heartbeat`: one NodeHeartbeatRequest with 50 container statuses — ours (opportunistic off
/// and on) beside the eager, Java-shaped baseline, in one run.
fn heartbeat(args: HeartbeatBenchArgs) -> Result<()> {
    let dir = tempfile::tempdir().context("a temp dir for the benches' completion logs")?;
    // Allocation counting is switched on only when the closure is first called, which is after
    // every timing: the timed paths, the eager baseline's ~1,000 allocations included, run
    // without the counter's (small) cost.
    let f = benches::rm_heartbeat::measure(
        dir.path(),
        Duration::from_millis(args.round_ms.max(10)),
        Some(&count_allocs),
    )?;
    if args.json {
        println!("{}", f.to_json());
        return Ok(());
    }
    let Some(allocs) = f.allocs_per_hb else {
        bail!("allocation count missing");
    };
    println!("heartbeat with 50 container statuses (decode + state update):");
    println!("  ours, opportunistic off   {:>10.0} ns", f.ours_ns);
    println!(
        "  ours, opportunistic on    {:>10.0} ns",
        f.ours_opportunistic_ns
    );
    println!("  eager baseline (Java-like){:>10.0} ns", f.eager_ns);
    println!("  ratio eager / ours        {:>10.1}x", f.ratio);
    println!("  allocations per heartbeat {allocs:>10}");
    Ok(())
}

#[derive(Args)]
struct DnSelectArgs {
    /// Calls per timed batch.
    #[arg(long, default_value_t = 10_000)]
    iterations: u64,
    /// Rounds per path (interleaved; the median is reported).
    #[arg(long, default_value_t = 15)]
    rounds: u32,
    #[arg(long)]
    json: bool,
}

/// `dn-select`: the DataNode choice for a 3-replica block with an address-cache hit, beside a
/// baseline doing what `NetUtils.createSocketAddr` does per call.
fn dn_select(args: DnSelectArgs) -> Result<()> {
    let r = benches::dn_select::measure(args.iterations, args.rounds, Some(count_allocs));
    if args.json {
        println!("{}", r.to_json());
    } else {
        println!(
            "dn-select (3 replicas, cache hit): ours {:.1} ns, baseline (URI parse + IP parse) {:.1} ns, ratio {:.1}x; allocations per choice: ours {}, baseline {}",
            r.ours_ns,
            r.baseline_ns,
            r.ratio,
            r.allocs.map_or("n/a".into(), |a| format!("{a}")),
            r.baseline_allocs.map_or("n/a".into(), |a| format!("{a}")),
        );
        println!(
            "  ours including the decode of the 3 DatanodeInfo messages: {:.1} ns",
            r.ours_with_decode_ns
        );
    }
    Ok(())
}

#[derive(Args)]
struct FilestatusArgs {
    /// Directory with core-site.xml / hdfs-site.xml (default: $HADOOP_CONF_DIR).
    #[arg(long)]
    conf_dir: Option<PathBuf>,
    /// Override a configuration key (`key=value`, repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    #[arg(long, default_value_t = 16)]
    threads: usize,
    #[arg(long, default_value_t = 10_000)]
    files: usize,
    #[arg(long, default_value = "/bench/filestatus")]
    dir: String,
    /// The files' name before their number: DIR/PREFIX0 .. DIR/PREFIX{N-1}.
    #[arg(long, default_value = "f")]
    prefix: String,
    /// Seconds to run.
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Seconds of calls before the measured ones (connections are opened then).
    #[arg(long, default_value_t = 0.0)]
    warmup: f64,
    /// Fixed offered rate in calls/s (all threads together); closed loop when absent.
    #[arg(long)]
    rate: Option<f64>,
    #[arg(long)]
    json: bool,
}

/// `filestatus`: the getFileInfo load against the NameNode of `fs.defaultFS`.
fn filestatus(args: FilestatusArgs) -> Result<()> {
    let conf = conf::Configuration::from_flags(args.conf_dir.as_deref(), &args.set)
        .context("reading the Hadoop configuration")?;
    let nn = NameNodeClient::from_conf(&conf)?;
    let paths: Vec<String> = (0..args.files)
        .map(|i| format!("{}/{}{i}", args.dir, args.prefix))
        .collect();
    let r = benches::filestatus::run_warm(
        &nn,
        &paths,
        args.threads,
        Duration::from_secs_f64(args.warmup.max(0.0)),
        Duration::from_secs_f64(args.duration),
        args.rate,
    )?;
    if args.json {
        println!("{}", r.to_json());
    } else {
        println!(
            "fileStatus: {} threads, {} files, {} calls in {:.1} s = {:.0} ops/s, client CPU {} per call, {} errors, {} missing",
            r.threads,
            r.files,
            r.ops,
            r.seconds,
            r.ops_per_sec,
            r.cpu_ns_per_op
                .map_or("n/a".into(), |ns| format!("{:.1} µs", ns / 1000.0)),
            r.errors,
            r.missing
        );
    }
    Ok(())
}
