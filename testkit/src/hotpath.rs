//! `hotpath rm` as a child process of a test, and one sample read from a Prometheus `/metrics`
//! endpoint. The `hotpath` binary is an argument: cargo names it (`CARGO_BIN_EXE_hotpath`) only
//! in the agent's own tests; other packages' tests find it with [`hotpath_beside`].

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::Value;

/// A running `hotpath rm`, killed (if still running) when dropped.
pub struct RmChild {
    pub child: Child,
    /// The ResourceTracker address from its READY line.
    pub tracker: String,
    /// The `/metrics` address from its READY line.
    pub metrics: String,
    /// The client (ApplicationClientProtocol) and scheduler addresses from its READY line.
    pub client: String,
    pub scheduler: String,
    /// The admin (`yarn rmadmin`) address from its READY line.
    pub admin: String,
    pub pid: u32,
}

impl Drop for RmChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `hotpath` binary for another package's tests: `$TESTKIT_HOTPATH` if set (`scripts/test` sets
/// it to the one its `cargo test --workspace` just built, with the same features), else the one
/// beside `exe` (another binary of the workspace, e.g. the calling test's
/// `CARGO_BIN_EXE_hotpath-bench`) in the same target directory, brought up to date once per
/// test process by `cargo build -p agent --bin hotpath`. That build resolves features without
/// the tests' dev-dependencies and the `interop` features, so under `cargo test --workspace` it
/// would rebuild the workspace's libraries and the `hotpath` the agent's tests run.
pub fn hotpath_beside(exe: &Path) -> PathBuf {
    if let Some(bin) = std::env::var_os("TESTKIT_HOTPATH") {
        return bin.into();
    }
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let profile_dir = exe.parent().expect("target/<profile>");
            let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
            cmd.args([
                "build",
                "--quiet",
                "-p",
                "agent",
                "--bin",
                "hotpath",
                "--target-dir",
            ])
            .arg(profile_dir.parent().expect("the target directory"));
            if profile_dir.file_name().is_some_and(|n| n == "release") {
                cmd.arg("--release");
            }
            let status = cmd.status().expect("running cargo build for hotpath");
            assert!(
                status.success(),
                "cargo build -p agent --bin hotpath failed"
            );
            profile_dir.join("hotpath")
        })
        .clone()
}

/// Starts `hotpath rm` (the binary `hotpath`) on 127.0.0.1 port 0 (the resource tracker, client and scheduler
/// addresses) with `--metrics-port 0 --ready-line`, its completion
/// log under `dir`, each of `sets` as `--set key=value`, `HOTPATH_LOG=log` and stderr going to
/// `stderr`; returns once it printed its READY line.
pub fn start_rm(hotpath: &Path, dir: &Path, sets: &[String], log: &str, stderr: Stdio) -> RmChild {
    let mut cmd = Command::new(hotpath);
    cmd.args([
        "rm",
        "--address",
        "127.0.0.1:0",
        "--metrics-port",
        "0",
        "--ready-line",
    ])
    .arg("--set")
    .arg(format!(
        "hotpath.rm.completion-log.dir={}",
        dir.join("completion-log").display()
    ))
    // The client and scheduler protocols on free ports too (their defaults are 8032, 8030).
    .args(["--set", "yarn.resourcemanager.address=127.0.0.1:0"])
    .args([
        "--set",
        "yarn.resourcemanager.scheduler.address=127.0.0.1:0",
    ])
    .args(["--set", "yarn.resourcemanager.admin.address=127.0.0.1:0"]);
    for s in sets {
        cmd.arg("--set").arg(s);
    }
    let mut child = cmd
        .env("HOTPATH_LOG", log)
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("starting hotpath rm");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let ready: Value = serde_json::from_str(
        line.trim()
            .strip_prefix("READY ")
            .unwrap_or_else(|| panic!("hotpath rm printed no READY line: {line:?}")),
    )
    .unwrap();
    RmChild {
        child,
        tracker: ready["resource_tracker"].as_str().unwrap().into(),
        metrics: ready["metrics"].as_str().unwrap().into(),
        client: ready["client"].as_str().unwrap_or_default().into(),
        scheduler: ready["scheduler"].as_str().unwrap_or_default().into(),
        admin: ready["admin"].as_str().unwrap_or_default().into(),
        pid: ready["pid"].as_u64().unwrap() as u32,
    }
}

/// The sample `name` (with its labels, if any, exactly as exposed) from `/metrics` at `addr`.
pub fn metric(addr: &str, name: &str) -> f64 {
    let mut s = TcpStream::connect(addr).expect("connecting to /metrics");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(s, "GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text.lines()
        .find_map(|l| {
            let (k, v) = l.split_once(' ')?;
            (k == name).then(|| v.trim().parse::<f64>().ok())?
        })
        .unwrap_or_else(|| panic!("{name} missing from /metrics:\n{text}"))
}
