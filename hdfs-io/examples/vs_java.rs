//! Our client against Java's on the same real MiniDFSCluster (peer-harness `hdfs` mode), each
//! in its own process for Java (the peer's drivers) and this process for ours:
//!
//! - `read`: a 256 MiB file written with 128 MiB blocks, read whole, runs alternated with
//!   Java's `FileSystem.open` read (`ReadDriver`, one unmeasured warm-up read in its JVM
//!   first); throughput and process CPU per GB.
//! - `filestatus`: getFileInfo over N files with T threads at a fixed offered rate, ours
//!   ([`hdfs_io::filestatus_bench`]) and Java's `FileStatusDriver`; client CPU per call.
//!
//! `cargo run --release -p hdfs-io --example vs_java -- [read|filestatus|all] [runs] [rate]`
//! Prints JSON lines. The NameNode and DataNodes share the machine: compare CPU, not only speed.

use hdfs_io::dfs::{DfsClient, DfsConfig};
use hdfs_io::filestatus_bench::{self, process_cpu_ns};
use hdfs_io::namenode::NameNodeClient;
use hdfs_io::topology::{LocalNode, RackMap};
use peer_harness::{Driver, Mode, Peer};
use std::io::Write;
use std::time::{Duration, Instant};

struct Count(u64);
impl Write for Count {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0 += b.len() as u64;
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let what = args.next().unwrap_or_else(|| "all".into());
    let runs: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(3);
    let rate: f64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(1000.0);
    let mut peer = Peer::start(Mode::Hdfs, &[]).expect("hdfs peer");
    let conf = conf::Configuration::load_dir(peer.conf_dir()).expect("conf");
    let nn = NameNodeClient::from_conf(&conf).expect("nn");
    let client = DfsClient::new(
        nn,
        DfsConfig::from_conf(&conf).expect("cfg"),
        LocalNode::default(),
        RackMap::default(),
        None,
    );

    if what == "read" || what == "all" {
        let len: u64 = 256 << 20;
        peer.command(&format!("write /vs/big {len} {}", 128u64 << 20))
            .expect("write");
        // warm the page cache and both clients
        client
            .read("/vs/big", 0, None, &mut Count(0))
            .expect("warm read");
        peer.run_driver(Driver::Read, &["--path", "/vs/big", "--runs", "1"])
            .expect("warm java");
        for run in 0..runs {
            let c0 = process_cpu_ns().unwrap_or(0);
            let t = Instant::now();
            let mut sink = Count(0);
            client.read("/vs/big", 0, None, &mut sink).expect("read");
            let secs = t.elapsed().as_secs_f64();
            let cpu = (process_cpu_ns().unwrap_or(0) - c0) as f64 / 1e9;
            let gb = sink.0 as f64 / 1e9;
            println!(
                "{{\"client\":\"hotpath\",\"run\":{run},\"bytes\":{},\"gb_per_s\":{:.3},\"cpu_s\":{cpu:.3},\"cpu_s_per_gb\":{:.3}}}",
                sink.0,
                gb / secs,
                cpu / gb
            );
            let j = peer
                .run_driver(
                    Driver::Read,
                    &["--path", "/vs/big", "--warmup-runs", "1", "--runs", "1"],
                )
                .expect("java read");
            println!(
                "{{\"client\":\"java\",\"run\":{run},\"bytes\":{},\"gb_per_s\":{:.3},\"cpu_s\":{:.3},\"cpu_s_per_gb\":{:.3}}}",
                j["bytes"], j["gb_per_s"].as_f64().unwrap_or(0.0), j["cpu_s"].as_f64().unwrap_or(0.0),
                j["cpu_s_per_gb"].as_f64().unwrap_or(0.0)
            );
        }
    }
    if what == "filestatus" || what == "all" {
        let files = 2000;
        peer.command(&format!("mkfiles /vs/fs {files}"))
            .expect("mkfiles");
        let paths: Vec<String> = (0..files).map(|i| format!("/vs/fs/f{i}")).collect();
        for run in 0..runs {
            let r = filestatus_bench::run(
                client.namenode(),
                &paths,
                16,
                Duration::from_secs(10),
                Some(rate),
            )
            .expect("ours");
            println!(
                "{{\"client\":\"hotpath\",\"run\":{run},\"filestatus\":{}}}",
                r.to_json()
            );
            let j = peer
                .run_driver(
                    Driver::FileStatus,
                    &[
                        "--threads",
                        "16",
                        "--files",
                        &files.to_string(),
                        "--dir",
                        "/vs/fs",
                        "--rate",
                        &rate.to_string(),
                        "--duration",
                        "10",
                        "--warmup",
                        "2",
                    ],
                )
                .expect("java filestatus");
            println!("{{\"client\":\"java\",\"run\":{run},\"filestatus\":{j}}}");
        }
    }
}
