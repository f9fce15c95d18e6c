//! `hotpath rm` with recovery (`yarn.resourcemanager.recovery.enabled`) restarted under real
//! Java NodeManagers (the peer's `yarn-nm`, Hadoop's `NodeManager` with its default
//! work-preserving `yarn.resourcemanager.work-preserving-recovery.enabled`). The RM is killed
//! −9 while the peer's ShellAm application runs on two of them and a new one starts on the same
//! addresses and state store. Each NM's next heartbeat reaches the new RM, which does not know
//! the node: RESYNC; the NM (`NodeStatusUpdaterImpl.rebootNodeStatusUpdaterAndRegisterWithRM`)
//! registers again with its containers as `NMContainerStatusProto`s (running ones, and completed
//! ones the RM has not acknowledged) and its running applications, and keeps its containers
//! running. The AM's `allocate` gets `ApplicationMasterNotRegisteredException`, its
//! `AMRMClient` registers again, and the same attempt finishes the job.
//!
//! Each exit status reaches the AM exactly once here because no shell completes within a
//! heartbeat or two of the kill. One that does can reach it twice, in Java as with us: the NM
//! keeps a completed container until the RM acknowledges it (`containers_to_be_removed_from_nm`,
//! sent only after the AM has pulled the completion), so a completion delivered just before the
//! crash is re-reported at registration, and the new RM (which keeps no record of delivered
//! completions: `RMContainerRecoverEvent` of a COMPLETE container → `justFinishedContainers`)
//! hands it to the AM again.
//!
//! Java's NMs retry the RM every `yarn.resourcemanager.connect.retry-interval.ms` (30 s by
//! default); the NMs and the AM here use 500 ms so that the tests do not wait for it.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use peer_harness::{Mode, Peer};
use serde_json::Value;

use crate::cmp;
use crate::daemon;
use cmp::wait_for;
use daemon::{processes_with, start_rm_daemon, Daemon};

/// The two tests each run two NodeManager JVMs, the client's and an AM: one at a time (and
/// their `sleep N` command lines are distinct, so the process counts are each test's own).
static SERIAL: Mutex<()> = Mutex::new(());

/// A recovering `hotpath rm`, two Java NodeManagers of 3 GiB each (so that an AM of 1 GiB and
/// four 1 GiB shells need both) and the client, once both NMs are RUNNING at the RM.
struct Cluster {
    client: Peer,
    nms: Vec<Peer>,
    nm_ids: Vec<String>,
    rm: Daemon,
    recovery: [(&'static str, String); 2],
    _store: tempfile::TempDir,
}

impl Cluster {
    fn start() -> Cluster {
        let store = tempfile::tempdir().unwrap();
        let recovery = [
            ("yarn.resourcemanager.recovery.enabled", "true".to_string()),
            (
                "hotpath.rm.state-store.dir",
                store.path().join("rmstore").display().to_string(),
            ),
        ];
        let rm = start_rm_daemon("127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", &recovery);
        let rt = rm.field("resource_tracker");
        let nms: Vec<Peer> = (0..2)
            .map(|_| {
                Peer::start(
                    Mode::YarnNm,
                    &[
                        "--rm",
                        &rt,
                        "--set",
                        "yarn.nodemanager.resource.memory-mb=3072",
                        "--set",
                        "yarn.resourcemanager.connect.retry-interval.ms=500",
                    ],
                )
                .expect("yarn-nm")
            })
            .collect();
        let nm_ids: Vec<String> = nms
            .iter()
            .map(|n| n.field_str("node_id").unwrap().to_string())
            .collect();
        let client = Peer::start(
            Mode::YarnClient,
            &[
                "--rm",
                &rm.field("client"),
                "--scheduler",
                &rm.field("scheduler"),
            ],
        )
        .expect("yarn-client");
        let mut c = Cluster {
            client,
            nms,
            nm_ids,
            rm,
            recovery,
            _store: store,
        };
        c.wait_nodes_running("both Java NMs RUNNING at the RM");
        c
    }

    /// The RM's node reports (`getClusterNodes`, every state), retried while no RM answers.
    fn nodes(&mut self) -> Vec<Value> {
        let t0 = Instant::now();
        loop {
            match self.client.command("nodes") {
                Ok(v) => return v["nodes"].as_array().cloned().unwrap_or_default(),
                Err(e) => {
                    eprintln!("nodes: {e}");
                    assert!(
                        t0.elapsed() < Duration::from_secs(90),
                        "no RM answered: {e}"
                    );
                    std::thread::sleep(Duration::from_millis(300));
                }
            }
        }
    }

    fn wait_nodes_running(&mut self, what: &str) {
        let mut want = self.nm_ids.clone();
        want.sort();
        let t0 = Instant::now();
        loop {
            let mut running: Vec<String> = self
                .nodes()
                .iter()
                .filter(|n| n["state"] == "RUNNING")
                .filter_map(|n| n["node_id"].as_str().map(String::from))
                .collect();
            running.sort();
            if running == want {
                return;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(90),
                "timed out waiting for {what}: {running:?}\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Containers the RM counts on each NM (by NodeId), from its node reports.
    fn node_containers(&mut self) -> Vec<(String, i64)> {
        let mut v: Vec<(String, i64)> = self
            .nodes()
            .iter()
            .filter(|n| n["state"] == "RUNNING")
            .map(|n| {
                (
                    n["node_id"].as_str().unwrap_or("").to_string(),
                    n["containers"].as_i64().unwrap_or(-1),
                )
            })
            .collect();
        v.sort();
        v
    }

    /// The RM dies (SIGKILL); `while_down` runs; a new RM starts on the same addresses and
    /// state store.
    fn restart_rm(&mut self, while_down: impl FnOnce()) {
        let (rt, client, scheduler) = (
            self.rm.field("resource_tracker"),
            self.rm.field("client"),
            self.rm.field("scheduler"),
        );
        self.rm.kill9();
        while_down();
        wait_for(
            "the old RM's addresses to be free",
            Duration::from_secs(30),
            || {
                [&rt, &client, &scheduler]
                    .iter()
                    .all(|a| std::net::TcpListener::bind(a.as_str()).is_ok())
            },
        );
        self.rm = start_rm_daemon(&rt, &client, &scheduler, &self.recovery);
    }

    /// The finished application's cleanup and the acknowledgements of its completions reach
    /// both NMs: they drop its containers (`NMContext.getContainers()` empties).
    fn wait_nms_empty(&mut self) {
        let t0 = Instant::now();
        loop {
            let held: Vec<Value> = self
                .nms
                .iter_mut()
                .map(|n| n.command("status").unwrap()["containers"].clone())
                .collect();
            if held.iter().all(|h| h == 0) {
                return;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "containers the NMs still hold: {held:?}\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    fn logs(&self) -> String {
        self.nms
            .iter()
            .map(|n| n.log_tail(40))
            .collect::<Vec<_>>()
            .join("\n----\n")
    }

    fn submit(&mut self, words: &str) -> String {
        let s = self
            .client
            .command(&format!("app-submit {words}"))
            .unwrap_or_else(|e| panic!("app-submit: {e}"));
        s["app_id"].as_str().expect("app_id").to_string()
    }

    /// Waits for the application's end: FINISHED, SUCCEEDED, and the result file.
    fn finish(&mut self, id: &str, result: &std::path::Path) -> Value {
        let done = self
            .client
            .command(&format!("app-wait {id} 180"))
            .unwrap_or_else(|e| panic!("app-wait: {e}\n{}", self.logs()));
        assert_eq!(done["timed_out"], false, "{done}\n{}", self.logs());
        assert_eq!(done["state"], "FINISHED", "{done}\n{}", self.logs());
        assert_eq!(done["final_status"], "SUCCEEDED", "{done}");
        assert!(
            done["current_attempt_id"]
                .as_str()
                .is_some_and(|a| a.ends_with("_000001")),
            "the same attempt: {done}"
        );
        let text = std::fs::read_to_string(result).unwrap();
        let r: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(r["unexpected"], Value::Array(vec![]), "{r}");
        assert_eq!(r["attempt"], 1, "the same attempt finished the job: {r}");
        assert_eq!(r["replacements"], 0, "no container was lost: {r}");
        r
    }
}

/// `(index, exit status)` of every completion the AM got, in the RM's order, sorted.
fn completions(r: &Value) -> Vec<(i64, i64)> {
    let mut v: Vec<(i64, i64)> = r["completions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["index"].as_i64().unwrap(),
                x["exit_status"].as_i64().unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

/// The nodes the shells ran on, from the AM's result.
fn shell_nodes(r: &Value) -> Vec<String> {
    let mut v: Vec<String> = r["completions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|x| x["node_id"].as_str().map(String::from))
        .collect();
    v.sort();
    v.dedup();
    v
}

/// Four shells on two Java NMs run through an RM restart: both NMs register again with their
/// containers, which the new RM counts on them again and which are not killed; each shell's
/// exit status reaches the same AM attempt exactly once.
#[test]
fn java_nms_reregister_after_an_rm_restart_and_the_running_application_finishes() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut c = Cluster::start();
    let dir = tempfile::tempdir().unwrap();
    let result = dir.path().join("result.json");
    let id = c.submit(&format!(
        "containers=4 container_mb=1024 am_mb=1024 exit=1:3,2:4,3:5 \
         sleep=0:41,1:42,2:43,3:44 rm_retry_ms=500 result={}",
        result.display()
    ));
    let sleeps = ["sleep 41", "sleep 42", "sleep 43", "sleep 44"];
    wait_for("the four shells running", Duration::from_secs(120), || {
        sleeps.iter().all(|s| processes_with(s) >= 1)
    });
    let before: Vec<usize> = sleeps.iter().map(|s| processes_with(s)).collect();
    // The AM and the four shells, on both NMs (three 1 GiB containers fit on one).
    let counted = c.node_containers();
    assert_eq!(counted.len(), 2, "{counted:?}");
    assert_eq!(
        counted.iter().map(|(_, n)| n).sum::<i64>(),
        5,
        "{counted:?}"
    );
    assert!(counted.iter().all(|(_, n)| *n >= 2), "{counted:?}");

    c.restart_rm(|| {});
    c.wait_nodes_running("both Java NMs RUNNING at the new RM");
    // Re-registered with their containers: the new RM counts them where they run.
    let t0 = Instant::now();
    loop {
        let now = c.node_containers();
        if now == counted {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "containers at the new RM {now:?}, before {counted:?}\n{}",
            c.logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // The recovered application is ACCEPTED until its AM registers again (as in Java's
    // RMAppRecoveredTransition); the AM retries every 500 ms.
    let t0 = Instant::now();
    loop {
        let report = c.client.command(&format!("app-report {id}")).unwrap();
        if report["state"] == "RUNNING" {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "not RUNNING again at the new RM: {report}\n{}",
            c.logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // Nothing was killed by the restart or the resync.
    let after: Vec<usize> = sleeps.iter().map(|s| processes_with(s)).collect();
    assert_eq!(after, before, "the running shells survive");

    let r = c.finish(&id, &result);
    assert_eq!(completions(&r), vec![(0, 0), (1, 3), (2, 4), (3, 5)], "{r}");
    assert_eq!(shell_nodes(&r).len(), 2, "shells on both NMs: {r}");
    assert!(shell_nodes(&r).iter().all(|n| c.nm_ids.contains(n)), "{r}");
    c.wait_nms_empty();
    // The new RM runs new applications on the same NMs.
    let result2 = dir.path().join("result2.json");
    let id2 = c.submit(&format!(
        "containers=2 container_mb=1024 am_mb=1024 exit=1:7 rm_retry_ms=500 result={}",
        result2.display()
    ));
    assert_ne!(id2, id);
    let r2 = c.finish(&id2, &result2);
    assert_eq!(completions(&r2), vec![(0, 0), (1, 7)], "{r2}");
}

/// A shell completes while no RM is up. Its NM keeps the completed container until an RM
/// acknowledges it and reports it, COMPLETE with its exit status, when it registers again:
/// the AM gets it once, as the other shells' completions after the restart.
#[test]
fn a_container_that_completes_while_the_rm_is_down_reaches_the_am_after_the_restart() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut c = Cluster::start();
    let dir = tempfile::tempdir().unwrap();
    let result = dir.path().join("result.json");
    let id = c.submit(&format!(
        "containers=3 container_mb=1024 am_mb=1024 exit=0:9,1:6,2:0 \
         sleep=0:13,1:46,2:47 rm_retry_ms=500 result={}",
        result.display()
    ));
    let sleeps = ["sleep 13", "sleep 46", "sleep 47"];
    wait_for("the three shells running", Duration::from_secs(120), || {
        sleeps.iter().all(|s| processes_with(s) >= 1)
    });
    let long = processes_with("sleep 46") + processes_with("sleep 47");
    // Shell 0 still runs when the RM dies, and has ended when the new one starts.
    assert!(processes_with("sleep 13") >= 1);
    c.restart_rm(|| {
        wait_for(
            "shell 0 exits while the RM is down",
            Duration::from_secs(30),
            || processes_with("sleep 13") == 0,
        );
    });
    c.wait_nodes_running("both Java NMs RUNNING at the new RM");
    assert_eq!(
        processes_with("sleep 46") + processes_with("sleep 47"),
        long,
        "the running shells survive"
    );
    let r = c.finish(&id, &result);
    assert_eq!(completions(&r), vec![(0, 9), (1, 6), (2, 0)], "{r}");
}

/// The application ends while its AM's NodeManager is frozen (SIGSTOP), so the RM's cleanup
/// of it cannot reach that NM, and the RM dies. The NM comes back and registers with the new
/// RM naming the application in `runningApplications` (and its AM container COMPLETE): the
/// new RM, which recovered the application as FINISHED, has it cleaned up there, as Java's
/// `handleRunningAppOnNode` does; without that the NM would keep it RUNNING.
#[test]
fn an_application_finished_before_the_restart_is_cleaned_up_on_the_nm_still_running_it() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut c = Cluster::start();
    let dir = tempfile::tempdir().unwrap();
    let result = dir.path().join("result.json");
    // The 3 GiB shell cannot share the AM's NM (1 GiB used of 3).
    let id = c.submit(&format!(
        "containers=1 container_mb=3072 am_mb=1024 sleep=0:14 rm_retry_ms=500 result={}",
        result.display()
    ));
    wait_for("the shell running", Duration::from_secs(120), || {
        processes_with("sleep 14") >= 1
    });
    let used: Vec<(String, i64)> = c
        .nodes()
        .iter()
        .map(|n| {
            (
                n["node_id"].as_str().unwrap_or("").to_string(),
                n["used"]["memory_mb"].as_i64().unwrap_or(-1),
            )
        })
        .collect();
    let am_node = used
        .iter()
        .find(|(_, mb)| *mb == 1024)
        .map(|(n, _)| n.clone())
        .unwrap_or_else(|| panic!("the AM's node: {used:?}"));
    let am_nm = c.nm_ids.iter().position(|n| *n == am_node).unwrap();
    let pid = c.nms[am_nm].pid() as i32;
    // SAFETY: kill(2) on the JVM this test started.
    unsafe {
        libc::kill(pid, libc::SIGSTOP);
    }
    // The shell ends on the other NM, the AM unregisters (the RM stores the application's
    // end) and exits; its NM, frozen, hears nothing.
    let t0 = Instant::now();
    loop {
        let r = c.client.command(&format!("app-report {id}")).unwrap();
        if r["final_status"] == "SUCCEEDED" {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(90), "{r}");
        std::thread::sleep(Duration::from_millis(200));
    }
    c.restart_rm(|| {
        // SAFETY: as above.
        unsafe {
            libc::kill(pid, libc::SIGCONT);
        }
    });
    c.wait_nodes_running("both Java NMs RUNNING at the new RM");
    let report = c.client.command(&format!("app-report {id}")).unwrap();
    assert_eq!(report["state"], "FINISHED", "{report}");
    let t0 = Instant::now();
    loop {
        let st = c.nms[am_nm].command("status").unwrap();
        assert!(st["applications"].is_object(), "{st}");
        let state = st["applications"][id.as_str()].clone();
        // Gone, or past RUNNING: FINISHING_CONTAINERS_WAIT, APPLICATION_RESOURCES_CLEANINGUP,
        // FINISHED.
        if !["NEW", "INITING", "RUNNING"].iter().any(|s| state == *s) {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the AM's NM still has {id} {state}: {st}\n{}",
            c.logs()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    c.wait_nms_empty();
}
