//! A `hotpath` daemon (`agent`, `rm`) as a child process of a test, from its `READY {json}`
//! line to SIGTERM on drop; and the `--set`s that put an agent on a loopback address with its
//! own directories. For the tests that run whole clusters of child processes; the `hotpath`
//! binary is an argument (`CARGO_BIN_EXE_hotpath` in the agent's tests).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// `--set key=value` for each pair.
pub fn set_args(kvs: &[(&str, String)]) -> Vec<String> {
    kvs.iter()
        .flat_map(|(k, v)| ["--set".to_string(), format!("{k}={v}")])
        .collect()
}

/// A child process that printed `READY {json}`; SIGTERM on drop, SIGKILL 10 s later.
pub struct Daemon {
    pub child: Child,
    pub ready: Value,
    dir: tempfile::TempDir,
}

impl Daemon {
    /// Starts `cmd` (stdout piped for the READY line, stderr inherited) and waits for READY.
    pub fn spawn(mut cmd: Command, dir: tempfile::TempDir) -> Daemon {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let ready: Value = serde_json::from_str(
            line.trim()
                .strip_prefix("READY ")
                .unwrap_or_else(|| panic!("no READY line: {line:?}")),
        )
        .unwrap();
        Daemon { child, ready, dir }
    }

    /// Its own directory (removed on drop).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A READY string field.
    pub fn field(&self, k: &str) -> String {
        self.ready[k]
            .as_str()
            .unwrap_or_else(|| panic!("{k} in {}", self.ready))
            .to_string()
    }

    /// SIGKILL, and reaped.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child's pid.
        #[allow(unsafe_code)]
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `hotpath agent` on `ip` (every port ephemeral) registering with the ResourceTracker `rt`:
/// 4 GiB and 8 vcores, its local and log dirs and control socket in a fresh temp dir.
pub fn start_agent(hotpath: &Path, rt: &str, ip: &str) -> Daemon {
    let (cmd, dir) = agent_command(hotpath, rt, ip, &[]);
    Daemon::spawn(cmd, dir)
}

/// The command [`start_agent`] runs, with `extra` `--set`s after its own, and the temp dir
/// that holds the agent's dirs (to pass to [`Daemon::spawn`]).
pub fn agent_command(
    hotpath: &Path,
    rt: &str,
    ip: &str,
    extra: &[(&str, String)],
) -> (Command, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut cmd = Command::new(hotpath);
    cmd.arg("agent").arg("--ready-line");
    cmd.args(set_args(&[
        ("yarn.resourcemanager.resource-tracker.address", rt.into()),
        ("yarn.nodemanager.address", format!("{ip}:0")),
        ("yarn.nodemanager.webapp.address", format!("{ip}:0")),
        ("hotpath.agent.ipc.address", format!("{ip}:0")),
        (
            "yarn.nodemanager.local-dirs",
            d.join("local").display().to_string(),
        ),
        (
            "yarn.nodemanager.log-dirs",
            d.join("logs").display().to_string(),
        ),
        ("yarn.nodemanager.resource.memory-mb", "4096".into()),
        ("yarn.nodemanager.resource.cpu-vcores", "8".into()),
        (
            "hotpath.agent.control-socket",
            d.join("agent.sock").display().to_string(),
        ),
        (
            "yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage",
            "100".into(),
        ),
    ]));
    cmd.args(set_args(extra));
    (cmd, dir)
}

/// Containers RUNNING on an agent started by [`start_agent`], from its control socket.
pub fn agent_running(hotpath: &Path, a: &Daemon) -> u64 {
    let out = Command::new(hotpath)
        .args(["container", "--socket"])
        .arg(a.dir().join("agent.sock"))
        .arg("status")
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    v["containers"]["running"].as_u64().unwrap_or(0)
}

/// `hotpath rm` on the given ResourceTracker, client and scheduler addresses (`HOST:0` for an
/// ephemeral port), NodeManager heartbeats every 200 ms, its completion log in a fresh temp
/// dir, and `extra` `--set`s after those.
pub fn start_rm_daemon(
    hotpath: &Path,
    rt: &str,
    client: &str,
    scheduler: &str,
    extra: &[(&str, String)],
) -> Daemon {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(hotpath);
    cmd.arg("rm")
        .arg("--ready-line")
        .arg("--metrics-port")
        .arg("0");
    cmd.args(set_args(&[
        ("yarn.resourcemanager.resource-tracker.address", rt.into()),
        ("yarn.resourcemanager.address", client.into()),
        ("yarn.resourcemanager.scheduler.address", scheduler.into()),
        ("yarn.resourcemanager.admin.address", "127.0.0.1:0".into()),
        (
            "yarn.resourcemanager.nodemanagers.heartbeat-interval-ms",
            "200".into(),
        ),
        (
            "hotpath.rm.completion-log.dir",
            dir.path().join("log").display().to_string(),
        ),
    ]));
    cmd.args(set_args(extra));
    Daemon::spawn(cmd, dir)
}

/// Processes whose command line mentions `needle` (from /proc).
pub fn processes_with(needle: &str) -> usize {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return 0;
    };
    rd.flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .filter(|c| String::from_utf8_lossy(c).contains(needle))
        .count()
}
