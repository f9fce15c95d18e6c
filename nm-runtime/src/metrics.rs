//! The agent's counters, the RPC latency histogram and its IPC servers' counters
//! (ContainerManagementProtocol's authentication failures among them), rendered as
//! Prometheus text for `/metrics` with `ipc::metrics::Exposition`; `ipc::metrics::MetricsHttp`
//! serves them, polled by the housekeeping thread.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::Duration;

use hdrhistogram::Histogram;
use ipc::metrics::{Exposition, Kind};
use ipc::server::{ServerMetrics, ServerStats};

use nm_core::table::{Counts, TableTotals};

/// The HDFS reader's counters, shared between the control socket, the reader thread
/// ([`crate::hdfs_reader`]) and `/metrics`.
#[derive(Debug, Default)]
pub struct LocalizeMetrics {
    pub ok: AtomicU64,
    /// Every error reply to a localize request (busy and not-configured included).
    pub failed: AtomicU64,
    /// Refused because the queue was full (also counted in `failed`).
    pub busy: AtomicU64,
    pub bytes: AtomicU64,
    /// Queued or being read now.
    pub pending: AtomicU64,
    /// 1 while the reader works on a request.
    pub active: AtomicU64,
    /// 1 while the HDFS-reader thread runs.
    pub reader_running: AtomicU64,
}

/// The `mapreduce_shuffle` service's counters (`crate::shuffle`), shared by its loops and
/// `/metrics`.
#[derive(Debug, Default)]
pub struct ShuffleMetrics {
    /// Connections accepted (429s and evictions included).
    pub connections: AtomicU64,
    /// Connections open now.
    pub open: AtomicU64,
    /// Requests answered 200 whose last byte went out.
    pub fetches: AtomicU64,
    /// Map outputs (segments) sent in those answers.
    pub maps: AtomicU64,
    /// Segment bytes sent (`sendfile`), headers excluded.
    pub bytes: AtomicU64,
    /// 400/405: not a shuffle request (bad head, version, parameters).
    pub bad_requests: AtomicU64,
    /// 401: unknown job, missing or wrong `UrlHash`.
    pub unauthorized: AtomicU64,
    /// 500: a requested map output missing, unreadable or not a map id.
    pub map_output_errors: AtomicU64,
    /// 429: over `mapreduce.shuffle.max.connections` or the agent's bound.
    pub too_many: AtomicU64,
    /// Connections closed without their request to make room for a new one.
    pub evicted: AtomicU64,
    /// Connections closed for a request not sent in time, a keep-alive idle timeout or a
    /// peer that stopped reading.
    pub timeouts: AtomicU64,
    /// Answers cut off by a write error (the peer reset or went away).
    pub aborted: AtomicU64,
}

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
    /// RM HA: failovers to the next rm-id.
    pub rm_failovers: AtomicU64,
    pub containers_to_cleanup: AtomicU64,
    pub applications_to_cleanup: AtomicU64,
    pub removed_from_nm: AtomicU64,
    pub key_changes: AtomicU64,
    /// Entries received in containers_to_signal.
    pub containers_to_signal: AtomicU64,
    /// Entries received in containers_to_update and containers_to_decrease (logged, not applied).
    pub containers_to_update: AtomicU64,
    /// RPC latency in microseconds (register, heartbeat).
    pub rpc_latency_us: Mutex<Histogram<u64>>,
    /// Resource localization (the HDFS reader).
    pub localize: LocalizeMetrics,
    /// The agent's IPC servers by name (`container_management`, `agent`), set once they run.
    ipc_servers: Mutex<Vec<(&'static str, ServerStats)>>,
    /// The `mapreduce_shuffle` service (all zero when it is not configured).
    pub shuffle: std::sync::Arc<ShuffleMetrics>,
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
            rm_failovers: AtomicU64::new(0),
            containers_to_cleanup: AtomicU64::new(0),
            applications_to_cleanup: AtomicU64::new(0),
            removed_from_nm: AtomicU64::new(0),
            key_changes: AtomicU64::new(0),
            containers_to_signal: AtomicU64::new(0),
            containers_to_update: AtomicU64::new(0),
            // 1 µs .. 60 s, 3 significant digits: fixed size, allocated once here.
            rpc_latency_us: Mutex::new(
                Histogram::new_with_bounds(1, 60_000_000, 3).expect("static histogram bounds"),
            ),
            localize: LocalizeMetrics::default(),
            ipc_servers: Mutex::new(Vec::new()),
            shuffle: std::sync::Arc::default(),
        }
    }
}

/// The dirs' numbers `/metrics` shows.
#[derive(Debug, Clone, Copy, Default)]
pub struct DirGauges {
    pub bad_local: usize,
    pub bad_log: usize,
    pub good_local_utilization: i32,
    pub good_log_utilization: i32,
}

/// The node's health and its dirs for `/metrics` (Java's `NodeManagerMetrics` `BadLocalDirs`,
/// `BadLogDirs`, `GoodLocalDirsDiskUtilizationPerc`, `GoodLogDirsDiskUtilizationPerc`).
pub fn render_health(healthy: bool, dirs: Option<DirGauges>) -> String {
    let mut e = Exposition::new();
    e.gauge(
        "hotpath_agent_node_healthy",
        "Whether the node reports itself healthy (dirs and health script).",
        u8::from(healthy),
    );
    if let Some(d) = dirs {
        e.gauge(
            "hotpath_agent_bad_local_dirs",
            "Local dirs that are full or have errors.",
            d.bad_local,
        );
        e.gauge(
            "hotpath_agent_bad_log_dirs",
            "Log dirs that are full or have errors.",
            d.bad_log,
        );
        e.gauge(
            "hotpath_agent_good_local_dirs_disk_utilization_percent",
            "Used space of the good local dirs' file systems, percent.",
            d.good_local_utilization,
        );
        e.gauge(
            "hotpath_agent_good_log_dirs_disk_utilization_percent",
            "Used space of the good log dirs' file systems, percent.",
            d.good_log_utilization,
        );
    }
    e.finish()
}

/// Upper bounds (seconds) of the exported latency buckets.
const BUCKETS_S: [f64; 14] = [
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0,
];

impl AgentMetrics {
    /// The IPC servers whose counters `/metrics` exports (`hotpath_agent_ipc_…{server=name}`).
    pub fn set_ipc_servers(&self, servers: Vec<(&'static str, ServerStats)>) {
        *self.ipc_servers.lock().unwrap_or_else(|p| p.into_inner()) = servers;
    }

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
        let mut e = Exposition::new();
        let l = |a: &AtomicU64| a.load(Relaxed);
        for (name, help, v) in [
            (
                "hotpath_agent_heartbeats_sent_total",
                "nodeHeartbeat calls sent (resends included).",
                l(&self.heartbeats_sent),
            ),
            (
                "hotpath_agent_heartbeats_ok_total",
                "nodeHeartbeat calls answered NORMAL.",
                l(&self.heartbeats_ok),
            ),
            (
                "hotpath_agent_heartbeat_failures_total",
                "nodeHeartbeat calls without an answer.",
                l(&self.heartbeat_failures),
            ),
            (
                "hotpath_agent_rpc_errors_total",
                "Calls the RM answered with an IPC error.",
                l(&self.rpc_errors),
            ),
            (
                "hotpath_agent_registrations_total",
                "Successful registerNodeManager calls.",
                l(&self.registrations),
            ),
            (
                "hotpath_agent_resyncs_total",
                "RESYNC answers (each followed by a re-registration).",
                l(&self.resyncs),
            ),
            (
                "hotpath_agent_reconnects_total",
                "Times the RM became reachable again after failed calls.",
                l(&self.reconnects),
            ),
            (
                "hotpath_agent_rm_failovers_total",
                "RM HA: failovers to the next rm-id after a failed call.",
                l(&self.rm_failovers),
            ),
            (
                "hotpath_agent_containers_to_cleanup_total",
                "Entries received in containers_to_cleanup.",
                l(&self.containers_to_cleanup),
            ),
            (
                "hotpath_agent_applications_to_cleanup_total",
                "Entries received in applications_to_cleanup.",
                l(&self.applications_to_cleanup),
            ),
            (
                "hotpath_agent_containers_to_signal_total",
                "Entries received in containers_to_signal.",
                l(&self.containers_to_signal),
            ),
            (
                "hotpath_agent_containers_to_update_total",
                "Entries received in containers_to_update and containers_to_decrease (not applied).",
                l(&self.containers_to_update),
            ),
            (
                "hotpath_agent_containers_acked_total",
                "Entries received in containers_to_be_removed_from_nm.",
                l(&self.removed_from_nm),
            ),
            (
                "hotpath_agent_containers_completed_total",
                "Containers that completed on this node.",
                totals.completed,
            ),
            (
                "hotpath_agent_containers_launched_total",
                "Containers added to the table.",
                totals.launched,
            ),
        ] {
            e.counter(name, help, v);
        }
        let name = "hotpath_agent_containers";
        e.family(name, "Containers in the table by state.", Kind::Gauge);
        for (state, v) in [
            ("new", counts.new),
            ("running", counts.running),
            ("completing", counts.completing),
            ("delivered", counts.delivered),
        ] {
            e.sample(name, &format!("state=\"{state}\""), v);
        }
        let lm = &self.localize;
        for (name, help, v) in [
            (
                "hotpath_agent_localizations_ok_total",
                "Files localized from HDFS (placed whole at their destination).",
                l(&lm.ok),
            ),
            (
                "hotpath_agent_localizations_failed_total",
                "Localize requests answered with an error (busy and not configured included).",
                l(&lm.failed),
            ),
            (
                "hotpath_agent_localizations_busy_total",
                "Localize requests refused because the HDFS reader's queue was full.",
                l(&lm.busy),
            ),
            (
                "hotpath_agent_localized_bytes_total",
                "Bytes of localized files (checksum-verified).",
                l(&lm.bytes),
            ),
        ] {
            e.counter(name, help, v);
        }
        e.gauge(
            "hotpath_agent_localizations_pending",
            "Localize requests queued or being read.",
            l(&lm.pending),
        );
        e.gauge(
            "hotpath_agent_hdfs_reader",
            "Whether the HDFS-reader thread runs (fs.defaultFS is hdfs://).",
            l(&lm.reader_running),
        );
        e.gauge(
            "hotpath_agent_registered",
            "Whether the node is registered with the RM.",
            registered as u8,
        );
        let sm = &self.shuffle;
        for (name, help, v) in [
            (
                "hotpath_agent_shuffle_connections_total",
                "mapreduce_shuffle connections accepted.",
                l(&sm.connections),
            ),
            (
                "hotpath_agent_shuffle_fetches_total",
                "mapreduce_shuffle requests answered 200 and sent whole.",
                l(&sm.fetches),
            ),
            (
                "hotpath_agent_shuffle_map_outputs_total",
                "Map output segments sent by mapreduce_shuffle.",
                l(&sm.maps),
            ),
            (
                "hotpath_agent_shuffle_bytes_total",
                "Map output bytes sent by mapreduce_shuffle (sendfile).",
                l(&sm.bytes),
            ),
        ] {
            e.counter(name, help, v);
        }
        let name = "hotpath_agent_shuffle_failures_total";
        e.family(
            name,
            "mapreduce_shuffle requests or connections that failed, by cause.",
            Kind::Counter,
        );
        for (cause, v) in [
            ("bad_request", l(&sm.bad_requests)),
            ("unauthorized", l(&sm.unauthorized)),
            ("map_output", l(&sm.map_output_errors)),
            ("too_many_connections", l(&sm.too_many)),
            ("evicted", l(&sm.evicted)),
            ("timeout", l(&sm.timeouts)),
            ("aborted", l(&sm.aborted)),
        ] {
            e.sample(name, &format!("cause=\"{cause}\""), v);
        }
        e.gauge(
            "hotpath_agent_shuffle_connections_open",
            "mapreduce_shuffle connections open now.",
            l(&sm.open),
        );
        if let Ok(h) = self.rpc_latency_us.lock() {
            let name = "hotpath_agent_rpc_latency_seconds";
            e.family(name, "ResourceTracker call latency.", Kind::Histogram);
            e.histogram(name, &h, &BUCKETS_S, 1e6);
        }
        let servers: Vec<(&str, ServerMetrics)> = self
            .ipc_servers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(name, s)| (*name, s.metrics()))
            .collect();
        if !servers.is_empty() {
            e.ipc_servers("hotpath_agent", &servers);
        }
        e.finish()
    }
}
