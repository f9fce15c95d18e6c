//! Node health, as Java's NodeHealthCheckerService judges it: the local dirs (space and
//! writability, like `LocalDirsHandlerService`) and the health script, if one is configured
//! (`NodeHealthScriptRunner`: a line starting with `ERROR` or a timeout is unhealthy; a
//! non-zero exit status alone is not).
//!
//! [`HealthChecker::poll`] is non-blocking: the script runs as a child process and is
//! collected on a later poll, so the housekeeping thread never waits for it.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::wire::NodeHealth;

/// Health-check settings.
#[derive(Debug, Clone)]
pub struct HealthConfig {
    /// `yarn.nodemanager.local-dirs`.
    pub local_dirs: Vec<PathBuf>,
    /// `yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage`.
    pub max_utilization_percent: f64,
    /// `yarn.nodemanager.disk-health-checker.min-free-space-per-disk-mb`.
    pub min_free_mb: u64,
    /// `yarn.nodemanager.disk-health-checker.interval-ms`.
    pub disk_interval: Duration,
    /// `yarn.nodemanager.health-checker.script.path` (`None`: no script).
    pub script: Option<PathBuf>,
    pub script_args: Vec<String>,
    /// `yarn.nodemanager.health-checker.interval-ms`.
    pub script_interval: Duration,
    /// `yarn.nodemanager.health-checker.script.timeout-ms`.
    pub script_timeout: Duration,
}

struct Running {
    child: Child,
    started: Instant,
}

/// The checker (see the module docs).
pub struct HealthChecker {
    cfg: HealthConfig,
    next_disk: Option<Instant>,
    next_script: Option<Instant>,
    running: Option<Running>,
    disk_report: Option<String>,
    script_report: Option<String>,
}

/// What one local dir check found (`None`: good).
pub fn check_dir(dir: &std::path::Path, max_util: f64, min_free_mb: u64) -> Option<String> {
    if let Err(e) = std::fs::create_dir_all(dir) {
        return Some(format!("{}: cannot create: {e}", dir.display()));
    }
    let probe = dir.join(format!(".hotpath-health-{}", std::process::id()));
    let w = std::fs::File::create(&probe).and_then(|mut f| f.write_all(b"ok"));
    let _ = std::fs::remove_file(&probe);
    if let Err(e) = w {
        return Some(format!("{}: not writable: {e}", dir.display()));
    }
    match fs4::statvfs(dir) {
        Ok(st) => {
            let total = st.total_space().max(1);
            let used_pct = 100.0 * (total - st.available_space().min(total)) as f64 / total as f64;
            if used_pct > max_util {
                return Some(format!(
                    "{}: used space above threshold of {max_util}% ({used_pct:.1}%)",
                    dir.display()
                ));
            }
            if st.available_space() / (1024 * 1024) < min_free_mb {
                return Some(format!(
                    "{}: free space below {min_free_mb} MB",
                    dir.display()
                ));
            }
            None
        }
        Err(e) => Some(format!("{}: statvfs: {e}", dir.display())),
    }
}

impl HealthChecker {
    pub fn new(cfg: HealthConfig) -> Self {
        Self {
            cfg,
            next_disk: None,
            next_script: None,
            running: None,
            disk_report: None,
            script_report: None,
        }
    }

    /// Runs what is due; returns the health when it changed or was re-checked.
    pub fn poll(&mut self, now: Instant, wall_ms: i64) -> Option<NodeHealth> {
        let mut checked = false;
        if self.next_disk.is_none_or(|t| now >= t) {
            self.next_disk = Some(now + self.cfg.disk_interval);
            let bad: Vec<String> = self
                .cfg
                .local_dirs
                .iter()
                .filter_map(|d| {
                    check_dir(d, self.cfg.max_utilization_percent, self.cfg.min_free_mb)
                })
                .collect();
            self.disk_report = (!bad.is_empty()).then(|| {
                format!(
                    "{}/{} local-dirs are bad: {}",
                    bad.len(),
                    self.cfg.local_dirs.len(),
                    bad.join("; ")
                )
            });
            checked = true;
        }
        if let Some(script) = self.cfg.script.clone() {
            if let Some(r) = &mut self.running {
                match r.child.try_wait() {
                    Ok(Some(_)) => {
                        let r = self.running.take().expect("checked above");
                        let out = r.child.wait_with_output().ok();
                        let text = out
                            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                            .unwrap_or_default();
                        self.script_report = text
                            .lines()
                            .find(|l| l.starts_with("ERROR"))
                            .map(|l| l.chars().take(1024).collect());
                        checked = true;
                    }
                    Ok(None) if now.duration_since(r.started) > self.cfg.script_timeout => {
                        let _ = r.child.kill();
                        let _ = r.child.wait();
                        self.running = None;
                        self.script_report = Some("Node health script timed out".into());
                        checked = true;
                    }
                    Ok(None) => {}
                    Err(e) => {
                        self.running = None;
                        self.script_report = Some(format!("health script: {e}"));
                        checked = true;
                    }
                }
            } else if self.next_script.is_none_or(|t| now >= t) {
                self.next_script = Some(now + self.cfg.script_interval);
                match Command::new(&script)
                    .args(&self.cfg.script_args)
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::null())
                    .spawn()
                {
                    Ok(child) => {
                        self.running = Some(Running {
                            child,
                            started: now,
                        })
                    }
                    Err(e) => {
                        self.script_report =
                            Some(format!("health script {}: {e}", script.display()));
                        checked = true;
                    }
                }
            }
        }
        checked.then(|| self.health(wall_ms))
    }

    /// The current verdict.
    pub fn health(&self, wall_ms: i64) -> NodeHealth {
        let reports: Vec<&str> = [&self.script_report, &self.disk_report]
            .into_iter()
            .flatten()
            .map(String::as_str)
            .collect();
        NodeHealth {
            healthy: reports.is_empty(),
            report: reports.join(" ; "),
            last_report_wall_ms: wall_ms,
        }
    }
}

impl Drop for HealthChecker {
    fn drop(&mut self) {
        if let Some(r) = &mut self.running {
            let _ = r.child.kill();
            let _ = r.child.wait();
        }
    }
}
