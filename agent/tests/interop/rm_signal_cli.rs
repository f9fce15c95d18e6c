//! `yarn container -signal` (Hadoop 3.5.0's own `ApplicationCLI`, a JVM per call) on containers
//! our agent runs, against (a) the Java RM (`yarn-rm --profile agents`, the agent its only
//! NodeManager) and (b) `hotpath rm` with `yarn.acl.enable`: the RM relays each signal in the
//! node's heartbeat response (`containers_to_signal`) and the agent signals the container's
//! process group. Two shell containers of one `hotpath app run` application note what they
//! receive: the first gets OUTPUT_THREAD_DUMP (SIGQUIT, it keeps running) then
//! GRACEFUL_SHUTDOWN (SIGTERM, it dies of it: exit 143), the second FORCEFUL_SHUTDOWN (SIGKILL:
//! 137); the application master hears those real exit codes through the RM. A container the
//! RM does not have is refused with Java's "Trying to signal an absent container"; on
//! `hotpath rm` a user without MODIFY_APP is refused with Java's AccessControlException.
//!
//! About 40 s per RM (JVM start-ups, one per CLI call).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use peer_harness::{Mode, Shared};
use serde_json::Value;

use crate::app_run::{app_run, RunResult};
use crate::daemon::{start_agent, start_rm_daemon, Daemon};

static JAVA_RM: Shared = Shared::new(Mode::YarnRm, &["--profile", "agents"]);

/// The user `hotpath app run` submits as (the application's owner).
fn whoami() -> String {
    yarn_client::application_client::current_user()
}

fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `yarn container ARGS` as `user`, with `conf` (holding yarn-site.xml) first on the classpath.
fn yarn_container(conf: &Path, user: &str, args: &[&str]) -> Output {
    let build = peer_harness::build::ensure_built().expect("the Hadoop peer builds");
    let mut cp = std::ffi::OsString::from(conf);
    cp.push(":");
    cp.push(&build.classpath);
    let out = Command::new(&build.java)
        .arg("-Xmx256m")
        .arg("-cp")
        .arg(cp)
        .arg("org.apache.hadoop.yarn.client.cli.ApplicationCLI")
        // As the `yarn` script runs it: the subcommand first (a generic `-D` before it makes
        // the CLI take the wrong option set).
        .arg("container")
        .args(args)
        .env("HADOOP_USER_NAME", user)
        .env_remove("HADOOP_CONF_DIR")
        .output()
        .expect("running ApplicationCLI");
    eprintln!("yarn container {args:?} as {user}: {}", text(&out));
    out
}

/// The probe: each shell container writes its id in `<probe>/<id>.ready` and notes the
/// signals its shell and a child of it (same process group) receive in `<probe>/<id>.signals`.
/// SIGTERM is noted, then taken as the default would: the shell dies of it.
fn probe_command(probe: &Path) -> String {
    let f = format!("{}/$CONTAINER_ID.signals", probe.display());
    format!(
        "(trap 'echo CHILD-QUIT >> {f}' QUIT; trap 'echo CHILD-TERM >> {f}; exit 0' TERM; \
           while true; do sleep 0.1; done) & \
         trap 'echo QUIT >> {f}' QUIT; \
         trap 'echo TERM >> {f}; trap - TERM; kill -TERM $$' TERM; \
         touch {}/$CONTAINER_ID.ready; while true; do sleep 0.1; done",
        probe.display()
    )
}

fn ready_containers(probe: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(probe)
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| {
                    e.file_name()
                        .to_str()
                        .and_then(|n| n.strip_suffix(".ready"))
                        .map(String::from)
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn noted(probe: &Path, cid: &str, what: &str) -> bool {
    std::fs::read_to_string(probe.join(format!("{cid}.signals")))
        .is_ok_and(|s| s.lines().any(|l| l == what))
}

/// Runs the signal scenario against the RM `conf` names; `hotpath app run` uses the same conf.
fn signals_through(conf: &Path, log_tail: &dyn Fn() -> String) {
    let probe = tempfile::tempdir().unwrap();
    let cmd = probe_command(probe.path());
    let conf_owned: PathBuf = conf.to_path_buf();
    let run = std::thread::spawn(move || {
        app_run(
            &conf_owned,
            &["--containers", "2", "--memory", "256", "--timeout", "240"],
            &cmd,
        )
    });
    wait_for(
        "two shell containers running",
        Duration::from_secs(90),
        || ready_containers(probe.path()).len() == 2,
    );
    let ids = ready_containers(probe.path());
    let (a, b) = (ids[0].as_str(), ids[1].as_str());
    let me = whoami();

    // OUTPUT_THREAD_DUMP: SIGQUIT to the group, the container keeps running.
    let out = yarn_container(conf, &me, &["-signal", a, "OUTPUT_THREAD_DUMP"]);
    assert_eq!(out.status.code(), Some(0), "{}\n{}", text(&out), log_tail());
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&format!("Signalling container {a}")),
        "{}",
        text(&out)
    );
    wait_for("SIGQUIT in a's group", Duration::from_secs(30), || {
        noted(probe.path(), a, "QUIT") && noted(probe.path(), a, "CHILD-QUIT")
    });
    assert!(!noted(probe.path(), a, "TERM"));
    // GRACEFUL_SHUTDOWN to a, FORCEFUL_SHUTDOWN to b.
    let out = yarn_container(conf, &me, &["-signal", a, "GRACEFUL_SHUTDOWN"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    wait_for("SIGTERM in a's group", Duration::from_secs(30), || {
        noted(probe.path(), a, "TERM") && noted(probe.path(), a, "CHILD-TERM")
    });
    let out = yarn_container(conf, &me, &["-signal", b, "FORCEFUL_SHUTDOWN"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));

    // The application ends with the real exit codes: 143 (SIGTERM), 137 (SIGKILL).
    let r: RunResult = run.join().unwrap();
    assert_eq!(r.exits(), ["137", "143"], "{r:#?}\n{}", log_tail());
    assert!(!noted(probe.path(), b, "TERM"), "SIGKILL cannot be trapped");

    // A container the RM does not have: Java's refusal.
    let absent = format!("{}99", &a[..a.len() - 2]);
    let out = yarn_container(conf, &me, &["-signal", &absent, "GRACEFUL_SHUTDOWN"]);
    assert_ne!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains(&format!("Trying to signal an absent container {absent}")),
        "{}",
        text(&out)
    );
}

fn running_nodes(v: &Value) -> Vec<String> {
    v["nodes"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|n| n["state"] == "RUNNING")
                .filter_map(|n| n["node_id"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn yarn_container_signal_through_the_java_rm_reaches_our_agents_containers() {
    let mut rm = JAVA_RM.lock().expect("yarn-rm --profile agents");
    let rt = rm.ready()["resource_tracker"].as_str().unwrap().to_string();
    let agent: Daemon = start_agent(&rt, "127.0.0.81");
    let id = agent.field("node_id");
    wait_for(
        "the agent RUNNING at the Java RM",
        Duration::from_secs(60),
        || running_nodes(&rm.command("nodes").unwrap_or(Value::Null)) == [id.clone()],
    );
    let conf = rm.conf_dir().to_path_buf();
    let tail = || rm.log_tail(60);
    signals_through(&conf, &tail);
}

#[test]
fn yarn_container_signal_through_hotpath_rm_with_acls() {
    let rm = start_rm_daemon(
        "127.0.0.1:0",
        "127.0.0.1:0",
        "127.0.0.1:0",
        &[
            ("yarn.acl.enable", "true".into()),
            ("yarn.admin.acl", "admin".into()),
            // Java's default makes everyone a queue admin (who may modify any application).
            (
                "yarn.scheduler.capacity.root.acl_administer_queue",
                " ".into(),
            ),
        ],
    );
    let rt = rm.field("resource_tracker");
    let _agent = start_agent(&rt, "127.0.0.82");
    let conf = tempfile::tempdir().unwrap();
    let site = format!(
        "<?xml version=\"1.0\"?>\n<configuration>\n{}</configuration>\n",
        [
            ("yarn.resourcemanager.address", rm.field("client")),
            (
                "yarn.resourcemanager.scheduler.address",
                rm.field("scheduler"),
            ),
            ("yarn.resourcemanager.resource-tracker.address", rt.clone()),
            ("yarn.acl.enable", "true".into()),
            // Fail fast should the RM be unreachable (the default retries for 15 minutes).
            ("yarn.resourcemanager.connect.max-wait.ms", "20000".into()),
            (
                "yarn.resourcemanager.connect.retry-interval.ms",
                "1000".into()
            ),
        ]
        .iter()
        .map(|(k, v)| format!("<property><name>{k}</name><value>{v}</value></property>\n"))
        .collect::<String>()
    );
    std::fs::write(conf.path().join("yarn-site.xml"), site).unwrap();
    let tail = || String::new();

    // MODIFY_APP first, on a running application's container: mallory is neither its owner
    // nor an admin.
    let probe = tempfile::tempdir().unwrap();
    let cmd = probe_command(probe.path());
    let conf_owned = conf.path().to_path_buf();
    let run = std::thread::spawn(move || {
        app_run(
            &conf_owned,
            &["--containers", "1", "--memory", "256", "--timeout", "120"],
            &cmd,
        )
    });
    wait_for("a shell container running", Duration::from_secs(90), || {
        ready_containers(probe.path()).len() == 1
    });
    let c = ready_containers(probe.path()).remove(0);
    let app = {
        // container_<ts>_<n>_<attempt>_<id> → application_<ts>_<n>
        let p: Vec<&str> = c.split('_').collect();
        format!("application_{}_{}", p[1], p[2])
    };
    let out = yarn_container(
        conf.path(),
        "mallory",
        &["-signal", &c, "FORCEFUL_SHUTDOWN"],
    );
    assert_ne!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains(&format!(
            "org.apache.hadoop.security.AccessControlException: User mallory cannot perform \
             operation MODIFY_APP on {app}"
        )),
        "{}",
        text(&out)
    );
    std::thread::sleep(Duration::from_millis(600));
    assert!(
        std::fs::read_to_string(probe.path().join(format!("{c}.signals"))).is_err(),
        "a refused signal reaches nothing"
    );
    // The owner may: FORCEFUL_SHUTDOWN ends it with 137.
    let out = yarn_container(
        conf.path(),
        &whoami(),
        &["-signal", &c, "FORCEFUL_SHUTDOWN"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let r = run.join().unwrap();
    assert_eq!(r.exits(), ["137"], "{r:#?}");

    signals_through(conf.path(), &tail);
}
