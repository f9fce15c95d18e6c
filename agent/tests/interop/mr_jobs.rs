//! Hadoop 3.5.0's own MapReduce jobs on two hotpath agents under the Java RM (peer `mr-rm`:
//! `MiniMRYarnCluster` with no NodeManagers of its own, Hadoop's MR client in the same JVM;
//! the AM and tasks get that JVM's unshaded class path through `yarn.is.minicluster`).
//!
//! The agents (`hotpath agent` child processes on 127.0.0.71 and 127.0.0.72) run
//! `yarn.nodemanager.aux-services=mapreduce_shuffle` on an ephemeral shuffle port and have
//! 1 GB each, so that with the peer's job defaults (AM 512 MB, tasks 256 MB) an AM and two tasks
//! fit on one and four tasks on the other: a job of five or more maps runs maps on both.
//!
//! - a map-only `SleepJob` succeeds (needs the StartContainers answer to carry the shuffle
//!   port, issue 32 part 1, and everything MR needs beyond DistributedShell, part 2);
//! - a word count (Hadoop's `TokenCounterMapper` and `IntSumReducer`) over five input files
//!   with two reducers succeeds with every map on one of the agents, maps on both, its output
//!   equal to the counts computed here, `REDUCE_SHUFFLE_BYTES` > 0 and every `Shuffle Errors`
//!   counter 0 (needs the shuffle service itself);
//! - the same word count with the agent that does not hold the AM killed −9 once every map is
//!   done and restarted empty: the maps that ran there run again and the job succeeds.
//!
//! One peer for the file (~8 s to start); each test starts its own two agents. Measured on the
//! 2-vCPU machine with other builds running (load 2-20): the map-only job 50-110 s, the word
//! count 70-125 s, the kill 85-130 s (an AM JVM and one JVM per task, on the one CPU the
//! agents' plan leaves for containers); 4-7 min for the file.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use peer_harness::{Mode, Shared, SharedGuard};
use serde_json::Value;

use crate::daemon::{self, Daemon};

static RM: Shared = Shared::new(Mode::MrRm, &["--log-level", "WARN"]);

const IPS: [&str; 2] = ["127.0.0.71", "127.0.0.72"];

/// Fields drop in order: the agents stop (unregistering) before the RM's lock is let go.
struct Cluster {
    agents: Vec<Daemon>,
    /// Jobs submitted through [`Cluster::submit`], killed on drop if still running (under the
    /// FIFO scheduler a job left behind by a failed test would starve the next test's job).
    jobs: Vec<String>,
    rm: SharedGuard<'static>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for job in std::mem::take(&mut self.jobs) {
            let done = self.rm.command(&format!("status {job}")).is_ok_and(|s| {
                ["SUCCEEDED", "FAILED", "KILLED"].contains(&s["state"].as_str().unwrap_or(""))
            });
            if !done {
                let _ = self.rm.command(&format!("kill {job}"));
            }
        }
    }
}

pub(crate) fn running_nodes(rm: &mut peer_harness::Peer) -> Vec<String> {
    let v = rm.command("nodes").unwrap_or(Value::Null);
    let mut n: Vec<String> = v["nodes"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|n| n["state"] == "RUNNING")
                .filter_map(|n| n["node_id"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    n.sort();
    n
}

/// The agent settings of this file: 1 GB, the MapReduce shuffle on an ephemeral port.
pub(crate) fn agent_sets() -> Vec<(&'static str, String)> {
    vec![
        ("yarn.nodemanager.resource.memory-mb", "1024".into()),
        ("yarn.nodemanager.aux-services", "mapreduce_shuffle".into()),
        ("mapreduce.shuffle.port", "0".into()),
    ]
}

fn cluster() -> Cluster {
    let mut rm = RM.lock().expect("mr-rm peer (peers/hadoop-mr)");
    let rt = rm.ready()["resource_tracker"]
        .as_str()
        .expect("resource_tracker")
        .to_string();
    let agents: Vec<Daemon> = IPS
        .iter()
        .map(|ip| {
            let (cmd, dir) = daemon::agent_command(&rt, ip, &agent_sets());
            Daemon::spawn(cmd, dir)
        })
        .collect();
    let mut want: Vec<String> = agents.iter().map(|a| a.field("node_id")).collect();
    want.sort();
    let t0 = Instant::now();
    while running_nodes(&mut rm) != want {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "agents {want:?} not alone at the RM: {:?}",
            running_nodes(&mut rm)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    Cluster {
        agents,
        jobs: Vec::new(),
        rm,
    }
}

impl Cluster {
    /// `submit KIND ARGS`: the job id.
    fn submit(&mut self, kind_and_args: &str) -> String {
        let sub = self
            .rm
            .command(&format!("submit {kind_and_args}"))
            .unwrap_or_else(|e| panic!("submit {kind_and_args}: {e}"));
        let job = sub["job_id"].as_str().expect("job_id").to_string();
        self.jobs.push(job.clone());
        job
    }

    /// `submit KIND ARGS`, then `wait` up to `timeout_s` (below the peer's 300 s command
    /// timeout, so that a slow job fails with its state rather than a dead channel): the job's
    /// final description.
    fn run(&mut self, kind_and_args: &str, timeout_s: u64) -> Value {
        let t0 = Instant::now();
        let job = self.submit(kind_and_args);
        let done = self
            .rm
            .command(&format!("wait {job} {timeout_s}"))
            .unwrap_or_else(|e| panic!("wait {job}: {e}"));
        assert_eq!(done["timed_out"], false, "{job} still running: {done}");
        eprintln!(
            "{job} ({kind_and_args}): {} after {:?}",
            done["state"],
            t0.elapsed()
        );
        done
    }

    /// The agents' IPs the successful attempts ran on, `map` or reduce ones.
    fn hosts_of(&self, job: &Value, map: bool) -> Vec<String> {
        attempt_hosts(job, map, &IPS)
    }
}

/// The hosts the successful `map` (or reduce) attempts of `job` ran on, from the shuffle
/// addresses the AM reported; each must be one of the agents' `ips`.
pub(crate) fn attempt_hosts(job: &Value, map: bool, ips: &[&str]) -> Vec<String> {
    let mut hosts: Vec<String> = job["attempts"]
        .as_array()
        .expect("attempts")
        .iter()
        .filter(|a| a["map"] == map && a["status"] == "SUCCEEDED")
        .map(|a| {
            let http = a["http"].as_str().unwrap_or("");
            let hp = http.strip_prefix("http://").unwrap_or(http);
            hp.rsplit_once(':').map_or(hp, |(h, _)| h).to_string()
        })
        .collect();
    hosts.sort();
    hosts.dedup();
    for h in &hosts {
        assert!(
            ips.contains(&h.as_str()),
            "attempt on {h}, not an agent: {job}"
        );
    }
    hosts
}

/// A job that did not succeed, with what Hadoop said (each failed attempt's first diagnostic
/// line) and the peer's log.
fn explain(job: &Value, rm: &peer_harness::Peer) -> String {
    let mut failed = String::new();
    if let Some(m) = job["failed_diagnostics"].as_object() {
        for (attempt, d) in m {
            let first = d[0].as_str().unwrap_or("").lines().next().unwrap_or("");
            failed.push_str(&format!("  {attempt}: {first}\n"));
        }
    }
    format!(
        "state {} failure_info {}\nfailed attempts:\n{failed}--- mr-rm log ---\n{}",
        job["state"],
        job["failure_info"],
        rm.log_tail(40)
    )
}

pub(crate) fn counter(job: &Value, group: &str, name: &str) -> Option<i64> {
    job["counters"][group][name].as_i64()
}

#[test]
fn map_only_sleep_job_runs_on_hotpath_agents() {
    // 50-110 s: AM start, five 1 s maps on two agents.
    let mut c = cluster();
    let job = c.run("sleep m=5 r=0 mt=1000", 240);
    assert_eq!(job["state"], "SUCCEEDED", "{}", explain(&job, &c.rm));
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

/// Five input files of words drawn from a fixed vocabulary by a fixed generator (each file one
/// split, so one map each), and the counts they must give.
pub(crate) fn write_wordcount_input(dir: &Path) -> BTreeMap<String, u64> {
    let vocabulary: Vec<String> = (0..300)
        .map(|i| format!("w{i:03}x{}", i * 7919 % 1000))
        .collect();
    let mut counts = BTreeMap::new();
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    std::fs::create_dir_all(dir).unwrap();
    for f in 0..5 {
        let mut text = String::new();
        for line in 0..2000 {
            for _ in 0..(3 + line % 7) {
                // xorshift64*: any fixed sequence will do
                state ^= state >> 12;
                state ^= state << 25;
                state ^= state >> 27;
                let r = state.wrapping_mul(0x2545_f491_4f6c_dd1d);
                let w = &vocabulary[(r >> 33) as usize % vocabulary.len()];
                *counts.entry(w.clone()).or_insert(0) += 1;
                text.push_str(w);
                text.push(if r & 1 == 0 { ' ' } else { '\t' });
            }
            text.push('\n');
        }
        std::fs::write(dir.join(format!("part-{f}.txt")), text).unwrap();
    }
    counts
}

/// `word\tcount` lines of every `part-r-*` file; a word in two files fails.
pub(crate) fn read_wordcount_output(dir: &Path) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let mut parts: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("part-r-"))
        })
        .collect();
    parts.sort();
    assert_eq!(parts.len(), 2, "one output per reducer: {parts:?}");
    for p in parts {
        for line in std::fs::read_to_string(&p).unwrap().lines() {
            let (w, n) = line
                .split_once('\t')
                .unwrap_or_else(|| panic!("{p:?}: {line:?}"));
            let prev = out.insert(w.to_string(), n.parse::<u64>().unwrap());
            assert!(prev.is_none(), "{w} in two outputs");
        }
    }
    assert!(dir.join("_SUCCESS").is_file(), "no _SUCCESS in {dir:?}");
    out
}

#[test]
fn wordcount_reducers_fetch_map_outputs_from_both_agents() {
    // 70-125 s: five maps over two agents, then two reducers fetching from both.
    let work = tempfile::tempdir().unwrap();
    let input = work.path().join("in");
    let output = work.path().join("out");
    let expected = write_wordcount_input(&input);
    let mut c = cluster();
    let job = c.run(
        &format!(
            "wordcount in={} out={} r=2",
            input.display(),
            output.display()
        ),
        270,
    );
    assert_eq!(job["state"], "SUCCEEDED", "{}", explain(&job, &c.rm));
    assert_eq!(
        c.hosts_of(&job, true).len(),
        2,
        "maps on both agents: {job}"
    );
    let shuffle_errors = &job["counters"]["Shuffle Errors"];
    for name in [
        "BAD_ID",
        "CONNECTION",
        "IO_ERROR",
        "WRONG_LENGTH",
        "WRONG_MAP",
        "WRONG_REDUCE",
    ] {
        assert_eq!(shuffle_errors[name].as_i64(), Some(0), "{name}: {job}");
    }
    let shuffled = counter(
        &job,
        "org.apache.hadoop.mapreduce.TaskCounter",
        "REDUCE_SHUFFLE_BYTES",
    )
    .unwrap_or(0);
    assert!(shuffled > 0, "REDUCE_SHUFFLE_BYTES {shuffled}: {job}");
    assert_eq!(
        counter(
            &job,
            "org.apache.hadoop.mapreduce.TaskCounter",
            "SHUFFLED_MAPS"
        ),
        Some(10),
        "each of two reducers fetched each of five maps: {job}"
    );
    eprintln!("REDUCE_SHUFFLE_BYTES {shuffled}");
    let got = read_wordcount_output(&output);
    assert_eq!(got.len(), expected.len(), "distinct words");
    assert_eq!(got, expected);
}

#[test]
fn a_job_survives_an_agent_killed_minus_9_once_its_maps_are_done() {
    // 85-130 s: five maps, the agent without the AM killed −9 as the last map finishes (reducers
    // start, or fetch, with it gone), restarted empty on the same address (a new NodeId: no
    // recovery, so its map outputs are gone as with Java's NM); the RM declares the old node
    // LOST after its 10 s expiry, the AM re-runs the maps that ran there, and the job succeeds.
    let work = tempfile::tempdir().unwrap();
    let input = work.path().join("in");
    let output = work.path().join("out");
    let expected = write_wordcount_input(&input);
    let mut c = cluster();
    let sub =
        c.rm.command(&format!(
            "submit wordcount in={} out={} r=2",
            input.display(),
            output.display()
        ))
        .expect("submit");
    let job_id = sub["job_id"].as_str().unwrap().to_string();
    let t0 = Instant::now();
    let am = loop {
        let r = c.rm.command(&format!("am-node {job_id}")).expect("am-node");
        if let Some(n) = r["node_id"].as_str() {
            break n.to_string();
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "no AM container");
        std::thread::sleep(Duration::from_millis(100));
    };
    let victim = c
        .agents
        .iter()
        .position(|a| a.field("node_id") != am)
        .expect("an agent without the AM");
    loop {
        let s = c.rm.command(&format!("status {job_id}")).expect("status");
        assert_ne!(s["state"], "FAILED", "{}", explain(&s, &c.rm));
        if s["map_progress"].as_f64() == Some(1.0) {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(240),
            "maps not done: {s}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let ip = IPS[victim];
    c.agents[victim].kill9();
    let rt = c.rm.ready()["resource_tracker"]
        .as_str()
        .unwrap()
        .to_string();
    let (cmd, dir) = daemon::agent_command(&rt, ip, &agent_sets());
    c.agents.push(Daemon::spawn(cmd, dir));

    let job = c.rm.command(&format!("wait {job_id} 270")).expect("wait");
    assert_eq!(job["timed_out"], false, "{job}");
    assert_eq!(job["state"], "SUCCEEDED", "{}", explain(&job, &c.rm));
    let launched = counter(
        &job,
        "org.apache.hadoop.mapreduce.JobCounter",
        "TOTAL_LAUNCHED_MAPS",
    )
    .unwrap_or(0);
    eprintln!(
        "{job_id}: {} after {:?}, {launched} maps launched",
        job["state"],
        t0.elapsed()
    );
    assert!(
        launched > 5,
        "the maps of the killed agent ran again ({launched} launched): {job}"
    );
    assert_eq!(read_wordcount_output(&output), expected);
}
