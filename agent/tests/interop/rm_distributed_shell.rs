//! Hadoop's own programs on `hotpath rm` with two `hotpath agent`s as its NodeManagers:
//! DistributedShell's client and ApplicationMaster (`hadoop-yarn-applications-distributedshell`
//! 3.4.2, the newest published, on the peer's Hadoop 3.5.0 runtime), and the `yarn queue`,
//! `mapred queue` and `yarn application` command-line classes, each run as a JVM of its own with
//! a `yarn-site.xml` naming the RM (and a `mapred-site.xml` naming YARN). The DistributedShell client asks what Java's RM answers
//! (`getResourceTypeInfo`, `getQueueInfo`, `getQueueUserAcls`, `getResourceProfiles` refused as
//! a feature that is off), its AM needs the environment Java's AMLauncher sets
//! (`APP_SUBMIT_TIME_ENV`), and the client's exit status says how the shell commands ended: 0
//! when they all succeeded, 2 (`Client.main`) when one failed.
//!
//! One test, so that one RM and two agents serve every step and are stopped at its end (a
//! cluster kept in a static would outlive the test binary); about 45 s, most of it JVM
//! start-ups.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::daemon::{start_agent, start_rm_daemon, Daemon};

const DS_CLIENT: &str = "org.apache.hadoop.yarn.applications.distributedshell.Client";

struct Cluster {
    build: peer_harness::build::Build,
    /// A directory holding `yarn-site.xml`, first on every JVM's classpath.
    conf: tempfile::TempDir,
    ds_jar: PathBuf,
    _agents: Vec<Daemon>,
    _rm: Daemon,
}

fn start() -> Cluster {
    let build = peer_harness::build::ensure_built().expect("the Hadoop peer builds");
    let rm = start_rm_daemon("127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", &[]);
    let rt = rm.field("resource_tracker");
    let agents = vec![
        start_agent(&rt, "127.0.0.51"),
        start_agent(&rt, "127.0.0.52"),
    ];
    let jars = build.classpath.to_string_lossy().to_string();
    let ds_jar = jars
        .split(':')
        .find(|j| j.contains("hadoop-yarn-applications-distributedshell"))
        .map(PathBuf::from)
        .expect("the peer's classpath has the DistributedShell jar (peers/hadoop/pom.xml)");
    let conf = tempfile::tempdir().unwrap();
    // The AM's classpath (`yarn.application.classpath`, which the DistributedShell client puts
    // in the AM's CLASSPATH): this configuration, then the peer's classes and jars.
    let app_cp = std::iter::once(conf.path().display().to_string())
        .chain(jars.split(':').map(String::from))
        .collect::<Vec<_>>()
        .join(",");
    let site = format!(
        "<?xml version=\"1.0\"?>\n<configuration>\n{}</configuration>\n",
        [
            ("yarn.resourcemanager.address", rm.field("client")),
            (
                "yarn.resourcemanager.scheduler.address",
                rm.field("scheduler")
            ),
            (
                "yarn.resourcemanager.resource-tracker.address",
                rt.to_string(),
            ),
            ("yarn.application.classpath", app_cp),
            // One failed connection is enough to know (the default retries for 15 minutes).
            ("yarn.resourcemanager.connect.max-wait.ms", "20000".into()),
        ]
        .iter()
        .map(|(k, v)| format!("<property><name>{k}</name><value>{v}</value></property>\n"))
        .collect::<String>()
    );
    std::fs::write(conf.path().join("yarn-site.xml"), site).unwrap();
    // `mapred queue` asks YARN (not the local job runner).
    std::fs::write(
        conf.path().join("mapred-site.xml"),
        "<?xml version=\"1.0\"?>\n<configuration><property><name>mapreduce.framework.name</name>\
         <value>yarn</value></property></configuration>\n",
    )
    .unwrap();
    let c = Cluster {
        build,
        conf,
        ds_jar,
        _agents: agents,
        _rm: rm,
    };
    // Both agents registered and RUNNING before anything is submitted.
    let t0 = Instant::now();
    loop {
        let out = c.java(
            "org.apache.hadoop.yarn.client.cli.NodeCLI",
            &["node", "-list"],
        );
        if stdout(&out).contains("Total Nodes:2") {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "two agents RUNNING at the RM: {}",
            text(&out)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    c
}

impl Cluster {
    /// Runs `main_class` with `args` in a JVM of its own (this configuration first on its
    /// classpath), to its end.
    fn java(&self, main_class: &str, args: &[&str]) -> Output {
        self.command(main_class, args).output().unwrap()
    }

    fn command(&self, main_class: &str, args: &[&str]) -> Command {
        let mut cp = std::ffi::OsString::from(self.conf.path());
        cp.push(":");
        cp.push(&self.build.classpath);
        let mut c = Command::new(&self.build.java);
        c.arg("-Xmx256m")
            .arg("-cp")
            .arg(cp)
            .arg(main_class)
            .args(args)
            .env("HADOOP_USER_NAME", whoami())
            .current_dir(self.conf.path());
        c
    }

    /// DistributedShell: `shell_command` in `containers` containers of 256 MB.
    fn distributed_shell(&self, shell_command: &str, containers: u32) -> Output {
        let n = containers.to_string();
        let jar = self.ds_jar.display().to_string();
        self.java(
            DS_CLIENT,
            &[
                "-jar",
                &jar,
                "-shell_command",
                shell_command,
                "-num_containers",
                &n,
                "-container_memory",
                "256",
                "-master_memory",
                "512",
                "-timeout",
                "120000",
            ],
        )
    }
}

fn whoami() -> String {
    std::env::var("USER").unwrap_or_else(|_| "root".into())
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        o.status.code(),
        stdout(o),
        tail(&String::from_utf8_lossy(&o.stderr), 80)
    )
}

fn tail(s: &str, lines: usize) -> String {
    let v: Vec<&str> = s.lines().collect();
    v[v.len().saturating_sub(lines)..].join("\n")
}

fn exists(p: &Path) -> bool {
    p.exists()
}

fn distributed_shell_succeeds_on_hotpath_rm_and_agents(c: &Cluster) {
    assert!(exists(&c.ds_jar));
    let out = c.distributed_shell("echo hello from $CONTAINER_ID", 2);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        log.contains("Application has completed successfully"),
        "{}",
        text(&out)
    );
}

fn distributed_shell_reports_a_failed_command_with_the_clients_failure_exit(c: &Cluster) {
    let out = c.distributed_shell("exit 3", 2);
    // Client.main: System.exit(2) when the application did not succeed.
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        log.contains("Application did finished unsuccessfully")
            || log.contains("Application failed to complete successfully"),
        "{}",
        text(&out)
    );
}

fn queue_clis_see_the_capacity_schedulers_root_and_default(c: &Cluster) {
    let out = c.java(
        "org.apache.hadoop.yarn.client.cli.QueueCLI",
        &["queue", "-status", "root"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let s = stdout(&out);
    for want in [
        "Queue Name : root",
        "Queue Path : root",
        "State : RUNNING",
        "Capacity : 100.00%",
        "Maximum Capacity : 100.00%",
    ] {
        assert!(s.contains(want), "{want:?} in\n{}", text(&out));
    }
    // An unknown queue: Java's RM answers without queue info, and the CLI says so.
    let out = c.java(
        "org.apache.hadoop.yarn.client.cli.QueueCLI",
        &["queue", "-status", "nosuch"],
    );
    assert_eq!(
        out.status.code(),
        Some(-1i32 as u8 as i32),
        "{}",
        text(&out)
    );
    assert!(
        text(&out).contains("Cannot get queue from RM by queueName = nosuch"),
        "{}",
        text(&out)
    );
    // `mapred queue -list`: every queue under root (getAllQueues).
    let out = c.java("org.apache.hadoop.mapred.JobQueueClient", &["-list"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let s = stdout(&out);
    assert!(s.contains("Queue Name : default"), "{}", text(&out));
    assert!(s.contains("Queue State : running"), "{}", text(&out));
}

fn application_cli_updates_priority_and_moves_a_running_application(c: &Cluster) {
    // A DistributedShell whose one container sleeps while the CLI works on the application.
    let jar = c.ds_jar.display().to_string();
    let mut ds = c
        .command(
            DS_CLIENT,
            &[
                "-jar",
                &jar,
                "-shell_command",
                "sleep 20",
                "-num_containers",
                "1",
                "-container_memory",
                "256",
                "-master_memory",
                "512",
            ],
        )
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let app = loop {
        let out = c.java(
            "org.apache.hadoop.yarn.client.cli.ApplicationCLI",
            &["application", "-list", "-appStates", "RUNNING"],
        );
        if let Some(id) = stdout(&out)
            .split_whitespace()
            .find(|w| w.starts_with("application_"))
        {
            break id.to_string();
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "a RUNNING DistributedShell: {}",
            text(&out)
        );
        std::thread::sleep(Duration::from_millis(300));
    };
    // yarn.cluster.max-application-priority is 0 (Java's default): the priority is capped.
    let out = c.java(
        "org.apache.hadoop.yarn.client.cli.ApplicationCLI",
        &["application", "-appId", &app, "-updatePriority", "5"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        stdout(&out).contains("to cluster max priority OR keeping old priority"),
        "{}",
        text(&out)
    );
    // Moving to the queue it is in succeeds; to a queue that does not exist is Java's refusal.
    let out = c.java(
        "org.apache.hadoop.yarn.client.cli.ApplicationCLI",
        &["application", "-movetoqueue", &app, "-queue", "default"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        stdout(&out).contains(&format!("Moving application {app} to queue default")),
        "{}",
        text(&out)
    );
    let out = c.java(
        "org.apache.hadoop.yarn.client.cli.ApplicationCLI",
        &["application", "-movetoqueue", &app, "-queue", "nosuch"],
    );
    assert_ne!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains("The specified Queue: nosuch doesn't exist"),
        "{}",
        text(&out)
    );
    let out = c.java(
        "org.apache.hadoop.yarn.client.cli.ApplicationCLI",
        &["application", "-kill", &app],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let status = ds.wait().unwrap();
    assert_eq!(status.code(), Some(2), "a killed DistributedShell fails");
}

#[test]
fn hadoops_distributed_shell_and_clis_on_hotpath_rm() {
    let c = start();
    distributed_shell_succeeds_on_hotpath_rm_and_agents(&c);
    distributed_shell_reports_a_failed_command_with_the_clients_failure_exit(&c);
    queue_clis_see_the_capacity_schedulers_root_and_default(&c);
    application_cli_updates_priority_and_moves_a_running_application(&c);
}
