//! Hadoop 3.5.0's own MapReduce jobs on `hotpath rm` with two hotpath agents: the MR client
//! (peer mode `mr-client`: no RM of its own, the job configuration `mr_jobs.rs`' Java-RM peer
//! gives, `file://` staging under the peer's temp dir, `yarn.is.minicluster` so that the AM and
//! tasks get the peer's class path) submits to our RM, Hadoop's `MRAppMaster` registers with
//! it, allocates its maps and reducers from it, and the client follows the job through the
//! application reports (the AM's host and RPC port) as on a Java RM.
//!
//! - the word count of `mr_jobs.rs` (Hadoop's `TokenCounterMapper` and `IntSumReducer`, five
//!   input files, two reducers): succeeds, maps on both agents, every map fetched by each
//!   reducer, no shuffle errors, its output equal to the counts computed here;
//! - then a map-only `SleepJob` on the same cluster: succeeds with its maps on both agents.
//!
//! One test (one RM, two agents, one client JVM for both jobs). The agents are those of
//! `mr_jobs.rs` (1 GB each, `mapreduce_shuffle` on an ephemeral port); the RM's minimum
//! allocation is 128 MB as the Java peer's (else every 256 MB task would take 1 GB).

use std::path::Path;
use std::time::{Duration, Instant};

use peer_harness::{Mode, Peer};
use serde_json::Value;

use crate::daemon::{self, start_rm_daemon, Daemon};
use crate::mr_jobs::{
    agent_sets, attempt_hosts, counter, read_wordcount_output, running_nodes, write_wordcount_input,
};

const IPS: [&str; 2] = ["127.0.0.75", "127.0.0.76"];

/// Fields drop in order: the client (killing a job left running), the agents, then the RM.
struct Cluster {
    peer: Peer,
    jobs: Vec<String>,
    agents: Vec<Daemon>,
    rm: Daemon,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for job in std::mem::take(&mut self.jobs) {
            let done = self.peer.command(&format!("status {job}")).is_ok_and(|s| {
                ["SUCCEEDED", "FAILED", "KILLED"].contains(&s["state"].as_str().unwrap_or(""))
            });
            if !done {
                let _ = self.peer.command(&format!("kill {job}"));
            }
        }
    }
}

fn cluster() -> Cluster {
    let rm = start_rm_daemon(
        "127.0.0.1:0",
        "127.0.0.1:0",
        "127.0.0.1:0",
        &[
            ("yarn.scheduler.minimum-allocation-mb", "128".into()),
            ("yarn.resourcemanager.am.max-attempts", "2".into()),
        ],
    );
    let rt = rm.field("resource_tracker");
    let agents: Vec<Daemon> = IPS
        .iter()
        .map(|ip| {
            let (cmd, dir) = daemon::agent_command(&rt, ip, &agent_sets());
            Daemon::spawn(cmd, dir)
        })
        .collect();
    let client = format!("yarn.resourcemanager.address={}", rm.field("client"));
    let scheduler = format!(
        "yarn.resourcemanager.scheduler.address={}",
        rm.field("scheduler")
    );
    let mut peer = Peer::start(
        Mode::MrClient,
        &[
            "--log-level",
            "WARN",
            "--set",
            &client,
            "--set",
            &scheduler,
            "--set",
            "yarn.client.nodemanager-connect.max-wait-ms=5000",
            "--set",
            "yarn.client.nodemanager-connect.retry-interval-ms=1000",
        ],
    )
    .expect("mr-client peer (peers/hadoop-mr)");
    let mut want: Vec<String> = agents.iter().map(|a| a.field("node_id")).collect();
    want.sort();
    let t0 = Instant::now();
    while running_nodes(&mut peer) != want {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "agents {want:?} not RUNNING at the RM: {:?}",
            running_nodes(&mut peer)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    Cluster {
        peer,
        jobs: Vec::new(),
        agents,
        rm,
    }
}

impl Cluster {
    /// `submit KIND ARGS`, then `wait` up to `timeout_s`: the job's final description.
    fn run(&mut self, kind_and_args: &str, timeout_s: u64) -> Value {
        let t0 = Instant::now();
        let sub = self
            .peer
            .command(&format!("submit {kind_and_args}"))
            .unwrap_or_else(|e| panic!("submit {kind_and_args}: {e}"));
        let job = sub["job_id"].as_str().expect("job_id").to_string();
        self.jobs.push(job.clone());
        let done = self
            .peer
            .command(&format!("wait {job} {timeout_s}"))
            .unwrap_or_else(|e| panic!("wait {job}: {e}\n{}", self.am_logs(&job)));
        assert_eq!(
            done["timed_out"],
            false,
            "{job} still running: {done}\n{}",
            self.am_logs(&job)
        );
        // Done: nothing to kill at the end.
        self.jobs.retain(|j| *j != job);
        eprintln!(
            "{job} ({kind_and_args}): {} after {:?}",
            done["state"],
            t0.elapsed()
        );
        done
    }

    /// The tail of every AM container's `syslog` and `stderr` of the job (the agents' log
    /// dirs), and the client's log: what the MR AM said when it tripped over the RM.
    fn am_logs(&self, job: &str) -> String {
        let app = job.replacen("job_", "application_", 1);
        let mut out = String::new();
        for a in &self.agents {
            let dir = a.dir().join("logs").join(&app);
            let Ok(rd) = std::fs::read_dir(&dir) else {
                continue;
            };
            for c in rd.flatten() {
                let name = c.file_name().to_string_lossy().into_owned();
                if !name.ends_with("_000001") {
                    continue;
                }
                for f in ["syslog", "stderr"] {
                    if let Ok(t) = std::fs::read_to_string(c.path().join(f)) {
                        out.push_str(&format!("--- {name}/{f}\n{}\n", tail(&t, 40)));
                    }
                }
            }
        }
        out.push_str(&format!(
            "--- mr-client log\n{}\n--- rm {}",
            self.peer.log_tail(30),
            self.rm.field("client")
        ));
        out
    }

    /// The agents' IPs the successful attempts ran on, `map` or reduce ones.
    fn hosts_of(&self, job: &Value, map: bool) -> Vec<String> {
        attempt_hosts(job, map, &IPS)
    }

    fn explain(&self, job: &Value) -> String {
        let id = job["job_id"].as_str().unwrap_or("");
        format!(
            "state {} failure_info {}\nfailed attempts: {}\n{}",
            job["state"],
            job["failure_info"],
            job["failed_diagnostics"],
            self.am_logs(id)
        )
    }
}

fn tail(s: &str, lines: usize) -> String {
    let v: Vec<&str> = s.lines().collect();
    v[v.len().saturating_sub(lines)..].join("\n")
}

fn wordcount(c: &mut Cluster, work: &Path) {
    let input = work.join("in");
    let output = work.join("out");
    let expected = write_wordcount_input(&input);
    let job = c.run(
        &format!(
            "wordcount in={} out={} r=2",
            input.display(),
            output.display()
        ),
        150,
    );
    assert_eq!(job["state"], "SUCCEEDED", "{}", c.explain(&job));
    assert_eq!(
        c.hosts_of(&job, true).len(),
        2,
        "maps on both agents: {job}"
    );
    for name in [
        "BAD_ID",
        "CONNECTION",
        "IO_ERROR",
        "WRONG_LENGTH",
        "WRONG_MAP",
        "WRONG_REDUCE",
    ] {
        assert_eq!(
            job["counters"]["Shuffle Errors"][name].as_i64(),
            Some(0),
            "{name}: {job}"
        );
    }
    assert_eq!(
        counter(
            &job,
            "org.apache.hadoop.mapreduce.TaskCounter",
            "SHUFFLED_MAPS"
        ),
        Some(10),
        "each of two reducers fetched each of five maps: {job}"
    );
    assert_eq!(
        counter(
            &job,
            "org.apache.hadoop.mapreduce.JobCounter",
            "TOTAL_LAUNCHED_REDUCES"
        ),
        Some(2),
        "{job}"
    );
    let got = read_wordcount_output(&output);
    assert_eq!(got.len(), expected.len(), "distinct words");
    assert_eq!(got, expected);
}

fn map_only(c: &mut Cluster) {
    let job = c.run("sleep m=5 r=0 mt=500", 120);
    assert_eq!(job["state"], "SUCCEEDED", "{}", c.explain(&job));
    assert_eq!(
        counter(
            &job,
            "org.apache.hadoop.mapreduce.JobCounter",
            "TOTAL_LAUNCHED_MAPS"
        ),
        Some(5),
        "{job}"
    );
    assert_eq!(
        counter(
            &job,
            "org.apache.hadoop.mapreduce.TaskCounter",
            "MAP_INPUT_RECORDS"
        ),
        Some(5),
        "one record per map: {job}"
    );
    assert_eq!(
        c.hosts_of(&job, true).len(),
        2,
        "maps on both agents: {job}"
    );
}

#[test]
fn mapreduce_wordcount_and_map_only_jobs_run_on_hotpath_rm() {
    let work = tempfile::tempdir().unwrap();
    let mut c = cluster();
    wordcount(&mut c, work.path());
    map_only(&mut c);
}
