//! The agent's I/O edge against the embedded rm-core service: the control socket through the
//! `hotpath container` CLI, cleanup orders, `/metrics`, `getNodeReport` and `getBuffer` on the
//! agent's own IPC server, node health (local dirs, health script), pinned thread names.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::process::Command;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use agent::demo::{Cluster, DemoConfig};
use nm_runtime::client::fetch_node_report;
use nm_runtime::{Agent, AgentConfig};

fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < timeout, "{what}: not within {timeout:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn cli(sock: &std::path::Path, args: &[&str]) -> (bool, serde_json::Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_hotpath"))
        .arg("container")
        .arg("--socket")
        .arg(sock)
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let v = serde_json::from_str(&stdout).unwrap_or(serde_json::Value::Null);
    (
        out.status.success(),
        v,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn http_get(addr: std::net::SocketAddr, path: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn control_socket_metrics_report_buffer_health_and_threads() {
    let c = Cluster::start(DemoConfig {
        agents: 0,
        heartbeat_ms: 200,
        ..DemoConfig::default()
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("health.sh");
    let flag = dir.path().join("broken");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho 'some output'\nif [ -e {} ]; then echo 'ERROR fan failure'; fi\n",
            flag.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut cfg =
        AgentConfig::local(c.rm_addr(), "127.0.0.12".parse().unwrap(), dir.path()).unwrap();
    cfg.pin = true;
    cfg.health.script = Some(script);
    cfg.health.script_interval = Duration::from_millis(200);
    cfg.cleanup_grace = Duration::from_millis(1500);
    cfg.memory_mb = 4096;
    cfg.vcores = 3;
    let a = Agent::start(cfg).unwrap();
    let sh = a.shared().clone();
    let sock = a.control_path().unwrap().to_owned();
    wait_for("registered", Duration::from_secs(10), || {
        sh.metrics.heartbeats_ok.load(Relaxed) >= 2
    });

    // thread names from the hw plan
    let names: Vec<String> = std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("comm")).ok())
        .map(|s| s.trim().to_string())
        .collect();
    assert!(
        names.iter().any(|n| n.starts_with("hp-ring0-")),
        "{names:?}"
    );
    assert!(names.iter().any(|n| n.starts_with("hp-hk-")), "{names:?}");
    // the network role's three threads (heartbeats, the RM client's reader, the IPC server's
    // ring) are pinned to one CPU, the plan's ring CPU
    let allowed = |prefix: &str| -> String {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter_map(|e| {
                let p = e.ok()?.path();
                let comm = std::fs::read_to_string(p.join("comm")).ok()?;
                if !comm.trim().starts_with(prefix) {
                    return None;
                }
                let status = std::fs::read_to_string(p.join("status")).ok()?;
                status
                    .lines()
                    .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                    .map(|v| v.trim().to_string())
            })
            .next()
            .unwrap_or_else(|| panic!("no thread named {prefix}*: {names:?}"))
    };
    let ring = allowed("hp-ring0-");
    assert!(
        !ring.contains(',') && !ring.contains('-'),
        "pinned to one CPU: {ring}"
    );
    assert_eq!(allowed("hp-ring0rx-"), ring, "the RM client's reader");
    assert_eq!(allowed("hp-ring0srv-"), ring, "the agent's IPC server ring");

    // container lifecycle through the CLI
    let cid = "container_1700000000000_0007_01_000001";
    let (ok, v, err) = cli(&sock, &["launch", cid, "--memory-mb", "2048"]);
    assert!(ok, "{err}");
    assert_eq!(v["ok"], true);
    let (ok, _, err) = cli(&sock, &["launch", cid]);
    assert!(!ok && err.contains("already exists"), "{err}");
    let (ok, _, err) = cli(&sock, &["launch", "container_bad"]);
    assert!(!ok && err.contains("not a container id"), "{err}");
    assert!(cli(&sock, &["running", cid]).0);
    let (_, v, _) = cli(&sock, &["list"]);
    assert_eq!(v["containers"][0]["state"], "RUNNING", "{v}");
    assert!(
        cli(
            &sock,
            &[
                "complete",
                cid,
                "--exit-status",
                "3",
                "--diagnostics",
                "boom"
            ]
        )
        .0
    );
    // delivered, then acknowledged by rm-core (containers_to_be_removed_from_nm) and forgotten
    wait_for("acked", Duration::from_secs(10), || {
        let (_, v, _) = cli(&sock, &["status"]);
        v["totals"]["acked"] == 1
    });
    let (_, v, _) = cli(&sock, &["status"]);
    assert_eq!(v["phase"], "registered", "{v}");
    assert_eq!(v["node_id"], a.node_id());

    // a cleanup order from the RM (our admin kill-container) reaches a watcher; nobody answers,
    // so the agent completes the container itself after the grace time
    let cid2 = "container_1700000000000_0007_01_000002";
    assert!(cli(&sock, &["launch", cid2, "--running"]).0);
    let mut watcher = nm_runtime::control::ControlClient::connect(&sock).unwrap();
    watcher.request(&serde_json::json!({"op":"watch"})).unwrap();
    let hb = sh.metrics.heartbeats_ok.load(Relaxed);
    wait_for("RM saw it running", Duration::from_secs(5), || {
        sh.metrics.heartbeats_ok.load(Relaxed) >= hb + 2
    });
    std::thread::sleep(Duration::from_millis(100)); // the shard applies the status
    {
        let rm = c.rm().unwrap();
        let t = rm.tracker().lock().unwrap();
        t.kill_container(rm_core::ids::ContainerKey {
            app: rm_core::ids::AppKey {
                cluster_timestamp: 1_700_000_000_000,
                id: 7,
            },
            attempt: 1,
            id: 2,
        });
    }
    let ev = watcher
        .read_line(Some(Duration::from_secs(10)))
        .unwrap()
        .expect("a cleanup order");
    assert_eq!(ev["event"], "cleanup");
    assert_eq!(ev["container"], cid2);
    assert_eq!(ev["reason"], "containers_to_cleanup");
    wait_for("forced completion", Duration::from_secs(10), || {
        sh.table.lock().unwrap().totals().cleanup_forced == 1
    });

    // /metrics
    let body = http_get(a.metrics_addr().unwrap(), "/metrics");
    assert!(body.starts_with("HTTP/1.0 200"), "{body}");
    for k in [
        "hotpath_agent_heartbeats_sent_total",
        "hotpath_agent_rpc_latency_seconds_bucket{le=\"+Inf\"}",
        "hotpath_agent_containers{state=\"running\"}",
        "hotpath_agent_resyncs_total 0",
        "hotpath_agent_reconnects_total 0",
        "hotpath_agent_registered 1",
    ] {
        assert!(body.contains(k), "{k} missing:\n{body}");
    }
    assert!(http_get(a.metrics_addr().unwrap(), "/nope").starts_with("HTTP/1.0 404"));

    // getNodeReport and getBuffer on the agent's own IPC server (hotpath.agent.ipc.address);
    // the node address (the NodeId) serves ContainerManagementProtocol.
    let ipc = a.ipc_addr().unwrap();
    let node_port: u16 = a.node_id().rsplit(':').next().unwrap().parse().unwrap();
    assert_ne!(node_port, ipc.port());
    assert_eq!(ipc.ip().to_string(), "127.0.0.12");
    let r = fetch_node_report(ipc).unwrap();
    assert_eq!(r.node_id.as_ref().unwrap().port, Some(i32::from(node_port)));
    assert_eq!(r.total.as_ref().unwrap().memory, Some(4096));
    assert_eq!(r.phase.as_deref(), Some("registered"));
    assert!(r.heartbeats.unwrap() >= 4);
    let client = ipc::client::Client::new(
        ipc,
        ipc::client::ClientConfig {
            protocol: ipc::buffer_protocol::PROTOCOL.into(),
            ..Default::default()
        },
    );
    let mut req = Vec::new();
    ipc::buffer_protocol::encode_request(1 << 20, &mut req);
    let resp = client.call(ipc::buffer_protocol::GET_BUFFER, &req).unwrap();
    let data = ipc::buffer_protocol::response_data(resp.payload()).unwrap();
    assert_eq!(data.len(), 1 << 20);
    assert!(ipc::buffer_protocol::is_pattern(data));

    // health: the script's ERROR line makes the node unhealthy, and the report says why
    assert!(sh.health.lock().unwrap().healthy);
    std::fs::write(&flag, b"").unwrap();
    wait_for("unhealthy", Duration::from_secs(10), || {
        !sh.health.lock().unwrap().healthy
    });
    let h = sh.health.lock().unwrap().clone();
    assert!(h.report.contains("ERROR fan failure"), "{h:?}");
    wait_for("report", Duration::from_secs(5), || {
        fetch_node_report(ipc)
            .unwrap()
            .health
            .unwrap()
            .is_node_healthy
            == Some(false)
    });
    a.stop();
    assert_eq!(a.join(), nm_runtime::ExitReason::Stopped);
}

#[test]
fn a_bad_local_dir_of_two_is_reported_and_dropped_and_both_bad_make_the_node_unhealthy() {
    let c = Cluster::start(DemoConfig {
        agents: 0,
        ..DemoConfig::default()
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, b"x").unwrap();
    let good = dir.path().join("good");
    let bad = file.join("sub");
    let mut cfg =
        AgentConfig::local(c.rm_addr(), "127.0.0.13".parse().unwrap(), dir.path()).unwrap();
    cfg.health.local_dirs = vec![good.clone(), bad.clone()];
    let a = Agent::start(cfg).unwrap();
    let h = a.shared().health.lock().unwrap().clone();
    // Java: 1 of 2 good is ≥ 0.25: healthy, and the report names the errored dir
    assert!(h.healthy, "{h:?}");
    let b = bad.display();
    assert_eq!(
        h.report,
        format!("1/2 local-dirs have errors:  [ {b} : Cannot create directory: {b} ] ")
    );
    let v = a.shared().dirs.get().unwrap().view();
    assert_eq!(v.good.local_dirs, vec![good]);
    assert_eq!(v.bad_local, 1);
    drop(a);

    let mut cfg =
        AgentConfig::local(c.rm_addr(), "127.0.0.13".parse().unwrap(), dir.path()).unwrap();
    cfg.health.local_dirs = vec![bad.clone(), file.join("other")];
    let a = Agent::start(cfg).unwrap();
    let h = a.shared().health.lock().unwrap().clone();
    assert!(!h.healthy, "{h:?}");
    assert!(
        h.report.starts_with("2/2 local-dirs have errors:  [ "),
        "{h:?}"
    );
}

/// A container's process cannot use the agent's control socket (issue 35: a container of the
/// agent's uid could `localize` HDFS files with the agent's login and forge `complete`
/// events): the same `hotpath container` call is answered for an operator's shell and refused
/// for a process started with a container's environment.
#[test]
fn a_containers_process_is_refused_by_the_control_socket() {
    let c = Cluster::start(DemoConfig {
        agents: 0,
        ..DemoConfig::default()
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cfg = AgentConfig::local(c.rm_addr(), "127.0.0.14".parse().unwrap(), dir.path()).unwrap();
    let a = Agent::start(cfg).unwrap();
    let sock = a.control_path().unwrap().to_owned();
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
    let (ok, v, err) = cli(&sock, &["status"]);
    assert!(ok, "an operator's call: {v} {err}");
    let out = Command::new(env!("CARGO_BIN_EXE_hotpath"))
        .arg("container")
        .arg("--socket")
        .arg(&sock)
        .arg("status")
        .env("CONTAINER_ID", "container_1700000000000_0001_01_000002")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("is a container's"), "{text}");
}
