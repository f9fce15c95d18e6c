//! The agent's counters and the RPC latency histogram, rendered as Prometheus text for
//! `/metrics`, plus the tiny HTTP responder that serves them (std::net, non-blocking, polled
//! by the housekeeping thread).

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use super::localize::LocalizeMetrics;
use nm_core::table::{Counts, TableTotals};

/// Counters shared by the agent's threads.
#[derive(Debug)]
pub struct AgentMetrics {
    pub heartbeats_sent: AtomicU64,
    pub heartbeats_ok: AtomicU64,
    pub heartbeat_failures: AtomicU64,
    /// Calls answered with an IPC ERROR/FATAL (e.g. an exception in the RM).
    pub rpc_errors: AtomicU64,
    pub registrations: AtomicU64,
    pub registration_failures: AtomicU64,
    pub resyncs: AtomicU64,
    /// Times the RM became reachable again after failed calls.
    pub reconnects: AtomicU64,
    pub containers_to_cleanup: AtomicU64,
    pub applications_to_cleanup: AtomicU64,
    pub removed_from_nm: AtomicU64,
    pub key_changes: AtomicU64,
    /// RPC latency in microseconds (register, heartbeat).
    pub rpc_latency_us: Mutex<Histogram<u64>>,
    /// Resource localization (the HDFS reader).
    pub localize: LocalizeMetrics,
}

impl Default for AgentMetrics {
    fn default() -> Self {
        Self {
            heartbeats_sent: AtomicU64::new(0),
            heartbeats_ok: AtomicU64::new(0),
            heartbeat_failures: AtomicU64::new(0),
            rpc_errors: AtomicU64::new(0),
            registrations: AtomicU64::new(0),
            registration_failures: AtomicU64::new(0),
            resyncs: AtomicU64::new(0),
            reconnects: AtomicU64::new(0),
            containers_to_cleanup: AtomicU64::new(0),
            applications_to_cleanup: AtomicU64::new(0),
            removed_from_nm: AtomicU64::new(0),
            key_changes: AtomicU64::new(0),
            // 1 µs .. 60 s, 3 significant digits: fixed size, allocated once here.
            rpc_latency_us: Mutex::new(
                Histogram::new_with_bounds(1, 60_000_000, 3).expect("static histogram bounds"),
            ),
            localize: LocalizeMetrics::default(),
        }
    }
}

/// Upper bounds (seconds) of the exported latency buckets.
const BUCKETS_S: [f64; 14] = [
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0,
];

impl AgentMetrics {
    /// Records one RPC's latency.
    pub fn record_latency(&self, d: Duration) {
        let us = (d.as_micros() as u64).clamp(1, 60_000_000);
        if let Ok(mut h) = self.rpc_latency_us.lock() {
            let _ = h.record(us);
        }
    }

    /// A latency quantile in microseconds (0 when nothing was recorded).
    pub fn latency_quantile_us(&self, q: f64) -> u64 {
        self.rpc_latency_us
            .lock()
            .map(|h| {
                if h.is_empty() {
                    0
                } else {
                    h.value_at_quantile(q)
                }
            })
            .unwrap_or(0)
    }

    /// Prometheus text exposition.
    pub fn render(&self, counts: Counts, totals: TableTotals, registered: bool) -> String {
        let mut s = String::with_capacity(4096);
        let c = |s: &mut String, name: &str, help: &str, v: u64| {
            let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}");
        };
        let l = |a: &AtomicU64| a.load(Relaxed);
        c(
            &mut s,
            "hotpath_agent_heartbeats_sent_total",
            "nodeHeartbeat calls sent (resends included).",
            l(&self.heartbeats_sent),
        );
        c(
            &mut s,
            "hotpath_agent_heartbeats_ok_total",
            "nodeHeartbeat calls answered NORMAL.",
            l(&self.heartbeats_ok),
        );
        c(
            &mut s,
            "hotpath_agent_heartbeat_failures_total",
            "nodeHeartbeat calls without an answer.",
            l(&self.heartbeat_failures),
        );
        c(
            &mut s,
            "hotpath_agent_rpc_errors_total",
            "Calls the RM answered with an IPC error.",
            l(&self.rpc_errors),
        );
        c(
            &mut s,
            "hotpath_agent_registrations_total",
            "Successful registerNodeManager calls.",
            l(&self.registrations),
        );
        c(
            &mut s,
            "hotpath_agent_resyncs_total",
            "RESYNC answers (each followed by a re-registration).",
            l(&self.resyncs),
        );
        c(
            &mut s,
            "hotpath_agent_reconnects_total",
            "Times the RM became reachable again after failed calls.",
            l(&self.reconnects),
        );
        c(
            &mut s,
            "hotpath_agent_containers_to_cleanup_total",
            "Entries received in containers_to_cleanup.",
            l(&self.containers_to_cleanup),
        );
        c(
            &mut s,
            "hotpath_agent_applications_to_cleanup_total",
            "Entries received in applications_to_cleanup.",
            l(&self.applications_to_cleanup),
        );
        c(
            &mut s,
            "hotpath_agent_containers_acked_total",
            "Entries received in containers_to_be_removed_from_nm.",
            l(&self.removed_from_nm),
        );
        c(
            &mut s,
            "hotpath_agent_containers_completed_total",
            "Containers that completed on this node.",
            totals.completed,
        );
        c(
            &mut s,
            "hotpath_agent_containers_launched_total",
            "Containers added to the table.",
            totals.launched,
        );
        let _ = writeln!(
            s,
            "# HELP hotpath_agent_containers Containers in the table by state.\n# TYPE hotpath_agent_containers gauge"
        );
        for (state, v) in [
            ("new", counts.new),
            ("running", counts.running),
            ("completing", counts.completing),
            ("delivered", counts.delivered),
        ] {
            let _ = writeln!(s, "hotpath_agent_containers{{state=\"{state}\"}} {v}");
        }
        let lm = &self.localize;
        c(
            &mut s,
            "hotpath_agent_localizations_ok_total",
            "Files localized from HDFS (placed whole at their destination).",
            l(&lm.ok),
        );
        c(
            &mut s,
            "hotpath_agent_localizations_failed_total",
            "Localize requests answered with an error (busy and not configured included).",
            l(&lm.failed),
        );
        c(
            &mut s,
            "hotpath_agent_localizations_busy_total",
            "Localize requests refused because the HDFS reader's queue was full.",
            l(&lm.busy),
        );
        c(
            &mut s,
            "hotpath_agent_localized_bytes_total",
            "Bytes of localized files (checksum-verified).",
            l(&lm.bytes),
        );
        let _ = writeln!(
            s,
            "# HELP hotpath_agent_localizations_pending Localize requests queued or being read.\n# TYPE hotpath_agent_localizations_pending gauge\nhotpath_agent_localizations_pending {}",
            l(&lm.pending)
        );
        let _ = writeln!(
            s,
            "# HELP hotpath_agent_hdfs_reader Whether the HDFS-reader thread runs (fs.defaultFS is hdfs://).\n# TYPE hotpath_agent_hdfs_reader gauge\nhotpath_agent_hdfs_reader {}",
            l(&lm.reader_running)
        );
        let _ = writeln!(
            s,
            "# HELP hotpath_agent_registered Whether the node is registered with the RM.\n# TYPE hotpath_agent_registered gauge\nhotpath_agent_registered {}",
            registered as u8
        );
        if let Ok(h) = self.rpc_latency_us.lock() {
            let _ = writeln!(
                s,
                "# HELP hotpath_agent_rpc_latency_seconds ResourceTracker call latency.\n# TYPE hotpath_agent_rpc_latency_seconds histogram"
            );
            for b in BUCKETS_S {
                let le_us = (b * 1e6) as u64;
                let n = h.count_between(0, le_us);
                let _ = writeln!(
                    s,
                    "hotpath_agent_rpc_latency_seconds_bucket{{le=\"{b}\"}} {n}"
                );
            }
            let _ = writeln!(
                s,
                "hotpath_agent_rpc_latency_seconds_bucket{{le=\"+Inf\"}} {}\nhotpath_agent_rpc_latency_seconds_sum {}\nhotpath_agent_rpc_latency_seconds_count {}",
                h.len(),
                h.mean() * h.len() as f64 / 1e6,
                h.len()
            );
        }
        s
    }
}

/// A minimal HTTP/1.0 responder for `GET /metrics` (anything else: 404). Connections are
/// handled one request each; a request must arrive within 2 s and fit 8 KiB.
pub struct MetricsHttp {
    listener: TcpListener,
    conns: Vec<(TcpStream, Vec<u8>, Instant)>,
}

const MAX_REQUEST: usize = 8192;
const MAX_HTTP_CONNS: usize = 32;

impl MetricsHttp {
    pub fn bind(addr: SocketAddr) -> std::io::Result<Self> {
        let listener = TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        Ok(Self {
            listener,
            conns: Vec::new(),
        })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Accepts and answers what is ready. `body` renders the metrics. Returns whether it did
    /// anything.
    pub fn poll(&mut self, body: impl Fn() -> String) -> bool {
        let mut busy = false;
        while let Ok((s, _)) = self.listener.accept() {
            busy = true;
            if self.conns.len() >= MAX_HTTP_CONNS || s.set_nonblocking(true).is_err() {
                continue;
            }
            self.conns.push((s, Vec::new(), Instant::now()));
        }
        let mut i = 0;
        while i < self.conns.len() {
            let (s, buf, since) = &mut self.conns[i];
            let mut chunk = [0u8; 1024];
            let mut done = false;
            match s.read(&mut chunk) {
                Ok(0) => done = true,
                Ok(n) => {
                    busy = true;
                    buf.extend_from_slice(&chunk[..n]);
                    if let Some(resp) = answer(buf, &body) {
                        let _ = s.set_nonblocking(false);
                        let _ = s.set_write_timeout(Some(Duration::from_secs(2)));
                        let _ = s.write_all(resp.as_bytes());
                        done = true;
                    } else if buf.len() > MAX_REQUEST {
                        done = true;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if since.elapsed() > Duration::from_secs(2) {
                        done = true;
                    }
                }
                Err(_) => done = true,
            }
            if done {
                self.conns.swap_remove(i);
            } else {
                i += 1;
            }
        }
        busy
    }

    /// Serves on the calling thread until the process ends, blocking in `accept` (no polling:
    /// an idle endpoint costs no CPU). One connection at a time, each with the same 2 s and
    /// 8 KiB limits as [`MetricsHttp::poll`]; meant for a thread of its own.
    pub fn serve_blocking(self, body: impl Fn() -> String) {
        if let Err(e) = self.listener.set_nonblocking(false) {
            tracing::error!("/metrics: {e}");
            return;
        }
        for s in self.listener.incoming() {
            let Ok(mut s) = s else { continue };
            let _ = s.set_nonblocking(false);
            let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
            let _ = s.set_write_timeout(Some(Duration::from_secs(2)));
            let deadline = Instant::now() + Duration::from_secs(2);
            let mut buf = Vec::new();
            let mut chunk = [0u8; 1024];
            while buf.len() <= MAX_REQUEST && Instant::now() < deadline {
                match s.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        buf.extend_from_slice(&chunk[..n]);
                        if let Some(resp) = answer(&buf, &body) {
                            let _ = s.write_all(resp.as_bytes());
                            break;
                        }
                    }
                }
            }
        }
    }
}

/// The response to a complete request head in `buf` (`None` while the head is incomplete):
/// `GET /metrics` (or `/`) gets the rendered metrics, anything else a 404.
fn answer(buf: &[u8], body: &impl Fn() -> String) -> Option<String> {
    if !(buf.windows(4).any(|w| w == b"\r\n\r\n") || buf.windows(2).any(|w| w == b"\n\n")) {
        return None;
    }
    let line = buf.split(|&b| b == b'\n').next().unwrap_or(&[]);
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split_whitespace();
    let (m, p) = (parts.next(), parts.next());
    Some(
        if m == Some("GET") && matches!(p, Some("/metrics") | Some("/")) {
            let b = body();
            format!(
                "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{b}",
                b.len()
            )
        } else {
            "HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".into()
        },
    )
}
