//! `mapreduce_shuffle`: the NodeManager auxiliary service MapReduce's reducers fetch map outputs
//! from, served natively in place of Hadoop's Java `org.apache.hadoop.mapred.ShuffleHandler`.
//!
//! What a Hadoop 3.5.0 MapReduce job sees is what a Java NodeManager gives it:
//! - every StartContainers answer carries `services_meta_data["mapreduce_shuffle"]` = the bound
//!   port as a 4-byte big-endian int, and containers get `NM_AUX_SERVICE_mapreduce_shuffle`;
//! - a task container's `service_data["mapreduce_shuffle"]` (a Hadoop `Token` Writable whose
//!   password is the job's shuffle secret) registers the job as `job_<clusterTs>_<id>` for the
//!   container's user ([`Jobs::register`]); the application's cleanup on this node drops it
//!   ([`Jobs::stop_application`]), never a container's stop (map outputs outlive their map
//!   containers);
//! - `GET /mapOutput?job=…&reduce=…&map=…` on `mapreduce.shuffle.port` is checked and answered
//!   as the 3.5.0 `ShuffleChannelHandler` answers it, `UrlHash` verified and `ReplyHash` sent,
//!   the segments sent from the page cache with `sendfile(2)` (no copy through user space).
//!
//! The pieces:
//! - [`config`]: the `mapreduce.shuffle.*` keys and the aux-service checks made at start;
//! - [`jobs`]: the registered jobs (user, secret), kept across restarts with NM recovery;
//! - [`hash`]: the HMAC of `UrlHash` / `ReplyHash` (`HmacSHA1` unless configured otherwise);
//! - [`request`]: HTTP request parsing and the checks of Java's processing order;
//! - [`index`]: map outputs found through their `file.out.index` across the local dirs, index
//!   files cached within a bound, the `ShuffleHeader` Writable;
//! - [`server`]: the epoll loops, connections, limits and the zero-copy transfer;
//! - [`tls`]: `mapreduce.shuffle.ssl.enabled`: the keystore settings of `ssl-server.xml` as a
//!   rustls configuration (the server then encrypts each segment in pieces, as Java does).

pub mod config;
pub mod hash;
pub mod index;
pub mod jobs;
pub mod request;
pub mod server;
pub mod tls;

pub use config::{check_aux_services, ShuffleConfig};
pub use jobs::Jobs;
pub use server::ShuffleServer;

/// The aux service's name: the key in `service_data` and `services_meta_data`
/// (`ShuffleHandler.MAPREDUCE_SHUFFLE_SERVICEID`).
pub const SERVICE_ID: &str = "mapreduce_shuffle";

/// The Java class a `yarn.nodemanager.aux-services.mapreduce_shuffle.class` must name for this
/// agent to serve it.
pub const SHUFFLE_HANDLER_CLASS: &str = "org.apache.hadoop.mapred.ShuffleHandler";

/// `services_meta_data["mapreduce_shuffle"]`: the port as Java's `DataOutputBuffer.writeInt`
/// writes it (4 bytes, big-endian).
pub fn port_metadata(port: u16) -> Vec<u8> {
    i32::from(port).to_be_bytes().to_vec()
}

/// Why the shuffle service cannot start, or cannot take a job.
#[derive(Debug, thiserror::Error)]
pub enum ShuffleError {
    /// A configuration the service cannot run with (named keys and values).
    #[error("{0}")]
    Config(String),
    /// Binding or running the listener.
    #[error("mapreduce_shuffle on port {port}: {source}")]
    Bind {
        port: u16,
        #[source]
        source: std::io::Error,
    },
    /// `service_data["mapreduce_shuffle"]` is not a Hadoop `Token` Writable.
    #[error("mapreduce_shuffle service data of {app}: {reason}")]
    ServiceData { app: String, reason: String },
    /// Recording a job for recovery failed.
    #[error("mapreduce_shuffle state {path}: {source}")]
    State {
        path: String,
        #[source]
        source: std::io::Error,
    },
}
