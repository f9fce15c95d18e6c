//! The defaults table: every key the project reads, with Hadoop's name, Hadoop's default
//! (from its `core-default.xml`, `hdfs-default.xml`, `yarn-default.xml`), the getter that
//! reads it, and what it is for. [`Configuration::get`](crate::Configuration::get) falls
//! back to this table when no site file and no flag set a key.
//!
//! Keys with `<…>` in their name are patterns (per nameservice / per NameNode) and keys with
//! [`DefaultValue::Unset`] have no default: they are listed so that the table documents
//! everything the project reads.

/// The Hadoop default file a key belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Site {
    Core,
    Hdfs,
    Yarn,
}

/// How a key's value is read (which typed getter applies).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Free text (`get`).
    Text,
    /// A URI (`get`; `get_socket_addr` for its authority).
    Uri,
    /// A non-negative integer (`get_u64`; plain digits or `0x` hex).
    Count,
    /// A size in bytes (`get_bytes`; suffixes k, m, g, t, p, e).
    Bytes,
    /// Milliseconds (`get_duration_ms`; suffixes ns, us, ms, s, m, h, d).
    Millis,
    /// Seconds (`get_duration(key, TimeUnit::Seconds)`; same suffixes).
    Seconds,
    /// `true`/`false` (`get_bool`).
    Bool,
    /// `host:port` (`get_socket_addr(key, port)`); the number is the default port.
    Address(u16),
    /// A comma list (`get_trimmed_strings`).
    List,
}

/// A key's default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DefaultValue {
    /// This text, subject to `${…}` expansion like any value.
    Literal(&'static str),
    /// This many times the effective `dfs.blocksize` (in bytes).
    TimesBlocksize(u64),
    /// No default: absent unless configured.
    Unset,
}

/// One row of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Default {
    pub key: &'static str,
    pub value: DefaultValue,
    pub kind: Kind,
    pub site: Site,
    pub doc: &'static str,
}

use DefaultValue::{Literal, TimesBlocksize, Unset};
use Kind::*;

const fn d(
    site: Site,
    key: &'static str,
    value: DefaultValue,
    kind: Kind,
    doc: &'static str,
) -> Default {
    Default {
        key,
        value,
        kind,
        site,
        doc,
    }
}

/// The table, by site file.
pub const DEFAULTS: &[Default] = &[
    // ---------------------------------------------------------------- core-default.xml
    d(
        Site::Core,
        "fs.defaultFS",
        Literal("file:///"),
        Uri,
        "The default file system. For HDFS `hdfs://host:port` (one NameNode) or \
       `hdfs://nameservice` (HA, resolved through dfs.nameservices).",
    ),
    d(
        Site::Core,
        "hadoop.tmp.dir",
        Literal("/tmp/hadoop-${user.name}"),
        Text,
        "Base of other temporary directories; yarn.nodemanager.local-dirs defaults under it.",
    ),
    d(
        Site::Core,
        "hadoop.security.authentication",
        Literal("simple"),
        Text,
        "`simple` or `kerberos` (`token` forces TOKEN-only servers). hotpath speaks SIMPLE and \
       TOKEN (DIGEST-MD5); KERBEROS comes with GSSAPI.",
    ),
    d(
        Site::Core,
        "hadoop.rpc.protection",
        Literal("authentication"),
        Text,
        "Comma list of `authentication`, `integrity`, `privacy`: what a SASL server accepts and, \
       in order of preference, what a client asks for.",
    ),
    d(
        Site::Core,
        "hadoop.security.sasl.mechanism",
        Literal("DIGEST-MD5"),
        Text,
        "The SASL mechanism of TOKEN authentication (only DIGEST-MD5 is implemented).",
    ),
    d(
        Site::Core,
        "ipc.client.fallback-to-simple-auth-allowed",
        Literal("false"),
        Bool,
        "Whether a secure client may follow a server that answers SASL with SIMPLE.",
    ),
    d(
        Site::Core,
        "ipc.maximum.data.length",
        Literal("134217728"),
        Bytes,
        "Largest IPC frame a server accepts (128 MiB): the cap of our frame decoder, \
       checked before any allocation.",
    ),
    d(
        Site::Core,
        "ipc.client.connection.maxidletime",
        Literal("10000"),
        Millis,
        "The IPC client closes a connection idle this long.",
    ),
    d(
        Site::Core,
        "ipc.ping.interval",
        Literal("60000"),
        Millis,
        "The IPC client sends a ping (callId -4) after this long without a response.",
    ),
    d(
        Site::Core,
        "ipc.client.connect.timeout",
        Literal("20000"),
        Millis,
        "TCP connect timeout of the IPC client.",
    ),
    d(
        Site::Core,
        "ipc.client.connect.max.retries",
        Literal("10"),
        Count,
        "Connect attempts of the IPC client before it gives up (timeouts not counted).",
    ),
    d(
        Site::Core,
        "net.topology.node.switch.mapping.impl",
        Literal("org.apache.hadoop.net.ScriptBasedMapping"),
        Text,
        "Rack resolver class; `org.apache.hadoop.net.TableMapping` reads \
       net.topology.table.file.name.",
    ),
    d(
        Site::Core,
        "net.topology.table.file.name",
        Unset,
        Text,
        "Rack table for TableMapping: one `host rack` pair per line. Unset: every host is \
       in /default-rack.",
    ),
    d(
        Site::Core,
        "net.topology.script.file.name",
        Unset,
        Text,
        "Rack script for ScriptBasedMapping. Unset: every host is in /default-rack.",
    ),
    // ---------------------------------------------------------------- hdfs-default.xml
    d(
        Site::Hdfs,
        "dfs.nameservices",
        Unset,
        List,
        "Logical names of HA nameservices (the authority of `hdfs://nameservice`).",
    ),
    d(
        Site::Hdfs,
        "dfs.ha.namenodes.<nameservice>",
        Unset,
        List,
        "NameNode ids of one nameservice, e.g. `nn1,nn2`.",
    ),
    d(
        Site::Hdfs,
        "dfs.namenode.rpc-address",
        Unset,
        Address(8020),
        "RPC address of a single (non-HA) NameNode; default port 8020.",
    ),
    d(
        Site::Hdfs,
        "dfs.namenode.rpc-address.<nameservice>.<namenode>",
        Unset,
        Address(8020),
        "RPC address of one NameNode of a nameservice; default port 8020.",
    ),
    d(
        Site::Hdfs,
        "dfs.blocksize",
        Literal("134217728"),
        Bytes,
        "Default block size (128 MiB); size suffixes allowed (`128m`).",
    ),
    d(
        Site::Hdfs,
        "dfs.client.read.prefetch.size",
        TimesBlocksize(10),
        Bytes,
        "How many bytes of block locations the client asks the NameNode for at once: \
       10 × dfs.blocksize.",
    ),
    d(
        Site::Hdfs,
        "dfs.client.use.datanode.hostname",
        Literal("false"),
        Bool,
        "Connect to DataNodes by host name instead of the IP address the NameNode reports.",
    ),
    d(
        Site::Hdfs,
        "dfs.client.max.block.acquire.failures",
        Literal("3"),
        Count,
        "Times the client retries a block after every replica failed, before the read fails.",
    ),
    d(
        Site::Hdfs,
        "dfs.client.socketcache.capacity",
        Literal("16"),
        Count,
        "Idle DataNode connections the client keeps for reuse (0: none).",
    ),
    d(
        Site::Hdfs,
        "dfs.client.socketcache.expiryMsec",
        Literal("3000"),
        Millis,
        "How long the client keeps an idle DataNode connection.",
    ),
    d(
        Site::Hdfs,
        "dfs.client.retry.window.base",
        Literal("3000"),
        Millis,
        "Base of the randomised back-off between those retries (window grows per attempt).",
    ),
    d(
        Site::Hdfs,
        "dfs.client.socket-timeout",
        Literal("60000"),
        Millis,
        "Read timeout on DataNode connections.",
    ),
    d(
        Site::Hdfs,
        "dfs.bytes-per-checksum",
        Literal("512"),
        Bytes,
        "Bytes covered by one checksum in DataTransfer packets.",
    ),
    d(
        Site::Hdfs,
        "dfs.checksum.type",
        Literal("CRC32C"),
        Text,
        "Checksum algorithm: NULL, CRC32 or CRC32C.",
    ),
    // ---------------------------------------------------------------- yarn-default.xml
    d(
        Site::Yarn,
        "yarn.resourcemanager.hostname",
        Literal("0.0.0.0"),
        Text,
        "The RM host; the RM addresses below default to it.",
    ),
    d(
        Site::Yarn,
        "yarn.resourcemanager.resource-tracker.address",
        Literal("${yarn.resourcemanager.hostname}:8031"),
        Address(8031),
        "ResourceTracker (NodeManager registration and heartbeats): what the agent dials and \
       the rm host listens on.",
    ),
    d(
        Site::Yarn,
        "yarn.resourcemanager.address",
        Literal("${yarn.resourcemanager.hostname}:8032"),
        Address(8032),
        "ApplicationClientProtocol address.",
    ),
    d(
        Site::Yarn,
        "yarn.resourcemanager.scheduler.address",
        Literal("${yarn.resourcemanager.hostname}:8030"),
        Address(8030),
        "ApplicationMasterProtocol address (what an ApplicationMaster dials).",
    ),
    d(
        Site::Yarn,
        "yarn.resourcemanager.admin.address",
        Literal("${yarn.resourcemanager.hostname}:8033"),
        Address(8033),
        "Admin protocol address (refreshNodes and friends).",
    ),
    d(
        Site::Yarn,
        "yarn.resourcemanager.nodemanagers.heartbeat-interval-ms",
        Literal("1000"),
        Millis,
        "Heartbeat interval the RM hands to NodeManagers in every heartbeat response.",
    ),
    d(
        Site::Yarn,
        "yarn.resourcemanager.resource-tracker.client.thread-count",
        Literal("50"),
        Count,
        "Handler threads of the RM's ResourceTracker server.",
    ),
    d(
        Site::Yarn,
        "yarn.nm.liveness-monitor.expiry-interval-ms",
        Literal("600000"),
        Millis,
        "A NodeManager silent this long is declared LOST.",
    ),
    d(
        Site::Yarn,
        "yarn.resourcemanager.opportunistic-container-allocation.enabled",
        Literal("false"),
        Bool,
        "Opportunistic containers; only then does the RM read container capabilities from \
       heartbeats.",
    ),
    d(
        Site::Yarn,
        "yarn.resourcemanager.nodes.include-path",
        Literal(""),
        Text,
        "File of hosts allowed to register; empty: every host.",
    ),
    d(
        Site::Yarn,
        "yarn.resourcemanager.nodes.exclude-path",
        Literal(""),
        Text,
        "File of hosts refused (decommissioned); empty: none.",
    ),
    d(
        Site::Yarn,
        "yarn.resourcemanager.nodemanager.minimum.version",
        Literal("NONE"),
        Text,
        "Lowest NodeManager version allowed to register: NONE, EqualToRM, or a version.",
    ),
    d(
        Site::Yarn,
        "yarn.resourcemanager.container-tokens.master-key-rolling-interval-secs",
        Literal("86400"),
        Seconds,
        "Roll period of the container-token master key sent in heartbeat responses.",
    ),
    d(
        Site::Yarn,
        "yarn.resourcemanager.nm-tokens.master-key-rolling-interval-secs",
        Literal("86400"),
        Seconds,
        "Roll period of the NM-token master key.",
    ),
    d(
        Site::Yarn,
        "yarn.resourcemanager.am-rm-tokens.master-key-rolling-interval-secs",
        Literal("86400"),
        Seconds,
        "Roll period of the AMRM-token master key; must exceed 3 x the AM expiry.",
    ),
    d(
        Site::Yarn,
        "yarn.am.liveness-monitor.expiry-interval-ms",
        Literal("900000"),
        Millis,
        "An ApplicationMaster silent this long is expired (3.5.0: 15 minutes); 1.5 x this \
       delays the activation of a rolled AMRM-token key.",
    ),
    d(
        Site::Yarn,
        "yarn.resourcemanager.connect.max-wait.ms",
        Literal("900000"),
        Millis,
        "How long a NodeManager keeps trying to reach the RM before giving up.",
    ),
    d(
        Site::Yarn,
        "yarn.resourcemanager.connect.retry-interval.ms",
        Literal("30000"),
        Millis,
        "Pause between those attempts.",
    ),
    d(
        Site::Yarn,
        "yarn.scheduler.minimum-allocation-mb",
        Literal("1024"),
        Count,
        "Smallest container memory (MB) the scheduler grants.",
    ),
    d(
        Site::Yarn,
        "yarn.scheduler.minimum-allocation-vcores",
        Literal("1"),
        Count,
        "Smallest container vcores the scheduler grants.",
    ),
    d(
        Site::Yarn,
        "yarn.scheduler.maximum-allocation-mb",
        Literal("8192"),
        Count,
        "Largest container memory (MB).",
    ),
    d(
        Site::Yarn,
        "yarn.scheduler.maximum-allocation-vcores",
        Literal("4"),
        Count,
        "Largest container vcores.",
    ),
    d(
        Site::Yarn,
        "yarn.nodemanager.hostname",
        Literal("0.0.0.0"),
        Text,
        "The NodeManager's host; yarn.nodemanager.address defaults to it.",
    ),
    d(
        Site::Yarn,
        "yarn.nodemanager.address",
        Literal("${yarn.nodemanager.hostname}:0"),
        Address(0),
        "ContainerManager address; port 0 = ephemeral. Its host:port is the NodeId the agent \
       registers with.",
    ),
    d(
        Site::Yarn,
        "yarn.nodemanager.resource.memory-mb",
        Literal("8192"),
        Count,
        "Memory (MB) the node offers. Hadoop 3's file says -1 (= detect when \
       yarn.nodemanager.resource.detect-hardware-capabilities, else 8192); we use 8192.",
    ),
    d(
        Site::Yarn,
        "yarn.nodemanager.resource.cpu-vcores",
        Literal("8"),
        Count,
        "Vcores the node offers (same -1 note as memory-mb; we use 8).",
    ),
    d(
        Site::Yarn,
        "yarn.nodemanager.duration-to-track-stopped-containers",
        Literal("600000"),
        Millis,
        "How long the NM keeps reporting completed containers the RM has acknowledged.",
    ),
    d(
        Site::Yarn,
        "yarn.nodemanager.health-checker.script.path",
        Literal(""),
        Text,
        "Node health script; empty: none.",
    ),
    d(
        Site::Yarn,
        "yarn.nodemanager.health-checker.interval-ms",
        Literal("600000"),
        Millis,
        "How often the health script runs.",
    ),
    d(
        Site::Yarn,
        "yarn.nodemanager.local-dirs",
        Literal("${hadoop.tmp.dir}/nm-local-dir"),
        List,
        "Directories for container files (localized resources, work dirs).",
    ),
    d(
        Site::Yarn,
        "yarn.nodemanager.webapp.address",
        Literal("${yarn.nodemanager.hostname}:8042"),
        Address(8042),
        "The NodeManager's web address; the agent serves /metrics there and registers its port \
       as http_port.",
    ),
    d(
        Site::Yarn,
        "yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage",
        Literal("90.0"),
        Text,
        "A local dir fuller than this percentage (a decimal number) is unhealthy.",
    ),
    d(
        Site::Yarn,
        "yarn.nodemanager.disk-health-checker.min-free-space-per-disk-mb",
        Literal("0"),
        Count,
        "A local dir with less free space (MB) than this is unhealthy.",
    ),
    d(
        Site::Yarn,
        "yarn.nodemanager.disk-health-checker.interval-ms",
        Literal("120000"),
        Millis,
        "How often the local dirs are checked for space and writability.",
    ),
    d(
        Site::Yarn,
        "yarn.nodemanager.health-checker.script.timeout-ms",
        Literal("1200000"),
        Millis,
        "A health script running longer than this is killed and the node reported unhealthy.",
    ),
    d(
        Site::Yarn,
        "yarn.nodemanager.health-checker.script.opts",
        Unset,
        Text,
        "Arguments passed to the health script.",
    ),
];

/// The table row of `key`, if the key is in it (pattern rows never match).
pub fn lookup(key: &str) -> Option<&'static Default> {
    DEFAULTS.iter().find(|d| d.key == key)
}

/// The default port of an address key (`Kind::Address`), so that callers of
/// `get_socket_addr` take it from this table instead of repeating it.
pub fn default_port(key: &str) -> Option<u16> {
    match lookup(key)?.kind {
        Kind::Address(port) => Some(port),
        _ => None,
    }
}

/// The literal default of `key` (before `${…}` expansion), if it has one.
pub fn literal(key: &str) -> Option<&'static str> {
    match lookup(key)?.value {
        Literal(v) => Some(v),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn address_keys_take_their_port_from_the_table() {
        const RT: &str = "yarn.resourcemanager.resource-tracker.address";
        assert_eq!(default_port(RT), Some(8031));
        assert_eq!(default_port("yarn.resourcemanager.hostname"), None);
        let mut c = crate::Configuration::new();
        c.set(RT, "rm1");
        let a = c.get_address(RT).unwrap();
        assert_eq!((a.host.as_str(), a.port), ("rm1", 8031));
        assert!(c.get_address("yarn.resourcemanager.hostname").is_err());
    }

    #[test]
    fn table_is_well_formed() {
        let mut seen = BTreeSet::new();
        for row in DEFAULTS {
            assert!(seen.insert(row.key), "{} twice", row.key);
            assert!(!row.doc.is_empty(), "{} undocumented", row.key);
            assert!(!row.doc.contains("  "), "{}: stray spaces in doc", row.key);
            let prefix = match row.site {
                Site::Core => ["fs.", "hadoop.", "ipc.", "net."].as_slice(),
                Site::Hdfs => ["dfs."].as_slice(),
                Site::Yarn => ["yarn."].as_slice(),
            };
            assert!(
                prefix.iter().any(|p| row.key.starts_with(p)),
                "{} in the wrong site",
                row.key
            );
            if row.key.contains('<') {
                assert_eq!(
                    row.value, Unset,
                    "pattern {} cannot have a default",
                    row.key
                );
            }
        }
    }
}
