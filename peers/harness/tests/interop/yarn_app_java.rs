//! The ShellAm application (peers/hadoop: our DistributedShell-like AM and its client commands)
//! on a real Java ResourceManager with two real Java NodeManagers (`yarn-rm --nms 2 --profile
//! agents`). This is the baseline that proves the application itself before it runs on hotpath
//! agents: the AM is started by the RM's AMLauncher, localizes its plan and jar, registers,
//! starts shell containers through NMClientAsync, stops one, and reports exact exit statuses.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use peer_harness::{Mode, Shared};
use serde_json::Value;

static RM: Shared = Shared::new(Mode::YarnRm, &["--nms", "2", "--profile", "agents"]);

/// KILLED_BY_APPMASTER: the status of a container the AM stopped.
const KILLED_BY_APPMASTER: i64 = -105;

fn read_json(path: &Path) -> Value {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("read {path:?}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parse {path:?}: {e}: {text}"))
}

fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("hotpath-yarn-app-")
        .tempdir()
        .expect("temp dir")
}

/// Submits, waits (up to 90 s) and returns the `app-wait` reply; the launcher log tail on failure.
fn run_app(words: &str) -> (Value, Value) {
    let mut rm = RM.lock().expect("yarn-rm --nms 2 --profile agents");
    let ready = rm.ready().clone();
    assert_eq!(ready["am_conf_has_bound_ports"], true, "{ready}");
    assert_eq!(
        ready["scheduler"],
        "org.apache.hadoop.yarn.server.resourcemanager.scheduler.fifo.FifoScheduler"
    );
    assert_eq!(ready["minimum_allocation_mb"], 128);
    let sched = ready["am_conf_scheduler_address"]
        .as_str()
        .expect("address");
    let bound = ready["scheduler_address"].as_str().expect("bound address");
    assert_eq!(
        sched.rsplit(':').next(),
        bound.rsplit(':').next(),
        "{ready}"
    );
    let submitted = rm
        .command(&format!("app-submit {words}"))
        .unwrap_or_else(|e| panic!("app-submit: {e}\n{}", rm.log_tail(60)));
    let id = submitted["app_id"].as_str().expect("app_id").to_owned();
    assert!(id.starts_with("application_"), "{submitted}");
    let res = &submitted["local_resources"]["shellCommands"];
    assert_eq!(res["visibility"], "APPLICATION", "{submitted}");
    assert!(res["size"].as_u64().expect("size") > 0, "{submitted}");
    let done = rm
        .command(&format!("app-wait {id} 90"))
        .unwrap_or_else(|e| panic!("app-wait: {e}\n{}", rm.log_tail(60)));
    assert_eq!(done["timed_out"], false, "{done}\n{}", rm.log_tail(80));
    (submitted, done)
}

#[test]
fn ten_shell_containers_with_one_failure_and_one_stop_report_exact_statuses() {
    let dir = tempdir();
    let result = dir.path().join("result.json");
    let (submitted, done) = run_app(&format!(
        "containers=10 exit=3:7 stop=5 result={}",
        result.display()
    ));
    assert_eq!(done["state"], "FINISHED", "{done}");
    assert_eq!(done["rm_app_state"], "FINISHED", "{done}");
    assert_eq!(done["final_status"], "SUCCEEDED", "{done}");
    assert_eq!(done["attempt_count"], 1, "{done}");
    // FINISHED (not FINISHING): the NodeManager reported the AM container's completion
    assert_eq!(done["attempts"][0]["state"], "FINISHED", "{done}");

    let r = read_json(&result);
    assert_eq!(r["mode"], "shell");
    assert_eq!(r["attempt"], 1);
    assert_eq!(r["final_status"], "SUCCEEDED", "{r}");
    assert_eq!(r["unexpected"], Value::Array(vec![]), "{r}");
    assert_eq!(r["errors"], Value::Array(vec![]), "{r}");
    assert_eq!(r["replacements"], 0, "{r}");
    assert!(r["nm_client_stop_ms"].is_number(), "{r}");

    let completions = r["completions"].as_array().expect("completions");
    let mut by_index = BTreeMap::new();
    for c in completions {
        let i = c["index"].as_u64().expect("index");
        assert!(
            by_index.insert(i, c.clone()).is_none(),
            "index {i} twice: {r}"
        );
        assert_eq!(c["state"], "COMPLETE", "{c}");
        // every start was followed by one status query, which did not fail (`errors` is
        // empty); its answer is RUNNING, or COMPLETE for a container already done,
        // RECENTLY_STOPPED once the RM has acknowledged its completion, or none when the
        // completion reached the AM (through the RM) before the answer did
        let st = c["start_status_state"].as_str().unwrap_or("none");
        assert!(
            matches!(st, "RUNNING" | "COMPLETE" | "RECENTLY_STOPPED" | "none"),
            "{c}"
        );
        assert!(c["start_error"].is_null(), "{c}");
    }
    assert_eq!(
        by_index.keys().copied().collect::<Vec<_>>(),
        (0..10).collect::<Vec<_>>()
    );
    for (i, c) in &by_index {
        let want = match i {
            3 => 7,
            5 => KILLED_BY_APPMASTER,
            _ => 0,
        };
        assert_eq!(c["exit_status"], want, "container {i}: {c}");
        assert_eq!(c["expected_exit_status"], want, "container {i}: {c}");
    }
    let stopped = &by_index[&5];
    assert_eq!(stopped["stop_requested"], true, "{stopped}");
    assert_eq!(stopped["stop_acknowledged"], true, "{stopped}");
    // both NodeManagers ran containers (FIFO spreads them over the heartbeating nodes)
    let nodes: std::collections::BTreeSet<&str> = completions
        .iter()
        .map(|c| c["node_id"].as_str().expect("node"))
        .collect();
    assert!(!nodes.is_empty(), "{r}");
    eprintln!(
        "app {} finished in {} ms (AM view) on nodes {nodes:?}",
        submitted["app_id"], r["elapsed_ms"]
    );
    // the stop container really ran: it left its marker in the shared dir
    let shared = Path::new(submitted["shared"].as_str().expect("shared"));
    let cid = stopped["container_id"].as_str().expect("container id");
    assert!(shared.join(format!("running-{cid}")).is_file());
}

#[test]
fn a_first_attempt_that_exits_3_is_followed_by_a_second_that_succeeds() {
    let dir = tempdir();
    let result = dir.path().join("result.json");
    let (_, done) = run_app(&format!(
        "containers=2 fail_attempt=1 result={}",
        result.display()
    ));
    assert_eq!(done["state"], "FINISHED", "{done}");
    assert_eq!(done["final_status"], "SUCCEEDED", "{done}");
    assert_eq!(done["attempt_count"], 2, "{done}");
    let first = &done["attempts"][0];
    assert_eq!(first["attempt"], 1);
    assert_eq!(first["state"], "FAILED", "{done}");
    assert_eq!(first["am_container_exit_status"], 3, "{done}");
    let diag = first["diagnostics"].as_str().expect("diagnostics");
    assert!(diag.contains("exitCode: 3"), "{diag}");
    let second = &done["attempts"][1];
    assert_eq!(second["attempt"], 2);
    assert_eq!(second["state"], "FINISHED", "{done}");
    assert_ne!(first["am_container_id"], second["am_container_id"]);

    let r = read_json(&result);
    assert_eq!(r["attempt"], 2, "{r}");
    assert_eq!(r["final_status"], "SUCCEEDED", "{r}");
    let statuses: Vec<i64> = r["completions"]
        .as_array()
        .expect("completions")
        .iter()
        .map(|c| c["exit_status"].as_i64().expect("status"))
        .collect();
    assert_eq!(statuses, vec![0, 0], "{r}");
}

#[test]
fn launch_benchmark_times_every_start_and_every_process() {
    let dir = tempdir();
    let result = dir.path().join("bench.json");
    let (_, done) = run_app(&format!(
        "mode=bench containers=16 per_node=4 result={}",
        result.display()
    ));
    assert_eq!(done["final_status"], "SUCCEEDED", "{done}");
    let r = read_json(&result);
    assert_eq!(r["mode"], "bench");
    assert_eq!(r["final_status"], "SUCCEEDED", "{r}");
    assert_eq!(r["exit_statuses"]["0"], 16, "{r}");
    for k in ["start_rpc_ms", "start_to_running_ms"] {
        let s = &r[k];
        assert_eq!(s["count"], 16, "{k}: {r}");
        let p50 = s["p50"].as_f64().expect("p50");
        let p99 = s["p99"].as_f64().expect("p99");
        assert!(p50 > 0.0 && p50 <= p99, "{k}: {r}");
    }
    let started: u64 = r["started_per_node"]
        .as_object()
        .expect("per node")
        .values()
        .map(|v| v.as_u64().expect("count"))
        .sum();
    assert_eq!(started, 16, "{r}");
    for (node, n) in r["max_running_per_node"].as_object().expect("max per node") {
        let n = n.as_u64().expect("count");
        assert!((1..=4).contains(&n), "{node}: {n} at once: {r}");
    }
    assert!(r["wall_ms"].as_f64().expect("wall") > 0.0, "{r}");
    eprintln!("bench: {r}");
}

#[test]
fn a_killed_application_ends_killed_with_its_attempt() {
    let dir = tempdir();
    let result = dir.path().join("result.json");
    let mut rm = RM.lock().expect("yarn-rm --nms 2 --profile agents");
    let submitted = rm
        .command(&format!(
            "app-submit containers=1 sleep=0:600 result={}",
            result.display()
        ))
        .expect("app-submit");
    let id = submitted["app_id"].as_str().expect("app_id").to_owned();
    // it does not end by itself: app-wait gives up and says where it is
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let r = rm.command(&format!("app-wait {id} 2")).expect("app-wait");
        assert_eq!(r["timed_out"], true, "{r}");
        if r["state"] == "RUNNING" && launched(&mut rm, &id) >= 2 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "AM and its container not running: {r}"
        );
        thread::sleep(Duration::from_millis(200));
    }
    let killed = rm.command(&format!("app-kill {id}")).expect("app-kill");
    assert_eq!(killed["timed_out"], false, "{killed}");
    assert_eq!(killed["state"], "KILLED", "{killed}");
    assert_eq!(killed["rm_app_state"], "KILLED", "{killed}");
    assert_eq!(killed["attempts"][0]["state"], "KILLED", "{killed}");
    // the AM never finished its work: either it never wrote its result or, on a loaded machine
    // (seen in CI with two test lanes), it heard of the kill first, through allocate (its
    // sleeper's kill, or the RM's shutdown order), and its result says it did not end as planned
    if result.exists() {
        let r: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&result).expect("result")).expect("json");
        assert_eq!(r["final_status"], "FAILED", "{r}");
        assert!(
            !r["unexpected"].as_array().expect("unexpected").is_empty(),
            "{r}"
        );
    }
    // and the NodeManagers cleaned its containers up (AM and sleeper)
    let deadline = Instant::now() + Duration::from_secs(30);
    while launched(&mut rm, &id) > 0 {
        assert!(
            Instant::now() < deadline,
            "containers of {id} still launched: {}",
            rm.command("nodes").expect("nodes")
        );
        thread::sleep(Duration::from_millis(200));
    }
}

/// How many containers of `app_id` the RM counts as launched on its nodes.
fn launched(rm: &mut peer_harness::Peer, app_id: &str) -> usize {
    let tail = app_id.trim_start_matches("application_");
    let prefix = format!("container_{tail}_");
    let nodes = rm.command("nodes").expect("nodes");
    nodes["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .flat_map(|n| {
            n["launched_containers"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter(|c| c.as_str().is_some_and(|c| c.starts_with(&prefix)))
        .count()
}

/// The `yarn-client` peer (Hadoop's client side, pointed at any RM by address) against the Java
/// RM: the same application through it, and what `yarn application -list` / `yarn node -list`
/// print. The same peer drives `hotpath rm` in the agent's tests.
#[test]
fn the_yarn_client_peer_submits_lists_and_reports_through_addresses_alone() {
    let dir = tempdir();
    let result = dir.path().join("result.json");
    let rm = RM.lock().expect("yarn-rm --nms 2 --profile agents");
    let ready = rm.ready().clone();
    let rm_addr = ready["rm_address"].as_str().expect("rm_address").to_owned();
    let sched = ready["scheduler_address"]
        .as_str()
        .expect("scheduler_address")
        .to_owned();
    let mut client =
        peer_harness::Peer::start(Mode::YarnClient, &["--rm", &rm_addr, "--scheduler", &sched])
            .expect("yarn-client");
    let submitted = client
        .command(&format!(
            "app-submit containers=2 result={}",
            result.display()
        ))
        .unwrap_or_else(|e| panic!("app-submit: {e}\n{}", client.log_tail(60)));
    let id = submitted["app_id"].as_str().expect("app_id").to_owned();
    let done = client
        .command(&format!("app-wait {id} 90"))
        .unwrap_or_else(|e| panic!("app-wait: {e}\n{}", client.log_tail(60)));
    assert_eq!(done["timed_out"], false, "{done}");
    assert_eq!(done["state"], "FINISHED", "{done}");
    assert_eq!(done["final_status"], "SUCCEEDED", "{done}");
    assert_eq!(done["queue"], "default", "{done}");
    assert_eq!(done["attempts"].as_array().map(Vec::len), Some(1), "{done}");
    let r = read_json(&result);
    assert_eq!(r["final_status"], "SUCCEEDED", "{r}");

    let list = client
        .command("cli application -list -appStates ALL")
        .expect("cli application -list");
    assert_eq!(list["exit_code"], 0, "{list}");
    let out = list["stdout"].as_str().expect("stdout");
    assert!(out.contains(&id) && out.contains("FINISHED"), "{out}");
    let nodes = client
        .command("cli node -list -all")
        .expect("cli node -list");
    assert_eq!(nodes["exit_code"], 0, "{nodes}");
    let out = nodes["stdout"].as_str().expect("stdout");
    assert!(out.contains("Total Nodes:2"), "{out}");
    let metrics = client.command("metrics").expect("metrics");
    assert_eq!(metrics["active"], 2, "{metrics}");
    let queue = client.command("queue default").expect("queue");
    assert_eq!(queue["queue"], "default", "{queue}");
    // Java's FifoScheduler has one queue and takes any queue name (the CapacityScheduler, Java's
    // default, fails such an application at submission instead): the app is accepted, and its
    // report keeps the name it was given
    let other = client
        .command(&format!(
            "app-submit containers=1 sleep=0:600 queue=no-such-queue result={}",
            dir.path().join("never.json").display()
        ))
        .expect("app-submit to an unknown queue");
    let other_id = other["app_id"].as_str().expect("app_id").to_owned();
    let report = client
        .command(&format!("app-report {other_id}"))
        .expect("app-report");
    assert_eq!(report["queue"], "no-such-queue", "{report}");
    assert_ne!(report["state"], "FAILED", "{report}");
    let killed = client
        .command(&format!("app-kill {other_id}"))
        .expect("app-kill");
    assert_eq!(killed["state"], "KILLED", "{killed}");
}
