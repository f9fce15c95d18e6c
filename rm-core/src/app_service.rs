//! ApplicationClientProtocol and ApplicationMasterProtocol on their own `ipc` servers, around
//! [`Apps`]: the client protocol on `yarn.resourcemanager.address` (SIMPLE, as a non-secure
//! Java RM), the master protocol on `yarn.resourcemanager.scheduler.address` with TOKEN
//! authentication only, by AMRMToken ([`AmrmTokenSecrets`]), secure or not, as Java's
//! `ApplicationMasterService` forces it: a SIMPLE caller is refused at connection time (`SIMPLE
//! authentication is not enabled.  Available:[TOKEN]`), and a call whose token context carries
//! no attempt with Java's "No AMRMToken found for user …". A secure RM
//! ([`crate::service::AppsSecurity`]) takes KERBEROS on the client port (the caller's short
//! name is the application's user). Errors are Java's exception classes ([`crate::apps::exc`]).
//! With `yarn.acl.enable` the client protocol's application calls check the caller's access
//! ([`crate::app_acls`]: Java's refusal on kill, the reduced report on reports and lists).
//!
//! [`AppsRt`] is the shared handle: every change to [`Apps`] goes through
//! [`AppsRt::with`], which then hands the AM launches to the [`AmLauncher`] thread and the
//! cleanups to the shards' mailboxes (the heartbeat outbox), outside the lock.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard};

use hadoop_wire::pb::hadoop::yarn::{
    AllocateRequestProto, ApplicationAttemptIdProto, ApplicationReportProto,
    ApplicationsRequestScopeProto, FailApplicationAttemptRequestProto,
    FailApplicationAttemptResponseProto, FinishApplicationMasterRequestProto,
    FinishApplicationMasterResponseProto, GetApplicationAttemptReportRequestProto,
    GetApplicationAttemptReportResponseProto, GetApplicationAttemptsRequestProto,
    GetApplicationAttemptsResponseProto, GetApplicationReportRequestProto,
    GetApplicationReportResponseProto, GetApplicationsRequestProto, GetApplicationsResponseProto,
    GetClusterMetricsResponseProto, GetClusterNodesRequestProto, GetClusterNodesResponseProto,
    GetContainerReportRequestProto, GetContainerReportResponseProto, GetContainersRequestProto,
    GetContainersResponseProto, GetNewApplicationResponseProto, GetQueueInfoRequestProto,
    GetQueueInfoResponseProto, KillApplicationRequestProto, KillApplicationResponseProto,
    NodeReportProto, NodeStateProto, RegisterApplicationMasterRequestProto,
    SubmitApplicationRequestProto, SubmitApplicationResponseProto, YarnClusterMetricsProto,
};
use hadoop_wire::pb::hadoop::yarn::{
    GetAllResourceTypeInfoResponseProto, GetAttributesToNodesResponseProto,
    GetClusterNodeAttributesResponseProto, GetClusterNodeLabelsResponseProto,
    GetLabelsToNodesResponseProto, GetNodesToAttributesResponseProto,
    GetNodesToLabelsResponseProto, GetQueueUserAclsInfoResponseProto,
    MoveApplicationAcrossQueuesRequestProto, MoveApplicationAcrossQueuesResponseProto,
    PriorityProto, SignalContainerCommandProto, SignalContainerRequestProto,
    SignalContainerResponseProto, UpdateApplicationPriorityRequestProto,
    UpdateApplicationPriorityResponseProto, UpdateApplicationTimeoutsRequestProto,
    UpdateApplicationTimeoutsResponseProto,
};
use hadoop_wire::token::identifier::{attempt_from_proto, container_from_proto};
use hadoop_wire::token::{AmrmTokenIdentifier, TokenIdentifier};
use hadoop_wire::yarn::ids::{AppId, AttemptId};
use hadoop_wire::yarn::{
    acp, amp, APPLICATION_CLIENT_PROTOCOL, APPLICATION_CLIENT_VERSION, APPLICATION_MASTER_PROTOCOL,
    APPLICATION_MASTER_VERSION,
};
use ipc::server::{Call, CallError, Registry, Reply};
use prost::Message;

use crate::am_launcher::{AmLauncher, LaunchHost};
use crate::amrm_token::{AmrmCaller, AmrmTokenSecrets};
use crate::app_acls::{denied_message, AccessType, AclPolicy, Caller};
use crate::apps::{
    exc, reduced_report, report, AmLaunch, AppError, Apps, Cleanup, Res, RmApp, TokenKeys,
    DEFAULT_QUEUE, DEFAULT_RACK,
};
use crate::dispatcher::wall_ms;
use crate::mailbox::{Global, Mailbox};
use crate::node::SchedChange;
use crate::reports;
use crate::signals::QueuedSignal;
use crate::state_store::{AmAllocatedRec, ClientToAmKeyRec, EpochRec, KeysRec, Rec, StateStore};
use crate::tracker::{Membership, ResourceTracker};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn call_error(e: AppError) -> CallError {
    CallError::application(e.class, e.message)
}

fn decode<M: Message + Default>(call: &Call<'_>) -> Result<M, CallError> {
    M::decode(call.request).map_err(CallError::invalid_request)
}

/// The shared handle on the applications (see the module docs).
#[derive(Clone)]
pub struct AppsRt {
    pub apps: Arc<Mutex<Apps>>,
    pub gate: Arc<AtomicBool>,
    /// [`Apps::work`]: a heartbeat schedules on its node only while it is set.
    pub work: Arc<AtomicBool>,
    pub amrm: Arc<AmrmTokenSecrets>,
    mailboxes: Vec<Arc<Mailbox>>,
    tracker: Arc<Mutex<ResourceTracker>>,
    launcher: Arc<Mutex<Option<AmLauncher>>>,
    /// The state store (recovery on), its writer thread, and the keys last written to it.
    store: Option<Arc<Mutex<StateStore>>>,
    writer: Option<Arc<StoreWriter>>,
    stored_keys: Arc<Mutex<Option<KeysRec>>>,
    /// The RM delegation-token secrets ([`crate::rm_delegation`]), once set.
    delegation: Arc<std::sync::OnceLock<Arc<crate::rm_delegation::RmDelegationSecrets>>>,
    /// The applications' token renewer ([`crate::token_renewer`]; secure clusters), once set.
    token_renewer: Arc<std::sync::OnceLock<Arc<crate::token_renewer::DelegationTokenRenewer>>>,
    /// The attempts' ClientToAM master keys ([`crate::client_to_am`]), used once
    /// [`set_secure`](Self::set_secure) was called.
    pub client_to_am: Arc<crate::client_to_am::ClientToAmKeys>,
    secure: Arc<AtomicBool>,
}

/// Changes for the state store, and the AM launches that must wait for them.
struct Batch {
    ticket: u64,
    recs: Vec<Rec>,
    launches: Vec<AmLaunch>,
}

/// The state store's writer thread: appends queued batches (several per fsync when they
/// queue up), then hands their AM launches to the launcher and tells waiters.
struct StoreWriter {
    tx: Mutex<Option<mpsc::Sender<Batch>>>,
    next: std::sync::atomic::AtomicU64,
    durable: Arc<(Mutex<u64>, Condvar)>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl StoreWriter {
    fn start(
        store: Arc<Mutex<StateStore>>,
        launcher: Arc<Mutex<Option<AmLauncher>>>,
    ) -> std::io::Result<StoreWriter> {
        let (tx, rx) = mpsc::channel::<Batch>();
        let durable = Arc::new((Mutex::new(0u64), Condvar::new()));
        let d = durable.clone();
        let thread = std::thread::Builder::new()
            .name("hp-rm-store".into())
            .spawn(move || {
                while let Ok(first) = rx.recv() {
                    let mut batches = vec![first];
                    batches.extend(rx.try_iter());
                    let recs: Vec<Rec> =
                        batches.iter_mut().flat_map(|b| b.recs.drain(..)).collect();
                    if let Err(e) = lock(&store).append(&recs) {
                        tracing::error!(
                            "state store: {e}; these changes will not survive a restart"
                        );
                    }
                    let top = batches.last().map_or(0, |b| b.ticket);
                    let launches: Vec<AmLaunch> =
                        batches.into_iter().flat_map(|b| b.launches).collect();
                    if !launches.is_empty() {
                        if let Some(l) = lock(&launcher).as_ref() {
                            l.launch(launches);
                        }
                    }
                    let (m, cv) = &*d;
                    *lock(m) = top;
                    cv.notify_all();
                }
            })?;
        Ok(StoreWriter {
            tx: Mutex::new(Some(tx)),
            next: std::sync::atomic::AtomicU64::new(1),
            durable,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Queues a batch; returns its ticket for [`wait`](Self::wait). The caller holds the
    /// applications' lock, which orders the tickets.
    fn send(&self, recs: Vec<Rec>, launches: Vec<AmLaunch>) -> u64 {
        let ticket = self.next.fetch_add(1, Ordering::Relaxed);
        let sent = lock(&self.tx).as_ref().map(|tx| {
            tx.send(Batch {
                ticket,
                recs,
                launches,
            })
        });
        if !matches!(sent, Some(Ok(()))) {
            tracing::error!("state store writer stopped: a change was not written");
            let (m, cv) = &*self.durable;
            // One lock (taking it twice in one expression would deadlock this thread: an AM
            // launch finishing while the RM shuts down came here and hung the shutdown).
            let mut done = lock(m);
            *done = ticket.max(*done);
            cv.notify_all();
        }
        ticket
    }

    /// Waits until the batch `ticket` is durable (or the writer stopped).
    fn wait(&self, ticket: u64) {
        let (m, cv) = &*self.durable;
        let mut g = lock(m);
        while *g < ticket {
            let stopped = lock(&self.thread).is_none();
            if stopped {
                return;
            }
            g = cv
                .wait_timeout(g, std::time::Duration::from_millis(100))
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
    }

    /// Writes what is queued, then stops.
    fn stop(&self) {
        lock(&self.tx).take();
        let t = lock(&self.thread).take();
        if let Some(t) = t {
            let _ = t.join();
        }
    }
}

struct Host {
    tracker: Arc<Mutex<ResourceTracker>>,
    rt: AppsRt,
    expiry_ms: u64,
}

impl LaunchHost for Host {
    fn keys(&self) -> TokenKeys {
        keys(&self.tracker)
    }
    fn now_ms(&self) -> u64 {
        wall_ms()
    }
    fn token_expiry_ms(&self) -> u64 {
        self.expiry_ms
    }
    fn done(&self, attempt: AttemptId, result: Result<(), String>) {
        self.rt.with(|a| match result {
            Ok(()) => a.am_launched(attempt, wall_ms()),
            Err(e) => a.am_launch_failed(attempt, &e, wall_ms()),
        });
    }
}

/// Every master key as the state store keeps it.
fn current_keys(amrm: &AmrmTokenSecrets, tracker: &Mutex<ResourceTracker>) -> KeysRec {
    let (cur, next) = {
        let m = amrm.read();
        let (c, n) = m.keys();
        (c.to_proto(), n.map(|k| k.to_proto()))
    };
    let t = lock(tracker);
    KeysRec {
        amrm_current: Some(cur),
        amrm_next: next,
        container: Some(t.container_keys().current().to_proto()),
        nm: Some(t.nm_keys().current().to_proto()),
    }
}

/// The tracker's current container and NM keys.
pub fn keys(tracker: &Mutex<ResourceTracker>) -> TokenKeys {
    let t = lock(tracker);
    TokenKeys {
        container: t.container_keys().current().clone(),
        nm: t.nm_keys().current().clone(),
        rm_identifier: t.rm_identifier(),
    }
}

impl AppsRt {
    /// The handle and its launcher thread.
    pub fn start(
        apps: Apps,
        amrm: Arc<AmrmTokenSecrets>,
        tracker: &Arc<Mutex<ResourceTracker>>,
        store: Option<StateStore>,
    ) -> std::io::Result<AppsRt> {
        let expiry_ms = apps.config().container_token_expiry_ms;
        let gate = apps.gate();
        let work = apps.work();
        let mailboxes = lock(tracker).mailboxes().to_vec();
        let launcher = Arc::new(Mutex::new(None));
        let store = store.map(|s| Arc::new(Mutex::new(s)));
        let writer = match &store {
            Some(s) => Some(Arc::new(StoreWriter::start(s.clone(), launcher.clone())?)),
            None => None,
        };
        let rt = AppsRt {
            apps: Arc::new(Mutex::new(apps)),
            gate,
            work,
            amrm,
            mailboxes,
            tracker: tracker.clone(),
            launcher,
            store,
            writer,
            stored_keys: Arc::new(Mutex::new(None)),
            delegation: Arc::new(std::sync::OnceLock::new()),
            token_renewer: Arc::new(std::sync::OnceLock::new()),
            client_to_am: Arc::new(crate::client_to_am::ClientToAmKeys::new()),
            secure: Arc::new(AtomicBool::new(false)),
        };
        // Containers of applications this RM does not know are cleaned up as Java does (trap
        // 2), and whatever recovery queued (the applications it knows, held acknowledgements,
        // cleanups of finished applications) reaches the shards before any node registers.
        let recovery = rt.store.is_some();
        for m in &rt.mailboxes {
            m.push_global(Global::CleanUnknownApps { recovery });
        }
        rt.with(|_| ());
        let launcher = AmLauncher::start(Box::new(Host {
            tracker: tracker.clone(),
            rt: rt.clone(),
            expiry_ms,
        }))?;
        *lock(&rt.launcher) = Some(launcher);
        Ok(rt)
    }

    /// Whether anything is in flight (one relaxed load; the heartbeat path's check).
    #[inline]
    pub fn active(&self) -> bool {
        self.gate.load(Ordering::Relaxed)
    }

    /// Whether a heartbeat should schedule on its node (one relaxed load; see
    /// [`Apps::refresh_work`]).
    #[inline]
    pub fn has_work(&self) -> bool {
        self.work.load(Ordering::Relaxed)
    }

    /// Where the shards hand what they saw change on the nodes ([`SchedChange`]s): applied
    /// to the applications in one lock per batch, off the ring threads.
    pub fn sched_sink(&self) -> crate::dispatcher::SchedSink {
        let rt = self.clone();
        Arc::new(move |changes: &mut Vec<SchedChange>| {
            rt.with_nowait(|a| a.apply_node_changes(changes, wall_ms()));
        })
    }

    /// Runs `f` on the applications, then sends its launches and cleanups on. With the state
    /// store on, what `f` changed is written (and fsynced) by the store's writer thread, which
    /// launches AM containers only once their records are durable; `with` returns once the
    /// write is durable, so an RPC is answered only after what it changed would survive a
    /// restart. (The heartbeat path uses [`with_nowait`](Self::with_nowait).)
    pub fn with<R>(&self, f: impl FnOnce(&mut Apps) -> R) -> R {
        let (r, ticket) = self.run(f);
        if let (Some(w), Some(t)) = (&self.writer, ticket) {
            w.wait(t);
        }
        r
    }

    /// [`with`](Self::with) without waiting for the state store (for the heartbeat ring
    /// threads: their node updates may allocate AM containers, whose records and launches the
    /// writer thread takes care of).
    pub fn with_nowait<R>(&self, f: impl FnOnce(&mut Apps) -> R) -> R {
        self.run(f).0
    }

    fn run<R>(&self, f: impl FnOnce(&mut Apps) -> R) -> (R, Option<u64>) {
        let (r, launches, cleanups, ticket) = {
            let mut a = lock(&self.apps);
            let r = f(&mut a);
            // An attempt retried by `f` (an AM container lost, a launch failed, a liveness
            // expiry) gets its AM container now (one flag test when there is none).
            if a.has_unplaced() {
                a.place_unplaced(wall_ms());
            }
            a.refresh_work();
            let mut launches = a.take_launches();
            let mut ticket = None;
            if let Some(w) = &self.writer {
                let mut ops = a.take_store_ops();
                if !ops.is_empty() || !launches.is_empty() {
                    let now = wall_ms();
                    ops.extend(launches.iter().map(|l| {
                        Rec::AmAllocated(AmAllocatedRec {
                            attempt: hadoop_wire::token::identifier::attempt_to_proto(&l.attempt),
                            container: l.container.id,
                            host: l.node.host.to_string(),
                            port: l.node.port,
                            allocated_ms: now,
                        })
                    }));
                    // Queued while the applications are locked: records reach the log in
                    // the order the changes were made.
                    ticket = Some(w.send(ops, std::mem::take(&mut launches)));
                }
            }
            (r, launches, a.take_cleanups(), ticket)
        };
        // Cleanups first: a submission's application is known to the shards before its AM
        // container can be launched and reported.
        self.cleanup(cleanups);
        if !launches.is_empty() {
            if let Some(l) = lock(&self.launcher).as_ref() {
                l.launch(launches);
            }
        }
        (r, ticket)
    }

    fn cleanup(&self, cleanups: Vec<Cleanup>) {
        if cleanups.is_empty() {
            return;
        }
        let mut t = lock(&self.tracker);
        for c in cleanups {
            let g = match c {
                Cleanup::App(a) => Global::FinishApp(a),
                Cleanup::Container(c) => Global::KillContainer(c),
                Cleanup::HoldAcks(a) => {
                    // (Queued for every application submitted to a known queue or recovered
                    // live: the applications the shards must know.)
                    t.hold_acks(a);
                    Global::LiveApp(a)
                }
                Cleanup::Ack(c) => {
                    t.release_ack(c);
                    continue;
                }
                Cleanup::ReleaseAcks(a) => {
                    t.release_app_acks(a);
                    continue;
                }
            };
            for m in &self.mailboxes {
                m.push_global(g);
            }
        }
    }

    /// Writes the master keys to the state store if they changed since the last write
    /// (the housekeeping thread calls this after the key timers ran).
    pub fn persist_keys(&self) {
        let Some(store) = &self.store else {
            return;
        };
        let keys = current_keys(&self.amrm, &self.tracker);
        let mut last = lock(&self.stored_keys);
        if last.as_ref() == Some(&keys) {
            return;
        }
        match lock(store).append(&[Rec::Keys(keys.clone())]) {
            Ok(()) => *last = Some(keys),
            Err(e) => tracing::error!("state store: master keys: {e}"),
        }
    }

    /// Sets the applications' token renewer (once, at start): from then on each submission's
    /// tokens are renewed before it is accepted, and an application whose token cannot be
    /// renewed fails ([`crate::token_renewer`]).
    pub fn set_token_renewer(&self, r: Arc<crate::token_renewer::DelegationTokenRenewer>) {
        let _ = self.token_renewer.set(r);
    }

    /// Security is on (Kerberos on the client port): AMs get a ClientToAM master key when they
    /// register, and reports of their running applications a ClientToAM token, as Java's RM
    /// does when `UserGroupInformation.isSecurityEnabled()`.
    pub fn set_secure(&self) {
        self.secure.store(true, Ordering::Relaxed);
    }

    /// Adds the ClientToAM token for `client` to a report of a RUNNING application whose
    /// attempt has a key (`RMAppImpl.createAndGetApplicationReport`), on a secure RM.
    fn add_client_token(&self, rep: &mut ApplicationReportProto, client: &str) {
        if !self.secure.load(Ordering::Relaxed)
            || rep.yarn_application_state
                != Some(hadoop_wire::pb::hadoop::yarn::YarnApplicationStateProto::Running as i32)
        {
            return;
        }
        let Some(a) = rep
            .current_application_attempt_id
            .as_ref()
            .and_then(attempt_from_proto)
        else {
            return;
        };
        rep.client_to_am_token = self.client_to_am.token(a, client);
    }

    /// Sets the RM delegation-token secrets (once, at start).
    pub fn set_delegation(&self, d: Arc<crate::rm_delegation::RmDelegationSecrets>) {
        let _ = self.delegation.set(d);
    }

    /// The RM delegation-token secrets, if set.
    pub fn delegation(&self) -> Option<&Arc<crate::rm_delegation::RmDelegationSecrets>> {
        self.delegation.get()
    }

    /// Runs `f` on the RM delegation-token secret manager; with the state store on, what it
    /// changed is written and durable before this returns. The applications' lock is held
    /// around the change and the queuing of its records (lock order: applications, then the
    /// manager), so records reach the log in the order of the changes and a compaction's
    /// snapshot never misses one. `None` when no secrets are set.
    pub fn with_delegation<R>(
        &self,
        f: impl FnOnce(&mut crate::rm_delegation::RmDelegationTokenSecretManager) -> R,
    ) -> Option<R> {
        let d = self.delegation.get()?;
        let (r, ticket) = {
            let _apps = lock(&self.apps);
            let mut m = d.write();
            let r = f(&mut m);
            let recs = m.store_mut().take();
            let ticket = match &self.writer {
                Some(w) if !recs.is_empty() => Some(w.send(recs, Vec::new())),
                _ => None,
            };
            (r, ticket)
        };
        if let (Some(w), Some(t)) = (&self.writer, ticket) {
            w.wait(t);
        }
        Some(r)
    }

    /// Rewrites the state store with what the RM keeps now: its epoch, keys and applications
    /// (at start, and when the log has grown past its limit).
    pub fn compact_store(&self, force: bool) {
        let Some(store) = &self.store else {
            return;
        };
        let a = lock(&self.apps);
        let mut s = lock(store);
        if !force && !s.wants_compaction() {
            return;
        }
        let keys = current_keys(&self.amrm, &self.tracker);
        let mut recs = vec![
            Rec::Epoch(EpochRec { epoch: a.epoch() }),
            Rec::Keys(keys.clone()),
        ];
        recs.extend(a.store_snapshot());
        let live = |id: AppId| a.app(id).is_some_and(|x| !x.state.is_final());
        recs.extend(
            self.client_to_am
                .snapshot(live)
                .into_iter()
                .map(|(at, key)| {
                    Rec::ClientToAmKey(ClientToAmKeyRec {
                        attempt: hadoop_wire::token::identifier::attempt_to_proto(&at),
                        key,
                    })
                }),
        );
        if let Some(d) = self.delegation.get() {
            recs.extend(crate::rm_delegation::snapshot(&d.read()));
        }
        drop(a);
        let before = s.len();
        match s.compact(&recs) {
            Ok(()) => {
                *lock(&self.stored_keys) = Some(keys);
                tracing::info!(
                    "state store {}: compacted {before} bytes to {}",
                    s.path().display(),
                    s.len()
                );
            }
            Err(e) => tracing::error!("state store: compaction: {e}"),
        }
    }

    /// Prometheus lines: applications by state, and the scheduler's cluster resources.
    pub fn metrics_text(&self) -> String {
        use crate::apps::AppState as S;
        use std::fmt::Write as _;
        let a = lock(&self.apps);
        let mut counts = [0usize; 7];
        for app in a.apps() {
            counts[app.state as usize] += 1;
        }
        let (total, used) = a.cluster_resources();
        drop(a);
        let mut t = String::new();
        t.push_str("# HELP hotpath_rm_applications Applications the RM keeps, by state.\n");
        t.push_str("# TYPE hotpath_rm_applications gauge\n");
        for (s, name) in [
            (S::Submitted, "SUBMITTED"),
            (S::Accepted, "ACCEPTED"),
            (S::Running, "RUNNING"),
            (S::Finishing, "FINISHING"),
            (S::Finished, "FINISHED"),
            (S::Failed, "FAILED"),
            (S::Killed, "KILLED"),
        ] {
            let _ = writeln!(
                t,
                "hotpath_rm_applications{{state=\"{name}\"}} {}",
                counts[s as usize]
            );
        }
        t.push_str("# HELP hotpath_rm_scheduler_memory_mb Memory of active nodes (total) and allocated (used).\n");
        t.push_str("# TYPE hotpath_rm_scheduler_memory_mb gauge\n");
        let _ = writeln!(
            t,
            "hotpath_rm_scheduler_memory_mb{{kind=\"total\"}} {}",
            total.mem
        );
        let _ = writeln!(
            t,
            "hotpath_rm_scheduler_memory_mb{{kind=\"used\"}} {}",
            used.mem
        );
        t.push_str("# HELP hotpath_rm_scheduler_vcores Vcores of active nodes (total) and allocated (used).\n");
        t.push_str("# TYPE hotpath_rm_scheduler_vcores gauge\n");
        let _ = writeln!(
            t,
            "hotpath_rm_scheduler_vcores{{kind=\"total\"}} {}",
            total.vcores
        );
        let _ = writeln!(
            t,
            "hotpath_rm_scheduler_vcores{{kind=\"used\"}} {}",
            used.vcores
        );
        t
    }

    /// Stops the state store's writer (after writing what is queued) and the launcher thread
    /// (after the launch in progress).
    pub fn shutdown(&self) {
        if let Some(w) = &self.writer {
            w.stop();
        }
        let l = lock(&self.launcher).take();
        if let Some(l) = l {
            l.shutdown();
        }
    }
}

fn app_id(
    p: Option<&hadoop_wire::pb::hadoop::yarn::ApplicationIdProto>,
) -> Result<AppId, CallError> {
    p.filter(|p| p.id.is_some())
        .map(|p| AppId::new(p.cluster_timestamp.unwrap_or(0), p.id.unwrap_or(0)))
        .ok_or_else(|| {
            CallError::application(exc::ILLEGAL_ARGUMENT, "Invalid application id: null")
        })
}

fn node_state(m: Membership) -> NodeStateProto {
    match m {
        Membership::Active => NodeStateProto::NsRunning,
        Membership::Lost => NodeStateProto::NsLost,
        Membership::Shutdown => NodeStateProto::NsShutdown,
        Membership::Decommissioned => NodeStateProto::NsDecommissioned,
        Membership::Rebooted => NodeStateProto::NsRebooted,
    }
}

/// Node reports: the tracker's membership and capacity, the scheduler's usage.
fn node_reports(
    tracker: &Mutex<ResourceTracker>,
    rt: &AppsRt,
    states: &[i32],
) -> Vec<NodeReportProto> {
    // Read in chunks, the tracker's lock taken per chunk: a report over 10,000 nodes does
    // not hold heartbeats up for the whole walk.
    const CHUNK: usize = 256;
    let mut rows = Vec::new();
    let shards = lock(tracker).shard_count();
    for s in 0..shards {
        let mut from = 0;
        loop {
            let t = lock(tracker);
            let nodes = t.shard_nodes(s);
            let to = nodes.len().min(from + CHUNK);
            rows.extend(nodes.get(from..to).unwrap_or_default().iter().map(|n| {
                (
                    n.id.clone(),
                    node_state(n.membership),
                    n.http_port,
                    Res::new(n.total_memory_mb, n.total_vcores as i64),
                    n.last_seen_ms(),
                )
            }));
            if to >= nodes.len() {
                break;
            }
            from = to;
        }
    }
    let apps = lock(&rt.apps);
    rows.into_iter()
        .map(|(id, s, http, total, seen)| {
            // An active node the scheduler took out as unhealthy is UNHEALTHY, as in Java.
            let sched = apps.node(&id);
            let s = match sched {
                Some(n) if n.unhealthy && s == NodeStateProto::NsRunning => {
                    NodeStateProto::NsUnhealthy
                }
                _ => s,
            };
            (id, s, http, total, seen, sched)
        })
        .filter(|(_, s, ..)| {
            if states.is_empty() {
                *s == NodeStateProto::NsRunning
            } else {
                states.contains(&(*s as i32))
            }
        })
        .map(|(id, s, http, total, _seen, sched)| {
            let (used, containers) = sched
                .filter(|_| s == NodeStateProto::NsRunning)
                .map(|n| (n.used, n.containers as i32))
                .unwrap_or_default();
            let health = sched
                .filter(|n| n.unhealthy)
                .map(|n| n.health_report.clone())
                .unwrap_or_default();
            NodeReportProto {
                node_id: Some(id.to_proto()),
                http_address: Some(format!("{}:{}", id.host, http)),
                rack_name: Some(DEFAULT_RACK.into()),
                used: Some(used.to_proto()),
                capability: Some(total.to_proto()),
                num_containers: Some(containers),
                node_state: Some(s as i32),
                health_report: Some(health),
                last_health_report_time: Some(wall_ms() as i64),
                ..Default::default()
            }
        })
        .collect()
}

/// Runs `f` (which takes the applications' lock itself) for `user`; when one of its ACL checks
/// needed the caller's groups, looks them up with no lock held and runs `f` again.
fn with_caller<R>(policy: &AclPolicy, user: &str, mut f: impl FnMut(&Caller<'_>) -> R) -> R {
    let mut who = Caller::new(user);
    let r = f(&who);
    if !who.wants_groups() {
        return r;
    }
    policy.resolve_groups(&mut who);
    f(&who)
}

fn may(policy: &AclPolicy, who: &Caller<'_>, app: &RmApp, access: AccessType) -> bool {
    policy.check(who, &app.user, &app.queue, &app.acls, access)
}

/// The caller's MODIFY_APP on `id` (`request`: what the refusal is logged as), refused with
/// Java's `YarnException` wrapping an `AccessControlException`. An unknown application passes:
/// the request itself answers Java's not-found.
fn may_modify(
    pol: &AclPolicy,
    rt: &AppsRt,
    c: &Call<'_>,
    id: AppId,
    request: &str,
) -> Result<(), CallError> {
    let user = c.user.unwrap_or("dr.who");
    let allowed = with_caller(pol, user, |who| {
        let apps = lock(&rt.apps);
        apps.app(id)
            .map(|a| may(pol, who, a, AccessType::ModifyApp))
    });
    if allowed == Some(false) {
        tracing::info!(
            "{request} Request for {id} refused: User {user} doesn't have permissions to MODIFY_APP"
        );
        return Err(CallError::application(
            exc::YARN,
            denied_message(user, AccessType::ModifyApp, id),
        ));
    }
    Ok(())
}

/// The report `who` may see of `app`: the whole one with VIEW_APP access, else Java's reduced
/// one.
fn report_for(policy: &AclPolicy, who: &Caller<'_>, app: &RmApp) -> ApplicationReportProto {
    if may(policy, who, app, AccessType::ViewApp) {
        report(app)
    } else {
        reduced_report(app)
    }
}

/// `submitApplication` with `yarn.acl.enable`: the queue's SUBMIT_APPLICATIONS or
/// ADMINISTER_QUEUE ACL must allow `user` ([`AclPolicy::may_submit`]). A refusal changed
/// nothing, so when the check needed the caller's groups the submission is tried once more
/// with them, looked up outside the applications' lock.
fn submit_as(
    rt: &AppsRt,
    pol: &AclPolicy,
    ctx: hadoop_wire::pb::hadoop::yarn::ApplicationSubmissionContextProto,
    user: &str,
) -> Result<AppId, AppError> {
    let mut who = Caller::new(user);
    let refused = std::cell::Cell::new(false);
    let attempt = |who: &Caller<'_>, ctx| {
        rt.with(|a| {
            a.submit_checked(ctx, user, wall_ms(), |q| {
                let ok = pol.may_submit(who, q);
                refused.set(!ok);
                ok
            })
        })
    };
    let mut r = attempt(&who, ctx.clone());
    if refused.get() && who.wants_groups() {
        pol.resolve_groups(&mut who);
        r = attempt(&who, ctx);
    }
    if refused.get() {
        if let Err(e) = &r {
            tracing::info!("submission refused: {}", e.message);
        }
    }
    r
}

/// ApplicationClientProtocolPB. With `acls` (`yarn.acl.enable=true`) the application calls
/// check the caller's access as Java's `ClientRMService` does ([`crate::app_acls`]); without,
/// they check nothing.
pub fn register_client(
    reg: &mut Registry,
    rt: &AppsRt,
    tracker: &Arc<Mutex<ResourceTracker>>,
    acls: Option<Arc<AclPolicy>>,
) {
    let p = APPLICATION_CLIENT_PROTOCOL;
    let v = APPLICATION_CLIENT_VERSION;
    let r = rt.clone();
    reg.register(
        p,
        v,
        acp::GET_NEW_APPLICATION,
        move |_c: &Call<'_>, reply: &mut Reply<'_, '_>| {
            let (id, max) = r.with(|a| a.new_application()).map_err(call_error)?;
            reply
                .message(&GetNewApplicationResponseProto {
                    application_id: Some(id.to_proto()),
                    maximum_capability: Some(max.to_proto()),
                })
                .map_err(CallError::from)
        },
    );
    let (r, policy) = (rt.clone(), acls.clone());
    reg.register(
        p,
        v,
        acp::SUBMIT_APPLICATION,
        move |c: &Call<'_>, reply: &mut Reply<'_, '_>| {
            let req: SubmitApplicationRequestProto = decode(c)?;
            let ctx = req.application_submission_context.ok_or_else(|| {
                CallError::application(exc::ILLEGAL_ARGUMENT, "no application submission context")
            })?;
            let user = c.user.unwrap_or("dr.who").to_string();
            // Secure clusters: the tokens renewed first ([`crate::token_renewer`]).
            let renewal = r.token_renewer.get().map(|t| {
                let spec = ctx.am_container_spec.as_ref();
                let tokens = spec.and_then(|s| s.tokens.as_deref()).unwrap_or(&[]);
                let cancel = ctx.cancel_tokens_when_complete.unwrap_or(true);
                let id = app_id(ctx.application_id.as_ref()).ok()?;
                Some((t.clone(), id, t.add_application(id, tokens, cancel)))
            });
            let id = match &policy {
                None => r.with(|a| a.submit(ctx, &user, wall_ms())),
                Some(pol) => submit_as(&r, pol, ctx, &user),
            }
            .inspect_err(|_| {
                if let Some(Some((t, id, _))) = &renewal {
                    t.forget_application(*id);
                }
            })
            .map_err(call_error)?;
            tracing::info!("Application with id {} submitted by user {user}", id.id);
            if let Some(Some((_, _, Err(diagnostics)))) = renewal {
                r.with(|a| a.reject(id, &diagnostics, wall_ms()));
            }
            reply
                .message(&SubmitApplicationResponseProto {})
                .map_err(CallError::from)
        },
    );
    let (r, policy) = (rt.clone(), acls.clone());
    reg.register(
        p,
        v,
        acp::GET_APPLICATION_REPORT,
        move |c: &Call<'_>, reply: &mut Reply<'_, '_>| {
            let req: GetApplicationReportRequestProto = decode(c)?;
            let id = app_id(req.application_id.as_ref())?;
            let rep = match &policy {
                None => lock(&r.apps).report(id),
                Some(pol) => with_caller(pol, c.user.unwrap_or("dr.who"), |who| {
                    let apps = lock(&r.apps);
                    apps.app(id)
                        .map(|a| report_for(pol, who, a))
                        .ok_or_else(|| Apps::not_found(id))
                }),
            }
            .map_err(call_error)?;
            let mut rep = rep;
            r.add_client_token(&mut rep, c.user.unwrap_or("dr.who"));
            reply
                .message(&GetApplicationReportResponseProto {
                    application_report: Some(rep),
                })
                .map_err(CallError::from)
        },
    );
    let (r, policy) = (rt.clone(), acls.clone());
    reg.register(
        p,
        v,
        acp::GET_APPLICATIONS,
        move |c: &Call<'_>, reply: &mut Reply<'_, '_>| {
            let req: GetApplicationsRequestProto = decode(c)?;
            let limit = req.limit.filter(|&l| l > 0).unwrap_or(i64::MAX) as usize;
            let types: Vec<String> = req
                .application_types
                .iter()
                .map(|t| t.to_lowercase())
                .collect();
            let matching = |a: &&RmApp| {
                (req.application_states.is_empty()
                    || req
                        .application_states
                        .contains(&(a.state.yarn_state() as i32)))
                    && (types.is_empty() || types.contains(&a.app_type.to_lowercase()))
                    && (req.queues.is_empty() || req.queues.contains(&a.queue))
                    && (req.users.is_empty() || req.users.contains(&a.user))
                    && req.name.as_ref().is_none_or(|n| *n == a.name)
            };
            let list: Vec<_> = match &policy {
                None => lock(&r.apps)
                    .apps()
                    .filter(matching)
                    .take(limit)
                    .map(report)
                    .collect(),
                Some(pol) => {
                    // Java's scope VIEWABLE leaves out what the caller may not view; ALL (the
                    // default) lists it with the reduced report.
                    let viewable_only =
                        req.scope == Some(ApplicationsRequestScopeProto::Viewable as i32);
                    with_caller(pol, c.user.unwrap_or("dr.who"), |who| {
                        lock(&r.apps)
                            .apps()
                            .filter(matching)
                            .filter_map(|a| {
                                if may(pol, who, a, AccessType::ViewApp) {
                                    Some(report(a))
                                } else if viewable_only {
                                    None
                                } else {
                                    Some(reduced_report(a))
                                }
                            })
                            .take(limit)
                            .collect()
                    })
                }
            };
            let mut list = list;
            for rep in &mut list {
                r.add_client_token(rep, c.user.unwrap_or("dr.who"));
            }
            reply
                .message(&GetApplicationsResponseProto { applications: list })
                .map_err(CallError::from)
        },
    );
    let (r, policy) = (rt.clone(), acls.clone());
    reg.register(
        p,
        v,
        acp::FORCE_KILL_APPLICATION,
        move |c: &Call<'_>, reply: &mut Reply<'_, '_>| {
            let req: KillApplicationRequestProto = decode(c)?;
            let id = app_id(req.application_id.as_ref())?;
            if let Some(pol) = &policy {
                // (an unknown application: the kill below answers Java's not-found)
                may_modify(pol, &r, c, id, "Kill Application")?;
            }
            let done = r
                .with(|a| a.kill(id, req.diagnostics.as_deref(), wall_ms()))
                .map_err(call_error)?;
            tracing::info!("Kill Application Request for {id}");
            reply
                .message(&KillApplicationResponseProto {
                    is_kill_completed: Some(done),
                })
                .map_err(CallError::from)
        },
    );
    let (r, policy) = (rt.clone(), acls.clone());
    reg.register(
        p,
        v,
        acp::FAIL_APPLICATION_ATTEMPT,
        move |c: &Call<'_>, reply: &mut Reply<'_, '_>| {
            let req: FailApplicationAttemptRequestProto = decode(c)?;
            let attempt = req
                .application_attempt_id
                .as_ref()
                .and_then(hadoop_wire::token::identifier::attempt_from_proto)
                .ok_or_else(|| {
                    CallError::application(
                        exc::ILLEGAL_ARGUMENT,
                        "Invalid application attempt id: null",
                    )
                })?;
            if let Some(pol) = &policy {
                // (an unknown application: fail_attempt answers Java's not-found)
                may_modify(pol, &r, c, attempt.app, "Fail Application Attempt")?;
            }
            r.with(|a| a.fail_attempt(attempt, wall_ms()))
                .map_err(call_error)?;
            tracing::info!("Fail Application Attempt Request for {attempt}");
            reply
                .message(&FailApplicationAttemptResponseProto {})
                .map_err(CallError::from)
        },
    );
    let (r, t) = (rt.clone(), tracker.clone());
    reg.register(
        p,
        v,
        acp::GET_CLUSTER_METRICS,
        move |_c: &Call<'_>, reply: &mut Reply<'_, '_>| {
            let mut m = YarnClusterMetricsProto::default();
            // Counted as nodes change (O(1) under each lock: heartbeats do not wait on a
            // walk over the nodes). Java counts an UNHEALTHY node apart from the active ones.
            let unhealthy = lock(&r.apps).unhealthy_nodes();
            let t = lock(&t);
            let count = |s: Membership| t.count(s) as i32;
            let active = count(Membership::Active);
            let unhealthy = (unhealthy as i32).min(active);
            m.num_active_nms = Some(active - unhealthy);
            m.num_lost_nms = Some(count(Membership::Lost));
            m.num_decommissioned_nms = Some(count(Membership::Decommissioned));
            m.num_rebooted_nms = Some(count(Membership::Rebooted));
            m.num_shutdown_nms = Some(count(Membership::Shutdown));
            m.num_unhealthy_nms = Some(unhealthy);
            m.num_decommissioning_nms = Some(0);
            m.num_node_managers = m.num_active_nms;
            drop(t);
            reply
                .message(&GetClusterMetricsResponseProto {
                    cluster_metrics: Some(m),
                })
                .map_err(CallError::from)
        },
    );
    let (r, t) = (rt.clone(), tracker.clone());
    reg.register(
        p,
        v,
        acp::GET_CLUSTER_NODES,
        move |c: &Call<'_>, reply: &mut Reply<'_, '_>| {
            let req: GetClusterNodesRequestProto = decode(c)?;
            let nodes = node_reports(&t, &r, &req.node_states);
            reply
                .message(&GetClusterNodesResponseProto {
                    node_reports: nodes,
                })
                .map_err(CallError::from)
        },
    );
    register_reports(reg, rt, acls.clone());
    register_queues_and_features(reg, rt, acls);
}

/// Runs `f` on application `id` for the caller: Java's `verifyUserAccessForRMApp` (an unknown
/// application is `ApplicationNotFoundException`) then `checkAccess` for VIEW_APP, refused as
/// `YarnException` "User … does not have privilege to see this {what}". Without ACLs
/// (`policy` None) everyone may.
fn viewing<R>(
    r: &AppsRt,
    policy: &Option<Arc<AclPolicy>>,
    call: &Call<'_>,
    id: AppId,
    what: &dyn std::fmt::Display,
    f: impl Fn(&Apps, &RmApp) -> Result<R, AppError>,
) -> Result<R, CallError> {
    let user = call.user.unwrap_or("dr.who");
    let run = |who: Option<&Caller<'_>>| {
        let apps = lock(&r.apps);
        let app = apps.app(id).ok_or_else(|| Apps::not_found(id))?;
        if let (Some(pol), Some(who)) = (policy, who) {
            if !may(pol, who, app, AccessType::ViewApp) {
                return Err(AppError {
                    class: exc::YARN,
                    message: format!("User {user} does not have privilege to see this {what}"),
                });
            }
        }
        f(&apps, app)
    };
    match policy {
        None => run(None),
        Some(pol) => with_caller(pol, user, |who| run(Some(who))),
    }
    .map_err(call_error)
}

/// `getApplicationAttemptReport`, `getApplicationAttempts`, `getContainerReport` and
/// `getContainers` ([`crate::reports`]).
fn register_reports(reg: &mut Registry, rt: &AppsRt, acls: Option<Arc<AclPolicy>>) {
    let (p, v) = (APPLICATION_CLIENT_PROTOCOL, APPLICATION_CLIENT_VERSION);
    let attempt_id = |p: Option<&ApplicationAttemptIdProto>| {
        p.and_then(attempt_from_proto).ok_or_else(|| {
            CallError::application(
                exc::ILLEGAL_ARGUMENT,
                "Invalid application attempt id: null",
            )
        })
    };
    let (r, policy) = (rt.clone(), acls.clone());
    reg.register(
        p,
        v,
        acp::GET_APPLICATION_ATTEMPT_REPORT,
        move |c: &Call<'_>, reply: &mut Reply<'_, '_>| {
            let req: GetApplicationAttemptReportRequestProto = decode(c)?;
            let id = attempt_id(req.application_attempt_id.as_ref())?;
            let rep = viewing(
                &r,
                &policy,
                c,
                id.app,
                &format_args!("attempt {id}"),
                |_, app| reports::attempt(app, id).map(reports::attempt_report),
            )?;
            reply
                .message(&GetApplicationAttemptReportResponseProto {
                    application_attempt_report: Some(rep),
                })
                .map_err(CallError::from)
        },
    );
    let (r, policy) = (rt.clone(), acls.clone());
    reg.register(
        p,
        v,
        acp::GET_APPLICATION_ATTEMPTS,
        move |c: &Call<'_>, reply: &mut Reply<'_, '_>| {
            let req: GetApplicationAttemptsRequestProto = decode(c)?;
            let id = app_id(req.application_id.as_ref())?;
            let list = viewing(
                &r,
                &policy,
                c,
                id,
                &format_args!("application {id}"),
                |_, app| Ok(app.attempts.iter().map(reports::attempt_report).collect()),
            )?;
            reply
                .message(&GetApplicationAttemptsResponseProto {
                    application_attempts: list,
                })
                .map_err(CallError::from)
        },
    );
    let (r, policy) = (rt.clone(), acls.clone());
    reg.register(
        p,
        v,
        acp::GET_CONTAINER_REPORT,
        move |c: &Call<'_>, reply: &mut Reply<'_, '_>| {
            let req: GetContainerReportRequestProto = decode(c)?;
            let id = req
                .container_id
                .as_ref()
                .and_then(container_from_proto)
                .ok_or_else(|| {
                    CallError::application(
                        reports::CONTAINER_NOT_FOUND,
                        "Invalid container id: null",
                    )
                })?;
            let (app_id, attempt) = (
                id.app,
                AttemptId {
                    app: id.app,
                    attempt: id.attempt,
                },
            );
            let rep = viewing(
                &r,
                &policy,
                c,
                app_id,
                &format_args!("application {app_id}"),
                |apps, app| reports::container(apps, app, reports::attempt(app, attempt)?, id),
            )?;
            reply
                .message(&GetContainerReportResponseProto {
                    container_report: Some(rep),
                })
                .map_err(CallError::from)
        },
    );
    let (r, policy) = (rt.clone(), acls);
    reg.register(
        p,
        v,
        acp::GET_CONTAINERS,
        move |c: &Call<'_>, reply: &mut Reply<'_, '_>| {
            let req: GetContainersRequestProto = decode(c)?;
            let id = attempt_id(req.application_attempt_id.as_ref())?;
            let list = viewing(
                &r,
                &policy,
                c,
                id.app,
                &format_args!("application {}", id.app),
                |apps, app| Ok(reports::containers(apps, app, reports::attempt(app, id)?)),
            )?;
            reply
                .message(&GetContainersResponseProto { containers: list })
                .map_err(CallError::from)
        },
    );
}

/// The attempt (and the key id) of the caller's AMRMToken: the [`AmrmCaller`] its connection
/// kept when it authenticated (the token was verified then), else the identifier parsed.
fn caller(call: &Call<'_>) -> Result<(AttemptId, i32), CallError> {
    let no_token = || {
        CallError::application(
            exc::YARN,
            format!(
                "No AMRMToken found for user {}",
                call.user.unwrap_or("null")
            ),
        )
    };
    if let Some(c) = call
        .token_context
        .and_then(|c| c.downcast_ref::<AmrmCaller>())
    {
        return Ok((c.attempt.ok_or_else(no_token)?, c.key_id));
    }
    let raw = call.token_identifier.ok_or_else(no_token)?;
    let id = AmrmTokenIdentifier::parse(raw).map_err(|_| no_token())?;
    let a = id.attempt_id().ok_or_else(no_token)?;
    Ok((a, id.key_id()))
}

/// ApplicationMasterProtocolPB (served with TOKEN auth).
pub fn register_master(reg: &mut Registry, rt: &AppsRt, tracker: &Arc<Mutex<ResourceTracker>>) {
    let p = APPLICATION_MASTER_PROTOCOL;
    let v = APPLICATION_MASTER_VERSION;
    let (r, t) = (rt.clone(), tracker.clone());
    reg.register(
        p,
        v,
        amp::REGISTER_APPLICATION_MASTER,
        move |c: &Call<'_>, reply: &mut Reply<'_, '_>| {
            let (a, _) = caller(c)?;
            let req: RegisterApplicationMasterRequestProto = decode(c)?;
            // The tracker's keys (for the NMTokens of containers from previous attempts) are
            // read inside the applications' lock, as in allocate (lock order: applications,
            // then tracker).
            // On a secure RM the attempt's ClientToAM master key, made now, is stored with the
            // registration (answered once durable, as the rest of it).
            let secure = r.secure.load(Ordering::Relaxed);
            let resp = r
                .with(|x| {
                    let mut resp = x.register_am_with(a, &req, Some(&keys(&t)), wall_ms())?;
                    if secure {
                        let live = |id: AppId| x.app(id).is_some_and(|y| !y.state.is_final());
                        let made = r.client_to_am.key_for_fresh(a, live);
                        if let Some((key, true)) = &made {
                            x.store_rec(Rec::ClientToAmKey(ClientToAmKeyRec {
                                attempt: hadoop_wire::token::identifier::attempt_to_proto(&a),
                                key: key.clone(),
                            }));
                        }
                        resp.client_to_am_token_master_key = made.map(|(k, _)| k);
                    }
                    Ok(resp)
                })
                .map_err(call_error)?;
            tracing::info!("AM registration {a}");
            reply.message(&resp).map_err(CallError::from)
        },
    );
    let (r, t) = (rt.clone(), tracker.clone());
    reg.register(
        p,
        v,
        amp::ALLOCATE,
        move |c: &Call<'_>, reply: &mut Reply<'_, '_>| {
            let (a, key_id) = caller(c)?;
            let req: AllocateRequestProto = decode(c)?;
            // The tracker's keys are read (its lock taken inside the applications' lock) only
            // for a response with new containers. Lock order: applications, then tracker;
            // nothing takes the applications' lock while holding the tracker's.
            let resp = r
                .with(|x| x.allocate_with(a, key_id, &req, || keys(&t), wall_ms()))
                .map_err(call_error)?;
            reply.message(&*resp).map_err(CallError::from)
        },
    );
    let r = rt.clone();
    reg.register(
        p,
        v,
        amp::FINISH_APPLICATION_MASTER,
        move |c: &Call<'_>, reply: &mut Reply<'_, '_>| {
            let (a, _) = caller(c)?;
            let req: FinishApplicationMasterRequestProto = decode(c)?;
            let done = r
                .with(|x| x.finish_am(a, &req, wall_ms()))
                .map_err(call_error)?;
            tracing::info!("{a} unregistered successfully. ");
            reply
                .message(&FinishApplicationMasterResponseProto {
                    is_unregistered: Some(done),
                })
                .map_err(CallError::from)
        },
    );
}

/// `getQueueInfo`, `getQueueUserAcls` and `getResourceTypeInfo` ([`crate::queues`]),
/// `moveApplicationAcrossQueues`, `updateApplicationPriority`, `updateApplicationTimeouts`, and
/// the methods of features this RM does not have, answered as a Java RM without them answers:
/// reservations (`Reservation is not enabled. Please enable & try again`), resource profiles
/// (`YARNFeatureNotEnabledException`), node labels and attributes (empty answers).
fn register_queues_and_features(reg: &mut Registry, rt: &AppsRt, acls: Option<Arc<AclPolicy>>) {
    let (p, v) = (APPLICATION_CLIENT_PROTOCOL, APPLICATION_CLIENT_VERSION);
    let (r, policy) = (rt.clone(), acls.clone());
    reg.register(
        p,
        v,
        acp::GET_QUEUE_INFO,
        move |c: &Call<'_>, reply: &mut Reply<'_, '_>| {
            let req: GetQueueInfoRequestProto = decode(c)?;
            let name = req
                .queue_name
                .clone()
                .unwrap_or_else(|| DEFAULT_QUEUE.into());
            let children = req.include_child_queues.unwrap_or(false);
            let recursive = req.recursive.unwrap_or(false);
            let with_apps = req.include_applications.unwrap_or(false);
            let build = |who: Option<&Caller<'_>>| {
                let apps = lock(&r.apps);
                let queue = crate::queues::resolve(&apps, &name)?;
                // Java lists the queue's applications the caller may view (whole reports).
                let mut reports = |a: &RmApp| {
                    let ok = match (&policy, who) {
                        (Some(pol), Some(who)) => may(pol, who, a, AccessType::ViewApp),
                        _ => true,
                    };
                    (with_apps && ok).then(|| report(a))
                };
                Some(crate::queues::queue_info(
                    &apps,
                    queue,
                    children,
                    recursive,
                    &mut reports,
                ))
            };
            let info = match &policy {
                Some(pol) if with_apps => {
                    with_caller(pol, c.user.unwrap_or("dr.who"), |who| build(Some(who)))
                }
                _ => build(None),
            };
            if info.is_none() {
                // Java's ClientRMService logs the scheduler's IOException and answers without
                // queue info.
                tracing::info!("Failed to getQueueInfo for {name}: Unknown queue: {name}");
            }
            reply
                .message(&GetQueueInfoResponseProto { queue_info: info })
                .map_err(CallError::from)
        },
    );
    let (r, policy) = (rt.clone(), acls.clone());
    reg.register(
        p,
        v,
        acp::GET_QUEUE_USER_ACLS,
        move |c: &Call<'_>, reply: &mut Reply<'_, '_>| {
            let user = c.user.unwrap_or("dr.who");
            let list = match &policy {
                None => crate::queues::user_acls(&lock(&r.apps), None, &Caller::new(user)),
                Some(pol) => with_caller(pol, user, |who| {
                    crate::queues::user_acls(&lock(&r.apps), Some(pol), who)
                }),
            };
            reply
                .message(&GetQueueUserAclsInfoResponseProto {
                    queue_user_acls: list,
                })
                .map_err(CallError::from)
        },
    );
    reg.register(
        p,
        v,
        acp::GET_RESOURCE_TYPE_INFO,
        move |_c: &Call<'_>, reply: &mut Reply<'_, '_>| {
            reply
                .message(&GetAllResourceTypeInfoResponseProto {
                    resource_type_info: crate::queues::resource_types(),
                })
                .map_err(CallError::from)
        },
    );
    let (r, policy) = (rt.clone(), acls.clone());
    reg.register(
        p,
        v,
        acp::MOVE_APPLICATION_ACROSS_QUEUES,
        move |c: &Call<'_>, reply: &mut Reply<'_, '_>| {
            let req: MoveApplicationAcrossQueuesRequestProto = decode(c)?;
            let id = app_id(Some(&req.application_id))?;
            let target = req.target_queue.clone();
            if let Some(pol) = &policy {
                exists(&r, id)?;
                may_modify(pol, &r, c, id, "Move Application")?;
                let user = c.user.unwrap_or("dr.who");
                // ClientRMService.accessToTargetQueueAllowed: SUBMIT_APPLICATIONS or
                // ADMINISTER_QUEUE on the target, which must exist.
                let allowed = with_caller(pol, user, |who| {
                    let apps = lock(&r.apps);
                    match crate::queues::resolve(&apps, &target) {
                        Some(Some(q)) => pol.may_submit(who, q),
                        _ => false,
                    }
                });
                if !allowed {
                    return Err(CallError::application(
                        exc::YARN,
                        format!(
                            "org.apache.hadoop.security.AccessControlException: User {} cannot submit applications to target queue or the target queue doesn't exist: {target} while moving {id}",
                            short_name(user)
                        ),
                    ));
                }
            }
            r.with(|a| a.move_app(id, &target)).map_err(call_error)?;
            tracing::info!("Move Application Request for {id} to {target}");
            reply
                .message(&MoveApplicationAcrossQueuesResponseProto {})
                .map_err(CallError::from)
        },
    );
    let (r, policy) = (rt.clone(), acls.clone());
    reg.register(
        p,
        v,
        acp::UPDATE_APPLICATION_PRIORITY,
        move |c: &Call<'_>, reply: &mut Reply<'_, '_>| {
            let req: UpdateApplicationPriorityRequestProto = decode(c)?;
            let id = app_id(Some(&req.application_id))?;
            if let Some(pol) = &policy {
                exists(&r, id)?;
                may_modify(pol, &r, c, id, "Update Application Priority")?;
            }
            let asked = req.application_priority.priority.unwrap_or(0);
            let now = r
                .with(|a| a.update_priority(id, asked))
                .map_err(call_error)?;
            tracing::info!("Update Application Priority Request for {id}: {asked} -> {now}");
            reply
                .message(&UpdateApplicationPriorityResponseProto {
                    application_priority: Some(PriorityProto {
                        priority: Some(now),
                    }),
                })
                .map_err(CallError::from)
        },
    );
    let (r, policy) = (rt.clone(), acls.clone());
    reg.register(
        p,
        v,
        acp::UPDATE_APPLICATION_TIMEOUTS,
        move |c: &Call<'_>, reply: &mut Reply<'_, '_>| {
            let req: UpdateApplicationTimeoutsRequestProto = decode(c)?;
            let id = app_id(Some(&req.application_id))?;
            exists(&r, id)?;
            if let Some(pol) = &policy {
                may_modify(pol, &r, c, id, "Update Application Timeouts")?;
            }
            if req.application_timeouts.is_empty() {
                return Err(CallError::application(
                    exc::YARN,
                    "At least one ApplicationTimeoutType should be configured for updating timeouts.",
                ));
            }
            let state = lock(&r.apps).app(id).map(|a| a.state);
            match state {
                // Java: a completed application's timeouts are answered back unchanged.
                Some(s) if s.is_final() || s == crate::apps::AppState::Finishing => reply
                    .message(&UpdateApplicationTimeoutsResponseProto {
                        application_timeouts: req.application_timeouts,
                    })
                    .map_err(CallError::from),
                // This RM has no lifetime monitor (Java's RMAppLifetimeMonitor): it says so
                // rather than accept a lifetime it would not enforce.
                _ => Err(CallError::application(
                    exc::YARN,
                    format!(
                        "Application lifetimes (ApplicationTimeoutType LIFETIME) are not supported by this ResourceManager; {id} was not changed"
                    ),
                )),
            }
        },
    );
    let (r, policy) = (rt.clone(), acls);
    reg.register(
        p,
        v,
        acp::SIGNAL_TO_CONTAINER,
        move |c: &Call<'_>, reply: &mut Reply<'_, '_>| {
            let req: SignalContainerRequestProto = decode(c)?;
            let id = container_from_proto(&req.container_id).ok_or_else(|| {
                CallError::application(exc::ILLEGAL_ARGUMENT, "Invalid container id: null")
            })?;
            let absent = || {
                CallError::application(
                    exc::YARN,
                    format!("Trying to signal an absent container {id}"),
                )
            };
            exists(&r, id.app).map_err(|_| absent())?;
            if let Some(pol) = &policy {
                may_modify(pol, &r, c, id.app, "Signal Container")?;
            }
            // Java: only a container the scheduler has (allocated, not complete).
            let node = lock(&r.apps).app(id.app).and_then(|a| {
                a.attempts
                    .iter()
                    .find(|t| t.id.attempt == id.attempt)
                    .and_then(|t| t.live.get(&id))
                    .map(|l| l.node.clone())
            });
            let node = node.ok_or_else(absent)?;
            let command = SignalContainerCommandProto::try_from(req.command).map_err(|_| {
                CallError::application(
                    exc::ILLEGAL_ARGUMENT,
                    format!("Unknown signal command {} for {id}", req.command),
                )
            })?;
            // The node's next heartbeat response carries it (crate::signals), once.
            let queued = lock(&r.tracker).queue_signal(&node, QueuedSignal::new(id, command));
            tracing::info!(
                "Signal Container Request for {id} ({}) to {node}{}",
                command.as_str_name(),
                if queued {
                    ""
                } else {
                    " dropped: the node is not active"
                }
            );
            reply
                .message(&SignalContainerResponseProto {})
                .map_err(CallError::from)
        },
    );
    for method in [
        acp::GET_NEW_RESERVATION,
        acp::SUBMIT_RESERVATION,
        acp::UPDATE_RESERVATION,
        acp::DELETE_RESERVATION,
        acp::LIST_RESERVATIONS,
    ] {
        reg.register(p, v, method, |_c: &Call<'_>, _reply: &mut Reply<'_, '_>| {
            // ClientRMService.checkReservationSystem, before the request is looked at.
            Err(CallError::application(
                exc::YARN,
                "Reservation is not enabled. Please enable & try again",
            ))
        });
    }
    for method in [acp::GET_RESOURCE_PROFILES, acp::GET_RESOURCE_PROFILE] {
        reg.register(p, v, method, |_c: &Call<'_>, _reply: &mut Reply<'_, '_>| {
            // ResourceProfilesManagerImpl.checkAndThrowExceptionWhenFeatureDisabled.
            Err(CallError::application(
                FEATURE_NOT_ENABLED,
                "Resource profile is not enabled, please enable resource profile feature before using its functions. (by setting yarn.resourcemanager.resource-profiles.enabled to true)",
            ))
        });
    }
    // No node labels or attributes: Java's managers answer empty maps and sets.
    reg.register(
        p,
        v,
        acp::GET_NODE_TO_LABELS,
        |_c: &Call<'_>, reply: &mut Reply<'_, '_>| {
            reply
                .message(&GetNodesToLabelsResponseProto::default())
                .map_err(CallError::from)
        },
    );
    reg.register(
        p,
        v,
        acp::GET_LABELS_TO_NODES,
        |_c: &Call<'_>, reply: &mut Reply<'_, '_>| {
            reply
                .message(&GetLabelsToNodesResponseProto::default())
                .map_err(CallError::from)
        },
    );
    reg.register(
        p,
        v,
        acp::GET_CLUSTER_NODE_LABELS,
        |_c: &Call<'_>, reply: &mut Reply<'_, '_>| {
            reply
                .message(&GetClusterNodeLabelsResponseProto::default())
                .map_err(CallError::from)
        },
    );
    reg.register(
        p,
        v,
        acp::GET_CLUSTER_NODE_ATTRIBUTES,
        |_c: &Call<'_>, reply: &mut Reply<'_, '_>| {
            reply
                .message(&GetClusterNodeAttributesResponseProto::default())
                .map_err(CallError::from)
        },
    );
    reg.register(
        p,
        v,
        acp::GET_ATTRIBUTES_TO_NODES,
        |_c: &Call<'_>, reply: &mut Reply<'_, '_>| {
            reply
                .message(&GetAttributesToNodesResponseProto::default())
                .map_err(CallError::from)
        },
    );
    reg.register(
        p,
        v,
        acp::GET_NODES_TO_ATTRIBUTES,
        |_c: &Call<'_>, reply: &mut Reply<'_, '_>| {
            reply
                .message(&GetNodesToAttributesResponseProto::default())
                .map_err(CallError::from)
        },
    );
}

/// `org.apache.hadoop.yarn.exceptions.YARNFeatureNotEnabledException`.
const FEATURE_NOT_ENABLED: &str =
    "org.apache.hadoop.yarn.exceptions.YARNFeatureNotEnabledException";

/// A Kerberos principal's short name (`alice/host@REALM` → `alice`), as Java's messages print
/// `getShortUserName()`.
fn short_name(user: &str) -> &str {
    user.split(['/', '@']).next().unwrap_or(user)
}

/// Java's `verifyUserAccessForRMApp`'s first step: an unknown application is
/// `ApplicationNotFoundException`.
fn exists(r: &AppsRt, id: AppId) -> Result<(), CallError> {
    if lock(&r.apps).app(id).is_none() {
        return Err(call_error(Apps::not_found(id)));
    }
    Ok(())
}
