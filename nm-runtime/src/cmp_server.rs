//! The ContainerManagementProtocol server: ContainerManagementProtocolPB on the node address (`yarn.nodemanager.address`, the port
//! registered as the NodeId): the IPC handlers around [`nm_core::container_manager`].
//!
//! The server is TOKEN-only, as Java's NodeManager forces it even on SIMPLE clusters: a SIMPLE
//! client is refused at connection time ("SIMPLE authentication is not enabled"), a SASL client
//! authenticates with its NMToken (DIGEST-MD5 against the node's `NmTokenSecretManager`, the
//! same one the container manager uses). Each handler decodes its request (prost: these calls
//! are few and carry launch contexts, nothing hot), takes the container manager and then the
//! table (always in that order), and answers; accepted starts, kills and signals go to the
//! launcher thread over its channel, so no handler waits for a process or a download.
//!
//! Served: `startContainers`, `stopContainers`, `getContainerStatuses`, `signalToContainer`.
//! The other eight methods answer at once with a `YarnException` naming the method.

use std::sync::{Arc, OnceLock};

use hadoop_wire::pb::hadoop::yarn::{
    GetContainerStatusesRequestProto, SignalContainerRequestProto, SignalContainerResponseProto,
    StartContainersRequestProto, StopContainersRequestProto,
};
use hadoop_wire::yarn::{
    cmp, exception, CONTAINER_MANAGEMENT_PROTOCOL, CONTAINER_MANAGEMENT_VERSION,
};
use ipc::server::{Call, CallError, Registry, Reply};
use nm_core::container_manager::CallFailure;

use crate::launcher::{LaunchCommand, LaunchStamps, LauncherHandle};
use crate::shared::{lock, Shared};
use crate::sys::wall_ms;

fn failure(f: CallFailure) -> CallError {
    CallError::application(f.class, f.message)
}

fn starting() -> CallError {
    CallError::application(
        exception::NM_NOT_YET_READY,
        "Rejecting new containers as NodeManager has not yet connected with ResourceManager",
    )
}

fn decode<M: prost::Message + Default>(call: &Call<'_>) -> Result<M, CallError> {
    M::decode(call.request).map_err(CallError::invalid_request)
}

fn shared_of(slot: &OnceLock<Arc<Shared>>) -> Result<&Arc<Shared>, CallError> {
    slot.get().ok_or_else(starting)
}

fn answer<M: prost::Message>(reply: &mut Reply<'_, '_>, m: &M) -> Result<(), CallError> {
    reply.message(m)?;
    Ok(())
}

/// Registers the ContainerManagementProtocol handlers. With `shuffle_jobs` (the
/// `mapreduce_shuffle` service runs), an accepted start's `service_data["mapreduce_shuffle"]`
/// registers its job before the answer goes out (Java does it at the container's init).
pub fn register(
    reg: &mut Registry,
    slot: Arc<OnceLock<Arc<Shared>>>,
    launcher: LauncherHandle,
    shuffle_jobs: Option<crate::shuffle::Jobs>,
    token_store: Option<Arc<std::sync::Mutex<crate::token_store::TokenStore>>>,
) {
    let (s, l) = (slot.clone(), launcher.clone());
    reg.register(
        CONTAINER_MANAGEMENT_PROTOCOL,
        CONTAINER_MANAGEMENT_VERSION,
        cmp::START_CONTAINERS,
        move |call: &Call<'_>, reply: &mut Reply<'_, '_>| {
            let stamps = LaunchStamps::now();
            let shared = shared_of(&s)?;
            let req: StartContainersRequestProto = decode(call)?;
            let outcome = {
                let mut cm = lock(&shared.cm);
                if !cm.has_keys() {
                    return Err(starting());
                }
                let mut table = lock(&shared.table);
                cm.start_containers(call.token_identifier, call.user, req, wall_ms(), &mut table)
                    .map_err(failure)?
            };
            let stamps = stamps.accept();
            // NM recovery: each accepted start is stored before it is answered (Java's
            // storeContainerToken), so a restarted agent refuses its replay.
            if let Some(store) = &token_store {
                let mut store = lock(store);
                let now = wall_ms();
                for order in &outcome.launches {
                    if let Err(e) = store.started(&order.id, order.token_expiry_ms, now) {
                        tracing::error!(
                            "storing the started token of {} in {}: {e}",
                            order.id,
                            store.path().display()
                        );
                    }
                }
            }
            if let Some(jobs) = &shuffle_jobs {
                for order in &outcome.launches {
                    for sd in &order.context.service_data {
                        if sd.key.as_deref() != Some(crate::shuffle::SERVICE_ID) {
                            continue;
                        }
                        let data = sd.value.as_deref().unwrap_or(&[]);
                        // Java logs a bad token and starts the container; its fetches get 401.
                        if let Err(e) = jobs.register(&order.user, order.id.app, data) {
                            tracing::error!("Error during initApp: {e}");
                        }
                    }
                }
            }
            for order in outcome.launches {
                l.send(LaunchCommand::Launch(Box::new(order), stamps));
            }
            answer(reply, &outcome.response)
        },
    );
    let (s, l) = (slot.clone(), launcher.clone());
    reg.register(
        CONTAINER_MANAGEMENT_PROTOCOL,
        CONTAINER_MANAGEMENT_VERSION,
        cmp::STOP_CONTAINERS,
        move |call: &Call<'_>, reply: &mut Reply<'_, '_>| {
            let shared = shared_of(&s)?;
            let req: StopContainersRequestProto = decode(call)?;
            let outcome = {
                let mut cm = lock(&shared.cm);
                let mut table = lock(&shared.table);
                cm.stop_containers(call.token_identifier, &req, wall_ms(), &mut table)
                    .map_err(failure)?
            };
            for (id, reason) in outcome.kills {
                l.send(LaunchCommand::Kill(id, reason));
            }
            answer(reply, &outcome.response)
        },
    );
    let s = slot.clone();
    reg.register(
        CONTAINER_MANAGEMENT_PROTOCOL,
        CONTAINER_MANAGEMENT_VERSION,
        cmp::GET_CONTAINER_STATUSES,
        move |call: &Call<'_>, reply: &mut Reply<'_, '_>| {
            let shared = shared_of(&s)?;
            let req: GetContainerStatusesRequestProto = decode(call)?;
            let resp = {
                let cm = lock(&shared.cm);
                let table = lock(&shared.table);
                cm.get_statuses(call.token_identifier, &req, wall_ms(), &table)
                    .map_err(failure)?
            };
            answer(reply, &resp)
        },
    );
    let (s, l) = (slot, launcher);
    reg.register(
        CONTAINER_MANAGEMENT_PROTOCOL,
        CONTAINER_MANAGEMENT_VERSION,
        cmp::SIGNAL_TO_CONTAINER,
        move |call: &Call<'_>, reply: &mut Reply<'_, '_>| {
            let shared = shared_of(&s)?;
            let req: SignalContainerRequestProto = decode(call)?;
            // Safer than Java: only the container's own application may signal it.
            nm_core::container_manager::ContainerManager::authorize_signal(
                call.token_identifier,
                &req,
            )
            .map_err(failure)?;
            let sig = lock(&shared.cm).signal(&req);
            match sig {
                Some((id, sig)) => l.send(LaunchCommand::Signal(id, sig)),
                None => tracing::info!(
                    "signalToContainer for a container that is not running here; ignored"
                ),
            }
            answer(reply, &SignalContainerResponseProto {})
        },
    );
    for method in cmp::ALL {
        if [
            cmp::START_CONTAINERS,
            cmp::STOP_CONTAINERS,
            cmp::GET_CONTAINER_STATUSES,
            cmp::SIGNAL_TO_CONTAINER,
        ]
        .contains(&method)
        {
            continue;
        }
        reg.register(
            CONTAINER_MANAGEMENT_PROTOCOL,
            CONTAINER_MANAGEMENT_VERSION,
            method,
            move |_call: &Call<'_>, _reply: &mut Reply<'_, '_>| {
                Err(CallError::application(
                    exception::YARN,
                    format!(
                        "{method} is not supported by this NodeManager (hotpath agent): it serves startContainers, stopContainers, getContainerStatuses and signalToContainer"
                    ),
                ))
            },
        );
    }
}
