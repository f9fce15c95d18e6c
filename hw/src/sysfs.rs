//! The sysfs backend: `cpu/online`, `cpu/cpuN/topology/{core_id,physical_package_id,
//! thread_siblings_list}`, `cpu/cpuN/cache/index*/{level,size,type,shared_cpu_list}` and
//! `node/nodeN/cpulist`, all under a root that tests can point at a fake tree.

use std::fs;
use std::path::{Path, PathBuf};

use crate::topology::{CacheInfo, PuInfo};
use crate::{cpulist, Error};

/// Where the kernel puts the files this backend reads.
pub const DEFAULT_ROOT: &str = "/sys/devices/system";

/// Largest file we read; sysfs topology files are a few bytes to a few KB.
const MAX_FILE: u64 = 64 * 1024;

fn read(path: &Path) -> Result<String, Error> {
    use std::io::Read;
    let f = fs::File::open(path).map_err(|source| Error::Sysfs {
        path: path.to_owned(),
        source,
    })?;
    let mut s = String::new();
    f.take(MAX_FILE)
        .read_to_string(&mut s)
        .map_err(|source| Error::Sysfs {
            path: path.to_owned(),
            source,
        })?;
    Ok(s)
}

fn bad(path: &Path, value: &str) -> Error {
    Error::SysfsParse {
        path: path.to_owned(),
        value: value.trim().chars().take(80).collect(),
    }
}

fn read_list(path: &Path) -> Result<Vec<u32>, Error> {
    let s = read(path)?;
    cpulist::parse(&s).ok_or_else(|| bad(path, &s))
}

fn read_i64(path: &Path) -> Result<i64, Error> {
    let s = read(path)?;
    s.trim().parse().map_err(|_| bad(path, &s))
}

/// Parses a sysfs cache size (`48K`, `1024K`, `32M`, or plain bytes).
fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, mult) = match s.as_bytes().last()? {
        b'K' | b'k' => (&s[..s.len() - 1], 1u64 << 10),
        b'M' | b'm' => (&s[..s.len() - 1], 1 << 20),
        b'G' | b'g' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<u64>().ok()?.checked_mul(mult)
}

/// Reads every online CPU and the cache instances they see.
pub fn read_machine(root: &Path) -> Result<(Vec<PuInfo>, Vec<CacheInfo>), Error> {
    let cpu_dir = root.join("cpu");
    let online = read_list(&cpu_dir.join("online"))?;
    let numa = read_numa(root, &online)?;

    let mut pus = Vec::with_capacity(online.len());
    let mut caches: Vec<CacheInfo> = Vec::new();
    for &cpu in &online {
        let dir = cpu_dir.join(format!("cpu{cpu}"));
        let topo = dir.join("topology");
        let siblings_path = topo.join("thread_siblings_list");
        let siblings = read_list(&siblings_path)?;
        let core_key = *siblings
            .first()
            .ok_or_else(|| bad(&siblings_path, "(empty)"))?;
        // physical_package_id and core_id read -1 on some virtual machines: treat as 0.
        let package = read_i64(&topo.join("physical_package_id"))?.max(0) as u32;
        let core_id = read_i64(&topo.join("core_id"))?.max(0) as u32;
        let numa_node = numa
            .iter()
            .find(|(_, cpus)| cpus.contains(&cpu))
            .map(|(n, _)| *n)
            .unwrap_or(0);
        pus.push(PuInfo {
            cpu,
            package,
            core_key,
            core_id,
            numa_node,
        });
        read_caches(&dir.join("cache"), &mut caches)?;
    }
    Ok((pus, caches))
}

/// `node/nodeN/cpulist` for every node directory. Without a `node` directory (a kernel built
/// without NUMA) every online CPU is in node 0.
fn read_numa(root: &Path, online: &[u32]) -> Result<Vec<(u32, Vec<u32>)>, Error> {
    let node_dir = root.join("node");
    let entries = match fs::read_dir(&node_dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(vec![(0, online.to_vec())])
        }
        Err(source) => {
            return Err(Error::Sysfs {
                path: node_dir,
                source,
            })
        }
    };
    let mut nodes = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| Error::Sysfs {
            path: node_dir.clone(),
            source,
        })?;
        let name = entry.file_name();
        let Some(idx) = name
            .to_str()
            .and_then(|n| n.strip_prefix("node"))
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        nodes.push((idx, read_list(&entry.path().join("cpulist"))?));
    }
    nodes.sort();
    if nodes.is_empty() {
        nodes.push((0, online.to_vec()));
    }
    Ok(nodes)
}

/// Adds the L2 and L3 instances of one CPU's `cache/index*` (deduplicated by the CPUs that
/// share them). A CPU without a cache directory (some VMs) adds nothing.
fn read_caches(cache_dir: &Path, out: &mut Vec<CacheInfo>) -> Result<(), Error> {
    let Ok(entries) = fs::read_dir(cache_dir) else {
        return Ok(());
    };
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("index"))
        })
        .collect();
    dirs.sort();
    for d in dirs {
        let level_path = d.join("level");
        let level = read_i64(&level_path)?;
        if level != 2 && level != 3 {
            continue;
        }
        if read(&d.join("type"))?.trim() == "Instruction" {
            continue;
        }
        let size_path = d.join("size");
        let size = read(&size_path)?;
        let bytes = parse_size(&size).ok_or_else(|| bad(&size_path, &size))?;
        let cpus = read_list(&d.join("shared_cpu_list"))?;
        let info = CacheInfo {
            level: level as u8,
            bytes,
            cpus,
        };
        if !out.contains(&info) {
            out.push(info);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("48K\n"), Some(48 << 10));
        assert_eq!(parse_size("32M"), Some(32 << 20));
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("K"), None);
        assert_eq!(parse_size("99999999999999999999G"), None);
        assert_eq!(parse_size(""), None);
    }
}
