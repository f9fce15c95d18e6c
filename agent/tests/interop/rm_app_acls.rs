//! Application ACLs (`yarn.acl.enable`) on `hotpath rm`, seen by Hadoop's own `YarnClient` (the
//! peer's `yarn-client`, each user a SIMPLE user of its own through its `as USER` command) and
//! by `hotpath app kill|status`.
//!
//! `alice` submits the peer's ShellAm application (one container sleeping, so it runs) with an
//! ACL that gives `bob` VIEW_APP. With the ACLs on, `yarn.admin.acl=admin` and the root queue's
//! `acl_administer_queue` emptied (a Java RM's queue administrators pass every application
//! check too, and root's defaults to everyone): bob gets the whole report, carol the reduced one
//! Java gives (host, diagnostics, tracking URL "N/A", RPC port -1, the dummy attempt id) and
//! cannot kill (Java's `AccessControlException` text in a `YarnException`), neither can bob
//! (VIEW only), `hotpath app kill` as carol prints the refusal; admin kills. With the ACLs
//! off (the default), carol sees everything and kills.

use std::process::Command;
use std::time::{Duration, Instant};

use peer_harness::{Mode, Peer};
use serde_json::Value;

use crate::daemon;
use daemon::{start_agent, Daemon};

fn start_rm(extra: &[(&str, String)]) -> Daemon {
    daemon::start_rm_daemon("127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", extra)
}

fn client_for(rm: &Daemon) -> Peer {
    Peer::start(
        Mode::YarnClient,
        &[
            "--rm",
            &rm.field("client"),
            "--scheduler",
            &rm.field("scheduler"),
        ],
    )
    .expect("yarn-client")
}

fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `hotpath app kill|status APP` as the SIMPLE user `user`: exit code, stdout, stderr.
fn hotpath_app(rm: &Daemon, user: &str, what: &str, app: &str) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_hotpath"))
        .args(["app", what, "--rm", &rm.field("client"), app])
        .env("HADOOP_USER_NAME", user)
        .env_remove("HADOOP_CONF_DIR")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn submit_as_alice(client: &mut Peer, dir: &std::path::Path, acls: &str) -> String {
    let s = client
        .command(&format!(
            "as alice app-submit containers=1 sleep=0:300 {acls} result={}",
            dir.join("result.json").display()
        ))
        .unwrap_or_else(|e| panic!("app-submit: {e}"));
    s["app_id"].as_str().expect("app_id").to_owned()
}

fn report_as(client: &mut Peer, user: &str, id: &str) -> Value {
    client
        .command(&format!("as {user} app-report {id}"))
        .unwrap_or_else(|e| panic!("app-report as {user}: {e}"))
}

fn is_full(r: &Value, id: &str) -> bool {
    r["current_attempt_id"] == format!("appattempt_{}_000001", &id["application_".len()..])
}

#[test]
fn with_acls_on_bob_views_carol_gets_the_reduced_report_and_only_owner_or_admin_kill() {
    let rm = start_rm(&[
        ("yarn.acl.enable", "true".into()),
        ("yarn.admin.acl", "admin".into()),
        (
            "yarn.scheduler.capacity.root.acl_administer_queue",
            " ".into(),
        ),
    ]);
    let _agent = start_agent(&rm.field("resource_tracker"), "127.0.0.61");
    let mut client = client_for(&rm);
    wait_for(
        "the agent RUNNING at the RM",
        Duration::from_secs(60),
        || {
            client
                .command("nodes")
                .ok()
                .and_then(|v| v["nodes"].as_array().cloned())
                .is_some_and(|n| n.iter().any(|n| n["state"] == "RUNNING"))
        },
    );
    let dir = tempfile::tempdir().unwrap();
    let id = submit_as_alice(&mut client, dir.path(), "acl_view=bob");
    wait_for("the application RUNNING", Duration::from_secs(120), || {
        let r = report_as(&mut client, "alice", &id);
        assert!(
            !["FINISHED", "FAILED", "KILLED"].contains(&r["state"].as_str().unwrap_or("")),
            "{r}"
        );
        r["state"] == "RUNNING" && r["host"] != "N/A"
    });

    // alice (owner) and bob (VIEW_APP) see the whole report
    let full = report_as(&mut client, "bob", &id);
    assert!(is_full(&full, &id), "{full}");
    assert_eq!(full["user"], "alice", "{full}");
    assert_ne!(full["host"], "N/A", "{full}");
    // (ShellAm registers RPC port 0; -1 is what the reduced report says)
    assert_eq!(full["rpc_port"], 0, "{full}");
    assert_ne!(full["diagnostics"], "N/A", "{full}");

    // carol: Java's reduced report (identity, state and times kept)
    let reduced = report_as(&mut client, "carol", &id);
    assert!(!is_full(&reduced, &id), "{reduced}");
    let attempt = reduced["current_attempt_id"].as_str().unwrap();
    assert!(
        attempt.starts_with(&format!("appattempt_{}_-", &id["application_".len()..])),
        "the dummy attempt -1: {reduced}"
    );
    for (k, v) in [
        ("host", Value::from("N/A")),
        ("rpc_port", Value::from(-1)),
        ("diagnostics", Value::from("N/A")),
        ("progress", Value::from(0.0)),
        ("user", Value::from("alice")),
        ("state", Value::from("RUNNING")),
        ("queue", Value::from("default")),
        ("name", full["name"].clone()),
        ("start_time", full["start_time"].clone()),
    ] {
        assert_eq!(reduced[k], v, "{k}: {reduced}");
    }
    // getApplications: the same reduced report for carol, the whole one for bob
    let listed = |client: &mut Peer, user: &str| -> Value {
        let v = client
            .command(&format!("as {user} apps"))
            .unwrap_or_else(|e| panic!("apps as {user}: {e}"));
        v["apps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["app_id"] == id.as_str())
            .cloned()
            .unwrap_or_else(|| panic!("{id} not listed for {user}: {v}"))
    };
    assert!(!is_full(&listed(&mut client, "carol"), &id));
    assert_eq!(listed(&mut client, "carol")["host"], "N/A");
    assert!(is_full(&listed(&mut client, "bob"), &id));

    // carol and bob cannot kill: YarnException wrapping Java's AccessControlException
    for user in ["carol", "bob"] {
        let e = client
            .command_expect_error(&format!("as {user} app-kill {id}"))
            .unwrap();
        assert_eq!(
            e.class, "org.apache.hadoop.yarn.exceptions.YarnException",
            "{e:?}"
        );
        assert_eq!(
            e.message.as_deref(),
            Some(
                format!(
                    "org.apache.hadoop.security.AccessControlException: User {user} cannot \
                     perform operation MODIFY_APP on {id}"
                )
                .as_str()
            ),
            "{e:?}"
        );
    }
    // yarn applicationattempt / container: bob (VIEW_APP) sees the attempt and its containers,
    // carol gets Java's refusal.
    let attempt = format!("appattempt_{}_000001", &id["application_".len()..]);
    let cli_as = |client: &mut Peer, user: &str, args: &str| -> (i64, String) {
        match client.command(&format!("as {user} cli {args}")) {
            Ok(v) => (
                v["exit_code"].as_i64().unwrap(),
                format!("{}{}", v["stdout"], v["stderr"]),
            ),
            Err(e) => (-1000, e.to_string()),
        }
    };
    let (rc, out) = cli_as(
        &mut client,
        "bob",
        &format!("applicationattempt -list {id}"),
    );
    assert_eq!(rc, 0, "{out}");
    assert!(out.contains(&attempt) && out.contains("RUNNING"), "{out}");
    let (rc, out) = cli_as(&mut client, "bob", &format!("container -list {attempt}"));
    assert_eq!(rc, 0, "{out}");
    let am = format!("container_{}_01_000001", &id["application_".len()..]);
    assert!(out.contains(&am) && out.contains("RUNNING"), "{out}");
    for args in [
        format!("applicationattempt -list {id}"),
        format!("container -list {attempt}"),
    ] {
        let (rc, out) = cli_as(&mut client, "carol", &args);
        assert_ne!(rc, 0, "{args}: {out}");
        assert!(
            out.contains(&format!(
                "User carol does not have privilege to see this application {id}"
            )),
            "{args}: {out}"
        );
    }
    let (rc, out) = cli_as(
        &mut client,
        "carol",
        &format!("applicationattempt -status {attempt}"),
    );
    assert_ne!(rc, 0, "{out}");
    assert!(
        out.contains(&format!(
            "User carol does not have privilege to see this attempt {attempt}"
        )),
        "{out}"
    );
    // hotpath app as carol: the refusal, said as such; status shows the reduced report
    let (code, out, err) = hotpath_app(&rm, "carol", "kill", &id);
    assert_eq!(code, 5, "stdout {out} stderr {err}");
    assert!(
        err.contains("refused carol")
            && err.contains(&format!(
                "User carol cannot perform operation MODIFY_APP on {id}"
            )),
        "{err}"
    );
    let (code, out, err) = hotpath_app(&rm, "carol", "status", &id);
    assert_eq!(code, 0, "stdout {out} stderr {err}");
    assert!(out.contains("RUNNING") && out.contains("N/A:-1"), "{out}");
    let (code, out, _) = hotpath_app(&rm, "bob", "status", &id);
    assert_eq!(code, 0);
    assert!(out.contains("RUNNING") && !out.contains("N/A:-1"), "{out}");
    let still = report_as(&mut client, "alice", &id);
    assert_eq!(still["state"], "RUNNING", "{still}");

    // admin (yarn.admin.acl) kills
    let killed = client
        .command(&format!("as admin app-kill {id}"))
        .unwrap_or_else(|e| panic!("app-kill as admin: {e}"));
    assert_eq!(killed["state"], "KILLED", "{killed}");

    // alice kills her own second application with `hotpath app kill`
    let id2 = submit_as_alice(&mut client, dir.path(), "");
    let (code, out, err) = hotpath_app(&rm, "alice", "kill", &id2);
    assert_eq!(code, 0, "stdout {out} stderr {err}");
    let r = report_as(&mut client, "alice", &id2);
    assert_eq!(r["state"], "KILLED", "{r}");
}

#[test]
fn with_acls_off_everyone_sees_and_kills() {
    let rm = start_rm(&[]);
    let mut client = client_for(&rm);
    let dir = tempfile::tempdir().unwrap();
    // No node: the application stays ACCEPTED, with its first attempt.
    let id = submit_as_alice(&mut client, dir.path(), "acl_view=bob acl_modify=bob");
    let r = report_as(&mut client, "carol", &id);
    assert!(is_full(&r, &id), "{r}");
    assert_eq!(r["state"], "ACCEPTED", "{r}");
    assert_ne!(r["diagnostics"], "N/A", "{r}");
    let killed = client
        .command(&format!("as carol app-kill {id}"))
        .unwrap_or_else(|e| panic!("app-kill as carol: {e}"));
    assert_eq!(killed["state"], "KILLED", "{killed}");
}
