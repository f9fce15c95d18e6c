//! Clients of a running agent besides its control socket ([`crate::control::ControlClient`]):
//! `getNodeReport` over its own IPC protocol ([`crate::report`]) and a container's log files
//! from its webapp ([`crate::logs`]), as `hotpath container report|logs` and the tests use them.

use std::time::Duration;

use conf::Configuration;
use serde_json::json;

use crate::config::ConfigError;
use crate::error::Error;
use crate::report::GetNodeReportResponseProto;

/// The agent's webapp address: `addr` when given, else `yarn.nodemanager.webapp.address` of
/// the environment's configuration (`0.0.0.0` as `127.0.0.1`), else `127.0.0.1:8042`.
pub fn webapp_addr(addr: Option<&str>) -> Result<std::net::SocketAddr, ConfigError> {
    const KEY: &str = "yarn.nodemanager.webapp.address";
    let text = match addr {
        Some(a) => a.to_string(),
        None => {
            let conf = Configuration::from_env()?;
            match conf.try_get(KEY)? {
                Some(_) => {
                    let hp = conf.get_socket_addr(KEY, 8042)?;
                    let host = if hp.host == "0.0.0.0" || hp.host.is_empty() {
                        "127.0.0.1".to_string()
                    } else {
                        hp.host
                    };
                    format!("{host}:{}", hp.port)
                }
                None => "127.0.0.1:8042".into(),
            }
        }
    };
    std::net::ToSocketAddrs::to_socket_addrs(text.as_str())
        .map_err(|e| ConfigError::Invalid(format!("webapp address {text}: {e}")))?
        .next()
        .ok_or_else(|| ConfigError::Invalid(format!("webapp address {text}: no address")))
}

/// `s` with everything but RFC 3986 unreserved characters percent-encoded (one path segment).
fn encode_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Longest response head read by [`http_get`].
const MAX_RESPONSE_HEAD: usize = 64 * 1024;
/// Longest JSON listing or error body read into memory.
const MAX_SMALL_BODY: u64 = 16 * 1024 * 1024;

/// `GET target` (HTTP/1.1, `Connection: close`) on `addr`: the status and a reader of the
/// body (to the end of the connection).
pub fn http_get(
    addr: std::net::SocketAddr,
    target: &str,
    accept: &str,
) -> Result<(u16, Box<dyn std::io::Read>), Error> {
    use std::io::{Read, Write};
    let io = |e: std::io::Error| Error::Io(format!("GET http://{addr}{target}: {e}"));
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(10)).map_err(io)?;
    s.set_read_timeout(Some(Duration::from_secs(60)))
        .map_err(io)?;
    s.set_write_timeout(Some(Duration::from_secs(10)))
        .map_err(io)?;
    write!(
        s,
        "GET {target} HTTP/1.1\r\nHost: {addr}\r\nAccept: {accept}\r\nConnection: close\r\n\r\n"
    )
    .map_err(io)?;
    let mut head = Vec::new();
    let mut chunk = [0u8; 4096];
    let end = loop {
        if let Some(i) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if head.len() > MAX_RESPONSE_HEAD {
            return Err(Error::Io(format!(
                "GET http://{addr}{target}: response head longer than {MAX_RESPONSE_HEAD} bytes"
            )));
        }
        let n = s.read(&mut chunk).map_err(io)?;
        if n == 0 {
            return Err(Error::Io(format!(
                "GET http://{addr}{target}: connection closed before the response head ended"
            )));
        }
        head.extend_from_slice(&chunk[..n]);
    };
    let status_line = String::from_utf8_lossy(head.split(|&b| b == b'\n').next().unwrap_or(&[]))
        .trim_end()
        .to_string();
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse::<u16>().ok())
        .filter(|_| status_line.starts_with("HTTP/"))
        .ok_or_else(|| {
            Error::Io(format!(
                "GET http://{addr}{target}: not an HTTP status line: {status_line:?}"
            ))
        })?;
    let rest = head[end..].to_vec();
    Ok((status, Box::new(std::io::Cursor::new(rest).chain(s))))
}

/// Reads at most [`MAX_SMALL_BODY`] bytes of `r`.
fn read_small(r: Box<dyn std::io::Read>) -> Result<Vec<u8>, Error> {
    use std::io::Read;
    let mut v = Vec::new();
    r.take(MAX_SMALL_BODY)
        .read_to_end(&mut v)
        .map_err(|e| Error::Io(format!("reading the response: {e}")))?;
    Ok(v)
}

/// The refusal of a non-200 answer: its `RemoteException.message` or its text.
fn http_refusal(target: &str, status: u16, body: &[u8]) -> Error {
    let msg = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v["RemoteException"]["message"].as_str().map(String::from))
        .unwrap_or_else(|| String::from_utf8_lossy(body).trim().to_string());
    Error::Io(format!("GET {target}: HTTP {status}: {msg}"))
}

/// The `fileName`s of a `/containers/{cid}/logs` listing, both levels object or array (as
/// LogsCLI reads them), in order, each once.
pub fn listed_file_names(v: &serde_json::Value) -> Vec<String> {
    fn items(v: &serde_json::Value) -> Vec<&serde_json::Value> {
        match v {
            serde_json::Value::Array(a) => a.iter().collect(),
            serde_json::Value::Object(_) => vec![v],
            _ => Vec::new(),
        }
    }
    let mut names: Vec<String> = Vec::new();
    for info in items(&v["containerLogsInfo"]) {
        for f in items(&info["containerLogInfo"]) {
            if let Some(n) = f["fileName"].as_str() {
                if !names.iter().any(|x| x == n) {
                    names.push(n.to_string());
                }
            }
        }
    }
    names
}

/// `hotpath container logs`: fetches the listing (unless `file` is given) and writes each
/// file's framed text to `out`.
pub fn print_container_logs(
    addr: std::net::SocketAddr,
    container: &str,
    file: Option<&str>,
    size: Option<i64>,
    out: &mut dyn std::io::Write,
) -> Result<(), Error> {
    let base = format!("/ws/v1/node/containers/{}/logs", encode_segment(container));
    let names = match file {
        Some(f) => vec![f.to_string()],
        None => {
            let (status, body) = http_get(addr, &base, "application/json")?;
            let body = read_small(body)?;
            if status != 200 {
                return Err(http_refusal(&base, status, &body));
            }
            let v: serde_json::Value = serde_json::from_slice(&body)
                .map_err(|e| Error::Io(format!("GET {base}: the listing is not JSON: {e}")))?;
            listed_file_names(&v)
        }
    };
    if names.is_empty() {
        eprintln!("container {container}: no log files on this node");
    }
    for name in names {
        let mut target = format!("{base}/{}", encode_segment(&name));
        if let Some(n) = size {
            target.push_str(&format!("?size={n}"));
        }
        let (status, mut body) = http_get(addr, &target, "text/plain")?;
        if status != 200 {
            let body = read_small(body)?;
            return Err(http_refusal(&target, status, &body));
        }
        std::io::copy(&mut body, out).map_err(|e| Error::Io(format!("GET {target}: {e}")))?;
    }
    out.flush()
        .map_err(|e| Error::Io(format!("writing the logs: {e}")))?;
    Ok(())
}

/// Calls `getNodeReport` on an agent's IPC server.
pub fn fetch_node_report(addr: std::net::SocketAddr) -> Result<GetNodeReportResponseProto, Error> {
    let client = ipc::client::Client::new(
        addr,
        ipc::client::ClientConfig {
            protocol: crate::report::PROTOCOL.into(),
            protocol_version: crate::report::VERSION,
            max_connect_attempts: 1,
            call_timeout: Duration::from_secs(10),
            ..Default::default()
        },
    );
    let resp = client.call(crate::report::GET_NODE_REPORT, &[])?;
    Ok(resp.decode::<GetNodeReportResponseProto>()?)
}

/// A report as JSON.
pub fn report_json(r: &GetNodeReportResponseProto) -> serde_json::Value {
    let containers: Vec<_> = r
        .containers
        .iter()
        .map(|c| {
            let id = c.container_id.unwrap_or_default();
            let a = id.app_attempt_id.unwrap_or_default();
            let app = a.application_id.unwrap_or_default();
            let cid = nm_core::ids::ContainerId::new(
                nm_core::ids::AppId::new(app.cluster_timestamp.unwrap_or(0), app.id.unwrap_or(0)),
                a.attempt_id.unwrap_or(0),
                id.id.unwrap_or(0),
            );
            json!({"container": cid.to_string(), "state": c.state, "exit_status": c.exit_status})
        })
        .collect();
    let node = r.node_id.clone().unwrap_or_default();
    let total = r.total.clone().unwrap_or_default();
    let h = r.health.clone().unwrap_or_default();
    json!({
        "node_id": format!("{}:{}", node.host.unwrap_or_default(), node.port.unwrap_or(0)),
        "http_port": r.http_port,
        "memory_mb": total.memory,
        "vcores": total.virtual_cores,
        "healthy": h.is_node_healthy,
        "health_report": h.health_report,
        "phase": r.phase,
        "last_response_id": r.last_response_id,
        "last_heartbeat_ms": r.last_heartbeat_ms,
        "heartbeats": r.heartbeats,
        "containers": containers,
    })
}
