//! The calling thread's CPU affinity mask (`sched_getaffinity`, read through `core_affinity`).

use crate::Error;

/// The logical CPUs the calling thread may run on, ascending.
///
/// Read it before pinning: once a thread is pinned, its mask holds one CPU, and threads it
/// spawns inherit that.
pub fn current_cpus() -> Result<Vec<u32>, Error> {
    let ids = core_affinity::get_core_ids().ok_or(Error::AffinityUnavailable)?;
    let mut cpus: Vec<u32> = ids.into_iter().map(|c| c.id as u32).collect();
    cpus.sort_unstable();
    if cpus.is_empty() {
        return Err(Error::AffinityUnavailable);
    }
    Ok(cpus)
}
