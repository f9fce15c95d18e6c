//! The node agent: a NodeManager's ResourceTracker side without the container launcher.
//!
//! How the pieces connect:
//!
//! ```text
//!  executors / scripts / --simulate ──control socket──> table::ContainerTable <──┐
//!        ^ cleanup orders                                   │                      │
//!        └──────────────────────────────────────────────────┘                      │
//!                                                          status_updater::StatusUpdater
//!                                                          (sans-IO: register / heartbeat /
//!                                                           response handling, wire.rs bytes)
//!                                                                   │ bytes
//!                                                                   v
//!                                            runtime (ring thread): ipc::client → RM
//! ```
//!
//! - [`ids`]: application and container ids with Java's string forms.
//! - [`table`]: the container table and the completion delivery rules (trap 1).
//! - [`wire`]: heartbeat requests encoded into a reused buffer, responses read in place.
//! - [`status_updater`]: `NodeStatusUpdaterImpl`'s protocol logic, no I/O.

pub mod ids;
pub mod status_updater;
pub mod table;
pub mod wire;
