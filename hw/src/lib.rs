//! `hw`: the machine's topology, the core plan, and thread pinning.
//!
//! How the types connect:
//!
//! ```text
//!   hwloc (feature "hwloc")  ─┐
//!   sysfs (/sys/devices/...) ─┼─> Vec<PuInfo> + Vec<CacheInfo> ─> Topology ─restrict(mask)─> Topology
//!   Topology::synthetic      ─┘                                                  │
//!                                                                  plan(&topo, &[Role]) / Plan::for_agent / Plan::for_rm
//!                                                                                │
//!                                                                      Plan: [Assignment { role, cpu }]
//!                                                                        │                     │
//!                                            spawn_pinned(role, cpu, f) ─┘                     └─ report_text / report_json
//!                                            (named hp-<role>-<cpu>, pinned, verified)            (`hotpath hw [--json]`)
//! ```
//!
//! - [`Topology`] is our own struct; which backend filled it is only a label
//!   ([`Backend`]). [`Topology::detect`] tries hwloc, falls back to sysfs, and keeps only the
//!   CPUs in the calling thread's affinity mask ([`affinity::current_cpus`]), so a plan never
//!   names a CPU we may not run on.
//! - [`plan()`] is pure: topology and roles in, [`Plan`] out. The module docs of [`plan`](mod@plan)
//!   hold the design point (a 4-core Xeon), the reasoning, and the sharing order for
//!   smaller machines.
//! - [`pin_current_thread`] and [`spawn_pinned`] apply a plan entry, then check with
//!   `sched_getcpu` that the kernel did it, returning [`Error::PinRefused`] or
//!   [`Error::PinNotEffective`] if not. [`PinPolicy`] is the one rule for a refused CPU
//!   (fail, or warn and run unpinned), chosen per thread by its caller.
//! - [`report_text`] and [`report_json`] render a topology and a plan for `hotpath hw`.

use std::path::PathBuf;

pub mod affinity;
pub mod cpulist;
#[cfg(feature = "hwloc")]
mod hwloc;
pub mod pin;
pub mod plan;
pub mod report;
pub mod sysfs;
pub mod topology;

pub use pin::{
    current_cpu, pin_current_thread, spawn_pinned, thread_name, PinPolicy, PinnedThread,
};
pub use plan::{plan, Assignment, Plan, Role};
pub use report::{report, report_json, report_text, Report};
pub use topology::{Backend, CacheInfo, Core, NumaNode, Package, PuInfo, Synthetic, Topology};

/// Everything that can go wrong in `hw`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A sysfs file could not be read.
    #[error("reading {path}: {source}")]
    Sysfs {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A sysfs file held something we do not understand.
    #[error("unexpected content in {path}: {value:?}")]
    SysfsParse { path: PathBuf, value: String },
    /// hwloc could not build a topology.
    #[error("hwloc: {0}")]
    Hwloc(String),
    /// The backend's records do not form a topology (duplicate CPU, no CPU, a core split
    /// across NUMA nodes).
    #[error("invalid topology: {0}")]
    InvalidTopology(String),
    /// None of the machine's CPUs is in the allowed set.
    #[error("none of the machine's CPUs ({machine}) is in the allowed set ({allowed})")]
    NoUsableCpus { allowed: String, machine: String },
    /// `sched_getaffinity` failed.
    #[error("cannot read this thread's CPU affinity mask")]
    AffinityUnavailable,
    /// The kernel refused to pin to `cpu` (offline, outside the cpuset, or nonexistent).
    #[error("the kernel refused to pin to cpu {cpu}: {source} (is it online and in this process's cpuset? see `taskset -p $$`)")]
    PinRefused { cpu: u32, source: std::io::Error },
    /// The kernel accepted the pin but the thread is not (only) on `cpu` afterwards.
    #[error("pinned to cpu {cpu} but the thread runs on {running_on:?} with mask {mask}")]
    PinNotEffective {
        cpu: u32,
        running_on: Option<u32>,
        mask: String,
    },
    /// `sched_getcpu` failed.
    #[error("sched_getcpu: {0}")]
    SchedGetCpu(std::io::Error),
    /// The OS would not start a thread.
    #[error("spawning thread {name}: {source}")]
    Spawn {
        name: String,
        source: std::io::Error,
    },
    /// A role name that is not `housekeeping`, `ring-N`, `shard-N` or `hdfs-reader`.
    #[error("unknown role {0:?} (expected housekeeping, ring-N, shard-N or hdfs-reader)")]
    UnknownRole(String),
}
