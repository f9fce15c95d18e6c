//! Three real ResourceManagers (`yarn-rm-ha --rms 3 --profile agents`) and one HA agent: the
//! agent walks the rm-ids round-robin past a standby to whichever RM is active — including the
//! third one, which a Java NodeManager reaches only after a full 15–45 s sleep (YARN-11355:
//! only the first failover is immediate) — and past a stopped RM; an application then runs on
//! the last active.

use std::time::{Duration, Instant};

use peer_harness::{Mode, Shared};

use crate::rm_ha_failover::{active_nodes, agent_status, start_ha_agent};

static RM: Shared = Shared::new(Mode::YarnRmHa, &["--rms", "3", "--profile", "agents"]);

fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) -> Duration {
    let t0 = Instant::now();
    while !f() {
        assert!(
            t0.elapsed() < timeout,
            "timed out ({timeout:?}) waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    t0.elapsed()
}

#[test]
fn an_agent_finds_the_active_among_three_rms_past_a_standby_and_a_stopped_one() {
    let mut rm = RM.lock().expect("yarn-rm-ha --rms 3");
    let ready = rm.ready().clone();
    assert_eq!(ready["active"], 0, "{ready}");
    let a = start_ha_agent(&ready, "127.0.0.65", &[]);
    let node = a.field("node_id");
    let at = |rm: &mut peer_harness::Peer, want: i64| {
        let (active, nodes) = active_nodes(rm);
        active == want
            && nodes
                .iter()
                .any(|n| n["node_id"] == node.as_str() && n["response_id"].as_i64() >= Some(1))
    };
    wait_for("the agent at rm0", Duration::from_secs(60), || {
        at(&mut rm, 0)
    });

    // rm0 -> rm2: the agent's hop to rm1 is refused, the next one (100-300 ms later) is rm2
    rm.command("failover 0 2").unwrap();
    let took = wait_for("the agent at rm2", Duration::from_secs(30), || {
        at(&mut rm, 2)
    });
    let s = agent_status(&a);
    eprintln!("FIGURE rm0 -> rm2 (past the standby rm1): agent heartbeating at rm2 {took:?} after the failover; {s}");
    assert_eq!(s["rm_id"], "rm2", "{s}");
    assert!(s["rm_failovers"].as_u64() >= Some(2), "{s}");

    // the active dies; rm1 becomes active: rm2 refused, rm0 standby refused, then rm1
    rm.command("stop 2").unwrap();
    rm.command("transition 1 active").unwrap();
    let took = wait_for("the agent at rm1", Duration::from_secs(30), || {
        at(&mut rm, 1)
    });
    let s = agent_status(&a);
    eprintln!("FIGURE rm2 stopped, rm1 active: agent heartbeating at rm1 {took:?} later; {s}");
    assert_eq!(s["rm_id"], "rm1", "{s}");
    assert!(s["resyncs"].as_u64() >= Some(2), "{s}");

    // containers allocated by rm1 start on the agent (its keys and identifier)
    let dir = tempfile::tempdir().unwrap();
    let result = dir.path().join("result.json");
    let sub = rm
        .command(&format!(
            "app-submit containers=3 container_mb=512 result={}",
            result.display()
        ))
        .unwrap_or_else(|e| panic!("app-submit: {e}\n{}", rm.log_tail(60)));
    let app = sub["app_id"].as_str().unwrap().to_string();
    let done = rm
        .command(&format!("app-wait {app} 180"))
        .unwrap_or_else(|e| panic!("app-wait: {e}\n{}", rm.log_tail(80)));
    assert_eq!(
        (done["state"].as_str(), done["final_status"].as_str()),
        (Some("FINISHED"), Some("SUCCEEDED")),
        "{done}\n{}",
        rm.log_tail(80)
    );
    rm.command("start 2").unwrap();
}
