//! Disk health on real file systems: two local dirs, each on its own 8 MiB tmpfs, filled and
//! freed while the agent runs (checks every 100 ms). One full dir is dropped from new
//! containers' dirs and the node stays healthy; both full make it unhealthy (Java's
//! 0.25 rule) with Java's report; freed, both come back and the node is healthy again.
//!
//! Needs root (`mount -t tmpfs`), which CI has: without it the test fails, it does not skip.
//! The mounts are lazily unmounted whatever happens (a guard's `Drop`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use agent::demo::{Cluster, DemoConfig};
use nm_runtime::executor::{Executor, ExecutorConfig};
use nm_runtime::{Agent, AgentConfig};

fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < timeout, "{what}: not within {timeout:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Mounted tmpfs dirs, unmounted on drop (also when the test fails).
struct Mounts(Vec<PathBuf>);

impl Mounts {
    fn mount(&mut self, dir: &Path) {
        std::fs::create_dir_all(dir).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=8m"])
            .arg("tmpfs")
            .arg(dir)
            .output()
            .expect("run mount");
        assert!(
            out.status.success(),
            "mount -t tmpfs -o size=8m on {} failed (this test needs root, as CI runs it): {}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        self.0.push(dir.to_path_buf());
    }
}

impl Drop for Mounts {
    fn drop(&mut self) {
        for d in self.0.drain(..).rev() {
            let _ = Command::new("umount").arg("-l").arg(&d).status();
        }
    }
}

/// Fills `dir`'s 8 MiB file system to 7.5 MiB (93.75 % > 90 %).
fn fill(dir: &Path) {
    std::fs::write(dir.join("ballast"), vec![7u8; 7 * 1024 * 1024 + 512 * 1024]).unwrap();
}

fn free(dir: &Path) {
    std::fs::remove_file(dir.join("ballast")).unwrap();
}

#[test]
fn full_tmpfs_local_dirs_are_dropped_then_make_the_node_unhealthy_and_recover() {
    // the effective uid, from /proc/self/status ("Uid: real effective saved fs")
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let euid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or("?")
        .to_string();
    assert_eq!(
        euid, "0",
        "this test mounts tmpfs and needs root (CI runs as root)"
    );

    let dir = tempfile::tempdir().unwrap();
    let (l1, l2) = (dir.path().join("l1"), dir.path().join("l2"));
    let mut mounts = Mounts(Vec::new());
    mounts.mount(&l1);
    mounts.mount(&l2);

    let c = Cluster::start(DemoConfig {
        agents: 0,
        heartbeat_ms: 100,
        ..DemoConfig::default()
    })
    .unwrap();
    let mut cfg =
        AgentConfig::local(c.rm_addr(), "127.0.0.14".parse().unwrap(), dir.path()).unwrap();
    cfg.health.local_dirs = vec![l1.clone(), l2.clone()];
    cfg.health.max_utilization_percent = 90.0;
    cfg.health.disk_interval = Duration::from_millis(100);
    let a = Agent::start(cfg).unwrap();
    let sh = a.shared().clone();
    let live = sh.dirs.get().unwrap().clone();
    let health = || sh.health.lock().unwrap().clone();
    assert!(health().healthy, "{:?}", health());
    assert_eq!(health().report, "");
    assert_eq!(live.good().local_dirs, vec![l1.clone(), l2.clone()]);

    // A new container's dirs follow the checks (the executor the launcher uses does this).
    let ex = Executor::new(ExecutorConfig {
        live_dirs: Some(live.clone()),
        ..ExecutorConfig::new(live.configured().clone(), vec![])
    });
    let cid: nm_core::ids::ContainerId = "container_1700000000000_0001_01_000002".parse().unwrap();

    // 1 of 2 full: dropped, node healthy, Java's report.
    fill(&l1);
    wait_for("l1 dropped", Duration::from_secs(10), || {
        live.good().local_dirs == vec![l2.clone()]
    });
    let h = health();
    assert!(h.healthy, "{h:?}");
    assert_eq!(
        h.report,
        format!(
            "1/2 local-dirs usable space is below configured utilization percentage/no more \
             usable space [ {} : used space above threshold of 90.0% ] ; ",
            l1.display()
        )
    );
    let p = ex.paths("hp-test", cid).unwrap();
    assert!(
        p.app_dirs.iter().all(|d| d.starts_with(&l2)),
        "{:?}",
        p.app_dirs
    );
    assert!(p.work_dir.starts_with(&l2), "{:?}", p.work_dir);
    // still readable: full dirs are read from
    assert!(live.readable_local(&l1.join("usercache")));

    // both full: unhealthy
    fill(&l2);
    wait_for("unhealthy", Duration::from_secs(10), || !health().healthy);
    let h = health();
    assert!(
        h.report.starts_with(
            "2/2 local-dirs usable space is below configured utilization percentage/no more \
             usable space [ "
        ),
        "{h:?}"
    );
    assert!(live.good().local_dirs.is_empty());
    assert!(
        ex.paths("hp-test", cid).is_err(),
        "no good local dir for a new container"
    );

    // freed: both back, healthy, empty report
    free(&l1);
    free(&l2);
    wait_for("healthy again", Duration::from_secs(10), || {
        health().healthy
    });
    wait_for("both dirs back", Duration::from_secs(10), || {
        let mut g = live.good().local_dirs;
        g.sort();
        g == vec![l1.clone(), l2.clone()]
    });
    assert_eq!(health().report, "");
    drop(a);
    drop(mounts);
}
