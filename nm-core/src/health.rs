//! Node health, as Java's NodeHealthCheckerService judges it: the local and log dirs
//! ([`crate::disks`], `LocalDirsHandlerService`) and the health script, if one is configured
//! (`NodeHealthScriptRunner`: a line starting with `ERROR` or a timeout is unhealthy; a
//! non-zero exit status alone is not). The report joins the non-empty reports with `;`
//! (dirs first, then the script), and may be non-empty on a healthy node (one full dir of
//! two).
//!
//! [`HealthChecker::poll`] is non-blocking: the script runs as a child process and is
//! collected on a later poll, so the housekeeping thread never waits for it; the dirs are
//! checked every `disk-health-checker.interval-ms` (a statvfs and an access check per dir).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::disks::{CheckOutcome, DirsHandler, DiskLimits, DiskProbe};
use crate::wire::NodeHealth;

/// The longest script output kept as the report (Java keeps all of it; the heartbeat carries
/// it, so the agent cuts it).
pub const MAX_SCRIPT_REPORT: usize = 16 * 1024;

/// Health-check settings.
#[derive(Debug, Clone)]
pub struct HealthConfig {
    /// `yarn.nodemanager.local-dirs`, validated ([`crate::disks::validate_dir`]).
    pub local_dirs: Vec<PathBuf>,
    /// `yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage`.
    pub max_utilization_percent: f32,
    /// `…disk-utilization-watermark-low-per-disk-percentage` (`None`: the maximum).
    pub low_utilization_percent: Option<f32>,
    /// `yarn.nodemanager.disk-health-checker.min-free-space-per-disk-mb`.
    pub min_free_mb: i64,
    /// `…min-free-space-per-disk-watermark-high-mb` (`None`: the minimum).
    pub high_free_mb: Option<i64>,
    /// `…disk-utilization-threshold.enabled`, `…disk-free-space-threshold.enabled`.
    pub utilization_check: bool,
    pub free_space_check: bool,
    /// `yarn.nodemanager.disk-health-checker.min-healthy-disks`.
    pub min_healthy_disks: f32,
    /// `yarn.nodemanager.disk-health-checker.enable`: false checks once at start (bad dirs
    /// are still left out) and always reports healthy.
    pub disk_check_enabled: bool,
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

impl Default for HealthConfig {
    /// Hadoop's defaults, no dirs, no script.
    fn default() -> Self {
        HealthConfig {
            local_dirs: Vec::new(),
            max_utilization_percent: 90.0,
            low_utilization_percent: None,
            min_free_mb: 0,
            high_free_mb: None,
            utilization_check: true,
            free_space_check: true,
            min_healthy_disks: 0.25,
            disk_check_enabled: true,
            disk_interval: Duration::from_millis(120_000),
            script: None,
            script_args: Vec::new(),
            script_interval: Duration::from_millis(600_000),
            script_timeout: Duration::from_millis(1_200_000),
        }
    }
}

impl HealthConfig {
    /// The thresholds of [`crate::disks`].
    pub fn limits(&self) -> DiskLimits {
        let mut l = DiskLimits::new(
            self.max_utilization_percent,
            self.low_utilization_percent,
            self.min_free_mb,
            self.high_free_mb,
        );
        l.utilization_enabled = self.utilization_check;
        l.free_space_enabled = self.free_space_check;
        l
    }
}

struct Running {
    child: Child,
    started: Instant,
}

/// What changed in the dirs at the last check (for logs and the dirs' users).
#[derive(Debug, Clone, Default)]
pub struct DirsChange {
    pub local: CheckOutcome,
    pub log: CheckOutcome,
}

impl DirsChange {
    /// A dir left or rejoined the good ones.
    pub fn changed(&self) -> bool {
        self.local.changed || self.log.changed
    }
}

/// The checker (see the module docs).
pub struct HealthChecker {
    cfg: HealthConfig,
    probe: Box<dyn DiskProbe + Send>,
    dirs: DirsHandler,
    next_disk: Option<Instant>,
    next_script: Option<Instant>,
    running: Option<Running>,
    script_report: Option<String>,
    script_report_ms: i64,
    last_change: Option<DirsChange>,
}

fn dir_strings(dirs: &[PathBuf]) -> Vec<String> {
    dirs.iter()
        .map(|d| d.to_string_lossy().into_owned())
        .collect()
}

impl HealthChecker {
    /// A checker of `cfg.local_dirs` and `log_dirs` asking `probe`; nothing is checked before
    /// the first [`HealthChecker::poll`].
    pub fn new(cfg: HealthConfig, log_dirs: &[PathBuf], probe: Box<dyn DiskProbe + Send>) -> Self {
        let dirs = DirsHandler::new(
            dir_strings(&cfg.local_dirs),
            dir_strings(log_dirs),
            cfg.limits(),
            cfg.min_healthy_disks,
            cfg.disk_check_enabled,
        );
        Self {
            cfg,
            probe,
            dirs,
            next_disk: None,
            next_script: None,
            running: None,
            script_report: None,
            script_report_ms: 0,
            last_change: None,
        }
    }

    /// The dirs' state after the last check.
    pub fn dirs(&self) -> &DirsHandler {
        &self.dirs
    }

    /// What the last dir check changed, once (`None` when nothing was checked since).
    pub fn take_dirs_change(&mut self) -> Option<DirsChange> {
        self.last_change.take()
    }

    /// Runs what is due; returns the health when it changed or was re-checked.
    pub fn poll(&mut self, now: Instant, wall_ms: i64) -> Option<NodeHealth> {
        let mut checked = false;
        // disabled: one check at start (Java's serviceInit), no timer
        let due = match self.next_disk {
            None => true,
            Some(t) => self.cfg.disk_check_enabled && now >= t,
        };
        if due {
            self.next_disk = Some(now + self.cfg.disk_interval);
            let (local, log) = self.dirs.check(self.probe.as_ref(), wall_ms);
            self.last_change = Some(DirsChange { local, log });
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
                        // the whole output is the report when a line starts with ERROR
                        self.script_report = text
                            .split('\n')
                            .any(|l| l.starts_with("ERROR"))
                            .then(|| cut(&text, MAX_SCRIPT_REPORT));
                        self.script_report_ms = wall_ms;
                        checked = true;
                    }
                    Ok(None) if now.duration_since(r.started) > self.cfg.script_timeout => {
                        let _ = r.child.kill();
                        let _ = r.child.wait();
                        self.running = None;
                        self.script_report = Some("Node health script timed out".into());
                        self.script_report_ms = wall_ms;
                        checked = true;
                    }
                    Ok(None) => {}
                    Err(e) => {
                        self.running = None;
                        self.script_report = Some(format!("health script: {e}"));
                        self.script_report_ms = wall_ms;
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
                        self.script_report_ms = wall_ms;
                        checked = true;
                    }
                }
            }
        }
        checked.then(|| self.health())
    }

    /// The current verdict: healthy when the dirs are and the script is; the reports joined
    /// with `;`; the time of the latest check.
    pub fn health(&self) -> NodeHealth {
        let disk = self.dirs.report();
        let reports: Vec<&str> = [Some(disk.as_str()), self.script_report.as_deref()]
            .into_iter()
            .flatten()
            .filter(|r| !r.is_empty())
            .collect();
        NodeHealth {
            healthy: self.dirs.healthy() && self.script_report.is_none(),
            report: reports.join(";"),
            last_report_wall_ms: self.dirs.last_check_ms.max(self.script_report_ms),
        }
    }
}

fn cut(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

impl Drop for HealthChecker {
    fn drop(&mut self) {
        if let Some(r) = &mut self.running {
            let _ = r.child.kill();
            let _ = r.child.wait();
        }
    }
}
