//! Tests that read this machine: the two backends agree, detection respects the affinity
//! mask, and pinning works or fails with a typed error.

use std::collections::BTreeSet;
use std::path::Path;

use hw::{Error, Plan, Role, Topology};

fn sysfs() -> Topology {
    Topology::from_sysfs(Path::new(hw::sysfs::DEFAULT_ROOT)).expect("sysfs topology")
}

#[cfg(feature = "hwloc")]
#[test]
fn hwloc_and_sysfs_agree_on_this_machine() {
    let h = Topology::from_hwloc().expect("hwloc topology");
    let s = sysfs();
    assert_eq!(h.backend(), hw::Backend::Hwloc);
    assert_eq!(s.backend(), hw::Backend::Sysfs);
    assert_eq!(h.cores().len(), s.cores().len(), "physical cores");
    assert_eq!(h.pu_count(), s.pu_count(), "PUs");
    assert_eq!(h.numa_nodes().len(), s.numa_nodes().len(), "NUMA nodes");
    assert_eq!(h.packages().len(), s.packages().len(), "packages");
    // Same grouping, not only the same counts.
    let groups = |t: &Topology| t.cores().iter().map(|c| c.pus.clone()).collect::<Vec<_>>();
    assert_eq!(groups(&h), groups(&s), "SMT sibling groups");
    let nodes = |t: &Topology| {
        t.numa_nodes()
            .iter()
            .map(|n| (n.os_index, n.pus.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(nodes(&h), nodes(&s), "NUMA node CPUs");
    assert_eq!(h.l2_bytes(), s.l2_bytes(), "L2 size");
    assert_eq!(h.l3_bytes(), s.l3_bytes(), "L3 size");
}

#[test]
fn sysfs_sees_every_online_cpu() {
    let s = sysfs();
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    assert_eq!(s.pus(), hw::cpulist::parse(&online).unwrap());
    assert!(s.l2_bytes().is_some(), "this machine reports an L2");
    let expected = if cfg!(feature = "hwloc") {
        hw::Backend::Hwloc
    } else {
        hw::Backend::Sysfs
    };
    assert_eq!(Topology::detect().unwrap().backend(), expected);
}

#[test]
fn detect_keeps_only_cpus_in_the_affinity_mask() {
    let mask = hw::affinity::current_cpus().unwrap();
    let t = Topology::detect().unwrap();
    assert_eq!(t.pus(), mask);
    let plan = Plan::for_rm(&t);
    for a in plan.assignments() {
        assert!(mask.contains(&a.cpu), "{a:?} outside the mask {mask:?}");
    }
    let j = hw::report_json(&t, &plan);
    assert_eq!(j["pus"], mask.len());
}

#[test]
fn pins_to_every_allowed_cpu_and_names_the_thread() {
    let mask = hw::affinity::current_cpus().unwrap();
    for &cpu in &mask {
        let t = hw::spawn_pinned(Role::NetRing(0), cpu, move || {
            let name = std::fs::read_to_string("/proc/thread-self/comm").unwrap();
            let mask = hw::affinity::current_cpus().unwrap();
            (hw::current_cpu().unwrap(), name.trim().to_string(), mask)
        })
        .unwrap();
        assert_eq!(t.thread().name(), Some(format!("hp-ring0-{cpu}").as_str()));
        assert_eq!(t.cpu(), cpu);
        let (on, comm, inner_mask) = t.join().unwrap();
        assert_eq!(on, cpu);
        assert_eq!(comm, format!("hp-ring0-{cpu}"), "the kernel sees the name");
        assert_eq!(inner_mask, vec![cpu]);
    }
}

#[test]
fn refused_cpu_is_a_typed_error_and_the_body_never_runs() {
    let mask: BTreeSet<u32> = hw::affinity::current_cpus().unwrap().into_iter().collect();
    // A CPU that exists in no mask: past every online CPU.
    let bogus = mask.iter().max().unwrap() + 1000;
    let ran = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let ran2 = ran.clone();
    let err = hw::spawn_pinned(Role::DispatcherShard(0), bogus, move || {
        ran2.store(true, std::sync::atomic::Ordering::SeqCst)
    })
    .unwrap_err();
    match &err {
        Error::PinRefused { cpu, source } => {
            assert_eq!(*cpu, bogus);
            assert_eq!(source.raw_os_error(), Some(libc::EINVAL), "{err}");
        }
        other => panic!("expected PinRefused, got {other:?}"),
    }
    assert!(!ran.load(std::sync::atomic::Ordering::SeqCst));
    assert!(err.to_string().contains(&format!("cpu {bogus}")));

    // Beyond CPU_SETSIZE: refused before reaching the kernel, no panic.
    let err = std::thread::spawn(|| hw::pin_current_thread(1 << 20))
        .join()
        .unwrap()
        .unwrap_err();
    assert!(
        matches!(err, Error::PinRefused { cpu, .. } if cpu == 1 << 20),
        "{err:?}"
    );
}

#[test]
fn pin_policy_fails_or_runs_unpinned() {
    // Required: the refusal comes back as the error.
    let err = std::thread::spawn(|| hw::PinPolicy::Required.pin_current_thread(1 << 20))
        .join()
        .unwrap()
        .unwrap_err();
    assert!(matches!(err, Error::PinRefused { .. }), "{err:?}");
    // BestEffort: warned, `false`, and the thread keeps its whole mask.
    let (pinned, mask) = std::thread::spawn(|| {
        let before = hw::affinity::current_cpus().unwrap();
        let pinned = hw::PinPolicy::BestEffort
            .pin_current_thread(1 << 20)
            .unwrap();
        (pinned, (before, hw::affinity::current_cpus().unwrap()))
    })
    .join()
    .unwrap();
    assert!(!pinned);
    assert_eq!(mask.0, mask.1);
    // A CPU we may run on is pinned under either policy.
    let cpu = hw::affinity::current_cpus().unwrap()[0];
    for policy in [hw::PinPolicy::Required, hw::PinPolicy::BestEffort] {
        let ok = std::thread::spawn(move || policy.pin_current_thread(cpu))
            .join()
            .unwrap()
            .unwrap();
        assert!(ok, "{policy:?}");
    }
}
