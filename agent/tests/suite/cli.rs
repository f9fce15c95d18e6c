//! The `hotpath` binary's own subcommands, run as a user runs them.

use crate::support;

use std::io::Write;
use std::process::{Command, Stdio};

use support::start_rm;

fn hotpath() -> Command {
    Command::new(env!("CARGO_BIN_EXE_hotpath"))
}

fn run_with_stdin(args: &[&str], input: &[u8]) -> (bool, String, String) {
    let mut child = hotpath()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn hotpath");
    child.stdin.take().unwrap().write_all(input).unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn hw_json_has_the_documented_keys_and_a_plan_on_this_machine() {
    let out = hotpath().args(["hw", "--json"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let pus = v["pus"].as_u64().unwrap();
    assert!(v["cores"].as_u64().unwrap() >= 1);
    assert!(pus >= v["cores"].as_u64().unwrap());
    assert!(v["numa_nodes"].as_u64().unwrap() >= 1);
    let plan = v["plan"].as_array().unwrap();
    let roles: Vec<&str> = plan.iter().map(|a| a["role"].as_str().unwrap()).collect();
    assert!(roles.contains(&"housekeeping"), "{roles:?}");
    assert!(roles.iter().any(|r| r.starts_with("ring")), "{roles:?}");
    assert!(roles.contains(&"hdfs-reader"), "{roles:?}");
    // Every CPU in the plan is one this process may run on.
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim();
    let mut allowed = Vec::new();
    for part in list.split(',') {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        allowed.extend(a.parse::<u64>().unwrap()..=b.parse::<u64>().unwrap());
    }
    for a in plan {
        let cpu = a["cpu"].as_u64().unwrap();
        assert!(allowed.contains(&cpu), "cpu {cpu} not in {list}");
    }
}

#[test]
fn hw_text_names_every_role_with_its_thread() {
    let out = hotpath().args(["hw", "--role-set", "rm"]).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("housekeeping"), "{text}");
    assert!(text.contains("shard"), "{text}");
    assert!(text.contains("hp-"), "{text}");
}

/// The worked getFileInfo("/tmp") frame of hadoop-wire.md A.9 (clientId 00..0f).
fn getfileinfo_frame() -> Vec<u8> {
    let mut hdr = vec![0x08, 0x02, 0x10, 0x00, 0x18, 0x00, 0x22, 0x10];
    hdr.extend(0u8..16);
    hdr.extend([0x28, 0x00]);
    let proto = b"org.apache.hadoop.hdfs.protocol.ClientProtocol";
    let mut rh = vec![0x0a, 0x0b];
    rh.extend(b"getFileInfo");
    rh.extend([0x12, proto.len() as u8]);
    rh.extend(proto);
    rh.extend([0x18, 0x01]);
    let payload = [0x0a, 0x04, b'/', b't', b'm', b'p'];
    let mut body = vec![hdr.len() as u8];
    body.extend(&hdr);
    body.push(rh.len() as u8);
    body.extend(&rh);
    body.push(payload.len() as u8);
    body.extend(payload);
    let mut frame = (body.len() as u32).to_be_bytes().to_vec();
    frame.extend(body);
    assert_eq!(frame.len(), 102);
    frame
}

#[test]
fn decode_request_frame_prints_header_request_header_and_payload() {
    let (ok, stdout, stderr) = run_with_stdin(
        &[
            "decode",
            "GetFileInfoRequestProto",
            "--frame",
            "request",
            "-",
        ],
        &getfileinfo_frame(),
    );
    assert!(ok, "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["rpc_header"]["callId"], 0);
    assert_eq!(v["rpc_header"]["rpcOp"], "RPC_FINAL_PACKET");
    assert_eq!(v["rpc_header"]["rpcKind"], "RPC_PROTOCOL_BUFFER");
    assert_eq!(v["request_header"]["methodName"], "getFileInfo");
    assert_eq!(v["request_header"]["clientProtocolVersion"], 1);
    assert_eq!(v["payload"]["src"], "/tmp");
}

#[test]
fn decode_bare_message_prints_only_fields_present_and_skips_unknown() {
    // ContainerStatusProto with state C_COMPLETE (2:3), exit_status 0 present (4:0),
    // and an unknown field 99 (varint) that must not be printed.
    let bytes = [0x10, 0x03, 0x20, 0x00, 0x98, 0x06, 0x07];
    let (ok, stdout, stderr) = run_with_stdin(&["decode", "ContainerStatusProto"], &bytes);
    assert!(ok, "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let obj = v.as_object().unwrap();
    assert_eq!(obj.len(), 2, "{stdout}");
    assert_eq!(v["state"], "C_COMPLETE");
    assert_eq!(v["exit_status"], 0);
}

#[test]
fn decode_rejects_garbage_and_unknown_types_with_an_error_not_a_panic() {
    let (ok, _, stderr) = run_with_stdin(&["decode", "NodeHeartbeatRequestProto"], &[0x0a, 0xff]);
    assert!(!ok);
    assert!(stderr.contains("decoding"), "{stderr}");
    let (ok, _, stderr) = run_with_stdin(&["decode", "NoSuchProto"], &[]);
    assert!(!ok);
    assert!(stderr.contains("unknown message"), "{stderr}");
    let (ok, _, stderr) = run_with_stdin(
        &["decode", "GetFileInfoRequestProto", "--frame", "request"],
        &[0x7f, 0xff, 0xff, 0xff, 0x00],
    );
    assert!(!ok);
    assert!(stderr.contains("frame length"), "{stderr}");
}

/// `hotpath rm` as a service: /metrics answers, SIGHUP re-reads the host lists and keeps it
/// running, SIGTERM stops it cleanly (the completion log committed).
#[test]
fn rm_serves_metrics_rereads_on_sighup_and_stops_on_sigterm() {
    use std::io::Read;
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    let include = dir.path().join("include");
    std::fs::write(&include, "").unwrap();
    let mut rm = start_rm(
        dir.path(),
        &[format!(
            "yarn.resourcemanager.nodes.include-path={}",
            include.display()
        )],
        "info",
        Stdio::piped(),
    );
    let metrics = rm.metrics.clone();
    let get = |path: &str| -> String {
        let mut s = std::net::TcpStream::connect(&metrics).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        write!(s, "GET {path} HTTP/1.0\r\n\r\n").unwrap();
        let mut r = String::new();
        s.read_to_string(&mut r).unwrap();
        r
    };
    let r = get("/metrics");
    assert!(r.starts_with("HTTP/1.0 200"), "{r}");
    assert!(r.contains("hotpath_rm_heartbeats_total"), "{r}");
    assert!(get("/nope").starts_with("HTTP/1.0 404"));
    // a client that sends nothing does not block the endpoint for longer than its 2 s limit
    let idle = std::net::TcpStream::connect(&metrics).unwrap();
    let t = Instant::now();
    assert!(get("/metrics").starts_with("HTTP/1.0 200"));
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    drop(idle);

    let pid = rm.pid.to_string();
    let kill = |sig: &str| {
        let ok = Command::new("kill").args([sig, &pid]).status().unwrap();
        assert!(ok.success(), "kill {sig}");
    };
    kill("-HUP");
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        rm.child.try_wait().unwrap().is_none(),
        "SIGHUP must not stop the RM"
    );
    assert!(get("/metrics").starts_with("HTTP/1.0 200"));
    kill("-TERM");
    let t = Instant::now();
    let status = loop {
        if let Some(s) = rm.child.try_wait().unwrap() {
            break s;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "SIGTERM did not stop the RM"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    rm.child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(status.success(), "{status:?}: {err}");
    assert!(err.contains("SIGHUP: host lists re-read"), "{err}");
    assert!(err.contains("stopping"), "{err}");
}
