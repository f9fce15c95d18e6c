//! `nm-core`: the NodeManager without its sockets and processes. The ResourceTracker half (the
//! mirror of `rm-core`: what Java's `NodeStatusUpdaterImpl`, its container context and
//! `NodeHealthCheckerService` do for the RM connection) and the ContainerManagementProtocol
//! half (`ContainerManagerImpl`'s checks, the container lifecycle, launch and localization
//! rules). The NodeManager runtime (`nm-runtime`, run by `hotpath agent`) drives the first on
//! its ring thread and the second in its IPC handlers and launcher; the tests run both against
//! `rm-core` in memory.
//!
//! How the types connect:
//!
//! ```text
//!  startContainers / stopContainers / getContainerStatuses (NMToken, container token)
//!        │  container_manager::ContainerManager ── token::secret (NMToken, container token)
//!        │    accepted start → LaunchOrder ──> nm-runtime's launcher: localization rules,
//!        │    launch paths/env/scripts, recovery records; exits come back as statuses
//!        v
//!  launch / run / complete (the agent's control socket, --simulate, tests)
//!        │                                   ▲ CleanupOrder (containers_to_cleanup,
//!        v                                   │   applications_to_cleanup)
//!  table::ContainerTable ── Container{ids::ContainerId, state, Delivery, …}
//!        │ statuses to send / delivered, acknowledged, forgotten
//!        v
//!  status_updater::StatusUpdater          health::HealthChecker ──> wire::NodeHealth
//!   Unregistered → Registered → Stopped       (local dirs, health script)      │
//!        │ encode_register (prost, cold)                                        │
//!        │ heartbeat_request ── wire::put_heartbeat (writer::Encode, reused buffer) ◀┘
//!        v bytes                                   ▲ bytes
//!   the caller's RPC (ipc::client in nm-runtime;   │ on_register_response (prost, cold)
//!   rm-core's ResourceTracker in the tests)   ─────┘ on_heartbeat_response
//!                                                    (wire::HeartbeatResponse over the views)
//! ```
//!
//! - [`ids`]: YARN's application and container ids (`hadoop_wire::yarn::ids`, shared with the
//!   RM), the keys of the container table.
//! - [`table`]: the container table and the completion delivery rules (trap 1 of the wire
//!   notes): pending → in flight → delivered → forgotten, and the cleanup orders.
//! - [`wire`]: heartbeat requests written into a reused buffer with the one protobuf writer,
//!   responses read in place with `hadoop_wire::view`; nothing there allocates.
//! - [`status_updater`]: the protocol logic (registration, responseId, master-key echo, resend
//!   of an unanswered heartbeat byte for byte, RESYNC, SHUTDOWN). No I/O and no clock: the
//!   caller passes bytes and the time.
//! - [`container_manager`]: ContainerManagementProtocol's checks in Java's order and each
//!   managed container's stage (starting, launched, done), kill reasons, the recently-stopped
//!   cache; the table is its "context".
//! - [`rm_failover`]: RM HA from the node's side: round-robin over the rm-ids and Java's
//!   failover retry arithmetic (with the agent's faster default sleeps).
//! - [`recovery`]: the per-container record a restarted agent recovers its containers from.
//! - [`launch`]: container launch as Java's `DefaultContainerExecutor` lays it out (paths,
//!   command and env expansion, environment order, `launch_container.sh`, the pid/exit-code
//!   wrapper scripts, exit statuses); pure, `nm-runtime`'s executor does the I/O.
//! - [`disks`]: the local and log dirs' health rules (Java's `DirectoryCollection` and
//!   `LocalDirsHandlerService`): full/errored dirs, watermarks, the report text; the file
//!   system is asked through a probe.
//! - [`health`]: the node's health as Java judges it (the dirs, the health script); the one
//!   part that touches the system (a child process, the probe), and never blocks.
//! - [`localization`]: the rules of resource localization (requests parsed from the launch
//!   context, cache keys, cache directories, unpacking, permissions, Java's failure messages);
//!   no I/O: `nm-runtime` does the downloads.
//!
//! Errors: [`wire::WireError`] (a response we cannot read) inside
//! [`status_updater::UpdaterError`] (what the updater refuses); [`Error`] unites them with
//! [`ids::IdParseError`] for callers that handle all three.
//!
//! The protocol's names (`ResourceTrackerPB`, its methods and version) and the version we
//! report are in `hadoop_wire::yarn`, shared with `rm-core`.

#![forbid(unsafe_code)]

pub mod container_manager;
pub mod disks;
pub mod health;
pub mod launch;
pub mod localization;
pub mod recovery;
pub mod rm_failover;
pub mod status_updater;
pub mod table;
pub mod wire;

/// YARN's ids, shared with `rm-core` (one implementation, in `hadoop-wire`).
pub use hadoop_wire::yarn::ids;

/// Every error of this crate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Updater(#[from] status_updater::UpdaterError),
    #[error(transparent)]
    Wire(#[from] wire::WireError),
    #[error(transparent)]
    Id(#[from] ids::IdParseError),
}
