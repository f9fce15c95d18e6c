//! `yarn rmadmin` on `hotpath rm`: Hadoop 3.5.0's own `RMAdminCLI` (the class behind
//! `yarn rmadmin`, from the peer's jars) against our admin port, as SIMPLE users
//! (`HADOOP_USER_NAME`), with `yarn.admin.acl=admin` and one agent registered:
//! `-refreshQueues`, `-getGroups`, a non-admin refused with Java's exit status and message, and
//! `-refreshNodes -g 60 -client` with an exclude file naming the agent's host — the CLI asks for
//! a graceful decommission, polls `checkForDecommissioningNodes` until the (idle) node is
//! gone, and the agent leaves the RUNNING nodes.
//!
//! The refusal is compared with the peer's Java RM's (`yarn-rm`, same `yarn.admin.acl`).
//!
//! About 30 s (one RM, one agent, a Java RM, a JVM per CLI call).

use std::process::Command;
use std::time::{Duration, Instant};

use peer_harness::{Mode, Peer};

use crate::daemon;

fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `yarn rmadmin ARGS` as `user` against `admin`: exit status, stdout, stderr.
fn rmadmin(admin: &str, user: &str, args: &[&str]) -> (i32, String, String) {
    let build = peer_harness::build::ensure_built().expect("peer build");
    let mut cmd: Command = build.java_command("org.apache.hadoop.yarn.client.cli.RMAdminCLI");
    cmd.arg(format!("-Dyarn.resourcemanager.admin.address={admin}"))
        // Fail fast instead of retrying for 15 minutes should the port be wrong.
        .arg("-Dyarn.resourcemanager.connect.max-wait.ms=10000")
        .arg("-Dyarn.resourcemanager.connect.retry-interval.ms=500")
        .args(args)
        .env("HADOOP_USER_NAME", user)
        .env_remove("HADOOP_CONF_DIR");
    let out = cmd.output().expect("running RMAdminCLI");
    let r = (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    eprintln!("yarn rmadmin {args:?} as {user}: {r:?}");
    r
}

/// The state `getClusterNodes` gives the node on `host`.
fn node_state(client: &mut Peer, host: &str) -> Option<String> {
    let nodes = client.command("nodes").ok()?;
    nodes["nodes"]
        .as_array()?
        .iter()
        .find(|n| {
            n["node_id"]
                .as_str()
                .is_some_and(|id| id.starts_with(&format!("{host}:")))
        })
        .and_then(|n| n["state"].as_str().map(str::to_string))
}

#[test]
fn hadoops_rmadmin_cli_refreshes_nodes_queues_and_groups_and_refuses_non_admins() {
    let dir = tempfile::tempdir().unwrap();
    let exclude = dir.path().join("exclude");
    std::fs::write(&exclude, "").unwrap();
    let rm = daemon::start_rm_daemon(
        "127.0.0.1:0",
        "127.0.0.1:0",
        "127.0.0.1:0",
        &[
            ("yarn.admin.acl", "admin".into()),
            (
                "yarn.resourcemanager.nodes.exclude-path",
                exclude.display().to_string(),
            ),
        ],
    );
    let admin = rm.field("admin");
    let _agent = daemon::start_agent(&rm.field("resource_tracker"), "127.0.0.62");
    let mut client = Peer::start(
        Mode::YarnClient,
        &[
            "--rm",
            &rm.field("client"),
            "--scheduler",
            &rm.field("scheduler"),
        ],
    )
    .expect("yarn-client");
    wait_for("the agent RUNNING", Duration::from_secs(60), || {
        node_state(&mut client, "127.0.0.62").as_deref() == Some("RUNNING")
    });

    // An admin refreshes the queues and asks for groups.
    let (code, _, err) = rmadmin(&admin, "admin", &["-refreshQueues"]);
    assert_eq!(code, 0, "{err}");
    let me = std::process::Command::new("id")
        .args(["-Gn", "root"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let (code, out, err) = rmadmin(&admin, "admin", &["-getGroups", "root"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), format!("root : {me}").trim(), "{out}");

    // A non-admin: Java's refusal, exit status 255 (-1), as from the peer's Java RM with the
    // same yarn.admin.acl.
    let (code, _, err) = rmadmin(&admin, "mallory", &["-refreshQueues"]);
    assert_eq!(code, 255, "{err}");
    let java_rm = Peer::start(Mode::YarnRm, &["--set", "yarn.admin.acl=admin"]).expect("yarn-rm");
    let java_admin = java_rm.ready()["admin_address"]
        .as_str()
        .expect("admin_address")
        .replace("0.0.0.0", "127.0.0.1");
    let (java_code, _, java_err) = rmadmin(&java_admin, "mallory", &["-refreshQueues"]);
    let refusal = |e: &str| {
        e.lines()
            .find(|l| l.starts_with("refreshQueues: "))
            .map(str::to_string)
    };
    assert_eq!(
        (code, refusal(&err)),
        (java_code, refusal(&java_err)),
        "ours vs the Java RM's"
    );
    drop(java_rm);
    // RMAdminCLI prints `<command>: <message>`; the message is the YarnException's, which
    // wraps the AccessControlException as Java's RPCUtil does.
    assert!(
        err.lines().any(|l| l
            == "refreshQueues: org.apache.hadoop.security.AccessControlException: \
                User mallory doesn't have permission to call 'refreshQueues'"),
        "{err}"
    );

    // Graceful decommission of the (idle) agent, tracked by the client (-client): it polls
    // checkForDecommissioningNodes until the node is gone.
    std::fs::write(&exclude, "127.0.0.62\n").unwrap();
    let (code, out, err) = rmadmin(&admin, "admin", &["-refreshNodes", "-g", "60", "-client"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("Graceful decommissioning completed in"),
        "{out}"
    );
    wait_for("the agent DECOMMISSIONED", Duration::from_secs(30), || {
        node_state(&mut client, "127.0.0.62").as_deref() == Some("DECOMMISSIONED")
    });
}
