//! What the RM asks of this node's containers in a heartbeat response besides cleanups, after
//! Java's `NodeStatusUpdaterImpl` (which hands them to the container manager):
//!
//! - `containers_to_signal` (13, `yarn container -signal`, `signalToContainer`): each goes, in
//!   the RM's order, to the launcher, which signals the container's **process group**
//!   (OUTPUT_THREAD_DUMP → SIGQUIT, GRACEFUL_SHUTDOWN → SIGTERM, FORCEFUL_SHUTDOWN → SIGKILL)
//!   and appends Java's diagnostics line to the container. It is not a kill: a container that
//!   dies of it reports its real exit code (143, 137). Containers not known or not running
//!   here are ignored with Java's log lines (the RM sends a signal even when the container
//!   completed before the heartbeat).
//! - `containers_to_update` (17) and `containers_to_decrease` (12, the DECREASE subset kept
//!   for old NodeManagers; Java's NodeManager does not read it): this NodeManager does not
//!   resize containers or change their execution type; each entry is logged and ignored. The
//!   RM booked a decrease when it approved it, and rolls back an increase no NodeManager
//!   confirmed after `yarn.resourcemanager.rm.container-allocation.expiry-interval-ms`.
//!
//! Called on the ring thread only when the response had such entries
//! ([`nm_core::status_updater::RmOrders`]), so an ordinary heartbeat does nothing here.

use std::sync::atomic::Ordering::Relaxed;

use nm_core::container_manager::SignalTarget;
use nm_core::status_updater::RmOrders;
use nm_core::wire::HeartbeatResponse;

use crate::launcher::{LaunchCommand, LauncherHandle};
use crate::shared::{lock, Shared};

/// Acts on the signals and updates of a NORMAL heartbeat response (`payload`, already checked
/// by the status updater).
pub fn relay(shared: &Shared, launcher: &LauncherHandle, payload: &[u8], orders: RmOrders) {
    let Ok(r) = HeartbeatResponse::parse(payload) else {
        return;
    };
    let m = &shared.metrics;
    if orders.signals > 0 {
        m.containers_to_signal
            .fetch_add(u64::from(orders.signals), Relaxed);
        for s in r.containers_to_signal().flatten() {
            let target = lock(&shared.cm).signal_target(s.container, s.command);
            match target {
                SignalTarget::Send(id, sig) => {
                    tracing::info!(
                        "{id} signal request {} by ResourceManager",
                        sig.command_name()
                    );
                    launcher.send(LaunchCommand::Signal(id, sig));
                }
                SignalTarget::NotRunning(id, sig) => {
                    tracing::info!(
                        "{id} signal request {} by ResourceManager",
                        sig.command_name()
                    );
                    tracing::info!("Container {id} not running, nothing to signal.");
                }
                SignalTarget::Unknown(id) => {
                    tracing::info!("Container {id} no longer exists");
                }
                SignalTarget::BadCommand(id, n) => {
                    tracing::warn!(
                        "ignore signal command {n} for {id}: not a SignalContainerCommand"
                    );
                }
            }
        }
    }
    if orders.updates + orders.decreases > 0 {
        m.containers_to_update
            .fetch_add(u64::from(orders.updates + orders.decreases), Relaxed);
        for u in r.containers_to_update().flatten() {
            let (mem, vcores) = u
                .resource
                .map_or((-1, -1), |r| (r.memory_mb, i64::from(r.vcores)));
            tracing::warn!(
                "Unable to update container {}: containers_to_update (memory {mem} MB, vcores {vcores}, execution type {:?}, version {:?}) is not applied by this NodeManager; the container keeps its size",
                u.container,
                u.execution_type,
                u.version
            );
        }
        if orders.decreases > 0 {
            // Field 12 repeats the DECREASE entries of field 17 (Java's NM ignores it).
            for u in r.containers_to_decrease().flatten() {
                tracing::debug!(
                    "containers_to_decrease names {} (ignored, as Java's NodeManager does)",
                    u.container
                );
            }
        }
    }
}
