//! The running dispatcher: one thread per shard, each pinned to a `shard-i` core of the `hw`
//! plan (or unpinned, for tests and small machines), looping on [`Shard::run_once`]. A busy
//! shard wakes once per batch interval; an idle one parks until the next heartbeat, or for a
//! second at most ([`crate::mailbox::Mailbox::take_inbox`]).
//!
//! A node belongs to shard `shard_of(host, port, N)` ([`crate::ids::shard_of`]); only that
//! thread touches its state. Each thread, once a second, publishes node gauges and prunes the
//! completion deduplication set. Node transitions and releases are logged at INFO.
//!
//! While the RM runs applications, each shard thread also hands the scheduler what its batch
//! changed for it ([`SchedChange`]: completions, containers first seen RUNNING, health
//! transitions) through the [`SchedSink`] set with [`Dispatcher::set_sched_sink`]: once per
//! batch that has any, off the ring threads. A batch of unchanged heartbeats has none, and
//! calls nothing.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::completion_log::LoadReport;
use crate::mailbox::Mailbox;
use crate::metrics::{ShardMetrics, ShardView};
use crate::node::{NodeEvent, SchedChange};
use crate::shard::Shard;
use crate::{Error, RmConfig};

/// A monotonic clock shared by the tracker and the shards (latency is measured across them).
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    base: Instant,
}

impl Default for Clock {
    fn default() -> Self {
        Clock {
            base: Instant::now(),
        }
    }
}

impl Clock {
    /// Nanoseconds since the clock was made.
    #[inline]
    pub fn now_ns(&self) -> u64 {
        self.base.elapsed().as_nanos() as u64
    }
}

/// Milliseconds since the Unix epoch (record times, `rm_identifier`).
pub fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Where the shard threads run.
#[derive(Debug, Clone)]
pub enum Placement {
    /// One shard per `shard-i` role of the plan, pinned to its CPU.
    Plan(hw::Plan),
    /// `n` unpinned shards.
    Unpinned(usize),
}

impl Placement {
    fn cpus(&self) -> Vec<Option<u32>> {
        match self {
            Placement::Plan(p) => {
                let mut v: Vec<(u16, u32)> = p
                    .assignments()
                    .iter()
                    .filter_map(|a| match a.role {
                        hw::Role::DispatcherShard(i) => Some((i, a.cpu)),
                        _ => None,
                    })
                    .collect();
                v.sort();
                if v.is_empty() {
                    // A plan without shard roles: one unpinned shard.
                    return vec![None];
                }
                v.into_iter().map(|(_, c)| Some(c)).collect()
            }
            Placement::Unpinned(n) => vec![None; (*n).max(1)],
        }
    }
}

/// Where the shard threads hand their batches of [`SchedChange`]s (the scheduler). The sink
/// may leave the vector non-empty; the shard clears it after the call and reuses it.
pub type SchedSink = Arc<dyn Fn(&mut Vec<SchedChange>) + Send + Sync>;

enum Worker {
    Pinned(hw::PinnedThread<()>),
    Plain(JoinHandle<()>),
}

impl Worker {
    fn join(self) {
        let _ = match self {
            Worker::Pinned(p) => p.join(),
            Worker::Plain(h) => h.join(),
        };
    }
}

/// The shard threads and their mailboxes.
pub struct Dispatcher {
    mailboxes: Vec<Arc<Mailbox>>,
    metrics: Vec<Arc<ShardMetrics>>,
    threads: Vec<Worker>,
    stop: Arc<AtomicBool>,
    sink: Arc<OnceLock<SchedSink>>,
}

impl Dispatcher {
    /// Opens every shard's completion log (sequentially, before any thread appends), then
    /// starts the threads.
    pub fn start(
        cfg: &RmConfig,
        placement: &Placement,
        clock: Clock,
    ) -> Result<(Dispatcher, Vec<LoadReport>), Error> {
        let cpus = placement.cpus();
        let n = cpus.len().max(1);
        let mut shards = Vec::with_capacity(n);
        let mut reports = Vec::with_capacity(n);
        for i in 0..n {
            let (shard, report) = Shard::open(&cfg.completion_log_dir, i, n, cfg.opportunistic)?;
            shards.push(shard);
            reports.push(report);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let mailboxes: Vec<Arc<Mailbox>> = (0..n)
            .map(|_| Arc::new(Mailbox::new(cfg.wake_depth)))
            .collect();
        let metrics: Vec<Arc<ShardMetrics>> = shards.iter().map(|s| s.metrics().clone()).collect();
        let mut threads = Vec::with_capacity(n);
        let sink: Arc<OnceLock<SchedSink>> = Arc::new(OnceLock::new());
        for (shard, cpu) in shards.into_iter().zip(cpus) {
            let mb = mailboxes[shard.index()].clone();
            let wait = Duration::from_millis(cfg.batch_interval_ms.max(1));
            let retention = cfg.dedup_retention_ms;
            let sk = sink.clone();
            let body = move || shard_loop(shard, mb, wait, retention, clock, sk);
            let handle = match cpu {
                Some(cpu) => {
                    let role = hw::Role::DispatcherShard(threads.len() as u16);
                    Worker::Pinned(
                        hw::spawn_pinned(role, cpu, body)
                            .map_err(|e| Error::Spawn(e.to_string()))?,
                    )
                }
                None => Worker::Plain(
                    std::thread::Builder::new()
                        .name(format!("hp-shard{}", threads.len()))
                        .spawn(body)
                        .map_err(|e| Error::Spawn(e.to_string()))?,
                ),
            };
            threads.push(handle);
        }
        Ok((
            Dispatcher {
                mailboxes,
                metrics,
                threads,
                stop,
                sink,
            },
            reports,
        ))
    }

    /// The mailboxes, one per shard (give them to the tracker).
    pub fn mailboxes(&self) -> Vec<Arc<Mailbox>> {
        self.mailboxes.clone()
    }

    /// Sets where the shards hand their [`SchedChange`]s (once; later calls are ignored).
    /// Until then they are dropped: without applications nothing produces them.
    pub fn set_sched_sink(&self, sink: SchedSink) {
        let _ = self.sink.set(sink);
    }

    pub fn shards(&self) -> usize {
        self.mailboxes.len()
    }

    /// What the metrics renderer reads.
    pub fn views(&self) -> Vec<ShardView<'_>> {
        self.mailboxes
            .iter()
            .zip(&self.metrics)
            .map(|(m, s)| ShardView {
                mailbox: m,
                metrics: s,
            })
            .collect()
    }

    /// Largest inbox depth any shard reached.
    pub fn max_backlog(&self) -> u64 {
        self.mailboxes
            .iter()
            .map(|m| m.counters.max_depth.load(Ordering::Relaxed))
            .max()
            .unwrap_or(0)
    }

    /// Pending node entries now, summed over the shards' mailboxes (each counts at most one
    /// per node: see [`crate::mailbox`]).
    pub fn backlog(&self) -> u64 {
        self.mailboxes.iter().map(|m| m.depth()).sum()
    }

    /// Finishes the backlog, commits, and joins the threads.
    pub fn shutdown(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for m in &self.mailboxes {
            m.shutdown();
        }
        for t in self.threads.drain(..) {
            t.join();
        }
    }
}

fn shard_loop(
    mut shard: Shard,
    mb: Arc<Mailbox>,
    wait: Duration,
    retention_ms: u64,
    clock: Clock,
    sink: Arc<OnceLock<SchedSink>>,
) {
    let now = || (wall_ms(), clock.now_ns());
    let mut last_housekeeping = Instant::now();
    let mut sched = Vec::new();
    loop {
        match shard.run_once(&mb, wait, &now) {
            Ok(Some(_)) => {}
            Ok(None) => break,
            Err(e) => {
                tracing::error!(
                    shard = shard.index(),
                    "completion log commit failed, will retry: {e}"
                );
                std::thread::sleep(wait);
            }
        }
        if shard.has_sched() {
            shard.take_sched(&mut sched);
            if let Some(f) = sink.get() {
                f(&mut sched);
            }
            sched.clear();
        }
        let idx = shard.index();
        let events: Vec<NodeEvent> = shard.drain_events().collect();
        for ev in events {
            match ev {
                NodeEvent::Transition { node, from, to } => {
                    let id = shard
                        .node(node)
                        .map(|n| n.id().to_string())
                        .unwrap_or_default();
                    tracing::info!(shard = idx, "node {id} {} -> {}", from.name(), to.name());
                }
                NodeEvent::Released { node, count } => {
                    let id = shard
                        .node(node)
                        .map(|n| n.id().to_string())
                        .unwrap_or_default();
                    tracing::debug!(
                        shard = idx,
                        "node {id}: {count} launched containers released"
                    );
                }
            }
        }
        if last_housekeeping.elapsed() >= Duration::from_secs(1) {
            last_housekeeping = Instant::now();
            shard.publish_gauges();
            shard.prune(wall_ms(), retention_ms);
        }
    }
    // Last commit of anything processed before the shutdown.
    if let Err(e) = shard.commit() {
        tracing::error!(
            shard = shard.index(),
            "final completion log commit failed: {e}"
        );
    }
    let mut out = Vec::new();
    shard.take_out(&mut out);
    mb.publish(&mut out);
    shard.publish_gauges();
}
