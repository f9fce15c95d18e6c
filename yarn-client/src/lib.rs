//! `yarn-client`: the client side of YARN's application protocols, for a Rust
//! DistributedShell (`hotpath app run` / `hotpath app am`) and the `hotpath app` commands.
//!
//! How the types connect:
//!
//! ```text
//!   hotpath app run (client)                    hotpath app am (in the AM container)
//!   ─────────────────────────                   ─────────────────────────────────────
//!   application_client::ApplicationClient       application_master::ApplicationMaster
//!     getNewApplication, submitApplication        AMRMToken from HADOOP_TOKEN_FILE_LOCATION
//!     (AM launch context from                     register / allocate / finish; a rolled
//!      distributed_shell::am_launch_context),      AMRMToken in allocate is taken at once
//!     getApplicationReport, forceKill           container_manager::ContainerManager
//!   SIMPLE/KERBEROS, yarn.resourcemanager.address startContainers / stopContainers /
//!                                                 getContainerStatuses with the node's NMToken,
//!                                                 one cached connection per node
//!                                               distributed_shell::DistributedShell (sans-IO):
//!                                                 asks, responseId, surplus release,
//!                                                 completion accounting, final status
//!                                               shell_am::run drives it; StatusBoard is what
//!                                                 the AM's status page serves
//! ```
//!
//! [`app_commands`] holds the commands themselves (`app run` submits and follows, `app am`
//! with its status page, `app kill`, `app status`); the binary only parses their flags.
//!
//! All I/O goes through `ipc::client::Client` (blocking, SASL TOKEN/DIGEST-MD5 when a token is
//! held); [`rpc`] holds the shared connect/retry settings ([`rpc::Retry`]) and closes every
//! connection idle for `ipc.client.connection.maxidletime`, as Java does. Every error is a
//! [`YarnError`] with its source kept (a Java exception keeps its class name).

#![forbid(unsafe_code)]

pub mod app_commands;
pub mod application_client;
pub mod application_master;
pub mod container_manager;
pub mod distributed_shell;
pub mod error;
pub mod rpc;
pub mod shell_am;

pub use error::YarnError;
