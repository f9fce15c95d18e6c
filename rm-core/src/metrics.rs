//! Counters, the handling-latency histogram, and their Prometheus text form.
//!
//! Writers: the tracker ([`TrackerMetrics`], atomics bumped per RPC), each mailbox
//! ([`crate::mailbox::MailboxCounters`]: enqueued, merged, queue depth) and each shard
//! ([`ShardMetrics`]: node counters published once per batch, and an hdrhistogram of the time
//! from enqueue to applied, recorded under one lock per batch). Reader: [`render_prometheus`] (with `ipc::metrics::Exposition`, the
//! one renderer), which the server's housekeeping thread serves at `/metrics`. [`TrackerMetrics::sample_rate`] turns the heartbeat counter into
//! heartbeats per second (call it about once a second).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::Instant;

use hdrhistogram::Histogram;
use ipc::metrics::{Exposition, Kind};

use crate::mailbox::Mailbox;
use crate::node::NodeStats;
use crate::shard::BatchReport;

/// Highest latency the histogram tracks (60 s, in µs); longer ones saturate.
pub const LATENCY_MAX_US: u64 = 60_000_000;

/// A new latency histogram (µs, 3 significant digits, fixed size).
pub fn latency_histogram() -> Histogram<u64> {
    // Bounds are constants that hdrhistogram accepts.
    Histogram::new_with_bounds(1, LATENCY_MAX_US, 3).unwrap_or_else(|_| {
        Histogram::new(3).unwrap_or_else(|_| unreachable!("hdrhistogram rejects 3 digits"))
    })
}

/// One shard's published numbers.
#[derive(Debug)]
pub struct ShardMetrics {
    pub batches: AtomicU64,
    pub entries: AtomicU64,
    pub merged: AtomicU64,
    pub status_updates: AtomicU64,
    pub statuses: AtomicU64,
    pub launched: AtomicU64,
    pub completions: AtomicU64,
    pub completions_dup: AtomicU64,
    pub lost: AtomicU64,
    pub released: AtomicU64,
    pub ignored: AtomicU64,
    pub malformed: AtomicU64,
    pub log_errors: AtomicU64,
    pub nodes_running: AtomicU64,
    pub nodes_unhealthy: AtomicU64,
    pub nodes_lost: AtomicU64,
    pub containers: AtomicU64,
    latency: Mutex<Histogram<u64>>,
}

impl Default for ShardMetrics {
    fn default() -> Self {
        ShardMetrics {
            batches: AtomicU64::new(0),
            entries: AtomicU64::new(0),
            merged: AtomicU64::new(0),
            status_updates: AtomicU64::new(0),
            statuses: AtomicU64::new(0),
            launched: AtomicU64::new(0),
            completions: AtomicU64::new(0),
            completions_dup: AtomicU64::new(0),
            lost: AtomicU64::new(0),
            released: AtomicU64::new(0),
            ignored: AtomicU64::new(0),
            malformed: AtomicU64::new(0),
            log_errors: AtomicU64::new(0),
            nodes_running: AtomicU64::new(0),
            nodes_unhealthy: AtomicU64::new(0),
            nodes_lost: AtomicU64::new(0),
            containers: AtomicU64::new(0),
            latency: Mutex::new(latency_histogram()),
        }
    }
}

impl ShardMetrics {
    pub(crate) fn add_batch(&self, r: &BatchReport) {
        self.batches.fetch_add(1, Relaxed);
        self.entries.fetch_add(r.entries as u64, Relaxed);
        self.merged.fetch_add(r.merged, Relaxed);
    }

    pub(crate) fn publish_stats(&self, s: &NodeStats) {
        self.status_updates.store(s.status_updates, Relaxed);
        self.statuses.store(s.statuses, Relaxed);
        self.launched.store(s.launched, Relaxed);
        self.completions.store(s.completions_new, Relaxed);
        self.completions_dup.store(s.completions_dup, Relaxed);
        self.lost.store(s.lost, Relaxed);
        self.released.store(s.released, Relaxed);
        self.ignored.store(s.ignored, Relaxed);
        self.malformed.store(s.malformed, Relaxed);
    }

    /// Records a batch's latencies (µs) under one lock, and empties the list. (Recording into
    /// a local histogram and merging would walk every bucket per batch: tens of µs.)
    pub(crate) fn record_latencies(&self, batch: &mut Vec<u64>) {
        if batch.is_empty() {
            return;
        }
        let mut h = self.latency.lock().unwrap_or_else(|p| p.into_inner());
        for v in batch.drain(..) {
            h.saturating_record(v);
        }
    }

    /// A copy of the latency histogram (µs).
    pub fn latency(&self) -> Histogram<u64> {
        self.latency
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// The tracker's counters.
#[derive(Debug)]
pub struct TrackerMetrics {
    pub heartbeats: AtomicU64,
    pub duplicates: AtomicU64,
    pub resyncs: AtomicU64,
    pub shutdowns: AtomicU64,
    pub registrations: AtomicU64,
    pub registrations_refused: AtomicU64,
    pub unregistrations: AtomicU64,
    pub expired: AtomicU64,
    pub bad_requests: AtomicU64,
    pub nodes_active: AtomicU64,
    rate_bits: AtomicU64,
    rate_state: Mutex<(Instant, u64)>,
    /// Time to answer one nodeHeartbeat in the RPC handler (decode, tracker, response), ns.
    handling: Mutex<Histogram<u64>>,
}

/// Longest heartbeat handling time tracked (10 s, in ns); longer ones saturate.
pub const HANDLING_MAX_NS: u64 = 10_000_000_000;

/// A new handling-time histogram (ns, 2 significant digits: about 35 KB, fixed size).
fn handling_histogram() -> Histogram<u64> {
    // Bounds are constants that hdrhistogram accepts.
    Histogram::new_with_bounds(1, HANDLING_MAX_NS, 2).unwrap_or_else(|_| {
        Histogram::new(2).unwrap_or_else(|_| unreachable!("hdrhistogram rejects 2 digits"))
    })
}

impl Default for TrackerMetrics {
    fn default() -> Self {
        TrackerMetrics {
            heartbeats: AtomicU64::new(0),
            duplicates: AtomicU64::new(0),
            resyncs: AtomicU64::new(0),
            shutdowns: AtomicU64::new(0),
            registrations: AtomicU64::new(0),
            registrations_refused: AtomicU64::new(0),
            unregistrations: AtomicU64::new(0),
            expired: AtomicU64::new(0),
            bad_requests: AtomicU64::new(0),
            nodes_active: AtomicU64::new(0),
            rate_bits: AtomicU64::new(0f64.to_bits()),
            rate_state: Mutex::new((Instant::now(), 0)),
            handling: Mutex::new(handling_histogram()),
        }
    }
}

impl TrackerMetrics {
    /// Updates and returns heartbeats per second since the previous call.
    pub fn sample_rate(&self) -> f64 {
        let mut st = self.rate_state.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        let count = self.heartbeats.load(Relaxed);
        let dt = now.duration_since(st.0).as_secs_f64();
        if dt <= 0.0 {
            return self.heartbeats_per_second();
        }
        let rate = (count.saturating_sub(st.1)) as f64 / dt;
        *st = (now, count);
        self.rate_bits.store(rate.to_bits(), Relaxed);
        rate
    }

    /// Records how long one nodeHeartbeat took to answer (ns). Called by the thread that
    /// answers heartbeats; the lock is uncontended but for a scrape's copy, and recording into
    /// the fixed-size histogram allocates nothing.
    pub fn record_handling(&self, ns: u64) {
        self.handling
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .saturating_record(ns.max(1));
    }

    /// A copy of the handling-time histogram (ns).
    pub fn handling(&self) -> Histogram<u64> {
        self.handling
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The last sampled rate.
    pub fn heartbeats_per_second(&self) -> f64 {
        f64::from_bits(self.rate_bits.load(Relaxed))
    }
}

/// One shard as the renderer sees it.
pub struct ShardView<'a> {
    pub mailbox: &'a Mailbox,
    pub metrics: &'a ShardMetrics,
}

/// The Prometheus text exposition of everything above.
pub fn render_prometheus(tracker: &TrackerMetrics, shards: &[ShardView<'_>]) -> String {
    let mut o = Exposition::new();
    let t = |a: &AtomicU64| a.load(Relaxed);
    for (name, help, v) in [
        (
            "hotpath_rm_heartbeats_total",
            "nodeHeartbeat calls answered",
            t(&tracker.heartbeats),
        ),
        (
            "hotpath_rm_heartbeat_duplicates_total",
            "Duplicate heartbeats answered from the cache",
            t(&tracker.duplicates),
        ),
        (
            "hotpath_rm_resyncs_total",
            "RESYNC answers",
            t(&tracker.resyncs),
        ),
        (
            "hotpath_rm_shutdowns_total",
            "SHUTDOWN answers",
            t(&tracker.shutdowns),
        ),
        (
            "hotpath_rm_registrations_total",
            "Accepted registrations",
            t(&tracker.registrations),
        ),
        (
            "hotpath_rm_registrations_refused_total",
            "Registrations answered SHUTDOWN",
            t(&tracker.registrations_refused),
        ),
        (
            "hotpath_rm_unregistrations_total",
            "unRegisterNodeManager calls for known nodes",
            t(&tracker.unregistrations),
        ),
        (
            "hotpath_rm_nodes_expired_total",
            "Nodes declared LOST by the liveness monitor",
            t(&tracker.expired),
        ),
        (
            "hotpath_rm_bad_requests_total",
            "Malformed requests",
            t(&tracker.bad_requests),
        ),
    ] {
        o.counter(name, help, v);
    }
    o.gauge(
        "hotpath_rm_nodes_active",
        "Registered nodes that are not LOST/SHUTDOWN/DECOMMISSIONED/REBOOTED",
        t(&tracker.nodes_active),
    );
    o.gauge(
        "hotpath_rm_heartbeats_per_second",
        "Heartbeats per second over the last sample",
        format_args!("{:.1}", tracker.heartbeats_per_second()),
    );

    type Get = fn(&ShardView<'_>) -> u64;
    let per_shard: [(&str, &str, Kind, Get); 13] = [
        (
            "hotpath_rm_shard_queue_depth",
            "Pending node entries in the shard's inbox",
            Kind::Gauge,
            |s| s.mailbox.counters.depth.load(Relaxed),
        ),
        (
            "hotpath_rm_shard_queue_depth_max",
            "Largest inbox depth seen",
            Kind::Gauge,
            |s| s.mailbox.counters.max_depth.load(Relaxed),
        ),
        (
            "hotpath_rm_shard_enqueued_total",
            "STATUS_UPDATEs handed to the shard",
            Kind::Counter,
            |s| s.mailbox.counters.enqueued.load(Relaxed),
        ),
        (
            "hotpath_rm_shard_events_merged_total",
            "STATUS_UPDATEs merged into a pending one",
            Kind::Counter,
            |s| s.mailbox.counters.merged.load(Relaxed),
        ),
        (
            "hotpath_rm_shard_status_updates_total",
            "Status updates applied",
            Kind::Counter,
            |s| s.metrics.status_updates.load(Relaxed),
        ),
        (
            "hotpath_rm_shard_container_statuses_total",
            "Container statuses read",
            Kind::Counter,
            |s| s.metrics.statuses.load(Relaxed),
        ),
        (
            "hotpath_rm_shard_completions_total",
            "Completions recorded (new)",
            Kind::Counter,
            |s| s.metrics.completions.load(Relaxed),
        ),
        (
            "hotpath_rm_shard_completions_duplicate_total",
            "Completions reported again (acknowledged again)",
            Kind::Counter,
            |s| s.metrics.completions_dup.load(Relaxed),
        ),
        (
            "hotpath_rm_shard_containers_lost_total",
            "Launched GUARANTEED containers not reported RUNNING",
            Kind::Counter,
            |s| s.metrics.lost.load(Relaxed),
        ),
        (
            "hotpath_rm_shard_containers_released_total",
            "Launched containers released",
            Kind::Counter,
            |s| s.metrics.released.load(Relaxed),
        ),
        (
            "hotpath_rm_shard_statuses_malformed_total",
            "Statuses or updates that could not be read",
            Kind::Counter,
            |s| s.metrics.malformed.load(Relaxed),
        ),
        (
            "hotpath_rm_shard_completion_log_errors_total",
            "Failed completion log commits",
            Kind::Counter,
            |s| s.metrics.log_errors.load(Relaxed),
        ),
        (
            "hotpath_rm_shard_containers_running",
            "Launched containers tracked",
            Kind::Gauge,
            |s| s.metrics.containers.load(Relaxed),
        ),
    ];
    for (name, help, kind, get) in per_shard {
        o.family(name, help, kind);
        for (i, s) in shards.iter().enumerate() {
            o.sample(name, &format!("shard=\"{i}\""), get(s));
        }
    }
    let name = "hotpath_rm_heartbeat_handling_seconds";
    o.family(
        name,
        "Time to answer one nodeHeartbeat in the RPC handler (decode, tracker, response)",
        Kind::Summary,
    );
    o.summary(name, "", &tracker.handling(), 1e9);
    let name = "hotpath_rm_status_update_latency_seconds";
    o.family(
        name,
        "Time from enqueue to applied, per STATUS_UPDATE",
        Kind::Summary,
    );
    for (i, s) in shards.iter().enumerate() {
        o.summary(name, &format!("shard=\"{i}\""), &s.metrics.latency(), 1e6);
    }
    o.finish()
}
