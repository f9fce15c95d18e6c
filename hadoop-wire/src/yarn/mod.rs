//! YARN's protocol nouns: the names, numbers and ids both ends of a YARN protocol agree on.
//!
//! - [`ids`]: application and container ids ([`ids::AppId`], [`ids::ContainerId`]) with
//!   Java's string forms, read from the views and written with [`crate::writer::Encode`].
//!   `rm-core` keys its node state with them, `nm-core` its container table.
//! - [`exit_status`]: Java's `ContainerExitStatus` values.
//! - The constants below: the ResourceTracker protocol as the RPC layer names it, and the
//!   Hadoop version our daemons report.
//!
//! Each constant lives here once; the RM side (`rm-core`), the NM side (`nm-core`) and the load
//! generator use these rather than their own copies, so a protocol name or a version cannot
//! drift between the two ends.

pub mod ids;

/// `ResourceTrackerPB`'s protocol name, as the RPC `RequestHeaderProto` carries it
/// (`declaringClassProtocolName`).
pub const RESOURCE_TRACKER_PROTOCOL: &str = "org.apache.hadoop.yarn.server.api.ResourceTrackerPB";
/// `ResourceTrackerPB`'s protocol version (`clientProtocolVersion`).
pub const RESOURCE_TRACKER_VERSION: u64 = 1;
/// ResourceTracker method: `RegisterNodeManagerRequestProto` → `…ResponseProto`.
pub const REGISTER_NODE_MANAGER: &str = "registerNodeManager";
/// ResourceTracker method: `NodeHeartbeatRequestProto` → `…ResponseProto`.
pub const NODE_HEARTBEAT: &str = "nodeHeartbeat";
/// ResourceTracker method: `UnRegisterNodeManagerRequestProto` → `…ResponseProto`.
pub const UNREGISTER_NODE_MANAGER: &str = "unRegisterNodeManager";

/// `ContainerManagementProtocolPB`'s protocol name (`declaringClassProtocolName`, and the
/// connection context's `protocol`).
pub const CONTAINER_MANAGEMENT_PROTOCOL: &str =
    "org.apache.hadoop.yarn.api.ContainerManagementProtocolPB";
/// `ContainerManagementProtocolPB`'s protocol version.
pub const CONTAINER_MANAGEMENT_VERSION: u64 = 1;

/// ContainerManagementProtocol's methods, in the order of the service descriptor.
pub mod cmp {
    /// `StartContainersRequestProto` → `StartContainersResponseProto`.
    pub const START_CONTAINERS: &str = "startContainers";
    /// `StopContainersRequestProto` → `StopContainersResponseProto`.
    pub const STOP_CONTAINERS: &str = "stopContainers";
    /// `GetContainerStatusesRequestProto` → `GetContainerStatusesResponseProto`.
    pub const GET_CONTAINER_STATUSES: &str = "getContainerStatuses";
    /// Deprecated; Java forwards it to `updateContainer`.
    pub const INCREASE_CONTAINERS_RESOURCE: &str = "increaseContainersResource";
    /// `ContainerUpdateRequestProto` → `ContainerUpdateResponseProto`.
    pub const UPDATE_CONTAINER: &str = "updateContainer";
    /// `SignalContainerRequestProto` → `SignalContainerResponseProto`.
    pub const SIGNAL_TO_CONTAINER: &str = "signalToContainer";
    /// `ResourceLocalizationRequestProto` → `ResourceLocalizationResponseProto`.
    pub const LOCALIZE: &str = "localize";
    /// `ReInitializeContainerRequestProto` → `ReInitializeContainerResponseProto`.
    pub const RE_INITIALIZE_CONTAINER: &str = "reInitializeContainer";
    /// `ContainerIdProto` → `RestartContainerResponseProto`.
    pub const RESTART_CONTAINER: &str = "restartContainer";
    /// `ContainerIdProto` → `RollbackResponseProto`.
    pub const ROLLBACK_LAST_RE_INITIALIZATION: &str = "rollbackLastReInitialization";
    /// `ContainerIdProto` → `CommitResponseProto`.
    pub const COMMIT_LAST_RE_INITIALIZATION: &str = "commitLastReInitialization";
    /// `GetLocalizationStatusesRequestProto` → `GetLocalizationStatusesResponseProto`.
    pub const GET_LOCALIZATION_STATUSES: &str = "getLocalizationStatuses";

    /// Every method, served or not.
    pub const ALL: [&str; 12] = [
        START_CONTAINERS,
        STOP_CONTAINERS,
        GET_CONTAINER_STATUSES,
        INCREASE_CONTAINERS_RESOURCE,
        UPDATE_CONTAINER,
        SIGNAL_TO_CONTAINER,
        LOCALIZE,
        RE_INITIALIZE_CONTAINER,
        RESTART_CONTAINER,
        ROLLBACK_LAST_RE_INITIALIZATION,
        COMMIT_LAST_RE_INITIALIZATION,
        GET_LOCALIZATION_STATUSES,
    ];
}

/// Java exception classes a YARN client can load (`Class.forName`) when it deserializes an
/// error: RPC errors name them in `exceptionClassName`, per-container failures in
/// `SerializedExceptionProto.class_name`.
pub mod exception {
    /// `org.apache.hadoop.yarn.exceptions.YarnException`.
    pub const YARN: &str = "org.apache.hadoop.yarn.exceptions.YarnException";
    /// `org.apache.hadoop.yarn.exceptions.InvalidContainerException`.
    pub const INVALID_CONTAINER: &str =
        "org.apache.hadoop.yarn.exceptions.InvalidContainerException";
    /// `org.apache.hadoop.yarn.exceptions.InvalidAuxServiceException`.
    pub const INVALID_AUX_SERVICE: &str =
        "org.apache.hadoop.yarn.exceptions.InvalidAuxServiceException";
    /// `org.apache.hadoop.yarn.exceptions.NMNotYetReadyException`.
    pub const NM_NOT_YET_READY: &str = "org.apache.hadoop.yarn.exceptions.NMNotYetReadyException";
    /// `SecretManager.InvalidToken` as the RPC layer names it (`Class.getName`).
    pub const INVALID_TOKEN: &str = "org.apache.hadoop.security.token.SecretManager$InvalidToken";
}

/// The Hadoop version our RM and NM report (`rm_version`, `nm_version`): the line they speak,
/// and the version of the Java peer the tests run against.
pub const HADOOP_VERSION: &str = "3.5.0";

/// Java's `ContainerExitStatus`: the exit statuses YARN itself assigns (a process's own exit
/// code is reported as is).
pub mod exit_status {
    /// `SUCCESS`.
    pub const SUCCESS: i32 = 0;
    /// `INVALID`: no exit status yet; also the default of `ContainerStatusProto.exit_status`.
    pub const INVALID: i32 = -1000;
    /// `ABORTED`: the container was released or killed without an exit code.
    pub const ABORTED: i32 = -100;
    /// `DISKS_FAILED`: the node's disks went bad.
    pub const DISKS_FAILED: i32 = -101;
    /// `PREEMPTED`.
    pub const PREEMPTED: i32 = -102;
    /// `KILLED_EXCEEDED_VMEM`: over its virtual-memory limit.
    pub const KILLED_EXCEEDED_VMEM: i32 = -103;
    /// `KILLED_EXCEEDED_PMEM`: over its physical-memory limit.
    pub const KILLED_EXCEEDED_PMEM: i32 = -104;
    /// `KILLED_BY_APPMASTER`: `stopContainers` from the ApplicationMaster.
    pub const KILLED_BY_APPMASTER: i32 = -105;
    /// `KILLED_BY_RESOURCEMANAGER`: the RM named it in `containers_to_cleanup`.
    pub const KILLED_BY_RESOURCEMANAGER: i32 = -106;
    /// `KILLED_AFTER_APP_COMPLETION`: its application finished (`applications_to_cleanup`).
    pub const KILLED_AFTER_APP_COMPLETION: i32 = -107;
    /// Java's `ContainerExecutor.ExitCode.FORCE_KILLED` (SIGKILL).
    pub const FORCE_KILLED: i32 = 137;
    /// Java's `ContainerExecutor.ExitCode.TERMINATED` (SIGTERM).
    pub const TERMINATED: i32 = 143;
    /// Java's `ContainerExecutor.ExitCode.LOST`.
    pub const LOST: i32 = 154;
}

#[cfg(test)]
mod tests {
    use super::exit_status;
    use crate::pb::hadoop::yarn::ContainerExitStatusProto as P;

    #[test]
    fn exit_statuses_match_the_proto_enum() {
        assert_eq!(exit_status::SUCCESS, P::Success as i32);
        assert_eq!(exit_status::INVALID, P::Invalid as i32);
        assert_eq!(exit_status::ABORTED, P::Aborted as i32);
        assert_eq!(exit_status::DISKS_FAILED, P::DisksFailed as i32);
    }
}
