//! The Java measuring drivers, each in its own JVM so that its CPU time is its own.

use std::io::Read;
use std::path::Path;
use std::process::Stdio;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::build::{ensure_built, Build};
use crate::error::{tail, PeerError};

/// Which driver to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Driver {
    /// `FileStatusDriver --threads T --files N --dir D [--rate OPS_PER_S] [--duration S]
    /// [--warmup S]`: `FileSystem.getFileStatus` over `D/f0..f<N-1>` (made by `mkfiles D N`).
    /// Result: `ops`, `ops_per_s`, `cpu_s`, `cpu_us_per_call`, `latency_us{p50,p90,p99,p999,max}`.
    FileStatus,
    /// `ReadDriver --path P [--runs N] [--warmup-runs W] [--buffer BYTES] [--sha256 true]
    /// [--verify-checksum false]`: sequential `FileSystem.open` reads. Result: `bytes`,
    /// `seconds`, `gb_per_s` (10^9 bytes/s), `gbit_per_s`, `cpu_s`, `cpu_s_per_gb`, `sha256`.
    Read,
}

impl Driver {
    pub fn main_class(self) -> &'static str {
        match self {
            Driver::FileStatus => "hotpath.peer.FileStatusDriver",
            Driver::Read => "hotpath.peer.ReadDriver",
        }
    }
}

/// No driver run may take longer than this.
pub const DRIVER_TIMEOUT: Duration = Duration::from_secs(900);

/// Runs `driver` with `args` against the client configuration in `conf_dir` and returns the
/// JSON line it prints. A non-zero exit or a missing result is a [`PeerError::Driver`].
pub fn run(
    build: &Build,
    conf_dir: &Path,
    driver: Driver,
    args: &[&str],
) -> Result<Value, PeerError> {
    let stderr_file = tempfile::NamedTempFile::new()
        .map_err(|e| PeerError::io("create the driver's stderr file", e))?;
    let stderr = stderr_file
        .reopen()
        .map_err(|e| PeerError::io("open the driver's stderr file", e))?;
    let mut child = build
        .java_command(driver.main_class())
        .args(args)
        .arg("--conf-dir")
        .arg(conf_dir)
        .env("HADOOP_CONF_DIR", conf_dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .map_err(|e| PeerError::io(format!("start {:?}", build.java), e))?;
    let mut stdout = child.stdout.take();
    let reader = thread::spawn(move || {
        let mut s = String::new();
        if let Some(out) = stdout.as_mut() {
            let _ = out.read_to_string(&mut s);
        }
        s
    });
    let deadline = Instant::now() + DRIVER_TIMEOUT;
    let (ok, status) = loop {
        match child.try_wait() {
            Ok(Some(s)) => break (s.success(), s.to_string()),
            Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(50)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                break (false, format!("killed after {DRIVER_TIMEOUT:?}"));
            }
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                break (false, format!("wait failed: {e}"));
            }
        }
    };
    let out = reader.join().unwrap_or_default();
    let fail = |stdout: &str| PeerError::Driver {
        driver: driver.main_class().to_owned(),
        status: status.clone(),
        stdout: stdout.to_owned(),
        stderr: tail(stderr_file.path(), 40),
    };
    if !ok {
        return Err(fail(&out));
    }
    let last = out
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    serde_json::from_str(last).map_err(|_| fail(&out))
}

/// [`run`] against any conf dir, building the peer first if needed.
pub fn run_with_conf(conf_dir: &Path, driver: Driver, args: &[&str]) -> Result<Value, PeerError> {
    let build = ensure_built()?;
    run(&build, conf_dir, driver, args)
}
