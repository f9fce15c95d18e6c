//! `hotpath app run` (a Rust DistributedShell client and ApplicationMaster) against a real Java
//! ResourceManager with two real Java NodeManagers (`yarn-rm --profile agents --nms 2`): the AM
//! container and the shell containers all run on Java NodeManagers, started through Java's
//! ContainerManagementProtocol with the RM's NMTokens and container tokens.

use std::time::Duration;

use peer_harness::{Mode, Shared};

use crate::app_run;
use app_run::{app_run, fail_one};

static RM: Shared = Shared::new(Mode::YarnRm, &["--profile", "agents", "--nms", "2"]);

fn java_nodes(ready: &serde_json::Value) -> Vec<String> {
    ready["nms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["node_id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn app_run_on_java_nodemanagers_succeeds_with_every_container_exiting_zero() {
    let mut rm = RM.lock().expect("yarn-rm --profile agents --nms 2");
    let nodes = java_nodes(rm.ready());
    let r = app_run(
        rm.conf_dir(),
        &["--containers", "4", "--memory", "256", "--ship-binary"],
        "echo hello from $CONTAINER_ID",
    );
    assert_eq!(r.code, 0, "{r:#?}\n{}", rm.log_tail(60));
    assert_eq!(
        (r.state.as_str(), r.final_status.as_str()),
        ("FINISHED", "SUCCEEDED"),
        "{r:#?}"
    );
    assert_eq!(r.exits(), ["0", "0", "0", "0"], "{r:#?}");
    for n in r.table.keys() {
        assert!(
            nodes.contains(n),
            "{n} is not one of the Java NodeManagers {nodes:?}"
        );
    }
    assert!(r.stdout.contains("progress: allocated"), "{}", r.stdout);
    // The RM's own view agrees.
    let done = rm
        .command(&format!("app-wait {} 30", r.app_id))
        .unwrap_or_else(|e| panic!("app-wait: {e}"));
    assert_eq!(done["final_status"], "SUCCEEDED", "{done}");
    assert!(
        done["diagnostics"]
            .as_str()
            .unwrap_or("")
            .contains("4 of 4 containers exited 0"),
        "{done}"
    );
    assert!(r.elapsed < Duration::from_secs(120), "{:?}", r.elapsed);
}

#[test]
fn app_run_on_java_nodemanagers_fails_when_one_container_exits_non_zero() {
    let mut rm = RM.lock().expect("yarn-rm --profile agents --nms 2");
    let r = app_run(
        rm.conf_dir(),
        &["--containers", "4"],
        &fail_one("000003", 7),
    );
    assert_eq!(r.code, 1, "{r:#?}\n{}", rm.log_tail(60));
    assert_eq!(
        (r.state.as_str(), r.final_status.as_str()),
        ("FINISHED", "FAILED"),
        "{r:#?}"
    );
    assert_eq!(r.exits(), ["0", "0", "0", "7"], "{r:#?}");
    let failed = format!(
        "{}_01_000003",
        r.app_id.replacen("application_", "container_", 1)
    );
    assert!(
        r.stdout.contains(&format!("{failed} on ")) && r.stdout.contains("exit status 7"),
        "{failed}\n{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("1 of 4 containers failed, 3 exited 0"),
        "{}",
        r.stdout
    );
    let done = rm.command(&format!("app-wait {} 30", r.app_id)).unwrap();
    assert_eq!(done["final_status"], "FAILED", "{done}");
}

#[test]
fn app_run_counts_starts_a_java_nodemanager_refuses_as_failures_with_its_text() {
    let rm = RM.lock().expect("yarn-rm --profile agents --nms 2");
    // The NodeManagers have no auxiliary service of that name: each start is refused
    // (InvalidAuxServiceException in failed_requests).
    let r = app_run(
        rm.conf_dir(),
        &["--containers", "2", "--service-data", "no_such_service=x"],
        "echo never",
    );
    assert_eq!(r.code, 1, "{r:#?}\n{}", rm.log_tail(60));
    assert_eq!(
        (r.state.as_str(), r.final_status.as_str()),
        ("FINISHED", "FAILED"),
        "{r:#?}"
    );
    assert_eq!(r.exits(), ["start-failed", "start-failed"], "{r:#?}");
    assert!(
        r.stdout.contains("start failed: org.apache.hadoop.yarn.exceptions.InvalidAuxServiceException: The auxService:no_such_service does not exist"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("2 of 2 containers failed, 0 exited 0"),
        "{}",
        r.stdout
    );
}

#[test]
fn app_run_shows_the_rms_diagnostics_when_the_application_master_fails() {
    let rm = RM.lock().expect("yarn-rm --profile agents --nms 2");
    // `--set` values reach the AM too; this one only the AM reads (its SASL settings), so the
    // client submits and the AM exits with an error before registering.
    let r = app_run(
        rm.conf_dir(),
        &["--containers", "1", "--set", "hadoop.rpc.protection=bogus"],
        "true",
    );
    assert_eq!(r.code, 1, "{r:#?}\n{}", rm.log_tail(60));
    assert_eq!(r.state, "FAILED", "{r:#?}");
    assert!(
        r.stdout.contains("no per-container results"),
        "{}",
        r.stdout
    );
    let diag = r.stdout.split_once("diagnostics: ").map_or("", |(_, d)| d);
    // The RM's text: the AM container's exit, and the tail of its stderr (our error).
    assert!(diag.contains("exitCode: 2"), "{diag}");
    assert!(diag.contains("hadoop.rpc.protection"), "{diag}");
}

#[test]
fn app_run_draws_a_progress_bar_on_a_terminal() {
    let rm = RM.lock().expect("yarn-rm --profile agents --nms 2");
    // util-linux `script` gives the client a pseudo-terminal as its stdout.
    let cmd = format!(
        "{} app run --conf-dir {} --containers 2 -- 'sleep 4'",
        env!("CARGO_BIN_EXE_hotpath"),
        rm.conf_dir().display()
    );
    let out = std::process::Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .output()
        .expect("util-linux script");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("\r["), "no bar redrawn with \\r: {text:?}");
    assert!(
        text.contains("] allocated 2/2  running 2  done 0  failed 0"),
        "{text:?}"
    );
    assert!(!text.contains("progress: allocated"), "{text:?}");
    assert!(text.contains("final status SUCCEEDED"), "{text:?}");
}
