//! Container logs over the agent's real webapp server: `ipc::metrics::MetricsHttp` polled by
//! `nm_runtime::logs::poll_webapp` with a real container table, fetched with plain HTTP/1.1
//! GETs over TCP (and by the `hotpath container logs` binary).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ipc::metrics::MetricsHttp;
use nm_core::ids::ContainerId;
use nm_core::status_updater::NodeIdentity;
use nm_core::table::{ContainerTable, Resource};
use nm_runtime::logs::{java_date, poll_webapp, ContainerLogs, NO_SUCH_LOG, UNKNOWN_CONTAINER};
use nm_runtime::shared::Shared;

const APP: &str = "application_1700000000000_0001";
/// Complete, files in both log dirs.
const DONE: &str = "container_1700000000000_0001_01_000002";
/// Running.
const RUN: &str = "container_e03_1700000000000_0001_01_000003";
/// NEW in the table.
const NEW: &str = "container_1700000000000_0001_01_000004";
/// Not in the table, but its log dir remains (finished and forgotten).
const GONE: &str = "container_1700000000000_0001_01_000005";
/// Unknown everywhere.
const NOBODY: &str = "container_1700000000000_0001_01_000099";
const NODE: &str = "nm-test.example:45454";
/// 2024-02-29T13:05:09Z.
const MTIME_MS: u64 = 1_709_211_909_000;
const MTIME_JAVA: &str = "Thu Feb 29 13:05:09 +0000 2024";

struct Server {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    _dir: tempfile::TempDir,
    big: Vec<u8>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn write_file(p: &Path, data: &[u8]) {
    std::fs::write(p, data).unwrap();
    let f = std::fs::File::options().write(true).open(p).unwrap();
    f.set_modified(UNIX_EPOCH + Duration::from_millis(MTIME_MS))
        .unwrap();
}

fn start() -> Server {
    let dir = tempfile::tempdir().unwrap();
    let (d1, d2) = (dir.path().join("logs1"), dir.path().join("logs2"));
    let c = |d: &Path, cid: &str| {
        let p = d.join(APP).join(cid);
        std::fs::create_dir_all(&p).unwrap();
        p
    };
    let done1 = c(&d1, DONE);
    write_file(&done1.join("stdout"), b"hello from stdout\nline two\n");
    write_file(&done1.join("stderr"), b"");
    std::fs::create_dir(done1.join("subdir")).unwrap();
    let secret = dir.path().join("secret");
    std::fs::write(&secret, b"not yours").unwrap();
    std::os::unix::fs::symlink(&secret, done1.join("escape")).unwrap();
    std::os::unix::fs::symlink("stdout", done1.join("alias")).unwrap();
    let done2 = c(&d2, DONE);
    write_file(&done2.join("syslog"), b"0123456789");
    let big: Vec<u8> = (0..3 * 1024 * 1024 + 7).map(|i| (i % 251) as u8).collect();
    write_file(&done2.join("big.log"), &big);
    write_file(&c(&d1, RUN).join("stdout"), b"still running\n");
    write_file(&c(&d1, GONE).join("stdout"), b"gone\n");

    let mut table = ContainerTable::new(16);
    let res = Resource {
        memory_mb: 1024,
        vcores: 1,
    };
    let id = |s: &str| ContainerId::parse(s).unwrap();
    table.launch(id(DONE), res, 0, 1, true).unwrap();
    table.complete(&id(DONE), 0, "").unwrap();
    table.launch(id(RUN), res, 0, 1, true).unwrap();
    table.launch(id(NEW), res, 0, 1, false).unwrap();
    let shared = Shared::new(
        NodeIdentity {
            host: "nm-test.example".into(),
            port: 45454,
            http_port: 0,
            resource: res,
            nm_version: "3.5.0".into(),
        },
        table,
    );
    let logs = ContainerLogs::new(vec![d1, d2], NODE);
    let mut http = MetricsHttp::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = http.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let thread = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if !poll_webapp(&mut http, &logs, &shared) {
                    std::thread::sleep(Duration::from_millis(2));
                }
            }
        })
    };
    Server {
        addr,
        stop,
        thread: Some(thread),
        _dir: dir,
        big,
    }
}

struct Resp {
    status: u16,
    head: String,
    body: Vec<u8>,
}

impl Resp {
    fn text(&self) -> String {
        String::from_utf8(self.body.clone()).unwrap()
    }
    fn json(&self) -> serde_json::Value {
        assert!(
            self.head.contains("Content-Type: application/json"),
            "{}",
            self.head
        );
        serde_json::from_slice(&self.body).unwrap()
    }
}

fn request(addr: SocketAddr, raw: &str) -> Resp {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(raw.as_bytes()).unwrap();
    let mut v = Vec::new();
    s.read_to_end(&mut v).unwrap();
    let end = v.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let head = String::from_utf8(v[..end].to_vec()).unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let body = v[end..].to_vec();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(len, body.len(), "Content-Length vs body");
    Resp { status, head, body }
}

fn get(addr: SocketAddr, target: &str) -> Resp {
    request(
        addr,
        &format!("GET {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"),
    )
}

/// The framed body Java's NM sends for `file` when `content` is what is sent of it.
fn framed(cid: &str, file: &str, len: usize, content: &[u8], running: bool) -> Vec<u8> {
    let mut v = Vec::new();
    if !content.is_empty() {
        let first = format!("Container: {cid} on {NODE}");
        v.extend_from_slice(
            format!(
                "{first}\nLogAggregationType: LOCAL\n{}\nLogType:{file}\n\
                 LogLastModifiedTime:{MTIME_JAVA}\nLogLength:{len}\nLogContents:\n",
                "=".repeat(first.len())
            )
            .as_bytes(),
        );
        v.extend_from_slice(content);
    }
    let end = format!("End of LogType:{file}");
    v.extend_from_slice(format!("{end}.").as_bytes());
    if running {
        v.extend_from_slice(
            format!(
                "This log file belongs to a running container ({cid}) and so may not be complete."
            )
            .as_bytes(),
        );
    }
    v.extend_from_slice(format!("\n{}\n\n", "*".repeat(end.len() + 50)).as_bytes());
    v
}

#[test]
fn the_listing_is_what_logs_cli_reads() {
    let s = start();
    let r = get(s.addr, &format!("/ws/v1/node/containers/{DONE}/logs"));
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.head.contains("X-Content-Type-Options: nosniff"));
    let v = r.json();
    let infos = v["containerLogsInfo"].as_array().unwrap();
    assert_eq!(infos.len(), 1);
    let info = &infos[0];
    assert_eq!(info["logAggregationType"], "LOCAL");
    assert_eq!(info["containerId"], DONE);
    assert_eq!(info["nodeId"], NODE);
    let files = info["containerLogInfo"].as_array().unwrap();
    let names: Vec<&str> = files
        .iter()
        .map(|f| f["fileName"].as_str().unwrap())
        .collect();
    // first log dir (sorted), then the second; the directory and the symlink out are not
    // files of the container, the symlink inside is
    assert_eq!(names, ["alias", "stderr", "stdout", "big.log", "syslog"]);
    let stdout = &files[2];
    assert_eq!(stdout["fileSize"], "27", "sizes are strings, as Java's");
    assert_eq!(stdout["lastModifiedTime"], MTIME_JAVA);
    assert_eq!(files[4]["fileSize"], "10");
    assert_eq!(
        nm_runtime::client::listed_file_names(&v),
        ["alias", "stderr", "stdout", "big.log", "syslog"]
    );
    // a container the table forgot still lists while its dir remains
    let g = get(s.addr, &format!("/ws/v1/node/containers/{GONE}/logs")).json();
    assert_eq!(
        g["containerLogsInfo"][0]["containerLogInfo"][0]["fileName"],
        "stdout"
    );
    // an epoch id, and a trailing slash
    let r = get(
        s.addr,
        "/ws/v1/node/containers/container_e03_1700000000000_0001_01_000003/logs/",
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["containerLogsInfo"][0]["containerId"], RUN);
}

#[test]
fn a_file_is_framed_as_java_frames_it() {
    let s = start();
    let data = b"hello from stdout\nline two\n";
    let r = get(
        s.addr,
        &format!("/ws/v1/node/containers/{DONE}/logs/stdout"),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(
        r.head
            .contains("Content-Type: text/plain; charset=utf-8\r\n"),
        "{}",
        r.head
    );
    assert_eq!(
        r.text(),
        String::from_utf8(framed(DONE, "stdout", 27, data, false)).unwrap()
    );
    // size > 0: the first bytes; size < 0: the last; |size| beyond the file: all of it
    let first = get(
        s.addr,
        &format!("/ws/v1/node/containers/{DONE}/logs/stdout?size=5"),
    );
    assert_eq!(first.body, framed(DONE, "stdout", 27, b"hello", false));
    let last = get(
        s.addr,
        &format!("/ws/v1/node/containers/{DONE}/logs/stdout?size=-4"),
    );
    assert_eq!(last.body, framed(DONE, "stdout", 27, b"two\n", false));
    let all = get(
        s.addr,
        &format!("/ws/v1/node/containers/{DONE}/logs/stdout?size=-1000"),
    );
    assert_eq!(all.body, framed(DONE, "stdout", 27, data, false));
    let more = get(
        s.addr,
        &format!("/ws/v1/node/containers/{DONE}/logs/stdout?format=text&size=1000"),
    );
    assert_eq!(more.body, framed(DONE, "stdout", 27, data, false));
    // nothing to send: Java writes no header, only the footer
    let zero = get(
        s.addr,
        &format!("/ws/v1/node/containers/{DONE}/logs/stdout?size=0"),
    );
    assert_eq!(zero.body, framed(DONE, "stdout", 27, b"", false));
    let empty = get(
        s.addr,
        &format!("/ws/v1/node/containers/{DONE}/logs/stderr"),
    );
    assert_eq!(empty.body, framed(DONE, "stderr", 0, b"", false));
    // the second log dir, the other path, a symlink that stays inside
    let sys = get(
        s.addr,
        &format!("/ws/v1/node/containerlogs/{DONE}/syslog?size=-3"),
    );
    assert_eq!(sys.body, framed(DONE, "syslog", 10, b"789", false));
    let alias = get(s.addr, &format!("/ws/v1/node/containers/{DONE}/logs/alias"));
    assert_eq!(alias.body, framed(DONE, "alias", 27, data, false));
    // running: the footer says so; forgotten but present: served as finished
    let run = get(s.addr, &format!("/ws/v1/node/containers/{RUN}/logs/stdout"));
    assert_eq!(
        run.body,
        framed(RUN, "stdout", 14, b"still running\n", true)
    );
    let gone = get(
        s.addr,
        &format!("/ws/v1/node/containers/{GONE}/logs/stdout"),
    );
    assert_eq!(gone.body, framed(GONE, "stdout", 5, b"gone\n", false));
    let bad = get(
        s.addr,
        &format!("/ws/v1/node/containers/{DONE}/logs/stdout?size=x"),
    );
    assert_eq!(bad.status, 400);
    assert!(
        bad.text().contains("size must be an integer"),
        "{}",
        bad.text()
    );
    let fmt = get(
        s.addr,
        &format!("/ws/v1/node/containers/{DONE}/logs/stdout?format=html"),
    );
    assert_eq!(fmt.status, 400);
}

#[test]
fn a_large_file_streams_whole_or_in_part() {
    let s = start();
    let n = s.big.len();
    let r = get(
        s.addr,
        &format!("/ws/v1/node/containers/{DONE}/logs/big.log"),
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.body, framed(DONE, "big.log", n, &s.big, false));
    let tail = get(
        s.addr,
        &format!("/ws/v1/node/containers/{DONE}/logs/big.log?size=-70000"),
    );
    assert_eq!(
        tail.body,
        framed(DONE, "big.log", n, &s.big[n - 70000..], false)
    );
    let head = get(
        s.addr,
        &format!("/ws/v1/node/containers/{DONE}/logs/big.log?size=1048577"),
    );
    assert_eq!(
        head.body,
        framed(DONE, "big.log", n, &s.big[..1048577], false)
    );
}

#[test]
fn names_that_leave_the_container_dir_are_refused() {
    let s = start();
    let base = format!("/ws/v1/node/containers/{DONE}/logs");
    for (name, want) in [
        ("..%2F..%2F..%2Fsecret", "must not contain '/'"),
        ("%2E%2E", "invalid log file name"),
        ("..", "invalid log file name"),
        ("../../../secret", "one path segment"),
        ("a%00b", "must not contain"),
        ("escape", "resolves outside"),
        ("%zz", "bad percent-encoding"),
    ] {
        let r = get(s.addr, &format!("{base}/{name}"));
        assert_eq!(r.status, 400, "{name}: {}", r.text());
        assert!(r.text().contains(want), "{name}: {}", r.text());
        assert!(!r.text().contains("not yours"));
        let r = get(s.addr, &format!("/ws/v1/node/containerlogs/{DONE}/{name}"));
        assert_eq!(r.status, 400, "containerlogs {name}");
    }
    let r = get(s.addr, &format!("{base}/nothing-here"));
    assert_eq!((r.status, r.text().trim()), (404, NO_SUCH_LOG));
    let r = get(s.addr, &format!("{base}/subdir"));
    assert_eq!(r.status, 404, "{}", r.text());
}

#[test]
fn unknown_and_unstarted_containers_and_bad_ids() {
    let s = start();
    let r = get(s.addr, &format!("/ws/v1/node/containers/{NOBODY}/logs"));
    assert_eq!(r.status, 404);
    let v = r.json();
    assert_eq!(v["RemoteException"]["exception"], "NotFoundException");
    assert_eq!(v["RemoteException"]["message"], UNKNOWN_CONTAINER);
    assert_eq!(
        v["RemoteException"]["javaClassName"],
        "org.apache.hadoop.yarn.webapp.NotFoundException"
    );
    let r = get(
        s.addr,
        &format!("/ws/v1/node/containers/{NOBODY}/logs/stdout"),
    );
    assert_eq!((r.status, r.text().trim()), (404, UNKNOWN_CONTAINER));
    let r = get(s.addr, &format!("/ws/v1/node/containers/{NEW}/logs/stdout"));
    assert_eq!(r.status, 404);
    assert!(r.text().contains("not yet running"), "{}", r.text());
    let r = get(s.addr, "/ws/v1/node/containers/container_x/logs");
    assert_eq!(r.status, 400);
    assert_eq!(
        r.json()["RemoteException"]["message"],
        "invalid container id, container_x"
    );
    let r = get(s.addr, "/ws/v1/node/containerlogs/application_1_1/stdout");
    assert_eq!(r.status, 400);
}

#[test]
fn metrics_node_info_and_the_rest_of_http() {
    let s = start();
    let m = get(s.addr, "/metrics");
    assert_eq!(m.status, 200);
    assert!(m.head.contains("Content-Type: text/plain; version=0.0.4"));
    assert!(m.text().contains("hotpath_agent_"), "{}", m.text());
    for p in ["/ws/v1/node", "/ws/v1/node/info", "/ws/v1/node/info/"] {
        let r = get(s.addr, p);
        assert_eq!(r.status, 200, "{p}");
        let v = r.json();
        let info = &v["nodeInfo"];
        assert_eq!(info["id"], NODE);
        assert_eq!(info["nodeHostName"], "nm-test.example");
        assert_eq!(info["nodeHealthy"], true);
        assert_eq!(info["hadoopVersion"], "3.5.0");
        assert_eq!(info["nodeManagerVersion"], "3.5.0");
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        let started = info["nmStartupTime"].as_i64().unwrap();
        assert!(started > 0 && started <= now);
    }
    assert_eq!(get(s.addr, "/ws/v1/node/apps").status, 404);
    assert_eq!(get(s.addr, "/ws/v1/nodes").status, 404);
    assert_eq!(get(s.addr, "/nope").status, 404);
    let post = request(
        s.addr,
        &format!("POST /ws/v1/node/containers/{DONE}/logs HTTP/1.1\r\nContent-Length: 0\r\n\r\n"),
    );
    assert_eq!(post.status, 405);
    assert!(post.head.contains("Allow: GET"));
    let garbage = request(s.addr, "\x16\x03\x01 hello\r\n\r\n");
    assert_eq!(garbage.status, 400);
    // the server is still fine after all that
    assert_eq!(get(s.addr, "/metrics").status, 200);
    assert_eq!(java_date(MTIME_MS as i64), MTIME_JAVA);
}

fn hotpath(args: &[&str]) -> (bool, Vec<u8>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_hotpath"))
        .args(args)
        .env_remove("HADOOP_CONF_DIR")
        .env_remove("HADOOP_HOME")
        .output()
        .unwrap();
    (
        out.status.success(),
        out.stdout,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_cli_prints_one_file_or_all_of_them() {
    let s = start();
    let addr = s.addr.to_string();
    let (ok, out, err) = hotpath(&[
        "container",
        "logs",
        DONE,
        "--file",
        "stdout",
        "--size",
        "-4",
        "--addr",
        &addr,
    ]);
    assert!(ok, "{err}");
    assert_eq!(out, framed(DONE, "stdout", 27, b"two\n", false));
    let (ok, out, err) = hotpath(&["container", "logs", DONE, "--addr", &addr, "--size", "3"]);
    assert!(ok, "{err}");
    let mut want = Vec::new();
    for (f, len, c) in [
        ("alias", 27, &b"hel"[..]),
        ("stderr", 0, b""),
        ("stdout", 27, b"hel"),
        ("big.log", s.big.len(), &s.big[..3]),
        ("syslog", 10, b"012"),
    ] {
        want.extend(framed(DONE, f, len, c, false));
    }
    assert_eq!(
        String::from_utf8_lossy(&out),
        String::from_utf8_lossy(&want)
    );
    let (ok, _, err) = hotpath(&["container", "logs", NOBODY, "--addr", &addr]);
    assert!(!ok);
    assert!(
        err.contains("HTTP 404") && err.contains("Unknown container"),
        "{err}"
    );
    let (ok, _, err) = hotpath(&[
        "container",
        "logs",
        DONE,
        "--file",
        "../secret",
        "--addr",
        &addr,
    ]);
    assert!(!ok);
    assert!(err.contains("HTTP 400"), "{err}");
}
