//! `hotpath hdfs …` and `hotpath bench dn-select`: thin wiring of `hdfs-io` to the command line.
//! Addresses come from `fs.defaultFS` / `dfs.*` in `$HADOOP_CONF_DIR` (or `--conf-dir`).

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use hdfs_io::dfs::DfsClient;
use hdfs_io::namenode::NameNodeClient;

#[derive(Args)]
pub struct HdfsArgs {
    /// Directory with core-site.xml / hdfs-site.xml (default: $HADOOP_CONF_DIR).
    #[arg(long, global = true)]
    conf_dir: Option<PathBuf>,
    /// Override a configuration key (`key=value`, repeatable).
    #[arg(long = "set", global = true, value_name = "KEY=VALUE")]
    set: Vec<String>,
    #[command(subcommand)]
    cmd: HdfsCmd,
}

#[derive(Subcommand)]
enum HdfsCmd {
    /// getFileInfo of PATH.
    Stat {
        path: String,
        #[arg(long)]
        json: bool,
    },
    /// Read PATH (or a range of it) to standard output, checksums verified.
    Cat {
        path: String,
        #[arg(long, default_value_t = 0)]
        offset: u64,
        #[arg(long)]
        length: Option<u64>,
    },
    /// Benchmarks against the NameNode.
    Bench {
        #[command(subcommand)]
        bench: HdfsBench,
    },
}

#[derive(Subcommand)]
enum HdfsBench {
    /// NNThroughputBenchmark-style fileStatus: T threads call getFileInfo over N existing files
    /// DIR/f0 .. DIR/f{N-1} (the peer's `mkfiles DIR N` creates them).
    Filestatus {
        #[arg(long, default_value_t = 16)]
        threads: usize,
        #[arg(long, default_value_t = 10_000)]
        files: usize,
        #[arg(long, default_value = "/bench/filestatus")]
        dir: String,
        /// Seconds to run.
        #[arg(long, default_value_t = 10.0)]
        duration: f64,
        /// Fixed offered rate in calls/s (all threads together); closed loop when absent.
        #[arg(long)]
        rate: Option<f64>,
        #[arg(long)]
        json: bool,
    },
}

pub fn run(args: HdfsArgs) -> Result<()> {
    let conf = conf::Configuration::from_flags(args.conf_dir.as_deref(), &args.set)
        .context("reading the Hadoop configuration")?;
    match args.cmd {
        HdfsCmd::Stat { path, json } => {
            let client = DfsClient::from_conf(&conf)?;
            let st = client.stat(&path)?;
            if json {
                let v = serde_json::json!({
                    "path": path,
                    "type": hdfs_io::dfs::type_name(st.file_type),
                    "length": st.length,
                    "permission": format!("{:o}", st.permission),
                    "owner": st.owner,
                    "group": st.group,
                    "modification_time": st.modification_time,
                    "access_time": st.access_time,
                    "replication": st.block_replication,
                    "blocksize": st.blocksize,
                    "file_id": st.file_id,
                    "children": st.children_num,
                });
                println!("{v}");
            } else {
                println!(
                    "{} {} {} {} {:>12} {} {}",
                    st.mode_string(),
                    st.block_replication,
                    st.owner,
                    st.group,
                    st.length,
                    st.modification_time,
                    path
                );
            }
        }
        HdfsCmd::Cat {
            path,
            offset,
            length,
        } => {
            let client = DfsClient::from_conf(&conf)?;
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::with_capacity(1 << 20, stdout.lock());
            let stats = client.read(&path, offset, length, &mut out)?;
            out.flush()?;
            tracing::debug!(?stats, "read done");
        }
        HdfsCmd::Bench {
            bench:
                HdfsBench::Filestatus {
                    threads,
                    files,
                    dir,
                    duration,
                    rate,
                    json,
                },
        } => {
            let nn = NameNodeClient::from_conf(&conf)?;
            let paths: Vec<String> = (0..files).map(|i| format!("{dir}/f{i}")).collect();
            let r = hdfs_io::filestatus_bench::run(
                &nn,
                &paths,
                threads,
                Duration::from_secs_f64(duration),
                rate,
            )?;
            if json {
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
        }
    }
    Ok(())
}

#[derive(Args)]
pub struct DnSelectArgs {
    /// Calls per timed batch.
    #[arg(long, default_value_t = 10_000)]
    iterations: u64,
    /// Rounds per path (interleaved; the median is reported).
    #[arg(long, default_value_t = 15)]
    rounds: u32,
    #[arg(long)]
    json: bool,
}

/// `hotpath bench dn-select`: the DataNode choice for a 3-replica block with an address-cache
/// hit, beside a baseline doing what `NetUtils.createSocketAddr` does per call.
pub fn bench_dn_select(args: DnSelectArgs) -> Result<()> {
    let r = hdfs_io::measure::measure(
        args.iterations,
        args.rounds,
        Some(|| {
            crate::alloc_count::enable();
            crate::alloc_count::allocs()
        }),
    );
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
