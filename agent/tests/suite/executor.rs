//! The container executor with real processes and, where the probe finds them writable, real
//! cgroups: exit codes and files, process-group kills (SIGTERM, SIGKILL after the delay), the
//! memory limit (−104), CPU placement, the fallback without cgroups, and recovery. The tests of
//! exits, kills and memory run on both process chains (Java's wrapped one, and the direct one
//! the agent uses without recovery).

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nm_core::ids::{AppId, ContainerId};
use nm_core::launch::{
    container_env, expand, launch_script, ContainerPaths, KillReason, LaunchEnvInput, NmDirs,
    ScriptInput,
};
use nm_runtime::executor::{
    work_cpus, CgroupMode, Chain, Executor, ExecutorConfig, ExitInfo, Limits, PrepareInput,
    Recovered, RunningContainer,
};

/// An empty credentials file in Hadoop's token storage format (`HDTS`, version 0, no tokens,
/// no secrets).
const EMPTY_HDTS: &[u8] = b"HDTS\x00\x00\x00";

/// A fixed wall-clock time for diagnostics (Java 3.5 stamps each event with it).
const T: i64 = 1_700_000_000_123;
const S: &str = "[2023-11-14 22:13:20.123]";

fn executor(dir: &Path, mode: CgroupMode, cpus: Vec<u32>) -> Executor {
    executor_on(dir, mode, cpus, Chain::Wrapped)
}

fn executor_on(dir: &Path, mode: CgroupMode, cpus: Vec<u32>, chain: Chain) -> Executor {
    executor_z(dir, mode, cpus, chain, 0)
}

/// An executor with `zygotes` ready processes; waits until the pool has made them, so the
/// next launches use them.
fn executor_z(
    dir: &Path,
    mode: CgroupMode,
    cpus: Vec<u32>,
    chain: Chain,
    zygotes: usize,
) -> Executor {
    let dirs = NmDirs {
        local_dirs: vec![dir.join("local0"), dir.join("local1")],
        log_dirs: vec![dir.join("logs")],
    };
    let mut cfg = ExecutorConfig::new(dirs, cpus);
    cfg.chain = chain;
    cfg.cgroups = mode;
    cfg.hierarchy = "hotpath-test".into();
    cfg.zygotes = zygotes;
    let ex = Executor::new(cfg);
    let t = Instant::now();
    while ex.zygotes_ready() < zygotes {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "no zygotes were made"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    ex
}

/// Waits for the ready processes to be made again after a launch took one.
fn refilled(ex: &Executor, zygotes: usize) {
    let t = Instant::now();
    while ex.zygotes_ready() < zygotes {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "zygotes not refilled"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn the_work_cpus() -> Vec<u32> {
    let topo = hw::Topology::detect().expect("topology");
    work_cpus(&hw::Plan::for_agent(&topo))
}

fn cid(n: i64) -> ContainerId {
    // A distinct application per test process run, so parallel runs do not share cgroups.
    let ts = std::process::id() as i64 + 1_700_000_000_000;
    ContainerId::new(AppId::new(ts, 7), 1, n)
}

/// Prepares and starts a container running `command` (markers expanded).
fn launch(
    ex: &Executor,
    id: ContainerId,
    command: &str,
    limits: &Limits,
) -> (ContainerPaths, RunningContainer) {
    let paths = ex.paths("hp-test", id).unwrap();
    let log_dir = paths.log_dir().display().to_string();
    let input = LaunchEnvInput {
        container_env: vec![("GREETING".into(), "hello-{{USER}}".into())],
        agent_env: std::env::vars().collect(),
        node_host: "localhost".into(),
        node_port: 45454,
        http_port: 8042,
        user: "hp-test".into(),
        ..LaunchEnvInput::default()
    };
    let env = container_env(&input, &paths);
    let commands = vec![expand(command, &log_dir, true)];
    let script = launch_script(&ScriptInput {
        log_dir: paths.log_dir(),
        env: &env,
        links: &[],
        commands: &commands,
        debug_info: true,
        setup_by_node: false,
    });
    ex.prepare(
        &paths,
        &PrepareInput {
            launch_script: &script,
            tokens: EMPTY_HDTS,
        },
    )
    .unwrap();
    let rc = ex.spawn(&paths, &env, limits).unwrap();
    (paths, rc)
}

fn wait_exit(rc: &mut RunningContainer, limit: Duration) -> ExitInfo {
    let t = Instant::now();
    loop {
        if let Some(e) = rc.poll() {
            return e;
        }
        assert!(
            t.elapsed() < limit,
            "container did not exit within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn wait_file(p: &Path) -> String {
    let t = Instant::now();
    loop {
        if let Ok(s) = fs::read_to_string(p) {
            if s.ends_with('\n') {
                return s;
            }
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "{} never appeared",
            p.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn alive(pid: i32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => !s
            .rsplit_once(')')
            .is_some_and(|(_, r)| r.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

fn wait_dead(pid: i32) {
    let t = Instant::now();
    while alive(pid) {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "pid {pid} still alive"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn status_field(pid: i32, key: &str) -> String {
    let s = fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| {
            l.strip_prefix(key)
                .map(|v| v.trim_start_matches(':').trim().to_string())
        })
        .unwrap()
}

fn wait_finished(rc: &mut RunningContainer) {
    let t = Instant::now();
    while !rc.finished() {
        rc.poll();
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "cleanup did not finish"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn exit_code_files_and_environment() {
    exit_code_files_and_environment_on(Chain::Wrapped, 0);
}

#[test]
fn exit_code_files_and_environment_direct() {
    exit_code_files_and_environment_on(Chain::Direct, 100);
}

fn exit_code_files_and_environment_on(chain: Chain, ids: i64) {
    exit_code_files_and_environment_on_z(chain, 0, ids);
}

fn exit_code_files_and_environment_on_z(chain: Chain, zygotes: usize, ids: i64) {
    let dir = tempfile::tempdir().unwrap();
    let ex = executor_z(
        dir.path(),
        CgroupMode::Auto,
        the_work_cpus(),
        chain,
        zygotes,
    );
    let (paths, mut rc) = launch(
        &ex,
        cid(ids + 1),
        "echo hi 1><LOG_DIR>/stdout; echo $CONTAINER_ID $HOME $GREETING > <LOG_DIR>/env; \
echo oops 2><LOG_DIR>/stderr 1>&2; echo broken 1>&2; exit 3",
        &Limits::default(),
    );
    assert_eq!(rc.from_zygote(), zygotes > 0);
    let e = wait_exit(&mut rc, Duration::from_secs(20));
    assert_eq!(e.exit_code, 3);
    assert_eq!(e.exit_status(), 3);
    assert!(e.kill_reason.is_none());
    let d = e.class.diagnostics_at(T);
    assert!(
        d.starts_with(&format!(
            "{S}Container exited with a non-zero exit code 3. "
        )),
        "{d}"
    );
    assert!(
        d.contains("Error file: prelaunch.err.\nLast 4096 bytes of prelaunch.err :\n"),
        "{d}"
    );
    assert!(
        d.contains("broken"),
        "the command's stderr reached prelaunch.err: {d}"
    );
    assert!(d.contains("Last 4096 bytes of stderr :\noops\n"), "{d}");
    let log = paths.log_dir();
    assert_eq!(fs::read_to_string(log.join("stdout")).unwrap(), "hi\n");
    assert_eq!(
        fs::read_to_string(log.join("env")).unwrap(),
        format!("{} /home/ hello-hp-test\n", paths.container)
    );
    let out = fs::read_to_string(log.join("prelaunch.out")).unwrap();
    assert!(out.contains("Setting up env variables") && out.contains("Launching container"));
    assert!(log.join("directory.info").exists());
    assert!(log.join("launch_container.sh").exists());
    // pid and exit-code files; tokens in both places.
    let pid: i32 = fs::read_to_string(&paths.pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(pid > 0);
    assert_eq!(fs::read_to_string(&paths.exit_code_file).unwrap(), "3\n");
    assert_eq!(fs::read(&paths.tokens).unwrap(), EMPTY_HDTS);
    assert_eq!(fs::read(&paths.private_tokens).unwrap(), EMPTY_HDTS);
    // Java's modes.
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&paths.user_dirs[0]), 0o750);
    assert_eq!(mode(&paths.work_dir), 0o710);
    assert_eq!(mode(&paths.tmp_dir), 0o710);
    assert_eq!(mode(log), 0o710);
    assert_eq!(mode(&paths.private_dir), 0o700);
    match chain {
        Chain::Wrapped => {
            assert_eq!(mode(&paths.executor_script), 0o700);
            assert_eq!(mode(&paths.session_script), 0o700);
        }
        // No wrapper scripts: the launch script was our child.
        Chain::Direct => {
            assert!(!paths.executor_script.exists() && !paths.session_script.exists());
        }
    }
    // Container dirs on every local dir.
    assert!(paths.container_dirs.iter().all(|d| d.is_dir()));
    // The cgroup goes away after the exit.
    let cg_dirs: Vec<PathBuf> = rc.cgroup().map(|c| c.dirs().to_vec()).unwrap_or_default();
    if zygotes > 0 && ex.has_memory_cgroup() {
        // Named after the container, as a fresh spawn's (v1 renames the pool's cgroup).
        let name = paths.container.to_string();
        assert!(cg_dirs.iter().all(|d| d.ends_with(&name)), "{cg_dirs:?}");
    }
    wait_finished(&mut rc);
    let t = Instant::now();
    while !ex.cgroups_removed() {
        assert!(t.elapsed() < Duration::from_secs(10), "cgroups not removed");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(cg_dirs.iter().all(|d| !d.exists()), "{cg_dirs:?}");
    // Success reports 0.
    refilled(&ex, zygotes);
    let (_, mut ok) = launch(&ex, cid(ids + 2), "true", &Limits::default());
    assert_eq!(ok.from_zygote(), zygotes > 0);
    let e = wait_exit(&mut ok, Duration::from_secs(20));
    assert_eq!(
        (e.exit_code, e.exit_status(), e.class.diagnostics_at(T)),
        (0, 0, String::new())
    );
}

#[test]
fn kill_by_app_master_kills_the_process_group() {
    kill_by_app_master_kills_the_process_group_on(Chain::Wrapped, 0);
}

#[test]
fn kill_by_app_master_kills_the_process_group_direct() {
    kill_by_app_master_kills_the_process_group_on(Chain::Direct, 100);
}

fn kill_by_app_master_kills_the_process_group_on(chain: Chain, ids: i64) {
    kill_by_app_master_kills_the_process_group_on_z(chain, 0, ids);
}

fn kill_by_app_master_kills_the_process_group_on_z(chain: Chain, zygotes: usize, ids: i64) {
    let dir = tempfile::tempdir().unwrap();
    let ex = executor_z(
        dir.path(),
        CgroupMode::Auto,
        the_work_cpus(),
        chain,
        zygotes,
    );
    let (paths, mut rc) = launch(
        &ex,
        cid(ids + 3),
        "sleep 600 & echo \\$! > <LOG_DIR>/grandchild; wait",
        &Limits::default(),
    );
    let gc: i32 = wait_file(&paths.log_dir().join("grandchild"))
        .trim()
        .parse()
        .unwrap();
    assert!(alive(gc));
    // The pid file names the leader of the container's process group.
    let pid: i32 = wait_file(&paths.pid_file).trim().parse().unwrap();
    let stat = fs::read_to_string(format!("/proc/{gc}/stat")).unwrap();
    let pgrp: i32 = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .nth(2)
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(pgrp, pid, "{stat}");
    assert!(rc.poll().is_none());
    let t = Instant::now();
    rc.kill(KillReason::ByAppMaster);
    assert!(t.elapsed() < Duration::from_millis(100), "kill blocked");
    let e = wait_exit(&mut rc, Duration::from_secs(10));
    assert_eq!(e.exit_status(), -105);
    assert_eq!(e.exit_code, 143);
    assert_eq!(
        e.class.diagnostics_at(T),
        format!(
            "{S}Container killed by the ApplicationMaster.\n{S}Container killed on request. \
Exit code is 143\nContainer exited with a non-zero exit code 143. \n"
        )
    );
    wait_dead(gc);
    wait_finished(&mut rc);
}

#[test]
fn sigkill_follows_when_term_is_ignored() {
    sigkill_follows_when_term_is_ignored_on(Chain::Wrapped, 0);
}

#[test]
fn sigkill_follows_when_term_is_ignored_direct() {
    sigkill_follows_when_term_is_ignored_on(Chain::Direct, 100);
}

fn sigkill_follows_when_term_is_ignored_on(chain: Chain, ids: i64) {
    sigkill_follows_when_term_is_ignored_on_z(chain, 0, ids);
}

fn sigkill_follows_when_term_is_ignored_on_z(chain: Chain, zygotes: usize, ids: i64) {
    let dir = tempfile::tempdir().unwrap();
    let ex = executor_z(
        dir.path(),
        CgroupMode::Auto,
        the_work_cpus(),
        chain,
        zygotes,
    );
    let (paths, mut rc) = launch(
        &ex,
        cid(ids + 4),
        "trap '' TERM; sleep 600 & echo \\$! > <LOG_DIR>/grandchild; wait",
        &Limits::default(),
    );
    let gc: i32 = wait_file(&paths.log_dir().join("grandchild"))
        .trim()
        .parse()
        .unwrap();
    let t = Instant::now();
    rc.kill(KillReason::ByResourceManager);
    assert!(t.elapsed() < Duration::from_millis(100), "kill blocked");
    // TERM is ignored: still running well before the delay ends.
    std::thread::sleep(Duration::from_millis(100));
    assert!(rc.poll().is_none());
    assert!(alive(gc));
    let e = wait_exit(&mut rc, Duration::from_secs(10));
    assert!(
        t.elapsed() >= Duration::from_millis(250),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(e.exit_code, 137);
    assert_eq!(e.exit_status(), -106);
    assert!(e
        .class
        .diagnostics_at(T)
        .starts_with(&format!("{S}Container Killed by ResourceManager\n{S}")));
    wait_dead(gc);
    wait_finished(&mut rc);
}

#[test]
fn memory_hog_is_killed_as_exceeding_pmem() {
    memory_hog_is_killed_as_exceeding_pmem_on(Chain::Wrapped, 0);
}

#[test]
fn memory_hog_is_killed_as_exceeding_pmem_direct() {
    memory_hog_is_killed_as_exceeding_pmem_on(Chain::Direct, 100);
}

fn memory_hog_is_killed_as_exceeding_pmem_on(chain: Chain, ids: i64) {
    memory_hog_is_killed_as_exceeding_pmem_on_z(chain, 0, ids);
}

fn memory_hog_is_killed_as_exceeding_pmem_on_z(chain: Chain, zygotes: usize, ids: i64) {
    let dir = tempfile::tempdir().unwrap();
    let ex = executor_z(
        dir.path(),
        CgroupMode::Auto,
        the_work_cpus(),
        chain,
        zygotes,
    );
    if !ex.has_memory_cgroup() {
        eprintln!("SKIPPED memory_hog_is_killed_as_exceeding_pmem: the probe found no writable memory cgroup");
        return;
    }
    let limit = 64u64 << 20;
    let (_, mut rc) = launch(
        &ex,
        cid(ids + 5),
        "head -c 400000000 /dev/zero | tail > /dev/null; sleep 600",
        &Limits {
            memory_bytes: Some(limit),
            cpus: vec![],
        },
    );
    assert_eq!(rc.from_zygote(), zygotes > 0);
    let e = wait_exit(&mut rc, Duration::from_secs(30));
    assert_eq!(e.exit_status(), -104, "{e:?}");
    assert!(matches!(
        e.kill_reason,
        Some(KillReason::ExceededPmem { .. })
    ));
    let d = e.class.diagnostics_at(T);
    assert!(d.starts_with(&format!("{S}Container [pid=")), "{d}");
    assert!(
        d.contains(&format!(
            ",containerID={}] is running beyond physical memory limits. Current usage: ",
            cid(ids + 5)
        )),
        "{d}"
    );
    assert!(
        d.contains(" of 64 MB physical memory used; Killing container.\n"),
        "{d}"
    );
    wait_finished(&mut rc);
}

#[test]
fn exit_code_files_and_environment_zygote() {
    exit_code_files_and_environment_on_z(Chain::Direct, 2, 200);
}

#[test]
fn exit_code_files_and_environment_wrapped_zygote() {
    exit_code_files_and_environment_on_z(Chain::Wrapped, 1, 300);
}

#[test]
fn kill_by_app_master_kills_the_process_group_zygote() {
    kill_by_app_master_kills_the_process_group_on_z(Chain::Direct, 1, 400);
}

#[test]
fn sigkill_follows_when_term_is_ignored_zygote() {
    sigkill_follows_when_term_is_ignored_on_z(Chain::Direct, 1, 500);
}

#[test]
fn memory_hog_is_killed_as_exceeding_pmem_zygote() {
    memory_hog_is_killed_as_exceeding_pmem_on_z(Chain::Direct, 1, 600);
}

#[test]
fn memory_hog_is_killed_as_exceeding_pmem_wrapped_zygote() {
    memory_hog_is_killed_as_exceeding_pmem_on_z(Chain::Wrapped, 1, 700);
}

#[test]
fn container_runs_on_the_work_cpus() {
    container_runs_on_the_work_cpus_on(0, 6);
}

#[test]
fn container_runs_on_the_work_cpus_zygote() {
    container_runs_on_the_work_cpus_on(1, 806);
}

fn container_runs_on_the_work_cpus_on(zygotes: usize, id: i64) {
    let dir = tempfile::tempdir().unwrap();
    let cpus = the_work_cpus();
    let ex = executor_z(
        dir.path(),
        CgroupMode::Auto,
        cpus.clone(),
        Chain::Wrapped,
        zygotes,
    );
    let (paths, mut rc) = launch(&ex, cid(id), "sleep 600", &Limits::default());
    assert_eq!(rc.from_zygote(), zygotes > 0);
    let pid: i32 = wait_file(&paths.pid_file).trim().parse().unwrap();
    assert_eq!(
        status_field(pid, "Cpus_allowed_list"),
        hw::cpulist::format(&cpus)
    );
    if ex.has_cpuset_cgroup() {
        let cg = fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
        let name = paths.container.to_string();
        assert!(
            cg.lines()
                .any(|l| l.contains("cpuset") && l.ends_with(&format!("/hotpath-test/{name}"))),
            "{cg}"
        );
    } else {
        eprintln!(
            "container_runs_on_the_work_cpus: no writable cpuset cgroup; checked the affinity only"
        );
    }
    rc.kill(KillReason::ByAppMaster);
    wait_exit(&mut rc, Duration::from_secs(10));
    wait_finished(&mut rc);
}

#[test]
fn without_cgroups_affinity_and_rlimit_apply() {
    without_cgroups_affinity_and_rlimit_apply_on(0, 7);
}

#[test]
fn without_cgroups_affinity_and_rlimit_apply_zygote() {
    without_cgroups_affinity_and_rlimit_apply_on(1, 807);
}

fn without_cgroups_affinity_and_rlimit_apply_on(zygotes: usize, id: i64) {
    let dir = tempfile::tempdir().unwrap();
    // The last CPU this test may use: not what a child would inherit by default.
    let mine = hw::affinity::current_cpus().unwrap();
    let cpu = *mine.last().unwrap();
    let ex = executor_z(
        dir.path(),
        CgroupMode::Off,
        vec![cpu],
        Chain::Wrapped,
        zygotes,
    );
    assert!(!ex.has_memory_cgroup() && !ex.has_cpuset_cgroup());
    let limit = 512u64 << 20;
    let (paths, mut rc) = launch(
        &ex,
        cid(id),
        "sleep 600",
        &Limits {
            memory_bytes: Some(limit),
            cpus: vec![],
        },
    );
    assert!(rc.cgroup().is_none());
    assert_eq!(rc.from_zygote(), zygotes > 0);
    let pid: i32 = wait_file(&paths.pid_file).trim().parse().unwrap();
    assert_eq!(status_field(pid, "Cpus_allowed_list"), cpu.to_string());
    let limits = fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let data = limits
        .lines()
        .find(|l| l.starts_with("Max data size"))
        .unwrap();
    let nums: Vec<&str> = data.split_whitespace().skip(3).take(2).collect();
    assert_eq!(nums, [limit.to_string(), limit.to_string()], "{data}");
    rc.kill(KillReason::AfterAppCompletion);
    let e = wait_exit(&mut rc, Duration::from_secs(10));
    assert_eq!(e.exit_status(), -107);
}

#[test]
fn recover_running_and_exited_containers() {
    let dir = tempfile::tempdir().unwrap();
    let ex = executor(dir.path(), CgroupMode::Auto, the_work_cpus());
    // Still running: the first agent goes away without killing it.
    let (paths, rc) = launch(&ex, cid(8), "sleep 600", &Limits::default());
    let pid: i32 = wait_file(&paths.pid_file).trim().parse().unwrap();
    drop(rc);
    assert!(alive(pid));
    // The wrapper records the exit code after SIGTERM; Java's 250 ms before SIGKILL can pass
    // before a loaded machine schedules it (Java's wrapper has the same race), so this agent
    // waits longer.
    let again = {
        let dirs = NmDirs {
            local_dirs: vec![dir.path().join("local0"), dir.path().join("local1")],
            log_dirs: vec![dir.path().join("logs")],
        };
        let mut cfg = ExecutorConfig::new(dirs, the_work_cpus());
        cfg.chain = Chain::Wrapped;
        cfg.cgroups = CgroupMode::Auto;
        cfg.hierarchy = "hotpath-test".into();
        cfg.zygotes = 0;
        cfg.sigkill_delay = Duration::from_secs(3);
        Executor::new(cfg)
    };
    let p2 = again.paths("hp-test", cid(8)).unwrap();
    assert_eq!(p2, paths);
    assert_eq!(again.recover(&p2), Recovered::Running { pid });
    let mut w = again.watch(&p2, pid);
    assert!(w.poll().is_none());
    w.kill(KillReason::ByResourceManager);
    let e = wait_exit(&mut w, Duration::from_secs(10));
    assert_eq!(e.exit_status(), -106);
    assert_eq!(e.exit_code, 143, "the wrapper recorded the code");
    wait_dead(pid);
    wait_finished(&mut w);
    assert_eq!(again.recover(&p2), Recovered::Exited { code: 143 });

    // Exited while the agent was away.
    let (paths, mut rc) = launch(&ex, cid(9), "exit 7", &Limits::default());
    wait_exit(&mut rc, Duration::from_secs(20));
    assert_eq!(again.recover(&paths), Recovered::Exited { code: 7 });

    // Never started, and a dead pid without an exit code.
    let never = again.paths("hp-test", cid(10)).unwrap();
    assert_eq!(again.recover(&never), Recovered::Lost);
    fs::create_dir_all(&never.private_dir).unwrap();
    fs::write(&never.pid_file, "999999999\n").unwrap();
    assert_eq!(again.recover(&never), Recovered::Lost);
    fs::write(&never.pid_file, "garbage").unwrap();
    assert_eq!(again.recover(&never), Recovered::Lost);
}

#[test]
fn leftovers_of_an_exited_container_are_killed() {
    let dir = tempfile::tempdir().unwrap();
    let ex = executor(dir.path(), CgroupMode::Auto, the_work_cpus());
    let (paths, mut rc) = launch(
        &ex,
        cid(11),
        "sleep 600 & echo \\$! > <LOG_DIR>/grandchild; exit 0",
        &Limits::default(),
    );
    let e = wait_exit(&mut rc, Duration::from_secs(20));
    assert_eq!(e.exit_status(), 0);
    let gc: i32 = wait_file(&paths.log_dir().join("grandchild"))
        .trim()
        .parse()
        .unwrap();
    wait_finished(&mut rc);
    wait_dead(gc);
}

#[test]
fn kill_without_a_pid_file_kills_the_wrapper() {
    let dir = tempfile::tempdir().unwrap();
    let dirs = NmDirs {
        local_dirs: vec![dir.path().join("local")],
        log_dirs: vec![dir.path().join("logs")],
    };
    let mut cfg = ExecutorConfig::new(dirs, the_work_cpus());
    cfg.hierarchy = "hotpath-test".into();
    cfg.process_kill_wait = Duration::from_millis(200);
    let ex = Executor::new(cfg);
    let paths = ex.paths("hp-test", cid(12)).unwrap();
    ex.prepare(
        &paths,
        &PrepareInput {
            launch_script: "#!/bin/bash\nexit 0\n",
            tokens: EMPTY_HDTS,
        },
    )
    .unwrap();
    // A session script that never writes the pid file.
    fs::write(&paths.session_script, "#!/bin/bash\nsleep 600\n").unwrap();
    let mut rc = ex.spawn(&paths, &[], &Limits::default()).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let t = Instant::now();
    rc.kill(KillReason::ByAppMaster);
    assert!(t.elapsed() < Duration::from_millis(100), "kill blocked");
    let e = wait_exit(&mut rc, Duration::from_secs(10));
    assert!(t.elapsed() >= Duration::from_millis(200));
    assert_eq!(e.exit_status(), -105);
    assert_eq!(e.exit_code, 137);
    assert_eq!(
        e.class.diagnostics_at(T),
        format!(
            "{S}Container killed by the ApplicationMaster.\n\
{S}Container terminated before pid file created.\n"
        )
    );
    wait_finished(&mut rc);
}

/// After an agent restart, the empty cgroups of containers no agent tracks go (those left by
/// an agent killed −9); kept names, other dirs, cgroups with processes and young ones stay.
/// The same walk removes the empty cgroups of zygote pools whose agent is gone (and only
/// those: a live agent's pool and a busy cgroup stay).
#[test]
fn stale_zygote_cgroups_are_removed_in_the_same_walk() {
    use nm_runtime::cgroups::Cgroups;
    use std::collections::HashSet;
    let name = format!("hotpath-stale-zygotes-{}", std::process::id());
    let cg = match Cgroups::probe(&name) {
        Ok(c) => c,
        Err(why) => {
            eprintln!("SKIPPED stale_zygote_cgroups_are_removed_in_the_same_walk: {why}");
            return;
        }
    };
    // a pid that ran and is gone
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let gone_pid = gone.id();
    gone.wait().unwrap();
    let dead = format!("zygote-{gone_pid}-1-0");
    let live = format!("zygote-{}-1-0", std::process::id());
    let stale_container = "container_1700000000000_0001_01_000002";
    for n in [&dead, &live, stale_container] {
        for b in cg.base_dirs() {
            fs::create_dir(b.join(n)).unwrap();
        }
    }
    let exists = |n: &str| cg.base_dirs().iter().any(|d| d.join(n).exists());
    let n = cg.remove_stale_containers(&HashSet::new(), Duration::ZERO);
    assert_eq!(
        n,
        2 * cg.base_dirs().len(),
        "the dead pool's and the container's"
    );
    assert!(!exists(&dead) && !exists(stale_container));
    assert!(exists(&live), "this process's pool");
    for b in cg.base_dirs() {
        fs::remove_dir(b.join(&live)).unwrap();
        fs::remove_dir(&b).unwrap();
    }
}

#[test]
fn stale_container_cgroups_are_removed_at_restart() {
    use nm_runtime::cgroups::Cgroups;
    use std::collections::HashSet;
    let name = format!("hotpath-stale-{}", std::process::id());
    let cg = match Cgroups::probe(&name) {
        Ok(c) => c,
        Err(why) => {
            eprintln!("SKIPPED stale_container_cgroups_are_removed_at_restart: {why}");
            return;
        }
    };
    let cpus = the_work_cpus()
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let stale = "container_1700000000000_0001_01_000002";
    let kept = "container_1700000000000_0001_01_000003";
    let busy = "container_1700000000000_0001_01_000004";
    for n in [stale, kept] {
        cg.create(n, Some(64 << 20), &cpus).unwrap();
    }
    let other: Vec<PathBuf> = cg.base_dirs().iter().map(|b| b.join("pool-x")).collect();
    for d in &other {
        fs::create_dir(d).unwrap();
    }
    let mut sleeper = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let b = cg.create(busy, Some(64 << 20), &cpus).unwrap();
    for f in b.procs_files().unwrap() {
        fs::write(f.to_str().unwrap(), sleeper.id().to_string()).unwrap();
    }
    let exists = |n: &str| cg.base_dirs().iter().any(|d| d.join(n).exists());
    let keep: HashSet<String> = [kept.to_string()].into();

    // Young: nothing goes.
    assert_eq!(
        cg.remove_stale_containers(&keep, Duration::from_secs(60)),
        0
    );
    assert!(exists(stale));
    // Old enough: the untracked empty one goes, in every hierarchy.
    let n = cg.remove_stale_containers(&keep, Duration::ZERO);
    assert_eq!(n, cg.base_dirs().len(), "one per hierarchy");
    assert!(!exists(stale));
    assert!(exists(kept), "tracked");
    assert!(exists(busy), "has a process");
    assert!(other.iter().all(|d| d.exists()), "not a container's");

    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    // Its process gone, the busy one goes too; then clean up.
    assert_eq!(
        cg.remove_stale_containers(&HashSet::new(), Duration::ZERO),
        2 * cg.base_dirs().len()
    );
    for d in &other {
        fs::remove_dir(d).unwrap();
    }
    for base in cg.base_dirs() {
        fs::remove_dir(&base).unwrap();
    }
}
