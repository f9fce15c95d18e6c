//! `hotpath app run` (a Rust DistributedShell client and ApplicationMaster) against a real Java
//! ResourceManager (`yarn-rm --profile agents`, no NodeManagers of its own) with two hotpath
//! agents as its NodeManagers (`hotpath agent` child processes on 127.0.0.51 and 127.0.0.52):
//! the RM's AMLauncher starts our AM on an agent, and the AM starts its containers on both
//! through our ContainerManagementProtocol. Also the client's error paths (RM unreachable,
//! a killed application).

use std::time::{Duration, Instant};

use peer_harness::{Mode, Shared};
use serde_json::Value;

use crate::app_run;
use crate::daemon;
use app_run::{app_run, fail_one};
use daemon::{start_agent, Daemon};

static RM: Shared = Shared::new(Mode::YarnRm, &["--profile", "agents"]);

fn running_nodes(rm: &mut peer_harness::Peer) -> Vec<String> {
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

struct Cluster {
    rm: peer_harness::SharedGuard<'static>,
    agents: Vec<Daemon>,
}

fn cluster() -> Cluster {
    let mut rm = RM.lock().expect("yarn-rm --profile agents");
    let rt = rm.ready()["resource_tracker"].as_str().unwrap().to_string();
    let agents = vec![
        start_agent(&rt, "127.0.0.51"),
        start_agent(&rt, "127.0.0.52"),
    ];
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
    Cluster { rm, agents }
}

#[test]
fn app_run_on_hotpath_agents_reports_exit_statuses_per_node() {
    let mut c = cluster();
    let nodes: Vec<String> = c.agents.iter().map(|a| a.field("node_id")).collect();
    // 1.5 GB containers: at most 2 fit on one 4 GB agent, and each lives 3 s (longer than the
    // RM needs to place all four), so both agents run some.
    let r = app_run(
        c.rm.conf_dir(),
        &["--containers", "4", "--memory", "1536"],
        &format!("sleep 3; {}", fail_one("000004", 3)),
    );
    assert_eq!(r.code, 1, "{r:#?}\n{}", c.rm.log_tail(60));
    assert_eq!(
        (r.state.as_str(), r.final_status.as_str()),
        ("FINISHED", "FAILED"),
        "{r:#?}"
    );
    assert_eq!(r.exits(), ["0", "0", "0", "3"], "{r:#?}");
    for n in r.table.keys() {
        assert!(nodes.contains(n), "{n} is not one of the agents {nodes:?}");
    }
    assert_eq!(r.table.len(), 2, "both agents ran containers: {r:#?}");
    assert!(
        r.stdout.contains("1 of 4 containers failed, 3 exited 0"),
        "{}",
        r.stdout
    );
    let done = c.rm.command(&format!("app-wait {} 30", r.app_id)).unwrap();
    assert_eq!(done["final_status"], "FAILED", "{done}");

    // A start the agent refuses (no such auxiliary service) counts as failed, with its text.
    let refused = app_run(
        c.rm.conf_dir(),
        &["--containers", "1", "--service-data", "no_such_service=x"],
        "echo never",
    );
    assert_eq!(refused.code, 1, "{refused:#?}");
    assert_eq!(refused.exits(), ["start-failed"], "{refused:#?}");
    assert!(
        refused
            .stdout
            .contains("start failed: org.apache.hadoop.yarn.exceptions.InvalidAuxServiceException: The auxService:no_such_service does not exist"),
        "{}",
        refused.stdout
    );

    let ok = app_run(c.rm.conf_dir(), &["--containers", "4"], "echo fine");
    assert_eq!(ok.code, 0, "{ok:#?}\n{}", c.rm.log_tail(60));
    assert_eq!(
        (ok.state.as_str(), ok.final_status.as_str()),
        ("FINISHED", "SUCCEEDED")
    );
    assert_eq!(ok.exits(), ["0", "0", "0", "0"], "{ok:#?}");
}

#[test]
fn app_run_kills_an_application_past_its_timeout_and_says_so() {
    let c = cluster();
    let r = app_run(
        c.rm.conf_dir(),
        &["--containers", "2", "--timeout", "3"],
        "sleep 600",
    );
    assert_eq!(r.code, 3, "{r:#?}\n{}", c.rm.log_tail(60));
    assert_eq!(r.state, "KILLED", "{r:#?}");
    assert!(r.stdout.contains("killing"), "{}", r.stdout);
    let diag = r
        .stdout
        .lines()
        .find(|l| l.starts_with("diagnostics: "))
        .unwrap_or_else(|| panic!("no diagnostics line: {}", r.stdout));
    assert!(diag.contains("timeout after 3 s"), "{}", r.stdout);
}

#[test]
fn app_run_says_clearly_when_the_rm_is_unreachable() {
    let dir = tempfile::tempdir().unwrap();
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let t0 = Instant::now();
    let r = app_run(
        dir.path(),
        &[
            "--rm",
            &format!("127.0.0.1:{port}"),
            "--connect-attempts",
            "3",
        ],
        "true",
    );
    assert_eq!(r.code, 2, "{r:#?}");
    assert!(
        r.stderr.contains(&format!(
            "cannot reach the ResourceManager (ApplicationClientProtocol) at 127.0.0.1:{port}"
        )) && r.stderr.contains("after 3 attempts"),
        "{}",
        r.stderr
    );
    // Backoff 0.2 + 0.4 s between the three attempts.
    assert!(
        t0.elapsed() >= Duration::from_millis(600),
        "{:?}",
        t0.elapsed()
    );
    assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
}
