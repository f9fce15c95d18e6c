//! The DistributedShell ApplicationMaster's I/O loop: [`crate::distributed_shell`]'s state
//! machine driven through [`ApplicationMaster`] (register, allocate, finish) and
//! [`ContainerManager`] (start, stop), publishing its [`Snapshot`] on a [`StatusBoard`] that
//! the caller serves (the `hotpath app am` status page).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::application_client::FinalStatus;
use crate::application_master::ApplicationMaster;
use crate::container_manager::ContainerManager;
use crate::distributed_shell::{DistributedShell, ShellSpec, Snapshot};
use crate::error::YarnError;

/// Where the AM publishes its progress; the status page reads it.
#[derive(Debug, Default)]
pub struct StatusBoard {
    snapshot: Mutex<Snapshot>,
    final_fetched: AtomicBool,
}

impl StatusBoard {
    /// The latest snapshot. `fetching` marks a final one as seen by a client (the AM waits a
    /// little for that before it unregisters, so that `app run` gets the last counts).
    pub fn get(&self, fetching: bool) -> Snapshot {
        let s = self
            .snapshot
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if fetching && s.final_status.is_some() {
            self.final_fetched.store(true, Ordering::Release);
        }
        s
    }

    fn put(&self, mut s: Snapshot, am: &ApplicationMaster) {
        s.amrm_token_rolls = am.token_rolls();
        *self.snapshot.lock().unwrap_or_else(|p| p.into_inner()) = s;
    }

    fn final_fetched(&self) -> bool {
        self.final_fetched.load(Ordering::Acquire)
    }
}

/// How the AM runs.
#[derive(Debug, Clone)]
pub struct AmSettings {
    pub spec: ShellSpec,
    /// Host and RPC port registered (the NodeManager's host; −1: no RPC service).
    pub host: String,
    pub rpc_port: i32,
    /// The status page, registered as the tracking URL.
    pub tracking_url: String,
    /// Time between allocate calls.
    pub heartbeat: Duration,
    /// Give up (FAILED) when the containers are not all done by then.
    pub timeout: Duration,
    /// After deciding, wait at most this long for a client to fetch the final snapshot.
    pub linger: Duration,
    /// Consecutive failed allocate calls tolerated.
    pub max_allocate_failures: u32,
}

/// Runs the application to its end: register, allocate until every container is done (or
/// `timeout`), stop what still runs, unregister. Returns the final status the AM reported.
pub fn run(
    am: &ApplicationMaster,
    cm: &ContainerManager,
    settings: &AmSettings,
    board: &StatusBoard,
) -> Result<(FinalStatus, String), YarnError> {
    let reg = am.register(&settings.host, settings.rpc_port, &settings.tracking_url)?;
    if let Some(max) = &reg.maximum_capability {
        let (m, v) = (
            max.memory.unwrap_or(i64::MAX),
            max.virtual_cores.unwrap_or(i32::MAX),
        );
        if settings.spec.memory_mb > m || settings.spec.vcores > v {
            return finish(
                am,
                cm,
                settings,
                board,
                &mut DistributedShell::new(settings.spec.clone()),
                Some(&format!(
                    "the containers ask for {} MB / {} vcores, the cluster grants at most {m} MB / {v} vcores",
                    settings.spec.memory_mb, settings.spec.vcores
                )),
            );
        }
    }
    let mut ds = DistributedShell::new(settings.spec.clone());
    ds.add_nm_tokens(&reg.nm_tokens_from_previous_attempts);
    board.put(ds.snapshot(), am);
    let t0 = Instant::now();
    let mut failures = 0u32;
    let mut abort: Option<String> = None;
    while !ds.is_done() {
        if t0.elapsed() > settings.timeout {
            abort = Some(format!("not done within {:?}", settings.timeout));
            break;
        }
        let req = ds.allocate_request();
        match am.allocate(&req) {
            Ok(resp) => {
                failures = 0;
                let starts = ds.on_allocate(resp)?;
                for s in starts {
                    match cm.start(&s.node, &s.nm_token, vec![s.request]) {
                        Ok(o) if o.succeeded.contains(&s.container) => ds.started(s.container),
                        Ok(o) => {
                            let why = o
                                .failed
                                .iter()
                                .find(|f| f.container == Some(s.container))
                                .or(o.failed.first())
                                .map_or_else(
                                    || "the NodeManager did not report the start".to_string(),
                                    |f| f.to_string(),
                                );
                            tracing::warn!(container = %s.container, node = %s.node, "start failed: {why}");
                            ds.start_failed(s.container, &why);
                        }
                        Err(e) => {
                            tracing::warn!(container = %s.container, node = %s.node, "start failed: {e}");
                            ds.start_failed(s.container, &e.to_string());
                        }
                    }
                }
            }
            Err(e) => {
                failures += 1;
                tracing::warn!("allocate failed ({failures}): {e}");
                if failures > settings.max_allocate_failures {
                    abort = Some(format!("allocate failed {failures} times in a row: {e}"));
                    break;
                }
            }
        }
        board.put(ds.snapshot(), am);
        if !ds.is_done() {
            std::thread::sleep(settings.heartbeat);
        }
    }
    finish(am, cm, settings, board, &mut ds, abort.as_deref())
}

fn finish(
    am: &ApplicationMaster,
    cm: &ContainerManager,
    settings: &AmSettings,
    board: &StatusBoard,
    ds: &mut DistributedShell,
    abort: Option<&str>,
) -> Result<(FinalStatus, String), YarnError> {
    // Stop what still runs (an abort): Java's NMClient stops every container at its end too.
    for (id, node) in ds.running() {
        if let Some(tok) = ds.nm_token(&node).cloned() {
            if let Err(e) = cm.stop(&node, &tok, &[id]) {
                tracing::warn!(container = %id, "stop failed: {e}");
            }
        }
    }
    let (status, diagnostics) = ds.finish(abort);
    board.put(ds.snapshot(), am);
    tracing::info!("finishing: {} {diagnostics}", status.as_str());
    // Linger for the client, still heartbeating: the RM expires an AM that goes quiet for
    // `yarn.am.liveness-monitor.expiry-interval-ms`.
    let t0 = Instant::now();
    let mut last_beat = Instant::now();
    while t0.elapsed() < settings.linger && !board.final_fetched() {
        if last_beat.elapsed() >= settings.heartbeat {
            last_beat = Instant::now();
            match am.allocate(&ds.allocate_request()) {
                // Nothing is asked for any more; a surplus container is queued for release.
                Ok(resp) => {
                    if let Err(e) = ds.on_allocate(resp) {
                        tracing::warn!("allocate while finishing: {e}");
                        break;
                    }
                }
                Err(e) => tracing::warn!("allocate while finishing: {e}"),
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let req = DistributedShell::finish_request(status, &diagnostics, &settings.tracking_url);
    let mut tries = 0;
    loop {
        tries += 1;
        match am.finish(&req) {
            Ok(true) => break,
            Ok(false) if tries < 100 => std::thread::sleep(Duration::from_millis(100)),
            Ok(false) => {
                return Err(YarnError::Rm(
                    "finishApplicationMaster: not unregistered after 100 calls".into(),
                ))
            }
            Err(e) if tries < 5 => {
                tracing::warn!("finishApplicationMaster failed: {e}");
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(e) => return Err(e),
        }
    }
    Ok((status, diagnostics))
}
