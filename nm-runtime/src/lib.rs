//! `nm-runtime`: the NodeManager's daemon, the I/O around `nm-core`'s rules. The protocols
//! themselves (container table, status updater, heartbeat wire, health, container manager,
//! launch and localization rules) are `nm-core`, sans-IO; this crate runs them: configuration,
//! the servers and threads, the processes, the files, the control socket, logs and metrics.
//! It is to the NodeManager what `rm-core` is to the ResourceManager; the `hotpath` binary
//! (`agent`) only parses flags and calls [`Agent::start`].
//!
//! How the pieces connect:
//!
//! ```text
//!  RM AMLauncher / ApplicationMasters ──ContainerManagementProtocol (TOKEN)──> cmp_server
//!        │ nm_core::container_manager (checks, stages)      │ LaunchOrder / kill / signal
//!        v                                                  v
//!  nm_core::table::ContainerTable <── exits ── launcher ── localizer (a container's resources)
//!        ▲   ▲ cleanup orders → kills                │        └─ hdfs: sources ─> hdfs_reader
//!        │   │                                       └─ executor (+ cgroups, zygote): processes
//!        │   └── storm tools / --simulate ──control socket (launch/running/complete/localize)
//!        │                                      └─ localize requests ─> hdfs_reader
//!  nm_core::status_updater::StatusUpdater (sans-IO: register / heartbeat / responses)
//!        │ bytes                              keys, rm id ──> container_manager
//!        v
//!  runtime (ring thread): ipc::client → RM
//! ```
//!
//! Three modules deal with localization and are easy to confuse:
//! - [`cmp_server`]: the ContainerManagementProtocol server's handlers on the node address
//!   (TOKEN only): `startContainers` and the rest, checked by `nm_core::container_manager`,
//!   accepted starts handed to the [`launcher`].
//! - [`localizer`]: a container's resource localization: every `LocalResource` of a container
//!   into the node's cache (public, user or application), unpacked, before launch; called from
//!   launch workers.
//! - [`hdfs_reader`]: the pinned HDFS-reader thread and its bounded queue: copies HDFS files
//!   for the control socket's localize requests and for the [`localizer`]'s `hdfs:` sources
//!   ([`hdfs_reader::HdfsFetcher`]); only when `fs.defaultFS` is `hdfs://…`.
//!
//! The rest:
//! - [`runtime`]: [`Agent`]: the threads (ring, housekeeping, launcher, HDFS reader) and the
//!   RPC calls to the RM.
//! - [`config`]: the agent's settings from the Hadoop configuration ([`AgentConfig`]);
//!   [`node_host`]: the NodeId host as Java picks it (canonical name of the bound IP).
//! - [`disks`]: the local and log dirs as the health checks leave them ([`disks::LiveDirs`]:
//!   new writes on good dirs only) and the real disk probe (access, statvfs).
//! - [`launcher`]: accepted starts to processes and processes to exit statuses; recovery of
//!   a previous run's containers.
//! - [`executor`]: container processes as Java's `DefaultContainerExecutor` runs them
//!   (`nm_core::launch` scripts, pid/exit-code files, process-group kills, recovery), confined
//!   by [`cgroups`] (cpuset, memory limit) or by affinity and rlimits, started from
//!   [`zygote`] pools when they can be; [`setup`]: the launch script's links and debug files,
//!   made by the agent itself.
//! - [`control`]: the control socket executors, scripts and `hotpath container` use.
//! - [`logs`]: container logs and node info over HTTP (`/ws/v1/node/…`, as `yarn logs`
//!   reads them), served beside `/metrics` by the housekeeping thread ([`logs::poll_webapp`]).
//! - [`report`]: the agent's own IPC protocol (`getNodeReport`); [`client`]: the clients of
//!   it and of the logs endpoint.
//! - [`metrics`]: counters and the RPC latency histogram for `/metrics`; [`shared`]: the
//!   state the threads share (container table, health, status snapshot, stop signal).
//! - [`shuffle`]: the `mapreduce_shuffle` aux service MapReduce's reducers fetch map outputs
//!   from (HTTP on `mapreduce.shuffle.port`, segments sent with `sendfile`).
//! - [`simulate`]: `--simulate`, a synthetic workload on the container table.
//! - [`sys`]: the wall clock, CPU affinity masks and a child's set-up between fork and exec
//!   (a leaf: every module may use it, it uses none).
//!
//! Modules depend on each other one way (no import cycle): `sys`, `setup`, `simulate`,
//! `cgroups`, `metrics`, `disks` and `node_host` use no other module; `runtime` uses most.

pub mod cgroups;
pub mod client;
pub mod cmp_server;
pub mod config;
pub mod control;
pub mod disks;
mod error;
pub mod executor;
pub mod hdfs_reader;
pub mod launcher;
pub mod localizer;
pub mod logs;
pub mod metrics;
pub mod node_host;
pub mod report;
pub mod rm_orders;
pub mod runtime;
pub mod setup;
pub mod shared;
pub mod shuffle;
pub mod simulate;
pub mod sys;
pub mod token_store;
pub mod zygote;

pub use config::AgentConfig;
pub use error::Error;
pub use runtime::{Agent, ExitReason};
