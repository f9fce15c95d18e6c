//! The sysfs backend on fake trees: a dual-socket SMT machine with two NUMA nodes, a kernel
//! without NUMA, and corrupt files.

use std::fs;
use std::path::{Path, PathBuf};

use hw::{Error, Topology};

/// A directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);
impl TempDir {
    fn new(tag: &str) -> TempDir {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let p = std::env::temp_dir().join(format!(
            "hw-test-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn put(root: &Path, rel: &str, content: &str) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, content).unwrap();
}

/// 2 packages × 2 cores × 2 threads, Linux x86 numbering: core c has CPUs {c, c+4}.
fn dual_socket(root: &Path, numa: bool) {
    put(root, "cpu/online", "0-7\n");
    for cpu in 0..8u32 {
        let core = cpu % 4;
        let pkg = core / 2;
        let d = format!("cpu/cpu{cpu}");
        put(
            root,
            &format!("{d}/topology/core_id"),
            &format!("{}\n", core % 2),
        );
        put(
            root,
            &format!("{d}/topology/physical_package_id"),
            &format!("{pkg}\n"),
        );
        put(
            root,
            &format!("{d}/topology/thread_siblings_list"),
            &format!("{},{}\n", core, core + 4),
        );
        let c = format!("{d}/cache");
        put(root, &format!("{c}/index0/level"), "1\n");
        put(root, &format!("{c}/index0/type"), "Data\n");
        put(root, &format!("{c}/index0/size"), "48K\n");
        put(
            root,
            &format!("{c}/index0/shared_cpu_list"),
            &format!("{},{}\n", core, core + 4),
        );
        put(root, &format!("{c}/index2/level"), "2\n");
        put(root, &format!("{c}/index2/type"), "Unified\n");
        put(root, &format!("{c}/index2/size"), "2048K\n");
        put(
            root,
            &format!("{c}/index2/shared_cpu_list"),
            &format!("{},{}\n", core, core + 4),
        );
        put(root, &format!("{c}/index3/level"), "3\n");
        put(root, &format!("{c}/index3/type"), "Unified\n");
        put(root, &format!("{c}/index3/size"), "30M\n");
        let l3 = if pkg == 0 { "0-1,4-5\n" } else { "2-3,6-7\n" };
        put(root, &format!("{c}/index3/shared_cpu_list"), l3);
    }
    if numa {
        put(root, "node/node0/cpulist", "0-1,4-5\n");
        put(root, "node/node1/cpulist", "2-3,6-7\n");
        put(root, "node/online", "0-1\n"); // not a nodeN directory: ignored
    }
}

#[test]
fn reads_a_dual_socket_smt_tree() {
    let d = TempDir::new("dual");
    dual_socket(&d.0, true);
    let t = Topology::from_sysfs(&d.0).unwrap();
    assert_eq!(t.backend(), hw::Backend::Sysfs);
    assert_eq!(t.packages().len(), 2);
    assert_eq!(t.cores().len(), 4);
    assert_eq!(t.pu_count(), 8);
    assert!(t.smt());
    let groups: Vec<Vec<u32>> = t.cores().iter().map(|c| c.pus.clone()).collect();
    assert_eq!(groups, vec![vec![0, 4], vec![1, 5], vec![2, 6], vec![3, 7]]);
    assert_eq!(t.numa_nodes().len(), 2);
    assert_eq!(t.numa_nodes()[1].pus, vec![2, 3, 6, 7]);
    assert_eq!(t.cores()[3].package, 1);
    assert_eq!(t.cores()[3].core_id, 1);
    assert_eq!(t.l2_bytes(), Some(2 << 20));
    assert_eq!(t.l3_bytes(), Some(30 << 20));
    // Restricted to node 1 the caches are those serving node 1's first CPU.
    let r = t.restrict(&[2, 3]).unwrap();
    assert_eq!(r.cores().len(), 2);
    assert!(!r.smt());
    assert_eq!(r.numa_nodes().len(), 1);
    assert_eq!(r.home_node().os_index, 1);
}

#[test]
fn no_node_directory_means_one_node() {
    let d = TempDir::new("nonuma");
    dual_socket(&d.0, false);
    let t = Topology::from_sysfs(&d.0).unwrap();
    assert_eq!(t.numa_nodes().len(), 1);
    assert_eq!(t.numa_nodes()[0].pus, (0..8).collect::<Vec<u32>>());
}

#[test]
fn offline_cpus_are_skipped() {
    let d = TempDir::new("offline");
    dual_socket(&d.0, true);
    put(&d.0, "cpu/online", "0-2,4-6\n");
    // An offline CPU has no topology directory.
    fs::remove_dir_all(d.0.join("cpu/cpu7/topology")).unwrap();
    let t = Topology::from_sysfs(&d.0).unwrap();
    assert_eq!(t.pu_count(), 6);
    assert_eq!(t.cores().len(), 3);
}

#[test]
fn corrupt_files_are_typed_errors_naming_the_file() {
    let d = TempDir::new("corrupt");
    dual_socket(&d.0, true);
    put(&d.0, "cpu/cpu3/topology/thread_siblings_list", "3-1\n");
    match Topology::from_sysfs(&d.0) {
        Err(Error::SysfsParse { path, value }) => {
            assert!(
                path.ends_with("cpu3/topology/thread_siblings_list"),
                "{path:?}"
            );
            assert_eq!(value, "3-1");
        }
        other => panic!("expected SysfsParse, got {other:?}"),
    }

    let d = TempDir::new("corrupt2");
    dual_socket(&d.0, true);
    put(&d.0, "cpu/cpu0/cache/index2/size", "lots\n");
    assert!(matches!(
        Topology::from_sysfs(&d.0),
        Err(Error::SysfsParse { .. })
    ));

    let d = TempDir::new("missing");
    dual_socket(&d.0, true);
    fs::remove_file(d.0.join("cpu/cpu5/topology/core_id")).unwrap();
    let err = Topology::from_sysfs(&d.0).unwrap_err();
    assert!(matches!(err, Error::Sysfs { .. }), "{err:?}");
    assert!(err.to_string().contains("cpu5/topology/core_id"), "{err}");

    // Two cores claiming one CPU cannot form a topology.
    let d = TempDir::new("split");
    dual_socket(&d.0, true);
    put(&d.0, "node/node1/cpulist", "2-3,6\n");
    put(&d.0, "node/node0/cpulist", "0-1,4-5,7\n");
    let err = Topology::from_sysfs(&d.0).unwrap_err();
    assert!(matches!(err, Error::InvalidTopology(_)), "{err:?}");
}
