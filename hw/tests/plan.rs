//! The core plan on synthetic topologies: the named machines of the design (1, 2, 4, 8 cores,
//! 2 × 8 with SMT) with their exact plans, and the plan's rules over random topologies.
//! Nothing here touches the machine.

use std::collections::{BTreeMap, BTreeSet};

use hw::{plan, Backend, Plan, PuInfo, Role, Synthetic, Topology};
use proptest::prelude::*;

use Role::{DispatcherShard as Shard, HdfsReader as Hdfs, Housekeeping as Hk, NetRing as Ring};

fn pairs(p: &Plan) -> Vec<(Role, u32)> {
    p.assignments().iter().map(|a| (a.role, a.cpu)).collect()
}

fn flat(cores: u32) -> Topology {
    Topology::synthetic(Synthetic::flat(cores)).unwrap()
}

#[test]
fn design_point_xeon4() {
    let t = Topology::synthetic(Synthetic::xeon4()).unwrap();
    let agent = Plan::for_agent(&t);
    assert_eq!(pairs(&agent), vec![(Hk, 0), (Ring(0), 1), (Hdfs, 2)]);
    assert_eq!(agent.free_cpus(), &[3], "core 3 is left to containers");
    let rm = Plan::for_rm(&t);
    assert_eq!(
        pairs(&rm),
        vec![(Hk, 0), (Ring(0), 1), (Shard(0), 2), (Shard(1), 3)]
    );
    assert!(rm.free_cpus().is_empty());
    check_rules(&t, &hw::plan::agent_roles(&t), &agent);
    check_rules(&t, &hw::plan::rm_roles(&t), &rm);
}

#[test]
fn one_core_everything_on_cpu0() {
    let t = flat(1);
    assert_eq!(
        pairs(&Plan::for_agent(&t)),
        vec![(Hk, 0), (Ring(0), 0), (Hdfs, 0)]
    );
    assert_eq!(
        pairs(&Plan::for_rm(&t)),
        vec![(Hk, 0), (Ring(0), 0), (Shard(0), 0)]
    );
}

#[test]
fn two_cores_housekeeping_shares() {
    let t = flat(2);
    // The second hot role joins housekeeping on the OS core; the ring keeps core 1.
    assert_eq!(
        pairs(&Plan::for_agent(&t)),
        vec![(Hk, 0), (Ring(0), 1), (Hdfs, 0)]
    );
    assert_eq!(
        pairs(&Plan::for_rm(&t)),
        vec![(Hk, 0), (Ring(0), 1), (Shard(0), 0)]
    );
}

#[test]
fn three_cores_no_sharing() {
    let t = flat(3);
    assert_eq!(
        pairs(&Plan::for_agent(&t)),
        vec![(Hk, 0), (Ring(0), 1), (Hdfs, 2)]
    );
    assert_eq!(
        pairs(&Plan::for_rm(&t)),
        vec![(Hk, 0), (Ring(0), 1), (Shard(0), 2)]
    );
}

#[test]
fn eight_cores() {
    let t = flat(8);
    let agent = Plan::for_agent(&t);
    assert_eq!(pairs(&agent), vec![(Hk, 0), (Ring(0), 1), (Hdfs, 2)]);
    assert_eq!(agent.free_cpus(), &[3, 4, 5, 6, 7]);
    let rm = Plan::for_rm(&t);
    assert_eq!(
        pairs(&rm),
        vec![
            (Hk, 0),
            (Ring(0), 1),
            (Ring(1), 2),
            (Shard(0), 3),
            (Shard(1), 4),
            (Shard(2), 5),
            (Shard(3), 6),
            (Shard(4), 7)
        ]
    );
}

#[test]
fn dual_socket_8_cores_smt() {
    // node 0: cores {0,16} .. {7,23}; node 1: {8,24} .. {15,31}
    let t = Topology::synthetic(Synthetic::dual_socket_smt(8)).unwrap();
    let agent = Plan::for_agent(&t);
    assert_eq!(pairs(&agent), vec![(Hk, 0), (Ring(0), 1), (Hdfs, 2)]);
    let rm = Plan::for_rm(&t);
    assert_eq!(
        pairs(&rm),
        vec![
            (Hk, 0),
            (Ring(0), 1),
            (Ring(1), 2),
            (Shard(0), 3),
            (Shard(1), 4),
            (Shard(2), 5),
            (Shard(3), 6),
            (Shard(4), 7)
        ]
    );
    // No SMT sibling of a used core is handed out as free.
    assert_eq!(
        rm.free_cpus(),
        (8..16).chain(24..32).collect::<Vec<u32>>().as_slice()
    );
    check_rules(&t, &hw::plan::rm_roles(&t), &rm);
}

#[test]
fn dual_socket_overloaded_follows_sharing_order() {
    // 2 sockets × 2 cores × 2 threads: node 0 = {0,4} {1,5}, node 1 = {2,6} {3,7}.
    let t = Topology::synthetic(Synthetic::dual_socket_smt(2)).unwrap();
    let roles = [Hk, Ring(0), Shard(0), Shard(1), Shard(2), Shard(3), Hdfs];
    let p = plan(&t, &roles);
    assert_eq!(
        pairs(&p),
        vec![
            (Hk, 0),
            (Ring(0), 1),  // 1. a free core other than the OS core
            (Shard(0), 4), // 2. the OS core, the PU housekeeping does not use
            (Shard(1), 5), // 4. an idle SMT sibling of a hot core
            (Shard(2), 0), // 5. time-share: housekeeping's PU first
            (Shard(3), 4), // 5. then the least-loaded PU (a tie: home node's first core wins)
            (Hdfs, 2),     // may leave the home node: a free core on node 1
        ]
    );
    check_rules(&t, &roles, &p);
}

#[test]
fn without_housekeeping_the_os_core_is_last() {
    let t = flat(3);
    let p = plan(&t, &[Ring(0), Shard(0), Shard(1)]);
    assert_eq!(pairs(&p), vec![(Ring(0), 1), (Shard(0), 2), (Shard(1), 0)]);
}

#[test]
fn home_node_follows_the_affinity_mask() {
    // Only one core of node 0 is usable, all of node 1: rings and shards go to node 1,
    // housekeeping to node 1's first core.
    let t = Topology::synthetic(Synthetic::dual_socket_smt(4))
        .unwrap()
        .restrict(&[0, 4, 5, 6, 7])
        .unwrap();
    assert_eq!(t.home_node().os_index, 1);
    let rm = Plan::for_rm(&t);
    assert_eq!(rm.home_node(), 1);
    assert_eq!(
        pairs(&rm),
        vec![(Hk, 4), (Ring(0), 5), (Shard(0), 6), (Shard(1), 7)]
    );
    check_rules(&t, &hw::plan::rm_roles(&t), &rm);
}

#[test]
fn thread_names_fit_linux() {
    assert_eq!(hw::thread_name(&Ring(0), 1), "hp-ring0-1");
    assert_eq!(hw::thread_name(&Shard(1), 3), "hp-shard1-3");
    assert_eq!(hw::thread_name(&Hk, 0), "hp-hk-0");
    assert_eq!(hw::thread_name(&Hdfs, 2), "hp-hdfs-2");
    assert_eq!(hw::thread_name(&Shard(99), 9999), "hp-shard99-9999");
    let long = hw::thread_name(&Shard(65535), 8191);
    assert!(long.len() <= hw::pin::MAX_THREAD_NAME, "{long}");
    assert!(long.ends_with("-8191"), "{long}");
}

#[test]
fn report_json_has_the_contract_keys() {
    let t = Topology::synthetic(Synthetic::xeon4()).unwrap();
    let rm = Plan::for_rm(&t);
    let v = hw::report_json(&t, &rm);
    assert_eq!(v["cores"], 4);
    assert_eq!(v["pus"], 4);
    assert_eq!(v["numa_nodes"], 1);
    assert_eq!(v["packages"], 1);
    assert_eq!(v["smt"], false);
    assert_eq!(v["backend"], "synthetic");
    assert_eq!(v["l3_bytes"], 8 << 20);
    assert_eq!(
        v["plan"],
        serde_json::json!([
            {"role": "housekeeping", "cpu": 0},
            {"role": "ring-0", "cpu": 1},
            {"role": "shard-0", "cpu": 2},
            {"role": "shard-1", "cpu": 3},
        ])
    );
    let text = hw::report_text(&t, &rm);
    assert!(text.contains("4 physical cores"), "{text}");
    assert!(
        text.contains("cpu 3    shard-1        thread hp-shard1-3"),
        "{text}"
    );
}

// ---------------------------------------------------------------- rules over random machines

/// The plan's rules (module docs of `hw::plan`), checked on a finished plan.
fn check_rules(t: &Topology, requested: &[Role], p: &Plan) {
    let want: BTreeSet<Role> = requested.iter().copied().collect();
    let got: Vec<Role> = p.assignments().iter().map(|a| a.role).collect();
    assert_eq!(got.len(), want.len(), "each role exactly once: {got:?}");
    assert_eq!(got.iter().copied().collect::<BTreeSet<_>>(), want);

    let pus: BTreeSet<u32> = t.pus().into_iter().collect();
    let home = t.home_node();
    assert_eq!(p.home_node(), home.os_index);
    let home_pus: BTreeSet<u32> = home.pus.iter().copied().collect();
    let home_cores: BTreeSet<usize> = home.cores.iter().copied().collect();
    let all_cores: BTreeSet<usize> = (0..t.cores().len()).collect();
    let os_core = home.cores[0];

    let mut hot_core: BTreeMap<usize, Vec<Role>> = BTreeMap::new();
    let mut hot_pu: BTreeMap<u32, u32> = BTreeMap::new();
    for a in p.assignments() {
        assert!(pus.contains(&a.cpu), "{a:?} on a CPU outside the topology");
        assert!(hw::thread_name(&a.role, a.cpu).len() <= 15);
        if a.role.numa_bound() {
            assert!(home_pus.contains(&a.cpu), "{a:?} left the home node");
        }
        if a.role == Hk {
            assert_eq!(
                a.cpu,
                t.cores()[os_core].pus[0],
                "housekeeping on the OS core"
            );
        }
        if a.role.is_hot() {
            hot_core
                .entry(t.core_of(a.cpu).unwrap())
                .or_default()
                .push(a.role);
            *hot_pu.entry(a.cpu).or_default() += 1;
        }
    }
    let region = |r: &Role| {
        if r.numa_bound() {
            &home_cores
        } else {
            &all_cores
        }
    };
    let has_hot = |c: &usize| hot_core.contains_key(c);

    for (core, roles) in &hot_core {
        // Two hot roles on one core (same PU or SMT siblings) only once their regions have no
        // core free of hot roles.
        if roles.len() >= 2 {
            for r in roles {
                assert!(
                    region(r).iter().all(has_hot),
                    "core {core} holds {roles:?} while a core of {r}'s region is free: {:?}",
                    p.assignments()
                );
            }
        }
        // Hot roles join housekeeping's core last.
        if *core == os_core {
            for r in roles {
                assert!(
                    region(r).iter().filter(|c| **c != os_core).all(has_hot),
                    "{r} on the OS core while another core is free: {:?}",
                    p.assignments()
                );
            }
        }
    }
    // Even spread: a PU takes a second hot role only when every PU of the region has one.
    for a in p.assignments().iter().filter(|a| a.role.is_hot()) {
        if hot_pu[&a.cpu] >= 2 {
            for c in region(&a.role) {
                for pu in &t.cores()[*c].pus {
                    assert!(
                        hot_pu.contains_key(pu),
                        "cpu {} has {} hot roles while cpu {pu} has none: {:?}",
                        a.cpu,
                        hot_pu[&a.cpu],
                        p.assignments()
                    );
                }
            }
        }
    }
    // Free CPUs: exactly the cores without any role.
    let used: BTreeSet<u32> = p.assignments().iter().map(|a| a.cpu).collect();
    let free: Vec<u32> = t
        .cores()
        .iter()
        .filter(|c| !c.pus.iter().any(|x| used.contains(x)))
        .flat_map(|c| c.pus.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(p.free_cpus(), free.as_slice());
}

/// A small deterministic generator for the shuffles inside one proptest case.
struct XorShift(u64);
impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[derive(Debug, Clone)]
struct Machine {
    packages: u32,
    nodes_per_package: u32,
    cores_per_node: u32,
    threads: u32,
    /// 0: Linux x86 (thread t of core c = t * cores + c); 1: siblings adjacent; 2: shuffled.
    numbering: u8,
    seed: u64,
    /// Keep each PU with this probability (in 1/8); at least one is always kept.
    keep_eighths: u8,
}

fn machine() -> impl Strategy<Value = Machine> {
    (
        1u32..=3,
        1u32..=2,
        1u32..=10,
        1u32..=4,
        0u8..=2,
        any::<u64>(),
        1u8..=8,
    )
        .prop_map(
            |(
                packages,
                nodes_per_package,
                cores_per_node,
                threads,
                numbering,
                seed,
                keep_eighths,
            )| {
                Machine {
                    packages,
                    nodes_per_package,
                    cores_per_node,
                    threads,
                    numbering,
                    seed: seed | 1,
                    keep_eighths,
                }
            },
        )
}

fn build(m: &Machine) -> Topology {
    let cores = m.packages * m.nodes_per_package * m.cores_per_node;
    let total = cores * m.threads;
    let mut rng = XorShift(m.seed);
    let mut perm: Vec<u32> = (0..total).collect();
    if m.numbering == 2 {
        for i in (1..perm.len()).rev() {
            perm.swap(i, (rng.next() % (i as u64 + 1)) as usize);
        }
    }
    let mut pus = Vec::new();
    for core in 0..cores {
        let node = core / m.cores_per_node;
        for thread in 0..m.threads {
            let cpu = match m.numbering {
                0 => thread * cores + core,
                _ => perm[(core * m.threads + thread) as usize],
            };
            pus.push(PuInfo {
                cpu,
                package: node / m.nodes_per_package,
                core_key: core,
                core_id: core,
                numa_node: node,
            });
        }
    }
    let full = Topology::from_parts(Backend::Synthetic, pus, vec![]).unwrap();
    let mut keep: Vec<u32> = full
        .pus()
        .into_iter()
        .filter(|_| (rng.next() % 8) < m.keep_eighths as u64)
        .collect();
    if keep.is_empty() {
        keep.push(full.pus()[(rng.next() % total as u64) as usize]);
    }
    full.restrict(&keep).unwrap()
}

fn roles() -> impl Strategy<Value = Vec<Role>> {
    (
        any::<bool>(),
        0u16..=5,
        0u16..=12,
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(hk, rings, shards, hdfs, reversed)| {
            let mut v = Vec::new();
            if hk {
                v.push(Hk);
            }
            v.extend((0..rings).map(Ring));
            v.extend((0..shards).map(Shard));
            if hdfs {
                v.push(Hdfs);
            }
            if reversed {
                v.reverse();
            }
            v
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn rules_hold_on_random_machines(m in machine(), roles in roles()) {
        let t = build(&m);
        let p = plan(&t, &roles);
        check_rules(&t, &roles, &p);

        // Pure and order-independent: the same plan for any order of the same request,
        // duplicates included.
        let mut shuffled = roles.clone();
        shuffled.reverse();
        shuffled.extend(roles.iter().copied());
        prop_assert_eq!(&plan(&t, &shuffled), &p);
    }

    #[test]
    fn presets_hold_on_random_machines(m in machine()) {
        let t = build(&m);
        let home_cores = t.home_node().cores.len();
        let os_core = t.home_node().cores[0];
        for (roles, p) in [
            (hw::plan::agent_roles(&t), Plan::for_agent(&t)),
            (hw::plan::rm_roles(&t), Plan::for_rm(&t)),
        ] {
            check_rules(&t, &roles, &p);
            let hot: Vec<usize> = p.assignments().iter()
                .filter(|a| a.role.is_hot())
                .map(|a| t.core_of(a.cpu).unwrap())
                .collect();
            if home_cores >= 3 {
                // Enough cores: every hot role alone on a core, none on the OS core.
                let distinct: BTreeSet<usize> = hot.iter().copied().collect();
                prop_assert_eq!(distinct.len(), hot.len());
                prop_assert!(!distinct.contains(&os_core));
            }
        }
        let rm_hot = hw::plan::rm_roles(&t).iter().filter(|r| r.is_hot()).count();
        prop_assert_eq!(rm_hot, if home_cores <= 3 { 2 } else { home_cores - 1 });
        if t.cores().len() >= 4 {
            prop_assert!(!Plan::for_agent(&t).free_cpus().is_empty(), "agent leaves a core to containers");
        }
    }
}
