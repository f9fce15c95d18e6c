//! The `hotpath-bench filestatus` load: NNThroughputBenchmark's `-op fileStatus` shape (T threads, each
//! calling getFileInfo over a list of existing paths) through [`NameNodeClient`], closed loop
//! or at a fixed offered rate, reporting ops/s and this process's CPU per call.
//!
//! CPU comes from `/proc/self/stat` (utime + stime, USER_HZ = 100 ticks per second on Linux),
//! so runs should last seconds. The status is read in place ([`FileStatusView`]); nothing is
//! allocated per call beyond what `ipc::client` does.

use hdfs_io::file_status::FileStatusView;
use hdfs_io::namenode::NameNodeClient;
use hdfs_io::Error;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Result of [`run`].
#[derive(Debug, Clone, PartialEq)]
pub struct FileStatusReport {
    pub threads: usize,
    pub files: usize,
    pub ops: u64,
    pub errors: u64,
    /// Paths that did not exist.
    pub missing: u64,
    pub seconds: f64,
    pub ops_per_sec: f64,
    /// Process CPU (user + system) per call, ns.
    pub cpu_ns_per_op: Option<f64>,
    /// Offered rate, if paced.
    pub offered_rate: Option<f64>,
}

impl FileStatusReport {
    /// One JSON object.
    pub fn to_json(&self) -> String {
        let opt = |v: Option<f64>| v.map_or("null".to_string(), |v| format!("{v:.1}"));
        format!(
            "{{\"threads\":{},\"files\":{},\"ops\":{},\"errors\":{},\"missing\":{},\"seconds\":{:.3},\"ops_per_sec\":{:.1},\"cpu_ns_per_op\":{},\"offered_rate\":{}}}",
            self.threads, self.files, self.ops, self.errors, self.missing, self.seconds, self.ops_per_sec,
            opt(self.cpu_ns_per_op), opt(self.offered_rate)
        )
    }
}

/// This process's CPU time (user + system) in ns, from `/proc/self/stat`.
pub fn process_cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/stat").ok()?;
    // fields after the parenthesised command name; utime and stime are fields 14 and 15
    let rest = &s[s.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    Some((utime + stime) * 10_000_000)
}

/// Runs `threads` threads for `duration`, each walking `paths` (thread `t` starts at `t`),
/// calling getFileInfo. With `rate` (calls per second, all threads together) each thread paces
/// its calls; otherwise each calls as fast as it can.
pub fn run(
    nn: &NameNodeClient,
    paths: &[String],
    threads: usize,
    duration: Duration,
    rate: Option<f64>,
) -> Result<FileStatusReport, Error> {
    run_warm(nn, paths, threads, Duration::ZERO, duration, rate)
}

/// [`run`] after `warmup`: the threads call for `warmup` first (each opens its connection then,
/// Kerberos and SASL handshakes included), and the calls, CPU and time of `duration` after it
/// are reported. Errors and missing paths count over both.
pub fn run_warm(
    nn: &NameNodeClient,
    paths: &[String],
    threads: usize,
    warmup: Duration,
    duration: Duration,
    rate: Option<f64>,
) -> Result<FileStatusReport, Error> {
    if paths.is_empty() {
        return Err(Error::Config("no paths to stat".into()));
    }
    let threads = threads.max(1);
    // one call first: connection, roles and msync out of the measurement
    nn.get_file_info(&paths[0])?;
    let ops = AtomicU64::new(0);
    let errors = AtomicU64::new(0);
    let missing = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let mut cpu0 = None;
    let mut t0 = Instant::now();
    let mut ops0 = 0;
    std::thread::scope(|s| {
        for t in 0..threads {
            let (ops, errors, missing, stop) = (&ops, &errors, &missing, &stop);
            s.spawn(move || {
                let mut scratch = Vec::with_capacity(256);
                let mut i = t % paths.len();
                let interval = rate.map(|r| Duration::from_secs_f64(threads as f64 / r.max(1e-3)));
                let mut next = Instant::now();
                while !stop.load(Ordering::Relaxed) {
                    if let Some(iv) = interval {
                        let now = Instant::now();
                        if next > now {
                            std::thread::sleep(next - now);
                        }
                        next += iv;
                    }
                    match nn.get_file_info_with(
                        &paths[i],
                        &mut scratch,
                        |v: &FileStatusView<'_>| v.length,
                    ) {
                        Ok(Some(_)) => {}
                        Ok(None) => {
                            missing.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(_) => {
                            errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    ops.fetch_add(1, Ordering::Relaxed);
                    i = (i + threads) % paths.len();
                }
            });
        }
        std::thread::sleep(warmup);
        ops0 = ops.load(Ordering::Relaxed);
        cpu0 = process_cpu_ns();
        t0 = Instant::now();
        std::thread::sleep(duration);
        stop.store(true, Ordering::Relaxed);
    });
    let secs = t0.elapsed().as_secs_f64();
    let cpu = match (cpu0, process_cpu_ns()) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a) as f64),
        _ => None,
    };
    let ops = ops.load(Ordering::Relaxed) - ops0;
    Ok(FileStatusReport {
        threads,
        files: paths.len(),
        ops,
        errors: errors.load(Ordering::Relaxed),
        missing: missing.load(Ordering::Relaxed),
        seconds: secs,
        ops_per_sec: ops as f64 / secs,
        cpu_ns_per_op: cpu.filter(|_| ops > 0).map(|c| c / ops as f64),
        offered_rate: rate,
    })
}
