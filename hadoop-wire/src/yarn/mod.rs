//! YARN's protocol nouns: the names, numbers and ids both ends of a YARN protocol agree on.
//!
//! - [`ids`]: application and container ids ([`ids::AppId`], [`ids::ContainerId`]) with
//!   Java's string forms, read from the views and written with [`crate::writer::Encode`].
//!   `rm-core` keys its node state with them, `nm-core` its container table.
//! - [`exit_status`]: Java's `ContainerExitStatus` values.
//! - The constants below: the ResourceTracker, ContainerManagement, ApplicationClient and
//!   ApplicationMaster protocols as the RPC layer names them (with [`cmp`], [`acp`] and [`amp`]
//!   for their methods), and the Hadoop version our daemons report.
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

/// `ApplicationClientProtocolPB`'s protocol name (`declaringClassProtocolName`, and the
/// connection context's `protocol`), from its `@ProtocolInfo` in the 3.5.0 jar.
pub const APPLICATION_CLIENT_PROTOCOL: &str =
    "org.apache.hadoop.yarn.api.ApplicationClientProtocolPB";
/// `ApplicationClientProtocolPB`'s protocol version.
pub const APPLICATION_CLIENT_VERSION: u64 = 1;

/// ApplicationClientProtocol's methods (client → RM), in the order of Hadoop 3.5's service
/// descriptor. The RPC's `methodName` is the proto `rpc` name, which is also the Java method's.
pub mod acp {
    /// `GetNewApplicationRequestProto` → `…ResponseProto`.
    pub const GET_NEW_APPLICATION: &str = "getNewApplication";
    /// `GetApplicationReportRequestProto` → `…ResponseProto`.
    pub const GET_APPLICATION_REPORT: &str = "getApplicationReport";
    /// `SubmitApplicationRequestProto` → `…ResponseProto`.
    pub const SUBMIT_APPLICATION: &str = "submitApplication";
    /// `FailApplicationAttemptRequestProto` → `…ResponseProto`.
    pub const FAIL_APPLICATION_ATTEMPT: &str = "failApplicationAttempt";
    /// `KillApplicationRequestProto` → `…ResponseProto`; what `YarnClient.killApplication` sends.
    pub const FORCE_KILL_APPLICATION: &str = "forceKillApplication";
    /// `GetClusterMetricsRequestProto` → `…ResponseProto`.
    pub const GET_CLUSTER_METRICS: &str = "getClusterMetrics";
    /// `GetApplicationsRequestProto` → `…ResponseProto`.
    pub const GET_APPLICATIONS: &str = "getApplications";
    /// `GetClusterNodesRequestProto` → `…ResponseProto`.
    pub const GET_CLUSTER_NODES: &str = "getClusterNodes";
    /// `GetQueueInfoRequestProto` → `…ResponseProto`.
    pub const GET_QUEUE_INFO: &str = "getQueueInfo";
    /// `GetQueueUserAclsInfoRequestProto` → `…ResponseProto`.
    pub const GET_QUEUE_USER_ACLS: &str = "getQueueUserAcls";
    /// `hadoop.common.GetDelegationTokenRequestProto` → `…ResponseProto`.
    pub const GET_DELEGATION_TOKEN: &str = "getDelegationToken";
    /// `hadoop.common.RenewDelegationTokenRequestProto` → `…ResponseProto`.
    pub const RENEW_DELEGATION_TOKEN: &str = "renewDelegationToken";
    /// `hadoop.common.CancelDelegationTokenRequestProto` → `…ResponseProto`.
    pub const CANCEL_DELEGATION_TOKEN: &str = "cancelDelegationToken";
    /// `MoveApplicationAcrossQueuesRequestProto` → `…ResponseProto`.
    pub const MOVE_APPLICATION_ACROSS_QUEUES: &str = "moveApplicationAcrossQueues";
    /// `GetApplicationAttemptReportRequestProto` → `…ResponseProto`.
    pub const GET_APPLICATION_ATTEMPT_REPORT: &str = "getApplicationAttemptReport";
    /// `GetApplicationAttemptsRequestProto` → `…ResponseProto`.
    pub const GET_APPLICATION_ATTEMPTS: &str = "getApplicationAttempts";
    /// `GetContainerReportRequestProto` → `…ResponseProto`.
    pub const GET_CONTAINER_REPORT: &str = "getContainerReport";
    /// `GetContainersRequestProto` → `…ResponseProto`.
    pub const GET_CONTAINERS: &str = "getContainers";
    /// `GetNewReservationRequestProto` → `…ResponseProto`.
    pub const GET_NEW_RESERVATION: &str = "getNewReservation";
    /// `ReservationSubmissionRequestProto` → `…ResponseProto`.
    pub const SUBMIT_RESERVATION: &str = "submitReservation";
    /// `ReservationUpdateRequestProto` → `…ResponseProto`.
    pub const UPDATE_RESERVATION: &str = "updateReservation";
    /// `ReservationDeleteRequestProto` → `…ResponseProto`.
    pub const DELETE_RESERVATION: &str = "deleteReservation";
    /// `ReservationListRequestProto` → `…ResponseProto`.
    pub const LIST_RESERVATIONS: &str = "listReservations";
    /// `GetNodesToLabelsRequestProto` → `…ResponseProto`.
    pub const GET_NODE_TO_LABELS: &str = "getNodeToLabels";
    /// `GetLabelsToNodesRequestProto` → `…ResponseProto`.
    pub const GET_LABELS_TO_NODES: &str = "getLabelsToNodes";
    /// `GetClusterNodeLabelsRequestProto` → `…ResponseProto`.
    pub const GET_CLUSTER_NODE_LABELS: &str = "getClusterNodeLabels";
    /// `UpdateApplicationPriorityRequestProto` → `…ResponseProto`.
    pub const UPDATE_APPLICATION_PRIORITY: &str = "updateApplicationPriority";
    /// `SignalContainerRequestProto` → `…ResponseProto`.
    pub const SIGNAL_TO_CONTAINER: &str = "signalToContainer";
    /// `UpdateApplicationTimeoutsRequestProto` → `…ResponseProto`.
    pub const UPDATE_APPLICATION_TIMEOUTS: &str = "updateApplicationTimeouts";
    /// `GetAllResourceProfilesRequestProto` → `…ResponseProto`.
    pub const GET_RESOURCE_PROFILES: &str = "getResourceProfiles";
    /// `GetResourceProfileRequestProto` → `…ResponseProto`.
    pub const GET_RESOURCE_PROFILE: &str = "getResourceProfile";
    /// `GetAllResourceTypeInfoRequestProto` → `…ResponseProto`.
    pub const GET_RESOURCE_TYPE_INFO: &str = "getResourceTypeInfo";
    /// `GetClusterNodeAttributesRequestProto` → `…ResponseProto`.
    pub const GET_CLUSTER_NODE_ATTRIBUTES: &str = "getClusterNodeAttributes";
    /// `GetAttributesToNodesRequestProto` → `…ResponseProto`.
    pub const GET_ATTRIBUTES_TO_NODES: &str = "getAttributesToNodes";
    /// `GetNodesToAttributesRequestProto` → `…ResponseProto`.
    pub const GET_NODES_TO_ATTRIBUTES: &str = "getNodesToAttributes";

    /// Every method, served or not.
    pub const ALL: [&str; 35] = [
        GET_NEW_APPLICATION,
        GET_APPLICATION_REPORT,
        SUBMIT_APPLICATION,
        FAIL_APPLICATION_ATTEMPT,
        FORCE_KILL_APPLICATION,
        GET_CLUSTER_METRICS,
        GET_APPLICATIONS,
        GET_CLUSTER_NODES,
        GET_QUEUE_INFO,
        GET_QUEUE_USER_ACLS,
        GET_DELEGATION_TOKEN,
        RENEW_DELEGATION_TOKEN,
        CANCEL_DELEGATION_TOKEN,
        MOVE_APPLICATION_ACROSS_QUEUES,
        GET_APPLICATION_ATTEMPT_REPORT,
        GET_APPLICATION_ATTEMPTS,
        GET_CONTAINER_REPORT,
        GET_CONTAINERS,
        GET_NEW_RESERVATION,
        SUBMIT_RESERVATION,
        UPDATE_RESERVATION,
        DELETE_RESERVATION,
        LIST_RESERVATIONS,
        GET_NODE_TO_LABELS,
        GET_LABELS_TO_NODES,
        GET_CLUSTER_NODE_LABELS,
        UPDATE_APPLICATION_PRIORITY,
        SIGNAL_TO_CONTAINER,
        UPDATE_APPLICATION_TIMEOUTS,
        GET_RESOURCE_PROFILES,
        GET_RESOURCE_PROFILE,
        GET_RESOURCE_TYPE_INFO,
        GET_CLUSTER_NODE_ATTRIBUTES,
        GET_ATTRIBUTES_TO_NODES,
        GET_NODES_TO_ATTRIBUTES,
    ];
}

/// `ApplicationMasterProtocolPB`'s protocol name (`declaringClassProtocolName`, and the
/// connection context's `protocol`), from its `@ProtocolInfo` in the 3.5.0 jar.
pub const APPLICATION_MASTER_PROTOCOL: &str =
    "org.apache.hadoop.yarn.api.ApplicationMasterProtocolPB";
/// `ApplicationMasterProtocolPB`'s protocol version.
pub const APPLICATION_MASTER_VERSION: u64 = 1;

/// ApplicationMasterProtocol's methods (AM → RM), in the order of the service descriptor.
pub mod amp {
    /// `RegisterApplicationMasterRequestProto` → `…ResponseProto`.
    pub const REGISTER_APPLICATION_MASTER: &str = "registerApplicationMaster";
    /// `FinishApplicationMasterRequestProto` → `…ResponseProto`.
    pub const FINISH_APPLICATION_MASTER: &str = "finishApplicationMaster";
    /// `AllocateRequestProto` → `AllocateResponseProto`: the AM's heartbeat.
    pub const ALLOCATE: &str = "allocate";

    /// Every method.
    pub const ALL: [&str; 3] = [
        REGISTER_APPLICATION_MASTER,
        FINISH_APPLICATION_MASTER,
        ALLOCATE,
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
