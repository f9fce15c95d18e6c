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
    /// `KILLED_BY_RESOURCEMANAGER`: the RM named it in `containers_to_cleanup`.
    pub const KILLED_BY_RESOURCEMANAGER: i32 = -106;
    /// `KILLED_AFTER_APP_COMPLETION`: its application finished (`applications_to_cleanup`).
    pub const KILLED_AFTER_APP_COMPLETION: i32 = -107;
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
