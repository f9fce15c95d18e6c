//! Disk health of the local dirs and log dirs, as Java's `DirectoryCollection` and
//! `LocalDirsHandlerService` (Hadoop 3.5.0) judge it; the rules only: the file system is
//! asked through a [`DiskProbe`] (`nm-runtime` has the real one, the tests inject numbers).
//!
//! Every check tests **every** dir (good, full and errored); per dir the first failing test
//! wins:
//! 1. the disk validator (`basic`: created if missing, then a readable, writable, searchable
//!    directory) → errored, its message (`Cannot create directory: d`, `Directory is not
//!    writable: d`, …);
//! 2. used space: `used% = 100 − 100·usable/total` (in `float`, as Java) above the cutoff, or
//!    ≥ 100 → full, `used space above threshold of 90.0%`;
//! 3. free space: `usable / 1 MiB` below the cutoff → full, `free space below limit of 10MB`.
//!
//! The cutoffs give the hysteresis: a dir that was good is tested against
//! `max-disk-utilization-per-disk-percentage` (high) and `min-free-space-per-disk-mb` (low);
//! a failed one must come back under `disk-utilization-watermark-low-per-disk-percentage` and
//! above `min-free-space-per-disk-watermark-high-mb` to be good again.
//!
//! Full dirs stay readable (existing files, logs, map outputs) but take no new writes;
//! errored dirs are neither. The node is unhealthy when good/total `<`
//! `min-healthy-disks` (0.25) for the local dirs **or** the log dirs. The report text is
//! Java's, byte for byte, including the order Java's `HashMap` lists several failed dirs in.

use std::collections::{HashMap, HashSet};
use std::path::Path;

/// What the file system says about one dir's file system (Java's `File.getTotalSpace` and
/// `File.getUsableSpace`: 0 when it cannot be asked).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DiskSpace {
    pub total_bytes: u64,
    /// Space available to an unprivileged user (`f_bavail · f_frsize`).
    pub usable_bytes: u64,
}

/// The file system, as the checks ask it.
pub trait DiskProbe {
    /// The disk validator (`yarn.nodemanager.disk-validator` = `basic`, Hadoop's
    /// `DiskChecker.checkDir`): create `dir` if it is missing, then it must be a directory
    /// that can be read, written and searched. `Err` carries the message.
    fn validate(&self, dir: &Path) -> Result<(), String>;
    /// The space of `dir`'s file system (statvfs).
    fn space(&self, dir: &Path) -> DiskSpace;
}

/// Why a dir failed (`DirectoryCollection.DiskErrorCause`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiskErrorCause {
    /// Over the utilization cutoff or under the free-space cutoff: readable, not writable.
    DiskFull,
    /// The validator failed: neither read nor written.
    Other,
}

/// The thresholds, clamped as Java clamps them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DiskLimits {
    /// A good dir turns full above this used percentage.
    pub utilization_high: f32,
    /// A failed dir turns good at or below this used percentage.
    pub utilization_low: f32,
    /// A good dir turns full under this many free MB.
    pub free_mb_low: i64,
    /// A failed dir turns good at or above this many free MB.
    pub free_mb_high: i64,
    /// `disk-utilization-threshold.enabled`.
    pub utilization_enabled: bool,
    /// `disk-free-space-threshold.enabled`.
    pub free_space_enabled: bool,
}

impl DiskLimits {
    /// From the configured values (`None` = key unset): the low utilization watermark
    /// defaults to the maximum and may not exceed it; the high free-space watermark defaults
    /// to the minimum and may not be under it; percentages are clamped to [0, 100] and MB to
    /// ≥ 0 (`LocalDirsHandlerService.MonitoringTimerTask`, `DirectoryCollection`).
    pub fn new(
        max_utilization: f32,
        low_utilization: Option<f32>,
        min_free_mb: i64,
        high_free_mb: Option<i64>,
    ) -> DiskLimits {
        let mut low = low_utilization.unwrap_or(max_utilization);
        if low > max_utilization {
            low = max_utilization;
        }
        let mut high_free = high_free_mb.unwrap_or(min_free_mb);
        if high_free < min_free_mb {
            high_free = min_free_mb;
        }
        let utilization_high = max_utilization.clamp(0.0, 100.0);
        // Java: max(0, min(high, low)); a NaN low ends up 0 there too
        let utilization_low = if low.is_nan() {
            0.0
        } else {
            low.min(utilization_high).max(0.0)
        };
        let free_mb_low = min_free_mb.max(0);
        let free_mb_high = free_mb_low.max(high_free.max(0));
        DiskLimits {
            utilization_high,
            utilization_low,
            free_mb_low,
            free_mb_high,
            utilization_enabled: true,
            free_space_enabled: true,
        }
    }
}

impl Default for DiskLimits {
    /// Hadoop's defaults: 90 %, no free-space minimum.
    fn default() -> Self {
        DiskLimits::new(90.0, None, 0, None)
    }
}

/// Java's `Float.toString` for the values a cutoff can take (0 to 100): `90.0`, `92.5`.
pub fn java_float(f: f32) -> String {
    if f.is_finite() && f.fract() == 0.0 && f.abs() < 1e7 {
        format!("{f:.1}")
    } else {
        format!("{f}")
    }
}

/// Java's `String.hashCode` (over UTF-16 code units).
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}

/// The order a `java.util.HashMap` created with capacity 0 iterates `keys` in after they
/// were put in this order (distinct keys): by bucket (`(h ^ h >>> 16) & (capacity − 1)` for
/// the capacity the resizes reached), then by insertion within a bucket.
pub fn java_hashmap_order(keys: &[&str]) -> Vec<usize> {
    if keys.is_empty() {
        return Vec::new();
    }
    // new HashMap<>(0): threshold 1; the first put makes a table of 1 (threshold 0), and
    // every put that takes the size over the threshold doubles it.
    let (mut cap, mut thr) = (1u64, 0u64);
    for size in 1..=keys.len() as u64 {
        if size > thr {
            let old = cap;
            cap <<= 1;
            thr = if old >= 16 {
                thr << 1
            } else {
                (cap as f32 * 0.75) as u64
            };
        }
    }
    let bucket = |k: &str| {
        let h = java_string_hash(k) as u32;
        u64::from(h ^ (h >> 16)) & (cap - 1)
    };
    let mut idx: Vec<usize> = (0..keys.len()).collect();
    idx.sort_by_key(|&i| bucket(keys[i])); // stable: insertion order within a bucket
    idx
}

/// One configured set of dirs (`DirectoryCollection`).
#[derive(Debug, Clone)]
pub struct DirectoryCollection {
    good: Vec<String>,
    errors: Vec<String>,
    full: Vec<String>,
    info: HashMap<String, (DiskErrorCause, String)>,
    limits: DiskLimits,
    failures: u64,
    /// Used % of the good dirs' file systems together (Java's
    /// `goodDirsDiskUtilizationPercentage`).
    good_utilization: i32,
}

/// What one check changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckOutcome {
    /// A good dir failed or a failed one passed (Java's `setChanged`).
    pub changed: bool,
    /// Good dirs that failed in this check, with why.
    pub turned_bad: Vec<(String, String)>,
    /// Failed dirs that passed this check.
    pub turned_good: Vec<String>,
}

impl DirectoryCollection {
    /// All `dirs` good until the first check.
    pub fn new(dirs: Vec<String>, limits: DiskLimits) -> DirectoryCollection {
        DirectoryCollection {
            good: dirs,
            errors: Vec::new(),
            full: Vec::new(),
            info: HashMap::new(),
            limits,
            failures: 0,
            good_utilization: 0,
        }
    }

    /// The good dirs: where new files go.
    pub fn good(&self) -> &[String] {
        &self.good
    }

    /// Errored dirs.
    pub fn errored(&self) -> &[String] {
        &self.errors
    }

    /// Full dirs.
    pub fn full(&self) -> &[String] {
        &self.full
    }

    /// Errored then full (Java's `getFailedDirs`).
    pub fn failed(&self) -> Vec<String> {
        self.errors.iter().chain(&self.full).cloned().collect()
    }

    /// Good then full: the dirs existing files are read from and cleaned up in.
    pub fn for_read(&self) -> Vec<String> {
        self.good.iter().chain(&self.full).cloned().collect()
    }

    /// Every dir, whatever its state.
    pub fn total(&self) -> usize {
        self.good.len() + self.errors.len() + self.full.len()
    }

    /// Why `dir` failed, if it did.
    pub fn error_info(&self, dir: &str) -> Option<&(DiskErrorCause, String)> {
        self.info.get(dir)
    }

    /// Good dirs that failed since the start.
    pub fn num_failures(&self) -> u64 {
        self.failures
    }

    /// Used % over the good dirs' file systems (0 when none).
    pub fn good_dirs_utilization(&self) -> i32 {
        self.good_utilization
    }

    fn test(
        &self,
        probe: &dyn DiskProbe,
        dir: &str,
        was_good: bool,
    ) -> Option<(DiskErrorCause, String)> {
        if let Err(m) = probe.validate(Path::new(dir)) {
            return Some((DiskErrorCause::Other, m));
        }
        let l = &self.limits;
        if !l.utilization_enabled && !l.free_space_enabled {
            return None;
        }
        let sp = probe.space(Path::new(dir));
        if l.utilization_enabled {
            let cutoff = if was_good {
                l.utilization_high
            } else {
                l.utilization_low
            };
            // Java: 100 * (usable / (float) total); 100.0F - that
            let free_pct = 100.0f32 * (sp.usable_bytes as f32 / sp.total_bytes as f32);
            let used_pct = 100.0f32 - free_pct;
            if used_pct > cutoff || used_pct >= 100.0 {
                return Some((
                    DiskErrorCause::DiskFull,
                    format!("used space above threshold of {}%", java_float(cutoff)),
                ));
            }
        }
        if l.free_space_enabled {
            let cutoff = if was_good {
                l.free_mb_low
            } else {
                l.free_mb_high
            };
            let free_mb = (sp.usable_bytes / (1024 * 1024)) as i64;
            if free_mb < cutoff {
                return Some((
                    DiskErrorCause::DiskFull,
                    format!("free space below limit of {cutoff}MB"),
                ));
            }
        }
        None
    }

    /// Tests every dir (`checkDirs`).
    pub fn check(&mut self, probe: &dyn DiskProbe) -> CheckOutcome {
        let pre_good: HashSet<String> = self.good.iter().cloned().collect();
        let pre_failed: HashSet<String> = self.errors.iter().chain(&self.full).cloned().collect();
        let all: Vec<String> = self
            .good
            .iter()
            .chain(&self.errors)
            .chain(&self.full)
            .cloned()
            .collect();
        let mut failed: Vec<(String, DiskErrorCause, String)> = Vec::new();
        for d in &all {
            if let Some((cause, msg)) = self.test(probe, d, pre_good.contains(d)) {
                failed.push((d.clone(), cause, msg));
            }
        }
        let keys: Vec<&str> = failed.iter().map(|(d, _, _)| d.as_str()).collect();
        let order = java_hashmap_order(&keys);
        let mut out = CheckOutcome::default();
        self.good.clear();
        self.errors.clear();
        self.full.clear();
        self.info.clear();
        for &i in &order {
            let (d, cause, msg) = &failed[i];
            match cause {
                DiskErrorCause::DiskFull => self.full.push(d.clone()),
                DiskErrorCause::Other => self.errors.push(d.clone()),
            }
            self.info.insert(d.clone(), (*cause, msg.clone()));
            if pre_good.contains(d) {
                out.changed = true;
                self.failures += 1;
                out.turned_bad.push((d.clone(), msg.clone()));
            }
        }
        for d in all {
            if !self.info.contains_key(&d) {
                if pre_failed.contains(&d) {
                    out.changed = true;
                    out.turned_good.push(d.clone());
                }
                self.good.push(d);
            }
        }
        self.good_utilization = self.utilization_of_good(probe);
        out
    }

    fn utilization_of_good(&self, probe: &dyn DiskProbe) -> i32 {
        let (mut total, mut usable) = (0u64, 0u64);
        for d in &self.good {
            let s = probe.space(Path::new(d));
            total = total.saturating_add(s.total_bytes);
            usable = usable.saturating_add(s.usable_bytes);
        }
        (100 * u128::from(total - usable.min(total)))
            .checked_div(u128::from(total))
            .map_or(0, |p| p as i32)
    }

    /// `" [ d1 : cause1 , d2 : cause2 ] "` (`buildDiskErrorReport`).
    fn error_report(&self, dirs: &[String]) -> String {
        let parts: Vec<String> = dirs
            .iter()
            .map(|d| match self.info.get(d) {
                Some((_, m)) => format!("{d} : {m}"),
                None => format!("{d} : Unknown cause for disk error"),
            })
            .collect();
        format!(" [ {} ] ", parts.join(" , "))
    }
}

const CAPACITY_EXCEEDED: &str =
    "usable space is below configured utilization percentage/no more usable space";

/// The local dirs and the log dirs together (`LocalDirsHandlerService`).
#[derive(Debug, Clone)]
pub struct DirsHandler {
    pub local: DirectoryCollection,
    pub log: DirectoryCollection,
    /// `yarn.nodemanager.disk-health-checker.enable`.
    pub enabled: bool,
    /// `yarn.nodemanager.disk-health-checker.min-healthy-disks`.
    pub min_healthy: f32,
    /// Wall time of the last check (ms).
    pub last_check_ms: i64,
}

impl DirsHandler {
    pub fn new(
        local_dirs: Vec<String>,
        log_dirs: Vec<String>,
        limits: DiskLimits,
        min_healthy: f32,
        enabled: bool,
    ) -> DirsHandler {
        DirsHandler {
            local: DirectoryCollection::new(local_dirs, limits),
            log: DirectoryCollection::new(log_dirs, limits),
            enabled,
            min_healthy,
            last_check_ms: 0,
        }
    }

    /// Checks both sets (`checkDirs`); `(local, log)` outcomes.
    pub fn check(&mut self, probe: &dyn DiskProbe, wall_ms: i64) -> (CheckOutcome, CheckOutcome) {
        let local = self.local.check(probe);
        let log = self.log.check(probe);
        self.last_check_ms = wall_ms;
        (local, log)
    }

    /// `areDisksHealthy`: good/total ≥ `min_healthy` for the local dirs and for the log
    /// dirs (no dirs at all: 0/0, healthy, as Java's float division gives NaN).
    pub fn healthy(&self) -> bool {
        if !self.enabled {
            return true;
        }
        let ok = |c: &DirectoryCollection| {
            let frac = c.good.len() as f32 / c.total() as f32;
            // Java: unhealthy iff frac < min; NaN (no dirs) compares false
            frac.is_nan() || frac >= self.min_healthy
        };
        ok(&self.local) && ok(&self.log)
    }

    /// `getDisksHealthReport(false)`: the failed dirs, empty when every dir is good or the
    /// checker is disabled.
    pub fn report(&self) -> String {
        if !self.enabled {
            return String::new();
        }
        let mut r = String::new();
        let (nl, ng) = (self.local.total(), self.log.total());
        if !self.local.errors.is_empty() {
            r.push_str(&format!(
                "{}/{nl} local-dirs have errors: {}",
                self.local.errors.len(),
                self.local.error_report(&self.local.errors)
            ));
        }
        if !self.local.full.is_empty() {
            r.push_str(&format!(
                "{}/{nl} local-dirs {CAPACITY_EXCEEDED}{}; ",
                self.local.full.len(),
                self.local.error_report(&self.local.full)
            ));
        }
        if !self.log.errors.is_empty() {
            r.push_str(&format!(
                "{}/{ng} log-dirs have errors: {}",
                self.log.errors.len(),
                self.log.error_report(&self.log.errors)
            ));
        }
        if !self.log.full.is_empty() {
            r.push_str(&format!(
                "{}/{ng} log-dirs {CAPACITY_EXCEEDED}{}",
                self.log.full.len(),
                self.log.error_report(&self.log.full)
            ));
        }
        r
    }

    /// `getDisksHealthReport(true)`: the good dirs (what Java logs when a dir turns good).
    pub fn good_report(&self) -> String {
        if !self.enabled {
            return String::new();
        }
        format!(
            "{}/{} local-dirs are good: {}; {}/{} log-dirs are good: {}",
            self.local.good.len(),
            self.local.total(),
            self.local.good.join(","),
            self.log.good.len(),
            self.log.total(),
            self.log.good.join(",")
        )
    }
}

/// A configured dir as Java keeps it (`LocalDirsHandlerService.validatePaths`): `file:`
/// scheme or none, the path normalized as Hadoop's `Path` does (repeated and trailing `/`
/// dropped); any other scheme is refused with Java's message.
pub fn validate_dir(dir: &str) -> Result<String, String> {
    let bad =
        || format!("{dir} is not a valid path. Path should be with file scheme or without scheme");
    let path = if let Some(rest) = dir.strip_prefix("file:") {
        // file:///a, file:/a; file://host/a keeps the path part
        match rest.strip_prefix("//") {
            Some(r) => match r.find('/') {
                Some(i) => &r[i..],
                None => return Err(bad()),
            },
            None => rest,
        }
    } else {
        match dir.find(':') {
            // a scheme: letters, digits, + - . before a ':' that comes before any '/'
            Some(i)
                if i > 0
                    && !dir[..i].contains('/')
                    && dir[..i]
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)) =>
            {
                return Err(bad())
            }
            _ => dir,
        }
    };
    if path.is_empty() {
        return Err(bad());
    }
    let mut out = String::with_capacity(path.len());
    for part in path.split('/') {
        if part.is_empty() {
            continue;
        }
        out.push('/');
        out.push_str(part);
    }
    if out.is_empty() {
        out.push('/');
    }
    if !path.starts_with('/') {
        out.remove(0);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::collections::BTreeMap;

    /// Numbers per dir, changed between checks.
    #[derive(Default)]
    struct Fake {
        space: RefCell<BTreeMap<String, DiskSpace>>,
        broken: RefCell<BTreeMap<String, String>>,
    }

    impl Fake {
        fn set(&self, dir: &str, total_mb: u64, usable_mb: u64) {
            self.space.borrow_mut().insert(
                dir.into(),
                DiskSpace {
                    total_bytes: total_mb << 20,
                    usable_bytes: usable_mb << 20,
                },
            );
        }
        fn used(&self, dir: &str, pct: u64) {
            self.set(dir, 1000, 1000 - pct * 10);
        }
    }

    impl DiskProbe for Fake {
        fn validate(&self, dir: &Path) -> Result<(), String> {
            match self.broken.borrow().get(dir.to_str().unwrap()) {
                Some(m) => Err(m.clone()),
                None => Ok(()),
            }
        }
        fn space(&self, dir: &Path) -> DiskSpace {
            self.space
                .borrow()
                .get(dir.to_str().unwrap())
                .copied()
                .unwrap_or_default()
        }
    }

    fn handler(local: &[&str], log: &[&str], limits: DiskLimits) -> DirsHandler {
        DirsHandler::new(
            local.iter().map(|s| s.to_string()).collect(),
            log.iter().map(|s| s.to_string()).collect(),
            limits,
            0.25,
            true,
        )
    }

    #[test]
    fn one_full_dir_of_two_is_dropped_and_the_node_stays_healthy() {
        let f = Fake::default();
        for d in ["/d1", "/d2", "/g1"] {
            f.used(d, 50);
        }
        let mut h = handler(&["/d1", "/d2"], &["/g1"], DiskLimits::default());
        let (o, _) = h.check(&f, 1);
        assert!(!o.changed);
        assert!(h.healthy());
        assert_eq!(h.report(), "");

        f.used("/d1", 95);
        let (o, _) = h.check(&f, 2);
        assert!(o.changed);
        assert_eq!(
            o.turned_bad,
            vec![("/d1".into(), "used space above threshold of 90.0%".into())]
        );
        assert_eq!(h.local.good(), ["/d2"]);
        assert_eq!(h.local.full(), ["/d1"]);
        assert_eq!(h.local.for_read(), ["/d2", "/d1"]);
        assert!(h.healthy(), "1 of 2 good is 0.5 ≥ 0.25");
        // Java's text, byte for byte (production.md §4.4)
        assert_eq!(
            h.report(),
            "1/2 local-dirs usable space is below configured utilization percentage/no more \
             usable space [ /d1 : used space above threshold of 90.0% ] ; "
        );
        assert_eq!(h.last_check_ms, 2);

        // both full: 0/2 < 0.25
        f.used("/d2", 99);
        h.check(&f, 3);
        assert!(!h.healthy());
        assert_eq!(h.local.good(), Vec::<String>::new().as_slice());
        assert!(
            h.report()
                .starts_with("2/2 local-dirs usable space is below configured"),
            "{}",
            h.report()
        );
    }

    #[test]
    fn a_full_dir_comes_back_only_under_the_low_watermark() {
        let f = Fake::default();
        f.used("/d1", 95);
        f.used("/g", 10);
        let limits = DiskLimits::new(90.0, Some(80.0), 0, None);
        let mut h = handler(&["/d1"], &["/g"], limits);
        h.check(&f, 1);
        assert_eq!(h.local.full(), ["/d1"]);
        assert!(!h.healthy(), "0/1 local dirs");
        assert_eq!(
            h.report(),
            "1/1 local-dirs usable space is below configured utilization percentage/no more \
             usable space [ /d1 : used space above threshold of 90.0% ] ; "
        );
        // 85 %: under the high mark but over the low one: stays full, and says the low cutoff
        f.used("/d1", 85);
        let (o, _) = h.check(&f, 2);
        assert!(!o.changed);
        assert_eq!(h.local.full(), ["/d1"]);
        assert!(
            h.report().contains("used space above threshold of 80.0%"),
            "{}",
            h.report()
        );
        // 80 %: at the low mark is good again
        f.used("/d1", 80);
        let (o, _) = h.check(&f, 3);
        assert!(o.changed);
        assert_eq!(o.turned_good, ["/d1"]);
        assert!(h.healthy());
        assert_eq!(h.report(), "");
        // good again: 85 % passes (the high mark applies)
        f.used("/d1", 85);
        let (o, _) = h.check(&f, 4);
        assert!(!o.changed);
        assert_eq!(h.local.good(), ["/d1"]);
    }

    #[test]
    fn free_space_minimum_and_its_high_watermark() {
        let f = Fake::default();
        f.set("/d1", 100_000, 500); // 99.5 % used: switch utilization off to see free space
        f.set("/g", 100_000, 90_000);
        let mut limits = DiskLimits::new(100.0, None, 1000, Some(2000));
        limits.utilization_enabled = false;
        let mut h = handler(&["/d1"], &["/g"], limits);
        h.check(&f, 1);
        assert_eq!(
            h.local.error_info("/d1"),
            Some(&(
                DiskErrorCause::DiskFull,
                "free space below limit of 1000MB".to_string()
            ))
        );
        f.set("/d1", 100_000, 1500);
        h.check(&f, 2);
        assert_eq!(
            h.local.error_info("/d1").map(|e| e.1.as_str()),
            Some("free space below limit of 2000MB")
        );
        f.set("/d1", 100_000, 2000);
        h.check(&f, 3);
        assert_eq!(h.local.good(), ["/d1"]);
        // a good dir at 1500 MB stays good (low mark 1000)
        f.set("/d1", 100_000, 1500);
        h.check(&f, 4);
        assert_eq!(h.local.good(), ["/d1"]);
        // at 999 it fails
        f.set("/d1", 100_000, 999);
        h.check(&f, 5);
        assert_eq!(h.local.full(), ["/d1"]);
    }

    #[test]
    fn errored_dirs_and_log_dirs_are_reported_in_javas_order_and_text() {
        let f = Fake::default();
        for d in ["/l1", "/l2", "/l3", "/l4", "/g1", "/g2"] {
            f.used(d, 10);
        }
        f.broken
            .borrow_mut()
            .insert("/l2".into(), "Directory is not writable: /l2".into());
        f.used("/l3", 100);
        f.used("/g2", 97);
        let mut h = handler(
            &["/l1", "/l2", "/l3", "/l4"],
            &["/g1", "/g2"],
            DiskLimits::default(),
        );
        h.check(&f, 1);
        assert_eq!(h.local.errored(), ["/l2"]);
        assert_eq!(h.local.full(), ["/l3"]);
        assert_eq!(h.local.good(), ["/l1", "/l4"]);
        assert!(h.healthy(), "2/4 local, 1/2 log");
        assert_eq!(
            h.report(),
            "1/4 local-dirs have errors:  [ /l2 : Directory is not writable: /l2 ] \
             1/4 local-dirs usable space is below configured utilization percentage/no more \
             usable space [ /l3 : used space above threshold of 90.0% ] ; \
             1/2 log-dirs usable space is below configured utilization percentage/no more \
             usable space [ /g2 : used space above threshold of 90.0% ] "
        );
        // every log dir bad: unhealthy though the local dirs are fine
        f.used("/g1", 100);
        h.check(&f, 2);
        assert!(!h.healthy());
        // the disabled checker reports nothing and is healthy
        h.enabled = false;
        assert!(h.healthy());
        assert_eq!(h.report(), "");
    }

    #[test]
    fn several_failed_dirs_follow_javas_hashmap_order() {
        // Observed with JDK 17: put into new HashMap<>(0) in this order, keySet() gives
        // /data/4,/data/5,/data/2,/data/3,/data/1
        let keys = ["/data/1", "/data/2", "/data/3", "/data/4", "/data/5"];
        let got: Vec<&str> = java_hashmap_order(&keys).iter().map(|&i| keys[i]).collect();
        assert_eq!(got, ["/data/4", "/data/5", "/data/2", "/data/3", "/data/1"]);
        let keys = [
            "/mnt/disk10/yarn/local",
            "/mnt/disk2/yarn/local",
            "/mnt/disk3/yarn/local",
        ];
        let got: Vec<&str> = java_hashmap_order(&keys).iter().map(|&i| keys[i]).collect();
        assert_eq!(got, keys, "JDK 17 kept this order");
        // "a".hashCode() = 97, "ab" = 97*31+98 = 3105 (Java)
        assert_eq!(java_string_hash("a"), 97);
        assert_eq!(java_string_hash("ab"), 3105);
        // one key: capacity 2
        assert_eq!(java_hashmap_order(&["x"]), vec![0]);
        // two keys "a" (97 → bucket 1 of 4) and "b" (98 → bucket 2): a first, even if put second
        assert_eq!(java_hashmap_order(&["b", "a"]), vec![1, 0]);
    }

    #[test]
    fn a_failed_dir_that_now_passes_rejoins_after_the_good_ones() {
        let f = Fake::default();
        for d in ["/a", "/b", "/c", "/g"] {
            f.used(d, 10);
        }
        f.used("/a", 99);
        let mut h = handler(&["/a", "/b", "/c"], &["/g"], DiskLimits::default());
        h.check(&f, 1);
        assert_eq!(h.local.good(), ["/b", "/c"]);
        f.used("/a", 10);
        h.check(&f, 2);
        // Java rebuilds the list as good + errored + full
        assert_eq!(h.local.good(), ["/b", "/c", "/a"]);
        assert_eq!(h.local.num_failures(), 1);
        assert_eq!(
            h.good_report(),
            "3/3 local-dirs are good: /b,/c,/a; 1/1 log-dirs are good: /g"
        );
    }

    #[test]
    fn limits_are_clamped_as_java_clamps_them() {
        let l = DiskLimits::new(120.0, Some(95.0), -5, Some(-10));
        assert_eq!(l.utilization_high, 100.0);
        assert_eq!(l.utilization_low, 95.0);
        assert_eq!((l.free_mb_low, l.free_mb_high), (0, 0));
        let l = DiskLimits::new(90.0, Some(95.0), 100, Some(50));
        assert_eq!(l.utilization_low, 90.0, "low above high: the high one");
        assert_eq!(l.free_mb_high, 100, "high under low: the low one");
        assert_eq!(java_float(90.0), "90.0");
        assert_eq!(java_float(92.5), "92.5");
        // 100 % used always fails, even with a 100 % cutoff
        let f = Fake::default();
        f.set("/d", 1000, 0);
        f.used("/g", 0);
        let mut h = handler(&["/d"], &["/g"], DiskLimits::new(100.0, None, 0, None));
        h.check(&f, 1);
        assert_eq!(h.local.full(), ["/d"]);
        // no dirs at all: healthy (0/0)
        let mut h = handler(&[], &[], DiskLimits::default());
        h.check(&f, 1);
        assert!(h.healthy());
    }

    #[test]
    fn dirs_are_validated_as_java_validates_them() {
        assert_eq!(validate_dir("/data/1/").unwrap(), "/data/1");
        assert_eq!(validate_dir("file:///data//1").unwrap(), "/data/1");
        assert_eq!(validate_dir("file:/data/1").unwrap(), "/data/1");
        assert_eq!(
            validate_dir("hdfs://nn/x").unwrap_err(),
            "hdfs://nn/x is not a valid path. Path should be with file scheme or without scheme"
        );
        assert_eq!(validate_dir("rel/dir").unwrap(), "rel/dir");
    }
}
