//! What `hotpath hw` prints: a [`Report`] of a topology and a plan, as text for people or as
//! one JSON object for scripts.

use serde::Serialize;

use crate::plan::{Assignment, Plan};
use crate::topology::{Backend, Topology};
use crate::{cpulist, pin::thread_name};

/// One NUMA node in a [`Report`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeReport {
    pub node: u32,
    pub cores: usize,
    pub cpus: Vec<u32>,
}

/// The JSON shape of `hotpath hw --json`. The keys `cores`, `pus`, `numa_nodes` (counts) and
/// `plan` (`[{role, cpu}]`) are the stable interface; the rest is detail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    pub backend: Backend,
    pub packages: usize,
    pub cores: usize,
    pub pus: usize,
    pub numa_nodes: usize,
    pub smt: bool,
    pub l2_bytes: Option<u64>,
    pub l3_bytes: Option<u64>,
    /// Logical CPUs of each physical core (SMT siblings together), in core order.
    pub core_cpus: Vec<Vec<u32>>,
    pub numa: Vec<NodeReport>,
    pub home_node: u32,
    pub plan: Vec<Assignment>,
    pub free_cpus: Vec<u32>,
}

/// Collects the report of `topo` and `plan`.
pub fn report(topo: &Topology, plan: &Plan) -> Report {
    Report {
        backend: topo.backend(),
        packages: topo.packages().len(),
        cores: topo.cores().len(),
        pus: topo.pu_count(),
        numa_nodes: topo.numa_nodes().len(),
        smt: topo.smt(),
        l2_bytes: topo.l2_bytes(),
        l3_bytes: topo.l3_bytes(),
        core_cpus: topo.cores().iter().map(|c| c.pus.clone()).collect(),
        numa: topo
            .numa_nodes()
            .iter()
            .map(|n| NodeReport {
                node: n.os_index,
                cores: n.cores.len(),
                cpus: n.pus.clone(),
            })
            .collect(),
        home_node: plan.home_node(),
        plan: plan.assignments().to_vec(),
        free_cpus: plan.free_cpus().to_vec(),
    }
}

/// The report as one JSON object (`hotpath hw --json`).
pub fn report_json(topo: &Topology, plan: &Plan) -> serde_json::Value {
    serde_json::to_value(report(topo, plan))
        .expect("the report holds only numbers, strings and lists")
}

fn bytes(b: Option<u64>) -> String {
    match b {
        None => "unknown".into(),
        Some(b) if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        Some(b) if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        Some(b) => format!("{b} B"),
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The report for people (`hotpath hw`), several lines, ending in a newline.
pub fn report_text(topo: &Topology, plan: &Plan) -> String {
    use std::fmt::Write;
    let r = report(topo, plan);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "machine: {}, {}, {} ({}), {}  [from {}{}]",
        plural(r.packages, "package", "packages"),
        plural(r.cores, "physical core", "physical cores"),
        plural(r.pus, "logical CPU", "logical CPUs"),
        if r.smt { "SMT" } else { "no SMT" },
        plural(r.numa_nodes, "NUMA node", "NUMA nodes"),
        r.backend,
        if r.backend == Backend::Synthetic {
            ""
        } else {
            ", only the CPUs this process may use"
        },
    );
    let _ = writeln!(
        s,
        "caches:  L2 {}, L3 {} (one instance)",
        bytes(r.l2_bytes),
        bytes(r.l3_bytes)
    );
    for n in topo.numa_nodes() {
        let cores: Vec<String> = n
            .cores
            .iter()
            .map(|&i| format!("{{{}}}", cpulist::format(&topo.cores()[i].pus)))
            .collect();
        let _ = writeln!(
            s,
            "node {}: cpus {}; cores {}",
            n.os_index,
            cpulist::format(&n.pus),
            cores.join(" ")
        );
    }
    let _ = writeln!(s, "plan (rings and shards on NUMA node {}):", r.home_node);
    for a in &r.plan {
        let _ = writeln!(
            s,
            "  cpu {:<4} {:<14} thread {}",
            a.cpu,
            a.role.to_string(),
            thread_name(&a.role, a.cpu)
        );
    }
    let _ = writeln!(
        s,
        "free:    {}",
        if r.free_cpus.is_empty() {
            "none (every core runs a role)".to_string()
        } else {
            format!("cpus {}", cpulist::format(&r.free_cpus))
        }
    );
    s
}
