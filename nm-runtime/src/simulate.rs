//! `--simulate`: a synthetic workload driving the container table like an executor would.
//! Containers start at a configured rate (up to a maximum running), run for a random time
//! (exponential around a mean), and finish with exit status 0; cleanup orders finish them at
//! once with the order's exit status. Applications are synthetic: ids cycle over `apps`
//! applications of a cluster timestamp fixed at start.

use std::time::Duration;

use nm_core::ids::{AppId, ContainerId};
use nm_core::table::{CleanupOrder, ContainerTable, Resource};

/// Workload settings.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Containers started per second.
    pub rate_per_s: f64,
    /// Mean run time.
    pub mean_run: Duration,
    /// Most containers running at once.
    pub max_running: usize,
    /// Distinct applications.
    pub apps: u32,
    pub resource: Resource,
    /// Seed of the run-time generator (0: from the clock).
    pub seed: u64,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            rate_per_s: 10.0,
            mean_run: Duration::from_secs(5),
            max_running: 200,
            apps: 4,
            resource: Resource {
                memory_mb: 1024,
                vcores: 1,
            },
            seed: 0,
        }
    }
}

/// The simulator.
pub struct Simulator {
    cfg: SimConfig,
    cluster_ts: i64,
    rng: u64,
    next_seq: i64,
    credit: f64,
    last_ms: Option<u64>,
    /// (container, end time in monotonic ms)
    running: Vec<(ContainerId, u64)>,
    pub started: u64,
    pub finished: u64,
    paused: bool,
}

impl Simulator {
    /// `cluster_ts` names the synthetic applications (use the agent's start time).
    pub fn new(cfg: SimConfig, cluster_ts: i64) -> Self {
        let seed = if cfg.seed == 0 {
            (cluster_ts as u64) ^ 0x9e37_79b9_7f4a_7c15 ^ u64::from(std::process::id())
        } else {
            cfg.seed
        };
        Self {
            cfg,
            cluster_ts,
            rng: seed | 1,
            next_seq: 1,
            credit: 0.0,
            last_ms: None,
            running: Vec::new(),
            started: 0,
            finished: 0,
            paused: false,
        }
    }

    fn next_f64(&mut self) -> f64 {
        // xorshift64*
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        (self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// While paused no new containers start (running ones still finish).
    pub fn set_paused(&mut self, paused: bool) {
        self.paused = paused;
    }

    pub fn running(&self) -> usize {
        self.running.len()
    }

    /// Advances to `now_ms`: finishes due containers, starts new ones.
    pub fn tick(&mut self, table: &mut ContainerTable, now_ms: u64, wall_ms: i64) {
        let mut i = 0;
        while i < self.running.len() {
            if self.running[i].1 <= now_ms {
                let (id, _) = self.running.swap_remove(i);
                if let Ok(true) = table.complete(&id, 0, "") {
                    self.finished += 1;
                }
            } else {
                i += 1;
            }
        }
        // drop ids the table completed by other means (cleanup) or forgot
        self.running.retain(|(id, _)| {
            table
                .get(id)
                .is_some_and(|c| c.state != nm_core::table::ContainerState::Complete)
        });
        let dt = self.last_ms.map_or(0, |l| now_ms.saturating_sub(l));
        self.last_ms = Some(now_ms);
        self.credit = (self.credit + self.cfg.rate_per_s * dt as f64 / 1000.0).min(1000.0);
        if self.paused {
            self.credit = 0.0;
        }
        while self.credit >= 1.0 && self.running.len() < self.cfg.max_running {
            self.credit -= 1.0;
            let app = AppId::new(
                self.cluster_ts,
                1 + (self.next_seq as u32 % self.cfg.apps.max(1)) as i32,
            );
            let id = ContainerId::new(app, 1, self.next_seq);
            self.next_seq += 1;
            if table
                .launch(id, self.cfg.resource, 0, wall_ms, true)
                .is_err()
            {
                break;
            }
            let u = self.next_f64().max(1e-9);
            let run = (-u.ln() * self.cfg.mean_run.as_millis() as f64) as u64;
            self.running.push((id, now_ms + run.max(1)));
            self.started += 1;
        }
        if self.running.len() >= self.cfg.max_running {
            self.credit = self.credit.min(1.0);
        }
    }

    /// Finishes every running simulated container now, with exit status 0.
    pub fn finish_all(&mut self, table: &mut ContainerTable) {
        for (id, _) in self.running.drain(..) {
            if let Ok(true) = table.complete(&id, 0, "finished early: the workload stopped") {
                self.finished += 1;
            }
        }
    }

    /// Cleanup orders for simulated containers: they finish at once.
    pub fn on_orders(&mut self, table: &mut ContainerTable, orders: &[CleanupOrder]) {
        for o in orders {
            if let Some(pos) = self.running.iter().position(|(id, _)| *id == o.container) {
                self.running.swap_remove(pos);
                if let Ok(true) = table.complete(
                    &o.container,
                    o.reason.exit_status(),
                    "Container killed by the simulator on request of the ResourceManager",
                ) {
                    self.finished += 1;
                }
            }
        }
    }
}
