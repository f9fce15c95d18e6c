//! The hwloc backend (cargo feature `hwloc`): the system libhwloc through the `hwloc2` crate.
//!
//! Two hwloc2 traps are avoided here (see `/work/shared/crate-notes.md`):
//! `objects_with_type(NUMANode)` panics in hwloc2 2.2.0 (it maps NUMA's virtual depth to the
//! bridge depth), so each PU's NUMA node comes from that PU's own nodeset instead; and hwloc's
//! memory sizes are wrong on machines with hot-plugged memory, so none are read.

use hwloc2::{ObjectType, TopologyObject};

use crate::topology::{CacheInfo, PuInfo};
use crate::Error;

/// Walks up from `obj` to the nearest ancestor of the given kind.
fn ancestor(obj: &TopologyObject, want: fn(&ObjectType) -> bool) -> Option<&TopologyObject> {
    let mut cur = obj.parent();
    while let Some(o) = cur {
        if want(&o.object_type()) {
            return Some(o);
        }
        cur = o.parent();
    }
    None
}

/// Reads every PU hwloc knows (hwloc already leaves out CPUs the cgroup forbids) and the
/// L2/L3 instances.
pub fn read_machine() -> Result<(Vec<PuInfo>, Vec<CacheInfo>), Error> {
    let topo =
        hwloc2::Topology::new().ok_or_else(|| Error::Hwloc("topology init/load failed".into()))?;
    let pu_objs = topo
        .objects_with_type(&ObjectType::PU)
        .map_err(|e| Error::Hwloc(format!("no PU level: {e:?}")))?;
    let mut pus = Vec::with_capacity(pu_objs.len());
    for pu in pu_objs {
        let cpu = pu.os_index();
        let core = ancestor(pu, |t| matches!(t, ObjectType::Core));
        let package = ancestor(pu, |t| matches!(t, ObjectType::Package));
        // A machine without Core objects: every PU is its own core. The key space of real
        // cores (logical index) and of lone PUs (cpu + 2^31) cannot collide.
        let (core_key, core_id) = match core {
            Some(c) => (c.logical_index(), c.os_index()),
            None => (cpu | 1 << 31, cpu),
        };
        let numa_node = pu
            .nodeset()
            .map(|set| set.first())
            .filter(|&first| first >= 0)
            .unwrap_or(0) as u32;
        pus.push(PuInfo {
            cpu,
            package: package.map(|p| p.os_index()).unwrap_or(0),
            core_key,
            core_id,
            numa_node,
        });
    }
    let mut caches = Vec::new();
    for (level, kind) in [(2u8, ObjectType::L2Cache), (3, ObjectType::L3Cache)] {
        // No such level (or levels at several depths): just no size for it.
        let Ok(objs) = topo.objects_with_type(&kind) else {
            continue;
        };
        for o in objs {
            let (Some(attr), Some(set)) = (o.cache_attributes(), o.cpuset()) else {
                continue;
            };
            caches.push(CacheInfo {
                level,
                bytes: attr.size(),
                cpus: set.into_iter().collect(),
            });
        }
    }
    Ok((pus, caches))
}
