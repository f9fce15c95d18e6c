//! The local and log dirs as the checks leave them ([`LiveDirs`]), and the real file-system
//! probe the checks ask ([`SystemProbe`]): Hadoop's `basic` disk validator
//! (`DiskChecker.checkDir`: create if missing, then `access(2)` for read, write and search)
//! and `statvfs`. The rules are `nm_core::disks`; the housekeeping thread runs them every
//! `disk-health-checker.interval-ms`, never the heartbeat path.
//!
//! Who uses which set (Java's `LocalDirsHandlerService`): new writes — a new container's
//! `LOCAL_DIRS`, `LOG_DIRS`, work dir and nmPrivate files, new localized resources — go to
//! the **good** dirs only; existing files are read from good and full dirs (a cached
//! resource under an errored dir is downloaded again).

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use nm_core::disks::{DirsHandler, DiskProbe, DiskSpace};
use nm_core::launch::NmDirs;

/// The system's answers: `DiskChecker.checkDir` and `statvfs`.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemProbe;

fn access(path: &Path, mode: libc::c_int) -> bool {
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call; access(2) only
    // reads it.
    unsafe { libc::access(c.as_ptr(), mode) == 0 }
}

impl DiskProbe for SystemProbe {
    fn validate(&self, dir: &Path) -> Result<(), String> {
        let d = dir.display();
        if !dir.is_dir() && std::fs::create_dir_all(dir).is_err() && !dir.exists() {
            return Err(format!("Cannot create directory: {d}"));
        }
        if !dir.is_dir() {
            return Err(format!("Not a directory: {d}"));
        }
        if !access(dir, libc::R_OK) {
            return Err(format!("Directory is not readable: {d}"));
        }
        if !access(dir, libc::W_OK) {
            return Err(format!("Directory is not writable: {d}"));
        }
        if !access(dir, libc::X_OK) {
            return Err(format!("Directory is not executable: {d}"));
        }
        Ok(())
    }

    fn space(&self, dir: &Path) -> DiskSpace {
        match fs4::statvfs(dir) {
            Ok(s) => DiskSpace {
                total_bytes: s.total_space(),
                usable_bytes: s.available_space(),
            },
            Err(_) => DiskSpace::default(),
        }
    }
}

/// One consistent picture of the dirs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirsView {
    /// Good dirs: new writes.
    pub good: NmDirs,
    /// Good and full local dirs: reads and cleanup.
    pub local_for_read: Vec<PathBuf>,
    /// Good and full log dirs.
    pub log_for_read: Vec<PathBuf>,
    /// `areDisksHealthy`.
    pub healthy: bool,
    /// The disks' report (`getDisksHealthReport(false)`).
    pub report: String,
    /// Failed local and log dirs (`/metrics`).
    pub bad_local: usize,
    pub bad_log: usize,
    /// Used % of the good dirs' file systems.
    pub good_local_utilization: i32,
    pub good_log_utilization: i32,
}

/// The dirs as the last check left them, shared by the housekeeping thread (writer), the
/// launcher and executor (a new container's dirs) and the localizer (where downloads go).
#[derive(Debug)]
pub struct LiveDirs {
    configured: NmDirs,
    view: RwLock<Arc<DirsView>>,
}

fn paths(v: &[String]) -> Vec<PathBuf> {
    v.iter().map(PathBuf::from).collect()
}

impl LiveDirs {
    /// Every configured dir good (before the first check).
    pub fn new(configured: NmDirs) -> LiveDirs {
        let view = DirsView {
            good: configured.clone(),
            local_for_read: configured.local_dirs.clone(),
            log_for_read: configured.log_dirs.clone(),
            healthy: true,
            report: String::new(),
            bad_local: 0,
            bad_log: 0,
            good_local_utilization: 0,
            good_log_utilization: 0,
        };
        LiveDirs {
            configured,
            view: RwLock::new(Arc::new(view)),
        }
    }

    /// The configured dirs, whatever their state.
    pub fn configured(&self) -> &NmDirs {
        &self.configured
    }

    /// The current picture.
    pub fn view(&self) -> Arc<DirsView> {
        self.view.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The good dirs now.
    pub fn good(&self) -> NmDirs {
        self.view().good.clone()
    }

    /// Takes the checker's verdict.
    pub fn update(&self, h: &DirsHandler) {
        let v = DirsView {
            good: NmDirs {
                local_dirs: paths(h.local.good()),
                log_dirs: paths(h.log.good()),
            },
            local_for_read: paths(&h.local.for_read()),
            log_for_read: paths(&h.log.for_read()),
            healthy: h.healthy(),
            report: h.report(),
            bad_local: h.local.errored().len() + h.local.full().len(),
            bad_log: h.log.errored().len() + h.log.full().len(),
            good_local_utilization: h.local.good_dirs_utilization(),
            good_log_utilization: h.log.good_dirs_utilization(),
        };
        *self.view.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(v);
    }

    /// `path` lies under a good or full local dir (an errored dir's files are not read).
    pub fn readable_local(&self, path: &Path) -> bool {
        self.view()
            .local_for_read
            .iter()
            .any(|d| path.starts_with(d))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nm_core::disks::DiskLimits;

    #[test]
    fn the_system_probe_names_what_is_wrong_as_javas_disk_checker() {
        let t = tempfile::tempdir().unwrap();
        let p = SystemProbe;
        let made = t.path().join("a/b");
        assert_eq!(p.validate(&made), Ok(()));
        assert!(made.is_dir());
        let file = t.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        assert_eq!(
            p.validate(&file),
            Err(format!("Not a directory: {}", file.display()))
        );
        let under = file.join("sub");
        assert_eq!(
            p.validate(&under),
            Err(format!("Cannot create directory: {}", under.display()))
        );
        let s = p.space(t.path());
        assert!(
            s.total_bytes > 0 && s.usable_bytes <= s.total_bytes,
            "{s:?}"
        );
        assert_eq!(p.space(&t.path().join("missing")), DiskSpace::default());
    }

    #[test]
    fn live_dirs_follow_the_checker() {
        let configured = NmDirs {
            local_dirs: vec!["/l1".into(), "/l2".into()],
            log_dirs: vec!["/g1".into()],
        };
        let live = LiveDirs::new(configured.clone());
        assert_eq!(live.good(), configured);
        struct Half;
        impl DiskProbe for Half {
            fn validate(&self, d: &Path) -> Result<(), String> {
                if d == Path::new("/l1") {
                    Err("Directory is not writable: /l1".into())
                } else {
                    Ok(())
                }
            }
            fn space(&self, _: &Path) -> DiskSpace {
                DiskSpace {
                    total_bytes: 100,
                    usable_bytes: 50,
                }
            }
        }
        let mut h = DirsHandler::new(
            vec!["/l1".into(), "/l2".into()],
            vec!["/g1".into()],
            DiskLimits::default(),
            0.25,
            true,
        );
        h.check(&Half, 1);
        live.update(&h);
        let v = live.view();
        assert_eq!(v.good.local_dirs, vec![PathBuf::from("/l2")]);
        assert_eq!(v.bad_local, 1);
        assert!(v.healthy);
        assert!(!live.readable_local(Path::new("/l1/filecache/1")));
        assert!(live.readable_local(Path::new("/l2/filecache/1")));
        assert_eq!(v.good_local_utilization, 50);
    }
}
