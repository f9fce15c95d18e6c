//! The machine's topology as the core plan sees it: packages, physical cores, PUs (logical
//! CPUs, SMT siblings grouped per core), NUMA nodes and the L2/L3 cache sizes.
//!
//! Backends (hwloc, sysfs) and the synthetic builder used by tests all describe the machine
//! as a flat list of [`PuInfo`] records plus [`CacheInfo`] records; [`Topology::from_parts`]
//! groups them. So every backend yields the same struct, and the backend stays hidden.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::Serialize;

use crate::Error;

/// Where a [`Topology`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// The system libhwloc through the `hwloc2` crate (cargo feature `hwloc`).
    Hwloc,
    /// `/sys/devices/system/{cpu,node}`.
    Sysfs,
    /// Built in code (tests, what-if plans).
    Synthetic,
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backend::Hwloc => "hwloc",
            Backend::Sysfs => "sysfs",
            Backend::Synthetic => "synthetic",
        })
    }
}

/// One logical CPU as a backend reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PuInfo {
    /// The OS number of the logical CPU (what `sched_setaffinity` and `taskset` take).
    pub cpu: u32,
    /// OS index of the package (socket).
    pub package: u32,
    /// A key unique across the machine for the physical core holding this PU. PUs with the
    /// same key are SMT siblings.
    pub core_key: u32,
    /// The core number the OS shows (`core_id`; unique only within a package). Display only.
    pub core_id: u32,
    /// OS index of the NUMA node local to this PU.
    pub numa_node: u32,
}

/// One cache instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheInfo {
    /// 2 for L2, 3 for L3 (others are ignored).
    pub level: u8,
    /// Size of this instance in bytes.
    pub bytes: u64,
    /// The logical CPUs sharing it.
    pub cpus: Vec<u32>,
}

/// A physical core.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Core {
    /// OS index of its package.
    pub package: u32,
    /// The OS `core_id` (unique only within a package).
    pub core_id: u32,
    /// OS index of its NUMA node.
    pub numa_node: u32,
    /// Its logical CPUs (SMT siblings), ascending. Never empty.
    pub pus: Vec<u32>,
}

/// A NUMA node with at least one usable CPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NumaNode {
    /// OS index (`nodeN`).
    pub os_index: u32,
    /// Indices into [`Topology::cores`], in core order.
    pub cores: Vec<usize>,
    /// Its logical CPUs, ascending.
    pub pus: Vec<u32>,
}

/// A package (socket) with at least one usable CPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Package {
    /// OS index (`physical_package_id`).
    pub os_index: u32,
    /// Indices into [`Topology::cores`], in core order.
    pub cores: Vec<usize>,
}

/// The machine, restricted to the CPUs we may run on.
///
/// Invariants (checked by [`Topology::from_parts`]): at least one core; every PU belongs to
/// exactly one core; cores are ordered by their lowest PU; each core lies in one package and
/// one NUMA node; packages and NUMA nodes are ordered by OS index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    backend: Backend,
    cores: Vec<Core>,
    packages: Vec<Package>,
    numa_nodes: Vec<NumaNode>,
    caches: Vec<CacheInfo>,
    l2_bytes: Option<u64>,
    l3_bytes: Option<u64>,
}

impl Topology {
    /// The topology of this machine, restricted to this thread's affinity mask.
    ///
    /// Tries hwloc first (when built with the `hwloc` feature) and falls back to sysfs if hwloc
    /// fails. Call it before pinning anything: a pinned thread's mask holds a single CPU.
    pub fn detect() -> Result<Topology, Error> {
        let full = Self::detect_unrestricted()?;
        full.restrict(&crate::affinity::current_cpus()?)
    }

    /// The whole machine (all online CPUs), hwloc first, then sysfs.
    pub fn detect_unrestricted() -> Result<Topology, Error> {
        #[cfg(feature = "hwloc")]
        {
            if let Ok(t) = Self::from_hwloc() {
                return Ok(t);
            }
        }
        Self::from_sysfs(std::path::Path::new(crate::sysfs::DEFAULT_ROOT))
    }

    /// The whole machine from hwloc.
    #[cfg(feature = "hwloc")]
    pub fn from_hwloc() -> Result<Topology, Error> {
        let (pus, caches) = crate::hwloc::read_machine()?;
        Self::from_parts(Backend::Hwloc, pus, caches)
    }

    /// The whole machine (online CPUs) from a sysfs tree rooted at `root`
    /// (normally `/sys/devices/system`, see [`crate::sysfs::DEFAULT_ROOT`]).
    pub fn from_sysfs(root: &std::path::Path) -> Result<Topology, Error> {
        let (pus, caches) = crate::sysfs::read_machine(root)?;
        Self::from_parts(Backend::Sysfs, pus, caches)
    }

    /// Groups per-PU records into cores, packages and NUMA nodes.
    pub fn from_parts(
        backend: Backend,
        pus: Vec<PuInfo>,
        caches: Vec<CacheInfo>,
    ) -> Result<Topology, Error> {
        let mut seen = BTreeSet::new();
        for p in &pus {
            if !seen.insert(p.cpu) {
                return Err(Error::InvalidTopology(format!(
                    "cpu {} listed twice",
                    p.cpu
                )));
            }
        }
        // core_key -> PUs
        let mut by_core: BTreeMap<u32, Vec<PuInfo>> = BTreeMap::new();
        for p in pus {
            by_core.entry(p.core_key).or_default().push(p);
        }
        let mut cores: Vec<Core> = Vec::with_capacity(by_core.len());
        for (key, mut members) in by_core {
            members.sort_by_key(|p| p.cpu);
            let first = members[0];
            if let Some(odd) = members
                .iter()
                .find(|p| p.package != first.package || p.numa_node != first.numa_node)
            {
                return Err(Error::InvalidTopology(format!(
                    "core {key}: cpu {} and cpu {} disagree on package/NUMA node",
                    first.cpu, odd.cpu
                )));
            }
            cores.push(Core {
                package: first.package,
                core_id: first.core_id,
                numa_node: first.numa_node,
                pus: members.iter().map(|p| p.cpu).collect(),
            });
        }
        if cores.is_empty() {
            return Err(Error::InvalidTopology("no CPUs".into()));
        }
        cores.sort_by_key(|c| c.pus[0]);

        let mut packages: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        let mut nodes: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for (i, c) in cores.iter().enumerate() {
            packages.entry(c.package).or_default().push(i);
            nodes.entry(c.numa_node).or_default().push(i);
        }
        let packages = packages
            .into_iter()
            .map(|(os_index, cores)| Package { os_index, cores })
            .collect();
        let numa_nodes = nodes
            .into_iter()
            .map(|(os_index, idx)| {
                let mut pus: Vec<u32> = idx.iter().flat_map(|&i| cores[i].pus.clone()).collect();
                pus.sort_unstable();
                NumaNode {
                    os_index,
                    cores: idx,
                    pus,
                }
            })
            .collect();

        let first_cpu = cores[0].pus[0];
        let cache_of = |level: u8| {
            caches
                .iter()
                .find(|c| c.level == level && c.cpus.contains(&first_cpu))
                .map(|c| c.bytes)
        };
        let (l2_bytes, l3_bytes) = (cache_of(2), cache_of(3));
        Ok(Topology {
            backend,
            cores,
            packages,
            numa_nodes,
            caches,
            l2_bytes,
            l3_bytes,
        })
    }

    /// The same machine with only the CPUs in `allowed` (e.g. the affinity mask). Cores,
    /// packages and NUMA nodes left without CPUs disappear.
    pub fn restrict(&self, allowed: &[u32]) -> Result<Topology, Error> {
        let allowed: BTreeSet<u32> = allowed.iter().copied().collect();
        let pus: Vec<PuInfo> = self
            .pu_infos()
            .into_iter()
            .filter(|p| allowed.contains(&p.cpu))
            .collect();
        if pus.is_empty() {
            return Err(Error::NoUsableCpus {
                allowed: crate::cpulist::format(&allowed.into_iter().collect::<Vec<_>>()),
                machine: crate::cpulist::format(&self.pus()),
            });
        }
        Self::from_parts(self.backend, pus, self.caches.clone())
    }

    fn pu_infos(&self) -> Vec<PuInfo> {
        self.cores
            .iter()
            .enumerate()
            .flat_map(|(i, c)| {
                c.pus.iter().map(move |&cpu| PuInfo {
                    cpu,
                    package: c.package,
                    core_key: i as u32,
                    core_id: c.core_id,
                    numa_node: c.numa_node,
                })
            })
            .collect()
    }

    /// A synthetic machine numbered the way Linux numbers x86 servers: CPUs `0..cores` are the
    /// first hardware thread of each core (package by package, NUMA node by NUMA node), then
    /// `cores..2*cores` the second threads, and so on. Dual-socket Xeon with SMT, 2 NUMA
    /// nodes, 8 cores each: node 0 holds CPUs 0-7 and 16-23, core 0 is CPUs {0, 16}.
    ///
    /// Every count must be at least 1.
    pub fn synthetic(spec: Synthetic) -> Result<Topology, Error> {
        let Synthetic {
            packages,
            numa_per_package,
            cores_per_numa,
            threads_per_core,
            l2_bytes,
            l3_bytes,
        } = spec;
        if packages == 0 || numa_per_package == 0 || cores_per_numa == 0 || threads_per_core == 0 {
            return Err(Error::InvalidTopology(
                "synthetic: every count must be ≥ 1".into(),
            ));
        }
        let total_cores = packages * numa_per_package * cores_per_numa;
        let mut pus = Vec::new();
        let mut caches = Vec::new();
        for core in 0..total_cores {
            let node = core / cores_per_numa;
            let package = node / numa_per_package;
            let cpus: Vec<u32> = (0..threads_per_core)
                .map(|t| t * total_cores + core)
                .collect();
            for &cpu in &cpus {
                pus.push(PuInfo {
                    cpu,
                    package,
                    core_key: core,
                    core_id: core % (numa_per_package * cores_per_numa),
                    numa_node: node,
                });
            }
            if let Some(b) = l2_bytes {
                caches.push(CacheInfo {
                    level: 2,
                    bytes: b,
                    cpus,
                });
            }
        }
        if let Some(b) = l3_bytes {
            for package in 0..packages {
                let cpus = pus
                    .iter()
                    .filter(|p| p.package == package)
                    .map(|p| p.cpu)
                    .collect();
                caches.push(CacheInfo {
                    level: 3,
                    bytes: b,
                    cpus,
                });
            }
        }
        Self::from_parts(Backend::Synthetic, pus, caches)
    }

    /// Where this topology came from.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Physical cores, ordered by their lowest logical CPU.
    pub fn cores(&self) -> &[Core] {
        &self.cores
    }

    /// Packages (sockets), by OS index.
    pub fn packages(&self) -> &[Package] {
        &self.packages
    }

    /// NUMA nodes with usable CPUs, by OS index.
    pub fn numa_nodes(&self) -> &[NumaNode] {
        &self.numa_nodes
    }

    /// All logical CPUs, ascending.
    pub fn pus(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self.cores.iter().flat_map(|c| c.pus.clone()).collect();
        v.sort_unstable();
        v
    }

    /// Number of logical CPUs.
    pub fn pu_count(&self) -> usize {
        self.cores.iter().map(|c| c.pus.len()).sum()
    }

    /// Whether any core has more than one usable hardware thread.
    pub fn smt(&self) -> bool {
        self.cores.iter().any(|c| c.pus.len() > 1)
    }

    /// The index (into [`Topology::cores`]) of the core holding `cpu`.
    pub fn core_of(&self, cpu: u32) -> Option<usize> {
        self.cores.iter().position(|c| c.pus.contains(&cpu))
    }

    /// Size in bytes of the L2 instance serving the first CPU, if known.
    pub fn l2_bytes(&self) -> Option<u64> {
        self.l2_bytes
    }

    /// Size in bytes of the L3 instance serving the first CPU, if known.
    pub fn l3_bytes(&self) -> Option<u64> {
        self.l3_bytes
    }

    /// The NUMA node the plan puts its network ring(s) and shards on: the one with the most
    /// usable physical cores, the lowest OS index on a tie (usually node 0, where the OS boots).
    pub fn home_node(&self) -> &NumaNode {
        self.numa_nodes
            .iter()
            .max_by(|a, b| {
                a.cores
                    .len()
                    .cmp(&b.cores.len())
                    .then(b.os_index.cmp(&a.os_index))
            })
            .expect("a topology has at least one core, hence one NUMA node")
    }
}

/// Shape of a [`Topology::synthetic`] machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Synthetic {
    pub packages: u32,
    pub numa_per_package: u32,
    pub cores_per_numa: u32,
    pub threads_per_core: u32,
    pub l2_bytes: Option<u64>,
    pub l3_bytes: Option<u64>,
}

impl Synthetic {
    /// One package, one NUMA node, `cores` cores, no SMT, 1 MiB L2, 32 MiB L3.
    pub fn flat(cores: u32) -> Synthetic {
        Synthetic {
            packages: 1,
            numa_per_package: 1,
            cores_per_numa: cores,
            threads_per_core: 1,
            l2_bytes: Some(1 << 20),
            l3_bytes: Some(32 << 20),
        }
    }

    /// The design point: a 4-core Xeon, no SMT, one NUMA node.
    pub fn xeon4() -> Synthetic {
        Synthetic {
            l3_bytes: Some(8 << 20),
            ..Synthetic::flat(4)
        }
    }

    /// Two sockets × `cores` cores with 2-way SMT, one NUMA node per socket.
    pub fn dual_socket_smt(cores: u32) -> Synthetic {
        Synthetic {
            packages: 2,
            numa_per_package: 1,
            cores_per_numa: cores,
            threads_per_core: 2,
            l2_bytes: Some(2 << 20),
            l3_bytes: Some(30 << 20),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthetic_dual_socket_numbering() {
        let t = Topology::synthetic(Synthetic::dual_socket_smt(8)).unwrap();
        assert_eq!(t.cores().len(), 16);
        assert_eq!(t.pu_count(), 32);
        assert_eq!(t.packages().len(), 2);
        assert_eq!(t.numa_nodes().len(), 2);
        assert_eq!(t.cores()[0].pus, vec![0, 16]);
        assert_eq!(t.cores()[9].pus, vec![9, 25]);
        assert_eq!(
            t.numa_nodes()[0].pus,
            (0..8).chain(16..24).collect::<Vec<_>>()
        );
        assert!(t.smt());
        assert_eq!(t.l2_bytes(), Some(2 << 20));
        assert_eq!(t.home_node().os_index, 0);
    }

    #[test]
    fn restrict_drops_empty_cores_and_nodes() {
        let t = Topology::synthetic(Synthetic::dual_socket_smt(2)).unwrap();
        // node 0 = cpus 0,1,4,5 ; node 1 = 2,3,6,7
        let r = t.restrict(&[1, 2, 3, 6, 7, 99]).unwrap();
        assert_eq!(r.cores().len(), 3);
        assert_eq!(r.cores()[0].pus, vec![1]);
        assert_eq!(r.numa_nodes().len(), 2);
        // node 1 has more usable cores: it becomes home
        assert_eq!(r.home_node().os_index, 1);
        assert!(matches!(t.restrict(&[42]), Err(Error::NoUsableCpus { .. })));
    }

    #[test]
    fn rejects_inconsistent_parts() {
        let p = |cpu, core_key, numa_node| PuInfo {
            cpu,
            package: 0,
            core_key,
            core_id: core_key,
            numa_node,
        };
        assert!(
            Topology::from_parts(Backend::Synthetic, vec![p(0, 0, 0), p(0, 1, 0)], vec![]).is_err()
        );
        assert!(
            Topology::from_parts(Backend::Synthetic, vec![p(0, 0, 0), p(1, 0, 1)], vec![]).is_err()
        );
        assert!(Topology::from_parts(Backend::Synthetic, vec![], vec![]).is_err());
        assert!(Topology::synthetic(Synthetic::flat(0)).is_err());
    }
}
