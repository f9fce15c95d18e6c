//! rm-core: the thin ResourceManager — the ResourceTracker service, node state machines and a
//! bounded, sharded dispatcher; applications (RMApp and RMAppAttempt state machines, the
//! scheduler, the AM launcher) behind ApplicationClientProtocol and ApplicationMasterProtocol;
//! the state store, master keys and tokens. Protocol logic is sans-IO; sockets live in `ipc`.
//!
//! How the types connect (one heartbeat, left to right):
//!
//! ```text
//!  request bytes ──> tracker::ResourceTracker ──response bytes──> (ipc server)
//!  (view, borrowed)   node id, responseId, keys:       ^
//!                     duplicate → cached response      │ outbox items: acks, app/container
//!                     behind → RESYNC, unknown → RESYNC│ cleanups, drained into the response
//!                     excluded → SHUTDOWN              │
//!                          │ NodeStatusProto bytes     │
//!                          v (copied once)             │
//!                     mailbox::Mailbox ── one per shard: Inbox (≤ 1 Entry per node; a newer
//!                          │               heartbeat merges in) + outbox
//!                          v
//!                     shard::Shard ── node::NodeState per node (launched / completed / lost,
//!                          │          health, applications), sans-IO
//!                          v
//!                     completion_log::CompletionLog (append, fsync per batch; acks only after)
//! ```
//!
//! - [`tracker::ResourceTracker`] answers `registerNodeManager`, `nodeHeartbeat` and
//!   `unRegisterNodeManager` from request bytes (hot path through `hadoop_wire::view`, cold paths
//!   through prost), runs the liveness monitor and key rolling in [`tick`](tracker::ResourceTracker::tick),
//!   and owns the include/exclude lists ([`hosts`]), master keys ([`master_key`]) and the
//!   NM version rule ([`version`]).
//! - [`mailbox`] is the hand-over and the byte-ownership decision (copy the status bytes into
//!   a shard-owned, reused buffer), and the merge rule that bounds each shard's backlog by its
//!   node count.
//! - [`node`] is the state machine (RMNodeImpl's container bookkeeping), with the rules for
//!   lost containers, unknown applications (trap 2) and health written at its top.
//! - [`shard`] applies inboxes to nodes; [`dispatcher`] runs one shard per `shard-i` core of the
//!   `hw` plan and the housekeeping that goes with them.
//! - [`completion_log`] is the durable, deduplicated record of completions, with torn-tail
//!   handling; acknowledging only what is durable is our choice, not Java's.
//! - [`metrics`] renders Prometheus text. The heartbeat measurement and its request fixtures
//!   live in the `benches` crate (`benches::rm_heartbeat`, behind `hotpath-bench heartbeat`).
//! - [`service::RmService`] puts the tracker and the dispatcher on the `ipc` server
//!   (ResourceTrackerPB, and our admin protocol: finish-app, kill-container, refresh-nodes).
//! - [`amrm_token::AmrmTokenSecretManager`] mints and verifies AMRMTokens on its own
//!   [`master_key::KeyRoller`], and [`amrm_token::AmrmTokenSecrets`] lends it to the SASL
//!   server of ApplicationMasterProtocol.
//! - Applications: [`apps::Apps`] is the sans-IO core, one type in files by concern: its
//!   state and types (`apps/mod.rs`), the RMApp and RMAppAttempt endings (`lifecycle.rs`),
//!   the FIFO scheduler over per-node capacity (`scheduler.rs`, `nodes.rs`), the client and
//!   AM protocol rules (`client_protocol.rs`, `am_protocol.rs`, `tokens.rs`), recovery from
//!   the state store (`recovery.rs`) and its settings (`config.rs`);
//!   [`am_launcher`] starts AM containers on their NodeManagers (container token and NMToken
//!   minted under the tracker's rolling keys, the AMRMToken in the launch credentials);
//!   [`app_service`] serves ApplicationClientProtocol and ApplicationMasterProtocol (TOKEN
//!   auth by AMRMToken) on their own `ipc` servers, building attempt and container reports
//!   with [`reports`]. The heartbeat path reaches the scheduler
//!   only while an application is in flight (NODE_UPDATE: completions, then allocation); the
//!   tracker holds a scheduled application's acknowledgements until its AM pulled the
//!   completion (trap 1). [`service::RmService::start_with_apps`] wires them in.
//! - [`state_store::StateStore`] keeps applications, attempts, the RM epoch and the master
//!   keys on disk (`yarn.resourcemanager.recovery.enabled`); [`apps::Apps::recover`] rebuilds
//!   the applications from it on start, and node re-registrations bring back their containers
//!   (work-preserving, as Java's default).
//! - [`rm_delegation`]: RM delegation tokens (`RM_DELEGATION_TOKEN`) — the secret manager,
//!   `getDelegationToken` / `renewDelegationToken` / `cancelDelegationToken` on the client
//!   protocol, TOKEN authentication with them on the client port, their keys and tokens in the
//!   state store.
//! - [`config::RmConfig`] reads every setting from a `conf::Configuration`; [`ids`] holds the
//!   small keys and hashers; [`Error`] is the crate's error.

#![forbid(unsafe_code)]

pub mod admin;
pub mod am_launcher;
pub mod amrm_token;
pub mod app_acls;
pub mod app_service;
pub mod apps;
pub mod client_to_am;
pub mod completion_log;
pub mod config;
pub mod dispatcher;
mod error;
pub mod hosts;
pub mod ids;
pub mod mailbox;
pub mod master_key;
pub mod metrics;
pub mod node;
pub mod queues;
pub mod reports;
pub mod response;
pub mod rm_delegation;
pub mod service;
pub mod shard;
pub mod signals;
pub mod state_store;
pub mod token_renewer;
pub mod tracker;
pub mod version;

pub use config::RmConfig;
pub use error::Error;
