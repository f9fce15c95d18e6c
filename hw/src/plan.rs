//! The core plan: which logical CPU each thread role runs on.
//!
//! [`plan`] is a pure function: a [`Topology`] and a list of [`Role`]s in, a [`Plan`]
//! (role → CPU) out. It never looks at the machine, so it is tested on synthetic topologies.
//! The presets [`Plan::for_agent`] and [`Plan::for_rm`] pick the role list for each binary
//! and scale it with the machine.
//!
//! # Roles
//!
//! | role | name | thread | hot? | what it does |
//! |---|---|---|---|---|
//! | [`Role::Housekeeping`] | `housekeeping` | `hp-hk-<cpu>` | cold | metrics HTTP, control socket, config reload, admin protocol; asleep almost always |
//! | [`Role::NetRing`]`(i)` | `ring-<i>` | `hp-ring<i>-<cpu>` | hot | one io_uring: accept, recv, send; heartbeat client/server |
//! | [`Role::DispatcherShard`]`(i)` | `shard-<i>` | `hp-shard<i>-<cpu>` | hot | node state machines of the nodes hashed to shard `i` (rm) |
//! | [`Role::HdfsReader`] | `hdfs-reader` | `hp-hdfs-<cpu>` | hot | NameNode client and DataNode reads with CRC32C verification (agent) |
//!
//! A *hot* role wants a core to itself: a ring answers heartbeats within its loop and any
//! other work queued on its core adds straight to response latency; shards and the HDFS
//! reader are CPU-bound in bursts. Housekeeping is the cold role: it is the one that shares.
//!
//! # The design point: a 4-core Xeon, no SMT, one NUMA node
//!
//! | core | agent node | rm host |
//! |---|---|---|
//! | 0 | housekeeping + the OS | housekeeping (+ admin protocol) + the OS |
//! | 1 | network ring | network ring |
//! | 2 | HDFS reader | dispatcher shard 0 |
//! | 3 | left to containers | dispatcher shard 1 |
//!
//! Why:
//! - **Core 0 is the OS's core.** Interrupts without an explicit affinity, timers, RCU
//!   callbacks, sshd, journald and most kernel threads end up on CPU 0. Housekeeping sleeps
//!   nearly all the time, so it is the one role that loses nothing by living with them, and
//!   every hot role gets a core the OS rarely touches.
//! - **Core 1, the ring, alone.** Heartbeat round-trip time is the figure we are judged on;
//!   a response must never wait behind a shard's or a reader's burst on the same core.
//! - **Agent core 2, the HDFS reader.** Bulk reads verify a CRC32C per 512 bytes and copy
//!   megabytes: CPU-bound, and kept off the ring so that a large read cannot delay a
//!   heartbeat.
//! - **Agent core 3 is not ours.** The agent exists to serve the node's containers. It takes
//!   three cores at most however large the node is; everything else stays free
//!   ([`Plan::free_cpus`]).
//! - **RM cores 2 and 3, two shards.** The ring answers the heartbeat and hands the container
//!   statuses to the node's shard. Two shards process a burst of heartbeats in parallel
//!   while the ring keeps answering. Ring and shards sit in one NUMA node, so a handed-over
//!   buffer stays in local memory and in a shared L3.
//!
//! # The algorithm
//!
//! 1. **Home node**: the NUMA node with the most usable physical cores (lowest OS index on a
//!    tie; see [`Topology::home_node`]). Rings and shards are confined to it: shards stay
//!    inside the ring's node. The HDFS reader prefers it but may go to any node.
//! 2. **OS core**: the home node's first core. Housekeeping goes on its first PU.
//! 3. Hot roles are placed in a fixed order, whatever the order of the request: rings by
//!    index, then shards by index, then the HDFS reader. Each takes the first spot in this
//!    **sharing order**:
//!    1. a core with no role at all, other than the OS core (home node first, then other
//!       nodes if the role may leave it; lowest core first);
//!    2. the OS core, on a PU housekeeping does not use (its SMT sibling; any PU when no
//!       housekeeping was asked for);
//!    3. the OS core, time-sharing housekeeping's PU;
//!    4. an idle SMT sibling of a core that already runs hot roles (fewest hot roles first);
//!    5. time-sharing a PU: fewest hot roles on the PU, then fewest cold, then fewest on
//!       its core.
//!
//! Consequences (the plan tests check each over random topologies):
//! - two hot roles never share a core (neither one PU nor SMT siblings) while a core in their
//!   region is still free of hot roles;
//! - a hot role joins housekeeping's core only when every other core of its region is taken;
//! - rings and shards all sit in the home node;
//! - hot roles spread evenly: no PU takes a second hot role while a PU of the region has none.
//!
//! # Small machines
//!
//! With the presets (no SMT):
//!
//! | cores | agent | rm |
//! |---|---|---|
//! | 1 | everything on CPU 0 | everything on CPU 0 |
//! | 2 | 0: housekeeping + HDFS reader, 1: ring | 0: housekeeping + shard 0, 1: ring |
//! | 3 | 0: housekeeping, 1: ring, 2: HDFS reader | 0: housekeeping, 1: ring, 2: shard 0 |
//! | 4 | the design point | the design point |
//!
//! # Larger machines
//!
//! The agent keeps its three roles and leaves the rest to containers. The rm scales out
//! inside the home node: with `C` physical cores there, housekeeping keeps the OS core and
//! the other `C − 1` cores are split one ring to two shards (`rings = max(1, (C−1)/3)`,
//! at least one ring and one shard). 8 cores: 2 rings, 5 shards. Dual-socket 2 × 8 with SMT:
//! the same 2 + 5 on node 0's physical cores; SMT siblings and node 1 stay free (shards
//! may not leave the ring's node). Call [`plan`] with your own role list for anything else.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Serialize, Serializer};

use crate::topology::Topology;
use crate::Error;

/// A thread role that the plan places on a CPU.
///
/// The derived order is the placement order: housekeeping, rings, shards, HDFS reader.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    /// Metrics HTTP, control socket, config reload, admin protocol. Cold.
    Housekeeping,
    /// Network ring `i` (one io_uring instance). Hot, confined to the home NUMA node.
    NetRing(u16),
    /// Dispatcher shard `i` (node state machines). Hot, confined to the home NUMA node.
    DispatcherShard(u16),
    /// The HDFS reader ring. Hot, prefers the home NUMA node.
    HdfsReader,
}

impl Role {
    /// Whether the role wants a core of its own.
    pub fn is_hot(&self) -> bool {
        !matches!(self, Role::Housekeeping)
    }

    /// Whether the role must stay in the home NUMA node (rings and shards).
    pub fn numa_bound(&self) -> bool {
        matches!(self, Role::NetRing(_) | Role::DispatcherShard(_))
    }

    /// The short form used in thread names: `hk`, `ring0`, `shard1`, `hdfs`.
    pub fn short_name(&self) -> String {
        match self {
            Role::Housekeeping => "hk".into(),
            Role::NetRing(i) => format!("ring{i}"),
            Role::DispatcherShard(i) => format!("shard{i}"),
            Role::HdfsReader => "hdfs".into(),
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Role::Housekeeping => f.write_str("housekeeping"),
            Role::NetRing(i) => write!(f, "ring-{i}"),
            Role::DispatcherShard(i) => write!(f, "shard-{i}"),
            Role::HdfsReader => f.write_str("hdfs-reader"),
        }
    }
}

impl FromStr for Role {
    type Err = Error;

    /// Parses the [`Display`](fmt::Display) form: `housekeeping`, `ring-0`, `shard-1`,
    /// `hdfs-reader`.
    fn from_str(s: &str) -> Result<Role, Error> {
        let bad = || Error::UnknownRole(s.chars().take(64).collect());
        match s {
            "housekeeping" => Ok(Role::Housekeeping),
            "hdfs-reader" => Ok(Role::HdfsReader),
            _ => {
                if let Some(i) = s.strip_prefix("ring-") {
                    i.parse().map(Role::NetRing).map_err(|_| bad())
                } else if let Some(i) = s.strip_prefix("shard-") {
                    i.parse().map(Role::DispatcherShard).map_err(|_| bad())
                } else {
                    Err(bad())
                }
            }
        }
    }
}

impl Serialize for Role {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// One role on one logical CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Assignment {
    pub role: Role,
    pub cpu: u32,
}

/// Role → CPU assignments for one process. Build it with [`plan`], [`Plan::for_agent`] or
/// [`Plan::for_rm`]; start the threads with [`spawn_pinned`](crate::spawn_pinned).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    assignments: Vec<Assignment>,
    home_node: u32,
    free_cpus: Vec<u32>,
}

impl Plan {
    /// The agent's roles on `topo`: housekeeping, one network ring, the HDFS reader.
    pub fn for_agent(topo: &Topology) -> Plan {
        plan(topo, &agent_roles(topo))
    }

    /// The rm host's roles on `topo`: housekeeping, rings and shards scaled to the home node.
    pub fn for_rm(topo: &Topology) -> Plan {
        plan(topo, &rm_roles(topo))
    }

    /// Every assignment, in placement order (housekeeping, rings, shards, HDFS reader).
    pub fn assignments(&self) -> &[Assignment] {
        &self.assignments
    }

    /// The CPU of `role`, if the plan has it.
    pub fn cpu_of(&self, role: &Role) -> Option<u32> {
        self.assignments
            .iter()
            .find(|a| a.role == *role)
            .map(|a| a.cpu)
    }

    /// The roles placed on `cpu`.
    pub fn roles_on(&self, cpu: u32) -> impl Iterator<Item = Role> + '_ {
        self.assignments
            .iter()
            .filter(move |a| a.cpu == cpu)
            .map(|a| a.role)
    }

    /// The NUMA node holding the rings and shards.
    pub fn home_node(&self) -> u32 {
        self.home_node
    }

    /// CPUs of the physical cores the plan leaves untouched (for containers or anything
    /// else), ascending.
    pub fn free_cpus(&self) -> &[u32] {
        &self.free_cpus
    }

    /// The CPUs containers run on: [`Plan::free_cpus`]; when the plan leaves none (machines
    /// of 1 to 3 cores), the housekeeping CPU, the cold role's, minus any CPU of a network
    /// ring. On 2 cores the HDFS reader shares housekeeping's CPU, so containers share it
    /// too; on 1 core everything is CPU 0. The second value says whether it fell back.
    pub fn work_cpus(&self) -> (Vec<u32>, bool) {
        if !self.free_cpus.is_empty() {
            return (self.free_cpus.clone(), false);
        }
        let ring = |cpu: u32| {
            self.roles_on(cpu)
                .any(|r| matches!(r, Role::NetRing(_) | Role::DispatcherShard(_)))
        };
        let mut hk: Vec<u32> = self
            .assignments
            .iter()
            .filter(|a| a.role == Role::Housekeeping)
            .map(|a| a.cpu)
            .collect();
        hk.sort_unstable();
        hk.dedup();
        let apart: Vec<u32> = hk.iter().copied().filter(|&c| !ring(c)).collect();
        (if apart.is_empty() { hk } else { apart }, true)
    }
}

/// The agent's role list (the same on every machine: the rest is for containers).
pub fn agent_roles(_topo: &Topology) -> Vec<Role> {
    vec![Role::Housekeeping, Role::NetRing(0), Role::HdfsReader]
}

/// The rm host's role list: housekeeping plus rings and shards over the home node's other
/// cores, one ring per two shards, at least one of each.
pub fn rm_roles(topo: &Topology) -> Vec<Role> {
    let cores = topo.home_node().cores.len();
    let hot = if cores <= 3 { 2 } else { cores - 1 };
    let rings = (hot / 3).max(1);
    let shards = hot - rings;
    let rings = rings.min(u16::MAX as usize) as u16;
    let shards = shards.min(u16::MAX as usize) as u16;
    let mut roles = vec![Role::Housekeeping];
    roles.extend((0..rings).map(Role::NetRing));
    roles.extend((0..shards).map(Role::DispatcherShard));
    roles
}

/// Places `roles` on `topo` (see the module docs for the rules). Duplicate roles are placed
/// once; the request order does not matter.
pub fn plan(topo: &Topology, roles: &[Role]) -> Plan {
    let mut roles = roles.to_vec();
    roles.sort();
    roles.dedup();

    let cores = topo.cores();
    let home = topo.home_node();
    let os_core = home.cores[0];
    // Every core, home node first, then the other nodes by OS index; each in core order.
    let all_ranked: Vec<usize> = home
        .cores
        .iter()
        .copied()
        .chain(
            topo.numa_nodes()
                .iter()
                .filter(|n| n.os_index != home.os_index)
                .flat_map(|n| n.cores.iter().copied()),
        )
        .collect();

    let mut hot_on_core = vec![0u32; cores.len()];
    let mut hot_on_pu: BTreeMap<u32, u32> = BTreeMap::new();
    let mut cold_on_pu: BTreeMap<u32, u32> = BTreeMap::new();
    let mut assignments = Vec::with_capacity(roles.len());

    for role in roles {
        let cpu = if role.is_hot() {
            let region: &[usize] = if role.numa_bound() {
                &home.cores
            } else {
                &all_ranked
            };
            let key = |rank: usize, ci: usize, cpu: u32| {
                let hot_pu = hot_on_pu.get(&cpu).copied().unwrap_or(0);
                let cold_pu = cold_on_pu.get(&cpu).copied().unwrap_or(0);
                let hot_core = hot_on_core[ci];
                let (tier, a, b, c) = if hot_core == 0 && ci != os_core {
                    (0, 0, 0, 0)
                } else if hot_core == 0 && cold_pu == 0 {
                    (1, 0, 0, 0)
                } else if hot_core == 0 {
                    (2, 0, 0, 0)
                } else if hot_pu == 0 && cold_pu == 0 {
                    (3, hot_core, 0, 0)
                } else {
                    (4, hot_pu, cold_pu, hot_core)
                };
                (tier, a, b, c, rank, cpu)
            };
            let (_, ci, cpu) = region
                .iter()
                .enumerate()
                .flat_map(|(rank, &ci)| cores[ci].pus.iter().map(move |&cpu| (rank, ci, cpu)))
                .map(|(rank, ci, cpu)| (key(rank, ci, cpu), ci, cpu))
                .min()
                .expect("a NUMA node has at least one core with at least one PU");
            hot_on_core[ci] += 1;
            *hot_on_pu.entry(cpu).or_default() += 1;
            cpu
        } else {
            let cpu = cores[os_core].pus[0];
            *cold_on_pu.entry(cpu).or_default() += 1;
            cpu
        };
        assignments.push(Assignment { role, cpu });
    }

    let free_cpus = {
        let mut v: Vec<u32> = cores
            .iter()
            .filter(|c| {
                !c.pus
                    .iter()
                    .any(|p| assignments.iter().any(|a| a.cpu == *p))
            })
            .flat_map(|c| c.pus.iter().copied())
            .collect();
        v.sort_unstable();
        v
    };
    Plan {
        assignments,
        home_node: home.os_index,
        free_cpus,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_names_round_trip() {
        for r in [
            Role::Housekeeping,
            Role::NetRing(0),
            Role::NetRing(12),
            Role::DispatcherShard(1),
            Role::HdfsReader,
        ] {
            assert_eq!(r.to_string().parse::<Role>().unwrap(), r);
        }
        assert!("ring-".parse::<Role>().is_err());
        assert!("shard-x".parse::<Role>().is_err());
        assert!("ring-70000".parse::<Role>().is_err());
        assert!("cook".parse::<Role>().is_err());
    }

    #[test]
    fn work_cpus_avoid_the_rings() {
        use crate::topology::Synthetic;
        let work = |cores| {
            let t = Topology::synthetic(Synthetic::flat(cores)).unwrap();
            Plan::for_agent(&t).work_cpus()
        };
        assert_eq!(work(1), (vec![0], true));
        // 0: housekeeping + HDFS reader, 1: ring.
        assert_eq!(work(2), (vec![0], true));
        assert_eq!(work(3), (vec![0], true));
        assert_eq!(work(4), (vec![3], false));
        assert_eq!(work(8), (vec![3, 4, 5, 6, 7], false));
    }

    #[test]
    fn rm_roles_scale() {
        use crate::topology::Synthetic;
        let count = |cores| {
            let t = Topology::synthetic(Synthetic::flat(cores)).unwrap();
            let r = rm_roles(&t);
            let rings = r.iter().filter(|r| matches!(r, Role::NetRing(_))).count();
            let shards = r
                .iter()
                .filter(|r| matches!(r, Role::DispatcherShard(_)))
                .count();
            (rings, shards)
        };
        assert_eq!(count(1), (1, 1));
        assert_eq!(count(2), (1, 1));
        assert_eq!(count(3), (1, 1));
        assert_eq!(count(4), (1, 2));
        assert_eq!(count(8), (2, 5));
        assert_eq!(count(16), (5, 10));
    }
}
